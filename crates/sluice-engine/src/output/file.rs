//! A map attempt's output file in Spark's layout, and its spill files.
//!
//! # Layout
//! Spark's sort-shuffle layout: one data file with the partitions'
//! segments back to back in partition order, and an index of offsets that
//! Spark's `IndexShuffleBlockResolver` writes from the lengths returned
//! here. Inside a segment the bytes are Sluice blocks (36-byte header, lz4
//! or zstd, CRC32C) and, ending every non-empty segment, a trailer that
//! counts them ([`crate::output::trailer`]). Small batches of a partition are
//! coalesced into blocks of about [`BLOCK_TARGET_BYTES`] before encoding,
//! batches of at least [`DIRECT_BLOCK_MIN_BYTES`] are encoded as they are,
//! and the file is written in sequential chunks of at least
//! [`WRITE_CHUNK_BYTES`]. With a checksum algorithm, each partition's
//! segment (trailer included) is checksummed as it is written, for Spark's
//! checksum file ([`crate::output::checksum`]).
//!
//! # Spills
//! When the host's memory manager refuses a map task more memory, the
//! output emitted so far is written to a spill file in the same layout,
//! without trailers ([`Spilled`]), and freed. The data file is then, per
//! partition, that partition's segment of each spill file in spill order
//! (copied as bytes in pieces of at most [`WRITE_CHUNK_BYTES`]: Sluice
//! blocks are self-contained, so segments concatenate), followed by the
//! blocks of what is still in memory and the trailer, which counts the
//! spilled blocks too. Spill files are removed when the attempt ends,
//! committed or not.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::IntoRawFd;
use std::path::{Path, PathBuf};

use sluice_core::format::checksum::Crc32c;
use sluice_core::format::{BlockEncoder, Codec, Layout, RecordBatch};

use crate::error::{EngineError, EngineResult};
use crate::output::checksum::{Algorithm, Running};
use crate::output::trailer::SegmentTrailer;

/// Uncompressed bytes a block of the output file holds at most, unless a
/// single batch is larger (1 MiB).
pub const BLOCK_TARGET_BYTES: usize = 1 << 20;

/// Bytes buffered before a write to the output file (1 MiB); also the
/// largest piece of a spill file read back at once.
pub const WRITE_CHUNK_BYTES: usize = 1 << 20;

/// A batch of at least this many bytes (32 KiB) is encoded as a block of
/// its own, not first copied together with its neighbours: lz4's window is
/// 64 KiB, so a bigger block would hardly compress better (Spark's own lz4
/// blocks are 32 KiB), and the copy is saved. An engine shuffle with up to
/// 64 partitions hands over full 64 KiB pages (see
/// `sluice_engine::page_bytes_for`).
pub const DIRECT_BLOCK_MIN_BYTES: usize = 32 << 10;

/// What a written file holds, per partition in partition order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    /// Bytes of each partition's segment.
    pub lengths: Vec<u64>,
    /// Spark's checksum of each partition's segment (empty without one).
    pub checksums: Vec<u64>,
    /// Records in each partition's segment.
    pub records: Vec<u64>,
    /// Blocks in each partition's segment (the trailer not counted).
    pub blocks: Vec<u32>,
}

/// How a file is written.
#[derive(Debug, Clone, Copy)]
pub struct OutputOptions {
    /// The blocks' codec.
    pub codec: Codec,
    /// Spark's checksum of each segment, if any.
    pub checksum: Option<Algorithm>,
    /// End each non-empty segment with its trailer (the data file: yes; a
    /// spill file, whose segments are copied into the data file's: no).
    pub trailers: bool,
}

/// Part of a map attempt's output written to a spill file in the data
/// file's layout; the file is removed when this is dropped.
#[derive(Debug)]
pub struct Spilled {
    path: PathBuf,
    written: Written,
}

impl Spilled {
    /// Writes `per_partition` to `path` as a spill of `partitions`
    /// partitions.
    pub fn write(
        path: &Path,
        per_partition: &[Vec<Vec<RecordBatch>>],
        partitions: usize,
        codec: Codec,
    ) -> EngineResult<Spilled> {
        let options = OutputOptions { codec, checksum: None, trailers: false };
        let written = write_output(path, per_partition, partitions, options, &[])?;
        Ok(Spilled { path: path.to_owned(), written })
    }

    /// Bytes of each partition's segment in the spill file, in partition
    /// order (the data file starts each partition with these, byte for
    /// byte, in spill order).
    pub fn lengths(&self) -> &[u64] {
        &self.written.lengths
    }
}

