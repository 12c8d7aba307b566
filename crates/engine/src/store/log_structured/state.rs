//! The store's memory: the page map, segment usage, the reusable set, the
//! open partial segment and the one in flight, and victim choice.
//! Everything here runs under the state lock, without I/O (LFS-6).

use std::collections::BTreeSet;
use std::sync::Arc;

use super::Cleaning;
use super::layout::{self, Entry, MapCheckpoint, Summary, Superblock};
use crate::page::{self, PageNo};

/// Where a read finds its page.
pub(super) enum Lookup {
    /// Copied into the caller's buffer (never written: zeros; or still in
    /// memory).
    Done,
    /// On the device, at `block`, whose segment had `generation`.
    Device { block: u64, generation: u64 },
}

/// Block addressing of the segment area.
pub(super) trait Geometry {
    fn block(&self, segment: u32, offset: u32) -> u64;
    fn segment_of(&self, block: u64) -> u32;
    fn b(&self) -> u32;
}

impl Geometry for Superblock {
    fn block(&self, segment: u32, offset: u32) -> u64 {
        debug_assert!(segment < self.segments && offset < self.blocks_per_segment);
        self.first_segment_block
            + u64::from(segment) * u64::from(self.blocks_per_segment)
            + u64::from(offset)
    }

    fn segment_of(&self, block: u64) -> u32 {
        assert!(
            block >= self.first_segment_block,
            "LFS-5: a block of the segment area"
        );
        let s = (block - self.first_segment_block) / u64::from(self.blocks_per_segment);
        assert!(
            s < u64::from(self.segments),
            "LFS-5: a block of the segment area"
        );
        s as u32
    }

    fn b(&self) -> u32 {
        self.blocks_per_segment
    }
}

/// The in-memory state. See the module documentation of the store.
pub(super) struct State {
    /// Page number → block (0: never written).
    pub map: Vec<u32>,
    /// Pages below this may be mapped.
    pub hwm: u32,
    /// Live (mapped) blocks per segment (LFS-2).
    pub live: Vec<u32>,
    /// Sequence number of each segment's last partial segment (0: none).
    pub ages: Vec<u64>,
    /// Bumped each time a segment is taken for reuse (reads check it).
    pub generation: Vec<u64>,
    /// Segments that may be written (LFS-3), as of the last map checkpoint.
    pub reusable: BTreeSet<u32>,
    /// Segments dead at the last map checkpoint, reusable after the next.
    pub pending: BTreeSet<u32>,
    /// Where the next partial segment goes.
    pub head_segment: u32,
    pub head_offset: u32,
    /// The next partial segment's sequence number.
    pub next_seq: u64,
    /// Sequence number of the last durable map checkpoint.
    pub epoch: u64,
    /// The map-checkpoint slot the open found without a valid copy of the
    /// newest checkpoint (torn, damaged or older), written first by the
    /// next map checkpoint (LFS-9); `None` once both slots hold one.
    pub stale_map_slot: Option<u64>,
    /// The open partial segment: its pages (number, image), back to back.
    pub open_pages: Vec<PageNo>,
    pub open_images: Vec<u8>,
    /// Whether the open partial segment has its place (at the head).
    pub open_placed: bool,
    /// The partial segment being written: its first block and its bytes.
    pub in_flight: Option<(u64, Arc<Vec<u8>>)>,
    /// A cleaning pass is running (no nested one).
    pub cleaning_now: bool,
    /// Segments cleaning could not read whole (damage at rest): not chosen
    /// again while this store is open.
    pub unclean: BTreeSet<u32>,
    /// Why the store stopped (a failed write).
    pub failed: Option<String>,
    page_bytes: usize,
}

