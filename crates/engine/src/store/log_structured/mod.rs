//! # The log-structured page store (wang2010's NILFS2, Rosenblum & Ousterhout's LFS)
//!
//! Pages are never overwritten. A page handed to [`PageStore::write_page`]
//! joins the *open partial segment* in memory; when that is full (or at
//! [`PageStore::sync`]) it is written at the head of the log in one
//! sequential request: a *summary* block (which page version each block
//! holds) followed by the page blocks. The log is a sequence of *segments*
//! of `segment_bytes` (wang2010's NILFS2: 2,048 blocks of 4 KB, the
//! default here); a segment holds partial segments back to back, and when
//! it is full the log continues in the next free segment. The *page map*
//! (page number → block) lives in memory; it is made durable by *map
//! checkpoints*, written at every `sync` (each engine checkpoint) and
//! whenever the store needs space back, each into both of two slots (slot
//! 0, flush, slot 1, flush), so a finished checkpoint survives damage to
//! one copy and a crash between the two leaves a whole copy of it or of
//! the one before (whose `sync` never returned). After a
//! crash, the open finds the newest valid map checkpoint and *rolls
//! forward* over the partial segments written after it, in the order they
//! were written, taking each page's newest version that verifies; a torn
//! tail is where the roll-forward ends (the engine's log redoes what the
//! store had not synced: the engine's checkpoint syncs the store before it
//! records that pages need no redo).
//!
//! **Segment cleaning** copies the live pages of victim segments to the
//! head so the victims can be reused. Victims are chosen *greedy* (fewest
//! live pages) or *cost-benefit* (Rosenblum & Ousterhout: the largest
//! (1 − u) · age / (1 + u), u the segment's utilisation, age the number of
//! partial segments written since its last one), or cleaning is *off* as in
//! wang2010's analysis: then only segments whose every page was superseded
//! are reused, and a space whose segments are all in use is full
//! ([`crate::error::Error::SpaceFull`], naming the space).
//!
//! **When a segment may be reused.** A segment is written again only once
//! no durable state can need what it holds: the pages it held have newer
//! versions (written by the engine or copied by the cleaner) *and* map
//! checkpoints naming those versions are durable. Until then a crash would
//! leave the map pointing at overwritten blocks, or the engine's redo
//! without its base image. A segment with no live page at a durable map
//! checkpoint becomes *pending*; still dead at the next one, *reusable*:
//! so the previous checkpoint too, and the partial segments its
//! roll-forward reads, stay intact. Each checkpoint records the two sets,
//! and the log takes reusable segments in a fixed order (the next higher
//! number, wrapping), which the roll-forward repeats.
//!
//! Files: `layout.rs` (the blocks, byte by byte), `state.rs` (the map,
//! segment usage, allocation, victim choice), `open.rs` (format, the
//! choice of map checkpoint, roll-forward), `clean.rs` (cleaning), and
//! `check.rs` (`flashlab check`: the map against the segments).
//!
//! Invariants (LFS-n, asserted where they can be):
//! 1. A mapped page's block holds that page: its summary entry names it, and
//!    the block's checksum, page number and LSN are the entry's (checked at
//!    roll-forward and by `flashlab check`).
//! 2. `live[s]` is the number of map entries pointing into segment `s`;
//!    `sum(live)` is the number of mapped pages (`State::check`).
//! 3. A segment is reusable only if it had no live page at the last two
//!    durable map checkpoints and is not the head's; a segment is written
//!    only after it was taken from the reusable set (or is the head's).
//! 4. Partial segments carry consecutive sequence numbers and the sequence
//!    number of the map checkpoint they follow (their *epoch*); the
//!    roll-forward accepts only the next number of the checkpoint's epoch
//!    at the next position, so a leftover of an earlier lap is never taken.
//! 5. A block address is within the segment area and a partial segment never
//!    crosses its segment's end.
//! 6. Every device write and flush of the store happens under its writer
//!    lock (a runtime mutex); the state lock (a `std` mutex) is never held
//!    across I/O (SIM-7).
//! 7. A failed device write stops the store until a reopen and fails the
//!    engine's log (WAL-4): no commit is acknowledged after it, and recovery
//!    rebuilds what the partial segment in doubt held from the log.
//! 8. With cleaning on, an ordinary append never takes the last
//!    [`CLEAN_COPY_RESERVE_SEGMENTS`] reusable segments: only the cleaner's
//!    copies do. A store whose cleaning fell behind (segments it cannot
//!    read) then refuses writes while the cleaner still has room, and a
//!    reopen can clean again (simtest log-structured seed 3392).
//! 9. A map checkpoint is written first into a slot that does not hold the
//!    newest valid checkpoint: while one slot is being written, the other
//!    holds a whole copy of the newest durable checkpoint. After an open
//!    that found one slot torn, damaged or older, that slot is written
//!    first; writing the other slot first would leave, if cut, no valid
//!    copy at all (simtest log-structured seed 14766).
//! 10. The cleaner copies only sound pages, and a victim only whole: every
//!     live page of a victim is read and verified (its checksum, its page
//!     number; read twice) before any is copied. A victim with a page that
//!     cannot be read or fails is left as it is and not chosen again (a
//!     copy would pass damage, and a garbled LSN, off as a new page
//!     version: simtest log-structured seed 10550; copying part of a
//!     victim spends free blocks without freeing one, and recoveries then
//!     found every segment holding live pages: seeds 22585 and 32531).
//! 11. Zeros are damage once the database exists: an open of a store
//!     whose database finished its creation refuses an all-zero superblock
//!     or two all-zero map-checkpoint headers, naming the block, instead
//!     of formatting the store anew (which lost every table).

