//! Typed rows: schemas, the row codec, order-preserving keys, versions.
//!
//! B+trees store byte strings; tables store typed rows. This module turns
//! one into the other, three ways:
//!
//! - **Rows** ([`Schema::encode_row`] / [`Schema::decode_row`]) are compact:
//!   the columns in schema order, fixed-width integers, strings with a
//!   1- or 2-byte length (or padded to a fixed width), no per-column tags,
//!   since the schema says what comes next. The workloads (TPC-B, TPC-C)
//!   have no NULLs, so there is no null bitmap.
//! - **Keys** ([`encode_key`]) are order-preserving: comparing two encoded
//!   keys with memcmp, as the B+tree does, gives the order of the value
//!   tuples. Integers become big endian with the sign bit flipped; strings
//!   are escaped (0x00 → 0x00 0xFF) and terminated by 0x00 0x00, so that a
//!   string sorts before its extensions and composite keys compare column by
//!   column. A secondary index key is the index columns followed by the
//!   primary key columns (TPC-C's customer-by-name index: w_id, d_id,
//!   c_last, c_first, c_id).
//! - **Stored rows** ([`StoredRow`]) put a fixed [`VersionHeader`] before
//!   the row, for multi-version concurrency control: who
//!   created this version and where its predecessor lives in the rollback
//!   space.
//!
//! Row format, column by column (integers little endian):
//!
//! | type | bytes |
//! |------|-------|
//! | `Int32` | 4, two's complement |
//! | `Int64` | 8, two's complement |
//! | `Decimal { scale }` | 8: the value times 10^scale, two's complement |
//! | `FixedStr(n)` | n: the UTF-8 bytes, padded with 0x00 |
//! | `VarStr(max)` | length (1 byte if max ≤ 255, else 2), then the UTF-8 bytes |
//!
//! Key format, value by value: `Int` and `Decimal` as 8 bytes big endian
//! with bit 63 flipped; `Str` escaped and terminated as above.
//!
//! Stored row format: [`VERSION_HEADER_BYTES`] = 16 bytes of header, then
//! the row. Header: bytes 0..8 `created_by` (little endian; bit 63 set: an
//! uncommitted transaction's id, clear: a commit timestamp), bytes 8..16
//! `prev` (little endian; the rollback-space address of the previous
//! version, 0 = none).
//!
//! Invariants (ROW-n):
//! 1. `decode_row(encode_row(r)) == r` for every row the schema accepts.
//! 2. For tuples of the same column types, memcmp order of [`encode_key`]
//!    equals lexicographic order of the values, and the key of a prefix of
//!    the columns is a byte prefix of the key of all of them.
//! 3. Decoding never panics: malformed bytes are `Error::Malformed` with
//!    `what` = "row", "key" or "stored row", naming the column.
//! 4. A schema has at least one column, unique non-empty names, a
//!    non-empty primary key of distinct, existing columns, non-zero
//!    fixed-string widths and decimal scales of at most
//!    [`DECIMAL_SCALE_MAX`]; a deserialized schema is checked the same way.
//! 5. Every stored row starts with exactly [`VERSION_HEADER_BYTES`] of
//!    version header, and no schema encodes a row to zero bytes, so an empty
//!    row after the header is free for MVCC to mean "deleted".

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Largest decimal scale (10^18 is the largest power of ten in an i64).
pub const DECIMAL_SCALE_MAX: u8 = 18;
/// Bytes of the version header before every stored row (ROW-5).
pub const VERSION_HEADER_BYTES: usize = 16;
/// `VersionHeader::prev` when there is no previous version.
pub const NO_PREV_VERSION: u64 = 0;
/// `VarStr` columns up to this maximum length use a 1-byte length.
const SHORT_LENGTH_MAX: u16 = u8::MAX as u16;
/// Bytes of an integer in a key.
const KEY_INT_BYTES: usize = 8;
/// Flips the sign bit so that signed order becomes unsigned order.
const KEY_SIGN_FLIP: u64 = 1 << 63;
/// In keys, 0x00 is followed by this to mean a literal 0x00 ...
const KEY_ESCAPED_ZERO: u8 = 0xFF;
/// ... and by this to end the string.
const KEY_STRING_END: u8 = 0x00;

