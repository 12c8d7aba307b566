//! # Device characterization: fio in virtual time
//!
//! The papers describe their devices by a handful of device-level figures
//! (lee2008 Table 1, petrov2010 Tables 1 and 3): sequential MB/s and latency
//! for block sizes from 8 to 512 KB, random IOPS and latency for 4 to 128 KB,
//! at queue depth 1 and with command queuing. This module measures the same
//! figures on any [`DeviceModel`] by driving it directly in virtual time, the
//! way fio or IOMeter drive a real device, so a preset can be checked against
//! the paper that describes it before any workload runs on it.
//!
//! The procedure:
//! 1. Precondition to steady state (SNIA-style): write the whole region once
//!    sequentially, then random 4 KB writes amounting to a multiple of the
//!    region (capped at [`PRECONDITION_RANDOM_BYTES_MAX`]), then flush. A
//!    disk does not care; an SSD model's FTL needs it, or its first random
//!    writes would find free blocks that no real, full device has.
//! 2. Measure, in this order, random reads, sequential reads, random writes,
//!    sequential writes: reads first so they see the preconditioned state,
//!    sequential writes last because they clean an SSD up.
//! 3. Each point is a closed loop: `D` requests are kept outstanding (`D = 1`
//!    for sequential points); when the earliest completes at time `c`, the
//!    next is submitted at `c`. A min-heap of completion times gives that
//!    order, and the submit times are non-decreasing as MODEL-1 demands.
//!    One unmeasured warm-up request positions the device first, so a
//!    sequential point measures streaming, not the seek to its start.
//!
//! Offsets are aligned to the block size and drawn from a seeded SplitMix64
//! generator, so the same options give the same result bit for bit. The
//! region defaults to the whole device, capped at [`REGION_BYTES_MAX`]; the
//! cost of a characterization is set by the request counts, not the region,
//! except for the sequential fill, which is one pass.
//!
//! Units: MB/s is decimal (10^6 bytes per second, the unit of the papers and
//! of datasheets); block sizes are binary kilobytes (4 KB = 4096 bytes).
//!
//! Invariants (referred to as `CHAR-n`):
//! 1. Within a run, requests are submitted at non-decreasing times.
//! 2. Every request passes [`check_request`] before it is submitted.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::DeviceError;
use crate::model::{DeviceModel, IoKind, IoRequest, check_request};

/// Block sizes of the sequential points (petrov2010 Table 3).
pub const SEQUENTIAL_BLOCKS_KB: [u32; 7] = [8, 16, 32, 64, 128, 256, 512];
/// Block sizes of the random points (petrov2010 Table 3).
pub const RANDOM_BLOCKS_KB: [u32; 6] = [4, 8, 16, 32, 64, 128];

/// The default seed of the offset generator.
pub const SEED_DEFAULT: u64 = 2010;
/// The queued random points run at this depth unless told otherwise
/// (32, the NCQ limit and the depth petrov2010 quotes).
pub const QUEUE_DEPTH_DEFAULT: u32 = 32;
pub const QUEUE_DEPTH_MAX: u32 = 1024;
/// Measured requests per point. 2,000 random disk reads give the mean
/// latency to about 1%.
pub const REQUESTS_PER_POINT_DEFAULT: u32 = 2_000;
pub const REQUESTS_PER_POINT_MAX: u32 = 1 << 20;
/// The default region is the whole device up to this size (256 GiB: every
/// device of the papers fits whole).
pub const REGION_BYTES_MAX: u64 = 256 << 30;
/// Random preconditioning writes this many times the region ...
pub const PRECONDITION_REGION_MULTIPLE_DEFAULT: u32 = 2;
pub const PRECONDITION_REGION_MULTIPLE_MAX: u32 = 8;
/// ... but never more than this many bytes, so large devices stay quick
/// (one million 4 KB writes).
pub const PRECONDITION_RANDOM_BYTES_MAX: u64 = 4 << 30;

const BYTES_PER_KB: u64 = 1024;
const BYTES_PER_MB: f64 = 1e6;
const NS_PER_S: f64 = 1e9;
const NS_PER_MS: f64 = 1e6;
/// Sequential fill and region granularity: the largest sequential block.
const REGION_ALIGN_BYTES: u64 = 512 * BYTES_PER_KB;
/// Random preconditioning uses the smallest random block.
const PRECONDITION_BLOCK_BYTES: u64 = 4 * BYTES_PER_KB;
/// Unmeasured requests at the start of each point.
const WARMUP_REQUESTS: u64 = 1;

