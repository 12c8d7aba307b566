//! Correctness of the temp operators against in-memory references, in the
//! simulated world: memory budgets from a few clusters to unlimited, empty,
//! duplicate-heavy and Zipf-skewed inputs; temp space freed after success
//! and after injected errors; and the bad settings.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering as AtomicOrdering};

use flashlab_devices::memory::MemoryDevice;
use flashlab_devices::{Device, DeviceError, DeviceRef, ModelStats};
use flashlab_runtime::{Rt, Sim, SimConfig};

use super::tuple::{KeyDist, SortRecords, VecSource};
use super::*;
use crate::error::error_text;
use crate::row::{Column, Schema, Type, Value};

fn sim<T: Send + 'static>(f: impl FnOnce(Rt) -> T + Send + 'static) -> T {
    Sim::run(SimConfig::default(), f)
        .expect("simulation")
        .0
        .finished()
        .expect("finished")
}

fn memory_space(cap: Option<u64>) -> TempSpace {
    TempSpace::new(Arc::new(MemoryDevice::new("temp", 1 << 30)), cap).unwrap()
}

fn records(seed: u64, n: u64, dist: KeyDist) -> Vec<Vec<u8>> {
    let mut g = SortRecords::with_keys(seed, n, dist);
    let mut out = Vec::new();
    while let Some(t) = g.next_tuple().unwrap() {
        out.push(t.to_vec());
    }
    out
}

/// A stable sort by byte fields, written independently of key normalisation.
fn reference_sort(tuples: &[Vec<u8>], parts: &[(usize, usize, Order)]) -> Vec<Vec<u8>> {
    let mut v = tuples.to_vec();
    v.sort_by(|a, b| {
        for &(o, l, order) in parts {
            let c = a[o..o + l].cmp(&b[o..o + l]);
            let c = if order == Order::Descending {
                c.reverse()
            } else {
                c
            };
            if c != std::cmp::Ordering::Equal {
                return c;
            }
        }
        std::cmp::Ordering::Equal
    });
    v
}

/// Sort `input` with `sort` and drain the result.
fn sort_all(sort: &ExternalSort, input: &[Vec<u8>]) -> (Vec<Vec<u8>>, SortStats) {
    drain(sort.sort(&mut VecSource::new(input.to_vec())).unwrap())
}

fn drain(mut s: SortedStream) -> (Vec<Vec<u8>>, SortStats) {
    let mut out = Vec::new();
    while let Some(t) = s.next_tuple().unwrap() {
        out.push(t.to_vec());
    }
    (out, s.finish())
}

const DISTS: [KeyDist; 4] = [
    KeyDist::Uniform,
    KeyDist::Duplicates { distinct: 7 },
    KeyDist::Zipf {
        distinct: 500,
        s: 1.1,
    },
    KeyDist::Permutation { salt: 3 },
];

#[test]
fn temp_sort_equals_reference_across_memory_and_inputs() {
    sim(|_| {
        let space = memory_space(None);
        let c = 2048;
        for (d, dist) in DISTS.iter().enumerate() {
            for n in [0u64, 1, 37, 1500] {
                let input = records(d as u64 * 100 + n, n, dist.clone());
                let want = reference_sort(&input, &[(0, 10, Order::Ascending)]);
                for memory in [5 * c, 7 * c, 9 * c, 40 * c, 1 << 30] {
                    for rg in [
                        RunGeneration::Quicksort,
                        RunGeneration::ReplacementSelection,
                    ] {
                        for overlap in [false, true] {
                            let mut config = SortConfig::new(memory, c, SortKey::sort_benchmark());
                            config.run_generation = rg;
                            config.overlap = overlap;
                            if overlap && memory < 7 * c {
                                assert!(ExternalSort::new(&space, config).is_err());
                                continue;
                            }
                            let sort = ExternalSort::new(&space, config).unwrap();
                            let (got, stats) = sort_all(&sort, &input);
                            assert!(
                                got == want,
                                "dist {dist:?} n {n} memory {memory} {rg:?} overlap {overlap}: {stats:?}"
                            );
                            assert_eq!(space.used_bytes(), 0, "temp freed");
                            assert_eq!(stats.input_tuples, n);
                        }
                    }
                }
            }
        }
    });
}

