//! # External merge sort
//!
//! Two phases, as lee2008 Figure 6 shows them on the device:
//!
//! 1. **Run generation.** Tuples are read into memory until the budget is
//!    full, then either sorted (quicksort of each memory load: Rust's
//!    pattern-defeating quicksort on an index of 8-byte key prefixes, ties
//!    broken by position, so each load sorts stably) and written as one run,
//!    or, with [`RunGeneration::ReplacementSelection`], kept in a heap from
//!    which the smallest tuple not smaller than the last one written goes
//!    out while the next input tuple comes in (runs of about twice the
//!    memory on random input). Runs are written sequentially, cluster by
//!    cluster, with write-behind. If the whole input fits in memory, no run
//!    is written and nothing touches the temp space.
//! 2. **Merging.** Runs are merged through a tournament (loser) tree. With
//!    [`SortConfig::overlap`] (the default) each merge forecasts
//!    (`forecast.rs`): the memory its inputs and outputs leave holds reads
//!    of the clusters to be needed next, several in flight at once, issued
//!    in the order the runs will run dry. Without it every cluster is read
//!    when its run runs dry, one request at a time.
//!
//! ## Memory and the fan-in rule
//!
//! With memory budget `M` and cluster `C`, each merge input holds one
//! cluster, and with overlap `R = FORECAST_CLUSTERS_MIN` (2) clusters are
//! kept for forecast reads in every merge step (`R = 0` without):
//!
//! - run generation holds tuples in `M - (W + 1)C`: the cluster being
//!   filled and `W` written behind it, 64 KB of clusters or an eighth of
//!   `M` if less, 2 to 32 of them ([`super::cluster::run_write_behind`]),
//!   so small clusters keep as many writes in flight as a merge keeps
//!   reads;
//! - an intermediate merge step, whose output goes to the temp space, has
//!   fan-in `F = floor((M - 3C) / C) - R`;
//! - the final merge, whose output goes to the consumer, has fan-in
//!   `F_final = floor(M / C) - R`.
//!
//! A merge of `k` runs forecasts with every cluster left over: `floor((M -
//! 3C) / C) - k` in an intermediate step, `floor(M / C) - k` in the final
//! merge. So the sort needs `M >= 5C` (`7C` with overlap) to make progress:
//! two inputs, the forecast clusters and the three output clusters; less is
//! refused before anything is allocated. With `R` runs and `R > F_final`, intermediate steps run
//! until `F_final` runs are left. Every intermediate step but the first
//! merges `F` runs; the first merges just enough,
//! `R - F_final - (s - 1)(F - 1) + 1` runs, where
//! `s = ceil((R - F_final) / (F - 1))` is the number of
//! steps (Knuth's rule: the fewest tuples are merged twice). Each step
//! merges the window of consecutive runs with the fewest bytes, so runs stay
//! in input order and ties are broken by run position: the sort is stable
//! (TEMP-4). [`SortStats::passes`] is `1 + (bytes merged by intermediate
//! steps) / (input bytes)`.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

use flashlab_runtime::Rt;
use serde::Serialize;

use super::cluster::{IoPool, OUTPUT_CLUSTERS, WRITE_BEHIND_CLUSTERS, run_write_behind};
use super::cpu::{CpuMeter, OperatorCosts};
use super::forecast::{FORECAST_CLUSTERS_MIN, Forecast, ForecastStats, READS_IN_FLIGHT_MAX};
use super::run::{Run, RunReader, RunWriter};
use super::space::TempSpace;
use super::tuple::{SortKey, TUPLE_OVERHEAD_BYTES, TupleSource, key_prefix};
use super::{Result, TempError, validate_cluster_bytes};

/// Bookkeeping counted for each tuple in the replacement-selection heap (a
/// heap entry holding the tuple and its key in allocations of their own).
pub const RS_TUPLE_OVERHEAD_BYTES: usize = 72;
/// I/O worker tasks of an operator by default: one for each write behind
/// and each read a merge may keep in flight, so every request the operator
/// issues reaches the device at once (run generation's write-behind, at most
/// [`super::cluster::RUN_WRITE_BEHIND_CLUSTERS_MAX`], fits in as many).
pub const IO_WORKERS_DEFAULT: usize = WRITE_BEHIND_CLUSTERS + READS_IN_FLIGHT_MAX;

/// How runs are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunGeneration {
    /// Fill memory, sort it, write it.
    Quicksort,
    /// A heap that streams tuples out while new ones come in.
    ReplacementSelection,
}

impl RunGeneration {
    pub fn as_str(self) -> &'static str {
        match self {
            RunGeneration::Quicksort => "quicksort",
            RunGeneration::ReplacementSelection => "replacement-selection",
        }
    }
}