/// How to characterize. See the module documentation for the defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct CharacterizeOptions {
    /// Seed of the offset generator.
    pub seed: u64,
    /// Bytes from offset 0 to exercise; `None` means the whole device, capped
    /// at [`REGION_BYTES_MAX`]. Rounded down to a multiple of 512 KB.
    pub region_bytes: Option<u64>,
    /// Depth of the queued random points (the others run at depth 1).
    pub queue_depth: u32,
    /// Measured requests per point.
    pub requests_per_point: u32,
    /// Precondition (sequential fill, random writes, flush) before measuring.
    pub precondition: bool,
    /// Random preconditioning writes this many times the region (0: fill only).
    pub precondition_region_multiple: u32,
    /// ... but at most this many bytes.
    pub precondition_random_bytes_max: u64,
    /// Virtual time of the first request; must not precede anything the
    /// model has already been given (MODEL-1).
    pub start_ns: u64,
}

impl Default for CharacterizeOptions {
    fn default() -> CharacterizeOptions {
        CharacterizeOptions {
            seed: SEED_DEFAULT,
            region_bytes: None,
            queue_depth: QUEUE_DEPTH_DEFAULT,
            requests_per_point: REQUESTS_PER_POINT_DEFAULT,
            precondition: true,
            precondition_region_multiple: PRECONDITION_REGION_MULTIPLE_DEFAULT,
            precondition_random_bytes_max: PRECONDITION_RANDOM_BYTES_MAX,
            start_ns: 0,
        }
    }
}

/// The measured figures of one device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Characterization {
    pub device: String,
    pub sequential: Vec<SequentialPoint>,
    pub random: Vec<RandomPoint>,
}

/// Sequential throughput and mean latency at queue depth 1.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SequentialPoint {
    pub block_kb: u32,
    pub read_mb_s: f64,
    pub write_mb_s: f64,
    pub read_latency_ms: f64,
    pub write_latency_ms: f64,
}

/// Random IOPS and mean latency at one queue depth.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RandomPoint {
    pub block_kb: u32,
    pub queue_depth: u32,
    pub read_iops: f64,
    pub write_iops: f64,
    pub read_latency_ms: f64,
    pub write_latency_ms: f64,
}

/// Characterize `device` (see the module documentation). Bad options are
/// refused with a `Geometry` error naming the device.
pub fn characterize(
    device: &mut dyn DeviceModel,
    options: &CharacterizeOptions,
) -> Result<Characterization, DeviceError> {
    let region_bytes = check_options(&*device, options)?;
    let name = device.name().to_string();
    let mut runner = Runner::prepared(device, options, region_bytes)?;
    let depths = queue_depths(options.queue_depth);
    let random_reads = runner.random_points(IoKind::Read, &depths)?;
    let sequential_reads = runner.sequential_points(IoKind::Read)?;
    let random_writes = runner.random_points(IoKind::Write, &depths)?;
    let sequential_writes = runner.sequential_points(IoKind::Write)?;
    Ok(Characterization {
        device: name,
        sequential: sequential_table(&sequential_reads, &sequential_writes),
        random: random_table(&depths, &random_reads, &random_writes),
    })
}

/// Depth 1, then the chosen depth if it differs.
/// Precondition a model to steady state (sequential fill of the region,
/// random 4 KB writes, flush) as [`characterize`] does before measuring;
/// returns the virtual time it ended at.
pub fn precondition(
    device: &mut dyn DeviceModel,
    options: &CharacterizeOptions,
) -> Result<u64, DeviceError> {
    let region_bytes = check_options(&*device, options)?;
    let mut runner = Runner::new(device, options, region_bytes);
    runner.precondition(options)?;
    Ok(runner.now_ns)
}

/// One measured point of [`measure_point`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    pub iops: f64,
    pub mb_s: f64,
    pub latency_ms: f64,
    /// Virtual time the point ended at; the next point must start no earlier.
    pub end_ns: u64,
}

/// Measure one closed-loop point on a model already in use: `requests`
/// requests of `block_bytes`, `queue_depth` outstanding, sequential from
/// offset 0 or random (seeded) over the first `region_bytes`, starting at
/// `start_ns`. For figures measured at a given depth (petrov2010 Table 3).
#[allow(clippy::too_many_arguments)]
pub fn measure_point(
    device: &mut dyn DeviceModel,
    start_ns: u64,
    kind: IoKind,
    sequential: bool,
    block_bytes: u64,
    queue_depth: u32,
    requests: u64,
    seed: u64,
    region_bytes: u64,
) -> Result<PointResult, DeviceError> {
    let region_bytes =
        region_bytes.min(device.capacity_bytes()) / block_bytes.max(1) * block_bytes.max(1);
    if block_bytes == 0 || region_bytes == 0 || queue_depth == 0 || requests == 0 {
        return Err(DeviceError::Geometry {
            device: device.name().to_string(),
            problem:
                "characterization: a point needs a block, a region, a queue depth and requests"
                    .into(),
        });
    }
    let mut runner = Runner {
        device,
        now_ns: start_ns,
        rng: SplitMix64(seed),
        region_bytes,
        requests,
    };
    let pattern = if sequential {
        Pattern::Sequential
    } else {
        Pattern::Random
    };
    let m = runner.point(&spec(kind, pattern, block_bytes, queue_depth, requests))?;
    Ok(PointResult {
        iops: m.iops(),
        mb_s: m.mb_s(),
        latency_ms: m.latency_ms(),
        end_ns: runner.now_ns,
    })
}

