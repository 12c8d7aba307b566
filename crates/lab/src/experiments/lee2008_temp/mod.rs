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

use anyhow::anyhow;
use flashlab_devices::trace::traced::TracedDevice;
use flashlab_devices::trace::{Space, Tracer};
use flashlab_devices::{DeviceRef, TraceRecord, presets};
use flashlab_engine::temp::tuple::{KeyDist, RECORD_BYTES, SortRecords, Validator};
use flashlab_engine::temp::{
    ExternalSort, HashJoin, HashJoinConfig, HashJoinStats, MergeJoin, MergeJoinConfig,
    MergeJoinStats, PartitionLayout, SortConfig, SortKey, SortStats, TempSpace,
};
use flashlab_runtime::{NS_PER_S, Rt, Sim, SimConfig};

use super::RunContext;
use crate::chart::{LineChart, Series};
use crate::check::Check;
use crate::published;
use crate::report::{Figure, RawFile, Table, fmt_num};

mod figure6;
mod figure7;
mod figure8;

pub use figure6::Figure6;
pub use figure7::Figure7;
pub use figure8::Figure8;

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
fn temp_device(name: &str, tracer: Option<&Tracer>) -> anyhow::Result<DeviceRef> {
    let device = presets::open_simulated_never_crashing(name).map_err(|e| anyhow!("{e}"))?;
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
) -> anyhow::Result<T> {
    let config = SimConfig {
        seed: ctx.seed,
        cores: 2,
        ..SimConfig::default()
    };
    let (outcome, _) = Sim::run(config, f).map_err(|e| anyhow!("{e}"))?;
    outcome
        .finished()
        .ok_or_else(|| anyhow!("simulation stopped"))
}

/// Run `f` in a simulated world over a fresh temp space on the preset
/// `device`, its requests traced when `trace`: `f` is given the runtime,
/// the space, the device's name and the run's seed; `f`'s result, and the
/// trace.
fn on_temp_space<T: Send + 'static>(
    ctx: &RunContext,
    device: &str,
    trace: bool,
    f: impl FnOnce(&Rt, &TempSpace, String, u64) -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<(T, Vec<TraceRecord>)> {
    let (device, seed) = (device.to_string(), ctx.seed);
    sim(ctx, move |rt| -> anyhow::Result<(T, Vec<TraceRecord>)> {
        let tracer = trace.then(Tracer::new);
        let space = TempSpace::new(temp_device(&device, tracer.as_ref())?, None)
            .map_err(|e| anyhow!("{e}"))?;
        let run = f(&rt, &space, device, seed)?;
        Ok((run, tracer.map(|t| t.records()).unwrap_or_default()))
    })?
}

/// Sort `n` generated records on `device` and check the output like valsort.
pub fn sort_once(
    ctx: &RunContext,
    device: &str,
    n: u64,
    memory_bytes: usize,
    cluster_bytes: usize,
    trace: bool,
) -> anyhow::Result<SortRun> {
    sort_with(ctx, device, n, memory_bytes, cluster_bytes, true, trace)
}

