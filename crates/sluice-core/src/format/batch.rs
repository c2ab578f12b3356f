//! Record batches: what writers append to and readers iterate.
//!
//! A [`RecordBatch`] owns one growable byte buffer that is exactly the
//! uncompressed payload of a block in its [`Layout`]. Appending a record
//! copies its key and value into that buffer (amortised, no per-record
//! allocation; [`RecordBatch::clear`] keeps the capacity for reuse).
//! A [`BatchView`] borrows a payload, from a batch or from a decoded block,
//! and iterates [`Record`]s that borrow their key and value from it: readers
//! never copy.
//!
//! # Invariant
//! A `BatchView` is only built over a payload that has been validated for its
//! layout (count times width for fixed records; prefixes that tile the payload
//! exactly for variable ones), so iteration cannot fail. The iterator still
//! uses checked slicing and simply stops if the invariant were ever broken.

use crate::format::error::FormatError;
use crate::format::layout::Layout;
use crate::format::limits::{BLOCK_UNCOMPRESSED_BYTES_MAX, VARIABLE_RECORD_PREFIX_BYTES};
use crate::format::span::{spans_of, CheckedPayload, Span};

/// One record, borrowed from a payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Key bytes.
    pub key: &'a [u8],
    /// Value bytes.
    pub value: &'a [u8],
}

/// An appendable batch of records in one layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordBatch {
    layout: Layout,
    data: Vec<u8>,
    count: u32,
}

impl RecordBatch {
    /// An empty batch.
    pub fn new(layout: Layout) -> Self {
        Self::with_capacity(layout, 0)
    }

    /// An empty batch with room for `bytes` payload bytes.
    pub fn with_capacity(layout: Layout, bytes: usize) -> Self {
        RecordBatch { layout, data: Vec::with_capacity(bytes), count: 0 }
    }

    /// An empty batch that writes into `buffer` (its contents are cleared,
    /// its capacity kept): for pools that hand out reused memory.
    pub fn from_buffer(layout: Layout, mut buffer: Vec<u8>) -> Self {
        buffer.clear();
        RecordBatch { layout, data: buffer, count: 0 }
    }

    /// A batch over `data`, which already holds `count` whole records in
    /// `layout` (a partition page: valid by construction).
    pub(crate) fn from_valid(layout: Layout, data: Vec<u8>, count: u32) -> Self {
        RecordBatch { layout, data, count }
    }

    /// The batch's byte buffer, for reuse.
    pub fn into_buffer(self) -> Vec<u8> {
        self.data
    }

    /// Bytes the batch can hold without reallocating.
    pub fn capacity(&self) -> usize {
        self.data.capacity()
    }

    /// Gives back the room beyond the payload: for a batch kept once full,
    /// whose memory is accounted by its payload.
    pub fn shrink_to_fit(&mut self) {
        self.data.shrink_to_fit();
    }

    /// The batch's layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True when the batch holds no record.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Payload bytes (what an uncompressed block stores).
    pub fn payload(&self) -> &[u8] {
        &self.data
    }

    /// Payload length in bytes.
    pub fn payload_len(&self) -> usize {
        self.data.len()
    }

    /// Removes every record, keeping the allocation.
    pub fn clear(&mut self) {
        self.data.clear();
        self.count = 0;
    }

    /// Payload bytes the batch would hold after appending a record with these
    /// lengths, or an error if the record does not fit this layout or a block.
    pub fn check_fits(&self, key_len: usize, value_len: usize) -> Result<usize, FormatError> {
        if let Layout::Fixed { key_width, value_width } = self.layout {
            if key_len != usize::from(key_width) {
                return Err(FormatError::KeyWidthMismatch {
                    expected: key_width.into(),
                    got: key_len,
                });
            }
            if value_len != value_width as usize {
                return Err(FormatError::ValueWidthMismatch {
                    expected: value_width as usize,
                    got: value_len,
                });
            }
        }
        let needed = (self.data.len() as u64)
            .saturating_add(VARIABLE_RECORD_PREFIX_BYTES as u64)
            .saturating_add(key_len as u64)
            .saturating_add(value_len as u64);
        let needed = if self.layout.is_variable() {
            needed
        } else {
            needed - VARIABLE_RECORD_PREFIX_BYTES as u64
        };
        if needed > BLOCK_UNCOMPRESSED_BYTES_MAX as u64 {
            return Err(FormatError::BatchFull {
                needed,
                max: BLOCK_UNCOMPRESSED_BYTES_MAX as u64,
            });
        }
        Ok(needed as usize)
    }

