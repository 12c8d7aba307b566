//! `flashlab bench WORKLOAD --clients N --cores C --duration D --log-device X
//! --data-device Y [--scale S] [--real DIR] [--seed S] [--json] [--trace FILE]
//! [--config FILE]`
//!
//! `flashlab bench tpcc --warehouses W [--terminals T] [--mix 45,43,4,4,4]
//! [--items N] [--customers-per-district N] [--think]`: TPC-C, with tpmC,
//! tpmTotal, efficiency and a line per transaction type.

use std::io::IsTerminal;
use std::path::PathBuf;

/// Clients of `bench` when `--clients` is not given (tpcc: 10 per warehouse).
const DEFAULT_CLIENTS: u32 = 20;
/// Largest log accepted by `--log-mb` (1 TiB).
const LOG_MB_MAX: u64 = 1 << 20;

use anyhow::bail;
use flashlab_devices::trace::formats::write_flashlab_csv;
use flashlab_engine::{DbConfig, Durability};
use std::sync::{Arc, Mutex};

use flashlab_lab::bench::{BenchOptions, BenchReport, LoadedHook, bench};

use super::interrupt::{self, Registered};
use flashlab_runtime::NS_PER_S;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// update-commit, tpcb, tpcc, or a temp-space operator: sort, hash-join, merge-join.
    workload: String,
    /// Clients running transactions back to back (default 20).
    #[arg(long)]
    clients: Option<u32>,
    /// tpcc: warehouses (default 1).
    #[arg(long)]
    warehouses: Option<u32>,
    /// tpcc: terminals (the clients; default 10 per warehouse).
    #[arg(long)]
    terminals: Option<u32>,
    /// tpcc: percent of new-order, payment, order-status, delivery, stock-level (default 45,43,4,4,4).
    #[arg(long)]
    mix: Option<String>,
    /// tpcc: items and stock rows per warehouse (default the specification's 100,000).
    #[arg(long)]
    items: Option<u32>,
    /// tpcc: customers and initial orders per district (default the specification's 3,000).
    #[arg(long)]
    customers_per_district: Option<u32>,
    /// tpcc: keying and think times (off by default: maximum throughput).
    #[arg(long)]
    think: bool,
    /// tpcc with --think: divide keying and think times by this (a scaled-down study; default 1).
    #[arg(long)]
    think_divisor: Option<f64>,
    /// tpcc: terminals work on the first N of the loaded warehouses (default all).
    #[arg(long)]
    active_warehouses: Option<u32>,
    /// tpcc: database connections the terminals share, as DBT2's 20 (default: one per terminal).
    #[arg(long)]
    connections: Option<u32>,
    /// tpcc: how the load's pages reach the log: `minimal` (not at all, a
    /// checkpoint per table makes them durable; the default) or
    /// `page-images` (each page's image logged once).
    #[arg(long, value_enum)]
    load_logging: Option<LoadLogging>,
    /// Simulated CPU cores.
    #[arg(long, default_value_t = 2)]
    cores: u32,
    /// Clock of the simulated cores (a profile's prices move with 1/clock).
    #[arg(long, default_value_t = 1.86)]
    cpu_ghz: f64,
    /// The system profile the simulated CPU charges (`flashlab devices`
    /// lists them): lee2008 (the default), petrov2010, or engine (the
    /// engine's own prices, unscaled).
    #[arg(long)]
    cpu_profile: Option<String>,
    /// Measured time: 10s, 500ms, 2m (plain numbers are seconds).
    #[arg(long, default_value = "10s")]
    duration: String,
    /// Warm-up before measuring.
    #[arg(long, default_value = "1s")]
    warmup: String,
    /// Device of the log: a preset of `flashlab devices` (simulated world).
    #[arg(long, default_value = "ssd-2008")]
    log_device: String,
    /// Device of the data spaces: a preset of `flashlab devices` (simulated world).
    #[arg(long, default_value = "memory")]
    data_device: String,
    /// Device of the rollback space (MVCC before-images).
    #[arg(long, default_value = "memory")]
    rollback_device: String,
    /// tpcb: branches; update-commit: thousands of rows (default 1).
    #[arg(long)]
    scale: Option<u32>,
    /// tpcb: accounts per branch (default the specification's 100,000).
    #[arg(long)]
    accounts_per_branch: Option<u32>,
    /// Data page size in bytes.
    #[arg(long, default_value_t = 8192)]
    page_bytes: usize,
    /// tpcc: give TABLE a data space of its own with pages of BYTES (repeatable), e.g. stock=4096.
    #[arg(long, value_name = "TABLE=BYTES")]
    table_page_bytes: Vec<String>,
    /// Page store of the data spaces: in-place (the default) or another
    /// layout (see `flashlab devices` and ARCHITECTURE.md).
    #[arg(long, value_name = "STORE")]
    data_store: Option<String>,
    /// With --data-store ipl: KB of each erase unit's log segment (4, 8, 16 or 32; default 8).
    #[arg(long, value_name = "KB")]
    ipl_log_segment_kb: Option<u64>,
    /// With --data-store ipl: on (lee2007: a commit forces the space; restart needs no redo of its pages) or off (commits durable by the WAL; restart redoes them).
    #[arg(long, value_name = "on|off")]
    ipl_commit_force: Option<String>,
    /// With --data-store ipl: on (the default; lee2007's selective merges and abort de-application, where a replay shows they change no page) or off (merges apply every record).
    #[arg(long, value_name = "on|off")]
    ipl_selection: Option<String>,
    /// on: the page cleaner's and checkpoints' write-backs go through
    /// an elevator stage that sorts and merges them (as Linux's block layer
    /// does); off (the default): one request each.
    #[arg(long, default_value = "off")]
    write_scheduler: String,
    /// Log-structured data spaces: bytes per segment (default 8 MiB, 2,048
    /// blocks of 4 KB as wang2010's NILFS2).
    #[arg(long, value_name = "BYTES")]
    segment_bytes: Option<u64>,
    /// Log-structured data spaces: segment cleaning, off, greedy (the
    /// default) or cost-benefit.
    #[arg(long, value_name = "POLICY")]
    cleaning: Option<String>,
    /// Log-structured data spaces: on writes each page at once as its own
    /// partial segment (summary and page), as a synchronous write on a
    /// log-structured file system; off (the default) gathers up to 1 MiB.
    #[arg(long, default_value = "off")]
    write_through: String,
    /// Buffer pool size in MB.
    #[arg(long, default_value_t = 512)]
    buffer_mb: u64,
    /// sync (group commit, the default) or no-sync.
    #[arg(long, default_value = "sync")]
    durability: String,
    /// read-committed (the default, as the papers' server) or snapshot.
    #[arg(long, default_value = "read-committed")]
    isolation: String,
    /// Commit delay in microseconds.
    #[arg(long, default_value_t = 0)]
    commit_delay_us: u64,
    /// Release a committing transaction's row locks once its commit record
    /// is appended, before the log force (as InnoDB does). Off by default,
    /// as the papers' servers are modelled.
    #[arg(long)]
    early_lock_release: bool,
    /// Real world: force at once, without waiting for the commits of the
    /// last group (the flusher's group wait is on by default).
    #[arg(long)]
    no_group_wait: bool,
    /// Run in the real world on files in a fresh subdirectory of DIR.
    #[arg(long)]
    real: Option<PathBuf>,
    /// With --real: keep the database in DIR itself, and continue on the
    /// one already there (after recovering it) instead of a fresh one.
    #[arg(long)]
    keep: bool,
    /// Append each acknowledged TPC-B history id to FILE as it commits.
    #[arg(long)]
    acks: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Write the I/O trace of the measured interval (flashlab CSV).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Full-page images in the log after each checkpoint (torn-page
    /// repair): on or off.
    #[arg(long, default_value = "on")]
    page_images: String,
    /// Size of the log in MB (default: the whole log device, or 1 GB of
    /// file in the real world). The log is recycled within it.
    #[arg(long)]
    log_mb: Option<u64>,
    /// A database configuration (TOML) to start from.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Seconds between progress lines (0: none).
    #[arg(long, default_value_t = 1.0)]
    progress: f64,
    // The temp-space operators (sort, hash-join, merge-join): see bench_ops.
    /// sort, hash-join, merge-join: bytes of each input (1GB, 500MB).
    #[arg(long)]
    size: Option<String>,
    /// sort, hash-join, merge-join: the operator's memory budget (64MB).
    #[arg(long)]
    memory: Option<String>,
    /// sort, hash-join, merge-join: the temp cluster size (2KB to 256KB).
    #[arg(long)]
    cluster: Option<String>,
    /// sort, hash-join, merge-join: the temp device of a simulated run.
    #[arg(long, default_value = "ssd-2008")]
    temp_device: String,
    /// sort --real: also time GNU sort on the same records and compare outputs.
    #[arg(long)]
    gnu_sort: bool,
    /// sort, merge-join, hash-join: read each cluster when it is needed,
    /// without the overlapped (forecast) reads ahead of need.
    #[arg(long)]
    no_overlap: bool,
}

