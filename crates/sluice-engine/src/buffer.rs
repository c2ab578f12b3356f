//! The map-side buffer pool: bounded in bytes, reused, with back-pressure.
//!
//! A map task acquires a [`MapBuffer`] of a size it names, writes records
//! into it, and produces it: ownership of the very bytes passes to the
//! engine (no copy), the traffic scheduler cuts them into segments, the
//! offload workers read the segments in place, and when the last segment
//! is done the bytes go back to the pool for the next `buf_acquire`.
//!
//! The pool charges each buffer's requested size against its capacity
//! from acquire until the last reader is done, so its occupancy (bytes
//! charged) is what map tasks hold plus what waits in or is being worked
//! on by the engine: the liquid offload controller's signal. When a
//! request does not fit, `buf_acquire` waits for returns or answers
//! `WouldBlock`, by [`Backpressure`](crate::Backpressure). A request larger
//! than the whole pool (a single huge record) is granted alone, once
//! nothing else is charged, and its bytes are not kept for reuse.
//!
//! Requests that wait are served in arrival order: a request that arrives
//! while others wait queues behind them even if it would fit, so a huge
//! record waiting for the pool to empty is not starved by a stream of small
//! buffers taking each byte returned. A wait is taken in slices and ends
//! early when the host stops the task, or fails after its bound
//! ([`crate::waits`]); either way the request leaves the queue.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sluice_core::format::{BatchView, CheckedPayload, Layout, RecordBatch, Span};

use crate::error::{EngineError, ShuffleId};
use crate::waits::{self, HOST_WAIT_MAX, WAIT_SLICE};
use crate::Backpressure;

/// Free buffers the pool keeps for reuse at most.
pub const POOL_FREE_BUFFERS_MAX: usize = 64;

#[derive(Debug, Default)]
struct PoolState {
    used: usize,
    peak: usize,
    free: Vec<Vec<u8>>,
    /// Tickets of the requests waiting, in arrival order.
    waiting: VecDeque<u64>,
    next_ticket: u64,
}

impl PoolState {
    /// Takes `ticket` out of the queue (its request was served or gave up).
    fn leave(&mut self, ticket: u64) {
        self.waiting.retain(|&t| t != ticket);
    }
}

#[derive(Debug)]
pub(crate) struct PoolInner {
    capacity: usize,
    /// Longest a request waits in all.
    wait_max: Duration,
    state: Mutex<PoolState>,
    returned: Condvar,
    next_id: AtomicU64,
    /// Bytes ever produced (for the controller's rates).
    pub(crate) produced_bytes: AtomicU64,
}

impl PoolInner {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Returns `charge` bytes of capacity and, for reuse, the buffer.
    pub(crate) fn give_back(&self, charge: usize, buffer: Vec<u8>) {
        let mut st = self.lock();
        st.used -= charge;
        // A buffer larger than the pool (taken alone) is not kept.
        let keep = buffer.capacity() > 0 && buffer.capacity() <= self.capacity;
        if st.free.len() < POOL_FREE_BUFFERS_MAX && keep {
            st.free.push(buffer);
        }
        drop(st);
        self.returned.notify_all();
    }
}

/// Bytes of map buffers, shared by every shuffle of an engine.
#[derive(Debug, Clone)]
pub struct BufferPool {
    inner: Arc<PoolInner>,
}

impl BufferPool {
    /// A pool that hands out at most `capacity` bytes at once.
    pub fn new(capacity: usize) -> Self {
        Self::with_wait_max(capacity, HOST_WAIT_MAX)
    }

    /// A pool whose requests wait at most `wait_max` in all.
    pub fn with_wait_max(capacity: usize, wait_max: Duration) -> Self {
        BufferPool {
            inner: Arc::new(PoolInner {
                capacity,
                wait_max,
                state: Mutex::new(PoolState::default()),
                returned: Condvar::new(),
                next_id: AtomicU64::new(1),
                produced_bytes: AtomicU64::new(0),
            }),
        }
    }

