//! Reading the log back, for recovery and for `flashlab check`.
//!
//! [`LogReader`] reads the log device in large chunks from a starting LSN
//! and yields records in order. The log ends at the first position that does
//! not hold a valid record: a zero length (never written), a bad checksum (a
//! torn or partial force), or a record whose stored LSN is not its position
//! (stale bytes). That position is where the log continues after recovery.

use flashlab_devices::DeviceRef;

use crate::error::Result;
use crate::wal::record::{LogRecord, RECORD_BYTES_MAX, RECORD_HEADER_BYTES};

/// Bytes read from the device at a time.
pub const READ_CHUNK_BYTES: usize = 1 << 20;

/// Reads records sequentially from a log device.
pub struct LogReader {
    device: DeviceRef,
    /// LSN of `buf[0]`.
    buf_lsn: u64,
    buf: Vec<u8>,
    /// Next record's LSN.
    next_lsn: u64,
    done: bool,
}

impl LogReader {
    pub fn new(device: DeviceRef, lsn: u64) -> LogReader {
        LogReader {
            device,
            buf_lsn: lsn,
            buf: Vec::new(),
            next_lsn: lsn,
            done: false,
        }
    }

    /// Where the valid log ends (after iteration stopped), or the next LSN.
    pub fn end_lsn(&self) -> u64 {
        self.next_lsn
    }

    /// Make sure `buf` holds `len` bytes from `next_lsn`, reading more as
    /// needed. False when the device ends first.
    fn fill(&mut self, len: usize) -> Result<bool> {
        let have_from = (self.next_lsn - self.buf_lsn) as usize;
        if self.buf.len() >= have_from + len {
            return Ok(true);
        }
        self.buf.drain(..have_from);
        self.buf_lsn = self.next_lsn;
        let sector = u64::from(self.device.sector_bytes());
        while self.buf.len() < len {
            let read_lsn = self.buf_lsn + self.buf.len() as u64;
            let aligned = read_lsn - read_lsn % sector;
            let capacity = self.device.capacity_bytes();
            if aligned >= capacity {
                return Ok(false);
            }
            let want = (READ_CHUNK_BYTES as u64).max(len as u64).div_ceil(sector) * sector;
            let n = want.min(capacity - aligned);
            let mut chunk = vec![0u8; n as usize];
            self.device.read(aligned, &mut chunk)?;
            let skip = (read_lsn - aligned) as usize;
            self.buf.extend_from_slice(&chunk[skip..]);
        }
        Ok(true)
    }

    /// The next valid record, or `None` at the end of the log. Device
    /// errors are returned; damage just ends the log.
    pub fn next_record(&mut self) -> Result<Option<LogRecord>> {
        if self.done || !self.fill(RECORD_HEADER_BYTES)? {
            self.done = true;
            return Ok(None);
        }
        let at = (self.next_lsn - self.buf_lsn) as usize;
        let len = LogRecord::peek_len(&self.buf[at..]).unwrap_or(0);
        if !(RECORD_HEADER_BYTES..=RECORD_BYTES_MAX).contains(&len) || !self.fill(len)? {
            self.done = true;
            return Ok(None);
        }
        let at = (self.next_lsn - self.buf_lsn) as usize;
        match LogRecord::decode(&self.buf[at..at + len], self.next_lsn) {
            Ok(record) => {
                self.next_lsn += len as u64;
                Ok(Some(record))
            }
            Err(_) => {
                self.done = true;
                Ok(None)
            }
        }
    }
}
