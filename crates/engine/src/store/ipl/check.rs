//! The IPL store's whole-state check: the IPL-n invariants that its
//! in-memory state shows (the map, the free and deferred units, the force
//! sequence, each page's in-memory log). In debug builds in the simulated
//! world it runs after every call that changes the state, as `Wal::check`
//! and `BufferPool::check` do; what only the flash shows (IPL-2, 4, 6..9,
//! 14) is checked where it is written and read.

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use flashlab_runtime::{Rt, World};

use super::IplStore;

/// Whether a store opened now checks its whole state after every change:
/// debug builds in the simulated world (the real world would pay
/// O(units + pages) per change).
pub(super) fn checks_every_change() -> bool {
    cfg!(debug_assertions) && Rt::try_current().is_some_and(|rt| rt.world() == World::Simulated)
}

impl IplStore {
    /// Check the whole in-memory state; panics naming the invariant.
    pub fn check(&self) {
        self.check_units();
        self.check_sequence();
        self.check_page_logs();
    }

    /// [`IplStore::check`] where the store checks every change.
    pub(super) fn check_if_checking(&self) {
        if self.checking {
            self.check();
        }
    }

    /// IPL-5 and IPL-12: each logical unit lives in one physical data unit
    /// of its own; a free unit, or an old copy waiting for its force's
    /// marker, is no logical unit's. IPL-3: a unit's next log sector and
    /// fresh slots lie within its segment and slots.
    fn check_units(&self) {
        let l = self.layout;
        let data = l.data_units();
        let units = self.units.lock().expect("units").clone();
        assert!(
            units.is_empty() || units.len() == l.logical_units as usize,
            "IPL-5: {} of {} logical units mapped",
            units.len(),
            l.logical_units
        );
        let mut owner = HashSet::new();
        for (logical, st) in units.iter().enumerate() {
            assert!(
                data.contains(&st.phys) && owner.insert(st.phys),
                "IPL-5: logical unit {logical} in physical unit {}, outside the data units or shared",
                st.phys
            );
            assert!(
                st.log_next.is_none_or(|n| n <= l.segment_sectors()),
                "IPL-3: logical unit {logical}'s next log sector {:?} is past its segment",
                st.log_next
            );
            assert!(
                st.fresh_from.is_none_or(|s| s <= l.pages_per_unit),
                "IPL-5: logical unit {logical}'s fresh slots start past its slots"
            );
        }
        let free = self.free.lock().expect("free").clone();
        let deferred = self.deferred.lock().expect("deferred").clone();
        let spare = free.iter().map(|&(phys, _)| ("free", phys));
        for (what, phys) in spare.chain(deferred.iter().map(|&phys| ("deferred", phys))) {
            assert!(
                data.contains(&phys) && owner.insert(phys),
                "IPL-12: {what} physical unit {phys} is outside the data units, mapped, or listed twice"
            );
        }
    }

    /// IPL-11: the sequence numbers go on above every force seen: the
    /// marker's, the running force's and every unit's copy.
    fn check_sequence(&self) {
        let next = self.next_seq.load(Ordering::SeqCst);
        let now = self.seq_now.load(Ordering::SeqCst);
        let (marked, _) = *self.marked.lock().expect("marked");
        assert!(
            now < next && marked < next,
            "IPL-11: sequence now {now}, marked {marked}, not below the next {next}"
        );
        let units = self.units.lock().expect("units");
        if let Some((logical, st)) = units.iter().enumerate().find(|(_, st)| st.tag >= next) {
            panic!(
                "IPL-11: logical unit {logical}'s copy carries force {}, not below the next {next}",
                st.tag
            );
        }
        assert!(
            !self.restarting.load(Ordering::SeqCst) || self.commit_force,
            "IPL-13: restarting without redo although commits do not force"
        );
    }

    /// IPL-1: a page's in-memory records exist only while they account
    /// for the change since its flash version, and fit in a segment;
    /// IPL-SEL: with selection, each record has the bytes it replaced.
    fn check_page_logs(&self) {
        let capacity = self.layout.capacity_pages();
        let segment = self.layout.log_segment_bytes as usize;
        let pending = self.pending.lock().expect("pending");
        for (&page_no, p) in pending.iter() {
            assert!(
                u64::from(page_no) < capacity,
                "IPL-1: page {page_no} beyond the space"
            );
            assert!(
                !p.diverged || p.records.is_empty(),
                "IPL-1: page {page_no} diverged but keeps {} records",
                p.records.len()
            );
            assert!(
                p.diverged || p.bytes <= segment,
                "IPL-1: page {page_no} keeps {} bytes of records, over a segment",
                p.bytes
            );
            let undo = if self.selection { p.records.len() } else { 0 };
            assert_eq!(
                p.undo.len(),
                undo,
                "IPL-SEL: page {page_no}'s records and their before bytes disagree"
            );
        }
    }
}
