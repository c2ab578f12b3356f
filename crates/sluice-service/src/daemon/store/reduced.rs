//! The store's side of a reduced read (the daemon running a shuffle's
//! reduce-side operator): the operator's memory taken from the budget's
//! headroom and given back, where it spills, and the counts `Stats`
//! reports.
//!
//! Memory: an aggregate's floor ([`sluice_engine::REDUCE_STATE_FLOOR_BYTES`])
//! is always taken (the operator cannot progress without it, and it is
//! counted as held even over the budget); beyond it, one read may take at
//! most a [`REDUCE_READ_SHARE`]th of the budget and all reduced reads
//! together a [`REDUCE_TOTAL_SHARE`]th, and only what the budget has left,
//! so reads never take the room pushes need to stage: a push that does not
//! fit spills partitions to disk, and reserved operator memory is not
//! among what it can spill. Once a read's input has ended, it keeps only
//! what its results use while they stream (those held in memory, the read
//! buffers of runs merged from disk) and gives the rest back.

use std::path::PathBuf;

use super::{Refusal, Store};

/// The prefix of a reduced read's spill directory inside an application's
/// directory (`r<n>`); one left by a killed daemon is removed at start.
pub(crate) const REDUCE_DIR_PREFIX: &str = "r";

/// One reduced read's operator takes at most this fraction of the budget
/// (as 1/N) beyond its floor.
pub(crate) const REDUCE_READ_SHARE: u64 = 8;

/// All reduced reads' operators together take at most this fraction of
/// the budget (as 1/N) beyond their floors.
pub(crate) const REDUCE_TOTAL_SHARE: u64 = 2;

impl Store {
    /// The directory for one reduced read's spills (not yet created), under
    /// application `app`'s directory (directories taken in turn); the
    /// caller creates it and removes it when the read ends.
    pub(crate) fn reduce_dir(&mut self, app: &str) -> Result<PathBuf, Refusal> {
        self.files += 1;
        let n = self.files;
        let tag = self.app(app)?.tag.clone();
        Ok(self.dirs[(n as usize) % self.dirs.len()]
            .join(tag)
            .join(format!("{REDUCE_DIR_PREFIX}{n}")))
    }

    /// Takes an operator's floor, `bytes`, whatever the budget has left.
    pub(crate) fn hold_reduce_floor(&mut self, bytes: u64) {
        self.reap();
        self.held += bytes;
        self.note_peak();
    }

    /// Takes up to `want` more bytes for a read's operator that holds
    /// `granted` beyond its floor already: what the budget has left, within
    /// the read's and all reads' shares. Counted as held until released.
    pub(crate) fn reserve_reduce(&mut self, want: u64, granted: u64) -> u64 {
        self.reap();
        let got = want
            .min(self.budget.saturating_sub(self.total_held()))
            .min((self.budget / REDUCE_READ_SHARE).saturating_sub(granted))
            .min((self.budget / REDUCE_TOTAL_SHARE).saturating_sub(self.reducing));
        self.held += got;
        self.reducing += got;
        self.note_peak();
        got
    }

    /// Gives back `floor` bytes of a read's floor and `granted` of the
    /// bytes [`Store::reserve_reduce`] took for it (all or part of them).
    pub(crate) fn release_reduce(&mut self, floor: u64, granted: u64) {
        self.held = self.held.saturating_sub(floor + granted);
        self.reducing = self.reducing.saturating_sub(granted);
    }

    /// Whether application `app` still holds a lease (its directory must
    /// stay).
    pub(crate) fn has_app(&self, app: &str) -> bool {
        self.apps.contains_key(app)
    }

    /// Counts a reduced read that took `records_in` records and handed out
    /// `records_out` results.
    pub(crate) fn note_reduced(&mut self, records_in: u64, records_out: u64) {
        self.reduced_reads += 1;
        self.reduced_in += records_in;
        self.reduced_out += records_out;
    }
}
