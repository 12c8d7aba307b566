//! `flashlab reproduce`: run the experiments, write the report.
//!
//! Each experiment is a unit of work: an independent simulation,
//! deterministic by seed. A unit's results are written when it ends
//! (`units/ID.json` and its raw files, each written beside and renamed
//! over) and `index.html` is rewritten after each, so a run stopped half
//! way keeps and shows what finished. `results.json` and `timings.json`
//! are written when every unit has finished. `--resume` reuses the records
//! of the same seed, options and binary; `--jobs N` runs N units at once;
//! [`merge`] assembles a report from units run anywhere.
//!
//! `results.json` is assembled from the records in report order, so the
//! same seed and options give the same bytes for any `--jobs`, with
//! `--resume`, or merged from units (tested below); host times go to
//! `timings.json`.

use anyhow::anyhow;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use crate::experiments::{self, Experiment, Progress, RunContext};
use crate::findings::{FindingResult, evaluate_all, outcomes};
use crate::report::{
    ReportMeta, UnitOrigin, UnitRecord, read_unit, unit_path, write_index, write_results,
    write_unit,
};

/// Options of a reproduction run.
#[derive(Clone, Debug)]
pub struct ReproduceOptions {
    pub quick: bool,
    pub seed: u64,
    /// Run only these experiment ids (all when empty).
    pub only: Vec<String>,
    /// Experiments run at once (at least 1).
    pub jobs: usize,
    /// Reuse the finished units in the output directory.
    pub resume: bool,
    /// The data scale against the papers, `--scale 1/N` (each experiment's
    /// default when `None`; see [`RunContext::scale`]).
    pub scale: Option<u32>,
}

/// What happens during a run, for the CLI's progress display.
#[derive(Clone, Debug)]
pub enum Event {
    /// The plan: units to run (with their expected host seconds, if
    /// known) and units reused from an earlier run.
    Planned {
        run: Vec<(String, Option<f64>)>,
        skipped: Vec<String>,
    },
    Started {
        id: String,
        title: String,
    },
    /// Configuration `done` of `total` of unit `id` finished.
    Step {
        id: String,
        done: usize,
        total: usize,
    },
    /// Unit `id` finished and its record is at `record`.
    Finished {
        id: String,
        seconds: f64,
        record: PathBuf,
    },
}

/// Where a run reports its [`Event`]s (from any thread).
pub type Events = Arc<dyn Fn(Event) + Send + Sync>;

/// What a run produced, for the CLI's summary.
#[derive(Clone, Debug, Default)]
pub struct ReproduceSummary {
    pub experiments: usize,
    /// Prediction checks (workload results), and how many pass.
    pub predictions: usize,
    pub prediction_passed: usize,
    /// Calibration checks (presets against their sources), and how many pass.
    pub calibrations: usize,
    pub calibration_passed: usize,
    /// Sanity assertions (counted in neither), and how many hold.
    pub sanity: usize,
    pub sanity_passed: usize,
    /// The papers' headline findings and their verdicts.
    pub findings: Vec<FindingResult>,
    /// Passing and total checks by paper.
    pub papers: BTreeMap<String, [usize; 2]>,
    /// Units reused by `--resume`.
    pub skipped: Vec<String>,
    pub host_seconds: f64,
}

impl ReproduceSummary {
    fn of(records: &[UnitRecord], skipped: Vec<String>, host_seconds: f64) -> ReproduceSummary {
        let mut s = ReproduceSummary {
            experiments: records.len(),
            skipped,
            host_seconds,
            findings: evaluate_all(&outcomes(records)),
            ..ReproduceSummary::default()
        };
        for r in records {
            s.prediction_passed += r.prediction[0];
            s.predictions += r.prediction[1];
            s.calibration_passed += r.calibration[0];
            s.calibrations += r.calibration[1];
            s.sanity_passed += r.sanity[0];
            s.sanity += r.sanity[1];
            for (paper, [pass, n]) in &r.papers {
                let entry = s.papers.entry(paper.clone()).or_default();
                entry[0] += pass;
                entry[1] += n;
            }
        }
        s
    }
}

