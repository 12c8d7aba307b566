//! Page-mapping FTL with greedy or cost-benefit garbage collection.
//!
//! Every logical page may live in any physical page, so an overwrite is one
//! program to wherever the plane's write pointer stands, and the old copy
//! just becomes invalid. The price is paid later: when a plane runs short of
//! erased blocks, garbage collection (GC) picks a victim block, copies its
//! still-valid pages elsewhere in the plane and erases it. How many pages it
//! copies per page the host wrote is the write amplification (WAF), and it
//! depends on the victim policy and on how much of the flash is hidden from
//! the host (over-provisioning).
//!
//! Placement. Host pages are striped round-robin over planes in
//! channel-first order (channel, then chip, then die, then plane), so a
//! sequential write keeps every channel and die busy. The stripe unit is
//! one page unless [`PageFtl::with_stripe_pages`] sets more: then the pages
//! of one aligned unit of logical pages, written in order, go to the same
//! plane, and the next plane is taken at each unit boundary or whenever a
//! page does not continue the one written before it. Each plane has one
//! *host* active block and one *GC* active block, so data the host rewrites
//! often and data GC found still valid (usually cold) do not share blocks.
//! GC stays inside one plane, so a copy never leaves its die and is emitted
//! as a [`FlashOp::CopyBack`].
//!
//! Victims. *Greedy* takes the block with the fewest valid pages, and of
//! those the one whose valid count changed last. Every sealed (full) block
//! carries a victim key, its valid count above a sequence number of the
//! key's last change (8 bytes a block, so the keys stay in the host's
//! cache), and each group of [`KEY_GROUP_BLOCKS`] blocks of a plane keeps
//! its least key. A key only falls while its block is sealed (a page
//! invalidated lowers the valid count), so rewriting one is O(1) with no
//! other block touched; a pick scans the plane's group minima and then one
//! group, and a victim's group is rescanned when it leaves:
//! O(blocks_per_plane / KEY_GROUP_BLOCKS + KEY_GROUP_BLOCKS) per GC run.
//! *Cost-benefit*
//! (Rosenblum and Ousterhout's LFS cleaner) takes the block with the highest
//! `(1 - u) / (2u) * age`, where `u` is the block's valid fraction and `age`
//! the number of host page writes since the block was last modified; it
//! scans every block of the plane, O(blocks_per_plane) per pick, which is
//! acceptable for a policy study but is why greedy is the default.
//!
//! Memory grows with the mapped space, not with the device: the
//! logical-to-physical table is allocated in chunks of
//! [`L2P_CHUNK_PAGES`] entries on the first write into the chunk, and a
//! block's reverse map (physical page to logical page, needed by GC to
//! know whom a valid page belongs to) is a slot taken when the block is
//! opened and freed when it is erased, so there are never more slots than
//! there were open or full blocks at once; slots are allocated in chunks
//! of [`REVERSE_MAP_CHUNK_SLOTS`] that never move. Per-block counters
//! (valid pages, write pointer, erase count, victim key) are a few dozen
//! bytes per erase block, which is small next to the block itself.
//!
//! Invariants, besides FTL-1..3 of [`super`]:
//! 1. (PAGE-1) Between host writes every plane has at least
//!    [`GC_RESERVE_BLOCKS`] free blocks, so GC always has a destination
//!    for the at most `pages_per_block - 1` pages a victim holds.
//! 2. (PAGE-2) A block's valid count equals the number of mapped entries
//!    in its reverse map; a block has a victim key exactly when it is
//!    sealed, the key holds its valid count, and each key group's minimum
//!    is the least key of its blocks.
//! 3. (PAGE-3) The host capacity leaves [`RESERVED_BLOCKS_PER_PLANE`]
//!    blocks per plane unmapped, so some plane always has either a free
//!    block beyond the reserve or a sealed block with an invalid page: a
//!    write always finds a page (proof: a plane that can take no page has
//!    at most `(GC_RESERVE_BLOCKS + 1) * pages_per_block` non-valid pages,
//!    in its reserve and its GC block, fewer than its share of the
//!    reserved space).

use std::collections::VecDeque;

use super::{FlashOp, Ftl, FtlStats};
use crate::error::DeviceError;
use crate::ssd::geometry::Geometry;

