//! TPC-C (specification revision 5.11): the order-entry benchmark three of
//! the four papers ran.
//!
//! **Schema** ([`schema`]): the nine tables with the specification's keys,
//! a CUSTOMER index on (c_w_id, c_d_id, c_last, c_first) and an ORDER index
//! on (o_w_id, o_d_id, o_c_id, o_id). **Population** ([`load`]): 100,000
//! items; per warehouse 100,000 stock rows and 10 districts; per district
//! 3,000 customers with one history row each, 3,000 orders (a random
//! permutation of the customers) with 5 to 15 lines each, the last 900 of
//! them undelivered and in NEW-ORDER. Deterministic by seed, inserted in
//! key order in batches. **Randomness** ([`random`]): NURand with its C
//! constants, the C_LAST run constant kept 65 to 119 (not 96 or 112) from
//! the load one. **Transactions** ([`txn`]): New-Order (1% roll back on an
//! unused item, 1% of lines from a remote warehouse), Payment (60% by last
//! name, 15% for a remote warehouse's customer), Order-Status (60% by last
//! name), Delivery (inline, one transaction for the ten districts),
//! Stock-Level (distinct items of the last 20 orders under a threshold).
//! **Consistency** ([`check`]): conditions 1 to 4 of clause 3.3.2.
//!
//! **Terminals.** The driver's clients are the terminals. Terminal `t` has
//! home warehouse `t mod W + 1` and, for Stock-Level, the fixed district
//! `(t div W) mod 10 + 1` (clause 2.8.1.1); 10 per warehouse by default.
//! The transaction type is drawn per transaction from the mix (45/43/4/4/4
//! by default) rather than dealt from a deck of cards (clause 5.2.4.2);
//! keying and think times (clause 5.2.5) are off by default, as in the
//! papers' maximum-throughput runs, and on with [`TpccOptions::think`].
//!
//! **Measuring.** A transaction chosen as a deadlock victim (or refused by a
//! full log) is retried by its terminal with the same input, and its
//! latency runs from the first try to the end of the last. Per type:
//! count, rollbacks, retries and an HDR histogram of latency, measured
//! while the driver measures ([`crate::Workload::measuring`]). tpmC counts
//! every New-Order completed in the measured interval, rolled-back ones
//! included (clause 2.4.2.3 counts them as completed business).
//!
//! Nothing here depends on the page store below the engine's tables: the
//! In-Page Logging and log-structured stores run this workload unchanged.

pub mod check;
pub mod load;
pub mod random;
pub mod schema;
pub mod txn;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use flashlab_engine::{Database, Error, Result};
use flashlab_runtime::{NS_PER_S, Rt};
use hdrhistogram::Histogram;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::Workload;
use random::Constants;
use schema::Tables;

/// Districts per warehouse (fixed by the specification).
pub const DISTRICTS_PER_WAREHOUSE: u32 = 10;
/// Items, by the specification.
pub const ITEMS: u32 = 100_000;
/// Customers per district, by the specification.
pub const CUSTOMERS_PER_DISTRICT: u32 = 3_000;
/// Of the specification's 3,000 initial orders per district, the last 900
/// are new orders; scaled populations keep the ratio.
const NEW_ORDERS_PER_3000: u32 = 900;
/// Terminals per warehouse, by the specification.
pub const TERMINALS_PER_WAREHOUSE: u32 = 10;
/// Most warehouses `flashlab bench tpcc` accepts (about 1 TB of rows).
pub const WAREHOUSES_MAX: u32 = 10_000;
/// tpmC per warehouse at 100% efficiency: the most 10 terminals can key in
/// with keying and think times (clause 4.2).
pub const TPMC_PER_WAREHOUSE_MAX: f64 = 12.86;
/// Largest divisor of keying and think times.
pub const THINK_DIVISOR_MAX: f64 = 1000.0;
/// Most shared database connections.
pub const CONNECTIONS_MAX: u32 = 100_000;
/// Tries of one transaction before a terminal gives up on it.
const TRIES_MAX: u32 = 1_000;
/// Longest latency the histograms hold (10 minutes, in microseconds).
const LATENCY_US_MAX: u64 = 600_000_000;
/// Minimum keying times and mean think times, seconds (clause 5.2.5.7),
/// in mix order; think times are cut at 10 times their mean.
const KEYING_S: [f64; 5] = [18.0, 3.0, 2.0, 2.0, 2.0];
const THINK_MEAN_S: [f64; 5] = [12.0, 12.0, 10.0, 5.0, 5.0];
const THINK_CUT_MEANS: f64 = 10.0;