    /// The capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.inner.capacity
    }

    /// Bytes charged now (the occupancy).
    pub fn used(&self) -> usize {
        self.inner.lock().used
    }

    /// Most bytes ever charged at once.
    pub fn peak(&self) -> usize {
        self.inner.lock().peak
    }

    pub(crate) fn inner(&self) -> &Arc<PoolInner> {
        &self.inner
    }

    /// Charges `size` bytes and returns a buffer with room for them.
    pub(crate) fn acquire(
        &self,
        size: usize,
        mode: Backpressure,
        owner: BufferOwner,
    ) -> Result<MapBuffer, EngineError> {
        let inner = &self.inner;
        let mut st = inner.lock();
        // A buffer larger than the whole pool (one record of hundreds of
        // MiB) is charged alone: it fits once nothing else is charged.
        let fits = |st: &PoolState| st.used == 0 || st.used + size <= inner.capacity;
        if !st.waiting.is_empty() || !fits(&st) {
            if mode == Backpressure::WouldBlock {
                return Err(EngineError::WouldBlock { used: st.used, capacity: inner.capacity });
            }
            let ticket = st.next_ticket;
            st.next_ticket += 1;
            st.waiting.push_back(ticket);
            let start = Instant::now();
            while st.waiting.front() != Some(&ticket) || !fits(&st) {
                st = inner
                    .returned
                    .wait_timeout(st, WAIT_SLICE)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                let waited = start.elapsed();
                let give_up = if waited > inner.wait_max {
                    Some(EngineError::WaitTimedOut {
                        what: self.wait_what(size, &st),
                        waited,
                        bound: inner.wait_max,
                    })
                } else {
                    // Asked without the lock: the host's check may call into it.
                    drop(st);
                    let stop = waits::stop_requested();
                    st = inner.lock();
                    stop.then(|| EngineError::Interrupted { what: self.wait_what(size, &st) })
                };
                if let Some(e) = give_up {
                    st.leave(ticket);
                    drop(st);
                    // The request behind may now be first.
                    inner.returned.notify_all();
                    return Err(e);
                }
            }
            st.leave(ticket);
        }
        st.used += size;
        st.peak = st.peak.max(st.used);
        // Reuse the smallest free buffer that holds `size` bytes.
        let pick = (0..st.free.len())
            .filter(|&i| st.free[i].capacity() >= size)
            .min_by_key(|&i| st.free[i].capacity());
        let mut bytes = match pick {
            Some(i) => st.free.swap_remove(i),
            None => Vec::new(),
        };
        let others_wait = !st.waiting.is_empty();
        drop(st);
        if others_wait {
            // The next in line may fit too.
            inner.returned.notify_all();
        }
        bytes.reserve_exact(size);
        Ok(MapBuffer {
            id: inner.next_id.fetch_add(1, Ordering::Relaxed),
            owner,
            capacity: size,
            batch: Some(RecordBatch::from_buffer(owner.layout, bytes)),
            spans: Some(Vec::new()),
            pool: inner.clone(),
        })
    }
}

impl BufferPool {
    fn wait_what(&self, size: usize, st: &PoolState) -> String {
        format!(
            "{size} bytes of the map buffer pool ({} of {} bytes in use, {} requests waiting)",
            st.used,
            self.inner.capacity,
            st.waiting.len()
        )
    }
}

/// Whose buffer it is: the map attempt that acquired it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BufferOwner {
    pub(crate) shuffle: ShuffleId,
    pub(crate) map: u32,
    pub(crate) attempt: u32,
    pub(crate) layout: Layout,
}

/// A buffer a map task fills with records and then produces.
#[derive(Debug)]
pub struct MapBuffer {
    id: u64,
    owner: BufferOwner,
    capacity: usize,
    /// Always `Some` until produced or dropped.
    batch: Option<RecordBatch>,
    /// The batch's spans while every append came with them
    /// ([`MapBuffer::extend_checked`]); `None` once a record came without,
    /// and the engine then cuts the batch itself.
    spans: Option<Vec<Span>>,
    pool: Arc<PoolInner>,
}

impl MapBuffer {
    /// The buffer's id (unique within its engine).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Bytes the buffer holds at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.batch.as_ref().map_or(0, RecordBatch::payload_len)
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records written so far.
    pub fn records(&self) -> usize {
        self.batch.as_ref().map_or(0, RecordBatch::len)
    }

    /// Bytes still free.
    pub fn room(&self) -> usize {
        self.capacity - self.len()
    }

