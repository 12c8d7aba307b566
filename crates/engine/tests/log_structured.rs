//! The log-structured page store (`store = "log-structured"`, issue 15)
//! under the engine: the data survive reopening, segment cleaning
//! (greedy, cost-benefit) reclaims space, a space with cleaning off fills
//! up with a one-line error naming it, and crashes lose nothing
//! acknowledged: a torn partial segment, a misdirected page, power cuts
//! during cleaning and during map checkpoints. `flashlab check`'s map
//! verification runs after every recovery (`verify`).

use std::sync::Arc;

use flashlab_devices::fault::{CutTrigger, FaultPlan, IoEvent};
use flashlab_engine::db::verify::verify;
use flashlab_engine::store::{Cleaning, StoreKind};
use flashlab_engine::{Database, DbConfig, Error, TableSpec};
use flashlab_runtime::{NS_PER_MS, Sim, SimConfig};

const PAGE: usize = 2048;
const ROWS: u32 = 500;
/// Segments of 16 pages; the data device holds about 60 of them.
const SEGMENT_BYTES: u64 = 16 * PAGE as u64;
const DATA_BYTES: u64 = 2 << 20;
/// A device of 22 segments (and the superblock and map slots).
const SMALL_BYTES: u64 = 22 * SEGMENT_BYTES + (32 << 10);

mod common;
use common::{
    Rig, assert_verified, check_table, commit_each, commit_each_and_abandon, faulty_data,
    load_table, quiet_config, row_key as key, row_value, run,
};

/// A rig with the log-structured data space on a memory device of
/// `data_bytes`. A log-structured block is damaged when its own checksum
/// fails (pages and the store's blocks both carry one at 0..4).
fn rig(data_plan: FaultPlan, data_bytes: u64) -> Rig {
    Rig::new(
        |power, checker| {
            faulty_data(data_bytes, PAGE, data_plan, power, checker).with_page_check(Arc::new(
                |_, image| {
                    image.iter().any(|&b| b != 0)
                        && u32::from_le_bytes(image[0..4].try_into().unwrap())
                            != crc32c::crc32c(&image[4..])
                },
            ))
        },
        FaultPlan::none(1),
    )
}

/// A small pool (pages are written back all the time), no background
/// tasks, a log-structured data space of small segments.
fn config(cleaning: Cleaning) -> DbConfig {
    let mut config = quiet_config("memory", PAGE);
    config.data[0].store = StoreKind::LogStructured;
    config.data[0].segment_bytes = Some(SEGMENT_BYTES);
    config.data[0].cleaning = Some(cleaning);
    config
}

fn value(i: u32, version: u32) -> Vec<u8> {
    // Four rows to a page: 125 pages, eight segments of live data.
    row_value(i, version, 400)
}

/// The `n`th row of a scattered visit of every row.
fn scattered(n: u32) -> u32 {
    (n * 211) % ROWS
}

/// Load ROWS rows at version 0 and close cleanly.
fn load(rig: &Rig, cleaning: Cleaning) {
    let devices = rig.devices();
    run(move || {
        let db = Database::open_with(&config(cleaning), devices).unwrap();
        load_table(&db, 0..ROWS, key, |i| value(i, 0));
        db.close().unwrap();
    });
}

/// The version of the `n`-th row updated when rows below `upto` reached
/// `version` and the rest `version - 1` (or 0).
fn acknowledged(n: u32, upto: u32, version: u32) -> u32 {
    if n < upto {
        version
    } else {
        version.saturating_sub(1)
    }
}

/// Every row below `upto` at `version`, the rest at `version - 1` (or 0);
/// `verify` (the map against the segments included) finds nothing.
fn check_rows(rig: &Rig, cleaning: Cleaning, version: u32, upto: u32) {
    let devices = rig.devices();
    run(move || {
        let db = Database::open_with(&config(cleaning), devices).unwrap();
        check_table(&db, 0..ROWS, key, |i| {
            value(i, acknowledged(i, upto, version))
        });
        db.close().unwrap();
    });
}

