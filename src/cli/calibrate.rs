//! `flashlab calibrate [--out FILE] [--rounds N] [--tuples N]`

use std::path::PathBuf;

use flashlab_lab::calibrate::{Calibration, calibrate, in_use_ns};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where to write the measurement (JSON); the engine charges, and the
    /// report cites, crates/engine/data/cpu-calibration.json (rebuild after
    /// writing it there).
    #[arg(long, default_value = "cpu-calibration.json")]
    out: PathBuf,
    /// Rounds to take the median of.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Sort records per round (the operator prices were first measured on 1,000,000).
    #[arg(long, default_value_t = 1_000_000)]
    tuples: u64,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.rounds == 0 || args.rounds > 100 {
        anyhow::bail!("--rounds {}: must be 1 to 100", args.rounds);
    }
    if !(1_000..=10_000_000).contains(&args.tuples) {
        anyhow::bail!("--tuples {}: must be 1,000 to 10,000,000", args.tuples);
    }
    let out = super::output::OutputFile::create("--out", &args.out)?;
    let c = calibrate(args.rounds, args.tuples, |line| eprintln!("{line}"))
        .map_err(anyhow::Error::msg)?;
    println!(
        "update-commit: {:.0} host ns = {:.0} ns at {} GHz (the calibration point)",
        c.update_commit_host_ns, c.update_commit_reference_ns, c.reference_ghz
    );
    println!(
        "{:<48} {:>10} {:>10} {:>12} {:>12}",
        "price", "host ns", "ratio", "implied ns", "in use ns"
    );
    for p in &c.prices {
        println!(
            "{:<48} {:>10.2} {:>10.5} {:>12.1} {:>12.1}",
            p.name,
            p.host_ns,
            p.ratio_to_update_commit,
            p.implied_ns,
            in_use_ns(p.key)
        );
    }
    let mut json = serde_json::to_vec_pretty(&c)?;
    json.push(b'\n');
    // The engine compiles this file in: refuse to write one it would refuse
    // (CAL-1), such as a price the per-tuple and per-byte split made
    // negative on a noisy machine.
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
