//! Overlapped merge and partition reads, in the simulated world on the
//! modelled 2008 SSD: reads really are in flight together (the device's
//! trace shows overlapping requests), and outputs are identical with and
//! without overlap.

use std::sync::Arc;

use flashlab_devices::model::IoKind;
use flashlab_devices::presets;
use flashlab_devices::trace::traced::TracedDevice;
use flashlab_devices::trace::{Space, TraceRecord, Tracer};
use flashlab_runtime::{Rt, Sim, SimConfig};
use proptest::prelude::*;

use super::tuple::{KeyDist, SortRecords};
use super::*;

fn sim<T: Send + 'static>(f: impl FnOnce(Rt) -> T + Send + 'static) -> T {
    Sim::run(SimConfig::default(), f)
        .expect("simulation")
        .0
        .finished()
        .expect("finished")
}

/// A temp space on a traced simulated `ssd-2008`.
fn traced_space(tracer: &Tracer) -> TempSpace {
    let device = presets::open_simulated("ssd-2008").unwrap();
    let traced = Arc::new(TracedDevice::new(device, Space::Temp, tracer.clone()));
    TempSpace::new(traced, None).unwrap()
}

/// The most reads the device had in flight at once, from its trace.
fn device_read_depth(records: &[TraceRecord]) -> usize {
    let mut edges: Vec<(u64, i32)> = records
        .iter()
        .filter(|r| r.kind == IoKind::Read)
        .flat_map(|r| [(r.submit_ns, 1), (r.complete_ns, -1)])
        .collect();
    // A completion at the same instant as a submission goes first.
    edges.sort();
    let (mut depth, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        depth += step;
        most = most.max(depth);
    }
    most as usize
}

/// Sort `n` generated records; the output, the stats, the trace's read
/// depth and the merge's simulated time.
fn sort_on_ssd(n: u64, memory: usize, cluster: usize, overlap: bool) -> SortOutcome {
    sim(move |_| {
        let tracer = Tracer::new();
        let space = traced_space(&tracer);
        let mut config = SortConfig::new(memory, cluster, SortKey::sort_benchmark());
        config.overlap = overlap;
        let sort = ExternalSort::new(&space, config).unwrap();
        let mut stream = sort.sort(&mut SortRecords::new(7, n)).unwrap();
        let mut out = Vec::new();
        while let Some(t) = stream.next_tuple().unwrap() {
            out.push(t.to_vec());
        }
        let stats = stream.finish();
        assert_eq!(space.used_bytes(), 0);
        SortOutcome {
            out,
            depth: device_read_depth(&tracer.records()),
            stats,
        }
    })
}

struct SortOutcome {
    out: Vec<Vec<u8>>,
    depth: usize,
    stats: SortStats,
}

#[test]
fn merge_keeps_several_reads_in_flight_and_sorts_the_same() {
    let c = 8 << 10;
    let with = sort_on_ssd(20_000, 256 << 10, c, true);
    let without = sort_on_ssd(20_000, 256 << 10, c, false);
    assert!(with.out == without.out, "same output with and without");
    assert!(with.stats.runs > 2, "{:?}", with.stats);
    let f = &with.stats.forecast;
    // The merge issued reads ahead, several at once, and every one was
    // consumed (the merge ran to its end).
    assert!(f.in_flight_peak > 1, "{f:?}");
    assert!(
        f.issued > 0 && f.issued == f.consumed && f.cancelled == 0,
        "{f:?}"
    );
    assert!(f.buffers_peak as usize <= (256 << 10) / c, "{f:?}");
    // The device saw them together; without overlap, one at a time.
    assert!(with.depth > 1, "device read depth {}", with.depth);
    assert_eq!(without.depth, 1, "device read depth without overlap");
    assert_eq!(without.stats.forecast.issued, 0);
    assert_eq!(
        without.stats.forecast.on_demand,
        without.stats.clusters_read
    );
    // Overlap shortens the merge in simulated time.
    let merge_ns = |s: &SortStats| s.intermediate_merge_ns + s.final_merge_ns;
    assert!(
        merge_ns(&with.stats) < merge_ns(&without.stats),
        "merge {} ns with overlap, {} ns without",
        merge_ns(&with.stats),
        merge_ns(&without.stats)
    );
}

