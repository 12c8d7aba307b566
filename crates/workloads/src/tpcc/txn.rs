//! The five transactions (clauses 2.4 to 2.8), each split into its input
//! (what the terminal keys in, drawn by the `*_input` functions with the
//! specification's distributions) and its logic (a function of the
//! database and the input, so tests can run hand-worked cases).
//!
//! Reads take no locks (read committed, as the papers' server); every
//! update is a locked read-modify-write of the latest version. Delivery
//! runs inline, by the terminal that draws it, as one database transaction
//! over the ten districts (clause 2.7.2.1 allows deferred execution; the
//! papers' maximum-throughput runs have no queue either). A district
//! without an undelivered order is skipped and counted.

use flashlab_engine::row::{Value, encode_key, prefix_end};
use flashlab_engine::{Database, Error, Result, Table, Transaction};
use rand::Rng;
use std::ops::Bound;

use super::TpccOptions;
use super::load::{CARRIERS, OL_CNT_MAX, OL_CNT_MIN};
use super::random::{A_C_ID, A_C_LAST, A_OL_I_ID, Constants, last_name, nurand};
use super::schema::*;

/// Share of New-Orders rolled back through an unused item id (2.4.1.4).
const ROLLBACK_PERCENT: u32 = 1;
/// Share of order lines supplied by a remote warehouse (2.4.1.5).
const REMOTE_LINE_PERCENT: u32 = 1;
/// Share of Payments and Order-Status by last name (2.5.1.2, 2.6.1.2).
const BY_LAST_NAME_PERCENT: u32 = 60;
/// Share of Payments for a customer of a remote warehouse (2.5.1.2).
const REMOTE_PAYMENT_PERCENT: u32 = 15;
/// Payment amounts, in cents (1.00 to 5,000.00).
const PAYMENT_MIN_CENTS: i64 = 100;
const PAYMENT_MAX_CENTS: i64 = 500_000;
/// Order-line quantities.
const QUANTITY_MAX: i64 = 10;
/// Stock is refilled by this much when it would fall under the margin.
const RESTOCK: i64 = 91;
const RESTOCK_MARGIN: i64 = 10;
/// Stock-Level looks at this many recent orders, with a threshold in range.
const STOCK_LEVEL_ORDERS: i64 = 20;
const THRESHOLD_MIN: i64 = 10;
const THRESHOLD_MAX: i64 = 20;
/// Text C_DATA keeps (the rest is cut off).
const C_DATA_KEEP_CHARS: usize = C_DATA_CHARS_MAX as usize;
/// Times Delivery looks again for a district's oldest order when another
/// Delivery took the one it found.
const DELIVERY_LOOKS_MAX: u32 = 8;

