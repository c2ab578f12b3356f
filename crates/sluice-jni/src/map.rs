//! The map side of a host-partitioned shuffle: check a buffer the JVM
//! filled, and write a finished attempt's output in Spark's layout.
//!
//! # Buffers
//! A map task serializes records into a direct `ByteBuffer` in the engine's
//! variable-length layout (`klen:u32le vlen:u32le key value`, key = the
//! partition id as u32 LE; an offloaded operator's shuffle appends the host's
//! key bytes to it, see `ops`). Nothing the JVM wrote is trusted: the
//! payload is validated as `count` records (every length in bounds) and
//! every key must start with a partition id below the shuffle's count
//! (and be exactly that id unless the shuffle carries host keys) before
//! the bytes enter the engine.
//!
//! # Output file
//! Spark's sort-shuffle layout: one data file with the partitions' segments
//! back to back in partition order, and an index of offsets that Spark's
//! `IndexShuffleBlockResolver` writes from the lengths returned here. Inside
//! a segment the bytes are Sluice blocks (36-byte header, lz4 or zstd,
//! CRC32C). Small batches of a partition are coalesced into blocks of
//! about [`BLOCK_TARGET_BYTES`] before encoding, batches of at least
//! [`DIRECT_BLOCK_MIN_BYTES`] are encoded as they are, and the file is
//! written in sequential chunks of at least [`WRITE_CHUNK_BYTES`].
//!
//! # Spills
//! When the host's memory manager refuses a map task more memory, the
//! output emitted so far is written to a spill file in the same layout
//! ([`Spilled`]) and freed. The data file is then, per partition, that
//! partition's segment of each spill file in spill order (copied as bytes:
//! Sluice blocks are self-contained, so segments concatenate), followed by
//! the blocks of what is still in memory. Spill files are removed when the
//! attempt ends, committed or not.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sluice_core::format::{BatchView, BlockEncoder, Codec, Layout, RecordBatch};

use crate::error::{BridgeError, BridgeResult};
use crate::partitioner::{key_partition, PARTITION_KEY_BYTES};

/// Uncompressed bytes a block of the output file holds at most, unless a
/// single batch is larger (1 MiB).
pub const BLOCK_TARGET_BYTES: usize = 1 << 20;

/// Bytes buffered before a write to the output file (1 MiB).
pub const WRITE_CHUNK_BYTES: usize = 1 << 20;

/// A batch of at least this many bytes (32 KiB) is encoded as a block of
/// its own, not first copied together with its neighbours: lz4's window is
/// 64 KiB, so a bigger block would hardly compress better (Spark's own lz4
/// blocks are 32 KiB), and the copy is saved. An engine shuffle with up to
/// 64 partitions hands over full 64 KiB pages (see
/// `sluice_engine::page_bytes_for`).
pub const DIRECT_BLOCK_MIN_BYTES: usize = 32 << 10;

/// Validates a JVM-filled buffer: `count` records in the variable layout,
/// each keyed by a partition id below `partitions`, followed by the host's
/// key bytes if `host_keys` (an operator shuffle) and by nothing otherwise.
pub fn check_buffer(
    data: &[u8],
    count: u32,
    partitions: u32,
    host_keys: bool,
) -> BridgeResult<BatchView<'_>> {
    let view = BatchView::new(Layout::Variable, count, data)
        .map_err(|source| BridgeError::Corrupt { what: "a map task's buffer".into(), source })?;
    for (i, r) in view.iter().enumerate() {
        let key_ok = if host_keys {
            r.key.len() >= PARTITION_KEY_BYTES
        } else {
            r.key.len() == PARTITION_KEY_BYTES
        };
        if !key_ok {
            return Err(BridgeError::Argument(format!(
                "record {i} of a map buffer has a {}-byte key; the partition id takes {PARTITION_KEY_BYTES}",
                r.key.len()
            )));
        }
        let p = key_partition(r.key);
        if p >= partitions {
            return Err(BridgeError::Argument(format!(
                "record {i} of a map buffer names partition {p}; the shuffle has {partitions}"
            )));
        }
    }
    Ok(view)
}

/// Part of a map attempt's output written to a spill file in the data
/// file's layout; the file is removed when this is dropped.
#[derive(Debug)]
pub struct Spilled {
    path: PathBuf,
    /// Bytes of each partition's segment, in partition order.
    lengths: Vec<u64>,
}

impl Spilled {
    /// Writes `per_partition` to `path` as a spill of `partitions`
    /// partitions.
    pub fn write(
        path: &Path,
        per_partition: &[Vec<Vec<RecordBatch>>],
        partitions: usize,
        codec: Codec,
    ) -> BridgeResult<Spilled> {
        let lengths = write_output(path, per_partition, partitions, codec, &[])?;
        Ok(Spilled { path: path.to_owned(), lengths })
    }