/// How to sort.
#[derive(Clone, Debug)]
pub struct SortConfig {
    /// Every buffer of the sort (see the fan-in rule in the module essay).
    pub memory_bytes: usize,
    /// The unit of temp I/O, 2 KB to 256 KB, a multiple of the sector.
    pub cluster_bytes: usize,
    pub run_generation: RunGeneration,
    /// Overlap merge reads with merging: forecast the clusters needed next
    /// and keep several reads in flight (`forecast.rs`). On by default; off
    /// reads each cluster when its run runs dry.
    pub overlap: bool,
    /// I/O worker tasks (write-behind, forecast reads).
    pub io_workers: usize,
    pub key: SortKey,
    pub costs: OperatorCosts,
}

impl SortConfig {
    /// Quicksort runs, overlapped merge reads, the measured CPU costs.
    pub fn new(memory_bytes: usize, cluster_bytes: usize, key: SortKey) -> SortConfig {
        SortConfig {
            memory_bytes,
            cluster_bytes,
            run_generation: RunGeneration::Quicksort,
            overlap: true,
            io_workers: IO_WORKERS_DEFAULT,
            key,
            costs: OperatorCosts::default(),
        }
    }

    /// Clusters every merge step keeps for forecast reads.
    pub fn forecast_reserve(&self) -> usize {
        if self.overlap {
            FORECAST_CLUSTERS_MIN
        } else {
            0
        }
    }

    /// Clusters of memory an intermediate merge step shares among its
    /// inputs and forecast reads (what its output clusters leave).
    pub fn merge_clusters(&self) -> usize {
        self.memory_bytes
            .saturating_sub(OUTPUT_CLUSTERS * self.cluster_bytes)
            / self.cluster_bytes
    }

    /// Fan-in of an intermediate merge step (output to temp).
    pub fn fan_in(&self) -> usize {
        self.merge_clusters()
            .saturating_sub(self.forecast_reserve())
    }

    /// Fan-in of the final merge (output to the consumer).
    pub fn final_fan_in(&self) -> usize {
        (self.memory_bytes / self.cluster_bytes).saturating_sub(self.forecast_reserve())
    }

    /// Forecasting for a merge that may use `clusters` of memory beyond
    /// its inputs; `None` without overlap.
    pub(crate) fn forecast(&self, pool: &Arc<IoPool>, clusters: usize) -> Option<Forecast> {
        if !self.overlap {
            return None;
        }
        Forecast::new(pool, self.io_workers, self.cluster_bytes, clusters)
    }

    /// Cluster writes run generation keeps in flight behind the cluster it
    /// fills ([`run_write_behind`]).
    pub fn run_write_behind(&self) -> usize {
        run_write_behind(self.memory_bytes, self.cluster_bytes)
    }

    /// Memory for tuples during run generation: all but its output clusters.
    pub fn load_bytes(&self) -> usize {
        self.memory_bytes
            .saturating_sub((self.run_write_behind() + 1) * self.cluster_bytes)
    }

    /// Check the settings against the temp device's sector.
    pub fn validate(&self, sector_bytes: u32) -> Result<()> {
        validate_cluster_bytes(self.cluster_bytes, sector_bytes)?;
        if self.fan_in() < 2 {
            let clusters = 2 + self.forecast_reserve() + OUTPUT_CLUSTERS;
            return Err(TempError::Memory(format!(
                "{} bytes hold {} clusters of {} bytes; an external sort needs at least {clusters} ({}one being filled and two written behind it)",
                self.memory_bytes,
                self.memory_bytes / self.cluster_bytes,
                self.cluster_bytes,
                if self.overlap {
                    "two inputs to merge, two forecast reads (overlap on), three output clusters: "
                } else {
                    "two inputs to merge, three output clusters: "
                }
            )));
        }
        Ok(())
    }
}

/// What one sort did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SortStats {
    pub input_tuples: u64,
    pub input_bytes: u64,
    pub memory_bytes: u64,
    pub cluster_bytes: u64,
    pub run_generation: String,
    /// The input fitted in memory: no temp I/O at all.
    pub in_memory: bool,
    /// Runs made by run generation.
    pub runs: u64,
    pub fan_in: u64,
    pub final_fan_in: u64,
    /// Intermediate merge steps.
    pub merge_steps: u64,
    /// Runs merged by the final merge.
    pub final_runs: u64,
    /// Bytes written by intermediate merge steps.
    pub intermediate_bytes: u64,
    /// 1 + intermediate bytes / input bytes.
    pub passes: f64,
    /// Merge reads overlapped by forecasting.
    pub overlap: bool,
    /// Forecast reads of every merge (intermediate and final).
    pub forecast: ForecastStats,
    /// Clusters run generation writes behind the one being filled.
    pub write_behind_clusters: u64,
    pub clusters_written: u64,
    pub clusters_read: u64,
    pub compares: u64,
    /// Simulated CPU charged (0 in the real world's accounting is still the
    /// model's figure; the real CPU is not measured here).
    pub cpu_ns: u64,
    pub run_generation_ns: u64,
    pub intermediate_merge_ns: u64,
    pub final_merge_ns: u64,
}

