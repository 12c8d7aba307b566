//! Reading the log back, for recovery, page repair and `flashlab check`.
//!
//! [`LogReader`] reads log sectors in chunks from a starting LSN, checks
//! each one ([`LogLayout::decode_sector`]) and yields the records of the
//! stream in order. It tells two endings apart:
//!
//! * the **end of the written log**, `Ok(None)`: the next record would start
//!   in zero padding, or reach into a sector that is stale (never written
//!   in this lap, or another incarnation's). A torn tail ends this way.
//! * **damage**, `Err(Error::LogDamaged)`: a sector whose checksum fails, a
//!   sector that cannot be at its slot, an unreadable sector, or a record
//!   inside valid sectors that does not decode or does not link to the
//!   record before it. Damage is never taken for an end.
//!
//! After `Ok(None)`, [`LogReader::check_beyond_end`] looks past the end for
//! sectors of this incarnation that prove the log was durable further (a
//! lost or misdirected write), and returns the leftovers of an unfinished
//! write that must be erased before the log continues.

use flashlab_devices::DeviceRef;

use crate::error::{Error, Result};
use crate::wal::layout::{LogLayout, SectorState};
use crate::wal::record::{LogRecord, RECORD_BYTES_MAX, RECORD_HEADER_BYTES};

/// Log sectors read from the device at a time.
pub const READ_CHUNK_SECTORS: u64 = 256;

/// Why filling stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Stop {
    /// The next sector is not part of the written log.
    End,
    /// Sector `k` is damaged or unreadable.
    Damaged { sector: u64, problem: String },
}

/// What lies beyond the end of the written log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BeyondEnd {
    /// Sectors of this incarnation past the end (leftovers of a write that
    /// did not complete); the log must erase them before it continues.
    pub leftovers: Vec<u64>,
    /// Unreadable or damaged sectors past the end (not part of the log).
    pub damaged: u64,
}

/// Reads records sequentially from a log device.
pub struct LogReader {
    device: DeviceRef,
    layout: LogLayout,
    /// Stream bytes from `buf_lsn`, decoded from valid sectors.
    buf: Vec<u8>,
    buf_lsn: u64,
    /// Next sector to read into `buf`.
    next_sector: u64,
    next_lsn: u64,
    /// LSN of the record before `next_lsn`, when known (for the link).
    prev_record: Option<u64>,
    stop: Option<Stop>,
    done: bool,
}

impl LogReader {
    /// A reader from `lsn`, which must be a record's start. `prev_record`
    /// is the LSN of the record before it, if the caller knows it.
    pub fn new(device: DeviceRef, layout: LogLayout, lsn: u64, prev_record: Option<u64>) -> Self {
        let first = layout.sector_of(lsn);
        LogReader {
            device,
            layout,
            buf: Vec::new(),
            buf_lsn: layout.sector_lsn(first),
            next_sector: first,
            next_lsn: lsn,
            prev_record,
            stop: None,
            done: false,
        }
    }

    /// Where the valid log ends (after iteration stopped), or the next LSN.
    pub fn end_lsn(&self) -> u64 {
        self.next_lsn
    }

    /// LSN of the last record returned, if any.
    pub fn last_record_lsn(&self) -> Option<u64> {
        self.prev_record
    }

    fn damaged(&self, lsn: u64, problem: impl Into<String>) -> Error {
        Error::LogDamaged {
            lsn,
            offset_bytes: self.layout.offset_of(lsn),
            problem: problem.into(),
        }
    }

    /// Read sectors from `first` (at most `count`, not across the region's
    /// end) and classify them; an unreadable chunk is read sector by sector.
    /// The bytes come back for valid and damaged sectors only.
    fn read_sectors(&self, first: u64, count: u64) -> Vec<(u64, SectorState, Vec<u8>)> {
        let l = &self.layout;
        let to_region_end = l.sectors - first % l.sectors;
        let count = count.min(to_region_end).max(1);
        let sector = l.sector_bytes as usize;
        let mut chunk = vec![0u8; count as usize * sector];
        let read = self.device.read(l.offset_of_sector(first), &mut chunk);
        (first..first + count)
            .zip(chunk.chunks(sector))
            .map(|(k, bytes)| match read {
                Ok(()) => match l.decode_sector(k, bytes) {
                    // A flip on the way (not on the medium) reads clean
                    // the second time: read a damaged sector once more.
                    SectorState::Damaged(_) => self.read_one(k),
                    // Only a valid sector's bytes are read on.
                    state @ SectorState::Valid { .. } => (k, state, bytes.to_vec()),
                    state => (k, state, Vec::new()),
                },
                Err(_) => self.read_one(k),
            })
            .collect()
    }

    /// Read and classify one sector; an unreadable one is damaged.
    fn read_one(&self, k: u64) -> (u64, SectorState, Vec<u8>) {
        let mut bytes = vec![0u8; self.layout.sector_bytes as usize];
        match self
            .device
            .read(self.layout.offset_of_sector(k), &mut bytes)
        {
            Ok(()) => (k, self.layout.decode_sector(k, &bytes), bytes),
            Err(e) => (k, SectorState::Damaged(format!("unreadable: {e}")), bytes),
        }
    }