/// Free blocks per plane that only GC may take (PAGE-1).
pub const GC_RESERVE_BLOCKS: u32 = 1;
/// GC runs in a plane while it has fewer free blocks than this, checked
/// whenever the plane's host block fills.
pub const GC_TRIGGER_FREE_BLOCKS: u32 = GC_RESERVE_BLOCKS + 1;
/// Active (open) blocks per plane: one for host data, one for GC copies.
pub const ACTIVE_BLOCKS_PER_PLANE: u32 = 2;
/// Blocks per plane kept out of the host's capacity (PAGE-3).
pub const RESERVED_BLOCKS_PER_PLANE: u32 = GC_RESERVE_BLOCKS + ACTIVE_BLOCKS_PER_PLANE;
/// The fewest blocks per plane this FTL accepts.
pub const BLOCKS_PER_PLANE_MIN: u32 = RESERVED_BLOCKS_PER_PLANE + 2;
/// Entries per lazily allocated chunk of the logical-to-physical table
/// (16 KiB of `u32`s).
pub const L2P_CHUNK_PAGES: u64 = 1 << L2P_CHUNK_SHIFT;
const L2P_CHUNK_SHIFT: u32 = 12;
/// Marks an unmapped entry in either map.
const NONE: u32 = u32::MAX;
/// The victim key of a block that is not sealed (no GC candidate).
const NO_KEY: u64 = u64::MAX;
/// Bits of a victim key below its valid count: the sequence number.
const KEY_SEQ_BITS: u32 = 48;
/// The most pages per block: a victim key's valid count has 16 bits, and
/// `NO_KEY`'s count must lie above every real one.
pub const PAGES_PER_BLOCK_MAX: u32 = (1 << (64 - KEY_SEQ_BITS)) - 2;
/// Blocks of a plane whose least victim key is kept as one.
pub const KEY_GROUP_BLOCKS: u32 = 64;
/// Victim keys a device may assign in its life (about 2.8e14, years of
/// simulated writes); a greedy pick stays exact below it.
pub const KEY_SEQ_MAX: u64 = (1 << KEY_SEQ_BITS) - 1;

/// How GC chooses its victim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcPolicy {
    /// Fewest valid pages, O(pages_per_block) per pick.
    Greedy,
    /// Highest `(1 - u) / (2u) * age`, O(blocks_per_plane) per pick.
    CostBenefit,
}

/// Life cycle of an erase block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BlockState {
    /// Erased, in its plane's free queue.
    Free,
    /// Being filled (a host or GC active block).
    Open,
    /// Full, with a victim key; a GC candidate.
    Sealed,
}

/// Which active block of a plane a page goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stream {
    Host,
    Gc,
}

/// What the FTL keeps per erase block, packed so that invalidating a page
/// touches one cache line of its block.
#[derive(Clone, Copy, Debug)]
struct BlockMeta {
    /// Host page writes when a page of the block was last programmed or
    /// invalidated (cost-benefit's age).
    modified_at: u64,
    valid: u32,
    write_ptr: u32,
    /// Slot of the block's reverse map in `PageFtl::p2l`, or `NONE`.
    map: u32,
    state: BlockState,
}

impl BlockMeta {
    const ERASED: BlockMeta = BlockMeta {
        modified_at: 0,
        valid: 0,
        write_ptr: 0,
        map: NONE,
        state: BlockState::Free,
    };
}

/// The page-mapping FTL. See the module documentation.
pub struct PageFtl {
    policy: GcPolicy,
    pages_per_block: u32,
    blocks_per_plane: u32,
    logical_pages: u64,
    /// Logical-to-physical map in lazily allocated chunks.
    l2p: Vec<Option<Box<[u32]>>>,
    /// Per block (global block number): everything a host write touches
    /// of a block, in one cache line's worth.
    blocks: Vec<BlockMeta>,
    erase_counts: Vec<u32>,
    /// Reverse maps; a block's slot is `BlockMeta::map`.
    p2l: ReverseMaps,
    // Per plane.
    free: Vec<VecDeque<u32>>,
    host_active: Vec<u32>,
    gc_active: Vec<u32>,
    /// Per block: `valid << KEY_SEQ_BITS | (KEY_SEQ_MAX - seq)` while
    /// sealed, `NO_KEY` otherwise; greedy's victim has the least key of
    /// its plane (fewest valid pages, then the latest change).
    victim_keys: Vec<u64>,
    /// The least victim key of each group: `groups_per_plane` per plane.
    group_min: Vec<u64>,
    groups_per_plane: u32,
    /// Victim keys assigned so far.
    key_seq: u64,
    /// Planes in channel-first striping order.
    stripe: Vec<u32>,
    cursor: usize,
    /// Logical pages per stripe unit (1 = page by page).
    stripe_pages: u64,
    /// The logical page written last, to tell if the next continues it.
    last_lpn: u64,
    /// Host page writes so far: the clock cost-benefit measures age with.
    clock: u64,
    stats: FtlStats,
}

