//! `flashlab calibrate`: the CPU model's cost ratios, measured and written
//! to one file.
//!
//! The CPU model is calibrated on one published point (lee2008 Table 2:
//! 294.7 us of CPU per update-commit transaction at 1.86 GHz, 147 us a
//! statement). Work that is not a statement (a scanned row, a sort's key
//! comparison, a tuple through a run, a KB copied, a key hashed) is priced
//! at what it costs flashlab's own engine *relative to one update-commit
//! transaction*, times those 294.7 us. [`calibrate`] measures those ratios
//! on this machine (`flashlab_engine::temp::calibrate::measure`, median of
//! several rounds of each price's ratio to the same round's
//! update-commit, real world, memory devices) and [`Calibration`] records
//! them with the prices they imply and the prices the engine uses
//! (`config::SCAN_ROW_NS`, `temp::OperatorCosts::default()`).
//!
//! The committed result is [`CALIBRATION_JSON`]
//! (`crates/lab/data/cpu-calibration.json`); the report prints it beside
//! the prices in use, so a reader can see whether they still agree, and
//! rerun it with `flashlab calibrate --out crates/lab/data/cpu-calibration.json`.

use flashlab_engine::config::{REFERENCE_CPU_GHZ, SCAN_ROW_NS, STATEMENT_NS};
use flashlab_engine::temp::OperatorCosts;
use flashlab_engine::temp::calibrate::{HostCosts, measure};
use serde::{Deserialize, Serialize};

/// The committed measurement the report cites.
pub const CALIBRATION_JSON: &str = include_str!("../data/cpu-calibration.json");
/// Where it lives in the repository.
pub const CALIBRATION_PATH: &str = "crates/lab/data/cpu-calibration.json";

/// One priced operation: its host cost, its ratio to an update-commit
/// transaction, the simulated price that implies, and the price in use.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Price {
    pub name: String,
    pub host_ns: f64,
    pub ratio_to_update_commit: f64,
    /// ratio x 2 x STATEMENT_NS, at 1.86 GHz.
    pub implied_ns: f64,
    /// What the engine charges now, at 1.86 GHz.
    pub in_use_ns: f64,
}

/// A calibration run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The command that wrote it.
    pub command: String,
    /// This machine's CPU, from /proc/cpuinfo (or "unknown").
    pub host_cpu: String,
    pub rounds: usize,
    pub tuples: u64,
    /// The calibrated update-commit transaction, ns of CPU at the
    /// reference clock.
    pub update_commit_reference_ns: f64,
    pub reference_ghz: f64,
    /// Host ns of an update-commit transaction (median).
    pub update_commit_host_ns: f64,
    pub prices: Vec<Price>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

fn host_cpu() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Measure `rounds` times on `tuples` records and take each price's median.
/// Runs the engine in the real world; `progress` gets a line per round.
pub fn calibrate(
    rounds: usize,
    tuples: u64,
    mut progress: impl FnMut(&str),
) -> Result<Calibration, String> {
    let rt = flashlab_runtime::RealRuntime::new(1);
    let _enter = flashlab_runtime::RealRuntime::enter(&rt);
    let mut runs: Vec<HostCosts> = Vec::new();
    for i in 0..rounds.max(1) {
        let c = measure(tuples).map_err(|e| e.to_string())?;
        progress(&format!(
            "round {}: update-commit {:.0} ns, scan row {:.0} ns, compare {:.2} ns, tuple {:.1} ns, copy {:.0} ns/KB, hash {:.1} ns",
            i + 1,
            c.update_commit_ns,
            c.scan_row_ns,
            c.compare_ns,
            c.tuple_ns,
            c.copy_ns_per_kb,
            c.hash_ns
        ));
        runs.push(c);
    }
    let m = |f: fn(&HostCosts) -> f64| median(runs.iter().map(f).collect());
    // Each round's ratio to its own update-commit (one session, one load on
    // the machine), then the median over rounds.
    let ratio =
        |f: fn(&HostCosts) -> f64| median(runs.iter().map(|c| f(c) / c.update_commit_ns).collect());
    let update_commit = m(|c| c.update_commit_ns);
    let reference = 2.0 * STATEMENT_NS as f64;
    let ops = OperatorCosts::default();
    let price = |name: &str, f: fn(&HostCosts) -> f64, in_use: f64| Price {
        name: name.into(),
        host_ns: m(f),
        ratio_to_update_commit: ratio(f),
        implied_ns: ratio(f) * reference,
        in_use_ns: in_use,
    };
    Ok(Calibration {
        command: format!("flashlab calibrate --rounds {rounds} --tuples {tuples}"),
        host_cpu: host_cpu(),
        rounds: runs.len(),
        tuples,
        update_commit_reference_ns: reference,
        reference_ghz: REFERENCE_CPU_GHZ,
        update_commit_host_ns: update_commit,
        prices: vec![
            price(
                "scan row (config::SCAN_ROW_NS)",
                |c| c.scan_row_ns,
                SCAN_ROW_NS as f64,
            ),
            price(
                "key comparison (OperatorCosts::compare_ns)",
                |c| c.compare_ns,
                ops.compare_ns,
            ),
            price(
                "tuple through a run (OperatorCosts::tuple_ns)",
                |c| c.tuple_ns,
                ops.tuple_ns,
            ),
            price(
                "KB copied (OperatorCosts::copy_ns_per_kb)",
                |c| c.copy_ns_per_kb,
                ops.copy_ns_per_kb,
            ),
            price(
                "key hashed (OperatorCosts::hash_ns)",
                |c| c.hash_ns,
                ops.hash_ns,
            ),
        ],
    })
}

/// The committed calibration, if it parses.
pub fn committed() -> Option<Calibration> {
    serde_json::from_str(CALIBRATION_JSON).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_calibration_parses_and_names_every_price() {
        let c = committed().expect("data/cpu-calibration.json parses");
        assert_eq!(c.prices.len(), 5);
        assert!(c.update_commit_host_ns > 0.0 && c.rounds > 0);
        for p in &c.prices {
            assert!(p.implied_ns > 0.0 && p.in_use_ns > 0.0, "{p:?}");
        }
    }
}
