//! Device characterization: every preset against its published figures.
//!
//! Before any workload result can be trusted, the device models must show
//! the device-level figures they were calibrated from: lee2008 Table 1 for
//! `hdd-2008` and `ssd-2008`, petrov2010 Tables 1 and 3 for `hdd-2010`,
//! `ssd-2010` and `ssd-array-2010`. This experiment runs the fio-like
//! characterization (after preconditioning to steady state) on each preset
//! and checks each figure is within 25% of the published one.

use flashlab_devices::characterize::{Characterization, CharacterizeOptions, characterize};
use flashlab_devices::presets;

use super::{Experiment, RunContext};
use crate::chart::{LineChart, Series};
use crate::check::Check;
use crate::published;
use crate::report::{ExperimentResult, Figure, Table, fmt_num};

/// Pass range of device-level figures: within 25% (the bar).
pub const DEVICE_TOLERANCE_PCT: f64 = 25.0;
/// Queue depth of the "deep" random points; the published SSD IOPS were
/// measured with many requests in flight.
pub const DEEP_QUEUE_DEPTH: u32 = 32;

/// The experiment.
pub struct DeviceCharacterization;

impl Experiment for DeviceCharacterization {
    fn id(&self) -> &'static str {
        "devices"
    }

    fn title(&self) -> &'static str {
        "Device characterization of every preset"
    }

    fn run(&self, ctx: &RunContext) -> Result<ExperimentResult, String> {
        let started = std::time::Instant::now();
        let mut result = ExperimentResult {
            id: self.id().into(),
            title: self.title().into(),
            paper: "lee2008 Table 1; petrov2010 Tables 1 and 3".into(),
            description: "Each preset is preconditioned to steady state (sequential fill, then random 4 KB writes), \
                then measured fio-style: sequential reads and writes of 8 to 512 KB at queue depth 1, random reads and \
                writes of 4 to 128 KB at queue depth 1 and 32. Published figures are device-level inputs the presets \
                were calibrated from; these checks show the models reproduce them."
                .into(),
            ..ExperimentResult::default()
        };
        let mut all = Vec::new();
        for name in presets::model_names() {
            let c = characterize_preset(name, ctx)?;
            result.checks.extend(checks_for(&c));
            result.tables.push(table_for(&c));
            all.push(c);
        }
        result.figures.push(bandwidth_figure(&all)?);
        result.data = serde_json::to_value(&all).map_err(|e| e.to_string())?;
        result.host_seconds = started.elapsed().as_secs_f64();
        Ok(result)
    }
}

/// Characterize one preset with the report's options.
pub fn characterize_preset(name: &str, ctx: &RunContext) -> Result<Characterization, String> {
    let mut model = presets::build_model(name).map_err(|e| e.to_string())?;
    let options = CharacterizeOptions {
        seed: ctx.seed,
        queue_depth: DEEP_QUEUE_DEPTH,
        requests_per_point: if ctx.quick { 500 } else { 2_000 },
        ..CharacterizeOptions::default()
    };
    characterize(model.as_mut(), &options).map_err(|e| e.to_string())
}

fn seq(c: &Characterization, block_kb: u32) -> Option<&flashlab_devices::characterize::SequentialPoint> {
    c.sequential.iter().find(|p| p.block_kb == block_kb)
}

