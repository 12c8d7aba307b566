//! # Forecasting: merge reads issued ahead of need
//!
//! A merge that reads one cluster when its run runs dry leaves the device
//! idle while it merges, and the merge idle while the device reads: one
//! request at a time, each paying the device's whole latency. Knuth's
//! forecasting (vol. 3 5.4.6, Algorithm F) removes the wait: the run whose
//! buffered data ends with the smallest key is the one exhausted first, so
//! its next cluster is the one to read next. Graefe's external sorts keep
//! several such reads in flight, so a device with parallel units (an SSD's
//! chips) works on several at once and a disk always has the next request
//! queued.
//!
//! [`Forecast`] does this for one merge. Each cluster of a run carries its
//! forecasting key (the first 16 bytes of its last tuple's key,
//! `cluster.rs`); the key
//! of the newest cluster whose contents are known says when the run's next
//! cluster is needed. Runs whose next cluster is not issued yet and whose
//! newest read has finished are kept in a heap by that key (ties to the
//! earlier run); while reads in flight are below the limit and a forecast
//! buffer is free, the run at the top gets its next cluster issued. A run
//! whose newest read is still in flight waits: the key after it is unknown
//! until it arrives. Reads run on the operator's [`IoPool`] workers (threads
//! in the real world, simulated tasks in the simulated one), so the device
//! sees them as concurrent requests.
//!
//! ## Memory
//!
//! Forecast buffers come out of the operator's budget: whatever the merge's
//! inputs (one cluster each) and output clusters leave. With forecasting on,
//! the fan-in rule keeps [`FORECAST_CLUSTERS_MIN`] of them free in every
//! merge step. Reads in flight are limited to the buffers, to
//! [`READS_IN_FLIGHT_MAX`] and to the pool's workers.
//!
//! ## Invariants (MERGE-n)
//!
//! 1. Forecast buffers held (in flight, or read and not yet consumed) never
//!    exceed the merge's forecast budget.
//! 2. Reads in flight never exceed the merge's in-flight limit, itself at
//!    most [`READS_IN_FLIGHT_MAX`].
//! 3. A run has at most one read in flight; its reads are issued, and
//!    consumed, in run order.
//! 4. A merge emits tuples in key order (each key prefix at least the one
//!    before).
//! 5. Every read issued ahead is consumed or cancelled (waited for) before
//!    its reader or buffers go away.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use serde::Serialize;

use super::cluster::IoPool;
use super::run::RunReader;

/// Reads one merge keeps in flight at most: the 32 command slots of SATA's
/// native command queue, the deepest queue a disk or SSD of the papers'
/// era accepts.
pub const READS_IN_FLIGHT_MAX: usize = 32;
/// Forecast buffers the fan-in rule keeps free in every merge step when
/// forecasting is on: one read in flight while another waits, read, to be
/// consumed (Knuth's double buffering, the least that overlaps).
pub const FORECAST_CLUSTERS_MIN: usize = 2;

/// What a merge's forecasting did.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct ForecastStats {
    /// Reads issued ahead of need.
    pub issued: u64,
    /// Issued reads the merge consumed.
    pub consumed: u64,
    /// Issued reads waited for and dropped (a merge ended early).
    pub cancelled: u64,
    /// Clusters read when needed, none having been issued.
    pub on_demand: u64,
    /// Most reads in flight at once.
    pub in_flight_peak: u64,
    /// Most forecast buffers held at once.
    pub buffers_peak: u64,
}

impl ForecastStats {
    /// Add another merge's counts (peaks: the larger).
    pub fn add(&mut self, other: &ForecastStats) {
        self.issued += other.issued;
        self.consumed += other.consumed;
        self.cancelled += other.cancelled;
        self.on_demand += other.on_demand;
        self.in_flight_peak = self.in_flight_peak.max(other.in_flight_peak);
        self.buffers_peak = self.buffers_peak.max(other.buffers_peak);
    }
}

/// The forecasting state of one merge.
pub struct Forecast {
    pool: Arc<IoPool>,
    cluster_bytes: usize,
    /// Forecast buffers the merge may hold (MERGE-1).
    budget: usize,
    /// Reads in flight at most (MERGE-2).
    in_flight_max: usize,
    /// Buffers allocated so far (at most `budget`), and the free ones.
    allocated: usize,
    free: Vec<Vec<u8>>,
    /// Runs ready to be forecast: (key, run, the key's sequence number).
    ready: BinaryHeap<Reverse<(u128, usize, u64)>>,
    /// Runs with a read in flight, in issue order.
    waiting: Vec<usize>,
    pub stats: ForecastStats,
}

