//! The pool's metadata: which frame holds which page, pins, dirty state, the
//! CLOCK hand and the counters.
//!
//! Everything here runs under the pool's metadata lock and never blocks
//! (BUF-4): no I/O, no frame data locks, no waits, no other lock (BUF-13).
//! The page table is a `BTreeMap` so that iterating it (dirty page table,
//! flush order) is deterministic and sorted by page id, and it is exact:
//! the lock-free index beside it (`table.rs`), which hits ask, is a hint
//! that this lock's holder keeps in step (BUF-14). Pins, Ready bits and
//! reference bits live there too, as atomics (BUF-15).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::store::PageStore;

use super::BufferStats;
use super::table::Hot;
use crate::page::{PageId, PageNo};

/// Sweeps of the CLOCK hand over every frame before a miss gives up: the
/// first sweep may do nothing but clear reference bits.
const CLOCK_SWEEPS: usize = 2;

/// What a frame is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FrameState {
    /// Holds no page.
    Free,
    /// Its page is being read (or zeroed) by the task that pinned it.
    Loading,
    /// Holds a verified page (BUF-5).
    Ready,
    /// Its dirty page is being written back before the frame is reused.
    Evicting,
}

/// Progress of a write-back of a frame (BUF-6: at most one at a time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WriteState {
    Idle,
    /// A task claimed the frame for a write-back and has not copied it yet.
    Claimed,
    /// The image of change `version`, of page LSN `lsn`, is on its way to
    /// the device; `next_rec_lsn` is the LSN of the first install since the
    /// copy.
    Copied {
        version: u64,
        lsn: u64,
        next_rec_lsn: Option<u64>,
    },
}

/// The metadata of one frame.
pub(super) struct FrameMeta {
    pub(super) page: Option<PageId>,
    pub(super) state: FrameState,
    pub(super) dirty: bool,
    /// LSN of the earliest change not yet written (BUF-7); 0 when clean.
    /// (The page LSN and the install count, which installs into an open
    /// frame change without this lock, are in the frame's hot line.)
    pub(super) rec_lsn: u64,
    pub(super) write: WriteState,
    /// An append page still being filled (BUF-10): dirty, but left alone
    /// by the page cleaner and `flush_all` until its owner seals it.
    pub(super) appending: bool,
}

impl FrameMeta {
    fn free() -> FrameMeta {
        FrameMeta {
            page: None,
            state: FrameState::Free,
            dirty: false,
            rec_lsn: 0,
            write: WriteState::Idle,
            appending: false,
        }
    }

    /// True while a read, write-back or eviction of the frame is in flight.
    pub(super) fn is_busy(&self) -> bool {
        matches!(self.state, FrameState::Loading | FrameState::Evicting)
            || self.write != WriteState::Idle
    }

    /// Forget the page.
    fn clear(&mut self) {
        *self = FrameMeta::free();
    }

    /// Whether an install may skip the metadata lock (BUF-17).
    fn is_open(&self) -> bool {
        self.state == FrameState::Ready && self.dirty && self.write == WriteState::Idle
    }
}

/// A storage space registered with the pool.
pub(super) struct Space {
    pub(super) name: String,
    /// Where the space's pages live on its device.
    pub(super) store: Arc<dyn PageStore>,
    /// Every change to its pages is logged, so a damaged page can be
    /// rebuilt from the log (BUF-9).
    pub(super) logged: bool,
    /// Page number of the space's last miss: the read-ahead cursor.
    pub(super) last_miss: std::sync::atomic::AtomicU64,
}

/// What the exact lookup found ([`Meta::pin_resident`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lookup {
    /// Resident and Ready: the frame is now pinned for the caller.
    Pinned(usize),
    /// Resident but being loaded or evicted.
    Busy,
    /// Not resident.
    Absent,
}

/// What a CLOCK sweep does with the victim it finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Want {
    /// Free a clean victim (unmap its page) for the caller to map.
    pub(super) take_clean: bool,
    /// Start the eviction of a dirty victim (state Evicting).
    pub(super) evict_dirty: bool,
}

