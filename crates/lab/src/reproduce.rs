//! `flashlab reproduce`: run the experiments, write the report.
//!
//! The same seed and options give a byte-identical `results.json` (tested
//! below on a small experiment); host times go to `timings.json`.

use std::path::Path;
use std::time::Instant;

use crate::check::{Kind, tally};
use crate::experiments::{self, RunContext};
use crate::report::{ExperimentResult, ReportMeta, write_report};

/// Options of a reproduction run.
#[derive(Clone, Debug)]
pub struct ReproduceOptions {
    pub quick: bool,
    pub seed: u64,
    /// Run only these experiment ids (all when empty).
    pub only: Vec<String>,
}

/// What a run produced, for the CLI's summary.
#[derive(Clone, Debug)]
pub struct ReproduceSummary {
    pub experiments: usize,
    pub checks: usize,
    pub passed: usize,
    /// Prediction checks (workload results), and how many pass.
    pub predictions: usize,
    pub prediction_passed: usize,
    /// Calibration checks (presets against their sources), and how many pass.
    pub calibrations: usize,
    pub calibration_passed: usize,
    pub host_seconds: f64,
}

/// Run the experiments and write `index.html`, `results.json` and raw files
/// into `out`. `progress` receives one line per experiment.
pub fn reproduce(
    out: &Path,
    options: &ReproduceOptions,
    mut progress: impl FnMut(&str),
) -> Result<ReproduceSummary, String> {
    let known = experiments::ids();
    for id in &options.only {
        if !known.contains(&id.as_str()) {
            return Err(format!(
                "unknown experiment '{id}' (known: {})",
                known.join(", ")
            ));
        }
    }
    let started = Instant::now();
    let ctx = RunContext {
        quick: options.quick,
        seed: options.seed,
    };
    let selected: Vec<_> = experiments::registry()
        .into_iter()
        .filter(|e| options.only.is_empty() || options.only.iter().any(|id| id == e.id()))
        .collect();
    let mut results: Vec<ExperimentResult> = Vec::new();
    for (i, experiment) in selected.iter().enumerate() {
        progress(&format!(
            "[{}/{}] {}: {} ...",
            i + 1,
            selected.len(),
            experiment.id(),
            experiment.title()
        ));
        let t = Instant::now();
        let mut result = experiment
            .run(&ctx)
            .map_err(|e| format!("experiment '{}': {e}", experiment.id()))?;
        // The runner times every experiment, so none can leave it unset.
        result.host_seconds = t.elapsed().as_secs_f64();
        let (pp, pn) = tally(&result.checks, Kind::Prediction);
        let (cp, cn) = tally(&result.checks, Kind::Calibration);
        progress(&format!(
            "[{}/{}] {}: done in {:.1} s, predictions {pp}/{pn}, calibration {cp}/{cn} pass",
            i + 1,
            selected.len(),
            experiment.id(),
            t.elapsed().as_secs_f64(),
        ));
        results.push(result);
    }
    let meta = ReportMeta {
        seed: options.seed,
        quick: options.quick,
        version: env!("CARGO_PKG_VERSION").to_string(),
        host_seconds: started.elapsed().as_secs_f64(),
    };
    write_report(out, &meta, &results).map_err(|e| format!("{}: {e}", out.display()))?;
    let checks = results.iter().map(|r| r.checks.len()).sum();
    let passed = results
        .iter()
        .flat_map(|r| r.checks.iter())
        .filter(|c| c.pass)
        .count();
    let all = || results.iter().flat_map(|r| r.checks.iter());
    let (prediction_passed, predictions) = tally(all(), Kind::Prediction);
    let (calibration_passed, calibrations) = tally(all(), Kind::Calibration);
    Ok(ReproduceSummary {
        experiments: results.len(),
        checks,
        passed,
        predictions,
        prediction_passed,
        calibrations,
        calibration_passed,
        host_seconds: meta.host_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{Check, Form};

    fn check_from_json(v: &serde_json::Value) -> Check {
        let num = |x: &serde_json::Value| x.as_f64().unwrap_or(f64::NAN);
        let form = match v["form"].as_str().unwrap_or("") {
            "ratio" => Form::Ratio,
            "bound" => Form::Bound,
            "optimum" => Form::Optimum,
            _ => Form::Value,
        };
        let mut c = Check::value("", "", "", "", num(&v["published"]), num(&v["measured"]));
        c.id = v["id"].as_str().unwrap_or("").to_string();
        c.form = form;
        // JSON has no infinity: an open end of a bound is null.
        let end = |x: &serde_json::Value, open: f64| x.as_f64().unwrap_or(open);
        c.range = [
            end(&v["range"][0], f64::NEG_INFINITY),
            end(&v["range"][1], f64::INFINITY),
        ];
        c.pass = v["pass"].as_bool().unwrap_or(false);
        c
    }

    #[test]
    fn the_same_seed_gives_byte_identical_results_json() {
        let options = ReproduceOptions {
            quick: true,
            seed: 7,
            only: vec!["lee2008-figure6".into()],
        };
        let mut runs = Vec::new();
        for _ in 0..2 {
            let dir = tempfile::tempdir().unwrap();
            reproduce(dir.path(), &options, |_| {}).unwrap();
            let json = std::fs::read(dir.path().join("results.json")).unwrap();
            let timings: serde_json::Value =
                serde_json::from_slice(&std::fs::read(dir.path().join("timings.json")).unwrap())
                    .unwrap();
            assert!(timings["run.host_seconds"].is_number());
            let html = std::fs::metadata(dir.path().join("index.html"))
                .unwrap()
                .len();
            assert!(html < 5_000_000, "index.html is {html} bytes");
            let parsed: serde_json::Value = serde_json::from_slice(&json).unwrap();
            let checks: Vec<Check> = parsed["checks"]
                .as_array()
                .unwrap()
                .iter()
                .map(check_from_json)
                .collect();
            assert!(!checks.is_empty());
            for c in &checks {
                assert!(c.follows_rule(), "{} does not follow the rule", c.id);
            }
            runs.push(json);
        }
        assert!(!String::from_utf8_lossy(&runs[0]).contains("host_seconds"));
        assert!(
            runs[0] == runs[1],
            "results.json differs between two runs with seed 7"
        );
    }
}
