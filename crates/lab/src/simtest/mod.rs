//! # The crash-recovery harness: `flashlab simtest`
//!
//! In the spirit of FoundationDB's simulation and TigerBeetle's VOPR: one
//! `u64` seed decides everything about a run (the workload's shape, the
//! database's configuration, the devices, the faults, where the power is
//! cut, how deep recovery is crashed again), and the simulated world is
//! deterministic, so the same seed replays the same run event for event,
//! failure included. A seed is cheap (small tables, cuts within a few
//! hundred virtual milliseconds), so CI runs hundreds.
//!
//! ## One seed
//!
//! 1. **Set up**: create the database on a [`rig::Rig`] (a data and a log
//!    device wrapped in [`FaultyDevice`]s on one power switch, sharing a
//!    WAL checker) and load the workload's tables; close cleanly.
//! 2. **Epochs**: open the database (which runs recovery), resume the
//!    workload with several clients, and cut the power at a seeded point
//!    ([`Cut`]): a virtual instant, or the n-th I/O event of a kind issued by
//!    a kind of task: a log write or flush by a committing client (inside a
//!    group-commit force), a data-page write by the page cleaner or by
//!    an evicting client, the checkpointer's data flush, log force or
//!    master-record write. Then every device crashes: each unflushed write
//!    is kept, dropped or torn at a 512-byte boundary. Later epochs cut the
//!    power during *recovery itself* (the n-th request of the task running
//!    the open), so a crash can land in the recovery of a crash of the
//!    recovery of a crash.
//! 3. **Check**: recover once more, without faults, and check every
//!    promise: every acknowledged commit is present, nothing unacknowledged
//!    is visible, the workload's invariants hold, `verify` (what
//!    `flashlab check` runs) finds no damage it cannot repair, the WAL
//!    checker refused no page, no device saw a flush after a failed one,
//!    no commit was acknowledged that began after a flush failed, and every
//!    damaged page image the fault model produced (torn, flipped,
//!    misdirected) was rejected by the engine's page check.
//!
//! ## Profiles
//!
//! * [`Profile::Crash`]: crashes and latency spikes only. Nothing may be lost.
//! * [`Profile::IoError`]: also one failed flush of the log or of the data
//!   device, or a device that fills up. The engine must stop acknowledging
//!   commits after a failed flush, never flush that device again before a
//!   restart, and lose nothing it acknowledged.
//! * [`Profile::Media`]: also latent read errors and bit flips on reads and
//!   writes of data pages. Pages changed since the last checkpoint are
//!   rebuilt from their full-page images (BUF-9); a page damaged at rest
//!   has no image in the recycled log, so the outcome is either every
//!   acknowledged commit present or a refusal that names the damage.
//! * [`Profile::LogMedia`]: latent read errors and bit flips on reads and
//!   writes of the log device, anywhere in it (torn log sectors come from
//!   the crash fates of every profile). The outcome is either every
//!   acknowledged commit present or a refusal that names the damage;
//!   *silently lost* (a recovery that opens without an acknowledged
//!   commit) must never happen.
//! * [`Profile::Misdirect`]: also misdirected data writes. The page a
//!   misdirected write lands on is caught by its page id; but the page it
//!   was meant for keeps an older, valid image, a *lost write* that neither
//!   checksum nor page id can see (LIMIT: lost writes). This profile checks
//!   detection and structure, not the ledger.
//!
//! ## Page stores
//!
//! `--store log-structured` runs every seed on a log-structured data
//! space, `--store mixed` every [`LOG_STRUCTURED_SEEDS_EVERY`]th seed;
//! the default, `in-place`, changes nothing a seed draws. A
//! log-structured seed keeps its drawn choices and adds: segments of
//! [`LOG_STRUCTURED_SEGMENT_PAGES`] pages on a data space of
//! [`LOG_STRUCTURED_SEGMENTS`] segments, so the workloads wrap it, clean
//! segments (greedy on even seeds, cost-benefit on odd ones) and write map
//! checkpoints all the time, and the power cuts (at data writes and
//! flushes, by any task) land during cleaning and map checkpoints. Its page
//! check is each block's own checksum (a block's place says nothing of its
//! page), so its Misdirect profile runs as Media (LIMIT).
//!
//! `--store ipl` runs every seed In-Page Logging on raw NAND (see
//! [`Scenario::from_seed_store`]): its Media seeds flip bits on NAND reads
//! and programs and leave latent read errors, in slots, log sectors and
//! commit sectors alike; a damaged log sector or slot must be repaired from
//! the WAL or refused naming the damage, never read as a wrong page.
//!
//! Set `FLASHLAB_SIMTEST_TRACE=1` to print every epoch's outcome and every
//! damaging fault as it is injected (with `flashlab simtest --seed S`).
//!
//! Invariants of the harness (SIMTEST-n):
//! 1. Everything random derives from the seed; a seed's report is the same
//!    on every run and machine ([`run_seed`] twice gives equal reports).
//! 2. A failing seed says what failed in one line, and re-running that seed
//!    alone reproduces it.

pub mod at_rest;
pub mod rig;
pub mod workloads;

use anyhow::anyhow;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use flashlab_devices::fault::{CutTrigger, FaultCounts, FaultPlan, FaultRecord, IoEvent, PPM};
use flashlab_engine::config::CpuCosts;
use flashlab_engine::db::verify::verify;
use flashlab_engine::mvcc::Isolation;
use flashlab_engine::store::{Cleaning, StoreKind};
use flashlab_engine::{Database, DbConfig, Error};
use flashlab_runtime::{NS_PER_MS, Rt, Sim, SimConfig, SimOutcome};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use rig::Rig;
use workloads::{CrashWorkload, Step};

/// Workloads `simtest` runs (`--workload`); `mixed` picks one per seed.
pub const WORKLOADS: [&str; 3] = ["bank", "tpcb", "update-commit"];
/// Most clients of a seed.
pub const CLIENTS_MAX: u32 = 8;
/// Latest power cut after recovery ended (virtual ns).
pub const CUT_NS_MAX: u64 = 300 * NS_PER_MS;
/// Every epoch ends here at the latest (virtual ns since it began): a
/// recovery that has not ended by then is cut.
pub const EPOCH_DEADLINE_NS: u64 = 5_000 * NS_PER_MS;
/// Deepest chain of crashes during recovery.
pub const RECOVERY_CRASH_DEPTH_MAX: u32 = 2;
/// How long a client waits after an error it may continue from.
const CLIENT_BACKOFF_NS: u64 = NS_PER_MS;

/// Which faults a seed injects; see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Profile {
    Crash,
    IoError,
    Media,
    LogMedia,
    Misdirect,
}

impl Profile {
    /// Profiles whose faults may damage what no copy can restore: for
    /// them a refusal to open that names the damage is a correct outcome.
    pub fn may_refuse(self) -> bool {
        matches!(self, Profile::Media | Profile::LogMedia)
    }
}

