//! A sparse in-memory byte store with crash semantics.
//!
//! Memory and simulated devices keep their contents here. Bytes never
//! written read as zeros; memory grows with what is written, in chunks of
//! [`CHUNK_BYTES`], not with the device's capacity, so a 250 GB disk model
//! costs nothing until used.
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
//! byte written counts as durable. Crash tests keep it on.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::device::Device;

/// Allocation unit of the store.
pub const CHUNK_BYTES: usize = 4096;

/// A chunk of a store's bytes, copied on write when an image shares it.
type Chunk = Arc<[u8; CHUNK_BYTES]>;
/// Most bytes that may be written between two flushes (STORE-2).
pub const UNFLUSHED_BYTES_MAX: u64 = 8 << 30;

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
    chunks: HashMap<u64, Chunk>,
    unflushed: VecDeque<Unflushed>,
    unflushed_bytes: u64,
    next_seq: u64,
    /// Highest end of any byte range that is durable with written data.
    durable_end_bytes: u64,
    /// Writes are not remembered and the store is never crashed (STORE-6).
    crash_model_off: bool,
}

impl SparseStore {
    pub fn new() -> SparseStore {
        SparseStore::default()
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
    pub fn image(&self) -> Option<SparseStore> {
        assert!(
            !self.crash_model_off,
            "STORE-6: a store without a crash model is not imaged (its writes are never unflushed)"
        );
        if !self.unflushed.is_empty() {
            return None;
        }
        Some(SparseStore {
            chunks: self.chunks.clone(),
            durable_end_bytes: self.durable_end_bytes,
            ..SparseStore::default()
        })
    }

    /// The written byte ranges, in address order, each a run of adjacent
    /// chunks: what a device preloaded with this image must have written.
    pub fn written_runs(&self) -> Vec<(u64, u64)> {
        let mut keys: Vec<u64> = self.chunks.keys().copied().collect();
        keys.sort_unstable();
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for key in keys {
            let offset_bytes = key * CHUNK_BYTES as u64;
            match runs.last_mut() {
                Some((start, len)) if *start + *len == offset_bytes => *len += CHUNK_BYTES as u64,
                _ => runs.push((offset_bytes, CHUNK_BYTES as u64)),
            }
        }
        runs
    }

    /// Copy bytes at `offset_bytes` into `buf`.
    pub fn read(&self, offset_bytes: u64, buf: &mut [u8]) {
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset_bytes + done as u64;
            let (chunk, within) = split(at);
            let n = (CHUNK_BYTES - within).min(buf.len() - done);
            match self.chunks.get(&chunk) {
                Some(data) => buf[done..done + n].copy_from_slice(&data[within..within + n]),
                None => buf[done..done + n].fill(0),
            }
            done += n;
        }
    }

    /// Write `data` at `offset_bytes`, remembering what it replaced. Fails
    /// (writing nothing) if the unflushed bytes would pass the limit.
    pub fn write(&mut self, offset_bytes: u64, data: &[u8]) -> Result<(), u64> {
        let len = data.len() as u64;
        if self.crash_model_off {
            self.put(offset_bytes, data);
            self.durable_end_bytes = self.durable_end_bytes.max(offset_bytes + len);
            return Ok(());
        }
        if self.unflushed_bytes + len > UNFLUSHED_BYTES_MAX {
            return Err(UNFLUSHED_BYTES_MAX);
        }
        let before = if self.never_written(offset_bytes, len) {
            None
        } else {
            let mut before = vec![0u8; data.len()];
            self.read(offset_bytes, &mut before);
            Some(before.into_boxed_slice())
        };
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
        self.put(offset_bytes, data);
        Ok(())
    }

    /// True if no chunk holds any byte of `offset_bytes..+len_bytes`.
    fn never_written(&self, offset_bytes: u64, len_bytes: u64) -> bool {
        if len_bytes == 0 {
            return true;
        }
        let first = offset_bytes / CHUNK_BYTES as u64;
        let last = (offset_bytes + len_bytes - 1) / CHUNK_BYTES as u64;
        (first..=last).all(|c| !self.chunks.contains_key(&c))
    }

