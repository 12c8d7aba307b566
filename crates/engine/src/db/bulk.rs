//! # Bulk loading an empty table
//!
//! [`Database::bulk_load`] fills an empty table from rows in ascending
//! primary-key order, as PostgreSQL's `COPY` into a new table or InnoDB's
//! sorted index build do: the table's tree is built bottom up
//! ([`crate::btree::build`]), each page written once, whole, and not
//! logged (BULK-6; or logged as its image, one record per batch of pages
//! instead of one per row). No row is locked and no undo is logged: a load is a system
//! operation, like creating a table (DDL is not transactional in flashlab),
//! and its rows carry commit timestamp 0, so every snapshot sees them.
//!
//! Pages are taken from the table's space as the build starts nodes,
//! exactly those it uses (one short mini-transaction for the pages of a
//! push that starts nodes), as the inserts of an append would take them:
//! a load leaves no page over for the free list to hand to the next
//! split elsewhere (which, on In-Page Logging's NAND, lands in an erase
//! unit already programmed and is logged whole instead of programmed in a
//! fresh one, IPL-5). Each
//! secondary index's entries are kept in memory, in one arena of at most
//! [`BULK_INDEX_BYTES_MAX`], sorted when the rows end and built the same
//! way. The load becomes visible at [`BulkLoad::finish`]: one
//! mini-transaction, under every tree's exclusive latch, writes the new
//! roots of the table and of its indexes; the log is then forced, so a
//! finished load survives any crash, and the pages reserved and not used
//! are freed.
//!
//! Invariants (BULK-n):
//! 1. Until the final mini-transaction, nothing reachable from the table's
//!    roots changes: a reader, or recovery after a crash, finds the table
//!    empty, as it was.
//! 2. The final mini-transaction replaces the roots of the table and of
//!    all its indexes at once, and only if each is still an empty leaf:
//!    the table and its indexes are loaded together or not at all, and a
//!    table written meanwhile is not overwritten (the load fails instead).
//! 3. Every page a load reserves ends in one of its trees or back on the
//!    space's free list, at [`BulkLoad::finish`] and at
//!    [`BulkLoad::abandon`] alike. Only a crash before the end leaves
//!    reserved pages in neither: allocated and unreachable, space lost and
//!    no data (PostgreSQL leaves a new relation's file behind the same way).
//! 4. Rows arrive in strictly ascending primary-key order; a row out of
//!    order is refused before anything of it is kept.
//! 5. While a load runs, the catalog holds its mark (`load/<table>`,
//!    written and forced before the first page is reserved, deleted after
//!    the final mini-transaction). An open that finds it set after a
//!    crash walks the space's trees and frees every page below the
//!    high-water mark that is in none of them and not free: the load's
//!    reserved pages, so VERIFY-1 holds again and nothing is lost (the
//!    table is empty, or whole if the crash fell after the final
//!    mini-transaction). One load at a time runs into a table.
//! 6. A load without page images (`BulkLogging::Minimal`) names each batch
//!    in an `Unlogged` record before its pages take their images, at that
//!    record's end as page LSN, and writes every such page to its device,
//!    flushed, by a checkpoint before the final mini-transaction. So the
//!    final mini-transaction never makes a page reachable that a crash can
//!    take back; redo never replays a change older than the load onto its
//!    page; a cut load's pages, perhaps torn, are freed unread; and a
//!    repair never rebuilds such a page from an image older than the load.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::btree::build::{BuildStats, Built, TreeBuilder, write_image};
use crate::btree::node::Node;
use crate::db::access::{LogCtx, TreeRef};
use crate::db::catalog::{CATALOG_ROOT, LOAD_PREFIX, TableDef, load_key};
use crate::db::verify::{self, PageOwners, VerifyReport};
use crate::db::{Database, Inner, Table};
use crate::error::{Error, Result};
use crate::mtr::PageAccess;
use crate::page::{PageId, PageNo, PageType, SpaceId};
use crate::row::{NO_PREV_VERSION, StoredRow, Value, VersionHeader};
use crate::wal::record::Body;

