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
//! them with the prices they imply.
//!
//! The committed result is [`CALIBRATION_JSON`]
//! (`crates/engine/data/cpu-calibration.json`), which the engine compiles
//! in and charges from (`flashlab_engine::cpu_calibration`); the report
//! prints it beside the prices in use. Rerun it with
//! `flashlab calibrate --out crates/engine/data/cpu-calibration.json` and
//! rebuild.

use flashlab_engine::config::{REFERENCE_CPU_GHZ, STATEMENT_NS};
pub use flashlab_engine::cpu_calibration::{
    CALIBRATION_JSON, CALIBRATION_PATH, Calibration, Price, PriceKey, committed,
};
use flashlab_engine::temp::calibrate::{HostCosts, measure};

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
    let price = |key: PriceKey, name: &str, f: fn(&HostCosts) -> f64| Price {
        key,
        name: name.into(),
        host_ns: m(f),
        ratio_to_update_commit: ratio(f),
        implied_ns: ratio(f) * reference,
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
            price(PriceKey::ScanRow, "scan row (CpuCosts::scan_row_ns)", |c| {
                c.scan_row_ns
            }),
            price(
                PriceKey::Compare,
                "key comparison (OperatorCosts::compare_ns)",
                |c| c.compare_ns,
            ),
            price(
                PriceKey::Tuple,
                "tuple through a run (OperatorCosts::tuple_ns)",
                |c| c.tuple_ns,
            ),
            price(
                PriceKey::CopyPerKb,
                "KB copied (OperatorCosts::copy_ns_per_kb)",
                |c| c.copy_ns_per_kb,
            ),
            price(PriceKey::Hash, "key hashed (OperatorCosts::hash_ns)", |c| {
                c.hash_ns
            }),
        ],
    })
}

/// The price the engine charges now for `key`, ns at the reference clock
/// (what the report sets beside the file's implied price: equal unless the
/// binary was built from another file).
pub fn in_use_ns(key: PriceKey) -> f64 {
    let ops = flashlab_engine::temp::OperatorCosts::default();
    match key {
        PriceKey::ScanRow => flashlab_engine::config::CpuCosts::default().scan_row_ns as f64,
        PriceKey::Compare => ops.compare_ns,
        PriceKey::Tuple => ops.tuple_ns,
        PriceKey::CopyPerKb => ops.copy_ns_per_kb,
        PriceKey::Hash => ops.hash_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_charges_the_prices_the_committed_file_implies() {
        let c = committed();
        for p in &c.prices {
            let off = in_use_ns(p.key) / p.implied_ns;
            assert!(
                (off - 1.0).abs() < 1e-3,
                "{:?}: in use / implied = {off}",
                p.key
            );
        }
    }
}