/// A column type. Lengths are in bytes of UTF-8.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Type {
    /// A 32-bit signed integer.
    Int32,
    /// A 64-bit signed integer.
    Int64,
    /// A fixed-point number stored as an i64 scaled by 10^scale.
    Decimal {
        /// Digits after the decimal point.
        scale: u8,
    },
    /// A string of at most `n` bytes stored in exactly `n` (no NUL inside).
    FixedStr(u16),
    /// A string of at most `max_len` bytes stored with its length.
    VarStr(u16),
}

impl Type {
    /// Most bytes a value of this type takes in a row.
    pub fn max_row_bytes(self) -> usize {
        match self {
            Type::Int32 => 4,
            Type::Int64 | Type::Decimal { .. } => 8,
            Type::FixedStr(n) => usize::from(n),
            Type::VarStr(max) => length_prefix_bytes(max) + usize::from(max),
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Int32 => write!(f, "INT32"),
            Type::Int64 => write!(f, "INT64"),
            Type::Decimal { scale } => write!(f, "DECIMAL(scale {scale})"),
            Type::FixedStr(n) => write!(f, "CHAR({n})"),
            Type::VarStr(max) => write!(f, "VARCHAR({max})"),
        }
    }
}

fn length_prefix_bytes(max_len: u16) -> usize {
    if max_len <= SHORT_LENGTH_MAX { 1 } else { 2 }
}

/// A typed value. `Int` serves both integer types; `Decimal` holds the
/// scaled integer (12.34 in a scale-2 column is `Decimal(1234)`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Value {
    /// An integer (of an `Int32` or `Int64` column).
    Int(i64),
    /// A decimal, as an integer scaled by its column's 10^scale.
    Decimal(i64),
    /// A string.
    Str(String),
}

impl Value {
    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// The scaled decimal, if this is one.
    pub fn as_decimal(&self) -> Option<i64> {
        match self {
            Value::Decimal(v) => Some(*v),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    fn kind_name(&self) -> &'static str {
        match self {
            Value::Int(_) => "integer",
            Value::Decimal(_) => "decimal",
            Value::Str(_) => "string",
        }
    }
}

/// A named, typed column.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    /// The column's name.
    pub name: String,
    /// The column's type.
    pub ty: Type,
}

impl Column {
    /// A column called `name` of type `ty`.
    pub fn new(name: impl Into<String>, ty: Type) -> Column {
        Column {
            name: name.into(),
            ty,
        }
    }

    fn invalid(&self, problem: impl fmt::Display) -> Error {
        Error::Invalid(format!("column '{}' ({}): {problem}", self.name, self.ty))
    }

    /// Check that `value` fits this column.
    fn check(&self, value: &Value) -> Result<()> {
        match (self.ty, value) {
            (Type::Int32, Value::Int(v)) if i32::try_from(*v).is_err() => {
                Err(self.invalid(format!("{v} is outside the 32-bit range")))
            }
            (Type::Int32 | Type::Int64, Value::Int(_))
            | (Type::Decimal { .. }, Value::Decimal(_)) => Ok(()),
            (Type::FixedStr(n) | Type::VarStr(n), Value::Str(s)) if s.len() > usize::from(n) => {
                Err(self.invalid(format!("a string of {} bytes is longer than {n}", s.len())))
            }
            (Type::FixedStr(_), Value::Str(s)) if s.contains('\0') => {
                Err(self.invalid("a fixed-length string cannot contain NUL"))
            }
            (Type::FixedStr(_) | Type::VarStr(_), Value::Str(_)) => Ok(()),
            (_, value) => Err(self.invalid(format!("cannot hold a {} value", value.kind_name()))),
        }
    }

