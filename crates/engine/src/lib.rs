//! # flashlab-engine: an embeddable transactional storage engine
//!
//! A database keeps its storage spaces apart, each on its own device: one
//! or more **data** spaces for tables and indexes (each with its own page
//! size), the **log**, the **rollback** space for MVCC before-images, and
//! the **temp** space for sorts and joins. Transactions are serializable
//! per row (strict two-phase locking) over snapshot reads (snapshot
//! isolation or read committed), durable at commit (group commit on a
//! write-ahead log), and recovered after any crash.
//!
//! ## The application API
//!
//! Everything an application needs is at the crate root: [`Database`] (open
//! one with [`Database::builder`]), [`Transaction`], [`Table`] and
//! [`TableSpec`], the typed rows of [`row`], [`Error`] with its
//! [`ErrorKind`], and the configuration types. This surface is what the
//! engine keeps stable; the modules hidden from this documentation are the
//! engine's and the lab's internals, public only so that the lab can
//! measure them, and may change at any time.
//!
//! ```
//! use flashlab_engine::row::{Column, Schema, Type, Value};
//! use flashlab_engine::{Database, TableSpec};
//!
//! # fn main() -> flashlab_engine::Result<()> {
//! let dir = std::env::temp_dir().join(format!("flashlab-doc-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! let db = Database::builder(&dir).buffer_mb(8).log_mb(8).data_mb(16).create()?;
//! let schema = Schema::new(
//!     vec![Column::new("id", Type::Int64), Column::new("balance", Type::Decimal { scale: 2 })],
//!     vec![0],
//! )?;
//! let accounts = db.create_table(TableSpec::typed("accounts", schema))?;
//! // A transaction in a closure: committed on Ok, retried on a deadlock.
//! let ts = db.transact(|txn| {
//!     for id in 1..=3 {
//!         txn.put_row(&accounts, &[Value::Int(id), Value::Decimal(100 * id)])?;
//!     }
//!     Ok(db.visible_ts())
//! })?;
//! db.transact(|txn| txn.update_row(&accounts, &[Value::Int(2)], |row| row[1] = Value::Decimal(0)).map(|_| ()))?;
//! db.close()?;
//!
//! // Reopen (recovery runs if the last close did not happen) and scan,
//! // streaming, row by row.
//! let db = Database::builder(&dir).open()?;
//! let accounts = db.table("accounts")?;
//! let balances: Vec<Value> = db.read(|txn| {
//!     txn.rows_from(&accounts, &[]).map(|row| row.map(|r| r[1].clone())).collect()
//! })?;
//! assert_eq!(balances, [Value::Decimal(100), Value::Decimal(0), Value::Decimal(300)]);
//! // As of a past commit (time travel within this process's retention).
//! let old = db.read_as_of(db.visible_ts(), |txn| txn.get_row(&accounts, &[Value::Int(1)]))?;
//! assert!(old.is_some());
//! # let _ = ts;
//! db.close()?;
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok(())
//! # }
//! ```
//!
//! ## Inside
//!
//! Layers, bottom up: the page header every page carries (checksum, page
//! id, LSN); one buffer pool per page size, steal/no-force, with a
//! page cleaner; mini-transactions, which turn page changes into one
//! atomic log record; B+trees on pages; the typed row codec; data spaces
//! and their page stores (in place, log-structured, In-Page Logging); the
//! write-ahead log with group commit; recovery; row locks with deadlock
//! detection; MVCC with rollback segments; the temp space's sorts and
//! joins; and the `Database` tying them together. ARCHITECTURE.md in the
//! repository describes each with its numbered invariants.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[doc(hidden)]
pub mod btree;
#[doc(hidden)]
pub mod buffer;
pub mod config;
#[doc(hidden)]
pub mod cpu_calibration;
#[doc(hidden)]
pub mod cpu_prices;
#[doc(hidden)]
pub mod db;
pub mod error;
#[doc(hidden)]
pub mod fast_hash;
#[doc(hidden)]
pub mod force;
#[doc(hidden)]
pub mod lock;
#[doc(hidden)]
pub mod mtr;
#[doc(hidden)]
pub mod mvcc;
#[doc(hidden)]
pub mod page;
pub mod row;
#[doc(hidden)]
pub mod space;
#[doc(hidden)]
pub mod store;
#[doc(hidden)]
pub mod temp;
#[doc(hidden)]
pub mod wal;

pub use config::{BufferConfig, DataSpaceConfig, DbConfig, SpaceConfig};
pub use db::{
    Builder, BulkLoad, BulkLoadOptions, BulkLoadStats, BulkLogging, Database, IndexRows, Rows,
    TRANSACT_ATTEMPTS_MAX, Table, TableSpec, Transaction, TypedRows,
};
pub use error::{Error, ErrorKind, Result};
pub use mvcc::Isolation;
pub use wal::Durability;

#[doc(hidden)]
pub use config::CpuCosts;
#[doc(hidden)]
pub use db::Devices;
#[doc(hidden)]
pub use page::{PageId, PageNo, SpaceId};
