//! Device characterization: every preset against its published figures.
//!
//! Before any workload result can be trusted, the device models must show
//! the device-level figures they were calibrated from: lee2008 Table 1 for
//! `hdd-2008` and `ssd-2008`, petrov2010 Tables 1 and 3 for `hdd-2010`,
//! `ssd-2010` and `ssd-array-2010`. This experiment runs the fio-like
//! characterization (after preconditioning to steady state) on each preset
//! and checks each figure under the report's rule (within ±25% of the published
//! one, [`crate::check`]). Every device check is a calibration check; the
//! parameters set from a single row are named on it ([`FITTED`]). Each
//! figure is measured at the block size the paper states (petrov2010 Table
//! 1: sequential at 128 KB); lee2008 Table 1 states none, and its sustained
//! rates are checked at the largest block.

use anyhow::anyhow;
use flashlab_devices::IoKind;
use flashlab_devices::characterize::{
    Characterization, CharacterizeOptions, PointResult, SPEEDUP_BLOCKS_KB,
    SPEEDUP_WARMUP_BYTES_DEFAULT, SpeedupPoint, characterize, measure_point, speedups,
};
use flashlab_devices::presets;

use super::skeleton::Study;
use super::{RunContext, run_parallel};
use crate::chart::{LineChart, Series};
use crate::check::Check;
use crate::published;
use crate::report::{Figure, Table, fmt_num};

/// Parameters set from a single published row, by check id: named on the
/// row's check whether it passes or not (the `calibrated:` sources of the
/// presets, `flashlab devices`).
pub const FITTED: &[(&str, &str)] = &[
    (
        "devices.hdd-2008.average_latency_ms",
        "seek_avg: 8.33 ms minus half a revolution at 7,200 rpm (4.16 ms)",
    ),
    (
        "devices.hdd-2008.sustained_read_mb_s",
        "media_rate: set to this row's 110 MB/s",
    ),
    (
        "devices.hdd-2008.sustained_write_mb_s",
        "media_rate: set to 110 MB/s (the read row)",
    ),
    (
        "devices.ssd-2008.read_latency_ms",
        "controller_overhead_ns: set so a 4 KB QD1 read takes 0.2 ms",
    ),
    (
        "devices.hdd-2010.rand_read_4k_ms",
        "seek_avg: 3.2 ms minus half a revolution and the transfer (1.17 ms)",
    ),
    (
        "devices.hdd-2010.rand_read_4k_ms",
        "rpm = 15,000: assumed so that a 3.2 ms random read leaves room for a seek",
    ),
    (
        "devices.hdd-2010.rand_write_4k_ms",
        "write_settle = 0.2 ms: the mean of the 4 KB and 16 KB rows' write minus read",
    ),
    (
        "devices.hdd-2010.rand_write_16k_ms",
        "write_settle = 0.2 ms: the mean of the 4 KB and 16 KB rows' write minus read",
    ),
    (
        "devices.ssd-2008.write_latency_ms",
        "write_buffer_bytes = 0: a write waits for its program, as this row's 0.4 ms requires",
    ),
    (
        "devices.hdd-2010.seq_read_128k_mb_s",
        "media_rate: set to this row's 160 MB/s",
    ),
    (
        "devices.hdd-2010.seq_write_128k_mb_s",
        "media_rate: set to 160 MB/s (the read row)",
    ),
    (
        "devices.ssd-2010.rand_read_4k_ms",
        "channel_bytes_per_s: set so a 4 KB QD1 read takes 0.161 ms",
    ),
    (
        "devices.ssd-2010.read_iops_4k",
        "controller_overhead_ns: set so 4 KB QD32 reads give 35,510 IOPS",
    ),
    (
        "devices.ssd-2010.write_iops_4k",
        "write_command_ns: set so 4 KB QD32 writes give 5,953 IOPS",
    ),
    (
        "devices.ssd-2010.write_iops_16k",
        "random_write_page_ns: 45 us of controller time per extra page of a random write",
    ),
    (
        "devices.ssd-2010.rand_write_16k_ms",
        "random_write_page_ns: 45 us of controller time per extra page of a random write",
    ),
    (
        "devices.ssd-2010.rand_read_16k_ms",
        "stripe_pages = 2: 8 KB stripe units, two pages per die",
    ),
    (
        "devices.ssd-2010.seq_read_128k_mb_s",
        "host_bytes_per_s: set to this row's 250 MB/s",
    ),
    (
        "devices.ssd-2010.seq_read_128k_mb_s",
        "read_ahead_pages = 32: 128 KB read ahead on a sequential stream (the size assumed)",
    ),
    (
        "devices.ssd-array-2010.rand_read_64k_latency_ms",
        "stripe_unit_bytes: set from this row (petrov2010 does not say)",
    ),
    (
        "devices.ssd-array-2010.rand_read_4k",
        "read_command_ns: set so 4 KB random reads give 51,164 IOPS",
    ),
    (
        "devices.ssd-array-2010.rand_write_4k",
        "write_command_ns: set so 4 KB random writes give 23,661 IOPS",
    ),
    (
        "devices.ssd-array-2010.seq_write_8k",
        "write_append_command_ns: 15 us per appending write, set from this row",
    ),
    (
        "devices.ssd-array-2010.rand_write_8k_latency_ms",
        "write_latency_ns: the intercept, set from this row",
    ),
    (
        "devices.ssd-array-2010.rand_write_128k_latency_ms",
        "write_stream_bytes_per_s: the slope, set from the 8 KB and 128 KB rows",
    ),
    (
        "devices.ssd-array-2010.seq_read_512k",
        "read_bytes_per_s: the 1,350 MB/s plateau",
    ),
    (
        "devices.ssd-array-2010.seq_write_512k",
        "write_bytes_per_s: the ~890 MB/s plateau",
    ),
];

