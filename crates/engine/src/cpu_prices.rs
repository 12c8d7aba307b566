//! # The CPU prices in force, shared by everything that does priced work
//!
//! The simulated world charges CPU time for the engine's own events
//! ([`crate::cpu_calibration::CpuCosts`]): a transaction's begin and commit, a
//! statement, a row a scan visits, a buffer page access, a page I/O
//! request and its kilobytes, and a kilobyte of log. The database, its
//! buffer pools and its log share one [`CpuPrices`], so a change of prices
//! (loading runs with none) reaches all of them at once.
//!
//! Statements and commits are charged as bursts of their own
//! (`Rt::cpu_current`). The finer events are owed (`Rt::cpu_owe_current`)
//! and ride on the task's next burst (CPU-3 in the runtime): a page access
//! inside a statement is paid with the statement. In the real world none
//! of this does anything: the real CPU does the work.
//!
//! Each price is an atomic, read without a lock, so readers on many cores
//! share its cache line instead of taking it from each other. A change
//! made while statements run may be seen field by field; prices change
//! only between runs.

use std::sync::atomic::{AtomicU64, Ordering};

use flashlab_runtime::Rt;

use crate::cpu_calibration::CpuCosts;

/// One priced event (an index into [`CpuPrices`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Price {
    Begin,
    Get,
    Put,
    ScanRow,
    Commit,
    PageAccess,
    PageIo,
    PageIoPerKb,
    LogPerKb,
}

/// How many prices there are.
const PRICES: usize = crate::cpu_calibration::CPU_PRICES;

/// The prices in force. See the module documentation.
#[derive(Debug)]
pub struct CpuPrices {
    fields: [AtomicU64; PRICES],
}

/// The prices in [`Price`]'s order (that of [`CpuCosts::named`]).
fn values(c: &CpuCosts) -> [u64; PRICES] {
    c.named().map(|(_, ns)| ns)
}

impl CpuPrices {
    pub fn new(costs: &CpuCosts) -> CpuPrices {
        let prices = CpuPrices {
            fields: Default::default(),
        };
        prices.set(costs);
        prices
    }

    /// Put `costs` in force.
    pub fn set(&self, costs: &CpuCosts) {
        for (field, value) in self.fields.iter().zip(values(costs)) {
            field.store(value, Ordering::Relaxed);
        }
    }

    /// The prices in force.
    pub fn get(&self) -> CpuCosts {
        CpuCosts::from_values(std::array::from_fn(|i| {
            self.fields[i].load(Ordering::Relaxed)
        }))
    }

    /// The price of one `event`, ns.
    #[inline]
    pub fn ns(&self, event: Price) -> u64 {
        self.fields[event as usize].load(Ordering::Relaxed)
    }

    /// Charge `n` of `event` now, as a burst of the calling task. A free
    /// event still settles the task's debt (CPU-3): the owed events of a
    /// statement are charged at its end whatever the statement's own price.
    pub fn charge(&self, event: Price, n: u64) {
        match self.ns(event).saturating_mul(n) {
            0 => Rt::cpu_settle_current(),
            ns => Rt::cpu_current(ns),
        }
    }

    /// Owe one buffer page access (a fix of a resident or loaded page).
    #[inline]
    pub fn owe_page_access(&self) {
        Rt::cpu_owe_current(self.ns(Price::PageAccess));
    }

    /// Owe one page I/O request of `bytes` to or from a data space.
    pub fn owe_page_io(&self, bytes: usize) {
        let per_kb = self.ns(Price::PageIoPerKb).saturating_mul(bytes as u64) / 1024;
        Rt::cpu_owe_current(self.ns(Price::PageIo).saturating_add(per_kb));
    }

    /// Owe `bytes` of log record appended.
    pub fn owe_log(&self, bytes: usize) {
        Rt::cpu_owe_current(self.ns(Price::LogPerKb).saturating_mul(bytes as u64) / 1024);
    }
}

impl Default for CpuPrices {
    /// No prices: a pool or log made outside a database charges nothing.
    fn default() -> Self {
        CpuPrices::new(&CpuCosts::free())
    }
}
