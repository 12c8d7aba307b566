//! lee2008 section 6: temporary table spaces on disk and on flash.
//!
//! - Figure 6: the time x address pattern of one external sort's temp I/O,
//!   on `hdd-2008` and `ssd-2008`: sequential run writes, then merge reads
//!   scattered over the runs;
//! - Figure 7a: sort time against cluster size (2 to 128 KB) with 2 MB of
//!   memory; Figure 7b: sort time against memory at each device's best
//!   cluster (measured in 7a);
//! - Figure 8: hash join and sort-merge join of two 200 MB tables with 2 MB
//!   of memory, with their patterns and elapsed times.
//!
//! The input is the sort benchmark's 100-byte records (2,000,000 of them,
//! 200 MB, as in the paper; `--quick` sorts 400,000, 40 MB, and says so),
//! generated on the fly: like the paper's figures, the times exclude
//! reading the input table, and include the operator's CPU (charged on the
//! two simulated 1.86 GHz cores at the prices of `temp::cpu`). Each run
//! starts on a fresh device; no number is tuned per experiment.

use flashlab_devices::trace::traced::TracedDevice;
use flashlab_devices::trace::{Space, Tracer};
use flashlab_devices::{DeviceRef, TraceRecord, presets};
use flashlab_engine::temp::tuple::{KeyDist, RECORD_BYTES, SortRecords, Validator};
use flashlab_engine::temp::{
    ExternalSort, HashJoin, HashJoinConfig, HashJoinStats, MergeJoin, MergeJoinConfig,
    MergeJoinStats, PartitionLayout, SortConfig, SortKey, SortStats, TempSpace,
};
use flashlab_runtime::{NS_PER_S, Rt, Sim, SimConfig};

use super::{Experiment, RunContext};
use crate::chart::{LineChart, Series};
use crate::check::Check;
use crate::published;
use crate::report::{ExperimentResult, Figure, RawFile, Table, fmt_num};

const HDD: &str = "hdd-2008";
const SSD: &str = "ssd-2008";
const KB: usize = 1 << 10;
const MB: usize = 1 << 20;
/// The paper's memory for Figures 6, 7a and 8: 2 MB.
const MEMORY_BYTES: usize = 2 * MB;
/// The paper's input: 2,000,000 tuples (about 200 MB).
const TUPLES_FULL: u64 = 2_000_000;
/// `--quick`: a fifth of it.
const TUPLES_QUICK: u64 = 400_000;
/// Figure 7a's cluster sizes.
const CLUSTERS_KB: [usize; 8] = [2, 4, 8, 16, 32, 64, 128, 256];
/// Figure 7b's memory sizes, as fractions of the input (2% to 40%): the
/// paper's claim concerns memory up to 20% of the input.
const MEMORY_FRACTIONS: [f64; 6] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.2];

fn tuples(ctx: &RunContext) -> u64 {
    if ctx.quick { TUPLES_QUICK } else { TUPLES_FULL }
}

fn input_bytes(ctx: &RunContext) -> u64 {
    tuples(ctx) * RECORD_BYTES as u64
}

fn scale_note(ctx: &RunContext) -> String {
    if ctx.quick {
        format!(
            "--quick: the inputs are {} tuples ({} MB) instead of the paper's 2,000,000 (200 MB); memory is still 2 MB, so there are fewer runs and fewer merge passes than in the full run",
            TUPLES_QUICK,
            TUPLES_QUICK * RECORD_BYTES as u64 / MB as u64
        )
    } else {
        "inputs at the paper's size: 2,000,000 tuples of 100 bytes (200 MB)".into()
    }
}

/// A device for the temp space, traced if asked.
fn temp_device(name: &str, tracer: Option<&Tracer>) -> Result<DeviceRef, String> {
    let device = presets::open_simulated(name).map_err(|e| e.to_string())?;
    Ok(match tracer {
        Some(t) => std::sync::Arc::new(TracedDevice::new(device, Space::Temp, t.clone())),
        None => device,
    })
}

/// One simulated sort.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SortRun {
    pub device: String,
    pub memory_bytes: usize,
    pub cluster_bytes: usize,
    pub elapsed_s: f64,
    pub run_generation_s: f64,
    pub merge_s: f64,
    pub stats: SortStats,
    #[serde(skip)]
    pub trace: Vec<TraceRecord>,
}

fn sim<T: Send + 'static>(
    ctx: &RunContext,
    f: impl FnOnce(Rt) -> T + Send + 'static,
) -> Result<T, String> {
    let config = SimConfig {
        seed: ctx.seed,
        cores: 2,
        ..SimConfig::default()
    };
    let (outcome, _) = Sim::run(config, f).map_err(|e| e.to_string())?;
    outcome
        .finished()
        .ok_or_else(|| "simulation stopped".to_string())
}

/// Sort `n` generated records on `device` and check the output like valsort.
pub fn sort_once(
    ctx: &RunContext,
    device: &str,
    n: u64,
    memory_bytes: usize,
    cluster_bytes: usize,
    trace: bool,
) -> Result<SortRun, String> {
    sort_with(ctx, device, n, memory_bytes, cluster_bytes, false, trace)
}

