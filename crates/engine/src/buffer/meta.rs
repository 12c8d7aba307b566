//! The pool's metadata: which frame holds which page, pins, dirty state, the
//! CLOCK hand and the counters.
//!
//! Everything here runs under the pool's metadata lock and never blocks
//! (BUF-4): no I/O, no frame locks, no waits. The page table is a `BTreeMap`
//! so that iterating it (dirty page table, flush order) is deterministic and
//! sorted by page id.

use std::collections::BTreeMap;
use std::sync::Arc;

use flashlab_devices::DeviceRef;

use super::BufferStats;
use crate::page::{PageId, SpaceId};

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
    /// The image of change `version` is on its way to the device;
    /// `next_rec_lsn` is the LSN of the first install since the copy.
    Copied {
        version: u64,
        next_rec_lsn: Option<u64>,
    },
}

/// The metadata of one frame.
pub(super) struct FrameMeta {
    pub(super) page: Option<PageId>,
    pub(super) state: FrameState,
    pub(super) pins: u32,
    /// The CLOCK reference bit.
    pub(super) referenced: bool,
    pub(super) dirty: bool,
    /// LSN of the earliest change not yet written (BUF-7); 0 when clean.
    pub(super) rec_lsn: u64,
    /// Counts installs; a write-back compares it to tell whether the page
    /// changed after its copy was taken.
    pub(super) version: u64,
    pub(super) write: WriteState,
}

impl FrameMeta {
    fn free() -> FrameMeta {
        FrameMeta {
            page: None,
            state: FrameState::Free,
            pins: 0,
            referenced: false,
            dirty: false,
            rec_lsn: 0,
            version: 0,
            write: WriteState::Idle,
        }
    }

    /// True while a read, write-back or eviction of the frame is in flight.
    pub(super) fn is_busy(&self) -> bool {
        matches!(self.state, FrameState::Loading | FrameState::Evicting)
            || self.write != WriteState::Idle
    }

    /// Forget the page (the version counter keeps counting).
    fn clear(&mut self) {
        let version = self.version;
        *self = FrameMeta::free();
        self.version = version;
    }
}

/// A storage space registered with the pool.
pub(super) struct Space {
    pub(super) name: String,
    pub(super) device: DeviceRef,
    /// Every change to its pages is logged, so a damaged page can be
    /// rebuilt from the log (BUF-9).
    pub(super) logged: bool,
}

/// The outcome of a CLOCK sweep.
pub(super) enum Victim {
    /// A frame that can be reused at once.
    Clean(usize),
    /// A frame whose dirty page must be written back first.
    Dirty(usize, PageId),
    /// Only frames with I/O in flight are unpinned: wait for one.
    Busy,
    /// Every frame is pinned.
    Exhausted,
}

/// Everything the metadata lock protects.
pub(super) struct Meta {
    pub(super) frames: Vec<FrameMeta>,
    table: BTreeMap<PageId, usize>,
    spaces: BTreeMap<SpaceId, Arc<Space>>,
    hand: usize,
    pub(super) stats: BufferStats,
}

impl Meta {
    pub(super) fn new(frames: usize) -> Meta {
        Meta {
            frames: (0..frames).map(|_| FrameMeta::free()).collect(),
            table: BTreeMap::new(),
            spaces: BTreeMap::new(),
            hand: 0,
            stats: BufferStats::default(),
        }
    }

    /// The frame holding `id`, if any.
    pub(super) fn lookup(&self, id: PageId) -> Option<usize> {
        self.table.get(&id).copied()
    }

    pub(super) fn space(&self, space: SpaceId) -> Option<Arc<Space>> {
        self.spaces.get(&space).cloned()
    }

    /// Register a space; false if the id is taken.
    pub(super) fn add_space(&mut self, space: SpaceId, entry: Space) -> bool {
        if self.spaces.contains_key(&space) {
            return false;
        }
        self.spaces.insert(space, Arc::new(entry));
        true
    }

