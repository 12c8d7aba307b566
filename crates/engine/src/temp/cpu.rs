//! # What the operators charge the simulated CPU
//!
//! The engine's CPU model prices the engine's own events (see
//! [`crate::config::CpuCosts`]). A sort or a join is one statement that
//! touches millions of tuples, so its cost has to come from its work,
//! counted exactly: key comparisons (counted by the sort and merge code as
//! they happen), tuples moved, keys hashed and bytes copied.
//! [`OperatorCosts`] prices each, as every other event is priced: what it
//! costs flashlab's own code, measured by `flashlab calibrate`
//! ([`super::calibrate::measure`]), times the system profile's scale, from
//! the committed calibration file ([`crate::cpu_calibration`]). That is
//! the CPU model's one calibration, not a per-experiment factor.
//!
//! The operator charges what it accumulated ([`CpuMeter::settle`]) before
//! each I/O it issues or waits for, so virtual time orders CPU work and I/O
//! as the real program does, and the simulated scheduler is entered about
//! once per cluster rather than once per tuple.

use flashlab_runtime::Rt;

pub use crate::cpu_calibration::OperatorCosts;

/// Accumulates an operator's CPU work and charges it in batches.
pub struct CpuMeter {
    costs: OperatorCosts,
    rt: Rt,
    pending_ns: f64,
    /// Everything charged so far.
    pub charged_ns: u64,
    /// Key comparisons counted so far.
    pub compares: u64,
}

impl CpuMeter {
    pub fn new(costs: OperatorCosts) -> CpuMeter {
        CpuMeter {
            costs,
            rt: Rt::current(),
            pending_ns: 0.0,
            charged_ns: 0,
            compares: 0,
        }
    }

    pub fn compares(&mut self, n: u64) {
        self.compares += n;
        self.pending_ns += n as f64 * self.costs.compare_ns;
    }

    pub fn tuples(&mut self, n: u64, bytes: u64) {
        self.pending_ns +=
            n as f64 * self.costs.tuple_ns + bytes as f64 / 1024.0 * self.costs.copy_ns_per_kb;
    }

    pub fn hashes(&mut self, n: u64) {
        self.pending_ns += n as f64 * self.costs.hash_ns;
    }

    /// Charge what has accumulated (call before I/O).
    pub fn settle(&mut self) {
        let ns = self.pending_ns as u64;
        if ns > 0 {
            self.rt.cpu(ns);
            self.charged_ns += ns;
            self.pending_ns -= ns as f64;
        }
    }
}
