//! The workloads the crash harness runs, each with a *ledger*: what its
//! clients were told (acknowledged commits) and what they tried but never
//! heard back about (a commit cut off by the crash or refused after a log
//! failure: *in doubt*). After recovery, [`CrashWorkload::check`] compares
//! the database with the ledger:
//!
//! * every acknowledged commit is present;
//! * every effect present belongs to an acknowledged or in-doubt commit
//!   (nothing rolled back, refused or never committed is visible);
//! * the workload's own invariants hold (money is conserved; TPC-B's
//!   balances agree, through `flashlab_workloads::tpcb::TpcB::check`;
//!   update-commit's counters add up).
//!
//! Tables are small (tens to hundreds of rows) so that a seed costs
//! milliseconds of host time and the buffer pool is always stealing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use flashlab_engine::{Database, Result, TableSpec};
use flashlab_workloads::Workload;
use flashlab_workloads::tpcb::TpcB;
use flashlab_workloads::update_commit::{self, UpdateCommit};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Accounts of the bank workload.
pub const BANK_ACCOUNTS: u32 = 48;
/// Opening balance of each account.
pub const BANK_BALANCE: i64 = 1_000;
/// Percent of bank transactions that write a marker and then roll back.
pub const BANK_ABORT_PERCENT: u32 = 10;

/// What a client step came to.
pub enum Step {
    /// Committed and acknowledged.
    Acked,
    /// Rolled back on purpose (its effects must never be visible).
    Aborted,
}

/// A workload with a ledger. See the module documentation.
pub trait CrashWorkload: Send + Sync {
    fn name(&self) -> &'static str;
    /// Create and load the tables.
    fn setup(&self, db: &Database) -> Result<()>;
    /// Prepare to continue on a recovered database.
    fn resume(&self, db: &Database) -> Result<()>;
    /// One transaction for `client`, recorded in the ledger.
    fn step(&self, db: &Database, client: u32, rng: &mut ChaCha8Rng) -> Result<Step>;
    /// Compare the recovered database with the ledger.
    fn check(&self, db: &Database) -> Result<std::result::Result<(), String>>;
    /// Acknowledged commits so far.
    fn acked(&self) -> u64;
    /// Commits whose outcome the client never learned.
    fn in_doubt(&self) -> u64;
}

/// Build a crash workload by name.
pub fn build(name: &str, tpcb_accounts: u32) -> Option<Box<dyn CrashWorkload>> {
    match name {
        "bank" => Some(Box::new(Bank::default())),
        "tpcb" => Some(Box::new(Tpcb::new(tpcb_accounts))),
        "update-commit" => Some(Box::new(Counters::default())),
        _ => None,
    }
}

// ---------------------------------------------------------------- bank

#[derive(Default)]
struct BankLedger {
    /// client -> highest acknowledged sequence number.
    acked: BTreeMap<u32, u64>,
    /// client -> highest sequence number whose commit was attempted.
    attempted: BTreeMap<u32, u64>,
    /// client -> next sequence number (re-read from the database after a
    /// restart).
    next: BTreeMap<u32, u64>,
    acked_total: u64,
    in_doubt: u64,
}

/// Transfers between accounts; each commit also inserts `ack/CLIENT/SEQ`,
/// so the database itself says which commits it kept. Some transactions
/// insert `ghost/CLIENT/SEQ` and roll back.
#[derive(Default)]
pub struct Bank {
    ledger: Mutex<BankLedger>,
}

fn account_key(i: u32) -> Vec<u8> {
    format!("acct{i:04}").into_bytes()
}

fn ack_key(client: u32, seq: u64) -> Vec<u8> {
    format!("ack/{client:03}/{seq:08}").into_bytes()
}

