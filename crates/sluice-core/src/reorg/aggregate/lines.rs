//! Words that start on a cache-line boundary, for tables whose buckets are
//! laid out to fill whole lines.
//!
//! A `Vec<u64>` is only 8-byte aligned, and the allocator's large blocks
//! (mmap'd, after a 16-byte header) start 16 bytes into a line: a 32-byte
//! bucket at an even index then straddles two lines, so half the probes
//! of a table that expects one line per bucket touch two. [`LineWords`]
//! over-allocates by up to one line and skips the words before the first
//! line boundary; the table sees only the aligned words.

/// Bytes of a cache line.
pub(super) const LINE_BYTES: usize = 64;

/// Words of a cache line.
const LINE_WORDS: usize = LINE_BYTES / 8;

/// Most bytes allocated beyond the visible words (skipped to reach a line).
pub(super) const LINE_SLACK_BYTES: usize = LINE_BYTES - 8;

/// A growable run of `u64` whose first visible word starts a cache line.
/// Its capacity is fixed when it is made: it never reallocates, so the
/// alignment holds for its life.
#[derive(Debug, Default)]
pub(super) struct LineWords {
    buf: Vec<u64>,
    /// Words skipped before the first line boundary.
    skip: usize,
    /// Visible words the capacity allows.
    cap: usize,
}

impl LineWords {
    /// Room for `words` words, none yet visible.
    pub(super) fn with_capacity(words: usize) -> Self {
        let mut buf: Vec<u64> = Vec::with_capacity(words + LINE_SLACK_BYTES / 8);
        // `align_offset` may decline (usize::MAX); the words then stay
        // where they are, correct if slower.
        let skip = match buf.as_ptr().align_offset(LINE_BYTES) {
            s if s < LINE_WORDS => s,
            _ => 0,
        };
        buf.resize(skip, 0);
        let cap = buf.capacity() - skip;
        LineWords { buf, skip, cap }
    }

    /// `words` copies of `fill`, repeated: the first `fill.len()` words are
    /// `fill`, and so on (`words` a multiple of its length).
    pub(super) fn filled(words: usize, fill: &[u64]) -> Self {
        let mut w = Self::with_capacity(words);
        for _ in 0..words / fill.len().max(1) {
            w.extend_from_slice(fill);
        }
        w
    }

    /// Appends words within the capacity.
    ///
    /// # Panics
    /// Past the capacity (that would move the words off their line).
    pub(super) fn extend_from_slice(&mut self, words: &[u64]) {
        assert!(self.len() + words.len() <= self.cap, "LineWords past its capacity");
        self.buf.extend_from_slice(words);
    }

    /// Visible words.
    pub(super) fn len(&self) -> usize {
        self.buf.len() - self.skip
    }

    /// The visible words.
    pub(super) fn words(&self) -> &[u64] {
        &self.buf[self.skip..]
    }

    /// The visible words, mutable.
    pub(super) fn words_mut(&mut self) -> &mut [u64] {
        &mut self.buf[self.skip..]
    }

    /// Bytes allocated, skipped words included.
    pub(super) fn allocated(&self) -> usize {
        self.buf.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_word_starts_a_line_and_capacity_holds() {
        for words in [1usize, 7, 8, 100, 1 << 16] {
            let mut w = LineWords::with_capacity(words);
            assert_eq!(w.len(), 0);
            for i in 0..words as u64 {
                w.extend_from_slice(&[i]);
            }
            assert_eq!(w.words().as_ptr() as usize % LINE_BYTES, 0, "{words} words");
            assert_eq!(w.words().len(), words);
            assert_eq!(w.words()[words - 1], words as u64 - 1);
            assert!(w.allocated() >= words * 8 && w.allocated() <= words * 8 + LINE_SLACK_BYTES);
            w.words_mut()[0] = 42;
            assert_eq!(w.words()[0], 42);
        }
        let f = LineWords::filled(12, &[1, 2, 3]);
        assert_eq!(f.words(), &[1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3]);
    }

    #[test]
    #[should_panic(expected = "past its capacity")]
    fn growing_past_the_capacity_is_refused() {
        let mut w = LineWords::with_capacity(4);
        let room = w.cap;
        w.extend_from_slice(&vec![0; room + 1]);
    }
}