impl PageFtl {
    /// A page-mapping FTL over `geometry`, everything erased.
    ///
    /// The host capacity is the geometry's, capped so that
    /// [`RESERVED_BLOCKS_PER_PLANE`] blocks per plane stay outside it
    /// (PAGE-3).
    pub fn new(geometry: &Geometry, policy: GcPolicy) -> Result<PageFtl, DeviceError> {
        geometry.validate("page-mapping FTL")?;
        if geometry.blocks_per_plane < BLOCKS_PER_PLANE_MIN {
            return Err(DeviceError::Geometry {
                device: "page-mapping FTL".to_string(),
                problem: format!(
                    "{} blocks per plane; page mapping needs at least {BLOCKS_PER_PLANE_MIN}",
                    geometry.blocks_per_plane
                ),
            });
        }
        if geometry.pages_per_block > PAGES_PER_BLOCK_MAX {
            return Err(DeviceError::Geometry {
                device: "page-mapping FTL".to_string(),
                problem: format!(
                    "{} pages per block; page mapping takes at most {PAGES_PER_BLOCK_MAX}",
                    geometry.pages_per_block
                ),
            });
        }
        let planes = geometry.planes();
        let blocks = geometry.blocks() as usize;
        let groups_per_plane = geometry.blocks_per_plane.div_ceil(KEY_GROUP_BLOCKS);
        let ppb = geometry.pages_per_block;
        let reserved_pages =
            u64::from(planes) * u64::from(RESERVED_BLOCKS_PER_PLANE) * u64::from(ppb);
        let logical_pages = geometry
            .logical_pages()
            .min(geometry.pages() - reserved_pages);
        let free = (0..planes)
            .map(|plane| {
                let first = plane * geometry.blocks_per_plane;
                (first..first + geometry.blocks_per_plane).collect()
            })
            .collect();
        Ok(PageFtl {
            policy,
            pages_per_block: ppb,
            blocks_per_plane: geometry.blocks_per_plane,
            logical_pages,
            l2p: vec![None; logical_pages.div_ceil(L2P_CHUNK_PAGES) as usize],
            blocks: vec![BlockMeta::ERASED; blocks],
            erase_counts: vec![0; blocks],
            p2l: ReverseMaps::new(ppb),
            free,
            host_active: vec![NONE; planes as usize],
            gc_active: vec![NONE; planes as usize],
            victim_keys: vec![NO_KEY; blocks],
            group_min: vec![NO_KEY; (planes * groups_per_plane) as usize],
            groups_per_plane,
            key_seq: 0,
            stripe: stripe_order(geometry),
            cursor: 0,
            stripe_pages: 1,
            last_lpn: u64::MAX,
            clock: 0,
            stats: FtlStats::default(),
        })
    }

    /// Stripe in units of `pages` logical pages (at least 1): the pages of
    /// one aligned unit, written in order, share a plane.
    pub fn with_stripe_pages(mut self, pages: u32) -> PageFtl {
        self.stripe_pages = u64::from(pages.max(1));
        self
    }

    /// The victim policy.
    pub fn policy(&self) -> GcPolicy {
        self.policy
    }

    /// Free blocks in a plane.
    pub fn free_blocks(&self, plane: u32) -> usize {
        self.free.get(plane as usize).map_or(0, VecDeque::len)
    }

