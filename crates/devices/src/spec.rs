//! Devices described in a TOML file.
//!
//! Besides the presets, every device option accepts the path of a TOML file
//! describing a disk or an SSD of one's own. The description is checked as
//! a real device would be: an impossible one (zero channels, a page larger
//! than its erase unit, zero rpm) is a one-line error naming the file.
//!
//! An SSD file can set every option a preset sets: the geometry, the
//! timing, the controller's costs and features ([`ControllerExtras`]), the
//! write buffer, the FTL and the FTL's parameters. Times are given in the
//! unit of the key's name (`_us`, `_ms`); keys after `host_mb_s` are
//! optional, with the default shown.
//!
//! ```toml
//! kind = "ssd"                  # or "hdd"
//! name = "my-ssd"
//! channels = 4
//! chips_per_channel = 2
//! dies_per_chip = 1
//! planes_per_die = 2
//! blocks_per_plane = 1024
//! page_bytes = 4096
//! erase_unit_bytes = 262144     # pages per block = erase unit / page
//! over_provisioning = 0.07
//! page_read_us = 50.0
//! page_program_us = 600.0
//! block_erase_ms = 3.0
//! channel_mb_s = 200.0
//! host_mb_s = 500.0
//! controller_overhead_us = 0.0  # controller occupancy per command
//! write_command_us = 0.0        # extra occupancy per write command
//! random_write_page_us = 0.0    # extra occupancy per page of a random write
//! read_latency_us = 0.0         # read latency overlapping other commands
//! write_latency_us = 0.0        # write latency overlapping other commands
//! cache_program = false         # a page's transfer overlaps the die's program
//! reads_first = false           # reads go ahead of queued writes on a die
//! read_ahead_pages = 0          # pages read ahead on a sequential stream
//! write_buffer_bytes = 0        # write-back buffer in controller RAM
//! ftl = "page-greedy"           # page-cost-benefit, block, bast, fast, super-block
//! stripe_pages = 1              # page FTLs: pages per stripe unit
//! log_blocks = 32               # bast, fast: log blocks
//! erase_units_per_super_block = 8  # super-block: erase units per super-block
//! log_super_blocks = 8          # super-block: log super-blocks
//! ```
//!
//! An FTL key is refused with any other FTL, and an FTL parameter the
//! device cannot hold (more log blocks than the spare area, a super-block
//! of more erase units than the device has planes or of a number that does
//! not divide them) is refused rather than clamped. `flashlab devices
//! FILE` lists every parameter with its source: the file's key, or the
//! default when the file leaves it unset.
//!
//! A disk: `kind = "hdd"`, `name`, `capacity_gb`, `rpm`, `sustained_mb_s`,
//! `seek_avg_ms`, and optionally `seek_track_to_track_ms`,
//! `seek_full_stroke_ms`, `write_cache` (on or off, default off),
//! `write_cache_bytes`, and the read cache: `read_cache_bytes` (0 turns it
//! off), `read_cache_segments`, `read_ahead` (on or off). Unset cache keys
//! take `hdd-2008`'s values (an 8 MB buffer, 16 segments, read-ahead on).
//! An unknown key is a one-line error naming the file and the key.

use std::path::Path;

use serde::Deserialize;

use crate::error::DeviceError;
use crate::hdd::{HddModel, HddParams};
use crate::model::DeviceModel;
use crate::ssd::controller::ControllerExtras;
use crate::ssd::ftl::{
    self, Ftl, FtlKind,
    block::BlockFtl,
    hybrid::{HybridFtl, HybridKind},
    page::{GcPolicy, PageFtl},
    superblock::SuperBlockFtl,
};
use crate::ssd::{Geometry, SsdModel, Timing};

/// Largest description file read.
const SPEC_BYTES_MAX: u64 = 1 << 20;

/// Most pages a device file may read ahead: 65,536 (256 MiB of 4 KiB
/// pages, four times the largest write buffer of a preset). A read that
/// continues a stream reads that many pages at once, so the limit bounds
/// one request's flash reads and the controller's list of pages held
/// (16 bytes a page: 1 MiB).
pub const READ_AHEAD_PAGES_MAX: u64 = 1 << 16;