/// The version and binary this process's units are recorded with.
pub fn origin(seed: u64, quick: bool, scale: Option<u32>) -> UnitOrigin {
    UnitOrigin {
        version: env!("CARGO_PKG_VERSION").to_string(),
        binary: binary_digest().to_string(),
        seed,
        quick,
        scale,
    }
}

/// A digest of the running executable, so a unit run by another build of
/// the same version is not taken for this one's.
fn binary_digest() -> &'static str {
    static DIGEST: OnceLock<String> = OnceLock::new();
    DIGEST.get_or_init(|| {
        use std::hash::Hasher;
        let bytes = std::env::current_exe().and_then(std::fs::read);
        let mut h = std::collections::hash_map::DefaultHasher::new();
        match bytes {
            Ok(b) => h.write(&b),
            Err(_) => h.write(b"unknown"),
        }
        format!("{:016x}", h.finish())
    })
}

/// Every unit with its title, in report order.
pub fn units() -> Vec<(&'static str, &'static str)> {
    experiments::registry()
        .iter()
        .map(|e| (e.id(), e.title()))
        .collect()
}

/// Host seconds each unit took with `--jobs 2` on the quiet 2-core
/// development machine (docs/REPRODUCE.md), full run and `--quick`: the
/// ETA when `--out` holds no earlier run, and the order units start in.
/// petrov2010 Figure 5 takes the study Table 4 ran.
const EXPECTED_SECONDS: [(&str, f64, f64); 14] = [
    ("devices", 109.8, 105.5),
    ("lee2008-table2", 2.0, 0.4),
    ("lee2008-table3", 1.5, 0.3),
    ("lee2008-figure3", 37.2, 2.1),
    ("lee2008-table4", 13.3, 1.2),
    ("lee2008-figure4", 5.2, 0.9),
    ("lee2008-figure6", 1.8, 0.3),
    ("lee2008-figure7", 67.7, 9.2),
    ("lee2008-figure8", 7.7, 1.2),
    ("petrov2010-table4", 381.4, 155.5),
    ("petrov2010-figure5", 0.0, 0.0),
    ("lee2007-disk-vs-flash", 68.6, 3.4),
    ("lee2007-ipl", 118.1, 13.4),
    ("wang2010-lfs", 43.8, 23.2),
];

/// Expected host seconds of unit `id`: its record or `timings.json` in
/// `out` from an earlier run of the same mode, else [`EXPECTED_SECONDS`].
pub fn expected_seconds(out: &Path, id: &str, quick: bool) -> Option<f64> {
    if let Ok(r) = read_unit(&unit_path(out, id))
        && r.quick == quick
    {
        return Some(r.host_seconds);
    }
    let read = |name: &str| -> Option<serde_json::Value> {
        serde_json::from_slice(&std::fs::read(out.join(name)).ok()?).ok()
    };
    if let (Some(results), Some(timings)) = (read("results.json"), read("timings.json"))
        && results["meta"]["quick"].as_bool() == Some(quick)
        && let Some(s) = timings[format!("{id}.host_seconds")].as_f64()
    {
        return Some(s);
    }
    EXPECTED_SECONDS
        .iter()
        .find(|(u, _, _)| *u == id)
        .map(|&(_, full, q)| if quick { q } else { full })
}

/// The experiments `only` names (all when empty), or a one-line error.
fn select(only: &[String]) -> anyhow::Result<Vec<Box<dyn Experiment>>> {
    let known = experiments::ids();
    if let Some(id) = only.iter().find(|id| !known.contains(&id.as_str())) {
        return Err(anyhow!(
            "unknown experiment '{id}' (known: {})",
            known.join(", ")
        ));
    }
    Ok(experiments::registry()
        .into_iter()
        .filter(|e| only.is_empty() || only.iter().any(|id| id == e.id()))
        .collect())
}

/// The record of `id` in `out` if `--resume` may reuse it: run by
/// `origin`, with its raw files present.
fn reusable(out: &Path, id: &str, origin: &UnitOrigin) -> Option<UnitRecord> {
    let record = read_unit(&unit_path(out, id)).ok()?;
    let complete = record.raw_files.iter().all(|f| out.join(f).is_file());
    (record.id == id && record.mismatch(origin).is_none() && complete).then_some(record)
}

/// The units finished so far, in report order, and what the run must
/// still write when one more finishes.
struct Finished<'a> {
    out: &'a Path,
    meta: ReportMeta,
    ids: Vec<String>,
    records: Vec<Option<UnitRecord>>,
}

