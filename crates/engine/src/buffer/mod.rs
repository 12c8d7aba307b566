//! # The buffer pool: pages in memory, one pool per page size
//!
//! Every page the engine reads or changes passes through a buffer pool. A
//! pool holds a fixed number of *frames* of one page size; the data spaces
//! of that size share it (petrov2010 argues for one pool per page size, as
//! Oracle does, so that a 4 KB index space and a 16 KB table space each get
//! frames that fit). Page `n` of a space lives at device offset
//! `n * page_bytes` of the space's device.
//!
//! **Policy: steal, no-force.** A dirty page may be written before its
//! transaction commits (steal), and commit does not write pages (no-force):
//! durability comes from the log. The one rule that makes this safe is
//! write-ahead logging: before a page goes to its device, the log is forced
//! up to the page's LSN ([`LogForce::flush_to`]), so that redo can always
//! rebuild the page and undo always finds the before-images it needs.
//!
//! **Replacement: CLOCK.** A miss sweeps a hand over the frames, skipping
//! pinned ones and giving recently used ones a second chance. A dirty victim
//! is written back first. Keeping clean victims available is the job of the
//! page cleaner ([`BufferPool::spawn_page_cleaner`], `cleaner.rs`): each
//! round it writes, in sorted batches, the dirty frames the hand reaches
//! next (up to the *clean target*, a share of the frames) and the dirty
//! pages with the oldest *rec_lsn* (the LSN of the first change not yet
//! written), so that the checkpoint's redo start keeps moving forward. A
//! miss that meets a dirty victim looks that far further along the hand
//! for a clean one and wakes the cleaner; it writes the victim itself (a
//! *foreground dirty eviction*) only if none is there.
//!
//! **Read-ahead.** A space missed in page order is read ahead in one large
//! request (see `read_ahead.rs`; off unless [`BufferPool::set_read_ahead_bytes`]
//! turns it on, as the database does from its configuration).
//!
//! **Concurrency.** One metadata lock (a runtime mutex) guards the frame
//! states, dirty state, write-backs, the CLOCK hand and the counters of
//! misses and I/O; it is held only for bookkeeping, never across I/O. A
//! miss marks its frame *Loading*, releases the lock, reads and verifies,
//! and re-locks to publish the page; other fetches of the same page wait on
//! a runtime condition variable for that one read.
//!
//! A hit and an unpin take no lock at all: they are the common case, and
//! with one pool-wide lock sixteen clients queued on it; with a lock per
//! shard of the page table, the cores still took each other's lock lines
//! on every visit of a tree's root. A lock-free index (`table.rs`, open
//! addressing over atomic words, written only under the metadata lock)
//! names the frame a page is probably in, and each frame has a *pin word*:
//! its pin count, a Ready bit and a generation that grows each time the
//! frame is given to a page. A hit checks that the frame is Ready and
//! names its page, then pins with one compare-and-swap of the word it
//! read, which fails if the frame left Ready or changed page meanwhile; an
//! unpin decrements the count. An eviction takes a frame out of Ready with
//! a swap that expects no pins, so a hit racing an eviction either holds a
//! pin the evictor's swap sees (and the hand goes on) or fails its own
//! swap (and misses). A pin count that drops to 0 without any lock only
//! ever makes a frame evictable sooner, never later. A miss, and any hit
//! that found nothing, runs under the metadata lock and looks the page up
//! in the exact page table there, so no two misses of one page both load
//! it.
//!
//! Page bytes live behind a runtime reader-writer lock per frame:
//! [`PageRef::read`] takes it shared (sixteen clients descending a B+tree
//! read its root at once), a write-back shares it to copy the image out,
//! and a load, [`PageRef::install`] and a renewal take it exclusive. A
//! closure given to [`PageRef::read`] may fetch other pages, but must not
//! flush or write back the page it reads, nor read it again (a writer
//! queued between the two shared holds would wait for the first).
//!
//! Invariants (BUF-n):
//! 1. A pinned frame is never evicted, discarded or given to another page.
//! 2. A dirty page is written to its device only after `log.flush_to(lsn)`
//!    returned for the page LSN of the very image written (PAGE-2).
//! 3. The page table maps each page to at most one frame and each frame
//!    holds at most one page; `table[id] == f` exactly when frame `f` holds
//!    `id`.
//! 4. The metadata lock is never held across device I/O, a log force, a
//!    condition-variable wait, or while waiting for a frame's data lock
//!    (lock order: BUF-13).
//! 5. A page becomes visible (Ready) only after its read passed
//!    `page::verify` (PAGE-1); a failed read leaves no trace in the table.
//! 6. At most one write of a frame is in flight (a claimed write-back or an
//!    eviction), so an older image never overwrites a newer one.
//! 7. A page is dirty exactly when it holds changes not yet written; its
//!    rec_lsn is the LSN of the earliest of them (never above the page LSN).
//!    A write-back clears dirty only if nothing was installed since its copy
//!    (an install counter is compared, which also covers equal LSNs).
//! 8. A miss never waits for an unpin: with every frame pinned it fails at
//!    once with an "exhausted" error.
//! 9. A page found damaged on its device is rebuilt from the log (logged
//!    spaces, [`LogForce::rebuild_page`]) or reported; never returned.
//! 10. An *append page* (installed with [`PageRef::install_append`], the
//!     rollback segments' pages) is written once, when full: neither the
//!     page cleaner nor `flush_all` writes it until its owner seals it
//!     ([`BufferPool::seal_append`]). Only an eviction writes it earlier
//!     (its frame was needed while its segment sat idle and unpinned).
//! 11. The CLOCK hand is always a frame index.
//! 12. The metadata's age index holds exactly the dirty frames, each once,
//!     under its current rec_lsn, so the page cleaner finds the
//!     oldest dirty pages without a pass over the page table.
//! 13. Lock order: a frame's data lock, then the metadata lock. Nothing
//!     else is taken under the metadata lock; a hit, an unpin and an
//!     install into an open frame (BUF-17) take no lock.
//! 14. Under the metadata lock, the index holds exactly the page table
//!     (page `id` at frame `f` exactly when the table maps `id` to `f`),
//!     frame `f` names `id` in its pin word's page, and its Ready bit is set
//!     exactly when frame `f` is Ready. Only the metadata lock's holder
//!     changes any of them; a hit reads them as a hint and trusts only its
//!     compare-and-swap of the pin word.
//! 15. A pin is taken only on a Ready frame, by a compare-and-swap of the
//!     pin word that expects the generation read with the frame's page name
//!     (a hit), under the metadata lock (the exact lookup), or by the
//!     loader when the page is mapped; it is dropped with no lock. A frame
//!     leaves Ready (for eviction or a discard) only by a swap that expects
//!     0 pins, so BUF-1 holds without the metadata lock on the hit path, and
//!     a frame that is not Ready has an exact pin count.
//! 16. A frame's bytes are read under its data lock shared, and changed
//!     (load, install, renewal) only under it exclusive; a write-back's copy
//!     and the metadata it notes are taken under the shared lock, so no
//!     install falls between them (BUF-7).
//! 17. A frame is *open* (its hot line's open word) exactly when it is
//!     Ready, dirty and has no write-back claimed or in flight, as the
//!     metadata lock's holder last set it. An install into an open frame
//!     only counts itself and raises the page LSN in the hot line, without
//!     the metadata lock: its rec_lsn stays, being the earliest. A
//!     write-back closes the frame when it claims it, then copies under the
//!     data lock shared, which waits for any install that saw the frame
//!     open, so the copy's install count includes that install; every
//!     install after the claim takes the metadata lock and so reaches the
//!     write's `next_rec_lsn` (BUF-7).
//! 18. A logged page read from its device never has a page LSN past the
//!     end of the log: the WAL rule wrote it only once the log was durable
//!     that far, so such a page proves that the log lost its tail (an older
//!     copy of the log, a zeroed or truncated tail). The read is refused as
//!     damage naming the page, its LSN and the log's end, and so no install
//!     can land behind a page LSN read from disk (BUF-7's assertion is the
//!     engine's own logic again, never what a file holds).
//!
//! Invariants of the page cleaner (CLEAN-n):
//! 1. The cleaner writes only frames that, under the metadata lock of its
//!    scan, were Ready, dirty, unpinned, with no write in flight (BUF-6)
//!    and not append pages still being filled (BUF-10); a batch claims each
//!    again under the lock and skips any that changed meanwhile.
//! 2. A cleaner batch holds at most `cleaner_batch_pages` pages, sorted by
//!    page (so by address in an in-place space), and goes to the device
//!    only after one log force to the highest page LSN of its images
//!    (BUF-2).
//! 3. The cleaner never evicts, maps or unmaps a frame: it only makes dirty
//!    frames clean where they are (BUF-1 and BUF-3 are the miss's alone).
//! 4. The scan depth (`clean_target` of the frames, rounded up) is below
//!    the number of frames, and 0 while no cleaner runs: then a miss
//!    behaves as plain CLOCK.
//! 5. A miss that meets a dirty victim passes it for up to the scan depth
//!    more frames, takes a clean victim found there, and wakes the cleaner
//!    (after releasing the metadata lock, BUF-13); with none found it
//!    evicts the first dirty victim it passed, writing it itself, and
//!    counts a foreground dirty eviction. If looking ahead finds no victim
//!    at all, the miss sweeps again without it, so BUF-8 holds.
//! 6. `cleaner_pages + foreground_dirty_evictions <= writes`,
//!    `cleaner_requests <= cleaner_pages` and
//!    `foreground_dirty_evictions <= evictions`.
//! 7. The cleaner's tasks own disjoint shares of the frames: a frame
//!    holding a page belongs to the task of the page's extent
//!    (`CLEANER_EXTENT_PAGES` pages, space plus extent modulo the tasks), a
//!    free frame to the task of its number modulo the tasks. Each scans and
//!    writes only its own, so no two of them claim one frame, together
//!    they cover every frame, and a batch's neighbours are one task's.
//! 8. The oldest dirty pages are written once per `cleaner_interval_ns`
//!    (the pool's `cleaner_batch_pages` oldest: each task writes its own
//!    pages up to the LSN of the pool's `cleaner_batch_pages`-th oldest, so
//!    the owner of the oldest extent writes its neighbours in one batch), whatever
//!    the misses' wake-ups: those rounds scan ahead of the hand only, so
//!    a busy pool does not rewrite its hot pages at every wake-up.
//! 9. The scan ahead of the hand takes nothing while half its share of
//!    the depth or more is clean: a round that writes from the scan cleans
//!    from below half the depth up to all of it, so its batches hold at
//!    least half the depth's dirty frames (or all there are), never a page
//!    or two per miss.
//!
//! **Checking.** The O(1) checks of these invariants are `assert!`s, on in
//! every build. [`BufferPool::check`] verifies the whole state (page table
//! and its index against frames, pins, dirty state, write-backs, the CLOCK
//! hand); in the simulated world with debug assertions on (the `crash`
//! profile, debug builds) the pool runs it after every state change and
//! unpin. Release builds in either world never run it on their own: it is
//! O(frames).

