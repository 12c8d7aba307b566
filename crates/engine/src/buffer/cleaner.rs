//! The page cleaner, and writing dirty pages outside a miss: the
//! checkpoint's `flush_all` and `write_back_oldest`.
//!
//! A miss whose CLOCK victim is dirty pays a write before its read, and the
//! write is one page at the victim's address: on a flash device with poor
//! random writes, the dearest request there is. Production engines keep
//! frames clean ahead of demand instead (InnoDB's page cleaner threads with
//! `innodb_lru_scan_depth`, PostgreSQL's bgwriter, Oracle's DBWR) and write
//! in large sorted batches. The page cleaner does the same. Every round
//! (each `cleaner_interval_ns`, or at once when a miss met a dirty victim)
//! it collects
//!
//! - from the CLOCK hand on, the dirty frames the hand reaches next that it
//!   may write (unpinned, idle, not unsealed append pages: BUF-10), until
//!   `clean_target` of the frames ahead of the hand are clean or being
//!   cleaned (the *scan depth*; 0 turns this off), and
//! - once an interval (not in a round a miss asked for), the
//!   `cleaner_batch_pages` dirty pages with the oldest rec_lsn, so that the
//!   checkpoint's redo start keeps moving forward,
//!
//! and writes them sorted by page, in batches of at most
//! `cleaner_batch_pages`: each batch one log force to its highest page LSN
//! (BUF-2) and one dispatch through the page store's batch path (`batch.rs`;
//! merged by the elevator when the write scheduler is on, one request a page
//! in page order when it is off). A miss that meets a dirty victim looks
//! further along the hand, up to the scan depth, for a clean one, and wakes
//! the cleaner; only if none is there does it write the victim itself (a
//! *foreground dirty eviction*).

use std::sync::Arc;

use flashlab_runtime::{Condvar, JoinHandle, Mutex, Rt};

use super::io::Wait;
use super::meta::Share;
use super::{BufferPool, Core, FRAMES_MIN};
use crate::error::Error;
use crate::error::Result;
use crate::page::PageId;
use serde::{Deserialize, Serialize};

/// Longest interval a configuration may give the cleaner (one day, the
/// configuration's limit on every interval).
pub const CLEANER_INTERVAL_NS_MAX: u64 = 86_400_000_000_000;

/// The page cleaner of each buffer pool (`[buffer]`; see
/// `crate::buffer` and ARCHITECTURE.md, "The page cleaner").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BufferConfig {
    /// Share of the frames the cleaner keeps clean (or being cleaned) just
    /// ahead of the CLOCK hand, 0 to 1; 0 turns that scan off and the
    /// cleaner writes only the oldest dirty pages (for the checkpoint).
    pub clean_target: f64,
    /// Most pages of one cleaner batch (one log force, one sorted
    /// dispatch), 1 to [`CLEANER_BATCH_PAGES_MAX`].
    pub cleaner_batch_pages: usize,
    /// The cleaner wakes this often (and when a miss meets a dirty victim);
    /// at least `buffer::CLEANER_INTERVAL_MIN_NS` is kept.
    pub cleaner_interval_ns: u64,
}

/// InnoDB's `innodb_lru_scan_depth` (1024) over the pages of one buffer
/// pool instance (8192 of 16 KB in 128 MB): an eighth of the frames.
pub const CLEAN_TARGET_DEFAULT: f64 = 0.125;
/// 64 pages a batch: InnoDB's neighbour flush of one extent (64 pages).
pub const CLEANER_BATCH_PAGES_DEFAULT: usize = 64;
/// Most pages of one cleaner batch: the elevator's default queue of 128
/// requests, eight times over.
pub const CLEANER_BATCH_PAGES_MAX: usize = 1024;
/// 100 ms: PostgreSQL's `bgwriter_delay` default is 200 ms, InnoDB's page
/// cleaner runs once a second; a tenth of a second keeps small pools clean.
pub const CLEANER_INTERVAL_NS_DEFAULT: u64 = 100_000_000;

impl Default for BufferConfig {
    fn default() -> Self {
        BufferConfig {
            clean_target: CLEAN_TARGET_DEFAULT,
            cleaner_batch_pages: CLEANER_BATCH_PAGES_DEFAULT,
            cleaner_interval_ns: CLEANER_INTERVAL_NS_DEFAULT,
        }
    }
}

