//! # The fault model of the simulated world
//!
//! flashlab promises that every acknowledged commit survives a crash, that
//! nothing uncommitted is ever visible, and that corruption is detected,
//! never returned. This module is how the crash tests break that promise on
//! purpose: a [`FaultyDevice`] wraps a memory or simulated device (anything
//! whose data lives in a [`SparseStore`]) and, driven by a seeded
//! [`FaultPlan`], injects the faults real storage has:
//!
//! * **crashes**: every write not yet made durable by a flush is kept,
//!   dropped, or torn at a 512-byte boundary ([`FaultyDevice::crash`]);
//! * **latent read errors**: a read fails, and keeps failing for that sector
//!   until the sector is written again (as a disk remaps a sector on write)
//!   or trimmed (an erased sector holds nothing to fail on);
//! * **bit flips**: a read returns one bit flipped (the media is fine, the
//!   path is not), or a write lands with one bit flipped (the media is bad);
//! * **misdirected writes**: the data lands at another offset, so the place
//!   it was meant for keeps its old contents and another place is clobbered;
//! * **flush errors**: the flush fails and the writes it covered become
//!   *orphans* that no later flush makes durable (Linux's fsync behaviour);
//! * **a full device**: from some write on, every write fails with "no space";
//! * **latency spikes**: a request takes much longer than the model says.
//!
//! Everything random comes from one generator per device, seeded from the
//! plan's seed and the device's role and name, and the simulated world calls
//! devices in a deterministic order: the same seed gives the same faults.
//! Every fault is counted by kind ([`FaultCounts`]), and the ones that damage
//! data are listed ([`FaultRecord`]) so a test can check that each was
//! detected.
//!
//! ## Power cuts at chosen points
//!
//! A [`PowerSwitch`] shared by the devices of one database cuts the power at
//! the n-th I/O event of a kind (a log write, a log flush, a master-record
//! write, a data-page write, a data flush), optionally only when issued by a
//! task whose name starts with a prefix (`page-cleaner`, `checkpointer`,
//! `client`, `root`): that is how a test crashes *during* a group-commit
//! force, a checkpoint, a page cleaner's batch or recovery. After the cut,
//! every request on every device of the switch blocks forever, so the run
//! ends at its deadline with the cut request's data in the store but not
//! durable. A write is cut after its data reached the store (its fate is
//! then the crash's to decide); a flush is cut before it makes anything
//! durable.
//!
//! ## Write-ahead logging, checked at the device
//!
//! A [`WalChecker`] is shared by a database's log device and data devices.
//! Before a data write reaches the store, the checker reads the page LSN of
//! every page in it (bytes 12..20, little endian) and refuses the write, as
//! a test failure, unless the log device's store says the log is durable up
//! to that LSN: durable data reaches at least that far, and no write not yet
//! durable changed a log byte below it. The check is made when the page is
//! *written*, not when its device is flushed, because a crash may keep any
//! unflushed write: a page is potentially durable from the moment it is
//! written.
//!
//! Invariants (FAULT-n):
//! 1. With an all-zero plan and no power cut, a `FaultyDevice` behaves
//!    exactly as the device it wraps.
//! 2. The same plan, seed and sequence of requests inject the same faults.
//! 3. Every injected fault is counted once, by kind.
//! 4. After the power is cut, no request of any device on the switch
//!    completes.
//! 5. A data page whose LSN the log has not made durable never reaches the
//!    store while a checker is attached (WAL-before-data).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use flashlab_runtime::{NS_PER_MS, NS_PER_S, Rt};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::device::Device;
use crate::error::DeviceError;
use crate::model::ModelStats;
use crate::store::{CrashFate, CrashedWrite, StoredDevice};

/// Granularity of torn writes: a crash keeps a whole number of these.
pub const TEAR_UNIT_BYTES: u64 = 512;
/// Size of the area at the start of a log device that holds the master
/// record rather than log records (writes there are master writes).
pub const LOG_MASTER_AREA_BYTES: u64 = 4096;
/// Offset of the page LSN in every data page (docs/FORMAT.md).
pub const PAGE_LSN_OFFSET: usize = 12;
/// Rates are given per this many requests.
pub const PPM: u32 = 1_000_000;
/// How far a misdirected write may land from where it was meant to go, in
/// units of its own length.
pub const MISDIRECT_DISTANCE_MAX: u64 = 8;
/// How long a blocked request sleeps between checks after a power cut.
const POWER_OFF_SLEEP_NS: u64 = 3600 * NS_PER_S;
/// Default latency spike.
pub const SPIKE_NS_DEFAULT: u64 = 50 * NS_PER_MS;