mod batch;
mod cleaner;
mod io;
mod meta;
mod read_ahead;
mod table;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use flashlab_devices::DeviceRef;
use flashlab_runtime::{Condvar, Mutex, Rt, RwLock, World};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::page::{self, PAGE_BODY_OFFSET, PageId, SpaceId};
use crate::store::{InPlaceStore, PageStore};
pub use cleaner::{
    BufferConfig, CLEAN_TARGET_DEFAULT, CLEANER_BATCH_PAGES_DEFAULT, CLEANER_BATCH_PAGES_MAX,
    CLEANER_INTERVAL_MIN_NS, CLEANER_INTERVAL_NS_DEFAULT, CLEANER_INTERVAL_NS_MAX,
    CLEANER_TASK_NAME, CLEANER_TASKS, CleanerReport, WriterStop,
};
use io::{Source, Wait};
use meta::{Meta, Space};
pub use read_ahead::READ_AHEAD_BYTES_MAX;
use table::Hot;
pub use table::INDEX_SLOTS_PER_FRAME;

/// The smallest pool, in frames: a B+tree split pins a handful of pages.
pub const FRAMES_MIN: usize = 8;

pub use crate::force::LogForce;

/// What a pool counted since it was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BufferStats {
    /// Fetches that found the page resident (or being read by another task).
    pub hits: u64,
    /// Fetches that had to take a frame for the page.
    pub misses: u64,
    /// Pages read from devices.
    pub reads: u64,
    /// Pages written to devices.
    pub writes: u64,
    /// Frames taken from one page for another.
    pub evictions: u64,
    /// Evictions that first had to write the victim back themselves: a
    /// miss (or a tree operation making room) that found no clean victim
    /// within the scan depth (CLEAN-5).
    pub foreground_dirty_evictions: u64,
    /// Pages the page cleaner wrote, in its batches.
    pub cleaner_pages: u64,
    /// Device requests those batches took (fewer than the pages when the
    /// write scheduler merged neighbours).
    pub cleaner_requests: u64,
    /// Pages found damaged on their device and rebuilt from the log (BUF-9).
    pub repairs: u64,
}

