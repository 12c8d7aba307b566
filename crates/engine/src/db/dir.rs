//! A database directory in the real world: one file per space, a
//! manifest and a lock file.
//!
//! `DIR/flashlab.manifest` (TOML) records the format version, the
//! database's identity and, for every space, its kind, name, file, page
//! size and capacity.
//!
//! * Creating ([`create`]) is atomic and explicit: under the directory's
//!   exclusive lock the space files (sparse, allocated on demand) are built
//!   in a staging directory, the database is created on them and closed,
//!   the files are renamed into `DIR` and the manifest is written last
//!   (temporary file, fsync, rename, fsync of the directory). A failed
//!   attempt removes what it made; files already in `DIR` are never
//!   overwritten.
//! * Opening ([`open_devices`]) never creates. It takes the lock
//!   ([`super::dirlock`]: exclusive to write, shared to read), checks the
//!   manifest against the configuration and every file against the
//!   manifest (missing, truncated, swapped, foreign: `super::roles`), and
//!   refuses a log without a valid master record as damaged. A read-only
//!   open puts every file under a copy-on-write overlay.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flashlab_devices::file::{FileDevice, FileOptions};
use flashlab_devices::nand_device::{NandFile, NandSpec};
use flashlab_devices::overlay::OverlayDevice;
use flashlab_devices::{Device, DeviceRef};
use serde::{Deserialize, Serialize};

use crate::config::{DbConfig, FILE_CAPACITY_BYTES_DEFAULT, SpaceConfig};
use crate::db::dirlock::{DirLock, LOCK_FILE};
use crate::db::gate::WriteGate;
use crate::db::{Database, Devices};
use crate::error::{Error, Result};
use crate::wal::mirror::MirroredLog;

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
    /// A data space's page store (absent: in place).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<crate::store::StoreKind>,
    /// A log-structured space's segment cleaning (absent: the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleaning: Option<crate::store::Cleaning>,
    /// An In-Page Logging space's log segment (absent: the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipl_log_segment_bytes: Option<u64>,
    /// The log only: the path of its mirror, a second copy of the log file
    /// of the same size (`[log] mirror`; relative to the directory unless
    /// absolute). Absent: one copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror: Option<String>,
}

/// The manifest of a database directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format_version: u32,
    /// The database's identity, 16 hex digits, chosen at random when it is
    /// created and also written into page 0 of every data space (absent in
    /// directories created before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database_id: Option<String>,
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
                store: (s.store != crate::store::StoreKind::InPlace).then_some(s.store),
                cleaning: s.cleaning,
                ipl_log_segment_bytes: s.ipl_log_segment_bytes,
                mirror: None,
            })
            .collect();
        let other = |kind: &str, file: &str, s: &SpaceConfig| ManifestSpace {
            kind: kind.into(),
            name: kind.into(),
            file: file.into(),
            page_bytes: None,
            capacity_bytes: s.capacity_bytes.unwrap_or(FILE_CAPACITY_BYTES_DEFAULT),
            store: None,
            cleaning: None,
            ipl_log_segment_bytes: None,
            mirror: s.mirror.clone(),
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
            database_id: None,
            spaces,
        }
    }

    /// The database identity, if the manifest records a valid one.
    pub fn identity(&self) -> Option<u64> {
        u64::from_str_radix(self.database_id.as_deref()?, 16).ok()
    }

    /// Read and check `DIR/flashlab.manifest`.
    pub fn read(dir: &Path) -> Result<Option<Manifest>> {
        let path = dir.join(MANIFEST_FILE);
        use flashlab_runtime::text::{TextFileError, read_text_file};
        let text = match read_text_file(&path, MANIFEST_BYTES_MAX) {
            Ok(text) => text,
            Err(TextFileError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(None);
            }
            Err(TextFileError::Io(e)) => return Err(io(&path, e)),
            Err(e) => {
                return Err(Error::Open(format!(
                    "{}: {e} for a manifest",
                    path.display()
                )));
            }
        };
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
                mirror: s.mirror.clone(),
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
            store: s.store.unwrap_or_default(),
            ipl_log_segment_bytes: s.ipl_log_segment_bytes,
            ipl_no_commit_force: false,
            ipl_no_selection: false,
            segment_bytes: None,
            cleaning: s.cleaning,
            write_through: false,
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

/// How a database directory is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// For writing: the exclusive lock (DIR-1); recovery writes the files.
    Write,
    /// Read-only: the shared lock; every device is an overlay, so recovery
    /// and everything after it run in memory and no byte reaches the files.
    ReadOnly,
}