/// Most pages one of a load's mini-transactions writes or frees: fewer in
/// a small pool, where a mini-transaction may pin at most a quarter of the
/// frames; with the space header, within the redo of one log record
/// ([`crate::wal::record::REDO_PAGES_MAX`]).
pub const BULK_BATCH_PAGES: usize = 32;
const _: () = assert!(BULK_BATCH_PAGES < crate::wal::record::REDO_PAGES_MAX);
/// Most bytes of secondary-index keys a load keeps in memory, over all the
/// table's indexes.
pub const BULK_INDEX_BYTES_MAX: usize = 1 << 30;
/// Tries of one mini-transaction refused for a retryable reason (a full
/// log waiting for its checkpoint).
const BULK_TRIES_MAX: u32 = 100;
/// Pause before such a mini-transaction is tried again.
const BULK_RETRY_BACKOFF_NS: u64 = 10_000_000;

/// How to load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkLoadOptions {
    /// The table's leaves are filled to this share of a page (50 to 100):
    /// 100 by default, as appends in key order leave them, since rows
    /// arrive at the right edge.
    pub fill_percent: u8,
    /// The secondary indexes' leaves likewise: 90 by default, PostgreSQL's
    /// B-tree fill factor, since index entries arrive anywhere and a full
    /// leaf splits at its first insert.
    pub index_fill_percent: u8,
    /// How the pages' contents reach the log: not at all by default
    /// (BULK-6).
    pub logging: BulkLogging,
}

/// How a load's finished pages are made durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BulkLogging {
    /// Not logged (PostgreSQL's `COPY` into a new table under
    /// `wal_level = minimal`): each batch of pages is named in one small
    /// record, and [`BulkLoad::finish`] writes the pages to their device,
    /// flushed, by a checkpoint before the final mini-transaction
    /// (BULK-6). A space whose store keeps a log of each page's changes
    /// (In-Page Logging) is loaded with page images instead.
    #[default]
    Minimal,
    /// Each batch of pages is one record whose redo is the pages' images:
    /// the log holds every page written, once.
    PageImages,
}

impl Default for BulkLoadOptions {
    fn default() -> Self {
        BulkLoadOptions {
            fill_percent: 100,
            index_fill_percent: 90,
            logging: BulkLogging::default(),
        }
    }
}

/// What a finished load made.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BulkLoadStats {
    /// Rows loaded into the table.
    pub rows: u64,
    /// Entries of the secondary indexes, over all of them.
    pub index_entries: u64,
    /// Pages of the table's tree and of its indexes' trees, roots included.
    pub pages: u64,
    /// Levels of the table's tree, counting the leaves.
    pub height: usize,
}

/// A load's space and the pages it has reserved, shared with the
/// database's registry of loads under way (for `verify`).
#[derive(Clone, Debug)]
pub(crate) struct Reserved {
    space: SpaceId,
    pages: Arc<Mutex<Vec<PageNo>>>,
}

/// The sorted-later entries of one secondary index: keys (index columns,
/// then the primary key) packed in one arena.
#[derive(Default)]
struct IndexEntries {
    arena: Vec<u8>,
    /// Each key's start in the arena and its length.
    keys: Vec<(usize, usize)>,
}

impl IndexEntries {
    fn key(&self, (start, len): (usize, usize)) -> &[u8] {
        &self.arena[start..start + len]
    }
}

/// A load under way. See the module documentation.
pub struct BulkLoad<'db> {
    db: &'db Database,
    def: Arc<TableDef>,
    options: BulkLoadOptions,
    page_bytes: usize,
    /// Pages written or freed per mini-transaction.
    batch_pages: usize,
    primary: TreeBuilder,
    indexes: Vec<IndexEntries>,
    index_bytes: usize,
    /// Every page reserved from the space (BULK-3), shared with the
    /// registry.
    reserved: Arc<Mutex<Vec<PageNo>>>,
    /// Reserved pages no tree uses, for the final mini-transaction to free.
    unused: Vec<PageNo>,
    pages_written: u64,
    /// Whether pages are written without their contents logged (BULK-6).
    unlogged: bool,
    /// False once finished or abandoned.
    open: bool,
}