    /// Appends one record. On error the batch is unchanged.
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> Result<(), FormatError> {
        self.check_fits(key.len(), value.len())?;
        if self.layout.is_variable() {
            // Both lengths are below the block maximum (checked above), so
            // they fit in u32.
            self.data.extend_from_slice(&(key.len() as u32).to_le_bytes());
            self.data.extend_from_slice(&(value.len() as u32).to_le_bytes());
        }
        self.data.extend_from_slice(key);
        self.data.extend_from_slice(value);
        self.count += 1;
        Ok(())
    }

    /// Appends whole fixed-width records already laid out back to back.
    ///
    /// `records.len()` must be a multiple of the record width. For the
    /// variable layout use [`RecordBatch::push`].
    pub fn extend_fixed(&mut self, records: &[u8]) -> Result<(), FormatError> {
        let width = self.layout.fixed_record_bytes().ok_or(FormatError::InconsistentLengths {
            detail: "extend_fixed on a variable-length batch".into(),
        })?;
        if records.len() % width != 0 {
            return Err(FormatError::InconsistentLengths {
                detail: format!(
                    "{} bytes is not a whole number of {width}-byte records",
                    records.len()
                ),
            });
        }
        let needed = self.data.len() as u64 + records.len() as u64;
        if needed > BLOCK_UNCOMPRESSED_BYTES_MAX as u64 {
            return Err(FormatError::BatchFull {
                needed,
                max: BLOCK_UNCOMPRESSED_BYTES_MAX as u64,
            });
        }
        self.data.extend_from_slice(records);
        self.count += (records.len() / width) as u32;
        Ok(())
    }

    /// Appends a checked payload's records (as [`RecordBatch::extend_view`])
    /// and returns its spans as spans of this batch.
    pub fn extend_checked(&mut self, p: &CheckedPayload<'_>) -> Result<Vec<Span>, FormatError> {
        let at = self.data.len();
        self.extend_view(&p.view())?;
        Ok(p.spans().iter().map(|s| s.shifted(at)).collect())
    }

    /// Spans of at least `target` bytes (the last may be shorter) tiling
    /// the batch at record boundaries (a walk over variable-width records).
    pub fn spans(&self, target: usize) -> Vec<Span> {
        spans_of(&self.view(), target)
    }

    /// The records of `span`, one of this batch's spans
    /// ([`RecordBatch::spans`], [`RecordBatch::extend_checked`]), viewed
    /// without walking them again. A span outside the batch is an error;
    /// a span of another batch is a caller's bug (tests' debug builds
    /// validate every view made this way).
    pub fn span_view(&self, span: Span) -> Result<BatchView<'_>, FormatError> {
        let bytes = self.data.get(span.start()..span.end()).ok_or_else(|| {
            FormatError::InconsistentLengths {
                detail: format!(
                    "span {}..{} of a {}-byte batch",
                    span.start(),
                    span.end(),
                    self.data.len()
                ),
            }
        })?;
        match self.layout {
            Layout::Fixed { .. } => BatchView::new(self.layout, span.records(), bytes),
            Layout::Variable => {
                let prefixes = span.records() as usize * VARIABLE_RECORD_PREFIX_BYTES;
                if prefixes > bytes.len() {
                    return Err(FormatError::InconsistentLengths {
                        detail: format!(
                            "{} records in a {}-byte span",
                            span.records(),
                            bytes.len()
                        ),
                    });
                }
                Ok(BatchView::new_unchecked(self.layout, span.records(), bytes))
            }
        }
    }

    /// Appends every record of a validated view in the same layout (one
    /// copy of its payload). On error the batch is unchanged.
    pub fn extend_view(&mut self, view: &BatchView<'_>) -> Result<(), FormatError> {
        if view.layout != self.layout {
            return Err(FormatError::InconsistentLengths {
                detail: format!("appending {:?} records to a {:?} batch", view.layout, self.layout),
            });
        }
        let needed = self.data.len() as u64 + view.data.len() as u64;
        if needed > BLOCK_UNCOMPRESSED_BYTES_MAX as u64 {
            return Err(FormatError::BatchFull {
                needed,
                max: BLOCK_UNCOMPRESSED_BYTES_MAX as u64,
            });
        }
        self.data.extend_from_slice(view.data);
        self.count += view.count;
        Ok(())
    }

    /// Appends up to `max` fixed-width records, the first record-width
    /// bytes of each slice `records` yields (slices of a validated payload
    /// in this batch's layout), in order; returns how many it appended
    /// (fewer when `records` ends). A gather: the room is made once and
    /// each record is copied with a move of its known width (widths of
    /// common layouts are compiled in, so a 12-byte record is one 8- and one
    /// 4-byte move, not a call to `memcpy`). A slice shorter than a record
    /// is an error, and the records before it stay appended.
    pub(crate) fn gather_fixed<'a>(
        &mut self,
        records: &mut impl Iterator<Item = &'a [u8]>,
        max: usize,
    ) -> Result<usize, FormatError> {
        let width = self.layout.fixed_record_bytes().ok_or(FormatError::InconsistentLengths {
            detail: "gather_fixed on a variable-length batch".into(),
        })?;
        self.data.reserve(max * width);
        let dst = &mut self.data;
        let (n, short) = match width {
            8 => gather_with(dst, records, max, first_w::<8>),
            12 => gather_with(dst, records, max, first_w::<12>),
            16 => gather_with(dst, records, max, first_w::<16>),
            20 => gather_with(dst, records, max, first_w::<20>),
            24 => gather_with(dst, records, max, first_w::<24>),
            32 => gather_with(dst, records, max, first_w::<32>),
            36 => gather_with(dst, records, max, first_w::<36>),
            40 => gather_with(dst, records, max, first_w::<40>),
            _ => gather_with(dst, records, max, |r| r.get(..width)),
        };
        self.count += n as u32;
        match short {
            None => Ok(n),
            Some(len) => Err(FormatError::InconsistentLengths {
                detail: format!("gathering {width}-byte records, record {n} has only {len} bytes"),
            }),
        }
    }

    /// Reserves room for `bytes` more payload bytes.
    pub(crate) fn reserve(&mut self, bytes: usize) {
        self.data.reserve(bytes);
    }

    /// A borrowed view of the batch.
    pub fn view(&self) -> BatchView<'_> {
        BatchView { layout: self.layout, count: self.count, data: &self.data }
    }

    /// Iterates the records.
    pub fn iter(&self) -> Records<'_> {
        self.view().iter()
    }
}

