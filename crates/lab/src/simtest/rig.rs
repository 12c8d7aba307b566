//! The devices of one seed: a data device and a log device, each wrapped in
//! a [`FaultyDevice`], on one power switch, sharing one WAL checker. They
//! live outside the simulations, so they survive every cut; a crash is
//! applied to them between simulations.

use anyhow::anyhow;
use std::sync::Arc;

use flashlab_devices::DeviceRef;
use flashlab_devices::fault::{
    FaultCounts, FaultPlan, FaultRecord, FaultyDevice, PageCheck, PowerSwitch, Role, WalChecker,
};
use flashlab_devices::memory::MemoryDevice;
use flashlab_devices::presets;
use flashlab_devices::sim::SimDevice;
use flashlab_devices::store::StoredDevice;
use flashlab_engine::Devices;
use flashlab_engine::page::{self, PageId};
use flashlab_engine::store::StoreKind;
use flashlab_engine::store::ipl::layout::{
    ERASE_UNIT_BYTES, LOG_SECTOR_BYTES, LOG_SEGMENT_BYTES_DEFAULT,
};
use flashlab_engine::store::ipl::sector::{self, Decoded};

/// Capacity of a memory data device.
pub const MEMORY_DATA_BYTES: u64 = 256 << 20;

/// The devices of one seed.
pub struct Rig {
    pub data: Arc<FaultyDevice>,
    pub log: Arc<FaultyDevice>,
    /// A second copy of the log (`[log] mirror`), with the same fault plan
    /// drawn anew, on the same power switch; `None`: one copy.
    pub log_mirror: Option<Arc<FaultyDevice>>,
    /// The MVCC rollback space (not logged: recovery discards it).
    pub rollback: Arc<FaultyDevice>,
    pub power: Arc<PowerSwitch>,
    pub checker: Arc<WalChecker>,
    pub page_bytes: usize,
    /// Recoveries of an In-Page Logging space, and the redo records of its
    /// pages they applied and skipped (REC-4: none applied).
    pub ipl_restarts: Arc<std::sync::Mutex<[u64; 3]>>,
    /// What IPL spaces' selective merges and aborts did (IPL-SEL), summed
    /// over the seed's opens: [`IPL_SELECTION_COUNTERS`] in order.
    pub ipl_selection: Arc<std::sync::Mutex<[u64; 4]>>,
}

/// The IPL store counters the crash harness sums (IPL-SEL).
pub const IPL_SELECTION_COUNTERS: [&str; 4] = [
    "selective_merges",
    "records_discarded",
    "records_carried",
    "records_deapplied",
];

impl Rig {
    /// Tally what an open's recovery did to IPL pages (REC-4).
    pub fn note_recovery(&self, db: &flashlab_engine::Database) {
        if let Some(r) = db.recovery_report().filter(|r| r.ipl_restart_lsn > 0) {
            let mut t = self.ipl_restarts.lock().expect("ipl restarts");
            t[0] += 1;
            t[1] += r.ipl_pages_redone;
            t[2] += r.ipl_pages_skipped;
        }
    }

    /// Tally what an open's IPL spaces left out or carried (before a cut).
    pub fn note_selection(&self, db: &flashlab_engine::Database) {
        let mut t = self.ipl_selection.lock().expect("ipl selection");
        for (_, _, counters) in db.store_counters() {
            for (name, value) in counters {
                if let Some(i) = IPL_SELECTION_COUNTERS.iter().position(|c| *c == name) {
                    t[i] += value as u64;
                }
            }
        }
    }
}

fn stored(preset: &str, name: &str) -> anyhow::Result<Arc<dyn StoredDevice>> {
    if preset == presets::MEMORY {
        return Ok(Arc::new(MemoryDevice::new(name, MEMORY_DATA_BYTES)));
    }
    if presets::is_raw_nand(preset) {
        return presets::open_simulated_stored(preset, None).map_err(|e| anyhow!("{e}"));
    }
    let model = presets::build_model(preset).map_err(|e| anyhow!("{e}"))?;
    Ok(Arc::new(SimDevice::new(model)))
}