/// What a description describes. It is read on its own first, and the
/// SSD's or the disk's keys then straight from the text, so that the
/// parser's error for a bad value points at its key (serde's tagged enums
/// lose where a value was).
#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Ssd,
    Hdd,
}

#[derive(Deserialize)]
struct Described {
    kind: Kind,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SsdSpec {
    #[serde(rename = "kind")]
    _kind: Kind,
    name: String,
    channels: u32,
    chips_per_channel: u32,
    dies_per_chip: u32,
    planes_per_die: u32,
    blocks_per_plane: u32,
    page_bytes: u32,
    erase_unit_bytes: u64,
    over_provisioning: f64,
    page_read_us: f64,
    page_program_us: f64,
    block_erase_ms: f64,
    channel_mb_s: f64,
    host_mb_s: f64,
    #[serde(default)]
    controller_overhead_us: f64,
    #[serde(default)]
    write_command_us: f64,
    #[serde(default)]
    random_write_page_us: f64,
    #[serde(default)]
    read_latency_us: f64,
    #[serde(default)]
    write_latency_us: f64,
    #[serde(default)]
    cache_program: bool,
    #[serde(default)]
    reads_first: bool,
    #[serde(default)]
    read_ahead_pages: i64,
    #[serde(default)]
    write_buffer_bytes: u64,
    #[serde(default = "default_ftl")]
    ftl: String,
    #[serde(default)]
    stripe_pages: Option<i64>,
    #[serde(default)]
    log_blocks: Option<i64>,
    #[serde(default)]
    erase_units_per_super_block: Option<i64>,
    #[serde(default)]
    log_super_blocks: Option<i64>,
}

fn default_ftl() -> String {
    "page-greedy".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HddSpec {
    #[serde(rename = "kind")]
    _kind: Kind,
    name: String,
    capacity_gb: f64,
    rpm: u32,
    sustained_mb_s: f64,
    seek_avg_ms: f64,
    #[serde(default)]
    seek_track_to_track_ms: Option<f64>,
    #[serde(default)]
    seek_full_stroke_ms: Option<f64>,
    #[serde(default)]
    write_cache: bool,
    #[serde(default)]
    write_cache_bytes: Option<u64>,
    #[serde(default)]
    read_cache_bytes: Option<u64>,
    #[serde(default)]
    read_cache_segments: Option<u32>,
    #[serde(default)]
    read_ahead: Option<bool>,
}

fn bad(path: &Path, problem: impl Into<String>) -> DeviceError {
    DeviceError::Geometry {
        device: path.display().to_string(),
        problem: problem.into(),
    }
}

/// Longest time a description may give one device operation (a page
/// read, a program, an erase, a seek, the controller's overhead): one
/// second, a thousand times a slow disk's seek, and small enough that a
/// run's sums of such times cannot overflow.
pub const OPERATION_NS_MAX: u64 = 1_000_000_000;

/// `value` in units of `scale` nanoseconds, checked against
/// [`OPERATION_NS_MAX`].
fn ns(path: &Path, what: &str, value: f64, scale: f64) -> Result<u64, DeviceError> {
    if !value.is_finite() || value < 0.0 {
        return Err(bad(
            path,
            format!("{what} = {value} is not a non-negative number"),
        ));
    }
    if value * scale > OPERATION_NS_MAX as f64 {
        return Err(bad(
            path,
            format!(
                "{what} = {value} is more than the limit of {} s for one operation",
                OPERATION_NS_MAX / 1_000_000_000
            ),
        ));
    }
    Ok((value * scale).round() as u64)
}

fn rate(path: &Path, what: &str, mb_s: f64) -> Result<u64, DeviceError> {
    if !mb_s.is_finite() || mb_s <= 0.0 || mb_s > 1e7 {
        return Err(bad(
            path,
            format!("{what} = {mb_s} must be a positive rate in MB/s"),
        ));
    }
    Ok((mb_s * 1e6) as u64)
}

/// `value` of `key` as a whole number from `min` to `max`; `limit` says
/// what `max` is.
fn whole(
    path: &Path,
    key: &str,
    value: i64,
    (min, max): (u64, u64),
    limit: &str,
) -> Result<u64, DeviceError> {
    match u64::try_from(value) {
        Ok(v) if v >= min && v <= max => Ok(v),
        _ => Err(bad(
            path,
            format!("{key} = {value} must be from {min} to {max} ({limit})"),
        )),
    }
}

/// Build a model from a description file.
pub fn build_from_file(path: &Path) -> Result<Box<dyn DeviceModel>, DeviceError> {
    let io = |source| DeviceError::Io {
        device: path.display().to_string(),
        op: "read",
        source,
    };
    let text = match flashlab_runtime::text::read_text_file(path, SPEC_BYTES_MAX) {
        Ok(text) => text,
        Err(flashlab_runtime::text::TextFileError::Io(e)) => return Err(io(e)),
        Err(e) => return Err(bad(path, format!("{e} for a device description"))),
    };
    build_from_toml(&text, path)
}

/// Build a model from the text of a description; `path` names it in
/// errors. Malformed or impossible input is an error, never a panic.
pub fn build_from_toml(text: &str, path: &Path) -> Result<Box<dyn DeviceModel>, DeviceError> {
    let error = |e: toml::de::Error| toml_error(path, text, &e);
    // The keys the file sets, for the sources.
    let keys: toml::Table = toml::from_str(text).map_err(error)?;
    let described: Described = toml::from_str(text).map_err(error)?;
    match described.kind {
        Kind::Ssd => {
            let s: SsdSpec = toml::from_str(text).map_err(error)?;
            Ok(Box::new(build_ssd(path, s, &keys)?))
        }
        Kind::Hdd => build_hdd(path, toml::from_str(text).map_err(error)?),
    }
}

/// A TOML error as one line naming the file and, when the parser points
/// into a `key = value` line, the key: the parser's message for a value
/// of the wrong type or range does not name it.
fn toml_error(path: &Path, text: &str, e: &toml::de::Error) -> DeviceError {
    let message = e.message().trim().replace('\n', " ");
    let key = e.span().and_then(|span| {
        let start = text.get(..span.start)?.rfind('\n').map_or(0, |i| i + 1);
        let line = text.get(start..)?.lines().next()?;
        let (key, _) = line.split_once('=')?;
        let key = key.trim();
        let bare = |c: char| c.is_ascii_alphanumeric() || "_-.\"'".contains(c);
        (!key.is_empty() && key.chars().all(bare) && !message.contains(key))
            .then(|| key.to_string())
    });
    match key {
        Some(key) => bad(path, format!("{key}: {message}")),
        None => bad(path, message),
    }
}

/// Build the SSD a file describes; `keys` are the keys it sets.
fn build_ssd(path: &Path, s: SsdSpec, keys: &toml::Table) -> Result<SsdModel, DeviceError> {
    let geometry = ssd_geometry(path, &s)?;
    let timing = ssd_timing(path, &s)?;
    let extras = ssd_extras(path, &s)?;
    let (ftl_kind, ftl) = ssd_ftl(path, &s, &geometry)?;
    let mut sources = ssd_sources(path, keys);
    sources.extend(
        ftl.parameters()
            .into_iter()
            .map(|(name, _)| (name, source(path, keys, name))),
    );
    let sources: Vec<(&'static str, &str)> =
        sources.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let model = SsdModel::with_ftl(
        &s.name,
        geometry,
        timing,
        ftl_kind,
        ftl,
        s.write_buffer_bytes,
    )
    .map_err(|e| bad(path, e.to_string()))?;
    Ok(model.with_extras(extras).with_sources(&sources))
}

fn ssd_geometry(path: &Path, s: &SsdSpec) -> Result<Geometry, DeviceError> {
    if s.page_bytes == 0 || u64::from(s.page_bytes) > s.erase_unit_bytes {
        return Err(bad(
            path,
            format!(
                "a page of {} bytes is larger than the erase unit of {} bytes",
                s.page_bytes, s.erase_unit_bytes
            ),
        ));
    }
    if !s.erase_unit_bytes.is_multiple_of(u64::from(s.page_bytes)) {
        return Err(bad(path, "the erase unit must be a whole number of pages"));
    }
    let pages_per_block = u32::try_from(s.erase_unit_bytes / u64::from(s.page_bytes))
        .map_err(|_| bad(path, "too many pages per erase unit"))?;
    let geometry = Geometry {
        channels: s.channels,
        chips_per_channel: s.chips_per_channel,
        dies_per_chip: s.dies_per_chip,
        planes_per_die: s.planes_per_die,
        blocks_per_plane: s.blocks_per_plane,
        pages_per_block,
        page_bytes: s.page_bytes,
        over_provisioning: s.over_provisioning,
    };
    geometry
        .validate(&s.name)
        .map_err(|e| bad(path, e.to_string()))?;
    Ok(geometry)
}

fn ssd_timing(path: &Path, s: &SsdSpec) -> Result<Timing, DeviceError> {
    Ok(Timing {
        page_read_ns: ns(path, "page_read_us", s.page_read_us, 1e3)?,
        page_program_ns: ns(path, "page_program_us", s.page_program_us, 1e3)?,
        block_erase_ns: ns(path, "block_erase_ms", s.block_erase_ms, 1e6)?,
        channel_bytes_per_s: rate(path, "channel_mb_s", s.channel_mb_s)?,
        host_bytes_per_s: rate(path, "host_mb_s", s.host_mb_s)?,
        controller_overhead_ns: ns(
            path,
            "controller_overhead_us",
            s.controller_overhead_us,
            1e3,
        )?,
    })
}

fn ssd_extras(path: &Path, s: &SsdSpec) -> Result<ControllerExtras, DeviceError> {
    Ok(ControllerExtras {
        write_command_ns: ns(path, "write_command_us", s.write_command_us, 1e3)?,
        read_latency_ns: ns(path, "read_latency_us", s.read_latency_us, 1e3)?,
        write_latency_ns: ns(path, "write_latency_us", s.write_latency_us, 1e3)?,
        cache_program: s.cache_program,
        random_write_page_ns: ns(path, "random_write_page_us", s.random_write_page_us, 1e3)?,
        reads_first: s.reads_first,
        read_ahead_pages: whole(
            path,
            "read_ahead_pages",
            s.read_ahead_pages,
            (0, READ_AHEAD_PAGES_MAX),
            "READ_AHEAD_PAGES_MAX",
        )?,
    })
}

/// An FTL and its kind.
type BuiltFtl = (FtlKind, Box<dyn Ftl>);

/// The FTL the file names, with the FTL keys it sets; unset keys take the
/// defaults [`ftl::build`] uses.
fn ssd_ftl(path: &Path, s: &SsdSpec, geometry: &Geometry) -> Result<BuiltFtl, DeviceError> {
    let kind =
        FtlKind::parse(&s.ftl).ok_or_else(|| bad(path, format!("unknown ftl '{}'", s.ftl)))?;
    refuse_other_ftls_keys(path, s, kind)?;
    match kind {
        FtlKind::PageGreedy | FtlKind::PageCostBenefit => page_ftl(path, s, geometry, kind),
        FtlKind::Block => Ok((kind, Box::new(BlockFtl::new(geometry)))),
        FtlKind::Bast | FtlKind::Fast => hybrid_ftl(path, s, geometry, kind),
        FtlKind::SuperBlock => super_block_ftl(path, s, geometry),
    }
}

/// An FTL key set for an FTL that has no such parameter is refused, not
/// ignored: the file would not describe the device it runs.
fn refuse_other_ftls_keys(path: &Path, s: &SsdSpec, kind: FtlKind) -> Result<(), DeviceError> {
    const PAGE: &[FtlKind] = &[FtlKind::PageGreedy, FtlKind::PageCostBenefit];
    const HYBRID: &[FtlKind] = &[FtlKind::Bast, FtlKind::Fast];
    const SUPER: &[FtlKind] = &[FtlKind::SuperBlock];
    let keys = [
        ("stripe_pages", s.stripe_pages, PAGE),
        ("log_blocks", s.log_blocks, HYBRID),
        (
            "erase_units_per_super_block",
            s.erase_units_per_super_block,
            SUPER,
        ),
        ("log_super_blocks", s.log_super_blocks, SUPER),
    ];
    for (key, value, kinds) in keys {
        if value.is_some() && !kinds.contains(&kind) {
            let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
            return Err(bad(
                path,
                format!(
                    "{key} applies to ftl = {}, not to ftl = {}",
                    names.join(" or "),
                    kind.as_str()
                ),
            ));
        }
    }
    Ok(())
}

fn page_ftl(
    path: &Path,
    s: &SsdSpec,
    geometry: &Geometry,
    kind: FtlKind,
) -> Result<BuiltFtl, DeviceError> {
    let policy = match kind {
        FtlKind::PageCostBenefit => GcPolicy::CostBenefit,
        _ => GcPolicy::Greedy,
    };
    let stripe_pages = match s.stripe_pages {
        Some(v) => whole(
            path,
            "stripe_pages",
            v,
            (1, u64::from(geometry.pages_per_block)),
            "pages_per_block: a stripe unit fits in one erase unit",
        )? as u32,
        None => 1,
    };
    let ftl = PageFtl::new(geometry, policy).map_err(|e| bad(path, e.to_string()))?;
    Ok((kind, Box::new(ftl.with_stripe_pages(stripe_pages))))
}

/// A count of log units the file sets, before the FTL fits it.
fn log_units(path: &Path, key: &str, value: Option<i64>) -> Result<Option<u32>, DeviceError> {
    value
        .map(|v| whole(path, key, v, (1, u64::from(u32::MAX)), "a 32-bit count").map(|v| v as u32))
        .transpose()
}

/// The FTLs fit log units into the spare area silently; a file that asks
/// for a number they would change is refused with the number they use.
fn fits(path: &Path, key: &str, wanted: u32, used: u32) -> Result<(), DeviceError> {
    match used.cmp(&wanted) {
        std::cmp::Ordering::Equal => Ok(()),
        std::cmp::Ordering::Less => Err(bad(
            path,
            format!(
                "{key} = {wanted} is more than the spare area holds (over_provisioning): {used} fit"
            ),
        )),
        std::cmp::Ordering::Greater => Err(bad(
            path,
            format!("{key} = {wanted} is below the FTL's minimum of {used}"),
        )),
    }
}

fn hybrid_ftl(
    path: &Path,
    s: &SsdSpec,
    geometry: &Geometry,
    kind: FtlKind,
) -> Result<BuiltFtl, DeviceError> {
    let hybrid = match kind {
        FtlKind::Bast => HybridKind::Bast,
        _ => HybridKind::Fast,
    };
    let wanted = log_units(path, "log_blocks", s.log_blocks)?;
    let ftl = HybridFtl::new(
        geometry,
        hybrid,
        wanted.unwrap_or(ftl::HYBRID_LOG_BLOCKS_DEFAULT),
    );
    if let Some(wanted) = wanted {
        fits(path, "log_blocks", wanted, ftl.log_blocks())?;
    }
    Ok((kind, Box::new(ftl)))
}

fn super_block_ftl(path: &Path, s: &SsdSpec, geometry: &Geometry) -> Result<BuiltFtl, DeviceError> {
    const UNITS: &str = "erase_units_per_super_block";
    let planes = geometry.planes();
    let units = s
        .erase_units_per_super_block
        .map(|v| {
            whole(
                path,
                UNITS,
                v,
                (1, u64::from(planes)),
                "the device's planes: one erase unit from each",
            )
            .map(|v| v as u32)
        })
        .transpose()?;
    let logs = log_units(path, "log_super_blocks", s.log_super_blocks)?;
    let ftl = SuperBlockFtl::new(
        geometry,
        units.unwrap_or(ftl::SUPER_BLOCK_ERASE_UNITS_DEFAULT),
        logs.unwrap_or(ftl::LOG_SUPER_BLOCKS_DEFAULT),
    );
    if let Some(units) = units
        && ftl.erase_units_per_super_block() != units
    {
        return Err(bad(
            path,
            format!(
                "{UNITS} = {units} must divide the device's {planes} planes (the FTL would use {})",
                ftl.erase_units_per_super_block()
            ),
        ));
    }
    if let Some(logs) = logs {
        fits(path, "log_super_blocks", logs, ftl.log_super_blocks())?;
    }
    Ok((FtlKind::SuperBlock, Box::new(ftl)))
}

/// The parameters `describe()` lists, each with the file key that sets it.
const SSD_KEYS: [(&str, &str); 24] = [
    ("channels", "channels"),
    ("chips_per_channel", "chips_per_channel"),
    ("dies_per_chip", "dies_per_chip"),
    ("planes_per_die", "planes_per_die"),
    ("blocks_per_plane", "blocks_per_plane"),
    ("pages_per_block", "erase_unit_bytes"),
    ("page_bytes", "page_bytes"),
    ("over_provisioning", "over_provisioning"),
    ("stripe_pages", "stripe_pages"),
    ("page_read_ns", "page_read_us"),
    ("page_program_ns", "page_program_us"),
    ("block_erase_ns", "block_erase_ms"),
    ("channel_bytes_per_s", "channel_mb_s"),
    ("host_bytes_per_s", "host_mb_s"),
    ("controller_overhead_ns", "controller_overhead_us"),
    ("write_command_ns", "write_command_us"),
    ("read_latency_ns", "read_latency_us"),
    ("write_latency_ns", "write_latency_us"),
    ("random_write_page_ns", "random_write_page_us"),
    ("cache_program", "cache_program"),
    ("reads_first", "reads_first"),
    ("read_ahead_pages", "read_ahead_pages"),
    ("write_buffer_bytes", "write_buffer_bytes"),
    ("ftl", "ftl"),
];

/// Where the file's value of `key` came from: the key, or its default.
fn source(path: &Path, keys: &toml::Table, key: &str) -> String {
    let file = path.display();
    if keys.contains_key(key) {
        format!("device file {file}: {key}")
    } else {
        format!("device file {file}: {key} not set, default")
    }
}

/// The source of every parameter but the FTL's own.
fn ssd_sources(path: &Path, keys: &toml::Table) -> Vec<(&'static str, String)> {
    let mut out = vec![(
        "capacity_bytes",
        format!(
            "device file {}: the geometry less over_provisioning and the FTL's reserve",
            path.display()
        ),
    )];
    out.extend(
        SSD_KEYS
            .iter()
            .map(|&(name, key)| (name, source(path, keys, key))),
    );
    out
}

fn build_hdd(path: &Path, h: HddSpec) -> Result<Box<dyn DeviceModel>, DeviceError> {
    let mut params = HddParams::hdd_2008();
    if !(h.capacity_gb.is_finite() && h.capacity_gb > 0.0 && h.capacity_gb < 1e6) {
        return Err(bad(
            path,
            format!("capacity_gb = {} must be positive", h.capacity_gb),
        ));
    }
    params.capacity_bytes = (h.capacity_gb * 1e9) as u64 / 512 * 512;
    params.rpm = h.rpm;
    params.media_bytes_per_s = rate(path, "sustained_mb_s", h.sustained_mb_s)?;
    params.seek_ns_avg = ns(path, "seek_avg_ms", h.seek_avg_ms, 1e6)?;
    if let Some(t) = h.seek_track_to_track_ms {
        params.seek_ns_track_to_track = ns(path, "seek_track_to_track_ms", t, 1e6)?;
    }
    params.seek_ns_full_stroke = match h.seek_full_stroke_ms {
        Some(f) => ns(path, "seek_full_stroke_ms", f, 1e6)?,
        None => params.seek_ns_avg * 2,
    };
    params.write_cache_enabled = h.write_cache;
    params.write_cache_bytes = h.write_cache_bytes.unwrap_or(params.write_cache_bytes);
    params.read_cache_bytes = h.read_cache_bytes.unwrap_or(params.read_cache_bytes);
    params.read_cache_segments = h.read_cache_segments.unwrap_or(params.read_cache_segments);
    params.read_ahead = h.read_ahead.unwrap_or(params.read_ahead);
    params.sources = Default::default();
    let model = HddModel::new(&h.name, params).map_err(|e| bad(path, e.to_string()))?;
    Ok(Box::new(model))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{IoKind, IoRequest};

    fn write(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    const SSD: &str = r#"
        kind = "ssd"
        name = "tiny"
        channels = 2
        chips_per_channel = 1
        dies_per_chip = 1
        planes_per_die = 1
        blocks_per_plane = 64
        page_bytes = 4096
        erase_unit_bytes = 262144
        over_provisioning = 0.1
        page_read_us = 50.0
        page_program_us = 500.0
        block_erase_ms = 3.0
        channel_mb_s = 200.0
        host_mb_s = 300.0
    "#;

    #[test]
    fn a_described_ssd_builds() {
        let model = built(SSD);
        assert_eq!(model.name(), "tiny");
    }

    const HDD: &str = "kind = \"hdd\"\nname = \"d\"\ncapacity_gb = 10.0\nrpm = 7200\nsustained_mb_s = 100.0\nseek_avg_ms = 8.0\n";

    fn listed(model: &dyn DeviceModel, name: &str) -> String {
        let listing = model.describe();
        listing
            .iter()
            .find(|p| p.name == name)
            .unwrap()
            .value
            .clone()
    }

    #[test]
    fn a_described_disk_sets_its_read_cache() {
        let model = built(HDD);
        assert_eq!(
            listed(model.as_ref(), "read_cache_bytes"),
            (8 << 20).to_string()
        );
        assert_eq!(listed(model.as_ref(), "read_ahead"), "on");
        let text = format!(
            "{HDD}read_cache_bytes = 1048576\nread_cache_segments = 4\nread_ahead = false\n"
        );
        let model = built(&text);
        assert_eq!(listed(model.as_ref(), "read_cache_segments"), "4");
        assert_eq!(listed(model.as_ref(), "read_segment_bytes"), "262144");
        assert_eq!(listed(model.as_ref(), "read_ahead"), "off");
        let err = refused(&format!("{HDD}read_cache_segments = 0\n"));
        assert!(
            err.contains("dev.toml") && err.contains("segments"),
            "{err}"
        );
    }

    /// A misspelt key, of a disk or of an SSD: one line naming the file
    /// and the key.
    #[test]
    fn an_unknown_key_is_one_line_naming_file_and_key() {
        for (device, key) in [(HDD, "read_cache_segmnets"), (SSD, "read_ahaed_pages")] {
            let err = refused(&format!("{device}{key} = 4\n"));
            assert!(err.contains("dev.toml") && err.contains(key), "{err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn impossible_descriptions_name_the_file_and_the_problem() {
        let err = refused(&SSD.replace("erase_unit_bytes = 262144", "erase_unit_bytes = 2048"));
        assert!(
            err.contains("dev.toml") && err.contains("larger than the erase unit"),
            "{err}"
        );
        let err = refused(&SSD.replace("channels = 2", "channels = 0"));
        assert!(err.contains("zero channels"), "{err}");
        refused(
            "kind = \"hdd\"\nname = \"d\"\ncapacity_gb = 10.0\nrpm = 0\nsustained_mb_s = 100.0\nseek_avg_ms = 4.0\n",
        );
        let err = refused("kind = \"tape\"");
        assert!(err.contains("dev.toml"), "{err}");
    }

    /// The device `text` describes; the test fails if it is refused.
    fn built(text: &str) -> Box<dyn DeviceModel> {
        let (_dir, path) = write(text);
        build_from_file(&path).unwrap_or_else(|e| panic!("refused: {e}\n{text}"))
    }

    /// The one-line error `text` gives; the test fails if it builds.
    fn refused(text: &str) -> String {
        let (_dir, path) = write(text);
        match build_from_file(&path) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => e.to_string(),
        }
    }

    /// Every new key with a value it must refuse: the error is one line
    /// naming the file and the key.
    #[test]
    fn bad_controller_and_ftl_values_name_the_key() {
        let three_planes = SSD.replace("channels = 2", "channels = 3");
        let cases: &[(&str, &str)] = &[
            ("write_command_us", "write_command_us = -1.0"),
            ("write_command_us", "write_command_us = 2e6"),
            ("read_latency_us", "read_latency_us = nan"),
            ("write_latency_us", "write_latency_us = 1e7"),
            ("random_write_page_us", "random_write_page_us = -0.5"),
            ("cache_program", "cache_program = 1"),
            ("reads_first", "reads_first = \"yes\""),
            ("read_ahead_pages", "read_ahead_pages = -1"),
            ("read_ahead_pages", "read_ahead_pages = 65537"),
            ("read_ahead_pages", "read_ahead_pages = 1.5"),
            ("stripe_pages", "stripe_pages = 0"),
            ("stripe_pages", "stripe_pages = 65"),
            ("stripe_pages", "stripe_pages = 2\nftl = \"bast\""),
            ("log_blocks", "ftl = \"bast\"\nlog_blocks = 0"),
            ("log_blocks", "ftl = \"fast\"\nlog_blocks = 1"),
            ("log_blocks", "ftl = \"fast\"\nlog_blocks = 100"),
            ("log_blocks", "ftl = \"fast\"\nlog_blocks = 4294967296"),
            ("log_blocks", "log_blocks = 8"),
            (
                "erase_units_per_super_block",
                "ftl = \"super-block\"\nerase_units_per_super_block = 0",
            ),
            (
                "erase_units_per_super_block",
                "ftl = \"super-block\"\nerase_units_per_super_block = 3",
            ),
            (
                "erase_units_per_super_block",
                "ftl = \"block\"\nerase_units_per_super_block = 2",
            ),
            (
                "log_super_blocks",
                "ftl = \"super-block\"\nlog_super_blocks = 0",
            ),
            (
                "log_super_blocks",
                "ftl = \"super-block\"\nlog_super_blocks = 1000",
            ),
        ];
        for &(key, lines) in cases {
            let err = refused(&format!("{SSD}{lines}\n"));
            assert!(
                err.contains("dev.toml") && err.contains(key) && !err.contains('\n'),
                "{lines}: {err}"
            );
        }
        // A super-block of 2 erase units fits 2 planes, not 3.
        let err = refused(&format!(
            "{three_planes}ftl = \"super-block\"\nerase_units_per_super_block = 2\n"
        ));
        assert!(err.contains("must divide the device's 3 planes"), "{err}");
    }

    /// The limits are inclusive: the largest accepted values build.
    #[test]
    fn the_largest_accepted_values_build() {
        let text = format!(
            "{SSD}write_command_us = 1e6\nread_ahead_pages = {READ_AHEAD_PAGES_MAX}\nstripe_pages = 64\n"
        );
        let model = built(&text);
        assert_eq!(listed(model.as_ref(), "write_command_ns"), "1000000000");
        assert_eq!(listed(model.as_ref(), "stripe_pages"), "64");
        let text = format!("{SSD}ftl = \"super-block\"\nerase_units_per_super_block = 2\n");
        let model = built(&text);
        assert_eq!(listed(model.as_ref(), "erase_units_per_super_block"), "2");
    }

    /// A file without the new keys runs as `SsdModel::new` builds the
    /// device (the defaults of `ftl::build`, no controller extras), for
    /// every FTL: the same completion times and counters over random
    /// writes that fill the device and force GC and merges.
    #[test]
    fn unset_keys_keep_the_defaults_of_every_ftl() {
        for kind in FtlKind::ALL {
            let (_dir, path) = write(&format!("{SSD}ftl = \"{}\"\n", kind.as_str()));
            let mut file = build_from_file(&path).unwrap();
            let spec: SsdSpec = toml::from_str(SSD).unwrap();
            let geometry = ssd_geometry(&path, &spec).unwrap();
            let timing = ssd_timing(&path, &spec).unwrap();
            let mut code = SsdModel::new("tiny", geometry, timing, kind, 0).unwrap();
            let pages = file.capacity_bytes() / 4096;
            assert_eq!(file.capacity_bytes(), code.capacity_bytes(), "{kind:?}");
            let mut x: u64 = 7;
            for i in 0..3 * pages {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let kind = if i % 4 == 3 {
                    IoKind::Read
                } else {
                    IoKind::Write
                };
                let req = IoRequest {
                    kind,
                    offset_bytes: (x >> 33) % pages * 4096,
                    len_bytes: 4096,
                };
                let now_ns = i * 100_000;
                assert_eq!(file.submit(now_ns, &req), code.submit(now_ns, &req));
            }
            assert_eq!(file.stats(), code.stats(), "{kind:?}");
            assert!(file.stats().erases > 0, "{kind:?}: no GC or merge ran");
        }
    }
}
