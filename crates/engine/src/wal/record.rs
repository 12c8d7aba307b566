//! Log records: what the write-ahead log holds, byte by byte.
//!
//! Every record starts with a fixed header:
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0 | 4 | total length of the record in bytes, header included |
//! | 4 | 4 | crc32c of bytes 8..length |
//! | 8 | 8 | LSN: the record's own position in the log |
//! | 16 | 8 | link: LSN of the previous record in the log (0 for the first) |
//! | 24 | 1 | kind ([`Body`] variant) |
//! | 25 | 8 | transaction id (0 for records of no transaction) |
//! | 33 | 8 | LSN of the transaction's previous record (0 if none) |
//! | 41 | .. | body |
//!
//! The LSN in the header lets a reader reject a stale record found at the
//! wrong place, and the link chains every record to the one before it, so a
//! reader that knows where it came from can tell a spliced log. The limits
//! below bound what a decoder accepts; [`LogRecord::check_limits`] enforces
//! the same limits when a record is appended, so the log never holds a
//! record that recovery would refuse. The design is *logical undo, physical redo*: an update
//! carries the byte ranges it changed on each page (redo, applied only to
//! pages whose page LSN is older) and, separately, the key and before-image
//! on the B+tree it changed (undo, applied through the tree like a new
//! change, and logged as a compensation record). See docs/FORMAT.md.

use crate::error::{Error, Result};
use crate::page::{PAGE_BODY_OFFSET, PageId, PageNo, SpaceId};
use crate::wal::codec::{Reader, Writer};

/// Bytes of the fixed record header.
pub const RECORD_HEADER_BYTES: usize = 41;
/// Largest record accepted (four 64 KB page images fit with room to spare).
pub const RECORD_BYTES_MAX: usize = 8 << 20;
/// Largest key or before-image in an undo entry.
pub const UNDO_VALUE_BYTES_MAX: usize = 1 << 20;
/// Most pages one record may change.
pub const REDO_PAGES_MAX: usize = 64;
/// Most ranges per page.
pub const REDO_RANGES_MAX: usize = 4096;
/// Most transactions or dirty pages a checkpoint may list.
pub const CHECKPOINT_ENTRIES_MAX: usize = 1 << 24;

/// Logical undo of one B+tree change: put `before` back under `key`
/// (or delete `key` if it was absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Undo {
    pub space: SpaceId,
    /// The tree's root page, which never moves.
    pub root: PageNo,
    pub key: Vec<u8>,
    pub before: Option<Vec<u8>>,
}

/// Byte ranges a record writes on one page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageRedo {
    pub page: PageId,
    /// A full-page image: the page's body is reset to zeros before the
    /// ranges are applied, so the ranges alone rebuild the page whatever
    /// its previous state (a torn page included).
    pub image: bool,
    /// (offset within the page, bytes to write there).
    pub ranges: Vec<(u32, Vec<u8>)>,
}

/// A transaction active at a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActiveTxn {
    pub txn: u64,
    pub last_lsn: u64,
    /// Next record to undo if the transaction must be rolled back.
    pub undo_next: u64,
}

/// What a record says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// A change: physical redo of pages, and logical undo if it belongs to
    /// a transaction that may roll back.
    Update {
        undo: Option<Undo>,
        redo: Vec<PageRedo>,
    },
    /// The redo of one undo step; `undo_next` is the record to undo next.
    Compensation { undo_next: u64, redo: Vec<PageRedo> },
    /// The transaction committed at this commit timestamp.
    Commit { commit_ts: u64 },
    /// The transaction is fully rolled back.
    Abort,
    /// A fuzzy checkpoint starts.
    CheckpointBegin,
    /// A fuzzy checkpoint's tables, as of its begin record.
    CheckpointEnd {
        begin_lsn: u64,
        /// The next transaction id to hand out (ids are never reused).
        next_txn: u64,
        /// The next commit timestamp to hand out.
        next_commit_ts: u64,
        /// The oldest record logged but not yet installed in the buffer
        /// pool when the checkpoint began (0: none); redo starts no later.
        pending_lsn: u64,
        active: Vec<ActiveTxn>,
        dirty: Vec<(PageId, u64)>,
    },
    /// Recovery restarted the In-Page Logging space `space` without redo
    /// at its `L*` (REC-4): the records from `from_lsn` (that `L*`) up to
    /// this one never reached its pages. A repair of such a page before
    /// the closing checkpoint skips them
    /// ([`crate::wal::Wal::rebuild_page`]).
    Restart { space: u32, from_lsn: u64 },
    /// Pages of space `space` that a bulk load wrote without logging their
    /// contents (BULK-6): their state from this record on is not in the
    /// log, so a repair of one of them from an image before it would
    /// return an older page; it needs an image after it
    /// ([`crate::wal::Wal::rebuild_page`]). Redo does nothing.
    Unlogged { space: u32, pages: Vec<PageNo> },
}

