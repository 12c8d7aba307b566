//! Records logged but not yet installed in the buffer pool (WAL-6).
//!
//! A mini-transaction appends its record, then installs its pages, then
//! says so ([`super::Wal::installed`]). A checkpoint must not write pages
//! back until every record before its begin record is installed, and it
//! names the oldest one still pending, so it needs the set of uninstalled
//! records. Every writing mini-transaction adds one and removes one: four
//! times each in a TPC-B transaction, on every core.
//!
//! A map under the log's lock would make the removal a second acquisition
//! of the busiest lock in the engine per record, so the set is a table of
//! slots, each an atomic LSN (0: free). The append,
//! which holds the log's lock anyway, puts the record's LSN in the first
//! free slot from the one its LSN hashes to. The removal finds the slot
//! the same way and clears it with one store, under no lock; a checkpoint
//! reads every slot. In the rare case that every slot is taken (more
//! mini-transactions between append and install than there are slots),
//! the record goes to an overflow set under the log's lock instead, and
//! its removal takes that lock.
//!
//! Invariant (INS-1): a slot is set only under the log's lock, by the
//! append of the record it names, and cleared only by that record's
//! [`Installs::installed`]; a record with page changes is in exactly one
//! slot or in the overflow set from its append until its removal.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

/// Slots for uninstalled records: more than the tasks that can be between
/// an append and its install at once in any run the lab makes (4,096
/// clients and the background tasks), so the overflow set stays empty.
pub const INSTALL_SLOTS: usize = 8192;

/// The uninstalled records: slots, plus the overflow set the caller keeps
/// under the log's lock.
pub(super) struct Installs {
    slots: Box<[AtomicU64]>,
}

/// Where a removal found its record.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Removed {
    /// In a slot, now cleared.
    Slot,
    /// Not in a slot: the caller removes it from the overflow set if it is
    /// there (a compensation that changed no page was never registered).
    Elsewhere,
}

impl Installs {
    pub(super) fn new(slots: usize) -> Installs {
        assert!(slots > 0, "INS: at least one slot");
        Installs {
            slots: (0..slots).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The slot `lsn`'s search starts at (Fibonacci hashing: consecutive
    /// records land far apart, so their removals seldom share a line).
    fn home(&self, lsn: u64) -> usize {
        (lsn.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize % self.slots.len()
    }

    /// Register `lsn`, appended just now: under the log's lock, which also
    /// guards `overflow` (INS-1).
    pub(super) fn register(&self, lsn: u64, overflow: &mut BTreeSet<u64>) {
        assert!(lsn != 0, "INS-1: LSN 0 marks a free slot");
        let n = self.slots.len();
        let home = self.home(lsn);
        for i in 0..n {
            let slot = &self.slots[(home + i) % n];
            // Only this task, under the log's lock, sets a slot; a free
            // slot stays free until it does.
            if slot.load(Ordering::Relaxed) == 0 {
                slot.store(lsn, Ordering::Relaxed);
                return;
            }
        }
        overflow.insert(lsn);
    }

    /// Remove `lsn`, whose pages are installed, if it has a slot. Called by
    /// the task that appended it, without the log's lock: the store
    /// releases the installs to the checkpoint that reads the slot. A
    /// record in no slot (an overflow) costs a look at every slot.
    pub(super) fn installed(&self, lsn: u64) -> Removed {
        let n = self.slots.len();
        let home = self.home(lsn);
        // Usually the home slot; a record not in any slot is in the map.
        for i in 0..n {
            let slot = &self.slots[(home + i) % n];
            if slot.load(Ordering::Relaxed) == lsn {
                slot.store(0, Ordering::Release);
                return Removed::Slot;
            }
        }
        Removed::Elsewhere
    }

    /// The oldest registered record in a slot, if any (the caller adds the
    /// overflow set's).
    pub(super) fn oldest(&self) -> Option<u64> {
        self.slots
            .iter()
            .map(|slot| slot.load(Ordering::Acquire))
            .filter(|&lsn| lsn != 0)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `slots` slots with `lsns` registered in order, and the overflow set
    /// the ones that found no slot went to.
    fn registered(slots: usize, lsns: &[u64]) -> (Installs, BTreeSet<u64>) {
        let installs = Installs::new(slots);
        let mut overflow = BTreeSet::new();
        for &lsn in lsns {
            installs.register(lsn, &mut overflow);
        }
        (installs, overflow)
    }

    #[test]
    fn records_come_and_go_through_their_slots() {
        let (installs, overflow) = registered(64, &[4096, 4160, 8192]);
        assert!(overflow.is_empty());
        assert_eq!(installs.oldest(), Some(4096));
        assert_eq!(installs.installed(4096), Removed::Slot);
        assert_eq!(installs.oldest(), Some(4160));
        assert_eq!(installs.installed(8192), Removed::Slot);
        assert_eq!(installs.installed(4160), Removed::Slot);
        assert_eq!(installs.oldest(), None);
    }

    /// Linear probing with removal by clearing: a record placed past a
    /// slot that is freed later is still found.
    #[test]
    fn a_record_behind_a_freed_slot_is_found() {
        let lsns: Vec<u64> = (1..=4).collect();
        let (installs, overflow) = registered(4, &lsns);
        assert!(overflow.is_empty(), "4 records fit 4 slots");
        for &lsn in &lsns[..3] {
            assert_eq!(installs.installed(lsn), Removed::Slot);
        }
        assert_eq!(installs.oldest(), Some(4));
        assert_eq!(installs.installed(4), Removed::Slot);
        assert_eq!(installs.oldest(), None);
    }

    #[test]
    fn records_beyond_the_slots_overflow_and_come_back() {
        let (installs, mut overflow) = registered(2, &[10, 20, 30, 40]);
        assert_eq!(overflow.iter().copied().collect::<Vec<_>>(), vec![30, 40]);
        assert_eq!(installs.oldest(), Some(10));
        assert_eq!(installs.installed(10), Removed::Slot);
        assert_eq!(installs.installed(40), Removed::Elsewhere);
        overflow.remove(&40);
        // A freed slot takes the next record even while the map holds one.
        installs.register(50, &mut overflow);
        assert_eq!(overflow.len(), 1);
        assert_eq!(installs.installed(50), Removed::Slot);
        assert_eq!(installs.installed(30), Removed::Elsewhere);
    }

    #[test]
    fn a_record_never_registered_is_looked_for_elsewhere() {
        let (installs, _) = registered(8, &[5]);
        assert_eq!(installs.installed(77), Removed::Elsewhere);
        assert_eq!(
            installs.oldest(),
            Some(5),
            "another record's slot is untouched"
        );
    }
}
