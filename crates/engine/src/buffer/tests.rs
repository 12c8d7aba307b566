//! Tests of the buffer pool, in the simulated world.

use std::sync::Arc;
use std::sync::Mutex as StdMutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use flashlab_devices::memory::MemoryDevice;
use flashlab_devices::{Device, DeviceError};
use flashlab_runtime::{NS_PER_MS, NS_PER_US, Rt, Sim, SimConfig};

use super::*;
use crate::page::{PAGE_HEADER_BYTES, PageNo, PageType};

const PAGE_BYTES: usize = 4096;
const DEVICE_BYTES: u64 = 64 << 20;
const SPACE: SpaceId = 1;

/// A log that records how far it was forced.
#[derive(Default)]
struct FakeLog {
    flushed: AtomicU64,
}

impl LogForce for FakeLog {
    fn flush_to(&self, lsn: u64) -> Result<()> {
        self.flushed.fetch_max(lsn, Ordering::SeqCst);
        Ok(())
    }
}

/// A memory device that checks the WAL rule on every write (BUF-2), counts
/// requests, remembers the order of written pages, can be slow and can be
/// full.
struct TestDevice {
    inner: MemoryDevice,
    log: Arc<FakeLog>,
    reads: AtomicU64,
    written: StdMutex<Vec<u64>>,
    read_delay_ns: u64,
    write_delay_ns: u64,
    full: AtomicBool,
}

impl TestDevice {
    fn new(log: &Arc<FakeLog>, read_delay_ns: u64, write_delay_ns: u64) -> Arc<TestDevice> {
        Arc::new(TestDevice {
            inner: MemoryDevice::new("test-dev", DEVICE_BYTES),
            log: log.clone(),
            reads: AtomicU64::new(0),
            written: StdMutex::new(Vec::new()),
            read_delay_ns,
            write_delay_ns,
            full: AtomicBool::new(false),
        })
    }

    fn reads(&self) -> u64 {
        self.reads.load(Ordering::SeqCst)
    }

    /// Page numbers written, in order.
    fn written_pages(&self) -> Vec<u64> {
        self.written.lock().unwrap().clone()
    }

    /// The raw bytes of page `page_no` on the device.
    fn raw(&self, page_no: u32) -> Vec<u8> {
        let mut buf = vec![0u8; PAGE_BYTES];
        self.inner
            .read(u64::from(page_no) * PAGE_BYTES as u64, &mut buf)
            .unwrap();
        buf
    }
}

impl flashlab_devices::Wrapper for TestDevice {
    fn inner(&self) -> &dyn Device {
        &self.inner
    }
    fn read(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        if self.read_delay_ns > 0 {
            Rt::current().sleep(self.read_delay_ns);
        }
        self.inner.read(offset_bytes, buf)
    }
    fn write(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        let flushed = self.log.flushed.load(Ordering::SeqCst);
        for page in data.chunks(PAGE_BYTES) {
            let lsn = page::lsn(page);
            assert!(
                lsn <= flushed,
                "BUF-2: page LSN {lsn} written with the log durable to {flushed}"
            );
        }
        if self.full.load(Ordering::SeqCst) {
            return Err(DeviceError::Full {
                device: self.inner.name().to_string(),
                problem: "test device is full".to_string(),
            });
        }
        if self.write_delay_ns > 0 {
            Rt::current().sleep(self.write_delay_ns);
        }
        self.inner.write(offset_bytes, data)?;
        self.written
            .lock()
            .unwrap()
            .push(offset_bytes / PAGE_BYTES as u64);
        Ok(())
    }
}

/// Run `f` as the root task of a default simulation.
fn sim<T: Send + 'static>(f: impl FnOnce(Rt) -> T + Send + 'static) -> T {
    let (outcome, _) = Sim::run(SimConfig::default(), f).expect("simulation");
    outcome.finished().expect("root task finished")
}

/// A pool of `frames` frames with one space on a test device.
fn setup(
    frames: usize,
    read_delay_ns: u64,
    write_delay_ns: u64,
) -> (Arc<BufferPool>, Arc<TestDevice>, Arc<FakeLog>) {
    let log = Arc::new(FakeLog::default());
    let pool = BufferPool::new(PAGE_BYTES, (frames * PAGE_BYTES) as u64, log.clone()).unwrap();
    let device = TestDevice::new(&log, read_delay_ns, write_delay_ns);
    pool.register_space(SPACE, "data", device.clone()).unwrap();
    (Arc::new(pool), device, log)
}

fn id(page_no: PageNo) -> PageId {
    PageId::new(SPACE, page_no)
}

/// A leaf image whose body is filled with `fill`.
fn image(fill: u8) -> Vec<u8> {
    let mut page = vec![fill; PAGE_BYTES];
    page[..PAGE_BODY_OFFSET].fill(0);
    page::set_page_type(&mut page, PageType::BTreeLeaf);
    page
}

/// Create page `page_no` and install an image filled with `fill` at `lsn`.
fn create(pool: &BufferPool, page_no: PageNo, fill: u8, lsn: u64) {
    let page = pool.fetch_new(id(page_no)).unwrap();
    page.install(&image(fill), lsn, lsn);
}

fn assert_holds(pool: &BufferPool, page_no: PageNo, fill: u8, lsn: u64) {
    let page = pool.fetch(id(page_no)).unwrap();
    page.read(|bytes| {
        assert_eq!(page::stored_id(bytes), id(page_no));
        assert_eq!(page::lsn(bytes), lsn, "page {page_no}");
        assert!(
            bytes[PAGE_HEADER_BYTES..].iter().all(|&b| b == fill),
            "page {page_no}"
        );
    });
}

