//! The tree latch protocol (DB-5: shared readers, no latch across I/O,
//! restart after a miss; MTR-8), the rollback segments' locks (RBS-6),
//! group commit's wake-ups (WAL-11), one-leaf changes under a tree's shared
//! latch and their escalation to the exclusive one (MTR-12, DB-6), and the
//! lock queue (LOCK-5) under
//! concurrency: many clients on few rows, with a buffer pool small enough
//! that tree operations miss and restart.
//!
//! * simulated, with seeded preemption at every runtime lock point (SIM-8):
//!   each seed is a different interleaving, replayed exactly;
//! * real threads: the same workload on OS threads, bounded by a number of
//!   transactions (not by time). A watchdog aborts the process if no
//!   transaction finishes for a minute: a deadlock the detector missed.
//!
//! Each checks TPC-B's invariant (the balances' sum never changes, in every
//! scan and at the end), and the database's structure (`verify`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use flashlab_engine::{Database, DbConfig, Table, TableSpec};
use flashlab_runtime::{JoinHandle, RealRuntime, Rt, Sim, SimConfig};
use rand::Rng;

/// Hot rows: every writer transfers between these.
const ACCOUNTS: u32 = 5;
const BALANCE: i64 = 1_000;
/// Cold rows read at random: they make the tree three levels deep and
/// larger than the pool, so reads miss.
const FILLER: u32 = 1_500;
const FILLER_BYTES: usize = 200;

fn config() -> DbConfig {
    // 64 frames of 4 KB for the table and the rollback segments together:
    // far fewer than the tree's pages.
    let mut config = DbConfig::simple("memory", "memory", 4096, 64 * 4096);
    config.mvcc.page_bytes = 4096;
    config.mvcc.extent_bytes = 64 * 1024;
    config
}

fn account(i: u32) -> Vec<u8> {
    format!("acct{i:04}").into_bytes()
}

fn filler(i: u32) -> Vec<u8> {
    format!("fill{i:06}").into_bytes()
}

fn money(v: &[u8]) -> i64 {
    i64::from_le_bytes(v.try_into().expect("8 bytes"))
}

fn load(db: &Database) -> Table {
    let t = db.create_table(TableSpec::bytes("bank")).unwrap();
    let mut txn = db.begin().unwrap();
    for i in 0..ACCOUNTS {
        txn.put(&t, &account(i), &BALANCE.to_le_bytes()).unwrap();
    }
    for i in 0..FILLER {
        txn.put(&t, &filler(i), &[i as u8; FILLER_BYTES]).unwrap();
    }
    txn.commit().unwrap();
    t
}

/// One writer: `transfers` committed transfers between random hot rows
/// (retrying deadlocks), each also reading a cold row and inserting a
/// history row (right-edge inserts: splits, new pages). Returns the
/// retries.
fn writer(db: &Database, t: &Table, rt: &Rt, id: u32, transfers: u32, done: &AtomicU64) -> u64 {
    let mut rng = rt.fork_rng();
    let mut retries = 0;
    let mut committed = 0;
    while committed < transfers {
        let from = rng.random_range(0..ACCOUNTS);
        let to = (from + rng.random_range(1..ACCOUNTS)) % ACCOUNTS;
        let amount = rng.random_range(1..50i64);
        let cold = rng.random_range(0..FILLER);
        let attempt = (|| {
            let mut txn = db.begin()?;
            txn.update(t, &account(from), |v| {
                (money(v) - amount).to_le_bytes().to_vec()
            })?;
            let row = txn.get(t, &filler(cold))?;
            assert_eq!(row.map(|r| r.len()), Some(FILLER_BYTES), "cold row");
            // A change to a cold row, in one of many leaves: one-leaf
            // changes of different leaves run at once (MTR-12).
            txn.put(t, &filler(cold), &[id as u8; FILLER_BYTES])?;
            txn.update(t, &account(to), |v| {
                (money(v) + amount).to_le_bytes().to_vec()
            })?;
            let history = format!("hist{id:03}{committed:06}");
            txn.put(t, history.as_bytes(), &amount.to_le_bytes())?;
            txn.commit()
        })();
        match attempt {
            Ok(()) => {
                committed += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) if e.is_retryable() => retries += 1,
            Err(e) => panic!("writer {id}: {e}"),
        }
    }
    retries
}

/// One reader: `scans` scans of the hot rows (each one statement, so one
/// snapshot) and random cold reads; returns the scans whose sum was wrong.
fn reader(db: &Database, t: &Table, rt: &Rt, scans: u32, done: &AtomicU64) -> u32 {
    let mut rng = rt.fork_rng();
    let mut wrong = 0;
    for _ in 0..scans {
        let mut txn = db.begin().unwrap();
        let rows = txn.scan_prefix(t, b"acct").unwrap();
        let sum: i64 = rows.iter().map(|(_, v)| money(v)).sum();
        if rows.len() != ACCOUNTS as usize || sum != i64::from(ACCOUNTS) * BALANCE {
            wrong += 1;
        }
        for _ in 0..4 {
            let cold = rng.random_range(0..FILLER);
            assert!(txn.get(t, &filler(cold)).unwrap().is_some(), "cold row");
        }
        txn.commit().unwrap();
        done.fetch_add(1, Ordering::Relaxed);
    }
    wrong
}

/// The final checks: the sum, every history row, the structure.
fn check(db: &Database, t: &Table, writers: u32, transfers: u32) {
    let mut txn = db.begin().unwrap();
    let rows = txn.scan_prefix(t, b"acct").unwrap();
    let sum: i64 = rows.iter().map(|(_, v)| money(v)).sum();
    assert_eq!(sum, i64::from(ACCOUNTS) * BALANCE, "final sum of balances");
    let history = txn.scan_prefix(t, b"hist").unwrap();
    assert_eq!(history.len() as u32, writers * transfers, "history rows");
    txn.commit().unwrap();
    let report = flashlab_engine::db::verify::verify(db).unwrap();
    assert!(report.ok(), "{:?}", report.problems);
}

