//! A copy-on-write view of a device: reads come from the device below,
//! writes stay in memory.
//!
//! `flashlab check` and `flashlab query` open a database read-only: every
//! device is wrapped in an [`OverlayDevice`], so crash recovery, page
//! repairs and the checkpoint at close all run against the overlay and not
//! a byte reaches the files. A read returns the device's bytes with the
//! overlay's sectors laid over them; a flush does nothing (nothing here is
//! meant to last); a trim remembers zeros.
//!
//! Invariant OVL-1: no method of an overlay calls `write`, `flush` or
//! `trim` on the device below.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::device::{Device, DeviceRef};
use crate::error::DeviceError;
use crate::model::{IoKind, IoRequest, ModelStats, check_request};

/// Most bytes an overlay keeps in memory; a read-only open that would need
/// more (recovery rewriting that much of a database) is refused.
pub const OVERLAY_BYTES_MAX: u64 = 4 << 30;

/// A device whose writes are kept in memory, over a device that is only read.
pub struct OverlayDevice {
    base: DeviceRef,
    name: String,
    /// Written sectors, by sector number.
    sectors: Mutex<BTreeMap<u64, Box<[u8]>>>,
}

impl OverlayDevice {
    /// A view of `base` that never writes to it.
    pub fn new(base: DeviceRef) -> OverlayDevice {
        let name = format!("{} (read-only view)", base.name());
        OverlayDevice {
            base,
            name,
            sectors: Mutex::new(BTreeMap::new()),
        }
    }

    /// Bytes held in memory.
    pub fn overlay_bytes(&self) -> u64 {
        self.sectors.lock().expect("overlay").len() as u64 * self.sector()
    }

    fn sector(&self) -> u64 {
        self.base.sector_bytes() as u64
    }

    fn check(&self, kind: IoKind, offset_bytes: u64, len_bytes: u64) -> Result<(), DeviceError> {
        let req = IoRequest {
            kind,
            offset_bytes,
            len_bytes,
        };
        check_request(
            &self.name,
            self.base.capacity_bytes(),
            self.base.sector_bytes(),
            &req,
        )
    }

    fn full(&self) -> DeviceError {
        DeviceError::Full {
            device: self.name.clone(),
            problem: format!(
                "a read-only open keeps its writes in memory, at most {OVERLAY_BYTES_MAX} bytes"
            ),
        }
    }

    /// Keep `data` (sector-aligned) at `offset_bytes`.
    fn store(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        let sector = self.sector() as usize;
        let mut sectors = self.sectors.lock().expect("overlay");
        let added = data.len() as u64;
        if (sectors.len() * sector) as u64 + added > OVERLAY_BYTES_MAX {
            return Err(self.full());
        }
        let first = offset_bytes / sector as u64;
        for (i, chunk) in data.chunks(sector).enumerate() {
            sectors.insert(first + i as u64, chunk.into());
        }
        Ok(())
    }
}

impl Device for OverlayDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn capacity_bytes(&self) -> u64 {
        self.base.capacity_bytes()
    }

    fn sector_bytes(&self) -> u32 {
        self.base.sector_bytes()
    }

    fn read(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.check(IoKind::Read, offset_bytes, buf.len() as u64)?;
        let sector = self.sector();
        let first = offset_bytes / sector;
        let end = first + buf.len() as u64 / sector;
        let count = self
            .sectors
            .lock()
            .expect("overlay")
            .range(first..end)
            .count() as u64;
        // The device below is read without the overlay's lock held (no std
        // lock across I/O); sectors written meanwhile are laid over after.
        if count < end - first {
            self.base.read(offset_bytes, buf)?;
        }
        if count == 0 {
            return Ok(());
        }
        let sectors = self.sectors.lock().expect("overlay");
        for (&n, bytes) in sectors.range(first..end) {
            let at = ((n - first) * sector) as usize;
            buf[at..at + bytes.len()].copy_from_slice(bytes);
        }
        Ok(())
    }

    fn write(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.check(IoKind::Write, offset_bytes, data.len() as u64)?;
        self.store(offset_bytes, data)
    }

    fn flush(&self) -> Result<(), DeviceError> {
        Ok(())
    }

    fn trim(&self, offset_bytes: u64, len_bytes: u64) -> Result<(), DeviceError> {
        self.check(IoKind::Trim, offset_bytes, len_bytes)?;
        if len_bytes > OVERLAY_BYTES_MAX {
            return Err(self.full());
        }
        self.store(offset_bytes, &vec![0u8; len_bytes as usize])
    }

    fn model_stats(&self) -> Option<ModelStats> {
        self.base.model_stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryDevice;
    use std::sync::Arc;

    #[test]
    fn writes_stay_in_the_overlay_and_reads_merge() {
        let base = Arc::new(MemoryDevice::new("base", 1 << 20));
        base.write(0, &[1u8; 2048]).unwrap();
        let overlay = OverlayDevice::new(base.clone());
        overlay.write(512, &[2u8; 512]).unwrap();
        overlay.flush().unwrap();
        let mut buf = vec![0u8; 2048];
        overlay.read(0, &mut buf).unwrap();
        assert!(buf[..512].iter().all(|&b| b == 1));
        assert!(buf[512..1024].iter().all(|&b| b == 2));
        assert!(buf[1024..].iter().all(|&b| b == 1));
        base.read(0, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 1), "the base was written");
        overlay.trim(0, 1024).unwrap();
        overlay.read(0, &mut buf).unwrap();
        assert!(buf[..1024].iter().all(|&b| b == 0));
        assert_eq!(overlay.overlay_bytes(), 1024);
    }

    #[test]
    fn requests_are_checked_like_any_device() {
        let base = Arc::new(MemoryDevice::new("base", 4096));
        let overlay = OverlayDevice::new(base);
        assert!(overlay.write(4096, &[0u8; 512]).is_err());
        assert!(overlay.write(100, &[0u8; 512]).is_err());
    }
}
