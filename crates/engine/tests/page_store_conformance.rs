//! The page-store conformance suite: every store (in place,
//! log-structured, In-Page Logging) held to the same rules, PS-1..4 of
//! `store/mod.rs` and the crash rules, through the same calls. A new store
//! is one more line of [`SUBJECTS`] and must pass every test here.

mod common;

use std::sync::Arc;

use flashlab_devices::fault::{FaultPlan, FaultyDevice, Role};
use flashlab_devices::memory::MemoryDevice;
use flashlab_devices::nand_device::{ERASE_UNIT_BYTES_K9WAG08U1A, NandDevice, NandSpec};
use flashlab_devices::store::{CrashedWrite, StoredDevice};
use flashlab_devices::{Device, DeviceRef};
use flashlab_engine::buffer::LogForce;
use flashlab_engine::page::{self, PageId};
use flashlab_engine::store::{
    LogStructuredOptions, PageStore, StoreKind, StoreMode, StoreOptions, open_store_with,
};
use flashlab_engine::{Error, Result};

/// What a crash may leave of a page written after the last `sync`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unsynced {
    /// Its old or its new image, whole (the store writes out of place, or
    /// makes each write durable before it returns).
    OldOrNew,
    /// Its old or new image, or a torn mix of them that fails the page's
    /// checksum (an overwrite in place: the pool repairs it from the log,
    /// BUF-9).
    OldNewOrDetectedTear,
}

/// A store under test: its kind, the medium it runs on, and its crash rule.
struct Subject {
    kind: StoreKind,
    /// The device the store is opened on, over the medium's memory.
    device: fn(Arc<MemoryDevice>) -> Arc<dyn StoredDevice>,
    unsynced: Unsynced,
}

/// Every store the engine has: a new store is one more line.
const SUBJECTS: [Subject; 3] = [
    Subject {
        kind: StoreKind::InPlace,
        device: plain,
        unsynced: Unsynced::OldNewOrDetectedTear,
    },
    Subject {
        kind: StoreKind::LogStructured,
        device: plain,
        unsynced: Unsynced::OldOrNew,
    },
    Subject {
        kind: StoreKind::Ipl,
        device: raw_nand,
        unsynced: Unsynced::OldOrNew,
    },
];

fn plain(bytes: Arc<MemoryDevice>) -> Arc<dyn StoredDevice> {
    bytes
}

fn raw_nand(bytes: Arc<MemoryDevice>) -> Arc<dyn StoredDevice> {
    let spec = NandSpec::k9wag08u1a().with_capacity_bytes(DEVICE_BYTES);
    Arc::new(NandDevice::new(spec, bytes).unwrap())
}

const PAGE: usize = 8192;
/// 48 erase units of raw NAND (6 MB); the other stores get the same bytes.
const DEVICE_BYTES: u64 = 48 * ERASE_UNIT_BYTES_K9WAG08U1A;
/// Pages the tests write: within every store's capacity on that device.
const PAGES: u32 = 40;

/// A store's device, the memory under it, and the fault layer between
/// them whose crash keeps, drops or tears the unflushed writes.
struct Medium {
    memory: Arc<MemoryDevice>,
    faults: Arc<FaultyDevice>,
    device: DeviceRef,
}

impl Medium {
    /// A crash that loses every unflushed write.
    fn crash(&self) {
        self.memory.crash();
    }

    /// A crash that keeps, drops or tears each unflushed write (seeded).
    fn crash_tearing(&self) -> Vec<CrashedWrite> {
        self.faults.crash()
    }
}

fn medium(subject: &Subject) -> Medium {
    medium_with(subject, FaultPlan::none(1))
}

fn medium_with(subject: &Subject, plan: FaultPlan) -> Medium {
    let memory = Arc::new(MemoryDevice::new("conformance", DEVICE_BYTES));
    let faults = Arc::new(FaultyDevice::new(
        (subject.device)(memory.clone()),
        Role::Data { page_bytes: PAGE },
        plan,
    ));
    let device: DeviceRef = faults.clone();
    Medium {
        memory,
        faults,
        device,
    }
}
/// Log-structured segments of 32 pages: 24 segments on the device.
const SEGMENT_BYTES: u64 = 32 * PAGE as u64;

fn open(subject: &Subject, medium: &Medium, mode: StoreMode) -> Result<Arc<dyn PageStore>> {
    let options = StoreOptions {
        log_structured: LogStructuredOptions {
            segment_bytes: SEGMENT_BYTES,
            // Opening says the database exists (its manifest does): zeros
            // where the store's metadata should be are then damage, not a
            // creation cut short (REC-2).
            created: mode == StoreMode::Open,
            ..LogStructuredOptions::default()
        },
        ..StoreOptions::default()
    };
    let device = medium.device.clone();
    open_store_with(subject.kind, device, PAGE, None, "data", mode, options)
}

/// A log that is always durable, and ends past every page LSN the tests
/// write (the WAL rule holds): the suite tests the stores, not the log.
struct DurableLog;

/// The end of [`DurableLog`]: past every version [`image`] is given.
const LOG_END_LSN: u64 = 1 << 20;

