//! Node layout: one B+tree node per page, as a slotted page.
//!
//! Keys and values have variable sizes, so a node cannot be an array of
//! fixed records. It is a *slotted page*: a small header, then an array of
//! 2-byte slots in key order, each the offset of its entry's *cell*; cells
//! are allocated downwards from the end of the page. Inserting an entry
//! writes its cell just below the lowest cell and shifts the slots after it
//! by two bytes, so a change touches few bytes and the redo the
//! mini-transaction derives from before/after images stays small. Deleting
//! (or shrinking) a cell leaves dead bytes behind; they are counted as
//! *fragmented* and reclaimed by compacting the page only when an insert
//! needs them.
//!
//! Layout (all integers little endian; bytes 0..20 belong to the buffer
//! pool and are never touched here, BTREE-7):
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 20 | 1 | page type: `BTreeLeaf` or `BTreeInternal` |
//! | 21 | 3 | reserved, zero |
//! | 24 | 2 | entry count n |
//! | 26 | 2 | level: 0 for a leaf, child level + 1 for an internal node |
//! | 28 | 4 | cell start: offset of the lowest cell byte (page size when empty) |
//! | 32 | 4 | fragmented bytes: dead bytes between cell start and page end |
//! | 36 | 4 | link: right sibling (leaf) or leftmost child (internal); [`NO_PAGE`] = none |
//! | 40 | 2n | slots: offset of entry i's cell, entries in ascending key order |
//! | 40 + 2n | | free gap |
//! | cell start | | cells, up to the end of the page |
//!
//! Leaf cell: key length u16, value length u16, key, value.
//! Internal cell: key length u16, child page u32, separator key; the child
//! holds the keys from this separator (inclusive) up to the next one.
//!
//! Every offset and length read from a page is bounds-checked (BTREE-9):
//! [`Node::parse`] validates the header, and each cell access validates the
//! cell, so a garbage page yields `Error::Malformed`, never a panic.

use std::fmt::Display;
use std::ops::Range;

use crate::error::{Error, Result};
use crate::page::{self, PAGE_BODY_OFFSET, PAGE_BYTES_MAX, PAGE_HEADER_BYTES, PageNo, PageType};

/// The "no page" link: end of the sibling chain.
pub const NO_PAGE: PageNo = PageNo::MAX;
/// At least this many maximum-size entries fit one page (BTREE-6).
pub const ENTRIES_PER_PAGE_MIN: usize = 4;
/// Highest level a node may carry (a tree of 65 levels cannot be built from
/// real pages; a larger level is garbage).
pub const LEVEL_MAX: u16 = 64;
/// Bytes of one slot.
pub const SLOT_BYTES: usize = 2;
/// Bytes of a leaf cell's header (key and value lengths).
pub const LEAF_CELL_HEADER_BYTES: usize = 4;
/// Bytes of an internal cell's header (key length, child page).
pub const INTERNAL_CELL_HEADER_BYTES: usize = 6;

const COUNT_OFFSET: usize = PAGE_HEADER_BYTES;
const LEVEL_OFFSET: usize = COUNT_OFFSET + 2;
const CELL_START_OFFSET: usize = LEVEL_OFFSET + 2;
const FRAG_OFFSET: usize = CELL_START_OFFSET + 4;
const LINK_OFFSET: usize = FRAG_OFFSET + 4;
/// Offset of the slot array, the end of the node header.
pub const SLOTS_OFFSET: usize = LINK_OFFSET + 4;

/// Largest key + value, in bytes, that a page of `page_bytes` accepts: the
/// limit that lets [`ENTRIES_PER_PAGE_MIN`] entries (cell and slot) fit the
/// page, counting the larger (internal) cell header so that a separator
/// built from any key fits as well.
pub fn max_entry_bytes(page_bytes: usize) -> usize {
    let per_entry_bytes = capacity_bytes(page_bytes) / ENTRIES_PER_PAGE_MIN;
    per_entry_bytes
        .saturating_sub(SLOT_BYTES + INTERNAL_CELL_HEADER_BYTES)
        .min(usize::from(u16::MAX))
}

/// Bytes of a page available to slots and cells.
pub fn capacity_bytes(page_bytes: usize) -> usize {
    page_bytes.saturating_sub(SLOTS_OFFSET)
}

