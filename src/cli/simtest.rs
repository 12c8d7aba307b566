//! `flashlab simtest [--seeds N] [--first S] [--seed S] [--workload W]
//! [--store in-place|log-structured|mixed|ipl] [--jobs N] [--json]`: the seeded crash-recovery harness
//! ([`flashlab_lab::simtest`]). Runs N seeds (each a workload, a database,
//! faults and power cuts decided by the seed alone), prints every failing
//! seed with the command that replays it, and a summary: crash points tried,
//! faults injected by kind, commits acknowledged and lost. `--seed S` runs
//! one seed and prints what it did. Exit code 1 if any seed failed.

use anyhow::bail;
use flashlab_lab::simtest::{self, SeedReport, Summary};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// How many seeds to run (default 100).
    #[arg(long)]
    seeds: Option<u64>,
    /// The first seed of the run (default 0).
    #[arg(long)]
    first: Option<u64>,
    /// Run this one seed and describe it (replays a failure exactly).
    #[arg(long)]
    seed: Option<u64>,
    /// bank, tpcb, update-commit, or mixed (each seed picks one).
    #[arg(long, default_value = "mixed")]
    workload: String,
    /// Data space page store: in-place (the default), log-structured,
    /// mixed (every third seed log-structured) or ipl (In-Page Logging on
    /// raw NAND: crash and media profiles, cuts in merges).
    #[arg(long, default_value = "in-place")]
    store: String,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Print one line per seed: its scenario and where the power was cut.
    #[arg(long)]
    list: bool,
    /// Host threads to run seeds on (1 to 64; default: the machine's
    /// cores). The reports and their order do not depend on it.
    #[arg(long)]
    jobs: Option<usize>,
}

/// Exit code when a seed fails (bad input exits 2).
pub const EXIT_FAILED: i32 = 1;
/// Seeds a run takes when --seeds is not given.
const SEEDS_DEFAULT: u64 = 100;
/// Most seeds one run may ask for.
pub const SEEDS_MAX: u64 = 100_000_000;

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.workload != "mixed" && !simtest::WORKLOADS.contains(&args.workload.as_str()) {
        bail!(
            "--workload '{}' must be one of {}, mixed",
            args.workload,
            simtest::WORKLOADS.join(", ")
        );
    }
    let Some(store) = simtest::StoreChoice::parse(&args.store) else {
        bail!(
            "--store '{}' must be one of in-place, log-structured, mixed, ipl",
            args.store
        );
    };
    let (first, seeds) = match (args.seed, args.first, args.seeds) {
        (Some(_), Some(_), _) => bail!("--first: --seed runs one seed; give one or the other"),
        (Some(_), _, Some(_)) => bail!("--seeds: --seed runs one seed; give one or the other"),
        (Some(seed), None, None) => (seed, 1),
        (None, first, seeds) => (first.unwrap_or(0), seeds.unwrap_or(SEEDS_DEFAULT)),
    };
    if seeds == 0 || seeds > SEEDS_MAX {
        bail!("--seeds {seeds} must be 1 to {SEEDS_MAX}");
    }
    if first.checked_add(seeds).is_none() {
        bail!(
            "--first {first} with --seeds {seeds}: seeds end below {}; at most {} seeds from there",
            u64::MAX,
            u64::MAX - first
        );
    }
    let one = args.seed.is_some();
    let (json, list, workload) = (args.json, args.list, args.workload.clone());
    let store_flag = match args.store.as_str() {
        "in-place" => String::new(),
        other => format!(" --store {other}"),
    };
    let jobs = match args.jobs {
        Some(j) if !(1..=simtest::JOBS_MAX).contains(&j) => {
            bail!("--jobs {j}: must be 1 to {}", simtest::JOBS_MAX)
        }
        Some(j) => j,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let summary = simtest::run_jobs(first, seeds, &args.workload, store, jobs, |report| {
        if json {
            return;
        }
        if one {
            describe(report);
        } else if list {
            println!(
                "seed {} {}: {}: {}",
                report.seed,
                if report.passed() { "ok" } else { "FAIL" },
                report.scenario,
                report.crash_points.join("; ")
            );
        }
        if !one && let Some(failure) = &report.failure {
            println!("FAIL seed {}: {failure}", report.seed);
            println!("  {}", report.scenario);
            println!(
                "  replay: flashlab simtest --seed {} --workload {workload}{store_flag}",
                report.seed
            );
        }
    });
    if json {
        super::print_json(&summary)?;
    } else {
        print_summary(&summary);
    }
    if !summary.failed.is_empty() {
        std::process::exit(EXIT_FAILED);
    }
    Ok(())
}

