//! A real file or block device.
//!
//! Reads and writes are positional (`pread`/`pwrite`), flush is
//! `fdatasync`, and trim punches a hole in a regular file. With
//! [`FileOptions::direct`] the file is opened with `O_DIRECT`, bypassing the
//! page cache the way lee2008 bound its log, rollback and temporary spaces
//! as raw devices; buffers are then bounced through memory aligned to
//! [`DIRECT_ALIGN_BYTES`]. Latencies are whatever the wall clock says; the
//! tracing layer measures them.
//!
//! The device never changes the file's length: its capacity is fixed when
//! it is created (`create`) or read from the existing file or block device
//! (`open`), and a request past it is an error, like any other device.
//!
//! Space on demand: `create` makes a sparse file of the capacity, and
//! blocks are allocated (`fallocate`) a chunk of [`GROWTH_CHUNK_BYTES`] at
//! a time, when the first write reaches the chunk: a short run uses only
//! what it writes, and writes (the log's forces among them) do not
//! allocate blocks one at a time. A file system that is full is a
//! [`DeviceError::Full`] naming the file, before the write is issued.
//!
//! Zeroing ahead (FILE-1, [`FileDevice::zero_ahead`], the log's files):
//! instead of being allocated, the holes of a chunk (and unwritten
//! extents, which `SEEK_DATA` reports as holes) are written with zeros by a
//! background thread, [`ZERO_AHEAD_CHUNKS`] chunk ahead of the writer once
//! it has passed the middle of its chunk, so
//! that writes overwrite written blocks and their fdatasync commits no
//! file-system metadata. Zeros in a hole change nothing a read returns, and
//! data is never touched. A chunk is written only once it is ready; a
//! writer that reaches a chunk the thread has not prepared prepares it
//! itself.
//!
//! The zeros go the way the device's writes go. Zeros written around the
//! page cache under a buffered writer would cost the thread almost no CPU,
//! but would leave the fresh blocks uncached, and a force's first buffered
//! write into a new 4 KB page would read it back from the device first
//! (measured: docs/PERFORMANCE-HISTORY.md, "Lock words, before-images,
//! extents and zeros").
//!
//! `O_DIRECT` at the file's sector (FILE-2, [`direct_at_file_sector`]):
//! where the file system states (`statx`, `STATX_DIOALIGN`) that it takes
//! `O_DIRECT` at 512-byte offsets, a device opened with it has the same
//! 512-byte sector as a buffered one, so whatever is laid out in sectors
//! reads the same in either mode. The database opens its log this way
//! where it can: a force then copies nothing into the page cache, and its
//! fdatasync finds no dirty pages, only the device's cache to flush.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::device::Device;
use crate::error::DeviceError;
use crate::model::{Geometry, IoKind};

/// Sector size the file device enforces (the raw-device sector of lee2008).
pub const FILE_SECTOR_BYTES: u32 = 512;
/// Alignment of O_DIRECT buffers, offsets and lengths (the logical block
/// size of nearly every modern device).
pub const DIRECT_ALIGN_BYTES: usize = 4096;

/// Blocks of a file device are allocated this many bytes at a time.
pub const GROWTH_CHUNK_BYTES: u64 = 64 << 20;

/// How to open a file device.
#[derive(Clone, Copy, Debug, Default)]
pub struct FileOptions {
    /// Bypass the page cache with O_DIRECT.
    pub direct: bool,
}

/// Chunks a zeroing-ahead device prepares beyond the one being written,
/// once a write has passed the middle of that one (FILE-1).
pub const ZERO_AHEAD_CHUNKS: usize = 1;
/// Bytes of zeros written (and pushed to the device) at a time.
const ZERO_PIECE_BYTES: usize = 1 << 20;

/// A chunk of a zeroing-ahead device (FILE-1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChunkState {
    /// Not looked at yet.
    Unknown,
    /// Being zeroed (or allocated) by the background thread or a writer.
    Preparing,
    /// Zeroed, or found holding data and allocated: writes may go here.
    Ready,
}

/// The state a zeroing-ahead device shares with its background thread.
struct ZeroAhead {
    state: std::sync::Mutex<ZeroState>,
    changed: std::sync::Condvar,
    /// Set when the device is dropped: the thread stops between pieces.
    stopping: std::sync::atomic::AtomicBool,
}

struct ZeroState {
    chunks: Vec<ChunkState>,
    queue: std::collections::VecDeque<usize>,
    stop: bool,
    /// Chunks zeroed (by the thread or by a writer), for tests and reports.
    zeroed: u64,
}

