//! Characterizing a real file on this machine, in wall-clock time.
//!
//! `flashlab characterize --file PATH` measures what the machine's own
//! storage does, with the same points as the models' characterization:
//! sequential MB/s and latency for 8..512 KB blocks, random IOPS and latency
//! for 4..128 KB at queue depth 1 and a deeper queue (one thread per
//! outstanding request), plus the latency of a 4 KB write followed by
//! `fdatasync`, which bounds a one-client commit rate. The file is opened
//! with O_DIRECT where the file system allows it, so the page cache does not
//! answer reads; where it does not (tmpfs), the result says so.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use flashlab_devices::characterize::{Characterization, RandomPoint, SequentialPoint};
use flashlab_devices::file::{FileDevice, FileOptions};
use flashlab_devices::{Device, DeviceError};
use serde::Serialize;

/// Sequential block sizes (KB), as for the models.
pub const SEQ_BLOCKS_KB: [u32; 7] = [8, 16, 32, 64, 128, 256, 512];
/// Random block sizes (KB), as for the models.
pub const RAND_BLOCKS_KB: [u32; 6] = [4, 8, 16, 32, 64, 128];
/// Default size of the test file.
pub const FILE_BYTES_DEFAULT: u64 = 256 << 20;
/// Most time spent on one point.
pub const POINT_DURATION_MAX: Duration = Duration::from_millis(400);
/// Most requests per point.
pub const POINT_REQUESTS_MAX: u64 = 20_000;
/// fdatasync samples.
pub const SYNC_SAMPLES: u32 = 200;

/// The result: the usual figures, the fdatasync latency, and how the file
/// was opened.
#[derive(Clone, Debug, Serialize)]
pub struct FileCharacterization {
    #[serde(flatten)]
    pub figures: Characterization,
    /// Mean latency of a 4 KB write followed by fdatasync.
    pub fdatasync_latency_ms: f64,
    pub direct_io: bool,
}

/// Options of a file characterization.
#[derive(Clone, Debug)]
pub struct FileOptionsChar {
    pub file_bytes: u64,
    pub queue_depth: u32,
    pub seed: u64,
}

/// Characterize a file at `path` (created, filled, measured, removed).
pub fn characterize_file(
    path: &Path,
    options: &FileOptionsChar,
) -> Result<FileCharacterization, DeviceError> {
    let (device, direct_io) = match FileDevice::create_preallocated(
        path,
        options.file_bytes,
        FileOptions { direct: true },
    ) {
        Ok(d) => (d, true),
        Err(_) => (
            FileDevice::create_preallocated(path, options.file_bytes, FileOptions::default())?,
            false,
        ),
    };
    let device = Arc::new(device);
    let result = measure(&device, options, direct_io);
    let _ = std::fs::remove_file(path);
    result
}

fn measure(
    device: &Arc<FileDevice>,
    options: &FileOptionsChar,
    direct_io: bool,
) -> Result<FileCharacterization, DeviceError> {
    fill(device)?;
    let mut sequential = Vec::new();
    for kb in SEQ_BLOCKS_KB {
        let read = run_point(device, kb, 1, false, false, options.seed)?;
        let write = run_point(device, kb, 1, false, true, options.seed)?;
        sequential.push(SequentialPoint {
            block_kb: kb,
            read_mb_s: read.mb_s(kb),
            write_mb_s: write.mb_s(kb),
            read_latency_ms: read.latency_ms(),
            write_latency_ms: write.latency_ms(),
        });
    }
    let mut random = Vec::new();
    for depth in [1, options.queue_depth.max(1)] {
        for kb in RAND_BLOCKS_KB {
            let read = run_point(device, kb, depth, true, false, options.seed)?;
            let write = run_point(device, kb, depth, true, true, options.seed)?;
            random.push(RandomPoint {
                block_kb: kb,
                queue_depth: depth,
                read_iops: read.iops(),
                write_iops: write.iops(),
                read_latency_ms: read.latency_ms(),
                write_latency_ms: write.latency_ms(),
            });
        }
    }
    Ok(FileCharacterization {
        figures: Characterization {
            device: device.name().to_string(),
            sequential,
            random,
        },
        fdatasync_latency_ms: sync_latency_ms(device)?,
        direct_io,
    })
}

fn fill(device: &FileDevice) -> Result<(), DeviceError> {
    let chunk = vec![0x5au8; 1 << 20];
    let mut at = 0;
    while at + chunk.len() as u64 <= device.capacity_bytes() {
        device.write(at, &chunk)?;
        at += chunk.len() as u64;
    }
    device.flush()
}

struct PointResult {
    requests: u64,
    elapsed: Duration,
    latency_ns_total: u64,
}

impl PointResult {
    fn iops(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn mb_s(&self, block_kb: u32) -> f64 {
        self.iops() * f64::from(block_kb) * 1024.0 / 1e6
    }

    fn latency_ms(&self) -> f64 {
        self.latency_ns_total as f64 / self.requests.max(1) as f64 / 1e6
    }
}

/// Run one point with `depth` threads, each issuing requests back to back.
fn run_point(
    device: &Arc<FileDevice>,
    block_kb: u32,
    depth: u32,
    random: bool,
    write: bool,
    seed: u64,
) -> Result<PointResult, DeviceError> {
    let block = u64::from(block_kb) * 1024;
    let blocks = (device.capacity_bytes() / block).max(1);
    let issued = Arc::new(AtomicU64::new(0));
    let latency = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let threads: Vec<_> = (0..depth)
        .map(|t| {
            let (device, issued, latency) = (device.clone(), issued.clone(), latency.clone());
            std::thread::spawn(move || -> Result<(), DeviceError> {
                let mut buf = vec![0xa5u8; block as usize];
                let mut state = seed ^ (u64::from(t) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                loop {
                    let n = issued.fetch_add(1, Ordering::Relaxed);
                    if n >= POINT_REQUESTS_MAX || started.elapsed() >= POINT_DURATION_MAX {
                        return Ok(());
                    }
                    let index = if random {
                        splitmix(&mut state) % blocks
                    } else {
                        n % blocks
                    };
                    let t0 = Instant::now();
                    if write {
                        device.write(index * block, &buf)?;
                    } else {
                        device.read(index * block, &mut buf)?;
                    }
                    latency.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().map_err(|_| DeviceError::Io {
            device: device.name().to_string(),
            op: "characterize",
            source: std::io::Error::other("worker thread panicked"),
        })??;
    }
    let elapsed = started.elapsed();
    let requests = issued
        .load(Ordering::Relaxed)
        .min(POINT_REQUESTS_MAX + u64::from(depth))
        - u64::from(depth);
    Ok(PointResult {
        requests: requests.max(1),
        elapsed,
        latency_ns_total: latency.load(Ordering::Relaxed),
    })
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Mean latency of a 4 KB write plus fdatasync, at the end of the file
/// region like a log append.
fn sync_latency_ms(device: &FileDevice) -> Result<f64, DeviceError> {
    let block = 4096u64;
    let buf = vec![1u8; block as usize];
    let started = Instant::now();
    for i in 0..u64::from(SYNC_SAMPLES) {
        device.write((i * block) % device.capacity_bytes(), &buf)?;
        device.flush()?;
    }
    Ok(started.elapsed().as_secs_f64() * 1e3 / f64::from(SYNC_SAMPLES))
}
