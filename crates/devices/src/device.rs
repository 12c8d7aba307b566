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