/// Run generation's write-behind: 64 KB of clusters, 2 to 32 of them, at
/// most an eighth of memory; and a sort that keeps 32 writes behind still
/// equals the reference, with either run generation.
#[test]
fn run_write_behind_is_64_kb_of_clusters_and_sorts_stay_exact() {
    use super::cluster::{RUN_WRITE_BEHIND_CLUSTERS_MAX, WRITE_BEHIND_CLUSTERS, run_write_behind};
    let mb = 1 << 20;
    assert_eq!(run_write_behind(2 * mb, 2048), 32);
    assert_eq!(run_write_behind(2 * mb, 8192), 8);
    assert_eq!(run_write_behind(2 * mb, 64 << 10), WRITE_BEHIND_CLUSTERS);
    assert_eq!(run_write_behind(2 * mb, 256 << 10), WRITE_BEHIND_CLUSTERS);
    // An eighth of memory at most: 40 clusters of memory give 5 written behind.
    assert_eq!(run_write_behind(40 * 2048, 2048), 5);
    assert_eq!(run_write_behind(5 * 2048, 2048), WRITE_BEHIND_CLUSTERS);
    for c in [2048usize, 4096, 16384] {
        for m in [5 * c, 64 * c, 1 << 30] {
            let w = run_write_behind(m, c);
            assert!((WRITE_BEHIND_CLUSTERS..=RUN_WRITE_BEHIND_CLUSTERS_MAX).contains(&w));
        }
    }
    let input = records(11, 20_000, KeyDist::Uniform);
    let want = reference_sort(&input, &[(0, 10, Order::Ascending)]);
    sim(move |_| {
        let space = memory_space(None);
        for rg in [
            RunGeneration::Quicksort,
            RunGeneration::ReplacementSelection,
        ] {
            let mut config = SortConfig::new(600 << 10, 2048, SortKey::sort_benchmark());
            config.run_generation = rg;
            let (got, stats) = sort_all(&ExternalSort::new(&space, config).unwrap(), &input);
            assert!(got == want, "{rg:?}: {stats:?}");
            assert_eq!(stats.write_behind_clusters, 32, "{rg:?}");
            assert!(stats.runs > 1, "{rg:?}: {stats:?}");
            assert_eq!(space.used_bytes(), 0, "temp freed");
        }
    });
}

#[test]
fn temp_sort_multi_pass_stats_and_fan_in_rule() {
    sim(|_| {
        let space = memory_space(None);
        let c = 2048;
        let input = records(5, 3000, KeyDist::Uniform);
        let mut config = SortConfig::new(6 * c, c, SortKey::sort_benchmark());
        config.overlap = false;
        assert_eq!(config.fan_in(), 3);
        assert_eq!(config.final_fan_in(), 6);
        // Overlap keeps two forecast clusters in every merge step.
        let overlapped = SortConfig::new(9 * c, c, SortKey::sort_benchmark());
        assert_eq!((overlapped.fan_in(), overlapped.final_fan_in()), (4, 7));
        let sort = ExternalSort::new(&space, config).unwrap();
        let (got, stats) = sort_all(&sort, &input);
        assert_eq!(got, reference_sort(&input, &[(0, 10, Order::Ascending)]));
        assert!(stats.runs > 6, "{stats:?}");
        assert!(stats.merge_steps > 1 && stats.passes > 1.5, "{stats:?}");
        assert!(stats.final_runs <= 6 && stats.final_runs >= 2, "{stats:?}");
        assert!(stats.compares > 0 && stats.cpu_ns > 0);
        // Replacement selection makes runs about twice as long as its heap
        // on random input.
        let input = records(6, 6000, KeyDist::Uniform);
        let mut config = SortConfig::new(20 * c, c, SortKey::sort_benchmark());
        config.run_generation = RunGeneration::ReplacementSelection;
        let heap_tuples = config.load_bytes() / (100 + 10 + sort::RS_TUPLE_OVERHEAD_BYTES);
        let (got, rs) = sort_all(&ExternalSort::new(&space, config).unwrap(), &input);
        assert!(got == reference_sort(&input, &[(0, 10, Order::Ascending)]));
        let mean = 6000.0 / rs.runs as f64;
        assert!(
            mean > 1.6 * heap_tuples as f64,
            "mean run {mean}, heap {heap_tuples}"
        );
    });
}

