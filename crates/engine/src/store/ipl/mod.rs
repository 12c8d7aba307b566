//! # In-Page Logging (lee2007): a data space on raw NAND
//!
//! IPL keeps a page's changes *beside* the page instead of rewriting it.
//! Each 128 KB erase unit of the raw NAND device ([`layout`]) holds
//! `pages_per_unit` data slots (15 pages of 8 KB) and a log segment (8 KB by
//! default; 4 to 32 KB) of 512-byte log sectors ([`sector`]). A logical
//! erase unit is the group of pages `L * pages_per_unit ..`; the map from
//! logical to physical unit changes only at a merge.
//!
//! * **Write.** A mini-transaction's install tells the store each page's
//!   changed byte ranges with the transaction id
//!   ([`PageStore::note_update`]): they become physiological records of the
//!   page's in-memory log sector(s). When the buffer pool writes the page
//!   back (eviction or checkpoint, after forcing the WAL: BUF-2), the
//!   page's image is *not* written: its records, and one record of the
//!   pool's header bytes (checksum, page LSN), go to the unit's log segment
//!   as one *write group* of consecutive log sectors in one program. A
//!   commit forces the records of the pages it changed the same way
//!   ([`PageStore::transaction_ended`], lee2007's commit), after the WAL
//!   holds them, with the header of the image they lead to sealed at its
//!   page LSN.
//! * **Read.** A page read is rebuilt on the fly: the slot's image (an
//!   erased slot is a never-written page: zeros), then every record of the
//!   slot in the unit's log segment, in order.
//! * **Merge.** When a write group does not fit in the unit's free log
//!   sectors: every page's current version is written to a free erase
//!   unit, the device is flushed, the unit's *commit sector* (sector 0 of
//!   its segment: logical unit, generation) is programmed and flushed, the
//!   map is updated and the old unit erased. Merges are counted and timed.
//!
//! ## The map: rebuilt at open from commit sectors
//!
//! Nothing else records the map. At open every physical unit's commit
//! sector is read: a logical unit lives in the unit with its highest sound
//! generation; a logical unit never merged lives in its *home* (physical
//! unit `L + 1`, generation 0, no commit sector); every other unit is free
//! and erased before use. Physical unit 0 holds the space descriptor,
//! checked at open (PS-4).
//!
//! ## IPL and the engine's write-ahead log
//!
//! The engine's mini-transactions change several pages atomically (a
//! B+tree split), its transactions are undone logically (MVCC rollback
//! segments and compensation records), and its recovery is ARIES over the
//! WAL. IPL here is the *storage manager* of the slides, under that
//! recovery, not a replacement of it: the WAL stays the authority for redo
//! and atomicity, and IPL log sectors are how a page's versions are kept on
//! NAND. Sound because (1) a write group reaches flash only after the WAL
//! holds every change in it (BUF-2, the same rule as an in-place write);
//! (2) a write group is applied whole or not at all (IPL-2), so a page
//! rebuilt after a crash is some version the pool handed to `write_page`,
//! and its page LSN tells redo where to resume; (3) a sector not yet
//! flushed may be lost or kept by a crash, like an in-place write: the
//! scan stops at the first hole (IPL-3), so a page's rebuilt version is a
//! prefix of its write history; WAL redo from the checkpoint brings it
//! forward. Aborts need no de-application in flash: the engine's rollback
//! writes compensating changes, which are logged like any other. Where
//! this departs from the slides (a commit durable by the WAL, no selective
//! merge, a redo pass at restart) is written in ARCHITECTURE.md, "In-Page
//! Logging".
//!
//! Invariants (IPL-n):
//! 1. A page's in-memory records are used only if they account for the
//!    whole change since the version on flash (the crc of the body they
//!    lead to equals the image's); otherwise the write logs the difference
//!    against the flash version, read back.
//! 2. A write group is applied at a read only if its last sector (flag
//!    "group end") is sound.
//! 3. Log sectors of a unit are read in index order up to the first erased
//!    one; a unit with a hole or an unfinished group is merged before it
//!    takes another sector. A damaged sound-position sector is reported.
//! 4. A merge programs and flushes the new unit's pages before its commit
//!    sector, and flushes the commit sector before erasing the old unit: a
//!    logical unit always has one sound version on flash.
//! 5. The map changes only at a merge; a slot is programmed directly only
//!    in a unit formatted by this store and not yet logged to, in order.
//! 6. A sector or slot that fails its check is read again (a flip on the
//!    way reads clean the second time, [`DAMAGED_READS_MAX`]). A log
//!    sector still damaged (or unreadable) before the first hole is
//!    damage, never a hole: its write group's records are left out, and
//!    the group's slot (known if this store programmed the group since it
//!    opened, otherwise every slot of the unit) reads as a one-line
//!    corruption error naming the sector, which the pool repairs from the
//!    WAL or reports (BUF-9). A unit with damage merges at its next write.
//! 7. A merge never programs an older or partial version of a page it
//!    cannot rebuild: a slot hit by damage, or unreadable, is programmed
//!    as a *poisoned* page (zeros, [`POISON_TEXT`], a checksum that does
//!    not match), and the page's in-memory log is dropped so that its next
//!    write logs its whole difference.
//! 8. A merge's commit sector reads back sound before the old unit is
//!    erased; otherwise the target is erased and another free unit tried,
//!    [`MERGE_ATTEMPTS_MAX`] times in all.
//! 9. At open, a unit whose commit sector cannot be read or fails its crc
//!    is known by its first log sector (logical unit and generation: log
//!    sectors follow a verified commit sector, IPL-8; generation 0 is a
//!    home), or else is free if it holds nothing, or else, if it holds
//!    sealed pages of one logical unit each in its own slot, is that
//!    logical unit's version when no sound commit sector (nor another
//!    such unit) names it and it is the home or its home is empty or
//!    holds another unit. Anything else (another unit may hold a newer or
//!    an older version) refuses the open with one line naming the sector.
//!
//! ## Media damage
//!
//! The store cannot repair: it detects (sector crc, page checksum, page
//! id), confines the damage to the slot it belongs to when it can, and
//! hands it to the pool, which rebuilds the page from the WAL (its image
//! since the log start) or reports it. A page is never returned as an
//! older version because a group was lost: that would pass every check
//! (IPL-6, IPL-7). LIMIT: a commit sector has one copy; damage after it
//! read back sound (IPL-8) is resolved by IPL-9 or refused.

pub mod layout;
pub mod sector;

use std::collections::HashMap;
use std::sync::Mutex as StdMutex;
use std::sync::atomic::{AtomicU64, Ordering};