impl BufferConfig {
    /// Check each key; a one-line error names the key and the problem.
    pub fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.clean_target) {
            return Err(Error::Config(format!(
                "[buffer] clean_target = {} must be a share of the frames from 0 to 1",
                self.clean_target
            )));
        }
        if !(1..=CLEANER_BATCH_PAGES_MAX).contains(&self.cleaner_batch_pages) {
            return Err(Error::Config(format!(
                "[buffer] cleaner_batch_pages = {} must be from 1 to {CLEANER_BATCH_PAGES_MAX} pages",
                self.cleaner_batch_pages
            )));
        }
        if self.cleaner_interval_ns > CLEANER_INTERVAL_NS_MAX {
            return Err(Error::Config(format!(
                "[buffer] cleaner_interval_ns = {} is more than the limit of {CLEANER_INTERVAL_NS_MAX} ns (a day)",
                self.cleaner_interval_ns
            )));
        }
        Ok(())
    }
}

/// The shortest interval between rounds of the page cleaner, so that an
/// interval of 0 cannot spin without virtual time passing.
pub const CLEANER_INTERVAL_MIN_NS: u64 = 1_000;
/// Name of the page cleaner's task in traces (and power-cut triggers);
/// its other tasks are named `page-cleaner-1` and on.
pub const CLEANER_TASK_NAME: &str = "page-cleaner";
/// Tasks of one pool's page cleaner, each owning a share of the frames
/// (InnoDB's `innodb_page_cleaners` defaults to 4).
pub const CLEANER_TASKS: usize = 4;

impl Core {
    /// The elevator stage's limits, if write-backs go through it.
    fn write_scheduler(&self) -> Option<flashlab_devices::scheduler::SchedulerConfig> {
        *self
            .write_scheduler
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The limits a cleaner batch of up to `batch_pages` goes out with: the
    /// elevator's if it is on, else no merging (one request a page, in page
    /// order) and a queue that holds the whole batch.
    fn cleaner_scheduler(
        &self,
        batch_pages: usize,
    ) -> flashlab_devices::scheduler::SchedulerConfig {
        self.write_scheduler()
            .unwrap_or(flashlab_devices::scheduler::SchedulerConfig {
                merged_request_bytes_max: self.page_bytes as u64,
                queue_depth: batch_pages.max(1),
            })
    }

    /// Write every page dirty at the call (waiting out write-backs already
    /// in flight), in page order, append pages not yet sealed excepted
    /// (BUF-10), then flush every registered device.
    pub(super) fn flush_all(&self) -> Result<()> {
        let dirty = self.meta.lock().writable_dirty_frames();
        let spaces: Vec<_> = self.spaces.read().values().cloned().collect();
        if let Some(scheduler) = self.write_scheduler() {
            let batch = dirty.iter().map(|&(id, _, frame)| (id, frame)).collect();
            self.write_back_batch(batch, &scheduler, false)?;
        }
        // Pages the batch skipped (a write in flight): wait them out.
        for (id, _, frame) in dirty {
            self.write_back(frame, id, Wait::Yes)?;
        }
        for space in spaces {
            space.store.sync(&*self.log)?;
        }
        Ok(())
    }

    /// Write up to `max_pages` idle dirty pages with the smallest rec_lsn.
    pub(super) fn write_back_oldest(&self, max_pages: usize) -> Result<usize> {
        let batch = self.meta.lock().oldest_dirty(max_pages, Share::ALL);
        if let Some(scheduler) = self.write_scheduler() {
            return self.write_back_batch(batch, &scheduler, false);
        }
        let mut written = 0;
        for (id, frame) in batch {
            if self.write_back(frame, id, Wait::No)? {
                written += 1;
            }
        }
        Ok(written)
    }

    /// One round of the page cleaner task of `share`: the scan ahead of
    /// the hand and, with `flush_list`, its part of the pool's `batch_pages`
    /// oldest dirty pages (up to their LSN limit), written sorted in batches of at most
    /// `batch_pages` (CLEAN-2). Returns the pages written.
    pub(super) fn clean_round(
        &self,
        batch_pages: usize,
        share: Share,
        flush_list: bool,
    ) -> Result<usize> {
        let batch_pages = batch_pages.max(1);
        let mut pages: Vec<(PageId, usize)> = {
            let meta = self.meta.lock();
            let mut pages = meta.scan_ahead(share);
            if flush_list {
                pages.extend(meta.oldest_dirty_to_limit(batch_pages, share));
            }
            pages
        };
        pages.sort_unstable();
        pages.dedup();
        let scheduler = self.cleaner_scheduler(batch_pages);
        let mut written = 0;
        for batch in pages.chunks(batch_pages) {
            assert!(
                batch.len() <= batch_pages && batch.is_sorted(),
                "CLEAN-2: a cleaner batch out of page order or over its size"
            );
            written += self.write_back_batch(batch.to_vec(), &scheduler, true)?;
        }
        Ok(written)
    }
}

/// How a page cleaner is told to stop, or to run a round now.
#[derive(Default)]
pub(super) struct CleanerSignal {
    state: Mutex<SignalState>,
    wake: Condvar,
}

#[derive(Default)]
struct SignalState {
    stop: bool,
    /// Wake-ups asked for so far (a miss met a dirty victim); each task
    /// remembers the count it last saw.
    nudges: u64,
    /// Whether a nudge came since the last [`CleanerSignal::take_nudge`].
    #[cfg(test)]
    nudged: bool,
}

impl CleanerSignal {
    /// Wake the cleaner's tasks for a round now (a miss met a dirty victim).
    pub(super) fn nudge(&self) {
        let mut state = self.state.lock();
        state.nudges += 1;
        #[cfg(test)]
        {
            state.nudged = true;
        }
        self.wake.notify_all();
    }