impl State {
    /// The state a map checkpoint describes (before any roll-forward).
    pub fn from_checkpoint(geo: &Superblock, cp: &MapCheckpoint) -> State {
        let mut map = vec![0u32; geo.capacity_pages as usize];
        let n = cp.map.len().min(map.len());
        map[..n].copy_from_slice(&cp.map[..n]);
        let mut live = vec![0u32; geo.segments as usize];
        let mut hwm = 0;
        for (p, &block) in map.iter().enumerate() {
            if block != 0 {
                live[geo.segment_of(u64::from(block)) as usize] += 1;
                hwm = p as u32 + 1;
            }
        }
        let mut ages = cp.ages.clone();
        ages.resize(geo.segments as usize, 0);
        let mut st = State {
            map,
            hwm,
            live,
            ages,
            generation: vec![0; geo.segments as usize],
            reusable: BTreeSet::new(),
            pending: BTreeSet::new(),
            head_segment: cp.head_segment,
            head_offset: cp.head_offset_blocks,
            next_seq: cp.next_partial_seq,
            epoch: cp.seq,
            stale_map_slot: None,
            open_pages: Vec::new(),
            open_images: Vec::new(),
            open_placed: false,
            in_flight: None,
            cleaning_now: false,
            unclean: BTreeSet::new(),
            failed: None,
            page_bytes: geo.page_bytes as usize,
        };
        for (s, &f) in cp.flags.iter().enumerate() {
            let s = s as u32;
            if f & layout::SEGMENT_REUSABLE != 0 && st.live[s as usize] == 0 && s != st.head_segment
            {
                st.reusable.insert(s);
            } else if f & layout::SEGMENT_PENDING != 0 && st.live[s as usize] == 0 {
                st.pending.insert(s);
            }
        }
        st
    }

    /// The reusable and pending sets after a map checkpoint of the current
    /// state is durable: a segment becomes reusable once it was dead at
    /// two consecutive checkpoints (LFS-3), so the previous checkpoint,
    /// should the newest be found damaged, still finds everything its
    /// roll-forward needs.
    fn sets_after_checkpoint(&self) -> (BTreeSet<u32>, BTreeSet<u32>) {
        let dead = self.free_segments();
        let reusable: BTreeSet<u32> = dead
            .iter()
            .copied()
            .filter(|s| self.reusable.contains(s) || self.pending.contains(s))
            .collect();
        let pending = dead.difference(&reusable).copied().collect();
        (reusable, pending)
    }

    /// Segments with no live page, the head's excepted (LFS-3).
    fn free_segments(&self) -> BTreeSet<u32> {
        (0..self.live.len() as u32)
            .filter(|&s| self.live[s as usize] == 0 && s != self.head_segment)
            .collect()
    }

    /// The reusable segment the log continues in after `current`: the next
    /// higher number, wrapping (the roll-forward repeats this choice).
    pub fn next_segment(set: &BTreeSet<u32>, current: u32) -> Option<u32> {
        set.range(current + 1..)
            .next()
            .or_else(|| set.iter().next())
            .copied()
    }

    /// Give the open partial segment its place: at the head, or at the
    /// start of the next reusable segment when the head's has no room for a
    /// summary and a page. False if no segment is reusable.
    /// `kept_for_cleaning`: reusable segments this placement may not take
    /// (LFS-8).
    pub fn place_open(&mut self, geo: &Superblock, kept_for_cleaning: usize) -> bool {
        if self.open_placed {
            return true;
        }
        if geo.b() - self.head_offset.min(geo.b()) < 2 {
            if self.reusable.len() <= kept_for_cleaning {
                return false;
            }
            let Some(next) = State::next_segment(&self.reusable, self.head_segment) else {
                return false;
            };
            self.reusable.remove(&next);
            assert_eq!(
                self.live[next as usize], 0,
                "LFS-3: a reused segment has no live page"
            );
            self.generation[next as usize] += 1;
            self.ages[next as usize] = 0;
            self.head_segment = next;
            self.head_offset = 0;
        }
        self.open_placed = true;
        true
    }

    /// Most pages the open partial segment may hold at its place.
    fn open_capacity(&self, geo: &Superblock, partial_pages_max: usize) -> usize {
        partial_pages_max.min((geo.b() - self.head_offset - 1) as usize)
    }

    /// Add a page to the placed open partial segment and map it there.
    /// True when the partial segment is now full.
    pub fn append(
        &mut self,
        geo: &Superblock,
        page_no: PageNo,
        image: &[u8],
        partial_pages_max: usize,
    ) -> bool {
        assert!(self.open_placed);
        let n = self.open_pages.len() as u32;
        let block = geo.block(self.head_segment, self.head_offset + 1 + n);
        self.remap(geo, page_no, block);
        self.open_pages.push(page_no);
        self.open_images.extend_from_slice(image);
        self.open_pages.len() >= self.open_capacity(geo, partial_pages_max)
    }

