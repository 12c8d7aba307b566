//! petrov2010: database page size for OLTP on SSDs (Tables 4 and 5,
//! Figures 4 and 5).
//!
//! The paper ran TPC-C (DBT2 on MySQL/InnoDB) on an array of 8 SSDs with
//! 4 KB and 16 KB pages, 640, 1280 and 2560 MB of buffer and 1, 2 and 4
//! CPUs. DBT2 keeps the specification's keying and think times, 10
//! terminals per warehouse and 20 database connections, so the only way
//! to load the system more is more warehouses: Figure 4 sweeps the active
//! warehouses of an 800-warehouse (100 GB) database, Table 4 is the
//! maximum NoTPM of each sweep, Table 5 the New-Order response time there,
//! and Figure 5 plots Table 4 against CPUs and buffer size.
//!
//! **The scaled study.** flashlab runs the same design at a hundredth of
//! the data ([`SCALE`]):
//! - each warehouse holds a tenth of the specification's rows (10,000
//!   items and stock rows, 300 customers per district), so row sizes,
//!   rows per page and NURand's skew over them keep their shape;
//! - a tenth of the warehouses run, each with its 10 terminals keying and
//!   thinking ten times faster, so the database sees the paper's load
//!   (one simulated warehouse stands for ten of the paper's);
//! - the buffer is a hundredth (6.4, 12.8, 25.6 MB), keeping its ratio to
//!   the data;
//! - DBT2's 20 connections are kept: terminals queue for one, and their
//!   response time includes the wait.
//!
//! One database per page size is loaded once ([`bench::load_image`]) and
//! every run starts from a copy of it on fresh device models, as the paper
//! ran each test on its loaded database. Log, data and rollback space are
//! each on an instance of the `ssd-array-2010` preset (calibrated from the
//! paper's Table 3); the paper's server had them on one array.
//!
//! **Maxima at saturation.** The paper raised the warehouses until NoTPM
//! stopped rising. Each cell's sweep here rises from 200 to 800 of the
//! paper's warehouses and, if NoTPM still rises, on past the database's
//! 800 (every warehouse active, its terminals keying and thinking faster in
//! proportion), until it has passed its peak on both sides
//! ([`swept_past_peak`]); a check of a maximum whose sweep did not misses.
//!
//! **CPU.** The CPU is the petrov2010 system profile
//! (`flashlab_engine::cpu_calibration`): the engine's own event prices
//! (statements, page accesses, page I/O, log bytes) times one scale, and
//! its price per KB of page I/O times a second (the byte work, such as
//! InnoDB's page checksum, that MySQL does on every page it moves),
//! fitted by `flashlab calibrate` to two published points, the 1-CPU,
//! 2560 MB maxima at 4 KB and 16 KB (those checks, and the page-size
//! advantage between them, are calibration). Everything else, the other
//! eight cells' page-size effect and every 2- and 4-CPU maximum included,
//! is a prediction.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde::Serialize;

use super::{RunContext, run_parallel};
use crate::bench::{BenchOptions, BenchReport, DbImage, bench, load_image};
use crate::check::Check;
use crate::published;
use flashlab_runtime::NS_PER_S;
use flashlab_workloads::tpcc::TpccOptions;

pub mod figures;

/// Data scale of the study against the paper, by default (see the module
/// essay).
pub const SCALE: u32 = 100;
/// The scales the study runs at (`reproduce --scale 1/N`): the default,
/// and a tenth, where each warehouse holds the specification's full rows.
pub const SCALES: [u32; 2] = [SCALE, 10];
/// The factor applied to the count of warehouses at every scale (with
/// think times divided by it); the rows of a warehouse are divided by the
/// rest of the scale ([`rows_divisor`]).
const WAREHOUSE_DIVISOR: u32 = 10;

/// The study's scale in `ctx`: 1/[`SCALE`] unless `--scale` names one of
/// [`SCALES`].
pub(crate) fn scale(ctx: &RunContext) -> anyhow::Result<u32> {
    match ctx.scale {
        None => Ok(SCALE),
        Some(n) if SCALES.contains(&n) => Ok(n),
        Some(n) => Err(anyhow::anyhow!(
            "petrov2010 runs at scale 1/100 or 1/10, not 1/{n}"
        )),
    }
}