/// [`sort_once`], optionally with read-ahead (double-buffered merge inputs).
pub fn sort_with(
    ctx: &RunContext,
    device: &str,
    n: u64,
    memory_bytes: usize,
    cluster_bytes: usize,
    read_ahead: bool,
    trace: bool,
) -> Result<SortRun, String> {
    let device = device.to_string();
    let seed = ctx.seed;
    sim(ctx, move |rt| -> Result<SortRun, String> {
        let tracer = trace.then(Tracer::new);
        let space = TempSpace::new(temp_device(&device, tracer.as_ref())?, None)
            .map_err(|e| e.to_string())?;
        let mut config = SortConfig::new(memory_bytes, cluster_bytes, SortKey::sort_benchmark());
        config.read_ahead = read_ahead;
        let sort = ExternalSort::new(&space, config).map_err(|e| e.to_string())?;
        let start = rt.now_ns();
        let mut input = SortRecords::new(seed, n);
        let mut stream = sort.sort(&mut input).map_err(|e| e.to_string())?;
        let mut check = Validator::new(SortKey::sort_benchmark());
        while let Some(t) = stream.next_tuple().map_err(|e| e.to_string())? {
            check.add(t).map_err(|e| e.to_string())?;
        }
        let elapsed_ns = rt.now_ns() - start;
        let stats = stream.finish();
        if check.sum.tuples != n || check.sum.unordered != 0 {
            return Err(format!(
                "sort on {device}: {} tuples out of {n}, {} out of order",
                check.sum.tuples, check.sum.unordered
            ));
        }
        if space.used_bytes() != 0 {
            return Err(format!("sort on {device}: temp space not freed"));
        }
        Ok(SortRun {
            device: device.clone(),
            memory_bytes,
            cluster_bytes,
            elapsed_s: elapsed_ns as f64 / NS_PER_S as f64,
            run_generation_s: stats.run_generation_ns as f64 / NS_PER_S as f64,
            merge_s: (stats.intermediate_merge_ns + stats.final_merge_ns) as f64 / NS_PER_S as f64,
            stats,
            trace: tracer.map(|t| t.records()).unwrap_or_default(),
        })
    })?
}

/// Which join.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoinKind {
    Hash(PartitionLayout),
    SortMerge,
}

/// One simulated join.
#[derive(Clone, Debug, serde::Serialize)]
pub struct JoinRun {
    pub device: String,
    pub kind: String,
    pub elapsed_s: f64,
    pub first_phase_s: f64,
    pub output_tuples: u64,
    pub hash: Option<HashJoinStats>,
    pub sort_merge: Option<MergeJoinStats>,
    #[serde(skip)]
    pub trace: Vec<TraceRecord>,
}

/// Join two generated tables of `n` records that match one to one.
pub fn join_once(
    ctx: &RunContext,
    device: &str,
    n: u64,
    kind: JoinKind,
    memory_bytes: usize,
    cluster_bytes: usize,
    trace: bool,
) -> Result<JoinRun, String> {
    let device = device.to_string();
    let seed = ctx.seed;
    sim(ctx, move |rt| -> Result<JoinRun, String> {
        let tracer = trace.then(Tracer::new);
        let space = TempSpace::new(temp_device(&device, tracer.as_ref())?, None)
            .map_err(|e| e.to_string())?;
        let mut left = SortRecords::with_keys(seed, n, KeyDist::Permutation { salt: 1 });
        let mut right =
            SortRecords::with_keys(seed + 1, n, KeyDist::Permutation { salt: 2 }).starting_at(n);
        let key = SortKey::sort_benchmark;
        let mut matched = 0u64;
        let mut bad = 0u64;
        let mut sink = |a: &[u8], b: &[u8]| {
            matched += 1;
            if a[..10] != b[..10] {
                bad += 1;
            }
            Ok(())
        };
        let start = rt.now_ns();
        let (name, first_ns, hash, sort_merge) = match kind {
            JoinKind::Hash(layout) => {
                let config = HashJoinConfig::new(memory_bytes, cluster_bytes, layout, key(), key());
                let join = HashJoin::new(&space, config).map_err(|e| e.to_string())?;
                let stats = join
                    .join(&mut left, &mut right, &mut sink)
                    .map_err(|e| e.to_string())?;
                (
                    format!("hash join, {}", layout.name()),
                    stats.partition_ns,
                    Some(stats),
                    None,
                )
            }
            JoinKind::SortMerge => {
                let config = MergeJoinConfig::new(memory_bytes, cluster_bytes, key(), key());
                let join = MergeJoin::new(&space, config).map_err(|e| e.to_string())?;
                let stats = join
                    .join(&mut left, &mut right, &mut sink)
                    .map_err(|e| e.to_string())?;
                (
                    "sort-merge join".to_string(),
                    stats.sort_ns,
                    None,
                    Some(stats),
                )
            }
        };
        let elapsed_ns = rt.now_ns() - start;
        if matched != n || bad != 0 || space.used_bytes() != 0 {
            return Err(format!(
                "{name} on {device}: {matched} matches of {n}, {bad} wrong, {} temp bytes left",
                space.used_bytes()
            ));
        }
        Ok(JoinRun {
            device: device.clone(),
            kind: name,
            elapsed_s: elapsed_ns as f64 / NS_PER_S as f64,
            first_phase_s: first_ns as f64 / NS_PER_S as f64,
            output_tuples: matched,
            hash,
            sort_merge,
            trace: tracer.map(|t| t.records()).unwrap_or_default(),
        })
    })?
}

fn trace_figure(
    id: &str,
    title: &str,
    caption: &str,
    records: &[TraceRecord],
) -> Result<Figure, String> {
    Ok(Figure {
        id: id.into(),
        title: title.into(),
        caption: caption.into(),
        svg: crate::plot::trace_img_html(records, title).map_err(|e| e.to_string())?,
    })
}

fn trace_csv(name: &str, records: &[TraceRecord]) -> Result<RawFile, String> {
    let mut csv = Vec::new();
    flashlab_devices::trace::formats::write_flashlab_csv(records, &mut csv)
        .map_err(|e| e.to_string())?;
    Ok(RawFile {
        name: name.into(),
        contents: csv,
    })
}

fn s(x: f64) -> String {
    format!("{x:.1}")
}

/// lee2008 Figure 6.
pub struct Figure6;

