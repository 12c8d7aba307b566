//! Mini-transactions: atomic, logged changes to a set of pages.
//!
//! Structures on pages (B+trees, the space header) never touch the buffer
//! pool directly. They work through [`PageAccess`]: read a page, write a
//! page, allocate, free. The engine's implementation, [`Mtr`], keeps a
//! private copy of every page it writes (or, for a change of bytes in
//! place, only those bytes, MTR-13), whose before-image stays in the
//! pinned frame (MTR-11); when
//! the operation is done, the difference between before and after becomes
//! one log record of byte-range redo covering every page the operation
//! changed (a split touches three or four pages; they are redone together
//! or not at all). Only then are the new images installed in the buffer
//! pool, stamped with the record's LSN.
//!
//! Because redo is physical byte ranges, recovery repeats history exactly,
//! and the structure on the pages is consistent at every record boundary.
//!
//! Invariants (MTR-n):
//! 1. A structure changes only bytes at or after `PAGE_BODY_OFFSET`; the
//!    header before it belongs to the buffer pool.
//! 2. All page changes of one operation are logged in one record.
//! 3. A page's new image is installed only after its record has an LSN, and
//!    its page LSN is set to that record's end.
//! 4. The space header (page 0) is read and changed only under the space's
//!    allocation latch, held until the mini-transaction is installed or
//!    dropped, so two trees never allocate the same page.
//! 5. A page written by the mini-transaction is pinned from its first write
//!    to its install, so the install after logging cannot fail.
//! 6. A page's first change after the log's image horizon (a checkpoint's
//!    begin record) is logged as a full-page image, decided against the
//!    horizon in force when the record is appended.
//! 7. Only undo steps allocate the last [`UNDO_RESERVE_PAGES`] of a space,
//!    so a rollback does not fail where the change it undoes succeeded.
//! 8. With [`Mtr::set_no_io`] a mini-transaction never reads a device,
//!    writes back a victim or forces the log: an access that would fails,
//!    and [`Mtr::missed`] names the page (or the frame) it needed. It has
//!    then changed nothing in the pool (its copies are private, MTR-3), so
//!    the caller drops it, loads the page with no latch held and starts
//!    over with a new one (DB-2).
//! 9. A page copy's buffer comes from the thread's spare buffers and goes
//!    back to them when the copy is dropped; it is always overwritten in
//!    full before it is read, so a reused buffer never leaks old bytes into
//!    a copy. An install swaps a written copy's buffer into the frame (a
//!    change in place, MTR-13, has no copy: its bytes are written there)
//!    (`PageRef::install_owned`, the frame's header bytes carried over)
//!    and the frame's old buffer takes the copy's place, to go back to the
//!    spares: page-sized buffers move between frames and copies, and none
//!    is copied back. A copy takes only a spare of its page's own size, and
//!    an install copies instead of swapping a buffer whose allocation is
//!    not the frame's, so a pool's frames stay the size of its pages.
//! 10. [`PageAccess::visit`] makes the same pin, frame lock and unpin, in
//!     the same order, as the first read of a page; it only skips the copy.
//!     A lookup that visits each page once therefore runs the same runtime
//!     calls (the same lock points, the same buffer statistics) as one that
//!     read copies.
//!
//! 11. A page's frame does not change between the mini-transaction's first
//!     write of the page (which pins it) and the install: the tree latch
//!     (or the space's allocation latch, for the header, or the leaf's
//!     latch, MTR-12) excludes every other writer, and a write-back copies
//!     the frame without changing it.
//!     So the frame is the page's before-image, and no copy of it is kept
//!     unless the store wants every change (In-Page Logging) or debug
//!     assertions are on, which check the copy against the frame.
//!
//! 12. A one-leaf mini-transaction ([`Mtr::set_one_leaf`]) runs under its
//!     tree's shared latch and writes one page, a leaf, under that page's
//!     latch ([`LeafLatches`]), taken before the page is read for writing
//!     and held to the install. Every other writer of a tree holds its
//!     exclusive latch, so between them two one-leaf writers of different
//!     leaves run at once, and the tree's structure (every internal node,
//!     every leaf's key range) does not change under either. A change that
//!     needs more (a split, an allocation) fails with [`Miss::Latch`] and
//!     starts over under the exclusive latch.
//!
//! 13. A change that only overwrites bytes of a page's body, on a page the
//!     mini-transaction has not touched ([`PageAccess::write_in_place`]: a
//!     B+tree value replaced by one of the same length), is kept as those
//!     bytes and their offset: the page is pinned (MTR-5), its frame is the
//!     before-image (MTR-11), the redo is the diff of the changed window
//!     alone, which equals the whole page's diff because nothing else
//!     changed, and the install writes the bytes into the frame. Any later
//!     access to the page in the same mini-transaction first turns it into
//!     an ordinary copy. A store that wants every change (In-Page Logging)
//!     takes the copy path.
//!
//! 14. A page read back from the device older than it was when this
//!     mini-transaction (or, for [`crate::db`]'s one-descent writes, the
//!     seek before it under the same latch) first saw it is a **lost
//!     write**: the device did not keep a write-back the pool made (a
//!     misdirected write, say). Only a page evicted in between can be read
//!     back, and only damage can make it older, so it is reported as
//!     corruption naming the page and both LSNs ([`lost_write`]), never
//!     taken as a broken invariant: the first write of a copied page
//!     compares the LSN of the frame it pins with the copy's, unless the
//!     pin finds the same residency the copy was taken from (the same
//!     frame and generation, [`PageRef::residency`]: no eviction between,
//!     so nothing to compare and no frame lock to take).
//!
//! MTR-3 and MTR-5 are checked with `assert!` (each O(1)) in every build;
//! MTR-1 (O(header)) wherever a before-image copy is kept, so in every
//! build with debug assertions, and MTR-11 there too.

