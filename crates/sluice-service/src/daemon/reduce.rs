//! A reduced read: the daemon runs the shuffle's reduce-side operator (an
//! aggregate's final table, a sort's merge of the map side's runs) over
//! the winners' blocks of each partition and streams the results, so a
//! reduce task receives one segment per partition instead of one per map
//! (SmartShuffle's second round on the receiving node).
//!
//! ```text
//!  partition p: winners' segments (pieces as pushed, memory or disk)
//!      ──► SegmentFeed (each block and trailer checked as a reduce task checks them)
//!      ──► ReduceTask (memory: its floor, then the budget's headroom; spills to r<n>/)
//!      ──► finish: the grant cut to what the results use (memory, runs' read buffers)
//!      ──► SegmentEncoder ──► Data { p, REDUCED_MAP } frames, trailer last
//!  after the last partition: End { blocks, records, bytes }
//! ```
//! Each winner's segment must end with its trailer and match it (records,
//! blocks, CRC32C), and carry the records its pushes named where they
//! named any, so a block lost between commit and read is `Corrupt`, never
//! a short result.
//! The operator's results are the records the map side would have written
//! had it seen every map's input (an aggregate's partial states, a sort's
//! records), so the reduce task's own operator takes them as it takes any
//! segment; for an aggregate each key arrives once, for a sort one run.
//! The work runs on the connection's worker in `block_in_place`, one
//! partition at a time; only one partition's operator is open at once.
//! Beside the operator's grant from the store, a read holds frame memory
//! (`frames.rs`): a spilled block's bytes until it is fed, and each batch
//! of results with its encoded blocks until they are sent.

use std::path::{Path, PathBuf};

use sluice_core::format::codec::Codec;
use sluice_core::reorg::{StageSpec, EMIT_BATCH_BYTES};
use sluice_engine::reduce::{ReduceTask, SegmentEncoder, SegmentFeed};
use sluice_engine::{EngineError, REDUCE_STATE_FLOOR_BYTES};
use tokio::io::BufWriter;
use tokio::net::tcp::OwnedWriteHalf;

use super::frames::FrameBytes;
use super::store::{BlockRef, Refusal};
use super::{trim, Shared};
use crate::protocol::limits::PUSH_CHUNK_BYTES;
use crate::protocol::{frame, ErrorCode, Message, ProtocolError, REDUCED_MAP};

type Out = BufWriter<OwnedWriteHalf>;

/// The codec of the blocks a reduced read sends: LZ4, a map task's default,
/// so its results cross the network compressed as a plain read's blocks do
/// (uncompressed blocks took a quarter less of the daemons' CPU on a
/// loopback TeraSort, where bytes cost nothing; a network is why the
/// second round runs here at all).
const REDUCED_CODEC: Codec = Codec::Lz4;

/// The most bytes of a block one `Data` frame carries: a block of a larger
/// record goes in several frames (a reader concatenates a segment's
/// frames), each far below the frame limit.
const REDUCED_FRAME_BYTES: usize = PUSH_CHUNK_BYTES;

/// Frame memory a reduced read takes for each batch of its results before
/// the batch is made: what a batch of [`EMIT_BATCH_BYTES`] (an operator's
/// output batch, at most that but for a single larger record) and its
/// blocks hold ([`result_frame_bytes`]).
const RESULT_BATCH_FRAME_BYTES: u32 = result_frame_bytes(EMIT_BATCH_BYTES) as u32;

/// What a batch of `payload` result bytes and the blocks encoded from it
/// hold at most: the batch, and its blocks at LZ4's worst (`lz4_flex`
/// bounds a block at a tenth over its input and 20 bytes) with a header
/// each, at most one block per
/// [`BLOCK_TARGET_BYTES`](sluice_engine::output::file::BLOCK_TARGET_BYTES)
/// and one more; an
/// eighth and 64 KiB cover both up to a batch of 1 GiB, and the eighth
/// alone beyond.
const fn result_frame_bytes(payload: usize) -> u64 {
    let n = payload as u64;
    2 * n + n / 8 + (64 << 10)
}

/// `bytes` of frame memory for a reduced read's results, waiting at most
/// the stream's stall limit; past that the read is refused
/// [`ErrorCode::Busy`]. The read holds its operator's grant meanwhile:
/// nothing that holds frame memory waits for the store's (a push that
/// finds the store full is answered at once), so the wait closes no cycle.
async fn result_frames(
    shared: &Shared,
    shuffle: u32,
    p: u32,
    bytes: u32,
) -> Result<FrameBytes, Refusal> {
    let what = "frame memory for a reduced read's results";
    shared
        .frames
        .take(bytes, shared.stream_stall, what)
        .await
        .map_err(|e| (ErrorCode::Busy, format!("sending partition {p} of shuffle {shuffle}: {e}")))
}

