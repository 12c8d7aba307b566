//! Open-loop trace replay through a device model.
//!
//! A block trace says when each request arrived at the disk it was recorded
//! on. Replaying it open-loop submits every request to a [`DeviceModel`] at
//! that same arrival time, whatever the device did with the requests before:
//! a slow device does not slow the workload down, its queue grows and its
//! latencies with it. That is how the papers compare devices under one
//! workload, and it is what `flashlab replay` does.
//!
//! Three rules keep a replay honest:
//!
//! - **Arrival order.** Models require non-decreasing arrival times
//!   (`MODEL-1`). A trace out of order (blkparse merges per-CPU streams, and
//!   some published traces are not sorted) is sorted stably by arrival, and
//!   [`ReplayResult::resorted`] says so.
//! - **Every request is accounted for.** Each request is checked with
//!   [`check_request`] before anything is submitted, and a request the device
//!   cannot serve (beyond its capacity, not sector-aligned, or of zero bytes)
//!   fails the replay with an error naming its trace line, rather than being
//!   dropped or silently wrapped. So either every request is served and
//!   counted, or the error says which lines were refused.
//! - **Folding is explicit.** Real traces often come from disks larger than
//!   the modelled one. With [`ReplayOptions::wrap`] (`--wrap`, off by
//!   default) offsets are folded modulo the capacity and aligned down to a
//!   sector, lengths rounded up to whole sectors, and
//!   [`ReplayResult::folded`] counts the requests that changed.
//!
//! The result reports the simulated rate (IOPS, MB/s over the span from the
//! first arrival to the last completion), latencies (microseconds, see
//! [`crate::trace::summary`]), the model's own counters (write amplification,
//! garbage collections, erases), and how fast the simulation itself ran on
//! the host.
//!
//! **Memory.** A trace file is checked in a first pass ([`replay_file`]),
//! which holds its requests only while there are at most
//! [`REPLAY_HELD_REQUESTS_MAX`] of them: such a file is then replayed from
//! memory. A longer file in arrival order is read a second time and each
//! request submitted as it is read, so memory stays bounded whatever the
//! trace's length. Only a longer file out of order is read whole (to sort
//! it), up to [`crate::trace::formats::TRACE_FILE_REQUESTS_MAX`] requests;
//! generated requests are streamed ([`replay_stream`]).
//!
//! [`random_trace`] makes a seeded synthetic trace (uniform random offsets,
//! Poisson arrivals) for the replay benchmark and for tests.

use std::borrow::Cow;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};
use serde::Serialize;
use thiserror::Error;

use crate::model::{DeviceModel, IoKind, IoRequest, ModelStats, check_request};
use crate::trace::formats::{
    TraceError, TraceFormat, TraceRequest, scan_trace_file, stream_trace_file,
};
use crate::trace::summary::{LatencyHistogram, LatencySummary};

/// Most requests of a trace file [`replay_file`] holds after checking them,
/// about 72 bytes each with their prepared copies; a longer file is
/// read a second time instead.
pub const REPLAY_HELD_REQUESTS_MAX: usize = 1 << 20;
/// How many refused lines beyond the first an error lists by number.
pub const REFUSED_LINES_SHOWN_MAX: usize = 10;

const NS_PER_S: f64 = 1_000_000_000.0;
const BYTES_PER_MB: f64 = 1_000_000.0;

/// Choices of a replay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayOptions {
    /// Fold offsets beyond the capacity back into the device (modulo the
    /// capacity, aligned down to a sector) and round lengths up to whole
    /// sectors, instead of refusing such requests.
    pub wrap: bool,
    /// Virtual time the trace's first arrival is shifted to (a model that
    /// was preconditioned has its clock past zero; MODEL-1).
    pub start_ns: u64,
}

