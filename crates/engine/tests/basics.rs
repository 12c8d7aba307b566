//! The engine's API end to end, in the simulated world.

mod common;

use std::ops::Bound;
use std::sync::Arc;

use flashlab_devices::DeviceRef;
use flashlab_devices::memory::MemoryDevice;
use flashlab_engine::row::{Column, Schema, Type, Value};
use flashlab_engine::{Database, DbConfig, Devices, Error, Table, TableSpec};

use common::{assert_verified, sim};

fn memory_devices() -> (Devices, Vec<Arc<MemoryDevice>>) {
    let data = Arc::new(MemoryDevice::new("data", 64 << 20));
    let log = Arc::new(MemoryDevice::new("log", 64 << 20));
    let devices = Devices {
        data: vec![data.clone() as DeviceRef],
        log: log.clone(),
        rollback: None,
        temp: None,
    };
    (devices, vec![data, log])
}

fn small_config() -> DbConfig {
    DbConfig::simple("memory", "memory", 2048, 64 * 2048)
}

/// A new database on `devices` with the empty byte table "kv".
fn create_kv(devices: Devices) -> (Database, Table) {
    let db = Database::open_with(&small_config(), devices).unwrap();
    let t = db.create_table(TableSpec::bytes("kv")).unwrap();
    (db, t)
}

/// [`create_kv`] on new memory devices: the devices, their stores, the
/// database and the table.
fn new_kv() -> (Devices, Vec<Arc<MemoryDevice>>, Database, Table) {
    let (devices, raw) = memory_devices();
    let (db, t) = create_kv(devices.clone());
    (devices, raw, db, t)
}

/// The database on `devices` opened again (recovered), and its table "kv".
fn reopen_kv(devices: Devices) -> (Database, Table) {
    let db = Database::open_with(&small_config(), devices).unwrap();
    let t = db.table("kv").unwrap();
    (db, t)
}

#[test]
fn put_get_scan_delete_commit_and_abort() {
    sim(|_| {
        let (_, _, db, t) = new_kv();
        let mut txn = db.begin().unwrap();
        for i in 0..500u32 {
            txn.put(
                &t,
                format!("key{i:05}").as_bytes(),
                format!("value{i}").as_bytes(),
            )
            .unwrap();
        }
        txn.commit().unwrap();

        let mut txn = db.begin().unwrap();
        assert_eq!(txn.get(&t, b"key00042").unwrap().unwrap(), b"value42");
        let range = txn
            .scan(
                &t,
                Bound::Included(b"key00100"),
                Bound::Excluded(b"key00110"),
            )
            .unwrap();
        assert_eq!(range.len(), 10);
        assert!(txn.delete(&t, b"key00042").unwrap());
        txn.put(&t, b"key00001", b"changed").unwrap();
        txn.abort().unwrap();

        let mut txn = db.begin().unwrap();
        assert_eq!(
            txn.get(&t, b"key00042").unwrap().unwrap(),
            b"value42",
            "abort restored the delete"
        );
        assert_eq!(
            txn.get(&t, b"key00001").unwrap().unwrap(),
            b"value1",
            "abort restored the update"
        );
        txn.commit().unwrap();
        let report = assert_verified(&db);
        assert!(report.entries >= 500);
    });
}

#[test]
fn committed_data_survives_close_and_reopen() {
    sim(|_| {
        let (devices, _, db, t) = new_kv();
        let mut txn = db.begin().unwrap();
        txn.put(&t, b"a", b"1").unwrap();
        txn.commit().unwrap();
        db.close().unwrap();
        let (db, t) = reopen_kv(devices);
        let mut txn = db.begin().unwrap();
        assert_eq!(txn.get(&t, b"a").unwrap().unwrap(), b"1");
    });
}

#[test]
fn crash_loses_uncommitted_and_keeps_committed() {
    sim(|_| {
        let (devices, raw, db, t) = new_kv();
        let mut txn = db.begin().unwrap();
        for i in 0..300u32 {
            txn.put(&t, format!("c{i:04}").as_bytes(), &[7u8; 40])
                .unwrap();
        }
        txn.commit().unwrap();
        // An uncommitted transaction whose pages reach the device (steal).
        let mut loser = db.begin().unwrap();
        for i in 0..300u32 {
            loser
                .put(&t, format!("u{i:04}").as_bytes(), &[9u8; 40])
                .unwrap();
        }
        // Steal: the loser's changes reach the data device.
        db.flush().unwrap();
        std::mem::forget(loser);
        drop(db);
        for device in &raw {
            device.crash();
        }
        let (db, t) = reopen_kv(devices);
        let mut txn = db.begin().unwrap();
        let all = txn.scan(&t, Bound::Unbounded, Bound::Unbounded).unwrap();
        assert_eq!(all.len(), 300, "only the committed rows");
        assert!(all.iter().all(|(k, _)| k.starts_with(b"c")));
        txn.commit().unwrap();
        assert_verified(&db);
    });
}