/// A refusal for an engine error: a spill that failed is `Storage`, an
/// operator the daemon cannot run `BadRequest`, anything else (a block or
/// trailer that failed its checks, records the operator cannot take)
/// `Corrupt`.
fn refusal(shuffle: u32, p: u32, e: EngineError) -> Refusal {
    let code = match e {
        EngineError::Io { .. } | EngineError::Spill(_) | EngineError::Thread(_) => {
            ErrorCode::Storage
        }
        EngineError::Argument(_) => ErrorCode::BadRequest,
        _ => ErrorCode::Corrupt,
    };
    (code, format!("reducing partition {p} of shuffle {shuffle}: {e}"))
}

/// The memory one partition's operator holds from the store: its floor and
/// what it was granted beyond it.
struct Held<'a> {
    shared: &'a Shared,
    floor: u64,
    granted: u64,
}

impl Held<'_> {
    /// Gives back what the operator no longer uses once its input has
    /// ended: for results merged from spilled runs, all but the runs' read
    /// buffers (state is on disk); for results kept in memory, the batches
    /// already sent. `keep` is what the finished operator still uses
    /// ([`in_use`]); the grant goes first, then the floor (no more input
    /// comes that would need it). It only ever gives back.
    fn trim_to(&mut self, keep: u64) {
        let granted = self.granted.min(keep);
        let floor = self.floor.min(keep - granted);
        if granted < self.granted || floor < self.floor {
            self.shared.store().release_reduce(self.floor - floor, self.granted - granted);
            (self.floor, self.granted) = (floor, granted);
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.shared.store().release_reduce(self.floor, self.granted);
    }
}

/// What a finished operator uses while its results are sent: the results
/// it holds in memory and the read buffers of the runs it merges from disk
/// (what those are at most), so that the budget still counts them.
fn in_use(task: &ReduceTask) -> u64 {
    (task.held_bytes() + task.read_buffer_bytes()) as u64
}

/// A reduced read's spill directory, removed with what is in it when the
/// read ends, however it ends.
pub(super) struct ReduceDir(pub(super) PathBuf);

impl Drop for ReduceDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A spilled block's bytes, taken from the frame memory before it is read
/// back (as a plain read's stream takes them) and held until it is fed,
/// waiting at most the stream's stall limit; past that the read is
/// refused [`ErrorCode::Busy`]. Called on a `block_in_place` thread, which
/// may block on the runtime; the wait holds no frame memory, so it closes
/// no cycle.
fn frame_bytes(shared: &Shared, shuffle: u32, b: &BlockRef) -> Result<FrameBytes, Refusal> {
    let what = "frame memory for a reduced read";
    let wait = shared.frames.take(b.at.disk_bytes(), shared.stream_stall, what);
    tokio::runtime::Handle::current().block_on(wait).map_err(|e| {
        let p = b.partition;
        (
            ErrorCode::Busy,
            format!("reading back a block of partition {p} of shuffle {shuffle}: {e}"),
        )
    })
}

/// Feeds partition `p`'s blocks (`part`, each winner's consecutive) into a
/// fresh operator and finishes it; returns it with the records it took.
fn reduce_partition(
    shared: &Shared,
    shuffle: u32,
    spec: &StageSpec,
    part: &[BlockRef],
    dir: &Path,
    held: &mut Held<'_>,
) -> Result<(ReduceTask, u64), Refusal> {
    let p = part[0].partition;
    let bad = |e| refusal(shuffle, p, e);
    let mut task = ReduceTask::open(spec, p..p + 1, dir).map_err(bad)?;
    if !matches!(spec, StageSpec::Sort) {
        held.floor = REDUCE_STATE_FLOOR_BYTES as u64;
        shared.store().hold_reduce_floor(held.floor);
    }
    let mut grant = |short: usize| {
        let got = shared.store().reserve_reduce(short as u64, held.granted);
        held.granted += got;
        got as usize
    };
    let mut took = 0u64;
    let mut i = 0;
    while i < part.len() {
        let map = part[i].map;
        let n = part[i..].iter().take_while(|b| b.map == map).count();
        let mut feed = SegmentFeed::new(shuffle, map, p);
        let mut committed = 0u64;
        for b in &part[i..i + n] {
            let _frame = frame_bytes(shared, shuffle, b)?;
            let data = b.at.fetch()?;
            if b.at.mem_bytes() == 0 {
                trim::freed(data.len() as u64);
            }
            committed += b.records;
            feed.take(&data, &mut task, &mut grant).map_err(bad)?;
        }
        let records = feed.end().map_err(bad)?;
        // A pusher that counted records names them (Spark's pushes leave
        // the count to the segment's trailer, checked above, and name 0).
        if committed > 0 && records != committed {
            return Err((
                ErrorCode::Corrupt,
                format!(
                    "partition {p} of shuffle {shuffle}, map {map}: its segment holds {records} \
                     records, its commit named {committed}"
                ),
            ));
        }
        took += records;
        i += n;
    }
    // An operator that ran short of memory merges its runs from disk as
    // its results are read, a batch at a time.
    task.finish().map_err(bad)?;
    Ok((task, took))
}