/// Update every row to `version`, one transaction each, checkpointing
/// every `checkpoint_every` rows; returns the store's (segments cleaned,
/// pages copied, map checkpoints).
fn update_all(
    rig: &Rig,
    cleaning: Cleaning,
    version: u32,
    checkpoint_every: u32,
) -> (u64, u64, u64) {
    let devices = rig.devices();
    run(move || {
        let db = Database::open_with(&config(cleaning), devices).unwrap();
        let t = db.table("t").unwrap();
        for n in 0..ROWS {
            // Scattered, so segments die a page at a time.
            let i = scattered(n);
            let mut txn = db.begin().unwrap();
            txn.put(&t, &key(i), &value(i, version)).unwrap();
            txn.commit().unwrap();
            if (n + 1) % checkpoint_every == 0 {
                db.checkpoint().unwrap();
            }
        }
        let stats = db.store_stats()[0].1.clone();
        db.close().unwrap();
        (
            stats.segments_cleaned,
            stats.pages_copied,
            stats.map_checkpoints,
        )
    })
}

#[test]
fn pages_survive_reopening_and_check_verifies_the_map() {
    let rig = rig(FaultPlan::none(1), DATA_BYTES);
    load(&rig, Cleaning::Greedy);
    check_rows(&rig, Cleaning::Greedy, 0, ROWS);
    update_all(&rig, Cleaning::Greedy, 1, 50);
    check_rows(&rig, Cleaning::Greedy, 1, ROWS);
    assert!(rig.checker.violations().is_empty());
}

/// A device of 22 segments, 125 pages live: rounds of updates fill it
/// many times over, so only cleaning keeps the space going.
fn cleaning_reclaims_space(cleaning: Cleaning) {
    let rig = rig(FaultPlan::none(2), SMALL_BYTES);
    load(&rig, cleaning);
    let mut cleaned = 0;
    let mut copied = 0;
    for version in 1..=6 {
        let (c, p, _) = update_all(&rig, cleaning, version, 25);
        cleaned += c;
        copied += p;
    }
    assert!(cleaned > 0, "no segment was cleaned");
    assert!(copied > 0, "cleaning copied nothing");
    check_rows(&rig, cleaning, 6, ROWS);
}

#[test]
fn greedy_cleaning_reclaims_space() {
    cleaning_reclaims_space(Cleaning::Greedy);
}

#[test]
fn cost_benefit_cleaning_reclaims_space() {
    cleaning_reclaims_space(Cleaning::CostBenefit);
}

#[test]
fn with_cleaning_off_a_full_space_is_a_one_line_error_naming_it() {
    let rig = rig(FaultPlan::none(3), SMALL_BYTES);
    let devices = rig.devices();
    let err = run(move || {
        let db = Database::open_with(&config(Cleaning::Off), devices).unwrap();
        let t = db.create_table(TableSpec::bytes("t")).unwrap();
        let mut first = None;
        'rounds: for version in 0..200 {
            for i in 0..ROWS {
                let mut txn = db.begin().unwrap();
                let put = txn.put(&t, &key(i), &value(i, version));
                let done = put.and_then(|_| txn.commit());
                if let Err(e) = done.and_then(|_| db.flush()) {
                    first = Some(e);
                    break 'rounds;
                }
            }
        }
        db.abandon();
        first.expect("the space filled up").to_string()
    });
    assert!(err.contains("data space 'data'"), "{err}");
    assert!(err.contains("cleaning is off"), "{err}");
    assert!(!err.contains('\n'), "{err}");
}

#[test]
fn a_torn_partial_segment_loses_nothing_committed() {
    let tear_all = FaultPlan::crash_fates(0, 100, 7);
    let rig = rig(tear_all, DATA_BYTES);
    load(&rig, Cleaning::Greedy);
    let config = config(Cleaning::Greedy);
    commit_each_and_abandon(rig.devices(), config, 0..ROWS, key, |i| value(i, 1));
    rig.crash();
    let counts = rig.data.counts();
    assert!(counts.crash_torn > 0, "{counts:?}");
    assert_eq!(counts.damaged_pages_caught, counts.damaged_pages);
    check_rows(&rig, Cleaning::Greedy, 1, ROWS);
    assert!(rig.checker.violations().is_empty());
}

