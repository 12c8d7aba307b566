//! A modelled device in the simulated world.
//!
//! [`SimDevice`] joins a timing model ([`DeviceModel`]) to a data store and
//! to the simulated clock. A request is checked, submitted to the model at
//! the current virtual time, applied to the store, and the calling task then
//! sleeps until the completion time the model gave. Many tasks may have
//! requests in flight at once; the model queues them as the real device
//! would (a disk's command queue, an SSD's dies and channels).
//!
//! A device outlives a simulation: crash tests cut a run, crash the devices
//! and recover in a new simulation whose clock starts again at zero. The
//! model's clock must not go backwards (MODEL-1), so [`SimDevice`] keeps an
//! offset between the runtime's clock and the model's: when the runtime's
//! clock is behind what the model has seen, the model's clock resumes at its
//! horizon (the last completion it gave), as a device that sat idle through
//! the power cycle would.
//!
//! The store is updated at submission, so a later read sees the data even
//! while the write is still "in flight"; crash semantics come from the store:
//! whatever was not flushed before a crash is lost (or kept, or torn, as the
//! fault model chooses).

use std::sync::Mutex;

use flashlab_runtime::Rt;

use crate::device::Device;
use crate::error::DeviceError;
use crate::memory::MemoryDevice;
use crate::model::{DeviceModel, Geometry, IoKind, IoRequest, ModelStats};
use crate::store::{CrashFate, SparseStore, StoredDevice};

/// Largest write [`SimDevice::preloaded`] submits to the model at once.
pub const PRELOAD_PIECE_BYTES: u64 = 256 << 10;

/// A device model with data, in virtual time.
pub struct SimDevice {
    /// The data, on the model's geometry: every request is checked and
    /// applied there as a memory device would, and only timed here.
    data: MemoryDevice,
    model: Mutex<Timed>,
}

/// A model and the mapping from runtime time to model time.
struct Timed {
    model: Box<dyn DeviceModel>,
    /// Model time = runtime time + offset.
    offset_ns: u64,
    /// Latest arrival the model was given (MODEL-1).
    last_arrival_ns: u64,
    /// Latest completion the model gave.
    horizon_ns: u64,
}

impl Timed {
    fn submit(&mut self, now_ns: u64, req: &IoRequest) -> u64 {
        if now_ns + self.offset_ns < self.last_arrival_ns {
            // A new simulation: resume the model's clock at its horizon.
            self.offset_ns = self.horizon_ns - now_ns;
        }
        let arrival_ns = now_ns + self.offset_ns;
        self.last_arrival_ns = arrival_ns;
        let done_ns = self.model.submit(arrival_ns, req).max(arrival_ns);
        self.horizon_ns = self.horizon_ns.max(done_ns);
        done_ns - self.offset_ns
    }
}

impl SimDevice {
    pub fn new(model: Box<dyn DeviceModel>) -> SimDevice {
        SimDevice {
            data: MemoryDevice::with_geometry(Geometry::new(
                model.name(),
                model.capacity_bytes(),
                model.sector_bytes(),
            )),
            model: Mutex::new(Timed {
                model,
                offset_ns: 0,
                last_arrival_ns: 0,
                horizon_ns: 0,
            }),
        }
    }

    /// A device whose model and store start as if `image` had been written
    /// to it: every written run of the image is submitted to the model (in
    /// address order, pieces of [`PRELOAD_PIECE_BYTES`], back to back from
    /// model time zero), so an SSD model maps what the image holds; the
    /// model's clock then resumes at its horizon in the next simulation.
    pub fn preloaded(model: Box<dyn DeviceModel>, image: SparseStore) -> SimDevice {
        let device = SimDevice::new(model);
        {
            let mut timed = device.model.lock().expect("model");
            let mut now_ns = 0u64;
            for (start, len) in image.written_runs() {
                let mut done = 0u64;
                while done < len {
                    let piece = (len - done).min(PRELOAD_PIECE_BYTES);
                    let req = IoRequest {
                        kind: IoKind::Write,
                        offset_bytes: start + done,
                        len_bytes: piece,
                    };
                    now_ns = timed.model.submit(now_ns, &req).max(now_ns);
                    done += piece;
                }
            }
            let flush = IoRequest {
                kind: IoKind::Flush,
                offset_bytes: 0,
                len_bytes: 0,
            };
            now_ns = timed.model.submit(now_ns, &flush).max(now_ns);
            timed.last_arrival_ns = now_ns;
            timed.horizon_ns = now_ns;
        }
        *device.store().lock().expect("store") = image;
        device
    }

