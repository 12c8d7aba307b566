//! Formatting a log-structured store, and opening one: the superblock, the
//! newest valid map checkpoint, then the roll-forward over the partial
//! segments written after it (LFS-4), and a new map checkpoint of what was
//! found, so that the next partial segments follow a checkpoint of their
//! own and no leftover of the old tail can be taken for theirs.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use flashlab_devices::DeviceRef;

use super::layout::{self, MapCheckpoint, Summary, Superblock};
use super::state::{Geometry, State};
use super::{
    CLEAN_RESERVE_SEGMENTS, Counters, LIVE_PERCENT_MAX, LogStructuredOptions, LogStructuredStore,
    PARTIAL_SEGMENT_BYTES_MAX, SEGMENTS_MIN, validate_segment_bytes,
};
use crate::error::{Error, Result};
use crate::store::StoreMode;

/// The geometry of a new store on `bytes` of device.
pub(super) fn geometry(
    space: &str,
    bytes: u64,
    page_bytes: usize,
    segment_bytes: u64,
) -> Result<Superblock> {
    validate_segment_bytes(space, segment_bytes, page_bytes)?;
    let page = page_bytes as u64;
    let b = segment_bytes / page;
    let total_blocks = (bytes / page).min(u64::from(u32::MAX));
    let too_small = || {
        Error::Config(format!(
            "data space '{space}': {bytes} bytes hold fewer than {SEGMENTS_MIN} segments of \
             {segment_bytes} bytes (log-structured)"
        ))
    };
    let capacity_of = |segments: u64| {
        (segments.saturating_sub(CLEAN_RESERVE_SEGMENTS) * (b - 1) * LIVE_PERCENT_MAX / 100)
            .min(u64::from(u32::MAX))
    };
    // First estimate without the map slots, then the slots for that
    // capacity, then the segments that fit beside them.
    let estimate = total_blocks.saturating_sub(1) / b;
    let map_blocks = layout::map_slot_blocks(page_bytes, estimate, capacity_of(estimate));
    let segments = total_blocks.saturating_sub(1 + 2 * map_blocks) / b;
    if segments < SEGMENTS_MIN {
        return Err(too_small());
    }
    Ok(Superblock {
        page_bytes: page_bytes as u32,
        blocks_per_segment: b as u32,
        segments: segments as u32,
        map_blocks: map_blocks as u32,
        capacity_pages: capacity_of(segments) as u32,
        first_segment_block: 1 + 2 * map_blocks,
        identity: None,
    })
}

impl LogStructuredStore {
    /// Format (`Create`) or open (`Open`: choose the map checkpoint and
    /// roll forward) a log-structured store on `device`.
    pub fn open(
        device: DeviceRef,
        page_bytes: usize,
        capacity_bytes: Option<u64>,
        space: &str,
        mode: StoreMode,
        options: LogStructuredOptions,
    ) -> Result<LogStructuredStore> {
        let bytes = capacity_bytes
            .unwrap_or(u64::MAX)
            .min(device.capacity_bytes());
        let mut block = vec![0u8; page_bytes];
        // A flip on the way reads clean the second time.
        if !read_twice(&device, 0, &mut block, |b| {
            b.iter().all(|&x| x == 0) || layout::sealed(b)
        }) {
            device.read(0, &mut block)?;
        }
        // A device whose creation was cut before its superblock (all zeros):
        // formatted as new; the engine finishes the creation (REC-2). Once the
        // database exists, zeros are damage (LFS-11).
        if mode == StoreMode::Open && options.created && block.iter().all(|&b| b == 0) {
            return Err(Error::Damaged(format!(
                "{}: data space '{space}': block 0 (the log-structured superblock, device offset 0) \
                 is all zeros, but the database exists; nothing was changed",
                device.name()
            )));
        }
        let mode = if block.iter().all(|&b| b == 0) {
            StoreMode::Create
        } else {
            mode
        };
        let geo = match mode {
            StoreMode::Create => geometry(space, bytes, page_bytes, options.segment_bytes)?,
            StoreMode::Open => {
                // LFS-11: once the database exists, a superblock that does not
                // decode is damage, not a space of another store.
                let geo = Superblock::decode(&block, space).map_err(|e| match options.created {
                    true => Error::Damaged(format!(
                        "{}: block 0 (the log-structured superblock) is damaged: {e}; nothing was changed",
                        device.name()
                    )),
                    false => e,
                })?;
                if geo.page_bytes as usize != page_bytes {
                    return Err(Error::Config(format!(
                        "data space '{space}': its log-structured store has {}-byte pages, the configuration {page_bytes}",
                        geo.page_bytes
                    )));
                }
                geo
            }
        };
        let partial_pages_max = (PARTIAL_SEGMENT_BYTES_MAX / page_bytes)
            .min(layout::summary_entries_max(page_bytes))
            .max(1);
        let fresh = MapCheckpoint {
            seq: 0,
            next_partial_seq: 1,
            head_segment: 0,
            head_offset_blocks: 0,
            ages: vec![0; geo.segments as usize],
            flags: fresh_flags(&geo),
            map: Vec::new(),
        };
        let (state, found) = match mode {
            StoreMode::Create => (State::from_checkpoint(&geo, &fresh), None),
            StoreMode::Open => {
                let (cp, newest_seq, stale_slot) =
                    newest_checkpoint(&device, &geo, space, options.created)?;
                let mut st = State::from_checkpoint(&geo, &cp);
                st.stale_map_slot = stale_slot;
                let rolled = roll_forward(&device, &geo, &cp, &mut st)?;
                if std::env::var("FLASHLAB_LFS_TRACE").is_ok() {
                    eprintln!(
                        "lfs open '{space}': checkpoint {} (newest header seen {newest_seq}), rolled {rolled:?}",
                        cp.seq
                    );
                }
                // The next checkpoint follows every sequence seen, valid or not.
                st.epoch = st.epoch.max(newest_seq);
                (st, Some(rolled))
            }
        };
        let store = LogStructuredStore {
            device,
            space: space.to_string(),
            page_bytes,
            geo,
            cleaning: options.cleaning,
            write_through: options.write_through,
            partial_pages_max,
            log: std::sync::OnceLock::new(),
            writer: flashlab_runtime::Mutex::new(()),
            state: std::sync::Mutex::new(state),
            counters: Counters::default(),
        };
        let _ = found;
        if mode == StoreMode::Create {
            let mut block = vec![0u8; page_bytes];
            geo.encode(&mut block);
            store.device_write(0, &block, page_bytes)?;
        }
        // Create: the first map checkpoint. Open: one of what the roll-forward
        // found (LFS-4); both before any partial segment is written.
        {
            let _w = store.writer.lock();
            store.checkpoint_map()?;
        }
        store.counters.map_checkpoints.store(0, Ordering::Relaxed);
        Ok(store)
    }
}

