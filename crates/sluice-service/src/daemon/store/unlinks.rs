//! Deletes outside the store's lock. Letting a shuffle, an attempt or a
//! losing commit go may drop the last reference to a spill file, and a
//! spill file is deleted when dropped; deleting a large file takes the
//! file system tens of milliseconds on some file systems, and under the
//! store's lock every connection would wait for it. So the store keeps the
//! files it lets go (and the directories of applications that ended) in
//! [`Unlinks`], which the connection whose request let them go takes in the
//! same hold of the lock ([`Store::take_unlinks`]) and runs after letting
//! the lock go, before it answers: an answer still means the files are
//! gone (unless a read elsewhere holds one, whose last block deletes it).

use std::path::PathBuf;
use std::sync::Arc;

use super::super::spill::SpillFile;
use super::Store;

/// Files and directories to delete once the store's lock is let go.
#[derive(Debug, Default)]
#[must_use = "what it holds is deleted only by `run`"]
pub(crate) struct Unlinks {
    files: Vec<Arc<SpillFile>>,
    dirs: Vec<PathBuf>,
}

impl Unlinks {
    pub(crate) fn is_empty(&self) -> bool {
        self.files.is_empty() && self.dirs.is_empty()
    }

    /// Deletes: the files whose last reference this is, then the
    /// directories left empty.
    pub(crate) fn run(self) {
        drop(self.files);
        for d in self.dirs {
            let _ = std::fs::remove_dir(d);
        }
    }
}

impl Store {
    /// Keeps `file` to be dropped once the lock is let go.
    pub(super) fn unlink_later(&mut self, file: Arc<SpillFile>) {
        self.unlinks.files.push(file);
    }

    /// Keeps directory `dir` to be removed (when empty) after the files.
    pub(super) fn remove_dir_later(&mut self, dir: PathBuf) {
        self.unlinks.dirs.push(dir);
    }

    /// What the store let go of since last taken, to delete without the
    /// lock ([`Unlinks::run`]).
    pub(crate) fn take_unlinks(&mut self) -> Unlinks {
        std::mem::take(&mut self.unlinks)
    }
}
