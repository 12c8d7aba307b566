//! Data spaces: a device of fixed-size pages, and its allocation state.
//!
//! Page 0 of every data space is its *space header*: the page size it was
//! created with, its id, how many pages have ever been handed out (the
//! high-water mark) and the head of the free list. A freed page goes on the
//! free list (its body holds the next free page); allocation takes the free
//! list's head first, then extends the high-water mark until the device is
//! full. The header is changed through mini-transactions like any page, so
//! allocation is logged and recovered with the change that needed it.
//!
//! Body layout of the header page (after the 24-byte page header):
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 24 | 4 | magic `b"FLSP"` |
//! | 28 | 4 | space format version |
//! | 32 | 4 | page size in bytes |
//! | 36 | 4 | space id |
//! | 40 | 4 | page count (high-water mark, header included) |
//! | 44 | 4 | first free page (0: none) |
//! | 48 | 8 | database identity (`db::roles`) |
//! | 56 | 8 | anchor: the log's end when the newest checkpoint began (DB-9) |

use crate::error::{Error, Result};
use crate::page::{PAGE_HEADER_BYTES, PageNo, SpaceId};

const MAGIC: &[u8; 4] = b"FLSP";
/// Version of the space header format.
pub const SPACE_FORMAT_VERSION: u32 = 1;
const FREE_NEXT_OFFSET: usize = PAGE_HEADER_BYTES;
/// Offset in page 0 of the anchor (u64 LE): the end of the log when the
/// newest checkpoint that wrote this header began (DB-9).
pub const ANCHOR_OFFSET: usize = 56;

/// The decoded header page of a data space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpaceHeader {
    pub page_bytes: u32,
    pub space: SpaceId,
    pub page_count: u32,
    pub free_head: PageNo,
}

fn field(page: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(page[at..at + 4].try_into().expect("4 bytes"))
}

impl SpaceHeader {
    /// A new space: only the header page is in use.
    pub fn new(space: SpaceId, page_bytes: u32) -> SpaceHeader {
        SpaceHeader {
            page_bytes,
            space,
            page_count: 1,
            free_head: 0,
        }
    }

    /// Write into a page image (body only).
    pub fn encode(&self, page: &mut [u8]) {
        crate::page::set_page_type(page, crate::page::PageType::SpaceHeader);
        let b = PAGE_HEADER_BYTES;
        page[b..b + 4].copy_from_slice(MAGIC);
        page[b + 4..b + 8].copy_from_slice(&SPACE_FORMAT_VERSION.to_le_bytes());
        page[b + 8..b + 12].copy_from_slice(&self.page_bytes.to_le_bytes());
        page[b + 12..b + 16].copy_from_slice(&self.space.to_le_bytes());
        page[b + 16..b + 20].copy_from_slice(&self.page_count.to_le_bytes());
        page[b + 20..b + 24].copy_from_slice(&self.free_head.to_le_bytes());
    }

    /// Read from a page image; `space_name` serves the error message.
    pub fn decode(page: &[u8], space_name: &str) -> Result<SpaceHeader> {
        let b = PAGE_HEADER_BYTES;
        if page.len() < b + 24 || &page[b..b + 4] != MAGIC {
            return Err(Error::Open(format!(
                "data space '{space_name}' has no space header (page 0)"
            )));
        }
        let version = field(page, b + 4);
        if version != SPACE_FORMAT_VERSION {
            return Err(Error::Open(format!(
                "data space '{space_name}' has format version {version}; this build reads {SPACE_FORMAT_VERSION}"
            )));
        }
        let header = SpaceHeader {
            page_bytes: field(page, b + 8),
            space: field(page, b + 12),
            page_count: field(page, b + 16),
            free_head: field(page, b + 20),
        };
        if header.page_bytes as usize != page.len() {
            return Err(Error::Open(format!(
                "data space '{space_name}' was created with {}-byte pages, configured with {}",
                header.page_bytes,
                page.len()
            )));
        }
        if header.free_head >= header.page_count.max(1) {
            return Err(Error::malformed(
                "space header",
                format!(
                    "free list head {} beyond page count {}",
                    header.free_head, header.page_count
                ),
            ));
        }
        Ok(header)
    }

    /// The next free page recorded in a free page's body.
    pub fn free_next(page: &[u8]) -> PageNo {
        field(page, FREE_NEXT_OFFSET)
    }

    pub fn set_free_next(page: &mut [u8], next: PageNo) {
        page[FREE_NEXT_OFFSET..FREE_NEXT_OFFSET + 4].copy_from_slice(&next.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_checks_page_size() {
        let mut page = vec![0u8; 8192];
        let header = SpaceHeader {
            page_bytes: 8192,
            space: 3,
            page_count: 10,
            free_head: 4,
        };
        header.encode(&mut page);
        assert_eq!(SpaceHeader::decode(&page, "d").unwrap(), header);
        let err = SpaceHeader::decode(&page[..4096], "d").unwrap_err();
        assert!(err.to_string().contains("8192-byte pages"), "{err}");
        assert!(SpaceHeader::decode(&vec![0u8; 8192], "d").is_err());
    }
}
