//! # Sorted runs
//!
//! A run is a stream of tuples in key order, cut into clusters and written
//! sequentially: [`RunWriter`] fills one cluster buffer while the previous
//! ones are being written (write-behind through the operator's [`IoPool`],
//! as many writes in flight as the writer was given), allocating each cluster from the temp space as
//! it is sealed, so a run written alone lands on consecutive clusters.
//! Tuples are stored back to back and may span clusters; a run of tuples of
//! one fixed length stores no lengths, otherwise each tuple is preceded by
//! its length as a little-endian u32 (`docs/FORMAT.md`).
//!
//! Each cluster's header carries the forecasting key: the first 16 bytes of
//! the key of the last tuple starting in it. When a merge has consumed up to that key, the
//! run's next cluster is needed; a merge compares these keys across its runs
//! to issue reads in the order they will be needed (`forecast.rs`).
//!
//! [`RunReader`] reads a run back cluster by cluster, checking each
//! cluster's CRC (TEMP-3); clusters a merge issued ahead are consumed in run
//! order from a queue, the others are read when needed. It owns the run, so
//! the run's clusters are freed when the reader is dropped.

use std::collections::VecDeque;
use std::sync::Arc;

use super::cluster::{
    CLUSTER_HEADER_BYTES, ClusterHeader, Extents, IoPool, NO_LINK, Ticket, forecast_key,
    forecast_of, payload_capacity,
};
use super::cpu::CpuMeter;
use super::space::TempSpace;
use super::tuple::{SortKey, TUPLE_BYTES_MAX, key_prefix};
use super::{Result, TempError};

/// Bytes of the length before each tuple of a variable-length run.
pub const LENGTH_PREFIX_BYTES: usize = 4;

/// A finished run: its clusters (freed on drop) and what it holds.
pub struct Run {
    pub(crate) extents: Extents,
    pub tuples: u64,
    pub clusters: u64,
    /// Tuple bytes (with length prefixes) in the run.
    pub stream_bytes: u64,
    pub(crate) cluster_bytes: usize,
    pub(crate) fixed_len: Option<usize>,
}

impl Run {
    /// Bytes of temp space the run occupies.
    pub fn temp_bytes(&self) -> u64 {
        self.extents.bytes()
    }
}

/// Writes one run.
pub struct RunWriter {
    pool: Arc<IoPool>,
    extents: Extents,
    cluster_bytes: usize,
    fixed_len: Option<usize>,
    /// The cluster being filled (header space included).
    buf: Vec<u8>,
    fill: usize,
    started_in_cluster: u32,
    /// Forecasting key of the last tuple started.
    last_forecast: u128,
    link: u64,
    spare: Vec<Vec<u8>>,
    in_flight: VecDeque<Ticket>,
    /// Cluster writes in flight behind the one being filled.
    write_behind: usize,
    tuples: u64,
    clusters: u64,
    stream_bytes: u64,
}

impl RunWriter {
    /// A writer of clusters of `cluster_bytes` that keeps up to
    /// `write_behind` of them in flight behind the one it fills (0: each
    /// written in place before the next is filled).
    pub fn new(
        space: &TempSpace,
        pool: &Arc<IoPool>,
        cluster_bytes: usize,
        fixed_len: Option<usize>,
        write_behind: usize,
    ) -> RunWriter {
        RunWriter {
            pool: pool.clone(),
            extents: Extents::new(space),
            cluster_bytes,
            fixed_len,
            buf: vec![0u8; cluster_bytes],
            fill: 0,
            started_in_cluster: 0,
            last_forecast: 0,
            link: NO_LINK,
            spare: Vec::new(),
            in_flight: VecDeque::new(),
            write_behind,
            tuples: 0,
            clusters: 0,
            stream_bytes: 0,
        }
    }

    /// Append one tuple whose normalised key is `key` (its start becomes
    /// the cluster's forecasting key, [`forecast_key`]).
    pub fn push(&mut self, tuple: &[u8], key: &[u8], cpu: &mut CpuMeter) -> Result<()> {
        match self.fixed_len {
            Some(len) if len != tuple.len() => {
                return Err(TempError::Tuple(format!(
                    "a tuple of {} bytes in an input of {len}-byte tuples",
                    tuple.len()
                )));
            }
            None if tuple.len() > TUPLE_BYTES_MAX => {
                return Err(TempError::Tuple(format!(
                    "{} bytes exceed the {TUPLE_BYTES_MAX}-byte limit",
                    tuple.len()
                )));
            }
            _ => {}
        }
        if self.fill == payload_capacity(self.cluster_bytes) {
            self.seal(cpu)?;
        }
        self.started_in_cluster += 1;
        self.last_forecast = forecast_key(key);
        if self.fixed_len.is_none() {
            self.append(&(tuple.len() as u32).to_le_bytes(), cpu)?;
        }
        self.append(tuple, cpu)?;
        self.tuples += 1;
        Ok(())
    }

