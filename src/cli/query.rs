//! `flashlab query DIR --table T [--as-of TS] [--key K | --prefix P] [--limit N] [--json]`
//!
//! Inspect a table: current rows, or as of a past commit timestamp (time
//! travel, within the retention window of this process's lifetime: rollback
//! segments do not survive a restart, so a timestamp from before the open is
//! "snapshot too old").

use std::ops::Bound;
use std::path::PathBuf;

use flashlab_engine::Database;
use flashlab_engine::db::dir::config_from_manifest;
use flashlab_engine::row::{Column, Schema, Type, Value, encode_key};
use flashlab_runtime::RealRuntime;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The database directory.
    dir: PathBuf,
    /// The table to read (an unknown name lists the tables).
    #[arg(long)]
    table: String,
    /// A commit timestamp to read as of.
    #[arg(long)]
    as_of: Option<u64>,
    /// One key: text for byte tables; for typed tables the key columns'
    /// values, separated by commas (integers, decimals like 12.50, text).
    #[arg(long, conflicts_with = "prefix", allow_hyphen_values = true)]
    key: Option<String>,
    /// Keys starting with this text.
    #[arg(long)]
    prefix: Option<String>,
    /// Most rows shown (the total is counted whatever the limit).
    #[arg(long, default_value_t = 100)]
    limit: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// The error for a table that does not exist: it lists those that do.
fn unknown_table(db: &Database, name: &str) -> anyhow::Error {
    let mut names: Vec<String> = db.tables().iter().map(|t| t.name().to_string()).collect();
    names.sort();
    let known = if names.is_empty() {
        "the database has no tables".to_string()
    } else {
        format!("tables: {}", names.join(", "))
    };
    anyhow::anyhow!("--table: no table '{}'; {known}", cut(name))
}

/// Most characters of user input an error echoes.
const ECHO_CHARS_MAX: usize = 80;

fn cut(text: &str) -> String {
    flashlab_devices::trace::formats::cut(text, ECHO_CHARS_MAX)
}

/// The stored key for `--key`: the text itself for byte tables; for typed
/// tables, the key columns' values parsed from comma-separated text.
fn key_bytes(schema: Option<&Schema>, key: &str) -> anyhow::Result<Vec<u8>> {
    let Some(schema) = schema else {
        return Ok(key.as_bytes().to_vec());
    };
    let parts: Vec<&str> = key.split(',').map(str::trim).collect();
    let columns = schema.key();
    if parts.len() != columns.len() {
        anyhow::bail!(
            "--key '{}': the key has {} columns, {} given (separate them with commas)",
            cut(key),
            columns.len(),
            parts.len()
        );
    }
    let values = columns
        .iter()
        .zip(&parts)
        .map(|(&i, part)| key_value(&schema.columns()[i], part))
        .collect::<anyhow::Result<Vec<Value>>>()?;
    Ok(encode_key(&values))
}

fn key_value(column: &Column, text: &str) -> anyhow::Result<Value> {
    let bad = || {
        anyhow::anyhow!(
            "--key: '{}' is not a value of column {} ({})",
            cut(text),
            column.name,
            column.ty
        )
    };
    Ok(match column.ty {
        Type::Int32 | Type::Int64 => Value::Int(text.parse().map_err(|_| bad())?),
        Type::Decimal { scale } => Value::Decimal(parse_decimal(text, scale).ok_or_else(bad)?),
        Type::FixedStr(_) | Type::VarStr(_) => Value::Str(text.to_string()),
    })
}

/// "12.5" at scale 2 is 1250; more fraction digits than the scale is `None`.
fn parse_decimal(text: &str, scale: u8) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if fraction.len() > scale as usize || whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let padded = format!("{whole}{fraction:0<width$}", width = scale as usize);
    if !padded.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value: i64 = padded.parse().ok()?;
    Some(if negative { -value } else { value })
}

/// A typed row's key as `--key` takes it: the key columns, comma-separated.
fn key_text(schema: &Schema, row: &[Value]) -> String {
    schema
        .key()
        .iter()
        .map(|&i| value_text(&row[i], schema.columns()[i].ty))
        .collect::<Vec<_>>()
        .join(",")
}

/// One value as `--key` takes it: an integer, a decimal with its scale's
/// digits (12.50), or the text itself.
fn value_text(value: &Value, ty: Type) -> String {
    match (value, ty) {
        (Value::Decimal(v), Type::Decimal { scale }) => decimal_text(*v, scale),
        (Value::Int(v) | Value::Decimal(v), _) => v.to_string(),
        (Value::Str(s), _) => s.clone(),
    }
}

