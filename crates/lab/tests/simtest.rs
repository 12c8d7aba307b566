//! The crash-recovery harness in CI: a few hundred seeds of every workload
//! and profile, and the properties of the harness itself.

use flashlab_lab::simtest::{run, run_seed};

/// Seeds CI runs (each takes milliseconds to a few tens of milliseconds).
const CI_SEEDS: u64 = 300;

#[test]
fn simtest_ci_seeds_all_pass() {
    let seeds = std::env::var("SIMTEST_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(CI_SEEDS);
    let first = std::env::var("SIMTEST_FIRST")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let summary = run(first, seeds, "mixed", |r| {
        if let Some(f) = &r.failure {
            eprintln!("seed {} FAILED: {f}\n  {}", r.seed, r.scenario);
        }
    });
    eprintln!("{summary:#?}");
    assert!(
        summary.failed.is_empty(),
        "{} seeds failed",
        summary.failed.len()
    );
    assert_eq!(summary.lost_commits, 0);
}

#[test]
fn a_seed_replays_exactly() {
    for seed in [3, 17, 40] {
        let a = run_seed(seed, "mixed");
        let b = run_seed(seed, "mixed");
        assert_eq!(a, b, "seed {seed}");
    }
}