fn rand(c: &Characterization, block_kb: u32, depth: u32) -> Option<&flashlab_devices::characterize::RandomPoint> {
    c.random.iter().find(|p| p.block_kb == block_kb && p.queue_depth == depth)
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
    fn add(&mut self, key: &str, what: &str, unit: &str, published_path: &str, measured: Option<f64>) {
        let Some(published) = published::number(published_path) else { return };
        let measured = measured.unwrap_or(f64::NAN);
        let id = format!("devices.{}.{key}", self.device);
        let what = format!("{}: {what}", self.device);
        self.checks
            .push(Check::within_pct(&id, self.paper, &what, unit, published, measured, DEVICE_TOLERANCE_PCT));
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
        "ssd-array-2010" => return array_checks(c),
        _ => return Vec::new(),
    };
    let mut b = Builder {
        device: name,
        paper,
        checks: Vec::new(),
    };
    let p = |field: &str| format!("{table}.{field}");
    let big = largest_seq(c);
    match name {
        "hdd-2008" => {
            b.add("average_latency_ms", "random 4 KB read latency (seek + rotation)", "ms", &p("average_latency_ms"), rand(c, 4, 1).map(|r| r.read_latency_ms));
            b.add("sustained_read_mb_s", "sequential read, largest block", "MB/s", &p("sustained_transfer_mb_s"), big.map(|s| s.read_mb_s));
            b.add("sustained_write_mb_s", "sequential write, largest block", "MB/s", &p("sustained_transfer_mb_s"), big.map(|s| s.write_mb_s));
        }
        "ssd-2008" => {
            b.add("read_latency_ms", "random 4 KB read latency", "ms", &p("read_latency_ms"), rand(c, 4, 1).map(|r| r.read_latency_ms));
            b.add("write_latency_ms", "sequential 8 KB write latency", "ms", &p("write_latency_ms"), seq(c, 8).map(|s| s.write_latency_ms));
            b.add("sustained_read_mb_s", "sequential read, largest block", "MB/s", &p("sustained_read_mb_s"), big.map(|s| s.read_mb_s));
            b.add("sustained_write_mb_s", "sequential write, largest block", "MB/s", &p("sustained_write_mb_s"), big.map(|s| s.write_mb_s));
        }
        _ => {
            b.add("seq_read_mb_s", "sequential read, largest block", "MB/s", &p("seq_read_mb_s"), big.map(|s| s.read_mb_s));
            b.add("seq_write_mb_s", "sequential write, largest block", "MB/s", &p("seq_write_mb_s"), big.map(|s| s.write_mb_s));
            for kb in [4u32, 16] {
                let r1 = rand(c, kb, 1);
                let rq = rand(c, kb, DEEP_QUEUE_DEPTH);
                b.add(&format!("rand_read_{kb}k_ms"), &format!("random {kb} KB read latency, QD 1"), "ms", &p(&format!("rand_read_{kb}k_ms")), r1.map(|r| r.read_latency_ms));
                b.add(&format!("rand_write_{kb}k_ms"), &format!("random {kb} KB write latency, QD 1"), "ms", &p(&format!("rand_write_{kb}k_ms")), r1.map(|r| r.write_latency_ms));
                b.add(&format!("read_iops_{kb}k"), &format!("random {kb} KB read IOPS, QD {DEEP_QUEUE_DEPTH}"), "IOPS", &p(&format!("read_iops_{kb}k")), rq.map(|r| r.read_iops));
                b.add(&format!("write_iops_{kb}k"), &format!("random {kb} KB write IOPS, QD {DEEP_QUEUE_DEPTH}"), "IOPS", &p(&format!("write_iops_{kb}k")), rq.map(|r| r.write_iops));
            }
        }
    }
    b.checks
}

/// petrov2010 Table 3: bandwidth per sequential block size, IOPS per random
/// block size.
fn array_checks(c: &Characterization) -> Vec<Check> {
    let table = "devices.ssd_array_2010";
    let mut b = Builder {
        device: &c.device,
        paper: "petrov2010 Table 3",
        checks: Vec::new(),
    };
    let seq_blocks = published::numbers(&format!("{table}.seq_block_kb")).unwrap_or_default();
    for (i, kb) in seq_blocks.iter().enumerate() {
        let kb = *kb as u32;
        let point = seq(c, kb);
        for (field, measured) in [("seq_read_mb_s", point.map(|s| s.read_mb_s)), ("seq_write_mb_s", point.map(|s| s.write_mb_s))] {
            let Some(published) = published::number_at(&format!("{table}.{field}"), i) else { continue };
            let id = format!("devices.{}.{field}_{kb}k", c.device);
            let what = format!("{}: sequential {} {kb} KB", c.device, if field.contains("read") { "read" } else { "write" });
            b.checks.push(Check::within_pct(&id, b.paper, &what, "MB/s", published, measured.unwrap_or(f64::NAN), DEVICE_TOLERANCE_PCT));
        }
    }
    let rand_blocks = published::numbers(&format!("{table}.rand_block_kb")).unwrap_or_default();
    for (i, kb) in rand_blocks.iter().enumerate() {
        let kb = *kb as u32;
        let point = rand(c, kb, DEEP_QUEUE_DEPTH);
        for (field, measured) in [("rand_read_iops", point.map(|r| r.read_iops)), ("rand_write_iops", point.map(|r| r.write_iops))] {
            let Some(published) = published::number_at(&format!("{table}.{field}"), i) else { continue };
            let id = format!("devices.{}.{field}_{kb}k", c.device);
            let what = format!("{}: random {} {kb} KB, QD {DEEP_QUEUE_DEPTH}", c.device, if field.contains("read") { "read" } else { "write" });
            b.checks.push(Check::within_pct(&id, b.paper, &what, "IOPS", published, measured.unwrap_or(f64::NAN), DEVICE_TOLERANCE_PCT));
        }
    }
    b.checks
}

fn table_for(c: &Characterization) -> Table {
    let mut table = Table {
        title: format!("{}: measured figures", c.device),
        columns: ["point", "block KB", "QD", "read", "write", "read latency ms", "write latency ms"]
            .map(String::from)
            .to_vec(),
        rows: Vec::new(),
    };
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

fn bandwidth_figure(all: &[Characterization]) -> Result<Figure, String> {
    let mut series = Vec::new();
    for c in all {
        series.push(Series {
            name: format!("{} read", c.device),
            points: c.sequential.iter().map(|s| (f64::from(s.block_kb), s.read_mb_s)).collect(),
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
