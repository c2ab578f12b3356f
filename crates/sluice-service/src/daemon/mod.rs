//! `sluice daemon`: one per node. It accepts authenticated connections,
//! stages the chunks map tasks push, folds committed attempts into the
//! node's reduce partitions (the second level: chunks for this node split
//! by reduce partition), keeps them in memory up to its budget and then on
//! disk, and serves each reduce task its partitions as one stream.
//!
//! - `store`: applications, shuffles, staging, commits, partitions, spill.
//! - `conn`: one connection: challenge, authentication, then requests.
//! - `reduce`: a reduced read, the shuffle's reduce-side operator run at
//!   the daemon over each partition before it is streamed.
//! - `spill`: blocks in memory or in spill files, written in one write per
//!   spill and checked by CRC32C when read back.
//! - `frames`: the memory of frames in flight (`--frame-memory`), taken
//!   before a request's payload or a block read back is allocated.
//!
//! Start-up checks every directory (exists, is a directory, writable),
//! binds the port, and locks each directory (removing the spill files a
//! killed daemon left there) before anything is served; each failure is a
//! [`DaemonError`]. [`Daemon::shutdown`] stops accepting, refuses new
//! pushes and registrations with [`ErrorCode::ShuttingDown`], lets requests
//! in flight (a commit, a read) finish, and waits for connections to close
//! for at most [`SHUTDOWN_GRACE`]. Leases are swept every
//! [`LEASE_SWEEP_INTERVAL`]: a crashed driver's data is deleted once its
//! lease lapses.
//!
//! A daemon serves at most its `max_connections` tasks' connections at
//! once (`fds`: what its open-file limit holds), and beside them
//! [`LEASE_CONNECTIONS`] that drivers hold to renew their leases. A
//! connection takes its slot once it has authenticated (its `Auth` says
//! which kind it is; a lease connection finding its kind's slots taken
//! takes a task's). One over the limit is answered [`ErrorCode::Busy`] and
//! closed, so that its client waits and tries again instead of taking a
//! closed socket for a dead daemon: in place of the welcome when its kind
//! has no slot, and in place of the challenge when the daemon already holds
//! as many connections as both kinds' slots (connections that ended are
//! joined before that count is taken). That answer, a frame of a few dozen
//! bytes, goes into the new socket's empty send buffer without waiting (one
//! non-blocking `send`), so the accept loop never waits on a client. A
//! failed accept (out of descriptors) pauses accepting for
//! [`ACCEPT_ERROR_PAUSE`] rather than spinning.

mod conn;
mod fds;
mod frames;
pub use fds::{raise_open_file_limit, DEFAULT_MAX_CONNECTIONS, LEASE_CONNECTIONS, RESERVED_FDS};
pub use frames::{DEFAULT_FRAME_MEMORY_BYTES, MAX_FRAME_MEMORY_BYTES, MIN_FRAME_MEMORY_BYTES};
mod reduce;
mod spill;
pub use spill::SPILL_WRITE_BYTES;
mod store;
pub use store::{COMMIT_ENTRIES, DROP_ENTRIES, ENTRY_BYTES, SHUFFLE_ENTRIES, STAGED_ENTRIES};
mod trim;

use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::auth::Key;
use crate::protocol::{frame, ErrorCode, Message};
use store::Store;

/// How long shutdown waits for open connections to finish.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// How often lapsed leases are looked for.
pub const LEASE_SWEEP_INTERVAL: Duration = Duration::from_millis(200);

/// How long a connection may sit idle between requests before it is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// How long a new connection has to authenticate (its whole `Auth` frame).
pub const AUTH_TIMEOUT: Duration = Duration::from_secs(10);

/// Most connections from one host a daemon holds before they authenticate:
/// a host that opens connections and stays silent holds at most these (each
/// until [`AUTH_TIMEOUT`]), not the slots every other host's tasks need; a
/// new connection from a host holding that many is answered
/// [`ErrorCode::Busy`] in place of the challenge (a client tries again). An
/// authentication takes a round trip, so a host's tasks starting together
/// hold a few at a time.
pub const AUTH_PENDING_PER_HOST: u32 = 64;

