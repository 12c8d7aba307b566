//! The tool's edges (issue 42): what `flashlab` does when its run fails,
//! its output cannot be written, or it is stopped. Each test names the
//! failure it guards against; the simple refusals are rows of
//! `tests/bad_input.rs`.

mod common;

use std::collections::BTreeSet;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{assert_bad_input, flashlab, real_runtime, stderr, temp_dir, temp_file, write};
use flashlab::engine::Database;
use flashlab::engine::db::dir::{MANIFEST_FILE, config_from_manifest};
use flashlab_workloads::tpcb::TpcB;

/// Longest a test waits for a child that should end by itself.
const CHILD_WAIT: Duration = Duration::from_secs(120);

fn wait(mut child: Child) -> std::process::Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > CHILD_WAIT {
            child.kill().unwrap();
            panic!("the child did not end in {CHILD_WAIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// `flashlab bench tpcb` with `args`.
fn bench_tpcb(args: &[&str]) -> std::process::Output {
    let mut all = vec!["bench", "tpcb"];
    all.extend_from_slice(args);
    flashlab(&all)
}

fn acked(path: &Path) -> BTreeSet<i64> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().map(|l| l.parse().unwrap()).collect()
}

/// The history ids the database at `dir` holds, after recovery.
fn history_ids(dir: &Path, accounts: u32) -> BTreeSet<i64> {
    let _rt = real_runtime(0);
    let config = config_from_manifest(dir).unwrap();
    let db = Database::open_dir(dir, &config).unwrap();
    let ids = TpcB::new(1, accounts).history_ids(&db).unwrap();
    db.close().unwrap();
    ids.into_iter().collect()
}

/// A rollback space of four extents: a real TPC-B run fills it soon after
/// its load, with "space full".
const SMALL_ROLLBACK: &str = "[[data]]\nname = \"data\"\npage_bytes = 8192\n\
    buffer_bytes = 16777216\ndevice = \"file\"\n\n[log]\ndevice = \"file\"\n\
    capacity_bytes = 67108864\n\n[rollback]\ndevice = \"file\"\ncapacity_bytes = 4194304\n";

#[test]
fn a_kept_database_that_acknowledged_commits_survives_a_failed_run() {
    let (dir, config) = temp_file("small.toml", SMALL_ROLLBACK);
    let db = dir.path().join("db");
    std::fs::create_dir(&db).unwrap();
    let acks = dir.path().join("acks");
    let out = bench_tpcb(&[
        "--real",
        db.to_str().unwrap(),
        "--keep",
        "--config",
        &config,
        "--clients",
        "4",
        "--accounts-per-branch",
        "10000",
        "--duration",
        "30s",
        "--durability",
        "no-sync",
        "--acks",
        acks.to_str().unwrap(),
        "--json",
    ]);
    assert_bad_input(&out, &["space full", "the run stopped after"]);
    assert!(!stderr(&out).contains("invalid use"), "{}", stderr(&out));
    // The report is printed as far as the run got, with its failure.
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["failure"].as_str().unwrap().contains("space full"));
    assert!(report["duration_s"].as_f64().unwrap() < 30.0, "{report}");
    let acked = acked(&acks);
    assert!(
        !acked.is_empty(),
        "the run acknowledged commits before it failed"
    );
    assert!(db.join(MANIFEST_FILE).exists(), "the database was deleted");
    let present = history_ids(&db, 10_000);
    let lost: Vec<_> = acked.difference(&present).collect();
    assert!(lost.is_empty(), "{} acknowledged commits lost", lost.len());
}

#[test]
fn a_half_loaded_database_is_removed_and_the_message_says_so() {
    // A data space of 4 MB cannot hold 100,000 accounts: the load fails.
    let (dir, config) = temp_file(
        "tiny.toml",
        "[[data]]\nname = \"data\"\npage_bytes = 8192\nbuffer_bytes = 16777216\n\
         device = \"file\"\ncapacity_bytes = 4194304\n\n[log]\ndevice = \"file\"\n\
         capacity_bytes = 67108864\n",
    );
    let db = dir.path().join("db");
    std::fs::create_dir(&db).unwrap();
    let d = db.display().to_string();
    let out = bench_tpcb(&[
        "--real",
        &d,
        "--keep",
        "--config",
        &config,
        "--duration",
        "1s",
    ]);
    assert_bad_input(&out, &["loading", "removed the half-loaded database"]);
    assert!(!db.join(MANIFEST_FILE).exists());
}

#[test]
fn a_failed_simulated_run_stops_at_once_and_reports_how_far_it_got() {
    // A 4 MB data space: TPC-B's history fills it after about half a minute.
    let (_dir, config) = temp_file(
        "small.toml",
        "[[data]]\nname = \"data\"\npage_bytes = 8192\ndevice = \"memory\"\n\
         capacity_bytes = 4194304\n\n[log]\ndevice = \"ssd-2008\"\n",
    );
    let out = bench_tpcb(&[
        "--config",
        &config,
        "--duration",
        "600s",
        "--accounts-per-branch",
        "10000",
        "--json",
    ]);
    assert_bad_input(&out, &["space full", "of 600.0 measured seconds"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let measured = report["duration_s"].as_f64().unwrap();
    assert!(measured > 0.0 && measured < 600.0, "{report}");
    assert!(report["run_transactions"].as_u64().unwrap() > 0);
    assert_eq!(report["consistency"], "not checked: the run failed");
    assert!(report["progress"].as_array().unwrap().len() < 600);
}

#[test]
fn an_acks_file_that_cannot_be_written_fails_the_run() {
    let (_dir, d) = temp_dir();
    let out = bench_tpcb(&[
        "--real",
        &d,
        "--accounts-per-branch",
        "1000",
        "--duration",
        "30s",
        "--durability",
        "no-sync",
        "--acks",
        "/dev/full",
    ]);
    assert_bad_input(&out, &["--acks /dev/full", "not recorded", "No space left"]);
}

/// A pipe whose reader has already gone, as after `head -1` read its line.
fn closed_pipe() -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe fills two fds; closing the read end leaves the write
    // end, which we own from here on.
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        libc::close(fds[0]);
        std::os::fd::OwnedFd::from_raw_fd(fds[1])
    }
}