/// Which customer: by id, or by last name (the middle one by first name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CustomerRef {
    Id(u32),
    LastName(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderLineInput {
    pub i_id: u32,
    pub supply_w_id: u32,
    pub quantity: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewOrderInput {
    pub w_id: u32,
    pub d_id: u32,
    pub c_id: u32,
    pub lines: Vec<OrderLineInput>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaymentInput {
    pub w_id: u32,
    pub d_id: u32,
    pub c_w_id: u32,
    pub c_d_id: u32,
    pub customer: CustomerRef,
    pub amount_cents: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderStatusInput {
    pub w_id: u32,
    pub d_id: u32,
    pub customer: CustomerRef,
}

/// What a New-Order did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NewOrderOutcome {
    /// Committed order `o_id`, total in cents (after discount and taxes).
    Committed { o_id: i64, total_cents: i64 },
    /// Rolled back: an item id was not in the catalogue.
    RolledBack,
}

/// What Order-Status found: the customer, the order, its lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderStatus {
    pub c_id: i64,
    pub balance_cents: i64,
    pub o_id: Option<i64>,
    pub carrier_id: i64,
    pub lines: Vec<Vec<Value>>,
}

// ------------------------------------------------------------ inputs

fn random_w(rng: &mut impl Rng, home: u32, options: &TpccOptions) -> u32 {
    let active = options.active();
    if active < 2 {
        return home;
    }
    let other = rng.random_range(1..active);
    if other >= home { other + 1 } else { other }
}

fn customer_id(rng: &mut impl Rng, options: &TpccOptions, c: &Constants) -> u32 {
    nurand(rng, A_C_ID, 1, options.customers_per_district, c.c_id)
}

fn customer_ref(rng: &mut impl Rng, options: &TpccOptions, c: &Constants) -> CustomerRef {
    if rng.random_range(0..100) < BY_LAST_NAME_PERCENT {
        let number = nurand(rng, A_C_LAST, 0, options.last_name_number_max(), c.c_last);
        CustomerRef::LastName(last_name(number))
    } else {
        CustomerRef::Id(customer_id(rng, options, c))
    }
}

/// New-Order's input for a terminal of warehouse `w` (2.4.1).
pub fn new_order_input(
    rng: &mut impl Rng,
    w: u32,
    options: &TpccOptions,
    c: &Constants,
) -> NewOrderInput {
    let d_id = rng.random_range(1..=super::DISTRICTS_PER_WAREHOUSE);
    let c_id = customer_id(rng, options, c);
    let count = rng.random_range(OL_CNT_MIN..=OL_CNT_MAX);
    let rollback = rng.random_range(0..100) < ROLLBACK_PERCENT;
    let lines = (0..count)
        .map(|n| {
            let i_id = if rollback && n + 1 == count {
                options.items + 1 // unused: the order rolls back
            } else {
                nurand(rng, A_OL_I_ID, 1, options.items, c.ol_i_id)
            };
            let supply_w_id = if rng.random_range(0..100) < REMOTE_LINE_PERCENT {
                random_w(rng, w, options)
            } else {
                w
            };
            OrderLineInput {
                i_id,
                supply_w_id,
                quantity: rng.random_range(1..=QUANTITY_MAX),
            }
        })
        .collect();
    NewOrderInput {
        w_id: w,
        d_id,
        c_id,
        lines,
    }
}

/// Payment's input for a terminal of warehouse `w` (2.5.1).
pub fn payment_input(
    rng: &mut impl Rng,
    w: u32,
    options: &TpccOptions,
    c: &Constants,
) -> PaymentInput {
    let d_id = rng.random_range(1..=super::DISTRICTS_PER_WAREHOUSE);
    let remote = options.active() > 1 && rng.random_range(0..100) < REMOTE_PAYMENT_PERCENT;
    let (c_w_id, c_d_id) = if remote {
        (
            random_w(rng, w, options),
            rng.random_range(1..=super::DISTRICTS_PER_WAREHOUSE),
        )
    } else {
        (w, d_id)
    };
    PaymentInput {
        w_id: w,
        d_id,
        c_w_id,
        c_d_id,
        customer: customer_ref(rng, options, c),
        amount_cents: rng.random_range(PAYMENT_MIN_CENTS..=PAYMENT_MAX_CENTS),
    }
}

/// Order-Status's input for a terminal of warehouse `w` (2.6.1).
pub fn order_status_input(
    rng: &mut impl Rng,
    w: u32,
    options: &TpccOptions,
    c: &Constants,
) -> OrderStatusInput {
    OrderStatusInput {
        w_id: w,
        d_id: rng.random_range(1..=super::DISTRICTS_PER_WAREHOUSE),
        customer: customer_ref(rng, options, c),
    }
}

/// Delivery's carrier id (2.7.1).
pub fn delivery_carrier(rng: &mut impl Rng) -> i64 {
    rng.random_range(1..=CARRIERS)
}

/// Stock-Level's threshold (2.8.1).
pub fn stock_level_threshold(rng: &mut impl Rng) -> i64 {
    rng.random_range(THRESHOLD_MIN..=THRESHOLD_MAX)
}

// ------------------------------------------------------------ helpers

fn missing(what: String) -> Error {
    Error::Invalid(format!("TPC-C: {what} is missing"))
}

fn add_int(column: usize, delta: i64) -> impl FnOnce(&mut Vec<Value>) {
    move |row| {
        if let Some(Value::Int(v)) = row.get_mut(column) {
            *v += delta;
        }
    }
}

fn add_dec(column: usize, delta: i64) -> impl FnOnce(&mut Vec<Value>) {
    move |row| {
        if let Some(Value::Decimal(v)) = row.get_mut(column) {
            *v += delta;
        }
    }
}

fn prefix_rows(txn: &mut Transaction, table: &Table, prefix: &[Value]) -> Result<Vec<Vec<Value>>> {
    let schema = table
        .def()
        .schema
        .clone()
        .ok_or_else(|| missing("a schema".into()))?;
    txn.scan_prefix(table, &encode_key(prefix))?
        .iter()
        .map(|(_, bytes)| schema.decode_row(bytes))
        .collect()
}

/// Rows with keys in [lower, upper), decoded.
fn range_rows(
    txn: &mut Transaction,
    table: &Table,
    lower: &[Value],
    upper: &[Value],
) -> Result<Vec<Vec<Value>>> {
    let schema = table
        .def()
        .schema
        .clone()
        .ok_or_else(|| missing("a schema".into()))?;
    let (lower, upper) = (encode_key(lower), encode_key(upper));
    txn.scan(table, Bound::Included(&lower), Bound::Excluded(&upper))?
        .iter()
        .map(|(_, bytes)| schema.decode_row(bytes))
        .collect()
}

/// Find a customer row of (w, d), by id or by last name: the one at
/// position ceil(n/2) of those with the name, sorted by first name.
fn find_customer(
    txn: &mut Transaction,
    t: &Tables,
    w: u32,
    d: u32,
    customer: &CustomerRef,
) -> Result<Vec<Value>> {
    match customer {
        CustomerRef::Id(c) => txn
            .get_row(&t.customer, &[i(w), i(d), i(*c)])?
            .ok_or_else(|| missing(format!("customer ({w}, {d}, {c})"))),
        CustomerRef::LastName(name) => {
            let mut rows = txn.index_scan(
                &t.customer,
                CUSTOMER_BY_LAST,
                &[i(w), i(d), Value::Str(name.clone())],
            )?;
            if rows.is_empty() {
                return Err(missing(format!("a customer named {name} in ({w}, {d})")));
            }
            let middle = (rows.len() - 1) / 2;
            Ok(rows.swap_remove(middle))
        }
    }
}

// ------------------------------------------------------------ New-Order

/// New-Order (2.4.2). Rolls back, and says so, when an item is unused.
pub fn new_order(db: &Database, t: &Tables, input: &NewOrderInput) -> Result<NewOrderOutcome> {
    let mut txn = db.begin()?;
    match new_order_in(&mut txn, t, input)? {
        Some(outcome) => {
            txn.commit()?;
            Ok(outcome)
        }
        None => {
            txn.abort()?;
            Ok(NewOrderOutcome::RolledBack)
        }
    }
}

fn new_order_in(
    txn: &mut Transaction,
    t: &Tables,
    input: &NewOrderInput,
) -> Result<Option<NewOrderOutcome>> {
    let (w, d) = (input.w_id, input.d_id);
    let warehouse = txn
        .get_row(&t.warehouse, &[i(w)])?
        .ok_or_else(|| missing(format!("warehouse {w}")))?;
    let district = txn
        .update_row(&t.district, &[i(w), i(d)], add_int(D_NEXT_O_ID, 1))?
        .ok_or_else(|| missing(format!("district ({w}, {d})")))?;
    let o_id = int(&district, D_NEXT_O_ID) - 1;
    let customer = txn
        .get_row(&t.customer, &[i(w), i(d), i(input.c_id)])?
        .ok_or_else(|| missing(format!("customer ({w}, {d}, {})", input.c_id)))?;
    let all_local = input.lines.iter().all(|l| l.supply_w_id == w);
    let order = [
        i(w),
        i(d),
        i(o_id),
        i(input.c_id),
        i(now()),
        i(0),
        i(input.lines.len() as i64),
        i(i64::from(all_local)),
    ];
    txn.put_row(&t.order, &order)?;
    txn.put_row(&t.new_order, &[i(w), i(d), i(o_id)])?;
    let mut sum_cents = 0i64;
    for (number, line) in (1i64..).zip(&input.lines) {
        let Some(amount) = order_line(txn, t, input, o_id, number, line)? else {
            return Ok(None);
        };
        sum_cents += amount;
    }
    let total_cents = total(
        sum_cents,
        dec(&customer, C_DISCOUNT),
        dec(&warehouse, W_TAX) + dec(&district, D_TAX),
    );
    Ok(Some(NewOrderOutcome::Committed { o_id, total_cents }))
}

/// sum × (1 − discount) × (1 + taxes), rates at scale 4, rounded to cents.
pub fn total(sum_cents: i64, discount: i64, taxes: i64) -> i64 {
    const ONE: i128 = 10_000;
    let exact = i128::from(sum_cents) * (ONE - i128::from(discount)) * (ONE + i128::from(taxes));
    ((exact + ONE * ONE / 2) / (ONE * ONE)) as i64
}

/// One order line: the item, the stock update, the line. `None`: the item
/// does not exist (the order must roll back).
fn order_line(
    txn: &mut Transaction,
    t: &Tables,
    input: &NewOrderInput,
    o_id: i64,
    number: i64,
    line: &OrderLineInput,
) -> Result<Option<i64>> {
    let Some(item) = txn.get_row(&t.item, &[i(line.i_id)])? else {
        return Ok(None);
    };
    let (quantity, remote) = (line.quantity, line.supply_w_id != input.w_id);
    let stock = txn
        .update_row(&t.stock, &[i(line.supply_w_id), i(line.i_id)], move |row| {
            take_stock(row, quantity, remote)
        })?
        .ok_or_else(|| missing(format!("stock ({}, {})", line.supply_w_id, line.i_id)))?;
    let amount = quantity * dec(&item, I_PRICE);
    let dist_info = text(&stock, S_DIST_01 + input.d_id as usize - 1).to_string();
    txn.put_row(
        &t.order_line,
        &[
            i(input.w_id),
            i(input.d_id),
            i(o_id),
            i(number),
            i(line.i_id),
            i(line.supply_w_id),
            i(0),
            i(quantity),
            Value::Decimal(amount),
            Value::Str(dist_info),
        ],
    )?;
    Ok(Some(amount))
}

/// The stock update of one order line (2.4.2.2).
pub fn take_stock(row: &mut [Value], quantity: i64, remote: bool) {
    let s_quantity = int(row, S_QUANTITY);
    let new = if s_quantity >= quantity + RESTOCK_MARGIN {
        s_quantity - quantity
    } else {
        s_quantity - quantity + RESTOCK
    };
    row[S_QUANTITY] = i(new);
    row[S_YTD] = i(int(row, S_YTD) + quantity);
    row[S_ORDER_CNT] = i(int(row, S_ORDER_CNT) + 1);
    row[S_REMOTE_CNT] = i(int(row, S_REMOTE_CNT) + i64::from(remote));
}

fn now() -> i64 {
    // Dates are runtime nanoseconds; 0 means null, so never stamp 0.
    (flashlab_runtime::Rt::now_ns_current() as i64).max(1)
}

// ------------------------------------------------------------ Payment

/// Payment (2.5.2); returns the customer id paid for.
pub fn payment(db: &Database, t: &Tables, input: &PaymentInput, h_id: i64) -> Result<i64> {
    let mut txn = db.begin()?;
    let c_id = payment_in(&mut txn, t, input, h_id)?;
    txn.commit()?;
    Ok(c_id)
}

fn payment_in(txn: &mut Transaction, t: &Tables, p: &PaymentInput, h_id: i64) -> Result<i64> {
    let amount = p.amount_cents;
    let warehouse = txn
        .update_row(&t.warehouse, &[i(p.w_id)], add_dec(W_YTD, amount))?
        .ok_or_else(|| missing(format!("warehouse {}", p.w_id)))?;
    let district = txn
        .update_row(&t.district, &[i(p.w_id), i(p.d_id)], add_dec(D_YTD, amount))?
        .ok_or_else(|| missing(format!("district ({}, {})", p.w_id, p.d_id)))?;
    let found = find_customer(txn, t, p.c_w_id, p.c_d_id, &p.customer)?;
    let c_id = int(&found, C_ID);
    let note = format!(
        "{c_id} {} {} {} {} {}.{:02} | ",
        p.c_d_id,
        p.c_w_id,
        p.d_id,
        p.w_id,
        amount / 100,
        amount % 100
    );
    txn.update_row(
        &t.customer,
        &[i(p.c_w_id), i(p.c_d_id), i(c_id)],
        move |row| pay(row, amount, &note),
    )?
    .ok_or_else(|| missing(format!("customer {c_id}")))?;
    let h_data = format!(
        "{}    {}",
        text(&warehouse, W_NAME),
        text(&district, D_NAME)
    );
    txn.put_row(
        &t.history,
        &[
            i(h_id),
            i(c_id),
            i(p.c_d_id),
            i(p.c_w_id),
            i(p.d_id),
            i(p.w_id),
            i(now()),
            Value::Decimal(amount),
            Value::Str(h_data.chars().take(24).collect()),
        ],
    )?;
    Ok(c_id)
}

/// The customer update of a Payment (2.5.2.2): bad-credit customers get
/// the payment noted at the front of C_DATA.
pub fn pay(row: &mut [Value], amount_cents: i64, note: &str) {
    row[C_BALANCE] = Value::Decimal(dec(row, C_BALANCE) - amount_cents);
    row[C_YTD_PAYMENT] = Value::Decimal(dec(row, C_YTD_PAYMENT) + amount_cents);
    row[C_PAYMENT_CNT] = i(int(row, C_PAYMENT_CNT) + 1);
    if text(row, C_CREDIT) == "BC" {
        let data: String = format!("{note}{}", text(row, C_DATA))
            .chars()
            .take(C_DATA_KEEP_CHARS)
            .collect();
        row[C_DATA] = Value::Str(data);
    }
}

// ------------------------------------------------------------ Order-Status

/// Order-Status (2.6.2): the customer's last order and its lines.
pub fn order_status(db: &Database, t: &Tables, input: &OrderStatusInput) -> Result<OrderStatus> {
    let mut txn = db.begin()?;
    let status = order_status_in(&mut txn, t, input)?;
    txn.commit()?;
    Ok(status)
}

fn order_status_in(txn: &mut Transaction, t: &Tables, s: &OrderStatusInput) -> Result<OrderStatus> {
    let customer = find_customer(txn, t, s.w_id, s.d_id, &s.customer)?;
    let c_id = int(&customer, C_ID);
    let orders = txn.index_scan(
        &t.order,
        ORDER_BY_CUSTOMER,
        &[i(s.w_id), i(s.d_id), i(c_id)],
    )?;
    let last = orders.iter().max_by_key(|o| int(o, O_ID));
    let mut status = OrderStatus {
        c_id,
        balance_cents: dec(&customer, C_BALANCE),
        o_id: last.map(|o| int(o, O_ID)),
        carrier_id: last.map_or(0, |o| int(o, O_CARRIER_ID)),
        lines: Vec::new(),
    };
    if let Some(o_id) = status.o_id {
        status.lines = prefix_rows(txn, &t.order_line, &[i(s.w_id), i(s.d_id), i(o_id)])?;
    }
    Ok(status)
}

// ------------------------------------------------------------ Delivery

/// Delivery (2.7.4) of warehouse `w`, inline, as one transaction; returns
/// the orders delivered (one per district that had one, 0 meaning skipped).
pub fn delivery(db: &Database, t: &Tables, w: u32, carrier: i64) -> Result<Vec<i64>> {
    let mut txn = db.begin()?;
    let mut delivered = Vec::with_capacity(super::DISTRICTS_PER_WAREHOUSE as usize);
    for d in 1..=super::DISTRICTS_PER_WAREHOUSE {
        delivered.push(deliver_district(&mut txn, t, w, d, carrier)?.unwrap_or(0));
    }
    txn.commit()?;
    Ok(delivered)
}

/// The district's oldest undelivered order, taken off NEW-ORDER.
fn take_oldest_new_order(txn: &mut Transaction, t: &Tables, w: u32, d: u32) -> Result<Option<i64>> {
    let prefix = encode_key(&[i(w), i(d)]);
    let end = prefix_end(&prefix);
    let upper = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
    let schema = t
        .new_order
        .def()
        .schema
        .clone()
        .ok_or_else(|| missing("a schema".into()))?;
    for _ in 0..DELIVERY_LOOKS_MAX {
        let first = txn.scan_limit(&t.new_order, Bound::Included(&prefix), upper, 1)?;
        let Some((_, bytes)) = first.first() else {
            return Ok(None);
        };
        let o_id = int(&schema.decode_row(bytes)?, NO_O_ID);
        if txn.delete_row(&t.new_order, &[i(w), i(d), i(o_id)])? {
            return Ok(Some(o_id));
        }
        // Another Delivery took it between our read and our lock: look again.
    }
    Ok(None)
}

fn deliver_district(
    txn: &mut Transaction,
    t: &Tables,
    w: u32,
    d: u32,
    carrier: i64,
) -> Result<Option<i64>> {
    let Some(o_id) = take_oldest_new_order(txn, t, w, d)? else {
        return Ok(None);
    };
    let order = txn
        .update_row(&t.order, &[i(w), i(d), i(o_id)], move |row| {
            row[O_CARRIER_ID] = i(carrier)
        })?
        .ok_or_else(|| missing(format!("order ({w}, {d}, {o_id})")))?;
    let date = now();
    let mut sum_cents = 0;
    for line in prefix_rows(txn, &t.order_line, &[i(w), i(d), i(o_id)])? {
        sum_cents += dec(&line, OL_AMOUNT);
        let key: Vec<Value> = line[..4].to_vec();
        txn.update_row(&t.order_line, &key, move |row| row[OL_DELIVERY_D] = i(date))?;
    }
    let c_id = int(&order, O_C_ID);
    txn.update_row(&t.customer, &[i(w), i(d), i(c_id)], move |row| {
        row[C_BALANCE] = Value::Decimal(dec(row, C_BALANCE) + sum_cents);
        row[C_DELIVERY_CNT] = i(int(row, C_DELIVERY_CNT) + 1);
    })?
    .ok_or_else(|| missing(format!("customer ({w}, {d}, {c_id})")))?;
    Ok(Some(o_id))
}

// ------------------------------------------------------------ Stock-Level

/// Stock-Level (2.8.2): distinct items of the district's last 20 orders
/// whose stock in warehouse `w` is below `threshold`.
pub fn stock_level(db: &Database, t: &Tables, w: u32, d: u32, threshold: i64) -> Result<u64> {
    let mut txn = db.begin()?;
    let low = stock_level_in(&mut txn, t, w, d, threshold)?;
    txn.commit()?;
    Ok(low)
}

fn stock_level_in(
    txn: &mut Transaction,
    t: &Tables,
    w: u32,
    d: u32,
    threshold: i64,
) -> Result<u64> {
    let district = txn
        .get_row(&t.district, &[i(w), i(d)])?
        .ok_or_else(|| missing(format!("district ({w}, {d})")))?;
    let next = int(&district, D_NEXT_O_ID);
    let lines = range_rows(
        txn,
        &t.order_line,
        &[i(w), i(d), i(next - STOCK_LEVEL_ORDERS)],
        &[i(w), i(d), i(next)],
    )?;
    let items: std::collections::BTreeSet<i64> = lines.iter().map(|l| int(l, OL_I_ID)).collect();
    let mut low = 0;
    for item in items {
        if let Some(stock) = txn.get_row(&t.stock, &[i(w), i(item)])?
            && int(&stock, S_QUANTITY) < threshold
        {
            low += 1;
        }
    }
    Ok(low)
}