use flashlab_devices::{DeviceError, DeviceRef};
use flashlab_runtime::{Mutex as RtMutex, Rt};
use serde::Serialize;

use super::{PageStore, StoreKind, StoreMode, StoreStats};
use crate::buffer::LogForce;
use crate::error::{Error, Result};
use crate::page::{PAGE_BODY_OFFSET, PageNo};
use layout::{ERASE_UNIT_BYTES, LOG_SECTOR_BYTES, Layout};
use sector::{Decoded, FLAG_GROUP_END, Header, MAGIC_COMMIT, MAGIC_DESCRIPTOR, MAGIC_LOG, Record};

/// Logical units share this many locks (a unit's reads, writes and merge
/// hold its lock across their I/O).
pub const UNIT_LOCK_STRIPES: usize = 64;
/// Gaps of unchanged bytes shorter than this are folded into one record.
pub const DIFF_GAP_BYTES_MIN: usize = 16;
/// A merge whose commit sector reads back damaged erases its target and
/// tries another free unit, at most this many times in all (IPL-8).
pub const MERGE_ATTEMPTS_MAX: u32 = 3;
/// A damaged read (a sector or slot that fails its check) is read this
/// many times in all before it counts as damage: a flip on the way reads
/// clean the second time (IPL-6).
pub const DAMAGED_READS_MAX: u32 = 2;
/// What a merge programs in a slot whose page it cannot rebuild (IPL-7):
/// the text at the body's start; the page checksum never matches.
pub const POISON_TEXT: &[u8; 16] = b"IPL damaged slot";

/// What an IPL store counted since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IplStats {
    /// Pages handed to `write_page`.
    pub page_writes: u64,
    /// Log sectors programmed.
    pub sector_writes: u64,
    /// Write groups (one per page write that went to the log segment).
    pub groups: u64,
    /// Records noted from mini-transactions, and their bytes (header
    /// included), for the average record size.
    pub records_noted: u64,
    pub record_bytes_noted: u64,
    /// Page writes whose records did not account for the change: logged as
    /// the difference against the flash version (IPL-1).
    pub diff_writes: u64,
    /// Slots programmed directly (fresh units only, IPL-5).
    pub direct_programs: u64,
    pub merges: u64,
    pub merge_ns: u64,
    pub erases: u64,
    pub page_reads: u64,
    /// Log sectors read to rebuild pages.
    pub log_sectors_read: u64,
    /// Write groups forced by commits, and their sectors.
    pub commit_groups: u64,
    pub commit_sectors: u64,
    /// Log sectors and slots found damaged (after a second read), commit
    /// sectors that read back damaged after a merge, and slots a merge
    /// programmed as damaged (IPL-6..8).
    pub damaged_sectors: u64,
    pub damaged_slots: u64,
    pub commit_sector_retries: u64,
    pub poisoned_slots: u64,
}

#[derive(Default)]
struct Counters {
    page_writes: AtomicU64,
    sector_writes: AtomicU64,
    groups: AtomicU64,
    records_noted: AtomicU64,
    record_bytes_noted: AtomicU64,
    diff_writes: AtomicU64,
    direct_programs: AtomicU64,
    merges: AtomicU64,
    merge_ns: AtomicU64,
    erases: AtomicU64,
    page_reads: AtomicU64,
    log_sectors_read: AtomicU64,
    commit_groups: AtomicU64,
    commit_sectors: AtomicU64,
    damaged_sectors: AtomicU64,
    damaged_slots: AtomicU64,
    commit_sector_retries: AtomicU64,
    poisoned_slots: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// Where a logical unit lives and what is known of its log segment.
#[derive(Clone, Copy, Debug)]
struct UnitState {
    phys: u32,
    generation: u32,
    /// Next log sector to program; `None` until the segment is read.
    log_next: Option<u16>,
    /// Slots from here on are erased and may be programmed directly
    /// (IPL-5); `None` when unknown or logged to.
    fresh_from: Option<u32>,
    /// A hole or an unfinished group was found (IPL-3).
    needs_merge: bool,
}

/// A page's in-memory log: records since its version on flash.
struct PageLog {
    /// crc32c of the body the records lead to.
    expected_crc: u32,
    records: Vec<Record>,
    bytes: usize,
    diverged: bool,
    /// The image the records lead to, and its page LSN: what a commit
    /// force seals as the page's header record.
    after: Option<Vec<u8>>,
    lsn: u64,
}

impl PageLog {
    fn at(expected_crc: u32) -> PageLog {
        PageLog {
            expected_crc,
            records: Vec::new(),
            bytes: 0,
            diverged: false,
            after: None,
            lsn: 0,
        }
    }
}

/// Damage met reading a unit's log segment (IPL-6).
#[derive(Clone, Debug)]
struct LogDamage {
    /// Slots whose records lay in a damaged write group; `None`: not known
    /// (the group was not written since the store opened), every slot.
    slots: Option<Vec<u32>>,
    offset_bytes: u64,
    problem: String,
}

impl LogDamage {
    fn hits(&self, slot: u32) -> bool {
        self.slots.as_ref().is_none_or(|s| s.contains(&slot))
    }
}

/// What a unit whose commit sector cannot be read holds (IPL-9).
enum Identity {
    /// Its first log sector names the logical unit and generation.
    Logged(u32, u32),
    /// Nothing: no log sector, every slot erased.
    Empty,
    /// Sealed pages of one logical unit, each in its own slot, no log.
    Pages(u32),
    /// Anything else.
    Unknown,
}

/// A write group this store programmed: its sectors and its slot.
#[derive(Clone, Copy, Debug)]
struct GroupSpan {
    first: u16,
    last: u16,
    slot: u32,
}

/// See the module documentation.
pub struct IplStore {
    device: DeviceRef,
    space: String,
    layout: Layout,
    units: StdMutex<Vec<UnitState>>,
    /// Free physical units, and whether each is known to be erased.
    free: StdMutex<Vec<(u32, bool)>>,
    stripes: Vec<RtMutex<()>>,
    merging: RtMutex<()>,
    pending: StdMutex<HashMap<PageNo, PageLog>>,
    /// Pages holding in-memory records of each transaction.
    by_txn: StdMutex<HashMap<u64, Vec<PageNo>>>,
    /// Write groups programmed since the open, by logical unit, with the
    /// unit's generation: what names the slot of a damaged group (IPL-6).
    spans: StdMutex<HashMap<u32, (u32, Vec<GroupSpan>)>>,
    commit_force: bool,
    counters: Counters,
}

fn body_crc(page: &[u8]) -> u32 {
    crc32c::crc32c(&page[PAGE_BODY_OFFSET.min(page.len())..])
}

/// Byte ranges where `b` differs from `a` at or after the page body.
pub fn diff_body(a: &[u8], b: &[u8]) -> Vec<(u32, Vec<u8>)> {
    let mut out: Vec<(u32, Vec<u8>)> = Vec::new();
    let mut i = PAGE_BODY_OFFSET;
    let n = a.len().min(b.len());
    while i < n {
        if a[i] == b[i] {
            i += 1;
            continue;
        }
        let start = i;
        let mut end = i + 1;
        let mut j = end;
        while j < n {
            if a[j] != b[j] {
                end = j + 1;
                j += 1;
            } else if j - end >= DIFF_GAP_BYTES_MIN {
                break;
            } else {
                j += 1;
            }
        }
        out.push((start as u32, b[start..end].to_vec()));
        i = end;
    }
    out
}

impl IplStore {
    /// Format (Create) or open an IPL space on a raw NAND device.
    pub fn open(
        device: DeviceRef,
        page_bytes: usize,
        capacity_bytes: Option<u64>,
        log_segment_bytes: u64,
        space: &str,
        mode: StoreMode,
    ) -> Result<IplStore> {
        let capacity = capacity_bytes
            .unwrap_or(u64::MAX)
            .min(device.capacity_bytes());
        let layout = Layout::new(page_bytes, log_segment_bytes, capacity, space)?;
        let store = IplStore {
            device,
            space: space.to_string(),
            layout,
            units: StdMutex::new(Vec::new()),
            free: StdMutex::new(Vec::new()),
            stripes: (0..UNIT_LOCK_STRIPES).map(|_| RtMutex::new(())).collect(),
            merging: RtMutex::new(()),
            pending: StdMutex::new(HashMap::new()),
            by_txn: StdMutex::new(HashMap::new()),
            spans: StdMutex::new(HashMap::new()),
            commit_force: true,
            counters: Counters::default(),
        };
        match mode {
            StoreMode::Create => store.format()?,
            StoreMode::Open => store.scan()?,
        }
        Ok(store)
    }