/// A malformed-page error naming the page.
pub fn malformed(page_no: PageNo, problem: impl Display) -> Error {
    Error::malformed("btree page", format!("page {page_no}: {problem}"))
}

fn read_u16(bytes: &[u8], at: usize) -> Option<usize> {
    let raw: [u8; 2] = bytes.get(at..at.checked_add(2)?)?.try_into().ok()?;
    Some(usize::from(u16::from_le_bytes(raw)))
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let raw: [u8; 4] = bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_le_bytes(raw))
}

/// Leaf or internal node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    Leaf,
    Internal,
}

impl NodeKind {
    /// The page type this kind of node carries.
    pub fn page_type(self) -> PageType {
        match self {
            NodeKind::Leaf => PageType::BTreeLeaf,
            NodeKind::Internal => PageType::BTreeInternal,
        }
    }

    fn cell_header_bytes(self) -> usize {
        match self {
            NodeKind::Leaf => LEAF_CELL_HEADER_BYTES,
            NodeKind::Internal => INTERNAL_CELL_HEADER_BYTES,
        }
    }
}

/// A leaf cell for `key` → `value`.
pub fn leaf_cell(key: &[u8], value: &[u8]) -> Result<Vec<u8>> {
    let too_large = || Error::TooLarge(format!("entry of {} + {} bytes", key.len(), value.len()));
    let key_len = u16::try_from(key.len()).map_err(|_| too_large())?;
    let value_len = u16::try_from(value.len()).map_err(|_| too_large())?;
    let mut cell = Vec::with_capacity(LEAF_CELL_HEADER_BYTES + key.len() + value.len());
    cell.extend_from_slice(&key_len.to_le_bytes());
    cell.extend_from_slice(&value_len.to_le_bytes());
    cell.extend_from_slice(key);
    cell.extend_from_slice(value);
    Ok(cell)
}

/// An internal cell: separator `key` → `child`.
pub fn internal_cell(key: &[u8], child: PageNo) -> Result<Vec<u8>> {
    let key_len = u16::try_from(key.len())
        .map_err(|_| Error::TooLarge(format!("separator of {} bytes", key.len())))?;
    let mut cell = Vec::with_capacity(INTERNAL_CELL_HEADER_BYTES + key.len());
    cell.extend_from_slice(&key_len.to_le_bytes());
    cell.extend_from_slice(&child.to_le_bytes());
    cell.extend_from_slice(key);
    Ok(cell)
}

/// The key of a cell of a node of `kind`, if the cell is long enough.
pub fn cell_key(kind: NodeKind, cell: &[u8]) -> Option<&[u8]> {
    let start = kind.cell_header_bytes();
    let key_len = read_u16(cell, 0)?;
    cell.get(start..start.checked_add(key_len)?)
}

/// Keys in byte order, as `a.cmp(b)`, eight bytes at a time as big-endian
/// words: keys are short, and a call to the C library's comparison costs
/// more than comparing them here.
#[inline]
fn compare_keys(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let common = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= common {
        let word = |bytes: &[u8]| u64::from_be_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
        let (x, y) = (word(a), word(b));
        if x != y {
            return x.cmp(&y);
        }
        i += 8;
    }
    for k in i..common {
        if a[k] != b[k] {
            return a[k].cmp(&b[k]);
        }
    }
    a.len().cmp(&b.len())
}

/// The value of a leaf cell.
pub fn cell_value(cell: &[u8]) -> Option<&[u8]> {
    let key_len = read_u16(cell, 0)?;
    let value_len = read_u16(cell, 2)?;
    let start = LEAF_CELL_HEADER_BYTES + key_len;
    cell.get(start..start + value_len)
}

/// The child of an internal cell.
pub fn cell_child(cell: &[u8]) -> Option<PageNo> {
    read_u32(cell, 2)
}

/// A node's header fields.
#[derive(Clone, Copy, Debug)]
pub struct Header {
    pub kind: NodeKind,
    pub count: usize,
    pub level: u16,
    pub cell_start: usize,
    pub frag_bytes: usize,
    pub link: PageNo,
}

