//! `flashlab check DIR [--repair]`: verify a database directory.
//!
//! Without `--repair` the check is read-only: it takes the directory's
//! shared lock (refused while a writer has the database open), and
//! recovery, page repairs and the checkpoint at close run in memory over a
//! copy-on-write view, so not a byte of the files changes. `--repair`
//! opens for writing (the exclusive lock): recovery's work and rebuilt
//! pages are written back.

use std::path::PathBuf;

use flashlab_engine::Database;
use flashlab_engine::db::dir::config_from_manifest;
use flashlab_engine::db::verify::verify;
use flashlab_runtime::RealRuntime;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The database directory.
    dir: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Open for writing: write recovery's work and rebuilt pages back.
    #[arg(long)]
    repair: bool,
}

/// Exit code when the check finds damage (bad input exits 2).
pub const EXIT_DAMAGED: i32 = 1;

pub fn run(args: Args) -> anyhow::Result<()> {
    let rt = RealRuntime::new(0);
    let _enter = RealRuntime::enter(&rt);
    let config = config_from_manifest(&args.dir)?;
    let db = if args.repair {
        Database::open_dir(&args.dir, &config)?
    } else {
        Database::open_dir_read_only(&args.dir, &config)?
    };
    let report = verify(&db)?;
    db.close()?;
    if args.json {
        super::print_json(&report)?;
    } else {
        println!(
            "log: {} records, ends at LSN {}",
            report.log_records, report.log_end_lsn
        );
        println!(
            "pages: {} checked (checksums and page ids), {} repaired",
            report.pages_checked, report.pages_repaired
        );
        println!(
            "trees: {} checked, {} entries",
            report.trees_checked, report.entries
        );
        for repair in &report.repairs {
            println!("REPAIRED: {repair}");
        }
        for problem in &report.problems {
            println!("PROBLEM: {problem}");
        }
        println!(
            "{}",
            match (report.ok(), report.pages_repaired) {
                (true, 0) => "ok".to_string(),
                (true, n) if args.repair =>
                    format!("DAMAGED: {n} pages were damaged and have been rebuilt from the log"),
                (true, n) => format!(
                    "DAMAGED: {n} pages are damaged and can be rebuilt from the log \
                     (read-only check: nothing written; run flashlab check --repair)"
                ),
                (false, _) => "DAMAGED".to_string(),
            }
        );
    }
    // Damage is reported even when it could be repaired: the storage under
    // the database is returning bad data.
    if !report.ok() || report.pages_repaired > 0 {
        std::process::exit(EXIT_DAMAGED);
    }
    Ok(())
}
