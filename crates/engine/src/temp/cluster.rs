//! # Clusters: the unit of temp I/O, their owners, and the I/O workers
//!
//! Every temp write and read moves one *cluster* (2 KB to 256 KB, a multiple
//! of the device sector). A cluster starts with a 40-byte header
//! ([`ClusterHeader`], laid out in `docs/FORMAT.md`): magic, a CRC-32C of
//! everything after the CRC field, the payload length, the tuples starting
//! in the cluster, a link to the previous cluster of the same chain (hash
//! partitions use it; runs set it too), and, in a run, the forecasting key:
//! the first 16 bytes of the normalised key of the last tuple starting in
//! the cluster, which tells a
//! merge when the run's next cluster will be needed (Knuth's forecasting,
//! vol. 3 5.4.6; see `forecast.rs`). The payload follows.
//!
//! [`Extents`] owns what an operator allocated and frees it when dropped
//! (TEMP-2), so an error or a panic anywhere frees exactly what success
//! would. Owners wait for their in-flight I/O before they free, so a late
//! write never lands in a cluster that has changed hands.
//!
//! [`IoPool`] runs asynchronous cluster I/O on worker tasks of the runtime
//! (threads in the real world, simulated tasks otherwise): write-behind for
//! run and partition writes, and the forecast reads of merges and partition
//! scans, several in flight at once (one worker task per request in flight,
//! so the device sees the queue depth). Each request returns a [`Ticket`] to
//! wait on (or to poll), which gives the buffer back.

use std::sync::Arc;

use flashlab_runtime::{JoinHandle, Receiver, Rt, Sender, channel};

use super::space::TempSpace;
use super::{Result, TempError};

/// Bytes of the header at the start of every cluster.
pub const CLUSTER_HEADER_BYTES: usize = 40;
/// Bytes of a normalised key a cluster header keeps for forecasting.
pub const FORECAST_KEY_BYTES: usize = 16;
/// "FLTC" read as a little-endian u32.
pub const CLUSTER_MAGIC: u32 = u32::from_le_bytes(*b"FLTC");
/// The link of the first cluster of a chain.
pub const NO_LINK: u64 = u64::MAX;
/// Cluster writes an operator keeps in flight behind the cluster it is
/// filling (write-behind), at the fewest. Two let a device overlap one
/// request's transfer with the next one's work.
pub const WRITE_BEHIND_CLUSTERS: usize = 2;
/// Output buffers of an operator that writes to the temp space with the
/// fewest writes behind: the one being filled and the ones written behind it.
pub const OUTPUT_CLUSTERS: usize = WRITE_BEHIND_CLUSTERS + 1;
/// Bytes a run generator keeps written behind the cluster it fills, when
/// its memory allows ([`run_write_behind`]): with small clusters, enough
/// requests in flight for every die of a flash device to program one
/// (64 KB is 32 of the 2008 SSD's 2 KB flash pages, four for each of its
/// eight planes), as the merge keeps several reads in flight.
pub const RUN_WRITE_BEHIND_BYTES: usize = 64 << 10;
/// Most cluster writes a run generator keeps in flight (64 KB of 2 KB
/// clusters).
pub const RUN_WRITE_BEHIND_CLUSTERS_MAX: usize = 32;
/// The share of an operator's memory its run write-behind may take, at most
/// (one part in this many).
pub const RUN_WRITE_BEHIND_MEMORY_SHARE: usize = 8;

/// Cluster writes run generation keeps in flight behind the cluster it
/// fills, with `memory_bytes` of memory and clusters of `cluster_bytes`:
/// [`RUN_WRITE_BEHIND_BYTES`] (or an eighth of memory, if less) of
/// clusters, no fewer than [`WRITE_BEHIND_CLUSTERS`] and no more than
/// [`RUN_WRITE_BEHIND_CLUSTERS_MAX`].
pub fn run_write_behind(memory_bytes: usize, cluster_bytes: usize) -> usize {
    let bytes = RUN_WRITE_BEHIND_BYTES.min(memory_bytes / RUN_WRITE_BEHIND_MEMORY_SHARE);
    (bytes / cluster_bytes.max(1)).clamp(WRITE_BEHIND_CLUSTERS, RUN_WRITE_BEHIND_CLUSTERS_MAX)
}