/// A buffer pool for one page size. See the module documentation.
pub struct BufferPool {
    core: Arc<Core>,
}

/// The pool's shared state; page handles keep it alive.
struct Core {
    page_bytes: usize,
    meta: Mutex<Meta>,
    /// The lock-free page index, pin words and reference bits: what a hit and an
    /// unpin touch, without the metadata lock (BUF-14, BUF-15). The
    /// metadata holds the same.
    hot: Arc<Hot>,
    /// The registered spaces, read by every miss and change, written by a
    /// registration: readers share the lock, and it is apart from the
    /// metadata lock.
    spaces: RwLock<BTreeMap<SpaceId, Arc<Space>>>,
    /// Run the whole check after an unpin too (as [`Meta::checking`]).
    checking: bool,
    /// Notified whenever a frame's load, write-back or eviction ends.
    changed: Condvar,
    /// Stops the page cleaner, or wakes it for a round (`cleaner.rs`).
    cleaner: cleaner::CleanerSignal,
    /// Page bytes per frame, allocated on first use; readers share them,
    /// a load, an install or a renewal holds them alone (BUF-16).
    data: Vec<RwLock<Vec<u8>>>,
    log: Arc<dyn LogForce>,
    /// The database's CPU prices (none until a database sets them): page
    /// accesses and page I/O are owed at them ([`crate::cpu_prices`]).
    cpu: std::sync::OnceLock<Arc<crate::cpu_prices::CpuPrices>>,
    /// Pages read ahead after a sequential miss; 0: off (`read_ahead`).
    read_ahead_pages: std::sync::atomic::AtomicUsize,
    /// The last page of the newest read-ahead window, packed
    /// (`read_ahead::marker_of`): a hit on it reads the next window.
    ahead_marker: std::sync::atomic::AtomicU64,
    /// The elevator stage batched write-backs go through; `None`: off
    /// (`batch.rs`). Read once per batch, never held across I/O.
    write_scheduler: std::sync::Mutex<Option<flashlab_devices::scheduler::SchedulerConfig>>,
}