#[test]
fn eviction_round_trips_pages_through_the_device() {
    sim(|_rt| {
        let (pool, device, _log) = setup(FRAMES_MIN, 0, 0);
        let pages = (4 * FRAMES_MIN) as PageNo;
        for n in 0..pages {
            create(&pool, n, n as u8 + 1, 100 + u64::from(n));
        }
        for n in 0..pages {
            assert_holds(&pool, n, n as u8 + 1, 100 + u64::from(n));
        }
        let stats = pool.stats();
        assert!(
            stats.foreground_dirty_evictions > 0
                && stats.evictions >= stats.foreground_dirty_evictions,
            "{stats:?}"
        );
        assert_eq!(stats.reads, device.reads());
        assert!(
            stats.reads >= u64::from(pages) - FRAMES_MIN as u64,
            "{stats:?}"
        );
        // BUF-3: the pool never holds more pages than frames.
        pool.flush_all().unwrap();
        pool.discard_all().unwrap();
        for n in 0..pages {
            assert_holds(&pool, n, n as u8 + 1, 100 + u64::from(n));
        }
    });
}

#[test]
fn wal_rule_holds_for_every_write() {
    sim(|_rt| {
        let (pool, device, log) = setup(FRAMES_MIN, 0, 0);
        let mut lsn = 10;
        for round in 0..5u8 {
            for n in (0..20).rev() {
                let page = if round == 0 {
                    pool.fetch_new(id(n))
                } else {
                    pool.fetch(id(n))
                }
                .unwrap();
                lsn += 7;
                page.install(&image(round), lsn, lsn);
            }
            pool.write_back_oldest(3).unwrap();
        }
        pool.flush_all().unwrap();
        // TestDevice::write asserted BUF-2 on each of these.
        assert!(device.written_pages().len() >= 20);
        assert_eq!(log.flushed.load(Ordering::SeqCst), lsn);
        assert!(pool.dirty_pages().is_empty());
    });
}

#[test]
fn corruption_is_detected_and_named() {
    sim(|_rt| {
        let (pool, device, _log) = setup(FRAMES_MIN, 0, 0);
        create(&pool, 3, 0xAB, 50);
        create(&pool, 4, 0xCD, 51);
        pool.flush_all().unwrap();
        pool.discard_all().unwrap();
        let offset_bytes = 3 * PAGE_BYTES as u64;
        let mut raw = device.raw(3);
        raw[100] ^= 0x10;
        device.inner.write(offset_bytes, &raw).unwrap();
        for _ in 0..2 {
            // BUF-5: a failed read is not cached; the second fetch reads again.
            let err = pool.fetch(id(3)).unwrap_err();
            match &err {
                Error::Corruption {
                    space,
                    page_no,
                    offset_bytes: at,
                    ..
                } => assert_eq!((space.as_str(), *page_no, *at), ("data", 3, offset_bytes)),
                other => panic!("expected corruption, got {other}"),
            }
            assert!(err.to_string().contains("space 'data' page 3"), "{err}");
        }
        // Each fetch reads the damaged page twice: a flip on the way (not
        // on the medium) would read clean the second time.
        assert_eq!(device.reads(), 4);
        assert_holds(&pool, 4, 0xCD, 51);
    });
}

#[test]
fn all_pinned_is_an_error_not_a_hang() {
    sim(|_rt| {
        let (pool, _device, _log) = setup(FRAMES_MIN, 0, 0);
        let mut pinned: Vec<PageRef> = (0..FRAMES_MIN as PageNo)
            .map(|n| pool.fetch_new(id(n)).unwrap())
            .collect();
        let err = pool.fetch(id(100)).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::Invalid(_)), "{text}");
        assert!(
            text.contains(&format!("{FRAMES_MIN} frames")) && text.contains("all pinned"),
            "{text}"
        );
        pinned.pop();
        let page = pool.fetch(id(100)).unwrap();
        assert_eq!(page.id(), id(100));
    });
}

#[test]
fn concurrent_fetches_of_one_page_read_it_once() {
    sim(|rt| {
        let (pool, device, _log) = setup(FRAMES_MIN, 100 * NS_PER_US, 0);
        create(&pool, 5, 0x55, 77);
        pool.flush_all().unwrap();
        pool.discard_all().unwrap();
        let before = pool.stats();
        let tasks: Vec<_> = (0..4)
            .map(|t| {
                let pool = pool.clone();
                rt.spawn(&format!("reader-{t}"), move || {
                    pool.fetch(id(5)).unwrap().lsn()
                })
            })
            .collect();
        for task in tasks {
            assert_eq!(task.join(), 77);
        }
        let after = pool.stats();
        assert_eq!(device.reads(), 1);
        assert_eq!(after.reads - before.reads, 1);
        assert_eq!(after.misses - before.misses, 1);
        assert_eq!(after.hits - before.hits, 3);
    });
}

/// A cleaner configuration: `clean_target`, batches of `batch_pages`,
/// a round every `interval_ns`.
fn cleaner(clean_target: f64, batch_pages: usize, interval_ns: u64) -> crate::BufferConfig {
    crate::BufferConfig {
        clean_target,
        cleaner_batch_pages: batch_pages,
        cleaner_interval_ns: interval_ns,
    }
}

