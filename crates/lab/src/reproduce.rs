//! `flashlab reproduce`: run the experiments, write the report.

use std::path::Path;
use std::time::Instant;

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
        let result = experiment
            .run(&ctx)
            .map_err(|e| format!("experiment '{}': {e}", experiment.id()))?;
        let passed = result.checks.iter().filter(|c| c.pass).count();
        progress(&format!(
            "[{}/{}] {}: done in {:.1} s, {passed}/{} checks pass",
            i + 1,
            selected.len(),
            experiment.id(),
            t.elapsed().as_secs_f64(),
            result.checks.len()
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
    Ok(ReproduceSummary {
        experiments: results.len(),
        checks,
        passed,
        host_seconds: meta.host_seconds,
    })
}
