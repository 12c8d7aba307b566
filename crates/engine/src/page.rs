//! The page header every data page carries.
//!
//! A page is a fixed-size block of its space (2 KB to 64 KB, a power of
//! two). Its first [`PAGE_HEADER_BYTES`] bytes are:
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0 | 4 | crc32c of bytes 4..page_size (little endian) |
//! | 4 | 4 | space id |
//! | 8 | 4 | page number within the space |
//! | 12 | 8 | page LSN: log position just past the last record that changed the page |
//! | 20 | 1 | page type ([`PageType`]) |
//! | 21 | 3 | reserved, zero |
//!
//! Bytes 0..20 belong to the buffer pool: it sets the id when a page is
//! formatted, the LSN when a change is logged, and the checksum when the
//! page is written. Bytes 20.. belong to the page's owner (B+tree, space
//! header), and only they are covered by redo records.
//!
//! Invariants (PAGE-n):
//! 1. A page read from a device is returned only if its checksum matches and
//!    its id is the one asked for; otherwise the read fails with a
//!    corruption error naming space, page and device offset.
//! 2. A page is never written to its device before the log is durable up to
//!    its page LSN (write-ahead logging).
//! 3. An all-zero page (never written) is a valid *empty* page.

use crate::error::{Error, Result};

/// Identifies a storage space of a database.
pub type SpaceId = u32;
/// A page's number within its space.
pub type PageNo = u32;

/// Bytes of the page header.
pub const PAGE_HEADER_BYTES: usize = 24;
/// Offset of the first byte a page's owner may change (and redo covers).
pub const PAGE_BODY_OFFSET: usize = 20;
/// Smallest and largest page sizes.
pub const PAGE_BYTES_MIN: usize = 2048;
pub const PAGE_BYTES_MAX: usize = 65536;

const CRC_OFFSET: usize = 0;
const SPACE_OFFSET: usize = 4;
const PAGE_NO_OFFSET: usize = 8;
const LSN_OFFSET: usize = 12;
// The fault model (in the devices crate, below the engine) reads page LSNs
// at its own copy of this offset: they must agree.
const _: () = assert!(flashlab_devices::fault::PAGE_LSN_OFFSET == LSN_OFFSET);
const TYPE_OFFSET: usize = 20;

/// A page's address: its space and number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PageId {
    pub space: SpaceId,
    pub page_no: PageNo,
}

impl PageId {
    pub fn new(space: SpaceId, page_no: PageNo) -> PageId {
        PageId { space, page_no }
    }
}

impl std::fmt::Display for PageId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.space, self.page_no)
    }
}

/// What a page holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PageType {
    /// Never formatted (all zeros).
    Empty = 0,
    /// Page 0 of a data space: allocation state.
    SpaceHeader = 1,
    BTreeLeaf = 2,
    BTreeInternal = 3,
    /// On the free list.
    Free = 4,
    /// A rollback-segment page (MVCC before-images).
    Rollback = 5,
}

impl PageType {
    pub fn from_u8(byte: u8) -> Option<PageType> {
        Some(match byte {
            0 => PageType::Empty,
            1 => PageType::SpaceHeader,
            2 => PageType::BTreeLeaf,
            3 => PageType::BTreeInternal,
            4 => PageType::Free,
            5 => PageType::Rollback,
            _ => return None,
        })
    }
}

/// Check that a page size is a power of two within limits.
pub fn validate_page_bytes(page_bytes: usize) -> Result<()> {
    if !page_bytes.is_power_of_two() || !(PAGE_BYTES_MIN..=PAGE_BYTES_MAX).contains(&page_bytes) {
        return Err(Error::Config(format!(
            "page size {page_bytes} is not a power of two from {PAGE_BYTES_MIN} to {PAGE_BYTES_MAX} bytes"
        )));
    }
    Ok(())
}

fn read_u32(page: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(page[at..at + 4].try_into().expect("4 bytes"))
}

fn read_u64(page: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(page[at..at + 8].try_into().expect("8 bytes"))
}

/// The page's LSN.
pub fn lsn(page: &[u8]) -> u64 {
    read_u64(page, LSN_OFFSET)
}

