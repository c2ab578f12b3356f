//! Several aggregates per group ("lanes"): the state of one Spark SQL
//! aggregate with any number of functions over nullable integer and decimal
//! columns.
//!
//! A record's value is the lanes' inputs back to back, each of a fixed
//! width, so the whole value has one width the operator checks; a group's
//! state is the lanes' state words back to back:
//!
//! | lane | input (little-endian) | state words |
//! |---|---|---|
//! | count | i64 to add (a row's 1 or 0) | count |
//! | sum64 | flags byte + i64 | sum (wrapping), flags |
//! | sum128 | flags byte + i128 | sum low, sum high (wrapping), flags |
//! | min64, max64 | flags byte + i64 | value, flags |
//!
//! Flags: bit 0 ([`SEEN`]) once a valid input was folded in, bit 1
//! ([`OVERFLOW`]) once a sum overflowed its width on any path (a wrapped sum
//! is kept; the host decides: Spark SQL's ANSI mode fails, its legacy mode
//! wraps a long sum, and a decimal sum beyond 128 bits is beyond any
//! decimal's precision). An input without [`SEEN`] (SQL's null) leaves its
//! lane unchanged. An input is a state of one lane written out, so a
//! host's own first level of aggregation sends its partial states as
//! inputs (a count's count, a sum with its flags). An average is a sum
//! lane and a count lane. The final value is the state itself: the host
//! turns each lane into its aggregate's result (null when nothing was seen,
//! the decimal's precision checked), as Spark's own final aggregate would.
//!
//! The host names the lanes by one code, [`LANE_CODE_BITS`] bits per lane
//! from the lowest, each the lane's code ([`LaneKind::code`], 1 and up), 0
//! ending the list.

/// Most lanes of one aggregate: what one 32-bit code holds.
pub const LANES_MAX: usize = 10;

/// Bits of one lane in a lanes code.
pub const LANE_CODE_BITS: u32 = 3;

/// Most state words of one group: every lane a sum128.
pub const STATE_WORDS_MAX: usize = 3 * LANES_MAX;

/// Flag bit: the lane folded at least one valid input.
pub const SEEN: u64 = 1;

/// Flag bit: a sum overflowed its width (and wrapped).
pub const OVERFLOW: u64 = 2;

/// One aggregate of a lanes state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LaneKind {
    /// Sum of the inputs (each row's 1 or 0: `count(*)`, `count(x)`).
    Count,
    /// Sum of nullable 64-bit integers.
    Sum64,
    /// Sum of nullable 128-bit integers (unscaled decimals).
    Sum128,
    /// Smallest nullable 64-bit integer.
    Min64,
    /// Largest nullable 64-bit integer.
    Max64,
}

impl LaneKind {
    const ALL: [LaneKind; 5] =
        [LaneKind::Count, LaneKind::Sum64, LaneKind::Sum128, LaneKind::Min64, LaneKind::Max64];

    /// The lane's code in a lanes code (1 and up).
    pub fn code(self) -> u32 {
        match self {
            LaneKind::Count => 1,
            LaneKind::Sum64 => 2,
            LaneKind::Sum128 => 3,
            LaneKind::Min64 => 4,
            LaneKind::Max64 => 5,
        }
    }

    /// Bytes of one input.
    pub fn input_bytes(self) -> usize {
        match self {
            LaneKind::Count => 8,
            LaneKind::Sum64 | LaneKind::Min64 | LaneKind::Max64 => 9,
            LaneKind::Sum128 => 17,
        }
    }

    /// Words of state.
    pub fn words(self) -> usize {
        match self {
            LaneKind::Count => 1,
            LaneKind::Sum64 | LaneKind::Min64 | LaneKind::Max64 => 2,
            LaneKind::Sum128 => 3,
        }
    }

