//! Where the log lives on its device: a circular region of self-describing
//! log sectors.
//!
//! The log device starts with the master area ([`super::master`]); the rest
//! is the *log region*, an array of `sectors` log sectors used as a ring.
//! The log itself is a stream of record bytes; an LSN is a position in that
//! stream. Stream byte `lsn` lives in the payload of log sector
//! `k = lsn / payload_bytes`, which sits at region slot `k mod sectors`. So
//! the region is reused lap after lap, and old sectors are simply
//! overwritten once checkpoints have moved the log's start past them.
//!
//! Every log sector describes itself:
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0 | 4 | crc32c of bytes 4 .. sector end |
//! | 4 | 4 | salt: the log's incarnation, from the master record |
//! | 8 | 8 | sector number `k` (not the slot: it grows lap after lap) |
//! | 16 | 8 | durable LSN: the log was durable up to here when this sector was written |
//! | 24 | .. | payload: record bytes; unused bytes are zero |
//!
//! Assumption about the medium (stated as redb states its own): a sector
//! write is atomic; a crash leaves each sector of an unflushed write either
//! old or new, never a mixture. Hence a sector whose checksum fails was
//! *damaged* (a flipped bit, a bad write), never merely torn, and a sector
//! that holds an older lap, another incarnation or zeros is where the
//! written log *ends*. The durable LSN in each sector lets a later sector
//! prove that an earlier one was durable: if a sector beyond the end says
//! the log was durable past the end, the end is a lost write, not a crash.
//!
//! Invariants (LAYOUT-n):
//! 1. Sector `k` is written only at slot `k mod sectors`, with number `k`.
//! 2. A sector's durable LSN never exceeds the end of its own payload.

use crate::error::{Error, Result};

/// Bytes a sector's zero check ORs together before it looks at the result.
const ZERO_CHECK_BLOCK_BYTES: usize = 64;
/// Smallest log sector (the raw-device sector of lee2008).
pub const LOG_SECTOR_BYTES_MIN: u64 = 512;
/// Bytes of a log sector's header.
pub const SECTOR_HEADER_BYTES: usize = 24;
/// Bytes reserved at the start of the log device for the master record.
pub const LOG_MASTER_AREA_BYTES: u64 = 4096;
// The fault model tells master writes from log writes by its own copy.
const _: () = assert!(flashlab_devices::fault::LOG_MASTER_AREA_BYTES == LOG_MASTER_AREA_BYTES);
/// Fewest log sectors a log region may have.
pub const LOG_REGION_SECTORS_MIN: u64 = 64;

/// What a read of one log sector found.
#[derive(Debug, PartialEq, Eq)]
pub enum SectorState {
    /// The sector expected there, with its durable LSN.
    Valid { durable_lsn: u64 },
    /// Never written, an older lap, or another incarnation's sector: the
    /// written log ends before it.
    Stale,
    /// A sector of this incarnation with a later number (a leftover of an
    /// unfinished write, or a misdirected one), with its durable LSN.
    Ahead { number: u64, durable_lsn: u64 },
    /// A checksum failure or a sector that cannot be here.
    Damaged(String),
}

/// The geometry and identity of one log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogLayout {
    /// Bytes of a log sector: at least 512 and the device's sector.
    pub sector_bytes: u64,
    /// Device offset of slot 0.
    pub region_start: u64,
    /// Slots in the region.
    pub sectors: u64,
    /// The log's incarnation.
    pub salt: u32,
}

impl LogLayout {
    /// The layout of a log device of `capacity_bytes` with `device_sector`
    /// bytes per sector.
    pub fn for_device(
        device_name: &str,
        capacity_bytes: u64,
        device_sector: u64,
        salt: u32,
    ) -> Result<LogLayout> {
        let sector_bytes = LOG_SECTOR_BYTES_MIN.max(device_sector);
        if !sector_bytes.is_power_of_two() || sector_bytes > (1 << 16) {
            return Err(Error::Config(format!(
                "log device '{device_name}' has {device_sector}-byte sectors; the log needs a power of two up to 64 KiB"
            )));
        }
        let region_start = LOG_MASTER_AREA_BYTES.max(2 * sector_bytes);
        let sectors = capacity_bytes.saturating_sub(region_start) / sector_bytes;
        if sectors < LOG_REGION_SECTORS_MIN {
            return Err(Error::Config(format!(
                "log device '{device_name}' of {capacity_bytes} bytes is too small: the log needs at least {} bytes",
                region_start + LOG_REGION_SECTORS_MIN * sector_bytes
            )));
        }
        Ok(LogLayout {
            sector_bytes,
            region_start,
            sectors,
            salt,
        })
    }

    /// Record bytes per sector.
    pub fn payload_bytes(&self) -> u64 {
        self.sector_bytes - SECTOR_HEADER_BYTES as u64
    }

    /// The first LSN of a new log: the start of sector 1 (LSN 0 means
    /// "none" everywhere).
    pub fn first_lsn(&self) -> u64 {
        self.payload_bytes()
    }

    /// The sector number holding stream byte `lsn`.
    pub fn sector_of(&self, lsn: u64) -> u64 {
        lsn / self.payload_bytes()
    }

    /// The first LSN of sector `k`.
    pub fn sector_lsn(&self, k: u64) -> u64 {
        k * self.payload_bytes()
    }

    /// Device offset of sector `k`.
    pub fn offset_of_sector(&self, k: u64) -> u64 {
        self.region_start + (k % self.sectors) * self.sector_bytes
    }

    /// Device offset of stream byte `lsn`.
    pub fn offset_of(&self, lsn: u64) -> u64 {
        self.offset_of_sector(self.sector_of(lsn))
            + SECTOR_HEADER_BYTES as u64
            + lsn % self.payload_bytes()
    }

