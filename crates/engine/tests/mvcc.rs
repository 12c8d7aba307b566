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

/// A deep chain: 150 versions of one row, each readable by a snapshot taken
/// when it was current.
#[test]
fn deep_version_chains_are_followed() {
    sim(2, |_| {
        let db = Database::open(&config()).unwrap();
        let t = db.create_table(TableSpec::bytes("kv")).unwrap();
        let mut snapshots = Vec::new();
        for version in 0..150u32 {
            let mut txn = db.begin().unwrap();
            txn.put(&t, b"row", format!("v{version}").as_bytes())
                .unwrap();
            txn.commit().unwrap();
            snapshots.push((version, db.begin().unwrap()));
        }
        for (version, mut reader) in snapshots {
            let got = reader.get(&t, b"row").unwrap().unwrap();
            assert_eq!(got, format!("v{version}").into_bytes());
            reader.commit().unwrap();
        }
        let stats = db.stats().rollback;
        assert!(
            stats.chain_max >= 149,
            "the oldest reader walked the whole chain: {stats:?}"
        );
    });
}

/// A table's rows as scans return them.
type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// Time travel returns exactly the state as of each commit.
#[test]
fn time_travel_returns_the_state_as_of_each_commit() {
    sim(3, |rt| {
        let mut cfg = config();
        cfg.mvcc.retention_ns = 3_600_000_000_000;
        let db = Database::open(&cfg).unwrap();
        let t = db.create_table(TableSpec::bytes("kv")).unwrap();
        let mut history: Vec<(u64, u64, Rows)> = Vec::new();
        let mut model = std::collections::BTreeMap::new();
        let mut rng = rt.fork_rng();
        for _ in 0..40 {
            let mut txn = db.begin().unwrap();
            for _ in 0..5 {
                let k = format!("k{}", rng.random_range(0..12)).into_bytes();
                if rng.random_bool(0.2) {
                    txn.delete(&t, &k).unwrap();
                    model.remove(&k);
                } else {
                    let v = format!("{}", rng.random::<u32>()).into_bytes();
                    txn.put(&t, &k, &v).unwrap();
                    model.insert(k, v);
                }
            }
            let ts = txn.commit_with_ts().unwrap();
            rt.sleep(1_000_000);
            history.push((ts, rt.now_ns(), model.clone().into_iter().collect()));
        }
        for (ts, at_ns, expected) in &history {
            let mut past = db.begin_as_of(*ts).unwrap();
            assert_eq!(
                &past.scan(&t, Bound::Unbounded, Bound::Unbounded).unwrap(),
                expected,
                "as of timestamp {ts}"
            );
            assert!(
                past.put(&t, b"k0", b"x").is_err(),
                "time travel is read-only"
            );
            past.commit().unwrap();
            let mut by_time = db.begin_as_of_time(*at_ns).unwrap();
            assert_eq!(
                &by_time
                    .scan(&t, Bound::Unbounded, Bound::Unbounded)
                    .unwrap(),
                expected,
                "as of time {at_ns}"
            );
            by_time.commit().unwrap();
        }
    });
}