impl Want {
    /// A miss: a clean frame now, or a dirty victim to write back.
    pub(super) const MISS: Want = Want {
        take_clean: true,
        evict_dirty: true,
    };
    /// Make room: write back a dirty victim; leave a clean one be.
    pub(super) const ROOM: Want = Want {
        take_clean: false,
        evict_dirty: true,
    };
    /// A clean frame now, or nothing (no I/O).
    pub(super) const CLEAN: Want = Want {
        take_clean: true,
        evict_dirty: false,
    };
}

/// The outcome of a CLOCK sweep.
pub(super) enum Victim {
    /// A frame that can be reused at once; with [`Want::take_clean`], it is
    /// free (its page unmapped).
    Clean(usize),
    /// A frame whose dirty page must be written back first; with
    /// [`Want::evict_dirty`], it is Evicting.
    Dirty(usize, PageId),
    /// Only frames with I/O in flight are unpinned: wait for one.
    Busy,
    /// Every frame is pinned.
    Exhausted,
}

/// Pages of one cleaner extent: the pages of an extent belong to one
/// cleaner task, so that its sorted batches hold neighbours the elevator
/// can merge (InnoDB maps a page to its buffer pool instance by
/// `page_no >> 6` for the same reason: its neighbour flush).
pub(super) const CLEANER_EXTENT_PAGES: PageNo = 64;

/// The frames one page cleaner task owns (CLEAN-7): those holding a page
/// of an extent whose number (space plus extent) is `index` modulo `of`,
/// and free frames whose number is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Share {
    pub(super) index: usize,
    pub(super) of: usize,
}

impl Share {
    /// Every frame.
    pub(super) const ALL: Share = Share { index: 0, of: 1 };

    /// Whether frame number `frame`, holding `page`, is this share's.
    pub(super) fn holds(self, frame: usize, page: Option<PageId>) -> bool {
        let key = match page {
            Some(id) => id.space as usize + (id.page_no / CLEANER_EXTENT_PAGES) as usize,
            None => frame,
        };
        key % self.of == self.index
    }
}

/// Everything the metadata lock protects.
pub(super) struct Meta {
    pub(super) frames: Vec<FrameMeta>,
    table: BTreeMap<PageId, usize>,
    /// The same mapping as `table` in a lock-free index, for hits (BUF-3,
    /// BUF-14), and the frames' pin words and reference bits (BUF-15).
    hot: Arc<Hot>,
    /// The dirty frames as (rec_lsn, page, frame), oldest change first
    /// (BUF-12).
    dirty_by_age: BTreeSet<(u64, PageId, usize)>,
    hand: usize,
    /// How far the page cleaner keeps frames clean ahead of the hand, and
    /// how far a miss looks past a dirty victim for a clean one, in frames
    /// (CLEAN-4); 0 while no cleaner runs or its clean target is 0.
    scan_depth: usize,
    /// A miss met a dirty victim since the flag was last taken while the
    /// page cleaner scans ahead: the cleaner is to be woken (by the caller,
    /// once this lock is released).
    pub(super) cleaner_wanted: bool,
    pub(super) stats: BufferStats,
    /// Run [`Meta::check`] after every state change (the simulated world
    /// with debug assertions on; see [`super::BufferPool::check`]).
    pub(super) checking: bool,
}

impl Meta {
    pub(super) fn new(frames: usize, hot: Arc<Hot>, checking: bool) -> Meta {
        Meta {
            frames: (0..frames).map(|_| FrameMeta::free()).collect(),
            table: BTreeMap::new(),
            hot,
            dirty_by_age: BTreeSet::new(),
            hand: 0,
            scan_depth: 0,
            cleaner_wanted: false,
            stats: BufferStats::default(),
            checking,
        }
    }