use crate::error::Result;
use crate::page::{PageNo, PageType};

/// Page access for structures built on pages. See the module documentation.
pub trait PageAccess {
    /// Page size of the space the structure lives in.
    fn page_bytes(&self) -> usize;
    /// The whole page, header included.
    fn read(&mut self, page_no: PageNo) -> Result<&[u8]>;
    /// Run `visit` on the whole page, header included, keeping no copy of
    /// it for later reads (a lookup passes each page once).
    fn visit(&mut self, page_no: PageNo, visit: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
        visit(self.read(page_no)?)
    }
    /// The whole page for writing; bytes before `PAGE_BODY_OFFSET` must not
    /// be changed (MTR-1).
    fn write(&mut self, page_no: PageNo) -> Result<&mut [u8]>;
    /// Overwrite `bytes.len()` bytes of page `page_no`, in its body, at the
    /// offset `locate` finds in the page as it is; `false` (nothing
    /// written) when `locate` finds none, and the caller writes the page
    /// instead. The same as [`PageAccess::write`] and a copy of `bytes`;
    /// a mini-transaction records it without copying the page (MTR-13).
    fn write_in_place(
        &mut self,
        page_no: PageNo,
        locate: &mut dyn FnMut(&[u8]) -> Result<Option<usize>>,
        bytes: &[u8],
    ) -> Result<bool> {
        write_by_copy(self, page_no, locate, bytes)
    }
    /// A fresh page with a zeroed body and the given type.
    fn allocate(&mut self, kind: PageType) -> Result<PageNo>;
    /// Give a page back to the space's free list.
    fn free(&mut self, page_no: PageNo) -> Result<()>;
}

use std::collections::BTreeMap;
use std::sync::Arc;

/// [`PageAccess::write_in_place`] as a read, a write and a copy of the
/// bytes into the written page.
fn write_by_copy<P: PageAccess + ?Sized>(
    pages: &mut P,
    page_no: PageNo,
    locate: &mut dyn FnMut(&[u8]) -> Result<Option<usize>>,
    bytes: &[u8],
) -> Result<bool> {
    let Some(offset) = locate(pages.read(page_no)?)? else {
        return Ok(false);
    };
    let page = pages.write(page_no)?;
    check_in_body(page_no, page.len(), offset, bytes.len())?;
    page[offset..offset + bytes.len()].copy_from_slice(bytes);
    Ok(true)
}

/// `len` bytes at `offset` lie in a page body of `page_bytes` (MTR-1).
fn check_in_body(page_no: PageNo, page_bytes: usize, offset: usize, len: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if offset >= PAGE_BODY_OFFSET && end <= page_bytes => Ok(()),
        _ => Err(Error::Invalid(format!(
            "page {page_no}: {len} bytes at {offset} are not in the body (MTR-1)"
        ))),
    }
}

use crate::buffer::{BufferPool, PageRef};
use crate::error::Error;
use crate::page::{self, PAGE_BODY_OFFSET, PageId, SpaceId};
use crate::space::SpaceHeader;
use crate::wal::Wal;
use crate::wal::record::{Body, PageRedo, Undo};

mod ranges;
pub use crate::wal::record::{apply_ranges, apply_redo};
use flashlab_runtime::{Latch, LatchGuard};
use ranges::{check_header_kept, diff_body, diff_in_place};
pub use ranges::{diff, nonzero_ranges};

/// Most pages a mini-transaction keeps copies of without having written
/// them; older ones are dropped (a scan reads any number of pages, one at a
/// time).
pub const MTR_CLEAN_PAGES_MAX: usize = 32;
/// Page-sized buffers a thread keeps for its next mini-transactions' copies
/// (MTR-9): a TPC-B transaction copies some twenty pages, and an 8 KB
/// buffer is too large for the allocator's fast caches.
pub const MTR_SPARE_BUFFERS_MAX: usize = 64;
/// Pages at the top of every data space that only undo may allocate (a
/// compensation can split a page), so that a rollback never fails for want
/// of space; a quarter of the space if that is less (MTR-7).
pub const UNDO_RESERVE_PAGES: u64 = 64;

/// MTR-14: page `page_no` of `space` was seen at `seen_lsn` and read back
/// from the device at the older `now_lsn`. The offset is where an in-place
/// space keeps the page.
pub fn lost_write(
    space: &str,
    page_no: PageNo,
    page_bytes: usize,
    seen_lsn: u64,
    now_lsn: u64,
) -> Error {
    Error::Corruption {
        space: space.to_string(),
        page_no: u64::from(page_no),
        offset_bytes: u64::from(page_no) * page_bytes as u64,
        problem: format!(
            "a lost write: the page was read back from the device at LSN {now_lsn}, \
             older than the LSN {seen_lsn} it had in memory (MTR-14)"
        ),
    }
}