    /// Force (the default, lee2007) or not a committing transaction's
    /// in-memory log sectors.
    pub fn with_commit_force(mut self, force: bool) -> IplStore {
        self.commit_force = force;
        self
    }

    /// What the store counted.
    pub fn ipl_stats(&self) -> IplStats {
        let c = &self.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        IplStats {
            page_writes: g(&c.page_writes),
            sector_writes: g(&c.sector_writes),
            groups: g(&c.groups),
            records_noted: g(&c.records_noted),
            record_bytes_noted: g(&c.record_bytes_noted),
            diff_writes: g(&c.diff_writes),
            direct_programs: g(&c.direct_programs),
            merges: g(&c.merges),
            merge_ns: g(&c.merge_ns),
            erases: g(&c.erases),
            page_reads: g(&c.page_reads),
            log_sectors_read: g(&c.log_sectors_read),
            commit_groups: g(&c.commit_groups),
            commit_sectors: g(&c.commit_sectors),
            damaged_sectors: g(&c.damaged_sectors),
            damaged_slots: g(&c.damaged_slots),
            commit_sector_retries: g(&c.commit_sector_retries),
            poisoned_slots: g(&c.poisoned_slots),
        }
    }

    /// The space's layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    fn descriptor_payload(&self) -> Vec<u8> {
        let l = &self.layout;
        let mut p = Vec::new();
        for v in [
            l.page_bytes as u32,
            l.log_segment_bytes as u32,
            l.pages_per_unit,
            l.physical_units,
            l.logical_units,
        ] {
            p.extend_from_slice(&v.to_le_bytes());
        }
        p
    }

    fn read_sector(&self, offset_bytes: u64) -> Result<Vec<u8>> {
        let mut s = vec![0u8; LOG_SECTOR_BYTES];
        self.device.read(offset_bytes, &mut s)?;
        Ok(s)
    }

    fn corruption(&self, offset_bytes: u64, problem: String) -> Error {
        Error::Corruption {
            space: self.space.clone(),
            page_no: 0,
            offset_bytes,
            problem: format!("IPL: {problem}"),
        }
    }

    fn format(&self) -> Result<()> {
        let s = self.read_sector(0)?;
        if s.iter().any(|&b| b != 0xFF) {
            return Err(Error::Open(format!(
                "space '{}': store 'ipl' needs an erased raw NAND device (such as nand-k9wag08u1a); device '{}' holds data at offset 0",
                self.space,
                self.device.name()
            )));
        }
        let header = Header {
            magic: MAGIC_DESCRIPTOR,
            unit: 0,
            generation: 0,
            index: 0,
            used: 0,
            flags: 0,
        };
        self.device
            .write(0, &sector::encode(header, &self.descriptor_payload()))?;
        self.device.flush()?;
        let l = &self.layout;
        *self.units.lock().expect("units") = (0..l.logical_units)
            .map(|u| UnitState {
                phys: l.home(u),
                generation: 0,
                log_next: Some(1),
                fresh_from: Some(0),
                needs_merge: false,
            })
            .collect();
        *self.free.lock().expect("free") = (l.logical_units + 1..l.physical_units)
            .map(|p| (p, true))
            .collect();
        Ok(())
    }