    /// Folds one input (exactly [`LaneKind::input_bytes`] bytes) into a
    /// state that starts zeroed.
    #[inline]
    fn update(self, st: &mut [u64], v: &[u8]) {
        if self == LaneKind::Count {
            st[0] = st[0].wrapping_add(u64::from_le_bytes(bytes::<8>(v, 0)));
            return;
        }
        let flags = u64::from(v[0]) & (SEEN | OVERFLOW);
        if flags & SEEN == 0 {
            return;
        }
        match self {
            LaneKind::Sum64 => add64(st, i64::from_le_bytes(bytes::<8>(v, 1)), flags),
            LaneKind::Sum128 => add128(st, i128::from_le_bytes(bytes::<16>(v, 1)), flags),
            LaneKind::Min64 | LaneKind::Max64 => {
                pick(st, i64::from_le_bytes(bytes::<8>(v, 1)), SEEN, self == LaneKind::Min64)
            }
            LaneKind::Count => {}
        }
    }

    /// Merges another state of this lane into `st`.
    #[inline]
    fn merge(self, st: &mut [u64], other: &[u64]) {
        match self {
            LaneKind::Count => st[0] = st[0].wrapping_add(other[0]),
            LaneKind::Sum64 => add64(st, other[0] as i64, other[1]),
            LaneKind::Sum128 => add128(st, wide(other[0], other[1]), other[2]),
            LaneKind::Min64 | LaneKind::Max64 => {
                if other[1] & SEEN != 0 {
                    pick(st, other[0] as i64, other[1], self == LaneKind::Min64);
                }
            }
        }
    }
}

/// The lanes of one aggregate, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lanes {
    n: u8,
    kinds: [LaneKind; LANES_MAX],
}

impl Lanes {
    /// The lanes `kinds` (1 to [`LANES_MAX`]).
    pub fn new(kinds: &[LaneKind]) -> Option<Lanes> {
        if kinds.is_empty() || kinds.len() > LANES_MAX {
            return None;
        }
        let mut all = [LaneKind::Count; LANES_MAX];
        all[..kinds.len()].copy_from_slice(kinds);
        Some(Lanes { n: kinds.len() as u8, kinds: all })
    }

    /// The lanes a host's code names (see the module docs), or `None` for
    /// an unknown lane, no lane, or bits beyond the last lane.
    pub fn from_code(code: u32) -> Option<Lanes> {
        let mut kinds = Vec::with_capacity(LANES_MAX);
        let mut rest = code;
        let mask = (1 << LANE_CODE_BITS) - 1;
        while rest != 0 {
            let c = rest & mask;
            let kind = LaneKind::ALL.iter().copied().find(|k| k.code() == c)?;
            kinds.push(kind);
            rest >>= LANE_CODE_BITS;
        }
        // A zero lane before a nonzero one names no lane (refused above).
        Lanes::new(&kinds)
    }

    /// The code that names these lanes.
    pub fn code(&self) -> u32 {
        self.kinds().iter().rev().fold(0, |acc, k| (acc << LANE_CODE_BITS) | k.code())
    }

    /// The lanes in order.
    pub fn kinds(&self) -> &[LaneKind] {
        &self.kinds[..usize::from(self.n)]
    }

    /// Bytes of a record's value.
    pub fn input_bytes(&self) -> usize {
        self.kinds().iter().map(|k| k.input_bytes()).sum()
    }

    /// Words of a group's state.
    pub fn state_words(&self) -> usize {
        self.kinds().iter().map(|k| k.words()).sum()
    }

    /// Folds a record's value (exactly [`Lanes::input_bytes`] bytes, which
    /// the operator checked) into a fresh (`first`) or existing state.
    #[inline]
    pub(crate) fn update(&self, st: &mut [u64], v: &[u8], first: bool) {
        if first {
            st.fill(0);
        }
        let (mut at, mut w) = (0, 0);
        for k in self.kinds() {
            let (n, words) = (k.input_bytes(), k.words());
            if let (Some(input), Some(state)) = (v.get(at..at + n), st.get_mut(w..w + words)) {
                k.update(state, input);
            }
            at += n;
            w += words;
        }
    }

    /// Merges the state `other` into `st`.
    #[inline]
    pub(crate) fn merge(&self, st: &mut [u64], other: &[u64]) {
        let mut w = 0;
        for k in self.kinds() {
            let words = k.words();
            if let (Some(a), Some(b)) = (st.get_mut(w..w + words), other.get(w..w + words)) {
                k.merge(a, b);
            }
            w += words;
        }
    }
}

#[inline]
fn bytes<const N: usize>(v: &[u8], at: usize) -> [u8; N] {
    v.get(at..at + N).and_then(|s| s.first_chunk::<N>()).copied().unwrap_or([0; N])
}