    /// Appends one record; a record that does not fit the room left is a
    /// typed error and leaves the buffer as it was.
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> Result<(), EngineError> {
        let b = self.batch_with_room(self.owner.layout.record_bytes(key.len(), value.len()))?;
        b.push(key, value)?;
        self.spans = None;
        Ok(())
    }

    /// Appends every record of a validated view (one copy of its payload,
    /// for callers that filled their own memory, such as a JVM's direct
    /// buffer); a view larger than the room left is a typed error and
    /// leaves the buffer as it was.
    pub fn extend(&mut self, view: &BatchView<'_>) -> Result<(), EngineError> {
        self.batch_with_room(view.payload().len())?.extend_view(view)?;
        self.spans = None;
        Ok(())
    }

    /// As [`MapBuffer::extend`], for a payload checked in one pass with its
    /// spans cut at the engine's segment size
    /// ([`check_variable`](sluice_core::format::check_variable) with
    /// [`EngineConfig::segment_bytes`](crate::EngineConfig::segment_bytes)):
    /// the spans become the buffer's segments, so the engine neither cuts
    /// nor validates the records again.
    pub fn extend_checked(&mut self, p: &CheckedPayload<'_>) -> Result<(), EngineError> {
        let spans = self.batch_with_room(p.view().payload().len())?.extend_checked(p)?;
        if let Some(known) = self.spans.as_mut() {
            known.extend(spans);
        }
        Ok(())
    }

    /// The batch, if `need` more bytes fit the room left; else a typed
    /// error (the buffer unchanged).
    fn batch_with_room(&mut self, need: usize) -> Result<&mut RecordBatch, EngineError> {
        if need > self.room() {
            return Err(EngineError::RecordTooLarge {
                record: need,
                room: self.room(),
                capacity: self.capacity,
            });
        }
        self.batch.as_mut().ok_or(EngineError::UnknownBuffer { buffer: self.id })
    }

    pub(crate) fn owner(&self) -> BufferOwner {
        self.owner
    }

    pub(crate) fn is_from(&self, pool: &BufferPool) -> bool {
        Arc::ptr_eq(&self.pool, &pool.inner)
    }

    /// Hands the filled bytes over, charge and all.
    pub(crate) fn into_produced(mut self) -> ProducedBuffer {
        let batch = self.batch.take().unwrap_or_else(|| RecordBatch::new(self.owner.layout));
        self.pool.produced_bytes.fetch_add(batch.payload_len() as u64, Ordering::Relaxed);
        ProducedBuffer {
            batch: Some(batch),
            spans: self.spans.take(),
            charge: self.capacity,
            pool: self.pool.clone(),
        }
    }
}

impl Drop for MapBuffer {
    fn drop(&mut self) {
        // Dropped without being produced: the map task gave up on it.
        if let Some(b) = self.batch.take() {
            self.pool.give_back(self.capacity, b.into_buffer());
        }
    }
}

/// A produced buffer, read in place by the segments cut from it; its bytes
/// return to the pool when the last segment is done.
#[derive(Debug)]
pub(crate) struct ProducedBuffer {
    batch: Option<RecordBatch>,
    /// The batch's spans if they came with its records.
    spans: Option<Vec<Span>>,
    charge: usize,
    pool: Arc<PoolInner>,
}

impl ProducedBuffer {
    pub(crate) fn batch(&self) -> Option<&RecordBatch> {
        self.batch.as_ref()
    }

    /// The batch's spans, from the records' checks or cut now at about
    /// `target` bytes.
    pub(crate) fn segments(&self, target: usize) -> Vec<Span> {
        match (&self.spans, &self.batch) {
            (Some(spans), _) => spans.clone(),
            (None, Some(b)) => b.spans(target),
            (None, None) => Vec::new(),
        }
    }
}

