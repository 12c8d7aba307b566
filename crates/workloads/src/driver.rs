//! Running clients against a database and measuring them.
//!
//! [`run`] spawns one task per client; each runs transactions back to back
//! until the run's end, retrying those chosen as a deadlock victim or failed
//! by a serialization error. After a warm-up, the driver measures: committed
//! transactions per second, latency percentiles (hdrhistogram,
//! microseconds), CPU utilization of the runtime's cores, and the log's
//! statistics (lee2008 Table 3). Every
//! `progress_interval_ns` it reports a pgbench `-P` style line, with the
//! workload's note if it has one. It tells the workload when the measured
//! interval begins and ends ([`Workload::measuring`]), for workloads that
//! measure per transaction type (TPC-C). It works in both worlds: in the
//! simulated one all times are virtual.

use std::sync::{Arc, Mutex};

use flashlab_engine::wal::LogStats;
use flashlab_engine::{Database, Result};
use flashlab_runtime::{CpuReport, NS_PER_S, Rt};
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::Workload;

/// Longest latency the histograms record (10 minutes, in microseconds).
const LATENCY_US_MAX: u64 = 600_000_000;
/// Most clients one run may have.
pub const CLIENTS_MAX: u32 = 4096;

/// How to run.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub clients: u32,
    /// Measured time, after the warm-up.
    pub duration_ns: u64,
    pub warmup_ns: u64,
    /// 0: no progress lines.
    pub progress_interval_ns: u64,
}

/// One progress line.
#[derive(Clone, Debug, Serialize)]
pub struct Progress {
    pub elapsed_s: f64,
    pub tps: f64,
    pub latency_ms_mean: f64,
    pub latency_ms_p99: f64,
    /// What the workload adds to the line (TPC-C: the interval's tpmC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Latency percentiles in milliseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

/// lee2008 Table 3's log columns.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LogSummary {
    pub writes: u64,
    pub commits_per_write: f64,
    pub avg_write_sectors: f64,
    pub avg_write_ms: f64,
    pub tail_rewrites: u64,
    /// Log bytes appended per commit, and the part that is full-page images.
    pub bytes_per_commit: f64,
    pub page_image_bytes_per_commit: f64,
    /// Times the log wrapped around its region, and appends it refused.
    pub wraps: u64,
    pub log_full: u64,
    /// Real-world flushers' waits for their group (WAL-13): how many, how
    /// many saw the expected group, and the mean wait in microseconds.
    pub group_waits: u64,
    pub group_waits_filled: u64,
    pub group_wait_us_mean: f64,
    /// Forces that emptied a full log buffer: made before a writer latched
    /// anything, and made under latches (WAL-15).
    pub room_forces: u64,
    pub latched_forces: u64,
}

impl LogSummary {
    pub fn from_stats(stats: &LogStats) -> LogSummary {
        let per_commit = |bytes: u64| bytes as f64 / stats.commits.max(1) as f64;
        LogSummary {
            writes: stats.writes,
            commits_per_write: stats.commits_per_write(),
            avg_write_sectors: stats.avg_write_sectors(),
            avg_write_ms: stats.avg_write_ms(),
            tail_rewrites: stats.tail_rewrites,
            bytes_per_commit: per_commit(stats.bytes_appended),
            page_image_bytes_per_commit: per_commit(stats.page_image_bytes),
            wraps: stats.wraps,
            log_full: stats.log_full,
            group_waits: stats.group_waits_filled + stats.group_waits_timed_out,
            group_waits_filled: stats.group_waits_filled,
            group_wait_us_mean: stats.group_wait_ns_total as f64
                / 1e3
                / (stats.group_waits_filled + stats.group_waits_timed_out).max(1) as f64,
            room_forces: stats.room_forces,
            latched_forces: stats.latched_forces,
        }
    }
}

/// What a run measured.
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    pub workload: String,
    pub clients: u32,
    pub committed: u64,
    /// Transactions retried after a retryable abort (deadlock victim or
    /// serialization error).
    pub retries: u64,
    pub measured_s: f64,
    pub tps: f64,
    pub latency_ms: Latency,
    pub cpu_utilization: f64,
    pub cpu_per_core: Vec<f64>,
    pub log: LogSummary,
    /// Every transaction committed, warm-up included (for consistency checks).
    pub committed_total: u64,
    pub progress: Vec<Progress>,
    /// The error that stopped the run early, if one did: a client's
    /// transaction failed in a way no retry mends (the database entered
    /// its failed state, a space is full). The run's other figures say how
    /// far it got: measured time is then the time until the failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

#[derive(Default)]
struct Shared {
    measuring: bool,
    committed: u64,
    committed_total: u64,
    retries: u64,
    histogram: Option<Histogram<u64>>,
    interval: Option<Histogram<u64>>,
    failure: Option<String>,
}

