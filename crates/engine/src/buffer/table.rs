//! The part of the pool a hit and an unpin touch, with no lock at all: a
//! page index that says where a page probably is, and each frame's pin
//! word, which says for certain (BUF-13..16).
//!
//! **The index** is an open-addressing hash table of atomic words, written
//! only by a task holding the metadata lock (one writer at a time) and read
//! by every hit without a lock. A reader may see it mid-change: a page
//! being moved by a deletion's backward shift, or a slot being reused. So
//! what it answers is a hint, a frame number to try; a page it does not
//! find is looked up again under the metadata lock, in the page table
//! there, which is exact.
//!
//! **The pin word** of a frame packs its pin count (low 32 bits), a Ready
//! bit, and a generation that grows each time the frame is given to a page.
//! Next to it the frame names its page. A hit reads the word, checks Ready
//! and the page name, and pins with one compare-and-swap of the word it
//! read: the swap succeeds only if the frame has not left Ready, nor been
//! given to another page, since that read (the generation would differ).
//! An eviction takes the frame out of Ready with a swap that expects no
//! pins, so a hit and an eviction cannot both win: the hit holds a pin the
//! evictor's swap sees, or the evictor's change makes the hit's swap fail.
//! No pin is ever taken on a frame that is not Ready, even for an instant,
//! so a frame's pin count is exact whenever it is not Ready.
//!
//! Why no lock: with a hash map behind a mutex (or one per shard), every
//! hit of a tree's root would write the line of its lock, and the cores
//! would take that line from each other (docs/PERFORMANCE-HISTORY.md, "A
//! hit without a lock").

// The model checker's atomics under `--features loom`, which only the
// model below runs with (see `loom_model`).
#[cfg(feature = "loom")]
use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(not(feature = "loom"))]
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::page::PageId;

/// Index slots per frame: the index is at most half full, so a probe ends
/// at an empty slot within a few steps.
pub const INDEX_SLOTS_PER_FRAME: usize = 2;

/// The key of an empty index slot (no page id packs to it: see `key_of`).
const EMPTY_KEY: u64 = u64::MAX;

/// A frame's page name while it holds none.
const NO_PAGE: u64 = u64::MAX;

/// Pin word: the pin count's bits.
const PINS_MASK: u64 = 0xffff_ffff;
/// Pin word: the frame is Ready (a hit may pin it).
const READY_BIT: u64 = 1 << 32;
/// Pin word: one step of the generation, in the bits above Ready.
const GENERATION_STEP: u64 = 1 << 33;

/// A page id as one word (space in the high half).
fn key_of(id: PageId) -> u64 {
    let key = (u64::from(id.space) << 32) | u64::from(id.page_no);
    assert_ne!(key, EMPTY_KEY, "BUF-14: page {id} has the empty key");
    key
}

/// One slot of the index.
struct Slot {
    key: AtomicU64,
    frame: AtomicU64,
}

/// The lock-free page index (BUF-14): a hint from page to frame.
struct Index {
    slots: Box<[Slot]>,
    mask: usize,
    /// Bits of a key's hash that pick its home slot.
    shift: u32,
    /// Pages in the index (the writer's count).
    len: AtomicU64,
}

impl Index {
    fn new(frames: usize) -> Index {
        let capacity = (frames.max(8) * INDEX_SLOTS_PER_FRAME).next_power_of_two();
        Index {
            slots: (0..capacity)
                .map(|_| Slot {
                    key: AtomicU64::new(EMPTY_KEY),
                    frame: AtomicU64::new(0),
                })
                .collect(),
            mask: capacity - 1,
            shift: 64 - capacity.trailing_zeros(),
            len: AtomicU64::new(0),
        }
    }

    /// The slot a probe for `key` starts at: Fibonacci hashing, whose high
    /// bits spread neighbouring page numbers over the table.
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    /// The frame the index names for `key`, if it finds it. Lock-free; a
    /// hint only (see the module documentation). Probes at most every slot.
    fn find(&self, key: u64) -> Option<usize> {
        let mut i = self.home(key);
        for _ in 0..self.slots.len() {
            let slot = &self.slots[i];
            match slot.key.load(Ordering::Acquire) {
                k if k == key => return Some(slot.frame.load(Ordering::Acquire) as usize),
                EMPTY_KEY => return None,
                _ => i = (i + 1) & self.mask,
            }
        }
        None
    }