#[test]
fn page_cleaner_cleans_dirty_pages_oldest_first() {
    sim(|rt| {
        let (pool, device, _log) = setup(2 * FRAMES_MIN, 0, 0);
        // Page n gets LSN 100 - n: the oldest change is on the last page.
        for n in 0..6 {
            create(&pool, n, 1, 100 - u64::from(n));
        }
        assert_eq!(pool.dirty_pages().len(), 6);
        // Clean target 0: the flush list only, two oldest a round, each
        // batch in page order (CLEAN-2).
        let writer = pool.spawn_cleaner_tasks(&rt, &cleaner(0.0, 2, NS_PER_MS), 1);
        rt.sleep(10 * NS_PER_MS);
        assert!(pool.dirty_pages().is_empty());
        assert_eq!(device.written_pages(), vec![4, 5, 2, 3, 0, 1]);
        assert_eq!(pool.stats().cleaner_pages, 6);
        assert_eq!(pool.stats().cleaner_requests, 6);
        let asked_ns = rt.now_ns();
        pool.stop_cleaner();
        let report = writer.join();
        assert!(
            rt.now_ns() - asked_ns < NS_PER_MS,
            "stop waited for the interval"
        );
        assert_eq!(report.pages_written, 6);
        assert_eq!(report.failed_rounds, 0);
        assert!(report.rounds >= 3);
    });
}

#[test]
fn write_back_oldest_takes_smallest_rec_lsn() {
    sim(|_rt| {
        let (pool, _device, _log) = setup(2 * FRAMES_MIN, 0, 0);
        for (n, lsn) in [(0, 40), (1, 10), (2, 30), (3, 20)] {
            create(&pool, n, 1, lsn);
        }
        assert_eq!(pool.write_back_oldest(2).unwrap(), 2);
        assert_eq!(pool.dirty_pages(), vec![(id(0), 40), (id(2), 30)]);
        assert_eq!(pool.stats().writes, 2);
    });
}

#[test]
fn rec_lsn_is_the_first_change_since_the_last_write() {
    sim(|_rt| {
        let (pool, _device, log) = setup(FRAMES_MIN, 0, 0);
        let other = TestDevice::new(&log, 0, 0);
        pool.register_space(0, "index", other).unwrap();
        let page = pool.fetch_new(id(2)).unwrap();
        assert!(
            pool.dirty_pages().is_empty(),
            "a new page is clean until installed"
        );
        page.install(&image(1), 10, 10);
        page.install(&image(2), 20, 20);
        let index_page = pool.fetch_new(PageId::new(0, 9)).unwrap();
        index_page.install(&image(3), 25, 25);
        assert_eq!(
            pool.dirty_pages(),
            vec![(PageId::new(0, 9), 25), (id(2), 10)]
        );
        pool.flush_all().unwrap();
        assert!(pool.dirty_pages().is_empty());
        page.install(&image(4), 30, 30);
        assert_eq!(pool.dirty_pages(), vec![(id(2), 30)]);
    });
}

#[test]
fn change_during_write_back_keeps_page_dirty() {
    sim(|rt| {
        let (pool, device, _log) = setup(FRAMES_MIN, 0, NS_PER_MS);
        create(&pool, 1, 1, 10);
        let flusher = {
            let pool = pool.clone();
            rt.spawn("flusher", move || pool.flush_all())
        };
        rt.sleep(100 * NS_PER_US);
        // The flusher copied LSN 10 and is inside the device write.
        pool.fetch(id(1)).unwrap().install(&image(2), 20, 20);
        flusher.join().unwrap();
        assert_eq!(page::lsn(&device.raw(1)), 10);
        assert_eq!(pool.dirty_pages(), vec![(id(1), 20)], "BUF-7");
        pool.flush_all().unwrap();
        assert!(pool.dirty_pages().is_empty());
        assert_eq!(page::lsn(&device.raw(1)), 20);
    });
}

#[test]
fn full_device_is_space_full_and_keeps_pages_dirty() {
    sim(|_rt| {
        let (pool, device, _log) = setup(FRAMES_MIN, 0, 0);
        for n in 0..FRAMES_MIN as PageNo {
            create(&pool, n, 7, 10 + u64::from(n));
        }
        device.full.store(true, Ordering::SeqCst);
        let err = pool.fetch_new(id(99)).unwrap_err();
        assert!(err.is_space_full(), "{err}");
        let err = pool.flush_all().unwrap_err();
        assert!(err.is_space_full(), "{err}");
        assert_eq!(pool.dirty_pages().len(), FRAMES_MIN);
        device.full.store(false, Ordering::SeqCst);
        pool.flush_all().unwrap();
        pool.discard_all().unwrap();
        for n in 0..FRAMES_MIN as PageNo {
            assert_holds(&pool, n, 7, 10 + u64::from(n));
        }
    });
}

#[test]
fn configuration_and_misuse_are_errors() {
    sim(|_rt| {
        let log: Arc<dyn LogForce> = Arc::new(FakeLog::default());
        let small = (FRAMES_MIN as u64 - 1) * PAGE_BYTES as u64;
        let err = BufferPool::new(PAGE_BYTES, small, log.clone())
            .map(|_| ())
            .unwrap_err();
        assert!(matches!(err, Error::Config(_)), "{err}");
        let text = err.to_string();
        assert!(
            text.contains(&small.to_string()) && text.contains(&format!("{FRAMES_MIN} frames")),
            "{text}"
        );
        assert!(BufferPool::new(3000, 1 << 20, log).is_err());

        let (pool, device, _log) = setup(FRAMES_MIN, 0, 0);
        assert!(pool.register_space(SPACE, "again", device).is_err());
        assert!(
            pool.fetch(PageId::new(42, 0))
                .unwrap_err()
                .to_string()
                .contains("not registered")
        );
        let page = pool.fetch_new(id(0)).unwrap();
        page.install(&image(1), 50, 50);
        assert!(
            pool.fetch_new(id(0)).is_err(),
            "fetch_new of a dirty resident page"
        );
        assert!(pool.discard_all().unwrap_err().to_string().contains("1:0"));
        drop(page);
        pool.discard_all().unwrap();
        assert!(pool.dirty_pages().is_empty());
    });
}

