//! A mirrored log: two copies of the log device, as Oracle multiplexes the
//! members of a redo log group (`[log] mirror`).
//!
//! With one copy, a log sector that the device loses or zeroes after its
//! flush was acknowledged, with nothing written after it, looks exactly
//! like a torn tail: recovery ends the log before it and the commits in it
//! are lost unseen. With two copies on separate devices, every write and
//! flush goes to both (a force is durable once both flushes returned), and
//! every read reads both and compares them sector by sector
//! ([`MirroredLog`], MIRROR-1..3):
//!
//! 1. A write and a flush go to the primary, then to the mirror; either's
//!    failure is the request's failure (the log then fails, WAL-4).
//! 2. Where the copies differ, a read takes the *newer valid* sector: a
//!    log sector whose checksum holds, of the higher sector number (a later
//!    lap), then of the higher durable LSN (a later tail rewrite); in the
//!    master area, the master copy of the higher sequence number. A sector
//!    valid in one copy only (the other zeroed, lost or damaged) is taken
//!    from that copy. Each differing sector is either the old or the new
//!    contents of an unflushed write (a legal crash outcome either way) or
//!    a flushed sector one copy lost, which the other holds. Where neither
//!    copy is valid, a damaged sector is taken over zeros (the reader then
//!    refuses the damage instead of ending the log there), and nothing is
//!    repaired. Where one copy cannot be read, the other answers only if
//!    every sector it gives is valid; otherwise the read fails, as it
//!    would with one copy.
//! 3. The sector taken is written back over the copy that differed (a
//!    repair, counted) and flushed before the read returns, so both copies
//!    hold, durably, what recovery found before the log goes on;
//!    each request holds the mirror's order lock across its two copies, so
//!    a repair never lands between a write's two halves.
//!
//! The limit that remains: a sector lost by both copies.

use std::sync::atomic::{AtomicU64, Ordering};

use flashlab_devices::{Device, DeviceError, DeviceRef};

use super::layout::{LOG_MASTER_AREA_BYTES, LOG_SECTOR_BYTES_MIN};
use super::master::Master;

/// The log device seen as one, over two copies.
pub struct MirroredLog {
    primary: DeviceRef,
    mirror: DeviceRef,
    repaired: AtomicU64,
    /// Held across each request's pair of requests, so a read's repair
    /// never lands between a write's two copies (a runtime lock: it is
    /// held across I/O).
    order: flashlab_runtime::Mutex<()>,
    /// A write or flush of either copy failed: no repair writes or
    /// flushes again (WAL-4: nothing is flushed after a failed flush);
    /// reads still merge the copies in memory.
    failed: std::sync::atomic::AtomicBool,
}

