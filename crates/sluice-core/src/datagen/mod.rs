//! Deterministic input generators for workloads, benchmarks and fixtures.
//!
//! Every generator is a pure function of a seed and a row number, so a test,
//! a benchmark and a golden fixture regenerate identical bytes on any machine
//! and any version of the dependencies (no external RNG crate is involved).

pub mod rng;
pub mod teragen;
pub mod tuples;
pub mod words;
pub mod zipf;

pub use rng::SplitMix64;