/// The divisor of a warehouse's rows at scale 1/`scale`.
pub(crate) fn rows_divisor(scale: u32) -> u32 {
    scale / WAREHOUSE_DIVISOR
}
/// The paper's database: 800 warehouses.
pub(crate) const PAPER_WAREHOUSES: u32 = 800;
/// DBT2's database connections.
const CONNECTIONS: u32 = 20;
/// The clock the costs run at: the X4440's Opteron 8356.
pub const CPU_GHZ: f64 = 2.3;
/// The log's size: checkpoints recycle it, and it bounds the memory the
/// simulated log device holds (6.4 GB in the paper's units).
const LOG_BYTES: u64 = 64 << 20;
/// The CPU profile of the paper's server (`flashlab calibrate`).
pub const PROFILE: &str = "petrov2010";
/// The array preset (petrov2010 Table 3).
const DEVICE: &str = "ssd-array-2010";
pub const PAGE_BYTES: [usize; 2] = [4096, 16384];
pub const BUFFER_MB: [u64; 3] = [640, 1280, 2560];
pub const CPUS: [u32; 3] = [1, 2, 4];

/// How a cell's load is swept and each point run.
#[derive(Clone, Copy, Debug)]
struct Sweep {
    /// The loads swept first, in the paper's warehouses (each run uses a
    /// tenth as many), by the cell's CPUs (in [`CPUS`]' order).
    first: [&'static [u32]; CPUS.len()],
    /// Past the paper's 800 warehouses the load rises by this step, every
    /// warehouse active and its terminals thinking proportionally less
    /// (see [`options`]), until the sweep has passed its peak
    /// ([`swept_past_peak`]).
    step: u32,
    /// Points past the peak, none rising by [`RISE_MIN`], that end the
    /// sweep.
    past_peak_points: usize,
    /// Warm-up and measured time of each run (simulated).
    warmup_ns: u64,
    duration_ns: u64,
}

/// The full run's sweep: the linear rise, the knee and the paper's whole
/// database, then steps of 400 warehouses; 10 s of warm-up, 20 s measured.
///
/// At saturation a terminal's cycle (keying, response, think) lasts 5 to
/// 6 s, and every terminal starts its first keying at once. A warm-up of
/// two cycles lets the queues form and the terminals drift apart, and a
/// measurement of three or more cycles counts each transaction type in
/// its drawn share: shorter windows count too few of the long Delivery and
/// Stock-Level transactions, and so too little CPU per New-Order.
const FULL: Sweep = Sweep {
    first: [&[200, 400, 600, 800]; CPUS.len()],
    step: 400,
    past_peak_points: 2,
    warmup_ns: 10 * NS_PER_S,
    duration_ns: 20 * NS_PER_S,
};

/// `--quick`'s sweep: two first loads a cell, placed where each CPU count
/// saturates (a CPU of the profile is busy at about 400 of the paper's
/// warehouses), steps twice as long, one flat point past the peak, and
/// 6 s of warm-up and 6 s measured, about one terminal cycle each. The
/// rule still holds: the sweep goes past its peak on both sides, below its
/// first load if it must. The windows are too short to count every
/// transaction type in its share (see [`FULL`]) and the maxima lie on a
/// coarser grid, so its verdicts are indicative (the full run is the
/// reference).
const QUICK: Sweep = Sweep {
    first: [&[400, 800], &[800, 1600], &[1600, 3200]],
    step: 800,
    past_peak_points: 1,
    warmup_ns: 6 * NS_PER_S,
    duration_ns: 6 * NS_PER_S,
};

fn sweep(ctx: &RunContext) -> &'static Sweep {
    if ctx.quick { &QUICK } else { &FULL }
}
/// The load below the first point, swept when the peak lies there.
const SWEEP_LOW: u32 = 100;
/// The most load offered: five times the paper's database.
const SWEEP_MAX: u32 = 4000;
/// A point counts as a rise only when it beats the best before it by this
/// much (a run's own noise is about a percent).
const RISE_MIN: f64 = 0.02;
/// The cell whose maximum petrov2010's CPU profile is fitted to
/// (`flashlab calibrate`), and its calibration check.
pub(crate) const FITTED_CELL: Cell = Cell {
    page_bytes: 4096,
    buffer_mb: 2560,
    cpus: 1,
};
pub(crate) const FITTED_CHECK: &str = "petrov2010.table4.notpm.4k.2560mb.1cpu";
/// The cell the profile's page-KB price is fitted to, and its check.
pub(crate) const FITTED_CELL_16K: Cell = Cell {
    page_bytes: 16384,
    buffer_mb: 2560,
    cpus: 1,
};
pub(crate) const FITTED_CHECK_16K: &str = "petrov2010.table4.notpm.16k.2560mb.1cpu";
/// The page-size advantage whose two cells are both fitted: calibration.
pub(crate) const FITTED_ADVANTAGE: &str = "petrov2010.table4.advantage_4k_over_16k.2560mb.1cpu";
/// The load of the fit's counting run.
pub(crate) const FIT_LOAD: u32 = 400;

