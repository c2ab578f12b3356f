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
//! Committed attempts are kept side by side; a read names the attempt that
//! won each map index (the commit authority is Spark's map output
//! tracker), so a speculative or retried attempt never adds records, and a
//! winner that never committed here is [`ErrorCode::MissingCommit`].
//!
//! Bytes are accounted by the store itself: `held` is staged chunks plus
//! partition blocks in memory. A push that would take `held` over the
//! budget first spills the partition with the most bytes in memory (all of
//! its blocks in one sequential write, each block's CRC32C kept and checked
//! on read); if staged chunks alone fill the budget the push gets
//! [`Message::SlowDown`]. A failed spill (a full disk) refuses the push
//! with [`ErrorCode::Storage`]; nothing already acknowledged is dropped.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use sluice_core::format::checksum::crc32c;

use crate::protocol::{acks_checksum, ErrorCode, Message, Section, Winner};

/// A refusal: the code and a message naming what and where.
pub(crate) type Refusal = (ErrorCode, String);

/// How long a pusher is asked to wait when staged chunks fill the budget.
pub(crate) const SLOW_DOWN_MS: u32 = 20;

#[derive(Debug)]
pub(crate) struct Store {
    apps: HashMap<String, App>,
    dirs: Vec<PathBuf>,
    budget: u64,
    held: u64,
    peak: u64,
    spilled: u64,
    max_lease: Duration,
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
    committed: HashMap<u32, Vec<u64>>,
    parts: BTreeMap<u32, Part>,
}

#[derive(Debug, Default)]
struct Staged {
    chunks: BTreeMap<u32, (u32, Vec<Section>)>,
    bytes: u64,
}

#[derive(Debug, Default)]
struct Part {
    blocks: Vec<Block>,
    mem_bytes: u64,
    file: Option<PartFile>,
}

#[derive(Debug)]
struct PartFile {
    path: PathBuf,
    file: Arc<File>,
    len: u64,
}

#[derive(Debug)]
struct Block {
    map: u32,
    attempt: u64,
    records: u64,
    at: Loc,
}

#[derive(Debug)]
enum Loc {
    Mem(Arc<Vec<u8>>),
    Disk { offset: u64, len: u32, crc: u32 },
}

/// One block of a read, to be fetched without the store's lock.
#[derive(Debug)]
pub(crate) struct BlockRef {
    pub(crate) partition: u32,
    pub(crate) map: u32,
    pub(crate) records: u64,
    pub(crate) at: BlockAt,
}

#[derive(Debug)]
pub(crate) enum BlockAt {
    Mem(Arc<Vec<u8>>),
    Disk { file: Arc<File>, path: PathBuf, offset: u64, len: u32, crc: u32 },
}

impl BlockRef {
    /// The block's bytes, a disk block checked against its CRC32C.
    pub(crate) fn fetch(&self) -> Result<Vec<u8>, Refusal> {
        match &self.at {
            BlockAt::Mem(b) => Ok(b.to_vec()),
            BlockAt::Disk { file, path, offset, len, crc } => {
                let mut buf = vec![0u8; *len as usize];
                file.read_exact_at(&mut buf, *offset).map_err(|e| {
                    (
                        ErrorCode::Storage,
                        format!("reading {} at offset {offset}: {e}", path.display()),
                    )
                })?;
                let actual = crc32c(&buf);
                if actual != *crc {
                    return Err((
                        ErrorCode::Corrupt,
                        format!(
                            "{} at offset {offset}, {len} bytes: CRC32C {actual:#010x}, stored {crc:#010x}",
                            path.display()
                        ),
                    ));
                }
                Ok(buf)
            }
        }
    }
}

fn refuse<T>(code: ErrorCode, message: String) -> Result<T, Refusal> {
    Err((code, message))
}