impl LogForce for DurableLog {
    fn flush_to(&self, _lsn: u64) -> Result<()> {
        Ok(())
    }

    fn end_lsn(&self) -> u64 {
        LOG_END_LSN
    }
}

/// A valid, sealed image of page `n` in version `version` (its LSN).
fn image(n: u32, version: u64) -> Vec<u8> {
    let mut p = vec![0u8; PAGE];
    for (i, b) in p.iter_mut().enumerate().skip(page::PAGE_HEADER_BYTES) {
        *b = (i as u64 ^ (u64::from(n) * 31) ^ (version * 7)) as u8;
    }
    page::set_id(&mut p, PageId::new(0, n));
    page::set_lsn(&mut p, version);
    page::seal(&mut p);
    p
}

fn read(store: &dyn PageStore, n: u32) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; PAGE];
    store.read_page(n, &mut buf)?;
    Ok(buf)
}

use common::run as sim;

/// In the simulated world, `check` each store of [`SUBJECTS`] in turn.
fn each_subject(check: impl Fn(&Subject) + Send + 'static) {
    sim(move || {
        for subject in &SUBJECTS {
            check(subject);
        }
    });
}

/// A new store of `subject`'s kind on a fresh medium with faults `plan`.
fn created(subject: &Subject, plan: FaultPlan) -> (Medium, Arc<dyn PageStore>) {
    let m = medium_with(subject, plan);
    let store = open(subject, &m, StoreMode::Create).unwrap();
    (m, store)
}

/// A new store of `subject`'s kind with pages 1.. written once (version 1), unsynced.
fn created_with_pages(subject: &Subject, plan: FaultPlan) -> (Medium, Arc<dyn PageStore>) {
    let (m, store) = created(subject, plan);
    for n in 1..PAGES {
        store.write_page(n, &image(n, 1)).unwrap();
    }
    (m, store)
}

/// Write `pages` at `version` and sync, then write `(page, version)`
/// unsynced, crash losing every unflushed write, and reopen.
fn sync_write_and_crash(
    subject: &Subject,
    m: &Medium,
    store: Arc<dyn PageStore>,
    pages: impl Iterator<Item = u32>,
    version: u64,
    (unsynced, unsynced_version): (u32, u64),
) -> Arc<dyn PageStore> {
    for n in pages {
        store.write_page(n, &image(n, version)).unwrap();
    }
    store.sync(&DurableLog).unwrap();
    let after = image(unsynced, unsynced_version);
    store.write_page(unsynced, &after).unwrap();
    drop(store);
    m.crash();
    open(subject, m, StoreMode::Open).unwrap()
}

/// PS-2: a page never written reads as zeros.
#[test]
fn ps2_a_page_never_written_reads_as_zeros() {
    each_subject(|subject| {
        let kind = subject.kind;
        let (_m, store) = created(subject, FaultPlan::none(1));
        assert!(store.info().capacity_pages >= u64::from(PAGES), "{kind}");
        assert_eq!(read(store.as_ref(), 7).unwrap(), vec![0u8; PAGE], "{kind}");
    });
}

/// PS-1: after `sync`, every page written before it reads back its last
/// image, across a crash that loses every unflushed write; a page written
/// after the sync reads as one of its two versions.
#[test]
fn ps1_synced_pages_survive_a_crash() {
    each_subject(|subject| {
        let kind = subject.kind;
        let (m, store) = created_with_pages(subject, FaultPlan::none(1));
        let rewritten = (1..PAGES).step_by(3);
        let store = sync_write_and_crash(subject, &m, store, rewritten, 2, (5, 3));
        for n in 1..PAGES {
            let got = read(store.as_ref(), n).unwrap();
            let synced = if (n - 1) % 3 == 0 { 2 } else { 1 };
            let ok = got == image(n, synced) || (n == 5 && got == image(n, 3));
            assert!(ok, "{kind}: page {n} lost its synced image");
        }
    });
}

/// PS-1 without a crash: a clean reopen reads every page's last image,
/// and `read_pages` agrees with `read_page`.
#[test]
fn ps1_a_reopened_store_reads_every_last_image() {
    each_subject(|subject| {
        let kind = subject.kind;
        let (m, store) = created(subject, FaultPlan::none(1));
        let batch: Vec<(u32, Vec<u8>)> = (1..PAGES).map(|n| (n, image(n, 9))).collect();
        let refs: Vec<(u32, &[u8])> = batch.iter().map(|(n, p)| (*n, &p[..])).collect();
        store.write_batch(&refs, &Default::default()).unwrap();
        store.sync(&DurableLog).unwrap();
        drop(store);
        let store = open(subject, &m, StoreMode::Open).unwrap();
        let mut run = vec![0u8; PAGE * 4];
        store.read_pages(10, &mut run).unwrap();
        for (i, got) in run.chunks(PAGE).enumerate() {
            let n = 10 + i as u32;
            let single = read(store.as_ref(), n).unwrap() == image(n, 9);
            assert!(single, "{kind}: read_page, page {n}: not its last image");
            assert!(
                got == &image(n, 9)[..],
                "{kind}: read_pages, page {n}: not its last image"
            );
        }
    });
}