/// The check with its fitted parameters named, and marked calibration.
fn calibration(check: Check) -> Check {
    let mut check = check.calibration();
    for (id, parameter) in FITTED {
        if *id == check.id {
            check = check.fitted(parameter);
        }
    }
    check
}
/// The block size of petrov2010 Table 1's sequential figures.
pub const PETROV_SEQ_BLOCK_KB: u32 = 128;
/// Queue depth of the "deep" random points; the published SSD IOPS were
/// measured with many requests in flight.
pub const DEEP_QUEUE_DEPTH: u32 = 32;

/// The experiment.
pub struct DeviceCharacterization;

/// What the characterization measured. The array's and wang2010 Figure
/// 11's points are measured and judged by their own functions.
pub struct DeviceRuns {
    /// Every preset's characterization, in preset order.
    all: Vec<Characterization>,
    /// `ssd-array-2010`'s checks (petrov2010 Table 3's array points).
    array_checks: Vec<Check>,
    /// wang2010 Figure 11: its checks, table and figure.
    figure11: (Vec<Check>, Table, Figure),
}

impl Study for DeviceCharacterization {
    type Measured = DeviceRuns;

    fn measure(&self, ctx: &RunContext) -> anyhow::Result<DeviceRuns> {
        let names = presets::model_names();
        let steps = ctx.steps(names.len() + 2);
        // Each preset is its own simulation: they run side by side, their
        // results in the registry's order whatever the threads.
        let all = run_parallel(ctx, &names, |name| {
            characterize_preset(name, ctx).map(|r| steps.after(r))
        })?;
        Ok(DeviceRuns {
            all,
            array_checks: steps.after(array_checks(ctx)?),
            figure11: steps.after(wang2010_figure11(ctx)?),
        })
    }

    fn description(&self, _: &RunContext, _: &DeviceRuns) -> String {
        "Each preset is preconditioned to steady state (sequential fill, then random 4 KB writes), \
            then measured fio-style: sequential reads and writes of 8 to 512 KB at queue depth 1, random reads and \
            writes of 4 to 128 KB at queue depth 1 and 32. Published figures are device-level inputs the presets \
            were calibrated from; these checks show the models reproduce them. wang2010 Figure 11: the speed-up of \
            sequential over random requests by request size at queue depth 1 on its three SSDs, each preset \
            preconditioned and each write point after 128 MB of unmeasured writes of its own pattern."
            .into()
    }

    fn tables(&self, m: &DeviceRuns) -> Vec<Table> {
        let mut tables: Vec<Table> = m.all.iter().map(table_for).collect();
        tables.push(m.figure11.1.clone());
        tables
    }

