//! # Tuples, keys and inputs
//!
//! A tuple is a byte string. What an operator sorts or joins on is a
//! [`SortKey`]: a list of [`KeyPart`]s, each a byte field of a flat record
//! (the sort benchmark's 10-byte key at offset 0) or a typed column of a row
//! encoded with the engine's row codec ([`crate::row::Schema`]), each
//! ascending or descending. Every key is *normalised* into one byte string
//! that compares, as plain bytes, the way the key should: byte fields as
//! they are, columns through the engine's order-preserving, prefix-free key
//! encoding ([`crate::row::encode_key_into`]), and a descending part with
//! every byte inverted (sound because each part is fixed-length or
//! prefix-free). A single ascending byte field is its own normalised key and
//! is not copied ([`SortKey::identity`]).
//!
//! Inputs implement [`TupleSource`]: [`VecSource`], [`TableSource`] (a scan
//! of an engine table through the public transaction API) and
//! [`SortRecords`], a seeded generator of the sort benchmark's 100-byte
//! records in the layout of `gensort -a` (10 printable key bytes, two
//! spaces, the row number in 32 hex digits, two spaces, 52 filler bytes,
//! CR LF), so that `LC_ALL=C sort` orders them exactly as a stable sort on
//! the key does. [`Checksum`] is what valsort reports: count, order
//! violations, duplicate keys, and the sum of the tuples' CRCs.

use std::sync::Arc;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Result, TempError};
use crate::row::{Schema, encode_key_into};

/// Bytes of bookkeeping counted against the memory budget for each tuple
/// held in memory (an index entry: key prefix, offsets and lengths).
pub const TUPLE_OVERHEAD_BYTES: usize = 24;
/// Largest tuple an operator accepts.
pub const TUPLE_BYTES_MAX: usize = 1 << 24;
/// Bytes of one sort benchmark record.
pub const RECORD_BYTES: usize = 100;
/// Bytes of its key.
pub const RECORD_KEY_BYTES: usize = 10;

/// Sort direction of a key part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    Ascending,
    Descending,
}

/// One part of a key.
#[derive(Clone, Debug, PartialEq)]
pub enum KeyPart {
    /// `len` bytes at `offset` of a flat tuple, compared as unsigned bytes.
    Bytes {
        offset: usize,
        len: usize,
        order: Order,
    },
    /// Column `index` of a row encoded with the key's schema.
    Column { index: usize, order: Order },
}

/// What an operator orders or matches tuples by.
#[derive(Clone, Debug)]
pub struct SortKey {
    parts: Vec<KeyPart>,
    schema: Option<Arc<Schema>>,
}

impl SortKey {
    /// One ascending byte field.
    pub fn bytes(offset: usize, len: usize) -> SortKey {
        SortKey {
            parts: vec![KeyPart::Bytes {
                offset,
                len,
                order: Order::Ascending,
            }],
            schema: None,
        }
    }

    /// The sort benchmark's key: the first 10 bytes, ascending.
    pub fn sort_benchmark() -> SortKey {
        SortKey::bytes(0, RECORD_KEY_BYTES)
    }

    /// Byte fields of flat tuples, in significance order.
    pub fn fields(parts: Vec<KeyPart>) -> Result<SortKey> {
        if parts.is_empty() {
            return Err(TempError::setting("key", "a key needs at least one part"));
        }
        if parts.iter().any(|p| matches!(p, KeyPart::Column { .. })) {
            return Err(TempError::setting(
                "key",
                "column parts need a schema (use SortKey::columns)",
            ));
        }
        Ok(SortKey {
            parts,
            schema: None,
        })
    }

    /// Typed columns of rows encoded with `schema`, in significance order.
    pub fn columns(schema: &Schema, columns: &[(usize, Order)]) -> Result<SortKey> {
        if columns.is_empty() {
            return Err(TempError::setting("key", "a key needs at least one column"));
        }
        for &(index, _) in columns {
            if index >= schema.columns().len() {
                return Err(TempError::setting(
                    "key",
                    format!(
                        "column {index} of a schema of {} columns",
                        schema.columns().len()
                    ),
                ));
            }
        }
        Ok(SortKey {
            parts: columns
                .iter()
                .map(|&(index, order)| KeyPart::Column { index, order })
                .collect(),
            schema: Some(Arc::new(schema.clone())),
        })
    }

