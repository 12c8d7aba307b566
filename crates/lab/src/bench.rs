//! `flashlab bench`: run a workload and report what a database engineer
//! expects from pgbench or sysbench.
//!
//! In the simulated world (the default) the database's log and data spaces
//! are modelled devices (presets) and the CPU has `cores` simulated cores at
//! `cpu_ghz`; every number is in virtual time and the same seed gives the
//! same report. With `real_dir`, the same workload runs on real files in a
//! fresh subdirectory of that directory, on OS threads, in wall-clock time;
//! with `keep` as well, in that directory itself, continuing on (and first
//! recovering) the database a killed run left there, and `acks` records
//! every acknowledged TPC-B history id in a side file (the crash tests'
//! `tests/kill.rs` kills such runs with SIGKILL and checks the database
//! against that file).
//!
//! TPC-C adds to the report its load time, tpmC, tpmTotal, efficiency and
//! the five transaction types' counts, rollbacks, retries and latency
//! percentiles; its options are checked before anything is created, and in
//! the real world its data files are sized for the warehouses.

use anyhow::anyhow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use flashlab_devices::store::{SparseStore, StoredDevice};
use flashlab_devices::trace::traced::TracedDevice;
use flashlab_devices::trace::{Space, Tracer};
use flashlab_devices::{DeviceRef, TraceRecord, presets};
use flashlab_engine::config::REFERENCE_CPU_GHZ;
use flashlab_engine::db::dir::MANIFEST_FILE;
use flashlab_engine::{Database, DbConfig, Devices, Durability};
use flashlab_runtime::{NS_PER_S, RealRuntime, Rt, Sim, SimConfig};
use flashlab_workloads::driver::{AckSink, Progress, RunConfig, RunResult};
use flashlab_workloads::{WorkloadOptions, build};
use serde::Serialize;

/// Bytes of a TPC-C entry besides the row: key (at most 3 integer columns
/// and a few more for index keys) and version header, rounded up.
const TPCC_ENTRY_OVERHEAD_BYTES: usize = 64;
/// Data-file room per TPC-C warehouse in the real world (see
/// `tpcc_data_bytes`).
const TPCC_FILE_BYTES_PER_WAREHOUSE: u64 = 256 << 20;
/// Most simulated cores (the runtime's limit is larger; this is sanity).
pub const CORES_MAX: u32 = 64;

/// Everything `flashlab bench` can be told.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub workload: String,
    pub clients: u32,
    pub cores: u32,
    pub cpu_ghz: f64,
    /// Exact CPU prices (a system profile's, at this run's clock); `None`:
    /// the configuration's, or the default profile's, moved to `cpu_ghz`.
    pub cpu_costs: Option<flashlab_engine::config::CpuCosts>,
    pub duration_ns: u64,
    pub warmup_ns: u64,
    pub log_device: String,
    pub data_device: String,
    /// Device of the rollback space (MVCC before-images).
    pub rollback_device: String,
    pub scale: u32,
    pub accounts_per_branch: u32,
    /// TPC-C's warehouses, scale knobs, mix and think times (its seed is
    /// `seed`). Its terminals are `clients`.
    pub tpcc: flashlab_workloads::tpcc::TpccOptions,
    pub page_bytes: usize,
    /// TPC-C: tables given a data space of their own with this page size
    /// (`--table-page-bytes stock=4096`), on the data device.
    pub table_page_bytes: Vec<(String, usize)>,
    /// Page store of every data space (`--data-store`; a `--config` file's
    /// spaces keep their own unless this is given).
    pub data_store: Option<flashlab_engine::store::StoreKind>,
    /// Write-backs through the elevator stage (`--write-scheduler on`).
    pub write_scheduler: bool,
    /// Model an aged rollback space over this span (`MvccConfig::aged_span_bytes`; 0: off).
    pub rollback_aged_span_bytes: u64,
    /// `--data-store ipl`: bytes of each erase unit's log segment.
    pub ipl_log_segment_bytes: Option<u64>,
    /// `--data-store ipl`: commits do not force their log sectors.
    pub ipl_no_commit_force: bool,
    /// `--data-store ipl`: no selective merges nor abort de-application.
    pub ipl_no_selection: bool,
    /// Log-structured data spaces: segment size (`--segment-bytes`).
    pub segment_bytes: Option<u64>,
    /// Log-structured data spaces: segment cleaning (`--cleaning`).
    pub cleaning: Option<flashlab_engine::store::Cleaning>,
    /// Log-structured data spaces: each page written at once as its own
    /// partial segment (`--write-through on`).
    pub write_through: bool,
    pub buffer_bytes: u64,
    pub durability: Durability,
    /// Isolation of the workload's transactions. Read committed by default:
    /// the default of the commercial server the papers ran, under which an
    /// update waits for a row's lock and then changes its latest version.
    pub isolation: flashlab_engine::mvcc::Isolation,
    pub commit_delay_ns: u64,
    /// Release row locks at the commit record's append, before the force
    /// (DB-7; off, as the papers' servers are modelled).
    pub early_lock_release: bool,
    /// Real world: the flusher waits for its group (WAL-13; on).
    pub group_wait: bool,
    pub real_dir: Option<PathBuf>,
    /// Real world: keep the database in `real_dir` itself, and continue on
    /// the one already there (recovering it) instead of a fresh one.
    pub keep: bool,
    /// Append the id of every acknowledged transaction (TPC-B: history
    /// ids) to this file, one per line, written as soon as the commit
    /// returned: the client's record of what it was told.
    pub acks: Option<PathBuf>,
    pub seed: u64,
    pub trace: bool,
    pub progress_interval_ns: u64,
    /// Log full-page images after each checkpoint (torn-page repair). The
    /// lee2008 experiments turn them off, as the paper's server ran.
    pub page_images: bool,
    /// Capacity of the log space (None: the whole log device).
    pub log_bytes: Option<u64>,
    /// A database configuration to start from (devices and sizes in it are
    /// overridden by the options above only where given on the command line).
    pub config: Option<DbConfig>,
    /// Called once the database is loaded (the run's tables are complete
    /// and flushed), before the measured run.
    pub on_loaded: Option<LoadedHook>,
    /// Simulated world: start from this loaded database (made by
    /// [`load_image`] with the same workload, sizes and devices) instead of
    /// loading one; the run works on fresh devices holding its contents.
    pub image: Option<Arc<DbImage>>,
}

/// A callback for [`BenchOptions::on_loaded`].
#[derive(Clone)]
pub struct LoadedHook(pub Arc<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for LoadedHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LoadedHook")
    }
}

