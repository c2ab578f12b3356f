//! What a daemon holds: per application (by lease), per shuffle (by
//! generation), each map attempt's pushed chunks staged until the attempt
//! commits, then folded into the reduce partitions the chunks name.
//!
//! ```text
//!  Push ──► staged[(map, attempt)] ──Commit (count, acks CRC, records checked)──► parts[p].blocks
//!                                                                                 │ over budget:
//!  Read(winners) ◄── blocks of the winning attempt per map index ◄── memory ◄─────┴─ spill a whole
//!                                                                    or disk         partition, one write
//! ```
//! Committed attempts are kept side by side until a read names the attempt
//! that won each map index (the commit authority is Spark's map output
//! tracker), so a speculative or retried attempt never adds records, and a
//! winner that never committed here is [`ErrorCode::MissingCommit`]; the
//! first read that names a winner lets the map's other attempts go
//! (`losers`).
//!
//! Bytes are accounted by the store itself: `held` is the staged chunks and
//! partition blocks in memory, and the blocks it let go (a shuffle
//! unregistered, an attempt dropped) that a read's plan or a spill's job
//! still holds, until that holder lets them go; beside it, every staged
//! section and committed block costs [`ENTRY_BYTES`] of bookkeeping,
//! spilled or not, a map attempt's staged record [`STAGED_ENTRIES`] of them
//! until it commits or is let go, a registered shuffle [`SHUFFLE_ENTRIES`]
//! and a committed attempt [`COMMIT_ENTRIES`] (its proof, and its map's
//! decision when a read names a winner), a dropped attempt's record
//! [`DROP_ENTRIES`], charged against the same budget, so a flood
//! of tiny or empty sections, chunks under fresh attempt ids, empty commits under fresh attempt ids or
//! registrations under fresh shuffle ids cannot hold memory the budget does
//! not see. A push carries at least one section. Bookkeeping cannot be
//! spilled: a commit or a registration that would take it alone past the
//! budget is refused [`ErrorCode::Storage`] (under Spark the map's output
//! stays on its executor; the shuffle goes to the other daemons). A push that would take
//! `held` over the budget first spills the owner with the most bytes in
//! memory, a reduce partition or a map attempt's staged chunks (all of its
//! blocks in one sequential write, see `spill`), written without the
//! store's lock (`spill_job`); staged chunks spill too, so map tasks that
//! push more than the budget before they commit never wait on each other. Only when
//! nothing in memory can go (every owner spilling already, or an
//! impossible push larger than the budget) does a push get
//! [`Message::SlowDown`]. A failed spill (a full disk) refuses the push
//! with [`ErrorCode::Storage`]; nothing already acknowledged is dropped.
//! Spill files let go (and the directories of ended applications) are
//! deleted after the lock is let go (`unlinks`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::spill::{Appender, Loc};
use crate::protocol::{acks_checksum, DaemonStats, ErrorCode, Message, Section, Winner};

mod losers;
mod reduced;
mod spill_job;
mod unlinks;
pub(crate) use reduced::REDUCE_DIR_PREFIX;
pub(crate) use spill_job::SpillJob;
pub(crate) use unlinks::Unlinks;

/// A refusal: the code and a message naming what and where.
pub(crate) type Refusal = (ErrorCode, String);

/// How long a pusher is asked to wait when staged chunks fill the budget.
pub(crate) const SLOW_DOWN_MS: u32 = 20;

/// Bytes of memory one staged section or committed block costs the store
/// beside its data, in memory or on disk: its record (`StagedSection`,
/// then `Block`: about 56 bytes with its location), the shared buffer's
/// counts and vector header (40), and the allocator's and the maps' share.
pub const ENTRY_BYTES: u64 = 128;

/// Entries a registered shuffle costs: its record and its maps' tables
/// (four hash and tree maps, about 200 bytes empty).
pub const SHUFFLE_ENTRIES: u64 = 2;

/// Entries a committed attempt costs: its proof in its map's list (the
/// list's slot and allocation, about 150 bytes for a map's first attempt)
/// and its map's decision once a read names a winner.
pub const COMMIT_ENTRIES: u64 = 2;