/// "Almost an order of magnitude" (lee2008 section 6.1), as a ratio.
const MERGE_ORDER_OF_MAGNITUDE: f64 = 10.0;

impl Experiment for Figure6 {
    fn id(&self) -> &'static str {
        "lee2008-figure6"
    }

    fn title(&self) -> &'static str {
        "lee2008 Figure 6: the I/O pattern of an external sort"
    }

    fn run(&self, ctx: &RunContext) -> Result<ExperimentResult, String> {
        let started = std::time::Instant::now();
        let key = "lee2008.figure7_external_sort";
        let cluster = |dev: &str| {
            published::number(&format!("{key}.buffer_sweep_cluster_kb_{dev}")).unwrap_or(64.0)
                as usize
                * KB
        };
        let n = tuples(ctx);
        let hdd = sort_once(ctx, HDD, n, MEMORY_BYTES, cluster("hdd"), true)?;
        let ssd = sort_once(ctx, SSD, n, MEMORY_BYTES, cluster("ssd"), true)?;
        let mut figures = Vec::new();
        let mut raw_files = Vec::new();
        let mut rows = Vec::new();
        for (name, r) in [("hdd", &hdd), ("ssd", &ssd)] {
            figures.push(trace_figure(
                &format!("lee2008-figure6-{name}"),
                &format!("External sort, temp space on {} ({} KB clusters, 2 MB memory)", r.device, r.cluster_bytes / KB),
                "Time x address of every temp-space request: runs written one after the other (writes), then the merge reading all runs in parallel (reads scattered over the whole region).",
                &r.trace,
            )?);
            raw_files.push(trace_csv(
                &format!("lee2008-figure6-{name}-temp-trace.csv"),
                &r.trace,
            )?);
            rows.push(vec![
                r.device.clone(),
                (r.cluster_bytes / KB).to_string(),
                r.stats.runs.to_string(),
                r.stats.final_fan_in.to_string(),
                format!("{:.2}", r.stats.passes),
                s(r.run_generation_s),
                s(r.merge_s),
                s(r.elapsed_s),
            ]);
        }
        let merge_ratio = hdd.merge_s / ssd.merge_s;
        let gen_ratio = hdd.run_generation_s / ssd.run_generation_s;
        // lee2008 section 6.1 gives the two phases in words: run generation
        // "comparable" on both devices (read as a ratio of 1), the merge
        // "almost an order of magnitude shorter" on the SSD (read as 10).
        let checks = vec![
            Check::ratio(
                "lee2008.figure6.merge_hdd_over_ssd",
                "lee2008 Figure 6 (section 6.1)",
                "merge phase, disk time over SSD time (\"almost an order of magnitude\", read as 10)",
                MERGE_ORDER_OF_MAGNITUDE,
                merge_ratio,
            )
            .with_miss_note(&format!(
                "the disk merged in {:.1} s and the SSD in {:.1} s ({} runs, one cluster of each run read at a time): the SSD's 2 KB clusters pay its fixed per-request cost ({} ms a read, lee2008 Table 1) for every 2 KB, while the disk's 64 KB clusters amortise a seek and a rotation over 32 times as much data",
                hdd.merge_s, ssd.merge_s, ssd.stats.runs, 0.2
            )),
            Check::ratio(
                "lee2008.figure6.run_generation_hdd_over_ssd",
                "lee2008 Figure 6 (section 6.1)",
                "run generation, disk time over SSD time (\"comparable\", read as 1)",
                1.0,
                gen_ratio,
            )
            .with_miss_note(&format!(
                "run generation took {:.1} s on the disk and {:.1} s on the SSD: the SSD writes its runs in 2 KB clusters, each a request paying the controller's fixed cost and a whole flash-page program, against the disk's 64 KB clusters (Figure 7a shows the same per-request cost)",
                hdd.run_generation_s, ssd.run_generation_s
            )),
        ];
        Ok(ExperimentResult {
            id: self.id().into(),
            title: self.title().into(),
            paper: "lee2008 section 6.1, Figure 6".into(),
            description: format!(
                "One external sort of the sort benchmark's records with 2 MB of memory, temp space on the modelled 2008 disk or SSD, at the cluster sizes the paper used for each (64 KB and 2 KB, its Figure 7a optima); {}.",
                scale_note(ctx)
            ),
            tables: vec![Table {
                title: "The two phases".into(),
                columns: ["device", "cluster KB", "runs", "merge fan-in", "passes", "run generation s", "merge s", "total s"].map(String::from).to_vec(),
                rows,
            }],
            figures,
            checks,
            notes: vec![
                format!("Run generation took {gen_ratio:.2} times as long on the disk as on the SSD (the paper: comparable); merging took {merge_ratio:.1} times as long (the paper: almost an order of magnitude). Charged CPU: {:.1} s on the disk run, {:.1} s on the SSD run.", hdd.stats.cpu_ns as f64 / NS_PER_S as f64, ssd.stats.cpu_ns as f64 / NS_PER_S as f64),
                "Runs are written with write-behind (two clusters in flight behind the one being filled). The modelled disk has its write cache off, so whenever the CPU of filling a cluster outlasts the previous write the platter turns past the next sector and the write waits for it; small clusters pay this most. The merge reads one cluster of each run at a time, synchronously: on the disk a seek and a rotational delay per cluster.".into(),
            ],
            data: serde_json::json!({"hdd": hdd, "ssd": ssd}),
            raw_files,
            host_seconds: started.elapsed().as_secs_f64(),
        })
    }
}

/// lee2008 Figure 7 (a and b) and its checks.
pub struct Figure7;

/// One curve of Figure 7a: device, read-ahead, (cluster KB, seconds).
type Curve = (String, bool, Vec<(usize, f64)>);

