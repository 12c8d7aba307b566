//! The scheduler stage: sorted and merged order, limits, the medium after a
//! merged request, and determinism.

use super::*;
use crate::memory::MemoryDevice;
use crate::model::{IoKind, IoRequest};

const PAGE: u64 = 4096;

fn config(merged_kb: u64, depth: usize) -> SchedulerConfig {
    SchedulerConfig {
        merged_request_bytes_max: merged_kb << 10,
        queue_depth: depth,
    }
}

#[test]
fn plan_sorts_by_offset_and_merges_adjacent_writes() {
    // Pages 3, 0, 1, 10, 2 queued in that order.
    let writes: Vec<(u64, u64)> = [3, 0, 1, 10, 2].iter().map(|p| (p * PAGE, PAGE)).collect();
    let merged = plan("t", &writes, &SchedulerConfig::default()).unwrap();
    assert_eq!(
        merged,
        vec![
            MergedWrite {
                offset_bytes: 0,
                len_bytes: 4 * PAGE,
                parts: vec![1, 2, 4, 0],
            },
            MergedWrite {
                offset_bytes: 10 * PAGE,
                len_bytes: PAGE,
                parts: vec![3],
            },
        ]
    );
}

#[test]
fn a_merge_stops_at_the_request_limit_and_the_queue_at_its_depth() {
    let writes: Vec<(u64, u64)> = (0..8).map(|p| (p * PAGE, PAGE)).collect();
    let merged = plan("t", &writes, &config(16, 128)).unwrap();
    let sizes: Vec<u64> = merged.iter().map(|m| m.len_bytes).collect();
    assert_eq!(sizes, vec![16 << 10, 16 << 10]);
    // A queue of 3: pieces {0,1,2}, {3,4,5}, {6,7}, each merged on its own.
    let merged = plan("t", &writes, &config(512, 3)).unwrap();
    let parts: Vec<Vec<usize>> = merged.iter().map(|m| m.parts.clone()).collect();
    assert_eq!(parts, vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7]]);
    // A single write larger than the limit passes whole (SCHED-2).
    let merged = plan("t", &[(0, 64 << 10)], &config(16, 8)).unwrap();
    assert_eq!(merged.len(), 1);
    assert_eq!(merged[0].len_bytes, 64 << 10);
}

#[test]
fn overlaps_and_bad_limits_are_refused_in_one_line() {
    let err = plan(
        "dev",
        &[(0, 2 * PAGE), (PAGE, PAGE)],
        &SchedulerConfig::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("overlap") && !err.contains('\n'), "{err}");
    for (bad, word) in [
        (config(0, 8), "MERGED_REQUEST_BYTES_LIMIT"),
        (config(32 << 10, 8), "MERGED_REQUEST_BYTES_LIMIT"),
        (config(512, 0), "QUEUE_DEPTH_LIMIT"),
        (config(512, QUEUE_DEPTH_LIMIT + 1), "QUEUE_DEPTH_LIMIT"),
    ] {
        let err = plan("dev", &[(0, PAGE)], &bad).unwrap_err().to_string();
        assert!(err.contains(word) && err.starts_with("dev:"), "{err}");
    }
}

/// Pages 0..16 in a scrambled order, each filled with its own byte.
fn scrambled_batch() -> Vec<(u64, Vec<u8>)> {
    let order = [7u64, 2, 15, 0, 9, 3, 11, 1, 14, 5, 8, 13, 4, 10, 6, 12];
    order
        .iter()
        .map(|&p| (p * PAGE, vec![p as u8 + 1; PAGE as usize]))
        .collect()
}

#[test]
fn a_merged_request_leaves_the_medium_as_its_parts_would() {
    let batch = scrambled_batch();
    let refs: Vec<(u64, &[u8])> = batch.iter().map(|(o, d)| (*o, d.as_slice())).collect();
    let merged = MemoryDevice::new("merged", 1 << 20);
    let sent = submit_batch(&merged, &refs, &config(32, 128)).unwrap();
    assert_eq!(
        sent,
        DispatchStats {
            writes: 16,
            requests: 2
        }
    );
    let direct = MemoryDevice::new("direct", 1 << 20);
    for (offset, data) in &refs {
        direct.write(*offset, data).unwrap();
    }
    let (mut a, mut b) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    merged.read(0, &mut a).unwrap();
    direct.read(0, &mut b).unwrap();
    assert!(a == b, "the media differ");
    assert_eq!(a[5 * PAGE as usize], 6);

    // On a flash model the merged requests program the same host pages.
    let extents: Vec<(u64, u64)> = batch.iter().map(|(o, d)| (*o, d.len() as u64)).collect();
    let plan = plan("ssd-2010", &extents, &config(32, 128)).unwrap();
    let stats = |requests: Vec<IoRequest>| {
        let mut model = crate::presets::build_model("ssd-2010").unwrap();
        let mut now = 0;
        for r in &requests {
            now = model.submit(now, r);
        }
        model.stats()
    };
    let write = |offset_bytes, len_bytes| IoRequest {
        kind: IoKind::Write,
        offset_bytes,
        len_bytes,
    };
    let parts = stats(extents.iter().map(|&(o, l)| write(o, l)).collect());
    let whole = stats(
        plan.iter()
            .map(|m| write(m.offset_bytes, m.len_bytes))
            .collect(),
    );
    assert_eq!(whole.bytes_written, parts.bytes_written);
    assert_eq!(whole.host_pages_written, parts.host_pages_written);
    assert_eq!((whole.writes, parts.writes), (2, 16));
}

/// Queue depth 1 on a disk: the batch in arrival order against the plan.
fn disk_time_ns(requests: &[(u64, u64)]) -> u64 {
    let mut model = crate::presets::build_model("hdd-2008").unwrap();
    let mut now = 0;
    for &(offset_bytes, len_bytes) in requests {
        let req = IoRequest {
            kind: IoKind::Write,
            offset_bytes,
            len_bytes,
        };
        now = model.submit(now, &req);
    }
    now
}

#[test]
fn the_plan_is_deterministic_and_saves_a_disk_time() {
    // 64 pages over 1 GB, every other one adjacent to the one before.
    let mut writes = Vec::new();
    let mut x = 12_345u64;
    for i in 0..64u64 {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let page = if i % 2 == 1 {
            writes
                .last()
                .map(|&(o, _): &(u64, u64)| o / PAGE + 1)
                .unwrap()
        } else {
            (x >> 33) % (1 << 18) * 2
        };
        writes.push((page * PAGE, PAGE));
    }
    let first = plan("hdd-2008", &writes, &SchedulerConfig::default()).unwrap();
    let second = plan("hdd-2008", &writes, &SchedulerConfig::default()).unwrap();
    assert_eq!(first, second);
    assert!(
        first
            .windows(2)
            .all(|w| w[0].offset_bytes + w[0].len_bytes <= w[1].offset_bytes)
    );
    assert_eq!(first.len(), 32, "each pair merged into one request");
    let merged: Vec<(u64, u64)> = first
        .iter()
        .map(|m| (m.offset_bytes, m.len_bytes))
        .collect();
    let arrival = disk_time_ns(&writes);
    let sorted = disk_time_ns(&merged);
    assert_eq!(sorted, disk_time_ns(&merged), "deterministic");
    assert!(
        sorted < arrival,
        "sorted and merged {sorted} ns against {arrival} ns in arrival order"
    );
}