impl Rig {
    /// Devices of the given presets (`memory` or a model) with these plans.
    pub fn new(
        data_preset: &str,
        log_preset: &str,
        page_bytes: usize,
        data_plan: FaultPlan,
        log_plan: FaultPlan,
        store: StoreKind,
        ipl_log_segment_bytes: Option<u64>,
    ) -> anyhow::Result<Rig> {
        let power = PowerSwitch::new();
        let checker = WalChecker::new();
        // The engine's own check is what must catch a damaged page: a
        // checksum mismatch, or the id of another page (misdirected). A
        // log-structured block's place does not say which page it holds:
        // its own checksum (pages and the store's blocks carry one at 0..4)
        // is the check.
        // An IPL space's chunk is a data slot (the page checksum, as a
        // log-structured block) or part of a log segment: every programmed
        // 512-byte sector there carries a crc (the store's check).
        let check: PageCheck = match store {
            StoreKind::Ipl => {
                let segment = ipl_log_segment_bytes.unwrap_or(LOG_SEGMENT_BYTES_DEFAULT);
                Arc::new(move |offset_bytes, image| {
                    if offset_bytes % ERASE_UNIT_BYTES >= ERASE_UNIT_BYTES - segment {
                        image
                            .chunks(LOG_SECTOR_BYTES)
                            .any(|s| matches!(sector::decode(s), Decoded::Damaged(_)))
                    } else {
                        image.iter().any(|&b| b != 0)
                            && u32::from_le_bytes(image[0..4].try_into().expect("4 bytes"))
                                != page::compute_checksum(image)
                    }
                })
            }
            StoreKind::LogStructured => Arc::new(|_, image| {
                image.iter().any(|&b| b != 0)
                    && u32::from_le_bytes(image[0..4].try_into().expect("4 bytes"))
                        != page::compute_checksum(image)
            }),
            _ => Arc::new(move |offset_bytes, image| {
                let id = PageId::new(0, (offset_bytes / page_bytes as u64) as u32);
                page::verify(image, id, "data", offset_bytes).is_err()
            }),
        };
        let data = FaultyDevice::new(
            stored(data_preset, "data")?,
            Role::Data { page_bytes },
            data_plan,
        )
        .with_power(power.clone());
        // In-Page Logging writes log sectors and whole erase units, not
        // pages at their offsets: the WAL checker cannot read them (its
        // write groups follow BUF-2 all the same); the page check can.
        let data = match store {
            StoreKind::Ipl => data.with_page_check(check),
            _ => data
                .with_wal_checker(checker.clone())
                .with_page_check(check),
        };
        let rollback = FaultyDevice::new(
            stored(presets::MEMORY, "rollback")?,
            Role::Other,
            FaultPlan {
                seed: log_plan.seed ^ 0x7b,
                ..FaultPlan::crashes(0)
            },
        )
        .with_power(power.clone());
        let log = FaultyDevice::new(stored(log_preset, "log")?, Role::Log, log_plan)
            .with_wal_checker(checker.clone())
            .with_power(power.clone());
        Ok(Rig {
            data: Arc::new(data),
            log: Arc::new(log),
            log_mirror: None,
            rollback: Arc::new(rollback),
            power,
            checker,
            page_bytes,
            ipl_restarts: Arc::default(),
            ipl_selection: Arc::default(),
        })
    }

    /// Keep the log in two copies (`[log] mirror`): the mirror is a device
    /// of the log's preset with the log's fault plan, reseeded, but for the
    /// one I/O error of an IoError seed, which stays the first copy's. Its
    /// writes follow the log's, so the WAL checker watches the log's copy
    /// alone.
    pub fn with_log_mirror(mut self, log_preset: &str) -> anyhow::Result<Rig> {
        let plan = self.log.plan();
        let mirror = FaultyDevice::new(
            stored(log_preset, "log mirror")?,
            Role::Log,
            FaultPlan {
                seed: plan.seed ^ 0x3141,
                flush_error_at: None,
                full_after_writes: None,
                ..plan
            },
        )
        .with_power(self.power.clone());
        self.log_mirror = Some(Arc::new(mirror));
        Ok(self)
    }

    /// The log as the engine sees it: one copy, or both as one device.
    fn log_device(&self) -> DeviceRef {
        match &self.log_mirror {
            Some(mirror) => Arc::new(flashlab_engine::wal::mirror::MirroredLog::new(
                self.log.clone(),
                mirror.clone(),
            )),
            None => self.log.clone(),
        }
    }

    /// The engine's view of the devices.
    pub fn devices(&self) -> Devices {
        Devices {
            data: vec![self.data.clone() as DeviceRef],
            log: self.log_device(),
            rollback: Some(self.rollback.clone() as DeviceRef),
            temp: None,
        }
    }

    /// Injection of runtime faults on or off, on both devices.
    pub fn set_active(&self, active: bool) {
        self.data.set_active(active);
        self.log.set_active(active);
        if let Some(mirror) = &self.log_mirror {
            mirror.set_active(active);
        }
    }

    /// Power failure: both devices decide the fate of their unflushed
    /// writes, and the power comes back.
    pub fn crash(&self) {
        self.data.crash();
        self.log.crash();
        if let Some(mirror) = &self.log_mirror {
            mirror.crash();
        }
        self.rollback.crash();
        self.power.restore();
    }

    /// Faults injected on both devices.
    pub fn counts(&self) -> FaultCounts {
        let mirror = self.log_mirror.as_ref().map(|m| m.counts());
        self.data
            .counts()
            .plus(&self.log.counts())
            .plus(&mirror.unwrap_or_default())
            .plus(&self.rollback.counts())
    }

    /// Damaging faults recorded since the last call, on both devices.
    pub fn take_records(&self) -> Vec<(Role, FaultRecord)> {
        let mut out: Vec<(Role, FaultRecord)> = self
            .data
            .take_records()
            .into_iter()
            .map(|r| (self.data.role(), r))
            .collect();
        out.extend(self.log.take_records().into_iter().map(|r| (Role::Log, r)));
        if let Some(mirror) = &self.log_mirror {
            out.extend(mirror.take_records().into_iter().map(|r| (Role::Log, r)));
        }
        out
    }
}
