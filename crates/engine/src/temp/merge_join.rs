//! # Sort-merge join
//!
//! Both inputs are sorted on their join keys by the external sort
//! ([`super::sort`]): runs of the left input are generated with the whole
//! memory budget, then runs of the right input, then intermediate merge
//! steps reduce the two sets of runs until the final merges of *both* fit
//! at once. The two sorted streams are then merged: on equal keys, the
//! right input's group of tuples with that key is collected and joined with
//! every left tuple of the same key, so duplicates on both sides give their
//! cross product.
//!
//! Memory rule: with budget `M` and cluster `C`, the two final merges
//! together take at most `F = floor((M - 3C) / C) - R` runs (`R`: the
//! forecast clusters the sort keeps with overlap on, see `sort.rs`); the
//! `3C` left over hold the current group of right tuples. The clusters the
//! two merges' inputs leave are split between their forecasts, the left
//! merge taking the smaller half. A larger group is spilled to a temp run (the same
//! three clusters then serve as its output buffers) and read back once
//! for every left tuple with that key. An input that fits in memory is
//! still written as one run, since both inputs share the budget.
//!
//! Output order: by key; within a key, left tuples in left input order,
//! each with the right tuples in right input order (both sorts are stable).

use std::sync::Arc;

use flashlab_runtime::Rt;
use serde::Serialize;

use super::cluster::{IoPool, OUTPUT_CLUSTERS, WRITE_BEHIND_CLUSTERS};
use super::cpu::{CpuMeter, OperatorCosts};
use super::run::{Run, RunReader, RunWriter};
use super::sort::{
    ExternalSort, IO_WORKERS_DEFAULT, RunGeneration, SortConfig, SortStats, SortedStream, spill,
};
use super::space::TempSpace;
use super::tuple::{SortKey, TUPLE_OVERHEAD_BYTES, TupleSource};
use super::{JoinSink, Result};

/// How to join.
#[derive(Clone, Debug)]
pub struct MergeJoinConfig {
    pub memory_bytes: usize,
    pub cluster_bytes: usize,
    pub run_generation: RunGeneration,
    /// Overlapped (forecast) merge reads, as [`SortConfig::overlap`].
    pub overlap: bool,
    pub io_workers: usize,
    pub left_key: SortKey,
    pub right_key: SortKey,
    pub costs: OperatorCosts,
}

impl MergeJoinConfig {
    pub fn new(
        memory_bytes: usize,
        cluster_bytes: usize,
        left_key: SortKey,
        right_key: SortKey,
    ) -> MergeJoinConfig {
        MergeJoinConfig {
            memory_bytes,
            cluster_bytes,
            run_generation: RunGeneration::Quicksort,
            overlap: true,
            io_workers: IO_WORKERS_DEFAULT,
            left_key,
            right_key,
            costs: OperatorCosts::default(),
        }
    }

    fn sort_config(&self, key: &SortKey) -> SortConfig {
        SortConfig {
            memory_bytes: self.memory_bytes,
            cluster_bytes: self.cluster_bytes,
            run_generation: self.run_generation,
            overlap: self.overlap,
            io_workers: self.io_workers,
            key: key.clone(),
            costs: self.costs,
        }
    }
}

/// What one join did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MergeJoinStats {
    pub left: SortStats,
    pub right: SortStats,
    pub output_tuples: u64,
    /// Right-side groups of equal keys larger than their memory, spilled.
    pub groups_spilled: u64,
    pub sort_ns: u64,
    pub merge_ns: u64,
    pub cpu_ns: u64,
}

/// A sort-merge join over one temp space.
pub struct MergeJoin {
    space: TempSpace,
    config: MergeJoinConfig,
    left: ExternalSort,
    right: ExternalSort,
}

impl MergeJoin {
    /// Check the settings; nothing is allocated yet.
    pub fn new(space: &TempSpace, config: MergeJoinConfig) -> Result<MergeJoin> {
        let left = ExternalSort::new(space, config.sort_config(&config.left_key))?;
        let right = ExternalSort::new(space, config.sort_config(&config.right_key))?;
        Ok(MergeJoin {
            space: space.clone(),
            config,
            left,
            right,
        })
    }