impl Shared {
    /// A committed transaction of `latency_us`.
    fn count_commit(&mut self, latency_us: u64) {
        self.committed_total += 1;
        if self.measuring {
            self.committed += 1;
            let latency_us = latency_us.min(LATENCY_US_MAX);
            for h in [self.histogram.as_mut(), self.interval.as_mut()]
                .into_iter()
                .flatten()
            {
                let _ = h.record(latency_us);
            }
        }
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_US_MAX, 3).expect("valid histogram bounds")
}

/// Told of every acknowledged transaction's id ([`Workload::transaction_acked`]);
/// an error (the id could not be recorded) stops the run as a client's
/// failure does.
pub type AckSink = Arc<dyn Fn(i64) -> std::result::Result<(), String> + Send + Sync>;

/// How often the real world's driver looks for a failed client while it
/// waits for the run's end (the simulated world looks at each progress
/// line, so that a run's events do not depend on it).
const FAILURE_POLL_NS: u64 = 50_000_000;

/// Run `config.clients` clients of `workload` on `db` (from a runtime task).
/// A client's failure is an error.
pub fn run(
    db: &Database,
    workload: Arc<dyn Workload>,
    config: &RunConfig,
    progress: impl FnMut(&Progress) + Send,
) -> Result<RunResult> {
    let result = run_with_acks(db, workload, config, None, progress);
    match result.failure {
        Some(failure) => Err(flashlab_engine::Error::Invalid(format!(
            "a client failed: {failure}"
        ))),
        None => Ok(result),
    }
}

/// [`run`], telling `acks` the id of every transaction acknowledged, right
/// after its commit returned. A client's failure stops every client and
/// ends the run at once; the result names it ([`RunResult::failure`]).
pub fn run_with_acks(
    db: &Database,
    workload: Arc<dyn Workload>,
    config: &RunConfig,
    acks: Option<AckSink>,
    mut progress: impl FnMut(&Progress) + Send,
) -> RunResult {
    let rt = Rt::current();
    let start_ns = rt.now_ns();
    let measure_ns = start_ns + config.warmup_ns;
    let end_ns = measure_ns + config.duration_ns;
    let shared = Arc::new(Mutex::new(Shared {
        histogram: Some(histogram()),
        interval: Some(histogram()),
        ..Shared::default()
    }));
    let clients: Vec<_> = (0..config.clients.clamp(1, CLIENTS_MAX))
        .map(|client| spawn_client(&rt, db, &workload, client, end_ns, &shared, &acks))
        .collect();
    sleep_unless_failed(&rt, measure_ns, &shared);
    workload.measuring(true);
    let (log_start, cpu_start) = begin_measuring(db, &rt, &shared);
    let progress_lines = report_progress(
        &rt,
        config,
        (measure_ns, end_ns),
        &shared,
        workload.as_ref(),
        &mut progress,
    );
    sleep_unless_failed(&rt, end_ns, &shared);
    let stopped_ns = rt.now_ns().clamp(measure_ns, end_ns);
    let log_end = db.wal().stats();
    let cpu_end = rt.cpu_report();
    shared.lock().expect("shared").measuring = false;
    workload.measuring(false);
    for client in clients {
        client.join();
    }
    let shared = shared.lock().expect("shared");
    let measured_s = (stopped_ns - measure_ns) as f64 / NS_PER_S as f64;
    let (utilization, per_core) = cpu_between(&cpu_start, &cpu_end);
    RunResult {
        workload: workload.name().to_string(),
        clients: config.clients,
        committed: shared.committed,
        retries: shared.retries,
        measured_s,
        tps: shared.committed as f64 / measured_s.max(1e-9),
        latency_ms: latency(shared.histogram.as_ref().expect("histogram")),
        cpu_utilization: utilization,
        cpu_per_core: per_core,
        log: LogSummary::from_stats(&log_end.since(&log_start)),
        committed_total: shared.committed_total,
        progress: progress_lines,
        failure: shared.failure.clone(),
    }
}

/// True once a client has failed.
fn failed(shared: &Mutex<Shared>) -> bool {
    shared.lock().expect("shared").failure.is_some()
}

/// Sleep until `deadline_ns`; in the real world, return early once a
/// client has failed.
fn sleep_unless_failed(rt: &Rt, deadline_ns: u64, shared: &Mutex<Shared>) {
    if rt.world() != flashlab_runtime::World::Real {
        if !failed(shared) {
            rt.sleep_until(deadline_ns);
        }
        return;
    }
    while !failed(shared) && rt.now_ns() < deadline_ns {
        rt.sleep_until(deadline_ns.min(rt.now_ns() + FAILURE_POLL_NS));
    }
}