impl Header {
    /// End of the slot array.
    pub fn slots_end(&self) -> usize {
        SLOTS_OFFSET + self.count * SLOT_BYTES
    }

    /// Bytes between the slot array and the lowest cell.
    pub fn gap_bytes(&self) -> usize {
        self.cell_start - self.slots_end()
    }

    /// Bytes an insert can use, after compaction if need be.
    pub fn free_bytes(&self) -> usize {
        self.gap_bytes() + self.frag_bytes
    }
}

/// A read-only view of a node whose header has been validated.
pub struct Node<'a> {
    page: &'a [u8],
    page_no: PageNo,
    header: Header,
}

impl<'a> Node<'a> {
    /// Validate the header of `page` (BTREE-5, BTREE-9).
    pub fn parse(page_no: PageNo, page: &'a [u8]) -> Result<Node<'a>> {
        let len = page.len();
        if !(SLOTS_OFFSET..=PAGE_BYTES_MAX).contains(&len) {
            return Err(malformed(
                page_no,
                format!("a page of {len} bytes cannot hold a node"),
            ));
        }
        let type_byte = page.get(PAGE_BODY_OFFSET).copied().unwrap_or_default();
        let kind = match PageType::from_u8(type_byte) {
            Some(PageType::BTreeLeaf) => NodeKind::Leaf,
            Some(PageType::BTreeInternal) => NodeKind::Internal,
            // BTREE-11: a tree never links to a page it has not written,
            // so a page of zeros there was zeroed at rest: damage.
            _ if page.iter().all(|&b| b == 0) => {
                return Err(Error::Damaged(format!(
                    "page {page_no} is all zeros, but a B+tree links to it (zeroed at rest)"
                )));
            }
            _ => {
                return Err(malformed(
                    page_no,
                    format!("page type {type_byte} is not a B+tree node"),
                ));
            }
        };
        let short = || malformed(page_no, "node header cut short");
        let level = read_u16(page, LEVEL_OFFSET).ok_or_else(short)?;
        let header = Header {
            kind,
            count: read_u16(page, COUNT_OFFSET).ok_or_else(short)?,
            level: u16::try_from(level).map_err(|_| short())?,
            cell_start: read_u32(page, CELL_START_OFFSET).ok_or_else(short)? as usize,
            frag_bytes: read_u32(page, FRAG_OFFSET).ok_or_else(short)? as usize,
            link: read_u32(page, LINK_OFFSET).ok_or_else(short)?,
        };
        Self::validate_header(page_no, len, &header)?;
        Ok(Node {
            page,
            page_no,
            header,
        })
    }

    fn validate_header(page_no: PageNo, len: usize, h: &Header) -> Result<()> {
        if h.slots_end() > h.cell_start || h.cell_start > len {
            return Err(malformed(
                page_no,
                format!(
                    "{} slots end at {} but cells start at {} of {len}",
                    h.count,
                    h.slots_end(),
                    h.cell_start
                ),
            ));
        }
        if h.frag_bytes > len - h.cell_start {
            return Err(malformed(
                page_no,
                format!("{} fragmented bytes exceed the cell area", h.frag_bytes),
            ));
        }
        let level_ok = match h.kind {
            NodeKind::Leaf => h.level == 0,
            NodeKind::Internal => (1..=LEVEL_MAX).contains(&h.level) && h.link != NO_PAGE,
        };
        if !level_ok {
            return Err(malformed(
                page_no,
                format!(
                    "{:?} node at level {} with link {}",
                    h.kind, h.level, h.link
                ),
            ));
        }
        Ok(())
    }

    /// The validated header.
    pub fn header(&self) -> Header {
        self.header
    }

    pub fn kind(&self) -> NodeKind {
        self.header.kind
    }

    pub fn count(&self) -> usize {
        self.header.count
    }

    pub fn level(&self) -> u16 {
        self.header.level
    }

    /// Right sibling (leaf) or leftmost child (internal).
    pub fn link(&self) -> PageNo {
        self.header.link
    }

    pub fn page_bytes(&self) -> usize {
        self.page.len()
    }

    /// Where entry `index`'s cell lies, checked against the page.
    pub fn cell_range(&self, index: usize) -> Result<Range<usize>> {
        match self.cell_range_if_sound(index) {
            Some((range, _)) => Ok(range),
            None => Err(self
                .cell_range_or_damage(index)
                .expect_err("a cell that fails one check fails the other")),
        }
    }

    /// [`Node::cell_range`] on the search path, with the key's length: the
    /// same checks, and `None` for any damage (named by
    /// [`Node::cell_range_or_damage`]).
    #[inline]
    fn cell_range_if_sound(&self, index: usize) -> Option<(Range<usize>, usize)> {
        let h = &self.header;
        if index >= h.count {
            return None;
        }
        let offset = read_u16(self.page, SLOTS_OFFSET + index * SLOT_BYTES)?;
        if offset < h.cell_start {
            return None;
        }
        let key_len = read_u16(self.page, offset)?;
        let value_len = match h.kind {
            NodeKind::Leaf => read_u16(self.page, offset + 2)?,
            NodeKind::Internal => 0,
        };
        let end = offset + h.kind.cell_header_bytes() + key_len + value_len;
        (end <= self.page.len()).then_some((offset..end, key_len))
    }

    /// Where entry `index`'s cell lies, or what is wrong with it.
    #[cold]
    #[inline(never)]
    fn cell_range_or_damage(&self, index: usize) -> Result<Range<usize>> {
        let h = &self.header;
        if index >= h.count {
            return Err(malformed(
                self.page_no,
                format!("entry {index} of {}", h.count),
            ));
        }
        let bad = |what: &str| malformed(self.page_no, format!("entry {index}: {what}"));
        let offset = read_u16(self.page, SLOTS_OFFSET + index * SLOT_BYTES)
            .ok_or_else(|| bad("slot cut short"))?;
        if offset < h.cell_start {
            return Err(bad(&format!(
                "cell offset {offset} below the cell area at {}",
                h.cell_start
            )));
        }
        let key_len =
            read_u16(self.page, offset).ok_or_else(|| bad("cell header overruns the page"))?;
        let value_len = match h.kind {
            NodeKind::Leaf => read_u16(self.page, offset + 2)
                .ok_or_else(|| bad("cell header overruns the page"))?,
            NodeKind::Internal => 0,
        };
        let end = offset + h.kind.cell_header_bytes() + key_len + value_len;
        if end > self.page.len() {
            return Err(bad(&format!(
                "cell at {offset} ends at {end}, past the page end"
            )));
        }
        Ok(offset..end)
    }

    /// Entry `index`'s cell.
    pub fn cell(&self, index: usize) -> Result<&'a [u8]> {
        let range = self.cell_range(index)?;
        self.page
            .get(range)
            .ok_or_else(|| malformed(self.page_no, "cell out of bounds"))
    }

