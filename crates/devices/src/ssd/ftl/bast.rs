//! The BAST engine (Kim et al. 2002), shared by [`super::HybridFtl`] with
//! one-block units and by the super-block FTL with multi-block units.
//!
//! Every logical unit is block-mapped to a data unit whose pages sit at fixed
//! offsets. A write whose offset is still erased and above the data unit's
//! write pointer is programmed in place; any other write goes to the logical
//! unit's own *log unit*, appended in arrival order (page-mapped within it).
//! Log units are few (planned out of over-provisioning); when a logical unit
//! needs one and none is free, the least recently written log unit is merged:
//! - switch merge: the log holds every offset, written in order — it becomes
//!   the data unit and the old data unit is erased (no copies);
//! - partial merge: the log holds a prefix, written in order — the remaining
//!   valid pages are copied from the data unit into it, then switch;
//! - full merge: anything else — the latest version of every page is copied
//!   from log or data into a fresh unit, and both old units are erased.
//!
//! A logical unit whose own log is full merges it before its next log write.
//!
//! Invariants (BAST-n):
//! 1. A logical unit with a log unit has a data unit.
//! 2. The latest version of a page is in exactly one place: its owner's log
//!    (`latest` holds its position) or its data unit (validity bit set).
//! 3. `in_order` holds iff every log position so far holds its own offset.
//! 4. Log units in use + free slots = planned log units.

use crate::ssd::ftl::block::units::{self, FullMerge, MappedUnits, NONE};
use crate::ssd::ftl::{FlashOp, FtlStats};
use crate::ssd::geometry::Geometry;

/// Fewest log units BAST can run with.
pub(crate) const MIN_LOG_UNITS: u32 = 1;

/// An intrusive doubly-linked list over slot numbers, least recent first.
#[derive(Debug)]
struct SlotList {
    prev: Vec<u32>,
    next: Vec<u32>,
    head: u32,
    tail: u32,
}

impl SlotList {
    fn new(slots: u32) -> SlotList {
        SlotList {
            prev: vec![NONE; slots as usize],
            next: vec![NONE; slots as usize],
            head: NONE,
            tail: NONE,
        }
    }

    fn front(&self) -> Option<u32> {
        (self.head != NONE).then_some(self.head)
    }

    fn push_back(&mut self, slot: u32) {
        self.prev[slot as usize] = self.tail;
        self.next[slot as usize] = NONE;
        match self.tail {
            NONE => self.head = slot,
            tail => self.next[tail as usize] = slot,
        }
        self.tail = slot;
    }

    fn remove(&mut self, slot: u32) {
        let (prev, next) = (self.prev[slot as usize], self.next[slot as usize]);
        match prev {
            NONE => self.head = next,
            prev => self.next[prev as usize] = next,
        }
        match next {
            NONE => self.tail = prev,
            next => self.prev[next as usize] = prev,
        }
    }

    fn touch(&mut self, slot: u32) {
        if self.tail != slot {
            self.remove(slot);
            self.push_back(slot);
        }
    }
}

/// The log units and their page maps.
#[derive(Debug)]
struct LogSlots {
    /// Physical unit of each slot.
    unit: Vec<u32>,
    /// Logical unit owning each slot, or NONE if the slot is free.
    owner: Vec<u32>,
    /// Positions appended so far.
    used: Vec<u32>,
    /// BAST-3.
    in_order: Vec<bool>,
    /// `slot * unit_pages + offset` -> position of the latest version.
    latest: Vec<u32>,
    /// Slot of each logical unit, or NONE.
    slot_of: Vec<u32>,
    free: Vec<u32>,
    recency: SlotList,
}

impl LogSlots {
    fn new(slots: u32, logical_units: u32, unit_pages: u32) -> LogSlots {
        LogSlots {
            unit: vec![NONE; slots as usize],
            owner: vec![NONE; slots as usize],
            used: vec![0; slots as usize],
            in_order: vec![true; slots as usize],
            latest: vec![NONE; slots as usize * unit_pages as usize],
            slot_of: vec![NONE; logical_units as usize],
            free: (0..slots).rev().collect(),
            recency: SlotList::new(slots),
        }
    }

