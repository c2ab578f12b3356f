//! `sluice daemon`: the service daemon of one node, and `sluice app-key`,
//! which derives an application's key from the node secret.
//!
//! The daemon prints one line, `sluice daemon listening on ADDR`, once it
//! serves; SIGTERM or SIGINT shut it down gracefully (no new connections
//! or pushes, requests in flight finish) and it prints what it held at its
//! peak. A bad setting, a missing or read-only directory, a port in use or
//! a secret file others can read is an error and exit status 1 before
//! anything is served.

use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use sluice_service::auth::{app_key, Key};
use sluice_service::{Daemon, DaemonConfig};

/// Options of `sluice daemon`.
#[derive(Debug, Args)]
pub(crate) struct DaemonArgs {
    /// The address to listen on: this node's address.
    #[arg(long)]
    host: IpAddr,
    /// The port (0: any free port, printed on start).
    #[arg(long)]
    port: u16,
    /// A directory for partitions that leave memory (repeat for several disks).
    #[arg(long = "dir", required = true)]
    dirs: Vec<PathBuf>,
    /// Memory for pushed data, staged and committed: bytes, or with k, m, g.
    #[arg(long, value_parser = parse_size)]
    memory: u64,
    /// The node secret, a file only the daemon's user may read.
    #[arg(long)]
    secret_file: PathBuf,
    /// The longest lease an application is granted, seconds (at least
    /// MIN_LEASE_S: Sluice's Spark driver renews every 60 s).
    #[arg(long, default_value_t = 600)]
    max_lease_s: u64,
    /// Tasks' connections served at once; more are answered busy and closed
    /// (256 more are kept for drivers' lease connections). Default 4096, or
    /// what the open-file limit holds beside 1024 kept for spill files and
    /// the 256 when that is less; a value the limit cannot hold is an error
    /// (the soft limit is raised to the hard one first).
    #[arg(long)]
    max_connections: Option<usize>,
    /// Seconds a frame of a read's stream waits on a reduce task that does
    /// not take it before the connection is closed (the reader resumes on a
    /// new one where the stream broke off; at least 1).
    #[arg(long, default_value_t = sluice_service::daemon::STREAM_STALL_TIMEOUT.as_secs())]
    stream_stall_s: u64,
    /// Memory for frames in flight beside --memory: requests being read
    /// and served, blocks read back for a stream (bytes, or with k, m, g;
    /// 8m to 1024g). A push that finds it full is answered slow-down.
    #[arg(long, value_parser = parse_size,
          default_value_t = sluice_service::daemon::DEFAULT_FRAME_MEMORY_BYTES)]
    frame_memory: u64,
}

/// Options of `sluice app-key`.
#[derive(Debug, Args)]
pub(crate) struct AppKeyArgs {
    /// The node secret.
    #[arg(long)]
    secret_file: PathBuf,
    /// The application id (Spark's `spark.app.id`).
    #[arg(long)]
    app: String,
}

/// A size: bytes, or a number with k, m or g (binary units).
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, shift) = match t.char_indices().last() {
        Some((i, 'k')) => (&t[..i], 10),
        Some((i, 'm')) => (&t[..i], 20),
        Some((i, 'g')) => (&t[..i], 30),
        _ => (t.as_str(), 0),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (bytes, or a number with k, m or g)"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("{s:?} is too large"))
}

pub(crate) fn read_secret(path: &Path) -> Result<Key, Box<dyn std::error::Error>> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("secret file {}: {e}", path.display()))?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "secret file {} may be read by others (mode {:o}); chmod 600 it",
            path.display(),
            meta.permissions().mode() & 0o777
        )
        .into());
    }
    let bytes = std::fs::read(path).map_err(|e| format!("secret file {}: {e}", path.display()))?;
    Ok(Key::secret(&bytes).map_err(|e| format!("secret file {}: {e}", path.display()))?)
}

pub(crate) fn app_key_command(args: &AppKeyArgs) -> Result<(), Box<dyn std::error::Error>> {
    println!("{}", app_key(&read_secret(&args.secret_file)?, &args.app).to_hex());
    Ok(())
}

/// The shortest lease `--max-lease-s` may grant: three of the Spark
/// driver's renewals (`ServiceConf.RENEW_MS`, 60 s), so a late one never
/// lets a running application's data lapse.
pub(crate) const MIN_LEASE_S: u64 = 180;

pub(crate) fn run(args: &DaemonArgs) -> Result<(), Box<dyn std::error::Error>> {
    if args.max_lease_s < MIN_LEASE_S {
        return Err(format!(
            "--max-lease-s must be at least {MIN_LEASE_S}, got {}",
            args.max_lease_s
        )
        .into());
    }
    if args.stream_stall_s == 0 {
        return Err("--stream-stall-s must be at least 1".into());
    }
    let config = DaemonConfig {
        listen: SocketAddr::new(args.host, args.port),
        dirs: args.dirs.clone(),
        memory_bytes: args.memory,
        secret: read_secret(&args.secret_file)?,
        max_lease: Duration::from_secs(args.max_lease_s),
        max_connections: args.max_connections,
        stream_stall: Duration::from_secs(args.stream_stall_s),
        frame_memory_bytes: args.frame_memory,
        frame_wait: sluice_service::daemon::FRAME_WAIT_TIMEOUT,
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        // The handler first, so that a SIGTERM sent as soon as the line below
        // is read stops the daemon gracefully rather than killing it.
        use tokio::signal::unix::{signal, SignalKind};
        let (mut term, mut int) =
            (signal(SignalKind::terminate())?, signal(SignalKind::interrupt())?);
        let daemon = Daemon::start(config).await?;
        if let Some(notice) = daemon.notice() {
            eprintln!("sluice daemon: {notice}");
        }
        println!("sluice daemon listening on {}", daemon.addr());
        let (files, bytes) = daemon.stale_removed();
        if files > 0 {
            eprintln!(
                "sluice daemon: removed {files} spill files ({bytes} bytes) a stopped daemon left"
            );
        }
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        let s = daemon.stats();
        daemon.shutdown().await;
        println!(
            "sluice daemon stopped: peak {} of {} bytes held, {} bytes spilled, \
             peak {} connections, {} answered busy, frames in flight peak {} bytes, \
             {} pushes slowed for them",
            s.peak_bytes,
            s.budget_bytes,
            s.spilled_bytes,
            s.peak_connections,
            s.busy_refusals,
            s.frames_peak_bytes,
            s.frames_slow_downs
        );
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("3M"), Ok(3 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999g").is_err());
    }
}