#[test]
fn temp_sort_multi_column_descending_and_stable() {
    sim(|_| {
        let space = memory_space(None);
        // Key: byte 0 descending, then bytes 1..3 ascending; many ties.
        let input = records(9, 2000, KeyDist::Duplicates { distinct: 40 });
        let parts = vec![
            KeyPart::Bytes {
                offset: 8,
                len: 1,
                order: Order::Descending,
            },
            KeyPart::Bytes {
                offset: 9,
                len: 1,
                order: Order::Ascending,
            },
        ];
        let want = reference_sort(
            &input,
            &[(8, 1, Order::Descending), (9, 1, Order::Ascending)],
        );
        for memory in [7 * 2048, 11 * 2048, 1 << 30] {
            let config = SortConfig::new(memory, 2048, SortKey::fields(parts.clone()).unwrap());
            let sort = ExternalSort::new(&space, config).unwrap();
            let (got, _) = sort_all(&sort, &input);
            assert!(got == want, "memory {memory}");
        }
        // Reversed: the whole benchmark key descending.
        let config = SortConfig::new(8 * 2048, 2048, SortKey::sort_benchmark().reversed());
        let (got, _) = sort_all(&ExternalSort::new(&space, config).unwrap(), &input);
        assert!(got == reference_sort(&input, &[(0, 10, Order::Descending)]));
    });
}

fn typed_schema() -> Schema {
    Schema::new(
        vec![
            Column::new("id", Type::Int64),
            Column::new("name", Type::VarStr(40)),
            Column::new("amount", Type::Decimal { scale: 2 }),
        ],
        vec![0],
    )
    .unwrap()
}

fn typed_rows(n: i64) -> Vec<Vec<Value>> {
    (0..n)
        .map(|i| {
            let name = ["", "ada", "grace", "a\0b", "zed", "ad"][(i * 7 % 6) as usize];
            vec![
                Value::Int(i),
                Value::Str(format!("{name}{}", i % 3)),
                Value::Decimal((i * 7919 % 101) - 50),
            ]
        })
        .collect()
}

/// Reference order of typed rows: name descending, then amount ascending.
fn typed_reference(rows: &[Vec<Value>]) -> Vec<Vec<Value>> {
    let mut v = rows.to_vec();
    v.sort_by(|a, b| {
        let (Value::Str(na), Value::Str(nb)) = (&a[1], &b[1]) else {
            unreachable!()
        };
        nb.as_bytes()
            .cmp(na.as_bytes())
            .then(a[2].as_decimal().cmp(&b[2].as_decimal()))
    });
    v
}

