//! `flashlab check` for a log-structured space: the page map against the
//! segments. Every segment's chain of partial segments is read (summaries
//! at the places their predecessors' lengths give, whatever their epoch);
//! then every mapped page must be at a block a summary describes as that
//! page, holding it (LFS-1), no block may hold a valid newer version of a
//! mapped page, and the live counts must be the map's (LFS-2). One line
//! per problem.

use std::collections::HashMap;

use super::LogStructuredStore;
use super::layout::{self, Entry, Summary};
use super::state::Geometry;
use crate::error::Result;

/// Most problems one check lists.
const PROBLEMS_MAX: usize = 100;

pub(super) fn check(store: &LogStructuredStore) -> Result<Vec<String>> {
    let mut problems = Problems(Vec::new());
    let summaries = read_summaries(store, &mut problems);
    let (map, live) = {
        let st = store.lock_state();
        (st.map[..st.hwm as usize].to_vec(), st.live.clone())
    };
    let (mapped_lsn, counted) = check_mapped(store, &summaries, &map, &mut problems);
    check_no_newer_version(store, &summaries, &mapped_lsn, &mut problems);
    for (s, (&c, &l)) in counted.iter().zip(&live).enumerate() {
        if c != l {
            problems.push(format!(
                "segment {s}: {l} live pages counted, the map has {c}"
            ));
        }
    }
    Ok(problems.0)
}

/// The problems found, at most [`PROBLEMS_MAX`] of them.
struct Problems(Vec<String>);

impl Problems {
    fn push(&mut self, text: String) {
        if self.0.len() < PROBLEMS_MAX {
            self.0.push(text);
        }
    }
}

/// What the segments' chains of summaries describe.
struct Summaries {
    /// Each described block's entry (the first summary to name it wins).
    described: HashMap<u64, Entry>,
    /// Segments whose chain a read error or a damaged summary cut, from
    /// that block on.
    unreadable: HashMap<u32, u64>,
}

/// Follow every segment's chain of partial segments, from its first block,
/// to the first block that is not a summary continuing it. A summary that
/// cannot be read, or is damaged, is a problem if the segment holds live
/// pages.
fn read_summaries(store: &LogStructuredStore, problems: &mut Problems) -> Summaries {
    let geo = store.geo;
    let b = geo.blocks_per_segment;
    let mut block = vec![0u8; store.page_bytes];
    let mut found = Summaries {
        described: HashMap::new(),
        unreadable: HashMap::new(),
    };
    let has_live = |segment: u32| store.lock_state().live[segment as usize] > 0;
    for segment in 0..geo.segments {
        let mut offset = 0;
        while b - offset >= 2 {
            let at = geo.block(segment, offset);
            if let Err(e) = store.device.read(at * store.page_bytes as u64, &mut block) {
                if has_live(segment) {
                    problems.push(format!(
                        "segment {segment}: the summary at block {at} cannot be read ({e})"
                    ));
                }
                found.unreadable.insert(segment, at);
                break;
            }
            let Some(summary) = Summary::decode(&block) else {
                // A summary's magic with a checksum that fails: damage at
                // rest (a torn one would not be followed by mapped pages).
                if &block[4..8] == layout::SUMMARY_MAGIC {
                    found.unreadable.insert(segment, at);
                    if has_live(segment) {
                        problems.push(format!(
                            "segment {segment}: summary damaged at block {at} (checksum mismatch)"
                        ));
                    }
                }
                break;
            };
            let n = summary.entries.len() as u32;
            if summary.segment != segment || summary.offset_blocks != offset || offset + 1 + n > b {
                break;
            }
            for (i, e) in summary.entries.iter().enumerate() {
                found.described.entry(at + 1 + i as u64).or_insert(*e);
            }
            offset += 1 + n;
        }
    }
    found
}

/// Every mapped page must be at a block a summary describes as that page,
/// holding the version it names (LFS-1). Returns each such page's LSN and
/// the mapped pages counted per segment.
fn check_mapped(
    store: &LogStructuredStore,
    summaries: &Summaries,
    map: &[u32],
    problems: &mut Problems,
) -> (HashMap<u32, u64>, Vec<u32>) {
    let geo = store.geo;
    let mut block = vec![0u8; store.page_bytes];
    let mut counted = vec![0u32; geo.segments as usize];
    let mut mapped_lsn: HashMap<u32, u64> = HashMap::new();
    for (p, &blk) in map.iter().enumerate() {
        if blk == 0 {
            continue;
        }
        let blk = u64::from(blk);
        counted[geo.segment_of(blk) as usize] += 1;
        let cut = summaries
            .unreadable
            .get(&geo.segment_of(blk))
            .is_some_and(|&from| blk > from);
        let described = summaries.described.get(&blk);
        let Some(entry) = described.filter(|e| e.page_no == p as u32) else {
            if !cut {
                // (A cut one is reported with its segment's summary.)
                problems.push(format!(
                    "page {p} is mapped to block {blk}, which no segment summary describes as page {p}"
                ));
            }
            continue;
        };
        match store.device.read(blk * store.page_bytes as u64, &mut block) {
            Ok(()) if layout::block_holds(&block, entry) => {
                mapped_lsn.insert(p as u32, entry.lsn);
            }
            Ok(()) => problems.push(format!(
                "page {p}: block {blk} does not hold the version its summary names (LSN {}): torn or overwritten",
                entry.lsn
            )),
            Err(e) => problems.push(format!("page {p}: block {blk} unreadable: {e}")),
        }
    }
    (mapped_lsn, counted)
}

/// No block may hold a valid version of a mapped page newer than the
/// mapped one (the map lost a write).
fn check_no_newer_version(
    store: &LogStructuredStore,
    summaries: &Summaries,
    mapped_lsn: &HashMap<u32, u64>,
    problems: &mut Problems,
) {
    let mut block = vec![0u8; store.page_bytes];
    for (&blk, entry) in &summaries.described {
        let Some(&lsn) = mapped_lsn.get(&entry.page_no) else {
            continue;
        };
        if entry.lsn > lsn
            && store
                .device
                .read(blk * store.page_bytes as u64, &mut block)
                .is_ok()
            && layout::block_holds(&block, entry)
        {
            problems.push(format!(
                "page {}: block {blk} holds a newer valid version (LSN {}) than the mapped one (LSN {lsn})",
                entry.page_no, entry.lsn
            ));
        }
    }
}
