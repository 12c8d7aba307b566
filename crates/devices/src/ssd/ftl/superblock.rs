//! lee2008's super-block FTL: block mapping over super-blocks striped across
//! chips, with log super-blocks.
//!
//! Lee et al. (SIGMOD 2008, "A case for flash memory SSD in enterprise
//! database applications", section 2.2) describe the Samsung SSD they
//! measured: to keep the mapping table small as capacity grows, the FTL maps
//! *super-blocks* of one MB — eight 128 KB erase units, two per flash chip —
//! so that a super-block is striped across four chips and its pages are
//! programmed by interleaved, parallel operations. Their measurements hinge on
//! how this FTL treats write patterns: a transaction log or rollback segment
//! written sequentially, append-only, fills super-blocks in order and needs
//! no expensive merge ("as long as clean erase units are available"), while
//! random writes and rewrites force merges.
//!
//! Address mapping. With `E` = `erase_units_per_super_block`:
//! - planes are cut into groups of `E` consecutive planes (`E` is clamped to
//!   `1..=planes` and lowered to a divisor of the plane count);
//! - physical super-block `s` is row `s % blocks_per_plane` of group `s /
//!   blocks_per_plane`: one erase unit from each plane of the group;
//! - logical super-block `L` holds logical pages `L * E * pages_per_block ..
//!   (L + 1) * E * pages_per_block`; offset `o` within it lives in erase unit
//!   `o % E` of the mapped physical super-block, at page `o / E`. Consecutive
//!   logical pages thus go round-robin over the erase units, which are
//!   ordered plane-in-die first and die second so that neighbours land on
//!   different dies (and chips) and program in parallel.
//!
//! Merges follow BAST (Kim et al. 2002) at super-block granularity (the
//! engine in `bast.rs`): a write to an erased offset above the super-block's
//! write pointer goes in place; other writes append to the logical
//! super-block's own log super-block. A log super-block filled in order ends
//! in a *switch merge* (it becomes the data super-block; the old one is
//! erased, `E` erases, no copies): that is a sequential log overwriting its
//! circular space. A log holding an in-order prefix ends in a *partial merge*.
//! Rewriting the last written page (the log-tail sector rewrite of group
//! commit: lee2008 section 3 writes log records in 512-byte sectors, so the
//! tail page is rewritten until full) puts an out-of-order page in the log,
//! and random writes do the same: both end in *full merges* that copy a
//! whole super-block (`E * pages_per_block` pages). Log super-blocks are
//! carved out of over-provisioning as the hybrid FTLs' log blocks are (at
//! least one, at most spare - 1 super-blocks; the capacity shrinks if even
//! that does not fit). Copies between super-blocks of the same plane group
//! stay within each die (copy-back).
//!
//! `erases` counts erase units (a super-block erase is `E` of them), so WAF
//! and wear are comparable with the other FTLs.

use super::hybrid::bast::BastCore;
use super::{FlashOp, Ftl, FtlStats};
use crate::ssd::geometry::Geometry;

/// Super-block FTL. See the module documentation.
#[derive(Debug)]
pub struct SuperBlockFtl {
    core: BastCore,
}

impl SuperBlockFtl {
    /// Super-blocks of `erase_units_per_super_block` erase units (clamped to
    /// a divisor of the plane count) with `log_super_blocks` log super-blocks
    /// (clamped to over-provisioning; see the module documentation).
    pub fn new(
        geometry: &Geometry,
        erase_units_per_super_block: u32,
        log_super_blocks: u32,
    ) -> SuperBlockFtl {
        SuperBlockFtl {
            core: BastCore::new(geometry, erase_units_per_super_block, log_super_blocks),
        }
    }

    /// Erase units per super-block after clamping.
    pub fn erase_units_per_super_block(&self) -> u32 {
        self.core.blocks_per_unit()
    }

    /// Log super-blocks after clamping.
    pub fn log_super_blocks(&self) -> u32 {
        self.core.log_units()
    }
}

