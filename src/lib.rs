//! # flashlab
//!
//! A flash-aware transactional storage engine and the lab that measures it
//! against the database-on-flash papers (lee2008, petrov2010, lee2007,
//! wang2010). This crate re-exports the layers as one library:
//!
//! - [`runtime`]: the two worlds (real threads and files; deterministic
//!   simulation with virtual time and a CPU model);
//! - [`devices`]: files, memory, and models of disks, SSDs and raw NAND;
//! - [`engine`]: the transactional storage engine;
//! - [`lab`]: characterization, the report, plots.

pub use flashlab_devices as devices;
pub use flashlab_engine as engine;
pub use flashlab_lab as lab;
pub use flashlab_runtime as runtime;
