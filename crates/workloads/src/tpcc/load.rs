//! Population (clause 4.3.3.1), deterministic by seed, in key order.
//!
//! Every table's rows are generated in ascending primary-key order and go
//! into the engine's bulk load ([`Database::bulk_load`]), one per table,
//! all open for the whole population: each tree is built bottom up with
//! full leaves, each page written once, and the tables become visible
//! together as the loads finish. Each (table, warehouse, district) has its
//! own random stream, derived from the seed, so the data does not depend
//! on the order of loading.
//!
//! Scaled populations (fewer items or customers per district, for tests
//! and quick runs) keep the rules: stock rows per warehouse equal the
//! items, initial orders per district equal the customers, and the last
//! 30% of them (900 of 3,000) are new orders.

use flashlab_engine::row::Value;
use flashlab_engine::{BulkLoad, BulkLoadOptions, Database, Result};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::random::{
    A_C_LAST, Constants, astring, data_maybe_original, last_name, nstring, nurand, zip,
};
use super::schema::{self, Tables, i};
use super::{DISTRICTS_PER_WAREHOUSE, TpccOptions};

/// The date stamped on loaded rows (dates are runtime nanoseconds; 0 is null).
pub const LOAD_DATE: i64 = 1;
/// W_YTD and D_YTD at load, in cents (300,000.00 and 30,000.00).
pub const W_YTD_LOAD_CENTS: i64 = 30_000_000;
pub const D_YTD_LOAD_CENTS: i64 = 3_000_000;
/// Customers' balance, year-to-date payment and credit limit at load, in cents.
const C_BALANCE_LOAD_CENTS: i64 = -1_000;
const C_YTD_PAYMENT_LOAD_CENTS: i64 = 1_000;
const C_CREDIT_LIM_CENTS: i64 = 5_000_000;
/// Share of customers with bad credit.
const BAD_CREDIT_PERCENT: u32 = 10;
/// Highest tax rate and discount, scale 4 (0.2000 and 0.5000).
const TAX_MAX: i64 = 2_000;
const DISCOUNT_MAX: i64 = 5_000;
/// Order lines per order.
pub const OL_CNT_MIN: u32 = 5;
pub const OL_CNT_MAX: u32 = 15;
/// Items' price range, in cents.
const PRICE_MIN_CENTS: i64 = 100;
const PRICE_MAX_CENTS: i64 = 10_000;
/// Largest random order-line amount of an undelivered order, in cents.
const OL_AMOUNT_MAX_CENTS: i64 = 999_999;
/// Quantity of every loaded order line.
const OL_QUANTITY_LOAD: i64 = 5;
/// Stock quantity range at load.
const S_QUANTITY_MIN: i64 = 10;
const S_QUANTITY_MAX: i64 = 100;
/// Carrier ids are 1 to this.
pub const CARRIERS: i64 = 10;

/// Which random stream: one per table kind.
#[derive(Clone, Copy)]
enum Stream {
    Item = 1,
    Warehouse,
    Stock,
    District,
    Customer,
    Order,
}

fn stream(seed: u64, which: Stream, w: u32, d: u32) -> ChaCha8Rng {
    let salt = ((which as u64) << 48) ^ (u64::from(w) << 16) ^ u64::from(d);
    ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt)
}

fn s(text: impl Into<String>) -> Value {
    Value::Str(text.into())
}

fn address(rng: &mut ChaCha8Rng) -> [Value; 5] {
    [
        s(astring(rng, 10, 20)),
        s(astring(rng, 10, 20)),
        s(astring(rng, 10, 20)),
        s(astring(rng, 2, 2)),
        s(zip(rng)),
    ]
}

/// One bulk load per table, each fed in its primary-key order.
struct Loads<'db> {
    warehouse: BulkLoad<'db>,
    stock: BulkLoad<'db>,
    district: BulkLoad<'db>,
    customer: BulkLoad<'db>,
    history: BulkLoad<'db>,
    order: BulkLoad<'db>,
    order_line: BulkLoad<'db>,
    new_order: BulkLoad<'db>,
}