/// PS-3: damage on the medium under a synced page is reported, or caught
/// by the page's checksum and id; another page's bytes are never taken
/// for this page's.
#[test]
fn ps3_damage_is_reported_never_returned_as_the_page() {
    each_subject(|subject| {
        let kind = subject.kind;
        let (m, store) = created_with_pages(subject, FaultPlan::none(1));
        store.sync(&DurableLog).unwrap();
        let offset = store.location_of(12);
        drop(store);
        // Flip a byte in the middle of page 12's image on the medium.
        let at = offset + PAGE as u64 / 2;
        let mut sector = vec![0u8; 512];
        let sector_at = at / 512 * 512;
        m.memory.read(sector_at, &mut sector).unwrap();
        sector[(at - sector_at) as usize] ^= 0x5a;
        m.memory.write(sector_at, &sector).unwrap();
        m.memory.flush().unwrap();
        let store = open(subject, &m, StoreMode::Open);
        let Ok(store) = store else {
            return; // refused at open, naming the damage: allowed
        };
        match read(store.as_ref(), 12) {
            Err(e) => assert!(!e.to_string().is_empty(), "{kind}"),
            Ok(got) => assert!(
                page::verify(&got, PageId::new(0, 12), "data", offset).is_err(),
                "{kind}: a damaged page 12 passed its checks"
            ),
        }
    });
}

/// PS-4: opening a store on a device it did not format fails naming the
/// space (the in-place store keeps no metadata of its own: the database's
/// space header in page 0 is what refuses, see `db::roles`).
#[test]
fn ps4_a_store_never_opens_a_device_it_did_not_format() {
    sim(|| {
        for subject in SUBJECTS.iter().filter(|s| s.kind != StoreKind::InPlace) {
            let kind = subject.kind;
            let m = medium(subject);
            match open(subject, &m, StoreMode::Open) {
                Ok(_) => panic!("{kind}: opened a device of zeros"),
                Err(e) => assert!(error_names_space(&e), "{kind}: {e}"),
            }
        }
    });
}

fn error_names_space(e: &Error) -> bool {
    e.to_string().contains("data")
}

/// What a page written at `old` and rewritten at `new` without a sync may
/// read as after a crash, by the store's rule.
fn allowed_after_crash(rule: Unsynced, n: u32, got: &[u8], old: u64, new: u64) -> bool {
    if got == &image(n, old)[..] || got == &image(n, new)[..] {
        return true;
    }
    rule == Unsynced::OldNewOrDetectedTear
        && page::verify(got, PageId::new(0, n), "data", 0).is_err()
}

/// Check every page 1.. after a crash: `rewritten` pages by the store's
/// rule, the others exactly at `synced`.
fn check_after_crash(
    subject: &Subject,
    store: &dyn PageStore,
    rewritten: impl Fn(u32) -> bool,
    (synced, new): (u64, u64),
) {
    let kind = subject.kind;
    for n in 1..PAGES {
        let got = match read(store, n) {
            Ok(got) => got,
            Err(e) => panic!("{kind}: page {n} after a crash: {e}"),
        };
        let ok = if rewritten(n) {
            allowed_after_crash(subject.unsynced, n, &got, synced, new)
        } else {
            got == image(n, synced)
        };
        assert!(ok, "{kind}: page {n} after a crash breaks the store's rule");
    }
}

/// The crash rules: pages rewritten after the last sync, then a crash that
/// keeps, drops or tears each unflushed write: every synced page reads its
/// synced image (PS-1), every rewritten one what the store's rule allows
/// ([`Unsynced`]), and the store opens.
#[test]
fn crash_keeps_synced_pages_and_unsynced_ones_by_the_store_rule() {
    each_subject(|subject| {
        for seed in 1..=4 {
            let (m, store) = created_with_pages(subject, FaultPlan::crashes(seed));
            store.sync(&DurableLog).unwrap();
            for n in (1..PAGES).step_by(2) {
                store.write_page(n, &image(n, 2)).unwrap();
            }
            drop(store);
            m.crash_tearing();
            let store = open(subject, &m, StoreMode::Open).unwrap();
            check_after_crash(subject, store.as_ref(), |n| n % 2 == 1, (1, 2));
        }
    });
}

/// A store reopened after a tearing crash goes on: what it writes and
/// syncs then survives a second crash, whatever the first one left.
#[test]
fn a_store_reopened_after_a_crash_keeps_its_next_syncs() {
    each_subject(|subject| {
        let (m, store) = created_with_pages(subject, FaultPlan::crashes(9));
        store.sync(&DurableLog).unwrap();
        for n in 1..PAGES {
            store.write_page(n, &image(n, 2)).unwrap();
        }
        drop(store);
        m.crash_tearing();
        let store = open(subject, &m, StoreMode::Open).unwrap();
        let store = sync_write_and_crash(subject, &m, store, 1..PAGES, 3, (4, 4));
        check_after_crash(subject, store.as_ref(), |n| n == 4, (3, 4));
    });
}