/// Open the devices of an existing database directory. Never creates:
/// a directory without a manifest is not a database (see [`create`]).
/// For writing, the files are gated: see `open_devices_gated`.
pub fn open_devices(dir: &Path, config: &DbConfig, access: Access) -> Result<Devices> {
    let (devices, gate) = open_devices_gated(dir, config, access)?;
    if let Some(gate) = gate {
        gate.release()?;
    }
    Ok(devices)
}

/// [`open_devices`], whose files, for writing, are behind a write gate
/// (OPEN-1) that the caller releases once the open passed every check.
pub(crate) fn open_devices_gated(
    dir: &Path,
    config: &DbConfig,
    access: Access,
) -> Result<(Devices, Option<Arc<WriteGate>>)> {
    config.validate()?;
    if !dir.is_dir() {
        return Err(Error::Open(format!("{}: not a directory", dir.display())));
    }
    // Not a database: refuse before the lock file could be created.
    if !dir.join(MANIFEST_FILE).exists() {
        return Err(not_a_database(dir));
    }
    let lock = match access {
        Access::Write => Some(DirLock::exclusive(dir)?),
        Access::ReadOnly => DirLock::shared(dir)?,
    };
    let manifest = Manifest::read(dir)?.ok_or_else(|| not_a_database(dir))?;
    check_against(dir, &manifest, &Manifest::for_config(config))?;
    let gate = (access == Access::Write).then(WriteGate::new);
    let mut devices = Vec::new();
    for space in &manifest.spaces {
        let file = open_file(dir, space, config, access, gate.as_ref())?;
        devices.push((space.kind.clone(), file));
    }
    super::roles::check(dir, &manifest, &devices)?;
    let take = |kind: &str| of_kind(&devices, kind);
    let log = take("log")
        .pop()
        .ok_or_else(|| Error::Open(format!("{}: the manifest lists no log", dir.display())))?;
    let devices = Devices {
        data: take("data"),
        log: hold(log, lock),
        rollback: take("rollback").pop(),
        temp: take("temp").pop(),
    };
    Ok((devices, gate))
}

fn not_a_database(dir: &Path) -> Error {
    Error::Open(format!(
        "{}: no {MANIFEST_FILE}; not a flashlab database (opening never creates one)",
        dir.display()
    ))
}

/// Open an existing database on the devices of its directory: recovery,
/// never creation. A log without a valid master record is damage.
pub(crate) fn open_existing(
    config: &DbConfig,
    devices: Devices,
    gate: Option<Arc<WriteGate>>,
) -> Result<Database> {
    let Some(master) = crate::wal::Wal::read_master(&devices.log)? else {
        return Err(Error::Damaged(format!(
            "{}: neither copy of the log's master record is valid",
            devices.log.name()
        )));
    };
    let db = super::recovery::recover(config, devices, master)?;
    // OPEN-1: recovery passed every check; its writes reach the files now.
    if let Some(gate) = gate {
        gate.release()?;
    }
    db.start_background();
    Ok(db)
}

/// Create a new database in `dir`, atomically. The space files are built
/// in a staging directory inside `dir`, the database is created and closed
/// on them, they are renamed into `dir`, and the manifest is published
/// last, by rename. On failure everything the attempt made is removed.
/// Refuses a directory that holds a manifest or any of the space files.
pub fn create(dir: &Path, config: &DbConfig) -> Result<()> {
    config.validate()?;
    if !dir.is_dir() {
        return Err(Error::Open(format!("{}: not a directory", dir.display())));
    }
    let lock_existed = dir.join(LOCK_FILE).exists();
    let lock = DirLock::exclusive(dir)?;
    let identity = rand::random::<u64>().max(1);
    let manifest = Manifest {
        database_id: Some(format!("{identity:016x}")),
        ..Manifest::for_config(config)
    };
    let mut published = Vec::new();
    let result = create_locked(dir, config, &manifest, &mut published);
    if result.is_err() {
        remove_attempt(dir, &published);
        if !lock_existed {
            let _ = std::fs::remove_file(lock.path());
        }
    }
    drop(lock);
    result
}

/// The staging directory of a creation in progress.
pub const STAGING_DIR: &str = ".flashlab-creating";