    /// The slot holding `key` (the writer only: exact, as nobody else
    /// writes).
    fn slot_of(&self, key: u64) -> Option<usize> {
        let mut i = self.home(key);
        for _ in 0..self.slots.len() {
            match self.slots[i].key.load(Ordering::Relaxed) {
                k if k == key => return Some(i),
                EMPTY_KEY => return None,
                _ => i = (i + 1) & self.mask,
            }
        }
        None
    }

    /// Add `key` at `frame` (metadata lock held). The frame is stored before
    /// the key, so a reader that sees the key sees its frame.
    fn insert(&self, key: u64, frame: usize) {
        assert!(
            self.slot_of(key).is_none(),
            "BUF-3: a page mapped twice in the index"
        );
        let mut i = self.home(key);
        while self.slots[i].key.load(Ordering::Relaxed) != EMPTY_KEY {
            i = (i + 1) & self.mask;
        }
        self.slots[i].frame.store(frame as u64, Ordering::Release);
        self.slots[i].key.store(key, Ordering::Release);
        self.len.fetch_add(1, Ordering::Relaxed);
    }

    /// Remove `key` (metadata lock held), returning its frame. Linear
    /// probing's backward shift: each later entry of the cluster that may
    /// move closer to its home slot does, so no tombstones pile up. A
    /// reader racing the shift may miss a page; it then asks the exact
    /// table under the metadata lock.
    fn remove(&self, key: u64) -> Option<usize> {
        let mut hole = self.slot_of(key)?;
        let frame = self.slots[hole].frame.load(Ordering::Relaxed) as usize;
        let mut next = hole;
        loop {
            next = (next + 1) & self.mask;
            let moving = self.slots[next].key.load(Ordering::Relaxed);
            if moving == EMPTY_KEY {
                break;
            }
            // The entry at `next` may fill the hole if its home slot is not
            // cyclically within (hole, next].
            let home = self.home(moving);
            let distance_to_hole = hole.wrapping_sub(home) & self.mask;
            let distance_to_next = next.wrapping_sub(home) & self.mask;
            if distance_to_hole < distance_to_next {
                let moved = self.slots[next].frame.load(Ordering::Relaxed);
                self.slots[hole].frame.store(moved, Ordering::Release);
                self.slots[hole].key.store(moving, Ordering::Release);
                hole = next;
            }
        }
        self.slots[hole].key.store(EMPTY_KEY, Ordering::Release);
        self.len.fetch_sub(1, Ordering::Relaxed);
        Some(frame)
    }
}

/// A frame's pin word, page name, reference bit and hit count, on a cache
/// line of their own: a hit writes only this line.
#[repr(align(64))]
struct FrameHot {
    /// Pins, Ready and generation (see the module documentation).
    word: AtomicU64,
    /// The key of the page the frame holds, or `NO_PAGE`.
    page: AtomicU64,
    referenced: AtomicBool,
    /// Hits that pinned this frame, whatever page it held (never reset).
    hits: AtomicU64,
    /// Installs into the frame, whatever page it held (never reset): a
    /// write-back compares it to tell whether the page changed after its
    /// copy (BUF-7).
    installs: AtomicU64,
    /// The highest page LSN installed since the page was mapped (0 if
    /// none): what the pool knows of the page LSN without its data lock.
    page_lsn: AtomicU64,
    /// `OPEN`, and `APPENDING` with it, as the metadata lock's holder last
    /// set them (BUF-17).
    open: AtomicU64,
}

/// Open word: an install may skip the metadata lock (BUF-17): the frame is
/// Ready, dirty, and no write-back of it is claimed or in flight.
const OPEN: u64 = 1;
/// Open word: the frame holds an append page still being filled (BUF-10).
const APPENDING: u64 = 2;

/// The lock-free half of the pool's state, shared by the pool and its
/// metadata.
pub(super) struct Hot {
    index: Index,
    frames: Vec<FrameHot>,
}

