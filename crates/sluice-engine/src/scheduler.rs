//! The traffic scheduler: one first-come-first-served queue per scheduling
//! group (one group per registered shuffle), served round-robin.
//!
//! A worker asking for work gets the head of the next non-empty queue
//! after the one it served last, so shuffles running at once share the
//! workers evenly whatever their queue lengths, and jobs of one shuffle run
//! in the order they arrived. Jobs never carry data of two shuffles, so
//! their data never mixes. Map buffers enter as segments of about
//! [`SEGMENT_BYTES_DEFAULT`](crate::SEGMENT_BYTES_DEFAULT) bytes (cut by
//! the engine); reduce-side work enters as one job per delivery or
//! partition to finish.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::ShuffleId;

/// Which side of the shuffle a job works for (for metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// A map segment: partition plus the map-side operator.
    Map,
    /// Reduce-side work: second-round operator, persisting.
    Reduce,
}

/// A unit of work for an offload worker.
pub(crate) struct Job {
    /// Input bytes the job reads.
    pub(crate) bytes: usize,
    pub(crate) side: Side,
    /// The work; false if there was none left to do (another thread did
    /// it first).
    pub(crate) run: Box<dyn FnOnce() -> bool + Send>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job").field("bytes", &self.bytes).field("side", &self.side).finish()
    }
}

#[derive(Debug, Default)]
struct Queues {
    groups: Vec<(ShuffleId, VecDeque<Job>)>,
    /// The group to look at first.
    next: usize,
    /// Bytes of map segments queued.
    queued_map_bytes: usize,
    closed: bool,
}

impl Queues {
    /// The head of the next non-empty group after the last one served
    /// (only a map segment at a head when `map_only`).
    fn take(&mut self, map_only: bool) -> Option<Job> {
        let n = self.groups.len();
        for k in 0..n {
            let i = (self.next + k) % n;
            let queue = &mut self.groups[i].1;
            if map_only && queue.front().is_none_or(|j| j.side != Side::Map) {
                continue;
            }
            if let Some(job) = queue.pop_front() {
                self.next = (i + 1) % n;
                if job.side == Side::Map {
                    self.queued_map_bytes -= job.bytes;
                }
                return Some(job);
            }
        }
        None
    }
}

/// What a bounded wait for a job found.
#[derive(Debug)]
pub(crate) enum Wait {
    /// A job.
    Job(Job),
    /// None within the time given.
    Idle,
    /// The scheduler closed.
    Closed,
}

/// FCFS queues per scheduling group.
#[derive(Debug, Default)]
pub(crate) struct Scheduler {
    queues: Mutex<Queues>,
    ready: Condvar,
    /// Signalled once, by `close`.
    closing: Condvar,
}

impl Scheduler {
    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens the scheduling group of `shuffle`.
    pub(crate) fn add_group(&self, shuffle: ShuffleId) {
        let mut q = self.lock();
        if !q.groups.iter().any(|(s, _)| *s == shuffle) {
            q.groups.push((shuffle, VecDeque::new()));
        }
    }

    /// Closes the group of `shuffle`; its queued jobs are dropped.
    pub(crate) fn remove_group(&self, shuffle: ShuffleId) {
        let mut q = self.lock();
        if let Some(i) = q.groups.iter().position(|(s, _)| *s == shuffle) {
            let (_, jobs) = q.groups.remove(i);
            let dropped: usize = jobs.iter().filter(|j| j.side == Side::Map).map(|j| j.bytes).sum();
            q.queued_map_bytes -= dropped;
            if q.next > i {
                q.next -= 1;
            }
            drop(q);
            drop(jobs);
        }
    }

    /// Appends jobs to the queue of `shuffle`, in order; false if the group
    /// is closed (the jobs are dropped).
    pub(crate) fn push(&self, shuffle: ShuffleId, jobs: Vec<Job>) -> bool {
        let mut q = self.lock();
        if q.closed {
            return false;
        }
        let added: usize = jobs.iter().filter(|j| j.side == Side::Map).map(|j| j.bytes).sum();
        let Some((_, queue)) = q.groups.iter_mut().find(|(s, _)| *s == shuffle) else {
            return false;
        };
        queue.extend(jobs);
        q.queued_map_bytes += added;
        drop(q);
        // Every waiter: a host thread waiting for map segments only must
        // not swallow the one wake-up a reduce-side job needs.
        self.ready.notify_all();
        true
    }

