//! A set of lock stripes (at most 64) as a bit mask, and the locks of such a set held in
//! stripe order.
//!
//! Why: a commit on the embedded store locks the stripes of its condition keys and counts itself
//! on the stripes of its written keys (`embedded_handle.rs`); sorted, distinct lists of stripe
//! numbers and lists of the guards cost four allocations per commit. A mask is sorted and
//! distinct by construction (bits are visited lowest first), and the held locks are the mask.

use parking_lot::Mutex;

/// Stripes a set can name: the bits of its mask.
pub(crate) const MAX_STRIPES: usize = 64;

/// A set of stripe numbers below [`MAX_STRIPES`].
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub(crate) struct StripeSet(u64);

impl StripeSet {
    /// The set of `stripes` (each below [`MAX_STRIPES`]).
    pub(crate) fn of(stripes: impl Iterator<Item = usize>) -> StripeSet {
        StripeSet(stripes.fold(0, |mask, i| {
            debug_assert!(i < MAX_STRIPES);
            mask | 1 << i
        }))
    }

    /// The stripes, lowest first.
    pub(crate) fn iter(self) -> impl Iterator<Item = usize> {
        let mut rest = self.0;
        std::iter::from_fn(move || {
            (rest != 0).then(|| {
                let i = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                i
            })
        })
    }
}

/// The mutexes of a set of stripes, locked lowest first (so two holders never wait on each
/// other); unlocked when this drops.
pub(crate) struct Held<'a> {
    locks: &'a [Mutex<()>],
    set: StripeSet,
}

impl<'a> Held<'a> {
    /// Locks the stripes of `set` among `locks` (indexed by stripe).
    pub(crate) fn lock(locks: &'a [Mutex<()>], set: StripeSet) -> Held<'a> {
        for i in set.iter() {
            // Unlocked in `drop` (the guard's only job).
            std::mem::forget(locks[i].lock());
        }
        Held { locks, set }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        for i in self.set.iter() {
            // SAFETY: `lock` locked stripe `i` for this value and forgot the guard; nothing
            // else unlocks it.
            unsafe { self.locks[i].force_unlock() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A set visits its stripes once each, lowest first; held stripes are locked until the
    /// holder drops, the others free.
    #[test]
    fn sets_are_sorted_and_distinct_and_held_until_dropped() {
        let set = StripeSet::of([63, 5, 0, 5, 17].into_iter());
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![0, 5, 17, 63]);
        assert_eq!(StripeSet::default().iter().count(), 0);
        let locks: Vec<Mutex<()>> = (0..MAX_STRIPES).map(|_| Mutex::new(())).collect();
        let held = Held::lock(&locks, set);
        assert!(locks[5].try_lock().is_none() && locks[63].try_lock().is_none());
        assert!(locks[6].try_lock().is_some());
        drop(held);
        assert!(set.iter().all(|i| locks[i].try_lock().is_some()));
    }
}
