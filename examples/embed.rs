//! Embedding flashlab: open a database in a directory, create a typed table
//! with a secondary index, run transactions, reopen, read back.
//!
//! Run with `cargo run --example embed` (it uses a fresh directory under
//! the system's temporary directory and removes it at the end).

use flashlab::engine::row::{Column, Schema, Type, Value};
use flashlab::engine::{Database, DbConfig, TableSpec};
use flashlab::runtime::RealRuntime;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The real world: OS threads, files, fdatasync, the wall clock.
    let rt = RealRuntime::new(1);
    let _enter = RealRuntime::enter(&rt);

    let dir = std::env::temp_dir().join(format!("flashlab-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;

    // One 8 KB data space with a 16 MB buffer pool, and the log, as files in
    // `dir`. Spaces are 64 MB files here.
    let mut config = DbConfig::simple("file", "file", 8192, 16 << 20);
    config.data[0].capacity_bytes = Some(64 << 20);
    config.log.capacity_bytes = Some(64 << 20);

    // Creation is atomic and explicit; opening never creates.
    Database::create_dir(&dir, &config)?;
    let db = Database::open_dir(&dir, &config)?;
    let schema = Schema::new(
        vec![
            Column::new("id", Type::Int64),
            Column::new("name", Type::VarStr(32)),
            Column::new("balance", Type::Decimal { scale: 2 }),
        ],
        vec![0],
    )?;
    let accounts =
        db.create_table(TableSpec::typed("accounts", schema).with_index("by_name", &["name"]))?;

    let mut txn = db.begin()?;
    for (id, name, cents) in [(1, "ada", 10_000), (2, "grace", 25_050), (3, "ada", 99)] {
        txn.put_row(
            &accounts,
            &[
                Value::Int(id),
                Value::Str(name.into()),
                Value::Decimal(cents),
            ],
        )?;
    }
    txn.commit()?; // durable when this returns (group commit, fdatasync)

    // A transaction that rolls back leaves no trace.
    let mut txn = db.begin()?;
    txn.delete_row(&accounts, &[Value::Int(2)])?;
    txn.abort()?;

    db.close()?;

    // Reopen (recovery runs if the last close did not happen) and query.
    let db = Database::open_dir(&dir, &config)?;
    let accounts = db.table("accounts")?;
    let mut txn = db.begin()?;
    let adas = txn.index_scan(&accounts, "by_name", &[Value::Str("ada".into())])?;
    println!("accounts named ada: {adas:?}");
    let grace = txn.get_row(&accounts, &[Value::Int(2)])?;
    println!("grace after the rolled-back delete: {grace:?}");
    txn.commit()?;
    assert_eq!(adas.len(), 2);
    assert!(grace.is_some());
    db.close()?;

    std::fs::remove_dir_all(&dir)?;
    println!("ok");
    Ok(())
}