    fn append(&mut self, mut bytes: &[u8], cpu: &mut CpuMeter) -> Result<()> {
        let capacity = payload_capacity(self.cluster_bytes);
        self.stream_bytes += bytes.len() as u64;
        while !bytes.is_empty() {
            if self.fill == capacity {
                self.seal(cpu)?;
            }
            let n = bytes.len().min(capacity - self.fill);
            let at = CLUSTER_HEADER_BYTES + self.fill;
            self.buf[at..at + n].copy_from_slice(&bytes[..n]);
            self.fill += n;
            bytes = &bytes[n..];
        }
        Ok(())
    }

    /// Write the current cluster (write-behind) and start a new one.
    fn seal(&mut self, cpu: &mut CpuMeter) -> Result<()> {
        // The work of filling this cluster is done before it can be written.
        cpu.settle();
        let offset = self.extents.allocate(self.cluster_bytes as u64)?;
        ClusterHeader {
            payload_bytes: self.fill as u32,
            tuples: self.started_in_cluster,
            link: self.link,
            forecast: self.last_forecast,
        }
        .seal(&mut self.buf);
        let next = match self.spare.pop() {
            Some(b) => b,
            None if self.in_flight.len() >= self.write_behind => {
                let done = self.in_flight.pop_front().map(Ticket::wait);
                match done {
                    Some(done) => {
                        done.result?;
                        done.buf
                    }
                    None => vec![0u8; self.cluster_bytes],
                }
            }
            None => vec![0u8; self.cluster_bytes],
        };
        let mut full = std::mem::replace(&mut self.buf, next);
        self.buf.fill(0);
        if self.write_behind == 0 {
            self.extents.space().write(offset, &full)?;
            full.fill(0);
            self.spare.push(full);
        } else {
            self.in_flight.push_back(self.pool.write(offset, full));
        }
        self.link = offset;
        self.fill = 0;
        self.started_in_cluster = 0;
        self.clusters += 1;
        Ok(())
    }

    /// Write what is buffered, wait for every write, and hand the run over.
    pub fn finish(mut self, cpu: &mut CpuMeter) -> Result<Run> {
        if self.fill > 0 {
            self.seal(cpu)?;
        }
        cpu.settle();
        while let Some(ticket) = self.in_flight.pop_front() {
            ticket.wait().result?;
        }
        let space = self.extents.space().clone();
        Ok(Run {
            extents: std::mem::replace(&mut self.extents, Extents::new(&space)),
            tuples: self.tuples,
            clusters: self.clusters,
            stream_bytes: self.stream_bytes,
            cluster_bytes: self.cluster_bytes,
            fixed_len: self.fixed_len,
        })
    }

    pub fn tuples(&self) -> u64 {
        self.tuples
    }
}

impl Drop for RunWriter {
    fn drop(&mut self) {
        // Wait for writes in flight before the extents are freed (TEMP-2).
        while let Some(ticket) = self.in_flight.pop_front() {
            let _ = ticket.wait();
        }
    }
}

/// Where the current tuple is.
#[derive(Clone, Copy)]
enum Current {
    None,
    InBuf(usize, usize),
    Scratch,
}

/// A cluster read issued ahead of need.
struct Ahead {
    offset: u64,
    ticket: Ticket,
}

/// Reads one run back, tuple by tuple, keeping each tuple's normalised key.
///
/// Without forecasting every cluster is read when it is needed. A merge
/// that forecasts ([`super::forecast`]) issues reads of the run's next
/// clusters ahead through [`RunReader::issue`]; they queue here in run order
/// and are consumed in that order, and the buffers they leave behind go back
/// to the merge through [`RunReader::take_freed`].
pub struct RunReader {
    run: Run,
    key: Arc<SortKey>,
    /// Next cluster to read: (extent index, cluster within it).
    next_extent: usize,
    next_in_extent: u64,
    clusters_left: u64,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    ahead: VecDeque<Ahead>,
    /// The newest read issued ahead has not been seen to finish.
    unarrived: bool,
    /// Forecasting key of the newest cluster whose contents are known.
    forecast: u128,
    /// Bumped whenever `forecast` names a newer cluster.
    known_seq: u64,
    /// Buffers of consumed read-ahead clusters, for the merge to reuse.
    freed: Vec<Vec<u8>>,
    scratch: Vec<u8>,
    current: Current,
    key_buf: Vec<u8>,
    /// First 8 bytes of the current key (see [`key_prefix`]).
    pub prefix: u64,
    tuples_left: u64,
    /// Clusters this reader read.
    pub clusters_read: u64,
    /// Reads issued ahead, consumed, and cancelled (MERGE-5).
    pub reads_ahead: u64,
    pub reads_ahead_consumed: u64,
    pub reads_cancelled: u64,
    /// Clusters read when needed, none having been issued ahead.
    pub reads_on_demand: u64,
}