    /// Append `value`'s row encoding.
    fn encode(&self, value: &Value, out: &mut Vec<u8>) -> Result<()> {
        self.check(value)?;
        match (self.ty, value) {
            (Type::Int32, Value::Int(v)) => {
                let v = i32::try_from(*v).map_err(|_| self.invalid("outside the 32-bit range"))?;
                out.extend_from_slice(&v.to_le_bytes());
            }
            (Type::Int64, Value::Int(v)) | (Type::Decimal { .. }, Value::Decimal(v)) => {
                out.extend_from_slice(&v.to_le_bytes())
            }
            (Type::FixedStr(n), Value::Str(s)) => {
                out.extend_from_slice(s.as_bytes());
                out.resize(out.len() + usize::from(n) - s.len(), 0);
            }
            (Type::VarStr(max), Value::Str(s)) => {
                let len = u16::try_from(s.len()).map_err(|_| self.invalid("string too long"))?;
                if max <= SHORT_LENGTH_MAX {
                    out.push(len as u8);
                } else {
                    out.extend_from_slice(&len.to_le_bytes());
                }
                out.extend_from_slice(s.as_bytes());
            }
            (_, value) => {
                return Err(self.invalid(format!("cannot hold a {} value", value.kind_name())));
            }
        }
        Ok(())
    }

    /// Read one value of this column from a row.
    fn decode(&self, index: usize, reader: &mut Reader) -> Result<Value> {
        let bad = |problem: &str| self.malformed("row", index, problem);
        Ok(match self.ty {
            Type::Int32 => Value::Int(i64::from(i32::from_le_bytes(reader.array(&bad)?))),
            Type::Int64 => Value::Int(i64::from_le_bytes(reader.array(&bad)?)),
            Type::Decimal { .. } => Value::Decimal(i64::from_le_bytes(reader.array(&bad)?)),
            Type::FixedStr(n) => {
                let raw = reader.take(usize::from(n), &bad)?;
                let end = raw.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
                let text = raw.get(..end).ok_or_else(|| bad("padding"))?;
                if text.contains(&0) {
                    return Err(bad("NUL inside a fixed-length string"));
                }
                Value::Str(utf8(text, &bad)?)
            }
            Type::VarStr(max) => {
                let len = match length_prefix_bytes(max) {
                    1 => usize::from(reader.take(1, &bad)?.first().copied().unwrap_or_default()),
                    _ => usize::from(u16::from_le_bytes(reader.array(&bad)?)),
                };
                if len > usize::from(max) {
                    return Err(bad(&format!("length {len} exceeds the maximum {max}")));
                }
                Value::Str(utf8(reader.take(len, &bad)?, &bad)?)
            }
        })
    }

    fn malformed(&self, what: &'static str, index: usize, problem: &str) -> Error {
        Error::malformed(
            what,
            format!("column {index} '{}' ({}): {problem}", self.name, self.ty),
        )
    }
}

fn utf8(bytes: &[u8], bad: &dyn Fn(&str) -> Error) -> Result<String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| bad("invalid UTF-8"))
}

/// A bounds-checked cursor over encoded bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, bad: &dyn Fn(&str) -> Error) -> Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len());
        let slice = end
            .and_then(|end| self.bytes.get(self.at..end))
            .ok_or_else(|| bad("cut short"))?;
        self.at += n;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self, bad: &dyn Fn(&str) -> Error) -> Result<[u8; N]> {
        self.take(N, bad)?.try_into().map_err(|_| bad("cut short"))
    }

    fn next_byte(&mut self, bad: &dyn Fn(&str) -> Error) -> Result<u8> {
        Ok(self.array::<1>(bad)?[0])
    }

    fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }

    /// Malformed `what` unless every byte was read ("after the last `part`").
    fn finish(&self, what: &'static str, part: &str) -> Result<()> {
        if self.done() {
            return Ok(());
        }
        Err(Error::malformed(
            what,
            format!(
                "{} bytes left after the last {part}",
                self.bytes.len() - self.at
            ),
        ))
    }
}

/// Columns and primary key of a table or index. See ROW-4.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "SchemaDef")]
pub struct Schema {
    columns: Vec<Column>,
    key: Vec<usize>,
}

/// A schema as stored, before validation.
#[derive(Deserialize)]
struct SchemaDef {
    columns: Vec<Column>,
    key: Vec<usize>,
}

impl TryFrom<SchemaDef> for Schema {
    type Error = Error;

    fn try_from(def: SchemaDef) -> Result<Schema> {
        Schema::new(def.columns, def.key)
    }
}

