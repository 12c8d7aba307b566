//! Tests of the log: round trips, group commit, sectors, tail rewrites.

use std::sync::Arc;

use flashlab_devices::DeviceRef;
use flashlab_devices::fault::{FaultPlan, FaultyDevice, Role};
use flashlab_devices::memory::MemoryDevice;
use flashlab_runtime::{Sim, SimConfig};

use super::*;
use crate::wal::record::{PageRedo, Undo};

fn memory_log() -> DeviceRef {
    Arc::new(MemoryDevice::new("log", 64 << 20))
}

fn sim<T: Send + 'static>(f: impl FnOnce(flashlab_runtime::Rt) -> T + Send + 'static) -> T {
    Sim::run(SimConfig::default(), f)
        .expect("sim")
        .0
        .finished()
        .expect("finished")
}

fn all_records(wal: &Wal) -> Vec<LogRecord> {
    let mut reader = wal.reader(wal.start_lsn());
    std::iter::from_fn(|| reader.next_record().unwrap()).collect()
}

/// What recovery's analysis does: read to the end, look past it.
fn scan(device: &DeviceRef) -> Result<(Vec<u64>, LogEnd)> {
    let master = Wal::read_master(device)?.expect("master");
    let layout = Wal::layout_of(device, &master)?;
    let mut reader = LogReader::new(device.clone(), layout, master.start_lsn, None);
    let mut txns = Vec::new();
    while let Some(record) = reader.next_record()? {
        txns.push(record.txn);
    }
    let beyond = reader.check_beyond_end(1 << 16)?;
    Ok((
        txns,
        LogEnd {
            end_lsn: reader.end_lsn(),
            last_record_lsn: reader.last_record_lsn().unwrap_or(0),
            beyond,
        },
    ))
}

/// A new log on a memory device of `bytes`: the memory (to crash), the
/// device, and the log.
fn memory_wal(bytes: u64) -> (Arc<MemoryDevice>, DeviceRef, Arc<Wal>) {
    let memory = Arc::new(MemoryDevice::new("log", bytes));
    let device: DeviceRef = memory.clone();
    let wal = Wal::create(device.clone(), WalConfig::default(), 0, None).unwrap();
    (memory, device, wal)
}

/// The log on `device` resumed at `end`, as recovery resumes it.
fn resumed(device: &DeviceRef, end: &LogEnd) -> Arc<Wal> {
    let master = Wal::read_master(device).unwrap().unwrap();
    Wal::resume(device.clone(), WalConfig::default(), master, end).unwrap()
}

/// A 4 MB memory log with `n` commits, each forced; the end of each.
fn log_with_commits(n: u64) -> (Arc<MemoryDevice>, DeviceRef, Arc<Wal>, Vec<u64>) {
    let (memory, device, wal) = memory_wal(4 << 20);
    let ends = (1..=n).map(|txn| commit(&wal, txn)).collect();
    (memory, device, wal, ends)
}

fn commit(wal: &Wal, txn: u64) -> u64 {
    let (_, end) = wal.append(txn, 0, Body::Commit { commit_ts: txn }).unwrap();
    wal.flush_to(end).unwrap();
    end
}

#[test]
fn appended_records_read_back_after_a_force() {
    sim(|_| {
        let wal = Wal::create(memory_log(), WalConfig::default(), 0, None).unwrap();
        let mut lsns = Vec::new();
        for i in 0..100u64 {
            let (lsn, end) = wal.append(i, 0, Body::Commit { commit_ts: i }).unwrap();
            lsns.push(lsn);
            wal.flush_to(end).unwrap();
        }
        let got: Vec<u64> = all_records(&wal).iter().map(|r| r.lsn).collect();
        assert_eq!(got, lsns);
        let stats = wal.stats();
        assert_eq!(stats.writes, 100);
        assert_eq!(stats.commits_forced, 100);
        // Each commit record is 49 bytes: most forces rewrite the tail sector.
        assert!(stats.tail_rewrites >= 85, "{stats:?}");
        assert_eq!(
            stats.avg_write_sectors(),
            1.0 + (stats.sectors_written - 100) as f64 / 100.0
        );
        wal.check();
    });
}