/// Why a replay did not run. Nothing was submitted.
#[derive(Debug, Error)]
pub enum ReplayError {
    /// Requests the device cannot serve; the first is described, the rest
    /// are counted and the first few listed by line.
    #[error("trace line {line}: {problem}{}", refused_note(*others, more_lines))]
    Refused {
        /// Trace line of the first refused request.
        line: u64,
        /// Why the device refuses it.
        problem: String,
        /// Refused requests besides the first.
        others: u64,
        /// Lines of the first few of those.
        more_lines: Vec<u64>,
    },
    /// The trace file could not be read.
    #[error(transparent)]
    Trace(#[from] TraceError),
}

fn refused_note(others: u64, more_lines: &[u64]) -> String {
    if others == 0 {
        return String::new();
    }
    let lines: Vec<String> = more_lines.iter().map(u64::to_string).collect();
    let ellipsis = if others > more_lines.len() as u64 {
        ", ..."
    } else {
        ""
    };
    format!(
        "; {others} more requests refused (lines {}{ellipsis}); --wrap folds offsets into the device",
        lines.join(", ")
    )
}

/// What a replay did. Serializes to the JSON `flashlab replay` prints.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ReplayResult {
    /// The model's name.
    pub device: String,
    /// Requests served: every request of the trace.
    pub requests: u64,
    /// Reads served.
    pub reads: u64,
    /// Writes served.
    pub writes: u64,
    /// Flushes served.
    pub flushes: u64,
    /// Trims served.
    pub trims: u64,
    /// Bytes the reads covered.
    pub bytes_read: u64,
    /// Bytes the writes covered.
    pub bytes_written: u64,
    /// True when the trace was not in arrival order and was sorted (stably).
    pub resorted: bool,
    /// Requests whose offset or length `--wrap` changed.
    pub folded: u64,
    /// First arrival to last completion, in simulated seconds.
    pub simulated_seconds: f64,
    /// Requests per simulated second.
    pub iops: f64,
    /// Bytes read and written per simulated second, in 10^6 bytes.
    pub bandwidth_mb_s: f64,
    /// Completion minus arrival, in microseconds.
    pub latency_us: LatencySummary,
    /// Write amplification of the replay, where the model has it (flash
    /// pages over host pages written during the replay only, when the model
    /// was preconditioned: see `preconditioned`).
    pub waf: Option<f64>,
    /// Garbage collections the model ran during the replay.
    pub gc_runs: u64,
    /// Blocks the model erased during the replay.
    pub erases: u64,
    /// Everything the model counted since it was built: cumulative,
    /// preconditioning included.
    pub model: ModelStats,
    /// The model's counts when the replay began (after preconditioning),
    /// when it was preconditioned; `model` minus these is the replay's.
    pub preconditioned: Option<ModelStats>,
    /// Wall-clock time the submissions took on this machine.
    pub host_seconds: f64,
    /// Requests simulated per wall-clock second.
    pub simulated_ios_per_host_second: f64,
}

/// Replay `requests` open-loop through `model`. See the module
/// documentation for ordering, validation and folding.
pub fn replay(
    model: &mut dyn DeviceModel,
    requests: &[TraceRequest],
    options: &ReplayOptions,
) -> Result<ReplayResult, ReplayError> {
    let (ordered, resorted) = in_arrival_order(requests);
    let prepared = prepare(&*model, &ordered, options)?;
    let run = submit_all(model, &prepared.requests);
    Ok(finish(&*model, run, resorted, prepared.folded))
}

/// The requests sorted stably by arrival, and whether they had to be.
fn in_arrival_order(requests: &[TraceRequest]) -> (Cow<'_, [TraceRequest]>, bool) {
    if requests.is_sorted_by_key(|r| r.arrival_ns) {
        return (Cow::Borrowed(requests), false);
    }
    let mut sorted = requests.to_vec();
    sorted.sort_by_key(|r| r.arrival_ns);
    (Cow::Owned(sorted), true)
}

/// Requests ready to submit at their arrival times (shifted by the
/// options' start): folded if asked, all checked.
struct Prepared {
    requests: Vec<(u64, IoRequest)>,
    folded: u64,
}