fn best(points: &[(usize, f64)]) -> (usize, f64) {
    points
        .iter()
        .copied()
        .fold((0, f64::INFINITY), |b, p| if p.1 < b.1 { p } else { b })
}

fn sensitivity(points: &[(usize, f64)]) -> f64 {
    let max = points.iter().map(|p| p.1).fold(0.0, f64::max);
    let min = points.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    max / min
}

fn mb_per_s(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 / MB as f64 / seconds.max(1e-9)
}

impl Experiment for Figure7 {
    fn id(&self) -> &'static str {
        "lee2008-figure7"
    }

    fn title(&self) -> &'static str {
        "lee2008 Figure 7: external sort time against cluster size and memory"
    }

    fn run(&self, ctx: &RunContext) -> Result<ExperimentResult, String> {
        let started = std::time::Instant::now();
        let key = "lee2008.figure7_external_sort";
        let n = tuples(ctx);
        // Figure 7a, without read-ahead (what the checks use) and with it.
        let mut sweep: Vec<(bool, SortRun)> = Vec::new();
        let mut a_rows = Vec::new();
        let mut curves: Vec<Curve> = Vec::new();
        for read_ahead in [false, true] {
            for device in [HDD, SSD] {
                let mut points = Vec::new();
                for kb in CLUSTERS_KB {
                    let r = sort_with(ctx, device, n, MEMORY_BYTES, kb * KB, read_ahead, false)?;
                    points.push((kb, r.elapsed_s));
                    a_rows.push(vec![
                        device.to_string(),
                        if read_ahead { "yes" } else { "no" }.to_string(),
                        kb.to_string(),
                        r.stats.runs.to_string(),
                        r.stats.fan_in.to_string(),
                        r.stats.final_fan_in.to_string(),
                        r.stats.merge_steps.to_string(),
                        format!("{:.2}", r.stats.passes),
                        s(r.run_generation_s),
                        s(r.merge_s),
                        s(r.elapsed_s),
                    ]);
                    sweep.push((read_ahead, r));
                }
                curves.push((device.to_string(), read_ahead, points));
            }
        }
        let (best_hdd, _) = best(&curves[0].2);
        let (best_ssd, _) = best(&curves[1].2);
        let (ra_best_hdd, _) = best(&curves[2].2);
        let (ra_best_ssd, _) = best(&curves[3].2);
        let sens_hdd = sensitivity(&curves[0].2);
        let sens_ssd = sensitivity(&curves[1].2);

        // Figure 7b: memory sweep at the paper's cluster sizes (64 KB disk,
        // 2 KB SSD), as Figure 6 does; no read-ahead.
        let p = |field: &str| published::number(&format!("{key}.{field}")).unwrap_or(f64::NAN);
        let b_hdd = p("buffer_sweep_cluster_kb_hdd") as usize;
        let b_ssd = p("buffer_sweep_cluster_kb_ssd") as usize;
        let input = input_bytes(ctx) as f64;
        let mut b_rows = Vec::new();
        let mut b_points: Vec<(f64, f64, f64)> = Vec::new();
        let mut b_runs: Vec<(SortRun, SortRun)> = Vec::new();
        let mut memories: Vec<usize> = MEMORY_FRACTIONS
            .iter()
            .map(|f| ((input * f) as usize / (4 * KB)).max(1) * 4 * KB)
            .map(|m| m.max(8 * b_hdd.max(b_ssd) * KB))
            .collect();
        memories.dedup();
        for memory in memories {
            let h = sort_once(ctx, HDD, n, memory, b_hdd * KB, false)?;
            let sd = sort_once(ctx, SSD, n, memory, b_ssd * KB, false)?;
            b_rows.push(vec![
                format!("{:.2}", memory as f64 / MB as f64),
                format!("{:.1}", 100.0 * memory as f64 / input),
                s(h.elapsed_s),
                h.stats.runs.to_string(),
                format!("{:.2}", h.stats.passes),
                s(sd.elapsed_s),
                sd.stats.runs.to_string(),
                format!("{:.2}", sd.stats.passes),
                format!("{:.2}", h.elapsed_s / sd.elapsed_s),
            ]);
            b_points.push((memory as f64 / MB as f64, h.elapsed_s, sd.elapsed_s));
            b_runs.push((h, sd));
        }
        let min_speedup = b_runs
            .iter()
            .filter(|(h, _)| h.memory_bytes as f64 <= 0.2 * input)
            .map(|(h, sd)| h.elapsed_s / sd.elapsed_s)
            .fold(f64::INFINITY, f64::min);

        let find = |device: &str, kb: usize, ahead: bool| {
            sweep
                .iter()
                .find(|(a, r)| *a == ahead && r.device == device && r.cluster_bytes == kb * KB)
                .map(|(_, r)| r)
        };
        let mechanism = optimum_note(&find, best_hdd, best_ssd, ra_best_hdd, ra_best_ssd);
        let sweep_points = |points: &[(usize, f64)]| -> Vec<(f64, f64)> {
            points.iter().map(|&(kb, t)| (kb as f64, t)).collect()
        };
        let mut check_hdd = Check::optimum(
            "lee2008.figure7.best_cluster_hdd",
            "lee2008 Figure 7a",
            "best cluster size with the temp space on the disk",
            "KB",
            p("best_cluster_kb_hdd"),
            &sweep_points(&curves[0].2),
        );
        if !check_hdd.pass {
            check_hdd.note = format!("{} {mechanism}", check_hdd.note).trim().to_string();
        }
        let mut check_ssd = Check::optimum(
            "lee2008.figure7.best_cluster_ssd",
            "lee2008 Figure 7a",
            "best cluster size with the temp space on the SSD",
            "KB",
            p("best_cluster_kb_ssd"),
            &sweep_points(&curves[1].2),
        );
        check_ssd.note = format!(
            "{} the paper's optimum is 2 KB; this one is {best_ssd} KB ({ra_best_ssd} KB with read-ahead). {mechanism}",
            check_ssd.note
        )
        .trim()
        .to_string();
        let mut check_sens = Check::at_most(
            "lee2008.figure7.sensitivity_ssd_over_hdd",
            "lee2008 Figure 7a",
            "sensitivity to cluster size (slowest over fastest sort), the SSD's over the disk's: the SSD is less sensitive",
            "x",
            1.0,
            sens_ssd / sens_hdd,
        );
        check_sens.note = format!("disk {sens_hdd:.2}x, SSD {sens_ssd:.2}x");
        let mut check_speedup = Check::at_least(
            "lee2008.figure7b.ssd_speedup_at_small_memory",
            "lee2008 Figure 7b",
            "disk time over SSD time (64 KB and 2 KB clusters), smallest over memory sizes up to 20% of the input",
            "x",
            p("ssd_speedup_when_buffer_at_most_20pct_of_input"),
            min_speedup,
        );
        if !check_speedup.pass {
            check_speedup.note = speedup_note(&b_runs, 0.2 * input);
        }

        let a_chart = LineChart {
            title: "Figure 7a: sort time against cluster size (2 MB memory)".into(),
            x_label: "cluster size (KB)".into(),
            y_label: "elapsed seconds".into(),
            log_x: true,
            series: curves
                .iter()
                .map(|(d, ahead, pts)| Series {
                    name: format!("{d}{}", if *ahead { ", read-ahead" } else { "" }),
                    points: pts.iter().map(|&(kb, t)| (kb as f64, t)).collect(),
                    published: false,
                })
                .collect(),
        };
        let b_chart = LineChart {
            title: format!(
                "Figure 7b: sort time against memory (disk at {b_hdd} KB, SSD at {b_ssd} KB clusters)"
            ),
            x_label: "memory (MB)".into(),
            y_label: "elapsed seconds".into(),
            log_x: true,
            series: vec![
                Series {
                    name: format!("{HDD}, {b_hdd} KB"),
                    points: b_points.iter().map(|p| (p.0, p.1)).collect(),
                    published: false,
                },
                Series {
                    name: format!("{SSD}, {b_ssd} KB"),
                    points: b_points.iter().map(|p| (p.0, p.2)).collect(),
                    published: false,
                },
            ],
        };
        let mut csv = String::from(
            "figure,device,read_ahead,memory_bytes,cluster_bytes,runs,passes,run_generation_s,merge_s,elapsed_s\n",
        );
        let rows = sweep.iter().map(|(a, r)| ("7a", *a, r)).chain(
            b_runs
                .iter()
                .flat_map(|(h, sd)| [("7b", false, h), ("7b", false, sd)]),
        );
        for (fig, ahead, r) in rows {
            csv.push_str(&format!(
                "{fig},{},{ahead},{},{},{},{:.3},{:.3},{:.3},{:.3}\n",
                r.device,
                r.memory_bytes,
                r.cluster_bytes,
                r.stats.runs,
                r.stats.passes,
                r.run_generation_s,
                r.merge_s,
                r.elapsed_s
            ));
        }
        let data_a: Vec<_> = sweep
            .iter()
            .map(|(a, r)| serde_json::json!({"read_ahead": a, "run": r}))
            .collect();
        Ok(ExperimentResult {
            id: self.id().into(),
            title: self.title().into(),
            paper: "lee2008 section 6.1, Figure 7".into(),
            description: format!(
                "External sort of the sort benchmark's records, temp space on the modelled 2008 disk or SSD. (a) 2 MB of memory, clusters of 2 to 256 KB (one size past the paper's 128 KB, so an optimum at 128 KB can be told from the end of the sweep), without read-ahead (the configuration the checks use, fixed before measuring) and with it (every merge input double-buffered); (b) memory from 0.5% to 20% of the input at the paper's cluster sizes (64 KB on the disk, 2 KB on the SSD), without read-ahead. Quicksort run generation, write-behind of two clusters, intermediate merge fan-in floor((M - 3C) / C) and final fan-in floor(M / C) (halved inputs with read-ahead). {}.",
                scale_note(ctx)
            ),
            tables: vec![
                Table {
                    title: "Figure 7a: cluster size sweep (2 MB memory)".into(),
                    columns: [
                        "device",
                        "read-ahead",
                        "cluster KB",
                        "runs",
                        "fan-in",
                        "final fan-in",
                        "merge steps",
                        "passes",
                        "run generation s",
                        "merge s",
                        "total s",
                    ]
                    .map(String::from)
                    .to_vec(),
                    rows: a_rows,
                },
                Table {
                    title: "Figure 7b: memory sweep".into(),
                    columns: [
                        "memory MB",
                        "% of input",
                        "disk s",
                        "disk runs",
                        "disk passes",
                        "SSD s",
                        "SSD runs",
                        "SSD passes",
                        "disk / SSD",
                    ]
                    .map(String::from)
                    .to_vec(),
                    rows: b_rows,
                },
            ],
            figures: vec![
                Figure {
                    id: "lee2008-figure7a".into(),
                    title: "Figure 7a".into(),
                    caption: format!(
                        "Paper: the disk is best at 64 KB and sensitive to the cluster size; the SSD is best at 2 KB and less sensitive. Measured optima without read-ahead: disk {best_hdd} KB, SSD {best_ssd} KB; with read-ahead: disk {ra_best_hdd} KB, SSD {ra_best_ssd} KB."
                    ),
                    svg: a_chart.to_svg()?,
                },
                Figure {
                    id: "lee2008-figure7b".into(),
                    title: "Figure 7b".into(),
                    caption: "Paper: the SSD at least twice as fast as the disk while memory is at most 20% of the input.".into(),
                    svg: b_chart.to_svg()?,
                },
            ],
            checks: vec![check_hdd, check_ssd, check_sens, check_speedup],
            notes: vec![mechanism],
            data: serde_json::json!({"figure7a": data_a, "figure7b": b_runs, "best_cluster_kb": {"hdd": best_hdd, "ssd": best_ssd, "hdd_read_ahead": ra_best_hdd, "ssd_read_ahead": ra_best_ssd}}),
            raw_files: vec![RawFile {
                name: "lee2008-figure7.csv".into(),
                contents: csv.into_bytes(),
            }],
            host_seconds: started.elapsed().as_secs_f64(),
        })
    }
}