impl CrashWorkload for Bank {
    fn name(&self) -> &'static str {
        "bank"
    }

    fn setup(&self, db: &Database) -> Result<()> {
        let t = db.create_table(TableSpec::bytes("bank"))?;
        let mut txn = db.begin()?;
        for i in 0..BANK_ACCOUNTS {
            txn.put(&t, &account_key(i), &BANK_BALANCE.to_le_bytes())?;
        }
        txn.commit()
    }

    fn resume(&self, db: &Database) -> Result<()> {
        let t = db.table("bank")?;
        let mut txn = db.begin()?;
        let acks = txn.scan_prefix(&t, b"ack/")?;
        txn.commit()?;
        let mut counts: BTreeMap<u32, u64> = BTreeMap::new();
        for (k, _) in acks {
            if let Some(client) = parse_client(&k) {
                *counts.entry(client).or_default() += 1;
            }
        }
        let mut ledger = self.ledger.lock().expect("ledger");
        ledger.next = counts.into_iter().map(|(c, n)| (c, n + 1)).collect();
        Ok(())
    }

    fn step(&self, db: &Database, client: u32, rng: &mut ChaCha8Rng) -> Result<Step> {
        let t = db.table("bank")?;
        let seq = *self
            .ledger
            .lock()
            .expect("ledger")
            .next
            .entry(client)
            .or_insert(1);
        let from = rng.random_range(0..BANK_ACCOUNTS);
        let to = (from + rng.random_range(1..BANK_ACCOUNTS)) % BANK_ACCOUNTS;
        let amount = rng.random_range(1..50i64);
        let abort = rng.random_range(0..100) < BANK_ABORT_PERCENT;
        let mut txn = db.begin()?;
        // Read-modify-write through `update`, so that the transfer is
        // correct under read committed as well as snapshot isolation.
        for (account, delta) in [(from, -amount), (to, amount)] {
            let changed = txn.update(&t, &account_key(account), |old| {
                let balance = i64::from_le_bytes(old.try_into().unwrap_or([0; 8]));
                (balance + delta).to_le_bytes().to_vec()
            })?;
            if changed.is_none() {
                return Err(flashlab_engine::Error::Invalid(format!(
                    "account {account} is missing"
                )));
            }
        }
        if abort {
            txn.put(&t, format!("ghost/{client:03}/{seq:08}").as_bytes(), b"")?;
            txn.abort()?;
            return Ok(Step::Aborted);
        }
        txn.put(&t, &ack_key(client, seq), b"")?;
        {
            let mut ledger = self.ledger.lock().expect("ledger");
            ledger.attempted.insert(client, seq);
            ledger.in_doubt += 1;
        }
        txn.commit()?;
        let mut ledger = self.ledger.lock().expect("ledger");
        ledger.in_doubt -= 1;
        ledger.acked.insert(client, seq);
        ledger.acked_total += 1;
        ledger.next.insert(client, seq + 1);
        Ok(Step::Acked)
    }

    fn check(&self, db: &Database) -> Result<std::result::Result<(), String>> {
        let t = db.table("bank")?;
        let mut txn = db.begin()?;
        let rows = txn.scan(&t, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)?;
        txn.commit()?;
        let mut total = 0i64;
        let mut accounts = 0;
        let mut present: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for (k, v) in &rows {
            if k.starts_with(b"acct") {
                accounts += 1;
                total += i64::from_le_bytes(v.as_slice().try_into().unwrap_or([0; 8]));
            } else if k.starts_with(b"ghost/") {
                return Ok(Err(format!(
                    "a rolled-back transaction is visible: {}",
                    String::from_utf8_lossy(k)
                )));
            } else if let (Some(client), Some(seq)) = (parse_client(k), parse_seq(k)) {
                present.entry(client).or_default().push(seq);
            } else {
                return Ok(Err(format!(
                    "unexpected key {}",
                    String::from_utf8_lossy(k)
                )));
            }
        }
        let expected = i64::from(BANK_ACCOUNTS) * BANK_BALANCE;
        if accounts != BANK_ACCOUNTS || total != expected {
            return Ok(Err(format!(
                "{accounts} accounts hold {total}; expected {BANK_ACCOUNTS} holding {expected}"
            )));
        }
        let ledger = self.ledger.lock().expect("ledger");
        let clients: BTreeSet<u32> = present.keys().chain(ledger.acked.keys()).copied().collect();
        for client in clients {
            let seqs = present.remove(&client).unwrap_or_default();
            let n = seqs.len() as u64;
            if seqs != (1..=n).collect::<Vec<u64>>() {
                return Ok(Err(format!(
                    "client {client}: commits present are not a prefix: {seqs:?}"
                )));
            }
            let acked = ledger.acked.get(&client).copied().unwrap_or(0);
            let attempted = ledger.attempted.get(&client).copied().unwrap_or(0);
            if n < acked {
                return Ok(Err(format!(
                    "client {client}: {acked} commits acknowledged, {n} present: LOST COMMITS"
                )));
            }
            if n > attempted.max(acked) {
                return Ok(Err(format!(
                    "client {client}: {n} commits present, only {attempted} ever attempted"
                )));
            }
        }
        Ok(Ok(()))
    }

    fn acked(&self) -> u64 {
        self.ledger.lock().expect("ledger").acked_total
    }

    fn in_doubt(&self) -> u64 {
        self.ledger.lock().expect("ledger").in_doubt
    }
}

fn parse_client(key: &[u8]) -> Option<u32> {
    let text = std::str::from_utf8(key).ok()?;
    text.split('/').nth(1)?.parse().ok()
}

fn parse_seq(key: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(key).ok()?;
    text.split('/').nth(2)?.parse().ok()
}

// ---------------------------------------------------------------- TPC-B

