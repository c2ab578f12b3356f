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
//!
//! An attempt that committed here and then failed at another daemon keeps
//! its output on its executor, so no read will name it: its map task drops
//! it (`Store::drop_attempt`) and its blocks are taken out the same way. A
//! partition left with no block lets its spill file go.

use std::collections::HashSet;
use std::sync::Arc;

use super::super::spill::{Appender, Loc, SpillFile};
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
    pub(super) fn decide(&mut self, winners: &[Winner]) -> Taken {
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
        self.take_blocks_of(&losers)
    }

    /// Takes the blocks of `attempts` (map, attempt) out of the partitions:
    /// their locations, for the store to let go, and the spill files of
    /// partitions left with no block. A spill of a partition being written
    /// finds its blocks by index and swaps only a block that is still the
    /// one it wrote, so a block that moved stays in memory, counted, until a
    /// later spill takes it; that spill's file stays with its partition.
    pub(super) fn take_blocks_of(&mut self, attempts: &HashSet<(u32, u64)>) -> Taken {
        let mut gone = Taken::default();
        if attempts.is_empty() {
            return gone;
        }
        for part in self.parts.values_mut() {
            if !part.blocks.iter().any(|b| attempts.contains(&(b.map, b.attempt))) {
                continue;
            }
            let (lost, kept): (Vec<Block>, Vec<Block>) = std::mem::take(&mut part.blocks)
                .into_iter()
                .partition(|b| attempts.contains(&(b.map, b.attempt)));
            part.blocks = kept;
            for b in lost {
                part.mem_bytes -= b.at.mem_bytes();
                gone.blocks.push(b.at);
            }
            if part.blocks.is_empty() {
                gone.files.extend(part.file.take().map(Appender::into_file));
            }
        }
        gone
    }
}

/// What [`Shuffle::take_blocks_of`] took out of the partitions.
#[derive(Debug, Default)]
pub(super) struct Taken {
    pub(super) blocks: Vec<Loc>,
    pub(super) files: Vec<Arc<SpillFile>>,
}
