//! Set-up shared by the engine's crash and fault tests: a rig of a data and
//! a log device (on the fault model behind one power switch and one
//! WAL-before-data checker, or memory and a simulated SSD), the
//! configurations they run, and a simulated run.

// Each test crate that includes this module uses part of it.
#![allow(dead_code)]

use std::sync::Arc;

use flashlab_devices::fault::{FaultPlan, FaultyDevice, PowerSwitch, Role, WalChecker};
use flashlab_devices::memory::MemoryDevice;
use flashlab_devices::presets;
use flashlab_devices::sim::SimDevice;
use flashlab_devices::{Device, DeviceRef};
use flashlab_engine::config::CpuCosts;
use flashlab_engine::db::verify::{VerifyReport, verify};
use flashlab_engine::{Database, DbConfig, Devices, Table, TableSpec};
use flashlab_runtime::{NS_PER_MS, Rt, Sim, SimConfig};

/// The log's size in every rig.
pub const LOG_BYTES: u64 = 64 << 20;

/// A device that loses its unflushed writes when told.
pub trait Crash {
    fn crash(&self);
}

impl Crash for FaultyDevice {
    fn crash(&self) {
        FaultyDevice::crash(self);
    }
}

impl Crash for MemoryDevice {
    fn crash(&self) {
        MemoryDevice::crash(self);
    }
}

impl Crash for SimDevice {
    fn crash(&self) {
        SimDevice::crash(self);
    }
}

/// Devices of one database: by default both on the fault model.
pub struct Rig<D = FaultyDevice, L = FaultyDevice> {
    pub data: Arc<D>,
    pub log: Arc<L>,
    pub power: Arc<PowerSwitch>,
    pub checker: Arc<WalChecker>,
}

/// A 256 MB memory data device and an `ssd-2008` log.
pub type SsdRig = Rig<MemoryDevice, SimDevice>;

impl SsdRig {
    pub fn ssd() -> SsdRig {
        Rig {
            data: Arc::new(MemoryDevice::new("data", 256 << 20)),
            log: Arc::new(SimDevice::new(presets::build_model("ssd-2008").unwrap())),
            power: PowerSwitch::new(),
            checker: WalChecker::new(),
        }
    }
}

impl Rig {
    /// A rig whose data device `data` builds (given the power switch and
    /// the checker to wire in), with a memory log on `log_plan`.
    pub fn new(
        data: impl FnOnce(&Arc<PowerSwitch>, &Arc<WalChecker>) -> FaultyDevice,
        log_plan: FaultPlan,
    ) -> Rig {
        let checker = WalChecker::new();
        let power = PowerSwitch::new();
        let data = data(&power, &checker);
        let log = FaultyDevice::new(
            Arc::new(MemoryDevice::new("log", LOG_BYTES)),
            Role::Log,
            log_plan,
        )
        .with_wal_checker(checker.clone())
        .with_power(power.clone());
        Rig {
            data: Arc::new(data),
            log: Arc::new(log),
            power,
            checker,
        }
    }
}

impl<D: Device + Crash + 'static, L: Device + Crash + 'static> Rig<D, L> {
    /// The engine's view of the devices.
    pub fn devices(&self) -> Devices {
        Devices {
            data: vec![self.data.clone() as DeviceRef],
            log: self.log.clone(),
            rollback: None,
            temp: None,
        }
    }

    /// Power failure on both devices, then power back.
    pub fn crash(&self) {
        self.data.crash();
        self.log.crash();
        self.power.restore();
    }
}

/// A data device of `bytes` in memory on the fault model, on `power` and
/// `checker`.
pub fn faulty_data(
    bytes: u64,
    page_bytes: usize,
    plan: FaultPlan,
    power: &Arc<PowerSwitch>,
    checker: &Arc<WalChecker>,
) -> FaultyDevice {
    FaultyDevice::new(
        Arc::new(MemoryDevice::new("data", bytes)),
        Role::Data { page_bytes },
        plan,
    )
    .with_wal_checker(checker.clone())
    .with_power(power.clone())
}