/// What a signal does to a real run's files: a fresh database (without
/// --keep) is removed; a --keep database is kept and named, except one this
/// run creates, which is removed until its loading is complete.
fn on_signal(options: &mut BenchOptions) -> Option<Arc<Mutex<Vec<Registered>>>> {
    let dir = options.real_dir.clone()?;
    let registered = if !options.keep {
        vec![interrupt::remove_on_interrupt(
            &flashlab_lab::bench::fresh_dir(&dir),
        )]
    } else if dir.join(flashlab_engine::db::dir::MANIFEST_FILE).exists() {
        vec![interrupt::keep_on_interrupt(&dir)]
    } else {
        let mut loading: Vec<Registered> = flashlab_lab::bench::created_paths(options, &dir)
            .iter()
            .filter(|p| !p.exists())
            .map(|p| interrupt::remove_on_interrupt(p))
            .collect();
        let keep_dir = dir.clone();
        let shared = Arc::new(Mutex::new(std::mem::take(&mut loading)));
        let hook_state = shared.clone();
        options.on_loaded = Some(LoadedHook(Arc::new(move || {
            let mut held = hook_state.lock().unwrap_or_else(|p| p.into_inner());
            *held = vec![interrupt::keep_on_interrupt(&keep_dir)];
        })));
        return Some(shared);
    };
    Some(Arc::new(Mutex::new(registered)))
}