#[test]
fn unforced_records_are_lost_by_a_crash_and_the_log_resumes() {
    sim(|_| {
        let (memory, device, wal) = memory_wal(64 << 20);
        let durable_end = commit(&wal, 1);
        wal.append(2, 0, Body::Commit { commit_ts: 2 }).unwrap();
        memory.crash();
        let (txns, end) = scan(&device).unwrap();
        assert_eq!(txns, vec![1]);
        assert_eq!(end.end_lsn, durable_end);
        // Resume mid-sector: the next force rewrites the sector with both records.
        let wal = resumed(&device, &end);
        commit(&wal, 3);
        memory.crash();
        assert_eq!(scan(&device).unwrap().0, vec![1, 3]);
    });
}

/// The log wraps around its region lap after lap once checkpoints move its
/// start, and never grows past its device.
#[test]
fn the_log_is_recycled_and_bounded() {
    sim(|_| {
        let (memory, device, wal) = memory_wal(1 << 20);
        let mut last = 0;
        for txn in 1..=60_500u64 {
            commit(&wal, txn);
            if txn % 1000 == 0 {
                let begin = wal.checkpoint_begin().unwrap();
                wal.flush_all().unwrap();
                wal.write_master(begin.begin_lsn, begin.start_lsn).unwrap();
                last = txn;
            }
        }
        let stats = wal.stats();
        assert!(stats.wraps >= 2, "{stats:?}");
        assert_eq!(stats.log_full, 0);
        memory.crash();
        let (txns, end) = scan(&device).unwrap();
        // From the last checkpoint's begin record to the end.
        assert_eq!(last, 60_000);
        let mut expected = vec![0];
        expected.extend(60_001..=60_500);
        assert_eq!(txns, expected);
        assert_eq!(end.end_lsn, wal.end_lsn());
    });
}

/// An update record of transaction `txn` with a 200-byte before-image.
fn small_update(txn: u64) -> Body {
    Body::Update {
        undo: Some(record::Undo {
            space: 0,
            root: 1,
            key: vec![1; 8],
            before: Some(vec![txn as u8; 200]),
        }),
        redo: Vec::new(),
    }
}

/// A log of 1 MB with no checkpoints.
fn small_log() -> Arc<Wal> {
    let device: DeviceRef = Arc::new(MemoryDevice::new("log", 1 << 20));
    Wal::create(device, WalConfig::default(), 0, None).unwrap()
}

/// Append updates of `txn` until the log refuses one; that refusal.
fn fill_log(wal: &Wal, txn: u64) -> Error {
    loop {
        if let Err(e) = wal.append(txn, 0, small_update(txn)) {
            return e;
        }
    }
}

/// Without checkpoints the log fills and says what holds it; records that
/// finish work (commit, abort, compensation) still fit in the reserve.
#[test]
fn a_full_log_refuses_new_work_but_keeps_a_reserve() {
    sim(|_| {
        let wal = small_log();
        wal.append(1, 0, small_update(1)).unwrap();
        let err = fill_log(&wal, 2);
        assert!(
            matches!(err, Error::LogFull(_)) && err.is_retryable(),
            "{err}"
        );
        assert!(
            err.to_string().contains("transaction 1 started at LSN"),
            "{err}"
        );
        // Compensation and abort records of work begun still fit.
        for _ in 0..100 {
            wal.append(
                2,
                0,
                Body::Compensation {
                    undo_next: 0,
                    redo: Vec::new(),
                },
            )
            .unwrap();
        }
        wal.append(2, 0, Body::Abort).unwrap();
        wal.append(1, 0, Body::Commit { commit_ts: 1 }).unwrap();
        wal.flush_all().unwrap();
        wal.check();
        assert!(wal.stats().log_full >= 1);
    });
}

/// A full log whose start no open transaction holds names the oldest open
/// transaction anyway: a checkpoint can free the log only up to its start.
#[test]
fn a_full_log_names_the_oldest_open_transaction() {
    sim(|_| {
        let wal = small_log();
        // Transaction 1 commits at the log's start; 2 then fills the log.
        wal.append(1, 0, small_update(1)).unwrap();
        wal.append(1, 0, Body::Commit { commit_ts: 1 }).unwrap();
        let err = fill_log(&wal, 2);
        let text = err.to_string();
        assert!(matches!(err, Error::LogFull(_)), "{text}");
        assert!(
            text.contains("waits for a checkpoint")
                && text.contains("oldest open transaction 2 started"),
            "{text}"
        );
    });
}