/// One cell of Table 4: page size, buffer and CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Cell {
    pub page_bytes: usize,
    pub buffer_mb: u64,
    pub cpus: u32,
}

/// One point of Figure 4.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub cell: Cell,
    /// In the paper's warehouses (the run used a tenth).
    pub warehouses: u32,
    pub notpm: f64,
    pub new_order_mean_s: f64,
    pub cpu_utilization: f64,
    /// Buffer fetches that found their page resident, over all fetches
    /// (the warm-up's included).
    pub buffer_hit_ratio: f64,
    pub consistency: String,
}

/// Every run of the study.
#[derive(Debug, Serialize)]
pub struct Study {
    pub points: Vec<Point>,
    /// Host and virtual seconds of the two loads.
    pub load_host_seconds: f64,
    pub load_seconds: f64,
}

impl Study {
    /// The sweep of one cell, in warehouse order.
    pub fn curve(&self, cell: Cell) -> Vec<&Point> {
        self.points.iter().filter(|p| p.cell == cell).collect()
    }

    /// Whether the sweep of `cell` passed its peak on both sides.
    pub fn past_peak(&self, cell: Cell) -> bool {
        let curve: Vec<(u32, f64)> = self
            .curve(cell)
            .iter()
            .map(|p| (p.warehouses, p.notpm))
            .collect();
        swept_past_peak(&curve)
    }

    /// Table 4's maximum (and the point it was reached at).
    pub fn best(&self, cell: Cell) -> &Point {
        self.curve(cell)
            .into_iter()
            .max_by(|a, b| a.notpm.total_cmp(&b.notpm))
            .expect("every cell has a sweep")
    }
}

pub fn cells() -> Vec<Cell> {
    let mut out = Vec::new();
    for page_bytes in PAGE_BYTES {
        for buffer_mb in BUFFER_MB {
            for cpus in CPUS {
                out.push(Cell {
                    page_bytes,
                    buffer_mb,
                    cpus,
                });
            }
        }
    }
    out
}

fn tpcc_options(ctx: &RunContext) -> TpccOptions {
    let rows = rows_divisor(scale(ctx).unwrap_or(SCALE));
    TpccOptions {
        warehouses: PAPER_WAREHOUSES / WAREHOUSE_DIVISOR,
        items: flashlab_workloads::tpcc::ITEMS / rows,
        customers_per_district: flashlab_workloads::tpcc::CUSTOMERS_PER_DISTRICT / rows,
        think: true,
        think_divisor: f64::from(WAREHOUSE_DIVISOR),
        connections: CONNECTIONS,
        seed: ctx.seed,
        ..TpccOptions::default()
    }
}

