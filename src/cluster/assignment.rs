//! Who SHOULD own each physical partition: a pure function of (end tokens, live member names)
//! that every node computes identically, so nodes agree without talking to each other.
//!
//! The key of a partition is its END token: partitions of different tables with the same end
//! token get the same owner, so a node's token list (the union of its partitions' end tokens,
//! what system.local / system.peers show drivers) never overlaps another node's.
//!
//! Rule: every (member, distinct end token) pair gets a rendezvous score `hash(member name,
//! token)`; pairs are taken best first, a pair when its token is still free and its member has
//! room. Room: with `T` tokens and `M` members, every member gets `floor(T/M)` or
//! `floor(T/M) + 1` tokens, and exactly `T mod M` members get the larger count. Why pairs best
//! first (and not tokens in order, each to its best scorer with room): a token keeps its best
//! scorer unless better pairs filled that member, so when a member joins or leaves few pairs
//! change and few partitions move (measured over 400 clusters: a join moves 1.11 times the
//! newcomer's share; the tests bound it). Cost: `T x M` scores sorted, every loop round.
//!
//! The hash is FNV-1a over the name's bytes and the token's big-endian bytes, then the
//! SplitMix64 finaliser (FNV alone mixes its last bytes poorly): stable across processes,
//! builds and Rust versions, which the standard library's hasher does not promise.

use std::collections::BTreeMap;

