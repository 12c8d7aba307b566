//! The log-structured store's blocks on its device, byte by byte
//! (docs/FORMAT.md, "Log-structured data spaces").
//!
//! The device is an array of *blocks* of the space's page size: block 0 is
//! the superblock, then two map-checkpoint slots of `map_blocks` blocks
//! each, then `segments` segments of `blocks_per_segment` blocks each.
//! Every block the store writes for itself (superblock, summaries,
//! map-checkpoint blocks) starts with a crc32c of the rest of the block and
//! a magic, and keeps bytes 12..20 zero: where a page has its page LSN, so
//! no reader of page headers (the WAL checker of the fault model) mistakes
//! a store block for a page.

use crate::error::{Error, Result};

/// Superblock magic, at offset 24 like a space header's `FLSP` (so the
/// directory's role check recognises a data file, `db/roles.rs`).
pub const SUPER_MAGIC: &[u8; 4] = b"FLLS";
/// Offset of [`SUPER_MAGIC`] in block 0.
pub const SUPER_MAGIC_OFFSET: usize = 24;
/// Format version of the log-structured layout.
pub const FORMAT_VERSION: u32 = 1;
/// Magic of a segment summary block (offset 4).
pub const SUMMARY_MAGIC: &[u8; 4] = b"FLSS";
/// Magic of a map checkpoint's header block (offset 4).
pub const MAP_HEADER_MAGIC: &[u8; 4] = b"FLMC";
/// Magic of a map checkpoint's body block (offset 4).
pub const MAP_BODY_MAGIC: &[u8; 4] = b"FLMB";
/// Bytes of a summary before its entries.
pub const SUMMARY_HEADER_BYTES: usize = 48;
/// Bytes of one summary entry: page number u32, page crc u32, page LSN u64.
pub const SUMMARY_ENTRY_BYTES: usize = 16;
/// Bytes of a map-checkpoint body block before its words.
pub const MAP_BODY_HEADER_BYTES: usize = 24;

pub(super) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

pub(super) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Seal a store block: crc32c of bytes 4.. into bytes 0..4.
pub(super) fn seal(block: &mut [u8]) {
    let crc = crc32c::crc32c(&block[4..]);
    put_u32(block, 0, crc);
}

/// Whether a store block's crc32c matches.
pub fn sealed(block: &[u8]) -> bool {
    u32_at(block, 0) == crc32c::crc32c(&block[4..])
}

/// The superblock (block 0): the geometry, fixed at format time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub page_bytes: u32,
    pub blocks_per_segment: u32,
    pub segments: u32,
    pub map_blocks: u32,
    /// Pages the space may hold (the page map's length).
    pub capacity_pages: u32,
    /// Block number of segment 0's first block.
    pub first_segment_block: u64,
    /// The database this space belongs to, and its index among the
    /// database's data spaces: recorded once the database has an identity
    /// (`PageStore::record_identity`), `None` before.
    pub identity: Option<(u64, u32)>,
}

impl Superblock {
    pub fn encode(&self, block: &mut [u8]) {
        block.fill(0);
        block[SUPER_MAGIC_OFFSET..SUPER_MAGIC_OFFSET + 4].copy_from_slice(SUPER_MAGIC);
        put_u32(block, 28, FORMAT_VERSION);
        put_u32(block, 32, self.page_bytes);
        put_u32(block, 36, self.blocks_per_segment);
        put_u32(block, 40, self.segments);
        put_u32(block, 44, self.map_blocks);
        // 48..56: database identity (0: not recorded); 60..64: the
        // space's index among the data spaces, meaningful with an identity.
        let (database_id, space_index) = self.identity.unwrap_or((0, 0));
        put_u64(block, 48, database_id);
        put_u32(block, 56, self.capacity_pages);
        put_u32(block, 60, space_index);
        put_u64(block, 64, self.first_segment_block);
        seal(block);
    }

