//! The scratch directory where simulated devices keep their contents.
//!
//! A simulated device's bytes go to a sparse host file in this directory
//! rather than the heap, so the host memory a run needs follows its buffers
//! and models, not the size of its database. Each file is unlinked the
//! moment it is created: it lives exactly as long as the process holds it
//! open, so a run that ends any way at all, SIGINT and SIGKILL included,
//! leaves nothing behind.
//!
//! Which directory (if any) the stores made from now on use is a process
//! setting ([`keep_contents_in`]): the command line sets it from
//! `--sim-dir`; a library caller or a test that sets nothing keeps device
//! contents on the heap.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Prefix of every scratch file's (short-lived) name.
pub const SCRATCH_FILE_PREFIX: &str = ".flashlab-sim-";

/// The directory stores made from now on keep their contents in.
static CURRENT: Mutex<Option<Arc<ScratchDir>>> = Mutex::new(None);

/// The number the next scratch file's name carries, across every directory.
static NEXT_FILE: AtomicU64 = AtomicU64::new(0);

/// Taken names a new scratch file steps over before giving up.
pub(crate) const NAME_ATTEMPTS_MAX: u32 = 64;

/// Bytes of chunks the process's scratch files hold now, and at most.
static HELD_BYTES: AtomicU64 = AtomicU64::new(0);
static PEAK_BYTES: AtomicU64 = AtomicU64::new(0);

/// Bytes of chunks the stores of one directory keep on the heap before
/// new ones go to files, unless `--sim-memory` says otherwise: small runs
/// stay as fast as memory, large ones spill. 256 MB keeps a full
/// `reproduce`, two units at a time, under 2 GB.
pub const HEAP_BUDGET_BYTES_DEFAULT: u64 = 256 << 20;

/// A directory checked to be usable, with room for what a run declared.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
    /// Chunk bytes its stores may keep on the heap, and keep now.
    heap_budget_bytes: u64,
    heap_held_bytes: AtomicU64,
}

/// Why a scratch directory cannot be used: a one-line message.
#[derive(Debug, thiserror::Error)]
pub enum ScratchError {
    #[error("--sim-dir {path}: {source}")]
    Unusable {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "--sim-dir {path}: {} free, the run needs about {} for its simulated devices' contents",
        gb(*free_bytes),
        gb(*need_bytes)
    )]
    TooSmall {
        path: String,
        free_bytes: u64,
        need_bytes: u64,
    },
}

impl ScratchDir {
    /// `path`, if a file can be created in it and its file system has
    /// `need_bytes` free.
    pub fn open(path: &Path, need_bytes: u64) -> Result<Arc<ScratchDir>, ScratchError> {
        ScratchDir::with_heap_budget(path, need_bytes, HEAP_BUDGET_BYTES_DEFAULT)
    }

    /// [`ScratchDir::open`], its stores keeping at most `heap_budget_bytes`
    /// of chunks on the heap (0: every chunk in a file).
    pub fn with_heap_budget(
        path: &Path,
        need_bytes: u64,
        heap_budget_bytes: u64,
    ) -> Result<Arc<ScratchDir>, ScratchError> {
        let dir = ScratchDir {
            path: path.to_path_buf(),
            heap_budget_bytes,
            heap_held_bytes: AtomicU64::new(0),
        };
        let unusable = |source| ScratchError::Unusable {
            path: path.display().to_string(),
            source,
        };
        drop(dir.create_file().map_err(unusable)?);
        let free_bytes = free_bytes(path).map_err(unusable)?;
        if free_bytes < need_bytes {
            return Err(ScratchError::TooSmall {
                path: path.display().to_string(),
                free_bytes,
                need_bytes,
            });
        }
        Ok(Arc::new(dir))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn heap_budget_bytes(&self) -> u64 {
        self.heap_budget_bytes
    }

    /// Count `bytes` more on the heap if the budget has room (CHUNK-3).
    pub(crate) fn reserve_heap(&self, bytes: u64) -> bool {
        self.heap_held_bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                (held + bytes <= self.heap_budget_bytes).then_some(held + bytes)
            })
            .is_ok()
    }

    /// Count `bytes` fewer on the heap.
    pub(crate) fn release_heap(&self, bytes: u64) {
        self.heap_held_bytes.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// A new empty file, already unlinked: it disappears when closed.
    ///
    /// Names are numbered process-wide, so two directories opened on one
    /// path never collide; a name left by a dead process with the same id
    /// is stepped over, at most [`NAME_ATTEMPTS_MAX`] times.
    pub(crate) fn create_file(&self) -> io::Result<File> {
        let mut attempts = 0;
        loop {
            let n = NEXT_FILE.fetch_add(1, Ordering::Relaxed);
            let name = format!("{SCRATCH_FILE_PREFIX}{}-{n}", std::process::id());
            let path = self.path.join(name);
            let opened = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path);
            match opened {
                Ok(file) => {
                    std::fs::remove_file(&path)?;
                    return Ok(file);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    attempts += 1;
                    if attempts >= NAME_ATTEMPTS_MAX {
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// The number the next scratch file's name will carry.
#[cfg(test)]
pub(crate) fn peek_next_file_number() -> u64 {
    NEXT_FILE.load(Ordering::Relaxed)
}

/// Keep the contents of stores made from now on in `dir`, or on the heap
/// if `None`.
pub fn keep_contents_in(dir: Option<Arc<ScratchDir>>) {
    *CURRENT.lock().expect("scratch setting") = dir;
}

/// The directory stores made now keep their contents in.
pub(crate) fn current() -> Option<Arc<ScratchDir>> {
    CURRENT.lock().expect("scratch setting").clone()
}

/// `bytes` in decimal gigabytes, as a file system's tools print them.
fn gb(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

/// Count `bytes` more held in scratch files.
pub(crate) fn add_held(bytes: u64) {
    let now = HELD_BYTES.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK_BYTES.fetch_max(now, Ordering::Relaxed);
}

/// Count `bytes` fewer held in scratch files.
pub(crate) fn sub_held(bytes: u64) {
    HELD_BYTES.fetch_sub(bytes, Ordering::Relaxed);
}

/// Most bytes of chunks this process's scratch files held at once: the
/// disk space a run like this one needs.
pub fn peak_held_bytes() -> u64 {
    PEAK_BYTES.load(Ordering::Relaxed)
}

/// Bytes an unprivileged process may still write on `path`'s file system.
pub fn free_bytes(path: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is a valid NUL-terminated string and `stat` points
    // to writable memory of the struct's size; statvfs fills it on success.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it initialised the struct.
    let stat = unsafe { stat.assume_init() };
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}