    fn slot_of(&self, logical_unit: u32) -> Option<u32> {
        let slot = *self.slot_of.get(logical_unit as usize)?;
        (slot != NONE).then_some(slot)
    }
}

/// What a merge found in a log unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MergeKind {
    Switch,
    Partial,
    Full,
}

/// BAST over units of any number of blocks. See the module docs.
#[derive(Debug)]
pub(crate) struct BastCore {
    units: MappedUnits,
    logs: LogSlots,
}

impl BastCore {
    /// BAST over units of `blocks_per_unit` blocks with `log_units` log
    /// units, clamped by [`units::plan`].
    pub(crate) fn new(geometry: &Geometry, blocks_per_unit: u32, log_units: u32) -> BastCore {
        let units = MappedUnits::new(geometry, blocks_per_unit, log_units, MIN_LOG_UNITS);
        BastCore {
            logs: LogSlots::new(
                units.plan.log_units,
                units.logical_units(),
                units.unit_pages,
            ),
            units,
        }
    }

    pub(crate) fn logical_pages(&self) -> u64 {
        self.units.plan.logical_pages
    }

    /// Log units after clamping.
    pub(crate) fn log_units(&self) -> u32 {
        self.units.plan.log_units
    }

    /// Erase units per unit after clamping.
    pub(crate) fn blocks_per_unit(&self) -> u32 {
        self.units.flash.layout().blocks_per_unit()
    }

    pub(crate) fn stats(&self) -> FtlStats {
        self.units.flash.stats().clone()
    }

    pub(crate) fn erase_counts(&self) -> &[u32] {
        self.units.flash.erase_counts()
    }

    fn latest_index(&self, slot: u32, offset: u32) -> usize {
        slot as usize * self.units.unit_pages as usize + offset as usize
    }

    fn log_position(&self, slot: u32, offset: u32) -> Option<u32> {
        let position = self.logs.latest[self.latest_index(slot, offset)];
        (position != NONE).then_some(position)
    }

    pub(crate) fn lookup(&self, lpn: u64) -> Option<u64> {
        if lpn >= self.units.plan.logical_pages {
            return None;
        }
        let (logical_unit, offset) = units::split(lpn, self.units.unit_pages);
        let data_unit = self.units.data.unit(logical_unit)?;
        let in_log = self
            .logs
            .slot_of(logical_unit)
            .and_then(|slot| Some((slot, self.log_position(slot, offset)?)));
        if let Some((slot, position)) = in_log {
            let unit = self.logs.unit[slot as usize];
            return Some(self.units.flash.layout().ppn(unit, position));
        }
        let valid = self.units.data.is_valid(logical_unit, offset);
        valid.then(|| self.units.flash.layout().ppn(data_unit, offset))
    }

    pub(crate) fn trim(&mut self, lpn: u64) {
        if lpn < self.units.plan.logical_pages {
            let (logical_unit, offset) = units::split(lpn, self.units.unit_pages);
            self.invalidate(logical_unit, offset);
        }
    }

    /// Forget the current version of a page, wherever it is (BAST-2).
    fn invalidate(&mut self, logical_unit: u32, offset: u32) {
        if let Some(slot) = self.logs.slot_of(logical_unit) {
            let index = self.latest_index(slot, offset);
            self.logs.latest[index] = NONE;
        }
        self.units.data.set_valid(logical_unit, offset, false);
    }

