//! The mirrored log (`[log] mirror`, issue 41): a flushed log sector that
//! one copy later loses or zeroes, with nothing written after it, is found
//! in the other copy and repaired, and every acknowledged commit survives.
//! With one copy the same damage is the README's stated limit
//! (`damage_at_rest.rs`, case 3).

use std::sync::Arc;

use flashlab_devices::memory::MemoryDevice;
use flashlab_devices::overlay::OverlayDevice;
use flashlab_devices::{Device, DeviceRef};
use flashlab_engine::wal::mirror::MirroredLog;
use flashlab_engine::{Database, DbConfig, Devices, TableSpec};
use flashlab_runtime::{Sim, SimConfig};

mod common;
use common::last_written_log_sector;

const LOG_BYTES: u64 = 8 << 20;

struct Rig {
    data: DeviceRef,
    primary: Arc<MemoryDevice>,
    mirror: Arc<MemoryDevice>,
}

impl Rig {
    fn new() -> Rig {
        Rig {
            data: Arc::new(MemoryDevice::new("data", 8 << 20)),
            primary: Arc::new(MemoryDevice::new("log", LOG_BYTES)),
            mirror: Arc::new(MemoryDevice::new("log mirror", LOG_BYTES)),
        }
    }

    /// The devices, and the mirrored log to ask for its repairs.
    fn devices(&self) -> (Devices, Arc<MirroredLog>) {
        let log = Arc::new(MirroredLog::new(self.primary.clone(), self.mirror.clone()));
        let devices = Devices {
            data: vec![self.data.clone()],
            log: log.clone(),
            rollback: None,
            temp: None,
        };
        (devices, log)
    }
}

fn config() -> DbConfig {
    let mut config = DbConfig::simple("memory", "memory", 4096, 64 * 4096);
    config.log.capacity_bytes = Some(LOG_BYTES);
    config.checkpoint_interval_ns = 3_600_000_000_000;
    config
}

/// The offset of the last sector of `device` that holds anything.
fn last_written_sector(device: &MemoryDevice) -> u64 {
    let mut bytes = vec![0u8; LOG_BYTES as usize];
    device.read(0, &mut bytes).unwrap();
    last_written_log_sector(&bytes) as u64
}

/// Commit rows 0..n one per transaction, stop without a checkpoint (a
/// crash: the memory devices keep every write), zero the last written
/// log sector of the copy `damaged` picks, and reopen.
fn zero_the_last_sector_of(
    damaged: impl Fn(&Rig) -> Arc<MemoryDevice> + Send + 'static,
    control: bool,
) {
    Sim::run(SimConfig::default(), move |_| {
        let rig = Rig::new();
        let (devices, _) = rig.devices();
        let db = Database::open_with(&config(), devices).unwrap();
        commit_rows(&db, 100);
        db.abandon();
        let copy = damaged(&rig);
        let last = last_written_sector(&copy);
        copy.write(last, &[0u8; 512]).unwrap();
        if control {
            // The primary alone, over copy-on-write views: the limit.
            let view = |d: DeviceRef| Arc::new(OverlayDevice::new(d)) as DeviceRef;
            let devices = Devices {
                data: vec![view(rig.data.clone())],
                log: view(rig.primary.clone()),
                rollback: None,
                temp: None,
            };
            let db = Database::open_with(&config(), devices).unwrap();
            assert!(
                count(&db) < 100,
                "one copy found the zeroed sector's commit"
            );
            db.abandon();
        }
        let (devices, log) = rig.devices();
        let db = Database::open_with(&config(), devices).unwrap();
        assert!(
            log.repaired_sectors() >= 1,
            "the lost sector was not repaired"
        );
        assert_eq!(count(&db), 100, "acknowledged commits lost");
        db.abandon();
        // Both copies agree again where the damage was.
        let (mut a, mut b) = (vec![0u8; 512], vec![0u8; 512]);
        rig.primary.read(last, &mut a).unwrap();
        rig.mirror.read(last, &mut b).unwrap();
        assert_eq!(a, b);
    })
    .unwrap();
}