/// Entries a map attempt's staged record costs beside its sections' (from
/// its first chunk until it is committed or let go): its slot in the
/// shuffle's table of staged attempts (`Staged`, about 90 bytes with the
/// table's slack) and its chunks' tree's first node (about 400 bytes), so
/// that an application staging one small chunk for each of many attempts is
/// charged what it holds.
pub const STAGED_ENTRIES: u64 = 4;

/// Entries a dropped attempt's record costs (one `(map, attempt)` in a
/// hash set, with the set's slack: about 40 bytes).
pub const DROP_ENTRIES: u64 = 1;

// A drop that frees a single staged section has room for its record
// (`Store::drop_attempt`).
const _: () = assert!(DROP_ENTRIES <= 1);

/// How long a map attempt's staged chunks stay with no push before the
/// daemon drops them ([`Store::expire_staged`]): an attempt whose task
/// ended without dropping them (its executor lost, its drop never sent).
/// A commit after that is refused (`CommitMismatch`: the chunks are gone),
/// and the map's output stays on its executor.
pub(crate) const STAGED_IDLE_LIMIT: Duration = Duration::from_secs(30 * 60);

#[derive(Debug)]
pub(crate) struct Store {
    apps: HashMap<String, App>,
    dirs: Vec<PathBuf>,
    budget: u64,
    /// Bytes of blocks in memory: the store's, and those it let go that a
    /// read or a spill's write still holds (`draining`).
    held: u64,
    /// Blocks the store let go (their shuffle unregistered, their attempt
    /// dropped) while a read's plan or a spill's job still held them: their
    /// memory is freed when that holder lets go, and `held` counts them
    /// until [`Store::reap`] sees it has.
    draining: Vec<Arc<Vec<u8>>>,
    /// Staged sections and committed blocks the store keeps (each costs
    /// [`ENTRY_BYTES`]).
    entries: u64,
    /// Entries a map attempt's staged record is charged ([`STAGED_ENTRIES`];
    /// tests of the spill's mechanics set none, so that what they spill
    /// depends on the data alone).
    staged_entries: u64,
    /// The most `held` and the entries' bytes came to together.
    peak: u64,
    spilled: u64,
    /// Chunks staged, attempts committed and reads planned since the start.
    chunks: u64,
    commits: u64,
    reads: u64,
    /// Reads that ran the reduce-side operator, and their records in and out.
    reduced_reads: u64,
    reduced_in: u64,
    reduced_out: u64,
    /// Bytes reduced reads' operators hold beyond their floors.
    reducing: u64,
    max_lease: Duration,
    /// Spill files made so far (each file's name is unique in the store).
    files: u64,
    /// Files and directories let go, deleted without the lock (`unlinks`).
    unlinks: Unlinks,
}

#[derive(Debug)]
struct App {
    lease_until: Instant,
    /// The application's directory name: a hash of its id, so no id
    /// reaches a path.
    tag: String,
    shuffles: HashMap<u32, Shuffle>,
}

#[derive(Debug)]
struct Shuffle {
    generation: u32,
    partitions: u32,
    staged: HashMap<(u32, u64), Staged>,
    /// Per map index, the attempts that committed, each with what its
    /// commit proved (chunks, acknowledgement CRC, records).
    committed: HashMap<u32, Vec<(u64, Proof)>>,
    /// Per map index, the attempt reads named as its winner (see `losers`).
    decided: HashMap<u32, u64>,
    /// Attempts dropped ([`Store::drop_attempt`]), each charged
    /// [`DROP_ENTRIES`]: a push or commit of one is refused, so that chunks
    /// still in flight on the attempt's old connection when its drop came
    /// on another are not staged again.
    dropped: HashSet<(u32, u64)>,
    parts: BTreeMap<u32, Part>,
}

/// What a commit proved: chunk count, acknowledgement CRC, records.
type Proof = (u32, u32, u64);

fn has(v: Option<&Vec<(u64, Proof)>>, attempt: u64) -> bool {
    v.is_some_and(|v| v.iter().any(|(a, _)| *a == attempt))
}

