//! The 8-byte key helpers the inline aggregate table, its probe loop and
//! its evicting variant share: the key width and strippable prefix, a
//! record's key joined to its prefix, and where a hash puts a key (home
//! slot from the hash's high bits, control-byte tag from its low bits).

/// Key width this path handles.
pub(crate) const INLINE_KEY_BYTES: usize = 8;

/// Longest shared key prefix a table strips: an engine record's 4-byte
/// partition id with a host's key tag, or with the null-bits word of a
/// Spark SQL key row of one 8-byte column (the row's last 8 bytes are the
/// column; a null key changes the word and takes the general table).
pub(crate) const PREFIX_BYTES_MAX: usize = 16;

/// `prefix ++ key` in `buf` (the prefix is at most [`PREFIX_BYTES_MAX`]
/// bytes, the key [`INLINE_KEY_BYTES`]).
pub(super) fn join_key<'b>(
    buf: &'b mut [u8; PREFIX_BYTES_MAX + INLINE_KEY_BYTES],
    prefix: &[u8],
    key: &[u8],
) -> &'b [u8] {
    let p = prefix.len().min(PREFIX_BYTES_MAX);
    let k = key.len().min(INLINE_KEY_BYTES);
    buf[..p].copy_from_slice(&prefix[..p]);
    buf[p..p + k].copy_from_slice(&key[..k]);
    &buf[..p + k]
}

/// The home slot of `hash` in a table of `cap` slots: the high bits of
/// `hash` scaled to `cap` (a multiply, not a mask, so `cap` need not be a
/// power of two).
#[inline(always)]
pub(super) fn home(hash: u64, cap: usize) -> usize {
    ((u128::from(hash) * cap as u128) >> 64) as usize
}

/// The control byte of a taken slot: its hash's low 7 bits (the home slot
/// comes from the high bits, so the two are independent).
#[inline(always)]
pub(super) fn tag(hash: u64) -> u8 {
    0x80 | (hash as u8 & 0x7f)
}

/// Records in `payload`: `width` bytes each, the 8-byte key at `key_at`,
/// the value from the key's end to the record's end.
#[derive(Clone, Copy)]
pub(super) struct Records<'a> {
    pub(super) payload: &'a [u8],
    pub(super) width: usize,
    pub(super) key_at: usize,
}
