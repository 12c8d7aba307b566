//! lee2008 section 4: the transaction log on disk and on flash.
//!
//! - Table 2: update-commit, 4 to 64 clients, log on `hdd-2008` or
//!   `ssd-2008`, dual core at 1.86 GHz;
//! - Table 3: TPC-B with 20 clients: TPS, CPU, log write size and time;
//! - Figure 3: TPC-B TPS against clients, dual (1.86 GHz) and quad
//!   (2.4 GHz) core, log on disk and on flash;
//! - the log-write pattern (time x address) of TPC-B on both devices.
//!
//! Data stays cached in memory, as in the paper; only the log does I/O.
//! The CPU cost model is calibrated once (see `CpuCosts`): everything else
//! follows from the engine, the group commit and the device models.

use anyhow::anyhow;
use flashlab_devices::Space;
use flashlab_runtime::{NS_PER_MS, NS_PER_S};

use super::RunContext;
use super::skeleton::Study;
use crate::bench::{BenchOptions, BenchReport, bench};
use crate::chart::{LineChart, Series};
use crate::check::Check;
use crate::published;
use crate::report::{Figure, RawFile, Table, fmt_num, hdd_ssd_table};

const HDD: &str = "hdd-2008";
pub(crate) const SSD: &str = "ssd-2008";
/// The quad-core machine of Figure 3.
const QUAD_GHZ: f64 = 2.4;
pub(crate) const DUAL_GHZ: f64 = 1.86;
/// TPC-B database: 32 branches. lee2008 used 450 MB; the experiment keeps
/// the branch count (contention) and lowers accounts per branch (a
/// departure the report states).
const TPCB_BRANCHES: u32 = 32;

fn accounts_per_branch(ctx: &RunContext) -> u32 {
    if ctx.quick { 2_000 } else { 10_000 }
}

fn durations(ctx: &RunContext) -> (u64, u64) {
    if ctx.quick {
        (2 * NS_PER_S, 500 * NS_PER_MS)
    } else {
        (10 * NS_PER_S, NS_PER_S)
    }
}

/// The run of `workload` with the log on `log`, as the lee2008 log
/// experiments run it (and as the CPU calibration's counting runs do).
pub(crate) fn options(
    ctx: &RunContext,
    workload: &str,
    log: &str,
    clients: u32,
    cores: u32,
    ghz: f64,
) -> BenchOptions {
    let (duration_ns, warmup_ns) = durations(ctx);
    BenchOptions {
        workload: workload.into(),
        clients,
        cores,
        cpu_ghz: ghz,
        duration_ns,
        warmup_ns,
        log_device: log.into(),
        data_device: "memory".into(),
        scale: if workload == "tpcb" { TPCB_BRANCHES } else { 1 },
        accounts_per_branch: accounts_per_branch(ctx),
        buffer_bytes: 512 << 20,
        seed: ctx.seed,
        progress_interval_ns: 0,
        // The paper's commercial server wrote no full-page images.
        page_images: false,
        ..BenchOptions::default()
    }
}

/// One run of `options`, traced when `trace`, its consistency checked.
fn run(options: BenchOptions, trace: bool) -> anyhow::Result<BenchReport> {
    let options = BenchOptions { trace, ..options };
    let report = bench(&options, |_| {})?;
    if report.consistency != "ok" {
        return Err(anyhow!(
            "{} on {} with {} clients: consistency violated: {}",
            options.workload,
            options.log_device,
            options.clients,
            report.consistency
        ));
    }
    Ok(report)
}

/// lee2008 Table 2.
pub struct Table2;

/// One row of Table 2: clients, HDD TPS and CPU, SSD TPS and CPU.
type Table2Row = (u32, f64, f64, f64, f64);

const TABLE2_KEY: &str = "lee2008.table2_update_commit";

impl Study for Table2 {
    type Measured = Vec<Table2Row>;

    fn measure(&self, ctx: &RunContext) -> anyhow::Result<Vec<Table2Row>> {
        let mut measured = Vec::new();
        let steps = ctx.steps(2 * table2_clients().len());
        for c in table2_clients() {
            let hdd = steps.after(run(
                options(ctx, "update-commit", HDD, c, 2, DUAL_GHZ),
                false,
            )?);
            let ssd = steps.after(run(
                options(ctx, "update-commit", SSD, c, 2, DUAL_GHZ),
                false,
            )?);
            measured.push((
                c,
                hdd.tps,
                hdd.cpu_utilization,
                ssd.tps,
                ssd.cpu_utilization,
            ));
        }
        Ok(measured)
    }

