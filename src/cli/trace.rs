//! `flashlab trace convert|summary|generate`

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Subcommand;
use flashlab_devices::replay::random_requests;
use flashlab_devices::trace::formats::{
    TraceFormat, TraceRequest, read_flashlab_file, read_trace_file, write_flashlab_csv_stream,
    write_mqsim_stream,
};
use flashlab_devices::trace::summary::{render_table, summarize};
use flashlab_devices::{Space, TraceRecord};

use super::output::OutputFile;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Convert a block trace to flashlab CSV or MQSim ASCII.
    Convert {
        /// Input trace.
        input: PathBuf,
        /// Input format: flashlab, msr, spc, mqsim or blkparse.
        #[arg(long, default_value = "flashlab")]
        from: TraceFormat,
        /// Output format: flashlab or mqsim.
        #[arg(long)]
        to: TraceFormat,
        /// Output file.
        #[arg(long)]
        out: PathBuf,
    },
    /// Summarise a flashlab trace per device and storage space.
    Summary {
        /// A flashlab CSV trace.
        input: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Write a random trace (for replay benchmarks).
    Generate {
        /// Number of requests.
        #[arg(long)]
        count: u64,
        /// Share of the requests that are reads (0 to 1).
        #[arg(long, default_value_t = 0.7)]
        read_fraction: f64,
        /// Size of each request in KB.
        #[arg(long, default_value_t = 4)]
        block_kb: u64,
        /// Address range in GB.
        #[arg(long, default_value_t = 16)]
        span_gb: u64,
        /// Arrival rate, requests per second (Poisson arrivals).
        #[arg(long, default_value_t = 20_000.0)]
        iops: f64,
        /// Seed of the addresses, kinds and arrival times.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Output format: flashlab or mqsim.
        #[arg(long, default_value = "mqsim")]
        to: TraceFormat,
        /// Output file (written beside it, then renamed over it).
        #[arg(long)]
        out: PathBuf,
    },
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Convert {
            input,
            from,
            to,
            out,
        } => {
            let output = OutputFile::create("--out", &out)?;
            let requests = read_trace_file(&input, from)?;
            write_stream(requests.into_iter(), to, output)
        }
        Command::Summary { input, json } => {
            let records = read_flashlab_file(&input)?;
            let summaries = summarize(&records);
            if json {
                return super::print_json(&summaries);
            }
            print!("{}", render_table(&summaries));
            Ok(())
        }
        Command::Generate {
            count,
            read_fraction,
            block_kb,
            span_gb,
            iops,
            seed,
            to,
            out,
        } => {
            let span_bytes = span_gb
                .checked_mul(1 << 30)
                .filter(|_| (1..=SPAN_GB_MAX).contains(&span_gb))
                .ok_or_else(|| {
                    anyhow::anyhow!("--span-gb {span_gb}: must be 1 to {SPAN_GB_MAX}")
                })?;
            super::replay::check_generator(
                count,
                "--count",
                TRACE_REQUESTS_MAX,
                read_fraction,
                block_kb,
                iops,
                span_bytes,
            )?;
            let output = OutputFile::create("--out", &out)?;
            let requests = random_requests(
                seed,
                count,
                read_fraction,
                block_kb * 1024,
                span_bytes,
                iops,
            );
            write_stream(requests, to, output)
        }
    }
}

/// Most requests `trace generate` writes (streamed; about 30 GB of MQSim text).
pub const TRACE_REQUESTS_MAX: u64 = 1_000_000_000;
/// Largest address range of a generated trace, in GB (1 PB).
pub const SPAN_GB_MAX: u64 = 1 << 20;

/// Write `requests` to `output` as they come (never held), then rename it
/// over its path: no half-written output.
fn write_stream(
    requests: impl Iterator<Item = TraceRequest>,
    to: TraceFormat,
    mut output: OutputFile,
) -> anyhow::Result<()> {
    if !matches!(to, TraceFormat::Mqsim | TraceFormat::Flashlab) {
        bail!("cannot write {to} traces (write flashlab or mqsim)");
    }
    let out = output.path().to_path_buf();
    let mut w = BufWriter::new(output.file());
    let written = match to {
        TraceFormat::Mqsim => write_mqsim_stream(requests, &mut w).map_err(anyhow::Error::from),
        _ => {
            let device: Arc<str> = Arc::from("trace");
            let records = requests.map(move |r| TraceRecord {
                submit_ns: r.arrival_ns,
                complete_ns: r.arrival_ns,
                device: device.clone(),
                space: Space::Raw,
                kind: r.kind,
                offset_bytes: r.offset_bytes,
                len_bytes: r.len_bytes,
            });
            write_flashlab_csv_stream(records, &mut w).map_err(anyhow::Error::from)
        }
    };
    let finished = written.and_then(|()| w.flush().map_err(anyhow::Error::from));
    drop(w);
    finished.with_context(|| format!("--out {}", out.display()))?;
    output.finish()
}
