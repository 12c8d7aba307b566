//! Loading in key order. `Transaction::put_rows`: the same result as
//! `put_row` for each row, all-or-nothing per transaction under rollback
//! and under a crash at any instant of a load, and a log forgotten behind
//! its start on a modelled device. `Database::bulk_load`, the bottom-up
//! build: the same rows and index entries as `put_rows`, refusals that
//! change nothing, and a table empty or whole after a crash at any
//! instant, with every reserved page taken back (BULK-1 to BULK-5), with
//! page images logged or none (BULK-6): then writes torn by the crash lose
//! nothing, and a loaded page damaged at rest is reported, never rebuilt
//! from an older image.

use std::sync::{Arc, Mutex};

use flashlab_devices::fault::{CutTrigger, FaultPlan, IoEvent};
use flashlab_devices::store::StoredDevice;
use flashlab_engine::page::PageId;
use flashlab_engine::row::{Column, Schema, Type, Value};
use flashlab_engine::{BulkLoadOptions, BulkLogging, Database, DbConfig, TableSpec};
use flashlab_runtime::{NS_PER_MS, NS_PER_S, Sim, SimConfig};

mod common;
use common::{Rig, SsdRig, assert_verified, busy_config, faulty_data};

const BATCH: i64 = 700;
const BATCHES: i64 = 6;

fn config() -> DbConfig {
    busy_config(32)
}

fn spec() -> TableSpec {
    let schema = Schema::new(
        vec![
            Column::new("id", Type::Int64),
            Column::new("name", Type::VarStr(40)),
            Column::new("n", Type::Int64),
        ],
        vec![0],
    )
    .unwrap();
    TableSpec::typed("t", schema).with_index("by_name", &["name"])
}

fn row(id: i64, n: i64) -> Vec<Value> {
    vec![
        Value::Int(id),
        Value::Str(format!(
            "name{:05}-{}",
            id % 97,
            "x".repeat((id % 23) as usize)
        )),
        Value::Int(n),
    ]
}

/// `test` in the simulated world on a new database holding tables `t`
/// and `u` of the same spec, closed after it.
fn with_t_and_u(
    test: impl FnOnce(&Database, &flashlab_engine::Table, &flashlab_engine::Table) + Send + 'static,
) {
    let rig = SsdRig::ssd();
    let devices = rig.devices();
    Sim::run(SimConfig::default(), move |_| {
        let db = Database::open_with(&config(), devices).unwrap();
        let t = db.create_table(spec()).unwrap();
        let u = db
            .create_table(TableSpec {
                name: "u".into(),
                ..spec()
            })
            .unwrap();
        test(&db, &t, &u);
        db.close().unwrap();
    })
    .unwrap();
}

#[test]
fn put_rows_matches_put_row_and_rolls_back() {
    with_t_and_u(|db, t, u| {
        // Ascending, then a descending run, then keys already present.
        let mut rows: Vec<_> = (0..1500).map(|i| row(i * 2, 1)).collect();
        rows.extend((0..300).rev().map(|i| row(i * 2 + 1, 2)));
        rows.extend((0..50).map(|i| row(i * 10, 3)));
        let mut txn = db.begin().unwrap();
        txn.put_rows(t, &rows).unwrap();
        for r in &rows {
            txn.put_row(u, r).unwrap();
        }
        txn.commit().unwrap();
        let mut txn = db.begin().unwrap();
        for i in 0..3000 {
            let a = txn.get_row(t, &[Value::Int(i)]).unwrap();
            let b = txn.get_row(u, &[Value::Int(i)]).unwrap();
            assert_eq!(a, b, "row {i}");
        }
        for name in ["name00003-xxx", "name00050-"] {
            let key = [Value::Str(name.into())];
            assert_eq!(
                txn.index_scan(t, "by_name", &key).unwrap(),
                txn.index_scan(u, "by_name", &key).unwrap()
            );
        }
        txn.commit().unwrap();
        // A rolled-back load leaves nothing.
        let mut txn = db.begin().unwrap();
        let more: Vec<_> = (10_000..12_000).map(|i| row(i, 4)).collect();
        txn.put_rows(t, &more).unwrap();
        txn.abort().unwrap();
        let mut txn = db.begin().unwrap();
        assert_eq!(txn.get_row(t, &[Value::Int(10_500)]).unwrap(), None);
        txn.commit().unwrap();
        assert_verified(db);
    });
}