#[test]
fn typed_rows_and_secondary_index() {
    sim(|_| {
        let (devices, _) = memory_devices();
        let db = Database::open_with(&small_config(), devices).unwrap();
        let schema = Schema::new(
            vec![
                Column::new("id", Type::Int64),
                Column::new("last", Type::VarStr(16)),
                Column::new("balance", Type::Decimal { scale: 2 }),
            ],
            vec![0],
        )
        .unwrap();
        let t = db
            .create_table(TableSpec::typed("customer", schema).with_index("by_last", &["last"]))
            .unwrap();
        let mut txn = db.begin().unwrap();
        for (id, last) in [(1, "SMITH"), (2, "JONES"), (3, "SMITH"), (4, "BROWN")] {
            txn.put_row(
                &t,
                &[Value::Int(id), Value::Str(last.into()), Value::Decimal(100)],
            )
            .unwrap();
        }
        txn.commit().unwrap();
        let mut txn = db.begin().unwrap();
        let smiths = txn
            .index_scan(&t, "by_last", &[Value::Str("SMITH".into())])
            .unwrap();
        assert_eq!(smiths.len(), 2);
        assert_eq!(smiths[0][0], Value::Int(1));
        assert_eq!(smiths[1][0], Value::Int(3));
        // Renaming moves the index entry.
        txn.put_row(
            &t,
            &[Value::Int(3), Value::Str("JONES".into()), Value::Decimal(5)],
        )
        .unwrap();
        assert_eq!(
            txn.index_scan(&t, "by_last", &[Value::Str("SMITH".into())])
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            txn.index_scan(&t, "by_last", &[Value::Str("JONES".into())])
                .unwrap()
                .len(),
            2
        );
        assert!(txn.delete_row(&t, &[Value::Int(2)]).unwrap());
        assert_eq!(
            txn.index_scan(&t, "by_last", &[Value::Str("JONES".into())])
                .unwrap()
                .len(),
            1
        );
        txn.commit().unwrap();
    });
}

#[test]
fn full_data_device_fails_the_transaction_and_the_database_stays_usable() {
    sim(|_| {
        let data = Arc::new(MemoryDevice::new("data", 40 * 2048));
        let log = Arc::new(MemoryDevice::new("log", 64 << 20));
        let devices = Devices {
            data: vec![data as DeviceRef],
            log,
            rollback: None,
            temp: None,
        };
        let (db, t) = create_kv(devices);
        let mut failure = None;
        let mut committed = 0u32;
        for batch in 0..100u32 {
            let mut txn = db.begin().unwrap();
            let result = (0..20u32).try_for_each(|i| {
                txn.put(&t, format!("k{batch:03}{i:02}").as_bytes(), &[1u8; 100])
            });
            match result {
                Ok(()) => {
                    txn.commit().unwrap();
                    committed += 1;
                }
                Err(e) => {
                    failure = Some(e);
                    txn.abort().unwrap();
                    break;
                }
            }
        }
        let failure = failure.expect("the device fills up");
        assert!(failure.is_space_full(), "{failure}");
        assert!(failure.to_string().contains("space full"), "{failure}");
        // The page allocator's own refusal, typed: every page is in use.
        assert!(
            matches!(&failure, flashlab_engine::Error::PagesInUse { space, capacity_pages, .. }
                if space == "data" && *capacity_pages == 40),
            "{failure:?}"
        );
        // Still usable: reads work, and the committed batches are all there.
        let mut txn = db.begin().unwrap();
        let rows = txn.scan(&t, Bound::Unbounded, Bound::Unbounded).unwrap();
        assert_eq!(rows.len() as u32, committed * 20);
        txn.commit().unwrap();
        assert_verified(&db);
    });
}

#[test]
fn bad_configuration_is_a_clear_error() {
    sim(|_| {
        let mut config = small_config();
        config.data[0].device = "floppy".into();
        let err = Database::open(&config).err().unwrap();
        assert!(matches!(err, Error::Config(_)), "{err}");
        assert!(err.to_string().contains("unknown device 'floppy'"), "{err}");
        let mut config = small_config();
        config.data[0].buffer_bytes = 2048;
        assert!(
            Database::open(&config)
                .err()
                .unwrap()
                .to_string()
                .contains("at least 8")
        );
    });
}