#[derive(Debug, Default)]
struct Staged {
    chunks: BTreeMap<u32, (u32, Vec<StagedSection>)>,
    mem_bytes: u64,
    file: Option<Appender>,
    /// A spill of these chunks is being written (see `spill_job`).
    spilling: bool,
    /// When the attempt's last chunk was staged.
    last_push: Option<Instant>,
    /// Entries its own record was charged ([`Store::staged_entries`], from
    /// its first chunk; none for the empty record a commit of no chunks
    /// finds).
    record_entries: u64,
}

#[derive(Debug)]
struct StagedSection {
    partition: u32,
    records: u64,
    at: Loc,
}

#[derive(Debug, Default)]
struct Part {
    blocks: Vec<Block>,
    mem_bytes: u64,
    file: Option<Appender>,
    /// A spill of this partition is being written (see `spill_job`).
    spilling: bool,
}

#[derive(Debug)]
struct Block {
    map: u32,
    attempt: u64,
    records: u64,
    at: Loc,
}

/// One block of a read, fetched without the store's lock. A read's plan
/// holds one per block it sends, uncounted: it is bounded by the blocks'
/// own bookkeeping, each block charged [`ENTRY_BYTES`], more than a
/// `BlockRef` (checked by a test), and a read holds only blocks of the
/// partitions it names.
#[derive(Debug)]
pub(crate) struct BlockRef {
    pub(crate) partition: u32,
    pub(crate) map: u32,
    pub(crate) records: u64,
    pub(crate) at: Loc,
}

/// Which chunk a push stages: its shuffle and generation, its map attempt,
/// its sequence number in the attempt and the push frame's CRC (returned in
/// the acknowledgement).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChunkId {
    pub(crate) shuffle: u32,
    pub(crate) generation: u32,
    pub(crate) map: u32,
    pub(crate) attempt: u64,
    pub(crate) seq: u32,
    pub(crate) crc: u32,
}

/// What a push comes to: a reply, or a spill to write (without the store's
/// lock) before the push is tried again.
#[derive(Debug)]
pub(crate) enum Pushed {
    Reply(Message),
    Spill(SpillJob),
}

/// What a spill empties: a partition, or a map attempt's staged chunks.
#[derive(Debug)]
enum Owner {
    Part(u32),
    Staged(u32, u64),
}

fn refuse<T>(code: ErrorCode, message: String) -> Result<T, Refusal> {
    Err((code, message))
}

impl Store {
    pub(crate) fn new(dirs: Vec<PathBuf>, budget: u64, max_lease: Duration) -> Store {
        Store {
            apps: HashMap::new(),
            dirs,
            budget,
            held: 0,
            draining: Vec::new(),
            entries: 0,
            staged_entries: STAGED_ENTRIES,
            peak: 0,
            spilled: 0,
            chunks: 0,
            commits: 0,
            reads: 0,
            reduced_reads: 0,
            reduced_in: 0,
            reduced_out: 0,
            reducing: 0,
            max_lease,
            files: 0,
            unlinks: Unlinks::default(),
        }
    }

    /// Opens (or renews) application `app`'s lease; the lease granted.
    pub(crate) fn open_app(&mut self, app: &str, lease: Duration) -> Duration {
        let lease = lease.min(self.max_lease).max(Duration::from_millis(1));
        let until = Instant::now() + lease;
        let tag: String =
            Sha256::digest(app.as_bytes())[..8].iter().map(|b| format!("{b:02x}")).collect();
        let a = self.apps.entry(app.to_owned()).or_insert_with(|| App {
            lease_until: until,
            tag,
            shuffles: HashMap::new(),
        });
        a.lease_until = until;
        lease
    }

    /// Renews a lease by `lease`; false when the application is gone
    /// (its lease lapsed and its data was deleted).
    pub(crate) fn renew(&mut self, app: &str, lease: Duration) -> bool {
        match self.apps.get_mut(app) {
            Some(a) => {
                a.lease_until = Instant::now() + lease.min(self.max_lease);
                true
            }
            None => false,
        }
    }

    /// Deletes the applications whose lease lapsed; their ids.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<String> {
        let gone: Vec<String> = self
            .apps
            .iter()
            .filter(|(_, a)| a.lease_until <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for app in &gone {
            self.end_app(app);
        }
        gone
    }

