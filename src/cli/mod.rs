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

/// Print a value as pretty JSON on standard output.
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Bytes available to this user on the file system holding `path`.
pub fn free_bytes(path: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain data; zeroed is a valid value for it.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statvfs the call fills in.
    let rc = unsafe { libc::statvfs(path.as_ptr(), &mut stat) };
    (rc == 0).then(|| stat.f_bavail as u64 * stat.f_frsize as u64)
}
