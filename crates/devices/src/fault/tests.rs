use std::sync::Arc;

use flashlab_runtime::{NS_PER_MS, Sim, SimConfig, SimOutcome};

use super::*;
use crate::memory::MemoryDevice;

const PAGE: usize = 2048;

fn memory(name: &str) -> Arc<MemoryDevice> {
    Arc::new(MemoryDevice::new(name, 1 << 20))
}

fn page(lsn: u64, fill: u8) -> Vec<u8> {
    let mut p = vec![fill; PAGE];
    p[PAGE_LSN_OFFSET..PAGE_LSN_OFFSET + 8].copy_from_slice(&lsn.to_le_bytes());
    p
}

/// Run `f` in a small simulation (spikes and power cuts need a runtime).
fn sim<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    Sim::run(SimConfig::default(), move |_| f())
        .unwrap()
        .0
        .finished()
        .unwrap()
}

#[test]
fn zero_plan_is_transparent() {
    let inner = memory("data");
    let dev = FaultyDevice::new(
        inner.clone(),
        Role::Data { page_bytes: PAGE },
        FaultPlan::none(1),
    );
    dev.write(0, &page(0, 7)).unwrap();
    let mut buf = vec![0u8; PAGE];
    dev.read(0, &mut buf).unwrap();
    assert_eq!(buf, page(0, 7));
    dev.flush().unwrap();
    dev.write(PAGE as u64, &page(0, 8)).unwrap();
    dev.crash();
    dev.peek(PAGE as u64, &mut buf);
    assert!(buf.iter().all(|&b| b == 0), "an unflushed write is dropped");
    assert_eq!(dev.counts().crash_dropped, 1);
    assert_eq!(dev.counts().plus(&FaultCounts::default()), dev.counts());
}

#[test]
fn same_seed_same_faults() {
    let run = |seed: u64| {
        let plan = FaultPlan {
            read_flip_ppm: 200_000,
            write_flip_ppm: 200_000,
            misdirect_ppm: 100_000,
            read_error_ppm: 50_000,
            ..FaultPlan::crashes(seed)
        };
        let dev = data_device(plan);
        let mut buf = vec![0u8; PAGE];
        for i in 0..200u64 {
            let _ = dev.write((i % 32) * PAGE as u64, &page(0, i as u8));
            let _ = dev.read(((i * 7) % 32) * PAGE as u64, &mut buf);
        }
        dev.crash();
        (dev.counts(), dev.take_records())
    };
    let (a, ra) = run(5);
    let (b, rb) = run(5);
    assert_eq!(a, b);
    assert_eq!(ra, rb);
    assert!(a.read_flips > 0 && a.write_flips > 0 && a.misdirected_writes > 0);
    assert!(a.read_errors > 0 && a.crash_torn > 0);
    let (c, _) = run(6);
    assert_ne!(a, c, "another seed, other faults");
}

#[test]
fn torn_writes_keep_whole_512_byte_units() {
    let plan = FaultPlan::crash_fates(0, 100, 3);
    // A "checksum": a page is valid if all its bytes are equal.
    let check: PageCheck = Arc::new(|_, image: &[u8]| image.iter().any(|&b| b != image[0]));
    let dev = data_device(plan).with_page_check(check);
    for i in 0..20u64 {
        dev.write(i * PAGE as u64, &page(0, 0xAB)).unwrap();
    }
    dev.crash();
    let records = dev.take_records();
    assert_eq!(records.len(), 20);
    assert_eq!(dev.counts().damaged_pages, 20);
    assert_eq!(dev.counts().damaged_pages_caught, 20);
    for r in records {
        let FaultRecord::Torn {
            offset_bytes,
            kept_bytes,
            len_bytes,
            damaged_pages,
        } = r
        else {
            panic!("{r:?}")
        };
        assert_eq!(damaged_pages, vec![offset_bytes]);
        assert_eq!(kept_bytes % TEAR_UNIT_BYTES, 0);
        assert!(kept_bytes > 0 && kept_bytes < len_bytes);
        let mut buf = vec![0u8; PAGE];
        dev.peek(offset_bytes, &mut buf);
        let kept = kept_bytes as usize;
        assert_eq!(buf[..kept], page(0, 0xAB)[..kept]);
        assert!(buf[kept..].iter().all(|&b| b == 0));
    }
}

/// A memory data device on the fault model.
fn data_device(plan: FaultPlan) -> FaultyDevice {
    FaultyDevice::new(memory("data"), Role::Data { page_bytes: PAGE }, plan)
}

