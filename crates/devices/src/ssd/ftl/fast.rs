//! The FAST engine (Lee et al. 2007): log blocks shared by all data blocks.
//!
//! Data blocks are block-mapped as in BAST, and a write to an erased offset
//! above the data block's write pointer is programmed in place. Other writes
//! go to the log area, which is page-mapped as a whole (`log_map`: logical
//! page -> log position), so one log block absorbs overwrites of many data
//! blocks and fills completely before anything is merged:
//! - the *sequential* log block (slot 0) takes a write at offset 0 and the
//!   in-order continuation of that run; a new offset-0 write first merges it,
//!   by switch (all offsets present) or partial merge (a prefix);
//! - the *random* log blocks (slots 1..) take everything else, round-robin.
//!   When all are full, the oldest is reclaimed: every data block with a
//!   valid page in it gets a full merge (latest versions from data block,
//!   sequential and random logs into a fresh block), then it is erased.
//!
//! Because a random log block mixes many data blocks, reclaiming it costs up
//! to `pages_per_block` full merges, but each of them happens only after the
//! whole log area cycled — far fewer than BAST's one merge per log-block
//! eviction under uniform random writes.
//!
//! Invariants (FAST-n):
//! 1. A page's latest version is in exactly one place: `log_map` (log) or its
//!    data block's validity bit, never both.
//! 2. The sequential log block holds offsets `0..used` of its owner at
//!    positions equal to their offsets.
//! 3. Random slots in use form the ring `oldest..oldest+count`; every log
//!    slot in use has a unit, and sequential + random in use <= log units.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::ssd::ftl::block::units::{self, FullMerge, MappedUnits, NONE};
use crate::ssd::ftl::{FlashOp, FtlStats};
use crate::ssd::geometry::Geometry;

/// Fewest log blocks FAST can run with: one sequential, one random.
pub(crate) const MIN_LOG_UNITS: u32 = 2;

/// Slot of the sequential log block.
const SEQUENTIAL_SLOT: u32 = 0;

/// Fibonacci hashing multiplier (2^64 / golden ratio).
const FIBONACCI_MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

/// A fast hasher for logical page numbers (keys are `u64`, not adversarial).
#[derive(Default)]
struct LpnHasher(u64);

impl Hasher for LpnHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0.rotate_left(5) ^ value).wrapping_mul(FIBONACCI_MULTIPLIER);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

type LogMap = HashMap<u64, u32, BuildHasherDefault<LpnHasher>>;

/// FAST over one-block units. See the module docs.
#[derive(Debug)]
pub(crate) struct FastCore {
    units: MappedUnits,
    /// Physical unit of each log slot (NONE when not in use).
    slot_unit: Vec<u32>,
    /// Positions appended in each log slot.
    used: Vec<u32>,
    /// `slot * unit_pages + position` -> logical page written there.
    reverse: Vec<u64>,
    /// Logical page -> `slot * unit_pages + position` of its latest version.
    log_map: LogMap,
    /// Logical unit owning the sequential log block, or NONE.
    sequential_owner: u32,
    /// Random ring: index of the oldest in-use random slot, and count in use.
    oldest: u32,
    count: u32,
}

impl FastCore {
    /// FAST with `log_units` log blocks (one sequential, the rest random),
    /// clamped by [`units::plan`].
    pub(crate) fn new(geometry: &Geometry, log_units: u32) -> FastCore {
        let units = MappedUnits::new(geometry, 1, log_units, MIN_LOG_UNITS);
        let plan = units.plan;
        let log_pages = plan.log_units as usize * units.unit_pages as usize;
        let mut log_map = LogMap::default();
        log_map.reserve(log_pages);
        FastCore {
            units,
            slot_unit: vec![NONE; plan.log_units as usize],
            used: vec![0; plan.log_units as usize],
            reverse: vec![0; log_pages],
            log_map,
            sequential_owner: NONE,
            oldest: 0,
            count: 0,
        }
    }

    pub(crate) fn logical_pages(&self) -> u64 {
        self.units.plan.logical_pages
    }

    /// Log blocks after clamping.
    pub(crate) fn log_units(&self) -> u32 {
        self.units.plan.log_units
    }

    pub(crate) fn stats(&self) -> FtlStats {
        self.units.flash.stats().clone()
    }

    pub(crate) fn erase_counts(&self) -> &[u32] {
        self.units.flash.erase_counts()
    }

    fn random_slots(&self) -> u32 {
        self.units.plan.log_units - 1
    }