    /// Join `left` and `right`, calling `sink(left_tuple, right_tuple)` for
    /// every match.
    pub fn join(
        &self,
        left: &mut dyn TupleSource,
        right: &mut dyn TupleSource,
        sink: &mut JoinSink<'_>,
    ) -> Result<MergeJoinStats> {
        let rt = Rt::current();
        let start_ns = rt.now_ns();
        let pool = Arc::new(IoPool::new(&self.space, self.config.io_workers));
        let mut stats = MergeJoinStats::default();
        let mut l = self.sorted_runs(&self.left, left, &pool)?;
        let mut r = self.sorted_runs(&self.right, right, &pool)?;
        self.reduce_to_fan_in(&mut l, &mut r, &pool)?;
        stats.sort_ns = rt.now_ns() - start_ns;

        let merge_start = rt.now_ns();
        let spare = self
            .left
            .config()
            .merge_clusters()
            .saturating_sub(l.runs.len() + r.runs.len());
        let mut ls = self.left.stream(l.runs, &pool, spare / 2, l.cpu, l.stats);
        let mut rs = self
            .right
            .stream(r.runs, &pool, spare - spare / 2, r.cpu, r.stats);
        let mut cpu = CpuMeter::new(self.config.costs);
        let mut l_more = ls.advance()?;
        let mut r_more = rs.advance()?;
        let mut key: Vec<u8> = Vec::new();
        while l_more && r_more {
            cpu.compares(1);
            match ls.key().cmp(rs.key()) {
                std::cmp::Ordering::Less => l_more = ls.advance()?,
                std::cmp::Ordering::Greater => r_more = rs.advance()?,
                std::cmp::Ordering::Equal => {
                    key.clear();
                    key.extend_from_slice(rs.key());
                    let group;
                    (group, r_more) =
                        self.right_group(&mut rs, &key, &pool, &mut cpu, &mut stats)?;
                    l_more = join_group(&mut ls, &key, group, &mut cpu, sink, &mut stats)?;
                }
            }
        }
        cpu.settle();
        // Drain what is left so the sorts' statistics are complete.
        stats.left = ls.finish();
        stats.right = rs.finish();
        stats.merge_ns = rt.now_ns() - merge_start;
        stats.cpu_ns = stats.left.cpu_ns + stats.right.cpu_ns + cpu.charged_ns;
        Ok(stats)
    }

    /// One input's sorted runs (run generation and spill), with its CPU
    /// meter and statistics.
    fn sorted_runs(
        &self,
        sort: &ExternalSort,
        source: &mut dyn TupleSource,
        pool: &Arc<IoPool>,
    ) -> Result<SortedSide> {
        let rt = Rt::current();
        let start_ns = rt.now_ns();
        let mut cpu = CpuMeter::new(self.config.costs);
        let mut stats = sort.new_stats();
        let fixed = source.fixed_len();
        let generated = sort.generate(source, pool, &mut cpu, &mut stats)?;
        let runs = spill(sort, generated, fixed, pool, &mut cpu, &mut stats)?;
        stats.run_generation_ns = rt.now_ns() - start_ns;
        Ok(SortedSide { runs, cpu, stats })
    }

    /// Reduce both sides' runs until their final merges fit together in
    /// the fan-in, each side's share in proportion to its runs.
    fn reduce_to_fan_in(
        &self,
        l: &mut SortedSide,
        r: &mut SortedSide,
        pool: &Arc<IoPool>,
    ) -> Result<()> {
        let rt = Rt::current();
        let fan_in = self.left.config().fan_in();
        let (nl, nr) = (l.runs.len(), r.runs.len());
        if nl + nr <= fan_in {
            return Ok(());
        }
        let mut target_l = (fan_in * nl / (nl + nr)).clamp(1, fan_in - 1);
        let mut target_r = fan_in - target_l;
        if target_l > nl {
            target_l = nl;
            target_r = fan_in - nl;
        } else if target_r > nr {
            target_r = nr;
            target_l = fan_in - nr;
        }
        let t = rt.now_ns();
        self.left
            .reduce(&mut l.runs, target_l, pool, &mut l.cpu, &mut l.stats)?;
        l.stats.intermediate_merge_ns = rt.now_ns() - t;
        let t = rt.now_ns();
        self.right
            .reduce(&mut r.runs, target_r, pool, &mut r.cpu, &mut r.stats)?;
        r.stats.intermediate_merge_ns = rt.now_ns() - t;
        Ok(())
    }

