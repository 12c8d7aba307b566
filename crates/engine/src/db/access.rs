//! Changing and reading trees: latch, mini-transaction, log.
//!
//! Every tree operation takes the tree's latch (DB-1: shared to read,
//! exclusive to change), runs the B+tree algorithm in a [`Mtr`] over the
//! tree's data space, and for changes logs one record: the logical undo
//! (key and before-image) and the physical redo the mini-transaction
//! computed. An operation that fails (a full space, a too-large entry)
//! leaves no trace: the mini-transaction's page copies are dropped and
//! nothing is logged or installed.
//!
//! No latch across I/O (DB-5): the mini-transaction runs without I/O
//! (MTR-8). When it meets a page that is not resident, or needs a frame
//! whose victim must be written back (and so the log forced), the
//! operation drops its copies and the latch, loads the page (or frees a
//! frame) with no latch held, and starts over. Readers of one tree
//! therefore overlap on its device, and a writer's miss does not stop the
//! tree's other users. A writer also makes room in the log buffer before
//! it latches (WAL-15), so its record's append never forces the log.

use std::ops::Bound;
use std::sync::Arc;

use flashlab_runtime::RwLatch;

use crate::btree::{AppendHint, BTree};
use crate::db::Inner;
use crate::db::catalog::{IndexDef, LatchSlot, TableDef};
use crate::error::Result;
use crate::mtr::{Logged, Miss, Mtr};
use crate::page::{PageNo, SpaceId};
use crate::wal::record::Undo;

/// Most entries one batch of [`Inner::tree_insert_batch`] inserts.
pub(crate) const BATCH_ROWS_MAX: usize = 1024;
/// A batch ends once it has written more pages than this (a leaf, the
/// leaves split off it, their parent and the space header page).
pub(crate) const BATCH_PAGES_MAX: usize = 16;

/// A tree of a data space, with its definition's latch slot if it has one
/// (DB-8).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TreeRef<'a> {
    pub space: SpaceId,
    pub root: PageNo,
    slot: Option<&'a LatchSlot>,
}

impl<'a> TreeRef<'a> {
    /// A tree found by its place alone: its latch is looked up in the
    /// latch table on every operation.
    pub fn at(space: SpaceId, root: PageNo) -> TreeRef<'static> {
        TreeRef {
            space,
            root,
            slot: None,
        }
    }

    /// A table's primary tree.
    pub fn table(def: &'a TableDef) -> TreeRef<'a> {
        TreeRef {
            space: def.space,
            root: def.root,
            slot: Some(&def.latch),
        }
    }

    /// A table's secondary index tree.
    pub fn index(def: &'a TableDef, index: &'a IndexDef) -> TreeRef<'a> {
        TreeRef {
            space: def.space,
            root: index.root,
            slot: Some(&index.latch),
        }
    }
}

/// A tree's latch: borrowed from its definition's slot, or looked up.
enum TreeLatchRef<'a> {
    Slot(&'a RwLatch),
    Table(Arc<RwLatch>),
}

impl std::ops::Deref for TreeLatchRef<'_> {
    type Target = RwLatch;
    fn deref(&self) -> &RwLatch {
        match self {
            TreeLatchRef::Slot(latch) => latch,
            TreeLatchRef::Table(latch) => latch,
        }
    }
}

/// Restarts of one tree operation after misses before it runs with I/O
/// allowed under its latch (DB-5): bounds the work when the pool is too
/// small for the pages one operation needs at once.
pub(crate) const RESTARTS_MAX: u32 = 16;

/// Take the mini-transaction out of the closure's borrow to commit it
/// (the caller's copy is left empty and dropped).
fn take_mtr<'a>(mtr: &mut Mtr<'a>) -> Mtr<'a> {
    mtr.take()
}

/// How [`Inner::latched`] holds a tree's latch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Latching {
    Shared,
    Exclusive,
    /// Shared, for a change of one leaf under that leaf's latch (MTR-12).
    OneLeaf,
}