    fn scan(&self) -> Result<()> {
        let s = self.read_sector_checked(0)?;
        let described = match sector::decode(&s) {
            Decoded::Sound(h, p) if h.magic == MAGIC_DESCRIPTOR => p == self.descriptor_payload(),
            _ => false,
        };
        if !described {
            return Err(Error::Open(format!(
                "space '{}': device '{}' holds no IPL space of this shape ({}-byte pages, {}-byte log segments, {} erase units)",
                self.space,
                self.device.name(),
                self.layout.page_bytes,
                self.layout.log_segment_bytes,
                self.layout.physical_units
            )));
        }
        let l = self.layout;
        let mut best: Vec<Option<(u32, u32)>> = vec![None; l.logical_units as usize];
        let mut committed = vec![false; l.physical_units as usize];
        // Units whose commit sector cannot be read, holding pages of a
        // logical unit (IPL-9).
        let mut doubtful: Vec<(u32, u32, String)> = Vec::new();
        for phys in 1..l.physical_units {
            let at = l.sector_bytes(phys, 0);
            let damage = match self.read_sector_checked(at) {
                Ok(s) => match sector::decode(&s) {
                    Decoded::Damaged(problem) => Err(problem),
                    _ => Ok(s),
                },
                Err(Error::Device(DeviceError::ReadFailed { .. })) => {
                    Err("the device cannot read it".to_string())
                }
                Err(e) => return Err(e),
            };
            let s = match damage {
                Ok(s) => s,
                Err(problem) => {
                    let problem = format!("commit sector of erase unit {phys}: {problem}");
                    match self.identify(phys)? {
                        Identity::Logged(unit, 0) if l.home(unit) == phys => continue,
                        Identity::Logged(unit, generation) if generation > 0 => {
                            committed[phys as usize] = true;
                            let slot = &mut best[unit as usize];
                            if slot.is_none_or(|(g, _)| generation > g) {
                                *slot = Some((generation, phys));
                            }
                            continue;
                        }
                        Identity::Empty => continue,
                        Identity::Pages(unit) => {
                            doubtful.push((phys, unit, problem));
                            continue;
                        }
                        _ => return Err(self.corruption(at, problem)),
                    }
                }
            };
            match sector::decode(&s) {
                Decoded::Erased => {}
                Decoded::Damaged(problem) => {
                    return Err(self
                        .corruption(at, format!("commit sector of erase unit {phys}: {problem}")));
                }
                Decoded::Sound(h, _) => {
                    if h.magic != MAGIC_COMMIT || h.unit >= l.logical_units || h.generation == 0 {
                        return Err(self.corruption(
                            at,
                            format!("erase unit {phys}: not a commit sector of this space"),
                        ));
                    }
                    committed[phys as usize] = true;
                    let slot = &mut best[h.unit as usize];
                    if slot.is_none_or(|(g, _)| h.generation > g) {
                        *slot = Some((h.generation, phys));
                    }
                }
            }
        }
        // IPL-9: a doubtful unit is its logical unit's only version if no
        // sound commit sector and no other doubtful unit names that
        // logical unit, and it is the home or the home is empty or holds
        // another unit. Otherwise which version is newer is not known (a
        // stale version lingers after a crash between a merge's commit
        // sector and its erase): the open is refused.
        for (phys, unit, problem) in &doubtful {
            let (phys, unit) = (*phys, *unit);
            let home = l.home(unit);
            let alone = best[unit as usize].is_none()
                && doubtful.iter().filter(|(_, u, _)| *u == unit).count() == 1;
            if alone && home == phys {
                continue;
            }
            if alone
                && (committed[home as usize] || matches!(self.identify(home)?, Identity::Empty))
            {
                committed[phys as usize] = true;
                best[unit as usize] = Some((0, phys));
                continue;
            }
            return Err(self.corruption(
                l.sector_bytes(phys, 0),
                format!(
                    "{problem}; it holds pages of logical unit {unit}, which another erase unit may hold too"
                ),
            ));
        }
        let mut used = vec![false; l.physical_units as usize];
        used[0] = true;
        let mut units = Vec::with_capacity(l.logical_units as usize);
        for (logical, b) in best.iter().enumerate() {
            let (generation, phys) = match *b {
                Some(found) => found,
                None => {
                    let home = l.home(logical as u32);
                    if committed[home as usize] {
                        return Err(self.corruption(
                            l.unit_bytes(home),
                            format!(
                                "logical unit {logical} has no erase unit (its home holds another)"
                            ),
                        ));
                    }
                    (0, home)
                }
            };
            used[phys as usize] = true;
            units.push(UnitState {
                phys,
                generation,
                log_next: None,
                fresh_from: None,
                needs_merge: false,
            });
        }
        *self.units.lock().expect("units") = units;
        *self.free.lock().expect("free") = (1..l.physical_units)
            .filter(|&p| !used[p as usize])
            .map(|p| (p, false))
            .collect();
        Ok(())
    }

    /// What an erase unit holds, from its first log sector and its slots,
    /// when its commit sector cannot be read (IPL-9).
    fn identify(&self, phys: u32) -> Result<Identity> {
        let l = self.layout;
        let first = match self.read_sector_checked(l.sector_bytes(phys, 1)) {
            Ok(s) => s,
            Err(Error::Device(DeviceError::ReadFailed { .. })) => return Ok(Identity::Unknown),
            Err(e) => return Err(e),
        };
        match sector::decode(&first) {
            Decoded::Sound(h, _)
                if h.magic == MAGIC_LOG && h.unit < l.logical_units && h.index == 1 =>
            {
                return Ok(Identity::Logged(h.unit, h.generation));
            }
            Decoded::Erased => {}
            _ => return Ok(Identity::Unknown),
        }
        let pb = l.page_bytes;
        let mut pages = vec![0u8; pb * l.pages_per_unit as usize];
        match self.device.read(l.slot_bytes(phys, 0), &mut pages) {
            Ok(()) => {}
            Err(DeviceError::ReadFailed { .. }) => return Ok(Identity::Unknown),
            Err(e) => return Err(e.into()),
        }
        let mut unit = None;
        for (slot, page) in pages.chunks(pb).enumerate() {
            if page.iter().all(|&b| b == 0xFF) {
                continue;
            }
            let sealed = crate::page::compute_checksum(page)
                == u32::from_le_bytes(page[0..4].try_into().expect("4"));
            let page_no = crate::page::stored_id(page).page_no;
            let (u, s) = l.place(page_no);
            if !sealed || s as usize != slot || unit.is_some_and(|x| x != u) {
                return Ok(Identity::Unknown);
            }
            unit = Some(u);
        }
        Ok(match unit {
            None => Identity::Empty,
            Some(u) if u < l.logical_units => Identity::Pages(u),
            Some(_) => Identity::Unknown,
        })
    }

    fn unit(&self, logical: u32) -> UnitState {
        self.units.lock().expect("units")[logical as usize]
    }

    fn set_unit(&self, logical: u32, st: UnitState) {
        self.units.lock().expect("units")[logical as usize] = st;
    }

    fn check_page(&self, page_no: PageNo) -> Result<(u32, u32)> {
        let (logical, slot) = self.layout.place(page_no);
        if logical >= self.layout.logical_units {
            return Err(Error::Invalid(format!(
                "space '{}': page {page_no} beyond the {} pages of the IPL space",
                self.space,
                self.layout.capacity_pages()
            )));
        }
        Ok((logical, slot))
    }

