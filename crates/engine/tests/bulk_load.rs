//! Loading in key order. `Transaction::put_rows`: the same result as
//! `put_row` for each row, all-or-nothing per transaction under rollback
//! and under a crash at any instant of a load, and a log forgotten behind
//! its start on a modelled device. `Database::bulk_load`, the bottom-up
//! build: the same rows and index entries as `put_rows`, refusals that
//! change nothing, and a table empty or whole after a crash at any
//! instant, with every reserved page taken back (BULK-1 to BULK-5).

use flashlab_devices::store::StoredDevice;
use flashlab_engine::row::{Column, Schema, Type, Value};
use flashlab_engine::{BulkLoadOptions, Database, DbConfig, TableSpec};
use flashlab_runtime::{NS_PER_MS, Sim, SimConfig};

mod common;
use common::{SsdRig, assert_verified, busy_config};

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
    let mut load = db
        .bulk_load_with(
            t,
            BulkLoadOptions {
                fill_percent: fill,
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
