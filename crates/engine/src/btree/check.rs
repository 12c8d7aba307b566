//! Whole-tree walks: the structural check with its statistics, and destroy.
//!
//! [`BTree::check`] verifies every invariant that can be seen on the pages
//! (BTREE-2 to BTREE-5) by a depth-first walk that carries each node's key
//! range down from its ancestors, then follows the sibling chain and
//! compares it with the leaves the walk found. It is what the tests run
//! after every batch of changes and what a consistency tool would run on a
//! recovered database. A page reached twice (a cycle or shared child) is an
//! error, so a corrupt tree is checked in time linear in its pages.
//!
//! The statistics (height, pages by kind, entries, bytes, fill) come for
//! free from the same walk.

use std::collections::HashSet;

use super::node::{NO_PAGE, Node, NodeKind, SLOT_BYTES, capacity_bytes, malformed};
use super::tree::BTree;
use crate::error::Result;
use crate::mtr::PageAccess;
use crate::page::PageNo;

/// What [`BTree::check`] found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TreeStats {
    /// Levels, counting the leaves: 1 for a tree that is a single leaf.
    pub height: usize,
    pub leaf_pages: u64,
    pub internal_pages: u64,
    /// Leaves without entries (deletes never merge pages, BTREE-8).
    pub empty_leaves: u64,
    /// Key/value entries in the leaves.
    pub entries: u64,
    /// Bytes of the leaves' keys and values.
    pub key_bytes: u64,
    pub value_bytes: u64,
    /// Bytes of live cells and slots, over all nodes.
    pub used_bytes: u64,
    /// Bytes available to cells and slots, over all nodes.
    pub capacity_bytes: u64,
}

impl TreeStats {
    /// All pages of the tree.
    pub fn pages(&self) -> u64 {
        self.leaf_pages + self.internal_pages
    }

    /// Used fraction of the nodes' capacity, 0 to 1.
    pub fn fill(&self) -> f64 {
        if self.capacity_bytes == 0 {
            return 0.0;
        }
        self.used_bytes as f64 / self.capacity_bytes as f64
    }
}

impl BTree {
    /// Verify the tree's structure and return its statistics. Any violation
    /// is `Error::Malformed` naming the page; never a panic (BTREE-9).
    pub fn check<P: PageAccess + ?Sized>(&self, pages: &mut P) -> Result<TreeStats> {
        self.check_pages(pages).map(|(stats, _)| stats)
    }

    /// [`BTree::check`], and the pages of the tree (root included).
    pub fn check_pages<P: PageAccess + ?Sized>(
        &self,
        pages: &mut P,
    ) -> Result<(TreeStats, HashSet<PageNo>)> {
        let root_level = Node::parse(self.root(), pages.read(self.root())?)?.level();
        let mut checker = Checker::default();
        checker.stats.height = usize::from(root_level) + 1;
        checker.node(pages, self.root(), root_level, None, None)?;
        checker.sibling_chain(pages)?;
        Ok((checker.stats, checker.visited))
    }

    /// Free every page of the tree, the root included; returns how many.
    /// The tree must not be used afterwards.
    pub fn destroy<P: PageAccess + ?Sized>(self, pages: &mut P) -> Result<u64> {
        let mut all = Vec::new();
        let mut visited = HashSet::new();
        let mut stack = vec![(self.root(), None)];
        while let Some((page_no, expected_level)) = stack.pop() {
            if !visited.insert(page_no) {
                return Err(malformed(page_no, "reached twice from the root"));
            }
            let node = Node::parse(page_no, pages.read(page_no)?)?;
            if expected_level.is_some_and(|level| level != node.level()) {
                return Err(malformed(
                    page_no,
                    format!("level {} is not one below its parent", node.level()),
                ));
            }
            if node.kind() == NodeKind::Internal {
                for c in 0..=node.count() {
                    stack.push((node.child_at(c)?, Some(node.level() - 1)));
                }
            }
            all.push(page_no);
        }
        for &page_no in &all {
            pages.free(page_no)?;
        }
        Ok(all.len() as u64)
    }
}

/// State of one check walk.
#[derive(Default)]
struct Checker {
    stats: TreeStats,
    visited: HashSet<PageNo>,
    /// Leaves in key order, as the walk met them.
    leaves: Vec<PageNo>,
    /// The largest key seen so far, across leaves.
    last_key: Option<Vec<u8>>,
}