/// A database with table `t`, then `load` into it cut by a power failure
/// `growth ^ seed` ms in (before, inside or after the load), the devices
/// crashed: the rig to recover from.
fn cut_during(
    seed: u64,
    growth: f64,
    load: impl FnOnce(&Database, &flashlab_engine::Table) + Send + 'static,
) -> SsdRig {
    let rig = SsdRig::ssd();
    let devices = rig.devices();
    Sim::run(SimConfig::default(), move |_| {
        let db = Database::open_with(&config(), devices).unwrap();
        db.create_table(spec()).unwrap();
        db.close().unwrap();
    })
    .unwrap();
    let cut_ns = (growth.powi(seed as i32) * NS_PER_MS as f64) as u64;
    let devices = rig.devices();
    let sim = SimConfig {
        seed,
        deadline_ns: Some(cut_ns),
        ..SimConfig::default()
    };
    Sim::run(sim, move |_| {
        let db = Database::open_with(&config(), devices).unwrap();
        let t = db.table("t").unwrap();
        load(&db, &t);
    })
    .unwrap();
    rig.data.crash();
    rig.log.store().lock().unwrap().crash();
    rig
}

/// A load of several transactions cut at seeded instants: after recovery
/// the table holds exactly the first k batches, whole, and verifies.
#[test]
fn a_crash_mid_load_leaves_whole_batches() {
    let mut counts = Vec::new();
    for seed in 0..16u64 {
        let rig = cut_during(seed, 1.7, |db, t| {
            for b in 0..BATCHES {
                let rows: Vec<_> = (b * BATCH..(b + 1) * BATCH).map(|i| row(i, b)).collect();
                let mut txn = db.begin().unwrap();
                txn.put_rows(t, &rows).unwrap();
                txn.commit().unwrap();
            }
        });
        let devices = rig.devices();
        let (outcome, _) = Sim::run(SimConfig::default(), move |_| {
            let db = Database::open_with(&config(), devices).unwrap();
            let t = db.table("t").unwrap();
            let mut txn = db.begin().unwrap();
            let mut count = 0;
            while txn.get_row(&t, &[Value::Int(count)]).unwrap().is_some() {
                count += 1;
            }
            assert_eq!(
                count % BATCH,
                0,
                "seed {seed}: {count} rows, not whole batches"
            );
            assert_eq!(
                txn.get_row(&t, &[Value::Int(count + 1)]).unwrap(),
                None,
                "seed {seed}: rows after the first gap"
            );
            txn.commit().unwrap();
            let report = flashlab_engine::db::verify::verify(&db).unwrap();
            assert!(report.ok(), "seed {seed}: {:?}", report.problems);
            count
        })
        .unwrap();
        counts.push(outcome.finished().unwrap());
    }
    // The cuts fall before, inside and after the load.
    assert!(counts.contains(&0), "{counts:?}");
    assert!(counts.contains(&(BATCH * BATCHES)), "{counts:?}");
    assert!(
        counts.iter().any(|&c| c > 0 && c < BATCH * BATCHES),
        "{counts:?}"
    );
}