/// Fold (if asked) and check every request; refuse the replay if any fails.
fn prepare(
    model: &dyn DeviceModel,
    requests: &[TraceRequest],
    options: &ReplayOptions,
) -> Result<Prepared, ReplayError> {
    let mut prepared = Prepared {
        requests: Vec::with_capacity(requests.len()),
        folded: 0,
    };
    let mut refused = Refusals::default();
    for request in requests {
        let mut io = IoRequest {
            kind: request.kind,
            offset_bytes: request.offset_bytes,
            len_bytes: request.len_bytes,
        };
        if options.wrap && fold(&mut io, model.capacity_bytes(), model.sector_bytes()) {
            prepared.folded += 1;
        }
        match validate(model, &io) {
            Ok(()) => prepared
                .requests
                .push((request.arrival_ns + options.start_ns, io)),
            Err(problem) => refused.add(request.line, problem),
        }
    }
    refused.into_result().map(|()| prepared)
}

/// The refused requests of a trace: the first in full, the rest counted.
#[derive(Default)]
struct Refusals {
    first: Option<(u64, String)>,
    others: u64,
    more_lines: Vec<u64>,
}

impl Refusals {
    fn add(&mut self, line: u64, problem: String) {
        if self.first.is_none() {
            self.first = Some((line, problem));
            return;
        }
        self.others += 1;
        if self.more_lines.len() < REFUSED_LINES_SHOWN_MAX {
            self.more_lines.push(line);
        }
    }

    fn into_result(self) -> Result<(), ReplayError> {
        match self.first {
            None => Ok(()),
            Some((line, problem)) => Err(ReplayError::Refused {
                line,
                problem,
                others: self.others,
                more_lines: self.more_lines,
            }),
        }
    }
}

/// [`check_request`], and no zero-byte reads, writes or trims.
fn validate(model: &dyn DeviceModel, io: &IoRequest) -> Result<(), String> {
    if io.len_bytes == 0 && io.kind != IoKind::Flush {
        return Err(format!(
            "{}: {} of zero bytes at offset {}",
            model.name(),
            io.kind.as_str(),
            io.offset_bytes
        ));
    }
    check_request(
        model.name(),
        model.capacity_bytes(),
        model.sector_bytes(),
        io,
    )
    .map_err(|e| e.to_string())
}

/// Fold a request into a device of `capacity_bytes`: length rounded up to
/// whole sectors, offset modulo the (sector-aligned) capacity and aligned
/// down, then moved back if the request would run past the end. Returns
/// whether anything changed. A request longer than the device, or a flush,
/// is left alone (validation decides).
fn fold(io: &mut IoRequest, capacity_bytes: u64, sector_bytes: u32) -> bool {
    let sector = u64::from(sector_bytes.max(1));
    let usable = capacity_bytes - capacity_bytes % sector;
    let Some(len) = io.len_bytes.div_ceil(sector).checked_mul(sector) else {
        return false;
    };
    if io.kind == IoKind::Flush || usable == 0 || len > usable {
        return false;
    }
    let wrapped = io.offset_bytes % usable;
    let offset = (wrapped - wrapped % sector).min(usable - len);
    let changed = offset != io.offset_bytes || len != io.len_bytes;
    io.offset_bytes = offset;
    io.len_bytes = len;
    changed
}

/// What the submission loop measured.
struct Run {
    counts: ModelStats,
    latency: LatencyHistogram,
    first_arrival_ns: u64,
    last_completion_ns: u64,
    host_seconds: f64,
}

impl Run {
    fn new() -> Run {
        Run {
            counts: ModelStats::default(),
            latency: LatencyHistogram::new(),
            first_arrival_ns: 0,
            last_completion_ns: 0,
            host_seconds: 0.0,
        }
    }
}

