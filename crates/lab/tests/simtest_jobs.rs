//! Seeds run on several host threads give the same reports, in the same
//! order, as on one: each seed is its own simulated world.

use flashlab_lab::simtest::{StoreChoice, run_jobs};

#[test]
fn seeds_on_three_threads_report_exactly_what_one_thread_does() {
    let run = |jobs| {
        let mut seen = Vec::new();
        let summary = run_jobs(40, 12, "mixed", StoreChoice::Mixed, jobs, |r| {
            seen.push((
                r.seed,
                r.scenario.clone(),
                r.outcome.acked_commits,
                r.failure.clone(),
            ));
        });
        let mut json = serde_json::to_value(&summary).unwrap();
        json.as_object_mut().unwrap().remove("host_seconds");
        (seen, json)
    };
    let (one, one_summary) = run(1);
    let (three, three_summary) = run(3);
    assert_eq!(one.len(), 12);
    assert!(one.windows(2).all(|w| w[0].0 + 1 == w[1].0), "seed order");
    assert_eq!(one, three);
    assert_eq!(one_summary, three_summary);
}
