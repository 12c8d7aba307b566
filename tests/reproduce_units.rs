//! `flashlab reproduce` as work units: `--unit`, `--merge`, `--resume`
//! after a signal, `--list-units`, and the flags that do not go together.
//! Small experiments in quick mode, a few seconds each.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{assert_bad_input, flashlab, stderr, stdout};

/// Quick and small: a second or two each.
const SMALL: [&str; 3] = ["lee2008-table3", "lee2008-table4", "lee2008-figure6"];

fn run(args: &[&str]) -> Output {
    let out = flashlab(args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    out
}

fn results(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join("results.json")).unwrap()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `reproduce --quick --only ID...` into `dir`, with `extra` flags.
fn reproduce(dir: &Path, ids: &[&str], extra: &[&str]) -> Output {
    let mut args = vec!["reproduce", "--quick", "--out", path(dir)];
    for id in ids {
        args.extend(["--only", id]);
    }
    args.extend(extra);
    run(&args)
}

/// A temporary directory and, in it, the run of [`SMALL`] on one job that
/// the others are compared with: the directory and the run's folder.
fn reference_run() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("reference");
    reproduce(&reference, &SMALL, &["--jobs", "1"]);
    (dir, reference)
}

#[test]
fn units_run_apart_and_merged_give_the_bytes_of_one_run() {
    let (dir, one) = reference_run();
    let two = dir.path().join("two");
    reproduce(&two, &SMALL, &["--jobs", "2"]);
    assert!(results(&one) == results(&two), "--jobs 2 differs");
    let mut merge = vec!["reproduce".to_string(), "--merge".to_string()];
    for id in SMALL {
        let unit = dir.path().join(format!("unit-{id}"));
        run(&["reproduce", "--quick", "--unit", id, "--out", path(&unit)]);
        merge.push(path(&unit).to_string());
    }
    let merged = dir.path().join("merged");
    merge.extend(["--out".into(), path(&merged).into()]);
    let args: Vec<&str> = merge.iter().map(String::as_str).collect();
    let out = run(&args);
    assert!(results(&one) == results(&merged), "merged differs");
    assert!(stdout(&out).contains("report: "), "{}", stdout(&out));
    assert!(merged.join("lee2008-table3-hdd-log-trace.csv").is_file());
}

#[test]
fn a_run_stopped_by_sigint_keeps_its_finished_units_and_resume_completes_it() {
    let (dir, whole) = reference_run();
    let cut = dir.path().join("cut");
    let mut args = vec!["reproduce", "--quick", "--jobs", "1", "--out", path(&cut)];
    for id in SMALL {
        args.extend(["--only", id]);
    }
    let child = Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let units = cut.join("units");
    let finished = || std::fs::read_dir(&units).map_or(0, |d| d.count());
    let start = Instant::now();
    while finished() == 0 && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Past the moment the record is written and named as kept.
    std::thread::sleep(Duration::from_millis(100));
    // SAFETY: kill takes plain integers; the pid is our own child's.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    if out.status.success() {
        // The run ended before the signal arrived: nothing to resume.
        return;
    }
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("kept") && err.contains("units/"), "{err}");
    assert!(
        cut.join("index.html").is_file(),
        "the finished part is shown"
    );
    let resumed = reproduce(&cut, &SMALL, &["--resume"]);
    assert!(
        stdout(&resumed).contains("reused by --resume"),
        "{}",
        stdout(&resumed)
    );
    assert!(results(&whole) == results(&cut), "resumed run differs");
}

#[test]
fn a_bad_unit_mismatched_merges_and_clashing_flags_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name);
    let out = flashlab(&["reproduce", "--unit", "nope", "--out", path(&d("x"))]);
    assert_bad_input(&out, &["--unit", "nope", "lee2008-table3"]);
    assert!(!d("x").exists(), "nothing written for a bad unit");
    run(&[
        "reproduce",
        "--quick",
        "--unit",
        SMALL[2],
        "--out",
        path(&d("a")),
    ]);
    run(&[
        "reproduce",
        "--unit",
        SMALL[2],
        "--seed",
        "2",
        "--quick",
        "--out",
        path(&d("b")),
    ]);
    let out = flashlab(&[
        "reproduce",
        "--merge",
        path(&d("a")),
        path(&d("b")),
        "--out",
        path(&d("m")),
    ]);
    assert_bad_input(&out, &["--merge", "seed"]);
    assert!(
        !d("m").join("results.json").exists(),
        "nothing half-written"
    );
    let out = flashlab(&[
        "reproduce",
        "--merge",
        path(&d("nowhere")),
        "--out",
        path(&d("m")),
    ]);
    assert_bad_input(&out, &["--merge", "nowhere"]);
    for (args, flag) in [
        (vec!["--merge", path(&d("a")), "--quick"], "--quick"),
        (vec!["--merge", path(&d("a")), "--jobs", "2"], "--jobs"),
        (vec!["--list-units", "--unit", SMALL[0]], "--unit"),
        (vec!["--unit", SMALL[0], "--only", SMALL[1]], "--only"),
        (vec!["--jobs", "0"], "--jobs"),
    ] {
        let f = d("f");
        let mut all = vec!["reproduce", "--out", path(&f)];
        all.extend(args);
        assert_bad_input(&flashlab(&all), &[flag]);
    }
}

#[test]
fn list_units_names_every_experiment_with_a_cost() {
    let out = run(&["reproduce", "--list-units"]);
    let text = stdout(&out);
    for id in SMALL
        .iter()
        .chain(&["devices", "petrov2010-table4", "wang2010-lfs"])
    {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("{id}\t"))),
            "{id} missing: {text}"
        );
    }
}
