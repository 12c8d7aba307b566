//! # Page stores: where a data space keeps its pages on its device
//!
//! The buffer pool asks a data space for page `n` and hands it page `n` to
//! write; *where* those bytes live on the device is the space's **page
//! store**. The papers compare exactly this choice:
//!
//! - **in place** ([`InPlaceStore`]): page `n` lives at device offset
//!   `n * page_bytes`, and a write overwrites it. This is what the engine
//!   has always done, and what EXT2 gave wang2010's in-place runs.
//! - **log-structured** (wang2010's NILFS2): pages are written out of place
//!   at the head of a log of segments, a page map finds each page's latest
//!   version, and segment cleaning reclaims space.
//! - **In-Page Logging** (lee2007): on raw NAND, each erase unit keeps its
//!   data pages and a log segment of 512-byte log sectors beside them; a
//!   dirty page is not rewritten, its changes are logged in its unit.
//!
//! A store sits below the buffer pool and above the device. The pool keeps
//! its rules whatever the store (BUF-2: the log is forced before a page is
//! handed to [`PageStore::write_page`]; PAGE-1: what
//! [`PageStore::read_page`] returns is verified before anyone sees it), so a
//! store only has to be a faithful map from page numbers to page images:
//!
//! Invariants (STORE-n in ARCHITECTURE.md are the device-level store's; a
//! page store's are PS-n):
//! 1. After [`PageStore::sync`] returns, a `read_page` of every page written
//!    before the call returns that write's image, across any crash.
//! 2. A page never written reads as zeros (the pool never reads such a page:
//!    it creates new pages with `fetch_new`; `flashlab check` may).
//! 3. A store reports damage it can see as [`DeviceError::ReadFailed`] or an
//!    error naming the space and the page; it never returns another page's
//!    bytes as this page's without the page id check catching it.
//! 4. Opening a store on a device it did not format fails with an error
//!    naming the space; it never formats over it.

mod in_place;
pub mod ipl;
pub mod log_structured;

use std::sync::Arc;

use flashlab_devices::{DeviceError, DeviceRef};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::force::LogForce;
use crate::page::PageNo;

pub use in_place::InPlaceStore;
pub use ipl::IplStore;
pub use log_structured::{Cleaning, LogStructuredOptions, LogStructuredStore};

/// How a data space lays its pages out on its device (config key `store`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoreKind {
    /// Page `n` at offset `n * page_bytes`, overwritten in place.
    #[default]
    InPlace,
    /// In-Page Logging (lee2007) on a raw NAND device: log sectors beside
    /// the pages in each erase unit ([`ipl`]).
    Ipl,
    /// Pages written out of place at the head of a log of segments
    /// ([`LogStructuredStore`]).
    LogStructured,
}

impl StoreKind {
    /// The name the configuration and the CLI use.
    pub fn name(self) -> &'static str {
        match self {
            StoreKind::InPlace => "in-place",
            StoreKind::Ipl => "ipl",
            StoreKind::LogStructured => "log-structured",
        }
    }

    /// True if the store runs on raw NAND (program-once pages, whole-unit
    /// erases) rather than on a block device.
    pub fn needs_raw_nand(self) -> bool {
        matches!(self, StoreKind::Ipl)
    }

    /// Every store's name, for error messages.
    pub fn names() -> &'static [&'static str] {
        &["in-place", "ipl", "log-structured"]
    }

    /// Parse a name as the CLI gives it.
    pub fn parse(name: &str) -> Option<StoreKind> {
        match name {
            "in-place" => Some(StoreKind::InPlace),
            "ipl" => Some(StoreKind::Ipl),
            "log-structured" => Some(StoreKind::LogStructured),
            _ => None,
        }
    }
}

impl std::fmt::Display for StoreKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a store is being formatted on an empty device or opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreMode {
    /// A new database: format the device.
    Create,
    /// An existing database: find the pages written before (after a crash,
    /// the pages durable at the crash).
    Open,
}

/// What a store is: its kind and the shape of its space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreInfo {
    /// Which kind of store this is.
    pub kind: StoreKind,
    /// The page size the store was opened with.
    pub page_bytes: usize,
    /// How many pages the space can hold (what allocation may hand out).
    pub capacity_pages: u64,
}

/// What a store counted since it was opened (zeros where a store has no
/// such thing).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StoreStats {
    /// Pages handed to `write_page`.
    pub pages_written: u64,
    /// Bytes the store wrote to its device, its own metadata included.
    pub device_bytes_written: u64,
    /// Device write requests the store issued.
    pub device_writes: u64,
    /// Of `device_bytes_written`, the store's own metadata (log-structured:
    /// summaries, map checkpoints, the superblock).
    pub metadata_bytes_written: u64,
    /// Segments emptied by segment cleaning.
    pub segments_cleaned: u64,
    /// Pages segment cleaning copied.
    pub pages_copied: u64,
    /// Map checkpoints written since the open.
    pub map_checkpoints: u64,
    /// Cleaning passes begun, and finished: a pass a crash cut short is
    /// one begun and not finished.
    pub cleaning_passes: u64,
    pub cleaning_passes_finished: u64,
    /// The store's own counters for reports, by name (In-Page Logging's
    /// merges, forces, records; empty for the others). Reports print them
    /// apart from the fields above.
    #[serde(skip)]
    pub counters: Vec<(&'static str, f64)>,
}

