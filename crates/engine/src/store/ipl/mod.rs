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
//!   ([`PageLog::note_update`]): they become physiological records of the
//!   page's in-memory log sector(s), with the newest image. Every write
//!   to flash is a *force* of the whole space (`force`, IPL-10..13): a
//!   commit, a write-back, an eviction or a checkpoint captures every
//!   page's unforced state at one WAL position and writes, for each page,
//!   its records and one record of its header bytes (checksum, page LSN)
//!   as one *write group* of consecutive log sectors in one program, then
//!   a force marker.
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
//! segments and compensation records), and its other stores recover by
//! ARIES over the WAL. An IPL space restarts without redo: its
//! flash holds the state of every page at `L*`, the WAL position of the
//! newest durable force marker (`force`); recovery skips the redo of
//! its pages and undoes, logically, every transaction that ended at or
//! beyond `L*` (REC-4). A write group still reaches flash only after the
//! WAL holds every change in it (a force flushes the WAL to its `L`
//! first). An abort is the engine's rollback (compensating changes,
//! logged as records of the aborted transaction); the store then
//! de-applies the transaction's records from its in-memory log sectors,
//! and its merges are selective (aborted transactions' records left out,
//! active ones' carried into the new log segment), wherever a replay shows
//! the page reads the same ([`select`], IPL-SEL; ARCHITECTURE.md,
//! "In-Page Logging", says why it must be checked). With the commit force off
//! (`ipl_no_commit_force`), commits do not wait for a force and the WAL's
//! redo brings the space's pages forward at restart, as for an in-place store.
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
//!    home) if its first write group is of a marked force, or else is
//!    free if it holds nothing, or else, if it holds sealed pages of one
//!    logical unit each in its own slot, is that
//!    logical unit's version when no sound commit sector (nor another
//!    such unit) names it and it is the home or its home is empty or
//!    holds another unit. Anything else (another unit may hold a newer or
//!    an older version) refuses the open with one line naming the sector.
//! 10. A force captures every page's unforced state holding the space's
//!     install gate exclusive, which every install into the space holds
//!     shared from its WAL append on: the capture is the state at one WAL
//!     position `L` (checked: a force's sequence is above the marker's,
//!     `assert!`). A write-back writes nothing alone: it runs a force, or
//!     waits for the running one that captured its version.
//! 11. Every group and merge commit sector of force `F` carries `F`; a
//!     force ends with a flushed marker (`F`, `L`). At open, groups, copies
//!     and in-place slots of forces after the newest marker are merged away
//!     or erased before any new write, and sequence numbers go on above
//!     every one seen (`debug_assert!` on a group's sequence).
//! 12. A merge of an unmarked force keeps the marked old copy until the
//!     force's marker is durable; [`layout::FORCE_MERGES_RESERVE`] free
//!     units are kept for that, and a force needing more fails with
//!     `SpaceFull` naming the space.
//! 13. A commit is acknowledged and made visible only once a marker covers
//!     its commit record ([`PageLog::transaction_ended`]).
//! 14. A merge leaves a record out of a slot, or carries it over, only as
//!     [`select`] decides by replay (IPL-SEL-1); carried write groups are
//!     programmed after the commit sector reads back sound and flushed
//!     before the old unit is erased.
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

mod check;
mod force;
pub mod layout;
mod merge;
mod open;
pub mod sector;
mod segment;
pub mod select;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex as StdMutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use flashlab_devices::{DeviceError, DeviceRef};
use flashlab_runtime::{Mutex as RtMutex, Rt, RwLatch};
use serde::Serialize;

