//! The physical side shared by the block-granularity FTLs (block mapping,
//! BAST, FAST and lee2008's super-blocks).
//!
//! All four map *units* rather than pages: a unit is one erase unit for the
//! block and hybrid FTLs, and `blocks_per_unit` erase units taken from
//! consecutive planes for the super-block FTL. A unit is programmed page by
//! page at fixed offsets, erased as a whole (one erase per member block), and
//! allocated and freed as a whole. Everything an FTL does to flash goes
//! through [`Flash`], which emits the [`FlashOp`]s, keeps the erase counts and
//! the counters, and checks FTL-1 (program once between erases) on every
//! program. [`DataMap`] is the block-level map from logical units to the
//! physical units that hold them in place, with one validity bit per page.
//!
//! Unit addressing ([`Layout`]): planes are cut into groups of
//! `blocks_per_unit` consecutive planes; physical unit `u` is row
//! `u % blocks_per_plane` of group `u / blocks_per_plane`, one block from each
//! plane of the group. Offset `o` of a unit lives in member `o %
//! blocks_per_unit`, page `o / blocks_per_unit`, so consecutive offsets go
//! round-robin over the members. Members are ordered plane-in-die first, die
//! second, so that consecutive offsets land on different dies when the group
//! spans several. With one block per unit, unit `u` is simply block `u`.
//!
//! Free units are kept per *zone* (the die of the unit's first member) in a
//! min-heap on erase count: a merge takes its destination from the zone of
//! the unit it copies, so pages move by copy-back inside the die, and within
//! the zone the least-worn unit goes first (cheap dynamic wear levelling).
//!
//! Capacity planning ([`plan`]): a unit-mapped FTL needs, besides one unit per
//! logical unit, its log units and one free unit as the destination of a
//! merge (invariant U-1 below). Those come out of over-provisioning; when
//! over-provisioning is too small the number of log units is clamped, and if
//! even the minimum does not fit, the logical capacity shrinks.
//!
//! Invariants (U-n):
//! 1. Mapped data units + log units in use + free units = physical units, and
//!    data units <= logical units, log units <= the planned log units, so at
//!    least [`MERGE_RESERVE_UNITS`] unit is free whenever a merge starts.
//! 2. Every program is of an erased page (FTL-1). Host writes in place are
//!    programmed only at or above the unit's write pointer (in-order
//!    programming); a merge destination may be filled out of order (merge
//!    copies into skipped slots, or the block FTL's host page programmed last
//!    to honour FTL-3).
//! 3. A page counted valid in [`DataMap`] is programmed in its data unit.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::ssd::ftl::{FlashOp, FtlStats};
use crate::ssd::geometry::Geometry;

/// Marker for "no unit", "no slot" or "no position" in the `u32` tables.
pub(crate) const NONE: u32 = u32::MAX;

/// Units always left free so that a full merge has a destination (U-1).
pub(crate) const MERGE_RESERVE_UNITS: u32 = 1;

/// Bits in one word of a [`Bits`] row.
const BITS_PER_WORD: u32 = u64::BITS;

/// A table of fixed-width bit rows (one row per unit).
#[derive(Debug)]
pub(crate) struct Bits {
    words: Vec<u64>,
    words_per_row: usize,
}

impl Bits {
    fn new(rows: u32, bits_per_row: u32) -> Bits {
        let words_per_row = bits_per_row.div_ceil(BITS_PER_WORD) as usize;
        Bits {
            words: vec![0; rows as usize * words_per_row],
            words_per_row,
        }
    }

    fn index(&self, row: u32, bit: u32) -> (usize, u64) {
        let word = row as usize * self.words_per_row + (bit / BITS_PER_WORD) as usize;
        (word, 1u64 << (bit % BITS_PER_WORD))
    }

    pub(crate) fn get(&self, row: u32, bit: u32) -> bool {
        let (word, mask) = self.index(row, bit);
        self.words[word] & mask != 0
    }