/// What faults a device injects, and how often. All rates are per million
/// requests of the kind they apply to; zero disables the fault.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FaultPlan {
    pub seed: u64,
    /// At a crash, percent of unflushed writes kept whole.
    pub crash_keep_percent: u32,
    /// At a crash, percent of unflushed writes torn at a 512-byte boundary
    /// (the rest are dropped). A write of one unit cannot tear and is kept.
    pub crash_tear_percent: u32,
    /// Reads that hit a new latent sector error (sticky until rewritten or
    /// trimmed).
    pub read_error_ppm: u32,
    /// Reads that return one bit flipped (the stored data is fine).
    pub read_flip_ppm: u32,
    /// Writes that land with one bit flipped.
    pub write_flip_ppm: u32,
    /// Writes that land at another offset.
    pub misdirect_ppm: u32,
    /// Flushes that fail.
    pub flush_error_ppm: u32,
    /// This flush (counted from 1 since the device was wrapped) fails.
    pub flush_error_at: Option<u64>,
    /// The device is full from this write on (counted from 1), until a crash.
    pub full_after_writes: Option<u64>,
    /// Requests that take `spike_ns` longer.
    pub spike_ppm: u32,
    pub spike_ns: u64,
}

impl FaultPlan {
    /// No faults at all (FAULT-1), but a crash still loses unflushed writes.
    pub fn none(seed: u64) -> FaultPlan {
        FaultPlan {
            seed,
            crash_keep_percent: 0,
            crash_tear_percent: 0,
            read_error_ppm: 0,
            read_flip_ppm: 0,
            write_flip_ppm: 0,
            misdirect_ppm: 0,
            flush_error_ppm: 0,
            flush_error_at: None,
            full_after_writes: None,
            spike_ppm: 0,
            spike_ns: SPIKE_NS_DEFAULT,
        }
    }

    /// Crashes keep, drop and tear unflushed writes in equal shares.
    pub fn crashes(seed: u64) -> FaultPlan {
        FaultPlan::crash_fates(34, 33, seed)
    }

    /// No faults but crashes, which keep `keep_percent` and tear
    /// `tear_percent` of the unflushed writes (and drop the rest).
    pub fn crash_fates(keep_percent: u32, tear_percent: u32, seed: u64) -> FaultPlan {
        FaultPlan {
            crash_keep_percent: keep_percent,
            crash_tear_percent: tear_percent,
            ..FaultPlan::none(seed)
        }
    }
}

/// Faults injected, by kind (FAULT-3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FaultCounts {
    /// Unflushed writes a crash kept whole.
    pub crash_kept: u64,
    /// Unflushed writes a crash dropped.
    pub crash_dropped: u64,
    /// Unflushed writes a crash tore.
    pub crash_torn: u64,
    /// Reads failed by a latent sector error (new or sticky).
    pub read_errors: u64,
    pub read_flips: u64,
    pub write_flips: u64,
    pub misdirected_writes: u64,
    pub flush_errors: u64,
    /// Writes refused because the device was full.
    pub full_errors: u64,
    pub latency_spikes: u64,
    /// Flushes issued after a flush of the same device had failed, before a
    /// crash (the engine must never retry a failed fsync).
    pub flushes_after_failure: u64,
    /// Data writes the WAL checker refused (a test failure).
    pub wal_violations: u64,
    /// Damaged page images (torn, flipped, misdirected) shown to the page
    /// check, and how many it rejected; see [`PageCheck`].
    pub damaged_pages: u64,
    pub damaged_pages_caught: u64,
}

impl FaultCounts {
    /// Sum of two counts.
    pub fn plus(&self, other: &FaultCounts) -> FaultCounts {
        FaultCounts {
            crash_kept: self.crash_kept + other.crash_kept,
            crash_dropped: self.crash_dropped + other.crash_dropped,
            crash_torn: self.crash_torn + other.crash_torn,
            read_errors: self.read_errors + other.read_errors,
            read_flips: self.read_flips + other.read_flips,
            write_flips: self.write_flips + other.write_flips,
            misdirected_writes: self.misdirected_writes + other.misdirected_writes,
            flush_errors: self.flush_errors + other.flush_errors,
            full_errors: self.full_errors + other.full_errors,
            latency_spikes: self.latency_spikes + other.latency_spikes,
            flushes_after_failure: self.flushes_after_failure + other.flushes_after_failure,
            wal_violations: self.wal_violations + other.wal_violations,
            damaged_pages: self.damaged_pages + other.damaged_pages,
            damaged_pages_caught: self.damaged_pages_caught + other.damaged_pages_caught,
        }
    }