    fn description(&self, _: &RunContext, _: &Vec<Table2Row>) -> String {
        "Full-page images in the log: off, as the paper's server ran. \
            Each client updates one random row of a 1,000-row table cached in memory and commits, in a loop; \
            the log is on the modelled 2008 disk or SSD, the CPU two simulated cores at 1.86 GHz."
            .into()
    }

    fn tables(&self, measured: &Vec<Table2Row>) -> Vec<Table> {
        let rows = measured
            .iter()
            .enumerate()
            .map(|(i, (c, hdd_tps, hdd_cpu, ssd_tps, ssd_cpu))| {
                let p = |field: &str| {
                    published::number_at(&format!("{TABLE2_KEY}.{field}"), i).unwrap_or(f64::NAN)
                };
                vec![
                    c.to_string(),
                    fmt_num(*hdd_tps),
                    fmt_num(p("hdd_tps")),
                    format!("{:.1}", hdd_cpu * 100.0),
                    fmt_num(p("hdd_cpu_pct")),
                    fmt_num(*ssd_tps),
                    fmt_num(p("ssd_tps")),
                    format!("{:.1}", ssd_cpu * 100.0),
                    fmt_num(p("ssd_cpu_pct")),
                ]
            })
            .collect();
        vec![Table::new(
            "Update-commit: measured beside published",
            &[
                "clients", "HDD TPS", "paper", "HDD %CPU", "paper", "SSD TPS", "paper", "SSD %CPU",
                "paper",
            ],
            rows,
        )]
    }

    fn checks(&self, measured: &Vec<Table2Row>) -> Vec<Check> {
        let first = measured.first().copied().unwrap_or_default();
        let last = measured.last().copied().unwrap_or_default();
        let mut checks = vec![
            Check::ratio(
                "lee2008.table2.ssd_over_hdd_4",
                "lee2008 Table 2",
                "SSD/HDD TPS ratio at 4 clients",
                2222.0 / 178.0,
                first.3 / first.1,
            ),
            Check::ratio(
                "lee2008.table2.hdd_64_over_4",
                "lee2008 Table 2",
                "HDD TPS at 64 clients / at 4 (near-linear growth)",
                2737.0 / 178.0,
                last.1 / first.1,
            ),
        ];
        checks.extend(order_of_magnitude_checks(measured));
        checks.extend(table2_absolute_checks(TABLE2_KEY, measured));
        checks.push(saturation_check(measured));
        checks
    }

    fn figures(&self, measured: &Vec<Table2Row>) -> anyhow::Result<Vec<Figure>> {
        let clients = table2_clients();
        let chart = LineChart {
            title: "Update-commit TPS against clients (dual core)".into(),
            x_label: "concurrent clients".into(),
            y_label: "transactions per second".into(),
            log_x: true,
            series: vec![
                Series {
                    name: "HDD measured".into(),
                    points: measured.iter().map(|m| (f64::from(m.0), m.1)).collect(),
                    published: false,
                },
                Series {
                    name: "SSD measured".into(),
                    points: measured.iter().map(|m| (f64::from(m.0), m.3)).collect(),
                    published: false,
                },
                published_series("HDD published", &clients, &format!("{TABLE2_KEY}.hdd_tps")),
                published_series("SSD published", &clients, &format!("{TABLE2_KEY}.ssd_tps")),
            ],
        };
        Ok(vec![Figure {
            id: "lee2008-table2-chart".into(),
            title: "Table 2 as a chart".into(),
            caption: "Lines: measured; triangles: published.".into(),
            svg: chart.to_svg()?,
        }])
    }

    fn notes(&self, _: &Vec<Table2Row>) -> Vec<String> {
        vec![
            "The CPU cost model was calibrated on the 64-client SSD point of this table (294.7 us of CPU per transaction); the other points are predictions.".into(),
            "With a disk log, each force waits for the platter: the rotational model makes a log write take about one revolution (8.3 ms), and group commit lets throughput grow with the clients.".into(),
        ]
    }