    /// Drops the staged chunks of the map attempts that staged nothing for
    /// [`STAGED_IDLE_LIMIT`] before `now`; how many attempts.
    pub(crate) fn expire_staged(&mut self, now: Instant) -> usize {
        let idle = |st: &Staged| {
            st.last_push.is_some_and(|t| now.saturating_duration_since(t) >= STAGED_IDLE_LIMIT)
        };
        let mut gone = Vec::new();
        for a in self.apps.values_mut() {
            for s in a.shuffles.values_mut() {
                let keys: Vec<(u32, u64)> =
                    s.staged.iter().filter(|(_, st)| idle(st)).map(|(k, _)| *k).collect();
                gone.extend(keys.iter().filter_map(|k| s.staged.remove(k)));
            }
        }
        let n = gone.len();
        for st in gone {
            self.let_go_staged(st);
        }
        n
    }

    pub(crate) fn end_app(&mut self, app: &str) {
        if let Some(a) = self.apps.remove(app) {
            for (_, s) in a.shuffles {
                self.drop_shuffle(s);
            }
            for d in self.dirs.clone() {
                self.remove_dir_later(d.join(&a.tag));
            }
        }
    }

    /// Frees a shuffle's bytes; its spill files go with their last block.
    fn drop_shuffle(&mut self, s: Shuffle) {
        let commits: u64 = s.committed.values().map(|v| v.len() as u64).sum();
        let dropped = DROP_ENTRIES * s.dropped.len() as u64;
        self.entries -= SHUFFLE_ENTRIES + COMMIT_ENTRIES * commits + dropped;
        for st in s.staged.into_values() {
            self.let_go_staged(st);
        }
        for p in s.parts.into_values() {
            if let Some(f) = p.file {
                self.unlink_later(f.into_file());
            }
            self.let_go(p.blocks.into_iter().map(|b| b.at));
        }
    }

    fn let_go_staged(&mut self, st: Staged) {
        self.entries -= st.record_entries;
        if let Some(f) = st.file {
            self.unlink_later(f.into_file());
        }
        self.let_go(st.chunks.into_values().flat_map(|(_, x)| x).map(|x| x.at));
    }

    /// Lets go what was taken out of the partitions (`losers`).
    fn let_go_taken(&mut self, taken: losers::Taken) {
        for f in taken.files {
            self.unlink_later(f);
        }
        self.let_go(taken.blocks.into_iter());
    }

    /// Takes blocks out of the store's count: one only the store held is
    /// freed now; one a read or a spill's job still holds drains (counted
    /// until it is freed).
    fn let_go(&mut self, blocks: impl Iterator<Item = Loc>) {
        for at in blocks {
            self.entries -= 1;
            match at {
                Loc::Mem(d) if Arc::strong_count(&d) == 1 => self.held -= d.len() as u64,
                Loc::Mem(d) => self.draining.push(d),
                Loc::Disk { file, .. } => self.unlink_later(file),
            }
        }
    }

    /// Frees the draining blocks whose last other holder let go; their
    /// bytes.
    fn reap(&mut self) -> u64 {
        let mut freed = 0;
        self.draining.retain(|d| {
            let alone = Arc::strong_count(d) == 1;
            if alone {
                freed += d.len() as u64;
            }
            !alone
        });
        self.held -= freed;
        freed
    }

    fn app(&mut self, app: &str) -> Result<&mut App, Refusal> {
        match self.apps.get_mut(app) {
            Some(a) => Ok(a),
            None => refuse(ErrorCode::Unauthenticated, format!("application {app}'s lease lapsed")),
        }
    }

