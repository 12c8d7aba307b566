//! `flashlab reproduce [--out DIR] [--quick] [--only ID] [--seed S]`

use std::path::PathBuf;

use flashlab_lab::reproduce::{ReproduceOptions, reproduce};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory for index.html, results.json and the raw files.
    #[arg(long, default_value = "flashlab-report")]
    out: PathBuf,
    /// Smaller runs (minutes, not tens of minutes).
    #[arg(long)]
    quick: bool,
    /// Run only this experiment (repeatable).
    #[arg(long)]
    only: Vec<String>,
    /// Seed of the simulated world; the same seed gives the same report numbers.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    super::output::check_dir("--out", &args.out)?;
    let options = ReproduceOptions {
        quick: args.quick,
        seed: args.seed,
        only: args.only,
    };
    let summary =
        reproduce(&args.out, &options, |line| eprintln!("{line}")).map_err(anyhow::Error::msg)?;
    println!(
        "{} experiments; predictions {}/{} pass, calibration {}/{} pass; {:.1} s; report: {}",
        summary.experiments,
        summary.prediction_passed,
        summary.predictions,
        summary.calibration_passed,
        summary.calibrations,
        summary.host_seconds,
        args.out.join("index.html").display()
    );
    Ok(())
}
