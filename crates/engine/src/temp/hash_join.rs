//! # Grace hash join
//!
//! The build input (the first) and the probe input are both split into `P`
//! partitions by a hash of their join keys, so that matching tuples land in
//! partitions of the same number; then each build partition is loaded into
//! an in-memory hash table and probed with its probe partition. A build
//! partition that is still too large is partitioned again (both sides, with
//! another hash seed), recursively, up to [`LEVELS_MAX`] levels; beyond that
//! (heavy duplicates: one key has more tuples than memory holds) it is
//! joined by blocks, one memory-load of build tuples at a time against a
//! scan of the probe partition. When the build input's size is known and
//! fits, the join runs in memory and touches no temp space.
//!
//! ## Partition layouts ([`PartitionLayout`])
//!
//! A partition is a chain of *pages*, one cluster each: a header whose link
//! names the partition's previous page, then whole tuples (they never span
//! pages). Where pages go is the layout, and the statistics name the one
//! used:
//!
//! - [`PartitionLayout::Regions`]: each partition owns regions of
//!   `extent_clusters` consecutive clusters, allocated as it grows; a
//!   partition is read back sequentially, region by region. The writes
//!   jump between the partitions' regions: the "random write, sequential
//!   read" of the textbook hash/sort duality.
//! - [`PartitionLayout::AppendLinked`]: every full buffer page is written to
//!   the next free cluster, append-only, whatever its partition, and the
//!   partition's pages are found by following the links back from its last
//!   page. This is what lee2008 section 6.2 observed of a commercial server
//!   (sequential writes, then scattered reads) and conjectured the
//!   mechanism of.
//!
//! ## Memory rule
//!
//! With budget `M` and cluster `C`: partitioning holds one page buffer per
//! partition and two more for write-behind, plus one cluster to read a
//! partition being partitioned again, so `P <= floor(M / C) - 3` and the
//! join needs `M >= 5C`. Level 0 uses `P = ceil(1.2 x estimated build
//! memory / (M - 2C))` partitions when the build input's size is known (at
//! least 2, at most the maximum) and the maximum otherwise. A hash table
//! holds tuples, keys and [`HASH_TUPLE_OVERHEAD_BYTES`] a tuple in `M - 2C`
//! (one cluster reads the build partition, one the probe partition).
//!
//! ## Overlapped partition reads
//!
//! A partition is read in an order known before its first read: the join
//! keeps the offsets of each partition's pages as it writes them, and reads
//! them back in the layout's order (the chain from the last page back, or
//! the regions forward; each page's link is checked against the page read
//! after it). With [`HashJoinConfig::overlap`] (the default) the pages are
//! read ahead, several in flight (at most
//! [`super::forecast::READS_IN_FLIGHT_MAX`]), into whatever memory the
//! partition's hash table leaves: `floor((M - 2C - table) / C)` clusters,
//! where `table` is what the build partition needs in its table (none when
//! it does not fit and is joined by blocks); while a partition is
//! partitioned again, into the clusters its `n` output pages leave,
//! `floor(M / C) - 3 - n`.
//!
//! Output order is not defined (as in SQL); it is deterministic for given
//! inputs and settings. For one probe tuple, matches come in build order.

use std::collections::VecDeque;
use std::sync::Arc;

use flashlab_runtime::Rt;
use serde::Serialize;

use super::cluster::{
    CLUSTER_HEADER_BYTES, ClusterHeader, Extents, IoPool, NO_LINK, Ticket, WRITE_BEHIND_CLUSTERS,
    payload_capacity,
};
use super::cpu::{CpuMeter, OperatorCosts};
use super::forecast::READS_IN_FLIGHT_MAX;
use super::run::LENGTH_PREFIX_BYTES;
use super::sort::IO_WORKERS_DEFAULT;
use super::space::TempSpace;
use super::tuple::{SortKey, TUPLE_OVERHEAD_BYTES, TupleSource};
use super::{JoinSink, Result, TempError, validate_cluster_bytes};

/// Deepest partitioning recursion before joining by blocks.
pub const LEVELS_MAX: u32 = 3;
/// Bookkeeping counted for each tuple in a hash table (entry and bucket).
pub const HASH_TUPLE_OVERHEAD_BYTES: usize = TUPLE_OVERHEAD_BYTES + 16;
/// Headroom when sizing partitions from the build input's size.
const PARTITION_HEADROOM: f64 = 1.2;

/// Where partition pages go (see the module essay).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionLayout {
    /// Per-partition regions of `extent_clusters` consecutive clusters.
    Regions { extent_clusters: usize },
    /// Every full page to the next free cluster; pages linked per partition.
    AppendLinked,
}