    fn lpn(&self, logical_unit: u32, offset: u32) -> u64 {
        u64::from(logical_unit) * u64::from(self.units.unit_pages) + u64::from(offset)
    }

    fn log_page(&self, slot: u32, position: u32) -> u32 {
        slot * self.units.unit_pages + position
    }

    /// (slot, position) of a `log_page`.
    fn log_place(&self, log_page: u32) -> (u32, u32) {
        (
            log_page / self.units.unit_pages,
            log_page % self.units.unit_pages,
        )
    }

    pub(crate) fn lookup(&self, lpn: u64) -> Option<u64> {
        if lpn >= self.units.plan.logical_pages {
            return None;
        }
        if let Some(&log_page) = self.log_map.get(&lpn) {
            let (slot, position) = self.log_place(log_page);
            let unit = self.slot_unit[slot as usize];
            return Some(self.units.flash.layout().ppn(unit, position));
        }
        let (logical_unit, offset) = units::split(lpn, self.units.unit_pages);
        let unit = self.units.data.unit(logical_unit)?;
        let valid = self.units.data.is_valid(logical_unit, offset);
        valid.then(|| self.units.flash.layout().ppn(unit, offset))
    }

    pub(crate) fn trim(&mut self, lpn: u64) {
        if lpn < self.units.plan.logical_pages {
            self.invalidate(lpn);
        }
    }

    /// Forget the current version of a page, wherever it is (FAST-1).
    fn invalidate(&mut self, lpn: u64) {
        if self.log_map.remove(&lpn).is_none() {
            let (logical_unit, offset) = units::split(lpn, self.units.unit_pages);
            self.units.data.set_valid(logical_unit, offset, false);
        }
    }

    pub(crate) fn write(&mut self, lpn: u64, ops: &mut Vec<FlashOp>) {
        let Some((logical_unit, offset, data_unit)) = self.units.begin_host_write(lpn) else {
            return;
        };
        if self.units.flash.in_order(data_unit, offset) {
            self.invalidate(lpn);
            self.units.data.set_valid(logical_unit, offset, true);
            return self.units.flash.program(data_unit, offset, ops);
        }
        let seq = SEQUENTIAL_SLOT as usize;
        let slot = if offset == 0 {
            self.open_sequential(logical_unit, data_unit, ops)
        } else if self.sequential_owner == logical_unit && offset == self.used[seq] {
            Some(SEQUENTIAL_SLOT)
        } else {
            self.random_slot(data_unit, ops)
        };
        if let Some(slot) = slot {
            self.append(slot, lpn, ops);
        }
    }

    fn append(&mut self, slot: u32, lpn: u64, ops: &mut Vec<FlashOp>) {
        self.invalidate(lpn);
        let position = self.used[slot as usize];
        let log_page = self.log_page(slot, position);
        self.used[slot as usize] += 1;
        self.reverse[log_page as usize] = lpn;
        self.log_map.insert(lpn, log_page);
        self.units
            .flash
            .program(self.slot_unit[slot as usize], position, ops);
    }

    /// Start a new sequential run for `logical_unit`, merging the old one.
    fn open_sequential(
        &mut self,
        logical_unit: u32,
        data_unit: u32,
        ops: &mut Vec<FlashOp>,
    ) -> Option<u32> {
        if self.sequential_owner != NONE {
            self.merge_sequential(ops);
        }
        let zone = self.units.flash.layout().zone(data_unit);
        self.slot_unit[SEQUENTIAL_SLOT as usize] = self.units.flash.allocate(zone)?;
        self.used[SEQUENTIAL_SLOT as usize] = 0;
        self.sequential_owner = logical_unit;
        Some(SEQUENTIAL_SLOT)
    }

    /// The random slot to append to, reclaiming the oldest if all are full.
    fn random_slot(&mut self, data_unit: u32, ops: &mut Vec<FlashOp>) -> Option<u32> {
        let ring = self.random_slots();
        if self.count > 0 {
            let current = 1 + (self.oldest + self.count - 1) % ring;
            if self.used[current as usize] < self.units.unit_pages {
                return Some(current);
            }
        }
        if self.count == ring {
            let victim = 1 + self.oldest;
            self.reclaim(victim, ops);
            self.oldest = (self.oldest + 1) % ring;
            self.count -= 1;
        }
        let next = 1 + (self.oldest + self.count) % ring;
        let zone = self.units.flash.layout().zone(data_unit);
        self.slot_unit[next as usize] = self.units.flash.allocate(zone)?;
        self.used[next as usize] = 0;
        self.count += 1;
        Some(next)
    }

