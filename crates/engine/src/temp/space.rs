//! # The temp space manager
//!
//! A [`TempSpace`] hands out byte extents of one device to the operators
//! that spill. Allocation is append-only: the next extent starts at the
//! *next free* offset, so an operator's writes land one after the other, as
//! lee2008 saw of a commercial server's sorts and hash joins (Figures 6 and
//! 8). Freed extents go to a free list, kept coalesced; an extent freed at
//! the end of the allocated region pulls the next free offset back instead.
//! The free list is used only when appending would pass the cap, lowest
//! address first. When everything is free the next free offset is back at 0.
//!
//! The cap ([`TempSpace::capacity_bytes`]) is configurable and defaults to
//! the device's capacity. An allocation that fits neither under the cap nor
//! in a free extent fails with [`TempError::Full`], which is distinct from an
//! operator's memory budget being too small ([`TempError::Memory`]).
//!
//! In the real world, [`TempSpace::in_dir`] creates a sparse file in a
//! directory and unlinks it at once: the open descriptor keeps it alive, and
//! nothing is left behind when the operator completes, fails or the process
//! dies. With no temp device at all ([`TempSpace::from_devices`] on a
//! database without a temp space) the error names the `temp` setting.
//!
//! The allocator's lock is a `std::sync::Mutex` held only for bookkeeping,
//! never across I/O (TEMP-5). Every read and write goes through
//! `TempSpace::read` and `TempSpace::write`, which count them.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use flashlab_devices::file::{FileDevice, FileOptions};
use flashlab_devices::{DeviceError, DeviceRef};
use serde::Serialize;

use super::{Result, TempError};

/// Distinguishes temp files of one process.
static FILE_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A temporary space on one device. Cheap to clone (a shared handle).
#[derive(Clone)]
pub struct TempSpace {
    inner: Arc<SpaceInner>,
}

struct SpaceInner {
    device: DeviceRef,
    capacity_bytes: u64,
    sector_bytes: u32,
    allocator: Mutex<Allocator>,
    reads: AtomicU64,
    writes: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

/// What a temp space did, for reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TempSpaceStats {
    pub capacity_bytes: u64,
    /// Bytes allocated now.
    pub used_bytes: u64,
    /// Most bytes allocated at once.
    pub peak_used_bytes: u64,
    /// Highest offset ever allocated up to (the footprint on the device).
    pub high_water_bytes: u64,
    pub allocations: u64,
    pub reads: u64,
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

/// The bookkeeping of TEMP-1.
#[derive(Default)]
struct Allocator {
    next_free_bytes: u64,
    /// Free extents below `next_free_bytes`: offset -> length, coalesced.
    free: BTreeMap<u64, u64>,
    used_bytes: u64,
    peak_used_bytes: u64,
    high_water_bytes: u64,
    allocations: u64,
}

impl Allocator {
    fn allocate(&mut self, len: u64, cap: u64) -> Option<u64> {
        let offset = if self.next_free_bytes + len <= cap {
            let at = self.next_free_bytes;
            self.next_free_bytes += len;
            at
        } else {
            let (&at, &have) = self.free.iter().find(|&(_, &have)| have >= len)?;
            self.free.remove(&at);
            if have > len {
                self.free.insert(at + len, have - len);
            }
            at
        };
        self.used_bytes += len;
        self.peak_used_bytes = self.peak_used_bytes.max(self.used_bytes);
        self.high_water_bytes = self.high_water_bytes.max(self.next_free_bytes);
        self.allocations += 1;
        Some(offset)
    }

    fn free(&mut self, offset: u64, len: u64) {
        debug_assert!(
            offset + len <= self.next_free_bytes,
            "TEMP-1: freeing beyond"
        );
        debug_assert!(self.used_bytes >= len, "TEMP-2: freeing more than used");
        self.used_bytes -= len;
        let mut start = offset;
        let mut end = offset + len;
        if let Some((&before, &before_len)) = self.free.range(..offset).next_back() {
            debug_assert!(before + before_len <= offset, "TEMP-1: double free");
            if before + before_len == offset {
                self.free.remove(&before);
                start = before;
            }
        }
        if let Some(&after_len) = self.free.get(&end) {
            self.free.remove(&end);
            end += after_len;
        }
        if end == self.next_free_bytes {
            self.next_free_bytes = start;
        } else {
            self.free.insert(start, end - start);
        }
    }
}

impl TempSpace {
    /// A temp space on `device`, capped at `capacity_bytes` (the device's
    /// capacity when `None`).
    pub fn new(device: DeviceRef, capacity_bytes: Option<u64>) -> Result<TempSpace> {
        let device_bytes = device.capacity_bytes();
        let sector_bytes = device.sector_bytes();
        let cap = capacity_bytes.unwrap_or(device_bytes);
        if cap > device_bytes {
            return Err(TempError::setting(
                "temp capacity_bytes",
                format!(
                    "{cap} exceeds the {device_bytes} bytes of device {}",
                    device.name()
                ),
            ));
        }
        let cap = cap - cap % u64::from(sector_bytes.max(1));
        Ok(TempSpace {
            inner: Arc::new(SpaceInner {
                device,
                capacity_bytes: cap,
                sector_bytes,
                allocator: Mutex::new(Allocator::default()),
                reads: AtomicU64::new(0),
                writes: AtomicU64::new(0),
                bytes_read: AtomicU64::new(0),
                bytes_written: AtomicU64::new(0),
            }),
        })
    }

