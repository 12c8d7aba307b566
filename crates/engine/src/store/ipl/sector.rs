//! The 512-byte sectors of an IPL space: log sectors, commit sectors and
//! the space descriptor (docs/FORMAT.md, "In-Page Logging").
//!
//! Every sector starts with a 24-byte header:
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0 | 4 | magic: `IPLS` log sector, `IPLC` commit sector, `IPLD` descriptor |
//! | 4 | 4 | logical erase unit |
//! | 8 | 4 | generation of the unit (0 for a home never merged) |
//! | 12 | 2 | sector index in the log segment |
//! | 14 | 2 | payload bytes used |
//! | 16 | 1 | flags: bit 0 = last sector of its write group |
//! | 17 | 3 | reserved, zero |
//! | 20 | 4 | crc32c of bytes 0..20 and 24..512 |
//!
//! A log sector's payload is a run of records, each a 14-byte header (data
//! slot u16, offset in the page u16, length u16, transaction id u64) and
//! `length` bytes that replace the page's bytes at `offset`. A record never
//! spans sectors.
//!
//! Invariants (IPL-S n):
//! 1. A sector is accepted only if its magic, unit, generation, index and
//!    crc all match; an erased sector (all `0xFF`) is told apart from a
//!    damaged one.

use crate::error::{Error, Result};

use super::layout::LOG_SECTOR_BYTES;

/// Bytes of a sector header.
pub const SECTOR_HEADER_BYTES: usize = 24;
/// Payload bytes of a log sector.
pub const SECTOR_PAYLOAD_BYTES: usize = LOG_SECTOR_BYTES - SECTOR_HEADER_BYTES;
/// Bytes of a record header.
pub const RECORD_HEADER_BYTES: usize = 14;
/// Most data bytes of one record.
pub const RECORD_DATA_BYTES_MAX: usize = SECTOR_PAYLOAD_BYTES - RECORD_HEADER_BYTES;

pub const MAGIC_LOG: [u8; 4] = *b"IPLS";
pub const MAGIC_COMMIT: [u8; 4] = *b"IPLC";
pub const MAGIC_DESCRIPTOR: [u8; 4] = *b"IPLD";
/// A force marker (IPL-11), in the marker ring.
pub const MAGIC_MARKER: [u8; 4] = *b"IPLM";
/// Flag: the last sector of a write group.
pub const FLAG_GROUP_END: u8 = 1;

/// One physiological log record: bytes `data` at `offset` of the page in
/// data slot `slot`, written by transaction `txn` (0: the store's own
/// write-back difference, or no transaction).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub slot: u16,
    pub offset: u16,
    pub txn: u64,
    pub data: Vec<u8>,
}

impl Record {
    /// Bytes the record takes in a sector.
    pub fn encoded_bytes(&self) -> usize {
        RECORD_HEADER_BYTES + self.data.len()
    }

    /// Apply to a page image.
    pub fn apply(&self, page: &mut [u8]) -> Result<()> {
        let start = usize::from(self.offset);
        let end = start + self.data.len();
        if end > page.len() {
            return Err(Error::Malformed {
                what: "IPL log record",
                problem: format!("bytes {start}..{end} beyond a {}-byte page", page.len()),
            });
        }
        page[start..end].copy_from_slice(&self.data);
        Ok(())
    }
}

/// The force sequence number of a complete write group (IPL-11): the
/// transaction-id field of its last record, the header record (offset 0),
/// which carries the force's sequence instead of a transaction. A group of
/// an older format (no header record last, or 0) is force 0.
pub fn group_seq(group: &[Record]) -> u64 {
    group.last().filter(|r| r.offset == 0).map_or(0, |r| r.txn)
}

/// A force marker's payload: the force's sequence number and the log
/// position whose state it made durable.
pub fn encode_marker(seq: u64, lsn: u64) -> Vec<u8> {
    let mut p = seq.to_le_bytes().to_vec();
    p.extend_from_slice(&lsn.to_le_bytes());
    p
}