impl Ftl for SuperBlockFtl {
    fn logical_pages(&self) -> u64 {
        self.core.logical_pages()
    }

    fn lookup(&self, lpn: u64) -> Option<u64> {
        self.core.lookup(lpn)
    }

    fn write(&mut self, lpn: u64, ops: &mut Vec<FlashOp>) {
        self.core.write(lpn, ops);
    }

    fn trim(&mut self, lpn: u64) {
        self.core.trim(lpn);
    }

    fn stats(&self) -> FtlStats {
        self.core.stats()
    }

    fn erase_counts(&self) -> &[u32] {
        self.core.erase_counts()
    }

    fn parameters(&self) -> Vec<(&'static str, u64)> {
        vec![
            (
                "erase_units_per_super_block",
                u64::from(self.erase_units_per_super_block()),
            ),
            ("log_super_blocks", u64::from(self.log_super_blocks())),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ssd::ftl::block::BlockFtl;
    use crate::ssd::ftl::block::units::testing::{Reference, run_mixed, small_geometry, waf};
    use crate::ssd::ftl::hybrid::{HybridFtl, HybridKind};

    /// Two chips of two planes, 64 blocks per plane: 256 erase units; with
    /// four-unit super-blocks, 64 super-blocks of 64 pages.
    fn striped_geometry(over_provisioning: f64) -> Geometry {
        Geometry {
            chips_per_channel: 2,
            blocks_per_plane: 64,
            ..small_geometry(over_provisioning)
        }
    }

    const UNITS_PER_SUPER_BLOCK: u32 = 4;
    const LOG_SUPER_BLOCKS: u32 = 3;
    /// 12.5% of 64 super-blocks: exactly 8 spare, 56 logical super-blocks.
    const ALIGNED_OP: f64 = 0.125;

    fn ftl(over_provisioning: f64) -> (SuperBlockFtl, Reference) {
        let geometry = striped_geometry(over_provisioning);
        let ftl = SuperBlockFtl::new(&geometry, UNITS_PER_SUPER_BLOCK, LOG_SUPER_BLOCKS);
        (ftl, Reference::new(&geometry))
    }

    #[test]
    fn ftl_super_block_stripes_pages_over_dies() {
        let (mut ftl, _) = ftl(ALIGNED_OP);
        let mut ops = Vec::new();
        let dies: Vec<u32> = (0..4)
            .map(|lpn| {
                ops.clear();
                ftl.write(lpn, &mut ops);
                let ppn = ftl.lookup(lpn).unwrap_or_default();
                striped_geometry(ALIGNED_OP).die_of_block(ppn / 16)
            })
            .collect();
        assert_eq!(dies, [0, 1, 0, 1]);
        assert_eq!(ftl.lookup(4).map(|_| ()), None);
        ops.clear();
        ftl.write(4, &mut ops);
        assert_eq!(ftl.lookup(4), ftl.lookup(0).map(|ppn| ppn + 1));
    }

    #[test]
    fn ftl_super_block_sequential_append_is_switch_merges() {
        let (mut ftl, mut reference) = ftl(ALIGNED_OP);
        for _ in 0..3 {
            for lpn in 0..ftl.logical_pages() {
                reference.write(&mut ftl, lpn);
            }
        }
        reference.check(&ftl);
        let stats = ftl.stats();
        eprintln!("super-block sequential: {stats:?} waf {:.3}", waf(&ftl));
        assert!(stats.switch_merges >= 2 * 56 - u64::from(LOG_SUPER_BLOCKS));
        assert_eq!((stats.partial_merges, stats.full_merges), (0, 0));
        assert_eq!(waf(&ftl), 1.0);
        assert_eq!(stats.erases, stats.switch_merges * 4);
    }

    #[test]
    fn ftl_super_block_tail_rewrite_causes_merges() {
        let (mut ftl, mut reference) = ftl(ALIGNED_OP);
        for lpn in 0..ftl.logical_pages() {
            reference.write(&mut ftl, lpn);
        }
        let before = ftl.stats();
        for lpn in 0..ftl.logical_pages() {
            reference.write(&mut ftl, lpn);
            reference.write(&mut ftl, lpn);
        }
        reference.check(&ftl);
        ftl.core.check_invariants();
        let stats = ftl.stats();
        let phase_waf = (stats.flash_pages_written - before.flash_pages_written) as f64
            / (stats.host_pages_written - before.host_pages_written) as f64;
        eprintln!("super-block tail rewrite: {stats:?} phase waf {phase_waf:.3}");
        assert_eq!(stats.switch_merges, before.switch_merges);
        assert!(stats.partial_merges + stats.full_merges >= 2 * 56 - u64::from(LOG_SUPER_BLOCKS));
        assert!(phase_waf > 1.5);
    }

    #[test]
    fn ftl_super_block_reference_model_never_loses_a_page() {
        let geometry = striped_geometry(0.1);
        for (seed, units, logs) in [(1, 4, 3), (2, 2, 1), (3, 3, 100), (4, 1, 2)] {
            let mut ftl = SuperBlockFtl::new(&geometry, units, logs);
            run_mixed(&mut ftl, &geometry, seed, 6000);
            ftl.core.check_invariants();
        }
    }

    #[test]
    fn ftl_super_block_lee2008_geometry_stripes_over_four_chips() {
        // lee2008 section 2.2: 2 channels x 2 chips, 2 planes, 128 KB erase
        // units of 64 x 2 KB pages, 32 GB; super-blocks of 8 erase units.
        let geometry = Geometry {
            channels: 2,
            chips_per_channel: 2,
            dies_per_chip: 1,
            planes_per_die: 2,
            blocks_per_plane: 32_768,
            pages_per_block: 64,
            page_bytes: 2048,
            over_provisioning: 0.0687,
        };
        let mut ftl = SuperBlockFtl::new(&geometry, 8, 16);
        assert_eq!(ftl.erase_units_per_super_block(), 8);
        assert_eq!(ftl.log_super_blocks(), 16);
        assert_eq!(ftl.logical_pages(), geometry.logical_pages());
        let mut ops = Vec::new();
        let chips: Vec<u32> = (0..8)
            .map(|lpn| {
                ftl.write(lpn, &mut ops);
                let block = ftl.lookup(lpn).unwrap_or_default() / 64;
                geometry.die_of_block(block)
            })
            .collect();
        assert_eq!(chips, [0, 1, 2, 3, 0, 1, 2, 3]);
        assert_eq!(ftl.erase_counts().len(), 262_144);
    }

    #[test]
    fn ftl_out_of_range_writes_are_ignored() {
        let geometry = striped_geometry(0.1);
        let mut ftls: [Box<dyn Ftl>; 4] = [
            Box::new(SuperBlockFtl::new(&geometry, 4, 2)),
            Box::new(BlockFtl::new(&geometry)),
            Box::new(HybridFtl::new(&geometry, HybridKind::Bast, 2)),
            Box::new(HybridFtl::new(&geometry, HybridKind::Fast, 2)),
        ];
        for ftl in &mut ftls {
            let mut ops = Vec::new();
            let beyond = ftl.logical_pages();
            ftl.write(beyond, &mut ops);
            ftl.trim(beyond + 1);
            assert!(ops.is_empty());
            assert_eq!(ftl.lookup(beyond), None);
            assert_eq!(ftl.stats(), FtlStats::default());
        }
    }

    #[test]
    fn ftl_super_block_clamps_its_parameters() {
        let geometry = striped_geometry(0.1);
        let odd = SuperBlockFtl::new(&geometry, 3, 1000);
        assert_eq!(odd.erase_units_per_super_block(), 2);
        assert_eq!(odd.log_super_blocks(), 128 - 116 - 1);
        let zero = SuperBlockFtl::new(&geometry, 0, 0);
        assert_eq!(zero.erase_units_per_super_block(), 1);
        assert_eq!(zero.log_super_blocks(), 1);
    }
}
