//! Streaming scans: [`Rows`] reads a key range of a table a chunk of
//! entries at a time, as of the transaction's snapshot. Between chunks it
//! holds no latch, only the next key to read from (SCAN-1), so a caller may stop
//! at any row at no cost, and a range of any size takes memory for one
//! chunk. [`TypedRows`] decodes a typed table's rows as it goes.

use std::collections::VecDeque;
use std::ops::Bound;

use flashlab_runtime::Rt;

use super::access::TreeRef;
use super::{IndexDef, Inner, Table, Transaction};
use crate::error::Result;
use crate::row::{Type, Value};

/// Entries read from the tree in one step (one latched descent).
pub const ROWS_CHUNK: usize = 64;

/// A tree entry: its key and its stored bytes.
type Entry = (Vec<u8>, Vec<u8>);

/// The visible rows of a key range, in key order: `(key, value)`.
pub struct Rows<'t> {
    txn: &'t mut Transaction,
    table: &'t Table,
    chunks: Chunks<(Vec<u8>, Vec<u8>)>,
    started: bool,
}

impl<'t> Rows<'t> {
    pub(super) fn new(
        txn: &'t mut Transaction,
        table: &'t Table,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> Rows<'t> {
        Rows {
            txn,
            table,
            chunks: Chunks::new(lower.map(<[u8]>::to_vec), upper.map(<[u8]>::to_vec)),
            started: false,
        }
    }
}

/// Where a stream stands in its tree: the key range left to read, the
/// rows read and not yet returned, and whether the range is read to its end.
struct Chunks<R> {
    from: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    ready: VecDeque<R>,
    exhausted: bool,
}

impl<R> Chunks<R> {
    fn new(from: Bound<Vec<u8>>, upper: Bound<Vec<u8>>) -> Chunks<R> {
        Chunks {
            from,
            upper,
            ready: VecDeque::new(),
            exhausted: false,
        }
    }

    /// The next chunk of `tree`'s entries in the range, in one latched
    /// descent; `None` while a row is ready or once the range is read.
    fn next_entries(&mut self, db: &Inner, tree: TreeRef) -> Result<Option<Vec<Entry>>> {
        if !self.ready.is_empty() || self.exhausted {
            return Ok(None);
        }
        let entries = db.tree_scan(
            tree,
            self.from.as_ref().map(Vec::as_slice),
            self.upper.as_ref().map(Vec::as_slice),
            ROWS_CHUNK,
        )?;
        self.exhausted = entries.len() < ROWS_CHUNK;
        Ok(Some(entries))
    }
}

/// A stream read a chunk at a time: what [`Rows`] and [`IndexRows`] share.
trait Chunked {
    type Row;
    fn chunks(&mut self) -> &mut Chunks<Self::Row>;
    /// Read chunks until one yields a row or the range ends.
    fn refill(&mut self) -> Result<()>;

    /// The next row: refill when none is ready; an error ends the stream
    /// after it is returned.
    fn next_row(&mut self) -> Option<Result<Self::Row>> {
        if self.chunks().ready.is_empty()
            && let Err(e) = self.refill()
        {
            self.chunks().exhausted = true;
            return Some(Err(e));
        }
        self.chunks().ready.pop_front().map(Ok)
    }
}

impl Chunked for Rows<'_> {
    type Row = (Vec<u8>, Vec<u8>);
    fn chunks(&mut self) -> &mut Chunks<Self::Row> {
        &mut self.chunks
    }

    /// Read chunks until one yields a visible row or the range ends.
    fn refill(&mut self) -> Result<()> {
        if !self.started {
            self.txn.check_active()?;
            self.txn.statement_snapshot();
            self.started = true;
        }
        let cost = self.txn.db.cpu.ns(crate::cpu_prices::Price::ScanRow);
        let tree = Transaction::tree(self.table);
        while let Some(entries) = self.chunks.next_entries(&self.txn.db, tree)? {
            for (key, stored) in entries {
                Rt::cpu_current(cost);
                self.chunks.from = Bound::Excluded(key.clone());
                if let Some(row) = self.txn.visible(stored)? {
                    self.chunks.ready.push_back((key, row));
                }
            }
        }
        Ok(())
    }
}

impl Iterator for Rows<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_row()
    }
}