impl BufferPool {
    /// A pool of `capacity_bytes / page_bytes` frames. Fails with a
    /// configuration error for a bad page size or fewer than [`FRAMES_MIN`]
    /// frames.
    pub fn new(
        page_bytes: usize,
        capacity_bytes: u64,
        log: Arc<dyn LogForce>,
    ) -> Result<BufferPool> {
        page::validate_page_bytes(page_bytes)?;
        let frames = frames_for(page_bytes, capacity_bytes)?;
        let hot = Arc::new(Hot::new(frames));
        let checking = checks_every_change();
        Ok(BufferPool {
            core: Arc::new(Core {
                page_bytes,
                meta: Mutex::new(Meta::new(frames, hot.clone(), checking)),
                hot,
                spaces: RwLock::new(BTreeMap::new()),
                checking,
                changed: Condvar::new(),
                cleaner: cleaner::CleanerSignal::default(),
                data: (0..frames).map(|_| RwLock::new(Vec::new())).collect(),
                log,
                cpu: std::sync::OnceLock::new(),
                read_ahead_pages: std::sync::atomic::AtomicUsize::new(0),
                ahead_marker: std::sync::atomic::AtomicU64::new(read_ahead::NO_MARKER),
                write_scheduler: std::sync::Mutex::new(None),
            }),
        })
    }

    /// Owe page accesses and I/O at the database's `prices` from now on
    /// (once; a pool serves one database).
    pub fn set_cpu_prices(&self, prices: Arc<crate::cpu_prices::CpuPrices>) {
        let _ = self.core.cpu.set(prices);
    }

    /// The page size of this pool.
    pub fn page_bytes(&self) -> usize {
        self.core.page_bytes
    }

    /// The number of frames.
    pub fn frames(&self) -> usize {
        self.core.data.len()
    }

    /// Send the page cleaner's and the checkpoint's write-backs
    /// through an elevator stage that sorts and merges them (`batch.rs`);
    /// `None` (the default) writes them one request each.
    pub fn set_write_scheduler(
        &self,
        scheduler: Option<flashlab_devices::scheduler::SchedulerConfig>,
    ) {
        *self
            .core
            .write_scheduler
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = scheduler;
    }

