//! Measures the real CPU cost of the engine's operations on this machine
//! (memory devices, no-sync log). `CpuCosts` documents how these relative
//! costs were used.
use std::ops::Bound;
use std::time::Instant;

use flashlab::engine::config::CpuCosts;
use flashlab::engine::{Database, DbConfig, Durability, TableSpec};
use flashlab::runtime::RealRuntime;

fn main() {
    let rt = RealRuntime::new(1);
    let _enter = RealRuntime::enter(&rt);
    let mut config = DbConfig::simple("memory", "memory", 8192, 256 << 20);
    config.wal.durability = Durability::NoSync;
    config.cpu = CpuCosts::free();
    let db = Database::open(&config).unwrap();
    let t = db.create_table(TableSpec::bytes("t")).unwrap();
    let n = 100_000u32;
    let mut txn = db.begin().unwrap();
    for i in 0..n {
        txn.put(&t, &i.to_be_bytes(), &[0u8; 178]).unwrap();
    }
    txn.commit().unwrap();
    let rounds = 50_000u32;
    let start = Instant::now();
    for i in 0..rounds {
        let mut txn = db.begin().unwrap();
        txn.update(&t, &((i * 7919) % n).to_be_bytes(), |old| old.to_vec())
            .unwrap();
        txn.commit().unwrap();
    }
    let update_commit_ns = start.elapsed().as_nanos() as f64 / f64::from(rounds);
    let start = Instant::now();
    let mut rows = 0;
    for _ in 0..10 {
        let mut txn = db.begin().unwrap();
        rows += txn
            .scan(&t, Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .len();
        txn.commit().unwrap();
    }
    let scan_row_ns = start.elapsed().as_nanos() as f64 / rows as f64;
    println!(
        "update+commit {update_commit_ns:.0} ns; scan {scan_row_ns:.0} ns a row; ratio {:.4}",
        scan_row_ns / update_commit_ns
    );
}