    fn checks(&self, m: &DeviceRuns) -> Vec<Check> {
        let mut checks = Vec::new();
        for c in &m.all {
            checks.extend(checks_for(c));
            if c.device == "ssd-array-2010" {
                checks.extend(m.array_checks.iter().cloned());
            }
            if c.device == "hdd-seagate-7200-7" {
                checks.extend(lee2007_checks(c));
            }
        }
        checks.extend(m.figure11.0.iter().cloned());
        checks
    }

    fn figures(&self, m: &DeviceRuns) -> anyhow::Result<Vec<Figure>> {
        Ok(vec![bandwidth_figure(&m.all)?, m.figure11.2.clone()])
    }

    fn data(&self, m: &DeviceRuns) -> serde_json::Value {
        serde_json::to_value(&m.all).unwrap_or_default()
    }
}

/// Characterize one preset with the report's options.
pub fn characterize_preset(name: &str, ctx: &RunContext) -> anyhow::Result<Characterization> {
    let mut model = presets::build_model(name).map_err(|e| anyhow!("{e}"))?;
    let options = CharacterizeOptions {
        seed: ctx.seed,
        queue_depth: DEEP_QUEUE_DEPTH,
        requests_per_point: if ctx.quick { 500 } else { 2_000 },
        ..CharacterizeOptions::default()
    };
    characterize(model.as_mut(), &options).map_err(|e| anyhow!("{e}"))
}

fn rand(
    c: &Characterization,
    block_kb: u32,
    depth: u32,
) -> Option<&flashlab_devices::characterize::RandomPoint> {
    c.random
        .iter()
        .find(|p| p.block_kb == block_kb && p.queue_depth == depth)
}

fn largest_seq(c: &Characterization) -> Option<&flashlab_devices::characterize::SequentialPoint> {
    c.sequential.iter().max_by_key(|p| p.block_kb)
}

struct Builder<'a> {
    device: &'a str,
    paper: &'a str,
    checks: Vec<Check>,
}

impl Builder<'_> {
    fn add(
        &mut self,
        key: &str,
        what: &str,
        unit: &str,
        published_path: &str,
        measured: Option<f64>,
    ) {
        let Some(published) = published::number(published_path) else {
            return;
        };
        let measured = measured.unwrap_or(f64::NAN);
        let id = format!("devices.{}.{key}", self.device);
        let what = format!("{}: {what}", self.device);
        self.checks.push(calibration(Check::value(
            &id, self.paper, &what, unit, published, measured,
        )));
    }
}

/// The published figures each preset must reproduce.
fn checks_for(c: &Characterization) -> Vec<Check> {
    let name = c.device.as_str();
    let (paper, table) = match name {
        "hdd-2008" => ("lee2008 Table 1", "devices.hdd_seagate_7200_10"),
        "ssd-2008" => ("lee2008 Table 1", "devices.ssd_samsung_mcaqe32g8app"),
        "hdd-2010" => ("petrov2010 Table 1", "devices.enterprise_hdd_2010"),
        "ssd-2010" => ("petrov2010 Table 1", "devices.enterprise_ssd_2010"),
        _ => return Vec::new(),
    };
    let mut b = Builder {
        device: name,
        paper,
        checks: Vec::new(),
    };
    let p = |field: &str| format!("{table}.{field}");
    match name {
        "hdd-2008" => hdd_2008_checks(&mut b, c, &p),
        "ssd-2008" => ssd_2008_checks(&mut b, c, &p),
        _ => table1_2010_checks(&mut b, c, &p),
    }
    explain_misses(&mut b.checks, c);
    b.checks
}

/// lee2008 Table 1's disk.
fn hdd_2008_checks(b: &mut Builder<'_>, c: &Characterization, p: &dyn Fn(&str) -> String) {
    let big = largest_seq(c);
    b.add(
        "average_latency_ms",
        "random 4 KB read latency (seek + rotation)",
        "ms",
        &p("average_latency_ms"),
        rand(c, 4, 1).map(|r| r.read_latency_ms),
    );
    b.add(
        "sustained_read_mb_s",
        "sequential read, largest block",
        "MB/s",
        &p("sustained_transfer_mb_s"),
        big.map(|s| s.read_mb_s),
    );
    b.add(
        "sustained_write_mb_s",
        "sequential write, largest block",
        "MB/s",
        &p("sustained_transfer_mb_s"),
        big.map(|s| s.write_mb_s),
    );
}

