//! The page-store conformance suite: every store (in place,
//! log-structured, In-Page Logging) held to the same rules, PS-1..4 of
//! `store/mod.rs`, through the same calls. A new store is added to
//! [`KINDS`] and must pass every test here.

use std::sync::Arc;

use flashlab_devices::memory::MemoryDevice;
use flashlab_devices::nand_device::{ERASE_UNIT_BYTES_K9WAG08U1A, NandDevice, NandSpec};
use flashlab_devices::{Device, DeviceRef};
use flashlab_engine::buffer::LogForce;
use flashlab_engine::page::{self, PageId};
use flashlab_engine::store::{
    LogStructuredOptions, PageStore, StoreKind, StoreMode, StoreOptions, open_store_with,
};
use flashlab_engine::{Error, Result};
use flashlab_runtime::{Sim, SimConfig};

/// Every store the engine has.
const KINDS: [StoreKind; 3] = [StoreKind::InPlace, StoreKind::LogStructured, StoreKind::Ipl];

const PAGE: usize = 8192;
/// 48 erase units of raw NAND (6 MB); the other stores get the same bytes.
const DEVICE_BYTES: u64 = 48 * ERASE_UNIT_BYTES_K9WAG08U1A;
/// Pages the tests write: within every store's capacity on that device.
const PAGES: u32 = 40;

/// A store's device, and the memory under it (which a crash empties of
/// its unflushed writes).
struct Medium {
    memory: Arc<MemoryDevice>,
    device: DeviceRef,
}

fn medium(kind: StoreKind) -> Medium {
    let memory = Arc::new(MemoryDevice::new("conformance", DEVICE_BYTES));
    let device: DeviceRef = match kind {
        StoreKind::Ipl => {
            let spec = NandSpec::k9wag08u1a().with_capacity_bytes(DEVICE_BYTES);
            Arc::new(NandDevice::new(spec, memory.clone()).unwrap())
        }
        _ => memory.clone(),
    };
    Medium { memory, device }
}

/// Log-structured segments of 32 pages: 24 segments on the device.
const SEGMENT_BYTES: u64 = 32 * PAGE as u64;

fn open(kind: StoreKind, medium: &Medium, mode: StoreMode) -> Result<Arc<dyn PageStore>> {
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
    open_store_with(kind, device, PAGE, None, "data", mode, options)
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

fn sim<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    Sim::run(SimConfig::default(), move |_| f())
        .unwrap()
        .0
        .finished()
        .unwrap()
}

/// A new store of `kind` with pages 1.. written once (version 1), unsynced.
fn created_with_pages(kind: StoreKind) -> (Medium, Arc<dyn PageStore>) {
    let m = medium(kind);
    let store = open(kind, &m, StoreMode::Create).unwrap();
    for n in 1..PAGES {
        store.write_page(n, &image(n, 1)).unwrap();
    }
    (m, store)
}

/// PS-2: a page never written reads as zeros.
#[test]
fn ps2_a_page_never_written_reads_as_zeros() {
    sim(|| {
        for kind in KINDS {
            let m = medium(kind);
            let store = open(kind, &m, StoreMode::Create).unwrap();
            assert!(store.capacity_pages() >= u64::from(PAGES), "{kind}");
            assert_eq!(read(store.as_ref(), 7).unwrap(), vec![0u8; PAGE], "{kind}");
        }
    });
}

/// PS-1: after `sync`, every page written before it reads back its last
/// image, across a crash that loses every unflushed write; a page written
/// after the sync reads as one of its two versions.
#[test]
fn ps1_synced_pages_survive_a_crash() {
    sim(|| {
        for kind in KINDS {
            let (m, store) = created_with_pages(kind);
            for n in (1..PAGES).step_by(3) {
                store.write_page(n, &image(n, 2)).unwrap();
            }
            store.sync(&DurableLog).unwrap();
            store.write_page(5, &image(5, 3)).unwrap();
            drop(store);
            m.memory.crash();
            let store = open(kind, &m, StoreMode::Open).unwrap();
            for n in 1..PAGES {
                let got = read(store.as_ref(), n).unwrap();
                let synced = if (n - 1) % 3 == 0 { 2 } else { 1 };
                let ok = got == image(n, synced) || (n == 5 && got == image(n, 3));
                assert!(ok, "{kind}: page {n} lost its synced image");
            }
        }
    });
}

/// PS-1 without a crash: a clean reopen reads every page's last image,
/// and `read_pages` agrees with `read_page`.
#[test]
fn ps1_a_reopened_store_reads_every_last_image() {
    sim(|| {
        for kind in KINDS {
            let m = medium(kind);
            let store = open(kind, &m, StoreMode::Create).unwrap();
            let batch: Vec<(u32, Vec<u8>)> = (1..PAGES).map(|n| (n, image(n, 9))).collect();
            let refs: Vec<(u32, &[u8])> = batch.iter().map(|(n, p)| (*n, &p[..])).collect();
            store.write_batch(&refs, &Default::default()).unwrap();
            store.sync(&DurableLog).unwrap();
            drop(store);
            let store = open(kind, &m, StoreMode::Open).unwrap();
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
        }
    });
}

/// PS-3: damage on the medium under a synced page is reported, or caught
/// by the page's checksum and id; another page's bytes are never taken
/// for this page's.
#[test]
fn ps3_damage_is_reported_never_returned_as_the_page() {
    sim(|| {
        for kind in KINDS {
            let (m, store) = created_with_pages(kind);
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
            let store = open(kind, &m, StoreMode::Open);
            let Ok(store) = store else {
                continue; // refused at open, naming the damage: allowed
            };
            match read(store.as_ref(), 12) {
                Err(e) => assert!(!e.to_string().is_empty(), "{kind}"),
                Ok(got) => assert!(
                    page::verify(&got, PageId::new(0, 12), "data", offset).is_err(),
                    "{kind}: a damaged page 12 passed its checks"
                ),
            }
        }
    });
}

/// PS-4: opening a store on a device it did not format fails naming the
/// space (the in-place store keeps no metadata of its own: the database's
/// space header in page 0 is what refuses, see `db::roles`).
#[test]
fn ps4_a_store_never_opens_a_device_it_did_not_format() {
    sim(|| {
        for kind in KINDS.into_iter().filter(|k| *k != StoreKind::InPlace) {
            let m = medium(kind);
            match open(kind, &m, StoreMode::Open) {
                Ok(_) => panic!("{kind}: opened a device of zeros"),
                Err(e) => assert!(error_names_space(&e), "{kind}: {e}"),
            }
        }
    });
}

fn error_names_space(e: &Error) -> bool {
    e.to_string().contains("data")
}
