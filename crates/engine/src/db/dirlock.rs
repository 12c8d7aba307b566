//! The lock of a database directory: one writer, or any number of readers.
//!
//! `DIR/flashlab.lock` is locked with the operating system's advisory file
//! lock (`flock`, through std's `File::try_lock`): exclusively by a process
//! that opens the database for writing (and by one that creates it), shared
//! by `flashlab check` and `flashlab query`, which only read. The lock is
//! held for as long as the database is open and is released by the
//! operating system when the process ends, however it ends, so a killed
//! process never leaves a stale lock. A writer writes its pid into the
//! file, so that a refused opener can name the holder.
//!
//! Locks are never waited for: a second opener is refused at once with a
//! one-line error naming the directory and the holder.
//!
//! Invariant DIR-1: while a process holds the exclusive lock no other
//! process has the database open, for writing or reading.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The lock file's name, inside the database directory.
pub const LOCK_FILE: &str = "flashlab.lock";
/// Most bytes of the lock file read to find the holder's pid.
const LOCK_FILE_BYTES_MAX: u64 = 64;

/// A held lock on a database directory; released on drop.
#[derive(Debug)]
pub struct DirLock {
    file: File,
    path: PathBuf,
    exclusive: bool,
}

impl DirLock {
    /// Lock `dir` for writing, creating the lock file if needed, and record
    /// this process's pid in it.
    pub fn exclusive(dir: &Path) -> Result<DirLock> {
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io(&path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(busy(dir, &mut file, true)),
            Err(TryLockError::Error(e)) => return Err(io(&path, e)),
        }
        write_pid(&mut file).map_err(|e| io(&path, e))?;
        Ok(DirLock {
            file,
            path,
            exclusive: true,
        })
    }

    /// Lock `dir` for reading. `Ok(None)` when the directory has no lock
    /// file (a database no writer of this version has opened): there is
    /// nothing to lock, and a read-only open creates nothing.
    pub fn shared(dir: &Path) -> Result<Option<DirLock>> {
        let path = dir.join(LOCK_FILE);
        let mut file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&path, e)),
        };
        match file.try_lock_shared() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(busy(dir, &mut file, false)),
            Err(TryLockError::Error(e)) => return Err(io(&path, e)),
        }
        Ok(Some(DirLock {
            file,
            path,
            exclusive: false,
        }))
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this is the writer's lock.
    pub fn is_exclusive(&self) -> bool {
        self.exclusive
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

fn write_pid(file: &mut File) -> std::io::Result<()> {
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(format!("{}\n", std::process::id()).as_bytes())?;
    file.sync_data()
}

/// The pid a writer recorded, if the file holds one.
fn holder_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.take(LOCK_FILE_BYTES_MAX)
        .read_to_string(&mut text)
        .ok()?;
    text.trim().parse().ok()
}

/// The error for a directory someone else holds. A writer that is refused
/// learns whether readers or a writer hold it: if a shared lock can be had,
/// only readers do.
fn busy(dir: &Path, file: &mut File, wanted_exclusive: bool) -> Error {
    let readers_only = wanted_exclusive && file.try_lock_shared().is_ok();
    if readers_only {
        let _ = file.unlock();
        return Error::Locked(format!(
            "{}: in use by a reader (flashlab check or query); try again when it ends",
            dir.display()
        ));
    }
    let holder = match holder_pid(file) {
        Some(pid) => format!("process {pid}"),
        None => "another process".to_string(),
    };
    let what = if wanted_exclusive {
        "only one process may open a database for writing"
    } else {
        "check and query read a database only while no process writes it"
    };
    Error::Locked(format!(
        "{}: open for writing by {holder} ({LOCK_FILE}); {what}",
        dir.display()
    ))
}

fn io(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_is_refused_and_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let held = DirLock::exclusive(dir.path()).unwrap();
        let err = DirLock::exclusive(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains(&format!("process {}", std::process::id())),
            "{err}"
        );
        assert!(err.contains(&dir.path().display().to_string()), "{err}");
        let err = DirLock::shared(dir.path()).unwrap_err().to_string();
        assert!(err.contains("open for writing"), "{err}");
        drop(held);
        DirLock::exclusive(dir.path()).unwrap();
    }

    #[test]
    fn readers_share_and_keep_writers_out() {
        let dir = tempfile::tempdir().unwrap();
        assert!(DirLock::shared(dir.path()).unwrap().is_none());
        drop(DirLock::exclusive(dir.path()).unwrap());
        let a = DirLock::shared(dir.path()).unwrap().unwrap();
        let b = DirLock::shared(dir.path()).unwrap().unwrap();
        let err = DirLock::exclusive(dir.path()).unwrap_err().to_string();
        assert!(err.contains("in use by a reader"), "{err}");
        drop((a, b));
        DirLock::exclusive(dir.path()).unwrap();
    }
}
