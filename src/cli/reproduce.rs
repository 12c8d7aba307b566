//! `flashlab reproduce [--out DIR] [--quick] [--only ID] [--seed S]
//! [--jobs N] [--resume] [--quiet]`, and its work units: `--list-units`,
//! `--unit ID`, `--merge DIR...` (docs/REPRODUCE.md).
//!
//! On a terminal it shows the experiments running, each one's
//! configuration of how many, the time elapsed and an ETA from the
//! experiments' host times on earlier runs; otherwise, or with `--quiet`,
//! only the final summary. A signal keeps the finished experiments and
//! names them; `--resume` completes the run.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use flashlab_lab::reproduce::{
    Event, Events, ReproduceOptions, ReproduceSummary, expected_seconds, merge, reproduce, units,
};

use super::interrupt::{Registered, keep_on_interrupt};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory for index.html, results.json, the unit records and the raw files.
    #[arg(long, default_value = "flashlab-report")]
    out: PathBuf,
    /// Smaller runs, a few minutes in all; its verdicts are indicative.
    #[arg(long)]
    quick: bool,
    /// Run only this experiment (repeatable).
    #[arg(long)]
    only: Vec<String>,
    /// Seed of the simulated world; the same seed gives the same report numbers.
    #[arg(long)]
    seed: Option<u64>,
    /// Experiments run at once (1 to 64; default: the machine's cores).
    /// results.json does not depend on it.
    #[arg(long)]
    jobs: Option<usize>,
    /// Skip the experiments --out already holds from a run of the same
    /// seed, options and binary.
    #[arg(long)]
    resume: bool,
    /// Data scale against the papers, 1/N (petrov2010's units: 1/100,
    /// the default, or 1/10).
    #[arg(long, value_name = "1/N")]
    scale: Option<String>,
    /// Print only the final summary, even on a terminal.
    #[arg(long)]
    quiet: bool,
    /// Print the work units (experiments) with their expected host time, and exit.
    #[arg(long)]
    list_units: bool,
    /// Run one work unit into --out, for --merge to assemble later.
    #[arg(long, value_name = "ID")]
    unit: Option<String>,
    /// Assemble the report in --out from the finished units in these directories.
    #[arg(long, value_name = "DIR", num_args = 1..)]
    merge: Vec<PathBuf>,
}

/// Most experiments one run may run at once.
const JOBS_MAX: usize = 64;
/// The seed when --seed is not given.
const SEED_DEFAULT: u64 = 1;

/// `--scale 1/N`, for units that can run at it: petrov2010's.
fn scale(args: &Args) -> anyhow::Result<Option<u32>> {
    use flashlab_lab::experiments::petrov2010::SCALES;
    let Some(text) = &args.scale else {
        return Ok(None);
    };
    let n = text
        .strip_prefix("1/")
        .and_then(|n| n.parse::<u32>().ok())
        .filter(|n| SCALES.contains(n))
        .ok_or_else(|| {
            let known: Vec<String> = SCALES.iter().map(|n| format!("1/{n}")).collect();
            anyhow::anyhow!("--scale '{text}': must be one of {}", known.join(", "))
        })?;
    let units: Vec<&String> = args.unit.iter().chain(&args.only).collect();
    if units.is_empty() || units.iter().any(|u| !u.starts_with("petrov2010-")) {
        bail!(
            "--scale {text}: only petrov2010's units run at another scale (give --only petrov2010-table4, petrov2010-figure5)"
        );
    }
    Ok(Some(n))
}

