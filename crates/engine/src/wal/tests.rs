//! Tests of the log: round trips, group commit, sectors, tail rewrites.

use std::sync::Arc;

use flashlab_devices::memory::MemoryDevice;
use flashlab_devices::{Device, DeviceRef};
use flashlab_runtime::{Sim, SimConfig};

use super::*;

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

#[test]
fn appended_records_read_back_after_a_force() {
    sim(|_| {
        let device = memory_log();
        let wal = Wal::create(device.clone(), WalConfig::default()).unwrap();
        let mut lsns = Vec::new();
        for i in 0..100u64 {
            let (lsn, end) = wal.append(i, 0, Body::Commit { commit_ts: i }).unwrap();
            lsns.push(lsn);
            wal.flush_to(end).unwrap();
        }
        let mut reader = wal.reader(LOG_START_LSN);
        let mut got = Vec::new();
        while let Some(record) = reader.next_record().unwrap() {
            got.push(record.lsn);
        }
        assert_eq!(got, lsns);
        assert_eq!(reader.end_lsn(), wal.end_lsn());
        let stats = wal.stats();
        assert_eq!(stats.writes, 100);
        assert_eq!(stats.commits_forced, 100);
        // Each commit record is 41 bytes: most forces rewrite the tail sector.
        assert!(stats.tail_rewrites >= 90, "{stats:?}");
        assert_eq!(
            stats.avg_write_sectors(),
            1.0 + (stats.sectors_written - 100) as f64 / 100.0
        );
    });
}

#[test]
fn unforced_records_are_lost_by_a_crash_and_the_log_resumes() {
    sim(|_| {
        let memory = Arc::new(MemoryDevice::new("log", 64 << 20));
        let device: DeviceRef = memory.clone();
        let wal = Wal::create(device.clone(), WalConfig::default()).unwrap();
        let (_, durable_end) = wal.append(1, 0, Body::Commit { commit_ts: 1 }).unwrap();
        wal.flush_to(durable_end).unwrap();
        wal.append(2, 0, Body::Commit { commit_ts: 2 }).unwrap();
        memory.crash();
        let mut reader = LogReader::new(device.clone(), LOG_START_LSN);
        assert_eq!(reader.next_record().unwrap().unwrap().txn, 1);
        assert!(reader.next_record().unwrap().is_none());
        assert_eq!(reader.end_lsn(), durable_end);
        // Resume mid-sector: the next force rewrites the sector with both records.
        let master = Wal::read_master(&device).unwrap().unwrap();
        let wal = Wal::resume(device.clone(), WalConfig::default(), durable_end, master).unwrap();
        let (_, end) = wal.append(3, 0, Body::Commit { commit_ts: 3 }).unwrap();
        wal.flush_to(end).unwrap();
        memory.crash();
        let mut reader = LogReader::new(device, LOG_START_LSN);
        let txns: Vec<u64> = std::iter::from_fn(|| reader.next_record().unwrap())
            .map(|r| r.txn)
            .collect();
        assert_eq!(txns, vec![1, 3]);
    });
}

#[test]
fn concurrent_committers_share_forces() {
    let stats = sim(|rt| {
        let device: DeviceRef = Arc::new(flashlab_devices::sim::SimDevice::new(Box::new(SlowLog)));
        let wal = Wal::create(device, WalConfig::default()).unwrap();
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

/// A log device where every request takes 1 ms.
struct SlowLog;

impl flashlab_devices::DeviceModel for SlowLog {
    fn name(&self) -> &str {
        "slow-log"
    }
    fn capacity_bytes(&self) -> u64 {
        64 << 20
    }
    fn sector_bytes(&self) -> u32 {
        512
    }
    fn submit(&mut self, now_ns: u64, _req: &flashlab_devices::IoRequest) -> u64 {
        now_ns + 1_000_000
    }
    fn stats(&self) -> flashlab_devices::ModelStats {
        flashlab_devices::ModelStats::default()
    }
    fn describe(&self) -> Vec<flashlab_devices::model::Parameter> {
        Vec::new()
    }
}

#[test]
fn a_failed_flush_stops_the_log_for_good() {
    sim(|_| {
        // create() would flush a master record, so start from an empty log.
        let wal = Wal::resume(
            Arc::new(FailingFlush),
            WalConfig::default(),
            LOG_START_LSN,
            Master::default(),
        )
        .unwrap();
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

/// A device whose every flush fails, as an fsync error would.
struct FailingFlush;

impl Device for FailingFlush {
    fn name(&self) -> &str {
        "failing"
    }
    fn capacity_bytes(&self) -> u64 {
        1 << 20
    }
    fn sector_bytes(&self) -> u32 {
        512
    }
    fn read(&self, _offset: u64, buf: &mut [u8]) -> Result<(), flashlab_devices::DeviceError> {
        buf.fill(0);
        Ok(())
    }
    fn write(&self, _offset: u64, _data: &[u8]) -> Result<(), flashlab_devices::DeviceError> {
        Ok(())
    }
    fn flush(&self) -> Result<(), flashlab_devices::DeviceError> {
        Err(flashlab_devices::DeviceError::FlushFailed {
            device: "failing".into(),
            problem: "injected".into(),
        })
    }
    fn trim(&self, _offset: u64, _len: u64) -> Result<(), flashlab_devices::DeviceError> {
        Ok(())
    }
}