/// A data device whose every read fails (plan seed `seed`), page 0
/// written, and a page buffer.
fn latent_errors_on_page_0(seed: u64) -> (FaultyDevice, Vec<u8>) {
    let plan = FaultPlan {
        read_error_ppm: PPM,
        ..FaultPlan::none(seed)
    };
    let dev = data_device(plan);
    dev.write(0, &page(0, 1)).unwrap();
    (dev, vec![0u8; PAGE])
}

#[test]
fn latent_errors_stick_until_the_sector_is_rewritten() {
    let (dev, mut buf) = latent_errors_on_page_0(1);
    assert!(matches!(
        dev.read(0, &mut buf),
        Err(DeviceError::ReadFailed { .. })
    ));
    dev.set_plan(FaultPlan::none(1));
    assert!(dev.read(0, &mut buf).is_err(), "sticky");
    dev.write(0, &page(0, 2)).unwrap();
    dev.read(0, &mut buf).unwrap();
    assert_eq!(dev.counts().read_errors, 2);
}

/// Regression (IPL media seeds): an erase unit trimmed by a merge kept
/// its latent errors, so slots later left erased (never-written pages)
/// failed every read. Trimming a sector clears its latent error.
#[test]
fn latent_errors_end_when_the_sector_is_trimmed() {
    let (dev, mut buf) = latent_errors_on_page_0(2);
    assert!(dev.read(0, &mut buf).is_err());
    dev.set_plan(FaultPlan::none(2));
    assert!(dev.read(0, &mut buf).is_err(), "sticky");
    dev.trim(0, PAGE as u64).unwrap();
    dev.read(0, &mut buf).unwrap();
}

#[test]
fn flips_and_misdirection_damage_what_they_say() {
    let plan = FaultPlan {
        write_flip_ppm: PPM,
        ..FaultPlan::none(9)
    };
    let dev = data_device(plan);
    dev.write(4 * PAGE as u64, &page(0, 0)).unwrap();
    let Some(FaultRecord::WriteFlip { offset_bytes, bit }) = dev.take_records().pop() else {
        panic!("no flip")
    };
    let mut buf = vec![0u8; PAGE];
    dev.peek(offset_bytes, &mut buf);
    let mut expected = page(0, 0);
    expected[(bit / 8) as usize] ^= 1 << (bit % 8);
    assert_eq!(buf, expected);

    dev.set_plan(FaultPlan {
        misdirect_ppm: PPM,
        ..FaultPlan::none(9)
    });
    dev.write(10 * PAGE as u64, &page(0, 5)).unwrap();
    let Some(FaultRecord::Misdirected {
        intended_bytes,
        landed_bytes,
        ..
    }) = dev.take_records().pop()
    else {
        panic!("no misdirection")
    };
    assert_eq!(intended_bytes, 10 * PAGE as u64);
    assert_ne!(landed_bytes, intended_bytes);
    assert_eq!(landed_bytes % PAGE as u64, 0);
    dev.peek(landed_bytes, &mut buf);
    assert_eq!(buf, page(0, 5));
    dev.peek(intended_bytes, &mut buf);
    assert!(
        buf.iter().all(|&b| b == 0),
        "the intended place kept its old data"
    );
}

#[test]
fn a_failed_flush_orphans_its_writes_and_a_retry_is_counted() {
    let plan = FaultPlan {
        flush_error_ppm: PPM,
        ..FaultPlan::none(2)
    };
    let dev = FaultyDevice::new(memory("log"), Role::Log, plan);
    dev.write(4096, &[9u8; 512]).unwrap();
    assert!(matches!(dev.flush(), Err(DeviceError::FlushFailed { .. })));
    assert!(dev.flush_failed());
    dev.set_plan(FaultPlan::none(2));
    dev.flush().unwrap(); // "succeeds", as Linux's second fsync does
    assert_eq!(dev.counts().flushes_after_failure, 1);
    dev.crash();
    let mut buf = [0u8; 512];
    dev.peek(4096, &mut buf);
    assert!(buf.iter().all(|&b| b == 0), "the orphan was never durable");
    assert!(!dev.flush_failed(), "a restart forgets the failure");
}

#[test]
fn a_full_device_refuses_writes_until_a_crash() {
    let plan = FaultPlan {
        full_after_writes: Some(3),
        ..FaultPlan::none(2)
    };
    let dev = data_device(plan);
    dev.write(0, &page(0, 1)).unwrap();
    dev.write(0, &page(0, 1)).unwrap();
    let err = dev.write(0, &page(0, 1)).unwrap_err();
    assert!(err.is_full(), "{err}");
    assert!(dev.write(0, &page(0, 1)).is_err());
    dev.crash();
    dev.write(0, &page(0, 1)).unwrap();
    assert_eq!(dev.counts().full_errors, 2);
}

