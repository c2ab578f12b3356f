//! Fixed-width tuples as in the thesis experiments: a uniform random key of
//! `key_bytes` bytes followed by a payload that holds the row number.

use crate::datagen::rng::mix;

/// Appends rows `start..start + count` of `key_bytes + value_bytes`-byte
/// tuples of data set `seed` to `out`. The key is random (little-endian words
/// of the mixed row), the value repeats the row number's little-endian bytes.
pub fn fill(
    seed: u64,
    key_bytes: usize,
    value_bytes: usize,
    start: u64,
    count: u64,
    out: &mut Vec<u8>,
) {
    out.reserve(count as usize * (key_bytes + value_bytes));
    for row in start..start + count {
        let mut k = mix(seed ^ mix(row));
        let mut left = key_bytes;
        while left > 0 {
            let n = left.min(8);
            out.extend_from_slice(&k.to_le_bytes()[..n]);
            left -= n;
            k = mix(k);
        }
        let row_bytes = row.to_le_bytes();
        for i in 0..value_bytes {
            out.push(row_bytes[i % 8]);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes() {
        let mut out = Vec::new();
        super::fill(3, 4, 12, 10, 5, &mut out);
        assert_eq!(out.len(), 80);
        assert_eq!(out[4], 10);
        assert_eq!(out[16 + 4], 11);
    }
}
