//! # flashlab-engine: an embeddable transactional storage engine
//!
//! The engine the papers' "database server" stands for. A database keeps its
//! storage spaces apart, each on its own device (lee2008 section 1): one or
//! more **data** spaces for tables and indexes (each with its own page size,
//! as petrov2010 asks), the **log**, the **rollback** space for MVCC
//! before-images, and the **temp** space for sorts and joins.
//!
//! Layers, bottom up:
//! - [`page`]: the page header every page carries (checksum, page id, LSN);
//! - [`buffer`]: one buffer pool per page size, steal/no-force, with a
//!   background writer;
//! - [`mtr`]: mini-transactions, which turn page changes into one atomic log
//!   record of byte-range redo;
//! - [`btree`]: B+trees on pages, written against [`mtr::PageAccess`];
//! - [`row`]: the typed row codec and schemas;
//! - [`space`]: data spaces and page allocation;
//! - [`config`]: where each storage space lives;
//! - [`wal`]: the write-ahead log with force-at-commit and group commit;
//! - [`recovery`]: analysis, redo and undo after a crash;
//! - [`lock`]: row locks with deadlock detection;
//! - [`temp`]: the temp space, external merge sort, grace hash join and
//!   sort-merge join (lee2008 section 6);
//! - [`db`]: the `Database` API tying it all together: catalog, tables,
//!   transactions, checkpoints, recovery, the database directory, and the
//!   verifier behind `flashlab check`.

#![forbid(unsafe_code)]

pub mod btree;
pub mod buffer;
pub mod config;
pub mod cpu_calibration;
pub mod db;
pub mod error;
pub mod fast_hash;
pub mod lock;
pub mod mtr;
pub mod mvcc;
pub mod page;
pub mod row;
pub mod space;
pub mod store;
pub mod temp;
pub mod wal;

pub use config::{CpuCosts, DataSpaceConfig, DbConfig, SpaceConfig};
pub use db::{Database, Devices, Table, TableSpec, Transaction};
pub use error::{Error, Result};
pub use page::{PageId, PageNo, SpaceId};
pub use wal::Durability;
