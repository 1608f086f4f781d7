//! One ordered scan over several stores' ordered scans (`store.rs`: a data scan over every
//! storage group). Each key lives in one group, so no key repeats; if one did, both would be
//! given, in input order. The first error ends the merged scan.

use crate::storage::{Entry, Result, ScanIter};

/// Merges `scans`, each ascending (or each descending with `reverse`), into one in that order.
/// Keeps one pending entry per input: memory is bounded by the number of inputs.
pub fn merge(scans: Vec<ScanIter>, reverse: bool) -> ScanIter {
    Box::new(Merge {
        heads: scans.iter().map(|_| None).collect(),
        inputs: scans.into_iter().map(Iterator::fuse).collect(),
        reverse,
        failed: false,
    })
}

struct Merge {
    inputs: Vec<std::iter::Fuse<ScanIter>>,
    /// The next entry of each input, pulled (None: not pulled yet, or the input ended).
    heads: Vec<Option<Entry>>,
    reverse: bool,
    failed: bool,
}

impl Iterator for Merge {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        for (head, input) in self.heads.iter_mut().zip(&mut self.inputs) {
            if head.is_none() {
                match input.next() {
                    Some(Ok(e)) => *head = Some(e),
                    Some(Err(e)) => {
                        self.failed = true;
                        return Some(Err(e));
                    }
                    None => {}
                }
            }
        }
        let mut best: Option<usize> = None;
        for (i, head) in self.heads.iter().enumerate() {
            let Some((k, _)) = head else { continue };
            let better = match best.and_then(|b| self.heads[b].as_ref()) {
                None => true,
                Some((bk, _)) if self.reverse => k > bk,
                Some((bk, _)) => k < bk,
            };
            if better {
                best = Some(i);
            }
        }
        self.heads[best?].take().map(Ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn scan(keys: &[&str]) -> ScanIter {
        let v: Vec<Result<Entry>> = (keys.iter())
            .map(|k| Ok((Bytes::from(k.to_string()), Bytes::new())))
            .collect();
        Box::new(v.into_iter())
    }

    fn keys(it: ScanIter) -> Vec<String> {
        it.map(|r| String::from_utf8(r.unwrap().0.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn merges_in_order_both_ways() {
        let up = merge(
            vec![scan(&["a", "d"]), scan(&[]), scan(&["b", "c", "e"])],
            false,
        );
        assert_eq!(keys(up), ["a", "b", "c", "d", "e"]);
        let down = merge(vec![scan(&["d", "a"]), scan(&["e", "c", "b"])], true);
        assert_eq!(keys(down), ["e", "d", "c", "b", "a"]);
    }

    #[test]
    fn an_error_ends_the_scan() {
        let bad: ScanIter =
            Box::new(vec![Err(crate::storage::StorageError::Io("x".into()))].into_iter());
        let mut m = merge(vec![scan(&["a"]), bad], false);
        assert!(m.next().unwrap().is_err());
        assert!(m.next().is_none());
    }
}
