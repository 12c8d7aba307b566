//! Raw NAND flash, without a flash translation layer.
//!
//! An FTL hides the rules of NAND behind a disk-like interface; a storage
//! manager that wants to exploit them (In-Page Logging, lee2007, keeps log
//! sectors in the erase unit of the data they describe) has to see them.
//! [`RawNand`] is that bare medium: pages are read and programmed whole,
//! blocks erased whole, and the rules are enforced instead of hidden:
//!
//! 1. (NAND-1) A page is programmed only when erased: programming a
//!    programmed page is [`DeviceError::ProgramProgrammed`].
//! 2. (NAND-2) Within a block pages are programmed in order, page 0 first:
//!    skipping ahead is [`DeviceError::ProgramOutOfOrder`]. (So a page is
//!    programmed exactly when its index is below the block's write pointer.)
//! 3. (NAND-3) An erased page reads as all `0xFF` bytes.
//!
//! Addresses are those of [`Geometry`]: blocks numbered plane by plane,
//! physical page number `ppn = block * pages_per_block + page`.
//!
//! Timing is that of the SSD model's flash side, with the same [`Timing`]:
//! every die and every channel has a timeline (busy-until, in virtual
//! nanoseconds). A read occupies the die for the array read and then die and
//! channel for the transfer out; a program occupies the channel for the
//! transfer in and the die until the program is done; an erase occupies the
//! die. Each call takes the submission time and answers the completion time,
//! so a caller that issues operations to different dies at the same time
//! sees them overlap. There is no controller or host link: the caller *is*
//! the controller. Submission times should not decrease (as for
//! [`crate::model::DeviceModel`]); an earlier one is treated as the latest.
//!
//! Data is stored sparsely: a block owns a buffer only while it holds
//! programmed pages, growing page by page (in-order programming makes that
//! a simple append), and dropped on erase.

use crate::error::DeviceError;
use crate::ssd::geometry::{Geometry, Timing, transfer_ns};

/// The byte an erased NAND cell reads as (NAND-3).
pub const ERASED_BYTE: u8 = 0xFF;

/// What a raw NAND device counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NandStats {
    pub pages_read: u64,
    pub pages_programmed: u64,
    pub blocks_erased: u64,
}

/// A raw NAND device. See the module documentation.
pub struct RawNand {
    name: String,
    geometry: Geometry,
    timing: Timing,
    page_bytes: usize,
    pages_per_die: u64,
    dies_per_channel: u32,
    page_channel_ns: u64,
    /// Next page to program in each block (NAND-2).
    write_ptr: Vec<u32>,
    erase_counts: Vec<u32>,
    /// Programmed pages of each block, concatenated; empty when erased.
    data: Vec<Vec<u8>>,
    die_ns: Vec<u64>,
    channel_ns: Vec<u64>,
    latest_submit_ns: u64,
    stats: NandStats,
}