#[test]
fn never_written_page_reads_as_empty() {
    sim(|_rt| {
        let (pool, _device, _log) = setup(FRAMES_MIN, 0, 0);
        let page = pool.fetch(id(1234)).unwrap();
        assert!(page.read(|bytes| bytes.iter().all(|&b| b == 0)), "PAGE-3");
    });
}

/// Tasks that each own a few pages change them over and over through a
/// pool far smaller than the data, with slow I/O and the page cleaner
/// running, under shuffled schedules; every page ends with its last image.
#[test]
fn concurrent_changes_under_pressure_survive_write_back() {
    for seed in 0..4 {
        let (stats, now_ns) = run_pressure(seed);
        assert!(stats.writes > 0, "{stats:?}");
        if seed == 0 {
            assert_eq!(run_pressure(seed), (stats, now_ns), "same seed, same run");
        }
    }
}

fn run_pressure(seed: u64) -> (BufferStats, u64) {
    const TASKS: u32 = 4;
    const PAGES_PER_TASK: u32 = 6;
    const ROUNDS: u32 = 8;
    let config = SimConfig {
        seed,
        shuffle: true,
        ..SimConfig::default()
    };
    let (outcome, report) = Sim::run(config, |rt| {
        let (pool, _device, _log) = setup(FRAMES_MIN, 20 * NS_PER_US, 50 * NS_PER_US);
        let next_lsn = Arc::new(AtomicU64::new(1));
        let writer = pool.spawn_page_cleaner(&rt, &cleaner(0.25, 2, 200 * NS_PER_US));
        let tasks: Vec<_> = (0..TASKS)
            .map(|t| {
                let (pool, next_lsn) = (pool.clone(), next_lsn.clone());
                rt.spawn(&format!("changer-{t}"), move || {
                    for round in 0..ROUNDS {
                        for k in 0..PAGES_PER_TASK {
                            let n = t * PAGES_PER_TASK + k;
                            let page = if round == 0 {
                                pool.fetch_new(id(n))
                            } else {
                                pool.fetch(id(n))
                            }
                            .unwrap();
                            let lsn = next_lsn.fetch_add(1, Ordering::SeqCst);
                            page.install(&image(round as u8 + 1), lsn, lsn);
                        }
                    }
                })
            })
            .collect();
        for task in tasks {
            task.join();
        }
        pool.stop_cleaner();
        assert_eq!(writer.join().failed_rounds, 0);
        pool.flush_all().unwrap();
        pool.discard_all().unwrap();
        for n in 0..TASKS * PAGES_PER_TASK {
            let page = pool.fetch(id(n)).unwrap();
            page.read(|bytes| {
                assert!(
                    bytes[PAGE_HEADER_BYTES..]
                        .iter()
                        .all(|&b| b == ROUNDS as u8)
                );
            });
        }
        pool.stats()
    })
    .expect("simulation");
    (outcome.finished().expect("finished"), report.now_ns)
}

/// BUF-10: an append page is written once, when sealed; neither the
/// page cleaner's batch nor `flush_all` writes it while it fills.
#[test]
fn append_pages_are_written_only_when_sealed() {
    sim(|_rt| {
        let (pool, device, _log) = setup(FRAMES_MIN, 0, 0);
        create(&pool, 0, 1, 10);
        pool.flush_all().unwrap();
        let page = pool.fetch_new(id(1)).unwrap();
        for fill in 1..=3 {
            page.install_append(&image(fill));
            assert_eq!(pool.write_back_oldest(FRAMES_MIN).unwrap(), 0);
            pool.flush_all().unwrap();
        }
        assert_eq!(device.written_pages(), vec![0], "only the ordinary page");
        pool.seal_append(id(1));
        assert_eq!(pool.write_back_oldest(FRAMES_MIN).unwrap(), 1);
        assert_eq!(device.written_pages(), vec![0, 1]);
        assert!(pool.dirty_pages().is_empty());
        drop(page);
        pool.check().unwrap();
    });
}

/// `check` passes through every kind of state change (the pool also runs
/// it after each change in this simulated, debug-assertion build).
#[test]
fn check_holds_through_misses_evictions_and_write_backs() {
    sim(|_rt| {
        let (pool, _device, _log) = setup(FRAMES_MIN, 0, 0);
        for n in 0..(3 * FRAMES_MIN as PageNo) {
            create(&pool, n, n as u8, u64::from(n) + 1);
            pool.check().unwrap();
        }
        pool.write_back_oldest(2).unwrap();
        pool.check().unwrap();
        pool.flush_all().unwrap();
        pool.check().unwrap();
        pool.discard_all().unwrap();
        pool.check().unwrap();
    });
}

/// The whole-state check runs after each change exactly in the simulated
/// world with debug assertions on (debug builds, the `crash` profile).
#[test]
fn check_runs_after_each_change_only_in_simulated_debug_builds() {
    let simulated = sim(|_rt| {
        let (pool, _device, _log) = setup(FRAMES_MIN, 0, 0);
        pool.core.meta.lock().checking
    });
    assert_eq!(simulated, cfg!(debug_assertions));
    let log = Arc::new(FakeLog::default());
    let real = BufferPool::new(PAGE_BYTES, (FRAMES_MIN * PAGE_BYTES) as u64, log).unwrap();
    assert!(!real.core.meta.lock().checking);
}

