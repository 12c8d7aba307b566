//! Measuring what the engine's own events cost on this machine, for the
//! CPU model's calibration file ([`crate::cpu_calibration`]).
//!
//! Each price is a difference of two timed loops that differ in the one
//! event priced, with the engine's own counters saying how many of each
//! event a loop did:
//! - a **page access**: fixes and releases of resident pages of a cached
//!   table, in a stride over all of them (so the CPU caches miss as a
//!   tree descent's do);
//! - a **get**: a point read of that table, less its page accesses;
//! - a **begin** (a read-only transaction's begin and commit): one-read
//!   transactions less the read;
//! - a **KB of log**: update-commit transactions of 1,000-byte rows
//!   against 100-byte rows, divided by the extra log bytes;
//! - a **put**: transactions of eight updates against one, per extra
//!   update, less its page accesses and log bytes;
//! - a **commit**: update-commit transactions less the update, a begin,
//!   and their page accesses and log bytes;
//! - a **page I/O**: reads of a table twenty times the buffer against the
//!   same reads cached, per page read, at 4, 8 and 16 KB pages; the line
//!   through the three gives the fixed part and the part per KB;
//! - a **scanned row**: a full scan, less its page accesses.
//!
//! The data lives in files in a scratch directory (the real world's I/O
//! path: `pread` from the page cache), the log in memory with no sync, so
//! no device time is counted: the simulated world models the devices.
//! Every loop runs `rounds` times and each quantity is the median.

use std::ops::Bound;
use std::path::Path;
use std::time::Instant;

use super::{Database, Table};
use crate::config::{CpuCosts, DbConfig};
use crate::error::{Error, Result};
use crate::wal::Durability;

/// Rows of the deep (cached) table: three levels at 8 KB pages.
const DEEP_ROWS: u32 = 300_000;
/// Rows of the one-leaf table.
const LEAF_ROWS: u32 = 32;
/// Operations in one timed loop.
const LOOP_OPS: u32 = 20_000;
/// Updates a transaction of the put loop makes (the update-commit loop's
/// make one).
const PUTS_PER_TXN: u32 = 8;
/// The I/O table: this many times the buffer, so reads miss.
const IO_TABLE_FACTOR: u64 = 20;
/// The I/O loops' buffer.
const IO_BUFFER_BYTES: u64 = 4 << 20;
/// Page sizes of the I/O line.
const IO_PAGE_BYTES: [usize; 3] = [4096, 8192, 16384];

/// Host ns of each engine event, with how each was measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EventCosts {
    pub begin_ns: f64,
    pub get_ns: f64,
    pub put_ns: f64,
    pub commit_ns: f64,
    pub scan_row_ns: f64,
    pub page_access_ns: f64,
    pub page_io_ns: f64,
    pub page_io_ns_per_kb: f64,
    pub log_ns_per_kb: f64,
}

/// One timed loop: host ns per operation, and per operation the page
/// accesses, page reads and log bytes the engine counted.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    ns: f64,
    accesses: f64,
    reads: f64,
    log_bytes: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The per-field median of `rounds` runs of `f`.
fn median_sample(rounds: usize, mut f: impl FnMut() -> Result<Sample>) -> Result<Sample> {
    let samples = (0..rounds.max(1))
        .map(|_| f())
        .collect::<Result<Vec<_>>>()?;
    let m = |g: fn(&Sample) -> f64| median(samples.iter().map(g).collect());
    Ok(Sample {
        ns: m(|s| s.ns),
        accesses: m(|s| s.accesses),
        reads: m(|s| s.reads),
        log_bytes: m(|s| s.log_bytes),
    })
}

/// Time `ops` operations of `f` and read the counters around them.
fn timed(db: &Database, ops: u32, f: impl FnOnce() -> Result<()>) -> Result<Sample> {
    // A checkpoint first, so the log has room for the loop.
    db.flush()?;
    let before = db.stats();
    let t0 = Instant::now();
    f()?;
    let ns = t0.elapsed().as_nanos() as f64;
    let after = db.stats();
    let sum = |s: &super::DbStats, g: fn(&crate::buffer::BufferStats) -> u64| {
        s.buffers.values().map(g).sum::<u64>() as f64
    };
    let n = f64::from(ops);
    Ok(Sample {
        ns: ns / n,
        accesses: (sum(&after, |b| b.hits + b.misses) - sum(&before, |b| b.hits + b.misses)) / n,
        reads: (sum(&after, |b| b.reads) - sum(&before, |b| b.reads)) / n,
        log_bytes: (after.log.bytes_appended - before.log.bytes_appended) as f64 / n,
    })
}

/// A database in `dir` with `page_bytes` pages, `buffer_bytes` of buffer,
/// no CPU prices and a log in memory.
fn scratch_db(dir: &Path, page_bytes: usize, buffer_bytes: u64) -> Result<Database> {
    let mut config = DbConfig::simple("file", "memory", page_bytes, buffer_bytes);
    config.data[0].capacity_bytes = Some(1 << 30);
    config.log.capacity_bytes = Some(1 << 30);
    config.wal.durability = Durability::NoSync;
    config.cpu = CpuCosts::free();
    std::fs::create_dir_all(dir).map_err(|e| Error::Config(format!("{}: {e}", dir.display())))?;
    Database::builder(dir).config(config).create()
}

