//! The write gate of an open: a refused open writes nothing (OPEN-1).
//!
//! An open of a database directory for writing checks the files in stages:
//! the roles and identities of the files, then the log (analysis), then the
//! pages recovery reads (their checksums, ids, and page LSNs against the
//! end of the log, BUF-18), then the catalog. Some of those checks can only
//! run after recovery has begun to write: the log's leftovers are erased
//! before redo, a log-structured store writes a map checkpoint when it
//! opens, redo evicts pages. So every device of such an open is *gated*:
//! until the open has passed every check, its writes, trims and flushes go
//! to a journal in memory (and its reads see them, through an
//! [`OverlayDevice`]), and nothing reaches the files. When recovery has
//! finished, [`WriteGate::release`] replays the journal on the files in the
//! order it was written, flushes included, and opens the gate: the files
//! then see exactly the sequence of requests an ungated recovery would have
//! issued, only later (a crash during the replay leaves a prefix of it, as
//! a crash during that recovery would). A refused open drops the journal.
//!
//! Invariant OPEN-1: no request of a gated device reaches the device below
//! before [`WriteGate::release`]; after it, every request goes straight
//! through.

use std::sync::{Arc, Mutex};

use flashlab_devices::overlay::OverlayDevice;
use flashlab_devices::{Device, DeviceError, DeviceRef};

use crate::error::Result;

/// One request kept by a closed gate.
enum Op {
    Write {
        device: usize,
        offset_bytes: u64,
        data: Vec<u8>,
    },
    Trim {
        device: usize,
        offset_bytes: u64,
        len_bytes: u64,
    },
    Flush {
        device: usize,
    },
}

#[derive(Default)]
struct State {
    open: bool,
    journal: Vec<Op>,
    bases: Vec<DeviceRef>,
}

/// The gate shared by the devices of one open.
#[derive(Default)]
pub(crate) struct WriteGate {
    state: Mutex<State>,
}

impl WriteGate {
    pub(crate) fn new() -> Arc<WriteGate> {
        Arc::new(WriteGate::default())
    }

    /// A device whose requests this gate holds until it is released.
    pub(crate) fn wrap(self: &Arc<Self>, base: DeviceRef) -> DeviceRef {
        let mut state = self.state.lock().expect("gate");
        let index = state.bases.len();
        state.bases.push(base.clone());
        Arc::new(GatedDevice {
            gate: self.clone(),
            index,
            view: OverlayDevice::new(base.clone()),
            base,
        })
    }

    fn is_open(&self) -> bool {
        self.state.lock().expect("gate").open
    }

    /// Replay the journal on the devices below, in order, and let every
    /// later request through. Called once the open has passed every check.
    pub(crate) fn release(&self) -> Result<()> {
        let (journal, bases) = {
            let mut state = self.state.lock().expect("gate");
            (std::mem::take(&mut state.journal), state.bases.clone())
        };
        // No std lock is held across the replay's I/O (SIM-7).
        for op in journal {
            match op {
                Op::Write {
                    device,
                    offset_bytes,
                    data,
                } => bases[device].write(offset_bytes, &data)?,
                Op::Trim {
                    device,
                    offset_bytes,
                    len_bytes,
                } => bases[device].trim(offset_bytes, len_bytes)?,
                Op::Flush { device } => bases[device].flush()?,
            }
        }
        self.state.lock().expect("gate").open = true;
        Ok(())
    }

    /// Keep `op`, unless the gate is open: then `Err(op)` to pass it on.
    fn keep(&self, op: Op) -> std::result::Result<(), Op> {
        let mut state = self.state.lock().expect("gate");
        if state.open {
            return Err(op);
        }
        state.journal.push(op);
        Ok(())
    }
}

/// A device of a gated open (see the module docs).
struct GatedDevice {
    gate: Arc<WriteGate>,
    index: usize,
    base: DeviceRef,
    /// What the device holds with the journal's writes laid over it.
    view: OverlayDevice,
}

impl GatedDevice {
    /// A write or a trim, `apply`: straight to the base once the gate is
    /// open; before, to the view, and `op` is kept for the release (or, if
    /// the gate opened meanwhile, `apply` goes on to the base after all).
    fn change(
        &self,
        op: impl FnOnce() -> Op,
        apply: impl Fn(&dyn Device) -> std::result::Result<(), DeviceError>,
    ) -> std::result::Result<(), DeviceError> {
        if self.gate.is_open() {
            return apply(&*self.base);
        }
        apply(&self.view)?;
        match self.gate.keep(op()) {
            Ok(()) => Ok(()),
            Err(_) => apply(&*self.base),
        }
    }
}

impl flashlab_devices::Wrapper for GatedDevice {
    fn inner(&self) -> &dyn Device {
        &*self.base
    }

    fn read(&self, offset_bytes: u64, buf: &mut [u8]) -> std::result::Result<(), DeviceError> {
        if self.gate.is_open() {
            return self.base.read(offset_bytes, buf);
        }
        self.view.read(offset_bytes, buf)
    }

    fn write(&self, offset_bytes: u64, data: &[u8]) -> std::result::Result<(), DeviceError> {
        let op = || Op::Write {
            device: self.index,
            offset_bytes,
            data: data.to_vec(),
        };
        self.change(op, |device| device.write(offset_bytes, data))
    }

    fn flush(&self) -> std::result::Result<(), DeviceError> {
        match self.gate.keep(Op::Flush { device: self.index }) {
            Ok(()) => Ok(()),
            Err(_) => self.base.flush(),
        }
    }

    fn trim(&self, offset_bytes: u64, len_bytes: u64) -> std::result::Result<(), DeviceError> {
        let op = || Op::Trim {
            device: self.index,
            offset_bytes,
            len_bytes,
        };
        self.change(op, |device| device.trim(offset_bytes, len_bytes))
    }

    fn model_stats(&self) -> Option<flashlab_devices::model::ModelStats> {
        self.base.model_stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flashlab_devices::memory::MemoryDevice;

    /// A zeroed memory device, a closed gate, and the device behind it.
    fn gated_memory() -> (DeviceRef, Arc<WriteGate>, DeviceRef) {
        let base: DeviceRef = Arc::new(MemoryDevice::new("base", 1 << 16));
        let gate = WriteGate::new();
        let gated = gate.wrap(base.clone());
        (base, gate, gated)
    }

    #[test]
    fn nothing_reaches_the_device_before_release_and_all_of_it_after() {
        let (base, gate, gated) = gated_memory();
        gated.write(512, &[7u8; 512]).unwrap();
        gated.flush().unwrap();
        let mut buf = vec![0u8; 1024];
        gated.read(0, &mut buf).unwrap();
        assert!(buf[512..].iter().all(|&b| b == 7), "reads see the journal");
        base.read(0, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0), "OPEN-1: the base was written");
        gate.release().unwrap();
        base.read(0, &mut buf).unwrap();
        assert!(
            buf[512..].iter().all(|&b| b == 7),
            "the journal was replayed"
        );
        gated.write(0, &[9u8; 512]).unwrap();
        base.read(0, &mut buf).unwrap();
        assert!(
            buf[..512].iter().all(|&b| b == 9),
            "an open gate passes writes"
        );
    }

    #[test]
    fn a_dropped_gate_writes_nothing() {
        let (base, gate, gated) = gated_memory();
        gated.write(0, &[1u8; 512]).unwrap();
        gated.trim(512, 512).unwrap();
        drop(gated);
        drop(gate);
        let mut buf = vec![1u8; 1024];
        base.read(0, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
    }
}