/// A 64-frame pool whose pages `0..pages` were written (page `n` holding
/// byte `n + 1` at LSN `100 + n`), flushed and dropped from the pool.
fn written_out(pages: PageNo) -> (Arc<BufferPool>, Arc<TestDevice>, Arc<FakeLog>) {
    let (pool, device, log) = setup(64, 0, 0);
    for n in 0..pages {
        create(&pool, n, n as u8 + 1, 100 + u64::from(n));
    }
    pool.flush_all().unwrap();
    pool.discard_all().unwrap();
    (pool, device, log)
}

/// Pages missed in page order are read ahead a window at a time, in one
/// request each; every page still arrives verified.
#[test]
fn sequential_misses_read_ahead_in_large_requests() {
    sim(|_rt| {
        let pages = 40 as PageNo;
        let (pool, device, _log) = written_out(pages);
        pool.set_read_ahead_bytes(8 * PAGE_BYTES as u64);
        let before = device.reads();
        for n in 0..pages {
            assert_holds(&pool, n, n as u8 + 1, 100 + u64::from(n));
        }
        // Pages 0 and 1 one by one, the window 2..=9 after the sequential
        // miss of 1; then each hit on a window's last page (9, 17, 25, 33)
        // reads the next window: 10..=17, 18..=25, 26..=33, 34..=39 (and
        // the two unwritten pages after 39, not kept). No miss after page 1.
        let requests = device.reads() - before;
        assert_eq!(requests, 7, "{requests} requests for {pages} pages");
        assert_eq!(pool.stats().reads, u64::from(pages), "each page read once");
        pool.check().unwrap();
        // A random order does not read ahead: one request per page.
        pool.discard_all().unwrap();
        let before = device.reads();
        for n in [30, 4, 17, 9, 25] {
            assert_holds(&pool, n, n as u8 + 1, 100 + u64::from(n));
        }
        assert_eq!(device.reads() - before, 5);
    });
}

/// Only a hit on a window's last page reads the next window: a scan that
/// stops inside a window reads nothing more.
#[test]
fn only_the_marker_hit_reads_the_next_window() {
    sim(|_rt| {
        let (pool, device, _log) = written_out(30);
        pool.set_read_ahead_bytes(8 * PAGE_BYTES as u64);
        let before = device.reads();
        for n in 0..9 {
            assert_holds(&pool, n, n as u8 + 1, 100 + u64::from(n));
        }
        // 0, 1, then the window 2..=9: hits on 2..=8 read nothing.
        assert_eq!(device.reads() - before, 3);
        for n in [8, 3, 5] {
            assert_holds(&pool, n, n as u8 + 1, 100 + u64::from(n));
        }
        assert_eq!(
            device.reads() - before,
            3,
            "hits off the marker read nothing"
        );
        assert_holds(&pool, 9, 10, 109);
        assert_eq!(device.reads() - before, 4, "the marker hit read 10..=17");
        assert_holds(&pool, 9, 10, 109);
        assert_eq!(device.reads() - before, 4, "a marker is read once");
        for n in 10..18 {
            assert_holds(&pool, n, n as u8 + 1, 100 + u64::from(n));
        }
        assert_eq!(
            device.reads() - before,
            5,
            "17, the new marker, read 18..=25"
        );
        assert_eq!(pool.stats().reads, 26, "each page read once");
        pool.check().unwrap();
    });
}

/// A damaged page inside a read-ahead window is not loaded: the fetch that
/// needs it reads it itself and reports the damage (BUF-9).
#[test]
fn read_ahead_leaves_a_damaged_page_to_its_own_fetch() {
    sim(|_rt| {
        let (pool, device, _log) = written_out(20);
        let mut raw = device.raw(5);
        raw[PAGE_BYTES - 1] ^= 0xFF;
        device.inner.write(5 * PAGE_BYTES as u64, &raw).unwrap();
        pool.set_read_ahead_bytes(8 * PAGE_BYTES as u64);
        for n in 0..5 {
            assert_holds(&pool, n, n as u8 + 1, 100 + u64::from(n));
        }
        let Err(err) = pool.fetch(id(5)) else {
            panic!("page 5 is damaged")
        };
        assert!(err.to_string().contains("page"), "{err}");
        for n in 6..20 {
            assert_holds(&pool, n, n as u8 + 1, 100 + u64::from(n));
        }
        pool.check().unwrap();
    });
}

/// With a write scheduler, a write-back batch reaches the device
/// sorted and merged: neighbours in one request, every page intact.
#[test]
fn a_write_scheduler_sorts_and_merges_a_write_back_batch() {
    sim(|_rt| {
        let (pool, device, log) = setup(64, 0, 0);
        // Dirty pages 0..8 and 20..24, changed in a scattered order.
        let pages: Vec<PageNo> = vec![7, 21, 0, 3, 23, 5, 1, 20, 6, 2, 22, 4];
        for (i, &n) in pages.iter().enumerate() {
            create(&pool, n, n as u8 + 1, 100 + i as u64);
        }
        pool.set_write_scheduler(Some(flashlab_devices::scheduler::SchedulerConfig::default()));
        let written = pool.write_back_oldest(64).unwrap();
        assert_eq!(written, pages.len());
        assert_eq!(
            device.written_pages(),
            vec![0, 20],
            "two merged requests, in address order"
        );
        assert!(log.flushed.load(Ordering::SeqCst) >= 100 + pages.len() as u64 - 1);
        assert!(pool.dirty_pages().is_empty());
        pool.discard_all().unwrap();
        for (i, &n) in pages.iter().enumerate() {
            assert_holds(&pool, n, n as u8 + 1, 100 + i as u64);
        }
        pool.check().unwrap();
    });
}