impl Schema {
    /// A schema of `columns` whose primary key is the columns at the
    /// indexes `key`, in that order.
    pub fn new(columns: Vec<Column>, key: Vec<usize>) -> Result<Schema> {
        let invalid = |problem: String| Err(Error::Invalid(format!("schema: {problem}")));
        if columns.is_empty() || key.is_empty() {
            return invalid("needs at least one column and a primary key".into());
        }
        for (i, column) in columns.iter().enumerate() {
            if column.name.is_empty() || columns[..i].iter().any(|c| c.name == column.name) {
                return invalid(format!(
                    "column {i} has an empty or duplicate name '{}'",
                    column.name
                ));
            }
            match column.ty {
                Type::FixedStr(0) => {
                    return invalid(format!("column '{}' is a CHAR(0)", column.name));
                }
                Type::Decimal { scale } if scale > DECIMAL_SCALE_MAX => {
                    return invalid(format!(
                        "column '{}' has scale {scale} > {DECIMAL_SCALE_MAX}",
                        column.name
                    ));
                }
                _ => {}
            }
        }
        for (i, &k) in key.iter().enumerate() {
            if k >= columns.len() || key[..i].contains(&k) {
                return invalid(format!(
                    "primary key column {k} is out of range or repeated"
                ));
            }
        }
        Ok(Schema { columns, key })
    }

    /// The columns, in row order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Indexes of the primary key columns.
    pub fn key(&self) -> &[usize] {
        &self.key
    }

    /// Index of the column called `name`.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// Most bytes a row of this schema encodes to.
    pub fn max_row_bytes(&self) -> usize {
        self.columns.iter().map(|c| c.ty.max_row_bytes()).sum()
    }

    /// Encode a row: one value per column, in column order (ROW-1).
    pub fn encode_row(&self, row: &[Value]) -> Result<Vec<u8>> {
        self.check_arity(row)?;
        let mut out = Vec::with_capacity(self.max_row_bytes());
        for (column, value) in self.columns.iter().zip(row) {
            column.encode(value, &mut out)?;
        }
        Ok(out)
    }

    /// Decode a row (ROW-1, ROW-3).
    pub fn decode_row(&self, bytes: &[u8]) -> Result<Vec<Value>> {
        let mut reader = Reader { bytes, at: 0 };
        let row = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, column)| column.decode(i, &mut reader))
            .collect::<Result<Vec<_>>>()?;
        reader.finish("row", "column")?;
        Ok(row)
    }

    /// The primary key of `row`, encoded for the B+tree (ROW-2).
    pub fn primary_key(&self, row: &[Value]) -> Result<Vec<u8>> {
        self.index_key(row, &self.key)
    }

    /// The key of `row` over the columns at `columns` (an index: its own
    /// columns, then the primary key's), type-checked and encoded (ROW-2).
    pub fn index_key(&self, row: &[Value], columns: &[usize]) -> Result<Vec<u8>> {
        self.check_arity(row)?;
        // Sized once: a key grew through two or three reallocations.
        let len = columns
            .iter()
            .filter_map(|&i| row.get(i))
            .map(key_len_hint)
            .sum();
        let mut out = Vec::with_capacity(len);
        for &i in columns {
            let (column, value) = self.columns.get(i).zip(row.get(i)).ok_or_else(|| {
                Error::Invalid(format!(
                    "key column {i} of a schema of {} columns",
                    self.columns.len()
                ))
            })?;
            column.check(value)?;
            encode_key_into(&mut out, value);
        }
        Ok(out)
    }

    /// Decode a key over the columns at `columns` (as made by
    /// [`Schema::index_key`]).
    pub fn decode_index_key(&self, columns: &[usize], bytes: &[u8]) -> Result<Vec<Value>> {
        let types = columns
            .iter()
            .map(|&i| self.columns.get(i).map(|c| c.ty))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "key columns {columns:?} of {} columns",
                    self.columns.len()
                ))
            })?;
        decode_key(&types, bytes)
    }

    fn check_arity(&self, row: &[Value]) -> Result<()> {
        if row.len() != self.columns.len() {
            return Err(Error::Invalid(format!(
                "a row of {} values for a schema of {} columns",
                row.len(),
                self.columns.len()
            )));
        }
        Ok(())
    }
}

/// Order-preserving encoding of a tuple of values (ROW-2). Integers and
/// decimals take 8 bytes; compare only keys whose columns have the same
/// types.
pub fn encode_key(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.iter().map(key_len_hint).sum());
    for value in values {
        encode_key_into(&mut out, value);
    }
    out
}

