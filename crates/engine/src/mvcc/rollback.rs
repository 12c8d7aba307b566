//! Rollback segments: where before-images go.
//!
//! The rollback space is a device of pages (8 KB by default), cached in
//! the buffer pool of that page size like any data page. Its first
//! [`METADATA_PAGES`] pages are the *metadata region*: a header and the
//! segment table, rewritten in place whenever a segment is created or moves
//! to a new extent (the narrow band of in-place writes at the bottom of
//! lee2008 Figure 4(a)). The rest is cut into *extents* (1 MB by default).
//!
//! A transaction that changes a row is assigned a *segment* (a free one, or
//! a new one when all are taken, so the number of segments grows with the
//! number of concurrent writers) and appends the row's before-image to it:
//! records are packed into the segment's current page, pages are filled in
//! order through the segment's current extent, and a full extent makes the
//! segment take another. Concurrent writers therefore produce concurrent
//! append-only streams, one per transaction, about one extent apart
//! (lee2008 Figure 4(b)). A page is written to the device as soon as its
//! segment has filled it, and not before: its image is installed in the
//! buffer pool as an *append page* (BUF-10), which the page cleaner
//! and checkpoints leave alone until the segment seals it. Only an eviction
//! (the segment idle, its page unpinned, the pool short of frames) writes a
//! page before it is full; the page is then written again when it fills.
//!
//! The metadata region is different: the header page is written once at
//! open, and a segment-table page is rewritten in place, directly to the
//! device (not through the pool), whenever a segment is created or moves to
//! a new extent, so its writes grow with the number of extents taken, not
//! with the number of pages.
//!
//! A before-image is addressed by a *rollback pointer*: its byte address in
//! the rollback space (40 bits) and the generation of its extent (23 bits).
//! An extent is reused once every transaction that wrote into it has ended,
//! no active snapshot is older than their commits, and the retention window
//! has passed; reuse bumps its generation, so a pointer into a reused extent
//! is recognised as dangling and the read fails with "snapshot too old".
//!
//! Record layout inside a rollback page (after the 24-byte page header):
//! `u32 length of the row` + 16-byte version header + row bytes, packed.
//!
//! Invariants (RBS-n):
//! 1. A segment is written by at most one transaction at a time.
//! 2. A record never spans pages.
//! 3. An extent is reused only when no snapshot, active writer or retention
//!    window can need its records (MVCC-3).
//! 4. A pointer read back resolves to the record written at it, or to
//!    "gone" if its extent was reused; never to another record.
//! 5. An extent page is written once per fill of its extent: when its
//!    segment moves past it (BUF-10), unless an eviction forces it out
//!    earlier.
//! 6. Each segment has a lock of its own, held by its owner across the
//!    buffer pool's fetches; the space's lock (segment slots, extents,
//!    free list, statistics) is held for bookkeeping only, never across a
//!    buffer fetch, a device write or the reclaim horizon's computation.
//!    Lock order: a segment's lock, then the space's. The owner reaches
//!    its segment through the [`SegmentRef`] that `assign` gave it, so an
//!    append or a release takes the space's lock only for bookkeeping, not
//!    to look its segment up (seven times a TPC-B transaction).
//! 7. Fresh extents are taken each once, in address order, or in an aged
//!    space in a fixed shuffled order of its first `aged_span_bytes`
//!    (then in address order): an extent number is never taken fresh twice.
//! 8. A transaction is counted as a writer only of extents its segment
//!    records for it, so its end visits those alone: the cost of a commit
//!    does not grow with the extents of the space, which grow with the
//!    clients (a scan of every extent at each end: docs/PERFORMANCE-HISTORY.md,
//!    "Lock words, before-images, extents and zeros"). Checked against
//!    every extent with debug assertions.
//! 9. While its owner keeps the segment's page pinned, the frame holds the
//!    segment's image of the page once one append has installed it whole:
//!    nothing else writes the frame, and a pinned frame is not evicted. So
//!    a later append through the same handle copies only its record into
//!    the frame. A new page, or a handle taken again after a release (the
//!    frame may have been evicted or dropped meanwhile), starts with a
//!    whole install. Checked on every append with debug assertions.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use flashlab_devices::{Device, DeviceError, DeviceRef, ModelStats};
use flashlab_runtime::{Mutex as RtMutex, Rt};
use serde::Serialize;