    pub(crate) fn put(&mut self, row: u32, bit: u32, value: bool) {
        let (word, mask) = self.index(row, bit);
        if value {
            self.words[word] |= mask;
        } else {
            self.words[word] &= !mask;
        }
    }

    fn clear_row(&mut self, row: u32) {
        let start = row as usize * self.words_per_row;
        self.words[start..start + self.words_per_row].fill(0);
    }
}

/// Division of 32-bit numbers by a fixed divisor with a multiplication:
/// with `m = ceil(2^64 / d)`, `n / d` is the high 64 bits of `m * n` for
/// every 32-bit `n` and `d` (Lemire, Kaser and Kurz, "Faster remainder by
/// direct computation", 2019). A merge computes the physical page of every
/// page it copies, so a hardware division per page would be most of its
/// time (docs/PERFORMANCE-HISTORY.md, "The device models and `reproduce
/// --quick`").
#[derive(Clone, Copy, Debug)]
struct Divisor {
    d: u32,
    m: u64,
}

impl Divisor {
    fn new(d: u32) -> Divisor {
        let d = d.max(1);
        Divisor {
            d,
            m: (u64::MAX / u64::from(d)).wrapping_add(1),
        }
    }

    /// `(n / d, n % d)`.
    fn div_rem(self, n: u32) -> (u32, u32) {
        let q = ((u128::from(self.m) * u128::from(n)) >> 64) as u32;
        // d == 1: m wrapped to 0; every n divides into itself.
        let q = if self.d == 1 { n } else { q };
        (q, n - q * self.d)
    }
}

/// How units, offsets and physical pages relate. See the module docs.
#[derive(Debug)]
pub(crate) struct Layout {
    pages_per_block: u32,
    blocks_per_plane: u32,
    planes_per_die: u32,
    blocks_per_unit: u32,
    /// The three divisors above, for [`Layout::ppn_and_die`].
    by_blocks_per_plane: Divisor,
    by_planes_per_die: Divisor,
    by_blocks_per_unit: Divisor,
    units: u32,
    /// Plane of each member, relative to the first plane of its group.
    member_planes: Vec<u32>,
    /// The distinct zones of the plane groups, in group order.
    zone_cycle: Vec<u32>,
}

impl Layout {
    /// A layout of units of (at most) `requested_blocks_per_unit` blocks: the
    /// request is clamped to `1..=planes` and lowered to a divisor of the
    /// plane count, so that every plane belongs to exactly one group.
    pub(crate) fn new(geometry: &Geometry, requested_blocks_per_unit: u32) -> Layout {
        let planes = geometry.planes().max(1);
        let blocks_per_unit = largest_divisor_at_most(planes, requested_blocks_per_unit);
        let planes_per_die = geometry.planes_per_die.max(1);
        let mut member_planes: Vec<u32> = (0..blocks_per_unit).collect();
        member_planes.sort_by_key(|plane| (plane % planes_per_die, plane / planes_per_die));
        let groups = planes / blocks_per_unit;
        let first_member = member_planes[0];
        let mut zone_cycle: Vec<u32> = (0..groups)
            .map(|group| (group * blocks_per_unit + first_member) / planes_per_die)
            .collect();
        zone_cycle.dedup();
        Layout {
            pages_per_block: geometry.pages_per_block.max(1),
            blocks_per_plane: geometry.blocks_per_plane.max(1),
            planes_per_die,
            blocks_per_unit,
            by_blocks_per_plane: Divisor::new(geometry.blocks_per_plane),
            by_planes_per_die: Divisor::new(planes_per_die),
            by_blocks_per_unit: Divisor::new(blocks_per_unit),
            units: groups * geometry.blocks_per_plane,
            member_planes,
            zone_cycle,
        }
    }

    /// Erase units per unit.
    pub(crate) fn blocks_per_unit(&self) -> u32 {
        self.blocks_per_unit
    }

    /// Pages per unit.
    pub(crate) fn unit_pages(&self) -> u32 {
        self.blocks_per_unit * self.pages_per_block
    }

