//! A sparse byte store with crash semantics.
//!
//! Memory and simulated devices keep their contents here. Bytes never
//! written read as zeros; the store grows with what is written, in chunks
//! of [`CHUNK_BYTES`], not with the device's capacity, so a 250 GB disk
//! model costs nothing until used. The chunks live on the heap or, when the
//! process names a scratch directory ([`scratch`]), in sparse host files
//! ([`chunks`]): then host memory holds only a map entry per chunk, and a
//! database larger than memory can be simulated. Which one never changes
//! what a read returns.
//!
//! To model a crash, the store remembers every write since the last flush:
//! where it went, the bytes it replaced (its *before-image*) and the bytes it
//! wrote (its *after-image*). A flush makes the writes issued before it began
//! durable. [`SparseStore::crash`] loses every write not yet durable, leaving
//! exactly what the flushes made durable; [`SparseStore::crash_with`] lets
//! the fault model ([`crate::fault`]) keep, drop or tear each one.
//!
//! A flush can also *fail* ([`SparseStore::fail_flush_through`]). The writes
//! it covered become *orphans*, as on Linux, where a failed fsync marks the
//! page cache clean and the next fsync succeeds without writing them: reads
//! still see their data, but no later flush makes them durable, and a crash
//! decides their fate like any unflushed write. Because an orphan can be
//! older than a durable write over the same bytes, a crash does not just roll
//! back: it rolls *every* remembered write back to the state before the
//! oldest, then replays, oldest first, the writes that are durable, kept or
//! torn.
//!
//! Memory: a remembered write keeps only its before-image, and none at all
//! when it went to bytes never written (they were zeros). Its after-image is
//! not kept: it is what the next remembered write over the same bytes saw as
//! its before-image, or, if none came later, what the store holds now
//! (STORE-5). A caller that will never read a range back again (the log,
//! behind its durable start) may [`SparseStore::forget`] it: its chunks are
//! freed, so memory follows what can be read back, not what was ever written.
//!
//! Writes are numbered in issue order; a flush names the first number it
//! does *not* cover ([`SparseStore::flush_mark`]), so two flushes in flight
//! at once each cover exactly the writes issued before they began.
//!
//! Invariants (STORE-n):
//! 1. Rolling back the remembered writes newest first, then replaying the
//!    durable ones oldest first, yields the durable contents.
//! 2. Unflushed bytes are bounded by [`UNFLUSHED_BYTES_MAX`]; a writer that
//!    never flushes gets an error, not unbounded memory.
//! 3. A write is remembered until it is durable and no older write is still
//!    remembered (an orphan keeps every later write remembered).
//! 4. An orphan never becomes durable; only a crash decides its fate.
//! 5. A remembered write's after-image, byte by byte, is the before-image of
//!    the oldest later remembered write over that byte, else the store's
//!    current byte. `forget` therefore never touches a chunk a remembered
//!    write overlaps.
//! 6. A store whose crash model is off ([`SparseStore::turn_off_crash_model`])
//!    remembers no write and is never crashed or imaged (`assert!`).
//!
//! ## Runs that never crash
//!
//! A benchmark or an experiment never crashes its devices, yet a data
//! device is flushed only at checkpoints, so its store would keep the
//! before-image of every page written back in between, a copy per write
//! held until the next checkpoint (what that costs:
//! docs/PERFORMANCE-HISTORY.md, "Benchmarks without a crash model, changes
//! in place, visits without a handle"). Such a run turns
//! the crash model off: a write goes straight to the chunks, and every
//! byte written counts as durable. Benchmarks do it for their stores, and
//! experiments open their devices with
//! [`crate::presets::open_simulated_never_crashing`]. Crash tests keep it on.

mod chunks;
pub mod scratch;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex};

use crate::device::Device;
use chunks::Chunks;
pub use chunks::LAYERS_MAX;
use scratch::ScratchDir;

/// Allocation unit of the store.
pub const CHUNK_BYTES: usize = 4096;

/// Most bytes that may be written between two flushes (STORE-2).
pub const UNFLUSHED_BYTES_MAX: u64 = 8 << 30;

/// Why a store could not take a write or give back a read.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// STORE-2's limit.
    #[error("more than {limit} bytes written without a flush")]
    Unflushed { limit: u64 },
    /// The host file holding the chunks failed (a full scratch disk).
    #[error("scratch file: {0}")]
    Scratch(#[from] io::Error),
}

