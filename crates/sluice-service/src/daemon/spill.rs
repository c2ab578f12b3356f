//! Where a daemon's bytes live: in memory, or in a spill file. A spill
//! writes every in-memory block of one owner (a reduce partition, or a map
//! attempt's staged chunks) in one sequential write at the end of the
//! owner's file, keeping each block's offset, length and CRC32C; a block
//! read from disk is checked against its CRC. A file is deleted when the
//! last block naming it is dropped (its shuffle unregistered, its
//! application ended or lapsed), so a read in progress keeps it open.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_core::format::checksum::crc32c;

use super::store::Refusal;
use crate::protocol::ErrorCode;

/// A spill file, deleted when dropped.
#[derive(Debug)]
pub(crate) struct SpillFile {
    pub(crate) path: PathBuf,
    file: File,
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// An owner's open spill file and its length so far.
#[derive(Debug)]
pub(crate) struct Appender {
    file: Arc<SpillFile>,
    len: u64,
}

/// Where a block's bytes are.
#[derive(Debug, Clone)]
pub(crate) enum Loc {
    Mem(Arc<Vec<u8>>),
    Disk { file: Arc<SpillFile>, offset: u64, len: u32, crc: u32 },
}

impl Loc {
    /// Bytes this block holds in memory.
    pub(crate) fn mem_bytes(&self) -> u64 {
        match self {
            Loc::Mem(d) => d.len() as u64,
            Loc::Disk { .. } => 0,
        }
    }

    /// The block's bytes; from disk, checked against the CRC32C kept when
    /// it was written.
    pub(crate) fn fetch(&self) -> Result<Vec<u8>, Refusal> {
        match self {
            Loc::Mem(b) => Ok(b.to_vec()),
            Loc::Disk { file, offset, len, crc } => {
                let mut buf = vec![0u8; *len as usize];
                file.file.read_exact_at(&mut buf, *offset).map_err(|e| {
                    (
                        ErrorCode::Storage,
                        format!("reading {} at offset {offset}: {e}", file.path.display()),
                    )
                })?;
                let actual = crc32c(&buf);
                if actual != *crc {
                    return Err((
                        ErrorCode::Corrupt,
                        format!(
                            "{} at offset {offset}, {len} bytes: CRC32C {actual:#010x}, \
                             stored {crc:#010x}",
                            file.path.display()
                        ),
                    ));
                }
                Ok(buf)
            }
        }
    }
}

fn storage(path: &Path, e: std::io::Error) -> Refusal {
    (ErrorCode::Storage, format!("spilling to {}: {e}", path.display()))
}

/// Writes every in-memory block among `blocks` to the owner's file (opened
/// at `path` on its first spill) in one write; the bytes freed. On a
/// failed write nothing changes: the blocks stay in memory.
pub(crate) fn spill<'a>(
    appender: &mut Option<Appender>,
    path: impl FnOnce() -> PathBuf,
    blocks: impl Iterator<Item = &'a mut Loc>,
) -> Result<u64, Refusal> {
    if appender.is_none() {
        let path = path();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| storage(dir, e))?;
        }
        let file = File::options()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| storage(&path, e))?;
        *appender = Some(Appender { file: Arc::new(SpillFile { path, file }), len: 0 });
    }
    let Some(a) = appender.as_mut() else { return Ok(0) };
    let mut buf = Vec::new();
    let mut placed: Vec<(&'a mut Loc, u64, u32, u32)> = Vec::new();
    for loc in blocks {
        if let Loc::Mem(d) = &*loc {
            let (offset, len, crc) = (a.len + buf.len() as u64, d.len() as u32, crc32c(d));
            buf.extend_from_slice(d);
            placed.push((loc, offset, len, crc));
        }
    }
    // At the file's recorded end, so a write a full disk cut short is
    // overwritten by the next spill rather than left between blocks.
    a.file.file.write_all_at(&buf, a.len).map_err(|e| storage(&a.file.path, e))?;
    a.len += buf.len() as u64;
    for (loc, offset, len, crc) in placed {
        *loc = Loc::Disk { file: a.file.clone(), offset, len, crc };
    }
    Ok(buf.len() as u64)
}
