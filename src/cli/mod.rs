//! Subcommands of `flashlab`.

mod bench;
mod bench_ops;
mod calibrate;
mod characterize;
mod check;
mod devices;
pub mod interrupt;
pub mod output;
mod plot;
mod query;
mod replay;
mod reproduce;
mod simtest;
mod trace;

use clap::{Parser, Subcommand};

/// flashlab: a flash-aware transactional storage engine and the lab that
/// measures it against the database-on-flash papers.
#[derive(Parser, Debug)]
#[command(name = "flashlab", version, about, long_about = None)]
pub struct Cli {
    /// Directory for the contents of simulated devices, in sparse files
    /// that vanish when the run ends, however it ends (default: the
    /// system's temp directory)
    #[arg(long, global = true, value_name = "DIR")]
    sim_dir: Option<std::path::PathBuf>,
    /// MB of simulated devices' contents kept in memory before the rest
    /// goes to --sim-dir (default 256; 0: all of it in files)
    #[arg(long, global = true, value_name = "MB")]
    sim_memory: Option<u64>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the experiments and write the report (HTML, JSON, raw files).
    Reproduce(reproduce::Args),
    /// Run a workload (update-commit, tpcb) and report TPS, latency, CPU, log.
    Bench(Box<bench::Args>),
    /// List the device presets and their parameters, with sources.
    Devices(devices::Args),
    /// Measure a device preset (or a real file) fio-style.
    Characterize(characterize::Args),
    /// Replay a block trace open-loop through a device model.
    Replay(replay::Args),
    /// Convert, summarise or generate block traces.
    Trace(trace::Args),
    /// Draw the time x address plot of a flashlab trace.
    Plot(plot::Args),
    /// Verify a database directory: recovery, log, checksums, B+trees.
    Check(check::Args),
    /// Read a table, now or as of a past commit timestamp.
    Query(query::Args),
    /// Crash-test the engine: seeded faults, power cuts, recovery checks.
    Simtest(simtest::Args),
    /// Measure the engine's CPU cost ratios (the CPU model's prices).
    Calibrate(calibrate::Args),
}

/// Run the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    if let Some(need) = scratch_need_bytes(&cli.command)? {
        use_scratch_dir(cli.sim_dir.as_deref(), cli.sim_memory, need)?;
    }
    match cli.command {
        Command::Reproduce(args) => reproduce::run(args),
        Command::Calibrate(args) => calibrate::run(args),
        Command::Bench(args) => bench::run(*args),
        Command::Devices(args) => devices::run(args),
        Command::Characterize(args) => characterize::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Trace(args) => trace::run(args),
        Command::Plot(args) => plot::run(args),
        Command::Check(args) => check::run(args),
        Command::Query(args) => query::run(args),
        Command::Simtest(args) => simtest::run(args),
    }
}

/// What the simulated devices' contents took in the scratch directory,
/// as `bench` and `reproduce` print it last; nothing if they took none.
pub fn print_scratch() {
    let peak = flashlab_devices::store::scratch::peak_held_bytes();
    if peak > 0 {
        println!(
            "scratch files       {:.1} MB at most of simulated devices' contents (--sim-dir)",
            peak as f64 / 1e6
        );
    }
}

/// Scratch space the command's simulated devices need, or `None` for a
/// command that simulates no device contents.
fn scratch_need_bytes(command: &Command) -> anyhow::Result<Option<u64>> {
    use flashlab_lab::bench::SCRATCH_BYTES_MIN;
    Ok(match command {
        Command::Reproduce(args) => Some(reproduce::scratch_need_bytes(args)?),
        Command::Bench(args) => bench::scratch_need_bytes(args)?,
        Command::Simtest(_) | Command::Calibrate(_) | Command::Characterize(_) => {
            Some(SCRATCH_BYTES_MIN)
        }
        _ => None,
    })
}

/// Print a value as pretty JSON on standard output.
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Bytes available to this user on the file system holding `path`.
pub fn free_bytes(path: &std::path::Path) -> Option<u64> {
    flashlab_devices::store::scratch::free_bytes(path).ok()
}

/// Most `--sim-memory`: a million MB (a terabyte).
const SIM_MEMORY_MB_MAX: u64 = 1 << 20;

/// Keep the contents of simulated devices on the heap up to `memory_mb`,
/// and the rest in sparse files in `--sim-dir` (the system's temp
/// directory by default), once it is checked to have `need_bytes` free.
fn use_scratch_dir(
    dir: Option<&std::path::Path>,
    memory_mb: Option<u64>,
    need_bytes: u64,
) -> anyhow::Result<()> {
    use flashlab_devices::store::scratch;
    let budget = match memory_mb {
        Some(mb) if mb > SIM_MEMORY_MB_MAX => {
            anyhow::bail!("--sim-memory {mb}: at most {SIM_MEMORY_MB_MAX} MB")
        }
        Some(mb) => mb << 20,
        None => scratch::HEAP_BUDGET_BYTES_DEFAULT,
    };
    let default = std::env::temp_dir();
    let dir = scratch::ScratchDir::with_heap_budget(dir.unwrap_or(&default), need_bytes, budget)?;
    scratch::keep_contents_in(Some(dir));
    Ok(())
}