impl StoreError {
    /// The error of device `device`, whose store this is: a device full at
    /// STORE-2's limit, or an I/O error of its scratch file.
    pub fn on_device(self, device: &str) -> crate::error::DeviceError {
        use crate::error::DeviceError;
        let device = device.to_string();
        match self {
            StoreError::Unflushed { .. } => DeviceError::Full {
                device,
                problem: self.to_string(),
            },
            StoreError::Scratch(source) => DeviceError::Io {
                device,
                op: "scratch file",
                source,
            },
        }
    }
}

/// What a crash does with one unflushed write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashFate {
    /// The write reached the media.
    Keep,
    /// The write never reached the media.
    Drop,
    /// Only the first `bytes` of it reached the media (a torn write).
    Tear { bytes: u64 },
}

/// A device whose data lives in a [`SparseStore`] (memory and simulated
/// devices): the fault model reaches the store to crash it, to orphan the
/// writes of a failed flush, and to ask what is durable.
pub trait StoredDevice: Device {
    /// The store; lock it only briefly, never across a blocking call.
    fn store(&self) -> &Mutex<SparseStore>;
}

/// One write a crash decides the fate of, as the fate function sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingWrite {
    /// Position among the writes not yet durable, 0 the oldest.
    pub index: usize,
    pub offset_bytes: u64,
    pub len_bytes: u64,
    /// Covered by a failed flush (STORE-4).
    pub orphaned: bool,
}

/// A write a crash decided, as [`SparseStore::crash_detailed`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrashedWrite {
    pub write: PendingWrite,
    pub fate: CrashFate,
    /// The bytes before it and the bytes it wrote, so a caller can tell a
    /// torn page from any version the page really had.
    pub before: Vec<u8>,
    pub after: Vec<u8>,
}

/// One write since the last flush and the bytes it replaced.
struct Unflushed {
    seq: u64,
    offset_bytes: u64,
    len_bytes: u64,
    /// The bytes it replaced; `None` when they were never written (zeros).
    before: Option<Box<[u8]>>,
    /// Made durable by a flush, but still remembered (STORE-3).
    durable: bool,
    /// Covered by a failed flush (STORE-4).
    orphaned: bool,
}

impl Unflushed {
    fn end_bytes(&self) -> u64 {
        self.offset_bytes + self.len_bytes
    }

    /// Copy its before-image's bytes of `from..to` (inside it) to `out`.
    fn before_into(&self, from: u64, to: u64, out: &mut [u8]) {
        let a = (from - self.offset_bytes) as usize;
        let b = (to - self.offset_bytes) as usize;
        match &self.before {
            Some(bytes) => out.copy_from_slice(&bytes[a..b]),
            None => out.fill(0),
        }
    }

    fn before_vec(&self) -> Vec<u8> {
        match &self.before {
            Some(bytes) => bytes.to_vec(),
            None => vec![0u8; self.len_bytes as usize],
        }
    }
}

/// Sparse, chunked bytes with before-images of unflushed writes.
#[derive(Default)]
pub struct SparseStore {
    /// Shared with the images made of this store and the stores started
    /// from them; a write to a shared chunk copies it first.
    chunks: Chunks,
    unflushed: VecDeque<Unflushed>,
    unflushed_bytes: u64,
    next_seq: u64,
    /// Highest end of any byte range that is durable with written data.
    durable_end_bytes: u64,
    /// Writes are not remembered and the store is never crashed (STORE-6).
    crash_model_off: bool,
}

impl SparseStore {
    /// A store in the process's scratch directory if it names one
    /// ([`scratch::keep_contents_in`]), else on the heap.
    pub fn new() -> SparseStore {
        match scratch::current() {
            Some(dir) => SparseStore::in_scratch(dir),
            None => SparseStore::in_memory(),
        }
    }

    /// A store whose chunks are on the heap.
    pub fn in_memory() -> SparseStore {
        SparseStore::default()
    }

    /// A store whose chunks are in sparse files in `dir`.
    pub fn in_scratch(dir: Arc<ScratchDir>) -> SparseStore {
        SparseStore {
            chunks: Chunks::in_scratch(dir),
            ..SparseStore::default()
        }
    }

    /// Stop remembering writes: this store will never be crashed (STORE-6).
    /// Every write from now on is durable as soon as it is made.
    pub fn turn_off_crash_model(&mut self) {
        assert!(
            self.unflushed.is_empty(),
            "STORE-6: the crash model is turned off with no write remembered"
        );
        self.crash_model_off = true;
    }