/// Rendezvous score of `member` for `token`.
pub fn score(member: &str, token: i64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let token = token.to_be_bytes();
    // 0xff never occurs in UTF-8: it ends the name unambiguously.
    for b in member.as_bytes().iter().chain(&[0xff]).chain(&token) {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The owner each end token should have. `tokens` may repeat and come in any order;
/// `members` may too (duplicates count once). No members: an empty assignment.
pub fn assign<'m>(tokens: &[i64], members: &[&'m str]) -> BTreeMap<i64, &'m str> {
    let mut members: Vec<&str> = members.to_vec();
    members.sort_unstable();
    members.dedup();
    let mut tokens = tokens.to_vec();
    tokens.sort_unstable();
    tokens.dedup();
    let mut out = BTreeMap::new();
    if members.is_empty() {
        return out;
    }
    let (base, extra) = (tokens.len() / members.len(), tokens.len() % members.len());
    // Every (score, token, member) pair, best first; a pair is taken when its token is still
    // free and its member has room. A token thus goes to its best scorer unless better pairs
    // filled that member first, and a join or leave only disturbs the pairs it changes.
    let mut pairs: Vec<(u64, usize, usize)> = Vec::with_capacity(tokens.len() * members.len());
    for (ti, t) in tokens.iter().enumerate() {
        for (mi, m) in members.iter().enumerate() {
            pairs.push((score(m, *t), ti, mi));
        }
    }
    pairs.sort_unstable_by(|a, b| b.cmp(a));
    let mut counts = vec![0usize; members.len()];
    let mut owner: Vec<Option<usize>> = vec![None; tokens.len()];
    let mut at_extra = 0usize;
    for (_, ti, mi) in pairs {
        let room = counts[mi] < base || (counts[mi] == base && at_extra < extra);
        if owner[ti].is_some() || !room {
            continue;
        }
        if counts[mi] == base {
            at_extra += 1;
        }
        counts[mi] += 1;
        owner[ti] = Some(mi);
    }
    for (t, m) in tokens.iter().zip(owner) {
        out.insert(
            *t,
            members[m.expect("the counts sum to the tokens: all placed")],
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("node-{i}")).collect()
    }

    fn refs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }

    fn moved(a: &BTreeMap<i64, &str>, b: &BTreeMap<i64, &str>) -> usize {
        a.iter().filter(|(t, m)| b.get(t) != Some(m)).count()
    }

    #[test]
    fn score_is_stable() {
        // A pinned value: a change of the hash would make nodes of two versions disagree.
        assert_eq!(score("a", 0), score("a", 0));
        assert_ne!(score("a", 0), score("b", 0));
        assert_ne!(score("a", 0), score("a", 1));
        assert_eq!(
            score("node-1", 42),
            0xeffe_c812_956e_e62b,
            "{:x}",
            score("node-1", 42)
        );
    }

    #[test]
    fn no_members_no_owners() {
        assert!(assign(&[1, 2, 3], &[]).is_empty());
        assert!(assign(&[], &["a"]).is_empty());
    }

    #[test]
    fn eight_partitions_over_three_nodes() {
        let tokens: Vec<i64> = (1..=8).map(|i| i * 1000).collect();
        let a = assign(&tokens, &["a", "b", "c"]);
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for m in a.values() {
            *counts.entry(m).or_default() += 1;
        }
        let mut c: Vec<usize> = counts.values().copied().collect();
        c.sort();
        assert_eq!(c, vec![2, 3, 3]);
    }

    /// Over many clusters, a join moves about the newcomer's share and little more (measured:
    /// 1.11 times it; the worst single case 3 tokens for a share of 1).
    #[test]
    fn joins_move_little_more_than_the_share() {
        let (mut moved_total, mut share_total) = (0usize, 0usize);
        for seed in 0..400u64 {
            let n = 1 + (seed % 7) as usize;
            let tokens: Vec<i64> = (0..1 + seed * 7919 % 200)
                .map(|i| score("t", (i ^ seed << 20) as i64) as i64)
                .collect();
            let (small, big) = (names(n), names(n + 1));
            let before = assign(&tokens, &refs(&small));
            let after = assign(&tokens, &refs(&big));
            moved_total += moved(&before, &after);
            share_total += after.values().filter(|m| **m == big[n]).count();
        }
        assert!(
            moved_total * 100 <= share_total * 125,
            "{moved_total} {share_total}"
        );
    }

    proptest! {
        #[test]
        fn every_token_once_balanced_deterministic(
            tokens in proptest::collection::vec(any::<i64>(), 0..300),
            n in 1usize..9,
        ) {
            let members = names(n);
            let a = assign(&tokens, &refs(&members));
            let distinct: BTreeSet<i64> = tokens.iter().copied().collect();
            prop_assert_eq!(a.keys().copied().collect::<BTreeSet<_>>(), distinct.clone());
            let mut counts = vec![0usize; n];
            for m in a.values() {
                counts[members.iter().position(|x| x == m).unwrap()] += 1;
            }
            let (lo, hi) = (distinct.len() / n, distinct.len().div_ceil(n));
            prop_assert!(counts.iter().all(|&c| c == lo || c == hi), "{:?}", counts);
            // The same inputs in another order give the same answer.
            let mut rev_t = tokens.clone();
            rev_t.reverse();
            let mut rev_m = refs(&members);
            rev_m.reverse();
            prop_assert_eq!(assign(&rev_t, &rev_m), a);
        }

        #[test]
        fn a_join_or_a_leave_moves_few(
            tokens in proptest::collection::btree_set(any::<i64>(), 1..300),
            n in 1usize..8,
        ) {
            let tokens: Vec<i64> = tokens.into_iter().collect();
            let (small, big) = (names(n), names(n + 1));
            let before = assign(&tokens, &refs(&small));
            let after = assign(&tokens, &refs(&big));
            // A join: the newcomer's share must move; the capacity limit moves at most twice
            // as many again, plus a token per member: a member that gives the newcomer a token
            // has room for one it lost to a better pair, whose member then has room, and so on
            // along the members (with 16 tokens over 8 nodes a join moved 6, then 8, for a
            // share of 2: proptest-regressions keeps both). Measured over 40,000 random
            // clusters, the worst join moved 5 times the share at a share of 1, 3 times at 2,
            // at most twice from a share of 8 on; `joins_move_little_more_than_the_share`
            // bounds the average.
            let share = tokens.len().div_ceil(n + 1);
            let moved_by_join = moved(&before, &after);
            prop_assert!(moved_by_join >= after.values().filter(|m| **m == big[n]).count());
            prop_assert!(moved_by_join <= 3 * share + n + 1,
                "moved {} of {}, share {}", moved_by_join, tokens.len(), share);
            // A leave (the reverse): the leaver's tokens must move, and a few others.
            let gone = after.values().filter(|m| **m == big[n]).count();
            let moved_by_leave = moved(&after, &before);
            prop_assert!(moved_by_leave >= gone);
            prop_assert!(moved_by_leave <= gone + 2 * share + n + 1);
        }
    }
}
