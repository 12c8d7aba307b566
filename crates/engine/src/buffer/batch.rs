//! Batched write-back through the block layer's elevator stage.
//!
//! The page cleaner picks batches of dirty pages (those the CLOCK hand
//! reaches next and those of the oldest rec_lsn), sorted by page; the
//! checkpoint's `flush_all` takes every dirty page. An operating system does not: the pages a database writes through
//! a file system queue in the block layer, whose elevator (Linux's
//! Anticipatory or deadline scheduler, which wang2010 ran) sorts the queue
//! by address and merges neighbours into one larger request. With
//! [`super::BufferPool::set_write_scheduler`] the pool does the same:
//!
//! 1. claim every idle dirty page of the batch (BUF-6) and copy its image;
//! 2. force the log once, to the highest page LSN of the batch (BUF-2);
//! 3. hand each space's pages to its store's
//!    [`crate::store::PageStore::write_batch`], which an in-place store
//!    gives to `flashlab_devices::scheduler::submit_batch` (sorted, merged
//!    up to the request limit);
//! 4. publish each page's write as one write-back would.
//!
//! A failure leaves every page of the batch dirty, as a failed write-back
//! does.

use std::collections::BTreeMap;

use flashlab_devices::scheduler::SchedulerConfig;

use super::Core;
use super::meta::FrameState;
use super::meta::WriteState;
use crate::error::Result;
use crate::page::{self, PageId, SpaceId};

impl Core {
    /// Write `batch` (page, frame) as one sorted, merged dispatch; returns
    /// the pages written. A `cleaner` batch is counted in
    /// [`super::BufferStats::cleaner_pages`] and `cleaner_requests`.
    pub(super) fn write_back_batch(
        &self,
        batch: Vec<(PageId, usize)>,
        scheduler: &SchedulerConfig,
        cleaner: bool,
    ) -> Result<usize> {
        let claimed: Vec<(PageId, usize)> = {
            let mut meta = self.meta.lock();
            let mut claimed = Vec::new();
            for (id, frame) in batch {
                let f = &meta.frames[frame];
                let idle = f.state == FrameState::Ready && f.write == WriteState::Idle;
                if f.page == Some(id) && f.dirty && idle {
                    meta.claim_write(frame);
                    claimed.push((id, frame));
                }
            }
            claimed
        };
        if claimed.is_empty() {
            return Ok(0);
        }
        let mut images: Vec<(PageId, usize, Vec<u8>)> = claimed
            .iter()
            .map(|&(id, frame)| (id, frame, self.copy_for_write(frame)))
            .collect();
        let highest_lsn = images
            .iter()
            .map(|(_, _, image)| page::lsn(image))
            .max()
            .unwrap_or(0);
        let written = self.log.flush_to(highest_lsn).and_then(|()| {
            for (_, _, image) in &mut images {
                page::seal(image);
            }
            self.dispatch(&images, scheduler)
        });
        {
            let mut meta = self.meta.lock();
            for (_, frame, image) in &images {
                let forced_to = written.as_ref().ok().map(|_| page::lsn(image));
                meta.finish_write(*frame, forced_to);
            }
            if let (true, Ok(requests)) = (cleaner, &written) {
                meta.stats.cleaner_pages += images.len() as u64;
                meta.stats.cleaner_requests += requests;
                meta.changed();
            }
        }
        self.changed.notify_all();
        written.map(|_| images.len())
    }

    /// Give each space's sealed pages to its store as one batch; returns
    /// the device requests they took.
    fn dispatch(
        &self,
        images: &[(PageId, usize, Vec<u8>)],
        scheduler: &SchedulerConfig,
    ) -> Result<u64> {
        let mut by_space: BTreeMap<SpaceId, Vec<(u32, &[u8])>> = BTreeMap::new();
        for (id, _, image) in images {
            by_space
                .entry(id.space)
                .or_default()
                .push((id.page_no, image.as_slice()));
        }
        let mut requests = 0;
        for (space, pages) in by_space {
            let space = self.space_of(PageId::new(space, 0))?;
            for (_, image) in &pages {
                self.owe_page_io(image.len());
            }
            requests += space.store.write_batch(&pages, scheduler)?;
        }
        Ok(requests)
    }
}
