//! The spill file writer, the finished file and its run readers.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::SpillError;
use crate::format::header::{BlockHeader, HEADER_BYTES};
use crate::format::{BatchView, BlockDecoder, BlockEncoder, Codec, Layout};

/// Bytes buffered before one `write` call (1 MiB): spills are large
/// sequential writes, never one small write per block.
pub const SPILL_WRITE_BYTES: usize = 1 << 20;

/// Counter that makes spill file names unique within the process.
static NEXT_FILE: AtomicU64 = AtomicU64::new(0);

/// Where one block lives.
#[derive(Debug, Clone, Copy)]
struct BlockLoc {
    offset: u64,
    frame_len: u32,
    records: u32,
    layout: Layout,
}

/// I/O done by one spill file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpillStats {
    /// Bytes written (block frames).
    pub bytes_written: u64,
    /// `write` calls.
    pub writes: u64,
    /// Blocks written.
    pub blocks: u64,
    /// Records written.
    pub records: u64,
}

impl std::ops::Add for SpillStats {
    type Output = SpillStats;

    /// What two files (or one file's successive versions) wrote together.
    fn add(self, o: SpillStats) -> SpillStats {
        SpillStats {
            bytes_written: self.bytes_written + o.bytes_written,
            writes: self.writes + o.writes,
            blocks: self.blocks + o.blocks,
            records: self.records + o.records,
        }
    }
}

/// Deletes its path when dropped.
#[derive(Debug)]
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Appends runs of blocks to a new file.
#[derive(Debug)]
pub struct SpillWriter {
    file: File,
    path: RemoveOnDrop,
    buf: Vec<u8>,
    offset: u64,
    index: Vec<Vec<BlockLoc>>,
    encoder: BlockEncoder,
    stats: SpillStats,
}

impl SpillWriter {
    /// Creates a new, uniquely named spill file in `dir`.
    pub fn create(dir: &Path, codec: Codec) -> Result<Self, SpillError> {
        let n = NEXT_FILE.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("sluice-spill-{}-{n}.blk", std::process::id()));
        let mut options = File::options();
        options.write(true).read(true).create_new(true);
        // Spilled records are the job's data: readable by this user only.
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(&path).map_err(|source| SpillError::Io {
            path: path.clone(),
            op: "create",
            source,
        })?;
        let encoder = BlockEncoder::new(codec)
            .map_err(|source| SpillError::Encode { path: path.clone(), source })?;
        Ok(SpillWriter {
            file,
            path: RemoveOnDrop(path),
            buf: Vec::with_capacity(SPILL_WRITE_BYTES * 2),
            offset: 0,
            index: Vec::new(),
            encoder,
            stats: SpillStats::default(),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path.0
    }

    /// Starts a new run and returns its number.
    pub fn new_run(&mut self) -> usize {
        self.index.push(Vec::new());
        self.index.len() - 1
    }

    /// Appends `batch` as one block of run `run` (created if needed).
    pub fn append(&mut self, run: usize, batch: BatchView<'_>) -> Result<(), SpillError> {
        if batch.is_empty() {
            return Ok(());
        }
        if self.index.len() <= run {
            self.index.resize_with(run + 1, Vec::new);
        }
        let start = self.buf.len();
        let header = self
            .encoder
            .encode_view(batch, &mut self.buf)
            .map_err(|source| SpillError::Encode { path: self.path.0.clone(), source })?;
        let frame_len = self.buf.len() - start;
        self.index[run].push(BlockLoc {
            offset: self.offset + start as u64,
            frame_len: frame_len as u32,
            records: header.record_count,
            layout: header.layout,
        });
        self.stats.blocks += 1;
        self.stats.records += u64::from(header.record_count);
        if self.buf.len() >= SPILL_WRITE_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), SpillError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.file.write_all(&self.buf).map_err(|source| SpillError::Io {
            path: self.path.0.clone(),
            op: "write",
            source,
        })?;
        self.offset += self.buf.len() as u64;
        self.stats.bytes_written += self.buf.len() as u64;
        self.stats.writes += 1;
        self.buf.clear();
        Ok(())
    }