    /// Read up to `bytes` ahead, in one request, when a space is missed in
    /// page order (see `read_ahead.rs`); 0 turns read-ahead off (the
    /// default). At most a quarter of the pool is read ahead at once.
    pub fn set_read_ahead_bytes(&self, bytes: u64) {
        let pages = (bytes.min(READ_AHEAD_BYTES_MAX) / self.core.page_bytes as u64) as usize;
        let pages = pages.min(self.core.data.len() / 4);
        self.core
            .read_ahead_pages
            .store(pages, std::sync::atomic::Ordering::Relaxed);
    }

    /// Let the pool hold pages of `space`, stored on `device`; `name` names
    /// the space in errors. Fails if the id is taken or the device's sector
    /// does not divide the page size. A damaged page of such a space is
    /// reported, never rebuilt (its changes may not all be logged).
    pub fn register_space(&self, space: SpaceId, name: &str, device: DeviceRef) -> Result<()> {
        let store = Arc::new(InPlaceStore::new(device, self.core.page_bytes, None));
        self.register(space, name, store, false)
    }

    /// Register a data space whose pages live in `store`, every change of
    /// which is logged from the page's first zero state on: a damaged page
    /// of it is rebuilt from the log (BUF-9).
    pub fn register_logged_space(
        &self,
        space: SpaceId,
        name: &str,
        store: Arc<dyn PageStore>,
    ) -> Result<()> {
        self.register(space, name, store, true)
    }

    fn register(
        &self,
        space: SpaceId,
        name: &str,
        store: Arc<dyn PageStore>,
        logged: bool,
    ) -> Result<()> {
        let device = store.device();
        let sector_bytes = device.sector_bytes() as usize;
        if self.core.page_bytes.checked_rem(sector_bytes) != Some(0) {
            return Err(Error::Config(format!(
                "space '{name}': device '{}' has {sector_bytes}-byte sectors, which do not divide the pool's {}-byte pages",
                device.name(),
                self.core.page_bytes
            )));
        }
        if store.info().page_bytes != self.core.page_bytes {
            return Err(Error::Config(format!(
                "space '{name}': its store has {}-byte pages, the pool {}-byte pages",
                store.info().page_bytes,
                self.core.page_bytes
            )));
        }
        let entry = Space {
            name: name.to_string(),
            store,
            logged,
            last_miss: std::sync::atomic::AtomicU64::new(read_ahead::NO_MISS),
        };
        let mut spaces = self.core.spaces.write();
        if spaces.contains_key(&space) {
            return Err(Error::Invalid(format!(
                "space {space} ('{name}') is already registered with the buffer pool of {}-byte pages",
                self.core.page_bytes
            )));
        }
        spaces.insert(space, Arc::new(entry));
        Ok(())
    }

    /// Pin page `id`, reading and verifying it on a miss (PAGE-1).
    pub fn fetch(&self, id: PageId) -> Result<PageRef> {
        self.core.fetch(id, Source::Device)
    }

    /// Pin page `id`, which was just allocated beyond anything ever written:
    /// no read, the frame starts as zeros with the id set.
    pub fn fetch_new(&self, id: PageId) -> Result<PageRef> {
        self.core.fetch(id, Source::Zero)
    }

    /// Pin page `id` to overwrite it whole: as it is if resident, else a
    /// frame of zeros with the id set. The device is never read, so a page
    /// whose stored copy is torn or stale is no error here.
    pub fn fetch_to_overwrite(&self, id: PageId) -> Result<PageRef> {
        self.core.fetch(id, Source::Overwrite)
    }

    /// Pin page `id` if it is resident; never waits or does I/O.
    pub fn fetch_resident(&self, id: PageId) -> Option<PageRef> {
        self.core.fetch_resident(id)
    }

    /// Run `f` on page `id`'s bytes if it is resident and ready, pinned and
    /// under its frame's data lock, as [`BufferPool::fetch_resident`] and
    /// [`PageRef::read`] would (the same pin, lock and unpin), but with no
    /// handle: nothing is added to the count of the pool's owners, a line
    /// every core's page visits would otherwise share. `None`, and `f` not
    /// run, if the page is not resident or still loading; it does no I/O
    /// and waits only for the frame's data lock, as a read does.
    pub fn visit_resident<R>(&self, id: PageId, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        self.visit_frame(id, |data, _| f(data))
    }

