//! Devices described in a TOML file.
//!
//! Besides the presets, every device option accepts the path of a TOML file
//! describing a disk or an SSD of one's own. The description is checked as
//! a real device would be: an impossible one (zero channels, a page larger
//! than its erase unit, zero rpm) is a one-line error naming the file.
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
//! controller_overhead_us = 10.0
//! write_buffer_bytes = 0
//! ftl = "page-greedy"           # page-cost-benefit, block, bast, fast, super-block
//! ```
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
use crate::ssd::ftl::FtlKind;
use crate::ssd::{Geometry, SsdModel, Timing};

/// Largest description file read.
const SPEC_BYTES_MAX: u64 = 1 << 20;

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum Spec {
    Ssd(SsdSpec),
    Hdd(HddSpec),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SsdSpec {
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
    write_buffer_bytes: u64,
    #[serde(default = "default_ftl")]
    ftl: String,
}

fn default_ftl() -> String {
    "page-greedy".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HddSpec {
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
    let spec: Spec = toml::from_str(text).map_err(|e| bad(path, e.message().to_string()))?;
    match spec {
        Spec::Ssd(s) => build_ssd(path, s),
        Spec::Hdd(h) => build_hdd(path, h),
    }
}

fn build_ssd(path: &Path, s: SsdSpec) -> Result<Box<dyn DeviceModel>, DeviceError> {
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
    let timing = Timing {
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
    };
    let ftl = [
        FtlKind::PageGreedy,
        FtlKind::PageCostBenefit,
        FtlKind::Block,
        FtlKind::Bast,
        FtlKind::Fast,
        FtlKind::SuperBlock,
    ]
    .into_iter()
    .find(|k| k.as_str() == s.ftl)
    .ok_or_else(|| bad(path, format!("unknown ftl '{}'", s.ftl)))?;
    let model = SsdModel::new(&s.name, geometry, timing, ftl, s.write_buffer_bytes)
        .map_err(|e| bad(path, e.to_string()))?;
    Ok(Box::new(model))
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
        let (_dir, path) = write(SSD);
        let model = build_from_file(&path).unwrap();
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
        let (_dir, path) = write(HDD);
        let model = build_from_file(&path).unwrap();
        assert_eq!(
            listed(model.as_ref(), "read_cache_bytes"),
            (8 << 20).to_string()
        );
        assert_eq!(listed(model.as_ref(), "read_ahead"), "on");
        let text = format!(
            "{HDD}read_cache_bytes = 1048576\nread_cache_segments = 4\nread_ahead = false\n"
        );
        let (_dir, path) = write(&text);
        let model = build_from_file(&path).unwrap();
        assert_eq!(listed(model.as_ref(), "read_cache_segments"), "4");
        assert_eq!(listed(model.as_ref(), "read_segment_bytes"), "262144");
        assert_eq!(listed(model.as_ref(), "read_ahead"), "off");
        let (_dir, path) = write(&format!("{HDD}read_cache_segments = 0\n"));
        let err = build_from_file(&path).err().unwrap().to_string();
        assert!(
            err.contains("dev.toml") && err.contains("segments"),
            "{err}"
        );
    }

    #[test]
    fn an_unknown_disk_key_is_one_line_naming_file_and_key() {
        let (_dir, path) = write(&format!("{HDD}read_cache_segmnets = 4\n"));
        let err = build_from_file(&path).err().unwrap().to_string();
        assert!(
            err.contains("dev.toml") && err.contains("read_cache_segmnets"),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err}");
    }

    #[test]
    fn impossible_descriptions_name_the_file_and_the_problem() {
        let (_dir, path) =
            write(&SSD.replace("erase_unit_bytes = 262144", "erase_unit_bytes = 2048"));
        let err = build_from_file(&path).err().unwrap().to_string();
        assert!(
            err.contains("dev.toml") && err.contains("larger than the erase unit"),
            "{err}"
        );
        let (_dir, path) = write(&SSD.replace("channels = 2", "channels = 0"));
        let err = build_from_file(&path).err().unwrap().to_string();
        assert!(err.contains("zero channels"), "{err}");
        let (_dir, path) = write(
            "kind = \"hdd\"\nname = \"d\"\ncapacity_gb = 10.0\nrpm = 0\nsustained_mb_s = 100.0\nseek_avg_ms = 4.0\n",
        );
        assert!(build_from_file(&path).is_err());
        let (_dir, path) = write("kind = \"tape\"");
        assert!(
            build_from_file(&path)
                .err()
                .unwrap()
                .to_string()
                .contains("dev.toml")
        );
    }
}
