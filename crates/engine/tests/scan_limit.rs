//! `Transaction::scan_limit`: an early-stopping scan that steps over
//! deleted versions and stops at the bound.

use std::ops::Bound;

use flashlab_engine::{Database, DbConfig, Devices, TableSpec};
use flashlab_runtime::{Sim, SimConfig};

#[test]
fn scan_limit_steps_over_deleted_rows_and_stops_early() {
    let out = Sim::run(SimConfig::default(), |_| {
        let config = DbConfig::simple("memory", "memory", 4096, 8 << 20);
        let db = Database::open_with(&config, Devices::from_presets(&config).unwrap()).unwrap();
        let t = db.create_table(TableSpec::bytes("t")).unwrap();
        let key = |n: u32| n.to_be_bytes().to_vec();
        let mut txn = db.begin().unwrap();
        for n in 0..100 {
            txn.put(&t, &key(n), b"v").unwrap();
        }
        txn.commit().unwrap();
        let mut txn = db.begin().unwrap();
        for n in 0..40 {
            txn.delete(&t, &key(n)).unwrap();
        }
        txn.commit().unwrap();
        let mut txn = db.begin().unwrap();
        let first = txn
            .scan_limit(&t, Bound::Unbounded, Bound::Unbounded, 3)
            .unwrap();
        let lower = key(90);
        let upper = key(95);
        let bounded = txn
            .scan_limit(&t, Bound::Included(&lower), Bound::Excluded(&upper), 50)
            .unwrap();
        let none = txn
            .scan_limit(&t, Bound::Unbounded, Bound::Excluded(&key(40)), 1)
            .unwrap();
        txn.commit().unwrap();
        (
            first.into_iter().map(|(k, _)| k).collect::<Vec<_>>(),
            bounded.len(),
            none.len(),
        )
    })
    .unwrap()
    .0
    .finished()
    .unwrap();
    assert_eq!(
        out.0,
        vec![
            40u32.to_be_bytes().to_vec(),
            41u32.to_be_bytes().to_vec(),
            42u32.to_be_bytes().to_vec()
        ]
    );
    assert_eq!((out.1, out.2), (5, 0));
}