    /// Bytes in the spill file.
    pub fn bytes(&self) -> u64 {
        self.lengths.iter().sum()
    }
}

impl Drop for Spilled {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Writes one attempt's output to `path` (created or truncated): for each
/// partition in order, its segments of the `spilled` files, then its
/// batches as Sluice blocks. Returns the bytes of each partition's
/// segment. On error the file is removed.
pub fn write_output(
    path: &Path,
    per_partition: &[Vec<Vec<RecordBatch>>],
    partitions: usize,
    codec: Codec,
    spilled: &[Spilled],
) -> BridgeResult<Vec<u64>> {
    let result = File::create(path)
        .map_err(|source| BridgeError::Io { path: path.to_owned(), source })
        .and_then(|mut file| {
            write_segments(&mut file, path, per_partition, partitions, codec, spilled)
        });
    if result.is_err() {
        let _ = std::fs::remove_file(path);
    }
    result
}

/// A spill file being read back in partition order.
struct SpillReader<'a> {
    spilled: &'a Spilled,
    file: File,
}

impl SpillReader<'_> {
    /// Appends partition `p`'s segment (the next one in the file) to `out`.
    fn copy_segment(&mut self, p: usize, out: &mut Vec<u8>) -> BridgeResult<u64> {
        let len = self.spilled.lengths.get(p).copied().unwrap_or(0);
        let start = out.len();
        let n = usize::try_from(len).map_err(|_| {
            BridgeError::Argument(format!("spill segment of {len} bytes is too large"))
        })?;
        out.resize(start + n, 0);
        self.file
            .read_exact(&mut out[start..])
            .map_err(|source| BridgeError::Io { path: self.spilled.path.clone(), source })?;
        Ok(len)
    }
}

fn write_segments(
    file: &mut File,
    path: &Path,
    per_partition: &[Vec<Vec<RecordBatch>>],
    partitions: usize,
    codec: Codec,
    spilled: &[Spilled],
) -> BridgeResult<Vec<u64>> {
    let io = |source| BridgeError::Io { path: path.to_owned(), source };
    let mut readers = spilled
        .iter()
        .map(|s| {
            if s.lengths.len() != partitions {
                return Err(BridgeError::Argument(format!(
                    "spill {} has {} partitions, the output {partitions}",
                    s.path.display(),
                    s.lengths.len()
                )));
            }
            File::open(&s.path)
                .map(|file| SpillReader { spilled: s, file })
                .map_err(|source| BridgeError::Io { path: s.path.clone(), source })
        })
        .collect::<BridgeResult<Vec<_>>>()?;
    let mut encoder = BlockEncoder::new(codec).map_err(BridgeError::Encode)?;
    let mut out = Vec::with_capacity(WRITE_CHUNK_BYTES + BLOCK_TARGET_BYTES);
    let mut block = RecordBatch::with_capacity(Layout::Variable, BLOCK_TARGET_BYTES);
    let mut lengths = vec![0u64; partitions];
    let no_runs = Vec::new();
    for (p, length) in lengths.iter_mut().enumerate() {
        for r in &mut readers {
            *length += r.copy_segment(p, &mut out)?;
            if out.len() >= WRITE_CHUNK_BYTES {
                file.write_all(&out).map_err(io)?;
                out.clear();
            }
        }
        let runs = per_partition.get(p).unwrap_or(&no_runs);
        for batch in runs.iter().flatten() {
            let direct = batch.payload_len() >= DIRECT_BLOCK_MIN_BYTES;
            if !block.is_empty()
                && (direct || block.payload_len() + batch.payload_len() > BLOCK_TARGET_BYTES)
            {
                *length += encode(&mut encoder, &block, &mut out)?;
                block.clear();
            }
            if direct {
                *length += encode(&mut encoder, batch, &mut out)?;
            } else {
                block.extend_view(&batch.view()).map_err(BridgeError::Encode)?;
            }
            if out.len() >= WRITE_CHUNK_BYTES {
                file.write_all(&out).map_err(io)?;
                out.clear();
            }
        }
        if !block.is_empty() {
            *length += encode(&mut encoder, &block, &mut out)?;
            block.clear();
        }
    }
    file.write_all(&out).map_err(io)?;
    Ok(lengths)
}

fn encode(encoder: &mut BlockEncoder, batch: &RecordBatch, out: &mut Vec<u8>) -> BridgeResult<u64> {
    let before = out.len();
    encoder.encode(batch, out).map_err(BridgeError::Encode)?;
    Ok((out.len() - before) as u64)
}