    /// Check FTL-1, FTL-2, PAGE-1 and PAGE-2 over the whole device, in
    /// O(mapped pages + blocks). For tests; answers the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        let ppb = u64::from(self.pages_per_block);
        let mut mapped_lpns = 0u64;
        for lpn in 0..self.logical_pages {
            let Some(ppn) = self.lookup(lpn) else {
                continue;
            };
            mapped_lpns += 1;
            let block = (ppn / ppb) as usize;
            let page = (ppn % ppb) as usize;
            if page as u32 >= self.blocks[block].write_ptr {
                return Err(format!("FTL-1: lpn {lpn} maps to unprogrammed ppn {ppn}"));
            }
            let back = self.reverse_map(block).map(|m| m[page]);
            if back != Some(lpn as u32) {
                return Err(format!("FTL-2: ppn {ppn} maps back to {back:?}, not {lpn}"));
            }
        }
        let mut valid_pages = 0u64;
        for block in 0..self.blocks.len() {
            let live = self
                .reverse_map(block)
                .map_or(0, |m| m.iter().filter(|&&l| l != NONE).count());
            if live as u32 != self.blocks[block].valid {
                return Err(format!("PAGE-2: block {block} valid count is off"));
            }
            valid_pages += live as u64;
        }
        if valid_pages != mapped_lpns {
            return Err(format!(
                "FTL-2: {valid_pages} valid pages for {mapped_lpns} mapped lpns"
            ));
        }
        self.check_keys()?;
        match self
            .free
            .iter()
            .position(|f| f.len() < GC_RESERVE_BLOCKS as usize)
        {
            Some(plane) => Err(format!("PAGE-1: plane {plane} below the GC reserve")),
            None => Ok(()),
        }
    }

    fn check_keys(&self) -> Result<(), String> {
        for (block, (meta, &key)) in self.blocks.iter().zip(&self.victim_keys).enumerate() {
            let sealed = meta.state == BlockState::Sealed;
            if sealed != (key != NO_KEY) {
                return Err(format!("PAGE-2: block {block} has a victim key iff sealed"));
            }
            if sealed && key >> KEY_SEQ_BITS != u64::from(meta.valid) {
                return Err(format!("PAGE-2: block {block}'s victim key is off"));
            }
        }
        for (group, &least) in self.group_min.iter().enumerate() {
            let range = self.group_blocks(group);
            if self.victim_keys[range]
                .iter()
                .copied()
                .fold(NO_KEY, u64::min)
                != least
            {
                return Err(format!("PAGE-2: key group {group}'s minimum is off"));
            }
        }
        Ok(())
    }

    /// A block's reverse map (physical page to logical page), if it has one.
    fn reverse_map(&self, block: usize) -> Option<&[u32]> {
        let slot = self.blocks[block].map;
        (slot != NONE).then(|| self.p2l.slot(slot))
    }

    /// Where `page` of `block`'s reverse map lies, if it has one.
    fn reverse_index(&self, block: usize, page: u32) -> Option<(u32, u32)> {
        let slot = self.blocks[block].map;
        (slot != NONE).then_some((slot, page))
    }

    fn plane_of(&self, block: u32) -> u32 {
        block / self.blocks_per_plane
    }

    fn l2p_get(&self, lpn: u64) -> u32 {
        let chunk = (lpn >> L2P_CHUNK_SHIFT) as usize;
        match self.l2p.get(chunk) {
            Some(Some(entries)) => entries[(lpn & (L2P_CHUNK_PAGES - 1)) as usize],
            _ => NONE,
        }
    }

    fn l2p_set(&mut self, lpn: u64, ppn: u32) {
        let chunk = (lpn >> L2P_CHUNK_SHIFT) as usize;
        let entries = self.l2p[chunk]
            .get_or_insert_with(|| vec![NONE; L2P_CHUNK_PAGES as usize].into_boxed_slice());
        entries[(lpn & (L2P_CHUNK_PAGES - 1)) as usize] = ppn;
    }

    /// Mark a physical page invalid (its logical page moved or was trimmed).
    fn invalidate(&mut self, ppn: u32, lpn: u64) {
        let block = ppn / self.pages_per_block;
        let b = block as usize;
        if let Some(i) = self.reverse_index(b, ppn % self.pages_per_block) {
            debug_assert_eq!(self.p2l.get(i), lpn as u32, "FTL-2: reverse map disagrees");
            self.p2l.set(i, NONE);
        }
        debug_assert!(self.blocks[b].valid > 0, "PAGE-2: valid count underflow");
        self.blocks[b].valid -= 1;
        self.blocks[b].modified_at = self.clock;
        if self.blocks[b].state == BlockState::Sealed {
            self.set_victim_key(b);
        }
    }

    /// Give a sealed block a fresh victim key for its valid count.
    fn set_victim_key(&mut self, block: usize) {
        debug_assert!(self.key_seq < KEY_SEQ_MAX, "PAGE-2: victim keys exhausted");
        self.key_seq = (self.key_seq + 1).min(KEY_SEQ_MAX);
        let valid = u64::from(self.blocks[block].valid);
        let key = valid << KEY_SEQ_BITS | (KEY_SEQ_MAX - self.key_seq);
        debug_assert!(key < self.victim_keys[block], "PAGE-2: a victim key rose");
        self.victim_keys[block] = key;
        let group = self.key_group(block as u32);
        self.group_min[group] = self.group_min[group].min(key);
    }

    /// Take a block's victim key away (it leaves the sealed state) and
    /// find its group's least key again.
    fn clear_victim_key(&mut self, block: u32) {
        self.victim_keys[block as usize] = NO_KEY;
        let group = self.key_group(block);
        let range = self.group_blocks(group);
        self.group_min[group] = self.victim_keys[range]
            .iter()
            .copied()
            .fold(NO_KEY, u64::min);
    }

    /// The key group `block` belongs to.
    fn key_group(&self, block: u32) -> usize {
        let plane = self.plane_of(block);
        let in_plane = block - plane * self.blocks_per_plane;
        (plane * self.groups_per_plane + in_plane / KEY_GROUP_BLOCKS) as usize
    }

    /// The blocks of key group `group`.
    fn group_blocks(&self, group: usize) -> std::ops::Range<usize> {
        let plane = group as u32 / self.groups_per_plane;
        let plane_first = plane * self.blocks_per_plane;
        let first = plane_first + (group as u32 % self.groups_per_plane) * KEY_GROUP_BLOCKS;
        let end = (first + KEY_GROUP_BLOCKS).min(plane_first + self.blocks_per_plane);
        first as usize..end as usize
    }

    /// Take a free block of `plane` and make it writable.
    fn open_block(&mut self, plane: u32) -> Option<u32> {
        let block = self.free[plane as usize].pop_front()?;
        let b = block as usize;
        debug_assert_eq!(self.blocks[b].state, BlockState::Free);
        debug_assert_eq!(
            self.blocks[b].write_ptr, 0,
            "FTL-1: opening an unerased block"
        );
        let slot = self.p2l.take_slot();
        self.blocks[b].map = slot;
        self.blocks[b].state = BlockState::Open;
        Some(block)
    }

    /// Program `lpn` into the plane's active block of `stream`; `None` if
    /// the plane has no page left for that stream.
    fn append(&mut self, plane: u32, stream: Stream, lpn: u64) -> Option<u32> {
        let p = plane as usize;
        let active = match stream {
            Stream::Host => self.host_active[p],
            Stream::Gc => self.gc_active[p],
        };
        let block = if active != NONE {
            active
        } else {
            let reserve = match stream {
                Stream::Host => GC_RESERVE_BLOCKS as usize,
                Stream::Gc => 0,
            };
            if self.free[p].len() <= reserve {
                return None;
            }
            self.open_block(plane)?
        };
        let b = block as usize;
        let page = self.blocks[b].write_ptr;
        debug_assert!(
            page < self.pages_per_block,
            "FTL-1: programming a full block"
        );
        if let Some(i) = self.reverse_index(b, page) {
            self.p2l.set(i, lpn as u32);
        }
        let meta = &mut self.blocks[b];
        meta.write_ptr = page + 1;
        meta.valid += 1;
        meta.modified_at = self.clock;
        let full = page + 1 == self.pages_per_block;
        let slot = if full { NONE } else { block };
        match stream {
            Stream::Host => self.host_active[p] = slot,
            Stream::Gc => self.gc_active[p] = slot,
        }
        if full {
            self.blocks[b].state = BlockState::Sealed;
            self.set_victim_key(b);
        }
        self.stats.flash_pages_written += 1;
        Some(block * self.pages_per_block + page)
    }

    /// The host page to write next: a plane in striping order that has, or
    /// after GC gets, room for it. GC ops go onto `ops`.
    fn host_page(&mut self, lpn: u64, ops: &mut Vec<FlashOp>) -> Option<u32> {
        let same_unit = self.stripe_pages > 1
            && !lpn.is_multiple_of(self.stripe_pages)
            && self.last_lpn.wrapping_add(1) == lpn;
        self.last_lpn = lpn;
        if same_unit {
            // Stay on the plane the unit started on (the one before the cursor).
            let len = self.stripe.len();
            self.cursor = (self.cursor + len - 1) % len;
        }
        for _ in 0..self.stripe.len() {
            let plane = self.stripe[self.cursor];
            self.cursor = (self.cursor + 1) % self.stripe.len();
            if self.host_active[plane as usize] == NONE {
                self.collect(plane, ops);
            }
            if let Some(ppn) = self.append(plane, Stream::Host, lpn) {
                return Some(ppn);
            }
        }
        None
    }

    /// Run GC in `plane` while it is short of free blocks and a victim
    /// with an invalid page exists.
    fn collect(&mut self, plane: u32, ops: &mut Vec<FlashOp>) {
        while self.free[plane as usize].len() < GC_TRIGGER_FREE_BLOCKS as usize {
            let Some(victim) = self.pick_victim(plane) else {
                return;
            };
            self.reclaim(victim, ops);
        }
    }

    fn pick_victim(&self, plane: u32) -> Option<u32> {
        match self.policy {
            GcPolicy::Greedy => self.pick_greedy(plane),
            GcPolicy::CostBenefit => self.pick_cost_benefit(plane),
        }
    }

    /// The block with the plane's least victim key, if it has an invalid
    /// page: the least group minimum, then its place in the group.
    fn pick_greedy(&self, plane: u32) -> Option<u32> {
        let first = (plane * self.groups_per_plane) as usize;
        let minima = &self.group_min[first..first + self.groups_per_plane as usize];
        let (at, least) = minima
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(_, key)| key)?;
        if least >> KEY_SEQ_BITS >= u64::from(self.pages_per_block) {
            return None;
        }
        let range = self.group_blocks(first + at);
        let block = range.start + self.victim_keys[range].iter().position(|&k| k == least)?;
        Some(block as u32)
    }

    /// Scan the plane's sealed blocks for the best `(1-u)/(2u) * age`.
    fn pick_cost_benefit(&self, plane: u32) -> Option<u32> {
        let first = plane * self.blocks_per_plane;
        let ppb = f64::from(self.pages_per_block);
        let mut best: Option<(f64, u32)> = None;
        for block in first..first + self.blocks_per_plane {
            let meta = &self.blocks[block as usize];
            if meta.state != BlockState::Sealed || meta.valid == self.pages_per_block {
                continue;
            }
            if meta.valid == 0 {
                return Some(block);
            }
            let u = f64::from(meta.valid) / ppb;
            let age = (self.clock - meta.modified_at) as f64 + 1.0;
            let score = (1.0 - u) / (2.0 * u) * age;
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, block));
            }
        }
        best.map(|(_, block)| block)
    }

    /// Copy the victim's valid pages within its plane, then erase it.
    fn reclaim(&mut self, victim: u32, ops: &mut Vec<FlashOp>) {
        let plane = self.plane_of(victim);
        let v = victim as usize;
        self.clear_victim_key(victim);
        self.blocks[v].state = BlockState::Open;
        self.stats.gc_runs += 1;
        let base = victim * self.pages_per_block;
        for page in 0..self.pages_per_block {
            let index = self.reverse_index(v, page);
            let lpn = index.map_or(NONE, |i| self.p2l.get(i));
            if lpn == NONE {
                continue;
            }
            let Some(to) = self.append(plane, Stream::Gc, u64::from(lpn)) else {
                debug_assert!(false, "PAGE-1: GC found no destination");
                return;
            };
            let from = base + page;
            ops.push(FlashOp::CopyBack {
                from_ppn: u64::from(from),
                to_ppn: u64::from(to),
            });
            self.stats.flash_pages_read += 1;
            if let Some(i) = index {
                self.p2l.set(i, NONE);
            }
            self.blocks[v].valid -= 1;
            self.l2p_set(u64::from(lpn), to);
        }
        debug_assert_eq!(
            self.blocks[v].valid, 0,
            "PAGE-2: victim still holds valid pages"
        );
        self.erase(victim, ops);
    }

    fn erase(&mut self, block: u32, ops: &mut Vec<FlashOp>) {
        let b = block as usize;
        ops.push(FlashOp::Erase {
            block: u64::from(block),
        });
        self.stats.erases += 1;
        self.erase_counts[b] = self.erase_counts[b].saturating_add(1);
        let meta = &mut self.blocks[b];
        let slot = meta.map;
        *meta = BlockMeta {
            modified_at: meta.modified_at,
            ..BlockMeta::ERASED
        };
        if slot != NONE {
            self.p2l.free_slot(slot);
        }
        let plane = self.plane_of(block) as usize;
        self.free[plane].push_back(block);
    }
}

