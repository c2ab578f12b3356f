//! Fuzz the block decoder: any input must give a typed error or a block whose
//! records iterate exactly as counted; a decoded block must re-encode to the
//! same bytes (the encoder is deterministic and the header canonical).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_core::{BlockDecoder, BlockEncoder};

fuzz_target!(|data: &[u8]| {
    let mut dec = BlockDecoder::new();
    let Ok(block) = dec.decode(data) else { return };
    let mut n = 0usize;
    let mut bytes = 0usize;
    for r in block.records.iter() {
        n += 1;
        bytes += r.key.len() + r.value.len();
    }
    assert_eq!(n, block.records.len());
    assert!(bytes <= block.records.payload().len());
    // Uncompressed blocks are canonical: re-encoding gives the same frame.
    if block.header.codec == sluice_core::Codec::None {
        let mut out = Vec::new();
        let mut enc = BlockEncoder::new(block.header.codec).expect("encoder");
        enc.encode_view(block.records, &mut out).expect("re-encode");
        assert_eq!(&out[..], &data[..block.frame_len]);
    }
});
