//! B+tree algorithms: lookup, upsert with splits, delete, range scan.
//!
//! Every operation starts with a descent from the root, reading internal
//! nodes and following the child whose key range holds the key; the levels
//! stored in the nodes must step down by one each time, which both checks
//! the structure and bounds the descent on a corrupt tree (BTREE-9).
//!
//! An insert that does not fit its leaf *splits* it: the leaf's entries plus
//! the new one are divided by bytes (not counts, since sizes vary) into two
//! nodes, and a separator for the new right node goes into the parent, which
//! may split in turn. Leaf separators are the shortest prefix of the right
//! node's first key that is still above the left node's last key, which
//! keeps internal nodes small for long keys. Two special cases:
//! - the root never moves (BTREE-1): when it splits, its contents go to two
//!   new pages and the root becomes an internal node above them;
//! - an append at the end of the rightmost leaf (bulk loads in key order)
//!   splits off only the new entry, so the left page stays full rather than
//!   half full; the internal nodes along the right edge do the same.
//!
//! Deletes remove the entry and nothing else (BTREE-8): pages are never
//! merged or freed, so separators stay valid and leaves may be empty. Space
//! comes back as later inserts land on the same leaves. Lookups and scans
//! simply find no entries on an empty leaf.
//!
//! The tree holds no locks and no cached pages; its only state is the root
//! page number. Callers serialize access and make each operation one
//! mini-transaction (a split changes three or more pages at once).

use std::collections::HashSet;
use std::ops::Bound;

use super::node::{
    self, ENTRIES_PER_PAGE_MIN, NO_PAGE, Node, NodeKind, NodeMut, SLOT_BYTES, capacity_bytes,
    malformed, max_entry_bytes,
};
use crate::error::{Error, Result};
use crate::mtr::PageAccess;
use crate::page::{self, PageNo};

/// A B+tree of byte-string keys (memcmp order) and byte-string values.
/// See the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BTree {
    root: PageNo,
}

/// One internal node on the way down: the page and the child index taken.
#[derive(Clone, Copy, Debug)]
struct Step {
    page_no: PageNo,
    child_index: usize,
}

/// Where the last insert of ascending keys went, for the next one: the
/// tree's rightmost leaf and the path to it (BTREE-10). A bulk load keeps
/// one for the inserts of one mini-transaction, under the tree's exclusive
/// latch, and drops it with the mini-transaction.
#[derive(Debug, Default)]
pub struct AppendHint {
    at: Option<(PageNo, Vec<Step>)>,
}

/// The leaf where a key is or would be, and the internal nodes above it
/// ([`BTree::seek`]).
#[derive(Debug)]
pub struct LeafPosition {
    leaf: PageNo,
    path: Vec<Step>,
    /// The key's value when the leaf was visited.
    value: Option<Vec<u8>>,
    /// The leaf's page LSN when it was visited.
    leaf_lsn: u64,
}

impl LeafPosition {
    /// The value stored under the key when [`BTree::seek`] found its leaf
    /// (`None`: absent), taken out.
    pub fn take_value(&mut self) -> Option<Vec<u8>> {
        self.value.take()
    }

    /// The leaf's page number.
    pub fn leaf(&self) -> PageNo {
        self.leaf
    }

    /// The leaf's page LSN when [`BTree::seek`] visited it.
    pub fn leaf_lsn(&self) -> u64 {
        self.leaf_lsn
    }
}

/// Where a descent goes.
#[derive(Clone, Copy)]
enum Target<'k> {
    Key(&'k [u8]),
    Leftmost,
}

/// A node that overflowed: its page, its cells including the new one, and
/// where the new one went.
struct Overflow {
    page_no: PageNo,
    cells: Vec<Vec<u8>>,
    insert_index: usize,
}

impl BTree {
    /// Create an empty tree: allocate its root, a leaf.
    pub fn create<P: PageAccess + ?Sized>(pages: &mut P) -> Result<BTree> {
        page::validate_page_bytes(pages.page_bytes())?;
        let root = pages.allocate(NodeKind::Leaf.page_type())?;
        NodeMut::new(root, pages.write(root)?).format(NodeKind::Leaf, 0, NO_PAGE)?;
        Ok(BTree { root })
    }