    /// Verify the whole state (see [`super::BufferPool::check`]): the first
    /// broken invariant, named, or `Ok`.
    pub(super) fn check(&self) -> Result<(), String> {
        if self.hand >= self.frames.len() {
            return Err(format!(
                "BUF-11: CLOCK hand {} outside {} frames",
                self.hand,
                self.frames.len()
            ));
        }
        self.check_cleaner()?;
        for (&id, &frame) in &self.table {
            let ready = self
                .frames
                .get(frame)
                .is_some_and(|f| f.state == FrameState::Ready);
            if self.hot.indexed(id) != Some(frame)
                || self.hot.page_key(frame) != Some(Hot::key(id))
                || self.hot.is_ready(frame) != ready
            {
                return Err(format!(
                    "BUF-14: the index maps {id} to {:?}, the table to frame {frame} (naming {:?}, Ready: {ready}, pin word Ready: {})",
                    self.hot.indexed(id),
                    self.hot.page_key(frame),
                    self.hot.is_ready(frame)
                ));
            }
        }
        if self.hot.indexed_len() != self.table.len() as u64 {
            return Err(format!(
                "BUF-14: the index holds {} pages, the table {}",
                self.hot.indexed_len(),
                self.table.len()
            ));
        }
        for (&id, &frame) in &self.table {
            match self.frames.get(frame) {
                Some(f) if f.page == Some(id) => {}
                _ => {
                    return Err(format!(
                        "BUF-3: table maps {id} to frame {frame}, which does not hold it"
                    ));
                }
            }
        }
        let mut dirty = 0;
        for (frame, f) in self.frames.iter().enumerate() {
            check_frame(frame, f, self.hot.pins(frame), self.hot.page_lsn(frame))?;
            if self.hot.open_state(frame) != (f.is_open(), f.is_open() && f.appending) {
                return Err(format!(
                    "BUF-17: frame {frame} is open to installs {:?}, its state says {:?}",
                    self.hot.open_state(frame),
                    (f.is_open(), f.appending)
                ));
            }
            if f.page.is_none() && (self.hot.page_key(frame).is_some() || self.hot.is_ready(frame))
            {
                return Err(format!(
                    "BUF-14: free frame {frame} still names page key {:?} (Ready: {})",
                    self.hot.page_key(frame),
                    self.hot.is_ready(frame)
                ));
            }
            if f.dirty {
                dirty += 1;
                let entry = f.page.map(|id| (f.rec_lsn, id, frame));
                if !entry.is_some_and(|e| self.dirty_by_age.contains(&e)) {
                    return Err(format!(
                        "BUF-12: dirty frame {frame} (rec_lsn {}) missing from the age index",
                        f.rec_lsn
                    ));
                }
            }
            if let Some(id) = f.page
                && self.table.get(&id) != Some(&frame)
            {
                return Err(format!(
                    "BUF-3: frame {frame} holds {id}, which the table does not map to it"
                ));
            }
        }
        if self.dirty_by_age.len() != dirty {
            return Err(format!(
                "BUF-12: the age index holds {} entries for {dirty} dirty frames",
                self.dirty_by_age.len()
            ));
        }
        Ok(())
    }

    /// Make frame `frame` dirty from `rec_lsn`, or clean with `None`,
    /// keeping the age index (BUF-12).
    fn set_dirty(&mut self, frame: usize, rec_lsn: Option<u64>) {
        let f = &mut self.frames[frame];
        let id = f
            .page
            .expect("BUF-12: only a frame holding a page is dirty");
        if f.dirty {
            let removed = self.dirty_by_age.remove(&(f.rec_lsn, id, frame));
            assert!(removed, "BUF-12: dirty frame {frame} not in the age index");
        }
        f.dirty = rec_lsn.is_some();
        f.rec_lsn = rec_lsn.unwrap_or(0);
        if let Some(rec_lsn) = rec_lsn {
            self.dirty_by_age.insert((rec_lsn, id, frame));
        }
        self.reopen(frame);
    }

    /// Open or close `frame` to installs without this lock, after a change
    /// of its state, dirty state, write-back or append mark (BUF-17).
    fn reopen(&self, frame: usize) {
        let f = &self.frames[frame];
        self.hot.set_open(frame, f.is_open(), f.appending);
    }

    /// After a state change: check the whole state if asked to.
    pub(super) fn changed(&self) {
        if self.checking
            && let Err(e) = self.check()
        {
            panic!("buffer pool state broken: {e}");
        }
    }