#[derive(Default)]
struct TpcbLedger {
    acked: BTreeSet<i64>,
    /// History ids whose commit was tried; removed when acknowledged.
    in_doubt: BTreeSet<i64>,
}

/// TPC-B (`flashlab_workloads::tpcb`), one branch, with every history id
/// recorded.
pub struct Tpcb {
    tpcb: TpcB,
    ledger: Mutex<TpcbLedger>,
}

impl Tpcb {
    pub fn new(accounts: u32) -> Tpcb {
        Tpcb {
            tpcb: TpcB::new(1, accounts),
            ledger: Mutex::new(TpcbLedger::default()),
        }
    }
}

impl CrashWorkload for Tpcb {
    fn name(&self) -> &'static str {
        "tpcb"
    }

    fn setup(&self, db: &Database) -> Result<()> {
        self.tpcb.setup(db)
    }

    fn resume(&self, db: &Database) -> Result<()> {
        self.tpcb.resume(db)
    }

    fn step(&self, db: &Database, _client: u32, rng: &mut ChaCha8Rng) -> Result<Step> {
        let hid = self.tpcb.transaction_hid(db, rng, |hid| {
            self.ledger.lock().expect("ledger").in_doubt.insert(hid);
        })?;
        let mut ledger = self.ledger.lock().expect("ledger");
        ledger.in_doubt.remove(&hid);
        ledger.acked.insert(hid);
        Ok(Step::Acked)
    }

    fn check(&self, db: &Database) -> Result<std::result::Result<(), String>> {
        let present: BTreeSet<i64> = self.tpcb.history_ids(db)?.into_iter().collect();
        {
            let ledger = self.ledger.lock().expect("ledger");
            if let Some(lost) = ledger.acked.difference(&present).next() {
                let n = ledger.acked.difference(&present).count();
                return Ok(Err(format!(
                    "{n} acknowledged history rows missing (first: hid {lost}): LOST COMMITS"
                )));
            }
            let known: BTreeSet<i64> = ledger.acked.union(&ledger.in_doubt).copied().collect();
            if let Some(extra) = present.difference(&known).next() {
                return Ok(Err(format!(
                    "history row {extra} is present but its transaction was never committed"
                )));
            }
        }
        self.tpcb.check(db, present.len() as u64)
    }

    fn acked(&self) -> u64 {
        self.ledger.lock().expect("ledger").acked.len() as u64
    }

    fn in_doubt(&self) -> u64 {
        self.ledger.lock().expect("ledger").in_doubt.len() as u64
    }
}

// ---------------------------------------------------------------- update-commit

#[derive(Default)]
struct CounterLedger {
    acked: u64,
    in_doubt: u64,
}

/// Update-commit (`flashlab_workloads::update_commit`): each commit adds one
/// to a row's counter, so the counters add up to the commits kept.
pub struct Counters {
    workload: UpdateCommit,
    ledger: Mutex<CounterLedger>,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            workload: UpdateCommit::new(1),
            ledger: Mutex::new(CounterLedger::default()),
        }
    }
}

impl CrashWorkload for Counters {
    fn name(&self) -> &'static str {
        "update-commit"
    }

    fn setup(&self, db: &Database) -> Result<()> {
        self.workload.setup(db)
    }

    fn resume(&self, _db: &Database) -> Result<()> {
        Ok(())
    }

    fn step(&self, db: &Database, client: u32, rng: &mut ChaCha8Rng) -> Result<Step> {
        // The commit is the last thing the transaction does: count it in
        // doubt for the whole attempt.
        self.ledger.lock().expect("ledger").in_doubt += 1;
        let result = self.workload.transaction(db, client, rng);
        let mut ledger = self.ledger.lock().expect("ledger");
        match result {
            Ok(()) => {
                ledger.in_doubt -= 1;
                ledger.acked += 1;
                Ok(Step::Acked)
            }
            Err(e) if e.is_retryable() => {
                ledger.in_doubt -= 1;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    fn check(&self, db: &Database) -> Result<std::result::Result<(), String>> {
        let (_, total) = update_commit::counter_total(db)?;
        let (acked, in_doubt) = {
            let l = self.ledger.lock().expect("ledger");
            (l.acked, l.in_doubt)
        };
        if total < acked {
            return Ok(Err(format!(
                "counters add up to {total}, but {acked} commits were acknowledged: LOST COMMITS"
            )));
        }
        if total > acked + in_doubt {
            return Ok(Err(format!(
                "counters add up to {total}: more than the {acked} acknowledged and {in_doubt} in-doubt commits"
            )));
        }
        self.workload.check(db, total)
    }

    fn acked(&self) -> u64 {
        self.ledger.lock().expect("ledger").acked
    }

    fn in_doubt(&self) -> u64 {
        self.ledger.lock().expect("ledger").in_doubt
    }
}