fn queue_depths(queue_depth: u32) -> Vec<u32> {
    if queue_depth == 1 {
        vec![1]
    } else {
        vec![1, queue_depth]
    }
}

/// Validate the options against the device; return the region in bytes.
fn check_options(
    device: &dyn DeviceModel,
    options: &CharacterizeOptions,
) -> Result<u64, DeviceError> {
    let refuse = |problem: String| DeviceError::Geometry {
        device: device.name().to_string(),
        problem: format!("characterization: {problem}"),
    };
    check_limits(options).map_err(refuse)?;
    let sector = u64::from(device.sector_bytes());
    if sector == 0 || !PRECONDITION_BLOCK_BYTES.is_multiple_of(sector) {
        return Err(refuse(format!(
            "sector size {sector} does not divide the 4 KB block"
        )));
    }
    region_bytes(device.capacity_bytes(), options.region_bytes).map_err(refuse)
}

/// Queue depth, request count and precondition multiple within their limits.
fn check_limits(options: &CharacterizeOptions) -> Result<(), String> {
    if !(1..=QUEUE_DEPTH_MAX).contains(&options.queue_depth) {
        return Err(format!("queue depth must be in [1, {QUEUE_DEPTH_MAX}]"));
    }
    if !(1..=REQUESTS_PER_POINT_MAX).contains(&options.requests_per_point) {
        return Err(format!(
            "requests per point must be in [1, {REQUESTS_PER_POINT_MAX}]"
        ));
    }
    if options.precondition_region_multiple > PRECONDITION_REGION_MULTIPLE_MAX {
        return Err(format!(
            "precondition multiple must be at most {PRECONDITION_REGION_MULTIPLE_MAX}"
        ));
    }
    Ok(())
}

/// The region: as asked or the capped device, rounded down to 512 KB.
fn region_bytes(capacity_bytes: u64, asked_bytes: Option<u64>) -> Result<u64, String> {
    let wanted = asked_bytes.unwrap_or(capacity_bytes.min(REGION_BYTES_MAX));
    if wanted > capacity_bytes {
        return Err(format!(
            "region {wanted} bytes exceeds the capacity {capacity_bytes}"
        ));
    }
    let region = wanted / REGION_ALIGN_BYTES * REGION_ALIGN_BYTES;
    if region == 0 {
        return Err(format!(
            "region {wanted} bytes is smaller than one 512 KB block"
        ));
    }
    Ok(region)
}

/// What a closed loop measured.
#[derive(Clone, Copy, Debug, Default)]
struct Measurement {
    requests: u64,
    bytes: u64,
    elapsed_ns: u64,
    latency_ns_total: u128,
}

impl Measurement {
    fn elapsed_s(&self) -> f64 {
        self.elapsed_ns.max(1) as f64 / NS_PER_S
    }

    fn mb_s(&self) -> f64 {
        self.bytes as f64 / BYTES_PER_MB / self.elapsed_s()
    }

    fn iops(&self) -> f64 {
        self.requests as f64 / self.elapsed_s()
    }

    fn latency_ms(&self) -> f64 {
        self.latency_ns_total as f64 / self.requests.max(1) as f64 / NS_PER_MS
    }
}

/// Where the offsets of a loop come from.
#[derive(Clone, Copy, Debug)]
enum Pattern {
    Sequential,
    Random,
}

/// One closed loop: this many requests of this kind and size.
#[derive(Clone, Copy, Debug)]
struct LoopSpec {
    kind: IoKind,
    pattern: Pattern,
    block_bytes: u64,
    queue_depth: u32,
    requests: u64,
}

/// The device, the virtual clock and the offset generator.
struct Runner<'a> {
    device: &'a mut dyn DeviceModel,
    now_ns: u64,
    rng: SplitMix64,
    region_bytes: u64,
    requests: u64,
}

