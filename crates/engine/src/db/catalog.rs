//! The catalog: which tables exist, where their trees are, their schemas.
//!
//! The catalog is itself a B+tree, in data space 0 with its root at page 1
//! ([`CATALOG_ROOT`]). Each entry maps `b"table/" + name` to a JSON-encoded
//! [`TableDef`]. Creating a table is a system operation: its pages and
//! catalog entry are logged and forced at once, and it cannot be rolled
//! back (DDL is not transactional in flashlab).

use std::sync::{Arc, OnceLock};

use flashlab_runtime::RwLatch;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::page::{PageNo, SpaceId};
use crate::row::Schema;

/// Root page of the catalog tree in data space 0.
pub const CATALOG_ROOT: PageNo = 1;
/// Key prefix of table entries.
pub const TABLE_PREFIX: &[u8] = b"table/";
/// Key prefix of the marks of bulk loads under way (`db::bulk`, BULK-5):
/// `load/<table name>`, an empty value.
pub const LOAD_PREFIX: &[u8] = b"load/";
/// Longest table or index name.
pub const NAME_BYTES_MAX: usize = 128;
/// Most secondary indexes per table.
pub const INDEXES_MAX: usize = 8;

/// A tree's latch, kept with the definition of the tree once a database
/// has handed it out, so that a statement finds it without the latch
/// table's lock (DB-8). Not part of the definition: it compares equal
/// whatever it holds, is never serialized, and names the database that
/// filled it, so a definition used with another database falls back to
/// that database's latch table.
#[derive(Clone, Default)]
pub(crate) struct LatchSlot(OnceLock<(u64, Arc<RwLatch>)>);

impl LatchSlot {
    /// The latch of database `instance`, filled by `latch` on first use;
    /// `None` if the slot holds another database's latch.
    pub(crate) fn get(
        &self,
        instance: u64,
        latch: impl FnOnce() -> Arc<RwLatch>,
    ) -> Option<&RwLatch> {
        let (owner, latch) = self.0.get_or_init(|| (instance, latch()));
        (*owner == instance).then_some(&**latch)
    }
}

impl PartialEq for LatchSlot {
    fn eq(&self, _other: &LatchSlot) -> bool {
        true
    }
}

impl std::fmt::Debug for LatchSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LatchSlot")
    }
}

/// A secondary index: key = index columns + primary key, value empty.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexDef {
    pub name: String,
    /// Column positions in the table's schema.
    pub columns: Vec<usize>,
    pub root: PageNo,
    /// The index tree's latch (DB-8).
    #[serde(skip)]
    pub(crate) latch: LatchSlot,
}

/// A table as the catalog records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableDef {
    pub id: u32,
    pub name: String,
    /// The data space holding its trees.
    pub space: SpaceId,
    pub root: PageNo,
    /// Typed tables have a schema; byte tables store raw keys and values.
    pub schema: Option<Schema>,
    pub indexes: Vec<IndexDef>,
    /// The primary tree's latch (DB-8).
    #[serde(skip)]
    pub(crate) latch: LatchSlot,
}

impl TableDef {
    pub fn key(&self) -> Vec<u8> {
        table_key(&self.name)
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("table definitions serialize")
    }

    pub fn decode(bytes: &[u8]) -> Result<TableDef> {
        let def: TableDef = serde_json::from_slice(bytes)
            .map_err(|e| Error::malformed("catalog entry", e.to_string()))?;
        let columns = def.schema.as_ref().map_or(0, |s| s.columns().len());
        for index in &def.indexes {
            if index.columns.iter().any(|&c| c >= columns) {
                return Err(Error::malformed(
                    "catalog entry",
                    format!(
                        "index '{}' of table '{}' names a column the schema lacks",
                        index.name, def.name
                    ),
                ));
            }
        }
        Ok(def)
    }

    /// The index called `name`.
    pub fn index(&self, name: &str) -> Result<&IndexDef> {
        self.indexes
            .iter()
            .find(|i| i.name == name)
            .ok_or_else(|| Error::Catalog(format!("table '{}' has no index '{name}'", self.name)))
    }
}

/// The catalog key of the mark of a bulk load into table `name`.
pub fn load_key(name: &str) -> Vec<u8> {
    let mut key = LOAD_PREFIX.to_vec();
    key.extend_from_slice(name.as_bytes());
    key
}

/// The catalog key of a table.
pub fn table_key(name: &str) -> Vec<u8> {
    let mut key = TABLE_PREFIX.to_vec();
    key.extend_from_slice(name.as_bytes());
    key
}

/// Check a table or index name.
pub fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > NAME_BYTES_MAX || name.chars().any(|c| c.is_control()) {
        return Err(Error::Catalog(format!(
            "name '{name}' must be 1 to {NAME_BYTES_MAX} bytes without control characters"
        )));
    }
    Ok(())
}

/// What `create_table` needs to know.
#[derive(Clone, Debug)]
pub struct TableSpec {
    pub name: String,
    /// The data space (by name) to put it in; the first space if `None`.
    pub space: Option<String>,
    pub schema: Option<Schema>,
    /// Secondary indexes: (name, column names).
    pub indexes: Vec<(String, Vec<String>)>,
}

impl TableSpec {
    /// A table of raw byte keys and values.
    pub fn bytes(name: &str) -> TableSpec {
        TableSpec {
            name: name.to_string(),
            space: None,
            schema: None,
            indexes: Vec::new(),
        }
    }

    /// A typed table.
    pub fn typed(name: &str, schema: Schema) -> TableSpec {
        TableSpec {
            name: name.to_string(),
            space: None,
            schema: Some(schema),
            indexes: Vec::new(),
        }
    }

    /// Put the table in another data space.
    pub fn in_space(mut self, space: &str) -> TableSpec {
        self.space = Some(space.to_string());
        self
    }

    /// Add a secondary index on the named columns.
    pub fn with_index(mut self, name: &str, columns: &[&str]) -> TableSpec {
        self.indexes.push((
            name.to_string(),
            columns.iter().map(|c| c.to_string()).collect(),
        ));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latch_slot_serves_only_the_database_that_filled_it() {
        let slot = LatchSlot::default();
        let latch = Arc::new(RwLatch::new());
        let first = slot.get(7, || latch.clone()).expect("filled by database 7");
        assert!(std::ptr::eq(first, &*latch));
        let again = slot
            .get(7, || panic!("DB-8: a filled slot is not filled again"))
            .expect("database 7 again");
        assert!(std::ptr::eq(again, &*latch));
        assert!(
            slot.get(8, || Arc::new(RwLatch::new())).is_none(),
            "DB-8: another database's latch is never handed out"
        );
    }

    #[test]
    fn a_latch_slot_is_not_part_of_the_definition() {
        let def = TableDef {
            id: 1,
            name: "t".into(),
            space: 0,
            root: 2,
            schema: None,
            indexes: Vec::new(),
            latch: LatchSlot::default(),
        };
        let filled = def.clone();
        filled.latch.get(1, || Arc::new(RwLatch::new()));
        assert_eq!(def, filled);
        assert_eq!(TableDef::decode(&filled.encode()).unwrap(), def);
        assert!(
            !String::from_utf8(filled.encode())
                .unwrap()
                .contains("latch")
        );
    }
}
