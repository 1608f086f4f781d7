//! Slowing down password guessing.
//!
//! Two rules. Per connection: after `MAX_FAILURES_PER_CONNECTION` failed logins the server
//! answers the last failure and closes the connection. Per peer IP: every login attempt waits
//! `delay` first, which grows with the IP's recent failures (none for the first
//! `FREE_FAILURES`, then doubling from `BASE_DELAY` up to `MAX_DELAY`); failures older than
//! `FAILURE_WINDOW` are forgotten, a successful login clears the IP. The wait comes before the
//! check, whatever its outcome, so a guesser gains nothing by giving up on slow answers. The
//! table holds at most `MAX_TRACKED_PEERS` IPs; when it is full the entry with the oldest last
//! failure goes. A peer is never locked out outright (users behind one NAT share an IP).

use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

pub const MAX_FAILURES_PER_CONNECTION: u32 = 3;
const FREE_FAILURES: u32 = 3;
const BASE_DELAY: Duration = Duration::from_millis(100);
const MAX_DELAY: Duration = Duration::from_secs(5);
const FAILURE_WINDOW: Duration = Duration::from_secs(60);
const MAX_TRACKED_PEERS: usize = 4096;

#[derive(Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
}

#[derive(Default)]
pub struct AuthGuard {
    peers: Mutex<HashMap<IpAddr, Failures>>,
}

impl AuthGuard {
    /// How long a login attempt from `ip` waits before it is checked.
    pub fn delay(&self, ip: IpAddr) -> Duration {
        let now = Instant::now();
        let count = match self.peers.lock().get(&ip) {
            Some(f) if now.duration_since(f.last) < FAILURE_WINDOW => f.count,
            _ => 0,
        };
        delay_after(count)
    }

    pub fn failed(&self, ip: IpAddr) {
        let now = Instant::now();
        let mut peers = self.peers.lock();
        if !peers.contains_key(&ip) && peers.len() >= MAX_TRACKED_PEERS {
            peers.retain(|_, f| now.duration_since(f.last) < FAILURE_WINDOW);
            if peers.len() >= MAX_TRACKED_PEERS {
                let oldest = peers.iter().min_by_key(|(_, f)| f.last).map(|(ip, _)| *ip);
                oldest.map(|o| peers.remove(&o));
            }
        }
        let f = peers.entry(ip).or_insert(Failures {
            count: 0,
            last: now,
        });
        if now.duration_since(f.last) >= FAILURE_WINDOW {
            f.count = 0;
        }
        f.count = f.count.saturating_add(1);
        f.last = now;
    }

    pub fn succeeded(&self, ip: IpAddr) {
        self.peers.lock().remove(&ip);
    }

    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.peers.lock().len()
    }
}

fn delay_after(failures: u32) -> Duration {
    if failures < FREE_FAILURES {
        return Duration::ZERO;
    }
    let doublings = (failures - FREE_FAILURES).min(16);
    (BASE_DELAY * 2u32.pow(doublings)).min(MAX_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_grows_with_failures_and_a_success_clears_it() {
        let g = AuthGuard::default();
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        for _ in 0..FREE_FAILURES {
            assert_eq!(g.delay(ip), Duration::ZERO);
            g.failed(ip);
        }
        assert_eq!(g.delay(ip), BASE_DELAY);
        g.failed(ip);
        assert_eq!(g.delay(ip), BASE_DELAY * 2);
        for _ in 0..40 {
            g.failed(ip);
        }
        assert_eq!(g.delay(ip), MAX_DELAY);
        // Another peer is not affected.
        assert_eq!(g.delay("10.0.0.2".parse().unwrap()), Duration::ZERO);
        g.succeeded(ip);
        assert_eq!(g.delay(ip), Duration::ZERO);
    }

    #[test]
    fn the_table_is_bounded() {
        let g = AuthGuard::default();
        for i in 0..(MAX_TRACKED_PEERS as u32 + 100) {
            g.failed(IpAddr::from(i.to_be_bytes()));
        }
        assert_eq!(g.tracked(), MAX_TRACKED_PEERS);
    }
}