    /// Physical units.
    pub(crate) fn units(&self) -> u32 {
        self.units
    }

    /// Global block number of member `member` of `unit`.
    pub(crate) fn block(&self, unit: u32, member: u32) -> u64 {
        self.block_and_plane(unit, member).0
    }

    /// Global block number of member `member` of `unit`, and its plane.
    fn block_and_plane(&self, unit: u32, member: u32) -> (u64, u32) {
        let (group, row) = self.by_blocks_per_plane.div_rem(unit);
        let plane = group * self.blocks_per_unit + self.member_planes[member as usize];
        let block = u64::from(plane) * u64::from(self.blocks_per_plane) + u64::from(row);
        (block, plane)
    }

    /// Physical page number of `offset` in `unit`.
    pub(crate) fn ppn(&self, unit: u32, offset: u32) -> u64 {
        self.ppn_and_die(unit, offset).0
    }

    /// [`Layout::ppn`] and the die that page is on, with the divisions the
    /// two share done once (a merge copies every page of a unit).
    fn ppn_and_die(&self, unit: u32, offset: u32) -> (u64, u32) {
        let (page, member) = self.by_blocks_per_unit.div_rem(offset);
        let (block, plane) = self.block_and_plane(unit, member);
        let ppn = block * u64::from(self.pages_per_block) + u64::from(page);
        (ppn, self.by_planes_per_die.div_rem(plane).0)
    }

    /// The free-pool zone of a unit: the die of its first member.
    pub(crate) fn zone(&self, unit: u32) -> u32 {
        (self.block(unit, 0) / u64::from(self.blocks_per_plane) / u64::from(self.planes_per_die))
            as u32
    }

    /// The zone a never-mapped logical unit is first placed in: logical
    /// units are striped over the zones so that neighbours run in parallel.
    pub(crate) fn home_zone(&self, logical_unit: u32) -> u32 {
        let cycle = self.zone_cycle.len().max(1);
        self.zone_cycle
            .get(logical_unit as usize % cycle)
            .copied()
            .unwrap_or(0)
    }

    fn zones(&self) -> u32 {
        self.zone_cycle.last().map_or(1, |last| last + 1)
    }
}

/// The largest divisor of `n` in `1..=limit` (`limit` clamped to `1..=n`).
fn largest_divisor_at_most(n: u32, limit: u32) -> u32 {
    let limit = limit.clamp(1, n.max(1));
    (1..=limit)
        .rev()
        .find(|&d| n.is_multiple_of(d))
        .unwrap_or(1)
}

/// Free units per zone, least-erased first.
#[derive(Debug)]
struct FreePool {
    zones: Vec<BinaryHeap<Reverse<(u32, u32)>>>,
    free: u32,
}

impl FreePool {
    fn new(layout: &Layout) -> FreePool {
        let zone_count = layout.zones() as usize;
        let per_zone = layout.units() as usize / zone_count.max(1) + 1;
        let mut zones: Vec<_> = (0..zone_count)
            .map(|_| BinaryHeap::with_capacity(per_zone))
            .collect();
        for unit in 0..layout.units() {
            zones[layout.zone(unit) as usize].push(Reverse((0, unit)));
        }
        FreePool {
            zones,
            free: layout.units(),
        }
    }

    fn push(&mut self, zone: u32, erase_count: u32, unit: u32) {
        self.zones[zone as usize].push(Reverse((erase_count, unit)));
        self.free += 1;
    }

    /// The least-erased free unit of `zone`, else of the zone with the most
    /// free units.
    fn take(&mut self, zone: u32) -> Option<u32> {
        let preferred = zone as usize;
        let index = if self
            .zones
            .get(preferred)
            .is_some_and(|heap| !heap.is_empty())
        {
            preferred
        } else {
            (0..self.zones.len()).max_by_key(|&z| self.zones[z].len())?
        };
        let Reverse((_, unit)) = self.zones[index].pop()?;
        self.free -= 1;
        Some(unit)
    }
}

