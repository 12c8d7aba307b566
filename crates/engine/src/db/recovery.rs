//! Crash recovery: analysis, redo, undo.
//!
//! Recovery follows ARIES (Mohan et al. 1992) in three passes over the log,
//! starting from the last complete checkpoint the master record names:
//!
//! 1. **Analysis** reads from the checkpoint's begin record to the end of the
//!    valid log. It rebuilds the table of transactions that were active
//!    (their last record and the next record to undo) from the checkpoint's
//!    list and the records after it, and the dirty page table (each page's
//!    first change not known to be on disk). The end of the valid log is
//!    where the log continues.
//! 2. **Redo** repeats history: from the oldest recovery LSN in the dirty
//!    page table, every record's byte ranges are applied to each page whose
//!    page LSN is older than the record's end. Redo is physical and
//!    idempotent; after it, every page is as it was at the crash, including
//!    the changes of transactions that did not commit.
//! 3. **Undo** rolls back the *losers* (transactions active at the crash)
//!    together, newest record first. Each undo step is applied through the
//!    B+tree and logged as a compensation record whose `undo_next` skips
//!    what is already undone, so a crash during recovery never undoes twice.
//!    Each loser ends with an abort record.
//!
//! Then the log is forced, every page written and a checkpoint taken.
//!
//! **The end of the log.** Analysis reads until the reader reports the end
//! of the written log; then it looks past the end
//! ([`LogReader::check_beyond_end`]) for proof that the log was durable
//! further. Damage anywhere in what recovery reads (a sector that fails its
//! checksum, an unreadable sector, a record that does not link to the one
//! before it, or a lost write proved by a later sector) refuses the open
//! with an error naming the LSN and the device offset: recovery never
//! resumes over damage, which would overwrite acknowledged commits. Redo
//! and undo must reach what analysis found, or they fail the same way.
//!
//! Invariants (REC-n), referred to in ARCHITECTURE.md and the crash tests:
//! 1. A record is redone on a page only if the page LSN is below the
//!    record's end; page LSNs only grow.
//! 2. After recovery, every transaction with a durable commit record is
//!    present and every other transaction's effects are gone.
//! 3. Recovery that crashes restarts from scratch and reaches the same
//!    state: compensation records make undo resumable.
//! 4. In-Page Logging spaces restart without redo (ARCHITECTURE.md, "In-Page
//!    Logging"): their pages are as of `L*`, the log position of the
//!    newest durable force marker (IPL-11), the same for every page. Redo
//!    skips their pages (`ipl_pages_redone` is 0, `ipl_pages_skipped`
//!    counts them). A commit is acknowledged only once a marker covers it
//!    (IPL-13), so every transaction whose commit or abort record lies at
//!    or beyond `L*` is a loser: it is undone logically from its last
//!    record, and a compensation record at or beyond `L*` is not trusted
//!    (its undo is absent from IPL pages): undo goes on to its previous
//!    record instead of its `undo_next`. Logical undo tolerates a change
//!    absent from a page (an insert's undo deletes a key if present; an
//!    update's or delete's undo puts the before-image whether or not the
//!    change is there), so undoing again what is already undone changes
//!    nothing. Each loser ends with an abort record, after its commit
//!    record if it has one, so a later recovery finds the same outcome.
//!    The log start never passes such a transaction's first record: a
//!    checkpoint's sync forces the space after its begin record (so `L*`
//!    is at or beyond the begin record of the checkpoint the master names),
//!    and the master's log start is at or before the first record of every
//!    transaction active at that begin record. Before undo, recovery logs
//!    a restart record per such space naming its `L*`: until the closing
//!    checkpoint, a page of that space damaged on the medium is rebuilt
//!    from the WAL records before the space's newest marker that lie in
//!    none of its restarts' holes `[L*, restart record)`
//!    ([`Wal::rebuild_page`]), its state in the marked state.
//! 5. Once the master record names a checkpoint (creation took its
//!    first), every data space has its header and space 0 its catalog
//!    root: one that redo leaves all zeros is damage, named with its page
//!    and device offset, never formatted anew (a zeroed page 0 read as a
//!    fresh space wrecked the catalog at the next write).
//! 6. The master record names a checkpoint only once the checkpoint's end
//!    record is durable: analysis must read that end record, or the log
//!    lost its tail (damage, naming both positions), since the active
//!    transactions it lists would otherwise never be undone.

