//! # The database: spaces, pools, log, catalog and transactions together
//!
//! [`Database`] owns the storage spaces of one database, each on its own
//! device ([`Devices`]): one or more data spaces (one buffer pool per page
//! size), the log, and the rollback and temp spaces for later layers. Opening
//! a database with an empty log and empty data spaces creates it; opening one
//! that exists runs crash recovery first ([`recovery`]), so every open
//! database is consistent.
//!
//! Tables are B+trees in data spaces; every change to a tree runs under that
//! tree's latch as one mini-transaction (one log record with logical undo and
//! physical redo). Transactions take row locks (strict two-phase locking with
//! deadlock detection; readers use MVCC snapshots) and commit by forcing the log (group commit).
//!
//! Background tasks: one page cleaner per buffer pool (steal/no-force
//! write-back of the pages the CLOCK hand reaches next and of the oldest
//! dirty pages, in sorted batches) and a checkpointer (at its interval, and when the
//! log fills up: checkpoints recycle the log). With `no-sync` durability a
//! log writer forces the log periodically.
//!
//! Invariants (DB-n):
//! 1. A tree is changed only under its latch held exclusive, one
//!    mini-transaction at a time, or as a one-leaf change (6); it is read
//!    under its latch held shared.
//! 2. A transaction's records are chained by `prev_lsn`; its in-memory undo
//!    list holds exactly its update records not yet compensated.
//! 3. A commit returns only after its commit record is durable (sync
//!    durability), and its locks are released only after that, unless
//!    early lock release is on (7).
//! 4. After a log failure, no transaction commits until recovery.
//! 5. No tree latch is held across a device read, a victim's write-back or
//!    a log force: tree operations run their mini-transactions without I/O
//!    (MTR-8) and on a miss release the latch, load the page (or free a
//!    frame) and restart (`db/access.rs`). Exceptions, each rare: once a
//!    write's `decide` has run (it may have appended a before-image to the
//!    rollback segment, which is not repeated), the rest of that operation
//!    may do I/O (a page evicted since it was read, a split's new frame);
//!    the rollback segment is prepared for the append before the latch is
//!    taken (`RollbackSpace::prepare`), but a transaction's first
//!    before-image, or one larger than the new row, may fetch its page
//!    under the latch; and an operation restarted `RESTARTS_MAX` times runs
//!    with I/O.
//! 6. A row change made under its row lock first runs under the tree's
//!    latch held *shared*, as a change of one leaf: the leaf's own latch
//!    (one of `LEAF_LATCH_STRIPES`) is taken and the leaf read again under
//!    it; a change that needs a second page, an allocation or a free starts
//!    over under the exclusive latch, reusing the value `decide` made
//!    (MTR-12). Two one-leaf changes of one leaf never overlap, and none
//!    overlaps a change under the exclusive latch.
//! 7. With early lock release (`wal.early_lock_release`, off by default),
//!    a committing transaction releases its row locks once its commit
//!    record is appended, before the force. Whoever takes a row next
//!    appends its own commit record later in the log, so it is durable
//!    only if the first one is; readers still see a commit only once it is
//!    durable (MVCC), so no reader sees a change that a crash could take
//!    away. If the force fails the database fails (4): the next holders
//!    may have changed the rows, but none of them commits before recovery,
//!    which decides from the log alone. Not used with In-Page Logging
//!    spaces, whose commits wait for a force marker (IPL-13).
//! 8. A tree has one latch per open database, in its latch table, never
//!    removed. A table's or index's definition keeps the latch the table
//!    handed it, with the database that handed it (`LatchSlot`), so a
//!    statement on a table takes the tree's latch without the table's lock
//!    (a lock every core would write); a definition filled by another
//!    database is not used, and the table is asked instead.
//! 9. The log's end is anchored outside the log (DB-9): before each
//!    checkpoint's begin record, page 0 of every data space records the
//!    log's end (the *anchor*, [`crate::space::ANCHOR_OFFSET`]) through a
//!    logged change, so the checkpoint writes page 0 with a page LSN past
//!    it. An older or truncated copy of the log that ends before it is then
//!    refused when recovery reads page 0 (BUF-18), as PostgreSQL's
//!    `pg_control` refuses a log older than its checkpoint. A log too full
//!    for the stamp's record skips it for that checkpoint (the checkpoint
//!    is what frees the log).

