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
            "pages: {} checked (checksums and page ids)",
            report.pages_checked
        );
        println!(
            "trees: {} checked, {} entries",
            report.trees_checked, report.entries
        );
        for problem in &report.problems {
            println!("PROBLEM: {problem}");
        }
        println!("{}", if report.ok() { "ok" } else { "DAMAGED" });
    }
    if !report.ok() {
        std::process::exit(EXIT_DAMAGED);
    }
    Ok(())
}