/// The flash array as the FTL sees it: emits operations, counts them, and
/// checks FTL-1 and U-2.
#[derive(Debug)]
pub(crate) struct Flash {
    layout: Layout,
    erase_counts: Vec<u32>,
    programmed: Bits,
    write_pointer: Vec<u32>,
    pool: FreePool,
    stats: FtlStats,
}

impl Flash {
    /// An erased array cut into units of `blocks_per_unit` blocks.
    pub(crate) fn new(geometry: &Geometry, blocks_per_unit: u32) -> Flash {
        let layout = Layout::new(geometry, blocks_per_unit);
        let blocks = u64::from(layout.units()) * u64::from(layout.blocks_per_unit());
        Flash {
            erase_counts: vec![0; blocks as usize],
            programmed: Bits::new(layout.units(), layout.unit_pages()),
            write_pointer: vec![0; layout.units() as usize],
            pool: FreePool::new(&layout),
            stats: FtlStats::default(),
            layout,
        }
    }

    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    pub(crate) fn stats(&self) -> &FtlStats {
        &self.stats
    }

    pub(crate) fn stats_mut(&mut self) -> &mut FtlStats {
        &mut self.stats
    }

    pub(crate) fn erase_counts(&self) -> &[u32] {
        &self.erase_counts
    }

    /// Free units left.
    #[cfg(test)]
    pub(crate) fn free_units(&self) -> u32 {
        self.pool.free
    }

    /// A free unit, preferably from `zone`. `None` only if U-1 was broken.
    pub(crate) fn allocate(&mut self, zone: u32) -> Option<u32> {
        debug_assert!(self.pool.free > 0, "U-1: no free unit left");
        self.pool.take(zone)
    }

    /// Whether an ordinary write may program `offset` of `unit` now (U-2).
    pub(crate) fn in_order(&self, unit: u32, offset: u32) -> bool {
        offset >= self.write_pointer[unit as usize]
    }

    /// Whether `offset` of `unit` has been programmed since the last erase.
    #[cfg(test)]
    pub(crate) fn is_programmed(&self, unit: u32, offset: u32) -> bool {
        self.programmed.get(unit, offset)
    }

    fn mark_programmed(&mut self, unit: u32, offset: u32) {
        debug_assert!(
            !self.programmed.get(unit, offset),
            "FTL-1: unit {unit} offset {offset} programmed twice between erases"
        );
        self.programmed.put(unit, offset, true);
        let pointer = &mut self.write_pointer[unit as usize];
        *pointer = (*pointer).max(offset + 1);
        self.stats.flash_pages_written += 1;
    }

    /// Program `offset` of `unit` with data from the host.
    pub(crate) fn program(&mut self, unit: u32, offset: u32, ops: &mut Vec<FlashOp>) {
        self.mark_programmed(unit, offset);
        ops.push(FlashOp::Program {
            ppn: self.layout.ppn(unit, offset),
        });
    }

    /// Copy a valid page: copy-back inside one die, else read and program.
    pub(crate) fn copy(&mut self, from: (u32, u32), to: (u32, u32), ops: &mut Vec<FlashOp>) {
        debug_assert!(
            self.programmed.get(from.0, from.1),
            "copy of an erased page"
        );
        self.mark_programmed(to.0, to.1);
        self.stats.flash_pages_read += 1;
        let (from_ppn, from_die) = self.layout.ppn_and_die(from.0, from.1);
        let (to_ppn, to_die) = self.layout.ppn_and_die(to.0, to.1);
        if from_die == to_die {
            ops.push(FlashOp::CopyBack { from_ppn, to_ppn });
        } else {
            ops.push(FlashOp::Read { ppn: from_ppn });
            ops.push(FlashOp::Program { ppn: to_ppn });
        }
    }