/// A memory load of tuples for quicksort run generation.
pub struct Load {
    data: Vec<u8>,
    keys: Vec<u8>,
    entries: Vec<Entry>,
    budget: usize,
}

#[derive(Clone, Copy)]
struct Entry {
    prefix: u64,
    off: u32,
    len: u32,
    key_off: u32,
    key_len: u32,
}

impl Load {
    pub fn new(budget: usize) -> Load {
        Load {
            data: Vec::new(),
            keys: Vec::new(),
            entries: Vec::new(),
            budget,
        }
    }

    fn used(&self) -> usize {
        self.data.len() + self.keys.len() + self.entries.len() * TUPLE_OVERHEAD_BYTES
    }

    fn clear(&mut self) {
        self.data.clear();
        self.keys.clear();
        self.entries.clear();
    }

    /// Add a tuple if it fits; false (and nothing added) if not.
    pub fn try_push(&mut self, tuple: &[u8], key: &SortKey) -> Result<bool> {
        let key_off = self.keys.len();
        let (prefix, key_len) = match key.identity() {
            Some(_) => (key_prefix(key.slice(tuple)?), 0),
            None => {
                key.normalize_into(tuple, &mut self.keys)?;
                let k = &self.keys[key_off..];
                (key_prefix(k), k.len())
            }
        };
        if self.used() + tuple.len() + TUPLE_OVERHEAD_BYTES > self.budget {
            self.keys.truncate(key_off);
            return Ok(false);
        }
        let off = self.data.len();
        self.data.extend_from_slice(tuple);
        self.entries.push(Entry {
            prefix,
            off: off as u32,
            len: tuple.len() as u32,
            key_off: key_off as u32,
            key_len: key_len as u32,
        });
        Ok(true)
    }

    #[inline]
    fn tuple(&self, e: &Entry) -> &[u8] {
        &self.data[e.off as usize..(e.off + e.len) as usize]
    }

    #[inline]
    fn key<'a>(&'a self, e: &Entry, key: &SortKey) -> &'a [u8] {
        match key.identity() {
            Some((o, l)) => &self.data[e.off as usize + o..e.off as usize + o + l],
            None => &self.keys[e.key_off as usize..(e.key_off + e.key_len) as usize],
        }
    }

    /// Sort stably (ties by position), counting comparisons.
    pub fn sort(&mut self, key: &SortKey, cpu: &mut CpuMeter) {
        let mut compares = 0u64;
        let mut entries = std::mem::take(&mut self.entries);
        let this = &*self;
        entries.sort_unstable_by(|a, b| {
            compares += 1;
            a.prefix
                .cmp(&b.prefix)
                .then_with(|| this.key(a, key).cmp(this.key(b, key)))
                .then(a.off.cmp(&b.off))
        });
        self.entries = entries;
        cpu.compares(compares);
    }
}

/// A sorted input: in memory, or runs on the temp space in input order.
pub(crate) enum Generated {
    Memory(Load),
    Runs(Vec<Run>),
}

/// An external merge sort over one temp space.
pub struct ExternalSort {
    space: TempSpace,
    config: SortConfig,
    key: Arc<SortKey>,
}

impl ExternalSort {
    /// Check the settings; nothing is allocated yet.
    pub fn new(space: &TempSpace, config: SortConfig) -> Result<ExternalSort> {
        config.validate(space.sector_bytes())?;
        Ok(ExternalSort {
            space: space.clone(),
            key: Arc::new(config.key.clone()),
            config,
        })
    }

    pub fn config(&self) -> &SortConfig {
        &self.config
    }