    /// [`BufferPool::visit_resident`], with the residency it visited
    /// ([`PageRef::residency`]).
    pub fn visit_resident_tagged<R>(
        &self,
        id: PageId,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Option<(R, u64)> {
        self.visit_frame(id, |data, frame| (f(data), self.core.hot.residency(frame)))
    }

    /// Pin `id`'s frame if it is resident and Ready, and run `f` on its
    /// bytes (and its frame number) under the frame's data lock.
    fn visit_frame<R>(&self, id: PageId, f: impl FnOnce(&[u8], usize) -> R) -> Option<R> {
        // As `fetch_resident`: the read-ahead marker is left to a fetch.
        if self.core.is_marker(id) {
            return None;
        }
        let frame = self.core.hot.pin_if_ready(id)?;
        self.core.owe_page_access();
        // Unpinned on the way out, a panic of `f` included (BUF-1).
        let _pin = FramePin {
            core: &self.core,
            frame,
            id,
        };
        let data = self.core.data[frame].read();
        Some(f(&data, frame))
    }

    /// [`BufferPool::fetch_new`] if it needs no I/O (the page is resident or
    /// a clean frame is free); `None` otherwise.
    pub fn fetch_new_no_io(&self, id: PageId) -> Result<Option<PageRef>> {
        self.core.fetch_new_no_io(id)
    }

    /// Write back and free one dirty victim if the CLOCK hand meets one, so
    /// that a following [`BufferPool::fetch_new_no_io`] finds a clean frame.
    pub fn make_room(&self) -> Result<()> {
        self.core.make_room()
    }

    /// Write every page dirty at the call and flush every registered
    /// device (checkpoint, shutdown). Pages changed during the call may stay
    /// dirty, and so do append pages not yet sealed (BUF-10).
    pub fn flush_all(&self) -> Result<()> {
        self.core.flush_all()
    }

    /// The dirty page table: every dirty page with its rec_lsn, by page id.
    pub fn dirty_pages(&self) -> Vec<(PageId, u64)> {
        let meta = self.core.meta.lock();
        meta.dirty_frames()
            .into_iter()
            .map(|(id, rec_lsn, _)| (id, rec_lsn))
            .collect()
    }

    /// Write up to `max_pages` dirty pages with the smallest rec_lsn,
    /// skipping pages with a write already in flight. Returns how many this
    /// call wrote. Devices are not flushed.
    pub fn write_back_oldest(&self, max_pages: usize) -> Result<usize> {
        self.core.write_back_oldest(max_pages)
    }

    /// Write page `id` now if it is resident and dirty, first waiting out a
    /// write already in flight on it. Devices are not flushed. True if this
    /// call wrote the page.
    pub fn write_back_page(&self, id: PageId) -> Result<bool> {
        let frame = self.core.meta.lock().lookup(id);
        match frame {
            Some(frame) => self.core.write_back(frame, id, Wait::Yes),
            None => Ok(false),
        }
    }

    /// Forget every page without writing it, as a crash would. Pages that
    /// are pinned or have I/O in flight are kept (BUF-1) and named in the
    /// error; stop the page cleaner and drop page handles first.
    pub fn discard_all(&self) -> Result<()> {
        let kept = self.core.meta.lock().discard_idle();
        if kept.is_empty() {
            return Ok(());
        }
        let names: Vec<String> = kept.iter().map(PageId::to_string).collect();
        Err(Error::Invalid(format!(
            "discard_all kept {} pinned or busy pages: {}",
            kept.len(),
            names.join(", ")
        )))
    }

    /// The counters so far.
    pub fn stats(&self) -> BufferStats {
        let mut stats = self.core.meta.lock().stats;
        stats.hits = self.core.hot.hits();
        stats
    }

    /// The owner of append page `id` filled it (BUF-10): from now on the
    /// page cleaner and `flush_all` write it like any dirty page. A
    /// page no longer resident was written when it was evicted.
    pub fn seal_append(&self, id: PageId) {
        let mut meta = self.core.meta.lock();
        if let Some(frame) = meta.lookup(id) {
            meta.seal_append(frame);
        }
    }

    /// Verify the pool's whole state: the page table maps each page to the
    /// one frame holding it (BUF-3), and so does the lock-free index, with
    /// Ready bits that match the frames (BUF-14); free frames hold nothing; loading
    /// frames are pinned and evicting ones are not (BUF-1); only dirty
    /// frames have a write-back in flight (BUF-6); a dirty frame's rec_lsn
    /// is not after its page LSN, a clean one has none (BUF-7, the part of
    /// the WAL rule the pool sees without the log); the CLOCK hand is a
    /// frame (BUF-11); the cleaner's scan depth and counters fit the pool
    /// (CLEAN-4, CLEAN-6). O(frames). The error names the invariant.
    pub fn check(&self) -> Result<()> {
        self.core
            .meta
            .lock()
            .check()
            .map_err(|e| Error::Invalid(format!("buffer pool state broken: {e}")))
    }
}

/// Whether a new pool checks its whole state after every change: in the
/// simulated world with debug assertions on (never in release builds, nor
/// in the real world, where it would cost O(frames) per page access).
fn checks_every_change() -> bool {
    cfg!(debug_assertions) && Rt::try_current().is_some_and(|rt| rt.world() == World::Simulated)
}

fn frames_for(page_bytes: usize, capacity_bytes: u64) -> Result<usize> {
    let frames = capacity_bytes / page_bytes as u64;
    if frames < FRAMES_MIN as u64 {
        return Err(Error::Config(format!(
            "buffer pool of {capacity_bytes} bytes holds {frames} frames of {page_bytes}-byte pages; the minimum is {FRAMES_MIN} frames ({} bytes)",
            FRAMES_MIN * page_bytes
        )));
    }
    usize::try_from(frames).map_err(|_| {
        Error::Config(format!(
            "buffer pool of {capacity_bytes} bytes has more frames than this machine can address"
        ))
    })
}

/// A pinned page. While it lives its frame holds this page (BUF-1); it
/// unpins on drop.
pub struct PageRef {
    core: Arc<Core>,
    frame: usize,
    id: PageId,
}

impl PageRef {
    /// This residency of the page: its frame and the frame's generation.
    /// Two pins of the page with the same residency saw the same load of
    /// it; an eviction and a read back between them give another.
    pub fn residency(&self) -> u64 {
        self.core.hot.residency(self.frame)
    }