    /// Erase every member block of `unit` and return it to the free pool.
    pub(crate) fn erase(&mut self, unit: u32, ops: &mut Vec<FlashOp>) {
        for member in 0..self.layout.blocks_per_unit() {
            let block = self.layout.block(unit, member);
            self.erase_counts[block as usize] += 1;
            self.stats.erases += 1;
            ops.push(FlashOp::Erase { block });
        }
        self.programmed.clear_row(unit);
        self.write_pointer[unit as usize] = 0;
        let count = self.erase_counts[self.layout.block(unit, 0) as usize];
        self.pool.push(self.layout.zone(unit), count, unit);
    }
}

/// Block-level map: logical unit -> data unit, with a validity bit per page
/// (set iff the data unit's page at that offset holds the latest version).
#[derive(Debug)]
pub(crate) struct DataMap {
    units: Vec<u32>,
    valid: Bits,
    mapped: u32,
}

impl DataMap {
    pub(crate) fn new(logical_units: u32, unit_pages: u32) -> DataMap {
        DataMap {
            units: vec![NONE; logical_units as usize],
            valid: Bits::new(logical_units, unit_pages),
            mapped: 0,
        }
    }

    /// The data unit of a logical unit.
    pub(crate) fn unit(&self, logical_unit: u32) -> Option<u32> {
        let unit = *self.units.get(logical_unit as usize)?;
        (unit != NONE).then_some(unit)
    }

    /// Point a logical unit at a new data unit (validity bits unchanged).
    pub(crate) fn set_unit(&mut self, logical_unit: u32, unit: u32) {
        let slot = &mut self.units[logical_unit as usize];
        if *slot == NONE {
            self.mapped += 1;
        }
        *slot = unit;
    }

    /// Logical units that have a data unit.
    #[cfg(test)]
    pub(crate) fn mapped(&self) -> u32 {
        self.mapped
    }

    pub(crate) fn is_valid(&self, logical_unit: u32, offset: u32) -> bool {
        self.valid.get(logical_unit, offset)
    }

    pub(crate) fn set_valid(&mut self, logical_unit: u32, offset: u32, valid: bool) {
        self.valid.put(logical_unit, offset, valid);
    }

    /// The data unit of `logical_unit`, allocating one in its home zone on
    /// first use. `None` only if U-1 was broken.
    pub(crate) fn unit_or_allocate(&mut self, flash: &mut Flash, logical_unit: u32) -> Option<u32> {
        if let Some(unit) = self.unit(logical_unit) {
            return Some(unit);
        }
        let unit = flash.allocate(flash.layout().home_zone(logical_unit))?;
        self.set_unit(logical_unit, unit);
        Some(unit)
    }
}

/// What every unit-mapped FTL (block, BAST, FAST) starts from: its flash in
/// units of `blocks_per_unit` blocks, the plan of its logical pages and log
/// units, and an empty data map over the logical units.
#[derive(Debug)]
pub(crate) struct MappedUnits {
    pub(crate) flash: Flash,
    pub(crate) plan: Plan,
    pub(crate) unit_pages: u32,
    pub(crate) data: DataMap,
}

impl MappedUnits {
    /// `log_units` requested (at least `min_log_units`), clamped by [`plan`].
    pub(crate) fn new(
        geometry: &Geometry,
        blocks_per_unit: u32,
        log_units: u32,
        min_log_units: u32,
    ) -> MappedUnits {
        let flash = Flash::new(geometry, blocks_per_unit);
        let plan = plan(
            geometry.logical_pages(),
            flash.layout(),
            log_units,
            min_log_units,
        );
        let unit_pages = flash.layout().unit_pages();
        MappedUnits {
            data: DataMap::new(logical_units(plan.logical_pages, unit_pages), unit_pages),
            flash,
            plan,
            unit_pages,
        }
    }

    /// Logical units of the plan's logical pages.
    pub(crate) fn logical_units(&self) -> u32 {
        logical_units(self.plan.logical_pages, self.unit_pages)
    }