/// The five transaction types, in mix order.
pub const TYPES: [&str; 5] = [
    "new-order",
    "payment",
    "order-status",
    "delivery",
    "stock-level",
];

/// The transaction mix: percent of each type, in [`TYPES`] order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mix(pub [u32; 5]);

impl Default for Mix {
    fn default() -> Mix {
        Mix([45, 43, 4, 4, 4])
    }
}

impl Mix {
    /// Parse "45,43,4,4,4": five whole percentages adding up to 100.
    pub fn parse(text: &str) -> std::result::Result<Mix, String> {
        let parts: Vec<&str> = text.split(',').map(str::trim).collect();
        let bad = || {
            format!(
                "--mix '{text}' must be five percentages (new-order, payment, order-status, delivery, stock-level) adding up to 100, like 45,43,4,4,4"
            )
        };
        if parts.len() != 5 {
            return Err(bad());
        }
        let mut mix = [0u32; 5];
        for (slot, part) in mix.iter_mut().zip(&parts) {
            *slot = part.parse().map_err(|_| bad())?;
        }
        if mix.iter().map(|&p| u64::from(p)).sum::<u64>() != 100 {
            return Err(bad());
        }
        Ok(Mix(mix))
    }

    /// Draw a type (index into [`TYPES`]).
    pub fn pick(&self, rng: &mut impl Rng) -> usize {
        let mut draw = rng.random_range(0..100u32);
        for (kind, &percent) in self.0.iter().enumerate() {
            if draw < percent {
                return kind;
            }
            draw -= percent;
        }
        0
    }
}

/// TPC-C's size and behaviour.
#[derive(Clone, Debug)]
pub struct TpccOptions {
    pub warehouses: u32,
    /// Items (and stock rows per warehouse); the specification's 100,000.
    pub items: u32,
    /// Customers (and initial orders) per district; the specification's 3,000.
    pub customers_per_district: u32,
    pub mix: Mix,
    /// Keying and think times (off: terminals run back to back).
    pub think: bool,
    /// Keying and think times are divided by this (1: the specification's).
    /// A scaled-down study runs 1/k of the warehouses with times divided by
    /// k, so that the same load reaches the database from fewer terminals.
    pub think_divisor: f64,
    /// Warehouses the terminals work on (home and remote), the first ones
    /// of the loaded `warehouses`; 0: all of them. DBT2 runs this way on a
    /// larger loaded database.
    pub active_warehouses: u32,
    /// Database connections the terminals share (DBT2 keeps 20): a
    /// terminal waits for a free one before each transaction, and its
    /// response time includes the wait. 0: a connection per terminal.
    pub connections: u32,
    /// Seed of the population and of NURand's constants.
    pub seed: u64,
    /// How the load's pages reach the log: not at all by default, a
    /// checkpoint per table making them durable (BULK-6).
    pub load_logging: flashlab_engine::BulkLogging,
}

impl Default for TpccOptions {
    fn default() -> Self {
        TpccOptions {
            warehouses: 1,
            items: ITEMS,
            customers_per_district: CUSTOMERS_PER_DISTRICT,
            mix: Mix::default(),
            think: false,
            think_divisor: 1.0,
            active_warehouses: 0,
            connections: 0,
            seed: 1,
            load_logging: flashlab_engine::BulkLogging::default(),
        }
    }
}

impl TpccOptions {
    /// Warehouses the terminals work on.
    pub fn active(&self) -> u32 {
        if self.active_warehouses == 0 {
            self.warehouses
        } else {
            self.active_warehouses.min(self.warehouses)
        }
    }

