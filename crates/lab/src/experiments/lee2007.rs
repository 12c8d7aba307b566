//! lee2007 (the In-Page Logging slides): log segment size against merges,
//! and write performance against buffer size, run on the engine's IPL
//! store (`store = "ipl"`) on the raw NAND model of the K9WAG08U1A.
//!
//! **Traces.** The slides ran a commercial DBMS under TPC-C to make three
//! traces: 100M.20M.10u (100 MB database, 20 MB buffer, 10 users),
//! 1G.20M.100u and 1G.40M.100u. flashlab runs TPC-C itself at a tenth of
//! the size, as petrov2010's study does: a TPC-C warehouse holds about 100
//! MB at the specification's row counts, so 100 MB is one warehouse and
//! 1 GB ten; the rows per warehouse (items, customers) and the buffers are
//! divided by [`SCALE`] (10), so a warehouse holds about 10 MB and the
//! buffers are 2 and 4 MB. Users are terminals (10 per warehouse), with
//! no think times (the slides' traces are of a loaded server).
//!
//! **What is measured**, over the run after the load (the load fills fresh
//! erase units in place, IPL-5): sector writes, merges and erases of the
//! IPL store; lee2007's estimated write time (sector writes x 200 us +
//! merges x 20 ms); the *measured* write time: the NAND chip's busy time
//! serving the data space's writes and erases (each request's service
//! time after the one before it completed; the chip is one timeline), and
//! the same for in-place writes through a page-mapping and a block-mapping
//! FTL over one chip of the same flash (`ssd-k9wag08u1a-page`,
//! `-block`); alpha, the fraction of page writes that cost an erase unit's
//! copy and erase on the block-mapping FTL (its erases over the 2 KB flash
//! pages it wrote for the host: that FTL copies a unit per overwritten
//! flash page, so per 8 KB data page alpha would count up to 4 copies and
//! not be a probability), and the slides' in-place estimate alpha x page
//! writes x 20 ms with page writes in the same unit; erases per committed
//! transaction.
//!
//! The slides give no numbers for these figures, only their shapes: the
//! checks are those shapes, as bounds (`lee2007.*`), plus the one range
//! they do give, 20 to 50 bytes per log record.

use anyhow::anyhow;
use std::collections::BTreeMap;

use flashlab_devices::IoKind;
use flashlab_devices::trace::{Space, TraceRecord};
use flashlab_engine::store::StoreKind;
use flashlab_workloads::tpcc::TpccOptions;

use super::RunContext;
use super::skeleton::Study;
use crate::bench::{BenchOptions, BenchReport, IPL_MERGE_S, IPL_SECTOR_WRITE_S, bench};
use crate::chart::{LineChart, Series};
use crate::check::Check;
use crate::report::{Figure, Table};

/// Rows and buffers are this fraction of the traces'.
pub const SCALE: u32 = 10;
/// The raw NAND device of the IPL runs.
const NAND: &str = flashlab_devices::nand_device::K9WAG08U1A;
const PAPER: &str = "lee2007 slides";

/// One of the slides' traces, scaled.
#[derive(Clone, Copy, Debug)]
struct Trace {
    name: &'static str,
    warehouses: u32,
    buffer_bytes: u64,
}

const TRACES: [Trace; 3] = [
    Trace {
        name: "100M.20M.10u",
        warehouses: 1,
        buffer_bytes: (20 << 20) / SCALE as u64,
    },
    Trace {
        name: "1G.20M.100u",
        warehouses: 10,
        buffer_bytes: (20 << 20) / SCALE as u64,
    },
    Trace {
        name: "1G.40M.100u",
        warehouses: 10,
        buffer_bytes: (40 << 20) / SCALE as u64,
    },
];

/// Log segment sizes of the sweep, KB.
const SEGMENTS_KB: [u64; 4] = [4, 8, 16, 32];
/// The slides' segment for the write-performance figure.
const SEGMENT_KB_DEFAULT: u64 = 8;

fn durations(ctx: &RunContext) -> (u64, u64) {
    let s = flashlab_runtime::NS_PER_S;
    if ctx.quick {
        (10 * s, s)
    } else {
        (30 * s, 2 * s)
    }
}