/// A data space's page layout on its device: what every store does. See
/// the module documentation; a store that keeps its own log of each page's
/// changes offers [`PageLog`] through [`PageStore::page_log`] as well.
pub trait PageStore: Send + Sync {
    /// Which kind of store this is, its page size and its capacity.
    fn info(&self) -> StoreInfo;

    /// The device under the store.
    fn device(&self) -> &DeviceRef;

    /// Read page `page_no`'s latest image into `buf` (`page_bytes` long).
    /// Damage the device reports is [`DeviceError::ReadFailed`].
    fn read_page(&self, page_no: PageNo, buf: &mut [u8]) -> Result<()>;

    /// Read the pages from `first` on into `buf` (a whole number of pages),
    /// in as few device requests as the layout allows (read-ahead). The
    /// default reads page by page.
    fn read_pages(&self, first: PageNo, buf: &mut [u8]) -> Result<()> {
        let page_bytes = self.info().page_bytes;
        for (n, page) in buf.chunks_mut(page_bytes).enumerate() {
            self.read_page(first + n as PageNo, page)?;
        }
        Ok(())
    }

    /// Write a batch of pages (page number, image), as the block layer's
    /// elevator stage would dispatch them (`scheduler`: sorted by address,
    /// neighbours merged); returns the device requests the batch took. The
    /// default writes page by page, in order: a request a page.
    fn write_batch(
        &self,
        pages: &[(PageNo, &[u8])],
        scheduler: &flashlab_devices::scheduler::SchedulerConfig,
    ) -> Result<u64> {
        let _ = scheduler;
        for &(page_no, image) in pages {
            self.write_page(page_no, image)?;
        }
        Ok(pages.len() as u64)
    }

    /// Write page `page_no`'s image. Durable after the next [`sync`].
    ///
    /// [`sync`]: PageStore::sync
    fn write_page(&self, page_no: PageNo, image: &[u8]) -> Result<()>;

    /// Make every page written so far durable (PS-1), the store's own
    /// metadata included. The device flush goes through
    /// [`LogForce::flush_device`], so a failed flush fails the log (WAL-4).
    fn sync(&self, log: &dyn LogForce) -> Result<()>;

    /// Counters since the store was opened, its own named ones included.
    fn stats(&self) -> StoreStats {
        StoreStats::default()
    }

    /// A one-line offset or location of a page, for error messages.
    fn location_of(&self, page_no: PageNo) -> u64 {
        u64::from(page_no) * self.info().page_bytes as u64
    }

    /// Record the database's identity and the space's index where the
    /// store keeps its own metadata, if it does (the log-structured
    /// superblock); at creation, after page 0 is stamped. Default: nothing
    /// (an in-place space carries both in page 0, at its offset).
    fn record_identity(&self, database_id: u64, space_index: u32) -> Result<()> {
        let _ = (database_id, space_index);
        Ok(())
    }

    /// Check the store's own structures against the device (`flashlab
    /// check`): one line per problem.
    fn check_layout(&self) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    /// The store's log of each page's changes, if it keeps one: the one
    /// seam through which transactions, mini-transactions, recovery and
    /// the buffer pool reach it. Default: none.
    fn page_log(&self) -> Option<&dyn PageLog> {
        None
    }
}

/// A store that keeps its own log of each page's changes beside the page
/// (lee2007's In-Page Logging) instead of rewriting the page: it hears of
/// every change as it is installed, takes part in commits and aborts, and
/// restarts from its own durable state rather than by the WAL's redo.
///
/// Invariants (PLOG-n; the store's own are IPL-n):
/// 1. [`PageLog::note_update`] is called for every change of a page of the
///    space, at its install, holding [`PageLog::install_gate`] shared from
///    the change's WAL append on; it does no I/O (MTR-8).
/// 2. [`PageLog::transaction_ended`] is called once for every transaction
///    that ends, after its commit record is durable or after its rollback;
///    a commit is acknowledged and made visible only after it returns and
///    once [`PageLog::durable_lsn`] covers its commit record.
/// 3. With [`PageLog::restart_lsn`] `Some(L)`, recovery does not redo the
///    space's pages and undoes every transaction ending at or beyond `L`
///    (REC-4); until [`PageLog::recovered`], a damaged page is rebuilt from
///    the WAL before [`PageLog::repair_before_lsn`] only (BUF-9).
pub trait PageLog: Send + Sync {
    /// A mini-transaction of transaction `txn` (0: none) changed page
    /// `page_no` from `before` to `after` (whole images; the pool installs
    /// `after` next, with page LSN `lsn`). Called at the install, with no
    /// I/O allowed (MTR-8): In-Page Logging keeps the change as records of
    /// the page's in-memory log sector.
    fn note_update(&self, page_no: PageNo, txn: u64, lsn: u64, before: &[u8], after: &[u8]);

