//! Map-output segments read and written outside the JVM: the service
//! daemon, when it runs a shuffle's reduce-side operator itself, takes each
//! winning map's segment of a partition as the byte pieces it was pushed
//! in and hands out the operator's results as one segment again.
//!
//! ```text
//!  pieces (cut anywhere) ──► SegmentFeed: whole blocks ──► ReduceTask ──► finish
//!        each trailer checked against the blocks before it (records, count, CRC32C)
//!  ReduceTask::next_batch ──► SegmentEncoder: blocks of ≤ BLOCK_TARGET_BYTES ──► trailer
//! ```
//! A feed makes the checks the JVM's fetch path makes (`SluiceBlockInputStream`):
//! every block's header and CRC, every trailer's counts and CRC, the
//! segment ending right after a trailer; the encoder writes what the map
//! side's data file writes, so the segment it makes passes those checks in
//! any reader.

use sluice_core::format::block::BlockEncoder;
use sluice_core::format::checksum::Crc32c;
use sluice_core::format::codec::Codec;
use sluice_core::format::header::HEADER_BYTES;
use sluice_core::format::RecordBatch;

use crate::error::{EngineError, EngineResult};
use crate::output::file::BLOCK_TARGET_BYTES;
use crate::output::trailer::{fetch_end, segment_end, Counted, SegmentTrailer, TRAILER_BYTES};
use crate::reduce::block::{frame_info, BlockName};
use crate::reduce::task::ReduceTask;

/// One map's segment of one partition, fed to a reduce task a piece at a
/// time.
#[derive(Debug)]
pub struct SegmentFeed {
    shuffle: i32,
    map: i64,
    partition: i32,
    /// Bytes of a block or trailer whose end has not arrived yet.
    pending: Vec<u8>,
    /// Offset in the segment of `pending`'s first byte.
    at: i64,
    /// Since the last trailer: records, blocks, their CRC32C.
    records: u64,
    blocks: u32,
    crc: Crc32c,
    /// The next non-empty partition the last trailer named.
    last_next: Option<u32>,
    /// Records the segment's trailers summed.
    total: u64,
}

impl SegmentFeed {
    /// The segment of partition `partition` that map `map` of shuffle
    /// `shuffle` wrote.
    pub fn new(shuffle: u32, map: u32, partition: u32) -> SegmentFeed {
        SegmentFeed {
            shuffle: shuffle as i32,
            map: i64::from(map),
            partition: partition as i32,
            pending: Vec::new(),
            at: 0,
            records: 0,
            blocks: 0,
            crc: Crc32c::new(),
            last_next: None,
            total: 0,
        }
    }

    fn name(&self, offset: i64) -> BlockName {
        BlockName::single(self.shuffle, self.map, self.partition, offset)
    }

    /// Takes the segment's next bytes: each block completed goes to `task`,
    /// first asking `grant` for the memory the task lacks for it (given the
    /// shortfall, it answers the bytes it grants), and each trailer is
    /// checked against the blocks since the last.
    pub fn take(
        &mut self,
        piece: &[u8],
        task: &mut ReduceTask,
        grant: &mut dyn FnMut(usize) -> usize,
    ) -> EngineResult<()> {
        self.pending.extend_from_slice(piece);
        let mut used = 0usize;
        while self.pending.len() - used >= HEADER_BYTES {
            let rest = &self.pending[used..];
            let name = self.name(self.at + used as i64);
            if SegmentTrailer::is_trailer(rest) {
                let counted = Counted {
                    records: self.records,
                    blocks: self.blocks,
                    crc: self.crc.value(),
                    expected: Some(self.partition as u32),
                };
                let next = segment_end(&rest[..TRAILER_BYTES], &name, &counted)?;
                self.last_next = Some(next);
                self.total += self.records;
                (self.records, self.blocks, self.crc) = (0, 0, Crc32c::new());
                used += TRAILER_BYTES;
                continue;
            }
            if self.last_next.is_some() {
                return Err(EngineError::Misplaced {
                    what: name.to_string(),
                    detail: "a block after the segment's trailer".into(),
                });
            }
            let info = frame_info(rest, &name)?;
            if rest.len() < info.frame_len {
                break;
            }
            let frame = &rest[..info.frame_len];
            let short = task.shortfall(info.uncompressed_len);
            if short > 0 {
                let got = grant(short);
                task.grant(got);
            }
            self.records += task.feed(frame, &name)? as u64;
            self.blocks += 1;
            self.crc.update(frame);
            used += info.frame_len;
        }
        self.pending.drain(..used);
        self.at += used as i64;
        Ok(())
    }

