//! # The write-ahead log
//!
//! Every change reaches the log before it reaches a data page, and a commit
//! does not return before the log is durable up to its commit record
//! (*force at commit*, lee2008 section 4). The log is a byte stream; a
//! record's LSN is its position in the stream. The stream is stored in a
//! bounded, circular region of self-describing log sectors ([`layout`]),
//! after the master record area ([`master`]).
//!
//! ## Life cycle: a bounded, recycled log
//!
//! The master record names the *log start*: the oldest LSN recovery may
//! need, the minimum of the last complete checkpoint's begin record (its
//! redo point) and the first record of every transaction active then.
//! Everything before it is free, and the region is reused lap after lap.
//! A checkpoint moves the start forward when it writes the master record.
//! The log's configured size is a hard bound: an append that would reach
//! the sector of the log start fails with a retryable "log full" error that
//! names what holds the log; appends past half the region wake the
//! checkpointer early.
//!
//! Part of the region is kept back so that work already begun can always
//! finish: each transaction reserves, with every update it logs, room for
//! the compensation record that would undo it, and a further
//! [`LOG_RESERVE_BYTES_MIN`] (or a 32nd of the region) is kept for
//! recovery, full-page images of compensations, and checkpoint records.
//! Compensation, commit and abort records may use the reserve; checkpoint
//! records only when no active transaction holds the log start (then the
//! checkpoint frees space; otherwise it would only eat the reserve);
//! nothing else may.
//!
//! ## Full-page images (page repair)
//!
//! With `page_images` on (the default), the first change to a page after a
//! checkpoint's begin record logs the page's whole image (PostgreSQL's
//! `full_page_writes`): its non-zero ranges over a zeroed body. A page torn
//! by a crash, or damaged later, is rebuilt from its last image and the
//! changes after it ([`Wal::rebuild_page`]), all of them at or after the log
//! start. A page changed only before the last checkpoint was written and
//! flushed by it; if that copy is damaged, no image is kept, and the damage
//! is reported, never "repaired" with an older image. With `page_images`
//! off (as the commercial server of lee2008 ran) no images are logged and
//! damaged pages are reported.
//!
//! ## Group commit
//!
//! A force is one device write (two if it wraps around the region) plus a
//! flush. Concurrent committers share it: the first one that finds no force
//! in flight becomes the *flusher* and writes everything appended so far.
//! A committer whose record is covered by the force in flight waits for it;
//! one whose record came too late waits for it to end and then, if still
//! not durable, becomes the next flusher (PostgreSQL's `XLogFlush` rule).
//! An optional *commit delay* lets the flusher wait to gather commits.
//! In the real world a flusher that forces for a commit also waits,
//! spinning, for the group it expects, at most half a force ([`group`]).
//!
//! ## The log buffer (WAL-15)
//!
//! Appends go to a buffer that a force takes whole. A buffer that reaches
//! its size (`buffer_bytes`) is forced out by whoever finds it full, but
//! never by a mini-transaction holding page or tree latches (DB-5): a
//! writer makes room *before* it latches anything ([`Wal::make_buffer_room`],
//! InnoDB's `log_free_check`), and an append under latches lets the buffer
//! grow past its size. Only a buffer [`LATCHED_BUFFER_FACTOR`] times its
//! size is forced by an append under latches, so memory stays bounded; the
//! stats count both kinds of force (`room_forces`, `latched_forces`).
//!
//! ## Sectors
//!
//! Log writes cover whole log sectors (512 bytes, or the device's sector).
//! A force that ends mid-sector pads the sector; the next force starts at
//! that sector again and rewrites it with more records in it. These *tail
//! rewrites* are counted: on flash each one is an overwrite.
//!
//! ## Statistics
//!
//! [`LogStats`] carries lee2008 Table 3's columns: log writes, commits per
//! write, average write size in sectors, average write time.
//!
//! Invariants (WAL-n), checked by [`Wal::check`]:
//! 1. `start_lsn <= flushed_lsn <= end_lsn <= limit(start_lsn)`, and every
//!    byte below `flushed_lsn` is on the device and was made durable by a
//!    flush.
//! 2. At most one force is in flight, and no master-record write runs
//!    beside it: one flush of the log device at a time.
//! 3. The buffer starts at a sector boundary and holds every byte from
//!    there to `end_lsn`. It starts at or below `flushed_lsn`, or, while a
//!    force is in flight, at or below the end of its write: the force took
//!    the bytes before it (and leaves a failed log if it cannot write
//!    them, WAL-4).
//! 4. After a failed write or flush the log accepts nothing more: a failed
//!    fsync is never retried, because the kernel may have dropped the data.
//!    A failed flush of the master record or of a data device fails the log
//!    the same way ([`Wal::flush_data_device`]), and so does a commit that
//!    cannot be logged or a rollback that cannot finish ([`Wal::fail`]).
//!    The failure is recorded in the same critical section that gives up
//!    the flusher role, so no flush can follow a failed one.
//! 5. The transaction table (active transactions, their first and last
//!    record and next record to undo, their log reservation) changes under
//!    the same lock as the append of the record that changes it, so a
//!    checkpoint's snapshot is exactly the table as of its begin record.
//! 6. A record with page changes counts as *uninstalled* from its append
//!    until the mini-transaction has installed its pages
//!    ([`Wal::installed`]); a checkpoint waits for those before its begin
//!    record before it writes pages back. The set is a table of atomic
//!    slots set by the append and cleared by the install without the
//!    state's lock, with an overflow set under it (`installs`, INS-1).
//! 7. Commit timestamps are handed out in log order, and no record that a
//!    decoder would refuse is accepted ([`LogRecord::check_limits`]).
//! 8. Each record links to the record before it; the link and every sector
//!    carry the log's salt and number, so the reader tells the end of the
//!    log from damage ([`reader`]).
//! 9. The log start only moves forward, and only when a master record
//!    naming it is durable.
//! 10. Log sectors are forgotten on the device ([`Device::forget`]: a
//!     modelled device frees their memory) only behind the start named by
//!     the durable master record, and only those whose ring slot no later
//!     sector has reused; nothing reads the log there. (The fault model's
//!     device ignores the hint, so crash tests see every log byte that was written.)
//! 11. A task waiting for a force sleeps on a condition variable of its
//!     own, queued in arrival order; the end of a force or master write
//!     wakes the waiters it made durable and hands the flusher role to the
//!     first one it did not (no barging: a committer cannot take the role
//!     from a waiting master-record write), never waking the rest; a
//!     failure wakes everyone and hands nothing. In the real world the
//!     next heir spins (yielding) for up to `FLUSH_HEIR_SPIN_NS` before it
//!     sleeps; `woken` is set under the lock before every notify, so a
//!     spinning waiter misses no wake-up. A waiter woken because the log
//!     is durable past its LSN (`covered`, set with `woken`) returns
//!     without taking the lock again.
//! 12. Whether the log has failed, the horizon for full-page images and
//!     the durable end of the log are also kept in atomics, stored under the state's lock in the same
//!     critical section that changes them; readers that only look at them
//!     (every mini-transaction, every new transaction) take no lock. A task
//!     that locked the state after a failure therefore sees the failure in
//!     the atomic too, so WAL-4 holds for a check without the lock; a
//!     horizon read without the lock is confirmed under it by the append
//!     (`append_for_horizon`).
//! 13. A flusher's wait for its group (real world, [`group`]) happens
//!     after it holds the flusher role and before the force takes its
//!     data: the force still covers exactly what was appended when it
//!     starts, and the wait ends after at most [`group::GROUP_WAIT_NS_MAX`]
//!     or at once if the log has failed.
//! 14. A log device whose master-record copies carry the magic but all
//!     fail their checksums is damaged, never taken for a device without
//!     a log ([`Wal::read_master`]): opening it refuses naming the damage,
//!     and never creates a new database over it.
//! 15. A writer makes room in the log buffer before it takes a latch, so
//!     an append under latches forces the log only when the buffer holds
//!     [`LATCHED_BUFFER_FACTOR`] times its size ([`LogStats::latched_forces`];
//!     zero in the tests that fill the buffer, see the module essay).
//!
//! [`Device::forget`]: flashlab_devices::Device::forget