    /// Entry `index`'s key (separator for an internal node).
    pub fn key(&self, index: usize) -> Result<&'a [u8]> {
        if let Some((range, key_len)) = self.cell_range_if_sound(index) {
            // A sound cell holds its key, behind the cell header.
            let start = range.start + self.header.kind.cell_header_bytes();
            let page: &'a [u8] = self.page;
            return Ok(&page[start..start + key_len]);
        }
        cell_key(self.kind(), self.cell(index)?)
            .ok_or_else(|| malformed(self.page_no, "key cut short"))
    }

    /// Entry `index`'s value (leaves only).
    pub fn value(&self, index: usize) -> Result<&'a [u8]> {
        if self.kind() != NodeKind::Leaf {
            return Err(malformed(self.page_no, "an internal node has no values"));
        }
        cell_value(self.cell(index)?).ok_or_else(|| malformed(self.page_no, "value cut short"))
    }

    /// Where entry `index`'s value lies in the page (leaves only).
    pub fn value_range(&self, index: usize) -> Result<Range<usize>> {
        let value_len = self.value(index)?.len();
        let end = self.cell_range(index)?.end;
        Ok(end - value_len..end)
    }

    /// Child `c` of an internal node: 0 is the leftmost child, `i + 1` the
    /// child of entry `i`.
    pub fn child_at(&self, c: usize) -> Result<PageNo> {
        if self.kind() != NodeKind::Internal {
            return Err(malformed(self.page_no, "a leaf has no children"));
        }
        let child = match c {
            0 => self.link(),
            _ => cell_child(self.cell(c - 1)?)
                .ok_or_else(|| malformed(self.page_no, "child cut short"))?,
        };
        if child == NO_PAGE {
            return Err(malformed(
                self.page_no,
                format!("child {c} is the no-page link"),
            ));
        }
        Ok(child)
    }

    /// Binary search: `Ok(i)` if entry i has `key`, `Err(i)` for the index
    /// where it would go.
    pub fn search(&self, key: &[u8]) -> Result<std::result::Result<usize, usize>> {
        let (mut lo, mut hi) = (0, self.count());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match compare_keys(self.key(mid)?, key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(Ok(mid)),
            }
        }
        Ok(Err(lo))
    }

    /// The child index (as for [`Node::child_at`]) whose range holds `key`:
    /// the child of the last separator ≤ key, or the leftmost child.
    pub fn child_index_for(&self, key: &[u8]) -> Result<usize> {
        Ok(match self.search(key)? {
            Ok(i) => i + 1,
            Err(i) => i,
        })
    }

    /// Copies of all cells in key order.
    pub fn cells(&self) -> Result<Vec<Vec<u8>>> {
        (0..self.count())
            .map(|i| self.cell(i).map(<[u8]>::to_vec))
            .collect()
    }

    /// Check that cells lie in the cell area without overlapping and that
    /// live plus fragmented bytes account for the whole area (BTREE-5).
    /// Returns the live cell bytes.
    pub fn validate_layout(&self) -> Result<usize> {
        let mut ranges = (0..self.count())
            .map(|i| self.cell_range(i))
            .collect::<Result<Vec<_>>>()?;
        ranges.sort_by_key(|r| r.start);
        for pair in ranges.windows(2) {
            if let [a, b] = pair
                && a.end > b.start
            {
                return Err(malformed(
                    self.page_no,
                    format!("cells {a:?} and {b:?} overlap"),
                ));
            }
        }
        let live_bytes: usize = ranges.iter().map(ExactSizeIterator::len).sum();
        let area_bytes = self.page.len() - self.header.cell_start;
        if live_bytes + self.header.frag_bytes != area_bytes {
            return Err(malformed(
                self.page_no,
                format!(
                    "{live_bytes} live + {} fragmented bytes but the cell area has {area_bytes}",
                    self.header.frag_bytes
                ),
            ));
        }
        Ok(live_bytes)
    }
}