/// Without retention, versions no snapshot needs are discarded: an old
/// reader still gets its versions while it lives; time travel past what is
/// kept fails with "snapshot too old", never a wrong answer.
#[test]
fn retention_and_snapshot_too_old() {
    sim(4, |_| {
        let mut cfg = config();
        cfg.mvcc.extent_bytes = 2 * 4096;
        cfg.rollback = Some(flashlab_engine::SpaceConfig {
            device: "memory".into(),
            capacity_bytes: Some(64 * 4096),
            mirror: None,
        });
        let db = Database::open(&cfg).unwrap();
        let t = db.create_table(TableSpec::bytes("kv")).unwrap();
        let mut txn = db.begin().unwrap();
        txn.put(&t, b"k", b"0").unwrap();
        let first_ts = txn.commit_with_ts().unwrap();
        // A long reader holds its versions.
        let mut reader = db.begin().unwrap();
        for i in 1..=40u32 {
            let mut txn = db.begin().unwrap();
            txn.put(&t, b"k", &[b'x'; 900]).unwrap();
            txn.put(&t, b"j", i.to_string().as_bytes()).unwrap();
            txn.commit().unwrap();
        }
        assert_eq!(
            reader.get(&t, b"k").unwrap().unwrap(),
            b"0",
            "an active snapshot keeps its versions"
        );
        reader.commit().unwrap();
        // The reader is gone: writing more lets extents be reused.
        for i in 0..200u32 {
            let mut txn = db.begin().unwrap();
            txn.put(&t, b"k", &[b'y'; 900]).unwrap();
            txn.put(&t, b"j", i.to_string().as_bytes()).unwrap();
            txn.commit().unwrap();
        }
        assert!(
            db.stats().rollback.extents_reused > 0,
            "{:?}",
            db.stats().rollback
        );
        match db.begin_as_of(first_ts) {
            Err(flashlab_engine::Error::SnapshotTooOld(_)) => {}
            Ok(mut past) => match past.get(&t, b"k") {
                Err(flashlab_engine::Error::SnapshotTooOld(_)) => {}
                other => panic!("expected snapshot too old, got {other:?}"),
            },
            Err(e) => panic!("expected snapshot too old, got {e}"),
        }
    });
}

/// Rollback segments serve concurrency, not recovery: after a crash the
/// database is whole from the log alone, the rollback space starts empty,
/// and time travel to before the restart is "snapshot too old".
#[test]
fn recovery_rebuilds_from_the_log_and_discards_rollback_segments() {
    let data = Arc::new(flashlab_devices::memory::MemoryDevice::new(
        "data",
        64 << 20,
    ));
    let log = Arc::new(flashlab_devices::memory::MemoryDevice::new("log", 64 << 20));
    let rollback = Arc::new(flashlab_devices::memory::MemoryDevice::new(
        "rollback",
        64 << 20,
    ));
    let devices = flashlab_engine::Devices {
        data: vec![data.clone() as flashlab_devices::DeviceRef],
        log: log.clone(),
        rollback: Some(rollback.clone()),
        temp: None,
    };
    let d2 = devices.clone();
    let before_crash_ts = sim(5, move |_| {
        let db = Database::open_with(&config(), d2).unwrap();
        let t = db.create_table(TableSpec::bytes("kv")).unwrap();
        let mut ts = 0;
        for i in 0..30u32 {
            let mut txn = db.begin().unwrap();
            txn.put(&t, b"k", i.to_string().as_bytes()).unwrap();
            ts = txn.commit_with_ts().unwrap();
        }
        // An uncommitted change whose before-image sits in a rollback segment.
        let mut loser = db.begin().unwrap();
        loser.put(&t, b"k", b"uncommitted").unwrap();
        db.flush().unwrap();
        std::mem::forget(loser);
        ts - 5
    });
    data.crash();
    log.crash();
    rollback.crash();
    sim(6, move |_| {
        let db = Database::open_with(&config(), devices).unwrap();
        let t = db.table("kv").unwrap();
        let mut txn = db.begin().unwrap();
        assert_eq!(txn.get(&t, b"k").unwrap().unwrap(), b"29");
        txn.commit().unwrap();
        assert!(matches!(
            db.begin_as_of(before_crash_ts),
            Err(flashlab_engine::Error::SnapshotTooOld(_))
        ));
        assert!(flashlab_engine::db::verify::verify(&db).unwrap().ok());
    });
}