    /// The first step of a host write in every unit-mapped FTL: ignore an
    /// out-of-range page (no operations, as in the page FTL), count the host
    /// page, and find or allocate the logical unit's data unit. Returns
    /// `(logical unit, offset, data unit)`; `None` drops the write.
    pub(crate) fn begin_host_write(&mut self, lpn: u64) -> Option<(u32, u32, u32)> {
        if lpn >= self.plan.logical_pages {
            return None;
        }
        self.flash.stats_mut().host_pages_written += 1;
        let (logical_unit, offset) = split(lpn, self.unit_pages);
        let data_unit = self.data.unit_or_allocate(&mut self.flash, logical_unit)?;
        Some((logical_unit, offset, data_unit))
    }
}

/// A full merge of one logical unit (BAST, FAST): the latest version of
/// each of its pages, from a log unit or else from its data unit, copied to
/// the same offset of a fresh unit in the data unit's zone.
pub(crate) struct FullMerge {
    logical_unit: u32,
    data_unit: u32,
    target: u32,
}

impl FullMerge {
    /// Allocate the target; `None` (no free unit) leaves the merge undone.
    pub(crate) fn start(
        units: &mut MappedUnits,
        logical_unit: u32,
        data_unit: u32,
    ) -> Option<FullMerge> {
        let flash = &mut units.flash;
        let target = flash.allocate(flash.layout().zone(data_unit))?;
        Some(FullMerge {
            logical_unit,
            data_unit,
            target,
        })
    }

    /// Copy the page at `offset` from `in_log` (its latest version in a log,
    /// as (unit, position)) or else from the data unit if valid there.
    pub(crate) fn page(
        &self,
        units: &mut MappedUnits,
        offset: u32,
        in_log: Option<(u32, u32)>,
        ops: &mut Vec<FlashOp>,
    ) {
        let source = in_log.or_else(|| {
            units
                .data
                .is_valid(self.logical_unit, offset)
                .then_some((self.data_unit, offset))
        });
        if let Some(source) = source {
            units.flash.copy(source, (self.target, offset), ops);
        }
        units
            .data
            .set_valid(self.logical_unit, offset, source.is_some());
    }

    /// Point the logical unit at the target and erase the old data unit.
    pub(crate) fn finish(self, units: &mut MappedUnits, ops: &mut Vec<FlashOp>) {
        units.data.set_unit(self.logical_unit, self.target);
        units.flash.erase(self.data_unit, ops);
    }
}

/// How many logical pages and log units an FTL gets. See the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) logical_pages: u64,
    pub(crate) log_units: u32,
}

/// Carve `requested_log_units` (at least `min_log_units`) and the merge
/// reserve out of the spare units left after `wanted_pages` of data.
pub(crate) fn plan(
    wanted_pages: u64,
    layout: &Layout,
    requested_log_units: u32,
    min_log_units: u32,
) -> Plan {
    let unit_pages = u64::from(layout.unit_pages());
    let physical = u64::from(layout.units());
    let data_units = wanted_pages.div_ceil(unit_pages);
    let overhead = u64::from(min_log_units) + u64::from(MERGE_RESERVE_UNITS);
    if physical >= data_units + overhead {
        let room = physical - data_units - u64::from(MERGE_RESERVE_UNITS);
        let log_units = u64::from(requested_log_units).clamp(u64::from(min_log_units), room);
        return Plan {
            logical_pages: wanted_pages,
            log_units: log_units as u32,
        };
    }
    let fitting_units = physical.saturating_sub(overhead);
    Plan {
        logical_pages: wanted_pages.min(fitting_units * unit_pages),
        log_units: min_log_units,
    }
}

/// Split a logical page number into (logical unit, offset).
pub(crate) fn split(lpn: u64, unit_pages: u32) -> (u32, u32) {
    let unit_pages = u64::from(unit_pages);
    ((lpn / unit_pages) as u32, (lpn % unit_pages) as u32)
}

/// Logical units needed for `logical_pages`.
pub(crate) fn logical_units(logical_pages: u64, unit_pages: u32) -> u32 {
    logical_pages.div_ceil(u64::from(unit_pages)) as u32
}

#[cfg(test)]
pub(crate) mod testing {
    //! A black-box reference model shared by the FTL tests: it replays the
    //! emitted operations onto an owner table of physical pages and checks
    //! FTL-1, FTL-2 and FTL-3 against a map of the latest write of each page.