    /// Set the state of frame `frame`, which holds a page, and its pin
    /// word's Ready bit with it (BUF-14). A frame leaves Ready only through
    /// [`Hot::unready_if_unpinned`], which the caller has done (BUF-15).
    fn set_state(&mut self, frame: usize, state: FrameState) {
        assert!(
            self.frames[frame].page.is_some(),
            "BUF-3: a state change of a frame holding no page"
        );
        let was_ready = self.frames[frame].state == FrameState::Ready;
        match (was_ready, state == FrameState::Ready) {
            (false, true) => self.hot.set_ready(frame),
            (true, false) => assert!(
                !self.hot.is_ready(frame),
                "BUF-15: frame {frame} left Ready with hits still allowed"
            ),
            _ => {}
        }
        self.frames[frame].state = state;
        self.reopen(frame);
    }

    /// The write of a dirty victim failed: the page stays, dirty.
    pub(super) fn eviction_failed(&mut self, frame: usize) {
        self.set_state(frame, FrameState::Ready);
        self.changed();
    }

    /// Claim frame `frame` for a write-back (BUF-6).
    pub(super) fn claim_write(&mut self, frame: usize) {
        let f = &mut self.frames[frame];
        assert!(
            f.state == FrameState::Ready && f.write == WriteState::Idle,
            "BUF-6: a second write of frame {frame}"
        );
        f.write = WriteState::Claimed;
        self.reopen(frame);
        self.changed();
    }

    /// The frame holding `id`, if any.
    pub(super) fn lookup(&self, id: PageId) -> Option<usize> {
        self.table.get(&id).copied()
    }

    /// The exact lookup, under this lock: pin `id`'s frame if it is Ready
    /// (a hit), or tell whether it is resident but busy, or absent.
    pub(super) fn pin_resident(&self, id: PageId) -> Lookup {
        match self.table.get(&id) {
            None => Lookup::Absent,
            Some(&frame) if self.frames[frame].state == FrameState::Ready => {
                self.hot.pin_ready(frame);
                Lookup::Pinned(frame)
            }
            Some(_) => Lookup::Busy,
        }
    }

    /// Run the CLOCK hand: skip pinned and busy frames, give referenced
    /// frames a second chance (BUF-1). The victim is secured under its
    /// pin word, taken out of Ready with no pin held (BUF-15): a clean one
    /// is unmapped if `want.take_clean`, a dirty one made Evicting if
    /// `want.evict_dirty`; a hit that pinned it first makes the hand go on.
    /// A miss that meets a dirty victim first looks up to the scan depth
    /// further for a clean one (CLEAN-5); if that finds nothing it may
    /// use, it sweeps again without looking ahead, so that it never fails
    /// while a victim exists (BUF-8).
    pub(super) fn pick_victim(&mut self, want: Want) -> Victim {
        let ahead = if want.take_clean && want.evict_dirty {
            self.scan_depth
        } else {
            0
        };
        match self.sweep(want, ahead) {
            Victim::Busy | Victim::Exhausted if ahead > 0 => self.sweep(want, 0),
            victim => victim,
        }
    }

    /// One run of the hand over every frame, [`CLOCK_SWEEPS`] times at
    /// most; a dirty victim is passed over for up to `ahead` more frames
    /// while a clean one is looked for.
    fn sweep(&mut self, want: Want, ahead: usize) -> Victim {
        let n = self.frames.len();
        let mut busy = false;
        // The first dirty victim passed while looking ahead, and the step
        // at which it was met.
        let mut passed: Option<(usize, usize)> = None;
        for step in 0..n * CLOCK_SWEEPS {
            if let Some((frame, at)) = passed
                && step - at > ahead
            {
                passed = None;
                if let Some(victim) = self.evict_passed(frame) {
                    return victim;
                }
            }
            // The last sweep gives no second chance: a hit may set a bit the
            // first sweep cleared (BUF-15), which must not make a miss fail
            // as if every frame were pinned (BUF-8).
            let last_sweep = step >= n * (CLOCK_SWEEPS - 1);
            let frame = self.hand;
            self.hand = (frame + 1) % n;
            let f = &self.frames[frame];
            if f.state == FrameState::Free {
                return Victim::Clean(frame);
            }
            if self.hot.pins(frame) > 0 {
                continue;
            }
            if f.is_busy() {
                busy = true;
                continue;
            }
            if self.hot.take_referenced(frame) && !last_sweep {
                continue;
            }
            let id = f.page.expect("BUF-3: a frame in use holds a page");
            let dirty = f.dirty;
            if dirty && ahead > 0 {
                self.cleaner_wanted = true;
                passed = passed.or(Some((frame, step)));
                continue;
            }
            if let Some(victim) = self.secure(frame, id, dirty, want) {
                return victim;
            }
        }
        match passed.and_then(|(frame, _)| self.evict_passed(frame)) {
            Some(victim) => victim,
            None if busy => Victim::Busy,
            None => Victim::Exhausted,
        }
    }

