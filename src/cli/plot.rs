//! `flashlab plot TRACE --out FILE.svg|png [--title T]`

use std::path::PathBuf;

use flashlab_devices::trace::formats::read_flashlab_file;
use flashlab_lab::plot::plot_trace;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A flashlab CSV trace (from `--trace` of bench, or `trace convert`).
    trace: PathBuf,
    /// Output file; .svg or .png.
    #[arg(long)]
    out: PathBuf,
    /// Title of the plot.
    #[arg(long)]
    title: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let out = super::output::OutputFile::create("--out", &args.out)?;
    let records = read_flashlab_file(&args.trace)?;
    let title = args
        .title
        .unwrap_or_else(|| format!("I/O pattern of {}", args.trace.display()));
    plot_trace(&records, &title, out.tmp_path())
        .map_err(|e| anyhow::anyhow!("--out {}: {e}", args.out.display()))?;
    out.finish()
}
