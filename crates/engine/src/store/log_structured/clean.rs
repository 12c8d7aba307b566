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
            let mut stuck = false;
            for (page_no, block) in live {
                // Copy only if the page is still there: a newer version
                // written since makes this one dead.
                if self.lock_state().block_of(page_no) != block {
                    continue;
                }
                let at = (block - first) as usize * page_bytes;
                if !whole
                    && self
                        .device
                        .read(self.block_offset(block), &mut segment[at..at + page_bytes])
                        .is_err()
                {
                    // Damage at rest: the page stays where it is (a read
                    // reports it, the pool may rebuild it from the log and
                    // write it anew); the segment is not chosen again.
                    stuck = true;
                    continue;
                }
                let image = segment[at..at + page_bytes].to_vec();
                self.append(page_no, &image)?;
                self.counters.pages_copied.fetch_add(1, Ordering::Relaxed);
            }
            if stuck {
                self.lock_state().unclean.insert(victim);
                continue;
            }
            debug_assert_eq!(self.lock_state().live[victim as usize], 0);
            self.counters
                .segments_cleaned
                .fetch_add(1, Ordering::Relaxed);
            cleaned += 1;
        }
        Ok(cleaned)
    }
}