use crate::buffer::{BufferPool, PageRef};
use crate::error::{Error, Result};
use crate::page::{self, PAGE_HEADER_BYTES, PageId, PageType, SpaceId};
use crate::row::VersionHeader;

/// The buffer pool's space id of the rollback space.
pub const ROLLBACK_SPACE: SpaceId = 0x7FFF_0000;
/// Pages of the in-place metadata region.
pub const METADATA_PAGES: u32 = 8;
/// Bytes per segment-table entry.
const SEGMENT_ENTRY_BYTES: usize = 32;
/// Bytes before each record's version header.
const RECORD_LEN_BYTES: usize = 4;
/// Bits of a pointer's address part.
const ADDRESS_BITS: u32 = 40;
const ADDRESS_MASK: u64 = (1 << ADDRESS_BITS) - 1;
/// Generations wrap within 23 bits.
const GENERATION_MASK: u64 = (1 << 23) - 1;
const MAGIC: &[u8; 4] = b"FLRB";
/// The most extents an aged space shuffles (64 GB of 1 MB extents).
pub const AGED_EXTENTS_MAX: u64 = 1 << 16;

/// What the rollback space counted.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct RollbackStats {
    pub segments: u64,
    pub extents_in_use: u64,
    pub extents_allocated: u64,
    pub extents_reused: u64,
    pub records_written: u64,
    pub bytes_written: u64,
    /// Version reads that followed a chain into the rollback space.
    pub versions_read: u64,
    /// Device reads of rollback pages (buffer misses), and their time.
    pub pages_read: u64,
    pub read_ns: u64,
    /// Chains walked and their total length (versions stepped through).
    pub chains: u64,
    pub chain_steps: u64,
    pub chain_max: u64,
    pub snapshot_too_old: u64,
}

/// Counts reads of the rollback device and the time they take.
pub struct CountingDevice {
    inner: DeviceRef,
    reads: AtomicU64,
    read_ns: AtomicU64,
}

impl CountingDevice {
    pub fn new(inner: DeviceRef) -> CountingDevice {
        CountingDevice {
            inner,
            reads: AtomicU64::new(0),
            read_ns: AtomicU64::new(0),
        }
    }
}

impl flashlab_devices::Wrapper for CountingDevice {
    fn inner(&self) -> &dyn Device {
        &*self.inner
    }
    fn read(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let rt = Rt::current();
        let start = rt.now_ns();
        let result = self.inner.read(offset_bytes, buf);
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.read_ns
            .fetch_add(rt.now_ns() - start, Ordering::Relaxed);
        result
    }
    fn model_stats(&self) -> Option<ModelStats> {
        self.inner.model_stats()
    }
}

/// What a segment's owner works on, behind the segment's own lock
/// (RBS-6): appends of different transactions never wait for each other.
#[derive(Default)]
struct Segment {
    /// Current extent, its generation, and the next page in it.
    extent: Option<u32>,
    generation: u64,
    page_in_extent: u32,
    /// The page being filled: its id, its image, and its pinned handle
    /// while a transaction owns the segment (an idle segment pins nothing).
    page: Option<(PageId, Option<PageRef>, Vec<u8>)>,
    offset: usize,
    /// The pinned handle's frame holds `page`'s image: it was installed
    /// whole since the handle was taken (RBS-9).
    frame_holds_image: bool,
    /// The transaction already counted as a writer of `extent`.
    registered: Option<u64>,
    /// The extents the owning transaction is counted as a writer of, so
    /// that its end visits those alone, not every extent of the space
    /// (RBS-8).
    writer_extents: Vec<u32>,
}

/// The space-wide view of a segment, behind the space's lock.
struct SegmentSlot {
    owner: Option<u64>,
    /// The segment-table entry: current extent and page in it.
    table_extent: Option<u32>,
    table_page: u32,
    /// Extents this segment filled, oldest first, awaiting reuse.
    written: Vec<u32>,
    segment: Arc<RtMutex<Segment>>,
}

/// A transaction's hold on the segment [`RollbackSpace::assign`] gave it:
/// the segment's index and its lock, so that appends and the release reach
/// the segment without the space's lock (RBS-6). A slot's segment never
/// changes once made (slots are reused, not replaced), so the handle stays
/// valid for the life of the space.
#[derive(Clone)]
pub struct SegmentRef {
    index: usize,
    segment: Arc<RtMutex<Segment>>,
}