/// True if an error names damage the engine detected (a corrupt page, a
/// damaged log, an unreadable sector).
pub fn names_damage(e: &str) -> bool {
    [
        "database damaged",
        "corruption in space",
        "log damaged",
        "read error",
        "cannot be repaired",
        "summary damaged",
        "log-structured store damaged",
    ]
    .iter()
    .any(|w| e.contains(w))
}

/// Where an epoch's power cut falls: at an I/O event, or a while after
/// recovery ended, whichever comes first.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cut {
    /// The n-th event of a kind.
    pub trigger: Option<CutTrigger>,
    /// Cut this long after the open (recovery) returned.
    pub after_open_ns: u64,
    /// Aimed at recovery (events of the task running the open).
    pub during_recovery: bool,
}

impl Cut {
    fn describe(&self) -> String {
        let time = format!("{} ms after recovery", self.after_open_ns / NS_PER_MS);
        match &self.trigger {
            None => time,
            Some(t) => format!(
                "at {} #{} by {} or {time}",
                t.event.name(),
                t.nth,
                t.task_prefix.as_deref().unwrap_or("any task")
            ),
        }
    }
}

/// Everything a seed decides.
#[derive(Clone, Debug, Serialize)]
pub struct Scenario {
    pub seed: u64,
    pub workload: String,
    pub profile: Profile,
    pub data_device: String,
    pub log_device: String,
    pub page_bytes: usize,
    pub pool_pages: u64,
    pub clients: u32,
    pub checkpoint_interval_ns: u64,
    pub cleaner_interval_ns: u64,
    pub cleaner_batch_pages: usize,
    /// The page cleaner's clean target: 0, 0.05 or 0.125 of the frames,
    /// chosen from the seed's bits alone (no draw of its own), so that the
    /// other settings' draws do not depend on it.
    pub clean_target: f64,
    pub commit_delay_ns: u64,
    /// Commits release their row locks before the force (DB-7); on for a
    /// third of the seeds, chosen from the seed alone so that the other
    /// settings' draws do not depend on it.
    pub early_lock_release: bool,
    pub isolation: Isolation,
    pub tpcb_accounts: u32,
    pub cuts: Vec<Cut>,
    pub data_plan: FaultPlan,
    pub log_plan: FaultPlan,
    /// Preempt clients at runtime lock points too (SIM-8), not only when
    /// they block: every [`PREEMPT_SEEDS_EVERY`]th seed. Decided from the
    /// seed number, not drawn, so the other choices of every seed do not
    /// depend on it.
    pub preempt: bool,
    /// The data space's page store (see "Page stores" above): in place,
    /// log-structured, or In-Page Logging on raw NAND.
    pub store: StoreKind,
    /// IPL: the log segment of each erase unit.
    pub ipl_log_segment_bytes: Option<u64>,
}

/// The raw NAND device of IPL seeds.
pub const IPL_DATA_DEVICE: &str = flashlab_devices::nand_device::K9WAG08U1A;
/// The part of it an IPL seed's data space uses (128 erase units).
pub const IPL_DATA_BYTES: u64 = 16 << 20;
/// Media faults of an IPL seed's NAND data device, per I/O. IPL reads a
/// unit's log segment at every page read and programs a write group per
/// page write, so its I/Os are many and small: the rates are below the
/// in-place Media profile's, for about as many faults per seed.
pub const IPL_READ_ERROR_PPM: u32 = PPM / 400;
pub const IPL_READ_FLIP_PPM: u32 = PPM / 200;
pub const IPL_WRITE_FLIP_PPM: u32 = PPM / 100;
/// Salt of the generator of an IPL seed's own choices.
const IPL_SEED_SALT: u64 = 0x1b1_7007;

/// One seed in this many runs its epochs with preemption at lock points.
pub const PREEMPT_SEEDS_EVERY: u64 = 4;
/// The page cleaner's clean targets a seed picks from (`seed / 3`, apart
/// from `seed % 3`, which picks early lock release): off, a little, and
/// the default.
const CLEAN_TARGETS: [f64; 3] = [0.0, 0.05, flashlab_engine::config::CLEAN_TARGET_DEFAULT];

/// With `--store mixed`, one seed in this many runs log-structured.
pub const LOG_STRUCTURED_SEEDS_EVERY: u64 = 3;
/// Pages per segment of a log-structured seed.
pub const LOG_STRUCTURED_SEGMENT_PAGES: u64 = 8;
/// Segments of a log-structured seed's data space.
pub const LOG_STRUCTURED_SEGMENTS: u64 = 20;

/// Which page store the seeds' data spaces use (`--store`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StoreChoice {
    /// Every seed in place.
    #[default]
    InPlace,
    /// Every seed log-structured.
    LogStructured,
    /// Every [`LOG_STRUCTURED_SEEDS_EVERY`]th seed log-structured.
    Mixed,
    /// Every seed In-Page Logging on raw NAND.
    Ipl,
}

impl StoreChoice {
    pub fn parse(name: &str) -> Option<StoreChoice> {
        match name {
            "in-place" => Some(StoreChoice::InPlace),
            "log-structured" => Some(StoreChoice::LogStructured),
            "mixed" => Some(StoreChoice::Mixed),
            "ipl" => Some(StoreChoice::Ipl),
            _ => None,
        }
    }

    /// The store of `seed` (decided from the seed number, not drawn).
    pub fn store_of(self, seed: u64) -> StoreKind {
        match self {
            StoreChoice::InPlace => StoreKind::InPlace,
            StoreChoice::LogStructured => StoreKind::LogStructured,
            StoreChoice::Mixed if seed % LOG_STRUCTURED_SEEDS_EVERY == 1 => {
                StoreKind::LogStructured
            }
            StoreChoice::Mixed => StoreKind::InPlace,
            StoreChoice::Ipl => StoreKind::Ipl,
        }
    }
}

fn pick<'a, T>(rng: &mut ChaCha8Rng, items: &'a [T]) -> &'a T {
    &items[rng.random_range(0..items.len())]
}