    /// (name, count) of every kind, for reports.
    pub fn by_kind(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("crash: write kept", self.crash_kept),
            ("crash: write dropped", self.crash_dropped),
            ("crash: write torn", self.crash_torn),
            ("latent read error", self.read_errors),
            ("bit flip on read", self.read_flips),
            ("bit flip on write", self.write_flips),
            ("misdirected write", self.misdirected_writes),
            ("flush error", self.flush_errors),
            ("device full", self.full_errors),
            ("latency spike", self.latency_spikes),
        ]
    }
}

/// A fault that damaged data, with where, so a test can check it was caught.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum FaultRecord {
    /// A crash kept only the first `kept_bytes` of a write; the pages at
    /// `damaged_pages` (offsets) are now neither the old nor the new image.
    Torn {
        offset_bytes: u64,
        len_bytes: u64,
        kept_bytes: u64,
        damaged_pages: Vec<u64>,
    },
    /// A write landed with bit `bit` (counted from the write's first byte) flipped.
    WriteFlip { offset_bytes: u64, bit: u64 },
    /// A read returned bit `bit` flipped.
    ReadFlip { offset_bytes: u64, bit: u64 },
    /// A write meant for `intended_bytes` landed at `landed_bytes`.
    Misdirected {
        intended_bytes: u64,
        landed_bytes: u64,
        len_bytes: u64,
    },
    /// The sector at `sector_bytes` became unreadable.
    LatentError { sector_bytes: u64 },
    /// A flush failed; `orphaned` writes will not become durable.
    FlushFailed { orphaned: u64 },
    /// Task `task` flushed the device again after a failed flush.
    FlushAfterFailure { task: String },
}

/// The page check a test plugs in: given a damaged page image and the
/// device offset it would be read from, true if the check rejects it (for
/// the engine: `page::verify` fails). Every damaged page image a data
/// device produces is shown to it and counted.
pub type PageCheck = Arc<dyn Fn(u64, &[u8]) -> bool + Send + Sync>;

/// What a device holds, which decides what its events are and what the WAL
/// checker looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The log: writes below [`LOG_MASTER_AREA_BYTES`] are master writes.
    Log,
    /// A data space of pages of this size.
    Data { page_bytes: usize },
    /// Anything else (rollback, temp).
    Other,
}

/// An I/O event a power cut can be placed at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum IoEvent {
    LogWrite,
    LogFlush,
    MasterWrite,
    DataWrite,
    DataFlush,
    /// Any read, of any device.
    Read,
    /// Any request at all.
    Any,
    /// No request: a timer ([`PowerSwitch::cut_now`]).
    Timer,
}

impl IoEvent {
    pub fn name(self) -> &'static str {
        match self {
            IoEvent::LogWrite => "log write",
            IoEvent::LogFlush => "log flush",
            IoEvent::MasterWrite => "master write",
            IoEvent::DataWrite => "data write",
            IoEvent::DataFlush => "data flush",
            IoEvent::Read => "read",
            IoEvent::Any => "any request",
            IoEvent::Timer => "timer",
        }
    }
}

/// Where to cut the power: at the `nth` (from 1) event of kind `event`
/// issued by a task whose name starts with `task_prefix` (any task if
/// `None`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CutTrigger {
    pub event: IoEvent,
    pub task_prefix: Option<String>,
    pub nth: u64,
}

/// Where the power was actually cut.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CutPoint {
    pub event: IoEvent,
    pub task: String,
    pub device: String,
    pub at_ns: u64,
}

#[derive(Default)]
struct PowerState {
    off: bool,
    trigger: Option<CutTrigger>,
    seen: u64,
    cut: Option<CutPoint>,
}

/// The power of the devices of one database. See the module documentation.
#[derive(Default)]
pub struct PowerSwitch {
    state: Mutex<PowerState>,
}

impl PowerSwitch {
    pub fn new() -> Arc<PowerSwitch> {
        Arc::new(PowerSwitch::default())
    }

    /// Cut the power at `trigger` (or never, with `None`).
    pub fn arm(&self, trigger: Option<CutTrigger>) {
        let mut st = self.state.lock().expect("power");
        st.trigger = trigger;
        st.seen = 0;
    }

    /// True once the power is cut.
    pub fn is_off(&self) -> bool {
        self.state.lock().expect("power").off
    }

    /// Where the power was cut, if it was.
    pub fn cut_point(&self) -> Option<CutPoint> {
        self.state.lock().expect("power").cut.clone()
    }