#[derive(Default, Clone)]
struct Extent {
    generation: u64,
    /// Transactions that wrote here and have not ended.
    writers: BTreeSet<u64>,
    /// Latest commit of a transaction that wrote here.
    max_commit_ts: u64,
    /// When the extent was filled (retention counts from then).
    retired_at_ns: u64,
    retired: bool,
}

struct State {
    segments: Vec<SegmentSlot>,
    /// Every extent ever taken, by extent number (an aged space leaves
    /// untaken numbers below the highest as never-used entries).
    extents: Vec<Extent>,
    /// Aged space: the order fresh extents are taken in (RBS-7).
    fresh_order: Vec<u32>,
    free_extents: BTreeSet<u32>,
    /// Full extents, in the order they filled.
    retired: VecDeque<u32>,
    stats: RollbackStats,
}

/// The rollback space of a database. See the module documentation.
pub struct RollbackSpace {
    pool: Arc<BufferPool>,
    device: Arc<CountingDevice>,
    page_bytes: usize,
    pages_per_extent: u32,
    extents_max: u32,
    /// Bookkeeping only: never held across a buffer fetch or device I/O
    /// (RBS-6).
    state: RtMutex<State>,
    /// Serialises segment-table writes, so the newest image is written last.
    table_write: RtMutex<()>,
    records_written: AtomicU64,
    bytes_written: AtomicU64,
}

impl RollbackSpace {
    /// Start an empty rollback space on `device` (any previous contents are
    /// discarded: rollback segments do not survive a restart).
    pub fn open(
        pool: Arc<BufferPool>,
        device: DeviceRef,
        extent_bytes: u64,
        aged_span_bytes: u64,
    ) -> Result<RollbackSpace> {
        let page_bytes = pool.page_bytes();
        if extent_bytes < page_bytes as u64 * 2 || !extent_bytes.is_multiple_of(page_bytes as u64) {
            return Err(Error::Config(format!(
                "rollback extent of {extent_bytes} bytes must be a multiple of the {page_bytes}-byte page, at least two pages"
            )));
        }
        let pages_per_extent = (extent_bytes / page_bytes as u64) as u32;
        let pages = device.capacity_bytes() / page_bytes as u64;
        let extents_max = (pages.saturating_sub(u64::from(METADATA_PAGES))
            / u64::from(pages_per_extent))
        .min(u64::from(u32::MAX)) as u32;
        let addressable = (ADDRESS_MASK / page_bytes as u64)
            .saturating_sub(u64::from(METADATA_PAGES))
            / u64::from(pages_per_extent);
        let extents_max = extents_max.min(addressable.min(u64::from(u32::MAX)) as u32);
        if extents_max == 0 {
            return Err(Error::Config(format!(
                "rollback device '{}' is too small for one extent",
                device.name()
            )));
        }
        let counting = Arc::new(CountingDevice::new(device));
        pool.register_space(ROLLBACK_SPACE, "rollback", counting.clone())?;
        let space = RollbackSpace {
            pool,
            device: counting,
            page_bytes,
            pages_per_extent,
            extents_max,
            state: RtMutex::new(State {
                segments: Vec::new(),
                extents: Vec::new(),
                fresh_order: aged_order(aged_span_bytes / extent_bytes, extents_max),
                free_extents: BTreeSet::new(),
                retired: VecDeque::new(),
                stats: RollbackStats::default(),
            }),
            table_write: RtMutex::new(()),
            records_written: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
        };
        space.write_header(extent_bytes)?;
        Ok(space)
    }

    fn write_header(&self, extent_bytes: u64) -> Result<()> {
        let mut image = vec![0u8; self.page_bytes];
        let b = PAGE_HEADER_BYTES;
        image[b..b + 4].copy_from_slice(MAGIC);
        image[b + 4..b + 12].copy_from_slice(&extent_bytes.to_le_bytes());
        self.write_metadata_page(0, image)
    }

    fn write_metadata_page(&self, page_no: u32, mut image: Vec<u8>) -> Result<()> {
        page::set_id(&mut image, PageId::new(ROLLBACK_SPACE, page_no));
        page::set_page_type(&mut image, PageType::Rollback);
        page::seal(&mut image);
        self.device
            .write(u64::from(page_no) * self.page_bytes as u64, &image)?;
        Ok(())
    }