#[test]
fn a_closed_pipe_ends_the_program_quietly() {
    for args in [
        &["devices"][..],
        &["simtest", "--seeds", "3", "--jobs", "1"][..],
        &["bench", "tpcb", "--duration", "2s", "--progress", "0.1"][..],
    ] {
        let child = Command::new(env!("CARGO_BIN_EXE_flashlab"))
            .args(args)
            .stdout(closed_pipe())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait(child);
        let err = stderr(&out);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{args:?}: {err}");
    }
    // Progress on standard error into the same closed pipe (`2>&1 | head -1`).
    let pipe = closed_pipe();
    let child = Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args(["bench", "tpcb", "--duration", "2s", "--progress", "0.1"])
        .stdout(pipe.try_clone().unwrap())
        .stderr(pipe)
        .spawn()
        .unwrap();
    assert_eq!(
        wait(child).status.signal(),
        Some(libc::SIGPIPE),
        "no panic (exit 101)"
    );
}

#[test]
fn a_full_output_device_is_one_error() {
    for args in [
        &["devices"][..],
        &["simtest", "--seeds", "2", "--jobs", "1"][..],
    ] {
        let full = std::fs::File::options()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_flashlab"))
            .args(args)
            .stdout(full)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait(child);
        assert_bad_input(&out, &["cannot write standard output", "No space left"]);
    }
}

#[test]
fn output_paths_that_are_not_regular_files_are_refused_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    let f = fifo.display().to_string();
    for args in [
        vec!["calibrate", "--out", &f],
        vec!["trace", "generate", "--count", "10", "--out", &f],
    ] {
        let out = flashlab(&args);
        assert_bad_input(&out, &[&f, "not a regular file"]);
        let meta = std::fs::symlink_metadata(&fifo).unwrap();
        assert!(meta.file_type().is_fifo(), "{args:?} replaced the FIFO");
    }
    // A directory that cannot be made is refused before any experiment.
    let file = write(dir.path(), "file", "x");
    let out = flashlab(&["reproduce", "--out", &format!("{file}/report")]);
    assert_bad_input(&out, &["--out", "report"]);
    let out = flashlab(&["calibrate", "--out", "/nonexistent/x.json"]);
    assert_bad_input(&out, &["--out /nonexistent/x.json"]);
}

#[test]
fn a_seed_range_at_the_top_of_u64_runs_exactly_its_seeds() {
    let child = Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args(["simtest", "--first", "18446744073709551614", "--seeds", "1"])
        .args(["--jobs", "2", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait(child);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["seeds"], 1, "{summary}");
}

#[test]
fn sigint_during_characterize_removes_its_test_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("char.bin");
    let child = Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args(["characterize", "--file", file.to_str().unwrap()])
        .args(["--file-mb", "256"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !file.exists() {
        assert!(start.elapsed() < CHILD_WAIT, "the test file never appeared");
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: kill takes plain integers; the pid is our own child's.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let out = wait(child);
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(stderr(&out).contains("removed"), "{}", stderr(&out));
    assert!(!file.exists(), "the 256 MB test file was left behind");
}

#[test]
fn a_refused_second_writer_creates_no_acks_file() {
    let dir = tempfile::tempdir().unwrap();
    let _rt = real_runtime(0);
    let mut config = flashlab::engine::DbConfig::simple("file", "file", 8192, 1 << 20);
    config.data[0].capacity_bytes = Some(4 << 20);
    config.log.capacity_bytes = Some(4 << 20);
    let db = Database::open_or_create_dir(dir.path(), &config).unwrap();
    let acks = dir.path().join("acks");
    let d = dir.path().display().to_string();
    let out = bench_tpcb(&[
        "--real",
        &d,
        "--keep",
        "--duration",
        "1s",
        "--acks",
        acks.to_str().unwrap(),
    ]);
    assert_bad_input(&out, &["database locked"]);
    assert!(!acks.exists(), "a refused writer created its acks file");
    db.close().unwrap();
}

#[test]
fn tpcc_keeps_a_database_it_creates_in_an_empty_directory() {
    let (dir, d) = temp_dir();
    let small = ["--items", "1000", "--customers-per-district", "30"];
    let mut args = vec!["bench", "tpcc", "--real", &d, "--keep", "--duration", "1s"];
    args.extend(small);
    let out = flashlab(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(dir.path().join(MANIFEST_FILE).exists());
    // A second run cannot continue on it, and says so naming the directory.
    assert_bad_input(&flashlab(&args), &[&d, "holds a database", "tpcc"]);
}

#[test]
fn an_error_says_each_thing_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.csv").display().to_string();
    for args in [
        vec!["bench", "tpcb", "--config", &missing],
        vec!["replay", "--device", "ssd-2010", "--trace", &missing],
    ] {
        let out = flashlab(&args);
        assert_bad_input(&out, &["No such file or directory"]);
        let err = stderr(&out);
        assert_eq!(err.matches(&missing).count(), 1, "{err}");
        assert_eq!(err.matches("No such file").count(), 1, "{err}");
    }
}