impl Database {
    /// Start loading `table`, which must be empty, with the default
    /// options. See [`BulkLoad`].
    pub fn bulk_load(&self, table: &Table) -> Result<BulkLoad<'_>> {
        self.bulk_load_with(table, BulkLoadOptions::default())
    }

    /// Start loading `table` with `options`.
    pub fn bulk_load_with(&self, table: &Table, options: BulkLoadOptions) -> Result<BulkLoad<'_>> {
        let inner = &self.inner;
        inner.check_log()?;
        let def = table.def.clone();
        if def.schema.is_none() {
            return Err(Error::Invalid(format!(
                "bulk load: table '{}' has no schema (load typed rows)",
                def.name
            )));
        }
        let batch_pages = batch_pages(inner, def.space)?;
        let unlogged = options.logging == BulkLogging::Minimal
            && inner.space(def.space)?.store.page_log().is_none();
        let mut mtr = inner.mtr(def.space)?;
        let page_bytes = mtr.page_bytes();
        for root in roots(&def) {
            if !is_empty_leaf(&mut mtr, root)? {
                return Err(Error::Invalid(format!(
                    "bulk load: table '{}' is not empty (a load builds its trees from nothing)",
                    def.name
                )));
            }
        }
        drop(mtr);
        // Both fill targets are checked before anything is written.
        let primary = TreeBuilder::new(page_bytes, options.fill_percent)?;
        TreeBuilder::new(page_bytes, options.index_fill_percent)?;
        let reserved = Arc::new(Mutex::new(Vec::new()));
        {
            let mut loads = inner.bulk_loads.lock().expect("bulk loads");
            if loads.contains_key(&def.id) {
                return Err(Error::Invalid(format!(
                    "bulk load: a load into table '{}' is under way",
                    def.name
                )));
            }
            loads.insert(
                def.id,
                Reserved {
                    space: def.space,
                    pages: reserved.clone(),
                },
            );
        }
        if let Err(e) = record_loading(self, &def.name, true) {
            inner.bulk_loads.lock().expect("bulk loads").remove(&def.id);
            return Err(e);
        }
        Ok(BulkLoad {
            db: self,
            primary,
            indexes: def
                .indexes
                .iter()
                .map(|_| IndexEntries::default())
                .collect(),
            def,
            options,
            page_bytes,
            batch_pages,
            index_bytes: 0,
            reserved,
            unused: Vec::new(),
            pages_written: 0,
            unlogged,
            open: true,
        })
    }
}

/// The roots of a table's trees: the table's, then each index's.
fn roots(def: &TableDef) -> Vec<PageNo> {
    std::iter::once(def.root)
        .chain(def.indexes.iter().map(|i| i.root))
        .collect()
}

/// Whether page `root` is a leaf without entries.
fn is_empty_leaf<P: PageAccess + ?Sized>(pages: &mut P, root: PageNo) -> Result<bool> {
    let node = Node::parse(root, pages.read(root)?)?;
    Ok(node.level() == 0 && node.count() == 0)
}