/// The paths a real `--keep` run that creates its database in `dir` may
/// make, manifest first: what an interrupt before the loading is complete
/// removes.
pub fn created_paths(options: &BenchOptions, dir: &Path) -> Vec<std::path::PathBuf> {
    use flashlab_engine::db::dir::{Manifest, STAGING_DIR};
    let manifest = Manifest::for_config(&real_config(options));
    let mut paths = vec![dir.join(MANIFEST_FILE)];
    paths.extend(manifest.spaces.iter().map(|s| dir.join(&s.file)));
    paths.push(dir.join(STAGING_DIR));
    paths.push(dir.join(flashlab_engine::db::dirlock::LOCK_FILE));
    paths
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            workload: "tpcb".into(),
            clients: 20,
            cores: 2,
            cpu_ghz: REFERENCE_CPU_GHZ,
            cpu_costs: None,
            duration_ns: 10 * NS_PER_S,
            warmup_ns: NS_PER_S,
            log_device: "ssd-2008".into(),
            data_device: "memory".into(),
            rollback_device: "memory".into(),
            scale: 1,
            accounts_per_branch: flashlab_workloads::tpcb::ACCOUNTS_PER_BRANCH,
            tpcc: flashlab_workloads::tpcc::TpccOptions::default(),
            page_bytes: 8192,
            table_page_bytes: Vec::new(),
            data_store: None,
            rollback_aged_span_bytes: 0,
            write_scheduler: false,
            ipl_log_segment_bytes: None,
            ipl_no_commit_force: false,
            ipl_no_selection: false,
            segment_bytes: None,
            cleaning: None,
            write_through: false,
            buffer_bytes: 512 << 20,
            durability: Durability::Sync,
            isolation: flashlab_engine::mvcc::Isolation::ReadCommitted,
            commit_delay_ns: 0,
            early_lock_release: false,
            group_wait: true,
            page_images: true,
            log_bytes: None,
            real_dir: None,
            keep: false,
            acks: None,
            seed: 1,
            trace: false,
            progress_interval_ns: NS_PER_S,
            config: None,
            on_loaded: None,
            image: None,
        }
    }
}

/// lee2008 Table 3's columns, as `--json` prints them.
#[derive(Clone, Debug, Serialize)]
pub struct LogColumns {
    pub writes: u64,
    pub commits_per_write: f64,
    pub avg_write_sectors: f64,
    pub avg_write_ms: f64,
    pub tail_rewrites: u64,
    /// Log bytes appended per commit, and the part that is full-page images.
    pub bytes_per_commit: f64,
    pub page_image_bytes_per_commit: f64,
    /// Whether full-page images were on.
    pub page_images: bool,
    /// Times the log wrapped around its region, and appends it refused.
    pub wraps: u64,
    pub log_full: u64,
    /// Real-world flushers' waits for their group (WAL-13); none simulated.
    pub group_waits: u64,
    pub group_waits_filled: u64,
    pub group_wait_us_mean: f64,
    /// Forces that emptied a full log buffer, before latching and under
    /// latches (WAL-15).
    pub room_forces: u64,
    pub latched_forces: u64,
}

/// Estimated write time of In-Page Logging, lee2007: a sector write.
pub const IPL_SECTOR_WRITE_S: f64 = 200e-6;
/// ... and a merge (results.toml [lee2007.ipl] merge_ms = 20).
pub const IPL_MERGE_S: f64 = 20e-3;

/// The page stores' counters of the run (after the load), with the
/// ratios derived from them: In-Page Logging's average record bytes, log
/// sectors read per page read, and lee2007's estimated write time
/// (sector writes x 200 us + merges x 20 ms).
fn store_counters_since(
    before: &[flashlab_engine::db::SpaceStoreCounters],
    after: &[flashlab_engine::db::SpaceStoreCounters],
) -> Vec<(String, Vec<(String, f64)>)> {
    after
        .iter()
        .map(|(space, _, counters)| {
            let base = before.iter().find(|(s, _, _)| s == space);
            let mut out: Vec<(String, f64)> = counters
                .iter()
                .map(|&(k, v)| {
                    let b = base
                        .and_then(|(_, _, c)| c.iter().find(|(bk, _)| *bk == k))
                        .map_or(0.0, |(_, bv)| *bv);
                    (k.to_string(), v - b)
                })
                .collect();
            let get = |name: &str| out.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
            let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                _ => None,
            };
            let derived = [
                (
                    "avg_record_bytes",
                    ratio(get("record_bytes"), get("records")),
                ),
                (
                    "log_sectors_per_page_read",
                    ratio(get("log_sectors_read"), get("page_reads")),
                ),
                (
                    "est_write_s",
                    get("sector_writes")
                        .zip(get("merges"))
                        .map(|(w, m)| w * IPL_SECTOR_WRITE_S + m * IPL_MERGE_S),
                ),
            ];
            for (k, v) in derived {
                if let Some(v) = v {
                    out.push((k.to_string(), v));
                }
            }
            (space.clone(), out)
        })
        .collect()
}

/// What `flashlab bench` reports.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub workload: String,
    pub world: String,
    pub clients: u32,
    pub cores: u32,
    pub cpu_ghz: f64,
    pub log_device: String,
    pub data_device: String,
    /// The durability level, and ", early lock release" if that is on.
    pub durability: String,
    pub duration_s: f64,
    pub committed: u64,
    pub retries: u64,
    pub tps: f64,
    pub latency_ms: flashlab_workloads::driver::Latency,
    pub cpu_utilization: f64,
    pub cpu_per_core: Vec<f64>,
    pub log: LogColumns,
    /// "ok", or the violation.
    pub consistency: String,
    /// MVCC: rollback pages read, chains walked, rollback read time.
    pub rollback: flashlab_engine::mvcc::rollback::RollbackStats,
    pub departures: Vec<String>,
    pub progress: Vec<Progress>,
    /// Seconds the load took in the run's world (virtual time when
    /// simulated), and on the host.
    pub load_seconds: f64,
    pub load_host_seconds: f64,
    /// Rows the load's bulk loads added (0 for a workload that inserts).
    pub load_bulk_rows: u64,
    /// TPC-C: tpmC, tpmTotal, efficiency and the five types' figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpcc: Option<flashlab_workloads::tpcc::TpccSummary>,
    /// The first data device's flash counters over the run (modelled
    /// devices only): host pages written, flash pages written, erases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_flash: Option<[u64; 3]>,
    /// The log device's full merges over the run, warm-up included
    /// (modelled devices only): each stops the log while its FTL copies
    /// a whole block or super-block.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_full_merges: Option<u64>,
    /// Host seconds the whole bench took.
    pub host_seconds: f64,
    /// Host seconds of the transactions alone: warm-up and measurement,
    /// clients, writer and checkpoints; the load and the final consistency
    /// check excluded (the simulator's host cost per transaction).
    pub run_host_seconds: f64,
    /// Transactions committed in that time, warm-up included.
    pub run_transactions: u64,
    /// What each data space's page store wrote from the end of the load to
    /// the end of the run (warm-up included), by space.
    pub data_stores: Vec<StoreReport>,
    /// The buffer pools' counters over the same span, all pools summed:
    /// hits, misses, page writes, and how many of those the page cleaner
    /// wrote (in how many device requests) or a miss wrote itself
    /// (foreground dirty evictions).
    pub buffer: flashlab_engine::buffer::BufferStats,
    /// The error that stopped the run before its end (the figures above
    /// are as far as it got), or none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    #[serde(skip)]
    pub trace: Vec<TraceRecord>,
}