impl Drop for Spilled {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Writes one attempt's output to `path` (created or truncated): for each
/// partition in order, its segments of the `spilled` files, then its
/// batches as Sluice blocks, then (with trailers) its trailer. Returns
/// what each partition's segment holds. On error the file is removed.
pub fn write_output(
    path: &Path,
    per_partition: &[Vec<Vec<RecordBatch>>],
    partitions: usize,
    options: OutputOptions,
    spilled: &[Spilled],
) -> EngineResult<Written> {
    let result = File::create(path)
        .map_err(|source| EngineError::Io { path: path.to_owned(), source })
        .and_then(|file| {
            let mut out = SegmentWriter::new(file, path, options);
            write_segments(&mut out, per_partition, partitions, options.codec, spilled)?;
            out.finish()
        });
    if result.is_err() {
        let _ = std::fs::remove_file(path);
    }
    result
}

fn write_segments(
    out: &mut SegmentWriter<'_>,
    per_partition: &[Vec<Vec<RecordBatch>>],
    partitions: usize,
    codec: Codec,
    spilled: &[Spilled],
) -> EngineResult<()> {
    let mut readers = spilled
        .iter()
        .map(|s| {
            if s.written.lengths.len() != partitions {
                return Err(EngineError::Argument(format!(
                    "spill {} has {} partitions, the output {partitions}",
                    s.path.display(),
                    s.written.lengths.len()
                )));
            }
            File::open(&s.path)
                .map(|file| (s, file))
                .map_err(|source| EngineError::Io { path: s.path.clone(), source })
        })
        .collect::<EngineResult<Vec<_>>>()?;
    let no_runs = Vec::new();
    let runs_of = |p: usize| per_partition.get(p).unwrap_or(&no_runs);
    let non_empty: Vec<bool> = (0..partitions)
        .map(|p| {
            spilled.iter().any(|s| s.written.lengths[p] > 0)
                || runs_of(p).iter().flatten().any(|b| !b.is_empty())
        })
        .collect();
    let mut encoder = BlockEncoder::new(codec).map_err(EngineError::Encode)?;
    let mut block = RecordBatch::with_capacity(Layout::Variable, BLOCK_TARGET_BYTES);
    for p in 0..partitions {
        out.start_partition();
        for (s, file) in &mut readers {
            out.copy_spilled(file, s, p)?;
        }
        for batch in runs_of(p).iter().flatten() {
            let direct = batch.payload_len() >= DIRECT_BLOCK_MIN_BYTES;
            if !block.is_empty()
                && (direct || block.payload_len() + batch.payload_len() > BLOCK_TARGET_BYTES)
            {
                out.encode(&mut encoder, &block)?;
                block.clear();
            }
            if direct {
                out.encode(&mut encoder, batch)?;
            } else {
                block.extend_view(&batch.view()).map_err(EngineError::Encode)?;
            }
        }
        if !block.is_empty() {
            out.encode(&mut encoder, &block)?;
            block.clear();
        }
        let next = (p + 1..partitions).find(|&q| non_empty[q]).unwrap_or(partitions);
        out.end_partition(p, next)?;
    }
    Ok(())
}

/// The file being written: bytes are buffered and written in chunks of at
/// least [`WRITE_CHUNK_BYTES`]; each partition's bytes, records and blocks
/// are counted and checksummed as they pass.
struct SegmentWriter<'p> {
    file: File,
    path: &'p Path,
    options: OutputOptions,
    buf: Vec<u8>,
    /// Bytes of `buf` already counted for the current partition.
    counted: usize,
    /// The current partition's Spark checksum, if any.
    spark_sum: Option<Running>,
    /// CRC32C of the current partition's blocks, for its trailer.
    blocks_crc: Crc32c,
    written: Written,
}

impl<'p> SegmentWriter<'p> {
    fn new(file: File, path: &'p Path, options: OutputOptions) -> Self {
        SegmentWriter {
            file,
            path,
            options,
            buf: Vec::with_capacity(2 * WRITE_CHUNK_BYTES + BLOCK_TARGET_BYTES),
            counted: 0,
            spark_sum: None,
            blocks_crc: Crc32c::new(),
            written: Written::default(),
        }
    }

    /// Starts the next partition's segment.
    fn start_partition(&mut self) {
        self.written.lengths.push(0);
        self.written.records.push(0);
        self.written.blocks.push(0);
        self.spark_sum = self.options.checksum.map(Running::new);
        self.blocks_crc = Crc32c::new();
    }