    pub(crate) fn write(&mut self, lpn: u64, ops: &mut Vec<FlashOp>) {
        let Some((logical_unit, offset, data_unit)) = self.units.begin_host_write(lpn) else {
            return;
        };
        if self.units.flash.in_order(data_unit, offset) {
            return self.write_in_place(logical_unit, offset, data_unit, ops);
        }
        let full_log = self
            .logs
            .slot_of(logical_unit)
            .filter(|&slot| self.logs.used[slot as usize] == self.units.unit_pages);
        if let Some(slot) = full_log {
            self.merge(slot, ops);
            let merged = self.units.data.unit(logical_unit);
            if let Some(unit) = merged.filter(|&unit| self.units.flash.in_order(unit, offset)) {
                return self.write_in_place(logical_unit, offset, unit, ops);
            }
        }
        let slot = match self.logs.slot_of(logical_unit) {
            Some(slot) => slot,
            None => match self.open_log(logical_unit, ops) {
                Some(slot) => slot,
                None => return,
            },
        };
        self.append(slot, logical_unit, offset, ops);
    }

    fn write_in_place(
        &mut self,
        logical_unit: u32,
        offset: u32,
        data_unit: u32,
        ops: &mut Vec<FlashOp>,
    ) {
        self.invalidate(logical_unit, offset);
        self.units.data.set_valid(logical_unit, offset, true);
        self.units.flash.program(data_unit, offset, ops);
    }

    /// Give `logical_unit` a log unit, merging the least recent log if none
    /// is free.
    fn open_log(&mut self, logical_unit: u32, ops: &mut Vec<FlashOp>) -> Option<u32> {
        if self.logs.free.is_empty() {
            let victim = self.logs.recency.front()?;
            self.merge(victim, ops);
        }
        let zone = self
            .units
            .data
            .unit(logical_unit)
            .map_or(0, |unit| self.units.flash.layout().zone(unit));
        let slot = *self.logs.free.last()?;
        let unit = self.units.flash.allocate(zone)?;
        self.logs.free.pop();
        let index = slot as usize;
        self.logs.unit[index] = unit;
        self.logs.owner[index] = logical_unit;
        self.logs.used[index] = 0;
        self.logs.in_order[index] = true;
        self.logs.slot_of[logical_unit as usize] = slot;
        self.logs.recency.push_back(slot);
        Some(slot)
    }

    fn append(&mut self, slot: u32, logical_unit: u32, offset: u32, ops: &mut Vec<FlashOp>) {
        debug_assert_eq!(self.logs.owner[slot as usize], logical_unit, "BAST-1");
        self.invalidate(logical_unit, offset);
        let index = slot as usize;
        let position = self.logs.used[index];
        self.logs.in_order[index] &= position == offset;
        self.logs.used[index] += 1;
        let latest = self.latest_index(slot, offset);
        self.logs.latest[latest] = position;
        self.logs.recency.touch(slot);
        self.units
            .flash
            .program(self.logs.unit[index], position, ops);
    }

    fn merge_kind(&self, slot: u32) -> MergeKind {
        let index = slot as usize;
        match (self.logs.in_order[index], self.logs.used[index]) {
            (true, used) if used == self.units.unit_pages => MergeKind::Switch,
            (true, _) => MergeKind::Partial,
            (false, _) => MergeKind::Full,
        }
    }

    /// Merge a log unit into its data unit and free its slot.
    fn merge(&mut self, slot: u32, ops: &mut Vec<FlashOp>) {
        let logical_unit = self.logs.owner[slot as usize];
        let data_unit = self.units.data.unit(logical_unit);
        debug_assert!(data_unit.is_some(), "BAST-1: log without data unit");
        let Some(data_unit) = data_unit else {
            return;
        };
        match self.merge_kind(slot) {
            MergeKind::Switch => self.switch_merge(slot, logical_unit, data_unit, ops),
            MergeKind::Partial => self.partial_merge(slot, logical_unit, data_unit, ops),
            MergeKind::Full => self.full_merge(slot, logical_unit, data_unit, ops),
        }
        self.release(slot, logical_unit);
    }

    /// Turn the log's latest positions into data validity bits, for a log
    /// written in order (position == offset) up to `used`.
    fn adopt_in_order_log(&mut self, slot: u32, logical_unit: u32) {
        for offset in 0..self.logs.used[slot as usize] {
            let in_log = self.log_position(slot, offset).is_some();
            debug_assert!(
                !(in_log && self.units.data.is_valid(logical_unit, offset)),
                "BAST-2"
            );
            self.units.data.set_valid(logical_unit, offset, in_log);
        }
    }

