//! `flashlab query DIR --table T [--as-of TS] [--key K | --prefix P] [--limit N] [--json]`
//!
//! Inspect a table: current rows, or as of a past commit timestamp (time
//! travel, within the retention window of this process's lifetime: rollback
//! segments do not survive a restart, so a timestamp from before the open is
//! "snapshot too old").

use std::ops::Bound;
use std::path::PathBuf;

use flashlab_engine::Database;
use flashlab_engine::db::dir::config_from_manifest;
use flashlab_runtime::RealRuntime;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The database directory.
    dir: PathBuf,
    #[arg(long)]
    table: String,
    /// A commit timestamp to read as of.
    #[arg(long)]
    as_of: Option<u64>,
    /// One key (as text).
    #[arg(long, conflicts_with = "prefix")]
    key: Option<String>,
    /// Keys starting with this text.
    #[arg(long)]
    prefix: Option<String>,
    #[arg(long, default_value_t = 100)]
    limit: usize,
    #[arg(long)]
    json: bool,
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let rt = RealRuntime::new(0);
    let _enter = RealRuntime::enter(&rt);
    let config = config_from_manifest(&args.dir)?;
    let db = Database::open_dir_read_only(&args.dir, &config)?;
    let table = db.table(&args.table)?;
    let mut txn = match args.as_of {
        Some(ts) => db.begin_as_of(ts)?,
        None => db.begin()?,
    };
    let rows = match (&args.key, &args.prefix) {
        (Some(key), _) => txn
            .get(&table, key.as_bytes())?
            .map(|v| vec![(key.as_bytes().to_vec(), v)])
            .unwrap_or_default(),
        (None, Some(prefix)) => txn.scan_prefix(&table, prefix.as_bytes())?,
        (None, None) => txn.scan(&table, Bound::Unbounded, Bound::Unbounded)?,
    };
    let snapshot = txn.snapshot_ts();
    txn.commit()?;
    let schema = table.def().schema.clone();
    let shown: Vec<(String, String)> = rows
        .iter()
        .take(args.limit)
        .map(|(k, v)| {
            let value = match &schema {
                Some(s) => s
                    .decode_row(v)
                    .map(|r| format!("{r:?}"))
                    .unwrap_or_else(|e| format!("<{e}>")),
                None => text(v),
            };
            (text(k), value)
        })
        .collect();
    if args.json {
        super::print_json(
            &serde_json::json!({"table": args.table, "snapshot_ts": snapshot, "rows": shown, "total": rows.len()}),
        )?;
    } else {
        println!(
            "table {} as of commit timestamp {snapshot}: {} rows",
            args.table,
            rows.len()
        );
        for (k, v) in &shown {
            println!("{k}\t{v}");
        }
    }
    db.close()?;
    Ok(())
}