    /// Sort `input`. The result streams the final merge; temp space held
    /// by the sort is freed as the stream is dropped.
    pub fn sort(&self, input: &mut dyn TupleSource) -> Result<SortedStream> {
        let rt = Rt::current();
        let start_ns = rt.now_ns();
        let pool = Arc::new(IoPool::new(&self.space, self.config.io_workers));
        let mut cpu = CpuMeter::new(self.config.costs);
        let mut stats = self.new_stats();
        let generated = self.generate(input, &pool, &mut cpu, &mut stats)?;
        stats.run_generation_ns = rt.now_ns() - start_ns;
        match generated {
            Generated::Memory(load) => {
                stats.in_memory = true;
                Ok(SortedStream::memory(load, self.key.clone(), cpu, stats))
            }
            Generated::Runs(mut runs) => {
                let merge_start = rt.now_ns();
                self.reduce(
                    &mut runs,
                    self.config.final_fan_in(),
                    &pool,
                    &mut cpu,
                    &mut stats,
                )?;
                stats.intermediate_merge_ns = rt.now_ns() - merge_start;
                let forecast = self.final_forecast_clusters(runs.len());
                Ok(self.stream(runs, &pool, forecast, cpu, stats))
            }
        }
    }

    pub(crate) fn new_stats(&self) -> SortStats {
        SortStats {
            memory_bytes: self.config.memory_bytes as u64,
            cluster_bytes: self.config.cluster_bytes as u64,
            run_generation: self.config.run_generation.as_str().into(),
            fan_in: self.config.fan_in() as u64,
            final_fan_in: self.config.final_fan_in() as u64,
            overlap: self.config.overlap,
            write_behind_clusters: self.config.run_write_behind() as u64,
            passes: 1.0,
            ..SortStats::default()
        }
    }

    /// Clusters the final merge of `runs` runs may forecast with: all
    /// of memory but its inputs.
    pub(crate) fn final_forecast_clusters(&self, runs: usize) -> usize {
        (self.config.memory_bytes / self.config.cluster_bytes).saturating_sub(runs)
    }

    /// The final merge of `runs` as a stream, forecasting with
    /// `forecast_clusters` of memory.
    pub(crate) fn stream(
        &self,
        runs: Vec<Run>,
        pool: &Arc<IoPool>,
        forecast_clusters: usize,
        cpu: CpuMeter,
        mut stats: SortStats,
    ) -> SortedStream {
        stats.final_runs = runs.len() as u64;
        if stats.input_bytes > 0 {
            stats.passes = 1.0 + stats.intermediate_bytes as f64 / stats.input_bytes as f64;
        }
        let readers = runs
            .into_iter()
            .map(|run| RunReader::new(run, &self.key))
            .collect();
        let forecast = self.config.forecast(pool, forecast_clusters);
        SortedStream {
            state: State::Merge {
                merge: Merge::new(readers, forecast),
                started: false,
            },
            key: self.key.clone(),
            cpu,
            stats,
            start_ns: Rt::current().now_ns(),
            _pool: Some(pool.clone()),
        }
    }

    /// Phase 1: runs (or everything in memory).
    pub(crate) fn generate(
        &self,
        input: &mut dyn TupleSource,
        pool: &Arc<IoPool>,
        cpu: &mut CpuMeter,
        stats: &mut SortStats,
    ) -> Result<Generated> {
        let fixed_len = input.fixed_len();
        let mut load = Load::new(self.config.load_bytes());
        let mut runs = Vec::new();
        let mut pending: Option<Vec<u8>> = None;
        loop {
            load.clear();
            if let Some(t) = pending.take() {
                self.push_or_refuse(&mut load, &t)?;
            }
            let mut ended = true;
            while let Some(t) = input.next_tuple()? {
                stats.input_tuples += 1;
                stats.input_bytes += t.len() as u64;
                cpu.tuples(1, t.len() as u64);
                if !load.try_push(t, &self.config.key)? {
                    if load.entries.is_empty() {
                        return Err(self.too_big(t.len()));
                    }
                    pending = Some(t.to_vec());
                    ended = false;
                    break;
                }
            }
            if ended && runs.is_empty() {
                load.sort(&self.config.key, cpu);
                stats.compares = cpu.compares;
                return Ok(Generated::Memory(load));
            }
            if self.config.run_generation == RunGeneration::ReplacementSelection {
                return self.replacement_selection(load, pending, input, pool, cpu, stats);
            }
            load.sort(&self.config.key, cpu);
            runs.push(self.write_load(&load, fixed_len, pool, cpu, stats)?);
            if ended {
                break;
            }
        }
        stats.compares = cpu.compares;
        Ok(Generated::Runs(runs))
    }

    fn push_or_refuse(&self, load: &mut Load, tuple: &[u8]) -> Result<()> {
        if load.try_push(tuple, &self.config.key)? {
            return Ok(());
        }
        Err(self.too_big(tuple.len()))
    }

    fn too_big(&self, tuple_bytes: usize) -> TempError {
        TempError::Memory(format!(
            "a tuple of {} bytes (with its key and {TUPLE_OVERHEAD_BYTES} bytes of bookkeeping) does not fit in the {} bytes left for tuples (memory_bytes {} less three output clusters of {})",
            tuple_bytes,
            self.config.load_bytes(),
            self.config.memory_bytes,
            self.config.cluster_bytes
        ))
    }