/// A file used as a block device.
pub struct FileDevice {
    /// Named by the path; the sector the device enforces is
    /// [`FILE_SECTOR_BYTES`], or with `O_DIRECT` the offset alignment the
    /// file system asks for.
    geometry: Geometry,
    path: PathBuf,
    file: File,
    options: FileOptions,
    /// Chunks known to be allocated (see [`GROWTH_CHUNK_BYTES`]).
    allocated: std::sync::Mutex<Vec<bool>>,
    /// Zeroing ahead of the writer, with its thread (FILE-1).
    zero_ahead: Option<(Arc<ZeroAhead>, Option<std::thread::JoinHandle<()>>)>,
}

impl FileDevice {
    /// Create (or truncate) a sparse file of `capacity_bytes`, allocated
    /// chunk by chunk as it is written.
    pub fn create(
        path: &Path,
        capacity_bytes: u64,
        options: FileOptions,
    ) -> Result<FileDevice, DeviceError> {
        let file = open_options(options)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| io_error(path, "create", e))?;
        file.set_len(capacity_bytes)
            .map_err(|e| removed(path, io_error(path, "set length", e)))?;
        Ok(FileDevice::from_file(path, file, capacity_bytes, options))
    }

    /// Create (or truncate) a file of `capacity_bytes` with every block
    /// allocated up front (what `characterize --file` measures).
    pub fn create_preallocated(
        path: &Path,
        capacity_bytes: u64,
        options: FileOptions,
    ) -> Result<FileDevice, DeviceError> {
        let device = FileDevice::create(path, capacity_bytes, options)?;
        preallocate(&device.file, capacity_bytes)
            .map_err(|e| removed(path, io_error(path, "preallocate", e)))?;
        device
            .allocated
            .lock()
            .expect("allocated chunks")
            .fill(true);
        Ok(device)
    }

    /// Open an existing file or block device, keeping its size.
    pub fn open(path: &Path, options: FileOptions) -> Result<FileDevice, DeviceError> {
        let file = open_options(options)
            .open(path)
            .map_err(|e| io_error(path, "open", e))?;
        let capacity_bytes = device_size(&file).map_err(|e| io_error(path, "size", e))?;
        Ok(FileDevice::from_file(path, file, capacity_bytes, options))
    }

    /// Open an existing file for reading only (`O_RDONLY`): every write,
    /// flush or trim is refused by the operating system. What read-only
    /// database opens put under an overlay.
    pub fn open_read_only(path: &Path) -> Result<FileDevice, DeviceError> {
        let file = OpenOptions::new()
            .read(true)
            .open(path)
            .map_err(|e| io_error(path, "open", e))?;
        let capacity_bytes = device_size(&file).map_err(|e| io_error(path, "size", e))?;
        Ok(FileDevice::from_file(
            path,
            file,
            capacity_bytes,
            FileOptions::default(),
        ))
    }

    fn from_file(path: &Path, file: File, capacity_bytes: u64, options: FileOptions) -> FileDevice {
        let chunks = capacity_bytes.div_ceil(GROWTH_CHUNK_BYTES) as usize;
        let sector_bytes = if options.direct {
            direct_offset_align_bytes(&file).unwrap_or(DIRECT_ALIGN_BYTES as u32)
        } else {
            FILE_SECTOR_BYTES
        };
        FileDevice {
            geometry: Geometry::new(path.display().to_string(), capacity_bytes, sector_bytes),
            path: path.to_path_buf(),
            file,
            options,
            allocated: std::sync::Mutex::new(vec![false; chunks]),
            zero_ahead: None,
        }
    }

    /// Write this file's blocks with zeros ahead of its writer, a chunk of
    /// [`GROWTH_CHUNK_BYTES`] at a time, [`ZERO_AHEAD_CHUNKS`] ahead once a
    /// write passes the middle of its chunk, on a thread of its own
    /// (FILE-1); the chunk of a write that finds its chunk unprepared is
    /// prepared by that write. What a log wants: a force then
    /// overwrites blocks already written, and its fdatasync commits no
    /// file-system metadata (no block allocation, no conversion of
    /// unwritten extents), as PostgreSQL's pre-zeroed WAL segments. Only
    /// chunks that are holes through and through are zeroed, so data
    /// already in the file is never touched; any other chunk is allocated
    /// as on a device without zeroing ahead. A chunk is written by the
    /// device only once it is ready.
    pub fn zero_ahead(mut self) -> Result<FileDevice, DeviceError> {
        if self.zero_ahead.is_some() {
            return Ok(self);
        }
        let chunks = self.geometry.capacity_bytes().div_ceil(GROWTH_CHUNK_BYTES) as usize;
        let shared = Arc::new(ZeroAhead {
            state: std::sync::Mutex::new(ZeroState {
                chunks: vec![ChunkState::Unknown; chunks],
                // Nothing up front: a short run (or a creation) uses only
                // the chunks it writes.
                queue: std::collections::VecDeque::new(),
                stop: false,
                zeroed: 0,
            }),
            changed: std::sync::Condvar::new(),
            stopping: std::sync::atomic::AtomicBool::new(false),
        });
        let file = self.file.try_clone().map_err(|e| self.err("clone", e))?;
        let (thread_shared, capacity_bytes) = (shared.clone(), self.geometry.capacity_bytes());
        let thread = std::thread::Builder::new()
            .name("zero-ahead".into())
            .spawn(move || zero_ahead_thread(&thread_shared, &file, capacity_bytes))
            .map_err(|e| self.err("spawn zeroing thread", e))?;
        self.zero_ahead = Some((shared, Some(thread)));
        Ok(self)
    }

    /// Chunks zeroed so far by a zeroing-ahead device (0 for others).
    pub fn chunks_zeroed(&self) -> u64 {
        self.zero_ahead
            .as_ref()
            .map_or(0, |(z, _)| z.state.lock().expect("zero-ahead state").zeroed)
    }

    /// [`FileDevice::reserve`] of a zeroing-ahead device: wait for (or do)
    /// the preparation of every chunk the write touches, then queue the
    /// chunks ahead of it (FILE-1).
    fn reserve_zeroed(
        &self,
        zero: &ZeroAhead,
        offset_bytes: u64,
        len_bytes: u64,
    ) -> Result<(), DeviceError> {
        let first = (offset_bytes / GROWTH_CHUNK_BYTES) as usize;
        let last = ((offset_bytes + len_bytes - 1) / GROWTH_CHUNK_BYTES) as usize;
        let mut st = zero.state.lock().expect("zero-ahead state");
        for chunk in first..=last {
            loop {
                match st.chunks[chunk] {
                    ChunkState::Ready => break,
                    ChunkState::Preparing => {
                        st = zero.changed.wait(st).expect("zero-ahead state");
                    }
                    ChunkState::Unknown => {
                        // The thread is behind: prepare it here.
                        st.chunks[chunk] = ChunkState::Preparing;
                        drop(st);
                        let prepared =
                            prepare_chunk(&self.file, chunk, self.geometry.capacity_bytes(), None);
                        st = zero.state.lock().expect("zero-ahead state");
                        st.chunks[chunk] = match prepared {
                            Ok(_) => ChunkState::Ready,
                            Err(_) => ChunkState::Unknown,
                        };
                        st.zeroed += u64::from(prepared.as_ref().is_ok_and(|&z| z));
                        zero.changed.notify_all();
                        prepared.map_err(|e| self.err("zero ahead", e))?;
                        break;
                    }
                }
            }
        }
        let mut queued = false;
        let past_middle =
            offset_bytes + len_bytes >= last as u64 * GROWTH_CHUNK_BYTES + GROWTH_CHUNK_BYTES / 2;
        let ahead_end = if past_middle {
            last + ZERO_AHEAD_CHUNKS
        } else {
            last
        };
        for ahead in last + 1..=ahead_end {
            if ahead < st.chunks.len()
                && st.chunks[ahead] == ChunkState::Unknown
                && !st.queue.contains(&ahead)
            {
                st.queue.push_back(ahead);
                queued = true;
            }
        }
        if queued {
            zero.changed.notify_all();
        }
        Ok(())
    }

    /// The path this device was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Allocate the chunks `[offset, offset + len)` touches that are not yet
    /// known to be allocated. The lock is a std one held across
    /// `fallocate`: a file device lives in the real world only.
    fn reserve(&self, offset_bytes: u64, len_bytes: u64) -> Result<(), DeviceError> {
        if len_bytes == 0 {
            return Ok(());
        }
        if let Some((zero, _)) = &self.zero_ahead {
            return self.reserve_zeroed(zero, offset_bytes, len_bytes);
        }
        let first = offset_bytes / GROWTH_CHUNK_BYTES;
        let last = (offset_bytes + len_bytes - 1) / GROWTH_CHUNK_BYTES;
        let mut allocated = self.allocated.lock().expect("allocated chunks");
        for chunk in first..=last {
            if allocated.get(chunk as usize).copied().unwrap_or(true) {
                continue;
            }
            let start = chunk * GROWTH_CHUNK_BYTES;
            let len = GROWTH_CHUNK_BYTES.min(self.geometry.capacity_bytes() - start);
            allocate(&self.file, start, len).map_err(|e| self.err("allocate", e))?;
            allocated[chunk as usize] = true;
        }
        Ok(())
    }

    /// A trimmed range may leave holes: its chunks are allocated again at
    /// their next write.
    fn forget(&self, offset_bytes: u64, len_bytes: u64) {
        if len_bytes == 0 {
            return;
        }
        if let Some((zero, _)) = &self.zero_ahead {
            let first = (offset_bytes / GROWTH_CHUNK_BYTES) as usize;
            let last = ((offset_bytes + len_bytes - 1) / GROWTH_CHUNK_BYTES) as usize;
            let mut st = zero.state.lock().expect("zero-ahead state");
            for chunk in first..=last.min(st.chunks.len() - 1) {
                // A holed chunk is looked at again (a partial hole is
                // allocated, a whole one zeroed) before its next write.
                if st.chunks[chunk] == ChunkState::Ready {
                    st.chunks[chunk] = ChunkState::Unknown;
                }
            }
        }
        let first = (offset_bytes / GROWTH_CHUNK_BYTES) as usize;
        let last = ((offset_bytes + len_bytes - 1) / GROWTH_CHUNK_BYTES) as usize;
        let mut allocated = self.allocated.lock().expect("allocated chunks");
        for chunk in allocated.iter_mut().take(last + 1).skip(first) {
            *chunk = false;
        }
    }

    fn err(&self, op: &'static str, source: std::io::Error) -> DeviceError {
        io_error(&self.path, op, source)
    }
}