#[test]
fn temp_sort_typed_columns_of_an_engine_table_scan() {
    sim(|_| {
        use crate::{Database, DbConfig, Devices, TableSpec};
        let devices = Devices {
            data: vec![Arc::new(MemoryDevice::new("data", 64 << 20)) as DeviceRef],
            log: Arc::new(MemoryDevice::new("log", 64 << 20)),
            rollback: None,
            temp: Some(Arc::new(MemoryDevice::new("temp", 64 << 20))),
        };
        let config = DbConfig::simple("memory", "memory", 4096, 256 * 4096);
        let db = Database::open_with(&config, devices).unwrap();
        let schema = typed_schema();
        let table = db
            .create_table(TableSpec::typed("t", schema.clone()))
            .unwrap();
        let rows = typed_rows(700);
        let mut txn = db.begin().unwrap();
        for r in &rows {
            txn.put_row(&table, r).unwrap();
        }
        txn.commit().unwrap();
        let space = TempSpace::from_devices(db.devices(), None).unwrap();
        let key = SortKey::columns(
            table.def().schema.as_ref().unwrap(),
            &[(1, Order::Descending), (2, Order::Ascending)],
        )
        .unwrap();
        for memory in [7 * 2048, 16 * 2048, 1 << 24] {
            let mut txn = db.begin().unwrap();
            let mut input = tuple::TableSource::scan(&mut txn, &table).unwrap();
            let sort =
                ExternalSort::new(&space, SortConfig::new(memory, 2048, key.clone())).unwrap();
            let (got, _) = drain(sort.sort(&mut input).unwrap());
            txn.commit().unwrap();
            let got: Vec<Vec<Value>> = got.iter().map(|t| schema.decode_row(t).unwrap()).collect();
            assert!(got == typed_reference(&rows), "memory {memory}");
            assert_eq!(space.used_bytes(), 0);
        }
        db.close().unwrap();
    });
}

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Every (left, right) pair with equal keys, by key, then left order, then
/// right order: the merge join's order.
fn reference_join(left: &[Vec<u8>], right: &[Vec<u8>]) -> Pairs {
    let l = reference_sort(left, &[(0, 10, Order::Ascending)]);
    let r = reference_sort(right, &[(0, 10, Order::Ascending)]);
    let mut out = Vec::new();
    let mut j0 = 0;
    for a in &l {
        while j0 < r.len() && r[j0][..10] < a[..10] {
            j0 += 1;
        }
        let mut j = j0;
        while j < r.len() && r[j][..10] == a[..10] {
            out.push((a.clone(), r[j].clone()));
            j += 1;
        }
    }
    out
}

type JoinCase = (String, Vec<Vec<u8>>, Vec<Vec<u8>>);

