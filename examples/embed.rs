//! Embedding flashlab: create a database in a directory, a typed table with
//! a secondary index, transactions, a reopen, a streaming scan.
//!
//! `cargo run --example embed` (a fresh directory under the system's
//! temporary directory, removed at the end).

use flashlab::engine::row::{Column, Schema, Type, Value};
use flashlab::engine::{Database, TableSpec};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("flashlab-example-{}", std::process::id()));
    let db = Database::builder(&dir)
        .buffer_mb(16)
        .log_mb(64)
        .data_mb(64)
        .create()?;
    let columns = vec![
        Column::new("id", Type::Int64),
        Column::new("name", Type::VarStr(32)),
        Column::new("balance", Type::Decimal { scale: 2 }),
    ];
    let spec = TableSpec::typed("accounts", Schema::new(columns, vec![0])?);
    let accounts = db.create_table(spec.with_index("by_name", &["name"]))?;
    db.transact(|txn| {
        for (id, name, cents) in [(1, "ada", 10_000), (2, "grace", 25_050), (3, "ada", 99)] {
            let row = [
                Value::Int(id),
                Value::Str(name.into()),
                Value::Decimal(cents),
            ];
            txn.put_row(&accounts, &row)?;
        }
        Ok(()) // committed, durable when transact returns
    })?;
    db.close()?;

    let db = Database::builder(&dir).open()?; // recovery runs after a crash
    let accounts = db.table("accounts")?;
    db.read(|txn| {
        for row in txn.rows_from(&accounts, &[]) {
            println!("{:?}", row?);
        }
        println!(
            "named ada: {:?}",
            txn.index_scan(&accounts, "by_name", &[Value::Str("ada".into())])?
        );
        Ok(())
    })?;
    db.close()?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