/// A page of the stress tests below: its body is `page_no` as a byte, so a
/// read of the wrong frame shows (with the id stamped in the header).
fn assert_is_page(page: &PageRef, page_no: PageNo) {
    page.read(|bytes| {
        assert_eq!(page::stored_id(bytes), id(page_no), "frame of another page");
        assert!(
            bytes[PAGE_HEADER_BYTES..]
                .iter()
                .all(|&b| b == page_no as u8),
            "page {page_no}: bytes of another page"
        );
    });
}

/// A little xorshift generator per task: the stress tests' page choices.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// What a stress task did: fetches that pinned a page.
fn stress_task(pool: &BufferPool, task: u64, rounds: u32, pages: PageNo, owned: PageNo) -> u64 {
    let mut random = 0x9e37_79b9_7f4a_7c15 ^ (task + 1);
    let mut pinned = 0;
    // The pages this task changes: every `tasks`-th, so no two tasks
    // install into one page and each page's LSN only grows.
    let mut lsn = 1_000;
    for round in 0..rounds {
        let a = (next_random(&mut random) % u64::from(pages)) as PageNo;
        let b = (next_random(&mut random) % u64::from(pages)) as PageNo;
        // Hold two pins at once sometimes, so unpins interleave.
        let first = pool.fetch(id(a)).unwrap();
        pinned += 1;
        assert_is_page(&first, a);
        if let Some(second) = pool.fetch_resident(id(b)) {
            pinned += 1;
            assert_is_page(&second, b);
        }
        drop(first);
        if round % 4 == 0 {
            let mine = owned + (next_random(&mut random) % 4) as PageNo * 8;
            let page = pool.fetch(id(mine)).unwrap();
            pinned += 1;
            lsn += 1;
            page.install(&image(mine as u8), lsn, lsn);
        }
    }
    pinned
}

/// Make `pages` pages, each filled with its own number, written and
/// dropped from the pool.
fn make_stress_pages(pool: &BufferPool, pages: PageNo) {
    for n in 0..pages {
        create(pool, n, n as u8, 1);
        if n % 8 == 7 {
            pool.flush_all().unwrap();
        }
    }
    pool.flush_all().unwrap();
    pool.discard_all().unwrap();
}

/// BUF-14/15 on real threads: many threads hit, pin and unpin pages of a
/// small pool that evicts all the time (clean and dirty victims), and every
/// read finds the page it asked for; afterwards no pin is left and the
/// whole state checks.
#[test]
fn hits_and_unpins_race_evictions_on_real_threads() {
    const TASKS: u64 = 6;
    const PAGES: PageNo = 64;
    let rt = flashlab_runtime::RealRuntime::new(5);
    let _enter = flashlab_runtime::RealRuntime::enter(&rt);
    // 16 frames: 6 tasks pin at most 2 pages each, so a miss always finds
    // an unpinned frame (BUF-8).
    let (pool, _device, _log) = setup(2 * FRAMES_MIN, 0, 0);
    make_stress_pages(&pool, PAGES);
    let before = pool.stats();
    // Scoped threads rather than runtime tasks: a task that panics (a
    // broken invariant) fails the test instead of leaving its join waiting.
    let pinned: u64 = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..TASKS)
            .map(|t| {
                let (pool, rt) = (&pool, &rt);
                scope.spawn(move || {
                    let _enter = flashlab_runtime::RealRuntime::enter(rt);
                    stress_task(pool, t, 20_000, PAGES, t as PageNo)
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).sum()
    });
    let after = pool.stats();
    assert_eq!(
        (after.hits - before.hits) + (after.misses - before.misses),
        pinned,
        "every pin is a hit or a miss"
    );
    assert!(after.evictions - before.evictions > 1_000, "{after:?}");
    assert!(after.foreground_dirty_evictions > 0, "{after:?}");
    pool.check().unwrap();
    pool.flush_all().unwrap();
    // BUF-1: fails if any pin was left behind.
    pool.discard_all().unwrap();
    for n in 0..PAGES {
        assert_is_page(&pool.fetch(id(n)).unwrap(), n);
    }
}

/// The same races in the simulated world with seeded preemption at every
/// runtime lock point: each seed checks the pages
/// and the whole state, and runs the same twice.
#[test]
fn hits_and_unpins_race_evictions_with_preemption() {
    fn run(seed: u64) -> (BufferStats, u64) {
        let config = SimConfig {
            seed,
            preempt: true,
            shuffle: true,
            ..SimConfig::default()
        };
        let (outcome, _) = Sim::run(config, |rt| {
            const PAGES: PageNo = 40;
            let (pool, _device, _log) = setup(2 * FRAMES_MIN, 20 * NS_PER_US, 30 * NS_PER_US);
            make_stress_pages(&pool, PAGES);
            let tasks: Vec<_> = (0..6u64)
                .map(|t| {
                    let pool = pool.clone();
                    rt.spawn(&format!("stress-{t}"), move || {
                        stress_task(&pool, t, 1_000, PAGES, t as PageNo)
                    })
                })
                .collect();
            for t in tasks {
                t.join();
            }
            pool.check().unwrap();
            pool.flush_all().unwrap();
            pool.discard_all().unwrap();
            (pool.stats(), rt.now_ns())
        })
        .expect("simulation");
        outcome.finished().expect("root task finished")
    }
    for seed in 0..16 {
        let first = run(seed);
        assert!(first.0.evictions > 0, "{first:?}");
        assert_eq!(run(seed), first, "seed {seed}: same seed, same run");
    }
}

