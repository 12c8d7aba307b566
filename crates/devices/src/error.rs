//! Device errors. Each names the device and the problem in one line, so the
//! CLI can print it as is.

use thiserror::Error;

/// Everything a device can refuse or fail at.
#[derive(Debug, Error)]
pub enum DeviceError {
    /// A request reaches past the end of the device.
    #[error(
        "{device}: request at offset {offset_bytes} of {len_bytes} bytes reaches beyond the capacity of {capacity_bytes} bytes"
    )]
    OutOfRange {
        device: String,
        offset_bytes: u64,
        len_bytes: u64,
        capacity_bytes: u64,
    },
    /// Offset or length is not a multiple of the sector size.
    #[error(
        "{device}: request at offset {offset_bytes} of {len_bytes} bytes is not aligned to the {sector_bytes}-byte sector"
    )]
    Unaligned {
        device: String,
        offset_bytes: u64,
        len_bytes: u64,
        sector_bytes: u32,
    },
    /// A parameter set that cannot describe a real device.
    #[error("{device}: impossible geometry: {problem}")]
    Geometry { device: String, problem: String },
    /// The device has no room left (for example a file system that is full).
    #[error("{device}: space full: {problem}")]
    Full { device: String, problem: String },
    /// Raw NAND: programming a page that is not erased.
    #[error("{device}: page {page} of block {block} is already programmed; erase the block first")]
    ProgramProgrammed {
        device: String,
        block: u64,
        page: u64,
    },
    /// Raw NAND: pages of a block must be programmed in order.
    #[error("{device}: page {page} of block {block} programmed out of order (next is {next})")]
    ProgramOutOfOrder {
        device: String,
        block: u64,
        page: u64,
        next: u64,
    },
    /// The device could not read what was asked (a latent sector error).
    #[error("{device}: read error at offset {offset_bytes}")]
    ReadFailed { device: String, offset_bytes: u64 },
    /// A flush (fdatasync) failed. What it covered must be treated as lost.
    #[error("{device}: flush failed: {problem}")]
    FlushFailed { device: String, problem: String },
    /// A test's fault model refused the request because it breaks a rule
    /// the engine must keep (write-ahead logging); a test failure.
    #[error("{device}: refused: {problem}")]
    Refused { device: String, problem: String },
    /// An operating-system error on a real file.
    #[error("{device}: {op}: {source}")]
    Io {
        device: String,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// An unknown preset name.
    #[error("unknown device '{name}' (known: {known})")]
    UnknownPreset { name: String, known: String },
}

impl DeviceError {
    /// True when the error is "no room left", which the engine reports as a
    /// space-full error rather than an I/O failure.
    pub fn is_full(&self) -> bool {
        matches!(self, DeviceError::Full { .. })
            || matches!(self, DeviceError::Io { source, .. } if source.raw_os_error() == Some(libc::ENOSPC))
    }
}