    pub(crate) fn register(
        &mut self,
        app: &str,
        shuffle: u32,
        generation: u32,
        partitions: u32,
    ) -> Result<Message, Refusal> {
        let a = self.app(app)?;
        if let Some(s) = a.shuffles.get(&shuffle) {
            if generation < s.generation {
                return refuse(
                    ErrorCode::StaleGeneration,
                    format!(
                        "shuffle {shuffle} generation {generation}: generation {} is registered",
                        s.generation
                    ),
                );
            }
            if generation == s.generation {
                if partitions != s.partitions {
                    return refuse(
                        ErrorCode::BadRequest,
                        format!("shuffle {shuffle} generation {generation} has {} partitions, not {partitions}", s.partitions),
                    );
                }
                return Ok(Message::Ok);
            }
        }
        if let Some(old) = a.shuffles.remove(&shuffle) {
            self.drop_shuffle(old);
        }
        self.bookkeeping_fits(SHUFFLE_ENTRIES, || format!("registering shuffle {shuffle}"))?;
        let a = self.app(app)?;
        let fresh = Shuffle {
            generation,
            partitions,
            staged: HashMap::new(),
            committed: HashMap::new(),
            decided: HashMap::new(),
            dropped: HashSet::new(),
            parts: BTreeMap::new(),
        };
        a.shuffles.insert(shuffle, fresh);
        self.entries += SHUFFLE_ENTRIES;
        self.note_peak();
        Ok(Message::Ok)
    }

    pub(crate) fn unregister(&mut self, app: &str, shuffle: u32) -> Result<Message, Refusal> {
        let a = self.app(app)?;
        if let Some(s) = a.shuffles.remove(&shuffle) {
            self.drop_shuffle(s);
        }
        Ok(Message::Ok)
    }

    /// Drops map attempt `attempt` of map `map` (it will not be read here:
    /// its task ended, or its push failed at another daemon and its output
    /// stays on its executor): what it staged, and what it committed unless
    /// a read here named it as its map's winner (refused: a winner's blocks
    /// are what reads of the map get). A loser let go already, or an attempt
    /// that left nothing here, is nothing to drop. Chunks of it being spilled
    /// stay with the write's job, whose file goes with it (as for a commit
    /// during the write); a committed block being spilled, as a loser's.
    /// A read that names the attempt later is refused
    /// [`ErrorCode::MissingCommit`], a push of it [`ErrorCode::BadRequest`]
    /// and a commit [`ErrorCode::CommitMismatch`]: chunks the attempt had in flight on
    /// another connection when its drop came are not staged again. That
    /// record costs [`DROP_ENTRIES`], taken after what the attempt held is
    /// freed: the bookkeeping never passes the budget, so a drop that frees
    /// a staged section or a commit always has room for it. Only the drop of
    /// an attempt that holds nothing here can find the bookkeeping full; it
    /// is answered unrecorded (a flood of drops under fresh attempt ids
    /// holds no memory), a late chunk of it is slowed down while the
    /// bookkeeping stays full, and one staged once room is freed is counted
    /// and goes after [`STAGED_IDLE_LIMIT`].
    pub(crate) fn drop_attempt(
        &mut self,
        app: &str,
        shuffle: u32,
        generation: u32,
        map: u32,
        attempt: u64,
    ) -> Result<Message, Refusal> {
        let s = Self::shuffle(&mut self.apps, app, shuffle, generation)?;
        if s.decided.get(&map) == Some(&attempt) {
            return refuse(
                ErrorCode::BadRequest,
                format!(
                    "map {map} attempt {attempt} of shuffle {shuffle} is the map's winner: a read \
                     here named it"
                ),
            );
        }
        let staged = s.staged.remove(&(map, attempt));
        let mut blocks = losers::Taken::default();
        let mut commits = 0;
        if !s.decided.contains_key(&map) {
            if let Some(v) = s.committed.get_mut(&map) {
                let before = v.len();
                v.retain(|(a, _)| *a != attempt);
                commits = (before - v.len()) as u64;
                if v.is_empty() {
                    s.committed.remove(&map);
                }
            }
            if commits > 0 {
                blocks = s.take_blocks_of(&HashSet::from([(map, attempt)]));
            }
        }
        if let Some(st) = staged {
            self.let_go_staged(st);
        }
        self.entries -= COMMIT_ENTRIES * commits;
        self.let_go_taken(blocks);
        let fits = self.bookkeeping_fits(DROP_ENTRIES, String::new).is_ok();
        let s = Self::shuffle(&mut self.apps, app, shuffle, generation)?;
        if fits && s.dropped.insert((map, attempt)) {
            self.entries += DROP_ENTRIES;
            self.note_peak();
        }
        Ok(Message::Ok)
    }

