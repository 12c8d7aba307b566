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

/// A device that fails reads touching chosen sectors (latent errors).
struct Unreadable {
    inner: DeviceRef,
    bad: std::sync::Mutex<Vec<u64>>,
}

impl flashlab_devices::Device for Unreadable {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn capacity_bytes(&self) -> u64 {
        self.inner.capacity_bytes()
    }
    fn sector_bytes(&self) -> u32 {
        self.inner.sector_bytes()
    }
    fn read(&self, offset_bytes: u64, buf: &mut [u8]) -> std::result::Result<(), DeviceError> {
        let end = offset_bytes + buf.len() as u64;
        if let Some(&at) = self
            .bad
            .lock()
            .unwrap()
            .iter()
            .find(|&&at| offset_bytes <= at && at < end)
        {
            return Err(DeviceError::ReadFailed {
                device: "nand".into(),
                offset_bytes: at,
            });
        }
        self.inner.read(offset_bytes, buf)
    }
    fn write(&self, offset_bytes: u64, data: &[u8]) -> std::result::Result<(), DeviceError> {
        self.inner.write(offset_bytes, data)
    }
    fn flush(&self) -> std::result::Result<(), DeviceError> {
        self.inner.flush()
    }
    fn trim(&self, offset_bytes: u64, len_bytes: u64) -> std::result::Result<(), DeviceError> {
        self.inner.trim(offset_bytes, len_bytes)
    }
}

/// A page as the pool writes it: its id set and sealed.
fn sealed_page(rng: &mut ChaCha8Rng, page_no: u32) -> Vec<u8> {
    let mut p = page(rng, page_no);
    crate::page::set_id(&mut p, crate::page::PageId::new(0, page_no));
    crate::page::seal(&mut p);
    p
}

/// Flip a bit of the byte at `offset_bytes` on the medium.
fn flip(inner: &MemoryDevice, offset_bytes: u64) {
    let at = offset_bytes - offset_bytes % LOG_SECTOR_BYTES as u64;
    let mut s = vec![0u8; LOG_SECTOR_BYTES];
    flashlab_devices::Device::read(inner, at, &mut s).unwrap();
    s[(offset_bytes - at) as usize] ^= 0x10;
    flashlab_devices::Device::write(inner, at, &s).unwrap();
}

/// Regression (IPL media seeds): a log sector that fails its crc used to
/// fail every read and write of its unit for good. Now (IPL-6, IPL-7) a
/// group this store wrote loses only its own slot, whose read names the
/// damage; the next write of that page merges the unit, and every other
/// page keeps its last version. After a reopen the damaged group's slot is
/// not known: every slot of the unit reads as damage, and a merge programs
/// the others as pages no check accepts, never as an older version.
#[test]
fn a_damaged_log_sector_loses_only_its_slot_and_a_write_merges_it_away() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let (inner, device) = nand();
    let store = open(&device, StoreMode::Create, 8 << 10);
    let mut images: Vec<Vec<u8>> = (0..15).map(|n| page(&mut rng, n)).collect();
    for (n, p) in images.iter().enumerate() {
        store.write_page(n as u32, p).unwrap();
    }
    for n in [3usize, 5] {
        let next = update(&mut rng, &images[n]);
        store.note_update(n as u32, 1, 0, &images[n], &next);
        store.write_page(n as u32, &next).unwrap();
        images[n] = next;
    }
    // Page 3's group is log sector 1 of logical unit 0 (home: unit 1).
    let l = store.layout();
    flip(&inner, l.sector_bytes(1, 1) + 100);
    assert_eq!(read(&store, 5), images[5], "another slot's group is sound");
    let mut buf = vec![0u8; PAGE];
    let err = store.read_page(3, &mut buf).unwrap_err();
    assert!(crate::store::is_read_damage(&err), "{err}");
    assert!(
        err.to_string().contains("log sector 1 of logical unit 0"),
        "{err}"
    );
    images[3] = page(&mut rng, 3);
    store.write_page(3, &images[3]).unwrap();
    let s = store.ipl_stats();
    assert_eq!((s.merges, s.poisoned_slots), (1, 0), "{s:?}");
    for (n, p) in images.iter().enumerate() {
        assert_eq!(&read(&store, n as u32), p, "page {n}");
    }
    // A damaged group after a reopen: the slot is not known.
    let next = update(&mut rng, &images[7]);
    store.note_update(7, 1, 0, &images[7], &next);
    store.write_page(7, &next).unwrap();
    store.sync(&NoLog).unwrap();
    let phys = store.unit(0).phys;
    flip(&inner, l.sector_bytes(phys, 1) + 40);
    let again = open(&device, StoreMode::Open, 8 << 10);
    for n in [0u32, 7, 14] {
        let err = again.read_page(n, &mut buf).unwrap_err();
        assert!(err.to_string().contains("log sector 1"), "{err}");
    }
    images[0] = page(&mut rng, 0);
    again.write_page(0, &images[0]).unwrap();
    assert_eq!(read(&again, 0), images[0]);
    assert_eq!(again.ipl_stats().poisoned_slots, 14);
    for n in 1..15u32 {
        let got = read(&again, n);
        assert!(
            crate::page::verify(&got, crate::page::PageId::new(0, n), "data", 0).is_err(),
            "page {n}: a lost slot never reads as a page"
        );
    }
}

