//! Transactions: row locks, logged changes, commit and rollback.
//!
//! A [`Transaction`] reads with shared row locks and writes with exclusive
//! ones, held to the end (strict two-phase locking; wait-die prevents
//! deadlocks and makes the loser's call fail with a retryable error). Every
//! change is one log record chained to the transaction's previous one
//! (DB-2). Commit appends a commit record and waits for the log as the
//! durability level says (DB-3); rollback undoes the changes newest first,
//! logging each undo step as a compensation record, then appends an abort
//! record. A transaction dropped while still active rolls back.
//!
//! Stored values carry the MVCC version header (`row::StoredRow`): for now
//! the header records the writing transaction; the MVCC layer will fill in
//! commit timestamps and version chains.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use flashlab_runtime::Rt;

use crate::db::access::{LogCtx, TreeRef};
use crate::db::{Inner, Table};
use crate::error::{Error, Result};
use crate::lock::{LockKey, LockMode};
use crate::row::{StoredRow, Value, VersionHeader, prefix_end};
use crate::wal::record::{Body, Undo};

/// Most rows one scan returns.
pub const SCAN_ROWS_MAX: usize = 10_000_000;

/// One logged change not yet compensated.
struct UndoEntry {
    prev_lsn: u64,
    undo: Undo,
}

/// A transaction. Commit or abort it; dropping it aborts.
pub struct Transaction {
    db: Arc<Inner>,
    id: u64,
    last_lsn: u64,
    undo: Vec<UndoEntry>,
    active: bool,
}

impl Transaction {
    pub(crate) fn new(db: Arc<Inner>, id: u64) -> Transaction {
        Transaction {
            db,
            id,
            last_lsn: 0,
            undo: Vec::new(),
            active: true,
        }
    }

    /// The transaction's id (also its age for wait-die: smaller is older).
    pub fn id(&self) -> u64 {
        self.id
    }

    fn check_active(&self) -> Result<()> {
        if !self.active {
            return Err(Error::Invalid(format!("transaction {} has ended", self.id)));
        }
        Ok(())
    }

    fn lock(&self, table: &Table, key: &[u8], mode: LockMode) -> Result<()> {
        let lock_key: LockKey = (table.def.id, key.to_vec());
        self.db.locks.lock(self.id, &lock_key, mode)
    }

    fn tree(table: &Table) -> TreeRef {
        TreeRef {
            space: table.def.space,
            root: table.def.root,
        }
    }

    /// Read the value under `key`.
    pub fn get(&mut self, table: &Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_active()?;
        self.lock(table, key, LockMode::Shared)?;
        Rt::current().cpu(self.db.cpu().get_ns);
        let stored = self.db.tree_get(Self::tree(table), key)?;
        stored
            .map(|bytes| StoredRow::decode(&bytes).map(|row| row.row))
            .transpose()
    }

    /// Insert or replace the value under `key`.
    pub fn put(&mut self, table: &Table, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_active()?;
        if table.def.schema.is_some() {
            return Err(Error::Invalid(format!(
                "table '{}' is typed: use put_row",
                table.def.name
            )));
        }
        self.write(table, key, Some(value)).map(|_| ())
    }

    /// Read-modify-write of one row as one statement (an SQL `UPDATE ...
    /// SET x = x + d`): exclusive lock first, then the new value computed
    /// from the old one. Charges one statement of CPU. Returns the new
    /// value, or `None` (changing nothing) if the key does not exist.
    pub fn update(
        &mut self,
        table: &Table,
        key: &[u8],
        change: impl FnOnce(&[u8]) -> Vec<u8>,
    ) -> Result<Option<Vec<u8>>> {
        self.check_active()?;
        if table.def.schema.is_some() {
            return Err(Error::Invalid(format!(
                "table '{}' is typed: use update_row",
                table.def.name
            )));
        }
        self.lock(table, key, LockMode::Exclusive)?;
        let Some(stored) = self.db.tree_get(Self::tree(table), key)? else {
            return Ok(None);
        };
        let new = change(&StoredRow::decode(&stored)?.row);
        self.write(table, key, Some(&new))?;
        Ok(Some(new))
    }

    /// Delete `key`; true if it existed.
    pub fn delete(&mut self, table: &Table, key: &[u8]) -> Result<bool> {
        self.check_active()?;
        if table.def.schema.is_some() {
            return Err(Error::Invalid(format!(
                "table '{}' is typed: use delete_row",
                table.def.name
            )));
        }
        Ok(self.write(table, key, None)?.is_some())
    }