/// Block reverse maps (physical page to logical page), `pages_per_block`
/// entries a slot, in chunks of [`REVERSE_MAP_CHUNK_SLOTS`] slots, so the
/// maps grow without moving and a page's entry is one step from its chunk.
struct ReverseMaps {
    pages_per_block: usize,
    chunks: Vec<Box<[u32]>>,
    slots: u32,
    /// Slots no block holds.
    free: Vec<u32>,
}

/// Reverse-map slots per chunk (128 KiB of entries at 128 pages a block).
pub const REVERSE_MAP_CHUNK_SLOTS: u32 = 256;

impl ReverseMaps {
    fn new(pages_per_block: u32) -> ReverseMaps {
        ReverseMaps {
            pages_per_block: pages_per_block as usize,
            chunks: Vec::new(),
            slots: 0,
            free: Vec::new(),
        }
    }

    /// A slot for a block being opened, all entries `NONE`: a freed one if
    /// there is one, else a new one.
    fn take_slot(&mut self) -> u32 {
        if let Some(slot) = self.free.pop() {
            self.slot_mut(slot).fill(NONE);
            return slot;
        }
        let slot = self.slots;
        if slot.is_multiple_of(REVERSE_MAP_CHUNK_SLOTS) {
            let entries = self.pages_per_block * REVERSE_MAP_CHUNK_SLOTS as usize;
            self.chunks.push(vec![NONE; entries].into_boxed_slice());
        }
        self.slots += 1;
        slot
    }