/// lee2008 Table 1's SSD.
fn ssd_2008_checks(b: &mut Builder<'_>, c: &Characterization, p: &dyn Fn(&str) -> String) {
    let name = b.device;
    let big = largest_seq(c);
    b.add(
        "read_latency_ms",
        "random 4 KB read latency",
        "ms",
        &p("read_latency_ms"),
        rand(c, 4, 1).map(|r| r.read_latency_ms),
    );
    b.add(
        "write_latency_ms",
        "sequential 4 KB write latency, fresh drive (a log device)",
        "ms",
        &p("write_latency_ms"),
        fresh_sequential_write_ms(name),
    );
    b.add(
        "sustained_read_mb_s",
        "sequential read, largest block",
        "MB/s",
        &p("sustained_read_mb_s"),
        big.map(|s| s.read_mb_s),
    );
    b.add(
        "sustained_write_mb_s",
        "sequential write, largest block",
        "MB/s",
        &p("sustained_write_mb_s"),
        big.map(|s| s.write_mb_s),
    );
}

/// petrov2010 Table 1's disk and SSD.
fn table1_2010_checks(b: &mut Builder<'_>, c: &Characterization, p: &dyn Fn(&str) -> String) {
    let seq128 = sequential_128k(c);
    b.add(
        "seq_read_128k_mb_s",
        "sequential 128 KB read, QD 1 (the block size Table 1 states)",
        "MB/s",
        &p("seq_read_mb_s"),
        seq128.map(|s| s.read_mb_s),
    );
    b.add(
        "seq_write_128k_mb_s",
        "sequential 128 KB write, QD 1 (the block size Table 1 states)",
        "MB/s",
        &p("seq_write_mb_s"),
        seq128.map(|s| s.write_mb_s),
    );
    for kb in [4u32, 16] {
        let r1 = rand(c, kb, 1);
        let rq = rand(c, kb, DEEP_QUEUE_DEPTH);
        b.add(
            &format!("rand_read_{kb}k_ms"),
            &format!("random {kb} KB read latency, QD 1"),
            "ms",
            &p(&format!("rand_read_{kb}k_ms")),
            r1.map(|r| r.read_latency_ms),
        );
        b.add(
            &format!("rand_write_{kb}k_ms"),
            &format!("random {kb} KB write latency, QD 1"),
            "ms",
            &p(&format!("rand_write_{kb}k_ms")),
            r1.map(|r| r.write_latency_ms),
        );
        b.add(
            &format!("read_iops_{kb}k"),
            &format!("random {kb} KB read IOPS, QD {DEEP_QUEUE_DEPTH}"),
            "IOPS",
            &p(&format!("read_iops_{kb}k")),
            rq.map(|r| r.read_iops),
        );
        b.add(
            &format!("write_iops_{kb}k"),
            &format!("random {kb} KB write IOPS, QD {DEEP_QUEUE_DEPTH}"),
            "IOPS",
            &p(&format!("write_iops_{kb}k")),
            rq.map(|r| r.write_iops),
        );
    }
}

/// petrov2010 Table 1 states its block size: 128 KB.
fn sequential_128k(
    c: &Characterization,
) -> Option<&flashlab_devices::characterize::SequentialPoint> {
    c.sequential
        .iter()
        .find(|s| s.block_kb == PETROV_SEQ_BLOCK_KB)
}

/// Notes on the misses whose cause is known (a fitted parameter, a
/// limit of the model).
fn explain_misses(checks: &mut [Check], c: &Characterization) {
    let name = c.device.as_str();
    let seq128 = sequential_128k(c);
    for check in checks.iter_mut() {
        if !check.pass && check.id.starts_with("devices.ssd-2010.seq_read_128k") {
            let latency = seq128.map(|s| s.read_latency_ms).unwrap_or(f64::NAN);
            *check = check.clone().with_note(&format!(
                "at queue depth 1 each 128 KB read takes {latency:.3} ms; the 250 MB/s host link alone takes 0.524 ms, so the drive's read-ahead (read_ahead_pages) must have the next request's pages in RAM before it arrives"
            ));
        } else if !check.pass
            && name == "ssd-2010"
            && check.id.contains("16k")
            && check.id.contains("write")
        {
            *check = check.clone().with_note(
                "a 16 KB random write is modelled as the 4 KB one plus 45 us of controller time per extra page (random_write_page_ns, fitted to this row); sequential streams pay it once, to keep the 180 MB/s sequential write",
            );
        } else if !check.pass && name == "ssd-2010" && check.id.contains("16k") {
            *check = check.clone().with_note(
                "the model stripes in 8 KB units (stripe_pages = 2, fitted to the 16 KB read latency): a 16 KB read takes two pages, one after the other, from each of two dies; the 4 KB read and the sequential read bound the fit",
            );
        }
    }
}