impl Body {
    fn kind(&self) -> u8 {
        match self {
            Body::Update { .. } => 1,
            Body::Compensation { .. } => 2,
            Body::Commit { .. } => 3,
            Body::Abort => 4,
            Body::CheckpointBegin => 5,
            Body::CheckpointEnd { .. } => 6,
            Body::Restart { .. } => 7,
            Body::Unlogged { .. } => 8,
        }
    }

    /// The pages this record redoes.
    pub fn redo(&self) -> &[PageRedo] {
        match self {
            Body::Update { redo, .. } | Body::Compensation { redo, .. } => redo,
            _ => &[],
        }
    }

    /// The same body with `new` as its redo (a body without redo keeps none).
    pub fn with_redo(mut self, new: Vec<PageRedo>) -> Body {
        if let Body::Update { redo, .. } | Body::Compensation { redo, .. } = &mut self {
            *redo = new;
        }
        self
    }
}

/// One log record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRecord {
    pub lsn: u64,
    pub txn: u64,
    pub prev_lsn: u64,
    pub body: Body,
}

/// What a record does to the transaction table: the one rule the log's
/// live table (`wal::track`) and recovery's analysis both follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnEffect {
    /// The record names no transaction, or does not change its entry.
    Nothing,
    /// The transaction is (still) active; undo continues at `undo_next`
    /// (an update undoes itself; a compensation says where undo resumes).
    Active { undo_next: u64 },
    /// The transaction ended (commit or abort).
    Ended,
}

impl LogRecord {
    /// This record's effect on the transaction table, were it at `lsn`.
    pub fn txn_effect(&self, lsn: u64) -> TxnEffect {
        match &self.body {
            _ if self.txn == 0 => TxnEffect::Nothing,
            Body::Update { undo: Some(_), .. } => TxnEffect::Active { undo_next: lsn },
            Body::Compensation { undo_next, .. } => TxnEffect::Active {
                undo_next: *undo_next,
            },
            Body::Commit { .. } | Body::Abort => TxnEffect::Ended,
            _ => TxnEffect::Nothing,
        }
    }

    /// Encode with the header, at log position `lsn` (the link is set by
    /// [`LogRecord::relocate`] when the record is appended).
    pub fn encode(&self, lsn: u64) -> Vec<u8> {
        let mut bytes = self.encode_unsealed(lsn);
        Self::seal(&mut bytes);
        bytes
    }

    /// [`LogRecord::encode`] without the checksum (zero): for a record that
    /// [`LogRecord::relocate`] will seal at its log position anyway.
    pub fn encode_unsealed(&self, lsn: u64) -> Vec<u8> {
        let mut w = Writer {
            bytes: Vec::with_capacity(RECORD_HEADER_BYTES + body_bytes_hint(&self.body)),
        };
        w.u32(0); // length, patched below
        w.u32(0); // crc, patched below
        w.u64(lsn);
        w.u64(0); // link, set at append
        w.u8(self.body.kind());
        w.u64(self.txn);
        w.u64(self.prev_lsn);
        encode_body(&mut w, &self.body);
        let mut bytes = w.bytes;
        debug_assert!(
            bytes.len() <= RECORD_HEADER_BYTES + body_bytes_hint(&self.body),
            "the size hint bounds every encoding"
        );
        let len = bytes.len() as u32;
        bytes[0..4].copy_from_slice(&len.to_le_bytes());
        bytes
    }

