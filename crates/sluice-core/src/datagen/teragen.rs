//! TeraGen records: the 100-byte input of TeraSort.
//!
//! ```text
//! bytes  0-9   key: 10 random bytes
//! bytes 10-11  00 11
//! bytes 12-43  the row number as 32 upper-case hex digits
//! bytes 44-47  88 99 AA BB
//! bytes 48-95  filler: 12 groups of 4 equal letters A-Z, derived from the row
//! bytes 96-99  CC DD EE FF
//! ```
//! The key is the first 10 bytes, the value the remaining 90
//! ([`crate::format::Layout::TERAGEN`]).

use crate::datagen::rng::mix;

/// Bytes of one TeraGen record.
pub const RECORD_BYTES: usize = 100;
/// Bytes of its key.
pub const KEY_BYTES: usize = 10;

/// Writes record `row` of the data set `seed` into `out`.
pub fn record(seed: u64, row: u64, out: &mut [u8; RECORD_BYTES]) {
    let a = mix(seed ^ mix(row));
    let b = mix(a ^ 0x5555_5555_5555_5555);
    out[..8].copy_from_slice(&a.to_be_bytes());
    out[8..10].copy_from_slice(&b.to_be_bytes()[..2]);
    out[10] = 0x00;
    out[11] = 0x11;
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let row128 = u128::from(row);
    for (i, digit) in out[12..44].iter_mut().enumerate() {
        *digit = HEX[((row128 >> (4 * (31 - i))) & 0xF) as usize];
    }
    out[44..48].copy_from_slice(&[0x88, 0x99, 0xAA, 0xBB]);
    let mut f = b;
    for group in out[48..96].chunks_exact_mut(4) {
        f = f.rotate_right(5);
        group.fill(b'A' + (f % 26) as u8);
    }
    out[96..100].copy_from_slice(&[0xCC, 0xDD, 0xEE, 0xFF]);
}

/// Appends rows `start..start + count` of data set `seed` to `out`.
pub fn fill(seed: u64, start: u64, count: u64, out: &mut Vec<u8>) {
    let mut rec = [0u8; RECORD_BYTES];
    out.reserve(count as usize * RECORD_BYTES);
    for row in start..start + count {
        record(seed, row, &mut rec);
        out.extend_from_slice(&rec);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_of_a_record() {
        let mut r = [0u8; RECORD_BYTES];
        record(1, 0x2a, &mut r);
        assert_eq!(&r[10..12], &[0x00, 0x11]);
        assert_eq!(&r[12..44], b"0000000000000000000000000000002A");
        assert_eq!(&r[44..48], &[0x88, 0x99, 0xAA, 0xBB]);
        assert!(r[48..96].iter().all(|c| c.is_ascii_uppercase()));
        assert_eq!(&r[96..], &[0xCC, 0xDD, 0xEE, 0xFF]);
        let mut other = [0u8; RECORD_BYTES];
        record(1, 0x2b, &mut other);
        assert_ne!(r[..10], other[..10]);
    }
}