/// One page a mini-transaction has touched.
struct MtrPage {
    /// Pinned only once the page is written, so that reading does not pin
    /// (a scan would otherwise pin every page it passes).
    handle: Option<PageRef>,
    image: Vec<u8>,
    /// The page was written (it is pinned from then on, MTR-5).
    written: bool,
    /// A copy of the image before the first write, kept only where it is
    /// needed: for a store that logs each change (In-Page Logging), and
    /// with debug assertions, to check MTR-11. Otherwise the before-image
    /// is the pinned frame itself, which nothing changes until the install.
    before: Option<Vec<u8>>,
    /// The residency of the page the image was copied from
    /// ([`PageRef::residency`]; 0: none, a new page's zeros or an in-place
    /// change): a pin of the same residency needs no MTR-14 check.
    residency: u64,
    /// Written in place (MTR-13): the one change, bytes at an offset of
    /// the pinned frame's image; `image` is then empty until a later access
    /// makes the copy ([`MtrPage::materialize`]).
    in_place: Option<(usize, Vec<u8>)>,
}

thread_local! {
    /// This thread's spare page buffers (MTR-9), at most
    /// [`MTR_SPARE_BUFFERS_MAX`].
    static SPARE_BUFFERS: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A copy of `bytes` in a spare buffer if the thread has one (MTR-9).
fn copy_of(bytes: &[u8]) -> Vec<u8> {
    // Only a buffer of the page's own size: an install hands the copy's
    // buffer to a frame (MTR-9), and a larger one, from a space with larger
    // pages, would grow its pool beyond its configured bytes.
    let spare = SPARE_BUFFERS.with(|spares| {
        let mut spares = spares.borrow_mut();
        let at = spares
            .iter()
            .rposition(|buffer| buffer.capacity() == bytes.len())?;
        Some(spares.swap_remove(at))
    });
    match spare {
        Some(mut buffer) => {
            buffer.clear();
            buffer.extend_from_slice(bytes);
            buffer
        }
        None => bytes.to_vec(),
    }
}

/// Keep `buffer` for a later copy, unless the thread has enough (MTR-9).
fn recycle(buffer: Vec<u8>) {
    if buffer.capacity() == 0 {
        return; // the image of an in-place change (MTR-13)
    }
    SPARE_BUFFERS.with(|spares| {
        // `try_borrow_mut`: a thread-local being torn down is left alone.
        if let Ok(mut spares) = spares.try_borrow_mut()
            && spares.len() < MTR_SPARE_BUFFERS_MAX
        {
            spares.push(buffer);
        }
    });
}

impl MtrPage {
    /// Run `f` on the page's before-image: the kept copy, or else the pinned
    /// frame, which holds it until the install (MTR-11). With debug
    /// assertions the copy is kept and checked against the frame.
    /// `f` learns whether it has the copy (true) or the frame (false).
    fn with_before<R>(&self, f: impl FnOnce(&[u8], bool) -> R) -> R {
        debug_assert!(
            self.written,
            "MTR-11: the before-image of an unwritten page"
        );
        let handle = self
            .handle
            .as_ref()
            .expect("MTR-5: a written page is pinned");
        match &self.before {
            Some(before) => {
                #[cfg(debug_assertions)]
                handle.read(|frame| {
                    assert!(
                        frame[PAGE_BODY_OFFSET..] == before[PAGE_BODY_OFFSET..],
                        "MTR-11: page {} changed in its frame during a mini-transaction that wrote it",
                        handle.id()
                    )
                });
                f(before, true)
            }
            None => handle.read(|frame| f(frame, false)),
        }
    }
}

impl MtrPage {
    /// The page's image after its change: the frame with the in-place
    /// bytes over it.
    fn patched_image(&self) -> Vec<u8> {
        let (offset, bytes) = self.in_place.as_ref().expect("an in-place change");
        let handle = self
            .handle
            .as_ref()
            .expect("MTR-5: a written page is pinned");
        let mut image = handle.read(copy_of);
        image[*offset..*offset + bytes.len()].copy_from_slice(bytes);
        image
    }

    /// Turn an in-place change into a copy of the page (MTR-13), for an
    /// access that reads the page or writes it again.
    fn materialize(&mut self) {
        if self.in_place.is_some() {
            self.image = self.patched_image();
            self.in_place = None;
        }
    }
}

impl Drop for MtrPage {
    fn drop(&mut self) {
        recycle(std::mem::take(&mut self.image));
        if let Some(before) = self.before.take() {
            recycle(before);
        }
    }
}

/// A mini-transaction over the pages of one space. See the module
/// documentation.
pub struct Mtr<'a> {
    pool: &'a BufferPool,
    space: SpaceId,
    space_name: &'a str,
    capacity_pages: u64,
    pages: BTreeMap<PageNo, MtrPage>,
    /// Pages read but not written, oldest first.
    clean: std::collections::VecDeque<PageNo>,
    /// The space's allocation latch, taken at the first touch of the space
    /// header and held until the mini-transaction ends (MTR-4).
    allocation: &'a Arc<Latch>,
    allocation_held: Option<LatchGuard>,
    /// An undo step's mini-transaction may use the undo reserve (MTR-7).
    for_undo: bool,
    /// Under a tree latch: a page that is not resident (or a new page with
    /// no clean frame) is not waited for; the access fails and the miss is
    /// noted, for the caller to load it with the latch released and restart
    /// (MTR-8, DB-2).
    no_io: bool,
    missed: Option<Miss>,
    /// Keep a copy of each written page's before-image (the store wants
    /// every change, [`Mtr::keeping_before_images`]).
    keep_before: bool,
    /// One-leaf mode (MTR-12): the leaf latches, and the one page written
    /// with its latch held.
    one_leaf: Option<&'a LeafLatches>,
    leaf_held: Option<(PageNo, LatchGuard)>,
    /// The space's store when it has an install gate (In-Page Logging,
    /// IPL-10): held shared from the record's append to the install.
    gated: Option<&'a Arc<dyn crate::store::PageStore>>,
}

