//! The log's master record: where recovery starts and what the log is.
//!
//! The first [`LOG_MASTER_AREA_BYTES`] bytes of the log device (or two log
//! sectors, if larger) are reserved. Two copies of the master record live
//! in log sectors 0 and 1 and are written alternately, each with a sequence
//! number and a checksum, so a torn write of one copy leaves the other
//! intact; the valid copy with the higher sequence number wins. These are
//! the log's only in-place writes.
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0 | 8 | magic `b"FLSHLOG\0"` |
//! | 8 | 4 | format version (3) |
//! | 12 | 4 | crc32c of bytes 0..12 and 16..512 |
//! | 16 | 8 | sequence number |
//! | 24 | 8 | LSN of the last complete checkpoint's begin record (0: none) |
//! | 32 | 8 | log start: the oldest LSN recovery may need |
//! | 40 | 4 | salt: the log's incarnation, carried by every log sector |
//! | 44 | 4 | log sector bytes |
//! | 48 | 8 | database identity (0: not recorded) |
//! | 56 | 8 | log bytes: the log's size on its device, fixed at creation |
//! | 64 | 448 | zero |
//!
//! The checksum covers the magic and the version too (format 3; format 2
//! checked bytes 16..512 only). A bit flipped in a copy's version then
//! makes that copy damaged, so the other copy serves, instead of the
//! database being refused as "another format" (simtest seed 3163 found
//! it).

use crate::error::{Error, Result};
pub use crate::wal::layout::LOG_MASTER_AREA_BYTES;

/// Bytes of the master record proper (the rest of its sector is zero).
pub const MASTER_BYTES: usize = 512;
/// Magic number of a master record.
pub const LOG_MAGIC: &[u8; 8] = b"FLSHLOG\0";
/// Version of the log format.
pub const LOG_FORMAT_VERSION: u32 = 3;
/// The format before the checksum covered the version: recognised only to
/// name it in the refusal.
const LOG_FORMAT_VERSION_UNSEALED_HEADER: u32 = 2;

/// The checksum of a master record: every byte of it but the checksum's
/// own (format 3).
fn seal(sector: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&sector[0..12]), &sector[16..MASTER_BYTES])
}

/// The decoded master record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Master {
    pub sequence: u64,
    pub checkpoint_lsn: u64,
    /// The oldest LSN recovery may need: the log region before it is free.
    pub start_lsn: u64,
    pub salt: u32,
    pub sector_bytes: u32,
    pub database_id: u64,
    /// The log's size on its device (the ring's geometry depends on it).
    pub capacity_bytes: u64,
}

impl Master {
    /// Encode into one log sector of `sector_bytes`.
    pub fn encode(&self, sector_bytes: usize) -> Vec<u8> {
        let mut sector = vec![0u8; sector_bytes.max(MASTER_BYTES)];
        sector[0..8].copy_from_slice(LOG_MAGIC);
        sector[8..12].copy_from_slice(&LOG_FORMAT_VERSION.to_le_bytes());
        sector[16..24].copy_from_slice(&self.sequence.to_le_bytes());
        sector[24..32].copy_from_slice(&self.checkpoint_lsn.to_le_bytes());
        sector[32..40].copy_from_slice(&self.start_lsn.to_le_bytes());
        sector[40..44].copy_from_slice(&self.salt.to_le_bytes());
        sector[44..48].copy_from_slice(&self.sector_bytes.to_le_bytes());
        sector[48..56].copy_from_slice(&self.database_id.to_le_bytes());
        sector[56..64].copy_from_slice(&self.capacity_bytes.to_le_bytes());
        let crc = seal(&sector);
        sector[12..16].copy_from_slice(&crc.to_le_bytes());
        sector
    }

