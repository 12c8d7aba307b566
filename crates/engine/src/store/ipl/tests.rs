//! Tests of the IPL store over an in-memory raw NAND device.

use std::sync::Arc;

use flashlab_devices::memory::MemoryDevice;
use flashlab_devices::nand_device::{NandDevice, NandSpec};
use flashlab_devices::store::{CrashFate, StoredDevice};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;

const PAGE: usize = 8192;
const UNITS: u64 = 8;

fn spec() -> NandSpec {
    NandSpec::k9wag08u1a().with_capacity_bytes(UNITS * ERASE_UNIT_BYTES)
}

fn nand() -> (Arc<MemoryDevice>, DeviceRef) {
    let inner = Arc::new(MemoryDevice::new("nand", UNITS * ERASE_UNIT_BYTES));
    let device: DeviceRef = Arc::new(NandDevice::new(spec(), inner.clone()).unwrap());
    (inner, device)
}

fn open(device: &DeviceRef, mode: StoreMode, segment: u64) -> IplStore {
    IplStore::open(device.clone(), PAGE, None, segment, "data", mode).unwrap()
}

fn page(rng: &mut ChaCha8Rng, page_no: u32) -> Vec<u8> {
    let mut p = vec![0u8; PAGE];
    rng.fill(&mut p[..]);
    p[4..8].copy_from_slice(&page_no.to_le_bytes());
    p
}

/// Change a few bytes of the body and the header, as an install does.
fn update(rng: &mut ChaCha8Rng, p: &[u8]) -> Vec<u8> {
    let mut q = p.to_vec();
    for _ in 0..rng.random_range(1..4) {
        let at = rng.random_range(PAGE_BODY_OFFSET..PAGE - 64);
        let len = rng.random_range(1..40);
        for b in &mut q[at..at + len] {
            *b = rng.random();
        }
    }
    q[12] = q[12].wrapping_add(1); // the page LSN moves
    q
}

fn read(store: &IplStore, page_no: u32) -> Vec<u8> {
    let mut buf = vec![0u8; PAGE];
    store.read_page(page_no, &mut buf).unwrap();
    buf
}

struct NoLog;
impl LogForce for NoLog {
    fn flush_to(&self, _lsn: u64) -> Result<()> {
        Ok(())
    }
}

#[test]
fn the_layout_of_a_small_device() {
    let (_, device) = nand();
    let store = open(&device, StoreMode::Create, 8 << 10);
    // 8 units: the descriptor, 2 spares, 5 logical units of 15 pages.
    assert_eq!(store.layout().logical_units, 5);
    assert_eq!(store.capacity_pages(), 75);
    assert_eq!(read(&store, 7), vec![0u8; PAGE], "PS-2");
}

#[test]
fn updates_go_to_log_sectors_and_pages_are_rebuilt_from_them() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let (_, device) = nand();
    let store = open(&device, StoreMode::Create, 8 << 10);
    let mut images: Vec<Vec<u8>> = (0..15).map(|n| page(&mut rng, n)).collect();
    for (n, p) in images.iter().enumerate() {
        store.write_page(n as u32, p).unwrap();
    }
    assert_eq!(
        store.ipl_stats().direct_programs,
        15,
        "a fresh unit fills in place"
    );
    assert_eq!(read(&store, 3), images[3]);
    let next = update(&mut rng, &images[3]);
    store.note_update(3, 42, 0, &images[3], &next);
    store.write_page(3, &next).unwrap();
    images[3] = next;
    let s = store.ipl_stats();
    assert_eq!(
        (s.sector_writes, s.diff_writes, s.merges),
        (1, 0, 0),
        "{s:?}"
    );
    assert!(s.record_bytes_noted / s.records_noted < 60, "{s:?}");
    assert_eq!(read(&store, 3), images[3]);
    // A change the store was not told of is logged as a difference.
    let next = update(&mut rng, &images[3]);
    store.write_page(3, &next).unwrap();
    images[3] = next;
    assert_eq!(store.ipl_stats().diff_writes, 1);
    for (n, p) in images.iter().enumerate() {
        assert_eq!(&read(&store, n as u32), p, "page {n}");
    }
    assert!(store.ipl_stats().log_sectors_read > 0);
}

/// Random updates on three units: merges happen, every page reads its
/// last image, before and after a reopen; smaller segments merge more.
#[test]
fn a_full_log_segment_merges_and_the_map_survives_a_reopen() {
    let mut merges = Vec::new();
    for segment in [4u64 << 10, 8 << 10, 16 << 10, 32 << 10] {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let (_, device) = nand();
        let store = open(&device, StoreMode::Create, segment);
        let pages = store.layout().pages_per_unit * 3;
        let mut images: Vec<Vec<u8>> = (0..pages).map(|n| page(&mut rng, n)).collect();
        for (n, p) in images.iter().enumerate() {
            store.write_page(n as u32, p).unwrap();
        }
        for _ in 0..600 {
            let n = rng.random_range(0..pages) as usize;
            let next = update(&mut rng, &images[n]);
            store.note_update(n as u32, 7, 0, &images[n], &next);
            store.write_page(n as u32, &next).unwrap();
            images[n] = next;
        }
        let s = store.ipl_stats();
        assert!(s.merges > 0 && s.erases >= s.merges, "{s:?}");
        for (n, p) in images.iter().enumerate() {
            assert_eq!(&read(&store, n as u32), p, "page {n}");
        }
        store.sync(&NoLog).unwrap();
        let again = open(&device, StoreMode::Open, segment);
        for (n, p) in images.iter().enumerate() {
            assert_eq!(&read(&again, n as u32), p, "page {n} after reopen");
        }
        merges.push(s.merges);
    }
    assert!(
        merges.windows(2).all(|w| w[0] > w[1]),
        "merges fall as the segment grows: {merges:?}"
    );
}

