//! `flashlab bench sort|hash-join|merge-join`: small real-world and
//! simulated runs, and one-line errors (exit code 2) for bad settings.

mod common;
use common::*;
use std::process::Command;

#[test]
fn bench_sort_real_verifies_and_matches_gnu_sort() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = flashlab(&[
        "bench",
        "sort",
        "--real",
        d,
        "--size",
        "2MB",
        "--memory",
        "256KB",
        "--cluster",
        "8KB",
        "--json",
    ]);
    let json = success_json(&out);
    assert_eq!(json["verified"], "ok");
    assert!(json["detail"]["runs"].as_u64().unwrap() > 1);
    assert_eq!(json["detail"]["temp"]["used_bytes"], 0);
    if Command::new("sort").arg("--version").output().is_ok() {
        let out = flashlab(&[
            "bench",
            "sort",
            "--real",
            d,
            "--size",
            "1MB",
            "--memory",
            "128KB",
            "--cluster",
            "4KB",
            "--gnu-sort",
            "--json",
        ]);
        let json = success_json(&out);
        assert_eq!(json["gnu_sort"]["identical_output"], true);
    }
    // Nothing is left in the directory.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn bench_joins_real_and_simulated() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    for workload in ["hash-join", "merge-join"] {
        let out = flashlab(&[
            "bench", workload, "--real", d, "--size", "1MB", "--memory", "64KB", "--json",
        ]);
        assert!(out.status.success(), "{workload}: {}", stderr(&out));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["verified"], "ok", "{workload}");
        let out = flashlab(&[
            "bench",
            workload,
            "--temp-device",
            "hdd-2008",
            "--size",
            "1MB",
            "--memory",
            "64KB",
            "--json",
        ]);
        assert!(out.status.success(), "{workload}: {}", stderr(&out));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["world"], "simulated");
        assert!(json["elapsed_s"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn bench_sort_bad_settings_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let cases: [(&[&str], &[&str]); 5] = [
        (
            &["--memory", "16KB", "--cluster", "8KB"],
            &["memory_bytes too small"],
        ),
        (&["--cluster", "3000"], &["cluster_bytes", "sector"]),
        (&["--cluster", "1MB"], &["cluster_bytes", "256 KB"]),
        (&["--size", "lots"], &["--size", "not a size"]),
        (&["--temp-device", "floppy"], &["unknown device 'floppy'"]),
    ];
    for (extra, needles) in cases {
        let mut args = vec!["bench", "sort"];
        if !extra.contains(&"--size") {
            args.extend_from_slice(&["--size", "1MB"]);
        }
        args.extend_from_slice(extra);
        assert_bad_input(&flashlab(&args), needles);
    }
    let missing = dir.path().join("missing");
    let out = flashlab(&[
        "bench",
        "sort",
        "--real",
        missing.to_str().unwrap(),
        "--size",
        "1MB",
    ]);
    assert_bad_input(&out, &["not an existing directory"]);
    let out = flashlab(&[
        "bench", "sort", "--real", d, "--size", "1MB", "--memory", "8KB",
    ]);
    assert_bad_input(&out, &["memory_bytes too small"]);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