impl RunReader {
    /// A reader of `run`, reading each cluster when it is needed unless a
    /// merge issues reads ahead.
    pub fn new(run: Run, key: &Arc<SortKey>) -> RunReader {
        let clusters_left = run.clusters;
        let tuples_left = run.tuples;
        let cluster_bytes = run.cluster_bytes;
        RunReader {
            run,
            key: key.clone(),
            next_extent: 0,
            next_in_extent: 0,
            clusters_left,
            buf: vec![0u8; cluster_bytes],
            pos: 0,
            end: 0,
            ahead: VecDeque::new(),
            unarrived: false,
            forecast: 0,
            known_seq: 0,
            freed: Vec::new(),
            scratch: Vec::new(),
            current: Current::None,
            key_buf: Vec::new(),
            prefix: 0,
            tuples_left,
            clusters_read: 0,
            reads_ahead: 0,
            reads_ahead_consumed: 0,
            reads_cancelled: 0,
            reads_on_demand: 0,
        }
    }

    fn next_offset(&mut self) -> Option<u64> {
        if self.clusters_left == 0 {
            return None;
        }
        let step = self.run.cluster_bytes as u64;
        let list = self.run.extents.list();
        while let Some(&(start, len)) = list.get(self.next_extent) {
            if self.next_in_extent < len / step {
                let at = start + self.next_in_extent * step;
                self.next_in_extent += 1;
                self.clusters_left -= 1;
                return Some(at);
            }
            self.next_extent += 1;
            self.next_in_extent = 0;
        }
        None
    }

    /// The forecasting key of the run's next cluster to issue, with the
    /// sequence number of the cluster it comes from: `None` when every
    /// cluster is issued, or the newest issued read has not finished (its
    /// contents, and so the key after it, are not known yet).
    pub fn forecast(&mut self) -> Option<(u128, u64)> {
        if self.clusters_left == 0 || self.current_unknown() {
            return None;
        }
        Some((self.forecast, self.known_seq))
    }

    /// True while the newest read issued ahead has not been seen to finish;
    /// when it has, its forecasting key becomes the run's.
    fn current_unknown(&mut self) -> bool {
        if !self.unarrived {
            return false;
        }
        let Some(newest) = self.ahead.back_mut() else {
            self.unarrived = false;
            return false;
        };
        match newest.ticket.poll() {
            Some(done) => {
                self.forecast = forecast_of(&done.buf);
                self.known_seq += 1;
                self.unarrived = false;
                false
            }
            None => true,
        }
    }

    /// True if a read issued ahead is still in flight (unseen).
    pub fn awaiting(&self) -> bool {
        self.unarrived
    }

    /// The forecast key's sequence number now (a stale forecast is one
    /// whose number has moved on).
    pub fn known_seq(&self) -> u64 {
        self.known_seq
    }

    /// Issue the read of the run's next cluster into `buf`; gives `buf`
    /// back if every cluster is issued.
    pub fn issue(&mut self, pool: &IoPool, buf: Vec<u8>) -> Option<Vec<u8>> {
        // MERGE-3: a run is forecast again only once its newest read has
        // finished, so at most one read per run is in flight.
        assert!(
            !self.unarrived,
            "MERGE-3: a second read of one run in flight"
        );
        let Some(offset) = self.next_offset() else {
            return Some(buf);
        };
        self.ahead.push_back(Ahead {
            offset,
            ticket: pool.read(offset, buf),
        });
        self.unarrived = true;
        self.reads_ahead += 1;
        None
    }

    /// Buffers of consumed read-ahead clusters.
    pub fn take_freed(&mut self) -> Option<Vec<u8>> {
        self.freed.pop()
    }

    /// Load the next cluster into `buf`; false at the end of the run.
    fn load(&mut self, cpu: &mut CpuMeter) -> Result<bool> {
        cpu.settle();
        let offset = match self.ahead.pop_front() {
            Some(ahead) => {
                let done = ahead.ticket.wait();
                self.reads_ahead_consumed += 1;
                let old = std::mem::replace(&mut self.buf, done.buf);
                self.freed.push(old);
                done.result?;
                if self.ahead.is_empty() && self.unarrived {
                    self.unarrived = false;
                    self.forecast = forecast_of(&self.buf);
                    self.known_seq += 1;
                }
                ahead.offset
            }
            None => {
                let Some(offset) = self.next_offset() else {
                    return Ok(false);
                };
                self.run.extents.space().read(offset, &mut self.buf)?;
                self.reads_on_demand += 1;
                self.forecast = forecast_of(&self.buf);
                self.known_seq += 1;
                offset
            }
        };
        self.clusters_read += 1;
        let header = ClusterHeader::open(&self.buf, offset)?;
        self.pos = CLUSTER_HEADER_BYTES;
        self.end = CLUSTER_HEADER_BYTES + header.payload_bytes as usize;
        Ok(true)
    }