/// A validated, borrowed payload in one layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchView<'a> {
    layout: Layout,
    count: u32,
    data: &'a [u8],
}

impl<'a> BatchView<'a> {
    /// Validates `data` as `count` records in `layout` and views it.
    pub fn new(layout: Layout, count: u32, data: &'a [u8]) -> Result<Self, FormatError> {
        validate_payload(layout, count, data)?;
        Ok(BatchView { layout, count, data })
    }

    /// Views a payload that the caller has just validated with
    /// [`validate_payload`].
    pub(crate) fn new_unchecked(layout: Layout, count: u32, data: &'a [u8]) -> Self {
        debug_assert!(validate_payload(layout, count, data).is_ok());
        BatchView { layout, count, data }
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True when there is no record.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The raw payload bytes.
    pub fn payload(&self) -> &'a [u8] {
        self.data
    }

    /// Iterates the records without copying.
    pub fn iter(&self) -> Records<'a> {
        Records::new(self.layout, self.data, self.count)
    }

    /// Iterates the records as raw encoded bytes (see [`Records::next_raw`]).
    pub fn raw(&self) -> Records<'a> {
        self.iter()
    }

    /// Copies the records into an owned batch.
    pub fn to_batch(&self) -> RecordBatch {
        RecordBatch { layout: self.layout, data: self.data.to_vec(), count: self.count }
    }
}

impl<'a> IntoIterator for BatchView<'a> {
    type Item = Record<'a>;
    type IntoIter = Records<'a>;
    fn into_iter(self) -> Records<'a> {
        self.iter()
    }
}

impl<'a> IntoIterator for &'a RecordBatch {
    type Item = Record<'a>;
    type IntoIter = Records<'a>;
    fn into_iter(self) -> Records<'a> {
        self.iter()
    }
}

/// Iterator over the records of a payload.
///
/// Fixed-width records are cut with `chunks_exact` (no per-record branch on
/// the layout, no length arithmetic); variable ones follow their prefixes.
#[derive(Clone, Debug)]
pub struct Records<'a> {
    inner: RecordsInner<'a>,
}