/// [`sort_once`] with overlapped merge reads on (the engine's default, what
/// [`sort_once`] runs) or off (each cluster read when its run runs dry).
pub fn sort_with(
    ctx: &RunContext,
    device: &str,
    n: u64,
    memory_bytes: usize,
    cluster_bytes: usize,
    overlap: bool,
    trace: bool,
) -> anyhow::Result<SortRun> {
    let (run, trace) = on_temp_space(ctx, device, trace, move |rt, space, device, seed| {
        let mut config = SortConfig::new(memory_bytes, cluster_bytes, SortKey::sort_benchmark());
        config.overlap = overlap;
        let sort = ExternalSort::new(space, config).map_err(|e| anyhow!("{e}"))?;
        let start = rt.now_ns();
        let mut input = SortRecords::new(seed, n);
        let mut stream = sort.sort(&mut input).map_err(|e| anyhow!("{e}"))?;
        let mut check = Validator::new(SortKey::sort_benchmark());
        while let Some(t) = stream.next_tuple().map_err(|e| anyhow!("{e}"))? {
            check.add(t).map_err(|e| anyhow!("{e}"))?;
        }
        let elapsed_ns = rt.now_ns() - start;
        let stats = stream.finish();
        if check.sum.tuples != n || check.sum.unordered != 0 {
            return Err(anyhow!(
                "sort on {device}: {} tuples out of {n}, {} out of order",
                check.sum.tuples,
                check.sum.unordered
            ));
        }
        if space.used_bytes() != 0 {
            return Err(anyhow!("sort on {device}: temp space not freed"));
        }
        Ok(SortRun {
            device,
            memory_bytes,
            cluster_bytes,
            elapsed_s: elapsed_ns as f64 / NS_PER_S as f64,
            run_generation_s: stats.run_generation_ns as f64 / NS_PER_S as f64,
            merge_s: (stats.intermediate_merge_ns + stats.final_merge_ns) as f64 / NS_PER_S as f64,
            stats,
            trace: Vec::new(),
        })
    })?;
    Ok(SortRun { trace, ..run })
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
) -> anyhow::Result<JoinRun> {
    let (run, trace) = on_temp_space(ctx, device, trace, move |rt, space, device, seed| {
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
                let join = HashJoin::new(space, config).map_err(|e| anyhow!("{e}"))?;
                let stats = join
                    .join(&mut left, &mut right, &mut sink)
                    .map_err(|e| anyhow!("{e}"))?;
                (
                    format!("hash join, {}", layout.name()),
                    stats.partition_ns,
                    Some(stats),
                    None,
                )
            }
            JoinKind::SortMerge => {
                let config = MergeJoinConfig::new(memory_bytes, cluster_bytes, key(), key());
                let join = MergeJoin::new(space, config).map_err(|e| anyhow!("{e}"))?;
                let stats = join
                    .join(&mut left, &mut right, &mut sink)
                    .map_err(|e| anyhow!("{e}"))?;
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
            return Err(anyhow!(
                "{name} on {device}: {matched} matches of {n}, {bad} wrong, {} temp bytes left",
                space.used_bytes()
            ));
        }
        Ok(JoinRun {
            device,
            kind: name,
            elapsed_s: elapsed_ns as f64 / NS_PER_S as f64,
            first_phase_s: first_ns as f64 / NS_PER_S as f64,
            output_tuples: matched,
            hash,
            sort_merge,
            trace: Vec::new(),
        })
    })?;
    Ok(JoinRun { trace, ..run })
}

fn trace_figure(
    id: &str,
    title: &str,
    caption: &str,
    records: &[TraceRecord],
) -> anyhow::Result<Figure> {
    Ok(Figure {
        id: id.into(),
        title: title.into(),
        caption: caption.into(),
        svg: crate::plot::trace_img_html(records, title).map_err(|e| anyhow!("{e}"))?,
    })
}

/// One trace figure a run, `{figure}-{name}`: `title_and_trace` gives the
/// title and the records of a run; every figure has `caption`.
fn trace_figures<R>(
    figure: &str,
    caption: &str,
    runs: &[(&str, &R)],
    title_and_trace: impl Fn(&R) -> (String, &[TraceRecord]),
) -> anyhow::Result<Vec<Figure>> {
    runs.iter()
        .map(|(name, run)| {
            let (title, records) = title_and_trace(run);
            trace_figure(&format!("{figure}-{name}"), &title, caption, records)
        })
        .collect()
}

fn trace_csv(name: &str, records: &[TraceRecord]) -> anyhow::Result<RawFile> {
    let mut csv = Vec::new();
    flashlab_devices::trace::formats::write_flashlab_csv(records, &mut csv)
        .map_err(|e| anyhow!("{e}"))?;
    Ok(RawFile {
        name: name.into(),
        contents: csv,
    })
}

fn s(x: f64) -> String {
    format!("{x:.1}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_and_joins_run_verified_and_traced_on_both_devices() {
        let ctx = RunContext::new(true, 3);
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