/// A new store's segment flags: every segment but the head's (0) reusable
/// (nothing on the device is needed).
fn fresh_flags(geo: &Superblock) -> Vec<u32> {
    (0..geo.segments)
        .map(|s| if s == 0 { 0 } else { layout::SEGMENT_REUSABLE })
        .collect()
}

/// Read `buf` at `offset`; a read that fails or whose result `ok` rejects
/// is read once more (a flip on the way, not on the medium, reads clean).
fn read_twice(device: &DeviceRef, offset: u64, buf: &mut [u8], ok: impl Fn(&[u8]) -> bool) -> bool {
    for _ in 0..2 {
        if device.read(offset, buf).is_ok() && ok(buf) {
            return true;
        }
    }
    false
}

/// The valid map checkpoint of the higher sequence number, the highest
/// sequence number either slot's header shows (valid body or not), and a
/// slot that does not hold a valid copy of the chosen checkpoint, if one
/// does not (LFS-9).
fn newest_checkpoint(
    device: &DeviceRef,
    geo: &Superblock,
    space: &str,
    created: bool,
) -> Result<(MapCheckpoint, u64, Option<u64>)> {
    let page_bytes = geo.page_bytes as usize;
    let slot_bytes = geo.map_blocks as usize * page_bytes;
    let mut best: Option<MapCheckpoint> = None;
    // The sequence number of each slot's valid checkpoint.
    let mut valid_seq: [Option<u64>; 2] = [None, None];
    let mut newest_seq = 0;
    let mut seen = Vec::new();
    let mut blank_slots = 0;
    for slot in 0..2u64 {
        let mut header = vec![0u8; page_bytes];
        let first = 1 + slot * u64::from(geo.map_blocks);
        let at = first * page_bytes as u64;
        let valid_header = read_twice(device, at, &mut header, |h| {
            MapCheckpoint::decode_header(h).is_some() || h.iter().all(|&b| b == 0)
        });
        if !valid_header && let Err(e) = device.read(at, &mut header) {
            seen.push(format!("slot {slot}: {e}"));
            continue;
        }
        if header.iter().all(|&b| b == 0) {
            blank_slots += 1;
        }
        let Some((seq, body_blocks)) = MapCheckpoint::decode_header(&header) else {
            seen.push(format!("slot {slot}: no valid header"));
            continue;
        };
        newest_seq = newest_seq.max(seq);
        let len = ((1 + body_blocks) * page_bytes).min(slot_bytes);
        let mut bytes = vec![0u8; len];
        read_twice(device, at, &mut bytes, |b| {
            MapCheckpoint::decode(b, page_bytes).is_some()
        });
        match MapCheckpoint::decode(&bytes, page_bytes) {
            Some(cp) if cp.ages.len() == geo.segments as usize => {
                valid_seq[slot as usize] = Some(cp.seq);
                if best.as_ref().is_none_or(|b| b.seq < cp.seq) {
                    best = Some(cp);
                }
            }
            _ => seen.push(format!("slot {slot}: checkpoint {seq} fails its checksum")),
        }
    }
    match best {
        Some(cp) => {
            let bad = cp.map.iter().find(|&&b| {
                b != 0
                    && (u64::from(b) < geo.first_segment_block
                        || u64::from(b)
                            >= geo.first_segment_block
                                + u64::from(geo.segments) * u64::from(geo.blocks_per_segment))
            });
            if let Some(b) = bad {
                return Err(Error::Damaged(format!(
                    "data space '{space}': log-structured store damaged: map checkpoint {} names block {b}, outside the segments",
                    cp.seq
                )));
            }
            let stale_slot = (0..2u64).find(|&slot| valid_seq[slot as usize] != Some(cp.seq));
            Ok((cp, newest_seq, stale_slot))
        }
        // Creation was cut between the superblock and the first map
        // checkpoint: nothing was ever mapped. Once the database exists,
        // two blank headers are damage (LFS-11).
        None if blank_slots == 2 && created => Err(Error::Damaged(format!(
            "{}: data space '{space}': both map-checkpoint headers (blocks 1 and {}) are all \
             zeros, but the database exists; nothing was changed",
            device.name(),
            1 + geo.map_blocks
        ))),
        None if blank_slots == 2 => Ok((
            MapCheckpoint {
                seq: 0,
                next_partial_seq: 1,
                head_segment: 0,
                head_offset_blocks: 0,
                ages: vec![0; geo.segments as usize],
                flags: fresh_flags(geo),
                map: Vec::new(),
            },
            0,
            None,
        )),
        None => Err(Error::Damaged(format!(
            "data space '{space}': log-structured store damaged: no valid map checkpoint ({}); nothing was changed",
            seen.join("; ")
        ))),
    }
}