    pub fn orders_per_district(&self) -> u32 {
        self.customers_per_district
    }

    pub fn new_orders_per_district(&self) -> u32 {
        self.customers_per_district * NEW_ORDERS_PER_3000 / CUSTOMERS_PER_DISTRICT
    }

    /// The first order id still undelivered at load (2,101).
    pub fn first_new_order_id(&self) -> u32 {
        self.orders_per_district() - self.new_orders_per_district() + 1
    }

    /// Last names are made from 0 to this number: 999, fewer when a
    /// district has fewer than 1,000 customers (every name must exist).
    pub fn last_name_number_max(&self) -> u32 {
        random::LAST_NAME_NUMBER_MAX.min(self.customers_per_district - 1)
    }

    /// Check sizes; the error names the option.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if !(1..=WAREHOUSES_MAX).contains(&self.warehouses) {
            return Err(format!(
                "--warehouses {} must be 1 to {WAREHOUSES_MAX}",
                self.warehouses
            ));
        }
        if self.active_warehouses > self.warehouses {
            return Err(format!(
                "--active-warehouses {} must be at most --warehouses {}",
                self.active_warehouses, self.warehouses
            ));
        }
        if !(self.think_divisor.is_finite()
            && (1.0..=THINK_DIVISOR_MAX).contains(&self.think_divisor))
        {
            return Err(format!(
                "--think-divisor {} must be 1 to {THINK_DIVISOR_MAX}",
                self.think_divisor
            ));
        }
        if self.connections > CONNECTIONS_MAX {
            return Err(format!(
                "--connections {} must be at most {CONNECTIONS_MAX}",
                self.connections
            ));
        }
        if !(1..=ITEMS).contains(&self.items) {
            return Err(format!("--items {} must be 1 to {ITEMS}", self.items));
        }
        if !(1..=CUSTOMERS_PER_DISTRICT).contains(&self.customers_per_district) {
            return Err(format!(
                "--customers-per-district {} must be 1 to {CUSTOMERS_PER_DISTRICT}",
                self.customers_per_district
            ));
        }
        Ok(())
    }
}

/// Latency percentiles of one type, in milliseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TypeLatency {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

/// One transaction type's measurements.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TypeReport {
    pub name: String,
    /// Completed in the measured interval (rolled back New-Orders included).
    pub count: u64,
    pub rollbacks: u64,
    pub retries: u64,
    pub latency_ms: TypeLatency,
}

struct TypeStats {
    count: u64,
    rollbacks: u64,
    retries: u64,
    histogram: Histogram<u64>,
}

impl TypeStats {
    fn new() -> TypeStats {
        TypeStats {
            count: 0,
            rollbacks: 0,
            retries: 0,
            histogram: Histogram::new_with_bounds(1, LATENCY_US_MAX, 3)
                .expect("valid histogram bounds"),
        }
    }

    fn report(&self, name: &str) -> TypeReport {
        let h = &self.histogram;
        let ms = |q: f64| h.value_at_quantile(q) as f64 / 1e3;
        TypeReport {
            name: name.to_string(),
            count: self.count,
            rollbacks: self.rollbacks,
            retries: self.retries,
            latency_ms: TypeLatency {
                mean: h.mean() / 1e3,
                p50: ms(0.50),
                p90: ms(0.90),
                p95: ms(0.95),
                p99: ms(0.99),
                max: h.max() as f64 / 1e3,
            },
        }
    }
}

/// One transaction's input, drawn before the first try.
enum Input {
    NewOrder(txn::NewOrderInput),
    Payment(txn::PaymentInput),
    OrderStatus(txn::OrderStatusInput),
    Delivery { w: u32, carrier: i64 },
    StockLevel { w: u32, d: u32, threshold: i64 },
}

