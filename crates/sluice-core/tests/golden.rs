//! Golden block files pin the on-disk format: each committed fixture must
//! decode to its batch, and encoding that batch must reproduce the file byte
//! for byte. `SLUICE_BLESS=1 cargo test -p sluice-core --test golden -- --test-threads=1`
//! rewrites the fixtures
//! (review the diff: a change here is a wire-format change).

mod common;

use common::{golden_dir, goldens, read_golden};
use sluice_core::{BlockDecoder, BlockEncoder, BlockReader};

#[test]
fn golden_files_decode_and_reencode_byte_for_byte() {
    let bless = std::env::var_os("SLUICE_BLESS").is_some();
    for g in goldens() {
        let mut encoded = Vec::new();
        BlockEncoder::new(g.codec)
            .and_then(|mut e| e.encode(&g.batch, &mut encoded))
            .expect("encode fixture");
        if bless {
            std::fs::create_dir_all(golden_dir()).expect("golden dir");
            std::fs::write(golden_dir().join(g.name), &encoded).expect("write fixture");
        }
        let file = read_golden(g.name);
        let mut dec = BlockDecoder::new();
        let block = dec.decode(&file).unwrap_or_else(|e| panic!("{}: {e}", g.name));
        assert_eq!(block.frame_len, file.len(), "{}: trailing bytes", g.name);
        assert_eq!(block.header.codec, g.codec, "{}", g.name);
        assert_eq!(block.records.to_batch(), g.batch, "{}: records differ", g.name);
        assert_eq!(encoded, file, "{}: encoder no longer reproduces the fixture", g.name);
    }
}

#[test]
fn golden_files_read_back_as_one_stream() {
    let mut stream = Vec::new();
    let all = goldens();
    for g in &all {
        stream.extend_from_slice(&read_golden(g.name));
    }
    let mut reader = BlockReader::new(&stream[..]);
    for g in &all {
        let block = reader.next_block().expect("block").expect("not at end");
        assert_eq!(block.records.to_batch(), g.batch, "{}", g.name);
    }
    assert!(reader.next_block().expect("clean end").is_none());
    assert_eq!(reader.offset(), stream.len() as u64);
}

#[test]
fn trailing_bytes_are_left_for_the_next_block() {
    let g = &goldens()[0];
    let mut file = read_golden(g.name);
    let len = file.len();
    file.extend_from_slice(b"SLBK next block");
    let mut dec = BlockDecoder::new();
    assert_eq!(dec.decode(&file).expect("decode").frame_len, len);
}