/// Whether the file at `path` can be opened with `O_DIRECT` at the
/// sector of a buffered file device, [`FILE_SECTOR_BYTES`]: the file system
/// takes `O_DIRECT` and states (`statx`, `STATX_DIOALIGN`) an offset
/// alignment of at most that. Such a file gives the same device in either
/// mode, sector size included, so a format laid out in its sectors (the
/// log's) reads the same either way. The file's length must be a multiple
/// of the sector too: zeroing ahead (FILE-1) writes up to its end.
pub fn direct_at_file_sector(path: &Path) -> bool {
    let Ok(file) = open_options(FileOptions { direct: true }).open(path) else {
        return false;
    };
    let whole_sectors = device_size(&file).is_ok_and(|len| len % u64::from(FILE_SECTOR_BYTES) == 0);
    whole_sectors
        && direct_offset_align_bytes(&file).is_some_and(|align| align <= FILE_SECTOR_BYTES)
}

/// The offset alignment `O_DIRECT` needs on `file`, if the file system
/// states it (`statx` with `STATX_DIOALIGN`, Linux 6.1 and later), and it is
/// a power of two no larger than [`DIRECT_ALIGN_BYTES`], to which every
/// bounce buffer's memory is aligned; never below [`FILE_SECTOR_BYTES`].
fn direct_offset_align_bytes(file: &File) -> Option<u32> {
    use std::os::fd::AsRawFd;
    // SAFETY: an all-zero statx is a valid value of the plain struct.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: statx takes a valid descriptor, an empty C string with
    // AT_EMPTY_PATH, and a buffer it fills.
    let rc = unsafe {
        libc::statx(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut stx,
        )
    };
    let align = stx.stx_dio_offset_align;
    let stated = rc == 0 && stx.stx_mask & libc::STATX_DIOALIGN != 0;
    let usable = align.is_power_of_two()
        && align <= DIRECT_ALIGN_BYTES as u32
        && stx.stx_dio_mem_align <= DIRECT_ALIGN_BYTES as u32;
    (stated && usable).then_some(align.max(FILE_SECTOR_BYTES))
}