/// The TPC-C workload.
pub struct TpcC {
    options: TpccOptions,
    constants: Constants,
    run_constants: Constants,
    next_h_id: AtomicI64,
    measuring: AtomicBool,
    stats: Mutex<Vec<TypeStats>>,
    /// New-Orders counted at the last progress line.
    new_orders_at_last_line: AtomicU64,
    /// Free shared connections ([`TpccOptions::connections`]).
    free_connections: flashlab_runtime::Mutex<u32>,
    connection_freed: flashlab_runtime::Condvar,
    /// Most connections ever in use at once.
    connections_in_use_max: AtomicU64,
}

impl TpcC {
    pub fn new(options: TpccOptions) -> TpcC {
        let constants = Constants::load(options.seed);
        let run_constants = Constants::run(&constants, options.seed);
        let loaded_history = i64::from(options.warehouses)
            * i64::from(DISTRICTS_PER_WAREHOUSE)
            * i64::from(options.customers_per_district);
        let connections = options.connections;
        TpcC {
            options,
            constants,
            run_constants,
            next_h_id: AtomicI64::new(loaded_history + 1),
            measuring: AtomicBool::new(false),
            stats: Mutex::new(TYPES.iter().map(|_| TypeStats::new()).collect()),
            new_orders_at_last_line: AtomicU64::new(0),
            free_connections: flashlab_runtime::Mutex::new(connections),
            connection_freed: flashlab_runtime::Condvar::new(),
            connections_in_use_max: AtomicU64::new(0),
        }
    }

    pub fn options(&self) -> &TpccOptions {
        &self.options
    }

    /// NURand's constants: the load's and the run's.
    pub fn constants(&self) -> (Constants, Constants) {
        (self.constants, self.run_constants)
    }

    /// Terminal `client`'s home warehouse and Stock-Level district.
    pub fn home(&self, client: u32) -> (u32, u32) {
        let active = self.options.active();
        let w = client % active + 1;
        let d = (client / active) % DISTRICTS_PER_WAREHOUSE + 1;
        (w, d)
    }

    fn draw(&self, kind: usize, client: u32, rng: &mut ChaCha8Rng) -> Input {
        let (w, d) = self.home(client);
        let (o, c) = (&self.options, &self.run_constants);
        match kind {
            0 => Input::NewOrder(txn::new_order_input(rng, w, o, c)),
            1 => Input::Payment(txn::payment_input(rng, w, o, c)),
            2 => Input::OrderStatus(txn::order_status_input(rng, w, o, c)),
            3 => Input::Delivery {
                w,
                carrier: txn::delivery_carrier(rng),
            },
            _ => Input::StockLevel {
                w,
                d,
                threshold: txn::stock_level_threshold(rng),
            },
        }
    }

    /// Run one input once; true if it rolled back.
    fn execute(&self, db: &Database, input: &Input) -> Result<bool> {
        let t = Tables::open(db)?;
        match input {
            Input::NewOrder(i) => {
                Ok(txn::new_order(db, &t, i)? == txn::NewOrderOutcome::RolledBack)
            }
            Input::Payment(p) => {
                let h_id = self.next_h_id.fetch_add(1, Ordering::Relaxed);
                txn::payment(db, &t, p, h_id).map(|_| false)
            }
            Input::OrderStatus(s) => txn::order_status(db, &t, s).map(|_| false),
            Input::Delivery { w, carrier } => txn::delivery(db, &t, *w, *carrier).map(|_| false),
            Input::StockLevel { w, d, threshold } => {
                txn::stock_level(db, &t, *w, *d, *threshold).map(|_| false)
            }
        }
    }

    /// Run one input to completion, retrying retryable failures; returns
    /// (rolled back, retries).
    fn run_to_end(&self, db: &Database, input: &Input) -> Result<(bool, u64)> {
        let mut retries = 0;
        loop {
            match self.execute(db, input) {
                Ok(rolled_back) => return Ok((rolled_back, retries)),
                Err(e) if e.is_retryable() && retries + 1 < u64::from(TRIES_MAX) => retries += 1,
                Err(e) => return Err(e),
            }
        }
    }