    fn switch_merge(
        &mut self,
        slot: u32,
        logical_unit: u32,
        data_unit: u32,
        ops: &mut Vec<FlashOp>,
    ) {
        self.adopt_in_order_log(slot, logical_unit);
        self.units
            .data
            .set_unit(logical_unit, self.logs.unit[slot as usize]);
        self.units.flash.erase(data_unit, ops);
        self.units.flash.stats_mut().switch_merges += 1;
    }

    fn partial_merge(
        &mut self,
        slot: u32,
        logical_unit: u32,
        data_unit: u32,
        ops: &mut Vec<FlashOp>,
    ) {
        let log_unit = self.logs.unit[slot as usize];
        for offset in self.logs.used[slot as usize]..self.units.unit_pages {
            if self.units.data.is_valid(logical_unit, offset) {
                self.units
                    .flash
                    .copy((data_unit, offset), (log_unit, offset), ops);
            }
        }
        self.adopt_in_order_log(slot, logical_unit);
        self.units.data.set_unit(logical_unit, log_unit);
        self.units.flash.erase(data_unit, ops);
        self.units.flash.stats_mut().partial_merges += 1;
    }

    fn full_merge(&mut self, slot: u32, logical_unit: u32, data_unit: u32, ops: &mut Vec<FlashOp>) {
        let Some(merge) = FullMerge::start(&mut self.units, logical_unit, data_unit) else {
            return;
        };
        let log_unit = self.logs.unit[slot as usize];
        for offset in 0..self.units.unit_pages {
            let in_log = self.log_position(slot, offset).map(|p| (log_unit, p));
            merge.page(&mut self.units, offset, in_log, ops);
        }
        merge.finish(&mut self.units, ops);
        self.units.flash.erase(log_unit, ops);
        self.units.flash.stats_mut().full_merges += 1;
    }

    fn release(&mut self, slot: u32, logical_unit: u32) {
        let start = self.latest_index(slot, 0);
        self.logs.latest[start..start + self.units.unit_pages as usize].fill(NONE);
        let index = slot as usize;
        self.logs.owner[index] = NONE;
        self.logs.unit[index] = NONE;
        self.logs.used[index] = 0;
        self.logs.slot_of[logical_unit as usize] = NONE;
        self.logs.recency.remove(slot);
        self.logs.free.push(slot);
    }

    /// Check U-1, BAST-1, BAST-2 and BAST-4 over the whole map (tests only:
    /// O(capacity)).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let in_use = self.logs.owner.iter().filter(|&&o| o != NONE).count() as u32;
        assert_eq!(
            in_use + self.logs.free.len() as u32,
            self.units.plan.log_units,
            "BAST-4"
        );
        let accounted = self.units.data.mapped() + in_use + self.units.flash.free_units();
        assert_eq!(accounted, self.units.flash.layout().units(), "U-1");
        for (logical_unit, &slot) in self.logs.slot_of.iter().enumerate() {
            let logical_unit = logical_unit as u32;
            if slot == NONE {
                continue;
            }
            assert!(self.units.data.unit(logical_unit).is_some(), "BAST-1");
            let unit = self.logs.unit[slot as usize];
            for offset in 0..self.units.unit_pages {
                if let Some(position) = self.log_position(slot, offset) {
                    assert!(!self.units.data.is_valid(logical_unit, offset), "BAST-2");
                    assert!(self.units.flash.is_programmed(unit, position), "BAST-2");
                }
            }
        }
        for logical_unit in 0..self.units.logical_units() {
            if let Some(unit) = self.units.data.unit(logical_unit) {
                for offset in 0..self.units.unit_pages {
                    if self.units.data.is_valid(logical_unit, offset) {
                        assert!(self.units.flash.is_programmed(unit, offset), "U-3");
                    }
                }
            }
        }
    }
}