    /// Merge the sequential log block into its owner: switch if it holds
    /// every offset, else partial.
    fn merge_sequential(&mut self, ops: &mut Vec<FlashOp>) {
        let logical_unit = self.sequential_owner;
        let seq = SEQUENTIAL_SLOT as usize;
        let (log_unit, used) = (self.slot_unit[seq], self.used[seq]);
        let Some(data_unit) = self.units.data.unit(logical_unit) else {
            return;
        };
        for offset in used..self.units.unit_pages {
            if self.units.data.is_valid(logical_unit, offset) {
                self.units
                    .flash
                    .copy((data_unit, offset), (log_unit, offset), ops);
            }
        }
        for offset in 0..used {
            let lpn = self.lpn(logical_unit, offset);
            let here = self.log_page(SEQUENTIAL_SLOT, offset);
            let latest = self.log_map.get(&lpn) == Some(&here);
            debug_assert!(!self.units.data.is_valid(logical_unit, offset), "FAST-1");
            if latest {
                self.log_map.remove(&lpn);
            }
            self.units.data.set_valid(logical_unit, offset, latest);
        }
        self.units.data.set_unit(logical_unit, log_unit);
        self.units.flash.erase(data_unit, ops);
        let stats = self.units.flash.stats_mut();
        if used == self.units.unit_pages {
            stats.switch_merges += 1;
        } else {
            stats.partial_merges += 1;
        }
        self.close_sequential();
    }

    fn close_sequential(&mut self) {
        self.sequential_owner = NONE;
        self.slot_unit[SEQUENTIAL_SLOT as usize] = NONE;
        self.used[SEQUENTIAL_SLOT as usize] = 0;
    }

    /// Full-merge every data block with a valid page in random slot
    /// `victim`, then erase it.
    fn reclaim(&mut self, victim: u32, ops: &mut Vec<FlashOp>) {
        for position in 0..self.used[victim as usize] {
            let log_page = self.log_page(victim, position);
            let lpn = self.reverse[log_page as usize];
            if self.log_map.get(&lpn) == Some(&log_page) {
                self.full_merge(units::split(lpn, self.units.unit_pages).0, ops);
            }
        }
        self.units.flash.erase(self.slot_unit[victim as usize], ops);
        self.slot_unit[victim as usize] = NONE;
        self.used[victim as usize] = 0;
    }

    /// Gather the latest version of every page of `logical_unit` into a
    /// fresh block; erase the old data block (and the sequential log block
    /// if it belonged to this data block, as it is then empty).
    fn full_merge(&mut self, logical_unit: u32, ops: &mut Vec<FlashOp>) {
        let Some(data_unit) = self.units.data.unit(logical_unit) else {
            return;
        };
        let Some(merge) = FullMerge::start(&mut self.units, logical_unit, data_unit) else {
            return;
        };
        for offset in 0..self.units.unit_pages {
            let in_log = self
                .log_map
                .remove(&self.lpn(logical_unit, offset))
                .map(|log_page| {
                    let (slot, position) = self.log_place(log_page);
                    (self.slot_unit[slot as usize], position)
                });
            merge.page(&mut self.units, offset, in_log, ops);
        }
        merge.finish(&mut self.units, ops);
        if self.sequential_owner == logical_unit {
            self.units
                .flash
                .erase(self.slot_unit[SEQUENTIAL_SLOT as usize], ops);
            self.close_sequential();
        }
        self.units.flash.stats_mut().full_merges += 1;
    }

    /// Check U-1, FAST-1 and FAST-3 over the whole map (tests only).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let in_use = self.slot_unit.iter().filter(|&&u| u != NONE).count() as u32;
        let sequential = u32::from(self.sequential_owner != NONE);
        assert_eq!(in_use, sequential + self.count, "FAST-3");
        let accounted = self.units.data.mapped() + in_use + self.units.flash.free_units();
        assert_eq!(accounted, self.units.flash.layout().units(), "U-1");
        for (&lpn, &log_page) in &self.log_map {
            let (logical_unit, offset) = units::split(lpn, self.units.unit_pages);
            assert!(!self.units.data.is_valid(logical_unit, offset), "FAST-1");
            assert_eq!(self.reverse[log_page as usize], lpn, "FAST-1");
            let (slot, position) = self.log_place(log_page);
            let unit = self.slot_unit[slot as usize];
            assert!(unit != NONE && self.units.flash.is_programmed(unit, position));
        }
    }
}