    fn record(&self, kind: usize, latency_ns: u64, rolled_back: bool, retries: u64) {
        if !self.measuring.load(Ordering::Relaxed) {
            return;
        }
        let mut stats = self.stats.lock().expect("TPC-C stats");
        let s = &mut stats[kind];
        s.count += 1;
        s.rollbacks += u64::from(rolled_back);
        s.retries += retries;
        let _ = s
            .histogram
            .record((latency_ns / 1_000).clamp(1, LATENCY_US_MAX));
    }

    /// Wait for a shared connection (none to wait for without a pool).
    fn take_connection(&self) {
        if self.options.connections == 0 {
            return;
        }
        let mut free = self.free_connections.lock();
        while *free == 0 {
            free = self.connection_freed.wait(free);
        }
        *free -= 1;
        let in_use = u64::from(self.options.connections - *free);
        self.connections_in_use_max
            .fetch_max(in_use, Ordering::Relaxed);
    }

    /// Most shared connections in use at once so far.
    pub fn connections_in_use_max(&self) -> u64 {
        self.connections_in_use_max.load(Ordering::Relaxed)
    }

    fn give_connection(&self) {
        if self.options.connections == 0 {
            return;
        }
        *self.free_connections.lock() += 1;
        self.connection_freed.notify_one();
    }

    /// Keying time before, or think time after, a transaction of `kind`.
    fn pause(&self, seconds: f64) {
        if self.options.think && seconds > 0.0 {
            let divided = seconds / self.options.think_divisor;
            Rt::current().sleep((divided * NS_PER_S as f64) as u64);
        }
    }

    fn think_s(rng: &mut ChaCha8Rng, kind: usize) -> f64 {
        let uniform: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
        (-uniform.ln()).min(THINK_CUT_MEANS) * THINK_MEAN_S[kind]
    }

    /// The measurements per type so far.
    pub fn reports(&self) -> Vec<TypeReport> {
        let stats = self.stats.lock().expect("TPC-C stats");
        TYPES
            .iter()
            .zip(stats.iter())
            .map(|(name, s)| s.report(name))
            .collect()
    }
}

impl Workload for TpcC {
    fn name(&self) -> &'static str {
        "tpcc"
    }

    fn setup(&self, db: &Database) -> Result<()> {
        self.options.validate().map_err(Error::Invalid)?;
        crate::uncharged(db, || load::load(db, &self.options, &self.constants))
    }

    /// Continue on a database exactly as loaded (an image taken after the
    /// load, as the page-size study reuses): the history rows must end at
    /// the loaded count, so the run's history ids cannot collide. A
    /// database that has already run transactions is refused.
    fn resume(&self, db: &Database) -> Result<u64> {
        self.options.validate().map_err(Error::Invalid)?;
        let t = Tables::open(db)?;
        let loaded = self.next_h_id.load(Ordering::Relaxed) - 1;
        let key =
            |h_id: i64| flashlab_engine::row::encode_key(&[flashlab_engine::row::Value::Int(h_id)]);
        let mut txn = db.begin()?;
        let last = txn.get(&t.history, &key(loaded))?;
        let beyond = txn.get(&t.history, &key(loaded + 1))?;
        txn.commit()?;
        if last.is_none() || beyond.is_some() {
            return Err(Error::Invalid(
                "TPC-C continues only on a database exactly as loaded (its history rows do not end at the loaded count)".into(),
            ));
        }
        Ok(0)
    }

    fn transaction(&self, db: &Database, client: u32, rng: &mut ChaCha8Rng) -> Result<()> {
        let kind = self.options.mix.pick(rng);
        let input = self.draw(kind, client, rng);
        let think = if self.options.think {
            Self::think_s(rng, kind)
        } else {
            0.0
        };
        self.pause(KEYING_S[kind]);
        let rt = Rt::current();
        let started_ns = rt.now_ns();
        self.take_connection();
        let outcome = self.run_to_end(db, &input);
        self.give_connection();
        let (rolled_back, retries) = outcome?;
        self.record(kind, rt.now_ns() - started_ns, rolled_back, retries);
        self.pause(think);
        Ok(())
    }

    fn measuring(&self, on: bool) {
        if on {
            let mut stats = self.stats.lock().expect("TPC-C stats");
            *stats = TYPES.iter().map(|_| TypeStats::new()).collect();
            self.new_orders_at_last_line.store(0, Ordering::Relaxed);
        }
        self.measuring.store(on, Ordering::Relaxed);
    }

    fn progress_note(&self, interval_ns: u64) -> Option<String> {
        let new_orders = self.stats.lock().expect("TPC-C stats")[0].count;
        let before = self
            .new_orders_at_last_line
            .swap(new_orders, Ordering::Relaxed);
        let minutes = interval_ns as f64 / (60 * NS_PER_S) as f64;
        let tpmc = new_orders.saturating_sub(before) as f64 / minutes.max(1e-12);
        Some(format!("tpmC {tpmc:.0}"))
    }

    fn transaction_types(&self) -> Vec<TypeReport> {
        self.reports()
    }

    fn check(&self, db: &Database, _committed: u64) -> Result<std::result::Result<(), String>> {
        check::check(db, self.options.warehouses)
    }

    fn departures(&self) -> Vec<String> {
        departures(&self.options)
    }
}

