//! Named regression tests for the log's defects of issue 10 (a log you can
//! trust for ever). Each test states the promise and failed on the code
//! before the fix. Elsewhere: the log filling up for good
//! (`a_database_whose_log_filled_up_can_still_be_opened` in
//! review_findings.rs, `the_log_is_recycled_and_bounded` in the log's unit
//! tests), a flipped bit in the durable log at the log level
//! (`regression_a_flipped_bit_in_the_durable_log_is_refused_not_truncated`).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use flashlab_devices::memory::MemoryDevice;
use flashlab_devices::{Device, DeviceError, DeviceRef};
use flashlab_engine::wal::{Body, Wal, WalConfig};
use flashlab_engine::{DataSpaceConfig, Database, DbConfig, Devices, Error, TableSpec};
use flashlab_runtime::{NS_PER_MS, RealRuntime, Rt, Sim, SimConfig};

use common::sim;

/// Commit one record after another as client `c` until `stop` is set or
/// the log fails, running `pause` between commits.
fn commit_until_stopped(wal: &Wal, c: u64, stop: &AtomicBool, pause: impl Fn()) {
    let mut i = 0;
    while !stop.load(Ordering::SeqCst) {
        i += 1;
        let Ok((_, end)) = wal.append(c + 1, 0, Body::Commit { commit_ts: i }) else {
            return;
        };
        if wal.flush_to(end).is_err() {
            return;
        }
        pause();
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

fn memory_config() -> DbConfig {
    let mut config = DbConfig::simple("memory", "memory", 4096, 64 * 4096);
    config.checkpoint_interval_ns = 0;
    config
}

/// Issue 10, defect 2: 400 commits acknowledged, one bit flipped halfway
/// through the durable log, power cut. Taken for the log's end, the flip
/// would reopen the database with no error and 191 of the 400 rows, and
/// the log would resume over the rest; the open is refused instead,
/// naming the LSN and the device offset.
#[test]
fn regression_one_flipped_log_bit_refuses_the_open_instead_of_losing_commits() {
    sim(|_| {
        let config = memory_config();
        let log = Arc::new(MemoryDevice::new("log", 16 << 20));
        let mut devices = Devices::from_presets(&config).unwrap();
        devices.log = log.clone();
        let db = Database::open_with(&config, devices.clone()).unwrap();
        let t = db.create_table(TableSpec::bytes("t")).unwrap();
        let start = db.wal().flushed_lsn();
        for i in 0..400 {
            let mut txn = db.begin().unwrap();
            txn.put(&t, &key(i), &[7u8; 40]).unwrap();
            txn.commit().unwrap();
        }
        let end = db.wal().flushed_lsn();
        let layout = db.wal().layout();
        drop(db);
        let middle = layout.offset_of((start + end) / 2);
        let at = middle - middle % 512;
        let mut sector = vec![0u8; 512];
        log.read(at, &mut sector).unwrap();
        sector[300] ^= 0x20;
        log.write(at, &sector).unwrap();
        log.flush().unwrap();
        log.crash();
        let err = Database::open_with(&config, devices)
            .err()
            .expect("the open must be refused");
        assert!(matches!(err, Error::LogDamaged { .. }), "{err}");
        assert!(
            err.to_string().contains(&format!("device offset {at}")),
            "{err}"
        );
    });
}

/// A log device whose flushes fail once `failing` is set.
struct FailingLog {
    inner: MemoryDevice,
    failing: AtomicBool,
    /// Flushes issued after the first failed one (WAL-4 forbids any).
    flushes_after_failure: AtomicU64,
    failed_once: AtomicBool,
    /// Fail the flush that follows a master-record write.
    fail_master: bool,
    master_written: AtomicBool,
    /// Simulated time a failing flush takes (0: none), so that committers
    /// queue behind it in the simulated world.
    fail_delay_ns: u64,
}

impl FailingLog {
    fn new(fail_master: bool) -> FailingLog {
        FailingLog {
            inner: MemoryDevice::new("log", 16 << 20),
            failing: AtomicBool::new(false),
            flushes_after_failure: AtomicU64::new(0),
            failed_once: AtomicBool::new(false),
            fail_master,
            master_written: AtomicBool::new(false),
            fail_delay_ns: 0,
        }
    }
}

impl flashlab_devices::Wrapper for FailingLog {
    fn inner(&self) -> &dyn Device {
        &self.inner
    }
    fn write(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        if offset_bytes < 4096 && self.failing.load(Ordering::SeqCst) {
            self.master_written.store(true, Ordering::SeqCst);
        }
        self.inner.write(offset_bytes, data)
    }
    fn flush(&self) -> Result<(), DeviceError> {
        if self.failed_once.load(Ordering::SeqCst) {
            self.flushes_after_failure.fetch_add(1, Ordering::SeqCst);
        }
        let fail = self.failing.load(Ordering::SeqCst)
            && (!self.fail_master || self.master_written.swap(false, Ordering::SeqCst));
        if fail {
            self.failed_once.store(true, Ordering::SeqCst);
            // Widen the window in which a buggy log could hand the flusher
            // role on before recording the failure.
            std::thread::yield_now();
            if self.fail_delay_ns > 0 {
                Rt::current().sleep(self.fail_delay_ns);
            }
            return Err(DeviceError::FlushFailed {
                device: "log".into(),
                problem: "injected".into(),
            });
        }
        self.inner.flush()
    }
}

/// Issue 10, defect 3: a commit that cannot be logged must not return its
/// error, keep the transaction's locks for ever and leave the database
/// accepting work (a second writer of the same key would stay blocked).
/// The database fails: the waiter is woken with the error, and new
/// transactions are refused.
#[test]
fn regression_a_commit_that_cannot_be_logged_fails_the_database_and_wakes_waiters() {
    sim(|rt| {
        let config = memory_config();
        let log = Arc::new(FailingLog::new(false));
        let mut devices = Devices::from_presets(&config).unwrap();
        devices.log = log.clone();
        let db = Database::open_with(&config, devices).unwrap();
        let t = db.create_table(TableSpec::bytes("t")).unwrap();
        let mut first = db.begin().unwrap();
        first.put(&t, &key(1), b"first").unwrap();
        let (db2, t2) = (db.clone(), t.clone());
        let waiter = rt.spawn("second writer", move || {
            let mut second = db2.begin().unwrap();
            second.put(&t2, &key(1), b"second")
        });
        rt.sleep(NS_PER_MS);
        log.failing.store(true, Ordering::SeqCst);
        let err = first.commit().unwrap_err();
        assert!(matches!(err, Error::LogFailed(_)), "{err}");
        let started = rt.now_ns();
        let waited = waiter.join();
        assert!(
            matches!(waited, Err(Error::LogFailed(_))),
            "the second writer must be woken with the failure: {waited:?}"
        );
        assert!(rt.now_ns() - started < 1_000 * NS_PER_MS);
        assert!(matches!(db.begin().err(), Some(Error::LogFailed(_))));
        db.abandon();
    });
}

/// Issue 10, defect 4: undo goes through the B+tree, can split a page and
/// so could hit a full data space, stopping the rollback half-way. Undo
/// steps may allocate from a reserve that nothing else may use.
#[test]
fn regression_a_rollback_never_fails_for_want_of_data_space() {
    sim(|_| {
        let mut config = memory_config();
        config.data[0] = DataSpaceConfig {
            capacity_bytes: Some(160 * 4096),
            ..config.data[0].clone()
        };
        let db = Database::open(&config).unwrap();
        let t = db.create_table(TableSpec::bytes("t")).unwrap();
        let row = [9u8; 900];
        let mut load = db.begin().unwrap();
        for i in (0..120).map(|i| i * 2) {
            load.put(&t, &key(i), &row).unwrap();
        }
        load.commit().unwrap();
        // One transaction deletes 30 rows...
        let mut deleter = db.begin().unwrap();
        for i in (0..30).map(|i| i * 8) {
            assert!(deleter.delete(&t, &key(i)).unwrap());
        }
        // ... another takes the room they leave in their leaves, then every
        // page there is.
        let mut filler = db.begin().unwrap();
        for i in (0..30).map(|i| i * 8) {
            let mut next = key(i);
            next.push(b'a');
            filler.put(&t, &next, &row).unwrap();
        }
        let mut filled = 0;
        for i in 0..100_000 {
            match filler.put(&t, &key(100_000 + i), &row) {
                Ok(()) => filled += 1,
                Err(e) if e.is_space_full() => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert!(filled > 10, "{filled}");
        filler.commit().unwrap();
        // Undoing the deletes re-inserts 30 rows into full pages: splits.
        deleter.abort().unwrap();
        let mut check = db.begin().unwrap();
        for i in (0..120).map(|i| i * 2) {
            assert!(check.get(&t, &key(i)).unwrap().is_some(), "row {i}");
        }
        drop(check);
        db.close().unwrap();
    });
}

/// Issue 10, defect 5: the master record's writer gave up the flusher
/// role and woke the committers before it recorded its failed flush; a
/// committer could take the role in that window and flush the device
/// again, after a failed flush (WAL-4). Real threads hammer commits while
/// the master record is written; its flush fails once; no flush may follow.
#[test]
fn regression_no_flush_follows_a_failed_master_record_flush() {
    let rt = RealRuntime::new(7);
    let _enter = RealRuntime::enter(&rt);
    for round in 0..40 {
        let log = Arc::new(FailingLog::new(true));
        let device: DeviceRef = log.clone();
        let wal = Wal::create(device, WalConfig::default(), 0, None).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let committers: Vec<_> = (0..6u64)
            .map(|c| {
                let (wal, stop) = (wal.clone(), stop.clone());
                rt.spawn(&format!("committer{c}"), move || {
                    commit_until_stopped(&wal, c, &stop, || {})
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_micros(200));
        log.failing.store(true, Ordering::SeqCst);
        let begin = wal
            .checkpoint_begin()
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        wal.flush_all()
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        let _ = wal.write_master(begin.begin_lsn, begin.start_lsn);
        std::thread::sleep(std::time::Duration::from_micros(500));
        stop.store(true, Ordering::SeqCst);
        for c in committers {
            c.join();
        }
        assert!(wal.failed().is_some(), "round {round}");
        assert_eq!(
            log.flushes_after_failure.load(Ordering::SeqCst),
            0,
            "round {round}: the log device was flushed after a failed flush"
        );
    }
}

/// A long transaction holds the log: new work gets a retryable "log full"
/// naming it, readers still read, commits that finish work still fit; once
/// it ends, checkpoints free the log and work goes on; the database
/// reopens with every committed row.
#[test]
fn a_long_transaction_holding_the_log_gets_others_a_retryable_error_naming_it() {
    sim(|rt| {
        let config = memory_config();
        let mut devices = Devices::from_presets(&config).unwrap();
        devices.log = Arc::new(MemoryDevice::new("log", 512 << 10));
        let db = Database::open_with(&config, devices.clone()).unwrap();
        let t = db.create_table(TableSpec::bytes("t")).unwrap();
        let mut long = db.begin().unwrap();
        long.put(&t, &key(0), b"held").unwrap();
        let mut committed = 0u32;
        let err = loop {
            let mut txn = db.begin().unwrap();
            let done = txn
                .put(&t, &key(1 + committed % 100), &[5u8; 200])
                .and_then(|()| txn.commit());
            match done {
                Ok(()) => committed += 1,
                Err(e) => break e,
            }
            assert!(committed < 100_000, "the log never filled");
        };
        assert!(
            matches!(err, Error::LogFull(_)) && err.is_retryable(),
            "{err}"
        );
        assert!(
            err.to_string().contains("started at LSN"),
            "the error names the transaction holding the log: {err}"
        );
        // Readers still read.
        let mut reader = db.begin().unwrap();
        assert!(reader.get(&t, &key(1)).unwrap().is_some());
        drop(reader);
        long.commit().unwrap();
        // The checkpointer, woken by the full log, frees it.
        let mut retried = 0;
        loop {
            let mut txn = db.begin().unwrap();
            match txn.put(&t, &key(1), b"after").and_then(|()| txn.commit()) {
                Ok(()) => break,
                Err(e) if e.is_retryable() && retried < 1000 => {
                    retried += 1;
                    rt.sleep(NS_PER_MS);
                }
                Err(e) => panic!("{e}"),
            }
        }
        drop(db);
        let db = Database::open_with(&config, devices).unwrap();
        let t = db.table("t").unwrap();
        let mut txn = db.begin().unwrap();
        assert_eq!(txn.get(&t, &key(0)).unwrap().as_deref(), Some(&b"held"[..]));
        assert_eq!(
            txn.get(&t, &key(1)).unwrap().as_deref(),
            Some(&b"after"[..])
        );
    });
}

/// In a new database every page's first change is logged as an image (the
/// horizon for images starts at the first LSN, not at the first
/// checkpoint): the pages creation writes (space headers, the catalog) could
/// not be repaired otherwise if a crash tore them before that checkpoint.
/// And a page torn after the last checkpoint is repaired from its image.
#[test]
fn regression_pages_of_a_new_database_are_logged_as_images() {
    sim(|_| {
        let config = memory_config();
        let data = Arc::new(MemoryDevice::new("data", 64 << 20));
        let log = Arc::new(MemoryDevice::new("log", 16 << 20));
        let mut devices = Devices::from_presets(&config).unwrap();
        devices.data = vec![data.clone()];
        devices.log = log.clone();
        let db = Database::open_with(&config, devices.clone()).unwrap();
        let created = db.stats().log;
        assert!(created.page_images >= 2, "creation's pages: {created:?}");
        let first_checkpoint = db.wal().master().checkpoint_lsn;
        let t = db.create_table(TableSpec::bytes("t")).unwrap();
        for i in 0..50 {
            let mut txn = db.begin().unwrap();
            txn.put(&t, &key(i), &[3u8; 100]).unwrap();
            txn.commit().unwrap();
        }
        assert_eq!(
            db.wal().master().checkpoint_lsn,
            first_checkpoint,
            "no checkpoint since"
        );
        db.wal().flush_all().unwrap();
        let stats = db.stats().log;
        assert!(stats.page_images > 0, "{stats:?}");
        db.abandon();
        // Tear page 1 (the catalog's root) as a crash mid-write would.
        let mut page = vec![0u8; 4096];
        data.read(4096, &mut page).unwrap();
        page[2048..].fill(0xEE);
        data.write(4096, &page).unwrap();
        data.flush().unwrap();
        log.crash();
        data.crash();
        let db = Database::open_with(&config, devices).unwrap();
        let t = db.table("t").unwrap();
        let mut txn = db.begin().unwrap();
        for i in 0..50 {
            assert!(txn.get(&t, &key(i)).unwrap().is_some(), "row {i}");
        }
    });
}

/// One simulated round of the defect-5 scenario with `seed`: committers
/// force the log while a checkpoint's master-record write fails its flush.
/// Returns the flushes issued after the failed one (WAL-4 allows none).
fn master_failure_round(seed: u64, preempt: bool, race: bool) -> u64 {
    let log = Arc::new(FailingLog {
        fail_delay_ns: 50_000,
        ..FailingLog::new(true)
    });
    let device: DeviceRef = log.clone();
    let sim = SimConfig {
        seed,
        preempt,
        ..SimConfig::default()
    };
    let outcome = Sim::run(sim, move |rt| {
        let wal = Wal::create(device, WalConfig::default(), 0, None).unwrap();
        wal.reintroduce_master_failure_race(race);
        let stop = Arc::new(AtomicBool::new(false));
        let committers: Vec<_> = (0..6u64)
            .map(|c| {
                let (wal, stop, task_rt) = (wal.clone(), stop.clone(), rt.clone());
                rt.spawn(&format!("committer{c}"), move || {
                    commit_until_stopped(&wal, c, &stop, || task_rt.sleep(1_000 + c * 300))
                })
            })
            .collect();
        rt.sleep(200_000);
        log.failing.store(true, Ordering::SeqCst);
        let begin = wal.checkpoint_begin().unwrap();
        wal.flush_all().unwrap();
        let _ = wal.write_master(begin.begin_lsn, begin.start_lsn);
        rt.sleep(NS_PER_MS);
        stop.store(true, Ordering::SeqCst);
        for c in committers {
            c.join();
        }
        assert!(wal.failed().is_some());
        log.flushes_after_failure.load(Ordering::SeqCst)
    });
    outcome.expect("simulation").0.finished().expect("finished")
}

/// Issue 12: the old defect 5 (above), put back behind a test-only switch,
/// is found by seeded preemption at runtime lock points (SIM-8) within a
/// few seeds, and never without preemption (a task then runs from one
/// block to the next, and the window between giving up the role and
/// recording the failure is never interleaved); the fixed log passes every
/// seed with preemption on.
#[test]
fn seeded_preemption_finds_the_old_master_failure_race() {
    const SEEDS: u64 = 64;
    let found = |preempt: bool, race: bool| {
        (0..SEEDS)
            .filter(|&seed| master_failure_round(seed, preempt, race) > 0)
            .count()
    };
    assert_eq!(found(true, false), 0, "the fixed log, preempted");
    assert_eq!(found(false, true), 0, "the old race, never preempted");
    let with_preemption = found(true, true);
    eprintln!("seeded preemption found the old race in {with_preemption} of {SEEDS} seeds");
    assert!(
        with_preemption > 0,
        "seeded preemption found the old race in none of {SEEDS} seeds"
    );
}

/// DB-5 and WAL-15: a mini-transaction never forces the log while it holds
/// latches. If whichever append found the log buffer full forced it, the
/// append of a mini-transaction included, a row's leaf (and with it every
/// reader and writer of that leaf) would wait for the log device's write
/// and flush, as in the burst of full-page images after a checkpoint
/// (docs/PERFORMANCE-HISTORY.md, "A full log buffer under latches"). So a
/// writer makes room before it latches anything. One transaction writes
/// 4,000 rows (about 30 times the
/// smallest log buffer) with no commit record in between to force it:
/// every force of the full buffer comes before a latch, none under one.
#[test]
fn regression_a_full_log_buffer_is_forced_before_latching_not_under_latches() {
    sim(|_| {
        // A disk's log: each force takes milliseconds, so the buffer fills.
        let mut config = DbConfig::simple("memory", "hdd-2008", 4096, 4096 * 4096);
        config.checkpoint_interval_ns = 0;
        config.wal.buffer_bytes = flashlab_engine::wal::LOG_BUFFER_BYTES_MIN;
        config.wal.durability = flashlab_engine::wal::Durability::NoSync;
        let db = Database::open(&config).unwrap();
        let t = db.create_table(TableSpec::bytes("t")).unwrap();
        let before = db.wal().stats();
        let mut txn = db.begin().unwrap();
        for i in 0..4_000 {
            txn.put(&t, &key(i), &[i as u8; 400]).unwrap();
        }
        txn.commit().unwrap();
        let stats = db.wal().stats().since(&before);
        assert!(
            stats.bytes_appended > 20 * flashlab_engine::wal::LOG_BUFFER_BYTES_MIN as u64,
            "the test must fill the buffer many times: {stats:?}"
        );
        assert!(stats.room_forces > 0, "{stats:?}");
        assert_eq!(stats.latched_forces, 0, "WAL-15: {stats:?}");
        let mut read = db.begin().unwrap();
        for i in (0..4_000).step_by(397) {
            assert_eq!(read.get(&t, &key(i)).unwrap(), Some(vec![i as u8; 400]));
        }
    });
}