/// What one run gave.
#[derive(Clone, Debug, Default, serde::Serialize)]
struct Point {
    committed: u64,
    tpmc: f64,
    counters: BTreeMap<String, f64>,
    /// NAND busy time serving the data space's writes and erases, seconds.
    write_busy_s: f64,
    /// Data pages the engine wrote (in place: write requests of a page).
    page_writes: f64,
    flash: Option<[u64; 3]>,
}

impl Point {
    fn get(&self, name: &str) -> f64 {
        self.counters.get(name).copied().unwrap_or(0.0)
    }
}

/// Busy time of the data device serving writes and erases: requests in
/// completion order, each from its submission or the previous completion,
/// whichever is later (one timeline).
fn write_busy_s(trace: &[TraceRecord]) -> f64 {
    let mut data: Vec<&TraceRecord> = trace.iter().filter(|r| r.space == Space::Data).collect();
    data.sort_by_key(|r| r.complete_ns);
    let mut last = 0u64;
    let mut busy = 0u64;
    for r in data {
        let start = r.submit_ns.max(last);
        if matches!(r.kind, IoKind::Write | IoKind::Trim) {
            busy += r.complete_ns.saturating_sub(start);
        }
        last = last.max(r.complete_ns);
    }
    busy as f64 / 1e9
}

fn run(
    ctx: &RunContext,
    trace: Trace,
    device: &str,
    segment_kb: Option<u64>,
    buffer_bytes: u64,
) -> anyhow::Result<Point> {
    run_with(
        ctx,
        trace,
        device,
        segment_kb,
        buffer_bytes,
        Variant::Lee2007,
    )
}

/// An IPL run as the slides have it, or without one of its recovery
/// mechanisms.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    Lee2007,
    /// Commits durable by the WAL alone (`--ipl-commit-force off`).
    NoCommitForce,
    /// Merges apply every record, aborts de-apply none
    /// (`--ipl-selection off`).
    NoSelection,
}

fn run_with(
    ctx: &RunContext,
    trace: Trace,
    device: &str,
    segment_kb: Option<u64>,
    buffer_bytes: u64,
    variant: Variant,
) -> anyhow::Result<Point> {
    let (duration_ns, warmup_ns) = durations(ctx);
    let options = BenchOptions {
        workload: "tpcc".into(),
        clients: trace.warehouses * flashlab_workloads::tpcc::TERMINALS_PER_WAREHOUSE,
        duration_ns,
        warmup_ns,
        log_device: "ssd-2008".into(),
        data_device: device.into(),
        rollback_device: "memory".into(),
        tpcc: TpccOptions {
            warehouses: trace.warehouses,
            items: flashlab_workloads::tpcc::ITEMS / SCALE,
            customers_per_district: flashlab_workloads::tpcc::CUSTOMERS_PER_DISTRICT / SCALE,
            seed: ctx.seed,
            ..TpccOptions::default()
        },
        data_store: segment_kb.map(|_| StoreKind::Ipl),
        ipl_log_segment_bytes: segment_kb.map(|kb| kb << 10),
        ipl_no_commit_force: segment_kb.is_some() && variant == Variant::NoCommitForce,
        ipl_no_selection: segment_kb.is_some() && variant == Variant::NoSelection,
        buffer_bytes,
        seed: ctx.seed,
        trace: true,
        progress_interval_ns: 0,
        ..BenchOptions::default()
    };
    let r: BenchReport = bench(&options, |_| {})?;
    if r.consistency != "ok" {
        return Err(anyhow!("{} on {device}: {}", trace.name, r.consistency));
    }
    let counters: BTreeMap<String, f64> = r
        .data_stores
        .first()
        .map(|s| s.counters.iter().cloned().collect())
        .unwrap_or_default();
    let page_bytes = options.page_bytes as u64;
    let page_writes = r
        .trace
        .iter()
        .filter(|t| t.space == Space::Data && t.kind == IoKind::Write)
        .map(|t| t.len_bytes / page_bytes)
        .sum::<u64>() as f64;
    Ok(Point {
        committed: r.committed,
        tpmc: r.tpcc.as_ref().map_or(0.0, |t| t.tpmc),
        page_writes: counters.get("page_writes").copied().unwrap_or(page_writes),
        counters,
        write_busy_s: write_busy_s(&r.trace),
        flash: r.data_flash,
    })
}

/// The store counters of the recovery-support table (IPL-SEL), in its
/// column order after the trace and segment.
const SELECTION_COUNTERS: [&str; 8] = [
    "merges",
    "selective_merges",
    "records_discarded",
    "records_carried",
    "carried_sectors",
    "selections_refused",
    "records_deapplied",
    "deapply_refused",
];