impl Scenario {
    /// The scenario of `seed`; `workload` is one of [`WORKLOADS`] or
    /// `mixed` (the seed picks).
    pub fn from_seed(seed: u64, workload: &str) -> anyhow::Result<Scenario> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let workload = match workload {
            "mixed" => pick(&mut rng, &WORKLOADS).to_string(),
            w if WORKLOADS.contains(&w) => w.to_string(),
            w => {
                return Err(anyhow!(
                    "unknown workload '{w}' (known: {}, mixed)",
                    WORKLOADS.join(", ")
                ));
            }
        };
        let profile = match rng.random_range(0..100) {
            0..55 => Profile::Crash,
            55..65 => Profile::LogMedia,
            65..80 => Profile::IoError,
            80..95 => Profile::Media,
            _ => Profile::Misdirect,
        };
        let mut data_plan = FaultPlan::crashes(rng.random());
        let mut log_plan = FaultPlan::crashes(rng.random());
        let spikes = rng.random_bool(0.5);
        for plan in [&mut data_plan, &mut log_plan] {
            plan.crash_keep_percent = rng.random_range(0..=60);
            plan.crash_tear_percent = rng.random_range(0..=(100 - plan.crash_keep_percent));
            if spikes {
                plan.spike_ppm = PPM / 50;
                plan.spike_ns = rng.random_range(1..=20) * NS_PER_MS;
            }
        }
        match profile {
            Profile::Crash => {}
            Profile::IoError => match rng.random_range(0..4) {
                0 => log_plan.flush_error_at = Some(rng.random_range(2..60)),
                1 => data_plan.flush_error_at = Some(rng.random_range(1..6)),
                2 => log_plan.full_after_writes = Some(rng.random_range(2..60)),
                _ => data_plan.full_after_writes = Some(rng.random_range(1..40)),
            },
            Profile::LogMedia => {
                log_plan.read_flip_ppm = PPM / 100;
                log_plan.write_flip_ppm = PPM / 100;
                log_plan.read_error_ppm = PPM / 200;
            }
            Profile::Media | Profile::Misdirect => {
                data_plan.read_flip_ppm = PPM / 40;
                data_plan.write_flip_ppm = PPM / 40;
                data_plan.read_error_ppm = PPM / 80;
                if profile == Profile::Misdirect {
                    data_plan.misdirect_ppm = PPM / 30;
                }
            }
        }
        let mut cuts = vec![workload_cut(&mut rng)];
        let depth = rng.random_range(0..=RECOVERY_CRASH_DEPTH_MAX);
        for _ in 0..depth {
            cuts.push(Cut {
                trigger: Some(CutTrigger {
                    event: IoEvent::Any,
                    task_prefix: Some("root".into()),
                    nth: rng.random_range(1..=80),
                }),
                after_open_ns: rng.random_range(20..=CUT_NS_MAX / NS_PER_MS) * NS_PER_MS,
                during_recovery: true,
            });
        }
        if rng.random_bool(0.5) {
            cuts.push(workload_cut(&mut rng));
        }
        Ok(Scenario {
            seed,
            workload,
            profile,
            data_device: pick(&mut rng, &["memory", "memory", "ssd-2010"]).to_string(),
            log_device: pick(&mut rng, &["ssd-2008", "ssd-2008", "hdd-2008", "memory"]).to_string(),
            page_bytes: *pick(&mut rng, &[2048, 2048, 4096]),
            pool_pages: rng.random_range(24..=64),
            clients: rng.random_range(2..=CLIENTS_MAX),
            checkpoint_interval_ns: rng.random_range(5..=60) * NS_PER_MS,
            cleaner_interval_ns: rng.random_range(1..=10) * NS_PER_MS,
            cleaner_batch_pages: rng.random_range(1..=8),
            clean_target: CLEAN_TARGETS[(seed / 3 % CLEAN_TARGETS.len() as u64) as usize],
            commit_delay_ns: *pick(&mut rng, &[0, 0, 0, 200_000]),
            early_lock_release: seed % 3 == 1,
            isolation: *pick(&mut rng, &[Isolation::Snapshot, Isolation::ReadCommitted]),
            tpcb_accounts: rng.random_range(50..=300),
            cuts,
            data_plan,
            log_plan,
            preempt: seed % PREEMPT_SEEDS_EVERY == PREEMPT_SEEDS_EVERY - 1,
            store: StoreKind::InPlace,
            ipl_log_segment_bytes: None,
        })
    }

    /// The scenario of `seed` with its data space in `store`. For In-Page
    /// Logging, after every draw of the in-place scenario (so the other
    /// choices are the same seed's): the data device is raw NAND
    /// ([`IPL_DATA_DEVICE`], its first [`IPL_DATA_BYTES`]), the profile is
    /// the seed's Media (Misdirect runs as Media: misdirected programs are
    /// not modelled on raw NAND) at the IPL rates ([`IPL_READ_ERROR_PPM`]
    /// ...), LogMedia, IoError (a failed flush of the log or of the NAND,
    /// or either device filling up), or crashes only; the WAL checker is off for the data device (IPL sectors carry
    /// no page LSN at a page's offset), the page check is on (a slot's
    /// checksum, a log sector's crc); the log segment is 4 or 8 KB (so merges come often), and the first
    /// cut is moved, for most seeds, to a data flush (a merge flushes the
    /// new unit's pages and then its commit sector before it erases the
    /// old unit; checkpoints flush too), a data write (log sectors,
    /// merge programs, direct programs, erases) or a client's data write
    /// (a commit's log-sector force, or a client's eviction).
    pub fn from_seed_store(
        seed: u64,
        workload: &str,
        store: StoreKind,
    ) -> anyhow::Result<Scenario> {
        let mut sc = Scenario::from_seed(seed, workload)?;
        if store != StoreKind::Ipl {
            return Ok(sc.with_store(store));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ IPL_SEED_SALT);
        sc.store = store;
        sc.data_device = IPL_DATA_DEVICE.to_string();
        // Media faults on the NAND data device (bit flips on reads and
        // programs, latent read errors) and on the log device are kept, and
        // so are I/O errors (a failed flush, a full device); misdirected
        // programs are not modelled on raw NAND (Media instead).
        sc.profile = match sc.profile {
            Profile::Media | Profile::Misdirect => Profile::Media,
            Profile::LogMedia => Profile::LogMedia,
            Profile::IoError => Profile::IoError,
            Profile::Crash => Profile::Crash,
        };
        for plan in [&mut sc.data_plan, &mut sc.log_plan] {
            *plan = FaultPlan {
                flush_error_at: plan.flush_error_at,
                full_after_writes: plan.full_after_writes,
                crash_keep_percent: plan.crash_keep_percent,
                crash_tear_percent: plan.crash_tear_percent,
                spike_ppm: plan.spike_ppm,
                spike_ns: plan.spike_ns,
                read_error_ppm: plan.read_error_ppm,
                read_flip_ppm: plan.read_flip_ppm,
                write_flip_ppm: plan.write_flip_ppm,
                ..FaultPlan::crashes(plan.seed)
            };
        }
        if sc.profile == Profile::Media {
            sc.data_plan.read_error_ppm = IPL_READ_ERROR_PPM;
            sc.data_plan.read_flip_ppm = IPL_READ_FLIP_PPM;
            sc.data_plan.write_flip_ppm = IPL_WRITE_FLIP_PPM;
        }
        sc.ipl_log_segment_bytes = Some(*pick(&mut rng, &[4u64 << 10, 4 << 10, 8 << 10]));
        let after_open_ns = sc.cuts[0].after_open_ns;
        let trigger = match rng.random_range(0..5) {
            0 | 1 => Some(CutTrigger {
                event: IoEvent::DataFlush,
                task_prefix: None,
                nth: rng.random_range(1..=8),
            }),
            2 => Some(CutTrigger {
                event: IoEvent::DataWrite,
                task_prefix: None,
                nth: rng.random_range(1..=120),
            }),
            // A client's data write: a commit's log-sector force (or the
            // client's own eviction of a victim).
            3 => Some(CutTrigger {
                event: IoEvent::DataWrite,
                task_prefix: Some("client".into()),
                nth: rng.random_range(1..=60),
            }),
            _ => sc.cuts[0].trigger.clone(),
        };
        sc.cuts[0] = Cut {
            trigger,
            after_open_ns,
            during_recovery: false,
        };
        Ok(sc)
    }

    /// This scenario on a data space of `store` (see "Page stores").
    pub fn with_store(mut self, store: StoreKind) -> Scenario {
        self.store = store;
        if store == StoreKind::LogStructured && self.profile == Profile::Misdirect {
            self.profile = Profile::Media;
            self.data_plan.misdirect_ppm = 0;
        }
        self
    }

    fn config(&self) -> DbConfig {
        let mut config = DbConfig::simple(
            &self.data_device,
            &self.log_device,
            self.page_bytes,
            self.pool_pages * self.page_bytes as u64,
        );
        config.checkpoint_interval_ns = self.checkpoint_interval_ns;
        config.buffer.cleaner_interval_ns = self.cleaner_interval_ns;
        config.buffer.cleaner_batch_pages = self.cleaner_batch_pages;
        config.buffer.clean_target = self.clean_target;
        config.wal.commit_delay_ns = self.commit_delay_ns;
        config.wal.early_lock_release = self.early_lock_release;
        config.mvcc.isolation = self.isolation;
        // Rollback pages of the data pages' size share their pool; small
        // extents so that segments move on and extents are reused.
        config.mvcc.page_bytes = self.page_bytes;
        config.mvcc.extent_bytes = 16 * self.page_bytes as u64;
        if self.store == StoreKind::Ipl {
            config.data[0].store = self.store;
            config.data[0].capacity_bytes = Some(IPL_DATA_BYTES);
            config.data[0].ipl_log_segment_bytes = self.ipl_log_segment_bytes;
        }
        if self.store == StoreKind::LogStructured {
            let segment_bytes = LOG_STRUCTURED_SEGMENT_PAGES * self.page_bytes as u64;
            let space = &mut config.data[0];
            space.store = StoreKind::LogStructured;
            space.segment_bytes = Some(segment_bytes);
            space.cleaning = Some(if self.seed.is_multiple_of(2) {
                Cleaning::Greedy
            } else {
                Cleaning::CostBenefit
            });
            // The segments, and room for the superblock and map slots.
            space.capacity_bytes = Some((LOG_STRUCTURED_SEGMENTS + 2) * segment_bytes);
        }
        config
    }

    /// One line: what this seed runs.
    pub fn describe(&self) -> String {
        let cuts: Vec<String> = self.cuts.iter().map(Cut::describe).collect();
        format!(
            "{} {:?}, {} clients{}, {:?}, data {}{} ({} B pages, {} frames{}), log {}, cuts: {}",
            self.workload,
            self.profile,
            self.clients,
            if self.preempt {
                " (preempted at locks)"
            } else {
                ""
            },
            self.isolation,
            self.data_device,
            match self.ipl_log_segment_bytes {
                Some(b) => format!(" store ipl, {} KB log segments", b >> 10),
                None => String::new(),
            },
            self.page_bytes,
            self.pool_pages,
            if self.store == StoreKind::LogStructured {
                ", log-structured"
            } else {
                ""
            },
            self.log_device,
            cuts.join("; ")
        )
    }
}

