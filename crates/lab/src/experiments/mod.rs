//! The experiments `flashlab reproduce` runs.
//!
//! Each experiment regenerates one table or figure of a paper (or, for the
//! device characterization, the device-level figures the presets were
//! calibrated from) and returns an [`ExperimentResult`]: tables with the
//! measured value beside the published one, figures, and fidelity checks.
//! Experiments run in the simulated world unless they say otherwise, so the
//! same seed gives the same numbers.
//!
//! Adding an experiment: write it as a [`skeleton::Study`] (a `measure`
//! that runs the simulations, and small views of its result: tables,
//! checks, figures, notes, data, raw files), register it in [`registry`],
//! build its checks with
//! the constructors of [`crate::check`] (`Check::value`, `Check::ratio`,
//! `Check::at_least`, `Check::optimum`; they apply the report's one rule,
//! so an experiment never picks a range), mark a check `.fitted(..)` when a
//! parameter was set from that published row, declare its check ids in
//! [`check_ids::DECLARED`] (a run fails otherwise), and add or update its
//! rows in [`crate::coverage::COVERAGE`] (a test fails otherwise).

pub mod check_ids;
pub mod devices;
pub mod lee2007;
pub mod lee2007_disk;
pub mod lee2008_log;
pub mod lee2008_mvcc;
pub mod lee2008_temp;
pub mod petrov2010;
pub(crate) mod skeleton;
pub mod wang2010;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::report::ExperimentResult;
use skeleton::described;

/// How an experiment should run.
#[derive(Clone, Debug, Default)]
pub struct RunContext {
    /// Smaller runs for a quick look (`--quick`).
    pub quick: bool,
    pub seed: u64,
    /// The data scale against the paper, 1/`scale` (`--scale`), for the
    /// experiments that can run at more than one; `None`: each one's
    /// default. An experiment refuses a scale it cannot run at.
    pub scale: Option<u32>,
    /// Told each configuration the experiment finishes; it never changes
    /// what the experiment measures.
    pub progress: Progress,
    /// Host threads an experiment may run its independent configurations
    /// on (0 means [`HOST_THREADS`]); results do not depend on it.
    pub threads: usize,
}

impl RunContext {
    /// A context without progress reports.
    pub fn new(quick: bool, seed: u64) -> RunContext {
        RunContext {
            quick,
            seed,
            scale: None,
            progress: Progress::default(),
            threads: HOST_THREADS,
        }
    }

    /// A counter of `total` configurations, reported as each one ends.
    pub(crate) fn steps(&self, total: usize) -> Steps {
        self.progress.report(0, total);
        Steps {
            progress: self.progress.clone(),
            done: AtomicUsize::new(0),
            total,
        }
    }
}

/// Where an experiment reports "configuration `done` of `total`".
#[derive(Clone, Default)]
pub struct Progress(Option<Arc<dyn Fn(usize, usize) + Send + Sync>>);

impl Progress {
    /// Report to `f`.
    pub fn to(f: impl Fn(usize, usize) + Send + Sync + 'static) -> Progress {
        Progress(Some(Arc::new(f)))
    }

    fn report(&self, done: usize, total: usize) {
        if let Some(f) = &self.0 {
            f(done, total);
        }
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Progress(on)"
        } else {
            "Progress(off)"
        })
    }
}

/// Counts an experiment's finished configurations; ticked from any thread.
pub(crate) struct Steps {
    progress: Progress,
    done: AtomicUsize,
    total: usize,
}

impl Steps {
    /// One more configuration finished.
    pub(crate) fn tick(&self) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        self.progress.report(done.min(self.total), self.total);
    }

    /// Tick, and pass `value` on (for a configuration's result).
    pub(crate) fn after<T>(&self, value: T) -> T {
        self.tick();
        value
    }
}

/// One reproducible experiment.
pub trait Experiment: Send + Sync {
    /// Stable identifier, used by `--only`.
    fn id(&self) -> &'static str;
    /// What it reproduces, for progress lines.
    fn title(&self) -> &'static str;
    /// Run it.
    fn run(&self, ctx: &RunContext) -> anyhow::Result<ExperimentResult>;
}