impl RawNand {
    /// A fully erased device. Over-provisioning in `geometry` is ignored:
    /// every block is visible.
    pub fn new(name: &str, geometry: Geometry, timing: Timing) -> Result<RawNand, DeviceError> {
        geometry.validate(name)?;
        if timing.channel_bytes_per_s == 0 {
            return Err(DeviceError::Geometry {
                device: name.to_string(),
                problem: "channel rate must be above zero".to_string(),
            });
        }
        let blocks = geometry.blocks() as usize;
        Ok(RawNand {
            name: name.to_string(),
            page_bytes: geometry.page_bytes as usize,
            pages_per_die: u64::from(geometry.planes_per_die)
                * u64::from(geometry.blocks_per_plane)
                * u64::from(geometry.pages_per_block),
            dies_per_channel: geometry.chips_per_channel * geometry.dies_per_chip,
            page_channel_ns: transfer_ns(
                u64::from(geometry.page_bytes),
                timing.channel_bytes_per_s,
            ),
            write_ptr: vec![0; blocks],
            erase_counts: vec![0; blocks],
            data: vec![Vec::new(); blocks],
            die_ns: vec![0; geometry.dies() as usize],
            channel_ns: vec![0; geometry.channels as usize],
            latest_submit_ns: 0,
            stats: NandStats::default(),
            geometry,
            timing,
        })
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// The timing.
    pub fn timing(&self) -> &Timing {
        &self.timing
    }

    /// Bytes per page: the length every read and program buffer must have.
    pub fn page_bytes(&self) -> usize {
        self.page_bytes
    }

    /// Pages on the device.
    pub fn pages(&self) -> u64 {
        self.geometry.pages()
    }

    /// Blocks on the device.
    pub fn blocks(&self) -> u64 {
        self.geometry.blocks()
    }

    /// Whether a page holds programmed data (false for an unknown page).
    pub fn is_programmed(&self, ppn: u64) -> bool {
        let ppb = u64::from(self.geometry.pages_per_block);
        self.write_ptr
            .get((ppn / ppb) as usize)
            .is_some_and(|&next| ppn % ppb < u64::from(next))
    }

    /// The next page of `block` that may be programmed (NAND-2);
    /// `pages_per_block` when the block is full, `None` for an unknown block.
    pub fn next_page(&self, block: u64) -> Option<u32> {
        self.write_ptr.get(block as usize).copied()
    }

    /// Erase count of one block (`None` for an unknown block).
    pub fn erase_count(&self, block: u64) -> Option<u32> {
        self.erase_counts.get(block as usize).copied()
    }

    /// Erase count of every block.
    pub fn erase_counts(&self) -> &[u32] {
        &self.erase_counts
    }

    /// What was counted so far.
    pub fn stats(&self) -> NandStats {
        self.stats.clone()
    }

    /// Read page `ppn` into `buf` (exactly one page long), submitted at
    /// `now_ns`; answers when the data has crossed the channel. An erased
    /// page reads as `0xFF` (NAND-3).
    pub fn read_page(&mut self, now_ns: u64, ppn: u64, buf: &mut [u8]) -> Result<u64, DeviceError> {
        self.check_page(ppn, buf.len())?;
        let (block, page) = self.split(ppn);
        let start = page * self.page_bytes;
        match self.data[block].get(start..start + self.page_bytes) {
            Some(stored) => buf.copy_from_slice(stored),
            None => buf.fill(ERASED_BYTE),
        }
        self.stats.pages_read += 1;
        let now_ns = self.submitted(now_ns);
        let (die, channel) = self.die_and_channel(ppn);
        let read_done = now_ns.max(self.die_ns[die]) + self.timing.page_read_ns;
        let done = read_done.max(self.channel_ns[channel]) + self.page_channel_ns;
        self.channel_ns[channel] = done;
        self.die_ns[die] = done;
        Ok(done)
    }

    /// Program page `ppn` with `data` (exactly one page long), submitted at
    /// `now_ns`; answers when the program is done. The page must be the
    /// next erased page of its block (NAND-1, NAND-2).
    pub fn program_page(&mut self, now_ns: u64, ppn: u64, data: &[u8]) -> Result<u64, DeviceError> {
        self.check_page(ppn, data.len())?;
        let (block, page) = self.split(ppn);
        let next = self.write_ptr[block] as usize;
        if page < next {
            return Err(DeviceError::ProgramProgrammed {
                device: self.name.clone(),
                block: block as u64,
                page: page as u64,
            });
        }
        if page > next {
            return Err(DeviceError::ProgramOutOfOrder {
                device: self.name.clone(),
                block: block as u64,
                page: page as u64,
                next: next as u64,
            });
        }
        self.data[block].extend_from_slice(data);
        self.write_ptr[block] += 1;
        self.stats.pages_programmed += 1;
        let now_ns = self.submitted(now_ns);
        let (die, channel) = self.die_and_channel(ppn);
        let start = now_ns.max(self.die_ns[die]).max(self.channel_ns[channel]);
        let sent = start + self.page_channel_ns;
        self.channel_ns[channel] = sent;
        let done = sent + self.timing.page_program_ns;
        self.die_ns[die] = done;
        Ok(done)
    }

    /// Erase `block`, submitted at `now_ns`; answers when done. Every page
    /// of the block reads `0xFF` afterwards and may be programmed again.
    pub fn erase_block(&mut self, now_ns: u64, block: u64) -> Result<u64, DeviceError> {
        if block >= self.geometry.blocks() {
            return Err(self.out_of_range(block * u64::from(self.geometry.pages_per_block), 0));
        }
        let b = block as usize;
        self.data[b] = Vec::new();
        self.write_ptr[b] = 0;
        self.erase_counts[b] = self.erase_counts[b].saturating_add(1);
        self.stats.blocks_erased += 1;
        let now_ns = self.submitted(now_ns);
        let die = self.geometry.die_of_block(block) as usize;
        let done = now_ns.max(self.die_ns[die]) + self.timing.block_erase_ns;
        self.die_ns[die] = done;
        Ok(done)
    }

    fn submitted(&mut self, now_ns: u64) -> u64 {
        self.latest_submit_ns = self.latest_submit_ns.max(now_ns);
        self.latest_submit_ns
    }

    fn split(&self, ppn: u64) -> (usize, usize) {
        let ppb = u64::from(self.geometry.pages_per_block);
        ((ppn / ppb) as usize, (ppn % ppb) as usize)
    }

    fn die_and_channel(&self, ppn: u64) -> (usize, usize) {
        let die = (ppn / self.pages_per_die) as usize;
        (die, die / self.dies_per_channel as usize)
    }

    fn check_page(&self, ppn: u64, len: usize) -> Result<(), DeviceError> {
        if ppn >= self.geometry.pages() {
            return Err(self.out_of_range(ppn, len as u64));
        }
        if len != self.page_bytes {
            return Err(DeviceError::Unaligned {
                device: self.name.clone(),
                offset_bytes: ppn * self.page_bytes as u64,
                len_bytes: len as u64,
                sector_bytes: self.geometry.page_bytes,
            });
        }
        Ok(())
    }

    fn out_of_range(&self, ppn: u64, len_bytes: u64) -> DeviceError {
        DeviceError::OutOfRange {
            device: self.name.clone(),
            offset_bytes: ppn.saturating_mul(self.page_bytes as u64),
            len_bytes,
            capacity_bytes: self.geometry.physical_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 channels x 1 chip x 2 dies x 1 plane, 4 blocks of 4 pages of 2 KiB;
    /// channel 32 MB/s, so a page crosses in exactly 64 us.
    fn nand() -> RawNand {
        let geometry = Geometry {
            channels: 2,
            chips_per_channel: 1,
            dies_per_chip: 2,
            planes_per_die: 1,
            blocks_per_plane: 4,
            pages_per_block: 4,
            page_bytes: 2048,
            over_provisioning: 0.0,
        };
        let timing = Timing {
            page_read_ns: 80_000,
            page_program_ns: 200_000,
            block_erase_ns: 1_500_000,
            channel_bytes_per_s: 32_000_000,
            host_bytes_per_s: 66_000_000,
            controller_overhead_ns: 0,
        };
        RawNand::new("nand", geometry, timing).unwrap()
    }

    const TRANSFER_NS: u64 = 64_000;

    #[test]
    fn erased_pages_read_as_ff() {
        let mut n = nand();
        let mut buf = vec![0u8; 2048];
        n.read_page(0, 5, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == ERASED_BYTE));
        assert!(!n.is_programmed(5));
    }

    #[test]
    fn program_then_read_back() {
        let mut n = nand();
        let page: Vec<u8> = (0..2048).map(|i| i as u8).collect();
        n.program_page(0, 4, &page).unwrap();
        n.program_page(0, 5, &[7u8; 2048]).unwrap();
        let mut buf = vec![0u8; 2048];
        n.read_page(0, 4, &mut buf).unwrap();
        assert_eq!(buf, page);
        n.read_page(0, 5, &mut buf).unwrap();
        assert_eq!(buf, vec![7u8; 2048]);
        assert!(n.is_programmed(5) && !n.is_programmed(6));
        assert_eq!(n.next_page(1), Some(2));
    }

    /// Programs that break the NAND rules: each refused, changing nothing.
    #[test]
    fn programming_a_programmed_page_or_out_of_order_is_refused() {
        type Refusal = fn(&DeviceError) -> bool;
        // (case, pages programmed first, page programmed, refusal): all in block 0
        let cases: [(&str, &[u64], u64, Refusal); 2] = [
            ("a programmed page", &[0], 0, |e| {
                matches!(
                    e,
                    DeviceError::ProgramProgrammed {
                        block: 0,
                        page: 0,
                        ..
                    }
                )
            }),
            ("out of order", &[], 2, |e| {
                matches!(
                    e,
                    DeviceError::ProgramOutOfOrder {
                        block: 0,
                        page: 2,
                        next: 0,
                        ..
                    }
                )
            }),
        ];
        for (case, before, page, refusal) in cases {
            let mut n = nand();
            for &p in before {
                n.program_page(0, p, &[1u8; 2048]).unwrap();
            }
            let err = n.program_page(0, page, &[2u8; 2048]).unwrap_err();
            assert!(refusal(&err), "{case}: {err}");
            let mut buf = vec![0u8; 2048];
            n.read_page(0, page, &mut buf).unwrap();
            let held = if before.contains(&page) {
                1
            } else {
                ERASED_BYTE
            };
            assert!(
                buf.iter().all(|&b| b == held),
                "{case}: the refused program changed nothing"
            );
        }
    }

    #[test]
    fn erase_makes_pages_programmable_again() {
        let mut n = nand();
        for ppn in 0..4 {
            n.program_page(0, ppn, &[3u8; 2048]).unwrap();
        }
        n.erase_block(0, 0).unwrap();
        assert_eq!(n.erase_count(0), Some(1));
        let mut buf = vec![0u8; 2048];
        n.read_page(0, 3, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == ERASED_BYTE));
        n.program_page(0, 0, &[4u8; 2048]).unwrap();
        assert_eq!(n.stats().blocks_erased, 1);
    }

    #[test]
    fn idle_timing_is_the_hand_sum() {
        let mut n = nand();
        // Read: array read, then transfer.
        assert_eq!(
            n.read_page(0, 0, &mut [0u8; 2048]).unwrap(),
            80_000 + TRANSFER_NS
        );
        // Program on another die of the other channel: transfer, then program.
        let ppn_die1 = 16;
        let t = 1_000_000;
        assert_eq!(
            n.program_page(t, ppn_die1, &[0u8; 2048]).unwrap(),
            t + TRANSFER_NS + 200_000
        );
        // Erase of a block on an idle die.
        let t = 5_000_000;
        assert_eq!(n.erase_block(t, 9).unwrap(), t + 1_500_000);
    }

    #[test]
    fn same_die_serialises_other_dies_overlap() {
        let mut n = nand();
        let a = n.program_page(0, 0, &[0u8; 2048]).unwrap();
        let b = n.program_page(0, 1, &[0u8; 2048]).unwrap();
        assert_eq!(b, a + TRANSFER_NS + 200_000, "same die waits");
        // Die 2 (block 8) is on channel 1: fully parallel.
        let c = n.program_page(0, 32, &[0u8; 2048]).unwrap();
        assert_eq!(c, a);
        // Die 1 (block 4) shares channel 0 with die 0: it waits only for the
        // bus, which carries page 1 to die 0 until b - 200 us.
        let d = n.program_page(0, 16, &[0u8; 2048]).unwrap();
        assert_eq!(d, b - 200_000 + TRANSFER_NS + 200_000);
    }

    #[test]
    fn bad_addresses_and_lengths_are_errors() {
        let mut n = nand();
        assert!(matches!(
            n.read_page(0, 64, &mut [0u8; 2048]),
            Err(DeviceError::OutOfRange { .. })
        ));
        assert!(matches!(
            n.program_page(0, 0, &[0u8; 512]),
            Err(DeviceError::Unaligned { .. })
        ));
        assert!(matches!(
            n.erase_block(0, 16),
            Err(DeviceError::OutOfRange { .. })
        ));
    }

    #[test]
    fn invalid_geometry_is_an_error() {
        let mut g = nand().geometry().clone();
        g.channels = 0;
        assert!(matches!(
            RawNand::new("bad", g, nand().timing().clone()),
            Err(DeviceError::Geometry { .. })
        ));
    }
}