/// Where the roll-forward stopped, for reports and tests.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RollForward {
    pub partial_segments: u64,
    pub pages: u64,
    pub torn_blocks: u64,
}

/// Apply the partial segments written after `cp`, in their order (LFS-4):
/// the same segment order the writer followed (the free set of `cp`, next
/// higher number first), each summary the next sequence number of `cp`'s
/// epoch at the expected place. Blocks that do not hold what their summary
/// says (torn) are skipped; the first summary that is not the next one ends
/// the log.
pub(super) fn roll_forward(
    device: &DeviceRef,
    geo: &Superblock,
    cp: &MapCheckpoint,
    st: &mut State,
) -> Result<RollForward> {
    let page_bytes = geo.page_bytes as usize;
    let b = geo.blocks_per_segment;
    let mut free: BTreeSet<u32> = st.reusable.clone();
    let mut segment = cp.head_segment;
    let mut offset = cp.head_offset_blocks;
    let mut seq = cp.next_partial_seq;
    let mut done = RollForward::default();
    let mut block = vec![0u8; page_bytes];
    loop {
        let (next_segment, next_offset) = if b - offset.min(b) < 2 {
            match State::next_segment(&free, segment) {
                Some(next) => (next, 0),
                None => break,
            }
        } else {
            (segment, offset)
        };
        let at = geo.block(next_segment, next_offset);
        if !read_twice(device, at * page_bytes as u64, &mut block, |b| {
            Summary::decode(b).is_some()
        }) {
            break;
        }
        let Some(summary) = Summary::decode(&block) else {
            break;
        };
        let n = summary.entries.len() as u32;
        if summary.segment != next_segment
            || summary.offset_blocks != next_offset
            || summary.epoch != cp.seq
            || summary.seq != seq
            || next_offset + 1 + n > b
        {
            break;
        }
        if next_segment != segment {
            free.remove(&next_segment);
            st.reusable.remove(&next_segment);
            st.generation[next_segment as usize] += 1;
            st.ages[next_segment as usize] = 0;
        }
        segment = next_segment;
        let mut images = vec![0u8; n as usize * page_bytes];
        let readable = device
            .read((at + 1) * page_bytes as u64, &mut images)
            .is_ok();
        for (i, entry) in summary.entries.iter().enumerate() {
            let image = &mut images[i * page_bytes..(i + 1) * page_bytes];
            let holds = (readable && layout::block_holds(image, entry))
                || read_twice(
                    device,
                    (at + 1 + i as u64) * page_bytes as u64,
                    image,
                    |b| layout::block_holds(b, entry),
                );
            if holds && entry.page_no < geo.capacity_pages {
                st.remap(geo, entry.page_no, at + 1 + i as u64);
                done.pages += 1;
            } else {
                done.torn_blocks += 1;
            }
        }
        st.ages[segment as usize] = seq;
        offset = next_offset + 1 + n;
        seq += 1;
        done.partial_segments += 1;
    }
    st.head_segment = segment;
    st.head_offset = offset;
    st.next_seq = seq;
    // The dead segments of the roll-forward become reusable only after
    // two more map checkpoints (LFS-3): the reusable set stays the
    // checkpoint's, less the segments the log went through.
    Ok(done)
}