/// Submit every request at its arrival time.
fn submit_all(model: &mut dyn DeviceModel, requests: &[(u64, IoRequest)]) -> Run {
    let mut run = Run {
        first_arrival_ns: requests.first().map_or(0, |(arrival, _)| *arrival),
        ..Run::new()
    };
    let started = Instant::now();
    for (i, (arrival_ns, io)) in requests.iter().enumerate() {
        if let Some((_, ahead)) = requests.get(i + 1) {
            model.prefetch(ahead);
        }
        submit_one(model, &mut run, *arrival_ns, io);
    }
    run.host_seconds = started.elapsed().as_secs_f64();
    run
}

/// Submit `io` at `arrival_ns` and record it in `run`.
fn submit_one(model: &mut dyn DeviceModel, run: &mut Run, arrival_ns: u64, io: &IoRequest) {
    let completion_ns = model.submit(arrival_ns, io);
    run.latency.record(completion_ns.saturating_sub(arrival_ns));
    run.last_completion_ns = run.last_completion_ns.max(completion_ns);
    count(&mut run.counts, io);
}

fn count(counts: &mut ModelStats, io: &IoRequest) {
    match io.kind {
        IoKind::Read => {
            counts.reads += 1;
            counts.bytes_read += io.len_bytes;
        }
        IoKind::Write => {
            counts.writes += 1;
            counts.bytes_written += io.len_bytes;
        }
        IoKind::Flush => counts.flushes += 1,
        IoKind::Trim => counts.trims += 1,
    }
}

fn per_second(amount: f64, seconds: f64) -> f64 {
    if seconds > 0.0 { amount / seconds } else { 0.0 }
}

fn finish(model: &dyn DeviceModel, run: Run, resorted: bool, folded: u64) -> ReplayResult {
    let stats = model.stats();
    let counts = &run.counts;
    let requests = run.latency.count();
    let span_ns = run.last_completion_ns.saturating_sub(run.first_arrival_ns);
    let simulated_seconds = span_ns as f64 / NS_PER_S;
    let bytes = (counts.bytes_read + counts.bytes_written) as f64;
    ReplayResult {
        device: model.name().to_string(),
        requests,
        reads: counts.reads,
        writes: counts.writes,
        flushes: counts.flushes,
        trims: counts.trims,
        bytes_read: counts.bytes_read,
        bytes_written: counts.bytes_written,
        resorted,
        folded,
        simulated_seconds,
        iops: per_second(requests as f64, simulated_seconds),
        bandwidth_mb_s: per_second(bytes / BYTES_PER_MB, simulated_seconds),
        latency_us: run.latency.summary(),
        waf: stats.waf,
        gc_runs: stats.gc_runs,
        erases: stats.erases,
        model: stats,
        preconditioned: None,
        host_seconds: run.host_seconds,
        simulated_ios_per_host_second: per_second(requests as f64, run.host_seconds),
    }
}

/// A seeded synthetic open-loop trace: `count` requests of `block_bytes`
/// each at uniformly random block-aligned offsets below `capacity_bytes`,
/// a `read_fraction` of them reads (the rest writes), arriving as a Poisson
/// process of `iops` requests per second (all at 0 when `iops` is not a
/// positive number). The same arguments always give the same trace. An
/// empty trace when `block_bytes` is 0 or larger than `capacity_bytes`.
pub fn random_trace(
    seed: u64,
    count: usize,
    read_fraction: f64,
    block_bytes: u64,
    capacity_bytes: u64,
    iops: f64,
) -> Vec<TraceRequest> {
    random_requests(
        seed,
        count as u64,
        read_fraction,
        block_bytes,
        capacity_bytes,
        iops,
    )
    .collect()
}

