//! The paths that do I/O: a miss (victim, write-back of a dirty victim,
//! read and verify) and the write-back of one frame.
//!
//! Each follows the same shape (BUF-4): decide and mark under the metadata
//! lock, release it, do the I/O holding at most the frame's data lock,
//! re-lock to publish the outcome and wake waiters.

use std::sync::Arc;

use super::meta::Lookup;
use super::meta::{FrameState, Space, Victim, Want, WriteState};
use super::{Core, PageRef};
use crate::error::{Error, Result};
use crate::page::{self, PageId};

/// Where the image of a frame being loaded comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Source {
    /// Read it from the space's device and verify it.
    Device,
    /// A page never written: zeros with the id set.
    Zero,
    /// A page its caller overwrites whole: resident, pinned as it is;
    /// absent, zeros with the id set, never read.
    Overwrite,
}

/// How a frame was filled.
enum Loaded {
    /// As read (or zeroed).
    Clean,
    /// Rebuilt from the log after damage; dirty from `rec_lsn` (BUF-9).
    Repaired { rec_lsn: u64 },
}

/// What a lookup got for the caller.
enum Claim {
    /// The page was resident; the frame is pinned for the caller.
    Resident(usize),
    /// The caller owns this frame in the Loading state, pinned once.
    Claimed(usize),
}

/// Whether a write-back waits for I/O in flight on the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Wait {
    Yes,
    No,
}

impl Core {
    /// Owe one page access at the database's prices ([`crate::cpu_prices`]).
    #[inline]
    pub(super) fn owe_page_access(&self) {
        if let Some(cpu) = self.cpu.get() {
            cpu.owe_page_access();
        }
    }

    /// Owe one page I/O request of `bytes`.
    pub(super) fn owe_page_io(&self, bytes: usize) {
        if let Some(cpu) = self.cpu.get() {
            cpu.owe_page_io(bytes);
        }
    }

    /// Pin `id`, loading it from `source` on a miss.
    pub(super) fn fetch(self: &Arc<Self>, id: PageId, source: Source) -> Result<PageRef> {
        self.owe_page_access();
        // A hit takes no lock (BUF-15); a page is resident only in a
        // registered space.
        if let Some(frame) = self.hot.pin_if_ready(id) {
            return self.hit(frame, id, source);
        }
        let space = self.space_of(id)?;
        let frame = match self.claim(id)? {
            Claim::Resident(frame) => return self.hit(frame, id, source),
            Claim::Claimed(frame) => frame,
        };
        let page = self.fill(frame, id, &space, source)?;
        if source == Source::Device {
            self.after_miss(&space, id);
        }
        Ok(page)
    }

    /// A fetch of resident `id` in `frame`: renew it if asked, and read the
    /// next window if it is the read-ahead marker.
    fn hit(self: &Arc<Self>, frame: usize, id: PageId, source: Source) -> Result<PageRef> {
        let page = self.page_ref(frame, id);
        match source {
            Source::Zero => self.renew(&page)?,
            Source::Device => self.after_hit(id),
            Source::Overwrite => {}
        }
        Ok(page)
    }

    /// Load a claimed frame and publish the outcome.
    fn fill(
        self: &Arc<Self>,
        frame: usize,
        id: PageId,
        space: &Space,
        source: Source,
    ) -> Result<PageRef> {
        let loaded = self.load(frame, id, space, source);
        {
            let mut meta = self.meta.lock();
            match loaded {
                Ok(Loaded::Clean) => meta.loaded(frame, source == Source::Device),
                Ok(Loaded::Repaired { rec_lsn }) => meta.repaired(frame, rec_lsn),
                Err(_) => meta.abandon(frame),
            }
        }
        self.changed.notify_all();
        loaded.map(|_| self.page_ref(frame, id))
    }

    /// Pin `id` if it is resident and ready; never waits, never does I/O
    /// (a tree operation under its latch, DB-2).
    pub(super) fn fetch_resident(self: &Arc<Self>, id: PageId) -> Option<PageRef> {
        // The read-ahead marker's fetch reads the next window: not under a
        // latch, so the caller takes the path that may do I/O.
        if self.is_marker(id) {
            return None;
        }
        let frame = self.hot.pin_if_ready(id)?;
        self.owe_page_access();
        Some(self.page_ref(frame, id))
    }

    /// `fetch(id, Source::Zero)` if it needs no I/O: the page is resident,
    /// or a clean frame is free for it now. `None` otherwise (DB-2).
    pub(super) fn fetch_new_no_io(self: &Arc<Self>, id: PageId) -> Result<Option<PageRef>> {
        let space = self.space_of(id)?;
        let mut meta = self.meta.lock();
        match meta.pin_resident(id) {
            Lookup::Pinned(frame) => {
                drop(meta);
                let page = self.page_ref(frame, id);
                self.renew(&page)?;
                return Ok(Some(page));
            }
            Lookup::Busy => return Ok(None),
            Lookup::Absent => {}
        }
        match meta.pick_victim(Want::CLEAN) {
            Victim::Clean(frame) => {
                meta.map(frame, id);
                drop(meta);
                self.fill(frame, id, &space, Source::Zero).map(Some)
            }
            Victim::Dirty(..) | Victim::Busy => Ok(None),
            Victim::Exhausted => Err(self.exhausted(meta.frames.len())),
        }
    }