impl<'a> Runner<'a> {
    /// A runner over the first `region_bytes` of `device`, at the options'
    /// start time, seed and requests per point.
    fn new(
        device: &'a mut dyn DeviceModel,
        options: &CharacterizeOptions,
        region_bytes: u64,
    ) -> Runner<'a> {
        Runner {
            device,
            now_ns: options.start_ns,
            rng: SplitMix64(options.seed),
            region_bytes,
            requests: u64::from(options.requests_per_point),
        }
    }

    /// [`Runner::new`], preconditioned when the options ask for it.
    fn prepared(
        device: &'a mut dyn DeviceModel,
        options: &CharacterizeOptions,
        region_bytes: u64,
    ) -> Result<Runner<'a>, DeviceError> {
        let mut runner = Runner::new(device, options, region_bytes);
        if options.precondition {
            runner.precondition(options)?;
        }
        Ok(runner)
    }

    /// Sequential fill, random 4 KB writes, flush.
    fn precondition(&mut self, options: &CharacterizeOptions) -> Result<(), DeviceError> {
        let depth = options.queue_depth;
        let fill = self.region_bytes / REGION_ALIGN_BYTES;
        self.run(&spec(
            IoKind::Write,
            Pattern::Sequential,
            REGION_ALIGN_BYTES,
            depth,
            fill,
        ))?;
        let random_bytes = (self.region_bytes)
            .saturating_mul(u64::from(options.precondition_region_multiple))
            .min(options.precondition_random_bytes_max);
        let random = random_bytes / PRECONDITION_BLOCK_BYTES;
        self.run(&spec(
            IoKind::Write,
            Pattern::Random,
            PRECONDITION_BLOCK_BYTES,
            depth,
            random,
        ))?;
        self.flush()
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        let req = IoRequest {
            kind: IoKind::Flush,
            offset_bytes: 0,
            len_bytes: 0,
        };
        let done = self.submit(self.now_ns, &req)?;
        self.now_ns = done;
        Ok(())
    }

    /// One random point per depth and block size, depth-major.
    fn random_points(
        &mut self,
        kind: IoKind,
        depths: &[u32],
    ) -> Result<Vec<Measurement>, DeviceError> {
        let mut out = Vec::with_capacity(depths.len() * RANDOM_BLOCKS_KB.len());
        for &depth in depths {
            for block_kb in RANDOM_BLOCKS_KB {
                let block = u64::from(block_kb) * BYTES_PER_KB;
                out.push(self.point(&spec(kind, Pattern::Random, block, depth, self.requests))?);
            }
        }
        Ok(out)
    }

    /// One sequential point per block size, at depth 1.
    fn sequential_points(&mut self, kind: IoKind) -> Result<Vec<Measurement>, DeviceError> {
        SEQUENTIAL_BLOCKS_KB
            .iter()
            .map(|&block_kb| {
                let block = u64::from(block_kb) * BYTES_PER_KB;
                self.point(&spec(kind, Pattern::Sequential, block, 1, self.requests))
            })
            .collect()
    }

    /// A warm-up request, then the measured loop continuing from it.
    fn point(&mut self, measured: &LoopSpec) -> Result<Measurement, DeviceError> {
        let mut cursor = 0;
        let warmup = LoopSpec {
            queue_depth: 1,
            requests: WARMUP_REQUESTS,
            ..*measured
        };
        self.run_from(&warmup, &mut cursor)?;
        self.run_from(measured, &mut cursor)
    }

    /// A loop with its own sequential cursor starting at offset 0.
    fn run(&mut self, spec: &LoopSpec) -> Result<Measurement, DeviceError> {
        self.run_from(spec, &mut 0)
    }

    /// The closed loop: keep `queue_depth` requests outstanding; submit the
    /// next when the earliest completes (CHAR-1). Advances the clock to the
    /// last completion. Each request is drawn one ahead, in the same order,
    /// so the model can prefetch for it while the one before is submitted.
    fn run_from(&mut self, spec: &LoopSpec, cursor: &mut u64) -> Result<Measurement, DeviceError> {
        let start_ns = self.now_ns;
        let depth = spec.queue_depth.max(1) as usize;
        let mut outstanding = BinaryHeap::with_capacity(depth);
        let mut submit_ns = start_ns;
        let mut measured = Measurement::default();
        let mut end_ns = start_ns;
        let mut next = (spec.requests > 0).then(|| self.next_request(spec, cursor));
        for i in 0..spec.requests {
            if outstanding.len() == depth {
                let Some(Reverse(done_ns)) = outstanding.pop() else {
                    break;
                };
                debug_assert!(done_ns >= submit_ns, "CHAR-1");
                submit_ns = done_ns;
            }
            let Some(req) = next.take() else {
                break;
            };
            if i + 1 < spec.requests {
                let ahead = self.next_request(spec, cursor);
                self.device.prefetch(&ahead);
                next = Some(ahead);
            }
            let done_ns = self.submit(submit_ns, &req)?;
            outstanding.push(Reverse(done_ns));
            end_ns = end_ns.max(done_ns);
            measured.requests += 1;
            measured.bytes += req.len_bytes;
            measured.latency_ns_total += u128::from(done_ns - submit_ns);
        }
        measured.elapsed_ns = end_ns - start_ns;
        self.now_ns = end_ns;
        Ok(measured)
    }

    /// Check (CHAR-2) and submit; a completion before the arrival (a broken
    /// model) is read as the arrival, so time never runs backwards here.
    fn submit(&mut self, now_ns: u64, req: &IoRequest) -> Result<u64, DeviceError> {
        let dev = &mut *self.device;
        check_request(dev.name(), dev.capacity_bytes(), dev.sector_bytes(), req)?;
        Ok(dev.submit(now_ns, req).max(now_ns))
    }

    /// The next request of a loop; sequential offsets wrap at the region end.
    fn next_request(&mut self, spec: &LoopSpec, cursor: &mut u64) -> IoRequest {
        let block = spec.block_bytes;
        let offset_bytes = match spec.pattern {
            Pattern::Random => self.rng.below(self.region_bytes / block) * block,
            Pattern::Sequential => {
                if *cursor + block > self.region_bytes {
                    *cursor = 0;
                }
                let offset = *cursor;
                *cursor += block;
                offset
            }
        };
        IoRequest {
            kind: spec.kind,
            offset_bytes,
            len_bytes: block,
        }
    }
}