impl<'db> Loads<'db> {
    fn start(db: &'db Database, t: &Tables, how: BulkLoadOptions) -> Result<Loads<'db>> {
        Ok(Loads {
            warehouse: db.bulk_load_with(&t.warehouse, how)?,
            stock: db.bulk_load_with(&t.stock, how)?,
            district: db.bulk_load_with(&t.district, how)?,
            customer: db.bulk_load_with(&t.customer, how)?,
            history: db.bulk_load_with(&t.history, how)?,
            order: db.bulk_load_with(&t.order, how)?,
            order_line: db.bulk_load_with(&t.order_line, how)?,
            new_order: db.bulk_load_with(&t.new_order, how)?,
        })
    }

    fn finish(self) -> Result<()> {
        for load in [
            self.warehouse,
            self.stock,
            self.district,
            self.customer,
            self.history,
            self.order,
            self.order_line,
            self.new_order,
        ] {
            load.finish()?;
        }
        Ok(())
    }
}

/// Load the whole database: create the tables, then fill them.
pub fn load(db: &Database, options: &TpccOptions, constants: &Constants) -> Result<()> {
    schema::create(db)?;
    let t = Tables::open(db)?;
    let seed = options.seed;
    let mut rng = stream(seed, Stream::Item, 0, 0);
    let how = BulkLoadOptions {
        logging: options.load_logging,
        ..BulkLoadOptions::default()
    };
    let mut items = db.bulk_load_with(&t.item, how)?;
    push_rows(&mut items, (1..=options.items).map(|id| item(&mut rng, id)))?;
    items.finish()?;
    let mut loads = Loads::start(db, &t, how)?;
    for w in 1..=options.warehouses {
        load_warehouse(&mut loads, options, constants, w)?;
    }
    loads.finish()
}

fn load_warehouse(
    loads: &mut Loads<'_>,
    options: &TpccOptions,
    constants: &Constants,
    w: u32,
) -> Result<()> {
    let seed = options.seed;
    let mut rng = stream(seed, Stream::Warehouse, w, 0);
    let mut row = vec![i(w), s(astring(&mut rng, 6, 10))];
    row.extend(address(&mut rng));
    row.extend([
        Value::Decimal(rng.random_range(0..=TAX_MAX)),
        Value::Decimal(W_YTD_LOAD_CENTS),
    ]);
    loads.warehouse.push(&row)?;
    let mut rng = stream(seed, Stream::Stock, w, 0);
    push_rows(
        &mut loads.stock,
        (1..=options.items).map(|id| stock(&mut rng, w, id)),
    )?;
    let mut rng = stream(seed, Stream::District, w, 0);
    let districts = (1..=DISTRICTS_PER_WAREHOUSE).map(|d| district(&mut rng, w, d, options));
    push_rows(&mut loads.district, districts)?;
    for d in 1..=DISTRICTS_PER_WAREHOUSE {
        load_customers(loads, options, constants, w, d)?;
    }
    for d in 1..=DISTRICTS_PER_WAREHOUSE {
        load_orders(loads, options, w, d)?;
    }
    Ok(())
}

fn item(rng: &mut ChaCha8Rng, id: u32) -> Vec<Value> {
    vec![
        i(id),
        i(rng.random_range(1..=10_000)),
        s(astring(rng, 14, 24)),
        Value::Decimal(rng.random_range(PRICE_MIN_CENTS..=PRICE_MAX_CENTS)),
        s(data_maybe_original(rng)),
    ]
}

fn stock(rng: &mut ChaCha8Rng, w: u32, id: u32) -> Vec<Value> {
    let mut row = vec![
        i(w),
        i(id),
        i(rng.random_range(S_QUANTITY_MIN..=S_QUANTITY_MAX)),
    ];
    row.extend((0..10).map(|_| s(astring(rng, 24, 24))));
    row.extend([i(0), i(0), i(0), s(data_maybe_original(rng))]);
    row
}

fn district(rng: &mut ChaCha8Rng, w: u32, d: u32, options: &TpccOptions) -> Vec<Value> {
    let mut row = vec![i(w), i(d), s(astring(rng, 6, 10))];
    row.extend(address(rng));
    row.extend([
        Value::Decimal(rng.random_range(0..=TAX_MAX)),
        Value::Decimal(D_YTD_LOAD_CENTS),
        i(options.orders_per_district() + 1),
    ]);
    row
}

/// The last name of customer `c_id` at load (clause 4.3.3.1): the first
/// thousand (or all, if fewer) in order, the rest by NURand.
pub fn load_last_name(
    rng: &mut ChaCha8Rng,
    c_id: u32,
    options: &TpccOptions,
    constants: &Constants,
) -> String {
    let max = options.last_name_number_max();
    if c_id <= max + 1 {
        last_name(c_id - 1)
    } else {
        last_name(nurand(rng, A_C_LAST, 0, max, constants.c_last))
    }
}

fn customer(
    rng: &mut ChaCha8Rng,
    (w, d, c): (u32, u32, u32),
    options: &TpccOptions,
    constants: &Constants,
) -> Vec<Value> {
    let last = load_last_name(rng, c, options, constants);
    let mut row = vec![i(w), i(d), i(c), s(astring(rng, 8, 16)), s("OE"), s(last)];
    row.extend(address(rng));
    let credit = if rng.random_range(0..100) < BAD_CREDIT_PERCENT {
        "BC"
    } else {
        "GC"
    };
    row.extend([
        s(nstring(rng, 16, 16)),
        i(LOAD_DATE),
        s(credit),
        Value::Decimal(C_CREDIT_LIM_CENTS),
        Value::Decimal(rng.random_range(0..=DISCOUNT_MAX)),
        Value::Decimal(C_BALANCE_LOAD_CENTS),
        Value::Decimal(C_YTD_PAYMENT_LOAD_CENTS),
        i(1),
        i(0),
        s(astring(rng, 300, 500)),
    ]);
    row
}

/// The history id of customer `c` of (w, d)'s initial history row; run-time
/// rows are numbered after all of them.
pub fn load_history_id(options: &TpccOptions, w: u32, d: u32, c: u32) -> i64 {
    let per_district = i64::from(options.customers_per_district);
    ((i64::from(w) - 1) * i64::from(DISTRICTS_PER_WAREHOUSE) + i64::from(d) - 1) * per_district
        + i64::from(c)
}

fn load_customers(
    loads: &mut Loads<'_>,
    options: &TpccOptions,
    constants: &Constants,
    w: u32,
    d: u32,
) -> Result<()> {
    let mut rng = stream(options.seed, Stream::Customer, w, d);
    let cpd = options.customers_per_district;
    let customers: Vec<_> = (1..=cpd)
        .map(|c| customer(&mut rng, (w, d, c), options, constants))
        .collect();
    push_rows(&mut loads.customer, customers)?;
    let history = (1..=cpd).map(|c| {
        vec![
            i(load_history_id(options, w, d, c)),
            i(c),
            i(d),
            i(w),
            i(d),
            i(w),
            i(LOAD_DATE),
            Value::Decimal(C_YTD_PAYMENT_LOAD_CENTS),
            s(astring(&mut rng, 12, 24)),
        ]
    });
    push_rows(&mut loads.history, history)
}

fn load_orders(loads: &mut Loads<'_>, options: &TpccOptions, w: u32, d: u32) -> Result<()> {
    let mut rng = stream(options.seed, Stream::Order, w, d);
    let mut customers: Vec<u32> = (1..=options.customers_per_district).collect();
    customers.shuffle(&mut rng);
    let first_new = options.first_new_order_id();
    let mut orders = Vec::with_capacity(customers.len());
    let mut lines = Vec::new();
    for (o, &c) in (1u32..).zip(&customers) {
        let delivered = o < first_new;
        let ol_cnt = rng.random_range(OL_CNT_MIN..=OL_CNT_MAX);
        let carrier = if delivered {
            rng.random_range(1..=CARRIERS)
        } else {
            0
        };
        orders.push(vec![
            i(w),
            i(d),
            i(o),
            i(c),
            i(LOAD_DATE),
            i(carrier),
            i(ol_cnt),
            i(1),
        ]);
        for number in 1..=ol_cnt {
            let amount = if delivered {
                0
            } else {
                rng.random_range(1..=OL_AMOUNT_MAX_CENTS)
            };
            lines.push(vec![
                i(w),
                i(d),
                i(o),
                i(number),
                i(rng.random_range(1..=options.items)),
                i(w),
                i(if delivered { LOAD_DATE } else { 0 }),
                i(OL_QUANTITY_LOAD),
                Value::Decimal(amount),
                s(astring(&mut rng, 24, 24)),
            ]);
        }
    }
    push_rows(&mut loads.order, orders)?;
    push_rows(&mut loads.order_line, lines)?;
    let new_orders = (first_new..=options.orders_per_district()).map(|o| vec![i(w), i(d), i(o)]);
    push_rows(&mut loads.new_order, new_orders)
}

/// Add `rows` to `load`, in the order given (ascending primary keys).
fn push_rows(load: &mut BulkLoad<'_>, rows: impl IntoIterator<Item = Vec<Value>>) -> Result<()> {
    for row in rows {
        load.push(&row)?;
    }
    Ok(())
}
