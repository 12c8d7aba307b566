//! `flashlab characterize --device PRESET | --file PATH [--json]`

use std::path::PathBuf;

use anyhow::{Context, bail};
use flashlab_devices::characterize::{
    CharacterizeOptions, PRECONDITION_REGION_MULTIPLE_MAX, SPEEDUP_BLOCKS_KB,
    SPEEDUP_WARMUP_BYTES_DEFAULT, characterize, speedups, speedups_text_table,
};
use flashlab_devices::presets;
use flashlab_lab::filechar::{FILE_BYTES_DEFAULT, FileOptionsChar, characterize_file};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A device preset (see `flashlab devices`).
    #[arg(long, conflicts_with = "file", required_unless_present = "file")]
    device: Option<String>,
    /// A real file on this machine, measured in wall-clock time (created,
    /// measured, removed).
    #[arg(long)]
    file: Option<PathBuf>,
    /// Size of the test file in MB (with --file).
    #[arg(long, default_value_t = FILE_BYTES_DEFAULT >> 20)]
    file_mb: u64,
    /// Queue depth of the deep random points.
    #[arg(long, default_value_t = 32)]
    queue_depth: u32,
    /// Measured requests per point (models).
    #[arg(long, default_value_t = 2000)]
    requests: u32,
    /// Seed of the offsets.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Measure sequential over random IOPS by request size instead (wang2010
    /// Figure 11): 4 to 256 KB, queue depth 1, after preconditioning.
    #[arg(long, conflicts_with = "file")]
    speedup: bool,
    /// Random 4 KB preconditioning writes, in MB (default: twice the region,
    /// at most 4 GiB; at most `PRECONDITION_MB_MAX`).
    #[arg(long)]
    precondition_mb: Option<u64>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.queue_depth == 0 {
        bail!("--queue-depth must be at least 1");
    }
    if let Some(path) = &args.file {
        return run_file(path, &args);
    }
    let name = args
        .device
        .as_deref()
        .expect("clap requires --device or --file");
    let mut model = presets::build_model(name)?;
    let mut options = CharacterizeOptions {
        seed: args.seed,
        queue_depth: args.queue_depth,
        requests_per_point: args.requests,
        ..CharacterizeOptions::default()
    };
    if let Some(mb) = args.precondition_mb {
        if mb > PRECONDITION_MB_MAX {
            bail!("--precondition-mb {mb}: at most {PRECONDITION_MB_MAX} (PRECONDITION_MB_MAX)");
        }
        options.precondition_region_multiple = PRECONDITION_REGION_MULTIPLE_MAX;
        options.precondition_random_bytes_max = mb << 20;
    }
    if args.speedup {
        let points = speedups(
            model.as_mut(),
            &options,
            &SPEEDUP_BLOCKS_KB,
            SPEEDUP_WARMUP_BYTES_DEFAULT,
        )?;
        if args.json {
            return super::print_json(&points);
        }
        print!("{}", speedups_text_table(name, &points));
        return Ok(());
    }
    let result = characterize(model.as_mut(), &options)?;
    if args.json {
        return super::print_json(&result);
    }
    print!("{}", result.to_text_table());
    Ok(())
}

/// Largest `--precondition-mb` (1 TiB of random writes).
pub const PRECONDITION_MB_MAX: u64 = 1 << 20;

/// Largest test file of `characterize --file`, in MB (1 TiB).
pub const FILE_MB_MAX: u64 = 1 << 20;

fn run_file(path: &std::path::Path, args: &Args) -> anyhow::Result<()> {
    if path.exists() {
        bail!(
            "--file {}: already exists; give a path for a new test file",
            path.display()
        );
    }
    if args.file_mb == 0 || args.file_mb > FILE_MB_MAX {
        bail!("--file-mb {}: must be 1 to {FILE_MB_MAX}", args.file_mb);
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    if let Some(free) = super::free_bytes(parent).filter(|&f| args.file_mb << 20 > f) {
        bail!(
            "--file-mb {}: more than the {} MB free in {}",
            args.file_mb,
            free >> 20,
            parent.display()
        );
    }
    let options = FileOptionsChar {
        file_bytes: args.file_mb << 20,
        queue_depth: args.queue_depth,
        seed: args.seed,
    };
    // The test file did not exist before (checked above): a signal removes it.
    let _on_signal = super::interrupt::remove_on_interrupt(path);
    let result =
        characterize_file(path, &options).with_context(|| format!("--file {}", path.display()))?;
    if args.json {
        return super::print_json(&result);
    }
    print!("{}", result.figures.to_text_table());
    println!(
        "fdatasync after a 4 KB write: {:.3} ms (O_DIRECT: {})",
        result.fdatasync_latency_ms,
        if result.direct_io {
            "yes"
        } else {
            "no, the file system refused it; reads may hit the page cache"
        }
    );
    Ok(())
}