/// What a mini-transaction without I/O could not get (MTR-8), or what a
/// one-leaf mini-transaction may not do (MTR-12).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Miss {
    /// A page of the space that is not resident.
    Page(PageNo),
    /// A clean frame for a new page.
    Frame,
    /// A second page to write, or a page to allocate or free: the change
    /// needs the tree's exclusive latch (MTR-12).
    Latch,
}

/// Striped latches for the leaves that one-leaf mini-transactions write
/// under a tree's shared latch (MTR-12): a page's latch is stripe
/// `(space, page) mod LEAF_LATCH_STRIPES`, so two leaves may share one and
/// then take turns.
pub struct LeafLatches {
    stripes: Vec<Arc<Latch>>,
}

/// Stripes of [`LeafLatches`].
pub const LEAF_LATCH_STRIPES: usize = 64;

impl LeafLatches {
    pub fn new() -> LeafLatches {
        LeafLatches {
            stripes: (0..LEAF_LATCH_STRIPES).map(|_| Latch::new()).collect(),
        }
    }

    fn acquire(&self, space: SpaceId, page_no: PageNo) -> LatchGuard {
        let stripe = (page_no as usize)
            .wrapping_mul(31)
            .wrapping_add(space as usize)
            % LEAF_LATCH_STRIPES;
        self.stripes[stripe].acquire()
    }
}

impl Default for LeafLatches {
    fn default() -> Self {
        LeafLatches::new()
    }
}

/// A record [`Mtr::log`] appended.
struct Appended {
    lsn: u64,
    end_lsn: u64,
    /// It has page changes (redo), so the log counts it uninstalled.
    changed: bool,
}

/// A logged, installed mini-transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Logged {
    pub lsn: u64,
    pub end_lsn: u64,
}

