//! # flashlab-devices: the storage devices the engine runs on
//!
//! Every byte the engine stores goes through one interface, [`Device`]: read,
//! write, flush, trim, capacity and sector size. Behind it stand real files
//! ([`file::FileDevice`]), plain memory ([`memory::MemoryDevice`]) and *models*
//! of the devices the papers measured: a magnetic disk with a rotating platter
//! and a seeking arm ([`hdd`]), NAND-flash SSDs with their flash translation
//! layers ([`ssd`]) and raw NAND without any FTL ([`nand`]).
//!
//! A model is pure timing: [`model::DeviceModel::submit`] takes the virtual time
//! a request arrives and answers when it completes, updating the model's state
//! (head position, die and channel timelines, the FTL's mapping tables). It
//! stores no data, which is what lets `flashlab replay` push a million requests
//! a second through it. [`sim::SimDevice`] joins a model to a sparse data store
//! and to the simulated runtime's clock: the calling task sleeps in virtual
//! time until the model says the request is done.
//!
//! [`fault`] is the fault model of the simulated world: a wrapper that
//! crashes, tears, flips, misdirects, fails and delays requests by a seeded
//! plan, cuts the power at chosen I/O events, and checks write-ahead logging
//! at the devices.
//!
//! [`scheduler`] is the block layer's elevator stage: a batch of queued
//! writes sorted by offset, adjacent ones merged into larger requests.
//!
//! [`trace`] records every I/O (submit and completion time, device, storage
//! space, operation, offset, length) and summarises it per device and space;
//! it also reads and writes the block-trace formats `flashlab replay` accepts.
//!
//! Presets ([`presets`]) name the devices of the papers; each number in a
//! preset says where it comes from, and every number comes from a device-level
//! figure (a datasheet, or `[devices.*]` of the papers' results), never from a
//! workload result.

pub mod characterize;
pub mod device;
pub mod error;
pub mod fault;
pub mod file;
pub mod hdd;
pub mod memory;
pub mod model;
pub mod nand;
pub mod nand_device;
pub mod overlay;
pub mod presets;
pub mod replay;
pub mod scheduler;
pub mod sim;
pub mod spec;
pub mod ssd;
pub mod store;
pub mod trace;

pub use device::{Device, DeviceRef, Wrapper};
pub use error::DeviceError;
pub use model::{DeviceModel, IoKind, IoRequest, ModelStats};
pub use trace::{Space, TraceRecord, busy_ns};