impl Checker {
    /// Check the subtree at `page_no`, whose keys must lie in
    /// `[low, high)` (BTREE-3).
    fn node<P: PageAccess + ?Sized>(
        &mut self,
        pages: &mut P,
        page_no: PageNo,
        level: u16,
        low: Option<&[u8]>,
        high: Option<&[u8]>,
    ) -> Result<()> {
        if !self.visited.insert(page_no) {
            return Err(malformed(page_no, "reached twice from the root"));
        }
        let node = Node::parse(page_no, pages.read(page_no)?)?;
        if node.level() != level {
            return Err(malformed(
                page_no,
                format!("level {} where its parent expects {level}", node.level()),
            ));
        }
        let live_bytes = node.validate_layout()?;
        self.stats.used_bytes += (live_bytes + node.count() * SLOT_BYTES) as u64;
        self.stats.capacity_bytes += capacity_bytes(node.page_bytes()) as u64;
        if node.kind() == NodeKind::Leaf {
            return self.leaf(page_no, &node, low, high);
        }
        self.stats.internal_pages += 1;
        if node.count() == 0 {
            return Err(malformed(page_no, "internal node without separators"));
        }
        let mut separators: Vec<Vec<u8>> = Vec::with_capacity(node.count());
        for i in 0..node.count() {
            let key = node.key(i)?;
            let ascending = separators.last().is_none_or(|prev| prev.as_slice() < key);
            let inside = low.is_none_or(|low| low < key) && high.is_none_or(|high| key < high);
            if !ascending || !inside {
                return Err(malformed(
                    page_no,
                    format!("separator {i} out of order or outside its bounds"),
                ));
            }
            separators.push(key.to_vec());
        }
        let children = (0..=node.count())
            .map(|c| node.child_at(c))
            .collect::<Result<Vec<_>>>()?;
        for (c, &child) in children.iter().enumerate() {
            let child_low = if c == 0 {
                low
            } else {
                separators.get(c - 1).map(Vec::as_slice)
            };
            let child_high = separators.get(c).map(Vec::as_slice).or(high);
            self.node(pages, child, level - 1, child_low, child_high)?;
        }
        Ok(())
    }

    /// Check a leaf's keys against its bounds and the previous leaves.
    fn leaf(
        &mut self,
        page_no: PageNo,
        node: &Node,
        low: Option<&[u8]>,
        high: Option<&[u8]>,
    ) -> Result<()> {
        self.stats.leaf_pages += 1;
        if node.count() == 0 {
            self.stats.empty_leaves += 1;
        }
        let mut prev: Option<&[u8]> = self.last_key.as_deref();
        for i in 0..node.count() {
            let key = node.key(i)?;
            let value = node.value(i)?;
            if prev.is_some_and(|prev| prev >= key) {
                return Err(malformed(
                    page_no,
                    format!("key {i} does not ascend (BTREE-2)"),
                ));
            }
            if low.is_some_and(|low| key < low) || high.is_some_and(|high| key >= high) {
                return Err(malformed(
                    page_no,
                    format!("key {i} outside the range its parents give (BTREE-3)"),
                ));
            }
            self.stats.entries += 1;
            self.stats.key_bytes += key.len() as u64;
            self.stats.value_bytes += value.len() as u64;
            prev = Some(key);
        }
        let last_key = prev.map(<[u8]>::to_vec);
        self.last_key = last_key;
        self.leaves.push(page_no);
        Ok(())
    }

    /// The sibling chain from the leftmost leaf visits exactly the leaves
    /// the walk found, in the same order, and ends with `NO_PAGE` (BTREE-4).
    fn sibling_chain<P: PageAccess + ?Sized>(&self, pages: &mut P) -> Result<()> {
        let mut next = self.leaves.first().copied().unwrap_or(NO_PAGE);
        let mut previous = next;
        for &expected in &self.leaves {
            if next != expected {
                return Err(malformed(
                    previous,
                    format!(
                        "sibling link leads to {next} but leaf {expected} comes next in key order"
                    ),
                ));
            }
            previous = next;
            next = Node::parse(next, pages.read(next)?)?.link();
        }
        if next != NO_PAGE {
            return Err(malformed(
                previous,
                format!("the last leaf links to {next}"),
            ));
        }
        Ok(())
    }
}