    fn data(&self, measured: &Vec<Table2Row>) -> serde_json::Value {
        serde_json::json!(measured.iter().map(|m| serde_json::json!({"clients": m.0, "hdd_tps": m.1, "hdd_cpu": m.2, "ssd_tps": m.3, "ssd_cpu": m.4})).collect::<Vec<_>>())
    }
}

/// The client counts of Table 2, as published.
fn table2_clients() -> Vec<u32> {
    published::numbers(&format!("{TABLE2_KEY}.clients"))
        .unwrap_or_default()
        .iter()
        .map(|&c| c as u32)
        .collect()
}

/// Table 2's absolute values, each under the rule. The 64-client SSD row is
/// the one the CPU model was set from (calibration); the rest are
/// predictions.
fn table2_absolute_checks(key: &str, measured: &[Table2Row]) -> Vec<Check> {
    let mut checks = Vec::new();
    for (i, &(c, hdd_tps, hdd_cpu, ssd_tps, ssd_cpu)) in measured.iter().enumerate() {
        let p =
            |field: &str| published::number_at(&format!("{key}.{field}"), i).unwrap_or(f64::NAN);
        let fields = [
            ("hdd_tps", "HDD TPS", "TPS", hdd_tps),
            ("hdd_cpu_pct", "HDD %CPU", "%", hdd_cpu * 100.0),
            ("ssd_tps", "SSD TPS", "TPS", ssd_tps),
            ("ssd_cpu_pct", "SSD %CPU", "%", ssd_cpu * 100.0),
        ];
        for (field, what, unit, value) in fields {
            let mut check = Check::value(
                &format!("lee2008.table2.{field}_{c}"),
                "lee2008 Table 2",
                &format!("{what} at {c} clients"),
                unit,
                p(field),
                value,
            );
            if c == 64 && field.starts_with("ssd") {
                check = check.calibration().with_note(
                    "the row the CPU profile's fit used (check lee2008.table2.cpu_per_txn)",
                );
            } else if !check.pass {
                // The measured and published cycle of one client (clients /
                // TPS) and CPU per transaction (2 cores x %CPU / TPS).
                let (tps, cpu, ptps, pcpu) = if field.starts_with("hdd") {
                    (hdd_tps, hdd_cpu, p("hdd_tps"), p("hdd_cpu_pct") / 100.0)
                } else {
                    (ssd_tps, ssd_cpu, p("ssd_tps"), p("ssd_cpu_pct") / 100.0)
                };
                let cycle = |t: f64| f64::from(c) / t * 1e3;
                let per_txn = |u: f64, t: f64| 2.0 * u / t * 1e6;
                check.note = format!(
                    "each client commits every {:.2} ms against the paper's {:.2} ms; CPU per transaction {:.0} us against the paper's {:.0} us. {}",
                    cycle(tps),
                    cycle(ptps),
                    per_txn(cpu, tps),
                    per_txn(pcpu, ptps),
                    if field.starts_with("hdd") {
                        "The CPU per transaction agrees (the model's one calibrated cost), so the %CPU follows the TPS; the TPS is high because a commit waits less for the modelled disk's log force than for the paper's (cause not yet established: the paper gives no log write time for this table; Table 3's TPC-B HDD log write, 8.1 ms, is reproduced)."
                    } else {
                        "The model's commits wait less for the SSD log than the paper's did (Table 3: 0.6 ms against 1.3 ms a log write, the model's log writes being smaller), and below saturation the paper's server spent less CPU per transaction than at the 64-client calibration point; the model charges the calibrated cost at every load."
                    }
                );
            }
            checks.push(check);
        }
        if c == 64 {
            checks.push(cpu_fit_check(
                "lee2008.table2.cpu_per_txn",
                "lee2008 Table 2",
                "CPU per update-commit transaction, 64 clients, log on the SSD",
                2.0 * p("ssd_cpu_pct") / 100.0 / p("ssd_tps"),
                2.0 * ssd_cpu / ssd_tps,
            ));
        }
    }
    checks
}