    /// The page's id.
    pub fn id(&self) -> PageId {
        self.id
    }

    /// Run `f` on the page's bytes (header included), holding the frame's
    /// data lock.
    pub fn read<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        let data = self.core.data[self.frame].read();
        f(&data)
    }

    /// The page LSN.
    pub fn lsn(&self) -> u64 {
        self.read(page::lsn)
    }

    /// Install a new image, produced by a change logged at `lsn`: bytes from
    /// `PAGE_BODY_OFFSET` on are copied; the header keeps the pool's bytes
    /// except the id and the page LSN, which becomes `lsn`. Marks the page
    /// dirty; if it was clean, `lsn` becomes its rec_lsn (BUF-7).
    ///
    /// Infallible, because it runs after the change is logged. An image of
    /// the wrong size or an LSN behind the page LSN is a bug of the caller,
    /// and panics (BUF-7).
    pub fn install(&self, new_image: &[u8], record_lsn: u64, lsn: u64) {
        self.install_as(new_image, record_lsn, lsn, false);
    }

    /// Tell the page's store that a change of transaction `txn` turns the
    /// page from `before` into `after` (installed next, at page LSN
    /// `lsn`), if the store keeps a log of each page's changes
    /// ([`crate::store::PageLog::note_update`]). No I/O.
    pub fn note_update(&self, txn: u64, lsn: u64, before: &[u8], after: &[u8]) {
        if let Ok(space) = self.core.space_of(self.id)
            && let Some(page_log) = space.store.page_log()
        {
            page_log.note_update(self.id.page_no, txn, lsn, before, after);
        }
    }

    /// Install a new image of an append page still being filled (a
    /// rollback segment's current page, not logged: LSN 0). The page is
    /// dirty, but written only once sealed ([`BufferPool::seal_append`]) or
    /// evicted (BUF-10).
    pub fn install_append(&self, new_image: &[u8]) {
        self.install_as(new_image, 0, 0, true);
    }

    /// [`PageRef::install_append`] of an image that differs from the frame
    /// only in `changed` (a record appended to a page the frame already
    /// holds): only those bytes are copied. Debug builds check the rest.
    pub fn install_append_range(&self, new_image: &[u8], changed: std::ops::Range<usize>) {
        self.install_with(new_image.len(), 0, 0, true, |data| {
            assert!(
                changed.start >= PAGE_BODY_OFFSET && changed.end <= data.len(),
                "BUF-10: page {}: an append outside the body",
                self.id
            );
            data[changed.clone()].copy_from_slice(&new_image[changed.clone()]);
            debug_assert!(
                data[PAGE_BODY_OFFSET..] == new_image[PAGE_BODY_OFFSET..],
                "BUF-10: page {}: the frame differs from its append image beyond the record",
                self.id
            );
        });
    }

