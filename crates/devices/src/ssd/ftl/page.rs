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
//! Victims. *Greedy* takes the block with the fewest valid pages. Each plane
//! keeps its sealed (full) blocks in buckets by valid count, one intrusive
//! doubly linked list per count, so invalidating a page moves its block one
//! bucket down in O(1) and a pick scans at most `pages_per_block + 1` bucket
//! heads: O(pages_per_block), independent of the device size. *Cost-benefit*
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
//! know whom a valid page belongs to) is allocated when the block is opened
//! and returned to a pool when it is erased, so the pool never holds more
//! maps than there were open or full blocks at once. Per-block counters
//! (valid pages, write pointer, erase count, bucket links) are a few dozen
//! bytes per erase block, which is small next to the block itself.
//!
//! Invariants, besides FTL-1..3 of [`super`]:
//! 1. (PAGE-1) Between host writes every plane has at least
//!    [`GC_RESERVE_BLOCKS`] free blocks, so GC always has a destination
//!    for the at most `pages_per_block - 1` pages a victim holds.
//! 2. (PAGE-2) A block's valid count equals the number of mapped entries
//!    in its reverse map, and a sealed block sits in the bucket of its
//!    valid count.
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
/// Marks an unmapped entry in either map, and the end of a bucket list.
const NONE: u32 = u32::MAX;

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
    /// Full, in the bucket of its valid count; a GC candidate.
    Sealed,
}

/// Which active block of a plane a page goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stream {
    Host,
    Gc,
}

