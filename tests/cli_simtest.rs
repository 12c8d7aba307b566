//! `flashlab simtest`: a few seeds pass and print a summary, one seed is
//! described, bad input is a one-line error with exit code 2.

use std::process::{Command, Output};

fn flashlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args(args)
        .output()
        .expect("run flashlab")
}

#[test]
fn simtest_runs_seeds_and_replays_one() {
    let out = flashlab(&["simtest", "--seeds", "4", "--first", "10"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("seeds               4 run, 0 failed"),
        "{text}"
    );
    assert!(text.contains("0 seeds lost acknowledged commits"), "{text}");
    let one = flashlab(&["simtest", "--seed", "12", "--workload", "tpcb"]);
    let text = String::from_utf8_lossy(&one.stdout);
    assert!(one.status.success(), "{text}");
    assert!(text.starts_with("seed 12: tpcb "), "{text}");
    let again = flashlab(&["simtest", "--seed", "12", "--workload", "tpcb"]);
    let again_text = String::from_utf8_lossy(&again.stdout);
    // Everything but the host time is the same on a replay.
    let strip = |t: &str| {
        t.lines()
            .filter(|l| !l.contains("host s"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(strip(&text), strip(&again_text));
}

#[test]
fn simtest_bad_input_is_one_line_and_exit_2() {
    for args in [
        &["simtest", "--workload", "nope"][..],
        &["simtest", "--seeds", "0"][..],
    ] {
        let out = flashlab(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