/// A check of a published CPU time per transaction that a parameter of
/// the default CPU profile was fitted to (calibration), in us.
fn cpu_fit_check(id: &str, paper: &str, what: &str, published_s: f64, measured_s: f64) -> Check {
    let profile = flashlab_engine::cpu_calibration::default_profile();
    let fitted: Vec<String> = profile
        .fitted
        .iter()
        .filter(|f| f.check == id)
        .map(|f| {
            format!(
                "{} of the {} CPU profile: from {}",
                f.parameter, profile.id, f.point
            )
        })
        .collect();
    let mut check = Check::value(id, paper, what, "us", published_s * 1e6, measured_s * 1e6);
    check = check.calibration();
    for f in fitted {
        check = check.fitted(&f);
    }
    check
}

/// Clients at which lee2008's "more than an order of magnitude" holds in
/// Table 2 (12.5x at 4 clients, 11.3x at 8): the low concurrency.
const ORDER_OF_MAGNITUDE_CLIENTS: [u32; 2] = [4, 8];

/// The paper's own claim for the log (section 1: "more than an order of
/// magnitude improvement in transaction throughput [...] for transaction
/// log"), a lower bound of 10 on the SSD/HDD TPS at each low-concurrency
/// row the run has.
fn order_of_magnitude_checks(measured: &[Table2Row]) -> Vec<Check> {
    ORDER_OF_MAGNITUDE_CLIENTS
        .iter()
        .filter_map(|&c| measured.iter().find(|m| m.0 == c))
        .map(|&(c, hdd_tps, _, ssd_tps, _)| {
            Check::at_least(
                &format!("lee2008.table2.order_of_magnitude_{c}"),
                "lee2008 section 1",
                &format!("SSD/HDD TPS at {c} clients: more than an order of magnitude"),
                "x",
                10.0,
                ssd_tps / hdd_tps,
            )
        })
        .collect()
}

/// "SSD TPS saturates, with CPU at 75% or more, by 16 clients": measured
/// as the fewest clients reaching 90% of the best SSD TPS, a value under the
/// rule (the paper's best, 6,274 TPS, is at 16 clients).
fn saturation_check(measured: &[Table2Row]) -> Check {
    let best = measured.iter().map(|m| m.3).fold(0.0, f64::max);
    let first = measured.iter().find(|m| m.3 >= 0.9 * best);
    let (clients, tps, cpu) =
        first
            .map(|m| (f64::from(m.0), m.3, m.4))
            .unwrap_or((f64::NAN, 0.0, 0.0));
    let mut check = Check::value(
        "lee2008.table2.ssd_saturation_clients",
        "lee2008 Table 2",
        "clients at which SSD TPS first reaches 90% of its best",
        "clients",
        16.0,
        clients,
    );
    check.note = format!(
        "{} TPS at {clients} clients, CPU {:.0}% (best {:.0} TPS){}",
        fmt_num(tps),
        cpu * 100.0,
        best,
        if check.pass {
            String::new()
        } else {
            "; the paper's server needed 16 clients (4,050 TPS at 8, 65% of its best), the model fewer: its SSD runs fill the two cores at fewer clients".to_string()
        }
    );
    check
}

fn published_series(name: &str, clients: &[u32], path: &str) -> Series {
    let values = published::numbers(path).unwrap_or_default();
    Series {
        name: name.into(),
        points: clients.iter().map(|&c| f64::from(c)).zip(values).collect(),
        published: true,
    }
}

/// lee2008 Table 3 and the log-write pattern figure.
pub struct Table3;

/// Table 3's two runs.
pub struct Table3Runs {
    hdd: BenchReport,
    ssd: BenchReport,
    ssd_log: LogWork,
    accounts_per_branch: u32,
}

impl Table3Runs {
    fn both(&self) -> [(&'static str, &BenchReport); 2] {
        [("hdd", &self.hdd), ("ssd", &self.ssd)]
    }
}

fn table3_published(field: &str) -> f64 {
    published::number(&format!("lee2008.table3_tpcb.{field}")).unwrap_or(f64::NAN)
}

/// A run's log writes, from its trace.
fn log_writes(report: &BenchReport) -> Vec<flashlab_devices::TraceRecord> {
    report
        .trace
        .iter()
        .filter(|r| r.space == Space::Log)
        .cloned()
        .collect()
}

impl Study for Table3 {
    type Measured = Table3Runs;