/// --buffer-mb in bytes, within the engine's limit and this machine's memory.
fn buffer_bytes(mb: u64) -> anyhow::Result<u64> {
    use flashlab_engine::config::{BUFFER_BYTES_MAX, machine_memory_bytes};
    let bytes = mb.checked_mul(1 << 20).filter(|&b| b <= BUFFER_BYTES_MAX);
    let Some(bytes) = bytes else {
        bail!(
            "--buffer-mb {mb} is more than the limit of {} MB",
            BUFFER_BYTES_MAX >> 20
        );
    };
    if let Some(memory) = machine_memory_bytes().filter(|&m| bytes > m) {
        bail!(
            "--buffer-mb {mb} is more than this machine's memory ({} MB)",
            memory >> 20
        );
    }
    Ok(bytes)
}

/// Parse "10s", "500ms", "2m", "1h" or a plain number of seconds.
pub fn parse_duration_ns(text: &str, what: &str) -> anyhow::Result<u64> {
    let t = text.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e9)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60e9)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600e9)
    } else {
        (t, 1e9)
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("{what} '{text}' is not a duration (try 10s, 500ms, 2m)"))?;
    if !value.is_finite() || value < 0.0 || value * scale > 1e16 {
        bail!("{what} '{text}' is out of range");
    }
    Ok((value * scale) as u64)
}

