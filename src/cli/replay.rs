//! `flashlab replay --device PRESET (--trace FILE [--format F] | --synthetic N) [--json]`

use std::path::PathBuf;

use anyhow::{Context, bail};
use flashlab_devices::characterize::{CharacterizeOptions, precondition};
use flashlab_devices::presets;
use flashlab_devices::replay::{
    ReplayOptions, ReplayResult, random_requests, replay, replay_file, replay_stream,
};
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
    synthetic: Option<u64>,
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

/// Most generated requests one replay may ask for (streamed, so the limit
/// is time: about 7 minutes at 2.5 million simulated I/Os per second).
pub const SYNTHETIC_REQUESTS_MAX: u64 = 1_000_000_000;
/// Largest generated request, in KB (and never more than the device).
pub const BLOCK_KB_MAX: u64 = 16 * 1024;

/// Check the generator's options against their limits and the device.
pub fn check_generator(
    count: u64,
    count_option: &str,
    count_max: u64,
    read_fraction: f64,
    block_kb: u64,
    iops: f64,
    capacity_bytes: u64,
) -> anyhow::Result<()> {
    if count == 0 || count > count_max {
        bail!("{count_option} {count}: must be 1 to {count_max}");
    }
    if !(0.0..=1.0).contains(&read_fraction) {
        bail!("--read-fraction must be within 0..1, not {read_fraction}");
    }
    if block_kb == 0 || block_kb > BLOCK_KB_MAX {
        bail!("--block-kb {block_kb}: must be 1 to {BLOCK_KB_MAX}");
    }
    if block_kb * 1024 > capacity_bytes {
        bail!("--block-kb {block_kb}: larger than the device's {capacity_bytes} bytes");
    }
    if !iops.is_finite() || iops <= 0.0 {
        bail!("--iops must be a positive number");
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut model = presets::build_model(&args.device)?;
    match (&args.trace, args.synthetic) {
        (Some(_), _) => {}
        (None, Some(count)) => {
            check_generator(
                count,
                "--synthetic",
                SYNTHETIC_REQUESTS_MAX,
                args.read_fraction,
                args.block_kb,
                args.iops,
                model.capacity_bytes(),
            )?;
        }
        (None, None) => bail!("give --trace FILE or --synthetic N"),
    }
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
    let mut result = match &args.trace {
        // Checked in one pass and replayed from memory, or for a long file
        // read again; a long file out of order is read whole (bounded) and
        // sorted.
        Some(path) => match replay_file(model.as_mut(), path, args.format, &options) {
            Ok(Some(result)) => Ok(result),
            Ok(None) => {
                let requests = read_trace_file(path, args.format)?;
                replay(model.as_mut(), &requests, &options)
            }
            Err(e) => Err(e),
        },
        None => {
            let generated = random_requests(
                args.seed,
                args.synthetic.unwrap_or(0),
                args.read_fraction,
                args.block_kb * 1024,
                model.capacity_bytes(),
                args.iops,
            );
            replay_stream(model.as_mut(), generated, &options)
        }
    }
    .with_context(|| what.clone())?;
    if args.precondition {
        // Count the replay only, not the preconditioning.
        let after = &result.model;
        result.gc_runs = after.gc_runs - before.gc_runs;
        result.erases = after.erases - before.erases;
        let host = after.host_pages_written - before.host_pages_written;
        let flash = after.flash_pages_written - before.flash_pages_written;
        result.waf = (host > 0).then(|| flash as f64 / host as f64);
        result.preconditioned = Some(before);
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
            "write amp.        {waf:.2}  (GC runs {}, erases {}{})",
            r.gc_runs,
            r.erases,
            match &r.preconditioned {
                Some(_) => format!(
                    "; the replay only: since the model was built WAF {}, GC runs {}, erases {}",
                    r.model.waf.map_or("n/a".into(), |w| format!("{w:.2}")),
                    r.model.gc_runs,
                    r.model.erases
                ),
                None => String::new(),
            }
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