impl Finished<'_> {
    fn done(&self) -> Vec<UnitRecord> {
        self.records.iter().flatten().cloned().collect()
    }

    /// Rewrite `index.html` with what has finished.
    fn write_index(&self) -> anyhow::Result<()> {
        let pending: Vec<String> = self
            .ids
            .iter()
            .zip(&self.records)
            .filter(|(_, r)| r.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        write_index(self.out, &self.meta, &self.done(), &pending)
            .map_err(|e| anyhow!("{}: {e}", self.out.display()))
    }
}

/// Run `experiment` and write its unit into `state`'s directory.
fn run_unit(
    experiment: &dyn Experiment,
    index: usize,
    options: &ReproduceOptions,
    state: &Mutex<Finished<'_>>,
    events: &Events,
) -> anyhow::Result<()> {
    let id = experiment.id().to_string();
    events(Event::Started {
        id: id.clone(),
        title: experiment.title().to_string(),
    });
    let step_events = events.clone();
    let step_id = id.clone();
    let ctx = RunContext {
        quick: options.quick,
        seed: options.seed,
        scale: options.scale,
        progress: Progress::to(move |done, total| {
            step_events(Event::Step {
                id: step_id.clone(),
                done,
                total,
            })
        }),
        // `--jobs 1` is one core throughout.
        threads: options.jobs.clamp(1, experiments::HOST_THREADS),
    };
    let t = Instant::now();
    let mut result = experiment
        .run(&ctx)
        .map_err(|e| anyhow!("experiment '{id}': {e}"))?;
    // The runner times every experiment, so none can leave it unset.
    result.host_seconds = t.elapsed().as_secs_f64();
    let record = UnitRecord::of(&origin(options.seed, options.quick, options.scale), &result)
        .map_err(|e| anyhow!("experiment '{id}': {e}"))?;
    let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
    let path = write_unit(state.out, &record, &result.raw_files)
        .map_err(|e| anyhow!("{}: {e}", state.out.display()))?;
    state.records[index] = Some(record);
    state.write_index()?;
    events(Event::Finished {
        id,
        seconds: result.host_seconds,
        record: path,
    });
    Ok(())
}

/// Run the units at `todo` (indexes into `selected`) on `jobs` threads;
/// the first error stops new units from starting and is returned.
fn run_units(
    selected: &[Box<dyn Experiment>],
    todo: &[usize],
    options: &ReproduceOptions,
    state: &Mutex<Finished<'_>>,
    events: &Events,
) -> anyhow::Result<()> {
    let next = AtomicUsize::new(0);
    let failed: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..options.jobs.clamp(1, todo.len().max(1)) {
            scope.spawn(|| {
                while failed.lock().map(|f| f.is_none()).unwrap_or(false) {
                    let Some(&i) = todo.get(next.fetch_add(1, Ordering::Relaxed)) else {
                        break;
                    };
                    if let Err(e) = run_unit(selected[i].as_ref(), i, options, state, events) {
                        failed
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert(e);
                    }
                }
            });
        }
    });
    match failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Run the experiments and write `index.html`, `results.json`,
