//! # An I/O scheduler stage: sort and merge queued writes
//!
//! Linux does not hand a database's writes to the disk one by one. Buffered
//! writes (wang2010 ran its DBMSs on EXT2 with synchronous, not direct, I/O)
//! wait in the block layer's queue, and the elevator (Anticipatory, which
//! wang2010 ran, or deadline) keeps that queue sorted by sector and merges a
//! request into its neighbour when one ends where the other begins, up to the
//! queue's largest request (`max_sectors_kb`, 512 KB by default) and its
//! depth (`nr_requests`, 128). What reaches the device is fewer, larger,
//! ascending requests: the runs of wang2010 Figure 10(a). On a disk that
//! saves seeks; on an SSD whose random writes cost merges (`ssd-2008-poor-
//! random`), it turns scattered page writes into short sequential runs.
//!
//! This module is that stage, and nothing else (no read anticipation, no
//! deadlines: reads pass straight through):
//!
//! - [`plan`] is the pure part: given a batch of queued writes (offset,
//!   length), it returns the requests the device sees, ascending by offset,
//!   each covering adjacent writes whose sum stays within
//!   [`SchedulerConfig::merged_request_bytes_max`]. A batch larger than
//!   [`SchedulerConfig::queue_depth`] is taken in queue-sized pieces, in
//!   arrival order, as a full queue would be dispatched.
//! - [`submit_batch`] writes a batch through [`plan`]: each merged request is
//!   one [`Device::write`] of its parts' data laid end to end, so the medium
//!   holds exactly what the parts would have left there.
//!
//! The caller is the queue: a buffer pool's write-back (or a checkpoint)
//! gathers the dirty pages it is about to write and hands them over as one
//! batch. The stage keeps no state and takes no lock, so it is safe in the
//! simulated world, where a task must not hold a host lock while it sleeps
//! in virtual time for its I/O. Overlapping writes in one batch are refused
//! with a one-line error (a page written twice in one write-back is a
//! caller's bug, and the order of the two would matter).
//!
//! Deterministic: the plan depends on the batch only (ties in offset cannot
//! happen, since overlaps are refused).
//!
//! Invariants (SCHED-n):
//! 1. Every byte of every queued write is written exactly once, at its
//!    offset, with its data.
//! 2. No merged request is larger than `merged_request_bytes_max`, unless a
//!    single write is (it is passed on whole, never split).
//! 3. The requests of one dispatch are in ascending, non-overlapping order.

use crate::device::Device;
use crate::error::DeviceError;

/// Linux's default `max_sectors_kb`: 512 KB per request.
pub const MERGED_REQUEST_BYTES_MAX_DEFAULT: u64 = 512 << 10;
/// The largest merged request accepted (16 MB, as `BLOCK_KB_MAX`).
pub const MERGED_REQUEST_BYTES_LIMIT: u64 = 16 << 20;
/// Linux's default `nr_requests`: 128 requests in the queue.
pub const QUEUE_DEPTH_DEFAULT: usize = 128;
/// The deepest queue accepted.
pub const QUEUE_DEPTH_LIMIT: usize = 1 << 16;

/// The limits of the stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// Largest request a merge may build, in bytes (`max_sectors_kb`).
    pub merged_request_bytes_max: u64,
    /// Writes the queue holds before it must dispatch (`nr_requests`).
    pub queue_depth: usize,
}

impl Default for SchedulerConfig {
    fn default() -> SchedulerConfig {
        SchedulerConfig {
            merged_request_bytes_max: MERGED_REQUEST_BYTES_MAX_DEFAULT,
            queue_depth: QUEUE_DEPTH_DEFAULT,
        }
    }
}