    /// Cut the power now, from a timer (if it is still on).
    pub fn cut_now(&self) {
        let mut st = self.state.lock().expect("power");
        if st.off {
            return;
        }
        st.off = true;
        st.cut = Some(CutPoint {
            event: IoEvent::Timer,
            task: task_name(),
            device: String::new(),
            at_ns: now_ns(),
        });
    }

    /// Power on again, disarmed (after the devices were crashed).
    pub fn restore(&self) {
        *self.state.lock().expect("power") = PowerState::default();
    }

    /// Count an event; true if the power is (now) off.
    fn observe(&self, event: IoEvent, device: &str) -> bool {
        let mut st = self.state.lock().expect("power");
        if st.off {
            return true;
        }
        let Some(trigger) = st.trigger.clone() else {
            return false;
        };
        let task = task_name();
        let kind_matches = trigger.event == event
            || trigger.event == IoEvent::Any
            || (trigger.event == IoEvent::Read && event == IoEvent::Read);
        let task_matches = trigger
            .task_prefix
            .as_deref()
            .is_none_or(|prefix| task.starts_with(prefix));
        if !(kind_matches && task_matches) {
            return false;
        }
        st.seen += 1;
        if st.seen < trigger.nth {
            return false;
        }
        st.off = true;
        st.cut = Some(CutPoint {
            event,
            task,
            device: device.to_string(),
            at_ns: Rt::try_current().map(|rt| rt.now_ns()).unwrap_or(0),
        });
        true
    }
}

/// The calling task's name, as the runtime knows it (simulated tasks are
/// coroutines that share one host thread, so the thread's name says
/// nothing about them).
pub fn task_name() -> String {
    Rt::try_current()
        .and_then(|rt| rt.task_name())
        .unwrap_or_default()
}

fn now_ns() -> u64 {
    Rt::try_current().map(|rt| rt.now_ns()).unwrap_or(0)
}

/// Block the calling task for good: the power is off (FAULT-4).
fn power_off() -> ! {
    let rt = Rt::current();
    loop {
        rt.sleep(POWER_OFF_SLEEP_NS);
    }
}

#[derive(Default)]
struct CheckerState {
    log: Option<Arc<dyn StoredDevice>>,
    pages_checked: u64,
    violations: Vec<String>,
}

/// Checks write-ahead logging at the devices (FAULT-5). See the module
/// documentation.
#[derive(Default)]
pub struct WalChecker {
    state: Mutex<CheckerState>,
}

impl WalChecker {
    pub fn new() -> Arc<WalChecker> {
        Arc::new(WalChecker::default())
    }

    /// Pages checked so far.
    pub fn pages_checked(&self) -> u64 {
        self.state.lock().expect("checker").pages_checked
    }

    /// Every refused write, described.
    pub fn violations(&self) -> Vec<String> {
        self.state.lock().expect("checker").violations.clone()
    }

    fn set_log(&self, log: Arc<dyn StoredDevice>) {
        self.state.lock().expect("checker").log = Some(log);
    }

    /// Check a data write of pages of `page_bytes` at `offset_bytes`.
    fn check_data_write(
        &self,
        device: &str,
        offset_bytes: u64,
        data: &[u8],
        page_bytes: usize,
    ) -> Result<(), String> {
        let mut st = self.state.lock().expect("checker");
        let Some(log) = st.log.clone() else {
            return Ok(());
        };
        let page_bytes = page_bytes.max(PAGE_LSN_OFFSET + 8);
        for (i, page) in data.chunks(page_bytes).enumerate() {
            if page.len() < PAGE_LSN_OFFSET + 8 {
                continue;
            }
            st.pages_checked += 1;
            let lsn = u64::from_le_bytes(
                page[PAGE_LSN_OFFSET..PAGE_LSN_OFFSET + 8]
                    .try_into()
                    .expect("8 bytes"),
            );
            if lsn == 0 {
                continue;
            }
            let (durable_end, changed) = {
                let store = log.store().lock().expect("log store");
                (
                    store.durable_end_bytes(),
                    store.changed_since_durable(LOG_MASTER_AREA_BYTES, lsn),
                )
            };
            if durable_end < lsn || changed {
                let at = offset_bytes + (i * page_bytes) as u64;
                let why = if durable_end < lsn {
                    format!("the log is durable only up to {durable_end}")
                } else {
                    "log bytes below it are not yet durable".to_string()
                };
                let text = format!(
                    "WAL-before-data violated: {device}: page at offset {at} with LSN {lsn} written by task '{}', but {why}",
                    task_name()
                );
                st.violations.push(text.clone());
                return Err(text);
            }
        }
        Ok(())
    }
}