    /// Decode block 0; an error names the space and what is wrong.
    pub fn decode(block: &[u8], space: &str) -> Result<Superblock> {
        let bad = |what: &str| {
            Error::Open(format!(
                "data space '{space}': block 0 is not a log-structured superblock ({what}); \
                 was the space created with another store?"
            ))
        };
        if &block[SUPER_MAGIC_OFFSET..SUPER_MAGIC_OFFSET + 4] != SUPER_MAGIC {
            return Err(bad("no FLLS magic at offset 24"));
        }
        if !sealed(block) {
            return Err(Error::Damaged(format!(
                "data space '{space}': log-structured store damaged: the superblock (block 0) fails its checksum"
            )));
        }
        let version = u32_at(block, 28);
        if version != FORMAT_VERSION {
            return Err(bad(&format!(
                "format version {version}, not {FORMAT_VERSION}"
            )));
        }
        Ok(Superblock {
            page_bytes: u32_at(block, 32),
            blocks_per_segment: u32_at(block, 36),
            segments: u32_at(block, 40),
            map_blocks: u32_at(block, 44),
            capacity_pages: u32_at(block, 56),
            first_segment_block: u64_at(block, 64),
            identity: identity_at(block),
        })
    }
}

/// The identity a superblock records (see [`Superblock::identity`]): the
/// role check reads it from a file's first bytes.
pub fn identity_at(block: &[u8]) -> Option<(u64, u32)> {
    match u64_at(block, 48) {
        0 => None,
        id => Some((id, u32_at(block, 60))),
    }
}

/// One entry of a segment summary: which page version a block holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub page_no: u32,
    /// The page's own checksum (bytes 0..4 of its image).
    pub crc: u32,
    /// The page's LSN (bytes 12..20 of its image).
    pub lsn: u64,
}

/// A partial segment's summary (its first block).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    pub segment: u32,
    /// Block of the summary within its segment.
    pub offset_blocks: u32,
    /// The map checkpoint this partial segment follows (its sequence).
    pub epoch: u64,
    /// The partial segment's sequence number: one more than the previous.
    pub seq: u64,
    /// The data blocks that follow, in order.
    pub entries: Vec<Entry>,
}

/// Entries a summary block of `page_bytes` can hold.
pub fn summary_entries_max(page_bytes: usize) -> usize {
    (page_bytes - SUMMARY_HEADER_BYTES) / SUMMARY_ENTRY_BYTES
}

impl Summary {
    pub fn encode(&self, block: &mut [u8]) {
        assert!(self.entries.len() <= summary_entries_max(block.len()));
        block.fill(0);
        block[4..8].copy_from_slice(SUMMARY_MAGIC);
        put_u32(block, 8, self.segment);
        put_u32(block, 20, self.offset_blocks);
        put_u64(block, 24, self.epoch);
        put_u64(block, 32, self.seq);
        put_u32(block, 40, self.entries.len() as u32);
        for (i, e) in self.entries.iter().enumerate() {
            let at = SUMMARY_HEADER_BYTES + i * SUMMARY_ENTRY_BYTES;
            put_u32(block, at, e.page_no);
            put_u32(block, at + 4, e.crc);
            put_u64(block, at + 8, e.lsn);
        }
        seal(block);
    }

    /// A valid summary, or `None` (never written, torn, another block).
    pub fn decode(block: &[u8]) -> Option<Summary> {
        if &block[4..8] != SUMMARY_MAGIC || !sealed(block) {
            return None;
        }
        let n = u32_at(block, 40) as usize;
        if n == 0 || n > summary_entries_max(block.len()) {
            return None;
        }
        let entries = (0..n)
            .map(|i| {
                let at = SUMMARY_HEADER_BYTES + i * SUMMARY_ENTRY_BYTES;
                Entry {
                    page_no: u32_at(block, at),
                    crc: u32_at(block, at + 4),
                    lsn: u64_at(block, at + 8),
                }
            })
            .collect();
        Some(Summary {
            segment: u32_at(block, 8),
            offset_blocks: u32_at(block, 20),
            epoch: u64_at(block, 24),
            seq: u64_at(block, 32),
            entries,
        })
    }
}

/// Whether `image` is the page version `entry` describes: its own
/// checksum verifies and equals the entry's, and its page number and LSN
/// are the entry's (a torn or misdirected block is not).
pub fn block_holds(image: &[u8], entry: &Entry) -> bool {
    let stored = u32_at(image, 0);
    stored == entry.crc
        && crate::page::compute_checksum(image) == stored
        && crate::page::stored_id(image).page_no == entry.page_no
        && crate::page::lsn(image) == entry.lsn
}

