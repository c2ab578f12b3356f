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
}

impl<C: RunCursor> LoserTree<C> {
    /// A tree over `runs`, each sorted by key.
    pub fn new(runs: Vec<C>) -> Self {
        let k = runs.len();
        let mut t = LoserTree { runs, tree: vec![EMPTY; k.max(1)] };
        for leaf in 0..k {
            t.replay(leaf);
        }
        t
    }

    /// `a` beats `b`: smaller key, or equal keys and lower run index.
    #[inline]
    fn beats(&self, a: usize, b: usize) -> bool {
        match (self.runs[a].current(), self.runs[b].current()) {
            (Some(x), Some(y)) => match x.key.cmp(y.key) {
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
}