    fn offset(&self, slot: u32) -> (usize, usize) {
        let chunk = (slot / REVERSE_MAP_CHUNK_SLOTS) as usize;
        let first = (slot % REVERSE_MAP_CHUNK_SLOTS) as usize * self.pages_per_block;
        (chunk, first)
    }

    /// Give back an erased block's slot.
    fn free_slot(&mut self, slot: u32) {
        debug_assert!(slot < self.slots, "PAGE-2: freeing a slot never taken");
        self.free.push(slot);
    }

    fn slot(&self, slot: u32) -> &[u32] {
        let (chunk, first) = self.offset(slot);
        &self.chunks[chunk][first..first + self.pages_per_block]
    }

    fn slot_mut(&mut self, slot: u32) -> &mut [u32] {
        let (chunk, first) = self.offset(slot);
        &mut self.chunks[chunk][first..first + self.pages_per_block]
    }

    fn get(&self, (slot, page): (u32, u32)) -> u32 {
        let (chunk, first) = self.offset(slot);
        self.chunks[chunk][first + page as usize]
    }

    fn set(&mut self, (slot, page): (u32, u32), lpn: u32) {
        let (chunk, first) = self.offset(slot);
        self.chunks[chunk][first + page as usize] = lpn;
    }
}

impl Ftl for PageFtl {
    fn logical_pages(&self) -> u64 {
        self.logical_pages
    }

    fn stripe_pages(&self) -> u64 {
        self.stripe_pages
    }

    fn prefetch(&self, lpn: u64) {
        let chunk = (lpn >> L2P_CHUNK_SHIFT) as usize;
        if let Some(Some(entries)) = self.l2p.get(chunk)
            && let Some(entry) = entries.get((lpn & (L2P_CHUNK_PAGES - 1)) as usize)
        {
            super::prefetch_line(entry);
        }
    }

    fn lookup(&self, lpn: u64) -> Option<u64> {
        match self.l2p_get(lpn) {
            NONE => None,
            ppn => Some(u64::from(ppn)),
        }
    }

    /// Logical pages beyond the capacity are ignored (the controller never
    /// sends them, MODEL-3).
    fn write(&mut self, lpn: u64, ops: &mut Vec<FlashOp>) {
        if lpn >= self.logical_pages {
            return;
        }
        self.clock += 1;
        let old = self.l2p_get(lpn);
        if old != NONE {
            self.invalidate(old, lpn);
            self.l2p_set(lpn, NONE);
        }
        let Some(ppn) = self.host_page(lpn, ops) else {
            debug_assert!(false, "PAGE-3: no plane could take a page");
            return;
        };
        self.l2p_set(lpn, ppn);
        self.stats.host_pages_written += 1;
        ops.push(FlashOp::Program {
            ppn: u64::from(ppn),
        });
    }

    fn trim(&mut self, lpn: u64) {
        let old = self.l2p_get(lpn);
        if old != NONE {
            self.invalidate(old, lpn);
            self.l2p_set(lpn, NONE);
        }
    }

    fn stats(&self) -> FtlStats {
        self.stats.clone()
    }

    fn erase_counts(&self) -> &[u32] {
        &self.erase_counts
    }
}