/// Refuse flags that do not go together, naming the flag.
fn check_flags(args: &Args) -> anyhow::Result<()> {
    let given = |on: bool, flag: &'static str| on.then_some(flag);
    let run_flags = [
        given(args.quick, "--quick"),
        given(!args.only.is_empty(), "--only"),
        given(args.seed.is_some(), "--seed"),
        given(args.jobs.is_some(), "--jobs"),
        given(args.resume, "--resume"),
        given(args.unit.is_some(), "--unit"),
    ];
    if !args.merge.is_empty()
        && let Some(flag) = run_flags.iter().flatten().next()
    {
        bail!("{flag}: --merge runs nothing; it assembles finished units (give one or the other)");
    }
    if args.list_units
        && let Some(flag) = run_flags.iter().flatten().find(|f| **f != "--quick")
    {
        bail!("{flag}: --list-units runs nothing (give one or the other)");
    }
    if args.list_units && !args.merge.is_empty() {
        bail!("--merge: --list-units runs nothing (give one or the other)");
    }
    if args.unit.is_some() && !args.only.is_empty() {
        bail!("--only: --unit runs one unit (give one or the other)");
    }
    if let Some(j) = args.jobs
        && !(1..=JOBS_MAX).contains(&j)
    {
        bail!("--jobs {j}: must be 1 to {JOBS_MAX}");
    }
    Ok(())
}

/// Scratch space a full report's simulated devices need at once (two
/// jobs' databases, images and temp spaces), with room to spare.
const SCRATCH_BYTES_FULL: u64 = 8 << 30;
/// The same for `--quick`.
const SCRATCH_BYTES_QUICK: u64 = 2 << 30;
/// The same for petrov2010 at `--scale 1/10`: two databases of 80 full
/// warehouses (one per page size) and what each run writes over them.
const SCRATCH_BYTES_PETROV_TENTH: u64 = 24 << 30;

/// Scratch space the units about to run need, once the flags' own errors
/// (which name the flag at fault) are ruled out.
pub fn scratch_need_bytes(args: &Args) -> anyhow::Result<u64> {
    check_flags(args)?;
    if args.list_units || !args.merge.is_empty() {
        return Ok(0);
    }
    Ok(match (scale(args)?, args.quick) {
        (Some(_), _) => SCRATCH_BYTES_PETROV_TENTH,
        (None, true) => SCRATCH_BYTES_QUICK,
        (None, false) => SCRATCH_BYTES_FULL,
    })
}

pub fn run(args: Args) -> anyhow::Result<()> {
    check_flags(&args)?;
    if args.list_units {
        return list_units(&args.out, args.quick);
    }
    let known: Vec<&str> = units().iter().map(|(id, _)| *id).collect();
    if let Some(id) = &args.unit
        && !known.contains(&id.as_str())
    {
        bail!("--unit '{id}': no such unit (known: {})", known.join(", "));
    }
    for dir in &args.merge {
        if !dir.is_dir() {
            bail!("--merge {}: not a directory", dir.display());
        }
    }
    super::output::check_dir("--out", &args.out)?;
    let _partials = super::interrupt::remove_partials_on_interrupt(&args.out);
    let terminal = !args.quiet && std::io::stderr().is_terminal();
    let summary = if args.merge.is_empty() {
        run_units(&args, terminal)?
    } else {
        merge(&args.merge, &args.out)?
    };
    print_summary(&summary, &args.out);
    Ok(())
}

/// Run the experiments (all, --only's or --unit's), with progress.
fn run_units(args: &Args, terminal: bool) -> anyhow::Result<ReproduceSummary> {
    let options = ReproduceOptions {
        scale: scale(args)?,
        quick: args.quick,
        seed: args.seed.unwrap_or(SEED_DEFAULT),
        only: match &args.unit {
            Some(id) => vec![id.clone()],
            None => args.only.clone(),
        },
        jobs: args
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        resume: args.resume,
    };
    let display = Arc::new(Display::new(&args.out, terminal, options.jobs));
    let ticker = display.clone().tick_in_background();
    let shown = display.clone();
    let events: Events = Arc::new(move |event| shown.on(event));
    let result = reproduce(&args.out, &options, events);
    display.finish();
    drop(ticker);
    result
}