/// simtest seeds 10799, 17950, 31421 and 32713 (Misdirect profile): a page
/// the pool wrote back, evicted and read again came back older, because
/// the device had not kept the write (a misdirected write). A
/// mini-transaction that had read the page before the eviction and wrote
/// it after panicked on an invariant (MTR-11, or DB-1 in a one-descent
/// write). It is damage, and MTR-14 reports it as corruption naming the
/// page and both LSNs.
#[test]
fn regression_a_page_read_back_older_than_it_was_is_a_lost_write_not_a_panic() {
    sim(|_| {
        let (pool, device, _log) = setup(16, 0, 0);
        create(&pool, 1, 1, 10);
        assert!(pool.write_back_page(id(1)).unwrap());
        let older = device.raw(1);
        pool.fetch(id(1)).unwrap().install(&image(2), 20, 20);
        assert!(pool.write_back_page(id(1)).unwrap());
        let latch = flashlab_runtime::Latch::new();
        let mut mtr = crate::mtr::Mtr::new(&pool, SPACE, "data", 64, &latch);
        use crate::mtr::PageAccess;
        assert_eq!(page::lsn(mtr.read(1).unwrap()), 20);
        // The device loses the second write; the pool forgets the page.
        device.inner.write(PAGE_BYTES as u64, &older).unwrap();
        pool.discard_all().unwrap();
        let err = mtr.write(1).map(|_| ()).unwrap_err().to_string();
        assert!(
            err.contains("corruption in space 'data' page 1")
                && err.contains("a lost write")
                && err.contains("LSN 10, older than the LSN 20"),
            "{err}"
        );
    });
}

/// Sixteen dirty pages, page `n` in frame `n` with LSN `100 - n` (the
/// oldest change on the last page), no reference bits, the hand at frame
/// 0; page 1 pinned (returned) and page 2 an unsealed append page.
fn dirty_pool_for_the_scan() -> (Arc<BufferPool>, Arc<TestDevice>, PageRef) {
    let (pool, device, _log) = setup(2 * FRAMES_MIN, 0, 0);
    for n in 0..16 {
        if n == 2 {
            pool.fetch_new(id(n)).unwrap().install_append(&image(3));
        } else {
            create(&pool, n, n as u8 + 1, 100 - u64::from(n));
        }
    }
    for frame in 0..16 {
        pool.core.hot.take_referenced(frame);
    }
    let pinned = pool.fetch(id(1)).unwrap();
    pool.core.hot.take_referenced(1);
    (pool, device, pinned)
}

/// CLEAN-1: the scan takes the dirty frames the hand reaches next, up to
/// the clean target, passing pinned frames and unsealed append pages.
#[test]
fn the_cleaner_scan_takes_dirty_frames_ahead_of_the_hand() {
    sim(|_rt| {
        let (pool, _device, pinned) = dirty_pool_for_the_scan();
        let mut meta = pool.core.meta.lock();
        meta.set_scan_depth(0.5);
        let scan = |meta: &meta::Meta, share| -> Vec<usize> {
            meta.scan_ahead(share).iter().map(|&(_, f)| f).collect()
        };
        assert_eq!(scan(&meta, meta::Share::ALL), vec![0, 3, 4, 5, 6, 7, 8, 9]);
        // CLEAN-7: the sixteen pages are one extent's, so one task's, with
        // half the depth.
        let task = SPACE as usize % 2;
        assert_eq!(
            scan(&meta, meta::Share { index: task, of: 2 }),
            vec![0, 3, 4, 5]
        );
        assert!(
            scan(
                &meta,
                meta::Share {
                    index: 1 - task,
                    of: 2
                }
            )
            .is_empty()
        );
        meta.set_scan_depth(0.0);
        assert!(
            scan(&meta, meta::Share::ALL).is_empty(),
            "clean target 0: no scan"
        );
        drop(meta);
        drop(pinned);
    });
}

/// CLEAN-7: each task owns the frames of its extents, so a batch's
/// neighbours are one task's; free frames go by their number.
#[test]
fn cleaner_tasks_own_whole_extents() {
    sim(|_rt| {
        let (pool, _device, _log) = setup(2 * FRAMES_MIN, 0, 0);
        let extent = meta::CLEANER_EXTENT_PAGES;
        for n in 0..8 {
            create(&pool, n, 1, 10);
            create(&pool, extent + n, 1, 10);
        }
        for frame in 0..16 {
            pool.core.hot.take_referenced(frame);
        }
        let mut meta = pool.core.meta.lock();
        meta.set_scan_depth(0.9);
        let pages = |share| -> Vec<PageNo> {
            let mut p: Vec<PageNo> = meta
                .scan_ahead(share)
                .iter()
                .map(|(id, _)| id.page_no)
                .collect();
            p.sort_unstable();
            p
        };
        let share = |index| meta::Share { index, of: 2 };
        // Extent 0 of the space is the task of the space's number.
        let first_task = SPACE as usize % 2;
        let (first, second) = (pages(share(first_task)), pages(share(1 - first_task)));
        assert!(
            !first.is_empty() && first.iter().all(|&p| p < extent),
            "{first:?}"
        );
        assert!(
            !second.is_empty() && second.iter().all(|&p| p >= extent),
            "{second:?}"
        );
        assert!(share(0).holds(2, None) && share(1).holds(3, None));
    });
}