    /// Writes what is buffered and returns the readable file.
    /// (Shared: each run reader holds the file open and alive.)
    pub fn finish(mut self) -> Result<Arc<SpillFile>, SpillError> {
        self.flush()?;
        let SpillWriter { file, path, index, stats, .. } = self;
        Ok(Arc::new(SpillFile { file, path, index, stats }))
    }
}

/// A finished spill file: its runs can be read back any number of times.
#[derive(Debug)]
pub struct SpillFile {
    file: File,
    path: RemoveOnDrop,
    index: Vec<Vec<BlockLoc>>,
    stats: SpillStats,
}

impl SpillFile {
    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path.0
    }

    /// Number of runs.
    pub fn runs(&self) -> usize {
        self.index.len()
    }

    /// What writing the file did.
    pub fn stats(&self) -> SpillStats {
        self.stats
    }

    /// Block offsets of run `run`, in order (for tests and tools).
    pub fn block_offsets(&self, run: usize) -> Vec<u64> {
        self.index.get(run).map_or_else(Vec::new, |b| b.iter().map(|l| l.offset).collect())
    }

    /// A reader of run `run`'s blocks; it keeps the file alive.
    pub fn run(self: &Arc<Self>, run: usize) -> Result<SpillRunReader, SpillError> {
        self.run_from(run, 0)
    }

    /// A reader of run `run`'s blocks from block `first` on (for a consumer
    /// that reads one block per call).
    pub fn run_from(
        self: &Arc<Self>,
        run: usize,
        first: usize,
    ) -> Result<SpillRunReader, SpillError> {
        if run >= self.index.len() {
            return Err(SpillError::NoSuchRun {
                path: self.path.0.clone(),
                run,
                runs: self.index.len(),
            });
        }
        Ok(SpillRunReader {
            file: Arc::clone(self),
            run,
            next: first,
            frame: Vec::new(),
            decoder: BlockDecoder::new(),
        })
    }
}

/// Reads one run's blocks in order, verifying each.
#[derive(Debug)]
pub struct SpillRunReader {
    file: Arc<SpillFile>,
    run: usize,
    next: usize,
    frame: Vec<u8>,
    decoder: BlockDecoder,
}

impl SpillRunReader {
    /// The next block's records, or `None` after the last.
    pub fn next_batch(&mut self) -> Result<Option<BatchView<'_>>, SpillError> {
        let Some(loc) = self.file.index[self.run].get(self.next).copied() else { return Ok(None) };
        self.next += 1;
        let path = &self.file.path.0;
        let corrupt =
            |source| SpillError::Corrupt { path: path.clone(), offset: loc.offset, source };
        self.frame.clear();
        self.frame.resize(loc.frame_len as usize, 0);
        self.file.file.read_exact_at(&mut self.frame, loc.offset).map_err(|source| {
            if source.kind() == std::io::ErrorKind::UnexpectedEof {
                corrupt(crate::format::FormatError::Truncated {
                    needed: loc.frame_len as usize,
                    available: 0,
                })
            } else {
                SpillError::Io { path: path.clone(), op: "read", source }
            }
        })?;
        // The frame length comes from our own index; the header must agree.
        let header = BlockHeader::parse(&self.frame).map_err(corrupt)?;
        if header.frame_len() != loc.frame_len as usize || self.frame.len() < HEADER_BYTES {
            return Err(corrupt(crate::format::FormatError::Truncated {
                needed: header.frame_len(),
                available: loc.frame_len as usize,
            }));
        }
        let block = self.decoder.decode(&self.frame).map_err(corrupt)?;
        if block.header.record_count != loc.records || block.header.layout != loc.layout {
            return Err(SpillError::IndexMismatch {
                path: path.clone(),
                offset: loc.offset,
                expected: loc.records,
                found: block.header.record_count,
                expected_layout: loc.layout,
                found_layout: block.header.layout,
            });
        }
        Ok(Some(block.records))
    }
}