/// The run of `cell` at the load of `warehouses` of the paper's. Up to the
/// paper's 800, a tenth as many warehouses are active; past it, all 80 are,
/// and their terminals key and think faster in proportion, offering the
/// load of `warehouses`.
pub(crate) fn options(
    ctx: &RunContext,
    cell: Cell,
    warehouses: u32,
    image: Option<Arc<DbImage>>,
) -> BenchOptions {
    let active = warehouses.min(PAPER_WAREHOUSES) / WAREHOUSE_DIVISOR;
    let think_divisor = f64::from(WAREHOUSE_DIVISOR) * f64::from(warehouses.max(PAPER_WAREHOUSES))
        / f64::from(PAPER_WAREHOUSES);
    let cpu_costs = flashlab_engine::cpu_calibration::profile(PROFILE).map(|p| p.costs_at(CPU_GHZ));
    BenchOptions {
        workload: "tpcc".into(),
        clients: active * flashlab_workloads::tpcc::TERMINALS_PER_WAREHOUSE,
        cores: cell.cpus,
        cpu_ghz: CPU_GHZ,
        cpu_costs,
        duration_ns: sweep(ctx).duration_ns,
        warmup_ns: sweep(ctx).warmup_ns,
        log_device: DEVICE.into(),
        data_device: DEVICE.into(),
        rollback_device: DEVICE.into(),
        tpcc: TpccOptions {
            active_warehouses: active,
            think_divisor,
            ..tpcc_options(ctx)
        },
        page_bytes: cell.page_bytes,
        buffer_bytes: (cell.buffer_mb << 20) / u64::from(scale(ctx).unwrap_or(SCALE)),
        seed: ctx.seed,
        progress_interval_ns: 0,
        log_bytes: Some(LOG_BYTES),
        image,
        ..BenchOptions::default()
    }
}

fn point(cell: Cell, warehouses: u32, report: &BenchReport) -> Point {
    let tpcc = report.tpcc.as_ref();
    Point {
        cell,
        warehouses,
        notpm: tpcc.map_or(0.0, |t| t.tpmc),
        new_order_mean_s: tpcc
            .and_then(|t| t.transactions.first())
            .map_or(f64::NAN, |t| t.latency_ms.mean / 1e3),
        cpu_utilization: report.cpu_utilization,
        buffer_hit_ratio: {
            let b = &report.buffer;
            b.hits as f64 / (b.hits + b.misses).max(1) as f64
        },
        consistency: report.consistency.clone(),
    }
}

/// The studies already run, by seed, quick mode and scale.
type StudyCache = Mutex<HashMap<(u64, bool, u32), Arc<Study>>>;

/// Run the study, or return the one already run with this context.
pub fn study(ctx: &RunContext) -> anyhow::Result<Arc<Study>> {
    static DONE: OnceLock<StudyCache> = OnceLock::new();
    let done = DONE.get_or_init(|| Mutex::new(HashMap::new()));
    // Table 4 and Figure 5 may ask at once (`--jobs`): one runs the study,
    // the other waits for it.
    static RUNNING: Mutex<()> = Mutex::new(());
    let _running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
    let key = (ctx.seed, ctx.quick, scale(ctx)?);
    if let Some(study) = done.lock().expect("study cache").get(&key) {
        return Ok(study.clone());
    }
    let study = Arc::new(run_study(ctx)?);
    done.lock().expect("study cache").insert(key, study.clone());
    Ok(study)
}

fn run_study(ctx: &RunContext) -> anyhow::Result<Study> {
    // The sweeps' lengths are found as they run: the total is a forecast.
    let steps = ctx.steps(
        PAGE_BYTES.len()
            + cells().len() * (sweep(ctx).first[0].len() + sweep(ctx).past_peak_points),
    );
    let loaded = run_parallel(ctx, &PAGE_BYTES, |&page_bytes| {
        let cell = Cell {
            page_bytes,
            buffer_mb: BUFFER_MB[0],
            cpus: CPUS[0],
        };
        let image = load_image(&options(ctx, cell, PAPER_WAREHOUSES, None));
        steps.tick();
        image
    })?;
    let load_host_seconds = loaded.iter().map(|i| i.load_host_seconds).sum();
    let load_seconds = loaded.iter().map(|i| i.load_seconds).sum();
    let images: HashMap<usize, Arc<DbImage>> = PAGE_BYTES.into_iter().zip(loaded).collect();
    let curves = run_parallel(ctx, &cells(), |&cell| {
        let image = &images[&cell.page_bytes];
        let mut curve: Vec<Point> = Vec::new();
        while let Some(warehouses) = next_load(&loads(&curve), sweep(ctx), cell.cpus) {
            let report = bench(&options(ctx, cell, warehouses, Some(image.clone())), |_| {})?;
            steps.tick();
            curve.push(point(cell, warehouses, &report));
            curve.sort_by_key(|p| p.warehouses);
        }
        Ok(curve)
    })?;
    Ok(Study {
        points: curves.into_iter().flatten().collect(),
        load_host_seconds,
        load_seconds,
    })
}