/// The run's options from the command line (every flag checked; the
/// workload's own rules are checked by `bench::validate`).
fn options(args: &Args) -> anyhow::Result<BenchOptions> {
    let durability = Durability::parse(&args.durability).ok_or_else(|| {
        anyhow::anyhow!("--durability '{}' must be sync or no-sync", args.durability)
    })?;
    let config = match &args.config {
        Some(path) => Some(DbConfig::from_file(path)?),
        None => None,
    };
    if !(args.progress.is_finite() && args.progress >= 0.0) {
        bail!("--progress must be a number of seconds");
    }
    let tpcc = tpcc_options(args)?;
    let clients = clients(args, &tpcc)?;
    Ok(BenchOptions {
        workload: args.workload.clone(),
        clients,
        tpcc,
        cores: args.cores,
        cpu_ghz: args.cpu_ghz,
        cpu_costs: cpu_profile_costs(args.cpu_profile.as_deref(), args.cpu_ghz)?,
        duration_ns: parse_duration_ns(&args.duration, "--duration")?,
        warmup_ns: parse_duration_ns(&args.warmup, "--warmup")?,
        log_device: args.log_device.clone(),
        data_device: args.data_device.clone(),
        rollback_device: args.rollback_device.clone(),
        scale: args.scale.unwrap_or(1),
        accounts_per_branch: args
            .accounts_per_branch
            .unwrap_or(flashlab_workloads::tpcb::ACCOUNTS_PER_BRANCH),
        page_bytes: args.page_bytes,
        buffer_bytes: buffer_bytes(args.buffer_mb)?,
        durability,
        isolation: parse_isolation(&args.isolation)?,
        commit_delay_ns: args.commit_delay_us * 1_000,
        early_lock_release: args.early_lock_release,
        group_wait: !args.no_group_wait,
        real_dir: args.real.clone(),
        keep: args.keep,
        acks: args.acks.clone(),
        seed: args.seed,
        trace: args.trace.is_some(),
        progress_interval_ns: (args.progress * NS_PER_S as f64) as u64,
        page_images: on_off("--page-images", &args.page_images)?,
        log_bytes: match args.log_mb {
            Some(mb @ 1..=LOG_MB_MAX) => Some(mb << 20),
            Some(mb) => bail!("--log-mb {mb} must be from 1 to {LOG_MB_MAX}"),
            None => None,
        },
        config,
        on_loaded: None,
        image: None,
        table_page_bytes: parse_table_pages(&args.table_page_bytes)?,
        rollback_aged_span_bytes: 0,
        write_scheduler: on_off("--write-scheduler", &args.write_scheduler)?,
        ipl_log_segment_bytes: args.ipl_log_segment_kb.map(|kb| kb.saturating_mul(1024)),
        ipl_no_commit_force: !on_unless_off("--ipl-commit-force", &args.ipl_commit_force)?,
        ipl_no_selection: !on_unless_off("--ipl-selection", &args.ipl_selection)?,
        data_store: args
            .data_store
            .as_deref()
            .map(parse_data_store)
            .transpose()?,
        segment_bytes: args.segment_bytes,
        write_through: on_off("--write-through", &args.write_through)?,
        cleaning: args.cleaning.as_deref().map(parse_cleaning).transpose()?,
    })
}

/// Flags of one workload given to another are refused, naming the flag:
/// a flag that silently does nothing misleads whoever reads the command.
fn refuse_irrelevant(args: &Args) -> anyhow::Result<()> {
    let workload = args.workload.as_str();
    let tpcc_only = [
        ("--warehouses", args.warehouses.is_some()),
        ("--mix", args.mix.is_some()),
        ("--items", args.items.is_some()),
        (
            "--customers-per-district",
            args.customers_per_district.is_some(),
        ),
        ("--think", args.think),
        ("--active-warehouses", args.active_warehouses.is_some()),
        ("--connections", args.connections.is_some()),
        ("--terminals", args.terminals.is_some()),
        ("--load-logging", args.load_logging.is_some()),
    ];
    for (flag, given) in tpcc_only {
        if given && workload != "tpcc" {
            bail!("{flag} is an option of the tpcc workload, not of {workload}");
        }
    }
    let operator_only = [
        ("--size", args.size.is_some()),
        ("--memory", args.memory.is_some()),
        ("--cluster", args.cluster.is_some()),
        ("--gnu-sort", args.gnu_sort),
        ("--no-overlap", args.no_overlap),
    ];
    let operator = super::bench_ops::WORKLOADS.contains(&workload);
    for (flag, given) in operator_only {
        if given && !operator {
            bail!(
                "{flag} is an option of the temp-space operators (sort, hash-join, merge-join), not of {workload}"
            );
        }
    }
    if args.think_divisor.is_some() && !args.think {
        bail!("--think-divisor divides the think times of --think, which is not given");
    }
    if args.accounts_per_branch.is_some() && workload != "tpcb" {
        bail!("--accounts-per-branch is an option of the tpcb workload, not of {workload}");
    }
    if args.scale.is_some() && workload == "tpcc" {
        bail!("--scale is not an option of tpcc (give --warehouses)");
    }
    if args.clients.is_some() && workload == "tpcc" {
        bail!("--clients: give tpcc --terminals instead");
    }
    if args.cpu_profile.is_some() && args.real.is_some() {
        bail!("--cpu-profile prices the simulated CPU; with --real the real CPU does the work");
    }
    Ok(())
}