    /// Every registered space, by id.
    pub(super) fn spaces(&self) -> Vec<Arc<Space>> {
        self.spaces.values().cloned().collect()
    }

    /// Pin a resident frame for a hit.
    pub(super) fn pin_hit(&mut self, frame: usize) {
        let f = &mut self.frames[frame];
        debug_assert_eq!(
            f.state,
            FrameState::Ready,
            "BUF-5: pin of a frame not ready"
        );
        f.pins += 1;
        f.referenced = true;
        self.stats.hits += 1;
    }

    pub(super) fn unpin(&mut self, frame: usize, id: PageId) {
        let f = &mut self.frames[frame];
        debug_assert_eq!(f.page, Some(id), "BUF-1: a pinned frame changed page");
        debug_assert!(f.pins > 0, "BUF-1: unpin of an unpinned frame");
        f.pins = f.pins.saturating_sub(1);
    }

    /// Run the CLOCK hand: skip pinned and busy frames, give referenced
    /// frames a second chance (BUF-1).
    pub(super) fn pick_victim(&mut self) -> Victim {
        let n = self.frames.len();
        let mut busy = false;
        for _ in 0..n * CLOCK_SWEEPS {
            let frame = self.hand;
            self.hand = (frame + 1) % n;
            let f = &mut self.frames[frame];
            if f.state == FrameState::Free {
                return Victim::Clean(frame);
            }
            if f.pins > 0 {
                continue;
            }
            if f.is_busy() {
                busy = true;
                continue;
            }
            if std::mem::take(&mut f.referenced) {
                continue;
            }
            return match f.page {
                Some(id) if f.dirty => Victim::Dirty(frame, id),
                _ => Victim::Clean(frame),
            };
        }
        if busy {
            Victim::Busy
        } else {
            Victim::Exhausted
        }
    }

    /// Give a clean, unpinned frame to `id`: Loading, pinned once by the
    /// caller (BUF-1, BUF-3).
    pub(super) fn map(&mut self, frame: usize, id: PageId) {
        debug_assert_eq!(self.frames[frame].pins, 0, "BUF-1: reuse of a pinned frame");
        debug_assert!(!self.frames[frame].dirty, "BUF-7: reuse of a dirty frame");
        debug_assert!(
            !self.table.contains_key(&id),
            "BUF-3: page {id} mapped twice"
        );
        if self.frames[frame].page.is_some() {
            self.stats.evictions += 1;
        }
        self.unmap(frame);
        self.table.insert(id, frame);
        let f = &mut self.frames[frame];
        f.page = Some(id);
        f.state = FrameState::Loading;
        f.pins = 1;
        f.referenced = true;
        self.stats.misses += 1;
    }

    /// Free a frame and drop its page from the table.
    pub(super) fn unmap(&mut self, frame: usize) {
        if let Some(old) = self.frames[frame].page {
            let removed = self.table.remove(&old);
            debug_assert_eq!(removed, Some(frame), "BUF-3: table and frame disagree");
        }
        self.frames[frame].clear();
    }

    /// A load finished and verified (BUF-5).
    pub(super) fn loaded(&mut self, frame: usize, from_device: bool) {
        debug_assert_eq!(self.frames[frame].state, FrameState::Loading);
        self.frames[frame].state = FrameState::Ready;
        if from_device {
            self.stats.reads += 1;
        }
    }

    /// A load failed: the page leaves no trace (BUF-5).
    /// A Loading frame was filled with a page rebuilt from the log (BUF-9):
    /// it is Ready and dirty, from `rec_lsn`, so the repair is written back.
    pub(super) fn repaired(&mut self, frame: usize, rec_lsn: u64) {
        debug_assert_eq!(self.frames[frame].state, FrameState::Loading);
        let f = &mut self.frames[frame];
        f.state = FrameState::Ready;
        f.version += 1;
        f.dirty = true;
        f.rec_lsn = rec_lsn;
        self.stats.reads += 1;
        self.stats.repairs += 1;
    }

