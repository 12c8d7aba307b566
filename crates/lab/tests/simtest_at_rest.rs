//! The crash harness with damage at rest (issue 41): each seed runs as in
//! `simtest.rs`, then, after its last power cut, one file of the stopped
//! database is damaged (a lost flushed log sector, a stale copy of the
//! log, a zeroed data or map-checkpoint block: `simtest::at_rest`) before
//! the final recovery. Every seed must find every acknowledged commit, or
//! refuse naming the damage, or lose commits only within the stated limit
//! (a lost tail of a log kept in one copy); none may lose them silently.

use flashlab_lab::simtest::{StoreChoice, Summary, run_seed_damaged};

fn run(first: u64, seeds: u64, store: StoreChoice) -> Summary {
    let mut summary = Summary::default();
    for seed in first..first + seeds {
        let report = run_seed_damaged(seed, "mixed", store, true);
        if let Some(f) = &report.failure {
            eprintln!(
                "seed {seed} FAILED after {:?}: {f}\n  {}",
                report.at_rest, report.scenario
            );
        }
        summary.add(&report);
    }
    eprintln!(
        "{store:?}: {} seeds damaged at rest: {} recovered, {} refused naming the damage, \
         {} lost within the stated limit, {} silently lost; {} failed",
        summary.at_rest_seeds,
        summary.at_rest_recovered,
        summary.at_rest_refused,
        summary.at_rest_limit_lost,
        summary.at_rest_silently_lost,
        summary.failed.len()
    );
    summary
}

#[test]
fn damage_at_rest_is_recovered_or_refused_never_silently_lost() {
    for (first, seeds, store) in [
        (0, 150, StoreChoice::InPlace),
        (1_000, 80, StoreChoice::LogStructured),
        (2_000, 40, StoreChoice::Ipl),
    ] {
        let summary = run(first, seeds, store);
        assert_eq!(summary.at_rest_silently_lost, 0, "{store:?}");
        assert!(
            summary.failed.is_empty(),
            "{store:?}: {} failed",
            summary.failed.len()
        );
    }
}