/// One data space's page store over a run (see [`BenchReport::data_stores`]).
#[derive(Clone, Debug, Serialize)]
pub struct StoreReport {
    pub space: String,
    pub store: String,
    /// Counters from the end of the load to the end of the run.
    pub stats: flashlab_engine::store::StoreStats,
    /// What this kind of store counts of its own over the same span (In-Page
    /// Logging: sector writes, merges, erases, and the ratios derived from
    /// them); empty for stores that count nothing more.
    pub counters: Vec<(String, f64)>,
    /// Transactions committed in that time (warm-up included).
    pub commits: u64,
}

fn store_delta(
    before: &flashlab_engine::store::StoreStats,
    after: &flashlab_engine::store::StoreStats,
) -> flashlab_engine::store::StoreStats {
    flashlab_engine::store::StoreStats {
        pages_written: after.pages_written - before.pages_written,
        device_bytes_written: after.device_bytes_written - before.device_bytes_written,
        device_writes: after.device_writes - before.device_writes,
        metadata_bytes_written: after.metadata_bytes_written - before.metadata_bytes_written,
        segments_cleaned: after.segments_cleaned - before.segments_cleaned,
        pages_copied: after.pages_copied - before.pages_copied,
        map_checkpoints: after.map_checkpoints - before.map_checkpoints,
        cleaning_passes: after.cleaning_passes - before.cleaning_passes,
        cleaning_passes_finished: after.cleaning_passes_finished - before.cleaning_passes_finished,
        // The store's own counters are reported apart, as deltas of their
        // own (`StoreReport::counters`).
        counters: Vec::new(),
    }
}

/// Check options before running anything.
/// Most TPC-B accounts a run may load (--scale x --accounts-per-branch),
/// and most thousands of update-commit rows (--scale): about 10 GB of rows.
pub const ACCOUNTS_MAX: u64 = 100_000_000;

/// The size of the database a run loads: positive and within [`ACCOUNTS_MAX`].
fn validate_size(options: &BenchOptions) -> anyhow::Result<()> {
    if options.scale == 0 {
        return Err(anyhow!("--scale must be at least 1"));
    }
    if options.accounts_per_branch == 0 {
        return Err(anyhow!("--accounts-per-branch must be at least 1"));
    }
    let rows = match options.workload.as_str() {
        "tpcb" => options.scale as u64 * options.accounts_per_branch as u64,
        _ => options.scale as u64 * 1000,
    };
    if rows > ACCOUNTS_MAX {
        return Err(anyhow!(
            "--scale {} asks for {rows} rows; at most {ACCOUNTS_MAX} (lower --scale or --accounts-per-branch)",
            options.scale
        ));
    }
    Ok(())
}

/// Raw NAND is for an In-Page Logging data space only: the log and the
/// rollback space overwrite their sectors, which program-once flash
/// without an FTL cannot do.
fn validate_log_devices(options: &BenchOptions) -> anyhow::Result<()> {
    let mut devices = vec![
        ("--log-device", options.log_device.clone()),
        ("--rollback-device", options.rollback_device.clone()),
    ];
    if let Some(config) = &options.config {
        devices.push(("--config [log] device", config.log.device.clone()));
        let others = [
            ("--config [rollback] device", &config.rollback),
            ("--config [temp] device", &config.temp),
        ];
        for (key, space) in others {
            if let Some(space) = space {
                devices.push((key, space.device.clone()));
            }
        }
    }
    for (flag, device) in devices {
        if presets::is_raw_nand(&device) {
            return Err(anyhow!(
                "{flag} {device} is raw NAND (program-once, erase units): only an In-Page Logging data space can use it; give the log and rollback space an SSD, a disk or memory"
            ));
        }
    }
    Ok(())
}

/// Log segment sizes `--ipl-log-segment-kb` accepts.
pub const IPL_LOG_SEGMENT_KB_ALLOWED: [u64; 4] = [4, 8, 16, 32];

/// A page store fits its data device: IPL needs raw NAND, and raw NAND
/// only IPL can use.
fn validate_store(options: &BenchOptions) -> anyhow::Result<()> {
    use flashlab_engine::store::StoreKind;
    let ipl = options.data_store == Some(StoreKind::Ipl);
    let nand = presets::is_raw_nand(&options.data_device);
    if ipl && !nand {
        return Err(anyhow!(
            "--data-store ipl needs a raw NAND --data-device (such as {}), not '{}'",
            flashlab_devices::nand_device::K9WAG08U1A,
            options.data_device
        ));
    }
    if nand && !ipl {
        return Err(anyhow!(
            "--data-device {} is raw NAND (program-once, erase units): only --data-store ipl can use it",
            options.data_device
        ));
    }
    if let Some(bytes) = options.ipl_log_segment_bytes {
        if !ipl {
            return Err(anyhow!("--ipl-log-segment-kb needs --data-store ipl"));
        }
        if !IPL_LOG_SEGMENT_KB_ALLOWED.contains(&(bytes >> 10)) || bytes % 1024 != 0 {
            return Err(anyhow!(
                "--ipl-log-segment-kb {} must be 4, 8, 16 or 32",
                bytes >> 10
            ));
        }
    }
    if options.ipl_no_commit_force && !ipl {
        return Err(anyhow!("--ipl-commit-force off needs --data-store ipl"));
    }
    if options.ipl_no_selection && !ipl {
        return Err(anyhow!("--ipl-selection off needs --data-store ipl"));
    }
    Ok(())
}