/// A node being changed. Every change stays at or after `PAGE_BODY_OFFSET`
/// (BTREE-7); the page comes from `PageAccess::write`.
pub struct NodeMut<'a> {
    page: &'a mut [u8],
    page_no: PageNo,
}

impl<'a> NodeMut<'a> {
    pub fn new(page_no: PageNo, page: &'a mut [u8]) -> NodeMut<'a> {
        NodeMut { page, page_no }
    }

    /// The node as it is now.
    pub fn view(&self) -> Result<Node<'_>> {
        Node::parse(self.page_no, self.page)
    }

    fn put(&mut self, at: usize, bytes: &[u8]) -> Result<()> {
        debug_assert!(
            at >= PAGE_BODY_OFFSET,
            "BTREE-7: write at {at} in the buffer pool's header"
        );
        let end = at + bytes.len();
        let target = self.page.get_mut(at..end).ok_or_else(|| {
            malformed(
                self.page_no,
                format!("write of {at}..{end} past the page end"),
            )
        })?;
        target.copy_from_slice(bytes);
        Ok(())
    }

    fn put_u16(&mut self, at: usize, value: usize) -> Result<()> {
        let value = u16::try_from(value)
            .map_err(|_| malformed(self.page_no, format!("{value} overflows 16 bits")))?;
        self.put(at, &value.to_le_bytes())
    }

    fn put_u32(&mut self, at: usize, value: usize) -> Result<()> {
        let value = u32::try_from(value)
            .map_err(|_| malformed(self.page_no, format!("{value} overflows 32 bits")))?;
        self.put(at, &value.to_le_bytes())
    }