/// TPC-C's options from the command line, defaults where not given.
fn tpcc_options(args: &Args) -> anyhow::Result<flashlab_workloads::tpcc::TpccOptions> {
    use flashlab_workloads::tpcc::{CUSTOMERS_PER_DISTRICT, ITEMS, Mix, TpccOptions};
    Ok(TpccOptions {
        warehouses: args.warehouses.unwrap_or(1),
        items: args.items.unwrap_or(ITEMS),
        customers_per_district: args
            .customers_per_district
            .unwrap_or(CUSTOMERS_PER_DISTRICT),
        mix: Mix::parse(args.mix.as_deref().unwrap_or("45,43,4,4,4"))
            .map_err(anyhow::Error::msg)?,
        think: args.think,
        think_divisor: args.think_divisor.unwrap_or(1.0),
        active_warehouses: args.active_warehouses.unwrap_or(0),
        connections: args.connections.unwrap_or(0),
        seed: args.seed,
        load_logging: match args.load_logging {
            None | Some(LoadLogging::Minimal) => flashlab_engine::BulkLogging::Minimal,
            Some(LoadLogging::PageImages) => flashlab_engine::BulkLogging::PageImages,
        },
    })
}

/// `--load-logging`: the engine's [`flashlab_engine::BulkLogging`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LoadLogging {
    Minimal,
    PageImages,
}

/// The run's clients: --clients, or tpcc's --terminals (default 10 for
/// each active warehouse, which must then be within the driver's limit).
fn clients(args: &Args, tpcc: &flashlab_workloads::tpcc::TpccOptions) -> anyhow::Result<u32> {
    use flashlab_workloads::driver::CLIENTS_MAX;
    use flashlab_workloads::tpcc::TERMINALS_PER_WAREHOUSE;
    if args.workload != "tpcc" {
        return Ok(args.clients.unwrap_or(DEFAULT_CLIENTS));
    }
    if let Some(terminals) = args.terminals {
        return Ok(terminals);
    }
    let terminals = u64::from(tpcc.active()) * u64::from(TERMINALS_PER_WAREHOUSE);
    if terminals > u64::from(CLIENTS_MAX) {
        bail!(
            "--warehouses {} means {terminals} terminals ({TERMINALS_PER_WAREHOUSE} a warehouse), more than the limit of {CLIENTS_MAX}: give --terminals, or --active-warehouses",
            tpcc.warehouses
        );
    }
    Ok(terminals as u32)
}

/// `--isolation`: read-committed or snapshot.
fn parse_isolation(name: &str) -> anyhow::Result<flashlab_engine::mvcc::Isolation> {
    match name {
        "read-committed" => Ok(flashlab_engine::mvcc::Isolation::ReadCommitted),
        "snapshot" => Ok(flashlab_engine::mvcc::Isolation::Snapshot),
        other => bail!("--isolation '{other}' must be read-committed or snapshot"),
    }
}

/// `--data-store`: a page store's name.
fn parse_data_store(name: &str) -> anyhow::Result<flashlab_engine::store::StoreKind> {
    flashlab_engine::store::StoreKind::parse(name).ok_or_else(|| {
        anyhow::anyhow!(
            "--data-store '{name}': no such page store (known: {})",
            flashlab_engine::store::StoreKind::names().join(", ")
        )
    })
}

/// `--cleaning`: a segment-cleaning policy's name.
fn parse_cleaning(name: &str) -> anyhow::Result<flashlab_engine::store::Cleaning> {
    flashlab_engine::store::Cleaning::parse(name).ok_or_else(|| {
        anyhow::anyhow!(
            "--cleaning '{name}': no such policy (known: {})",
            flashlab_engine::store::Cleaning::names().join(", ")
        )
    })
}

/// An optional `on` or `off` for `flag`, on when not given.
fn on_unless_off(flag: &str, value: &Option<String>) -> anyhow::Result<bool> {
    match value.as_deref() {
        None | Some("on") => Ok(true),
        Some("off") => Ok(false),
        Some(other) => bail!("{flag} '{other}' must be on or off"),
    }
}