    /// Store the checksum of everything after it.
    fn seal(bytes: &mut [u8]) {
        let crc = crc32c::crc32c(&bytes[8..]);
        bytes[4..8].copy_from_slice(&crc.to_le_bytes());
    }

    /// Move an encoded record, sealed or not, to log position `lsn`, after
    /// the record at `link_lsn`, and seal it (its stored LSN, link and
    /// checksum change; nothing else).
    pub fn relocate(bytes: &mut [u8], lsn: u64, link_lsn: u64) {
        bytes[8..16].copy_from_slice(&lsn.to_le_bytes());
        bytes[16..24].copy_from_slice(&link_lsn.to_le_bytes());
        Self::seal(bytes);
    }

    /// The length field of a record that starts at `bytes`, if readable.
    pub fn peek_len(bytes: &[u8]) -> Option<usize> {
        Some(u32::from_le_bytes(bytes.get(0..4)?.try_into().ok()?) as usize)
    }

    /// The link stored in an encoded record (the previous record's LSN).
    pub fn link_of(bytes: &[u8]) -> Option<u64> {
        Some(u64::from_le_bytes(bytes.get(16..24)?.try_into().ok()?))
    }

    /// Refuse a record that a decoder would refuse: every count and size
    /// within the limits above.
    pub fn check_limits(&self) -> Result<()> {
        let over = |what: &str, n: usize, max: usize| {
            Err(Error::TooLarge(format!(
                "a log record with {n} {what} exceeds the limit of {max}"
            )))
        };
        if let Body::Update { undo: Some(u), .. } = &self.body {
            let before = u.before.as_ref().map_or(0, Vec::len);
            if u.key.len().max(before) > UNDO_VALUE_BYTES_MAX {
                return over(
                    "bytes of undo key or value",
                    u.key.len().max(before),
                    UNDO_VALUE_BYTES_MAX,
                );
            }
        }
        let redo = self.body.redo();
        if redo.len() > REDO_PAGES_MAX {
            return over("pages", redo.len(), REDO_PAGES_MAX);
        }
        if let Some(p) = redo.iter().find(|p| p.ranges.len() > REDO_RANGES_MAX) {
            return over("ranges on one page", p.ranges.len(), REDO_RANGES_MAX);
        }
        if let Body::Unlogged { pages, .. } = &self.body
            && pages.len() > REDO_PAGES_MAX
        {
            return over("unlogged pages", pages.len(), REDO_PAGES_MAX);
        }
        if let Body::CheckpointEnd { active, dirty, .. } = &self.body {
            let n = active.len().max(dirty.len());
            if n > CHECKPOINT_ENTRIES_MAX {
                return over("checkpoint entries", n, CHECKPOINT_ENTRIES_MAX);
            }
        }
        Ok(())
    }

    /// Decode a whole record expected at `lsn`. Any damage (length, CRC,
    /// misplaced LSN, malformed body) is an error, never a panic.
    pub fn decode(bytes: &[u8], lsn: u64) -> Result<LogRecord> {
        let len = LogRecord::peek_len(bytes)
            .ok_or_else(|| Error::malformed("log record", "truncated header"))?;
        if !(RECORD_HEADER_BYTES..=RECORD_BYTES_MAX).contains(&len) || len > bytes.len() {
            return Err(Error::malformed(
                "log record",
                format!("bad length {len} at LSN {lsn}"),
            ));
        }
        let bytes = &bytes[..len];
        let stored_crc = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
        if crc32c::crc32c(&bytes[8..]) != stored_crc {
            return Err(Error::malformed(
                "log record",
                format!("checksum mismatch at LSN {lsn}"),
            ));
        }
        let mut r = Reader::new(&bytes[8..], "log record");
        let stored_lsn = r.u64()?;
        if stored_lsn != lsn {
            return Err(Error::malformed(
                "log record",
                format!("record for LSN {stored_lsn} found at LSN {lsn}"),
            ));
        }
        let _link = r.u64()?;
        let kind = r.u8()?;
        let txn = r.u64()?;
        let prev_lsn = r.u64()?;
        let body = decode_body(&mut r, kind)?;
        r.finish()?;
        Ok(LogRecord {
            lsn,
            txn,
            prev_lsn,
            body,
        })
    }
}