    /// Make the page an empty node.
    pub fn format(&mut self, kind: NodeKind, level: u16, link: PageNo) -> Result<()> {
        let len = self.page.len();
        if !(SLOTS_OFFSET..=PAGE_BYTES_MAX).contains(&len) {
            return Err(malformed(
                self.page_no,
                format!("a page of {len} bytes cannot hold a node"),
            ));
        }
        self.page[PAGE_BODY_OFFSET..SLOTS_OFFSET].fill(0);
        page::set_page_type(self.page, kind.page_type());
        self.put_u16(LEVEL_OFFSET, usize::from(level))?;
        self.put_u32(CELL_START_OFFSET, len)?;
        self.set_link(link)
    }

    /// Set the right sibling (leaf) or leftmost child (internal).
    pub fn set_link(&mut self, link: PageNo) -> Result<()> {
        self.put(LINK_OFFSET, &link.to_le_bytes())
    }

    /// Insert `cell` as entry `index`, compacting if the free gap is too
    /// small. `Ok(false)`, with the page unchanged, if it does not fit.
    pub fn insert(&mut self, index: usize, cell: &[u8]) -> Result<bool> {
        let mut h = self.view()?.header();
        if index > h.count {
            return Err(malformed(
                self.page_no,
                format!("insert at {index} of {} entries", h.count),
            ));
        }
        let need_bytes = cell.len() + SLOT_BYTES;
        if need_bytes > h.free_bytes() {
            return Ok(false);
        }
        if need_bytes > h.gap_bytes() {
            self.compact()?;
            h = self.view()?.header();
            if need_bytes > h.gap_bytes() {
                return Err(malformed(self.page_no, "fragmented-bytes count is wrong"));
            }
        }
        let start = h.cell_start - cell.len();
        self.put(start, cell)?;
        let slot_at = SLOTS_OFFSET + index * SLOT_BYTES;
        // In bounds: slots_end + SLOT_BYTES <= start (checked just above).
        self.page
            .copy_within(slot_at..h.slots_end(), slot_at + SLOT_BYTES);
        self.put_u16(slot_at, start)?;
        self.put_u16(COUNT_OFFSET, h.count + 1)?;
        self.put_u32(CELL_START_OFFSET, start)?;
        debug_assert!(
            h.slots_end() + SLOT_BYTES <= start,
            "BTREE-5: slots run into cells"
        );
        Ok(true)
    }

    /// Remove entry `index`; its cell's bytes become fragmented (or return
    /// to the gap if it was the lowest cell).
    pub fn remove(&mut self, index: usize) -> Result<()> {
        let node = self.view()?;
        let h = node.header();
        let range = node.cell_range(index)?;
        let slot_at = SLOTS_OFFSET + index * SLOT_BYTES;
        // In bounds: index < count, so slot_at + SLOT_BYTES <= slots_end.
        self.page
            .copy_within(slot_at + SLOT_BYTES..h.slots_end(), slot_at);
        self.put_u16(COUNT_OFFSET, h.count - 1)?;
        if range.start == h.cell_start {
            self.put_u32(CELL_START_OFFSET, range.end)
        } else {
            self.put_u32(FRAG_OFFSET, h.frag_bytes + range.len())
        }
    }

    /// Overwrite leaf entry `index`'s value in place if the new cell is no
    /// larger than the old one. `Ok(false)`, page unchanged, otherwise.
    pub fn replace_value(&mut self, index: usize, value: &[u8]) -> Result<bool> {
        let node = self.view()?;
        let h = node.header();
        let range = node.cell_range(index)?;
        let key_len = node.key(index)?.len();
        if h.kind != NodeKind::Leaf {
            return Err(malformed(self.page_no, "an internal node has no values"));
        }
        let new_len = LEAF_CELL_HEADER_BYTES + key_len + value.len();
        if new_len > range.len() {
            return Ok(false);
        }
        self.put_u16(range.start + 2, value.len())?;
        self.put(range.start + LEAF_CELL_HEADER_BYTES + key_len, value)?;
        if new_len < range.len() {
            self.put_u32(FRAG_OFFSET, h.frag_bytes + range.len() - new_len)?;
        }
        Ok(true)
    }