/// `on` or `off` for `flag`.
fn on_off(flag: &str, value: &str) -> anyhow::Result<bool> {
    match value {
        "on" => Ok(true),
        "off" => Ok(false),
        other => bail!("{flag} '{other}' must be on or off"),
    }
}

/// Scratch space the run's simulated devices need; `None` in the real
/// world.
pub fn scratch_need_bytes(args: &Args) -> anyhow::Result<Option<u64>> {
    // The arguments' own errors come first: they name the flag at fault.
    refuse_irrelevant(args)?;
    if args.real.is_some() {
        return Ok(None);
    }
    if super::bench_ops::WORKLOADS.contains(&args.workload.as_str()) {
        return super::bench_ops::scratch_need_bytes(args.size.as_deref()).map(Some);
    }
    let options = options(args)?;
    flashlab_lab::bench::validate(&options)?;
    Ok(Some(flashlab_lab::bench::scratch_need_bytes(&options)))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    refuse_irrelevant(&args)?;
    if super::bench_ops::WORKLOADS.contains(&args.workload.as_str()) {
        return super::bench_ops::run(super::bench_ops::OpsArgs {
            workload: args.workload,
            real: args.real,
            size: args.size,
            memory: args.memory,
            cluster: args.cluster,
            temp_device: args.temp_device,
            gnu_sort: args.gnu_sort,
            overlap: !args.no_overlap,
            seed: args.seed,
            json: args.json,
        });
    }
    let mut options = options(&args)?;
    flashlab_lab::bench::validate(&options)?;
    let trace_out = args
        .trace
        .as_deref()
        .map(|path| super::output::OutputFile::create("--trace", path))
        .transpose()?;
    let _on_signal = on_signal(&mut options);
    let bar = progress_bar(&mut options);
    let bar_for_lines = bar.clone();
    let quiet = args.json;
    let report = bench(&options, move |p| {
        let mut line = format!(
            "progress: {:.1} s, {:.1} tps, lat {:.3} ms mean, {:.3} ms p99",
            p.elapsed_s, p.tps, p.latency_ms_mean, p.latency_ms_p99
        );
        if let Some(note) = &p.note {
            line.push_str(", ");
            line.push_str(note);
        }
        match &bar_for_lines {
            Some(bar) => {
                bar.set_position((p.elapsed_s * 10.0) as u64);
                bar.println(line);
            }
            None if !quiet => eprintln!("{line}"),
            None => {}
        }
    })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if let Some(mut out) = trace_out {
        write_flashlab_csv(&report.trace, std::io::BufWriter::new(out.file()))?;
        out.finish()?;
    }
    if args.json {
        super::print_json(&report)?;
    } else {
        print_summary(&report);
    }
    if let Some(failure) = &report.failure {
        bail!(
            "the run stopped after {:.1} of {:.1} measured seconds, {} transactions committed (warm-up included): {failure}",
            report.duration_s,
            options.duration_ns as f64 / NS_PER_S as f64,
            report.run_transactions
        );
    }
    if report.consistency != "ok" {
        bail!("CONSISTENCY VIOLATION: {}", report.consistency);
    }
    Ok(())
}

/// How often a terminal's progress bar is redrawn while nothing else moves
/// it (the load, which reports no steps).
const BAR_TICK: std::time::Duration = std::time::Duration::from_millis(200);

/// On a terminal: a bar of the measured time, which says "loading" (with
/// the host time passing) until the load ends, as pgbench's -i does.
fn progress_bar(options: &mut BenchOptions) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() || options.progress_interval_ns == 0 {
        return None;
    }
    let tenths = options.duration_ns / (NS_PER_S / 10);
    let bar = indicatif::ProgressBar::new(tenths);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} {msg:8} {bar:40} {pos}/{len} tenths of a second ({elapsed} host)",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message("loading");
    bar.enable_steady_tick(BAR_TICK);
    let (loaded_bar, earlier) = (bar.clone(), options.on_loaded.take());
    options.on_loaded = Some(LoadedHook(Arc::new(move || {
        if let Some(hook) = &earlier {
            (hook.0)();
        }
        loaded_bar.set_message("running");
    })));
    Some(bar)
}

