//! Mini-transactions: atomic, logged changes to a set of pages.
//!
//! Structures on pages (B+trees, the space header) never touch the buffer
//! pool directly. They work through [`PageAccess`]: read a page, write a
//! page, allocate, free. The engine's implementation, [`Mtr`], keeps a
//! private copy of every page it writes together with its before-image; when
//! the operation is done, the difference between before and after becomes
//! one log record of byte-range redo covering every page the operation
//! changed (a split touches three or four pages; they are redone together
//! or not at all). Only then are the new images installed in the buffer
//! pool, stamped with the record's LSN.
//!
//! Because redo is physical byte ranges, recovery repeats history exactly,
//! and the structure on the pages is consistent at every record boundary.
//!
//! Invariants (MTR-n):
//! 1. A structure changes only bytes at or after `PAGE_BODY_OFFSET`; the
//!    header before it belongs to the buffer pool.
//! 2. All page changes of one operation are logged in one record.
//! 3. A page's new image is installed only after its record has an LSN, and
//!    its page LSN is set to that record's end.

use crate::error::Result;
use crate::page::{PageNo, PageType};

/// Page access for structures built on pages. See the module documentation.
pub trait PageAccess {
    /// Page size of the space the structure lives in.
    fn page_bytes(&self) -> usize;
    /// The whole page, header included.
    fn read(&mut self, page_no: PageNo) -> Result<&[u8]>;
    /// The whole page for writing; bytes before `PAGE_BODY_OFFSET` must not
    /// be changed (MTR-1).
    fn write(&mut self, page_no: PageNo) -> Result<&mut [u8]>;
    /// A fresh page with a zeroed body and the given type.
    fn allocate(&mut self, kind: PageType) -> Result<PageNo>;
    /// Give a page back to the space's free list.
    fn free(&mut self, page_no: PageNo) -> Result<()>;
}