fn open_options(options: FileOptions) -> OpenOptions {
    let mut open = OpenOptions::new();
    open.read(true).write(true);
    if options.direct {
        open.custom_flags(libc::O_DIRECT);
    }
    open
}

/// A creation that failed after making the file: remove it, keep the error.
fn removed(path: &Path, error: DeviceError) -> DeviceError {
    let _ = std::fs::remove_file(path);
    error
}

fn io_error(path: &Path, op: &'static str, source: std::io::Error) -> DeviceError {
    let device = path.display().to_string();
    match source.raw_os_error() {
        Some(libc::ENOSPC) => {
            return DeviceError::Full {
                device,
                problem: format!("{op}: no space left on the file system; free some and retry"),
            };
        }
        Some(libc::EFBIG) => {
            return DeviceError::Full {
                device,
                problem: format!("{op}: the file size limit (ulimit -f) is reached"),
            };
        }
        _ => {}
    }
    DeviceError::Io { device, op, source }
}

/// Size of a regular file, or of a block device (seek to its end).
fn device_size(file: &File) -> std::io::Result<u64> {
    use std::io::{Seek, SeekFrom};
    let len = file.metadata()?.len();
    if len > 0 {
        return Ok(len);
    }
    let mut handle = file.try_clone()?;
    handle.seek(SeekFrom::End(0))
}