#[derive(Clone, Debug)]
enum RecordsInner<'a> {
    Fixed { chunks: std::slice::ChunksExact<'a, u8>, key_width: usize, remaining: usize },
    Variable { data: &'a [u8], pos: usize, remaining: u32 },
}

impl<'a> Records<'a> {
    fn new(layout: Layout, data: &'a [u8], count: u32) -> Self {
        let inner = match layout {
            Layout::Fixed { key_width, value_width } => {
                let width = usize::from(key_width) + value_width as usize;
                RecordsInner::Fixed {
                    chunks: data.chunks_exact(width.max(1)),
                    key_width: usize::from(key_width),
                    remaining: count as usize,
                }
            }
            Layout::Variable => RecordsInner::Variable { data, pos: 0, remaining: count },
        };
        Records { inner }
    }
}

impl<'a> Records<'a> {
    /// The next record as its key and its whole encoded bytes in the layout
    /// (length prefix included for the variable layout), for copying a
    /// record into another payload of the same layout in one piece.
    #[inline]
    pub fn next_raw(&mut self) -> Option<RawRecord<'a>> {
        match &mut self.inner {
            RecordsInner::Fixed { chunks, key_width, remaining } => {
                if *remaining == 0 {
                    return None;
                }
                let rec = chunks.next()?;
                *remaining -= 1;
                Some(RawRecord { key: rec.get(..*key_width)?, bytes: rec })
            }
            RecordsInner::Variable { data, pos, remaining } => {
                if *remaining == 0 {
                    return None;
                }
                let (key_len, value_len) = read_prefix(data, *pos)?;
                let start = *pos + VARIABLE_RECORD_PREFIX_BYTES;
                let key_end = start.checked_add(key_len)?;
                let end = key_end.checked_add(value_len)?;
                let key = data.get(start..key_end)?;
                let bytes = data.get(*pos..end)?;
                *pos = end;
                *remaining -= 1;
                Some(RawRecord { key, bytes })
            }
        }
    }
}