impl Hot {
    pub(super) fn new(frames: usize) -> Hot {
        Hot {
            index: Index::new(frames),
            frames: (0..frames)
                .map(|_| FrameHot {
                    word: AtomicU64::new(0),
                    page: AtomicU64::new(NO_PAGE),
                    referenced: AtomicBool::new(false),
                    hits: AtomicU64::new(0),
                    installs: AtomicU64::new(0),
                    page_lsn: AtomicU64::new(0),
                    open: AtomicU64::new(0),
                })
                .collect(),
        }
    }

    /// The hit path (BUF-15): pin `id`'s frame if it is resident and Ready,
    /// setting its reference bit and counting a hit. Takes no lock; `None`
    /// does not prove the page absent (ask [`super::meta::Meta`]).
    pub(super) fn pin_if_ready(&self, id: PageId) -> Option<usize> {
        let key = key_of(id);
        let frame = self.index.find(key)?;
        let hot = self.frames.get(frame)?;
        let mut word = hot.word.load(Ordering::Acquire);
        if word & READY_BIT == 0 || hot.page.load(Ordering::Acquire) != key {
            return None;
        }
        // The page name was read after `word`: if the swap below finds the
        // same word, the frame kept that generation, and so that page,
        // from the read to the pin.
        loop {
            assert!(word & PINS_MASK < PINS_MASK, "BUF-1: pin count overflow");
            match hot.word.compare_exchange_weak(
                word,
                word + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                // Only the pin count moved: try again.
                Err(now) if now & !PINS_MASK == word & !PINS_MASK => word = now,
                Err(_) => return None,
            }
        }
        self.touch(frame);
        Some(frame)
    }

    /// Pin `frame`, Ready, with the metadata lock held (nothing can take it
    /// out of Ready meanwhile): the exact lookup's pin.
    pub(super) fn pin_ready(&self, frame: usize) {
        let before = self.frames[frame].word.fetch_add(1, Ordering::AcqRel);
        assert!(
            before & READY_BIT != 0,
            "BUF-15: a pin of frame {frame}, not Ready"
        );
        self.touch(frame);
    }

    /// A hit of `frame`: its reference bit and its hit count.
    fn touch(&self, frame: usize) {
        let hot = &self.frames[frame];
        // Written only if clear: the root of a tree is hit by every descent.
        if !hot.referenced.load(Ordering::Relaxed) {
            hot.referenced.store(true, Ordering::Relaxed);
        }
        // The line is this task's already: the pin wrote it.
        hot.hits.fetch_add(1, Ordering::Relaxed);
    }

    /// Drop one pin of `frame` (BUF-15: no lock).
    pub(super) fn unpin(&self, frame: usize) {
        let before = self.frames[frame].word.fetch_sub(1, Ordering::AcqRel);
        assert!(
            before & PINS_MASK > 0,
            "BUF-1: unpin of an unpinned frame {frame}"
        );
    }

    /// The pin count of `frame` now. Exact while the frame is not Ready;
    /// while it is, hits may pin it at any moment (BUF-15).
    pub(super) fn pins(&self, frame: usize) -> u32 {
        (self.frames[frame].word.load(Ordering::Acquire) & PINS_MASK) as u32
    }

    /// Which residency of a page `frame` holds: the frame and its
    /// generation. It cannot change while the caller holds a pin (a new
    /// generation needs 0 pins, BUF-15).
    pub(super) fn residency(&self, frame: usize) -> u64 {
        let word = self.frames[frame].word.load(Ordering::Acquire);
        (word & !(PINS_MASK | READY_BIT)) | frame as u64
    }

    /// Whether `frame` is Ready in its pin word.
    pub(super) fn is_ready(&self, frame: usize) -> bool {
        self.frames[frame].word.load(Ordering::Acquire) & READY_BIT != 0
    }

    /// The page `frame` names, if any.
    pub(super) fn page_key(&self, frame: usize) -> Option<u64> {
        let key = self.frames[frame].page.load(Ordering::Acquire);
        (key != NO_PAGE).then_some(key)
    }

