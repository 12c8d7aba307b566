//! `flashlab trace convert|summary|generate`

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Subcommand;
use flashlab_devices::replay::random_trace;
use flashlab_devices::trace::formats::{
    TraceFormat, TraceRequest, read_flashlab_file, read_trace_file, write_flashlab_csv, write_mqsim,
};
use flashlab_devices::trace::summary::{render_table, summarize};
use flashlab_devices::{Space, TraceRecord};

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
        count: usize,
        #[arg(long, default_value_t = 0.7)]
        read_fraction: f64,
        #[arg(long, default_value_t = 4)]
        block_kb: u64,
        /// Address range in GB.
        #[arg(long, default_value_t = 16)]
        span_gb: u64,
        #[arg(long, default_value_t = 20_000.0)]
        iops: f64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Output format: flashlab or mqsim.
        #[arg(long, default_value = "mqsim")]
        to: TraceFormat,
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
            let requests = read_trace_file(&input, from)?;
            write_requests(&requests, to, &out)
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
            if !(0.0..=1.0).contains(&read_fraction)
                || block_kb == 0
                || span_gb == 0
                || !iops.is_finite()
                || iops <= 0.0
            {
                bail!(
                    "--read-fraction must be within 0..1 and --block-kb, --span-gb, --iops positive"
                );
            }
            let requests = random_trace(
                seed,
                count,
                read_fraction,
                block_kb * 1024,
                span_gb << 30,
                iops,
            );
            write_requests(&requests, to, &out)
        }
    }
}

/// Write to a temporary name, then rename: no half-written output.
fn write_requests(requests: &[TraceRequest], to: TraceFormat, out: &Path) -> anyhow::Result<()> {
    let tmp = out.with_extension("partial");
    let file = File::create(&tmp).with_context(|| format!("--out {}", tmp.display()))?;
    let mut w = BufWriter::new(file);
    let written = match to {
        TraceFormat::Mqsim => write_mqsim(requests, &mut w).map_err(anyhow::Error::from),
        TraceFormat::Flashlab => {
            let device: Arc<str> = Arc::from("trace");
            let records: Vec<TraceRecord> = requests
                .iter()
                .map(|r| TraceRecord {
                    submit_ns: r.arrival_ns,
                    complete_ns: r.arrival_ns,
                    device: device.clone(),
                    space: Space::Raw,
                    kind: r.kind,
                    offset_bytes: r.offset_bytes,
                    len_bytes: r.len_bytes,
                })
                .collect();
            write_flashlab_csv(&records, &mut w).map_err(anyhow::Error::from)
        }
        other => Err(anyhow::anyhow!(
            "cannot write {other} traces (write flashlab or mqsim)"
        )),
    };
    let finished = written.and_then(|()| w.flush().map_err(anyhow::Error::from));
    if let Err(e) = finished {
        let _ = std::fs::remove_file(&tmp);
        return Err(e.context(format!("--out {}", out.display())));
    }
    std::fs::rename(&tmp, out).with_context(|| format!("--out {}", out.display()))?;
    Ok(())
}