/// Where a run with `o` departs from the specification, in words.
pub fn departures(o: &TpccOptions) -> Vec<String> {
    let mut out = vec![
        "Delivery runs inline in the terminal that draws it, as one transaction for the ten districts (not deferred to a queue)".to_string(),
        "transaction types are drawn from the mix per transaction, not dealt from a deck of cards; no minimum-percentage enforcement".to_string(),
        "no terminal emulator: no screens, no menu or response-time constraints checked".to_string(),
    ];
    if !o.think {
        out.push(
            "no keying or think times: each terminal runs transactions back to back (the papers' maximum-throughput runs)"
                .to_string(),
        );
    }
    if o.think && o.think_divisor != 1.0 {
        out.push(format!(
            "keying and think times divided by {} (a scaled-down study: 1/{} of the warehouses offer the same load)",
            o.think_divisor, o.think_divisor
        ));
    }
    if o.active() != o.warehouses {
        out.push(format!(
            "terminals work on the first {} of the {} loaded warehouses",
            o.active(),
            o.warehouses
        ));
    }
    if o.connections > 0 {
        out.push(format!(
            "terminals share {} database connections (as DBT2 does); response times include the wait for one",
            o.connections
        ));
    }
    if o.mix != Mix::default() {
        out.push(format!("mix {:?} instead of 45/43/4/4/4", o.mix.0));
    }
    if o.items != ITEMS {
        out.push(format!(
            "{} items (and stock rows per warehouse) instead of {ITEMS}",
            o.items
        ));
    }
    if o.customers_per_district != CUSTOMERS_PER_DISTRICT {
        out.push(format!(
            "{} customers and initial orders per district instead of {CUSTOMERS_PER_DISTRICT} ({} new orders, last names from 0 to {})",
            o.customers_per_district,
            o.new_orders_per_district(),
            o.last_name_number_max()
        ));
    }
    out
}

/// tpmC, tpmTotal and efficiency of a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TpccSummary {
    pub warehouses: u32,
    /// New-Orders per minute (NoTPM).
    pub tpmc: f64,
    /// All transactions per minute.
    pub tpm_total: f64,
    /// tpmC against 12.86 per warehouse, percent.
    pub efficiency_percent: f64,
    pub transactions: Vec<TypeReport>,
}

impl TpccSummary {
    pub fn new(warehouses: u32, measured_s: f64, types: Vec<TypeReport>) -> TpccSummary {
        let per_minute = |n: u64| n as f64 * 60.0 / measured_s.max(1e-9);
        let new_orders = types.first().map_or(0, |t| t.count);
        let tpmc = per_minute(new_orders);
        TpccSummary {
            warehouses,
            tpmc,
            tpm_total: per_minute(types.iter().map(|t| t.count).sum()),
            efficiency_percent: 100.0 * tpmc / (TPMC_PER_WAREHOUSE_MAX * f64::from(warehouses)),
            transactions: types,
        }
    }
}

#[cfg(test)]
mod tests;