use super::{PageLog, PageStore, StoreInfo, StoreKind, StoreMode, StoreStats};
use crate::error::{Error, Result};
use crate::force::LogForce;
use crate::page::{PAGE_BODY_OFFSET, PageNo};
use layout::{ERASE_UNIT_BYTES, LOG_SECTOR_BYTES, Layout};
use sector::{
    Decoded, FLAG_GROUP_END, Header, MAGIC_COMMIT, MAGIC_DESCRIPTOR, MAGIC_LOG, MAGIC_MARKER,
    Record,
};

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
    /// Write groups written by forces (every page write is one now), and
    /// their sectors.
    pub commit_groups: u64,
    pub commit_sectors: u64,
    /// Log sectors and slots found damaged (after a second read), commit
    /// sectors that read back damaged after a merge, and slots a merge
    /// programmed as damaged (IPL-6..8).
    pub damaged_sectors: u64,
    pub damaged_slots: u64,
    pub commit_sector_retries: u64,
    pub poisoned_slots: u64,
    /// Forces (IPL-10): each captured the space's dirty pages at one log
    /// position and ended with a force marker (IPL-11); the pages they
    /// wrote; merges whose old copy waited for the marker (IPL-12); units
    /// merged at their marked state when the space was opened.
    pub forces: u64,
    pub force_pages: u64,
    pub markers: u64,
    pub deferred_erases: u64,
    pub open_merges: u64,
    /// Selective merges (IPL-SEL): merges that left out or carried over
    /// any record; the records of aborted transactions they left out; the
    /// records of active transactions they carried into the new log
    /// segment, and the sectors that took; transactions whose records were
    /// applied because leaving them out would change the page, or because
    /// they would not fit in the room for carried records.
    pub selective_merges: u64,
    pub records_discarded: u64,
    pub records_carried: u64,
    pub carried_sectors: u64,
    pub selections_refused: u64,
    /// Abort de-application: records an abort left out of in-memory log
    /// sectors, and pages where they did not cancel and stayed.
    pub records_deapplied: u64,
    pub deapply_refused: u64,
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
    forces: AtomicU64,
    force_pages: AtomicU64,
    markers: AtomicU64,
    deferred_erases: AtomicU64,
    open_merges: AtomicU64,
    selective_merges: AtomicU64,
    records_discarded: AtomicU64,
    records_carried: AtomicU64,
    carried_sectors: AtomicU64,
    selections_refused: AtomicU64,
    records_deapplied: AtomicU64,
    deapply_refused: AtomicU64,
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
    /// The force whose merge wrote this copy (its commit sector's tag; 0
    /// for a home never merged), IPL-12.
    tag: u64,
}

/// A page's in-memory log: records since its version on flash.
struct PendingPage {
    /// crc32c of the body the records lead to.
    expected_crc: u32,
    records: Vec<Record>,
    /// `undo[i]`: the bytes `records[i]` replaced (in memory only), for
    /// abort de-application ([`select::deapply`]).
    undo: Vec<Record>,
    bytes: usize,
    diverged: bool,
    /// The newest image noted and not yet forced, and its page LSN: what a
    /// force captures (IPL-10).
    after: Option<Vec<u8>>,
    lsn: u64,
    /// The page LSN of the version on flash (read, or written by a force).
    forced_lsn: u64,
    /// `after` is an image the pool handed over, sealed: a force writes
    /// its header as it is (otherwise it stamps `lsn` and seals it).
    sealed: bool,
}

impl PendingPage {
    fn forget_records(&mut self) {
        self.records = Vec::new();
        self.undo = Vec::new();
    }