pub mod codec;
mod force;
pub mod group;
mod installs;
pub mod layout;
pub mod master;
pub mod mirror;
pub mod reader;
pub mod record;
mod repair;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use flashlab_devices::DeviceRef;
use flashlab_runtime::{Condvar, Mutex, Rt, World};
use serde::{Deserialize, Serialize};

use crate::buffer::WriterStop;
use crate::error::{Error, Result};
use crate::page::{self, PageId};
pub use installs::INSTALL_SLOTS;
use installs::Installs;
pub use layout::LogLayout;
pub use master::Master;
pub use reader::{BeyondEnd, LogReader};
pub use record::{ActiveTxn, Body, LogRecord};

/// Default size of the log buffer before appenders force it out.
pub const LOG_BUFFER_BYTES_DEFAULT: usize = 4 << 20;
/// Smallest log buffer accepted.
pub const LOG_BUFFER_BYTES_MIN: usize = 64 << 10;
/// Largest log buffer accepted.
pub const LOG_BUFFER_BYTES_MAX: usize = 16 << 20;
/// An append under latches (a mini-transaction's record) forces the log
/// only once the buffer holds this many times `buffer_bytes` (WAL-15):
/// writers make room before they latch, so such an append only finds a
/// buffer past its size when appends from writers already latched came in
/// between.
pub const LATCHED_BUFFER_FACTOR: usize = 2;
/// How often the log is forced in the background under `no-sync`.
pub const NO_SYNC_FLUSH_INTERVAL_NS: u64 = 10_000_000;
/// Longest commit delay accepted (a longer one is surely a unit mistake).
pub const COMMIT_DELAY_NS_MAX: u64 = 1_000_000_000;
/// Longest a real-world flush waiter next in line for the flusher role
/// spins (yielding) before it sleeps (`Wal::wait_flush`): about one log
/// force on an SSD.
pub const FLUSH_HEIR_SPIN_NS: u64 = 200_000;
/// Most real-world flush waiters that spin at once besides the heir (the
/// rest sleep): about the cores of a small machine.
pub const FLUSH_SPINNERS_MAX: usize = 2;
/// Least log space kept back for recovery, compensation images and
/// checkpoint records (a 32nd of the region if that is more).
pub const LOG_RESERVE_BYTES_MIN: u64 = 64 << 10;
/// Log space a transaction reserves per update on top of the update's own
/// size, for the compensation record that would undo it.
pub const UNDO_RESERVE_SLACK_BYTES: u64 = 512;
/// Most log sectors one device write of a force covers (about 1 MiB): a
/// larger force is written and flushed in chunks, so recovery never looks
/// further past the end of the log than this for leftovers.
pub const FORCE_SECTORS_MAX: u64 = 2048;
/// How often a checkpoint looks again for records not yet installed.
pub const INSTALL_POLL_NS: u64 = 20_000;

/// When a commit returns, relative to the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Durability {
    /// Commit waits until its record is durable; concurrent commits share
    /// one force (group commit). The default.
    #[default]
    Sync,
    /// Commit returns once its record is in the log buffer; the log is
    /// written in the background. A crash may lose acknowledged commits.
    /// For experiments only.
    NoSync,
}

impl Durability {
    pub fn parse(s: &str) -> Option<Durability> {
        match s {
            "sync" | "group-commit" => Some(Durability::Sync),
            "no-sync" | "nosync" => Some(Durability::NoSync),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Sync => "sync",
            Durability::NoSync => "no-sync",
        }
    }
}

/// How the log behaves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WalConfig {
    pub durability: Durability,
    /// The flusher waits this long before writing, to gather commits.
    pub commit_delay_ns: u64,
    pub buffer_bytes: usize,
    /// Log a full-page image at a page's first change after each
    /// checkpoint, so torn or damaged pages can be repaired (see the
    /// module documentation).
    pub page_images: bool,
    /// Release a committing transaction's row locks once its commit record
    /// is appended, before the log force that makes it durable (DB-7), as
    /// InnoDB does; the next writer of a hot row then joins the same group
    /// commit instead of waiting for the force. Off by default: the
    /// papers' servers are modelled holding locks through the force, and
    /// the lab's figures are measured that way.
    pub early_lock_release: bool,
    /// In the real world, a flusher forcing for a commit first waits (at
    /// most half a force) for as many commits as the last group had
    /// ([`group`]). On by default; the simulated world never waits.
    pub group_wait: bool,
}

impl Default for WalConfig {
    fn default() -> Self {
        WalConfig {
            durability: Durability::Sync,
            commit_delay_ns: 0,
            buffer_bytes: LOG_BUFFER_BYTES_DEFAULT,
            page_images: true,
            early_lock_release: false,
            group_wait: true,
        }
    }
}

impl WalConfig {
    pub fn validate(&self) -> Result<()> {
        if !(LOG_BUFFER_BYTES_MIN..=LOG_BUFFER_BYTES_MAX).contains(&self.buffer_bytes) {
            return Err(Error::Config(format!(
                "log buffer of {} bytes is outside {LOG_BUFFER_BYTES_MIN}..={LOG_BUFFER_BYTES_MAX}",
                self.buffer_bytes
            )));
        }
        if self.commit_delay_ns > COMMIT_DELAY_NS_MAX {
            return Err(Error::Config(format!(
                "commit delay of {} ns is longer than the maximum of {COMMIT_DELAY_NS_MAX} ns",
                self.commit_delay_ns
            )));
        }
        Ok(())
    }
}

/// lee2008 Table 3's columns and more, for one run.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct LogStats {
    pub records: u64,
    pub bytes_appended: u64,
    pub commits: u64,
    /// Log forces (device writes).
    pub writes: u64,
    /// Log sectors written (of the log's sector size, 512 bytes unless the
    /// device's sector is larger).
    pub sectors_written: u64,
    pub write_ns_total: u64,
    /// Forces that began by rewriting the previous force's last sector.
    pub tail_rewrites: u64,
    /// Commits made durable by the forces.
    pub commits_forced: u64,
    /// Full-page images logged, and their bytes (within `bytes_appended`).
    pub page_images: u64,
    pub page_image_bytes: u64,
    /// Appends refused because the log was full.
    pub log_full: u64,
    /// Times the region wrapped around.
    pub wraps: u64,
    /// Real-world flushers' waits for their group ([`group`]): those that
    /// saw the expected group, those that ran out of time, and the time
    /// spent waiting.
    pub group_waits_filled: u64,
    pub group_waits_timed_out: u64,
    pub group_wait_ns_total: u64,
    /// Forces made to empty a full log buffer: by a task holding no latch
    /// (`room_forces`: a writer before it latches, or an unlatched append
    /// such as a commit record), and by an append under latches
    /// that found the buffer at [`LATCHED_BUFFER_FACTOR`] times its size
    /// (`latched_forces`, WAL-15).
    pub room_forces: u64,
    pub latched_forces: u64,
}

