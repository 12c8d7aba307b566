//! SSD geometry and NAND timing.
//!
//! Physical addresses: blocks are numbered globally, plane by plane:
//! `block = plane_index * blocks_per_plane + block_in_plane`, and
//! `plane_index = ((channel * chips_per_channel + chip) * dies_per_chip +
//! die) * planes_per_die + plane`. A physical page number is
//! `ppn = block * pages_per_block + page_in_block`. Dies are the unit of
//! parallelism for array operations (read, program, erase); channels are the
//! unit of parallelism for data transfer.

use crate::error::DeviceError;

/// Most physical pages a modelled device may have (physical page numbers
/// are 32-bit in the FTLs' maps).
pub const PHYSICAL_PAGES_MAX: u64 = u32::MAX as u64;

/// The physical organisation of an SSD or a raw NAND device.
#[derive(Clone, Debug, PartialEq)]
pub struct Geometry {
    pub channels: u32,
    pub chips_per_channel: u32,
    pub dies_per_chip: u32,
    pub planes_per_die: u32,
    pub blocks_per_plane: u32,
    pub pages_per_block: u32,
    pub page_bytes: u32,
    /// Fraction of physical capacity hidden from the host (0.07 = 7%).
    pub over_provisioning: f64,
}

/// NAND and controller timing.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// Array read of one page into the die's register.
    pub page_read_ns: u64,
    /// Program of one page from the register.
    pub page_program_ns: u64,
    /// Erase of one block.
    pub block_erase_ns: u64,
    /// Data transfer rate of one channel (bytes per second).
    pub channel_bytes_per_s: u64,
    /// Host interface rate (bytes per second), shared by all requests.
    pub host_bytes_per_s: u64,
    /// Controller time per command (decode, mapping), serialised.
    pub controller_overhead_ns: u64,
}

impl Geometry {
    /// Check that the numbers can describe a device.
    pub fn validate(&self, device: &str) -> Result<(), DeviceError> {
        let problem = |p: &str| {
            Err(DeviceError::Geometry {
                device: device.to_string(),
                problem: p.to_string(),
            })
        };
        if self.channels == 0 {
            return problem("zero channels");
        }
        if self.chips_per_channel == 0 || self.dies_per_chip == 0 || self.planes_per_die == 0 {
            return problem("zero chips, dies or planes");
        }
        if self.blocks_per_plane == 0 || self.pages_per_block == 0 {
            return problem("zero blocks per plane or pages per block");
        }
        if self.page_bytes < 512 || !self.page_bytes.is_power_of_two() {
            return problem("page size must be a power of two of at least 512 bytes");
        }
        if !(0.0..0.9).contains(&self.over_provisioning) {
            return problem("over-provisioning must be in [0, 0.9)");
        }
        // Checked, before anything multiplies these numbers unchecked.
        let pages = [
            self.channels,
            self.chips_per_channel,
            self.dies_per_chip,
            self.planes_per_die,
            self.blocks_per_plane,
            self.pages_per_block,
        ]
        .iter()
        .try_fold(1u64, |acc, &n| acc.checked_mul(u64::from(n)));
        if pages.is_none_or(|p| p > PHYSICAL_PAGES_MAX) {
            return problem(&format!("more than {PHYSICAL_PAGES_MAX} physical pages"));
        }
        Ok(())
    }

    pub fn dies(&self) -> u32 {
        self.channels * self.chips_per_channel * self.dies_per_chip
    }

    pub fn planes(&self) -> u32 {
        self.dies() * self.planes_per_die
    }

    pub fn blocks(&self) -> u64 {
        u64::from(self.planes()) * u64::from(self.blocks_per_plane)
    }

    pub fn pages(&self) -> u64 {
        self.blocks() * u64::from(self.pages_per_block)
    }

    pub fn block_bytes(&self) -> u64 {
        u64::from(self.pages_per_block) * u64::from(self.page_bytes)
    }

    pub fn physical_bytes(&self) -> u64 {
        self.blocks() * self.block_bytes()
    }

    /// Logical pages the host can address after over-provisioning.
    pub fn logical_pages(&self) -> u64 {
        (self.pages() as f64 * (1.0 - self.over_provisioning)).floor() as u64
    }

    pub fn logical_bytes(&self) -> u64 {
        self.logical_pages() * u64::from(self.page_bytes)
    }

    /// The die that holds a block (index into `0..dies()`).
    pub fn die_of_block(&self, block: u64) -> u32 {
        let plane_index = block / u64::from(self.blocks_per_plane);
        (plane_index / u64::from(self.planes_per_die)) as u32
    }

    /// The plane (index into `0..planes()`) that holds a block.
    pub fn plane_of_block(&self, block: u64) -> u32 {
        (block / u64::from(self.blocks_per_plane)) as u32
    }

    /// The channel a die hangs on.
    pub fn channel_of_die(&self, die: u32) -> u32 {
        die / (self.chips_per_channel * self.dies_per_chip)
    }

    pub fn block_of_page(&self, ppn: u64) -> u64 {
        ppn / u64::from(self.pages_per_block)
    }
}

impl Timing {
    /// Nanoseconds to move `bytes` over one channel.
    pub fn channel_transfer_ns(&self, bytes: u64) -> u64 {
        transfer_ns(bytes, self.channel_bytes_per_s)
    }

    /// Nanoseconds to move `bytes` over the host interface.
    pub fn host_transfer_ns(&self, bytes: u64) -> u64 {
        transfer_ns(bytes, self.host_bytes_per_s)
    }
}

/// Time to move `bytes` at `bytes_per_s`, rounded up.
pub fn transfer_ns(bytes: u64, bytes_per_s: u64) -> u64 {
    debug_assert!(bytes_per_s > 0);
    ((u128::from(bytes) * 1_000_000_000).div_ceil(u128::from(bytes_per_s.max(1)))) as u64
}
