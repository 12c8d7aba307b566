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

/// Bytes of chunks the process's scratch files hold now, and at most.
static HELD_BYTES: AtomicU64 = AtomicU64::new(0);
static PEAK_BYTES: AtomicU64 = AtomicU64::new(0);

/// A directory checked to be usable, with room for what a run declared.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
    /// Numbers the files this process creates here.
    next_file: AtomicU64,
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
        let dir = ScratchDir {
            path: path.to_path_buf(),
            next_file: AtomicU64::new(0),
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

    /// A new empty file, already unlinked: it disappears when closed.
    pub(crate) fn create_file(&self) -> io::Result<File> {
        let n = self.next_file.fetch_add(1, Ordering::Relaxed);
        let name = format!("{SCRATCH_FILE_PREFIX}{}-{n}", std::process::id());
        let path = self.path.join(name);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        std::fs::remove_file(&path)?;
        Ok(file)
    }
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