impl<'a> Mtr<'a> {
    /// Start a mini-transaction on `space`, whose device holds
    /// `capacity_pages` pages and whose allocation latch is `allocation`.
    /// It borrows what it shares with the space's other users: taking a
    /// count of each (an atomic every core writes) would cost more than
    /// the pages it changes.
    pub fn new(
        pool: &'a BufferPool,
        space: SpaceId,
        space_name: &'a str,
        capacity_pages: u64,
        allocation: &'a Arc<Latch>,
    ) -> Mtr<'a> {
        Mtr {
            pool,
            space,
            space_name,
            capacity_pages,
            pages: BTreeMap::new(),
            clean: std::collections::VecDeque::new(),
            allocation,
            allocation_held: None,
            for_undo: false,
            no_io: false,
            missed: None,
            keep_before: false,
            one_leaf: None,
            leaf_held: None,
            gated: None,
        }
    }

    /// One-leaf mode (MTR-12), for a change under the tree's *shared* latch:
    /// the first page written is latched (its stripe of `latches`) and read
    /// afresh under that latch; writing any other page, allocating or
    /// freeing fails with [`Miss::Latch`], for the caller to start over
    /// under the tree's exclusive latch.
    pub fn set_one_leaf(&mut self, latches: &'a LeafLatches) {
        self.one_leaf = Some(latches);
    }

    /// Keep a copy of each written page's before-image, for a store that
    /// is told every change (one with a [`crate::store::PageLog`]).
    pub fn keeping_before_images(mut self, keep: bool) -> Mtr<'a> {
        self.keep_before = keep;
        self
    }

    /// The space's store, whose install gate this mini-transaction holds
    /// from its record's append to its install (IPL-10); set by the
    /// database for a store that has one.
    pub fn with_gated_store(mut self, store: &'a Arc<dyn crate::store::PageStore>) -> Mtr<'a> {
        self.gated = Some(store);
        self
    }

    /// Take this mini-transaction out, leaving an empty one with nothing
    /// read, written or latched in its place (to commit it from a borrow).
    pub fn take(&mut self) -> Mtr<'a> {
        let empty = Mtr::new(
            self.pool,
            self.space,
            self.space_name,
            self.capacity_pages,
            self.allocation,
        )
        .keeping_before_images(self.keep_before);
        let empty = Mtr {
            gated: self.gated,
            ..empty
        };
        std::mem::replace(self, empty)
    }

    /// Make this an undo step's mini-transaction (MTR-7).
    pub fn set_for_undo(&mut self) {
        self.for_undo = true;
    }

    /// Do no I/O from now on, or again allow it (MTR-8): an access that
    /// would read a page, or take a frame whose victim must be written
    /// back, fails instead, and [`Mtr::missed`] says what it needed.
    pub fn set_no_io(&mut self, no_io: bool) {
        self.no_io = no_io;
    }

    /// What the last access that failed for want of I/O needed (MTR-8).
    pub fn missed(&self) -> Option<Miss> {
        self.missed
    }

    /// Load what a miss needed, with no latch held (MTR-8).
    pub fn load_missed(pool: &BufferPool, space: SpaceId, miss: Miss) -> Result<()> {
        match miss {
            Miss::Page(page_no) => pool.fetch(PageId::new(space, page_no)).map(drop),
            Miss::Frame => pool.make_room(),
            Miss::Latch => Ok(()),
        }
    }

    fn miss(&mut self, miss: Miss) -> Error {
        self.missed = Some(miss);
        Error::Invalid(format!(
            "mini-transaction on space {}: {miss:?} not resident under a tree latch (restart)",
            self.space
        ))
    }

    /// Pin `page_no`: at once if resident; else read it, or with `no_io`
    /// fail and note the miss.
    fn pin(&mut self, page_no: PageNo) -> Result<PageRef> {
        let id = PageId::new(self.space, page_no);
        if !self.no_io {
            return self.pool.fetch(id);
        }
        match self.pool.fetch_resident(id) {
            Some(handle) => Ok(handle),
            None => Err(self.miss(Miss::Page(page_no))),
        }
    }

    /// MTR-14's error for `page_no` of this mini-transaction's space.
    pub fn lost_write(&self, page_no: PageNo, seen_lsn: u64, now_lsn: u64) -> Error {
        lost_write(
            self.space_name,
            page_no,
            self.pool.page_bytes(),
            seen_lsn,
            now_lsn,
        )
    }

    /// This mini-transaction runs an undo step: it may allocate from the
    /// undo reserve (MTR-7).
    pub fn for_undo(mut self) -> Mtr<'a> {
        self.for_undo = true;
        self
    }

    /// Pages the space may hold for this mini-transaction.
    fn allocation_limit_pages(&self) -> u64 {
        let reserve = UNDO_RESERVE_PAGES.min(self.capacity_pages / 4);
        match self.for_undo {
            true => self.capacity_pages,
            false => self.capacity_pages - reserve,
        }
    }

    /// MTR-12: in one-leaf mode, the first page written is latched and its
    /// copy, read before the latch, dropped so that it is read again under
    /// it; any other page to write is refused.
    fn latch_the_leaf(&mut self, page_no: PageNo) -> Result<()> {
        match &self.leaf_held {
            Some((held, _)) if *held == page_no => Ok(()),
            Some(_) => Err(self.miss(Miss::Latch)),
            None => {
                let latches = self.one_leaf.expect("one-leaf mode");
                let guard = latches.acquire(self.space, page_no);
                self.leaf_held = Some((page_no, guard));
                if self.pages.get(&page_no).is_some_and(|p| !p.written) {
                    self.pages.remove(&page_no);
                }
                Ok(())
            }
        }
    }

    fn load(&mut self, page_no: PageNo) -> Result<&mut MtrPage> {
        if let Some(p) = self.pages.get_mut(&page_no) {
            p.materialize();
        } else {
            self.forget_old_clean_pages();
            let id = PageId::new(self.space, page_no);
            let (image, residency) = match self.pool.visit_resident_tagged(id, copy_of) {
                Some(copied) => copied,
                None => {
                    let handle = self.pin(page_no)?;
                    (handle.read(copy_of), handle.residency())
                }
            };
            self.pages.insert(
                page_no,
                MtrPage {
                    handle: None,
                    image,
                    written: false,
                    before: None,
                    residency,
                    in_place: None,
                },
            );
            self.clean.push_back(page_no);
        }
        Ok(self.pages.get_mut(&page_no).expect("just loaded"))
    }

    /// Drop the oldest copies of pages only read, keeping the count bounded.
    fn forget_old_clean_pages(&mut self) {
        while self.clean.len() >= MTR_CLEAN_PAGES_MAX {
            let Some(page_no) = self.clean.pop_front() else {
                break;
            };
            if self.pages.get(&page_no).is_some_and(|p| !p.written) {
                self.pages.remove(&page_no);
            }
        }
    }

    /// Free `page_no` without reading it from its device when it is not
    /// resident: a page whose contents nothing needs (a cut bulk load's,
    /// perhaps torn by the crash, BULK-6), overwritten whole and logged as
    /// an image.
    pub fn free_unread(&mut self, page_no: PageNo) -> Result<()> {
        if !self.pages.contains_key(&page_no) {
            let handle = self
                .pool
                .fetch_to_overwrite(PageId::new(self.space, page_no))?;
            self.insert_pinned(page_no, handle);
        }
        self.free(page_no)
    }

    /// A page beyond the space's high-water mark: never on the device, so
    /// it is not read.
    fn load_new(&mut self, page_no: PageNo) -> Result<&mut MtrPage> {
        let id = PageId::new(self.space, page_no);
        let handle = if self.no_io {
            match self.pool.fetch_new_no_io(id)? {
                Some(handle) => handle,
                None => return Err(self.miss(Miss::Frame)),
            }
        } else {
            self.pool.fetch_new(id)?
        };
        Ok(self.insert_pinned(page_no, handle))
    }

    /// Keep a copy of pinned page `page_no`, with its pin.
    fn insert_pinned(&mut self, page_no: PageNo, handle: PageRef) -> &mut MtrPage {
        let image = handle.read(copy_of);
        self.pages.insert(
            page_no,
            MtrPage {
                handle: Some(handle),
                image,
                written: false,
                before: None,
                residency: 0,
                in_place: None,
            },
        );
        self.pages.get_mut(&page_no).expect("just loaded")
    }

    fn header(&mut self) -> Result<SpaceHeader> {
        if self.allocation_held.is_none() {
            // MTR-4: trees of one space allocate from one header; serialise
            // them from the header's read to the commit.
            self.allocation_held = Some(self.allocation.acquire());
            // A copy read before the latch may be stale now.
            if self.pages.get(&0).is_some_and(|p| !p.written) {
                self.pages.remove(&0);
            }
        }
        let name = self.space_name;
        SpaceHeader::decode(&self.load(0)?.image, name)
    }

    /// Record `lsn` as the anchor of the space header (DB-9), under the
    /// allocation latch like any change of the header (MTR-4).
    pub(crate) fn stamp_anchor(&mut self, lsn: u64) -> Result<()> {
        self.header()?;
        let page = self.write(0)?;
        let at = crate::space::ANCHOR_OFFSET;
        page[at..at + 8].copy_from_slice(&lsn.to_le_bytes());
        Ok(())
    }

    fn set_header(&mut self, header: &SpaceHeader) -> Result<()> {
        header.encode(self.write(0)?);
        Ok(())
    }

    /// Turn the written pages into redo: the byte ranges that differ, or,
    /// for a page whose LSN is at or below `horizon_lsn` (its first change
    /// since the checkpoint that set the horizon), a full-page image: its
    /// non-zero ranges over a zeroed body (MTR-6).
    fn redo(&self, horizon_lsn: u64) -> Vec<PageRedo> {
        self.pages
            .iter()
            .filter(|(_, p)| p.written)
            .filter_map(|(&page_no, p)| {
                let (changed, image) = p.with_before(|before, copy| {
                    let before_lsn = page::lsn(before);
                    let image = before_lsn <= horizon_lsn && horizon_lsn > 0;
                    // MTR-1 is checked against a kept copy; a frame's header
                    // may differ from the copy's in fields the pool owns
                    // (the checksum of a page read back after a write-back).
                    if p.in_place.is_none() {
                        assert_eq!(before.len(), p.image.len(), "MTR-1: a page changed size");
                        if copy {
                            check_header_kept(before, &p.image);
                        }
                    }
                    // A full-page image needs only to know that something
                    // changed, not where.
                    let changed = match (&p.in_place, image) {
                        (Some((offset, bytes)), true) => {
                            Changed::Some(before[*offset..*offset + bytes.len()] != bytes[..])
                        }
                        (None, true) => {
                            Changed::Some(before[PAGE_BODY_OFFSET..] != p.image[PAGE_BODY_OFFSET..])
                        }
                        (Some((offset, bytes)), false) => {
                            Changed::Ranges(diff_in_place(before, *offset, bytes))
                        }
                        (None, false) => Changed::Ranges(diff_body(before, &p.image)),
                    };
                    (changed, image)
                });
                let ranges = match (changed, &p.in_place) {
                    (Changed::Some(false), _) => return None,
                    (Changed::Ranges(ranges), _) if ranges.is_empty() => return None,
                    (Changed::Ranges(ranges), _) => ranges,
                    (Changed::Some(true), Some(_)) => {
                        let image = p.patched_image();
                        let ranges = nonzero_ranges(&image);
                        recycle(image);
                        ranges
                    }
                    (Changed::Some(true), None) => nonzero_ranges(&p.image),
                };
                Some(PageRedo {
                    page: PageId::new(self.space, page_no),
                    image,
                    ranges,
                })
            })
            .collect()
    }

    /// Log `body(redo)` for the current image horizon, giving the body new
    /// redo if a checkpoint moves the horizon meanwhile; `None` if nothing
    /// changed and `always` is false.
    fn log(
        &self,
        wal: &Wal,
        (txn, prev_lsn): (u64, u64),
        always: bool,
        body: impl FnOnce(Vec<PageRedo>) -> Body,
    ) -> Result<Option<Appended>> {
        let mut horizon = wal.image_horizon();
        let redo = self.redo(horizon);
        let changed = !redo.is_empty();
        if !changed && !always {
            return Ok(None);
        }
        let mut body = body(redo);
        loop {
            match wal.append_for_horizon(horizon, txn, prev_lsn, body)? {
                Ok((lsn, end_lsn)) => {
                    return Ok(Some(Appended {
                        lsn,
                        end_lsn,
                        changed,
                    }));
                }
                // The same pages changed: only full images and diffs trade
                // places, so the redo is never empty here.
                Err(back) => {
                    horizon = wal.image_horizon();
                    body = back.with_redo(self.redo(horizon));
                }
            }
        }
    }

    /// Log the changes as one record (MTR-2) and install the new images
    /// (MTR-3). Returns `None` if nothing changed.
    pub fn commit(
        self,
        wal: &Wal,
        txn: u64,
        prev_lsn: u64,
        undo: Option<Undo>,
    ) -> Result<Option<Logged>> {
        let store = self.store();
        let _gate = store
            .as_ref()
            .and_then(|s| s.page_log())
            .map(|p| p.install_gate().read());
        let logged = self.log(wal, (txn, prev_lsn), false, |redo| Body::Update {
            undo,
            redo,
        })?;
        let Some(appended) = logged else {
            return Ok(None);
        };
        Ok(Some(self.install_appended(wal, txn, appended)))
    }

    /// Pages this mini-transaction has written so far.
    pub fn pages_written(&self) -> usize {
        self.pages.values().filter(|p| p.written).count()
    }

    /// Log the changes of several B+tree changes made in this one
    /// mini-transaction, one record per change (MTR-2 per change): every
    /// change but the last gets a record with its undo and no redo, then
    /// the last one's record carries the redo of them all, and only then
    /// are the pages installed. A crash between them leaves undo records
    /// whose changes never reached a page; undoing them (deleting a key
    /// that is absent) changes nothing. Returns each record's LSN in order;
    /// on an error, the LSNs of the records already appended come back
    /// with it, so that the caller can still undo them.
    pub fn commit_many(
        self,
        wal: &Wal,
        txn: u64,
        prev_lsn: u64,
        mut undos: Vec<Undo>,
    ) -> std::result::Result<Vec<u64>, (Vec<u64>, Error)> {
        let last = undos.pop().expect("at least one change");
        let mut lsns = Vec::with_capacity(undos.len() + 1);
        let mut prev = prev_lsn;
        for undo in undos {
            match wal.append_latched(
                txn,
                prev,
                Body::Update {
                    undo: Some(undo),
                    redo: Vec::new(),
                },
            ) {
                Ok((lsn, _)) => {
                    lsns.push(lsn);
                    prev = lsn;
                }
                Err(e) => return Err((lsns, e)),
            }
        }
        match self.commit(wal, txn, prev, Some(last)) {
            Ok(Some(logged)) => {
                lsns.push(logged.lsn);
                Ok(lsns)
            }
            Ok(None) => unreachable!("MTR-2: a batch of inserts changed no page"),
            Err(e) => Err((lsns, e)),
        }
    }

    /// Log the changes as a compensation record of an undo step.
    pub fn commit_compensation(
        self,
        wal: &Wal,
        txn: u64,
        prev_lsn: u64,
        undo_next: u64,
    ) -> Result<Logged> {
        let store = self.store();
        let _gate = store
            .as_ref()
            .and_then(|s| s.page_log())
            .map(|p| p.install_gate().read());
        // A step that changed nothing is still logged, so undo moves on.
        let appended = self
            .log(wal, (txn, prev_lsn), true, |redo| Body::Compensation {
                undo_next,
                redo,
            })?
            .expect("always logged");
        Ok(self.install_appended(wal, txn, appended))
    }

    /// Install the pages of an appended record, and tell the log so if the
    /// record has page changes: a record without them was never counted as
    /// uninstalled (WAL-6), and looking for it would read every slot.
    fn install_appended(self, wal: &Wal, txn: u64, appended: Appended) -> Logged {
        let Appended {
            lsn,
            end_lsn,
            changed,
        } = appended;
        self.install(txn, lsn, end_lsn);
        if changed {
            wal.installed(lsn);
        }
        Logged { lsn, end_lsn }
    }

    /// The store whose install gate is held shared from the record's
    /// append to the install (IPL-10), so that an In-Page Logging force
    /// sees every mini-transaction whole or not at all.
    fn store(&self) -> Option<&'a Arc<dyn crate::store::PageStore>> {
        self.gated
    }

    fn install(mut self, txn: u64, lsn: u64, end_lsn: u64) {
        assert!(
            lsn < end_lsn,
            "MTR-3: install of an empty record at {lsn}..{end_lsn}"
        );
        let keep_before = self.keep_before;
        for (page_no, p) in &mut self.pages {
            if !p.written {
                continue; // only read
            }
            let handle = p.handle.as_ref().unwrap_or_else(|| {
                panic!(
                    "MTR-5: page {page_no} of space {} written but not pinned",
                    self.space
                )
            });
            // A store that keeps a log of each page's changes sees the
            // change first (PLOG-1).
            if keep_before {
                handle.note_update(txn, end_lsn, before_of(p), &p.image);
            }
            match &p.in_place {
                // MTR-13: the bytes go into the frame; there is no copy.
                Some((offset, bytes)) => handle.install_in_place(*offset, bytes, lsn, end_lsn),
                // The frame takes the copy's buffer; the copy gets the
                // frame's old one, recycled when the mini-transaction ends
                // (MTR-9).
                None => handle.install_owned(&mut p.image, lsn, end_lsn),
            }
        }
    }
}

