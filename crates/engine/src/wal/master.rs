//! The log's master record: where recovery starts.
//!
//! The first [`LOG_START_LSN`] bytes of the log device are reserved. Two
//! copies of the master record live in sectors 0 and 1 and are written
//! alternately, each with a sequence number and a checksum, so a torn write
//! of one copy leaves the other intact; the valid copy with the higher
//! sequence number wins. This is the log's only in-place write.
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0 | 8 | magic `b"FLSHLOG\0"` |
//! | 8 | 4 | format version |
//! | 12 | 4 | crc32c of bytes 16..512 |
//! | 16 | 8 | sequence number |
//! | 24 | 8 | LSN of the last complete checkpoint's begin record (0: none) |
//! | 32 | 480 | zero |

use crate::error::{Error, Result};

/// Sector size of log writes (the raw-device sector of lee2008).
pub const LOG_SECTOR_BYTES: u64 = 512;
/// First LSN of the log; the bytes before it hold the master record.
pub const LOG_START_LSN: u64 = 4096;
/// Magic number of a master record.
pub const LOG_MAGIC: &[u8; 8] = b"FLSHLOG\0";
/// Version of the log format.
pub const LOG_FORMAT_VERSION: u32 = 1;

/// The decoded master record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Master {
    pub sequence: u64,
    pub checkpoint_lsn: u64,
}

impl Master {
    /// Encode into one sector.
    pub fn encode(&self) -> Vec<u8> {
        let mut sector = vec![0u8; LOG_SECTOR_BYTES as usize];
        sector[0..8].copy_from_slice(LOG_MAGIC);
        sector[8..12].copy_from_slice(&LOG_FORMAT_VERSION.to_le_bytes());
        sector[16..24].copy_from_slice(&self.sequence.to_le_bytes());
        sector[24..32].copy_from_slice(&self.checkpoint_lsn.to_le_bytes());
        let crc = crc32c::crc32c(&sector[16..]);
        sector[12..16].copy_from_slice(&crc.to_le_bytes());
        sector
    }

    /// Decode one sector; `None` if it is not a valid master record.
    /// A valid record of another format version is an error.
    pub fn decode(sector: &[u8]) -> Result<Option<Master>> {
        if sector.len() < LOG_SECTOR_BYTES as usize || &sector[0..8] != LOG_MAGIC {
            return Ok(None);
        }
        let crc = u32::from_le_bytes(sector[12..16].try_into().expect("4 bytes"));
        if crc32c::crc32c(&sector[16..LOG_SECTOR_BYTES as usize]) != crc {
            return Ok(None);
        }
        let version = u32::from_le_bytes(sector[8..12].try_into().expect("4 bytes"));
        if version != LOG_FORMAT_VERSION {
            return Err(Error::Open(format!(
                "log format version {version} is not supported (this build reads version {LOG_FORMAT_VERSION})"
            )));
        }
        Ok(Some(Master {
            sequence: u64::from_le_bytes(sector[16..24].try_into().expect("8 bytes")),
            checkpoint_lsn: u64::from_le_bytes(sector[24..32].try_into().expect("8 bytes")),
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
    pub fn offset_bytes(sequence: u64) -> u64 {
        (sequence % 2) * LOG_SECTOR_BYTES
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
        };
        let b = Master {
            sequence: 5,
            checkpoint_lsn: 12000,
        };
        assert_eq!(Master::decode(&a.encode()).unwrap(), Some(a));
        assert_eq!(Master::newest([Some(a), Some(b)]), Some(b));
        let mut torn = b.encode();
        torn[30] ^= 1;
        assert_eq!(Master::decode(&torn).unwrap(), None);
        assert_eq!(Master::newest([Some(a), None]), Some(a));
    }

    #[test]
    fn other_version_is_an_error() {
        let mut sector = Master::default().encode();
        sector[8..12].copy_from_slice(&99u32.to_le_bytes());
        let crc = crc32c::crc32c(&sector[16..]);
        sector[12..16].copy_from_slice(&crc.to_le_bytes());
        assert!(
            Master::decode(&sector)
                .unwrap_err()
                .to_string()
                .contains("version 99")
        );
    }
}