/// `published`: the files renamed into `dir` so far, for [`remove_attempt`].
fn create_locked(
    dir: &Path,
    config: &DbConfig,
    manifest: &Manifest,
    published: &mut Vec<PathBuf>,
) -> Result<()> {
    if dir.join(MANIFEST_FILE).exists() {
        return Err(Error::Open(format!(
            "{}: already holds a database ({MANIFEST_FILE}); refusing to create over it",
            dir.display()
        )));
    }
    refuse_existing_files(dir, manifest)?;
    if let Some(mirror) = log_mirror(dir, manifest).filter(|p| p.exists()) {
        return Err(Error::Open(format!(
            "{}: the log's mirror exists already; refusing to overwrite it",
            mirror.display()
        )));
    }
    let staging = dir.join(STAGING_DIR);
    // We hold the exclusive lock: a staging directory is a dead creator's.
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(|e| io(&staging, e))?;
    }
    std::fs::create_dir(&staging).map_err(|e| io(&staging, e))?;
    let mirror = log_mirror(dir, manifest);
    published.extend(mirror.clone());
    build(&staging, mirror.as_deref(), config, manifest)?;
    for space in &manifest.spaces {
        let from = space_path(&staging, space)?;
        let to = space_path(dir, space)?;
        std::fs::rename(&from, &to).map_err(|e| io(&to, e))?;
        published.push(to);
    }
    std::fs::remove_dir(&staging).map_err(|e| io(&staging, e))?;
    sync_dir(dir)?;
    manifest.write(dir)
}

/// Create the files and the database on them in `staging` (the log's
/// mirror, if any, at `mirror`), then close it.
fn build(
    staging: &Path,
    mirror: Option<&Path>,
    config: &DbConfig,
    manifest: &Manifest,
) -> Result<()> {
    let mut devices = Vec::new();
    for space in &manifest.spaces {
        let path = space_path(staging, space)?;
        let mut device: DeviceRef = Arc::new(create_file(&path, space, config)?);
        if let (Some(mirror), "log") = (mirror, space.kind.as_str()) {
            let copy = create_file(mirror, space, config)?;
            device = Arc::new(MirroredLog::new(device, Arc::new(copy)));
        }
        devices.push((space.kind.clone(), medium(space, device)?));
    }
    let take = |kind: &str| of_kind(&devices, kind);
    let devices = Devices {
        data: take("data"),
        log: take("log")
            .pop()
            .ok_or_else(|| Error::Open("the configuration names no log".into()))?,
        rollback: take("rollback").pop(),
        temp: take("temp").pop(),
    };
    let db = Database::open_with(config, devices)?;
    if let Some(id) = manifest.identity() {
        super::roles::stamp(&db, id)?;
    }
    db.close()
}

/// A new space file of `space`'s size at `path`, as the engine writes it.
fn create_file(path: &Path, space: &ManifestSpace, config: &DbConfig) -> Result<FileDevice> {
    let mut device = FileDevice::create(path, space.capacity_bytes, FileOptions::default())?;
    if let Some(options) = log_direct(space, path) {
        device = FileDevice::open(path, options)?;
    }
    zeroed_ahead(space, config, device)
}

/// Where the manifest's log keeps its mirror, if it has one.
fn log_mirror(dir: &Path, manifest: &Manifest) -> Option<PathBuf> {
    let log = manifest.spaces.iter().find(|s| s.kind == "log")?;
    log.mirror.as_ref().map(|m| dir.join(m))
}

/// Remove what a failed creation made: the staging directory, and the
/// space files it renamed into `dir` before the manifest was published.
fn remove_attempt(dir: &Path, published: &[PathBuf]) {
    let _ = std::fs::remove_dir_all(dir.join(STAGING_DIR));
    if dir.join(MANIFEST_FILE).exists() {
        return;
    }
    let _ = std::fs::remove_file(dir.join(format!("{MANIFEST_FILE}.partial")));
    for path in published {
        let _ = std::fs::remove_file(path);
    }
}

/// Remove the database in `dir` that this process created and that failed
/// before it was of any use (a benchmark whose loading ran out of space):
/// the manifest first, so that the directory stops being a database at
/// once, then the space files and the lock file. Only for the process that
/// holds, or held, the directory's lock; other files in `dir` are kept.
pub fn remove_created(dir: &Path) -> Result<()> {
    let Some(manifest) = Manifest::read(dir)? else {
        return Ok(());
    };
    let path = dir.join(MANIFEST_FILE);
    std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
    sync_dir(dir)?;
    for space in &manifest.spaces {
        let path = space_path(dir, space)?;
        std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
    }
    if let Some(mirror) = log_mirror(dir, &manifest) {
        std::fs::remove_file(&mirror).map_err(|e| io(&mirror, e))?;
    }
    let _ = std::fs::remove_file(dir.join(LOCK_FILE));
    sync_dir(dir)
}