    /// Whether the cleaner was nudged since the last call, clearing it.
    #[cfg(test)]
    pub(super) fn take_nudge(&self) -> bool {
        std::mem::take(&mut self.state.lock().nudged)
    }

    fn stop(&self) {
        self.state.lock().stop = true;
        self.wake.notify_all();
    }

    fn start(&self) {
        *self.state.lock() = SignalState::default();
    }

    /// Sleep `duration_ns`, or until nudged past `seen` or stopped; true if
    /// stopped. `seen` becomes the nudges counted so far.
    fn sleep(&self, rt: &Rt, duration_ns: u64, seen: &mut u64) -> bool {
        let deadline_ns = rt.now_ns().saturating_add(duration_ns);
        let mut state = self.state.lock();
        while !state.stop && state.nudges == *seen && rt.now_ns() < deadline_ns {
            state = self.wake.wait_until(state, deadline_ns).0;
        }
        *seen = state.nudges;
        state.stop
    }
}

/// Tells a background task to stop (the database's checkpointer and log
/// writer, the log's checkpoint wish). Clones share one signal; a request
/// wakes the task at once instead of after its current interval.
#[derive(Clone, Default)]
pub struct WriterStop {
    inner: Arc<StopSignal>,
}

#[derive(Default)]
struct StopSignal {
    requested: Mutex<bool>,
    wake: Condvar,
}

impl WriterStop {
    /// A signal not yet requested.
    pub fn new() -> WriterStop {
        WriterStop::default()
    }

    /// Ask the task to stop; it ends after the work it is doing, if any.
    pub fn request(&self) {
        *self.inner.requested.lock() = true;
        self.inner.wake.notify_all();
    }

    /// Take a request back (a signal reused as a wake-up, as the log does
    /// for its checkpointer).
    pub fn reset(&self) {
        *self.inner.requested.lock() = false;
    }

    /// True once a stop was requested.
    pub fn is_requested(&self) -> bool {
        *self.inner.requested.lock()
    }

    /// Sleep `duration_ns` or until a stop is requested; true if requested.
    pub fn sleep(&self, rt: &Rt, duration_ns: u64) -> bool {
        let deadline_ns = rt.now_ns().saturating_add(duration_ns);
        let mut requested = self.inner.requested.lock();
        while !*requested && rt.now_ns() < deadline_ns {
            requested = self.inner.wake.wait_until(requested, deadline_ns).0;
        }
        *requested
    }
}

/// What a page cleaner did, returned when it stops.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CleanerReport {
    /// Rounds run (one per interval, or per wake-up by a miss).
    pub rounds: u64,
    pub pages_written: u64,
    /// Rounds that ended in an error. The pages stay dirty; a miss or the
    /// checkpoint that needs them written reports the error to its caller.
    pub failed_rounds: u64,
    pub last_error: Option<String>,
}