impl Store {
    pub(crate) fn new(dirs: Vec<PathBuf>, budget: u64, max_lease: Duration) -> Store {
        Store { apps: HashMap::new(), dirs, budget, held: 0, peak: 0, spilled: 0, max_lease }
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

    pub(crate) fn end_app(&mut self, app: &str) {
        if let Some(a) = self.apps.remove(app) {
            for (_, s) in a.shuffles {
                self.drop_shuffle(s);
            }
            for d in &self.dirs {
                let _ = std::fs::remove_dir(d.join(&a.tag));
            }
        }
    }

    fn drop_shuffle(&mut self, s: Shuffle) {
        self.held -= s.staged.values().map(|st| st.bytes).sum::<u64>();
        for (_, p) in s.parts {
            self.held -= p.mem_bytes;
            if let Some(f) = p.file {
                let _ = std::fs::remove_file(&f.path);
            }
        }
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
        let fresh = Shuffle {
            generation,
            partitions,
            staged: HashMap::new(),
            committed: HashMap::new(),
            parts: BTreeMap::new(),
        };
        if let Some(old) = a.shuffles.insert(shuffle, fresh) {
            self.drop_shuffle(old);
        }
        Ok(Message::Ok)
    }

    pub(crate) fn unregister(&mut self, app: &str, shuffle: u32) -> Result<Message, Refusal> {
        let a = self.app(app)?;
        if let Some(s) = a.shuffles.remove(&shuffle) {
            self.drop_shuffle(s);
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

    /// Stages one chunk; its acknowledgement, a slow-down, or a refusal.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push(
        &mut self,
        app: &str,
        shuffle: u32,
        generation: u32,
        map: u32,
        attempt: u64,
        seq: u32,
        sections: Vec<Section>,
        crc: u32,
    ) -> Result<Message, Refusal> {
        let s = Self::shuffle(&mut self.apps, app, shuffle, generation)?;
        if let Some(bad) = sections.iter().find(|x| x.partition >= s.partitions) {
            return refuse(
                ErrorCode::BadRequest,
                format!(
                    "partition {} of shuffle {shuffle} with {} partitions",
                    bad.partition, s.partitions
                ),
            );
        }
        if s.committed.get(&map).is_some_and(|v| v.contains(&attempt)) {
            return refuse(
                ErrorCode::BadRequest,
                format!("map {map} attempt {attempt} of shuffle {shuffle} already committed"),
            );
        }
        if let Some((old, _)) = s.staged.get(&(map, attempt)).and_then(|st| st.chunks.get(&seq)) {
            if *old == crc {
                return Ok(Message::PushAck { seq, crc });
            }
            return refuse(
                ErrorCode::BadRequest,
                format!(
                    "chunk {seq} of map {map} attempt {attempt} pushed twice with different bytes"
                ),
            );
        }
        let bytes: u64 = sections.iter().map(|x| x.data.len() as u64).sum();
        while self.held + bytes > self.budget {
            match self.spill_largest() {
                Ok(true) => {}
                Ok(false) => return Ok(Message::SlowDown { retry_after_ms: SLOW_DOWN_MS }),
                Err(e) => return Err(e),
            }
        }
        let s = Self::shuffle(&mut self.apps, app, shuffle, generation)?;
        let st = s.staged.entry((map, attempt)).or_default();
        st.chunks.insert(seq, (crc, sections));
        st.bytes += bytes;
        self.held += bytes;
        self.peak = self.peak.max(self.held);
        Ok(Message::PushAck { seq, crc })
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
        if s.committed.get(&map).is_some_and(|v| v.contains(&attempt)) {
            return Ok(Message::Committed { first: false });
        }
        let st = s.staged.remove(&(map, attempt)).unwrap_or_default();
        let seqs: Vec<u32> = st.chunks.keys().copied().collect();
        let staged_records: u64 =
            st.chunks.values().flat_map(|(_, x)| x.iter().map(|x| x.records)).sum();
        let staged_crc = acks_checksum(st.chunks.iter().map(|(seq, (crc, _))| (*seq, *crc)));
        let contiguous = seqs.iter().copied().eq(0..chunks);
        if !contiguous || staged_crc != acks_crc || staged_records != records {
            let held = st.bytes;
            // A failed commit's chunks are dropped: the attempt fails and
            // its retry pushes again.
            self.held -= held;
            return refuse(
                ErrorCode::CommitMismatch,
                format!(
                    "map {map} attempt {attempt} of shuffle {shuffle}: commit names {chunks} chunks (acks CRC {acks_crc:#010x}, {records} records), \
                     the daemon staged {} (acks CRC {staged_crc:#010x}, {staged_records} records)",
                    seqs.len()
                ),
            );
        }
        for (_, (_, sections)) in st.chunks {
            for x in sections {
                let part = s.parts.entry(x.partition).or_default();
                part.mem_bytes += x.data.len() as u64;
                part.blocks.push(Block {
                    map,
                    attempt,
                    records: x.records,
                    at: Loc::Mem(Arc::new(x.data)),
                });
            }
        }
        let v = s.committed.entry(map).or_default();
        v.push(attempt);
        Ok(Message::Committed { first: v.len() == 1 })
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
            if !s.committed.get(&w.map).is_some_and(|v| v.contains(&w.attempt)) {
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
        let mut plan = Vec::new();
        for (&p, part) in s.parts.range(start..end) {
            for b in part.blocks.iter().filter(|b| chosen.contains(&(b.map, b.attempt))) {
                let at = match &b.at {
                    Loc::Mem(d) => BlockAt::Mem(d.clone()),
                    Loc::Disk { offset, len, crc } => {
                        let Some(f) = &part.file else {
                            return refuse(
                                ErrorCode::Storage,
                                format!("partition {p} has disk blocks and no file"),
                            );
                        };
                        BlockAt::Disk {
                            file: f.file.clone(),
                            path: f.path.clone(),
                            offset: *offset,
                            len: *len,
                            crc: *crc,
                        }
                    }
                };
                plan.push(BlockRef { partition: p, map: b.map, records: b.records, at });
            }
        }
        Ok(plan)
    }

    /// Spills the partition with the most bytes in memory; false when no
    /// partition holds any (only staged chunks are held).
    fn spill_largest(&mut self) -> Result<bool, Refusal> {
        let mut best: Option<(u64, String, u32, u32)> = None;
        for (id, a) in &self.apps {
            for (&sh, s) in &a.shuffles {
                for (&p, part) in &s.parts {
                    if part.mem_bytes > best.as_ref().map_or(0, |b| b.0) {
                        best = Some((part.mem_bytes, id.clone(), sh, p));
                    }
                }
            }
        }
        let Some((_, app, sh, p)) = best else { return Ok(false) };
        let dirs = self.dirs.clone();
        let a = self
            .apps
            .get_mut(&app)
            .ok_or((ErrorCode::Storage, "spill target vanished".to_owned()))?;
        let tag = a.tag.clone();
        let s = a
            .shuffles
            .get_mut(&sh)
            .ok_or((ErrorCode::Storage, "spill target vanished".to_owned()))?;
        let generation = s.generation;
        let part =
            s.parts.get_mut(&p).ok_or((ErrorCode::Storage, "spill target vanished".to_owned()))?;
        let freed = spill(part, &dirs, &tag, sh, generation, p)?;
        self.held -= freed;
        self.spilled += freed;
        Ok(true)
    }

    pub(crate) fn stats(&self) -> Message {
        Message::StatsReply {
            held_bytes: self.held,
            peak_bytes: self.peak,
            spilled_bytes: self.spilled,
            budget_bytes: self.budget,
        }
    }
}

/// Writes all of a partition's in-memory blocks to its file in one write;
/// the bytes freed.
fn spill(
    part: &mut Part,
    dirs: &[PathBuf],
    tag: &str,
    shuffle: u32,
    generation: u32,
    p: u32,
) -> Result<u64, Refusal> {
    let storage = |path: &Path, e: std::io::Error| {
        (ErrorCode::Storage, format!("spilling to {}: {e}", path.display()))
    };
    if part.file.is_none() {
        let dir = dirs[(shuffle as usize).wrapping_mul(31).wrapping_add(p as usize) % dirs.len()]
            .join(tag);
        std::fs::create_dir_all(&dir).map_err(|e| storage(&dir, e))?;
        let path = dir.join(format!("s{shuffle}-g{generation}-p{p}.data"));
        let file = File::options()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| storage(&path, e))?;
        part.file = Some(PartFile { path, file: Arc::new(file), len: 0 });
    }
    let Some(f) = part.file.as_mut() else { return Ok(0) };
    let mut buf = Vec::with_capacity(part.mem_bytes as usize);
    let mut placed = Vec::new();
    for (i, b) in part.blocks.iter().enumerate() {
        if let Loc::Mem(d) = &b.at {
            placed.push((i, f.len + buf.len() as u64, d.len() as u32, crc32c(d)));
            buf.extend_from_slice(d);
        }
    }
    // At the file's recorded end, so a write a full disk cut short is
    // overwritten by the next spill rather than left between blocks.
    f.file.write_all_at(&buf, f.len).map_err(|e| storage(&f.path, e))?;
    f.len += buf.len() as u64;
    for (i, offset, len, crc) in placed {
        part.blocks[i].at = Loc::Disk { offset, len, crc };
    }
    let freed = part.mem_bytes;
    part.mem_bytes = 0;
    Ok(freed)
}