    /// Collect the right side's group of tuples with key `key`, spilling it
    /// to a run if it outgrows its memory. Returns the group and whether
    /// the right side has more.
    fn right_group(
        &self,
        rs: &mut SortedStream,
        key: &[u8],
        pool: &Arc<IoPool>,
        cpu: &mut CpuMeter,
        stats: &mut MergeJoinStats,
    ) -> Result<(Group, bool)> {
        let group_bytes = OUTPUT_CLUSTERS * self.config.cluster_bytes;
        let mut group: Vec<Vec<u8>> = Vec::new();
        let mut used = 0usize;
        let mut spilled: Option<RunWriter> = None;
        let mut r_more = true;
        while r_more && rs.key() == key {
            let t = rs.tuple();
            cpu.tuples(1, t.len() as u64);
            match spilled.as_mut() {
                Some(w) => w.push(t, key, cpu)?,
                None if used + t.len() + TUPLE_OVERHEAD_BYTES > group_bytes => {
                    let mut w = RunWriter::new(
                        &self.space,
                        pool,
                        self.config.cluster_bytes,
                        None,
                        WRITE_BEHIND_CLUSTERS,
                    );
                    for g in group.drain(..) {
                        w.push(&g, key, cpu)?;
                    }
                    w.push(t, key, cpu)?;
                    spilled = Some(w);
                    stats.groups_spilled += 1;
                }
                None => {
                    used += t.len() + TUPLE_OVERHEAD_BYTES;
                    group.push(t.to_vec());
                }
            }
            r_more = rs.advance()?;
            cpu.compares(1);
        }
        let group = match spilled {
            None => Group::Memory(group),
            Some(w) => Group::Spilled(Box::new(RunReader::new(
                w.finish(cpu)?,
                &Arc::new(SortKey::bytes(0, 0)),
            ))),
        };
        Ok((group, r_more))
    }
}

/// One side of the join after run generation.
struct SortedSide {
    runs: Vec<Run>,
    cpu: CpuMeter,
    stats: SortStats,
}

/// The right side's tuples of one key: in memory, or spilled to a run.
enum Group {
    Memory(Vec<Vec<u8>>),
    Spilled(Box<RunReader>),
}

/// Join every left tuple with key `key` to the right `group`. Returns
/// whether the left side has more.
fn join_group(
    ls: &mut SortedStream,
    key: &[u8],
    group: Group,
    cpu: &mut CpuMeter,
    sink: &mut JoinSink<'_>,
    stats: &mut MergeJoinStats,
) -> Result<bool> {
    let mut l_more = true;
    match group {
        Group::Memory(group) => {
            while l_more && ls.key() == key {
                for r in &group {
                    cpu.tuples(1, (ls.tuple().len() + r.len()) as u64);
                    sink(ls.tuple(), r)?;
                    stats.output_tuples += 1;
                }
                l_more = ls.advance()?;
                cpu.compares(1);
            }
        }
        Group::Spilled(mut reader) => {
            while l_more && ls.key() == key {
                reader.rewind();
                while reader.advance(cpu)? {
                    let r = reader.tuple();
                    cpu.tuples(1, (ls.tuple().len() + r.len()) as u64);
                    sink(ls.tuple(), r)?;
                    stats.output_tuples += 1;
                }
                l_more = ls.advance()?;
                cpu.compares(1);
            }
        }
    }
    Ok(l_more)
}
