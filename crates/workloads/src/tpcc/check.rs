//! Consistency conditions 1 to 4 of clause 3.3.2, checked after every run.
//!
//! 1. W_YTD = sum(D_YTD) of the warehouse's districts.
//! 2. D_NEXT_O_ID − 1 = max(O_ID) = max(NO_O_ID) in each district.
//! 3. max(NO_O_ID) − min(NO_O_ID) + 1 = the number of NEW-ORDER rows of
//!    each district.
//! 4. sum(O_OL_CNT) = the number of ORDER-LINE rows of each district.
//!
//! A district whose NEW-ORDER rows were all delivered has no max(NO_O_ID);
//! conditions 2 and 3 then hold for its NEW-ORDER part vacuously. The first
//! violation found is reported, naming the condition and the district.

use flashlab_engine::row::{Value, encode_key};
use flashlab_engine::{Database, Result, Table, Transaction};

use super::DISTRICTS_PER_WAREHOUSE;
use super::schema::*;

fn rows(txn: &mut Transaction, table: &Table, prefix: &[Value]) -> Result<Vec<Vec<Value>>> {
    let schema = table
        .def()
        .schema
        .clone()
        .ok_or_else(|| flashlab_engine::Error::Invalid("TPC-C tables are typed".into()))?;
    txn.scan_prefix(table, &encode_key(prefix))?
        .iter()
        .map(|(_, bytes)| schema.decode_row(bytes))
        .collect()
}

/// Check conditions 1 to 4 for warehouses 1 to `warehouses`.
pub fn check(db: &Database, warehouses: u32) -> Result<std::result::Result<(), String>> {
    let t = Tables::open(db)?;
    let mut txn = db.begin()?;
    for w in 1..=warehouses {
        if let Err(violation) = check_warehouse(&mut txn, &t, w)? {
            txn.commit()?;
            return Ok(Err(violation));
        }
    }
    txn.commit()?;
    Ok(Ok(()))
}

fn check_warehouse(
    txn: &mut Transaction,
    t: &Tables,
    w: u32,
) -> Result<std::result::Result<(), String>> {
    let Some(warehouse) = txn.get_row(&t.warehouse, &[i(w)])? else {
        return Ok(Err(format!("warehouse {w} is missing")));
    };
    let districts = rows(txn, &t.district, &[i(w)])?;
    let d_ytd: i64 = districts.iter().map(|d| dec(d, D_YTD)).sum();
    if dec(&warehouse, W_YTD) != d_ytd {
        return Ok(Err(format!(
            "condition 1: warehouse {w} W_YTD {} but its districts' D_YTD add up to {d_ytd}",
            dec(&warehouse, W_YTD)
        )));
    }
    if districts.len() != DISTRICTS_PER_WAREHOUSE as usize {
        return Ok(Err(format!(
            "warehouse {w} has {} districts",
            districts.len()
        )));
    }
    for district in &districts {
        let d = int(district, 1) as u32;
        if let Err(v) = check_district(txn, t, w, d, int(district, D_NEXT_O_ID))? {
            return Ok(Err(v));
        }
    }
    Ok(Ok(()))
}

fn check_district(
    txn: &mut Transaction,
    t: &Tables,
    w: u32,
    d: u32,
    next_o_id: i64,
) -> Result<std::result::Result<(), String>> {
    let orders = rows(txn, &t.order, &[i(w), i(d)])?;
    let new_orders = rows(txn, &t.new_order, &[i(w), i(d)])?;
    let max_o = orders.iter().map(|o| int(o, O_ID)).max().unwrap_or(0);
    let no_ids: Vec<i64> = new_orders.iter().map(|n| int(n, NO_O_ID)).collect();
    let (min_no, max_no) = (no_ids.iter().min(), no_ids.iter().max());
    if next_o_id - 1 != max_o || max_no.is_some_and(|&m| m != max_o) {
        return Ok(Err(format!(
            "condition 2: district ({w}, {d}) D_NEXT_O_ID - 1 = {}, max(O_ID) = {max_o}, max(NO_O_ID) = {}",
            next_o_id - 1,
            max_no.map_or("none".to_string(), |m| m.to_string())
        )));
    }
    if let (Some(&lo), Some(&hi)) = (min_no, max_no)
        && hi - lo + 1 != no_ids.len() as i64
    {
        return Ok(Err(format!(
            "condition 3: district ({w}, {d}) NEW-ORDER ids {lo} to {hi} but {} rows",
            no_ids.len()
        )));
    }
    let ol_cnt: i64 = orders.iter().map(|o| int(o, O_OL_CNT)).sum();
    // Counted, not decoded: ORDER-LINE is the largest table.
    let lines = txn
        .scan_prefix(&t.order_line, &encode_key(&[i(w), i(d)]))?
        .len() as i64;
    if ol_cnt != lines {
        return Ok(Err(format!(
            "condition 4: district ({w}, {d}) sum(O_OL_CNT) = {ol_cnt} but {lines} ORDER-LINE rows"
        )));
    }
    Ok(Ok(()))
}