    /// The same key with every part's direction reversed.
    pub fn reversed(mut self) -> SortKey {
        for part in &mut self.parts {
            let order = match part {
                KeyPart::Bytes { order, .. } | KeyPart::Column { order, .. } => order,
            };
            *order = match order {
                Order::Ascending => Order::Descending,
                Order::Descending => Order::Ascending,
            };
        }
        self
    }

    pub fn parts(&self) -> &[KeyPart] {
        &self.parts
    }

    /// When the normalised key is a plain slice of the tuple: `(offset, len)`.
    pub fn identity(&self) -> Option<(usize, usize)> {
        match self.parts.as_slice() {
            [
                KeyPart::Bytes {
                    offset,
                    len,
                    order: Order::Ascending,
                },
            ] => Some((*offset, *len)),
            _ => None,
        }
    }

    /// The normalised key of `tuple` as a slice of it, when [`Self::identity`].
    #[inline]
    pub fn slice<'t>(&self, tuple: &'t [u8]) -> Result<&'t [u8]> {
        let Some((offset, len)) = self.identity() else {
            return Err(TempError::Tuple("key is not a plain slice".into()));
        };
        tuple
            .get(offset..offset + len)
            .ok_or_else(|| short(tuple.len(), offset + len))
    }

    /// Append the normalised key of `tuple` to `out`.
    pub fn normalize_into(&self, tuple: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let mut row = None;
        for part in &self.parts {
            let start = out.len();
            let order = match part {
                KeyPart::Bytes { offset, len, order } => {
                    let field = tuple
                        .get(*offset..offset + len)
                        .ok_or_else(|| short(tuple.len(), offset + len))?;
                    out.extend_from_slice(field);
                    *order
                }
                KeyPart::Column { index, order } => {
                    if row.is_none() {
                        let schema = self.schema.as_ref().ok_or_else(|| {
                            TempError::setting("key", "column parts need a schema")
                        })?;
                        row = Some(schema.decode_row(tuple)?);
                    }
                    let value = row
                        .as_ref()
                        .and_then(|r| r.get(*index))
                        .ok_or_else(|| TempError::Tuple(format!("no column {index}")))?;
                    encode_key_into(out, value);
                    *order
                }
            };
            if order == Order::Descending {
                for b in &mut out[start..] {
                    *b = !*b;
                }
            }
        }
        Ok(())
    }

    /// The normalised key of `tuple` (a copy).
    pub fn normalize(&self, tuple: &[u8]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.normalize_into(tuple, &mut out)?;
        Ok(out)
    }
}

fn short(have: usize, need: usize) -> TempError {
    TempError::Tuple(format!(
        "a tuple of {have} bytes is shorter than its key, which needs {need}"
    ))
}

/// The first 8 bytes of a normalised key as a big-endian number (zero
/// padded): comparing prefixes first decides most comparisons in one step.
#[inline]
pub fn key_prefix(key: &[u8]) -> u64 {
    if key.len() >= 8 {
        u64::from_be_bytes(key[..8].try_into().unwrap_or([0; 8]))
    } else {
        let mut b = [0u8; 8];
        b[..key.len()].copy_from_slice(key);
        u64::from_be_bytes(b)
    }
}

/// A stream of tuples an operator consumes.
pub trait TupleSource {
    /// The next tuple, or `None` at the end. The slice lives until the next call.
    fn next_tuple(&mut self) -> Result<Option<&[u8]>>;
    /// Every tuple has this length (runs then store no lengths).
    fn fixed_len(&self) -> Option<usize> {
        None
    }
    /// Total bytes, when known in advance (sizes hash partitions).
    fn size_hint_bytes(&self) -> Option<u64> {
        None
    }
}

/// Tuples from a vector.
pub struct VecSource {
    tuples: Vec<Vec<u8>>,
    next: usize,
    fixed_len: Option<usize>,
}

impl VecSource {
    pub fn new(tuples: Vec<Vec<u8>>) -> VecSource {
        let fixed_len = tuples
            .first()
            .map(|t| t.len())
            .filter(|&len| tuples.iter().all(|t| t.len() == len) && len > 0);
        VecSource {
            tuples,
            next: 0,
            fixed_len,
        }
    }
}

impl TupleSource for VecSource {
    fn next_tuple(&mut self) -> Result<Option<&[u8]>> {
        let t = self.tuples.get(self.next);
        self.next += 1;
        Ok(t.map(|t| t.as_slice()))
    }

