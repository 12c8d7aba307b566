//! The simulated world is deterministic: the same seed and configuration
//! give bit-identical results and I/O traces, run after run.

mod common;

use common::{small_tpcc_on_array, traced_bench, without_host_times};
use flashlab::lab::bench::{BenchOptions, bench};

/// Least trace bytes a run must produce to count as having done I/O (the
/// 8-client run writes about 9.5 KB since the log was rewritten on main).
const TRACE_BYTES_MIN: usize = 10_000;

fn run(seed: u64) -> (Vec<u8>, String) {
    run_clients(seed, 8)
}

fn run_clients(seed: u64, clients: u32) -> (Vec<u8>, String) {
    let options = BenchOptions {
        workload: "tpcb".into(),
        clients,
        duration_ns: 1_000_000_000,
        warmup_ns: 100_000_000,
        log_device: "hdd-2008".into(),
        rollback_device: "ssd-2008".into(),
        scale: 4,
        accounts_per_branch: 500,
        seed,
        progress_interval_ns: 100_000_000,
        ..BenchOptions::default()
    };
    traced_bench(&options)
}

#[test]
fn same_seed_gives_identical_traces_and_results() {
    let (trace_a, json_a) = run(7);
    let (trace_b, json_b) = run(7);
    assert!(
        trace_a.len() > TRACE_BYTES_MIN,
        "the run did I/O: {} bytes",
        trace_a.len()
    );
    assert!(trace_a == trace_b, "same seed, different trace bytes");
    assert_eq!(json_a, json_b);
    let (trace_c, _) = run(8);
    assert!(trace_a != trace_c, "another seed, another run");
}

/// 64 clients on the coroutine scheduler: two runs, byte for byte.
#[test]
fn sixty_four_clients_replay_byte_for_byte() {
    let (trace_a, json_a) = run_clients(11, 64);
    let (trace_b, json_b) = run_clients(11, 64);
    assert!(trace_a.len() > TRACE_BYTES_MIN, "the run did I/O");
    assert!(trace_a == trace_b, "same seed, different trace bytes");
    assert_eq!(json_a, json_b);
}

fn tpcc_run(seed: u64) -> String {
    let options = BenchOptions {
        workload: "tpcc".into(),
        clients: 20,
        duration_ns: 1_000_000_000,
        warmup_ns: 200_000_000,
        tpcc: flashlab_workloads::tpcc::TpccOptions {
            warehouses: 2,
            items: 1_000,
            customers_per_district: 60,
            ..Default::default()
        },
        seed,
        progress_interval_ns: 250_000_000,
        ..BenchOptions::default()
    };
    without_host_times(bench(&options, |_| {}).expect("bench tpcc"))
}

/// TPC-C too: same seed and configuration, identical report (tpmC, every
/// type's counts and latencies, progress lines).
#[test]
fn tpcc_same_seed_gives_identical_results() {
    let a = tpcc_run(3);
    assert!(a.contains("\"tpmc\""), "{a}");
    assert_eq!(a, tpcc_run(3));
    assert_ne!(a, tpcc_run(4));
}

/// A database loaded once (`load_image`) serves many runs: two runs from
/// one image give the same report, and the database stays consistent.
#[test]
fn runs_from_one_loaded_image_are_identical_and_consistent() {
    use flashlab::lab::bench::load_image;
    let small = small_tpcc_on_array(3, 5);
    let options = BenchOptions {
        duration_ns: 1_000_000_000,
        warmup_ns: 200_000_000,
        tpcc: flashlab_workloads::tpcc::TpccOptions {
            active_warehouses: 2,
            connections: 8,
            ..small.tpcc.clone()
        },
        ..small
    };
    let image = load_image(&options).expect("load image");
    let run = || {
        let mut report = bench(
            &BenchOptions {
                image: Some(image.clone()),
                ..options.clone()
            },
            |_| {},
        )
        .expect("bench from image");
        report.host_seconds = 0.0;
        report.load_host_seconds = 0.0;
        report.run_host_seconds = 0.0;
        report
    };
    let (a, b) = (run(), run());
    assert_eq!(a.consistency, "ok");
    assert!(a.committed > 100, "{} committed", a.committed);
    assert!(a.load_seconds > 0.0, "the image's load time is reported");
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
}