    fn measure(&self, ctx: &RunContext) -> anyhow::Result<Table3Runs> {
        let steps = ctx.steps(2);
        let ssd_options = options(ctx, "tpcb", SSD, 20, 2, DUAL_GHZ);
        let hdd = steps.after(run(options(ctx, "tpcb", HDD, 20, 2, DUAL_GHZ), true)?);
        let ssd = steps.after(run(ssd_options.clone(), true)?);
        Ok(Table3Runs {
            hdd,
            ssd_log: LogWork::of(&ssd, &ssd_options),
            ssd,
            accounts_per_branch: accounts_per_branch(ctx),
        })
    }

    fn description(&self, _: &RunContext, m: &Table3Runs) -> String {
        format!(
            "TPC-B with 20 clients, {TPCB_BRANCHES} branches of {} accounts, all cached; the log on the 2008 disk or SSD; dual core at 1.86 GHz. Full-page images in the log: off, as the paper's server ran (its log-write sizes would grow with them).",
            m.accounts_per_branch
        )
    }

    fn tables(&self, m: &Table3Runs) -> Vec<Table> {
        let (hdd, ssd, p) = (&m.hdd, &m.ssd, table3_published);
        // A row a quantity, one line each.
        #[rustfmt::skip]
        let rows = [
            ("transactions/sec", hdd.tps, p("hdd_tps"), ssd.tps, p("ssd_tps")),
            ("CPU utilization (%)", hdd.cpu_utilization * 100.0, p("hdd_cpu_pct"), ssd.cpu_utilization * 100.0, p("ssd_cpu_pct")),
            ("log write size (sectors)", hdd.log.avg_write_sectors, p("hdd_log_write_sectors"), ssd.log.avg_write_sectors, p("ssd_log_write_sectors")),
            ("log write time (ms)", hdd.log.avg_write_ms, p("hdd_log_write_ms"), ssd.log.avg_write_ms, p("ssd_log_write_ms")),
            ("log writes", hdd.log.writes as f64, f64::NAN, ssd.log.writes as f64, f64::NAN),
            ("commits per log write", hdd.log.commits_per_write, f64::NAN, ssd.log.commits_per_write, f64::NAN),
        ];
        vec![hdd_ssd_table("TPC-B with 20 clients", &rows)]
    }

    fn checks(&self, m: &Table3Runs) -> Vec<Check> {
        let (hdd, ssd, p) = (&m.hdd, &m.ssd, table3_published);
        vec![
            Check::ratio("lee2008.table3.ssd_over_hdd_tps", "lee2008 Table 3", "TPC-B SSD/HDD TPS ratio", p("ssd_tps") / p("hdd_tps"), ssd.tps / hdd.tps)
                .with_miss_note(CPU_NOTE),
            Check::value("lee2008.table3.hdd_tps", "lee2008 Table 3", "TPC-B TPS, log on the disk", "TPS", p("hdd_tps"), hdd.tps),
            Check::value("lee2008.table3.ssd_tps", "lee2008 Table 3", "TPC-B TPS, log on the SSD", "TPS", p("ssd_tps"), ssd.tps)
                .calibration()
                .with_note(&fit_row_note(ssd.cpu_utilization, m.ssd_log)),
            Check::value("lee2008.table3.hdd_cpu_pct", "lee2008 Table 3", "TPC-B %CPU, log on the disk", "%", p("hdd_cpu_pct"), hdd.cpu_utilization * 100.0)
                .with_miss_note(CPU_NOTE),
            Check::value("lee2008.table3.ssd_cpu_pct", "lee2008 Table 3", "TPC-B %CPU, log on the SSD", "%", p("ssd_cpu_pct"), ssd.cpu_utilization * 100.0)
                .calibration()
                .with_note(&fit_row_note(ssd.cpu_utilization, m.ssd_log)),
            cpu_fit_check(
                "lee2008.table3.cpu_per_txn",
                "lee2008 Table 3",
                "CPU per TPC-B transaction, 20 clients, log on the SSD",
                2.0 * p("ssd_cpu_pct") / 100.0 / p("ssd_tps"),
                2.0 * ssd.cpu_utilization / ssd.tps,
            ),
            Check::value("lee2008.table3.hdd_log_write_ms", "lee2008 Table 3", "HDD log write time", "ms", p("hdd_log_write_ms"), hdd.log.avg_write_ms),
            Check::value("lee2008.table3.ssd_log_write_ms", "lee2008 Table 3", "SSD log write time", "ms", p("ssd_log_write_ms"), ssd.log.avg_write_ms)
                .with_miss_note(&format!(
                    "our log writes carry {:.1} sectors against the paper's {}: flashlab's records (byte-range redo, logical undo) are about a third of the size of the commercial server's, and a write's time on the modelled SSD grows with its size",
                    ssd.log.avg_write_sectors, p("ssd_log_write_sectors")
                )),
        ]
    }