    /// Rewrite the segment-table page holding `segment` in place. Takes
    /// the space's lock only to copy the entries; the write happens under
    /// `table_write` alone, so the table pages are written in the order
    /// their contents were copied.
    fn write_segment_entry(&self, segment: usize) -> Result<()> {
        let per_page = (self.page_bytes - PAGE_HEADER_BYTES) / SEGMENT_ENTRY_BYTES;
        let table_page = 1 + segment / per_page;
        if table_page as u32 >= METADATA_PAGES {
            return Ok(()); // the table is full; segments beyond it live in memory only
        }
        let _writing = self.table_write.lock();
        let mut image = vec![0u8; self.page_bytes];
        let first = (table_page - 1) * per_page;
        {
            let st = self.state.lock();
            for (i, s) in st.segments.iter().enumerate().skip(first).take(per_page) {
                let at = PAGE_HEADER_BYTES + (i - first) * SEGMENT_ENTRY_BYTES;
                image[at..at + 4].copy_from_slice(&(i as u32).to_le_bytes());
                image[at + 4..at + 8]
                    .copy_from_slice(&s.table_extent.unwrap_or(u32::MAX).to_le_bytes());
                image[at + 8..at + 12].copy_from_slice(&s.table_page.to_le_bytes());
                image[at + 12..at + 16].copy_from_slice(&(s.written.len() as u32).to_le_bytes());
            }
        }
        self.write_metadata_page(table_page as u32, image)
    }

    /// Give `txn` a segment of its own (RBS-1).
    pub fn assign(&self, txn: u64) -> Result<SegmentRef> {
        let (index, segment) = {
            let mut st = self.state.lock();
            if let Some(i) = st.segments.iter().position(|s| s.owner.is_none()) {
                st.segments[i].owner = Some(txn);
                return Ok(SegmentRef {
                    index: i,
                    segment: st.segments[i].segment.clone(),
                });
            }
            let segment = Arc::new(RtMutex::new(Segment::default()));
            st.segments.push(SegmentSlot {
                owner: Some(txn),
                table_extent: None,
                table_page: 0,
                written: Vec::new(),
                segment: segment.clone(),
            });
            st.stats.segments += 1;
            (st.segments.len() - 1, segment)
        };
        self.write_segment_entry(index)?;
        Ok(SegmentRef { index, segment })
    }

    /// The transaction owning `segment` ended at timestamp `ended_at_ts`
    /// (its commit, or for a rollback the latest timestamp handed out):
    /// record it with the extents it wrote.
    pub fn release(&self, segment: &SegmentRef, txn: u64, ended_at_ts: u64) {
        let now = Rt::now_ns_current();
        let written = {
            let mut seg = segment.segment.lock();
            seg.registered = None;
            if let Some((_, handle, _)) = seg.page.as_mut() {
                *handle = None; // an idle segment pins no frame
            }
            seg.frame_holds_image = false;
            std::mem::take(&mut seg.writer_extents)
        };
        let mut st = self.state.lock();
        let extents: Vec<usize> = written.into_iter().map(|e| e as usize).collect();
        debug_assert!(
            st.extents
                .iter()
                .enumerate()
                .all(|(i, e)| !e.writers.contains(&txn) || extents.contains(&i)),
            "RBS-8: transaction {txn} is a writer of an extent its segment did not record"
        );
        for index in extents {
            let extent = &mut st.extents[index];
            if extent.writers.remove(&txn) {
                // Snapshots older than the end may still need these
                // versions (an aborted writer's too: a reader may have read
                // its version before the undo), and retention counts from
                // when the versions were replaced.
                extent.max_commit_ts = extent.max_commit_ts.max(ended_at_ts);
                if extent.retired {
                    extent.retired_at_ns = extent.retired_at_ns.max(now);
                }
            }
        }
        if let Some(s) = st.segments.get_mut(segment.index) {
            debug_assert_eq!(s.owner, Some(txn), "RBS-1");
            s.owner = None;
        }
    }

