//! Every single-byte corruption and every truncation of every golden block
//! must be reported as a typed error, never accepted and never a panic.

mod common;

use common::{goldens, read_golden};
use sluice_core::{BlockDecoder, BlockReader, FormatError};

/// XOR masks applied to each byte in turn: lowest bit, highest bit, all bits.
const MASKS: [u8; 3] = [0x01, 0x80, 0xFF];

#[test]
fn every_single_byte_corruption_is_a_typed_error() {
    let mut checked = 0usize;
    for g in goldens() {
        let file = read_golden(g.name);
        let mut dec = BlockDecoder::new();
        assert!(dec.decode(&file).is_ok(), "{}: pristine fixture must decode", g.name);
        for at in 0..file.len() {
            for mask in MASKS {
                let mut bad = file.clone();
                bad[at] ^= mask;
                match dec.decode(&bad) {
                    Ok(_) => panic!("{}: byte {at} ^ {mask:#04x} was accepted", g.name),
                    Err(e) => {
                        assert!(
                            !e.is_truncated(),
                            "{}: byte {at} ^ {mask:#04x} misreported as truncation: {e}",
                            g.name
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 10_000, "only {checked} corruptions checked");
}

#[test]
fn header_corruptions_name_the_header() {
    let file = read_golden("teragen-lz4.blk");
    let mut dec = BlockDecoder::new();
    let mut bad = file.clone();
    bad[0] = b'X';
    assert!(matches!(dec.decode(&bad), Err(FormatError::BadMagic { .. })));
    let mut bad = file.clone();
    bad[4] = 9;
    assert!(matches!(dec.decode(&bad), Err(FormatError::UnsupportedVersion { found: 9, .. })));
    let mut bad = file.clone();
    bad[20] ^= 1; // uncompressed length
    assert!(matches!(dec.decode(&bad), Err(FormatError::HeaderChecksum { .. })));
    let mut bad = file;
    let last = bad.len() - 1;
    bad[last] ^= 1; // stored payload
    assert!(matches!(dec.decode(&bad), Err(FormatError::PayloadChecksum { .. })));
}

#[test]
fn every_truncation_is_reported_as_truncation() {
    for g in goldens() {
        let file = read_golden(g.name);
        let mut dec = BlockDecoder::new();
        for len in 0..file.len() {
            let err = dec.decode(&file[..len]).err().unwrap_or_else(|| {
                panic!("{}: a {len}-byte prefix was accepted", g.name);
            });
            assert!(err.is_truncated(), "{}: {len}-byte prefix gave {err}", g.name);
        }
        // The stream reader: an empty stream is a clean end, any other prefix
        // is a truncation located at offset 0.
        for len in 1..file.len() {
            let mut r = BlockReader::new(&file[..len]);
            let err = r.next_block().expect_err("truncated stream must fail");
            assert!(
                matches!(&err, FormatError::AtOffset { offset: 0, .. }) && err.is_truncated(),
                "{}: stream prefix {len}: {err}",
                g.name
            );
        }
    }
}