    /// A copy of the durable contents, or `None` while writes are still
    /// unflushed (an image is taken of a flushed, quiet device only). The
    /// copy shares the chunks: each side copies a chunk when it first
    /// writes it, so a study that starts many runs from one loaded
    /// database copies only what each run writes.
    pub fn image(&mut self) -> Option<SparseStore> {
        assert!(
            !self.crash_model_off,
            "STORE-6: a store without a crash model is not imaged (its writes are never unflushed)"
        );
        if !self.unflushed.is_empty() {
            return None;
        }
        Some(SparseStore {
            chunks: self.chunks.share(),
            durable_end_bytes: self.durable_end_bytes,
            ..SparseStore::default()
        })
    }

    /// The written byte ranges, in address order, each a run of adjacent
    /// chunks: what a device preloaded with this image must have written.
    pub fn written_runs(&self) -> Vec<(u64, u64)> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for key in self.chunks.held() {
            let offset_bytes = key * CHUNK_BYTES as u64;
            match runs.last_mut() {
                Some((start, len)) if *start + *len == offset_bytes => *len += CHUNK_BYTES as u64,
                _ => runs.push((offset_bytes, CHUNK_BYTES as u64)),
            }
        }
        runs
    }

    /// Copy bytes at `offset_bytes` into `buf`.
    pub fn read(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        Ok(self.chunks.read(offset_bytes, buf)?)
    }

    /// A read inside the crash model, whose callers cannot fail: a scratch
    /// file the process wrote and holds open does not fail to read back
    /// but for a host disk error, and a crash test cannot go on past one.
    fn read_back(&self, offset_bytes: u64, buf: &mut [u8]) {
        if let Err(e) = self.chunks.read(offset_bytes, buf) {
            panic!("the scratch file of a crashed store failed to read back: {e}");
        }
    }

    /// Write `data` at `offset_bytes`, remembering what it replaced. Fails
    /// (writing nothing) if the unflushed bytes would pass the limit.
    pub fn write(&mut self, offset_bytes: u64, data: &[u8]) -> Result<(), StoreError> {
        let len = data.len() as u64;
        if self.crash_model_off {
            self.chunks.write(offset_bytes, data)?;
            self.durable_end_bytes = self.durable_end_bytes.max(offset_bytes + len);
            return Ok(());
        }
        if self.unflushed_bytes + len > UNFLUSHED_BYTES_MAX {
            return Err(StoreError::Unflushed {
                limit: UNFLUSHED_BYTES_MAX,
            });
        }
        let before = if self.never_written(offset_bytes, len) {
            None
        } else {
            let mut before = vec![0u8; data.len()];
            self.read(offset_bytes, &mut before)?;
            Some(before.into_boxed_slice())
        };
        self.chunks.write(offset_bytes, data)?;
        self.unflushed.push_back(Unflushed {
            seq: self.next_seq,
            offset_bytes,
            len_bytes: len,
            before,
            durable: false,
            orphaned: false,
        });
        self.next_seq += 1;
        self.unflushed_bytes += len;
        Ok(())
    }

    /// True if no chunk holds any byte of `offset_bytes..+len_bytes`.
    fn never_written(&self, offset_bytes: u64, len_bytes: u64) -> bool {
        if len_bytes == 0 {
            return true;
        }
        let first = offset_bytes / CHUNK_BYTES as u64;
        let last = (offset_bytes + len_bytes - 1) / CHUNK_BYTES as u64;
        (first..=last).all(|c| !self.chunks.holds(c))
    }

    /// The after-image of remembered write `index` over `from..to` (inside
    /// it), from later before-images and the current bytes (STORE-5).
    fn after_range(&self, index: usize, from: u64, to: u64) -> Vec<u8> {
        let mut out = vec![0u8; (to - from) as usize];
        self.read_back(from, &mut out);
        // Newest first, so the oldest later write over a byte wins.
        for later in self.unflushed.iter().skip(index + 1).rev() {
            let a = later.offset_bytes.max(from);
            let b = later.end_bytes().min(to);
            if a < b {
                later.before_into(a, b, &mut out[(a - from) as usize..(b - from) as usize]);
            }
        }
        out
    }

    /// Free the chunks of `offset_bytes..+len_bytes`: the caller will never
    /// read these bytes back (they read as zeros if it does). Chunks that a
    /// remembered write overlaps are kept (STORE-5); a chunk only partly in
    /// the range has that part zeroed. No write is remembered for it: a
    /// crash does not bring forgotten bytes back.
    pub fn forget(&mut self, offset_bytes: u64, len_bytes: u64) {
        if len_bytes == 0 {
            return;
        }
        let end = offset_bytes + len_bytes;
        let remembered: Vec<(u64, u64)> = self
            .unflushed
            .iter()
            .filter(|w| w.offset_bytes < end && w.end_bytes() > offset_bytes)
            .map(|w| (w.offset_bytes, w.end_bytes()))
            .collect();
        let first = offset_bytes / CHUNK_BYTES as u64;
        let last = (end - 1) / CHUNK_BYTES as u64;
        for chunk in first..=last {
            let chunk_start = chunk * CHUNK_BYTES as u64;
            let chunk_end = chunk_start + CHUNK_BYTES as u64;
            if remembered
                .iter()
                .any(|&(a, b)| a < chunk_end && b > chunk_start)
            {
                continue;
            }
            if offset_bytes <= chunk_start && chunk_end <= end {
                self.chunks.remove(chunk);
            } else {
                let a = offset_bytes.max(chunk_start);
                let b = end.min(chunk_end);
                self.put_zeros(a, b - a);
            }
        }
        self.chunks.give_back(first, last);
    }

    /// A write inside the crash model (see [`SparseStore::read_back`]).
    fn put(&mut self, offset_bytes: u64, data: &[u8]) {
        if let Err(e) = self.chunks.write(offset_bytes, data) {
            panic!("the scratch file of a store failed to take a crash's rollback: {e}");
        }
    }

    /// Zero a range (trim); remembered like a write.
    pub fn zero(&mut self, offset_bytes: u64, len_bytes: u64) -> Result<(), StoreError> {
        let mut at = offset_bytes;
        let end = offset_bytes + len_bytes;
        while at < end {
            let n = (end - at).min(1 << 20);
            self.write(at, &vec![0u8; n as usize])?;
            at += n;
        }
        Ok(())
    }

    /// Everything written so far is durable (orphans excepted, STORE-4).
    pub fn flush(&mut self) {
        let mark = self.flush_mark();
        self.flush_through(mark);
    }

    /// The mark a flush beginning now covers up to: pass it to
    /// [`SparseStore::flush_through`] or [`SparseStore::fail_flush_through`]
    /// when the flush ends.
    pub fn flush_mark(&self) -> u64 {
        self.next_seq
    }

    /// A flush that began at `mark` succeeded: the writes issued before it
    /// are durable, except orphans.
    pub fn flush_through(&mut self, mark: u64) {
        for write in self.unflushed.iter_mut() {
            if write.seq >= mark {
                break;
            }
            if !write.orphaned && !write.durable {
                write.durable = true;
                self.durable_end_bytes = self.durable_end_bytes.max(write.end_bytes());
            }
        }
        self.forget_durable_prefix();
    }

    /// A flush that began at `mark` failed: the writes it covered that are
    /// not yet durable become orphans (STORE-4). Returns how many.
    pub fn fail_flush_through(&mut self, mark: u64) -> usize {
        let mut orphaned = 0;
        for write in self.unflushed.iter_mut() {
            if write.seq >= mark {
                break;
            }
            if !write.durable && !write.orphaned {
                write.orphaned = true;
                orphaned += 1;
            }
        }
        orphaned
    }

    /// Drop durable writes from the front (STORE-3).
    fn forget_durable_prefix(&mut self) {
        while self.unflushed.front().is_some_and(|w| w.durable) {
            let write = self.unflushed.pop_front().expect("front");
            self.unflushed_bytes -= write.len_bytes;
        }
    }

    /// Make the oldest `writes` remembered writes durable (orphans excepted).
    pub fn flush_first(&mut self, writes: usize) {
        let mark = self
            .unflushed
            .get(writes)
            .map(|w| w.seq)
            .unwrap_or(self.next_seq);
        self.flush_through(mark);
    }

    /// Number of writes not yet durable.
    pub fn unflushed_writes(&self) -> usize {
        self.unflushed.iter().filter(|w| !w.durable).count()
    }

    /// Number of orphaned writes (covered by a failed flush).
    pub fn orphaned_writes(&self) -> usize {
        self.unflushed.iter().filter(|w| w.orphaned).count()
    }

    /// True if some write not yet durable changed a byte in `start..end`:
    /// then what a crash leaves there may differ from what reads see now.
    /// A rewrite of identical bytes (a log's tail sector) changes nothing.
    pub fn changed_since_durable(&self, start_bytes: u64, end_bytes: u64) -> bool {
        self.unflushed.iter().enumerate().any(|(index, w)| {
            if w.durable {
                return false;
            }
            let from = w.offset_bytes.max(start_bytes);
            let to = w.end_bytes().min(end_bytes);
            if from >= to {
                return false;
            }
            let mut before = vec![0u8; (to - from) as usize];
            w.before_into(from, to, &mut before);
            before != self.after_range(index, from, to)
        })
    }

    /// Highest end of a range made durable by a flush or kept by a crash.
    pub fn durable_end_bytes(&self) -> u64 {
        self.durable_end_bytes
    }

    /// A crash: every write not yet durable is lost (STORE-1).
    pub fn crash(&mut self) {
        self.crash_with(|_, _| CrashFate::Drop);
    }

    /// A crash where `fate(index, len_bytes)` decides each write not yet
    /// durable (index 0 is the oldest). An older write that is kept survives
    /// under a newer one that is dropped.
    pub fn crash_with(&mut self, mut fate: impl FnMut(usize, u64) -> CrashFate) {
        self.crash_detailed(|w| fate(w.index, w.len_bytes));
    }

    /// A crash where `fate` decides each write not yet durable, seeing where
    /// it went; returns every such write with its fate, oldest first.
    pub fn crash_detailed(
        &mut self,
        mut fate: impl FnMut(&PendingWrite) -> CrashFate,
    ) -> Vec<CrashedWrite> {
        assert!(
            !self.crash_model_off,
            "STORE-6: a store whose crash model is off is never crashed"
        );
        let mut fates = Vec::with_capacity(self.unflushed.len());
        let mut pending = Vec::new();
        for write in &self.unflushed {
            if write.durable {
                fates.push(CrashFate::Keep);
                continue;
            }
            let p = PendingWrite {
                index: pending.len(),
                offset_bytes: write.offset_bytes,
                len_bytes: write.len_bytes,
                orphaned: write.orphaned,
            };
            let f = fate(&p);
            fates.push(f);
            pending.push((p, f));
        }
        let unflushed = std::mem::take(&mut self.unflushed);
        // STORE-1: back to the state before the oldest remembered write,
        // newest first; just before a write is rolled back, its bytes are
        // its after-image (STORE-5).
        let mut afters = vec![Vec::new(); unflushed.len()];
        for (i, write) in unflushed.iter().enumerate().rev() {
            let mut after = vec![0u8; write.len_bytes as usize];
            self.read_back(write.offset_bytes, &mut after);
            afters[i] = after;
            match &write.before {
                Some(bytes) => self.put(write.offset_bytes, bytes),
                None => self.put_zeros(write.offset_bytes, write.len_bytes),
            }
        }
        // ...then forward through what reached the media.
        for ((write, after), fate) in unflushed.iter().zip(&afters).zip(&fates) {
            let kept = match *fate {
                CrashFate::Keep => after.len(),
                CrashFate::Drop => 0,
                CrashFate::Tear { bytes } => (bytes as usize).min(after.len()),
            };
            if kept > 0 {
                self.put(write.offset_bytes, &after[..kept]);
                self.durable_end_bytes =
                    self.durable_end_bytes.max(write.offset_bytes + kept as u64);
            }
        }
        self.unflushed_bytes = 0;
        let mut pending = pending.into_iter();
        unflushed
            .iter()
            .zip(afters)
            .filter(|(write, _)| !write.durable)
            .map(|(write, after)| {
                let (write_seen, fate) = pending.next().expect("one per pending write");
                CrashedWrite {
                    write: write_seen,
                    fate,
                    before: write.before_vec(),
                    after,
                }
            })
            .collect()
    }

    /// Zero `offset_bytes..+len_bytes`, allocating only chunks that exist.
    fn put_zeros(&mut self, offset_bytes: u64, len_bytes: u64) {
        if let Err(e) = self.chunks.zero_held(offset_bytes, len_bytes) {
            panic!("the scratch file of a store failed to take zeros: {e}");
        }
    }

    /// Bytes of written data the store holds (on the heap or in its
    /// scratch files).
    pub fn held_bytes(&self) -> u64 {
        (self.chunks.held().len() * CHUNK_BYTES) as u64
    }
}