/// The load's times, and its bulk-loaded rows per host second.
fn print_load(r: &BenchReport) {
    let rows = if r.load_bulk_rows > 0 {
        format!(
            "; {} rows bulk-loaded, {:.0} a host second",
            r.load_bulk_rows,
            r.load_bulk_rows as f64 / r.load_host_seconds.max(1e-9)
        )
    } else {
        String::new()
    };
    println!(
        "load                {:.1} s ({} world), {:.1} s host{rows}",
        r.load_seconds, r.world, r.load_host_seconds
    );
}

fn print_summary(r: &BenchReport) {
    println!("workload            {} ({} world)", r.workload, r.world);
    if r.world == "real" {
        println!("clients             {} on this machine's cores", r.clients);
    } else {
        println!(
            "clients / cores     {} / {} simulated at {:.2} GHz",
            r.clients, r.cores, r.cpu_ghz
        );
    }
    println!(
        "devices             log {}, data {}; durability {}",
        r.log_device, r.data_device, r.durability
    );
    println!(
        "measured            {:.1} s, {} committed, {} retried",
        r.duration_s, r.committed, r.retries
    );
    println!("TPS                 {:.1}", r.tps);
    let l = &r.latency_ms;
    println!(
        "latency ms          p50 {:.3}  p95 {:.3}  p99 {:.3}  max {:.3}",
        l.p50, l.p95, l.p99, l.max
    );
    if r.world != "real" {
        println!("CPU utilization     {:.1}%", r.cpu_utilization * 100.0);
    }
    print_log(r);
    print_load(r);
    print_stores(r);
    print_buffer(r);
    if let Some(t) = &r.tpcc {
        print_tpcc(t);
    }
    print_store_counters(r);
    println!("consistency         {}", r.consistency);
    for d in &r.departures {
        println!("departure           {d}");
    }
    print_host(r);
}

/// The log and rollback lines: lee2008 Table 3's log figures, group
/// commit, log volume, before-images.
fn print_log(r: &BenchReport) {
    println!(
        "log (lee2008 T3)    {} writes, {:.2} commits/write, {:.1} sectors/write, {:.3} ms/write, {} tail rewrites",
        r.log.writes,
        r.log.commits_per_write,
        r.log.avg_write_sectors,
        r.log.avg_write_ms,
        r.log.tail_rewrites
    );
    if let Some(merges) = r.log_full_merges.filter(|&m| m > 0) {
        println!(
            "log device          {merges} full merges over the run, warm-up included (each stops the log while its FTL copies a block)"
        );
    }
    if r.log.group_waits > 0 {
        println!(
            "group wait          {} waits for the last group's commits, {} saw it, mean {:.1} us",
            r.log.group_waits, r.log.group_waits_filled, r.log.group_wait_us_mean
        );
    }
    println!(
        "log volume          {:.0} bytes/commit ({:.0} of them full-page images; images {}), {} wraps of the log, {} appends refused (log full)",
        r.log.bytes_per_commit,
        r.log.page_image_bytes_per_commit,
        if r.log.page_images { "on" } else { "off" },
        r.log.wraps,
        r.log.log_full
    );
    if r.log.room_forces + r.log.latched_forces > 0 {
        println!(
            "log buffer full     {} forces with no latch held, {} under latches",
            r.log.room_forces, r.log.latched_forces
        );
    }
    println!(
        "rollback (MVCC)     {} before-images written, {} pages read in {:.3} s, {} chains walked (longest {})",
        r.rollback.records_written,
        r.rollback.pages_read,
        r.rollback.read_ns as f64 / 1e9,
        r.rollback.chains,
        r.rollback.chain_max
    );
}

/// One line per data space: what its page store wrote during the run.
fn print_stores(r: &BenchReport) {
    for s in &r.data_stores {
        let st = &s.stats;
        let per = |x: u64| x as f64 / s.commits.max(1) as f64;
        println!(
            "data store          '{}' {}: {} pages written, {} write requests ({:.2}/txn), {} bytes ({:.0}/txn, {} metadata), {} segments cleaned, {} pages copied, {} map checkpoints",
            s.space,
            s.store,
            st.pages_written,
            st.device_writes,
            per(st.device_writes),
            st.device_bytes_written,
            per(st.device_bytes_written),
            st.metadata_bytes_written,
            st.segments_cleaned,
            st.pages_copied,
            st.map_checkpoints
        );
    }
}

