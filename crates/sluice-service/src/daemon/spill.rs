//! Where a daemon's bytes live: in memory, or in a spill file. A spill
//! writes every in-memory block of one owner (a reduce partition, or a map
//! attempt's staged chunks) in one sequential write at the end of the
//! owner's file, keeping each block's offset, length and CRC32C; a block
//! read from disk is checked against its CRC. A file is deleted when the
//! last block naming it is dropped (its shuffle unregistered, its
//! application ended or lapsed), so a read in progress keeps it open.
//!
//! A daemon holds an exclusive lock on [`LOCK_FILE`] in each directory while
//! it runs (released by the kernel however the process ends), so two daemons
//! never share one; having it, the daemon removes the spill files a killed
//! predecessor left there (its index of them died with it, so nothing could
//! ever read them) before it serves anything.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_core::format::checksum::crc32c;

use super::store::Refusal;
use crate::protocol::ErrorCode;

/// The largest write a spill gathers blocks into, in bytes: the memory a
/// spill needs beside the blocks it frees.
pub const SPILL_WRITE_BYTES: usize = 1 << 20;

/// The file in each directory a running daemon holds locked.
pub(crate) const LOCK_FILE: &str = ".sluice-daemon.lock";

/// A directory's lock, released when dropped.
///
/// The lock belongs to the open file, which a child process forked by
/// another thread shares until it executes its program (the descriptor is
/// close-on-exec, not close-on-fork): closing our descriptor alone would
/// leave the directory locked for that moment, and a daemon started right
/// after this one stopped would find it in use. Unlocking explicitly
/// releases it for every holder of the open file.
#[derive(Debug)]
pub(crate) struct DirLock(File);

impl Drop for DirLock {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.0, rustix::fs::FlockOperation::Unlock);
    }
}

/// Takes `dir`'s lock, held until the returned lock is dropped.
pub(crate) fn lock_dir(dir: &Path) -> Result<DirLock, String> {
    let path = dir.join(LOCK_FILE);
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(DirLock(file)),
        Err(rustix::io::Errno::WOULDBLOCK) => {
            Err("another daemon is using it (its lock file is held)".into())
        }
        Err(e) => Err(format!("cannot lock {}: {e}", path.display())),
    }
}