/// The bytes of `value`'s key encoding, exact unless a string holds zero
/// bytes (each takes one more).
fn key_len_hint(value: &Value) -> usize {
    match value {
        Value::Int(_) | Value::Decimal(_) => KEY_INT_BYTES,
        Value::Str(s) => s.len() + 2,
    }
}

/// Append one value's key encoding to `out`.
pub fn encode_key_into(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Int(v) | Value::Decimal(v) => {
            out.extend_from_slice(&((*v as u64) ^ KEY_SIGN_FLIP).to_be_bytes())
        }
        Value::Str(s) => {
            for &b in s.as_bytes() {
                out.push(b);
                if b == 0 {
                    out.push(KEY_ESCAPED_ZERO);
                }
            }
            out.extend_from_slice(&[0, KEY_STRING_END]);
        }
    }
}

/// Decode a key of values of `types` (ROW-3).
pub fn decode_key(types: &[Type], bytes: &[u8]) -> Result<Vec<Value>> {
    let mut reader = Reader { bytes, at: 0 };
    let mut values = Vec::with_capacity(types.len());
    for (i, &ty) in types.iter().enumerate() {
        let bad = |problem: &str| Error::malformed("key", format!("value {i} ({ty}): {problem}"));
        let value = match ty {
            Type::Int32 | Type::Int64 | Type::Decimal { .. } => {
                let raw: [u8; KEY_INT_BYTES] = reader.array(&bad)?;
                let v = (u64::from_be_bytes(raw) ^ KEY_SIGN_FLIP) as i64;
                match ty {
                    Type::Int32 if i32::try_from(v).is_err() => {
                        return Err(bad("outside the 32-bit range"));
                    }
                    Type::Decimal { .. } => Value::Decimal(v),
                    _ => Value::Int(v),
                }
            }
            Type::FixedStr(max) | Type::VarStr(max) => {
                let text = unescape(&mut reader, &bad)?;
                if text.len() > usize::from(max) {
                    return Err(bad(&format!(
                        "{} bytes exceed the length {max}",
                        text.len()
                    )));
                }
                Value::Str(utf8(&text, &bad)?)
            }
        };
        values.push(value);
    }
    reader.finish("key", "value")?;
    Ok(values)
}

fn unescape(reader: &mut Reader, bad: &dyn Fn(&str) -> Error) -> Result<Vec<u8>> {
    let mut text = Vec::new();
    loop {
        match reader.next_byte(bad)? {
            0 => match reader.next_byte(bad)? {
                KEY_STRING_END => return Ok(text),
                KEY_ESCAPED_ZERO => text.push(0),
                other => return Err(bad(&format!("0x00 followed by {other:#04x}"))),
            },
            b => text.push(b),
        }
    }
}

/// The smallest key above every key that starts with `prefix`, for a scan
/// of a key prefix (`None`: no upper bound, the prefix is all 0xFF).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != u8::MAX)?;
    let mut end = prefix.get(..=last)?.to_vec();
    if let Some(b) = end.last_mut() {
        *b += 1;
    }
    Some(end)
}

/// Who created a row version and where the version before it is (ROW-5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct VersionHeader {
    /// A commit timestamp, or with [`VersionHeader::TXN_ID_FLAG`] set, the
    /// id of the transaction that wrote it and has not committed yet.
    pub created_by: u64,
    /// Rollback-space address of the previous version; [`NO_PREV_VERSION`]
    /// if there is none.
    pub prev: u64,
}

impl VersionHeader {
    /// Set in `created_by` when it holds a transaction id.
    pub const TXN_ID_FLAG: u64 = 1 << 63;

    /// A version committed at `commit_ts` (below 2^63).
    pub fn committed(commit_ts: u64, prev: u64) -> VersionHeader {
        debug_assert!(
            commit_ts < Self::TXN_ID_FLAG,
            "ROW-5: commit timestamp uses the flag bit"
        );
        VersionHeader {
            created_by: commit_ts & !Self::TXN_ID_FLAG,
            prev,
        }
    }