    /// The after-image of remembered write `index` over `from..to` (inside
    /// it), from later before-images and the current bytes (STORE-5).
    fn after_range(&self, index: usize, from: u64, to: u64) -> Vec<u8> {
        let mut out = vec![0u8; (to - from) as usize];
        self.read(from, &mut out);
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
                self.chunks.remove(&chunk);
            } else if let Some(slot) = self.chunks.get_mut(&chunk) {
                let a = (offset_bytes.max(chunk_start) - chunk_start) as usize;
                let b = (end.min(chunk_end) - chunk_start) as usize;
                Arc::make_mut(slot)[a..b].fill(0);
            }
        }
    }

    fn put(&mut self, offset_bytes: u64, data: &[u8]) {
        let mut done = 0usize;
        while done < data.len() {
            let at = offset_bytes + done as u64;
            let (chunk, within) = split(at);
            let n = (CHUNK_BYTES - within).min(data.len() - done);
            let bytes = &data[done..done + n];
            match self.chunks.entry(chunk) {
                Entry::Occupied(mut slot) => {
                    Arc::make_mut(slot.get_mut())[within..within + n].copy_from_slice(bytes)
                }
                // A whole new chunk is made from the data, not zeroed first.
                Entry::Vacant(slot) if n == CHUNK_BYTES => {
                    let whole: [u8; CHUNK_BYTES] = bytes.try_into().expect("a whole chunk");
                    slot.insert(Arc::new(whole));
                }
                Entry::Vacant(slot) => {
                    let mut fresh = Arc::new([0u8; CHUNK_BYTES]);
                    Arc::make_mut(&mut fresh)[within..within + n].copy_from_slice(bytes);
                    slot.insert(fresh);
                }
            }
            done += n;
        }
    }

    /// Zero a range (trim); remembered like a write.
    pub fn zero(&mut self, offset_bytes: u64, len_bytes: u64) -> Result<(), u64> {
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
            self.read(write.offset_bytes, &mut after);
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
        let end = offset_bytes + len_bytes;
        let mut at = offset_bytes;
        while at < end {
            let (chunk, within) = split(at);
            let n = (CHUNK_BYTES - within).min((end - at) as usize);
            if let Some(slot) = self.chunks.get_mut(&chunk) {
                Arc::make_mut(slot)[within..within + n].fill(0);
            }
            at += n as u64;
        }
    }

    /// Bytes of memory held by data chunks.
    pub fn resident_bytes(&self) -> u64 {
        (self.chunks.len() * CHUNK_BYTES) as u64
    }
}

