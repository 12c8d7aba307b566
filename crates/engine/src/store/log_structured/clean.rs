//! Segment cleaning: copy the live pages of victim segments to the head of
//! the log, then write a map checkpoint, after which the victims are
//! reusable (LFS-3). A dead segment (no live page) needs no copying: a map
//! checkpoint alone frees it, so that is tried first.

use std::sync::atomic::Ordering;

use super::state::Geometry;
use super::{CLEAN_BATCH_SEGMENTS, CLEAN_START_SEGMENTS, Cleaning, LogStructuredStore};
use crate::error::Result;

impl LogStructuredStore {
    /// One cleaning pass (writer lock held). True if segments were made
    /// reusable.
    pub(super) fn clean(&self) -> Result<bool> {
        self.counters
            .cleaning_passes
            .fetch_add(1, Ordering::Relaxed);
        let freed = self.clean_pass();
        self.counters
            .cleaning_passes_finished
            .fetch_add(1, Ordering::Relaxed);
        freed
    }

    fn clean_pass(&self) -> Result<bool> {
        let before = self.lock_state().reusable.len();
        for _ in 0..2 {
            if self.lock_state().dead_segments(&self.geo) > 0 {
                self.checkpoint_map()?;
                if self.lock_state().reusable.len() > CLEAN_START_SEGMENTS {
                    return Ok(true);
                }
            }
        }
        if self.cleaning == Cleaning::Off {
            return Ok(self.lock_state().reusable.len() > before);
        }
        self.lock_state().cleaning_now = true;
        let result = self.copy_victims();
        self.lock_state().cleaning_now = false;
        let cleaned = result?;
        if cleaned > 0 {
            // Dead at two checkpoints before reusable (LFS-3).
            self.checkpoint_map()?;
            self.checkpoint_map()?;
        }
        Ok(self.lock_state().reusable.len() > before)
    }

    /// Copy the live pages of up to [`CLEAN_BATCH_SEGMENTS`] victims; the
    /// number of victims emptied.
    fn copy_victims(&self) -> Result<usize> {
        let page_bytes = self.page_bytes;
        let b = self.geo.blocks_per_segment as usize;
        let mut cleaned = 0;
        for _ in 0..CLEAN_BATCH_SEGMENTS {
            let (victim, live) = {
                let st = self.lock_state();
                let Some(victim) =
                    st.choose_victim(&self.geo, self.cleaning, self.partial_pages_max)
                else {
                    break;
                };
                let live = st.live_pages_in(&self.geo, victim);
                // The copies must fit what is free, summaries included.
                let need = live.len() as u64
                    + (live.len() as u64).div_ceil(self.partial_pages_max as u64)
                    + 1;
                if need > st.free_blocks(&self.geo) {
                    break;
                }
                (victim, live)
            };
            let first = self.geo.block(victim, 0);
            let mut segment = vec![0u8; b * page_bytes];
            // The whole segment in one request; if part of it cannot be
            // read, its live blocks one by one.
            let whole = self
                .device
                .read(self.block_offset(first), &mut segment)
                .is_ok();
            // Every live page must be sound before any is copied: a victim
            // that cannot be emptied must not take free blocks (LFS-10).
            let mut sound = true;
            for &(page_no, block) in &live {
                let at = (block - first) as usize * page_bytes;
                let image = &mut segment[at..at + page_bytes];
                if !self.read_live_page(block, page_no, image, whole) {
                    sound = false;
                    break;
                }
            }
            if !sound {
                // Damage at rest: the pages stay where they are (a read
                // reports them, the pool may rebuild them from the log and
                // write them anew); the segment is not chosen again.
                self.lock_state().unclean.insert(victim);
                continue;
            }
            for (page_no, block) in live {
                // Copy only if the page is still there: a newer version
                // written since makes this one dead.
                if self.lock_state().block_of(page_no) != block {
                    continue;
                }
                let at = (block - first) as usize * page_bytes;
                self.append(page_no, &segment[at..at + page_bytes])?;
                self.counters.pages_copied.fetch_add(1, Ordering::Relaxed);
            }
            debug_assert_eq!(self.lock_state().live[victim as usize], 0);
            self.counters
                .segments_cleaned
                .fetch_add(1, Ordering::Relaxed);
            cleaned += 1;
        }
        Ok(cleaned)
    }

    /// Have a sound copy of live page `page_no` at `block` in `image`:
    /// its own checksum verifies and it names the page (LFS-10). `whole`:
    /// the segment's read already filled `image`; a copy that is not
    /// sound is read once more on its own (a flip on the way reads clean
    /// the second time). False if the block cannot be read, or holds a
    /// damaged page: copying that would carry the damage, and its garbled
    /// LSN, to a new block as if it were a page version.
    fn read_live_page(&self, block: u64, page_no: u32, image: &mut [u8], whole: bool) -> bool {
        let sound = |image: &[u8]| {
            crate::page::compute_checksum(image)
                == u32::from_le_bytes(image[0..4].try_into().expect("4 bytes"))
                && crate::page::stored_id(image).page_no == page_no
        };
        if whole && sound(image) {
            return true;
        }
        self.device.read(self.block_offset(block), image).is_ok() && sound(image)
    }
}