    /// The hand chose `frame` (holding `id`, `dirty` or not): hand it back
    /// as it is, or secure it as `want` asks. `None` if a hit pinned it
    /// since the hand looked (real world only): the hand goes on.
    fn secure(&mut self, frame: usize, id: PageId, dirty: bool, want: Want) -> Option<Victim> {
        let act = if dirty {
            want.evict_dirty
        } else {
            want.take_clean
        };
        if !act {
            return Some(if dirty {
                Victim::Dirty(frame, id)
            } else {
                Victim::Clean(frame)
            });
        }
        if !self.hot.unready_if_unpinned(frame) {
            return None;
        }
        if dirty {
            self.cleaner_wanted |= self.scan_depth > 0;
            self.set_state(frame, FrameState::Evicting);
            self.changed();
            return Some(Victim::Dirty(frame, id));
        }
        self.stats.evictions += 1;
        self.unmap(frame);
        self.changed();
        Some(Victim::Clean(frame))
    }

    /// Start the eviction of dirty `frame`, which the hand passed over
    /// while looking ahead (this lock held since), unless a hit pinned it
    /// meanwhile.
    fn evict_passed(&mut self, frame: usize) -> Option<Victim> {
        let f = &self.frames[frame];
        let id = f.page?;
        let idle = f.state == FrameState::Ready && f.dirty && !f.is_busy();
        if !idle || !self.hot.unready_if_unpinned(frame) {
            return None;
        }
        self.cleaner_wanted = true;
        self.set_state(frame, FrameState::Evicting);
        self.changed();
        Some(Victim::Dirty(frame, id))
    }

    /// Give a free frame to `id`: Loading, pinned once by the caller
    /// (BUF-1, BUF-3).
    pub(super) fn map(&mut self, frame: usize, id: PageId) {
        assert_eq!(
            self.frames[frame].state,
            FrameState::Free,
            "BUF-1: reuse of a frame not freed"
        );
        // O(log n) in the page table: as cheap as the insert below.
        assert!(
            !self.table.contains_key(&id),
            "BUF-3: page {id} mapped twice"
        );
        self.table.insert(id, frame);
        let f = &mut self.frames[frame];
        f.page = Some(id);
        f.state = FrameState::Loading;
        // BUF-1: asserts the frame holds no pin.
        self.hot.map(frame, id);
        self.stats.misses += 1;
        self.changed();
    }

    /// Free a frame (not Ready) and drop its page from the table and the
    /// index.
    fn unmap(&mut self, frame: usize) {
        if self.frames[frame].dirty {
            self.set_dirty(frame, None);
        }
        match self.frames[frame].page {
            Some(old) => {
                let removed = self.table.remove(&old);
                assert_eq!(removed, Some(frame), "BUF-3: table and frame disagree");
                self.hot.unmap(frame, old);
            }
            None => self.hot.reset(frame),
        }
        self.frames[frame].clear();
    }

    /// A load finished and verified (BUF-5).
    pub(super) fn loaded(&mut self, frame: usize, from_device: bool) {
        assert_eq!(
            self.frames[frame].state,
            FrameState::Loading,
            "BUF-5: a load ended on a frame not loading"
        );
        self.set_state(frame, FrameState::Ready);
        if from_device {
            self.stats.reads += 1;
        }
        self.changed();
    }

