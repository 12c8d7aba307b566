//! # Building a tree bottom up
//!
//! A bulk load fills an empty tree from entries in ascending key order
//! without descending it. Each leaf is filled in memory until the next
//! entry does not fit (or would pass the fill target); then the next leaf
//! starts, and the separator between the two goes to the level above,
//! which fills the same way and starts a level of its own when it needs a
//! second node. Leaves and internal nodes come out full and left to right,
//! as appends at the rightmost leaf would leave them, but with no descent,
//! no page copied per entry and no redo per entry.
//!
//! The builder does no I/O. Its pages come from a *reserve* the caller
//! fills ([`TreeBuilder::add_pages`]) with exactly the pages the next push
//! takes ([`TreeBuilder::pages_for`]: 0 for most, one per node it starts),
//! so no page is taken that the tree does not use; the nodes it has
//! finished wait in [`TreeBuilder::take_finished`] until the caller writes
//! them. The tree's root never moves (BTREE-1), so the top node is built on
//! a page of its own and [`TreeBuilder::finish`] hands back its image, for
//! the caller to write into the root, and its page, with the reserve left
//! over, for the caller to free.
//!
//! Invariants (BUILD-n):
//! 1. Pushed keys are strictly ascending; a key at or below the previous
//!    one is refused and changes nothing.
//! 2. Every node but the open one at each level is finished, and a
//!    finished node is never changed again: a leaf's sibling link is set
//!    before it is finished.
//! 3. A node's page comes from the reserve and is used by one node only.
//! 4. Above the leaves, each level's first node has the level below's
//!    first node as its leftmost child, and every later child of a level
//!    enters its parent with the separator between it and its left
//!    neighbour; a full internal node hands its last child on to the next
//!    node, so every internal node keeps at least one separator. BTREE-3
//!    holds of the finished tree.

use std::collections::VecDeque;

use super::node::{
    self, NO_PAGE, Node, NodeKind, NodeMut, SLOT_BYTES, capacity_bytes, internal_cell, leaf_cell,
};
use super::tree::{check_entry_size, shortest_separator};
use crate::error::{Error, Result};
use crate::page::{self, PAGE_BODY_OFFSET, PageNo};

/// Lowest leaf fill target, percent of a page's cell area.
pub const FILL_PERCENT_MIN: u8 = 50;

/// A node under construction: its page and its image.
#[derive(Debug)]
struct OpenNode {
    page_no: PageNo,
    image: Vec<u8>,
}

impl OpenNode {
    fn new(
        page_no: PageNo,
        page_bytes: usize,
        kind: NodeKind,
        level: u16,
        link: PageNo,
    ) -> Result<OpenNode> {
        let mut image = vec![0u8; page_bytes];
        NodeMut::new(page_no, &mut image).format(kind, level, link)?;
        Ok(OpenNode { page_no, image })
    }

    /// Bytes of slots and cells in use.
    fn used_bytes(&self) -> Result<usize> {
        let free = Node::parse(self.page_no, &self.image)?
            .header()
            .free_bytes();
        Ok(capacity_bytes(self.image.len()) - free)
    }

    /// Remove the last entry of an internal node: its separator and child.
    fn pop_last(&mut self) -> Result<(Vec<u8>, PageNo)> {
        let mut node = NodeMut::new(self.page_no, &mut self.image);
        let view = node.view()?;
        let last = view
            .count()
            .checked_sub(1)
            .ok_or_else(|| node::malformed(self.page_no, "a full internal node without entries"))?;
        let separator = view.key(last)?.to_vec();
        let child = node::cell_child(view.cell(last)?)
            .ok_or_else(|| node::malformed(self.page_no, "an internal cell without its child"))?;
        node.remove(last)?;
        Ok((separator, child))
    }

    /// Append `cell` as the last entry; `false` if it does not fit.
    fn append(&mut self, cell: &[u8]) -> Result<bool> {
        let mut node = NodeMut::new(self.page_no, &mut self.image);
        let count = node.view()?.count();
        node.insert(count, cell)
    }
}