    use std::collections::{HashMap, HashSet};

    use crate::ssd::ftl::{FlashOp, Ftl};
    use crate::ssd::geometry::Geometry;

    /// A small SSD: 1 channel, 1 chip, 1 die, 2 planes, 64 blocks of 16 pages
    /// of 2 KB, with the given over-provisioning.
    pub(crate) fn small_geometry(over_provisioning: f64) -> Geometry {
        Geometry {
            channels: 1,
            chips_per_channel: 1,
            dies_per_chip: 1,
            planes_per_die: 2,
            blocks_per_plane: 32,
            pages_per_block: 16,
            page_bytes: 2048,
            over_provisioning,
        }
    }

    /// A deterministic xorshift generator, so tests need no seed plumbing.
    pub(crate) struct Rng(u64);

    impl Rng {
        pub(crate) fn new(seed: u64) -> Rng {
            Rng(seed.max(1))
        }

        pub(crate) fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n.max(1)
        }
    }

    /// The reference model: who owns each physical page, and the latest
    /// write sequence number of each logical page.
    pub(crate) struct Reference {
        owner: HashMap<u64, (u64, u64)>,
        latest: HashMap<u64, u64>,
        pages_per_block: u64,
        sequence: u64,
        pub(crate) copies: u64,
        /// Copies done by read + program (source and target on two dies).
        pub(crate) cross_die_copies: u64,
    }

    impl Reference {
        pub(crate) fn new(geometry: &Geometry) -> Reference {
            Reference {
                owner: HashMap::new(),
                latest: HashMap::new(),
                pages_per_block: u64::from(geometry.pages_per_block),
                sequence: 0,
                copies: 0,
                cross_die_copies: 0,
            }
        }

        fn program(&mut self, ppn: u64, content: (u64, u64)) {
            let previous = self.owner.insert(ppn, content);
            assert!(previous.is_none(), "FTL-1: ppn {ppn} programmed twice");
        }

        fn copy(&mut self, from: u64, to: u64) {
            let content = *self.owner.get(&from).expect("copy of an erased page");
            assert_eq!(
                self.latest.get(&content.0),
                Some(&content.1),
                "merge copied a stale version of lpn {}",
                content.0
            );
            self.copies += 1;
            self.program(to, content);
        }

        /// Write `lpn` through `ftl` and replay its operations.
        pub(crate) fn write(&mut self, ftl: &mut dyn Ftl, lpn: u64) {
            let mut ops = Vec::new();
            ftl.write(lpn, &mut ops);
            self.sequence += 1;
            let Some((&FlashOp::Program { ppn: host_ppn }, rest)) = ops.split_last() else {
                panic!("FTL-3: write of {lpn} does not end with a program: {ops:?}");
            };
            let mut pending_read = None;
            for op in rest {
                match *op {
                    FlashOp::Read { ppn } => {
                        self.cross_die_copies += 1;
                        pending_read = Some(ppn);
                    }
                    FlashOp::Program { ppn } => {
                        let from = pending_read.take().expect("program without a read");
                        self.copy(from, ppn);
                    }
                    FlashOp::CopyBack { from_ppn, to_ppn } => self.copy(from_ppn, to_ppn),
                    FlashOp::Erase { block } => {
                        let first = block * self.pages_per_block;
                        for ppn in first..first + self.pages_per_block {
                            self.owner.remove(&ppn);
                        }
                    }
                }
            }
            assert!(pending_read.is_none(), "read without a program");
            self.latest.insert(lpn, self.sequence);
            self.program(host_ppn, (lpn, self.sequence));
        }

        /// Trim `lpn` in both.
        pub(crate) fn trim(&mut self, ftl: &mut dyn Ftl, lpn: u64) {
            ftl.trim(lpn);
            self.latest.remove(&lpn);
        }

        /// FTL-2: every written page maps to a page holding its latest
        /// version, no two pages share a physical page, trimmed pages are gone.
        pub(crate) fn check(&self, ftl: &dyn Ftl) {
            let mut seen = HashSet::new();
            for lpn in 0..ftl.logical_pages() {
                let found = ftl.lookup(lpn);
                match self.latest.get(&lpn) {
                    None => assert_eq!(found, None, "lpn {lpn} trimmed or never written"),
                    Some(&sequence) => {
                        let ppn = found.unwrap_or_else(|| panic!("lpn {lpn} lost"));
                        assert_eq!(self.owner.get(&ppn), Some(&(lpn, sequence)), "lpn {lpn}");
                        assert!(seen.insert(ppn), "ppn {ppn} mapped twice");
                    }
                }
            }
        }
    }

    /// A seeded mix of sequential runs, random writes, tail rewrites and
    /// trims, checked against the reference model as it goes.
    pub(crate) fn run_mixed(ftl: &mut dyn Ftl, geometry: &Geometry, seed: u64, steps: u32) {
        let mut reference = Reference::new(geometry);
        let mut rng = Rng::new(seed);
        let pages = ftl.logical_pages();
        let mut cursor = 0;
        for step in 0..steps {
            match rng.below(10) {
                0..=3 => {
                    cursor = (cursor + 1) % pages;
                    reference.write(ftl, cursor);
                }
                4..=6 => {
                    cursor = rng.below(pages);
                    reference.write(ftl, cursor);
                }
                7 | 8 => reference.write(ftl, cursor),
                _ => reference.trim(ftl, rng.below(pages)),
            }
            if step % 97 == 0 {
                reference.check(ftl);
            }
        }
        reference.check(ftl);
        eprintln!(
            "mixed seed {seed}: {:?}, {} copies, {} across dies",
            ftl.stats(),
            reference.copies,
            reference.cross_die_copies
        );
    }

    /// Write amplification: flash pages programmed per host page.
    pub(crate) fn waf(ftl: &dyn Ftl) -> f64 {
        let stats = ftl.stats();
        stats.flash_pages_written as f64 / stats.host_pages_written.max(1) as f64
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;

    #[test]
    fn a_divisor_divides_as_the_hardware_does() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u32
        };
        let edges = [
            0,
            1,
            2,
            3,
            7,
            64,
            1000,
            u32::MAX / 2,
            u32::MAX - 1,
            u32::MAX,
        ];
        let mut divisors: Vec<u32> = edges.iter().copied().filter(|&d| d > 0).collect();
        for _ in 0..200 {
            let shift = next() % 32;
            divisors.push((next() >> shift).max(1));
        }
        for d in divisors {
            let divisor = Divisor::new(d);
            let mut numerators = edges.to_vec();
            numerators.extend((0..500).map(|_| next()));
            for n in numerators {
                assert_eq!(divisor.div_rem(n), (n / d, n % d), "{n} / {d}");
            }
        }
    }

    #[test]
    fn ppn_and_die_match_the_page_number_arithmetic() {
        // The die found from the plane equals the die of the physical page
        // number, for every page of units of every width, over several dies.
        let geometry = Geometry {
            channels: 2,
            chips_per_channel: 2,
            dies_per_chip: 2,
            planes_per_die: 2,
            blocks_per_plane: 8,
            pages_per_block: 4,
            page_bytes: 2048,
            over_provisioning: 0.1,
        };
        for blocks_per_unit in [1, 2, 3, 4, 8, 16] {
            let layout = Layout::new(&geometry, blocks_per_unit);
            for unit in 0..layout.units() {
                for offset in 0..layout.unit_pages() {
                    let (ppn, die) = layout.ppn_and_die(unit, offset);
                    let member = offset % layout.blocks_per_unit();
                    let page = u64::from(offset / layout.blocks_per_unit());
                    assert_eq!(ppn, layout.block(unit, member) * 4 + page);
                    assert_eq!(
                        u64::from(die),
                        ppn / 4 / 8 / 2,
                        "unit {unit} offset {offset}"
                    );
                }
            }
        }
    }
}