impl LogStats {
    pub fn commits_per_write(&self) -> f64 {
        ratio(self.commits_forced, self.writes)
    }

    pub fn avg_write_sectors(&self) -> f64 {
        ratio(self.sectors_written, self.writes)
    }

    pub fn avg_write_ms(&self) -> f64 {
        ratio(self.write_ns_total, self.writes) / 1e6
    }

    /// Counters accumulated since `earlier` (for measuring an interval).
    pub fn since(&self, earlier: &LogStats) -> LogStats {
        LogStats {
            records: self.records - earlier.records,
            bytes_appended: self.bytes_appended - earlier.bytes_appended,
            commits: self.commits - earlier.commits,
            writes: self.writes - earlier.writes,
            sectors_written: self.sectors_written - earlier.sectors_written,
            write_ns_total: self.write_ns_total - earlier.write_ns_total,
            tail_rewrites: self.tail_rewrites - earlier.tail_rewrites,
            commits_forced: self.commits_forced - earlier.commits_forced,
            page_images: self.page_images - earlier.page_images,
            page_image_bytes: self.page_image_bytes - earlier.page_image_bytes,
            log_full: self.log_full - earlier.log_full,
            wraps: self.wraps - earlier.wraps,
            group_waits_filled: self.group_waits_filled - earlier.group_waits_filled,
            group_waits_timed_out: self.group_waits_timed_out - earlier.group_waits_timed_out,
            group_wait_ns_total: self.group_wait_ns_total - earlier.group_wait_ns_total,
            room_forces: self.room_forces - earlier.room_forces,
            latched_forces: self.latched_forces - earlier.latched_forces,
        }
    }
}

/// What the log knows of an active transaction.
#[derive(Clone, Debug)]
struct TxnEntry {
    public: ActiveTxn,
    /// Its first record: the log start may not pass it.
    first_lsn: u64,
    /// Log bytes reserved for compensating its updates.
    reserved_bytes: u64,
}

/// Keep the transaction table, the reservations and the uninstalled set in
/// step with an appended record of `size` bytes (WAL-5, WAL-6).
fn track(st: &mut LogState, installs: &Installs, lsn: u64, size: u64, record: &LogRecord) {
    if !record.body.redo().is_empty() {
        installs.register(lsn, &mut st.uninstalled_overflow);
    }
    let undo_next = match record.txn_effect(lsn) {
        record::TxnEffect::Nothing => return,
        record::TxnEffect::Ended => {
            if let Some(t) = st.active.remove(&record.txn) {
                st.reserved_bytes -= t.reserved_bytes;
            }
            return;
        }
        record::TxnEffect::Active { undo_next } => undo_next,
    };
    // An update reserves room for its compensation; a compensation uses it.
    let reserve = match &record.body {
        Body::Update { .. } => size + UNDO_RESERVE_SLACK_BYTES,
        _ => 0,
    };
    let entry = st.active.entry(record.txn).or_insert_with(|| TxnEntry {
        public: ActiveTxn {
            txn: record.txn,
            last_lsn: lsn,
            undo_next: lsn,
        },
        first_lsn: lsn,
        reserved_bytes: 0,
    });
    entry.public.last_lsn = lsn;
    entry.public.undo_next = undo_next;
    // A compensation uses up what its update reserved (at most that).
    let used = if reserve == 0 {
        size.min(entry.reserved_bytes)
    } else {
        0
    };
    entry.reserved_bytes = entry.reserved_bytes + reserve - used;
    st.reserved_bytes = st.reserved_bytes + reserve - used;
}

/// Whether a record may use the log's reserve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reserve {
    No,
    /// Compensation, commit and abort records: they finish work begun.
    Yes,
    /// Checkpoint records: only when the checkpoint can free log space,
    /// that is when no active transaction holds the log start.
    IfUnpinned,
}