    /// Append a before-image to `segment`; returns its rollback pointer and
    /// the page the append filled, if any, which the caller must pass to
    /// [`RollbackSpace::write_filled`] once it holds no latch (the write
    /// takes device time).
    pub fn append(
        &self,
        segment: &SegmentRef,
        txn: u64,
        header: VersionHeader,
        row: &[u8],
        reclaim: &dyn Fn() -> Reclaim,
    ) -> Result<(u64, Option<PageId>)> {
        let record_bytes = RECORD_LEN_BYTES + crate::row::VERSION_HEADER_BYTES + row.len();
        if record_bytes > self.page_bytes - PAGE_HEADER_BYTES {
            return Err(Error::TooLarge(format!(
                "a before-image of {} bytes does not fit a rollback page",
                row.len()
            )));
        }
        // RBS-6: only the segment's lock is held across the buffer pool's
        // fetches below; the space's lock is taken for bookkeeping alone.
        let mut seg = segment.segment.lock();
        let needs_page = seg.page.is_none() || seg.offset + record_bytes > self.page_bytes;
        let filled = if needs_page {
            self.next_page(&mut seg, segment.index, reclaim)?
        } else {
            None
        };
        let extent = seg.extent.expect("a segment with a page has an extent");
        if seg.registered != Some(txn) {
            let mut st = self.state.lock();
            st.extents[extent as usize].writers.insert(txn);
            drop(st);
            seg.registered = Some(txn);
            seg.writer_extents.push(extent);
        }
        let generation = seg.generation;
        let seg = &mut *seg;
        let (id, handle, image) = seg.page.as_mut().expect("current page");
        if handle.is_none() {
            *handle = Some(self.pool.fetch(*id)?);
        }
        let at = seg.offset;
        image[at..at + 4].copy_from_slice(&(row.len() as u32).to_le_bytes());
        image[at + 4..at + 20].copy_from_slice(&header.encode());
        image[at + 20..at + 20 + row.len()].copy_from_slice(row);
        // Not logged, and not to be written before it is full (RBS-5). The
        // first install through a handle is of the whole image; after it
        // the frame holds the image but for the new record (RBS-9).
        let handle = handle.as_ref().expect("pinned");
        match seg.frame_holds_image {
            false => handle.install_append(image),
            true => handle.install_append_range(image, at..at + record_bytes),
        }
        seg.frame_holds_image = true;
        seg.offset += record_bytes;
        let address = u64::from(id.page_no) * self.page_bytes as u64 + at as u64;
        self.records_written.fetch_add(1, Ordering::Relaxed);
        self.bytes_written
            .fetch_add(record_bytes as u64, Ordering::Relaxed);
        debug_assert!(address <= ADDRESS_MASK);
        Ok((
            ((generation & GENERATION_MASK) << ADDRESS_BITS) | address,
            filled,
        ))
    }

    /// Make `segment` ready for an append of a `row_bytes` row without a
    /// buffer miss: its current page pinned, with room for the record, or
    /// else its next page taken now. Called with no latch held (DB-5), so
    /// that [`RollbackSpace::append`] under a tree latch fetches nothing.
    /// Returns a page this filled, for [`RollbackSpace::write_filled`]. A
    /// row too large for a page is left to `append` to refuse.
    pub fn prepare(
        &self,
        segment: &SegmentRef,
        row_bytes: usize,
        reclaim: &dyn Fn() -> Reclaim,
    ) -> Result<Option<PageId>> {
        let record_bytes = RECORD_LEN_BYTES + crate::row::VERSION_HEADER_BYTES + row_bytes;
        if record_bytes > self.page_bytes - PAGE_HEADER_BYTES {
            return Ok(None);
        }
        let mut seg = segment.segment.lock();
        if seg.page.is_none() || seg.offset + record_bytes > self.page_bytes {
            return self.next_page(&mut seg, segment.index, reclaim);
        }
        if let Some((id, handle, _)) = seg.page.as_mut()
            && handle.is_none()
        {
            *handle = Some(self.pool.fetch(*id)?);
        }
        Ok(None)
    }

    /// Write a page a segment has filled (see [`RollbackSpace::append`]).
    pub fn write_filled(&self, page: Option<PageId>) -> Result<()> {
        if let Some(id) = page {
            self.pool.write_back_page(id)?;
        }
        Ok(())
    }

