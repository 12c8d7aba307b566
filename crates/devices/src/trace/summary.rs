//! Trace summaries: what a run did to each device and storage space.
//!
//! A trace of a TPC-C run holds millions of records; the question asked of
//! it is short. How many reads and writes did the log space see, how large,
//! how long did they take, were they sequential, and at what rate? lee2008
//! argues from exactly these numbers (the log is written sequentially, the
//! temporary space is written and read back in large sequential chunks, the
//! data space is read and written at random), so [`summarize`] groups the
//! records by (device, space) and answers per group:
//!
//! - count and bytes of each operation, and latency per operation and over
//!   all of them: mean, p50, p95, p99 and max;
//! - the sequential fraction: the share of reads and writes that start
//!   exactly where the previous request of the same device, space and
//!   operation ended (requests taken in submit order; the first of each
//!   operation is not sequential, flushes and trims are not counted);
//! - IOPS and MB/s over the group's span, from its first submission to its
//!   last completion (MB = 10^6 bytes; bytes read plus bytes written).
//!
//! Latencies go into an HDR histogram in **nanoseconds** with
//! [`LATENCY_SIGNIFICANT_DIGITS`] significant digits, so each percentile is
//! within 0.1% of the exact value; mean and max are kept exactly beside it.
//! All latencies are reported in microseconds (`latency_us`).
//!
//! Summaries serialize (serde) for the JSON results, and
//! [`render_table`] prints them as a fixed-width text table.

use std::collections::{BTreeMap, HashMap};

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::model::IoKind;
use crate::trace::{Space, TraceRecord};

/// Significant digits of the latency histogram: 3 keeps every recorded
/// value within 0.1%.
pub const LATENCY_SIGNIFICANT_DIGITS: u8 = 3;

const NS_PER_US: f64 = 1_000.0;
const NS_PER_S: f64 = 1_000_000_000.0;
const BYTES_PER_MB: f64 = 1_000_000.0;

/// Latency statistics, all in microseconds.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct LatencySummary {
    /// Exact mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Exact maximum.
    pub max: f64,
}

/// Collects latencies in nanoseconds and summarises them. Percentiles come
/// from an HDR histogram (see the module documentation); mean and max are
/// exact.
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    histogram: Option<Histogram<u64>>,
    sum_ns: u128,
    max_ns: u64,
    count: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram.
    pub fn new() -> LatencyHistogram {
        LatencyHistogram {
            histogram: Histogram::new(LATENCY_SIGNIFICANT_DIGITS).ok(),
            sum_ns: 0,
            max_ns: 0,
            count: 0,
        }
    }

    /// Record one latency.
    pub fn record(&mut self, latency_ns: u64) {
        if let Some(histogram) = self.histogram.as_mut() {
            // The histogram grows to fit; past its largest trackable value
            // (about u64::MAX / 2) it clamps.
            if histogram.record(latency_ns).is_err() {
                histogram.saturating_record(latency_ns);
            }
        }
        self.sum_ns += u128::from(latency_ns);
        self.max_ns = self.max_ns.max(latency_ns);
        self.count += 1;
    }

    /// How many latencies were recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Mean, percentiles and max in microseconds; all zero when empty.
    pub fn summary(&self) -> LatencySummary {
        if self.count == 0 {
            return LatencySummary::default();
        }
        let mean_ns = self.sum_ns as f64 / self.count as f64;
        LatencySummary {
            mean: mean_ns / NS_PER_US,
            p50: self.quantile_us(0.50),
            p95: self.quantile_us(0.95),
            p99: self.quantile_us(0.99),
            max: self.max_ns as f64 / NS_PER_US,
        }
    }

    /// A quantile, never above the exact maximum (the histogram answers with
    /// the top of a bucket).
    fn quantile_us(&self, quantile: f64) -> f64 {
        let ns = self
            .histogram
            .as_ref()
            .map_or(0, |h| h.value_at_quantile(quantile));
        ns.min(self.max_ns) as f64 / NS_PER_US
    }
}

/// Count, bytes and latency of one operation.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct OpSummary {
    /// Requests of this operation.
    pub count: u64,
    /// Bytes they covered.
    pub bytes: u64,
    /// Their latency, submit to completion, in microseconds.
    pub latency_us: LatencySummary,
}

/// Everything [`summarize`] says about one (device, space).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SpaceSummary {
    /// The device's name.
    pub device: String,
    /// The storage space.
    pub space: Space,
    /// Records of every operation.
    pub requests: u64,
    /// Reads.
    pub read: OpSummary,
    /// Writes.
    pub write: OpSummary,
    /// Flushes (no bytes).
    pub flush: OpSummary,
    /// Trims.
    pub trim: OpSummary,
    /// Over all operations.
    pub latency_us: LatencySummary,
    /// Share of reads and writes that continue the previous one of their
    /// operation; 0 when there are none.
    pub sequential_fraction: f64,
    /// First submission to last completion.
    pub span_s: f64,
    /// Requests per second over the span; 0 for an empty span.
    pub iops: f64,
    /// Bytes read and written per second over the span, in 10^6 bytes.
    pub mb_s: f64,
}