/// Regression (IPL media seeds): a latent read error on a commit sector
/// used to refuse the open. Now (IPL-9) the unit is known by its first log
/// sector (logical unit, generation) or by its sealed pages when it is the
/// logical unit's only version; an empty unit is free.
#[test]
fn an_unreadable_commit_sector_is_known_by_the_unit_it_holds() {
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let (_, nand) = nand();
    let device: DeviceRef = Arc::new(Unreadable {
        inner: nand,
        bad: std::sync::Mutex::new(Vec::new()),
    });
    let store = open(&device, StoreMode::Create, 4 << 10);
    let per = store.layout().pages_per_unit;
    let mut images: Vec<Vec<u8>> = (0..2 * per).map(|n| sealed_page(&mut rng, n)).collect();
    for (n, p) in images.iter().enumerate() {
        store.write_page(n as u32, p).unwrap();
    }
    // Merge both logical units (updates until the 4 KB segments fill).
    while store.unit(0).generation == 0 || store.unit(1).generation == 0 {
        for n in [0usize, per as usize] {
            let mut next = update(&mut rng, &images[n]);
            crate::page::seal(&mut next);
            store.note_update(n as u32, 1, 0, &images[n], &next);
            store.write_page(n as u32, &next).unwrap();
            images[n] = next;
        }
    }
    // Unit 0 logs again after its merge; unit 1 does not.
    let mut next = update(&mut rng, &images[1]);
    crate::page::seal(&mut next);
    store.note_update(1, 1, 0, &images[1], &next);
    store.write_page(1, &next).unwrap();
    images[1] = next;
    assert_eq!(
        store.unit(1).log_next,
        Some(1),
        "unit 1 has not logged since its merge"
    );
    store.sync(&NoLog).unwrap();
    let l = store.layout();
    let (a, b) = (store.unit(0).phys, store.unit(1).phys);
    let free_unit = l.physical_units - 1;
    let unreadable = Unreadable {
        inner: device.clone(),
        bad: std::sync::Mutex::new(vec![
            l.sector_bytes(a, 0),
            l.sector_bytes(b, 0),
            l.sector_bytes(free_unit, 0),
        ]),
    };
    let device: DeviceRef = Arc::new(unreadable);
    let again = open(&device, StoreMode::Open, 4 << 10);
    assert_eq!(again.unit(0).phys, a, "known by its log sector");
    assert_eq!(again.unit(1).phys, b, "known by its pages");
    for (n, p) in images.iter().enumerate() {
        assert_eq!(&read(&again, n as u32), p, "page {n}");
    }
}