/// Whether `name` is an application's directory: 16 lowercase hex digits.
fn is_app_dir(name: &str) -> bool {
    name.len() == 16 && name.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Whether `name` is a spill file's (`s3-g7-p12-0.data`, `s3-g7-m1-a9-0.staged`).
fn is_spill_file(name: &str) -> bool {
    name.starts_with('s') && (name.ends_with(".data") || name.ends_with(".staged"))
}

/// Whether `name` is a reduced read's spill directory (`r12`).
fn is_reduce_dir(name: &str) -> bool {
    name.strip_prefix(super::store::REDUCE_DIR_PREFIX)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Removes the plain files directly in `dir`; the files and bytes removed.
fn remove_files(dir: &Path) -> (u64, u64) {
    let (mut files, mut bytes) = (0, 0);
    let Ok(entries) = std::fs::read_dir(dir) else { return (0, 0) };
    for f in entries.flatten() {
        if f.file_type().is_ok_and(|t| t.is_file()) {
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            if std::fs::remove_file(f.path()).is_ok() {
                files += 1;
                bytes += len;
            }
        }
    }
    (files, bytes)
}

/// Removes the spill files under `dir`'s application directories (and those
/// directories once empty); the files and bytes removed. Only for a
/// directory whose lock this daemon holds. Nothing else is touched but
/// reduced reads' spill directories (`r<n>/`) and the files in them.
pub(crate) fn remove_stale(dir: &Path) -> (u64, u64) {
    let (mut files, mut bytes) = (0, 0);
    let Ok(apps) = std::fs::read_dir(dir) else { return (0, 0) };
    for app in apps.flatten() {
        let name = app.file_name();
        if !name.to_str().is_some_and(is_app_dir) || !app.path().is_dir() {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(app.path()) else { continue };
        for f in entries.flatten() {
            let is_dir = f.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && f.file_name().to_str().is_some_and(is_reduce_dir) {
                // A reduced read's spills (`r<n>/`): its files, then it.
                let (n, b) = remove_files(&f.path());
                files += n;
                bytes += b;
                let _ = std::fs::remove_dir(f.path());
                continue;
            }
            let is_file = f.file_type().is_ok_and(|t| t.is_file());
            if is_file && f.file_name().to_str().is_some_and(is_spill_file) {
                let len = f.metadata().map(|m| m.len()).unwrap_or(0);
                if std::fs::remove_file(f.path()).is_ok() {
                    files += 1;
                    bytes += len;
                }
            }
        }
        let _ = std::fs::remove_dir(app.path());
    }
    (files, bytes)
}

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

impl Appender {
    /// The file it appends to.
    pub(crate) fn into_file(self) -> Arc<SpillFile> {
        self.file
    }
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

    /// Bytes this block takes to read back from disk.
    pub(crate) fn disk_bytes(&self) -> u32 {
        match self {
            Loc::Mem(_) => 0,
            Loc::Disk { len, .. } => *len,
        }
    }

    /// The block's bytes; from disk, checked against the CRC32C kept when
    /// it was written.
    pub(crate) fn fetch(&self) -> Result<Arc<Vec<u8>>, Refusal> {
        match self {
            Loc::Mem(b) => Ok(Arc::clone(b)),
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
                Ok(Arc::new(buf))
            }
        }
    }
}

/// Mode of the files an application's data is written to: the pushed
/// records of every application are readable by the daemon's user only,
/// whatever the umask (as the engine's own spill files).
const PRIVATE_FILE_MODE: u32 = 0o600;

/// Mode of the directories holding them.
const PRIVATE_DIR_MODE: u32 = 0o700;

/// Creates `dir` and any parent missing, each created one of mode
/// [`PRIVATE_DIR_MODE`].
pub(crate) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, PRIVATE_DIR_MODE);
    builder.create(dir)
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
            create_private_dir(dir).map_err(|e| storage(dir, e))?;
        }
        let mut options = File::options();
        options.create(true).truncate(true).read(true).write(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, PRIVATE_FILE_MODE);
        let file = options.open(&path).map_err(|e| storage(&path, e))?;
        *appender = Some(Appender { file: Arc::new(SpillFile { path, file }), len: 0 });
    }
    let Some(a) = appender.as_mut() else { return Ok(0) };
    // Blocks are gathered into writes of at most SPILL_WRITE_BYTES (a
    // larger block is written from where it lies), so a spill needs at
    // most that much memory beside the blocks it frees.
    let mut buf = Vec::with_capacity(SPILL_WRITE_BYTES);
    let mut end = a.len;
    let mut placed: Vec<(&'a mut Loc, u64, u32, u32)> = Vec::new();
    // Writes what is gathered, which ends at `end`.
    let write = |buf: &mut Vec<u8>, end: u64| -> Result<(), Refusal> {
        let at = end - buf.len() as u64;
        a.file.file.write_all_at(buf, at).map_err(|e| storage(&a.file.path, e))?;
        buf.clear();
        Ok(())
    };
    for loc in blocks {
        if let Loc::Mem(d) = &*loc {
            let (offset, len, crc) = (end, d.len() as u32, crc32c(d));
            if buf.len() + d.len() > SPILL_WRITE_BYTES {
                write(&mut buf, end)?;
            }
            if d.len() > SPILL_WRITE_BYTES {
                a.file.file.write_all_at(d, end).map_err(|e| storage(&a.file.path, e))?;
            } else {
                buf.extend_from_slice(d);
            }
            end += d.len() as u64;
            placed.push((loc, offset, len, crc));
        }
    }
    write(&mut buf, end)?;
    // Only now, every write done: a write a full disk cut short is
    // overwritten by the next spill rather than left between blocks.
    let written = end - a.len;
    a.len = end;
    for (loc, offset, len, crc) in placed {
        *loc = Loc::Disk { file: a.file.clone(), offset, len, crc };
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_of_every_size_spill_in_bounded_writes_and_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sizes = [10, SPILL_WRITE_BYTES - 5, 7, SPILL_WRITE_BYTES + 3, 1, 3 * SPILL_WRITE_BYTES];
        let make = |i: usize, n: usize| (0..n).map(|j| (i * 31 + j) as u8).collect::<Vec<u8>>();
        let mut locs: Vec<Loc> =
            sizes.iter().enumerate().map(|(i, &n)| Loc::Mem(Arc::new(make(i, n)))).collect();
        let mut appender = None;
        // Two spills into one file: the second appends after the first.
        let (first, second) = locs.split_at_mut(3);
        let path = dir.path().join("app").join("s0-g0-p0-0.data");
        let a = spill(&mut appender, || path.clone(), first.iter_mut()).expect("spill");
        let b = spill(&mut appender, || unreachable!(), second.iter_mut()).expect("spill");
        assert_eq!((a + b) as usize, sizes.iter().sum::<usize>());
        assert_eq!(std::fs::metadata(&path).expect("file").len(), a + b);
        for (i, loc) in locs.iter().enumerate() {
            assert_eq!(loc.mem_bytes(), 0, "block {i} left in memory");
            assert_eq!(*loc.fetch().expect("read back"), make(i, sizes[i]), "block {i}");
        }
    }
}