/// What [`TreeBuilder::finish`] leaves the caller to do.
#[derive(Debug, Default)]
pub struct Built {
    /// The root's new image (write its body into the root page); `None`
    /// when no entry was pushed and the tree stays as it was.
    pub root_image: Option<Vec<u8>>,
    /// Finished nodes not yet taken, to be written to their pages.
    pub finished: Vec<(PageNo, Vec<u8>)>,
    /// Pages reserved and not part of the tree (the top node's, which the
    /// root replaces, and the reserve left over): to be freed.
    pub unused: Vec<PageNo>,
    pub stats: BuildStats,
}

/// What a build made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BuildStats {
    pub entries: u64,
    /// Levels, counting the leaves (0 for an empty build).
    pub height: usize,
    /// Leaf and internal pages, the root included.
    pub leaf_pages: u64,
    pub internal_pages: u64,
}

/// A tree built from ascending entries. See the module documentation.
#[derive(Debug)]
pub struct TreeBuilder {
    page_bytes: usize,
    /// A leaf takes no entry past this many bytes of slots and cells
    /// (unless it is empty).
    leaf_fill_bytes: usize,
    /// The open node of each level, leaves first.
    levels: Vec<OpenNode>,
    reserve: VecDeque<PageNo>,
    finished: Vec<(PageNo, Vec<u8>)>,
    /// The last key pushed (the open leaf's last key).
    last_key: Vec<u8>,
    stats: BuildStats,
}

impl TreeBuilder {
    /// A builder for pages of `page_bytes`, filling leaves to
    /// `fill_percent` of their cell area (internal nodes always fill).
    pub fn new(page_bytes: usize, fill_percent: u8) -> Result<TreeBuilder> {
        page::validate_page_bytes(page_bytes)?;
        if !(FILL_PERCENT_MIN..=100).contains(&fill_percent) {
            return Err(Error::Invalid(format!(
                "leaf fill {fill_percent}% is outside {FILL_PERCENT_MIN} to 100%"
            )));
        }
        Ok(TreeBuilder {
            page_bytes,
            leaf_fill_bytes: capacity_bytes(page_bytes) * usize::from(fill_percent) / 100,
            levels: Vec::new(),
            reserve: VecDeque::new(),
            finished: Vec::new(),
            last_key: Vec::new(),
            stats: BuildStats::default(),
        })
    }

    /// Give the builder pages to build on (BUILD-3: each used once).
    pub fn add_pages(&mut self, pages: impl IntoIterator<Item = PageNo>) {
        self.reserve.extend(pages);
    }

    /// Pages the reserve lacks for pushing `key` → `value`: the nodes the
    /// push starts (a leaf, the next node of each full level above it, a
    /// new top level), less the reserve.
    pub fn pages_for(&self, key: &[u8], value: &[u8]) -> Result<usize> {
        Ok(self
            .pages_started(key, value)?
            .saturating_sub(self.reserve.len()))
    }

    fn pages_started(&self, key: &[u8], value: &[u8]) -> Result<usize> {
        if self.levels.is_empty() {
            return Ok(1);
        }
        let cell_bytes = leaf_cell(key, value)?.len();
        if self.leaf_takes(cell_bytes)? {
            return Ok(0);
        }
        // A new leaf, then up the levels while each is full: arriving at
        // `level`, the push has started `level` nodes.
        let mut separator = shortest_separator(&self.last_key, key);
        for level in 1.. {
            let Some(open) = self.levels.get(level) else {
                return Ok(level + 1);
            };
            let node = Node::parse(open.page_no, &open.image)?;
            let need = internal_cell(&separator, 0)?.len() + SLOT_BYTES;
            if need <= node.header().free_bytes() {
                return Ok(level);
            }
            separator = node.key(node.count().saturating_sub(1))?.to_vec();
        }
        unreachable!("the loop returns at the top level")
    }

    /// Nodes finished and not yet taken.
    pub fn finished_count(&self) -> usize {
        self.finished.len()
    }

