//! `sluice stats`: asks a running daemon for its byte accounting and the
//! work it has done since it started (chunks staged, attempts committed,
//! reads served), and prints them as one JSON object.
//!
//! It authenticates like any application, with the key that the node
//! secret gives [`STATS_APP`], and asks for the shortest lease: it
//! registers nothing, so the lease that lapses deletes nothing.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use sluice_service::auth::app_key;
use sluice_service::Client;

use crate::daemon::read_secret;

/// The application name `sluice stats` authenticates as.
pub(crate) const STATS_APP: &str = "sluice-stats";

/// The lease it asks for: one millisecond (the daemon's shortest).
const STATS_LEASE: Duration = Duration::from_millis(1);

/// Options of `sluice stats`.
#[derive(Debug, Args)]
pub(crate) struct StatsArgs {
    /// The daemon's address (ip:port).
    #[arg(long)]
    daemon: SocketAddr,
    /// The node secret the daemon was started with.
    #[arg(long)]
    secret_file: PathBuf,
}

pub(crate) fn run(args: &StatsArgs) -> Result<(), Box<dyn std::error::Error>> {
    let key = app_key(&read_secret(&args.secret_file)?, STATS_APP);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let s = rt.block_on(async {
        let mut c = Client::connect(args.daemon, STATS_APP, &key, STATS_LEASE).await?;
        c.stats().await
    })?;
    let json = serde_json::json!({
        "held_bytes": s.held_bytes,
        "peak_bytes": s.peak_bytes,
        "spilled_bytes": s.spilled_bytes,
        "budget_bytes": s.budget_bytes,
        "chunks": s.chunks,
        "commits": s.commits,
        "reads": s.reads,
        "reduced_reads": s.reduced_reads,
        "reduced_in": s.reduced_in,
        "reduced_out": s.reduced_out,
        "peak_connections": s.peak_connections,
        "busy_refusals": s.busy_refusals,
        "frames_peak_bytes": s.frames_peak_bytes,
        "frames_slow_downs": s.frames_slow_downs,
        "bookkeeping_bytes": s.bookkeeping_bytes,
    });
    println!("{json}");
    Ok(())
}