    /// Write a sorted load as one run.
    pub(crate) fn write_load(
        &self,
        load: &Load,
        fixed_len: Option<usize>,
        pool: &Arc<IoPool>,
        cpu: &mut CpuMeter,
        stats: &mut SortStats,
    ) -> Result<Run> {
        let mut writer = RunWriter::new(
            &self.space,
            pool,
            self.config.cluster_bytes,
            fixed_len,
            self.config.run_write_behind(),
        );
        for e in &load.entries {
            let t = load.tuple(e);
            cpu.tuples(1, t.len() as u64);
            writer.push(t, load.key(e, &self.config.key), cpu)?;
        }
        let run = writer.finish(cpu)?;
        stats.runs += 1;
        stats.clusters_written += run.clusters;
        Ok(run)
    }

    /// Replacement selection, starting from a full (unsorted) load.
    fn replacement_selection(
        &self,
        load: Load,
        mut pending: Option<Vec<u8>>,
        input: &mut dyn TupleSource,
        pool: &Arc<IoPool>,
        cpu: &mut CpuMeter,
        stats: &mut SortStats,
    ) -> Result<Generated> {
        let key = &self.config.key;
        let budget = self.config.load_bytes();
        let size = |item: &RsItem| item.tuple.len() + item.key.len() + RS_TUPLE_OVERHEAD_BYTES;
        let mut heap: BinaryHeap<RsItem> = BinaryHeap::new();
        let mut used = 0usize;
        let mut seq = 0u64;
        let mut output = RsOutput {
            writer: None,
            current_run: 0,
            last_key: None,
            runs: Vec::new(),
            fixed_len: input.fixed_len(),
        };
        // The load's tuples go in first, in input order, then the one that
        // did not fit, then the rest of the input.
        let mut order: Vec<&Entry> = load.entries.iter().collect();
        order.sort_unstable_by_key(|e| e.off);
        let mut stash: Vec<Vec<u8>> = order.into_iter().map(|e| load.tuple(e).to_vec()).collect();
        drop(load);
        stash.extend(pending.take());
        let mut stash = stash.into_iter();
        while let Some(t) = next_rs_input(&mut stash, input, cpu, stats)? {
            let k = key.normalize(&t)?;
            seq += 1;
            let mut item = RsItem {
                run: output.current_run,
                prefix: key_prefix(&k),
                key: k,
                seq,
                tuple: t,
            };
            if size(&item) > budget {
                return Err(TempError::Memory(format!(
                    "a tuple of {} bytes does not fit in the {budget} bytes left for tuples",
                    item.tuple.len()
                )));
            }
            // Make room by writing out the smallest tuples.
            while used + size(&item) > budget {
                let Some(out) = heap.pop() else { break };
                cpu.compares(2 * heap_levels(heap.len()));
                used -= size(&out);
                output.emit(self, out, pool, cpu, stats)?;
            }
            // A key below the last one written waits for the next run.
            item.run = match &output.last_key {
                Some(last) if item.key.as_slice() < last.as_slice() => output.current_run + 1,
                _ => output.current_run,
            };
            used += size(&item);
            cpu.compares(heap_levels(heap.len()));
            heap.push(item);
        }
        while let Some(out) = heap.pop() {
            cpu.compares(2 * heap_levels(heap.len()));
            output.emit(self, out, pool, cpu, stats)?;
        }
        output.finish_run(cpu, stats)?;
        stats.compares = cpu.compares;
        Ok(Generated::Runs(output.runs))
    }