fn key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

/// The `i`th of a loop's keys among `rows`: a fixed stride, so each
/// loop touches the table everywhere, in the same order every round.
fn spread(i: u32, rows: u32) -> [u8; 4] {
    key(i.wrapping_mul(7919) % rows.max(1))
}

fn fill(db: &Database, table: &Table, rows: u32, value_bytes: usize) -> Result<()> {
    let value = vec![7u8; value_bytes];
    for chunk in (0..rows).collect::<Vec<_>>().chunks(10_000) {
        let mut txn = db.begin()?;
        for &i in chunk {
            txn.put(table, &key(i), &value)?;
        }
        txn.commit()?;
        db.flush()?;
    }
    Ok(())
}

fn gets(db: &Database, table: &Table, rows: u32) -> Result<Sample> {
    timed(db, LOOP_OPS, || {
        let mut txn = db.begin()?;
        for i in 0..LOOP_OPS {
            txn.get(table, &spread(i, rows))?;
        }
        txn.commit().map(|_| ())
    })
}

fn one_get_txns(db: &Database, table: &Table, rows: u32) -> Result<Sample> {
    timed(db, LOOP_OPS, || {
        for i in 0..LOOP_OPS {
            let mut txn = db.begin()?;
            txn.get(table, &spread(i, rows))?;
            txn.commit()?;
        }
        Ok(())
    })
}

/// Transactions of `puts` updates each, of `value_bytes` rows: a sample
/// per transaction.
fn update_txns(
    db: &Database,
    table: &Table,
    rows: u32,
    value_bytes: usize,
    puts: u32,
) -> Result<Sample> {
    let value = vec![9u8; value_bytes];
    let txns = LOOP_OPS / puts;
    timed(db, txns, || {
        for t in 0..txns {
            let mut txn = db.begin()?;
            for i in 0..puts {
                txn.put(table, &spread(t * puts + i, rows), &value)?;
            }
            txn.commit()?;
        }
        Ok(())
    })
}

fn scan(db: &Database, table: &Table, rows: u32) -> Result<Sample> {
    timed(db, rows, || {
        let mut txn = db.begin()?;
        txn.scan(table, Bound::Unbounded, Bound::Unbounded)?;
        txn.commit().map(|_| ())
    })
}

/// Measure [`EventCosts`] in scratch databases under `dir` (removed
/// after), each loop `rounds` times. Must run in a real-world runtime.
/// Fails, naming the price, when a difference comes out negative: the
/// machine was too noisy for the rounds given.
pub fn measure_events(dir: &Path, rounds: usize) -> Result<EventCosts> {
    let mut costs = cached_costs(&dir.join("cached"), rounds)?;
    let mut line = Vec::new();
    for page_bytes in IO_PAGE_BYTES {
        let per_read = read_cost(
            &dir.join(format!("io-{page_bytes}")),
            page_bytes,
            rounds,
            &costs,
        )?;
        line.push((page_bytes as f64 / 1024.0, per_read));
    }
    let _ = std::fs::remove_dir_all(dir);
    let (intercept, slope) = fit_line(&line);
    costs.page_io_ns = intercept;
    costs.page_io_ns_per_kb = slope;
    let all: Vec<String> = costs
        .named()
        .iter()
        .map(|(n, ns)| format!("{n} {ns:.1}"))
        .collect();
    for (name, ns) in costs.named() {
        if !(ns.is_finite() && ns >= 0.0) {
            return Err(Error::Config(format!(
                "the calibration is unstable: {name} came out {ns:.1} ns ({}); rerun on a quiet machine, or with more rounds",
                all.join(", ")
            )));
        }
    }
    Ok(costs)
}

