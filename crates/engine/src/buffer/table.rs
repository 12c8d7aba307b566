//! The part of the pool a hit and an unpin touch: the page table, split
//! into shards, and each frame's pin count and CLOCK reference bit, as
//! atomics. None of it needs the metadata lock to read (BUF-13..16).
//!
//! A shard maps the pages that hash to it to their frames, with a flag that
//! says whether the frame may be pinned by a hit (it is Ready). Only a
//! task holding the metadata lock changes a mapping or its flag, and it
//! does so under the shard's lock (BUF-14); a hit takes only the shard's
//! lock, so two hits of pages in different shards never meet, and two hits
//! in one shard meet for a hash probe and an atomic increment.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use flashlab_runtime::{Mutex, MutexGuard};

use crate::fast_hash::FastHashMap;
use crate::page::PageId;

/// Shards of the page table: enough that 16 to 64 clients seldom hit one
/// shard at once; each is a small hash map behind its own runtime lock.
pub const PAGE_TABLE_SHARDS: usize = 64;

/// A page's entry in its shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) frame: usize,
    /// The frame is Ready: a hit may pin it (BUF-14).
    pub(super) ready: bool,
}

/// One shard's map.
pub(super) type ShardMap = FastHashMap<PageId, Entry>;

/// A shard on a cache line of its own, so that locking one does not slow
/// its neighbours' users; its hit count shares the line its lock already
/// writes (one count for the pool would bounce between every core).
#[repr(align(128))]
struct Shard {
    map: Mutex<ShardMap>,
    /// Fetches that found a page of this shard resident.
    hits: AtomicU64,
}

/// A frame's pin count and reference bit, on a cache line of their own.
#[repr(align(64))]
#[derive(Default)]
pub(super) struct FrameHot {
    pins: AtomicU32,
    referenced: AtomicBool,
}

/// What a hit found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lookup {
    /// Resident and Ready: the frame is now pinned for the caller.
    Pinned(usize),
    /// Resident but being loaded or evicted.
    Busy,
    /// Not resident.
    Absent,
}

/// The lock-free half of the pool's state, shared by the pool and its
/// metadata.
pub(super) struct Hot {
    shards: Vec<Shard>,
    frames: Vec<FrameHot>,
}

impl Hot {
    pub(super) fn new(frames: usize) -> Hot {
        Hot {
            shards: (0..PAGE_TABLE_SHARDS)
                .map(|_| Shard {
                    map: Mutex::new(ShardMap::default()),
                    hits: AtomicU64::new(0),
                })
                .collect(),
            frames: (0..frames).map(|_| FrameHot::default()).collect(),
        }
    }

    /// The shard page `id` belongs to.
    fn shard_of(&self, id: PageId) -> &Shard {
        let key = (u64::from(id.space) << 32) | u64::from(id.page_no);
        // Fibonacci hashing: the high bits of the product spread
        // neighbouring page numbers over every shard.
        let index = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize % PAGE_TABLE_SHARDS;
        &self.shards[index]
    }

    /// Lock the shard of page `id` (BUF-13: after the metadata lock, if
    /// that is held, and never while waiting for anything else).
    pub(super) fn shard(&self, id: PageId) -> MutexGuard<'_, ShardMap> {
        self.shard_of(id).map.lock()
    }

    /// Every shard, locked in turn ([`super::BufferPool::check`]).
    pub(super) fn for_each_shard(&self, mut f: impl FnMut(&ShardMap)) {
        for shard in &self.shards {
            f(&shard.map.lock());
        }
    }

    /// The hit path: pin `id`'s frame if it is resident and Ready, setting
    /// its reference bit and counting a hit. Takes only the shard's lock
    /// (BUF-15).
    pub(super) fn pin_if_ready(&self, id: PageId) -> Lookup {
        let shard = self.shard_of(id);
        let map = shard.map.lock();
        match map.get(&id) {
            Some(&Entry { frame, ready: true }) => {
                let hot = &self.frames[frame];
                hot.pins.fetch_add(1, Ordering::AcqRel);
                // Written only if clear: the root of a tree is hit by every
                // descent, and a store would take its line from the other
                // cores each time.
                if !hot.referenced.load(Ordering::Relaxed) {
                    hot.referenced.store(true, Ordering::Relaxed);
                }
                shard.hits.fetch_add(1, Ordering::Relaxed);
                drop(map);
                Lookup::Pinned(frame)
            }
            Some(_) => Lookup::Busy,
            None => Lookup::Absent,
        }
    }

    /// Drop one pin of `frame` (BUF-15: no lock).
    pub(super) fn unpin(&self, frame: usize) {
        let before = self.frames[frame].pins.fetch_sub(1, Ordering::AcqRel);
        assert!(before > 0, "BUF-1: unpin of an unpinned frame {frame}");
    }

    /// The pin count of `frame` now. Stable only while the frame's page is
    /// not Ready in its shard, or under its shard's lock when it is 0
    /// (BUF-15).
    pub(super) fn pins(&self, frame: usize) -> u32 {
        self.frames[frame].pins.load(Ordering::Acquire)
    }

    /// Clear `frame`'s reference bit; true if it was set (CLOCK).
    pub(super) fn take_referenced(&self, frame: usize) -> bool {
        self.frames[frame].referenced.swap(false, Ordering::Relaxed)
    }

    /// A frame given to a page: pinned once by its loader, referenced.
    pub(super) fn start_loading(&self, frame: usize) {
        self.frames[frame].pins.store(1, Ordering::Release);
        self.frames[frame].referenced.store(true, Ordering::Relaxed);
    }

    /// A frame freed: no pins, no reference.
    pub(super) fn reset(&self, frame: usize) {
        self.frames[frame].pins.store(0, Ordering::Release);
        self.frames[frame]
            .referenced
            .store(false, Ordering::Relaxed);
    }

    /// Hits so far.
    pub(super) fn hits(&self) -> u64 {
        self.shards
            .iter()
            .map(|shard| shard.hits.load(Ordering::Relaxed))
            .sum()
    }
}