/// A log of 400 forced commits in which `damage` rewrites the sector
/// holding the end of the 200th, crashed and scanned as recovery would:
/// that sector's offset and the scan's refusal.
fn refusal_of_damage_mid_log(damage: fn(&mut [u8])) -> (u64, Error) {
    let (memory, device, wal, ends) = log_with_commits(400);
    let layout = wal.layout();
    let at = layout.offset_of_sector(layout.sector_of(ends[199]));
    let mut sector = vec![0u8; 512];
    device.read(at, &mut sector).unwrap();
    damage(&mut sector);
    device.write(at, &sector).unwrap();
    device.flush().unwrap();
    memory.crash();
    (at, scan(&device).unwrap_err())
}

/// One flipped bit before the durable end is damage, named by LSN and
/// offset: never an end of the log (a reader that took any bad record for
/// the end would resume the log over acknowledged commits).
#[test]
fn regression_a_flipped_bit_in_the_durable_log_is_refused_not_truncated() {
    let (at, err) = sim(|_| refusal_of_damage_mid_log(|sector| sector[100] ^= 0x04));
    assert!(matches!(err, Error::LogDamaged { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("checksum") && text.contains(&format!("offset {at}")),
        "{text}"
    );
}

/// A lost (or misdirected) write in the middle of the durable log leaves an
/// older sector there (here: never written); a later sector proves the log
/// was durable past it.
#[test]
fn a_lost_write_before_the_durable_end_is_damage() {
    let (_, err) = sim(|_| refusal_of_damage_mid_log(|sector| sector.fill(0)));
    assert!(
        err.to_string()
            .contains("a write before the durable end was lost"),
        "{err}"
    );
}

/// Sectors of an unfinished force that landed past the end are erased
/// when the log resumes, so they can never follow new sectors.
#[test]
fn leftovers_of_an_unfinished_force_are_erased_on_resume() {
    sim(|_| {
        let (memory, device, wal, _) = log_with_commits(50);
        let layout = wal.layout();
        let end_before = wal.end_lsn();
        let tail = layout.offset_of_sector(layout.sector_of(end_before));
        let mut old_tail = vec![0u8; 512];
        device.read(tail, &mut old_tail).unwrap();
        // One force of 30 commits (durable LSN in its sectors: end_before).
        for txn in 51..=80 {
            wal.append(txn, 0, Body::Commit { commit_ts: txn }).unwrap();
        }
        wal.flush_all().unwrap();
        // As if a crash kept the force's later sectors but not its first two.
        device.write(tail, &old_tail).unwrap();
        device.write(tail + 512, &vec![0u8; 512]).unwrap();
        let (txns, end) = scan(&device).unwrap();
        assert_eq!(txns, (1..=50).collect::<Vec<_>>());
        assert_eq!(end.end_lsn, end_before);
        assert!(end.beyond.leftovers.len() >= 2, "{:?}", end.beyond);
        let wal = resumed(&device, &end);
        commit(&wal, 81);
        memory.crash();
        let (txns, end) = scan(&device).unwrap();
        assert_eq!(txns.last(), Some(&81));
        assert_eq!(txns.len(), 51);
        assert!(end.beyond.leftovers.is_empty());
    });
}

#[test]
fn concurrent_committers_share_forces() {
    let stats = sim(|rt| {
        // Every request 1 ms late: forces take long enough to be shared.
        let slow = FaultPlan {
            spike_ppm: 1_000_000,
            spike_ns: 1_000_000,
            ..FaultPlan::none(1)
        };
        let wal = Wal::create(faulty_log(64 << 20, slow), WalConfig::default(), 0, None).unwrap();
        let handles: Vec<_> = (0..16u64)
            .map(|client| {
                let wal = wal.clone();
                rt.spawn(&format!("client{client}"), move || {
                    for i in 0..10 {
                        let (_, end) = wal
                            .append(client, 0, Body::Commit { commit_ts: i })
                            .unwrap();
                        wal.commit_wait(end).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join();
        }
        wal.stats()
    });
    assert_eq!(stats.commits_forced, 160);
    assert!(
        stats.writes < 40,
        "16 clients should share forces: {stats:?}"
    );
    assert!(stats.commits_per_write() > 4.0, "{stats:?}");
}

#[test]
fn a_failed_flush_stops_the_log_for_good() {
    sim(|_| {
        // create() would flush a master record, so start from an empty log.
        let master = Master {
            start_lsn: 488,
            salt: 1,
            sector_bytes: 512,
            capacity_bytes: 1 << 20,
            ..Master::default()
        };
        let end = LogEnd {
            end_lsn: 488,
            last_record_lsn: 0,
            beyond: BeyondEnd::default(),
        };
        // Every flush fails, as an fsync error would.
        let failing = FaultPlan {
            flush_error_ppm: 1_000_000,
            ..FaultPlan::none(1)
        };
        let device = faulty_log(1 << 20, failing);
        let wal = Wal::resume(device, WalConfig::default(), master, &end).unwrap();
        let (_, end) = wal.append(1, 0, Body::Commit { commit_ts: 1 }).unwrap();
        let err = wal.flush_to(end).unwrap_err();
        assert!(matches!(err, Error::LogFailed(_)), "{err}");
        assert!(matches!(
            wal.append(2, 0, Body::Abort).unwrap_err(),
            Error::LogFailed(_)
        ));
        assert!(matches!(
            wal.flush_to(end).unwrap_err(),
            Error::LogFailed(_)
        ));
    });
}

/// A memory log device of `bytes` behind the fault layer, with `plan`.
fn faulty_log(bytes: u64, plan: FaultPlan) -> DeviceRef {
    let memory = Arc::new(MemoryDevice::new("log", bytes));
    Arc::new(FaultyDevice::new(memory, Role::Log, plan))
}

/// A change of page `id` writing four `byte`s at `offset` (an image: on a
/// zeroed page).
fn four_bytes(id: PageId, image: bool, offset: u32, byte: u8) -> Body {
    Body::Update {
        undo: None,
        redo: vec![record::PageRedo {
            page: id,
            image,
            ranges: vec![(offset, vec![byte; 4])],
        }],
    }
}

/// A new log for changes of page `id`, and a maker of those changes:
/// [`four_bytes`] of `id`.
fn log_for_page(id: PageId) -> (Arc<Wal>, impl Fn(bool, u32, u8) -> Body) {
    let wal = Wal::create(memory_log(), WalConfig::default(), 0, None).unwrap();
    (wal, move |image, offset, byte| {
        four_bytes(id, image, offset, byte)
    })
}

/// A page is rebuilt from its image and the changes after it, and with a
/// `before_lsn` (an In-Page Logging space's L* during a restart without
/// redo) from the records before it only, never past it.
#[test]
fn a_page_is_rebuilt_from_its_image_and_stops_before_the_given_lsn() {
    sim(|_| {
        let id = PageId::new(0, 7);
        let (wal, change) = log_for_page(id);
        let (first, _) = wal.append(1, 0, change(true, 100, 0xA1)).unwrap();
        let (second, _) = wal.append(1, first, change(false, 200, 0xB2)).unwrap();
        let (third, _) = wal.append(1, second, change(false, 100, 0xC3)).unwrap();
        wal.append(1, third, Body::Commit { commit_ts: 1 }).unwrap();
        wal.flush_all().unwrap();
        let (whole, last) = wal.rebuild_page(id, 512, None).unwrap();
        assert_eq!(
            (&whole[100..104], &whole[200..204], last),
            (&[0xC3; 4][..], &[0xB2; 4][..], third)
        );
        let (upto, last) = wal.rebuild_page(id, 512, Some(third)).unwrap();
        assert_eq!(
            (&upto[100..104], &upto[200..204], last),
            (&[0xA1; 4][..], &[0xB2; 4][..], second)
        );
        assert_eq!(
            crate::page::lsn(&upto),
            third,
            "the page LSN is the end of its last record"
        );
        let err = wal.rebuild_page(id, 512, Some(first)).unwrap_err();
        assert!(err.to_string().contains("holds no image"), "{err}");
    });
}

/// A restart without redo left a hole `[L*, restart record)` whose records
/// never reached the pages of that In-Page Logging space (REC-4): a repair
/// during a later restart (`before_lsn` given) skips them, and only for
/// that space; a repair of any other page, which redo brought forward,
/// applies them.
#[test]
fn a_repair_at_an_ipl_restart_skips_an_earlier_restarts_hole() {
    sim(|_| {
        let id = PageId::new(0, 9);
        let (wal, change) = log_for_page(id);
        wal.append(1, 0, change(true, 100, 0xA1)).unwrap();
        let (hole, _) = wal.append(1, 0, change(false, 200, 0xB2)).unwrap();
        // Another space's restart leaves this space's pages alone.
        wal.append(
            0,
            0,
            Body::Restart {
                space: 1,
                from_lsn: 0,
            },
        )
        .unwrap();
        wal.append(
            0,
            0,
            Body::Restart {
                space: 0,
                from_lsn: hole,
            },
        )
        .unwrap();
        wal.append(2, 0, change(false, 100, 0xC3)).unwrap();
        let (_, end) = wal.append(2, 0, Body::Commit { commit_ts: 2 }).unwrap();
        wal.flush_all().unwrap();
        let (ipl, _) = wal.rebuild_page(id, 512, Some(end)).unwrap();
        assert_eq!(
            (&ipl[100..104], &ipl[200..204]),
            (&[0xC3; 4][..], &[0; 4][..])
        );
        let (other, _) = wal.rebuild_page(id, 512, None).unwrap();
        assert_eq!(
            (&other[100..104], &other[200..204]),
            (&[0xC3; 4][..], &[0xB2; 4][..])
        );
    });
}

/// A record built for an image horizon that a checkpoint has moved is not
/// appended: its body comes back whole (the undo with it), and the caller
/// appends it with redo for the new horizon.
#[test]
fn a_record_for_a_moved_horizon_comes_back_whole() {
    sim(|_| a_record_for_a_moved_horizon_comes_back_whole_in_a_runtime());
}

fn a_record_for_a_moved_horizon_comes_back_whole_in_a_runtime() {
    let wal = Wal::create(memory_log(), WalConfig::default(), 0, None).unwrap();
    commit(&wal, 1);
    let old_horizon = wal.image_horizon();
    wal.checkpoint_begin().unwrap();
    let horizon = wal.image_horizon();
    assert_ne!(horizon, old_horizon, "the checkpoint moved the horizon");
    let undo = Undo {
        space: 1,
        root: 2,
        key: b"key".to_vec(),
        before: Some(b"before".to_vec()),
    };
    let redo = |image| {
        vec![PageRedo {
            page: PageId::new(1, 3),
            image,
            ranges: vec![(64, vec![7; 8])],
        }]
    };
    let body = Body::Update {
        undo: Some(undo.clone()),
        redo: redo(false),
    };
    let end_before = wal.end_lsn();
    let back = wal
        .append_for_horizon(old_horizon, 5, 0, body.clone())
        .unwrap()
        .expect_err("a moved horizon appends nothing");
    assert_eq!(back, body);
    assert_eq!(wal.end_lsn(), end_before, "nothing was appended");
    let again = back.with_redo(redo(true));
    let (lsn, end) = wal
        .append_for_horizon(horizon, 5, 0, again)
        .unwrap()
        .expect("the horizon in force appends");
    wal.flush_to(end).unwrap();
    let appended = all_records(&wal)
        .into_iter()
        .find(|r| r.lsn == lsn)
        .unwrap();
    assert_eq!(
        appended.body,
        Body::Update {
            undo: Some(undo),
            redo: redo(true),
        }
    );
}

/// WAL-6: a record with page changes is pending for a checkpoint from its
/// append until its mini-transaction says it installed its pages, and the
/// checkpoint names the oldest pending one; a record without page changes
/// is never pending.
#[test]
fn a_checkpoint_names_the_oldest_record_not_yet_installed() {
    sim(|_| a_checkpoint_names_the_oldest_record_not_yet_installed_in_a_runtime());
}

fn a_checkpoint_names_the_oldest_record_not_yet_installed_in_a_runtime() {
    let wal = Wal::create(memory_log(), WalConfig::default(), 0, None).unwrap();
    let update = |page_no| Body::Update {
        undo: None,
        redo: vec![PageRedo {
            page: PageId::new(1, page_no),
            image: false,
            ranges: vec![(64, vec![7; 8])],
        }],
    };
    let (first, _) = wal.append(0, 0, update(3)).unwrap();
    let (second, _) = wal.append(0, 0, update(4)).unwrap();
    let (bare, _) = wal.append(0, 0, Body::Abort).unwrap();
    assert_eq!(wal.checkpoint_begin().unwrap().pending_lsn, first);
    wal.installed(bare);
    wal.installed(first);
    let start = wal.checkpoint_begin().unwrap();
    assert_eq!(start.pending_lsn, second);
    wal.installed(second);
    assert_eq!(wal.checkpoint_begin().unwrap().pending_lsn, 0);
    wal.wait_installed_before(start.begin_lsn).unwrap();
}