/// `timings.json`, the unit records and raw files into `out`.
pub fn reproduce(
    out: &Path,
    options: &ReproduceOptions,
    events: Events,
) -> anyhow::Result<ReproduceSummary> {
    let selected = select(&options.only)?;
    let started = Instant::now();
    let origin = origin(options.seed, options.quick, options.scale);
    let ids: Vec<String> = selected.iter().map(|e| e.id().to_string()).collect();
    let records: Vec<Option<UnitRecord>> = ids
        .iter()
        .map(|id| options.resume.then(|| reusable(out, id, &origin)).flatten())
        .collect();
    let mut todo: Vec<usize> = (0..ids.len()).filter(|&i| records[i].is_none()).collect();
    // The longest first, so the last to finish is a short one.
    let cost = |i: usize| expected_seconds(out, &ids[i], options.quick).unwrap_or(0.0);
    todo.sort_by(|&a, &b| cost(b).total_cmp(&cost(a)).then(a.cmp(&b)));
    let skipped: Vec<String> = (0..ids.len())
        .filter(|&i| records[i].is_some())
        .map(|i| ids[i].clone())
        .collect();
    events(Event::Planned {
        run: todo
            .iter()
            .map(|&i| {
                (
                    ids[i].clone(),
                    expected_seconds(out, &ids[i], options.quick),
                )
            })
            .collect(),
        skipped: skipped.clone(),
    });
    let meta = |host_seconds| ReportMeta {
        seed: options.seed,
        quick: options.quick,
        version: origin.version.clone(),
        host_seconds,
    };
    let state = Mutex::new(Finished {
        out,
        meta: meta(0.0),
        ids,
        records,
    });
    state.lock().expect("state").write_index()?;
    run_units(&selected, &todo, options, &state, &events)?;
    let records = state.into_inner().expect("state").done();
    let meta = meta(started.elapsed().as_secs_f64());
    write_results(out, &meta, &records)
        .and_then(|()| write_index(out, &meta, &records, &[]))
        .map_err(|e| anyhow!("{}: {e}", out.display()))?;
    Ok(ReproduceSummary::of(&records, skipped, meta.host_seconds))
}

/// The unit records in `dir/units`, or a one-line error.
fn records_in(dir: &Path) -> anyhow::Result<Vec<(PathBuf, UnitRecord)>> {
    let units = dir.join("units");
    let entries = std::fs::read_dir(&units).map_err(|e| {
        anyhow!(
            "--merge {}: no finished units there ({e}); give directories written by reproduce --unit or reproduce",
            dir.display()
        )
    })?;
    let mut found = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| anyhow!("{}: {e}", units.display()))?
            .path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.ends_with(".json") && !name.starts_with('.') {
            let record = read_unit(&path)?;
            found.push((path, record));
        }
    }
    if found.is_empty() {
        return Err(anyhow!(
            "--merge {}: no finished units there",
            dir.display()
        ));
    }
    Ok(found)
}

/// Every record of `dirs`, checked: known units, each once, all of one
/// version, binary, seed and mode. In report order, with their directory.
fn merge_plan(dirs: &[PathBuf]) -> anyhow::Result<Vec<(PathBuf, UnitRecord)>> {
    let known = experiments::ids();
    let mut by_id: HashMap<String, (PathBuf, PathBuf, UnitRecord)> = HashMap::new();
    let mut first: Option<(PathBuf, UnitOrigin)> = None;
    for dir in dirs {
        for (path, record) in records_in(dir)? {
            if !known.contains(&record.id.as_str()) {
                return Err(anyhow!(
                    "--merge {}: unknown unit '{}'",
                    path.display(),
                    record.id
                ));
            }
            let (first_path, origin) = first.get_or_insert((path.clone(), record.origin()));
            if let Some(why) = record.mismatch(origin) {
                return Err(anyhow!(
                    "--merge {}: run with {why}, unlike {}; units of one report must share version, binary, seed and options",
                    path.display(),
                    first_path.display()
                ));
            }
            if let Some((other, _, _)) = by_id.get(&record.id) {
                return Err(anyhow!(
                    "--merge: unit '{}' is in both {} and {}",
                    record.id,
                    other.display(),
                    path.display()
                ));
            }
            by_id.insert(record.id.clone(), (path, dir.clone(), record));
        }
    }
    Ok(known
        .iter()
        .filter_map(|id| by_id.remove(*id))
        .map(|(_, dir, record)| (dir, record))
        .collect())
}

