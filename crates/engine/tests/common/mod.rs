//! Set-up shared by the page-store crash tests (`ipl.rs`,
//! `log_structured.rs`): a data device and a 64 MB memory log on the fault
//! model behind one power switch and one WAL-before-data checker, and a
//! simulated run.

// Each test crate that includes this module uses part of it.
#![allow(dead_code)]

use std::sync::Arc;

use flashlab_devices::DeviceRef;
use flashlab_devices::fault::{FaultPlan, FaultyDevice, PowerSwitch, Role, WalChecker};
use flashlab_devices::memory::MemoryDevice;
use flashlab_engine::{Database, Devices, Table};
use flashlab_runtime::{Sim, SimConfig};

/// The log's size in every rig.
pub const LOG_BYTES: u64 = 64 << 20;

/// Devices of one database on the fault model.
pub struct Rig {
    pub data: Arc<FaultyDevice>,
    pub log: Arc<FaultyDevice>,
    pub power: Arc<PowerSwitch>,
    pub checker: Arc<WalChecker>,
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

/// Run `f` as the root task of a default simulation.
pub fn run<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    Sim::run(SimConfig::default(), move |_| f())
        .unwrap()
        .0
        .finished()
        .unwrap()
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