use std::collections::{BTreeMap, HashMap};

use crate::config::DbConfig;
use crate::db::create::{build_spaces, load_catalog};
use crate::db::{DataSpace, Database, Devices};
use crate::error::{Error, Result};
use crate::mtr::apply_redo;
use crate::page::{self, PageId};
use crate::wal::record::{ActiveTxn, Body, LogRecord, TxnEffect};
use crate::wal::{FORCE_SECTORS_MAX, LogEnd, LogLayout, LogReader, Master, Wal};

/// What recovery found and did, for reports and tests.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct RecoveryReport {
    pub checkpoint_lsn: u64,
    pub redo_lsn: u64,
    pub end_lsn: u64,
    pub records_scanned: u64,
    pub pages_redone: u64,
    /// Of `pages_redone`, redo records applied to pages of In-Page Logging
    /// spaces: 0 when those restart without redo (REC-4); otherwise (their
    /// commit force off) the WAL's redo brings them forward.
    pub ipl_pages_redone: u64,
    /// Redo records of IPL pages skipped (REC-4), and the `L*` the IPL
    /// spaces restarted at (0: no such space).
    pub ipl_pages_skipped: u64,
    pub ipl_restart_lsn: u64,
    /// Of `losers`, transactions whose commit or abort record lay at or
    /// beyond `L*` (REC-4).
    pub ipl_losers: u64,
    pub losers: u64,
    pub records_undone: u64,
    /// Sectors past the end left by an unfinished write, erased.
    pub leftover_sectors: u64,
    /// Bulk loads a crash cut short (BULK-5), and the pages they had
    /// reserved, taken back to the free list.
    pub bulk_loads_cut: u64,
    pub bulk_pages_reclaimed: u64,
    /// Page changes redo skipped because a bulk load wrote the page
    /// unlogged after them (BULK-6).
    pub bulk_changes_skipped: u64,
}

/// How far past the end analysis looks: one force's largest write.
fn beyond_window_sectors(_layout: &LogLayout) -> u64 {
    FORCE_SECTORS_MAX + 2
}

/// The result of the analysis pass.
struct Analysis {
    active: BTreeMap<u64, ActiveTxn>,
    /// Transactions that ended (commit or abort) after the checkpoint
    /// began: the LSN of their end record (REC-4).
    ended_at: BTreeMap<u64, u64>,
    /// Transactions that ended after the checkpoint began.
    ended: std::collections::BTreeSet<u64>,
    /// Oldest record the checkpoint knew was not installed.
    pending_lsn: Option<u64>,
    dirty: BTreeMap<PageId, u64>,
    next_txn: u64,
    next_commit_ts: u64,
    end: LogEnd,
    records: u64,
    /// The end record of the checkpoint analysis starts from was read.
    checkpoint_end_seen: bool,
}

fn analyse(devices: &Devices, layout: LogLayout, start_lsn: u64) -> Result<Analysis> {
    let mut a = Analysis {
        active: BTreeMap::new(),
        ended_at: BTreeMap::new(),
        ended: std::collections::BTreeSet::new(),
        pending_lsn: None,
        dirty: BTreeMap::new(),
        next_txn: 1,
        next_commit_ts: 1,
        end: LogEnd {
            end_lsn: start_lsn,
            last_record_lsn: 0,
            beyond: Default::default(),
        },
        records: 0,
        checkpoint_end_seen: false,
    };
    let mut reader = LogReader::new(devices.log.clone(), layout, start_lsn, None);
    while let Some(record) = reader.next_record()? {
        a.records += 1;
        if matches!(record.body, Body::CheckpointEnd { begin_lsn, .. } if begin_lsn == start_lsn) {
            a.checkpoint_end_seen = true;
        }
        analyse_record(&mut a, &record);
    }
    let beyond = reader.check_beyond_end(beyond_window_sectors(&layout))?;
    a.end = LogEnd {
        end_lsn: reader.end_lsn(),
        last_record_lsn: reader.last_record_lsn().unwrap_or(0),
        beyond,
    };
    Ok(a)
}

