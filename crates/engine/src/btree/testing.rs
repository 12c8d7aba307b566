//! Test support: an in-memory [`PageAccess`] for structures on pages.
//!
//! Structures are written against `PageAccess`, so they can be tested
//! without a buffer pool, log or device: [`MemPages`] is a vector of page
//! buffers. Page 0 is a space header, as in a real data space, so a
//! structure never sees page 0. It also checks the one rule a structure
//! could break silently, MTR-1 / BTREE-7: [`MemPages::check_headers`]
//! compares every page's first `PAGE_BODY_OFFSET` bytes with what the
//! space gave it. Tests may corrupt pages at will through
//! [`MemPages::raw_mut`] or build a space of arbitrary bytes with
//! [`MemPages::from_raw`] (the fuzz tests do).

use crate::error::{Error, Result};
use crate::mtr::PageAccess;
use crate::page::{self, PAGE_BODY_OFFSET, PageId, PageNo, PageType, SpaceId};

/// Space id the in-memory pages carry.
pub const MEM_SPACE_ID: SpaceId = 1;

/// An in-memory space of pages. See the module documentation.
#[derive(Clone, Debug)]
pub struct MemPages {
    page_bytes: usize,
    pages: Vec<Vec<u8>>,
    /// Each page's bytes before `PAGE_BODY_OFFSET`, as the space left them.
    headers: Vec<Vec<u8>>,
    free: Vec<PageNo>,
    writes: u64,
}

impl MemPages {
    /// A space with only its header page.
    pub fn new(page_bytes: usize) -> Result<MemPages> {
        page::validate_page_bytes(page_bytes)?;
        let mut space = MemPages {
            page_bytes,
            pages: Vec::new(),
            headers: Vec::new(),
            free: Vec::new(),
            writes: 0,
        };
        space.append(PageType::SpaceHeader)?;
        Ok(space)
    }

    /// A space holding exactly `pages` (arbitrary bytes, each `page_bytes`
    /// long).
    pub fn from_raw(page_bytes: usize, pages: Vec<Vec<u8>>) -> Result<MemPages> {
        page::validate_page_bytes(page_bytes)?;
        if let Some(bad) = pages.iter().position(|p| p.len() != page_bytes) {
            return Err(Error::Invalid(format!(
                "page {bad} is not {page_bytes} bytes long"
            )));
        }
        let headers = pages
            .iter()
            .map(|p| p[..PAGE_BODY_OFFSET].to_vec())
            .collect();
        Ok(MemPages {
            page_bytes,
            pages,
            headers,
            free: Vec::new(),
            writes: 0,
        })
    }

    fn append(&mut self, kind: PageType) -> Result<PageNo> {
        let page_no = PageNo::try_from(self.pages.len())
            .map_err(|_| Error::SpaceFull(format!("{} pages", self.pages.len())))?;
        let mut buf = vec![0u8; self.page_bytes];
        page::set_id(&mut buf, PageId::new(MEM_SPACE_ID, page_no));
        page::set_page_type(&mut buf, kind);
        self.headers.push(buf[..PAGE_BODY_OFFSET].to_vec());
        self.pages.push(buf);
        Ok(page_no)
    }

    fn page_mut(&mut self, page_no: PageNo) -> Result<&mut Vec<u8>> {
        let count = self.pages.len();
        self.pages.get_mut(page_no as usize).ok_or_else(|| {
            Error::Invalid(format!(
                "page {page_no} is past the end of a space of {count} pages"
            ))
        })
    }

    /// Pages in the space, free ones and the header included.
    pub fn page_count(&self) -> usize {
        self.pages.len()
    }

    /// Pages on the free list.
    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Calls of [`PageAccess::write`] so far.
    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// A page's bytes, for inspection.
    pub fn raw(&self, page_no: PageNo) -> Option<&[u8]> {
        self.pages.get(page_no as usize).map(Vec::as_slice)
    }

    /// A page's bytes, to corrupt them (no header check applies after
    /// this is used on the header).
    pub fn raw_mut(&mut self, page_no: PageNo) -> Option<&mut [u8]> {
        self.pages.get_mut(page_no as usize).map(Vec::as_mut_slice)
    }

    /// Check that no page's bytes before `PAGE_BODY_OFFSET` changed since
    /// the space set them (MTR-1, BTREE-7).
    pub fn check_headers(&self) -> Result<()> {
        for (page_no, (page, header)) in self.pages.iter().zip(&self.headers).enumerate() {
            if page.get(..PAGE_BODY_OFFSET) != Some(header.as_slice()) {
                return Err(Error::Invalid(format!(
                    "page {page_no}: bytes before {PAGE_BODY_OFFSET} changed"
                )));
            }
        }
        Ok(())
    }
}

impl PageAccess for MemPages {
    fn page_bytes(&self) -> usize {
        self.page_bytes
    }

    fn read(&mut self, page_no: PageNo) -> Result<&[u8]> {
        Ok(self.page_mut(page_no)?.as_slice())
    }

    fn write(&mut self, page_no: PageNo) -> Result<&mut [u8]> {
        self.writes += 1;
        Ok(self.page_mut(page_no)?.as_mut_slice())
    }

    fn allocate(&mut self, kind: PageType) -> Result<PageNo> {
        let Some(page_no) = self.free.pop() else {
            return self.append(kind);
        };
        let page = self.page_mut(page_no)?;
        page[PAGE_BODY_OFFSET..].fill(0);
        page::set_page_type(page, kind);
        Ok(page_no)
    }

    fn free(&mut self, page_no: PageNo) -> Result<()> {
        if page_no == 0 || self.free.contains(&page_no) {
            return Err(Error::Invalid(format!("page {page_no} cannot be freed")));
        }
        page::set_page_type(self.page_mut(page_no)?, PageType::Free);
        self.free.push(page_no);
        Ok(())
    }
}