fn print_summary(summary: &ReproduceSummary, out: &Path) {
    println!(
        "Findings (REPRODUCED: every check it rests on passes; PARTLY: some; NOT REPRODUCED: none):"
    );
    for f in &summary.findings {
        println!(
            "  {:<15} {:<38} published {}; measured {}",
            f.verdict.label(),
            f.id,
            f.published,
            f.measured
        );
        if !f.cause.is_empty() && f.measured != "not run" {
            println!("  {:<15} {}", "", f.cause);
        }
    }
    for (paper, [pass, n]) in &summary.papers {
        println!("  {paper}: {pass} of {n} checks pass");
    }
    let skipped = if summary.skipped.is_empty() {
        String::new()
    } else {
        format!(" ({} reused by --resume)", summary.skipped.join(", "))
    };
    println!(
        "{} experiments{skipped}; predictions {}/{} pass, calibration {}/{} pass, sanity {}/{} hold; {:.1} s; report: {}",
        summary.experiments,
        summary.prediction_passed,
        summary.predictions,
        summary.calibration_passed,
        summary.calibrations,
        summary.sanity_passed,
        summary.sanity,
        summary.host_seconds,
        out.join("index.html").display()
    );
    super::print_scratch();
}

/// `--list-units`: one line per unit, with its expected host seconds.
fn list_units(out: &Path, quick: bool) -> anyhow::Result<()> {
    let mode = if quick { "--quick" } else { "full run" };
    println!("unit\texpected host s ({mode})\ttitle");
    for (id, title) in units() {
        let cost =
            expected_seconds(out, id, quick).map_or("unknown".to_string(), |s| format!("{s:.0}"));
        println!("{id}\t{cost}\t{title}");
    }
    Ok(())
}

/// One unit as the display follows it.
struct Unit {
    expected: Option<f64>,
    started: Option<Instant>,
    /// Configurations finished, of how many.
    steps: (usize, usize),
    finished: bool,
    bar: Option<indicatif::ProgressBar>,
}

/// Progress on a terminal (nothing otherwise), and the registrations that
/// name the finished units if a signal stops the run.
struct Display {
    bars: Option<indicatif::MultiProgress>,
    overall: Option<indicatif::ProgressBar>,
    out: PathBuf,
    jobs: usize,
    started: Instant,
    units: Mutex<(Vec<String>, HashMap<String, Unit>)>,
    kept: Mutex<Vec<Registered>>,
}