/// Memory devices, a pool of 12 pages of `page_bytes`, free CPU, and no
/// checkpoint or background write-back unless a test asks for one.
pub fn quiet_config(data_device: &str, page_bytes: usize) -> DbConfig {
    let mut config = DbConfig::simple(data_device, "memory", page_bytes, 12 * page_bytes as u64);
    config.checkpoint_interval_ns = 0;
    config.buffer.cleaner_interval_ns = 3600 * 1_000 * NS_PER_MS;
    config.buffer.clean_target = 0.0;
    config.cpu = CpuCosts::free();
    config
}

/// A memory data device, an `ssd-2008` log and a pool of `pool_pages`
/// pages of 2 KB: pages are stolen (written while uncommitted) all the
/// time. Frequent checkpoints and write-back.
pub fn busy_config(pool_pages: u64) -> DbConfig {
    let mut config = DbConfig::simple("memory", "ssd-2008", 2048, pool_pages * 2048);
    config.checkpoint_interval_ns = 20 * NS_PER_MS;
    config.buffer.cleaner_interval_ns = 5 * NS_PER_MS;
    config.buffer.cleaner_batch_pages = 4;
    config
}

/// `row{i:05}`.
pub fn row_key(i: u32) -> Vec<u8> {
    format!("row{i:05}").into_bytes()
}

/// Row `i` at `version`, padded with `pad` bytes.
pub fn row_value(i: u32, version: u32, pad: usize) -> Vec<u8> {
    format!("{version:06}/{i:05}/{}", "x".repeat(pad)).into_bytes()
}

/// Create table `t` and put `value(i)` under `key(i)` for each `i` of
/// `rows`, in one transaction.
pub fn load_table(
    db: &Database,
    rows: std::ops::Range<u32>,
    key: impl Fn(u32) -> Vec<u8>,
    value: impl Fn(u32) -> Vec<u8>,
) {
    let t = db.create_table(TableSpec::bytes("t")).unwrap();
    let mut txn = db.begin().unwrap();
    for i in rows {
        txn.put(&t, &key(i), &value(i)).unwrap();
    }
    txn.commit().unwrap();
}

/// Open the database on `devices`, commit `value(i)` under `key(i)` in
/// table `t` for each `i` of `rows`, one transaction each, and abandon it
/// (no checkpoint, no flush of the data device).
pub fn commit_each_and_abandon(
    devices: Devices,
    config: DbConfig,
    rows: std::ops::Range<u32>,
    key: impl Fn(u32) -> Vec<u8> + Send + 'static,
    value: impl Fn(u32) -> Vec<u8> + Send + 'static,
) {
    run(move || {
        let db = Database::open_with(&config, devices).unwrap();
        let t = db.table("t").unwrap();
        commit_each(&db, &t, rows, key, value);
        db.abandon();
    });
}

/// Row `i` of table `t` holds `value(i)` for each `i` of `rows`, and
/// `verify` finds nothing.
pub fn check_table(
    db: &Database,
    rows: std::ops::Range<u32>,
    key: impl Fn(u32) -> Vec<u8>,
    value: impl Fn(u32) -> Vec<u8>,
) {
    let t = db.table("t").unwrap();
    let mut txn = db.begin().unwrap();
    for i in rows {
        assert_eq!(txn.get(&t, &key(i)).unwrap(), Some(value(i)), "row {i}");
    }
    txn.commit().unwrap();
    let report = verify(db).unwrap();
    assert!(report.ok(), "{:?}", report.problems);
}