    /// The LSN bound for a log whose oldest needed byte is `start_lsn`:
    /// every stream byte below it fits in the region without overwriting
    /// the sector of `start_lsn`.
    pub fn limit_lsn(&self, start_lsn: u64) -> u64 {
        self.sector_lsn(self.sector_of(start_lsn) + self.sectors)
    }

    /// Stream bytes the region holds at once.
    pub fn capacity_bytes(&self) -> u64 {
        self.sectors * self.payload_bytes()
    }

    /// Encode sector `k` with `payload` (at most `payload_bytes`, padded
    /// with zeros) into `out`.
    pub fn encode_sector(&self, k: u64, durable_lsn: u64, payload: &[u8], out: &mut Vec<u8>) {
        assert!(payload.len() as u64 <= self.payload_bytes(), "LAYOUT-1");
        assert!(durable_lsn <= self.sector_lsn(k + 1), "LAYOUT-2");
        let at = out.len();
        out.resize(at + self.sector_bytes as usize, 0);
        let sector = &mut out[at..];
        sector[4..8].copy_from_slice(&self.salt.to_le_bytes());
        sector[8..16].copy_from_slice(&k.to_le_bytes());
        sector[16..24].copy_from_slice(&durable_lsn.to_le_bytes());
        sector[SECTOR_HEADER_BYTES..SECTOR_HEADER_BYTES + payload.len()].copy_from_slice(payload);
        let crc = crc32c::crc32c(&sector[4..]);
        sector[0..4].copy_from_slice(&crc.to_le_bytes());
    }

    /// Classify the bytes read at the slot of sector `k`.
    pub fn decode_sector(&self, k: u64, sector: &[u8]) -> SectorState {
        if sector.len() as u64 != self.sector_bytes {
            return SectorState::Damaged(format!("short read of {} bytes", sector.len()));
        }
        // Zero or not, a block of bytes at a time (the OR of a block
        // vectorizes; a bytewise `all` does not).
        if sector
            .chunks(ZERO_CHECK_BLOCK_BYTES)
            .all(|block| block.iter().fold(0u8, |acc, &b| acc | b) == 0)
        {
            return SectorState::Stale;
        }
        let le64 = |at: usize| u64::from_le_bytes(sector[at..at + 8].try_into().expect("8 bytes"));
        let crc = u32::from_le_bytes(sector[0..4].try_into().expect("4 bytes"));
        if crc32c::crc32c(&sector[4..]) != crc {
            return SectorState::Damaged("log sector checksum mismatch".into());
        }
        let salt = u32::from_le_bytes(sector[4..8].try_into().expect("4 bytes"));
        if salt != self.salt {
            return SectorState::Stale;
        }
        let (number, durable_lsn) = (le64(8), le64(16));
        if number % self.sectors != k % self.sectors {
            return SectorState::Damaged(format!(
                "log sector {number} found at the slot of sector {k} (a misdirected write)"
            ));
        }
        match number.cmp(&k) {
            std::cmp::Ordering::Equal if durable_lsn <= self.sector_lsn(k + 1) => {
                SectorState::Valid { durable_lsn }
            }
            std::cmp::Ordering::Equal => SectorState::Damaged(format!(
                "log sector {k} claims durability to LSN {durable_lsn}, past its own end"
            )),
            std::cmp::Ordering::Less => SectorState::Stale,
            std::cmp::Ordering::Greater => SectorState::Ahead {
                number,
                durable_lsn,
            },
        }
    }

    /// The payload of a sector already classified as valid.
    pub fn payload<'a>(&self, sector: &'a [u8]) -> &'a [u8] {
        &sector[SECTOR_HEADER_BYTES..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> LogLayout {
        LogLayout::for_device("log", 4096 + 100 * 512, 512, 7).unwrap()
    }

    #[test]
    fn sectors_round_trip_and_are_classified() {
        let l = layout();
        assert_eq!(l.sectors, 100);
        assert_eq!(l.payload_bytes(), 488);
        let mut out = Vec::new();
        l.encode_sector(105, 488 * 104, b"hello", &mut out);
        assert_eq!(
            l.decode_sector(105, &out),
            SectorState::Valid {
                durable_lsn: 488 * 104
            }
        );
        assert_eq!(&l.payload(&out)[..5], b"hello");
        // The same slot one lap later: the sector is an older lap.
        assert_eq!(l.decode_sector(205, &out), SectorState::Stale);
        // One lap earlier: a sector from the future.
        assert!(matches!(
            l.decode_sector(5, &out),
            SectorState::Ahead { number: 105, .. }
        ));
        // Another slot: misdirected.
        assert!(matches!(
            l.decode_sector(106, &out),
            SectorState::Damaged(_)
        ));
        // Another incarnation.
        let other = LogLayout { salt: 8, ..l };
        assert_eq!(other.decode_sector(105, &out), SectorState::Stale);
        // Zeros: never written.
        assert_eq!(l.decode_sector(3, &[0u8; 512]), SectorState::Stale);
        // Any flipped bit is damage, never an end.
        for bit in [0, 40, 70, 130, 2000, 4095] {
            let mut bad = out.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(
                matches!(l.decode_sector(105, &bad), SectorState::Damaged(_)),
                "bit {bit}"
            );
        }
    }

    #[test]
    fn offsets_wrap_around_the_region() {
        let l = layout();
        assert_eq!(l.offset_of(l.first_lsn()), 4096 + 512 + 24);
        assert_eq!(l.offset_of_sector(100), 4096);
        assert_eq!(l.limit_lsn(488 * 10 + 5), 488 * 110);
        assert!(LogLayout::for_device("log", 4096 + 10 * 512, 512, 1).is_err());
    }
}
