//! # What the operators charge the simulated CPU
//!
//! The engine's CPU model is calibrated once, at the statement level (see
//! [`crate::config::CpuCosts`]): 147 us a statement at 1.86 GHz. A sort or a
//! join is one statement that touches millions of tuples, so its cost has to
//! come from its work, counted exactly: key comparisons (counted by the sort
//! and merge code as they happen), tuples moved, keys hashed and bytes
//! copied. [`OperatorCosts`] prices each.
//!
//! The prices follow the project's rule for work that is not a statement
//! (see `CpuCosts`): an operation costs what it costs flashlab's own code
//! relative to one update-commit transaction of flashlab's engine, times the
//! calibrated 294 us of an update-commit transaction at 1.86 GHz (two
//! statements of [`crate::config::STATEMENT_NS`]). The ratios are measured
//! by `flashlab calibrate` ([`super::calibrate::measure`]) and read from the
//! committed calibration file ([`crate::cpu_calibration`]): that is the one
//! calibration of the CPU model, not a per-experiment factor.
//!
//! The operator charges what it accumulated ([`CpuMeter::settle`]) before
//! each I/O it issues or waits for, so virtual time orders CPU work and I/O
//! as the real program does, and the simulated scheduler is entered about
//! once per cluster rather than once per tuple.

use flashlab_runtime::Rt;
use serde::{Deserialize, Serialize};

use crate::config::REFERENCE_CPU_GHZ;

/// Per-operation CPU prices at [`REFERENCE_CPU_GHZ`], in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct OperatorCosts {
    /// One key comparison (sort, merge, join), normalised keys.
    pub compare_ns: f64,
    /// Taking one tuple in or passing one on: bookkeeping, key extraction.
    pub tuple_ns: f64,
    /// Hashing one key and choosing its partition or bucket.
    pub hash_ns: f64,
    /// Copying one KB of tuple bytes (memcpy, CRC of clusters).
    pub copy_ns_per_kb: f64,
}

impl Default for OperatorCosts {
    /// The calibrated prices ([`crate::cpu_calibration::operator_costs`]).
    fn default() -> Self {
        crate::cpu_calibration::operator_costs()
    }
}

impl OperatorCosts {
    /// The same work on a CPU clocked at `ghz`.
    pub fn at_ghz(&self, ghz: f64) -> OperatorCosts {
        let s = REFERENCE_CPU_GHZ / ghz.max(0.01);
        OperatorCosts {
            compare_ns: self.compare_ns * s,
            tuple_ns: self.tuple_ns * s,
            hash_ns: self.hash_ns * s,
            copy_ns_per_kb: self.copy_ns_per_kb * s,
        }
    }

    /// No charges (tests that only care about results).
    pub fn free() -> OperatorCosts {
        OperatorCosts {
            compare_ns: 0.0,
            tuple_ns: 0.0,
            hash_ns: 0.0,
            copy_ns_per_kb: 0.0,
        }
    }
}

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