fn analyse_record(a: &mut Analysis, record: &LogRecord) {
    if record.txn != 0 {
        a.next_txn = a.next_txn.max(record.txn + 1);
    }
    for redo in record.body.redo() {
        a.dirty.entry(redo.page).or_insert(record.lsn);
    }
    match record.txn_effect(record.lsn) {
        TxnEffect::Active { undo_next } => {
            let t = ActiveTxn {
                txn: record.txn,
                last_lsn: record.lsn,
                undo_next,
            };
            a.active.insert(record.txn, t);
        }
        TxnEffect::Ended => {
            a.active.remove(&record.txn);
            a.ended.insert(record.txn);
            a.ended_at.insert(record.txn, record.lsn);
        }
        TxnEffect::Nothing => {}
    }
    match &record.body {
        Body::Commit { commit_ts } => {
            a.next_commit_ts = a.next_commit_ts.max(commit_ts + 1);
        }
        Body::CheckpointEnd {
            next_txn,
            next_commit_ts,
            pending_lsn,
            active,
            dirty,
            ..
        } => {
            a.next_txn = a.next_txn.max(*next_txn);
            a.next_commit_ts = a.next_commit_ts.max(*next_commit_ts);
            if *pending_lsn != 0 {
                a.pending_lsn = Some(*pending_lsn);
            }
            // The snapshot is as of the begin record: records seen since
            // are newer, and transactions that ended since stay ended.
            for t in active {
                if !a.ended.contains(&t.txn) {
                    a.active.entry(t.txn).or_insert_with(|| t.clone());
                }
            }
            for (page, rec_lsn) in dirty {
                let entry = a.dirty.entry(*page).or_insert(*rec_lsn);
                *entry = (*entry).min(*rec_lsn);
            }
        }
        _ => {}
    }
}

/// Recover a database whose log has a master record, and open it.
pub(crate) fn recover(config: &DbConfig, devices: Devices, master: Master) -> Result<Database> {
    let (db, _) = recover_with_report(config, devices, master)?;
    Ok(db)
}

