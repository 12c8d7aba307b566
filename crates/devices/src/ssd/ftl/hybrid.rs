//! Hybrid log-block FTLs: BAST (Kim et al. 2002) and FAST (Lee et al. 2007).
//!
//! Pure block mapping ([`super::block`]) copies a whole block for every
//! overwrite. Hybrid FTLs keep the cheap block-level map for *data blocks*
//! and add a few *log blocks* — page-mapped, appended in order — that absorb
//! overwrites until a merge folds them back into data blocks. The log blocks
//! come out of over-provisioning, and what differs between the two schemes
//! is who may use a log block:
//!
//! - **BAST** (block-associative sector translation, Kim et al. 2002, "A
//!   space-efficient flash translation layer for CompactFlash systems"):
//!   each data block owns at most one log block. A sequential overwrite fills
//!   its log block in order and ends in a *switch merge* (the log block
//!   becomes the data block; no copies), a prefix ends in a *partial merge*
//!   (copy the rest of the data block into it), and anything else in a *full
//!   merge* (copy the latest version of every page into a fresh block, erase
//!   both). Under random writes spread over more data blocks than there are
//!   log blocks, each log block is evicted holding a page or two, so almost
//!   every write costs a full merge: "log block thrashing". See `bast.rs`.
//! - **FAST** (fully-associative sector translation, Lee et al. 2007, "A
//!   log buffer-based flash translation layer using fully-associative sector
//!   translation", ACM TECS): random log blocks are shared by all data
//!   blocks and filled round-robin, so a log block is merged only after the
//!   whole log area has been filled; one dedicated sequential log block keeps
//!   switch and partial merges for sequential runs that start at offset 0.
//!   See `fast.rs`.
//!
//! Log blocks are carved out of over-provisioning: with `N` logical blocks
//! (`geometry.logical_pages()` rounded up to blocks) and `P` physical blocks,
//! `log_blocks` is clamped to `MIN..=P - N - 1` (one block always stays free
//! as the destination of a full merge; `MIN` is 1 for BAST, 2 for FAST: one
//! sequential and one random). If over-provisioning cannot hold even `MIN +
//! 1` blocks, the logical capacity shrinks instead ([`Ftl::logical_pages`]).
//!
//! Both emit, for a write, any merge operations first (copy-backs within a
//! die, or read + program across dies, then erases) and the host page's
//! program last (FTL-3). Counters: `switch_merges`, `partial_merges` and
//! `full_merges` count merges as named above (a FAST reclaim of one log
//! block counts one full merge per data block it touched); `erases` counts
//! block erases; `flash_pages_read` counts the reads of merge copies
//! (copy-backs included); `gc_runs` stays 0 (no page-level GC here).

#[path = "bast.rs"]
pub(super) mod bast;
#[path = "fast.rs"]
mod fast;

use self::bast::BastCore;
use self::fast::FastCore;
use super::{FlashOp, Ftl, FtlStats};
use crate::ssd::geometry::Geometry;

/// Which hybrid log-block scheme a [`HybridFtl`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HybridKind {
    /// One log block per data block (Kim et al. 2002).
    Bast,
    /// Log blocks shared by all data blocks, plus one sequential log block
    /// (Lee et al. 2007).
    Fast,
}

#[derive(Debug)]
enum Engine {
    Bast(BastCore),
    Fast(FastCore),
}

/// A hybrid log-block FTL (BAST or FAST). See the module documentation.
#[derive(Debug)]
pub struct HybridFtl {
    engine: Engine,
}

impl HybridFtl {
    /// A hybrid FTL of `kind` with `log_blocks` log blocks, clamped to what
    /// over-provisioning allows (see the module documentation).
    pub fn new(geometry: &Geometry, kind: HybridKind, log_blocks: u32) -> HybridFtl {
        let engine = match kind {
            HybridKind::Bast => Engine::Bast(BastCore::new(geometry, 1, log_blocks)),
            HybridKind::Fast => Engine::Fast(FastCore::new(geometry, log_blocks)),
        };
        HybridFtl { engine }
    }

