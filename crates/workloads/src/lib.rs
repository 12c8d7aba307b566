//! # flashlab-workloads: the transactions the papers ran
//!
//! A [`Workload`] creates and loads its tables, runs one transaction at a
//! time for a client, and checks the database's consistency at the end.
//! [`driver::run`] runs many clients of a workload against a database for a
//! while, in whichever world the database lives, and measures what a
//! benchmark tool reports: throughput, latency percentiles, CPU
//! utilization, and the log columns of lee2008 Table 3.
//!
//! - [`update_commit`]: lee2008 section 4.1: update one random cached row,
//!   commit, repeat;
//! - [`tpcb`]: TPC-B (the pgbench transaction), with its consistency checks;
//! - [`tpcc`]: TPC-C (revision 5.11): nine tables, five transactions,
//!   consistency conditions 1 to 4, tpmC per type.

#![forbid(unsafe_code)]

pub mod driver;
pub mod tpcb;
pub mod tpcc;
pub mod update_commit;

use flashlab_engine::{Database, Result};
use rand_chacha::ChaCha8Rng;

/// A workload: its tables, its transaction, its consistency checks.
pub trait Workload: Send + Sync {
    /// The name used on the command line.
    fn name(&self) -> &'static str;
    /// Create and load the tables (run once, before the clients start).
    fn setup(&self, db: &Database) -> Result<()>;
    /// Run one transaction for `client`, commit included. A retryable error
    /// (a deadlock victim or serialization error) is retried by the driver.
    fn transaction(&self, db: &Database, client: u32, rng: &mut ChaCha8Rng) -> Result<()>;
    /// [`Workload::transaction`], returning what identifies the committed
    /// transaction to its client (TPC-B: the history id), if the workload
    /// has such an id. What `flashlab bench --acks` writes.
    fn transaction_acked(
        &self,
        db: &Database,
        client: u32,
        rng: &mut ChaCha8Rng,
    ) -> Result<Option<i64>> {
        self.transaction(db, client, rng).map(|()| None)
    }
    /// Continue on a database this workload loaded earlier (`flashlab bench
    /// --keep`): prepare to run more transactions, and return how many it
    /// already holds, as [`Workload::check`] counts them. Workloads that
    /// cannot say refuse.
    fn resume(&self, db: &Database) -> Result<u64> {
        let _ = db;
        Err(flashlab_engine::Error::Invalid(format!(
            "workload '{}' cannot continue on an existing database",
            self.name()
        )))
    }
    /// Check the database after a run in which `committed` transactions
    /// committed; `Err(text)` describes a violation.
    fn check(&self, db: &Database, committed: u64) -> Result<std::result::Result<(), String>>;
    /// Where the workload departs from its specification, in words.
    fn departures(&self) -> Vec<String>;
    /// Told by the driver when its measured interval begins (`true`) and
    /// ends (`false`), for workloads that measure per transaction type.
    fn measuring(&self, on: bool) {
        let _ = on;
    }
    /// A note for the progress line that ends an interval of
    /// `interval_ns` (TPC-C: its tpmC), if the workload has one.
    fn progress_note(&self, interval_ns: u64) -> Option<String> {
        let _ = interval_ns;
        None
    }
    /// Measurements per transaction type of the measured interval (empty
    /// for workloads with one type).
    fn transaction_types(&self) -> Vec<tpcc::TypeReport> {
        Vec::new()
    }
}

/// The workloads `flashlab bench` knows.
pub const WORKLOADS: [&str; 3] = ["update-commit", "tpcb", "tpcc"];

/// Options shared by the workloads.
#[derive(Clone, Debug)]
pub struct WorkloadOptions {
    /// TPC-B branches; update-commit rows are `scale * 1000`.
    pub scale: u32,
    /// TPC-B accounts per branch (the specification says 100,000).
    pub accounts_per_branch: u32,
    /// TPC-C's size, mix and seed.
    pub tpcc: tpcc::TpccOptions,
}

impl Default for WorkloadOptions {
    fn default() -> Self {
        WorkloadOptions {
            scale: 1,
            accounts_per_branch: tpcb::ACCOUNTS_PER_BRANCH,
            tpcc: tpcc::TpccOptions::default(),
        }
    }
}

/// Every row of `table`, read in a transaction of its own.
pub(crate) fn all_rows(
    db: &Database,
    table: &flashlab_engine::Table,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut txn = db.begin()?;
    let rows = txn.scan(
        table,
        std::ops::Bound::Unbounded,
        std::ops::Bound::Unbounded,
    )?;
    txn.commit()?;
    Ok(rows)
}

/// Run `load` with the database's CPU costs off (a load is not part of
/// what a run measures), then put them back.
pub(crate) fn uncharged<T>(db: &Database, load: impl FnOnce() -> Result<T>) -> Result<T> {
    let costs = db.config().cpu.clone();
    db.set_cpu_costs(flashlab_engine::config::CpuCosts::free());
    let loaded = load();
    db.set_cpu_costs(costs);
    loaded
}

/// Build a workload by name; `None` if unknown.
pub fn build(name: &str, options: &WorkloadOptions) -> Option<Box<dyn Workload>> {
    match name {
        "update-commit" => Some(Box::new(update_commit::UpdateCommit::new(options.scale))),
        "tpcb" => Some(Box::new(tpcb::TpcB::new(
            options.scale,
            options.accounts_per_branch,
        ))),
        "tpcc" => Some(Box::new(tpcc::TpcC::new(options.tpcc.clone()))),
        _ => None,
    }
}