/// CLEAN-9: while half the scan depth or more is clean the scan takes
/// nothing; below half it cleans up to the whole depth.
#[test]
fn the_cleaner_scan_waits_for_half_its_depth() {
    sim(|_rt| {
        let (pool, _device, _log) = setup(2 * FRAMES_MIN, 0, 0);
        for n in 0..16 {
            create(&pool, n, 1, 10);
        }
        for frame in 0..16 {
            pool.core.hot.take_referenced(frame);
        }
        // Frames 0..4 clean: half of a depth of 8.
        pool.core.clean_round(4, meta::Share::ALL, true).unwrap();
        let mut meta = pool.core.meta.lock();
        meta.set_scan_depth(0.5);
        let dirty_ahead = |meta: &meta::Meta| meta.scan_ahead(meta::Share::ALL).len();
        assert_eq!(dirty_ahead(&meta), 0, "4 of 8 ahead are clean");
        drop(meta);
        // Dirty frame 3 again: 3 of 8 clean, so the scan takes 5.
        create_again(&pool, 3);
        pool.core.hot.take_referenced(3);
        let meta = pool.core.meta.lock();
        assert_eq!(dirty_ahead(&meta), 5);
    });
}

/// Dirty the resident page `page_no` again with a later LSN.
fn create_again(pool: &BufferPool, page_no: PageNo) {
    let page = pool.fetch(id(page_no)).unwrap();
    page.install(&image(9), 20, 20);
}

/// CLEAN-2: a round writes the scan's pages and the oldest ones, sorted by
/// page, in batches of at most `cleaner_batch_pages`, one request a page
/// without a write scheduler and merged neighbours with one.
#[test]
fn a_cleaner_round_writes_sorted_batches() {
    for merge in [false, true] {
        sim(move |_rt| {
            let (pool, device, pinned) = dirty_pool_for_the_scan();
            if merge {
                pool.set_write_scheduler(Some(Default::default()));
            }
            pool.core.meta.lock().set_scan_depth(0.5);
            assert_eq!(
                pool.core.clean_round(4, meta::Share::ALL, true).unwrap(),
                12
            );
            let stats = pool.stats();
            assert_eq!(stats.cleaner_pages, 12);
            assert_eq!(stats.foreground_dirty_evictions, 0);
            if merge {
                // [0] [3 4 5] | [6 7 8 9] | [12 13 14 15]
                assert_eq!(device.written_pages(), vec![0, 3, 6, 12]);
                assert_eq!(stats.cleaner_requests, 4);
            } else {
                let pages = vec![0, 3, 4, 5, 6, 7, 8, 9, 12, 13, 14, 15];
                assert_eq!(device.written_pages(), pages);
                assert_eq!(stats.cleaner_requests, 12);
            }
            let dirty: Vec<PageNo> = pool.dirty_pages().iter().map(|(p, _)| p.page_no).collect();
            assert_eq!(dirty, vec![1, 2, 10, 11]);
            drop(pinned);
            pool.check().unwrap();
        });
    }
}

/// CLEAN-8: the flush-list part of a round writes the pool's oldest pages
/// up to their LSN limit, so the task owning the oldest extent writes all
/// of it, in one merged request, and the other tasks write none.
#[test]
fn the_oldest_pages_go_out_from_their_extent_s_owner() {
    sim(|_rt| {
        let (pool, device, _log) = setup(256, 0, 0);
        // Pages 0..128 dirty in page order: extent 0 holds the 64 oldest.
        for n in 0..128 {
            create(&pool, n, 1, 100 + u64::from(n));
        }
        pool.set_write_scheduler(Some(Default::default()));
        pool.core.meta.lock().set_scan_depth(0.0);
        // Extent 0 is task (SPACE + 0) % 4's.
        let owner = SPACE as usize % 4;
        for index in 0..4 {
            let share = meta::Share { index, of: 4 };
            let taken = pool.core.meta.lock().oldest_dirty_to_limit(64, share);
            let pages: Vec<PageNo> = taken.iter().map(|(p, _)| p.page_no).collect();
            let want: Vec<PageNo> = if index == owner {
                (0..64).collect()
            } else {
                Vec::new()
            };
            assert_eq!(pages, want, "task {index}");
        }
        let share = meta::Share {
            index: owner,
            of: 4,
        };
        assert_eq!(pool.core.clean_round(64, share, true).unwrap(), 64);
        assert_eq!(device.written_pages(), vec![0], "one request from page 0");
        let dirty: Vec<PageNo> = pool.dirty_pages().iter().map(|(p, _)| p.page_no).collect();
        assert_eq!(dirty, (64..128).collect::<Vec<_>>());
        pool.check().unwrap();
    });
}

/// CLEAN-5: a miss that meets a dirty victim takes a clean frame within
/// the scan depth instead, and writes a dirty one itself only when there
/// is none; a pool with every frame dirty still serves misses (BUF-8).
#[test]
fn a_miss_passes_a_dirty_victim_for_a_clean_one_within_the_scan_depth() {
    sim(|_rt| {
        let (pool, device, pinned) = dirty_pool_for_the_scan();
        drop(pinned);
        pool.write_back_page(id(5)).unwrap();
        let written = device.written_pages().len();
        pool.core.meta.lock().set_scan_depth(0.5);
        // The hand meets dirty page 0 first; clean page 5 lies 5 frames on.
        drop(pool.fetch_new(id(100)).unwrap());
        assert!(pool.fetch_resident(id(5)).is_none(), "page 5 evicted");
        assert_eq!(device.written_pages().len(), written, "no write");
        assert_eq!(pool.stats().foreground_dirty_evictions, 0);
        assert!(pool.core.cleaner.take_nudge(), "the cleaner was woken");
        // Only dirty frames within reach now: the first one met is written.
        drop(pool.fetch_new(id(101)).unwrap());
        assert_eq!(pool.stats().foreground_dirty_evictions, 1);
        assert_eq!(device.written_pages().len(), written + 1);
        pool.check().unwrap();
    });
}