impl PartitionLayout {
    pub fn name(self) -> &'static str {
        match self {
            PartitionLayout::Regions { .. } => "per-partition regions",
            PartitionLayout::AppendLinked => "append-only, linked pages (lee2008)",
        }
    }
}

/// How to join.
#[derive(Clone, Debug)]
pub struct HashJoinConfig {
    pub memory_bytes: usize,
    pub cluster_bytes: usize,
    pub layout: PartitionLayout,
    pub build_key: SortKey,
    pub probe_key: SortKey,
    /// Read partitions ahead into the memory their tables leave; on by
    /// default, off reads each page when it is needed.
    pub overlap: bool,
    pub io_workers: usize,
    pub costs: OperatorCosts,
}

impl HashJoinConfig {
    pub fn new(
        memory_bytes: usize,
        cluster_bytes: usize,
        layout: PartitionLayout,
        build_key: SortKey,
        probe_key: SortKey,
    ) -> HashJoinConfig {
        HashJoinConfig {
            memory_bytes,
            cluster_bytes,
            layout,
            build_key,
            probe_key,
            overlap: true,
            io_workers: IO_WORKERS_DEFAULT,
            costs: OperatorCosts::default(),
        }
    }

    /// Most partitions one partitioning step can write.
    pub fn max_partitions(&self) -> usize {
        (self.memory_bytes / self.cluster_bytes).saturating_sub(3)
    }

    /// Memory for one hash table.
    pub fn table_bytes(&self) -> usize {
        self.memory_bytes.saturating_sub(2 * self.cluster_bytes)
    }

    /// The largest power-of-two cluster (2 KB to 256 KB) with which one
    /// partitioning pass makes every partition of a build input of
    /// `tuples` tuples of `tuple_bytes` fit in `memory_bytes` (by the rule
    /// the join itself sizes partitions with); `None` if none does.
    pub fn single_pass_cluster_bytes(
        memory_bytes: usize,
        tuples: u64,
        tuple_bytes: usize,
    ) -> Option<usize> {
        let estimate = tuples as f64 * (tuple_bytes + HASH_TUPLE_OVERHEAD_BYTES) as f64;
        let mut cluster = super::CLUSTER_BYTES_MAX;
        while cluster >= super::CLUSTER_BYTES_MIN {
            let table = memory_bytes.saturating_sub(2 * cluster);
            let max = (memory_bytes / cluster).saturating_sub(3);
            if table > 0 && max >= 2 {
                let p = (estimate * PARTITION_HEADROOM / table as f64).ceil() as usize;
                if p <= max {
                    return Some(cluster);
                }
            }
            cluster /= 2;
        }
        None
    }
}

/// What one join did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HashJoinStats {
    pub layout: String,
    pub memory_bytes: u64,
    pub cluster_bytes: u64,
    /// Joined without temp I/O.
    pub in_memory: bool,
    /// Partitions of the first level.
    pub partitions: u64,
    /// Deepest partitioning level reached (1: no repartitioning).
    pub levels: u32,
    pub repartitioned: u64,
    /// Partitions joined by blocks (skew beyond [`LEVELS_MAX`]).
    pub block_joined: u64,
    pub build_tuples: u64,
    pub probe_tuples: u64,
    pub output_tuples: u64,
    pub pages_written: u64,
    pub pages_read: u64,
    /// Pages read ahead of need, and the most in flight at once.
    pub pages_read_ahead: u64,
    pub reads_in_flight_peak: u64,
    pub partition_ns: u64,
    pub join_ns: u64,
    pub cpu_ns: u64,
    pub compares: u64,
}

/// A grace hash join over one temp space.
pub struct HashJoin {
    space: TempSpace,
    config: HashJoinConfig,
}

/// A 64-bit hash of a normalised key, seeded per partitioning level.
#[inline]
pub fn hash_key(key: &[u8], seed: u64) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = seed.wrapping_mul(K) ^ (key.len() as u64);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
        h = (h ^ w).wrapping_mul(K).rotate_left(29);
    }
    let mut tail = [0u8; 8];
    let rest = chunks.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    h = (h ^ u64::from_le_bytes(tail)).wrapping_mul(K);
    h ^= h >> 32;
    h = h.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    h ^ (h >> 32)
}

/// Partition of hash `h` among `p` (the high half, so bucket choice in
/// tables, from the low bits, stays independent).
#[inline]
fn partition_of(h: u64, p: usize) -> usize {
    (((h >> 32) * p as u64) >> 32) as usize
}

