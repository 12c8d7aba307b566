//! Flash translation layers.
//!
//! An FTL maps logical pages (the host's address space, in flash-page units)
//! to physical pages, and decides where each write goes and what must be
//! reclaimed first. It does not keep time: it emits the flash operations a
//! request costs ([`FlashOp`]) and the controller schedules them on the die
//! and channel timelines. This split keeps every FTL a pure data structure,
//! testable on its own (WAF, merge counts) without any timing.
//!
//! Invariants (FTL-n):
//! 1. A physical page is programmed at most once between erases of its block.
//! 2. Every mapped logical page maps to exactly one valid physical page, and
//!    every valid physical page is mapped by exactly one logical page.
//! 3. The operations a write emits end with the program of the host's page;
//!    everything before it (GC copies, merges, erases) must happen first.

pub mod block;
pub mod hybrid;
pub mod page;
pub mod superblock;

use serde::Serialize;

use crate::error::DeviceError;
use crate::ssd::geometry::Geometry;

/// A flash operation, as emitted by an FTL and timed by the controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlashOp {
    /// Read a physical page (host read, or the read half of a copy).
    Read { ppn: u64 },
    /// Program a physical page.
    Program { ppn: u64 },
    /// Copy a page within one die without crossing the channel (copy-back).
    CopyBack { from_ppn: u64, to_ppn: u64 },
    /// Erase a block.
    Erase { block: u64 },
}

/// What an FTL counted.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct FtlStats {
    pub host_pages_written: u64,
    pub flash_pages_written: u64,
    pub flash_pages_read: u64,
    pub gc_runs: u64,
    pub switch_merges: u64,
    pub partial_merges: u64,
    pub full_merges: u64,
    pub erases: u64,
}

/// Which FTL an SSD runs, and its policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FtlKind {
    /// Page mapping, GC victim with the fewest valid pages.
    PageGreedy,
    /// Page mapping, GC victim by benefit/cost = (1-u)/(2u) * age.
    PageCostBenefit,
    /// Block mapping: a logical block maps to one physical block; an
    /// overwrite copies the block.
    Block,
    /// Hybrid log-block mapping, one log block per data block (BAST).
    Bast,
    /// Hybrid log-block mapping, log blocks shared by all data blocks (FAST).
    Fast,
    /// lee2008's super-block scheme: block mapping over super-blocks of
    /// several erase units striped over chips, with log super-blocks.
    SuperBlock,
}

impl FtlKind {
    /// Every FTL, in the order device files and `flashlab devices` name them.
    pub const ALL: [FtlKind; 6] = [
        FtlKind::PageGreedy,
        FtlKind::PageCostBenefit,
        FtlKind::Block,
        FtlKind::Bast,
        FtlKind::Fast,
        FtlKind::SuperBlock,
    ];

    /// The FTL called `name` ([`FtlKind::as_str`]), if any.
    pub fn parse(name: &str) -> Option<FtlKind> {
        FtlKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FtlKind::PageGreedy => "page-greedy",
            FtlKind::PageCostBenefit => "page-cost-benefit",
            FtlKind::Block => "block",
            FtlKind::Bast => "bast",
            FtlKind::Fast => "fast",
            FtlKind::SuperBlock => "super-block",
        }
    }
}

/// A flash translation layer. See the module documentation.
/// Ask the host CPU to start loading the cache line that holds `value`:
/// a hint with no effect on any result, so a lookup at a random address
/// (an FTL's map) can overlap the work before it.
#[inline]
pub(crate) fn prefetch_line<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch has no architectural effect and never faults, and
    // the address is that of a live reference.
    unsafe {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

pub trait Ftl: Send {
    /// Logical pages the host can address.
    fn logical_pages(&self) -> u64;
    /// Where a logical page lives, or `None` if it was never written or is trimmed.
    fn lookup(&self, lpn: u64) -> Option<u64>;
    /// A hint that `lpn` is looked up soon (see [`prefetch_line`]).
    fn prefetch(&self, _lpn: u64) {}
    /// Write one logical page: push the operations it costs onto `ops`, the
    /// host page's program last (FTL-3).
    fn write(&mut self, lpn: u64, ops: &mut Vec<FlashOp>);
    /// Forget a logical page.
    fn trim(&mut self, lpn: u64);
    /// Counters so far.
    fn stats(&self) -> FtlStats;
    /// Erase count of every block, for wear reporting.
    fn erase_counts(&self) -> &[u32];
    /// Logical pages per stripe unit: how many consecutive logical pages a
    /// sequential write puts on one plane before moving to the next.
    fn stripe_pages(&self) -> u64 {
        1
    }
    /// The FTL's own parameters as it runs them (after clamping), by the
    /// names a device file sets them under: log blocks, super-block size.
    /// The stripe unit is [`Ftl::stripe_pages`].
    fn parameters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// Erase units per super-block when an [`FtlKind::SuperBlock`] is built
/// without parameters: lee2008 section 2.2 ("a super-block consists of
/// eight erase units ... of 128 KBytes each").
pub const SUPER_BLOCK_ERASE_UNITS_DEFAULT: u32 = 8;
/// Log super-blocks of a default-built [`FtlKind::SuperBlock`] (lee2008
/// does not say; an assumption).
pub const LOG_SUPER_BLOCKS_DEFAULT: u32 = 8;
/// Log blocks of a default-built BAST or FAST FTL (an assumption).
pub const HYBRID_LOG_BLOCKS_DEFAULT: u32 = 32;

/// Build the FTL of `kind` over `geometry` with default parameters.
///
/// Page mapping is [`page::PageFtl`]; block mapping [`block::BlockFtl`];
/// BAST and FAST [`hybrid::HybridFtl`] with [`HYBRID_LOG_BLOCKS_DEFAULT`]
/// log blocks; the super-block scheme [`superblock::SuperBlockFtl`] with
/// lee2008's eight erase units per super-block and
/// [`LOG_SUPER_BLOCKS_DEFAULT`] log super-blocks. The geometry is validated
/// first, so no FTL sees an impossible one.
pub fn build(kind: FtlKind, geometry: &Geometry) -> Result<Box<dyn Ftl>, DeviceError> {
    geometry.validate(kind.as_str())?;
    Ok(match kind {
        FtlKind::PageGreedy => Box::new(page::PageFtl::new(geometry, page::GcPolicy::Greedy)?),
        FtlKind::PageCostBenefit => {
            Box::new(page::PageFtl::new(geometry, page::GcPolicy::CostBenefit)?)
        }
        FtlKind::Block => Box::new(block::BlockFtl::new(geometry)),
        FtlKind::Bast => Box::new(hybrid::HybridFtl::new(
            geometry,
            hybrid::HybridKind::Bast,
            HYBRID_LOG_BLOCKS_DEFAULT,
        )),
        FtlKind::Fast => Box::new(hybrid::HybridFtl::new(
            geometry,
            hybrid::HybridKind::Fast,
            HYBRID_LOG_BLOCKS_DEFAULT,
        )),
        FtlKind::SuperBlock => Box::new(superblock::SuperBlockFtl::new(
            geometry,
            SUPER_BLOCK_ERASE_UNITS_DEFAULT,
            LOG_SUPER_BLOCKS_DEFAULT,
        )),
    })
}
