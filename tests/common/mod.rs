//! Helpers shared by the tests that run the `flashlab` program.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Run `flashlab` with `args`.
pub fn flashlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args(args)
        .output()
        .expect("run flashlab")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Run `flashlab` with `args`, which must succeed (fails the test,
/// showing stderr, if not); its output.
pub fn succeed(args: &[&str]) -> Output {
    let out = flashlab(args);
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

/// The JSON a successful run printed (fails the test, showing stderr,
/// if the run failed).
pub fn success_json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Bad input: exit code 2 and one line naming the problem, never a panic.
pub fn assert_bad_input(out: &Output, needles: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line expected: {err}");
    for needle in needles {
        assert!(err.contains(needle), "'{needle}' not in: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

/// Write `text` to `dir/name`; its path.
pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A fresh temporary directory holding `name` with `text`: the directory
/// (removed when dropped) and the file's path.
pub fn temp_file(name: &str, text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), name, text);
    (dir, path)
}

/// A fresh temporary directory (removed when dropped) and its path.
pub fn temp_dir() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().display().to_string();
    (dir, path)
}

/// The names of the entries of `dir`, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A real runtime seeded `seed`, entered on this thread until the value
/// returned is dropped (bind it to a named `_` variable).
pub fn real_runtime(seed: u64) -> impl Sized {
    let rt = flashlab::runtime::RealRuntime::new(seed);
    (flashlab::runtime::RealRuntime::enter(&rt), rt)
}

/// The small test database's configuration: 4 KB pages, a 1 MB buffer, a
/// data file and a log file of 4 MB each.
pub fn small_config() -> flashlab::engine::DbConfig {
    let mut config = flashlab::engine::DbConfig::simple("file", "file", 4096, 1 << 20);
    config.data[0].capacity_bytes = Some(4 << 20);
    config.log.capacity_bytes = Some(4 << 20);
    config
}

/// Rows `keys` (key `{i:05}`, 50 bytes of 1) put in table `kv`, created
/// if missing, and committed in one transaction.
pub fn fill(db: &flashlab::engine::Database, keys: std::ops::Range<u32>) {
    let t = match db.table("kv") {
        Ok(t) => t,
        Err(_) => db
            .create_table(flashlab::engine::TableSpec::bytes("kv"))
            .unwrap(),
    };
    let mut txn = db.begin().unwrap();
    for i in keys {
        txn.put(&t, format!("{i:05}").as_bytes(), &[1u8; 50])
            .unwrap();
    }
    txn.commit().unwrap();
}

/// A fresh temporary directory holding a small database (table `kv` of
/// 200 rows, closed cleanly): the directory and its path.
pub fn temp_database() -> (tempfile::TempDir, String) {
    let (dir, path) = temp_dir();
    let _rt = real_runtime(1);
    let db = flashlab::engine::Database::open_or_create_dir(dir.path(), &small_config()).unwrap();
    fill(&db, 0..200);
    db.close().unwrap();
    (dir, path)
}

/// `report` as JSON, its host times zeroed: what must not change between
/// two runs of one seed.
pub fn without_host_times(mut report: flashlab::lab::bench::BenchReport) -> String {
    report.host_seconds = 0.0;
    report.load_host_seconds = 0.0;
    report.run_host_seconds = 0.0;
    serde_json::to_string(&report).unwrap()
}

/// Run `options` with tracing on: its trace as flashlab CSV, and its
/// report without the trace or host times.
pub fn traced_bench(options: &flashlab::lab::bench::BenchOptions) -> (Vec<u8>, String) {
    let traced = flashlab::lab::bench::BenchOptions {
        trace: true,
        ..options.clone()
    };
    let mut report = flashlab::lab::bench::bench(&traced, |_| {}).expect("bench");
    let mut csv = Vec::new();
    flashlab_devices::trace::formats::write_flashlab_csv(&report.trace, &mut csv).unwrap();
    report.trace.clear();
    (csv, without_host_times(report))
}

/// A small TPC-C on the 2010 array: 4 KB pages, a 2 MB buffer that
/// evicts, 1,000 items and 60 customers a district, for runs from a
/// loaded image.
pub fn small_tpcc_on_array(warehouses: u32, seed: u64) -> flashlab::lab::bench::BenchOptions {
    flashlab::lab::bench::BenchOptions {
        workload: "tpcc".into(),
        clients: 20,
        duration_ns: 500_000_000,
        warmup_ns: 100_000_000,
        data_device: "ssd-array-2010".into(),
        log_device: "ssd-array-2010".into(),
        page_bytes: 4096,
        buffer_bytes: 2 << 20,
        log_bytes: Some(16 << 20),
        tpcc: flashlab_workloads::tpcc::TpccOptions {
            warehouses,
            items: 1_000,
            customers_per_district: 60,
            ..Default::default()
        },
        seed,
        progress_interval_ns: 0,
        ..flashlab::lab::bench::BenchOptions::default()
    }
}

/// Start `flashlab args`, wait until `ready(its pid)` holds (at most 30 s), send
/// `signal` and return the finished output, which must end with the exit
/// code of a program ended by that signal (128 + its number).
pub fn interrupt(args: &[&str], ready: impl Fn(u32) -> bool, signal: &str) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !ready(child.id()) && start.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let status = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let code = match signal {
        "-INT" => 130,
        "-TERM" => 143,
        other => panic!("no exit code known for signal {other}"),
    };
    assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
    out
}