/// A power cut for a workload epoch.
fn workload_cut(rng: &mut ChaCha8Rng) -> Cut {
    let after_open_ns = rng.random_range(20..=CUT_NS_MAX / NS_PER_MS) * NS_PER_MS;
    let trigger = |event, task: &str, nth| {
        Some(CutTrigger {
            event,
            task_prefix: Some(task.to_string()),
            nth,
        })
    };
    let trigger = match rng.random_range(0..9) {
        0 => None,
        1 => trigger(IoEvent::LogWrite, "client", rng.random_range(1..=60)),
        2 => trigger(IoEvent::LogFlush, "client", rng.random_range(1..=60)),
        3 => trigger(
            IoEvent::DataWrite,
            flashlab_engine::buffer::CLEANER_TASK_NAME,
            rng.random_range(1..=20),
        ),
        4 => trigger(IoEvent::DataWrite, "client", rng.random_range(1..=20)),
        5 => trigger(IoEvent::DataFlush, "checkpointer", rng.random_range(1..=4)),
        6 => trigger(IoEvent::LogFlush, "checkpointer", rng.random_range(1..=4)),
        7 => trigger(
            IoEvent::MasterWrite,
            "checkpointer",
            rng.random_range(1..=4),
        ),
        _ => trigger(IoEvent::Read, "client", rng.random_range(1..=40)),
    };
    Cut {
        // An event cut gets the longest time to come.
        after_open_ns: if trigger.is_some() {
            CUT_NS_MAX
        } else {
            after_open_ns
        },
        trigger,
        during_recovery: false,
    }
}

/// What became of the acknowledged commits: one seed's, or a run's sum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CommitOutcome {
    pub acked_commits: u64,
    pub in_doubt_commits: u64,
    /// Seeds whose acknowledged commits were not all present after
    /// recovery (must be zero; misdirect seeds are counted apart).
    pub lost_commits: u64,
    /// Misdirect seeds whose final check failed: the visible effect of a
    /// lost write (LIMIT: lost writes).
    pub lost_write_effects: u64,
    /// Pages the engine rebuilt from the log in the final recovery and check.
    pub pages_repaired: u64,
}

impl CommitOutcome {
    /// Count `o` into this sum.
    pub fn add(&mut self, o: &CommitOutcome) {
        let mut o = *o;
        for (sum, n) in self.counts_mut().into_iter().zip(o.counts_mut()) {
            *sum += *n;
        }
    }

    /// The five counts, in field order.
    fn counts_mut(&mut self) -> [&mut u64; 5] {
        let c = self;
        [
            &mut c.acked_commits,
            &mut c.in_doubt_commits,
            &mut c.lost_commits,
            &mut c.lost_write_effects,
            &mut c.pages_repaired,
        ]
    }
}