    pub(super) fn abandon(&mut self, frame: usize) {
        debug_assert_eq!(self.frames[frame].state, FrameState::Loading);
        self.unmap(frame);
    }

    /// The dirty victim of a miss was written: reuse its frame.
    pub(super) fn evicted_dirty(&mut self, frame: usize) {
        debug_assert!(
            !self.frames[frame].dirty,
            "BUF-7: evicting unwritten changes"
        );
        self.stats.evictions += 1;
        self.stats.dirty_evictions += 1;
        self.unmap(frame);
    }

    /// An install changed the page (caller holds the frame's data lock).
    pub(super) fn note_install(&mut self, frame: usize, lsn: u64) {
        let f = &mut self.frames[frame];
        debug_assert!(f.pins > 0, "install into an unpinned frame");
        f.version += 1;
        if !f.dirty {
            f.dirty = true;
            f.rec_lsn = lsn;
        }
        if let WriteState::Copied {
            next_rec_lsn: next @ None,
            ..
        } = &mut f.write
        {
            *next = Some(lsn);
        }
        debug_assert!(f.rec_lsn <= lsn, "BUF-7: rec_lsn after the page LSN");
    }

    /// A write-back copied the page (caller holds the frame's data lock).
    pub(super) fn note_copy(&mut self, frame: usize) {
        let f = &mut self.frames[frame];
        debug_assert!(
            f.state == FrameState::Evicting || f.write == WriteState::Claimed,
            "BUF-6: copy for a write that was not claimed"
        );
        f.write = WriteState::Copied {
            version: f.version,
            next_rec_lsn: None,
        };
    }

    /// A write-back ended; clear dirty only if nothing changed since the
    /// copy, else the first change since the copy is the new rec_lsn (BUF-7).
    pub(super) fn finish_write(&mut self, frame: usize, written: bool) {
        let f = &mut self.frames[frame];
        let write = std::mem::replace(&mut f.write, WriteState::Idle);
        if !written {
            return;
        }
        self.stats.writes += 1;
        if let WriteState::Copied {
            version,
            next_rec_lsn,
        } = write
        {
            if version == f.version {
                f.dirty = false;
                f.rec_lsn = 0;
            } else if let Some(lsn) = next_rec_lsn {
                f.rec_lsn = lsn;
            }
        }
    }

    /// Dirty pages as (page, rec_lsn, frame), sorted by page id.
    pub(super) fn dirty_frames(&self) -> Vec<(PageId, u64, usize)> {
        self.table
            .iter()
            .filter(|&(_, &frame)| self.frames[frame].dirty)
            .map(|(&id, &frame)| (id, self.frames[frame].rec_lsn, frame))
            .collect()
    }

    /// Up to `max_pages` idle dirty pages with the smallest rec_lsn.
    pub(super) fn oldest_dirty(&self, max_pages: usize) -> Vec<(PageId, usize)> {
        let mut dirty: Vec<(u64, PageId, usize)> = self
            .dirty_frames()
            .into_iter()
            .filter(|&(_, _, frame)| {
                let f = &self.frames[frame];
                f.state == FrameState::Ready && !f.is_busy()
            })
            .map(|(id, rec_lsn, frame)| (rec_lsn, id, frame))
            .collect();
        dirty.sort_unstable();
        dirty.truncate(max_pages);
        dirty
            .into_iter()
            .map(|(_, id, frame)| (id, frame))
            .collect()
    }

    /// Drop every idle frame; return the pages kept because they are
    /// pinned or have I/O in flight (BUF-1).
    pub(super) fn discard_idle(&mut self) -> Vec<PageId> {
        let mut kept = Vec::new();
        for frame in 0..self.frames.len() {
            let f = &self.frames[frame];
            match f.page {
                None => {}
                Some(id) if f.pins > 0 || f.is_busy() => kept.push(id),
                Some(_) => self.unmap(frame),
            }
        }
        kept.sort_unstable();
        kept
    }
}