    /// The tree whose root is `root` (as returned by [`BTree::root`]).
    pub fn open(root: PageNo) -> BTree {
        BTree { root }
    }

    /// The root page; it never changes (BTREE-1).
    pub fn root(&self) -> PageNo {
        self.root
    }

    /// The value stored under `key`.
    pub fn get<P: PageAccess + ?Sized>(
        &self,
        pages: &mut P,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        let leaf = self.descend(pages, Target::Key(key))?;
        let node = Node::parse(leaf, pages.read(leaf)?)?;
        match node.search(key)? {
            Ok(i) => Ok(Some(node.value(i)?.to_vec())),
            Err(_) => Ok(None),
        }
    }

    /// The value stored under `key`, as [`BTree::get`] finds it, visiting
    /// each page on the way once instead of reading it
    /// ([`PageAccess::visit`]: a mini-transaction keeps no copies).
    pub fn lookup<P: PageAccess + ?Sized>(
        &self,
        pages: &mut P,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        /// What one visited page says.
        enum Found {
            Child { page_no: PageNo, level: u16 },
            Leaf(Option<Vec<u8>>),
        }
        let mut page_no = self.root;
        let mut expected_level = None;
        loop {
            let mut found = None;
            pages.visit(page_no, &mut |bytes| {
                let node = node_at_level(page_no, bytes, expected_level)?;
                found = Some(if node.kind() == NodeKind::Leaf {
                    Found::Leaf(match node.search(key)? {
                        Ok(i) => Some(node.value(i)?.to_vec()),
                        Err(_) => None,
                    })
                } else {
                    let child_index = node.child_index_for(key)?;
                    Found::Child {
                        page_no: node.child_at(child_index)?,
                        level: node.level() - 1,
                    }
                });
                Ok(())
            })?;
            match found.expect("a visit that succeeded saw the page") {
                Found::Leaf(value) => return Ok(value),
                Found::Child {
                    page_no: child,
                    level,
                } => {
                    page_no = child;
                    expected_level = Some(level);
                }
            }
        }
    }

    /// Store `value` under `key`, returning the previous value. Fails with
    /// `Error::TooLarge` if key + value exceed [`max_entry_bytes`].
    pub fn insert<P: PageAccess + ?Sized>(
        &self,
        pages: &mut P,
        key: &[u8],
        value: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        // The leaf is read (copied) on the way, as `put_at` writes it next;
        // no value is looked up for a caller that does not ask.
        let mut path = Vec::new();
        let leaf = self.descend_recording(pages, Target::Key(key), Some(&mut path))?;
        let at = LeafPosition {
            leaf,
            path,
            value: None,
            leaf_lsn: 0,
        };
        self.put_at(pages, at, key, value)
    }

    /// Walk down to the leaf where `key` is or would be, visiting every
    /// page on the way (no copy is kept) and reading the key's value in
    /// the leaf, for [`BTree::put_at`]: a read and a write of one key with
    /// one descent. The position stays valid while the tree's structure
    /// cannot change (the caller's latch keeps splits out).
    pub fn seek<P: PageAccess + ?Sized>(&self, pages: &mut P, key: &[u8]) -> Result<LeafPosition> {
        let mut path = Vec::new();
        let mut seen = (None, 0);
        let leaf = self.descend_to(pages, Target::Key(key), Some(&mut path), Some(&mut seen))?;
        let (value, leaf_lsn) = seen;
        Ok(LeafPosition {
            leaf,
            path,
            value,
            leaf_lsn,
        })
    }