    /// Wait for every read issued ahead and drop what they read (MERGE-5:
    /// an issued read is consumed or cancelled, never left running).
    fn cancel_ahead(&mut self) {
        while let Some(ahead) = self.ahead.pop_front() {
            let done = ahead.ticket.wait();
            self.reads_cancelled += 1;
            if !done.buf.is_empty() {
                self.freed.push(done.buf);
            }
        }
        self.unarrived = false;
        assert_eq!(
            self.reads_ahead,
            self.reads_ahead_consumed + self.reads_cancelled,
            "MERGE-5: every read issued ahead is consumed or cancelled"
        );
    }

    /// Take `n` bytes of the stream; where they are goes to `current`.
    fn take(&mut self, n: usize, cpu: &mut CpuMeter) -> Result<Current> {
        if self.end - self.pos >= n {
            let at = self.pos;
            self.pos += n;
            return Ok(Current::InBuf(at, n));
        }
        self.scratch.clear();
        let mut need = n;
        while need > 0 {
            if self.pos == self.end && !self.load(cpu)? {
                return Err(TempError::Corrupt {
                    offset_bytes: 0,
                    problem: format!("run ends {need} bytes into a tuple"),
                });
            }
            let k = need.min(self.end - self.pos);
            self.scratch
                .extend_from_slice(&self.buf[self.pos..self.pos + k]);
            self.pos += k;
            need -= k;
        }
        Ok(Current::Scratch)
    }

    /// Move to the next tuple; false at the end of the run.
    pub fn advance(&mut self, cpu: &mut CpuMeter) -> Result<bool> {
        if self.tuples_left == 0 {
            self.current = Current::None;
            return Ok(false);
        }
        self.tuples_left -= 1;
        if self.pos == self.end && !self.load(cpu)? {
            return Err(TempError::Corrupt {
                offset_bytes: 0,
                problem: "run ends before its last tuple".into(),
            });
        }
        let len = match self.run.fixed_len {
            Some(len) => len,
            None => {
                let at = self.take(LENGTH_PREFIX_BYTES, cpu)?;
                let bytes = match at {
                    Current::InBuf(at, n) => &self.buf[at..at + n],
                    _ => &self.scratch[..],
                };
                u32::from_le_bytes(bytes.try_into().unwrap_or([0; 4])) as usize
            }
        };
        self.current = self.take(len, cpu)?;
        // The key.
        let tuple = match self.current {
            Current::InBuf(at, n) => &self.buf[at..at + n],
            Current::Scratch => &self.scratch[..],
            Current::None => &[][..],
        };
        match self.key.identity() {
            Some((offset, klen)) => {
                let k = tuple.get(offset..offset + klen).ok_or_else(|| {
                    TempError::Tuple(format!(
                        "a tuple of {} bytes is shorter than its key",
                        tuple.len()
                    ))
                })?;
                self.prefix = key_prefix(k);
            }
            None => {
                self.key_buf.clear();
                self.key.normalize_into(tuple, &mut self.key_buf)?;
                self.prefix = key_prefix(&self.key_buf);
            }
        }
        Ok(true)
    }

    /// The current tuple (empty before the first `advance` and at the end).
    #[inline]
    pub fn tuple(&self) -> &[u8] {
        match self.current {
            Current::InBuf(at, n) => &self.buf[at..at + n],
            Current::Scratch => &self.scratch,
            Current::None => &[],
        }
    }

    /// The current tuple's normalised key.
    #[inline]
    pub fn key(&self) -> &[u8] {
        match self.key.identity() {
            Some((offset, len)) => self.tuple().get(offset..offset + len).unwrap_or(&[]),
            None => &self.key_buf,
        }
    }

    pub fn run(&self) -> &Run {
        &self.run
    }

    /// Start again from the run's first tuple.
    pub fn rewind(&mut self) {
        self.cancel_ahead();
        self.next_extent = 0;
        self.next_in_extent = 0;
        self.clusters_left = self.run.clusters;
        self.tuples_left = self.run.tuples;
        self.pos = 0;
        self.end = 0;
        self.current = Current::None;
    }
}

impl Drop for RunReader {
    fn drop(&mut self) {
        // Wait for reads in flight before the run's clusters are freed.
        if std::thread::panicking() {
            while let Some(ahead) = self.ahead.pop_front() {
                let _ = ahead.ticket.wait();
            }
        } else {
            self.cancel_ahead();
        }
    }
}