    /// Intermediate merge steps until at most `target` runs are left.
    pub(crate) fn reduce(
        &self,
        runs: &mut Vec<Run>,
        target: usize,
        pool: &Arc<IoPool>,
        cpu: &mut CpuMeter,
        stats: &mut SortStats,
    ) -> Result<()> {
        let fan_in = self.config.fan_in();
        let target = target.max(1);
        while runs.len() > target {
            let excess = runs.len() - target;
            let steps = excess.div_ceil(fan_in - 1);
            let k = (excess - (steps - 1) * (fan_in - 1) + 1).clamp(2, fan_in);
            // The window of k consecutive runs with the fewest bytes.
            let mut best = 0;
            let mut best_bytes = u64::MAX;
            let mut window: u64 = runs[..k].iter().map(|r| r.stream_bytes).sum();
            for start in 0..=runs.len() - k {
                if start > 0 {
                    window =
                        window - runs[start - 1].stream_bytes + runs[start + k - 1].stream_bytes;
                }
                if window < best_bytes {
                    best_bytes = window;
                    best = start;
                }
            }
            let inputs: Vec<Run> = runs.drain(best..best + k).collect();
            let fixed_len = inputs.first().and_then(|r| r.fixed_len);
            let readers: Vec<RunReader> = inputs
                .into_iter()
                .map(|run| RunReader::new(run, &self.key))
                .collect();
            let spare = self.config.merge_clusters().saturating_sub(k);
            let mut merge = Merge::new(readers, self.config.forecast(pool, spare));
            let mut writer = RunWriter::new(
                &self.space,
                pool,
                self.config.cluster_bytes,
                fixed_len,
                WRITE_BEHIND_CLUSTERS,
            );
            merge.start(cpu)?;
            while let Some(w) = merge.winner() {
                let r = &merge.readers[w];
                cpu.tuples(1, r.tuple().len() as u64);
                writer.push(r.tuple(), r.key(), cpu)?;
                merge.next(cpu)?;
            }
            merge.finish(&mut stats.forecast);
            let out = writer.finish(cpu)?;
            stats.merge_steps += 1;
            stats.intermediate_bytes += out.stream_bytes;
            stats.clusters_written += out.clusters;
            stats.clusters_read += merge.readers.iter().map(|r| r.clusters_read).sum::<u64>();
            stats.compares = cpu.compares;
            drop(merge);
            runs.insert(best, out);
        }
        Ok(())
    }
}

/// The next tuple replacement selection takes: the stashed ones (the
/// load's, and the one that did not fit), then the rest of the input,
/// counted and charged as it is read.
fn next_rs_input(
    stash: &mut std::vec::IntoIter<Vec<u8>>,
    input: &mut dyn TupleSource,
    cpu: &mut CpuMeter,
    stats: &mut SortStats,
) -> Result<Option<Vec<u8>>> {
    if let Some(t) = stash.next() {
        return Ok(Some(t));
    }
    Ok(input.next_tuple()?.map(|t| {
        stats.input_tuples += 1;
        stats.input_bytes += t.len() as u64;
        cpu.tuples(1, t.len() as u64);
        t.to_vec()
    }))
}

/// The levels of a binary heap of `n` entries (the bits of `n`): the
/// compares a push charges, half of what a pop does.
fn heap_levels(n: usize) -> u64 {
    u64::from(usize::BITS - n.max(1).leading_zeros())
}

/// Where replacement selection writes: the run being written and the
/// runs finished.
struct RsOutput {
    writer: Option<RunWriter>,
    current_run: u64,
    /// The key last written to the current run.
    last_key: Option<Vec<u8>>,
    runs: Vec<Run>,
    fixed_len: Option<usize>,
}

impl RsOutput {
    /// Write the heap's smallest entry `out`, starting its run first if it
    /// belongs to the next one.
    fn emit(
        &mut self,
        sorter: &ExternalSort,
        out: RsItem,
        pool: &Arc<IoPool>,
        cpu: &mut CpuMeter,
        stats: &mut SortStats,
    ) -> Result<()> {
        if self.writer.is_none() || out.run != self.current_run {
            self.finish_run(cpu, stats)?;
            self.current_run = out.run;
            self.writer = Some(RunWriter::new(
                &sorter.space,
                pool,
                sorter.config.cluster_bytes,
                self.fixed_len,
                sorter.config.run_write_behind(),
            ));
        }
        cpu.tuples(1, out.tuple.len() as u64);
        if let Some(w) = self.writer.as_mut() {
            w.push(&out.tuple, &out.key, cpu)?;
        }
        self.last_key = Some(out.key);
        Ok(())
    }

    /// Finish the run being written, if any.
    fn finish_run(&mut self, cpu: &mut CpuMeter, stats: &mut SortStats) -> Result<()> {
        if let Some(w) = self.writer.take() {
            let run = w.finish(cpu)?;
            stats.runs += 1;
            stats.clusters_written += run.clusters;
            self.runs.push(run);
        }
        Ok(())
    }
}

/// A replacement-selection heap entry: ordered by (run, key, arrival).
struct RsItem {
    run: u64,
    prefix: u64,
    key: Vec<u8>,
    seq: u64,
    tuple: Vec<u8>,
}

impl RsItem {
    fn cmp_key(&self, other: &RsItem) -> Ordering {
        self.run
            .cmp(&other.run)
            .then(self.prefix.cmp(&other.prefix))
            .then_with(|| self.key.cmp(&other.key))
            .then(self.seq.cmp(&other.seq))
    }
}