/// What one seed did and found.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SeedReport {
    pub seed: u64,
    pub scenario: String,
    pub workload: String,
    pub profile: String,
    /// Where each epoch's power cut fell.
    pub crash_points: Vec<String>,
    pub crashes: u64,
    /// Cuts that fell inside recovery.
    pub recovery_crashes: u64,
    /// Longest chain of crashes inside recoveries of crashes.
    pub recovery_crash_depth: u64,
    pub faults: FaultCounts,
    #[serde(flatten)]
    pub outcome: CommitOutcome,
    /// Damaging faults injected into the log device (flips, read errors).
    pub log_damage: u64,
    /// The database refused to open (or to read) naming the damage: a
    /// correct outcome for the media profiles.
    pub refused: Option<String>,
    /// Client errors caused by injected faults (expected ones).
    pub client_errors: u64,
    /// Recoveries of an In-Page Logging space (REC-4), the redo records of
    /// IPL pages they applied (must be 0) and skipped.
    pub ipl_recoveries: u64,
    pub ipl_pages_redone: u64,
    pub ipl_pages_skipped: u64,
    /// IPL-SEL: selective merges, records discarded, carried, de-applied.
    pub ipl_selection: [u64; 4],
    /// The damage at rest injected before the final check, if any
    /// ([`at_rest`]).
    pub at_rest: Option<String>,
    /// Acknowledged commits lost after damage at rest that is the stated
    /// limit (a lost tail of a log kept in one copy): counted, not failed.
    pub at_rest_limit_lost: u64,
    pub failure: Option<String>,
}

impl SeedReport {
    pub fn passed(&self) -> bool {
        self.failure.is_none()
    }
}

/// State shared between an epoch's tasks and the harness.
#[derive(Default)]
struct EpochState {
    opened: bool,
    open_error: Option<String>,
    /// The workload could not continue (a misdirect seed's lost write).
    resume_failed: bool,
    client_errors: u64,
    unexpected: Vec<String>,
}

/// Run one seed; never panics (a panic inside is a failure of the seed).
pub fn run_seed(seed: u64, workload: &str) -> SeedReport {
    run_seed_with(seed, workload, StoreChoice::InPlace)
}

/// [`run_seed`] with the data space's page store chosen by `store`.
pub fn run_seed_with(seed: u64, workload: &str, store: StoreChoice) -> SeedReport {
    run_seed_damaged(seed, workload, store, at_rest::AtRest::Off)
}

/// [`run_seed_with`], and with `at_rest`, damage at rest before the final
/// check ([`at_rest`]).
pub fn run_seed_damaged(
    seed: u64,
    workload: &str,
    store: StoreChoice,
    at_rest: at_rest::AtRest,
) -> SeedReport {
    let scenario = match Scenario::from_seed_store(seed, workload, store.store_of(seed)) {
        Ok(s) => s,
        Err(e) => {
            return SeedReport {
                seed,
                failure: Some(e.to_string()),
                ..SeedReport::default()
            };
        }
    };
    let mut report = SeedReport {
        seed,
        scenario: scenario.describe(),
        workload: scenario.workload.clone(),
        profile: format!("{:?}", scenario.profile),
        ..SeedReport::default()
    };
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
        run_scenario(&scenario, &mut report, at_rest)
    }));
    let failure = match result {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(panic) => Some(format!("panic: {}", panic_text(&panic))),
    };
    report.failure = failure;
    report
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = panic.downcast_ref::<&str>() {
        s.to_string()
    } else {
        "(non-text panic)".into()
    }
}

fn run_scenario(
    sc: &Scenario,
    report: &mut SeedReport,
    at_rest: at_rest::AtRest,
) -> anyhow::Result<()> {
    let rig = Rig::new(
        &sc.data_device,
        &sc.log_device,
        sc.page_bytes,
        sc.data_plan.clone(),
        sc.log_plan.clone(),
        sc.store,
        sc.ipl_log_segment_bytes,
    )?;
    let rig = Arc::new(match at_rest {
        at_rest::AtRest::MirroredLog => rig.with_log_mirror(&sc.log_device)?,
        _ => rig,
    });
    let damaged = at_rest != at_rest::AtRest::Off;
    let workload: Arc<dyn CrashWorkload> = Arc::from(
        workloads::build(&sc.workload, sc.tpcb_accounts)
            .ok_or_else(|| anyhow!("unknown workload {}", sc.workload))?,
    );
    let config = sc.config();
    let mut rng = ChaCha8Rng::seed_from_u64(sc.seed ^ 0x5eed);

    setup(&rig, &config, &workload)?;
    let stale = damaged.then(|| at_rest::snapshot(&rig)).flatten();
    let mut depth = 0u64;
    for cut in &sc.cuts {
        let epoch = Epoch {
            sc,
            cut,
            rig: &rig,
            config: &config,
            workload: &workload,
        };
        if epoch.run(&mut rng, &mut depth, report)? == EpochEnd::Refused {
            return Ok(());
        }
    }
    let damage = damaged.then(|| at_rest::inject(sc.seed, &rig, sc.store, stale.as_ref()));
    report.at_rest = damage.map(|d| format!("{d:?}"));
    let damage = damage.map(|d| (d, at_rest));
    final_check(sc, &rig, &config, &workload, &mut rng, report, damage)
}

/// Step 1: set the database up, without faults.
fn setup(
    rig: &Arc<Rig>,
    config: &DbConfig,
    workload: &Arc<dyn CrashWorkload>,
) -> anyhow::Result<()> {
    rig.set_active(false);
    {
        let (devices, config, workload) = (rig.devices(), config.clone(), workload.clone());
        let outcome = Sim::run(SimConfig::default(), move |_| -> anyhow::Result<()> {
            let db = Database::open_with(&config, devices).map_err(|e| anyhow!("create: {e}"))?;
            db.set_cpu_costs(CpuCosts::free());
            workload.setup(&db).map_err(|e| anyhow!("setup: {e}"))?;
            db.close().map_err(|e| anyhow!("close after setup: {e}"))
        })
        .map_err(|e| anyhow!("{e}"))?;
        outcome
            .0
            .finished()
            .ok_or_else(|| anyhow!("setup did not finish"))??;
    }

    Ok(())
}

/// How an epoch ended.
#[derive(PartialEq, Eq)]
enum EpochEnd {
    /// By its power cut, the crash taken: on to the next epoch.
    Cut,
    /// The open refused, naming the damage: a correct end of the seed.
    Refused,
}

/// Step 2: one epoch of a scenario, the workload under faults, ended by a
/// power cut (or a refused open).
struct Epoch<'a> {
    sc: &'a Scenario,
    cut: &'a Cut,
    rig: &'a Arc<Rig>,
    config: &'a DbConfig,
    workload: &'a Arc<dyn CrashWorkload>,
}

