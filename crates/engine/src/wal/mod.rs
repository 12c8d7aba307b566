//! # The write-ahead log
//!
//! Every change reaches the log before it reaches a data page, and a commit
//! does not return before the log is durable up to its commit record
//! (*force at commit*, lee2008 section 4). The log is a byte stream; a
//! record's LSN is its byte position, and the log device holds it at the
//! same offset (after the reserved master-record area, [`master`]).
//!
//! ## Group commit
//!
//! A force is one device write plus a flush. Concurrent committers share it:
//! the first one that finds no force in flight becomes the *flusher* and
//! writes everything appended so far, every commit record in it included.
//! A committer whose record is covered by the force in flight waits for it
//! instead of issuing another; one whose record came too late waits for it
//! to end and then, if still not durable, becomes the next flusher
//! (PostgreSQL's `XLogFlush` rule). An optional *commit delay* lets the
//! flusher wait a little before writing, to gather more commits.
//!
//! ## Sectors
//!
//! Log writes cover whole 512-byte sectors, as on the raw devices lee2008
//! used. A force that ends mid-sector pads the sector; the next force starts
//! at that sector again and rewrites it with more records in it. These
//! *tail rewrites* are counted: on flash each one is an overwrite.
//!
//! ## Statistics
//!
//! [`LogStats`] carries lee2008 Table 3's columns: log writes, commits per
//! write, average write size in sectors, average write time.
//!
//! Invariants (WAL-n):
//! 1. `flushed_lsn <= end_lsn`, and every byte below `flushed_lsn` is on
//!    the device and was made durable by a flush (when durability is sync).
//! 2. At most one force is in flight, and no master-record write runs
//!    beside it: one flush of the log device at a time.
//! 3. The buffer starts at a sector boundary at or below `flushed_lsn` and
//!    holds every byte from there to `end_lsn`.
//! 4. After a failed write or flush the log accepts nothing more: a failed
//!    fsync is never retried, because the kernel may have dropped the data.
//!    A failed flush of the master record or of a data device fails the log
//!    the same way ([`Wal::flush_data_device`]): the database stops
//!    accepting commits and needs recovery.
//! 5. The transaction table (active transactions, their last record and
//!    next record to undo) changes under the same lock as the append of the
//!    record that changes it, so a checkpoint's snapshot is exactly the
//!    table as of its begin record.
//! 6. A record with page changes counts as *uninstalled* from its append
//!    until the mini-transaction has installed its pages
//!    ([`Wal::installed`]); a checkpoint records the oldest, so that redo
//!    starts early enough for pages not yet marked dirty.
//! 7. Commit timestamps are handed out in log order, and no record larger
//!    than recovery reads ([`record::RECORD_BYTES_MAX`]) is accepted.
//! 8. The log is never truncated: every change to every page since it was
//!    a zero page is in it, so any page can be rebuilt from the log alone
//!    ([`Wal::rebuild_page`]), which is how damaged pages are repaired
//!    (BUF-9). Truncating or recycling the log must first give that up.

pub mod codec;
pub mod master;
pub mod reader;
pub mod record;

use std::collections::BTreeMap;
use std::sync::Arc;

use flashlab_devices::DeviceRef;
use flashlab_runtime::{Condvar, Mutex, Rt};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::page::{self, PageId};
pub use master::{LOG_SECTOR_BYTES, LOG_START_LSN, Master};
pub use reader::LogReader;
pub use record::{ActiveTxn, Body, LogRecord};

/// Default size of the log buffer before appenders force it out.
pub const LOG_BUFFER_BYTES_DEFAULT: usize = 4 << 20;
/// Smallest log buffer accepted.
pub const LOG_BUFFER_BYTES_MIN: usize = 64 << 10;
/// How often the log is forced in the background under `no-sync`.
pub const NO_SYNC_FLUSH_INTERVAL_NS: u64 = 10_000_000;
/// Longest commit delay accepted (a longer one is surely a unit mistake).
pub const COMMIT_DELAY_NS_MAX: u64 = 1_000_000_000;

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
}

impl Default for WalConfig {
    fn default() -> Self {
        WalConfig {
            durability: Durability::Sync,
            commit_delay_ns: 0,
            buffer_bytes: LOG_BUFFER_BYTES_DEFAULT,
        }
    }
}