    /// Whether `frame`'s reference bit is set, leaving it (the page
    /// cleaner's scan: the hand would pass this frame once more).
    pub(super) fn referenced(&self, frame: usize) -> bool {
        self.frames[frame].referenced.load(Ordering::Relaxed)
    }

    /// Clear `frame`'s reference bit; true if it was set (CLOCK).
    pub(super) fn take_referenced(&self, frame: usize) -> bool {
        self.frames[frame].referenced.swap(false, Ordering::Relaxed)
    }

    /// Give free `frame` to `id` (metadata lock held): a new generation, not
    /// Ready, pinned once by its loader, referenced; and into the index.
    pub(super) fn map(&self, frame: usize, id: PageId) {
        let hot = &self.frames[frame];
        let word = hot.word.load(Ordering::Acquire);
        assert_eq!(
            word & (PINS_MASK | READY_BIT),
            0,
            "BUF-1: frame {frame} given to {id} while pinned or Ready"
        );
        let key = key_of(id);
        hot.page.store(key, Ordering::Release);
        let generation = (word & !(PINS_MASK | READY_BIT)).wrapping_add(GENERATION_STEP);
        hot.word.store(generation | 1, Ordering::Release);
        hot.referenced.store(true, Ordering::Relaxed);
        self.index.insert(key, frame);
    }

    /// Make `frame` Ready (metadata lock held): hits may pin it from now on.
    pub(super) fn set_ready(&self, frame: usize) {
        let before = self.frames[frame]
            .word
            .fetch_or(READY_BIT, Ordering::AcqRel);
        assert_eq!(
            before & READY_BIT,
            0,
            "BUF-14: frame {frame} made Ready twice"
        );
    }

    /// Take `frame` out of Ready if nobody holds a pin (metadata lock held):
    /// true if done. From then on no hit can pin it (BUF-15).
    pub(super) fn unready_if_unpinned(&self, frame: usize) -> bool {
        let word = &self.frames[frame].word;
        let now = word.load(Ordering::Acquire);
        now & READY_BIT != 0
            && now & PINS_MASK == 0
            && word
                .compare_exchange(now, now & !READY_BIT, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
    }

    /// Take `frame`, holding `id`, out of the index and forget its page
    /// (metadata lock held; the frame is not Ready). Drops every pin left:
    /// only the loader's of a load that failed can be.
    pub(super) fn unmap(&self, frame: usize, id: PageId) {
        let removed = self.index.remove(key_of(id));
        assert_eq!(removed, Some(frame), "BUF-14: index and frame disagree");
        self.reset(frame);
    }

    /// A frame freed: no page, no pins, no reference.
    pub(super) fn reset(&self, frame: usize) {
        let hot = &self.frames[frame];
        let word = hot.word.load(Ordering::Acquire);
        assert_eq!(word & READY_BIT, 0, "BUF-15: a Ready frame {frame} freed");
        hot.word.store(word & !PINS_MASK, Ordering::Release);
        hot.page.store(NO_PAGE, Ordering::Release);
        hot.referenced.store(false, Ordering::Relaxed);
        hot.page_lsn.store(0, Ordering::Release);
        hot.open.store(0, Ordering::Release);
    }

    /// An install of a change ending at page LSN `lsn` into `frame`, which
    /// the caller pins and holds the data lock of exclusively, counted
    /// without the metadata lock if the frame is open (BUF-17): true if
    /// counted. An append install (`appending`) needs a frame that already
    /// holds an append page, since only the metadata lock's holder marks
    /// one.
    pub(super) fn install_if_open(&self, frame: usize, lsn: u64, appending: bool) -> bool {
        let hot = &self.frames[frame];
        let open = hot.open.load(Ordering::Acquire);
        if open & OPEN == 0 || (appending && open & APPENDING == 0) {
            return false;
        }
        assert!(
            hot.word.load(Ordering::Acquire) & PINS_MASK > 0,
            "BUF-1: install into an unpinned frame {frame}"
        );
        self.count_install(frame, lsn);
        true
    }

    /// Count an install into `frame` ending at page LSN `lsn` (the caller
    /// holds the frame's data lock exclusively).
    pub(super) fn count_install(&self, frame: usize, lsn: u64) {
        let hot = &self.frames[frame];
        hot.installs.fetch_add(1, Ordering::AcqRel);
        hot.page_lsn.fetch_max(lsn, Ordering::AcqRel);
    }

    /// Installs into `frame` so far. Exact for a caller holding the frame's
    /// data lock, or the metadata lock while the frame is not open.
    pub(super) fn installs(&self, frame: usize) -> u64 {
        self.frames[frame].installs.load(Ordering::Acquire)
    }

    /// The highest page LSN installed since `frame` was given its page.
    pub(super) fn page_lsn(&self, frame: usize) -> u64 {
        self.frames[frame].page_lsn.load(Ordering::Acquire)
    }

    /// Open or close `frame` to installs without the metadata lock (the
    /// metadata lock held; BUF-17), marking it as an append page or not.
    /// A closed frame keeps no append mark.
    pub(super) fn set_open(&self, frame: usize, open: bool, appending: bool) {
        let word = match (open, appending) {
            (false, _) => 0,
            (true, false) => OPEN,
            (true, true) => OPEN | APPENDING,
        };
        self.frames[frame].open.store(word, Ordering::Release);
    }

    /// Whether `frame` is open, and whether as an append page (a check).
    pub(super) fn open_state(&self, frame: usize) -> (bool, bool) {
        let word = self.frames[frame].open.load(Ordering::Acquire);
        (word & OPEN != 0, word & APPENDING != 0)
    }

    /// The frame the index names for `id` (the writer's exact view, or a
    /// check).
    pub(super) fn indexed(&self, id: PageId) -> Option<usize> {
        self.index.find(key_of(id))
    }

    /// Pages in the index.
    pub(super) fn indexed_len(&self) -> u64 {
        self.index.len.load(Ordering::Relaxed)
    }

    /// The key `id` is named by in a frame.
    pub(super) fn key(id: PageId) -> u64 {
        key_of(id)
    }

    /// Hits so far.
    pub(super) fn hits(&self) -> u64 {
        self.frames
            .iter()
            .map(|hot| hot.hits.load(Ordering::Relaxed))
            .sum()
    }
}

#[cfg(all(test, feature = "loom"))]
mod loom_model;

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    fn page(n: u32) -> PageId {
        PageId::new(1, n)
    }