impl HashJoin {
    /// Check the settings; nothing is allocated yet.
    pub fn new(space: &TempSpace, config: HashJoinConfig) -> Result<HashJoin> {
        validate_cluster_bytes(config.cluster_bytes, space.sector_bytes())?;
        if let PartitionLayout::Regions { extent_clusters } = config.layout
            && extent_clusters == 0
        {
            return Err(TempError::setting("extent_clusters", "must be at least 1"));
        }
        if config.max_partitions() < 2 {
            return Err(TempError::Memory(format!(
                "{} bytes hold {} clusters of {} bytes; a hash join needs at least 5 (two partition pages, two for write-behind, one to read)",
                config.memory_bytes,
                config.memory_bytes / config.cluster_bytes,
                config.cluster_bytes
            )));
        }
        Ok(HashJoin {
            space: space.clone(),
            config,
        })
    }

    /// Join `build` and `probe`, calling `sink(build_tuple, probe_tuple)`
    /// for every match.
    pub fn join(
        &self,
        build: &mut dyn TupleSource,
        probe: &mut dyn TupleSource,
        sink: &mut JoinSink<'_>,
    ) -> Result<HashJoinStats> {
        let rt = Rt::current();
        let start_ns = rt.now_ns();
        let mut cpu = CpuMeter::new(self.config.costs);
        let mut stats = HashJoinStats {
            layout: self.config.layout.name().into(),
            memory_bytes: self.config.memory_bytes as u64,
            cluster_bytes: self.config.cluster_bytes as u64,
            levels: 1,
            ..HashJoinStats::default()
        };
        let per_tuple = |len: usize| {
            let key = if self.config.build_key.identity().is_some() {
                0
            } else {
                16
            };
            len + key + HASH_TUPLE_OVERHEAD_BYTES
        };
        let estimate = build.size_hint_bytes().map(|bytes| {
            let len = build.fixed_len().unwrap_or(100).max(1);
            bytes / len as u64 * per_tuple(len) as u64
        });
        let table_bytes = self.config.table_bytes();
        if let Some(est) = estimate
            && est <= table_bytes as u64
        {
            stats.in_memory = true;
            let mut table = Table::new(table_bytes);
            while let Some(t) = build.next_tuple()? {
                stats.build_tuples += 1;
                cpu.tuples(1, t.len() as u64);
                cpu.hashes(1);
                if !table.insert(t, &self.config.build_key, 0)? {
                    return Err(TempError::Memory(format!(
                        "the build input outgrew its size hint of {est} bytes in memory"
                    )));
                }
            }
            table.finish();
            stats.partition_ns = rt.now_ns() - start_ns;
            let mut prober = self.prober(0);
            while let Some(p) = probe.next_tuple()? {
                stats.probe_tuples += 1;
                cpu.tuples(1, p.len() as u64);
                prober.probe(&table, p, &mut cpu, &mut stats, sink)?;
            }
        } else {
            let pool = Arc::new(IoPool::new(&self.space, self.config.io_workers));
            let p = match estimate {
                Some(est) => ((est as f64 * PARTITION_HEADROOM / table_bytes as f64).ceil()
                    as usize)
                    .clamp(2, self.config.max_partitions()),
                None => self.config.max_partitions(),
            };
            stats.partitions = p as u64;
            let fixed_b = build.fixed_len();
            let fixed_p = probe.fixed_len();
            let mut pb = Partitioner::new(self, &pool, p, 1, fixed_b);
            while let Some(t) = build.next_tuple()? {
                stats.build_tuples += 1;
                pb.add(t, &self.config.build_key, &mut cpu)?;
            }
            let parts_b = pb.finish(&mut cpu, &mut stats)?;
            let mut pp = Partitioner::new(self, &pool, p, 1, fixed_p);
            while let Some(t) = probe.next_tuple()? {
                stats.probe_tuples += 1;
                pp.add(t, &self.config.probe_key, &mut cpu)?;
            }
            let parts_p = pp.finish(&mut cpu, &mut stats)?;
            stats.partition_ns = rt.now_ns() - start_ns;
            self.join_level(&pool, parts_b, parts_p, 1, &mut cpu, &mut stats, sink)?;
        }
        cpu.settle();
        stats.join_ns = rt.now_ns() - start_ns - stats.partition_ns;
        stats.cpu_ns = cpu.charged_ns;
        stats.compares = cpu.compares;
        Ok(stats)
    }