/// Planes in channel-first order: consecutive entries differ in channel
/// first, then chip, then die, then plane.
fn stripe_order(g: &Geometry) -> Vec<u32> {
    let mut order = Vec::with_capacity(g.planes() as usize);
    for plane in 0..g.planes_per_die {
        for die in 0..g.dies_per_chip {
            for chip in 0..g.chips_per_channel {
                for channel in 0..g.channels {
                    let die_index = (channel * g.chips_per_channel + chip) * g.dies_per_chip + die;
                    order.push(die_index * g.planes_per_die + plane);
                }
            }
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::characterize::SplitMix64;

    /// 2 channels x 1 chip x 1 die x 2 planes, 64 blocks of 32 pages of
    /// 4 KiB per plane: 256 blocks, 8192 pages.
    fn geometry(over_provisioning: f64) -> Geometry {
        Geometry {
            channels: 2,
            chips_per_channel: 1,
            dies_per_chip: 1,
            planes_per_die: 2,
            blocks_per_plane: 64,
            pages_per_block: 32,
            page_bytes: 4096,
            over_provisioning,
        }
    }

    fn fill_sequentially(ftl: &mut PageFtl, ops: &mut Vec<FlashOp>) {
        for lpn in 0..ftl.logical_pages() {
            ops.clear();
            ftl.write(lpn, ops);
        }
    }

    /// A greedy FTL over `geometry(0.07)` written sequentially `passes`
    /// times, and the operations buffer it used.
    fn filled(passes: u32) -> (PageFtl, Vec<FlashOp>) {
        let mut ftl = PageFtl::new(&geometry(0.07), GcPolicy::Greedy).unwrap();
        let mut ops = Vec::new();
        for _ in 0..passes {
            fill_sequentially(&mut ftl, &mut ops);
        }
        (ftl, ops)
    }

    fn random_overwrite_waf(policy: GcPolicy, over_provisioning: f64, writes: u64) -> f64 {
        let mut ftl = PageFtl::new(&geometry(over_provisioning), policy).unwrap();
        let mut ops = Vec::new();
        fill_sequentially(&mut ftl, &mut ops);
        let before = ftl.stats();
        let mut rng = SplitMix64(7);
        for _ in 0..writes {
            ops.clear();
            ftl.write(rng.next_u64() % ftl.logical_pages(), &mut ops);
            assert!(matches!(ops.last(), Some(FlashOp::Program { .. })), "FTL-3");
        }
        ftl.check_invariants().unwrap();
        let after = ftl.stats();
        (after.flash_pages_written - before.flash_pages_written) as f64
            / (after.host_pages_written - before.host_pages_written) as f64
    }

    /// The sealed block of plane 0 holding the `nth` logical page found
    /// there, and that page.
    fn plane0_page(ftl: &PageFtl, nth: usize) -> (u32, u64) {
        let ppb = u64::from(ftl.pages_per_block);
        (0..ftl.logical_pages())
            .filter_map(|lpn| ftl.lookup(lpn).map(|ppn| ((ppn / ppb) as u32, lpn)))
            .filter(|&(block, _)| ftl.plane_of(block) == 0)
            .nth(nth)
            .unwrap()
    }

    #[test]
    fn greedy_takes_the_fewest_valid_pages_then_the_latest_change() {
        let (mut ftl, _) = filled(1);
        assert_eq!(
            ftl.pick_greedy(0),
            None,
            "no block of plane 0 has an invalid page"
        );
        let ppb = ftl.pages_per_block as usize;
        let (a, a_lpn) = plane0_page(&ftl, 0);
        let (b, b_lpn) = plane0_page(&ftl, ppb);
        assert_ne!(a, b);
        ftl.trim(a_lpn);
        assert_eq!(ftl.pick_greedy(0), Some(a));
        ftl.trim(b_lpn);
        assert_eq!(
            ftl.pick_greedy(0),
            Some(b),
            "a tie goes to the latest change"
        );
        let (a_again, a_second) = plane0_page(&ftl, 1);
        assert_eq!(a_again, a);
        ftl.trim(a_second);
        assert_eq!(ftl.pick_greedy(0), Some(a), "fewest valid pages first");
        ftl.check_invariants().unwrap();
    }

    #[test]
    fn pages_per_block_beyond_the_victim_key_are_refused() {
        let g = Geometry {
            pages_per_block: PAGES_PER_BLOCK_MAX + 1,
            ..geometry(0.07)
        };
        assert!(PageFtl::new(&g, GcPolicy::Greedy).is_err());
    }

    #[test]
    fn first_writes_stripe_over_channels_then_planes() {
        let mut ftl = PageFtl::new(&geometry(0.07), GcPolicy::Greedy).unwrap();
        let mut ops = Vec::new();
        let mut planes = Vec::new();
        for lpn in 0..4 {
            ops.clear();
            ftl.write(lpn, &mut ops);
            let Some(FlashOp::Program { ppn }) = ops.last() else {
                panic!("no program");
            };
            planes.push(ppn / 32 / 64);
        }
        // Plane index = die * 2 + plane; channel 0 is die 0, channel 1 die 1.
        assert_eq!(planes, vec![0, 2, 1, 3]);
    }

    #[test]
    fn stripe_units_keep_a_units_pages_on_one_plane() {
        let mut ftl = PageFtl::new(&geometry(0.07), GcPolicy::Greedy)
            .unwrap()
            .with_stripe_pages(2);
        assert_eq!(ftl.stripe_pages(), 2);
        let mut ops = Vec::new();
        let mut plane_of = |ftl: &mut PageFtl, lpn: u64| {
            ops.clear();
            ftl.write(lpn, &mut ops);
            let Some(FlashOp::Program { ppn }) = ops.last() else {
                panic!("no program");
            };
            ppn / 32 / 64
        };
        // Units {0, 1} and {2, 3}, written in order: one plane per unit.
        let planes: Vec<u64> = (0..4).map(|lpn| plane_of(&mut ftl, lpn)).collect();
        assert_eq!(planes, vec![0, 0, 2, 2]);
        // A page that does not continue the one before it (here the second
        // page of unit {6, 7}) takes the next plane, as does a unit start.
        assert_eq!(plane_of(&mut ftl, 7), 1);
        assert_eq!(plane_of(&mut ftl, 8), 3);
        assert_eq!(plane_of(&mut ftl, 9), 3);
        ftl.check_invariants().unwrap();
    }

    #[test]
    fn capacity_keeps_the_reserve_out() {
        let ftl = PageFtl::new(&geometry(0.0), GcPolicy::Greedy).unwrap();
        assert_eq!(ftl.logical_pages(), 8192 - 4 * 3 * 32);
        let ftl = PageFtl::new(&geometry(0.25), GcPolicy::Greedy).unwrap();
        assert_eq!(ftl.logical_pages(), 6144);
    }

    #[test]
    fn sequential_overwrite_has_waf_one() {
        let (ftl, _) = filled(5);
        let s = ftl.stats();
        let waf = s.flash_pages_written as f64 / s.host_pages_written as f64;
        assert!(waf < 1.01, "sequential WAF {waf}");
        assert!(s.gc_runs > 0 && s.erases > 0);
        ftl.check_invariants().unwrap();
    }

    #[test]
    fn greedy_random_overwrite_at_7_percent_amplifies() {
        let waf = random_overwrite_waf(GcPolicy::Greedy, 0.07, 60_000);
        assert!(waf > 2.5, "greedy WAF {waf}");
        assert!(waf < 12.0, "greedy WAF {waf}");
    }

    #[test]
    fn cost_benefit_keeps_the_invariants_and_amplifies() {
        let waf = random_overwrite_waf(GcPolicy::CostBenefit, 0.07, 60_000);
        assert!(waf > 2.5, "cost-benefit WAF {waf}");
    }

    #[test]
    fn more_over_provisioning_means_less_amplification() {
        let tight = random_overwrite_waf(GcPolicy::Greedy, 0.07, 40_000);
        let loose = random_overwrite_waf(GcPolicy::Greedy, 0.25, 40_000);
        assert!(loose < tight, "25% OP {loose} vs 7% OP {tight}");
    }

    #[test]
    fn gc_copies_stay_in_the_die_and_erase_last() {
        let (mut ftl, mut ops) = filled(1);
        let mut rng = SplitMix64(3);
        let pages_per_plane = 64 * 32;
        for _ in 0..20_000 {
            ops.clear();
            ftl.write(rng.next_u64() % ftl.logical_pages(), &mut ops);
            for op in &ops {
                if let FlashOp::CopyBack { from_ppn, to_ppn } = op {
                    assert_eq!(from_ppn / pages_per_plane, to_ppn / pages_per_plane);
                }
            }
        }
        assert!(ftl.stats().gc_runs > 0);
    }

    #[test]
    fn trim_unmaps_and_lowers_amplification() {
        let (mut ftl, mut ops) = filled(1);
        for lpn in 0..ftl.logical_pages() / 2 {
            ftl.trim(lpn);
        }
        assert_eq!(ftl.lookup(0), None);
        ftl.check_invariants().unwrap();
        let mut rng = SplitMix64(5);
        let half = ftl.logical_pages() / 2;
        let before = ftl.stats();
        for _ in 0..20_000 {
            ops.clear();
            ftl.write(half + rng.next_u64() % half, &mut ops);
        }
        let after = ftl.stats();
        let waf = (after.flash_pages_written - before.flash_pages_written) as f64
            / (after.host_pages_written - before.host_pages_written) as f64;
        assert!(waf < 1.6, "half the device trimmed, WAF {waf}");
        ftl.check_invariants().unwrap();
    }

    #[test]
    fn wear_is_counted_per_block() {
        let (ftl, _) = filled(3);
        let total: u64 = ftl.erase_counts().iter().map(|&c| u64::from(c)).sum();
        assert_eq!(total, ftl.stats().erases);
        assert_eq!(ftl.erase_counts().len(), 256);
    }

    #[test]
    fn tiny_planes_are_refused() {
        let mut g = geometry(0.07);
        g.blocks_per_plane = BLOCKS_PER_PLANE_MIN - 1;
        assert!(matches!(
            PageFtl::new(&g, GcPolicy::Greedy),
            Err(DeviceError::Geometry { .. })
        ));
    }

    #[test]
    fn out_of_range_writes_are_ignored() {
        let mut ftl = PageFtl::new(&geometry(0.07), GcPolicy::Greedy).unwrap();
        let mut ops = Vec::new();
        ftl.write(ftl.logical_pages(), &mut ops);
        assert!(ops.is_empty());
        assert_eq!(ftl.stats().host_pages_written, 0);
    }
}
