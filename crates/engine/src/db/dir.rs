//! A database directory in the real world: one file per space, and a
//! manifest.
//!
//! `DIR/flashlab.manifest` (TOML) records the format version and, for every
//! space, its kind, name, file, page size and capacity. A new directory gets
//! its files created at their full capacity and the manifest written last,
//! atomically (temporary file, fsync, rename, fsync of the directory), so a
//! crash while creating leaves either no database or a whole one. Opening an
//! existing directory checks the manifest against the configuration and
//! every file against the manifest: a missing or truncated file, an unknown
//! format version or a page size that differs is a clear error naming the
//! file, and nothing is created or overwritten.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flashlab_devices::DeviceRef;
use flashlab_devices::file::{FileDevice, FileOptions};
use serde::{Deserialize, Serialize};

use crate::config::{DbConfig, FILE_CAPACITY_BYTES_DEFAULT, SpaceConfig};
use crate::db::Devices;
use crate::error::{Error, Result};

/// The manifest's file name.
pub const MANIFEST_FILE: &str = "flashlab.manifest";
/// The directory format this build reads and writes.
pub const DIR_FORMAT_VERSION: u32 = 1;
/// Largest manifest accepted.
const MANIFEST_BYTES_MAX: u64 = 1 << 20;

/// One space in the manifest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestSpace {
    /// data, log, rollback or temp.
    pub kind: String,
    pub name: String,
    pub file: String,
    #[serde(default)]
    pub page_bytes: Option<usize>,
    pub capacity_bytes: u64,
}

/// The manifest of a database directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format_version: u32,
    pub spaces: Vec<ManifestSpace>,
}

impl Manifest {
    /// What a configuration asks for.
    pub fn for_config(config: &DbConfig) -> Manifest {
        let mut spaces: Vec<ManifestSpace> = config
            .data
            .iter()
            .map(|s| ManifestSpace {
                kind: "data".into(),
                name: s.name.clone(),
                file: format!("{}.data", s.name),
                page_bytes: Some(s.page_bytes),
                capacity_bytes: s.capacity_bytes.unwrap_or(FILE_CAPACITY_BYTES_DEFAULT),
            })
            .collect();
        let other = |kind: &str, file: &str, s: &SpaceConfig| ManifestSpace {
            kind: kind.into(),
            name: kind.into(),
            file: file.into(),
            page_bytes: None,
            capacity_bytes: s.capacity_bytes.unwrap_or(FILE_CAPACITY_BYTES_DEFAULT),
        };
        spaces.push(other("log", "log.wal", &config.log));
        if let Some(s) = &config.rollback {
            spaces.push(other("rollback", "rollback.seg", s));
        }
        if let Some(s) = &config.temp {
            spaces.push(other("temp", "temp.tmp", s));
        }
        Manifest {
            format_version: DIR_FORMAT_VERSION,
            spaces,
        }
    }

    /// Read and check `DIR/flashlab.manifest`.
    pub fn read(dir: &Path) -> Result<Option<Manifest>> {
        let path = dir.join(MANIFEST_FILE);
        let meta = match std::fs::metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&path, e)),
        };
        if meta.len() > MANIFEST_BYTES_MAX {
            return Err(Error::Open(format!(
                "{}: {} bytes is too large for a manifest",
                path.display(),
                meta.len()
            )));
        }
        let text = std::fs::read_to_string(&path).map_err(|e| io(&path, e))?;
        let manifest: Manifest = toml::from_str(&text)
            .map_err(|e| Error::Open(format!("{}: {}", path.display(), e.message())))?;
        if manifest.format_version != DIR_FORMAT_VERSION {
            return Err(Error::Open(format!(
                "{}: format version {} is not supported (this build reads version {DIR_FORMAT_VERSION})",
                path.display(),
                manifest.format_version
            )));
        }
        Ok(Some(manifest))
    }

    fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(MANIFEST_FILE);
        let tmp = dir.join(format!("{MANIFEST_FILE}.partial"));
        let text = toml::to_string(self).map_err(|e| Error::Open(e.to_string()))?;
        std::fs::write(&tmp, text).map_err(|e| io(&tmp, e))?;
        std::fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(|e| io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| io(&path, e))?;
        std::fs::File::open(dir)
            .and_then(|f| f.sync_all())
            .map_err(|e| io(dir, e))
    }
}

fn io(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source,
    }
}