impl BufferPool {
    /// Start this pool's page cleaner (one at a time per pool): every
    /// `config.cleaner_interval_ns` (at least [`CLEANER_INTERVAL_MIN_NS`]),
    /// or when a miss meets a dirty victim, it runs a round (see the module
    /// documentation) until [`BufferPool::stop_cleaner`]. The scan depth
    /// is `config.clean_target` of the frames; misses look that far ahead
    /// for a clean victim while the cleaner runs. It runs as
    /// [`CLEANER_TASKS`] tasks (fewer in a pool of fewer than
    /// `CLEANER_TASKS * FRAMES_MIN` frames), each owning a share of the
    /// frames, so that their batches keep several device requests in
    /// flight; the handle's report sums theirs.
    pub fn spawn_page_cleaner(&self, rt: &Rt, config: &BufferConfig) -> JoinHandle<CleanerReport> {
        let tasks = (self.frames() / FRAMES_MIN).clamp(1, CLEANER_TASKS);
        self.spawn_cleaner_tasks(rt, config, tasks)
    }

    /// [`BufferPool::spawn_page_cleaner`] with `tasks` tasks.
    pub(super) fn spawn_cleaner_tasks(
        &self,
        rt: &Rt,
        config: &BufferConfig,
        tasks: usize,
    ) -> JoinHandle<CleanerReport> {
        let core = self.core.clone();
        let task_rt = rt.clone();
        let interval_ns = config.cleaner_interval_ns.max(CLEANER_INTERVAL_MIN_NS);
        let batch_pages = config.cleaner_batch_pages.max(1);
        self.core.meta.lock().set_scan_depth(config.clean_target);
        self.core.cleaner.start();
        rt.spawn(CLEANER_TASK_NAME, move || {
            let helpers: Vec<_> = (1..tasks)
                .map(|index| {
                    let (core, helper_rt) = (core.clone(), task_rt.clone());
                    let share = Share { index, of: tasks };
                    task_rt.spawn(&format!("{CLEANER_TASK_NAME}-{index}"), move || {
                        run_cleaner(&core, &helper_rt, interval_ns, batch_pages, share)
                    })
                })
                .collect();
            let first = Share {
                index: 0,
                of: tasks,
            };
            let mut report = run_cleaner(&core, &task_rt, interval_ns, batch_pages, first);
            for helper in helpers {
                report.add(&helper.join());
            }
            core.meta.lock().set_scan_depth(0.0);
            report
        })
    }

    /// Ask the page cleaner to stop; its tasks end after the batch each is
    /// writing, if any.
    pub fn stop_cleaner(&self) {
        self.core.cleaner.stop();
    }
}

impl CleanerReport {
    fn add(&mut self, other: &CleanerReport) {
        self.rounds += other.rounds;
        self.pages_written += other.pages_written;
        self.failed_rounds += other.failed_rounds;
        if other.last_error.is_some() {
            self.last_error.clone_from(&other.last_error);
        }
    }
}

fn run_cleaner(
    core: &Core,
    rt: &Rt,
    interval_ns: u64,
    batch_pages: usize,
    share: Share,
) -> CleanerReport {
    let mut report = CleanerReport::default();
    let mut seen = 0;
    // The oldest pages are written once an interval (CLEAN-8); a round a
    // miss asked for between two only scans ahead of the hand.
    let mut next_flush_ns = rt.now_ns().saturating_add(interval_ns);
    loop {
        let wait_ns = next_flush_ns.saturating_sub(rt.now_ns());
        if core.cleaner.sleep(rt, wait_ns, &mut seen) {
            break;
        }
        let flush_list = rt.now_ns() >= next_flush_ns;
        if flush_list {
            next_flush_ns = rt.now_ns().saturating_add(interval_ns);
        }
        report.rounds += 1;
        match core.clean_round(batch_pages, share, flush_list) {
            Ok(written) => report.pages_written += written as u64,
            Err(e) => {
                report.failed_rounds += 1;
                report.last_error = Some(e.to_string());
            }
        }
        // The round's page I/O was owed: charge it (CPU-3).
        Rt::cpu_settle_current();
    }
    report
}
