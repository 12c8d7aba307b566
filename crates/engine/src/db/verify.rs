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
//! - every B+tree (catalog, tables, indexes): structure, order, depth;
//! - every page of a data space below its high-water mark is used once
//!   (VERIFY-1): the space header, a page of one tree, or a page on the
//!   free list. A page in two places is damage; a page in none leaked
//!   (allocated, then lost track of), which a space that fills up would
//!   otherwise hide.
//! - no tree reaches a page at or beyond its space header's page count
//!   (VERIFY-2): the header (read through the pool, so its checksum and id
//!   are verified) must account for every page the trees use, or it is a
//!   stale or damaged header, never trusted for how much there is to check.
//!
//! It reports every problem it finds rather than stopping at the first.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde::Serialize;

use crate::btree::BTree;
use crate::db::catalog::CATALOG_ROOT;
use crate::db::{DataSpace, Database};
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
    let mut owners = verify_trees(db, &mut report)?;
    crate::db::bulk::add_reserved(db, &mut owners);
    verify_reach(db, &mut report, &owners)?;
    verify_page_use(db, &mut report, &owners)?;
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

/// Per data space: each tree page and the tree that holds it.
pub(crate) type PageOwners = HashMap<u32, HashMap<u32, String>>;

pub(crate) fn verify_trees(db: &Database, report: &mut VerifyReport) -> Result<PageOwners> {
    let mut owners = PageOwners::new();
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
        match BTree::open(root).check_pages(&mut mtr) {
            Ok((stats, pages)) => {
                report.entries += stats.entries;
                let owned = owners.entry(space).or_default();
                for page_no in pages {
                    if let Some(other) = owned.insert(page_no, what.clone()) {
                        report.problem(format!(
                            "page {page_no} of data space {space} is in both {other} and {what}"
                        ));
                    }
                }
            }
            Err(e) => report.problem(format!("{what}: {e}")),
        }
    }
    Ok(owners)
}

/// VERIFY-2: the highest page any tree reaches lies below its space
/// header's page count.
fn verify_reach(db: &Database, report: &mut VerifyReport, owners: &PageOwners) -> Result<()> {
    for space in &db.inner.spaces {
        let Some((&highest, tree)) = owners.get(&space.id).and_then(|o| o.iter().max()) else {
            continue;
        };
        let page = space.pool.fetch(PageId::new(space.id, 0))?;
        let Ok(header) = page.read(|bytes| SpaceHeader::decode(bytes, &space.name)) else {
            continue; // reported by verify_pages
        };
        if highest >= header.page_count {
            report.problem(format!(
                "data space '{}': {tree} reaches page {highest}, but the space header counts {} \
                 pages (a stale or damaged header)",
                space.name, header.page_count
            ));
        }
    }
    Ok(())
}

/// VERIFY-1: every page below a data space's high-water mark is its
/// header, a page of one tree (`owners`), or on the free list, once.
/// Skipped once anything else was reported: a broken tree's pages are not
/// all known, and a damaged page on the free list would end the walk with
/// an error instead of a listed problem.
fn verify_page_use(db: &Database, report: &mut VerifyReport, owners: &PageOwners) -> Result<()> {
    if !report.problems.is_empty() {
        return Ok(());
    }
    for space in &db.inner.spaces {
        let empty = HashMap::new();
        let owned = owners.get(&space.id).unwrap_or(&empty);
        let (leaked, page_count) = match leaked_pages(db, space, owned)? {
            Ok(found) => found,
            Err(problem) => {
                report.problem(problem);
                continue;
            }
        };
        if !leaked.is_empty() {
            let first: Vec<String> = leaked.iter().take(8).map(u32::to_string).collect();
            report.problem(format!(
                "data space '{}': {} of its {} pages are in no tree and not on the free list (leaked): {}{}",
                space.name,
                leaked.len(),
                page_count,
                first.join(", "),
                if leaked.len() > first.len() { ", ..." } else { "" }
            ));
        }
    }
    Ok(())
}