    /// The scheme this FTL runs.
    pub fn kind(&self) -> HybridKind {
        match self.engine {
            Engine::Bast(_) => HybridKind::Bast,
            Engine::Fast(_) => HybridKind::Fast,
        }
    }

    /// Log blocks actually in use after clamping.
    pub fn log_blocks(&self) -> u32 {
        match &self.engine {
            Engine::Bast(core) => core.log_units(),
            Engine::Fast(core) => core.log_units(),
        }
    }

    /// Check the engine's internal invariants over the whole map.
    #[cfg(test)]
    fn check_invariants(&self) {
        match &self.engine {
            Engine::Bast(core) => core.check_invariants(),
            Engine::Fast(core) => core.check_invariants(),
        }
    }
}

impl Ftl for HybridFtl {
    fn logical_pages(&self) -> u64 {
        match &self.engine {
            Engine::Bast(core) => core.logical_pages(),
            Engine::Fast(core) => core.logical_pages(),
        }
    }

    fn lookup(&self, lpn: u64) -> Option<u64> {
        match &self.engine {
            Engine::Bast(core) => core.lookup(lpn),
            Engine::Fast(core) => core.lookup(lpn),
        }
    }

    fn write(&mut self, lpn: u64, ops: &mut Vec<FlashOp>) {
        match &mut self.engine {
            Engine::Bast(core) => core.write(lpn, ops),
            Engine::Fast(core) => core.write(lpn, ops),
        }
    }

    fn trim(&mut self, lpn: u64) {
        match &mut self.engine {
            Engine::Bast(core) => core.trim(lpn),
            Engine::Fast(core) => core.trim(lpn),
        }
    }

    fn stats(&self) -> FtlStats {
        match &self.engine {
            Engine::Bast(core) => core.stats(),
            Engine::Fast(core) => core.stats(),
        }
    }

    fn erase_counts(&self) -> &[u32] {
        match &self.engine {
            Engine::Bast(core) => core.erase_counts(),
            Engine::Fast(core) => core.erase_counts(),
        }
    }