fn spawn_client(
    rt: &Rt,
    db: &Database,
    workload: &Arc<dyn Workload>,
    client: u32,
    end_ns: u64,
    shared: &Arc<Mutex<Shared>>,
    acks: &Option<AckSink>,
) -> flashlab_runtime::JoinHandle<()> {
    let (db, workload, shared, task_rt, acks) = (
        db.clone(),
        workload.clone(),
        shared.clone(),
        rt.clone(),
        acks.clone(),
    );
    rt.spawn(&format!("client{client}"), move || {
        let mut rng = task_rt.fork_rng();
        // The client stops once any client failed: it learns so under the
        // lock it takes after each transaction anyway, so the check costs
        // the commit path nothing.
        while task_rt.now_ns() < end_ns {
            let started_ns = task_rt.now_ns();
            let outcome = match &acks {
                None => workload.transaction(&db, client, &mut rng).map(|()| None),
                Some(_) => workload.transaction_acked(&db, client, &mut rng),
            };
            let recorded = match (&acks, &outcome) {
                (Some(acks), Ok(Some(id))) => acks(*id),
                _ => Ok(()),
            };
            let latency_us = ((task_rt.now_ns() - started_ns) / 1_000).max(1);
            let mut s = shared.lock().expect("shared");
            match (outcome, recorded) {
                (Ok(_), Err(problem)) => {
                    s.failure.get_or_insert(problem);
                }
                (Ok(_), Ok(())) => s.count_commit(latency_us),
                (Err(e), _) if e.is_retryable() => s.retries += 1,
                (Err(e), _) => {
                    s.failure.get_or_insert(e.to_string());
                }
            }
            if s.failure.is_some() {
                return;
            }
        }
    })
}

fn begin_measuring(db: &Database, rt: &Rt, shared: &Arc<Mutex<Shared>>) -> (LogStats, CpuReport) {
    let mut s = shared.lock().expect("shared");
    s.measuring = true;
    s.committed = 0;
    if let Some(h) = s.interval.as_mut() {
        h.reset();
    }
    (db.wal().stats(), rt.cpu_report())
}

/// Emit a progress line every interval until the end; returns them all.
fn report_progress(
    rt: &Rt,
    config: &RunConfig,
    (measure_ns, end_ns): (u64, u64),
    shared: &Arc<Mutex<Shared>>,
    workload: &dyn Workload,
    progress: &mut impl FnMut(&Progress),
) -> Vec<Progress> {
    let mut lines = Vec::new();
    if config.progress_interval_ns == 0 {
        return lines;
    }
    let mut last_committed = 0;
    let mut tick_ns = measure_ns;
    while tick_ns + config.progress_interval_ns <= end_ns {
        tick_ns += config.progress_interval_ns;
        sleep_unless_failed(rt, tick_ns, shared);
        if failed(shared) {
            break;
        }
        let mut s = shared.lock().expect("shared");
        let committed = s.committed;
        let interval = s.interval.as_mut().expect("interval histogram");
        let line = Progress {
            elapsed_s: (tick_ns - measure_ns) as f64 / NS_PER_S as f64,
            tps: (committed - last_committed) as f64 * NS_PER_S as f64
                / config.progress_interval_ns as f64,
            latency_ms_mean: interval.mean() / 1e3,
            latency_ms_p99: interval.value_at_quantile(0.99) as f64 / 1e3,
            note: None,
        };
        interval.reset();
        last_committed = committed;
        drop(s);
        let line = Progress {
            note: workload.progress_note(config.progress_interval_ns),
            ..line
        };
        progress(&line);
        lines.push(line);
    }
    lines
}

fn latency(h: &Histogram<u64>) -> Latency {
    let ms = |us: u64| us as f64 / 1e3;
    Latency {
        p50: ms(h.value_at_quantile(0.50)),
        p95: ms(h.value_at_quantile(0.95)),
        p99: ms(h.value_at_quantile(0.99)),
        max: ms(h.max()),
        mean: h.mean() / 1e3,
    }
}

fn cpu_between(start: &CpuReport, end: &CpuReport) -> (f64, Vec<f64>) {
    let elapsed = end.elapsed_ns.saturating_sub(start.elapsed_ns).max(1) as f64;
    let per_core: Vec<f64> = end
        .core_busy_ns
        .iter()
        .zip(start.core_busy_ns.iter().chain(std::iter::repeat(&0)))
        .map(|(&e, &s)| (e.saturating_sub(s) as f64 / elapsed).min(1.0))
        .collect();
    let mean = per_core.iter().sum::<f64>() / per_core.len().max(1) as f64;
    (mean, per_core)
}
