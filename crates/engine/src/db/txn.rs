//! Transactions: snapshots, row locks, versions, commit and rollback.
//!
//! A [`Transaction`] reads from a snapshot without taking locks (MVCC, see
//! [`crate::mvcc`]): a row whose current version its snapshot may not see
//! is followed back through its before-images in the rollback segments.
//! Writes take exclusive row locks held to the end (strict two-phase
//! locking for writers; deadlocks are detected and the requester is the
//! victim, with a retryable error). Under snapshot isolation the first
//! updater wins: overwriting a version committed after this transaction's
//! snapshot fails with a retryable serialization error. Under read committed
//! every statement takes a fresh snapshot and an update changes the latest
//! committed version.
//!
//! A change writes the row's before-image to the transaction's rollback
//! segment, then the new version (whose header names this transaction and
//! points at the before-image) into the B+tree as one logged
//! mini-transaction (DB-2). A delete writes a *tombstone* version, so older
//! snapshots still find the row. Secondary index entries are only ever
//! added: an index scan re-checks each row it finds against the key.
//!
//! Commit takes a commit timestamp, appends the commit record and waits for
//! the log as the durability level says (DB-3); the commit becomes visible
//! to new snapshots once durable. Rollback undoes the changes newest first
//! through the log's logical undo, logging compensation records. A
//! transaction dropped while still active rolls back.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use flashlab_runtime::Rt;

use crate::db::access::{LogCtx, TreeRef};
use crate::db::{Inner, Table};
use crate::error::{Error, Result};
use crate::lock::{HeldLocks, LockKey, LockMode};
use crate::mvcc::Isolation;
use crate::mvcc::rollback::{Reclaim, SegmentRef};
use crate::row::{StoredRow, Value, VersionHeader, prefix_end};
use crate::wal::record::{Body, Undo};

/// Most rows one scan returns.
pub const SCAN_ROWS_MAX: usize = 10_000_000;
/// Entries a [`Transaction::scan_limit`] reads from the tree at a time
/// (at least; more when more rows are asked for).
const SCAN_CHUNK_ROWS_MIN: usize = 16;
/// Set in a version header's `prev` when the version is a deletion.
pub const TOMBSTONE: u64 = 1 << 63;
/// Longest version chain a read follows before declaring the data corrupt.
pub const CHAIN_STEPS_MAX: u64 = 1 << 20;

/// Undo entries a transaction's first change makes room for (a TPC-B
/// transaction makes four).
const UNDO_ENTRIES_RESERVED: usize = 8;

/// One logged change not yet compensated.
struct UndoEntry {
    prev_lsn: u64,
    undo: Undo,
}

