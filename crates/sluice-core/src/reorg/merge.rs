//! Streaming k-way merge of sorted runs with a loser tree.
//!
//! # Algorithm
//! A tournament tree over k runs: each internal node remembers the *loser*
//! of the match played there, the root slot `tree[0]` the overall winner
//! (smallest key; the lower run index on ties, so the merge is stable).
//! Taking the winner and advancing its run replays only the matches on that
//! run's path to the root: `ceil(log2 k)` key comparisons per record, against
//! `2 log2 k` for a binary heap, and each replay touches one leaf-to-root
//! path. Exhausted runs compare as +infinity.
//!
//! The order can ignore the first bytes of every key
//! ([`LoserTree::ordered_after`]): a reduce task's keys start with the
//! engine's 4-byte partition id, and a task that reads several partitions
//! orders their records by what follows it, as Spark's own reader orders a
//! range of partitions by key alone (the id is little-endian, so its bytes
//! would not even order the partitions by number).
//!
//! Each run's current key is also kept as a `u64` prefix (its 8 bytes
//! after the ignored ones, big-endian, zero-padded), in an array beside the
//! tree: a match is decided on the two prefixes unless they are equal, and
//! only then are the keys read and compared in full (from the same byte).
//! So most matches touch two words of one small array instead of two
//! records in two runs' batches (a Spark reduce task merges 100 or more
//! runs).
//!
//! ```text
//!            [w]            tree[0]: winner
//!            [l1]           internal nodes: losers
//!        [l2]    [l3]
//!      r0  r1  r2  r3       leaves: runs (cursors)
//! ```

use std::cmp::Ordering;

use super::cursor::RunCursor;
use super::ReorgError;
use crate::format::Record;

/// Marks a node no run has reached yet (only while building).
const EMPTY: usize = usize::MAX;

/// Merges sorted runs by key.
#[derive(Debug)]
pub struct LoserTree<C> {
    runs: Vec<C>,
    tree: Vec<usize>,
    /// Each run's current key prefix ([`LoserTree::prefix`]); `u64::MAX`
    /// once exhausted.
    heads: Vec<u64>,
    /// Bytes at the start of every key that the order ignores.
    skip: usize,
}

impl<C: RunCursor> LoserTree<C> {
    /// A tree over `runs`, each sorted by key.
    pub fn new(runs: Vec<C>) -> Self {
        Self::ordered_after(runs, 0)
    }

    /// A tree over `runs`, each sorted by its keys' bytes after the first
    /// `skip`, which the merge orders by too (a key shorter than that
    /// orders as empty); equal keys so compared come out in run order.
    pub fn ordered_after(runs: Vec<C>, skip: usize) -> Self {
        let k = runs.len();
        let mut t = LoserTree { runs, tree: vec![EMPTY; k.max(1)], heads: vec![0; k], skip };
        for leaf in 0..k {
            t.heads[leaf] = t.head(leaf);
        }
        for leaf in 0..k {
            t.replay(leaf);
        }
        t
    }

