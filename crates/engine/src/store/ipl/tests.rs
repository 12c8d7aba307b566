//! Tests of the IPL store over an in-memory raw NAND device.

use std::sync::Arc;

use flashlab_devices::memory::MemoryDevice;
use flashlab_devices::nand_device::{NandDevice, NandSpec};
use flashlab_devices::store::{CrashFate, StoredDevice};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::error::error_text;

const PAGE: usize = 8192;
const UNITS: u64 = 24;

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

/// A generator seeded `seed` and a new store with `segment`-byte log
/// segments on fresh NAND: the generator, the NAND's memory, its device
/// and the store.
fn new_store(seed: u64, segment: u64) -> (ChaCha8Rng, Arc<MemoryDevice>, DeviceRef, IplStore) {
    let rng = ChaCha8Rng::seed_from_u64(seed);
    let (memory, device) = nand();
    let store = open(&device, StoreMode::Create, segment);
    (rng, memory, device, store)
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

/// [`update`], sealed (its checksum over the change), as a write-back
/// leaves a page.
fn sealed_update(rng: &mut ChaCha8Rng, p: &[u8]) -> Vec<u8> {
    let mut q = update(rng, p);
    crate::page::seal(&mut q);
    q
}

/// `got` and `want` hold the same body (the header, with its checksum and
/// LSN, may differ).
#[track_caller]
fn assert_same_body(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got[PAGE_BODY_OFFSET..], want[PAGE_BODY_OFFSET..], "{what}");
}

fn read(store: &IplStore, page_no: u32) -> Vec<u8> {
    let mut buf = vec![0u8; PAGE];
    store.read_page(page_no, &mut buf).unwrap();
    buf
}

/// Every page of `store` from 0 reads back its image in `images`; `when`
/// names the moment in a failure.
fn assert_reads_back(store: &IplStore, images: &[Vec<u8>], when: &str) {
    for (n, want) in images.iter().enumerate() {
        assert_eq!(&read(store, n as u32), want, "{when}: page {n}");
    }
}

struct NoLog;
impl LogForce for NoLog {
    fn flush_to(&self, _lsn: u64) -> Result<()> {
        Ok(())
    }
}

/// The whole-state check holds after writes, updates, syncs, a crash and
/// a reopen, and catches a unit that is both mapped and free (IPL-5,
/// IPL-12) and a diverged page that keeps records (IPL-1).
#[test]
fn the_whole_state_check_holds_and_catches_broken_state() {
    let (memory, device) = nand();
    let store = open(&device, StoreMode::Create, 8 << 10);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut images = write_pages(&store, &mut rng, 40);
    store.sync(&NoLog).unwrap();
    store.check();
    for (n, image) in images.iter_mut().enumerate().step_by(3) {
        let next = update(&mut rng, image);
        store.note_update(n as u32, 7, 0, image, &next);
        *image = next;
    }
    store.check();
    store.transaction_ended(7, false, 0, &NoLog).unwrap();
    store.sync(&NoLog).unwrap();
    drop(store);
    memory.crash();
    let store = open(&device, StoreMode::Open, 8 << 10);
    store.check();
    let caught = |store: &IplStore| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| store.check())).is_err()
    };
    let mapped = store.unit(0).phys;
    store.free.lock().unwrap().push((mapped, true));
    assert!(caught(&store), "IPL-12: a mapped unit listed free passed");
    store.free.lock().unwrap().pop();
    assert!(!caught(&store));
    let mut diverged = PendingPage {
        diverged: true,
        ..PendingPage::at(0)
    };
    diverged
        .records
        .push(sector::records_of(0, 1, &[(64, vec![1])])[0].clone());
    store.pending.lock().unwrap().insert(3, diverged);
    assert!(caught(&store), "IPL-1: a diverged page with records passed");
}

