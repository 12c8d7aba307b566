//! Power cuts in the middle of a page cleaner's batch: the cleaner writes
//! several pages a batch, one device request a page here (no write
//! scheduler), and the power goes between two of them. Recovery must give
//! back every acknowledged commit, and no page may have reached the data
//! device before the log records it carries (WAL-before-data, BUF-2,
//! CLEAN-2), which the rig's checker verifies on every data write.

use flashlab_devices::fault::{CutTrigger, FaultPlan, IoEvent};
use flashlab_engine::buffer::CLEANER_TASK_NAME;
use flashlab_engine::{BufferConfig, Database, DbConfig};
use flashlab_runtime::NS_PER_MS;

mod common;
use common::{
    Rig, check_cut_rows, faulty_data, load_table, row_key as key, row_value, run,
    update_each_until_cut,
};

const PAGE_BYTES: usize = 2048;
const POOL_PAGES: u64 = 16;
const ROWS: u32 = 400;
const PAD: usize = 100;
/// Pages of a cleaner batch.
const BATCH_PAGES: usize = 4;

fn value(i: u32, version: u32) -> Vec<u8> {
    row_value(i, version, PAD)
}

/// A pool far smaller than the table, so that the cleaner has work all
/// the time; no checkpoints, so its writes are the data writes. The CPU
/// prices stay on: on memory devices they are what moves virtual time, so
/// that the cleaner's rounds come between the commits.
fn config() -> DbConfig {
    let mut config = DbConfig::simple(
        "memory",
        "memory",
        PAGE_BYTES,
        POOL_PAGES * PAGE_BYTES as u64,
    );
    config.checkpoint_interval_ns = 0;
    config.buffer = BufferConfig {
        clean_target: 0.25,
        cleaner_batch_pages: BATCH_PAGES,
        cleaner_interval_ns: 2 * NS_PER_MS,
    };
    config
}

/// A loaded rig whose power goes at the `nth` data write of the cleaner.
fn loaded_rig_cut_at(nth: u64, seed: u64) -> Rig {
    let rig = Rig::new(
        |power, checker| {
            faulty_data(
                64 << 20,
                PAGE_BYTES,
                FaultPlan::crash_fates(50, 25, seed),
                power,
                checker,
            )
        },
        FaultPlan::crashes(seed),
    );
    let devices = rig.devices();
    run(move || {
        let db = Database::open_with(&config(), devices).unwrap();
        load_table(&db, 0..ROWS, key, |i| value(i, 0));
        db.close().unwrap();
    });
    rig.power.arm(Some(CutTrigger {
        event: IoEvent::DataWrite,
        task_prefix: Some(CLEANER_TASK_NAME.to_string()),
        nth,
    }));
    rig
}

/// Update every row to `version`, one commit each, until the power goes;
/// returns the commits acknowledged and the pages the cleaner wrote.
fn update_until_cut(rig: &Rig, version: u32) -> (u32, u64) {
    let cleaned = |db: &Database| db.stats().buffers.values().map(|b| b.cleaner_pages).sum();
    let value = move |i| value(i, version);
    update_each_until_cut(rig.devices(), config(), ROWS, value, cleaned, |_| {})
}

/// Rows below `acked` at `version`, rows above it at 0, row `acked` at
/// either (its commit was in doubt at the cut); the structure intact.
fn check_rows(rig: &Rig, version: u32, acked: u32) {
    let devices = rig.devices();
    run(move || {
        let db = Database::open_with(&config(), devices).unwrap();
        check_cut_rows(&db, ROWS, acked, version, value);
        db.close().unwrap();
    });
}

/// Regression: the power goes at the 2nd, 3rd, 6th, ... data write of the
/// cleaner, inside a batch of four (one request a page); unflushed writes
/// are kept, dropped or torn. No acknowledged commit is lost and no page
/// ever reached the device ahead of its log records.
#[test]
fn a_power_cut_inside_a_cleaner_batch_loses_no_acknowledged_commit() {
    for (seed, nth) in [(1, 2), (2, 3), (3, 6), (4, 7), (5, 11)] {
        let rig = loaded_rig_cut_at(nth, seed);
        let (acked, _) = update_until_cut(&rig, 1);
        assert!(
            rig.power.is_off() && acked < ROWS,
            "nth {nth}: cut inside the run"
        );
        rig.crash();
        check_rows(&rig, 1, acked);
        assert!(
            rig.checker.violations().is_empty(),
            "WAL-before-data: {:?}",
            rig.checker.violations()
        );
        assert!(rig.checker.pages_checked() > 0);
    }
}

/// Without a cut, the same run has the cleaner write batches while the
/// clients work (so the cuts above land in its batches).
#[test]
fn the_cleaner_writes_batches_in_this_run() {
    let rig = loaded_rig_cut_at(u64::MAX, 9);
    let (acked, cleaned) = update_until_cut(&rig, 1);
    assert_eq!(acked, ROWS);
    assert!(cleaned >= 2 * BATCH_PAGES as u64, "cleaner pages {cleaned}");
    assert!(rig.checker.violations().is_empty());
}