/// lee2008's 0.4 ms write latency is that of small sequential writes (the
/// log pattern) on a drive in normal use: measured on a fresh model, 4 KB
/// sequential writes at queue depth 1.
fn fresh_sequential_write_ms(name: &str) -> Option<f64> {
    let mut model = presets::build_model(name).ok()?;
    let region = 64 << 20;
    measure_point(
        model.as_mut(),
        0,
        IoKind::Write,
        true,
        4096,
        1,
        2_000,
        1,
        region,
    )
    .ok()
    .map(|p| p.latency_ms)
}

/// petrov2010 Table 3 was measured with several requests in flight: each
/// row's throughput times its latency (Little's law) gives the queue depth
/// (about 2.5 to 14). Each row is measured on a fresh array at that depth,
/// so throughput and latency are checked together.
fn array_checks(ctx: &RunContext) -> anyhow::Result<Vec<Check>> {
    let table = "devices.ssd_array_2010";
    let mut model = presets::build_model(ARRAY_DEVICE).map_err(|e| anyhow!("{e}"))?;
    let region = model.capacity_bytes();
    let requests = if ctx.quick { 1_000 } else { 4_000 };
    let mut now_ns = 0;
    let mut checks = Vec::new();
    let rows = [
        (
            "seq",
            "seq_block_kb",
            true,
            IoKind::Read,
            "seq_read_mb_s",
            "seq_read_latency_ms",
        ),
        (
            "seq",
            "seq_block_kb",
            true,
            IoKind::Write,
            "seq_write_mb_s",
            "seq_write_latency_ms",
        ),
        (
            "rand",
            "rand_block_kb",
            false,
            IoKind::Read,
            "rand_read_iops",
            "rand_read_latency_ms",
        ),
        (
            "rand",
            "rand_block_kb",
            false,
            IoKind::Write,
            "rand_write_iops",
            "rand_write_latency_ms",
        ),
    ];
    for (pattern, blocks_key, sequential, kind, rate_key, latency_key) in rows {
        let blocks = published::numbers(&format!("{table}.{blocks_key}")).unwrap_or_default();
        for (i, kb) in blocks.iter().enumerate() {
            let (Some(rate), Some(latency_ms)) = (
                published::number_at(&format!("{table}.{rate_key}"), i),
                published::number_at(&format!("{table}.{latency_key}"), i),
            ) else {
                continue;
            };
            let block_bytes = (*kb as u64) * 1024;
            let iops = if sequential {
                rate * 1e6 / block_bytes as f64
            } else {
                rate
            };
            let depth = (iops * latency_ms / 1e3).round().max(1.0) as u32;
            let point = measure_point(
                model.as_mut(),
                now_ns,
                kind,
                sequential,
                block_bytes,
                depth,
                requests,
                ctx.seed,
                region,
            )
            .map_err(|e| anyhow!("{e}"))?;
            now_ns = point.end_ns;
            let row = ArrayRow {
                pattern,
                sequential,
                kind,
                kb: *kb,
                depth,
            };
            checks.extend(array_row_checks(&row, (rate, latency_ms), &point));
        }
    }
    Ok(checks)
}

/// The device preset of petrov2010 Table 3.
const ARRAY_DEVICE: &str = "ssd-array-2010";

/// One row of petrov2010 Table 3 as measured: the pattern ("seq" or
/// "rand"), the request kind and size, and the queue depth it ran at.
struct ArrayRow {
    pattern: &'static str,
    sequential: bool,
    kind: IoKind,
    kb: f64,
    depth: u32,
}