#[test]
fn wal_checker_refuses_a_page_ahead_of_the_durable_log() {
    let checker = WalChecker::new();
    let log = FaultyDevice::new(memory("log"), Role::Log, FaultPlan::none(1))
        .with_wal_checker(checker.clone());
    let data = data_device(FaultPlan::none(1)).with_wal_checker(checker.clone());
    // Records up to 4096 + 700 are written but not flushed.
    log.write(4096, &[1u8; 1024]).unwrap();
    let err = data.write(0, &page(4096 + 700, 3)).unwrap_err();
    assert!(err.to_string().contains("WAL-before-data"), "{err}");
    log.flush().unwrap();
    data.write(0, &page(4096 + 700, 3)).unwrap();
    // A tail rewrite of the same bytes plus more does not make 4796 undurable...
    let mut tail = vec![1u8; 1024];
    tail.extend_from_slice(&[2u8; 512]);
    log.write(4096, &tail).unwrap();
    data.write(0, &page(4096 + 1024, 3)).unwrap();
    // ...but a page past the durable end is refused.
    assert!(data.write(0, &page(4096 + 1025, 3)).is_err());
    // Pages never logged (LSN 0) pass.
    data.write(PAGE as u64, &page(0, 0)).unwrap();
    assert_eq!(checker.violations().len(), 2);
    assert_eq!(data.counts().wal_violations, 2);
    assert_eq!(checker.pages_checked(), 5);
}

#[test]
fn wal_checker_after_a_crash_trusts_what_the_media_kept() {
    let checker = WalChecker::new();
    let plan = FaultPlan {
        crash_keep_percent: 100,
        ..FaultPlan::none(1)
    };
    let log = FaultyDevice::new(memory("log"), Role::Log, plan).with_wal_checker(checker.clone());
    let data = data_device(FaultPlan::none(1)).with_wal_checker(checker.clone());
    log.write(4096, &[1u8; 1024]).unwrap();
    log.crash(); // kept: on the media now
    data.write(0, &page(4096 + 1024, 3)).unwrap();
    // New records over old bytes are not durable until flushed.
    log.write(4096 + 512, &[7u8; 512]).unwrap();
    assert!(data.write(0, &page(4096 + 1000, 3)).is_err());
}

#[test]
fn power_cut_at_the_nth_log_flush_blocks_everything_after() {
    let (counts, cut, flushed) = {
        let power = PowerSwitch::new();
        let log_inner = memory("log");
        let log = Arc::new(
            FaultyDevice::new(log_inner.clone(), Role::Log, FaultPlan::crashes(4))
                .with_power(power.clone()),
        );
        power.arm(Some(CutTrigger {
            event: IoEvent::LogFlush,
            task_prefix: Some("root".into()),
            nth: 3,
        }));
        let dev = log.clone();
        let config = SimConfig {
            deadline_ns: Some(100 * NS_PER_MS),
            ..SimConfig::default()
        };
        let (outcome, _) = Sim::run(config, move |_| {
            for i in 0..10u64 {
                dev.write(4096 + i * 512, &[i as u8 + 1; 512]).unwrap();
                dev.flush().unwrap();
            }
        })
        .unwrap();
        assert!(matches!(outcome, SimOutcome::Stopped));
        let cut = power.cut_point().unwrap();
        log.crash();
        power.restore();
        let mut buf = [0u8; 512];
        log.peek(4096 + 512, &mut buf);
        let flushed = buf[0];
        (log.counts(), cut, flushed)
    };
    assert_eq!(cut.event, IoEvent::LogFlush);
    assert_eq!(cut.task, "root");
    assert_eq!(flushed, 2, "the second flush completed");
    // The third write was never flushed: a crash decided it.
    assert_eq!(
        counts.crash_kept + counts.crash_dropped + counts.crash_torn,
        1
    );
}

#[test]
fn latency_spikes_take_virtual_time() {
    let plan = FaultPlan {
        spike_ppm: PPM,
        spike_ns: 7 * NS_PER_MS,
        ..FaultPlan::none(1)
    };
    let elapsed = sim(move || {
        let dev = FaultyDevice::new(memory("data"), Role::Other, plan);
        let rt = Rt::current();
        dev.write(0, &[0u8; 512]).unwrap();
        dev.flush().unwrap();
        (rt.now_ns(), dev.counts().latency_spikes)
    });
    assert_eq!(elapsed, (14 * NS_PER_MS, 2));
}
