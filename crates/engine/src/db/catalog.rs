//! The catalog: which tables exist, where their trees are, their schemas.
//!
//! The catalog is itself a B+tree, in data space 0 with its root at page 1
//! ([`CATALOG_ROOT`]). Each entry maps `b"table/" + name` to a JSON-encoded
//! [`TableDef`]. Creating a table is a system operation: its pages and
//! catalog entry are logged and forced at once, and it cannot be rolled
//! back (DDL is not transactional in flashlab).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::page::{PageNo, SpaceId};
use crate::row::Schema;

/// Root page of the catalog tree in data space 0.
pub const CATALOG_ROOT: PageNo = 1;
/// Key prefix of table entries.
pub const TABLE_PREFIX: &[u8] = b"table/";
/// Longest table or index name.
pub const NAME_BYTES_MAX: usize = 128;
/// Most secondary indexes per table.
pub const INDEXES_MAX: usize = 8;

/// A secondary index: key = index columns + primary key, value empty.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexDef {
    pub name: String,
    /// Column positions in the table's schema.
    pub columns: Vec<usize>,
    pub root: PageNo,
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