    /// Make a clean frame available for the next miss: write back and free
    /// a dirty victim if the CLOCK hand meets one (DB-2: a tree operation
    /// calls this with no latch held, then restarts).
    pub(super) fn make_room(&self) -> Result<()> {
        let mut meta = self.meta.lock();
        loop {
            match meta.pick_victim(Want::ROOM) {
                Victim::Clean(_) => return Ok(()),
                Victim::Dirty(frame, old) => {
                    let wake = std::mem::take(&mut meta.cleaner_wanted);
                    drop(meta);
                    if wake {
                        self.cleaner.nudge();
                    }
                    return self.evict_dirty(frame, old);
                }
                Victim::Busy => meta = self.changed.wait(meta),
                Victim::Exhausted => return Err(self.exhausted(meta.frames.len())),
            }
        }
    }

    fn page_ref(self: &Arc<Self>, frame: usize, id: PageId) -> PageRef {
        PageRef {
            core: self.clone(),
            frame,
            id,
        }
    }

    pub(super) fn space_of(&self, id: PageId) -> Result<Arc<Space>> {
        self.spaces.read().get(&id.space).cloned().ok_or_else(|| {
            Error::Invalid(format!(
                "page {id}: space {} is not registered with the buffer pool of {}-byte pages",
                id.space, self.page_bytes
            ))
        })
    }

    /// Find `id` or a frame for it; wait while it or every candidate victim
    /// has I/O in flight; fail at once when every frame is pinned. A miss
    /// that met a dirty victim wakes the page cleaner (CLEAN-5).
    fn claim(&self, id: PageId) -> Result<Claim> {
        let mut wake = false;
        let claim = self.claim_frame(id, &mut wake);
        if wake {
            self.cleaner.nudge();
        }
        claim
    }

    /// [`Core::claim`] but the wake-up, which waits for the metadata lock
    /// to be released (BUF-13): `wake` is set if a dirty victim was met.
    fn claim_frame(&self, id: PageId, wake: &mut bool) -> Result<Claim> {
        let mut meta = self.meta.lock();
        loop {
            match meta.pin_resident(id) {
                Lookup::Pinned(frame) => return Ok(Claim::Resident(frame)),
                Lookup::Busy => {
                    meta = self.changed.wait(meta);
                    continue;
                }
                Lookup::Absent => {}
            }
            let victim = meta.pick_victim(Want::MISS);
            *wake |= std::mem::take(&mut meta.cleaner_wanted);
            match victim {
                Victim::Clean(frame) => {
                    meta.map(frame, id);
                    return Ok(Claim::Claimed(frame));
                }
                Victim::Dirty(frame, old) => {
                    drop(meta);
                    self.evict_dirty(frame, old)?;
                    // Someone may have loaded `id` meanwhile (BUF-3): look again.
                    meta = self.meta.lock();
                }
                Victim::Busy => meta = self.changed.wait(meta),
                Victim::Exhausted => return Err(self.exhausted(meta.frames.len())),
            }
        }
    }

    fn exhausted(&self, frames: usize) -> Error {
        Error::Invalid(format!(
            "buffer pool of {frames} frames of {}-byte pages exhausted: all pinned",
            self.page_bytes
        ))
    }

    /// Fill a Loading frame. Holds only the frame's data lock (BUF-4).
    fn load(&self, frame: usize, id: PageId, space: &Space, source: Source) -> Result<Loaded> {
        let mut data = self.data[frame].write();
        data.resize(self.page_bytes, 0);
        match source {
            Source::Zero | Source::Overwrite => {
                data.fill(0);
                page::set_id(&mut data, id);
                Ok(Loaded::Clean)
            }
            Source::Device => {
                self.owe_page_io(self.page_bytes);
                let offset_bytes = space.store.location_of(id.page_no);
                let read_verified = |data: &mut [u8]| match space.store.read_page(id.page_no, data)
                {
                    Ok(()) => match page::verify(data, id, &space.name, offset_bytes) {
                        Ok(()) => Ok(None),
                        Err(e) => Ok(Some(e)),
                    },
                    Err(e) if crate::store::is_read_damage(&e) => Ok(Some(e)),
                    Err(e) => Err(e),
                };
                // A flip on the way (not on the medium) reads clean the
                // second time: read a damaged page once more first.
                let damage = match read_verified(&mut data)? {
                    None => return self.within_log(&data, id, space, offset_bytes),
                    Some(_) => match read_verified(&mut data)? {
                        None => return self.within_log(&data, id, space, offset_bytes),
                        Some(e) => e,
                    },
                };
                // BUF-9: damage is repaired from the log, or reported.
                if !space.logged {
                    return Err(damage);
                }
                let before_lsn = space.store.page_log().and_then(|p| p.repair_before_lsn());
                match self.log.rebuild_page(id, self.page_bytes, before_lsn) {
                    Some(Ok((image, rec_lsn))) if image.len() == data.len() => {
                        data.copy_from_slice(&image);
                        Ok(Loaded::Repaired { rec_lsn })
                    }
                    _ => Err(damage),
                }
            }
        }
    }