/// The log of a long run on a modelled device keeps only what lies after
/// its start (WAL-10), not every byte ever logged.
#[test]
fn the_log_forgets_what_lies_behind_its_start() {
    let rig = SsdRig::ssd();
    let devices = rig.devices();
    let log = rig.log.clone();
    Sim::run(SimConfig::default(), move |_| {
        let db = Database::open_with(&config(), devices).unwrap();
        let t = db.create_table(spec()).unwrap();
        for b in 0..40 {
            let rows: Vec<_> = (b * 500..(b + 1) * 500).map(|i| row(i, b)).collect();
            let mut txn = db.begin().unwrap();
            txn.put_rows(&t, &rows).unwrap();
            txn.commit().unwrap();
        }
        let logged = db.stats().log.bytes_appended;
        db.checkpoint().unwrap();
        db.checkpoint().unwrap();
        let resident = log.store().lock().unwrap().held_bytes();
        assert!(
            resident * 4 < logged,
            "{resident} bytes of log resident after {logged} logged"
        );
        db.close().unwrap();
    })
    .unwrap();
}

/// Rows `ids` into `t` by a bulk load; what the load reported.
fn bulk(
    db: &Database,
    t: &flashlab_engine::Table,
    ids: impl Iterator<Item = i64>,
    fill: u8,
) -> flashlab_engine::BulkLoadStats {
    bulk_logged(db, t, ids, fill, BulkLogging::default())
}

/// [`bulk`], logging the pages as `logging` says.
fn bulk_logged(
    db: &Database,
    t: &flashlab_engine::Table,
    ids: impl Iterator<Item = i64>,
    fill: u8,
    logging: BulkLogging,
) -> flashlab_engine::BulkLoadStats {
    let mut load = db
        .bulk_load_with(
            t,
            BulkLoadOptions {
                fill_percent: fill,
                logging,
                ..BulkLoadOptions::default()
            },
        )
        .unwrap();
    for i in ids {
        load.push(&row(i, 7)).unwrap();
    }
    load.finish().unwrap()
}

#[test]
fn bulk_load_matches_put_rows_and_takes_changes_after() {
    with_t_and_u(|db, t, u| {
        let n = 9_000;
        let stats = bulk(db, t, 0..n, 90);
        assert_eq!((stats.rows, stats.index_entries), (n as u64, n as u64));
        assert!(stats.height >= 2 && stats.pages > 100, "{stats:?}");
        for b in 0..(n / BATCH + 1) {
            let rows: Vec<_> = (b * BATCH..((b + 1) * BATCH).min(n))
                .map(|i| row(i, 7))
                .collect();
            let mut txn = db.begin().unwrap();
            txn.put_rows(u, &rows).unwrap();
            txn.commit().unwrap();
        }
        let check = |db: &Database| {
            let mut txn = db.begin().unwrap();
            for i in (0..n + 5).step_by(13) {
                let key = [Value::Int(i)];
                assert_eq!(
                    txn.get_row(t, &key).unwrap(),
                    txn.get_row(u, &key).unwrap(),
                    "row {i}"
                );
            }
            for name in [
                "name00003-xxx",
                "name00050-",
                "name00096-xxxxxxxxxxxxxxxxxxxxxx",
            ] {
                let key = [Value::Str(name.into())];
                let loaded = txn.index_scan(t, "by_name", &key).unwrap();
                assert!(!loaded.is_empty(), "{name}");
                assert_eq!(
                    loaded,
                    txn.index_scan(u, "by_name", &key).unwrap(),
                    "{name}"
                );
            }
            txn.commit().unwrap();
        };
        check(db);
        assert_verified(db);
        // The loaded table takes updates, inserts in the middle and deletes.
        let mut txn = db.begin().unwrap();
        for i in (0..n).step_by(5) {
            txn.put_row(t, &row(i, 8)).unwrap();
            txn.put_row(u, &row(i, 8)).unwrap();
        }
        for i in (n..n + 300).rev() {
            txn.put_row(t, &row(i, 9)).unwrap();
            txn.put_row(u, &row(i, 9)).unwrap();
        }
        for i in (0..n).step_by(11) {
            txn.delete_row(t, &[Value::Int(i)]).unwrap();
            txn.delete_row(u, &[Value::Int(i)]).unwrap();
        }
        txn.commit().unwrap();
        check(db);
        assert_verified(db);
    });
}