fn est_ipl_s(p: &Point) -> f64 {
    p.get("sector_writes") * IPL_SECTOR_WRITE_S + p.get("merges") * IPL_MERGE_S
}

fn fmt(v: f64) -> String {
    if v.abs() >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// lee2007's IPL figures.
pub struct Ipl;

/// What lee2007's IPL runs measured.
pub struct IplRuns {
    /// Per trace, the run at each log segment size of [`SEGMENTS_KB`].
    segment_sweep: Vec<(Trace, Vec<(u64, Point)>)>,
    /// The first trace at each buffer size (MB, scaled), 8 KB segments.
    buffer_sweep: Vec<(u64, Point)>,
    /// The first trace, commits not forcing their sectors.
    unforced: Point,
    /// The first trace, merges applying every record.
    unselective: Point,
    /// The first trace in place through the page- and block-mapping FTLs.
    page: Point,
    block: Point,
    duration_ns: u64,
}

impl IplRuns {
    /// The first trace with IPL at the slides' 8 KB segments.
    fn ipl(&self) -> &Point {
        self.segment_sweep[0]
            .1
            .iter()
            .find(|(kb, _)| *kb == SEGMENT_KB_DEFAULT)
            .map(|(_, p)| p)
            .expect("the sweep includes the default segment")
    }

    /// Sector writes per transaction at the smallest and largest buffer.
    fn sector_writes_per_txn(&self) -> Vec<(f64, f64)> {
        self.buffer_sweep
            .iter()
            .map(|(mb, p)| (*mb as f64, per_txn_count(p.get("sector_writes"), p)))
            .collect()
    }

    /// alpha per 2 KB flash page the block-mapping FTL wrote for the host,
    /// and those flash pages. The FTL copies and erases a unit per
    /// overwritten flash page, so per 8 KB data page it is up to 4 copies,
    /// not a probability; per flash page it is one.
    fn alpha(&self) -> (f64, f64) {
        match self.block.flash {
            Some([host_pages, _, erases]) if host_pages > 0 => {
                (erases as f64 / host_pages as f64, host_pages as f64)
            }
            _ => (f64::NAN, 0.0),
        }
    }
}

/// The report's tables.
impl IplRuns {
    /// Per trace and segment size, the counters of `cells`.
    fn segment_rows(&self, cells: impl Fn(&Point) -> Vec<String>) -> Vec<Vec<String>> {
        self.segment_sweep
            .iter()
            .flat_map(|(trace, points)| {
                points.iter().map(|(kb, p)| {
                    let mut row = vec![trace.name.to_string(), kb.to_string()];
                    row.extend(cells(p));
                    row
                })
            })
            .collect()
    }

    fn segment_table(&self) -> Table {
        let rows = self.segment_rows(|p| {
            vec![
                fmt(p.get("sector_writes")),
                fmt(p.get("merges")),
                fmt(p.get("erases")),
                fmt(p.committed as f64),
                fmt(p.tpmc),
            ]
        });
        Table::new(
            "Log segment size against merges",
            &[
                "trace",
                "segment KB",
                "sector writes",
                "merges",
                "erases",
                "committed",
                "tpmC",
            ],
            rows,
        )
    }

    fn buffer_table(&self) -> Table {
        let rows = self
            .buffer_sweep
            .iter()
            .map(|(mb, p)| {
                vec![
                    mb.to_string(),
                    fmt(p.get("sector_writes")),
                    fmt(p.get("merges")),
                    fmt(est_ipl_s(p)),
                    fmt(per_txn_count(p.get("sector_writes"), p)),
                    fmt(per_txn_count(p.get("merges"), p)),
                    fmt(p.committed as f64),
                ]
            })
            .collect();
        Table::new(
            format!(
                "{}: write performance against buffer size (8 KB segments)",
                TRACES[0].name
            ),
            &[
                "buffer MB",
                "sector writes",
                "merges",
                "estimated write s",
                "sectors/txn",
                "merges/txn",
                "committed",
            ],
            rows,
        )
    }

    fn comparison_table(&self) -> Table {
        // One row: label, the run's counts, and its estimated write time
        // (a cell of text).
        let row = |label: &str, p: &Point, estimate: String| {
            vec![
                label.to_string(),
                fmt(p.committed as f64),
                fmt(p.page_writes),
                fmt(p.write_busy_s),
                fmt(per_txn_ms(p.write_busy_s, p)),
                estimate,
                fmt(erases_per_txn(p)),
            ]
        };
        let ipl = |label: &str, p: &Point| row(label, p, fmt(est_ipl_s(p)));
        let (alpha, flash_page_writes) = self.alpha();
        let block_estimate = format!(
            "{} (alpha {alpha:.3} per 2 KB flash page)",
            fmt(alpha * flash_page_writes * IPL_MERGE_S)
        );
        let rows = vec![
            ipl("IPL on raw NAND (8 KB log segments)", self.ipl()),
            ipl("IPL, commits not forcing their sectors", &self.unforced),
            ipl("IPL, merges applying every record", &self.unselective),
            row("in place, page-mapping FTL", &self.page, "-".into()),
            row("in place, block-mapping FTL", &self.block, block_estimate),
        ];
        Table::new(
            format!(
                "{}: IPL against in-place writes on FTLs of the same flash",
                TRACES[0].name
            ),
            &[
                "data space",
                "committed",
                "page writes",
                "measured write s",
                "write ms/txn",
                "estimated write s",
                "erases/txn",
            ],
            rows,
        )
    }

    fn selection_table(&self) -> Table {
        let rows =
            self.segment_rows(|p| SELECTION_COUNTERS.iter().map(|c| fmt(p.get(c))).collect());
        Table::new(
            "Support for recovery: selective merges and abort de-application",
            &[
                "trace",
                "segment KB",
                "merges",
                "selective merges",
                "records left out",
                "records carried over",
                "carried sectors",
                "kept by replay",
                "records de-applied",
                "de-applications kept",
            ],
            rows,
        )
    }
}

fn per_txn_count(v: f64, p: &Point) -> f64 {
    v / (p.committed.max(1) as f64)
}

/// Milliseconds of `busy` seconds per committed transaction of `p`.
fn per_txn_ms(busy: f64, p: &Point) -> f64 {
    busy / (p.committed.max(1) as f64) * 1e3
}

fn erases_per_txn(p: &Point) -> f64 {
    let e = p.flash.map_or(p.get("erases"), |f| f[2] as f64);
    e / (p.committed.max(1) as f64)
}

impl Study for Ipl {
    type Measured = IplRuns;

    fn measure(&self, ctx: &RunContext) -> anyhow::Result<IplRuns> {
        let sweep_traces: &[Trace] = if ctx.quick { &TRACES[..1] } else { &TRACES };
        let buffers_mb: &[u64] = if ctx.quick {
            &[1, 2, 8]
        } else {
            &[1, 2, 4, 8, 16]
        };
        let steps = ctx.steps(sweep_traces.len() * SEGMENTS_KB.len() + buffers_mb.len() + 4);
        // 1. Merges against the log segment size.
        let mut segment_sweep = Vec::new();
        for trace in sweep_traces {
            let points = SEGMENTS_KB
                .iter()
                .map(|&kb| {
                    let r = run(ctx, *trace, NAND, Some(kb), trace.buffer_bytes)?;
                    Ok((kb, steps.after(r)))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            segment_sweep.push((*trace, points));
        }
        // 2. The first trace against the buffer (its own buffer's run is
        // the sweep's at 8 KB).
        let t1 = TRACES[0];
        let mut buffer_sweep = Vec::new();
        for &mb in buffers_mb {
            let p = match segment_sweep[0]
                .1
                .iter()
                .find(|(kb, _)| *kb == SEGMENT_KB_DEFAULT)
            {
                Some((_, p)) if (mb << 20) == t1.buffer_bytes => p.clone(),
                _ => run(ctx, t1, NAND, Some(SEGMENT_KB_DEFAULT), mb << 20)?,
            };
            buffer_sweep.push((mb, steps.after(p)));
        }
        // 3. IPL against in-place writes through FTLs of the same flash.
        let unforced = run_with(
            ctx,
            t1,
            NAND,
            Some(SEGMENT_KB_DEFAULT),
            t1.buffer_bytes,
            Variant::NoCommitForce,
        )
        .map(|r| steps.after(r))?;
        let unselective = run_with(
            ctx,
            t1,
            NAND,
            Some(SEGMENT_KB_DEFAULT),
            t1.buffer_bytes,
            Variant::NoSelection,
        )
        .map(|r| steps.after(r))?;
        let page = steps.after(run(ctx, t1, "ssd-k9wag08u1a-page", None, t1.buffer_bytes)?);
        let block = steps.after(run(ctx, t1, "ssd-k9wag08u1a-block", None, t1.buffer_bytes)?);
        Ok(IplRuns {
            segment_sweep,
            buffer_sweep,
            unforced,
            unselective,
            page,
            block,
            duration_ns: durations(ctx).0,
        })
    }

    fn description(&self, _: &RunContext, m: &IplRuns) -> String {
        format!(
            "TPC-C on the engine with its data space In-Page Logging on the raw NAND model of the K9WAG08U1A (2 KB pages, 128 KB erase units, 80/200/1500 us), the log on ssd-2008. The slides' three traces at a tenth of their size: a warehouse is about 100 MB at full size, so 100 MB is 1 warehouse and 1 GB 10; rows per warehouse and buffers divided by {SCALE}; 10 terminals per warehouse, no think times; {} s measured after the load. Counters are over the run, not the load. The slides give no numbers for these figures, only their shapes; the checks are those shapes as bounds, and the 20 to 50 bytes per log record they state. Estimated write time: IPL = sector writes x 200 us + merges x 20 ms; in place = alpha x page writes x 20 ms. Measured write time: the NAND chip's busy time serving the data space's writes and erases.",
            m.duration_ns / flashlab_runtime::NS_PER_S
        )
    }

    fn tables(&self, m: &IplRuns) -> Vec<Table> {
        vec![
            m.segment_table(),
            m.buffer_table(),
            m.comparison_table(),
            m.selection_table(),
        ]
    }

    fn checks(&self, m: &IplRuns) -> Vec<Check> {
        let mut checks: Vec<Check> = m
            .segment_sweep
            .iter()
            .map(|(trace, points)| {
                let merges = |i: usize| points[i].1.get("merges");
                Check::at_most(
                    &format!("lee2007.merges_fall_with_segment.{}", trace.name),
                    PAPER,
                    &format!(
                        "{}: merges with 32 KB log segments (bound: with 4 KB)",
                        trace.name
                    ),
                    "merges",
                    merges(0),
                    merges(points.len() - 1),
                )
                .with_note(
                    "the slides: \"more storage but less frequent merges with more log sectors\"",
                )
            })
            .collect();
        let (ipl, block) = (m.ipl(), &m.block);
        let sw = m.sector_writes_per_txn();
        let (sw_small, sw_large) = (sw[0].1, sw[sw.len() - 1].1);
        let (alpha, _) = m.alpha();
        let record_bytes = ipl.get("avg_record_bytes");
        checks.extend([
            Check::at_most(
                "lee2007.ipl_below_block_ftl",
                PAPER,
                "NAND write time per committed transaction, IPL (bound: in place on the block-mapping FTL)",
                "ms",
                per_txn_ms(block.write_busy_s, block),
                per_txn_ms(ipl.write_busy_s, ipl),
            ),
            Check::at_most(
                "lee2007.buffer_cuts_sector_writes",
                PAPER,
                &format!(
                    "sector writes per transaction with a {} MB buffer (bound: with {} MB)",
                    sw[sw.len() - 1].0,
                    sw[0].0
                ),
                "sectors",
                sw_small,
                sw_large,
            ),
            // The block-mapping FTL erases at most one unit per flash page
            // it writes, so alpha per flash page is in (0, 1] by
            // construction: these two say the run is sound, not the model.
            Check::at_most("lee2007.alpha_at_most_1", PAPER, "alpha on the block-mapping FTL, per 2 KB flash page written (at most 1)", "x", 1.0, alpha).sanity(),
            Check::at_least("lee2007.alpha_positive", PAPER, "alpha on the block-mapping FTL, per 2 KB flash page written (above 0: bound 1e-6)", "x", 1e-6, alpha).sanity(),
            Check::at_least("lee2007.log_record_bytes_min", PAPER, "average log record bytes (the slides: 20 to 50)", "B", 20.0, record_bytes),
            Check::at_most("lee2007.log_record_bytes_max", PAPER, "average log record bytes (the slides: 20 to 50)", "B", 50.0, record_bytes),
        ]);
        checks
    }

    fn figures(&self, m: &IplRuns) -> anyhow::Result<Vec<Figure>> {
        let seg_chart = LineChart {
            title: "Merges against log segment size".into(),
            x_label: "log segment per erase unit (KB)".into(),
            y_label: "merges in the run".into(),
            log_x: true,
            series: m
                .segment_sweep
                .iter()
                .map(|(trace, points)| Series {
                    name: trace.name.into(),
                    points: points
                        .iter()
                        .map(|(kb, p)| (*kb as f64, p.get("merges")))
                        .collect(),
                    published: false,
                })
                .collect(),
        };
        let per_buffer = |f: &dyn Fn(&Point) -> f64| -> Vec<(f64, f64)> {
            m.buffer_sweep
                .iter()
                .map(|(mb, p)| (*mb as f64, f(p)))
                .collect()
        };
        let buf_chart = LineChart {
            title: format!("{}: write performance against buffer size", TRACES[0].name),
            x_label: "buffer (MB, scaled 1/10)".into(),
            y_label: "per committed transaction".into(),
            log_x: true,
            series: vec![
                Series {
                    name: "sector writes".into(),
                    points: m.sector_writes_per_txn(),
                    published: false,
                },
                Series {
                    name: "merges x 100".into(),
                    points: per_buffer(&|p| per_txn_count(p.get("merges"), p) * 100.0),
                    published: false,
                },
                Series {
                    name: "estimated write time (ms)".into(),
                    points: per_buffer(&|p| per_txn_count(est_ipl_s(p), p) * 1e3),
                    published: false,
                },
            ],
        };
        Ok(vec![
            Figure { id: "lee2007-merges".into(), title: "Log segment size vs merges".into(), caption: "Merges in the measured run against the log segment of each erase unit.".into(), svg: seg_chart.to_svg()? },
            Figure { id: "lee2007-buffer".into(), title: "Estimated write performance".into(), caption: "Per committed transaction: sector writes, merges (x100) and lee2007's estimated write time, against the buffer.".into(), svg: buf_chart.to_svg()? },
        ])
    }

    fn notes(&self, m: &IplRuns) -> Vec<String> {
        let ipl = m.ipl();
        vec![
            "The slides give no numbers for these figures; the checks are their shapes and the stated record size.".into(),
            format!(
                "A merge took {:.1} ms on the NAND model on average (reading the unit's pages and log, programming up to {} pages, a commit sector, an erase, behind other requests on the one chip), against the slides' 20 ms estimate.",
                ipl.get("merge_ms") / ipl.get("merges").max(1.0),
                15
            ),
            format!(
                "The page-mapping FTL erased {} units in the run: on a {} GB chip holding a database of tens of MB its garbage collection never starts in a short run, its best case; the block-mapping FTL copies a 128 KB unit for every overwritten 2 KB flash page.",
                m.page.flash.map_or(0, |f| f[2]),
                2
            ),
            "Recovery as the slides have it (ARCHITECTURE.md, \"In-Page Logging\"): a commit is acknowledged once a force of the whole space (its pending log sectors and a flushed force marker) covers it, and restart redoes no IPL page; the WAL keeps the commit and abort records. An abort's rollback is the engine's compensations, logged as records of the aborted transaction; the abort then de-applies its records from the in-memory log sectors, and merges are selective (aborted transactions' records left out, active ones' carried into the new log segment), wherever a replay shows that this leaves every page as it is: flashlab's records are physiological byte ranges, and one built on another's bytes cannot be left out alone (IPL-SEL). The last table counts both. The run marked \"commits not forcing their sectors\" is the older design: commits durable by the WAL alone, IPL pages redone at restart.".into(),
        ]
    }

    fn data(&self, m: &IplRuns) -> serde_json::Value {
        let mut data = serde_json::Map::new();
        for (trace, points) in &m.segment_sweep {
            for (kb, p) in points {
                data.insert(
                    format!("{}/segment-{kb}KB", trace.name),
                    serde_json::json!(p),
                );
            }
        }
        for (mb, p) in &m.buffer_sweep {
            data.insert(
                format!("{}/buffer-{mb}MB", TRACES[0].name),
                serde_json::json!(p),
            );
        }
        data.insert("ipl-no-commit-force".into(), serde_json::json!(m.unforced));
        data.insert("ipl-no-selection".into(), serde_json::json!(m.unselective));
        data.insert("in-place-page".into(), serde_json::json!(m.page));
        data.insert("in-place-block".into(), serde_json::json!(m.block));
        serde_json::Value::Object(data)
    }
}