/// A buffer whose data starts at an O_DIRECT-aligned address.
struct AlignedBuf {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    fn new(len: usize) -> AlignedBuf {
        let storage = vec![0u8; len + DIRECT_ALIGN_BYTES];
        let start = storage.as_ptr().align_offset(DIRECT_ALIGN_BYTES);
        AlignedBuf {
            storage,
            start,
            len,
        }
    }

    /// An aligned copy of `data`, without zeroing the buffer first (a log
    /// force's write is bounced through one).
    fn copy_of(data: &[u8]) -> AlignedBuf {
        let mut storage: Vec<u8> = Vec::with_capacity(data.len() + DIRECT_ALIGN_BYTES);
        let start = storage.as_ptr().align_offset(DIRECT_ALIGN_BYTES);
        storage.resize(start, 0);
        storage.extend_from_slice(data);
        AlignedBuf {
            storage,
            start,
            len: data.len(),
        }
    }

    fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

impl Device for FileDevice {
    crate::device::identity_from_geometry!();

    fn read(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.geometry
            .check_io(IoKind::Read, offset_bytes, buf.len() as u64)?;
        if self.options.direct {
            let mut bounce = AlignedBuf::new(buf.len());
            self.file
                .read_exact_at(bounce.as_mut_slice(), offset_bytes)
                .map_err(|e| self.err("read", e))?;
            buf.copy_from_slice(bounce.as_slice());
            return Ok(());
        }
        self.file
            .read_exact_at(buf, offset_bytes)
            .map_err(|e| self.err("read", e))
    }

    fn write(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.geometry
            .check_io(IoKind::Write, offset_bytes, data.len() as u64)?;
        self.reserve(offset_bytes, data.len() as u64)?;
        if self.options.direct {
            let bounce = AlignedBuf::copy_of(data);
            return self
                .file
                .write_all_at(bounce.as_slice(), offset_bytes)
                .map_err(|e| self.err("write", e));
        }
        self.file
            .write_all_at(data, offset_bytes)
            .map_err(|e| self.err("write", e))
    }

    fn flush(&self) -> Result<(), DeviceError> {
        self.file
            .sync_data()
            .map_err(|e| match self.err("fdatasync", e) {
                DeviceError::Io { device, source, .. } => DeviceError::FlushFailed {
                    device,
                    problem: source.to_string(),
                },
                other => other,
            })
    }