fn before_of(p: &MtrPage) -> &[u8] {
    p.before
        .as_deref()
        .expect("written pages have a before-image")
}

impl PageAccess for Mtr<'_> {
    fn page_bytes(&self) -> usize {
        self.pool.page_bytes()
    }

    fn read(&mut self, page_no: PageNo) -> Result<&[u8]> {
        Ok(&self.load(page_no)?.image)
    }

    /// A page this mini-transaction has a copy of is visited in the copy;
    /// any other is visited in its frame, under the frame's lock, with the
    /// same pin and unpin a first read makes, and no copy is kept (MTR-10).
    fn visit(&mut self, page_no: PageNo, visit: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
        if let Some(p) = self.pages.get_mut(&page_no) {
            p.materialize();
            return visit(&p.image);
        }
        let id = PageId::new(self.space, page_no);
        if let Some(visited) = self.pool.visit_resident(id, &mut *visit) {
            return visited;
        }
        let handle = self.pin(page_no)?;
        handle.read(|bytes| visit(bytes))
    }

    fn write(&mut self, page_no: PageNo) -> Result<&mut [u8]> {
        if self.one_leaf.is_some() {
            self.latch_the_leaf(page_no)?;
        }
        let needs_pin = self.load(page_no)?.handle.is_none();
        if needs_pin && !self.pages[&page_no].written {
            // Pin the page now, so installing after logging cannot fail.
            // The tree latch keeps the frame's image equal to our copy,
            // unless the page was evicted meanwhile and the device lost
            // its write (MTR-14).
            let handle = self.pin(page_no)?;
            let p = &self.pages[&page_no];
            // Pinned where it was copied from: no eviction in between.
            if handle.residency() != p.residency {
                let copy_lsn = page::lsn(&p.image);
                let frame_lsn = handle.read(page::lsn);
                if frame_lsn < copy_lsn {
                    return Err(self.lost_write(page_no, copy_lsn, frame_lsn));
                }
                debug_assert_eq!(
                    frame_lsn, copy_lsn,
                    "MTR-11: page {page_no} changed in its frame between its copy and its pin"
                );
            }
            self.pages.get_mut(&page_no).expect("loaded").handle = Some(handle);
        }
        let keep_before = self.keep_before || cfg!(debug_assertions);
        let p = self.pages.get_mut(&page_no).expect("loaded");
        if !p.written {
            p.written = true;
            if keep_before {
                p.before = Some(copy_of(&p.image));
            }
        }
        Ok(&mut p.image)
    }

    /// MTR-13: a page this mini-transaction has not touched is pinned
    /// (and, in one-leaf mode, latched, MTR-12) and `locate` runs on its
    /// frame; the change is kept as the bytes and their offset, and goes
    /// into the frame at the install. A page already touched, or a store
    /// that wants every change's before-image (In-Page Logging), takes the
    /// copy path.
    fn write_in_place(
        &mut self,
        page_no: PageNo,
        locate: &mut dyn FnMut(&[u8]) -> Result<Option<usize>>,
        bytes: &[u8],
    ) -> Result<bool> {
        // MTR-12: the page is read for writing under its leaf latch.
        if self.one_leaf.is_some() {
            self.latch_the_leaf(page_no)?;
        }
        if self.keep_before || self.pages.contains_key(&page_no) {
            return write_by_copy(self, page_no, locate, bytes);
        }
        let handle = self.pin(page_no)?;
        let located = handle.read(|page| -> Result<Option<(usize, Option<Vec<u8>>)>> {
            let Some(offset) = locate(page)? else {
                return Ok(None);
            };
            check_in_body(page_no, page.len(), offset, bytes.len())?;
            // With debug assertions the before-image is kept to check
            // MTR-11, as for a copy.
            Ok(Some((
                offset,
                cfg!(debug_assertions).then(|| copy_of(page)),
            )))
        })?;
        let Some((offset, before)) = located else {
            return Ok(false);
        };
        self.pages.insert(
            page_no,
            MtrPage {
                handle: Some(handle),
                image: Vec::new(),
                written: true,
                before,
                residency: 0,
                in_place: Some((offset, bytes.to_vec())),
            },
        );
        Ok(true)
    }

    fn allocate(&mut self, kind: PageType) -> Result<PageNo> {
        if self.one_leaf.is_some() {
            return Err(self.miss(Miss::Latch));
        }
        let mut header = self.header()?;
        let page_no = if header.free_head != 0 {
            let page_no = header.free_head;
            let next = SpaceHeader::free_next(self.read(page_no)?);
            header.free_head = next;
            page_no
        } else {
            if u64::from(header.page_count) >= self.allocation_limit_pages() {
                return Err(Error::PagesInUse {
                    space: self.space_name.to_string(),
                    capacity_pages: self.capacity_pages,
                    undo_reserve_pages: self.capacity_pages - self.allocation_limit_pages(),
                });
            }
            let page_no = header.page_count;
            header.page_count += 1;
            self.load_new(page_no)?;
            page_no
        };
        self.set_header(&header)?;
        let page = self.write(page_no)?;
        page[PAGE_BODY_OFFSET..].fill(0);
        page::set_page_type(page, kind);
        Ok(page_no)
    }

    fn free(&mut self, page_no: PageNo) -> Result<()> {
        if self.one_leaf.is_some() {
            return Err(self.miss(Miss::Latch));
        }
        if page_no == 0 {
            return Err(Error::Invalid(
                "the space header page cannot be freed".into(),
            ));
        }
        let mut header = self.header()?;
        let page = self.write(page_no)?;
        page[PAGE_BODY_OFFSET..].fill(0);
        page::set_page_type(page, PageType::Free);
        SpaceHeader::set_free_next(page, header.free_head);
        header.free_head = page_no;
        self.set_header(&header)
    }
}

/// What a page's redo needs to know of its change: whether there is one
/// (a full-page image logs the whole page), or where (a diff).
enum Changed {
    Some(bool),
    Ranges(Vec<(u32, Vec<u8>)>),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spare buffer of another page size is never a copy's buffer: the
    /// install would hand it to a frame of a smaller page (MTR-9).
    #[test]
    fn regression_a_copy_takes_only_a_spare_buffer_of_its_page_size() {
        let page_4k = vec![7u8; 4096];
        recycle(Vec::with_capacity(16384));
        let copy = copy_of(&page_4k);
        assert_eq!(copy.capacity(), 4096, "a 16 KB spare became a 4 KB copy");
        assert_eq!(copy, page_4k);
        recycle(copy);
        let again = copy_of(&page_4k);
        assert_eq!(again.capacity(), 4096);
        let large = copy_of(&[1u8; 16384]);
        assert_eq!(large.capacity(), 16384);
    }
}
