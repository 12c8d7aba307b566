//! Database configuration: where each storage space lives, and how.
//!
//! A database has one or more data spaces (each with its own page size and
//! buffer pool size, as petrov2010 asks: several page sizes at once), a log,
//! and optionally a rollback space (MVCC) and a temp space (sort and join
//! spills). Each names its device: a preset (`hdd-2008`, `ssd-2008`, ...),
//! `memory`, or `file` for a file in the database directory (real world).
//! The configuration is TOML; see `examples/database.toml` and
//! [`DbConfig::from_toml`].

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::page::validate_page_bytes;
use crate::store::StoreKind;
use crate::wal::WalConfig;

/// Fewest buffer frames a pool may have: a B+tree split pins a handful of
/// pages at once.
pub const BUFFER_FRAMES_MIN: u64 = 8;
/// Most data spaces one database may have.
pub const DATA_SPACES_MAX: usize = 16;
/// Largest buffer pool of one data space (and never more, all pools
/// together, than the machine's memory: [`machine_memory_bytes`]).
pub const BUFFER_BYTES_MAX: u64 = 1 << 40;

/// This machine's physical memory (Linux: `MemTotal` of /proc/meminfo), or
/// `None` where it cannot be read.
pub fn machine_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// Buffer pools must fit [`BUFFER_BYTES_MAX`] each and the machine's
/// memory together.
fn validate_buffers(data: &[DataSpaceConfig]) -> Result<()> {
    for space in data {
        if space.buffer_bytes > BUFFER_BYTES_MAX {
            return Err(Error::Config(format!(
                "data space '{}': buffer_bytes {} is more than the limit of {BUFFER_BYTES_MAX}",
                space.name, space.buffer_bytes
            )));
        }
    }
    let total: u64 = data.iter().map(|s| s.buffer_bytes).sum();
    match machine_memory_bytes() {
        Some(memory) if total > memory => Err(Error::Config(format!(
            "buffer pools of {total} bytes in all are more than this machine's {memory} bytes of memory"
        ))),
        _ => Ok(()),
    }
}
/// Device name meaning "a file in the database directory".
pub const FILE_DEVICE: &str = "file";
/// Default capacity of a space file in the real world.
pub const FILE_CAPACITY_BYTES_DEFAULT: u64 = 1 << 30;

/// One data space.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataSpaceConfig {
    /// The space's name (letters, digits, `-`, `_`), unique in the database.
    pub name: String,
    #[serde(default = "default_page_bytes")]
    /// Page size in bytes: a power of two from 2 KB to 64 KB.
    pub page_bytes: usize,
    /// Size of the buffer pool of this page size (spaces of one page size
    /// share one pool; its size is the largest they ask for).
    #[serde(default = "default_buffer_bytes")]
    pub buffer_bytes: u64,
    /// Where the space lives: a device preset, `memory`, or `file` in a directory.
    pub device: String,
    /// Capacity of the space's device; defaults to the device's own.
    #[serde(default)]
    pub capacity_bytes: Option<u64>,
    /// How the space lays its pages out on the device (`in-place` unless
    /// given; see [`crate::store`]).
    #[serde(default)]
    pub store: StoreKind,
    /// `store = "ipl"`: bytes of each erase unit's log segment (4, 8, 16 or
    /// 32 KB; 8 KB unless given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipl_log_segment_bytes: Option<u64>,
    /// `store = "ipl"`: commits do not wait for a force of the space
    /// (lee2007's commit forces; off by default). The commit is then
    /// durable by the WAL alone and restart redoes the space's pages from
    /// the WAL (REC-4 does not apply); forces run at write-back and
    /// checkpoint only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ipl_no_commit_force: bool,
    /// `store = "ipl"`: merges apply every record and aborts de-apply
    /// none (the slides' selective merges and abort de-application, IPL-SEL,
    /// are on by default). Pages read the same either way.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ipl_no_selection: bool,
    /// Log-structured spaces: bytes per segment (default
    /// [`crate::store::log_structured::SEGMENT_BYTES_DEFAULT`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_bytes: Option<u64>,
    /// Log-structured spaces: segment cleaning (`off`, `greedy`,
    /// `cost-benefit`; default greedy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleaning: Option<crate::store::Cleaning>,
    /// Log-structured spaces: write each page at once as its own partial
    /// segment, as a synchronous write on a log-structured file system.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub write_through: bool,
}

