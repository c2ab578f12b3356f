//! The budgeted pool and its reservations.
//!
//! The pool is a pair of atomics (used, peak) under a budget; reserving
//! is a compare-and-swap loop, so operators on different threads
//! share one pool without a lock. A reservation remembers its bytes and
//! returns them when dropped, so an operator that fails halfway (an I/O
//! error during a spill, a panic) cannot leak budget. The budget is fixed
//! for an engine's pools; a pool whose memory a host grants piece by piece
//! (a Spark reduce task's sort, from Spark's memory manager) starts small
//! and is raised with [`MemoryPool::grant`].

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// A refused reservation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("memory budget exhausted: asked for {requested} bytes with {used} of {budget} in use")]
pub struct MemoryError {
    /// Bytes asked for.
    pub requested: usize,
    /// Bytes in use when it was refused.
    pub used: usize,
    /// The pool's budget.
    pub budget: usize,
}

#[derive(Debug)]
struct Inner {
    budget: AtomicUsize,
    used: AtomicUsize,
    peak: AtomicUsize,
    refusals: AtomicU64,
}

/// A byte budget shared by every operator of an engine (cheap to clone).
#[derive(Debug, Clone)]
pub struct MemoryPool {
    inner: Arc<Inner>,
}

impl MemoryPool {
    /// A pool with `budget` bytes.
    pub fn new(budget: usize) -> Self {
        MemoryPool {
            inner: Arc::new(Inner {
                budget: AtomicUsize::new(budget),
                used: AtomicUsize::new(0),
                peak: AtomicUsize::new(0),
                refusals: AtomicU64::new(0),
            }),
        }
    }

    /// A pool that never refuses (for tests and tools without a budget).
    pub fn unbounded() -> Self {
        Self::new(usize::MAX)
    }

    /// The budget in bytes.
    pub fn budget(&self) -> usize {
        self.inner.budget.load(Ordering::Relaxed)
    }

