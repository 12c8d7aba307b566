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

/// How an experiment should run.
#[derive(Clone, Debug, Default)]
pub struct RunContext {
    /// Smaller runs for a quick look (`--quick`).
    pub quick: bool,
    pub seed: u64,
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

/// Every experiment, in report order.
pub fn registry() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(devices::DeviceCharacterization),
        Box::new(lee2008_log::Table2),
        Box::new(lee2008_log::Table3),
        Box::new(lee2008_log::Figure3),
        Box::new(lee2008_mvcc::Table4),
        Box::new(lee2008_mvcc::Figure4),
        Box::new(lee2008_temp::Figure6),
        Box::new(lee2008_temp::Figure7),
        Box::new(lee2008_temp::Figure8),
        Box::new(petrov2010::figures::Table4),
        Box::new(petrov2010::figures::Figure5),
        Box::new(lee2007_disk::DiskVsFlash),
        Box::new(lee2007::Ipl),
        Box::new(wang2010::LfsVsInPlace),
    ]
}

/// Identifiers of every experiment.
pub fn ids() -> Vec<&'static str> {
    registry().iter().map(|e| e.id()).collect()
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