/// The durable state a map checkpoint records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapCheckpoint {
    /// Sequence number (the *epoch* of the partial segments that follow).
    pub seq: u64,
    /// The sequence number the next partial segment will carry.
    pub next_partial_seq: u64,
    /// Where the next partial segment goes.
    pub head_segment: u32,
    pub head_offset_blocks: u32,
    /// Per segment: the sequence number of its last partial segment (its
    /// age, for cost-benefit cleaning; 0: none).
    pub ages: Vec<u64>,
    /// Per segment: [`SEGMENT_REUSABLE`] and [`SEGMENT_PENDING`] bits.
    pub flags: Vec<u32>,
    /// Page `n`'s block (0: never written), up to the highest mapped page.
    pub map: Vec<u32>,
}

/// Segment flag: the log may continue in this segment after the
/// checkpoint (it was dead at this checkpoint and the one before).
pub const SEGMENT_REUSABLE: u32 = 1;
/// Segment flag: dead at this checkpoint, reusable after the next one.
pub const SEGMENT_PENDING: u32 = 2;
/// Words (u32) a map checkpoint keeps per segment: age (2), flags (1).
pub const SEGMENT_WORDS: usize = 3;

/// Words (u32) of a map-checkpoint body block.
pub fn map_words_per_block(page_bytes: usize) -> usize {
    (page_bytes - MAP_BODY_HEADER_BYTES) / 4
}

/// Blocks of a map-checkpoint slot for this geometry (header included).
pub fn map_slot_blocks(page_bytes: usize, segments: u64, capacity_pages: u64) -> u64 {
    let words = SEGMENT_WORDS as u64 * segments + capacity_pages;
    1 + words.div_ceil(map_words_per_block(page_bytes) as u64)
}

impl MapCheckpoint {
    /// The checkpoint as blocks of `page_bytes` (header first).
    pub fn encode(&self, page_bytes: usize) -> Vec<u8> {
        let mut words: Vec<u32> =
            Vec::with_capacity(SEGMENT_WORDS * self.ages.len() + self.map.len());
        for (age, flags) in self.ages.iter().zip(&self.flags) {
            words.push(*age as u32);
            words.push((*age >> 32) as u32);
            words.push(*flags);
        }
        words.extend_from_slice(&self.map);
        let per = map_words_per_block(page_bytes);
        let body_blocks = words.len().div_ceil(per);
        let mut out = vec![0u8; (1 + body_blocks) * page_bytes];
        for (i, chunk) in words.chunks(per).enumerate() {
            let block = &mut out[(1 + i) * page_bytes..(2 + i) * page_bytes];
            block[4..8].copy_from_slice(MAP_BODY_MAGIC);
            put_u32(block, 8, (i + 1) as u32);
            for (j, w) in chunk.iter().enumerate() {
                put_u32(block, MAP_BODY_HEADER_BYTES + 4 * j, *w);
            }
            seal(block);
        }
        let body_crc = crc32c::crc32c(&out[page_bytes..]);
        let header = &mut out[..page_bytes];
        header[4..8].copy_from_slice(MAP_HEADER_MAGIC);
        put_u64(header, 24, self.seq);
        put_u64(header, 32, self.next_partial_seq);
        put_u32(header, 40, self.head_segment);
        put_u32(header, 44, self.head_offset_blocks);
        put_u32(header, 48, self.map.len() as u32);
        put_u32(header, 52, self.ages.len() as u32);
        put_u32(header, 56, body_blocks as u32);
        put_u32(header, 60, body_crc);
        seal(header);
        out
    }

    /// The header's sequence and body length if the header block is valid.
    pub fn decode_header(block: &[u8]) -> Option<(u64, usize)> {
        if &block[4..8] != MAP_HEADER_MAGIC || !sealed(block) {
            return None;
        }
        Some((u64_at(block, 24), u32_at(block, 56) as usize))
    }

