//! Linear read-ahead: one large read for a space being read in page order.
//!
//! A full scan of a table loaded in key order reads its leaves in page
//! order, one miss at a time. Each miss is one page-sized request, so a
//! device never sees the large sequential reads it is fastest at, and a
//! disk pays a rotation for every page it could have streamed. Database
//! servers read such scans in multi-block requests (Oracle's multiblock
//! reads, InnoDB's linear read-ahead); so does this pool:
//!
//! - a space remembers the page of its last miss (its *read-ahead cursor*);
//! - a miss of the page right after it is a sequential pattern: after
//!   loading that page, the pool claims clean frames for the pages that
//!   follow (up to the pool's read-ahead window), reads them with one store
//!   request ([`crate::store::PageStore::read_pages`]), verifies each, and
//!   leaves them Ready and unpinned;
//! - the cursor moves to the last page read ahead, and that page becomes
//!   the pool's *read-ahead marker*: a fetch that hits the marker reads the
//!   next window before it returns (as Linux's readahead does at its marked
//!   page), so a scan that goes on never misses again and each window is
//!   one request; a scan that stops leaves its marker unread. A fetch under
//!   a tree latch (`fetch_resident`, DB-2) does not take the marker: it
//!   answers "not resident", so the caller fetches it unlatched. The pool keeps
//!   one marker: of two scans at once, the one whose marker was replaced
//!   goes on by its next miss, as without a marker.
//!
//! Read-ahead is advisory: it never writes a dirty victim back (it stops at
//! the first frame that is not clean), never waits, and a page that fails
//! to read or verify is simply not loaded: the fetch that needs it reads it
//! again, and reports or repairs the damage as any miss does (BUF-9).
//! Pages beyond the store's capacity are not read, and pages never written
//! (all zeros) are not kept.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Core;
use super::meta::{Space, Victim, Want};
use crate::page::{self, PageId};

/// The largest read-ahead window, in bytes (a `read_ahead_bytes` above it
/// is refused by the configuration).
pub const READ_AHEAD_BYTES_MAX: u64 = 4 << 20;
/// The cursor of a space nothing was missed in yet.
pub(super) const NO_MISS: u64 = u64::MAX;
/// No read-ahead window awaits its marker hit.
pub(super) const NO_MARKER: u64 = u64::MAX;

/// `id` as a read-ahead marker: its space in the high half, its page below.
pub(super) fn marker_of(id: PageId) -> u64 {
    (u64::from(id.space) << 32) | u64::from(id.page_no)
}

impl Core {
    /// After a miss of `id` in `space`: read ahead if the miss continues
    /// the space's sequential pattern.
    pub(super) fn after_miss(self: &Arc<Self>, space: &Space, id: PageId) {
        let window = self.read_ahead_pages.load(Ordering::Relaxed);
        let page_no = u64::from(id.page_no);
        let previous = space.last_miss.swap(page_no, Ordering::Relaxed);
        if window == 0 || previous == NO_MISS || previous + 1 != page_no {
            return;
        }
        let last = self.read_ahead(space, id, window);
        space.last_miss.store(last, Ordering::Relaxed);
        self.set_marker(id, last);
    }

    /// After a hit on `id`: if it is the read-ahead marker, read the next
    /// window (one fetch does, the one that takes the marker away).
    pub(super) fn after_hit(self: &Arc<Self>, id: PageId) {
        let marker = marker_of(id);
        if !self.is_marker(id)
            || self
                .ahead_marker
                .compare_exchange(marker, NO_MARKER, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let Ok(space) = self.space_of(id) else {
            return;
        };
        let window = self.read_ahead_pages.load(Ordering::Relaxed);
        let last = self.read_ahead(&space, id, window);
        space.last_miss.store(last, Ordering::Relaxed);
        self.set_marker(id, last);
    }

    /// Whether `id` is the read-ahead marker (with read-ahead on).
    pub(super) fn is_marker(&self, id: PageId) -> bool {
        self.read_ahead_pages.load(Ordering::Relaxed) > 0
            && self.ahead_marker.load(Ordering::Relaxed) == marker_of(id)
    }

    /// Mark page `last` of `id`'s space, if a window after `id` was read.
    fn set_marker(&self, id: PageId, last: u64) {
        if last > u64::from(id.page_no) {
            let page_no = last as crate::page::PageNo;
            let marker = marker_of(PageId::new(id.space, page_no));
            self.ahead_marker.store(marker, Ordering::Relaxed);
        }
    }

    /// Load up to `window` pages after `id` into clean frames with one
    /// store read; returns the page number of the last page claimed (or
    /// `id`'s if none).
    fn read_ahead(self: &Arc<Self>, space: &Space, id: PageId, window: usize) -> u64 {
        let first = id.page_no.saturating_add(1);
        let room = space
            .store
            .info()
            .capacity_pages
            .saturating_sub(u64::from(first));
        let wanted = (window as u64).min(room) as u32;
        let mut frames = Vec::new();
        {
            let mut meta = self.meta.lock();
            for n in 0..wanted {
                let page = PageId::new(id.space, first + n);
                if meta.lookup(page).is_some() {
                    break;
                }
                match meta.pick_victim(Want::CLEAN) {
                    Victim::Clean(frame) => {
                        meta.map(frame, page);
                        frames.push(frame);
                    }
                    _ => break,
                }
            }
        }
        if frames.is_empty() {
            return u64::from(id.page_no);
        }
        let mut images = vec![0u8; frames.len() * self.page_bytes];
        self.owe_page_io(images.len());
        let read = space.store.read_pages(first, &mut images);
        for (n, &frame) in frames.iter().enumerate() {
            let page = PageId::new(id.space, first + n as u32);
            let image = &images[n * self.page_bytes..(n + 1) * self.page_bytes];
            let location = space.store.location_of(page.page_no);
            // A page never written (all zeros) is past the space's end:
            // not worth a frame.
            let written = image.iter().any(|&b| b != 0);
            // BUF-18: a page past the log's end is left for the fetch that
            // needs it, which reports it.
            let within_log = !space.logged || self.log.past_end(page::lsn(image)).is_none();
            let good = read.is_ok()
                && written
                && within_log
                && page::verify(image, page, &space.name, location).is_ok();
            if good {
                let mut data = self.data[frame].write();
                data.clear();
                data.extend_from_slice(image);
            }
            let mut meta = self.meta.lock();
            if good {
                meta.loaded(frame, true);
                self.hot.unpin(frame);
                meta.changed();
            } else {
                meta.abandon(frame);
            }
        }
        self.changed.notify_all();
        u64::from(first) + frames.len() as u64 - 1
    }
}