    /// Store `value` under `key` in the leaf `at` found for it, returning
    /// the previous value, as [`BTree::insert`] does.
    pub fn put_at<P: PageAccess + ?Sized>(
        &self,
        pages: &mut P,
        at: LeafPosition,
        key: &[u8],
        value: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        check_entry_size(pages.page_bytes(), key, value)?;
        let cell = node::leaf_cell(key, value)?;
        debug_assert!(
            (cell.len() + SLOT_BYTES) * ENTRIES_PER_PAGE_MIN <= capacity_bytes(pages.page_bytes()),
            "BTREE-6"
        );
        let LeafPosition { leaf, path, .. } = at;
        // A value of the same length is overwritten in place (MTR-13):
        // the only bytes that change are the value's.
        let mut old = None;
        let in_place = pages.write_in_place(
            leaf,
            &mut |page| {
                let node = Node::parse(leaf, page)?;
                let Ok(i) = node.search(key)? else {
                    return Ok(None);
                };
                let range = node.value_range(i)?;
                if range.len() != value.len() {
                    return Ok(None);
                }
                old = Some(page[range.clone()].to_vec());
                Ok(Some(range.start))
            },
            value,
        )?;
        if in_place {
            return Ok(old);
        }
        let mut node = NodeMut::new(leaf, pages.write(leaf)?);
        let found = node.view()?.search(key)?;
        let (index, old) = match found {
            Ok(i) => {
                let old = node.view()?.value(i)?.to_vec();
                if node.replace_value(i, value)? {
                    return Ok(Some(old));
                }
                node.remove(i)?;
                (i, Some(old))
            }
            Err(i) => (i, None),
        };
        self.insert_cell(pages, &path, leaf, index, cell)?;
        Ok(old)
    }

    /// Put `cell` at `index` of the leaf page `leaf` (reached by `path`),
    /// splitting up the path if it does not fit. Returns true if it split.
    fn insert_cell<P: PageAccess + ?Sized>(
        &self,
        pages: &mut P,
        path: &[Step],
        leaf: u32,
        index: usize,
        cell: Vec<u8>,
    ) -> Result<bool> {
        let mut node = NodeMut::new(leaf, pages.write(leaf)?);
        if node.insert(index, &cell)? {
            return Ok(false);
        }
        let mut cells = node.view()?.cells()?;
        cells.insert(index, cell);
        self.split_up(
            pages,
            path.to_vec(),
            Overflow {
                page_no: leaf,
                cells,
                insert_index: index,
            },
        )?;
        Ok(true)
    }

    /// Store `value` under `key` if `key` is absent; false (and nothing
    /// written) if it is present. One descent, where a [`BTree::get`] and
    /// an [`BTree::insert`] would take two (the bulk-load path).
    pub fn insert_absent<P: PageAccess + ?Sized>(
        &self,
        pages: &mut P,
        key: &[u8],
        value: &[u8],
    ) -> Result<bool> {
        self.insert_absent_hinted(pages, key, value, &mut AppendHint::default())
    }

    /// [`BTree::insert_absent`] for one of a run of inserts in one
    /// mini-transaction under the tree's exclusive latch: a key above the
    /// last one of the rightmost leaf `hint` names goes there without a
    /// descent (BTREE-10), and `hint` is left naming the rightmost leaf
    /// this insert reached, if it did not split.
    pub fn insert_absent_hinted<P: PageAccess + ?Sized>(
        &self,
        pages: &mut P,
        key: &[u8],
        value: &[u8],
        hint: &mut AppendHint,
    ) -> Result<bool> {
        check_entry_size(pages.page_bytes(), key, value)?;
        let cell = node::leaf_cell(key, value)?;
        if let Some((leaf, path)) = hint.at.take() {
            let node = Node::parse(leaf, pages.read(leaf)?)?;
            let count = node.count();
            if node.link() == NO_PAGE && count > 0 && node.key(count - 1)? < key {
                if !self.insert_cell(pages, &path, leaf, count, cell)? {
                    hint.at = Some((leaf, path));
                }
                return Ok(true);
            }
        }
        let mut path = Vec::new();
        let leaf = self.descend_recording(pages, Target::Key(key), Some(&mut path))?;
        let node = Node::parse(leaf, pages.read(leaf)?)?;
        let rightmost = node.link() == NO_PAGE;
        let index = match node.search(key)? {
            Ok(_) => return Ok(false),
            Err(i) => i,
        };
        if !self.insert_cell(pages, &path, leaf, index, cell)? && rightmost {
            hint.at = Some((leaf, path));
        }
        Ok(true)
    }