    fn shuffle<'s>(
        apps: &'s mut HashMap<String, App>,
        app: &str,
        shuffle: u32,
        generation: u32,
    ) -> Result<&'s mut Shuffle, Refusal> {
        let Some(a) = apps.get_mut(app) else {
            return refuse(ErrorCode::Unauthenticated, format!("application {app}'s lease lapsed"));
        };
        let Some(s) = a.shuffles.get_mut(&shuffle) else {
            return refuse(
                ErrorCode::UnknownShuffle,
                format!("shuffle {shuffle} is not registered by this application"),
            );
        };
        if generation != s.generation {
            let code = if generation < s.generation {
                ErrorCode::StaleGeneration
            } else {
                ErrorCode::UnknownShuffle
            };
            return refuse(
                code,
                format!(
                    "shuffle {shuffle} generation {generation}: generation {} is registered",
                    s.generation
                ),
            );
        }
        Ok(s)
    }

    /// Stages chunk `id` (taking `sections`): its acknowledgement, a
    /// slow-down or a refusal; or, when it does not fit, a spill to write
    /// before it is tried again (`sections` left in place).
    pub(crate) fn push(
        &mut self,
        app: &str,
        id: &ChunkId,
        sections: &mut Vec<Section>,
    ) -> Result<Pushed, Refusal> {
        let ChunkId { shuffle, generation, map, attempt, seq, crc } = *id;
        let s = Self::shuffle(&mut self.apps, app, shuffle, generation)?;
        if sections.is_empty() {
            // Each chunk is kept by its sections' entries: one without any
            // would cost the store memory it does not count.
            return refuse(
                ErrorCode::BadRequest,
                format!("chunk {seq} of map {map} attempt {attempt} carries no section"),
            );
        }
        if let Some(bad) = sections.iter().find(|x| x.partition >= s.partitions) {
            return refuse(
                ErrorCode::BadRequest,
                format!(
                    "partition {} of shuffle {shuffle} with {} partitions",
                    bad.partition, s.partitions
                ),
            );
        }
        if has(s.committed.get(&map), attempt) {
            return refuse(
                ErrorCode::BadRequest,
                format!("map {map} attempt {attempt} of shuffle {shuffle} already committed"),
            );
        }
        if s.dropped.contains(&(map, attempt)) {
            return refuse(
                ErrorCode::BadRequest,
                format!("map {map} attempt {attempt} of shuffle {shuffle} was dropped"),
            );
        }
        if let Some((old, _)) = s.staged.get(&(map, attempt)).and_then(|st| st.chunks.get(&seq)) {
            if *old == crc {
                return Ok(Pushed::Reply(Message::PushAck { seq, crc }));
            }
            return refuse(
                ErrorCode::BadRequest,
                format!(
                    "chunk {seq} of map {map} attempt {attempt} pushed twice with different bytes"
                ),
            );
        }
        let bytes: u64 = sections.iter().map(|x| x.data.len() as u64).sum();
        let record = if s.staged.contains_key(&(map, attempt)) { 0 } else { self.staged_entries };
        let entries = sections.len() as u64 + record;
        self.reap();
        let floor = self.entry_bytes(self.entries + entries) + bytes;
        if self.held + floor > self.budget {
            if floor > self.budget {
                // A spill frees blocks' bytes, never their entries: with
                // nothing in memory the push would not fit either.
                return Ok(Pushed::Reply(Message::SlowDown { retry_after_ms: SLOW_DOWN_MS }));
            }
            return Ok(match self.begin_spill() {
                Some(job) => Pushed::Spill(job),
                None => Pushed::Reply(Message::SlowDown { retry_after_ms: SLOW_DOWN_MS }),
            });
        }
        let s = Self::shuffle(&mut self.apps, app, shuffle, generation)?;
        let st = s.staged.entry((map, attempt)).or_default();
        let sections = std::mem::take(sections)
            .into_iter()
            .map(|x| StagedSection {
                partition: x.partition,
                records: x.records,
                at: Loc::Mem(Arc::new(x.data)),
            })
            .collect();
        st.record_entries += record;
        st.chunks.insert(seq, (crc, sections));
        st.last_push = Some(Instant::now());
        st.mem_bytes += bytes;
        self.held += bytes;
        self.entries += entries;
        self.note_peak();
        self.chunks += 1;
        Ok(Pushed::Reply(Message::PushAck { seq, crc }))
    }

    /// Commits a map attempt after checking what it proves against what is
    /// staged; its chunks go to their partitions.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn commit(
        &mut self,
        app: &str,
        shuffle: u32,
        generation: u32,
        map: u32,
        attempt: u64,
        chunks: u32,
        acks_crc: u32,
        records: u64,
    ) -> Result<Message, Refusal> {
        let s = Self::shuffle(&mut self.apps, app, shuffle, generation)?;
        if let Some((_, proved)) =
            s.committed.get(&map).and_then(|v| v.iter().find(|(a, _)| *a == attempt))
        {
            // The same commit again (a retried request) is answered; another
            // proof for a committed attempt is not.
            if *proved == (chunks, acks_crc, records) {
                return Ok(Message::Committed { first: false });
            }
            return refuse(
                ErrorCode::CommitMismatch,
                format!(
                    "map {map} attempt {attempt} of shuffle {shuffle} committed with another proof"
                ),
            );
        }
        if s.dropped.contains(&(map, attempt)) {
            return refuse(
                ErrorCode::CommitMismatch,
                format!("map {map} attempt {attempt} of shuffle {shuffle} was dropped"),
            );
        }
        let st = s.staged.remove(&(map, attempt)).unwrap_or_default();
        let seqs: Vec<u32> = st.chunks.keys().copied().collect();
        // Checked: the counts came over the network (a sum that overflows
        // matches no commit).
        let staged_records = st
            .chunks
            .values()
            .flat_map(|(_, x)| x.iter().map(|x| x.records))
            .try_fold(0u64, u64::checked_add);
        let staged_crc = acks_checksum(st.chunks.iter().map(|(seq, (crc, _))| (*seq, *crc)));
        let contiguous = seqs.iter().copied().eq(0..chunks);
        if !contiguous || staged_crc != acks_crc || staged_records != Some(records) {
            // A failed commit's chunks are dropped: the attempt fails and
            // its retry pushes again.
            self.let_go_staged(st);
            return refuse(
                ErrorCode::CommitMismatch,
                format!(
                    "map {map} attempt {attempt} of shuffle {shuffle}: commit names {chunks} chunks (acks CRC {acks_crc:#010x}, {records} records), \
                     the daemon staged {} (acks CRC {staged_crc:#010x}, {} records)",
                    seqs.len(),
                    staged_records.map_or_else(|| "over 2^64".to_owned(), |n| n.to_string())
                ),
            );
        }
        let proof = (chunks, acks_crc, records);
        let what = || format!("committing map {map} attempt {attempt} of shuffle {shuffle}");
        // The attempt's staged record goes as its proof comes: only what
        // the commit adds beyond it must fit.
        let adds = COMMIT_ENTRIES.saturating_sub(st.record_entries);
        if let Err(r) = self.bookkeeping_fits(adds, what) {
            self.let_go_staged(st);
            return Err(r);
        }
        let s = Self::shuffle(&mut self.apps, app, shuffle, generation)?;
        if s.decided_against(map, attempt) {
            // Reads named another attempt of this map: this one can never
            // be read here. Refused, so that its map task does not report
            // it at the service (whose reads of it would fail and rerun the
            // whole map stage) but keeps its output where it ran.
            self.let_go_staged(st);
            return refuse(
                ErrorCode::Superseded,
                format!(
                    "map {map} attempt {attempt} of shuffle {shuffle}: a read here named another \
                     attempt of the map as its winner"
                ),
            );
        }
        // The staged bytes in memory become the partitions' (held stays);
        // the staged record goes.
        let record = st.record_entries;
        for (_, (_, sections)) in st.chunks {
            for x in sections {
                let part = s.parts.entry(x.partition).or_default();
                part.mem_bytes += x.at.mem_bytes();
                part.blocks.push(Block { map, attempt, records: x.records, at: x.at });
            }
        }
        let v = s.committed.entry(map).or_default();
        v.push((attempt, proof));
        let first = v.len() == 1;
        self.entries = self.entries + COMMIT_ENTRIES - record;
        self.note_peak();
        self.commits += 1;
        Ok(Message::Committed { first })
    }

    /// The blocks of partitions `start..end` that the winners wrote, in
    /// partition order, each partition's in commit order.
    pub(crate) fn read_plan(
        &mut self,
        app: &str,
        shuffle: u32,
        generation: u32,
        start: u32,
        end: u32,
        winners: &[Winner],
    ) -> Result<Vec<BlockRef>, Refusal> {
        let s = Self::shuffle(&mut self.apps, app, shuffle, generation)?;
        if end > s.partitions {
            return refuse(
                ErrorCode::BadRequest,
                format!("partitions {start}..{end} of shuffle {shuffle} with {}", s.partitions),
            );
        }
        let mut chosen: HashSet<(u32, u64)> = HashSet::with_capacity(winners.len());
        let mut maps = HashSet::with_capacity(winners.len());
        for w in winners {
            if !maps.insert(w.map) {
                return refuse(ErrorCode::BadRequest, format!("map {} is named twice", w.map));
            }
            if s.let_go_as_loser(w.map, w.attempt) {
                return refuse(
                    ErrorCode::MissingCommit,
                    format!(
                        "map {} attempt {} of shuffle {shuffle} was let go here: a read named \
                         another attempt as the map's winner",
                        w.map, w.attempt
                    ),
                );
            }
            if !has(s.committed.get(&w.map), w.attempt) {
                return refuse(
                    ErrorCode::MissingCommit,
                    format!(
                        "map {} attempt {} of shuffle {shuffle} did not commit at this daemon",
                        w.map, w.attempt
                    ),
                );
            }
            chosen.insert((w.map, w.attempt));
        }
        let losers = s.decide(winners);
        let mut plan = Vec::new();
        for (&p, part) in s.parts.range(start..end) {
            for b in part.blocks.iter().filter(|b| chosen.contains(&(b.map, b.attempt))) {
                plan.push(BlockRef {
                    partition: p,
                    map: b.map,
                    records: b.records,
                    at: b.at.clone(),
                });
            }
        }
        self.reads += 1;
        self.let_go_taken(losers);
        Ok(plan)
    }

    /// The bookkeeping bytes of `entries` entries.
    fn entry_bytes(&self, entries: u64) -> u64 {
        entries.saturating_mul(ENTRY_BYTES)
    }

    /// Whether `more` entries of bookkeeping fit the budget beside those
    /// kept (data can be spilled to make room, bookkeeping cannot); a
    /// refusal naming `what` when they do not.
    fn bookkeeping_fits(&self, more: u64, what: impl Fn() -> String) -> Result<(), Refusal> {
        if self.entry_bytes(self.entries + more) <= self.budget {
            return Ok(());
        }
        refuse(
            ErrorCode::Storage,
            format!(
                "{}: the daemon's bookkeeping ({} entries of {ENTRY_BYTES} bytes) holds its \
                 memory budget of {} bytes",
                what(),
                self.entries,
                self.budget
            ),
        )
    }

    /// Memory the store holds: the blocks' bytes and their entries'.
    pub(super) fn total_held(&self) -> u64 {
        self.held + self.entry_bytes(self.entries)
    }

    /// Raises the peak to what the store holds now.
    pub(super) fn note_peak(&mut self) {
        self.peak = self.peak.max(self.total_held());
    }

    pub(crate) fn stats(&mut self) -> DaemonStats {
        self.reap();
        DaemonStats {
            held_bytes: self.total_held(),
            bookkeeping_bytes: self.entry_bytes(self.entries),
            peak_bytes: self.peak,
            spilled_bytes: self.spilled,
            budget_bytes: self.budget,
            chunks: self.chunks,
            commits: self.commits,
            reads: self.reads,
            reduced_reads: self.reduced_reads,
            reduced_in: self.reduced_in,
            reduced_out: self.reduced_out,
            ..DaemonStats::default()
        }
    }
}