    /// Transaction `txn` ended (after its commit record, ending at
    /// `end_lsn`, is durable, or after its rollback). In-Page Logging
    /// forces the space so that a force marker covers the commit record
    /// (lee2007's commit; IPL-13): the commit is acknowledged only then.
    fn transaction_ended(
        &self,
        txn: u64,
        committed: bool,
        end_lsn: u64,
        log: &dyn LogForce,
    ) -> Result<()>;

    /// A damaged page of this store is rebuilt from the WAL records
    /// before this LSN only (BUF-9); `None`: from the whole durable log.
    /// A space that restarted without redo says `L*` until recovery's
    /// closing checkpoint: the WAL then still holds records at or after
    /// `L*` that its pages never received (REC-4), and a page rebuilt from
    /// them would be newer than its neighbours.
    fn repair_before_lsn(&self) -> Option<u64>;

    /// Recovery finished (its closing checkpoint is durable).
    fn recovered(&self);

    /// The log position a durable force marker covers now, when the store
    /// restarts without redo: a commit is made visible to other
    /// transactions only once it is covered. `None`: no such limit.
    fn durable_lsn(&self) -> Option<u64>;

    /// The latch a mini-transaction holds shared from appending its record
    /// to installing its pages, when it changes pages of this store (IPL-10:
    /// a force captures the space's state holding it exclusive).
    fn install_gate(&self) -> &flashlab_runtime::RwLatch;

    /// The log position whose state the store holds durably for every
    /// page (a force marker's L, IPL-11), when the store restarts without
    /// redo: recovery then skips redo of the store's pages and treats
    /// every transaction whose commit or abort record lies at or beyond it
    /// as a loser (REC-4). `None`: the WAL's redo brings the store's pages
    /// forward.
    fn restart_lsn(&self) -> Option<u64>;
}

/// Settings of particular stores (config keys of the data space), and the
/// engine's log.
#[derive(Clone, Default)]
pub struct StoreOptions {
    /// The engine's log, through which a store that flushes its device on
    /// its own (a log-structured store making room, an In-Page Logging
    /// write-back's force) flushes (WAL-4); attached once the store is
    /// open. `None`: a store used alone flushes its device directly.
    pub log: Option<Arc<dyn LogForce>>,
    /// In-Page Logging: bytes of each erase unit's log segment (default
    /// [`ipl::layout::LOG_SEGMENT_BYTES_DEFAULT`]).
    pub ipl_log_segment_bytes: Option<u64>,
    /// In-Page Logging: a commit does not wait for a force (lee2007's
    /// commit forces; on by default): durable by the WAL alone, and the
    /// space's pages are redone from the WAL at restart.
    pub ipl_no_commit_force: bool,
    /// In-Page Logging: no selective merges nor abort de-application
    /// (IPL-SEL; on by default).
    pub ipl_no_selection: bool,
    /// Log-structured: segment size and cleaning.
    pub log_structured: LogStructuredOptions,
}

/// Open (or format) the store of `kind` for a data space on `device`,
/// with store settings.
pub fn open_store_with(
    kind: StoreKind,
    device: DeviceRef,
    page_bytes: usize,
    capacity_bytes: Option<u64>,
    space_name: &str,
    mode: StoreMode,
    options: StoreOptions,
) -> Result<Arc<dyn PageStore>> {
    let log = options.log.clone();
    match kind {
        StoreKind::InPlace => Ok(Arc::new(InPlaceStore::new(
            device,
            page_bytes,
            capacity_bytes,
        ))),
        StoreKind::Ipl => {
            let store = IplStore::open(
                device,
                page_bytes,
                capacity_bytes,
                options
                    .ipl_log_segment_bytes
                    .unwrap_or(ipl::layout::LOG_SEGMENT_BYTES_DEFAULT),
                space_name,
                mode,
            )?
            .with_commit_force(!options.ipl_no_commit_force)
            .with_selection(!options.ipl_no_selection);
            if let Some(log) = log {
                store.attach_log(log);
            }
            Ok(Arc::new(store))
        }
        StoreKind::LogStructured => {
            let store = LogStructuredStore::open(
                device,
                page_bytes,
                capacity_bytes,
                space_name,
                mode,
                options.log_structured,
            )?;
            if let Some(log) = log {
                store.attach_log(log);
            }
            Ok(Arc::new(store))
        }
    }
}

/// A read error of the device, or damage a store saw in its own structures
/// (an IPL log sector that fails its crc), as damage (BUF-9) rather than
/// failure: the pool repairs the page from the log or reports it.
pub fn is_read_damage(e: &crate::error::Error) -> bool {
    matches!(
        e,
        crate::error::Error::Device(DeviceError::ReadFailed { .. })
            | crate::error::Error::Corruption { .. }
    )
}