/// The buffer pools over the run: misses, and who wrote the dirty pages
/// (the page cleaner's batches, or the misses themselves).
fn print_buffer(r: &BenchReport) {
    let b = &r.buffer;
    println!(
        "buffer              {} hits, {} misses, {} reads, {} evictions; {} page writes: {} by the page cleaner in {} requests, {} foreground dirty evictions",
        b.hits,
        b.misses,
        b.reads,
        b.evictions,
        b.writes,
        b.cleaner_pages,
        b.cleaner_requests,
        b.foreground_dirty_evictions
    );
}

/// One line per data space with counters of its own store kind.
fn print_store_counters(r: &BenchReport) {
    for st in r.data_stores.iter().filter(|s| !s.counters.is_empty()) {
        let fields: Vec<String> = st
            .counters
            .iter()
            .map(|(k, v)| {
                if v.fract() == 0.0 {
                    format!("{k} {v:.0}")
                } else {
                    format!("{k} {v:.2}")
                }
            })
            .collect();
        println!(
            "store {:<13} {} (run): {}",
            st.space,
            st.store,
            fields.join(", ")
        );
    }
}

/// What the run cost the host.
fn print_host(r: &BenchReport) {
    println!("host time           {:.1} s", r.host_seconds);
    super::print_scratch();
    if r.run_transactions > 0 {
        println!(
            "host per txn        {:.1} us ({} transactions, warm-up included, in {:.2} host s; load and check excluded)",
            r.run_host_seconds * 1e6 / r.run_transactions as f64,
            r.run_transactions,
            r.run_host_seconds
        );
    }
}

fn print_tpcc(t: &flashlab_workloads::tpcc::TpccSummary) {
    println!(
        "tpmC (NoTPM)        {:.1}   tpmTotal {:.1}   efficiency {:.1}% of {:.2} per warehouse x {}",
        t.tpmc,
        t.tpm_total,
        t.efficiency_percent,
        flashlab_workloads::tpcc::TPMC_PER_WAREHOUSE_MAX,
        t.warehouses
    );
    println!(
        "{:<19} {:>8} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "type (latency ms)", "count", "rollbacks", "retries", "p50", "p90", "p95", "p99", "max"
    );
    for x in &t.transactions {
        let l = &x.latency_ms;
        println!(
            "{:<19} {:>8} {:>9} {:>8} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
            x.name, x.count, x.rollbacks, x.retries, l.p50, l.p90, l.p95, l.p99, l.max
        );
    }
}

/// `--table-page-bytes TABLE=BYTES` values.
fn parse_table_pages(values: &[String]) -> anyhow::Result<Vec<(String, usize)>> {
    if !values.is_empty() && values.len() > TABLE_PAGE_ARGS_MAX {
        bail!("--table-page-bytes: at most {TABLE_PAGE_ARGS_MAX} tables");
    }
    values
        .iter()
        .map(|v| {
            let (table, bytes) = v.split_once('=').ok_or_else(|| {
                anyhow::anyhow!("--table-page-bytes '{v}' must be TABLE=BYTES, like stock=4096")
            })?;
            let bytes = bytes.parse().map_err(|_| {
                anyhow::anyhow!("--table-page-bytes '{v}': '{bytes}' is not a number of bytes")
            })?;
            Ok((table.to_string(), bytes))
        })
        .collect()
}

/// Most `--table-page-bytes` arguments (TPC-C has nine tables).
const TABLE_PAGE_ARGS_MAX: usize = 16;

/// The prices of `--cpu-profile NAME` at `ghz`, or `None` for the default.
fn cpu_profile_costs(
    name: Option<&str>,
    ghz: f64,
) -> anyhow::Result<Option<flashlab_engine::CpuCosts>> {
    use flashlab_lab::calibrate::committed;
    let Some(name) = name else { return Ok(None) };
    let c = committed();
    let profile = match name {
        "engine" => c.engine_profile(),
        _ => match c.profile(name) {
            Some(p) => p.clone(),
            None => {
                let known: Vec<&str> = c.profiles.iter().map(|p| p.id.as_str()).collect();
                bail!(
                    "--cpu-profile {name}: no such profile (known: {}, engine)",
                    known.join(", ")
                )
            }
        },
    };
    Ok(Some(c.costs(&profile).scaled(profile.ghz / ghz.max(0.01))))
}