/// What [`Transaction::write`] stores as a row's new latest version.
enum Change<'a> {
    /// This value, or a tombstone for `None` (nothing if the row is absent).
    Set(Option<&'a [u8]>),
    /// A function of the current row, where the write finds it; nothing
    /// is written if there is no row.
    Update(&'a mut dyn FnMut(&[u8]) -> Result<Vec<u8>>),
}

/// A transaction. Commit or abort it; dropping it aborts.
pub struct Transaction {
    pub(super) db: Arc<Inner>,
    id: u64,
    isolation: Isolation,
    snapshot_ts: u64,
    /// Time travel: reads only, at a past snapshot.
    read_only: bool,
    segment: Option<SegmentRef>,
    last_lsn: u64,
    undo: Vec<UndoEntry>,
    /// The rows it locked, released at its end (LOCK-3).
    held: HeldLocks,
    active: bool,
}

impl Transaction {
    pub(crate) fn new(db: Arc<Inner>, id: u64, snapshot_ts: u64, read_only: bool) -> Transaction {
        let isolation = db.config.mvcc.isolation;
        Transaction {
            db,
            id,
            isolation,
            snapshot_ts,
            read_only,
            segment: None,
            last_lsn: 0,
            undo: Vec::new(),
            held: HeldLocks::new(),
            active: true,
        }
    }

    /// The transaction's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The commit timestamp this transaction's snapshot sees up to.
    pub fn snapshot_ts(&self) -> u64 {
        self.snapshot_ts
    }

    /// This transaction, refusing writes from now on.
    pub(super) fn read_only(mut self) -> Transaction {
        self.read_only = true;
        self
    }

    pub(super) fn check_active(&self) -> Result<()> {
        if !self.active {
            return Err(Error::Invalid(format!("transaction {} has ended", self.id)));
        }
        Ok(())
    }

    fn check_writable(&self) -> Result<()> {
        self.check_active()?;
        if self.read_only {
            return Err(Error::Invalid(format!(
                "transaction {} is read-only (a read or a past snapshot) and cannot write",
                self.id
            )));
        }
        Ok(())
    }

    /// Read committed: a fresh snapshot for each statement.
    pub(super) fn statement_snapshot(&mut self) {
        if self.isolation == Isolation::ReadCommitted && !self.read_only {
            let fresh = self.db.versions.snapshot();
            self.db.versions.release_snapshot(self.snapshot_ts);
            self.snapshot_ts = fresh;
        }
    }

    fn lock(&mut self, table: &Table, key: &[u8], mode: LockMode) -> Result<()> {
        let lock_key: LockKey = (table.def.id, key.to_vec());
        self.db.locks.lock(self.id, &mut self.held, lock_key, mode)
    }

    pub(super) fn tree(table: &Table) -> TreeRef<'_> {
        TreeRef::table(&table.def)
    }

    // ---------------------------------------------------------- reading

    /// The version of a stored row this transaction's snapshot sees: its
    /// row bytes, or `None` if the row did not exist (or was deleted) then.
    /// The current version's row bytes are `stored`'s own allocation.
    pub(super) fn visible(&self, stored: Vec<u8>) -> Result<Option<Vec<u8>>> {
        let row = StoredRow::decode_owned(stored)?;
        let (mut header, mut bytes) = (row.header, row.row);
        let mut steps = 0u64;
        loop {
            let creator = header.txn_id().unwrap_or(0);
            if self.db.versions.visible(creator, self.id, self.snapshot_ts) {
                if steps > 0 {
                    self.db.rollback.note_chain(steps);
                }
                return Ok((header.prev & TOMBSTONE == 0).then_some(bytes));
            }
            let pointer = header.prev & !TOMBSTONE;
            if pointer == 0 {
                return Ok(None); // created after the snapshot
            }
            steps += 1;
            if steps > CHAIN_STEPS_MAX {
                return Err(Error::malformed(
                    "version chain",
                    format!("longer than {CHAIN_STEPS_MAX}"),
                ));
            }
            match self.db.rollback.read(pointer)? {
                Some((older, older_bytes)) => {
                    header = older;
                    bytes = older_bytes;
                }
                None => {
                    return Err(Error::SnapshotTooOld(format!(
                        "transaction {} at timestamp {} needs a version whose rollback extent was reused",
                        self.id, self.snapshot_ts
                    )));
                }
            }
        }
    }

    /// Read the value under `key` as of this transaction's snapshot.
    pub fn get(&mut self, table: &Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_active()?;
        self.statement_snapshot();
        self.db.charge(crate::cpu_prices::Price::Get, 1);
        match self.db.tree_get(Self::tree(table), key)? {
            Some(stored) => self.visible(stored),
            None => Ok(None),
        }
    }

    /// Entries with `lower <= key < upper` as of the snapshot, in key order.
    pub fn scan(
        &mut self,
        table: &Table,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.check_active()?;
        self.statement_snapshot();
        let entries = self
            .db
            .tree_scan(Self::tree(table), lower, upper, SCAN_ROWS_MAX)?;
        let rt = Rt::current();
        let cost = self.db.cpu.ns(crate::cpu_prices::Price::ScanRow);
        let mut out = Vec::with_capacity(entries.len());
        for (key, stored) in entries {
            rt.cpu(cost);
            if let Some(row) = self.visible(stored)? {
                out.push((key, row));
            }
        }
        Ok(out)
    }

    /// The first `limit` entries with `lower <= key < upper` visible to the
    /// snapshot, in key order: a scan that stops early (SQL's `ORDER BY key
    /// LIMIT n`). It reads the tree a chunk at a time, so deleted versions
    /// (tombstones) before the first visible rows are stepped over, each
    /// charged as a row visited.
    pub fn scan_limit(
        &mut self,
        table: &Table,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.check_active()?;
        self.statement_snapshot();
        let rt = Rt::current();
        let cost = self.db.cpu.ns(crate::cpu_prices::Price::ScanRow);
        let mut out = Vec::new();
        let mut from: Bound<Vec<u8>> = lower.map(<[u8]>::to_vec);
        while out.len() < limit {
            let chunk = (limit - out.len()).max(SCAN_CHUNK_ROWS_MIN);
            let entries = self.db.tree_scan(
                Self::tree(table),
                from.as_ref().map(Vec::as_slice),
                upper,
                chunk,
            )?;
            let exhausted = entries.len() < chunk;
            for (key, stored) in entries {
                rt.cpu(cost);
                if out.len() < limit
                    && let Some(row) = self.visible(stored)?
                {
                    out.push((key.clone(), row));
                }
                from = Bound::Excluded(key);
            }
            if exhausted {
                break;
            }
        }
        Ok(out)
    }

    /// Every entry whose key starts with `prefix`.
    pub fn scan_prefix(&mut self, table: &Table, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let end = prefix_end(prefix);
        let upper = match &end {
            Some(end) => Bound::Excluded(end.as_slice()),
            None => Bound::Unbounded,
        };
        self.scan(table, Bound::Included(prefix), upper)
    }

    // ---------------------------------------------------------- writing

    /// Insert or replace the value under `key`.
    pub fn put(&mut self, table: &Table, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_writable()?;
        if table.def.schema.is_some() {
            return Err(Error::Invalid(format!(
                "table '{}' is typed: use put_row",
                table.def.name
            )));
        }
        self.write(table, key, Change::Set(Some(value))).map(|_| ())
    }

    /// Read-modify-write of one row as one statement (an SQL `UPDATE ...
    /// SET x = x + d`): exclusive lock first, then the new value computed
    /// from the latest version. Charges one statement of CPU, also when
    /// the row is missing. Returns the new value, or `None` (changing
    /// nothing) if the row does not exist.
    ///
    /// `change` runs inside the write, where it finds the row, with the
    /// table's tree latched: it must be a plain function of the bytes, and
    /// must not use the database (a read or write of the same table from
    /// inside it would wait for the latch its caller holds).
    pub fn update(
        &mut self,
        table: &Table,
        key: &[u8],
        change: impl FnOnce(&[u8]) -> Vec<u8>,
    ) -> Result<Option<Vec<u8>>> {
        self.check_writable()?;
        if table.def.schema.is_some() {
            return Err(Error::Invalid(format!(
                "table '{}' is typed: use update_row",
                table.def.name
            )));
        }
        let mut new = None;
        let mut change = Some(change);
        let mut update = |current: &[u8]| {
            let value = (change.take().expect("a write decides once"))(current);
            new = Some(value.clone());
            Ok(value)
        };
        self.write(table, key, Change::Update(&mut update))?;
        Ok(new)
    }

    /// What a write's `decide` needs of the transaction, apart from the
    /// database handle, so that a statement need not clone the handle (a
    /// count every core writes) to run `decide` under the tree's latch.
    fn writer(&self) -> Writer {
        Writer {
            id: self.id,
            isolation: self.isolation,
            snapshot_ts: self.snapshot_ts,
        }
    }

    /// Delete `key`; true if it existed.
    pub fn delete(&mut self, table: &Table, key: &[u8]) -> Result<bool> {
        self.check_writable()?;
        if table.def.schema.is_some() {
            return Err(Error::Invalid(format!(
                "table '{}' is typed: use delete_row",
                table.def.name
            )));
        }
        Ok(self.write(table, key, Change::Set(None))?.is_some())
    }

    /// Lock, keep the before-image in the rollback segment, write the new
    /// version (or a tombstone); returns the row's previous latest value.
    fn write(&mut self, table: &Table, key: &[u8], change: Change<'_>) -> Result<Option<Vec<u8>>> {
        self.lock(table, key, LockMode::Exclusive)?;
        self.db.check_log()?;
        self.db.charge(crate::cpu_prices::Price::Put, 1);
        let tree = Self::tree(table);
        // Make room in the rollback segment now, with no latch held, for a
        // before-image of about the new row's size: the append under the
        // tree latch then finds its page pinned and with room (DB-5).
        if let Some(segment) = &self.segment {
            let db = &self.db;
            let reclaim = || Reclaim {
                oldest_snapshot: db.versions.oldest_snapshot(),
                now_ns: Rt::now_ns_current(),
                retention_ns: db.config.mvcc.retention_ns,
            };
            let row_bytes = match &change {
                Change::Set(value) => value.map_or(0, <[u8]>::len),
                // Its size is known only where the write finds the row:
                // no room is reserved (DB-5's exceptions).
                Change::Update(_) => 0,
            };
            let filled = self.db.rollback.prepare(segment, row_bytes, &reclaim)?;
            let _ = self.db.rollback.write_filled(filled);
        }
        let ctx = self.ctx();
        let writer = self.writer();
        let (db, segment) = (&*self.db, &mut self.segment);
        let mut filled = None;
        // The row lock taken above keeps the key's value: the change may
        // run as a one-leaf change (DB-6).
        let (before, logged) = db.tree_write(tree, key, &ctx, true, |current| {
            // The current version, borrowed from the leaf.
            let current = current.map(VersionHeader::split).transpose()?;
            if let Some((header, _)) = &current {
                writer.check_first_updater(db, header)?;
            }
            let deleted = current
                .as_ref()
                .is_none_or(|(header, _)| header.prev & TOMBSTONE != 0);
            let value = match change {
                Change::Set(None) if deleted => return Ok(None), // nothing to delete
                Change::Update(_) if deleted => return Ok(None), // no row to update
                Change::Set(value) => value.map(<[u8]>::to_vec),
                Change::Update(update) => {
                    let (_, row) = current.as_ref().expect("a row that is not deleted");
                    Some(update(row)?)
                }
            };
            let tombstone = value.is_none();
            let prev = match current {
                None => 0,
                // Our own earlier version: others still see the one before it.
                Some((header, _)) if header.txn_id() == Some(writer.id) => header.prev & !TOMBSTONE,
                Some((header, row)) => {
                    let (pointer, page) = writer.keep_before_image(db, segment, header, row)?;
                    filled = page;
                    pointer
                }
            };
            let header =
                VersionHeader::uncommitted(writer.id, prev | if tombstone { TOMBSTONE } else { 0 });
            Ok(Some(
                StoredRow {
                    header,
                    row: value.unwrap_or_default(),
                }
                .encode(),
            ))
        })?;
        // Record the change for undo first: whatever fails next, the change
        // is logged and must be undoable.
        if let Some(logged) = logged {
            self.logged(logged.lsn, tree, key, before.clone());
        }
        // A rollback page the before-image filled is written now, with the
        // tree latch released. A failed write leaves the page dirty in the
        // pool, to be written (or reported) by the next write-back.
        let _ = self.db.rollback.write_filled(filled);
        let before = before.map(StoredRow::decode_owned).transpose()?;
        Ok(before.and_then(|row| (row.header.prev & TOMBSTONE == 0).then_some(row.row)))
    }

    fn tree_put(&mut self, tree: TreeRef, key: &[u8], stored: &[u8]) -> Result<Option<Vec<u8>>> {
        let ctx = self.ctx();
        let (before, logged) = self.db.tree_put(tree, key, stored, &ctx)?;
        if let Some(logged) = logged {
            self.logged(logged.lsn, tree, key, before.clone());
        }
        Ok(before)
    }

    fn ctx(&self) -> LogCtx {
        LogCtx {
            txn: self.id,
            prev_lsn: self.last_lsn,
        }
    }

    /// Record a logged change in the undo list (DB-2).
    fn logged(&mut self, lsn: u64, tree: TreeRef, key: &[u8], before: Option<Vec<u8>>) {
        debug_assert!(lsn > self.last_lsn, "DB-2: records chain forward");
        if self.undo.capacity() == 0 {
            // One allocation for a short transaction, not two or three.
            self.undo.reserve(UNDO_ENTRIES_RESERVED);
        }
        self.undo.push(UndoEntry {
            prev_lsn: self.last_lsn,
            undo: Undo {
                space: tree.space,
                root: tree.root,
                key: key.to_vec(),
                before,
            },
        });
        self.last_lsn = lsn;
    }

    // ---------------------------------------------------------- typed rows

    pub(super) fn schema(table: &Table) -> Result<&crate::row::Schema> {
        table.def.schema.as_ref().ok_or_else(|| {
            Error::Invalid(format!(
                "table '{}' has no schema: use the byte API",
                table.def.name
            ))
        })
    }

    /// Insert or replace a typed row, adding its index entries.
    pub fn put_row(&mut self, table: &Table, row: &[Value]) -> Result<()> {
        self.check_writable()?;
        let schema = Self::schema(table)?;
        let key = schema.primary_key(row)?;
        let encoded = schema.encode_row(row)?;
        let before = self.write(table, &key, Change::Set(Some(&encoded)))?;
        let old_row = before.map(|b| schema.decode_row(&b)).transpose()?;
        self.add_index_entries(table, &key, old_row.as_deref(), row)
    }

    /// Insert or replace typed rows, as [`Transaction::put_row`] does for
    /// each in turn, with the same result, locks and log records, but
    /// faster for rows whose keys are absent (a load): those go into the
    /// tree in batches, one mini-transaction per batch (one page copy, diff
    /// and install per page for the whole batch, see
    /// `Inner::tree_insert_batch`), and a whole batch is charged its CPU
    /// cost at once. Rows in ascending key order append at the right edge
    /// of the tree and fill its leaves. A row whose key is present goes
    /// through `put_row`.
    pub fn put_rows(&mut self, table: &Table, rows: &[Vec<Value>]) -> Result<()> {
        self.check_writable()?;
        let schema = Self::schema(table)?;
        let mut encoded = Vec::with_capacity(rows.len());
        for row in rows {
            let key = schema.primary_key(row)?;
            let value = StoredRow {
                header: VersionHeader::uncommitted(self.id, 0),
                row: schema.encode_row(row)?,
            }
            .encode();
            encoded.push((key, value));
        }
        let tree = Self::tree(table);
        // Rows inserted here (their keys were absent): their index entries
        // are added afterwards, batched too.
        let mut inserted = Vec::with_capacity(rows.len());
        let (mut at, mut locked) = (0, 0);
        while at < rows.len() {
            let end = (at + crate::db::access::BATCH_ROWS_MAX).min(rows.len());
            for (key, _) in &encoded[locked.max(at)..end] {
                self.lock(table, key, LockMode::Exclusive)?;
            }
            locked = locked.max(end);
            let n = self.insert_batch(tree, &encoded[at..end])?;
            if n > 0 {
                self.db.charge(crate::cpu_prices::Price::Put, n as u64);
            }
            inserted.extend(at..at + n);
            at += n;
            if n == 0 {
                // Present: replace it as put_row does (its CPU is charged).
                self.put_row(table, &rows[at])?;
                at += 1;
            }
        }
        for index in &table.def.indexes {
            let index_tree = TreeRef::index(&table.def, index);
            let empty = StoredRow {
                header: VersionHeader::uncommitted(self.id, 0),
                row: Vec::new(),
            }
            .encode();
            let mut entries = Vec::with_capacity(inserted.len());
            for &i in &inserted {
                let mut key = schema.index_key(&rows[i], &index.columns)?;
                key.extend_from_slice(&encoded[i].0);
                entries.push((key, empty.clone()));
            }
            entries.sort();
            let mut at = 0;
            while at < entries.len() {
                let end = (at + crate::db::access::BATCH_ROWS_MAX).min(entries.len());
                let n = self.insert_batch(index_tree, &entries[at..end])?;
                at += n;
                if n == 0 {
                    self.tree_put(index_tree, &entries[at].0, &entries[at].1)?;
                    at += 1;
                }
            }
        }
        Ok(())
    }

    /// Insert the entries of `entries` up to the first present key in one
    /// batch (see `Inner::tree_insert_batch`); returns how many, each one
    /// recorded for undo (DB-2).
    fn insert_batch(&mut self, tree: TreeRef, entries: &[(Vec<u8>, Vec<u8>)]) -> Result<usize> {
        self.db.check_log()?;
        let db = self.db.clone();
        let (n, lsns, error) = match db.tree_insert_batch(tree, entries, &self.ctx()) {
            Ok((n, lsns)) => (n, lsns, None),
            // Records already appended stay undoable.
            Err((lsns, e)) => (0, lsns, Some(e)),
        };
        for (lsn, (key, _)) in lsns.into_iter().zip(entries) {
            self.logged(lsn, tree, key, None);
        }
        match error {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }

    /// Read-modify-write of one typed row as one statement (see
    /// [`Transaction::update`], whose rule for `change` holds here too);
    /// returns the new row, or `None` if there is no row with that key.
    pub fn update_row(
        &mut self,
        table: &Table,
        key: &[Value],
        change: impl FnOnce(&mut Vec<Value>),
    ) -> Result<Option<Vec<Value>>> {
        self.check_writable()?;
        let schema = Self::schema(table)?;
        let key = crate::row::encode_key(key);
        // The new row is made from the current one where the write finds
        // it: one descent for the read and the write.
        let mut rows = None;
        let mut change = Some(change);
        let mut update = |current: &[u8]| {
            let old = schema.decode_row(current)?;
            let mut new = old.clone();
            (change.take().expect("a write decides once"))(&mut new);
            if schema.primary_key(&new)? != key {
                return Err(Error::Invalid(
                    "update_row may not change the primary key".into(),
                ));
            }
            let encoded = schema.encode_row(&new)?;
            rows = Some((old, new));
            Ok(encoded)
        };
        self.write(table, &key, Change::Update(&mut update))?;
        let Some((old, new)) = rows else {
            return Ok(None);
        };
        self.add_index_entries(table, &key, Some(&old), &new)?;
        Ok(Some(new))
    }

    /// Read a typed row by its primary key values.
    pub fn get_row(&mut self, table: &Table, key: &[Value]) -> Result<Option<Vec<Value>>> {
        let schema = Self::schema(table)?;
        let key = crate::row::encode_key(key);
        self.get(table, &key)?
            .map(|bytes| schema.decode_row(&bytes))
            .transpose()
    }

    /// Delete a typed row by its primary key values; true if it existed.
    pub fn delete_row(&mut self, table: &Table, key: &[Value]) -> Result<bool> {
        self.check_writable()?;
        Self::schema(table)?;
        let key = crate::row::encode_key(key);
        Ok(self.write(table, &key, Change::Set(None))?.is_some())
    }

    /// Rows whose index columns start with `prefix` values, in index order,
    /// as of the snapshot.
    pub fn index_scan(
        &mut self,
        table: &Table,
        index: &str,
        prefix: &[Value],
    ) -> Result<Vec<Vec<Value>>> {
        self.check_active()?;
        self.statement_snapshot();
        let def = table.def.index(index)?;
        let schema = Self::schema(table)?;
        let tree = TreeRef::index(&table.def, def);
        let start = crate::row::encode_key(prefix);
        let end = prefix_end(&start);
        let upper = match &end {
            Some(end) => Bound::Excluded(end.as_slice()),
            None => Bound::Unbounded,
        };
        let entries = self
            .db
            .tree_scan(tree, Bound::Included(&start), upper, SCAN_ROWS_MAX)?;
        let types = index_entry_types(schema, def);
        let mut rows = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for (index_key, _) in entries {
            let values = crate::row::decode_key(&types, &index_key)?;
            let pk = crate::row::encode_key(&values[def.columns.len()..]);
            let Some(stored) = self.db.tree_get(Self::tree(table), &pk)? else {
                continue;
            };
            let Some(bytes) = self.visible(stored)? else {
                continue;
            };
            let row = schema.decode_row(&bytes)?;
            // Entries are never removed: keep the row only if the version
            // this snapshot sees still has these index values.
            if schema.index_key(&row, &def.columns)? == index_key[..index_key.len() - pk.len()]
                && seen.insert(pk)
            {
                rows.push(row);
            }
        }
        Ok(rows)
    }

    /// Add the index entries of `new` that `old` did not have. Entries of
    /// old versions stay for older snapshots; scans re-check them.
    fn add_index_entries(
        &mut self,
        table: &Table,
        pk: &[u8],
        old: Option<&[Value]>,
        new: &[Value],
    ) -> Result<()> {
        let schema = Self::schema(table)?;
        for index in &table.def.indexes {
            let tree = TreeRef::index(&table.def, index);
            let key_of = |row: &[Value]| -> Result<Vec<u8>> {
                let mut key = schema.index_key(row, &index.columns)?;
                key.extend_from_slice(pk);
                Ok(key)
            };
            let new_key = key_of(new)?;
            if old.map(key_of).transpose()?.as_ref() == Some(&new_key) {
                continue;
            }
            let empty = StoredRow {
                header: VersionHeader::uncommitted(self.id, 0),
                row: Vec::new(),
            }
            .encode();
            self.tree_put(tree, &new_key, &empty)?;
        }
        Ok(())
    }

    // ---------------------------------------------------------- ending

    /// Commit: take a commit timestamp, append the commit record, wait for
    /// the log (DB-3), make the commit visible, release the locks.
    pub fn commit(self) -> Result<()> {
        self.commit_with_ts().map(|_| ())
    }

    /// Commit, returning the commit timestamp (for a transaction that wrote
    /// nothing: its snapshot's timestamp).
    pub fn commit_with_ts(mut self) -> Result<u64> {
        self.check_active()?;
        self.active = false;
        // Borrowed, not cloned: a clone's count is a line every core writes.
        let db = &*self.db;
        db.charge(crate::cpu_prices::Price::Commit, 1);
        if self.undo.is_empty() {
            self.finish(None);
            return Ok(self.snapshot_ts);
        }
        let result = db
            .wal
            .append_commit(self.id, self.last_lsn, &db.versions)
            .and_then(|(ts, _, end)| {
                if db.releases_locks_early() {
                    // DB-7: the commit record is in the log, ahead of any
                    // record a next holder of these rows appends.
                    db.locks.release_all(self.id, &mut self.held);
                }
                db.wal.commit_wait(end).map(|()| (ts, end))
            });
        match result {
            Ok((commit_ts, end)) => {
                // A store with a page log: the commit is acknowledged (and
                // made visible) only once the store's durable state covers
                // its record (PLOG-2), for recovery may not redo the
                // store's pages (REC-4).
                // A failure here is a device's: the outcome is unknown
                // until recovery, and the database fails with the locks
                // held (DB-4).
                let mut covered = u64::MAX;
                for space in &db.spaces {
                    let Some(page_log) = space.store.page_log() else {
                        continue;
                    };
                    if let Err(e) = page_log.transaction_ended(self.id, true, end, &*db.wal) {
                        return Err(db.fail(format!(
                            "space '{}': forcing the log sectors of transaction {}: {e}",
                            space.name, self.id
                        )));
                    }
                    if let Some(lsn) = page_log.durable_lsn() {
                        covered = covered.min(lsn);
                    }
                }
                // Under sync durability the log is durable past `end`; under
                // no-sync the commit is visible once appended.
                let visible_lsn = db.wal.flushed_lsn().min(covered).max(end);
                db.versions
                    .commits_durable_through(visible_lsn, Rt::now_ns_current());
                db.commits.fetch_add(1, Ordering::Relaxed);
                self.finish(Some(commit_ts));
                Ok(commit_ts)
            }
            // The commit could not be logged, or the log failed: the
            // outcome is unknown until recovery, so the database fails,
            // the locks stay held, waiters are woken with the error and
            // nothing else commits (DB-4).
            Err(e) => Err(db.fail(format!(
                "the commit of transaction {} could not be logged: {e}",
                self.id
            ))),
        }
    }

    /// Release what the transaction held; `commit_ts` if it committed.
    fn finish(&mut self, commit_ts: Option<u64>) {
        let db = &self.db;
        if let Some(segment) = self.segment.take() {
            let ended_at = commit_ts.unwrap_or_else(|| db.versions.next_ts().saturating_sub(1));
            db.rollback.release(&segment, self.id, ended_at);
        }
        // A transaction that wrote nothing releases its snapshot with its
        // end, under one acquisition of the versions' lock; the others
        // release it after their row locks.
        let read_only = commit_ts.is_none() && self.undo.is_empty() && self.last_lsn == 0;
        match (commit_ts, read_only) {
            (Some(_), _) => {}
            (None, true) => db.versions.end_read_only(self.id, self.snapshot_ts),
            (None, false) => db.versions.end_aborted(self.id),
        }
        db.locks.release_all(self.id, &mut self.held);
        if !read_only {
            db.versions.release_snapshot(self.snapshot_ts);
        }
    }

    /// Roll back every change, newest first, then release the locks.
    pub fn abort(mut self) -> Result<()> {
        self.check_active()?;
        self.rollback()
    }

    /// Undo every change, newest first. A rollback that cannot finish
    /// releases nothing: the database fails, and recovery at the next open
    /// finishes the undo (DB-4).
    fn rollback(&mut self) -> Result<()> {
        self.active = false;
        let db = self.db.clone();
        let undone = self.undo_all().map_err(|e| {
            db.fail(format!(
                "the rollback of transaction {} could not finish: {e}",
                self.id
            ))
        });
        undone?;
        db.aborts.fetch_add(1, Ordering::Relaxed);
        self.finish(None);
        for page_log in db.spaces.iter().filter_map(|s| s.store.page_log()) {
            // Nothing is forced for a rollback: this only forgets.
            let _ = page_log.transaction_ended(self.id, false, 0, &*db.wal);
        }
        Ok(())
    }

    fn undo_all(&mut self) -> Result<()> {
        let db = self.db.clone();
        while let Some(entry) = self.undo.last() {
            self.last_lsn = db.compensate(&entry.undo, self.id, self.last_lsn, entry.prev_lsn)?;
            self.undo.pop();
        }
        if self.last_lsn != 0 {
            db.wal.append(self.id, self.last_lsn, Body::Abort)?;
        }
        Ok(())
    }
}

/// A transaction's identity for the checks and before-images of a write
/// ([`Transaction::writer`]).
#[derive(Clone, Copy)]
struct Writer {
    id: u64,
    isolation: Isolation,
    snapshot_ts: u64,
}

impl Writer {
    /// MVCC-4, snapshot isolation's first-updater rule: refuse to
    /// overwrite a version committed after the snapshot.
    fn check_first_updater(self, db: &Inner, header: &VersionHeader) -> Result<()> {
        if self.isolation != Isolation::Snapshot {
            return Ok(());
        }
        let creator = header.txn_id().unwrap_or(0);
        if !db.versions.visible(creator, self.id, self.snapshot_ts) {
            return Err(Error::Serialization {
                txn: self.id,
                detail: format!(
                    "a row it changes was changed by transaction {creator}, which committed after its snapshot (timestamp {})",
                    self.snapshot_ts
                ),
            });
        }
        Ok(())
    }

    /// Append a version to the transaction's rollback segment (assigned at
    /// its first before-image); returns its pointer and a page it filled.
    fn keep_before_image(
        self,
        db: &Inner,
        segment: &mut Option<SegmentRef>,
        header: VersionHeader,
        row: &[u8],
    ) -> Result<(u64, Option<crate::page::PageId>)> {
        if segment.is_none() {
            *segment = Some(db.rollback.assign(self.id)?);
        }
        let segment = segment.as_ref().expect("assigned above");
        let reclaim = || Reclaim {
            oldest_snapshot: db.versions.oldest_snapshot(),
            now_ns: Rt::now_ns_current(),
            retention_ns: db.config.mvcc.retention_ns,
        };
        db.rollback.append(segment, self.id, header, row, &reclaim)
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        // Skipped only when the runtime ends the task because the run is
        // over; a transaction dropped by a real panic still rolls back and
        // releases its locks.
        let ending = Rt::is_ending_current();
        if self.active && !ending {
            let _ = self.rollback();
        }
    }
}

/// The column types of an index entry's key: the index's columns, then
/// the primary key's.
pub(super) fn index_entry_types(
    schema: &crate::row::Schema,
    def: &super::IndexDef,
) -> Vec<crate::row::Type> {
    let ty = |&c: &usize| schema.columns()[c].ty;
    def.columns.iter().chain(schema.key()).map(ty).collect()
}
