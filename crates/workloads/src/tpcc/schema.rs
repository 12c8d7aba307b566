//! TPC-C's nine tables (clause 1.3) as typed engine tables.
//!
//! Columns keep the specification's names and order, except that each
//! table's primary-key columns come first (the engine keys rows by listed
//! columns; putting them first only makes the constants below easier to
//! read). Money is `Decimal { scale: 2 }`, rates `Decimal { scale: 4 }`,
//! dates are integers (nanoseconds of the runtime's clock), and a null
//! carrier id or delivery date is 0. HISTORY has no primary key in the
//! specification; here it is keyed by a sequence number, `h_id`, which no
//! transaction reads.
//!
//! Secondary indexes: CUSTOMER on (c_w_id, c_d_id, c_last, c_first), as the
//! issue asks, for the 60% of Payment and Order-Status by last name; ORDER on
//! (o_w_id, o_d_id, o_c_id, o_id), for Order-Status's "most recent order of
//! this customer" (the specification leaves access paths to the
//! implementation). Nothing here names a page store: any engine page store
//! serves these tables unchanged.

use flashlab_engine::row::{Column, Schema, Type, Value};
use flashlab_engine::{Database, Result, Table, TableSpec};

pub const WAREHOUSE: &str = "warehouse";
pub const DISTRICT: &str = "district";
pub const CUSTOMER: &str = "customer";
pub const HISTORY: &str = "history";
pub const NEW_ORDER: &str = "new_order";
pub const ORDER: &str = "orders";
pub const ORDER_LINE: &str = "order_line";
pub const ITEM: &str = "item";
pub const STOCK: &str = "stock";
/// The customer last-name index.
pub const CUSTOMER_BY_LAST: &str = "customer_by_last";
/// The order-by-customer index.
pub const ORDER_BY_CUSTOMER: &str = "orders_by_customer";

const MONEY: Type = Type::Decimal { scale: 2 };
const RATE: Type = Type::Decimal { scale: 4 };
/// Characters of the S_DIST_xx columns and OL_DIST_INFO.
pub const DIST_INFO_CHARS: u16 = 24;
/// Longest C_DATA.
pub const C_DATA_CHARS_MAX: u16 = 500;

// WAREHOUSE (w_id, w_name, w_street_1, w_street_2, w_city, w_state, w_zip, w_tax, w_ytd)
pub const W_NAME: usize = 1;
pub const W_TAX: usize = 7;
pub const W_YTD: usize = 8;
// DISTRICT (d_w_id, d_id, d_name, streets, city, state, zip, d_tax, d_ytd, d_next_o_id)
pub const D_NAME: usize = 2;
pub const D_TAX: usize = 8;
pub const D_YTD: usize = 9;
pub const D_NEXT_O_ID: usize = 10;
// CUSTOMER (c_w_id, c_d_id, c_id, c_first, c_middle, c_last, streets, city,
// state, zip, c_phone, c_since, c_credit, c_credit_lim, c_discount,
// c_balance, c_ytd_payment, c_payment_cnt, c_delivery_cnt, c_data)
pub const C_ID: usize = 2;
pub const C_FIRST: usize = 3;
pub const C_LAST: usize = 5;
pub const C_CREDIT: usize = 13;
pub const C_DISCOUNT: usize = 15;
pub const C_BALANCE: usize = 16;
pub const C_YTD_PAYMENT: usize = 17;
pub const C_PAYMENT_CNT: usize = 18;
pub const C_DELIVERY_CNT: usize = 19;
pub const C_DATA: usize = 20;
// HISTORY (h_id, h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data)
pub const H_AMOUNT: usize = 7;
// NEW-ORDER (no_w_id, no_d_id, no_o_id)
pub const NO_O_ID: usize = 2;
// ORDER (o_w_id, o_d_id, o_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local)
pub const O_ID: usize = 2;
pub const O_C_ID: usize = 3;
pub const O_CARRIER_ID: usize = 5;
pub const O_OL_CNT: usize = 6;
// ORDER-LINE (ol_w_id, ol_d_id, ol_o_id, ol_number, ol_i_id, ol_supply_w_id,
// ol_delivery_d, ol_quantity, ol_amount, ol_dist_info)
pub const OL_I_ID: usize = 4;
pub const OL_DELIVERY_D: usize = 6;
pub const OL_AMOUNT: usize = 8;
// ITEM (i_id, i_im_id, i_name, i_price, i_data)
pub const I_NAME: usize = 2;
pub const I_PRICE: usize = 3;
pub const I_DATA: usize = 4;
// STOCK (s_w_id, s_i_id, s_quantity, s_dist_01..10, s_ytd, s_order_cnt,
// s_remote_cnt, s_data)
pub const S_QUANTITY: usize = 2;
pub const S_DIST_01: usize = 3;
pub const S_YTD: usize = 13;
pub const S_ORDER_CNT: usize = 14;
pub const S_REMOTE_CNT: usize = 15;
pub const S_DATA: usize = 16;