/// What decides each device's optimum, in the measured numbers.
fn optimum_note<'a>(
    find: &dyn Fn(&str, usize, bool) -> Option<&'a SortRun>,
    best_hdd: usize,
    best_ssd: usize,
    ra_best_hdd: usize,
    ra_best_ssd: usize,
) -> String {
    let per_read_ms = |r: Option<&SortRun>| {
        r.map(|r| r.merge_s * 1000.0 / r.stats.clusters_read.max(1) as f64)
            .unwrap_or(f64::NAN)
    };
    let write_rate = |r: Option<&SortRun>| {
        r.map(|r| mb_per_s(r.stats.input_bytes, r.run_generation_s))
            .unwrap_or(f64::NAN)
    };
    let passes = |kb: usize| {
        find(HDD, kb, false)
            .map(|r| r.stats.passes)
            .unwrap_or(f64::NAN)
    };
    let runs = find(HDD, 16, false).map(|r| r.stats.runs).unwrap_or(0);
    format!(
        "What sets the optimum. Without read-ahead a merge reads one cluster of one run at a time, so merging costs (clusters read) x (time per read), with clusters read = passes x input / cluster; the passes grow once the runs ({runs} at 16 KB) outnumber the fan-in floor((M - 3C) / C): {:.2} passes at 32 KB, {:.2} at 64 KB, {:.2} at 128 KB. \
         Disk: the merge spends {:.1} ms per cluster read at 2 KB and {:.1} ms at 128 KB (merge time over clusters read, the merge's CPU included), nearly all of it seek and rotation at 2 KB, so a larger cluster wins even at the price of more passes: best at {best_hdd} KB. \
         SSD: {:.2} ms per cluster read at 2 KB, {:.2} ms at 16 KB and {:.2} ms at 128 KB, and run generation proceeds at {:.1} MB/s with 2 KB clusters against {:.1} MB/s with 16 KB: each request pays the controller's fixed overhead and whole flash-page operations, so small clusters lose more to per-request cost than the wider fan-in saves, and once the fan-in forces a second pass the extra reads and writes cost more than larger transfers save; best at {best_ssd} KB ({:.2} passes there). \
         With read-ahead (every input double-buffered, so reads of many runs are in flight at once and the SSD's four chips work in parallel) the optima are {ra_best_hdd} KB on the disk and {ra_best_ssd} KB on the SSD. The paper's 2 KB optimum would need a device whose per-request cost shrinks with the request down to 2 KB, which neither the paper's Table 1 (0.2 ms a read) nor this model has.",
        passes(32),
        passes(64),
        passes(128),
        per_read_ms(find(HDD, 2, false)),
        per_read_ms(find(HDD, 128, false)),
        per_read_ms(find(SSD, 2, false)),
        per_read_ms(find(SSD, 16, false)),
        per_read_ms(find(SSD, 128, false)),
        write_rate(find(SSD, 2, false)),
        write_rate(find(SSD, 16, false)),
        find(SSD, best_ssd, false)
            .map(|r| r.stats.passes)
            .unwrap_or(f64::NAN),
    )
}