/// How long one frame of a read's stream (or a reply) may wait on a reader
/// that does not take it, by default ([`DaemonConfig::stream_stall`]): a
/// reduce task reads its next segment only when it is done with the last,
/// which may take minutes. A read cut off so resumes where it broke off
/// ([`Message::Read`]'s `skip`), on a new connection.
pub const STREAM_STALL_TIMEOUT: Duration = Duration::from_secs(600);

/// How long a request other than a push waits for room in the frame
/// memory, by default ([`DaemonConfig::frame_wait`]), before it is read
/// through and answered [`ErrorCode::Busy`].
pub const FRAME_WAIT_TIMEOUT: Duration = Duration::from_secs(60);

/// How long accepting pauses after an accept failed (no descriptor left,
/// for one): the listener stays readable, and retrying at once would spin.
pub const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// A daemon's settings.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// The address to listen on (`127.0.0.2:7340`; port 0 picks one).
    pub listen: SocketAddr,
    /// Directories for partitions that leave memory, used round-robin.
    pub dirs: Vec<PathBuf>,
    /// Bytes of pushed data held in memory, staged and committed.
    pub memory_bytes: u64,
    /// The node secret.
    pub secret: Key,
    /// The longest lease an application is granted.
    pub max_lease: Duration,
    /// Connections served at once; `None`: [`DEFAULT_MAX_CONNECTIONS`],
    /// or what the open-file limit holds when that is less.
    pub max_connections: Option<usize>,
    /// How long a frame of a read's stream waits on a reader that does not
    /// take it before the connection is closed ([`STREAM_STALL_TIMEOUT`]
    /// by default).
    pub stream_stall: Duration,
    /// Bytes of frames in flight held at once, beside `memory_bytes`
    /// ([`DEFAULT_FRAME_MEMORY_BYTES`] by default; see `frames`).
    pub frame_memory_bytes: u64,
    /// How long a request other than a push waits for frame memory before
    /// it is answered `Busy` ([`FRAME_WAIT_TIMEOUT`] by default).
    pub frame_wait: Duration,
}

/// Why a daemon did not start.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("{addr} is in use (is another daemon running on this node?)")]
    PortInUse { addr: SocketAddr },
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("directory {dir}: {why}")]
    Dir { dir: PathBuf, why: String },
    #[error("no --dir given: a daemon needs at least one directory")]
    NoDirs,
    #[error("directory {dir} is in use: {why}")]
    DirInUse { dir: PathBuf, why: String },
    #[error("--memory must be at least {min} bytes, got {got}")]
    Memory { min: u64, got: u64 },
    #[error("--frame-memory must be {min} to {max} bytes, got {got}")]
    FrameMemory { min: u64, max: u64, got: u64 },
    #[error("--max-connections {asked}: {why}")]
    Connections { asked: usize, why: String },
}

/// The smallest memory budget: two of the largest frames, so that one
/// push always fits beside another staged one.
pub const MIN_MEMORY_BYTES: u64 = 2 * crate::protocol::limits::MAX_FRAME_PAYLOAD_BYTES as u64;

/// State every connection shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) store: Mutex<Store>,
    pub(crate) secret: Key,
    pub(crate) stopping: AtomicBool,
    /// The most connections served at once (authenticated, holding a
    /// slot), and those answered busy.
    peak_connections: AtomicU64,
    busy_refusals: AtomicU64,
    /// Slots of tasks' connections (`max_connections` of them) and of
    /// leases' connections ([`LEASE_CONNECTIONS`]).
    slots: Arc<Semaphore>,
    lease_slots: Arc<Semaphore>,
    max_connections: usize,
    /// [`DaemonConfig::stream_stall`].
    pub(crate) stream_stall: Duration,
    /// Frames in flight (`frames`).
    pub(crate) frames: frames::FramePool,
    /// [`DaemonConfig::frame_wait`].
    pub(crate) frame_wait: Duration,
    /// Connections not yet authenticated, per host
    /// ([`AUTH_PENDING_PER_HOST`]).
    pending: Mutex<HashMap<IpAddr, u32>>,
}