    /// Remove `key`, returning its value. The leaf is left as it is, even
    /// if empty (BTREE-8).
    pub fn delete<P: PageAccess + ?Sized>(
        &self,
        pages: &mut P,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        let leaf = self.descend(pages, Target::Key(key))?;
        let found = {
            let node = Node::parse(leaf, pages.read(leaf)?)?;
            match node.search(key)? {
                Ok(i) => Some((i, node.value(i)?.to_vec())),
                Err(_) => None,
            }
        };
        let Some((index, old)) = found else {
            return Ok(None);
        };
        NodeMut::new(leaf, pages.write(leaf)?).remove(index)?;
        Ok(Some(old))
    }

    /// Visit the entries with keys between `lower` and `upper` in ascending
    /// order, walking the leaves by their sibling links, until `visit`
    /// returns false. Keys must ascend along the way; a corrupt chain that
    /// loops back is an error, never an endless scan (BTREE-9).
    pub fn scan<P, F>(
        &self,
        pages: &mut P,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        mut visit: F,
    ) -> Result<()>
    where
        P: PageAccess + ?Sized,
        F: FnMut(&[u8], &[u8]) -> Result<bool>,
    {
        let target = match lower {
            Bound::Included(key) | Bound::Excluded(key) => Target::Key(key),
            Bound::Unbounded => Target::Leftmost,
        };
        let mut leaf = self.descend(pages, target)?;
        let mut start_bound = lower;
        let mut last_key: Option<Vec<u8>> = None;
        let mut empty_run = HashSet::new();
        loop {
            let node = Node::parse(leaf, pages.read(leaf)?)?;
            if node.kind() != NodeKind::Leaf {
                return Err(malformed(leaf, "sibling link leads to an internal node"));
            }
            if node.count() == 0 {
                if !empty_run.insert(leaf) {
                    return Err(malformed(leaf, "sibling chain loops through empty leaves"));
                }
            } else {
                empty_run.clear();
            }
            let start = match start_bound {
                Bound::Unbounded => 0,
                Bound::Included(key) => node.search(key)?.unwrap_or_else(|i| i),
                Bound::Excluded(key) => node.search(key)?.map_or_else(|i| i, |i| i + 1),
            };
            start_bound = Bound::Unbounded;
            let mut prev: Option<&[u8]> = last_key.as_deref();
            for i in start..node.count() {
                let key = node.key(i)?;
                if prev.is_some_and(|p| p >= key) {
                    return Err(malformed(leaf, "keys do not ascend along the leaf chain"));
                }
                prev = Some(key);
                if !below_upper(key, upper) || !visit(key, node.value(i)?)? {
                    return Ok(());
                }
            }
            if let Some(i) = node.count().checked_sub(1) {
                let key = node.key(i)?;
                if last_key.as_deref().is_some_and(|p| p >= key) {
                    return Err(malformed(leaf, "keys do not ascend along the leaf chain"));
                }
                last_key = Some(key.to_vec());
            }
            leaf = node.link();
            if leaf == NO_PAGE {
                return Ok(());
            }
        }
    }

    /// Walk down to the leaf for `target`.
    fn descend<P: PageAccess + ?Sized>(&self, pages: &mut P, target: Target) -> Result<PageNo> {
        self.descend_recording(pages, target, None)
    }

    /// Walk down to the leaf for `target`, recording the internal nodes
    /// passed in `path` if given. Internal nodes are visited in place (no
    /// copy is kept: a split reads its path again); the leaf, which the
    /// caller reads next, is read.
    fn descend_recording<P: PageAccess + ?Sized>(
        &self,
        pages: &mut P,
        target: Target,
        path: Option<&mut Vec<Step>>,
    ) -> Result<PageNo> {
        self.descend_to(pages, target, path, None)
    }

