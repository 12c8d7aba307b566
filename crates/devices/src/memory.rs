//! A device in plain memory, without latency.
//!
//! lee2008 keeps its tables cached in memory so that only the log, rollback
//! and temporary spaces do I/O; a memory device stands for such a space in
//! either world. It completes every request at once and keeps the crash
//! semantics of [`SparseStore`]: unflushed writes are lost by a crash.

use std::sync::Mutex;

use crate::device::Device;
use crate::error::DeviceError;
use crate::model::{Geometry, IoKind};
use crate::store::{SparseStore, StoreError, StoredDevice};

/// Sector size of memory devices.
pub const MEMORY_SECTOR_BYTES: u32 = 512;

/// A zero-latency device backed by a sparse store.
pub struct MemoryDevice {
    geometry: Geometry,
    store: Mutex<SparseStore>,
}

impl MemoryDevice {
    pub fn new(name: &str, capacity_bytes: u64) -> MemoryDevice {
        MemoryDevice::with_geometry(Geometry::new(name, capacity_bytes, MEMORY_SECTOR_BYTES))
    }

    /// A memory device of any sector size: what a simulated device keeps
    /// its data in, on its model's geometry.
    pub(crate) fn with_geometry(geometry: Geometry) -> MemoryDevice {
        MemoryDevice {
            geometry,
            store: Mutex::new(SparseStore::new()),
        }
    }

    pub(crate) fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// Lose every write since the last flush, as a power failure would.
    pub fn crash(&self) {
        self.store.lock().expect("store").crash();
    }

    /// Apply a write or a zeroing to the store; one that would hold more
    /// unflushed bytes than the store's limit finds the device full.
    fn change(
        &self,
        op: impl FnOnce(&mut SparseStore) -> Result<(), StoreError>,
    ) -> Result<(), DeviceError> {
        op(&mut self.store.lock().expect("store")).map_err(|e| e.on_device(self.geometry.name()))
    }
}

impl StoredDevice for MemoryDevice {
    fn store(&self) -> &Mutex<SparseStore> {
        &self.store
    }
}

impl Device for MemoryDevice {
    crate::device::identity_from_geometry!();

    fn read(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.geometry
            .check_io(IoKind::Read, offset_bytes, buf.len() as u64)?;
        let read = self.store.lock().expect("store").read(offset_bytes, buf);
        read.map_err(|e| e.on_device(self.geometry.name()))
    }

    fn write(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.geometry
            .check_io(IoKind::Write, offset_bytes, data.len() as u64)?;
        self.change(|store| store.write(offset_bytes, data))
    }

    fn flush(&self) -> Result<(), DeviceError> {
        self.store.lock().expect("store").flush();
        Ok(())
    }

    fn forget(&self, offset_bytes: u64, len_bytes: u64) {
        self.store
            .lock()
            .expect("store")
            .forget(offset_bytes, len_bytes);
    }

    fn trim(&self, offset_bytes: u64, len_bytes: u64) -> Result<(), DeviceError> {
        self.geometry
            .check_io(IoKind::Trim, offset_bytes, len_bytes)?;
        self.change(|store| store.zero(offset_bytes, len_bytes))
    }
}
