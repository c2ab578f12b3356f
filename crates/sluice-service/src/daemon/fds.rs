//! How many connections a daemon may hold, from its open-file limit.
//!
//! Every connection is a file descriptor, and so is every spill file a
//! partition or a staged attempt has open. At start the daemon raises its
//! soft `RLIMIT_NOFILE` to the hard one (as the JVM does), and keeps
//! [`RESERVED_FDS`] of the result for everything that is not a connection,
//! and [`LEASE_CONNECTIONS`] for the connections applications' drivers
//! hold to renew their leases, served beside `--max-connections`. A
//! `--max-connections` the limit cannot hold beside those is a bad setting
//! and the daemon does not start; without one it serves
//! [`DEFAULT_MAX_CONNECTIONS`], or fewer when the limit is lower, and says
//! so.

use super::DaemonError;

/// Connections served at once unless the operator says otherwise: one per
/// executor of a 1,000-node cluster with four executors per node, the
/// largest docs/service.md's model takes (a map task pushes to one daemon
/// at a time, so an executor keeps about one pooled connection per daemon).
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

/// Descriptors set aside for what is not a connection: the listener, each
/// directory's lock file, spill files (one per partition or staged attempt
/// that left memory), the standard streams. An allowance, not a bound:
/// spill files past it compete with connections, and a spill that gets no
/// descriptor is refused `Storage`.
pub const RESERVED_FDS: u64 = 1024;

/// Connections served beside `--max-connections` for applications' leases:
/// a driver holds one per daemon, asked for as a lease connection, which
/// sends nothing but `Renew`, so that tasks' connections filling the daemon
/// never keep a lease from being renewed and a lease connection never keeps
/// a task out. A lease connection past these takes a task's slot if one is
/// free (so a daemon with more applications than this at once renews them
/// all while it has room).
pub const LEASE_CONNECTIONS: usize = 256;

/// Descriptors kept from the open-file limit for what is not a task's
/// connection.
const KEPT_FDS: u64 = RESERVED_FDS + LEASE_CONNECTIONS as u64;

/// The open-file limit after raising the soft limit to the hard one where
/// the hard one is finite and the kernel lets it (otherwise the soft one
/// stays).
pub fn raise_open_file_limit() -> u64 {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit into the struct passed, which
    // lives on this stack frame for the whole call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return u64::MAX;
    }
    if r.rlim_cur < r.rlim_max && r.rlim_max != libc::RLIM_INFINITY {
        let raised = libc::rlimit { rlim_cur: r.rlim_max, rlim_max: r.rlim_max };
        // SAFETY: setrlimit reads the rlimit passed, alive for the call.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return r.rlim_max;
        }
    }
    r.rlim_cur
}

/// The connections to serve: `asked` when the limit holds them beside
/// [`RESERVED_FDS`] (an error when it does not), else the default fitted to
/// the limit, with a notice when the limit lowered it.
pub(super) fn max_connections(
    asked: Option<usize>,
    open_file_limit: u64,
) -> Result<(usize, Option<String>), DaemonError> {
    let room = open_file_limit.saturating_sub(KEPT_FDS);
    match asked {
        Some(0) => Err(DaemonError::Connections {
            asked: 0,
            why: "a daemon serves at least one connection".into(),
        }),
        Some(n) if n as u64 > room => Err(DaemonError::Connections {
            asked: n,
            why: format!(
                "with {RESERVED_FDS} descriptors kept for spill files and {LEASE_CONNECTIONS} \
                 for leases' connections it needs an open-file limit of {}, and the limit is \
                 {open_file_limit} (raise `ulimit -n`)",
                (n as u64).saturating_add(KEPT_FDS)
            ),
        }),
        Some(n) => Ok((n, None)),
        None if room >= DEFAULT_MAX_CONNECTIONS as u64 => Ok((DEFAULT_MAX_CONNECTIONS, None)),
        None if room == 0 => Err(DaemonError::Connections {
            asked: DEFAULT_MAX_CONNECTIONS,
            why: format!(
                "the open-file limit is {open_file_limit}, not above the {KEPT_FDS} \
                 descriptors kept for spill files and leases' connections (raise `ulimit -n`)"
            ),
        }),
        None => Ok((
            room as usize,
            Some(format!(
                "serving at most {room} connections, not {DEFAULT_MAX_CONNECTIONS}: the \
                 open-file limit is {open_file_limit} and {KEPT_FDS} are kept for spill files \
                 and leases' connections"
            )),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_decides_what_a_daemon_serves() {
        let ok = |asked, limit| max_connections(asked, limit).map_err(|e| e.to_string());
        assert_eq!(ok(None, 1 << 20), Ok((DEFAULT_MAX_CONNECTIONS, None)));
        assert_eq!(ok(Some(100_000), 1 << 20), Ok((100_000, None)));
        // The default fits itself to a low limit, and says so.
        let (n, notice) = ok(None, 2048).expect("fits");
        assert_eq!(n, 2048 - 1024 - 256);
        assert!(notice.expect("a notice").contains("2048"));
        // An explicit setting the limit cannot hold, zero, or no room at all.
        let e = ok(Some(4096), 2048).expect_err("too many");
        assert!(e.contains("5376") && e.contains("2048"), "{e}");
        assert!(ok(Some(0), 1 << 20).is_err());
        assert!(ok(None, KEPT_FDS).is_err());
    }

    #[test]
    fn raising_the_limit_never_lowers_it() {
        let mut before = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: as in raise_open_file_limit.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut before) }, 0);
        let after = raise_open_file_limit();
        assert!(after >= before.rlim_cur, "{after} < {}", before.rlim_cur);
    }
}