    fn at(expected_crc: u32) -> PendingPage {
        PendingPage {
            expected_crc,
            records: Vec::new(),
            undo: Vec::new(),
            bytes: 0,
            diverged: false,
            after: None,
            lsn: 0,
            forced_lsn: 0,
            sealed: false,
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

/// What a read of a unit's log found besides its records.
#[derive(Clone, Copy, Debug, Default)]
struct LogScan {
    /// The highest force sequence of a complete group.
    max_seq: u64,
    /// Complete groups of forces after the marker were left out (open).
    unmarked: bool,
    /// A hole, or an unfinished group at the end.
    torn: bool,
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

/// The newest aborted transactions, bounded.
#[derive(Default)]
struct AbortedSet {
    order: std::collections::VecDeque<u64>,
    set: std::collections::HashSet<u64>,
}

impl AbortedSet {
    fn insert(&mut self, txn: u64) {
        if self.set.insert(txn) {
            self.order.push_back(txn);
        }
        while self.order.len() > select::ABORTED_REMEMBERED_MAX {
            let old = self.order.pop_front().expect("non-empty");
            self.set.remove(&old);
        }
    }
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
    pending: StdMutex<HashMap<PageNo, PendingPage>>,
    /// Pages holding in-memory records of each transaction: the active
    /// ones, whose records a merge carries over (IPL-SEL).
    by_txn: StdMutex<HashMap<u64, Vec<PageNo>>>,
    /// Transactions that aborted since the open (the newest
    /// [`select::ABORTED_REMEMBERED_MAX`]), whose records a merge leaves
    /// out.
    aborted: StdMutex<AbortedSet>,
    /// Write groups programmed since the open, by logical unit, with the
    /// unit's generation: what names the slot of a damaged group (IPL-6).
    spans: StdMutex<HashMap<u32, (u32, Vec<GroupSpan>)>>,
    commit_force: bool,
    /// IPL-SEL: selective merges and abort de-application.
    selection: bool,
    counters: Counters,
    /// IPL-10: installs into the space's pages hold it shared (from the
    /// WAL append to the install), a force's capture exclusive.
    gate: RwLatch,
    /// Serialises forces (and with them the marker ring).
    forcing: RtMutex<()>,
    /// The newest durable force marker: (sequence F*, log position L*).
    marked: StdMutex<(u64, u64)>,
    /// The marker found at open (recovery's L*, REC-4).
    opened_at: (u64, u64),
    /// The sequence number the next force takes; and the one groups and
    /// commit sectors written now are tagged with (a force's while it
    /// writes, the marked one otherwise).
    next_seq: AtomicU64,
    seq_now: AtomicU64,
    /// Marker ring position: (which of the two units, next sector).
    ring: StdMutex<(u32, u32)>,
    /// Old copies of units merged by the running force, erased once its
    /// marker is durable (IPL-12).
    deferred: StdMutex<Vec<u32>>,
    /// The engine's log, attached at open (a write-back's force flushes it).
    log: StdMutex<Option<Arc<dyn LogForce>>>,
    /// A force failed: the captured state is not on flash, so nothing more
    /// is written until the space is opened again.
    failed: AtomicBool,
    /// Between an open that restarts without redo and the end of recovery,
    /// a damaged page is rebuilt from the WAL before the newest marker only
    /// (BUF-9, REC-4).
    restarting: AtomicBool,
    /// Check the whole state after every change ([`IplStore::check`]).
    checking: bool,
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
            aborted: StdMutex::new(AbortedSet::default()),
            spans: StdMutex::new(HashMap::new()),
            commit_force: true,
            selection: true,
            counters: Counters::default(),
            gate: RwLatch::new(),
            forcing: RtMutex::new(()),
            marked: StdMutex::new((0, 0)),
            opened_at: (0, 0),
            next_seq: AtomicU64::new(1),
            seq_now: AtomicU64::new(0),
            ring: StdMutex::new((0, 0)),
            deferred: StdMutex::new(Vec::new()),
            log: StdMutex::new(None),
            failed: AtomicBool::new(false),
            restarting: AtomicBool::new(false),
            checking: check::checks_every_change(),
        };
        let mut store = store;
        match mode {
            StoreMode::Create => store.format()?,
            StoreMode::Open => store.scan()?,
        }
        store.opened_at = *store.marked.lock().expect("marked");
        let restarting = mode == StoreMode::Open && store.commit_force;
        store.restarting.store(restarting, Ordering::SeqCst);
        store.check_if_checking();
        Ok(store)
    }

    /// Force (the default, lee2007) or not a committing transaction's
    /// in-memory log sectors.
    pub fn with_commit_force(mut self, force: bool) -> IplStore {
        self.commit_force = force;
        if !force {
            // The WAL's redo brings the pages forward: repairs may use
            // the whole log.
            self.restarting.store(false, Ordering::SeqCst);
        }
        self
    }

    /// Selective merges and abort de-application (IPL-SEL; the default) or
    /// merges that apply every record.
    pub fn with_selection(mut self, selection: bool) -> IplStore {
        self.selection = selection;
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
            forces: g(&c.forces),
            force_pages: g(&c.force_pages),
            markers: g(&c.markers),
            deferred_erases: g(&c.deferred_erases),
            open_merges: g(&c.open_merges),
            selective_merges: g(&c.selective_merges),
            records_discarded: g(&c.records_discarded),
            records_carried: g(&c.records_carried),
            carried_sectors: g(&c.carried_sectors),
            selections_refused: g(&c.selections_refused),
            records_deapplied: g(&c.records_deapplied),
            deapply_refused: g(&c.deapply_refused),
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

    fn stripe(&self, logical: u32) -> &RtMutex<()> {
        &self.stripes[logical as usize % UNIT_LOCK_STRIPES]
    }
}

impl PageStore for IplStore {
    fn info(&self) -> StoreInfo {
        StoreInfo {
            kind: StoreKind::Ipl,
            page_bytes: self.layout.page_bytes,
            capacity_pages: self.layout.capacity_pages(),
        }
    }

    fn device(&self) -> &DeviceRef {
        &self.device
    }

    fn read_page(&self, page_no: PageNo, buf: &mut [u8]) -> Result<()> {
        let done = self.read_slot(page_no, buf);
        self.check_if_checking();
        done
    }

    /// A write-back never writes one page on its own (IPL-10): it makes
    /// sure a force has written the page's newest state, running one if
    /// the page has changes not yet forced.
    fn write_page(&self, page_no: PageNo, image: &[u8]) -> Result<()> {
        let done = self.write_back(page_no, image);
        self.check_if_checking();
        done
    }

    /// A checkpoint's sync runs a force, so that the marker's L is at or
    /// beyond the checkpoint's begin record (REC-4).
    fn sync(&self, log: &dyn LogForce) -> Result<()> {
        let done = self.force_and_flush(log);
        self.check_if_checking();
        done
    }

    fn stats(&self) -> StoreStats {
        let s = self.ipl_stats();
        let pb = self.layout.page_bytes as u64;
        StoreStats {
            pages_written: s.page_writes,
            device_bytes_written: (s.sector_writes + 2 * s.markers) * LOG_SECTOR_BYTES as u64
                + s.direct_programs * pb
                + s.merges * (u64::from(self.layout.pages_per_unit) * pb + LOG_SECTOR_BYTES as u64),
            device_writes: s.groups
                + s.markers
                + s.direct_programs
                + s.merges * (u64::from(self.layout.pages_per_unit) + 1),
            counters: self.named_counters(),
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

    fn page_log(&self) -> Option<&dyn PageLog> {
        Some(self)
    }
}

impl PageLog for IplStore {
    fn note_update(&self, page_no: PageNo, txn: u64, lsn: u64, before: &[u8], after: &[u8]) {
        self.note_changes(page_no, txn, lsn, before, after);
        self.check_if_checking();
    }

    /// A commit is acknowledged only once a force marker covers its commit
    /// record (IPL-13): the force runs here unless one already does.
    /// Every commit waits for it, whether or not it changed this space:
    /// recovery takes any transaction ending at or beyond L* as a loser.
    fn transaction_ended(
        &self,
        txn: u64,
        committed: bool,
        end_lsn: u64,
        log: &dyn LogForce,
    ) -> Result<()> {
        let done = (|| {
            let pages = self.by_txn.lock().expect("by_txn").remove(&txn);
            if !committed && self.selection {
                self.aborted(txn, pages.unwrap_or_default());
            }
            if !committed || !self.commit_force {
                return Ok(());
            }
            self.force_covering(end_lsn, log)
        })();
        self.check_if_checking();
        done
    }

    fn durable_lsn(&self) -> Option<u64> {
        self.commit_force.then(|| self.marker().1)
    }

    fn install_gate(&self) -> &RwLatch {
        &self.gate
    }

    fn restart_lsn(&self) -> Option<u64> {
        self.commit_force.then_some(self.opened_at.1)
    }

    /// The newest marker's L, not the one found at open: a force during
    /// recovery (a write-back of a page that undo changed) puts records
    /// past the open's `L*` on flash, after flushing the WAL to them and
    /// so the restart record too.
    fn repair_before_lsn(&self) -> Option<u64> {
        let restarting = self.restarting.load(Ordering::SeqCst);
        restarting.then(|| self.marker().1)
    }

    fn recovered(&self) {
        self.end_restart();
        self.check_if_checking();
    }
}

impl IplStore {
    /// The engine's log, through which a write-back's force flushes it;
    /// set by [`super::open_store_with`].
    pub fn attach_log(&self, log: Arc<dyn LogForce>) {
        *self.log.lock().expect("log") = Some(log);
    }

    /// The store's own counters for reports, by name.
    fn named_counters(&self) -> Vec<(&'static str, f64)> {
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
            ("forces", s.forces as f64),
            ("force_pages", s.force_pages as f64),
            ("markers", s.markers as f64),
            ("deferred_erases", s.deferred_erases as f64),
            ("open_merges", s.open_merges as f64),
            (
                "active_transactions",
                self.by_txn.lock().expect("by_txn").len() as f64,
            ),
            ("selective_merges", s.selective_merges as f64),
            ("records_discarded", s.records_discarded as f64),
            ("records_carried", s.records_carried as f64),
            ("carried_sectors", s.carried_sectors as f64),
            ("selections_refused", s.selections_refused as f64),
            ("records_deapplied", s.records_deapplied as f64),
            ("deapply_refused", s.deapply_refused as f64),
        ]
    }
}

/// The bodies of the store's calls; each call checks the whole state
/// after its body ([`IplStore::check`]).
impl IplStore {
    fn read_slot(&self, page_no: PageNo, buf: &mut [u8]) -> Result<()> {
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
        let mut pending = self.pending.lock().expect("pending");
        // Unforced changes stay (the pool reads a page again only after
        // writing it back, which forces them).
        if pending.get(&page_no).is_none_or(|p| p.after.is_none()) {
            let mut log = PendingPage::at(body_crc(buf));
            log.forced_lsn = crate::page::lsn(buf);
            pending.insert(page_no, log);
        }
        Ok(())
    }

    fn write_back(&self, page_no: PageNo, image: &[u8]) -> Result<()> {
        self.check_page(page_no)?;
        bump(&self.counters.page_writes, 1);
        let lsn = crate::page::lsn(image);
        let covered = {
            let mut pending = self.pending.lock().expect("pending");
            let p = pending.entry(page_no).or_insert(PendingPage {
                diverged: true,
                ..PendingPage::at(0)
            });
            match p.after.as_ref() {
                // A force captured this version or a newer one.
                None if lsn <= p.forced_lsn && !p.diverged => true,
                None => {
                    // Changed without a noted install (a store used on its
                    // own, or a page never read): the image is its state.
                    p.after = Some(image.to_vec());
                    p.lsn = lsn;
                    p.sealed = true;
                    p.diverged = true;
                    p.forget_records();
                    false
                }
                // The pool's image of the newest noted state: its header
                // as the pool sealed it.
                Some(after) if lsn >= p.lsn && body_crc(after) == body_crc(image) => {
                    p.after = Some(image.to_vec());
                    p.lsn = lsn;
                    p.sealed = true;
                    false
                }
                Some(_) => false,
            }
        };
        if covered {
            // IPL-10: the force that captured it may still be writing: the
            // write-back is done only when that force is (else the pool
            // could evict the page and read its older version back).
            let _forcing = self.forcing.lock();
            return Ok(());
        }
        let log = self.attached_log();
        self.force(&*log)
    }

    fn force_and_flush(&self, log: &dyn LogForce) -> Result<()> {
        self.force(log)?;
        log.flush_device(&self.device)
    }

    fn note_changes(&self, page_no: PageNo, txn: u64, lsn: u64, before: &[u8], after: &[u8]) {
        if before.len() <= PAGE_BODY_OFFSET || before.len() != after.len() {
            return;
        }
        let (_, slot) = self.layout.place(page_no);
        if txn != 0 {
            let mut by_txn = self.by_txn.lock().expect("by_txn");
            let pages = by_txn.entry(txn).or_default();
            if !pages.contains(&page_no) {
                pages.push(page_no);
            }
        }
        let mut pending = self.pending.lock().expect("pending");
        let log = pending.entry(page_no).or_insert(PendingPage {
            diverged: true, // no known base: the force logs a difference
            ..PendingPage::at(0)
        });
        // IPL-10: the newest image is kept whatever the records, so that a
        // force captures it.
        log.after = Some(after.to_vec());
        log.lsn = lsn;
        log.sealed = false;
        if log.diverged {
            return;
        }
        if body_crc(before) != log.expected_crc {
            log.diverged = true;
            log.forget_records();
            return;
        }
        let changes = diff_body(before, after);
        let records = sector::records_of(slot as u16, txn, &changes);
        let bytes: usize = records.iter().map(Record::encoded_bytes).sum();
        bump(&self.counters.records_noted, records.len() as u64);
        bump(&self.counters.record_bytes_noted, bytes as u64);
        log.bytes += bytes;
        if log.bytes > self.layout.log_segment_bytes as usize {
            // More than a segment: the force will merge anyway.
            log.diverged = true;
            log.forget_records();
            return;
        }
        if self.selection {
            // The bytes each record replaces, for abort de-application.
            let replaced: Vec<(u32, Vec<u8>)> = changes
                .iter()
                .map(|(at, b)| (*at, before[*at as usize..*at as usize + b.len()].to_vec()))
                .collect();
            log.undo
                .extend(sector::records_of(slot as u16, txn, &replaced));
        }
        log.records.extend(records);
        debug_assert!(!self.selection || log.records.len() == log.undo.len());
        log.expected_crc = body_crc(after);
    }

    fn end_restart(&self) {
        self.restarting.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests;
