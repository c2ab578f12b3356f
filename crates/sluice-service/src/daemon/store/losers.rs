//! Losing attempts. Two attempts of one map index can both commit at a
//! daemon: a speculative copy that finished before Spark killed it, or a
//! retry of a task whose first attempt committed here and then failed
//! elsewhere. Spark's map output tracker registers one of them, and every
//! read of the generation names that one as the map's winner. So the first
//! read that names a winner decides the map at this daemon:
//!
//! - the other attempts that committed are let go at once: their blocks
//!   in memory are freed (or drain, as any block let go, while a read or a
//!   spill's job still holds them), a spilled one's bytes go with its
//!   file's last block;
//! - an attempt of a decided map that commits later is answered as a
//!   commit that was not the first, and its chunks are let go with it.
//!
//! A map's decision never changes (a read naming another committed attempt
//! is refused), so a let-go attempt is one that committed here while
//! another was decided; a read that names it later gets
//! [`ErrorCode::MissingCommit`](crate::protocol::ErrorCode::MissingCommit):
//! a fetch failure, after which Spark runs the map stage again in a new
//! generation. The rule never shortens an answer; it only bounds what a
//! speculative job holds to one attempt per map, read or not.

use std::collections::HashSet;

use super::super::spill::Loc;
use super::{has, Block, Shuffle};
use crate::protocol::Winner;

impl Shuffle {
    /// Whether `attempt` of `map` committed here and was let go as a loser.
    pub(super) fn let_go_as_loser(&self, map: u32, attempt: u64) -> bool {
        self.decided_against(map, attempt) && has(self.committed.get(&map), attempt)
    }

    /// Whether a read named another attempt than `attempt` as `map`'s winner.
    pub(super) fn decided_against(&self, map: u32, attempt: u64) -> bool {
        self.decided.get(&map).is_some_and(|&w| w != attempt)
    }

    /// Takes `winners` (each committed here, none let go) as their maps'
    /// decisions and takes the other committed attempts of maps decided
    /// now out of the partitions: the locations of their blocks, for the
    /// store to let go.
    pub(super) fn decide(&mut self, winners: &[Winner]) -> Vec<Loc> {
        let mut losers = HashSet::new();
        for w in winners {
            if self.decided.insert(w.map, w.attempt).is_some() {
                continue;
            }
            for &(a, _) in self.committed.get(&w.map).into_iter().flatten() {
                if a != w.attempt {
                    losers.insert((w.map, a));
                }
            }
        }
        if losers.is_empty() {
            return Vec::new();
        }
        let mut gone = Vec::new();
        for part in self.parts.values_mut() {
            if !part.blocks.iter().any(|b| losers.contains(&(b.map, b.attempt))) {
                continue;
            }
            // A spill of this partition being written finds its blocks by
            // index and swaps only a block that is still the one it wrote,
            // so a block that moved stays in memory, counted, until a later
            // spill takes it.
            let (lost, kept): (Vec<Block>, Vec<Block>) = std::mem::take(&mut part.blocks)
                .into_iter()
                .partition(|b| losers.contains(&(b.map, b.attempt)));
            part.blocks = kept;
            for b in lost {
                part.mem_bytes -= b.at.mem_bytes();
                gone.push(b.at);
            }
        }
        gone
    }
}