/// Recover, and say what was done.
pub(crate) fn recover_with_report(
    config: &DbConfig,
    devices: Devices,
    master: Master,
) -> Result<(Database, RecoveryReport)> {
    let layout = Wal::layout_of(&devices.log, &master)?;
    let checkpoint_lsn = checkpoint_of(&devices, &master)?;
    let analysis = analyse(&devices, layout, checkpoint_lsn)?;
    check_checkpoint_end(&devices, &master, &analysis)?;
    let redo_lsn = analysis
        .dirty
        .values()
        .copied()
        .chain(analysis.pending_lsn)
        .min()
        .unwrap_or(checkpoint_lsn)
        .min(checkpoint_lsn)
        .max(master.start_lsn);
    let end_lsn = analysis.end.end_lsn;
    // The master names a checkpoint only once creation took its first one.
    let created = master.checkpoint_lsn != 0;
    let db = assemble(config, devices, master, &analysis)?;
    // REC-4: the pages of the spaces that restart without redo are as of
    // L*.
    let l_star = db.inner.spaces.iter().filter_map(restart_lsn).min();
    check_restarts_within_log(&db, end_lsn)?;
    let (losers, ipl_losers) = losers_at(analysis.active, &analysis.ended_at, l_star);
    let mut report = RecoveryReport {
        checkpoint_lsn,
        redo_lsn,
        end_lsn,
        records_scanned: analysis.records,
        losers: losers.len() as u64,
        ipl_losers,
        ipl_restart_lsn: l_star.unwrap_or(0),
        leftover_sectors: analysis.end.beyond.leftovers.len() as u64,
        ..RecoveryReport::default()
    };
    let redone = redo(&db, redo_lsn, end_lsn)?;
    report.pages_redone = redone.all;
    report.bulk_changes_skipped = redone.unlogged_skipped;
    report.ipl_pages_redone = redone.page_log;
    report.ipl_pages_skipped = redone.page_log_skipped;
    assert!(
        l_star.is_none() || report.ipl_pages_redone == 0,
        "REC-4: a page redone although its space restarts at L*"
    );
    // A loser's first record is at or after the log start (WAL-9).
    db.inner
        .wal
        .set_active(losers.values().map(|t| (t.clone(), master.start_lsn)));
    log_restarts(&db, end_lsn)?;
    report.records_undone = undo(&db, losers, l_star)?;
    crate::db::create::finish_creation(&db, created)?;
    load_catalog(&db)?;
    (report.bulk_loads_cut, report.bulk_pages_reclaimed) = crate::db::bulk::reclaim_cut_loads(&db)?;
    db.inner.wal.flush_all()?;
    db.flush()?;
    // The closing checkpoint moved the log start past every record the
    // pages restarted at L* did not receive: repairs from the WAL are
    // sound again (PLOG-3).
    for page_log in db.inner.spaces.iter().filter_map(|s| s.store.page_log()) {
        page_log.recovered();
    }
    *db.inner.recovery.lock().expect("recovery") = Some(report.clone());
    Ok((db, report))
}

/// The database on `devices`, its log resumed where analysis found the end.
fn assemble(
    config: &DbConfig,
    devices: Devices,
    master: Master,
    analysis: &Analysis,
) -> Result<Database> {
    let wal = Wal::resume(
        devices.log.clone(),
        config.wal.clone(),
        master,
        &analysis.end,
    )?;
    let created = master.checkpoint_lsn != 0;
    let mode = crate::store::StoreMode::Open;
    let (spaces, pools) = build_spaces(config, &devices, &wal, mode, created)?;
    let (next_txn, next_ts) = (analysis.next_txn, analysis.next_commit_ts);
    Database::from_parts(config, spaces, pools, wal, devices, next_txn, next_ts)
}

/// REC-6: the master record names a checkpoint only once its end record
/// is durable, so a log that ends before that record lost its tail (and
/// with it the transactions the checkpoint listed as active, whose undo
/// recovery would skip).
fn check_checkpoint_end(devices: &Devices, master: &Master, analysis: &Analysis) -> Result<()> {
    if master.checkpoint_lsn == 0 || analysis.checkpoint_end_seen {
        return Ok(());
    }
    Err(Error::Damaged(format!(
        "log device '{}': the log lost its tail: the master record names the checkpoint at \
         LSN {}, whose end record is missing; the log ends at {}",
        devices.log.name(),
        master.checkpoint_lsn,
        analysis.end.end_lsn
    )))
}

/// Where a space restarts without redo, if it does (PLOG-3, REC-4).
fn restart_lsn(space: &DataSpace) -> Option<u64> {
    space.store.page_log().and_then(|p| p.restart_lsn())
}

/// BUF-18 for spaces that restart without redo: their durable state is
/// written only once the WAL is durable to its `L` (IPL-10), so an `L*`
/// past the end of the log that recovery found proves that the log lost
/// its tail.
fn check_restarts_within_log(db: &Database, end_lsn: u64) -> Result<()> {
    for (space, device) in db.inner.spaces.iter().zip(&db.inner.devices.data) {
        if let Some(l_star) = restart_lsn(space).filter(|&l| l > end_lsn) {
            return Err(Error::Damaged(format!(
                "log device '{}': the log lost its tail: data space '{}' ({}) is forced to LSN \
                 {l_star}, the log ends at {end_lsn} (an older or truncated copy of the log?)",
                db.inner.devices.log.name(),
                space.name,
                device.name()
            )));
        }
    }
    Ok(())
}

