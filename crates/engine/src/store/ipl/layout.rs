//! Where things are in an IPL space: erase units, data slots, the log
//! segment and its 512-byte log sectors (docs/FORMAT.md, "In-Page Logging").
//!
//! Physical erase unit 0 holds the space descriptor (its first sector);
//! units 1..=`logical_units` start as the homes of logical units
//! 0..`logical_units`; the rest are spares. Each erase unit holds
//! `pages_per_unit` data slots from its start and the log segment at its
//! end: sector 0 of the segment is the unit's commit sector (written last
//! by a merge), sectors 1.. are log sectors.

use crate::error::{Error, Result};

/// The erase unit IPL lays out (the K9WAG08U1A's 128 KB block).
pub const ERASE_UNIT_BYTES: u64 = 128 << 10;
/// A log sector: the unit of partial programming.
pub const LOG_SECTOR_BYTES: usize = 512;
/// Log segment sizes a space may be configured with (lee2007: 4 to 32 KB).
pub const LOG_SEGMENT_BYTES_ALLOWED: [u64; 4] = [4 << 10, 8 << 10, 16 << 10, 32 << 10];
/// The paper's log segment (results.toml `log_segment_kb = 8`).
pub const LOG_SEGMENT_BYTES_DEFAULT: u64 = 8 << 10;
/// Erase units kept free for merges beyond the logical units (one is
/// needed at a time; merges are serialised).
pub const SPARE_UNITS_MIN: u64 = 2;
/// Erase units reserved for the force marker ring (IPL-11): the last two
/// physical units, written in turn.
pub const MARKER_UNITS: u64 = 2;
/// Free erase units reserved beyond the spares for the deferred erases of
/// one force (IPL-12): a force may merge this many units whose old copies
/// stay until its marker is durable; one more fails the force with a
/// `SpaceFull` error naming the space.
pub const FORCE_MERGES_RESERVE: u64 = 8;

/// The shape of one IPL space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub page_bytes: usize,
    pub log_segment_bytes: u64,
    pub pages_per_unit: u32,
    pub physical_units: u32,
    pub logical_units: u32,
}

impl Layout {
    /// The layout of a space of `capacity_bytes` (whole erase units).
    pub fn new(
        page_bytes: usize,
        log_segment_bytes: u64,
        capacity_bytes: u64,
        space: &str,
    ) -> Result<Layout> {
        if !LOG_SEGMENT_BYTES_ALLOWED.contains(&log_segment_bytes) {
            return Err(Error::Config(format!(
                "space '{space}': IPL log segment of {log_segment_bytes} bytes; allowed 4, 8, 16 or 32 KB"
            )));
        }
        let pages_per_unit = (ERASE_UNIT_BYTES - log_segment_bytes) / page_bytes as u64;
        if pages_per_unit == 0 {
            return Err(Error::Config(format!(
                "space '{space}': {page_bytes}-byte pages leave no data page beside a {log_segment_bytes}-byte log segment in a {ERASE_UNIT_BYTES}-byte erase unit"
            )));
        }
        let physical_units = (capacity_bytes / ERASE_UNIT_BYTES).min(u64::from(u32::MAX));
        let reserved = 1 + MARKER_UNITS + SPARE_UNITS_MIN + FORCE_MERGES_RESERVE;
        if physical_units < reserved + 1 {
            return Err(Error::Config(format!(
                "space '{space}': {capacity_bytes} bytes hold {physical_units} erase units; IPL needs at least {}",
                reserved + 1
            )));
        }
        let spares = SPARE_UNITS_MIN.max((physical_units - 1) / 256) + FORCE_MERGES_RESERVE;
        Ok(Layout {
            page_bytes,
            log_segment_bytes,
            pages_per_unit: pages_per_unit as u32,
            physical_units: physical_units as u32,
            logical_units: (physical_units - 1 - MARKER_UNITS - spares) as u32,
        })
    }

    /// Pages the space holds.
    pub fn capacity_pages(&self) -> u64 {
        (u64::from(self.logical_units) * u64::from(self.pages_per_unit)).min(u64::from(u32::MAX))
    }

    /// Sectors of the log segment, the commit sector included.
    pub fn segment_sectors(&self) -> u16 {
        (self.log_segment_bytes / LOG_SECTOR_BYTES as u64) as u16
    }

    /// (logical unit, slot) of a page.
    pub fn place(&self, page_no: u32) -> (u32, u32) {
        (page_no / self.pages_per_unit, page_no % self.pages_per_unit)
    }

    /// Device offset of a physical unit.
    pub fn unit_bytes(&self, phys: u32) -> u64 {
        u64::from(phys) * ERASE_UNIT_BYTES
    }

    /// Device offset of a data slot.
    pub fn slot_bytes(&self, phys: u32, slot: u32) -> u64 {
        self.unit_bytes(phys) + u64::from(slot) * self.page_bytes as u64
    }

    /// Device offset of sector `index` of a unit's log segment.
    pub fn sector_bytes(&self, phys: u32, index: u16) -> u64 {
        self.unit_bytes(phys) + ERASE_UNIT_BYTES - self.log_segment_bytes
            + u64::from(index) * LOG_SECTOR_BYTES as u64
    }

    /// The physical units of the force marker ring (IPL-11): the last two.
    pub fn marker_unit(&self, which: u32) -> u32 {
        self.physical_units - MARKER_UNITS as u32 + which
    }

    /// Units that hold data (homes, copies, free units): all but the
    /// descriptor's and the marker ring's.
    pub fn data_units(&self) -> std::ops::Range<u32> {
        1..self.physical_units - MARKER_UNITS as u32
    }

    /// The physical home of a logical unit at format.
    pub fn home(&self, logical: u32) -> u32 {
        logical + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_unit_holds_15_pages_and_16_sectors() {
        let l = Layout::new(8192, 8 << 10, 2 << 30, "t").unwrap();
        assert_eq!(l.pages_per_unit, 15);
        assert_eq!(l.segment_sectors(), 16);
        assert_eq!(l.physical_units, 16384);
        assert_eq!(
            Layout::new(8192, 32 << 10, 2 << 30, "t")
                .unwrap()
                .pages_per_unit,
            12
        );
        assert_eq!(l.sector_bytes(1, 0), (1 << 17) + (120 << 10));
    }

    #[test]
    fn bad_segments_and_small_devices_are_one_line_errors() {
        let e = Layout::new(8192, 12 << 10, 2 << 30, "data")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'data'") && e.contains("12288"), "{e}");
        assert!(Layout::new(8192, 8 << 10, 3 << 17, "data").is_err());
        assert!(Layout::new(8192, 8 << 10, 13 << 17, "data").is_err());
        let l = Layout::new(8192, 8 << 10, 16 << 17, "data").unwrap();
        assert_eq!(l.logical_units, 16 - 1 - 2 - 2 - 8);
        assert_eq!((l.marker_unit(0), l.marker_unit(1)), (14, 15));
    }
}