    /// Decode a whole slot's bytes (header and body); `None` if any part
    /// fails its checks (a torn or never-finished checkpoint).
    pub fn decode(bytes: &[u8], page_bytes: usize) -> Option<MapCheckpoint> {
        let header = &bytes[..page_bytes];
        let (seq, body_blocks) = MapCheckpoint::decode_header(header)?;
        let end = (1 + body_blocks) * page_bytes;
        if end > bytes.len() || crc32c::crc32c(&bytes[page_bytes..end]) != u32_at(header, 60) {
            return None;
        }
        let map_len = u32_at(header, 48) as usize;
        let segments = u32_at(header, 52) as usize;
        let per = map_words_per_block(page_bytes);
        let mut words = Vec::with_capacity(body_blocks * per);
        for i in 0..body_blocks {
            let block = &bytes[(1 + i) * page_bytes..(2 + i) * page_bytes];
            if &block[4..8] != MAP_BODY_MAGIC
                || !sealed(block)
                || u32_at(block, 8) != (i + 1) as u32
            {
                return None;
            }
            words.extend((0..per).map(|j| u32_at(block, MAP_BODY_HEADER_BYTES + 4 * j)));
        }
        let base = SEGMENT_WORDS * segments;
        if words.len() < base + map_len {
            return None;
        }
        let ages = (0..segments)
            .map(|s| {
                u64::from(words[SEGMENT_WORDS * s])
                    | (u64::from(words[SEGMENT_WORDS * s + 1]) << 32)
            })
            .collect();
        let flags = (0..segments)
            .map(|s| words[SEGMENT_WORDS * s + 2])
            .collect();
        Some(MapCheckpoint {
            seq,
            next_partial_seq: u64_at(header, 32),
            head_segment: u32_at(header, 40),
            head_offset_blocks: u32_at(header, 44),
            ages,
            flags,
            map: words[base..base + map_len].to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_round_trips_and_any_flip_is_caught() {
        let s = Summary {
            segment: 3,
            offset_blocks: 17,
            epoch: 9,
            seq: 1234,
            entries: vec![
                Entry {
                    page_no: 5,
                    crc: 0xdead,
                    lsn: 77,
                },
                Entry {
                    page_no: 6,
                    crc: 0xbeef,
                    lsn: 78,
                },
            ],
        };
        let mut block = vec![0u8; 4096];
        s.encode(&mut block);
        assert_eq!(&block[12..20], &[0u8; 8], "bytes 12..20 stay zero");
        assert_eq!(Summary::decode(&block), Some(s));
        block[100] ^= 1;
        assert_eq!(Summary::decode(&block), None);
    }

    #[test]
    fn a_map_checkpoint_round_trips_and_a_torn_body_is_refused() {
        let cp = MapCheckpoint {
            seq: 4,
            next_partial_seq: 99,
            head_segment: 2,
            head_offset_blocks: 10,
            ages: vec![1, 2, u64::MAX / 3],
            flags: vec![0, SEGMENT_REUSABLE, SEGMENT_PENDING],
            map: (0..3000).map(|i| i * 7).collect(),
        };
        let bytes = cp.encode(2048);
        for block in bytes.chunks(2048) {
            assert_eq!(&block[12..20], &[0u8; 8]);
        }
        assert_eq!(MapCheckpoint::decode(&bytes, 2048), Some(cp.clone()));
        let mut torn = bytes.clone();
        let last = torn.len() - 2048;
        torn[last..].fill(0);
        assert_eq!(MapCheckpoint::decode(&torn, 2048), None);
    }

    #[test]
    fn the_superblock_round_trips_and_names_the_space_when_foreign() {
        let sb = Superblock {
            page_bytes: 4096,
            blocks_per_segment: 2048,
            segments: 10,
            map_blocks: 5,
            capacity_pages: 1000,
            first_segment_block: 11,
            identity: None,
        };
        let mut block = vec![0u8; 4096];
        sb.encode(&mut block);
        assert_eq!(Superblock::decode(&block, "d").unwrap(), sb);
        let named = Superblock {
            identity: Some((0xfeed, 3)),
            ..sb
        };
        named.encode(&mut block);
        assert_eq!(Superblock::decode(&block, "d").unwrap(), named);
        assert_eq!(identity_at(&block), Some((0xfeed, 3)));
        let e = Superblock::decode(&[0u8; 4096], "d")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'d'"), "{e}");
    }
}