    /// The finished nodes, to be written to their pages (BUILD-2: they
    /// will not change again).
    pub fn take_finished(&mut self) -> Vec<(PageNo, Vec<u8>)> {
        std::mem::take(&mut self.finished)
    }

    /// Entries pushed so far.
    pub fn entries(&self) -> u64 {
        self.stats.entries
    }

    /// Append `key` → `value`, which must sort above every key pushed
    /// before (BUILD-1). The reserve must hold [`TreeBuilder::pages_for`].
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if self.stats.entries > 0 && key <= self.last_key.as_slice() {
            return Err(Error::Invalid(format!(
                "bulk load: entry {} has a key at or below the previous entry's (keys must be strictly ascending)",
                self.stats.entries + 1
            )));
        }
        check_entry_size(self.page_bytes, key, value)?;
        assert!(
            self.pages_for(key, value)? == 0,
            "BUILD-3: the reserve is short"
        );
        let cell = leaf_cell(key, value)?;
        if self.levels.is_empty() {
            let page_no = self.take_page();
            let leaf = OpenNode::new(page_no, self.page_bytes, NodeKind::Leaf, 0, NO_PAGE)?;
            self.levels.push(leaf);
        } else if !self.leaf_takes(cell.len())? {
            self.next_leaf(key)?;
        }
        if !self.levels[0].append(&cell)? {
            return Err(node::malformed(
                self.levels[0].page_no,
                "an empty leaf refused an entry",
            ));
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.stats.entries += 1;
        Ok(())
    }

    /// Whether the open leaf takes a cell of `cell_bytes` within the fill
    /// target.
    fn leaf_takes(&self, cell_bytes: usize) -> Result<bool> {
        let after = self.levels[0].used_bytes()? + cell_bytes + SLOT_BYTES;
        Ok(after <= self.leaf_fill_bytes && after <= capacity_bytes(self.page_bytes))
    }

    /// Finish the open leaf and start the next, whose first key is `key`.
    fn next_leaf(&mut self, key: &[u8]) -> Result<()> {
        let next = self.take_page();
        let separator = shortest_separator(&self.last_key, key);
        let leaf = &mut self.levels[0];
        NodeMut::new(leaf.page_no, &mut leaf.image).set_link(next)?;
        self.add_child(1, &separator, next)?;
        let open = OpenNode::new(next, self.page_bytes, NodeKind::Leaf, 0, NO_PAGE)?;
        let done = std::mem::replace(&mut self.levels[0], open);
        self.finished.push((done.page_no, done.image));
        Ok(())
    }

    /// Enter `child`, whose keys start at `separator`, into level `level`,
    /// starting that level (BUILD-4) or its next node as needed. Called
    /// before the level below replaces its open node, which is `child`'s
    /// left neighbour.
    fn add_child(&mut self, level: usize, separator: &[u8], child: PageNo) -> Result<()> {
        let level_u16 = u16::try_from(level).unwrap_or(u16::MAX);
        if level_u16 > node::LEVEL_MAX {
            return Err(Error::TooLarge(format!(
                "a tree of more than {} levels",
                node::LEVEL_MAX
            )));
        }
        if level == self.levels.len() {
            let page_no = self.take_page();
            let leftmost = self.levels[level - 1].page_no;
            let top = OpenNode::new(
                page_no,
                self.page_bytes,
                NodeKind::Internal,
                level_u16,
                leftmost,
            )?;
            self.levels.push(top);
        }
        let cell = internal_cell(separator, child)?;
        if self.levels[level].append(&cell)? {
            return Ok(());
        }
        // Full: as an append split does (`plan_split`), the node's last
        // child moves to the level's next node as its leftmost child, with
        // `child` after it, so every internal node keeps a separator
        // (BTREE-3); the moved child's separator goes up.
        let (moved_separator, moved_child) = self.levels[level].pop_last()?;
        let next = self.take_page();
        self.add_child(level + 1, &moved_separator, next)?;
        let mut open = OpenNode::new(
            next,
            self.page_bytes,
            NodeKind::Internal,
            level_u16,
            moved_child,
        )?;
        if !open.append(&cell)? {
            return Err(node::malformed(
                next,
                "an empty internal node refused a separator",
            ));
        }
        let done = std::mem::replace(&mut self.levels[level], open);
        self.finished.push((done.page_no, done.image));
        Ok(())
    }