/// The checkpoint recovery starts from; the master record's log start
/// must be at or before it.
fn checkpoint_of(devices: &Devices, master: &Master) -> Result<u64> {
    let checkpoint_lsn = if master.checkpoint_lsn == 0 {
        master.start_lsn
    } else {
        master.checkpoint_lsn
    };
    if master.start_lsn == 0 || master.start_lsn > checkpoint_lsn {
        return Err(Error::Open(format!(
            "log device '{}': the master record's log start {} is not at or before its checkpoint {}",
            devices.log.name(),
            master.start_lsn,
            checkpoint_lsn
        )));
    }
    Ok(checkpoint_lsn)
}

/// The losers: the transactions active at the log's end and, with IPL
/// spaces restarting at `l_star`, those that ended at or beyond it
/// (REC-4; their count is the second value). With `l_star`, a loser is
/// undone from its last record (REC-4 re-checks its compensations).
fn losers_at(
    mut losers: BTreeMap<u64, ActiveTxn>,
    ended_at: &BTreeMap<u64, u64>,
    l_star: Option<u64>,
) -> (BTreeMap<u64, ActiveTxn>, u64) {
    let Some(l_star) = l_star else {
        return (losers, 0);
    };
    for t in losers.values_mut() {
        t.undo_next = t.last_lsn;
    }
    let mut ipl_losers = 0;
    for (&txn, &end) in ended_at {
        if end >= l_star {
            ipl_losers += 1;
            losers.insert(
                txn,
                ActiveTxn {
                    txn,
                    last_lsn: end,
                    undo_next: end,
                },
            );
        }
    }
    (losers, ipl_losers)
}

/// REC-4: the records from a space's own L* on never reached its pages; a
/// page repaired from the WAL before the closing checkpoint skips them,
/// this restart's and, if a recovery crashed, the earlier ones'. One
/// record per space: each has its own marker ring.
fn log_restarts(db: &Database, end_lsn: u64) -> Result<()> {
    for space in &db.inner.spaces {
        if let Some(from_lsn) = restart_lsn(space).filter(|&l| l < end_lsn) {
            let space = space.id;
            db.inner
                .wal
                .append(0, 0, Body::Restart { space, from_lsn })?;
        }
    }
    Ok(())
}

/// Redo records applied (all, to spaces with a page log) and skipped.
#[derive(Default)]
struct Redone {
    all: u64,
    /// Page changes older than a bulk load's unlogged write (BULK-6).
    unlogged_skipped: u64,
    page_log: u64,
    page_log_skipped: u64,
}

/// The next record of a redo pass that has not reached `end_lsn`, where
/// analysis found the log's end.
fn next_to(db: &Database, reader: &mut LogReader, end_lsn: u64) -> Result<LogRecord> {
    reader.next_record()?.ok_or_else(|| Error::LogDamaged {
        lsn: reader.end_lsn(),
        offset_bytes: db.inner.wal.layout().offset_of(reader.end_lsn()),
        problem: format!(
            "redo found the end of the log before LSN {end_lsn}, where analysis found it"
        ),
    })
}

/// BULK-6: the pages a bulk load wrote unlogged from `redo_lsn` to
/// `end_lsn`, each with the LSN of the last record naming it.
fn unlogged_pages(db: &Database, redo_lsn: u64, end_lsn: u64) -> Result<HashMap<PageId, u64>> {
    let mut reader = db.inner.wal.reader(redo_lsn);
    let mut pages = HashMap::new();
    while reader.end_lsn() < end_lsn {
        let record = next_to(db, &mut reader, end_lsn)?;
        if let Body::Unlogged {
            space,
            pages: named,
        } = &record.body
        {
            for &page_no in named {
                pages.insert(PageId::new(*space, page_no), record.lsn);
            }
        }
    }
    Ok(pages)
}