impl SchedulerConfig {
    /// Check both limits; a one-line error names the one broken.
    pub fn validate(&self, device: &str) -> Result<(), DeviceError> {
        let refuse = |problem: String| DeviceError::Geometry {
            device: device.to_string(),
            problem: format!("I/O scheduler: {problem}"),
        };
        if self.merged_request_bytes_max == 0
            || self.merged_request_bytes_max > MERGED_REQUEST_BYTES_LIMIT
        {
            return Err(refuse(format!(
                "merged request size {} bytes must be 1 to {MERGED_REQUEST_BYTES_LIMIT} (MERGED_REQUEST_BYTES_LIMIT)",
                self.merged_request_bytes_max
            )));
        }
        if self.queue_depth == 0 || self.queue_depth > QUEUE_DEPTH_LIMIT {
            return Err(refuse(format!(
                "queue depth {} must be 1 to {QUEUE_DEPTH_LIMIT} (QUEUE_DEPTH_LIMIT)",
                self.queue_depth
            )));
        }
        Ok(())
    }
}

/// One request the device sees: a run of adjacent queued writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergedWrite {
    pub offset_bytes: u64,
    pub len_bytes: u64,
    /// Indices of the queued writes it covers, in offset order.
    pub parts: Vec<usize>,
}

/// The requests a batch of writes `(offset_bytes, len_bytes)` becomes (see
/// the module documentation). Refuses overlapping writes within one queue
/// piece and a bad configuration.
pub fn plan(
    device: &str,
    writes: &[(u64, u64)],
    config: &SchedulerConfig,
) -> Result<Vec<MergedWrite>, DeviceError> {
    config.validate(device)?;
    let mut out = Vec::new();
    for (piece, chunk) in writes.chunks(config.queue_depth).enumerate() {
        let base = piece * config.queue_depth;
        let mut order: Vec<usize> = (0..chunk.len()).collect();
        order.sort_by_key(|&i| chunk[i].0);
        let mut current: Option<MergedWrite> = None;
        for i in order {
            let (offset, len) = chunk[i];
            if let Some(m) = &current
                && offset < m.offset_bytes + m.len_bytes
            {
                return Err(DeviceError::Refused {
                    device: device.to_string(),
                    problem: format!(
                        "I/O scheduler: queued writes overlap at offset {offset} (a batch may write each byte once)"
                    ),
                });
            }
            match &mut current {
                Some(m)
                    if offset == m.offset_bytes + m.len_bytes
                        && m.len_bytes + len <= config.merged_request_bytes_max =>
                {
                    m.len_bytes += len;
                    m.parts.push(base + i);
                }
                _ => {
                    if let Some(done) = current.take() {
                        out.push(done);
                    }
                    current = Some(MergedWrite {
                        offset_bytes: offset,
                        len_bytes: len,
                        parts: vec![base + i],
                    });
                }
            }
        }
        out.extend(current);
    }
    Ok(out)
}

/// What a dispatch sent to the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DispatchStats {
    /// Writes queued.
    pub writes: u64,
    /// Requests the device saw.
    pub requests: u64,
}

/// Write `batch` (offset, data) to `device` through [`plan`]: sorted, and
/// adjacent writes merged into one request each (SCHED-1..3).
pub fn submit_batch(
    device: &dyn Device,
    batch: &[(u64, &[u8])],
    config: &SchedulerConfig,
) -> Result<DispatchStats, DeviceError> {
    let extents: Vec<(u64, u64)> = batch.iter().map(|(o, d)| (*o, d.len() as u64)).collect();
    let merged = plan(device.name(), &extents, config)?;
    let mut buf = Vec::new();
    for m in &merged {
        if let [only] = m.parts.as_slice() {
            device.write(m.offset_bytes, batch[*only].1)?;
            continue;
        }
        buf.clear();
        for &i in &m.parts {
            buf.extend_from_slice(batch[i].1);
        }
        device.write(m.offset_bytes, &buf)?;
    }
    Ok(DispatchStats {
        writes: batch.len() as u64,
        requests: merged.len() as u64,
    })
}

#[cfg(test)]
mod tests;
