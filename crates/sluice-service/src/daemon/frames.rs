//! Memory for frames in flight: the bytes a daemon holds beside its store
//! while it reads a request's frame and serves it, and while it sends a
//! block read back from a spill file. The store's budget (`--memory`)
//! counts data once it is staged; before that a push's frame (its payload,
//! then the sections decoded out of it, up to twice
//! `MAX_FRAME_PAYLOAD_BYTES`) and a block read back for a stream are held
//! by the connection serving them. Without a bound, every connection could
//! hold that at once: 4,096 connections pushing 1 MiB chunks are 8 GiB
//! beside a budget of any size (Celeborn's workers met this as direct
//! memory exhausted by Netty's buffers, and pause reading channels above a
//! threshold for it).
//!
//! A daemon takes every such buffer from one pool of `--frame-memory`
//! bytes ([`DEFAULT_FRAME_MEMORY_BYTES`]), before the buffer is allocated:
//! - a push whose frame (twice its payload: payload and sections) does not
//!   fit is read through a small scratch buffer, its CRC checked, nothing
//!   kept, and answered [`Message::SlowDown`]: the client sends the chunk
//!   again after the wait, as when the store is full;
//! - any other request waits for its share, at most the daemon's frame
//!   wait ([`FRAME_WAIT_TIMEOUT`]; then it is read through the same way and
//!   answered [`ErrorCode::Busy`], its connection kept), and gives it back
//!   once decoded (requests other than pushes are small; a decoded read's
//!   winners, at most `MAX_WINNERS_PER_READ` of 12 bytes, go once its
//!   blocks are planned, under the store's lock, before anything waits);
//! - a stream waits for a spilled block's bytes before reading it back, at
//!   most the stream's stall limit, and gives them back once the block is
//!   sent; a reduced read likewise, until the block is fed to its operator
//!   (past the limit it is refused `Busy`), and for each batch of its
//!   results with the blocks encoded from it, until they are sent (taken
//!   before the batch is made; a batch larger than that share gives it
//!   back and takes its own size, at most the whole pool).
//!
//! No holder waits for more while it holds some (a push is staged without
//! waiting on the pool, a read gave its request's share back before it
//! waits for its blocks'), so the waits cannot close a cycle.
//!
//! [`Message::SlowDown`]: crate::protocol::Message::SlowDown
//! [`FRAME_WAIT_TIMEOUT`]: super::FRAME_WAIT_TIMEOUT
//! [`ErrorCode::Busy`]: crate::protocol::ErrorCode::Busy

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::protocol::limits::MAX_FRAME_PAYLOAD_BYTES;
use crate::protocol::ProtocolError;

/// Bytes of frames in flight a daemon holds at most, by default.
pub const DEFAULT_FRAME_MEMORY_BYTES: u64 = 256 << 20;

/// The smallest `--frame-memory`: one push of the largest frame, its
/// payload and its sections.
pub const MIN_FRAME_MEMORY_BYTES: u64 = 2 * MAX_FRAME_PAYLOAD_BYTES as u64;

/// The largest `--frame-memory` (the pool counts bytes as permits).
pub const MAX_FRAME_MEMORY_BYTES: u64 = 1 << 40;

/// What reading and serving a request frame of `payload` bytes holds: the
/// payload, and the sections or fields decoded out of it.
pub(crate) fn request_bytes(payload: u32) -> u32 {
    payload.saturating_mul(2)
}

/// The pool, its peak and the pushes it slowed down.
#[derive(Debug)]
pub(crate) struct FramePool {
    permits: Arc<Semaphore>,
    bytes: u64,
    peak: AtomicU64,
    slowed: AtomicU64,
}

/// Bytes taken from the pool, given back when dropped.
#[derive(Debug)]
pub(crate) struct FrameBytes {
    _permit: Option<OwnedSemaphorePermit>,
}

impl FramePool {
    /// A pool of `bytes` (checked by the daemon's start against
    /// [`MIN_FRAME_MEMORY_BYTES`] and [`MAX_FRAME_MEMORY_BYTES`]).
    pub(crate) fn new(bytes: u64) -> FramePool {
        FramePool {
            permits: Arc::new(Semaphore::new(bytes as usize)),
            bytes,
            peak: AtomicU64::new(0),
            slowed: AtomicU64::new(0),
        }
    }

    fn note(&self, permit: OwnedSemaphorePermit) -> FrameBytes {
        let used = self.bytes - self.permits.available_permits() as u64;
        self.peak.fetch_max(used, Ordering::Relaxed);
        FrameBytes { _permit: Some(permit) }
    }

    /// `bytes` for a push's frame now, or `None` (counted as a slow-down:
    /// the push is answered `SlowDown`).
    pub(crate) fn try_take(&self, bytes: u32) -> Option<FrameBytes> {
        if bytes == 0 {
            return Some(FrameBytes { _permit: None });
        }
        match self.permits.clone().try_acquire_many_owned(bytes) {
            Ok(p) => Some(self.note(p)),
            Err(_) => {
                self.slowed.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// `bytes`, waiting at most `limit` for others to give theirs back.
    pub(crate) async fn take(
        &self,
        bytes: u32,
        limit: Duration,
        what: &'static str,
    ) -> Result<FrameBytes, ProtocolError> {
        if bytes == 0 {
            return Ok(FrameBytes { _permit: None });
        }
        let timeout = || ProtocolError::Timeout { what, after_ms: limit.as_millis() as u64 };
        match tokio::time::timeout(limit, self.permits.clone().acquire_many_owned(bytes)).await {
            Ok(Ok(p)) => Ok(self.note(p)),
            // The pool is never closed; a closed one would be a timeout too.
            Ok(Err(_)) | Err(_) => Err(timeout()),
        }
    }

    /// `bytes` as one holder may take them: at most the whole pool, so
    /// that a holder larger than the pool (a reduced read's batch of one
    /// large record) waits until it holds the pool alone instead of for
    /// ever.
    pub(crate) fn capped(&self, bytes: u64) -> u32 {
        bytes.min(self.bytes).min(u64::from(u32::MAX)) as u32
    }

    /// The most bytes held at once, and the pushes slowed down for want of
    /// room.
    pub(crate) fn stats(&self) -> (u64, u64) {
        (self.peak.load(Ordering::Relaxed), self.slowed.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bytes_taken_are_given_back_and_the_peak_is_kept() {
        let pool = FramePool::new(100);
        let a = pool.try_take(60).expect("60 of 100");
        assert!(pool.try_take(50).is_none(), "50 more do not fit");
        let b = pool.take(40, Duration::from_millis(10), "a test").await.expect("40 fit");
        let err = pool.take(1, Duration::from_millis(10), "a test").await.expect_err("full");
        assert!(err.to_string().contains("a test"), "{err}");
        drop(a);
        drop(b);
        assert!(pool.try_take(100).is_some(), "all given back");
        assert_eq!(pool.stats(), (100, 1));
        assert_eq!((pool.capped(40), pool.capped(1 << 40)), (40, 100));
    }

    #[test]
    fn a_request_holds_its_payload_twice() {
        assert_eq!(request_bytes(MAX_FRAME_PAYLOAD_BYTES) as u64, MIN_FRAME_MEMORY_BYTES);
        assert_eq!(request_bytes(0), 0);
    }
}