#[test]
fn opening_a_foreign_or_reshaped_device_is_refused() {
    let (_, device) = nand();
    let err = IplStore::open(device.clone(), PAGE, None, 8 << 10, "data", StoreMode::Open)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("'data'") && err.contains("no IPL space"),
        "{err}"
    );
    open(&device, StoreMode::Create, 8 << 10);
    let err = IplStore::open(
        device.clone(),
        PAGE,
        None,
        16 << 10,
        "data",
        StoreMode::Open,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("no IPL space"), "{err}");
    let memory: DeviceRef = Arc::new(MemoryDevice::new("memory", UNITS * ERASE_UNIT_BYTES));
    let err = IplStore::open(memory, PAGE, None, 8 << 10, "data", StoreMode::Create)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("erased raw NAND"), "{err}");
}

/// Crashes at random points of random histories, merges included: each
/// unflushed program, commit sector and erase is kept, dropped or torn.
/// After the crash every page reads one of its written versions, never
/// older than the last one made durable (PS-1, IPL-2..4).
#[test]
fn a_crash_anywhere_leaves_each_page_at_a_version_it_had() {
    for seed in 0..40u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(100 + seed);
        let (inner, device) = nand();
        let store = open(&device, StoreMode::Create, 4 << 10);
        let pages = store.layout().pages_per_unit * 2;
        let mut history: Vec<Vec<Vec<u8>>> = vec![vec![vec![0u8; PAGE]]; pages as usize];
        let mut durable = vec![0usize; pages as usize];
        let steps = rng.random_range(20..300);
        for _ in 0..steps {
            let n = rng.random_range(0..pages) as usize;
            let last = history[n].last().unwrap().clone();
            let next = if last.iter().all(|&b| b == 0) {
                page(&mut rng, n as u32)
            } else {
                update(&mut rng, &last)
            };
            let noted = rng.random_bool(0.8);
            if noted {
                store.note_update(n as u32, 1, 0, &last, &next);
            }
            let merges = store.ipl_stats().merges;
            if noted && rng.random_bool(0.3) {
                // A commit forces the records instead of a write-back.
                let groups = store.ipl_stats().commit_groups;
                store.transaction_ended(1, true, &NoLog).unwrap();
                let mut sealed = next.clone();
                crate::page::set_lsn(&mut sealed, 0);
                crate::page::seal(&mut sealed);
                if store.ipl_stats().commit_groups > groups {
                    history[n].push(sealed);
                }
            } else {
                store.write_page(n as u32, &next).unwrap();
                history[n].push(next);
            }
            if store.ipl_stats().merges > merges || rng.random_bool(0.02) {
                store.sync(&NoLog).unwrap();
                for (d, h) in durable.iter_mut().zip(&history) {
                    *d = h.len() - 1;
                }
            }
        }
        let mut fates = ChaCha8Rng::seed_from_u64(seed);
        inner
            .store()
            .lock()
            .unwrap()
            .crash_with(|_, len| match fates.random_range(0..3) {
                0 => CrashFate::Keep,
                1 => CrashFate::Drop,
                _ => CrashFate::Tear {
                    bytes: fates.random_range(0..=len / 512) * 512,
                },
            });
        let again = open(&device, StoreMode::Open, 4 << 10);
        for n in 0..pages as usize {
            let got = read(&again, n as u32);
            let at = history[n].iter().rposition(|v| *v == got);
            assert!(
                at.is_some_and(|at| at >= durable[n]),
                "seed {seed}: page {n} reads version {at:?}, durable is {}",
                durable[n]
            );
        }
        // The store goes on working after the crash.
        for n in 0..pages {
            let p = page(&mut rng, n);
            again.write_page(n, &p).unwrap();
            assert_eq!(read(&again, n), p, "seed {seed}: page {n} after the crash");
        }
    }
}

/// A commit forces the in-memory records of the committing transaction
/// as a write group sealed at their page LSN; an abort forces nothing; the
/// page's later write-back logs only what changed since the force.
#[test]
fn a_commit_forces_its_pages_records_and_an_abort_does_not() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let (_, device) = nand();
    let store = open(&device, StoreMode::Create, 8 << 10);
    let images: Vec<Vec<u8>> = (0..15).map(|n| page(&mut rng, n)).collect();
    for (n, p) in images.iter().enumerate() {
        store.write_page(n as u32, p).unwrap();
    }
    store.write_page(0, &update(&mut rng, &images[0])).unwrap(); // the unit is logged to now
    let base = read(&store, 4);
    let next = update(&mut rng, &base);
    store.note_update(4, 7, 900, &base, &next);
    let other = update(&mut rng, &read(&store, 5));
    store.note_update(5, 8, 901, &read(&store, 5), &other);
    store.transaction_ended(8, false, &NoLog).unwrap();
    let before = store.ipl_stats();
    store.transaction_ended(7, true, &NoLog).unwrap();
    let after = store.ipl_stats();
    assert_eq!(
        (
            after.commit_groups,
            after.sector_writes - before.sector_writes
        ),
        (1, 1),
        "{after:?}"
    );
    let mut sealed = next.clone();
    crate::page::set_lsn(&mut sealed, 900);
    crate::page::seal(&mut sealed);
    assert_eq!(
        read(&store, 4),
        sealed,
        "the forced version, sealed at its LSN"
    );
    // A second end of the same transaction forces nothing.
    store.transaction_ended(7, true, &NoLog).unwrap();
    assert_eq!(store.ipl_stats().commit_groups, 1);
}
