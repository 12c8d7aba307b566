//! B+trees on pages: the engine's one index structure.
//!
//! Tables are B+trees from primary key to row, secondary indexes are
//! B+trees from index key to nothing (the primary key is part of the index
//! key), and the catalog is a B+tree too. Keys and values are byte strings;
//! keys compare bytewise (memcmp), which [`crate::row`]'s key encoding makes
//! agree with the order of typed values.
//!
//! The tree is written against [`PageAccess`](crate::mtr::PageAccess): it
//! reads and writes whole pages of one space, allocates new ones, and knows
//! nothing of buffer pools or logs. Each operation is meant to run as one
//! mini-transaction, whose redo is the difference between the pages' before
//! and after images, so the tree only has to keep its page changes small and
//! within the body of the page. It holds no locks: callers serialize access
//! to a tree (the table layer keeps a latch per tree).
//!
//! Modules: [`node`] is the page layout (a slotted page per node), `tree`
//! the algorithms (descent, split, scan), [`build`] the bottom-up build of
//! a bulk load, `check` the structural verifier and [`testing`] an
//! in-memory `PageAccess` for tests.
//!
//! Design choices: the root page never moves, so the catalog records it
//! once; deletes never merge or free pages, which keeps them to one page
//! change and keeps separators valid, at the cost of underfull or empty
//! leaves after heavy deletes (space is reused by later inserts in the same
//! key range; [`BTree::check`] reports empty leaves and fill).
//!
//! Invariants (BTREE-n):
//! 1. The root page number never changes; a root split moves the root's
//!    contents to two new children and makes the root an internal node.
//! 2. Keys within a node are strictly ascending in slot order, and across
//!    the leaves in sibling-chain order.
//! 3. An internal node at level L has a leftmost child and at least one
//!    separator; all children are at level L - 1; the child after separator
//!    i holds only keys in [sep i, sep i+1), the leftmost child keys below
//!    sep 0, within the range the node's ancestors give it; separators lie
//!    strictly inside that range.
//! 4. All leaves are at level 0, so at the same depth; the sibling chain
//!    from the leftmost leaf visits every leaf once, in key order, and ends
//!    with `NO_PAGE`.
//! 5. In every node the slot array ends at or before the cell area, every
//!    cell lies inside the cell area, cells do not overlap, and live plus
//!    fragmented bytes make up the whole cell area.
//! 6. Every entry has key + value ≤ [`max_entry_bytes`], so at least
//!    [`ENTRIES_PER_PAGE_MIN`] entries fit a page and both halves of any
//!    split fit their pages.
//! 7. The tree changes pages only through `PageAccess::write` (or
//!    `PageAccess::write_in_place`, for a value of the same length), and
//!    only bytes at or after `PAGE_BODY_OFFSET`.
//! 8. Pages are never merged or freed by deletes: leaves may be underfull
//!    or empty, internal nodes never lose children; lookups and scans work
//!    across empty leaves.
//! 9. Decoding never panics and never loops: every offset and length read
//!    from a page is bounds-checked, levels step down by one on every
//!    descent, scans demand ascending keys, and the checker visits each
//!    page at most once. Corruption is `Error::Malformed { what: "btree
//!    page", .. }` naming the page.
//! 10. An [`AppendHint`] names the rightmost leaf (sibling link `NO_PAGE`)
//!     and the path to it, as a descent found them, and is used only while
//!     no split has happened since: under the caller's exclusive latch a
//!     split is the only change to internal nodes, and every insert that
//!     splits drops the hint. By 3 and 4 the rightmost leaf holds every key
//!     above its last one, so an insert of such a key goes there without a
//!     descent, to the same slot a descent would find.
//! 11. A tree links only to pages it wrote, so a page of zeros where a
//!     node should be was zeroed at rest: `Error::Damaged` naming the page,
//!     never a "malformed" node or an empty one.

pub mod build;
mod check;
pub mod node;
pub mod testing;
mod tree;

pub use build::{BuildStats, TreeBuilder};
pub use check::TreeStats;
pub use node::{ENTRIES_PER_PAGE_MIN, NO_PAGE, max_entry_bytes};
pub use tree::{AppendHint, BTree, LeafPosition};
