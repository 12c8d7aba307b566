//! `flashlab check DIR`: verify a database directory.

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
}

/// Exit code when the check finds damage (bad input exits 2).
pub const EXIT_DAMAGED: i32 = 1;

pub fn run(args: Args) -> anyhow::Result<()> {
    let rt = RealRuntime::new(0);
    let _enter = RealRuntime::enter(&rt);
    let config = config_from_manifest(&args.dir)?;
    let db = Database::open_dir(&args.dir, &config)?;
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
                (true, n) =>
                    format!("DAMAGED: {n} pages were damaged and have been rebuilt from the log"),
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
