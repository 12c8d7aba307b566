//! Simulated devices keep their contents on the heap or in sparse scratch
//! files (`--sim-dir`), and which one never changes a result: benchmarks,
//! runs from a loaded image, crash-test seeds and damage at rest give
//! byte-identical reports either way. The setting is process-wide, so
//! this file is its own test binary and runs its cases one after another.

mod common;

use std::path::Path;

use common::{
    assert_bad_input, flashlab, interrupt, small_tpcc_on_array, traced_bench, without_host_times,
};
use flashlab::lab::bench::{BenchOptions, bench, load_image};
use flashlab::lab::simtest::{StoreChoice, at_rest::AtRest, run_seed_damaged};
use flashlab_devices::store::scratch::{self, ScratchDir};

/// A TPC-B run's trace and report, host times zeroed.
fn tpcb(seed: u64) -> (Vec<u8>, String) {
    traced_bench(&BenchOptions {
        workload: "tpcb".into(),
        clients: 8,
        duration_ns: 500_000_000,
        warmup_ns: 100_000_000,
        log_device: "hdd-2008".into(),
        data_device: "ssd-2008".into(),
        rollback_device: "ssd-2008".into(),
        scale: 2,
        accounts_per_branch: 2000,
        buffer_bytes: 1 << 20,
        seed,
        progress_interval_ns: 100_000_000,
        ..BenchOptions::default()
    })
}

/// Two TPC-C runs from one loaded image on the 2010 array.
fn tpcc_from_image(seed: u64) -> Vec<String> {
    let options = small_tpcc_on_array(2, seed);
    let image = load_image(&options).expect("load image");
    (0..2)
        .map(|_| {
            let run = BenchOptions {
                image: Some(image.clone()),
                ..options.clone()
            };
            without_host_times(bench(&run, |_| {}).expect("bench from image"))
        })
        .collect()
}

/// Everything compared: benchmark traces and reports, image runs, and
/// crash-test seeds (every store, damage at rest on some).
fn everything() -> Vec<String> {
    let mut out = Vec::new();
    for seed in [1, 2] {
        let (trace, report) = tpcb(seed);
        assert!(trace.len() > 10_000, "the run did I/O");
        out.push(String::from_utf8(trace).unwrap());
        out.push(report);
    }
    out.extend(tpcc_from_image(3));
    for seed in 0..6 {
        let damage = if seed % 2 == 0 {
            AtRest::Off
        } else {
            AtRest::MirroredLog
        };
        let report = run_seed_damaged(seed, "mixed", StoreChoice::Mixed, damage);
        assert!(report.passed(), "seed {seed}: {:?}", report.failure);
        out.push(serde_json::to_string(&report).unwrap());
    }
    out
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn contents_in_scratch_files_change_no_result_and_leave_no_file() {
    scratch::keep_contents_in(None);
    let on_heap = everything();
    let dir = tempfile::tempdir().unwrap();
    // No heap budget: every chunk goes to a file.
    let in_files = ScratchDir::with_heap_budget(dir.path(), 0, 0).unwrap();
    scratch::keep_contents_in(Some(in_files));
    let in_files = everything();
    scratch::keep_contents_in(None);
    assert!(
        scratch::peak_held_bytes() > 1 << 20,
        "the runs used the files"
    );
    assert_eq!(on_heap.len(), in_files.len());
    for (i, (a, b)) in on_heap.iter().zip(&in_files).enumerate() {
        assert!(a == b, "result {i} differs between heap and scratch files");
    }
    assert_eq!(entries(dir.path()), Vec::<String>::new());
}

#[test]
fn a_scratch_directory_too_small_or_missing_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    // 10,000 warehouses need far more than any test machine's disk.
    let too_many = "bench tpcc --warehouses 10000 --terminals 10 --sim-dir";
    let mut args: Vec<&str> = too_many.split(' ').collect();
    args.push(dir.path().to_str().unwrap());
    let out = flashlab(&args);
    assert_bad_input(&out, &["--sim-dir", "GB free", "needs about"]);
    let missing = dir.path().join("absent");
    let out = flashlab(&["bench", "tpcb", "--sim-dir", missing.to_str().unwrap()]);
    assert_bad_input(&out, &["--sim-dir", "absent"]);
    assert_eq!(entries(dir.path()), Vec::<String>::new());
}

/// A run stopped by SIGINT while its devices' contents are in scratch
/// files leaves none: they are unlinked as soon as they are made.
#[test]
fn an_interrupted_run_leaves_no_scratch_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let args = [
        "bench",
        "tpcb",
        "--duration",
        "60s",
        "--progress",
        "0",
        "--sim-dir",
        d,
        "--sim-memory",
        "0",
    ];
    // The child holds a scratch file: an fd on a deleted file of ours.
    let holds_scratch = |pid: u32| {
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd"));
        fds.into_iter().flatten().flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|target| {
                let t = target.to_string_lossy().into_owned();
                t.starts_with(d)
                    && t.contains(scratch::SCRATCH_FILE_PREFIX)
                    && t.ends_with("(deleted)")
            })
        })
    };
    let held = std::cell::Cell::new(false);
    let holds = |pid| {
        held.set(held.get() || holds_scratch(pid));
        held.get()
    };
    interrupt(&args, holds, "-INT");
    assert!(held.get(), "the run held unlinked scratch files in {d}");
    assert_eq!(entries(dir.path()), Vec::<String>::new());
}