impl PartialEq for RsItem {
    fn eq(&self, other: &Self) -> bool {
        self.cmp_key(other) == Ordering::Equal
    }
}
impl Eq for RsItem {}
impl PartialOrd for RsItem {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for RsItem {
    // BinaryHeap is a max-heap: reverse, so the smallest comes out first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.cmp_key(self)
    }
}

/// A tournament (loser) tree over run readers. Leaf `i` is reader `i`;
/// ties go to the lower index (the earlier run), which keeps merges stable.
/// With a [`Forecast`], reads of the clusters needed next are issued ahead
/// whenever an input loads a cluster.
pub(crate) struct Merge {
    pub readers: Vec<RunReader>,
    alive: Vec<bool>,
    /// tree[1..k]: the loser at each internal node; leaves are k..2k.
    tree: Vec<usize>,
    winner: usize,
    forecast: Option<Forecast>,
    /// Key prefix of the last tuple emitted (MERGE-4).
    last_prefix: u64,
    /// The forecast totals were taken.
    finished: bool,
}

impl Merge {
    pub fn new(readers: Vec<RunReader>, forecast: Option<Forecast>) -> Merge {
        let k = readers.len();
        Merge {
            alive: vec![false; k],
            tree: vec![0; k.max(1)],
            winner: 0,
            readers,
            forecast,
            last_prefix: 0,
            finished: false,
        }
    }

    fn less(&self, a: usize, b: usize, compares: &mut u64) -> bool {
        if !self.alive[a] {
            return false;
        }
        if !self.alive[b] {
            return true;
        }
        *compares += 1;
        let (ra, rb) = (&self.readers[a], &self.readers[b]);
        match ra.prefix.cmp(&rb.prefix) {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => match ra.key().cmp(rb.key()) {
                Ordering::Less => true,
                Ordering::Greater => false,
                Ordering::Equal => a < b,
            },
        }
    }

    fn build(&mut self, node: usize, compares: &mut u64) -> usize {
        let k = self.readers.len();
        if node >= k {
            return node - k;
        }
        let l = self.build(2 * node, compares);
        let r = self.build(2 * node + 1, compares);
        if self.less(r, l, compares) {
            self.tree[node] = l;
            r
        } else {
            self.tree[node] = r;
            l
        }
    }

    /// Read every input's first tuple, start forecasting, build the tree.
    pub fn start(&mut self, cpu: &mut CpuMeter) -> Result<()> {
        for i in 0..self.readers.len() {
            self.alive[i] = self.readers[i].advance(cpu)?;
        }
        if let Some(f) = self.forecast.as_mut() {
            for (i, r) in self.readers.iter_mut().enumerate() {
                f.note(i, r);
            }
            f.fill(&mut self.readers);
        }
        if self.readers.is_empty() {
            return Ok(());
        }
        let mut compares = 0;
        self.winner = self.build(1, &mut compares);
        cpu.compares(compares);
        self.check_order();
        Ok(())
    }

    /// MERGE-4: the winner's key is not below the last one emitted.
    fn check_order(&mut self) {
        if let Some(w) = self.winner() {
            let prefix = self.readers[w].prefix;
            assert!(
                prefix >= self.last_prefix,
                "MERGE-4: key prefix {prefix:#x} after {:#x}",
                self.last_prefix
            );
            self.last_prefix = prefix;
        }
    }

    /// The reader holding the smallest tuple, if any is left.
    #[inline]
    pub fn winner(&self) -> Option<usize> {
        (!self.readers.is_empty() && self.alive[self.winner]).then_some(self.winner)
    }

    /// Advance the winner and replay its path.
    pub fn next(&mut self, cpu: &mut CpuMeter) -> Result<()> {
        let w = self.winner;
        let loaded = self.readers[w].clusters_read;
        self.alive[w] = self.readers[w].advance(cpu)?;
        if let Some(f) = self.forecast.as_mut()
            && self.readers[w].clusters_read != loaded
        {
            f.note(w, &mut self.readers[w]);
            f.fill(&mut self.readers);
        }
        let k = self.readers.len();
        let mut compares = 0;
        let mut cur = w;
        let mut node = (w + k) / 2;
        while node >= 1 {
            let other = self.tree[node];
            if self.less(other, cur, &mut compares) {
                self.tree[node] = cur;
                cur = other;
            }
            node /= 2;
        }
        self.winner = cur;
        cpu.compares(compares);
        self.check_order();
        Ok(())
    }

    /// Add this merge's forecast counts to `total` (once).
    pub fn finish(&mut self, total: &mut ForecastStats) {
        if self.finished {
            return;
        }
        self.finished = true;
        if let Some(f) = self.forecast.as_mut() {
            f.collect(&self.readers);
            total.add(&f.stats);
        } else {
            let on_demand = self.readers.iter().map(|r| r.reads_on_demand).sum::<u64>();
            total.on_demand += on_demand;
        }
    }
}