fn speedup_note(runs: &[(SortRun, SortRun)], limit_bytes: f64) -> String {
    let eligible: Vec<&(SortRun, SortRun)> = runs
        .iter()
        .filter(|(h, _)| h.memory_bytes as f64 <= limit_bytes)
        .collect();
    let ratio = |p: &&(SortRun, SortRun)| p.0.elapsed_s / p.1.elapsed_s;
    let worst = eligible.iter().min_by(|a, b| ratio(a).total_cmp(&ratio(b)));
    let best_ratio = eligible.iter().map(ratio).fold(0.0, f64::max);
    let per_read_ms = |r: &SortRun| r.merge_s * 1000.0 / r.stats.clusters_read.max(1) as f64;
    match worst {
        Some((h, s)) => format!(
            "At {:.1} MB of memory (the smallest ratio) the disk took {:.1} s (run generation {:.1} s, merge {:.1} s) and the SSD {:.1} s (run generation {:.1} s, merge {:.1} s). Run generation costs about the same on both devices, as in the paper, because the CPU of run generation ({:.1} s charged over the whole sort on the SSD) is as large as the SSD's run writes. The merge decides, and with one pass the disk's merge is only {:.1} times the SSD's: the disk reads {} KB clusters in {:.1} ms each (merge time over clusters read, CPU included), amortising its seek and rotation over a large transfer, while the SSD reads {} KB clusters in {:.2} ms each, paying its fixed per-request cost and the merge's CPU. The paper's disk merge was nearly an order of magnitude slower than its SSD merge. Where several merge passes are needed (the smallest memory sizes) the SSD is up to {:.1} times as fast.",
            h.memory_bytes as f64 / MB as f64,
            h.elapsed_s,
            h.run_generation_s,
            h.merge_s,
            s.elapsed_s,
            s.run_generation_s,
            s.merge_s,
            s.stats.cpu_ns as f64 / NS_PER_S as f64,
            h.merge_s / s.merge_s.max(1e-9),
            h.cluster_bytes / KB,
            per_read_ms(h),
            s.cluster_bytes / KB,
            per_read_ms(s),
            best_ratio,
        ),
        None => String::new(),
    }
}