/// In a simulation of up to 600 s, update rows `0..rows` of table `t` to
/// `value(i)`, one commit each, until the power goes, noting `observe` of
/// the database after each commit; `finish` runs if the power never went.
/// Returns the commits acknowledged and the last observation.
pub fn update_each_until_cut<T: Default + Send + 'static>(
    devices: Devices,
    config: DbConfig,
    rows: u32,
    value: impl Fn(u32) -> Vec<u8> + Send + 'static,
    observe: impl Fn(&Database) -> T + Send + 'static,
    finish: impl FnOnce(&Database) + Send + 'static,
) -> (u32, T) {
    let acked = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let seen = Arc::new(std::sync::Mutex::new(T::default()));
    let (a, s) = (acked.clone(), seen.clone());
    let sim = SimConfig {
        deadline_ns: Some(600 * flashlab_runtime::NS_PER_S),
        ..SimConfig::default()
    };
    let _ = Sim::run(sim, move |_| {
        let db = Database::open_with(&config, devices).unwrap();
        let t = db.table("t").unwrap();
        for i in 0..rows {
            let mut txn = db.begin().unwrap();
            txn.put(&t, &row_key(i), &value(i)).unwrap();
            txn.commit().unwrap();
            a.store(i + 1, std::sync::atomic::Ordering::SeqCst);
            *s.lock().unwrap() = observe(&db);
        }
        finish(&db);
        db.abandon();
    })
    .unwrap();
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    (acked.load(std::sync::atomic::Ordering::SeqCst), seen)
}

/// After a power cut during commits of `version` in key order: rows below
/// `acked` hold `value(i, version)` (acknowledged), rows above it
/// `value(i, 0)`, row `acked` either (its commit was in doubt); `verify`
/// finds nothing.
pub fn check_cut_rows(
    db: &Database,
    rows: u32,
    acked: u32,
    version: u32,
    value: impl Fn(u32, u32) -> Vec<u8>,
) {
    let t = db.table("t").unwrap();
    let mut txn = db.begin().unwrap();
    for i in 0..rows {
        let got = txn.get(&t, &row_key(i)).unwrap();
        if i < acked {
            assert_eq!(
                got,
                Some(value(i, version)),
                "row {i}: an acknowledged commit lost"
            );
        } else if i > acked {
            assert_eq!(got, Some(value(i, 0)), "row {i}: an uncommitted effect");
        } else {
            assert!(
                got == Some(value(i, 0)) || got == Some(value(i, version)),
                "row {i}"
            );
        }
    }
    txn.commit().unwrap();
    let report = verify(db).unwrap();
    assert!(report.ok(), "{:?}", report.problems);
}

/// The offset of the last 512-byte sector of a log file image that is not
/// all zeros (the master region, the first 4 KB, left out).
pub fn last_written_log_sector(log: &[u8]) -> usize {
    (4096..log.len())
        .step_by(512)
        .rfind(|&at| log[at..at + 512].iter().any(|&b| b != 0))
        .unwrap()
}

/// Run `f` as the root task of a default simulation.
pub fn run<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    sim(move |_| f())
}

/// Verify `db` and fail on any problem found; the report, for what a
/// test checks further.
pub fn assert_verified(db: &Database) -> VerifyReport {
    let report = verify(db).unwrap();
    assert!(report.ok(), "{:?}", report.problems);
    report
}

/// Run `f` as the root task of a default simulation, with its runtime.
pub fn sim<T: Send + 'static>(f: impl FnOnce(Rt) -> T + Send + 'static) -> T {
    Sim::run(SimConfig::default(), f)
        .expect("simulation")
        .0
        .finished()
        .expect("finished")
}

/// Put `value(i)` under `key(i)` for each `i` of `rows`, one transaction
/// and commit each.
pub fn commit_each(
    db: &Database,
    table: &Table,
    rows: std::ops::Range<u32>,
    key: impl Fn(u32) -> Vec<u8>,
    value: impl Fn(u32) -> Vec<u8>,
) {
    for i in rows {
        let mut txn = db.begin().unwrap();
        txn.put(table, &key(i), &value(i)).unwrap();
        txn.commit().unwrap();
    }
}
