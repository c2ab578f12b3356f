//! Spills without the store's lock. A push that does not fit the budget
//! takes a [`SpillJob`] out of the store ([`Store::begin_spill`]): the
//! owner with the most bytes in memory (a reduce partition, or a map
//! attempt's staged chunks), marked as spilling so that no other push
//! picks it, its file's appender, and a reference to each of its blocks in
//! memory. The job writes them (one sequential write, `spill`) with the
//! lock released, so pushes, commits and reads of every other connection
//! go on meanwhile; then [`Store::finish_spill`] takes the lock again and
//! moves to disk each block that is still the one written. What changed
//! in between stays correct:
//!
//! - blocks added to the owner during the write are not in the job and
//!   stay in memory;
//! - a staged attempt that committed during the write took its blocks to
//!   their partitions, in memory: nothing is swapped, and the written
//!   copy's file goes with the job;
//! - a shuffle unregistered (or replaced by a newer generation, or its
//!   application ended) during the write let its blocks go then: nothing
//!   is swapped, and the blocks (counted as draining until the job lets
//!   them go) and the file go with the job.
//!
//! - a block a read took during the write (the read's plan holds it until
//!   it is streamed) is not swapped: it stays in memory, counted, and its
//!   written copy is left unused in the file.
//!
//! A job takes only blocks no read holds, for the same reason: a block a
//! read holds stays in memory until the read lets it go, so writing it
//! would free nothing and `held` would no longer count it. `held` counts
//! the spilling blocks until they are swapped, so the budget is never
//! overrun while a write is in flight; a push that finds every owner in
//! memory already spilling, or held by reads, gets `SlowDown`.

use std::path::PathBuf;
use std::sync::Arc;

use super::super::spill::{spill, Appender, Loc};
use super::{Owner, Refusal, Store};

/// Where a spilled block sits in its owner: a partition's block index, or
/// a staged chunk's sequence number and section index.
#[derive(Debug, Clone, Copy)]
enum BlockKey {
    Part(usize),
    Staged(u32, usize),
}

/// An owner's in-memory blocks taken out to be written without the lock.
#[derive(Debug)]
pub(crate) struct SpillJob {
    app: String,
    shuffle: u32,
    generation: u32,
    owner: Owner,
    /// Each block's place and the bytes it held when the job was taken.
    blocks: Vec<(BlockKey, Arc<Vec<u8>>)>,
    /// The same blocks, in memory until `write` puts them on disk.
    locs: Vec<Loc>,
    appender: Option<Appender>,
    path: PathBuf,
}

impl SpillJob {
    /// Writes the blocks to the owner's file (made on its first spill);
    /// the bytes written. Runs without the store's lock.
    pub(crate) fn write(&mut self) -> Result<u64, Refusal> {
        let path = self.path.clone();
        spill(&mut self.appender, || path, self.locs.iter_mut())
    }
}

impl Store {
    /// The largest owner in memory that is not spilling already and holds a
    /// block no read holds, taken out as a job of those blocks; None when
    /// there is none.
    pub(crate) fn begin_spill(&mut self) -> Option<SpillJob> {
        // Each application's name once, its owners by its index.
        let mut apps: Vec<String> = Vec::with_capacity(self.apps.len());
        let mut owners: Vec<(u64, usize, u32, Owner)> = Vec::new();
        for (id, a) in &self.apps {
            let k = apps.len();
            apps.push(id.clone());
            for (&sh, s) in &a.shuffles {
                let parts = s.parts.iter().map(|(&p, x)| (x.mem_bytes, x.spilling, Owner::Part(p)));
                let staged = s.staged.iter().map(|(&(map, attempt), x)| {
                    (x.mem_bytes, x.spilling, Owner::Staged(map, attempt))
                });
                for (bytes, spilling, owner) in parts.chain(staged) {
                    if !spilling && bytes > 0 {
                        owners.push((bytes, k, sh, owner));
                    }
                }
            }
        }
        owners.sort_unstable_by_key(|o| std::cmp::Reverse(o.0));
        owners.into_iter().find_map(|(_, k, sh, owner)| self.take_spill(&apps[k], sh, owner))
    }