    fn take_page(&mut self) -> PageNo {
        self.reserve
            .pop_front()
            .expect("BUILD-3: pages_for keeps the reserve filled")
    }

    /// Close every open node: the top one's image is the root's, the rest
    /// are finished. See [`Built`].
    pub fn finish(mut self) -> Result<Built> {
        let mut unused: Vec<PageNo> = Vec::new();
        let root_image = match self.levels.pop() {
            None => None,
            Some(top) => {
                unused.push(top.page_no);
                Some(top.image)
            }
        };
        self.stats.height = self.levels.len() + usize::from(root_image.is_some());
        for open in self.levels.drain(..) {
            self.finished.push((open.page_no, open.image));
        }
        unused.extend(self.reserve.drain(..));
        Ok(Built {
            root_image,
            finished: self.finished,
            unused,
            stats: self.stats,
        })
    }

    /// Count a node written by the caller: leaf or internal, by its image.
    pub fn count_node(stats: &mut BuildStats, image: &[u8]) {
        if page::page_type(image) == Some(NodeKind::Leaf.page_type()) {
            stats.leaf_pages += 1;
        } else {
            stats.internal_pages += 1;
        }
    }
}

/// Write a built node's image into its page: the body only, since the
/// bytes before `PAGE_BODY_OFFSET` belong to the space (BTREE-7).
pub fn write_image(page: &mut [u8], image: &[u8]) {
    page[PAGE_BODY_OFFSET..].copy_from_slice(&image[PAGE_BODY_OFFSET..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree::BTree;
    use crate::btree::testing::MemPages;
    use crate::mtr::PageAccess;
    use crate::page::PageType;
    use std::ops::Bound::Unbounded;

    /// Build a tree in `pages` from `entries` the way a bulk load does;
    /// returns it and what the build made.
    fn build(
        pages: &mut MemPages,
        entries: &[(Vec<u8>, Vec<u8>)],
        fill: u8,
    ) -> (BTree, BuildStats) {
        let tree = BTree::create(pages).unwrap();
        let mut b = TreeBuilder::new(pages.page_bytes(), fill).unwrap();
        let mut stats = BuildStats::default();
        let write = |pages: &mut MemPages, done: Vec<(PageNo, Vec<u8>)>, stats: &mut BuildStats| {
            for (page_no, image) in done {
                TreeBuilder::count_node(stats, &image);
                write_image(pages.write(page_no).unwrap(), &image);
            }
        };
        for (k, v) in entries {
            let wanted = b.pages_for(k, v).unwrap();
            b.add_pages((0..wanted).map(|_| pages.allocate(PageType::BTreeLeaf).unwrap()));
            b.push(k, v).unwrap();
            let done = b.take_finished();
            write(pages, done, &mut stats);
        }
        let built = b.finish().unwrap();
        write(pages, built.finished, &mut stats);
        if let Some(image) = &built.root_image {
            TreeBuilder::count_node(&mut stats, image);
            write_image(pages.write(tree.root()).unwrap(), image);
        }
        for page_no in built.unused {
            pages.free(page_no).unwrap();
        }
        stats.entries = built.stats.entries;
        stats.height = built.stats.height;
        (tree, stats)
    }

    fn entries(n: u32, value_bytes: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..n)
            .map(|i| {
                (
                    format!("key{i:08}").into_bytes(),
                    vec![(i % 251) as u8; value_bytes],
                )
            })
            .collect()
    }

    fn scan(tree: &BTree, pages: &mut MemPages) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        tree.scan(pages, Unbounded, Unbounded, |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            Ok(true)
        })
        .unwrap();
        out
    }

    #[test]
    fn a_built_tree_passes_the_checker_and_holds_every_entry_in_order() {
        for (n, value_bytes, fill) in [
            (0, 10, 100),
            (1, 10, 100),
            (30, 10, 100),
            (5_000, 40, 100),
            (20_000, 3, 90),
            (3_000, 400, 70),
            (100_000, 0, 100),
        ] {
            let mut pages = MemPages::new(2048).unwrap();
            let want = entries(n, value_bytes);
            let (tree, stats) = build(&mut pages, &want, fill);
            let checked = tree.check(&mut pages).unwrap();
            assert_eq!(checked.entries, u64::from(n), "n={n}");
            assert_eq!(checked.height, stats.height.max(1), "n={n}");
            if n > 0 {
                assert_eq!(checked.leaf_pages, stats.leaf_pages, "n={n}");
                assert_eq!(checked.internal_pages, stats.internal_pages, "n={n}");
            }
            assert_eq!(scan(&tree, &mut pages), want, "n={n}");
            for (k, v) in want.iter().step_by(97) {
                assert_eq!(
                    tree.get(&mut pages, k).unwrap().as_deref(),
                    Some(v.as_slice())
                );
            }
            pages.check_headers().unwrap();
            // Every page is the header, in the tree, or free again (BUILD-3).
            let in_tree = checked.leaf_pages + checked.internal_pages;
            assert_eq!(
                pages.page_count() as u64,
                1 + in_tree + pages.free_count() as u64,
                "n={n}"
            );
        }
    }

    #[test]
    fn a_built_tree_takes_inserts_and_deletes_afterwards() {
        let mut pages = MemPages::new(2048).unwrap();
        let want = entries(4_000, 30);
        let (tree, _) = build(&mut pages, &want, 100);
        for i in (0..4_000).step_by(7) {
            let k = format!("key{i:08}x").into_bytes();
            tree.insert(&mut pages, &k, b"between").unwrap();
        }
        for (k, _) in want.iter().step_by(3) {
            tree.delete(&mut pages, k).unwrap();
        }
        let checked = tree.check(&mut pages).unwrap();
        assert_eq!(
            checked.entries,
            4_000 - 4_000u64.div_ceil(3) + 4_000u64.div_ceil(7)
        );
    }

    #[test]
    fn full_leaves_match_what_appends_leave() {
        let want = entries(3_000, 25);
        let mut built_pages = MemPages::new(4096).unwrap();
        let (_, built) = build(&mut built_pages, &want, 100);
        let mut appended = MemPages::new(4096).unwrap();
        let tree = BTree::create(&mut appended).unwrap();
        for (k, v) in &want {
            tree.insert(&mut appended, k, v).unwrap();
        }
        let by_append = tree.check(&mut appended).unwrap();
        assert_eq!(built.leaf_pages, by_append.leaf_pages);
        assert_eq!(built.height, by_append.height);
    }

    #[test]
    fn keys_out_of_order_or_repeated_are_refused() {
        let mut pages = MemPages::new(2048).unwrap();
        let mut b = TreeBuilder::new(2048, 100).unwrap();
        let mut push = |b: &mut TreeBuilder, k: &[u8], v: &[u8]| {
            let wanted = b.pages_for(k, v)?;
            b.add_pages((0..wanted).map(|_| pages.allocate(PageType::BTreeLeaf).unwrap()));
            b.push(k, v)
        };
        push(&mut b, b"b", b"1").unwrap();
        let repeated = push(&mut b, b"b", b"2").unwrap_err().to_string();
        assert!(
            repeated.contains("entry 2") && repeated.contains("strictly ascending"),
            "{repeated}"
        );
        assert!(push(&mut b, b"a", b"3").is_err());
        push(&mut b, b"c", b"4").unwrap();
        assert_eq!(b.entries(), 2);
        let limit = crate::btree::max_entry_bytes(2048);
        let too_large = push(&mut b, b"d", &vec![0; limit]).unwrap_err();
        assert!(matches!(too_large, Error::TooLarge(_)), "{too_large}");
        assert!(TreeBuilder::new(2048, 49).is_err());
        assert!(TreeBuilder::new(2048, 101).is_err());
    }
}