fn loads(curve: &[Point]) -> Vec<(u32, f64)> {
    curve.iter().map(|p| (p.warehouses, p.notpm)).collect()
}

/// The position of the largest NoTPM of `curve` (the first, on a tie).
fn peak(curve: &[(u32, f64)]) -> Option<usize> {
    (0..curve.len()).reduce(|best, i| if curve[i].1 > curve[best].1 { i } else { best })
}

/// Whether `curve` (in load order) has a point on each side of its peak,
/// so its maximum is a maximum and not the end of the sweep.
pub fn swept_past_peak(curve: &[(u32, f64)]) -> bool {
    peak(curve).is_some_and(|i| i > 0 && i + 1 < curve.len())
}

/// The next load to run after `curve` (in load order), or `None` when the
/// sweep is done: it has passed its peak on both sides and its last
/// `past_peak_points` loads each failed to beat the best before them by
/// [`RISE_MIN`], or it reached [`SWEEP_MAX`]. `cpus` picks the first loads.
fn next_load(curve: &[(u32, f64)], sweep: &Sweep, cpus: u32) -> Option<u32> {
    let by_cpus = CPUS.iter().position(|&n| n == cpus).unwrap_or(0);
    if let Some(&first) = sweep.first[by_cpus].get(curve.len()) {
        return Some(first);
    }
    let top = peak(curve)?;
    if top == 0 && curve[0].0 > SWEEP_LOW {
        return Some(SWEEP_LOW);
    }
    let flat = curve
        .iter()
        .enumerate()
        .skip(1)
        .filter(|&(i, p)| {
            let before = curve[..i].iter().map(|q| q.1).fold(f64::MIN, f64::max);
            p.1 > before * (1.0 + RISE_MIN)
        })
        .map(|(i, _)| curve.len() - 1 - i)
        .next_back()
        .unwrap_or(curve.len() - 1);
    let last = curve.last()?.0;
    if (flat >= sweep.past_peak_points && swept_past_peak(curve)) || last >= SWEEP_MAX {
        return None;
    }
    Some((last + sweep.step).min(SWEEP_MAX))
}

/// Published Table 4 (NoTPM) or Table 5 (seconds) for a cell.
pub fn published(table: &str, cell: Cell) -> f64 {
    let column = if cell.page_bytes == 4096 {
        "page_4k"
    } else {
        "page_16k"
    };
    let b = BUFFER_MB
        .iter()
        .position(|&m| m == cell.buffer_mb)
        .expect("a study buffer");
    let c = CPUS
        .iter()
        .position(|&n| n == cell.cpus)
        .expect("a study CPU count");
    let value = published::value(&format!("petrov2010.{table}.{column}"))
        .and_then(|v| v.as_array()?.get(b)?.as_array()?.get(c).cloned());
    match value {
        Some(toml::Value::Integer(i)) => i as f64,
        Some(toml::Value::Float(f)) => f,
        _ => f64::NAN,
    }
}

const CHECK_PAPER: &str = "petrov2010 Tables 4-5, Figures 4-5";

/// A published value under the report's rule.
pub fn check(id: &str, what: &str, unit: &str, published: f64, measured: f64) -> Check {
    Check::value(
        &format!("petrov2010.{id}"),
        CHECK_PAPER,
        what,
        unit,
        published,
        measured,
    )
}

