//! The service frame decoder on arbitrary bytes: a typed error or a
//! message that re-encodes to the bytes it took, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_service::protocol::frame;

fuzz_target!(|data: &[u8]| {
    if let Ok((m, used)) = frame::decode(data, 0) {
        assert_eq!(frame::encode(&m), &data[..used]);
    }
});