    /// Move a segment to its next page, taking a new extent when its
    /// current one is full.
    /// Returns the page just filled, if any, for the caller to write.
    fn next_page(
        &self,
        seg: &mut Segment,
        segment: usize,
        reclaim: &dyn Fn() -> Reclaim,
    ) -> Result<Option<PageId>> {
        let extent_full = seg.extent.is_none() || seg.page_in_extent >= self.pages_per_extent;
        if extent_full {
            // Take the new extent first: if none is free the segment keeps
            // its old one, not yet retired (RBS-3). The reclaim horizon is
            // computed before the space's lock is taken.
            let horizon = reclaim();
            let (extent, generation) = {
                let mut st = self.state.lock();
                let extent = self.take_extent(&mut st, &horizon)?;
                if let Some(old) = seg.extent {
                    let now = Rt::now_ns_current();
                    let e = &mut st.extents[old as usize];
                    e.retired = true;
                    e.retired_at_ns = now;
                    st.retired.push_back(old);
                    st.segments[segment].written.push(old);
                }
                let slot = &mut st.segments[segment];
                slot.table_extent = Some(extent);
                slot.table_page = 0;
                (extent, st.extents[extent as usize].generation)
            };
            seg.extent = Some(extent);
            seg.generation = generation;
            seg.page_in_extent = 0;
            seg.registered = None;
            self.write_segment_entry(segment)?;
        }
        let extent = seg.extent.expect("extent");
        let page_no = METADATA_PAGES + extent * self.pages_per_extent + seg.page_in_extent;
        seg.page_in_extent += 1;
        // A filled page is sealed, then written at once (by the caller,
        // outside the lock): each segment reaches the device as an
        // append-only stream (lee2008 Figure 4(b)), each page once (RBS-5).
        let filled = seg.page.take().map(|(full, _, _)| full);
        if let Some(full) = filled {
            self.pool.seal_append(full);
        }
        let id = PageId::new(ROLLBACK_SPACE, page_no);
        let handle = match self.pool.fetch_new(id) {
            Ok(handle) => handle,
            // The page of a reused extent may still be dirty in the pool.
            Err(_) => self.pool.fetch(id)?,
        };
        let mut image = vec![0u8; self.page_bytes];
        page::set_page_type(&mut image, PageType::Rollback);
        seg.page = Some((id, Some(handle), image));
        seg.frame_holds_image = false;
        seg.offset = PAGE_HEADER_BYTES;
        Ok(filled)
    }

    /// A free extent: a reusable one first (RBS-3), else a new one.
    fn take_extent(&self, st: &mut State, horizon: &Reclaim) -> Result<u32> {
        if st.free_extents.is_empty() {
            self.reclaim(st, horizon);
        }
        if let Some(extent) = st.free_extents.pop_first() {
            let e = &mut st.extents[extent as usize];
            e.generation += 1;
            e.retired = false;
            e.max_commit_ts = 0;
            st.stats.extents_reused += 1;
            return Ok(extent);
        }
        let taken = st.stats.extents_allocated;
        if taken >= u64::from(self.extents_max) {
            return Err(Error::SpaceFull(format!(
                "rollback space '{}' is full: all {} extents hold versions that active snapshots or the retention window need",
                self.device.name(),
                self.extents_max
            )));
        }
        // RBS-7: an aged space takes fresh extents in its shuffled order.
        let next = st
            .fresh_order
            .get(taken as usize)
            .copied()
            .unwrap_or(taken as u32);
        if st.extents.len() <= next as usize {
            st.extents.resize_with(next as usize + 1, Extent::default);
        }
        st.stats.extents_allocated += 1;
        Ok(next)
    }

    /// Free the retired extents nobody can need any more.
    fn reclaim(&self, st: &mut State, r: &Reclaim) {
        let mut keep = VecDeque::new();
        while let Some(extent) = st.retired.pop_front() {
            let e = &st.extents[extent as usize];
            let needed = !e.writers.is_empty()
                || e.max_commit_ts > r.oldest_snapshot
                || e.retired_at_ns + r.retention_ns > r.now_ns;
            if needed {
                keep.push_back(extent);
            } else {
                st.free_extents.insert(extent);
                for seg in &mut st.segments {
                    seg.written.retain(|&x| x != extent);
                }
            }
        }
        st.retired = keep;
    }