/// Who a change is logged for.
pub(crate) struct LogCtx {
    pub txn: u64,
    pub prev_lsn: u64,
}

impl Inner {
    /// `tree`'s latch: from its definition's slot without a lock when it
    /// has one filled by this database (DB-8), else from the latch table.
    fn tree_latch<'t>(&self, tree: &TreeRef<'t>) -> TreeLatchRef<'t> {
        let from_slot = tree
            .slot
            .and_then(|slot| slot.get(self.instance, || self.latch(tree.space, tree.root)));
        match from_slot {
            Some(latch) => TreeLatchRef::Slot(latch),
            None => TreeLatchRef::Table(self.latch(tree.space, tree.root)),
        }
    }

    /// Make a system operation durable: force the log to the end of its
    /// record, and tell every store with a page log, so that the operation
    /// is acknowledged only once each store's durable state covers it
    /// (PLOG-2, REC-4). Nothing to do when it changed nothing (`None`).
    pub(crate) fn make_durable(&self, logged: Option<Logged>) -> Result<()> {
        let Some(logged) = logged else {
            return Ok(());
        };
        self.wal.flush_to(logged.end_lsn)?;
        for page_log in self.spaces.iter().filter_map(|s| s.store.page_log()) {
            page_log.transaction_ended(0, true, logged.end_lsn, &*self.wal)?;
        }
        Ok(())
    }

    /// Run `op` holding the exclusive latch of every tree of `trees`,
    /// taken in the order given (a table before its indexes: nothing else
    /// holds two tree latches at once).
    pub(crate) fn with_trees_exclusive<R>(
        &self,
        trees: &[TreeRef<'_>],
        op: impl FnOnce() -> R,
    ) -> R {
        let latches: Vec<_> = trees.iter().map(|tree| self.tree_latch(tree)).collect();
        let _guards: Vec<_> = latches.iter().map(|latch| latch.write()).collect();
        op()
    }

    pub(crate) fn mtr(&self, space: SpaceId) -> Result<Mtr<'_>> {
        let s = self.space(space)?;
        let mtr = Mtr::new(&s.pool, s.id, &s.name, s.capacity_pages, &s.allocation)
            .keeping_before_images(s.store.page_log().is_some());
        Ok(if s.store.page_log().is_some() {
            mtr.with_gated_store(&s.store)
        } else {
            mtr
        })
    }

    /// Run `op` on a fresh mini-transaction of `tree`'s space under the
    /// tree's latch (shared, exclusive, or shared for a one-leaf change)
    /// without I/O; on a miss, load what was missed with the latch released
    /// and start over (DB-5); a one-leaf change that needs more starts over
    /// under the exclusive latch (DB-6). After [`RESTARTS_MAX`] restarts the
    /// operation runs with I/O allowed, so it always finishes.
    fn latched<R>(
        &self,
        tree: TreeRef,
        mut mode: Latching,
        mut op: impl FnMut(&mut Mtr) -> Result<R>,
    ) -> Result<R> {
        let latch = self.tree_latch(&tree);
        let mut restarts = 0;
        loop {
            if !matches!(mode, Latching::Shared) {
                self.wal.make_buffer_room()?; // WAL-15: before any latch
            }
            let mut mtr = self.mtr(tree.space)?;
            mtr.set_no_io(restarts < RESTARTS_MAX);
            let result = match mode {
                Latching::Exclusive => {
                    let _guard = latch.write();
                    op(&mut mtr)
                }
                Latching::Shared => {
                    let _guard = latch.read();
                    op(&mut mtr)
                }
                Latching::OneLeaf => {
                    mtr.set_one_leaf(&self.leaf_latches);
                    let _guard = latch.read();
                    op(&mut mtr)
                }
            };
            match (result, mtr.missed()) {
                (Err(_), Some(Miss::Latch)) => {
                    drop(mtr);
                    mode = Latching::Exclusive;
                    self.tree_escalations
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                (Err(_), Some(miss)) => {
                    drop(mtr); // releases the allocation latch, if taken
                    let space = self.space(tree.space)?;
                    Mtr::load_missed(&space.pool, tree.space, miss)?;
                    restarts += 1;
                    self.tree_restarts
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                (result, _) => return result,
            }
        }
    }

    /// Read one key.
    pub(crate) fn tree_get(&self, tree: TreeRef, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.latched(tree, Latching::Shared, |mtr| {
            BTree::open(tree.root).lookup(mtr, key)
        })
    }

    /// Collect the entries in a range, at most `limit` of them.
    pub(crate) fn tree_scan(
        &self,
        tree: TreeRef,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.latched(tree, Latching::Shared, |mtr| {
            let mut out = Vec::new();
            BTree::open(tree.root).scan(mtr, lower, upper, |k, v| {
                out.push((k.to_vec(), v.to_vec()));
                Ok(out.len() < limit)
            })?;
            Ok(out)
        })
    }

    /// Insert or replace `key`; returns the previous value and the record.
    pub(crate) fn tree_put(
        &self,
        tree: TreeRef,
        key: &[u8],
        value: &[u8],
        ctx: &LogCtx,
    ) -> Result<(Option<Vec<u8>>, Option<Logged>)> {
        self.tree_write(tree, key, ctx, false, |_| Ok(Some(value.to_vec())))
    }

    /// Delete `key` as a system operation (no transaction, no undo);
    /// returns whether it was present and the record.
    pub(crate) fn tree_delete_system(
        &self,
        tree: TreeRef,
        key: &[u8],
    ) -> Result<(bool, Option<Logged>)> {
        let btree = BTree::open(tree.root);
        self.latched(tree, Latching::Exclusive, |mtr| {
            mtr.set_no_io(false);
            let present = btree.delete(mtr, key)?.is_some();
            let logged = take_mtr(mtr).commit(&self.wal, 0, 0, None)?;
            Ok((present, logged))
        })
    }

    /// Read `key` and replace it with what `decide` makes of its current
    /// value, in one mini-transaction under the tree's latch (one descent,
    /// one set of page copies). `decide` returning `None` changes nothing.
    /// Returns the value replaced and the record.
    ///
    /// `row_locked`: the caller holds `key`'s row lock exclusively, so no
    /// one else changes the key's value. The change is then first tried as
    /// a one-leaf change under the tree's shared latch (DB-6, MTR-12); if it
    /// needs more (a split), it starts over under the exclusive latch with
    /// the value `decide` already made (`decide` runs once: it may have
    /// appended a before-image), and the row lock keeps the current value
    /// it was made from.
    pub(crate) fn tree_write(
        &self,
        tree: TreeRef,
        key: &[u8],
        ctx: &LogCtx,
        row_locked: bool,
        decide: impl FnOnce(Option<&[u8]>) -> Result<Option<Vec<u8>>>,
    ) -> Result<(Option<Vec<u8>>, Option<Logged>)> {
        let btree = BTree::open(tree.root);
        let mut decide = Some(decide);
        // What `decide` made, once it has run: the current value it saw and
        // the value to store.
        let mut decided: Option<(Option<Vec<u8>>, Vec<u8>)> = None;
        let mode = match row_locked {
            true => Latching::OneLeaf,
            false => Latching::Exclusive,
        };
        self.latched(tree, mode, |mtr| {
            // One descent: the value is read in the leaf it found, and the
            // write goes to that leaf, under the latch that keeps the
            // tree's structure (a split escalates and runs this again).
            let mut at = btree.seek(mtr, key)?;
            let current = at.take_value();
            let (leaf, seen_lsn) = (at.leaf(), at.leaf_lsn());
            match &decided {
                // DB-6: the row lock kept the value `decide` saw.
                Some((seen, _)) => assert_eq!(
                    seen, &current,
                    "DB-6: a row-locked key changed between a one-leaf attempt and its retry"
                ),
                None => {
                    let decide = decide.take().expect("decide runs once");
                    let Some(stored) = decide(current.as_deref())? else {
                        return Ok((current, None));
                    };
                    decided = Some((current, stored));
                }
            }
            let (seen, stored) = decided.as_ref().expect("decided above");
            // `decide` has run and may have had effects (a before-image in
            // the rollback segment): no restart from here on. The pages on
            // the path were visited in place, not copied: a leaf or a
            // parent evicted since its visit, or a split's new page, may
            // still need I/O (DB-5).
            mtr.set_no_io(false);
            let before = btree.put_at(mtr, at, key, stored)?;
            // A leaf evicted since the seek and read back older: the device
            // lost a write (MTR-14), damage and not a broken DB-1.
            if &before != seen {
                let now_lsn = crate::page::lsn(crate::mtr::PageAccess::read(mtr, leaf)?);
                if now_lsn < seen_lsn {
                    return Err(mtr.lost_write(leaf, seen_lsn, now_lsn));
                }
            }
            // DB-1 (DB-6 in one-leaf mode): the latch, or the row lock, kept
            // the key's value from the read to the write under the leaf's
            // latch.
            assert_eq!(
                &before, seen,
                "DB-1: the key changed between its read and its write"
            );
            let undo = (ctx.txn != 0).then(|| Undo {
                space: tree.space,
                root: tree.root,
                key: key.to_vec(),
                before: before.clone(),
            });
            let logged = take_mtr(mtr).commit(&self.wal, ctx.txn, ctx.prev_lsn, undo)?;
            Ok((before, logged))
        })
    }

    /// Insert the entries of `rows` whose keys are absent, in order, in one
    /// mini-transaction under the tree's latch (the bulk-load path): one
    /// descent per entry over pages already copied, one diff and one
    /// install per page for the whole batch instead of one per entry. Stops
    /// before the first key that is present, once it has written more than
    /// [`BATCH_PAGES_MAX`] pages, or at [`BATCH_ROWS_MAX`] entries. Returns how many were inserted
    /// and the LSN of each one's record (see [`Mtr::commit_many`]).
    pub(crate) fn tree_insert_batch(
        &self,
        tree: TreeRef,
        rows: &[(Vec<u8>, Vec<u8>)],
        ctx: &LogCtx,
    ) -> std::result::Result<(usize, Vec<u64>), (Vec<u64>, crate::error::Error)> {
        // The bulk-load path keeps the exclusive latch across its I/O (as
        // `latched` does after its restarts, DB-5): a load is the tree's only
        // writer, and a batch's pages are mostly new ones at the right edge.
        self.wal.make_buffer_room().map_err(|e| (Vec::new(), e))?; // WAL-15
        let latch = self.tree_latch(&tree);
        let _guard = latch.write();
        let mut mtr = self.mtr(tree.space).map_err(|e| (Vec::new(), e))?;
        let btree = BTree::open(tree.root);
        let mut undos = Vec::new();
        let mut hint = AppendHint::default();
        for (key, value) in rows.iter().take(BATCH_ROWS_MAX) {
            let inserted = btree
                .insert_absent_hinted(&mut mtr, key, value, &mut hint)
                .map_err(|e| (Vec::new(), e))?;
            if !inserted {
                break;
            }
            undos.push(Undo {
                space: tree.space,
                root: tree.root,
                key: key.clone(),
                before: None,
            });
            if mtr.pages_written() > BATCH_PAGES_MAX {
                break;
            }
        }
        if undos.is_empty() {
            return Ok((0, Vec::new()));
        }
        let n = undos.len();
        let lsns = mtr.commit_many(&self.wal, ctx.txn, ctx.prev_lsn, undos)?;
        Ok((n, lsns))
    }

    /// Apply one undo step and log it as a compensation record whose
    /// `undo_next` is `undo_next`. Returns the compensation's LSN.
    pub(crate) fn compensate(
        &self,
        undo: &Undo,
        txn: u64,
        prev_lsn: u64,
        undo_next: u64,
    ) -> Result<u64> {
        let tree = BTree::open(undo.root);
        let at = TreeRef::at(undo.space, undo.root);
        self.latched(at, Latching::Exclusive, |mtr| {
            mtr.set_for_undo();
            match &undo.before {
                Some(before) => {
                    tree.insert(mtr, &undo.key, before)?;
                }
                None => {
                    tree.delete(mtr, &undo.key)?;
                }
            }
            Ok(take_mtr(mtr)
                .commit_compensation(&self.wal, txn, prev_lsn, undo_next)?
                .lsn)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mtr::PageAccess;
    use crate::{Database, DbConfig, TableSpec};
    use flashlab_runtime::{Sim, SimConfig};

    /// MTR-12: a one-leaf mini-transaction reads its leaf again under the
    /// leaf's latch. Here it holds a copy of the leaf, another change to
    /// the same leaf is installed, and only then does it write the leaf:
    /// the other change must survive its install. (Keeping the copy read
    /// before the latch loses it, as a mutation of `latch_the_leaf` shows.)
    #[test]
    fn a_one_leaf_change_keeps_a_change_installed_after_its_copy_was_read() {
        Sim::run(SimConfig::default(), |_| {
            let db =
                Database::open(&DbConfig::simple("memory", "memory", 4096, 64 * 4096)).unwrap();
            let t = db.create_table(TableSpec::bytes("t")).unwrap();
            let mut txn = db.begin().unwrap();
            txn.put(&t, b"k1", b"one").unwrap();
            txn.put(&t, b"k2", b"two").unwrap();
            txn.commit().unwrap();
            let tree = TreeRef::table(&t.def);
            let btree = BTree::open(tree.root);
            let inner = &db.inner;
            let mut mtr = inner.mtr(tree.space).unwrap();
            mtr.set_one_leaf(&inner.leaf_latches);
            // A copy of the leaf (the root of this one-page tree).
            mtr.read(tree.root).unwrap();
            // Another change to the same leaf, installed meanwhile.
            let mut other = db.begin().unwrap();
            other.put(&t, b"k2", b"TWO").unwrap();
            other.commit().unwrap();
            // Now the first one writes the leaf and installs.
            btree.insert(&mut mtr, b"k1", b"raw").unwrap();
            mtr.commit(&inner.wal, 0, 0, None).unwrap();
            let mut check = db.begin().unwrap();
            assert_eq!(check.get(&t, b"k2").unwrap().as_deref(), Some(&b"TWO"[..]));
            check.commit().unwrap();
            let mut read = inner.mtr(tree.space).unwrap();
            assert_eq!(
                btree.get(&mut read, b"k1").unwrap().as_deref(),
                Some(&b"raw"[..])
            );
        })
        .unwrap()
        .0
        .finished()
        .unwrap();
    }

    /// DB-8: a statement on a table takes the same latch as an operation
    /// that finds the tree by its place (a compensation, recovery), and a
    /// table handle kept from a database that was closed is served by the
    /// open database's latch table, not by the latch it kept.
    #[test]
    fn a_table_handle_takes_the_latch_of_the_database_it_is_used_with() {
        Sim::run(SimConfig::default(), |_| {
            let config = DbConfig::simple("memory", "memory", 4096, 64 * 4096);
            let db = Database::open(&config).unwrap();
            let t = db.create_table(TableSpec::bytes("t")).unwrap();
            let mut txn = db.begin().unwrap();
            txn.put(&t, b"k", b"v").unwrap();
            txn.commit().unwrap();
            let same = |inner: &Inner, tree: TreeRef<'_>| {
                let by_place = inner.latch(tree.space, tree.root);
                std::ptr::eq(&*inner.tree_latch(&tree), &*by_place)
            };
            assert!(same(&db.inner, TreeRef::table(&t.def)));
            assert!(matches!(
                db.inner.tree_latch(&TreeRef::table(&t.def)),
                TreeLatchRef::Slot(_)
            ));
            let other = Database::open(&config).unwrap();
            assert!(same(&other.inner, TreeRef::table(&t.def)));
            assert!(matches!(
                other.inner.tree_latch(&TreeRef::table(&t.def)),
                TreeLatchRef::Table(_)
            ));
        })
        .unwrap()
        .0
        .finished()
        .unwrap();
    }
}