    /// `owner`'s blocks in memory that only the store holds, taken out as a
    /// job; None when a read holds every one (writing those would free
    /// nothing while the read lasts).
    fn take_spill(&mut self, app: &str, sh: u32, owner: Owner) -> Option<SpillJob> {
        let n = self.files + 1;
        let a = self.apps.get_mut(app)?;
        let dir = self.dirs[(n as usize) % self.dirs.len()].join(&a.tag);
        let s = a.shuffles.get_mut(&sh)?;
        let generation = s.generation;
        let mut blocks = Vec::new();
        let mut unshared = |key: BlockKey, at: &Loc| {
            if let Loc::Mem(d) = at {
                if Arc::strong_count(d) == 1 {
                    blocks.push((key, Arc::clone(d)));
                }
            }
        };
        let (appender, path) = match owner {
            Owner::Part(p) => {
                let part = s.parts.get_mut(&p)?;
                part.blocks
                    .iter()
                    .enumerate()
                    .for_each(|(i, b)| unshared(BlockKey::Part(i), &b.at));
                if blocks.is_empty() {
                    return None;
                }
                part.spilling = true;
                (part.file.take(), dir.join(format!("s{sh}-g{generation}-p{p}-{n}.data")))
            }
            Owner::Staged(map, attempt) => {
                let st = s.staged.get_mut(&(map, attempt))?;
                for (&seq, (_, sections)) in &st.chunks {
                    for (j, x) in sections.iter().enumerate() {
                        unshared(BlockKey::Staged(seq, j), &x.at);
                    }
                }
                if blocks.is_empty() {
                    return None;
                }
                st.spilling = true;
                let name = format!("s{sh}-g{generation}-m{map}-a{attempt}-{n}.staged");
                (st.file.take(), dir.join(name))
            }
        };
        self.files = n;
        let locs = blocks.iter().map(|(_, d)| Loc::Mem(Arc::clone(d))).collect();
        let app = app.to_owned();
        Some(SpillJob { app, shuffle: sh, generation, owner, blocks, locs, appender, path })
    }

    /// Takes a written job back: the owner, if it is still there, gets its
    /// appender back and its blocks that are still the ones written move
    /// to disk. A failed write (a full disk) swaps nothing and is the
    /// push's refusal. Blocks the store let go during the write (their
    /// shuffle or attempt dropped) are freed with the job. The bytes freed.
    pub(crate) fn finish_spill(
        &mut self,
        job: SpillJob,
        written: Result<u64, Refusal>,
    ) -> Result<u64, Refusal> {
        let swapped = self.swap_written(job, written.is_ok());
        let drained = self.reap();
        written.map(|_| swapped + drained)
    }