struct FaultState {
    plan: FaultPlan,
    rng: ChaCha8Rng,
    active: bool,
    counts: FaultCounts,
    records: Vec<FaultRecord>,
    /// Sectors that fail every read until written.
    latent: BTreeSet<u64>,
    flush_failed: bool,
    /// Writes that landed with a bit flipped since the last crash (offset,
    /// bit): what they were meant to write is a version of their pages.
    flipped_writes: Vec<(u64, u64)>,
    /// When a flush failed or a log write was refused (virtual ns).
    durability_failed_at_ns: Option<u64>,
    writes: u64,
    flushes: u64,
}

impl FaultState {
    fn chance(&mut self, ppm: u32) -> bool {
        self.active && ppm > 0 && self.rng.random_range(0..PPM) < ppm
    }
}

/// A device that injects the faults of a [`FaultPlan`]. See the module
/// documentation.
pub struct FaultyDevice {
    inner: Arc<dyn StoredDevice>,
    role: Role,
    state: Mutex<FaultState>,
    wal: Option<Arc<WalChecker>>,
    power: Option<Arc<PowerSwitch>>,
    page_check: Option<PageCheck>,
}

fn mix(seed: u64, salt: &str) -> u64 {
    // FNV-1a over the salt, folded into the seed.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in salt.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    seed ^ h.rotate_left(17)
}

impl FaultyDevice {
    /// Wrap `inner`, which holds `role`'s data, injecting `plan`'s faults.
    pub fn new(inner: Arc<dyn StoredDevice>, role: Role, plan: FaultPlan) -> FaultyDevice {
        let salt = format!("{role:?}/{}", inner.name());
        FaultyDevice {
            inner,
            role,
            state: Mutex::new(FaultState {
                rng: ChaCha8Rng::seed_from_u64(mix(plan.seed, &salt)),
                plan,
                active: true,
                counts: FaultCounts::default(),
                records: Vec::new(),
                latent: BTreeSet::new(),
                flush_failed: false,
                flipped_writes: Vec::new(),
                durability_failed_at_ns: None,
                writes: 0,
                flushes: 0,
            }),
            wal: None,
            power: None,
            page_check: None,
        }
    }

    /// Show every damaged page image of this (data) device to `check`.
    pub fn with_page_check(mut self, check: PageCheck) -> FaultyDevice {
        self.page_check = Some(check);
        self
    }

    /// Show the pages of `image` (read or written at `offset_bytes`) that
    /// overlap `damaged` (a byte range within it) to the page check.
    fn check_pages(
        &self,
        st: &mut FaultState,
        offset_bytes: u64,
        image: &[u8],
        damaged: (u64, u64),
    ) {
        let (Some(check), Role::Data { page_bytes }) = (&self.page_check, self.role) else {
            return;
        };
        let page_bytes = page_bytes as u64;
        let start = offset_bytes + damaged.0;
        let end = offset_bytes + damaged.1;
        let mut page = start - start % page_bytes;
        while page < end {
            let from = page.max(offset_bytes) - offset_bytes;
            let to = (page + page_bytes).min(offset_bytes + image.len() as u64) - offset_bytes;
            if to - from == page_bytes {
                st.counts.damaged_pages += 1;
                if check(page, &image[from as usize..to as usize]) {
                    st.counts.damaged_pages_caught += 1;
                }
            }
            page += page_bytes;
        }
    }

    /// Share a WAL checker: the log device feeds it, data devices ask it.
    pub fn with_wal_checker(mut self, checker: Arc<WalChecker>) -> FaultyDevice {
        if self.role == Role::Log {
            checker.set_log(self.inner.clone());
        }
        self.wal = Some(checker);
        self
    }

    /// Put the device on a power switch.
    pub fn with_power(mut self, power: Arc<PowerSwitch>) -> FaultyDevice {
        self.power = Some(power);
        self
    }

    pub fn role(&self) -> Role {
        self.role
    }

    /// The wrapped device.
    pub fn inner(&self) -> &Arc<dyn StoredDevice> {
        &self.inner
    }

    /// Turn injection of runtime faults on or off (crash fates, counts and
    /// power cuts are unaffected).
    pub fn set_active(&self, active: bool) {
        self.state.lock().expect("faults").active = active;
    }

    /// Replace the plan (the generator keeps its state).
    pub fn set_plan(&self, plan: FaultPlan) {
        self.state.lock().expect("faults").plan = plan;
    }

    pub fn plan(&self) -> FaultPlan {
        self.state.lock().expect("faults").plan.clone()
    }

    /// Faults injected so far.
    pub fn counts(&self) -> FaultCounts {
        self.state.lock().expect("faults").counts
    }