    /// [`BTree::descend_recording`]; with `leaf_value`, the leaf is visited
    /// rather than copied (the caller may write it, and a one-leaf
    /// mini-transaction copies a leaf it writes again under the leaf's
    /// latch, MTR-12), and the target key's value in it is put there.
    fn descend_to<P: PageAccess + ?Sized>(
        &self,
        pages: &mut P,
        target: Target,
        mut path: Option<&mut Vec<Step>>,
        mut leaf_value: Option<&mut (Option<Vec<u8>>, u64)>,
    ) -> Result<PageNo> {
        let copy_leaf = leaf_value.is_none();
        let mut page_no = self.root;
        let mut expected_level = None;
        loop {
            let mut step = None;
            let mut inspect = |bytes: &[u8]| -> Result<()> {
                let node = node_at_level(page_no, bytes, expected_level)?;
                if node.kind() == NodeKind::Leaf {
                    if let (Some(out), Target::Key(key)) = (leaf_value.as_mut(), target) {
                        out.0 = match node.search(key)? {
                            Ok(i) => Some(node.value(i)?.to_vec()),
                            Err(_) => None,
                        };
                        out.1 = crate::page::lsn(bytes);
                    }
                    return Ok(());
                }
                let child_index = match target {
                    Target::Key(key) => node.child_index_for(key)?,
                    Target::Leftmost => 0,
                };
                step = Some((child_index, node.level() - 1, node.child_at(child_index)?));
                Ok(())
            };
            match expected_level {
                Some(0) if copy_leaf => inspect(pages.read(page_no)?)?,
                _ => pages.visit(page_no, &mut inspect)?,
            }
            let Some((child_index, child_level, child)) = step else {
                return Ok(page_no);
            };
            if let Some(path) = path.as_mut() {
                path.push(Step {
                    page_no,
                    child_index,
                });
            }
            expected_level = Some(child_level);
            page_no = child;
        }
    }

    /// Split the overflowing node and insert separators upwards until one
    /// fits or the root splits.
    fn split_up<P: PageAccess + ?Sized>(
        &self,
        pages: &mut P,
        mut path: Vec<Step>,
        first: Overflow,
    ) -> Result<()> {
        let mut overflow = first;
        let mut append = true;
        loop {
            let header = Node::parse(overflow.page_no, pages.read(overflow.page_no)?)?.header();
            // An append split only along the right edge (see module docs).
            append = append
                && overflow.insert_index + 1 == overflow.cells.len()
                && (header.kind == NodeKind::Internal || header.link == NO_PAGE);
            let plan = plan_split(header.kind, &overflow.cells, append);
            if overflow.page_no == self.root {
                return self.split_root(pages, header, &overflow.cells, plan);
            }
            let (separator, right) =
                split_node(pages, overflow.page_no, header, &overflow.cells, plan)?;
            let step = path
                .pop()
                .ok_or_else(|| malformed(overflow.page_no, "a non-root node without a parent"))?;
            let cell = node::internal_cell(&separator, right)?;
            let mut parent = NodeMut::new(step.page_no, pages.write(step.page_no)?);
            if parent.insert(step.child_index, &cell)? {
                return Ok(());
            }
            let mut cells = parent.view()?.cells()?;
            cells.insert(step.child_index, cell);
            overflow = Overflow {
                page_no: step.page_no,
                cells,
                insert_index: step.child_index,
            };
        }
    }

    /// Root split: its halves move to two new pages; the root becomes an
    /// internal node one level up with a single separator (BTREE-1).
    fn split_root<P: PageAccess + ?Sized>(
        &self,
        pages: &mut P,
        header: node::Header,
        cells: &[Vec<u8>],
        plan: usize,
    ) -> Result<()> {
        let level = header
            .level
            .checked_add(1)
            .filter(|&level| level <= node::LEVEL_MAX)
            .ok_or_else(|| {
                Error::TooLarge(format!("B+tree would exceed {} levels", node::LEVEL_MAX))
            })?;
        let left = pages.allocate(header.kind.page_type())?;
        let (separator, right) = split_node(pages, left, header, cells, plan)?;
        let root_cells = [node::internal_cell(&separator, right)?];
        NodeMut::new(self.root, pages.write(self.root)?).rebuild(
            NodeKind::Internal,
            level,
            left,
            &root_cells,
        )
    }
}

/// Fail with `TooLarge` if an entry breaks the size limit (BTREE-6).
pub(crate) fn check_entry_size(page_bytes: usize, key: &[u8], value: &[u8]) -> Result<()> {
    let limit_bytes = max_entry_bytes(page_bytes);
    let entry_bytes = key.len() + value.len();
    if entry_bytes > limit_bytes {
        return Err(Error::TooLarge(format!(
            "B+tree entry of {} key + {} value = {entry_bytes} bytes exceeds the limit of {limit_bytes} bytes \
             for {page_bytes}-byte pages (at least {ENTRIES_PER_PAGE_MIN} entries must fit a page)",
            key.len(),
            value.len()
        )));
    }
    Ok(())
}