/// Summarise records per (device, space), sorted by device then space.
pub fn summarize(records: &[TraceRecord]) -> Vec<SpaceSummary> {
    let mut groups: BTreeMap<(&str, Space), Vec<&TraceRecord>> = BTreeMap::new();
    for record in records {
        groups
            .entry((record.device.as_ref(), record.space))
            .or_default()
            .push(record);
    }
    groups
        .into_iter()
        .map(|((device, space), group)| summarize_group(device, space, group))
        .collect()
}

/// Per-operation accumulators of one group.
#[derive(Default)]
struct OpAccumulator {
    count: u64,
    bytes: u64,
    latency: LatencyHistogram,
}

impl OpAccumulator {
    fn add(&mut self, record: &TraceRecord) {
        self.count += 1;
        self.bytes += record.len_bytes;
        self.latency.record(record.latency_ns());
    }

    fn finish(&self) -> OpSummary {
        OpSummary {
            count: self.count,
            bytes: self.bytes,
            latency_us: self.latency.summary(),
        }
    }
}

fn summarize_group(device: &str, space: Space, mut group: Vec<&TraceRecord>) -> SpaceSummary {
    group.sort_by_key(|r| r.submit_ns);
    let mut ops: BTreeMap<IoKind, OpAccumulator> = BTreeMap::new();
    let mut all = LatencyHistogram::new();
    for record in &group {
        ops.entry(record.kind).or_default().add(record);
        all.record(record.latency_ns());
    }
    let op = |kind| {
        ops.get(&kind)
            .map(OpAccumulator::finish)
            .unwrap_or_default()
    };
    let (read, write) = (op(IoKind::Read), op(IoKind::Write));
    let span_s = span_ns(&group) as f64 / NS_PER_S;
    let bytes = (read.bytes + write.bytes) as f64;
    SpaceSummary {
        device: device.to_string(),
        space,
        requests: group.len() as u64,
        sequential_fraction: sequential_fraction(&group),
        iops: per_second(group.len() as f64, span_s),
        mb_s: per_second(bytes / BYTES_PER_MB, span_s),
        span_s,
        flush: op(IoKind::Flush),
        trim: op(IoKind::Trim),
        read,
        write,
        latency_us: all.summary(),
    }
}

fn span_ns(group: &[&TraceRecord]) -> u64 {
    let first = group.iter().map(|r| r.submit_ns).min().unwrap_or(0);
    let last = group.iter().map(|r| r.complete_ns).max().unwrap_or(0);
    last.saturating_sub(first)
}

fn per_second(amount: f64, span_s: f64) -> f64 {
    if span_s > 0.0 { amount / span_s } else { 0.0 }
}

/// Share of reads and writes (in submit order) that start where the
/// previous request of the same operation ended.
fn sequential_fraction(group: &[&TraceRecord]) -> f64 {
    let mut ends: HashMap<IoKind, u64> = HashMap::new();
    let (mut data, mut sequential) = (0u64, 0u64);
    for record in group {
        if !matches!(record.kind, IoKind::Read | IoKind::Write) {
            continue;
        }
        data += 1;
        let end = record.offset_bytes.saturating_add(record.len_bytes);
        if ends.insert(record.kind, end) == Some(record.offset_bytes) {
            sequential += 1;
        }
    }
    if data == 0 {
        0.0
    } else {
        sequential as f64 / data as f64
    }
}

/// The table's columns: heading, and whether it is left-aligned text.
const COLUMNS: [(&str, bool); 14] = [
    ("device", true),
    ("space", true),
    ("reads", false),
    ("writes", false),
    ("read MB", false),
    ("write MB", false),
    ("mean us", false),
    ("p50 us", false),
    ("p95 us", false),
    ("p99 us", false),
    ("max us", false),
    ("seq %", false),
    ("IOPS", false),
    ("MB/s", false),
];