impl DataSpaceConfig {
    /// The log-structured options this space asks for.
    pub fn log_structured(&self) -> crate::store::LogStructuredOptions {
        let default = crate::store::LogStructuredOptions::default();
        crate::store::LogStructuredOptions {
            segment_bytes: self.segment_bytes.unwrap_or(default.segment_bytes),
            cleaning: self.cleaning.unwrap_or(default.cleaning),
            write_through: self.write_through,
            created: false,
        }
    }
}

/// The log, rollback or temp space.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpaceConfig {
    /// Where the space lives: a device preset, `memory`, or `file` in a directory.
    pub device: String,
    #[serde(default)]
    /// Bytes of the device the space may use (default: all of it, or the file size default).
    pub capacity_bytes: Option<u64>,
    /// The log only: a second copy of the log (`[log] mirror`), a device
    /// preset in the simulated world, a file path in a directory's
    /// database. Every force writes and flushes both; reads repair a
    /// sector one copy lost from the other ([`crate::wal::mirror`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror: Option<String>,
}

pub use crate::cpu_calibration::{CPU_COST_NS_MAX, CPU_PRICES, CpuCosts};

/// Largest configuration file read (a whole database's layout is a few KB).
pub const CONFIG_BYTES_MAX: u64 = 1 << 20;
/// Longest interval or delay a configuration may set (one day).
pub const INTERVAL_NS_MAX: u64 = 86_400_000_000_000;

pub use crate::cpu_calibration::REFERENCE_CPU_GHZ;

/// How a database is laid out and run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DbConfig {
    /// Data spaces; the first holds the catalog.
    pub data: Vec<DataSpaceConfig>,
    /// The write-ahead log.
    pub log: SpaceConfig,
    #[serde(default)]
    /// The rollback space for MVCC before-images (default: in memory).
    pub rollback: Option<SpaceConfig>,
    #[serde(default)]
    /// The temp space for sorts and joins (default: none).
    pub temp: Option<SpaceConfig>,
    #[serde(default)]
    /// Durability, group commit and the log buffer.
    pub wal: WalConfig,
    /// Take a fuzzy checkpoint this often (0: only at open and close).
    #[serde(default = "default_checkpoint_interval_ns")]
    pub checkpoint_interval_ns: u64,
    /// The buffer pools' page cleaners (`[buffer]`).
    #[serde(default)]
    pub buffer: BufferConfig,
    /// Read this much ahead, in one request, when a data space is missed
    /// in page order (0: off; at most `buffer::READ_AHEAD_BYTES_MAX`).
    #[serde(default = "default_read_ahead_bytes")]
    pub read_ahead_bytes: u64,
    /// Send the page cleaners' and checkpoints' write-backs through
    /// the block layer's elevator stage, sorted and merged
    /// (`flashlab_devices::scheduler`, Linux's defaults); off by default.
    #[serde(default)]
    pub write_scheduler: bool,
    #[serde(default)]
    /// CPU prices of the simulated world (the lab's; ignored in the real world).
    pub cpu: CpuCosts,
    /// Isolation, rollback extents, retention.
    #[serde(default)]
    pub mvcc: crate::mvcc::MvccConfig,
}

fn default_page_bytes() -> usize {
    8192
}

fn default_buffer_bytes() -> u64 {
    64 << 20
}

fn default_checkpoint_interval_ns() -> u64 {
    30_000_000_000
}

pub use crate::buffer::{
    BufferConfig, CLEAN_TARGET_DEFAULT, CLEANER_BATCH_PAGES_DEFAULT, CLEANER_BATCH_PAGES_MAX,
    CLEANER_INTERVAL_NS_DEFAULT,
};
// The cleaner's own copy of the interval limit.
const _: () = assert!(crate::buffer::CLEANER_INTERVAL_NS_MAX == INTERVAL_NS_MAX);

/// 256 KB: a multi-block read of a full scan.
pub const READ_AHEAD_BYTES_DEFAULT: u64 = 256 << 10;

fn default_read_ahead_bytes() -> u64 {
    READ_AHEAD_BYTES_DEFAULT
}