    fn figures(&self, m: &Table3Runs) -> anyhow::Result<Vec<Figure>> {
        let mut figures = Vec::new();
        for (name, report) in m.both() {
            let window: Vec<_> = first_seconds(&log_writes(report), 0.5);
            let svg = crate::plot::trace_img_html(
                &window,
                &format!("TPC-B log writes on {} (first 0.5 s)", report.log_device),
            )
            .map_err(|e| anyhow!("{e}"))?;
            figures.push(Figure {
                id: format!("lee2008-log-pattern-{name}"),
                title: format!("Log-write pattern, {}", report.log_device),
                caption: "Time x address of every log write: one sequential stream; each force rewrites the last, partly filled sector.".into(),
                svg,
            });
        }
        Ok(figures)
    }

    fn notes(&self, m: &Table3Runs) -> Vec<String> {
        m.hdd.departures.clone()
    }

    fn data(&self, m: &Table3Runs) -> serde_json::Value {
        serde_json::json!({"hdd": report_json(&m.hdd), "ssd": report_json(&m.ssd)})
    }

    fn raw_files(&self, m: &Table3Runs) -> anyhow::Result<Vec<RawFile>> {
        let mut raw_files = Vec::new();
        for (name, report) in m.both() {
            let mut csv = Vec::new();
            flashlab_devices::trace::formats::write_flashlab_csv(&log_writes(report), &mut csv)
                .map_err(|e| anyhow!("{e}"))?;
            raw_files.push(RawFile {
                name: format!("lee2008-table3-{name}-log-trace.csv"),
                contents: csv,
            });
        }
        Ok(raw_files)
    }
}

const CPU_NOTE: &str = "a TPC-B transaction costs the CPU the lee2008 profile gives it, fitted to Table 3's 427 us a transaction (check lee2008.table3.cpu_per_txn), so what differs from the paper is how the clients' transactions overlap their log forces and lock waits, not the CPU per transaction";

fn first_seconds(
    records: &[flashlab_devices::TraceRecord],
    seconds: f64,
) -> Vec<flashlab_devices::TraceRecord> {
    let Some(start) = records.iter().map(|r| r.submit_ns).min() else {
        return Vec::new();
    };
    let end = start + (seconds * NS_PER_S as f64) as u64;
    records
        .iter()
        .filter(|r| r.submit_ns < end)
        .cloned()
        .collect()
}

fn report_json(r: &BenchReport) -> serde_json::Value {
    serde_json::to_value(r).unwrap_or(serde_json::Value::Null)
}

/// lee2008 Figure 3.
pub struct Figure3;

/// One curve of Figure 3: configuration, (clients, TPS), %CPU and the
/// log's work per point.
pub struct Figure3Curve {
    name: &'static str,
    points: Vec<(f64, f64)>,
    cpus: Vec<f64>,
    logs: Vec<LogWork>,
}

/// What the log did in one run: the device's full merges over the run
/// (warm-up included, `run_s` long) and the log bytes per commit.
#[derive(Clone, Copy, Debug, Default)]
struct LogWork {
    full_merges: u64,
    run_s: f64,
    bytes_per_commit: f64,
}

impl LogWork {
    fn of(r: &BenchReport, options: &BenchOptions) -> LogWork {
        LogWork {
            full_merges: r.log_full_merges.unwrap_or(0),
            run_s: (options.duration_ns + options.warmup_ns) as f64 / NS_PER_S as f64,
            bytes_per_commit: r.log.bytes_per_commit,
        }
    }
}

impl Figure3Curve {
    /// The best TPS, the CPU utilization and the log's work at it.
    fn best(&self) -> (f64, f64, LogWork) {
        let mut best = (0.0, 0.0, LogWork::default());
        for ((p, &cpu), &log) in self.points.iter().zip(&self.cpus).zip(&self.logs) {
            if p.1 > best.0 {
                best = (p.1, cpu, log);
            }
        }
        best
    }
}

/// Figure 3's four curves.
pub struct Figure3Runs {
    clients: Vec<u32>,
    curves: Vec<Figure3Curve>,
}

impl Figure3Runs {
    fn curve(&self, name: &str) -> &Figure3Curve {
        self.curves
            .iter()
            .find(|c| c.name == name)
            .expect("Figure 3 runs every configuration")
    }