impl Epoch<'_> {
    fn run(
        &self,
        rng: &mut ChaCha8Rng,
        depth: &mut u64,
        report: &mut SeedReport,
    ) -> anyhow::Result<EpochEnd> {
        let (sc, cut, rig, config) = (self.sc, self.cut, self.rig, self.config);
        let workload = self.workload;
        rig.set_active(true);
        rig.power.arm(cut.trigger.clone());
        let state = Arc::new(Mutex::new(EpochState::default()));
        let sim = SimConfig {
            seed: rng.random(),
            cores: 2,
            deadline_ns: Some(EPOCH_DEADLINE_NS),
            shuffle: true,
            preempt: sc.preempt,
            ..SimConfig::default()
        };
        let run = EpochRun {
            sim,
            clients: sc.clients,
            profile: sc.profile,
            cut_after_open_ns: cut.after_open_ns,
        };
        let outcome = epoch(run, config, rig, workload.clone(), state.clone())?;
        let state = Arc::try_unwrap(state)
            .map_err(|_| anyhow!("epoch state still shared"))?
            .into_inner()
            .expect("epoch state");
        if std::env::var("FLASHLAB_SIMTEST_TRACE").is_ok() {
            eprintln!(
                "epoch: opened {} open_error {:?} unexpected {:?} cut {:?} faults {:?}",
                state.opened,
                state.open_error,
                state.unexpected,
                rig.power.cut_point(),
                rig.counts()
            );
            for (role, record) in rig.take_records() {
                eprintln!("  {role:?}: {record:?}");
            }
        }
        if let Some(problem) = state.unexpected.first() {
            return Err(anyhow!("unexpected error in a client: {problem}"));
        }
        report.client_errors += state.client_errors;
        report.log_damage = log_damage(rig);
        if let Some(e) = &state.open_error {
            if sc.profile.may_refuse() && names_damage(e) {
                report.refused = Some(format!("open refused: {e}"));
                return Ok(EpochEnd::Refused);
            }
            if sc.profile == Profile::Crash {
                return Err(anyhow!("open (recovery) failed: {e}"));
            }
        }
        if !outcome {
            return Err(anyhow!("an epoch ended before its power cut"));
        }
        let point = match rig.power.cut_point() {
            Some(p) => format!(
                "{} by {} at {:.1} ms",
                p.event.name(),
                p.task,
                p.at_ns as f64 / NS_PER_MS as f64
            ),
            None if state.open_error.is_some() => "after a failed open".to_string(),
            None if state.resume_failed => "after a failed resume".to_string(),
            None => format!("deadline {} ms", EPOCH_DEADLINE_NS / NS_PER_MS),
        };
        let in_recovery = !state.opened && state.open_error.is_none();
        if in_recovery {
            report.recovery_crashes += 1;
            *depth += 1;
            report.recovery_crash_depth = report.recovery_crash_depth.max(*depth);
        } else {
            *depth = 0;
        }
        report.crash_points.push(if in_recovery {
            format!("{point} (during recovery)")
        } else {
            point
        });
        rig.crash();
        report.crashes += 1;
        report.faults = rig.counts();
        check_records(rig)?;
        // The one I/O error of an IoError seed happens in the first epoch.
        for device in [&rig.data, &rig.log] {
            device.set_plan(FaultPlan {
                flush_error_at: None,
                full_after_writes: None,
                ..device.plan()
            });
        }
        Ok(EpochEnd::Cut)
    }
}

/// Step 3: recover without faults and check every promise.
fn final_check(
    sc: &Scenario,
    rig: &Arc<Rig>,
    config: &DbConfig,
    workload: &Arc<dyn CrashWorkload>,
    rng: &mut ChaCha8Rng,
    report: &mut SeedReport,
    damage: Option<(at_rest::Damage, at_rest::AtRest)>,
) -> anyhow::Result<()> {
    rig.set_active(false);
    rig.power.arm(None);
    let (devices, workload2, config2) = (rig.devices(), workload.clone(), config.clone());
    let rig2 = rig.clone();
    let (outcome, _) = Sim::run(
        SimConfig {
            seed: rng.random(),
            ..SimConfig::default()
        },
        move |_| -> anyhow::Result<(u64, Result<(), String>)> {
            let db = match Database::open_with(&config2, devices) {
                Ok(db) => db,
                Err(e) => return Ok((0, Err(format!("final recovery failed: {e}")))),
            };
            rig2.note_recovery(&db);
            if std::env::var("FLASHLAB_SIMTEST_TRACE").is_ok() {
                eprintln!("final recovery took {} ns", Rt::current().now_ns());
            }
            let checked = match workload2.check(&db) {
                Ok(result) => result,
                Err(e) => Err(format!("reading the recovered database: {e}")),
            };
            let verified = match verify(&db) {
                Ok(v) if v.ok() => Ok(()),
                Ok(v) => Err(format!("verify found damage: {:?}", v.problems)),
                Err(e) => Err(format!("verify: {e}")),
            };
            // The pool counts every repair: recovery's, the check's, verify's.
            let repairs: u64 = db.stats().buffers.values().map(|b| b.repairs).sum();
            let closed = db.close().map_err(|e| format!("close: {e}"));
            Ok((repairs, checked.and(verified).and(closed)))
        },
    )
    .map_err(|e| anyhow!("{e}"))?;
    let (repaired, checked) = outcome
        .finished()
        .ok_or_else(|| anyhow!("the final check did not finish"))??;
    report.outcome.pages_repaired = repaired;
    report.outcome.acked_commits = workload.acked();
    report.outcome.in_doubt_commits = workload.in_doubt();
    report.faults = rig.counts();
    report.log_damage = log_damage(rig);
    let [recoveries, redone, skipped] = *rig.ipl_restarts.lock().expect("ipl restarts");
    (
        report.ipl_recoveries,
        report.ipl_pages_redone,
        report.ipl_pages_skipped,
    ) = (recoveries, redone, skipped);
    report.ipl_selection = *rig.ipl_selection.lock().expect("ipl selection");
    if redone > 0 {
        return Err(anyhow!(
            "REC-4: recoveries redid {redone} records of In-Page Logging pages"
        ));
    }
    if let Err(e) = checked {
        let may_refuse = sc.profile.may_refuse() || damage.is_some();
        // Damage at rest that only verify sees (a zeroed free page leaves
        // pages on no list) is named by verify's problems.
        let named = names_damage(&e) || (damage.is_some() && e.starts_with("verify found damage"));
        if may_refuse && named && !e.contains("LOST COMMITS") {
            report.refused = Some(e);
        } else if e.contains("LOST COMMITS")
            && damage.is_some_and(|(d, at_rest)| d.loss_is_the_stated_limit(at_rest))
        {
            report.at_rest_limit_lost = 1;
        } else if sc.profile == Profile::Misdirect {
            // LIMIT (lost writes): a misdirected write may leave a stale
            // page that no check can tell from a current one.
            report.outcome.lost_write_effects = 1;
        } else {
            if e.contains("LOST COMMITS") {
                report.outcome.lost_commits = 1;
            }
            return Err(anyhow!(e));
        }
    }
    let violations = rig.checker.violations();
    if let Some(v) = violations.first() {
        return Err(anyhow!(v.clone()));
    }
    let f = report.faults;
    if f.flushes_after_failure > 0 {
        return Err(anyhow!(
            "a device was flushed {} times after a failed flush: a failed fsync was retried",
            f.flushes_after_failure
        ));
    }
    if f.damaged_pages_caught != f.damaged_pages {
        return Err(anyhow!(
            "{} of {} damaged page images passed the page check",
            f.damaged_pages - f.damaged_pages_caught,
            f.damaged_pages
        ));
    }
    Ok(())
}