/// The two calibration checks of an array row: its throughput (MB/s
/// sequential, IOPS random) and its latency, against the `published`
/// (rate, latency in ms).
fn array_row_checks(row: &ArrayRow, published: (f64, f64), point: &PointResult) -> [Check; 2] {
    let (device, paper) = (ARRAY_DEVICE, "petrov2010 Table 3");
    let (rate, latency_ms) = published;
    let (pattern, kb, depth) = (row.pattern, row.kb, row.depth);
    let op = if row.kind == IoKind::Read {
        "read"
    } else {
        "write"
    };
    let (measured, unit) = if row.sequential {
        (point.mb_s, "MB/s")
    } else {
        (point.iops, "IOPS")
    };
    let id = format!("devices.{device}.{pattern}_{op}_{kb}k");
    let what = format!("{device}: {pattern} {op} {kb} KB at QD {depth}");
    let mut check = calibration(Check::value(&id, paper, &what, unit, rate, measured));
    if row.sequential && row.kind == IoKind::Write && kb <= 16.0 && !check.pass {
        check = check.with_note(
            "the model's cache appends a write that continues the previous one to its open stripe at 15 us per command (write_append_command_ns, fitted to the 8 KB row), against 42 us for other writes",
        );
    }
    let lat_id = format!("devices.{device}.{pattern}_{op}_{kb}k_latency_ms");
    let latency = calibration(Check::value(
        &lat_id,
        paper,
        &format!("{what}: latency"),
        "ms",
        latency_ms,
        point.latency_ms,
    ));
    [check, latency]
}

fn table_for(c: &Characterization) -> Table {
    let mut table = Table::new(
        format!("{}: measured figures", c.device),
        &[
            "point",
            "block KB",
            "QD",
            "read",
            "write",
            "read latency ms",
            "write latency ms",
        ],
        Vec::new(),
    );
    for s in &c.sequential {
        table.rows.push(vec![
            "sequential MB/s".into(),
            s.block_kb.to_string(),
            "1".into(),
            fmt_num(s.read_mb_s),
            fmt_num(s.write_mb_s),
            fmt_num(s.read_latency_ms),
            fmt_num(s.write_latency_ms),
        ]);
    }
    for r in &c.random {
        table.rows.push(vec![
            "random IOPS".into(),
            r.block_kb.to_string(),
            r.queue_depth.to_string(),
            fmt_num(r.read_iops),
            fmt_num(r.write_iops),
            fmt_num(r.read_latency_ms),
            fmt_num(r.write_latency_ms),
        ]);
    }
    table
}

fn bandwidth_figure(all: &[Characterization]) -> anyhow::Result<Figure> {
    let mut series = Vec::new();
    for c in all {
        series.push(Series {
            name: format!("{} read", c.device),
            points: c
                .sequential
                .iter()
                .map(|s| (f64::from(s.block_kb), s.read_mb_s))
                .collect(),
            published: false,
        });
    }
    let blocks = published::numbers("devices.ssd_array_2010.seq_block_kb").unwrap_or_default();
    let reads = published::numbers("devices.ssd_array_2010.seq_read_mb_s").unwrap_or_default();
    series.push(Series {
        name: "ssd-array-2010 read (published)".into(),
        points: blocks.into_iter().zip(reads).collect(),
        published: true,
    });
    let chart = LineChart {
        title: "Sequential read bandwidth against block size".into(),
        x_label: "block size (KB, log scale)".into(),
        y_label: "MB/s".into(),
        log_x: true,
        series,
    };
    Ok(Figure {
        id: "devices-bandwidth".into(),
        title: "Sequential read bandwidth of every preset".into(),
        caption: "Measured at queue depth 1 after preconditioning; triangles are petrov2010 Table 3's array.".into(),
        svg: chart.to_svg()?,
    })
}