/// The page-mapping FTL. See the module documentation.
pub struct PageFtl {
    policy: GcPolicy,
    pages_per_block: u32,
    blocks_per_plane: u32,
    logical_pages: u64,
    /// Logical-to-physical map in lazily allocated chunks.
    l2p: Vec<Option<Box<[u32]>>>,
    // Per block (global block number).
    valid: Vec<u32>,
    write_ptr: Vec<u32>,
    state: Vec<BlockState>,
    prev: Vec<u32>,
    next: Vec<u32>,
    modified_at: Vec<u64>,
    erase_counts: Vec<u32>,
    p2l: Vec<Option<Box<[u32]>>>,
    p2l_pool: Vec<Box<[u32]>>,
    // Per plane.
    free: Vec<VecDeque<u32>>,
    host_active: Vec<u32>,
    gc_active: Vec<u32>,
    /// `bucket_heads[plane * (pages_per_block + 1) + valid]`.
    bucket_heads: Vec<u32>,
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
        let planes = geometry.planes();
        let blocks = geometry.blocks() as usize;
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
            valid: vec![0; blocks],
            write_ptr: vec![0; blocks],
            state: vec![BlockState::Free; blocks],
            prev: vec![NONE; blocks],
            next: vec![NONE; blocks],
            modified_at: vec![0; blocks],
            erase_counts: vec![0; blocks],
            p2l: vec![None; blocks],
            p2l_pool: Vec::new(),
            free,
            host_active: vec![NONE; planes as usize],
            gc_active: vec![NONE; planes as usize],
            bucket_heads: vec![NONE; planes as usize * (ppb as usize + 1)],
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
            if page as u32 >= self.write_ptr[block] {
                return Err(format!("FTL-1: lpn {lpn} maps to unprogrammed ppn {ppn}"));
            }
            let back = self.p2l[block].as_ref().map(|m| m[page]);
            if back != Some(lpn as u32) {
                return Err(format!("FTL-2: ppn {ppn} maps back to {back:?}, not {lpn}"));
            }
        }
        let mut valid_pages = 0u64;
        for block in 0..self.valid.len() {
            let live = self.p2l[block]
                .as_ref()
                .map_or(0, |m| m.iter().filter(|&&l| l != NONE).count());
            if live as u32 != self.valid[block] {
                return Err(format!("PAGE-2: block {block} valid count is off"));
            }
            valid_pages += live as u64;
        }
        if valid_pages != mapped_lpns {
            return Err(format!(
                "FTL-2: {valid_pages} valid pages for {mapped_lpns} mapped lpns"
            ));
        }
        self.check_buckets()?;
        match self
            .free
            .iter()
            .position(|f| f.len() < GC_RESERVE_BLOCKS as usize)
        {
            Some(plane) => Err(format!("PAGE-1: plane {plane} below the GC reserve")),
            None => Ok(()),
        }
    }

    fn check_buckets(&self) -> Result<(), String> {
        let width = self.pages_per_block as usize + 1;
        let mut listed = 0usize;
        for (i, &head) in self.bucket_heads.iter().enumerate() {
            let mut block = head;
            while block != NONE {
                let b = block as usize;
                if self.state[b] != BlockState::Sealed || self.valid[b] as usize != i % width {
                    return Err(format!("PAGE-2: block {b} in the wrong bucket"));
                }
                listed += 1;
                block = self.next[b];
            }
        }
        let sealed = self
            .state
            .iter()
            .filter(|&&s| s == BlockState::Sealed)
            .count();
        if listed == sealed {
            Ok(())
        } else {
            Err(format!(
                "PAGE-2: {sealed} sealed blocks, {listed} in buckets"
            ))
        }
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
        let page = (ppn % self.pages_per_block) as usize;
        let b = block as usize;
        if let Some(map) = self.p2l[b].as_mut() {
            debug_assert_eq!(map[page], lpn as u32, "FTL-2: reverse map disagrees");
            map[page] = NONE;
        }
        debug_assert!(self.valid[b] > 0, "PAGE-2: valid count underflow");
        let sealed = self.state[b] == BlockState::Sealed;
        if sealed {
            self.bucket_remove(block);
        }
        self.valid[b] -= 1;
        self.modified_at[b] = self.clock;
        if sealed {
            self.bucket_push(block);
        }
    }

    fn bucket_index(&self, block: u32) -> usize {
        let plane = self.plane_of(block) as usize;
        plane * (self.pages_per_block as usize + 1) + self.valid[block as usize] as usize
    }

    fn bucket_push(&mut self, block: u32) {
        let head_index = self.bucket_index(block);
        let head = self.bucket_heads[head_index];
        self.prev[block as usize] = NONE;
        self.next[block as usize] = head;
        if head != NONE {
            self.prev[head as usize] = block;
        }
        self.bucket_heads[head_index] = block;
    }

    fn bucket_remove(&mut self, block: u32) {
        let (prev, next) = (self.prev[block as usize], self.next[block as usize]);
        if prev == NONE {
            let head_index = self.bucket_index(block);
            debug_assert_eq!(self.bucket_heads[head_index], block, "PAGE-2");
            self.bucket_heads[head_index] = next;
        } else {
            self.next[prev as usize] = next;
        }
        if next != NONE {
            self.prev[next as usize] = prev;
        }
        self.prev[block as usize] = NONE;
        self.next[block as usize] = NONE;
    }

    /// Take a free block of `plane` and make it writable.
    fn open_block(&mut self, plane: u32) -> Option<u32> {
        let block = self.free[plane as usize].pop_front()?;
        let b = block as usize;
        debug_assert_eq!(self.state[b], BlockState::Free);
        debug_assert_eq!(self.write_ptr[b], 0, "FTL-1: opening an unerased block");
        let ppb = self.pages_per_block as usize;
        let mut map = self
            .p2l_pool
            .pop()
            .unwrap_or_else(|| vec![NONE; ppb].into_boxed_slice());
        map.fill(NONE);
        self.p2l[b] = Some(map);
        self.state[b] = BlockState::Open;
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
        let page = self.write_ptr[b];
        debug_assert!(
            page < self.pages_per_block,
            "FTL-1: programming a full block"
        );
        if let Some(map) = self.p2l[b].as_mut() {
            map[page as usize] = lpn as u32;
        }
        self.write_ptr[b] = page + 1;
        self.valid[b] += 1;
        self.modified_at[b] = self.clock;
        let full = page + 1 == self.pages_per_block;
        let slot = if full { NONE } else { block };
        match stream {
            Stream::Host => self.host_active[p] = slot,
            Stream::Gc => self.gc_active[p] = slot,
        }
        if full {
            self.state[b] = BlockState::Sealed;
            self.bucket_push(block);
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

    /// The first non-empty bucket below "all valid": O(pages_per_block).
    fn pick_greedy(&self, plane: u32) -> Option<u32> {
        let width = self.pages_per_block as usize + 1;
        let first = plane as usize * width;
        self.bucket_heads[first..first + width - 1]
            .iter()
            .copied()
            .find(|&head| head != NONE)
    }

    /// Scan the plane's sealed blocks for the best `(1-u)/(2u) * age`.
    fn pick_cost_benefit(&self, plane: u32) -> Option<u32> {
        let first = plane * self.blocks_per_plane;
        let ppb = f64::from(self.pages_per_block);
        let mut best: Option<(f64, u32)> = None;
        for block in first..first + self.blocks_per_plane {
            let b = block as usize;
            if self.state[b] != BlockState::Sealed || self.valid[b] == self.pages_per_block {
                continue;
            }
            if self.valid[b] == 0 {
                return Some(block);
            }
            let u = f64::from(self.valid[b]) / ppb;
            let age = (self.clock - self.modified_at[b]) as f64 + 1.0;
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
        self.bucket_remove(victim);
        self.state[v] = BlockState::Open;
        self.stats.gc_runs += 1;
        let base = victim * self.pages_per_block;
        for page in 0..self.pages_per_block {
            let lpn = self.p2l[v].as_ref().map_or(NONE, |m| m[page as usize]);
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
            if let Some(map) = self.p2l[v].as_mut() {
                map[page as usize] = NONE;
            }
            self.valid[v] -= 1;
            self.l2p_set(u64::from(lpn), to);
        }
        debug_assert_eq!(self.valid[v], 0, "PAGE-2: victim still holds valid pages");
        self.erase(victim, ops);
    }

    fn erase(&mut self, block: u32, ops: &mut Vec<FlashOp>) {
        let b = block as usize;
        ops.push(FlashOp::Erase {
            block: u64::from(block),
        });
        self.stats.erases += 1;
        self.erase_counts[b] = self.erase_counts[b].saturating_add(1);
        self.write_ptr[b] = 0;
        self.valid[b] = 0;
        self.state[b] = BlockState::Free;
        if let Some(map) = self.p2l[b].take() {
            self.p2l_pool.push(map);
        }
        let plane = self.plane_of(block) as usize;
        self.free[plane].push_back(block);
    }
}

impl Ftl for PageFtl {
    fn logical_pages(&self) -> u64 {
        self.logical_pages
    }

    fn stripe_pages(&self) -> u64 {
        self.stripe_pages
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