    /// A temp space in a sparse file of `capacity_bytes` created in `dir`
    /// and unlinked at once (real world). `direct` opens it with O_DIRECT.
    pub fn in_dir(dir: &Path, capacity_bytes: u64, direct: bool) -> Result<TempSpace> {
        if !dir.is_dir() {
            return Err(TempError::setting(
                "temp directory",
                format!("{} is not an existing directory", dir.display()),
            ));
        }
        let n = FILE_COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("flashlab-temp-{}-{n}.tmp", std::process::id()));
        let device = FileDevice::create(&path, capacity_bytes, FileOptions { direct });
        // Unlink whatever happened: the descriptor keeps the file alive.
        let _ = std::fs::remove_file(&path);
        let device = device.map_err(|e| match e {
            e if e.is_full() => TempError::from(e),
            e => TempError::setting(
                "temp directory",
                format!("cannot create a temp file in {}: {e}", dir.display()),
            ),
        })?;
        TempSpace::new(Arc::new(device), None)
    }

    /// The temp device of a database's devices; an error naming the `temp`
    /// setting when the database has none.
    pub fn from_devices(
        devices: &crate::Devices,
        capacity_bytes: Option<u64>,
    ) -> Result<TempSpace> {
        let device = devices.temp.clone().ok_or_else(|| {
            TempError::setting(
                "temp",
                "the database has no temp space (configure [temp] with a device)",
            )
        })?;
        TempSpace::new(device, capacity_bytes)
    }

    pub fn device(&self) -> &DeviceRef {
        &self.inner.device
    }

    pub fn sector_bytes(&self) -> u32 {
        self.inner.sector_bytes
    }

    /// The cap.
    pub fn capacity_bytes(&self) -> u64 {
        self.inner.capacity_bytes
    }

    /// Bytes allocated now.
    pub fn used_bytes(&self) -> u64 {
        self.lock().used_bytes
    }

    pub fn stats(&self) -> TempSpaceStats {
        let a = self.lock();
        TempSpaceStats {
            capacity_bytes: self.inner.capacity_bytes,
            used_bytes: a.used_bytes,
            peak_used_bytes: a.peak_used_bytes,
            high_water_bytes: a.high_water_bytes,
            allocations: a.allocations,
            reads: self.inner.reads.load(Ordering::Relaxed),
            writes: self.inner.writes.load(Ordering::Relaxed),
            bytes_read: self.inner.bytes_read.load(Ordering::Relaxed),
            bytes_written: self.inner.bytes_written.load(Ordering::Relaxed),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Allocator> {
        // A panic while holding this lock leaves consistent bookkeeping (no
        // step can panic half-way), so a poisoned lock is still usable.
        self.inner
            .allocator
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Allocate `len_bytes` (a multiple of the sector). Use through
    /// [`super::cluster::Extents`], which frees it (TEMP-2).
    pub(crate) fn allocate(&self, len_bytes: u64) -> Result<u64> {
        debug_assert!(len_bytes.is_multiple_of(u64::from(self.inner.sector_bytes)));
        let cap = self.inner.capacity_bytes;
        let mut a = self.lock();
        a.allocate(len_bytes, cap).ok_or_else(|| TempError::Full {
            device: self.inner.device.name().to_string(),
            needed_bytes: len_bytes,
            used_bytes: a.used_bytes,
            capacity_bytes: cap,
        })
    }

    pub(crate) fn free(&self, offset_bytes: u64, len_bytes: u64) {
        self.lock().free(offset_bytes, len_bytes);
    }

    /// Write at `offset_bytes` of the device, counted.
    pub(crate) fn write(&self, offset_bytes: u64, data: &[u8]) -> Result<()> {
        let inner = &self.inner;
        count(&inner.writes, &inner.bytes_written, data.len());
        let written = inner.device.write(offset_bytes, data);
        written.map_err(|e| self.device_error(e))
    }

    /// Read at `offset_bytes` of the device, counted.
    pub(crate) fn read(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<()> {
        let inner = &self.inner;
        count(&inner.reads, &inner.bytes_read, buf.len());
        let read = inner.device.read(offset_bytes, buf);
        read.map_err(|e| self.device_error(e))
    }

    fn device_error(&self, e: DeviceError) -> TempError {
        if e.is_full() {
            let a = self.lock();
            return TempError::Full {
                device: self.inner.device.name().to_string(),
                needed_bytes: 0,
                used_bytes: a.used_bytes,
                capacity_bytes: self.inner.capacity_bytes,
            };
        }
        TempError::Device(e)
    }
}

impl std::fmt::Debug for TempSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TempSpace")
            .field("device", &self.inner.device.name())
            .field("capacity_bytes", &self.inner.capacity_bytes)
            .finish()
    }
}

/// One request of `bytes` more in a request counter and its byte counter.
fn count(requests: &AtomicU64, byte_total: &AtomicU64, bytes: usize) {
    requests.fetch_add(1, Ordering::Relaxed);
    byte_total.fetch_add(bytes as u64, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_then_free_list_then_full() {
        let mut a = Allocator::default();
        let cap = 10 * 2048;
        let offs: Vec<u64> = (0..10).map(|_| a.allocate(2048, cap).unwrap()).collect();
        assert_eq!(offs, (0..10).map(|i| i * 2048).collect::<Vec<_>>());
        assert_eq!(a.allocate(2048, cap), None);
        a.free(2048, 2048);
        a.free(4096, 2048);
        assert_eq!(a.free.get(&2048), Some(&4096), "coalesced");
        assert_eq!(a.allocate(4096, cap), Some(2048));
        // Freeing the tail pulls the next free offset back.
        a.free(9 * 2048, 2048);
        assert_eq!(a.next_free_bytes, 9 * 2048);
        for i in [0u64, 3, 4, 5, 6, 7, 8] {
            a.free(i * 2048, 2048);
        }
        a.free(2048, 4096);
        assert_eq!(a.used_bytes, 0);
        assert_eq!(a.next_free_bytes, 0);
        assert!(a.free.is_empty());
    }
}