mod check;
mod clean;
pub mod layout;
mod open;
mod state;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use flashlab_devices::DeviceRef;
use serde::{Deserialize, Serialize};

use super::{PageStore, StoreInfo, StoreKind, StoreStats};
use crate::error::{Error, Result};
use crate::force::LogForce;
use crate::page::PageNo;
use layout::Superblock;
use state::State;

/// Default segment size: wang2010's NILFS2 segments of 2,048 blocks of 4 KB.
pub const SEGMENT_BYTES_DEFAULT: u64 = 8 << 20;
/// Fewest blocks (of the page size) in a segment.
pub const SEGMENT_BLOCKS_MIN: u64 = 8;
/// Most bytes in a segment.
pub const SEGMENT_BYTES_MAX: u64 = 256 << 20;
/// Fewest segments a device must hold.
pub const SEGMENTS_MIN: u64 = 8;
/// Segments kept out of the space's capacity, for cleaning to copy into.
pub const CLEAN_RESERVE_SEGMENTS: u64 = 2;
/// Most of the segments' data blocks (percent) the page map may fill: the
/// rest keeps cleaning productive.
pub const LIVE_PERCENT_MAX: u64 = 80;
/// Most bytes of pages gathered in the open partial segment before it is
/// written (one device request).
pub const PARTIAL_SEGMENT_BYTES_MAX: usize = 1 << 20;
/// Reusable segments only the cleaner's copies may take (LFS-8): without
/// one, a store whose cleaning fell behind (segments it cannot read, say)
/// could fill its last block and never clean again, not even in recovery.
pub const CLEAN_COPY_RESERVE_SEGMENTS: usize = 1;
/// Cleaning starts when this few segments are reusable.
pub const CLEAN_START_SEGMENTS: usize = 3;
/// Most victims one cleaning pass copies before its map checkpoint.
pub const CLEAN_BATCH_SEGMENTS: usize = 4;
/// Map-checkpoint slots (each checkpoint is written into both).
pub const MAP_SLOTS: u64 = 2;
/// Most times a read retries after its block was reused under it.
const READ_RETRIES_MAX: usize = 64;

/// How segment cleaning chooses victims (config key `cleaning`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cleaning {
    /// No cleaning: only wholly superseded segments are reused.
    Off,
    /// The segment with the fewest live pages.
    #[default]
    Greedy,
    /// Rosenblum & Ousterhout's (1 − u) · age / (1 + u).
    CostBenefit,
}

impl Cleaning {
    pub fn name(self) -> &'static str {
        match self {
            Cleaning::Off => "off",
            Cleaning::Greedy => "greedy",
            Cleaning::CostBenefit => "cost-benefit",
        }
    }

    pub fn names() -> &'static [&'static str] {
        &["off", "greedy", "cost-benefit"]
    }

    pub fn parse(name: &str) -> Option<Cleaning> {
        match name {
            "off" => Some(Cleaning::Off),
            "greedy" => Some(Cleaning::Greedy),
            "cost-benefit" => Some(Cleaning::CostBenefit),
            _ => None,
        }
    }
}