    #[test]
    fn the_index_finds_what_it_holds_after_removals_shift_clusters() {
        let index = Index::new(8);
        // Every key into a 16-slot table: clusters and wrap-around.
        for n in 0..12 {
            index.insert(key_of(page(n)), n as usize);
        }
        for n in (0..12).step_by(3) {
            assert_eq!(index.remove(key_of(page(n))), Some(n as usize));
        }
        for n in 0..12 {
            let expect = (n % 3 != 0).then_some(n as usize);
            assert_eq!(index.find(key_of(page(n))), expect, "page {n}");
        }
        assert_eq!(index.len.load(Ordering::Relaxed), 8);
        assert_eq!(index.remove(key_of(page(0))), None);
    }

    #[test]
    fn a_hit_pins_only_a_ready_frame_of_its_page() {
        let hot = Hot::new(8);
        hot.map(3, page(7));
        // Loading: pinned by its loader only, no hit.
        assert_eq!(hot.pin_if_ready(page(7)), None);
        assert_eq!(hot.pins(3), 1);
        hot.set_ready(3);
        hot.unpin(3);
        assert_eq!(hot.pin_if_ready(page(7)), Some(3));
        assert_eq!(hot.pin_if_ready(page(8)), None);
        // Pinned: an eviction gives up.
        assert!(!hot.unready_if_unpinned(3));
        hot.unpin(3);
        assert!(hot.unready_if_unpinned(3));
        assert_eq!(hot.pin_if_ready(page(7)), None);
        assert_eq!(hot.pins(3), 0);
        hot.unmap(3, page(7));
        assert_eq!(hot.indexed(page(7)), None);
        assert_eq!(hot.hits(), 1);
    }