/// lee2008 Figure 8.
///
/// The paper does not give its cluster size for the joins. Both joins here
/// use one cluster on both devices, chosen by a planner's rule rather than
/// by measurement: the largest power of two with which the hash join needs
/// a single partitioning pass ([`HashJoinConfig::single_pass_cluster_bytes`]:
/// 8 KB for a 200 MB build input and 2 MB of memory, since about 170
/// partitions are needed). The sort-merge join's sorts use the same
/// cluster, so the joins and the devices differ only in what is compared.
pub struct Figure8;

impl Experiment for Figure8 {
    fn id(&self) -> &'static str {
        "lee2008-figure8"
    }

    fn title(&self) -> &'static str {
        "lee2008 Figure 8: hash join and sort-merge join, disk against flash"
    }

    fn run(&self, ctx: &RunContext) -> Result<ExperimentResult, String> {
        let started = std::time::Instant::now();
        let key = "lee2008.figure8_joins";
        let n = tuples(ctx);
        let c = HashJoinConfig::single_pass_cluster_bytes(MEMORY_BYTES, n, RECORD_BYTES)
            .ok_or("no cluster size partitions the join in one pass")?;
        let hash = JoinKind::Hash(PartitionLayout::AppendLinked);
        let hj_hdd = join_once(ctx, HDD, n, hash, MEMORY_BYTES, c, true)?;
        let hj_ssd = join_once(ctx, SSD, n, hash, MEMORY_BYTES, c, true)?;
        let smj_hdd = join_once(ctx, HDD, n, JoinKind::SortMerge, MEMORY_BYTES, c, true)?;
        let smj_ssd = join_once(ctx, SSD, n, JoinKind::SortMerge, MEMORY_BYTES, c, true)?;
        let regions = JoinKind::Hash(PartitionLayout::Regions {
            extent_clusters: 16,
        });
        let rg_hdd = join_once(ctx, HDD, n, regions, MEMORY_BYTES, c, false)?;
        let rg_ssd = join_once(ctx, SSD, n, regions, MEMORY_BYTES, c, false)?;
        let p = |field: &str| published::number(&format!("{key}.{field}")).unwrap_or(f64::NAN);
        let row = |r: &JoinRun, published: f64| {
            vec![
                r.kind.clone(),
                r.device.clone(),
                s(r.first_phase_s),
                s(r.elapsed_s - r.first_phase_s),
                s(r.elapsed_s),
                fmt_num(published),
            ]
        };
        let rows = vec![
            row(&hj_hdd, p("hash_join_hdd_s")),
            row(&hj_ssd, p("hash_join_ssd_s")),
            row(&smj_hdd, p("sort_merge_join_hdd_s")),
            row(&smj_ssd, p("sort_merge_join_ssd_s")),
            row(&rg_hdd, f64::NAN),
            row(&rg_ssd, f64::NAN),
        ];
        let hj_ratio = hj_hdd.elapsed_s / hj_ssd.elapsed_s;
        let smj_ratio = smj_hdd.elapsed_s / smj_ssd.elapsed_s;
        let ssd_pair =
            hj_ssd.elapsed_s.max(smj_ssd.elapsed_s) / hj_ssd.elapsed_s.min(smj_ssd.elapsed_s);
        let floor_note = |what: &str, h: &JoinRun, sd: &JoinRun, lo: f64, hi: f64| {
            let cpu_s = |r: &JoinRun| {
                r.hash
                    .as_ref()
                    .map(|x| x.cpu_ns)
                    .or(r.sort_merge.as_ref().map(|x| x.cpu_ns))
                    .unwrap_or(0) as f64
                    / NS_PER_S as f64
            };
            let f_lo = ((h.elapsed_s - hi * sd.elapsed_s) / (hi - 1.0)).max(0.0);
            let f_hi = (h.elapsed_s - lo * sd.elapsed_s) / (lo - 1.0);
            format!(
                "{what}: the disk took {:.1} s ({:.1} s writing, {:.1} s reading back) and the SSD {:.1} s ({:.1} s, {:.1} s), each including {:.1} s of charged CPU. The disk pays a seek and a rotation for every scattered read (and, with its write cache off, a wait for the platter whenever the CPU of filling a page outlasts the previous write), the SSD a fraction of a millisecond. The paper's SSD times for its two joins agree within 0.6% (226.0 s and 224.7 s), the mark of a cost common to both joins and independent of the device, most likely the server's per-tuple work, which flashlab's measured operator prices do not reproduce and the once-calibrated CPU model (per statement, lee2008 Table 2) has no term for. A device-independent {:.0} to {:.0} s added to both runs would bring this ratio into the pass range; none is added.",
                h.elapsed_s,
                h.first_phase_s,
                h.elapsed_s - h.first_phase_s,
                sd.elapsed_s,
                sd.first_phase_s,
                sd.elapsed_s - sd.first_phase_s,
                cpu_s(sd),
                f_lo,
                f_hi.max(f_lo),
            )
        };
        let mut checks = vec![
            Check::ratio(
                "lee2008.figure8.hash_join_hdd_over_ssd",
                "lee2008 Figure 8",
                "hash join, disk time over SSD time",
                p("hash_join_hdd_s") / p("hash_join_ssd_s"),
                hj_ratio,
            ),
            Check::ratio(
                "lee2008.figure8.sort_merge_join_hdd_over_ssd",
                "lee2008 Figure 8",
                "sort-merge join, disk time over SSD time",
                p("sort_merge_join_hdd_s") / p("sort_merge_join_ssd_s"),
                smj_ratio,
            ),
            Check::ratio(
                "lee2008.figure8.ssd_hash_vs_sort_merge",
                "lee2008 Figure 8",
                "on the SSD, the slower join's time over the faster's",
                p("hash_join_ssd_s").max(p("sort_merge_join_ssd_s"))
                    / p("hash_join_ssd_s").min(p("sort_merge_join_ssd_s")),
                ssd_pair,
            ),
        ];
        if !checks[0].pass {
            let (lo, hi) = (checks[0].range[0], checks[0].range[1]);
            checks[0].note = floor_note("hash join", &hj_hdd, &hj_ssd, lo, hi);
        }
        if !checks[1].pass {
            let (lo, hi) = (checks[1].range[0], checks[1].range[1]);
            checks[1].note = floor_note("sort-merge join", &smj_hdd, &smj_ssd, lo, hi);
        }
        if !checks[2].pass {
            checks[2].note = format!(
                "on the SSD the hash join took {:.1} s ({:.1} s partitioning) and the sort-merge join {:.1} s ({:.1} s sorting)",
                hj_ssd.elapsed_s, hj_ssd.first_phase_s, smj_ssd.elapsed_s, smj_ssd.first_phase_s
            );
        }
        let mut figures = Vec::new();
        let mut raw_files = Vec::new();
        for (name, r) in [
            ("hash-hdd", &hj_hdd),
            ("hash-ssd", &hj_ssd),
            ("sort-merge-hdd", &smj_hdd),
            ("sort-merge-ssd", &smj_ssd),
        ] {
            figures.push(trace_figure(
                &format!("lee2008-figure8-{name}"),
                &format!("{} on {} ({:.1} s)", r.kind, r.device, r.elapsed_s),
                "Time x address of every temp-space request: sequential (append-only) writes, then scattered reads, in both joins.",
                &r.trace,
            )?);
            raw_files.push(trace_csv(
                &format!("lee2008-figure8-{name}-temp-trace.csv"),
                &r.trace,
            )?);
        }
        let hs = hj_hdd.hash.clone().unwrap_or_default();
        Ok(ExperimentResult {
            id: self.id().into(),
            title: self.title().into(),
            paper: "lee2008 section 6.2, Figure 8".into(),
            description: format!(
                "Equi-join of two generated tables whose keys match one to one, 2 MB of memory, {} KB clusters and partition pages, temp space on the modelled 2008 disk or SSD. The hash join writes partitions in lee2008's layout ({}); it ran with {} partitions and {} level(s). The same hash join with per-partition regions of 16 clusters is shown for comparison. {}.",
                c / KB,
                PartitionLayout::AppendLinked.name(),
                hs.partitions,
                hs.levels,
                scale_note(ctx)
            ),
            tables: vec![Table {
                title: "Elapsed time".into(),
                columns: [
                    "join",
                    "device",
                    "partition / sort s",
                    "probe / merge s",
                    "total s",
                    "paper s",
                ]
                .map(String::from)
                .to_vec(),
                rows,
            }],
            figures,
            checks,
            notes: vec![
                format!(
                    "The paper's times are several times ours in absolute terms (its server took 226 s to hash-join on the SSD, flashlab {:.0} s): the commercial server's per-tuple costs are not modelled beyond the measured prices of flashlab's own operators; the checks compare ratios.",
                    hj_ssd.elapsed_s
                ),
                format!(
                    "On the disk the hash join took {:.0} s against the sort-merge join's {:.0} s (the paper: 661 s against 1,453 s): the sorts merge in one pass each, so both joins write and read every tuple once, and both read back in scattered {} KB requests.",
                    hj_hdd.elapsed_s,
                    smj_hdd.elapsed_s,
                    c / KB
                ),
                format!(
                    "Per-partition regions turn the partition writes into scattered writes: {:.1} s on the disk and {:.1} s on the SSD, whose super-block FTL pays for random writes; lee2008's append-only layout writes sequentially and pays with scattered reads instead, which flash serves well.",
                    rg_hdd.elapsed_s, rg_ssd.elapsed_s
                ),
            ],
            data: serde_json::json!({"hash_hdd": hj_hdd, "hash_ssd": hj_ssd, "sort_merge_hdd": smj_hdd, "sort_merge_ssd": smj_ssd, "hash_regions_hdd": rg_hdd, "hash_regions_ssd": rg_ssd}),
            raw_files,
            host_seconds: started.elapsed().as_secs_f64(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_and_joins_run_verified_and_traced_on_both_devices() {
        let ctx = RunContext {
            quick: true,
            seed: 3,
        };
        for device in [HDD, SSD] {
            let r = sort_once(&ctx, device, 20_000, 256 * KB, 8 * KB, true).unwrap();
            assert!(r.stats.runs > 1 && r.elapsed_s > 0.0, "{device}");
            assert!(r.trace.iter().all(|t| t.space == Space::Temp));
            assert!(r.trace.len() as u64 >= r.stats.clusters_written);
            for kind in [
                JoinKind::Hash(PartitionLayout::AppendLinked),
                JoinKind::Hash(PartitionLayout::Regions { extent_clusters: 4 }),
                JoinKind::SortMerge,
            ] {
                let j = join_once(&ctx, device, 10_000, kind, 256 * KB, 8 * KB, false).unwrap();
                assert_eq!(j.output_tuples, 10_000, "{device} {kind:?}");
            }
        }
        assert_eq!(
            HashJoinConfig::single_pass_cluster_bytes(MEMORY_BYTES, TUPLES_FULL, RECORD_BYTES),
            Some(8 * KB)
        );
    }
}
