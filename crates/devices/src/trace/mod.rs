//! I/O tracing: every request a device serves, as one record.
//!
//! A [`TraceRecord`] holds what lee2008's figures plot (time against address)
//! and what a latency study needs: submit and completion time, the device,
//! the storage space the request belongs to, the operation, offset and length.
//! [`Tracer`] collects records from many tasks; [`summary`] condenses them per
//! device and space (counts, bytes, latency percentiles, sequential fraction);
//! [`formats`] reads and writes the block-trace formats `flashlab replay`
//! accepts.

pub mod formats;
pub mod summary;
pub mod traced;

use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::model::IoKind;

/// The four storage spaces of a database server (lee2008 section 1), plus
/// `Raw` for I/O that belongs to none (device characterization, replay).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Space {
    Data,
    Log,
    Rollback,
    Temp,
    Raw,
}

impl Space {
    pub const ALL: [Space; 5] = [
        Space::Data,
        Space::Log,
        Space::Rollback,
        Space::Temp,
        Space::Raw,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Space::Data => "data",
            Space::Log => "log",
            Space::Rollback => "rollback",
            Space::Temp => "temp",
            Space::Raw => "raw",
        }
    }

    pub fn parse(s: &str) -> Option<Space> {
        Space::ALL
            .into_iter()
            .find(|space| space.as_str() == s.trim())
    }
}

/// One traced I/O.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceRecord {
    pub submit_ns: u64,
    pub complete_ns: u64,
    pub device: Arc<str>,
    pub space: Space,
    pub kind: IoKind,
    pub offset_bytes: u64,
    pub len_bytes: u64,
}

impl TraceRecord {
    pub fn latency_ns(&self) -> u64 {
        self.complete_ns.saturating_sub(self.submit_ns)
    }
}

/// Nanoseconds in which at least one of `records` was outstanding: the
/// union of their submit-to-complete intervals (a device's busy time as
/// the host sees it).
pub fn busy_ns(records: &[TraceRecord]) -> u64 {
    let mut spans: Vec<(u64, u64)> = records
        .iter()
        .map(|r| (r.submit_ns, r.complete_ns))
        .collect();
    spans.sort_unstable();
    let (mut busy, mut open) = (0u64, None::<(u64, u64)>);
    for (start, end) in spans {
        open = match open {
            Some((s, e)) if start <= e => Some((s, e.max(end))),
            Some((s, e)) => {
                busy += e.saturating_sub(s);
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    busy + open.map_or(0, |(s, e)| e.saturating_sub(s))
}

/// A shared, append-only collection of trace records. Cloning gives another
/// handle to the same collection. Records are kept in memory up to
/// [`Tracer::RECORDS_MAX`]; beyond that they are counted but dropped, so that
/// a long run cannot exhaust memory (the count says how many).
#[derive(Clone, Default)]
pub struct Tracer {
    inner: Arc<Mutex<TracerInner>>,
}

#[derive(Default)]
struct TracerInner {
    records: Vec<TraceRecord>,
    dropped: u64,
    /// Records are kept only while enabled (a new tracer is enabled).
    paused: bool,
}

impl Tracer {
    /// 20 million records is about 1.3 GB; a run that needs more should
    /// trace one space only.
    pub const RECORDS_MAX: usize = 20_000_000;

    pub fn new() -> Tracer {
        Tracer::default()
    }

    pub fn record(&self, record: TraceRecord) {
        let mut inner = self.inner.lock().expect("tracer lock");
        if inner.paused {
            return;
        }
        if inner.records.len() < Self::RECORDS_MAX {
            inner.records.push(record);
        } else {
            inner.dropped += 1;
        }
    }

    /// Stop or resume keeping records (a benchmark traces only its measured
    /// interval, not the loading before it).
    pub fn set_enabled(&self, enabled: bool) {
        self.inner.lock().expect("tracer lock").paused = !enabled;
    }

    /// A copy of the records so far, in the order they were recorded.
    pub fn records(&self) -> Vec<TraceRecord> {
        self.inner.lock().expect("tracer lock").records.clone()
    }

    /// Records that did not fit under [`Tracer::RECORDS_MAX`].
    pub fn dropped(&self) -> u64 {
        self.inner.lock().expect("tracer lock").dropped
    }

    pub fn len(&self) -> usize {
        self.inner.lock().expect("tracer lock").records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod busy_tests {
    use super::*;

    fn at(submit_ns: u64, complete_ns: u64) -> TraceRecord {
        TraceRecord {
            submit_ns,
            complete_ns,
            device: "d".into(),
            space: Space::Data,
            kind: IoKind::Read,
            offset_bytes: 0,
            len_bytes: 4096,
        }
    }

    #[test]
    fn busy_time_counts_overlapping_requests_once() {
        assert_eq!(busy_ns(&[]), 0);
        // [0, 10) and [5, 20) overlap: 20; [30, 40) apart: 10; [32, 35) inside it.
        let records = [at(30, 40), at(0, 10), at(32, 35), at(5, 20)];
        assert_eq!(busy_ns(&records), 30);
    }
}