fn count(db: &Database) -> usize {
    let t = db.table("kv").unwrap();
    let mut txn = db.begin().unwrap();
    let rows = txn
        .scan(&t, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
        .unwrap();
    rows.len()
}

/// Create table `kv` and commit `rows` rows to it, one a transaction.
fn commit_rows(db: &Database, rows: u32) {
    let t = db.create_table(TableSpec::bytes("kv")).unwrap();
    for i in 0..rows {
        let mut txn = db.begin().unwrap();
        txn.put(&t, format!("{i:05}").as_bytes(), &[1u8; 60])
            .unwrap();
        txn.commit().unwrap();
    }
}

#[test]
fn regression_a_zeroed_last_sector_of_the_primary_is_repaired_from_the_mirror() {
    zero_the_last_sector_of(|rig| rig.primary.clone(), true);
}

#[test]
fn regression_a_zeroed_last_sector_of_the_mirror_is_repaired_from_the_primary() {
    zero_the_last_sector_of(|rig| rig.mirror.clone(), false);
}

/// A database directory whose log has a mirror on another path (`[log]
/// mirror = PATH`): the manifest records it, a crash image whose log lost
/// its last flushed sector opens with every commit, from the mirror.
#[test]
fn regression_a_directorys_log_mirror_repairs_a_zeroed_last_sector() {
    use flashlab_runtime::RealRuntime;
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let image = tempfile::tempdir().unwrap();
    let image_mirror = tempfile::tempdir().unwrap();
    let mirror = elsewhere.path().join("log.mirror");
    let mut config = DbConfig::simple("file", "file", 4096, 64 * 4096);
    config.data[0].capacity_bytes = Some(4 << 20);
    config.log.capacity_bytes = Some(4 << 20);
    config.log.mirror = Some(mirror.display().to_string());
    config.checkpoint_interval_ns = 3_600_000_000_000;
    let rt = RealRuntime::new(1);
    let _enter = RealRuntime::enter(&rt);
    Database::create_dir(dir.path(), &config).unwrap();
    let manifest = std::fs::read_to_string(dir.path().join("flashlab.manifest")).unwrap();
    assert!(manifest.contains("log.mirror"), "{manifest}");
    let db = Database::open_dir(dir.path(), &config).unwrap();
    commit_rows(&db, 50);
    // A crash image of both paths, taken while the database is open.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), image.path().join(entry.file_name())).unwrap();
        }
    }
    let copied_mirror = image_mirror.path().join("log.mirror");
    std::fs::copy(&mirror, &copied_mirror).unwrap();
    db.abandon();
    let log_path = image.path().join("log.wal");
    let log = std::fs::read(&log_path).unwrap();
    let last = last_written_log_sector(&log);
    let mut zeroed = log.clone();
    zeroed[last..last + 512].fill(0);
    std::fs::write(&log_path, &zeroed).unwrap();
    // The image's manifest names the original mirror: point it at the copy.
    let manifest = manifest.replace(
        &mirror.display().to_string(),
        &copied_mirror.display().to_string(),
    );
    std::fs::write(image.path().join("flashlab.manifest"), manifest).unwrap();
    config.log.mirror = Some(copied_mirror.display().to_string());
    let db = Database::open_dir(image.path(), &config).unwrap();
    let t = db.table("kv").unwrap();
    let mut txn = db.begin().unwrap();
    let rows = txn
        .scan(&t, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
        .unwrap();
    assert_eq!(rows.len(), 50, "acknowledged commits lost");
    drop(txn);
    db.close().unwrap();
    let repaired = std::fs::read(&log_path).unwrap();
    assert!(
        repaired[last..last + 512].iter().any(|&b| b != 0),
        "not repaired"
    );
}