    /// A version written by the uncommitted transaction `txn_id` (below
    /// 2^63).
    pub fn uncommitted(txn_id: u64, prev: u64) -> VersionHeader {
        debug_assert!(
            txn_id < Self::TXN_ID_FLAG,
            "ROW-5: transaction id uses the flag bit"
        );
        VersionHeader {
            created_by: txn_id | Self::TXN_ID_FLAG,
            prev,
        }
    }

    /// The commit timestamp, if the version is committed.
    pub fn commit_ts(&self) -> Option<u64> {
        (self.created_by & Self::TXN_ID_FLAG == 0).then_some(self.created_by)
    }

    /// The writing transaction, if the version is not committed yet.
    pub fn txn_id(&self) -> Option<u64> {
        (self.created_by & Self::TXN_ID_FLAG != 0).then_some(self.created_by & !Self::TXN_ID_FLAG)
    }

    /// The 16 header bytes (see the module documentation).
    pub fn encode(&self) -> [u8; VERSION_HEADER_BYTES] {
        let mut out = [0u8; VERSION_HEADER_BYTES];
        out[..8].copy_from_slice(&self.created_by.to_le_bytes());
        out[8..].copy_from_slice(&self.prev.to_le_bytes());
        out
    }

    /// Split a stored row into its header and row bytes, without copying.
    pub fn split(bytes: &[u8]) -> Result<(VersionHeader, &[u8])> {
        let bad = |_: &str| {
            Error::malformed(
                "stored row",
                format!(
                    "{} bytes cannot hold the {VERSION_HEADER_BYTES}-byte version header",
                    bytes.len()
                ),
            )
        };
        let mut reader = Reader { bytes, at: 0 };
        let created_by = u64::from_le_bytes(reader.array(&bad)?);
        let prev = u64::from_le_bytes(reader.array(&bad)?);
        let row = bytes.get(VERSION_HEADER_BYTES..).unwrap_or_default();
        Ok((VersionHeader { created_by, prev }, row))
    }
}

/// A row version as stored in a table's B+tree: header, then row bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoredRow {
    /// The version header: who wrote this version, and where the older one is.
    pub header: VersionHeader,
    /// The row as [`Schema::encode_row`] made it.
    pub row: Vec<u8>,
}