/// The devices of `kind`, in order.
fn of_kind<K: PartialEq<str>>(devices: &[(K, DeviceRef)], kind: &str) -> Vec<DeviceRef> {
    devices
        .iter()
        .filter(|(k, _)| k == kind)
        .map(|(_, d)| d.clone())
        .collect()
}

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| io(dir, e))
}

/// Keeps the directory's lock for as long as the database holds its log
/// device; forwards everything else.
struct Held {
    device: DeviceRef,
    _lock: DirLock,
}

fn hold(device: DeviceRef, lock: Option<DirLock>) -> DeviceRef {
    match lock {
        Some(lock) => Arc::new(Held {
            device,
            _lock: lock,
        }),
        None => device,
    }
}

impl flashlab_devices::Wrapper for Held {
    fn inner(&self) -> &dyn Device {
        &*self.device
    }
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

fn refuse_existing_files(dir: &Path, manifest: &Manifest) -> Result<()> {
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
    Ok(())
}

/// The log's file is zeroed ahead of the writer (FILE-1), so that a log
/// force overwrites written blocks and its fdatasync commits no file-system
/// metadata. Without durable commits (`Durability::NoSync`, for experiments)
/// there are no forces to spare, and the zeroing would only take CPU time
/// and write bandwidth from the run (a sixth of the CPU of a 16-client
/// TPC-B run without fsync).
fn zeroed_ahead(
    space: &ManifestSpace,
    config: &DbConfig,
    device: FileDevice,
) -> Result<FileDevice> {
    match (space.kind.as_str(), config.wal.durability) {
        ("log", crate::wal::Durability::Sync) => Ok(device.zero_ahead()?),
        _ => Ok(device),
    }
}

/// The log's file is written around the page cache (`O_DIRECT`, FILE-2)
/// where the file system allows it at the log's own 512-byte sectors, so
/// the device and the log's layout are the same either way: a log force
/// then copies nothing into the page cache (a tenth of the CPU of real
/// TPC-B at two clients without fsync) and its fdatasync has no dirty
/// pages to write, only the device's cache to flush. Elsewhere (tmpfs, a
/// file system asking for coarser alignment), and for every other space,
/// the page cache. `None`: buffered.
fn log_direct(space: &ManifestSpace, path: &Path) -> Option<FileOptions> {
    (space.kind == "log" && flashlab_devices::file::direct_at_file_sector(path))
        .then_some(FileOptions { direct: true })
}

fn open_file(
    dir: &Path,
    space: &ManifestSpace,
    config: &DbConfig,
    access: Access,
    gate: Option<&Arc<WriteGate>>,
) -> Result<DeviceRef> {
    let path = space_path(dir, space)?;
    let file = open_one(&path, space, config, access, gate)?;
    let Some(mirror) = space.mirror.as_ref().filter(|_| space.kind == "log") else {
        return medium(space, file);
    };
    let copy = open_one(&dir.join(mirror), space, config, access, gate)?;
    Ok(Arc::new(MirroredLog::new(file, copy)))
}

/// One file of a space: checked against the manifest's size, gated for a
/// writer (OPEN-1), a copy-on-write view for a reader.
fn open_one(
    path: &Path,
    space: &ManifestSpace,
    config: &DbConfig,
    access: Access,
    gate: Option<&Arc<WriteGate>>,
) -> Result<DeviceRef> {
    let path = path.to_path_buf();
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
    let file: DeviceRef = match access {
        Access::Write => {
            let options = log_direct(space, &path).unwrap_or_default();
            let device = FileDevice::open(&path, options)?;
            let file: DeviceRef = Arc::new(zeroed_ahead(space, config, device)?);
            match gate {
                Some(gate) => gate.wrap(file),
                None => file,
            }
        }
        Access::ReadOnly => Arc::new(OverlayDevice::new(Arc::new(FileDevice::open_read_only(
            &path,
        )?))),
    };
    Ok(file)
}

/// The device a space's store sees in its file: the file itself, or for
/// a store on raw NAND (`StoreKind::needs_raw_nand`) the K9WAG08U1A's
/// geometry in it (`NandFile`: program-once, whole-unit erases, the NOP
/// limit).
fn medium(space: &ManifestSpace, file: DeviceRef) -> Result<DeviceRef> {
    if !space.store.is_some_and(|kind| kind.needs_raw_nand()) {
        return Ok(file);
    }
    let spec = NandSpec::k9wag08u1a().with_capacity_bytes(space.capacity_bytes);
    NandFile::new(spec, file)
        .map(|nand| Arc::new(nand) as DeviceRef)
        .map_err(|e| Error::Open(format!("space '{}' ({}): {e}", space.name, space.file)))
}
