//! A stateless 64-bit mixer: SplitMix64's output function (Steele et al.
//! 2014). Every input bit flips each output bit with probability close to
//! one half, so it spreads structured inputs (counters, folds of keys)
//! before they are reduced to a range. The data generators draw from it
//! (`datagen::rng`) and the fold partitioner mixes with it for partition
//! counts that are not a power of two; neither depends on the other.

/// SplitMix64's finaliser of `z`.
#[inline]
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