/// The options of a log-structured data space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogStructuredOptions {
    pub segment_bytes: u64,
    pub cleaning: Cleaning,
    /// Write every page at once as a partial segment of its own (its
    /// summary block and the page), as a log-structured file system does
    /// for a synchronous write (wang2010's server wrote with synchronous
    /// I/O). Off: pages gather up to [`PARTIAL_SEGMENT_BYTES_MAX`].
    /// Durability still comes at `sync` either way.
    pub write_through: bool,
    /// The database finished its creation (its first checkpoint is in the
    /// master record), so this store's superblock and first map
    /// checkpoint were written and flushed: zeros there are damage
    /// (LFS-11), never a creation cut short.
    pub created: bool,
}

impl Default for LogStructuredOptions {
    fn default() -> Self {
        LogStructuredOptions {
            segment_bytes: SEGMENT_BYTES_DEFAULT,
            cleaning: Cleaning::default(),
            write_through: false,
            created: false,
        }
    }
}

/// Check a segment size against a page size; the error names the space.
pub fn validate_segment_bytes(space: &str, segment_bytes: u64, page_bytes: usize) -> Result<()> {
    let page = page_bytes as u64;
    if !segment_bytes.is_multiple_of(page)
        || segment_bytes / page < SEGMENT_BLOCKS_MIN
        || segment_bytes > SEGMENT_BYTES_MAX
    {
        return Err(Error::Config(format!(
            "data space '{space}': segment_bytes {segment_bytes} must be a multiple of the \
             {page_bytes}-byte page, at least {SEGMENT_BLOCKS_MIN} pages and at most \
             {SEGMENT_BYTES_MAX} bytes"
        )));
    }
    Ok(())
}

/// What the store counted (see [`StoreStats`]).
#[derive(Default)]
struct Counters {
    pages_written: AtomicU64,
    device_bytes_written: AtomicU64,
    device_writes: AtomicU64,
    metadata_bytes_written: AtomicU64,
    segments_cleaned: AtomicU64,
    pages_copied: AtomicU64,
    map_checkpoints: AtomicU64,
    cleaning_passes: AtomicU64,
    cleaning_passes_finished: AtomicU64,
}

/// See the module documentation.
pub struct LogStructuredStore {
    device: DeviceRef,
    space: String,
    page_bytes: usize,
    geo: Superblock,
    cleaning: Cleaning,
    /// Each page written at once as its own partial segment.
    write_through: bool,
    /// Most pages of one partial segment (the buffer limit and the summary's
    /// capacity).
    partial_pages_max: usize,
    /// The engine's log, for device flushes (WAL-4); attached after open.
    log: OnceLock<Arc<dyn LogForce>>,
    /// Held across every device write and flush of the store (LFS-6).
    writer: flashlab_runtime::Mutex<()>,
    state: std::sync::Mutex<State>,
    counters: Counters,
}

// `LogStructuredStore::open` is in open.rs.
impl LogStructuredStore {
    /// The engine's log, through which the store flushes its device once
    /// open (WAL-4); set by [`super::open_store_with`].
    pub(crate) fn attach_log(&self, log: Arc<dyn LogForce>) {
        let _ = self.log.set(log);
    }

    fn block_offset(&self, block: u64) -> u64 {
        block * self.page_bytes as u64
    }

