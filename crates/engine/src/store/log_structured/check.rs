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
    let geo = store.geo;
    let page_bytes = store.page_bytes;
    let b = geo.blocks_per_segment;
    let mut problems = Vec::new();
    let mut described: HashMap<u64, Entry> = HashMap::new();
    let mut block = vec![0u8; page_bytes];
    // Segments whose chain of summaries a read error cut, from that block.
    let mut unreadable: HashMap<u32, u64> = HashMap::new();
    for segment in 0..geo.segments {
        let mut offset = 0;
        while b - offset >= 2 {
            let at = geo.block(segment, offset);
            if let Err(e) = store.device.read(at * page_bytes as u64, &mut block) {
                if store.lock_state().live[segment as usize] > 0 {
                    problems.push(format!(
                        "segment {segment}: the summary at block {at} cannot be read ({e})"
                    ));
                }
                unreadable.insert(segment, at);
                break;
            }
            let Some(summary) = Summary::decode(&block) else {
                // A summary's magic with a checksum that fails: damage at
                // rest (a torn one would not be followed by mapped pages).
                if &block[4..8] == layout::SUMMARY_MAGIC {
                    unreadable.insert(segment, at);
                    if store.lock_state().live[segment as usize] > 0 {
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
                described.entry(at + 1 + i as u64).or_insert(*e);
            }
            offset += 1 + n;
        }
    }
    let (map, live) = {
        let st = store.lock_state();
        (st.map[..st.hwm as usize].to_vec(), st.live.clone())
    };
    let mut counted = vec![0u32; geo.segments as usize];
    let mut mapped_lsn: HashMap<u32, u64> = HashMap::new();
    let mut problem = |text: String| {
        if problems.len() < PROBLEMS_MAX {
            problems.push(text);
        }
    };
    for (p, &blk) in map.iter().enumerate() {
        if blk == 0 {
            continue;
        }
        let blk = u64::from(blk);
        counted[geo.segment_of(blk) as usize] += 1;
        let cut = unreadable
            .get(&geo.segment_of(blk))
            .is_some_and(|&from| blk > from);
        let Some(entry) = described.get(&blk).filter(|e| e.page_no == p as u32) else {
            if cut {
                // Reported with its segment's unreadable summary.
                continue;
            }
            problem(format!(
                "page {p} is mapped to block {blk}, which no segment summary describes as page {p}"
            ));
            continue;
        };
        match store.device.read(blk * page_bytes as u64, &mut block) {
            Ok(()) if layout::block_holds(&block, entry) => {
                mapped_lsn.insert(p as u32, entry.lsn);
            }
            Ok(()) => problem(format!(
                "page {p}: block {blk} does not hold the version its summary names (LSN {}): torn or overwritten",
                entry.lsn
            )),
            Err(e) => problem(format!("page {p}: block {blk} unreadable: {e}")),
        }
    }
    for (&blk, entry) in &described {
        let Some(&lsn) = mapped_lsn.get(&entry.page_no) else {
            continue;
        };
        if entry.lsn > lsn
            && store
                .device
                .read(blk * page_bytes as u64, &mut block)
                .is_ok()
            && layout::block_holds(&block, entry)
        {
            problem(format!(
                "page {}: block {blk} holds a newer valid version (LSN {}) than the mapped one (LSN {lsn})",
                entry.page_no, entry.lsn
            ));
        }
    }
    for (s, (&c, &l)) in counted.iter().zip(&live).enumerate() {
        if c != l {
            problem(format!(
                "segment {s}: {l} live pages counted, the map has {c}"
            ));
        }
    }
    Ok(problems)
}