fn split(offset_bytes: u64) -> (u64, usize) {
    (
        offset_bytes / CHUNK_BYTES as u64,
        (offset_bytes % CHUNK_BYTES as u64) as usize,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each `(offset, len, byte)`: the store's `len` bytes at `offset` all
    /// read `byte`.
    fn assert_runs(store: &SparseStore, runs: &[(u64, usize, u8)]) {
        for &(offset, len, byte) in runs {
            let mut buf = vec![!byte; len];
            store.read(offset, &mut buf);
            assert!(
                buf.iter().all(|&b| b == byte),
                "{len} bytes at {offset} are not all {byte}"
            );
        }
    }

    #[test]
    fn unwritten_reads_zero_and_writes_span_chunks() {
        let mut store = SparseStore::new();
        let mut buf = vec![7u8; 100];
        store.read(10_000, &mut buf);
        assert!(buf.iter().all(|&b| b == 0));
        let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        store.write(4000, &data).unwrap();
        let mut back = vec![0u8; 10_000];
        store.read(4000, &mut back);
        assert_eq!(back, data);
    }

    #[test]
    fn crash_restores_the_last_flushed_state() {
        let mut store = SparseStore::new();
        store.write(0, &[1u8; 512]).unwrap();
        store.flush();
        store.write(0, &[2u8; 512]).unwrap();
        store.write(256, &[3u8; 512]).unwrap();
        store.crash();
        assert_runs(&store, &[(0, 512, 1), (512, 512, 0)]);
    }

    #[test]
    fn torn_write_keeps_only_its_prefix() {
        let mut store = SparseStore::new();
        store.write(0, &[9u8; 1024]).unwrap();
        store.crash_with(|_, _| CrashFate::Tear { bytes: 512 });
        assert_runs(&store, &[(0, 512, 9), (512, 512, 0)]);
    }

    #[test]
    fn kept_old_write_survives_under_dropped_new_one() {
        let mut store = SparseStore::new();
        store.write(0, &[1u8; 512]).unwrap();
        store.write(0, &[2u8; 512]).unwrap();
        store.crash_with(|i, _| {
            if i == 0 {
                CrashFate::Keep
            } else {
                CrashFate::Drop
            }
        });
        assert_runs(&store, &[(0, 512, 1)]);
    }

    #[test]
    fn orphan_stays_lost_under_a_later_durable_write() {
        let mut store = SparseStore::new();
        store.write(0, &[1u8; 1024]).unwrap();
        store.flush();
        // A write covered by a failed flush...
        store.write(0, &[2u8; 1024]).unwrap();
        let mark = store.flush_mark();
        assert_eq!(store.fail_flush_through(mark), 1);
        // ...is not made durable by the next flush, but a newer write is.
        store.write(512, &[3u8; 512]).unwrap();
        store.flush();
        assert_eq!(store.orphaned_writes(), 1);
        let mut buf = vec![0u8; 1024];
        store.read(0, &mut buf);
        assert!(buf[..512].iter().all(|&b| b == 2), "reads see the orphan");
        store.crash();
        store.read(0, &mut buf);
        assert!(buf[..512].iter().all(|&b| b == 1), "the orphan is lost");
        assert!(
            buf[512..].iter().all(|&b| b == 3),
            "the durable write stays"
        );
    }

    #[test]
    fn a_flush_covers_only_writes_issued_before_it_began() {
        let mut store = SparseStore::new();
        store.write(0, &[1u8; 512]).unwrap();
        let early = store.flush_mark();
        store.write(512, &[2u8; 512]).unwrap();
        let late = store.flush_mark();
        store.flush_through(late);
        store.flush_through(early); // the earlier flush ends last
        assert_eq!(store.unflushed_writes(), 0);
        store.write(1024, &[3u8; 512]).unwrap();
        let mark = store.flush_mark();
        store.write(1536, &[4u8; 512]).unwrap();
        store.flush_through(mark);
        store.crash();
        assert_runs(&store, &[(1024, 512, 3), (1536, 512, 0)]);
    }

    #[test]
    fn identical_rewrites_do_not_count_as_changes() {
        let mut store = SparseStore::new();
        store.write(4096, &[5u8; 512]).unwrap();
        store.flush();
        assert_eq!(store.durable_end_bytes(), 4608);
        let mut sector = vec![5u8; 512];
        sector[300..].fill(6);
        store.write(4096, &sector).unwrap();
        assert!(!store.changed_since_durable(4096, 4096 + 300));
        assert!(store.changed_since_durable(4096, 4096 + 301));
    }

    #[test]
    fn crash_detailed_reports_offsets_and_fates() {
        let mut store = SparseStore::new();
        store.write(0, &[1u8; 1024]).unwrap();
        store.write(2048, &[2u8; 1024]).unwrap();
        let fates = store.crash_detailed(|w| {
            if w.offset_bytes == 0 {
                CrashFate::Tear { bytes: 512 }
            } else {
                CrashFate::Keep
            }
        });
        assert_eq!(fates.len(), 2);
        assert_eq!(fates[1].write.offset_bytes, 2048);
        assert_eq!(fates[0].after, vec![1u8; 1024]);
        assert_eq!(fates[1].before, vec![0u8; 1024]);
        assert_eq!(store.durable_end_bytes(), 3072);
        assert_runs(&store, &[(0, 512, 1), (512, 512, 0)]);
    }

    #[test]
    fn after_images_come_from_later_before_images() {
        let mut store = SparseStore::new();
        store.write(0, &[1u8; 1024]).unwrap();
        store.flush();
        store.write(0, &[2u8; 1024]).unwrap(); // before: 1s
        store.write(512, &[3u8; 1024]).unwrap(); // before: 2s then zeros
        store.write(0, &[4u8; 512]).unwrap(); // before: 2s
        let fates = store.crash_detailed(|w| match w.index {
            0 => CrashFate::Keep,
            _ => CrashFate::Drop,
        });
        assert_eq!(fates[0].after, vec![2u8; 1024]);
        let mut second = vec![3u8; 1024];
        assert_eq!(fates[1].after, second);
        second[..512].fill(2);
        second[512..].fill(0);
        assert_eq!(fates[1].before, second);
        assert_eq!(fates[2].after, vec![4u8; 512]);
        // Write 0 kept, write 1 dropped.
        assert_runs(&store, &[(0, 1024, 2), (1024, 512, 0)]);
    }

    #[test]
    fn writes_to_fresh_bytes_keep_no_before_image() {
        let mut store = SparseStore::new();
        store.write(0, &[1u8; 8192]).unwrap();
        assert!(store.unflushed[0].before.is_none());
        store.write(4096, &[2u8; 512]).unwrap();
        assert!(store.unflushed[1].before.is_some());
        assert!(store.changed_since_durable(0, 1));
        store.flush();
        assert!(!store.changed_since_durable(0, 8192));
    }

    #[test]
    fn a_store_without_crash_model_remembers_nothing_and_reads_back_every_write() {
        let mut store = SparseStore::new();
        store.turn_off_crash_model();
        // A whole chunk, a part of one, and an overwrite across two.
        store.write(0, &[1u8; CHUNK_BYTES]).unwrap();
        store.write(CHUNK_BYTES as u64 + 100, &[2u8; 50]).unwrap();
        store.write(CHUNK_BYTES as u64 - 10, &[3u8; 20]).unwrap();
        assert_eq!(store.unflushed_writes(), 0);
        assert_eq!(store.unflushed_bytes, 0);
        assert_eq!(store.durable_end_bytes(), CHUNK_BYTES as u64 + 150);
        let mut buf = vec![9u8; 2 * CHUNK_BYTES];
        store.read(0, &mut buf);
        let mut want = vec![0u8; 2 * CHUNK_BYTES];
        want[..CHUNK_BYTES].fill(1);
        want[CHUNK_BYTES + 100..CHUNK_BYTES + 150].fill(2);
        want[CHUNK_BYTES - 10..CHUNK_BYTES + 10].fill(3);
        assert_eq!(buf, want);
        store.flush();
        assert_eq!(store.unflushed_writes(), 0);
    }

    #[test]
    #[should_panic(expected = "STORE-6")]
    fn a_store_without_crash_model_refuses_an_image() {
        let mut store = SparseStore::new();
        store.turn_off_crash_model();
        store.write(0, &[1u8; 512]).unwrap();
        let _ = store.image();
    }

    #[test]
    #[should_panic(expected = "STORE-6")]
    fn a_store_without_crash_model_refuses_a_crash() {
        let mut store = SparseStore::new();
        store.turn_off_crash_model();
        store.write(0, &[1u8; 512]).unwrap();
        store.crash();
    }

    #[test]
    fn an_image_shares_chunks_until_either_side_writes_them() {
        let mut store = SparseStore::new();
        store.write(0, &[1u8; 2 * CHUNK_BYTES]).unwrap();
        store.flush();
        let mut image = store.image().expect("flushed");
        // Each side's writes stay its own.
        store.write(100, &[2u8; 10]).unwrap();
        image.write(CHUNK_BYTES as u64 + 100, &[3u8; 10]).unwrap();
        image.forget(0, 50);
        let read = |s: &SparseStore, at: u64| {
            let mut byte = [9u8; 1];
            s.read(at, &mut byte);
            byte[0]
        };
        assert_eq!((read(&store, 100), read(&image, 100)), (2, 1));
        assert_eq!(
            (
                read(&store, CHUNK_BYTES as u64 + 100),
                read(&image, CHUNK_BYTES as u64 + 100)
            ),
            (1, 3)
        );
        assert_eq!((read(&store, 0), read(&image, 0)), (1, 0));
        // A crash of the original rolls back only its own write.
        store.crash();
        assert_eq!(read(&store, 100), 1);
        assert_eq!(read(&image, CHUNK_BYTES as u64 + 100), 3);
    }

    #[test]
    fn forget_frees_chunks_but_not_remembered_ones() {
        let mut store = SparseStore::new();
        store.write(0, &[1u8; 4 * CHUNK_BYTES]).unwrap();
        store.flush();
        store.write(3 * CHUNK_BYTES as u64, &[2u8; 512]).unwrap();
        assert_eq!(store.resident_bytes(), 4 * CHUNK_BYTES as u64);
        // Half of chunk 0 is zeroed, chunks 1 and 2 freed, chunk 3 kept:
        // an unflushed write needs its bytes.
        store.forget(2048, 4 * CHUNK_BYTES as u64 - 2048);
        assert_eq!(store.resident_bytes(), 2 * CHUNK_BYTES as u64);
        let chunk3 = 3 * CHUNK_BYTES as u64;
        assert_runs(&store, &[(0, 2048, 1), (2048, 2048, 0), (chunk3, 512, 2)]);
        store.crash();
        // The remembered write rolls back.
        assert_runs(&store, &[(chunk3, 4096, 1)]);
    }
}