    /// Damaging faults injected since the last call, oldest first.
    pub fn take_records(&self) -> Vec<FaultRecord> {
        std::mem::take(&mut self.state.lock().expect("faults").records)
    }

    /// Flushes issued to this device so far (what `flush_error_at` counts).
    pub fn flushes(&self) -> u64 {
        self.state.lock().expect("faults").flushes
    }

    /// Writes issued to this device so far (what `full_after_writes`
    /// counts).
    pub fn writes(&self) -> u64 {
        self.state.lock().expect("faults").writes
    }

    /// True once a flush of this device failed (until the next crash).
    pub fn flush_failed(&self) -> bool {
        self.state.lock().expect("faults").flush_failed
    }

    /// When this device first failed in a way that costs durability (a
    /// failed flush, a refused log write), in virtual ns since the
    /// simulation began; cleared by a crash. From then on the engine must
    /// acknowledge no commit that began later.
    pub fn durability_failed_at_ns(&self) -> Option<u64> {
        self.state.lock().expect("faults").durability_failed_at_ns
    }

    /// Read what the media holds now, without faults or latency (a test's
    /// look behind the device; the store's read fails only on a host disk
    /// error).
    pub fn peek(&self, offset_bytes: u64, buf: &mut [u8]) {
        let store = self.inner.store().lock().expect("store");
        store.read(offset_bytes, buf).expect("the media read back");
    }

    /// Power failure: every write not yet durable is kept, dropped or torn
    /// as the plan says; returns each with its fate. A full device and a
    /// failed flush are forgotten (the machine restarts); latent sector
    /// errors stay. Torn pages of a data device are shown to the page check.
    pub fn crash(&self) -> Vec<CrashedWrite> {
        let mut guard = self.state.lock().expect("faults");
        let st = &mut *guard;
        let (keep, tear) = (st.plan.crash_keep_percent, st.plan.crash_tear_percent);
        let rng = &mut st.rng;
        let fates = self
            .inner
            .store()
            .lock()
            .expect("store")
            .crash_detailed(|w| {
                let roll = rng.random_range(0..100u32);
                let units = w.len_bytes / TEAR_UNIT_BYTES;
                if roll < keep {
                    CrashFate::Keep
                } else if roll < keep + tear {
                    if units >= 2 {
                        CrashFate::Tear {
                            bytes: rng.random_range(1..units) * TEAR_UNIT_BYTES,
                        }
                    } else {
                        CrashFate::Keep
                    }
                } else {
                    CrashFate::Drop
                }
            });
        for crashed in &fates {
            match crashed.fate {
                CrashFate::Keep => st.counts.crash_kept += 1,
                CrashFate::Drop => st.counts.crash_dropped += 1,
                CrashFate::Tear { bytes } => {
                    st.counts.crash_torn += 1;
                    let damaged_pages = self.torn_pages(st, crashed, &fates);
                    st.records.push(FaultRecord::Torn {
                        offset_bytes: crashed.write.offset_bytes,
                        len_bytes: crashed.write.len_bytes,
                        kept_bytes: bytes,
                        damaged_pages,
                    });
                }
            }
        }
        st.flush_failed = false;
        st.flipped_writes.clear();
        st.durability_failed_at_ns = None;
        st.writes = 0;
        fates
    }

    /// Pages of a torn write that now hold no version the page ever had
    /// (the image before or after any of the crashed writes over it); a data
    /// device's pages, a log's 512-byte units.
    fn torn_pages(
        &self,
        st: &mut FaultState,
        torn: &CrashedWrite,
        all: &[CrashedWrite],
    ) -> Vec<u64> {
        let unit = match self.role {
            Role::Data { page_bytes } => page_bytes as u64,
            _ => TEAR_UNIT_BYTES,
        };
        let offset = torn.write.offset_bytes;
        let mut now = vec![0u8; torn.after.len()];
        self.peek(offset, &mut now);
        let mut damaged = Vec::new();
        for (i, chunk) in now.chunks(unit as usize).enumerate() {
            let at = offset + i as u64 * unit;
            let end = at + chunk.len() as u64;
            let was_a_version = all.iter().any(|w| {
                let w_end = w.write.offset_bytes + w.after.len() as u64;
                if w.write.offset_bytes > at || w_end < end {
                    return false;
                }
                let from = (at - w.write.offset_bytes) as usize;
                let range = from..from + chunk.len();
                if chunk == &w.before[range.clone()] || chunk == &w.after[range.clone()] {
                    return true;
                }
                // A write that landed with a bit flipped was meant to be
                // its after-image with the bit restored.
                st.flipped_writes.iter().any(|&(offset, bit)| {
                    let byte = (bit / 8) as usize;
                    if offset != w.write.offset_bytes || !range.contains(&byte) {
                        return false;
                    }
                    let mut meant = w.after[range.clone()].to_vec();
                    meant[byte - from] ^= 1 << (bit % 8);
                    chunk == meant.as_slice()
                })
            });
            if !was_a_version {
                damaged.push(at);
                self.check_pages(st, offset, &now, (at - offset, end - offset));
            }
        }
        damaged
    }

