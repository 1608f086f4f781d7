//! The hottest logical partitions by request units, per physical partition, in bounded memory:
//! a space-saving sketch of `HOT_SLOTS` entries. A key not in the sketch replaces the entry with
//! the least RU and inherits its count (so counts are upper bounds, exact for keys that stayed
//! in the sketch). Counts decay with a half-life of `HALF_LIFE_SECS`, so the view shows recent
//! consumption. Served as `system_views.hot_partitions`.

use crate::tokens::Token;
use parking_lot::Mutex;

/// Entries kept per physical partition.
pub const HOT_SLOTS: usize = 16;
/// Counts halve every this many seconds.
pub const HALF_LIFE_SECS: f64 = 60.0;

#[derive(Debug, Default)]
pub struct HotKeys {
    inner: Mutex<Sketch>,
}

#[derive(Debug, Default)]
struct Sketch {
    slots: Vec<Slot>,
    /// When the counts were last decayed (seconds since the epoch, fractional).
    decayed_at: f64,
}

#[derive(Debug, Clone)]
pub struct Slot {
    pub token: Token,
    pub pk: Vec<u8>,
    pub ru: f64,
}

fn now() -> f64 {
    super::ru::unix_now().as_secs_f64()
}

impl Sketch {
    fn decay(&mut self, now: f64) {
        let dt = now - self.decayed_at;
        if dt >= 1.0 {
            let f = 0.5f64.powf(dt / HALF_LIFE_SECS);
            for s in &mut self.slots {
                s.ru *= f;
            }
            self.decayed_at = now;
        }
    }

    fn record(&mut self, token: Token, pk: &[u8], ru: f64) {
        if let Some(s) = self
            .slots
            .iter_mut()
            .find(|s| s.token == token && s.pk == pk)
        {
            s.ru += ru;
            return;
        }
        if self.slots.len() < HOT_SLOTS {
            self.slots.push(Slot {
                token,
                pk: pk.to_vec(),
                ru,
            });
            return;
        }
        let Some(min) = self.slots.iter_mut().min_by(|a, b| a.ru.total_cmp(&b.ru)) else {
            return;
        };
        min.token = token;
        min.pk.clear();
        min.pk.extend_from_slice(pk);
        min.ru += ru;
    }
}

impl HotKeys {
    /// Counts `ru` consumed by the logical partition (token, partition key) at `now` (since
    /// the Unix epoch: callers read the clock once per request).
    pub fn record_at(&self, token: Token, pk: &[u8], ru: f64, now: std::time::Duration) {
        let mut s = self.inner.lock();
        s.decay(now.as_secs_f64());
        s.record(token, pk, ru);
    }

    /// The entries, hottest first.
    pub fn top(&self) -> Vec<Slot> {
        let mut s = self.inner.lock();
        s.decay(now());
        let mut v = s.slots.clone();
        v.sort_by(|a, b| b.ru.total_cmp(&a.ru));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key outside a full sketch takes the least-consumed slot and inherits its count.
    #[test]
    fn a_new_key_replaces_the_least_consumed_slot() {
        let mut s = Sketch::default();
        let rus = [
            5.0, 3.0, 9.0, 0.5, 7.0, 2.0, 8.0, 4.0, 6.0, 1.5, 3.5, 2.5, 9.5, 4.5, 6.5, 7.5,
        ];
        for (i, ru) in rus.iter().enumerate() {
            s.record(i as i64, b"k", *ru);
        }
        s.record(100, b"new", 2.0);
        assert_eq!(s.slots.len(), HOT_SLOTS);
        assert_eq!((s.slots[3].token, &s.slots[3].pk[..]), (100, &b"new"[..]));
        assert_eq!(s.slots[3].ru, 2.5);
        // Now slot 9 (1.5) is the least.
        s.record(101, b"newer", 1.0);
        assert_eq!((s.slots[9].token, s.slots[9].ru), (101, 2.5));
    }

    #[test]
    fn heavy_hitter_survives_many_light_keys() {
        let mut s = Sketch {
            decayed_at: 0.0,
            ..Default::default()
        };
        for i in 0..10_000i64 {
            s.record(i, &i.to_be_bytes(), 1.0);
            if i % 10 == 0 {
                s.record(-1, b"hot", 5.0);
            }
        }
        assert_eq!(s.slots.len(), HOT_SLOTS);
        let top = s.slots.iter().max_by(|a, b| a.ru.total_cmp(&b.ru)).unwrap();
        assert_eq!(top.pk, b"hot");
        assert!(top.ru >= 5000.0);
    }
}