fn spec(
    kind: IoKind,
    pattern: Pattern,
    block_bytes: u64,
    queue_depth: u32,
    requests: u64,
) -> LoopSpec {
    LoopSpec {
        kind,
        pattern,
        block_bytes,
        queue_depth,
        requests,
    }
}

fn sequential_table(reads: &[Measurement], writes: &[Measurement]) -> Vec<SequentialPoint> {
    SEQUENTIAL_BLOCKS_KB
        .iter()
        .zip(reads.iter().zip(writes))
        .map(|(&block_kb, (r, w))| SequentialPoint {
            block_kb,
            read_mb_s: r.mb_s(),
            write_mb_s: w.mb_s(),
            read_latency_ms: r.latency_ms(),
            write_latency_ms: w.latency_ms(),
        })
        .collect()
}

fn random_table(depths: &[u32], reads: &[Measurement], writes: &[Measurement]) -> Vec<RandomPoint> {
    let keys = depths.iter().flat_map(|&depth| {
        RANDOM_BLOCKS_KB
            .iter()
            .map(move |&block_kb| (depth, block_kb))
    });
    keys.zip(reads.iter().zip(writes))
        .map(|((queue_depth, block_kb), (r, w))| RandomPoint {
            block_kb,
            queue_depth,
            read_iops: r.iops(),
            write_iops: w.iops(),
            read_latency_ms: r.latency_ms(),
            write_latency_ms: w.latency_ms(),
        })
        .collect()
}

// ------------------------------------------------------- seq over random

/// Request sizes of the sequential-over-random speed-ups (wang2010 Figure
/// 11 measures "each size" at queue depth 1 on the raw device; the sizes
/// here run from one 4 KB database page to 256 KB).
pub const SPEEDUP_BLOCKS_KB: [u32; 7] = [4, 8, 16, 32, 64, 128, 256];
/// Unmeasured writes before each write point, in bytes: enough to replace
/// every log block of a hybrid FTL and to fill a write-back cache, so the
/// point measures the steady state of its own pattern (wang2010 ran one
/// million requests per size; the first few MB of a pattern are a
/// transient there).
pub const SPEEDUP_WARMUP_BYTES_DEFAULT: u64 = 128 << 20;
/// The largest warm-up accepted.
pub const SPEEDUP_WARMUP_BYTES_MAX: u64 = 16 << 30;

/// Sequential against random IOPS at one request size, queue depth 1.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpeedupPoint {
    pub block_kb: u32,
    pub seq_read_iops: f64,
    pub rand_read_iops: f64,
    pub seq_write_iops: f64,
    pub rand_write_iops: f64,
}

impl SpeedupPoint {
    /// Sequential over random read IOPS.
    pub fn read_speedup(&self) -> f64 {
        self.seq_read_iops / self.rand_read_iops
    }

    /// Sequential over random write IOPS.
    pub fn write_speedup(&self) -> f64 {
        self.seq_write_iops / self.rand_write_iops
    }
}

/// The speed-up of sequential over random requests by request size, as
/// wang2010 Figure 11 measures it: after preconditioning (as
/// [`characterize`]), for each size of `blocks_kb`, random reads,
/// sequential reads, random writes and sequential writes at queue depth 1,
/// `options.requests_per_point` each; each write point follows
/// `warmup_bytes` of unmeasured writes of its own pattern and size, and a
/// flush ends each size.
pub fn speedups(
    device: &mut dyn DeviceModel,
    options: &CharacterizeOptions,
    blocks_kb: &[u32],
    warmup_bytes: u64,
) -> Result<Vec<SpeedupPoint>, DeviceError> {
    let region_bytes = check_options(&*device, options)?;
    let refuse = |problem: String| DeviceError::Geometry {
        device: device.name().to_string(),
        problem: format!("speed-ups: {problem}"),
    };
    if warmup_bytes > SPEEDUP_WARMUP_BYTES_MAX {
        return Err(refuse(format!(
            "warm-up must be at most {SPEEDUP_WARMUP_BYTES_MAX} bytes"
        )));
    }
    if let Some(kb) = blocks_kb
        .iter()
        .find(|&&kb| kb == 0 || u64::from(kb) * BYTES_PER_KB > region_bytes)
    {
        return Err(refuse(format!(
            "request size {kb} KB must be at least 1 KB and fit the region"
        )));
    }
    let mut runner = Runner::prepared(device, options, region_bytes)?;
    let n = runner.requests;
    let mut out = Vec::with_capacity(blocks_kb.len());
    for &kb in blocks_kb {
        let block = u64::from(kb) * BYTES_PER_KB;
        let warmup = warmup_bytes / block;
        let rand_read = runner.point(&spec(IoKind::Read, Pattern::Random, block, 1, n))?;
        let seq_read = runner.point(&spec(IoKind::Read, Pattern::Sequential, block, 1, n))?;
        runner.run(&spec(IoKind::Write, Pattern::Random, block, 1, warmup))?;
        let rand_write = runner.run(&spec(IoKind::Write, Pattern::Random, block, 1, n))?;
        let mut cursor = 0;
        let seq = spec(IoKind::Write, Pattern::Sequential, block, 1, warmup);
        runner.run_from(&seq, &mut cursor)?;
        let seq_write = runner.run_from(&LoopSpec { requests: n, ..seq }, &mut cursor)?;
        // Drain any write-back cache, so the next size's reads do not queue
        // behind this size's writes.
        runner.flush()?;
        out.push(SpeedupPoint {
            block_kb: kb,
            seq_read_iops: seq_read.iops(),
            rand_read_iops: rand_read.iops(),
            seq_write_iops: seq_write.iops(),
            rand_write_iops: rand_write.iops(),
        });
    }
    Ok(out)
}