/// Issue 10, item 7 (RBS-5, BUF-10): a rollback page is written once, when
/// its segment has filled it. Installed as ordinary dirty pages with
/// rec_lsn 0, rollback pages would be written first by every
/// background-writer round while still filling, and a page would reach the
/// device as many times as rounds passed while it filled. Here four
/// writers update rows slowly while a background writer runs every
/// millisecond; the trace of the rollback device must show every extent
/// page written exactly once.
#[test]
fn regression_rollback_pages_written_once() {
    use flashlab_devices::trace::traced::TracedDevice;
    use flashlab_devices::trace::{Space, Tracer};
    use flashlab_devices::{DeviceRef, IoKind};
    use flashlab_engine::mvcc::rollback::METADATA_PAGES;

    const WRITERS: u32 = 4;
    const ROWS_PER_WRITER: u32 = 150;
    const TXNS_PER_WRITER: u32 = 4;
    const PAGE: u64 = 4096;

    let tracer = Tracer::new();
    let rollback: DeviceRef = Arc::new(TracedDevice::new(
        Arc::new(flashlab_devices::memory::MemoryDevice::new(
            "rollback",
            64 << 20,
        )),
        Space::Rollback,
        tracer.clone(),
    ));
    let devices = flashlab_engine::Devices {
        data: vec![Arc::new(flashlab_devices::memory::MemoryDevice::new(
            "data",
            64 << 20,
        ))],
        log: Arc::new(flashlab_devices::memory::MemoryDevice::new("log", 64 << 20)),
        rollback: Some(rollback),
        temp: None,
    };
    let mut config = config();
    config.data[0].buffer_bytes = 1024 * PAGE; // no evictions
    config.buffer.cleaner_interval_ns = 1_000_000;
    config.mvcc.retention_ns = 3600 * 1_000_000_000; // no extent reuse
    let reused = sim(11, move |rt| {
        let db = Database::open_with(&config, devices).unwrap();
        let t = db.create_table(TableSpec::bytes("kv")).unwrap();
        let mut load = db.begin().unwrap();
        for k in 0..WRITERS * ROWS_PER_WRITER {
            load.put(&t, &k.to_be_bytes(), &[0u8; 8]).unwrap();
        }
        load.commit().unwrap();
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (db, t, task_rt) = (db.clone(), t.clone(), rt.clone());
                rt.spawn(&format!("writer{w}"), move || {
                    for round in 0..TXNS_PER_WRITER {
                        let mut txn = db.begin().unwrap();
                        for r in 0..ROWS_PER_WRITER {
                            let k = w * ROWS_PER_WRITER + r;
                            txn.put(&t, &k.to_be_bytes(), &u64::from(round).to_le_bytes())
                                .unwrap();
                            task_rt.sleep(100_000); // 10 updates per writer round
                        }
                        txn.commit().unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join();
        }
        db.flush().unwrap();
        db.stats().rollback.extents_reused
    });
    assert_eq!(reused, 0, "the test needs extents used once");
    let mut writes = std::collections::BTreeMap::<u64, u32>::new();
    for r in tracer.records() {
        if r.kind == IoKind::Write && r.offset_bytes >= u64::from(METADATA_PAGES) * PAGE {
            *writes.entry(r.offset_bytes).or_default() += 1;
        }
    }
    assert!(
        writes.len() >= 10,
        "only {} rollback pages written",
        writes.len()
    );
    let rewritten: Vec<_> = writes.iter().filter(|&(_, &n)| n > 1).collect();
    assert!(
        rewritten.is_empty(),
        "{} of {} rollback pages written more than once (offset, writes): {:?}",
        rewritten.len(),
        writes.len(),
        &rewritten[..rewritten.len().min(8)]
    );
}

/// An aged rollback space (RBS-7) takes its fresh extents scattered over
/// its span, and old versions read back through them as from a fresh one.
#[test]
fn an_aged_rollback_space_scatters_extents_and_keeps_every_version() {
    sim(5, |_| {
        let mut config = config();
        config.mvcc.aged_span_bytes = 256 * config.mvcc.extent_bytes;
        let db = Database::open(&config).unwrap();
        let t = db.create_table(TableSpec::bytes("kv")).unwrap();
        let row = vec![b'x'; 300];
        let mut load = db.begin().unwrap();
        for i in 0..400u32 {
            load.put(&t, &i.to_be_bytes(), &row).unwrap();
        }
        load.commit().unwrap();
        let mut reader = db.begin().unwrap();
        let before = reader.scan(&t, Bound::Unbounded, Bound::Unbounded).unwrap();
        for round in 0..3u8 {
            let mut txn = db.begin().unwrap();
            for i in 0..400u32 {
                txn.put(&t, &i.to_be_bytes(), &[round; 300]).unwrap();
            }
            txn.commit().unwrap();
        }
        let after = reader.scan(&t, Bound::Unbounded, Bound::Unbounded).unwrap();
        assert_eq!(before, after, "the snapshot reads its versions back");
        reader.commit().unwrap();
        let stats = db.stats().rollback;
        assert!(stats.extents_allocated >= 4, "{stats:?}");
        assert_eq!(stats.extents_in_use, stats.extents_allocated, "{stats:?}");
    });
}

/// When the second writer of a row gets its lock, and what it and a reader
/// see, while the first writer's commit waits for a slow log force.
struct HandOff {
    first_commit_returned_ns: u64,
    second_locked_ns: u64,
    /// What a reader saw during the first writer's force.
    read_during_force: i64,
    /// The row after both commits.
    last: i64,
}

fn hand_off(early_lock_release: bool) -> HandOff {
    sim(7, move |rt| {
        // A disk log: a force takes milliseconds.
        let mut config = DbConfig::simple("memory", "hdd-2008", 4096, 64 * 4096);
        config.mvcc.page_bytes = 4096;
        config.mvcc.extent_bytes = 64 * 1024;
        config.wal.early_lock_release = early_lock_release;
        // An update changes the latest version, as TPC-B's do.
        config.mvcc.isolation = flashlab_engine::mvcc::Isolation::ReadCommitted;
        let db = Database::open(&config).unwrap();
        let t = db.create_table(TableSpec::bytes("row")).unwrap();
        let mut txn = db.begin().unwrap();
        txn.put(&t, b"r", &100i64.to_le_bytes()).unwrap();
        txn.commit().unwrap();
        let add = |v: &[u8]| (money(v) + 1).to_le_bytes().to_vec();
        let (db1, t1) = (db.clone(), t.clone());
        let first = rt.spawn("first", move || {
            let mut txn = db1.begin().unwrap();
            txn.update(&t1, b"r", add).unwrap();
            txn.commit().unwrap();
            Rt::current().now_ns()
        });
        // The first writer is in its commit's force now.
        rt.sleep(200_000);
        let mut reader = db.begin().unwrap();
        let read_during_force = money(&reader.get(&t, b"r").unwrap().unwrap());
        reader.commit().unwrap();
        let mut second = db.begin().unwrap();
        second.update(&t, b"r", add).unwrap();
        let second_locked_ns = rt.now_ns();
        second.commit().unwrap();
        let first_commit_returned_ns = first.join();
        let mut check = db.begin().unwrap();
        let last = money(&check.get(&t, b"r").unwrap().unwrap());
        check.commit().unwrap();
        HandOff {
            first_commit_returned_ns,
            second_locked_ns,
            read_during_force,
            last,
        }
    })
}

/// DB-7: with early lock release the next writer takes the row while the
/// first commit's force is still running and builds on its value, yet a
/// reader does not see that value before it is durable; without it, the
/// next writer waits for the force.
#[test]
fn early_lock_release_hands_a_row_on_before_the_force_but_readers_wait() {
    let early = hand_off(true);
    assert!(
        early.second_locked_ns < early.first_commit_returned_ns,
        "the second writer got the row at {} ns, after the first commit returned at {} ns",
        early.second_locked_ns,
        early.first_commit_returned_ns
    );
    assert_eq!(
        early.read_during_force, 100,
        "a reader saw a change not yet durable"
    );
    assert_eq!(early.last, 102);
    let held = hand_off(false);
    assert!(held.second_locked_ns >= held.first_commit_returned_ns);
    assert_eq!(held.read_during_force, 100);
    assert_eq!(held.last, 102);
}