    /// Raises the budget by `bytes` (saturating): memory the host granted.
    pub fn grant(&self, bytes: usize) {
        let _ = self
            .inner
            .budget
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |b| Some(b.saturating_add(bytes)));
    }

    /// Bytes reserved now.
    pub fn used(&self) -> usize {
        self.inner.used.load(Ordering::Relaxed)
    }

    /// Most bytes ever reserved at once.
    pub fn peak(&self) -> usize {
        self.inner.peak.load(Ordering::Relaxed)
    }

    /// Reservations refused so far.
    pub fn refusals(&self) -> u64 {
        self.inner.refusals.load(Ordering::Relaxed)
    }

    /// An empty reservation to grow later.
    pub fn reservation(&self) -> Reservation {
        Reservation { pool: self.clone(), bytes: 0 }
    }

    /// Reserves `bytes`, or refuses without reserving anything.
    pub fn try_reserve(&self, bytes: usize) -> Result<Reservation, MemoryError> {
        self.acquire(bytes)?;
        Ok(Reservation { pool: self.clone(), bytes })
    }

    fn acquire(&self, bytes: usize) -> Result<(), MemoryError> {
        let inner = &self.inner;
        let mut used = inner.used.load(Ordering::Relaxed);
        loop {
            let budget = inner.budget.load(Ordering::Acquire);
            let next = match used.checked_add(bytes) {
                Some(n) if n <= budget => n,
                _ => {
                    inner.refusals.fetch_add(1, Ordering::Relaxed);
                    return Err(MemoryError { requested: bytes, used, budget });
                }
            };
            match inner.used.compare_exchange_weak(used, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    inner.peak.fetch_max(next, Ordering::Relaxed);
                    return Ok(());
                }
                Err(now) => used = now,
            }
        }
    }

    fn release(&self, bytes: usize) {
        self.inner.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// Bytes held from a [`MemoryPool`]; returned when dropped.
#[derive(Debug)]
pub struct Reservation {
    pool: MemoryPool,
    bytes: usize,
}

impl Reservation {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Reserves `more` bytes in addition, or refuses and holds what it held.
    pub fn try_grow(&mut self, more: usize) -> Result<(), MemoryError> {
        self.pool.acquire(more)?;
        self.bytes += more;
        Ok(())
    }

    /// Grows or shrinks to exactly `bytes`; growth may be refused.
    pub fn try_resize(&mut self, bytes: usize) -> Result<(), MemoryError> {
        if bytes > self.bytes {
            self.try_grow(bytes - self.bytes)
        } else {
            self.shrink(self.bytes - bytes);
            Ok(())
        }
    }

    /// Holds at least `bytes` (growing if needed, never shrinking) provided
    /// that is within `limit` (an operator's threshold): `Ok(false)` when
    /// over the limit, an error when the pool refuses.
    pub fn try_hold(&mut self, bytes: usize, limit: usize) -> Result<bool, MemoryError> {
        if bytes > limit {
            return Ok(false);
        }
        if bytes > self.bytes {
            self.try_grow(bytes - self.bytes)?;
        }
        Ok(true)
    }

    /// Returns `less` bytes (at most what is held) to the pool.
    pub fn shrink(&mut self, less: usize) {
        let less = less.min(self.bytes);
        self.pool.release(less);
        self.bytes -= less;
    }

    /// Returns everything held.
    pub fn free(&mut self) {
        self.shrink(self.bytes);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.free();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_are_bounded_and_returned() {
        let pool = MemoryPool::new(1000);
        let a = pool.try_reserve(600).expect("fits");
        let err = pool.try_reserve(500).expect_err("over budget");
        assert_eq!(err, MemoryError { requested: 500, used: 600, budget: 1000 });
        let mut b = pool.try_reserve(400).expect("fits exactly");
        assert_eq!(pool.used(), 1000);
        assert!(b.try_grow(1).is_err());
        assert_eq!(b.bytes(), 400, "a refused growth keeps what was held");
        drop(a);
        b.try_grow(100).expect("room again");
        b.try_resize(50).expect("shrink");
        assert_eq!(pool.used(), 50);
        drop(b);
        assert_eq!(pool.used(), 0);
        assert_eq!(pool.peak(), 1000);
        assert_eq!(pool.refusals(), 2);
    }

    #[test]
    fn a_granted_pool_admits_what_was_granted() {
        let pool = MemoryPool::new(0);
        assert!(pool.try_reserve(1).is_err(), "nothing granted yet");
        pool.grant(300);
        let mut r = pool.try_reserve(200).expect("granted");
        assert!(r.try_grow(101).is_err(), "beyond the grant");
        pool.grant(100);
        r.try_grow(101).expect("granted more");
        assert_eq!((pool.used(), pool.budget()), (301, 400));
        pool.grant(usize::MAX);
        assert_eq!(pool.budget(), usize::MAX, "saturates");
    }

    #[test]
    fn holding_respects_the_limit_and_the_budget() {
        let pool = MemoryPool::new(100);
        let mut r = pool.reservation();
        assert_eq!(r.try_hold(60, 50), Ok(false), "over the operator's limit");
        assert_eq!(r.bytes(), 0);
        assert_eq!(r.try_hold(40, 50), Ok(true));
        assert_eq!(r.try_hold(20, 50), Ok(true), "never shrinks");
        assert_eq!(r.bytes(), 40);
        let _other = pool.try_reserve(50).expect("fits");
        assert!(r.try_hold(70, 1000).is_err(), "the pool refuses");
        assert_eq!(r.bytes(), 40);
    }

    #[test]
    fn overflowing_requests_are_refused() {
        let pool = MemoryPool::unbounded();
        let _a = pool.try_reserve(usize::MAX - 1).expect("fits");
        assert!(pool.try_reserve(2).is_err());
    }

    #[test]
    fn concurrent_reservations_never_exceed_the_budget() {
        let pool = MemoryPool::new(10_000);
        std::thread::scope(|s| {
            for _ in 0..4 {
                let pool = pool.clone();
                s.spawn(move || {
                    for i in 0..10_000usize {
                        if let Ok(r) = pool.try_reserve(1 + i % 3000) {
                            assert!(pool.used() <= pool.budget());
                            drop(r);
                        }
                    }
                });
            }
        });
        assert_eq!(pool.used(), 0);
        assert!(pool.peak() <= 10_000);
    }
}