impl BulkLoad<'_> {
    /// Add `row`, whose primary key must sort above every row added before
    /// (BULK-4).
    pub fn push(&mut self, row: &[Value]) -> Result<()> {
        let schema = self.def.schema.as_ref().expect("checked at the start");
        let key = schema.primary_key(row)?;
        let value = StoredRow {
            header: VersionHeader::committed(0, NO_PREV_VERSION),
            row: schema.encode_row(row)?,
        }
        .encode();
        let mut index_keys = Vec::with_capacity(self.def.indexes.len());
        for index in &self.def.indexes {
            let mut index_key = schema.index_key(row, &index.columns)?;
            index_key.extend_from_slice(&key);
            index_keys.push(index_key);
        }
        let index_bytes = self.index_bytes + index_keys.iter().map(Vec::len).sum::<usize>();
        if index_bytes > BULK_INDEX_BYTES_MAX {
            return Err(Error::TooLarge(format!(
                "bulk load of table '{}': its index keys pass BULK_INDEX_BYTES_MAX ({BULK_INDEX_BYTES_MAX} bytes); load it with inserts",
                self.def.name
            )));
        }
        let wanted = self
            .primary
            .pages_for(&key, &value)
            .map_err(|e| self.about(e))?;
        let pages = self.reserve(wanted)?;
        self.primary.add_pages(pages);
        self.primary.push(&key, &value).map_err(|e| self.about(e))?;
        for (entries, index_key) in self.indexes.iter_mut().zip(index_keys) {
            entries.keys.push((entries.arena.len(), index_key.len()));
            entries.arena.extend_from_slice(&index_key);
        }
        self.index_bytes = index_bytes;
        if self.primary.finished_count() >= self.batch_pages {
            let done = self.primary.take_finished();
            self.write(&done)?;
        }
        Ok(())
    }

    /// `e`, naming the table it happened to.
    fn about(&self, e: Error) -> Error {
        match e {
            Error::Invalid(m) => Error::Invalid(format!("table '{}': {m}", self.def.name)),
            Error::TooLarge(m) => Error::TooLarge(format!("table '{}': {m}", self.def.name)),
            other => other,
        }
    }

    /// Rows added so far.
    pub fn rows(&self) -> u64 {
        self.primary.entries()
    }

    /// `wanted` pages for a builder, in one mini-transaction (none when
    /// 0).
    fn reserve(&mut self, wanted: usize) -> Result<Vec<PageNo>> {
        if wanted == 0 {
            return Ok(Vec::new());
        }
        let space = self.def.space;
        let pages = system_mtr(&self.db.inner, |inner| {
            let mut mtr = inner.mtr(space)?;
            let pages = (0..wanted)
                .map(|_| mtr.allocate(PageType::BTreeLeaf))
                .collect::<Result<Vec<_>>>()?;
            mtr.commit(&inner.wal, 0, 0, None)?;
            Ok(pages)
        })?;
        self.reserved
            .lock()
            .expect("reserved")
            .extend_from_slice(&pages);
        Ok(pages)
    }

    /// Write finished nodes to their pages, in batches: unlogged
    /// (BULK-6), or each batch one mini-transaction whose redo is the
    /// pages' images.
    fn write(&mut self, nodes: &[(PageNo, Vec<u8>)]) -> Result<()> {
        if self.unlogged {
            return self.write_unlogged(nodes);
        }
        let space = self.def.space;
        for batch in nodes.chunks(self.batch_pages) {
            system_mtr(&self.db.inner, |inner| {
                let mut mtr = inner.mtr(space)?;
                for (page_no, image) in batch {
                    write_image(mtr.write(*page_no)?, image);
                }
                mtr.commit(&inner.wal, 0, 0, None)?;
                Ok(())
            })?;
            self.pages_written += batch.len() as u64;
        }
        Ok(())
    }

    /// Write finished nodes into their frames without logging their
    /// contents (BULK-6): per batch, one record naming the pages, whose end
    /// becomes their page LSN. A write-back of one of them forces the log
    /// to that LSN first (the WAL rule), so the record is durable before
    /// any of its pages is on the device, and redo and repair know the log
    /// lacks their contents. Each page needs no read: it is overwritten.
    fn write_unlogged(&mut self, nodes: &[(PageNo, Vec<u8>)]) -> Result<()> {
        let inner = &self.db.inner;
        let space = inner.space(self.def.space)?;
        for batch in nodes.chunks(self.batch_pages) {
            inner.wal.make_buffer_room()?;
            let body = Body::Unlogged {
                space: self.def.space,
                pages: batch.iter().map(|(page_no, _)| *page_no).collect(),
            };
            let (_, end_lsn) = inner.wal.append(0, 0, body)?;
            for (page_no, image) in batch {
                let id = PageId::new(self.def.space, *page_no);
                space
                    .pool
                    .fetch_to_overwrite(id)?
                    .install(image, end_lsn, end_lsn);
            }
            self.pages_written += batch.len() as u64;
        }
        Ok(())
    }

    /// Build the rest, make the table and its indexes visible at once
    /// (BULK-2), force the log, and return what was made. On an error
    /// nothing is visible and the reserved pages are freed (BULK-3).
    pub fn finish(mut self) -> Result<BulkLoadStats> {
        self.open = false;
        match self.build_and_link() {
            Ok(stats) => {
                self.end()?;
                let rows = &self.db.inner.bulk_loaded_rows;
                rows.fetch_add(stats.rows, std::sync::atomic::Ordering::Relaxed);
                Ok(stats)
            }
            Err(e) => {
                // The error that stopped the load is the one to report; a
                // failure to free (the database is failing) leaves the
                // catalog's mark for the next open (BULK-5).
                let _ = self.give_back();
                Err(e)
            }
        }
    }

    /// Give up: nothing becomes visible, and every reserved page goes back
    /// to the free list (BULK-3).
    pub fn abandon(mut self) -> Result<()> {
        self.open = false;
        self.give_back()
    }

    /// Free every reserved page (BULK-3), then end the load.
    fn give_back(&mut self) -> Result<()> {
        self.free_reserved()?;
        self.end()
    }

    /// Clear the catalog's mark (BULK-5) and leave the registry.
    fn end(&mut self) -> Result<()> {
        let cleared = record_loading(self.db, &self.def.name, false);
        self.db
            .inner
            .bulk_loads
            .lock()
            .expect("bulk loads")
            .remove(&self.def.id);
        cleared
    }

    fn build_and_link(&mut self) -> Result<BulkLoadStats> {
        let done = self.primary.take_finished();
        self.write(&done)?;
        let primary = std::mem::replace(
            &mut self.primary,
            TreeBuilder::new(self.page_bytes, self.options.fill_percent)?,
        )
        .finish()?;
        let mut built = vec![self.written(primary)?];
        for i in 0..self.indexes.len() {
            let entries = std::mem::take(&mut self.indexes[i]);
            let index = self.build_index(entries)?;
            built.push(index);
        }
        if self.unlogged && self.pages_written > 0 {
            // BULK-6: every page written unlogged is on its device, flushed,
            // before the final mini-transaction makes it reachable; the
            // checkpoint also moves the horizon for full-page images past
            // their LSNs, so the first change of each is logged whole.
            self.db.checkpoint()?;
        }
        self.link(&built)?;
        let roots = built.iter().filter(|(image, _)| image.is_some()).count();
        Ok(BulkLoadStats {
            rows: built[0].1.entries,
            index_entries: built[1..].iter().map(|(_, s)| s.entries).sum(),
            pages: self.pages_written + roots as u64,
            height: built[0].1.height,
        })
    }

    /// The final mini-transaction (BULK-2), under every tree's exclusive
    /// latch: each tree's new root, if its root is still an empty leaf.
    /// Then it is made durable as a new table is (PLOG-2, REC-4), and the
    /// unused pages are freed.
    fn link(&mut self, built: &[(Option<Vec<u8>>, BuildStats)]) -> Result<()> {
        let def = self.def.clone();
        let trees: Vec<TreeRef<'_>> = std::iter::once(TreeRef::table(&def))
            .chain(def.indexes.iter().map(|index| TreeRef::index(&def, index)))
            .collect();
        let unused = std::mem::take(&mut self.unused);
        let inner = &self.db.inner;
        let logged = inner.with_trees_exclusive(&trees, || {
            system_mtr(inner, |inner| {
                let mut mtr = inner.mtr(def.space)?;
                for (tree, (image, _)) in trees.iter().zip(built) {
                    if !is_empty_leaf(&mut mtr, tree.root)? {
                        return Err(Error::Invalid(format!(
                            "bulk load of table '{}': the table was written during the load; nothing was loaded",
                            def.name
                        )));
                    }
                    if let Some(image) = image {
                        write_image(mtr.write(tree.root)?, image);
                    }
                }
                mtr.commit(&inner.wal, 0, 0, None)
            })
        })?;
        // The trees hold every reserved page but the unused ones now, so
        // only those may be freed from here on, whatever fails (BULK-3).
        *self.reserved.lock().expect("reserved") = unused.clone();
        inner.make_durable(logged)?;
        // A crash before they are all free leaves the catalog's mark to the
        // next open (BULK-5).
        free_pages(inner, def.space, &unused, self.batch_pages)?;
        self.reserved.lock().expect("reserved").clear();
        Ok(())
    }

    /// Free every reserved page, in batches (BULK-3).
    fn free_reserved(&mut self) -> Result<()> {
        let pages = std::mem::take(&mut *self.reserved.lock().expect("reserved"));
        self.unused.clear();
        free_pages(&self.db.inner, self.def.space, &pages, self.batch_pages)
    }

    /// Write what a finished build left and keep its root image; its
    /// unused pages stay reserved, for [`BulkLoad::link`] to free.
    fn written(&mut self, built: Built) -> Result<(Option<Vec<u8>>, BuildStats)> {
        self.write(&built.finished)?;
        self.unused.extend(built.unused);
        Ok((built.root_image, built.stats))
    }

    /// Sort one index's keys and build its tree.
    fn build_index(&mut self, mut entries: IndexEntries) -> Result<(Option<Vec<u8>>, BuildStats)> {
        let mut keys = std::mem::take(&mut entries.keys);
        keys.sort_unstable_by(|&a, &b| entries.key(a).cmp(entries.key(b)));
        let value = StoredRow {
            header: VersionHeader::committed(0, NO_PREV_VERSION),
            row: Vec::new(),
        }
        .encode();
        let mut builder = TreeBuilder::new(self.page_bytes, self.options.index_fill_percent)?;
        for &at in &keys {
            let pages = self.reserve(builder.pages_for(entries.key(at), &value)?)?;
            builder.add_pages(pages);
            builder.push(entries.key(at), &value)?;
            if builder.finished_count() >= self.batch_pages {
                let done = builder.take_finished();
                self.write(&done)?;
            }
        }
        let done = builder.take_finished();
        self.write(&done)?;
        self.written(builder.finish()?)
    }
}

