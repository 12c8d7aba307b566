//! [`Builder`]: a database in a directory, with the defaults a DBA would
//! pick, in the real world, without the caller seeing a runtime.
//!
//! `Database::builder(dir)` sets the layout of a new database (page size,
//! buffer pool, log and data file sizes, durability) and then creates it,
//! opens it, or either. Opening an existing database takes its layout from
//! the directory's manifest, so an application need not remember it; the
//! sizes given matter only at creation. The builder uses the process's
//! default real-world runtime ([`RealRuntime::default_runtime`]), so any
//! thread of the application may then use the database.

use std::path::{Path, PathBuf};

use flashlab_runtime::RealRuntime;

use super::{Database, dir};
use crate::config::DbConfig;
use crate::error::{Error, Result};
use crate::wal::Durability;

/// Page size of a new database's data space (the engine's default).
pub const PAGE_BYTES_DEFAULT: usize = 8192;
/// Buffer pool of a new database: 64 MB.
pub const BUFFER_BYTES_DEFAULT: u64 = 64 << 20;
/// Log file of a new database: 256 MB, recycled by checkpoints.
pub const LOG_BYTES_DEFAULT: u64 = 256 << 20;
/// Data file of a new database: 1 GB.
pub const DATA_BYTES_DEFAULT: u64 = crate::config::FILE_CAPACITY_BYTES_DEFAULT;

/// Sets up a database in a directory; see the module documentation.
#[derive(Clone, Debug)]
pub struct Builder {
    dir: PathBuf,
    config: DbConfig,
}

impl Builder {
    pub(super) fn new(dir: &Path) -> Builder {
        let mut config = DbConfig::simple("file", "file", PAGE_BYTES_DEFAULT, BUFFER_BYTES_DEFAULT);
        config.data[0].capacity_bytes = Some(DATA_BYTES_DEFAULT);
        config.log.capacity_bytes = Some(LOG_BYTES_DEFAULT);
        Builder {
            dir: dir.to_path_buf(),
            config,
        }
    }

    /// Page size of the data space, a power of two from 2 KB to 64 KB.
    pub fn page_bytes(mut self, bytes: usize) -> Builder {
        self.config.data[0].page_bytes = bytes;
        self
    }

    /// Size of the buffer pool, in MB.
    pub fn buffer_mb(mut self, mb: u64) -> Builder {
        self.config.data[0].buffer_bytes = mb.saturating_mul(1 << 20);
        self
    }

    /// Size of the log file, in MB.
    pub fn log_mb(mut self, mb: u64) -> Builder {
        self.config.log.capacity_bytes = Some(mb.saturating_mul(1 << 20));
        self
    }

    /// Size of the data file, in MB.
    pub fn data_mb(mut self, mb: u64) -> Builder {
        self.config.data[0].capacity_bytes = Some(mb.saturating_mul(1 << 20));
        self
    }

    /// [`Durability::Sync`] (the default: a commit returns once its log
    /// record is on the device) or [`Durability::NoSync`].
    pub fn durability(mut self, durability: Durability) -> Builder {
        self.config.wal.durability = durability;
        self
    }

    /// Start from a whole configuration (several data spaces, a rollback
    /// space, MVCC settings); its devices must be `file`.
    pub fn config(mut self, config: DbConfig) -> Builder {
        self.config = config;
        self
    }

    /// The configuration a [`Builder::create`] would use.
    pub fn to_config(&self) -> &DbConfig {
        &self.config
    }

    /// Create a new database in the directory (made if absent) and open
    /// it; refused if the directory holds one.
    pub fn create(self) -> Result<Database> {
        let _runtime = RealRuntime::default_runtime();
        std::fs::create_dir_all(&self.dir).map_err(|source| Error::Io {
            path: self.dir.display().to_string(),
            source,
        })?;
        Database::create_dir(&self.dir, &self.config)?;
        Database::open_dir(&self.dir, &self.config)
    }

    /// Open the database in the directory, with the layout its manifest
    /// records (recovering it after a crash); never creates one.
    pub fn open(self) -> Result<Database> {
        let _runtime = RealRuntime::default_runtime();
        let config = dir::config_from_manifest(&self.dir)?;
        Database::open_dir(&self.dir, &config)
    }

    /// [`Builder::open`] if the directory holds a database, else
    /// [`Builder::create`].
    pub fn create_or_open(self) -> Result<Database> {
        match self.dir.join(dir::MANIFEST_FILE).exists() {
            true => self.open(),
            false => self.create(),
        }
    }
}