/// Join two generated tables of `n` records matching one to one; the
/// matches in the order the join delivers them, and its stats.
fn join_on_ssd(
    n: u64,
    memory: usize,
    kind: Option<PartitionLayout>,
    overlap: bool,
) -> (Vec<Vec<u8>>, Option<HashJoinStats>, usize) {
    sim(move |_| {
        let tracer = Tracer::new();
        let space = traced_space(&tracer);
        let mut left = SortRecords::with_keys(3, n, KeyDist::Permutation { salt: 1 });
        let mut right =
            SortRecords::with_keys(4, n, KeyDist::Permutation { salt: 2 }).starting_at(n);
        let key = SortKey::sort_benchmark;
        let mut out = Vec::new();
        let mut sink = |a: &[u8], b: &[u8]| {
            let mut m = a.to_vec();
            m.extend_from_slice(b);
            out.push(m);
            Ok(())
        };
        let stats = match kind {
            Some(layout) => {
                let mut config = HashJoinConfig::new(memory, 8 << 10, layout, key(), key());
                config.overlap = overlap;
                let join = HashJoin::new(&space, config).unwrap();
                Some(join.join(&mut left, &mut right, &mut sink).unwrap())
            }
            None => {
                let mut config = MergeJoinConfig::new(memory, 8 << 10, key(), key());
                config.overlap = overlap;
                let join = MergeJoin::new(&space, config).unwrap();
                let stats = join.join(&mut left, &mut right, &mut sink).unwrap();
                assert!(
                    !overlap || stats.left.forecast.in_flight_peak > 1,
                    "{stats:?}"
                );
                None
            }
        };
        assert_eq!(space.used_bytes(), 0);
        (out, stats, device_read_depth(&tracer.records()))
    })
}

#[test]
fn joins_read_ahead_and_join_the_same() {
    for kind in [
        Some(PartitionLayout::AppendLinked),
        Some(PartitionLayout::Regions { extent_clusters: 4 }),
        None,
    ] {
        let (with, stats, depth) = join_on_ssd(8_000, 512 << 10, kind, true);
        let (without, plain, plain_depth) = join_on_ssd(8_000, 512 << 10, kind, false);
        assert_eq!(with.len(), 8_000, "{kind:?}");
        assert!(with == without, "{kind:?}: same matches in the same order");
        assert!(
            depth > 1 && plain_depth == 1,
            "{kind:?}: {depth} {plain_depth}"
        );
        if let (Some(s), Some(p)) = (stats, plain) {
            assert!(
                s.pages_read_ahead > 0 && s.reads_in_flight_peak > 1,
                "{s:?}"
            );
            assert_eq!(p.pages_read_ahead, 0);
            assert_eq!(s.pages_read, p.pages_read);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn sort_output_is_the_same_with_and_without_overlap(
        n in 0u64..3000,
        clusters in 7usize..40,
        dist in 0usize..3,
        replacement in any::<bool>(),
        seed in 0u64..1000,
    ) {
        let dist = [
            KeyDist::Uniform,
            KeyDist::Duplicates { distinct: 5 },
            KeyDist::Zipf { distinct: 300, s: 1.1 },
        ][dist]
            .clone();
        let outputs: Vec<(Vec<Vec<u8>>, SortStats)> = [false, true]
            .into_iter()
            .map(|overlap| {
                let dist = dist.clone();
                sim(move |_| {
                    let space = TempSpace::new(
                        Arc::new(flashlab_devices::memory::MemoryDevice::new("temp", 1 << 28)),
                        None,
                    )
                    .unwrap();
                    let mut config = SortConfig::new(clusters * 2048, 2048, SortKey::sort_benchmark());
                    config.overlap = overlap;
                    if replacement {
                        config.run_generation = RunGeneration::ReplacementSelection;
                    }
                    let sort = ExternalSort::new(&space, config).unwrap();
                    let mut stream = sort.sort(&mut SortRecords::with_keys(seed, n, dist)).unwrap();
                    let mut out = Vec::new();
                    while let Some(t) = stream.next_tuple().unwrap() {
                        out.push(t.to_vec());
                    }
                    let stats = stream.finish();
                    assert_eq!(space.used_bytes(), 0);
                    (out, stats)
                })
            })
            .collect();
        prop_assert_eq!(outputs[0].0.len() as u64, n);
        prop_assert!(outputs[0].0 == outputs[1].0, "outputs differ: {:?}", outputs[1].1);
        let f = &outputs[1].1.forecast;
        prop_assert_eq!(f.issued, f.consumed + f.cancelled);
    }
}