    /// A copy of the device's contents, or `None` while writes are
    /// unflushed: what [`SimDevice::preloaded`] starts another device from.
    pub fn image(&self) -> Option<SparseStore> {
        self.store().lock().expect("store").image()
    }

    /// Lose every write since the last flush.
    pub fn crash(&self) {
        self.data.crash();
    }

    /// A crash where `fate` decides each unflushed write (see [`SparseStore::crash_with`]).
    pub fn crash_with(&self, fate: impl FnMut(usize, u64) -> CrashFate) {
        self.store().lock().expect("store").crash_with(fate);
    }

    /// Submit to the model and sleep until the request completes.
    fn timed(&self, kind: IoKind, offset_bytes: u64, len_bytes: u64) -> Result<(), DeviceError> {
        let req = IoRequest {
            kind,
            offset_bytes,
            len_bytes,
        };
        self.data.geometry().check(&req)?;
        let rt = Rt::current();
        let now_ns = rt.now_ns();
        let done_ns = self.model.lock().expect("model").submit(now_ns, &req);
        debug_assert!(done_ns >= now_ns, "MODEL-2");
        rt.sleep_until(done_ns);
        Ok(())
    }
}

impl StoredDevice for SimDevice {
    fn store(&self) -> &Mutex<SparseStore> {
        self.data.store()
    }
}

/// Requests go to the data as they would to a memory device; the model
/// times them (a write is applied before it is timed, see the module doc).
impl crate::device::Wrapper for SimDevice {
    fn inner(&self) -> &dyn Device {
        &self.data
    }

    fn read(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.timed(IoKind::Read, offset_bytes, buf.len() as u64)?;
        self.data.read(offset_bytes, buf)
    }

    fn write(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.data.write(offset_bytes, data)?;
        self.timed(IoKind::Write, offset_bytes, data.len() as u64)
    }

    fn flush(&self) -> Result<(), DeviceError> {
        let mark = self.store().lock().expect("store").flush_mark();
        self.timed(IoKind::Flush, 0, 0)?;
        self.store().lock().expect("store").flush_through(mark);
        Ok(())
    }

    fn trim(&self, offset_bytes: u64, len_bytes: u64) -> Result<(), DeviceError> {
        self.timed(IoKind::Trim, offset_bytes, len_bytes)?;
        self.data.trim(offset_bytes, len_bytes)
    }

    fn forget(&self, offset_bytes: u64, len_bytes: u64) {
        self.data.forget(offset_bytes, len_bytes);
    }

    fn model_stats(&self) -> Option<ModelStats> {
        Some(self.model.lock().expect("model").model.stats())
    }
}

#[cfg(test)]
mod tests {
    use flashlab_runtime::{Sim, SimConfig};

    use super::*;
    use crate::presets::build_model;

    /// A device preloaded with another's image reads what was written,
    /// and its model has mapped those pages (its reads cost flash reads).
    #[test]
    fn a_preloaded_device_reads_back_the_image_it_started_from() {
        let (image, unflushed_image) = Sim::run(SimConfig::default(), |_| {
            let device = SimDevice::new(build_model("ssd-2010").unwrap());
            device.write(8192, &[7u8; 4096]).unwrap();
            device.write(1 << 20, &[9u8; 8192]).unwrap();
            let unflushed = device.image().is_none();
            device.flush().unwrap();
            (device.image().unwrap(), unflushed)
        })
        .unwrap()
        .0
        .finished()
        .unwrap();
        assert!(unflushed_image, "an image was taken of unflushed writes");
        assert_eq!(image.written_runs(), vec![(8192, 4096), (1 << 20, 8192)]);
        let (bytes, stats) = Sim::run(SimConfig::default(), move |_| {
            let device = SimDevice::preloaded(build_model("ssd-2010").unwrap(), image);
            let mut a = vec![0u8; 4096];
            let mut b = vec![0u8; 8192];
            device.read(8192, &mut a).unwrap();
            device.read(1 << 20, &mut b).unwrap();
            ((a, b), device.model_stats().unwrap())
        })
        .unwrap()
        .0
        .finished()
        .unwrap();
        assert!(bytes.0.iter().all(|&x| x == 7) && bytes.1.iter().all(|&x| x == 9));
        assert!(
            stats.bytes_written >= 12288 && stats.flash_pages_read > 0,
            "{stats:?}"
        );
    }
}