/// Every experiment, in report order: the study, its id, title and paper.
#[rustfmt::skip]
pub fn registry() -> Vec<Box<dyn Experiment>> {
    vec![
        described(devices::DeviceCharacterization, "devices", "Device characterization of every preset", "lee2008 Table 1; petrov2010 Tables 1 and 3; lee2007's disk; wang2010 Figure 11"),
        described(lee2008_log::Table2, "lee2008-table2", "lee2008 Table 2: commit-time performance of update-commit", "lee2008 section 4.1, Table 2"),
        described(lee2008_log::Table3, "lee2008-table3", "lee2008 Table 3: TPC-B with 20 clients, and the log-write pattern", "lee2008 section 4.2, Table 3"),
        described(lee2008_log::Figure3, "lee2008-figure3", "lee2008 Figure 3: TPC-B, I/O-bound against CPU-bound", "lee2008 section 4.3, Figure 3"),
        described(lee2008_mvcc::Table4, "lee2008-table4", "lee2008 Table 4 and Figure 5: reading old versions from rollback segments", "lee2008 section 5.2, Table 4, Figure 5"),
        described(lee2008_mvcc::Figure4, "lee2008-figure4", "lee2008 Figure 4: rollback-segment writes", "lee2008 section 5.1, Figure 4"),
        described(lee2008_temp::Figure6, "lee2008-figure6", "lee2008 Figure 6: the I/O pattern of an external sort", "lee2008 section 6.1, Figure 6"),
        described(lee2008_temp::Figure7, "lee2008-figure7", "lee2008 Figure 7: external sort time against cluster size and memory", "lee2008 section 6.1, Figure 7"),
        described(lee2008_temp::Figure8, "lee2008-figure8", "lee2008 Figure 8: hash join and sort-merge join, disk against flash", "lee2008 section 6.2, Figure 8"),
        described(petrov2010::figures::Table4, "petrov2010-table4", "petrov2010 Figure 4, Tables 4 and 5: TPC-C with 4 KB and 16 KB pages on SSDs", petrov2010::figures::PAPER),
        described(petrov2010::figures::Figure5, "petrov2010-figure5", "petrov2010 Figure 5: NoTPM against CPUs and buffer size", petrov2010::figures::PAPER),
        described(lee2007_disk::DiskVsFlash, "lee2007-disk-vs-flash", "lee2007: disk-based DBMS performance, disk against flash", "lee2007"),
        described(lee2007::Ipl, "lee2007-ipl", "lee2007: In-Page Logging, log segment size vs merges and write performance vs buffer", "lee2007 slides: \"Log Segment Size vs Merges\", \"Estimated Write Performance\""),
        described(wang2010::LfsVsInPlace, "wang2010-lfs", "wang2010: log-structured against in-place, three SSDs", "wang2010"),
    ]
}

/// Identifiers of every experiment.
pub fn ids() -> Vec<&'static str> {
    registry().iter().map(|e| e.id()).collect()
}

/// Create the byte table `t` and load `rows` rows of `value_bytes` dots,
/// keyed by their number (8 bytes, big-endian: key order is number order),
/// `batch` rows a transaction.
pub(crate) fn load_dotted_table(
    db: &flashlab_engine::Database,
    rows: u64,
    batch: u64,
    value_bytes: usize,
) -> flashlab_engine::Result<flashlab_engine::Table> {
    let table = db.create_table(flashlab_engine::TableSpec::bytes("t"))?;
    let value = vec![b'.'; value_bytes];
    for start in (0..rows).step_by(batch as usize) {
        let mut txn = db.begin()?;
        for row in start..(start + batch).min(rows) {
            txn.put(&table, &row.to_be_bytes(), &value)?;
        }
        txn.commit()?;
    }
    Ok(table)
}

/// Host threads a study's independent simulations run on by default.
pub const HOST_THREADS: usize = 2;

/// Run `job` over `jobs` on `ctx.threads` threads; results in job order
/// (each simulation is deterministic on its own, so the order of running
/// does not change them).
pub(crate) fn run_parallel<J: Sync, R: Send>(
    ctx: &RunContext,
    jobs: &[J],
    job: impl Fn(&J) -> anyhow::Result<R> + Sync,
) -> anyhow::Result<Vec<R>> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<anyhow::Result<R>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        let threads = if ctx.threads == 0 {
            HOST_THREADS
        } else {
            ctx.threads
        };
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(j) = jobs.get(i) else { break };
                    let r = job(j);
                    results.lock().expect("results")[i] = Some(r);
                }
            });
        }
    });
    results
        .into_inner()
        .expect("results")
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}