fn encode_redo(w: &mut Writer, redo: &[PageRedo]) {
    w.u32(redo.len() as u32);
    for page in redo {
        w.u32(page.page.space);
        w.u32(page.page.page_no);
        w.u8(u8::from(page.image));
        w.u32(page.ranges.len() as u32);
        for (offset, bytes) in &page.ranges {
            w.u32(*offset);
            w.blob(bytes);
        }
    }
}

fn decode_redo(r: &mut Reader) -> Result<Vec<PageRedo>> {
    let pages = bounded(r.u32()?, REDO_PAGES_MAX, "pages in a redo record")?;
    let mut redo = Vec::with_capacity(pages);
    for _ in 0..pages {
        let page = PageId::new(r.u32()?, r.u32()?);
        let image = match r.u8()? {
            0 => false,
            1 => true,
            flag => return Err(Error::malformed("log record", format!("page flag {flag}"))),
        };
        let count = bounded(r.u32()?, REDO_RANGES_MAX, "ranges of a page")?;
        let mut ranges = Vec::with_capacity(count);
        for _ in 0..count {
            let offset = r.u32()?;
            ranges.push((offset, r.blob(RECORD_BYTES_MAX)?.to_vec()));
        }
        redo.push(PageRedo {
            page,
            image,
            ranges,
        });
    }
    Ok(redo)
}

fn bounded(n: u32, max: usize, what: &str) -> Result<usize> {
    let n = n as usize;
    if n > max {
        return Err(Error::malformed(
            "log record",
            format!("{n} {what} exceeds the limit of {max}"),
        ));
    }
    Ok(n)
}

fn encode_undo(w: &mut Writer, undo: &Option<Undo>) {
    match undo {
        None => w.u8(0),
        Some(undo) => {
            w.u8(1);
            w.u32(undo.space);
            w.u32(undo.root);
            w.blob(&undo.key);
            match &undo.before {
                None => w.u8(0),
                Some(before) => {
                    w.u8(1);
                    w.blob(before);
                }
            }
        }
    }
}

fn decode_undo(r: &mut Reader) -> Result<Option<Undo>> {
    if r.u8()? == 0 {
        return Ok(None);
    }
    let space = r.u32()?;
    let root = r.u32()?;
    let key = r.blob(UNDO_VALUE_BYTES_MAX)?.to_vec();
    let before = match r.u8()? {
        0 => None,
        _ => Some(r.blob(UNDO_VALUE_BYTES_MAX)?.to_vec()),
    };
    Ok(Some(Undo {
        space,
        root,
        key,
        before,
    }))
}

/// The most bytes `encode_body` writes for `body`, to allocate an
/// encoding once.
fn body_bytes_hint(body: &Body) -> usize {
    let blob = |bytes: &[u8]| 4 + bytes.len();
    let redo = |redo: &[PageRedo]| {
        4 + redo
            .iter()
            .map(|p| 13 + p.ranges.iter().map(|(_, b)| 4 + blob(b)).sum::<usize>())
            .sum::<usize>()
    };
    match body {
        Body::Update { undo, redo: r } => {
            let undo = undo.as_ref().map_or(1, |u| {
                10 + blob(&u.key) + u.before.as_deref().map_or(0, blob)
            });
            undo + redo(r)
        }
        Body::Compensation { redo: r, .. } => 8 + redo(r),
        Body::CheckpointEnd { active, dirty, .. } => 40 + 24 * active.len() + 16 * dirty.len(),
        Body::Commit { .. } | Body::Abort | Body::CheckpointBegin => 8,
        Body::Restart { .. } => 12,
        Body::Unlogged { pages, .. } => 8 + 4 * pages.len(),
    }
}

