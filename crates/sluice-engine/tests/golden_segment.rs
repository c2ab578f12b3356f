//! The segment trailer's bytes pinned by a golden file
//! (`tests/golden/segment-trailer.bin`, documented in
//! `docs/wire-format.md`): a change to the trailer's layout fails here.
//! `SLUICE_BLESS=1 cargo test -p sluice-engine --test golden_segment`
//! rewrites the file; review the diff, it is a wire-format change.

use std::path::PathBuf;

use sluice_engine::output::trailer::SegmentTrailer;
use sluice_engine::reduce::BlockName;

fn sample() -> SegmentTrailer {
    SegmentTrailer {
        partition: 3,
        next_partition: 7,
        records: 0x0102_0304_0506,
        blocks: 9,
        crc: 0xDEAD_BEEF,
    }
}

#[test]
fn the_trailer_matches_its_golden_bytes() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/segment-trailer.bin");
    let bytes = sample().to_bytes();
    if std::env::var_os("SLUICE_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("dir")).expect("golden dir");
        std::fs::write(&path, bytes).expect("bless");
    }
    let golden = std::fs::read(&path).expect("golden file");
    assert_eq!(golden, bytes.to_vec(), "the trailer's bytes changed");
    let name = BlockName::single(1, 2, 3, 0);
    assert_eq!(SegmentTrailer::parse(&golden, &name).expect("parse"), sample());
    // The documented fields at their documented offsets.
    assert_eq!(&golden[0..4], b"SLSE");
    assert_eq!(golden[4], 2);
    assert_eq!(u32::from_le_bytes(golden[8..12].try_into().expect("4")), 3);
    assert_eq!(u32::from_le_bytes(golden[12..16].try_into().expect("4")), 7);
    assert_eq!(u64::from_le_bytes(golden[16..24].try_into().expect("8")), 0x0102_0304_0506);
    assert_eq!(u32::from_le_bytes(golden[24..28].try_into().expect("4")), 9);
    assert_eq!(u32::from_le_bytes(golden[28..32].try_into().expect("4")), 0xDEAD_BEEF);
}