    /// The SSD's best TPS, its CPU and log work, dual then quad core.
    fn ssd_best(&self) -> ((f64, f64, LogWork), (f64, f64, LogWork)) {
        (self.curve("SSD-Dual").best(), self.curve("SSD-Quad").best())
    }
}

/// The note of the Table 3 row the CPU profile's fit used: the fit sets
/// the CPU a transaction costs, not how busy the CPU is kept.
fn fit_row_note(cpu: f64, log: LogWork) -> String {
    format!(
        "the row the CPU profile's fit used (check lee2008.table3.cpu_per_txn): the fit sets the CPU a transaction costs; how much of the time the CPU is busy ({:.0}% here) the run decides: {}",
        cpu * 100.0,
        log_stall_note(log)
    )
}

/// Why the SSD's clients leave the CPU idle, from the run's log work, and
/// the paper's log volume a commit as its Table 3 implies it (the disk's
/// log writes back to back: sectors a write over commits a write).
fn log_stall_note(log: LogWork) -> String {
    let p = table3_published;
    let paper_commits_per_write = p("hdd_tps") * p("hdd_log_write_ms") / 1e3;
    let paper_bytes = p("hdd_log_write_sectors") * 512.0 / paper_commits_per_write;
    format!(
        "the clients wait for their log forces, and the SSD log stops for its FTL's full merges, {} in the run's {:.0} s (a force rewrites the log's tail sector, so each super-block is written out of order and ends in a full merge that copies it). The paper's server left its CPU idler still (65% at Table 3's point) with a larger log: about {:.1} KB a commit (Table 3's disk: {} sectors a write, {} ms a write at {} TPS) against flashlab's {:.2} KB.",
        log.full_merges,
        log.run_s,
        paper_bytes / 1e3,
        p("hdd_log_write_sectors"),
        p("hdd_log_write_ms"),
        p("hdd_tps"),
        log.bytes_per_commit / 1e3,
    )
}

fn figure3_published(field: &str) -> f64 {
    published::number(&format!("lee2008.figure3_cpu_bound.{field}")).unwrap_or(f64::NAN)
}

impl Study for Figure3 {
    type Measured = Figure3Runs;

    fn measure(&self, ctx: &RunContext) -> anyhow::Result<Figure3Runs> {
        let clients: Vec<u32> = if ctx.quick {
            vec![4, 16, 48]
        } else {
            vec![2, 4, 8, 16, 24, 32, 48, 64]
        };
        let configs = [
            ("Disk-Dual", HDD, 2, DUAL_GHZ),
            ("SSD-Dual", SSD, 2, DUAL_GHZ),
            ("Disk-Quad", HDD, 4, QUAD_GHZ),
            ("SSD-Quad", SSD, 4, QUAD_GHZ),
        ];
        let mut curves = Vec::new();
        let steps = ctx.steps(configs.len() * clients.len());
        for (name, log, cores, ghz) in configs {
            let mut curve = Figure3Curve {
                name,
                points: Vec::new(),
                cpus: Vec::new(),
                logs: Vec::new(),
            };
            for &c in &clients {
                let o = options(ctx, "tpcb", log, c, cores, ghz);
                let r = steps.after(run(o.clone(), false)?);
                curve.points.push((f64::from(c), r.tps));
                curve.cpus.push(r.cpu_utilization);
                curve.logs.push(LogWork::of(&r, &o));
            }
            curves.push(curve);
        }
        Ok(Figure3Runs { clients, curves })
    }

    fn description(&self, _: &RunContext, _: &Figure3Runs) -> String {
        "TPC-B throughput against clients with the log on the 2008 disk or SSD, on two simulated cores at 1.86 GHz and four at 2.4 GHz (CPU costs scale with 1/clock). Full-page images in the log: off, as the paper's server ran.".into()
    }