    /// Read the before-image at `pointer`: its version header and row, or
    /// `None` if its extent was reused (RBS-4).
    pub fn read(&self, pointer: u64) -> Result<Option<(VersionHeader, Vec<u8>)>> {
        let address = pointer & ADDRESS_MASK;
        let generation = (pointer >> ADDRESS_BITS) & GENERATION_MASK;
        let page_no = (address / self.page_bytes as u64) as u32;
        let at = (address % self.page_bytes as u64) as usize;
        if page_no < METADATA_PAGES {
            return Err(Error::malformed(
                "rollback pointer",
                format!("{pointer:#x} points into the metadata region"),
            ));
        }
        let extent = (page_no - METADATA_PAGES) / self.pages_per_extent;
        {
            let mut st = self.state.lock();
            st.stats.versions_read += 1;
            let current = st
                .extents
                .get(extent as usize)
                .map(|e| e.generation & GENERATION_MASK);
            if current != Some(generation) {
                st.stats.snapshot_too_old += 1;
                return Ok(None);
            }
        }
        let handle = self.pool.fetch(PageId::new(ROLLBACK_SPACE, page_no))?;
        handle
            .read(|bytes| decode_record(bytes, at, pointer))
            .map(Some)
    }

    /// Note a chain walk of `steps` versions.
    pub fn note_chain(&self, steps: u64) {
        let mut st = self.state.lock();
        st.stats.chains += 1;
        st.stats.chain_steps += steps;
        st.stats.chain_max = st.stats.chain_max.max(steps);
    }

    pub fn stats(&self) -> RollbackStats {
        let st = self.state.lock();
        let mut stats = st.stats.clone();
        stats.records_written = self.records_written.load(Ordering::Relaxed);
        stats.bytes_written = self.bytes_written.load(Ordering::Relaxed);
        stats.extents_in_use = st.stats.extents_allocated - st.free_extents.len() as u64;
        stats.pages_read = self.device.reads.load(Ordering::Relaxed);
        stats.read_ns = self.device.read_ns.load(Ordering::Relaxed);
        stats
    }
}

/// What extent reuse needs to know (computed by the caller, who owns the
/// snapshots).
pub struct Reclaim {
    pub oldest_snapshot: u64,
    pub now_ns: u64,
    pub retention_ns: u64,
}

fn decode_record(page: &[u8], at: usize, pointer: u64) -> Result<(VersionHeader, Vec<u8>)> {
    let bad = || {
        Error::malformed(
            "rollback record",
            format!("pointer {pointer:#x} does not hold a record"),
        )
    };
    let len_bytes = page.get(at..at + RECORD_LEN_BYTES).ok_or_else(bad)?;
    let len = u32::from_le_bytes(len_bytes.try_into().map_err(|_| bad())?) as usize;
    let start = at + RECORD_LEN_BYTES;
    let header_end = start + crate::row::VERSION_HEADER_BYTES;
    let end = header_end.checked_add(len).ok_or_else(bad)?;
    let header_bytes = page.get(start..header_end).ok_or_else(bad)?;
    let (header, _) = VersionHeader::split(header_bytes)?;
    let row = page.get(header_end..end).ok_or_else(bad)?.to_vec();
    Ok((header, row))
}

/// The order an aged space takes its first `span_extents` fresh extents
/// in (at most `extents_max`): a Fisher-Yates shuffle driven by a fixed
/// splitmix64 stream, so every database ages the same way (determinism).
fn aged_order(span_extents: u64, extents_max: u32) -> Vec<u32> {
    let n = span_extents
        .min(u64::from(extents_max))
        .min(AGED_EXTENTS_MAX) as u32;
    let mut order: Vec<u32> = (0..n).collect();
    let mut state: u64 = 0x5EED_A6ED;
    for i in (1..order.len()).rev() {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        order.swap(i, (z % (i as u64 + 1)) as usize);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aged_order_is_a_fixed_shuffle_of_the_span() {
        let order = aged_order(1024, 100_000);
        assert_eq!(order, aged_order(1024, 100_000), "deterministic");
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..1024).collect::<Vec<u32>>(), "a permutation");
        assert_ne!(order, sorted, "shuffled");
        // The first few extents land far apart, not side by side.
        let spread = order[..8].iter().max().unwrap() - order[..8].iter().min().unwrap();
        assert!(spread > 256, "{:?}", &order[..8]);
        assert_eq!(aged_order(1024, 10).len(), 10, "never past the space");
        assert!(aged_order(0, 10).is_empty(), "off");
    }
}
