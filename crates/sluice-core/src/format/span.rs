//! Spans: ranges of a payload at record boundaries, and the one pass that
//! validates a variable-layout payload, checks each record's key and cuts
//! the payload into spans.
//!
//! A map buffer entering the engine from a host (a JVM's direct buffer) is
//! untrusted. It used to be walked record by record four times before it
//! was partitioned: validated as a payload, its keys checked by the host
//! binding, cut into the scheduler's segments, and each segment validated
//! again. [`check_variable`] does the first three in one walk and hands
//! back a [`CheckedPayload`]: the validated view and its spans. Spans are
//! only made by this module's walks over valid payloads ([`check_variable`],
//! [`RecordBatch::spans`](crate::format::RecordBatch::spans)), so a span
//! of a batch views its records without another walk
//! ([`RecordBatch::span_view`](crate::format::RecordBatch::span_view)).

use crate::format::batch::read_prefix;
use crate::format::limits::VARIABLE_RECORD_PREFIX_BYTES;
use crate::format::{BatchView, FormatError, Layout};

/// A range of a payload at record boundaries: bytes `start..end` hold
/// `records` whole records. Made only by walks over valid payloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) records: u32,
}

impl Span {
    /// First byte.
    pub fn start(&self) -> usize {
        self.start
    }

    /// One past the last byte.
    pub fn end(&self) -> usize {
        self.end
    }

    /// Payload bytes.
    pub fn bytes(&self) -> usize {
        self.end - self.start
    }

    /// Records in the span.
    pub fn records(&self) -> u32 {
        self.records
    }

    /// The same span `by` bytes further on (its payload appended after
    /// `by` bytes of others).
    pub(crate) fn shifted(self, by: usize) -> Span {
        Span { start: self.start + by, end: self.end + by, records: self.records }
    }
}

/// A variable-layout payload validated in one pass, with its spans.
#[derive(Debug)]
pub struct CheckedPayload<'a> {
    view: BatchView<'a>,
    spans: Vec<Span>,
}

impl<'a> CheckedPayload<'a> {
    /// The validated records.
    pub fn view(&self) -> BatchView<'a> {
        self.view
    }

    /// Spans of about the requested size tiling the payload, in order.
    pub fn spans(&self) -> &[Span] {
        &self.spans
    }
}

/// Why [`check_variable`] refused a payload.
#[derive(Debug)]
pub enum CheckError<E> {
    /// The payload is not `count` well-formed records.
    Format(FormatError),
    /// The caller's check refused record `record`.
    Record(E),
}

/// Validates `data` as `count` variable-layout records, shows each record's
/// index and key to `check`, and cuts the payload into spans of at least
/// `span_bytes` (the last may be shorter), all in one walk.
pub fn check_variable<E>(
    count: u32,
    data: &[u8],
    span_bytes: usize,
    mut check: impl FnMut(u32, &[u8]) -> Result<(), E>,
) -> Result<CheckedPayload<'_>, CheckError<E>> {
    let target = span_bytes.max(1);
    let mut spans = Vec::with_capacity(data.len() / target + 1);
    let (mut pos, mut span_start, mut in_span) = (0usize, 0usize, 0u32);
    for record in 0..count {
        let malformed = |reason| {
            CheckError::Format(FormatError::MalformedRecord {
                record: record.into(),
                offset: pos as u64,
                reason,
            })
        };
        let (k, v) = read_prefix(data, pos).ok_or_else(|| malformed("prefix past end"))?;
        // k and v are below 2^32 each and pos is at most the payload
        // length, so the u64 sum cannot overflow; compared before slicing.
        let key_start = pos + VARIABLE_RECORD_PREFIX_BYTES;
        let end = key_start as u64 + k as u64 + v as u64;
        if end > data.len() as u64 {
            return Err(malformed("key and value run past the payload"));
        }
        check(record, &data[key_start..key_start + k]).map_err(CheckError::Record)?;
        pos = end as usize;
        in_span += 1;
        if pos - span_start >= target {
            spans.push(Span { start: span_start, end: pos, records: in_span });
            (span_start, in_span) = (pos, 0);
        }
    }
    if pos != data.len() {
        return Err(CheckError::Format(FormatError::MalformedRecord {
            record: count.into(),
            offset: pos as u64,
            reason: "bytes left after the last record",
        }));
    }
    if in_span > 0 {
        spans.push(Span { start: span_start, end: pos, records: in_span });
    }
    Ok(CheckedPayload { view: BatchView::new_unchecked(Layout::Variable, count, data), spans })
}