    fn trim(&self, offset_bytes: u64, len_bytes: u64) -> Result<(), DeviceError> {
        self.geometry
            .check_io(IoKind::Trim, offset_bytes, len_bytes)?;
        self.forget(offset_bytes, len_bytes);
        punch_hole(&self.file, offset_bytes, len_bytes).map_err(|e| self.err("trim", e))
    }
}

impl Drop for FileDevice {
    fn drop(&mut self) {
        if let Some((zero, thread)) = &mut self.zero_ahead {
            zero.stopping
                .store(true, std::sync::atomic::Ordering::Relaxed);
            zero.state.lock().expect("zero-ahead state").stop = true;
            zero.changed.notify_all();
            if let Some(thread) = thread.take() {
                let _ = thread.join();
            }
        }
    }
}

/// The zeroing thread: prepare queued chunks, oldest first, until stopped.
/// A failure leaves the chunk to the writer, who reports it.
fn zero_ahead_thread(zero: &ZeroAhead, file: &File, capacity_bytes: u64) {
    let mut st = zero.state.lock().expect("zero-ahead state");
    loop {
        if st.stop {
            return;
        }
        let Some(chunk) = st.queue.pop_front() else {
            st = zero.changed.wait(st).expect("zero-ahead state");
            continue;
        };
        if st.chunks[chunk] != ChunkState::Unknown {
            continue;
        }
        st.chunks[chunk] = ChunkState::Preparing;
        drop(st);
        let prepared = prepare_chunk(file, chunk, capacity_bytes, Some(&zero.stopping));
        st = zero.state.lock().expect("zero-ahead state");
        st.chunks[chunk] = match prepared {
            Ok(_) => ChunkState::Ready,
            Err(_) => ChunkState::Unknown,
        };
        st.zeroed += u64::from(prepared.is_ok_and(|z| z));
        zero.changed.notify_all();
    }
}

/// Make chunk `chunk` ready for writes: write zeros into every hole of it
/// (`SEEK_DATA`/`SEEK_HOLE`), which changes nothing a read returns (a hole,
/// or an unwritten extent, reads as zeros) but leaves every block written;
/// data is never touched. Where the file system cannot tell holes from
/// data, allocate the chunk as [`FileDevice::reserve`] does. True if
/// anything was zeroed. On a buffered device the zeros are pushed to the
/// device piece by piece (`sync_file_range`), so the page cache never holds
/// much of them for a log force's fdatasync to write; on an `O_DIRECT` one
/// (FILE-2) they bypass the cache, from an aligned buffer, and the call
/// does nothing. Either way they are made durable with the extents'
/// metadata by one fdatasync at the end.
fn prepare_chunk(
    file: &File,
    chunk: usize,
    capacity_bytes: u64,
    stopping: Option<&std::sync::atomic::AtomicBool>,
) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let start = chunk as u64 * GROWTH_CHUNK_BYTES;
    let end = start + GROWTH_CHUNK_BYTES.min(capacity_bytes - start);
    let seek = |from: u64, whence: i32| -> std::io::Result<Option<u64>> {
        // SAFETY: lseek takes a valid descriptor and plain integers.
        let at = unsafe { libc::lseek(file.as_raw_fd(), from as i64, whence) };
        if at >= 0 {
            return Ok(Some(at as u64));
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::ENXIO) => Ok(None), // no data (or hole) at or after `from`
            _ => Err(err),
        }
    };
    // The holes of [start, end).
    let mut holes = Vec::new();
    let mut at = start;
    while at < end {
        let data = match seek(at, libc::SEEK_DATA) {
            Ok(data) => data.unwrap_or(end).min(end),
            Err(_) => {
                allocate(file, start, end - start)?;
                return Ok(false);
            }
        };
        if data > at {
            holes.push((at, data));
        }
        if data >= end {
            break;
        }
        at = match seek(data, libc::SEEK_HOLE) {
            Ok(hole) => hole.unwrap_or(end),
            Err(_) => {
                allocate(file, start, end - start)?;
                return Ok(false);
            }
        };
    }
    if holes.is_empty() {
        return Ok(false);
    }
    let zeros = AlignedBuf::new(ZERO_PIECE_BYTES);
    let zeros = zeros.as_slice();
    for (from, to) in holes {
        let mut at = from;
        while at < to {
            if stopping.is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed)) {
                // What is zeroed is written; the rest is zeroed at a later
                // open.
                return Err(std::io::Error::other("device closed"));
            }
            let n = (to - at).min(ZERO_PIECE_BYTES as u64);
            file.write_all_at(&zeros[..n as usize], at)?;
            // SAFETY: sync_file_range takes a valid descriptor and plain
            // integers.
            unsafe {
                libc::sync_file_range(
                    file.as_raw_fd(),
                    at as i64,
                    n as i64,
                    libc::SYNC_FILE_RANGE_WAIT_BEFORE
                        | libc::SYNC_FILE_RANGE_WRITE
                        | libc::SYNC_FILE_RANGE_WAIT_AFTER,
                );
            }
            at += n;
        }
    }
    file.sync_data()?;
    Ok(true)
}

/// Allocate every block of a new file up front, so that writes do not
/// allocate blocks: on ext4 an fdatasync of one file would otherwise wait
/// for the journal to write out other files' newly allocated data, and the
/// log's forces would pay for the data and rollback spaces' writes.
/// Where the file system cannot do it, the file stays sparse.
fn preallocate(file: &File, len_bytes: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: posix_fallocate takes a valid descriptor and plain integers.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len_bytes as i64) };
    match rc {
        0 | libc::EOPNOTSUPP | libc::EINVAL => Ok(()),
        errno => Err(std::io::Error::from_raw_os_error(errno)),
    }
}