#[test]
fn bulk_load_refusals_change_nothing_and_free_their_pages() {
    let rig = SsdRig::ssd();
    let devices = rig.devices();
    Sim::run(SimConfig::default(), move |_| {
        let db = Database::open_with(&config(), devices).unwrap();
        let t = db.create_table(spec()).unwrap();
        // Out of order, after enough rows to reserve pages: refused, then
        // abandoned; the table stays empty and the pages go back.
        let mut load = db.bulk_load(&t).unwrap();
        for i in 0..3_000 {
            load.push(&row(i, 1)).unwrap();
        }
        let second = db
            .bulk_load(&t)
            .err()
            .expect("one load at a time")
            .to_string();
        assert!(second.contains("under way"), "{second}");
        assert_verified(&db);
        let refused = load.push(&row(10, 1)).unwrap_err().to_string();
        assert!(refused.contains("strictly ascending"), "{refused}");
        assert_eq!(load.rows(), 3_000);
        load.abandon().unwrap();
        let mut txn = db.begin().unwrap();
        assert_eq!(txn.get_row(&t, &[Value::Int(5)]).unwrap(), None);
        txn.commit().unwrap();
        assert_verified(&db);
        // Dropped unfinished: abandoned the same way.
        let mut load = db.bulk_load(&t).unwrap();
        for i in 0..2_000 {
            load.push(&row(i, 1)).unwrap();
        }
        drop(load);
        assert_verified(&db);
        // A table written during the load: the load fails and the row stays.
        let mut load = db.bulk_load(&t).unwrap();
        for i in 0..2_000 {
            load.push(&row(i, 1)).unwrap();
        }
        let mut txn = db.begin().unwrap();
        txn.put_row(&t, &row(99_999, 2)).unwrap();
        txn.commit().unwrap();
        let written = load.finish().unwrap_err().to_string();
        assert!(written.contains("written during the load"), "{written}");
        let mut txn = db.begin().unwrap();
        assert_eq!(txn.get_row(&t, &[Value::Int(5)]).unwrap(), None);
        assert!(txn.get_row(&t, &[Value::Int(99_999)]).unwrap().is_some());
        txn.commit().unwrap();
        let report = assert_verified(&db);
        // Not empty any more: refused at the start.
        let full = db.bulk_load(&t).err().expect("not empty").to_string();
        assert!(full.contains("is not empty"), "{full}");
        // Every page reserved by the three loads went back: a load of the
        // same rows into a fresh table reuses them.
        let v = db
            .create_table(TableSpec {
                name: "v".into(),
                ..spec()
            })
            .unwrap();
        bulk(&db, &v, 0..2_000, 100);
        let after = assert_verified(&db);
        assert!(
            after.pages_checked <= report.pages_checked + 8,
            "{} pages after, {} before",
            after.pages_checked,
            report.pages_checked
        );
        db.close().unwrap();
    })
    .unwrap();
}

