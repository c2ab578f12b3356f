//! The Sluice service: one daemon per node that map tasks push their
//! output to and reduce tasks read one stream per partition from.
//!
//! ```text
//!  level 1 (map task, embedded engine)        level 2 (daemon of node n)
//!  records ─► partition by reduce id ─► group by destination daemon ─► Push chunks (~1 MiB)
//!                                                  │                       │ staged per attempt
//!                                               Commit ──────────────────► folded into node n's
//!                                                                          reduce partitions
//!  reduce task ◄── one stream: Read(partitions, winners) ◄── memory, then disk (one write per spill)
//! ```
//! - [`protocol`]: frames, messages and their limits.
//! - [`auth`]: node secret, per-application keys, challenge and response.
//! - [`daemon`]: the daemon (`sluice daemon`).
//! - [`client`]: connect, register, push, commit, read.
//!
//! Node `n` of `N` owns a contiguous range of a shuffle's reduce
//! partitions ([`node_of`], [`reduce_ids`]), so one reduce task's read goes
//! to one daemon as one request, not one per map output.

pub mod auth;
pub mod client;
pub mod daemon;
pub mod protocol;

pub use client::{AttemptPusher, Block, Client, ClientError, ReadMode};
pub use daemon::{Daemon, DaemonConfig, DaemonError, AUTH_PENDING_PER_HOST, LEASE_CONNECTIONS};
/// Which daemon owns a reduce partition, and which partitions a daemon
/// owns: the engine's two-level partitioning, so the embedded engine and
/// the service split a shuffle the same way.
pub use sluice_engine::{node_of, reduce_ids};