    /// Decode one copy; `None` if it is not a valid master record (no
    /// magic, or a checksum that fails: a torn or damaged copy). A valid
    /// record of another format version is an error.
    pub fn decode(sector: &[u8]) -> Result<Option<Master>> {
        if sector.len() < MASTER_BYTES || &sector[0..8] != LOG_MAGIC {
            return Ok(None);
        }
        let le32 = |at: usize| u32::from_le_bytes(sector[at..at + 4].try_into().expect("4 bytes"));
        let le64 = |at: usize| u64::from_le_bytes(sector[at..at + 8].try_into().expect("8 bytes"));
        let version = le32(8);
        let unsupported = || {
            Err(Error::Open(format!(
                "log format version {version} is not supported (this build reads version {LOG_FORMAT_VERSION})"
            )))
        };
        if seal(sector) != le32(12) {
            // A format-2 copy is sealed without its version: name that
            // format, as nothing else would pass its checksum so.
            let format_2 = version == LOG_FORMAT_VERSION_UNSEALED_HEADER
                && crc32c::crc32c(&sector[16..MASTER_BYTES]) == le32(12);
            return if format_2 { unsupported() } else { Ok(None) };
        }
        if version != LOG_FORMAT_VERSION {
            return unsupported();
        }
        Ok(Some(Master {
            sequence: le64(16),
            checkpoint_lsn: le64(24),
            start_lsn: le64(32),
            salt: le32(40),
            sector_bytes: le32(44),
            database_id: le64(48),
            capacity_bytes: le64(56),
        }))
    }

    /// The newer valid copy of the two, if any.
    pub fn newest(copies: [Option<Master>; 2]) -> Option<Master> {
        match copies {
            [Some(a), Some(b)] => Some(if a.sequence >= b.sequence { a } else { b }),
            [a, b] => a.or(b),
        }
    }

    /// Device offset where the copy with this sequence number goes.
    pub fn offset_bytes(sequence: u64, sector_bytes: u64) -> u64 {
        (sequence % 2) * sector_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn master_round_trips_and_newest_wins() {
        let a = Master {
            sequence: 4,
            checkpoint_lsn: 9000,
            start_lsn: 800,
            salt: 77,
            sector_bytes: 512,
            database_id: 5,
            capacity_bytes: 1 << 20,
        };
        let b = Master {
            sequence: 5,
            checkpoint_lsn: 12000,
            ..a
        };
        assert_eq!(Master::decode(&a.encode(512)).unwrap(), Some(a));
        assert_eq!(Master::newest([Some(a), Some(b)]), Some(b));
        let mut torn = b.encode(512);
        torn[30] ^= 1;
        assert_eq!(Master::decode(&torn).unwrap(), None);
        assert_eq!(Master::newest([Some(a), None]), Some(a));
    }

    /// A sealed record of another version: `seal` as a later build would.
    fn sealed_as(version: u32) -> Vec<u8> {
        let mut sector = Master::default().encode(512);
        sector[8..12].copy_from_slice(&version.to_le_bytes());
        let crc = seal(&sector);
        sector[12..16].copy_from_slice(&crc.to_le_bytes());
        sector
    }

    #[test]
    fn other_version_is_an_error() {
        let error = Master::decode(&sealed_as(99)).unwrap_err().to_string();
        assert!(error.contains("version 99"), "{error}");
        // Format 2 sealed bytes 16..512 only.
        let mut sector = Master::default().encode(512);
        sector[8..12].copy_from_slice(&2u32.to_le_bytes());
        let crc = crc32c::crc32c(&sector[16..512]);
        sector[12..16].copy_from_slice(&crc.to_le_bytes());
        let error = Master::decode(&sector).unwrap_err().to_string();
        assert!(error.contains("version 2 is not supported"), "{error}");
    }

    /// simtest seed 3163: a bit flipped on the write of a master copy's
    /// version byte (2 became 130) was taken for another format, and the
    /// database refused to open as if it were one. Every bit of the magic,
    /// the version and the checksum now makes the copy damaged: the other
    /// copy serves.
    #[test]
    fn regression_a_flipped_bit_in_a_master_copys_header_is_damage_not_another_format() {
        let master = Master {
            sequence: 7,
            checkpoint_lsn: 4096,
            start_lsn: 1024,
            salt: 5,
            sector_bytes: 512,
            database_id: 9,
            capacity_bytes: 1 << 20,
        };
        let sector = master.encode(512);
        for bit in 0..16 * 8 {
            let mut flipped = sector.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(Master::decode(&flipped).unwrap(), None, "bit {bit}");
        }
        let older = Master {
            sequence: 6,
            ..master
        };
        let mut flipped = sector.clone();
        flipped[8] ^= 0x80;
        let copies = [&older.encode(512), &flipped].map(|c| Master::decode(c).unwrap());
        assert_eq!(Master::newest(copies), Some(older));
    }
}