    /// The next job, round-robin across groups; waits for one, `None` once
    /// the scheduler is closed.
    pub(crate) fn pop(&self) -> Option<Job> {
        let mut q = self.lock();
        loop {
            if q.closed {
                return None;
            }
            if let Some(job) = q.take(false) {
                return Some(job);
            }
            q = self.ready.wait(q).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Like [`pop`](Self::pop), but waits at most `d`. With
    /// `map_backlog: Some(min)` it takes only a map segment at the head of
    /// a group (a group whose head is reduce-side work is passed over, so
    /// each group's jobs still start in arrival order), and only while at
    /// least `min` bytes of map segments are queued: what an idle host
    /// thread may take from the offload workers' queue.
    pub(crate) fn pop_within(&self, d: Duration, map_backlog: Option<usize>) -> Wait {
        let deadline = Instant::now() + d;
        let mut q = self.lock();
        loop {
            if q.closed {
                return Wait::Closed;
            }
            let allowed = map_backlog.is_none_or(|min| q.queued_map_bytes >= min.max(1));
            if let Some(job) = allowed.then(|| q.take(map_backlog.is_some())).flatten() {
                return Wait::Job(job);
            }
            let now = Instant::now();
            if now >= deadline {
                return Wait::Idle;
            }
            q = self.ready.wait_timeout(q, deadline - now).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// Bytes of map segments waiting for a worker.
    pub(crate) fn queued_map_bytes(&self) -> usize {
        self.lock().queued_map_bytes
    }

    /// Wakes every worker, makes `pop` return `None` and drops the jobs
    /// still queued (outside the lock: dropping one may run its clean-up).
    ///
    /// Dropping them matters: a job may hold the engine that owns this
    /// scheduler (a partition's finish job, which a reduce task can run
    /// itself before a worker does). Left queued, it would keep the engine
    /// alive after the engine is dropped, and its spill files on disk.
    pub(crate) fn close(&self) {
        let queued: Vec<Job> = {
            let mut q = self.lock();
            q.closed = true;
            q.queued_map_bytes = 0;
            q.groups.iter_mut().flat_map(|(_, jobs)| jobs.drain(..)).collect()
        };
        self.ready.notify_all();
        self.closing.notify_all();
        drop(queued);
    }

    /// Sleeps for `d`, or until the scheduler closes.
    pub(crate) fn pause(&self, d: Duration) {
        let deadline = Instant::now() + d;
        let mut q = self.lock();
        while !q.closed {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            q = self.closing.wait_timeout(q, deadline - now).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn job(log: &Arc<Mutex<Vec<(u32, u32)>>>, shuffle: u32, i: u32) -> Job {
        let log = log.clone();
        Job {
            bytes: 10,
            side: Side::Map,
            run: Box::new(move || {
                log.lock().expect("log").push((shuffle, i));
                true
            }),
        }
    }

    #[test]
    fn groups_are_served_in_turn_and_each_in_arrival_order() {
        let s = Scheduler::default();
        let log = Arc::new(Mutex::new(Vec::new()));
        s.add_group(1);
        s.add_group(2);
        s.push(1, (0..4).map(|i| job(&log, 1, i)).collect());
        s.push(2, (0..2).map(|i| job(&log, 2, i)).collect());
        assert_eq!(s.queued_map_bytes(), 60);
        for _ in 0..6 {
            (s.pop().expect("job").run)();
        }
        let order = log.lock().expect("log").clone();
        assert_eq!(order, vec![(1, 0), (2, 0), (1, 1), (2, 1), (1, 2), (1, 3)]);
        assert_eq!(s.queued_map_bytes(), 0);
    }

    #[test]
    fn a_host_thread_takes_map_segments_only_from_a_backlog() {
        let s = Scheduler::default();
        let log = Arc::new(Mutex::new(Vec::new()));
        s.add_group(1);
        s.add_group(2);
        let mut reduce = job(&log, 1, 0);
        reduce.side = Side::Reduce;
        s.push(1, vec![reduce, job(&log, 1, 1)]);
        s.push(2, vec![job(&log, 2, 0), job(&log, 2, 1)]);
        assert_eq!(s.queued_map_bytes(), 30);
        // Below the backlog asked for: nothing, after the wait.
        assert!(matches!(s.pop_within(Duration::from_millis(1), Some(31)), Wait::Idle));
        // Group 1's head is reduce-side work: passed over, not reordered.
        for _ in 0..2 {
            let Wait::Job(j) = s.pop_within(Duration::ZERO, Some(10)) else { panic!("a job") };
            assert_eq!(j.side, Side::Map);
            (j.run)();
        }
        assert_eq!(*log.lock().expect("log"), vec![(2, 0), (2, 1)]);
        assert!(matches!(s.pop_within(Duration::ZERO, Some(1)), Wait::Idle));
        // Any job: group 1 in arrival order.
        let Wait::Job(j) = s.pop_within(Duration::ZERO, None) else { panic!("a job") };
        assert_eq!(j.side, Side::Reduce);
        s.close();
        assert!(matches!(s.pop_within(Duration::from_secs(5), None), Wait::Closed));
    }

    #[test]
    fn a_removed_group_drops_its_jobs_and_close_ends_pop() {
        let s = Scheduler::default();
        let log = Arc::new(Mutex::new(Vec::new()));
        s.add_group(1);
        s.push(1, vec![job(&log, 1, 0)]);
        s.remove_group(1);
        assert_eq!(s.queued_map_bytes(), 0);
        assert!(!s.push(1, vec![job(&log, 1, 1)]), "no group, no push");
        s.close();
        assert!(s.pop().is_none());
        assert!(log.lock().expect("log").is_empty());
    }

    #[test]
    fn close_drops_the_jobs_still_queued() {
        let s = Scheduler::default();
        let held = Arc::new(());
        s.add_group(1);
        let h = held.clone();
        let j = Job {
            bytes: 10,
            side: Side::Reduce,
            run: Box::new(move || {
                drop(h);
                true
            }),
        };
        assert!(s.push(1, vec![j]));
        assert_eq!(Arc::strong_count(&held), 2);
        s.close();
        assert_eq!(Arc::strong_count(&held), 1, "a queued job outlived close");
        assert_eq!(s.queued_map_bytes(), 0);
        assert!(s.pop().is_none());
    }
}
