//! Aggregate functions over typed values, and their partial states.
//!
//! A state is one or two 64-bit words per group:
//!
//! | function | state (partial record value, little-endian) | final value |
//! |---|---|---|
//! | sum | i64 (integers, wrapping) or f64 | i64 or f64, 8 bytes |
//! | exact sum | i64 sum (wrapping) + overflow flag u64, 16 bytes | the same 16 bytes |
//! | count | u64 | u64, 8 bytes |
//! | min, max | i64 or f64 | i64 or f64, 8 bytes |
//! | avg | sum (i64 or f64) + count u64, 16 bytes | f64, 8 bytes |
//! | collect | (in memory: head and tail of a value chain) | `[len:u32le value]*` |
//! | lanes | several functions' states back to back ([`super::lanes`]) | the same words |
//!
//! i32 and f32 inputs widen to i64 and f64 (Spark's `sum` of ints is a
//! long as well). States merge associatively, so partial results from any
//! number of map-side operators and spills combine to the exact answer;
//! integer sums wrap on overflow, the same on every path. The exact sum
//! (Spark SQL's `sum` of integers under ANSI mode, which must fail rather
//! than wrap) also wraps, but sets its flag word when any addition on any
//! path overflowed, and hands the flag on with the result: the host turns a
//! set flag into its overflow error.

use super::inline::INLINE_WORDS_MAX;
use super::lanes::{Lanes, STATE_WORDS_MAX};

/// Most bytes of one group's state.
pub(crate) const STATE_BYTES_MAX: usize = STATE_WORDS_MAX * 8;

/// Type of an aggregated value (the whole record value, little-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueType {
    /// 4-byte signed integer.
    I32,
    /// 8-byte signed integer.
    I64,
    /// 4-byte float.
    F32,
    /// 8-byte float.
    F64,
}

impl ValueType {
    /// Bytes of one value.
    pub fn width(self) -> usize {
        match self {
            ValueType::I32 | ValueType::F32 => 4,
            ValueType::I64 | ValueType::F64 => 8,
        }
    }

    /// Name for messages.
    pub fn name(self) -> &'static str {
        match self {
            ValueType::I32 => "i32",
            ValueType::I64 => "i64",
            ValueType::F32 => "f32",
            ValueType::F64 => "f64",
        }
    }

    fn is_float(self) -> bool {
        matches!(self, ValueType::F32 | ValueType::F64)
    }

    /// The value widened to a state word (i64 or f64 bits); `v` has
    /// exactly [`ValueType::width`] bytes.
    #[inline]
    pub(crate) fn widen(self, v: &[u8]) -> u64 {
        match self {
            ValueType::I32 => i64::from(i32::from_le_bytes(le4(v))) as u64,
            ValueType::I64 => u64::from_le_bytes(le8(v)),
            ValueType::F32 => f64::from(f32::from_le_bytes(le4(v))).to_bits(),
            ValueType::F64 => u64::from_le_bytes(le8(v)),
        }
    }
}

#[inline]
fn le4(v: &[u8]) -> [u8; 4] {
    v.first_chunk::<4>().copied().unwrap_or_default()
}

#[inline]
fn le8(v: &[u8]) -> [u8; 8] {
    v.first_chunk::<8>().copied().unwrap_or_default()
}

/// An aggregate function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggFn {
    /// Sum of values.
    Sum,
    /// Number of records.
    Count,
    /// Smallest value.
    Min,
    /// Largest value.
    Max,
    /// Mean of values.
    Avg,
    /// Sum of integers that reports overflow (see the module docs).
    SumExact,
    /// Every value of the key (groupByKey).
    Collect,
    /// Several functions over one record's several values (a Spark SQL
    /// aggregate; see [`super::lanes`]).
    Lanes(Lanes),
}

/// A function applied to values of a type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AggSpec {
    /// The function.
    pub func: AggFn,
    /// The input value type (ignored by count and collect).
    pub value: ValueType,
}

impl AggSpec {
    /// `func` over `value`.
    pub fn new(func: AggFn, value: ValueType) -> Self {
        AggSpec { func, value }
    }

    /// Words of state per group (at most [`STATE_WORDS_MAX`]).
    pub fn state_words(self) -> usize {
        match self.func {
            AggFn::Avg | AggFn::Collect | AggFn::SumExact => 2,
            AggFn::Lanes(l) => l.state_words(),
            _ => 1,
        }
    }

    /// Bytes of a final value (numeric functions): 8, 16 for the exact
    /// sum (the sum, then the overflow flag), the state for lanes.
    pub fn result_bytes(self) -> usize {
        match self.func {
            AggFn::SumExact => 16,
            AggFn::Lanes(l) => l.state_words() * 8,
            _ => 8,
        }
    }

    /// Bytes of one raw value (`None`: any, for count and collect).
    pub(crate) fn value_bytes(self) -> Option<usize> {
        match self.func {
            AggFn::Count | AggFn::Collect => None,
            AggFn::Lanes(l) => Some(l.input_bytes()),
            _ => Some(self.value.width()),
        }
    }