/// Repeat history from `redo_lsn` to `end_lsn` (REC-1), but for the pages
/// of spaces that restart without redo (REC-4), and for the changes of a
/// page before a bulk load wrote it unlogged (BULK-6): the load's image,
/// on the device since its checkpoint, is newer than them all, and a load
/// that never reached its checkpoint left the page to be freed unread.
fn redo(db: &Database, redo_lsn: u64, end_lsn: u64) -> Result<Redone> {
    let unlogged = unlogged_pages(db, redo_lsn, end_lsn)?;
    let mut reader = db.inner.wal.reader(redo_lsn);
    let mut done = Redone::default();
    while reader.end_lsn() < end_lsn {
        let record = next_to(db, &mut reader, end_lsn)?;
        let record_end = reader.end_lsn();
        for redo in record.body.redo() {
            if unlogged.get(&redo.page).is_some_and(|&at| record.lsn < at) {
                done.unlogged_skipped += 1;
                continue;
            }
            let space = db.inner.space(redo.page.space)?;
            if u64::from(redo.page.page_no) >= space.capacity_pages {
                return Err(Error::malformed(
                    "log record",
                    format!(
                        "record at LSN {} changes page {} beyond data space '{}'",
                        record.lsn, redo.page, space.name
                    ),
                ));
            }
            if restart_lsn(space).is_some() {
                done.page_log_skipped += 1;
                continue;
            }
            let handle = space.pool.fetch(redo.page)?;
            if handle.lsn() >= record_end {
                continue;
            }
            let mut image = handle.read(|bytes| bytes.to_vec());
            apply_redo(&mut image, redo)?;
            if page::stored_id(&image) != redo.page {
                page::set_id(&mut image, redo.page);
            }
            handle.install(&image, record.lsn, record_end);
            done.all += 1;
            if space.store.page_log().is_some() {
                done.page_log += 1;
            }
        }
    }
    Ok(done)
}

/// Roll back the losers together, newest record first (REC-2, REC-3); a
/// compensation record at or beyond `l_star` is not trusted (REC-4).
fn undo(db: &Database, losers: BTreeMap<u64, ActiveTxn>, l_star: Option<u64>) -> Result<u64> {
    let inner = &db.inner;
    // txn -> (next record to undo, last LSN written for it)
    let mut todo: BTreeMap<u64, (u64, u64)> = losers
        .values()
        .map(|t| (t.txn, (t.undo_next, t.last_lsn)))
        .collect();
    let mut undone = 0;
    while let Some((&txn, &(undo_next, last_lsn))) =
        todo.iter().max_by_key(|(_, (undo_next, _))| *undo_next)
    {
        if undo_next == 0 {
            inner.wal.append(txn, last_lsn, Body::Abort)?;
            todo.remove(&txn);
            // The stores that keep a log of each page's changes learn
            // that it ended aborted (PLOG-2): its records are no longer an
            // active transaction's. Nothing is forced for an abort.
            for page_log in inner.spaces.iter().filter_map(|s| s.store.page_log()) {
                page_log.transaction_ended(txn, false, 0, &*inner.wal)?;
            }
            continue;
        }
        let record = inner.wal.reader(undo_next).next_record()?.ok_or_else(|| {
            Error::malformed(
                "log",
                format!("record {undo_next} of transaction {txn} is missing"),
            )
        })?;
        if record.txn != txn {
            return Err(Error::malformed(
                "log",
                format!(
                    "record {undo_next} belongs to transaction {}, not {txn}",
                    record.txn
                ),
            ));
        }
        let next = match &record.body {
            Body::Update {
                undo: Some(undo), ..
            } => {
                let lsn = inner.compensate(undo, txn, last_lsn, record.prev_lsn)?;
                undone += 1;
                (record.prev_lsn, lsn)
            }
            Body::Compensation { .. } if l_star.is_some_and(|l| record.lsn >= l) => {
                (record.prev_lsn, last_lsn)
            }
            Body::Compensation { undo_next, .. } => (*undo_next, last_lsn),
            _ => (record.prev_lsn, last_lsn),
        };
        todo.insert(txn, next);
    }
    Ok(undone)
}