#[test]
fn a_misdirected_partial_segment_is_detected_and_repaired_or_reported() {
    let misdirect = FaultPlan {
        misdirect_ppm: 200_000,
        ..FaultPlan::none(11)
    };
    let rig = rig(FaultPlan::none(11), DATA_BYTES);
    load(&rig, Cleaning::Greedy);
    rig.data.set_plan(misdirect);
    let devices = rig.devices();
    run(move || {
        let db = Database::open_with(&config(Cleaning::Greedy), devices).unwrap();
        let t = db.table("t").unwrap();
        for i in 0..ROWS {
            // A page a misdirected write destroyed may be reported here
            // already (a corruption error): the run stops there.
            let mut txn = db.begin().unwrap();
            let done = txn
                .put(&t, &key(i), &value(i, 1))
                .and_then(|_| txn.commit());
            if let Err(e) = done {
                assert!(e.to_string().contains("corruption"), "{e}");
                break;
            }
        }
        db.abandon();
    });
    rig.data.set_plan(FaultPlan::none(11));
    rig.crash();
    assert!(rig.data.counts().misdirected_writes > 0);
    // Whatever the misdirected writes overwrote is never returned as data:
    // the open, the reads or the check either repair it from the log or
    // report it.
    let devices = rig.devices();
    let outcome = run(move || {
        let db = match Database::open_with(&config(Cleaning::Greedy), devices) {
            Ok(db) => db,
            Err(e) => return Err(e.to_string()),
        };
        let t = db.table("t").unwrap();
        let mut txn = db.begin().unwrap();
        for i in 0..ROWS {
            match txn.get(&t, &key(i)) {
                Ok(Some(v)) => assert!(v == value(i, 1) || v == value(i, 0), "row {i}"),
                Ok(None) => panic!("row {i} is missing"),
                Err(e) => return Err(e.to_string()),
            }
        }
        txn.commit().unwrap();
        let report = verify(&db).unwrap();
        db.close().unwrap();
        Ok(report.problems)
    });
    if let Err(e) = outcome {
        assert!(
            e.contains("corruption") || e.contains("damaged") || e.contains("page"),
            "{e}"
        );
    }
}

/// What a cut run saw.
struct CutRun {
    cut: bool,
    /// The cut fell inside a cleaning pass (begun, not finished).
    in_cleaning: bool,
}

/// Cut the power at the `nth` data write (or flush) of a run that cleans
/// and checkpoints every 20 rows; recover; every acknowledged update is
/// there.
fn cut_and_recover(event: IoEvent, nth: u64, cleaning: Cleaning) -> CutRun {
    let rig = rig(FaultPlan::crashes(nth), SMALL_BYTES);
    load(&rig, cleaning);
    rig.power.arm(Some(CutTrigger {
        event,
        task_prefix: None,
        nth,
    }));
    let devices = rig.devices();
    let acked = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let acked_in = acked.clone();
    // A handle on the database, read on the host after the cut (and then
    // leaked: dropping it outside its simulation would wait on its tasks).
    let held: Arc<std::sync::Mutex<Option<Database>>> = Arc::default();
    let held_in = held.clone();
    let sim = SimConfig {
        deadline_ns: Some(60_000 * NS_PER_MS),
        ..SimConfig::default()
    };
    let _ = Sim::run(sim, move |_| {
        let db = Database::open_with(&config(cleaning), devices).unwrap();
        *held_in.lock().unwrap() = Some(db.clone());
        let t = db.table("t").unwrap();
        for version in 1..=3 {
            for n in 0..ROWS {
                let i = scattered(n);
                let mut txn = db.begin().unwrap();
                txn.put(&t, &key(i), &value(i, version)).unwrap();
                txn.commit().unwrap();
                acked_in.store(version * ROWS + n + 1, std::sync::atomic::Ordering::SeqCst);
                if (n + 1) % 20 == 0 {
                    db.checkpoint().unwrap();
                }
            }
        }
        db.abandon();
    });
    let cut = rig.power.is_off();
    let in_cleaning = held.lock().unwrap().take().is_some_and(|db| {
        let s = db.store_stats()[0].1.clone();
        std::mem::forget(db);
        s.cleaning_passes > s.cleaning_passes_finished
    });
    rig.power.arm(None);
    rig.crash();
    let acked = acked.load(std::sync::atomic::Ordering::SeqCst);
    let (version, upto) = if acked == 0 {
        (0, ROWS)
    } else {
        let last = acked - 1;
        (last / ROWS, last % ROWS + 1)
    };
    // Rows after the last acknowledged one may hold it or not (in doubt):
    // check only what was acknowledged.
    let devices = rig.devices();
    run(move || {
        let db = Database::open_with(&config(cleaning), devices).unwrap();
        let t = db.table("t").unwrap();
        let mut txn = db.begin().unwrap();
        for n in 0..ROWS {
            let i = scattered(n);
            let got = txn.get(&t, &key(i)).unwrap().expect("row present");
            let v: u32 = std::str::from_utf8(&got[..6]).unwrap().parse().unwrap();
            let floor = acknowledged(n, upto, version);
            assert!(
                v == floor || v == floor + 1,
                "row {i}: version {v}, acknowledged {floor}"
            );
            assert_eq!(got, value(i, v));
        }
        txn.commit().unwrap();
        assert_verified(&db);
        db.close().unwrap();
    });
    assert!(rig.checker.violations().is_empty());
    CutRun { cut, in_cleaning }
}

