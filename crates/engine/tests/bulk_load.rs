//! `Transaction::put_rows`, the bulk-load path: the same result as
//! `put_row` for each row, all-or-nothing per transaction under rollback
//! and under a crash at any instant of a load, and a log forgotten behind
//! its start on a modelled device.

use flashlab_devices::store::StoredDevice;
use flashlab_engine::row::{Column, Schema, Type, Value};
use flashlab_engine::{Database, DbConfig, TableSpec};
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

#[test]
fn put_rows_matches_put_row_and_rolls_back() {
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
        // Ascending, then a descending run, then keys already present.
        let mut rows: Vec<_> = (0..1500).map(|i| row(i * 2, 1)).collect();
        rows.extend((0..300).rev().map(|i| row(i * 2 + 1, 2)));
        rows.extend((0..50).map(|i| row(i * 10, 3)));
        let mut txn = db.begin().unwrap();
        txn.put_rows(&t, &rows).unwrap();
        for r in &rows {
            txn.put_row(&u, r).unwrap();
        }
        txn.commit().unwrap();
        let mut txn = db.begin().unwrap();
        for i in 0..3000 {
            let a = txn.get_row(&t, &[Value::Int(i)]).unwrap();
            let b = txn.get_row(&u, &[Value::Int(i)]).unwrap();
            assert_eq!(a, b, "row {i}");
        }
        for name in ["name00003-xxx", "name00050-"] {
            let key = [Value::Str(name.into())];
            assert_eq!(
                txn.index_scan(&t, "by_name", &key).unwrap(),
                txn.index_scan(&u, "by_name", &key).unwrap()
            );
        }
        txn.commit().unwrap();
        // A rolled-back load leaves nothing.
        let mut txn = db.begin().unwrap();
        let more: Vec<_> = (10_000..12_000).map(|i| row(i, 4)).collect();
        txn.put_rows(&t, &more).unwrap();
        txn.abort().unwrap();
        let mut txn = db.begin().unwrap();
        assert_eq!(txn.get_row(&t, &[Value::Int(10_500)]).unwrap(), None);
        txn.commit().unwrap();
        assert_verified(&db);
        db.close().unwrap();
    })
    .unwrap();
}

/// A load of several transactions cut at seeded instants: after recovery
/// the table holds exactly the first k batches, whole, and verifies.
#[test]
fn a_crash_mid_load_leaves_whole_batches() {
    let mut counts = Vec::new();
    for seed in 0..16u64 {
        let rig = SsdRig::ssd();
        let devices = rig.devices();
        Sim::run(SimConfig::default(), move |_| {
            let db = Database::open_with(&config(), devices).unwrap();
            db.create_table(spec()).unwrap();
            db.close().unwrap();
        })
        .unwrap();
        let cut_ns = (1.7f64.powi(seed as i32) * NS_PER_MS as f64) as u64;
        let devices = rig.devices();
        let sim = SimConfig {
            seed,
            deadline_ns: Some(cut_ns),
            ..SimConfig::default()
        };
        Sim::run(sim, move |_| {
            let db = Database::open_with(&config(), devices).unwrap();
            let t = db.table("t").unwrap();
            for b in 0..BATCHES {
                let rows: Vec<_> = (b * BATCH..(b + 1) * BATCH).map(|i| row(i, b)).collect();
                let mut txn = db.begin().unwrap();
                txn.put_rows(&t, &rows).unwrap();
                txn.commit().unwrap();
            }
        })
        .unwrap();
        rig.data.crash();
        rig.log.store().lock().unwrap().crash();
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