    fn lock_state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("log-structured store state")
    }

    /// Flush the device, through the engine's log once attached (WAL-4).
    fn flush_device(&self) -> Result<()> {
        match self.log.get() {
            Some(log) => log.flush_device(&self.device),
            None => Ok(self.device.flush()?),
        }
    }

    /// Write `bytes` at `block`, counted. A failure stops the store and,
    /// once the engine's log is attached, fails it (WAL-4, LFS-7): the
    /// open partial segment is in doubt, so the database stops
    /// acknowledging commits it could not checkpoint, until a reopen
    /// recovers them from the log.
    fn device_write(&self, block: u64, bytes: &[u8], metadata_bytes: usize) -> Result<()> {
        if let Err(e) = self.device.write(self.block_offset(block), bytes) {
            let e = Error::from(e);
            self.lock_state().failed = Some(e.to_string());
            return Err(match self.log.get() {
                Some(log) => log.fail(format!(
                    "data space '{}': a write of the log-structured store failed: {e}",
                    self.space
                )),
                None => e,
            });
        }
        let c = &self.counters;
        c.device_writes.fetch_add(1, Ordering::Relaxed);
        c.device_bytes_written
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        c.metadata_bytes_written
            .fetch_add(metadata_bytes as u64, Ordering::Relaxed);
        Ok(())
    }

    fn check_failed(&self) -> Result<()> {
        match &self.lock_state().failed {
            Some(why) => Err(Error::LogFailed(format!(
                "data space '{}': the log-structured store stopped after a failed write ({why}); reopen the database",
                self.space
            ))),
            None => Ok(()),
        }
    }

    /// Append one page image to the open partial segment (writing it out
    /// when full). Called with the writer lock held.
    fn append(&self, page_no: PageNo, image: &[u8]) -> Result<bool> {
        self.ensure_open()?;
        let full = {
            let mut st = self.lock_state();
            st.append(&self.geo, page_no, image, self.partial_pages_max)
        };
        if full {
            self.write_partial()?;
        }
        Ok(full)
    }

    /// Make sure the open partial segment has a place (allocating the next
    /// segment, or making room). Writer lock held.
    fn ensure_open(&self) -> Result<()> {
        loop {
            let mut st = self.lock_state();
            // LFS-8: ordinary appends leave the last reusable segment to
            // the cleaner's copies.
            let kept = match self.cleaning != Cleaning::Off && !st.cleaning_now {
                true => CLEAN_COPY_RESERVE_SEGMENTS,
                false => 0,
            };
            if st.place_open(&self.geo, kept) {
                return Ok(());
            }
            drop(st);
            self.make_room()?;
        }
    }

    /// No segment is reusable: a map checkpoint frees the dead ones; else
    /// cleaning; else the space is full. Writer lock held.
    fn make_room(&self) -> Result<()> {
        if self.lock_state().dead_segments(&self.geo) > 0 {
            return self.checkpoint_map();
        }
        let cleaning = self.lock_state().cleaning_now;
        if self.cleaning != Cleaning::Off && !cleaning && self.clean()? {
            return Ok(());
        }
        let st = self.lock_state();
        if !st.unclean.is_empty() {
            // Full because damage at rest keeps segments from being
            // cleaned: the damage is the cause, and is named.
            return Err(Error::Damaged(format!(
                "data space '{}': log-structured store damaged: {} of its {} segments hold live \
                 pages that cannot be read or fail their checksums, so cleaning cannot reclaim them, and \
                 the rest are full ({} pages mapped)",
                self.space,
                st.unclean.len(),
                self.geo.segments,
                st.mapped_pages()
            )));
        }
        Err(Error::SpaceFull(format!(
            "data space '{}' (log-structured): all {} segments hold live pages ({} pages mapped){}",
            self.space,
            self.geo.segments,
            st.mapped_pages(),
            if self.cleaning == Cleaning::Off {
                "; segment cleaning is off"
            } else {
                "; cleaning found no segment to reclaim"
            }
        )))
    }

    /// Write the open partial segment (summary and pages) in one request.
    /// Writer lock held.
    fn write_partial(&self) -> Result<()> {
        let Some((block, bytes)) = self.lock_state().take_partial(&self.geo, self.page_bytes)
        else {
            return Ok(());
        };
        self.device_write(block, &bytes, self.page_bytes)?;
        self.lock_state().in_flight = None;
        Ok(())
    }

    /// Make everything written durable and write a map checkpoint, one
    /// copy into each slot, each flushed before the next, a slot without
    /// the newest valid checkpoint first (LFS-9):
    /// when this returns both slots hold it, so damage to one copy at rest
    /// leaves the other, and a crash between them leaves one whole copy of
    /// this or of the previous checkpoint (whose sync never returned).
    /// Then dead segments move towards reuse (LFS-3). Writer lock held.
    fn checkpoint_map(&self) -> Result<()> {
        self.write_partial()?;
        self.flush_device()?;
        let checkpoint = self.lock_state().map_checkpoint();
        let bytes = checkpoint.encode(self.page_bytes);
        assert!(
            bytes.len() as u64 <= u64::from(self.geo.map_blocks) * self.page_bytes as u64,
            "a map checkpoint fits its slot"
        );
        // LFS-9: a slot without the newest valid checkpoint goes first.
        let first = self.lock_state().stale_map_slot.unwrap_or(0);
        for slot in [first, MAP_SLOTS - 1 - first] {
            self.device_write(self.slot_block(slot), &bytes, bytes.len())?;
            self.flush_device()?;
        }
        let mut st = self.lock_state();
        st.stale_map_slot = None;
        st.checkpointed(&self.geo, checkpoint.seq);
        drop(st);
        self.counters
            .map_checkpoints
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// First block of map-checkpoint slot `slot`.
    fn slot_block(&self, slot: u64) -> u64 {
        1 + slot * u64::from(self.geo.map_blocks)
    }

    /// The store's geometry (for tests and reports).
    pub fn superblock(&self) -> Superblock {
        self.geo
    }

    /// Segments reusable now (for tests).
    pub fn reusable_segments(&self) -> usize {
        self.lock_state().reusable.len()
    }
}