    /// Point `page_no` at `block`, keeping the live counts (LFS-2).
    pub fn remap(&mut self, geo: &Superblock, page_no: PageNo, block: u64) {
        let slot = &mut self.map[page_no as usize];
        if *slot != 0 {
            let old = geo.segment_of(u64::from(*slot));
            self.live[old as usize] -= 1;
        }
        *slot = u32::try_from(block).expect("LFS-5: block numbers fit 32 bits");
        self.live[geo.segment_of(block) as usize] += 1;
        self.hwm = self.hwm.max(page_no + 1);
    }

    /// Take the open partial segment as the bytes to write (summary, then
    /// the pages) and its first block; it stays readable as in flight.
    pub fn take_partial(
        &mut self,
        geo: &Superblock,
        page_bytes: usize,
    ) -> Option<(u64, Arc<Vec<u8>>)> {
        if self.open_pages.is_empty() {
            return None;
        }
        let pages = std::mem::take(&mut self.open_pages);
        let images = std::mem::take(&mut self.open_images);
        let entries = pages
            .iter()
            .zip(images.chunks(page_bytes))
            .map(|(&page_no, image)| Entry {
                page_no,
                crc: u32::from_le_bytes(image[0..4].try_into().expect("4 bytes")),
                lsn: page::lsn(image),
            })
            .collect();
        let seq = self.next_seq;
        let summary = Summary {
            segment: self.head_segment,
            offset_blocks: self.head_offset,
            epoch: self.epoch,
            seq,
            entries,
        };
        let mut bytes = vec![0u8; page_bytes];
        summary.encode(&mut bytes);
        bytes.extend_from_slice(&images);
        let block = geo.block(self.head_segment, self.head_offset);
        assert!(
            u64::from(self.head_offset) + 1 + pages.len() as u64 <= u64::from(geo.b()),
            "LFS-5: a partial segment stays in its segment"
        );
        self.next_seq += 1;
        self.ages[self.head_segment as usize] = seq;
        self.head_offset += 1 + pages.len() as u32;
        self.open_placed = false;
        let bytes = Arc::new(bytes);
        self.in_flight = Some((block, bytes.clone()));
        Some((block, bytes))
    }

    /// The map checkpoint of the current (durable) state.
    pub fn map_checkpoint(&self) -> MapCheckpoint {
        assert!(self.open_pages.is_empty() && self.in_flight.is_none());
        let (reusable, pending) = self.sets_after_checkpoint();
        let flags = (0..self.live.len() as u32)
            .map(|s| {
                if reusable.contains(&s) {
                    layout::SEGMENT_REUSABLE
                } else if pending.contains(&s) {
                    layout::SEGMENT_PENDING
                } else {
                    0
                }
            })
            .collect();
        MapCheckpoint {
            seq: self.epoch + 1,
            next_partial_seq: self.next_seq,
            head_segment: self.head_segment,
            head_offset_blocks: self.head_offset,
            ages: self.ages.clone(),
            flags,
            map: self.map[..self.hwm as usize].to_vec(),
        }
    }

    /// A map checkpoint of sequence `seq` is durable: the segments without
    /// live pages become reusable (LFS-3).
    pub fn checkpointed(&mut self, geo: &Superblock, seq: u64) {
        self.epoch = seq;
        (self.reusable, self.pending) = self.sets_after_checkpoint();
        self.check(geo);
    }

    /// Segments with no live page that are not yet reusable.
    pub fn dead_segments(&self, geo: &Superblock) -> usize {
        (0..geo.segments)
            .filter(|&s| {
                self.live[s as usize] == 0 && s != self.head_segment && !self.reusable.contains(&s)
            })
            .count()
    }

    pub fn mapped_pages(&self) -> u64 {
        self.live.iter().map(|&l| u64::from(l)).sum()
    }

    pub fn block_of(&self, page_no: PageNo) -> u64 {
        self.map.get(page_no as usize).map_or(0, |&b| u64::from(b))
    }