    /// Read a sector, a second time if it decodes damaged (a flip on the
    /// way reads clean the second time, IPL-6).
    fn read_sector_checked(&self, offset_bytes: u64) -> Result<Vec<u8>> {
        let mut s = self.read_sector(offset_bytes)?;
        for _ in 1..DAMAGED_READS_MAX {
            if !matches!(sector::decode(&s), Decoded::Damaged(_)) {
                break;
            }
            s = self.read_sector(offset_bytes)?;
        }
        Ok(s)
    }

    /// The log sectors `1..n` of physical unit `phys`; a sector the device
    /// cannot read is `None`.
    fn read_segment(&self, phys: u32, n: u16) -> Result<Vec<Option<Vec<u8>>>> {
        let l = self.layout;
        let at = l.sector_bytes(phys, 1);
        let count = usize::from(n) - 1;
        let mut buf = vec![0u8; count * LOG_SECTOR_BYTES];
        bump(&self.counters.log_sectors_read, count as u64);
        match self.device.read(at, &mut buf) {
            Ok(()) => Ok(buf
                .chunks(LOG_SECTOR_BYTES)
                .map(|s| Some(s.to_vec()))
                .collect()),
            Err(DeviceError::ReadFailed { .. }) => (0..count)
                .map(
                    |i| match self.read_sector(at + (i * LOG_SECTOR_BYTES) as u64) {
                        Ok(s) => Ok(Some(s)),
                        Err(Error::Device(DeviceError::ReadFailed { .. })) => Ok(None),
                        Err(e) => Err(e),
                    },
                )
                .collect(),
            Err(e) => Err(e.into()),
        }
    }

    /// The records of the unit's complete write groups, in order, the
    /// unit's state with `log_next` known (IPL-2, IPL-3), and the damage
    /// met, if any (IPL-6): the records of a damaged group are left out.
    fn read_log(
        &self,
        logical: u32,
        mut st: UnitState,
    ) -> Result<(Vec<Record>, UnitState, Option<LogDamage>)> {
        let l = self.layout;
        let n = st.log_next.unwrap_or(l.segment_sectors());
        if n <= 1 {
            st.log_next = Some(1);
            return Ok((Vec::new(), st, None));
        }
        let at = l.sector_bytes(st.phys, 1);
        let mut raw = self.read_segment(st.phys, n)?;
        /// What one log sector turned out to be.
        enum Seen {
            Erased,
            Bad(String),
            Sound(bool, Vec<Record>),
        }
        let mut seen = Vec::with_capacity(raw.len());
        for (i, s) in raw.iter_mut().enumerate() {
            let index = i as u16 + 1;
            let offset = at + i as u64 * LOG_SECTOR_BYTES as u64;
            let classify = |s: &[u8]| match sector::decode(s) {
                Decoded::Erased => Seen::Erased,
                Decoded::Damaged(problem) => Seen::Bad(problem),
                Decoded::Sound(h, payload) => {
                    if h.magic != MAGIC_LOG
                        || h.unit != logical
                        || h.generation != st.generation
                        || h.index != index
                    {
                        return Seen::Bad(format!(
                            "belongs to unit {} generation {} index {}",
                            h.unit, h.generation, h.index
                        ));
                    }
                    match sector::decode_records(payload) {
                        Ok(records) => Seen::Sound(h.flags & FLAG_GROUP_END != 0, records),
                        Err(e) => Seen::Bad(e.to_string()),
                    }
                }
            };
            let mut v = match s {
                Some(s) => classify(s),
                None => Seen::Bad("the device cannot read it".into()),
            };
            // A flip on the way reads clean the second time.
            if matches!(v, Seen::Bad(_)) && s.is_some() {
                for _ in 1..DAMAGED_READS_MAX {
                    match self.read_sector(offset) {
                        Ok(again) => {
                            v = classify(&again);
                            *s = Some(again);
                        }
                        Err(Error::Device(DeviceError::ReadFailed { .. })) => {
                            v = Seen::Bad("the device cannot read it".into());
                        }
                        Err(e) => return Err(e),
                    }
                    if !matches!(v, Seen::Bad(_)) {
                        break;
                    }
                }
            }
            seen.push(v);
        }
        let hole_at = seen
            .iter()
            .position(|v| matches!(v, Seen::Erased))
            .unwrap_or(seen.len());
        // IPL-6: a damaged sector before the first hole loses its group.
        let mut skip = vec![false; seen.len()];
        let mut damage: Option<LogDamage> = None;
        {
            let spans = self.spans.lock().expect("spans");
            let known = spans
                .get(&logical)
                .filter(|(g, _)| *g == st.generation)
                .map(|(_, v)| v.as_slice())
                .unwrap_or(&[]);
            for (i, v) in seen[..hole_at].iter().enumerate() {
                let Seen::Bad(problem) = v else { continue };
                let index = i as u16 + 1;
                bump(&self.counters.damaged_sectors, 1);
                let span = known
                    .iter()
                    .find(|g| g.first <= index && index <= g.last)
                    .copied();
                let d = damage.get_or_insert_with(|| LogDamage {
                    slots: Some(Vec::new()),
                    offset_bytes: at + i as u64 * LOG_SECTOR_BYTES as u64,
                    problem: format!(
                        "log sector {index} of logical unit {logical} (erase unit {}): {problem}",
                        st.phys
                    ),
                });
                match span {
                    Some(g) if usize::from(g.last) <= hole_at => {
                        for k in g.first..=g.last {
                            skip[usize::from(k) - 1] = true;
                        }
                        if let Some(slots) = d.slots.as_mut() {
                            slots.push(g.slot);
                        }
                    }
                    _ => d.slots = None,
                }
            }
        }
        let mut out = Vec::new();
        let mut group = Vec::new();
        for (i, v) in seen[..hole_at].iter().enumerate() {
            if skip[i] {
                continue;
            }
            if let Seen::Sound(end, records) = v {
                group.extend(records.iter().cloned());
                if *end {
                    out.append(&mut group);
                }
            }
        }
        let last_programmed = seen
            .iter()
            .rposition(|v| !matches!(v, Seen::Erased))
            .map_or(0, |i| i as u16 + 1);
        let next = last_programmed + 1;
        let holes = seen[..usize::from(next) - 1]
            .iter()
            .any(|v| matches!(v, Seen::Erased));
        st.needs_merge |= holes || !group.is_empty() || damage.is_some();
        st.log_next = Some(next);
        if next > 1 {
            st.fresh_from = None;
        }
        Ok((out, st, damage))
    }

    /// The error a read of a slot hit by `damage` returns (one line).
    fn damage_error(&self, page_no: PageNo, damage: &LogDamage) -> Error {
        Error::Corruption {
            space: self.space.clone(),
            page_no: u64::from(page_no),
            offset_bytes: damage.offset_bytes,
            problem: format!("IPL: {}; the page's changes in it are lost", damage.problem),
        }
    }