impl PageStore for LogStructuredStore {
    fn info(&self) -> StoreInfo {
        StoreInfo {
            kind: StoreKind::LogStructured,
            page_bytes: self.page_bytes,
            capacity_pages: u64::from(self.geo.capacity_pages),
        }
    }

    fn device(&self) -> &DeviceRef {
        &self.device
    }

    fn read_page(&self, page_no: PageNo, buf: &mut [u8]) -> Result<()> {
        debug_assert_eq!(buf.len(), self.page_bytes);
        for _ in 0..READ_RETRIES_MAX {
            let (block, generation) = {
                let st = self.lock_state();
                match st.lookup(&self.geo, page_no, buf) {
                    state::Lookup::Done => return Ok(()),
                    state::Lookup::Device { block, generation } => (block, generation),
                }
            };
            self.device.read(self.block_offset(block), buf)?;
            // The block's segment may have been reused while we read
            // (LFS-3 allowed it: the page had moved): look again.
            if self
                .lock_state()
                .still_at(&self.geo, page_no, block, generation)
            {
                return Ok(());
            }
        }
        Err(Error::Open(format!(
            "data space '{}': page {page_no} moved {READ_RETRIES_MAX} times while being read",
            self.space
        )))
    }

    fn write_page(&self, page_no: PageNo, image: &[u8]) -> Result<()> {
        debug_assert_eq!(image.len(), self.page_bytes);
        if u64::from(page_no) >= u64::from(self.geo.capacity_pages) {
            return Err(Error::SpaceFull(format!(
                "data space '{}' (log-structured): page {page_no} is beyond its {} pages",
                self.space, self.geo.capacity_pages
            )));
        }
        let _w = self.writer.lock();
        self.check_failed()?;
        let mut wrote = self.append(page_no, image)?;
        if self.write_through && !wrote {
            self.write_partial()?;
            wrote = true;
        }
        self.counters.pages_written.fetch_add(1, Ordering::Relaxed);
        if wrote && self.cleaning != Cleaning::Off {
            let low = {
                let st = self.lock_state();
                !st.cleaning_now && st.reusable.len() <= CLEAN_START_SEGMENTS
            };
            if low {
                self.clean()?;
            }
        }
        Ok(())
    }

    fn sync(&self, log: &dyn LogForce) -> Result<()> {
        let _w = self.writer.lock();
        self.check_failed()?;
        // The flushes go through the attached log (the engine's, the same
        // as `log` when the engine calls); a store used alone flushes its
        // device directly.
        let _ = log;
        self.checkpoint_map()
    }

    fn stats(&self) -> StoreStats {
        let c = &self.counters;
        StoreStats {
            pages_written: c.pages_written.load(Ordering::Relaxed),
            device_bytes_written: c.device_bytes_written.load(Ordering::Relaxed),
            device_writes: c.device_writes.load(Ordering::Relaxed),
            metadata_bytes_written: c.metadata_bytes_written.load(Ordering::Relaxed),
            segments_cleaned: c.segments_cleaned.load(Ordering::Relaxed),
            pages_copied: c.pages_copied.load(Ordering::Relaxed),
            map_checkpoints: c.map_checkpoints.load(Ordering::Relaxed),
            cleaning_passes: c.cleaning_passes.load(Ordering::Relaxed),
            cleaning_passes_finished: c.cleaning_passes_finished.load(Ordering::Relaxed),
            counters: Vec::new(),
        }
    }

    fn location_of(&self, page_no: PageNo) -> u64 {
        self.block_offset(self.lock_state().block_of(page_no))
    }

    /// Rewrite the superblock with the database's identity and the space's
    /// index, and flush it (the role check compares them at every open).
    fn record_identity(&self, database_id: u64, space_index: u32) -> Result<()> {
        let _w = self.writer.lock(); // LFS-6
        let sb = Superblock {
            identity: Some((database_id, space_index)),
            ..self.geo
        };
        let mut block = vec![0u8; self.page_bytes];
        sb.encode(&mut block);
        self.device_write(0, &block, self.page_bytes)?;
        self.flush_device()
    }

    fn check_layout(&self) -> Result<Vec<String>> {
        let _w = self.writer.lock();
        self.write_partial()?;
        check::check(self)
    }
}