    /// BUF-15 on real threads: readers pin pages at random while one
    /// writer (the metadata lock's role) evicts frames and gives them to
    /// other pages. A pinned frame always names the page it was pinned for
    /// and stays Ready, an eviction never succeeds under a pin, and no pin
    /// is left or lost at the end.
    #[test]
    fn hits_race_remaps_and_never_pin_the_wrong_page() {
        use std::sync::atomic::AtomicBool;
        const FRAMES: usize = 8;
        const PAGES: u32 = 24;
        const READERS: usize = 3;
        let hot = Hot::new(FRAMES);
        // The writer's own view: which page each frame holds.
        let mut held: Vec<Option<u32>> = vec![None; FRAMES];
        for (frame, page_no) in held.iter_mut().enumerate() {
            hot.map(frame, page(frame as u32));
            hot.set_ready(frame);
            hot.unpin(frame);
            *page_no = Some(frame as u32);
        }
        let stop = AtomicBool::new(false);
        // Hits so far, so that the writer goes on until the readers raced
        // it for long enough.
        let hits = AtomicU64::new(0);
        let pins: u64 = std::thread::scope(|scope| {
            let readers: Vec<_> = (0..READERS)
                .map(|r| {
                    let (hot, stop, hits) = (&hot, &stop, &hits);
                    scope.spawn(move || {
                        let mut x = r as u32 + 1;
                        let mut pinned = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                            let id = page((x >> 8) % PAGES);
                            if let Some(frame) = hot.pin_if_ready(id) {
                                pinned += 1;
                                hits.fetch_add(1, Ordering::Relaxed);
                                assert_eq!(hot.page_key(frame), Some(key_of(id)), "BUF-15");
                                assert!(hot.is_ready(frame), "BUF-15: pinned, not Ready");
                                std::hint::spin_loop();
                                assert_eq!(hot.page_key(frame), Some(key_of(id)), "BUF-1");
                                hot.unpin(frame);
                            }
                        }
                        pinned
                    })
                })
                .collect();
            // The writer: evict a frame if nobody pins it and give it to a
            // page not resident.
            let mut next = 0u32;
            let mut remaps = 0;
            while remaps < 20_000 || hits.load(Ordering::Relaxed) < 20_000 {
                let frame = next as usize % FRAMES;
                next = next.wrapping_add(7);
                if !hot.unready_if_unpinned(frame) {
                    continue;
                }
                assert_eq!(hot.pins(frame), 0, "BUF-15: exact once not Ready");
                let old = held[frame].take().expect("mapped");
                hot.unmap(frame, page(old));
                let resident: Vec<u32> = held.iter().flatten().copied().collect();
                let new = (0..PAGES)
                    .map(|k| (old + 1 + k + next) % PAGES)
                    .find(|p| !resident.contains(p))
                    .expect("more pages than frames");
                hot.map(frame, page(new));
                hot.set_ready(frame);
                hot.unpin(frame);
                held[frame] = Some(new);
                remaps += 1;
            }
            stop.store(true, Ordering::Relaxed);
            readers.into_iter().map(|r| r.join().unwrap()).sum()
        });
        assert!(pins >= 20_000, "{pins} hits");
        for (frame, page_no) in held.iter().enumerate() {
            assert_eq!(hot.pins(frame), 0, "BUF-1: a pin left on frame {frame}");
            let id = page(page_no.expect("mapped"));
            assert_eq!(hot.indexed(id), Some(frame), "BUF-14");
        }
        assert_eq!(hot.indexed_len(), FRAMES as u64);
    }

    #[test]
    fn a_frame_given_to_another_page_turns_away_a_hit_for_the_old_one() {
        let hot = Hot::new(8);
        hot.map(2, page(1));
        hot.set_ready(2);
        hot.unpin(2);
        let generation = hot.frames[2].word.load(Ordering::Relaxed) & !PINS_MASK;
        assert!(hot.unready_if_unpinned(2));
        hot.unmap(2, page(1));
        hot.map(2, page(9));
        hot.set_ready(2);
        hot.unpin(2);
        let now = hot.frames[2].word.load(Ordering::Relaxed) & !PINS_MASK;
        assert_ne!(now, generation, "a new page, a new generation");
        assert_eq!(hot.pin_if_ready(page(1)), None);
        assert_eq!(hot.pin_if_ready(page(9)), Some(2));
    }
}