impl MirroredLog {
    /// A log kept on `primary` and on `mirror` (of the same size).
    pub fn new(primary: DeviceRef, mirror: DeviceRef) -> MirroredLog {
        MirroredLog {
            primary,
            mirror,
            repaired: AtomicU64::new(0),
            order: flashlab_runtime::Mutex::new(()),
            failed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Sectors repaired from the other copy so far (MIRROR-3).
    pub fn repaired_sectors(&self) -> u64 {
        self.repaired.load(Ordering::Relaxed)
    }

    fn sector(&self) -> u64 {
        LOG_SECTOR_BYTES_MIN.max(u64::from(self.sector_bytes()))
    }

    fn region_start(&self) -> u64 {
        LOG_MASTER_AREA_BYTES.max(2 * self.sector())
    }

    /// How new a sector at `offset` is, if it is valid (MIRROR-2).
    fn rank(&self, offset: u64, bytes: &[u8]) -> Option<(u64, u64)> {
        if bytes.iter().all(|&b| b == 0) {
            return None;
        }
        if offset < self.region_start() {
            return match Master::decode(bytes) {
                Ok(Some(master)) => Some((master.sequence, 0)),
                _ => None,
            };
        }
        let le64 = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let crc = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes"));
        (crc32c::crc32c(&bytes[4..]) == crc).then(|| (le64(8), le64(16)))
    }

    /// Merge `other` (the mirror's bytes) into `buf` (the primary's), one
    /// sector at a time, and write each taken sector back over the copy
    /// that lacked it (MIRROR-2, MIRROR-3).
    fn reconcile(&self, offset: u64, buf: &mut [u8], other: &[u8]) -> Result<(), DeviceError> {
        let sector = self.sector() as usize;
        let (mut primary_written, mut mirror_written) = (false, false);
        for (i, (mine, theirs)) in buf.chunks_mut(sector).zip(other.chunks(sector)).enumerate() {
            if mine == theirs {
                continue;
            }
            let at = offset + (i * sector) as u64;
            let (take_mirror, valid) = match (self.rank(at, mine), self.rank(at, theirs)) {
                (None, Some(_)) => (true, true),
                (Some(a), Some(b)) => (b > a, true),
                (Some(_), None) => (false, true),
                // Neither is valid: damage shows rather than zeros, so the
                // reader refuses it instead of ending the log there.
                (None, None) => (mine.iter().all(|&b| b == 0), false),
            };
            if take_mirror {
                mine.copy_from_slice(theirs);
            }
            if !valid || self.failed.load(Ordering::SeqCst) {
                continue;
            }
            if take_mirror {
                self.watch(self.primary.write(at, mine))?;
                primary_written = true;
            } else {
                self.watch(self.mirror.write(at, mine))?;
                mirror_written = true;
            }
            self.repaired.fetch_add(1, Ordering::Relaxed);
        }
        // A repair is durable before the read returns: the log may count
        // what it read as durable (its end), and write pages on it.
        if primary_written {
            self.watch(self.primary.flush())?;
        }
        if mirror_written {
            self.watch(self.mirror.flush())?;
        }
        Ok(())
    }

    /// Every sector of `buf`, read at `offset`, is valid (MIRROR-2).
    fn all_valid(&self, offset: u64, buf: &[u8]) -> bool {
        let sector = self.sector() as usize;
        buf.chunks(sector)
            .enumerate()
            .all(|(i, s)| self.rank(offset + (i * sector) as u64, s).is_some())
    }

    /// Note a failed request of either copy (see `failed`).
    fn watch(&self, result: Result<(), DeviceError>) -> Result<(), DeviceError> {
        if result.is_err() {
            self.failed.store(true, Ordering::SeqCst);
        }
        result
    }
}

impl Device for MirroredLog {
    fn name(&self) -> &str {
        self.primary.name()
    }

    fn capacity_bytes(&self) -> u64 {
        self.primary
            .capacity_bytes()
            .min(self.mirror.capacity_bytes())
    }

    fn sector_bytes(&self) -> u32 {
        self.primary.sector_bytes().max(self.mirror.sector_bytes())
    }

    fn read(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let mut other = vec![0u8; buf.len()];
        let _order = self.order.lock();
        match (
            self.primary.read(offset_bytes, buf),
            self.mirror.read(offset_bytes, &mut other),
        ) {
            (Ok(()), Ok(())) => self.reconcile(offset_bytes, buf, &other),
            // One copy unreadable: the other answers if every sector it
            // gives is valid; zeros or damage there might hide what the
            // unreadable copy holds, so the read fails as with one copy.
            (Ok(()), Err(e)) => self.all_valid(offset_bytes, buf).then_some(()).ok_or(e),
            (Err(e), Ok(())) => {
                buf.copy_from_slice(&other);
                self.all_valid(offset_bytes, buf).then_some(()).ok_or(e)
            }
            (Err(e), Err(_)) => Err(e),
        }
    }

    fn write(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        let _order = self.order.lock();
        self.watch(self.primary.write(offset_bytes, data))?;
        self.watch(self.mirror.write(offset_bytes, data))
    }

    fn flush(&self) -> Result<(), DeviceError> {
        let _order = self.order.lock();
        self.watch(self.primary.flush())?;
        self.watch(self.mirror.flush())
    }

    fn trim(&self, offset_bytes: u64, len_bytes: u64) -> Result<(), DeviceError> {
        let _order = self.order.lock();
        self.watch(self.primary.trim(offset_bytes, len_bytes))?;
        self.watch(self.mirror.trim(offset_bytes, len_bytes))
    }

    fn model_stats(&self) -> Option<flashlab_devices::ModelStats> {
        self.primary.model_stats()
    }
}