    /// Moves to disk the job's blocks that are still the ones written,
    /// when the write went well (`ok`); the bytes that moved. The job goes
    /// with it.
    fn swap_written(&mut self, job: SpillJob, ok: bool) -> u64 {
        let SpillJob { app, shuffle, generation, owner, blocks, locs, mut appender, .. } = job;
        let s = self
            .apps
            .get_mut(&app)
            .and_then(|a| a.shuffles.get_mut(&shuffle))
            .filter(|s| s.generation == generation);
        let Some(s) = s else {
            // Its owner went during the write: the file goes once the lock is let go.
            if let Some(a) = appender {
                self.unlink_later(a.into_file());
            }
            return 0;
        };
        let mut freed = 0u64;
        // A block is swapped if it is still the one written and nothing but
        // its owner and this job holds it: one a read took meanwhile stays
        // in memory, counted, until a later spill (its written copy is left
        // unused in the file).
        let mut swap = |at: Option<&mut Loc>, held: &Arc<Vec<u8>>, loc: Loc| {
            if let Some(at) = at {
                let alone = Arc::strong_count(held) == 2;
                if ok && alone && matches!(&*at, Loc::Mem(d) if Arc::ptr_eq(d, held)) {
                    *at = loc;
                    freed += held.len() as u64;
                }
            }
        };
        match owner {
            Owner::Part(p) => {
                if let Some(part) = s.parts.get_mut(&p) {
                    part.spilling = false;
                    part.file = appender.take();
                    for ((key, held), loc) in blocks.iter().zip(locs) {
                        if let BlockKey::Part(i) = *key {
                            swap(part.blocks.get_mut(i).map(|b| &mut b.at), held, loc);
                        }
                    }
                    part.mem_bytes -= freed;
                }
            }
            Owner::Staged(map, attempt) => {
                if let Some(st) = s.staged.get_mut(&(map, attempt)) {
                    st.spilling = false;
                    st.file = appender.take();
                    for ((key, held), loc) in blocks.iter().zip(locs) {
                        if let BlockKey::Staged(seq, j) = *key {
                            let at = st.chunks.get_mut(&seq).and_then(|(_, x)| x.get_mut(j));
                            swap(at.map(|x| &mut x.at), held, loc);
                        }
                    }
                    st.mem_bytes -= freed;
                }
            }
        }
        if let Some(a) = appender {
            // The owner went during the write (committed, dropped).
            self.unlink_later(a.into_file());
        }
        self.held -= freed;
        self.spilled += freed;
        freed
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::{
        ChunkId, Pushed, COMMIT_ENTRIES, DROP_ENTRIES, ENTRY_BYTES, SHUFFLE_ENTRIES, STAGED_ENTRIES,
    };
    use super::*;
    use crate::protocol::{acks_checksum, ErrorCode, Message, Section, Winner};

    const APP: &str = "app";

    /// A store of `budget` bytes for data and sections' entries: the
    /// bookkeeping of its shuffle and of each commit (`room_for`) is added
    /// to the budget as it is taken, so that what these tests spill and
    /// slow down depends on the data alone.
    fn store(dir: &std::path::Path, budget: u64) -> Store {
        let mut s = bare_store(dir, budget);
        s.open_app(APP, Duration::from_secs(60));
        room_for(&mut s, SHUFFLE_ENTRIES);
        s.register(APP, 0, 1, 2).expect("register");
        s
    }

    /// A store of `budget` bytes that charges no staged attempt's record
    /// (`staged_records_are_charged_until_committed_or_let_go` checks that
    /// charge).
    fn bare_store(dir: &std::path::Path, budget: u64) -> Store {
        let mut s = Store::new(vec![dir.to_path_buf()], budget, Duration::from_secs(60));
        s.staged_entries = 0;
        s
    }

    fn room_for(s: &mut Store, entries: u64) {
        s.budget += entries * ENTRY_BYTES;
    }

    fn bytes(map: u32, n: usize) -> Vec<u8> {
        (0..n).map(|i| (i as u32 * 7 + map) as u8).collect()
    }

    /// Pushes map `map`'s one chunk (all to `partition`, CRC `map`).
    fn push(s: &mut Store, map: u32, partition: u32, n: usize) -> Pushed {
        let mut sections = vec![Section { partition, records: 1, data: bytes(map, n) }];
        let id = ChunkId { shuffle: 0, generation: 1, map, attempt: 1, seq: 0, crc: map };
        s.push(APP, &id, &mut sections).expect("push")
    }

    fn acked(p: Pushed) {
        assert!(matches!(p, Pushed::Reply(Message::PushAck { .. })), "{p:?}");
    }

    fn commit(s: &mut Store, map: u32) {
        room_for(s, COMMIT_ENTRIES);
        s.commit(APP, 0, 1, map, 1, 1, acks_checksum([(0, map)]), 1).expect("commit");
    }

    fn job(p: Pushed) -> SpillJob {
        match p {
            Pushed::Spill(j) => j,
            other => panic!("expected a spill, got {other:?}"),
        }
    }

    fn mem_held(s: &Store) -> u64 {
        let sh = &s.apps[APP].shuffles[&0];
        sh.parts.values().map(|p| p.mem_bytes).sum::<u64>()
            + sh.staged.values().map(|st| st.mem_bytes).sum::<u64>()
    }

    /// Partition `p` as read by the winners `maps` (attempt 1 each).
    fn read(s: &mut Store, p: u32, maps: &[u32]) -> Vec<Vec<u8>> {
        let winners: Vec<Winner> = maps.iter().map(|&map| Winner { map, attempt: 1 }).collect();
        let plan = s.read_plan(APP, 0, 1, p, p + 1, &winners).expect("plan");
        plan.iter().map(|b| b.at.fetch().expect("fetch").to_vec()).collect()
    }

    #[test]
    fn what_changes_while_a_spill_is_written_stays_exact() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Room for the blocks' bytes and four entries' bookkeeping.
        let mut s = store(dir.path(), 3000 + 4 * ENTRY_BYTES);
        acked(push(&mut s, 0, 0, 1000));
        commit(&mut s, 0);
        acked(push(&mut s, 1, 0, 1500));
        // Map 2 does not fit: the largest owner, map 1's staged chunk, is
        // taken out; map 1 commits before the write ends, taking its block
        // to partition 0 in memory.
        let mut j = job(push(&mut s, 2, 1, 1000));
        assert!(matches!(j.owner, Owner::Staged(1, 1)), "{:?}", j.owner);
        commit(&mut s, 1);
        let w = j.write();
        s.finish_spill(j, w).expect("finish");
        assert_eq!((s.held, s.spilled), (2500, 0), "nothing swapped: the block moved on");
        assert_eq!(s.held, mem_held(&s));
        // Now partition 0 (2,500 bytes) is taken out; while it is written a
        // push fits and map 3 commits a block to partition 0 that stays in
        // memory, and a push that does not fit finds nothing else to take
        // (a slow-down).
        let mut j = job(push(&mut s, 2, 1, 1000));
        assert!(matches!(j.owner, Owner::Part(0)), "{:?}", j.owner);
        acked(push(&mut s, 3, 0, 400));
        commit(&mut s, 3);
        let slow = push(&mut s, 4, 1, 1000);
        assert!(matches!(slow, Pushed::Reply(Message::SlowDown { .. })), "{slow:?}");
        let w = j.write();
        assert_eq!(w, Ok(2500));
        s.finish_spill(j, w).expect("finish");
        assert_eq!((s.held, s.spilled), (400, 2500));
        assert_eq!(s.held, mem_held(&s));
        acked(push(&mut s, 2, 1, 1000));
        commit(&mut s, 2);
        assert_eq!(
            read(&mut s, 0, &[0, 1, 3]),
            vec![bytes(0, 1000), bytes(1, 1500), bytes(3, 400)]
        );
        assert_eq!(read(&mut s, 1, &[2]), vec![bytes(2, 1000)]);
        let part = &s.apps[APP].shuffles[&0].parts[&0];
        let on_disk = part.blocks.iter().filter(|b| b.at.mem_bytes() == 0).count();
        assert_eq!((on_disk, part.mem_bytes, part.spilling), (2, 400, false));
    }