    /// Whether the inline tables (8-byte keys, the state words beside the
    /// key) take this function: every numeric one, and lanes of at most
    /// [`INLINE_WORDS_MAX`] words.
    pub(crate) fn inline_ok(self) -> bool {
        match self.func {
            AggFn::Collect => false,
            AggFn::Lanes(l) => l.state_words() <= INLINE_WORDS_MAX,
            _ => true,
        }
    }

    /// Bytes of a partial state record's value (numeric functions).
    pub fn partial_bytes(self) -> usize {
        self.state_words() * 8
    }

    /// Folds one raw value into a fresh (`first`) or existing state.
    #[inline(always)]
    pub(crate) fn update(self, st: &mut [u64], v: &[u8], first: bool) {
        if let AggFn::Lanes(l) = self.func {
            return l.update(st, v, first);
        }
        let x = self.value.widen(v);
        let float = self.value.is_float();
        match self.func {
            AggFn::Count => st[0] = if first { 1 } else { st[0] + 1 },
            AggFn::Sum => st[0] = if first { x } else { add(st[0], x, float) },
            AggFn::Min => st[0] = if first { x } else { pick(st[0], x, float, true) },
            AggFn::Max => st[0] = if first { x } else { pick(st[0], x, float, false) },
            AggFn::Avg => {
                if first {
                    st[0] = x;
                    st[1] = 1;
                } else {
                    st[0] = add(st[0], x, float);
                    st[1] += 1;
                }
            }
            AggFn::SumExact => {
                if first {
                    st[0] = x;
                    st[1] = 0;
                } else {
                    add_exact(st, x, 0, float);
                }
            }
            AggFn::Collect | AggFn::Lanes(_) => {}
        }
    }

    /// The partial-state bytes of a group holding only `value` (numeric
    /// functions): what a record passed through unaggregated is emitted as.
    pub(crate) fn single_partial(self, value: &[u8], out: &mut [u8]) -> usize {
        let mut st = [0u64; STATE_WORDS_MAX];
        let w = self.state_words();
        self.update(&mut st[..w], value, true);
        write_state(&st[..w], out)
    }

    /// The final value of a state given as partial bytes (for the merge of
    /// sorted runs), into `out`.
    pub(crate) fn finalize_partial(self, state: &[u8], out: &mut Vec<u8>) {
        out.clear();
        if self.func == AggFn::Collect {
            out.extend_from_slice(state);
        } else {
            let w = self.state_words();
            let mut st = [0u64; STATE_WORDS_MAX];
            read_state(state, &mut st[..w]);
            self.finalize_into(&st[..w], out);
        }
    }

    /// Merges partial bytes `other` into partial bytes `acc`.
    pub(crate) fn merge_partial_bytes(self, acc: &mut Vec<u8>, other: &[u8]) {
        if self.func == AggFn::Collect {
            acc.extend_from_slice(other);
            return;
        }
        let w = self.state_words();
        let (mut a, mut b) = ([0u64; STATE_WORDS_MAX], [0u64; STATE_WORDS_MAX]);
        read_state(acc, &mut a[..w]);
        read_state(other, &mut b[..w]);
        self.merge(&mut a[..w], &b[..w]);
        let mut buf = [0u8; STATE_BYTES_MAX];
        let n = write_state(&a[..w], &mut buf);
        acc.clear();
        acc.extend_from_slice(&buf[..n]);
    }

    /// Merges the partial state `other` into `st` (numeric functions).
    #[inline]
    pub(crate) fn merge(self, st: &mut [u64], other: &[u64]) {
        let float = self.value.is_float();
        match self.func {
            AggFn::Count => st[0] = st[0].wrapping_add(other[0]),
            AggFn::Sum => st[0] = add(st[0], other[0], float),
            AggFn::Min => st[0] = pick(st[0], other[0], float, true),
            AggFn::Max => st[0] = pick(st[0], other[0], float, false),
            AggFn::Avg => {
                st[0] = add(st[0], other[0], float);
                st[1] = st[1].wrapping_add(other[1]);
            }
            AggFn::SumExact => add_exact(st, other[0], other[1], float),
            AggFn::Lanes(l) => l.merge(st, other),
            AggFn::Collect => {}
        }
    }

    /// Appends the final value of a numeric state ([`result_bytes`](Self::result_bytes)
    /// bytes) to `out`.
    pub(crate) fn finalize_into(self, st: &[u64], out: &mut Vec<u8>) {
        if let AggFn::Lanes(_) = self.func {
            for w in st {
                out.extend_from_slice(&w.to_le_bytes());
            }
            return;
        }
        out.extend_from_slice(&self.finalize(st));
        if self.func == AggFn::SumExact {
            out.extend_from_slice(&st[1].to_le_bytes());
        }
    }