/// Render summaries as a fixed-width text table, one row per (device,
/// space); latencies over all operations, in microseconds.
pub fn render_table(summaries: &[SpaceSummary]) -> String {
    let rows: Vec<Vec<String>> = summaries.iter().map(table_row).collect();
    let widths: Vec<usize> = COLUMNS
        .iter()
        .enumerate()
        .map(|(i, (heading, _))| {
            rows.iter()
                .map(|row| row[i].len())
                .chain([heading.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let headings: Vec<String> = COLUMNS.iter().map(|(h, _)| h.to_string()).collect();
    let mut out = render_row(&headings, &widths);
    for row in &rows {
        out.push_str(&render_row(row, &widths));
    }
    out
}

fn table_row(s: &SpaceSummary) -> Vec<String> {
    let latency = &s.latency_us;
    vec![
        s.device.clone(),
        s.space.as_str().to_string(),
        s.read.count.to_string(),
        s.write.count.to_string(),
        format!("{:.1}", s.read.bytes as f64 / BYTES_PER_MB),
        format!("{:.1}", s.write.bytes as f64 / BYTES_PER_MB),
        format!("{:.1}", latency.mean),
        format!("{:.1}", latency.p50),
        format!("{:.1}", latency.p95),
        format!("{:.1}", latency.p99),
        format!("{:.1}", latency.max),
        format!("{:.1}", s.sequential_fraction * 100.0),
        format!("{:.0}", s.iops),
        format!("{:.2}", s.mb_s),
    ]
}

fn render_row(cells: &[String], widths: &[usize]) -> String {
    let cells: Vec<String> = cells
        .iter()
        .zip(widths)
        .zip(COLUMNS)
        .map(|((cell, &width), (_, left))| {
            if left {
                format!("{cell:<width$}")
            } else {
                format!("{cell:>width$}")
            }
        })
        .collect();
    let mut line = cells.join("  ").trim_end().to_string();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn record(
        device: &str,
        space: Space,
        kind: IoKind,
        submit_ns: u64,
        latency_ns: u64,
        offset: u64,
    ) -> TraceRecord {
        TraceRecord {
            submit_ns,
            complete_ns: submit_ns + latency_ns,
            device: Arc::from(device),
            space,
            kind,
            offset_bytes: offset,
            len_bytes: 4096,
        }
    }

    #[test]
    fn percentiles_of_one_to_hundred_microseconds() {
        let records: Vec<TraceRecord> = (1..=100)
            .map(|i| record("ssd", Space::Data, IoKind::Read, i * 1_000_000, i * 1000, 0))
            .collect();
        let summaries = summarize(&records);
        assert_eq!(summaries.len(), 1);
        let latency = &summaries[0].latency_us;
        assert!((latency.mean - 50.5).abs() < 1e-9, "{latency:?}");
        assert!((latency.p50 - 50.0).abs() <= 0.05, "{latency:?}");
        assert!((latency.p95 - 95.0).abs() <= 0.1, "{latency:?}");
        assert!((latency.p99 - 99.0).abs() <= 0.1, "{latency:?}");
        assert_eq!(latency.max, 100.0);
        assert_eq!(summaries[0].read.count, 100);
        assert_eq!(summaries[0].read.bytes, 409_600);
    }

    #[test]
    fn sequential_fraction_per_operation() {
        let records = vec![
            record("ssd", Space::Log, IoKind::Write, 0, 10, 0),
            record("ssd", Space::Log, IoKind::Read, 1, 10, 100_000),
            // Continues the write at 0 although a read came between.
            record("ssd", Space::Log, IoKind::Write, 2, 10, 4096),
            record("ssd", Space::Log, IoKind::Write, 3, 10, 8192),
            record("ssd", Space::Log, IoKind::Flush, 4, 10, 0),
            // Random.
            record("ssd", Space::Log, IoKind::Write, 5, 10, 1 << 20),
        ];
        let summary = &summarize(&records)[0];
        assert_eq!(summary.requests, 6);
        assert_eq!(summary.flush.count, 1);
        assert!((summary.sequential_fraction - 2.0 / 5.0).abs() < 1e-12);
    }

    #[test]
    fn groups_by_device_and_space_with_rates() {
        let records = vec![
            record("hdd", Space::Data, IoKind::Write, 0, 500_000_000, 0),
            record(
                "hdd",
                Space::Data,
                IoKind::Write,
                500_000_000,
                500_000_000,
                4096,
            ),
            record("ssd", Space::Temp, IoKind::Read, 0, 1000, 0),
            record("hdd", Space::Log, IoKind::Write, 0, 1000, 0),
        ];
        let summaries = summarize(&records);
        let keys: Vec<(&str, Space)> = summaries
            .iter()
            .map(|s| (s.device.as_str(), s.space))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("hdd", Space::Data),
                ("hdd", Space::Log),
                ("ssd", Space::Temp)
            ]
        );
        let data = &summaries[0];
        assert_eq!(data.span_s, 1.0);
        assert_eq!(data.iops, 2.0);
        assert!((data.mb_s - 0.008192).abs() < 1e-12);
        assert_eq!(data.sequential_fraction, 0.5);
        let table = render_table(&summaries);
        assert_eq!(table.lines().count(), 4);
        assert!(table.starts_with("device"));
        assert!(table.contains("temp"));
    }

    #[test]
    fn empty_and_degenerate_inputs() {
        assert!(summarize(&[]).is_empty());
        assert_eq!(render_table(&[]).lines().count(), 1);
        let odd = record("x", Space::Raw, IoKind::Trim, u64::MAX, 0, u64::MAX);
        let summary = &summarize(&[odd])[0];
        assert_eq!(summary.iops, 0.0);
        assert_eq!(summary.sequential_fraction, 0.0);
        let json = serde_json::to_string(summary).unwrap();
        let mut huge = LatencyHistogram::new();
        huge.record(u64::MAX);
        huge.record(1);
        assert_eq!(huge.summary().max, u64::MAX as f64 / 1000.0);
        assert!(json.contains("\"latency_us\""));
    }
}
