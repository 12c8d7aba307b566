//! Writing dirty pages outside a miss: the checkpoint's `flush_all`, the
//! background writer's `write_back_oldest`, and the background writer task.
//!
//! The background writer keeps clean frames available so that a miss rarely
//! has to write a dirty victim first (the foreground then pays one read, not
//! a write and a read), and it writes the pages with the oldest rec_lsn so
//! that the checkpoint's redo start point keeps moving forward.

use std::sync::Arc;

use flashlab_runtime::{Condvar, JoinHandle, Mutex, Rt};
use serde::Serialize;

use super::io::Wait;
use super::{BufferPool, Core};
use crate::error::Result;

/// The shortest interval between rounds of the background writer, so that
/// an interval of 0 cannot spin without virtual time passing.
pub const WRITER_INTERVAL_MIN_NS: u64 = 1_000;
/// Name of the background writer's task in traces.
const WRITER_TASK_NAME: &str = "buffer-writer";

impl Core {
    /// The elevator stage's limits, if write-backs go through it.
    fn write_scheduler(&self) -> Option<flashlab_devices::scheduler::SchedulerConfig> {
        *self
            .write_scheduler
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Write every page dirty at the call (waiting out write-backs already
    /// in flight), in page order, append pages not yet sealed excepted
    /// (BUF-10), then flush every registered device.
    pub(super) fn flush_all(&self) -> Result<()> {
        let dirty = self.meta.lock().writable_dirty_frames();
        let spaces: Vec<_> = self.spaces.read().values().cloned().collect();
        if let Some(scheduler) = self.write_scheduler() {
            let batch = dirty.iter().map(|&(id, _, frame)| (id, frame)).collect();
            self.write_back_batch(batch, &scheduler)?;
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
        let batch = self.meta.lock().oldest_dirty(max_pages);
        if let Some(scheduler) = self.write_scheduler() {
            return self.write_back_batch(batch, &scheduler);
        }
        let mut written = 0;
        for (id, frame) in batch {
            if self.write_back(frame, id, Wait::No)? {
                written += 1;
            }
        }
        Ok(written)
    }
}

/// Tells a background writer to stop. Clones share one signal; a request
/// wakes the writer at once instead of after its current interval.
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

    /// Ask the writer to stop; it returns its report after the write-back
    /// it is doing, if any.
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

/// What a background writer did, returned when it stops.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WriterReport {
    /// Rounds run (one per interval).
    pub rounds: u64,
    pub pages_written: u64,
    /// Rounds that ended in an error. The pages stay dirty; a miss or the
    /// checkpoint that needs them written reports the error to its caller.
    pub failed_rounds: u64,
    pub last_error: Option<String>,
}

impl BufferPool {
    /// Start a task that, every `interval_ns` (at least
    /// [`WRITER_INTERVAL_MIN_NS`]), writes back up to `batch_pages` (at
    /// least 1) dirty pages with the oldest rec_lsn, until `stop` is
    /// requested.
    pub fn spawn_background_writer(
        &self,
        rt: &Rt,
        interval_ns: u64,
        batch_pages: usize,
        stop: WriterStop,
    ) -> JoinHandle<WriterReport> {
        let core = self.core.clone();
        let task_rt = rt.clone();
        let interval_ns = interval_ns.max(WRITER_INTERVAL_MIN_NS);
        let batch_pages = batch_pages.max(1);
        rt.spawn(WRITER_TASK_NAME, move || {
            run_writer(&core, &task_rt, interval_ns, batch_pages, &stop)
        })
    }
}

fn run_writer(
    core: &Core,
    rt: &Rt,
    interval_ns: u64,
    batch_pages: usize,
    stop: &WriterStop,
) -> WriterReport {
    let mut report = WriterReport::default();
    while !stop.sleep(rt, interval_ns) {
        report.rounds += 1;
        match core.write_back_oldest(batch_pages) {
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
