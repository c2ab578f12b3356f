//! Zipf-distributed ranks: rank `r` in `0..n` drawn with probability
//! proportional to `1 / (r + 1)^s`, by inverse transform over a precomputed
//! cumulative table (8 bytes per rank).

use crate::datagen::rng::SplitMix64;

/// A Zipf(s) sampler over `n` ranks.
#[derive(Debug, Clone)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// A sampler over `n >= 1` ranks with exponent `s > 0`.
    pub fn new(n: usize, s: f64) -> Self {
        let mut cdf = Vec::with_capacity(n.max(1));
        let mut acc = 0.0;
        for r in 0..n.max(1) {
            acc += 1.0 / ((r + 1) as f64).powf(s);
            cdf.push(acc);
        }
        for c in &mut cdf {
            *c /= acc;
        }
        Zipf { cdf }
    }

    /// Draws a rank.
    pub fn sample(&self, rng: &mut SplitMix64) -> u64 {
        let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let i = self.cdf.partition_point(|&c| c <= u);
        i.min(self.cdf.len() - 1) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_zero_is_the_most_frequent() {
        let z = Zipf::new(1000, 1.1);
        let mut rng = SplitMix64::new(1);
        let mut counts = vec![0u32; 1000];
        for _ in 0..100_000 {
            counts[z.sample(&mut rng) as usize] += 1;
        }
        assert!(counts[0] > counts[1] && counts[1] > counts[10] && counts[10] > counts[500]);
    }
}