    /// A prober of this join's probe key under hash seed `seed`.
    fn prober(&self, seed: u64) -> Prober<'_> {
        Prober {
            key: &self.config.probe_key,
            seed,
            kbuf: Vec::new(),
        }
    }

    /// Reading ahead into `free_clusters` of memory: `(pool, depth)`, or
    /// `None` when overlap is off or no cluster is free.
    fn read_ahead<'a>(
        &self,
        pool: &'a Arc<IoPool>,
        free_clusters: usize,
    ) -> Option<(&'a Arc<IoPool>, usize)> {
        let depth = free_clusters
            .min(READS_IN_FLIGHT_MAX)
            .min(self.config.io_workers);
        (self.config.overlap && depth > 0).then_some((pool, depth))
    }

    /// Join matching partitions of one level (the seed of level `level` is
    /// `level`; the in-memory table of a partition uses the same seed).
    #[allow(clippy::too_many_arguments)]
    fn join_level(
        &self,
        pool: &Arc<IoPool>,
        parts_b: Partitions,
        parts_p: Partitions,
        level: u32,
        cpu: &mut CpuMeter,
        stats: &mut HashJoinStats,
        sink: &mut JoinSink<'_>,
    ) -> Result<()> {
        stats.levels = stats.levels.max(level);
        let table_bytes = self.config.table_bytes();
        for i in 0..parts_b.parts.len() {
            let (b, p) = (&parts_b.parts[i], &parts_p.parts[i]);
            if b.tuples == 0 || p.tuples == 0 {
                continue;
            }
            let need = b.bytes + b.tuples * (HASH_TUPLE_OVERHEAD_BYTES as u64 + b.key_bytes_each);
            if need <= table_bytes as u64 {
                let free = (table_bytes - need as usize) / self.config.cluster_bytes;
                let ahead = self.read_ahead(pool, free);
                let pair = (&parts_b, b, &parts_p, p);
                self.block_join(pair, ahead, u64::from(level), cpu, stats, sink)?;
            } else if level < LEVELS_MAX {
                stats.repartitioned += 1;
                let n = ((need as f64 * PARTITION_HEADROOM / table_bytes as f64).ceil() as usize)
                    .clamp(2, self.config.max_partitions());
                let sub_b = self.repartition(
                    pool,
                    &parts_b,
                    b,
                    n,
                    level + 1,
                    &self.config.build_key,
                    cpu,
                    stats,
                )?;
                let sub_p = self.repartition(
                    pool,
                    &parts_p,
                    p,
                    n,
                    level + 1,
                    &self.config.probe_key,
                    cpu,
                    stats,
                )?;
                self.join_level(pool, sub_b, sub_p, level + 1, cpu, stats, sink)?;
            } else {
                stats.block_joined += 1;
                let pair = (&parts_b, b, &parts_p, p);
                self.block_join(pair, None, u64::from(level), cpu, stats, sink)?;
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn repartition(
        &self,
        pool: &Arc<IoPool>,
        parts: &Partitions,
        part: &Part,
        n: usize,
        level: u32,
        key: &SortKey,
        cpu: &mut CpuMeter,
        stats: &mut HashJoinStats,
    ) -> Result<Partitions> {
        let mut out = Partitioner::new(self, pool, n, level, parts.fixed_len);
        let free = self.config.max_partitions().saturating_sub(n);
        let ahead = self.read_ahead(pool, free);
        let mut pages = PageCursor::new(parts, part, self.config.cluster_bytes, ahead);
        while pages.next(&self.space, cpu, stats)? {
            for t in pages.tuples(parts.fixed_len) {
                out.add(t?, key, cpu)?;
            }
        }
        out.finish(cpu, stats)
    }

    /// Load the build partition into the table a block at a time (all of
    /// it at once when it fits) and probe each block with the probe
    /// partition.
    fn block_join(
        &self,
        (parts_b, b, parts_p, p): (&Partitions, &Part, &Partitions, &Part),
        ahead: Option<(&Arc<IoPool>, usize)>,
        seed: u64,
        cpu: &mut CpuMeter,
        stats: &mut HashJoinStats,
        sink: &mut JoinSink<'_>,
    ) -> Result<()> {
        let mut table = Table::new(self.config.table_bytes());
        let mut pages = PageCursor::new(parts_b, b, self.config.cluster_bytes, ahead);
        let mut prober = self.prober(seed);
        while pages.next(&self.space, cpu, stats)? {
            for t in pages.tuples(parts_b.fixed_len) {
                let t = t?;
                cpu.tuples(1, t.len() as u64);
                cpu.hashes(1);
                if !table.insert(t, &self.config.build_key, seed)? {
                    table.finish();
                    let probe = (parts_p, p, ahead);
                    self.probe_partition(&table, probe, &mut prober, cpu, stats, sink)?;
                    table.clear();
                    if !table.insert(t, &self.config.build_key, seed)? {
                        return Err(TempError::Memory(format!(
                            "a tuple of {} bytes does not fit in a hash table of {} bytes",
                            t.len(),
                            self.config.table_bytes()
                        )));
                    }
                }
            }
        }
        drop(pages);
        if !table.entries.is_empty() {
            table.finish();
            let probe = (parts_p, p, ahead);
            self.probe_partition(&table, probe, &mut prober, cpu, stats, sink)?;
        }
        Ok(())
    }

    /// Probe `table` with every tuple of probe partition `p`.
    fn probe_partition(
        &self,
        table: &Table,
        (parts_p, p, ahead): (&Partitions, &Part, Option<(&Arc<IoPool>, usize)>),
        prober: &mut Prober<'_>,
        cpu: &mut CpuMeter,
        stats: &mut HashJoinStats,
        sink: &mut JoinSink<'_>,
    ) -> Result<()> {
        let mut pages = PageCursor::new(parts_p, p, self.config.cluster_bytes, ahead);
        while pages.next(&self.space, cpu, stats)? {
            for t in pages.tuples(parts_p.fixed_len) {
                let t = t?;
                cpu.tuples(1, t.len() as u64);
                prober.probe(table, t, cpu, stats, sink)?;
            }
        }
        Ok(())
    }
}

/// Probing hash tables with one probe key under one hash seed, with a
/// buffer for normalized keys reused from tuple to tuple.
struct Prober<'k> {
    key: &'k SortKey,
    seed: u64,
    kbuf: Vec<u8>,
}

impl Prober<'_> {
    /// Look probe tuple `p` up in `table`, sending each match to `sink`.
    fn probe(
        &mut self,
        table: &Table,
        p: &[u8],
        cpu: &mut CpuMeter,
        stats: &mut HashJoinStats,
        sink: &mut JoinSink<'_>,
    ) -> Result<()> {
        cpu.hashes(1);
        let key = match self.key.identity() {
            Some(_) => self.key.slice(p)?,
            None => {
                self.kbuf.clear();
                self.key.normalize_into(p, &mut self.kbuf)?;
                self.kbuf.as_slice()
            }
        };
        let h = hash_key(key, self.seed);
        let mut compares = 0;
        let mut at = table.head(h);
        while let Some(i) = at {
            let e = &table.entries[i as usize];
            compares += 1;
            if e.hash == h && table.key(e) == key {
                let b = table.tuple(e);
                cpu.tuples(1, (b.len() + p.len()) as u64);
                sink(b, p)?;
                stats.output_tuples += 1;
            }
            at = (e.next != u32::MAX).then_some(e.next);
        }
        cpu.compares(compares);
        Ok(())
    }
}