/// Streams partitions of `plan` (in partition order, each winner's blocks
/// consecutive) reduced by `spec`, spilling under `dir`; then `End`.
pub(super) async fn stream(
    shared: &Shared,
    shuffle: u32,
    spec: &StageSpec,
    plan: Vec<BlockRef>,
    dir: &Path,
    out: &mut Out,
) -> Result<(), ProtocolError> {
    let (mut blocks, mut records, mut bytes, mut took) = (0u64, 0u64, 0u64, 0u64);
    let mut plan = plan.into_iter().peekable();
    while let Some(first) = plan.next() {
        let p = first.partition;
        let mut part = vec![first];
        while let Some(b) = plan.next_if(|b| b.partition == p) {
            part.push(b);
        }
        let mut held = Held { shared, floor: 0, granted: 0 };
        let reduced = tokio::task::block_in_place(|| {
            reduce_partition(shared, shuffle, spec, &part, dir, &mut held)
        });
        // The partition's input blocks are let go once reduced (a spill may
        // then take them), not held while its results stream.
        drop(part);
        let (mut task, fed) = match reduced {
            Ok(r) => r,
            Err(r) => return super::conn::refuse(out, r).await,
        };
        took += fed;
        held.trim_to(in_use(&task));
        let mut enc = match SegmentEncoder::new(REDUCED_CODEC, p) {
            Ok(e) => e,
            Err(e) => return super::conn::refuse(out, refusal(shuffle, p, e)).await,
        };
        loop {
            // Taken before the batch is made, held until its blocks are sent.
            let mut frame = match result_frames(shared, shuffle, p, RESULT_BATCH_FRAME_BYTES).await
            {
                Ok(f) => f,
                Err(r) => return super::conn::refuse(out, r).await,
            };
            let batch = match tokio::task::block_in_place(|| task.next_batch()) {
                Ok(Some(b)) => b,
                Ok(None) => break,
                Err(e) => return super::conn::refuse(out, refusal(shuffle, p, e)).await,
            };
            let need = result_frame_bytes(batch.payload_len());
            if need > u64::from(RESULT_BATCH_FRAME_BYTES) {
                // A batch of a record larger than a batch: its own share,
                // the first given back before it waits.
                drop(frame);
                frame = match result_frames(shared, shuffle, p, shared.frames.capped(need)).await {
                    Ok(f) => f,
                    Err(r) => return super::conn::refuse(out, r).await,
                };
            }
            let frames = match tokio::task::block_in_place(|| enc.blocks(&batch)) {
                Ok(f) => f,
                Err(e) => return super::conn::refuse(out, refusal(shuffle, p, e)).await,
            };
            debug_assert!(
                batch.payload_len() as u64 + frames.iter().map(|f| f.0.len() as u64).sum::<u64>()
                    <= need,
                "a batch's blocks beyond result_frame_bytes"
            );
            drop(batch);
            held.trim_to(in_use(&task));
            for (data, n) in frames {
                // The block's records ride with its first piece.
                for (k, piece) in data.chunks(REDUCED_FRAME_BYTES).enumerate() {
                    let n = if k == 0 { n } else { 0 };
                    blocks += 1;
                    records += n;
                    bytes += piece.len() as u64;
                    frame::write_data_within(out, p, REDUCED_MAP, n, piece, shared.stream_stall)
                        .await?;
                }
            }
            drop(frame);
        }
        // Its spill files go as it does.
        tokio::task::block_in_place(|| drop(task));
        drop(held);
        if let Some(t) = enc.trailer() {
            blocks += 1;
            bytes += t.len() as u64;
            frame::write_data_within(out, p, REDUCED_MAP, 0, &t, shared.stream_stall).await?;
        }
        // The partition is whole: out to the reader before the next one is reduced.
        super::conn::flush(out, shared.stream_stall).await?;
    }
    shared.store().note_reduced(took, records);
    super::conn::send(out, &Message::End { blocks, records, bytes }).await
}
