//! TPC-B: the pgbench transaction.
//!
//! Per scale unit (branch): 1 branch, 10 tellers, 100,000 accounts. A
//! transaction picks a random teller, its branch, and an account: from the
//! teller's branch 85% of the time, from another branch otherwise (when
//! there is more than one), and a delta uniform in ±999,999; it adds the
//! delta to the account, reads the account's balance back, adds the delta
//! to the teller and the branch, appends a history row, and commits.
//!
//! Consistency (checked after every run, a violation fails it loudly): the
//! account balances, teller balances and branch balances all add up to the
//! same sum, and the history has one row per committed transaction.
//!
//! Departures from the specification are listed by [`TpcB::departures`]:
//! no terminals or think time (each client runs transactions back to back,
//! as lee2008's load generator and pgbench do), and the number of accounts
//! per branch may be lowered for quick simulated runs.

use flashlab_engine::row::{Column, Schema, Type, Value};
use flashlab_engine::{Database, Result, TableSpec};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::Workload;

/// Accounts per branch, by the specification.
pub const ACCOUNTS_PER_BRANCH: u32 = 100_000;
/// Tellers per branch.
pub const TELLERS_PER_BRANCH: u32 = 10;
/// Share of accounts taken from the teller's own branch.
pub const LOCAL_ACCOUNT_PERCENT: u32 = 85;
/// Largest delta magnitude.
pub const DELTA_MAX: i64 = 999_999;
/// Filler making each record 100 bytes, as the specification asks.
const FILLER_BYTES: u16 = 84;
const LOAD_BATCH_ROWS: u32 = 2_000;

/// The TPC-B workload.
pub struct TpcB {
    branches: u32,
    accounts_per_branch: u32,
    /// Next history row key (attempts that abort leave gaps).
    next_hid: std::sync::atomic::AtomicI64,
}

fn schema(columns: &[(&str, Type)]) -> Schema {
    let columns = columns
        .iter()
        .map(|(name, ty)| Column::new(*name, *ty))
        .collect();
    Schema::new(columns, vec![0]).expect("TPC-B schemas are valid")
}

/// Column of the balance in `branches` (bid, bbalance, filler).
const BRANCH_BALANCE: usize = 1;
/// Column of the balance in `tellers` and `accounts` (id, bid, balance, filler).
const BALANCE: usize = 2;

fn balance_table(id: &str, balance: &str) -> Schema {
    let mut columns = vec![(id, Type::Int64)];
    if id != "bid" {
        columns.push(("bid", Type::Int64));
    }
    columns.push((balance, Type::Int64));
    columns.push(("filler", Type::FixedStr(FILLER_BYTES)));
    schema(&columns)
}

fn filler() -> Value {
    Value::Str(" ".repeat(usize::from(FILLER_BYTES)))
}

impl TpcB {
    pub fn new(branches: u32, accounts_per_branch: u32) -> TpcB {
        TpcB {
            branches: branches.max(1),
            accounts_per_branch: accounts_per_branch.max(1),
            next_hid: std::sync::atomic::AtomicI64::new(0),
        }
    }

    fn accounts(&self) -> u32 {
        self.branches * self.accounts_per_branch
    }

    fn load(&self, db: &Database) -> Result<()> {
        let branches = db.create_table(TableSpec::typed(
            "branches",
            balance_table("bid", "bbalance"),
        ))?;
        let tellers = db.create_table(TableSpec::typed(
            "tellers",
            balance_table("tid", "tbalance"),
        ))?;
        let accounts = db.create_table(TableSpec::typed(
            "accounts",
            balance_table("aid", "abalance"),
        ))?;
        db.create_table(TableSpec::typed(
            "history",
            schema(&[
                ("hid", Type::Int64),
                ("tid", Type::Int64),
                ("bid", Type::Int64),
                ("aid", Type::Int64),
                ("delta", Type::Int64),
                ("mtime", Type::Int64),
            ]),
        ))?;
        let mut txn = db.begin()?;
        for b in 0..self.branches {
            txn.put_row(&branches, &[Value::Int(b.into()), Value::Int(0), filler()])?;
            for t in 0..TELLERS_PER_BRANCH {
                let tid = i64::from(b * TELLERS_PER_BRANCH + t);
                txn.put_row(
                    &tellers,
                    &[
                        Value::Int(tid),
                        Value::Int(b.into()),
                        Value::Int(0),
                        filler(),
                    ],
                )?;
            }
        }
        txn.commit()?;
        for start in (0..self.accounts()).step_by(LOAD_BATCH_ROWS as usize) {
            let rows: Vec<Vec<Value>> = (start..(start + LOAD_BATCH_ROWS).min(self.accounts()))
                .map(|aid| {
                    let bid = aid / self.accounts_per_branch;
                    vec![
                        Value::Int(aid.into()),
                        Value::Int(bid.into()),
                        Value::Int(0),
                        filler(),
                    ]
                })
                .collect();
            let mut txn = db.begin()?;
            txn.put_rows(&accounts, &rows)?;
            txn.commit()?;
        }
        Ok(())
    }
}

