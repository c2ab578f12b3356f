//! Checked handles: what the Java side holds for a native map attempt or
//! reduce operator is a number looked up in a registry, never a pointer.
//!
//! A raw pointer handed to Java is freed by whichever thread closes it, and
//! a consumer on another thread (Spark's `PipedRDD` feeds a reduce task's
//! iterator to a child process from a writer thread of its own, which can
//! still be reading when the task's completion listener closes the reader)
//! would then read freed memory: a JVM crash or wrong bytes. Here each open
//! object gets a fresh id (never reused within the process) and sits in a
//! registry behind its own mutex:
//!
//! - a call looks the id up, clones the entry out of the registry's lock and
//!   holds the entry's mutex for the call;
//! - closing removes the id, then takes the entry's mutex, so it waits for a
//!   call in flight to end, and leaves the entry empty;
//! - a call with an id that was closed, never opened or is 0 gets
//!   [`BridgeError::StaleHandle`] (a `SluiceException` in Java), never a
//!   dangling pointer; a call that found the entry before the close and
//!   takes its mutex after finds it empty and gets the same error;
//! - each registry's ids carry its own tag above their count
//!   ([`Registry::new`]), so a live handle of one kind passed where another
//!   is expected (a map attempt's to a reduce operator's call) is stale
//!   there, not whatever object of the other kind has the same count.
//!
//! The cost is one short registry lock and one uncontended entry lock per
//! call, and calls cross once per buffer or block, never per record.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::error::{BridgeError, BridgeResult};

type Entry<T> = Arc<Mutex<Option<T>>>;

/// The tags of the process's registries, one each.
pub mod tag {
    pub const MAP_ATTEMPT: i64 = 1;
    pub const REDUCE_OPERATOR: i64 = 2;
    pub const SERVICE_CONNECTION: i64 = 3;
    pub const SERVICE_PUSH: i64 = 4;
}

/// Bit at which a registry's tag sits in its ids: below it, 2^40 ids per
/// process; above it, up to 2^22 registries, all ids positive.
const TAG_SHIFT: u32 = 40;

/// The live objects of one kind, by id.
pub struct Registry<T> {
    /// What the objects are, for errors ("map attempt", "reduce operator").
    kind: &'static str,
    /// The registry's tag, shifted into place: every id it hands out is
    /// this plus its count.
    tag: i64,
    /// The last count handed out (counts start at 1; 0 is never an id).
    last: AtomicI64,
    live: Mutex<BTreeMap<i64, Entry<T>>>,
}

impl<T> std::fmt::Debug for Registry<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").field("kind", &self.kind).field("live", &self.len()).finish()
    }
}

fn unpoison<G>(r: Result<G, PoisonError<G>>) -> G {
    // A panic inside a call is caught and reported by the entry point; the
    // object it left behind is still the one to close or report on.
    r.unwrap_or_else(PoisonError::into_inner)
}

impl<T> Registry<T> {
    /// An empty registry of objects called `kind`, its ids tagged `tag`
    /// (1 or more, one per registry of the process).
    pub const fn new(kind: &'static str, tag: i64) -> Self {
        Registry {
            kind,
            tag: tag << TAG_SHIFT,
            last: AtomicI64::new(0),
            live: Mutex::new(BTreeMap::new()),
        }
    }

    /// Registers `value`; returns its id (positive, tagged, never reused).
    pub fn insert(&self, value: T) -> i64 {
        let id = self.tag + self.last.fetch_add(1, Ordering::Relaxed) + 1;
        unpoison(self.live.lock()).insert(id, Arc::new(Mutex::new(Some(value))));
        id
    }

    fn stale(&self, id: i64) -> BridgeError {
        BridgeError::StaleHandle { kind: self.kind, handle: id }
    }

    fn entry(&self, id: i64) -> BridgeResult<Entry<T>> {
        unpoison(self.live.lock()).get(&id).cloned().ok_or_else(|| self.stale(id))
    }