    fn parameters(&self) -> Vec<(&'static str, u64)> {
        vec![("log_blocks", u64::from(self.log_blocks()))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ssd::ftl::block::units::testing::{Reference, Rng, run_mixed, small_geometry, waf};

    /// Over-provisioning that leaves exactly 8 spare blocks of 64, so the
    /// logical space is a whole number of blocks.
    const ALIGNED_OP: f64 = 0.125;
    const LOG_BLOCKS: u32 = 4;

    fn fill_sequentially(ftl: &mut HybridFtl, reference: &mut Reference, passes: u32) {
        for _ in 0..passes {
            for lpn in 0..ftl.logical_pages() {
                reference.write(ftl, lpn);
            }
        }
    }

    fn random_overwrites(ftl: &mut HybridFtl, reference: &mut Reference, writes: u32, seed: u64) {
        let mut rng = Rng::new(seed);
        for _ in 0..writes {
            let lpn = rng.below(ftl.logical_pages());
            reference.write(ftl, lpn);
        }
    }

    /// Sequential overwrites only switch-merge, in both engines: (kind,
    /// passes over the drive, the fewest switch merges).
    #[test]
    fn ftl_hybrid_sequential_overwrite_is_switch_merges_only() {
        let geometry = small_geometry(ALIGNED_OP);
        let cases = [
            (HybridKind::Bast, 4, 3 * 56 - u64::from(LOG_BLOCKS)),
            (HybridKind::Fast, 3, 56),
        ];
        for (kind, passes, switch_merges_min) in cases {
            let mut ftl = HybridFtl::new(&geometry, kind, LOG_BLOCKS);
            let mut reference = Reference::new(&geometry);
            fill_sequentially(&mut ftl, &mut reference, passes);
            reference.check(&ftl);
            ftl.check_invariants();
            let stats = ftl.stats();
            eprintln!("{kind:?} sequential: {stats:?} waf {:.3}", waf(&ftl));
            assert!(stats.switch_merges >= switch_merges_min, "{kind:?}");
            let merges = (stats.partial_merges, stats.full_merges);
            assert_eq!(merges, (0, 0), "{kind:?}");
            assert_eq!(waf(&ftl), 1.0, "{kind:?}");
        }
    }

    #[test]
    fn ftl_bast_random_writes_cause_full_merges() {
        let geometry = small_geometry(ALIGNED_OP);
        let mut ftl = HybridFtl::new(&geometry, HybridKind::Bast, LOG_BLOCKS);
        let mut reference = Reference::new(&geometry);
        fill_sequentially(&mut ftl, &mut reference, 1);
        let before = ftl.stats();
        random_overwrites(&mut ftl, &mut reference, 4000, 7);
        reference.check(&ftl);
        ftl.check_invariants();
        let stats = ftl.stats();
        let random_waf = (stats.flash_pages_written - before.flash_pages_written) as f64 / 4000.0;
        eprintln!("bast random: {stats:?} random-phase waf {random_waf:.2}");
        assert!(stats.full_merges > 1000);
        assert!(random_waf > 5.0);
    }

    #[test]
    fn ftl_fast_random_writes_erase_less_than_bast() {
        let geometry = small_geometry(ALIGNED_OP);
        let erases = |kind| {
            let mut ftl = HybridFtl::new(&geometry, kind, LOG_BLOCKS);
            let mut reference = Reference::new(&geometry);
            fill_sequentially(&mut ftl, &mut reference, 1);
            random_overwrites(&mut ftl, &mut reference, 4000, 11);
            reference.check(&ftl);
            ftl.check_invariants();
            eprintln!("{kind:?} random: {:?} waf {:.2}", ftl.stats(), waf(&ftl));
            ftl.stats().erases
        };
        let (bast, fast) = (erases(HybridKind::Bast), erases(HybridKind::Fast));
        assert!(fast * 3 < bast * 2, "fast {fast} erases, bast {bast}");
    }

    #[test]
    fn ftl_hybrid_reference_model_never_loses_a_page() {
        let geometry = small_geometry(0.1);
        for kind in [HybridKind::Bast, HybridKind::Fast] {
            for (seed, log_blocks) in [(1, 1), (2, 3), (3, 5), (4, 100)] {
                let mut ftl = HybridFtl::new(&geometry, kind, log_blocks);
                run_mixed(&mut ftl, &geometry, seed, 6000);
                ftl.check_invariants();
            }
        }
    }

    #[test]
    fn ftl_hybrid_log_blocks_are_carved_from_over_provisioning() {
        let spare = small_geometry(0.1);
        let bast = HybridFtl::new(&spare, HybridKind::Bast, 100);
        assert_eq!(bast.log_blocks(), 64 - 58 - 1);
        assert_eq!(bast.logical_pages(), spare.logical_pages());
        let none = small_geometry(0.0);
        let fast = HybridFtl::new(&none, HybridKind::Fast, 0);
        assert_eq!(fast.log_blocks(), fast::MIN_LOG_UNITS);
        assert_eq!(fast.logical_pages(), (64 - 3) * 16);
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        /// Length of the sequential runs the property mixes in.
        const RUN_PAGES: u64 = 16;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(48))]

            #[test]
            fn ftl_hybrid_keeps_every_page(
                fast in any::<bool>(),
                log_blocks in 1u32..6,
                ops in proptest::collection::vec((0u64..921, 0u8..8), 1..600),
            ) {
                let geometry = small_geometry(0.1);
                let kind = if fast { HybridKind::Fast } else { HybridKind::Bast };
                let mut ftl = HybridFtl::new(&geometry, kind, log_blocks);
                let mut reference = Reference::new(&geometry);
                let pages = ftl.logical_pages();
                for (lpn, action) in ops {
                    match action {
                        0 => reference.trim(&mut ftl, lpn),
                        1..=5 => reference.write(&mut ftl, lpn),
                        _ => {
                            for run in lpn..(lpn + RUN_PAGES).min(pages) {
                                reference.write(&mut ftl, run);
                            }
                        }
                    }
                }
                reference.check(&ftl);
                ftl.check_invariants();
            }
        }
    }
}