enum State {
    Memory {
        load: Load,
        next: usize,
        current: Option<usize>,
    },
    Merge {
        merge: Merge,
        started: bool,
    },
}

/// The sorted output, tuple by tuple: `advance`, then `tuple` and `key`.
pub struct SortedStream {
    state: State,
    key: Arc<SortKey>,
    cpu: CpuMeter,
    stats: SortStats,
    start_ns: u64,
    /// Dropped last: readers wait for their reads before the workers go.
    _pool: Option<Arc<IoPool>>,
}

impl SortedStream {
    fn memory(load: Load, key: Arc<SortKey>, cpu: CpuMeter, stats: SortStats) -> SortedStream {
        SortedStream {
            state: State::Memory {
                load,
                next: 0,
                current: None,
            },
            key,
            cpu,
            stats,
            start_ns: Rt::current().now_ns(),
            _pool: None,
        }
    }

    /// Move to the next tuple; false at the end.
    pub fn advance(&mut self) -> Result<bool> {
        let more = match &mut self.state {
            State::Memory {
                load,
                next,
                current,
            } => {
                if *next < load.entries.len() {
                    *current = Some(*next);
                    *next += 1;
                    let e = load.entries[*next - 1];
                    self.cpu.tuples(1, u64::from(e.len));
                    true
                } else {
                    *current = None;
                    false
                }
            }
            State::Merge { merge, started } => {
                if !*started {
                    *started = true;
                    merge.start(&mut self.cpu)?;
                } else if merge.winner().is_some() {
                    merge.next(&mut self.cpu)?;
                }
                match merge.winner() {
                    Some(w) => {
                        self.cpu.tuples(1, merge.readers[w].tuple().len() as u64);
                        true
                    }
                    None => false,
                }
            }
        };
        if !more {
            self.finish_stats();
        }
        Ok(more)
    }

    fn finish_stats(&mut self) {
        if self.stats.final_merge_ns == 0 {
            self.cpu.settle();
            self.stats.final_merge_ns = Rt::current().now_ns() - self.start_ns;
            if let State::Merge { merge, .. } = &mut self.state {
                self.stats.clusters_read +=
                    merge.readers.iter().map(|r| r.clusters_read).sum::<u64>();
                merge.finish(&mut self.stats.forecast);
            }
            self.stats.compares = self.cpu.compares;
            self.stats.cpu_ns = self.cpu.charged_ns;
        }
    }

    /// The current tuple (empty before the first `advance` and at the end).
    pub fn tuple(&self) -> &[u8] {
        match &self.state {
            State::Memory { load, current, .. } => match current {
                Some(i) => load.tuple(&load.entries[*i]),
                None => &[],
            },
            State::Merge { merge, .. } => match merge.winner() {
                Some(w) => merge.readers[w].tuple(),
                None => &[],
            },
        }
    }

    /// The current tuple's normalised key.
    pub fn key(&self) -> &[u8] {
        match &self.state {
            State::Memory { load, current, .. } => match current {
                Some(i) => load.key(&load.entries[*i], &self.key),
                None => &[],
            },
            State::Merge { merge, .. } => match merge.winner() {
                Some(w) => merge.readers[w].key(),
                None => &[],
            },
        }
    }

    /// The next tuple, or `None` at the end.
    pub fn next_tuple(&mut self) -> Result<Option<&[u8]>> {
        Ok(if self.advance()? {
            Some(self.tuple())
        } else {
            None
        })
    }

    /// What the sort did (complete once the stream has ended).
    pub fn stats(&self) -> &SortStats {
        &self.stats
    }

    /// Settle the CPU charged so far and return the stats.
    pub fn finish(mut self) -> SortStats {
        self.finish_stats();
        self.stats.clone()
    }
}

impl TupleSource for SortedStream {
    fn next_tuple(&mut self) -> Result<Option<&[u8]>> {
        SortedStream::next_tuple(self)
    }
}

/// Spill a load that fitted in memory as one run (the merge join needs its
/// memory back for the other input).
pub(crate) fn spill(
    sort: &ExternalSort,
    generated: Generated,
    fixed_len: Option<usize>,
    pool: &Arc<IoPool>,
    cpu: &mut CpuMeter,
    stats: &mut SortStats,
) -> Result<Vec<Run>> {
    match generated {
        Generated::Runs(runs) => Ok(runs),
        Generated::Memory(load) if load.entries.is_empty() => Ok(Vec::new()),
        Generated::Memory(load) => Ok(vec![sort.write_load(&load, fixed_len, pool, cpu, stats)?]),
    }
}
