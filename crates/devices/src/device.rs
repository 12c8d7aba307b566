//! The one device interface the engine sees.
//!
//! A [`Device`] is shared by the tasks of a database (`Arc<dyn Device>`), so
//! every method takes `&self`. Reads and writes must be aligned to
//! [`Device::sector_bytes`] and stay within [`Device::capacity_bytes`]; a
//! device answers anything else with an error, never a panic.
//!
//! A write is durable once `flush` returns after it. What a crash keeps of a
//! write that was not yet flushed is up to the device (a disk with its write
//! cache off keeps every completed write; the fault model of the simulated
//! world may drop or tear it).

use std::sync::Arc;

use crate::error::DeviceError;
use crate::model::ModelStats;

/// A shared handle to a device.
pub type DeviceRef = Arc<dyn Device>;

/// A block device: a real file, memory, or a model in the simulated world.
pub trait Device: Send + Sync {
    /// The name shown in traces and errors (a preset name or a path).
    fn name(&self) -> &str;
    /// Bytes addressable.
    fn capacity_bytes(&self) -> u64;
    /// Alignment unit of offsets and lengths.
    fn sector_bytes(&self) -> u32;
    /// Read `buf.len()` bytes at `offset_bytes`. Unwritten sectors read as zeros.
    fn read(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), DeviceError>;
    /// Write `data` at `offset_bytes`.
    fn write(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError>;
    /// Make every completed write durable.
    fn flush(&self) -> Result<(), DeviceError>;
    /// Tell the device a range no longer holds data.
    fn trim(&self, offset_bytes: u64, len_bytes: u64) -> Result<(), DeviceError>;
    /// A hint, not an I/O: the caller will never read `offset_bytes..+len_bytes`
    /// back (the log behind its durable start). A device that keeps its data
    /// in memory frees it (it then reads as zeros); the media, the device
    /// model, its timing and the trace see nothing. Real devices and
    /// wrappers that must keep every byte (the fault model) ignore it.
    fn forget(&self, offset_bytes: u64, len_bytes: u64) {
        let _ = (offset_bytes, len_bytes);
    }
    /// What a modelled device counted (WAF, GC, erases); `None` for real ones.
    fn model_stats(&self) -> Option<ModelStats> {
        None
    }
}

/// The identity methods of a [`Device`] whose `geometry` field (a
/// [`crate::model::Geometry`]) holds its name, capacity and sector size:
/// written once for every device that keeps its own geometry.
macro_rules! identity_from_geometry {
    () => {
        fn name(&self) -> &str {
            self.geometry.name()
        }

        fn capacity_bytes(&self) -> u64 {
            self.geometry.capacity_bytes()
        }

        fn sector_bytes(&self) -> u32 {
            self.geometry.sector_bytes()
        }
    };
}
pub(crate) use identity_from_geometry;

/// A device that stands in front of another ([`Wrapper::inner`]) to count,
/// delay, check or fail its requests. Implement this instead of [`Device`]:
/// every request a wrapper does not override goes to the inner device as it
/// is. `forget` and `model_stats` keep [`Device`]'s defaults (a wrapper
/// keeps every byte and counts nothing) unless the wrapper overrides them.
pub trait Wrapper: Send + Sync {
    /// The device requests go on to.
    fn inner(&self) -> &dyn Device;
    fn name(&self) -> &str {
        self.inner().name()
    }
    fn capacity_bytes(&self) -> u64 {
        self.inner().capacity_bytes()
    }
    fn sector_bytes(&self) -> u32 {
        self.inner().sector_bytes()
    }
    fn read(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.inner().read(offset_bytes, buf)
    }
    fn write(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.inner().write(offset_bytes, data)
    }
    fn flush(&self) -> Result<(), DeviceError> {
        self.inner().flush()
    }
    fn trim(&self, offset_bytes: u64, len_bytes: u64) -> Result<(), DeviceError> {
        self.inner().trim(offset_bytes, len_bytes)
    }
    fn forget(&self, offset_bytes: u64, len_bytes: u64) {
        let _ = (offset_bytes, len_bytes);
    }
    fn model_stats(&self) -> Option<ModelStats> {
        None
    }
}

impl<W: Wrapper> Device for W {
    fn name(&self) -> &str {
        Wrapper::name(self)
    }
    fn capacity_bytes(&self) -> u64 {
        Wrapper::capacity_bytes(self)
    }
    fn sector_bytes(&self) -> u32 {
        Wrapper::sector_bytes(self)
    }
    fn read(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        Wrapper::read(self, offset_bytes, buf)
    }
    fn write(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        Wrapper::write(self, offset_bytes, data)
    }
    fn flush(&self) -> Result<(), DeviceError> {
        Wrapper::flush(self)
    }
    fn trim(&self, offset_bytes: u64, len_bytes: u64) -> Result<(), DeviceError> {
        Wrapper::trim(self, offset_bytes, len_bytes)
    }
    fn forget(&self, offset_bytes: u64, len_bytes: u64) {
        Wrapper::forget(self, offset_bytes, len_bytes)
    }
    fn model_stats(&self) -> Option<ModelStats> {
        Wrapper::model_stats(self)
    }
}