/// A published ratio under the report's rule.
pub fn check_ratio(id: &str, what: &str, published: f64, measured: f64) -> Check {
    Check::ratio(
        &format!("petrov2010.{id}"),
        CHECK_PAPER,
        what,
        published,
        measured,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_tables_resolve_by_cell() {
        let cell = |page_bytes, buffer_mb, cpus| Cell {
            page_bytes,
            buffer_mb,
            cpus,
        };
        assert_eq!(published("table4_tpcc_notpm", cell(4096, 640, 1)), 3183.0);
        assert_eq!(published("table4_tpcc_notpm", cell(16384, 2560, 4)), 4830.0);
        assert_eq!(
            published("table5_new_order_response_s", cell(4096, 1280, 2)),
            0.70
        );
        assert_eq!(cells().len(), 18);
    }

    /// Table 4's cell is the maximum of its sweep, wherever it lies.
    #[test]
    fn best_is_the_maximum_of_the_sweep() {
        let cell = Cell {
            page_bytes: 4096,
            buffer_mb: 640,
            cpus: 2,
        };
        let p = |warehouses, notpm| Point {
            cell,
            warehouses,
            notpm,
            new_order_mean_s: 0.1,
            cpu_utilization: 0.5,
            buffer_hit_ratio: 0.9,
            consistency: "ok".into(),
        };
        let study = Study {
            points: vec![p(200, 2500.0), p(400, 5100.0), p(600, 4900.0)],
            load_host_seconds: 0.0,
            load_seconds: 0.0,
        };
        assert_eq!(study.best(cell).warehouses, 400);
        assert_eq!(study.curve(cell).len(), 3);
    }

    /// The sweep raises the load past the paper's 800 warehouses until it
    /// has passed its peak, and goes below its first point when the peak
    /// is there.
    #[test]
    fn the_sweep_goes_past_the_peak_on_both_sides() {
        let rising = |w: u32| f64::from(w.min(1600));
        let mut curve: Vec<(u32, f64)> = Vec::new();
        while let Some(w) = next_load(&curve, &FULL, 1) {
            curve.push((w, rising(w)));
            curve.sort_by_key(|p| p.0);
        }
        let loads: Vec<u32> = curve.iter().map(|p| p.0).collect();
        assert_eq!(loads, [200, 400, 600, 800, 1200, 1600, 2000, 2400]);
        assert!(swept_past_peak(&curve));
        let falling = |w: u32| 1e6 / f64::from(w);
        let mut curve: Vec<(u32, f64)> = Vec::new();
        while let Some(w) = next_load(&curve, &FULL, 1) {
            curve.push((w, falling(w)));
            curve.sort_by_key(|p| p.0);
        }
        assert_eq!(curve[0].0, SWEEP_LOW);
        assert!(!swept_past_peak(&curve), "the peak is the lowest load");
        let endless = |w: u32| f64::from(w);
        let mut curve: Vec<(u32, f64)> = Vec::new();
        while let Some(w) = next_load(&curve, &FULL, 1) {
            curve.push((w, endless(w)));
        }
        assert_eq!(curve.last().unwrap().0, SWEEP_MAX);
        assert!(!swept_past_peak(&curve));
        // A flat start at 4 CPUs sends the sweep below its first load.
        for (cpus, expected) in [
            (1, &[400, 800, 1600, 2400][..]),
            (4, &[100, 1600, 3200][..]),
        ] {
            let mut curve: Vec<(u32, f64)> = Vec::new();
            while let Some(w) = next_load(&curve, &QUICK, cpus) {
                curve.push((w, rising(w)));
                curve.sort_by_key(|p| p.0);
            }
            let loads: Vec<u32> = curve.iter().map(|p| p.0).collect();
            assert_eq!(loads, expected, "--quick's coarser sweep at {cpus} CPUs");
        }
    }

    /// Past 800 warehouses every warehouse is active and the terminals
    /// think proportionally less.
    #[test]
    fn loads_past_the_database_shorten_think_times() {
        let ctx = RunContext::new(false, 1);
        let o = options(&ctx, FITTED_CELL, 1600, None);
        assert_eq!(o.tpcc.active(), 80);
        assert_eq!(o.tpcc.think_divisor, 20.0);
    }

    /// The scaled run keeps the paper's ratios: 10 terminals per warehouse,
    /// a hundredth of the buffer, and the same offered load.
    #[test]
    fn scaled_options_keep_the_papers_ratios() {
        let ctx = RunContext::new(false, 1);
        let cell = Cell {
            page_bytes: 16384,
            buffer_mb: 1280,
            cpus: 4,
        };
        let o = options(&ctx, cell, 600, None);
        assert_eq!(o.tpcc.active(), 60);
        assert_eq!(o.clients, 600);
        assert_eq!(o.buffer_bytes, (1280 << 20) / 100);
        assert_eq!(o.tpcc.warehouses, 80);
        assert_eq!(o.tpcc.think_divisor, 10.0);
        assert_eq!(o.tpcc.connections, 20);
        assert!(o.tpcc.think);
        assert_eq!((o.cores, o.page_bytes), (4, 16384));
    }
}
