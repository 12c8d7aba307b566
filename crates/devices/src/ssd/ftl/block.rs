//! Block mapping: the FTL of early flash cards and the baseline the hybrid
//! and super-block FTLs improve on.
//!
//! A logical block (`pages_per_block` consecutive logical pages) maps to one
//! physical block, and logical page `o` of it always lives at page `o` of
//! that block, so the map has one entry per block and a lookup is a division.
//! The price is paid on overwrite. NAND programs a page once between erases
//! and, within a block, in ascending page order; so a write is programmed in
//! place only if its page is still erased *and* above the highest page
//! written so far in the block (the write pointer). Any other write — an
//! overwrite, or a write below the write pointer — copies the block: take a
//! free block (from the same die when one is free, so pages move by
//! copy-back without crossing the channel; least-erased first), copy every
//! other valid page to the same offset, erase the old block, and program the
//! host's page last (FTL-3: the host page is the last operation, so its slot
//! in the new block is filled after the higher offsets — the model enforces
//! program-once, not the in-order rule, for merge destinations).
//!
//! Such a copy is what the hybrid FTLs call a *full merge* (the latest
//! version of every page of one logical block gathered into a fresh block,
//! the old block erased), and it is counted in `FtlStats::full_merges`. With
//! a full block, an overwrite costs `pages_per_block - 1` copies plus one
//! erase: the "α × (# of page writes) × merge time" of the lee2007 slides.
//!
//! Spare blocks: one free block is always kept for the copy (invariant U-1
//! of the shared `units` module); if over-provisioning leaves none, the
//! logical capacity shrinks by a block.
//!
//! This file also declares `units`, the physical-side helpers (addressing,
//! free pool, operation emission, capacity planning) shared with the hybrid
//! and super-block FTLs.

#[path = "units.rs"]
pub(super) mod units;

use self::units::MappedUnits;
use super::{FlashOp, Ftl, FtlStats};
use crate::ssd::geometry::Geometry;

/// Block mapping has no log blocks.
const LOG_BLOCKS: u32 = 0;

/// Block-mapped FTL. See the module documentation.
#[derive(Debug)]
pub struct BlockFtl {
    /// Its flash and data map (`unit_pages`: pages per block).
    units: MappedUnits,
}

impl BlockFtl {
    /// A block-mapped FTL over `geometry`, every block erased.
    pub fn new(geometry: &Geometry) -> BlockFtl {
        BlockFtl {
            units: MappedUnits::new(geometry, 1, LOG_BLOCKS, LOG_BLOCKS),
        }
    }

    /// Copy logical block `logical_block` out of `old` into a free block,
    /// leaving `offset` for the host page, and erase `old`. Returns the new
    /// block.
    fn copy_block(
        &mut self,
        logical_block: u32,
        offset: u32,
        old: u32,
        ops: &mut Vec<FlashOp>,
    ) -> Option<u32> {
        let target = self
            .units
            .flash
            .allocate(self.units.flash.layout().zone(old))?;
        for page in (0..self.units.unit_pages).filter(|&page| page != offset) {
            if self.units.data.is_valid(logical_block, page) {
                self.units.flash.copy((old, page), (target, page), ops);
            }
        }
        self.units.data.set_unit(logical_block, target);
        self.units.flash.erase(old, ops);
        self.units.flash.stats_mut().full_merges += 1;
        Some(target)
    }

    /// Check U-1 and U-3 over the whole map (tests only).
    #[cfg(test)]
    fn check_invariants(&self) {
        let accounted = self.units.data.mapped() + self.units.flash.free_units();
        assert_eq!(accounted, self.units.flash.layout().units(), "U-1");
        for logical_block in 0..self.units.logical_units() {
            let Some(block) = self.units.data.unit(logical_block) else {
                continue;
            };
            for page in 0..self.units.unit_pages {
                if self.units.data.is_valid(logical_block, page) {
                    assert!(self.units.flash.is_programmed(block, page), "U-3");
                }
            }
        }
    }
}

impl Ftl for BlockFtl {
    fn logical_pages(&self) -> u64 {
        self.units.plan.logical_pages
    }

    fn lookup(&self, lpn: u64) -> Option<u64> {
        if lpn >= self.units.plan.logical_pages {
            return None;
        }
        let (logical_block, offset) = units::split(lpn, self.units.unit_pages);
        let block = self.units.data.unit(logical_block)?;
        let valid = self.units.data.is_valid(logical_block, offset);
        valid.then(|| self.units.flash.layout().ppn(block, offset))
    }