/// Spawns `writers.0` writers of `writers.1` transfers each, then
/// `readers.0` readers of `readers.1` scans each (in that order, so a
/// simulated run's task ids are fixed).
fn spawn_clients(
    db: &Database,
    t: &Table,
    rt: &Rt,
    writers: (u32, u32),
    readers: (u32, u32),
    done: &Arc<AtomicU64>,
) -> (Vec<JoinHandle<u64>>, Vec<JoinHandle<u32>>) {
    let (count, transfers) = writers;
    let tasks = (0..count)
        .map(|w| {
            let (db, t, task_rt, done) = (db.clone(), t.clone(), rt.clone(), done.clone());
            rt.spawn(&format!("writer{w}"), move || {
                writer(&db, &t, &task_rt, w, transfers, &done)
            })
        })
        .collect();
    let (count, scans) = readers;
    let readers = (0..count)
        .map(|r| {
            let (db, t, task_rt, done) = (db.clone(), t.clone(), rt.clone(), done.clone());
            rt.spawn(&format!("reader{r}"), move || {
                reader(&db, &t, &task_rt, scans, &done)
            })
        })
        .collect();
    (tasks, readers)
}

/// What one simulated run ends with, to compare two runs of one seed.
type Outcome = (Vec<i64>, u64, u64, u64);

fn simulated(seed: u64) -> Outcome {
    const WRITERS: u32 = 8;
    const TRANSFERS: u32 = 25;
    let config = SimConfig {
        seed,
        cores: 2,
        preempt: true,
        ..SimConfig::default()
    };
    Sim::run(config, move |rt| {
        let db = Database::open(&config_for_sim()).unwrap();
        let t = load(&db);
        let misses_before: u64 = db.stats().buffers.values().map(|b| b.misses).sum();
        let restarts_before = db.tree_restarts();
        let done = Arc::new(AtomicU64::new(0));
        let (tasks, readers) = spawn_clients(&db, &t, &rt, (WRITERS, TRANSFERS), (3, 30), &done);
        let retries: u64 = tasks.into_iter().map(|w| w.join()).sum();
        let wrong: u32 = readers.into_iter().map(|r| r.join()).sum();
        assert_eq!(wrong, 0, "seed {seed}: scans saw the sum change");
        let misses: u64 = db.stats().buffers.values().map(|b| b.misses).sum();
        assert!(
            db.tree_escalations() > 0,
            "seed {seed}: the history rows' splits start over under the exclusive latch"
        );
        check(&db, &t, WRITERS, TRANSFERS);
        let mut txn = db.begin().unwrap();
        let balances = txn
            .scan_prefix(&t, b"acct")
            .unwrap()
            .iter()
            .map(|(_, v)| money(v))
            .collect();
        txn.commit().unwrap();
        (
            balances,
            retries,
            misses - misses_before,
            db.tree_restarts() - restarts_before,
        )
    })
    .expect("simulation")
    .0
    .finished()
    .unwrap_or_else(|| panic!("seed {seed}: the simulation did not finish (a deadlock?)"))
}

fn config_for_sim() -> DbConfig {
    config()
}

/// Seeded preemption at every runtime lock point (one in 8), for many
/// seeds: every interleaving keeps the sum, the history and the
/// structure, and finishes. Each run misses in the pool (so tree
/// operations restart, DB-5), and a seed replays exactly.
#[test]
fn latch_protocol_and_lock_queue_under_seeded_preemption() {
    for seed in 0..12 {
        let (balances, _retries, misses, restarts) = simulated(seed);
        assert!(misses > 0, "seed {seed}: the pool never missed");
        assert!(restarts > 0, "seed {seed}: no tree operation restarted");
        assert_eq!(balances.len(), ACCOUNTS as usize);
    }
    assert_eq!(simulated(3), simulated(3), "a seed replays exactly");
}

/// Real threads, many clients on few rows: the sum holds in every scan and
/// at the end, every transfer's history row is there, the tree verifies.
/// Bounded by transactions; a watchdog aborts on a minute without progress
/// (a deadlock the detector missed would otherwise hang the test).
#[test]
fn real_threads_many_clients_on_few_rows() {
    const WRITERS: u32 = 16;
    const TRANSFERS: u32 = 150;
    let rt = RealRuntime::new(17);
    let _enter = RealRuntime::enter(&rt);
    let db = Database::open(&config()).unwrap();
    let t = load(&db);
    let done = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(AtomicU64::new(0));
    {
        let (done, finished) = (done.clone(), finished.clone());
        std::thread::spawn(move || {
            let mut last = u64::MAX;
            loop {
                std::thread::sleep(std::time::Duration::from_secs(60));
                if finished.load(Ordering::SeqCst) == 1 {
                    return;
                }
                let now = done.load(Ordering::SeqCst);
                if now == last {
                    eprintln!("no transaction finished for 60 s: an undetected deadlock");
                    std::process::abort();
                }
                last = now;
            }
        });
    }
    let (tasks, readers) = spawn_clients(&db, &t, &rt, (WRITERS, TRANSFERS), (4, 200), &done);
    for w in tasks {
        w.join();
    }
    let wrong: u32 = readers.into_iter().map(|r| r.join()).sum();
    finished.store(1, Ordering::SeqCst);
    assert_eq!(wrong, 0, "scans saw the sum change");
    assert!(db.tree_restarts() > 0, "no tree operation restarted");
    check(&db, &t, WRITERS, TRANSFERS);
}