    /// The first 8 bytes of the final value of a numeric state.
    pub(crate) fn finalize(self, st: &[u64]) -> [u8; 8] {
        match self.func {
            AggFn::Avg => {
                let n = st[1].max(1) as f64;
                let sum =
                    if self.value.is_float() { f64::from_bits(st[0]) } else { st[0] as i64 as f64 };
                (sum / n).to_le_bytes()
            }
            _ => st[0].to_le_bytes(),
        }
    }
}

#[inline]
fn add(a: u64, b: u64, float: bool) -> u64 {
    if float {
        (f64::from_bits(a) + f64::from_bits(b)).to_bits()
    } else {
        a.wrapping_add(b)
    }
}

/// Adds `x` and a partial's overflow `flag` into an exact sum's state.
#[inline]
fn add_exact(st: &mut [u64], x: u64, flag: u64, float: bool) {
    if float {
        st[0] = add(st[0], x, true);
        return;
    }
    let (sum, over) = (st[0] as i64).overflowing_add(x as i64);
    st[0] = sum as u64;
    st[1] |= flag | u64::from(over);
}

#[inline]
fn pick(a: u64, b: u64, float: bool, min: bool) -> u64 {
    let less = if float {
        f64::from_bits(b).total_cmp(&f64::from_bits(a)).is_lt()
    } else {
        (b as i64) < (a as i64)
    };
    if less == min {
        b
    } else {
        a
    }
}

/// Reads a partial state record's value into words.
pub(crate) fn read_state(bytes: &[u8], out: &mut [u64]) {
    for (w, c) in out.iter_mut().zip(bytes.chunks_exact(8)) {
        *w = u64::from_le_bytes(le8(c));
    }
}

/// Writes state words as a partial record value.
pub(crate) fn write_state(st: &[u64], out: &mut [u8]) -> usize {
    for (c, w) in out.chunks_exact_mut(8).zip(st) {
        c.copy_from_slice(&w.to_le_bytes());
    }
    st.len() * 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_states_merge_to_the_whole() {
        let vals: Vec<i32> = vec![5, -3, 12, 7, -20, 4];
        for func in [AggFn::Sum, AggFn::Count, AggFn::Min, AggFn::Max, AggFn::Avg, AggFn::SumExact]
        {
            let spec = AggSpec::new(func, ValueType::I32);
            let fold = |vs: &[i32]| {
                let mut st = [0u64; 2];
                for (i, v) in vs.iter().enumerate() {
                    spec.update(&mut st, &v.to_le_bytes(), i == 0);
                }
                st
            };
            let whole = fold(&vals);
            let mut left = fold(&vals[..2]);
            spec.merge(&mut left, &fold(&vals[2..]));
            assert_eq!(spec.finalize(&whole), spec.finalize(&left), "{func:?}");
        }
        let avg = AggSpec::new(AggFn::Avg, ValueType::F64);
        let mut st = [0u64; 2];
        avg.update(&mut st, &1.5f64.to_le_bytes(), true);
        avg.update(&mut st, &2.5f64.to_le_bytes(), false);
        assert_eq!(f64::from_le_bytes(avg.finalize(&st)), 2.0);
        let min = AggSpec::new(AggFn::Min, ValueType::F32);
        let mut st = [0u64; 1];
        min.update(&mut st, &3.0f32.to_le_bytes(), true);
        min.update(&mut st, &(-1.25f32).to_le_bytes(), false);
        assert_eq!(f64::from_le_bytes(min.finalize(&st)), -1.25);
    }

    #[test]
    fn the_exact_sum_flags_an_overflow_on_any_path() {
        let spec = AggSpec::new(AggFn::SumExact, ValueType::I64);
        let value = |st: &[u64]| {
            let mut out = Vec::new();
            spec.finalize_into(st, &mut out);
            out
        };
        let mut st = [0u64; 2];
        spec.update(&mut st, &(i64::MAX - 1).to_le_bytes(), true);
        spec.update(&mut st, &1i64.to_le_bytes(), false);
        assert_eq!(value(&st)[..8], i64::MAX.to_le_bytes());
        assert_eq!(value(&st)[8..], 0u64.to_le_bytes());
        // One more: wraps, and the flag says so.
        spec.update(&mut st, &1i64.to_le_bytes(), false);
        assert_eq!(value(&st)[8..], 1u64.to_le_bytes());
        // A merge passes a partial's flag on, and flags its own overflow.
        let mut clean = [0u64; 2];
        spec.update(&mut clean, &5i64.to_le_bytes(), true);
        spec.merge(&mut clean, &st);
        assert_eq!(clean[1], 1);
        let mut low = [0u64; 2];
        spec.update(&mut low, &i64::MIN.to_le_bytes(), true);
        spec.merge(&mut low, &[(-1i64) as u64, 0]);
        assert_eq!(low[1], 1, "underflow is an overflow too");
        assert_eq!(spec.result_bytes(), 16);
    }
}
