//! A database whose data space is In-Page Logging on raw NAND, against
//! crashes: power cut inside a merge (between the new unit's programs and
//! its commit sector, and between the commit sector and the erase of the
//! old unit), inside commits' log-sector forces, inside recovery, and
//! crashes that keep, drop or tear every unflushed program. The promise is
//! the engine's: no acknowledged commit is lost, nothing uncommitted is
//! visible. IPL pages restart without redo (REC-4): every recovery
//! reports `ipl_pages_redone == 0`, the IPL pages being as of the newest
//! force marker's L*, and transactions that ended beyond it undone.

use std::sync::Arc;

use flashlab_devices::fault::{CutTrigger, FaultPlan, FaultyDevice, IoEvent, Role};
use flashlab_devices::nand_device::{NandDevice, NandSpec};
use flashlab_engine::db::recovery::RecoveryReport;
use flashlab_engine::store::StoreKind;
use flashlab_engine::{Database, DbConfig, TableSpec};
use flashlab_runtime::{NS_PER_S, Sim, SimConfig};

const PAGE: usize = 2048;
const ROWS: u32 = 600;
const NAND_BYTES: u64 = 8 << 20;

mod common;
use common::{
    Rig, assert_verified, check_cut_rows, commit_each, load_table, quiet_config, row_key as key,
    row_value, run, update_each_until_cut,
};

/// A rig with the data space on raw NAND.
fn rig(plan: FaultPlan) -> Rig {
    Rig::new(
        |power, _| {
            let nand =
                NandDevice::in_memory(NandSpec::k9wag08u1a().with_capacity_bytes(NAND_BYTES))
                    .unwrap();
            FaultyDevice::new(
                Arc::new(nand),
                Role::Data { page_bytes: PAGE },
                plan.clone(),
            )
            .with_power(power.clone())
        },
        plan.clone(),
    )
}

/// A 12-frame pool (pages are written back all the time, so log sectors
/// fill and units merge), 4 KB log segments, no background tasks.
fn config() -> DbConfig {
    let mut config = quiet_config("nand", PAGE);
    config.data[0].store = StoreKind::Ipl;
    config.data[0].capacity_bytes = Some(NAND_BYTES);
    config.data[0].ipl_log_segment_bytes = Some(4 << 10);
    config
}

fn value(i: u32, version: u32) -> Vec<u8> {
    row_value(i, version, 40)
}

fn counter(db: &Database, name: &str) -> f64 {
    db.store_counters()[0]
        .2
        .iter()
        .find(|(k, _)| *k == name)
        .map_or(0.0, |(_, v)| *v)
}

fn load(rig: &Rig) {
    let devices = rig.devices();
    run(move || {
        let db = Database::open_with(&config(), devices).unwrap();
        assert_eq!(db.store_counters()[0].1, StoreKind::Ipl);
        load_table(&db, 0..ROWS, key, |i| value(i, 0));
        db.close().unwrap();
    });
}

/// A loaded rig whose power will be cut at the `nth` `event` of the run
/// (unflushed writes at the cut kept and torn at the given percents; the
/// plan's seed is `seed`).
fn loaded_rig_cut_at(
    event: IoEvent,
    nth: u64,
    keep_percent: u32,
    tear_percent: u32,
    seed: u64,
) -> Rig {
    let rig = rig(FaultPlan::crash_fates(keep_percent, tear_percent, seed));
    load(&rig);
    rig.power.arm(Some(CutTrigger {
        event,
        task_prefix: None,
        nth,
    }));
    rig
}

/// Rows below `acked` at `version`, rows at or above `acked + 1` at 0, and
/// row `acked` at either (its commit was in doubt at the cut). Returns
/// what the open's recovery did.
fn check_rows(rig: &Rig, version: u32, acked: u32) -> RecoveryReport {
    check_rows_after_repairs(rig, version, acked).0
}

/// [`check_rows`], and the pages the open rebuilt from the WAL (BUF-9)
/// before anything else read them.
fn check_rows_after_repairs(rig: &Rig, version: u32, acked: u32) -> (RecoveryReport, u64) {
    let devices = rig.devices();
    run(move || {
        let db = Database::open_with(&config(), devices).unwrap();
        let repairs: u64 = db.stats().buffers.values().map(|b| b.repairs).sum();
        let recovery = db.recovery_report().expect("opened by recovery");
        // The losers recovery undid ended: none is still an active
        // transaction whose records merges would carry (IPL-SEL).
        for (space, _, counters) in db.store_counters() {
            let active = counters.iter().find(|(n, _)| *n == "active_transactions");
            assert_eq!(active.map_or(0.0, |(_, v)| *v), 0.0, "space {space}");
        }
        check_cut_rows(&db, ROWS, acked, version, value);
        db.close().unwrap();
        assert_eq!(
            recovery.ipl_pages_redone, 0,
            "REC-4: no redo of IPL pages: {recovery:?}"
        );
        assert!(recovery.ipl_restart_lsn > 0, "{recovery:?}");
        (recovery, repairs)
    })
}