/// The rows of a typed table's key range, decoded, in key order.
pub struct TypedRows<'t> {
    rows: Rows<'t>,
}

impl Iterator for TypedRows<'_> {
    type Item = Result<Vec<Value>>;

    fn next(&mut self) -> Option<Self::Item> {
        let (_, bytes) = match self.rows.next()? {
            Ok(entry) => entry,
            Err(e) => return Some(Err(e)),
        };
        Some(Transaction::schema(self.rows.table).and_then(|s| s.decode_row(&bytes)))
    }
}

/// A typed table's rows through one of its indexes, in index order.
pub struct IndexRows<'t> {
    txn: &'t mut Transaction,
    table: &'t Table,
    index: &'t IndexDef,
    /// The index key's column types, then the primary key's.
    types: Vec<Type>,
    chunks: Chunks<Vec<Value>>,
}

impl Chunked for IndexRows<'_> {
    type Row = Vec<Value>;
    fn chunks(&mut self) -> &mut Chunks<Self::Row> {
        &mut self.chunks
    }

    /// Read index chunks until one yields a row the snapshot sees.
    fn refill(&mut self) -> Result<()> {
        let schema = Transaction::schema(self.table)?;
        let tree = TreeRef::index(&self.table.def, self.index);
        while let Some(entries) = self.chunks.next_entries(&self.txn.db, tree)? {
            for (index_key, _) in entries {
                self.chunks.from = Bound::Excluded(index_key.clone());
                let values = crate::row::decode_key(&self.types, &index_key)?;
                let pk = crate::row::encode_key(&values[self.index.columns.len()..]);
                let stored = self.txn.db.tree_get(Transaction::tree(self.table), &pk)?;
                let Some(bytes) = stored.map(|s| self.txn.visible(s)).transpose()?.flatten() else {
                    continue;
                };
                let row = schema.decode_row(&bytes)?;
                // Index entries of replaced versions stay for older
                // snapshots: keep the row only if the version this snapshot
                // sees has this entry's index values.
                let own = schema.index_key(&row, &self.index.columns)?;
                if own == index_key[..index_key.len() - pk.len()] {
                    self.chunks.ready.push_back(row);
                }
            }
        }
        Ok(())
    }
}

impl Iterator for IndexRows<'_> {
    type Item = Result<Vec<Value>>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_row()
    }
}

impl Transaction {
    /// A typed table's rows whose `index` columns start with the `prefix`
    /// values, in index order, streamed (see the module documentation).
    pub fn index_rows<'t>(
        &'t mut self,
        table: &'t Table,
        index: &str,
        prefix: &[Value],
    ) -> Result<IndexRows<'t>> {
        self.check_active()?;
        self.statement_snapshot();
        let def = table.def.index(index)?;
        let schema = Transaction::schema(table)?;
        let types = super::txn::index_entry_types(schema, def);
        let start = crate::row::encode_key(prefix);
        let upper = crate::row::prefix_end(&start).map_or(Bound::Unbounded, Bound::Excluded);
        Ok(IndexRows {
            txn: self,
            table,
            index: def,
            types,
            chunks: Chunks::new(Bound::Included(start), upper),
        })
    }

    /// The rows with `lower <= key < upper` (as the bounds say), streamed;
    /// see the module documentation.
    pub fn range<'t>(
        &'t mut self,
        table: &'t Table,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> Rows<'t> {
        Rows::new(self, table, lower, upper)
    }

    /// The rows whose key starts with `prefix`, streamed.
    pub fn prefix<'t>(&'t mut self, table: &'t Table, prefix: &[u8]) -> Rows<'t> {
        let end = crate::row::prefix_end(prefix);
        let upper = match &end {
            Some(end) => Bound::Excluded(end.as_slice()),
            None => Bound::Unbounded,
        };
        Rows::new(self, table, Bound::Included(prefix), upper)
    }

    /// A typed table's rows whose key columns lie from `lower` on (the
    /// first key columns' values; empty: from the start), decoded and
    /// streamed in key order.
    pub fn rows_from<'t>(&'t mut self, table: &'t Table, lower: &[Value]) -> TypedRows<'t> {
        let start = crate::row::encode_key(lower);
        TypedRows {
            rows: Rows::new(self, table, Bound::Included(&start), Bound::Unbounded),
        }
    }
}