/// Damaging faults injected into the log device so far.
fn log_damage(rig: &Rig) -> u64 {
    let c = rig.log.counts();
    c.read_errors + c.read_flips + c.write_flips
}

/// Torn pages are checked as they are made (the page check); here only
/// that the records are consistent.
fn check_records(rig: &Rig) -> anyhow::Result<()> {
    for (role, record) in rig.take_records() {
        if std::env::var("FLASHLAB_SIMTEST_TRACE").is_ok() {
            eprintln!("  {role:?}: {record:?}");
        }
        if let FaultRecord::FlushAfterFailure { task } = &record {
            return Err(anyhow!(
                "task '{task}' flushed the {role:?} device after a failed flush: a failed fsync was retried"
            ));
        }
        if let FaultRecord::Torn {
            kept_bytes,
            len_bytes,
            ..
        } = record
            && (kept_bytes == 0 || kept_bytes >= len_bytes)
        {
            return Err(anyhow!(
                "a torn write kept {kept_bytes} of {len_bytes} bytes"
            ));
        }
    }
    Ok(())
}

/// How one epoch runs.
struct EpochRun {
    sim: SimConfig,
    clients: u32,
    profile: Profile,
    /// The power is cut this long after the open returned.
    cut_after_open_ns: u64,
}

/// One epoch: open (recovery), resume the workload, run clients until the
/// power cut. True if the run ended by the cut (or the deadline).
fn epoch(
    run: EpochRun,
    config: &DbConfig,
    rig: &Arc<Rig>,
    workload: Arc<dyn CrashWorkload>,
    state: Arc<Mutex<EpochState>>,
) -> anyhow::Result<bool> {
    let EpochRun {
        sim,
        clients,
        profile,
        cut_after_open_ns,
    } = run;
    let (config, devices, rig) = (config.clone(), rig.devices(), rig.clone());
    let (outcome, _) = Sim::run(sim, move |rt: Rt| {
        let db = match Database::open_with(&config, devices) {
            Ok(db) => db,
            Err(e) => {
                state.lock().expect("state").open_error = Some(e.to_string());
                rt.sleep_until(u64::MAX / 4);
                return;
            }
        };
        rig.note_recovery(&db);
        state.lock().expect("state").opened = true;
        let opened_ns = rt.now_ns();
        if let Err(e) = workload.resume(&db) {
            record_error(&state, profile, &e, "resume");
            state.lock().expect("state").resume_failed = true;
            rt.sleep_until(u64::MAX / 4);
            return;
        }
        let tasks: Vec<_> = (0..clients)
            .map(|client| {
                let (db, workload, state, rig, task_rt) = (
                    db.clone(),
                    workload.clone(),
                    state.clone(),
                    rig.clone(),
                    rt.clone(),
                );
                rt.spawn(&format!("client{client}"), move || {
                    let mut rng = task_rt.fork_rng();
                    loop {
                        let began_ns = task_rt.now_ns();
                        match workload.step(&db, client, &mut rng) {
                            Ok(Step::Acked) => {
                                let failed = [
                                    rig.data.durability_failed_at_ns(),
                                    rig.log.durability_failed_at_ns(),
                                ]
                                .into_iter()
                                .flatten()
                                .min();
                                if let Some(failed_ns) = failed
                                    && began_ns > failed_ns
                                {
                                    state.lock().expect("state").unexpected.push(format!(
                                        "client {client}: a commit that began at {began_ns} ns was acknowledged after a flush failed at {failed_ns} ns"
                                    ));
                                    return;
                                }
                            }
                            Ok(Step::Aborted) => {}
                            Err(e) if e.is_retryable() => {}
                            Err(e) => {
                                if !record_error(&state, profile, &e, &format!("client {client}")) {
                                    return;
                                }
                                task_rt.sleep(CLIENT_BACKOFF_NS);
                            }
                        }
                    }
                })
            })
            .collect();
        rt.sleep_until(opened_ns + cut_after_open_ns);
        rig.note_selection(&db);
        rig.power.cut_now();
        rt.sleep_until(u64::MAX / 4);
        drop(tasks);
    })
    .map_err(|e| anyhow!("{e}"))?;
    Ok(matches!(outcome, SimOutcome::Stopped))
}

/// Record a client error; true if the client may go on.
fn record_error(state: &Mutex<EpochState>, profile: Profile, e: &Error, who: &str) -> bool {
    let mut st = state.lock().expect("state");
    let expected = match e {
        // The engine stopped accepting work after a log failure: expected
        // only where a flush or log write can fail.
        // So does a rollback that met damage no copy can restore.
        Error::LogFailed(why) => {
            profile == Profile::IoError
                || ((profile.may_refuse() || profile == Profile::Misdirect) && names_damage(why))
        }
        // The page allocator's "every page is in use" is a right answer
        // in any profile (a long seed outgrows a small space: bank seed
        // 109120 on a log-structured space); the final `verify` fails the
        // seed if a page leaked (VERIFY-1).
        Error::PagesInUse { .. } => true,
        // A store's own "space full" (no segment to clean into) stays a
        // failure outside IoError.
        Error::SpaceFull(_) => profile == Profile::IoError,
        Error::Device(d) => match d {
            flashlab_devices::DeviceError::FlushFailed { .. }
            | flashlab_devices::DeviceError::Full { .. } => profile == Profile::IoError,
            flashlab_devices::DeviceError::ReadFailed { .. } => {
                profile.may_refuse() || profile == Profile::Misdirect
            }
            _ => profile == Profile::Misdirect,
        },
        Error::Corruption { .. } | Error::LogDamaged { .. } | Error::Damaged(_) => {
            profile.may_refuse() || profile == Profile::Misdirect
        }
        // LIMIT (lost writes): after a misdirected write, a stale page can
        // send a reader anywhere; any error (never a panic) is accepted.
        _ => profile == Profile::Misdirect,
    };
    if !expected {
        st.unexpected.push(format!("{who}: {e}"));
        return false;
    }
    st.client_errors += 1;
    !matches!(e, Error::LogFailed(_))
}