impl Display {
    fn new(out: &Path, terminal: bool, jobs: usize) -> Display {
        let bars = terminal.then(indicatif::MultiProgress::new);
        let overall = bars.as_ref().map(|b| {
            let bar = b.add(indicatif::ProgressBar::new(0));
            bar.set_style(
                indicatif::ProgressStyle::with_template("[{pos}/{len} experiments] {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
        Display {
            overall,
            bars,
            out: out.to_path_buf(),
            jobs,
            started: Instant::now(),
            units: Mutex::new((Vec::new(), HashMap::new())),
            kept: Mutex::new(Vec::new()),
        }
    }

    fn on(&self, event: Event) {
        if let Event::Finished { record, .. } = &event {
            let kept = keep_on_interrupt(record);
            self.kept
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(kept);
        }
        if self.bars.is_some() {
            self.show(event);
        }
    }

    fn line(&self, text: String) {
        if let Some(bars) = &self.bars {
            let _ = bars.println(text);
        }
    }

    /// Update the bars for `event` (on a terminal).
    fn show(&self, event: Event) {
        let mut guard = self.units.lock().unwrap_or_else(|e| e.into_inner());
        let (order, units) = &mut *guard;
        match event {
            Event::Planned { run, skipped } => {
                self.line(format!(
                    "flashlab reproduce: writing the report to {} ({} experiments, {} at a time)",
                    self.out.join("index.html").display(),
                    run.len(),
                    self.jobs
                ));
                if !skipped.is_empty() {
                    self.line(format!(
                        "--resume: skipping {} (done by an earlier run with this seed, options and binary)",
                        skipped.join(", ")
                    ));
                }
                for (id, expected) in run {
                    order.push(id.clone());
                    let unit = Unit {
                        expected,
                        started: None,
                        steps: (0, 0),
                        finished: false,
                        bar: None,
                    };
                    units.insert(id, unit);
                }
                if let Some(o) = &self.overall {
                    o.set_length(order.len() as u64);
                }
            }
            Event::Started { id, .. } => {
                let bar = self.bars.as_ref().map(|b| b.add(unit_bar(&id)));
                if let Some(u) = units.get_mut(&id) {
                    u.started = Some(Instant::now());
                    u.bar = bar;
                }
            }
            Event::Step { id, done, total } => {
                if let Some(u) = units.get_mut(&id) {
                    u.steps = (done, total);
                    if let Some(bar) = &u.bar {
                        bar.set_length(total as u64);
                        bar.set_position(done as u64);
                    }
                }
            }
            Event::Finished { id, seconds, .. } => {
                if let Some(u) = units.get_mut(&id) {
                    u.finished = true;
                    if let (Some(bars), Some(bar)) = (&self.bars, u.bar.take()) {
                        bars.remove(&bar);
                    }
                }
                self.line(format!("  {id}: done in {seconds:.1} s"));
                if let Some(o) = &self.overall {
                    o.inc(1);
                }
            }
        }
        self.update_overall(order, units);
    }

    /// The overall bar's message: elapsed and the ETA.
    fn update_overall(&self, order: &[String], units: &HashMap<String, Unit>) {
        let Some(overall) = &self.overall else { return };
        let mut left = 0.0;
        let mut unknown = 0;
        for u in order.iter().filter_map(|id| units.get(id)) {
            match time_left(u) {
                Some(s) => left += s,
                None => unknown += 1,
            }
        }
        let eta = left / self.jobs.min(order.len()).max(1) as f64;
        let eta = match unknown {
            0 => format!("ETA {}", clock(eta)),
            n if n == order.len() => "no ETA yet (no earlier run's times in --out)".to_string(),
            n => format!("ETA at least {} ({n} with no earlier time)", clock(eta)),
        };
        overall.set_message(format!(
            "{} elapsed, {eta}",
            clock(self.started.elapsed().as_secs_f64())
        ));
    }

    /// Refresh the ETA every second until the returned guard is dropped.
    fn tick_in_background(self: Arc<Self>) -> Option<Ticker> {
        self.overall.as_ref()?;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::spawn(move || {
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(500));
                let guard = self.units.lock().unwrap_or_else(|e| e.into_inner());
                self.update_overall(&guard.0, &guard.1);
            }
        });
        Some(Ticker(stop))
    }

    fn finish(&self) {
        if let Some(o) = &self.overall {
            o.finish_and_clear();
        }
    }
}

/// Host seconds unit `u` still needs: its expected time less what it ran,
/// or, with no expected time, its pace over the configurations so far.
fn time_left(u: &Unit) -> Option<f64> {
    if u.finished {
        return Some(0.0);
    }
    let ran = u.started.map_or(0.0, |t| t.elapsed().as_secs_f64());
    match (u.expected, u.steps) {
        (Some(e), _) => Some((e - ran).max(0.0)),
        (None, (done, total)) if done > 0 && total >= done => {
            Some(ran * (total - done) as f64 / done as f64)
        }
        _ => None,
    }
}

/// Stops the ETA thread when dropped.
struct Ticker(Arc<std::sync::atomic::AtomicBool>);

impl Drop for Ticker {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

fn unit_bar(id: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(1);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "  {prefix}: configuration {pos}/{len} {wide_bar} {elapsed}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_prefix(id.to_string());
    bar.enable_steady_tick(Duration::from_secs(1));
    bar
}

/// Seconds as `1 min 05 s` or `42 s`.
fn clock(seconds: f64) -> String {
    let s = seconds.round() as u64;
    if s >= 60 {
        format!("{} min {:02} s", s / 60, s % 60)
    } else {
        format!("{s} s")
    }
}
