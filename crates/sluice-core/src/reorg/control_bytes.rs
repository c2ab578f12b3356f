//! Control-byte groups: eight control bytes of an open-addressing table
//! examined at once in one 64-bit word (SWAR, as in SwissTable's portable
//! fallback).
//!
//! A control byte is 0 for an empty slot and `0x80 | 7 hash bits` for a
//! taken one. Loading eight of them little-endian puts slot `pos + j` in
//! bits `8j..8j + 8`, and two word operations answer the probe's questions:
//!
//! - [`match_tag`]: bytes equal to a tag. It may report a byte just above a
//!   true match that is not one (the borrow of the subtraction), never miss
//!   one, so every candidate is confirmed by comparing keys.
//! - [`match_empty`], [`match_full`]: bytes whose top bit is clear (set),
//!   exactly the empty (taken) ones.
//!
//! A probe that starts at the key's home slot and reads groups in order
//! therefore needs one branch per group rather than one per slot: with
//! linear probing at a load of 3/4 an unsuccessful search visits about 8.5
//! slots on average (Knuth), which is one or two groups.

/// Control bytes examined at once.
pub(crate) const GROUP: usize = 8;

/// The low bit of every byte.
const LOW: u64 = 0x0101_0101_0101_0101;
/// The high bit of every byte.
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The group of eight control bytes starting at `pos`; `ctrl` carries
/// [`GROUP`] mirror bytes past the table's end, so any `pos` below the
/// capacity reads a whole group.
#[inline(always)]
pub(crate) fn load(ctrl: &[u8], pos: usize) -> u64 {
    ctrl.get(pos..pos + GROUP)
        .and_then(|g| g.first_chunk::<GROUP>())
        .map_or(0, |g| u64::from_le_bytes(*g))
}

/// High bits set on the bytes of `group` that may equal `tag` (a superset
/// of the equal ones).
#[inline(always)]
pub(crate) fn match_tag(group: u64, tag: u8) -> u64 {
    let x = group ^ (LOW * u64::from(tag));
    x.wrapping_sub(LOW) & !x & HIGH
}

/// High bits set on the empty bytes of `group`, exactly.
#[inline(always)]
pub(crate) fn match_empty(group: u64) -> u64 {
    !group & HIGH
}

/// High bits set on the taken bytes of `group`, exactly.
#[inline(always)]
pub(crate) fn match_full(group: u64) -> u64 {
    group & HIGH
}

/// Offset within the group of the lowest set high bit of `mask` (non-zero).
#[inline(always)]
pub(crate) fn lowest(mask: u64) -> usize {
    mask.trailing_zeros() as usize / 8
}

/// Writes control byte `c` for slot `i` of a table of `cap` slots, and its
/// mirror past the end when `i` is among the first [`GROUP`].
#[inline(always)]
pub(crate) fn set(ctrl: &mut [u8], cap: usize, i: usize, c: u8) {
    ctrl[i] = c;
    if i < GROUP {
        ctrl[cap + i] = c;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(bytes: [u8; 8]) -> u64 {
        u64::from_le_bytes(bytes)
    }

    #[test]
    fn empty_bytes_are_found_exactly() {
        let g = word([0, 0x81, 0, 0xff, 0x80, 0, 0x90, 0]);
        let m = match_empty(g);
        let at: Vec<usize> = (0..8).filter(|j| m >> (8 * j + 7) & 1 == 1).collect();
        assert_eq!(at, vec![0, 2, 5, 7]);
        assert_eq!(lowest(m), 0);
        assert_eq!(match_empty(word([0x80; 8])), 0);
        assert_eq!(match_full(g) | m, HIGH);
    }

    #[test]
    fn tag_matches_are_a_superset_of_the_equal_bytes() {
        for tag in [0x80u8, 0x81, 0xc3, 0xff] {
            for seed in 0u64..2000 {
                let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let mut bytes = [0u8; 8];
                for b in &mut bytes {
                    s ^= s >> 29;
                    s = s.wrapping_mul(0xBF58_476D_1CE4_E5B9);
                    *b = match s % 4 {
                        0 => 0,
                        1 => tag,
                        2 => tag ^ 1,
                        _ => 0x80 | (s >> 8) as u8,
                    };
                }
                let m = match_tag(word(bytes), tag);
                for (j, b) in bytes.iter().enumerate() {
                    if *b == tag {
                        assert_eq!(m >> (8 * j + 7) & 1, 1, "{bytes:?} {tag:#x}");
                    }
                }
                assert_eq!(m & !HIGH, 0);
            }
        }
    }

    #[test]
    fn mirror_bytes_follow_the_first_group() {
        let cap = 16;
        let mut ctrl = vec![0u8; cap + GROUP];
        set(&mut ctrl, cap, 3, 0x85);
        set(&mut ctrl, cap, 12, 0x86);
        assert_eq!(ctrl[cap + 3], 0x85);
        let g = load(&ctrl, 12);
        assert_eq!(g & 0xff, 0x86);
        assert_eq!(g >> 56, 0x85);
    }
}