    /// The key bytes the order compares: those after the first `skip`.
    #[inline]
    fn ordered<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        key.get(self.skip..).unwrap_or(&[])
    }

    /// The first 8 bytes [`LoserTree::ordered`] compares, big-endian,
    /// zero-padded: a smaller prefix is a smaller key, equal prefixes
    /// decide nothing.
    #[inline]
    fn prefix(&self, key: &[u8]) -> u64 {
        let rest = self.ordered(key);
        let mut b = [0u8; 8];
        let n = rest.len().min(8);
        b[..n].copy_from_slice(&rest[..n]);
        u64::from_be_bytes(b)
    }

    fn head(&self, run: usize) -> u64 {
        match self.runs[run].current() {
            Some(r) => self.prefix(r.key),
            None => u64::MAX,
        }
    }

    /// `a` beats `b`: smaller key, or equal keys and lower run index.
    #[inline]
    fn beats(&self, a: usize, b: usize) -> bool {
        let (pa, pb) = (self.heads[a], self.heads[b]);
        if pa != pb {
            return pa < pb;
        }
        self.beats_by_keys(a, b)
    }

    /// [`LoserTree::beats`] on the whole keys (from byte `skip`).
    fn beats_by_keys(&self, a: usize, b: usize) -> bool {
        match (self.runs[a].current(), self.runs[b].current()) {
            (Some(x), Some(y)) => match self.ordered(x.key).cmp(self.ordered(y.key)) {
                Ordering::Less => true,
                Ordering::Greater => false,
                Ordering::Equal => a < b,
            },
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => a < b,
        }
    }

    fn replay(&mut self, leaf: usize) {
        let k = self.runs.len();
        let mut winner = leaf;
        let mut node = (leaf + k) / 2;
        while node > 0 {
            let there = self.tree[node];
            if there == EMPTY {
                self.tree[node] = winner;
                return;
            }
            if self.beats(there, winner) {
                self.tree[node] = winner;
                winner = there;
            }
            node /= 2;
        }
        self.tree[0] = winner;
    }

    /// Bytes at the start of every key the order ignores.
    pub(crate) fn skip(&self) -> usize {
        self.skip
    }

    /// The runs' cursors, each where it stands: a tree built over them
    /// again ([`LoserTree::ordered_after`], the same `skip`) goes on with
    /// the same merge.
    pub(crate) fn into_runs(self) -> Vec<C> {
        self.runs
    }

    /// The runs' cursors.
    pub(crate) fn runs(&self) -> &[C] {
        &self.runs
    }

    /// The smallest record across all runs, `None` when all are exhausted.
    #[inline]
    pub fn peek(&self) -> Option<Record<'_>> {
        let w = *self.tree.first()?;
        self.runs.get(w)?.current()
    }

    /// Consumes the record [`LoserTree::peek`] returned.
    pub fn advance(&mut self) -> Result<(), ReorgError> {
        let Some(&w) = self.tree.first() else { return Ok(()) };
        if w == EMPTY || w >= self.runs.len() {
            return Ok(());
        }
        self.runs[w].advance()?;
        self.heads[w] = self.head(w);
        self.replay(w);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Layout, RecordBatch};
    use crate::reorg::cursor::MemRun;

    fn run(keys: &[u32], tag: u8) -> MemRun {
        let mut b = RecordBatch::new(Layout::fixed(4, 1).expect("layout"));
        for k in keys {
            b.push(&k.to_be_bytes(), &[tag]).expect("push");
        }
        MemRun::new(vec![b])
    }

    #[test]
    fn merges_and_is_stable() {
        for k in 0..9usize {
            let runs: Vec<MemRun> = (0..k)
                .map(|i| {
                    let keys: Vec<u32> =
                        (0..(i as u32 * 3)).map(|x| x * (i as u32 + 1) % 50).collect();
                    let mut keys = keys;
                    keys.sort_unstable();
                    run(&keys, i as u8)
                })
                .collect();
            let mut expected: Vec<(u32, u8)> = (0..k)
                .flat_map(|i| (0..(i as u32 * 3)).map(move |x| (x * (i as u32 + 1) % 50, i as u8)))
                .collect();
            expected.sort();
            let mut t = LoserTree::new(runs);
            let mut got = Vec::new();
            while let Some(r) = t.peek() {
                let key = u32::from_be_bytes(r.key.try_into().expect("4 bytes"));
                got.push((key, r.value[0]));
                t.advance().expect("advance");
            }
            assert_eq!(got, expected, "{k} runs");
        }
    }

    /// Variable keys sharing a 3-byte prefix, of lengths 3 to 14: prefixes
    /// decide most matches, the whole keys the rest (keys equal in their
    /// first 8 bytes after the skipped part, keys that are a prefix of
    /// another, zero bytes that pad to the same prefix).
    #[test]
    fn merges_by_key_prefix_after_the_skipped_bytes() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut all = Vec::new();
        let runs: Vec<MemRun> = (0..13u8)
            .map(|r| {
                let mut keys: Vec<Vec<u8>> = (0..200)
                    .map(|_| {
                        let v = next();
                        let len = 3 + (v % 12) as usize;
                        let mut k = b"pid".to_vec();
                        // Few distinct bytes, so that prefixes often tie.
                        k.extend((0..len - 3).map(|i| ((v >> (8 + 2 * i)) & 3) as u8));
                        k
                    })
                    .collect();
                keys.sort();
                let mut b = RecordBatch::new(Layout::Variable);
                for k in &keys {
                    b.push(k, &[r]).expect("push");
                    all.push((k.clone(), r));
                }
                MemRun::new(vec![b])
            })
            .collect();
        all.sort();
        let mut t = LoserTree::ordered_after(runs, 3);
        let mut got = Vec::new();
        while let Some(r) = t.peek() {
            got.push((r.key.to_vec(), r.value[0]));
            t.advance().expect("advance");
        }
        assert_eq!(got, all, "key order, then run order (stable)");
    }

    /// Keys that differ in the skipped bytes (a reduce task's partition
    /// ids, little-endian: 255 and 256 are `ff 00` and `00 01`) merge by
    /// what follows them alone; equal keys so compared come out in run
    /// order, each run's in its own order.
    #[test]
    fn orders_by_the_bytes_after_the_skipped_ones_only() {
        let partitions = [1u32, 255, 256, 257, 511, 512, 70_000];
        let mut all = Vec::new();
        let runs: Vec<MemRun> = (0..5u8)
            .map(|r| {
                let mut keys: Vec<(u16, u32)> = (0..300u32)
                    .map(|i| {
                        let v = i.wrapping_mul(2_654_435_761).wrapping_add(u32::from(r) * 97);
                        ((v >> 7) as u16 % 64, partitions[(v % 7) as usize])
                    })
                    .collect();
                keys.sort_by_key(|&(k, _)| k);
                let mut b = RecordBatch::new(Layout::Variable);
                for (i, &(k, p)) in keys.iter().enumerate() {
                    let mut key = p.to_le_bytes().to_vec();
                    key.extend_from_slice(&k.to_be_bytes());
                    b.push(&key, &[r]).expect("push");
                    all.push((k, r, i, key));
                }
                MemRun::new(vec![b])
            })
            .collect();
        all.sort_by_key(|&(k, r, i, _)| (k, r, i));
        let want: Vec<(Vec<u8>, u8)> = all.into_iter().map(|(_, r, _, key)| (key, r)).collect();
        let mut t = LoserTree::ordered_after(runs, 4);
        let mut got = Vec::new();
        while let Some(rec) = t.peek() {
            got.push((rec.key.to_vec(), rec.value[0]));
            t.advance().expect("advance");
        }
        assert_eq!(got, want, "by the bytes after the partition id, then run order");
    }
}