/// The host a peer address counts as for [`AUTH_PENDING_PER_HOST`]: an IPv4
/// address (an IPv4-mapped one as IPv4), or an IPv6 address's /64 network,
/// which one host holds whole.
fn pending_host(peer: IpAddr) -> IpAddr {
    match peer.to_canonical() {
        IpAddr::V6(v6) => {
            let net = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(std::net::Ipv6Addr::from(net))
        }
        v4 => v4,
    }
}

/// A connection from `host` that has not authenticated yet, counted until
/// dropped.
pub(crate) struct PendingAuth {
    shared: Arc<Shared>,
    host: IpAddr,
}

impl Drop for PendingAuth {
    fn drop(&mut self) {
        let mut pending = self.shared.pending_hosts();
        if let Some(n) = pending.get_mut(&self.host) {
            *n -= 1;
            if *n == 0 {
                pending.remove(&self.host);
            }
        }
    }
}

impl Shared {
    pub(crate) fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        // A panic while the lock was held leaves the store's accounting in
        // a state no request should trust; poison is propagated as a panic
        // of the connection task, never a wrong answer.
        #[allow(clippy::expect_used)]
        self.store.lock().expect("the daemon's store lock")
    }

    /// Runs `op` on the store, then deletes the files and directories it
    /// let go of once the lock is let go (`store::Unlinks`), before the
    /// caller answers; on the runtime's multi-thread workers.
    pub(crate) fn with_store<T>(&self, op: impl FnOnce(&mut Store) -> T) -> T {
        let (r, gone) = {
            let mut store = self.store();
            let r = op(&mut store);
            (r, store.take_unlinks())
        };
        if !gone.is_empty() {
            tokio::task::block_in_place(|| gone.run());
        }
        r
    }

    /// A slot for an authenticated connection, held while it is served: a
    /// lease connection's own kind first, else a task's; none when both are
    /// taken (the connection is answered busy).
    pub(crate) fn slot(&self, lease_only: bool) -> Option<OwnedSemaphorePermit> {
        let lease = lease_only.then(|| self.lease_slots.clone().try_acquire_owned().ok());
        let slot = lease.flatten().or_else(|| self.slots.clone().try_acquire_owned().ok());
        let Some(slot) = slot else {
            self.busy_refusals.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let served = (self.max_connections - self.slots.available_permits())
            + (LEASE_CONNECTIONS - self.lease_slots.available_permits());
        self.peak_connections.fetch_max(served as u64, Ordering::Relaxed);
        Some(slot)
    }

    fn pending_hosts(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, u32>> {
        // Counts only: a panic while it was held cannot leave them worse
        // than off by one.
        self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts a new connection from `host` until it authenticates (the
    /// returned guard is dropped); `None` if the host holds
    /// [`AUTH_PENDING_PER_HOST`] such connections already.
    pub(crate) fn pending_auth(self: &Arc<Self>, host: IpAddr) -> Option<PendingAuth> {
        let host = pending_host(host);
        let mut pending = self.pending_hosts();
        let n = pending.entry(host).or_insert(0);
        if *n >= AUTH_PENDING_PER_HOST {
            return None;
        }
        *n += 1;
        drop(pending);
        Some(PendingAuth { shared: self.clone(), host })
    }

    /// The store's accounting and the connections' counts.
    pub(crate) fn stats(&self) -> crate::protocol::DaemonStats {
        let (frames_peak_bytes, frames_slow_downs) = self.frames.stats();
        crate::protocol::DaemonStats {
            peak_connections: self.peak_connections.load(Ordering::Relaxed),
            busy_refusals: self.busy_refusals.load(Ordering::Relaxed),
            frames_peak_bytes,
            frames_slow_downs,
            ..self.store().stats()
        }
    }
}

/// A running daemon.
#[derive(Debug)]
pub struct Daemon {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    accept: tokio::task::JoinHandle<()>,
    /// Each directory's lock file, held while the daemon runs.
    _locks: Vec<spill::DirLock>,
    stale: (u64, u64),
    max_connections: usize,
    notice: Option<String>,
}

fn check_dir(dir: &PathBuf) -> Result<(), DaemonError> {
    let bad = |why: String| DaemonError::Dir { dir: dir.clone(), why };
    let meta = std::fs::metadata(dir).map_err(|e| bad(format!("{e}")))?;
    if !meta.is_dir() {
        return Err(bad("not a directory".into()));
    }
    let probe = dir.join(format!(".sluice-probe-{}", std::process::id()));
    std::fs::write(&probe, b"probe").map_err(|e| bad(format!("not writable: {e}")))?;
    std::fs::remove_file(&probe).map_err(|e| bad(format!("cannot remove a probe file: {e}")))?;
    Ok(())
}

impl Daemon {
    /// Checks the settings, binds and starts serving on the current tokio
    /// runtime, which must be a multi-thread one (a spill blocks its worker
    /// in `block_in_place`).
    pub async fn start(config: DaemonConfig) -> Result<Daemon, DaemonError> {
        if config.dirs.is_empty() {
            return Err(DaemonError::NoDirs);
        }
        for d in &config.dirs {
            check_dir(d)?;
        }
        if config.memory_bytes < MIN_MEMORY_BYTES {
            return Err(DaemonError::Memory { min: MIN_MEMORY_BYTES, got: config.memory_bytes });
        }
        let frame_memory = config.frame_memory_bytes;
        if !(MIN_FRAME_MEMORY_BYTES..=MAX_FRAME_MEMORY_BYTES).contains(&frame_memory) {
            return Err(DaemonError::FrameMemory {
                min: MIN_FRAME_MEMORY_BYTES,
                max: MAX_FRAME_MEMORY_BYTES,
                got: frame_memory,
            });
        }
        let (max_connections, notice) =
            fds::max_connections(config.max_connections, raise_open_file_limit())?;
        let listener = TcpListener::bind(config.listen).await.map_err(|e| match e.kind() {
            std::io::ErrorKind::AddrInUse => DaemonError::PortInUse { addr: config.listen },
            _ => DaemonError::Bind { addr: config.listen, source: e },
        })?;
        let addr = listener
            .local_addr()
            .map_err(|e| DaemonError::Bind { addr: config.listen, source: e })?;
        let mut locks = Vec::with_capacity(config.dirs.len());
        let mut stale = (0, 0);
        for d in &config.dirs {
            locks.push(
                spill::lock_dir(d).map_err(|why| DaemonError::DirInUse { dir: d.clone(), why })?,
            );
            let (files, bytes) = spill::remove_stale(d);
            stale = (stale.0 + files, stale.1 + bytes);
        }
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::new(
                config.dirs.clone(),
                config.memory_bytes,
                config.max_lease,
            )),
            secret: config.secret,
            stopping: AtomicBool::new(false),
            peak_connections: AtomicU64::new(0),
            busy_refusals: AtomicU64::new(0),
            slots: Arc::new(Semaphore::new(max_connections)),
            lease_slots: Arc::new(Semaphore::new(LEASE_CONNECTIONS)),
            pending: Mutex::new(HashMap::new()),
            max_connections,
            stream_stall: config.stream_stall,
            frames: frames::FramePool::new(frame_memory),
            frame_wait: config.frame_wait,
        });
        let (stop, stop_rx) = watch::channel(false);
        let accept = tokio::spawn(accept_loop(listener, shared.clone(), stop_rx, max_connections));
        Ok(Daemon { addr, shared, stop, accept, _locks: locks, stale, max_connections, notice })
    }

    /// The connections it serves at once.
    pub fn max_connections(&self) -> usize {
        self.max_connections
    }

    /// Why it serves fewer connections than [`DEFAULT_MAX_CONNECTIONS`]
    /// (its open-file limit), when it does without being told to.
    pub fn notice(&self) -> Option<&str> {
        self.notice.as_deref()
    }

    /// The spill files (and their bytes) a killed daemon had left in this
    /// one's directories, removed at start.
    pub fn stale_removed(&self) -> (u64, u64) {
        self.stale
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its byte accounting and its work so far.
    pub fn stats(&self) -> crate::protocol::DaemonStats {
        self.shared.stats()
    }

    /// Stops: no new connections, no new pushes; requests in flight finish;
    /// open connections get [`SHUTDOWN_GRACE`] to close.
    pub async fn shutdown(self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        let _ = self.stop.send(true);
        let _ = self.accept.await;
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    max_connections: usize,
) {
    let mut conns = JoinSet::new();
    let busy = frame::encode(&Message::Error {
        code: ErrorCode::Busy,
        message: conn::busy(max_connections),
    });
    let host_busy = frame::encode(&Message::Error {
        code: ErrorCode::Busy,
        message: format!(
            "this host holds {AUTH_PENDING_PER_HOST} connections to the daemon that have not \
             authenticated; try again"
        ),
    });
    let mut sweep = tokio::time::interval(LEASE_SWEEP_INTERVAL);
    loop {
        tokio::select! {
            r = listener.accept() => {
                let Ok((stream, peer)) = r else {
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                while conns.try_join_next().is_some() {}
                let answer = if conns.len() >= max_connections + LEASE_CONNECTIONS {
                    &busy
                } else if let Some(pending) = shared.pending_auth(peer.ip()) {
                    conns.spawn(conn::serve(stream, shared.clone(), stop.clone(), pending));
                    continue;
                } else {
                    &host_busy
                };
                shared.busy_refusals.fetch_add(1, Ordering::Relaxed);
                // Dropped once written: closed, the answer sent first. A plain
                // send on the (still non-blocking) socket, not tokio's
                // `try_write`, which answers `WouldBlock` until the reactor has
                // seen the socket writable.
                if let Ok(socket) = stream.into_std() {
                    let _ = (&socket).write(answer);
                }
            }
            _ = sweep.tick() => {
                let now = Instant::now();
                let lapsed = shared.with_store(|s| s.expire(now));
                let idle = shared.with_store(|s| s.expire_staged(now));
                if !lapsed.is_empty() || idle > 0 {
                    trim::give_back();
                }
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            _ = stop.changed() => break,
        }
    }
    drop(listener);
    let deadline = tokio::time::sleep(SHUTDOWN_GRACE);
    tokio::pin!(deadline);
    while !conns.is_empty() {
        tokio::select! {
            _ = conns.join_next() => {}
            _ = &mut deadline => { conns.abort_all(); break; }
        }
    }
}

pub(crate) fn shutting_down() -> (ErrorCode, String) {
    (ErrorCode::ShuttingDown, "the daemon is shutting down; push to another".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_host_is_an_ipv4_address_or_an_ipv6_network() {
        let host = |s: &str| pending_host(s.parse().expect("address"));
        assert_eq!(host("127.0.0.3"), host("::ffff:127.0.0.3"));
        assert_ne!(host("127.0.0.3"), host("127.0.0.4"));
        // One IPv6 host holds its /64: rotating the interface id gains nothing.
        assert_eq!(host("2001:db8:1:2::1"), host("2001:db8:1:2:ffff:1234:5678:9abc"));
        assert_ne!(host("2001:db8:1:2::1"), host("2001:db8:1:3::1"));
    }
}