    fn fixed_len(&self) -> Option<usize> {
        self.fixed_len
    }

    fn size_hint_bytes(&self) -> Option<u64> {
        Some(self.tuples.iter().map(|t| t.len() as u64).sum())
    }
}

/// The rows of an engine table, read with one scan of the public
/// transaction API ([`crate::Transaction::scan`] returns them all at once, so
/// the scan's result is held by the source, outside the operator's budget).
/// A tuple is the stored row: the encoded row of a typed table, the value of
/// a byte table.
pub struct TableSource {
    rows: std::vec::IntoIter<(Vec<u8>, Vec<u8>)>,
    current: Vec<u8>,
    bytes: u64,
}

impl TableSource {
    pub fn scan(txn: &mut crate::Transaction, table: &crate::Table) -> Result<TableSource> {
        use std::ops::Bound;
        let rows = txn.scan(table, Bound::Unbounded, Bound::Unbounded)?;
        let bytes = rows.iter().map(|(_, v)| v.len() as u64).sum();
        Ok(TableSource {
            rows: rows.into_iter(),
            current: Vec::new(),
            bytes,
        })
    }
}

impl TupleSource for TableSource {
    fn next_tuple(&mut self) -> Result<Option<&[u8]>> {
        match self.rows.next() {
            Some((_, value)) => {
                self.current = value;
                Ok(Some(&self.current))
            }
            None => Ok(None),
        }
    }

    fn size_hint_bytes(&self) -> Option<u64> {
        Some(self.bytes)
    }
}

/// How [`SortRecords`] draws keys.
#[derive(Clone, Debug, PartialEq)]
pub enum KeyDist {
    /// Ten random printable characters (gensort -a).
    Uniform,
    /// One of `distinct` keys, uniformly: duplicate-heavy when small.
    Duplicates { distinct: u64 },
    /// One of `distinct` keys with Zipf exponent `s` (skew).
    Zipf { distinct: u64, s: f64 },
    /// Row `i` gets key number `perm(i)` of a bijection of `0..count`: every
    /// key once, in scrambled order. Two inputs with the same `count` and
    /// different salts join one to one.
    Permutation { salt: u64 },
}

/// A seeded generator of sort benchmark records (see the module essay).
pub struct SortRecords {
    rng: ChaCha8Rng,
    dist: KeyDist,
    zipf_cdf: Vec<f64>,
    count: u64,
    next: u64,
    first_row: u64,
    buf: [u8; RECORD_BYTES],
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

impl SortRecords {
    /// `count` records with uniform keys; rows numbered from 0.
    pub fn new(seed: u64, count: u64) -> SortRecords {
        SortRecords::with_keys(seed, count, KeyDist::Uniform)
    }

    pub fn with_keys(seed: u64, count: u64, dist: KeyDist) -> SortRecords {
        let zipf_cdf = match dist {
            KeyDist::Zipf { distinct, s } => {
                let n = distinct.clamp(1, 1 << 20);
                let mut acc = 0.0;
                let mut cdf: Vec<f64> = (1..=n)
                    .map(|k| {
                        acc += 1.0 / (k as f64).powf(s);
                        acc
                    })
                    .collect();
                for c in &mut cdf {
                    *c /= acc;
                }
                cdf
            }
            _ => Vec::new(),
        };
        SortRecords {
            rng: ChaCha8Rng::seed_from_u64(seed),
            dist,
            zipf_cdf,
            count,
            next: 0,
            first_row: 0,
            buf: [0; RECORD_BYTES],
        }
    }

    /// Number rows from `first_row` (the row number is in every record).
    pub fn starting_at(mut self, first_row: u64) -> SortRecords {
        self.first_row = first_row;
        self
    }

    /// Key number `v` as ten decimal digits (keeps numeric order).
    fn numbered_key(v: u64, key: &mut [u8]) {
        let mut x = v;
        for b in key.iter_mut().rev() {
            *b = b'0' + (x % 10) as u8;
            x /= 10;
        }
    }

    /// A bijection of `0..n` (a multiplicative permutation plus offset).
    pub fn permute(i: u64, n: u64, salt: u64) -> u64 {
        if n <= 1 {
            return 0;
        }
        // A multiplier coprime to n: odd primes, try until one is.
        let candidates = [
            2_654_435_761u64,
            40_503,
            2_246_822_519,
            3_266_489_917,
            668_265_263,
            374_761_393,
        ];
        let a = candidates
            .iter()
            .map(|&c| c % n)
            .find(|&c| c > 1 && gcd(c, n) == 1)
            .unwrap_or(1);
        let b = salt.wrapping_mul(0x9E37_79B9_7F4A_7C15) % n;
        ((u128::from(a) * u128::from(i % n) + u128::from(b)) % u128::from(n)) as u64
    }