impl Drop for BulkLoad<'_> {
    /// A load dropped unfinished is abandoned: its pages are freed, as far
    /// as the database lets (not while a panic unwinds, when no I/O is
    /// started: the catalog's mark then leaves them to the next open,
    /// BULK-5).
    fn drop(&mut self) {
        if self.open && !std::thread::panicking() {
            self.open = false;
            let _ = self.give_back();
        }
    }
}

/// Run `op`, a mini-transaction of no transaction, again after a pause
/// while it is refused for a retryable reason (a full log waiting for its
/// checkpoint), at most [`BULK_TRIES_MAX`] times.
fn system_mtr<T>(inner: &Inner, mut op: impl FnMut(&Inner) -> Result<T>) -> Result<T> {
    let mut tries = 0;
    loop {
        tries += 1;
        inner.wal.make_buffer_room()?; // WAL-15
        match op(inner) {
            Err(e) if e.is_retryable() && tries < BULK_TRIES_MAX => {
                flashlab_runtime::Rt::current().sleep(BULK_RETRY_BACKOFF_NS);
            }
            other => return other,
        }
    }
}

/// Pages per reservation and per mini-transaction in `space`: at most
/// [`BULK_BATCH_PAGES`] and a quarter of its pool's frames.
fn batch_pages(inner: &Inner, space: SpaceId) -> Result<usize> {
    Ok((inner.space(space)?.pool.frames() / 4).clamp(1, BULK_BATCH_PAGES))
}