    /// A Loading frame was filled with a page rebuilt from the log (BUF-9):
    /// it is Ready and dirty, from `rec_lsn`, so the repair is written back.
    pub(super) fn repaired(&mut self, frame: usize, rec_lsn: u64) {
        assert_eq!(
            self.frames[frame].state,
            FrameState::Loading,
            "BUF-5: a repair ended on a frame not loading"
        );
        self.set_dirty(frame, Some(rec_lsn));
        self.set_state(frame, FrameState::Ready);
        self.hot.count_install(frame, rec_lsn);
        self.stats.reads += 1;
        self.stats.repairs += 1;
        self.changed();
    }

    /// A load failed: the page leaves no trace (BUF-5).
    pub(super) fn abandon(&mut self, frame: usize) {
        assert_eq!(
            self.frames[frame].state,
            FrameState::Loading,
            "BUF-5: a failed load of a frame not loading"
        );
        self.unmap(frame);
        self.changed();
    }

    /// The dirty victim of a miss was written: reuse its frame.
    pub(super) fn evicted_dirty(&mut self, frame: usize) {
        assert!(
            !self.frames[frame].dirty,
            "BUF-7: evicting unwritten changes"
        );
        self.stats.evictions += 1;
        self.stats.foreground_dirty_evictions += 1;
        self.unmap(frame);
        self.changed();
    }

    /// An install of a change logged from `record_lsn` to `lsn` changed
    /// the page (caller holds the frame's data lock), and the frame was not
    /// open to it ([`Hot::install_if_open`]). `appending` marks an append
    /// page still being filled (BUF-10).
    pub(super) fn note_install(
        &mut self,
        frame: usize,
        record_lsn: u64,
        lsn: u64,
        appending: bool,
    ) {
        if !self.frames[frame].dirty {
            self.set_dirty(frame, Some(record_lsn));
        }
        assert!(
            self.hot.pins(frame) > 0,
            "BUF-1: install into an unpinned frame"
        );
        self.hot.count_install(frame, lsn);
        let f = &mut self.frames[frame];
        f.appending |= appending;
        if let WriteState::Copied {
            next_rec_lsn: next @ None,
            ..
        } = &mut f.write
        {
            *next = Some(record_lsn);
        }
        assert!(
            f.rec_lsn <= self.hot.page_lsn(frame),
            "BUF-7: rec_lsn after the page LSN"
        );
        self.reopen(frame);
        self.changed();
    }

    /// The owner of append page `frame` filled it (BUF-10): from now on it
    /// is written like any dirty page.
    pub(super) fn seal_append(&mut self, frame: usize) {
        self.frames[frame].appending = false;
        self.reopen(frame);
        self.changed();
    }

    /// A write-back copied the page, of page LSN `lsn` (caller holds the
    /// frame's data lock).
    pub(super) fn note_copy(&mut self, frame: usize, lsn: u64) {
        let f = &mut self.frames[frame];
        assert!(
            f.state == FrameState::Evicting || f.write == WriteState::Claimed,
            "BUF-6: copy for a write that was not claimed"
        );
        f.write = WriteState::Copied {
            version: self.hot.installs(frame),
            lsn,
            next_rec_lsn: None,
        };
        self.changed();
    }

    /// A write-back ended: `forced_to` is the LSN the log was forced to
    /// before the write, `None` if nothing was written. Clear dirty only if
    /// nothing changed since the copy, else the first change since the copy
    /// is the new rec_lsn (BUF-7).
    pub(super) fn finish_write(&mut self, frame: usize, forced_to: Option<u64>) {
        let installs = self.hot.installs(frame);
        let f = &mut self.frames[frame];
        let write = std::mem::replace(&mut f.write, WriteState::Idle);
        let Some(forced_to) = forced_to else {
            self.reopen(frame);
            self.changed();
            return;
        };
        self.stats.writes += 1;
        if let WriteState::Copied {
            version,
            lsn,
            next_rec_lsn,
        } = write
        {
            assert!(
                forced_to >= lsn,
                "BUF-2: page {:?} of LSN {lsn} written with the log forced to {forced_to} only",
                f.page
            );
            if version == installs {
                f.appending = false;
                self.set_dirty(frame, None);
            } else if let Some(lsn) = next_rec_lsn {
                self.set_dirty(frame, Some(lsn));
            }
        }
        self.reopen(frame);
        self.changed();
    }

