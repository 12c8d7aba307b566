//! A device in plain memory, without latency.
//!
//! lee2008 keeps its tables cached in memory so that only the log, rollback
//! and temporary spaces do I/O; a memory device stands for such a space in
//! either world. It completes every request at once and keeps the crash
//! semantics of [`SparseStore`]: unflushed writes are lost by a crash.

use std::sync::Mutex;

use crate::device::Device;
use crate::error::DeviceError;
use crate::model::{IoKind, IoRequest, check_request};
use crate::store::{SparseStore, StoredDevice};

/// Sector size of memory devices.
pub const MEMORY_SECTOR_BYTES: u32 = 512;

/// A zero-latency device backed by a sparse store.
pub struct MemoryDevice {
    name: String,
    capacity_bytes: u64,
    store: Mutex<SparseStore>,
}

impl MemoryDevice {
    pub fn new(name: &str, capacity_bytes: u64) -> MemoryDevice {
        MemoryDevice {
            name: name.to_string(),
            capacity_bytes,
            store: Mutex::new(SparseStore::new()),
        }
    }

    /// Lose every write since the last flush, as a power failure would.
    pub fn crash(&self) {
        self.store.lock().expect("store").crash();
    }

    fn check(&self, kind: IoKind, offset_bytes: u64, len_bytes: u64) -> Result<(), DeviceError> {
        let req = IoRequest {
            kind,
            offset_bytes,
            len_bytes,
        };
        check_request(&self.name, self.capacity_bytes, MEMORY_SECTOR_BYTES, &req)
    }
}

impl StoredDevice for MemoryDevice {
    fn store(&self) -> &Mutex<SparseStore> {
        &self.store
    }
}

impl Device for MemoryDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    fn sector_bytes(&self) -> u32 {
        MEMORY_SECTOR_BYTES
    }

    fn read(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.check(IoKind::Read, offset_bytes, buf.len() as u64)?;
        self.store.lock().expect("store").read(offset_bytes, buf);
        Ok(())
    }

    fn write(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.check(IoKind::Write, offset_bytes, data.len() as u64)?;
        self.store
            .lock()
            .expect("store")
            .write(offset_bytes, data)
            .map_err(|limit| unflushed_full(&self.name, limit))
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
        self.check(IoKind::Trim, offset_bytes, len_bytes)?;
        self.store
            .lock()
            .expect("store")
            .zero(offset_bytes, len_bytes)
            .map_err(|limit| unflushed_full(&self.name, limit))
    }
}

pub(crate) fn unflushed_full(device: &str, limit: u64) -> DeviceError {
    DeviceError::Full {
        device: device.to_string(),
        problem: format!("more than {limit} bytes written without a flush"),
    }
}