fn reserve_use(body: &Body) -> Reserve {
    match body {
        Body::Compensation { .. } | Body::Commit { .. } | Body::Abort | Body::Restart { .. } => {
            Reserve::Yes
        }
        Body::CheckpointBegin | Body::CheckpointEnd { .. } => Reserve::IfUnpinned,
        Body::Update { .. } | Body::Unlogged { .. } => Reserve::No,
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// A force keeps its two buffers (the stream bytes it took, and their
/// sectors) for the next force while each holds at most this many times
/// `buffer_bytes`: twice a full buffer under latches
/// (`LATCHED_BUFFER_FACTOR`), as a growing buffer's capacity may double
/// past its length. A force after a long stall may be larger; its buffers
/// are freed. Freeing every full buffer instead made each force of a log
/// kept full (a bulk load's) grow a new one from empty, in fresh memory.
const FORCE_BUFFERS_KEPT_FACTOR: usize = 2 * LATCHED_BUFFER_FACTOR;

struct LogState {
    /// Bytes from `buf_start_lsn` to `end_lsn` (WAL-3).
    buf: Vec<u8>,
    buf_start_lsn: u64,
    /// The end of the write of the force in flight, which holds the bytes
    /// before `buf_start_lsn` that are not durable yet (WAL-3); 0 if none.
    writing_end_lsn: u64,
    end_lsn: u64,
    flushed_lsn: u64,
    /// The oldest LSN recovery may need, as the durable master says (WAL-9).
    start_lsn: u64,
    /// The last record appended (the next record links to it).
    last_record_lsn: u64,
    /// A page whose LSN is at or below this gets a full-page image at its
    /// next change (0: no images).
    image_horizon_lsn: u64,
    flushing: bool,
    /// End of the last force's write, to count tail rewrites.
    last_write_end_lsn: u64,
    commits_pending: u64,
    failed: Option<String>,
    stats: LogStats,
    /// The transaction table, kept by the log itself so that it changes
    /// atomically with the records that change it (WAL-5).
    active: BTreeMap<u64, TxnEntry>,
    /// Sum of the active transactions' reservations.
    reserved_bytes: u64,
    /// Records with page changes logged but not yet installed in the
    /// buffer pool that found no free slot in `Wal::installs` (WAL-6,
    /// INS-1).
    uninstalled_overflow: BTreeSet<u64>,
    /// Tasks waiting for a force or a master write to end, in arrival
    /// order: the LSN each needs durable (`u64::MAX`: the flusher role
    /// itself) and where it sleeps (WAL-11).
    flush_waiters: VecDeque<(u64, Arc<FlushSlot>)>,
    /// The last force's buffers (its copy of `buf` and its sectors), kept
    /// for the next force to fill instead of allocating; only the flusher
    /// uses them (WAL-11: one force at a time).
    force_buffers: (Vec<u8>, Vec<u8>),
}

/// Where one flush waiter sleeps (WAL-11).
#[derive(Default)]
struct FlushSlot {
    wake: Condvar,
    /// The flusher role was handed to this waiter.
    granted: std::sync::atomic::AtomicBool,
    /// Set, under the log's lock, before `wake` is notified: a waiter that
    /// spins instead of sleeping sees it (see [`Wal::wait_flush`]).
    woken: std::sync::atomic::AtomicBool,
    /// Set with `woken` when the log is durable past the waiter's LSN: it
    /// returns without taking the log's lock again.
    covered: std::sync::atomic::AtomicBool,
}

/// Hands out commit timestamps in log order (see [`Wal::append_commit`]).
/// Called under the log's lock: must not block.
pub trait CommitClock {
    /// The commit timestamp of `txn`.
    fn assign(&self, txn: u64) -> u64;
    /// The commit record with timestamp `ts` ends at `end_lsn`.
    fn appended(&self, ts: u64, end_lsn: u64);
}

/// What a checkpoint needs to know, as of its begin record.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointStart {
    pub begin_lsn: u64,
    pub active: Vec<ActiveTxn>,
    /// Oldest record not yet installed in the buffer pool (0: none).
    pub pending_lsn: u64,
    /// Where the log may start once this checkpoint is complete: the begin
    /// record, or the first record of an older active transaction.
    pub start_lsn: u64,
}

/// Where a resumed log continues, as recovery found it.
#[derive(Clone, Debug)]
pub struct LogEnd {
    /// The end of the valid records.
    pub end_lsn: u64,
    /// The last valid record (0: none).
    pub last_record_lsn: u64,
    /// Sectors past the end left by a write that did not complete.
    pub beyond: BeyondEnd,
}

/// The write-ahead log of one database.
pub struct Wal {
    device: DeviceRef,
    config: WalConfig,
    layout: LogLayout,
    /// Bytes kept back for recovery, images and checkpoints.
    reserve_bytes: u64,
    state: Mutex<LogState>,
    /// Records appended but not yet installed (WAL-6), with
    /// `LogState::uninstalled_overflow`.
    installs: Installs,
    master: Mutex<Master>,
    /// Wakes the checkpointer when the log fills up.
    checkpoint_wanted: WriterStop,
    /// The database's CPU prices: log bytes appended are owed at them
    /// ([`crate::cpu_prices`]; none until a database sets them).
    cpu: std::sync::OnceLock<Arc<crate::cpu_prices::CpuPrices>>,
    /// Whole-state checks at each change (the simulated world; the
    /// O(active transactions) ones with debug assertions only).
    checking: bool,
    /// Called once when the log enters its failed state (WAL-4), to wake
    /// whoever waits elsewhere (the lock manager's waiters).
    failure_hooks: std::sync::Mutex<Vec<FailureHook>>,
    /// The log before this LSN has been forgotten on the device (WAL-10).
    forgotten_lsn: std::sync::atomic::AtomicU64,
    /// Test-only: re-create the master-record failure race (see
    /// [`Wal::reintroduce_master_failure_race`]).
    old_master_race: std::sync::atomic::AtomicBool,
    /// Copies of `LogState::failed.is_some()` and `image_horizon_lsn`,
    /// stored under the state's lock where those change, so that the hot
    /// paths that only read them take no lock (WAL-12).
    failed_seen: std::sync::atomic::AtomicBool,
    image_horizon_seen: std::sync::atomic::AtomicU64,
    /// Whether the buffer holds `buffer_bytes` or more, stored under the
    /// state's lock wherever the buffer changes (WAL-15): writers look at
    /// it before they latch, without the lock.
    buffer_full_seen: std::sync::atomic::AtomicBool,
    /// A copy of `LogState::flushed_lsn`, likewise (WAL-12).
    flushed_seen: std::sync::atomic::AtomicU64,
    /// The real-world flusher's wait for its group (WAL-13).
    group: group::GroupWait,
    /// Real-world flush waiters spinning now, the heir aside (WAL-11).
    spinners: std::sync::atomic::AtomicUsize,
}

/// See [`Wal::on_failure`].
pub type FailureHook = Arc<dyn Fn(&str) + Send + Sync>;

impl Wal {
    /// The layout of a log of `capacity_bytes` on `device` with `salt`.
    pub fn layout_for(device: &DeviceRef, capacity_bytes: u64, salt: u32) -> Result<LogLayout> {
        if capacity_bytes > device.capacity_bytes() {
            return Err(Error::Open(format!(
                "log device '{}' of {} bytes is smaller than its log of {capacity_bytes} bytes",
                device.name(),
                device.capacity_bytes()
            )));
        }
        LogLayout::for_device(
            device.name(),
            capacity_bytes,
            u64::from(device.sector_bytes()),
            salt,
        )
    }

    /// A new, empty log with a fresh salt on `device`, using at most
    /// `capacity_bytes` of it (None: all of it); its master record says:
    /// no checkpoint.
    pub fn create(
        device: DeviceRef,
        config: WalConfig,
        database_id: u64,
        capacity_bytes: Option<u64>,
    ) -> Result<Arc<Wal>> {
        let salt = (Rt::current().random_u64() as u32).max(1);
        let capacity_bytes = capacity_bytes
            .unwrap_or(u64::MAX)
            .min(device.capacity_bytes());
        let layout = Wal::layout_for(&device, capacity_bytes, salt)?;
        let first = layout.first_lsn();
        let master = Master {
            sequence: 0,
            checkpoint_lsn: 0,
            start_lsn: first,
            salt,
            sector_bytes: layout.sector_bytes as u32,
            database_id,
            capacity_bytes,
        };
        let end = LogEnd {
            end_lsn: first,
            last_record_lsn: 0,
            beyond: BeyondEnd::default(),
        };
        let wal = Wal::new(device, config, layout, master, &end, Vec::new())?;
        // Every page's first change in a new database is an image: until
        // the first checkpoint, nothing else could repair a torn page.
        if wal.config.page_images {
            wal.set_image_horizon(&mut wal.state.lock(), first);
        }
        wal.write_master(0, first)?;
        Ok(wal)
    }

    /// The layout a master record describes on `device`.
    pub fn layout_of(device: &DeviceRef, master: &Master) -> Result<LogLayout> {
        let layout = Wal::layout_for(device, master.capacity_bytes, master.salt)?;
        if u64::from(master.sector_bytes) != layout.sector_bytes {
            return Err(Error::Open(format!(
                "log device '{}': the master record says {}-byte log sectors, the device gives {}",
                device.name(),
                master.sector_bytes,
                layout.sector_bytes
            )));
        }
        Ok(layout)
    }

    /// Continue a log whose valid records end where recovery found
    /// (`end`). Leftover sectors past the end are erased and flushed first,
    /// so that no stale sector can ever follow new ones.
    pub fn resume(
        device: DeviceRef,
        config: WalConfig,
        master: Master,
        end: &LogEnd,
    ) -> Result<Arc<Wal>> {
        let layout = Wal::layout_of(&device, &master)?;
        let k = layout.sector_of(end.end_lsn);
        let mut tail = vec![0u8; (end.end_lsn - layout.sector_lsn(k)) as usize];
        if !tail.is_empty() {
            let mut whole = vec![0u8; layout.sector_bytes as usize];
            device.read(layout.offset_of_sector(k), &mut whole)?;
            let n = tail.len();
            tail.copy_from_slice(&layout.payload(&whole)[..n]);
        }
        if !end.beyond.leftovers.is_empty() {
            let zero = vec![0u8; layout.sector_bytes as usize];
            for &leftover in &end.beyond.leftovers {
                device.write(layout.offset_of_sector(leftover), &zero)?;
            }
            device.flush()?;
        }
        let wal = Wal::new(device, config, layout, master, end, tail)?;
        let horizon = if wal.config.page_images {
            master.checkpoint_lsn.max(master.start_lsn)
        } else {
            0
        };
        wal.set_image_horizon(&mut wal.state.lock(), horizon);
        Ok(wal)
    }

    fn new(
        device: DeviceRef,
        config: WalConfig,
        layout: LogLayout,
        master: Master,
        end: &LogEnd,
        tail: Vec<u8>,
    ) -> Result<Arc<Wal>> {
        config.validate()?;
        let buf_start_lsn = end.end_lsn - tail.len() as u64;
        assert_eq!(buf_start_lsn % layout.payload_bytes(), 0, "WAL-3");
        let reserve_bytes = LOG_RESERVE_BYTES_MIN.max(layout.capacity_bytes() / 32);
        if reserve_bytes * 2 > layout.capacity_bytes() {
            return Err(Error::Config(format!(
                "log device '{}' of {} bytes is too small: the log keeps {reserve_bytes} bytes in reserve and needs as much again",
                device.name(),
                device.capacity_bytes()
            )));
        }
        let checking = Rt::try_current().is_some_and(|rt| rt.world() == World::Simulated);
        let wal = Arc::new(Wal {
            device,
            config,
            layout,
            reserve_bytes,
            state: Mutex::new(LogState {
                buf: tail,
                buf_start_lsn,
                writing_end_lsn: 0,
                end_lsn: end.end_lsn,
                flushed_lsn: end.end_lsn,
                start_lsn: master.start_lsn,
                last_record_lsn: end.last_record_lsn,
                image_horizon_lsn: 0,
                flushing: false,
                last_write_end_lsn: end.end_lsn,
                commits_pending: 0,
                failed: None,
                stats: LogStats::default(),
                active: BTreeMap::new(),
                reserved_bytes: 0,
                uninstalled_overflow: BTreeSet::new(),
                flush_waiters: VecDeque::new(),
                force_buffers: Default::default(),
            }),
            installs: Installs::new(INSTALL_SLOTS),
            master: Mutex::new(master),
            checkpoint_wanted: WriterStop::new(),
            cpu: std::sync::OnceLock::new(),
            checking,
            failure_hooks: std::sync::Mutex::new(Vec::new()),
            forgotten_lsn: std::sync::atomic::AtomicU64::new(master.start_lsn),
            old_master_race: std::sync::atomic::AtomicBool::new(false),
            failed_seen: std::sync::atomic::AtomicBool::new(false),
            image_horizon_seen: std::sync::atomic::AtomicU64::new(0),
            buffer_full_seen: std::sync::atomic::AtomicBool::new(false),
            flushed_seen: std::sync::atomic::AtomicU64::new(end.end_lsn),
            group: group::GroupWait::default(),
            spinners: std::sync::atomic::AtomicUsize::new(0),
        });
        wal.check_state(&wal.state.lock());
        Ok(wal)
    }

    /// The device the log is on.
    pub fn device(&self) -> &DeviceRef {
        &self.device
    }

    pub fn config(&self) -> &WalConfig {
        &self.config
    }

    /// Where the log lives on its device.
    pub fn layout(&self) -> LogLayout {
        self.layout
    }

    /// Owe log bytes appended at the database's `prices` from now on (once).
    pub fn set_cpu_prices(&self, prices: Arc<crate::cpu_prices::CpuPrices>) {
        let _ = self.cpu.set(prices);
    }

    /// Append a record; returns its LSN and the LSN just past it.
    pub fn append(&self, txn: u64, prev_lsn: u64, body: Body) -> Result<(u64, u64)> {
        self.append_without_horizon(false, txn, prev_lsn, body)
    }

    /// [`Wal::append`] for a caller holding latches (a mini-transaction):
    /// a full buffer does not make it force the log (WAL-15).
    pub fn append_latched(&self, txn: u64, prev_lsn: u64, body: Body) -> Result<(u64, u64)> {
        self.append_without_horizon(true, txn, prev_lsn, body)
    }

    fn append_without_horizon(
        &self,
        latched: bool,
        txn: u64,
        prev_lsn: u64,
        body: Body,
    ) -> Result<(u64, u64)> {
        let appended = self.append_at_horizon(None, latched, txn, prev_lsn, body)?;
        Ok(appended
            .unwrap_or_else(|_| unreachable!("a record without a horizon is always appended")))
    }

    /// Make room in the log buffer before taking any latch (WAL-15,
    /// InnoDB's `log_free_check`): if the buffer is full, force it out
    /// now, so that the appends of the latched work that follows do not.
    /// One atomic load when the buffer has room.
    pub fn make_buffer_room(&self) -> Result<()> {
        use std::sync::atomic::Ordering;
        while self.buffer_full_seen.load(Ordering::Acquire) {
            let mut st = self.state.lock();
            if let Some(failure) = &st.failed {
                return Err(Error::LogFailed(failure.clone()));
            }
            if st.buf.len() < self.config.buffer_bytes {
                return Ok(());
            }
            st.stats.room_forces += 1;
            let end = st.end_lsn;
            drop(st);
            self.flush_to(end)?;
        }
        Ok(())
    }

    /// Append a record with page changes whose full-page images were chosen
    /// for `horizon_lsn` (see [`Wal::image_horizon`]). If a checkpoint has
    /// moved the horizon since, nothing is appended, and the body comes
    /// back (`Ok(Err(body))`) for the caller to give it new redo.
    pub fn append_for_horizon(
        &self,
        horizon_lsn: u64,
        txn: u64,
        prev_lsn: u64,
        body: Body,
    ) -> Result<std::result::Result<(u64, u64), Body>> {
        self.append_at_horizon(Some(horizon_lsn), true, txn, prev_lsn, body)
    }

    /// Append `body`, for the image horizon `horizon_lsn` if given;
    /// `latched`: the caller holds latches (WAL-15).
    fn append_at_horizon(
        &self,
        horizon_lsn: Option<u64>,
        latched: bool,
        txn: u64,
        prev_lsn: u64,
        body: Body,
    ) -> Result<std::result::Result<(u64, u64), Body>> {
        let record = LogRecord {
            lsn: 0,
            txn,
            prev_lsn,
            body,
        };
        record.check_limits()?;
        let mut bytes = record.encode_unsealed(0);
        let size = bytes.len();
        let images: Vec<u64> = record
            .body
            .redo()
            .iter()
            .filter(|p| p.image)
            .map(|p| p.ranges.iter().map(|(_, b)| b.len() as u64 + 8).sum())
            .collect();
        let reserve = reserve_use(&record.body);
        let mut moved = false;
        let proceed = |st: &mut LogState| {
            if horizon_lsn.is_some_and(|h| h != st.image_horizon_lsn) {
                moved = true;
                return false;
            }
            st.stats.page_images += images.len() as u64;
            st.stats.page_image_bytes += images.iter().sum::<u64>();
            true
        };
        // The record goes to the append only if it proceeds.
        let mut unappended = Some(record);
        let lsns = self.append_checked(size, reserve, latched, proceed, |lsn, link| {
            LogRecord::relocate(&mut bytes, lsn, link);
            (unappended.take().expect("appended once"), bytes)
        })?;
        Ok(match unappended {
            Some(record) => {
                assert!(moved, "WAL-7: only a moved image horizon stops an append");
                Err(record.body)
            }
            None => Ok(lsns),
        })
    }

    /// Store whether the buffer is full (WAL-15), under the state's lock.
    fn note_buffer_len(&self, st: &LogState) {
        let full = st.buf.len() >= self.config.buffer_bytes;
        self.buffer_full_seen
            .store(full, std::sync::atomic::Ordering::Release);
    }

    /// The horizon for full-page images now: a page whose LSN is at or
    /// below it needs one at its next change (0: none needed).
    pub fn image_horizon(&self) -> u64 {
        self.image_horizon_seen
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Move the horizon for full-page images, under the state's lock.
    fn set_image_horizon(&self, st: &mut LogState, lsn: u64) {
        st.image_horizon_lsn = lsn;
        self.image_horizon_seen
            .store(lsn, std::sync::atomic::Ordering::Release);
    }

    /// Enter the failed state under the state's lock (WAL-4); the first
    /// reason stays. Returns it.
    fn record_failure(&self, st: &mut LogState, why: &str) -> String {
        let first = st.failed.get_or_insert_with(|| why.to_string()).clone();
        self.failed_seen
            .store(true, std::sync::atomic::Ordering::SeqCst);
        first
    }

    /// Append a commit record whose commit timestamp `clock` hands out
    /// under the log's lock, so that timestamps follow log order (WAL-7);
    /// returns the timestamp, the LSN and the end of the record.
    pub fn append_commit(
        &self,
        txn: u64,
        prev_lsn: u64,
        clock: &dyn CommitClock,
    ) -> Result<(u64, u64, u64)> {
        let commit = |commit_ts| LogRecord {
            lsn: 0,
            txn,
            prev_lsn,
            body: Body::Commit { commit_ts },
        };
        // Every commit record has the same size, whatever its timestamp.
        let size = commit(0).encode_unsealed(0).len();
        let mut ts = 0;
        let (lsn, end) = self.append_sized(size, Reserve::Yes, |lsn, link| {
            ts = clock.assign(txn);
            let record = commit(ts);
            let mut bytes = record.encode_unsealed(lsn);
            LogRecord::relocate(&mut bytes, lsn, link);
            clock.appended(ts, lsn + bytes.len() as u64);
            (record, bytes)
        })?;
        Ok((ts, lsn, end))
    }

    fn append_sized(
        &self,
        size: usize,
        reserve: Reserve,
        make: impl FnOnce(u64, u64) -> (LogRecord, Vec<u8>),
    ) -> Result<(u64, u64)> {
        self.append_checked(size, reserve, false, |_| true, make)
    }

    /// Append a record of `size` bytes that `make(lsn, link)` builds, under
    /// the log's lock, once it is sure to fit and `proceed` agrees (WAL-7);
    /// `reserve`: whether the record may use the reserve.
    fn append_checked(
        &self,
        size: usize,
        reserve: Reserve,
        latched: bool,
        proceed: impl FnOnce(&mut LogState) -> bool,
        make: impl FnOnce(u64, u64) -> (LogRecord, Vec<u8>),
    ) -> Result<(u64, u64)> {
        if size > record::RECORD_BYTES_MAX {
            return Err(Error::TooLarge(format!(
                "a log record of {size} bytes is larger than the {} bytes recovery reads",
                record::RECORD_BYTES_MAX
            )));
        }
        // WAL-15: under latches, only a buffer far past its size is forced.
        let buffer_max = match latched {
            true => self.config.buffer_bytes * LATCHED_BUFFER_FACTOR,
            false => self.config.buffer_bytes,
        };
        let mut st = loop {
            let mut st = self.state.lock();
            if let Some(failure) = &st.failed {
                return Err(Error::LogFailed(failure.clone()));
            }
            if st.buf.len() < buffer_max {
                break st;
            }
            match latched {
                true => st.stats.latched_forces += 1,
                false => st.stats.room_forces += 1,
            }
            let end = st.end_lsn;
            drop(st);
            self.flush_to(end)?;
        };
        self.check_room(&mut st, size as u64, reserve)?;
        if !proceed(&mut st) {
            return Ok((0, 0));
        }
        let lsn = st.end_lsn;
        let (record, bytes) = make(lsn, st.last_record_lsn);
        assert_eq!(
            bytes.len(),
            size,
            "WAL-7: a record's size is known before its LSN"
        );
        let end = lsn + bytes.len() as u64;
        st.buf.extend_from_slice(&bytes);
        self.note_buffer_len(&st);
        st.end_lsn = end;
        st.last_record_lsn = lsn;
        track(&mut st, &self.installs, lsn, size as u64, &record);
        st.stats.records += 1;
        st.stats.bytes_appended += size as u64;
        if let Some(cpu) = self.cpu.get() {
            cpu.owe_log(size);
        }
        if self.layout.sector_of(end) / self.layout.sectors
            != self.layout.sector_of(lsn) / self.layout.sectors
        {
            st.stats.wraps += 1;
        }
        if matches!(record.body, Body::Commit { .. }) {
            st.stats.commits += 1;
            st.commits_pending += 1;
            self.group.set_pending(st.commits_pending);
        }
        self.check_state(&st);
        Ok((lsn, end))
    }

    /// Refuse an append that the log cannot hold (see the module
    /// documentation); wake the checkpointer when the log is half full.
    fn check_room(&self, st: &mut LogState, size: u64, reserve: Reserve) -> Result<()> {
        let limit = self.layout.limit_lsn(st.start_lsn);
        let used = st.end_lsn - st.start_lsn;
        if used > self.layout.capacity_bytes() / 2 {
            self.checkpoint_wanted.request();
        }
        let pinned = || st.active.values().any(|t| t.first_lsn <= st.start_lsn);
        let reserve_ok = match reserve {
            Reserve::Yes => true,
            Reserve::IfUnpinned => !pinned(),
            Reserve::No => false,
        };
        let kept_back = if reserve_ok {
            0
        } else {
            self.reserve_bytes + st.reserved_bytes
        };
        if st.end_lsn + size + kept_back <= limit {
            return Ok(());
        }
        st.stats.log_full += 1;
        self.checkpoint_wanted.request();
        // A checkpoint can move the log start up to the oldest open
        // transaction's first record, no further: name that transaction.
        let oldest = st.active.values().min_by_key(|t| t.first_lsn);
        let why = match oldest {
            Some(t) if t.first_lsn <= st.start_lsn => format!(
                "transaction {} started at LSN {} holds the log",
                t.public.txn, t.first_lsn
            ),
            Some(t) => format!(
                "the log start at LSN {} waits for a checkpoint, which can free the log only up to LSN {}, where the oldest open transaction {} started",
                st.start_lsn, t.first_lsn, t.public.txn
            ),
            None => format!(
                "the log start at LSN {} waits for a checkpoint (no transaction is open)",
                st.start_lsn
            ),
        };
        Err(Error::LogFull(format!(
            "log device '{}' holds {} of {} bytes ({} kept in reserve): {why}",
            self.device.name(),
            used,
            self.layout.capacity_bytes(),
            kept_back
        )))
    }

    /// Open a checkpoint: append its begin record, move the horizon for
    /// full-page images to it, and snapshot the transaction table and the
    /// oldest uninstalled record with it (WAL-5, WAL-6).
    pub fn checkpoint_begin(&self) -> Result<CheckpointStart> {
        let (begin_lsn, _) = self.append(0, 0, Body::CheckpointBegin)?;
        let mut st = self.state.lock();
        if self.config.page_images {
            let horizon = st.image_horizon_lsn.max(begin_lsn);
            self.set_image_horizon(&mut st, horizon);
        }
        // Records appended after the begin record are seen by analysis; take
        // the table as of the begin record by ignoring them.
        let older = || st.active.values().filter(|t| t.public.last_lsn < begin_lsn);
        let active = older().map(|t| t.public.clone()).collect();
        let start_lsn = older().map(|t| t.first_lsn).fold(begin_lsn, u64::min);
        let pending_lsn = self
            .oldest_uninstalled(&st)
            .filter(|&lsn| lsn < begin_lsn)
            .unwrap_or(0);
        Ok(CheckpointStart {
            begin_lsn,
            active,
            pending_lsn,
            start_lsn,
        })
    }

    /// Wait until every record before `lsn` is installed in the buffer
    /// pool (WAL-6): then every page changed before it is dirty or written.
    pub fn wait_installed_before(&self, lsn: u64) -> Result<()> {
        loop {
            let st = self.state.lock();
            if let Some(failure) = &st.failed {
                return Err(Error::LogFailed(failure.clone()));
            }
            if self
                .oldest_uninstalled(&st)
                .is_none_or(|first| first >= lsn)
            {
                return Ok(());
            }
            drop(st);
            Rt::current().sleep(INSTALL_POLL_NS);
        }
    }

    /// The mini-transaction of the record at `lsn` has installed its pages.
    /// Takes the state's lock only for a record that found no slot (INS-1).
    pub fn installed(&self, lsn: u64) {
        if self.installs.installed(lsn) == installs::Removed::Slot {
            return;
        }
        // Absent: a record without page changes, never registered (its
        // mini-transaction does not call this; a caller that did is harmless).
        self.state.lock().uninstalled_overflow.remove(&lsn);
    }

    /// The oldest record appended but not installed, if any (WAL-6); the
    /// caller holds the state's lock, so no record is being registered.
    fn oldest_uninstalled(&self, st: &LogState) -> Option<u64> {
        let overflow = st.uninstalled_overflow.first().copied();
        self.installs.oldest().into_iter().chain(overflow).min()
    }

    /// Seed the transaction table with recovery's losers (before they are
    /// undone), each with its first record and a reservation for its undo.
    pub fn set_active(&self, active: impl IntoIterator<Item = (ActiveTxn, u64)>) {
        let mut st = self.state.lock();
        st.active = active
            .into_iter()
            .map(|(t, first_lsn)| {
                let entry = TxnEntry {
                    public: t.clone(),
                    first_lsn,
                    reserved_bytes: 0,
                };
                (t.txn, entry)
            })
            .collect();
        st.reserved_bytes = 0;
        self.check_state(&st);
    }

    /// Active transactions now.
    pub fn active(&self) -> Vec<ActiveTxn> {
        let st = self.state.lock();
        st.active.values().map(|t| t.public.clone()).collect()
    }

    /// Wait until the checkpointer is wanted or `timeout_ns` passes; true
    /// if it is wanted (the log is filling up, or a stop was requested).
    pub fn wait_checkpoint_wanted(&self, rt: &Rt, timeout_ns: u64) -> bool {
        let wanted = self.checkpoint_wanted.sleep(rt, timeout_ns);
        self.checkpoint_wanted.reset();
        wanted
    }

    /// Wake the checkpointer (a log filling up, or a stop).
    pub fn want_checkpoint(&self) {
        self.checkpoint_wanted.request();
    }

    pub fn end_lsn(&self) -> u64 {
        self.state.lock().end_lsn
    }

    pub fn flushed_lsn(&self) -> u64 {
        // Stored after the flush, under the lock (WAL-12): never ahead of
        // what is durable.
        self.flushed_seen.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The oldest LSN recovery may need (the durable master's log start).
    pub fn start_lsn(&self) -> u64 {
        self.state.lock().start_lsn
    }

    pub fn stats(&self) -> LogStats {
        use std::sync::atomic::Ordering::Relaxed;
        let mut stats = self.state.lock().stats.clone();
        stats.group_waits_filled = self.group.filled.load(Relaxed);
        stats.group_waits_timed_out = self.group.timed_out.load(Relaxed);
        stats.group_wait_ns_total = self.group.wait_ns_total.load(Relaxed);
        stats
    }

    /// True once a write or flush has failed (WAL-4).
    pub fn failed(&self) -> Option<String> {
        // Set under the state's lock with the failure itself: whoever
        // locked the state after the failure sees it here too.
        if !self.failed_seen.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        self.state.lock().failed.clone()
    }

    /// Test-only: make a failed master-record write give the flusher role
    /// up, and wake the next flusher, *before* it records the failure (the
    /// race `log_regressions.rs` names defect 5). A force can then
    /// flush the device after the failed flush, which WAL-4 forbids; the
    /// test `seeded_preemption_finds_the_old_master_failure_race` shows
    /// that the simulated world's seeded preemption (SIM-8) finds it.
    #[doc(hidden)]
    pub fn reintroduce_master_failure_race(&self, on: bool) {
        self.old_master_race
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Point the master record at a completed checkpoint and move the log
    /// start to `start_lsn`, durably; then the region before the start is
    /// free (WAL-9). The write takes the flusher's role, so no log force is
    /// in flight on the device meanwhile (WAL-2), and a failure fails the
    /// log in the same critical section that gives the role up (WAL-4): no
    /// flush of the device is ever issued after a failed one.
    pub fn write_master(&self, checkpoint_lsn: u64, start_lsn: u64) -> Result<()> {
        let mut master = self.master.lock();
        let mut st = self.state.lock();
        let mut granted = false;
        loop {
            Self::give_up_if_failed(&mut st, granted)?;
            if granted || !st.flushing {
                break;
            }
            // Never covered: no force makes the log durable past u64::MAX.
            (st, granted) = self
                .wait_flush(st, u64::MAX)
                .unwrap_or_else(|| (self.state.lock(), false));
        }
        assert!(
            start_lsn <= st.flushed_lsn.max(self.layout.first_lsn()),
            "WAL-1"
        );
        st.flushing = true;
        drop(st);
        let next = Master {
            sequence: master.sequence + 1,
            checkpoint_lsn,
            start_lsn: start_lsn.max(master.start_lsn),
            ..*master
        };
        let sector = self.layout.sector_bytes;
        let written = self
            .device
            .write(
                Master::offset_bytes(next.sequence, sector),
                &next.encode(sector as usize),
            )
            .and_then(|()| self.device.flush());
        let mut st = self.state.lock();
        st.flushing = false;
        if let Err(e) = written {
            let why = format!("writing the master record: {e}");
            if self
                .old_master_race
                .load(std::sync::atomic::Ordering::Relaxed)
            {
                // The defect, for the test that shows seeded preemption
                // finds it: the role is seen free (and the next flusher
                // woken) before the failure is recorded.
                Self::wake_flush_waiters(&mut st);
                drop(st);
                st = self.state.lock();
            }
            self.record_failure(&mut st, &why); // WAL-4, before the role is seen free
            drop(st);
            self.failed_now(&why);
            return Err(Error::LogFailed(why));
        }
        // WAL-9: the master naming the new start is durable (its write and
        // flush returned above), and the start only moves forward.
        assert!(
            next.start_lsn >= st.start_lsn,
            "WAL-9: the log start would move back from {} to {}",
            st.start_lsn,
            next.start_lsn
        );
        st.start_lsn = next.start_lsn;
        self.forget_before(next.start_lsn, st.end_lsn); // WAL-10
        Self::wake_flush_waiters(&mut st);
        self.check_state(&st);
        drop(st);
        *master = next;
        Ok(())
    }

    /// Tell the device that the log sectors before `lsn`'s sector will
    /// never be read again (WAL-10), so a modelled device frees them and
    /// memory follows the live log, not every byte ever logged. Only
    /// sectors whose ring slot no later sector (up to `end_lsn`'s, and one
    /// past it) has reused are named.
    fn forget_before(&self, lsn: u64, end_lsn: u64) {
        use std::sync::atomic::Ordering;
        let l = &self.layout;
        let from = self.forgotten_lsn.load(Ordering::Relaxed);
        if lsn <= from {
            return;
        }
        self.forgotten_lsn.store(lsn, Ordering::Relaxed);
        let last = l.sector_of(lsn);
        // Sector k's slot holds k + sectors once that was written.
        let mut k = l
            .sector_of(from)
            .max((l.sector_of(end_lsn) + 2).saturating_sub(l.sectors));
        while k < last {
            let n = (last - k).min(l.sectors - k % l.sectors);
            self.device
                .forget(l.offset_of_sector(k), n * l.sector_bytes);
            k += n;
        }
    }

    /// Flush a data device for a checkpoint or a shutdown. A failure fails
    /// the log as a failed log flush does (WAL-4): what the failed flush
    /// covered may be lost, so no later checkpoint may claim it durable,
    /// and no later flush may be trusted to have written it.
    pub fn flush_data_device(&self, device: &DeviceRef) -> Result<()> {
        if let Some(failure) = self.failed() {
            return Err(Error::LogFailed(failure));
        }
        device
            .flush()
            .map_err(|e| self.fail(format!("flushing data device: {e}")))?;
        match self.failed() {
            Some(failure) => Err(Error::LogFailed(failure)),
            None => Ok(()),
        }
    }

    /// Enter the failed state (WAL-4) for `why`, waking waiters; returns
    /// the error to report. Used for failed flushes, and by transactions
    /// whose commit cannot be logged or whose rollback cannot finish:
    /// recovery at the next open finishes their work.
    pub fn fail(&self, why: String) -> Error {
        let mut st = self.state.lock();
        let first = self.record_failure(&mut st, &why);
        drop(st);
        self.failed_now(&first);
        Error::LogFailed(why)
    }

    /// Register `hook`, called with the reason when the log fails.
    pub fn on_failure(&self, hook: FailureHook) {
        self.failure_hooks.lock().expect("failure hooks").push(hook);
    }

    /// Wake every waiter of the log and of the hooks (the log has failed).
    fn failed_now(&self, why: &str) {
        Self::wake_flush_waiters(&mut self.state.lock());
        // The hooks take runtime locks: call them without the std lock held
        // (a task switch inside a hook must not leave it held, SIM-7).
        let hooks = self.failure_hooks.lock().expect("failure hooks").clone();
        for hook in hooks {
            hook(why);
        }
    }

    /// Record the database's identity: the next master record carries it.
    pub fn set_database_id(&self, database_id: u64) {
        self.master.lock().database_id = database_id;
    }

    /// The master record in force.
    pub fn master(&self) -> Master {
        *self.master.lock()
    }

    /// Read the master record of a log device (`None`: neither copy is a
    /// master record, as on a device never used for a log). Copies that
    /// carry the magic but all fail their checksums are damage: the log
    /// was written, and cannot say where recovery starts (WAL-14).
    pub fn read_master(device: &DeviceRef) -> Result<Option<Master>> {
        let sector = layout::LOG_SECTOR_BYTES_MIN.max(u64::from(device.sector_bytes())) as usize;
        let mut copies = vec![0u8; 2 * sector];
        device.read(0, &mut copies)?;
        let (a, b) = copies.split_at(sector);
        let newest = Master::newest([Master::decode(a)?, Master::decode(b)?]);
        let written = [a, b]
            .iter()
            .any(|copy| copy.starts_with(master::LOG_MAGIC));
        if newest.is_none() && written {
            return Err(Error::LogDamaged {
                lsn: 0,
                offset_bytes: 0,
                problem: "both copies of the master record (log sectors 0 and 1) fail their \
                          checksums: where recovery starts is unknown"
                    .into(),
            });
        }
        Ok(newest)
    }

    /// Read records from `lsn` (a record's start) on.
    pub fn reader(&self, lsn: u64) -> LogReader {
        LogReader::new(self.device.clone(), self.layout, lsn, None)
    }

    /// Check the whole state (WAL-1, WAL-3, WAL-5; WAL-9 is asserted where
    /// the start moves); in the simulated
    /// world this runs at every change.
    pub fn check(&self) {
        let st = self.state.lock();
        self.verify_state(&st);
    }

    fn check_state(&self, st: &LogState) {
        if self.checking {
            self.verify_state(st);
        }
    }

    fn verify_state(&self, st: &LogState) {
        let l = &self.layout;
        assert!(
            st.start_lsn <= st.flushed_lsn,
            "WAL-1: start {} > flushed {}",
            st.start_lsn,
            st.flushed_lsn
        );
        assert!(st.flushed_lsn <= st.end_lsn, "WAL-1: flushed past end");
        assert!(
            st.end_lsn <= l.limit_lsn(st.start_lsn),
            "WAL-1: the log overran its start"
        );
        assert_eq!(
            st.buf_start_lsn % l.payload_bytes(),
            0,
            "WAL-3: buffer not at a sector"
        );
        assert!(
            st.buf_start_lsn <= st.flushed_lsn.max(st.writing_end_lsn) || st.failed.is_some(),
            "WAL-3: buffer starts past the durable end and the force in flight"
        );
        assert_eq!(
            st.buf_start_lsn + st.buf.len() as u64,
            st.end_lsn,
            "WAL-3: buffer length"
        );
        // The transaction table's checks are O(active transactions) at
        // every append: with 1,024 clients they were the largest single
        // host cost of a run. Like `BufferPool::check`, they run with debug
        // assertions on (the `crash` profile, where the crash harness and
        // the simtest run); the O(1) checks above run in every simulated
        // run.
        if cfg!(debug_assertions) {
            let reserved: u64 = st.active.values().map(|t| t.reserved_bytes).sum();
            assert_eq!(reserved, st.reserved_bytes, "WAL-5: reservations");
            assert!(
                st.active.values().all(|t| {
                    t.first_lsn <= t.public.last_lsn && t.public.last_lsn < st.end_lsn.max(1)
                }),
                "WAL-5: transaction table"
            );
        }
    }
}

#[cfg(test)]
mod tests;