impl TpcB {
    /// One TPC-B transaction; returns the history id it committed.
    /// `attempting` learns the id just before the commit is tried, so a
    /// caller that loses the answer (a crash, a failed log force) knows
    /// which history row may or may not be there.
    pub fn transaction_hid(
        &self,
        db: &Database,
        rng: &mut ChaCha8Rng,
        attempting: impl FnOnce(i64),
    ) -> Result<i64> {
        let (branches, tellers, accounts, history) = (
            db.table("branches")?,
            db.table("tellers")?,
            db.table("accounts")?,
            db.table("history")?,
        );
        let tid = rng.random_range(0..self.branches * TELLERS_PER_BRANCH);
        let bid = tid / TELLERS_PER_BRANCH;
        let account_branch =
            if self.branches > 1 && rng.random_range(0..100) >= LOCAL_ACCOUNT_PERCENT {
                (bid + rng.random_range(1..self.branches)) % self.branches
            } else {
                bid
            };
        let aid = account_branch * self.accounts_per_branch
            + rng.random_range(0..self.accounts_per_branch);
        let delta = rng.random_range(-DELTA_MAX..=DELTA_MAX);
        let mut txn = db.begin()?;
        txn.update_row(&accounts, &[Value::Int(aid.into())], add(BALANCE, delta))?;
        txn.get_row(&accounts, &[Value::Int(aid.into())])?;
        txn.update_row(&tellers, &[Value::Int(tid.into())], add(BALANCE, delta))?;
        txn.update_row(
            &branches,
            &[Value::Int(bid.into())],
            add(BRANCH_BALANCE, delta),
        )?;
        let hid = self
            .next_hid
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mtime = flashlab_runtime::Rt::now_ns_current() as i64;
        let row = [hid, tid.into(), bid.into(), aid.into(), delta, mtime].map(Value::Int);
        txn.put_row(&history, &row)?;
        attempting(hid);
        txn.commit()?;
        Ok(hid)
    }

    /// Continue on a database loaded earlier (after a restart or a crash):
    /// new history ids start after the largest one present.
    pub fn resume(&self, db: &Database) -> Result<()> {
        let hids = self.history_ids(db)?;
        let next = hids.last().map_or(0, |&h| h + 1);
        self.next_hid
            .fetch_max(next, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Every history id present, in order.
    pub fn history_ids(&self, db: &Database) -> Result<Vec<i64>> {
        let history = db.table("history")?;
        let schema = history.def().schema.clone().expect("typed");
        let rows = crate::all_rows(db, &history)?;
        let mut hids = Vec::with_capacity(rows.len());
        for (_, bytes) in &rows {
            if let Some(Value::Int(hid)) = schema.decode_row(bytes)?.first() {
                hids.push(*hid);
            }
        }
        hids.sort_unstable();
        Ok(hids)
    }
}

fn add(column: usize, delta: i64) -> impl FnOnce(&mut Vec<Value>) {
    move |row: &mut Vec<Value>| {
        if let Some(Value::Int(balance)) = row.get_mut(column) {
            *balance += delta;
        }
    }
}

impl Workload for TpcB {
    fn name(&self) -> &'static str {
        "tpcb"
    }

    fn setup(&self, db: &Database) -> Result<()> {
        crate::uncharged(db, || self.load(db))
    }

    fn transaction(&self, db: &Database, _client: u32, rng: &mut ChaCha8Rng) -> Result<()> {
        self.transaction_hid(db, rng, |_| {}).map(|_| ())
    }

    fn transaction_acked(
        &self,
        db: &Database,
        _client: u32,
        rng: &mut ChaCha8Rng,
    ) -> Result<Option<i64>> {
        self.transaction_hid(db, rng, |_| {}).map(Some)
    }

    fn resume(&self, db: &Database) -> Result<u64> {
        TpcB::resume(self, db)?;
        Ok(self.history_ids(db)?.len() as u64)
    }

    fn check(&self, db: &Database, committed: u64) -> Result<std::result::Result<(), String>> {
        let mut txn = db.begin()?;
        let mut sum = |name: &str, column: usize| -> Result<(i64, usize)> {
            let table = db.table(name)?;
            let rows = txn.scan(
                &table,
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
            )?;
            let schema = table.def().schema.clone().expect("typed");
            let mut total = 0i64;
            for (_, bytes) in &rows {
                if let Some(Value::Int(v)) = schema.decode_row(bytes)?.get(column) {
                    total += v;
                }
            }
            Ok((total, rows.len()))
        };
        let (accounts, _) = sum("accounts", BALANCE)?;
        let (tellers, _) = sum("tellers", BALANCE)?;
        let (branches, _) = sum("branches", BRANCH_BALANCE)?;
        let (deltas, history_rows) = sum("history", 4)?;
        txn.commit()?;
        if accounts != tellers || tellers != branches || branches != deltas {
            return Ok(Err(format!(
                "balances disagree: accounts {accounts}, tellers {tellers}, branches {branches}, history deltas {deltas}"
            )));
        }
        if history_rows as u64 != committed {
            return Ok(Err(format!(
                "{history_rows} history rows but {committed} committed transactions"
            )));
        }
        Ok(Ok(()))
    }

    fn departures(&self) -> Vec<String> {
        let mut out = vec![
            "no terminals or think time: each client runs transactions back to back".to_string(),
        ];
        if self.accounts_per_branch != ACCOUNTS_PER_BRANCH {
            out.push(format!(
                "{} accounts per branch instead of {ACCOUNTS_PER_BRANCH} (a smaller load; contention is on branches and tellers)",
                self.accounts_per_branch
            ));
        }
        out
    }
}