fn encode_body(w: &mut Writer, body: &Body) {
    match body {
        Body::Update { undo, redo } => {
            encode_undo(w, undo);
            encode_redo(w, redo);
        }
        Body::Compensation { undo_next, redo } => {
            w.u64(*undo_next);
            encode_redo(w, redo);
        }
        Body::Commit { commit_ts } => w.u64(*commit_ts),
        Body::Restart { space, from_lsn } => {
            w.u32(*space);
            w.u64(*from_lsn);
        }
        Body::Unlogged { space, pages } => {
            w.u32(*space);
            w.u32(pages.len() as u32);
            for page in pages {
                w.u32(*page);
            }
        }
        Body::Abort | Body::CheckpointBegin => {}
        Body::CheckpointEnd {
            begin_lsn,
            next_txn,
            next_commit_ts,
            pending_lsn,
            active,
            dirty,
        } => {
            w.u64(*begin_lsn);
            w.u64(*next_txn);
            w.u64(*next_commit_ts);
            w.u64(*pending_lsn);
            w.u32(active.len() as u32);
            for a in active {
                w.u64(a.txn);
                w.u64(a.last_lsn);
                w.u64(a.undo_next);
            }
            w.u32(dirty.len() as u32);
            for (page, rec_lsn) in dirty {
                w.u32(page.space);
                w.u32(page.page_no);
                w.u64(*rec_lsn);
            }
        }
    }
}

fn decode_body(r: &mut Reader, kind: u8) -> Result<Body> {
    Ok(match kind {
        1 => {
            let undo = decode_undo(r)?;
            Body::Update {
                undo,
                redo: decode_redo(r)?,
            }
        }
        2 => {
            let undo_next = r.u64()?;
            Body::Compensation {
                undo_next,
                redo: decode_redo(r)?,
            }
        }
        3 => Body::Commit {
            commit_ts: r.u64()?,
        },
        4 => Body::Abort,
        5 => Body::CheckpointBegin,
        7 => Body::Restart {
            space: r.u32()?,
            from_lsn: r.u64()?,
        },
        8 => {
            let space = r.u32()?;
            let n = bounded(r.u32()?, REDO_PAGES_MAX, "unlogged pages")?;
            let pages = (0..n).map(|_| r.u32()).collect::<Result<Vec<_>>>()?;
            Body::Unlogged { space, pages }
        }
        6 => {
            let begin_lsn = r.u64()?;
            let next_txn = r.u64()?;
            let next_commit_ts = r.u64()?;
            let pending_lsn = r.u64()?;
            let n = bounded(r.u32()?, CHECKPOINT_ENTRIES_MAX, "active transactions")?;
            let mut active = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                active.push(ActiveTxn {
                    txn: r.u64()?,
                    last_lsn: r.u64()?,
                    undo_next: r.u64()?,
                });
            }
            let n = bounded(r.u32()?, CHECKPOINT_ENTRIES_MAX, "dirty pages")?;
            let mut dirty = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                dirty.push((PageId::new(r.u32()?, r.u32()?), r.u64()?));
            }
            Body::CheckpointEnd {
                begin_lsn,
                next_txn,
                next_commit_ts,
                pending_lsn,
                active,
                dirty,
            }
        }
        other => {
            return Err(Error::malformed(
                "log record",
                format!("unknown kind {other}"),
            ));
        }
    })
}

/// Apply one page's redo to its image: a full-page image first resets the
/// body to zeros.
pub fn apply_redo(image: &mut [u8], redo: &PageRedo) -> Result<()> {
    if redo.image {
        image[PAGE_BODY_OFFSET..].fill(0);
    }
    apply_ranges(image, &redo.ranges, redo.page)
}