impl Drop for ProducedBuffer {
    fn drop(&mut self) {
        let bytes = self.batch.take().map(RecordBatch::into_buffer).unwrap_or_default();
        self.pool.give_back(self.charge, bytes);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc;
    use std::thread;

    use super::*;

    fn owner() -> BufferOwner {
        BufferOwner { shuffle: 1, map: 0, attempt: 0, layout: Layout::Variable }
    }

    /// Spawns a request for `size` bytes that reports on `done` once served
    /// (holding the buffer until `release` says so) or failed.
    fn request(
        pool: &BufferPool,
        size: usize,
        name: &'static str,
        stop: Arc<AtomicBool>,
        done: mpsc::Sender<(&'static str, Result<(), String>)>,
    ) -> (thread::JoinHandle<()>, mpsc::Sender<()>) {
        let pool = pool.clone();
        let (release, hold) = mpsc::channel::<()>();
        let h = thread::spawn(move || {
            waits::testing::stop_with(stop);
            match pool.acquire(size, Backpressure::Wait, owner()) {
                Ok(buf) => {
                    done.send((name, Ok(()))).expect("test alive");
                    let _ = hold.recv();
                    drop(buf);
                }
                Err(e) => done.send((name, Err(e.to_string()))).expect("test alive"),
            }
        });
        (h, release)
    }

    fn waiting(pool: &BufferPool, n: usize) {
        let start = Instant::now();
        while pool.inner.lock().waiting.len() != n {
            assert!(start.elapsed() < Duration::from_secs(10), "{n} requests never queued");
            thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_huge_request_is_served_before_small_ones_that_came_after_it() {
        let pool = BufferPool::new(100);
        let held = pool.acquire(60, Backpressure::Wait, owner()).expect("fits");
        let (tx, rx) = mpsc::channel();
        let no = Arc::new(AtomicBool::new(false));
        // 200 bytes: more than the pool, served once nothing else is held.
        let (huge, release_huge) = request(&pool, 200, "huge", no.clone(), tx.clone());
        waiting(&pool, 1);
        // 10 bytes would fit beside the 60 held, but the huge one came first.
        let (small, release_small) = request(&pool, 10, "small", no, tx);
        waiting(&pool, 2);
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err(), "served out of turn");
        drop(held);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).expect("served"), ("huge", Ok(())));
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err(), "small beside the huge one");
        release_huge.send(()).expect("alive");
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).expect("served"), ("small", Ok(())));
        release_small.send(()).expect("alive");
        huge.join().expect("no panic");
        small.join().expect("no panic");
        assert_eq!(pool.used(), 0);
    }

    #[test]
    fn a_stopped_waiter_leaves_the_queue_with_a_typed_error() {
        let pool = BufferPool::new(100);
        let held = pool.acquire(100, Backpressure::Wait, owner()).expect("fits");
        let (tx, rx) = mpsc::channel();
        let stopped = waits::stopped_waits();
        let stop = Arc::new(AtomicBool::new(false));
        let (first, _r1) = request(&pool, 500, "killed", stop.clone(), tx.clone());
        waiting(&pool, 1);
        let (second, release) = request(&pool, 50, "next", Arc::new(AtomicBool::new(false)), tx);
        waiting(&pool, 2);
        // The host kills the first waiter's task: its wait ends within a slice.
        stop.store(true, Ordering::SeqCst);
        let (name, got) = rx.recv_timeout(Duration::from_secs(10)).expect("ended");
        assert_eq!(name, "killed");
        let msg = got.expect_err("interrupted");
        assert!(msg.contains("interrupted while waiting for 500 bytes"), "{msg}");
        assert!(waits::stopped_waits() > stopped, "the ended wait was not counted");
        waiting(&pool, 1);
        drop(held);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).expect("served"), ("next", Ok(())));
        release.send(()).expect("alive");
        first.join().expect("no panic");
        second.join().expect("no panic");
        assert_eq!(pool.used(), 0);
    }

    #[test]
    fn a_wait_past_its_bound_fails_naming_it() {
        let pool = BufferPool::with_wait_max(100, Duration::from_millis(300));
        let held = pool.acquire(80, Backpressure::Wait, owner()).expect("fits");
        let start = Instant::now();
        let e = pool.acquire(50, Backpressure::Wait, owner()).expect_err("bounded");
        assert!(start.elapsed() >= Duration::from_millis(300));
        assert!(matches!(e, EngineError::WaitTimedOut { .. }), "{e}");
        assert!(e.to_string().contains("50 bytes of the map buffer pool (80 of 100"), "{e}");
        assert!(pool.inner.lock().waiting.is_empty());
        drop(held);
        assert_eq!(pool.used(), 0);
    }
}