    /// [`PageRef::install`] of an image the caller owns and gives up: the
    /// frame takes the image's buffer and hands its old one back in
    /// `new_image` (a swap, where an install copies a page). The header
    /// before `PAGE_BODY_OFFSET` is the pool's and stays the frame's.
    /// A buffer whose allocation is not the frame's size is copied from
    /// instead, so that a frame's memory stays its page's size.
    pub fn install_owned(&self, new_image: &mut Vec<u8>, record_lsn: u64, lsn: u64) {
        self.install_with(new_image.len(), record_lsn, lsn, false, |data| {
            if new_image.capacity() != data.capacity() {
                return copy_body(data, new_image);
            }
            let header = PAGE_BODY_OFFSET.min(data.len());
            new_image[..header].copy_from_slice(&data[..header]);
            std::mem::swap(data, new_image);
        });
    }

    /// [`PageRef::install`] of a change that overwrote `bytes.len()` bytes
    /// at `offset_bytes` of the page, in the body, and nothing else: the
    /// bytes are written into the frame, which needs no copy of the page.
    pub fn install_in_place(&self, offset_bytes: usize, bytes: &[u8], record_lsn: u64, lsn: u64) {
        self.install_with(self.core.page_bytes, record_lsn, lsn, false, |data| {
            assert!(
                offset_bytes >= PAGE_BODY_OFFSET && offset_bytes + bytes.len() <= data.len(),
                "MTR-1: page {}: {} bytes at {offset_bytes} are not in the body",
                self.id,
                bytes.len()
            );
            data[offset_bytes..offset_bytes + bytes.len()].copy_from_slice(bytes);
        });
    }

    fn install_as(&self, new_image: &[u8], record_lsn: u64, lsn: u64, appending: bool) {
        self.install_with(new_image.len(), record_lsn, lsn, appending, |data| {
            copy_body(data, new_image)
        });
    }

    /// Install a new body (`put` writes it into the frame's bytes, under
    /// the frame's lock), then the page's id and LSN (BUF-7).
    fn install_with(
        &self,
        image_bytes: usize,
        record_lsn: u64,
        lsn: u64,
        appending: bool,
        put: impl FnOnce(&mut Vec<u8>),
    ) {
        assert!(record_lsn <= lsn, "BUF-7: a record starts before it ends");
        let mut data = self.core.data[self.frame].write();
        assert_eq!(
            image_bytes,
            data.len(),
            "page {}: image of the wrong size",
            self.id
        );
        let page_lsn = page::lsn(&data);
        assert!(
            lsn >= page_lsn,
            "BUF-7: page {}: install at LSN {lsn} behind {page_lsn}",
            self.id
        );
        put(&mut data);
        page::set_id(&mut data, self.id);
        page::set_lsn(&mut data, lsn.max(page_lsn));
        // The rec_lsn is where the record starts, so that redo from it
        // replays the record; the page LSN is where it ends. A frame that
        // is dirty already and not being written keeps its rec_lsn, and the
        // install is only counted (BUF-17).
        if !self.core.hot.install_if_open(self.frame, lsn, appending) {
            self.core
                .meta
                .lock()
                .note_install(self.frame, record_lsn, lsn, appending);
        }
    }
}

/// Copy `image`'s body (from `PAGE_BODY_OFFSET` on) into the frame's bytes
/// `data`, of the same length; the header stays the pool's.
fn copy_body(data: &mut [u8], image: &[u8]) {
    if image.len() > PAGE_BODY_OFFSET {
        data[PAGE_BODY_OFFSET..].copy_from_slice(&image[PAGE_BODY_OFFSET..]);
    }
}

impl Drop for PageRef {
    fn drop(&mut self) {
        self.core.unpin(self.frame, self.id);
    }
}

/// A pin held for the length of a borrow of the pool
/// ([`BufferPool::visit_resident`]).
struct FramePin<'a> {
    core: &'a Core,
    frame: usize,
    id: PageId,
}

impl Drop for FramePin<'_> {
    fn drop(&mut self) {
        self.core.unpin(self.frame, self.id);
    }
}

impl std::fmt::Debug for PageRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageRef")
            .field("id", &self.id)
            .field("frame", &self.frame)
            .finish()
    }
}
