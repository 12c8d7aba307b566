//! Verifying a database: what `flashlab check` runs.
//!
//! After recovery (which the open performs), the verifier reads everything
//! back from the devices, not the buffer pools:
//! - the log, from its start to its end: every record must decode (length,
//!   checksum, its own LSN), the master record must name a checkpoint begin
//!   record, and each record's `prev_lsn` must point backwards;
//! - every page of every data space up to its high-water mark: checksum and
//!   page id (zero pages are never-written and fine). A damaged page (a
//!   read error, a torn write, a flipped bit, another page's image) is
//!   rebuilt from the log through the buffer pool (BUF-9) and written back;
//!   it is counted as repaired, and is a problem only if it cannot be;
//! - every B+tree (catalog, tables, indexes): structure, order, depth.
//!
//! It reports every problem it finds rather than stopping at the first.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::btree::BTree;
use crate::db::Database;
use crate::db::catalog::CATALOG_ROOT;
use crate::error::Result;
use crate::page::{self, PageId};
use crate::space::SpaceHeader;
use crate::wal::LogReader;
use crate::wal::record::Body;

/// Most problems listed before the verifier stops collecting.
pub const PROBLEMS_MAX: usize = 100;

/// What the verifier saw.
#[derive(Clone, Debug, Default, Serialize)]
pub struct VerifyReport {
    pub log_records: u64,
    pub log_end_lsn: u64,
    pub pages_checked: u64,
    /// Pages damaged on their device and rebuilt from the log.
    pub pages_repaired: u64,
    /// What was wrong with each repaired page (the first [`PROBLEMS_MAX`]).
    pub repairs: Vec<String>,
    pub trees_checked: u64,
    pub entries: u64,
    pub problems: Vec<String>,
}

impl VerifyReport {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }

    fn problem(&mut self, text: String) {
        if self.problems.len() < PROBLEMS_MAX {
            self.problems.push(text);
        }
    }
}

/// Verify an open database. Device errors end the check with an error;
/// damage is listed in the report.
pub fn verify(db: &Database) -> Result<VerifyReport> {
    db.flush()?;
    let mut report = VerifyReport::default();
    verify_log(db, &mut report)?;
    verify_pages(db, &mut report)?;
    verify_trees(db, &mut report)?;
    if report.pages_repaired > 0 {
        db.flush()?;
    }
    Ok(report)
}

fn verify_log(db: &Database, report: &mut VerifyReport) -> Result<()> {
    let device = db.inner.devices.log.clone();
    let master = db.inner.wal.master();
    // Everything durable before the scan must be readable (the log may grow
    // while we read, if the database is in use).
    let durable_lsn = db.inner.wal.flushed_lsn();
    let start_lsn = db.inner.wal.start_lsn();
    let mut reader = LogReader::new(device, db.inner.wal.layout(), start_lsn, None);
    let mut checkpoints = BTreeSet::new();
    loop {
        let record = match reader.next_record() {
            Ok(Some(record)) => record,
            Ok(None) => break,
            Err(e) => {
                report.problem(e.to_string());
                break;
            }
        };
        report.log_records += 1;
        if record.prev_lsn >= record.lsn && record.prev_lsn != 0 {
            report.problem(format!(
                "log record at LSN {} points forward to {}",
                record.lsn, record.prev_lsn
            ));
        }
        if matches!(record.body, Body::CheckpointBegin) {
            checkpoints.insert(record.lsn);
        }
    }
    report.log_end_lsn = reader.end_lsn();
    if report.log_end_lsn < durable_lsn {
        report.problem(format!(
            "the log on the device ends at LSN {}, but {durable_lsn} was made durable",
            report.log_end_lsn
        ));
    }
    if master.checkpoint_lsn != 0 && !checkpoints.contains(&master.checkpoint_lsn) {
        report.problem(format!(
            "the master record names LSN {}, which is no checkpoint",
            master.checkpoint_lsn
        ));
    }
    Ok(())
}

fn verify_pages(db: &Database, report: &mut VerifyReport) -> Result<()> {
    for (space, config) in db.inner.spaces.iter().zip(&db.inner.config.data) {
        let page_bytes = config.page_bytes;
        let mut image = vec![0u8; page_bytes];
        // Page 0 through the pool, so a damaged header is repaired first.
        let header_page = space.pool.fetch(PageId::new(space.id, 0));
        let decoded = header_page.map(|p| p.read(|bytes| SpaceHeader::decode(bytes, &space.name)));
        let header = match decoded.and_then(|h| h) {
            Ok(header) => header,
            Err(e) => {
                report.problem(format!("data space '{}': {e}", space.name));
                continue;
            }
        };
        for page_no in 0..header.page_count {
            let id = PageId::new(space.id, page_no);
            let offset = space.store.location_of(page_no);
            report.pages_checked += 1;
            let damage = match space.store.read_page(page_no, &mut image) {
                Ok(()) => page::verify(&image, id, &space.name, offset).err(),
                Err(e) if crate::store::is_read_damage(&e) => Some(e),
                Err(e) => return Err(e),
            };
            let Some(damage) = damage else { continue };
            let repairs = space.pool.stats().repairs;
            let repaired = match space.pool.fetch(id) {
                Ok(_) if space.pool.stats().repairs > repairs => true,
                // Repaired a moment ago (the space header, read above) and
                // not yet written back: the flush below writes it.
                Ok(_) if space.pool.dirty_pages().iter().any(|(p, _)| *p == id) => true,
                Ok(_) => {
                    report.problem(format!(
                        "{damage} (the pool holds a clean copy the device lost)"
                    ));
                    false
                }
                Err(e) => {
                    report.problem(format!("{damage}; not repairable: {e}"));
                    false
                }
            };
            if repaired {
                report.pages_repaired += 1;
                if report.repairs.len() < PROBLEMS_MAX {
                    report
                        .repairs
                        .push(format!("{damage}; rebuilt from the log"));
                }
            }
        }
        // The store's own structures (a log-structured space: the page map
        // against the segments).
        for problem in space.store.check_layout()? {
            report.problem(format!("data space '{}': {problem}", space.name));
        }
    }
    Ok(())
}

fn verify_trees(db: &Database, report: &mut VerifyReport) -> Result<()> {
    let mut trees = vec![("catalog".to_string(), 0u32, CATALOG_ROOT)];
    for table in db.tables() {
        let def = table.def();
        trees.push((format!("table '{}'", def.name), def.space, def.root));
        for index in &def.indexes {
            trees.push((
                format!("index '{}' of '{}'", index.name, def.name),
                def.space,
                index.root,
            ));
        }
    }
    for (what, space, root) in trees {
        let mut mtr = db.inner.mtr(space)?;
        report.trees_checked += 1;
        match BTree::open(root).check(&mut mtr) {
            Ok(stats) => report.entries += stats.entries,
            Err(e) => report.problem(format!("{what}: {e}")),
        }
    }
    Ok(())
}