impl DbConfig {
    /// A database with one data space of `page_bytes` pages, all spaces on
    /// the named devices.
    pub fn simple(
        data_device: &str,
        log_device: &str,
        page_bytes: usize,
        buffer_bytes: u64,
    ) -> DbConfig {
        DbConfig {
            data: vec![DataSpaceConfig {
                name: "data".into(),
                page_bytes,
                buffer_bytes,
                device: data_device.into(),
                capacity_bytes: None,
                store: StoreKind::InPlace,
                ipl_log_segment_bytes: None,
                ipl_no_commit_force: false,
                ipl_no_selection: false,
                segment_bytes: None,
                cleaning: None,
                write_through: false,
            }],
            log: SpaceConfig {
                device: log_device.into(),
                capacity_bytes: None,
                mirror: None,
            },
            rollback: None,
            temp: None,
            wal: WalConfig::default(),
            checkpoint_interval_ns: default_checkpoint_interval_ns(),
            buffer: BufferConfig::default(),
            read_ahead_bytes: default_read_ahead_bytes(),
            write_scheduler: false,
            cpu: CpuCosts::default(),
            mvcc: crate::mvcc::MvccConfig::default(),
        }
    }

    /// Parse TOML; `source` names the input in every error.
    pub fn from_toml(text: &str, source: &str) -> Result<DbConfig> {
        let config: DbConfig = toml::from_str(text)
            .map_err(|e| Error::Config(format!("{source}: {}", e.message())))?;
        config.validate().map_err(|e| match e {
            Error::Config(problem) => Error::Config(format!("{source}: {problem}")),
            other => other,
        })?;
        Ok(config)
    }

    /// Read and parse the configuration file at `path` (at most
    /// [`CONFIG_BYTES_MAX`]).
    pub fn from_file(path: &std::path::Path) -> Result<DbConfig> {
        let shown = path.display().to_string();
        let text = flashlab_runtime::text::read_text_file(path, CONFIG_BYTES_MAX)
            .map_err(|e| Error::Config(format!("{shown}: {e}")))?;
        DbConfig::from_toml(&text, &shown)
    }