/// An in-memory hash table: tuples, keys, and chains in insertion order.
struct Table {
    data: Vec<u8>,
    keys: Vec<u8>,
    entries: Vec<HEntry>,
    heads: Vec<u32>,
    budget: usize,
    identity: Option<(usize, usize)>,
}

struct HEntry {
    hash: u64,
    off: u32,
    len: u32,
    key_off: u32,
    key_len: u32,
    next: u32,
}

impl Table {
    fn new(budget: usize) -> Table {
        Table {
            data: Vec::new(),
            keys: Vec::new(),
            entries: Vec::new(),
            heads: Vec::new(),
            budget,
            identity: None,
        }
    }

    fn clear(&mut self) {
        self.data.clear();
        self.keys.clear();
        self.entries.clear();
        self.heads.clear();
    }

    fn used(&self) -> usize {
        self.data.len() + self.keys.len() + self.entries.len() * HASH_TUPLE_OVERHEAD_BYTES
    }

    /// Add a tuple if it fits; false if not.
    fn insert(&mut self, t: &[u8], key: &SortKey, seed: u64) -> Result<bool> {
        self.identity = key.identity();
        let key_off = self.keys.len();
        let (h, key_len) = match self.identity {
            Some(_) => (hash_key(key.slice(t)?, seed), 0),
            None => {
                key.normalize_into(t, &mut self.keys)?;
                (
                    hash_key(&self.keys[key_off..], seed),
                    self.keys.len() - key_off,
                )
            }
        };
        if self.used() + t.len() + key_len + HASH_TUPLE_OVERHEAD_BYTES > self.budget {
            self.keys.truncate(key_off);
            return Ok(false);
        }
        let off = self.data.len();
        self.data.extend_from_slice(t);
        self.entries.push(HEntry {
            hash: h,
            off: off as u32,
            len: t.len() as u32,
            key_off: key_off as u32,
            key_len: key_len as u32,
            next: u32::MAX,
        });
        Ok(true)
    }

    /// Build the bucket chains, each in insertion order (TEMP-6).
    fn finish(&mut self) {
        let buckets = self.entries.len().next_power_of_two().max(1);
        self.heads = vec![u32::MAX; buckets];
        for i in (0..self.entries.len()).rev() {
            let b = (self.entries[i].hash as usize) & (buckets - 1);
            self.entries[i].next = self.heads[b];
            self.heads[b] = i as u32;
        }
    }