    /// Rewrite the page as a node holding exactly `cells` (in key order).
    pub fn rebuild(
        &mut self,
        kind: NodeKind,
        level: u16,
        link: PageNo,
        cells: &[Vec<u8>],
    ) -> Result<()> {
        let need_bytes: usize = cells.iter().map(|c| c.len() + SLOT_BYTES).sum();
        let capacity = capacity_bytes(self.page.len());
        if need_bytes > capacity {
            return Err(malformed(
                self.page_no,
                format!(
                    "{} cells of {need_bytes} bytes do not fit {capacity} bytes",
                    cells.len()
                ),
            ));
        }
        self.format(kind, level, link)?;
        self.write_cells(cells)
    }

    /// Squeeze out fragmented bytes: rewrite the cells packed at the end.
    fn compact(&mut self) -> Result<()> {
        let node = self.view()?;
        let h = node.header();
        let cells = node.cells()?;
        let live_bytes: usize = cells.iter().map(Vec::len).sum();
        if h.slots_end() + live_bytes > self.page.len() {
            return Err(malformed(self.page_no, "cells overlap"));
        }
        self.write_cells(&cells)?;
        self.put_u32(FRAG_OFFSET, 0)
    }

    /// Write `cells` packed at the end of the page with their slots; the
    /// caller has checked that they fit.
    fn write_cells(&mut self, cells: &[Vec<u8>]) -> Result<()> {
        let mut start = self.page.len();
        for (i, cell) in cells.iter().enumerate() {
            start -= cell.len();
            self.put(start, cell)?;
            self.put_u16(SLOTS_OFFSET + i * SLOT_BYTES, start)?;
        }
        self.put_u16(COUNT_OFFSET, cells.len())?;
        self.put_u32(CELL_START_OFFSET, start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf_page(page_bytes: usize) -> Vec<u8> {
        let mut page = vec![0u8; page_bytes];
        NodeMut::new(1, &mut page)
            .format(NodeKind::Leaf, 0, NO_PAGE)
            .unwrap();
        page
    }

    fn keys(page: &[u8]) -> Vec<Vec<u8>> {
        let node = Node::parse(1, page).unwrap();
        (0..node.count())
            .map(|i| node.key(i).unwrap().to_vec())
            .collect()
    }

    #[test]
    fn header_layout_is_as_documented() {
        assert_eq!(SLOTS_OFFSET, 40);
        let page = leaf_page(2048);
        assert_eq!(page[20], PageType::BTreeLeaf as u8);
        assert_eq!(read_u32(&page, 28), Some(2048));
        assert_eq!(read_u32(&page, 36), Some(NO_PAGE));
        assert!(page[..20].iter().all(|&b| b == 0), "BTREE-7");
    }

    #[test]
    fn insert_remove_and_compact_keep_the_accounting() {
        let mut page = leaf_page(2048);
        let mut node = NodeMut::new(1, &mut page);
        for (i, k) in [b"b", b"d", b"a", b"c"].iter().enumerate() {
            let index = node.view().unwrap().search(*k).unwrap().unwrap_err();
            assert!(
                node.insert(index, &leaf_cell(*k, &[i as u8; 100]).unwrap())
                    .unwrap()
            );
        }
        node.remove(1).unwrap(); // "b": not the lowest cell, so fragmented
        assert_eq!(node.view().unwrap().header().frag_bytes, 105);
        assert_eq!(node.view().unwrap().validate_layout().unwrap(), 3 * 105);
        // Fill the page until the next insert needs compaction.
        let mut n = 0u8;
        while node
            .insert(
                node.view().unwrap().count(),
                &leaf_cell(&[b'x', n], &[0; 100]).unwrap(),
            )
            .unwrap()
        {
            n += 1;
        }
        assert_eq!(
            node.view().unwrap().header().frag_bytes,
            0,
            "compaction ran"
        );
        node.view().unwrap().validate_layout().unwrap();
        assert_eq!(
            &keys(&page)[..3],
            &[b"a".to_vec(), b"c".to_vec(), b"d".to_vec()]
        );
    }

    #[test]
    fn replace_value_in_place_only_when_not_larger() {
        let mut page = leaf_page(2048);
        let mut node = NodeMut::new(1, &mut page);
        node.insert(0, &leaf_cell(b"k", b"hello").unwrap()).unwrap();
        assert!(node.replace_value(0, b"hi").unwrap());
        assert_eq!(node.view().unwrap().value(0).unwrap(), b"hi");
        assert_eq!(node.view().unwrap().header().frag_bytes, 3);
        assert!(!node.replace_value(0, b"a longer value").unwrap());
        node.view().unwrap().validate_layout().unwrap();
    }

    #[test]
    fn internal_children_are_found_by_separator() {
        let mut page = vec![0u8; 2048];
        let mut node = NodeMut::new(3, &mut page);
        let cells = vec![
            internal_cell(b"g", 11).unwrap(),
            internal_cell(b"p", 12).unwrap(),
        ];
        node.rebuild(NodeKind::Internal, 1, 10, &cells).unwrap();
        let view = node.view().unwrap();
        for (key, child) in [
            (&b"a"[..], 10),
            (b"g", 11),
            (b"h", 11),
            (b"p", 12),
            (b"z", 12),
        ] {
            assert_eq!(
                view.child_at(view.child_index_for(key).unwrap()).unwrap(),
                child
            );
        }
    }

    #[test]
    fn max_entry_leaves_room_for_four_entries() {
        for page_bytes in [2048, 8192, 65536] {
            let max = max_entry_bytes(page_bytes);
            let cell_bytes = max + INTERNAL_CELL_HEADER_BYTES + SLOT_BYTES;
            assert!(
                ENTRIES_PER_PAGE_MIN * cell_bytes <= capacity_bytes(page_bytes),
                "BTREE-6"
            );
        }
        assert_eq!(max_entry_bytes(2048), 494);
    }

    #[test]
    fn garbage_headers_are_rejected() {
        let mut page = leaf_page(2048);
        page[24..26].copy_from_slice(&2000u16.to_le_bytes()); // count: slots past cell start
        assert!(Node::parse(1, &page).is_err());
        let mut page = leaf_page(2048);
        page[26] = 1; // a leaf above level 0
        assert!(Node::parse(1, &page).is_err());
        let mut page = leaf_page(2048);
        page[24] = 1; // one slot pointing at offset 0
        let node = Node::parse(1, &page).unwrap();
        assert!(node.key(0).is_err());
        assert!(Node::parse(1, &[0u8; 30]).is_err());
    }

    #[test]
    fn keys_compare_in_byte_order() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |bound: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % bound
        };
        for _ in 0..20_000 {
            // Short alphabets and lengths around 8 make equal prefixes,
            // equal first words and keys that are prefixes of others.
            let mut key = || -> Vec<u8> { (0..next(28)).map(|_| next(3) as u8).collect() };
            let (a, b) = (key(), key());
            assert_eq!(compare_keys(&a, &b), a.cmp(&b), "{a:?} against {b:?}");
        }
    }