pub fn set_lsn(page: &mut [u8], lsn: u64) {
    page[LSN_OFFSET..LSN_OFFSET + 8].copy_from_slice(&lsn.to_le_bytes());
}

/// The id stored in the page.
pub fn stored_id(page: &[u8]) -> PageId {
    PageId::new(read_u32(page, SPACE_OFFSET), read_u32(page, PAGE_NO_OFFSET))
}

pub fn set_id(page: &mut [u8], id: PageId) {
    page[SPACE_OFFSET..SPACE_OFFSET + 4].copy_from_slice(&id.space.to_le_bytes());
    page[PAGE_NO_OFFSET..PAGE_NO_OFFSET + 4].copy_from_slice(&id.page_no.to_le_bytes());
}

/// The page's type byte, if it is a known type.
pub fn page_type(page: &[u8]) -> Option<PageType> {
    PageType::from_u8(page[TYPE_OFFSET])
}

pub fn set_page_type(page: &mut [u8], kind: PageType) {
    page[TYPE_OFFSET] = kind as u8;
}

/// The checksum over everything but the checksum field.
pub fn compute_checksum(page: &[u8]) -> u32 {
    crc32c::crc32c(&page[CRC_OFFSET + 4..])
}

/// Set the checksum before a write.
pub fn seal(page: &mut [u8]) {
    let crc = compute_checksum(page);
    page[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Verify a page just read (PAGE-1, PAGE-3). `space_name` and
/// `offset_bytes` only serve the error message.
pub fn verify(page: &[u8], expected: PageId, space_name: &str, offset_bytes: u64) -> Result<()> {
    if page.iter().all(|&b| b == 0) {
        return Ok(());
    }
    let corruption = |problem: String| Error::Corruption {
        space: space_name.to_string(),
        page_no: u64::from(expected.page_no),
        offset_bytes,
        problem,
    };
    if page.len() < PAGE_HEADER_BYTES {
        return Err(corruption(format!(
            "{} bytes are shorter than a page header",
            page.len()
        )));
    }
    let stored_crc = read_u32(page, CRC_OFFSET);
    let crc = compute_checksum(page);
    if stored_crc != crc {
        return Err(corruption(format!(
            "checksum mismatch (stored {stored_crc:#010x}, computed {crc:#010x})"
        )));
    }
    let id = stored_id(page);
    if id != expected {
        return Err(corruption(format!(
            "page carries id {id}, expected {expected} (misdirected write?)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_page_verifies_and_any_flip_is_caught() {
        let id = PageId::new(2, 7);
        let mut page = vec![0u8; 4096];
        set_id(&mut page, id);
        set_lsn(&mut page, 99);
        set_page_type(&mut page, PageType::BTreeLeaf);
        page[100] = 42;
        seal(&mut page);
        verify(&page, id, "data", 7 * 4096).unwrap();
        for bit in [0usize, 5, 100 * 8 + 3, 4095 * 8 + 7] {
            let mut bad = page.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            let err = verify(&bad, id, "data", 7 * 4096).unwrap_err();
            assert!(err.to_string().contains("checksum mismatch"), "{err}");
        }
    }

    #[test]
    fn misdirected_page_is_caught_by_its_id() {
        let mut page = vec![0u8; 2048];
        set_id(&mut page, PageId::new(1, 3));
        page[50] = 1;
        seal(&mut page);
        let err = verify(&page, PageId::new(1, 4), "data", 8192).unwrap_err();
        assert!(err.to_string().contains("misdirected"), "{err}");
        assert!(
            err.to_string()
                .contains("space 'data' page 4 at device offset 8192"),
            "{err}"
        );
    }

    #[test]
    fn zero_page_is_empty_and_valid() {
        verify(&[0u8; 2048], PageId::new(0, 0), "data", 0).unwrap();
    }

    #[test]
    fn page_sizes_are_checked() {
        assert!(validate_page_bytes(8192).is_ok());
        assert!(validate_page_bytes(3000).is_err());
        assert!(validate_page_bytes(1024).is_err());
        assert!(validate_page_bytes(131072).is_err());
    }
}