pub fn validate(options: &BenchOptions) -> anyhow::Result<()> {
    if build(&options.workload, &WorkloadOptions::default()).is_none() {
        return Err(anyhow!(
            "unknown workload '{}' (known: {})",
            options.workload,
            flashlab_workloads::WORKLOADS.join(", ")
        ));
    }
    if options.workload == "tpcc" {
        validate_tpcc(options)?;
    } else if !options.table_page_bytes.is_empty() {
        return Err(anyhow!("--table-page-bytes needs the tpcc workload"));
    }
    if (options.segment_bytes.is_some() || options.cleaning.is_some() || options.write_through)
        && options.data_store != Some(flashlab_engine::store::StoreKind::LogStructured)
    {
        return Err(anyhow!(
            "--segment-bytes, --cleaning and --write-through need --data-store log-structured"
        ));
    }
    if let Some(bytes) = options.segment_bytes {
        flashlab_engine::store::log_structured::validate_segment_bytes(
            "data",
            bytes,
            options.page_bytes,
        )
        .map_err(|e| anyhow!("--segment-bytes {bytes}: {e}"))?;
    }
    if options.clients == 0 || options.clients > flashlab_workloads::driver::CLIENTS_MAX {
        let name = if options.workload == "tpcc" {
            "--terminals"
        } else {
            "--clients"
        };
        return Err(anyhow!(
            "{name} must be 1 to {}",
            flashlab_workloads::driver::CLIENTS_MAX
        ));
    }
    if options.cores == 0 || options.cores > CORES_MAX {
        return Err(anyhow!("--cores must be 1 to {CORES_MAX}"));
    }
    if !(options.cpu_ghz.is_finite() && options.cpu_ghz > 0.1 && options.cpu_ghz < 100.0) {
        return Err(anyhow!("--cpu-ghz {} is not a clock rate", options.cpu_ghz));
    }
    if options.duration_ns == 0 {
        return Err(anyhow!("--duration must be positive"));
    }
    validate_size(options)?;
    validate_store(options)?;
    validate_log_devices(options)?;
    if options.real_dir.is_none() {
        for device in [
            &options.log_device,
            &options.data_device,
            &options.rollback_device,
        ] {
            presets::build_model(device).map(|_| ()).or_else(|e| {
                if device == presets::MEMORY {
                    Ok(())
                } else {
                    Err(anyhow!("{e}"))
                }
            })?;
        }
    }
    if let Some(dir) = &options.real_dir {
        check_writable_dir(dir)?;
    }
    if options.keep && options.real_dir.is_none() {
        return Err(anyhow!("--keep needs --real DIR"));
    }
    if options.acks.is_some() && options.workload != "tpcb" {
        return Err(anyhow!("--acks needs the tpcb workload (its history ids)"));
    }
    Ok(())
}

fn validate_tpcc(options: &BenchOptions) -> anyhow::Result<()> {
    options.tpcc.validate().map_err(anyhow::Error::msg)?;
    let kept = options.real_dir.as_ref().filter(|_| options.keep);
    if let Some(dir) = kept.filter(|dir| dir.join(MANIFEST_FILE).exists()) {
        return Err(anyhow!(
            "--keep: {} holds a database, and the tpcc workload cannot continue on one (it loads a fresh database)",
            dir.display()
        ));
    }
    let schemas = flashlab_workloads::tpcc::schema::all();
    let tables: Vec<&str> = schemas.iter().map(|(name, _)| *name).collect();
    let entry_bytes = |row_bytes: usize| row_bytes + TPCC_ENTRY_OVERHEAD_BYTES;
    for (i, (table, page_bytes)) in options.table_page_bytes.iter().enumerate() {
        let arg = format!("--table-page-bytes {table}={page_bytes}");
        let Some((_, schema)) = schemas.iter().find(|(name, _)| name == table) else {
            return Err(anyhow!(
                "{arg}: no TPC-C table '{table}' (tables: {})",
                tables.join(", ")
            ));
        };
        if options.table_page_bytes[..i]
            .iter()
            .any(|(t, _)| t == table)
        {
            return Err(anyhow!("{arg}: '{table}' is given twice"));
        }
        let (min, max) = (
            flashlab_engine::page::PAGE_BYTES_MIN,
            flashlab_engine::page::PAGE_BYTES_MAX,
        );
        if !page_bytes.is_power_of_two() || !(min..=max).contains(page_bytes) {
            return Err(anyhow!(
                "{arg}: a page size is a power of two from {min} to {max} bytes"
            ));
        }
        let needed = entry_bytes(schema.max_row_bytes());
        if flashlab_engine::btree::max_entry_bytes(*page_bytes) < needed {
            return Err(anyhow!(
                "{arg}: too small for {table} rows ({needed} bytes per entry)"
            ));
        }
    }
    // The smallest page of any other data space a table may land in.
    let page_bytes = options.config.as_ref().map_or(options.page_bytes, |c| {
        c.data
            .iter()
            .map(|d| d.page_bytes)
            .min()
            .unwrap_or(options.page_bytes)
    });
    let widest = schemas
        .iter()
        .filter(|(name, _)| !options.table_page_bytes.iter().any(|(t, _)| t == name))
        .map(|(_, s)| s.max_row_bytes())
        .max()
        .unwrap_or(0);
    let needed = entry_bytes(widest);
    if flashlab_engine::btree::max_entry_bytes(page_bytes) < needed {
        let whose = match &options.config {
            Some(c) => {
                let space = c.data.iter().find(|d| d.page_bytes == page_bytes);
                let name = space.map_or("?", |d| d.name.as_str());
                format!("--config: data space '{name}' has pages of {page_bytes} bytes, which is")
            }
            None => format!("--page-bytes {page_bytes} is"),
        };
        return Err(anyhow!(
            "{whose} too small for TPC-C's rows ({needed} bytes per entry)"
        ));
    }
    Ok(())
}

/// Room in a real-world data file for TPC-C of `o`: the loaded database
/// (about 100 MB a full warehouse, with B+tree slack and version headers)
/// and what a run adds, at least the files' usual size.
fn tpcc_data_bytes(o: &flashlab_workloads::tpcc::TpccOptions) -> u64 {
    TPCC_FILE_BYTES_PER_WAREHOUSE
        .saturating_mul(u64::from(o.warehouses))
        .max(flashlab_engine::config::FILE_CAPACITY_BYTES_DEFAULT)
}

/// Least scratch space a simulated run asks for: its log, rollback space
/// and a small database.
pub const SCRATCH_BYTES_MIN: u64 = 1 << 30;
/// Scratch room per TPC-B account or update-commit row: the row, its
/// B+tree share and its log.
const SCRATCH_BYTES_PER_ROW: u64 = 512;

/// Disk space the simulated devices of `options` need in the scratch
/// directory: the loaded database with room for the run, at least
/// [`SCRATCH_BYTES_MIN`]. An estimate, checked before any work; a device
/// that still finds the disk full reports an I/O error naming it.
pub fn scratch_need_bytes(options: &BenchOptions) -> u64 {
    let rows = match options.workload.as_str() {
        "tpcc" => return tpcc_data_bytes(&options.tpcc).max(SCRATCH_BYTES_MIN),
        "tpcb" => u64::from(options.scale) * u64::from(options.accounts_per_branch),
        _ => u64::from(options.scale) * 1000,
    };
    rows.saturating_mul(SCRATCH_BYTES_PER_ROW)
        .max(SCRATCH_BYTES_MIN)
}