/// A configuration for an existing directory, from its manifest (buffer
/// sizes take their defaults): what `flashlab check DIR` opens it with.
pub fn config_from_manifest(dir: &Path) -> Result<DbConfig> {
    let manifest = Manifest::read(dir)?.ok_or_else(|| {
        Error::Open(format!(
            "{}: no {MANIFEST_FILE}; not a flashlab database",
            dir.display()
        ))
    })?;
    let space = |kind: &str| {
        manifest
            .spaces
            .iter()
            .find(|s| s.kind == kind)
            .map(|s| SpaceConfig {
                device: crate::config::FILE_DEVICE.into(),
                capacity_bytes: Some(s.capacity_bytes),
            })
    };
    let data = manifest
        .spaces
        .iter()
        .filter(|s| s.kind == "data")
        .map(|s| crate::config::DataSpaceConfig {
            name: s.name.clone(),
            page_bytes: s.page_bytes.unwrap_or(8192),
            buffer_bytes: (s.page_bytes.unwrap_or(8192) as u64 * 1024).max(16 << 20),
            device: crate::config::FILE_DEVICE.into(),
            capacity_bytes: Some(s.capacity_bytes),
        })
        .collect();
    let mut config = DbConfig::simple("file", "file", 8192, 16 << 20);
    config.data = data;
    config.log = space("log")
        .ok_or_else(|| Error::Open(format!("{}: the manifest lists no log", dir.display())))?;
    config.rollback = space("rollback");
    config.temp = space("temp");
    config.validate()?;
    Ok(config)
}

/// Open the devices of a database directory, creating a new database's
/// files if the directory has no manifest.
pub fn open_devices(dir: &Path, config: &DbConfig) -> Result<Devices> {
    config.validate()?;
    if !dir.is_dir() {
        return Err(Error::Open(format!("{}: not a directory", dir.display())));
    }
    let wanted = Manifest::for_config(config);
    let manifest = match Manifest::read(dir)? {
        Some(found) => {
            check_against(dir, &found, &wanted)?;
            found
        }
        None => {
            create_files(dir, &wanted)?;
            wanted.write(dir)?;
            wanted
        }
    };
    let mut devices = Vec::new();
    for space in &manifest.spaces {
        devices.push((space.kind.clone(), open_file(dir, space)?));
    }
    let take = |kind: &str| {
        devices
            .iter()
            .filter(|(k, _)| k == kind)
            .map(|(_, d)| d.clone())
            .collect::<Vec<_>>()
    };
    Ok(Devices {
        data: take("data"),
        log: take("log")
            .pop()
            .ok_or_else(|| Error::Open(format!("{}: the manifest lists no log", dir.display())))?,
        rollback: take("rollback").pop(),
        temp: take("temp").pop(),
    })
}

/// The configuration must ask for what the directory holds.
fn check_against(dir: &Path, found: &Manifest, wanted: &Manifest) -> Result<()> {
    let path = dir.join(MANIFEST_FILE);
    for want in &wanted.spaces {
        let Some(have) = found
            .spaces
            .iter()
            .find(|s| s.kind == want.kind && s.name == want.name)
        else {
            return Err(Error::Open(format!(
                "{}: no {} space '{}', which the configuration names",
                path.display(),
                want.kind,
                want.name
            )));
        };
        if have.page_bytes != want.page_bytes {
            return Err(Error::Open(format!(
                "{}: space '{}' has {:?}-byte pages; the configuration says {:?}",
                path.display(),
                want.name,
                have.page_bytes.unwrap_or(0),
                want.page_bytes.unwrap_or(0)
            )));
        }
    }
    let data_found = found.spaces.iter().filter(|s| s.kind == "data").count();
    let data_wanted = wanted.spaces.iter().filter(|s| s.kind == "data").count();
    if data_found != data_wanted {
        return Err(Error::Open(format!(
            "{}: {data_found} data spaces, the configuration names {data_wanted}",
            path.display()
        )));
    }
    Ok(())
}

fn space_path(dir: &Path, space: &ManifestSpace) -> Result<PathBuf> {
    let file = Path::new(&space.file);
    if file.components().count() != 1 || file.is_absolute() {
        return Err(Error::Open(format!(
            "manifest names '{}', which is not a plain file name",
            space.file
        )));
    }
    Ok(dir.join(file))
}

fn create_files(dir: &Path, manifest: &Manifest) -> Result<()> {
    for space in &manifest.spaces {
        let path = space_path(dir, space)?;
        if path.exists() {
            return Err(Error::Open(format!(
                "{}: exists, but {} has no {MANIFEST_FILE}; refusing to overwrite it",
                path.display(),
                dir.display()
            )));
        }
    }
    for space in &manifest.spaces {
        let path = space_path(dir, space)?;
        FileDevice::create(&path, space.capacity_bytes, FileOptions::default())?;
    }
    Ok(())
}

fn open_file(dir: &Path, space: &ManifestSpace) -> Result<DeviceRef> {
    let path = space_path(dir, space)?;
    let len = match std::fs::metadata(&path) {
        Ok(meta) => meta.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::Open(format!(
                "{}: missing ({} space '{}')",
                path.display(),
                space.kind,
                space.name
            )));
        }
        Err(e) => return Err(io(&path, e)),
    };
    if len != space.capacity_bytes {
        return Err(Error::Open(format!(
            "{}: {len} bytes, the manifest says {} (truncated or replaced?)",
            path.display(),
            space.capacity_bytes
        )));
    }
    Ok(Arc::new(FileDevice::open(&path, FileOptions::default())?))
}