    /// Ends partition `p`'s segment: its trailer (if it is not empty and
    /// the file has trailers; `next` is the next non-empty partition) and
    /// its Spark checksum.
    fn end_partition(&mut self, p: usize, next: usize) -> EngineResult<()> {
        self.account();
        let i = self.written.lengths.len() - 1;
        if self.options.trailers && self.written.lengths[i] > 0 {
            let trailer = SegmentTrailer {
                partition: u32::try_from(p).map_err(|_| too_many(p))?,
                next_partition: u32::try_from(next).map_err(|_| too_many(next))?,
                records: self.written.records[i],
                blocks: self.written.blocks[i],
                crc: self.blocks_crc.value(),
            };
            self.buf.extend_from_slice(&trailer.to_bytes());
            self.account_bytes(false);
        }
        if let Some(r) = self.spark_sum.take() {
            self.written.checksums.push(r.value());
        }
        if self.buf.len() >= WRITE_CHUNK_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Counts block bytes appended to `buf` since the last call.
    fn account(&mut self) {
        self.account_bytes(true);
    }

    fn account_bytes(&mut self, blocks: bool) {
        let fresh = &self.buf[self.counted..];
        if let Some(len) = self.written.lengths.last_mut() {
            *len += fresh.len() as u64;
        }
        if let Some(r) = self.spark_sum.as_mut() {
            r.update(fresh);
        }
        if blocks {
            self.blocks_crc.update(fresh);
        }
        self.counted = self.buf.len();
    }

    /// Encodes `batch` as one block of the current partition.
    fn encode(&mut self, encoder: &mut BlockEncoder, batch: &RecordBatch) -> EngineResult<()> {
        if self.buf.len() >= WRITE_CHUNK_BYTES {
            self.flush()?;
        }
        encoder.encode(batch, &mut self.buf).map_err(EngineError::Encode)?;
        if let (Some(r), Some(b)) =
            (self.written.records.last_mut(), self.written.blocks.last_mut())
        {
            *r += batch.len() as u64;
            *b += 1;
        }
        Ok(())
    }

    /// Copies spill `s`'s segment of partition `p` (the next one in
    /// `from`) in pieces of at most [`WRITE_CHUNK_BYTES`], never the whole
    /// segment at once.
    fn copy_spilled(&mut self, from: &mut File, s: &Spilled, p: usize) -> EngineResult<()> {
        let mut left = s.written.lengths[p];
        while left > 0 {
            let piece = left.min(WRITE_CHUNK_BYTES as u64) as usize;
            let start = self.buf.len();
            self.buf.resize(start + piece, 0);
            from.read_exact(&mut self.buf[start..])
                .map_err(|source| EngineError::Io { path: s.path.clone(), source })?;
            left -= piece as u64;
            if self.buf.len() >= WRITE_CHUNK_BYTES {
                self.flush()?;
            }
        }
        if let (Some(r), Some(b)) =
            (self.written.records.last_mut(), self.written.blocks.last_mut())
        {
            *r += s.written.records[p];
            *b += s.written.blocks[p];
        }
        Ok(())
    }

    fn flush(&mut self) -> EngineResult<()> {
        self.account();
        self.file
            .write_all(&self.buf)
            .map_err(|source| EngineError::Io { path: self.path.to_owned(), source })?;
        self.buf.clear();
        self.counted = 0;
        Ok(())
    }

    /// Writes what is still buffered, closes the file and returns the
    /// per-partition figures.
    fn finish(mut self) -> EngineResult<Written> {
        self.flush()?;
        close(self.file, self.path)?;
        Ok(self.written)
    }
}

/// Closes `file`, reporting what `File`'s drop would ignore: a write the
/// kernel deferred and that failed only now (a network filesystem, a
/// quota), which would otherwise surface only as a corrupt block when a
/// reduce task reads the file. An interrupted close has closed the file
/// all the same (Linux), so it is not an error.
fn close(file: File, path: &Path) -> EngineResult<()> {
    let fd = file.into_raw_fd();
    // SAFETY: `fd` is an open descriptor that `into_raw_fd` took from the
    // `File`, which no longer owns it; it is closed here once and not used
    // after.
    let rc = unsafe { libc::close(fd) };
    if rc == 0 {
        return Ok(());
    }
    let source = std::io::Error::last_os_error();
    if source.kind() == std::io::ErrorKind::Interrupted {
        return Ok(());
    }
    Err(EngineError::Io { path: path.to_owned(), source })
}

fn too_many(p: usize) -> EngineError {
    EngineError::Argument(format!("partition {p} does not fit a u32"))
}
