//! A device wrapper that traces every request.
//!
//! [`TracedDevice`] sits between the engine and any [`Device`]: it reads the
//! runtime's clock before and after each request and records a
//! [`TraceRecord`] tagged with the storage space the device serves. In the
//! simulated world the times are virtual; in the real world, wall-clock.

use std::sync::Arc;

use flashlab_runtime::Rt;

use crate::device::{Device, DeviceRef};
use crate::error::DeviceError;
use crate::model::{IoKind, ModelStats};
use crate::trace::{Space, TraceRecord, Tracer};

/// Records every request of the device it wraps.
pub struct TracedDevice {
    inner: DeviceRef,
    space: Space,
    tracer: Tracer,
    name: Arc<str>,
}

impl TracedDevice {
    pub fn new(inner: DeviceRef, space: Space, tracer: Tracer) -> TracedDevice {
        let name: Arc<str> = Arc::from(inner.name());
        TracedDevice {
            inner,
            space,
            tracer,
            name,
        }
    }

    fn traced<T>(
        &self,
        kind: IoKind,
        offset_bytes: u64,
        len_bytes: u64,
        io: impl FnOnce() -> Result<T, DeviceError>,
    ) -> Result<T, DeviceError> {
        let rt = Rt::current();
        let submit_ns = rt.now_ns();
        let result = io();
        if result.is_ok() {
            self.tracer.record(TraceRecord {
                submit_ns,
                complete_ns: rt.now_ns(),
                device: self.name.clone(),
                space: self.space,
                kind,
                offset_bytes,
                len_bytes,
            });
        }
        result
    }
}

impl crate::device::Wrapper for TracedDevice {
    fn inner(&self) -> &dyn Device {
        &*self.inner
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn read(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let len = buf.len() as u64;
        self.traced(IoKind::Read, offset_bytes, len, || {
            self.inner.read(offset_bytes, buf)
        })
    }

    fn write(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        let len = data.len() as u64;
        self.traced(IoKind::Write, offset_bytes, len, || {
            self.inner.write(offset_bytes, data)
        })
    }

    fn flush(&self) -> Result<(), DeviceError> {
        self.traced(IoKind::Flush, 0, 0, || self.inner.flush())
    }

    fn trim(&self, offset_bytes: u64, len_bytes: u64) -> Result<(), DeviceError> {
        self.traced(IoKind::Trim, offset_bytes, len_bytes, || {
            self.inner.trim(offset_bytes, len_bytes)
        })
    }

    fn forget(&self, offset_bytes: u64, len_bytes: u64) {
        self.inner.forget(offset_bytes, len_bytes);
    }

    fn model_stats(&self) -> Option<ModelStats> {
        self.inner.model_stats()
    }
}