/// Flip one bit of every copy of `needle` on the NAND (the page images and
/// log records that hold it), below the fault model; returns how many. The
/// NAND model's store holds every byte inverted (NAND-D5).
fn damage_on_flash(rig: &Rig, needle: &[u8]) -> usize {
    let mut flash = vec![0u8; NAND_BYTES as usize];
    rig.data.peek(0, &mut flash);
    let needle: Vec<u8> = needle.iter().map(|b| !b).collect();
    let at: Vec<usize> = flash
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle.as_slice())
        .map(|(i, _)| i)
        .collect();
    let mut store = rig.data.inner().store().lock().unwrap();
    for &i in &at {
        let offset = i + needle.len() - 1;
        store.write(offset as u64, &[flash[offset] ^ 0x01]).unwrap();
    }
    store.flush();
    at.len()
}

/// Update every row, one commit each, until the power goes (if armed).
fn update_until_cut(rig: &Rig, version: u32) -> (u32, f64) {
    let merges = |db: &Database| counter(db, "merges");
    // An uncommitted change: never visible after the crash.
    let uncommitted = |db: &Database| {
        let t = db.table("t").unwrap();
        let mut txn = db.begin().unwrap();
        txn.put(&t, &key(0), &value(0, 999)).unwrap();
        db.flush().unwrap();
        std::mem::forget(txn);
    };
    let value = move |i| value(i, version);
    update_each_until_cut(rig.devices(), config(), ROWS, value, merges, uncommitted)
}

/// IPL pages restart without redo (issue 14): with every unflushed
/// program dropped by the crash, recovery skips every redo record of an
/// IPL page (`ipl_pages_redone == 0`, `ipl_pages_skipped > 0`), restarts
/// the space at the newest marker's L*, and loses no acknowledged commit.
#[test]
fn recovery_restarts_ipl_pages_at_the_marker_without_redo() {
    let drop_all = FaultPlan::crash_fates(0, 0, 21);
    let rig = rig(drop_all);
    load(&rig);
    rig.power.arm(Some(CutTrigger {
        event: IoEvent::DataWrite,
        task_prefix: None,
        nth: 150,
    }));
    let (acked, _) = update_until_cut(&rig, 1);
    assert!(rig.power.is_off() && acked < ROWS, "cut inside the run");
    rig.crash();
    let report = check_rows(&rig, 1, acked);
    assert!(
        report.ipl_pages_redone == 0 && report.ipl_pages_skipped > 0,
        "{report:?}"
    );
    assert!(report.ipl_restart_lsn <= report.end_lsn, "{report:?}");
}

#[test]
fn committed_updates_survive_a_crash_that_tears_unflushed_programs() {
    let tear_all = FaultPlan::crash_fates(30, 40, 11);
    let rig = rig(tear_all);
    load(&rig);
    let (acked, merges) = update_until_cut(&rig, 1);
    assert_eq!(acked, ROWS);
    assert!(merges > 0.0, "the log segments filled and merged");
    rig.crash();
    check_rows(&rig, 1, ROWS);
    assert!(rig.checker.violations().is_empty());
}

/// Issue 14: a page damaged on the medium is rebuilt from the WAL during a
/// restart without redo, from the records before the newest marker's L*
/// only (BUF-9, REC-4): the page's state in the marked state, neither older
/// nor newer than its neighbours; the open does not refuse it. Here the
/// damage is in the leaf of row 0, which recovery must read to undo the
/// last, uncommitted change to row 0 (the marker covers it).
#[test]
fn a_damaged_ipl_page_is_rebuilt_from_the_wal_up_to_the_marker_at_restart() {
    let rig = rig(FaultPlan::none(5));
    load(&rig);
    let devices = rig.devices();
    run(move || {
        let db = Database::open_with(&config(), devices).unwrap();
        let t = db.table("t").unwrap();
        commit_each(&db, &t, 0..ROWS, key, |i| value(i, 1));
        // A loser changes row 0; a later commit's force captures its
        // change with every other pending record, so L* lies beyond it.
        let mut loser = db.begin().unwrap();
        loser.put(&t, &key(0), &value(0, 999)).unwrap();
        let mut txn = db.begin().unwrap();
        txn.put(&t, &key(1), &value(1, 1)).unwrap();
        txn.commit().unwrap();
        std::mem::forget(loser);
        db.abandon();
    });
    rig.crash();
    assert!(
        damage_on_flash(&rig, &key(0)) > 0,
        "row 0's leaf is on the NAND"
    );
    let (report, repairs) = check_rows_after_repairs(&rig, 1, ROWS);
    assert!(
        repairs >= 1,
        "recovery rebuilt the damaged leaf: {report:?}"
    );
    assert_eq!(report.losers, 1, "{report:?}");
}