    #[test]
    fn a_loser_let_go_while_its_partition_is_written_stays_exact() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = store(dir.path(), 3000 + 4 * ENTRY_BYTES);
        // Map 0 commits twice (attempts 1 and 2), 1,000 bytes each to
        // partition 0.
        for attempt in [1, 2] {
            let mut sections = vec![Section { partition: 0, records: 1, data: bytes(0, 1000) }];
            let id = ChunkId { shuffle: 0, generation: 1, map: 0, attempt, seq: 0, crc: 9 };
            acked(s.push(APP, &id, &mut sections).expect("push"));
            room_for(&mut s, COMMIT_ENTRIES);
            s.commit(APP, 0, 1, 0, attempt, 1, acks_checksum([(0, 9)]), 1).expect("commit");
        }
        // Map 1 does not fit: partition 0 is taken out to be written; while
        // it is, a read names attempt 2, and attempt 1's block is let go.
        let mut j = job(push(&mut s, 1, 1, 1500));
        assert!(matches!(j.owner, Owner::Part(0)), "{:?}", j.owner);
        let plan = s.read_plan(APP, 0, 1, 0, 1, &[Winner { map: 0, attempt: 2 }]).expect("plan");
        assert_eq!(plan.len(), 1);
        drop(plan);
        let w = j.write();
        assert_eq!(w, Ok(2000));
        // The winner's block moved to the loser's index: not swapped, it
        // stays in memory, counted; the loser's bytes are freed with the job.
        assert_eq!(s.finish_spill(j, w), Ok(1000));
        assert_eq!((s.held, s.spilled), (1000, 0));
        assert_eq!(s.held, mem_held(&s));
        assert!(s.draining.is_empty());
        acked(push(&mut s, 1, 1, 1500));
        let winners = [Winner { map: 0, attempt: 2 }];
        let plan = s.read_plan(APP, 0, 1, 0, 1, &winners).expect("plan");
        let data: Vec<Vec<u8>> =
            plan.iter().map(|b| b.at.fetch().expect("fetch").to_vec()).collect();
        assert_eq!(data, vec![bytes(0, 1000)]);
        let r = s.read_plan(APP, 0, 1, 0, 1, &[Winner { map: 0, attempt: 1 }]);
        assert_eq!(r.map(|_| ()).map_err(|e| e.0), Err(ErrorCode::MissingCommit));
    }

    #[test]
    fn a_block_a_read_holds_is_not_spilled_and_stays_counted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = store(dir.path(), 3000);
        acked(push(&mut s, 0, 0, 1000));
        commit(&mut s, 0);
        acked(push(&mut s, 1, 0, 1500));
        commit(&mut s, 1);
        // A read of partition 0 that has streamed nothing yet holds both of
        // its blocks: map 2 does not fit, and the one owner in memory frees
        // nothing while the read lasts (a slow-down, not a spill).
        let winners = [Winner { map: 0, attempt: 1 }, Winner { map: 1, attempt: 1 }];
        let mut plan = s.read_plan(APP, 0, 1, 0, 1, &winners).expect("plan").into_iter();
        let slow = push(&mut s, 2, 1, 1000);
        assert!(matches!(slow, Pushed::Reply(Message::SlowDown { .. })), "{slow:?}");
        // Its first block streamed and let go, that block spills alone.
        drop(plan.next());
        let mut j = job(push(&mut s, 2, 1, 1000));
        let w = j.write();
        assert_eq!(w, Ok(1000));
        s.finish_spill(j, w).expect("finish");
        assert_eq!((s.held, s.spilled), (1500, 1000));
        assert_eq!(s.held, mem_held(&s));
        drop(plan);
        acked(push(&mut s, 2, 1, 1000));
        // A read that starts while partition 0's spill is written keeps
        // map 1's block in memory, counted; the next spill takes map 2's
        // staged chunk instead of writing the held block again.
        let mut j = job(push(&mut s, 3, 1, 1000));
        assert!(matches!(j.owner, Owner::Part(0)), "{:?}", j.owner);
        let plan = s.read_plan(APP, 0, 1, 0, 1, &winners).expect("plan");
        let w = j.write();
        assert_eq!(w, Ok(1500));
        s.finish_spill(j, w).expect("finish");
        assert_eq!((s.held, s.spilled), (2500, 1000), "the read's block stays counted");
        assert_eq!(s.held, mem_held(&s));
        let j = job(push(&mut s, 3, 1, 1000));
        assert!(matches!(j.owner, Owner::Staged(2, 1)), "{:?}", j.owner);
        let data: Vec<Vec<u8>> =
            plan.iter().map(|b| b.at.fetch().expect("fetch").to_vec()).collect();
        assert_eq!(data, vec![bytes(0, 1000), bytes(1, 1500)]);
    }

    #[test]
    fn blocks_a_read_holds_stay_counted_after_their_shuffle_is_unregistered() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = store(dir.path(), 3000);
        acked(push(&mut s, 0, 0, 1000));
        commit(&mut s, 0);
        // A read of partition 0 has streamed nothing yet when the shuffle
        // is unregistered: its block is still in memory, and counted beside
        // what the shuffle registered anew takes, in the peak too.
        let plan = s.read_plan(APP, 0, 1, 0, 1, &[Winner { map: 0, attempt: 1 }]).expect("plan");
        s.unregister(APP, 0).expect("unregister");
        assert_eq!(s.stats().held_bytes, 1000, "the read's block is still in memory");
        s.register(APP, 0, 1, 2).expect("register");
        acked(push(&mut s, 1, 1, 1500));
        // The peak counts the entries' bookkeeping: the pushed chunk's
        // section and the shuffle registered anew.
        let entry = (1 + SHUFFLE_ENTRIES) * ENTRY_BYTES;
        assert_eq!((s.held, s.peak), (2500, 2500 + entry));
        let data: Vec<Vec<u8>> =
            plan.iter().map(|b| b.at.fetch().expect("fetch").to_vec()).collect();
        assert_eq!(data, vec![bytes(0, 1000)]);
        // The read over, the next push finds its block freed and uncounted.
        drop(plan);
        acked(push(&mut s, 2, 1, 500));
        assert_eq!((s.held, s.peak), (2000, 2500 + entry));
        assert!(s.draining.is_empty());
        assert_eq!(s.held, mem_held(&s));
    }

    #[test]
    fn a_dropped_attempt_frees_what_it_staged_even_while_it_is_spilled() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = store(dir.path(), 3000);
        acked(push(&mut s, 0, 0, 1000));
        commit(&mut s, 0);
        acked(push(&mut s, 1, 0, 1500));
        // Map 2 does not fit: map 1's staged chunk is taken out to spill,
        // and map 1 is dropped while it is written.
        let mut j = job(push(&mut s, 2, 1, 1000));
        assert!(matches!(j.owner, Owner::Staged(1, 1)), "{:?}", j.owner);
        s.drop_attempt(APP, 0, 1, 1, 1).expect("drop");
        let w = j.write();
        s.finish_spill(j, w).expect("finish");
        assert_eq!((s.held, s.spilled), (1000, 0), "only map 0's block held");
        assert_eq!(s.held, mem_held(&s));
        // Dropped, it cannot commit what it staged; a winner a read named
        // is not dropped; an attempt that staged nothing drops nothing.
        let err = s.commit(APP, 0, 1, 1, 1, 1, acks_checksum([(0, 1)]), 1).expect_err("commit");
        assert_eq!(err.0, crate::protocol::ErrorCode::CommitMismatch, "{err:?}");
        assert_eq!(read(&mut s, 0, &[0]), vec![bytes(0, 1000)]);
        let err = s.drop_attempt(APP, 0, 1, 0, 1).expect_err("a read's winner");
        assert_eq!(err.0, crate::protocol::ErrorCode::BadRequest, "{err:?}");
        s.drop_attempt(APP, 0, 1, 5, 3).expect("nothing staged");
        assert_eq!(read(&mut s, 0, &[0]), vec![bytes(0, 1000)]);
        acked(push(&mut s, 2, 1, 1000));
        assert_eq!(s.held, 2000);
    }

    #[test]
    fn a_read_plans_block_costs_less_than_the_entry_charged_for_it() {
        let plan = std::mem::size_of::<super::super::BlockRef>() as u64;
        assert!(plan < ENTRY_BYTES, "a BlockRef of {plan} bytes");
    }

    #[test]
    fn a_committed_attempt_no_read_named_is_dropped_with_its_blocks() {
        // A map task that committed here and then failed at another daemon
        // keeps its output on its executor: what it committed here is
        // dropped, in memory or spilled, and its bookkeeping given back.
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = store(dir.path(), 2500 + 2 * ENTRY_BYTES);
        let base = SHUFFLE_ENTRIES * ENTRY_BYTES;
        acked(push(&mut s, 0, 0, 1000));
        commit(&mut s, 0);
        acked(push(&mut s, 1, 1, 1000));
        commit(&mut s, 1);
        // Map 2 does not fit: partition 0 (map 0's block) spills.
        let mut j = job(push(&mut s, 2, 1, 1000));
        let w = j.write();
        s.finish_spill(j, w).expect("finish");
        assert_eq!((s.held, s.spilled), (1000, 1000));
        let entries = 2 + 2 * COMMIT_ENTRIES;
        assert_eq!(s.stats().held_bytes, 1000 + base + entries * ENTRY_BYTES);
        for map in [0, 1] {
            s.drop_attempt(APP, 0, 1, map, 1).expect("drop");
        }
        let dropped = 2 * DROP_ENTRIES * ENTRY_BYTES;
        assert_eq!(s.stats().held_bytes, base + dropped, "the shuffle's and the drops' records");
        assert_eq!(s.held, mem_held(&s));
        // Gone: a read naming either is refused, and the spill file goes
        // with its partition's last block.
        for map in [0, 1] {
            let w = [Winner { map, attempt: 1 }];
            let err = s.read_plan(APP, 0, 1, 0, 2, &w).expect_err("dropped");
            assert_eq!(err.0, ErrorCode::MissingCommit, "{err:?}");
        }
        s.take_unlinks().run();
        let files: Vec<_> = walk(dir.path()).into_iter().filter(|f| f.is_file()).collect();
        assert!(files.is_empty(), "the dropped block's spill file stayed: {files:?}");
        // A chunk of it still in flight when the drop came is not staged
        // again, nor is the attempt committed; dropped twice, it is
        // recorded once.
        let mut late = vec![Section { partition: 0, records: 1, data: bytes(0, 10) }];
        let id = ChunkId { shuffle: 0, generation: 1, map: 0, attempt: 1, seq: 1, crc: 0 };
        let err = s.push(APP, &id, &mut late).expect_err("a dropped attempt's chunk");
        assert_eq!(err.0, ErrorCode::BadRequest, "{err:?}");
        let err = s.commit(APP, 0, 1, 0, 1, 0, acks_checksum([]), 0).expect_err("commit");
        assert_eq!(err.0, ErrorCode::CommitMismatch, "{err:?}");
        s.drop_attempt(APP, 0, 1, 0, 1).expect("again");
        assert_eq!(s.stats().held_bytes, base + dropped);
        acked(push(&mut s, 2, 1, 1000));
        assert_eq!(s.held, 1000);
    }

    #[test]
    fn a_shuffle_unregistered_while_its_spill_is_written_leaves_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Room for one block's bytes and two entries' bookkeeping.
        let mut s = store(dir.path(), 1000 + 2 * ENTRY_BYTES);
        acked(push(&mut s, 0, 0, 800));
        commit(&mut s, 0);
        let mut j = job(push(&mut s, 1, 0, 800));
        s.unregister(APP, 0).expect("unregister");
        assert_eq!(s.held, 800, "the write still holds the block");
        let w = j.write();
        assert_eq!(w, Ok(800));
        assert_eq!(s.finish_spill(j, w), Ok(800), "freed with the job");
        assert_eq!((s.held, s.spilled), (0, 0));
        // The file is deleted once the lock is let go, not under it.
        let spilled = |d| walk(d).into_iter().filter(|f| f.is_file()).count();
        assert_eq!(spilled(dir.path()), 1, "deleted under the store's lock");
        s.take_unlinks().run();
        let files: Vec<_> = walk(dir.path());
        assert!(files.is_empty(), "the spill file outlived its job: {files:?}");
    }

    #[test]
    fn an_attempt_idle_past_the_limit_is_dropped_and_cannot_commit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = store(dir.path(), 1 << 20);
        acked(push(&mut s, 0, 0, 1000));
        acked(push(&mut s, 1, 0, 500));
        commit(&mut s, 1);
        let now = std::time::Instant::now();
        assert_eq!(s.expire_staged(now), 0, "nothing idle yet");
        // Map 0's task never committed nor dropped what it staged: its
        // chunk goes; map 1's committed block stays.
        assert_eq!(s.expire_staged(now + super::super::STAGED_IDLE_LIMIT), 1);
        assert_eq!(s.held, 500);
        // Its block's entry, the shuffle's and the commit's.
        let entries = 1 + SHUFFLE_ENTRIES + COMMIT_ENTRIES;
        assert_eq!(s.stats().held_bytes, 500 + entries * ENTRY_BYTES);
        let err = s.commit(APP, 0, 1, 0, 1, 1, acks_checksum([(0, 0)]), 1).expect_err("commit");
        assert_eq!(err.0, crate::protocol::ErrorCode::CommitMismatch, "{err:?}");
        assert_eq!(read(&mut s, 0, &[1]), vec![bytes(1, 500)]);
    }

    #[test]
    fn empty_sections_are_charged_to_the_budget() {
        // Each staged section costs ENTRY_BYTES beside its bytes: a chunk
        // of 64 empty sections takes 64 of them, and a second one does not
        // fit a budget of 100 even with no bytes in memory, so it is slowed
        // down without spilling map 1's block (a spill would free its bytes,
        // not the entries). Dropped, the attempt frees them all.
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = store(dir.path(), 100 * ENTRY_BYTES);
        acked(push(&mut s, 1, 1, 1000));
        let empty = || -> Vec<Section> {
            (0..64).map(|p| Section { partition: p % 2, records: 0, data: Vec::new() }).collect()
        };
        let id = |seq| ChunkId { shuffle: 0, generation: 1, map: 0, attempt: 1, seq, crc: seq };
        // The shuffle's bookkeeping besides.
        let base = 1000 + SHUFFLE_ENTRIES * ENTRY_BYTES;
        acked(s.push(APP, &id(0), &mut empty()).expect("push"));
        assert_eq!(s.stats().held_bytes, base + 65 * ENTRY_BYTES);
        let slow = s.push(APP, &id(1), &mut empty()).expect("push");
        assert!(matches!(slow, Pushed::Reply(Message::SlowDown { .. })), "{slow:?}");
        assert_eq!((s.held, s.spilled), (1000, 0), "nothing spilled");
        s.drop_attempt(APP, 0, 1, 0, 1).expect("drop");
        assert_eq!(s.stats().held_bytes, base + (1 + DROP_ENTRIES) * ENTRY_BYTES);
        assert_eq!(s.stats().peak_bytes, base + 65 * ENTRY_BYTES);
        // A chunk with no section at all would be kept for nothing counted.
        let err = s.push(APP, &id(2), &mut Vec::new()).expect_err("no section");
        assert_eq!(err.0, ErrorCode::BadRequest, "{err:?}");
    }

    #[test]
    fn staged_records_are_charged_until_committed_or_let_go() {
        // A map attempt's staged record costs STAGED_ENTRIES beside its
        // sections, from its first chunk until it commits, is dropped or
        // expires; so an application staging one empty section for each of
        // many attempts is slowed down by what it holds (each about 600
        // bytes, not one section's 128).
        let dir = tempfile::tempdir().expect("tempdir");
        let record = STAGED_ENTRIES * ENTRY_BYTES;
        let mut s = Store::new(vec![dir.path().to_path_buf()], 1 << 20, Duration::from_secs(60));
        s.open_app(APP, Duration::from_secs(60));
        s.register(APP, 0, 1, 2).expect("register");
        let base = SHUFFLE_ENTRIES * ENTRY_BYTES;
        let chunk =
            |map, seq| ChunkId { shuffle: 0, generation: 1, map, attempt: 1, seq, crc: seq };
        let one = |n: usize| vec![Section { partition: 0, records: 1, data: vec![7; n] }];
        acked(s.push(APP, &chunk(0, 0), &mut one(100)).expect("push"));
        assert_eq!(s.stats().held_bytes, base + 100 + ENTRY_BYTES + record);
        // A second chunk of the attempt costs its section alone.
        acked(s.push(APP, &chunk(0, 1), &mut one(100)).expect("push"));
        assert_eq!(s.stats().held_bytes, base + 200 + 2 * ENTRY_BYTES + record);
        // Committed: the record goes, the proof comes.
        let acks = acks_checksum([(0, 0), (1, 1)]);
        s.commit(APP, 0, 1, 0, 1, 2, acks, 2).expect("commit");
        let committed = base + 200 + (2 + COMMIT_ENTRIES) * ENTRY_BYTES;
        assert_eq!(s.stats().held_bytes, committed);
        // Dropped or expired: the record goes with the sections.
        acked(s.push(APP, &chunk(1, 0), &mut one(10)).expect("push"));
        s.drop_attempt(APP, 0, 1, 1, 1).expect("drop");
        let dropped = committed + DROP_ENTRIES * ENTRY_BYTES;
        assert_eq!(s.stats().held_bytes, dropped);
        acked(s.push(APP, &chunk(2, 0), &mut one(10)).expect("push"));
        let later = std::time::Instant::now() + super::super::STAGED_IDLE_LIMIT;
        assert_eq!(s.expire_staged(later), 1);
        assert_eq!(s.stats().held_bytes, dropped);
        // Fresh attempts of one empty section each: slowed down once their
        // records fill the budget (the committed block's 200 bytes spilled
        // on the way).
        let mut staged = 0u64;
        loop {
            let id = ChunkId { map: 100 + staged as u32, ..chunk(0, 0) };
            match s.push(APP, &id, &mut one(0)).expect("push") {
                Pushed::Reply(Message::PushAck { .. }) => staged += 1,
                Pushed::Reply(Message::SlowDown { .. }) => break,
                Pushed::Spill(mut j) => {
                    let w = j.write();
                    s.finish_spill(j, w).expect("finish");
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(s.spilled, 200);
        let each = ENTRY_BYTES + record;
        assert_eq!(staged, ((1 << 20) - (dropped - 200)) / each, "{staged} attempts staged");
    }

    #[test]
    fn a_commit_fits_the_bookkeeping_its_staged_record_gives_back() {
        // With the bookkeeping full, a commit still fits: its proof takes
        // fewer entries than the staged record it replaces gives back.
        let dir = tempfile::tempdir().expect("tempdir");
        let budget = 100 * ENTRY_BYTES;
        let mut s = Store::new(vec![dir.path().to_path_buf()], budget, Duration::from_secs(60));
        s.open_app(APP, Duration::from_secs(60));
        s.register(APP, 0, 1, 2).expect("register");
        let empty = |n: u64| -> Vec<Section> {
            (0..n).map(|_| Section { partition: 0, records: 0, data: Vec::new() }).collect()
        };
        let id = |map| ChunkId { shuffle: 0, generation: 1, map, attempt: 1, seq: 0, crc: 0 };
        acked(s.push(APP, &id(0), &mut empty(1)).expect("push"));
        let left = 100 - SHUFFLE_ENTRIES - (1 + STAGED_ENTRIES) - STAGED_ENTRIES;
        acked(s.push(APP, &id(1), &mut empty(left)).expect("push"));
        assert_eq!(s.stats().bookkeeping_bytes, budget, "full");
        s.commit(APP, 0, 1, 0, 1, 1, acks_checksum([(0, 0)]), 0).expect("commit");
        let after = budget - (STAGED_ENTRIES - COMMIT_ENTRIES) * ENTRY_BYTES;
        assert_eq!(s.stats().bookkeeping_bytes, after);
    }

    #[test]
    fn a_drop_that_frees_anything_is_recorded_even_with_the_bookkeeping_full() {
        // The bookkeeping never passes the budget, so a drop that frees at
        // least one entry (a staged section or a commit) always has room
        // for its record; only a drop of an attempt that holds nothing here
        // can find none, and a chunk of that attempt coming after it finds
        // none either until something is let go.
        let dir = tempfile::tempdir().expect("tempdir");
        let budget = 100 * ENTRY_BYTES;
        let mut s = bare_store(dir.path(), budget);
        s.open_app(APP, Duration::from_secs(60));
        s.register(APP, 0, 1, 2).expect("register");
        let empty = |n: u64| -> Vec<Section> {
            (0..n).map(|_| Section { partition: 0, records: 0, data: Vec::new() }).collect()
        };
        let id = |map, attempt| ChunkId { shuffle: 0, generation: 1, map, attempt, seq: 0, crc: 0 };
        acked(s.push(APP, &id(0, 1), &mut empty(100 - SHUFFLE_ENTRIES - 1)).expect("push"));
        acked(s.push(APP, &id(1, 1), &mut empty(1)).expect("push"));
        assert_eq!(s.stats().bookkeeping_bytes, budget, "full");
        // Nothing here to free: the drop is answered, unrecorded, and its
        // late chunk is slowed down, not staged.
        s.drop_attempt(APP, 0, 1, 5, 9).expect("drop");
        assert_eq!(s.stats().bookkeeping_bytes, budget);
        let late = s.push(APP, &id(5, 9), &mut empty(1)).expect("push");
        assert!(matches!(late, Pushed::Reply(Message::SlowDown { .. })), "{late:?}");
        // One section freed: the record takes its place.
        s.drop_attempt(APP, 0, 1, 1, 1).expect("drop");
        assert_eq!(s.stats().bookkeeping_bytes, budget);
        let err = s.push(APP, &id(1, 1), &mut empty(1)).expect_err("a dropped attempt's chunk");
        assert_eq!(err.0, ErrorCode::BadRequest, "{err:?}");
        assert!(err.1.contains("was dropped"), "{}", err.1);
        // A larger attempt's drop: its sections go, one record stays.
        s.drop_attempt(APP, 0, 1, 0, 1).expect("drop");
        let kept = SHUFFLE_ENTRIES + 2 * DROP_ENTRIES;
        assert_eq!(s.stats().bookkeeping_bytes, kept * ENTRY_BYTES);
        // With room again, the unrecorded attempt's late chunk is staged,
        // counted, and let go after the idle limit like any attempt's
        // whose task ended without a drop.
        acked(s.push(APP, &id(5, 9), &mut empty(1)).expect("push"));
        assert_eq!(s.stats().bookkeeping_bytes, (kept + 1) * ENTRY_BYTES);
        let later = std::time::Instant::now() + super::super::STAGED_IDLE_LIMIT;
        assert_eq!(s.expire_staged(later), 1);
        assert_eq!(s.stats().bookkeeping_bytes, kept * ENTRY_BYTES);
    }

    #[test]
    fn commits_and_registrations_are_charged_and_refused_past_the_budget() {
        // Empty commits under fresh attempt ids and registrations under
        // fresh shuffle ids carry no data, but each is kept: charged, and
        // refused once the bookkeeping alone would pass the budget.
        let dir = tempfile::tempdir().expect("tempdir");
        let budget = 100 * ENTRY_BYTES;
        let mut s = bare_store(dir.path(), budget);
        s.open_app(APP, Duration::from_secs(60));
        s.register(APP, 0, 1, 2).expect("register");
        let acks = acks_checksum(std::iter::empty());
        let fits = (100 - SHUFFLE_ENTRIES) / COMMIT_ENTRIES;
        for attempt in 0..fits {
            s.commit(APP, 0, 1, attempt as u32 % 7, attempt, 0, acks, 0).expect("commit");
        }
        assert_eq!((s.stats().held_bytes, s.stats().bookkeeping_bytes), (budget, budget));
        let err = s.commit(APP, 0, 1, 0, fits, 0, acks, 0).expect_err("over the budget");
        assert_eq!(err.0, ErrorCode::Storage, "{err:?}");
        assert!(err.1.contains("bookkeeping"), "{}", err.1);
        let err = s.register(APP, 1, 1, 2).expect_err("over the budget");
        assert_eq!(err.0, ErrorCode::Storage, "{err:?}");
        // Unregistered, the shuffle gives back all of it.
        s.unregister(APP, 0).expect("unregister");
        assert_eq!(s.stats().held_bytes, 0);
        s.register(APP, 1, 1, 2).expect("room again");
        assert_eq!(s.stats().peak_bytes, budget);
    }

    fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).expect("dir").flatten() {
            if e.path().is_dir() {
                out.extend(walk(&e.path()));
            } else {
                out.push(e.path());
            }
        }
        out
    }
}