    fn event_for_write(&self, offset_bytes: u64) -> IoEvent {
        match self.role {
            Role::Log if offset_bytes < LOG_MASTER_AREA_BYTES => IoEvent::MasterWrite,
            Role::Log => IoEvent::LogWrite,
            Role::Data { .. } => IoEvent::DataWrite,
            Role::Other => IoEvent::Any,
        }
    }

    fn event_for_flush(&self) -> IoEvent {
        match self.role {
            Role::Log => IoEvent::LogFlush,
            Role::Data { .. } => IoEvent::DataFlush,
            Role::Other => IoEvent::Any,
        }
    }

    /// Count an event on the power switch; true if the power is now off.
    fn cut_at(&self, event: IoEvent) -> bool {
        self.power
            .as_ref()
            .is_some_and(|p| p.observe(event, self.inner.name()))
    }

    fn power_is_off(&self) -> bool {
        self.power.as_ref().is_some_and(|p| p.is_off())
    }

    fn spike(&self) {
        let spike_ns = {
            let mut st = self.state.lock().expect("faults");
            let ppm = st.plan.spike_ppm;
            if st.chance(ppm) {
                st.counts.latency_spikes += 1;
                st.plan.spike_ns
            } else {
                0
            }
        };
        if spike_ns > 0 {
            Rt::current().sleep(spike_ns);
        }
    }

    fn unit_bytes(&self) -> u64 {
        match self.role {
            Role::Data { page_bytes } => page_bytes as u64,
            _ => u64::from(self.inner.sector_bytes()),
        }
    }
}

impl crate::device::Wrapper for FaultyDevice {
    fn inner(&self) -> &dyn Device {
        &*self.inner
    }

    fn read(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        if self.power_is_off() || self.cut_at(IoEvent::Read) {
            power_off();
        }
        self.spike();
        let sector = u64::from(self.inner.sector_bytes().max(1));
        let end = offset_bytes + buf.len() as u64;
        {
            let mut st = self.state.lock().expect("faults");
            let sticky = st.latent.range(offset_bytes..end).next().copied();
            let failed_at = match sticky {
                Some(at) => Some(at),
                None => {
                    let ppm = st.plan.read_error_ppm;
                    if !buf.is_empty() && st.chance(ppm) {
                        let sectors = (buf.len() as u64).div_ceil(sector);
                        let at = offset_bytes + st.rng.random_range(0..sectors) * sector;
                        st.latent.insert(at);
                        st.records
                            .push(FaultRecord::LatentError { sector_bytes: at });
                        Some(at)
                    } else {
                        None
                    }
                }
            };
            if let Some(at) = failed_at {
                st.counts.read_errors += 1;
                return Err(DeviceError::ReadFailed {
                    device: self.inner.name().to_string(),
                    offset_bytes: at,
                });
            }
        }
        self.inner.read(offset_bytes, buf)?;
        let mut st = self.state.lock().expect("faults");
        let ppm = st.plan.read_flip_ppm;
        if !buf.is_empty() && st.chance(ppm) {
            let bit = st.rng.random_range(0..buf.len() as u64 * 8);
            buf[(bit / 8) as usize] ^= 1 << (bit % 8);
            st.counts.read_flips += 1;
            st.records.push(FaultRecord::ReadFlip { offset_bytes, bit });
            self.check_pages(&mut st, offset_bytes, buf, (bit / 8, bit / 8 + 1));
        }
        Ok(())
    }