    /// BUF-18: a logged page read from its device has a page LSN at or
    /// before the end of the log (the WAL rule wrote it only once the log
    /// was durable that far). A page past the end proves the log lost its
    /// tail (an older copy of the log, a truncated or zeroed tail): damage,
    /// never a page to change, since a change at the log's end would land
    /// behind its page LSN.
    fn within_log(&self, data: &[u8], id: PageId, space: &Space, offset: u64) -> Result<Loaded> {
        let page_lsn = page::lsn(data);
        if !space.logged {
            return Ok(Loaded::Clean);
        }
        match self.log.past_end(page_lsn) {
            None => Ok(Loaded::Clean),
            Some((end, log)) => Err(Error::Damaged(format!(
                "{log}: the log lost its tail: page {id} of data space '{}' (device offset {offset}) \
                 has LSN {page_lsn}, the log ends at {end} (an older or truncated copy of the log?)",
                space.name
            ))),
        }
    }

    /// `fetch_new` of a resident page: allowed only if it is clean and
    /// nobody else holds it; then it starts over as zeros.
    fn renew(&self, page: &PageRef) -> Result<()> {
        let mut data = self.data[page.frame].write();
        {
            let meta = self.meta.lock();
            let f = &meta.frames[page.frame];
            if f.dirty || self.hot.pins(page.frame) > 1 {
                let why = if f.dirty {
                    "has unwritten changes"
                } else {
                    "is pinned elsewhere"
                };
                return Err(Error::Invalid(format!(
                    "fetch_new of page {}: the page is resident and {why}; fetch_new is only for pages never written",
                    page.id
                )));
            }
        }
        data.fill(0);
        page::set_id(&mut data, page.id);
        Ok(())
    }

    /// Write back the dirty victim of a miss (state Evicting, unpinned, so
    /// nothing can change it), then free its frame.
    fn evict_dirty(&self, frame: usize, old: PageId) -> Result<()> {
        let written = self.write_frame(frame, old);
        {
            let mut meta = self.meta.lock();
            meta.finish_write(frame, written.as_ref().ok().copied());
            if written.is_ok() {
                meta.evicted_dirty(frame);
            } else {
                meta.eviction_failed(frame);
            }
        }
        self.changed.notify_all();
        written.map(|_| ())
    }

    /// Write back frame `frame` if it still holds dirty page `id`. With
    /// [`Wait::Yes`], first wait out I/O in flight on the frame (a running
    /// write-back or eviction); with [`Wait::No`], skip such a frame. True
    /// if this call wrote the page.
    pub(super) fn write_back(&self, frame: usize, id: PageId, wait: Wait) -> Result<bool> {
        let mut meta = self.meta.lock();
        loop {
            let f = &meta.frames[frame];
            if f.page != Some(id) || !f.dirty {
                return Ok(false);
            }
            if f.state == FrameState::Ready && f.write == WriteState::Idle {
                break;
            }
            if wait == Wait::No {
                return Ok(false);
            }
            meta = self.changed.wait(meta);
        }
        meta.claim_write(frame);
        drop(meta);
        let written = self.write_frame(frame, id);
        self.meta
            .lock()
            .finish_write(frame, written.as_ref().ok().copied());
        self.changed.notify_all();
        written.map(|_| true)
    }

    /// Copy, force the log, seal and write one claimed frame (BUF-2, BUF-6).
    /// Returns the LSN the log was forced to.
    fn write_frame(&self, frame: usize, id: PageId) -> Result<u64> {
        let space = self.space_of(id)?;
        let mut image = self.copy_for_write(frame);
        // BUF-2 / PAGE-2: the log first, up to the LSN of this very image.
        let lsn = page::lsn(&image);
        self.log.flush_to(lsn)?;
        page::seal(&mut image);
        self.owe_page_io(image.len());
        space.store.write_page(id.page_no, &image)?;
        Ok(lsn)
    }

    /// The frame's image, with the version and page LSN it carries noted
    /// atomically with respect to installs (both hold the data lock).
    pub(super) fn copy_for_write(&self, frame: usize) -> Vec<u8> {
        let data = self.data[frame].read();
        self.meta.lock().note_copy(frame, page::lsn(&data));
        data.clone()
    }

    /// Drop a pin: one atomic decrement, no lock (BUF-15). A checking
    /// pool also checks the frame still holds the page, and the whole state.
    pub(super) fn unpin(&self, frame: usize, id: PageId) {
        if self.checking {
            let meta = self.meta.lock();
            assert_eq!(
                meta.frames[frame].page,
                Some(id),
                "BUF-1: a pinned frame changed page"
            );
            self.hot.unpin(frame);
            meta.changed();
        } else {
            self.hot.unpin(frame);
        }
    }
}
