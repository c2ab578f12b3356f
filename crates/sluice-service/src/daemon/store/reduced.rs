//! The store's side of a reduced read (the daemon running a shuffle's
//! reduce-side operator): the operator's memory taken from the budget's
//! headroom and given back, a directory for what it spills, and the counts
//! `Stats` reports.

use std::path::PathBuf;

use super::{Refusal, Store};
use crate::protocol::ErrorCode;

/// The prefix of a reduced read's spill directory inside an application's
/// directory (`r<n>`); one left by a killed daemon is removed at start.
pub(crate) const REDUCE_DIR_PREFIX: &str = "r";

impl Store {
    /// A fresh directory for one reduced read's spills, under application
    /// `app`'s directory (directories taken in turn); the caller removes
    /// it when the read ends.
    pub(crate) fn reduce_dir(&mut self, app: &str) -> Result<PathBuf, Refusal> {
        self.files += 1;
        let n = self.files;
        let tag = self.app(app)?.tag.clone();
        let dir = self.dirs[(n as usize) % self.dirs.len()]
            .join(tag)
            .join(format!("{REDUCE_DIR_PREFIX}{n}"));
        std::fs::create_dir_all(&dir).map_err(|e| {
            (ErrorCode::Storage, format!("creating {} for a reduced read: {e}", dir.display()))
        })?;
        Ok(dir)
    }

    /// Takes `want` bytes for a reduce-side operator: all of them when
    /// `forced` (the operator's floor, without which it cannot progress),
    /// else what the budget has left. Counted as held until released.
    pub(crate) fn reserve_reduce(&mut self, want: u64, forced: bool) -> u64 {
        let got = if forced { want } else { want.min(self.budget.saturating_sub(self.held)) };
        self.held += got;
        self.peak = self.peak.max(self.held);
        got
    }

    /// Gives back bytes [`Store::reserve_reduce`] took.
    pub(crate) fn release_reduce(&mut self, bytes: u64) {
        self.held = self.held.saturating_sub(bytes);
    }

    /// Counts a reduced read that took `records_in` records and handed out
    /// `records_out` results.
    pub(crate) fn note_reduced(&mut self, records_in: u64, records_out: u64) {
        self.reduced_reads += 1;
        self.reduced_in += records_in;
        self.reduced_out += records_out;
    }
}