    fn write(&mut self, lpn: u64, ops: &mut Vec<FlashOp>) {
        let Some((logical_block, offset, mut block)) = self.units.begin_host_write(lpn) else {
            return;
        };
        if !self.units.flash.in_order(block, offset) {
            let Some(target) = self.copy_block(logical_block, offset, block, ops) else {
                return;
            };
            block = target;
        }
        self.units.data.set_valid(logical_block, offset, true);
        self.units.flash.program(block, offset, ops);
    }

    fn trim(&mut self, lpn: u64) {
        if lpn < self.units.plan.logical_pages {
            let (logical_block, offset) = units::split(lpn, self.units.unit_pages);
            self.units.data.set_valid(logical_block, offset, false);
        }
    }

    fn stats(&self) -> FtlStats {
        self.units.flash.stats().clone()
    }

    fn erase_counts(&self) -> &[u32] {
        self.units.flash.erase_counts()
    }
}

#[cfg(test)]
mod tests {
    use super::units::testing::{Reference, Rng, run_mixed, small_geometry, waf};
    use super::*;

    #[test]
    fn ftl_block_sequential_fill_programs_in_place() {
        let geometry = small_geometry(0.1);
        let mut ftl = BlockFtl::new(&geometry);
        let mut reference = Reference::new(&geometry);
        for lpn in 0..ftl.logical_pages() {
            reference.write(&mut ftl, lpn);
        }
        reference.check(&ftl);
        assert_eq!(ftl.stats().full_merges, 0);
        assert_eq!(waf(&ftl), 1.0);
    }

    #[test]
    fn ftl_block_random_overwrite_copies_a_block_per_write() {
        let geometry = small_geometry(0.1);
        let mut ftl = BlockFtl::new(&geometry);
        let mut reference = Reference::new(&geometry);
        let full_pages = ftl.logical_pages() / 16 * 16;
        for lpn in 0..full_pages {
            reference.write(&mut ftl, lpn);
        }
        let mut rng = Rng::new(5);
        let writes: u32 = 2000;
        for _ in 0..writes {
            reference.write(&mut ftl, rng.below(full_pages));
        }
        reference.check(&ftl);
        ftl.check_invariants();
        let copies_per_write = reference.copies as f64 / f64::from(writes);
        eprintln!(
            "block random: {:?} copies/write {copies_per_write:.2}",
            ftl.stats()
        );
        assert!(
            (14.0..=15.0).contains(&copies_per_write),
            "{copies_per_write}"
        );
        assert_eq!(ftl.stats().full_merges, u64::from(writes));
        assert_eq!(ftl.stats().erases, u64::from(writes));
    }

    #[test]
    fn ftl_block_copies_stay_in_the_die_and_level_wear() {
        let mut geometry = small_geometry(0.1);
        geometry.chips_per_channel = 2;
        let mut ftl = BlockFtl::new(&geometry);
        let mut ops = Vec::new();
        for round in 0..200 {
            ops.clear();
            ftl.write(round % 32, &mut ops);
        }
        ops.clear();
        ftl.write(3, &mut ops);
        assert!(ops.iter().any(|op| matches!(op, FlashOp::CopyBack { .. })));
        assert!(!ops.iter().any(|op| matches!(op, FlashOp::Read { .. })));
        let worn: Vec<u32> = ftl
            .erase_counts()
            .iter()
            .copied()
            .filter(|&c| c > 0)
            .collect();
        let (low, high) = (worn.iter().min(), worn.iter().max());
        assert!(worn.len() > 4 && high.zip(low).is_some_and(|(h, l)| h - l <= 1));
    }

    #[test]
    fn ftl_block_reference_model_never_loses_a_page() {
        let geometry = small_geometry(0.1);
        for seed in 1..4 {
            let mut ftl = BlockFtl::new(&geometry);
            run_mixed(&mut ftl, &geometry, seed, 4000);
            ftl.check_invariants();
        }
        let mut tight = BlockFtl::new(&small_geometry(0.0));
        assert_eq!(tight.logical_pages(), 63 * 16);
        run_mixed(&mut tight, &geometry, 9, 2000);
    }
}
