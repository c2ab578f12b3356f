//! What the bridge's integration tests share: the engine settings they
//! open the process's engine with (the first test to run opens it; later
//! ones get the same engine).

use sluice_jni::bridge::HostSettings;

/// One offload thread, an 8 MiB buffer pool, a 64 MiB budget.
pub(crate) fn settings() -> HostSettings {
    HostSettings {
        offload_threads: 1,
        buffer_pool_bytes: 8 << 20,
        memory_budget: 64 << 20,
        operator_state_bytes: 0,
        spill_dir: std::env::temp_dir(),
        inline_at_tasks: 0,
        pin_offload_threads: false,
        segment_bytes: 100_000,
        liquid_offload: true,
    }
}

use sluice_core::format::checksum::Crc32c;
use sluice_core::format::header::HEADER_BYTES;
use sluice_engine::output::trailer::{
    fetch_end, segment_end, Counted, SegmentTrailer, TRAILER_BYTES,
};
use sluice_engine::reduce::{frame_info, BlockName};
use sluice_engine::EngineError;

/// Walks a fetched segment of partitions `reduce..reduce_end` of shuffle
/// `shuffle`, map `map` the way the Java stream does: each block goes to
/// `block` (which returns its records), each trailer is checked against
/// the records, blocks and CRC counted since the last one, and the end
/// must come right after a trailer that leaves no partition of the range
/// unread.
pub(crate) fn walk_segment(
    seg: &[u8],
    (shuffle, map, reduce, reduce_end): (i32, i64, i32, i32),
    mut block: impl FnMut(&[u8], &BlockName) -> Result<usize, EngineError>,
) -> Result<(), EngineError> {
    let mut at = 0usize;
    let name = |at: usize| BlockName { shuffle, map, reduce, reduce_end, offset: at as i64 };
    let mut expected = (reduce_end == reduce + 1).then_some(reduce as u32);
    let (mut records, mut blocks, mut crc) = (0u64, 0u32, Crc32c::new());
    let mut last_next = None;
    while at < seg.len() {
        let head = seg.get(at..at + HEADER_BYTES).ok_or_else(|| EngineError::Misplaced {
            what: name(at).to_string(),
            detail: "cut inside a header".into(),
        })?;
        if SegmentTrailer::is_trailer(head) {
            let counted = Counted { records, blocks, crc: crc.value(), expected };
            let next = segment_end(head, &name(at), &counted)?;
            last_next = Some(next);
            expected = Some(next);
            (records, blocks, crc) = (0, 0, Crc32c::new());
            at += TRAILER_BYTES;
            continue;
        }
        let info = frame_info(head, &name(at))?;
        let frame = seg.get(at..at + info.frame_len).ok_or_else(|| EngineError::Misplaced {
            what: name(at).to_string(),
            detail: "cut inside a block".into(),
        })?;
        records += block(frame, &name(at))? as u64;
        blocks += 1;
        crc.update(frame);
        at += info.frame_len;
    }
    fetch_end(&name(at), last_next, blocks)
}