/// (sequence, LSN) of a marker's payload; `None` if it is not 16 bytes.
pub fn decode_marker(p: &[u8]) -> Option<(u64, u64)> {
    (p.len() == 16).then(|| {
        (
            u64::from_le_bytes(p[0..8].try_into().expect("8")),
            u64::from_le_bytes(p[8..16].try_into().expect("8")),
        )
    })
}

/// A commit sector's payload: the force whose merge wrote it (IPL-12); an
/// empty payload (older format) is force 0.
pub fn decode_tag(p: &[u8]) -> u64 {
    p.get(0..8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8")))
}

/// Records of `changes` (offset, bytes) split so none exceeds a sector.
pub fn records_of(slot: u16, txn: u64, changes: &[(u32, Vec<u8>)]) -> Vec<Record> {
    let mut out = Vec::new();
    for (offset, bytes) in changes {
        for (i, chunk) in bytes.chunks(RECORD_DATA_BYTES_MAX).enumerate() {
            out.push(Record {
                slot,
                offset: (*offset as usize + i * RECORD_DATA_BYTES_MAX) as u16,
                txn,
                data: chunk.to_vec(),
            });
        }
    }
    out
}

/// A decoded sector header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub magic: [u8; 4],
    pub unit: u32,
    pub generation: u32,
    pub index: u16,
    pub used: u16,
    pub flags: u8,
}

fn checksum(sector: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&sector[..20]);
    crc32c::crc32c_append(crc, &sector[SECTOR_HEADER_BYTES..])
}

/// A sealed sector of `header` and `payload`.
pub fn encode(header: Header, payload: &[u8]) -> Vec<u8> {
    assert!(
        payload.len() <= SECTOR_PAYLOAD_BYTES,
        "IPL-S: payload overflows a sector"
    );
    let mut s = vec![0u8; LOG_SECTOR_BYTES];
    s[0..4].copy_from_slice(&header.magic);
    s[4..8].copy_from_slice(&header.unit.to_le_bytes());
    s[8..12].copy_from_slice(&header.generation.to_le_bytes());
    s[12..14].copy_from_slice(&header.index.to_le_bytes());
    s[14..16].copy_from_slice(&(payload.len() as u16).to_le_bytes());
    s[16] = header.flags;
    s[SECTOR_HEADER_BYTES..SECTOR_HEADER_BYTES + payload.len()].copy_from_slice(payload);
    let crc = checksum(&s);
    s[20..24].copy_from_slice(&crc.to_le_bytes());
    s
}

/// What a sector read back is.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// Never programmed since the last erase.
    Erased,
    /// Programmed, and its crc or header does not hold: damage.
    Damaged(String),
    /// A sound sector.
    Sound(Header, &'a [u8]),
}

/// Decode one sector (IPL-S1).
pub fn decode(s: &[u8]) -> Decoded<'_> {
    debug_assert_eq!(s.len(), LOG_SECTOR_BYTES);
    if s.iter().all(|&b| b == 0xFF) {
        return Decoded::Erased;
    }
    let stored = u32::from_le_bytes(s[20..24].try_into().expect("4"));
    if stored != checksum(s) {
        return Decoded::Damaged(format!("crc32c mismatch (stored {stored:#010x})"));
    }
    let header = Header {
        magic: s[0..4].try_into().expect("4"),
        unit: u32::from_le_bytes(s[4..8].try_into().expect("4")),
        generation: u32::from_le_bytes(s[8..12].try_into().expect("4")),
        index: u16::from_le_bytes(s[12..14].try_into().expect("2")),
        used: u16::from_le_bytes(s[14..16].try_into().expect("2")),
        flags: s[16],
    };
    if usize::from(header.used) > SECTOR_PAYLOAD_BYTES {
        return Decoded::Damaged(format!("{} payload bytes", header.used));
    }
    let payload = &s[SECTOR_HEADER_BYTES..SECTOR_HEADER_BYTES + usize::from(header.used)];
    Decoded::Sound(header, payload)
}