/// A typed row as text: `column=value`, comma-separated.
fn row_text(schema: &Schema, row: &[Value]) -> String {
    schema
        .columns()
        .iter()
        .zip(row)
        .map(|(c, v)| format!("{}={}", c.name, value_text(v, c.ty)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A typed row as a JSON object: integers as numbers, decimals as their
/// text (exact), strings as strings.
fn row_json(schema: &Schema, row: &[Value]) -> serde_json::Value {
    let fields = schema.columns().iter().zip(row).map(|(c, v)| {
        let value = match v {
            Value::Int(i) => serde_json::Value::from(*i),
            other => serde_json::Value::from(value_text(other, c.ty)),
        };
        (c.name.clone(), value)
    });
    serde_json::Value::Object(fields.collect())
}

/// 1250 at scale 2 is "12.50" (what [`parse_decimal`] reads back).
fn decimal_text(value: i64, scale: u8) -> String {
    let unit = 10u128.pow(u32::from(scale));
    let magnitude = value.unsigned_abs() as u128;
    let sign = if value < 0 { "-" } else { "" };
    if scale == 0 {
        return format!("{sign}{magnitude}");
    }
    let width = scale as usize;
    format!("{sign}{}.{:0width$}", magnitude / unit, magnitude % unit)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// One row as `query` shows it: its key, and its value as text and JSON.
struct ShownRow {
    key: String,
    text: String,
    json: serde_json::Value,
}

/// Decode one stored row; a row that does not decode is damage, reported
/// as an error (never shown as if it were a value).
fn shown_row(
    table: &str,
    schema: Option<&Schema>,
    key: &[u8],
    value: &[u8],
) -> anyhow::Result<ShownRow> {
    let Some(schema) = schema else {
        let shown = text(value);
        return Ok(ShownRow {
            key: text(key),
            json: serde_json::Value::from(shown.clone()),
            text: shown,
        });
    };
    let row = schema.decode_row(value).map_err(|e| {
        anyhow::anyhow!(
            "table {table}: the row of key {} does not decode: {e}",
            cut(&text(key))
        )
    })?;
    Ok(ShownRow {
        key: key_text(schema, &row),
        text: row_text(schema, &row),
        json: row_json(schema, &row),
    })
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let rt = RealRuntime::new(0);
    let _enter = RealRuntime::enter(&rt);
    let config = config_from_manifest(&args.dir)?;
    let db = Database::open_dir_read_only(&args.dir, &config)?;
    let table = db
        .table(&args.table)
        .map_err(|_| unknown_table(&db, &args.table))?;
    let mut txn = match args.as_of {
        Some(ts) => db.begin_as_of(ts)?,
        None => db.begin()?,
    };
    let rows = match (&args.key, &args.prefix) {
        (Some(key), _) => txn
            .get(&table, &key_bytes(table.def().schema.as_ref(), key)?)?
            .map(|v| vec![(key.as_bytes().to_vec(), v)])
            .unwrap_or_default(),
        (None, Some(prefix)) => txn.scan_prefix(&table, prefix.as_bytes())?,
        (None, None) => txn.scan(&table, Bound::Unbounded, Bound::Unbounded)?,
    };
    let snapshot = txn.snapshot_ts();
    txn.commit()?;
    let schema = table.def().schema.clone();
    let shown = rows
        .iter()
        .take(args.limit)
        .map(|(k, v)| shown_row(&args.table, schema.as_ref(), k, v))
        .collect::<anyhow::Result<Vec<ShownRow>>>()?;
    if args.json {
        let rows_json: Vec<_> = shown
            .iter()
            .map(|r| serde_json::json!([r.key, r.json]))
            .collect();
        super::print_json(
            &serde_json::json!({"table": args.table, "snapshot_ts": snapshot, "rows": rows_json, "total": rows.len()}),
        )?;
    } else {
        println!(
            "table {} as of commit timestamp {snapshot}: {} rows",
            args.table,
            rows.len()
        );
        for row in &shown {
            println!("{}\t{}", row.key, row.text);
        }
    }
    db.close()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_round_trip_between_text_and_scaled_integers() {
        for (text, scale, value) in [("12.50", 2, 1250), ("-0.07", 2, -7), ("3", 0, 3)] {
            assert_eq!(parse_decimal(text, scale), Some(value), "{text}");
            assert_eq!(decimal_text(value, scale), text);
        }
        assert_eq!(parse_decimal("12.5", 2), Some(1250));
        assert_eq!(parse_decimal("1.234", 2), None);
        assert_eq!(parse_decimal("x", 2), None);
        assert_eq!(parse_decimal(".", 2), None);
    }
}