    fn head(&self, h: u64) -> Option<u32> {
        if self.heads.is_empty() {
            return None;
        }
        let at = self.heads[(h as usize) & (self.heads.len() - 1)];
        (at != u32::MAX).then_some(at)
    }

    fn tuple(&self, e: &HEntry) -> &[u8] {
        &self.data[e.off as usize..(e.off + e.len) as usize]
    }

    fn key(&self, e: &HEntry) -> &[u8] {
        match self.identity {
            Some((o, l)) => &self.data[e.off as usize + o..e.off as usize + o + l],
            None => &self.keys[e.key_off as usize..(e.key_off + e.key_len) as usize],
        }
    }
}

/// One partition on the temp space.
struct Part {
    /// Last page written (the chain's head for reading back).
    tail: u64,
    /// Offsets of the pages written, in writing order (what reading ahead
    /// needs to know before the first page is read).
    pages_at: Vec<u64>,
    pages: u64,
    tuples: u64,
    /// Tuple bytes.
    bytes: u64,
    /// Bytes of normalised key a tuple adds in memory (0 when the key is a
    /// slice of the tuple).
    key_bytes_each: u64,
    /// Regions layout: this partition's regions, and clusters used in them.
    regions: Option<Extents>,
    region_used: u64,
}

/// The partitions of one input at one level.
struct Partitions {
    parts: Vec<Part>,
    /// Append-linked layout: every page of every partition, freed together.
    _shared: Extents,
    layout: PartitionLayout,
    fixed_len: Option<usize>,
}

/// Splits one input into partitions, page by page.
struct Partitioner {
    space: TempSpace,
    pool: Arc<IoPool>,
    cluster_bytes: usize,
    layout: PartitionLayout,
    seed: u64,
    fixed_len: Option<usize>,
    bufs: Vec<Option<Vec<u8>>>,
    fill: Vec<usize>,
    counts: Vec<u32>,
    spare: Vec<Vec<u8>>,
    in_flight: VecDeque<Ticket>,
    parts: Vec<Part>,
    shared: Extents,
    key_buf: Vec<u8>,
    pages_written: u64,
}

impl Partitioner {
    fn new(
        join: &HashJoin,
        pool: &Arc<IoPool>,
        n: usize,
        level: u32,
        fixed_len: Option<usize>,
    ) -> Partitioner {
        Partitioner {
            space: join.space.clone(),
            pool: pool.clone(),
            cluster_bytes: join.config.cluster_bytes,
            layout: join.config.layout,
            seed: u64::from(level) - 1,
            fixed_len,
            bufs: (0..n).map(|_| None).collect(),
            fill: vec![0; n],
            counts: vec![0; n],
            spare: Vec::new(),
            in_flight: VecDeque::new(),
            parts: (0..n)
                .map(|_| Part {
                    tail: NO_LINK,
                    pages_at: Vec::new(),
                    pages: 0,
                    tuples: 0,
                    bytes: 0,
                    key_bytes_each: 0,
                    regions: None,
                    region_used: 0,
                })
                .collect(),
            shared: Extents::new(&join.space),
            key_buf: Vec::new(),
            pages_written: 0,
        }
    }

    fn add(&mut self, t: &[u8], key: &SortKey, cpu: &mut CpuMeter) -> Result<()> {
        cpu.tuples(1, t.len() as u64);
        cpu.hashes(1);
        let (h, key_len) = match key.identity() {
            Some(_) => (hash_key(key.slice(t)?, self.seed), 0),
            None => {
                self.key_buf.clear();
                key.normalize_into(t, &mut self.key_buf)?;
                (hash_key(&self.key_buf, self.seed), self.key_buf.len())
            }
        };
        let i = partition_of(h, self.bufs.len());
        let need = t.len()
            + if self.fixed_len.is_some() {
                0
            } else {
                LENGTH_PREFIX_BYTES
            };
        let capacity = payload_capacity(self.cluster_bytes);
        if need > capacity {
            return Err(TempError::Tuple(format!(
                "a tuple of {} bytes does not fit in a partition page (cluster_bytes {})",
                t.len(),
                self.cluster_bytes
            )));
        }
        if let Some(len) = self.fixed_len
            && len != t.len()
        {
            return Err(TempError::Tuple(format!(
                "a tuple of {} bytes in an input of {len}-byte tuples",
                t.len()
            )));
        }
        if self.fill[i] + need > capacity {
            self.flush(i, cpu)?;
        }
        let cluster_bytes = self.cluster_bytes;
        let buf = self.bufs[i].get_or_insert_with(|| vec![0u8; cluster_bytes]);
        let mut at = CLUSTER_HEADER_BYTES + self.fill[i];
        if self.fixed_len.is_none() {
            buf[at..at + LENGTH_PREFIX_BYTES].copy_from_slice(&(t.len() as u32).to_le_bytes());
            at += LENGTH_PREFIX_BYTES;
        }
        buf[at..at + t.len()].copy_from_slice(t);
        self.fill[i] += need;
        self.counts[i] += 1;
        let part = &mut self.parts[i];
        part.tuples += 1;
        part.bytes += t.len() as u64;
        part.key_bytes_each = part.key_bytes_each.max(key_len as u64);
        Ok(())
    }