/// The requests of [`random_trace`], generated one at a time: memory stays
/// constant however many are asked for.
pub fn random_requests(
    seed: u64,
    count: u64,
    read_fraction: f64,
    block_bytes: u64,
    capacity_bytes: u64,
    iops: f64,
) -> impl Iterator<Item = TraceRequest> {
    let blocks = capacity_bytes.checked_div(block_bytes).unwrap_or(0);
    let count = if blocks == 0 { 0 } else { count };
    let read_fraction = if read_fraction.is_nan() {
        0.0
    } else {
        read_fraction.clamp(0.0, 1.0)
    };
    let gaps = Exp::new(iops / NS_PER_S).ok().filter(|_| iops > 0.0);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut clock_ns = 0.0f64;
    (0..count).map(move |i| {
        let arrival_ns = clock_ns as u64;
        if let Some(gaps) = &gaps {
            clock_ns += gaps.sample(&mut rng);
        }
        let kind = if rng.random_bool(read_fraction) {
            IoKind::Read
        } else {
            IoKind::Write
        };
        TraceRequest {
            arrival_ns,
            kind,
            offset_bytes: rng.random_range(0..blocks) * block_bytes,
            len_bytes: block_bytes,
            line: i + 1,
        }
    })
}

/// Replay a stream of requests in arrival order (a generator's) without
/// holding it: each request is checked (and folded, with `wrap`) and
/// submitted as it comes. A request out of order or refused by the device
/// stops the replay with an error naming it.
pub fn replay_stream(
    model: &mut dyn DeviceModel,
    requests: impl IntoIterator<Item = TraceRequest>,
    options: &ReplayOptions,
) -> Result<ReplayResult, ReplayError> {
    let mut run = Run::new();
    let mut folded = 0;
    let mut previous_ns = 0;
    let started = Instant::now();
    let mut requests = requests.into_iter().peekable();
    let mut first = true;
    while let Some(request) = requests.next() {
        if let Some(ahead) = requests.peek() {
            model.prefetch(&IoRequest {
                kind: ahead.kind,
                offset_bytes: ahead.offset_bytes,
                len_bytes: ahead.len_bytes,
            });
        }
        let mut io = IoRequest {
            kind: request.kind,
            offset_bytes: request.offset_bytes,
            len_bytes: request.len_bytes,
        };
        if options.wrap && fold(&mut io, model.capacity_bytes(), model.sector_bytes()) {
            folded += 1;
        }
        let mut refused = Refusals::default();
        if request.arrival_ns < previous_ns {
            refused.add(request.line, "arrives before the request before it".into());
        } else if let Err(problem) = validate(&*model, &io) {
            refused.add(request.line, problem);
        }
        refused.into_result()?;
        previous_ns = request.arrival_ns;
        let arrival_ns = request.arrival_ns + options.start_ns;
        if std::mem::take(&mut first) {
            run.first_arrival_ns = arrival_ns;
        }
        submit_one(model, &mut run, arrival_ns, &io);
    }
    run.host_seconds = started.elapsed().as_secs_f64();
    Ok(finish(&*model, run, false, folded))
}

/// The request as the device sees it, folded into it with `wrap`; true if
/// folding changed it.
fn io_of(
    model: &dyn DeviceModel,
    request: &TraceRequest,
    options: &ReplayOptions,
) -> (IoRequest, bool) {
    let mut io = IoRequest {
        kind: request.kind,
        offset_bytes: request.offset_bytes,
        len_bytes: request.len_bytes,
    };
    let folded = options.wrap && fold(&mut io, model.capacity_bytes(), model.sector_bytes());
    (io, folded)
}

/// Replay a trace file without holding more than
/// [`REPLAY_HELD_REQUESTS_MAX`] of its requests (see the module
/// documentation): a first pass checks every request, so nothing is
/// submitted if any is refused. A file that short is then replayed from
/// memory (sorted if need be); a longer one is read again and each request
/// submitted as it is read. `Ok(None)`: a longer file out of arrival order;
/// read it whole and [`replay`] it, which sorts.
pub fn replay_file(
    model: &mut dyn DeviceModel,
    path: &std::path::Path,
    format: TraceFormat,
    options: &ReplayOptions,
) -> Result<Option<ReplayResult>, ReplayError> {
    replay_file_holding(model, path, format, options, REPLAY_HELD_REQUESTS_MAX)
}

