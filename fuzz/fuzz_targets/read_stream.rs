//! Fuzz the streaming block reader over arbitrary bytes: it must stop with a
//! clean end, a typed error, or blocks, never panic or over-allocate.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_core::BlockReader;

fuzz_target!(|data: &[u8]| {
    let mut reader = BlockReader::new(data);
    while let Ok(Some(block)) = reader.next_block() {
        assert!(block.frame_len > 0);
        assert_eq!(block.records.iter().count(), block.records.len());
    }
    assert!(reader.offset() <= data.len() as u64);
});