    fn write(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        if self.power_is_off() {
            power_off();
        }
        let event = self.event_for_write(offset_bytes);
        if let (Some(checker), Role::Data { page_bytes }) = (&self.wal, self.role) {
            checker
                .check_data_write(self.inner.name(), offset_bytes, data, page_bytes)
                .map_err(|problem| {
                    self.state.lock().expect("faults").counts.wal_violations += 1;
                    DeviceError::Refused {
                        device: self.inner.name().to_string(),
                        problem,
                    }
                })?;
        }
        self.spike();
        enum Landing {
            Straight,
            Flipped(Vec<u8>),
            Elsewhere(u64),
        }
        let landing = {
            let mut st = self.state.lock().expect("faults");
            st.writes += 1;
            if st.active && st.plan.full_after_writes.is_some_and(|n| st.writes >= n) {
                st.counts.full_errors += 1;
                if self.role == Role::Log {
                    st.durability_failed_at_ns.get_or_insert(now_ns());
                }
                return Err(DeviceError::Full {
                    device: self.inner.name().to_string(),
                    problem: format!("no space left (injected after {} writes)", st.writes),
                });
            }
            // Writing a sector clears its latent error.
            let end = offset_bytes + data.len() as u64;
            let cleared: Vec<u64> = st.latent.range(offset_bytes..end).copied().collect();
            for at in cleared {
                st.latent.remove(&at);
            }
            let (misdirect, flip) = (st.plan.misdirect_ppm, st.plan.write_flip_ppm);
            let unit = self.unit_bytes().max(1);
            let len = data.len() as u64;
            let capacity = self.inner.capacity_bytes();
            if !data.is_empty() && st.chance(misdirect) && capacity >= 2 * len {
                let distance = st.rng.random_range(1..=MISDIRECT_DISTANCE_MAX) * len.max(unit);
                let landed = if st.rng.random_bool(0.5) && offset_bytes >= distance {
                    offset_bytes - distance
                } else if offset_bytes + distance + len <= capacity {
                    offset_bytes + distance
                } else {
                    offset_bytes.saturating_sub(distance)
                };
                let landed = landed - landed % unit;
                if landed != offset_bytes {
                    st.counts.misdirected_writes += 1;
                    self.check_pages(&mut st, landed, data, (0, len));
                    st.records.push(FaultRecord::Misdirected {
                        intended_bytes: offset_bytes,
                        landed_bytes: landed,
                        len_bytes: len,
                    });
                    Landing::Elsewhere(landed)
                } else {
                    Landing::Straight
                }
            } else if !data.is_empty() && st.chance(flip) {
                let bit = st.rng.random_range(0..len * 8);
                let mut bad = data.to_vec();
                bad[(bit / 8) as usize] ^= 1 << (bit % 8);
                st.counts.write_flips += 1;
                st.records
                    .push(FaultRecord::WriteFlip { offset_bytes, bit });
                st.flipped_writes.push((offset_bytes, bit));
                self.check_pages(&mut st, offset_bytes, &bad, (bit / 8, bit / 8 + 1));
                Landing::Flipped(bad)
            } else {
                Landing::Straight
            }
        };
        match landing {
            Landing::Straight => self.inner.write(offset_bytes, data)?,
            Landing::Flipped(bad) => self.inner.write(offset_bytes, &bad)?,
            Landing::Elsewhere(landed) => self.inner.write(landed, data)?,
        }
        if self.cut_at(event) {
            power_off();
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), DeviceError> {
        if self.power_is_off() || self.cut_at(self.event_for_flush()) {
            power_off();
        }
        self.spike();
        let fail = {
            let mut st = self.state.lock().expect("faults");
            if st.flush_failed {
                st.counts.flushes_after_failure += 1;
                st.records
                    .push(FaultRecord::FlushAfterFailure { task: task_name() });
            }
            st.flushes += 1;
            let ppm = st.plan.flush_error_ppm;
            let at = st.plan.flush_error_at == Some(st.flushes);
            st.chance(ppm) || (st.active && at)
        };
        if fail {
            let orphaned = {
                let mut store = self.inner.store().lock().expect("store");
                let mark = store.flush_mark();
                store.fail_flush_through(mark) as u64
            };
            let mut st = self.state.lock().expect("faults");
            st.flush_failed = true;
            st.durability_failed_at_ns.get_or_insert(now_ns());
            st.counts.flush_errors += 1;
            st.records.push(FaultRecord::FlushFailed { orphaned });
            return Err(DeviceError::FlushFailed {
                device: self.inner.name().to_string(),
                problem: format!("injected I/O error; {orphaned} writes it covered are lost"),
            });
        }
        self.inner.flush()
    }

    fn trim(&self, offset_bytes: u64, len_bytes: u64) -> Result<(), DeviceError> {
        if self.power_is_off() {
            power_off();
        }
        // Trimming (erasing) a sector clears its latent error too: there is
        // nothing left to read back.
        {
            let mut st = self.state.lock().expect("faults");
            let end = offset_bytes.saturating_add(len_bytes);
            let cleared: Vec<u64> = st.latent.range(offset_bytes..end).copied().collect();
            for at in cleared {
                st.latent.remove(&at);
            }
        }
        self.inner.trim(offset_bytes, len_bytes)
    }

    fn model_stats(&self) -> Option<ModelStats> {
        self.inner.model_stats()
    }
}

#[cfg(test)]
mod tests;