#[test]
fn the_layout_of_a_small_device() {
    let (_, device) = nand();
    let store = open(&device, StoreMode::Create, 8 << 10);
    // 24 units: the descriptor, the marker ring (2), 2 spares and 8 for
    // a force's deferred erases (IPL-12), 11 logical units of 15 pages.
    assert_eq!(store.layout().logical_units, 11);
    assert_eq!(store.info().capacity_pages, 165);
    assert_eq!(read(&store, 7), vec![0u8; PAGE], "PS-2");
}

#[test]
fn updates_go_to_log_sectors_and_pages_are_rebuilt_from_them() {
    let (mut rng, _, _device, store) = new_store(1, 8 << 10);
    let mut images = write_pages(&store, &mut rng, 15);
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
    assert_reads_back(&store, &images, "after the writes");
    assert!(store.ipl_stats().log_sectors_read > 0);
}

/// Random updates on three units: merges happen, every page reads its
/// last image, before and after a reopen; smaller segments merge more.
#[test]
fn a_full_log_segment_merges_and_the_map_survives_a_reopen() {
    let mut merges = Vec::new();
    for segment in [4u64 << 10, 8 << 10, 16 << 10, 32 << 10] {
        let (mut rng, _, device, store) = new_store(2, segment);
        let pages = store.layout().pages_per_unit * 3;
        let mut images = write_pages(&store, &mut rng, pages);
        for _ in 0..600 {
            let n = rng.random_range(0..pages) as usize;
            let next = update(&mut rng, &images[n]);
            store.note_update(n as u32, 7, 0, &images[n], &next);
            store.write_page(n as u32, &next).unwrap();
            images[n] = next;
        }
        let s = store.ipl_stats();
        assert!(s.merges > 0 && s.erases >= s.merges, "{s:?}");
        assert_reads_back(&store, &images, "after the merges");
        store.sync(&NoLog).unwrap();
        let again = open(&device, StoreMode::Open, segment);
        assert_reads_back(&again, &images, "after the reopen");
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
    let err = error_text(IplStore::open(
        device.clone(),
        PAGE,
        None,
        8 << 10,
        "data",
        StoreMode::Open,
    ));
    assert!(
        err.contains("'data'") && err.contains("no IPL space"),
        "{err}"
    );
    open(&device, StoreMode::Create, 8 << 10);
    let err = error_text(IplStore::open(
        device.clone(),
        PAGE,
        None,
        16 << 10,
        "data",
        StoreMode::Open,
    ));
    assert!(err.contains("no IPL space"), "{err}");
    let memory: DeviceRef = Arc::new(MemoryDevice::new("memory", UNITS * ERASE_UNIT_BYTES));
    let err = error_text(IplStore::open(
        memory,
        PAGE,
        None,
        8 << 10,
        "data",
        StoreMode::Create,
    ));
    assert!(err.contains("erased raw NAND"), "{err}");
}

/// A device whose writes, flushes and erases fail from the `n`th on (a
/// power cut in the middle of a force); `u64::MAX`: never.
struct Cut {
    inner: DeviceRef,
    left: std::sync::atomic::AtomicU64,
}

impl Cut {
    fn new(inner: DeviceRef) -> Arc<Cut> {
        Arc::new(Cut {
            inner,
            left: std::sync::atomic::AtomicU64::new(u64::MAX),
        })
    }
    fn arm(&self, n: u64) {
        self.left.store(n, std::sync::atomic::Ordering::SeqCst);
    }
    fn step(&self) -> std::result::Result<(), DeviceError> {
        use std::sync::atomic::Ordering::SeqCst;
        let left = self.left.load(SeqCst);
        if left == 0 {
            return Err(DeviceError::Refused {
                device: "nand".into(),
                problem: "power cut".into(),
            });
        }
        if left != u64::MAX {
            self.left.store(left - 1, SeqCst);
        }
        Ok(())
    }
    fn is_cut(&self) -> bool {
        self.left.load(std::sync::atomic::Ordering::SeqCst) == 0
    }
}

impl flashlab_devices::Wrapper for Cut {
    fn inner(&self) -> &dyn flashlab_devices::Device {
        &*self.inner
    }
    fn write(&self, offset_bytes: u64, data: &[u8]) -> std::result::Result<(), DeviceError> {
        self.step()?;
        self.inner.write(offset_bytes, data)
    }
    fn flush(&self) -> std::result::Result<(), DeviceError> {
        self.step()?;
        self.inner.flush()
    }
    fn trim(&self, offset_bytes: u64, len_bytes: u64) -> std::result::Result<(), DeviceError> {
        self.step()?;
        self.inner.trim(offset_bytes, len_bytes)
    }
}

/// A log whose end the test sets (the LSN a force captures).
struct EndLog(std::sync::atomic::AtomicU64);
impl LogForce for EndLog {
    fn flush_to(&self, _lsn: u64) -> Result<()> {
        Ok(())
    }
    fn end_lsn(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl EndLog {
    /// A log ending at `lsn`.
    fn at(lsn: u64) -> EndLog {
        EndLog(std::sync::atomic::AtomicU64::new(lsn))
    }

    /// Move the log's end to `lsn`.
    fn set_end(&self, lsn: u64) {
        self.0.store(lsn, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Lose power: every write not flushed is kept, dropped or torn.
fn crash(inner: &MemoryDevice, seed: u64) {
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
}

/// Random histories of noted changes (and, sometimes, changes the store
/// is not told of) on two units, each write a force; a power cut at a
/// random device call inside a random force, then a crash that keeps,
/// drops or tears every unflushed write. After the reopen every page
/// reads exactly its version at the last marker (the cut force's own, if
/// its marker survived the cut: then every page is at it): the cut force's groups
/// (sequence above the marker), its merges' new copies and its in-place
/// programs are all left out (IPL-11, IPL-12), and the store goes on.
#[test]
fn a_force_cut_anywhere_leaves_every_page_at_the_last_marker() {
    for seed in 0..60u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(100 + seed);
        let (inner, nand, cut, store) = store_behind_a_cut(4 << 10);
        // Page LSNs follow the log's end, as in the engine: an in-place
        // program of a cut force is known by its LSN beyond L* (IPL-5).
        let log = Arc::new(EndLog::at(0));
        store.attach_log(log.clone());
        let pages = store.layout().pages_per_unit * 2;
        let mut current: Vec<Vec<u8>> = vec![vec![0u8; PAGE]; pages as usize];
        let mut durable = current.clone();
        let mut marked_before = 0;
        let steps = rng.random_range(20..300);
        let cut_at = rng.random_range(0..steps);
        for step in 0..steps {
            if step == cut_at {
                cut.arm(rng.random_range(0..12));
            }
            let n = rng.random_range(0..pages) as usize;
            let last = current[n].clone();
            let mut next = if last.iter().all(|&b| b == 0) {
                sealed_page(&mut rng, n as u32)
            } else {
                update(&mut rng, &last)
            };
            let lsn = step + 1;
            log.set_end(lsn);
            crate::page::set_lsn(&mut next, lsn);
            crate::page::seal(&mut next);
            if rng.random_bool(0.8) {
                store.note_update(n as u32, 1, lsn, &last, &next);
            }
            marked_before = store.marker().0;
            let written = store.write_page(n as u32, &next);
            current[n] = next;
            match written {
                Ok(()) => durable = current.clone(),
                Err(_) => {
                    assert!(cut.is_cut(), "seed {seed}: only the cut fails a force");
                    break;
                }
            }
        }
        crash(&inner, seed);
        let again = open(&nand, StoreMode::Open, 4 << 10);
        again.attach_log(log.clone());
        // The cut force's marker may have reached the medium before the
        // cut (a flush or a deferred erase failed): then the force is
        // durable whole (all or nothing).
        if again.marker().0 > marked_before {
            durable = current.clone();
        }
        for (n, want) in durable.iter().enumerate() {
            assert!(
                read(&again, n as u32) == *want,
                "seed {seed}: page {n} is not its version at the last marker"
            );
        }
        // The store goes on working after the crash, and again after a
        // second reopen (nothing of the cut force comes back).
        log.set_end(2_000_000);
        for n in 0..pages {
            let mut p = sealed_page(&mut rng, n);
            crate::page::set_lsn(&mut p, 1_000_000 + u64::from(n));
            crate::page::seal(&mut p);
            again.write_page(n, &p).unwrap();
            durable[n as usize] = p;
        }
        assert_reads_back(&again, &durable, &format!("seed {seed}, before the reopen"));
        drop(again);
        let third = open(&nand, StoreMode::Open, 4 << 10);
        assert_reads_back(&third, &durable, &format!("seed {seed}"));
    }
}

/// Regression-style check of IPL-12: a force whose write merges a unit
/// keeps the old copy until its marker; a cut before the marker leaves
/// the old copy in force at the reopen, and the new copy is erased.
#[test]
fn a_deferred_erase_merge_cut_before_the_marker_leaves_the_old_copy_in_force() {
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    let (inner, nand, cut, store) = store_behind_a_cut(4 << 10);
    let per = store.layout().pages_per_unit;
    let mut images = write_sealed_pages(&store, &mut rng, per);
    // Fill the segment with groups of page 0 until the next one merges.
    let home = store.unit(0).phys;
    loop {
        let next = sealed_update(&mut rng, &images[0]);
        let free = store.unit(0).log_next.unwrap_or(1);
        if usize::from(free) + 2 > usize::from(store.layout().segment_sectors()) {
            break;
        }
        store.write_page(0, &next).unwrap();
        images[0] = next;
    }
    let (marked, _) = store.marker();
    // The next write merges: pages programmed, flush, commit sector,
    // flush, (old copy kept), flush, marker: cut at the marker's write.
    let mut big = update(&mut rng, &images[1]);
    big[PAGE_BODY_OFFSET..PAGE / 2].fill(0x5A);
    crate::page::seal(&mut big);
    let writes_before_marker = per as u64 + 4; // pages, flush, commit sector, flush, flush
    cut.arm(writes_before_marker);
    let err = store.write_page(1, &big);
    assert!(err.is_err(), "the cut falls in the force");
    let s = store.ipl_stats();
    assert_eq!((s.merges, s.deferred_erases), (1, 1), "{s:?}");
    assert_ne!(store.unit(0).phys, home, "the merge moved the unit");
    crash(&inner, 3);
    let again = open(&nand, StoreMode::Open, 4 << 10);
    assert_eq!(again.marker().0, marked, "the cut force has no marker");
    assert_eq!(again.unit(0).phys, home, "the old copy is in force");
    assert_reads_back(&again, &images, "after the cut and the reopen");
}

/// IPL-11: groups of a force cut before its marker are merged away at the
/// open, and later forces take sequence numbers above them, so a later
/// marker never revives them.
#[test]
fn sequence_numbers_of_an_unmarked_force_are_never_revived() {
    let mut rng = ChaCha8Rng::seed_from_u64(22);
    let (inner, nand, cut, store) = store_behind_a_cut(8 << 10);
    let log = EndLog::at(10);
    let mut images = write_sealed_pages(&store, &mut rng, 20);
    // Two logged versions of pages 3 and 17, marked.
    for n in [3usize, 17] {
        let next = sealed_update(&mut rng, &images[n]);
        store.note_update(n as u32, 1, crate::page::lsn(&next), &images[n], &next);
        store.force(&log).unwrap();
        images[n] = read(&store, n as u32);
    }
    let (f_star, _) = store.marker();
    // A force whose groups reach flash but whose marker does not.
    for n in [3usize, 17] {
        let next = update(&mut rng, &images[n]);
        store.note_update(n as u32, 1, 99, &images[n], &next);
    }
    log.set_end(20);
    cut.arm(3); // group, group, device flush: the marker is cut
    assert!(store.force(&log).is_err());
    crash(&inner, 1);
    let again = open(&nand, StoreMode::Open, 8 << 10);
    assert_eq!(again.marker(), (f_star, 10));
    assert!(
        again.ipl_stats().open_merges >= 1,
        "unmarked groups merged away"
    );
    assert!(
        again.next_seq.load(Ordering::SeqCst) > f_star + 1,
        "sequence numbers go on above the unmarked force"
    );
    // A later marker: the unmarked groups stay gone.
    let next = sealed_update(&mut rng, &images[5]);
    again.note_update(5, 1, crate::page::lsn(&next), &images[5], &next);
    again.force(&log).unwrap();
    images[5] = read(&again, 5);
    drop(again);
    let third = open(&nand, StoreMode::Open, 8 << 10);
    assert!(third.marker().0 > f_star + 1);
    assert_reads_back(&third, &images, "after a later marker and a reopen");
}

/// A commit is covered by a marker before it is acknowledged (IPL-13): a
/// commit forces the space once (its records, sealed at their LSN, and a
/// marker at the log's end); a commit already covered forces nothing; an
/// abort forces nothing.
#[test]
fn a_commit_forces_the_space_once_and_an_abort_does_not() {
    let (mut rng, _device, store, log, _images) = store_of_sealed_pages(5, 8 << 10, 15, 0);
    let base = read(&store, 4);
    let next = update(&mut rng, &base);
    store.note_update(4, 7, 900, &base, &next);
    let other = update(&mut rng, &read(&store, 5));
    store.note_update(5, 8, 901, &read(&store, 5), &other);
    log.set_end(950);
    store.transaction_ended(8, false, 0, &log).unwrap();
    let before = store.ipl_stats();
    assert_eq!(before.forces, 15, "one force per write, none for the abort");
    store.transaction_ended(7, true, 940, &log).unwrap();
    let after = store.ipl_stats();
    assert_eq!(
        (
            after.forces - before.forces,
            after.force_pages - before.force_pages
        ),
        (1, 2),
        "one force, both pages (the state at one LSN): {after:?}"
    );
    assert_eq!(store.marker().1, 950);
    let mut sealed = next.clone();
    crate::page::set_lsn(&mut sealed, 900);
    crate::page::seal(&mut sealed);
    assert_eq!(
        read(&store, 4),
        sealed,
        "the forced version, sealed at its LSN"
    );
    // A commit the marker covers already forces nothing.
    store.transaction_ended(9, true, 945, &log).unwrap();
    assert_eq!(store.ipl_stats().forces, after.forces);
}

/// A device that fails reads touching chosen sectors (latent errors).
struct Unreadable {
    inner: DeviceRef,
    bad: std::sync::Mutex<Vec<u64>>,
}

impl flashlab_devices::Wrapper for Unreadable {
    fn inner(&self) -> &dyn flashlab_devices::Device {
        &*self.inner
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
}

/// A page as the pool writes it: its id set and sealed.
/// A store of `segment`-byte log segments, formatted on a NAND device
/// behind a power-cut switch: the memory under the NAND, the NAND, the
/// switch, the store.
fn store_behind_a_cut(segment: u64) -> (Arc<MemoryDevice>, DeviceRef, Arc<Cut>, IplStore) {
    let (inner, nand) = nand();
    let cut = Cut::new(nand.clone());
    let device: DeviceRef = cut.clone();
    let store = open(&device, StoreMode::Create, segment);
    (inner, nand, cut, store)
}

/// Random sealed images of pages `0..count`, each written to `store`.
/// Pages `0..count` of `store` written with the images `image` gives
/// them; those images.
fn write_images(store: &IplStore, count: u32, image: impl FnMut(u32) -> Vec<u8>) -> Vec<Vec<u8>> {
    let images: Vec<Vec<u8>> = (0..count).map(image).collect();
    for (n, p) in images.iter().enumerate() {
        store.write_page(n as u32, p).unwrap();
    }
    images
}

/// Pages `0..count` written with random bytes ([`page`]); their images.
fn write_pages(store: &IplStore, rng: &mut ChaCha8Rng, count: u32) -> Vec<Vec<u8>> {
    write_images(store, count, |n| page(rng, n))
}

/// Pages `0..count` written as valid sealed pages; their images.
fn write_sealed_pages(store: &IplStore, rng: &mut ChaCha8Rng, count: u32) -> Vec<Vec<u8>> {
    write_images(store, count, |n| sealed_page(rng, n))
}

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

/// Regression (IPL media seeds): a log sector that fails its crc does not
/// fail every read and write of its unit for good (IPL-6, IPL-7): a
/// group this store wrote loses only its own slot, whose read names the
/// damage; the next write of that page merges the unit, and every other
/// page keeps its last version. After a reopen the damaged group's slot is
/// not known: every slot of the unit reads as damage, and a merge programs
/// the others as pages no check accepts, never as an older version.
#[test]
fn a_damaged_log_sector_loses_only_its_slot_and_a_write_merges_it_away() {
    let (mut rng, inner, device, store) = new_store(11, 8 << 10);
    let mut images = write_pages(&store, &mut rng, 15);
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
    assert_reads_back(&store, &images, "after the merge");
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
/// does not refuse the open (IPL-9): the unit is known by its first log
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
    // Every page LSN (random here) is at or before the marker's L.
    store.attach_log(Arc::new(EndLog::at(u64::MAX)));
    let per = store.layout().pages_per_unit;
    let mut images: Vec<Vec<u8>> = (0..2 * per).map(|n| sealed_page(&mut rng, n)).collect();
    for (n, p) in images.iter().enumerate() {
        store.write_page(n as u32, p).unwrap();
    }
    // Merge both logical units (updates until the 4 KB segments fill).
    // Transaction 0: no active transaction's records to carry (IPL-SEL).
    while store.unit(0).generation == 0 || store.unit(1).generation == 0 {
        for n in [0usize, per as usize] {
            let next = sealed_update(&mut rng, &images[n]);
            store.note_update(n as u32, 0, 0, &images[n], &next);
            store.write_page(n as u32, &next).unwrap();
            images[n] = next;
        }
    }
    // Unit 0 logs again after its merge; unit 1 does not.
    let next = sealed_update(&mut rng, &images[1]);
    store.note_update(1, 0, 0, &images[1], &next);
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
    let free_unit = store.free.lock().unwrap()[0].0;
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
    assert_reads_back(&again, &images, "at the reopen");
}

/// What a test of a store of sealed pages works with: the seeded
/// generator, the device, the store, its log, and the pages' images.
type SealedStore = (ChaCha8Rng, DeviceRef, IplStore, EndLog, Vec<Vec<u8>>);

/// A new store with `segment`-byte log segments holding `count` sealed
/// pages (written in place, IPL-5), and a log ending at `end_lsn`.
fn store_of_sealed_pages(seed: u64, segment: u64, count: u32, end_lsn: u64) -> SealedStore {
    let (mut rng, _, device, store) = new_store(seed, segment);
    let images = write_sealed_pages(&store, &mut rng, count);
    (rng, device, store, EndLog::at(end_lsn), images)
}

/// A new store whose logical unit 0 holds 15 sealed pages, with a log at
/// LSN 1.
fn unit_of_sealed_pages(seed: u64, segment: u64) -> SealedStore {
    store_of_sealed_pages(seed, segment, 15, 1)
}

/// Fill unit 0's log segment with store-own (transaction 0) groups of
/// page `filler` until it merges; returns the LSN reached.
fn merge_unit_zero(
    store: &IplStore,
    rng: &mut ChaCha8Rng,
    log: &EndLog,
    filler: u32,
    mut lsn: u64,
) -> u64 {
    let merges = store.ipl_stats().merges;
    let mut other = read(store, filler);
    while store.ipl_stats().merges == merges {
        let next = sealed_update(rng, &other);
        store.note_update(filler, 0, lsn, &other, &next);
        log.set_end(lsn);
        store.force(log).unwrap();
        other = next;
        lsn += 1;
    }
    lsn
}

/// IPL-SEL (the slides' selective merge): an aborted transaction's records
/// on flash and its rollback's compensating records are left out when the
/// unit merges; the page reads byte-identical to before the transaction.
#[test]
fn a_selective_merge_leaves_an_aborted_transactions_records_out() {
    let (mut rng, _device, store, log, before) = unit_of_sealed_pages(31, 4 << 10);
    // Transaction 9 changes page 4 twice; its rollback restores the body.
    let mid = update(&mut rng, &before[4]);
    let changed = update(&mut rng, &mid);
    store.note_update(4, 9, 2, &before[4], &mid);
    store.note_update(4, 9, 3, &mid, &changed);
    log.set_end(3);
    store.force(&log).unwrap(); // its records reach the log (a write-back)
    let mut restored = changed.clone();
    restored[PAGE_BODY_OFFSET..].copy_from_slice(&before[4][PAGE_BODY_OFFSET..]);
    store.note_update(4, 9, 4, &changed, &restored); // the compensation
    log.set_end(4);
    store.transaction_ended(9, false, 0, &log).unwrap();
    let s = store.ipl_stats();
    assert_eq!(
        (s.records_deapplied, s.deapply_refused),
        (0, 1),
        "the compensation alone does not cancel: it stays in memory"
    );
    store.force(&log).unwrap();
    merge_unit_zero(&store, &mut rng, &log, 7, 5);
    let s = store.ipl_stats();
    assert_eq!(s.selective_merges, 1);
    assert!(s.records_discarded >= 3, "{s:?}");
    let after = read(&store, 4);
    assert_same_body(&after, &before[4], "byte-identical body after the merge");
    assert_eq!(
        crate::page::lsn(&after),
        4,
        "sealed at the compensation's LSN"
    );
}

/// IPL-SEL: an active transaction's records are carried over into the new
/// unit's log segment; the slot holds the committed version, sealed, and
/// the page reads with the change, after a reopen too. Once the
/// transaction commits, the next merge applies them.
#[test]
fn a_selective_merge_carries_an_active_transactions_records_over() {
    let (mut rng, device, store, log, before) = unit_of_sealed_pages(32, 4 << 10);
    let mut changed = update(&mut rng, &before[5]);
    crate::page::set_lsn(&mut changed, 2);
    crate::page::seal(&mut changed);
    store.note_update(5, 11, 2, &before[5], &changed);
    log.set_end(2);
    store.force(&log).unwrap();
    let lsn = merge_unit_zero(&store, &mut rng, &log, 7, 3);
    let s = store.ipl_stats();
    assert_eq!(s.selective_merges, 1);
    assert!(s.records_carried >= 1 && s.carried_sectors >= 1, "{s:?}");
    let st = store.unit(0);
    assert!(
        st.log_next > Some(1),
        "the carried group is in the new segment"
    );
    let mut slot = vec![0u8; PAGE];
    device
        .read(store.layout().slot_bytes(st.phys, 5), &mut slot)
        .unwrap();
    assert_same_body(&slot, &before[5], "the slot holds the committed version");
    assert_eq!(
        crate::page::compute_checksum(&slot),
        u32::from_le_bytes(slot[0..4].try_into().unwrap()),
        "sealed"
    );
    assert_eq!(read(&store, 5), changed, "read with the active change");
    drop(store);
    let store = open(&device, StoreMode::Open, 4 << 10);
    assert_eq!(read(&store, 5), changed, "after a reopen");
    // Transaction 11 is not active in this store: the next merge applies
    // its records to the slot.
    merge_unit_zero(&store, &mut rng, &log, 7, lsn);
    let st = store.unit(0);
    device
        .read(store.layout().slot_bytes(st.phys, 5), &mut slot)
        .unwrap();
    assert_eq!(slot, changed, "applied once no longer active");
}

/// IPL-SEL: an abort whose records are still in memory de-applies them:
/// its changes and its compensations leave the page's log sector, and the
/// force writes only the header record.
#[test]
fn an_abort_de_applies_its_in_memory_records() {
    let (mut rng, _device, store, log, before) = unit_of_sealed_pages(33, 8 << 10);
    let mut other = update(&mut rng, &before[4]);
    other[PAGE_BODY_OFFSET..PAGE_BODY_OFFSET + 8].copy_from_slice(&[0xAB; 8]);
    let mut changed = other.clone();
    changed[4000..4040].copy_from_slice(&[0xCD; 40]);
    let mut restored = changed.clone();
    restored[4000..4040].copy_from_slice(&other[4000..4040]);
    store.note_update(4, 3, 2, &before[4], &other); // transaction 3
    store.note_update(4, 9, 3, &other, &changed); // 9 changes other bytes
    store.note_update(4, 9, 4, &changed, &restored); // and rolls back
    store.transaction_ended(9, false, 0, &log).unwrap();
    let s = store.ipl_stats();
    assert_eq!((s.records_deapplied, s.deapply_refused), (2, 0), "{s:?}");
    log.set_end(4);
    let sectors = store.ipl_stats().sector_writes;
    store.force(&log).unwrap();
    assert_eq!(
        store.ipl_stats().sector_writes - sectors,
        1,
        "one sector: 3's records and the header"
    );
    assert_same_body(&read(&store, 4), &restored, "the aborted change de-applied");
}

/// Found in review (issue 14): during a restart without redo, a damaged
/// page is rebuilt from the WAL up to the space's marked state, but the
/// limit was the marker found at open. A force during recovery (a
/// write-back of a page that undo changed) marks a newer state, and a page
/// rebuilt to the old one lost the compensations on flash. The limit is
/// the newest marker, until recovery ends.
#[test]
fn regression_the_repair_limit_at_a_restart_follows_the_newest_marker() {
    let (mut rng, nand, store, log, images) = store_of_sealed_pages(23, 8 << 10, 4, 10);
    store.force(&log).unwrap();
    assert_eq!(
        store.repair_before_lsn(),
        None,
        "a new space repairs freely"
    );
    drop(store);
    let again = open(&nand, StoreMode::Open, 8 << 10);
    assert_eq!(again.repair_before_lsn(), Some(10), "L* at open");
    // Recovery changes a page and a write-back forces it: a newer marker.
    let next = sealed_update(&mut rng, &images[2]);
    again.note_update(2, 1, crate::page::lsn(&next), &images[2], &next);
    log.set_end(20);
    again.force(&log).unwrap();
    assert_eq!(again.marker().1, 20);
    assert_eq!(again.repair_before_lsn(), Some(20), "the newest marker");
    again.recovered();
    assert_eq!(
        again.repair_before_lsn(),
        None,
        "after recovery: the whole log"
    );
}

/// Found in review (IPL-SEL): a unit known only by its first log sector
/// (its commit sector unreadable, IPL-9) was taken as its logical unit's
/// version whatever force wrote that sector. A merge's carried group sits
/// there at once, so an unmarked copy (its force cut before its marker)
/// could win over the marked old copy. Now the first group must be of a
/// marked force; otherwise the unit is not known (the open refuses).
#[test]
fn regression_a_unit_known_by_its_log_needs_a_marked_first_group() {
    let (mut rng, _device, store, log, before) = unit_of_sealed_pages(34, 4 << 10);
    let changed = sealed_update(&mut rng, &before[5]);
    store.note_update(5, 11, 2, &before[5], &changed);
    log.set_end(2);
    store.force(&log).unwrap();
    merge_unit_zero(&store, &mut rng, &log, 7, 3);
    assert!(store.ipl_stats().records_carried >= 1);
    let st = store.unit(0);
    let f = st.tag;
    assert!(matches!(
        store.identify(st.phys, f).unwrap(),
        Identity::Logged(0, g) if g == st.generation
    ));
    assert!(
        matches!(store.identify(st.phys, f - 1).unwrap(), Identity::Unknown),
        "a first group of a force after the marker: not known"
    );
}
