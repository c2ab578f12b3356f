//! The results of an aggregate or a distinct that spilled, merged from its
//! sorted runs as they are asked for.
//!
//! # Algorithm
//! Every run is sorted by key, so the loser tree over them yields each
//! key's records next to each other. The stream keeps one open group: a
//! record with the open group's key is folded into it (an aggregate merges
//! the partial state, a distinct ignores the repeat); a record with another
//! key closes the open group, whose result is emitted, and opens the next.
//! [`GroupStream::emit_some`] stops once it emitted the bytes asked for, so
//! what is held at any time is the runs' read buffers (one block a run,
//! at most the fan-in of them: see `runs`), one group's state and the
//! batch being filled, never the partition's whole result.

use super::aggregate::AggSpec;
use super::cursor::{record_at, AnyRun};
use super::distinct::DistinctBy;
use super::emit::Emitter;
use super::merge::LoserTree;
use super::ReorgError;
use crate::format::{FormatError, Layout, Record};

/// What a group's records become.
#[derive(Debug)]
pub(crate) enum GroupFold {
    /// An aggregate: partial states merged into `acc`, the final value
    /// emitted under the key.
    Aggregate {
        /// The aggregate function.
        spec: AggSpec,
        /// The open group's merged partial state.
        acc: Vec<u8>,
        /// Scratch for the final value.
        value: Vec<u8>,
    },
    /// A distinct: each item (a run's key) emitted once, as a key alone or
    /// as the record it encodes.
    Distinct {
        /// What made two records the same.
        by: DistinctBy,
        /// Layout of the encoded records (for [`DistinctBy::Record`]).
        layout: Layout,
    },
}

impl GroupFold {
    /// Opens a group at its first record's value.
    fn open(&mut self, value: &[u8]) {
        if let GroupFold::Aggregate { acc, .. } = self {
            acc.clear();
            acc.extend_from_slice(value);
        }
    }

    /// Folds another record of the open group.
    fn add(&mut self, value: &[u8]) {
        if let GroupFold::Aggregate { spec, acc, .. } = self {
            spec.merge_partial_bytes(acc, value);
        }
    }

    /// Emits the result of the group of `key`.
    fn close(&mut self, key: &[u8], out: &mut Emitter) -> Result<(), ReorgError> {
        match self {
            GroupFold::Aggregate { spec, acc, value } => {
                spec.finalize_partial(acc, value);
                out.emit(key, value)?;
            }
            GroupFold::Distinct { by: DistinctBy::Key, .. } => out.emit(key, &[])?,
            GroupFold::Distinct { by: DistinctBy::Record, layout } => {
                let (r, _) = record_at(*layout, key, 0).ok_or(FormatError::MalformedRecord {
                    record: 0,
                    offset: 0,
                    reason: "a spilled distinct item is not one encoded record",
                })?;
                out.emit(r.key, r.value)?;
            }
        }
        Ok(())
    }
}

/// The merge of an operator's spilled runs in progress.
#[derive(Debug)]
pub struct GroupStream {
    tree: LoserTree<AnyRun>,
    fold: GroupFold,
    /// The open group's key; `None` before the first record and after the
    /// last group was emitted.
    open: Option<Vec<u8>>,
    emitted: u64,
}

impl GroupStream {
    /// A stream over `runs`, each sorted by whole key.
    pub(crate) fn new(runs: Vec<AnyRun>, fold: GroupFold) -> Self {
        GroupStream { tree: LoserTree::new(runs), fold, open: None, emitted: 0 }
    }

    /// Emits results in key order into `out` until `bytes` more payload
    /// bytes were emitted or the runs end. Returns whether results remain.
    pub fn emit_some(&mut self, out: &mut Emitter, bytes: u64) -> Result<bool, ReorgError> {
        let start = out.bytes();
        while let Some(Record { key, value }) = self.tree.peek() {
            match &mut self.open {
                Some(open) if open.as_slice() == key => self.fold.add(value),
                Some(open) => {
                    self.fold.close(open, out)?;
                    self.emitted += 1;
                    open.clear();
                    open.extend_from_slice(key);
                    self.fold.open(value);
                }
                None => {
                    self.open = Some(key.to_vec());
                    self.fold.open(value);
                }
            }
            self.tree.advance()?;
            if out.bytes() - start >= bytes {
                return Ok(true);
            }
        }
        if let Some(open) = self.open.take() {
            self.fold.close(&open, out)?;
            self.emitted += 1;
        }
        Ok(false)
    }

    /// Bytes of read buffers its runs (all on disk) hold at most.
    pub fn read_buffer_bytes(&self) -> usize {
        AnyRun::read_buffer_bytes(self.tree.runs())
    }

    /// Emits every result `stream` (an operator's `finish_streaming`,
    /// `None` when it emitted them itself) has left into `out`.
    pub(crate) fn emit_all(stream: Option<Self>, out: &mut Emitter) -> Result<(), ReorgError> {
        if let Some(mut s) = stream {
            while s.emit_some(out, u64::MAX)? {}
        }
        Ok(())
    }

    /// Results emitted so far.
    pub fn emitted(&self) -> u64 {
        self.emitted
    }
}