/// lee2007's disk (slides, "Magnetic Disk vs NAND Flash"): a Seagate
/// Barracuda 7200.7 ST380011A reads in 12.7 ms and writes in 13.7 ms; the
/// preset's average read seek and its write settle were set from these two
/// rows. Measured as random 4 KB requests at queue depth 1.
fn lee2007_checks(c: &Characterization) -> Vec<Check> {
    let paper = "lee2007 slides: Magnetic Disk vs NAND Flash";
    let table = "devices.hdd_seagate_7200_7";
    let point = rand(c, 4, 1);
    let rows = [
        (
            "read_ms",
            "random 4 KB read, QD 1",
            point.map(|p| p.read_latency_ms),
            "seek_avg = 8.5 ms (datasheet); with half a revolution it gives this row",
        ),
        (
            "write_ms",
            "random 4 KB write, QD 1, write cache off",
            point.map(|p| p.write_latency_ms),
            "write_settle = 1.0 ms: this row less the read row",
        ),
    ];
    let mut checks = Vec::new();
    for (key, what, measured, fitted) in rows {
        let Some(published) = published::number(&format!("{table}.{key}")) else {
            continue;
        };
        checks.push(
            Check::value(
                &format!("lee2007.devices.hdd-seagate-7200-7.{key}"),
                paper,
                &format!("hdd-seagate-7200-7: {what}"),
                "ms",
                published,
                measured.unwrap_or(f64::NAN),
            )
            .calibration()
            .fitted(fitted),
        );
    }
    checks
}

/// wang2010's three SSDs: (preset, name in the check ids, the drive).
pub const WANG2010_SSDS: [(&str, &str, &str); 3] = [
    ("ssd-2008-poor-random", "mtron", "Mtron"),
    ("ssd-vertex-2009", "ocz", "OCZ Vertex"),
    ("ssd-2010", "intel", "Intel X25-E"),
];
/// The request sizes checked: the small requests the text of section 4.2
/// speaks of (4 KB, the commercial DBMS's block, to 16 KB, MySQL's). The
/// figure's bars are not in the text copy of the paper; the sizes it plots
/// are all measured and drawn.
pub const WANG2010_CHECKED_BLOCKS_KB: [u32; 3] = [4, 8, 16];

/// What wang2010 section 4.2 says of each drive's speed-up: (drive key,
/// read or write, lower bound, upper bound). "Close to 1" is the ratio 1.
fn wang2010_bounds(key: &str, write: bool) -> (f64, Option<f64>) {
    let bound =
        |path: &str, i: usize| published::number_at(&format!("wang2010.lfs_vs_inplace.{path}"), i);
    match (key, write) {
        ("mtron", true) => (
            published::number("wang2010.lfs_vs_inplace.mtron_seq_over_rand_write_small")
                .unwrap_or(100.0),
            None,
        ),
        ("ocz", true) => (
            bound("ocz_seq_over_rand_write", 0).unwrap_or(8.0),
            bound("ocz_seq_over_rand_write", 1),
        ),
        ("intel", true) => (
            bound("intel_seq_over_rand_write", 0).unwrap_or(2.0),
            bound("intel_seq_over_rand_write", 1),
        ),
        // Section 4.2: "round 2x to 3x" for Intel's reads.
        ("intel", false) => (2.0, Some(3.0)),
        // "close to 1 for Mtron and OCZ SSD".
        _ => (1.0, Some(1.0)),
    }
}