/// Assemble the report in `out` from the finished units in `dirs`.
/// Everything is read and checked before anything is written.
pub fn merge(dirs: &[PathBuf], out: &Path) -> anyhow::Result<ReproduceSummary> {
    let plan = merge_plan(dirs)?;
    let mut raw = Vec::new();
    for (dir, record) in &plan {
        let files = record
            .raw_files
            .iter()
            .map(|name| {
                let path = dir.join(name);
                std::fs::read(&path)
                    .map(|contents| crate::report::RawFile {
                        name: name.clone(),
                        contents,
                    })
                    .map_err(|e| anyhow!("--merge {}: {e}", path.display()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        raw.push(files);
    }
    let records: Vec<UnitRecord> = plan.into_iter().map(|(_, r)| r).collect();
    let origin = records[0].origin();
    let meta = ReportMeta {
        seed: origin.seed,
        quick: origin.quick,
        version: origin.version.clone(),
        host_seconds: records.iter().map(|r| r.host_seconds).sum(),
    };
    let io = |e: std::io::Error| anyhow!("{}: {e}", out.display());
    for (record, files) in records.iter().zip(&raw) {
        write_unit(out, record, files).map_err(io)?;
    }
    write_results(out, &meta, &records).map_err(io)?;
    write_index(out, &meta, &records, &[]).map_err(io)?;
    Ok(ReproduceSummary::of(
        &records,
        Vec::new(),
        meta.host_seconds,
    ))
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
            "optimum_range" => Form::OptimumRange,
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

    fn options(only: &[&str], jobs: usize) -> ReproduceOptions {
        ReproduceOptions {
            quick: true,
            seed: 7,
            only: only.iter().map(|s| s.to_string()).collect(),
            jobs,
            resume: false,
            scale: None,
        }
    }

    fn silent() -> Events {
        Arc::new(|_| {})
    }

    fn results(dir: &Path) -> Vec<u8> {
        std::fs::read(dir.join("results.json")).unwrap()
    }

    #[test]
    fn the_same_seed_gives_byte_identical_results_json() {
        let options = options(&["lee2008-figure6"], 1);
        let mut runs = Vec::new();
        for _ in 0..2 {
            let dir = tempfile::tempdir().unwrap();
            reproduce(dir.path(), &options, silent()).unwrap();
            let json = results(dir.path());
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

    /// Small experiments: a few seconds each in quick mode.
    const SMALL: [&str; 3] = ["lee2008-table3", "lee2008-figure6", "lee2008-table4"];

    #[test]
    fn jobs_merge_and_resume_give_the_bytes_of_one_sequential_run() {
        let one = tempfile::tempdir().unwrap();
        reproduce(one.path(), &options(&SMALL, 1), silent()).unwrap();
        let want = results(one.path());
        let two = tempfile::tempdir().unwrap();
        reproduce(two.path(), &options(&SMALL, 3), silent()).unwrap();
        assert!(
            results(two.path()) == want,
            "--jobs 3 differs from --jobs 1"
        );
        // Each unit alone, then merged.
        let shards: Vec<tempfile::TempDir> = SMALL
            .iter()
            .map(|id| {
                let dir = tempfile::tempdir().unwrap();
                reproduce(dir.path(), &options(&[id], 1), silent()).unwrap();
                dir
            })
            .collect();
        let merged = tempfile::tempdir().unwrap();
        let dirs: Vec<PathBuf> = shards.iter().rev().map(|d| d.path().into()).collect();
        merge(&dirs, merged.path()).unwrap();
        assert!(results(merged.path()) == want, "merged units differ");
        // A run stopped after its first unit, resumed: the first is reused.
        let resumed = tempfile::tempdir().unwrap();
        reproduce(resumed.path(), &options(&SMALL[..1], 1), silent()).unwrap();
        let mut again = options(&SMALL, 2);
        again.resume = true;
        let summary = reproduce(resumed.path(), &again, silent()).unwrap();
        assert_eq!(summary.skipped, vec![SMALL[0].to_string()]);
        assert!(results(resumed.path()) == want, "resumed run differs");
    }

    #[test]
    fn merge_refuses_mismatched_and_duplicate_units() {
        let a = tempfile::tempdir().unwrap();
        reproduce(a.path(), &options(&["lee2008-figure6"], 1), silent()).unwrap();
        let b = tempfile::tempdir().unwrap();
        let mut other = options(&["lee2008-table3"], 1);
        other.seed = 8;
        reproduce(b.path(), &other, silent()).unwrap();
        let out = tempfile::tempdir().unwrap();
        let dirs = [a.path().to_path_buf(), b.path().to_path_buf()];
        let err = merge(&dirs, out.path()).unwrap_err().to_string();
        assert!(err.contains("seed 8") && !err.contains('\n'), "{err}");
        let twice = [a.path().to_path_buf(), a.path().to_path_buf()];
        let err = merge(&twice, out.path()).unwrap_err().to_string();
        assert!(err.contains("is in both"), "{err}");
        assert!(!out.path().join("results.json").exists(), "nothing written");
    }
}