mod access;
mod builder;
mod bulk;
#[doc(hidden)]
pub mod calibrate;
pub mod catalog;
mod create;
pub mod dir;
pub mod dirlock;
mod gate;
pub mod recovery;
mod roles;
mod rows;
mod transact;
mod txn;
pub mod verify;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use flashlab_devices::{DeviceRef, presets};
use flashlab_runtime::{JoinHandle, Mutex as RtMutex, Rt, RwLatch};
use serde::Serialize;

use crate::buffer::{BufferPool, BufferStats, LogForce, WriterStop};
use crate::config::DbConfig;
use crate::error::{Error, Result};
use crate::lock::{LockManager, LockStats};
use crate::mvcc::Versions;
use crate::mvcc::rollback::{RollbackSpace, RollbackStats};
use crate::page::{PageNo, SpaceId};
use crate::wal::record::Body;
use crate::wal::{LogStats, Wal};

pub use builder::Builder;
pub use bulk::{
    BULK_BATCH_PAGES, BULK_INDEX_BYTES_MAX, BulkLoad, BulkLoadOptions, BulkLoadStats, BulkLogging,
};
pub use catalog::{IndexDef, TableDef, TableSpec};
pub use rows::{IndexRows, ROWS_CHUNK, Rows, TypedRows};
pub use transact::TRANSACT_ATTEMPTS_MAX;
pub use txn::Transaction;

/// The devices of a database, one per storage space.
#[derive(Clone)]
pub struct Devices {
    /// One per data space, in configuration order.
    pub data: Vec<DeviceRef>,
    pub log: DeviceRef,
    pub rollback: Option<DeviceRef>,
    pub temp: Option<DeviceRef>,
}

impl Devices {
    /// Build the devices a configuration names, for the simulated world (or
    /// to emulate modelled devices in the real world): presets and `memory`.
    pub fn from_presets(config: &DbConfig) -> Result<Devices> {
        Devices::open_each(config, presets::open_simulated)
    }

    /// [`Devices::from_presets`] for a run that never crashes them (an
    /// experiment): their stores keep no before-images (STORE-6).
    pub fn from_presets_never_crashing(config: &DbConfig) -> Result<Devices> {
        Devices::open_each(config, presets::open_simulated_never_crashing)
    }

    fn open_each(
        config: &DbConfig,
        open: fn(&str) -> std::result::Result<DeviceRef, flashlab_devices::DeviceError>,
    ) -> Result<Devices> {
        let open = |name: &str| open(name).map_err(|e| Error::Config(e.to_string()));
        Ok(Devices {
            data: config
                .data
                .iter()
                .map(|s| open(&s.device))
                .collect::<Result<_>>()?,
            log: match &config.log.mirror {
                Some(mirror) => Arc::new(crate::wal::mirror::MirroredLog::new(
                    open(&config.log.device)?,
                    open(mirror)?,
                )),
                None => open(&config.log.device)?,
            },
            rollback: config
                .rollback
                .as_ref()
                .map(|s| open(&s.device))
                .transpose()?,
            temp: config.temp.as_ref().map(|s| open(&s.device)).transpose()?,
        })
    }
}

/// One data space at run time.
pub(crate) struct DataSpace {
    pub id: SpaceId,
    /// Serialises allocation in this space (MTR-4).
    pub allocation: Arc<flashlab_runtime::Latch>,
    /// Lent to every mini-transaction on the space (for its errors).
    pub name: String,
    pub pool: Arc<BufferPool>,
    pub capacity_pages: u64,
    /// Where the space's pages live on its device.
    pub store: Arc<dyn crate::store::PageStore>,
}

impl LogForce for Wal {
    fn flush_to(&self, lsn: u64) -> Result<()> {
        Wal::flush_to(self, lsn)
    }