    /// Make `buf` hold `len` bytes from `next_lsn` if the valid sectors
    /// reach that far. False when they stop first (see `stop`).
    fn fill(&mut self, len: usize) -> bool {
        let have_from = (self.next_lsn - self.buf_lsn) as usize;
        if self.buf.len() >= have_from + len {
            return true;
        }
        let keep_from = have_from - have_from % self.layout.payload_bytes() as usize;
        self.buf.drain(..keep_from);
        self.buf_lsn += keep_from as u64;
        let have_from = have_from - keep_from;
        while self.buf.len() < have_from + len {
            if self.stop.is_some() {
                return false;
            }
            let wanted = (have_from + len - self.buf.len()) as u64;
            let count = wanted
                .div_ceil(self.layout.payload_bytes())
                .max(READ_CHUNK_SECTORS);
            for (k, state, bytes) in self.read_sectors(self.next_sector, count) {
                match state {
                    SectorState::Valid { .. } => {
                        self.buf.extend_from_slice(self.layout.payload(&bytes));
                        self.next_sector = k + 1;
                    }
                    SectorState::Stale | SectorState::Ahead { .. } => {
                        self.stop = Some(Stop::End);
                        break;
                    }
                    SectorState::Damaged(problem) => {
                        self.stop = Some(Stop::Damaged { sector: k, problem });
                        break;
                    }
                }
            }
        }
        true
    }

    /// The stop as an error, if it is damage.
    fn stop_error(&self) -> Option<Error> {
        match &self.stop {
            Some(Stop::Damaged { sector, problem }) => {
                let lsn = self.layout.sector_lsn(*sector).max(self.next_lsn);
                let offset = self.layout.offset_of_sector(*sector);
                Some(self.damaged(
                    lsn,
                    format!("log sector {sector} at device offset {offset}: {problem}"),
                ))
            }
            _ => None,
        }
    }

    /// The next record, `None` at the end of the written log, or an error
    /// for damage (see the module documentation).
    pub fn next_record(&mut self) -> Result<Option<LogRecord>> {
        if self.done {
            return Ok(None);
        }
        if !self.fill(RECORD_HEADER_BYTES) {
            self.done = true;
            return self.stop_error().map_or(Ok(None), Err);
        }
        let at = (self.next_lsn - self.buf_lsn) as usize;
        let len = LogRecord::peek_len(&self.buf[at..]).unwrap_or(0);
        if len == 0 {
            return self.padding_end(at);
        }
        if !(RECORD_HEADER_BYTES..=RECORD_BYTES_MAX).contains(&len) {
            return Err(self.damaged(self.next_lsn, format!("record length {len}")));
        }
        if !self.fill(len) {
            self.done = true;
            return self.stop_error().map_or(Ok(None), Err);
        }
        let at = (self.next_lsn - self.buf_lsn) as usize;
        let bytes = &self.buf[at..at + len];
        let record = LogRecord::decode(bytes, self.next_lsn)
            .map_err(|e| self.damaged(self.next_lsn, e.to_string()))?;
        let link = LogRecord::link_of(bytes).unwrap_or(0);
        if let Some(prev) = self.prev_record
            && link != prev
        {
            return Err(self.damaged(
                self.next_lsn,
                format!("record links to LSN {link}, but the record before it is at LSN {prev}"),
            ));
        }
        self.prev_record = Some(self.next_lsn);
        self.next_lsn += len as u64;
        Ok(Some(record))
    }

    /// A zero length: the rest of the sector must be zero padding.
    fn padding_end(&mut self, at: usize) -> Result<Option<LogRecord>> {
        let payload = self.layout.payload_bytes() as usize;
        let sector_end = (at / payload + 1) * payload;
        let rest = &self.buf[at..sector_end.min(self.buf.len())];
        if rest.iter().any(|&b| b != 0) {
            return Err(self.damaged(self.next_lsn, "non-zero bytes after the end of the records"));
        }
        self.done = true;
        Ok(None)
    }

    /// After the end was reached: look at up to `window_sectors` sectors
    /// past it. A sector of this incarnation there that was written when
    /// the log was already durable past the end proves that the end is a
    /// lost write: that is damage. Otherwise return the leftovers.
    pub fn check_beyond_end(&mut self, window_sectors: u64) -> Result<BeyondEnd> {
        let end = self.next_lsn;
        if let Some(e) = self.stop_error() {
            return Err(e);
        }
        // The sector the end falls in holds records (or is the stale one
        // that ended them, if the end is at a sector boundary).
        let payload = self.layout.payload_bytes();
        let first = self.layout.sector_of(end) + u64::from(!end.is_multiple_of(payload));
        let mut beyond = BeyondEnd::default();
        let window = window_sectors.min(self.layout.sectors - 1);
        let last = first + window;
        let mut k = first;
        while k < last {
            for (sector, state, _) in self.read_sectors(k, last - k) {
                k = sector + 1;
                let durable_lsn = match state {
                    SectorState::Valid { durable_lsn } => durable_lsn,
                    SectorState::Ahead { durable_lsn, .. } => durable_lsn,
                    SectorState::Stale => continue,
                    SectorState::Damaged(_) if sector == first => {
                        return Err(self.damaged(
                            end,
                            format!("log sector {sector} after the end is damaged"),
                        ));
                    }
                    SectorState::Damaged(_) => {
                        beyond.damaged += 1;
                        continue;
                    }
                };
                if durable_lsn > end {
                    return Err(self.damaged(
                        end,
                        format!(
                            "the log ends here, but log sector {sector} (device offset {}) was written when the log was durable to LSN {durable_lsn}: a write before the durable end was lost",
                            self.layout.offset_of_sector(sector)
                        ),
                    ));
                }
                beyond.leftovers.push(sector);
            }
        }
        Ok(beyond)
    }
}