/// The pages of `space` below its high-water mark that are neither in a
/// tree (`owned`) nor on the free list, and the page count (VERIFY-1); or
/// the problem that makes the free list unusable.
pub(crate) fn leaked_pages(
    db: &Database,
    space: &DataSpace,
    owned: &HashMap<u32, String>,
) -> Result<std::result::Result<(Vec<u32>, u32), String>> {
    let mut mtr = db.inner.mtr(space.id)?;
    let header = SpaceHeader::decode(crate::mtr::PageAccess::read(&mut mtr, 0)?, &space.name)?;
    let mut free = HashSet::new();
    let mut next = header.free_head;
    while next != 0 {
        if next >= header.page_count || !free.insert(next) {
            return Ok(Err(format!(
                "data space '{}': the free list reaches page {next} {}",
                space.name,
                if next >= header.page_count {
                    "beyond the high-water mark"
                } else {
                    "twice (a loop)"
                }
            )));
        }
        if let Some(tree) = owned.get(&next) {
            return Ok(Err(format!(
                "data space '{}': page {next} is on the free list and in {tree}",
                space.name
            )));
        }
        next = SpaceHeader::free_next(crate::mtr::PageAccess::read(&mut mtr, next)?);
    }
    let leaked = (1..header.page_count)
        .filter(|p| !owned.contains_key(p) && !free.contains(p))
        .collect();
    Ok(Ok((leaked, header.page_count)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mtr::PageAccess;
    use crate::page::PageType;
    use crate::{DbConfig, TableSpec};
    use flashlab_runtime::{Sim, SimConfig};

    /// A database with one table of a few hundred rows (several pages).
    fn database() -> Database {
        let db = Database::open(&DbConfig::simple("memory", "memory", 4096, 256 * 4096)).unwrap();
        let t = db.create_table(TableSpec::bytes("t")).unwrap();
        let mut txn = db.begin().unwrap();
        for i in 0..300u32 {
            txn.put(&t, format!("k{i:05}").as_bytes(), &[7u8; 40])
                .unwrap();
        }
        txn.commit().unwrap();
        db
    }

    /// Change the header of data space 0 as `edit` says, in a committed
    /// mini-transaction.
    fn edit_header(db: &Database, edit: impl FnOnce(&mut SpaceHeader)) {
        let mut mtr = db.inner.mtr(0).unwrap();
        let mut header = SpaceHeader::decode(mtr.read(0).unwrap(), "data").unwrap();
        edit(&mut header);
        header.encode(mtr.write(0).unwrap());
        mtr.commit(&db.inner.wal, 0, 0, None).unwrap();
    }

    /// One of the report's problems says `needle`.
    #[track_caller]
    fn assert_reported(report: &VerifyReport, needle: &str) {
        assert!(
            report.problems.iter().any(|p| p.contains(needle)),
            "{:?}",
            report.problems
        );
    }

    /// VERIFY-1: a healthy database uses every page once; a page allocated
    /// and then kept in no tree and off the free list is reported as
    /// leaked, naming the space and the page.
    #[test]
    fn a_page_in_no_tree_and_not_free_is_reported_as_leaked() {
        Sim::run(SimConfig::default(), |_| {
            let db = database();
            let report = verify(&db).unwrap();
            assert!(report.ok(), "{:?}", report.problems);
            let mut mtr = db.inner.mtr(0).unwrap();
            let page_no = mtr.allocate(PageType::BTreeLeaf).unwrap();
            mtr.commit(&db.inner.wal, 0, 0, None).unwrap();
            let report = verify(&db).unwrap();
            assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
            let problem = &report.problems[0];
            assert!(
                problem.contains("1 of its")
                    && problem.contains("(leaked)")
                    && problem.ends_with(&format!(": {page_no}")),
                "{problem}"
            );
        })
        .unwrap();
    }

    /// VERIFY-1: a page both on the free list and in a tree is reported.
    #[test]
    fn a_page_both_free_and_in_a_tree_is_reported() {
        Sim::run(SimConfig::default(), |_| {
            let db = database();
            let t = db.table("t").unwrap();
            let root = t.def().root;
            // Point the free list at the table's root, as damage to the
            // space header would (the root itself is left as it is).
            edit_header(&db, |header| header.free_head = root);
            let report = verify(&db).unwrap();
            assert_reported(
                &report,
                &format!("page {root} is on the free list and in table 't'"),
            );
        })
        .unwrap();
    }
    /// VERIFY-2: a header whose page count is below a page a tree uses (a
    /// stale header) is reported, naming the tree and both numbers.
    #[test]
    fn a_tree_beyond_the_headers_page_count_is_reported() {
        Sim::run(SimConfig::default(), |_| {
            let db = database();
            edit_header(&db, |header| header.page_count = 2);
            let report = verify(&db).unwrap();
            assert_reported(&report, "but the space header counts 2 pages");
        })
        .unwrap();
    }
}