    /// Lock, then change the primary tree; returns the old stored value.
    fn write(
        &mut self,
        table: &Table,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<Option<Vec<u8>>> {
        self.lock(table, key, LockMode::Exclusive)?;
        self.db.check_log()?;
        Rt::current().cpu(self.db.cpu().put_ns);
        let tree = Self::tree(table);
        let before = match value {
            Some(value) => {
                let stored = StoredRow {
                    header: VersionHeader::uncommitted(self.id, 0),
                    row: value.to_vec(),
                }
                .encode();
                self.tree_put(tree, key, &stored)?
            }
            None => self.tree_delete(tree, key)?,
        };
        before
            .map(|bytes| StoredRow::decode(&bytes).map(|row| row.row))
            .transpose()
    }

    fn tree_put(&mut self, tree: TreeRef, key: &[u8], stored: &[u8]) -> Result<Option<Vec<u8>>> {
        let ctx = self.ctx();
        let (before, logged) = self.db.tree_put(tree, key, stored, &ctx)?;
        if let Some(logged) = logged {
            self.logged(logged.lsn, tree, key, before.clone());
        }
        Ok(before)
    }

    fn tree_delete(&mut self, tree: TreeRef, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let ctx = self.ctx();
        let (before, logged) = self.db.tree_delete(tree, key, &ctx)?;
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

    /// Record a logged change in the undo list and the active table (DB-2).
    fn logged(&mut self, lsn: u64, tree: TreeRef, key: &[u8], before: Option<Vec<u8>>) {
        debug_assert!(lsn > self.last_lsn, "DB-2: records chain forward");
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

    /// Entries with `lower <= key < upper`, in key order (each locked shared).
    pub fn scan(
        &mut self,
        table: &Table,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.check_active()?;
        let entries = self
            .db
            .tree_scan(Self::tree(table), lower, upper, SCAN_ROWS_MAX)?;
        let rt = Rt::current();
        let mut out = Vec::with_capacity(entries.len());
        for (key, _) in entries {
            self.lock(table, &key, LockMode::Shared)?;
            rt.cpu(self.db.cpu().scan_row_ns);
            // Re-read under the lock: the scan itself took no locks.
            if let Some(bytes) = self.db.tree_get(Self::tree(table), &key)? {
                out.push((key, StoredRow::decode(&bytes)?.row));
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

    // ---------------------------------------------------------- typed rows

    /// Insert or replace a typed row, maintaining the table's indexes.
    pub fn put_row(&mut self, table: &Table, row: &[Value]) -> Result<()> {
        self.check_active()?;
        let schema = table.def.schema.as_ref().ok_or_else(|| {
            Error::Invalid(format!("table '{}' has no schema: use put", table.def.name))
        })?;
        let key = schema.primary_key(row)?;
        let encoded = schema.encode_row(row)?;
        let before = self.write(table, &key, Some(&encoded))?;
        let old_row = before.map(|b| schema.decode_row(&b)).transpose()?;
        self.update_indexes(table, &key, old_row.as_deref(), Some(row))
    }

    /// Read-modify-write of one typed row as one statement (see
    /// [`Transaction::update`]); returns the new row, or `None` if there is
    /// no row with that key.
    pub fn update_row(
        &mut self,
        table: &Table,
        key: &[Value],
        change: impl FnOnce(&mut Vec<Value>),
    ) -> Result<Option<Vec<Value>>> {
        self.check_active()?;
        let schema = table.def.schema.as_ref().ok_or_else(|| {
            Error::Invalid(format!(
                "table '{}' has no schema: use update",
                table.def.name
            ))
        })?;
        let key = crate::row::encode_key(key);
        self.lock(table, &key, LockMode::Exclusive)?;
        let Some(stored) = self.db.tree_get(Self::tree(table), &key)? else {
            return Ok(None);
        };
        let old = schema.decode_row(&StoredRow::decode(&stored)?.row)?;
        let mut new = old.clone();
        change(&mut new);
        if schema.primary_key(&new)? != key {
            return Err(Error::Invalid(
                "update_row may not change the primary key".into(),
            ));
        }
        let encoded = schema.encode_row(&new)?;
        self.write(table, &key, Some(&encoded))?;
        self.update_indexes(table, &key, Some(&old), Some(&new))?;
        Ok(Some(new))
    }

    /// Read a typed row by its primary key values.
    pub fn get_row(&mut self, table: &Table, key: &[Value]) -> Result<Option<Vec<Value>>> {
        let schema = table.def.schema.as_ref().ok_or_else(|| {
            Error::Invalid(format!("table '{}' has no schema: use get", table.def.name))
        })?;
        let key = crate::row::encode_key(key);
        self.get(table, &key)?
            .map(|bytes| schema.decode_row(&bytes))
            .transpose()
    }

    /// Delete a typed row by its primary key values; true if it existed.
    pub fn delete_row(&mut self, table: &Table, key: &[Value]) -> Result<bool> {
        self.check_active()?;
        let schema = table.def.schema.as_ref().ok_or_else(|| {
            Error::Invalid(format!(
                "table '{}' has no schema: use delete",
                table.def.name
            ))
        })?;
        let key = crate::row::encode_key(key);
        let before = self.write(table, &key, None)?;
        let Some(bytes) = before else {
            return Ok(false);
        };
        let old_row = schema.decode_row(&bytes)?;
        self.update_indexes(table, &key, Some(&old_row), None)?;
        Ok(true)
    }

    /// Rows whose index columns start with `prefix` values, in index order.
    pub fn index_scan(
        &mut self,
        table: &Table,
        index: &str,
        prefix: &[Value],
    ) -> Result<Vec<Vec<Value>>> {
        self.check_active()?;
        let def = table.def.index(index)?;
        let schema = table
            .def
            .schema
            .as_ref()
            .ok_or_else(|| Error::Invalid("index on an untyped table".into()))?;
        let tree = TreeRef {
            space: table.def.space,
            root: def.root,
        };
        let start = crate::row::encode_key(prefix);
        let end = prefix_end(&start);
        let upper = match &end {
            Some(end) => Bound::Excluded(end.as_slice()),
            None => Bound::Unbounded,
        };
        let entries = self
            .db
            .tree_scan(tree, Bound::Included(&start), upper, SCAN_ROWS_MAX)?;
        let key_len = def.columns.len();
        let mut rows = Vec::new();
        for (index_key, _) in entries {
            let mut types: Vec<_> = def
                .columns
                .iter()
                .map(|&c| schema.columns()[c].ty)
                .collect();
            types.extend(schema.key().iter().map(|&c| schema.columns()[c].ty));
            let values = crate::row::decode_key(&types, &index_key)?;
            let pk = crate::row::encode_key(&values[key_len..]);
            if let Some(bytes) = self.get(table, &pk)? {
                rows.push(schema.decode_row(&bytes)?);
            }
        }
        Ok(rows)
    }

    fn update_indexes(
        &mut self,
        table: &Table,
        pk: &[u8],
        old: Option<&[Value]>,
        new: Option<&[Value]>,
    ) -> Result<()> {
        let Some(schema) = table.def.schema.as_ref() else {
            return Ok(());
        };
        for index in &table.def.indexes {
            let tree = TreeRef {
                space: table.def.space,
                root: index.root,
            };
            let key_of = |row: &[Value]| -> Result<Vec<u8>> {
                let mut key = schema.index_key(row, &index.columns)?;
                key.extend_from_slice(pk);
                Ok(key)
            };
            let old_key = old.map(key_of).transpose()?;
            let new_key = new.map(key_of).transpose()?;
            if old_key == new_key {
                continue;
            }
            if let Some(old_key) = old_key {
                self.tree_delete(tree, &old_key)?;
            }
            if let Some(new_key) = new_key {
                self.tree_put(tree, &new_key, &[])?;
            }
        }
        Ok(())
    }

    // ---------------------------------------------------------- commit

    /// Commit: append the commit record, wait for the log (DB-3), release
    /// the locks.
    pub fn commit(mut self) -> Result<()> {
        self.check_active()?;
        self.active = false;
        let db = self.db.clone();
        Rt::current().cpu(db.cpu().commit_ns);
        if self.undo.is_empty() {
            db.locks.release_all(self.id);
            return Ok(());
        }
        let commit_ts = db.next_commit_ts.fetch_add(1, Ordering::SeqCst);
        let result = db
            .wal
            .append(self.id, self.last_lsn, Body::Commit { commit_ts })
            .and_then(|(_, end)| db.wal.commit_wait(end));
        match result {
            Ok(()) => {
                db.commits.fetch_add(1, Ordering::Relaxed);
                db.locks.release_all(self.id);
                Ok(())
            }
            // The log failed: the outcome is unknown until recovery, so the
            // locks stay held and nothing else commits (DB-4).
            Err(e) => Err(e),
        }
    }

    /// Roll back every change, newest first, then release the locks.
    pub fn abort(mut self) -> Result<()> {
        self.check_active()?;
        self.rollback()
    }

    fn rollback(&mut self) -> Result<()> {
        self.active = false;
        let db = self.db.clone();
        while let Some(entry) = self.undo.pop() {
            self.last_lsn = db.compensate(&entry.undo, self.id, self.last_lsn, entry.prev_lsn)?;
        }
        if self.last_lsn != 0 {
            db.wal.append(self.id, self.last_lsn, Body::Abort)?;
        }
        db.aborts.fetch_add(1, Ordering::Relaxed);
        db.locks.release_all(self.id);
        Ok(())
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if self.active && !std::thread::panicking() {
            let _ = self.rollback();
        }
    }
}