/// Encode records into a payload (they must fit).
pub fn encode_records(records: &[Record]) -> Vec<u8> {
    let mut p = Vec::with_capacity(SECTOR_PAYLOAD_BYTES);
    for r in records {
        p.extend_from_slice(&r.slot.to_le_bytes());
        p.extend_from_slice(&r.offset.to_le_bytes());
        p.extend_from_slice(&(r.data.len() as u16).to_le_bytes());
        p.extend_from_slice(&r.txn.to_le_bytes());
        p.extend_from_slice(&r.data);
    }
    assert!(
        p.len() <= SECTOR_PAYLOAD_BYTES,
        "IPL-S: records overflow a sector"
    );
    p
}

/// Decode a payload's records.
pub fn decode_records(mut p: &[u8]) -> Result<Vec<Record>> {
    let mut out = Vec::new();
    while !p.is_empty() {
        if p.len() < RECORD_HEADER_BYTES {
            return Err(malformed("a record header is cut short"));
        }
        let slot = u16::from_le_bytes([p[0], p[1]]);
        let offset = u16::from_le_bytes([p[2], p[3]]);
        let len = usize::from(u16::from_le_bytes([p[4], p[5]]));
        let txn = u64::from_le_bytes(p[6..14].try_into().expect("8"));
        if p.len() < RECORD_HEADER_BYTES + len {
            return Err(malformed("a record's bytes are cut short"));
        }
        out.push(Record {
            slot,
            offset,
            txn,
            data: p[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + len].to_vec(),
        });
        p = &p[RECORD_HEADER_BYTES + len..];
    }
    Ok(out)
}

fn malformed(problem: &str) -> Error {
    Error::Malformed {
        what: "IPL log sector",
        problem: problem.to_string(),
    }
}

/// The log sectors of one write group: `sectors` (from [`pack`]) of
/// logical unit `unit`, generation `generation`, from log sector `first`
/// on; the last carries the group-end flag.
pub fn encode_group(unit: u32, generation: u32, first: u16, sectors: &[Vec<Record>]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(sectors.len() * LOG_SECTOR_BYTES);
    for (i, recs) in sectors.iter().enumerate() {
        let header = Header {
            magic: MAGIC_LOG,
            unit,
            generation,
            index: first + i as u16,
            used: 0,
            flags: if i + 1 == sectors.len() {
                FLAG_GROUP_END
            } else {
                0
            },
        };
        bytes.extend(encode(header, &encode_records(recs)));
    }
    bytes
}

/// Pack records into sector payloads, in order, none split.
pub fn pack(records: &[Record]) -> Vec<Vec<Record>> {
    let mut sectors: Vec<Vec<Record>> = Vec::new();
    let mut used = SECTOR_PAYLOAD_BYTES;
    for r in records {
        if used + r.encoded_bytes() > SECTOR_PAYLOAD_BYTES {
            sectors.push(Vec::new());
            used = 0;
        }
        used += r.encoded_bytes();
        sectors.last_mut().expect("pushed").push(r.clone());
    }
    sectors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_any_flip_is_caught() {
        let records = records_of(3, 77, &[(20, vec![1, 2, 3]), (4000, vec![9; 600])]);
        assert_eq!(
            records.len(),
            3,
            "600 bytes split at {RECORD_DATA_BYTES_MAX}"
        );
        let sectors = pack(&records);
        assert_eq!(sectors.len(), 3, "a record never spans sectors");
        let header = Header {
            magic: MAGIC_LOG,
            unit: 5,
            generation: 2,
            index: 1,
            used: 0,
            flags: FLAG_GROUP_END,
        };
        let s = encode(header, &encode_records(&sectors[0]));
        match decode(&s) {
            Decoded::Sound(h, p) => {
                assert_eq!((h.unit, h.generation, h.index, h.flags), (5, 2, 1, 1));
                assert_eq!(decode_records(p).unwrap(), sectors[0]);
            }
            other => panic!("{other:?}"),
        }
        for bit in [0usize, 100, 20 * 8, 4095] {
            let mut bad = s.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(matches!(decode(&bad), Decoded::Damaged(_)), "bit {bit}");
        }
        assert_eq!(decode(&[0xFF; 512]), Decoded::Erased);
    }
}