    fn end_lsn(&self) -> u64 {
        Wal::end_lsn(self)
    }

    fn past_end(&self, lsn: u64) -> Option<(u64, String)> {
        // The durable end is an atomic (WAL-12); only a page past it asks
        // for the end under the log's lock.
        if lsn <= self.flushed_lsn() {
            return None;
        }
        let end = Wal::end_lsn(self);
        (lsn > end).then(|| (end, format!("log device '{}'", self.device().name())))
    }

    fn flush_device(&self, device: &DeviceRef) -> Result<()> {
        self.flush_data_device(device)
    }

    fn fail(&self, why: String) -> Error {
        Wal::fail(self, why)
    }

    fn rebuild_page(
        &self,
        id: crate::page::PageId,
        page_bytes: usize,
        before_lsn: Option<u64>,
    ) -> Option<Result<(Vec<u8>, u64)>> {
        Some(Wal::rebuild_page(self, id, page_bytes, before_lsn))
    }
}

/// A handle to an open table.
#[derive(Clone, Debug)]
pub struct Table {
    pub(crate) def: Arc<TableDef>,
}

impl Table {
    pub fn name(&self) -> &str {
        &self.def.name
    }

    pub fn def(&self) -> &TableDef {
        &self.def
    }
}

/// Counters of a database, for reports.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DbStats {
    pub log: LogStats,
    pub locks: LockStats,
    /// Per page size.
    pub buffers: BTreeMap<usize, BufferStats>,
    pub commits: u64,
    pub aborts: u64,
    pub rollback: RollbackStats,
    /// Rows that finished bulk loads added (`db::bulk`).
    pub bulk_loaded_rows: u64,
}