fn below_upper(key: &[u8], upper: Bound<&[u8]>) -> bool {
    match upper {
        Bound::Included(limit) => key <= limit,
        Bound::Excluded(limit) => key < limit,
        Bound::Unbounded => true,
    }
}

/// Where to split `cells`: for a leaf, the index of the first cell of the
/// right node; for an internal node, the index of the cell pushed up (its
/// child becomes the right node's leftmost child). Balanced by bytes,
/// unless `append` asks for a split right below the last cell.
fn plan_split(kind: NodeKind, cells: &[Vec<u8>], append: bool) -> usize {
    let n = cells.len();
    let (first, last) = match kind {
        NodeKind::Leaf => (1, n.saturating_sub(1)),
        NodeKind::Internal => (1, n.saturating_sub(2)),
    };
    if append || first >= last {
        return last.max(first);
    }
    let sizes: Vec<usize> = cells.iter().map(|c| c.len() + SLOT_BYTES).collect();
    let total: usize = sizes.iter().sum();
    let mut best = (usize::MAX, first);
    let mut left = sizes.iter().take(first).sum::<usize>();
    for at in first..=last {
        let right = match kind {
            NodeKind::Leaf => total - left,
            NodeKind::Internal => total - left - sizes.get(at).copied().unwrap_or(0),
        };
        best = best.min((left.max(right), at));
        left += sizes.get(at).copied().unwrap_or(0);
    }
    best.1
}

/// Split `cells` at `at` between page `left` (rewritten in place, keeping
/// its link or leftmost child) and a newly allocated right page. Returns
/// the separator for the parent and the right page.
fn split_node<P: PageAccess + ?Sized>(
    pages: &mut P,
    left: PageNo,
    header: node::Header,
    cells: &[Vec<u8>],
    at: usize,
) -> Result<(Vec<u8>, PageNo)> {
    let kind = header.kind;
    let short = || malformed(left, format!("cannot split {} cells at {at}", cells.len()));
    let key = |i: usize| {
        cells
            .get(i)
            .and_then(|c| node::cell_key(kind, c))
            .ok_or_else(short)
    };
    let (left_cells, right_cells) = match kind {
        NodeKind::Leaf => (cells.get(..at), cells.get(at..)),
        NodeKind::Internal => (cells.get(..at), cells.get(at + 1..)),
    };
    let (left_cells, right_cells) = left_cells.zip(right_cells).ok_or_else(short)?;
    let right = pages.allocate(kind.page_type())?;
    let (separator, left_link, right_link) = match kind {
        NodeKind::Leaf => {
            let separator = shortest_separator(key(at.wrapping_sub(1))?, key(at)?);
            (separator, right, header.link)
        }
        NodeKind::Internal => {
            let cell = cells.get(at).ok_or_else(short)?;
            let child = node::cell_child(cell).ok_or_else(short)?;
            (key(at)?.to_vec(), header.link, child)
        }
    };
    NodeMut::new(right, pages.write(right)?).rebuild(
        kind,
        header.level,
        right_link,
        right_cells,
    )?;
    NodeMut::new(left, pages.write(left)?).rebuild(kind, header.level, left_link, left_cells)?;
    Ok((separator, right))
}

/// The shortest prefix of `right` that is greater than `left`, given
/// `left < right`: a separator for leaves split between them.
pub(crate) fn shortest_separator(left: &[u8], right: &[u8]) -> Vec<u8> {
    let common = left.iter().zip(right).take_while(|(a, b)| a == b).count();
    right.get(..common + 1).unwrap_or(right).to_vec()
}