/// Spans of at least `target` bytes (the last may be shorter) tiling a
/// valid payload.
pub(crate) fn spans_of(view: &BatchView<'_>, target: usize) -> Vec<Span> {
    let target = target.max(1);
    let total = view.payload().len();
    let mut out = Vec::new();
    match view.layout().fixed_record_bytes() {
        Some(width) => {
            let width = width.max(1);
            let per = (target / width).max(1);
            let mut start = 0;
            while start < total {
                let n = per.min((total - start) / width);
                out.push(Span { start, end: start + n * width, records: n as u32 });
                start += n * width;
            }
        }
        None => {
            let (mut start, mut end, mut n) = (0, 0, 0u32);
            let mut raw = view.raw();
            while let Some(r) = raw.next_raw() {
                end += r.bytes.len();
                n += 1;
                if end - start >= target {
                    out.push(Span { start, end, records: n });
                    (start, n) = (end, 0);
                }
            }
            if n > 0 {
                out.push(Span { start, end, records: n });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::RecordBatch;

    fn variable(n: usize) -> RecordBatch {
        let mut v = RecordBatch::new(Layout::Variable);
        for i in 0..n {
            v.push(&vec![7; 4 + i % 50], &vec![9; i % 7]).expect("push");
        }
        v
    }

    #[test]
    fn one_pass_validates_checks_keys_and_cuts_as_the_separate_walks_did() {
        let b = variable(300);
        let mut keys = 0;
        let checked = check_variable(300, b.payload(), 500, |_, key| {
            keys += 1;
            (key.len() >= 4).then_some(()).ok_or("short key")
        })
        .expect("valid");
        assert_eq!(keys, 300);
        assert_eq!(checked.view(), b.view());
        assert_eq!(checked.spans(), &spans_of(&b.view(), 500)[..]);
        for s in checked.spans() {
            let records = &b.payload()[s.start()..s.end()];
            let alone = BatchView::new(Layout::Variable, s.records(), records).expect("valid span");
            assert_eq!(b.span_view(*s).expect("span").payload(), alone.payload());
        }
    }

    #[test]
    fn a_bad_payload_or_key_is_refused_naming_the_record() {
        let b = variable(10);
        let err = check_variable(10, b.payload(), 64, |i, _| if i == 6 { Err(i) } else { Ok(()) });
        assert!(matches!(err, Err(CheckError::Record(6))));
        let cut = &b.payload()[..b.payload_len() - 1];
        let err = check_variable(10, cut, 64, |_, _| Ok::<(), ()>(()));
        assert!(
            matches!(err, Err(CheckError::Format(FormatError::MalformedRecord { record: 9, .. }))),
            "{err:?}"
        );
        let err = check_variable(9, b.payload(), 64, |_, _| Ok::<(), ()>(()));
        assert!(matches!(
            err,
            Err(CheckError::Format(FormatError::MalformedRecord { record: 9, .. }))
        ));
        // A forged length far past the end is caught before any slicing.
        let mut forged = b.payload().to_vec();
        forged[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        let err = check_variable(10, &forged, 64, |_, _| Ok::<(), ()>(()));
        assert!(matches!(err, Err(CheckError::Format(_))));
    }

    #[test]
    fn fixed_spans_tile_at_record_boundaries() {
        let fixed = Layout::fixed(8, 4).expect("layout");
        let mut b = RecordBatch::new(fixed);
        for i in 0u64..1000 {
            b.push(&i.to_le_bytes(), &[1; 4]).expect("push");
        }
        let spans = b.spans(1000);
        assert_eq!(spans.iter().map(|s| s.records()).sum::<u32>(), 1000);
        assert!(spans.iter().all(|s| s.bytes() % 12 == 0 && s.bytes() <= 1000));
        assert!(spans.windows(2).all(|w| w[0].end() == w[1].start()));
    }
}
