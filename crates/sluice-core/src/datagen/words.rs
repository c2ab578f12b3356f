//! HiBench-style random text: keys of 5-9 words and values of 10-99 words,
//! drawn uniformly from a fixed list of 1000 words.
//!
//! HiBench uses a dictionary; Sluice builds its 1000 words deterministically
//! from syllables (3-12 letters each), which keeps the statistics (word count,
//! word lengths, uniform draws) without shipping a word list.

use crate::datagen::rng::SplitMix64;

/// Number of distinct words.
pub const VOCABULARY_WORDS: usize = 1000;

const SYLLABLES: [&str; 32] = [
    "ka", "lo", "mi", "nu", "re", "sa", "ti", "vo", "ba", "de", "fi", "go", "hu", "ja", "ke", "li",
    "ma", "ne", "or", "pa", "qu", "ro", "si", "tu", "ul", "ve", "wa", "xe", "yo", "za", "en", "is",
];

/// The vocabulary: 1000 distinct words, the same on every call.
pub fn vocabulary() -> Vec<String> {
    let mut rng = SplitMix64::new(0x57_4F_52_44);
    let mut words = Vec::with_capacity(VOCABULARY_WORDS);
    let mut seen = std::collections::HashSet::new();
    while words.len() < VOCABULARY_WORDS {
        let n = 2 + rng.below(5) as usize;
        let w: String = (0..n).map(|_| SYLLABLES[rng.below(32) as usize]).collect();
        if seen.insert(w.clone()) {
            words.push(w);
        }
    }
    words
}

/// Generator of (key, value) text records.
#[derive(Debug)]
pub struct TextGen {
    words: Vec<String>,
    rng: SplitMix64,
}

impl TextGen {
    /// A generator for data set `seed`.
    pub fn new(seed: u64) -> Self {
        TextGen { words: vocabulary(), rng: SplitMix64::new(seed) }
    }

    fn line(&mut self, min: u64, max: u64, out: &mut Vec<u8>) {
        let n = min + self.rng.below(max - min + 1);
        for i in 0..n {
            if i > 0 {
                out.push(b' ');
            }
            let w = &self.words[self.rng.below(VOCABULARY_WORDS as u64) as usize];
            out.extend_from_slice(w.as_bytes());
        }
    }

    /// Writes the next record's key (5-9 words) and value (10-99 words),
    /// space separated, into the two buffers (cleared first).
    pub fn next_record(&mut self, key: &mut Vec<u8>, value: &mut Vec<u8>) {
        key.clear();
        value.clear();
        self.line(5, 9, key);
        self.line(10, 99, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabulary_is_stable_and_distinct() {
        let v = vocabulary();
        assert_eq!(v.len(), VOCABULARY_WORDS);
        assert_eq!(v, vocabulary());
    }

    #[test]
    fn word_counts_in_range() {
        let mut g = TextGen::new(1);
        let (mut k, mut v) = (Vec::new(), Vec::new());
        for _ in 0..100 {
            g.next_record(&mut k, &mut v);
            let kw = k.split(|&c| c == b' ').count();
            let vw = v.split(|&c| c == b' ').count();
            assert!((5..=9).contains(&kw) && (10..=99).contains(&vw));
        }
    }
}