impl WalConfig {
    pub fn validate(&self) -> Result<()> {
        if self.buffer_bytes < LOG_BUFFER_BYTES_MIN {
            return Err(Error::Config(format!(
                "log buffer of {} bytes is smaller than the minimum of {LOG_BUFFER_BYTES_MIN}",
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
    pub sectors_written: u64,
    pub write_ns_total: u64,
    /// Forces that began by rewriting the previous force's last sector.
    pub tail_rewrites: u64,
    /// Commits made durable by the forces.
    pub commits_forced: u64,
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
        }
    }
}

/// Keep the transaction table and the uninstalled set in step with an
/// appended record (WAL-5, WAL-6).
fn track(st: &mut LogState, lsn: u64, record: &LogRecord) {
    if !record.body.redo().is_empty() {
        *st.uninstalled.entry(lsn).or_insert(0) += 1;
    }
    if record.txn == 0 {
        return;
    }
    match &record.body {
        Body::Update { undo: Some(_), .. } => {
            st.active.insert(
                record.txn,
                ActiveTxn {
                    txn: record.txn,
                    last_lsn: lsn,
                    undo_next: lsn,
                },
            );
        }
        Body::Compensation { undo_next, .. } => {
            st.active.insert(
                record.txn,
                ActiveTxn {
                    txn: record.txn,
                    last_lsn: lsn,
                    undo_next: *undo_next,
                },
            );
        }
        Body::Commit { .. } | Body::Abort => {
            st.active.remove(&record.txn);
        }
        _ => {}
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

struct LogState {
    /// Bytes from `buf_start_lsn` to `end_lsn` (WAL-3).
    buf: Vec<u8>,
    buf_start_lsn: u64,
    end_lsn: u64,
    flushed_lsn: u64,
    flushing: bool,
    /// End of the last force's write, to count tail rewrites.
    last_write_end_lsn: u64,
    commits_pending: u64,
    failed: Option<String>,
    stats: LogStats,
    /// The transaction table, kept by the log itself so that it changes
    /// atomically with the records that change it (WAL-5).
    active: BTreeMap<u64, ActiveTxn>,
    /// Records with page changes logged but not yet installed in the
    /// buffer pool: LSN → count (WAL-6).
    uninstalled: BTreeMap<u64, u32>,
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
}

/// The write-ahead log of one database.
pub struct Wal {
    device: DeviceRef,
    config: WalConfig,
    sector_bytes: u64,
    state: Mutex<LogState>,
    forced: Condvar,
    master: Mutex<Master>,
}

impl Wal {
    /// A new, empty log on `device` (its master record says: no checkpoint).
    pub fn create(device: DeviceRef, config: WalConfig) -> Result<Arc<Wal>> {
        let wal = Wal::new(device, config, LOG_START_LSN, Vec::new(), Master::default())?;
        wal.write_master(0)?;
        Ok(wal)
    }

    /// Continue a log whose valid records end at `end_lsn`, found by
    /// recovery's scan. `tail` holds the bytes of the sector `end_lsn` falls
    /// in, up to `end_lsn`, so the next force rewrites that sector intact.
    pub fn resume(
        device: DeviceRef,
        config: WalConfig,
        end_lsn: u64,
        master: Master,
    ) -> Result<Arc<Wal>> {
        let sector = LOG_SECTOR_BYTES.max(u64::from(device.sector_bytes()));
        let start = end_lsn - end_lsn % sector;
        let mut tail = vec![0u8; (end_lsn - start) as usize];
        if !tail.is_empty() {
            let mut whole = vec![0u8; sector as usize];
            device.read(start, &mut whole)?;
            let n = tail.len();
            tail.copy_from_slice(&whole[..n]);
        }
        Wal::new(device, config, end_lsn, tail, master)
    }

    fn new(
        device: DeviceRef,
        config: WalConfig,
        end_lsn: u64,
        tail: Vec<u8>,
        master: Master,
    ) -> Result<Arc<Wal>> {
        config.validate()?;
        let sector_bytes = LOG_SECTOR_BYTES.max(u64::from(device.sector_bytes()));
        if device.capacity_bytes() < LOG_START_LSN + sector_bytes {
            return Err(Error::Config(format!(
                "log device '{}' is too small",
                device.name()
            )));
        }
        let buf_start_lsn = end_lsn - tail.len() as u64;
        debug_assert_eq!(buf_start_lsn % sector_bytes, 0, "WAL-3");
        Ok(Arc::new(Wal {
            device,
            config,
            sector_bytes,
            state: Mutex::new(LogState {
                buf: tail,
                buf_start_lsn,
                end_lsn,
                flushed_lsn: end_lsn,
                flushing: false,
                last_write_end_lsn: end_lsn,
                commits_pending: 0,
                failed: None,
                stats: LogStats::default(),
                active: BTreeMap::new(),
                uninstalled: BTreeMap::new(),
            }),
            forced: Condvar::new(),
            master: Mutex::new(master),
        }))
    }

    /// The device the log is on.
    pub fn device(&self) -> &DeviceRef {
        &self.device
    }

    pub fn config(&self) -> &WalConfig {
        &self.config
    }

    /// Append a record; returns its LSN and the LSN just past it.
    pub fn append(&self, txn: u64, prev_lsn: u64, body: Body) -> Result<(u64, u64)> {
        let record = LogRecord {
            lsn: 0,
            txn,
            prev_lsn,
            body,
        };
        let mut bytes = record.encode(0);
        let size = bytes.len();
        self.append_sized(size, |lsn| {
            LogRecord::relocate(&mut bytes, lsn);
            (record, bytes)
        })
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
        let size = commit(0).encode(0).len();
        let mut ts = 0;
        let (lsn, end) = self.append_sized(size, |lsn| {
            ts = clock.assign(txn);
            let record = commit(ts);
            let bytes = record.encode(lsn);
            clock.appended(ts, lsn + bytes.len() as u64);
            (record, bytes)
        })?;
        Ok((ts, lsn, end))
    }

    /// Append a record of `size` bytes that `make(lsn)` builds, under the
    /// log's lock, once it is sure to fit (WAL-7).
    fn append_sized(
        &self,
        size: usize,
        make: impl FnOnce(u64) -> (LogRecord, Vec<u8>),
    ) -> Result<(u64, u64)> {
        if size > record::RECORD_BYTES_MAX {
            return Err(Error::TooLarge(format!(
                "a log record of {size} bytes is larger than the {} bytes recovery reads",
                record::RECORD_BYTES_MAX
            )));
        }
        let mut st = loop {
            let st = self.state.lock();
            if let Some(failure) = &st.failed {
                return Err(Error::LogFailed(failure.clone()));
            }
            if st.buf.len() < self.config.buffer_bytes {
                break st;
            }
            let end = st.end_lsn;
            drop(st);
            self.flush_to(end)?;
        };
        let lsn = st.end_lsn;
        if lsn + size as u64 > self.device.capacity_bytes() {
            return Err(Error::SpaceFull(format!(
                "log device '{}' is full ({} bytes)",
                self.device.name(),
                self.device.capacity_bytes()
            )));
        }
        let (record, bytes) = make(lsn);
        debug_assert_eq!(bytes.len(), size, "a record's size is known before its LSN");
        let end = lsn + bytes.len() as u64;
        st.buf.extend_from_slice(&bytes);
        st.end_lsn = end;
        track(&mut st, lsn, &record);
        st.stats.records += 1;
        st.stats.bytes_appended += bytes.len() as u64;
        if matches!(record.body, Body::Commit { .. }) {
            st.stats.commits += 1;
            st.commits_pending += 1;
        }
        Ok((lsn, end))
    }

    /// Open a checkpoint: append its begin record and snapshot the
    /// transaction table and the oldest uninstalled record with it (WAL-5,
    /// WAL-6).
    pub fn checkpoint_begin(&self) -> Result<CheckpointStart> {
        let (begin_lsn, _) = self.append(0, 0, Body::CheckpointBegin)?;
        let st = self.state.lock();
        // Records appended after the begin record are seen by analysis; take
        // the table as of the begin record by ignoring them.
        let active = st
            .active
            .values()
            .filter(|t| t.last_lsn < begin_lsn)
            .cloned()
            .collect();
        let pending_lsn = st
            .uninstalled
            .keys()
            .next()
            .copied()
            .filter(|&lsn| lsn < begin_lsn)
            .unwrap_or(0);
        Ok(CheckpointStart {
            begin_lsn,
            active,
            pending_lsn,
        })
    }

    /// The mini-transaction of the record at `lsn` has installed its pages.
    pub fn installed(&self, lsn: u64) {
        let mut st = self.state.lock();
        if let Some(count) = st.uninstalled.get_mut(&lsn) {
            *count -= 1;
            if *count == 0 {
                st.uninstalled.remove(&lsn);
            }
        }
    }

    /// Seed the transaction table (recovery's losers, before they are undone).
    pub fn set_active(&self, active: impl IntoIterator<Item = ActiveTxn>) {
        let mut st = self.state.lock();
        st.active = active.into_iter().map(|t| (t.txn, t)).collect();
    }

    /// Active transactions now.
    pub fn active(&self) -> Vec<ActiveTxn> {
        self.state.lock().active.values().cloned().collect()
    }

    /// Return once the log is durable up to `lsn` (group commit; see the
    /// module documentation).
    pub fn flush_to(&self, lsn: u64) -> Result<()> {
        let mut st = self.state.lock();
        loop {
            if let Some(failure) = &st.failed {
                return Err(Error::LogFailed(failure.clone()));
            }
            if st.flushed_lsn >= lsn {
                return Ok(());
            }
            if !st.flushing {
                break;
            }
            // A force is in flight: wait for it, covered or not.
            st = self.forced.wait(st);
        }
        st.flushing = true; // WAL-2: we are the flusher
        drop(st);
        if self.config.commit_delay_ns > 0 {
            Rt::current().sleep(self.config.commit_delay_ns);
        }
        self.force()
    }

    /// Write and flush everything appended so far. The caller set `flushing`.
    fn force(&self) -> Result<()> {
        let mut st = self.state.lock();
        let write_start = st.buf_start_lsn;
        let write_end = st.end_lsn;
        let mut data = st.buf.clone();
        let padded = (data.len() as u64).div_ceil(self.sector_bytes) * self.sector_bytes;
        data.resize(padded as usize, 0);
        let commits = std::mem::take(&mut st.commits_pending);
        let rewrite = write_start < st.last_write_end_lsn && !data.is_empty();
        drop(st);

        let rt = Rt::current();
        let started_ns = rt.now_ns();
        let result = self.write_and_sync(write_start, &data);
        let elapsed_ns = rt.now_ns() - started_ns;

        let mut st = self.state.lock();
        st.flushing = false;
        // A flush of the log device that failed elsewhere meanwhile (the
        // master record's) may have covered this force's write and lost it:
        // this force's own flush proves nothing then (WAL-4).
        let result = match (result, &st.failed) {
            (Ok(()), Some(failure)) => Err(Error::LogFailed(failure.clone())),
            (result, _) => result,
        };
        if let Err(e) = result {
            st.failed.get_or_insert_with(|| e.to_string()); // WAL-4
            drop(st);
            self.forced.notify_all();
            return Err(Error::LogFailed(e.to_string()));
        }
        debug_assert!(write_end <= st.end_lsn, "WAL-1");
        st.flushed_lsn = write_end;
        st.last_write_end_lsn = write_end;
        let keep_from = write_end - write_end % self.sector_bytes;
        let drained = (keep_from - st.buf_start_lsn) as usize;
        st.buf.drain(..drained);
        st.buf_start_lsn = keep_from;
        if !data.is_empty() {
            st.stats.writes += 1;
            st.stats.sectors_written += data.len() as u64 / LOG_SECTOR_BYTES;
            st.stats.write_ns_total += elapsed_ns;
            st.stats.commits_forced += commits;
            st.stats.tail_rewrites += u64::from(rewrite);
        }
        drop(st);
        self.forced.notify_all();
        Ok(())
    }

    fn write_and_sync(&self, offset: u64, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        self.device.write(offset, data)?;
        // Even under no-sync a force is made durable: the buffer pool's
        // write-ahead rule relies on it. No-sync only skips the wait.
        // Never flush again after a failed flush (WAL-4).
        if let Some(failure) = self.failed() {
            return Err(Error::LogFailed(failure));
        }
        self.device.flush()?;
        Ok(())
    }

    /// Force everything appended so far.
    pub fn flush_all(&self) -> Result<()> {
        let end = self.end_lsn();
        self.flush_to(end)
    }

    /// Wait for a commit record ending at `end_lsn` as the durability level says.
    pub fn commit_wait(&self, end_lsn: u64) -> Result<()> {
        match self.config.durability {
            Durability::Sync => self.flush_to(end_lsn),
            Durability::NoSync => Ok(()),
        }
    }

    pub fn end_lsn(&self) -> u64 {
        self.state.lock().end_lsn
    }

    pub fn flushed_lsn(&self) -> u64 {
        self.state.lock().flushed_lsn
    }

    pub fn stats(&self) -> LogStats {
        self.state.lock().stats.clone()
    }

    /// True once a write or flush has failed (WAL-4).
    pub fn failed(&self) -> Option<String> {
        self.state.lock().failed.clone()
    }

    /// Point the master record at a completed checkpoint, durably. The
    /// write takes the flusher's role, so no log force is in flight on the
    /// device meanwhile (WAL-2), and a failure fails the log (WAL-4): no
    /// flush of the device is ever issued after a failed one.
    pub fn write_master(&self, checkpoint_lsn: u64) -> Result<()> {
        let mut master = self.master.lock();
        let mut st = self.state.lock();
        loop {
            if let Some(failure) = &st.failed {
                return Err(Error::LogFailed(failure.clone()));
            }
            if !st.flushing {
                break;
            }
            st = self.forced.wait(st);
        }
        st.flushing = true;
        drop(st);
        let next = Master {
            sequence: master.sequence + 1,
            checkpoint_lsn,
        };
        let written = self
            .device
            .write(Master::offset_bytes(next.sequence), &next.encode())
            .and_then(|()| self.device.flush());
        let mut st = self.state.lock();
        st.flushing = false;
        drop(st);
        self.forced.notify_all();
        if let Err(e) = written {
            return Err(self.fail(format!("writing the master record: {e}")));
        }
        *master = next;
        Ok(())
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
    /// the error to report.
    fn fail(&self, why: String) -> Error {
        let mut st = self.state.lock();
        st.failed.get_or_insert_with(|| why.clone());
        drop(st);
        self.forced.notify_all();
        Error::LogFailed(why)
    }

    /// The master record in force.
    pub fn master(&self) -> Master {
        *self.master.lock()
    }

    /// Read the master record of a log device.
    pub fn read_master(device: &DeviceRef) -> Result<Option<Master>> {
        let mut sectors = vec![0u8; 2 * LOG_SECTOR_BYTES as usize];
        device.read(0, &mut sectors)?;
        let (a, b) = sectors.split_at(LOG_SECTOR_BYTES as usize);
        Ok(Master::newest([Master::decode(a)?, Master::decode(b)?]))
    }

    /// Rebuild page `id` from the log alone: replay onto a zero page every
    /// change to it in every durable record from the start of the log
    /// (WAL-8). Returns the image, its page LSN set to the end of the last
    /// record that changed it, and that record's LSN (or the log's start if
    /// no record changed it: the page was never written).
    ///
    /// Reads the whole durable log: O(log bytes) per page (LIMIT: repair
    /// cost). Holds no log lock while reading.
    pub fn rebuild_page(&self, id: PageId, page_bytes: usize) -> Result<(Vec<u8>, u64)> {
        let durable_lsn = self.flushed_lsn();
        let mut image = vec![0u8; page_bytes];
        page::set_id(&mut image, id);
        let mut last = (LOG_START_LSN, 0);
        let mut reader = self.reader(LOG_START_LSN);
        while let Some(record) = reader.next_record()? {
            let end = reader.end_lsn();
            if end > durable_lsn {
                break;
            }
            for redo in record.body.redo().iter().filter(|r| r.page == id) {
                crate::mtr::apply_ranges(&mut image, &redo.ranges, id)?;
                last = (record.lsn, end);
            }
        }
        page::set_lsn(&mut image, last.1);
        Ok((image, last.0))
    }

    /// Read records from `lsn` on.
    pub fn reader(&self, lsn: u64) -> LogReader {
        LogReader::new(self.device.clone(), lsn)
    }
}

#[cfg(test)]
mod tests;