/// Page `page_no` parsed as a node, at the level its parent expects.
fn node_at_level(page_no: PageNo, bytes: &[u8], expected_level: Option<u16>) -> Result<Node<'_>> {
    let node = Node::parse(page_no, bytes)?;
    if let Some(expected) = expected_level
        && expected != node.level()
    {
        return Err(malformed(
            page_no,
            format!("level {} where its parent expects {expected}", node.level()),
        ));
    }
    Ok(node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree::testing::MemPages;

    fn collect(
        tree: &BTree,
        pages: &mut MemPages,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        tree.scan(pages, lower, upper, |k, _| {
            keys.push(k.to_vec());
            Ok(true)
        })
        .unwrap();
        keys
    }

    #[test]
    fn shortest_separator_lies_between() {
        for (l, r, s) in [
            (&b"abc"[..], &b"abd"[..], &b"abd"[..]),
            (b"ab", b"abzz", b"abz"),
            (b"", b"q", b"q"),
        ] {
            let sep = shortest_separator(l, r);
            assert_eq!(sep, s);
            assert!(l < sep.as_slice() && sep.as_slice() <= r, "BTREE-3");
        }
    }

    #[test]
    fn plan_split_balances_bytes_and_appends() {
        let cells: Vec<Vec<u8>> = [10, 10, 10, 40].iter().map(|&n| vec![0; n]).collect();
        assert_eq!(plan_split(NodeKind::Leaf, &cells, false), 3);
        assert_eq!(plan_split(NodeKind::Leaf, &cells, true), 3);
        let cells: Vec<Vec<u8>> = [10; 6].iter().map(|&n| vec![0; n]).collect();
        assert_eq!(plan_split(NodeKind::Leaf, &cells, false), 3);
        assert_eq!(plan_split(NodeKind::Internal, &cells, false), 2);
        assert_eq!(plan_split(NodeKind::Internal, &cells, true), 4);
    }

    #[test]
    fn ascending_inserts_fill_leaves() {
        let mut pages = MemPages::new(2048).unwrap();
        let tree = BTree::create(&mut pages).unwrap();
        for i in 0u32..2000 {
            tree.insert(&mut pages, &i.to_be_bytes(), &[7; 40]).unwrap();
        }
        let stats = tree.check(&mut pages).unwrap();
        assert_eq!(stats.entries, 2000);
        assert!(
            stats.fill() > 0.9,
            "append splits keep pages full: {stats:?}"
        );
    }

    #[test]
    fn hinted_inserts_build_the_same_pages_as_descents() {
        // BTREE-10: ascending runs (with splits up to a third level), a
        // present key, and keys below the rightmost leaf, which must descend.
        let mut keys: Vec<u32> = (1000..4000).collect();
        keys.extend([3999, 10, 500, 4000, 4001, 20, 4002]);
        keys.extend(5000..6000);
        let build = |hinted: bool| {
            let mut pages = MemPages::new(2048).unwrap();
            let tree = BTree::create(&mut pages).unwrap();
            let mut hint = AppendHint::default();
            let inserted: Vec<bool> = keys
                .iter()
                .map(|i| {
                    // A long common prefix keeps separators long: a taller tree.
                    let key = [&[b'k'; 60][..], &i.to_be_bytes()].concat();
                    let value = [(*i % 251) as u8; 30];
                    match hinted {
                        true => tree.insert_absent_hinted(&mut pages, &key, &value, &mut hint),
                        false => tree.insert_absent(&mut pages, &key, &value),
                    }
                    .unwrap()
                })
                .collect();
            let stats = tree.check(&mut pages).unwrap();
            (pages, inserted, stats)
        };
        let (plain, plain_inserted, plain_stats) = build(false);
        let (hinted, hinted_inserted, hinted_stats) = build(true);
        assert_eq!(plain_inserted, hinted_inserted);
        assert_eq!(
            plain_inserted.iter().filter(|&&b| !b).count(),
            1,
            "3999 twice"
        );
        assert!(plain_stats.height >= 3, "{plain_stats:?}");
        assert_eq!(plain.page_count(), hinted.page_count());
        for page_no in 0..plain.page_count() as PageNo {
            assert_eq!(plain.raw(page_no), hinted.raw(page_no), "page {page_no}");
        }
        assert_eq!(format!("{plain_stats:?}"), format!("{hinted_stats:?}"));
    }

    #[test]
    fn root_never_moves_and_upserts_return_old_values() {
        let mut pages = MemPages::new(2048).unwrap();
        let tree = BTree::create(&mut pages).unwrap();
        let root = tree.root();
        // A long common prefix keeps separators long, so the tree grows tall.
        let key = |i: u32| {
            [
                &[b'k'; 60][..],
                &i.wrapping_mul(2_654_435_761).to_be_bytes(),
            ]
            .concat()
        };
        let key_of = key;
        for i in 0u32..3000 {
            assert_eq!(
                tree.insert(&mut pages, &key(i), &i.to_le_bytes()).unwrap(),
                None
            );
        }
        assert_eq!(tree.root(), root, "BTREE-1");
        assert!(tree.check(&mut pages).unwrap().height >= 3);
        for i in (0u32..3000).step_by(7).chain([u32::MAX]) {
            let key = [&[b'k'; 60][..], &i.to_be_bytes()].concat();
            assert_eq!(
                tree.lookup(&mut pages, &key).unwrap(),
                tree.get(&mut pages, &key).unwrap(),
                "a lookup finds what a get finds"
            );
            if i < 3000 {
                assert_eq!(
                    tree.lookup(&mut pages, &key_of(i)).unwrap(),
                    Some(i.to_le_bytes().to_vec())
                );
            }
        }
        let key = key(5);
        assert_eq!(
            tree.insert(&mut pages, &key, b"new").unwrap(),
            Some(5u32.to_le_bytes().to_vec())
        );
        assert_eq!(
            BTree::open(root).get(&mut pages, &key).unwrap(),
            Some(b"new".to_vec())
        );
        pages.check_headers().unwrap();
    }

    #[test]
    fn scan_bounds_are_honoured() {
        let mut pages = MemPages::new(2048).unwrap();
        let tree = BTree::create(&mut pages).unwrap();
        for i in 0u8..200 {
            tree.insert(&mut pages, &[i], &[0; 50]).unwrap();
        }
        let keys = collect(
            &tree,
            &mut pages,
            Bound::Excluded(&[10]),
            Bound::Included(&[20]),
        );
        assert_eq!(keys, (11u8..=20).map(|i| vec![i]).collect::<Vec<_>>());
        let keys = collect(&tree, &mut pages, Bound::Included(&[195]), Bound::Unbounded);
        assert_eq!(keys.len(), 5);
        let mut seen = 0;
        tree.scan(&mut pages, Bound::Unbounded, Bound::Unbounded, |_, _| {
            seen += 1;
            Ok(seen < 3)
        })
        .unwrap();
        assert_eq!(seen, 3, "visit returning false stops the scan");
    }

    #[test]
    fn empty_leaves_after_deleting_everything() {
        let mut pages = MemPages::new(2048).unwrap();
        let tree = BTree::create(&mut pages).unwrap();
        for i in 0u16..1000 {
            tree.insert(&mut pages, &i.to_be_bytes(), &[1; 30]).unwrap();
        }
        for i in 0u16..1000 {
            assert!(tree.delete(&mut pages, &i.to_be_bytes()).unwrap().is_some());
        }
        assert_eq!(tree.delete(&mut pages, &7u16.to_be_bytes()).unwrap(), None);
        assert!(
            collect(&tree, &mut pages, Bound::Unbounded, Bound::Unbounded).is_empty(),
            "BTREE-8"
        );
        let stats = tree.check(&mut pages).unwrap();
        assert_eq!((stats.entries, stats.empty_leaves), (0, stats.leaf_pages));
        tree.insert(&mut pages, &500u16.to_be_bytes(), b"back")
            .unwrap();
        assert_eq!(
            collect(&tree, &mut pages, Bound::Unbounded, Bound::Unbounded),
            vec![500u16.to_be_bytes().to_vec()]
        );
    }

    #[test]
    fn too_large_names_sizes_and_limit() {
        let mut pages = MemPages::new(2048).unwrap();
        let tree = BTree::create(&mut pages).unwrap();
        let limit = max_entry_bytes(2048);
        tree.insert(&mut pages, &[1; 100], &vec![2; limit - 100])
            .unwrap();
        let err = tree
            .insert(&mut pages, &[1; 100], &vec![2; limit - 99])
            .unwrap_err();
        assert!(matches!(err, Error::TooLarge(_)), "{err}");
        let text = err.to_string();
        assert!(
            text.contains(&format!("{}", limit + 1)) && text.contains(&format!("{limit}")),
            "{text}"
        );
    }
}