/// Run `join` over two copies of `input`, its output dropped.
fn self_join<S>(
    input: &[Vec<u8>],
    join: impl FnOnce(&mut VecSource, &mut VecSource, &mut JoinSink<'_>) -> Result<S>,
) -> Result<S> {
    join(
        &mut VecSource::new(input.to_vec()),
        &mut VecSource::new(input.to_vec()),
        &mut |_, _| Ok(()),
    )
}

/// Run `join` over copies of `l` and `r`: the pairs it emitted, in order,
/// and its statistics.
fn joined<S>(
    l: &[Vec<u8>],
    r: &[Vec<u8>],
    join: impl FnOnce(&mut VecSource, &mut VecSource, &mut JoinSink<'_>) -> Result<S>,
) -> (Pairs, S) {
    let mut got = Vec::new();
    let stats = join(
        &mut VecSource::new(l.to_vec()),
        &mut VecSource::new(r.to_vec()),
        &mut |a, b| {
            got.push((a.to_vec(), b.to_vec()));
            Ok(())
        },
    )
    .unwrap();
    (got, stats)
}

fn join_inputs() -> Vec<JoinCase> {
    vec![
        ("empty".into(), Vec::new(), records(1, 50, KeyDist::Uniform)),
        (
            "empty probe".into(),
            records(1, 50, KeyDist::Uniform),
            Vec::new(),
        ),
        (
            "one to one".into(),
            records(2, 1200, KeyDist::Permutation { salt: 1 }),
            records(3, 1200, KeyDist::Permutation { salt: 2 }),
        ),
        (
            "duplicates both sides".into(),
            records(4, 600, KeyDist::Duplicates { distinct: 9 }),
            records(5, 600, KeyDist::Duplicates { distinct: 9 }),
        ),
        (
            "zipf".into(),
            records(
                6,
                1500,
                KeyDist::Zipf {
                    distinct: 300,
                    s: 1.2,
                },
            ),
            records(
                7,
                800,
                KeyDist::Zipf {
                    distinct: 300,
                    s: 1.2,
                },
            ),
        ),
    ]
}

/// The cluster size of the join tests.
const JOIN_CLUSTER: usize = 2048;

/// In the simulated world, `check` each join input on one memory temp
/// space: the space, the input's name, its two sides, and their join by
/// [`reference_join`].
fn on_join_inputs(
    check: impl Fn(&TempSpace, &str, &[Vec<u8>], &[Vec<u8>], Pairs) + Send + 'static,
) {
    sim(move |_| {
        let space = memory_space(None);
        for (name, l, r) in join_inputs() {
            let want = reference_join(&l, &r);
            check(&space, &name, &l, &r, want);
        }
    });
}

#[test]
fn temp_merge_join_equals_reference() {
    let c = JOIN_CLUSTER;
    on_join_inputs(move |space, name, l, r, want| {
        for (memory, overlap) in [5 * c, 7 * c, 9 * c, 64 * c, 1 << 28]
            .into_iter()
            .flat_map(|m| [(m, false), (m, true)])
            .filter(|&(m, overlap)| !overlap || m >= 7 * c)
        {
            let mut config = MergeJoinConfig::new(
                memory,
                c,
                SortKey::sort_benchmark(),
                SortKey::sort_benchmark(),
            );
            config.overlap = overlap;
            let join = MergeJoin::new(space, config).unwrap();
            let (got, stats) = joined(l, r, |l, r, sink| join.join(l, r, sink));
            assert!(
                got == want,
                "{name} memory {memory} overlap {overlap}: {} vs {}",
                got.len(),
                want.len()
            );
            assert_eq!(stats.output_tuples, want.len() as u64);
            assert_eq!(space.used_bytes(), 0, "{name}");
            if name == "duplicates both sides" && memory == 5 * c {
                assert!(stats.groups_spilled > 0, "{stats:?}");
            }
        }
    });
}

#[test]
fn temp_hash_join_equals_reference_in_both_layouts() {
    let c = JOIN_CLUSTER;
    on_join_inputs(move |space, name, l, r, mut want| {
        want.sort();
        for layout in [
            PartitionLayout::AppendLinked,
            PartitionLayout::Regions { extent_clusters: 4 },
        ] {
            for (memory, overlap) in [5 * c, 8 * c, 64 * c, 1 << 28]
                .into_iter()
                .flat_map(|m| [(m, false), (m, true)])
            {
                let mut config = HashJoinConfig::new(
                    memory,
                    c,
                    layout,
                    SortKey::sort_benchmark(),
                    SortKey::sort_benchmark(),
                );
                config.overlap = overlap;
                let join = HashJoin::new(space, config).unwrap();
                let (mut got, stats) = joined(l, r, |l, r, sink| join.join(l, r, sink));
                got.sort();
                assert!(
                    got == want,
                    "{name} {layout:?} memory {memory} overlap {overlap}: {stats:?}"
                );
                if !overlap {
                    assert_eq!(stats.pages_read_ahead, 0, "{stats:?}");
                }
                assert_eq!(space.used_bytes(), 0);
                assert_eq!(stats.layout, layout.name());
                if memory == 5 * c && name == "duplicates both sides" {
                    assert!(
                        stats.block_joined > 0 && stats.levels == hash_join::LEVELS_MAX,
                        "{stats:?}"
                    );
                }
                if memory == 1 << 28 {
                    assert!(stats.in_memory);
                }
            }
        }
    });
}

#[test]
fn temp_hash_join_of_typed_rows_with_unknown_sizes() {
    // Variable-length tuples, keys that are columns, and no size hints (the
    // join then partitions with the most partitions it can).
    struct NoHint(VecSource);
    impl TupleSource for NoHint {
        fn next_tuple(&mut self) -> Result<Option<&[u8]>> {
            self.0.next_tuple()
        }
    }
    sim(|_| {
        let space = memory_space(None);
        let schema = typed_schema();
        let rows: Vec<Vec<u8>> = typed_rows(900)
            .iter()
            .map(|r| schema.encode_row(r).unwrap())
            .collect();
        let key = SortKey::columns(&schema, &[(1, Order::Ascending)]).unwrap();
        let mut want = Vec::new();
        for a in &rows {
            for b in &rows[..300] {
                if key.normalize(a).unwrap() == key.normalize(b).unwrap() {
                    want.push((a.clone(), b.clone()));
                }
            }
        }
        want.sort();
        for layout in [
            PartitionLayout::AppendLinked,
            PartitionLayout::Regions { extent_clusters: 2 },
        ] {
            let config = HashJoinConfig::new(12 * 2048, 2048, layout, key.clone(), key.clone());
            let join = HashJoin::new(&space, config).unwrap();
            let mut got = Vec::new();
            join.join(
                &mut NoHint(VecSource::new(rows.clone())),
                &mut NoHint(VecSource::new(rows[..300].to_vec())),
                &mut |a, b| {
                    got.push((a.to_vec(), b.to_vec()));
                    Ok(())
                },
            )
            .unwrap();
            got.sort();
            assert!(got == want, "{layout:?}: {} vs {}", got.len(), want.len());
            assert_eq!(space.used_bytes(), 0);
        }
    });
}

/// A device that fails the N-th write or read from now on.
struct Failing {
    inner: DeviceRef,
    writes_left: AtomicI64,
    reads_left: AtomicI64,
}

impl flashlab_devices::Wrapper for Failing {
    fn inner(&self) -> &dyn Device {
        &*self.inner
    }
    fn name(&self) -> &str {
        "failing"
    }
    fn read(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        if self.reads_left.fetch_sub(1, AtomicOrdering::SeqCst) <= 0 {
            return Err(DeviceError::ReadFailed {
                device: "failing".into(),
                offset_bytes,
            });
        }
        self.inner.read(offset_bytes, buf)
    }
    fn write(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        if self.writes_left.fetch_sub(1, AtomicOrdering::SeqCst) <= 0 {
            return Err(DeviceError::Full {
                device: "failing".into(),
                problem: "injected".into(),
            });
        }
        self.inner.write(offset_bytes, data)
    }
    fn flush(&self) -> Result<(), DeviceError> {
        Ok(())
    }
    fn trim(&self, _: u64, _: u64) -> Result<(), DeviceError> {
        Ok(())
    }
    fn model_stats(&self) -> Option<ModelStats> {
        None
    }
}

fn failing_space(writes: i64, reads: i64) -> TempSpace {
    let device = Failing {
        inner: Arc::new(MemoryDevice::new("inner", 1 << 30)),
        writes_left: AtomicI64::new(writes),
        reads_left: AtomicI64::new(reads),
    };
    TempSpace::new(Arc::new(device), None).unwrap()
}

/// A sort of the sort benchmark's keys on `space` in `memory_bytes`, in
/// clusters of `c` bytes.
fn benchmark_sort(space: &TempSpace, memory_bytes: usize, c: usize) -> ExternalSort {
    ExternalSort::new(
        space,
        SortConfig::new(memory_bytes, c, SortKey::sort_benchmark()),
    )
    .unwrap()
}

/// A merge join of the sort benchmark's keys in eight clusters of `c` bytes.
fn benchmark_merge_join(space: &TempSpace, c: usize) -> MergeJoin {
    let key = SortKey::sort_benchmark;
    MergeJoin::new(space, MergeJoinConfig::new(8 * c, c, key(), key())).unwrap()
}

/// A hash join of the sort benchmark's keys in eight clusters of `c`
/// bytes, its partitions laid out as `layout`.
fn benchmark_hash_join(space: &TempSpace, c: usize, layout: PartitionLayout) -> HashJoin {
    let key = SortKey::sort_benchmark;
    HashJoin::new(space, HashJoinConfig::new(8 * c, c, layout, key(), key())).unwrap()
}

#[test]
fn temp_space_is_freed_after_injected_errors() {
    sim(|_| {
        let input = records(11, 2500, KeyDist::Uniform);
        let c = 2048;
        // Write failures at several points, read failures at several points.
        for (writes, reads) in [
            (0, i64::MAX),
            (5, i64::MAX),
            (60, i64::MAX),
            (i64::MAX, 0),
            (i64::MAX, 7),
            (i64::MAX, 150),
        ] {
            let space = failing_space(writes, reads);
            let sort = benchmark_sort(&space, 8 * c, c);
            let result = sort
                .sort(&mut VecSource::new(input.clone()))
                .and_then(drain_result);
            assert!(result.is_err(), "writes {writes} reads {reads}");
            assert_eq!(space.used_bytes(), 0, "sort: writes {writes} reads {reads}");

            let space = failing_space(writes, reads);
            let join = benchmark_merge_join(&space, c);
            let r = self_join(&input, |l, r, sink| join.join(l, r, sink));
            assert!(r.is_err());
            assert_eq!(space.used_bytes(), 0, "merge join");

            for layout in [
                PartitionLayout::AppendLinked,
                PartitionLayout::Regions { extent_clusters: 3 },
            ] {
                let space = failing_space(writes, reads);
                let join = benchmark_hash_join(&space, c, layout);
                let r = self_join(&input, |l, r, sink| join.join(l, r, sink));
                assert!(r.is_err());
                assert_eq!(space.used_bytes(), 0, "hash join {layout:?}");
            }
        }
        // A write failure that is "device full" is reported as temp space full.
        let space = failing_space(3, i64::MAX);
        let sort = benchmark_sort(&space, 8 * c, c);
        let err = sort.sort(&mut VecSource::new(input.clone())).err().unwrap();
        assert!(err.is_full(), "{err}");
        // A consumer that gives up half way.
        let space = memory_space(None);
        let join = benchmark_hash_join(&space, c, PartitionLayout::AppendLinked);
        let mut n = 0;
        let r = join.join(
            &mut VecSource::new(input.clone()),
            &mut VecSource::new(input.clone()),
            &mut |_, _| {
                n += 1;
                if n > 100 {
                    Err(TempError::Consumer("enough".into()))
                } else {
                    Ok(())
                }
            },
        );
        assert!(matches!(r, Err(TempError::Consumer(_))));
        assert_eq!(space.used_bytes(), 0);
        // A sorted stream dropped before its end frees everything too.
        let sort = benchmark_sort(&space, 8 * c, c);
        let mut s = sort.sort(&mut VecSource::new(input.clone())).unwrap();
        s.next_tuple().unwrap();
        assert!(space.used_bytes() > 0);
        drop(s);
        assert_eq!(space.used_bytes(), 0);
    });
}

fn drain_result(mut s: SortedStream) -> Result<()> {
    while s.next_tuple()?.is_some() {}
    Ok(())
}

#[test]
fn temp_space_cap_gives_temp_space_full_not_out_of_memory() {
    sim(|_| {
        let input = records(12, 3000, KeyDist::Uniform);
        let space = memory_space(Some(64 << 10));
        let sort = benchmark_sort(&space, 8 * 2048, 2048);
        let err = sort.sort(&mut VecSource::new(input)).err().unwrap();
        assert!(err.is_full(), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("temp space full") && text.contains("capacity_bytes"),
            "{text}"
        );
        assert_eq!(space.used_bytes(), 0);
        // When the cap is reached, the free list is used.
        let input = records(13, 1600, KeyDist::Uniform);
        let space = memory_space(Some(400 << 10));
        let sort = benchmark_sort(&space, 8 * 2048, 2048);
        let (got, stats) = sort_all(&sort, &input);
        assert_eq!(got, reference_sort(&input, &[(0, 10, Order::Ascending)]));
        assert!(stats.merge_steps > 2);
        assert!(space.stats().high_water_bytes <= 400 << 10);
    });
}

#[test]
fn temp_bad_settings_name_the_setting() {
    sim(|_| {
        let space = memory_space(None);
        let key = SortKey::sort_benchmark;
        let mut plain = SortConfig::new(4 * 2048, 2048, key());
        plain.overlap = false;
        let e = error_text(ExternalSort::new(&space, plain));
        assert!(
            e.starts_with("memory_bytes too small") && e.contains("at least 5"),
            "{e}"
        );
        let overlapped = SortConfig::new(6 * 2048, 2048, key());
        let e = error_text(ExternalSort::new(&space, overlapped));
        assert!(e.contains("at least 7"), "{e}");
        let e = error_text(ExternalSort::new(
            &space,
            SortConfig::new(1 << 20, 2500, key()),
        ));
        assert!(
            e.starts_with("cluster_bytes") && e.contains("sector"),
            "{e}"
        );
        let e = error_text(ExternalSort::new(
            &space,
            SortConfig::new(1 << 20, 1024, key()),
        ));
        assert!(e.starts_with("cluster_bytes") && e.contains("2 KB"), "{e}");
        let e = error_text(HashJoin::new(
            &space,
            HashJoinConfig::new(4 * 2048, 2048, PartitionLayout::AppendLinked, key(), key()),
        ));
        assert!(
            e.starts_with("memory_bytes too small") && e.contains("at least 5"),
            "{e}"
        );
        let e = error_text(MergeJoin::new(
            &space,
            MergeJoinConfig::new(2 * 2048, 2048, key(), key()),
        ));
        assert!(e.starts_with("memory_bytes too small"), "{e}");
        // A cap beyond the device, a database without a temp device.
        let e = error_text(TempSpace::new(
            Arc::new(MemoryDevice::new("m", 1 << 20)),
            Some(2 << 20),
        ));
        assert!(e.starts_with("temp capacity_bytes"), "{e}");
        let devices = crate::Devices {
            data: Vec::new(),
            log: Arc::new(MemoryDevice::new("log", 1 << 20)),
            rollback: None,
            temp: None,
        };
        let e = error_text(TempSpace::from_devices(&devices, None));
        assert!(e.starts_with("temp:") && e.contains("no temp space"), "{e}");
        // A tuple larger than memory, a tuple shorter than its key.
        let big = vec![vec![7u8; 9000]];
        let sort = ExternalSort::new(&space, SortConfig::new(7 * 2048, 2048, key())).unwrap();
        let e = error_text(sort.sort(&mut VecSource::new(big)));
        assert!(e.starts_with("memory_bytes too small"), "{e}");
        let e = error_text(sort.sort(&mut VecSource::new(vec![vec![1u8; 5]])));
        assert!(e.starts_with("tuple:"), "{e}");
        assert_eq!(space.used_bytes(), 0);
        // Errors convert to engine errors of the right kind.
        let full: crate::Error = TempError::Full {
            device: "d".into(),
            needed_bytes: 1,
            used_bytes: 0,
            capacity_bytes: 0,
        }
        .into();
        assert!(full.is_space_full());
    });
}

#[test]
fn temp_real_world_file_is_gone_during_and_after() {
    let rt = flashlab_runtime::RealRuntime::new(1);
    let _enter = flashlab_runtime::RealRuntime::enter(&rt);
    let dir = tempfile::tempdir().unwrap();
    {
        let space = TempSpace::in_dir(dir.path(), 64 << 20, false).unwrap();
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "unlinked at once"
        );
        let input = records(14, 5000, KeyDist::Uniform);
        let sort = benchmark_sort(&space, 16 * 4096, 4096);
        let (got, stats) = sort_all(&sort, &input);
        assert_eq!(got, reference_sort(&input, &[(0, 10, Order::Ascending)]));
        assert!(stats.runs > 1);
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let e = error_text(TempSpace::in_dir(
        &dir.path().join("missing"),
        1 << 20,
        false,
    ));
    assert!(e.starts_with("temp directory"), "{e}");
}

#[test]
fn temp_sort_checksum_is_order_independent_and_catches_disorder() {
    let input = records(15, 500, KeyDist::Uniform);
    let sorted = reference_sort(&input, &[(0, 10, Order::Ascending)]);
    let mut a = tuple::Validator::new(SortKey::sort_benchmark());
    for t in &sorted {
        a.add(t).unwrap();
    }
    let mut b = tuple::Validator::new(SortKey::sort_benchmark());
    for t in &input {
        b.add(t).unwrap();
    }
    assert_eq!(a.sum.crc_sum, b.sum.crc_sum);
    assert_eq!(a.sum.unordered, 0);
    assert!(b.sum.unordered > 100);
    // The generator's records are what gensort -a writes: printable, CR LF.
    for t in &input {
        assert_eq!(t.len(), 100);
        assert!(t[..98].iter().all(|b| (b' '..=b'~').contains(b)));
        assert_eq!(&t[98..], b"\r\n");
    }
}