    /// Check everything that can be checked without devices.
    pub fn validate(&self) -> Result<()> {
        if self.data.is_empty() {
            return Err(Error::Config("at least one data space is needed".into()));
        }
        if self.read_ahead_bytes > crate::buffer::READ_AHEAD_BYTES_MAX {
            return Err(Error::Config(format!(
                "read_ahead_bytes {} is more than the limit of {}",
                self.read_ahead_bytes,
                crate::buffer::READ_AHEAD_BYTES_MAX
            )));
        }
        if self.data.len() > DATA_SPACES_MAX {
            return Err(Error::Config(format!(
                "{} data spaces; at most {DATA_SPACES_MAX}",
                self.data.len()
            )));
        }
        for (i, space) in self.data.iter().enumerate() {
            validate_page_bytes(space.page_bytes)
                .map_err(|e| Error::Config(format!("data space '{}': {e}", space.name)))?;
            let frames = space.buffer_bytes / space.page_bytes as u64;
            if frames < BUFFER_FRAMES_MIN {
                return Err(Error::Config(format!(
                    "data space '{}': buffer of {} bytes holds {frames} pages of {} bytes; at least {BUFFER_FRAMES_MIN} are needed",
                    space.name, space.buffer_bytes, space.page_bytes
                )));
            }
            if space.name.is_empty()
                || !space
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(Error::Config(format!(
                    "data space name '{}' must be letters, digits, '-' or '_'",
                    space.name
                )));
            }
            if space.store != StoreKind::LogStructured
                && (space.segment_bytes.is_some()
                    || space.cleaning.is_some()
                    || space.write_through)
            {
                return Err(Error::Config(format!(
                    "data space '{}': segment_bytes, cleaning and write_through are options of store = \"log-structured\", not of \"{}\"",
                    space.name, space.store
                )));
            }
            if let Some(segment_bytes) = space.segment_bytes {
                crate::store::log_structured::validate_segment_bytes(
                    &space.name,
                    segment_bytes,
                    space.page_bytes,
                )?;
            }
            if self.data[..i].iter().any(|other| other.name == space.name) {
                return Err(Error::Config(format!(
                    "data space '{}' is named twice",
                    space.name
                )));
            }
        }
        validate_buffers(&self.data)?;
        self.cpu.validate()?;
        self.buffer.validate()?;
        for (key, ns) in [
            ("checkpoint_interval_ns", self.checkpoint_interval_ns),
            ("[mvcc] retention_ns", self.mvcc.retention_ns),
        ] {
            if ns > INTERVAL_NS_MAX {
                return Err(Error::Config(format!(
                    "{key} = {ns} is more than the limit of {INTERVAL_NS_MAX} ns (a day)"
                )));
            }
        }
        self.wal.validate()
    }

    /// The data space called `name`, by index.
    pub fn data_space(&self, name: &str) -> Option<usize> {
        self.data.iter().position(|s| s.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-line error `DbConfig::from_toml` gives `text` (as `db.toml`).
    fn refused(text: &str) -> String {
        DbConfig::from_toml(text, "db.toml")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn toml_round_trip_and_errors_name_the_problem() {
        let text = r#"
            [[data]]
            name = "tables"
            page_bytes = 4096
            buffer_bytes = 1048576
            device = "memory"

            [[data]]
            name = "big"
            page_bytes = 16384
            device = "ssd-2010"

            [log]
            device = "hdd-2008"

            [wal]
            durability = "sync"
            commit_delay_ns = 0
        "#;
        let config = DbConfig::from_toml(text, "db.toml").unwrap();
        assert_eq!(config.data.len(), 2);
        assert_eq!(config.data[1].page_bytes, 16384);
        let bad = text.replace("4096", "3000");
        let err = refused(&bad);
        assert!(
            err.contains("'tables'") && err.contains("power of two"),
            "{err}"
        );
        let tiny = text.replace("1048576", "8192");
        let err = refused(&tiny);
        assert!(err.contains("at least 8"), "{err}");
        let err = DbConfig::from_toml("[[data]]\nname = 1", "db.toml")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("configuration: db.toml:"), "{err}");
    }

    /// A store's options on a space of another store are refused, naming
    /// the space; so is a read-ahead window above its limit.
    #[test]
    fn store_options_and_read_ahead_are_checked() {
        for (key, value) in [
            ("segment_bytes", "65536"),
            ("cleaning", "\"greedy\""),
            ("write_through", "true"),
        ] {
            let text = format!(
                "[[data]]\nname = \"t\"\ndevice = \"memory\"\n{key} = {value}\n[log]\ndevice = \"memory\"\n"
            );
            let err = refused(&text);
            assert!(
                err.contains("'t'") && err.contains("log-structured"),
                "{key}: {err}"
            );
        }
        let mut config = DbConfig::simple("memory", "memory", 8192, 1 << 20);
        config.read_ahead_bytes = crate::buffer::READ_AHEAD_BYTES_MAX + 1;
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains("read_ahead_bytes"), "{err}");
    }

    /// The `[buffer]` section: defaults when absent, and bad values
    /// refused in one line naming the key.
    #[test]
    fn buffer_section_defaults_and_errors() {
        let example = include_str!("../../../examples/database.toml");
        let config = DbConfig::from_toml(example, "examples/database.toml").unwrap();
        assert_eq!(config.buffer, BufferConfig::default());
        let base = "[[data]]\nname = \"t\"\ndevice = \"memory\"\n[log]\ndevice = \"memory\"\n";
        let config = DbConfig::from_toml(base, "db.toml").unwrap();
        assert_eq!(config.buffer, BufferConfig::default());
        let set = format!("{base}[buffer]\nclean_target = 0.0\ncleaner_batch_pages = 8\n");
        let config = DbConfig::from_toml(&set, "db.toml").unwrap();
        assert_eq!(config.buffer.clean_target, 0.0);
        assert_eq!(config.buffer.cleaner_batch_pages, 8);
        for (line, key) in [
            ("clean_target = 1.5", "clean_target"),
            ("clean_target = -0.1", "clean_target"),
            ("clean_target = nan", "clean_target"),
            ("cleaner_batch_pages = 0", "cleaner_batch_pages"),
            ("cleaner_batch_pages = 5000", "cleaner_batch_pages"),
            (
                "cleaner_interval_ns = 100000000000000000",
                "cleaner_interval_ns",
            ),
        ] {
            let text = format!("{base}[buffer]\n{line}\n");
            let err = refused(&text);
            assert!(err.contains(key) && !err.contains('\n'), "{line}: {err}");
        }
    }
}