/// A bulk load cut at seeded instants: after recovery the table is empty
/// or whole, and verify finds every page in a tree or free (BULK-5).
#[test]
fn a_crash_mid_bulk_load_leaves_the_table_empty_or_whole() {
    let n = 6_000i64;
    let mut outcomes = Vec::new();
    for seed in 0..16u64 {
        let rig = cut_during(seed, 1.6, move |db, t| {
            bulk(db, t, 0..n, 100);
        });
        let devices = rig.devices();
        let (outcome, _) = Sim::run(SimConfig::default(), move |_| {
            let db = Database::open_with(&config(), devices).unwrap();
            let cut = db.recovery_report().map_or(0, |r| r.bulk_loads_cut);
            let t = db.table("t").unwrap();
            let mut txn = db.begin().unwrap();
            let rows = txn
                .scan(&t, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
                .unwrap()
                .len() as i64;
            let by_name = txn
                .index_scan(&t, "by_name", &[Value::Str("name00003-xxx".into())])
                .unwrap()
                .len();
            txn.commit().unwrap();
            assert!(
                rows == 0 || rows == n,
                "seed {seed}: {rows} rows, not 0 or {n}"
            );
            assert_eq!(
                by_name > 0,
                rows == n,
                "seed {seed}: the index and the table disagree"
            );
            let report = flashlab_engine::db::verify::verify(&db).unwrap();
            assert!(report.ok(), "seed {seed}: {:?}", report.problems);
            // The load can run again on an empty table.
            if rows == 0 {
                bulk(&db, &t, 0..n, 100);
                assert_verified(&db);
            }
            (rows, cut)
        })
        .unwrap();
        outcomes.push(outcome.finished().unwrap());
    }
    // The cuts fall before, inside (a load cut short, its pages taken
    // back) and after the load.
    assert!(
        outcomes.iter().any(|&(rows, cut)| rows == 0 && cut == 1),
        "{outcomes:?}"
    );
    assert!(outcomes.iter().any(|&(rows, _)| rows == n), "{outcomes:?}");
}

/// A data device on the fault model whose crashes keep, drop and tear
/// unflushed writes, and a log likewise, with the page check wired in.
fn torn_rig(seed: u64) -> Rig {
    Rig::new(
        |power, checker| {
            faulty_data(64 << 20, 2048, FaultPlan::crashes(seed), power, checker).with_page_check(
                Arc::new(|offset, image| {
                    let id = PageId::new(0, (offset / 2048) as u32);
                    flashlab_engine::page::verify(image, id, "data", offset).is_err()
                }),
            )
        },
        FaultPlan::crashes(seed ^ 0x5eed),
    )
}

/// Commit rows `ids` of table `u`, one transaction each, noting each
/// acknowledged one in `acked`, until one fails (the power went).
fn commit_noted(
    db: &Database,
    ids: std::ops::Range<i64>,
    acked: &Mutex<Vec<i64>>,
) -> flashlab_engine::Result<()> {
    let u = db.table("u")?;
    for i in ids {
        let mut txn = db.begin()?;
        txn.put_row(&u, &row(i, 3))?;
        txn.commit()?;
        acked.lock().unwrap().push(i);
    }
    Ok(())
}

/// Rows `0..n` into `t` by a load logged as `logging`, until it fails.
fn try_bulk(db: &Database, n: i64, logging: BulkLogging) -> flashlab_engine::Result<()> {
    let t = db.table("t")?;
    let options = BulkLoadOptions {
        logging,
        ..BulkLoadOptions::default()
    };
    let mut load = db.bulk_load_with(&t, options)?;
    for i in 0..n {
        load.push(&row(i, 7))?;
    }
    load.finish().map(|_| ())
}

/// Loads with and without page images, cut by a power failure at a
/// seeded data write, whose crash keeps, drops or tears every unflushed
/// write, a load's page writes among them: the open succeeds (a cut
/// load's torn pages are freed unread), the table is empty or whole,
/// every commit acknowledged before and after the load is there, and
/// verify passes.
#[test]
fn torn_writes_at_a_crash_mid_load_lose_nothing() {
    let n = 6_000i64;
    let mut outcomes = Vec::new();
    for seed in 0..24u64 {
        let logging = match seed % 3 {
            2 => BulkLogging::PageImages,
            _ => BulkLogging::Minimal,
        };
        let rig = torn_rig(seed);
        let acked = Arc::new(Mutex::new(Vec::new()));
        let (devices, noted) = (rig.devices(), acked.clone());
        Sim::run(SimConfig::default(), move |_| {
            let db = Database::open_with(&config(), devices).unwrap();
            db.create_table(spec()).unwrap();
            db.create_table(TableSpec {
                name: "u".into(),
                ..spec()
            })
            .unwrap();
            commit_noted(&db, 0..50, &noted).unwrap();
            db.close().unwrap();
        })
        .unwrap();
        rig.power.arm(Some(CutTrigger {
            event: IoEvent::DataWrite,
            task_prefix: None,
            nth: 1 + seed * 19,
        }));
        let (devices, noted) = (rig.devices(), acked.clone());
        // I/O after the cut never completes: the deadline ends the run.
        let sim = SimConfig {
            seed,
            deadline_ns: Some(60 * NS_PER_S),
            ..SimConfig::default()
        };
        Sim::run(sim, move |_| {
            let db = Database::open_with(&config(), devices).unwrap();
            let _ = try_bulk(&db, n, logging).and_then(|()| commit_noted(&db, 50..400, &noted));
            db.abandon();
        })
        .unwrap();
        assert!(rig.power.is_off(), "seed {seed}: the power went");
        rig.crash();
        let devices = rig.devices();
        let acked = acked.lock().unwrap().clone();
        let acked_count = acked.len();
        let (outcome, _) = Sim::run(SimConfig::default(), move |_| {
            let db = Database::open_with(&config(), devices)
                .unwrap_or_else(|e| panic!("seed {seed} ({logging:?}): open refused: {e}"));
            let (t, u) = (db.table("t").unwrap(), db.table("u").unwrap());
            let mut txn = db.begin().unwrap();
            let all = (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded);
            let rows = txn.scan(&t, all.0, all.1).unwrap().len() as i64;
            assert!(rows == 0 || rows == n, "seed {seed}: {rows} rows");
            for &i in &acked {
                let found = txn.get_row(&u, &[Value::Int(i)]).unwrap();
                assert!(
                    found.is_some(),
                    "seed {seed}: acknowledged row {i} of u lost"
                );
            }
            txn.commit().unwrap();
            let report = flashlab_engine::db::verify::verify(&db).unwrap();
            assert!(report.ok(), "seed {seed}: {:?}", report.problems);
            rows
        })
        .unwrap();
        let torn = rig.data.counts().crash_torn;
        outcomes.push((outcome.finished().unwrap(), acked_count, torn));
    }
    // Cuts fall inside the load (an empty table, with torn page writes)
    // and after it (the table whole, commits after it acknowledged).
    assert!(
        outcomes
            .iter()
            .any(|&(rows, _, torn)| rows == 0 && torn > 0),
        "{outcomes:?}"
    );
    assert!(
        outcomes
            .iter()
            .any(|&(rows, acked, _)| rows == n && acked > 50),
        "{outcomes:?}"
    );
}

/// A loaded leaf damaged at rest, after a load without page images: its
/// contents are in no log record, so the read that meets it is refused,
/// naming the page; the log's older image of it (its allocation) is never
/// returned in its place (BULK-6, WAL-8).
#[test]
fn a_page_loaded_unlogged_and_damaged_at_rest_is_reported() {
    let rig = torn_rig(1);
    let devices = rig.devices();
    Sim::run(SimConfig::default(), move |_| {
        let db = Database::open_with(&config(), devices).unwrap();
        let t = db.create_table(spec()).unwrap();
        bulk_logged(&db, &t, 0..6_000, 100, BulkLogging::Minimal);
        db.close().unwrap();
    })
    .unwrap();
    // Flip a bit in the leaf holding row 4321's name, below the model.
    let needle = format!("name{:05}-{}", 4321 % 97, "x".repeat(4321 % 23));
    let mut image = vec![0u8; 64 << 20];
    rig.data.peek(0, &mut image);
    let at = image
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
        .expect("the row is on the device");
    {
        let mut store = rig.data.inner().store().lock().unwrap();
        store.write(at as u64, &[image[at] ^ 0x04]).unwrap();
        store.flush();
    }
    let devices = rig.devices();
    Sim::run(SimConfig::default(), move |_| {
        let db = Database::open_with(&config(), devices).unwrap();
        let t = db.table("t").unwrap();
        let mut txn = db.begin().unwrap();
        let all = (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded);
        let err = txn.scan(&t, all.0, all.1).unwrap_err().to_string();
        assert!(
            err.contains(&format!("page {}", at / 2048)) && err.contains("checksum"),
            "{err}"
        );
    })
    .unwrap();
}