    /// Dirty pages as (page, rec_lsn, frame), sorted by page id.
    pub(super) fn dirty_frames(&self) -> Vec<(PageId, u64, usize)> {
        self.table
            .iter()
            .filter(|&(_, &frame)| self.frames[frame].dirty)
            .map(|(&id, &frame)| (id, self.frames[frame].rec_lsn, frame))
            .collect()
    }

    /// Dirty pages that are not append pages still being filled (BUF-10),
    /// as (page, rec_lsn, frame), sorted by page id.
    pub(super) fn writable_dirty_frames(&self) -> Vec<(PageId, u64, usize)> {
        let mut dirty = self.dirty_frames();
        dirty.retain(|&(_, _, frame)| !self.frames[frame].appending);
        dirty
    }

    /// Up to `max_pages` idle dirty pages with the smallest rec_lsn, append
    /// pages still being filled excepted (BUF-10), in the frames of `share`.
    pub(super) fn oldest_dirty(&self, max_pages: usize, share: Share) -> Vec<(PageId, usize)> {
        // The age index is in (rec_lsn, page, frame) order (BUF-12).
        self.dirty_by_age
            .iter()
            .filter(|&&(_, _, frame)| self.writable_by(frame, share))
            .take(max_pages)
            .map(|&(_, id, frame)| (id, frame))
            .collect()
    }

    /// A cleaner task's part of the pool's `max_pages` oldest dirty pages:
    /// those of `share` it may write whose rec_lsn is at most the
    /// `max_pages`-th oldest dirty page's (its *LSN limit*, as InnoDB flushes
    /// a flush list up to an LSN). The task owning the oldest extent writes
    /// them together, where an even split would send every task a few
    /// pages of its own extents.
    pub(super) fn oldest_dirty_to_limit(
        &self,
        max_pages: usize,
        share: Share,
    ) -> Vec<(PageId, usize)> {
        // Pages being written count toward the limit (tasks that run in the
        // same interval share one limit while the first one's writes fly);
        // pages no cleaner may write do not, so they cannot stall it.
        let limit = self
            .dirty_by_age
            .iter()
            .filter(|&&(_, _, frame)| {
                let f = &self.frames[frame];
                !f.appending && f.state == FrameState::Ready
            })
            .take(max_pages.max(1))
            .last()
            .map(|&(lsn, _, _)| lsn);
        let Some(limit) = limit else {
            return Vec::new();
        };
        self.dirty_by_age
            .iter()
            .take_while(|&&(lsn, _, _)| lsn <= limit)
            .filter(|&&(_, _, frame)| self.writable_by(frame, share))
            .take(max_pages)
            .map(|&(_, id, frame)| (id, frame))
            .collect()
    }

    /// Whether a cleaner task of `share` may write dirty `frame` now.
    fn writable_by(&self, frame: usize, share: Share) -> bool {
        let f = &self.frames[frame];
        share.holds(frame, f.page) && !f.appending && f.state == FrameState::Ready && !f.is_busy()
    }

    /// Keep `clean_target` (a share, 0 to 1) of the frames clean ahead of
    /// the hand, and let misses look that far past a dirty victim; 0: off.
    /// Fewer than every frame, so that a miss's look ahead ends (CLEAN-4).
    pub(super) fn set_scan_depth(&mut self, clean_target: f64) {
        let n = self.frames.len();
        let depth = (clean_target.clamp(0.0, 1.0) * n as f64).ceil() as usize;
        self.scan_depth = depth.min(n - 1);
        self.changed();
    }

