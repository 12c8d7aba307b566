//! A small bank ledger on the embedded engine, crashed on purpose.
//!
//! `cargo run --release --example ledger` starts a worker process that
//! moves money between 100 accounts from 8 threads with
//! [`Database::transact`], each transfer recorded in a `transfers` table
//! and printed once its commit returned. The parent kills the worker with
//! SIGKILL at a moment it chose, reopens the database (recovery), and
//! checks three things: the money is all there, every acknowledged
//! transfer is present, and each balance is what the recorded transfers
//! make it. It does this for [`ROUNDS`] rounds and exits 1 on any failure.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use flashlab::engine::row::{Column, Schema, Type, Value};
use flashlab::engine::{Database, Result, TableSpec};

const ACCOUNTS: i64 = 100;
const OPENING_BALANCE: i64 = 1_000;
const THREADS: i64 = 8;
/// Kill-and-recover rounds, each killing the worker after its own delay.
const ROUNDS: u64 = 3;
const KILL_AFTER_MS: [u64; ROUNDS as usize] = [400, 700, 1_000];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let outcome = match args.get(1).map(String::as_str) {
        Some("--worker") => worker(Path::new(&args[2]), args[3].parse().unwrap_or(0)),
        _ => parent(),
    };
    if let Err(problem) = outcome {
        eprintln!("ledger: {problem}");
        std::process::exit(1);
    }
}

fn parent() -> std::result::Result<(), String> {
    let dir = std::env::temp_dir().join(format!("flashlab-ledger-{}", std::process::id()));
    let mut acked = BTreeSet::new();
    for round in 0..ROUNDS {
        acked.extend(run_and_kill(&dir, round)?);
        let checked = check(&dir, &acked).map_err(|e| format!("round {round}: {e}"))?;
        println!(
            "round {round}: killed; {checked} transfers recovered, all {} acknowledged present, money conserved",
            acked.len()
        );
    }
    std::fs::remove_dir_all(&dir).map_err(|e| e.to_string())
}

/// Start a worker on `dir`, kill it with SIGKILL, return what it acknowledged.
fn run_and_kill(dir: &Path, round: u64) -> std::result::Result<Vec<i64>, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = Command::new(exe)
        .arg("--worker")
        .arg(dir)
        .arg(round.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let lines = BufReader::new(stdout).lines().map_while(|l| l.ok());
        lines.filter_map(|l| l.parse().ok()).collect::<Vec<i64>>()
    });
    std::thread::sleep(Duration::from_millis(KILL_AFTER_MS[round as usize]));
    child.kill().map_err(|e| e.to_string())?; // SIGKILL
    child.wait().map_err(|e| e.to_string())?;
    reader.join().map_err(|_| "the reader failed".to_string())
}

fn tables(db: &Database) -> Result<(flashlab::engine::Table, flashlab::engine::Table)> {
    let int = |name: &str| Column::new(name, Type::Int64);
    if let (Ok(a), Ok(t)) = (db.table("accounts"), db.table("transfers")) {
        return Ok((a, t));
    }
    let accounts = Schema::new(vec![int("id"), int("balance")], vec![0])?;
    let transfers = Schema::new(
        vec![int("id"), int("from"), int("to"), int("amount")],
        vec![0],
    )?;
    let a = db.create_table(TableSpec::typed("accounts", accounts))?;
    let t = db.create_table(TableSpec::typed("transfers", transfers))?;
    db.transact(|txn| {
        for id in 0..ACCOUNTS {
            txn.put_row(&a, &[Value::Int(id), Value::Int(OPENING_BALANCE)])?;
        }
        Ok(())
    })?;
    Ok((a, t))
}