fn schema(columns: &[(&str, Type)], key_columns: usize) -> Schema {
    let columns = columns
        .iter()
        .map(|(name, ty)| Column::new(*name, *ty))
        .collect();
    Schema::new(columns, (0..key_columns).collect()).expect("TPC-C schemas are valid")
}

fn address(prefix: &str) -> Vec<(String, Type)> {
    [
        ("street_1", Type::VarStr(20)),
        ("street_2", Type::VarStr(20)),
        ("city", Type::VarStr(20)),
        ("state", Type::FixedStr(2)),
        ("zip", Type::FixedStr(9)),
    ]
    .into_iter()
    .map(|(name, ty)| (format!("{prefix}_{name}"), ty))
    .collect()
}

fn with_address(
    head: &[(&str, Type)],
    prefix: &str,
    tail: &[(&str, Type)],
    key_columns: usize,
) -> Schema {
    let address = address(prefix);
    let mut columns: Vec<(&str, Type)> = head.to_vec();
    columns.extend(address.iter().map(|(n, t)| (n.as_str(), *t)));
    columns.extend_from_slice(tail);
    schema(&columns, key_columns)
}

pub fn warehouse() -> Schema {
    with_address(
        &[("w_id", Type::Int32), ("w_name", Type::VarStr(10))],
        "w",
        &[("w_tax", RATE), ("w_ytd", MONEY)],
        1,
    )
}

pub fn district() -> Schema {
    with_address(
        &[
            ("d_w_id", Type::Int32),
            ("d_id", Type::Int32),
            ("d_name", Type::VarStr(10)),
        ],
        "d",
        &[
            ("d_tax", RATE),
            ("d_ytd", MONEY),
            ("d_next_o_id", Type::Int32),
        ],
        2,
    )
}

pub fn customer() -> Schema {
    with_address(
        &[
            ("c_w_id", Type::Int32),
            ("c_d_id", Type::Int32),
            ("c_id", Type::Int32),
            ("c_first", Type::VarStr(16)),
            ("c_middle", Type::FixedStr(2)),
            ("c_last", Type::VarStr(16)),
        ],
        "c",
        &[
            ("c_phone", Type::FixedStr(16)),
            ("c_since", Type::Int64),
            ("c_credit", Type::FixedStr(2)),
            ("c_credit_lim", MONEY),
            ("c_discount", RATE),
            ("c_balance", MONEY),
            ("c_ytd_payment", MONEY),
            ("c_payment_cnt", Type::Int32),
            ("c_delivery_cnt", Type::Int32),
            ("c_data", Type::VarStr(C_DATA_CHARS_MAX)),
        ],
        3,
    )
}

pub fn history() -> Schema {
    schema(
        &[
            ("h_id", Type::Int64),
            ("h_c_id", Type::Int32),
            ("h_c_d_id", Type::Int32),
            ("h_c_w_id", Type::Int32),
            ("h_d_id", Type::Int32),
            ("h_w_id", Type::Int32),
            ("h_date", Type::Int64),
            ("h_amount", MONEY),
            ("h_data", Type::VarStr(24)),
        ],
        1,
    )
}

pub fn new_order() -> Schema {
    schema(
        &[
            ("no_w_id", Type::Int32),
            ("no_d_id", Type::Int32),
            ("no_o_id", Type::Int32),
        ],
        3,
    )
}

pub fn order() -> Schema {
    schema(
        &[
            ("o_w_id", Type::Int32),
            ("o_d_id", Type::Int32),
            ("o_id", Type::Int32),
            ("o_c_id", Type::Int32),
            ("o_entry_d", Type::Int64),
            ("o_carrier_id", Type::Int32),
            ("o_ol_cnt", Type::Int32),
            ("o_all_local", Type::Int32),
        ],
        3,
    )
}

