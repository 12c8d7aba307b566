//! Update-commit: lee2008 section 4.1.
//!
//! "A simple embedded SQL program": each client updates one random row of
//! a table cached in memory and commits, in a loop. Each transaction does
//! one update and one commit, so its cost is the log force: with the log on
//! a disk, clients wait for the platter; on flash, for the CPU (Table 2).

use flashlab_engine::{Database, Result, TableSpec};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::Workload;

/// Rows per scale unit.
pub const ROWS_PER_SCALE: u32 = 1_000;
/// Bytes of each row's value (a counter and a filler).
pub const ROW_BYTES: usize = 100;
/// Rows per loading transaction.
const LOAD_BATCH_ROWS: u32 = 1_000;

/// The update-commit workload.
pub struct UpdateCommit {
    rows: u32,
}

impl UpdateCommit {
    pub fn new(scale: u32) -> UpdateCommit {
        UpdateCommit {
            rows: scale.max(1) * ROWS_PER_SCALE,
        }
    }
}

/// Scan the table in one transaction: its row count and the sum of the
/// rows' commit counters (each row's first 8 bytes, little-endian; a shorter
/// value counts 0, which the check then reports as a mismatch).
pub fn counter_total(db: &Database) -> Result<(usize, u64)> {
    let table = db.table("uc")?;
    let rows = crate::all_rows(db, &table)?;
    let total = rows
        .iter()
        .map(|(_, v)| {
            u64::from_le_bytes(v.get(..8).and_then(|b| b.try_into().ok()).unwrap_or([0; 8]))
        })
        .sum();
    Ok((rows.len(), total))
}

fn key(row: u32) -> [u8; 4] {
    row.to_be_bytes()
}

impl Workload for UpdateCommit {
    fn name(&self) -> &'static str {
        "update-commit"
    }

    fn setup(&self, db: &Database) -> Result<()> {
        crate::uncharged(db, || {
            let table = db.create_table(TableSpec::bytes("uc"))?;
            for start in (0..self.rows).step_by(LOAD_BATCH_ROWS as usize) {
                let mut txn = db.begin()?;
                for row in start..(start + LOAD_BATCH_ROWS).min(self.rows) {
                    txn.put(&table, &key(row), &[0u8; ROW_BYTES])?;
                }
                txn.commit()?;
            }
            Ok(())
        })
    }

    fn transaction(&self, db: &Database, _client: u32, rng: &mut ChaCha8Rng) -> Result<()> {
        let table = db.table("uc")?;
        let row = rng.random_range(0..self.rows);
        let mut txn = db.begin()?;
        txn.update(&table, &key(row), |old| {
            let mut new = old.to_vec();
            let count = u64::from_le_bytes(
                new.get(..8)
                    .and_then(|b| b.try_into().ok())
                    .unwrap_or([0; 8]),
            );
            if new.len() >= 8 {
                new[..8].copy_from_slice(&(count + 1).to_le_bytes());
            }
            new
        })?;
        txn.commit()
    }

    fn check(&self, db: &Database, committed: u64) -> Result<std::result::Result<(), String>> {
        let (rows, total) = counter_total(db)?;
        if rows != self.rows as usize {
            return Ok(Err(format!("{rows} rows, expected {}", self.rows)));
        }
        if total != committed {
            return Ok(Err(format!(
                "the row counters add up to {total}, but {committed} transactions committed"
            )));
        }
        Ok(Ok(()))
    }

    fn departures(&self) -> Vec<String> {
        vec![format!(
            "the table has {} rows of {ROW_BYTES} bytes (lee2008 does not give its size, only that it is cached)",
            self.rows
        )]
    }
}