/// Every data flush of the run is a force's (after its groups, after its
/// marker) or a merge's (after the new unit's pages, after its commit
/// sector): cuts at a run of consecutive flushes land in each.
#[test]
fn a_power_cut_inside_a_merge_or_a_marker_loses_no_acknowledged_commit() {
    for nth in (1..=16u64).chain([50, 101, 200, 333, 500, 777]) {
        let rig = loaded_rig_cut_at(IoEvent::DataFlush, nth, 40, 30, nth);
        let (acked, _) = update_until_cut(&rig, 1);
        assert!(rig.power.is_off(), "cut {nth}: the power was cut");
        let point = rig.power.cut_point().expect("cut");
        assert_eq!(point.event, IoEvent::DataFlush);
        assert!(acked < ROWS, "cut {nth}: inside the run ({acked} acked)");
        rig.crash();
        check_rows(&rig, 1, acked);
        // And the space goes on: another round of updates, all kept.
        let (again, _) = update_until_cut(&rig, 2);
        assert_eq!(again, ROWS);
        rig.crash();
        check_rows(&rig, 2, ROWS);
    }
}

/// Every commit forces the space (lee2007; IPL-13): a power cut at the
/// n-th data write lands in a force's group, its marker (each force is a
/// few groups then one marker write, so consecutive cuts hit markers), an
/// eviction's force or a merge, torn or dropped or kept; the promise holds
/// and no IPL page is redone.
#[test]
fn a_power_cut_inside_a_commits_log_sector_force_loses_no_acknowledged_commit() {
    // Every data write of the first forces (groups, then the marker), one
    // by one, and some later ones.
    for nth in (1u64..=12).chain([25, 60, 140]) {
        let rig = loaded_rig_cut_at(IoEvent::DataWrite, nth, 30, 40, nth);
        let (acked, _) = update_until_cut(&rig, 1);
        assert!(rig.power.is_off(), "cut {nth}: the power was cut");
        assert!(acked < ROWS, "cut {nth}: inside the run ({acked} acked)");
        rig.crash();
        check_rows(&rig, 1, acked);
    }
}

/// A power cut inside recovery (its write-backs, merges and closing
/// checkpoint, at the n-th data write or flush of the open), after a cut
/// in the middle of the updates; then recovery again: no acknowledged
/// commit lost, nothing uncommitted visible.
#[test]
fn a_power_cut_during_recovery_loses_no_acknowledged_commit() {
    let mut cut_in_recovery = 0;
    for (event, nth) in [
        (IoEvent::DataWrite, 1u64),
        (IoEvent::DataWrite, 5),
        (IoEvent::DataWrite, 30),
        (IoEvent::DataFlush, 1),
        (IoEvent::DataFlush, 2),
    ] {
        let rig = loaded_rig_cut_at(IoEvent::DataWrite, 150, 30, 40, nth + 100);
        let (acked, _) = update_until_cut(&rig, 1);
        assert!(rig.power.is_off() && acked < ROWS, "cut inside the run");
        rig.crash();
        rig.power.arm(Some(CutTrigger {
            event,
            task_prefix: Some("root".into()),
            nth,
        }));
        let devices = rig.devices();
        let sim = SimConfig {
            deadline_ns: Some(600 * NS_PER_S),
            ..SimConfig::default()
        };
        let _ = Sim::run(sim, move |_| {
            if let Ok(db) = Database::open_with(&config(), devices) {
                db.abandon();
            }
        });
        if rig.power.is_off() {
            cut_in_recovery += 1;
        }
        rig.crash();
        rig.power.arm(None);
        check_rows(&rig, 1, acked);
    }
    assert!(
        cut_in_recovery >= 3,
        "{cut_in_recovery} cuts landed in recovery"
    );
}

/// Regression (issue 14): a table's creation is acknowledged when its
/// catalog record is durable in the WAL (transaction 0, no commit record);
/// with no redo of IPL pages at restart, a crash before the next force
/// would lose the acknowledged table, so `create_table` waits for a force
/// marker covering its records (IPL-13).
#[test]
fn a_created_table_survives_a_crash_right_after_its_creation() {
    let drop_all = FaultPlan::crash_fates(0, 0, 5);
    let rig = rig(drop_all);
    load(&rig);
    let devices = rig.devices();
    run(move || {
        let db = Database::open_with(&config(), devices).unwrap();
        db.create_table(TableSpec::bytes("u")).unwrap();
        db.abandon();
    });
    rig.crash();
    let devices = rig.devices();
    run(move || {
        let db = Database::open_with(&config(), devices).unwrap();
        let recovery = db.recovery_report().expect("opened by recovery");
        assert_eq!(recovery.ipl_pages_redone, 0, "{recovery:?}");
        let u = db.table("u").expect("the acknowledged table is there");
        let mut txn = db.begin().unwrap();
        txn.put(&u, b"k", b"v").unwrap();
        txn.commit().unwrap();
        assert_verified(&db);
        db.close().unwrap();
    });
}