    /// Where partition `i`'s next page goes.
    fn place(&mut self, i: usize) -> Result<u64> {
        let step = self.cluster_bytes as u64;
        match self.layout {
            PartitionLayout::AppendLinked => self.shared.allocate(step),
            PartitionLayout::Regions { extent_clusters } => {
                let part = &mut self.parts[i];
                let regions = part
                    .regions
                    .get_or_insert_with(|| Extents::new(&self.space));
                if part.region_used * step >= regions.bytes() {
                    regions.allocate(extent_clusters as u64 * step)?;
                }
                let mut at = part.region_used * step;
                part.region_used += 1;
                for &(start, len) in regions.list() {
                    if at < len {
                        return Ok(start + at);
                    }
                    at -= len;
                }
                Err(TempError::Consumer("region bookkeeping".into()))
            }
        }
    }

    fn flush(&mut self, i: usize, cpu: &mut CpuMeter) -> Result<()> {
        let Some(mut buf) = self.bufs[i].take() else {
            return Ok(());
        };
        if self.fill[i] == 0 {
            self.bufs[i] = Some(buf);
            return Ok(());
        }
        cpu.settle();
        let offset = self.place(i)?;
        ClusterHeader {
            payload_bytes: self.fill[i] as u32,
            tuples: self.counts[i],
            link: self.parts[i].tail,
            forecast: 0,
        }
        .seal(&mut buf);
        self.parts[i].tail = offset;
        self.parts[i].pages_at.push(offset);
        self.parts[i].pages += 1;
        self.pages_written += 1;
        self.fill[i] = 0;
        self.counts[i] = 0;
        // A fresh buffer for partition i: a spare, or the oldest write's.
        let next = if let Some(b) = self.spare.pop() {
            Some(b)
        } else if self.in_flight.len() >= WRITE_BEHIND_CLUSTERS {
            let done = self.in_flight.pop_front().map(Ticket::wait);
            match done {
                Some(done) => {
                    done.result?;
                    Some(done.buf)
                }
                None => None,
            }
        } else {
            None
        };
        if let Some(mut b) = next {
            b.fill(0);
            self.bufs[i] = Some(b);
        }
        self.in_flight.push_back(self.pool.write(offset, buf));
        Ok(())
    }

    fn finish(mut self, cpu: &mut CpuMeter, stats: &mut HashJoinStats) -> Result<Partitions> {
        for i in 0..self.bufs.len() {
            self.flush(i, cpu)?;
        }
        cpu.settle();
        while let Some(ticket) = self.in_flight.pop_front() {
            ticket.wait().result?;
        }
        stats.pages_written += self.pages_written;
        let space = self.space.clone();
        Ok(Partitions {
            parts: std::mem::take(&mut self.parts),
            _shared: std::mem::replace(&mut self.shared, Extents::new(&space)),
            layout: self.layout,
            fixed_len: self.fixed_len,
        })
    }
}

impl Drop for Partitioner {
    fn drop(&mut self) {
        while let Some(ticket) = self.in_flight.pop_front() {
            let _ = ticket.wait();
        }
    }
}

/// Reads a partition's pages: back along the links (append-linked) or
/// forward through its regions, `depth` pages ahead of need when reading
/// ahead (MERGE-1, MERGE-2 and MERGE-5 hold here as in a merge).
struct PageCursor {
    /// Offsets of the partition's pages, in reading order.
    order: Vec<u64>,
    /// Next page to issue and next page to consume.
    next_issue: usize,
    next_read: usize,
    chain: bool,
    pool: Option<Arc<IoPool>>,
    depth: usize,
    ahead: VecDeque<Ticket>,
    spare: Vec<Vec<u8>>,
    buf: Vec<u8>,
    header: ClusterHeader,
    issued: u64,
    consumed: u64,
}