impl StoredRow {
    /// The bytes stored in a B+tree.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(VERSION_HEADER_BYTES + self.row.len());
        out.extend_from_slice(&self.header.encode());
        out.extend_from_slice(&self.row);
        out
    }

    /// Read the bytes stored in a B+tree.
    pub fn decode(bytes: &[u8]) -> Result<StoredRow> {
        let (header, row) = VersionHeader::split(bytes)?;
        Ok(StoredRow {
            header,
            row: row.to_vec(),
        })
    }

    /// [`StoredRow::decode`] of bytes the caller owns: the row keeps their
    /// allocation, the header taken off in place.
    pub fn decode_owned(mut bytes: Vec<u8>) -> Result<StoredRow> {
        let (header, _) = VersionHeader::split(&bytes)?;
        // The split found the whole header.
        bytes.drain(..VERSION_HEADER_BYTES);
        Ok(StoredRow { header, row: bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// TPC-C's customer table, shortened.
    fn customer() -> Schema {
        let columns = vec![
            Column::new("c_w_id", Type::Int32),
            Column::new("c_d_id", Type::Int32),
            Column::new("c_id", Type::Int32),
            Column::new("c_first", Type::VarStr(16)),
            Column::new("c_middle", Type::FixedStr(2)),
            Column::new("c_last", Type::VarStr(16)),
            Column::new("c_balance", Type::Decimal { scale: 2 }),
            Column::new("c_ytd_payment", Type::Int64),
            Column::new("c_data", Type::VarStr(500)),
        ];
        Schema::new(columns, vec![0, 1, 2]).unwrap()
    }

    fn customer_row(w: i64, d: i64, c: i64, first: &str, last: &str) -> Vec<Value> {
        vec![
            Value::Int(w),
            Value::Int(d),
            Value::Int(c),
            Value::Str(first.into()),
            Value::Str("OE".into()),
            Value::Str(last.into()),
            Value::Decimal(-1000),
            Value::Int(10),
            Value::Str("x".repeat(300)),
        ]
    }

    /// The index of customers by name: w_id, d_id, c_last, c_first, c_id.
    const BY_NAME: [usize; 5] = [0, 1, 5, 3, 2];

    #[test]
    fn row_round_trips_compactly() {
        let schema = customer();
        let row = customer_row(1, 2, 3, "ALICE", "BARBARABLE");
        let bytes = schema.encode_row(&row).unwrap();
        assert_eq!(
            bytes.len(),
            4 * 3 + (1 + 5) + 2 + (1 + 10) + 8 + 8 + (2 + 300)
        );
        assert_eq!(schema.decode_row(&bytes).unwrap(), row, "ROW-1");
        assert!(bytes.len() <= schema.max_row_bytes());
    }

    #[test]
    fn row_type_errors_name_the_column() {
        let schema = customer();
        let cases = [
            (2, Value::Int(1 << 40), "'c_id' (INT32)"),
            (3, Value::Str("x".repeat(17)), "'c_first' (VARCHAR(16))"),
            (4, Value::Str("a\0".into()), "'c_middle' (CHAR(2))"),
            (6, Value::Int(5), "'c_balance' (DECIMAL(scale 2))"),
            (7, Value::Str("5".into()), "'c_ytd_payment' (INT64)"),
        ];
        for (column, value, name) in cases {
            let mut row = customer_row(1, 2, 3, "A", "B");
            row[column] = value;
            let err = schema.encode_row(&row).unwrap_err().to_string();
            assert!(err.contains(name), "{err}");
        }
        let err = schema
            .encode_row(&customer_row(1, 2, 3, "A", "B")[..4])
            .unwrap_err();
        assert!(err.to_string().contains("4 values"), "{err}");
    }

    #[test]
    fn row_malformed_bytes_are_errors() {
        let schema = customer();
        let bytes = schema
            .encode_row(&customer_row(1, 2, 3, "ALICE", "SMITH"))
            .unwrap();
        for cut in 0..bytes.len() {
            assert!(matches!(
                schema.decode_row(&bytes[..cut]),
                Err(Error::Malformed { what: "row", .. })
            ));
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(schema.decode_row(&long).is_err(), "trailing bytes");
        let mut bad = bytes.clone();
        bad[12] = 17; // c_first length above its maximum of 16
        let err = schema.decode_row(&bad).unwrap_err().to_string();
        assert!(err.contains("column 3 'c_first'"), "{err}");
        let mut bad = bytes;
        bad[13] = 0xFF; // invalid UTF-8
        assert!(schema.decode_row(&bad).is_err());
    }

    #[test]
    fn row_keys_order_composite_names() {
        let schema = customer();
        let key = |w, last: &str, first: &str, c| {
            schema
                .index_key(&customer_row(w, 1, c, first, last), &BY_NAME)
                .unwrap()
        };
        // By warehouse first, then a name before its extensions, then first name, then id.
        let ordered = [
            key(-5, "ZED", "A", 9),
            key(1, "SMITH", "ZOE", 9),
            key(1, "SMITH\0", "AL", 1),
            key(1, "SMITHSON", "AL", 1),
            key(1, "SMITHSON", "BOB", 0),
            key(1, "SMITHSON", "BOB", 7),
            key(2, "", "", 0),
        ];
        for pair in ordered.windows(2) {
            assert!(pair[0] < pair[1], "ROW-2: {:?} !< {:?}", pair[0], pair[1]);
        }
        // A prefix of the columns is a byte prefix; prefix_end bounds its scan.
        let prefix = encode_key(&[Value::Int(1), Value::Int(1), Value::Str("SMITHSON".into())]);
        let end = prefix_end(&prefix).unwrap();
        for k in &ordered[3..=4] {
            assert!(k.starts_with(&prefix) && k < &end);
        }
        assert!(ordered[2] < prefix && ordered[6] > end);
        let decoded = schema.decode_index_key(&BY_NAME, &ordered[3]).unwrap();
        assert_eq!(decoded[2], Value::Str("SMITHSON".into()));
        assert_eq!(prefix_end(&[1, 0xFF, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xFF]), None);
    }

    #[test]
    fn row_schema_rules_and_serde() {
        let col = |name: &str, ty| Column::new(name, ty);
        assert!(Schema::new(vec![], vec![]).is_err());
        assert!(Schema::new(vec![col("a", Type::Int32)], vec![1]).is_err());
        assert!(Schema::new(vec![col("a", Type::Int32), col("a", Type::Int64)], vec![0]).is_err());
        assert!(Schema::new(vec![col("a", Type::Int32)], vec![0, 0]).is_err());
        assert!(Schema::new(vec![col("a", Type::FixedStr(0))], vec![0]).is_err());
        assert!(Schema::new(vec![col("a", Type::Decimal { scale: 19 })], vec![0]).is_err());
        let schema = customer();
        let json = serde_json::to_string(&schema).unwrap();
        assert_eq!(serde_json::from_str::<Schema>(&json).unwrap(), schema);
        let broken = json.replace("\"key\":[0,1,2]", "\"key\":[0,1,99]");
        assert!(
            serde_json::from_str::<Schema>(&broken).is_err(),
            "ROW-4 applies to stored schemas"
        );
        assert_eq!(schema.column_index("c_last"), Some(5));
    }

    #[test]
    fn row_version_header_layout() {
        let header = VersionHeader::uncommitted(7, 0x0102);
        let bytes = header.encode();
        assert_eq!(bytes[..8], (7u64 | 1 << 63).to_le_bytes());
        assert_eq!(bytes[8..], 0x0102u64.to_le_bytes());
        assert_eq!((header.txn_id(), header.commit_ts()), (Some(7), None));
        let committed = VersionHeader::committed(99, NO_PREV_VERSION);
        assert_eq!(
            (committed.txn_id(), committed.commit_ts()),
            (None, Some(99))
        );
        let stored = StoredRow {
            header,
            row: vec![1, 2, 3],
        };
        let encoded = stored.encode();
        assert_eq!(encoded.len(), VERSION_HEADER_BYTES + 3, "ROW-5");
        assert_eq!(StoredRow::decode(&encoded).unwrap(), stored);
        assert_eq!(StoredRow::decode_owned(encoded.clone()).unwrap(), stored);
        assert!(StoredRow::decode_owned(encoded[..15].to_vec()).is_err());
        assert!(matches!(
            StoredRow::decode(&encoded[..15]),
            Err(Error::Malformed {
                what: "stored row",
                ..
            })
        ));
    }

    fn tuple() -> impl Strategy<Value = (i64, String, i64)> {
        (any::<i64>(), "[\\x00-\\x02a\u{e9}]{0,6}", any::<i64>())
    }

    fn key_of(t: &(i64, String, i64)) -> Vec<u8> {
        encode_key(&[
            Value::Int(t.0),
            Value::Str(t.1.clone()),
            Value::Decimal(t.2),
        ])
    }

    proptest! {
        #[test]
        fn row_key_order_matches_value_order(a in tuple(), b in tuple()) {
            prop_assert_eq!(key_of(&a).cmp(&key_of(&b)), a.cmp(&b));
            let types = [Type::Int64, Type::VarStr(64), Type::Decimal { scale: 4 }];
            let decoded = decode_key(&types, &key_of(&a)).unwrap();
            prop_assert_eq!(decoded, vec![Value::Int(a.0), Value::Str(a.1.clone()), Value::Decimal(a.2)]);
        }

        #[test]
        fn row_round_trips_any_valid_row(
            w in any::<i32>(), first in "[a-zA-Z\u{e9}]{0,5}", last in "[ -~\u{e9}]{0,8}", data in ".{0,100}"
        ) {
            let schema = customer();
            let mut row = customer_row(i64::from(w), 0, 0, &first, &last);
            row[8] = Value::Str(data);
            prop_assert_eq!(schema.decode_row(&schema.encode_row(&row).unwrap()).unwrap(), row);
        }

        #[test]
        fn row_decoders_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
            let schema = customer();
            let _ = schema.decode_row(&bytes);
            let _ = schema.decode_index_key(&BY_NAME, &bytes);
            let _ = decode_key(&[Type::FixedStr(3), Type::Int32], &bytes);
            let borrowed = StoredRow::decode(&bytes);
            let owned = StoredRow::decode_owned(bytes.clone());
            prop_assert_eq!(borrowed.ok(), owned.ok());
        }
    }
}
