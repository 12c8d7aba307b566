//! The embedding API: streaming scans against their `Vec` forms, early
//! exit, snapshots, index streams, and `transact` retrying a deadlock.

mod common;

use std::ops::Bound;
use std::sync::Arc;

use flashlab_devices::DeviceRef;
use flashlab_devices::memory::MemoryDevice;
use flashlab_engine::row::{Column, Schema, Type, Value};
use flashlab_engine::{Database, DbConfig, Devices, ErrorKind, Table, TableSpec};
use flashlab_runtime::Rt;

const ROWS: i64 = 1_000;

use common::sim;

fn database() -> Database {
    let devices = Devices {
        data: vec![Arc::new(MemoryDevice::new("data", 64 << 20)) as DeviceRef],
        log: Arc::new(MemoryDevice::new("log", 64 << 20)),
        rollback: None,
        temp: None,
    };
    let config = DbConfig::simple("memory", "memory", 4096, 256 * 4096);
    Database::open_with(&config, devices).unwrap()
}

/// A typed table of `ROWS` rows (id, group = id % 7), indexed by group.
fn loaded(db: &Database) -> Table {
    let schema = Schema::new(
        vec![
            Column::new("id", Type::Int64),
            Column::new("group", Type::Int64),
        ],
        vec![0],
    )
    .unwrap();
    let spec = TableSpec::typed("t", schema).with_index("by_group", &["group"]);
    let t = db.create_table(spec).unwrap();
    db.transact(|txn| {
        for id in 0..ROWS {
            txn.put_row(&t, &[Value::Int(id), Value::Int(id % 7)])?;
        }
        Ok(())
    })
    .unwrap();
    t
}

/// Run `f` in a simulation on a fresh database holding the [`loaded`]
/// table, then close the database cleanly.
fn with_loaded(f: impl FnOnce(&Rt, &Database, &Table) + Send + 'static) {
    sim(move |rt| {
        let db = database();
        let t = loaded(&db);
        f(&rt, &db, &t);
        db.close().unwrap();
    });
}

#[test]
fn a_stream_gives_what_the_vec_scan_gives_and_stops_early() {
    with_loaded(|_, db, t| {
        db.read(|txn| {
            let all = txn.scan(t, Bound::Unbounded, Bound::Unbounded)?;
            let streamed: Vec<_> = txn
                .range(t, Bound::Unbounded, Bound::Unbounded)
                .collect::<Result<_, _>>()?;
            assert_eq!(streamed, all);
            assert_eq!(all.len(), ROWS as usize);
            let first: Vec<_> = txn
                .rows_from(t, &[Value::Int(500)])
                .take(3)
                .collect::<Result<_, _>>()?;
            assert_eq!(first[0], [Value::Int(500), Value::Int(500 % 7)]);
            assert_eq!(first.len(), 3);
            let group: Vec<_> = txn
                .index_rows(t, "by_group", &[Value::Int(3)])?
                .collect::<Result<_, _>>()?;
            assert_eq!(group, txn.index_scan(t, "by_group", &[Value::Int(3)])?);
            assert!(group.iter().all(|r| r[1] == Value::Int(3)));
            Ok(())
        })
        .unwrap();
    });
}

#[test]
fn a_read_keeps_its_snapshot_while_others_commit() {
    with_loaded(|_, db, t| {
        let writer = db.clone();
        let (t2, before) = (t.clone(), db.visible_ts());
        db.read(|txn| {
            let mut rows = txn.rows_from(t, &[]);
            rows.next().unwrap()?;
            // Another transaction deletes a row ahead of the stream.
            writer.transact(|w| w.delete_row(&t2, &[Value::Int(900)]))?;
            assert_eq!(
                rows.count(),
                ROWS as usize - 1,
                "the stream sees its snapshot"
            );
            Ok(())
        })
        .unwrap();
        let after = db.read(|txn| Ok(txn.rows_from(t, &[]).count())).unwrap();
        assert_eq!(after, ROWS as usize - 1);
        let old = db
            .read_as_of(before, |txn| txn.get_row(t, &[Value::Int(900)]))
            .unwrap();
        assert!(old.is_some(), "as of before the delete, the row is there");
    });
}

#[test]
fn transact_retries_a_deadlock_victim_and_returns_other_errors() {
    with_loaded(|rt, db, t| {
        // Two transactions update rows 1 and 2 in opposite orders, each
        // pausing between its updates: one is chosen as a deadlock victim
        // and transact runs it again.
        let spawn = |first: i64, second: i64| {
            let (db, t, rt2) = (db.clone(), t.clone(), rt.clone());
            rt.spawn("mover", move || {
                let mut attempts = 0;
                db.transact(|txn| {
                    attempts += 1;
                    txn.update_row(&t, &[Value::Int(first)], |r| r[1] = Value::Int(-1))?;
                    rt2.sleep(1_000_000);
                    txn.update_row(&t, &[Value::Int(second)], |r| r[1] = Value::Int(-1))?;
                    Ok(())
                })
                .map(|()| attempts)
            })
        };
        let (a, b) = (spawn(1, 2), spawn(2, 1));
        let attempts = [a.join().unwrap(), b.join().unwrap()];
        // The victim runs again; its retry may also lose a first-updater
        // conflict to the survivor's commit, and runs once more.
        let total: u32 = attempts.iter().sum();
        assert!(
            (3..=2 * flashlab_engine::TRANSACT_ATTEMPTS_MAX).contains(&total),
            "{attempts:?}"
        );
        let rows = db.read(|txn| {
            Ok([
                txn.get_row(t, &[Value::Int(1)])?,
                txn.get_row(t, &[Value::Int(2)])?,
            ])
        });
        assert!(
            rows.unwrap()
                .iter()
                .all(|r| r.as_ref().unwrap()[1] == Value::Int(-1))
        );
        // A row of the wrong shape: no retry, the error as it was.
        let mut tries = 0;
        let err = db
            .transact(|txn| {
                tries += 1;
                txn.put_row(t, &[Value::Int(1)])
            })
            .unwrap_err();
        assert_eq!(tries, 1);
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    });
}