impl PageCursor {
    /// A cursor over `part`; with `ahead`, `(pool, depth)`, up to `depth`
    /// pages are read ahead through `pool`.
    fn new(
        parts: &Partitions,
        part: &Part,
        cluster_bytes: usize,
        ahead: Option<(&Arc<IoPool>, usize)>,
    ) -> PageCursor {
        let chain = !matches!(parts.layout, PartitionLayout::Regions { .. });
        let mut order = part.pages_at.clone();
        if chain {
            order.reverse();
        }
        PageCursor {
            order,
            next_issue: 0,
            next_read: 0,
            chain,
            pool: ahead.map(|(pool, _)| pool.clone()),
            depth: ahead.map_or(0, |(_, depth)| depth.min(READS_IN_FLIGHT_MAX)),
            ahead: VecDeque::new(),
            spare: Vec::new(),
            buf: vec![0u8; cluster_bytes],
            header: ClusterHeader {
                payload_bytes: 0,
                tuples: 0,
                link: NO_LINK,
                forecast: 0,
            },
            issued: 0,
            consumed: 0,
        }
    }

    /// Issue reads of the pages after the current one, up to the depth.
    fn fill(&mut self, stats: &mut HashJoinStats) {
        let Some(pool) = self.pool.as_ref() else {
            return;
        };
        while self.ahead.len() < self.depth && self.next_issue < self.order.len() {
            let buf = self
                .spare
                .pop()
                .unwrap_or_else(|| vec![0u8; self.buf.len()]);
            self.ahead
                .push_back(pool.read(self.order[self.next_issue], buf));
            self.next_issue += 1;
            self.issued += 1;
            stats.pages_read_ahead += 1;
        }
        // MERGE-1 and MERGE-2: within the depth the free memory allows.
        assert!(
            self.ahead.len() <= self.depth && self.spare.len() + self.ahead.len() <= self.depth,
            "MERGE-1: {} partition reads ahead over a depth of {}",
            self.ahead.len(),
            self.depth
        );
        stats.reads_in_flight_peak = stats.reads_in_flight_peak.max(self.ahead.len() as u64);
    }

    /// Read the next page; false at the end.
    fn next(
        &mut self,
        space: &TempSpace,
        cpu: &mut CpuMeter,
        stats: &mut HashJoinStats,
    ) -> Result<bool> {
        let Some(&offset) = self.order.get(self.next_read) else {
            return Ok(false);
        };
        cpu.settle();
        if self.next_read < self.next_issue {
            let done = self.ahead.pop_front().map(Ticket::wait);
            let done = done.ok_or_else(|| TempError::Consumer("partition read lost".into()))?;
            self.consumed += 1;
            let old = std::mem::replace(&mut self.buf, done.buf);
            self.spare.push(old);
            done.result?;
        } else {
            space.read(offset, &mut self.buf)?;
            self.next_issue += 1;
        }
        self.next_read += 1;
        self.fill(stats);
        self.header = ClusterHeader::open(&self.buf, offset)?;
        let expected = self.order.get(self.next_read).copied().unwrap_or(NO_LINK);
        if self.chain && self.header.link != expected {
            return Err(TempError::Corrupt {
                offset_bytes: offset,
                problem: format!(
                    "partition page links to {:#x}, not to the partition's page at {expected:#x}",
                    self.header.link
                ),
            });
        }
        stats.pages_read += 1;
        Ok(true)
    }

    /// The tuples of the current page.
    fn tuples(&self, fixed_len: Option<usize>) -> PageTuples<'_> {
        PageTuples {
            buf: &self.buf,
            at: CLUSTER_HEADER_BYTES,
            end: CLUSTER_HEADER_BYTES + self.header.payload_bytes as usize,
            left: self.header.tuples,
            fixed_len,
        }
    }
}

impl Drop for PageCursor {
    fn drop(&mut self) {
        // MERGE-5: reads ahead are waited for before the pages are freed.
        let cancelled = self.ahead.len() as u64;
        while let Some(ticket) = self.ahead.pop_front() {
            let _ = ticket.wait();
        }
        if !std::thread::panicking() {
            assert_eq!(
                self.issued,
                self.consumed + cancelled,
                "MERGE-5: a partition read issued ahead neither consumed nor cancelled"
            );
        }
    }
}

struct PageTuples<'a> {
    buf: &'a [u8],
    at: usize,
    end: usize,
    left: u32,
    fixed_len: Option<usize>,
}

impl<'a> Iterator for PageTuples<'a> {
    type Item = Result<&'a [u8]>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let bad = || TempError::Corrupt {
            offset_bytes: 0,
            problem: "a partition page's tuples overrun its payload".into(),
        };
        let len = match self.fixed_len {
            Some(len) => len,
            None => {
                let Some(raw) = self.buf.get(self.at..self.at + LENGTH_PREFIX_BYTES) else {
                    return Some(Err(bad()));
                };
                self.at += LENGTH_PREFIX_BYTES;
                u32::from_le_bytes(raw.try_into().unwrap_or([0; 4])) as usize
            }
        };
        if self.at + len > self.end {
            return Some(Err(bad()));
        }
        let t = &self.buf[self.at..self.at + len];
        self.at += len;
        Some(Ok(t))
    }
}