/// A record's key and its whole encoding in its layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawRecord<'a> {
    /// Key bytes.
    pub key: &'a [u8],
    /// The record's bytes as laid out in a payload (prefix, key, value).
    pub bytes: &'a [u8],
}

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;

    #[inline]
    fn next(&mut self) -> Option<Record<'a>> {
        match &mut self.inner {
            RecordsInner::Fixed { chunks, key_width, remaining } => {
                if *remaining == 0 {
                    return None;
                }
                let rec = chunks.next()?;
                *remaining -= 1;
                let (key, value) = rec.split_at((*key_width).min(rec.len()));
                Some(Record { key, value })
            }
            RecordsInner::Variable { data, pos, remaining } => {
                if *remaining == 0 {
                    return None;
                }
                let (key_len, value_len) = read_prefix(data, *pos)?;
                let start = *pos + VARIABLE_RECORD_PREFIX_BYTES;
                let key_end = start.checked_add(key_len)?;
                let end = key_end.checked_add(value_len)?;
                let key = data.get(start..key_end)?;
                let value = data.get(key_end..end)?;
                *pos = end;
                *remaining -= 1;
                Some(Record { key, value })
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match &self.inner {
            RecordsInner::Fixed { remaining, .. } => *remaining,
            RecordsInner::Variable { remaining, .. } => *remaining as usize,
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for Records<'_> {}

#[inline]
pub(crate) fn read_prefix(data: &[u8], pos: usize) -> Option<(usize, usize)> {
    let p = data.get(pos..pos.checked_add(VARIABLE_RECORD_PREFIX_BYTES)?)?;
    let k = u32::from_le_bytes([p[0], p[1], p[2], p[3]]) as usize;
    let v = u32::from_le_bytes([p[4], p[5], p[6], p[7]]) as usize;
    Some((k, v))
}

/// Checks that `data` is exactly `count` records in `layout`.
pub(crate) fn validate_payload(layout: Layout, count: u32, data: &[u8]) -> Result<(), FormatError> {
    match layout.fixed_record_bytes() {
        Some(width) => {
            let expected = (count as usize).checked_mul(width);
            if expected != Some(data.len()) {
                return Err(FormatError::InconsistentLengths {
                    detail: format!(
                        "{count} records of {width} bytes in a {}-byte payload",
                        data.len()
                    ),
                });
            }
        }
        None => {
            let mut pos = 0usize;
            for record in 0..count {
                let malformed = |reason| FormatError::MalformedRecord {
                    record: record.into(),
                    offset: pos as u64,
                    reason,
                };
                let (k, v) = read_prefix(data, pos).ok_or_else(|| malformed("prefix past end"))?;
                // k and v are at most u32::MAX each; pos is at most the
                // payload length (<= 64 MiB), so the sum cannot overflow u64
                // and is compared before any slicing.
                let end = pos as u64 + VARIABLE_RECORD_PREFIX_BYTES as u64 + k as u64 + v as u64;
                if end > data.len() as u64 {
                    return Err(malformed("key and value run past the payload"));
                }
                pos = end as usize;
            }
            if pos != data.len() {
                return Err(FormatError::MalformedRecord {
                    record: count.into(),
                    offset: pos as u64,
                    reason: "bytes left after the last record",
                });
            }
        }
    }
    Ok(())
}

/// [`RecordBatch::gather_fixed`]'s loop: appends to `dst` (with room
/// reserved) the record that `record` cuts from each of up to `max`
/// slices; returns how many it appended and the length of the first slice
/// it could not cut a record from, if any. With `record` cutting a
/// compile-time width the copy is a few moves, not a `memcpy` call.
#[inline(always)]
fn gather_with<'a>(
    dst: &mut Vec<u8>,
    records: &mut impl Iterator<Item = &'a [u8]>,
    max: usize,
    record: impl Fn(&'a [u8]) -> Option<&'a [u8]>,
) -> (usize, Option<usize>) {
    let mut n = 0;
    for r in records.take(max) {
        let Some(s) = record(r) else {
            return (n, Some(r.len()));
        };
        dst.extend_from_slice(s);
        n += 1;
    }
    (n, None)
}

/// The first `W` bytes of `r`, as a slice of known length.
#[inline(always)]
fn first_w<const W: usize>(r: &[u8]) -> Option<&[u8]> {
    r.first_chunk::<W>().map(|c| c.as_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_copies_whole_records_and_refuses_short_ones() {
        for (kw, vw) in [(8usize, 4usize), (5, 2)] {
            let layout = Layout::fixed(kw, vw).expect("layout");
            let w = kw + vw;
            let src: Vec<u8> = (0..10 * w).map(|i| i as u8).collect();
            let mut b = RecordBatch::new(layout);
            // Records 3, 0, 7, then the iterator ends before `max`.
            let mut recs = [3usize, 0, 7].into_iter().map(|r| &src[r * w..]);
            assert_eq!(b.gather_fixed(&mut recs, 5).expect("gather"), 3);
            assert_eq!(b.len(), 3);
            let want: Vec<u8> = [3, 0, 7].iter().flat_map(|r| src[r * w..][..w].to_vec()).collect();
            assert_eq!(b.payload(), &want[..]);
            // A slice shorter than a record: an error, earlier records kept.
            let mut short = [1usize, 9].into_iter().map(|r| &src[r * w + 1..]);
            let err = b.gather_fixed(&mut short, 2).expect_err("short record");
            assert!(err.to_string().contains(&format!("{w}-byte")), "{err}");
            assert_eq!(b.len(), 4);
            assert_eq!(b.payload_len(), 4 * w);
        }
    }

    #[test]
    fn fixed_push_and_iterate() {
        let layout = Layout::fixed(4, 2).expect("layout");
        let mut b = RecordBatch::new(layout);
        b.push(b"abcd", b"xy").expect("push");
        b.push(b"efgh", b"zw").expect("push");
        assert!(matches!(b.push(b"abc", b"xy"), Err(FormatError::KeyWidthMismatch { .. })));
        assert!(matches!(b.push(b"abcd", b"x"), Err(FormatError::ValueWidthMismatch { .. })));
        assert_eq!(b.len(), 2);
        assert_eq!(b.payload(), b"abcdxyefghzw");
        let keys: Vec<&[u8]> = b.iter().map(|r| r.key).collect();
        assert_eq!(keys, vec![&b"abcd"[..], &b"efgh"[..]]);
    }

    #[test]
    fn variable_push_and_iterate() {
        let mut b = RecordBatch::new(Layout::Variable);
        b.push(b"", b"").expect("push");
        b.push(b"key", b"a longer value").expect("push");
        let recs: Vec<Record<'_>> = b.iter().collect();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1], Record { key: b"key", value: b"a longer value" });
        assert!(BatchView::new(Layout::Variable, 2, b.payload()).is_ok());
        assert!(BatchView::new(Layout::Variable, 3, b.payload()).is_err());
        assert!(BatchView::new(Layout::Variable, 1, b.payload()).is_err());
    }

    #[test]
    fn forged_variable_lengths_are_rejected() {
        let mut data = Vec::new();
        data.extend_from_slice(&u32::MAX.to_le_bytes());
        data.extend_from_slice(&u32::MAX.to_le_bytes());
        let err = BatchView::new(Layout::Variable, 1, &data).expect_err("forged");
        assert!(matches!(err, FormatError::MalformedRecord { record: 0, offset: 0, .. }), "{err}");
    }

    #[test]
    fn extend_fixed_counts_records() {
        let mut b = RecordBatch::new(Layout::TUPLE16);
        b.extend_fixed(&[1u8; 48]).expect("extend");
        assert_eq!(b.len(), 3);
        assert!(b.extend_fixed(&[1u8; 17]).is_err());
        assert_eq!(b.len(), 3);
    }
}