/// What a run of many seeds found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub seeds: u64,
    pub failed: Vec<SeedReport>,
    pub crashes: u64,
    pub recovery_crashes: u64,
    /// Seeds whose crashes reached two levels deep inside recovery.
    pub seeds_with_recovery_depth_2: u64,
    /// Crash points by kind (event and task, or "time").
    pub crash_points: std::collections::BTreeMap<String, u64>,
    pub faults: FaultCounts,
    #[serde(flatten)]
    pub outcome: CommitOutcome,
    pub client_errors: u64,
    /// IPL recoveries, redo records of IPL pages applied and skipped.
    pub ipl_recoveries: u64,
    pub ipl_pages_redone: u64,
    pub ipl_pages_skipped: u64,
    /// IPL-SEL: selective merges, records discarded, carried, de-applied.
    pub ipl_selection: [u64; 4],
    /// Seeds with damage injected into the log, and what became of them.
    pub log_damage_seeds: u64,
    pub log_damage_recovered: u64,
    pub log_damage_refused: u64,
    pub log_damage_silently_lost: u64,
    /// Seeds that refused to open or read, naming the damage.
    pub refused: u64,
    /// Seeds damaged at rest ([`at_rest`]), and what became of them: every
    /// acknowledged commit present, a refusal naming the damage, commits
    /// lost within the stated limit, and silently lost (must be 0).
    pub at_rest_seeds: u64,
    pub at_rest_recovered: u64,
    pub at_rest_refused: u64,
    pub at_rest_limit_lost: u64,
    pub at_rest_silently_lost: u64,
    pub host_seconds: f64,
}

impl Summary {
    /// Count one seed's report.
    pub fn add(&mut self, r: &SeedReport) {
        self.seeds += 1;
        self.refused += u64::from(r.refused.is_some());
        if r.log_damage > 0 {
            self.log_damage_seeds += 1;
            match (&r.refused, r.outcome.lost_commits) {
                (Some(_), _) => self.log_damage_refused += 1,
                (None, 0) if r.passed() => self.log_damage_recovered += 1,
                (None, _) => self.log_damage_silently_lost += 1,
            }
        }
        if r.at_rest.is_some() {
            self.at_rest_seeds += 1;
            match (&r.refused, r.at_rest_limit_lost, r.passed()) {
                (Some(_), _, _) => self.at_rest_refused += 1,
                (None, 1, true) => self.at_rest_limit_lost += 1,
                (None, _, true) => self.at_rest_recovered += 1,
                (None, _, false) if r.outcome.lost_commits > 0 => self.at_rest_silently_lost += 1,
                (None, _, false) => {} // failed otherwise: listed with the failures
            }
        }
        self.crashes += r.crashes;
        self.recovery_crashes += r.recovery_crashes;
        if r.recovery_crash_depth >= 2 {
            self.seeds_with_recovery_depth_2 += 1;
        }
        for p in &r.crash_points {
            *self.crash_points.entry(crash_kind(p)).or_default() += 1;
        }
        self.faults = self.faults.plus(&r.faults);
        self.outcome.add(&r.outcome);
        self.client_errors += r.client_errors;
        self.ipl_recoveries += r.ipl_recoveries;
        self.ipl_pages_redone += r.ipl_pages_redone;
        self.ipl_pages_skipped += r.ipl_pages_skipped;
        for (sum, n) in self.ipl_selection.iter_mut().zip(r.ipl_selection) {
            *sum += n;
        }
        if !r.passed() {
            self.failed.push(r.clone());
        }
    }
}

/// "log flush by client3 at 12.5 ms" -> "log flush by client".
fn crash_kind(point: &str) -> String {
    let recovery = point.ends_with("(during recovery)");
    let base = point.split(" at ").next().unwrap_or(point);
    let base: String = base
        .trim_end_matches(|c: char| c.is_ascii_digit())
        .to_string();
    let base = if base.starts_with("timer") {
        "timer after recovery".to_string()
    } else if base.starts_with("deadline") {
        "deadline".to_string()
    } else {
        base
    };
    if recovery {
        format!("{base} (during recovery)")
    } else {
        base
    }
}

/// Run `seeds` seeds from `first_seed` on; `each` sees every report.
pub fn run(first_seed: u64, seeds: u64, workload: &str, each: impl FnMut(&SeedReport)) -> Summary {
    run_with(first_seed, seeds, workload, StoreChoice::InPlace, each)
}

/// [`run`] with the data spaces' page store chosen by `store`.
pub fn run_with(
    first_seed: u64,
    seeds: u64,
    workload: &str,
    store: StoreChoice,
    each: impl FnMut(&SeedReport),
) -> Summary {
    run_jobs(first_seed, seeds, workload, store, 1, each)
}

/// Most host threads [`run_jobs`] runs seeds on.
pub const JOBS_MAX: usize = 64;
/// Seeds each host thread takes per batch: `each` sees the reports in seed
/// order, so a batch's reports wait for its slowest seed; this bounds the
/// reports held at once.
const SEEDS_PER_JOB_BATCH: u64 = 8;

/// [`run_with`] on `jobs` host threads. Every seed is its own simulated
/// world (the runtime's state is per thread), so the reports, and `each`'s
/// order (seed order), are the same for any `jobs`; only host time differs.
pub fn run_jobs(
    first_seed: u64,
    seeds: u64,
    workload: &str,
    store: StoreChoice,
    jobs: usize,
    mut each: impl FnMut(&SeedReport),
) -> Summary {
    let started = std::time::Instant::now();
    let jobs = jobs.clamp(1, JOBS_MAX);
    let end = first_seed.saturating_add(seeds);
    let mut summary = Summary::default();
    let mut next = first_seed;
    while next < end {
        let batch_end = end.min(next.saturating_add(jobs as u64 * SEEDS_PER_JOB_BATCH));
        let reports = run_batch(next..batch_end, workload, store, jobs);
        for report in &reports {
            each(report);
            summary.add(report);
        }
        next = batch_end;
    }
    summary.host_seconds = started.elapsed().as_secs_f64();
    summary
}

/// The reports of `seeds`, in seed order, run on up to `jobs` threads that
/// take the next seed as they finish one.
fn run_batch(
    seeds: std::ops::Range<u64>,
    workload: &str,
    store: StoreChoice,
    jobs: usize,
) -> Vec<SeedReport> {
    if jobs == 1 {
        return seeds
            .map(|seed| run_seed_with(seed, workload, store))
            .collect();
    }
    // Workers take an index into the range, not a seed: the index grows
    // past the range's length by at most one a worker, so it cannot wrap
    // even when the range ends at u64::MAX.
    let taken = std::sync::atomic::AtomicU64::new(0);
    let count = seeds.end - seeds.start;
    let take = || {
        let index = taken.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        (index < count).then(|| seeds.start + index)
    };
    let mut reports: Vec<SeedReport> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..jobs)
            .map(|_| {
                scope.spawn(|| {
                    std::iter::from_fn(take)
                        .map(|seed| run_seed_with(seed, workload, store))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| match w.join() {
                Ok(reports) => reports,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    reports.sort_by_key(|r| r.seed);
    reports
}