    /// Read a slot's image (an erased slot is zeros) and apply `records`.
    fn rebuild(&self, phys: u32, slot: u32, records: &[Record], buf: &mut [u8]) -> Result<()> {
        self.device.read(self.layout.slot_bytes(phys, slot), buf)?;
        if buf.iter().all(|&b| b == 0xFF) {
            buf.fill(0);
        }
        for r in records.iter().filter(|r| u32::from(r.slot) == slot) {
            r.apply(buf)?;
        }
        Ok(())
    }

    /// A page image no check accepts (IPL-7): zeros, [`POISON_TEXT`] at
    /// the body's start and a checksum that does not match.
    pub fn poisoned_page(page_bytes: usize) -> Vec<u8> {
        let mut p = vec![0u8; page_bytes];
        p[PAGE_BODY_OFFSET..PAGE_BODY_OFFSET + POISON_TEXT.len()].copy_from_slice(POISON_TEXT);
        let crc = !crate::page::compute_checksum(&p);
        p[0..4].copy_from_slice(&crc.to_le_bytes());
        assert!(
            crate::page::compute_checksum(&p) != crc,
            "IPL-7: a poisoned page fails its checksum"
        );
        p
    }

    /// The current versions of a unit's pages for a merge: each slot's
    /// image with `records` applied, a slot hit by `damage` or unreadable
    /// as a poisoned page (IPL-7), `replace`'s image in its slot.
    fn merged_pages(
        &self,
        logical: u32,
        st: UnitState,
        records: &[Record],
        replace: Option<(u32, &[u8])>,
        damage: Option<&LogDamage>,
    ) -> Result<Vec<u8>> {
        let l = self.layout;
        let pb = l.page_bytes;
        let mut pages = vec![0u8; pb * l.pages_per_unit as usize];
        let mut unreadable = vec![false; l.pages_per_unit as usize];
        match self.device.read(l.slot_bytes(st.phys, 0), &mut pages) {
            Ok(()) => {}
            Err(DeviceError::ReadFailed { .. }) => {
                for (slot, page) in pages.chunks_mut(pb).enumerate() {
                    match self.device.read(l.slot_bytes(st.phys, slot as u32), page) {
                        Ok(()) => {}
                        Err(DeviceError::ReadFailed { .. }) => unreadable[slot] = true,
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            Err(e) => return Err(e.into()),
        }
        let apply = |slot: usize, page: &mut [u8]| -> Result<()> {
            if page.iter().all(|&b| b == 0xFF) {
                page.fill(0);
            }
            for r in records.iter().filter(|r| usize::from(r.slot) == slot) {
                r.apply(page)?;
            }
            Ok(())
        };
        for (slot, page) in pages.chunks_mut(pb).enumerate() {
            if replace.is_some_and(|(s, _)| s as usize == slot) {
                continue;
            }
            let lost = unreadable[slot] || damage.is_some_and(|d| d.hits(slot as u32));
            if lost {
                page.copy_from_slice(&Self::poisoned_page(pb));
                bump(&self.counters.poisoned_slots, 1);
                // The page's in-memory log started from the lost version:
                // its next write logs the difference against the poison.
                let page_no = logical * l.pages_per_unit + slot as u32;
                self.pending.lock().expect("pending").remove(&page_no);
                continue;
            }
            apply(slot, page)?;
            // A page that fails its checksum is read once more: a flip on
            // the way must not become damage on the medium (IPL-6).
            let bad = |page: &[u8]| {
                page.iter().any(|&b| b != 0)
                    && crate::page::compute_checksum(page)
                        != u32::from_le_bytes(page[0..4].try_into().expect("4"))
            };
            if bad(page) {
                match self.device.read(l.slot_bytes(st.phys, slot as u32), page) {
                    Ok(()) => apply(slot, page)?,
                    Err(DeviceError::ReadFailed { .. }) => {
                        page.copy_from_slice(&Self::poisoned_page(pb));
                        bump(&self.counters.poisoned_slots, 1);
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        if let Some((slot, image)) = replace {
            pages[slot as usize * pb..(slot as usize + 1) * pb].copy_from_slice(image);
        }
        Ok(pages)
    }

    /// Merge a logical unit into a free erase unit, with `replace`'s image
    /// in its slot (IPL-4); slots hit by `damage` are poisoned (IPL-7).
    fn merge(
        &self,
        logical: u32,
        st: UnitState,
        records: &[Record],
        replace: Option<(u32, &[u8])>,
        damage: Option<&LogDamage>,
    ) -> Result<()> {
        let _merging = self.merging.lock();
        let rt = Rt::try_current();
        let start_ns = rt.as_ref().map_or(0, |rt| rt.now_ns());
        let l = self.layout;
        let pb = l.page_bytes;
        let pages = self.merged_pages(logical, st, records, replace, damage)?;
        let generation = st.generation + 1;
        let mut attempt = 0;
        let target = loop {
            attempt += 1;
            let (target, erased) = self.free.lock().expect("free").pop().ok_or_else(|| {
                Error::SpaceFull(format!(
                    "space '{}': no free erase unit for a merge",
                    self.space
                ))
            })?;
            if !erased {
                self.device.trim(l.unit_bytes(target), ERASE_UNIT_BYTES)?;
                bump(&self.counters.erases, 1);
            }
            for (slot, page) in pages.chunks(pb).enumerate() {
                if page.iter().any(|&b| b != 0) {
                    self.device.write(l.slot_bytes(target, slot as u32), page)?;
                }
            }
            self.device.flush()?;
            let header = Header {
                magic: MAGIC_COMMIT,
                unit: logical,
                generation,
                index: 0,
                used: 0,
                flags: 0,
            };
            let at = l.sector_bytes(target, 0);
            self.device.write(at, &sector::encode(header, &[]))?;
            self.device.flush()?;
            // IPL-8: the commit sector reads back sound before the old
            // unit is erased.
            let back = match self.read_sector_checked(at) {
                Ok(s) => Some(s),
                Err(Error::Device(DeviceError::ReadFailed { .. })) => None,
                Err(e) => return Err(e),
            };
            if back
                .as_deref()
                .is_some_and(|s| matches!(sector::decode(s), Decoded::Sound(h, _) if h == header))
            {
                break target;
            }
            bump(&self.counters.commit_sector_retries, 1);
            self.device.trim(l.unit_bytes(target), ERASE_UNIT_BYTES)?;
            self.device.flush()?;
            bump(&self.counters.erases, 1);
            self.free.lock().expect("free").insert(0, (target, true));
            if attempt >= MERGE_ATTEMPTS_MAX {
                return Err(self.corruption(
                    at,
                    format!(
                        "the commit sector of a merge of logical unit {logical} read back damaged {MERGE_ATTEMPTS_MAX} times"
                    ),
                ));
            }
        };
        self.spans.lock().expect("spans").remove(&logical);
        self.set_unit(
            logical,
            UnitState {
                phys: target,
                generation,
                log_next: Some(1),
                fresh_from: None,
                needs_merge: false,
            },
        );
        self.device.trim(l.unit_bytes(st.phys), ERASE_UNIT_BYTES)?;
        bump(&self.counters.erases, 1);
        self.free.lock().expect("free").push((st.phys, true));
        bump(&self.counters.merges, 1);
        let end_ns = rt.as_ref().map_or(0, |rt| rt.now_ns());
        bump(&self.counters.merge_ns, end_ns.saturating_sub(start_ns));
        Ok(())
    }

    /// Append `records` and the header record of `image` as one write
    /// group to the unit's log segment, or merge the unit with `image` in
    /// the slot when they do not fit (or the unit must merge, IPL-3).
    /// Returns the sectors programmed (0 for a merge). The caller holds the
    /// unit's lock and has read its log (`log`, its `damage`, `st`).
    fn append_group(
        &self,
        logical: u32,
        slot: u32,
        mut st: UnitState,
        (log, damage): (&[Record], Option<&LogDamage>),
        mut records: Vec<Record>,
        image: &[u8],
    ) -> Result<u64> {
        let l = self.layout;
        records.extend(sector::records_of(
            slot as u16,
            0,
            &[(0, image[..PAGE_BODY_OFFSET].to_vec())],
        ));
        let sectors = sector::pack(&records);
        let next = st.log_next.expect("read_log knows it");
        if st.needs_merge || usize::from(next) + sectors.len() > usize::from(l.segment_sectors()) {
            self.merge(logical, st, log, Some((slot, image)), damage)?;
            return Ok(0);
        }
        let mut bytes = Vec::with_capacity(sectors.len() * LOG_SECTOR_BYTES);
        for (i, recs) in sectors.iter().enumerate() {
            let header = Header {
                magic: MAGIC_LOG,
                unit: logical,
                generation: st.generation,
                index: next + i as u16,
                used: 0,
                flags: if i + 1 == sectors.len() {
                    FLAG_GROUP_END
                } else {
                    0
                },
            };
            bytes.extend(sector::encode(header, &sector::encode_records(recs)));
        }
        self.device.write(l.sector_bytes(st.phys, next), &bytes)?;
        {
            let mut spans = self.spans.lock().expect("spans");
            let entry = spans
                .entry(logical)
                .or_insert_with(|| (st.generation, Vec::new()));
            if entry.0 != st.generation {
                *entry = (st.generation, Vec::new());
            }
            entry.1.push(GroupSpan {
                first: next,
                last: next + sectors.len() as u16 - 1,
                slot,
            });
        }
        st.log_next = Some(next + sectors.len() as u16);
        st.fresh_from = None;
        self.set_unit(logical, st);
        bump(&self.counters.sector_writes, sectors.len() as u64);
        bump(&self.counters.groups, 1);
        Ok(sectors.len() as u64)
    }

    /// Force page `page_no`'s in-memory records if one is of `txn`
    /// (lee2007's commit): after the WAL holds them (BUF-2's rule), as one
    /// write group ending with the header of the image they lead to,
    /// sealed at its page LSN. The page stays dirty in the pool; its
    /// in-memory log goes on from the forced version.
    fn force_page(&self, page_no: PageNo, txn: u64, log: &dyn LogForce) -> Result<()> {
        let (logical, slot) = self.check_page(page_no)?;
        let wanted = |p: &PageLog| {
            !p.diverged && p.after.is_some() && p.records.iter().any(|r| r.txn == txn)
        };
        let lsn = match self.pending.lock().expect("pending").get(&page_no) {
            Some(p) if wanted(p) => p.lsn,
            _ => return Ok(()),
        };
        log.flush_to(lsn)?;
        let _unit = self.stripe(logical).lock();
        let (records, mut image, lsn) = {
            let mut pending = self.pending.lock().expect("pending");
            let Some(p) = pending.get_mut(&page_no).filter(|p| wanted(p)) else {
                return Ok(());
            };
            p.bytes = 0;
            (
                std::mem::take(&mut p.records),
                p.after.take().expect("wanted"),
                p.lsn,
            )
        };
        log.flush_to(lsn)?;
        crate::page::set_lsn(&mut image, lsn);
        crate::page::seal(&mut image);
        let st = self.unit(logical);
        let (flash_log, st, damage) = self.read_log(logical, st)?;
        self.set_unit(logical, st);
        let sectors = self.append_group(
            logical,
            slot,
            st,
            (&flash_log, damage.as_ref()),
            records,
            &image,
        )?;
        bump(&self.counters.commit_groups, 1);
        bump(&self.counters.commit_sectors, sectors);
        Ok(())
    }

    fn stripe(&self, logical: u32) -> &RtMutex<()> {
        &self.stripes[logical as usize % UNIT_LOCK_STRIPES]
    }

    /// Take the page's in-memory records if they account for `image`
    /// (IPL-1), and start its next in-memory log at `image`.
    fn take_records(&self, page_no: PageNo, image: &[u8]) -> Option<Vec<Record>> {
        let crc = body_crc(image);
        let mut pending = self.pending.lock().expect("pending");
        let old = pending.insert(page_no, PageLog::at(crc));
        old.filter(|p| !p.diverged && p.expected_crc == crc)
            .map(|p| p.records)
    }
}

impl PageStore for IplStore {
    fn kind(&self) -> StoreKind {
        StoreKind::Ipl
    }

    fn device(&self) -> &DeviceRef {
        &self.device
    }

    fn page_bytes(&self) -> usize {
        self.layout.page_bytes
    }

    fn capacity_pages(&self) -> u64 {
        self.layout.capacity_pages()
    }

    fn read_page(&self, page_no: PageNo, buf: &mut [u8]) -> Result<()> {
        let (logical, slot) = self.check_page(page_no)?;
        let _unit = self.stripe(logical).lock();
        let st = self.unit(logical);
        let (records, mut st, damage) = self.read_log(logical, st)?;
        self.set_unit(logical, st);
        if let Some(d) = damage.as_ref().filter(|d| d.hits(slot)) {
            return Err(self.damage_error(page_no, d));
        }
        if let Err(e) = self.rebuild(st.phys, slot, &records, buf) {
            if crate::store::is_read_damage(&e) {
                // The slot cannot be read: the next write moves the unit.
                bump(&self.counters.damaged_slots, 1);
                st.needs_merge = true;
                self.set_unit(logical, st);
            }
            return Err(e);
        }
        bump(&self.counters.page_reads, 1);
        self.pending
            .lock()
            .expect("pending")
            .insert(page_no, PageLog::at(body_crc(buf)));
        Ok(())
    }

    fn write_page(&self, page_no: PageNo, image: &[u8]) -> Result<()> {
        let (logical, slot) = self.check_page(page_no)?;
        // Records are taken under the unit's lock, so that write groups
        // reach the log segment in the order their records were taken (a
        // commit force of the same page takes them the same way).
        let _unit = self.stripe(logical).lock();
        let noted = self.take_records(page_no, image);
        bump(&self.counters.page_writes, 1);
        let mut st = self.unit(logical);
        let l = self.layout;
        // IPL-5: a fresh unit takes its pages in place, in order.
        if st.log_next == Some(1) && st.fresh_from.is_some_and(|from| slot >= from) {
            self.device.write(l.slot_bytes(st.phys, slot), image)?;
            st.fresh_from = Some(slot + 1);
            self.set_unit(logical, st);
            bump(&self.counters.direct_programs, 1);
            return Ok(());
        }
        let (log, known, damage) = self.read_log(logical, st)?;
        st = known;
        self.set_unit(logical, st);
        // A unit with damage merges (IPL-6, IPL-7): the records are moot,
        // the merge takes `image` whole.
        let records = match noted {
            _ if st.needs_merge => Vec::new(),
            Some(records) => records,
            None => {
                bump(&self.counters.diff_writes, 1);
                let mut flash = vec![0u8; l.page_bytes];
                match self.rebuild(st.phys, slot, &log, &mut flash) {
                    Ok(()) => sector::records_of(slot as u16, 0, &diff_body(&flash, image)),
                    Err(e) if crate::store::is_read_damage(&e) => {
                        bump(&self.counters.damaged_slots, 1);
                        st.needs_merge = true;
                        Vec::new()
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        self.append_group(logical, slot, st, (&log, damage.as_ref()), records, image)
            .map(|_| ())
    }

    fn sync(&self, log: &dyn LogForce) -> Result<()> {
        log.flush_device(&self.device)
    }

    fn stats(&self) -> StoreStats {
        let s = self.ipl_stats();
        let pb = self.layout.page_bytes as u64;
        StoreStats {
            pages_written: s.page_writes,
            device_bytes_written: s.sector_writes * LOG_SECTOR_BYTES as u64
                + s.direct_programs * pb
                + s.merges * (u64::from(self.layout.pages_per_unit) * pb + LOG_SECTOR_BYTES as u64),
            device_writes: s.groups
                + s.direct_programs
                + s.merges * (u64::from(self.layout.pages_per_unit) + 1),
            ..StoreStats::default()
        }
    }

    fn location_of(&self, page_no: PageNo) -> u64 {
        let (logical, slot) = self.layout.place(page_no);
        if logical >= self.layout.logical_units {
            return 0;
        }
        self.layout.slot_bytes(self.unit(logical).phys, slot)
    }

    fn wants_updates(&self) -> bool {
        true
    }

    fn note_update(&self, page_no: PageNo, txn: u64, lsn: u64, before: &[u8], after: &[u8]) {
        if before.len() <= PAGE_BODY_OFFSET || before.len() != after.len() {
            return;
        }
        let (_, slot) = self.layout.place(page_no);
        let mut pending = self.pending.lock().expect("pending");
        let log = pending.entry(page_no).or_insert(PageLog {
            diverged: true, // no known base: the write logs a difference
            ..PageLog::at(0)
        });
        if log.diverged {
            return;
        }
        if body_crc(before) != log.expected_crc {
            log.diverged = true;
            log.records = Vec::new();
            return;
        }
        let records = sector::records_of(slot as u16, txn, &diff_body(before, after));
        let bytes: usize = records.iter().map(Record::encoded_bytes).sum();
        bump(&self.counters.records_noted, records.len() as u64);
        bump(&self.counters.record_bytes_noted, bytes as u64);
        log.bytes += bytes;
        if log.bytes > self.layout.log_segment_bytes as usize {
            // More than a segment: the write will merge anyway.
            log.diverged = true;
            log.records = Vec::new();
            return;
        }
        log.records.extend(records);
        log.expected_crc = body_crc(after);
        log.lsn = lsn;
        log.after = Some(after.to_vec());
        drop(pending);
        if txn != 0 && self.commit_force {
            let mut by_txn = self.by_txn.lock().expect("by_txn");
            let pages = by_txn.entry(txn).or_default();
            if !pages.contains(&page_no) {
                pages.push(page_no);
            }
        }
    }

    fn transaction_ended(&self, txn: u64, committed: bool, log: &dyn LogForce) -> Result<()> {
        let pages = self.by_txn.lock().expect("by_txn").remove(&txn);
        let Some(mut pages) = pages else {
            return Ok(());
        };
        if !committed || !self.commit_force {
            return Ok(());
        }
        pages.sort_unstable();
        for page_no in pages {
            self.force_page(page_no, txn, log)?;
        }
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let s = self.ipl_stats();
        vec![
            ("page_writes", s.page_writes as f64),
            ("sector_writes", s.sector_writes as f64),
            ("groups", s.groups as f64),
            ("merges", s.merges as f64),
            ("merge_ms", s.merge_ns as f64 / 1e6),
            ("erases", s.erases as f64),
            ("direct_programs", s.direct_programs as f64),
            ("diff_writes", s.diff_writes as f64),
            ("records", s.records_noted as f64),
            ("record_bytes", s.record_bytes_noted as f64),
            ("page_reads", s.page_reads as f64),
            ("log_sectors_read", s.log_sectors_read as f64),
            ("commit_groups", s.commit_groups as f64),
            ("commit_sectors", s.commit_sectors as f64),
            ("damaged_sectors", s.damaged_sectors as f64),
            ("damaged_slots", s.damaged_slots as f64),
            ("commit_sector_retries", s.commit_sector_retries as f64),
            ("poisoned_slots", s.poisoned_slots as f64),
        ]
    }
}

#[cfg(test)]
mod tests;
