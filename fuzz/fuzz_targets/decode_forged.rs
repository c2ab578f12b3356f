//! Fuzz what lies behind the checksums: the input is taken as a block whose
//! magic, version and both CRC32C fields are fixed up to be valid, so the
//! fuzzer reaches the header's length checks, the decompressors and the
//! payload validation with forged lengths and bytes (a CRC is no defence
//! against a malicious writer). Decoding must give a typed error or records
//! that iterate exactly as counted.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_core::format::header::{BLOCK_MAGIC, FORMAT_VERSION, HEADER_BYTES};
use sluice_core::BlockDecoder;

fuzz_target!(|data: &[u8]| {
    if data.len() < HEADER_BYTES {
        return;
    }
    let mut frame = data.to_vec();
    frame[0..4].copy_from_slice(&BLOCK_MAGIC);
    frame[4] = FORMAT_VERSION;
    let payload_crc = crc32c::crc32c(&frame[HEADER_BYTES..]);
    frame[28..32].copy_from_slice(&payload_crc.to_le_bytes());
    let header_crc = crc32c::crc32c(&frame[..32]);
    frame[32..36].copy_from_slice(&header_crc.to_le_bytes());
    let mut dec = BlockDecoder::new();
    if let Ok(block) = dec.decode(&frame) {
        let n = block.records.iter().count();
        assert_eq!(n, block.records.len());
        assert_eq!(block.frame_len, frame.len());
    }
});