    /// Find page `page_no`: zeros, in memory (copied into `buf`), or a
    /// block to read.
    pub fn lookup(&self, geo: &Superblock, page_no: PageNo, buf: &mut [u8]) -> Lookup {
        let block = self.block_of(page_no);
        if block == 0 {
            buf.fill(0);
            return Lookup::Done;
        }
        let pb = self.page_bytes as u64;
        if self.open_placed || !self.open_pages.is_empty() {
            let first = geo.block(self.head_segment, self.head_offset) + 1;
            if block >= first && block < first + self.open_pages.len() as u64 {
                let at = ((block - first) * pb) as usize;
                buf.copy_from_slice(&self.open_images[at..at + self.page_bytes]);
                return Lookup::Done;
            }
        }
        if let Some((start, bytes)) = &self.in_flight {
            let len = bytes.len() as u64 / pb;
            if block > *start && block < start + len {
                let at = ((block - start) * pb) as usize;
                buf.copy_from_slice(&bytes[at..at + self.page_bytes]);
                return Lookup::Done;
            }
        }
        let segment = geo.segment_of(block);
        Lookup::Device {
            block,
            generation: self.generation[segment as usize],
        }
    }

    /// Whether page `page_no` is still at `block`, in the same incarnation
    /// of its segment, after a read of it.
    pub fn still_at(&self, geo: &Superblock, page_no: PageNo, block: u64, generation: u64) -> bool {
        self.block_of(page_no) == block
            && self.generation[geo.segment_of(block) as usize] == generation
    }

    /// Choose a segment to clean: not the head's, not reusable, with live
    /// pages, and whose copies take fewer blocks than it frees.
    pub fn choose_victim(
        &self,
        geo: &Superblock,
        policy: Cleaning,
        partial_pages_max: usize,
    ) -> Option<u32> {
        let b = u64::from(geo.b());
        let candidates = (0..geo.segments).filter(|&s| {
            let live = u64::from(self.live[s as usize]);
            s != self.head_segment
                && !self.reusable.contains(&s)
                && !self.unclean.contains(&s)
                && live > 0
                && live + live.div_ceil(partial_pages_max as u64) + 1 < b
        });
        match policy {
            Cleaning::Off => None,
            Cleaning::Greedy => candidates.min_by_key(|&s| (self.live[s as usize], s)),
            Cleaning::CostBenefit => {
                let score = |s: u32| {
                    let u = f64::from(self.live[s as usize]) / (b - 1) as f64;
                    let age = self.next_seq.saturating_sub(self.ages[s as usize]) as f64;
                    (1.0 - u) * age / (1.0 + u)
                };
                candidates
                    .fold(None, |best: Option<(u32, f64)>, s| {
                        let v = score(s);
                        match best {
                            Some((_, bv)) if bv >= v => best,
                            _ => Some((s, v)),
                        }
                    })
                    .map(|(s, _)| s)
            }
        }
    }

    /// Blocks free to copy into: the head segment's room and the reusable
    /// segments.
    pub fn free_blocks(&self, geo: &Superblock) -> u64 {
        let head_room = u64::from(geo.b().saturating_sub(self.head_offset + 1));
        head_room + self.reusable.len() as u64 * u64::from(geo.b() - 1)
    }

    /// The pages mapped into `segment`, with their blocks.
    pub fn live_pages_in(&self, geo: &Superblock, segment: u32) -> Vec<(PageNo, u64)> {
        let first = geo.block(segment, 0);
        let end = first + u64::from(geo.b());
        self.map[..self.hwm as usize]
            .iter()
            .enumerate()
            .filter(|(_, b)| (first..end).contains(&u64::from(**b)))
            .map(|(p, b)| (p as PageNo, u64::from(*b)))
            .collect()
    }

    /// LFS-2 (in builds with debug assertions: a pass over the map) and
    /// LFS-3, whole (after each map checkpoint).
    pub fn check(&self, geo: &Superblock) {
        if cfg!(debug_assertions) {
            let mut live = vec![0u32; self.live.len()];
            for &b in &self.map {
                if b != 0 {
                    live[geo.segment_of(u64::from(b)) as usize] += 1;
                }
            }
            assert_eq!(live, self.live, "LFS-2: live counts are the map's");
        }
        for &s in &self.reusable {
            assert_eq!(
                self.live[s as usize], 0,
                "LFS-3: a reusable segment has no live page"
            );
        }
    }
}