impl Forecast {
    /// Forecasting for a merge with `budget` forecast buffers of
    /// `cluster_bytes`, reading through `pool` with `workers` tasks; `None`
    /// if the budget holds no buffer.
    pub fn new(
        pool: &Arc<IoPool>,
        workers: usize,
        cluster_bytes: usize,
        budget: usize,
    ) -> Option<Forecast> {
        let in_flight_max = budget.min(READS_IN_FLIGHT_MAX).min(workers);
        (in_flight_max > 0).then(|| Forecast {
            pool: pool.clone(),
            cluster_bytes,
            budget,
            in_flight_max,
            allocated: 0,
            free: Vec::new(),
            ready: BinaryHeap::new(),
            waiting: Vec::new(),
            stats: ForecastStats::default(),
        })
    }

    /// The merge's in-flight limit.
    pub fn in_flight_max(&self) -> usize {
        self.in_flight_max
    }

    /// Reader `i` may have a newer forecasting key (it loaded a cluster):
    /// take back its consumed buffers and queue it if it can be forecast.
    pub fn note(&mut self, i: usize, reader: &mut RunReader) {
        while let Some(buf) = reader.take_freed() {
            self.free.push(buf);
        }
        if !reader.awaiting()
            && let Some((key, seq)) = reader.forecast()
        {
            self.ready.push(Reverse((key, i, seq)));
        }
    }

    /// Issue reads while the limit and the buffers allow, in forecast order.
    pub fn fill(&mut self, readers: &mut [RunReader]) {
        // Reads that finished make their runs forecastable again.
        let mut still = Vec::with_capacity(self.waiting.len());
        for &i in &self.waiting {
            match readers[i].forecast() {
                Some((key, seq)) => self.ready.push(Reverse((key, i, seq))),
                None if readers[i].awaiting() => still.push(i),
                None => {}
            }
        }
        self.waiting = still;
        while self.waiting.len() < self.in_flight_max {
            let Some(buf) = self.buffer() else { break };
            let Some(i) = self.next_run(readers) else {
                self.free.push(buf);
                break;
            };
            match readers[i].issue(&self.pool, buf) {
                Some(unused) => self.free.push(unused),
                None => {
                    self.stats.issued += 1;
                    self.waiting.push(i);
                }
            }
        }
        // MERGE-2.
        assert!(
            self.waiting.len() <= self.in_flight_max && self.in_flight_max <= READS_IN_FLIGHT_MAX,
            "MERGE-2: {} reads in flight, limit {}",
            self.waiting.len(),
            self.in_flight_max
        );
        self.stats.in_flight_peak = self.stats.in_flight_peak.max(self.waiting.len() as u64);
        let held = (self.allocated - self.free.len()) as u64;
        self.stats.buffers_peak = self.stats.buffers_peak.max(held);
    }

    /// The run whose buffered data ends with the smallest key, skipping
    /// stale heap entries.
    fn next_run(&mut self, readers: &mut [RunReader]) -> Option<usize> {
        while let Some(Reverse((_, i, seq))) = self.ready.pop() {
            let r = &mut readers[i];
            if !r.awaiting() && r.known_seq() == seq && r.forecast().is_some() {
                return Some(i);
            }
        }
        None
    }

    /// A free forecast buffer, allocated within the budget (MERGE-1).
    fn buffer(&mut self) -> Option<Vec<u8>> {
        if let Some(buf) = self.free.pop() {
            return Some(buf);
        }
        if self.allocated == self.budget {
            return None;
        }
        self.allocated += 1;
        assert!(
            self.allocated <= self.budget,
            "MERGE-1: {} forecast buffers over a budget of {}",
            self.allocated,
            self.budget
        );
        Some(vec![0u8; self.cluster_bytes])
    }

    /// Totals of the merge's readers (after they are done or dropped).
    pub fn collect(&mut self, readers: &[RunReader]) {
        let sum = |f: fn(&RunReader) -> u64| readers.iter().map(f).sum::<u64>();
        self.stats.consumed = sum(|r| r.reads_ahead_consumed);
        self.stats.cancelled = sum(|r| r.reads_cancelled);
        self.stats.on_demand = sum(|r| r.reads_on_demand);
    }
}
