//! `flashlab replay --device PRESET (--trace FILE [--format F] | --synthetic N) [--json]`

use std::path::PathBuf;

use anyhow::{Context, bail};
use flashlab_devices::characterize::{CharacterizeOptions, precondition};
use flashlab_devices::presets;
use flashlab_devices::replay::{ReplayOptions, ReplayResult, random_trace, replay};
use flashlab_devices::trace::formats::{TraceFormat, read_trace_file};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The device preset to replay through.
    #[arg(long)]
    device: String,
    /// The block trace to replay.
    #[arg(
        long,
        required_unless_present = "synthetic",
        conflicts_with = "synthetic"
    )]
    trace: Option<PathBuf>,
    /// Trace format: flashlab, msr, spc, mqsim or blkparse.
    #[arg(long, default_value = "flashlab")]
    format: TraceFormat,
    /// Replay N generated random requests instead of a file (the replay
    /// benchmark).
    #[arg(long)]
    synthetic: Option<usize>,
    /// Fraction of reads in the generated requests.
    #[arg(long, default_value_t = 0.7)]
    read_fraction: f64,
    /// Size of each generated request in KB.
    #[arg(long, default_value_t = 4)]
    block_kb: u64,
    /// Arrival rate of the generated requests (per simulated second).
    #[arg(long, default_value_t = 20_000.0)]
    iops: f64,
    /// Seed of the generated requests.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Fold offsets beyond the device's capacity back into it.
    #[arg(long)]
    wrap: bool,
    /// Bring the model to steady state first (sequential fill, random 4 KB
    /// writes), so garbage collection is active; counters then cover the
    /// replay only.
    #[arg(long)]
    precondition: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut model = presets::build_model(&args.device)?;
    let requests = match (&args.trace, args.synthetic) {
        (Some(path), _) => read_trace_file(path, args.format)?,
        (None, Some(count)) => {
            if !(0.0..=1.0).contains(&args.read_fraction) {
                bail!(
                    "--read-fraction must be within 0..1, not {}",
                    args.read_fraction
                );
            }
            if args.block_kb == 0 || !args.iops.is_finite() || args.iops <= 0.0 {
                bail!("--block-kb and --iops must be positive");
            }
            random_trace(
                args.seed,
                count,
                args.read_fraction,
                args.block_kb * 1024,
                model.capacity_bytes(),
                args.iops,
            )
        }
        (None, None) => bail!("give --trace FILE or --synthetic N"),
    };
    let start_ns = if args.precondition {
        // Random writes of twice the capacity: free blocks run out and
        // garbage collection reaches its steady state.
        let options = CharacterizeOptions {
            seed: args.seed,
            precondition_region_multiple: 2,
            precondition_random_bytes_max: u64::MAX,
            ..CharacterizeOptions::default()
        };
        precondition(model.as_mut(), &options)?
    } else {
        0
    };
    let before = model.stats();
    let options = ReplayOptions {
        wrap: args.wrap,
        start_ns,
    };
    let what = args.trace.as_ref().map_or_else(
        || "synthetic trace".to_string(),
        |p| p.display().to_string(),
    );
    let mut result = replay(model.as_mut(), &requests, &options).with_context(|| what.clone())?;
    if args.precondition {
        // Count the replay only, not the preconditioning.
        let after = &result.model;
        result.gc_runs = after.gc_runs - before.gc_runs;
        result.erases = after.erases - before.erases;
        let host = after.host_pages_written - before.host_pages_written;
        let flash = after.flash_pages_written - before.flash_pages_written;
        result.waf = (host > 0).then(|| flash as f64 / host as f64);
    }
    if args.json {
        return super::print_json(&result);
    }
    print_text(&result);
    Ok(())
}

fn print_text(r: &ReplayResult) {
    println!("device            {}", r.device);
    println!(
        "requests          {} ({} reads, {} writes, {} flushes, {} trims)",
        r.requests, r.reads, r.writes, r.flushes, r.trims
    );
    println!("simulated time    {:.3} s", r.simulated_seconds);
    println!("IOPS              {:.0}", r.iops);
    println!("bandwidth         {:.1} MB/s", r.bandwidth_mb_s);
    println!(
        "latency (us)      mean {:.1}  p50 {:.1}  p99 {:.1}  max {:.1}",
        r.latency_us.mean, r.latency_us.p50, r.latency_us.p99, r.latency_us.max
    );
    match r.waf {
        Some(waf) => println!(
            "write amp.        {waf:.2}  (GC runs {}, erases {})",
            r.gc_runs, r.erases
        ),
        None => println!("write amp.        n/a"),
    }
    if r.resorted {
        println!("note              the trace was not in arrival order; it was sorted");
    }
    if r.folded > 0 {
        println!(
            "note              {} requests folded into the device by --wrap",
            r.folded
        );
    }
    println!(
        "host              {:.3} s, {:.0} simulated I/Os per host second",
        r.host_seconds, r.simulated_ios_per_host_second
    );
}