/// Transfer money from 8 threads until killed, printing each transfer's
/// id once its commit returned.
fn worker(dir: &Path, round: u64) -> std::result::Result<(), String> {
    let db = Database::builder(dir).buffer_mb(16).log_mb(32).data_mb(256);
    let db = db.create_or_open().map_err(|e| e.to_string())?;
    let (accounts, transfers) = tables(&db).map_err(|e| e.to_string())?;
    let threads: Vec<_> = (0..THREADS)
        .map(|thread| {
            let (db, a, t) = (db.clone(), accounts.clone(), transfers.clone());
            std::thread::spawn(move || transfer_forever(&db, &a, &t, round as i64 * 1_000 + thread))
        })
        .collect();
    for thread in threads {
        let _ = thread.join();
    }
    Ok(())
}

fn transfer_forever(
    db: &Database,
    accounts: &flashlab::engine::Table,
    transfers: &flashlab::engine::Table,
    stream: i64,
) {
    let mut state = stream as u64 * 0x9e37_79b9_7f4a_7c15 + 1;
    for n in 0.. {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let (from, to, amount) = (
            (state % 100) as i64,
            ((state >> 8) % 100) as i64,
            (state >> 16) as i64 % 50 + 1,
        );
        let id = stream * 1_000_000_000 + n;
        let moved = db.transact(|txn| {
            let balance = |row: Option<Vec<Value>>| row.and_then(|r| r[1].as_int()).unwrap_or(0);
            if from == to || balance(txn.get_row(accounts, &[Value::Int(from)])?) < amount {
                return Ok(false);
            }
            txn.update_row(accounts, &[Value::Int(from)], |r| {
                r[1] = Value::Int(r[1].as_int().unwrap_or(0) - amount)
            })?;
            txn.update_row(accounts, &[Value::Int(to)], |r| {
                r[1] = Value::Int(r[1].as_int().unwrap_or(0) + amount)
            })?;
            txn.put_row(
                transfers,
                &[
                    Value::Int(id),
                    Value::Int(from),
                    Value::Int(to),
                    Value::Int(amount),
                ],
            )?;
            Ok(true)
        });
        match moved {
            Ok(true) => println!("{id}"),
            Ok(false) => {}
            Err(e) => {
                eprintln!("ledger worker: {e}");
                return;
            }
        }
    }
}

/// Recover the database and check the ledger; the number of transfers.
fn check(dir: &Path, acked: &BTreeSet<i64>) -> std::result::Result<usize, String> {
    let db = Database::builder(dir).open().map_err(|e| e.to_string())?;
    let (accounts, transfers) = tables(&db).map_err(|e| e.to_string())?;
    let (balances, recorded) = db
        .read(|txn| {
            let balances: Vec<Vec<Value>> = txn.rows_from(&accounts, &[]).collect::<Result<_>>()?;
            let recorded: Vec<Vec<Value>> =
                txn.rows_from(&transfers, &[]).collect::<Result<_>>()?;
            Ok((balances, recorded))
        })
        .map_err(|e| e.to_string())?;
    db.close().map_err(|e| e.to_string())?;
    let int = |v: &Value| v.as_int().unwrap_or(i64::MIN);
    let total: i64 = balances.iter().map(|r| int(&r[1])).sum();
    if total != ACCOUNTS * OPENING_BALANCE {
        return Err(format!("money not conserved: {total}"));
    }
    let present: BTreeSet<i64> = recorded.iter().map(|r| int(&r[0])).collect();
    if let Some(lost) = acked.difference(&present).next() {
        return Err(format!("acknowledged transfer {lost} lost"));
    }
    let mut expected = vec![OPENING_BALANCE; ACCOUNTS as usize];
    for r in &recorded {
        expected[int(&r[1]) as usize] -= int(&r[3]);
        expected[int(&r[2]) as usize] += int(&r[3]);
    }
    for r in &balances {
        if int(&r[1]) != expected[int(&r[0]) as usize] {
            return Err(format!(
                "account {} holds {}, its transfers say {}",
                int(&r[0]),
                int(&r[1]),
                expected[int(&r[0]) as usize]
            ));
        }
    }
    Ok(recorded.len())
}