    fn fill(&mut self, row: u64) {
        let (key, rest) = self.buf.split_at_mut(RECORD_KEY_BYTES);
        match &self.dist {
            KeyDist::Uniform => {
                let mut r = self.rng.next_u64();
                let mut r2 = self.rng.next_u64();
                for (i, b) in key.iter_mut().enumerate() {
                    let x = if i < 6 { &mut r } else { &mut r2 };
                    *b = b' ' + (*x % 95) as u8;
                    *x /= 95;
                }
            }
            KeyDist::Duplicates { distinct } => {
                let v = self.rng.next_u64() % (*distinct).max(1);
                Self::numbered_key(Self::permute(v, *distinct, 7), key);
            }
            KeyDist::Zipf { .. } => {
                let u = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                let k = self.zipf_cdf.partition_point(|&c| c < u) as u64;
                let n = self.zipf_cdf.len() as u64;
                Self::numbered_key(Self::permute(k.min(n - 1), n, 11), key);
            }
            KeyDist::Permutation { salt } => {
                Self::numbered_key(Self::permute(row - self.first_row, self.count, *salt), key);
            }
        }
        rest[0] = b' ';
        rest[1] = b' ';
        let id = u128::from(row);
        for (i, b) in rest[2..34].iter_mut().enumerate() {
            *b = HEX[((id >> (4 * (31 - i))) & 0xF) as usize];
        }
        rest[34] = b' ';
        rest[35] = b' ';
        for (i, b) in rest[36..88].iter_mut().enumerate() {
            *b = b'A' + ((row as usize / 4 + i / 4) % 26) as u8;
        }
        rest[88] = b'\r';
        rest[89] = b'\n';
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl TupleSource for SortRecords {
    fn next_tuple(&mut self) -> Result<Option<&[u8]>> {
        if self.next >= self.count {
            return Ok(None);
        }
        let row = self.first_row + self.next;
        self.next += 1;
        self.fill(row);
        Ok(Some(&self.buf))
    }

    fn fixed_len(&self) -> Option<usize> {
        Some(RECORD_BYTES)
    }

    fn size_hint_bytes(&self) -> Option<u64> {
        Some(self.count * RECORD_BYTES as u64)
    }
}

/// What valsort reports about a sorted output.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Checksum {
    pub tuples: u64,
    /// Sum of the CRC-32C of every tuple (order-independent).
    pub crc_sum: u64,
    /// Adjacent pairs out of order.
    pub unordered: u64,
    /// Adjacent pairs with equal keys.
    pub duplicate_keys: u64,
}

/// Builds a [`Checksum`] tuple by tuple.
pub struct Validator {
    key: SortKey,
    last_key: Option<Vec<u8>>,
    key_buf: Vec<u8>,
    pub sum: Checksum,
}

impl Validator {
    pub fn new(key: SortKey) -> Validator {
        Validator {
            key,
            last_key: None,
            key_buf: Vec::new(),
            sum: Checksum::default(),
        }
    }

    /// Only the order-independent part (count and CRC sum) of `tuple`.
    pub fn add_unordered(sum: &mut Checksum, tuple: &[u8]) {
        sum.tuples += 1;
        sum.crc_sum = sum.crc_sum.wrapping_add(u64::from(crc32c::crc32c(tuple)));
    }

    pub fn add(&mut self, tuple: &[u8]) -> Result<()> {
        Self::add_unordered(&mut self.sum, tuple);
        self.key_buf.clear();
        self.key.normalize_into(tuple, &mut self.key_buf)?;
        if let Some(last) = &mut self.last_key {
            match last.as_slice().cmp(self.key_buf.as_slice()) {
                std::cmp::Ordering::Greater => self.sum.unordered += 1,
                std::cmp::Ordering::Equal => self.sum.duplicate_keys += 1,
                std::cmp::Ordering::Less => {}
            }
            last.clear();
            last.extend_from_slice(&self.key_buf);
        } else {
            self.last_key = Some(self.key_buf.clone());
        }
        Ok(())
    }
}