    /// Runs `f` on the object behind `id`, holding it for the call.
    pub fn with<R>(&self, id: i64, f: impl FnOnce(&mut T) -> BridgeResult<R>) -> BridgeResult<R> {
        let entry = self.entry(id)?;
        let mut guard: MutexGuard<'_, Option<T>> = unpoison(entry.lock());
        match guard.as_mut() {
            Some(value) => f(value),
            None => Err(self.stale(id)),
        }
    }

    /// Takes the object behind `id` out of the registry, after any call in
    /// flight on it has ended; later calls with `id` get
    /// [`BridgeError::StaleHandle`].
    pub fn take(&self, id: i64) -> BridgeResult<T> {
        let entry = unpoison(self.live.lock()).remove(&id).ok_or_else(|| self.stale(id))?;
        let value = unpoison(entry.lock()).take();
        value.ok_or_else(|| self.stale(id))
    }

    /// How many objects are registered.
    pub fn len(&self) -> usize {
        unpoison(self.live.lock()).len()
    }

    /// Whether no object is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn a_live_handle_of_another_kind_is_stale() {
        // Two registries' first objects: the same count, different tags.
        let maps: Registry<u32> = Registry::new("map attempt", 1);
        let reduces: Registry<u32> = Registry::new("reduce operator", 2);
        let m = maps.insert(7);
        let r = reduces.insert(8);
        assert_ne!(m, r);
        let err = reduces.with(m, |v| Ok(*v)).expect_err("a map attempt's handle");
        assert!(matches!(err, BridgeError::StaleHandle { kind: "reduce operator", .. }));
        assert!(reduces.take(m).is_err() && maps.take(r).is_err());
        assert_eq!((maps.take(m).expect("map"), reduces.take(r).expect("reduce")), (7, 8));
    }

    #[test]
    fn ids_are_fresh_and_a_closed_id_is_stale() {
        let r: Registry<u32> = Registry::new("thing", 1);
        let a = r.insert(1);
        let b = r.insert(2);
        assert!(a > 0 && b > a);
        assert_eq!(r.with(a, |v| Ok(*v)).expect("test step"), 1);
        assert_eq!(r.take(a).expect("test step"), 1);
        let err = r.with(a, |v| Ok(*v)).expect_err("a closed handle");
        assert!(matches!(err, BridgeError::StaleHandle { kind: "thing", handle } if handle == a));
        assert!(matches!(r.take(a), Err(BridgeError::StaleHandle { .. })));
        for bad in [0, -1, b + 1, i64::MAX] {
            assert!(matches!(r.with(bad, |v| Ok(*v)), Err(BridgeError::StaleHandle { .. })));
        }
        let c = r.insert(3);
        assert!(c > b, "an id is never reused");
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn closing_waits_for_a_call_in_flight_and_later_calls_fail() {
        let r: Arc<Registry<Vec<u8>>> = Arc::new(Registry::new("reader", 1));
        let id = r.insert(vec![7; 1024]);
        let (entered, wait_entered) = mpsc::channel();
        let (release, wait_release) = mpsc::channel::<()>();
        let reader = {
            let r = Arc::clone(&r);
            std::thread::spawn(move || {
                r.with(id, |v| {
                    entered.send(()).expect("test step");
                    wait_release.recv().expect("test step");
                    // Still ours: the close has not freed it under us.
                    Ok(v.iter().map(|&b| b as u64).sum::<u64>())
                })
            })
        };
        wait_entered.recv().expect("test step");
        let (closed, wait_closed) = mpsc::channel();
        let closer = {
            let r = Arc::clone(&r);
            std::thread::spawn(move || {
                let v = r.take(id);
                closed.send(()).expect("test step");
                v
            })
        };
        // The close blocks while the call is in flight.
        assert!(wait_closed.recv_timeout(Duration::from_millis(200)).is_err());
        release.send(()).expect("test step");
        assert_eq!(reader.join().expect("test step").expect("test step"), 7 * 1024);
        wait_closed.recv().expect("test step");
        assert_eq!(closer.join().expect("test step").expect("test step").len(), 1024);
        assert!(matches!(r.with(id, |v| Ok(v.len())), Err(BridgeError::StaleHandle { .. })));
        assert!(r.is_empty());
    }
}