/// Free `pages` of `space`, `batch_pages` per mini-transaction, each
/// unread unless resident: freeing overwrites a page whole, and a cut
/// load's may be torn (BULK-6).
fn free_pages(inner: &Inner, space: SpaceId, pages: &[PageNo], batch_pages: usize) -> Result<()> {
    for batch in pages.chunks(batch_pages) {
        system_mtr(inner, |inner| {
            let mut mtr = inner.mtr(space)?;
            for &page_no in batch {
                mtr.free_unread(page_no)?;
            }
            mtr.commit(&inner.wal, 0, 0, None)?;
            Ok(())
        })?;
    }
    Ok(())
}

/// Set or clear the catalog's mark of a load into `name` and force it
/// (BULK-5).
fn record_loading(db: &Database, name: &str, loading: bool) -> Result<()> {
    let inner = &db.inner;
    let _ddl = inner.ddl.lock();
    inner.check_log()?;
    let catalog = TreeRef::at(0, CATALOG_ROOT);
    let key = load_key(name);
    let logged = if loading {
        let ctx = LogCtx {
            txn: 0,
            prev_lsn: 0,
        };
        inner.tree_put(catalog, &key, &[], &ctx)?.1
    } else {
        inner.tree_delete_system(catalog, &key)?.1
    };
    inner.make_durable(logged)
}