    fn tables(&self, m: &Figure3Runs) -> Vec<Table> {
        let rows = m
            .curves
            .iter()
            .flat_map(|curve| {
                curve
                    .points
                    .iter()
                    .zip(&curve.cpus)
                    .map(|(&(c, tps), cpu)| {
                        vec![
                            curve.name.to_string(),
                            c.to_string(),
                            fmt_num(tps),
                            format!("{:.1}", cpu * 100.0),
                        ]
                    })
            })
            .collect();
        vec![Table::new(
            "TPC-B TPS",
            &["configuration", "clients", "TPS", "%CPU"],
            rows,
        )]
    }

    fn checks(&self, m: &Figure3Runs) -> Vec<Check> {
        let ((dual, dual_cpu, dual_log), (quad, quad_cpu, quad_log)) = m.ssd_best();
        let pd = figure3_published("ssd_dual_core_saturation_tps");
        let pq = figure3_published("ssd_quad_core_saturation_tps");
        let quad_check = Check::ratio(
            "lee2008.figure3.quad_over_dual",
            "lee2008 Figure 3",
            "quad-core / dual-core SSD saturation TPS",
            pq / pd,
            quad / dual,
        )
        .with_miss_note(&format!(
            "the quad-core run peaks at {:.0}% CPU, {} TPS ({:+.0}% from the paper's {}); the dual-core run at {} TPS and {:.0}% CPU against the paper's {}. Both are bound by the log: {}",
            quad_cpu * 100.0,
            fmt_num(quad),
            (quad / pq - 1.0) * 100.0,
            fmt_num(pq),
            fmt_num(dual),
            dual_cpu * 100.0,
            fmt_num(pd),
            log_stall_note(quad_log),
        ));
        vec![
            Check::value(
                "lee2008.figure3.ssd_dual_saturation",
                "lee2008 Figure 3",
                "SSD dual-core saturation TPS",
                "TPS",
                pd,
                dual,
            )
            .with_miss_note(&format!(
                "{:.0}% CPU at the best point: {}",
                dual_cpu * 100.0,
                log_stall_note(dual_log)
            )),
            Check::value(
                "lee2008.figure3.ssd_quad_saturation",
                "lee2008 Figure 3",
                "SSD quad-core saturation TPS",
                "TPS",
                pq,
                quad,
            )
            .with_note(&format!("{:.0}% CPU at the best point", quad_cpu * 100.0))
            .with_miss_note(&format!(
                "{:.0}% CPU at the best point: {}",
                quad_cpu * 100.0,
                log_stall_note(quad_log)
            )),
            quad_check,
        ]
    }

    fn figures(&self, m: &Figure3Runs) -> anyhow::Result<Vec<Figure>> {
        let mut series: Vec<Series> = m
            .curves
            .iter()
            .map(|c| Series {
                name: c.name.into(),
                points: c.points.clone(),
                published: false,
            })
            .collect();
        let (first, last) = (
            f64::from(m.clients[0]),
            f64::from(*m.clients.last().unwrap_or(&64)),
        );
        for (name, field) in [
            (
                "SSD-Dual published saturation",
                "ssd_dual_core_saturation_tps",
            ),
            (
                "SSD-Quad published saturation",
                "ssd_quad_core_saturation_tps",
            ),
        ] {
            let tps = figure3_published(field);
            series.push(Series {
                name: name.into(),
                points: vec![(first, tps), (last, tps)],
                published: true,
            });
        }
        let chart = LineChart {
            title: "TPC-B TPS against clients".into(),
            x_label: "concurrent clients".into(),
            y_label: "transactions per second".into(),
            log_x: false,
            series,
        };
        Ok(vec![Figure {
            id: "lee2008-figure3".into(),
            title: "Figure 3".into(),
            caption: "Measured curves; triangles mark the published SSD saturation levels.".into(),
            svg: chart.to_svg()?,
        }])
    }

    fn data(&self, m: &Figure3Runs) -> serde_json::Value {
        let best: std::collections::BTreeMap<&str, f64> =
            m.curves.iter().map(|c| (c.name, c.best().0)).collect();
        serde_json::json!(best)
    }
}