/// [`replay_file`], holding at most `hold_max` requests.
fn replay_file_holding(
    model: &mut dyn DeviceModel,
    path: &std::path::Path,
    format: TraceFormat,
    options: &ReplayOptions,
    hold_max: usize,
) -> Result<Option<ReplayResult>, ReplayError> {
    let mut refused = Refusals::default();
    let mut folded = 0;
    let (scan, held) = scan_trace_file(path, format, hold_max, |request| {
        let (io, changed) = io_of(&*model, request, options);
        folded += u64::from(changed);
        if let Err(problem) = validate(&*model, &io) {
            refused.add(request.line, problem);
        }
    })?;
    refused.into_result()?;
    if let Some(requests) = held {
        return replay(model, &requests, options).map(Some);
    }
    if !scan.in_order {
        return Ok(None);
    }
    let mut run = Run::new();
    let started = Instant::now();
    // A request is submitted once the next one is read, so the model can
    // prefetch for the next while it works on this one.
    let mut pending: Option<(u64, IoRequest)> = None;
    stream_trace_file(path, format, &scan, |request| {
        let (io, _) = io_of(&*model, &request, options);
        model.prefetch(&io);
        let arrival_ns = request.arrival_ns + options.start_ns;
        match pending.replace((arrival_ns, io)) {
            Some((at, before)) => submit_one(model, &mut run, at, &before),
            None => run.first_arrival_ns = arrival_ns,
        }
        Ok(())
    })?;
    if let Some((at, last)) = pending {
        submit_one(model, &mut run, at, &last);
    }
    run.host_seconds = started.elapsed().as_secs_f64();
    Ok(Some(finish(&*model, run, false, folded)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Parameter;
    use crate::trace::formats::request;

    /// A device serving one request at a time in a fixed time per request.
    struct SerialModel {
        capacity_bytes: u64,
        service_ns: u64,
        busy_until_ns: u64,
        served: u64,
        last_arrival_ns: u64,
    }

    impl SerialModel {
        fn new(capacity_bytes: u64) -> SerialModel {
            SerialModel {
                capacity_bytes,
                service_ns: 100_000,
                busy_until_ns: 0,
                served: 0,
                last_arrival_ns: 0,
            }
        }
    }

    impl DeviceModel for SerialModel {
        fn name(&self) -> &str {
            "serial"
        }
        fn capacity_bytes(&self) -> u64 {
            self.capacity_bytes
        }
        fn sector_bytes(&self) -> u32 {
            512
        }
        fn submit(&mut self, now_ns: u64, req: &IoRequest) -> u64 {
            assert!(now_ns >= self.last_arrival_ns, "MODEL-1 violated");
            check_request("serial", self.capacity_bytes, 512, req).expect("MODEL-3 violated");
            self.last_arrival_ns = now_ns;
            self.served += 1;
            self.busy_until_ns = self.busy_until_ns.max(now_ns) + self.service_ns;
            self.busy_until_ns
        }
        fn stats(&self) -> ModelStats {
            ModelStats {
                erases: self.served,
                ..ModelStats::default()
            }
        }
        fn describe(&self) -> Vec<Parameter> {
            Vec::new()
        }
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn replay_serves_every_request_and_measures() {
        let requests = vec![
            request(0, IoKind::Write, 0, 4096, 1),
            request(0, IoKind::Read, 4096, 8192, 2),
            request(1_000_000, IoKind::Flush, 0, 0, 3),
            request(1_000_000, IoKind::Trim, 0, 4096, 4),
        ];
        let mut model = SerialModel::new(MIB);
        let result = replay(&mut model, &requests, &ReplayOptions::default()).unwrap();
        assert_eq!(model.served, 4);
        assert_eq!(result.requests, 4);
        assert_eq!((result.reads, result.writes), (1, 1));
        assert_eq!((result.flushes, result.trims), (1, 1));
        assert_eq!((result.bytes_read, result.bytes_written), (8192, 4096));
        assert!(!result.resorted);
        // Second request waits for the first: 100 us and 200 us; the last
        // two 100 us and 200 us after 1 ms.
        assert_eq!(result.latency_us.max, 200.0);
        assert_eq!(result.latency_us.mean, 150.0);
        assert_eq!(result.simulated_seconds, 0.0012);
        assert_eq!(result.erases, 4);
        let json = serde_json::to_value(&result).unwrap();
        for key in [
            "requests",
            "reads",
            "writes",
            "iops",
            "bandwidth_mb_s",
            "waf",
            "gc_runs",
            "erases",
            "host_seconds",
            "simulated_ios_per_host_second",
        ] {
            assert!(json.get(key).is_some(), "missing {key}");
        }
        for key in ["mean", "p50", "p99", "max"] {
            assert!(
                json["latency_us"].get(key).is_some(),
                "missing latency_us.{key}"
            );
        }
    }

    #[test]
    fn replay_refuses_out_of_range_and_unaligned_by_line() {
        let requests = vec![
            request(0, IoKind::Read, 0, 4096, 1),
            request(1, IoKind::Read, MIB, 4096, 7),
            request(2, IoKind::Write, 100, 512, 9),
            request(3, IoKind::Write, 0, 0, 12),
        ];
        let mut model = SerialModel::new(MIB);
        let err = replay(&mut model, &requests, &ReplayOptions::default()).unwrap_err();
        assert_eq!(
            model.served, 0,
            "nothing is submitted when a request is refused"
        );
        let ReplayError::Refused {
            line,
            others,
            more_lines,
            ..
        } = &err
        else {
            panic!("{err}");
        };
        assert_eq!((*line, *others), (7, 2));
        assert_eq!(more_lines, &vec![9, 12]);
        let text = err.to_string();
        assert!(
            text.starts_with("trace line 7: serial: request at offset 1048576"),
            "{text}"
        );
        assert!(text.contains("(lines 9, 12)"), "{text}");
    }

    #[test]
    fn replay_wrap_folds_and_counts() {
        let requests = vec![
            request(0, IoKind::Read, 0, 4096, 1),
            request(1, IoKind::Read, 3 * MIB + 4096, 4096, 2),
            request(2, IoKind::Write, MIB - 100, 100, 3),
        ];
        let mut model = SerialModel::new(MIB);
        let options = ReplayOptions {
            wrap: true,
            start_ns: 0,
        };
        let result = replay(&mut model, &requests, &options).unwrap();
        assert_eq!(result.requests, 3);
        assert_eq!(result.folded, 2);
        assert_eq!(result.bytes_written, 512);
    }

    #[test]
    fn replay_too_long_request_refused_even_with_wrap() {
        let requests = vec![request(0, IoKind::Read, 0, 2 * MIB, 5)];
        let mut model = SerialModel::new(MIB);
        let err = replay(
            &mut model,
            &requests,
            &ReplayOptions {
                wrap: true,
                start_ns: 0,
            },
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("trace line 5:"));
    }

    #[test]
    fn replay_sorts_unsorted_trace_stably() {
        let requests = vec![
            request(500, IoKind::Read, 0, 512, 1),
            request(100, IoKind::Write, 512, 512, 2),
            request(100, IoKind::Read, 1024, 512, 3),
        ];
        let mut model = SerialModel::new(MIB);
        let result = replay(&mut model, &requests, &ReplayOptions::default()).unwrap();
        assert!(result.resorted);
        assert_eq!(result.requests, 3);
    }

    #[test]
    fn replay_of_random_trace_is_deterministic_and_valid() {
        let a = random_trace(7, 1000, 0.7, 4096, 64 * MIB, 10_000.0);
        assert_eq!(a, random_trace(7, 1000, 0.7, 4096, 64 * MIB, 10_000.0));
        assert_ne!(a, random_trace(8, 1000, 0.7, 4096, 64 * MIB, 10_000.0));
        assert!(a.is_sorted_by_key(|r| r.arrival_ns));
        assert!(
            a.iter()
                .all(|r| r.offset_bytes % 4096 == 0 && r.offset_bytes < 64 * MIB)
        );
        let reads = a.iter().filter(|r| r.kind == IoKind::Read).count();
        assert!((600..800).contains(&reads), "{reads} reads");
        // 1000 arrivals at 10,000 IOPS span about 0.1 s.
        let last_s = a.last().unwrap().arrival_ns as f64 / 1e9;
        assert!((0.08..0.12).contains(&last_s), "{last_s}");
        let mut model = SerialModel::new(64 * MIB);
        let result = replay(&mut model, &a, &ReplayOptions::default()).unwrap();
        assert_eq!(result.requests, 1000);
    }

    /// A trace file gives the same result as reading it whole, whether it
    /// is held after its checking pass or read a second time; a refused
    /// request still stops the replay before anything is submitted; a file
    /// out of order is sorted when held, else left to the sorting replay.
    #[test]
    fn a_trace_file_replays_with_the_same_result_as_read_whole() {
        use crate::trace::formats::{TraceFormat, read_trace_file, write_mqsim};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.mqsim");
        let trace = random_trace(3, 5000, 0.7, 4096, 64 * MIB, 50_000.0);
        write_mqsim(&trace, std::fs::File::create(&path).unwrap()).unwrap();
        let whole = read_trace_file(&path, TraceFormat::Mqsim).unwrap();
        let from_file = |capacity: u64, hold_max: usize| {
            let options = ReplayOptions::default();
            let mut model = SerialModel::new(capacity);
            replay_file_holding(&mut model, &path, TraceFormat::Mqsim, &options, hold_max)
        };
        let mut a = replay(
            &mut SerialModel::new(64 * MIB),
            &whole,
            &ReplayOptions::default(),
        )
        .unwrap();
        let mut held = from_file(64 * MIB, 5000).unwrap().expect("held");
        let mut streamed = from_file(64 * MIB, 4999).unwrap().expect("in order");
        for r in [&mut a, &mut held, &mut streamed] {
            r.host_seconds = 0.0;
            r.simulated_ios_per_host_second = 0.0;
        }
        assert_eq!(a, held);
        assert_eq!(a, streamed);
        for hold_max in [0, 5000] {
            let err = from_file(MIB, hold_max).unwrap_err().to_string();
            assert!(err.contains("more requests refused"), "{err}");
        }
        let mut shuffled = trace.clone();
        shuffled.swap(0, 10);
        write_mqsim(&shuffled, std::fs::File::create(&path).unwrap()).unwrap();
        assert!(from_file(64 * MIB, 0).unwrap().is_none());
        assert!(from_file(64 * MIB, 5000).unwrap().expect("held").resorted);
    }

    #[test]
    fn replay_random_trace_degenerate_arguments() {
        assert!(random_trace(1, 10, 0.5, 0, MIB, 1.0).is_empty());
        assert!(random_trace(1, 10, 0.5, 2 * MIB, MIB, 1.0).is_empty());
        let burst = random_trace(1, 10, f64::NAN, 4096, MIB, -5.0);
        assert!(
            burst
                .iter()
                .all(|r| r.arrival_ns == 0 && r.kind == IoKind::Write)
        );
        let inf = random_trace(1, 10, 2.0, 4096, MIB, f64::INFINITY);
        assert!(inf.iter().all(|r| r.kind == IoKind::Read));
        let mut model = SerialModel::new(MIB);
        let empty = replay(&mut model, &[], &ReplayOptions::default()).unwrap();
        assert_eq!(empty.requests, 0);
        assert_eq!(empty.iops, 0.0);
    }
}