    /// Ends the segment: it must have ended right after its trailer.
    /// Returns the records its blocks carried.
    pub fn end(self) -> EngineResult<u64> {
        let name = self.name(self.at);
        if !self.pending.is_empty() {
            return Err(EngineError::Misplaced {
                what: name.to_string(),
                detail: format!(
                    "the segment ends inside a block or trailer, {} bytes into it",
                    self.pending.len()
                ),
            });
        }
        fetch_end(&name, self.last_next, self.blocks)?;
        Ok(self.total)
    }
}

/// A reduce side's results written as one partition's segment: blocks of
/// at most [`BLOCK_TARGET_BYTES`] of payload, then the trailer.
#[derive(Debug)]
pub struct SegmentEncoder {
    encoder: BlockEncoder,
    partition: u32,
    records: u64,
    blocks: u32,
    crc: Crc32c,
}

impl SegmentEncoder {
    /// A segment of partition `partition`, its blocks compressed by `codec`.
    pub fn new(codec: Codec, partition: u32) -> EngineResult<SegmentEncoder> {
        Ok(SegmentEncoder {
            encoder: BlockEncoder::new(codec).map_err(EngineError::Encode)?,
            partition,
            records: 0,
            blocks: 0,
            crc: Crc32c::new(),
        })
    }

    /// The blocks of `batch`, each with its record count.
    pub fn blocks(&mut self, batch: &RecordBatch) -> EngineResult<Vec<(Vec<u8>, u64)>> {
        let mut out = Vec::new();
        for span in batch.spans(BLOCK_TARGET_BYTES) {
            let view = batch.span_view(span).map_err(EngineError::Encode)?;
            let mut frame = Vec::with_capacity(span.bytes() + HEADER_BYTES);
            self.encoder.encode_view(view, &mut frame).map_err(EngineError::Encode)?;
            self.crc.update(&frame);
            self.blocks += 1;
            self.records += u64::from(span.records());
            out.push((frame, u64::from(span.records())));
        }
        Ok(out)
    }