fn describe(r: &SeedReport) {
    println!("seed {}: {}", r.seed, r.scenario);
    for (i, point) in r.crash_points.iter().enumerate() {
        println!("  crash {}: {point}", i + 1);
    }
    println!(
        "  commits: {} acknowledged, {} in doubt, lost: {}",
        r.outcome.acked_commits,
        r.outcome.in_doubt_commits,
        if r.outcome.lost_commits == 0 {
            "none"
        } else {
            "SOME"
        }
    );
    if r.ipl_recoveries > 0 {
        println!(
            "  ipl restarts: {} recoveries, {} redo records of IPL pages applied, {} skipped",
            r.ipl_recoveries, r.ipl_pages_redone, r.ipl_pages_skipped
        );
    }
    for (kind, n) in r.faults.by_kind() {
        if n > 0 {
            println!("  fault: {kind}: {n}");
        }
    }
    println!(
        "  damaged page images caught: {} of {}; pages repaired from the log: {}",
        r.faults.damaged_pages_caught, r.faults.damaged_pages, r.outcome.pages_repaired
    );
    if r.outcome.lost_write_effects > 0 {
        println!("  a lost write (misdirected write) showed in the final check: a known limit");
    }
    if let Some(why) = &r.refused {
        println!("  refused, naming the damage: {why}");
    }
    match &r.failure {
        None => println!("  ok"),
        Some(f) => println!("  FAILED: {f}"),
    }
}

fn print_summary(s: &Summary) {
    println!(
        "seeds               {} run, {} failed ({:.1} host s)",
        s.seeds,
        s.failed.len(),
        s.host_seconds
    );
    println!(
        "crashes             {} ({} during recovery; {} seeds crashed two levels deep in recovery)",
        s.crashes, s.recovery_crashes, s.seeds_with_recovery_depth_2
    );
    for (point, n) in &s.crash_points {
        println!("  crash point       {point}: {n}");
    }
    for (kind, n) in s.faults.by_kind() {
        println!("  fault             {kind}: {n}");
    }
    println!(
        "damaged pages       {} damaged page images, {} caught by checksum or page id; {} pages repaired from the log",
        s.faults.damaged_pages, s.faults.damaged_pages_caught, s.outcome.pages_repaired
    );
    println!(
        "WAL before data     {} violations; {} flushes after a failed flush",
        s.faults.wal_violations, s.faults.flushes_after_failure
    );
    println!(
        "commits             {} acknowledged, {} in doubt, {} seeds lost acknowledged commits",
        s.outcome.acked_commits, s.outcome.in_doubt_commits, s.outcome.lost_commits
    );
    println!(
        "refused             {} seeds refused to open or read, naming the damage",
        s.refused
    );
    if s.ipl_recoveries > 0 {
        println!(
            "ipl restarts        {} recoveries of an IPL space: {} redo records of IPL pages applied, {} skipped",
            s.ipl_recoveries, s.ipl_pages_redone, s.ipl_pages_skipped
        );
        let [merges, discarded, carried, deapplied] = s.ipl_selection;
        println!(
            "ipl selection       {merges} selective merges: {discarded} records of aborted transactions left out, {carried} of active ones carried over; {deapplied} de-applied by aborts"
        );
    }
    println!(
        "log damage          {} seeds with log damage injected: {} recovered, {} refused naming the damage, {} silently lost",
        s.log_damage_seeds,
        s.log_damage_recovered,
        s.log_damage_refused,
        s.log_damage_silently_lost
    );
    if s.outcome.lost_write_effects > 0 {
        println!(
            "lost writes         {} misdirect seeds showed a lost write (a known limit)",
            s.outcome.lost_write_effects
        );
    }
    println!("{}", if s.failed.is_empty() { "ok" } else { "FAILED" });
}