/// The header of one cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterHeader {
    /// Payload bytes used after the header.
    pub payload_bytes: u32,
    /// Tuples whose first byte is in this cluster.
    pub tuples: u32,
    /// Offset of the previous cluster of the same chain, or [`NO_LINK`].
    pub link: u64,
    /// Runs: the first [`FORECAST_KEY_BYTES`] of the normalised key of the
    /// last tuple starting in this cluster (the last one started before it
    /// if none does), as [`forecast_key`] gives them; 0 in partition pages.
    /// A scheduling hint only: read order depends on it, output never does.
    pub forecast: u128,
}

impl ClusterHeader {
    /// Write the header into `cluster` and seal it with its CRC.
    pub fn seal(&self, cluster: &mut [u8]) {
        cluster[0..4].copy_from_slice(&CLUSTER_MAGIC.to_le_bytes());
        cluster[8..12].copy_from_slice(&self.payload_bytes.to_le_bytes());
        cluster[12..16].copy_from_slice(&self.tuples.to_le_bytes());
        cluster[16..24].copy_from_slice(&self.link.to_le_bytes());
        cluster[24..40].copy_from_slice(&self.forecast.to_be_bytes());
        let crc = crc32c::crc32c(&cluster[8..]);
        cluster[4..8].copy_from_slice(&crc.to_le_bytes());
    }

    /// Check a cluster read from `offset_bytes` and decode its header (TEMP-3).
    pub fn open(cluster: &[u8], offset_bytes: u64) -> Result<ClusterHeader> {
        let corrupt = |problem: String| TempError::Corrupt {
            offset_bytes,
            problem,
        };
        if cluster.len() < CLUSTER_HEADER_BYTES {
            return Err(corrupt(format!("{} bytes is no cluster", cluster.len())));
        }
        let u32_at =
            |at: usize| u32::from_le_bytes(cluster[at..at + 4].try_into().unwrap_or([0; 4]));
        if u32_at(0) != CLUSTER_MAGIC {
            return Err(corrupt(format!("bad magic {:#010x}", u32_at(0))));
        }
        let crc = crc32c::crc32c(&cluster[8..]);
        if crc != u32_at(4) {
            return Err(corrupt(format!(
                "CRC {crc:#010x} does not match the stored {:#010x}",
                u32_at(4)
            )));
        }
        let header = ClusterHeader {
            payload_bytes: u32_at(8),
            tuples: u32_at(12),
            link: u64::from_le_bytes(cluster[16..24].try_into().unwrap_or([0; 8])),
            forecast: forecast_of(cluster),
        };
        if header.payload_bytes as usize > cluster.len() - CLUSTER_HEADER_BYTES {
            return Err(corrupt(format!(
                "payload of {} bytes in a {}-byte cluster",
                header.payload_bytes,
                cluster.len()
            )));
        }
        Ok(header)
    }
}

/// The forecasting key of a cluster as read, unchecked (see
/// [`ClusterHeader::forecast`]): a merge peeks at it when a read arrives,
/// before the cluster is consumed and its CRC checked.
pub fn forecast_of(cluster: &[u8]) -> u128 {
    cluster
        .get(24..40)
        .and_then(|b| b.try_into().ok())
        .map(u128::from_be_bytes)
        .unwrap_or(0)
}

/// The forecasting key of a normalised key: its first
/// [`FORECAST_KEY_BYTES`], zero-padded, read big-endian (so keys in
/// byte order give forecasting keys in numeric order).
#[inline]
pub fn forecast_key(key: &[u8]) -> u128 {
    let mut b = [0u8; FORECAST_KEY_BYTES];
    let n = key.len().min(FORECAST_KEY_BYTES);
    b[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(b)
}

/// Payload bytes of a cluster of `cluster_bytes`.
pub fn payload_capacity(cluster_bytes: usize) -> usize {
    cluster_bytes - CLUSTER_HEADER_BYTES
}

/// Extents of one temp space owned by one operator structure; freed on drop.
pub struct Extents {
    space: TempSpace,
    /// (offset, length), in allocation order; contiguous allocations merge.
    list: Vec<(u64, u64)>,
    bytes: u64,
}

impl Extents {
    pub fn new(space: &TempSpace) -> Extents {
        Extents {
            space: space.clone(),
            list: Vec::new(),
            bytes: 0,
        }
    }

    /// Allocate `len_bytes` more and return its offset.
    pub fn allocate(&mut self, len_bytes: u64) -> Result<u64> {
        let offset = self.space.allocate(len_bytes)?;
        match self.list.last_mut() {
            Some((start, len)) if *start + *len == offset => *len += len_bytes,
            _ => self.list.push((offset, len_bytes)),
        }
        self.bytes += len_bytes;
        Ok(offset)
    }

    /// Bytes owned.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The owned extents, in allocation order.
    pub fn list(&self) -> &[(u64, u64)] {
        &self.list
    }

    /// Offsets of the clusters of `cluster_bytes` the extents hold, in
    /// allocation order.
    pub fn clusters(&self, cluster_bytes: usize) -> impl Iterator<Item = u64> + '_ {
        let step = cluster_bytes as u64;
        self.list
            .iter()
            .flat_map(move |&(start, len)| (0..len / step).map(move |i| start + i * step))
    }

    /// Free everything now.
    pub fn release(&mut self) {
        for (offset, len) in self.list.drain(..) {
            self.space.free(offset, len);
        }
        self.bytes = 0;
    }

    pub fn space(&self) -> &TempSpace {
        &self.space
    }
}

