//! `flashlab calibrate [--out FILE] [--rounds N] [--tuples N] [--fit-only]`

use std::path::PathBuf;

use flashlab_lab::calibrate::{Calibration, calibrate, committed, refit};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where to write the calibration (JSON); the engine compiles in
    /// crates/engine/data/cpu-calibration.json (rebuild after writing it
    /// there).
    #[arg(long, default_value = "cpu-calibration.json")]
    out: PathBuf,
    /// Rounds to take the median of.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Sort records per round of the operator prices.
    #[arg(long, default_value_t = 1_000_000)]
    tuples: u64,
    /// Keep the committed prices and fit the system profiles again (the
    /// counting runs are simulations: the same binary fits the same).
    #[arg(long)]
    fit_only: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.rounds == 0 || args.rounds > 100 {
        anyhow::bail!("--rounds {}: must be 1 to 100", args.rounds);
    }
    if !(1_000..=10_000_000).contains(&args.tuples) {
        anyhow::bail!("--tuples {}: must be 1,000 to 10,000,000", args.tuples);
    }
    let out = super::output::OutputFile::create("--out", &args.out)?;
    let progress = |line: &str| eprintln!("{line}");
    let c = if args.fit_only {
        refit(committed(), progress)
    } else {
        let scratch =
            std::env::temp_dir().join(format!("flashlab-calibrate-{}", std::process::id()));
        let _remove = super::interrupt::remove_on_interrupt(&scratch);
        let c = calibrate(args.rounds, args.tuples, &scratch, progress);
        let _ = std::fs::remove_dir_all(&scratch);
        c
    }?;
    print_calibration(&c);
    let mut json = serde_json::to_vec_pretty(&c)?;
    json.push(b'\n');
    // The engine compiles this file in: refuse to write one it would refuse
    // (CAL-1), such as a price a difference made negative on a noisy machine.
    if let Err(e) = Calibration::parse(std::str::from_utf8(&json)?) {
        anyhow::bail!(
            "calibrate: the measurement is not a valid calibration ({e}); nothing written to {}; rerun with more --rounds on a quieter machine",
            args.out.display()
        );
    }
    out.write_all_and_finish(&json)?;
    println!("wrote {}", args.out.display());
    Ok(())
}

fn print_calibration(c: &Calibration) {
    print!("{}", flashlab_lab::calibrate::describe(c));
}