/// Apply redo ranges to a page image; errors if a range falls outside it.
pub fn apply_ranges(image: &mut [u8], ranges: &[(u32, Vec<u8>)], page: PageId) -> Result<()> {
    for (offset, bytes) in ranges {
        let start = *offset as usize;
        let end = start
            .checked_add(bytes.len())
            .filter(|&end| end <= image.len() && start >= PAGE_BODY_OFFSET);
        match end {
            Some(end) => image[start..end].copy_from_slice(bytes),
            None => {
                return Err(Error::malformed(
                    "log record",
                    format!(
                        "redo range at offset {start} of {} bytes does not fit page {page}",
                        bytes.len()
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Vec<LogRecord> {
        let redo = vec![PageRedo {
            page: PageId::new(1, 9),
            image: true,
            ranges: vec![(24, vec![1, 2, 3]), (4000, vec![9; 17])],
        }];
        vec![
            LogRecord {
                lsn: 0,
                txn: 7,
                prev_lsn: 4096,
                body: Body::Update {
                    undo: Some(Undo {
                        space: 1,
                        root: 2,
                        key: b"k".to_vec(),
                        before: Some(b"old".to_vec()),
                    }),
                    redo: redo.clone(),
                },
            },
            LogRecord {
                lsn: 0,
                txn: 7,
                prev_lsn: 5000,
                body: Body::Compensation {
                    undo_next: 4096,
                    redo,
                },
            },
            LogRecord {
                lsn: 0,
                txn: 7,
                prev_lsn: 6000,
                body: Body::Commit { commit_ts: 3 },
            },
            LogRecord {
                lsn: 0,
                txn: 0,
                prev_lsn: 0,
                body: Body::CheckpointEnd {
                    begin_lsn: 4096,
                    next_txn: 9,
                    next_commit_ts: 4,
                    pending_lsn: 4100,
                    active: vec![ActiveTxn {
                        txn: 8,
                        last_lsn: 5000,
                        undo_next: 5000,
                    }],
                    dirty: vec![(PageId::new(1, 3), 4200)],
                },
            },
        ]
    }

    #[test]
    fn records_round_trip() {
        for mut record in sample() {
            let bytes = record.encode(8192);
            record.lsn = 8192;
            assert_eq!(LogRecord::decode(&bytes, 8192).unwrap(), record);
        }
    }

    #[test]
    fn misplaced_and_damaged_records_are_rejected() {
        let bytes = sample()[0].encode(8192);
        let err = LogRecord::decode(&bytes, 8704).unwrap_err();
        assert!(err.to_string().contains("found at LSN 8704"), "{err}");
        let mut bad = bytes.clone();
        bad[40] ^= 0x10;
        assert!(
            LogRecord::decode(&bad, 8192)
                .unwrap_err()
                .to_string()
                .contains("checksum")
        );
        assert!(LogRecord::decode(&bytes[..bytes.len() - 1], 8192).is_err());
        assert!(LogRecord::decode(&[0u8; 40], 8192).is_err());
    }

    #[test]
    fn records_over_the_decoder_limits_are_refused_when_appended() {
        let page = |n| PageRedo {
            page: PageId::new(1, n),
            image: false,
            ranges: vec![(24, vec![1])],
        };
        let mut record = LogRecord {
            lsn: 0,
            txn: 1,
            prev_lsn: 0,
            body: Body::Update {
                undo: None,
                redo: (0..REDO_PAGES_MAX as u32 + 1).map(page).collect(),
            },
        };
        assert!(
            record
                .check_limits()
                .unwrap_err()
                .to_string()
                .contains("pages")
        );
        record.body = Body::Update {
            undo: None,
            redo: (0..REDO_PAGES_MAX as u32).map(page).collect(),
        };
        record.check_limits().unwrap();
        let bytes = record.encode(1000);
        assert_eq!(LogRecord::decode(&bytes, 1000).unwrap().txn, 1);
    }

    proptest! {
        #[test]
        fn decoding_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300), lsn in any::<u64>()) {
            let _ = LogRecord::decode(&bytes, lsn);
        }

        #[test]
        fn decoding_a_record_with_a_fixed_crc_but_garbage_body_never_panics(body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut bytes = vec![0u8; 8];
            bytes.extend_from_slice(&4096u64.to_le_bytes());
            bytes.extend_from_slice(&0u64.to_le_bytes());
            bytes.extend_from_slice(&body);
            let len = bytes.len() as u32;
            bytes[0..4].copy_from_slice(&len.to_le_bytes());
            let crc = crc32c::crc32c(&bytes[8..]);
            bytes[4..8].copy_from_slice(&crc.to_le_bytes());
            let _ = LogRecord::decode(&bytes, 4096);
        }
    }
}