impl Drop for Extents {
    fn drop(&mut self) {
        self.release();
    }
}

/// What a finished request gives back: the buffer and the outcome.
pub struct Done {
    pub buf: Vec<u8>,
    pub result: Result<()>,
}

/// A request in flight.
pub struct Ticket {
    reply: Receiver<Done>,
    /// The reply, once [`Ticket::poll`] has seen it.
    done: Option<Done>,
}

impl Ticket {
    /// Wait for the request to finish.
    pub fn wait(mut self) -> Done {
        if let Some(done) = self.done.take() {
            return done;
        }
        self.reply.recv().unwrap_or_else(|| Done {
            buf: Vec::new(),
            result: Err(TempError::Consumer("temp I/O worker ended early".into())),
        })
    }

    /// The finished request, if it has finished, without waiting.
    pub fn poll(&mut self) -> Option<&Done> {
        if self.done.is_none() {
            self.done = self.reply.try_recv();
        }
        self.done.as_ref()
    }
}

enum Op {
    Read,
    Write,
}

struct Job {
    op: Op,
    offset_bytes: u64,
    buf: Vec<u8>,
    reply: Sender<Done>,
}

/// Worker tasks doing cluster I/O for one operator.
pub struct IoPool {
    jobs: Option<Sender<Job>>,
    workers: Vec<JoinHandle<()>>,
}

/// Requests one pool queues at most before a submitter waits.
const IO_QUEUE_MAX: usize = 4096;

impl IoPool {
    /// A pool of `workers` tasks (at least one) on `space`.
    pub fn new(space: &TempSpace, workers: usize) -> IoPool {
        let rt = Rt::current();
        let (tx, rx) = channel::<Job>(IO_QUEUE_MAX);
        let rx = Arc::new(rx);
        let workers = (0..workers.max(1))
            .map(|i| {
                let rx = rx.clone();
                let space = space.clone();
                rt.spawn(&format!("temp-io-{i}"), move || {
                    while let Some(job) = rx.recv() {
                        let mut buf = job.buf;
                        let result = match job.op {
                            Op::Read => space.read(job.offset_bytes, &mut buf),
                            Op::Write => space.write(job.offset_bytes, &buf),
                        };
                        let _ = job.reply.send(Done { buf, result });
                    }
                })
            })
            .collect();
        IoPool {
            jobs: Some(tx),
            workers,
        }
    }

    fn submit(&self, op: Op, offset_bytes: u64, buf: Vec<u8>) -> Ticket {
        let (reply, rx) = channel(1);
        let job = Job {
            op,
            offset_bytes,
            buf,
            reply,
        };
        if let Some(jobs) = &self.jobs
            && let Err(job) = jobs.send(job)
        {
            let _ = job.reply.send(Done {
                buf: job.buf,
                result: Err(TempError::Consumer("temp I/O pool closed".into())),
            });
        }
        Ticket {
            reply: rx,
            done: None,
        }
    }

    /// Write `buf` at `offset_bytes` in the background.
    pub fn write(&self, offset_bytes: u64, buf: Vec<u8>) -> Ticket {
        self.submit(Op::Write, offset_bytes, buf)
    }

    /// Read `buf.len()` bytes at `offset_bytes` in the background.
    pub fn read(&self, offset_bytes: u64, buf: Vec<u8>) -> Ticket {
        self.submit(Op::Read, offset_bytes, buf)
    }
}

impl Drop for IoPool {
    fn drop(&mut self) {
        self.jobs = None;
        for worker in self.workers.drain(..) {
            worker.join();
        }
    }
}