/// The speed-ups as a fixed-width text table.
pub fn speedups_text_table(device: &str, points: &[SpeedupPoint]) -> String {
    let mut out = format!(
        "device {device}: sequential over random, queue depth 1\n{:>8} {:>10} {:>10} {:>8} {:>10} {:>10} {:>8}\n",
        "block KB", "seq rd/s", "rand rd/s", "read x", "seq wr/s", "rand wr/s", "write x"
    );
    for p in points {
        out.push_str(&format!(
            "{:>8} {:>10.0} {:>10.0} {:>8.2} {:>10.0} {:>10.1} {:>8.1}\n",
            p.block_kb,
            p.seq_read_iops,
            p.rand_read_iops,
            p.read_speedup(),
            p.seq_write_iops,
            p.rand_write_iops,
            p.write_speedup()
        ));
    }
    out
}

impl Characterization {
    /// The figures as a fixed-width text table.
    pub fn to_text_table(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Characterization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "device {}", self.device)?;
        writeln!(f, "sequential, queue depth 1")?;
        writeln!(
            f,
            "{:>8} {:>10} {:>10} {:>9} {:>9}",
            "block KB", "read MB/s", "write MB/s", "read ms", "write ms"
        )?;
        for p in &self.sequential {
            writeln!(
                f,
                "{:>8} {:>10.1} {:>10.1} {:>9.3} {:>9.3}",
                p.block_kb, p.read_mb_s, p.write_mb_s, p.read_latency_ms, p.write_latency_ms
            )?;
        }
        writeln!(f, "random")?;
        writeln!(
            f,
            "{:>8} {:>5} {:>10} {:>10} {:>9} {:>9}",
            "block KB", "depth", "read IOPS", "write IOPS", "read ms", "write ms"
        )?;
        for p in &self.random {
            writeln!(
                f,
                "{:>8} {:>5} {:>10.1} {:>10.1} {:>9.3} {:>9.3}",
                p.block_kb,
                p.queue_depth,
                p.read_iops,
                p.write_iops,
                p.read_latency_ms,
                p.write_latency_ms
            )?;
        }
        Ok(())
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, seedable, and good enough for
/// offsets; the same seed gives the same sequence on every platform.
/// The FTL tests draw their pages from it too.
#[derive(Clone, Debug)]
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, n)` by multiply-shift (bias below 2^-40 for our n).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hdd::HddModel;
    use crate::model::testing::FixedLatency;

    /// Characterize a [`FixedLatency`] device of `latency_ns`: the device
    /// afterwards, and what was measured.
    fn characterize_fixed(
        latency_ns: u64,
        options: CharacterizeOptions,
    ) -> (FixedLatency, Characterization) {
        let mut device = FixedLatency::new(latency_ns);
        let c = characterize(&mut device, &options).unwrap();
        (device, c)
    }

    /// A tiny characterization of a 1 us [`FixedLatency`] device: 10
    /// requests a point, random points at `queue_depth`.
    fn tiny_fixed(queue_depth: u32) -> Characterization {
        let options = CharacterizeOptions {
            requests_per_point: 10,
            queue_depth,
            ..CharacterizeOptions::default()
        };
        characterize_fixed(1_000, options).1
    }

    /// Disks keep no state that preconditioning would change, so the disk
    /// tests skip it to stay quick.
    fn quick() -> CharacterizeOptions {
        CharacterizeOptions {
            precondition: false,
            ..CharacterizeOptions::default()
        }
    }

    fn random_point(c: &Characterization, block_kb: u32, depth: u32) -> &RandomPoint {
        c.random
            .iter()
            .find(|p| p.block_kb == block_kb && p.queue_depth == depth)
            .unwrap()
    }

    fn sequential_point(c: &Characterization, block_kb: u32) -> &SequentialPoint {
        c.sequential
            .iter()
            .find(|p| p.block_kb == block_kb)
            .unwrap()
    }

    /// A fixed-latency device: sequential and random take the same time, so
    /// every speed-up is 1; the same options give the same points, bit for
    /// bit; bad sizes and warm-ups are one-line errors.
    #[test]
    fn speedups_are_deterministic_and_refuse_bad_input() {
        let run = || {
            let mut d = FixedLatency::new(50_000);
            let points = speedups(&mut d, &quick(), &[4, 64], 1 << 20).unwrap();
            assert!(!d.backwards, "CHAR-1");
            points
        };
        let first = run();
        assert_eq!(first, run());
        for p in &first {
            assert!((p.read_speedup() - 1.0).abs() < 1e-9, "{p:?}");
            assert!((p.write_speedup() - 1.0).abs() < 1e-9, "{p:?}");
        }
        let mut d = FixedLatency::new(1);
        for (blocks, warmup, word) in [
            (&[0u32][..], 0, "request size 0 KB"),
            (&[4 << 20][..], 0, "fit the region"),
            (&[4][..], SPEEDUP_WARMUP_BYTES_MAX + 1, "warm-up"),
        ] {
            let err = speedups(&mut d, &quick(), blocks, warmup)
                .unwrap_err()
                .to_string();
            assert!(err.contains(word) && !err.contains('\n'), "{err}");
        }
    }

    fn within(measured: f64, published: f64, fraction: f64) -> bool {
        (measured - published).abs() <= fraction * published
    }

    #[track_caller]
    fn assert_within(measured: f64, published: f64, fraction: f64) {
        assert!(within(measured, published, fraction), "{measured}");
    }

    #[test]
    fn characterize_hdd_2008_random_4k_read_matches_lee2008() {
        let mut disk = HddModel::hdd_2008().unwrap();
        let c = characterize(&mut disk, &quick()).unwrap();
        // lee2008 Table 1: 8.33 ms seek + rotation, plus 4 KB at 110 MB/s.
        let published_ms = 8.33 + 4096.0 / 110e6 * 1e3;
        let p = random_point(&c, 4, 1);
        assert_within(p.read_latency_ms, published_ms, 0.25);
        assert_within(p.read_iops, 1e3 / published_ms, 0.25);
    }

    #[test]
    fn characterize_hdd_2010_random_4k_matches_petrov2010() {
        let mut disk = HddModel::hdd_2010().unwrap();
        let c = characterize(&mut disk, &quick()).unwrap();
        // petrov2010 Table 1: 3.2 ms read, 3.5 ms write at 4 KB; 3.3 / 3.4 at 16 KB.
        let p4 = random_point(&c, 4, 1);
        assert_within(p4.read_latency_ms, 3.2, 0.25);
        assert_within(p4.write_latency_ms, 3.5, 0.25);
        let p16 = random_point(&c, 16, 1);
        assert_within(p16.read_latency_ms, 3.3, 0.25);
        assert_within(p16.write_latency_ms, 3.4, 0.25);
        // A FIFO disk gains nothing from a deeper queue; latency grows with it.
        let q = random_point(&c, 4, QUEUE_DEPTH_DEFAULT);
        assert!(within(q.read_iops, p4.read_iops, 0.1));
        assert!(q.read_latency_ms > 20.0 * p4.read_latency_ms);
    }

    #[test]
    fn characterize_hdd_sequential_mb_s_matches_the_papers() {
        for (disk, published_mb_s) in [(HddModel::hdd_2008(), 110.0), (HddModel::hdd_2010(), 160.0)]
        {
            let mut disk = disk.unwrap();
            let c = characterize(&mut disk, &quick()).unwrap();
            // The track is sized for the sustained rate including one track
            // switch per revolution, so streaming pays one skew per track:
            // hdd-2008 1,004,544 B per 8,333,333 + 806,999 ns = 109.90 MB/s,
            // hdd-2010 704,000 B per 4,000,000 + 404,363 ns = 159.84 MB/s.
            let p = sequential_point(&c, 128);
            assert!(
                within(p.read_mb_s, published_mb_s, 0.03),
                "{} read {}",
                c.device,
                p.read_mb_s
            );
            assert!(
                within(p.write_mb_s, published_mb_s, 0.03),
                "{} write {}",
                c.device,
                p.write_mb_s
            );
            // Streaming: the 8 KB point is as fast as the 128 KB one.
            let small = sequential_point(&c, 8);
            assert!(
                within(small.read_mb_s, p.read_mb_s, 0.1),
                "{} 8 KB {}",
                c.device,
                small.read_mb_s
            );
        }
    }

    #[test]
    fn characterize_is_deterministic() {
        let options = CharacterizeOptions {
            region_bytes: Some(1 << 30),
            requests_per_point: 300,
            ..CharacterizeOptions::default()
        };
        let run = |options: &CharacterizeOptions| {
            let mut disk = HddModel::hdd_2010().unwrap();
            characterize(&mut disk, options).unwrap()
        };
        assert_eq!(run(&options), run(&options));
        let reseeded = CharacterizeOptions {
            seed: options.seed + 1,
            ..options.clone()
        };
        assert_ne!(run(&options).random, run(&reseeded).random);
    }

    #[test]
    fn characterize_closed_loop_keeps_the_queue_full() {
        // 3,200 requests at depth 32 and 0.1 ms each: 100 waves in 10 ms.
        let (device, c) = characterize_fixed(
            100_000,
            CharacterizeOptions {
                requests_per_point: 3_200,
                start_ns: 7,
                ..CharacterizeOptions::default()
            },
        );
        assert!(!device.backwards, "CHAR-1");
        let q = random_point(&c, 4, 32);
        assert!((q.read_iops - 320_000.0).abs() < 1e-6, "{}", q.read_iops);
        assert!((q.write_latency_ms - 0.1).abs() < 1e-12);
        let one = random_point(&c, 128, 1);
        assert!((one.read_iops - 10_000.0).abs() < 1e-6);
        // Sequential 8 KB at depth 1: 8192 bytes per 0.1 ms = 81.92 MB/s.
        let s = sequential_point(&c, 8);
        assert!((s.write_mb_s - 81.92).abs() < 1e-9, "{}", s.write_mb_s);
    }

    #[test]
    fn characterize_json_has_the_agreed_shape() {
        let c = tiny_fixed(4);
        let json = serde_json::to_value(&c).unwrap();
        let keys = |v: &serde_json::Value| {
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        assert_eq!(keys(&json), ["device", "random", "sequential"]);
        assert_eq!(json["device"], "fixed");
        assert_eq!(
            keys(&json["sequential"][0]),
            [
                "block_kb",
                "read_latency_ms",
                "read_mb_s",
                "write_latency_ms",
                "write_mb_s"
            ]
        );
        assert_eq!(
            keys(&json["random"][0]),
            [
                "block_kb",
                "queue_depth",
                "read_iops",
                "read_latency_ms",
                "write_iops",
                "write_latency_ms"
            ]
        );
        assert_eq!(json["sequential"].as_array().unwrap().len(), 7);
        assert_eq!(json["random"].as_array().unwrap().len(), 12);
        let back: Characterization = serde_json::from_value(json).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn characterize_text_table_lists_every_point() {
        let c = tiny_fixed(1);
        let text = c.to_text_table();
        assert!(text.starts_with("device fixed\n"));
        assert!(text.contains("read MB/s") && text.contains("write IOPS"));
        // Title, 2 headers, 2 section titles, 7 sequential and 6 random rows.
        assert_eq!(text.lines().count(), 1 + 2 + 2 + 7 + 6);
    }

    #[test]
    fn characterize_refuses_bad_options() {
        let mut disk = HddModel::hdd_2010().unwrap();
        let capacity = disk.capacity_bytes();
        let bad = [
            CharacterizeOptions {
                queue_depth: 0,
                ..quick()
            },
            CharacterizeOptions {
                queue_depth: QUEUE_DEPTH_MAX + 1,
                ..quick()
            },
            CharacterizeOptions {
                requests_per_point: 0,
                ..quick()
            },
            CharacterizeOptions {
                region_bytes: Some(capacity + 1),
                ..quick()
            },
            CharacterizeOptions {
                region_bytes: Some(4096),
                ..quick()
            },
            CharacterizeOptions {
                precondition_region_multiple: PRECONDITION_REGION_MULTIPLE_MAX + 1,
                ..quick()
            },
        ];
        for options in bad {
            let err = characterize(&mut disk, &options);
            assert!(
                matches!(err, Err(DeviceError::Geometry { .. })),
                "{options:?}"
            );
        }
    }

    /// `cargo test -p flashlab-devices characterize_print -- --ignored --nocapture`
    /// prints the full default characterization of both disk presets.
    #[test]
    #[ignore = "prints the preset tables; run by hand"]
    fn characterize_print_disk_presets() {
        for disk in [HddModel::hdd_2008(), HddModel::hdd_2010()] {
            let mut disk = disk.unwrap();
            for p in disk.describe() {
                println!("{:<20} {:<28} {}", p.name, p.value, p.source);
            }
            let started = std::time::Instant::now();
            let c = characterize(&mut disk, &CharacterizeOptions::default()).unwrap();
            println!("{c}({:.2} s wall)\n", started.elapsed().as_secs_f64());
        }
    }

    #[test]
    fn characterize_offsets_are_uniform_and_aligned() {
        let mut rng = SplitMix64(SEED_DEFAULT);
        let buckets = 16;
        let mut counts = [0u32; 16];
        for _ in 0..16_000 {
            counts[rng.below(buckets) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (800..1200).contains(&c)),
            "{counts:?}"
        );
    }
}