    /// Records encoded so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The trailer that ends the segment (none for a segment with no
    /// block: an empty partition has no segment).
    pub fn trailer(self) -> Option<[u8; TRAILER_BYTES]> {
        (self.blocks > 0).then(|| {
            SegmentTrailer {
                partition: self.partition,
                next_partition: self.partition + 1,
                records: self.records,
                blocks: self.blocks,
                crc: self.crc.value(),
            }
            .to_bytes()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sluice_core::format::Layout;
    use sluice_core::reorg::aggregate::SpillStrategy;
    use sluice_core::reorg::StageSpec;

    use crate::host_op::agg_spec;

    fn sum_task(dir: &std::path::Path) -> ReduceTask {
        let spec = StageSpec::Aggregate(agg_spec(0, 0).expect("sum"), SpillStrategy::State);
        ReduceTask::open(&spec, 3..4, dir).expect("task")
    }

    /// A segment of partition 3: `n` records, key `3 ++ i % 40`, value i.
    fn segment(n: u32) -> Vec<u8> {
        let mut batch = RecordBatch::new(Layout::Variable);
        for i in 0..n {
            let key = [3u8, 0, 0, 0, (i % 40) as u8];
            batch.push(&key, &i64::from(i).to_le_bytes()).expect("record");
        }
        let mut enc = SegmentEncoder::new(Codec::Lz4, 3).expect("encoder");
        let mut out: Vec<u8> =
            enc.blocks(&batch).expect("blocks").into_iter().flat_map(|b| b.0).collect();
        out.extend_from_slice(&enc.trailer().expect("trailer"));
        out
    }

    /// Feeds `seg` cut at `cuts`; the records its trailer summed, or the error.
    fn feed(seg: &[u8], cuts: &[usize]) -> EngineResult<(u64, u64)> {
        let dir = tempfile::tempdir().expect("dir");
        let mut task = sum_task(dir.path());
        let mut f = SegmentFeed::new(1, 2, 3);
        let mut at = 0;
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (seg.len() + 1)).collect();
        cuts.sort_unstable();
        for c in cuts.into_iter().chain([seg.len()]) {
            f.take(&seg[at..c], &mut task, &mut |s| s)?;
            at = c;
        }
        let records = f.end()?;
        Ok((records, task.finish()?.expect("a table that did not spill counts its results")))
    }

    #[test]
    fn an_empty_or_cut_segment_is_an_error() {
        let seg = segment(100);
        assert_eq!(feed(&seg, &[]).expect("whole"), (100, 40));
        assert!(feed(&seg[..seg.len() - 1], &[]).is_err(), "cut inside the trailer");
        assert!(feed(&seg[..seg.len() - TRAILER_BYTES], &[]).is_err(), "without its trailer");
        assert!(feed(&[], &[]).is_err(), "empty");
        let mut twice = seg.clone();
        twice.extend_from_slice(&seg);
        assert!(feed(&twice, &[]).is_err(), "a block after the trailer");
    }

    /// Every result of `task` (finished), as its `next_records` copies them.
    fn records_of(task: &mut ReduceTask) -> Vec<u8> {
        let (mut out, mut buf) = (Vec::new(), vec![0u8; 1 << 16]);
        loop {
            match task.next_records(&mut buf).expect("results") {
                (0, 0) => return out,
                (need, 0) => buf.resize(need, 0),
                (n, _) => out.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// The daemon sends a reduce side's results where a map output's
    /// partials went, and the reduce task's own operator takes them again:
    /// for the scalar aggregates, reducing the results once more changes
    /// nothing (a result is encoded as its partial state is).
    #[test]
    fn results_reduced_again_are_the_same_results() {
        for func in 0..=3 {
            for value in 0..=2 {
                let spec = StageSpec::Aggregate(
                    agg_spec(func, value).expect("spec"),
                    SpillStrategy::State,
                );
                let dir = tempfile::tempdir().expect("dir");
                let mut batch = RecordBatch::new(Layout::Variable);
                for i in 0..500u32 {
                    let v: [u8; 8] = match value {
                        2 => (f64::from(i) * 0.5 - 40.0).to_le_bytes(),
                        _ => (i64::from(i % 97) - 30).to_le_bytes(),
                    };
                    batch.push(&[3, 0, 0, 0, (i % 37) as u8], &v).expect("record");
                }
                let mut enc = SegmentEncoder::new(Codec::Lz4, 3).expect("encoder");
                let frames = enc.blocks(&batch).expect("blocks");
                let name = BlockName::single(1, 2, 3, 0);
                let mut once = ReduceTask::open(&spec, 3..4, dir.path()).expect("task");
                for (f, _) in &frames {
                    once.feed(f, &name).expect("feed");
                }
                once.finish().expect("finish");
                let mut again = ReduceTask::open(&spec, 3..4, dir.path()).expect("task");
                let mut results = Vec::new();
                while let Some(b) = once.next_batch().expect("batch") {
                    results.push(b);
                }
                let mut enc = SegmentEncoder::new(Codec::Lz4, 3).expect("encoder");
                for b in &results {
                    for (f, _) in enc.blocks(b).expect("blocks") {
                        again.feed(&f, &name).expect("feed again");
                    }
                }
                again.finish().expect("finish");
                let mut first = ReduceTask::open(&spec, 3..4, dir.path()).expect("task");
                for (f, _) in &frames {
                    first.feed(f, &name).expect("feed");
                }
                first.finish().expect("finish");
                let (a, b) = (records_of(&mut first), records_of(&mut again));
                let sorted = |r: &[u8]| {
                    let mut v: Vec<Vec<u8>> = r.chunks(8 + 5 + 8).map(<[u8]>::to_vec).collect();
                    v.sort();
                    v
                };
                assert_eq!(sorted(&a), sorted(&b), "function {func}, value type {value}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Wherever a segment is cut into pieces, the same records go in.
        #[test]
        fn pieces_cut_anywhere_feed_the_same(n in 1u32..3000, cuts in prop::collection::vec(any::<usize>(), 0..6)) {
            let seg = segment(n);
            prop_assert_eq!(feed(&seg, &cuts).expect("a whole segment"), (u64::from(n), u64::from(n.min(40))));
        }

        /// A flipped byte is an error (every byte is under a CRC), never a panic.
        #[test]
        fn a_flipped_byte_is_an_error(n in 1u32..500, at in any::<usize>(), bit in 0u8..8) {
            let mut seg = segment(n);
            let i = at % seg.len();
            seg[i] ^= 1 << bit;
            prop_assert!(feed(&seg, &[at]).is_err());
        }
    }
}