    #[test]
    fn a_damaged_cell_is_named_on_the_search_path_too() {
        // Each kind of damage: the cell's range and its key are refused
        // with the message that names it.
        let mut page = leaf_page(2048);
        let mut node = NodeMut::new(1, &mut page);
        node.insert(0, &leaf_cell(b"key", b"value").unwrap())
            .unwrap();
        let offset = read_u16(&page, SLOTS_OFFSET).unwrap();
        let cases: [(usize, u16, &str); 5] = [
            (SLOTS_OFFSET, 100, "below the cell area"),
            (SLOTS_OFFSET, 2047, "cell header overruns the page"), // its key length
            (SLOTS_OFFSET, 2045, "cell header overruns the page"), // its value length
            (offset, 3000, "past the page end"),
            (offset + 2, 3000, "past the page end"),
        ];
        for (at, value, names) in cases {
            let mut damaged = page.clone();
            damaged[at..at + 2].copy_from_slice(&value.to_le_bytes());
            let node = Node::parse(1, &damaged).unwrap();
            for error in [
                node.cell_range(0).unwrap_err(),
                node.key(0).unwrap_err(),
                node.search(b"key").unwrap_err(),
            ] {
                assert!(
                    error.to_string().contains(names),
                    "{error} does not name '{names}'"
                );
            }
        }
        let node = Node::parse(1, &page).unwrap();
        assert!(
            node.cell_range(1)
                .unwrap_err()
                .to_string()
                .contains("entry 1 of 1")
        );
        assert_eq!(node.search(b"key").unwrap(), Ok(0));
    }
}
