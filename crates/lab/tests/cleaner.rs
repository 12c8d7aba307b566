//! The page cleaner in a steady simulated TPC-C run with a small buffer:
//! the dirty pages are written by its sorted batches, hardly ever by the
//! terminals' own misses, and the run is deterministic.

use flashlab_engine::buffer::BufferStats;
use flashlab_lab::bench::{BenchOptions, bench};
use flashlab_runtime::NS_PER_S;
use flashlab_workloads::tpcc::TpccOptions;

/// Two warehouses with a tenth of the rows, on a 1 MB buffer of 4 KB
/// pages (256 frames, a small share of the data), the OCZ-class SSD.
fn options(seed: u64) -> BenchOptions {
    BenchOptions {
        workload: "tpcc".into(),
        clients: 8,
        duration_ns: 4 * NS_PER_S,
        warmup_ns: NS_PER_S,
        log_device: "memory".into(),
        data_device: "ssd-vertex-2009".into(),
        rollback_device: "memory".into(),
        tpcc: TpccOptions {
            warehouses: 2,
            items: flashlab_workloads::tpcc::ITEMS / 10,
            customers_per_district: flashlab_workloads::tpcc::CUSTOMERS_PER_DISTRICT / 10,
            think: false,
            seed,
            ..TpccOptions::default()
        },
        page_bytes: 4096,
        buffer_bytes: 1 << 20,
        seed,
        progress_interval_ns: 0,
        ..BenchOptions::default()
    }
}

fn run(seed: u64) -> (BufferStats, u64) {
    let report = bench(&options(seed), |_| {}).expect("bench");
    assert_eq!(report.consistency, "ok");
    (report.buffer, report.committed)
}

#[test]
fn the_cleaner_writes_the_dirty_pages_of_a_steady_tpcc_run() {
    let (stats, committed) = run(7);
    assert!(committed > 0, "{stats:?}");
    assert!(stats.writes > 100, "a small buffer writes pages: {stats:?}");
    eprintln!("committed {committed}, buffer {stats:?}");
    let share = |n: u64| n as f64 / stats.writes as f64;
    assert!(
        share(stats.cleaner_pages) >= 0.8,
        "cleaner batches wrote {:.1}% of the pages: {stats:?}",
        100.0 * share(stats.cleaner_pages)
    );
    assert!(
        share(stats.foreground_dirty_evictions) < 0.1,
        "misses wrote {:.1}% of the pages: {stats:?}",
        100.0 * share(stats.foreground_dirty_evictions)
    );
    assert_eq!(run(7), (stats, committed), "same seed, same run");
}