/// Count the pages of the loads under way as theirs, for `verify`.
pub(crate) fn add_reserved(db: &Database, owners: &mut PageOwners) {
    let loads = db.inner.bulk_loads.lock().expect("bulk loads");
    for (table, reserved) in loads.iter() {
        let owned = owners.entry(reserved.space).or_default();
        for &page_no in reserved.pages.lock().expect("reserved").iter() {
            owned
                .entry(page_no)
                .or_insert_with(|| format!("the bulk load into table {table}"));
        }
    }
}

/// BULK-5 at open: for every table whose catalog entry says a load was
/// under way, free the pages its space holds in no tree, then clear the
/// mark. Returns the loads and the pages taken back.
pub(crate) fn reclaim_cut_loads(db: &Database) -> Result<(u64, u64)> {
    let inner = &db.inner;
    let end = crate::row::prefix_end(LOAD_PREFIX).expect("the prefix ends below 0xFF");
    let marks = inner.tree_scan(
        TreeRef::at(0, CATALOG_ROOT),
        std::ops::Bound::Included(LOAD_PREFIX),
        std::ops::Bound::Excluded(end.as_slice()),
        usize::MAX,
    )?;
    let names: Vec<String> = marks
        .iter()
        .map(|(key, _)| String::from_utf8_lossy(&key[LOAD_PREFIX.len()..]).into_owned())
        .collect();
    let catalog = inner.catalog.read().expect("catalog").clone();
    let cut: Vec<(String, Option<SpaceId>)> = names
        .into_iter()
        .map(|name| {
            let space = catalog.get(&name).map(|def| def.space);
            (name, space)
        })
        .collect();
    let Some(first) = cut.first() else {
        return Ok((0, 0));
    };
    let damaged = |problem: &str| {
        Error::Damaged(format!(
            "a crash cut short the bulk load into table '{}', and its pages cannot be taken back: {problem}",
            first.0
        ))
    };
    let mut report = VerifyReport::default();
    let owners = verify::verify_trees(db, &mut report)?;
    if let Some(problem) = report.problems.first() {
        return Err(damaged(problem));
    }
    // A mark without its table (a damaged catalog) names no space; the
    // walk of every tree still runs, and the mark goes.
    let spaces: BTreeSet<SpaceId> = cut.iter().filter_map(|(_, space)| *space).collect();
    let mut reclaimed = 0;
    for id in spaces {
        let empty = HashMap::new();
        let owned = owners.get(&id).unwrap_or(&empty);
        let (leaked, _) =
            verify::leaked_pages(db, inner.space(id)?, owned)?.map_err(|p| damaged(&p))?;
        free_pages(inner, id, &leaked, batch_pages(inner, id)?)?;
        reclaimed += leaked.len() as u64;
    }
    for (name, _) in &cut {
        record_loading(db, name, false)?;
    }
    Ok((cut.len() as u64, reclaimed))
}