/// A data space's name, page store and the store's counters.
pub type SpaceStoreCounters = (String, crate::store::StoreKind, Vec<(&'static str, f64)>);

/// The latch of one tree (DB-1).
type TreeLatch = Arc<RwLatch>;

/// The next [`Inner::instance`].
static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

/// Most dirty pages one checkpoint record lists (16 bytes each, well under
/// the largest record); with more, the checkpoint writes them back first.
pub const CHECKPOINT_DIRTY_PAGES_MAX: usize = 200_000;
/// How long the checkpointer waits after a checkpoint that failed or freed
/// no log space before it answers the log's call again.
pub const CHECKPOINT_BACKOFF_NS: u64 = 100_000_000;
/// How long a checkpointer with no interval sleeps between looks at
/// whether the log wants a checkpoint (it is woken early when it does).
pub const CHECKPOINT_IDLE_WAIT_NS: u64 = 3_600_000_000_000;

/// Capacity of the in-memory rollback space used when the configuration
/// names none (sparse: costs only what is written).
pub const ROLLBACK_MEMORY_BYTES: u64 = 1 << 40;

pub(crate) struct Inner {
    pub config: DbConfig,
    /// Transaction states and snapshots (MVCC).
    pub versions: Versions,
    /// Before-images for snapshot readers.
    pub rollback: RollbackSpace,
    pub spaces: Vec<DataSpace>,
    pub pools: BTreeMap<usize, Arc<BufferPool>>,
    pub wal: Arc<Wal>,
    pub devices: Devices,
    pub catalog: RwLock<BTreeMap<String, Arc<TableDef>>>,
    latches: std::sync::Mutex<HashMap<(SpaceId, PageNo), TreeLatch>>,
    /// This open database among all opened by the process: names the
    /// owner of a definition's latch slot (DB-8).
    pub(crate) instance: u64,
    /// The leaves' latches of one-leaf changes (MTR-12, DB-6).
    pub(crate) leaf_latches: crate::mtr::LeafLatches,
    pub locks: Arc<LockManager>,
    /// CPU prices in force (loading runs with none), shared with the
    /// buffer pools and the log.
    pub(crate) cpu: Arc<crate::cpu_prices::CpuPrices>,
    pub next_txn: AtomicU64,
    pub commits: AtomicU64,
    /// Tree operations started over after a miss (DB-5).
    pub tree_restarts: AtomicU64,
    /// One-leaf changes started over under the exclusive latch (DB-6).
    pub tree_escalations: AtomicU64,
    pub aborts: AtomicU64,
    /// Serialises DDL and checkpoints.
    pub ddl: RtMutex<()>,
    stop: WriterStop,
    /// Joiners of the background tasks.
    tasks: std::sync::Mutex<Vec<Box<dyn FnOnce() + Send>>>,
    /// What the recovery that opened this database found and did.
    recovery: std::sync::Mutex<Option<recovery::RecoveryReport>>,
    /// Bulk loads under way, by table id: their space and the pages they
    /// have reserved (BULK-3), which `verify` counts as theirs.
    pub(crate) bulk_loads: std::sync::Mutex<BTreeMap<u32, bulk::Reserved>>,
    pub(crate) bulk_loaded_rows: AtomicU64,
}

impl Inner {
    /// Ask every background task to stop: the page cleaners, the
    /// checkpointer (woken), the log writer.
    fn request_stop(&self) {
        self.stop.request();
        self.wal.want_checkpoint();
        for pool in self.pools.values() {
            pool.stop_cleaner();
        }
    }

    /// The latch of the tree rooted at `root` in `space` (DB-1).
    pub fn latch(&self, space: SpaceId, root: PageNo) -> TreeLatch {
        let mut latches = self.latches.lock().expect("latches");
        latches
            .entry((space, root))
            .or_insert_with(|| Arc::new(RwLatch::new()))
            .clone()
    }

    pub fn space(&self, id: SpaceId) -> Result<&DataSpace> {
        self.spaces
            .get(id as usize)
            .ok_or_else(|| Error::malformed("space id", format!("no data space {id}")))
    }

    /// Charge `n` of `event` now (a burst of the calling task).
    pub fn charge(&self, event: crate::cpu_prices::Price, n: u64) {
        self.cpu.charge(event, n);
    }

    /// Put the database in its failed state for `why` (a commit that could
    /// not be logged, a rollback that could not finish): new transactions
    /// and lock waiters get the error; recovery at the next open finishes
    /// the work. Returns the error to report.
    pub fn fail(&self, why: String) -> Error {
        self.wal.fail(why)
    }

    /// True if commits release their row locks before the force (DB-7).
    pub fn releases_locks_early(&self) -> bool {
        self.config.wal.early_lock_release
            && !self
                .spaces
                .iter()
                .any(|space| space.store.page_log().is_some())
    }

    /// Refuse work after a log failure (DB-4).
    pub fn check_log(&self) -> Result<()> {
        match self.wal.failed() {
            Some(failure) => Err(Error::LogFailed(failure)),
            None => Ok(()),
        }
    }
}

impl Drop for Inner {
    /// The last handle is gone: let the background tasks end (they hold no
    /// strong reference to the database itself).
    fn drop(&mut self) {
        self.request_stop();
    }
}

fn joiner(handle: JoinHandle<()>) -> Box<dyn FnOnce() + Send> {
    Box::new(move || handle.join())
}

/// An open database. Cheap to clone; all clones share it.
#[derive(Clone)]
pub struct Database {
    pub(crate) inner: Arc<Inner>,
}

impl Database {
    /// A database of files in `dir`, in the real world: set its layout,
    /// then create or open it ([`Builder`]).
    pub fn builder(dir: impl AsRef<std::path::Path>) -> Builder {
        Builder::new(dir.as_ref())
    }

    /// Open (creating if new, recovering if it exists) a database whose
    /// devices are the presets and `memory` devices its configuration names.
    /// For files in a directory, use [`Database::open_dir`].
    pub fn open(config: &DbConfig) -> Result<Database> {
        let devices = Devices::from_presets(config)?;
        Database::open_with(config, devices)
    }

    /// Open on devices the caller built (and may crash, in tests).
    pub fn open_with(config: &DbConfig, devices: Devices) -> Result<Database> {
        config.validate()?;
        if devices.data.len() != config.data.len() {
            return Err(Error::Config(format!(
                "{} data devices for {} data spaces",
                devices.data.len(),
                config.data.len()
            )));
        }
        let db = match Wal::read_master(&devices.log)? {
            None => create::create(config, devices)?,
            Some(master) => recovery::recover(config, devices, master)?,
        };
        db.start_background();
        Ok(db)
    }

    /// Open the existing database of files in `dir` (the real world) for
    /// writing: takes the directory's exclusive lock, held until the
    /// database is dropped, and runs recovery. Never creates; see
    /// [`Database::create_dir`] and [`dir`] for the manifest.
    pub fn open_dir(dir: &std::path::Path, config: &DbConfig) -> Result<Database> {
        let (devices, gate) = dir::open_devices_gated(dir, config, dir::Access::Write)?;
        dir::open_existing(config, devices, gate)
    }

    /// Open the existing database in `dir` read-only: a shared lock, and
    /// recovery in memory over a copy-on-write view of the files, so not a
    /// byte of them changes. Commits succeed but are lost at close.
    pub fn open_dir_read_only(dir: &std::path::Path, config: &DbConfig) -> Result<Database> {
        let devices = dir::open_devices(dir, config, dir::Access::ReadOnly)?;
        dir::open_existing(config, devices, None)
    }

    /// Create a new database in `dir`, atomically (see [`dir::create`]).
    pub fn create_dir(dir: &std::path::Path, config: &DbConfig) -> Result<()> {
        dir::create(dir, config)
    }

    /// Open the database in `dir` for writing, creating it first if the
    /// directory holds none.
    pub fn open_or_create_dir(dir: &std::path::Path, config: &DbConfig) -> Result<Database> {
        if !dir.join(dir::MANIFEST_FILE).exists() {
            dir::create(dir, config)?;
        }
        Database::open_dir(dir, config)
    }

    /// Assemble an open database. `next_txn` and `next_commit_ts` continue
    /// where the log left them; the rollback space starts empty.
    pub(crate) fn from_parts(
        config: &DbConfig,
        spaces: Vec<DataSpace>,
        mut pools: BTreeMap<usize, Arc<BufferPool>>,
        wal: Arc<Wal>,
        devices: Devices,
        next_txn: u64,
        next_commit_ts: u64,
    ) -> Result<Database> {
        let mvcc = &config.mvcc;
        let pool = match pools.get(&mvcc.page_bytes) {
            Some(pool) => pool.clone(),
            None => {
                let log: Arc<dyn LogForce> = wal.clone();
                let pool = Arc::new(BufferPool::new(mvcc.page_bytes, mvcc.buffer_bytes, log)?);
                pools.insert(mvcc.page_bytes, pool.clone());
                pool
            }
        };
        let rollback_device = devices.rollback.clone().unwrap_or_else(|| {
            Arc::new(flashlab_devices::memory::MemoryDevice::new(
                "rollback",
                ROLLBACK_MEMORY_BYTES,
            ))
        });
        let rollback = RollbackSpace::open(
            pool,
            rollback_device,
            mvcc.extent_bytes,
            mvcc.aged_span_bytes,
        )?;
        let locks = Arc::new(LockManager::new());
        let waiters = locks.clone();
        let cpu = Arc::new(crate::cpu_prices::CpuPrices::new(&config.cpu));
        for pool in pools.values() {
            pool.set_cpu_prices(cpu.clone());
        }
        wal.set_cpu_prices(cpu.clone());
        wal.on_failure(Arc::new(move |why| waiters.fail(why)));
        Ok(Database {
            inner: Arc::new(Inner {
                versions: Versions::new(next_txn, next_commit_ts, mvcc.retention_ns),
                rollback,
                config: config.clone(),
                spaces,
                pools,
                wal,
                devices,
                catalog: RwLock::new(BTreeMap::new()),
                latches: std::sync::Mutex::new(HashMap::new()),
                instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
                leaf_latches: crate::mtr::LeafLatches::new(),
                locks,
                cpu,
                next_txn: AtomicU64::new(next_txn),
                commits: AtomicU64::new(0),
                tree_restarts: AtomicU64::new(0),
                tree_escalations: AtomicU64::new(0),
                aborts: AtomicU64::new(0),
                ddl: RtMutex::new(()),
                stop: WriterStop::new(),
                tasks: std::sync::Mutex::new(Vec::new()),
                recovery: std::sync::Mutex::new(None),
                bulk_loads: std::sync::Mutex::new(BTreeMap::new()),
                bulk_loaded_rows: AtomicU64::new(0),
            }),
        })
    }

    fn start_background(&self) {
        let rt = Rt::current();
        let config = &self.inner.config;
        let mut tasks = self.inner.tasks.lock().expect("tasks");
        for pool in self.inner.pools.values() {
            let handle = pool.spawn_page_cleaner(&rt, &config.buffer);
            tasks.push(Box::new(move || {
                let _ = handle.join();
            }));
        }
        // The checkpointer runs at its interval and whenever the log fills
        // up: the log is recycled only by checkpoints.
        {
            let db = Arc::downgrade(&self.inner);
            let stop = self.inner.stop.clone();
            let wal = self.inner.wal.clone();
            let periodic = config.checkpoint_interval_ns > 0;
            let interval = match config.checkpoint_interval_ns {
                0 => CHECKPOINT_IDLE_WAIT_NS,
                ns => ns,
            };
            let task_rt = rt.clone();
            tasks.push(joiner(rt.spawn("checkpointer", move || {
                loop {
                    let wanted = wal.wait_checkpoint_wanted(&task_rt, interval);
                    if stop.is_requested() {
                        return;
                    }
                    if !wanted && !periodic {
                        continue;
                    }
                    let Some(inner) = db.upgrade() else { return };
                    let start_before = wal.start_lsn();
                    let done = (Database { inner }).checkpoint();
                    // A checkpoint that failed or freed nothing (a long
                    // transaction holds the log) is not retried at once:
                    // the full log keeps asking for one.
                    if (done.is_err() || wal.start_lsn() == start_before)
                        && stop.sleep(&task_rt, CHECKPOINT_BACKOFF_NS.min(interval))
                    {
                        return;
                    }
                }
            })));
        }
        if config.wal.durability == crate::wal::Durability::NoSync {
            let wal = self.inner.wal.clone();
            let stop = self.inner.stop.clone();
            let task_rt = rt.clone();
            tasks.push(joiner(rt.spawn("log-writer", move || {
                while !stop.sleep(&task_rt, crate::wal::NO_SYNC_FLUSH_INTERVAL_NS) {
                    let _ = wal.flush_all();
                }
            })));
        }
    }

    /// Change the CPU costs charged from now on (bulk loads run with
    /// [`crate::config::CpuCosts::free`]).
    pub fn set_cpu_costs(&self, costs: crate::config::CpuCosts) {
        self.inner.cpu.set(&costs);
    }

    /// The configuration the database was opened with.
    pub fn config(&self) -> &DbConfig {
        &self.inner.config
    }

    /// Start a transaction with a snapshot of every visible commit.
    pub fn begin(&self) -> Result<Transaction> {
        self.inner.check_log()?;
        self.inner.charge(crate::cpu_prices::Price::Begin, 1);
        let id = self.inner.next_txn.fetch_add(1, Ordering::SeqCst);
        let snapshot = self.inner.versions.begin_with_snapshot(id);
        Ok(Transaction::new(self.inner.clone(), id, snapshot, false))
    }

    /// Time travel: a read-only transaction seeing the database as of
    /// commit timestamp `ts` (within retention, else "snapshot too old").
    pub fn begin_as_of(&self, ts: u64) -> Result<Transaction> {
        let snapshot = self.inner.versions.snapshot_as_of(ts)?;
        let id = self.inner.next_txn.fetch_add(1, Ordering::SeqCst);
        self.inner.versions.begin_txn(id);
        Ok(Transaction::new(self.inner.clone(), id, snapshot, true))
    }

    /// Time travel by time: as of the last commit at or before `time_ns`
    /// (the runtime's clock).
    pub fn begin_as_of_time(&self, time_ns: u64) -> Result<Transaction> {
        let ts = self.inner.versions.ts_at_time(time_ns)?;
        self.begin_as_of(ts)
    }

    /// The newest visible commit timestamp.
    pub fn visible_ts(&self) -> u64 {
        self.inner.versions.horizon()
    }

    /// The table called `name`.
    pub fn table(&self, name: &str) -> Result<Table> {
        let catalog = self.inner.catalog.read().expect("catalog");
        catalog
            .get(name)
            .map(|def| Table { def: def.clone() })
            .ok_or_else(|| Error::Catalog(format!("no table '{name}'")))
    }

    /// Every table, by name.
    pub fn tables(&self) -> Vec<Table> {
        let catalog = self.inner.catalog.read().expect("catalog");
        catalog
            .values()
            .map(|def| Table { def: def.clone() })
            .collect()
    }

    /// Create a table (durably, at once; DDL is not transactional).
    pub fn create_table(&self, spec: TableSpec) -> Result<Table> {
        create::create_table(self, spec)
    }

    /// The dirty logged pages and their recovery LSNs (rollback pages are
    /// not logged and carry no LSN: they have no place here).
    fn dirty_pages(&self) -> Vec<(crate::page::PageId, u64)> {
        let spaces = self.inner.spaces.len();
        self.inner
            .pools
            .values()
            .flat_map(|pool| pool.dirty_pages())
            .filter(|(page, _)| (page.space as usize) < spaces)
            .collect()
    }

    /// Take a checkpoint (PostgreSQL's kind, with ARIES's tables): log its
    /// begin record, which becomes the redo point and the horizon for
    /// full-page images; wait until every record before it is installed;
    /// force the log; write back every logged page changed before it and flush the data
    /// devices; log the active transactions and the pages still dirty; and
    /// make the master record name the checkpoint and the new log start,
    /// which frees the log before it.
    pub fn checkpoint(&self) -> Result<u64> {
        let inner = &self.inner;
        let _ddl = inner.ddl.lock();
        inner.check_log()?;
        for space in &inner.spaces {
            self.anchor(space)?;
        }
        let start = inner.wal.checkpoint_begin()?;
        inner.wal.wait_installed_before(start.begin_lsn)?;
        // One force now covers the page LSNs of nearly every page the loop
        // writes back; without it each write-back of a page changed since
        // the last force forces the log itself (BUF-2), and under a heavy
        // load (a bulk load bound by its log device) the checkpoint took
        // one log write per page and did not end for minutes, while the
        // log it would free grew.
        inner.wal.flush_all()?;
        for pool in inner.pools.values() {
            for (page, rec_lsn) in pool.dirty_pages() {
                if (page.space as usize) < inner.spaces.len() && rec_lsn < start.begin_lsn {
                    pool.write_back_page(page)?;
                }
            }
        }
        // Pages written back are durable only after a flush of their
        // device: without it, a crash could lose them while the checkpoint
        // says they need no redo.
        for space in &inner.spaces {
            space.store.sync(&*inner.wal)?;
        }
        // Logged pages only: rollback pages are not logged (and carry no
        // LSN), so they have no place in the dirty page table.
        let mut dirty = self.dirty_pages();
        if dirty.len() > CHECKPOINT_DIRTY_PAGES_MAX {
            // Too many to list in one record: redo starts at the begin
            // record anyway, so list the oldest.
            dirty.sort_by_key(|&(_, rec_lsn)| rec_lsn);
            dirty.truncate(CHECKPOINT_DIRTY_PAGES_MAX);
        }
        let body = Body::CheckpointEnd {
            begin_lsn: start.begin_lsn,
            next_txn: inner.next_txn.load(Ordering::SeqCst),
            next_commit_ts: inner.versions.next_ts(),
            // Every record before the begin record is installed and its
            // pages written: nothing pending.
            pending_lsn: 0,
            active: start.active,
            dirty,
        };
        let (_, end) = inner.wal.append(0, 0, body)?;
        inner.wal.flush_to(end)?;
        inner.wal.write_master(start.begin_lsn, start.start_lsn)?;
        Ok(start.begin_lsn)
    }

    /// DB-9: record the log's end in page 0 of `space`, a logged change
    /// under the space's allocation latch (MTR-4). Page 0 is pinned first,
    /// so the latch is never held across its read.
    fn anchor(&self, space: &DataSpace) -> Result<()> {
        let inner = &self.inner;
        let _pinned = space.pool.fetch(crate::page::PageId::new(space.id, 0))?;
        let mut mtr = inner.mtr(space.id)?;
        mtr.stamp_anchor(inner.wal.end_lsn())?;
        match mtr.commit(&inner.wal, 0, 0, None) {
            Err(Error::LogFull(_)) => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// Write every dirty page and checkpoint, so the next open has nothing
    /// to redo; then stop the background tasks.
    pub fn close(self) -> Result<()> {
        self.inner.request_stop();
        self.flush()?;
        let tasks: Vec<_> = std::mem::take(&mut *self.inner.tasks.lock().expect("tasks"));
        for join in tasks {
            join();
        }
        Ok(())
    }

    /// Force the log, write back every dirty page, and checkpoint.
    pub fn flush(&self) -> Result<()> {
        self.inner.wal.flush_all()?;
        for pool in self.inner.pools.values() {
            pool.flush_all()?;
        }
        self.checkpoint()?;
        Ok(())
    }

    /// Tree operations that released their latch to load a page (or free
    /// a frame) and started over (DB-5).
    pub fn tree_restarts(&self) -> u64 {
        self.inner.tree_restarts.load(Ordering::Relaxed)
    }

    /// Row changes tried as one-leaf changes under the tree's shared latch
    /// that needed more (a split) and started over under the exclusive
    /// latch (DB-6).
    pub fn tree_escalations(&self) -> u64 {
        self.inner.tree_escalations.load(Ordering::Relaxed)
    }

    /// What each data space's page store counted since the open, by space
    /// name (log-structured: metadata bytes, segments cleaned, pages copied).
    pub fn store_stats(&self) -> Vec<(String, crate::store::StoreStats)> {
        self.inner
            .spaces
            .iter()
            .map(|s| (s.name.to_string(), s.store.stats()))
            .collect()
    }

    /// Counters so far.
    pub fn stats(&self) -> DbStats {
        DbStats {
            log: self.inner.wal.stats(),
            locks: self.inner.locks.stats(),
            buffers: self
                .inner
                .pools
                .iter()
                .map(|(&size, pool)| (size, pool.stats()))
                .collect(),
            commits: self.inner.commits.load(Ordering::Relaxed),
            aborts: self.inner.aborts.load(Ordering::Relaxed),
            rollback: self.inner.rollback.stats(),
            bulk_loaded_rows: self.inner.bulk_loaded_rows.load(Ordering::Relaxed),
        }
    }

    /// What the recovery that opened this database found and did (`None`
    /// for a database created or opened without a master record).
    pub fn recovery_report(&self) -> Option<recovery::RecoveryReport> {
        self.inner.recovery.lock().expect("recovery").clone()
    }

    /// Each data space's name, page store and the store's own counters
    /// ([`crate::store::StoreStats::counters`]).
    pub fn store_counters(&self) -> Vec<SpaceStoreCounters> {
        self.inner
            .spaces
            .iter()
            .map(|s| {
                (
                    s.name.to_string(),
                    s.store.info().kind,
                    s.store.stats().counters,
                )
            })
            .collect()
    }

    /// The log.
    pub fn wal(&self) -> &Arc<Wal> {
        &self.inner.wal
    }

    /// The devices the database runs on.
    pub fn devices(&self) -> &Devices {
        &self.inner.devices
    }

    /// Stop the background tasks without writing anything (for crash tests
    /// in the real world; in the simulated world a stopped run ends them).
    pub fn abandon(self) {
        self.inner.request_stop();
    }
}
