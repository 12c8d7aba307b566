//! Embedding flashlab (`cargo run --example embed`): a database in a temporary
//! directory, a typed table with an index, a transaction, a reopen, a scan.

use flashlab::engine::row::{Column, Schema, Type::*, Value::*};
use flashlab::engine::{Database, TableSpec};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("flashlab-example-{}", std::process::id()));
    let db = Database::builder(&dir)
        .buffer_mb(16)
        .log_mb(64)
        .data_mb(64)
        .create()?;
    let columns = [("id", Int64), ("name", VarStr(32)), ("cents", Int64)];
    let schema = Schema::new(columns.map(|(n, t)| Column::new(n, t)).to_vec(), vec![0])?;
    let spec = TableSpec::typed("accounts", schema).with_index("by_name", &["name"]);
    let accounts = db.create_table(spec)?;
    db.transact(|txn| {
        for (id, name, cents) in [(1, "ada", 10_000), (2, "grace", 25_050), (3, "ada", 99)] {
            txn.put_row(&accounts, &[Int(id), Str(name.into()), Int(cents)])?;
        }
        Ok(()) // committed, and durable, when transact returns
    })?;
    db.close()?;
    let db = Database::builder(&dir).open()?; // recovery runs after a crash
    let accounts = db.table("accounts")?;
    db.read(|txn| {
        for row in txn.rows_from(&accounts, &[]) {
            println!("{:?}", row?);
        }
        let ada = txn.index_scan(&accounts, "by_name", &[Str("ada".into())])?;
        println!("named ada: {ada:?}");
        Ok(())
    })?;
    db.close()?;
    Ok(std::fs::remove_dir_all(&dir)?)
}