impl EventCosts {
    /// Every price with its name.
    pub fn named(&self) -> [(&'static str, f64); 9] {
        [
            ("begin", self.begin_ns),
            ("get", self.get_ns),
            ("put", self.put_ns),
            ("commit", self.commit_ns),
            ("scan_row", self.scan_row_ns),
            ("page_access", self.page_access_ns),
            ("page_io", self.page_io_ns),
            ("page_io_per_kb", self.page_io_ns_per_kb),
            ("log_per_kb", self.log_ns_per_kb),
        ]
    }
}

/// Least squares through `(x, y)`: (intercept, slope).
fn fit_line(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let slope = sxy / sxx;
    (my - slope * mx, slope)
}

/// Every price but the page I/O's, from cached tables.
fn cached_costs(dir: &Path, rounds: usize) -> Result<EventCosts> {
    use super::catalog::TableSpec;
    let db = scratch_db(dir, 8192, 256 << 20)?;
    let leaf = db.create_table(TableSpec::bytes("leaf"))?;
    let deep = db.create_table(TableSpec::bytes("deep"))?;
    let wide = db.create_table(TableSpec::bytes("wide"))?;
    fill(&db, &leaf, LEAF_ROWS, 100)?;
    fill(&db, &deep, DEEP_ROWS, 100)?;
    fill(&db, &wide, DEEP_ROWS / 10, 1000)?;
    gets(&db, &deep, DEEP_ROWS)?;
    let access = median(
        (0..rounds.max(1))
            .map(|_| page_accesses(&db))
            .collect::<Result<Vec<_>>>()?,
    );
    let g_leaf = median_sample(rounds, || gets(&db, &leaf, LEAF_ROWS))?;
    let g_deep = median_sample(rounds, || gets(&db, &deep, DEEP_ROWS))?;
    let get = g_deep.ns - g_deep.accesses * access;
    let begin = median_sample(rounds, || one_get_txns(&db, &leaf, LEAF_ROWS))?.ns - g_leaf.ns;
    let uc = median_sample(rounds, || update_txns(&db, &deep, DEEP_ROWS, 100, 1))?;
    let multi = median_sample(rounds, || {
        update_txns(&db, &deep, DEEP_ROWS, 100, PUTS_PER_TXN)
    })?;
    let wide = median_sample(rounds, || update_txns(&db, &wide, DEEP_ROWS / 10, 1000, 1))?;
    let less_access = |s: &Sample| s.ns - s.accesses * access;
    let log_per_kb =
        (less_access(&wide) - less_access(&uc)) / ((wide.log_bytes - uc.log_bytes) / 1024.0);
    let less_log = |s: &Sample| less_access(s) - s.log_bytes / 1024.0 * log_per_kb;
    // The extra updates of the longer transactions, one of them.
    let extra = f64::from(PUTS_PER_TXN - 1);
    let put = (less_log(&multi) - less_log(&uc)) / extra;
    let commit = less_log(&uc) - put - begin;
    let scanned = median_sample(rounds, || scan(&db, &deep, DEEP_ROWS))?;
    db.close()?;
    Ok(EventCosts {
        begin_ns: begin,
        get_ns: get,
        put_ns: put,
        commit_ns: commit,
        scan_row_ns: less_access(&scanned),
        page_access_ns: access,
        page_io_ns: f64::NAN,
        page_io_ns_per_kb: f64::NAN,
        log_ns_per_kb: log_per_kb,
    })
}

/// Host ns of one fix and release of a resident page, over every
/// resident page of the first data space in a stride.
fn page_accesses(db: &Database) -> Result<f64> {
    use crate::page::PageId;
    let Some(pool) = db.inner.pools.values().next() else {
        return Err(Error::Config(
            "the calibration database has no buffer pool".into(),
        ));
    };
    let resident: Vec<PageId> = (1..pool.frames() as u32 * 2)
        .map(|n| PageId::new(0, n))
        .filter(|&id| pool.fetch_resident(id).is_some())
        .collect();
    if resident.len() < 1000 {
        return Err(Error::Config(format!(
            "the calibration's table left {} pages resident: too few to time",
            resident.len()
        )));
    }
    let t0 = Instant::now();
    for i in 0..LOOP_OPS as usize {
        let id = resident[i.wrapping_mul(7919) % resident.len()];
        drop(pool.fetch(id)?);
    }
    Ok(t0.elapsed().as_nanos() as f64 / f64::from(LOOP_OPS))
}

/// Host ns of one page read of `page_bytes`, its page accesses and the
/// get around it apart (at the prices `cached` measured).
fn read_cost(dir: &Path, page_bytes: usize, rounds: usize, cached: &EventCosts) -> Result<f64> {
    use super::catalog::TableSpec;
    let db = scratch_db(dir, page_bytes, IO_BUFFER_BYTES)?;
    let table = db.create_table(TableSpec::bytes("io"))?;
    // About 110 bytes a row with its key and slot.
    let rows = (IO_BUFFER_BYTES * IO_TABLE_FACTOR / 110) as u32;
    fill(&db, &table, rows, 100)?;
    db.flush()?;
    let miss = median_sample(rounds, || gets(&db, &table, rows))?;
    db.close()?;
    if miss.reads < 0.5 {
        return Err(Error::Config(format!(
            "the calibration's I/O loop at {page_bytes}-byte pages read {:.2} pages a get: its table is cached",
            miss.reads
        )));
    }
    Ok((miss.ns - cached.get_ns - miss.accesses * cached.page_access_ns) / miss.reads)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_through_the_page_sizes_splits_fixed_and_per_kb_costs() {
        let (a, b) = fit_line(&[(4.0, 1400.0), (8.0, 1800.0), (16.0, 2600.0)]);
        assert!(
            (a - 1000.0).abs() < 1e-6 && (b - 100.0).abs() < 1e-6,
            "{a} {b}"
        );
    }

    #[test]
    fn the_median_of_rounds_is_taken_field_by_field() {
        let mut n = 0.0;
        let s = median_sample(3, || {
            n += 1.0;
            Ok(Sample {
                ns: n,
                accesses: 10.0 - n,
                reads: 0.0,
                log_bytes: n * n,
            })
        })
        .unwrap();
        assert_eq!((s.ns, s.accesses, s.log_bytes), (2.0, 8.0, 4.0));
    }
}