    /// The page cleaner's scan (CLEAN-1): from the hand on, the dirty
    /// frames the hand would take next that the cleaner may write now
    /// (Ready, unpinned, no write in flight, not an unsealed append page,
    /// BUF-10), until the scan depth's worth of frames the hand would take
    /// are clean or in the list, or every frame was looked at. Frames the
    /// hand would pass (pinned, busy, referenced) count for neither.
    /// Only the frames of `share` are looked at, and its part of the
    /// scan depth (CLEAN-7). While half that depth or more is clean the
    /// scan takes nothing (CLEAN-9): the cleaner writes in batches of at
    /// least half the depth, not a page or two at every miss.
    pub(super) fn scan_ahead(&self, share: Share) -> Vec<(PageId, usize)> {
        let n = self.frames.len();
        let depth = self.scan_depth.div_ceil(share.of);
        let (mut ready, mut clean) = (0, 0);
        let mut found = Vec::new();
        for step in 0..n {
            if ready >= depth {
                break;
            }
            let frame = (self.hand + step) % n;
            let f = &self.frames[frame];
            if !share.holds(frame, f.page) {
                continue;
            }
            if f.state == FrameState::Free {
                (ready, clean) = (ready + 1, clean + 1);
                continue;
            }
            if self.hot.pins(frame) > 0 || f.is_busy() || self.hot.referenced(frame) {
                continue;
            }
            if !f.dirty {
                (ready, clean) = (ready + 1, clean + 1);
            } else if !f.appending {
                let id = f.page.expect("BUF-3: a frame in use holds a page");
                assert!(
                    f.state == FrameState::Ready,
                    "CLEAN-1: the scan picked frame {frame}, which is not Ready"
                );
                found.push((id, frame));
                ready += 1;
            }
        }
        if clean * 2 >= depth {
            found.clear();
        }
        found
    }

    /// The cleaner's part of the whole check: the scan depth is below the
    /// frames (CLEAN-4), and its counters fit the pool's (CLEAN-6).
    fn check_cleaner(&self) -> Result<(), String> {
        let s = &self.stats;
        if self.scan_depth >= self.frames.len().max(1) {
            return Err(format!(
                "CLEAN-4: scan depth {} is not below the {} frames",
                self.scan_depth,
                self.frames.len()
            ));
        }
        if s.cleaner_pages + s.foreground_dirty_evictions > s.writes
            || s.cleaner_requests > s.cleaner_pages
            || s.foreground_dirty_evictions > s.evictions
        {
            return Err(format!(
                "CLEAN-6: counters disagree: {} cleaner pages in {} requests and {} foreground dirty evictions of {} writes and {} evictions",
                s.cleaner_pages,
                s.cleaner_requests,
                s.foreground_dirty_evictions,
                s.writes,
                s.evictions
            ));
        }
        Ok(())
    }

    /// Drop every idle frame; return the pages kept because they are
    /// pinned or have I/O in flight (BUF-1).
    pub(super) fn discard_idle(&mut self) -> Vec<PageId> {
        let mut kept = Vec::new();
        for frame in 0..self.frames.len() {
            let Some(id) = self.frames[frame].page else {
                continue;
            };
            // Out of Ready first, so that no hit pins it meanwhile (BUF-15).
            if self.frames[frame].is_busy() || !self.hot.unready_if_unpinned(frame) {
                kept.push(id);
            } else {
                self.unmap(frame);
            }
        }
        kept.sort_unstable();
        self.changed();
        kept
    }
}

/// The invariants one frame keeps on its own (BUF-1, BUF-6, BUF-7, BUF-10).
fn check_frame(frame: usize, f: &FrameMeta, pins: u32, page_lsn: u64) -> Result<(), String> {
    let broken = |what: &str| Err(format!("{what} (frame {frame}, page {:?})", f.page));
    if f.state == FrameState::Free {
        let idle = f.page.is_none() && pins == 0 && !f.dirty && f.write == WriteState::Idle;
        return if idle {
            Ok(())
        } else {
            broken("BUF-1: a free frame holds something")
        };
    }
    if f.page.is_none() {
        return broken("BUF-3: a frame in use holds no page");
    }
    if f.state == FrameState::Loading && pins == 0 {
        return broken("BUF-1: a loading frame is not pinned by its loader");
    }
    if f.state == FrameState::Evicting && pins > 0 {
        return broken("BUF-1: an evicting frame is pinned");
    }
    if f.write != WriteState::Idle && !f.dirty {
        return broken("BUF-6: a write-back of a clean frame");
    }
    if f.dirty && f.rec_lsn > page_lsn {
        return broken("BUF-7: rec_lsn after the page LSN");
    }
    if !f.dirty && (f.rec_lsn != 0 || f.appending) {
        return broken("BUF-7: a clean frame keeps a rec_lsn or an append mark");
    }
    Ok(())
}