#[inline]
fn wide(lo: u64, hi: u64) -> i128 {
    (i128::from(hi as i64) << 64) | i128::from(lo)
}

/// Adds `x` (with the other side's `flags`) to a 64-bit sum.
#[inline]
fn add64(st: &mut [u64], x: i64, flags: u64) {
    let (sum, over) = (st[0] as i64).overflowing_add(x);
    st[0] = sum as u64;
    st[1] |= flags | if over { OVERFLOW } else { 0 };
}

/// Adds `x` (with the other side's `flags`) to a 128-bit sum.
#[inline]
fn add128(st: &mut [u64], x: i128, flags: u64) {
    let (sum, over) = wide(st[0], st[1]).overflowing_add(x);
    st[0] = sum as u64;
    st[1] = (sum >> 64) as u64;
    st[2] |= flags | if over { OVERFLOW } else { 0 };
}

/// Keeps the smaller (`min`) or larger of the state and `x`.
#[inline]
fn pick(st: &mut [u64], x: i64, flags: u64, min: bool) {
    let cur = st[0] as i64;
    if st[1] & SEEN == 0 || ((x < cur) == min && x != cur) {
        st[0] = x as u64;
    }
    st[1] |= flags;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(kinds: &[LaneKind], vals: &[Option<i128>]) -> Vec<u8> {
        let mut v = Vec::new();
        for (k, x) in kinds.iter().zip(vals) {
            match k {
                LaneKind::Count => v.extend_from_slice(&(u64::from(x.is_some())).to_le_bytes()),
                LaneKind::Sum64 | LaneKind::Min64 | LaneKind::Max64 => {
                    v.push(u8::from(x.is_some()));
                    v.extend_from_slice(&(x.unwrap_or(0) as i64).to_le_bytes());
                }
                LaneKind::Sum128 => {
                    v.push(u8::from(x.is_some()));
                    v.extend_from_slice(&x.unwrap_or(0).to_le_bytes());
                }
            }
        }
        v
    }

    /// A state written out as an input (a host's first level's partial).
    fn as_input(kinds: &[LaneKind], st: &[u64]) -> Vec<u8> {
        let mut v = Vec::new();
        let mut w = 0;
        for k in kinds {
            match k {
                LaneKind::Count => v.extend_from_slice(&st[w].to_le_bytes()),
                LaneKind::Sum64 | LaneKind::Min64 | LaneKind::Max64 => {
                    v.push(st[w + 1] as u8);
                    v.extend_from_slice(&st[w].to_le_bytes());
                }
                LaneKind::Sum128 => {
                    v.push(st[w + 2] as u8);
                    v.extend_from_slice(&st[w].to_le_bytes());
                    v.extend_from_slice(&st[w + 1].to_le_bytes());
                }
            }
            w += k.words();
        }
        v
    }

    #[test]
    fn codes_round_trip_and_unknown_codes_are_refused() {
        let kinds =
            [LaneKind::Max64, LaneKind::Count, LaneKind::Sum128, LaneKind::Min64, LaneKind::Sum64];
        let lanes = Lanes::new(&kinds).expect("lanes");
        assert_eq!(Lanes::from_code(lanes.code()).expect("lanes"), lanes);
        assert_eq!(lanes.kinds(), kinds);
        assert_eq!(lanes.input_bytes(), 9 + 8 + 17 + 9 + 9);
        assert_eq!(lanes.state_words(), 2 + 1 + 3 + 2 + 2);
        assert_eq!(Lanes::from_code(0), None);
        assert_eq!(Lanes::from_code(7), None, "code 7 names no lane");
        assert_eq!(Lanes::from_code(1 | (7 << 3)), None);
        assert_eq!(Lanes::from_code(1 | (2 << 6)), None, "a zero lane within");
        let ten = Lanes::new(&[LaneKind::Sum128; LANES_MAX]).expect("lanes");
        assert_eq!(Lanes::from_code(ten.code()).expect("lanes").state_words(), STATE_WORDS_MAX);
        assert_eq!(Lanes::new(&[LaneKind::Count; LANES_MAX + 1]), None);
    }

    const KINDS: [LaneKind; 5] =
        [LaneKind::Count, LaneKind::Sum64, LaneKind::Sum128, LaneKind::Min64, LaneKind::Max64];

    fn fold(lanes: &Lanes, rs: &[Option<i128>]) -> Vec<u64> {
        let mut st = vec![0u64; lanes.state_words()];
        for (i, r) in rs.iter().enumerate() {
            // The 64-bit lanes take the value cut to 64 bits.
            let small = r.map(|x| i128::from(x as i64));
            lanes.update(&mut st, &input(&KINDS, &[*r, small, *r, small, small]), i == 0);
        }
        st
    }

    #[test]
    fn partial_states_merge_to_the_whole_with_nulls() {
        let lanes = Lanes::new(&KINDS).expect("lanes");
        let rows: Vec<Option<i128>> =
            vec![None, Some(5), Some(-3), None, Some(1 << 70), Some(-7), Some(12)];
        let whole = fold(&lanes, &rows);
        for cut in 1..rows.len() {
            let mut left = fold(&lanes, &rows[..cut]);
            let right = fold(&lanes, &rows[cut..]);
            let mut refed = left.clone();
            lanes.merge(&mut left, &right);
            assert_eq!(left, whole, "merged at {cut}");
            // The right side's state sent as an input folds in alike.
            lanes.update(&mut refed, &as_input(&KINDS, &right), false);
            assert_eq!(refed, whole, "re-fed at {cut}");
        }
        let valid: Vec<i128> = rows.iter().flatten().copied().collect();
        assert_eq!(whole[0], valid.len() as u64, "count");
        let sum64: i64 = valid.iter().map(|&x| x as i64).fold(0, i64::wrapping_add);
        assert_eq!((whole[1] as i64, whole[2]), (sum64, SEEN));
        let sum: i128 = valid.iter().sum();
        assert_eq!((wide(whole[3], whole[4]), whole[5]), (sum, SEEN));
        let small: Vec<i64> = valid.iter().map(|&x| x as i64).collect();
        assert_eq!(whole[6] as i64, *small.iter().min().expect("lanes"));
        assert_eq!(whole[8] as i64, *small.iter().max().expect("lanes"));
    }

    #[test]
    fn nulls_alone_leave_nothing_seen_and_overflow_is_flagged_on_any_path() {
        let kinds = [LaneKind::Sum64, LaneKind::Sum128, LaneKind::Min64];
        let lanes = Lanes::new(&kinds).expect("lanes");
        let mut st = [0u64; 7];
        lanes.update(&mut st, &input(&kinds, &[None, None, None]), true);
        assert_eq!(st, [0; 7], "nothing seen");
        let big = [Some(i128::from(i64::MAX)), Some(i128::MAX), Some(3)];
        lanes.update(&mut st, &input(&kinds, &big), false);
        assert_eq!((st[1], st[4]), (SEEN, SEEN));
        let one = [Some(1), Some(1), Some(4)];
        lanes.update(&mut st, &input(&kinds, &one), false);
        assert_eq!((st[1], st[4]), (SEEN | OVERFLOW, SEEN | OVERFLOW));
        assert_eq!(st[5] as i64, 3);
        let mut clean = [0u64; 7];
        lanes.update(&mut clean, &input(&kinds, &one), true);
        lanes.merge(&mut clean, &st);
        assert_eq!((clean[1] & OVERFLOW, clean[4] & OVERFLOW), (OVERFLOW, OVERFLOW));
        // An input carrying an overflow flag passes it on.
        let mut refed = [0u64; 7];
        lanes.update(&mut refed, &input(&kinds, &one), true);
        lanes.update(&mut refed, &as_input(&kinds, &st), false);
        assert_eq!((refed[1] & OVERFLOW, refed[4] & OVERFLOW), (OVERFLOW, OVERFLOW));
        let mut low = [0u64; 7];
        lanes.update(&mut low, &input(&kinds, &[Some(i128::from(i64::MIN)), None, None]), true);
        lanes.update(&mut low, &input(&kinds, &[Some(-1), None, None]), false);
        assert_eq!(low[1] & OVERFLOW, OVERFLOW, "underflow is an overflow too");
        assert_eq!(low[4], 0, "a lane of nulls only stays unseen");
    }
}