fn check_writable_dir(dir: &Path) -> anyhow::Result<()> {
    if !dir.is_dir() {
        return Err(anyhow!("--real {}: not a directory", dir.display()));
    }
    let probe = dir.join(format!(".flashlab-probe-{}", std::process::id()));
    std::fs::write(&probe, b"probe")
        .map_err(|e| anyhow!("--real {}: not writable: {e}", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

fn db_config(options: &BenchOptions) -> DbConfig {
    let mut config = options.config.clone().unwrap_or_else(|| {
        DbConfig::simple(
            &options.data_device,
            &options.log_device,
            options.page_bytes,
            options.buffer_bytes,
        )
    });
    for (table, page_bytes) in &options.table_page_bytes {
        let mut space = config.data[0].clone();
        space.name = table.clone();
        space.page_bytes = *page_bytes;
        config.data.push(space);
    }
    if let Some(store) = options.data_store {
        for space in &mut config.data {
            space.store = store;
            space.ipl_log_segment_bytes = options.ipl_log_segment_bytes;
            space.ipl_no_commit_force = options.ipl_no_commit_force;
            space.ipl_no_selection = options.ipl_no_selection;
        }
    }
    for space in &mut config.data {
        if options.segment_bytes.is_some() {
            space.segment_bytes = options.segment_bytes;
        }
        if options.cleaning.is_some() {
            space.cleaning = options.cleaning;
        }
        space.write_through |= options.write_through;
    }
    if config.rollback.is_none() {
        config.rollback = Some(flashlab_engine::config::SpaceConfig {
            device: options.rollback_device.clone(),
            capacity_bytes: None,
            mirror: None,
        });
    }
    if options.write_scheduler {
        config.write_scheduler = true;
    }
    if options.rollback_aged_span_bytes > 0 {
        config.mvcc.aged_span_bytes = options.rollback_aged_span_bytes;
    }
    config.wal.durability = options.durability;
    config.mvcc.isolation = options.isolation;
    config.wal.commit_delay_ns = options.commit_delay_ns;
    config.wal.early_lock_release = options.early_lock_release;
    config.wal.group_wait = options.group_wait;
    config.wal.page_images = options.page_images;
    if options.log_bytes.is_some() {
        config.log.capacity_bytes = options.log_bytes;
    }
    config.cpu = match &options.cpu_costs {
        Some(costs) => costs.clone(),
        None => config.cpu.at_ghz(options.cpu_ghz),
    };
    config
}

/// Run a benchmark. `progress` receives each progress line.
pub fn bench(
    options: &BenchOptions,
    progress: impl FnMut(&Progress) + Send + 'static,
) -> anyhow::Result<BenchReport> {
    validate(options)?;
    let started = std::time::Instant::now();
    let mut report = match &options.real_dir {
        None => bench_simulated(options, progress)?,
        Some(dir) => bench_real(options, dir, progress)?,
    };
    report.host_seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

fn traced(device: DeviceRef, space: Space, tracer: &Option<Tracer>) -> DeviceRef {
    match tracer {
        Some(tracer) => Arc::new(TracedDevice::new(device, space, tracer.clone())),
        None => device,
    }
}

fn bench_simulated(
    options: &BenchOptions,
    progress: impl FnMut(&Progress) + Send + 'static,
) -> anyhow::Result<BenchReport> {
    in_simulated_world(options, move |options, _rt| {
        let config = db_config(&options);
        let tracer = options.trace.then(Tracer::new);
        // A benchmark never crashes its devices: they remember no write
        // for a crash to undo (STORE-6).
        let stored = stored_devices(&config, options.image.as_deref())?;
        for device in stored.stores() {
            device.store().lock().expect("store").turn_off_crash_model();
        }
        let devices = stored.devices;
        let devices = Devices {
            data: devices
                .data
                .into_iter()
                .map(|d| traced(d, Space::Data, &tracer))
                .collect(),
            log: traced(devices.log, Space::Log, &tracer),
            rollback: devices
                .rollback
                .map(|d| traced(d, Space::Rollback, &tracer)),
            temp: devices.temp,
        };
        if let Some(t) = &tracer {
            t.set_enabled(false);
        }
        let db = Database::open_with(&config, devices).map_err(|e| anyhow!("{e}"))?;
        run_on(
            &db,
            &options,
            "simulated",
            tracer.as_ref(),
            options.image.is_some(),
            None,
            progress,
        )
    })
}

/// Run `f` in a simulated world of the seed and cores of `options`, given a
/// copy of them and the world's runtime: its result, once the world ends.
fn in_simulated_world<T: Send + 'static>(
    options: &BenchOptions,
    f: impl FnOnce(BenchOptions, Rt) -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    let sim = SimConfig {
        seed: options.seed,
        cores: options.cores,
        ..SimConfig::default()
    };
    let options = options.clone();
    let (outcome, _) = Sim::run(sim, move |rt| f(options, rt)).map_err(|e| anyhow!("{e}"))?;
    outcome
        .finished()
        .ok_or_else(|| anyhow!("the simulation stopped early"))?
}

/// A simulated database as loaded: the contents of its devices, and what
/// the load took. Many runs start from one image, each on fresh device
/// models preloaded with these contents ([`presets::open_simulated_stored`]),
/// so a study of many configurations loads its database once.
pub struct DbImage {
    /// Each store is locked only to image it for a run.
    data: Vec<Mutex<SparseStore>>,
    log: Mutex<SparseStore>,
    rollback: Option<Mutex<SparseStore>>,
    /// Virtual and host seconds of the load, and the rows it bulk-loaded.
    pub load_seconds: f64,
    pub load_host_seconds: f64,
    pub load_bulk_rows: u64,
}

impl std::fmt::Debug for DbImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DbImage({} data spaces)", self.data.len())
    }
}

/// The simulated devices of a database, as [`stored_devices`] opens them.
struct StoredDevices {
    /// The devices an image holds: the data spaces, the log, the rollback
    /// space, in that order.
    imaged: Vec<Arc<dyn StoredDevice>>,
    /// The temp space, never imaged.
    temp: Option<Arc<dyn StoredDevice>>,
    /// All of them, as the database takes them.
    devices: Devices,
}

impl StoredDevices {
    /// Every store, imaged or not.
    fn stores(&self) -> impl Iterator<Item = &Arc<dyn StoredDevice>> {
        self.imaged.iter().chain(self.temp.iter())
    }
}

/// The simulated devices of `config`, started from `image` if given.
fn stored_devices(config: &DbConfig, image: Option<&DbImage>) -> anyhow::Result<StoredDevices> {
    let open = |name: &str, image: Option<&Mutex<SparseStore>>| {
        let image = image.map(|i| {
            i.lock()
                .expect("image")
                .image()
                .expect("images are flushed")
        });
        presets::open_simulated_stored(name, image).map_err(|e| anyhow!("{e}"))
    };
    let data = config
        .data
        .iter()
        .enumerate()
        .map(|(i, s)| open(&s.device, image.and_then(|m| m.data.get(i))))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let log = open(&config.log.device, image.map(|m| &m.log))?;
    let rollback = match &config.rollback {
        Some(s) => Some(open(&s.device, image.and_then(|m| m.rollback.as_ref()))?),
        None => None,
    };
    // The temp space is never imaged: it starts empty in every run.
    let temp = match &config.temp {
        Some(s) => Some(open(&s.device, None)?),
        None => None,
    };
    let mut imaged = data.clone();
    imaged.push(log.clone());
    imaged.extend(rollback.clone());
    let as_ref = |d: &Arc<dyn StoredDevice>| -> DeviceRef { d.clone() };
    // `[log] mirror`: a second copy of the log on a device of its own
    // (never imaged; a benchmark remembers no write for a crash to undo).
    let log_device = match &config.log.mirror {
        Some(name) => {
            let mirror = open(name, None)?;
            mirror.store().lock().expect("store").turn_off_crash_model();
            Arc::new(flashlab_engine::wal::mirror::MirroredLog::new(
                as_ref(&log),
                as_ref(&mirror),
            ))
        }
        None => as_ref(&log),
    };
    let devices = Devices {
        data: data.iter().map(as_ref).collect(),
        log: log_device,
        rollback: rollback.as_ref().map(as_ref),
        temp: temp.as_ref().map(as_ref),
    };
    Ok(StoredDevices {
        imaged,
        temp,
        devices,
    })
}

/// Load the database `options` describe in the simulated world, close it
/// cleanly, and keep its devices' contents for runs that start from it.
pub fn load_image(options: &BenchOptions) -> anyhow::Result<Arc<DbImage>> {
    validate(options)?;
    if options.real_dir.is_some() || options.config.as_ref().is_some_and(|c| c.temp.is_some()) {
        return Err(anyhow!(
            "a database image is made in the simulated world, without a temp space"
        ));
    }
    let image = in_simulated_world(options, move |options, rt| {
        let config = db_config(&options);
        let stored = stored_devices(&config, None)?;
        let db = Database::open_with(&config, stored.devices).map_err(|e| anyhow!("{e}"))?;
        let workload = build(&options.workload, &workload_options(&options))
            .ok_or_else(|| anyhow!("unknown workload"))?;
        let (start_ns, host) = (rt.now_ns(), std::time::Instant::now());
        workload.setup(&db).map_err(|e| anyhow!("loading: {e}"))?;
        let load_bulk_rows = db.stats().bulk_loaded_rows;
        db.close().map_err(|e| anyhow!("{e}"))?;
        let mut images = stored
            .imaged
            .iter()
            .map(|d| {
                let image = d.store().lock().expect("store").image();
                image
                    .map(Mutex::new)
                    .ok_or_else(|| anyhow!("a device still holds unflushed writes after the close"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let rollback = config
            .rollback
            .as_ref()
            .map(|_| images.pop().expect("rollback image"));
        let log = images.pop().expect("log image");
        Ok(DbImage {
            data: images,
            log,
            rollback,
            load_seconds: (rt.now_ns() - start_ns) as f64 / NS_PER_S as f64,
            load_host_seconds: host.elapsed().as_secs_f64(),
            load_bulk_rows,
        })
    })?;
    Ok(Arc::new(image))
}

/// The configuration of a real run: files for the data space and the log.
fn real_config(options: &BenchOptions) -> DbConfig {
    let mut config = db_config(options);
    config.data[0].device = "file".into();
    if options.workload == "tpcc" {
        // The default 1 GB data file fills at 10 warehouses; files grow on
        // demand up to this.
        let bytes = tpcc_data_bytes(&options.tpcc);
        for space in &mut config.data {
            space.capacity_bytes.get_or_insert(bytes);
        }
    }
    config.log.device = "file".into();
    config
}

/// The subdirectory of `dir` a real run without `--keep` builds its
/// database in (and removes at the end).
pub fn fresh_dir(dir: &Path) -> std::path::PathBuf {
    dir.join(format!("flashlab-bench-{}", std::process::id()))
}

fn bench_real(
    options: &BenchOptions,
    dir: &Path,
    progress: impl FnMut(&Progress) + Send + 'static,
) -> anyhow::Result<BenchReport> {
    let rt = RealRuntime::new(options.seed);
    let _enter = RealRuntime::enter(&rt);
    let existing = options.keep && dir.join(MANIFEST_FILE).exists();
    if let Some(path) = &options.acks {
        check_acks_path(path)?;
    }
    let db_dir = if options.keep {
        dir.to_path_buf()
    } else {
        let fresh = fresh_dir(dir);
        std::fs::create_dir(&fresh).map_err(|e| anyhow!("--real {}: {e}", fresh.display()))?;
        fresh
    };
    let config = real_config(options);
    let (mut created, mut loaded) = (false, false);
    let result = (|| {
        if !existing {
            Database::create_dir(&db_dir, &config).map_err(|e| anyhow!("{e}"))?;
            created = true;
        }
        let db = Database::open_dir(&db_dir, &config).map_err(|e| anyhow!("{e}"))?;
        let acks = options.acks.as_deref().map(ack_sink).transpose()?;
        let workload = build_workload(options)?;
        let load = load_phase(&db, workload.as_ref(), options, existing)?;
        loaded = true;
        let run = Run {
            world: "real",
            tracer: None,
            acks,
        };
        let report = run_loaded(&db, options, &workload, &load, run, progress)?;
        match db.close() {
            // A failed run's database refuses a clean close; the report
            // already names the failure, and recovery mends the rest.
            Err(_) if report.failure.is_some() => Ok(report),
            Err(e) => Err(anyhow!("{e}")),
            Ok(()) => Ok(report),
        }
    })();
    if !options.keep {
        let _ = std::fs::remove_dir_all(&db_dir);
    } else if created && !loaded {
        // A database this run created and could not load holds nothing
        // acknowledged, and would make every retry continue on it. Once
        // loaded, a database is the user's: never removed, whatever fails.
        if let Err(problem) = result {
            return Err(match flashlab_engine::db::dir::remove_created(&db_dir) {
                Ok(()) => anyhow!(
                    "{problem}; removed the half-loaded database in {} (nothing was acknowledged in it)",
                    db_dir.display()
                ),
                Err(e) => anyhow!("{problem} (and removing the half-loaded database: {e})"),
            });
        }
    }
    result
}

/// `--acks PATH`, before any database is made: not a directory, and in
/// one that exists (the file itself is opened once the database is).
fn check_acks_path(path: &Path) -> anyhow::Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if path.is_dir() {
        return Err(anyhow!("--acks {}: is a directory", path.display()));
    }
    if !parent.is_dir() {
        return Err(anyhow!(
            "--acks {}: no directory {}",
            path.display(),
            parent.display()
        ));
    }
    Ok(())
}

/// Appends acknowledged ids to `path`, one line each, written (not
/// buffered) as each arrives: a process killed right after an
/// acknowledgement has it in the file. The file is evidence: a failed
/// write fails the run (the driver stops it).
fn ack_sink(path: &Path) -> anyhow::Result<AckSink> {
    use std::io::Write;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| anyhow!("--acks {}: {e}", path.display()))?;
    let file = std::sync::Mutex::new(file);
    let shown = path.display().to_string();
    Ok(Arc::new(move |id: i64| {
        let mut file = file.lock().unwrap_or_else(|p| p.into_inner());
        file.write_all(format!("{id}\n").as_bytes())
            .map_err(|e| format!("--acks {shown}: acknowledged commit {id} not recorded: {e}"))
    }))
}

fn workload_options(options: &BenchOptions) -> WorkloadOptions {
    WorkloadOptions {
        scale: options.scale,
        accounts_per_branch: options.accounts_per_branch,
        tpcc: flashlab_workloads::tpcc::TpccOptions {
            seed: options.seed,
            ..options.tpcc.clone()
        },
    }
}

/// What a report calls a device: the preset in the simulated world; in the
/// real world the database directory's file (an In-Page Logging space is
/// raw NAND of the preset's geometry kept in its file).
fn device_named(
    options: &BenchOptions,
    world: &str,
    preset: &str,
    file: &str,
    nand: bool,
) -> String {
    let Some(dir) = options.real_dir.as_ref().filter(|_| world == "real") else {
        return preset.to_string();
    };
    let dir = match options.keep {
        true => dir.clone(),
        false => fresh_dir(dir),
    };
    let path = dir.join(file);
    match nand {
        true => format!("file {} as raw NAND of {preset}'s geometry", path.display()),
        false => format!("file {}", path.display()),
    }
}

/// What the database held and had done when its load (or resume) ended:
/// the baseline a run's own counters are measured from.
struct Loaded {
    /// Transactions the database held before this run (a kept database).
    earlier: u64,
    counters: Vec<flashlab_engine::db::SpaceStoreCounters>,
    /// The first data device's host pages written, flash pages written
    /// and erases, if it is a modelled SSD.
    flash: Option<[u64; 3]>,
    /// The log device's full merges, if it is a modelled device.
    log_full_merges: Option<u64>,
    stores: Vec<(String, flashlab_engine::store::StoreStats)>,
    /// The buffer pools' counters, all pools summed.
    buffer: flashlab_engine::buffer::BufferStats,
    seconds: f64,
    host_seconds: f64,
    bulk_rows: u64,
}

/// The first data device's flash counters, if it models flash.
fn flash_counts(db: &Database) -> Option<[u64; 3]> {
    db.devices()
        .data
        .first()
        .and_then(|d| d.model_stats())
        .map(|m| [m.host_pages_written, m.flash_pages_written, m.erases])
}

/// The log device's full merges so far, if it is a modelled device.
fn log_full_merges(db: &Database) -> Option<u64> {
    db.devices().log.model_stats().map(|m| m.full_merges)
}

/// Load the workload's data (or resume a kept database) and flush it.
fn load_phase(
    db: &Database,
    workload: &dyn flashlab_workloads::Workload,
    options: &BenchOptions,
    existing: bool,
) -> anyhow::Result<Loaded> {
    let rt = flashlab_runtime::Rt::current();
    let (start_ns, host) = (rt.now_ns(), std::time::Instant::now());
    let earlier = if existing {
        workload
            .resume(db)
            .map_err(|e| anyhow!("continuing on the existing database: {e}"))?
    } else {
        workload.setup(db).map_err(|e| anyhow!("loading: {e}"))?;
        0
    };
    db.flush().map_err(|e| anyhow!("{e}"))?;
    let counters = db.store_counters();
    let flash = flash_counts(db);
    let log_merges = log_full_merges(db);
    if let Some(hook) = &options.on_loaded {
        (hook.0)();
    }
    Ok(Loaded {
        earlier,
        counters,
        flash,
        log_full_merges: log_merges,
        seconds: (rt.now_ns() - start_ns) as f64 / NS_PER_S as f64,
        host_seconds: host.elapsed().as_secs_f64(),
        bulk_rows: db.stats().bulk_loaded_rows,
        stores: db.store_stats(),
        buffer: buffer_totals(db),
    })
}

/// The buffer pools' counters, all pools summed.
fn buffer_totals(db: &Database) -> flashlab_engine::buffer::BufferStats {
    db.stats()
        .buffers
        .values()
        .fold(Default::default(), |sum, s| buffer_step(&sum, s, 1))
}

/// `a + sign * b`, counter by counter (`sign` 1 or -1; a difference of
/// counters that only grow never goes below 0).
fn buffer_step(
    a: &flashlab_engine::buffer::BufferStats,
    b: &flashlab_engine::buffer::BufferStats,
    sign: i8,
) -> flashlab_engine::buffer::BufferStats {
    let f = |x: u64, y: u64| {
        if sign < 0 { x.saturating_sub(y) } else { x + y }
    };
    flashlab_engine::buffer::BufferStats {
        hits: f(a.hits, b.hits),
        misses: f(a.misses, b.misses),
        reads: f(a.reads, b.reads),
        writes: f(a.writes, b.writes),
        evictions: f(a.evictions, b.evictions),
        foreground_dirty_evictions: f(a.foreground_dirty_evictions, b.foreground_dirty_evictions),
        cleaner_pages: f(a.cleaner_pages, b.cleaner_pages),
        cleaner_requests: f(a.cleaner_requests, b.cleaner_requests),
        repairs: f(a.repairs, b.repairs),
    }
}

fn run_on(
    db: &Database,
    options: &BenchOptions,
    world: &str,
    tracer: Option<&Tracer>,
    existing: bool,
    acks: Option<AckSink>,
    progress: impl FnMut(&Progress) + Send,
) -> anyhow::Result<BenchReport> {
    let workload = build_workload(options)?;
    let loaded = load_phase(db, workload.as_ref(), options, existing)?;
    let run = Run {
        world,
        tracer,
        acks,
    };
    run_loaded(db, options, &workload, &loaded, run, progress)
}

/// The workload `options` name.
fn build_workload(options: &BenchOptions) -> anyhow::Result<Arc<dyn flashlab_workloads::Workload>> {
    let workload = build(&options.workload, &workload_options(options))
        .ok_or_else(|| anyhow!("unknown workload"))?;
    Ok(Arc::from(workload))
}

/// Where a loaded run goes: its world, its tracer, its acknowledgements.
struct Run<'a> {
    world: &'a str,
    tracer: Option<&'a Tracer>,
    acks: Option<AckSink>,
}

/// Run the clients on a loaded database and build the report. A run a
/// client's failure stopped is reported as far as it got, with the
/// failure ([`BenchReport::failure`]) and without the consistency check,
/// which a failed database cannot answer.
fn run_loaded(
    db: &Database,
    options: &BenchOptions,
    workload: &Arc<dyn flashlab_workloads::Workload>,
    loaded: &Loaded,
    run: Run<'_>,
    progress: impl FnMut(&Progress) + Send,
) -> anyhow::Result<BenchReport> {
    if let Some(t) = run.tracer {
        t.set_enabled(true);
    }
    let run_config = RunConfig {
        clients: options.clients,
        duration_ns: options.duration_ns,
        warmup_ns: options.warmup_ns,
        progress_interval_ns: options.progress_interval_ns,
    };
    let run_host = std::time::Instant::now();
    let result = flashlab_workloads::driver::run_with_acks(
        db,
        workload.clone(),
        &run_config,
        run.acks,
        progress,
    );
    let run_host_seconds = run_host.elapsed().as_secs_f64();
    if let Some(t) = run.tracer {
        t.set_enabled(false);
    }
    let committed_total = result.committed_total;
    let consistency = match &result.failure {
        Some(_) => "not checked: the run failed".to_string(),
        None => match workload
            .check(db, loaded.earlier + committed_total)
            .map_err(|e| anyhow!("{e}"))?
        {
            Ok(()) => "ok".to_string(),
            Err(violation) => violation,
        },
    };
    let trace = run.tracer.map(|t| t.records()).unwrap_or_default();
    let departures = workload.departures();
    let mut report = report(options, run.world, result, consistency, departures, trace);
    report.rollback = db.stats().rollback;
    report.run_host_seconds = run_host_seconds;
    report.run_transactions = committed_total;
    add_store_reports(&mut report, db, loaded, committed_total);
    (
        report.load_seconds,
        report.load_host_seconds,
        report.load_bulk_rows,
    ) = match &options.image {
        Some(image) => (
            image.load_seconds,
            image.load_host_seconds,
            image.load_bulk_rows,
        ),
        None => (loaded.seconds, loaded.host_seconds, loaded.bulk_rows),
    };
    if options.workload == "tpcc" {
        add_tpcc_summary(&mut report, options, workload.as_ref());
    }
    Ok(report)
}

/// The data spaces' page-store work and flash counts of the run alone.
fn add_store_reports(report: &mut BenchReport, db: &Database, loaded: &Loaded, commits: u64) {
    let own_counters = store_counters_since(&loaded.counters, &db.store_counters());
    report.data_flash = flash_counts(db)
        .zip(loaded.flash)
        .map(|(a, b)| [a[0] - b[0], a[1] - b[1], a[2] - b[2]]);
    report.log_full_merges = log_full_merges(db)
        .zip(loaded.log_full_merges)
        .map(|(a, b)| a - b);
    report.buffer = buffer_step(&buffer_totals(db), &loaded.buffer, -1);
    report.data_stores = loaded
        .stores
        .iter()
        .zip(db.store_stats())
        .zip(&db.config().data)
        .map(|(((space, before), (_, after)), config)| StoreReport {
            space: space.clone(),
            store: config.store.name().to_string(),
            stats: store_delta(before, &after),
            counters: own_counters
                .iter()
                .find(|(s, _)| s == space)
                .map(|(_, c)| c.clone())
                .unwrap_or_default(),
            commits,
        })
        .collect();
}

/// TPC-C's per-type summary, and its retries in the report's count.
fn add_tpcc_summary(
    report: &mut BenchReport,
    options: &BenchOptions,
    workload: &dyn flashlab_workloads::Workload,
) {
    let summary = flashlab_workloads::tpcc::TpccSummary::new(
        options.tpcc.warehouses,
        report.duration_s,
        workload.transaction_types(),
    );
    report.retries += summary.transactions.iter().map(|x| x.retries).sum::<u64>();
    report.tpcc = Some(summary);
}

fn report(
    options: &BenchOptions,
    world: &str,
    r: RunResult,
    consistency: String,
    departures: Vec<String>,
    trace: Vec<TraceRecord>,
) -> BenchReport {
    BenchReport {
        workload: r.workload,
        world: world.into(),
        clients: r.clients,
        cores: options.cores,
        cpu_ghz: options.cpu_ghz,
        log_device: device_named(options, world, &options.log_device, "log.wal", false),
        data_device: device_named(
            options,
            world,
            &options.data_device,
            "data.data",
            options.data_store == Some(flashlab_engine::store::StoreKind::Ipl),
        ),
        durability: match options.early_lock_release {
            true => format!("{}, early lock release", options.durability.as_str()),
            false => options.durability.as_str().into(),
        },
        duration_s: r.measured_s,
        committed: r.committed,
        retries: r.retries,
        tps: r.tps,
        latency_ms: r.latency_ms,
        cpu_utilization: r.cpu_utilization,
        cpu_per_core: r.cpu_per_core,
        log: LogColumns {
            writes: r.log.writes,
            commits_per_write: r.log.commits_per_write,
            avg_write_sectors: r.log.avg_write_sectors,
            avg_write_ms: r.log.avg_write_ms,
            tail_rewrites: r.log.tail_rewrites,
            bytes_per_commit: r.log.bytes_per_commit,
            page_image_bytes_per_commit: r.log.page_image_bytes_per_commit,
            page_images: options.page_images,
            wraps: r.log.wraps,
            log_full: r.log.log_full,
            group_waits: r.log.group_waits,
            group_waits_filled: r.log.group_waits_filled,
            group_wait_us_mean: r.log.group_wait_us_mean,
            room_forces: r.log.room_forces,
            latched_forces: r.log.latched_forces,
        },
        consistency,
        rollback: Default::default(),
        departures,
        progress: r.progress,
        load_seconds: 0.0,
        load_host_seconds: 0.0,
        load_bulk_rows: 0,
        tpcc: None,
        data_flash: None,
        log_full_merges: None,
        host_seconds: 0.0,
        run_host_seconds: 0.0,
        run_transactions: 0,
        failure: r.failure,
        data_stores: Vec::new(),
        buffer: Default::default(),
        trace,
    }
}