#[test]
fn power_cuts_during_cleaning_lose_nothing_acknowledged() {
    // Data writes spread over the runs; some land inside cleaning passes
    // (begun and not finished when the power went).
    let (mut cuts, mut in_cleaning) = (0, 0);
    for nth in (5..=400).step_by(5) {
        for cleaning in [Cleaning::Greedy, Cleaning::CostBenefit] {
            let run = cut_and_recover(IoEvent::DataWrite, nth, cleaning);
            cuts += u32::from(run.cut);
            in_cleaning += u32::from(run.in_cleaning);
        }
    }
    eprintln!("{cuts} runs cut, {in_cleaning} of them inside a cleaning pass");
    assert!(cuts >= 100, "only {cuts} runs were cut");
    assert!(in_cleaning >= 1, "no cut landed inside a cleaning pass");
}

#[test]
fn power_cuts_during_map_checkpoints_lose_nothing_acknowledged() {
    // Every store flush is part of a map checkpoint (before its write, or
    // after it): cut at each of several.
    let mut cuts = 0;
    for nth in [3, 8, 15, 22, 41] {
        cuts += u32::from(cut_and_recover(IoEvent::DataFlush, nth, Cleaning::Greedy).cut);
    }
    assert!(cuts >= 4, "only {cuts} runs were cut");
}

#[test]
fn cleaning_runs_in_the_cut_runs() {
    // The device of the cut runs, without a cut: cleaning happens, so the
    // cuts above land among cleaning's writes.
    let rig = rig(FaultPlan::none(5), SMALL_BYTES);
    load(&rig, Cleaning::Greedy);
    let (mut cleaned, mut maps) = (0, 0);
    for version in 1..=3 {
        let (c, _, m) = update_all(&rig, Cleaning::Greedy, version, 20);
        cleaned += c;
        maps += m;
    }
    assert!(
        cleaned > 0 && maps > 0,
        "cleaned {cleaned}, map checkpoints {maps}"
    );
    let _ = Error::SpaceFull(String::new());
}

/// Write-through (`write_through`): every page written back goes to the
/// device at once as a partial segment of its own, its summary block with
/// it, and every row reads back after reopening.
#[test]
fn write_through_writes_each_page_as_its_own_partial_segment() {
    let devices = rig(FaultPlan::none(3), DATA_BYTES).devices();
    let (pages, requests, bytes) = run(move || {
        let mut config = config(Cleaning::Greedy);
        config.data[0].write_through = true;
        let db = Database::open_with(&config, devices.clone()).unwrap();
        let t = db.create_table(TableSpec::bytes("t")).unwrap();
        let before = db.store_stats()[0].1.clone();
        commit_each(&db, &t, 0..ROWS, key, |i| value(i, 0));
        let after = db.store_stats()[0].1.clone();
        db.close().unwrap();
        let db = Database::open_with(&config, devices).unwrap();
        let t = db.table("t").unwrap();
        let mut txn = db.begin().unwrap();
        for i in 0..ROWS {
            assert_eq!(txn.get(&t, &key(i)).unwrap(), Some(value(i, 0)), "row {i}");
        }
        txn.commit().unwrap();
        (
            after.pages_written - before.pages_written,
            after.device_writes - before.device_writes,
            after.device_bytes_written - before.device_bytes_written,
        )
    });
    assert!(pages > 0);
    assert!(requests >= pages, "{requests} requests for {pages} pages");
    assert!(
        bytes >= 2 * pages * PAGE as u64,
        "{bytes} bytes for {pages} pages"
    );
}