/// wang2010 Figure 11: checks, a table and the figure.
fn wang2010_figure11(ctx: &RunContext) -> anyhow::Result<(Vec<Check>, Table, Figure)> {
    let paper = "wang2010 Figure 11";
    let mut checks = Vec::new();
    let mut table = Table::new(
        "wang2010 Figure 11: sequential over random IOPS, queue depth 1",
        &[
            "SSD",
            "preset",
            "block KB",
            "seq read/s",
            "rand read/s",
            "read x",
            "seq write/s",
            "rand write/s",
            "write x",
        ],
        Vec::new(),
    );
    let mut series = Vec::new();
    for (preset, key, drive) in WANG2010_SSDS {
        let points = measure_speedups(preset, ctx)?;
        for p in &points {
            table.rows.push(vec![
                drive.into(),
                preset.into(),
                p.block_kb.to_string(),
                fmt_num(p.seq_read_iops),
                fmt_num(p.rand_read_iops),
                fmt_num(p.read_speedup()),
                fmt_num(p.seq_write_iops),
                fmt_num(p.rand_write_iops),
                fmt_num(p.write_speedup()),
            ]);
        }
        for write in [false, true] {
            let op = if write { "write" } else { "read" };
            series.push(Series {
                name: format!("{key}-{op} ({preset})"),
                points: points
                    .iter()
                    .map(|p| {
                        let x = if write {
                            p.write_speedup()
                        } else {
                            p.read_speedup()
                        };
                        (f64::from(p.block_kb), x)
                    })
                    .collect(),
                published: false,
            });
            let (low, high) = wang2010_bounds(key, write);
            for p in points
                .iter()
                .filter(|p| WANG2010_CHECKED_BLOCKS_KB.contains(&p.block_kb))
            {
                let measured = if write {
                    p.write_speedup()
                } else {
                    p.read_speedup()
                };
                let id = format!("wang2010.figure11.{key}.{op}_{}k", p.block_kb);
                let what = format!(
                    "{drive} ({preset}): sequential over random {op}s, {} KB",
                    p.block_kb
                );
                let made = match high {
                    Some(h) if h == low => vec![Check::ratio(&id, paper, &what, low, measured)],
                    Some(h) => vec![
                        Check::at_least(&format!("{id}.low"), paper, &what, "x", low, measured),
                        Check::at_most(&format!("{id}.high"), paper, &what, "x", h, measured),
                    ],
                    None => vec![Check::at_least(&id, paper, &what, "x", low, measured)],
                };
                for check in made {
                    checks.push(figure11_note(key, write, check.calibration()));
                }
            }
        }
    }
    let chart = LineChart {
        title: "Sequential over random IOPS by request size (wang2010 Figure 11)".into(),
        x_label: "request size (KB, log scale)".into(),
        y_label: "sequential / random (x)".into(),
        log_x: true,
        series,
    };
    let figure = Figure {
        id: "wang2010-figure11".into(),
        title: "wang2010 Figure 11: sequential over random, three SSDs".into(),
        caption: "Each preset preconditioned (sequential fill, random 4 KB writes), then per request size random and \
            sequential reads and writes at queue depth 1. The paper's bars are not in its text; section 4.2 gives Mtron \
            writes over 100x for small requests, OCZ 8x to 18x, Intel 2x to 3x, reads close to 1 (Intel 2x to 3x): the \
            checks hold the 4 to 16 KB points to those."
            .into(),
        svg: chart.to_svg()?,
    };
    Ok((checks, table, figure))
}

/// The parameter set from Figure 11 (named on its checks) and the reason
/// of each kind of miss.
fn figure11_note(key: &str, write: bool, check: Check) -> Check {
    let check = if key == "ocz" && write {
        check.fitted("VERTEX_LOG_BLOCKS = 8,192 (4 GiB of FAST log blocks): set so 8x-18x falls on the 8-64 KB points")
    } else {
        check
    };
    if check.pass {
        return check;
    }
    let note = match (key, write) {
        ("mtron", true) => {
            "a sequential 16 KB write takes about 0.44 ms (the 150 MB/s host link 109 us, two 2 KB pages per channel, one 200 us program on each die), a random one a full merge that copies a 2 MB super-block (about 42 ms): 95x; the 4 and 8 KB points pass"
        }
        ("ocz", true) => {
            "the FAST log area (VERTEX_LOG_BLOCKS) was set so the 8x-18x range falls on the 8-64 KB points; the smaller a random write, the more merge work per byte it pays"
        }
        ("ocz", false) => "reads queue behind the merges the previous writes left on the dies",
        ("intel", true) => {
            "ssd-2010's small writes are bound by the controller's per-command time (calibrated to petrov2010 Table 1's 0.125 ms write at QD 1), which sequential and random writes pay alike, and its random writes over the whole drive stay within what the flash and its GC sustain; from 32 KB on the ratio is 2.2-2.7x"
        }
        ("intel", false) => {
            "ssd-2010's 128 KB read-ahead (assumed, for petrov2010's 250 MB/s) hands a sequential 4-16 KB read over at host-link speed, while a random one waits for its flash read (0.161 ms, petrov2010 Table 1)"
        }
        _ => "",
    };
    check.with_note(note)
}

/// One preset's speed-ups with the report's options.
fn measure_speedups(preset: &str, ctx: &RunContext) -> anyhow::Result<Vec<SpeedupPoint>> {
    let mut model = presets::build_model(preset).map_err(|e| anyhow!("{e}"))?;
    let options = CharacterizeOptions {
        seed: ctx.seed,
        requests_per_point: if ctx.quick { 300 } else { 1_000 },
        ..CharacterizeOptions::default()
    };
    speedups(
        model.as_mut(),
        &options,
        &SPEEDUP_BLOCKS_KB,
        SPEEDUP_WARMUP_BYTES_DEFAULT,
    )
    .map_err(|e| anyhow!("{e}"))
}