/// Allocate the blocks of `[offset, offset + len)` of a file, keeping its
/// size (Linux `fallocate`, never glibc's emulation, which writes). Quietly
/// nothing where the file system or device cannot.
fn allocate(file: &File, offset_bytes: u64, len_bytes: u64) -> std::io::Result<()> {
    let unsupported = [libc::EOPNOTSUPP, libc::ENODEV, libc::EINVAL];
    fallocate(
        file,
        libc::FALLOC_FL_KEEP_SIZE,
        offset_bytes,
        len_bytes,
        &unsupported,
    )
}

/// Deallocate a range of a regular file; quietly nothing where unsupported.
fn punch_hole(file: &File, offset_bytes: u64, len_bytes: u64) -> std::io::Result<()> {
    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    fallocate(
        file,
        mode,
        offset_bytes,
        len_bytes,
        &[libc::EOPNOTSUPP, libc::ENODEV],
    )
}

/// `fallocate(2)` with `mode`; the errors in `unsupported` count as done
/// (the file system or device cannot, and nothing depends on it).
fn fallocate(
    file: &File,
    mode: i32,
    offset_bytes: u64,
    len_bytes: u64,
    unsupported: &[i32],
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: fallocate takes a valid descriptor and plain integers.
    let rc = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            mode,
            offset_bytes as i64,
            len_bytes as i64,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(code) if unsupported.contains(&code) => Ok(()),
        _ => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_flush_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let dev =
            FileDevice::create(&dir.path().join("dev"), 1 << 20, FileOptions::default()).unwrap();
        dev.write(4096, &[5u8; 1024]).unwrap();
        dev.flush().unwrap();
        let mut buf = vec![0u8; 1024];
        dev.read(4096, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 5));
        let reopened = FileDevice::open(&dir.path().join("dev"), FileOptions::default()).unwrap();
        assert_eq!(reopened.capacity_bytes(), 1 << 20);
    }

    /// FILE-1: a fresh file is zeroed ahead of its writer, chunk by chunk;
    /// data already in a file is never zeroed.
    #[test]
    fn zeroing_ahead_zeroes_holes_and_keeps_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let capacity = GROWTH_CHUNK_BYTES + (1 << 20);
        let dev = FileDevice::create(&path, capacity, FileOptions::default())
            .unwrap()
            .zero_ahead()
            .unwrap();
        dev.write(4096, &[7u8; 4096]).unwrap();
        dev.write(GROWTH_CHUNK_BYTES, &[8u8; 512]).unwrap();
        dev.flush().unwrap();
        let mut buf = vec![0u8; 4096];
        dev.read(4096, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 7));
        dev.read(0, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
        let zeroed = dev.chunks_zeroed();
        drop(dev);
        // Where SEEK_DATA tells holes from data, both chunks were holes.
        assert!(zeroed <= 2);
        // Reopened: chunk 0 holds data, so it is allocated, not zeroed.
        let dev = FileDevice::open(&path, FileOptions::default())
            .unwrap()
            .zero_ahead()
            .unwrap();
        dev.write(8192, &[9u8; 512]).unwrap();
        dev.read(4096, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 7), "data kept");
        let mut small = vec![0u8; 512];
        dev.read(GROWTH_CHUNK_BYTES, &mut small).unwrap();
        assert!(small.iter().all(|&b| b == 8), "data kept");
        assert_eq!(dev.chunks_zeroed(), 0);
    }

    /// FILE-1: the thread's zeros leave the chunk ahead with every block
    /// written and reading zeros.
    #[test]
    fn the_chunk_ahead_is_written_with_zeros_by_the_thread() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let capacity = 3 * GROWTH_CHUNK_BYTES;
        let dev = FileDevice::create(&path, capacity, FileOptions::default())
            .unwrap()
            .zero_ahead()
            .unwrap();
        // Past the middle of chunk 0: the thread prepares chunk 1.
        dev.write(GROWTH_CHUNK_BYTES / 2 + 4096, &[7u8; 4096])
            .unwrap();
        let started = std::time::Instant::now();
        while dev.chunks_zeroed() < 2 && started.elapsed().as_secs() < 60 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(dev.chunks_zeroed(), 2, "chunks 0 and 1 zeroed");
        let file = File::open(&path).unwrap();
        // SAFETY: lseek takes a valid descriptor and plain integers.
        let hole =
            unsafe { libc::lseek(file.as_raw_fd(), GROWTH_CHUNK_BYTES as i64, libc::SEEK_HOLE) };
        assert!(
            hole as u64 >= 2 * GROWTH_CHUNK_BYTES,
            "a hole at {hole} in the chunk the thread zeroed"
        );
        let mut buf = vec![9u8; 1 << 20];
        dev.read(GROWTH_CHUNK_BYTES + (7 << 20), &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
    }

    #[test]
    fn space_is_allocated_on_demand_in_chunks() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev");
        let capacity = 4 * GROWTH_CHUNK_BYTES;
        let dev = FileDevice::create(&path, capacity, FileOptions::default()).unwrap();
        let blocks = |p: &Path| std::fs::metadata(p).unwrap().blocks() * 512;
        assert_eq!(std::fs::metadata(&path).unwrap().len(), capacity);
        assert!(blocks(&path) < GROWTH_CHUNK_BYTES, "created sparse");
        dev.write(GROWTH_CHUNK_BYTES + 4096, &[1u8; 512]).unwrap();
        let used = blocks(&path);
        assert!(
            used < 2 * GROWTH_CHUNK_BYTES + 4096,
            "{used} bytes allocated"
        );
        let mut buf = vec![9u8; 512];
        dev.read(3 * GROWTH_CHUNK_BYTES, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
    }

    #[test]
    fn out_of_range_and_unaligned_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let dev =
            FileDevice::create(&dir.path().join("dev"), 1 << 20, FileOptions::default()).unwrap();
        let err = dev.write(1 << 20, &[0u8; 512]).unwrap_err();
        assert!(err.to_string().contains("beyond the capacity"), "{err}");
        let err = dev.write(100, &[0u8; 512]).unwrap_err();
        assert!(err.to_string().contains("not aligned"), "{err}");
    }

    #[test]
    fn direct_io_works_where_the_file_system_allows_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev");
        let options = FileOptions { direct: true };
        match FileDevice::create(&path, 1 << 20, options) {
            Ok(dev) => {
                dev.write(8192, &[3u8; 4096]).unwrap();
                let mut buf = vec![0u8; 4096];
                dev.read(8192, &mut buf).unwrap();
                assert!(buf.iter().all(|&b| b == 3));
            }
            // tmpfs refuses O_DIRECT with EINVAL; that is an error, not a panic.
            Err(err) => assert!(err.to_string().contains("create"), "{err}"),
        }
    }

    /// FILE-2: where `direct_at_file_sector` says so, an `O_DIRECT` device
    /// has the buffered device's 512-byte sector, takes 512-byte writes at
    /// 512-byte offsets, and zeroes ahead of its writer like a buffered one
    /// (its zeros also written around the page cache), data kept. Where it
    /// says not, opening with `O_DIRECT` fails or asks for coarser
    /// alignment.
    #[test]
    fn a_direct_device_at_the_file_sector_zeroes_ahead_and_keeps_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let capacity = 2 * GROWTH_CHUNK_BYTES;
        drop(FileDevice::create(&path, capacity, FileOptions::default()).unwrap());
        // A file of a length that is not whole sectors stays buffered:
        // its last zeros could not be written around the page cache.
        let ragged = dir.path().join("ragged");
        drop(FileDevice::create(&ragged, capacity - 256, FileOptions::default()).unwrap());
        assert!(!direct_at_file_sector(&ragged));
        let direct = FileOptions { direct: true };
        if !direct_at_file_sector(&path) {
            if let Ok(dev) = FileDevice::open(&path, direct) {
                assert!(dev.sector_bytes() > FILE_SECTOR_BYTES);
            }
            return;
        }
        let dev = FileDevice::open(&path, direct)
            .unwrap()
            .zero_ahead()
            .unwrap();
        assert_eq!(dev.sector_bytes(), FILE_SECTOR_BYTES);
        dev.write(512, &[7u8; 512]).unwrap();
        dev.write(1536, &[8u8; 1024]).unwrap();
        dev.flush().unwrap();
        assert!(dev.chunks_zeroed() >= 1, "chunk 0 was a hole");
        let mut buf = vec![1u8; 4096];
        dev.read(0, &mut buf).unwrap();
        assert!(buf[..512].iter().all(|&b| b == 0));
        assert!(buf[512..1024].iter().all(|&b| b == 7));
        assert!(buf[1024..1536].iter().all(|&b| b == 0));
        assert!(buf[1536..2560].iter().all(|&b| b == 8));
        assert!(buf[2560..].iter().all(|&b| b == 0));
        drop(dev);
        // What O_DIRECT wrote, a buffered open reads.
        let dev = FileDevice::open(&path, FileOptions::default()).unwrap();
        let mut small = vec![0u8; 512];
        dev.read(512, &mut small).unwrap();
        assert!(small.iter().all(|&b| b == 7));
    }
}