pub fn order_line() -> Schema {
    schema(
        &[
            ("ol_w_id", Type::Int32),
            ("ol_d_id", Type::Int32),
            ("ol_o_id", Type::Int32),
            ("ol_number", Type::Int32),
            ("ol_i_id", Type::Int32),
            ("ol_supply_w_id", Type::Int32),
            ("ol_delivery_d", Type::Int64),
            ("ol_quantity", Type::Int32),
            ("ol_amount", MONEY),
            ("ol_dist_info", Type::FixedStr(DIST_INFO_CHARS)),
        ],
        4,
    )
}

pub fn item() -> Schema {
    schema(
        &[
            ("i_id", Type::Int32),
            ("i_im_id", Type::Int32),
            ("i_name", Type::VarStr(24)),
            ("i_price", MONEY),
            ("i_data", Type::VarStr(50)),
        ],
        1,
    )
}

pub fn stock() -> Schema {
    let dist: Vec<String> = (1..=10).map(|d| format!("s_dist_{d:02}")).collect();
    let mut columns = vec![
        ("s_w_id", Type::Int32),
        ("s_i_id", Type::Int32),
        ("s_quantity", Type::Int32),
    ];
    columns.extend(
        dist.iter()
            .map(|n| (n.as_str(), Type::FixedStr(DIST_INFO_CHARS))),
    );
    columns.extend([
        ("s_ytd", Type::Int64),
        ("s_order_cnt", Type::Int32),
        ("s_remote_cnt", Type::Int32),
        ("s_data", Type::VarStr(50)),
    ]);
    schema(&columns, 2)
}

/// Every table's name and schema, in creation order.
pub fn all() -> Vec<(&'static str, Schema)> {
    vec![
        (WAREHOUSE, warehouse()),
        (DISTRICT, district()),
        (CUSTOMER, customer()),
        (HISTORY, history()),
        (NEW_ORDER, new_order()),
        (ORDER, order()),
        (ORDER_LINE, order_line()),
        (ITEM, item()),
        (STOCK, stock()),
    ]
}

/// The widest row of any table, in bytes (the customer's): what a page
/// must hold.
pub fn widest_row_bytes() -> usize {
    all()
        .iter()
        .map(|(_, s)| s.max_row_bytes())
        .max()
        .unwrap_or(0)
}

/// Create the nine tables with their indexes. A table goes into the data
/// space of its own name when the database has one (a page size per table
/// space, through `--config`), into the first data space otherwise.
pub fn create(db: &Database) -> Result<()> {
    for (name, schema) in all() {
        let mut spec = TableSpec::typed(name, schema);
        if db.config().data.iter().any(|space| space.name == name) {
            spec = spec.in_space(name);
        }
        let spec = match name {
            CUSTOMER => {
                spec.with_index(CUSTOMER_BY_LAST, &["c_w_id", "c_d_id", "c_last", "c_first"])
            }
            ORDER => spec.with_index(ORDER_BY_CUSTOMER, &["o_w_id", "o_d_id", "o_c_id", "o_id"]),
            _ => spec,
        };
        db.create_table(spec)?;
    }
    Ok(())
}

/// Handles of the nine tables.
pub struct Tables {
    pub warehouse: Table,
    pub district: Table,
    pub customer: Table,
    pub history: Table,
    pub new_order: Table,
    pub order: Table,
    pub order_line: Table,
    pub item: Table,
    pub stock: Table,
}

impl Tables {
    pub fn open(db: &Database) -> Result<Tables> {
        Ok(Tables {
            warehouse: db.table(WAREHOUSE)?,
            district: db.table(DISTRICT)?,
            customer: db.table(CUSTOMER)?,
            history: db.table(HISTORY)?,
            new_order: db.table(NEW_ORDER)?,
            order: db.table(ORDER)?,
            order_line: db.table(ORDER_LINE)?,
            item: db.table(ITEM)?,
            stock: db.table(STOCK)?,
        })
    }
}

/// An integer column of a row (0 if absent or not an integer).
pub fn int(row: &[Value], column: usize) -> i64 {
    row.get(column).and_then(Value::as_int).unwrap_or(0)
}

/// A decimal column of a row, as its scaled integer (0 if absent).
pub fn dec(row: &[Value], column: usize) -> i64 {
    row.get(column).and_then(Value::as_decimal).unwrap_or(0)
}

/// A string column of a row ("" if absent).
pub fn text(row: &[Value], column: usize) -> &str {
    row.get(column).and_then(Value::as_str).unwrap_or("")
}

/// An integer key or column value.
pub fn i(v: impl Into<i64>) -> Value {
    Value::Int(v.into())
}
