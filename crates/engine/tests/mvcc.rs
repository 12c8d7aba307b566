//! MVCC: snapshot isolation over rollback segments, in the simulated world.

use std::ops::Bound;
use std::sync::Arc;

use flashlab_engine::{Database, DbConfig, Error, TableSpec};
use flashlab_runtime::{Rt, Sim, SimConfig};
use rand::Rng;

fn sim<T: Send + 'static>(seed: u64, f: impl FnOnce(Rt) -> T + Send + 'static) -> T {
    let config = SimConfig {
        seed,
        cores: 2,
        shuffle: true,
        ..SimConfig::default()
    };
    Sim::run(config, f)
        .expect("simulation")
        .0
        .finished()
        .expect("finished")
}

fn config() -> DbConfig {
    let mut config = DbConfig::simple("memory", "ssd-2008", 4096, 64 * 4096);
    config.mvcc.page_bytes = 4096;
    config.mvcc.extent_bytes = 64 * 1024;
    config
}

fn money(v: &[u8]) -> i64 {
    i64::from_le_bytes(v.try_into().expect("8 bytes"))
}

const ACCOUNTS: u32 = 20;
const BALANCE: i64 = 100;

/// Every snapshot, taken at any moment during random concurrent transfers,
/// sees the total unchanged.
#[test]
fn bank_total_is_constant_in_every_snapshot() {
    for seed in 0..4 {
        let (violations, snapshots, commits) = sim(seed, |rt| {
            let db = Database::open(&config()).unwrap();
            let t = db.create_table(TableSpec::bytes("bank")).unwrap();
            let mut txn = db.begin().unwrap();
            for i in 0..ACCOUNTS {
                txn.put(&t, &i.to_be_bytes(), &BALANCE.to_le_bytes())
                    .unwrap();
            }
            txn.commit().unwrap();
            let writers: Vec<_> = (0..6)
                .map(|w| {
                    let (db, t, task_rt) = (db.clone(), t.clone(), rt.clone());
                    rt.spawn(&format!("writer{w}"), move || {
                        let mut rng = task_rt.fork_rng();
                        let mut commits = 0;
                        for _ in 0..60 {
                            let from = rng.random_range(0..ACCOUNTS);
                            let to = (from + rng.random_range(1..ACCOUNTS)) % ACCOUNTS;
                            let amount = rng.random_range(1..20i64);
                            let attempt = (|| {
                                let mut txn = db.begin()?;
                                let a = money(&txn.get(&t, &from.to_be_bytes())?.unwrap());
                                let b = money(&txn.get(&t, &to.to_be_bytes())?.unwrap());
                                txn.put(&t, &from.to_be_bytes(), &(a - amount).to_le_bytes())?;
                                task_rt.sleep(rng.random_range(0..200_000));
                                txn.put(&t, &to.to_be_bytes(), &(b + amount).to_le_bytes())?;
                                txn.commit()
                            })();
                            match attempt {
                                Ok(()) => commits += 1,
                                Err(e) if e.is_retryable() => {}
                                Err(e) => panic!("{e}"),
                            }
                        }
                        commits
                    })
                })
                .collect();
            let (db2, t2, task_rt) = (db.clone(), t.clone(), rt.clone());
            let reader = rt.spawn("reader", move || {
                let mut violations = 0;
                let mut snapshots = 0;
                for _ in 0..100 {
                    let mut txn = db2.begin().unwrap();
                    let rows = txn.scan(&t2, Bound::Unbounded, Bound::Unbounded).unwrap();
                    task_rt.sleep(100_000);
                    // Read again in the same snapshot: nothing moves.
                    let again = txn.scan(&t2, Bound::Unbounded, Bound::Unbounded).unwrap();
                    let total: i64 = rows.iter().map(|(_, v)| money(v)).sum();
                    if total != i64::from(ACCOUNTS) * BALANCE || rows != again {
                        if std::env::var("MVCC_DEBUG").is_ok() {
                            let total2: i64 = again.iter().map(|(_, v)| money(v)).sum();
                            eprintln!(
                                "snapshot {} total {total} again {total2} same {}",
                                txn.snapshot_ts(),
                                rows == again
                            );
                        }
                        violations += 1;
                    }
                    snapshots += 1;
                    txn.commit().unwrap();
                    task_rt.sleep(50_000);
                }
                (violations, snapshots)
            });
            let commits: u32 = writers.into_iter().map(|w| w.join()).sum();
            let (violations, snapshots) = reader.join();
            let mut txn = db.begin().unwrap();
            let total: i64 = txn
                .scan(&t, Bound::Unbounded, Bound::Unbounded)
                .unwrap()
                .iter()
                .map(|(_, v)| money(v))
                .sum();
            assert_eq!(total, i64::from(ACCOUNTS) * BALANCE, "final total");
            (violations, snapshots, commits)
        });
        assert_eq!(
            violations, 0,
            "seed {seed}: {violations} of {snapshots} snapshots saw money move"
        );
        assert!(
            commits > 50,
            "seed {seed}: only {commits} transfers committed"
        );
    }
}

#[test]
fn serialization_error_is_retryable_and_first_updater_wins() {
    sim(1, |_| {
        let db = Database::open(&config()).unwrap();
        let t = db.create_table(TableSpec::bytes("kv")).unwrap();
        let mut txn = db.begin().unwrap();
        txn.put(&t, b"k", b"0").unwrap();
        txn.commit().unwrap();
        let mut first = db.begin().unwrap();
        let mut second = db.begin().unwrap();
        first.put(&t, b"k", b"1").unwrap();
        first.commit().unwrap();
        let err = second.put(&t, b"k", b"2").unwrap_err();
        assert!(matches!(err, Error::Serialization { .. }), "{err}");
        assert!(err.is_retryable());
    });
}
