//! Block-trace formats: reading other people's traces, writing our own.
//!
//! `flashlab replay` drives a device model with a trace recorded elsewhere,
//! and the lab writes the traces it records so that other simulators (or a
//! later replay) can use them. Five formats are understood:
//!
//! | name       | layout                                                        | units                                   |
//! |------------|---------------------------------------------------------------|-----------------------------------------|
//! | `flashlab` | CSV `submit_ns,complete_ns,device,space,op,offset_bytes,len_bytes,latency_ns` | nanoseconds, bytes          |
//! | `msr`      | CSV `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime` (MSR Cambridge) | Windows filetime (100 ns), bytes |
//! | `spc`      | CSV `ASU,LBA,Size,Opcode,Timestamp` (SPC / UMass)             | 512-byte sectors, bytes, seconds        |
//! | `mqsim`    | `arrival_ns device lba size type`, type 0 = write, 1 = read   | nanoseconds, 512-byte sectors           |
//! | `blkparse` | blkparse's default text output                                | seconds, 512-byte sectors               |
//!
//! Every reader produces the same open-loop request list, [`TraceRequest`]:
//! when the request arrives, what it does, where, how much, and the line of
//! the file it came from (so that replay can name the line of a request the
//! device refuses). Arrival times are rebased so that the earliest request
//! arrives at 0. Device and host columns (MSR's disk number, SPC's ASU,
//! blkparse's major/minor) are checked for form but otherwise ignored: all
//! requests of a file go to the one device being replayed.
//!
//! Traces run to gigabytes, so readers stream: a line at a time through a
//! `BufRead`, never the whole file in memory, and no line longer than
//! [`LINE_BYTES_MAX`]. A malformed line is an error, never a panic and never
//! silently skipped: [`TraceError`] names the file, the line and the problem
//! in one line (`trace.csv:17: length 'abc' is not a number`). The exceptions
//! are the lines that are not requests by the format's own definition: blank
//! lines, `#` comments, header lines, and in blkparse output everything that
//! is not a queue (Q) or issue (D) event, such as the per-CPU summary footer.
//!
//! blkparse prints each request several times as it moves through the block
//! layer. The queue event (Q) is when the file system asked, which is what an
//! open-loop replay wants; traces captured with a filter that keeps only the
//! issue event (D) are read from their D events instead.

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::num::IntErrorKind;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use serde::Serialize;
use thiserror::Error;

use crate::model::IoKind;
use crate::trace::{Space, TraceRecord};

/// The sector unit of SPC, MQSim and blkparse addresses.
pub const SECTOR_BYTES: u64 = 512;
/// The longest line a reader accepts; longer lines are an error, so that a
/// file without line breaks cannot make a reader swallow gigabytes.
pub const LINE_BYTES_MAX: u64 = 64 * 1024;
/// The unit of an MSR Cambridge timestamp (a Windows filetime).
pub const FILETIME_UNIT_NS: u64 = 100;
/// Most requests a trace file may hold: readers keep a file's requests in
/// memory (replay sorts and checks them all first), about 80 bytes each.
/// Generated traces (`replay --synthetic`) stream and have no such limit.
pub const TRACE_FILE_REQUESTS_MAX: usize = 100_000_000;

/// Refuse a request past [`TRACE_FILE_REQUESTS_MAX`].
fn room(held: usize, file: &str, line: u64) -> Result<(), TraceError> {
    if held < TRACE_FILE_REQUESTS_MAX {
        return Ok(());
    }
    Err(TraceError::parse(
        file,
        line,
        format!("more than {TRACE_FILE_REQUESTS_MAX} requests; split the trace"),
    ))
}

/// Most characters of a trace's own text an error echoes (a field, a
/// header); longer text is cut, so a malformed gigabyte-long line cannot
/// make a gigabyte-long "one-line" error.
pub const ECHO_CHARS_MAX: usize = 80;
/// The header line of a flashlab CSV trace, column by column.
pub const FLASHLAB_HEADER: [&str; 8] = [
    "submit_ns",
    "complete_ns",
    "device",
    "space",
    "op",
    "offset_bytes",
    "len_bytes",
    "latency_ns",
];

const NS_PER_S: u64 = 1_000_000_000;
const NS_FRACTION_DIGITS: usize = 9;

/// A block-trace format, by its command-line name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    /// flashlab's own CSV, as [`write_flashlab_csv`] writes it.
    Flashlab,
    /// MSR Cambridge block traces.
    Msr,
    /// SPC / UMass trace repository (Financial, WebSearch).
    Spc,
    /// MQSim / SSDsim ASCII traces.
    Mqsim,
    /// blkparse's default text output.
    Blkparse,
}

impl TraceFormat {
    /// Every format, in the order the CLI lists them.
    pub const ALL: [TraceFormat; 5] = [
        TraceFormat::Flashlab,
        TraceFormat::Msr,
        TraceFormat::Spc,
        TraceFormat::Mqsim,
        TraceFormat::Blkparse,
    ];

    /// The command-line name.
    pub fn as_str(self) -> &'static str {
        match self {
            TraceFormat::Flashlab => "flashlab",
            TraceFormat::Msr => "msr",
            TraceFormat::Spc => "spc",
            TraceFormat::Mqsim => "mqsim",
            TraceFormat::Blkparse => "blkparse",
        }
    }
}

impl fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TraceFormat {
    type Err = TraceError;

    fn from_str(s: &str) -> Result<TraceFormat, TraceError> {
        let name = s.trim().to_ascii_lowercase();
        TraceFormat::ALL
            .into_iter()
            .find(|format| format.as_str() == name)
            .ok_or_else(|| TraceError::UnknownFormat {
                name: s.to_string(),
            })
    }
}

/// One request of an open-loop trace: it arrives at `arrival_ns` whatever
/// the device did with the requests before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TraceRequest {
    /// Arrival time, rebased so that the trace's first request arrives at 0.
    pub arrival_ns: u64,
    /// What the request does.
    pub kind: IoKind,
    /// Where it starts on the device (0 for a flush).
    pub offset_bytes: u64,
    /// How many bytes it covers (0 for a flush).
    pub len_bytes: u64,
    /// The 1-based line of the trace file this request was read from.
    pub line: u64,
}

/// A request of a test trace.
#[cfg(test)]
pub(crate) fn request(
    arrival_ns: u64,
    kind: IoKind,
    offset_bytes: u64,
    len_bytes: u64,
    line: u64,
) -> TraceRequest {
    TraceRequest {
        arrival_ns,
        kind,
        offset_bytes,
        len_bytes,
        line,
    }
}

/// Why a trace could not be read or written. Each names the file (and the
/// line, where there is one) and the problem, in one line.
#[derive(Debug, Error)]
pub enum TraceError {
    /// The operating system failed to open, read or write the file.
    #[error("{file}: {source}")]
    Io {
        /// The file, as the caller named it.
        file: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A line that is not what the format says.
    #[error("{file}:{line}: {problem}")]
    Parse {
        /// The file, as the caller named it.
        file: String,
        /// The 1-based line.
        line: u64,
        /// What is wrong with it.
        problem: String,
    },
    /// A format name the CLI does not know.
    #[error("unknown trace format '{name}' (known: flashlab, msr, spc, mqsim, blkparse)")]
    UnknownFormat {
        /// The name as given.
        name: String,
    },
    /// A request the output format cannot express.
    #[error("writing a {format} trace: {problem}")]
    Unwritable {
        /// The output format's name.
        format: &'static str,
        /// Which request (by line), and why.
        problem: String,
    },
}

impl TraceError {
    /// A parse error; the problem is cut to a few echoes' worth of text.
    fn parse(file: &str, line: u64, problem: impl Into<String>) -> TraceError {
        TraceError::Parse {
            file: file.to_string(),
            line,
            problem: cut(&problem.into(), 3 * ECHO_CHARS_MAX),
        }
    }

    fn io(file: &str, source: std::io::Error) -> TraceError {
        TraceError::Io {
            file: file.to_string(),
            source,
        }
    }
}

// ---------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------

/// Read a trace file of the given format into open-loop requests.
pub fn read_trace_file(path: &Path, format: TraceFormat) -> Result<Vec<TraceRequest>, TraceError> {
    let file = path.display().to_string();
    let handle = File::open(path).map_err(|e| TraceError::io(&file, e))?;
    read_requests(BufReader::new(handle), &file, format)
}

/// What a first pass over a trace file found, for [`stream_trace_file`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceScan {
    /// Requests in the file.
    pub requests: u64,
    /// The earliest request's time as the file states it.
    pub start_ns: u64,
    /// True if every request arrives no earlier than the one before it.
    pub in_order: bool,
    /// blkparse: the file has queue (Q) events, which are the requests.
    queued: bool,
}

/// Visit every request of a trace file in file order, without holding
/// them: a first pass ([`scan_trace_file`]) says where times start; this
/// rebases them and calls `each` per request. Memory stays constant
/// whatever the file's length.
pub fn stream_trace_file(
    path: &Path,
    format: TraceFormat,
    scan: &TraceScan,
    mut each: impl FnMut(TraceRequest) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    for_each_raw(path, format, scan.queued, |line, r| {
        each(TraceRequest {
            arrival_ns: r.time_ns - scan.start_ns,
            kind: r.kind,
            offset_bytes: r.offset_bytes,
            len_bytes: r.len_bytes,
            line,
        })
    })
}

/// The first pass over a trace file: how many requests, where times start,
/// whether they are in arrival order. `each` sees every request, with its
/// time as the file states it (not yet rebased). A file of at most
/// `hold_max` requests is also returned whole, rebased, so that its caller
/// need not read it again; a longer one is not held (`None`).
pub fn scan_trace_file(
    path: &Path,
    format: TraceFormat,
    hold_max: usize,
    mut each: impl FnMut(&TraceRequest),
) -> Result<(TraceScan, Option<Vec<TraceRequest>>), TraceError> {
    let queued = format == TraceFormat::Blkparse && {
        let mut any = false;
        for_each_raw(path, format, true, |_, _| {
            any = true;
            Ok(())
        })?;
        any
    };
    let mut scan = TraceScan {
        start_ns: u64::MAX,
        in_order: true,
        queued,
        ..TraceScan::default()
    };
    let mut held = Some(Vec::new());
    let mut previous_ns = 0;
    for_each_raw(path, format, queued, |line, r| {
        scan.requests += 1;
        scan.start_ns = scan.start_ns.min(r.time_ns);
        scan.in_order &= r.time_ns >= previous_ns;
        previous_ns = r.time_ns;
        let request = TraceRequest {
            arrival_ns: r.time_ns,
            kind: r.kind,
            offset_bytes: r.offset_bytes,
            len_bytes: r.len_bytes,
            line,
        };
        each(&request);
        match held.as_mut() {
            Some(requests) if requests.len() < hold_max => requests.push(request),
            _ => held = None,
        }
        Ok(())
    })?;
    if scan.requests == 0 {
        scan.start_ns = 0;
    }
    for request in held.iter_mut().flatten() {
        request.arrival_ns -= scan.start_ns;
    }
    Ok((scan, held))
}

/// Every raw request of a trace file, in file order (blkparse: the queue
/// events if `queued`, else the issue events).
fn for_each_raw(
    path: &Path,
    format: TraceFormat,
    queued: bool,
    mut each: impl FnMut(u64, RawRequest) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let file = path.display().to_string();
    let handle = File::open(path).map_err(|e| TraceError::io(&file, e))?;
    let reader = BufReader::new(handle);
    let parse: fn(&str) -> Result<Option<RawRequest>, String> = match format {
        TraceFormat::Flashlab => {
            return for_each_flashlab_record(reader, &file, |line, record| {
                each(line, raw_of(&record))
            });
        }
        TraceFormat::Msr => parse_msr_line,
        TraceFormat::Spc => parse_spc_line,
        TraceFormat::Mqsim => parse_mqsim_line,
        TraceFormat::Blkparse => {
            let wanted = if queued {
                BlkAction::Queue
            } else {
                BlkAction::Issue
            };
            let mut lines = Lines::new(reader, &file);
            while let Some((line, text)) = lines.next_line()? {
                match parse_blkparse_line(text) {
                    Ok(Some((action, request))) if action == wanted => each(line, request)?,
                    Ok(_) => {}
                    Err(problem) => return Err(TraceError::parse(&file, line, problem)),
                }
            }
            return Ok(());
        }
    };
    let mut lines = Lines::new(reader, &file);
    while let Some((line, text)) = lines.next_line()? {
        if is_blank_or_comment(text) {
            continue;
        }
        match parse(text) {
            Ok(Some(request)) => each(line, request)?,
            Ok(None) => {}
            Err(problem) => return Err(TraceError::parse(&file, line, problem)),
        }
    }
    Ok(())
}

/// A flashlab CSV record as a raw request (its submit time).
fn raw_of(record: &TraceRecord) -> RawRequest {
    RawRequest {
        time_ns: record.submit_ns,
        kind: record.kind,
        offset_bytes: record.offset_bytes,
        len_bytes: record.len_bytes,
    }
}

/// Read a trace of the given format from `reader`; `file` names it in errors.
pub fn read_requests<R: BufRead>(
    reader: R,
    file: &str,
    format: TraceFormat,
) -> Result<Vec<TraceRequest>, TraceError> {
    match format {
        TraceFormat::Flashlab => read_flashlab_requests(reader, file),
        TraceFormat::Msr => read_simple(reader, file, parse_msr_line),
        TraceFormat::Spc => read_simple(reader, file, parse_spc_line),
        TraceFormat::Mqsim => read_simple(reader, file, parse_mqsim_line),
        TraceFormat::Blkparse => read_blkparse(reader, file),
    }
}

/// Read a flashlab CSV file back into trace records.
pub fn read_flashlab_file(path: &Path) -> Result<Vec<TraceRecord>, TraceError> {
    let file = path.display().to_string();
    let handle = File::open(path).map_err(|e| TraceError::io(&file, e))?;
    read_flashlab_csv(BufReader::new(handle), &file)
}

/// Read flashlab CSV (as [`write_flashlab_csv`] writes it) from `reader`;
/// `file` names it in errors. Times are kept as recorded, not rebased.
pub fn read_flashlab_csv<R: Read>(reader: R, file: &str) -> Result<Vec<TraceRecord>, TraceError> {
    let mut records = Vec::new();
    for_each_flashlab_record(reader, file, |line, record| {
        room(records.len(), file, line)?;
        records.push(record);
        Ok(())
    })?;
    Ok(records)
}

/// Write trace records as flashlab CSV, header first.
pub fn write_flashlab_csv<W: Write>(records: &[TraceRecord], w: W) -> Result<(), TraceError> {
    write_flashlab_csv_stream(records.iter().cloned(), w)
}

/// [`write_flashlab_csv`] for a stream of records, holding one at a time.
pub fn write_flashlab_csv_stream<W: Write>(
    records: impl IntoIterator<Item = TraceRecord>,
    w: W,
) -> Result<(), TraceError> {
    let unwritable = |e: csv::Error| TraceError::Unwritable {
        format: "flashlab",
        problem: e.to_string(),
    };
    let mut writer = csv::Writer::from_writer(w);
    writer.write_record(FLASHLAB_HEADER).map_err(unwritable)?;
    for record in records {
        writer
            .write_record(flashlab_fields(&record))
            .map_err(unwritable)?;
    }
    writer.flush().map_err(|e| TraceError::Unwritable {
        format: "flashlab",
        problem: e.to_string(),
    })
}

/// Write requests as an MQSim ASCII trace (device 0). Offsets and lengths
/// must be whole 512-byte sectors, and only reads and writes exist in the
/// format: anything else is an error naming the request's line.
pub fn write_mqsim<W: Write>(requests: &[TraceRequest], w: W) -> Result<(), TraceError> {
    write_mqsim_stream(requests.iter().cloned(), w)
}

/// [`write_mqsim`] for a stream of requests, holding one at a time.
pub fn write_mqsim_stream<W: Write>(
    requests: impl IntoIterator<Item = TraceRequest>,
    mut w: W,
) -> Result<(), TraceError> {
    for request in requests {
        let line = mqsim_line(&request)?;
        writeln!(w, "{line}").map_err(|e| mqsim_unwritable(e.to_string()))?;
    }
    w.flush().map_err(|e| mqsim_unwritable(e.to_string()))
}

// ---------------------------------------------------------------------------
// Streaming lines
// ---------------------------------------------------------------------------

/// A line-at-a-time reader that counts lines, bounds their length and
/// checks they are text.
struct Lines<'f, R> {
    reader: R,
    file: &'f str,
    buf: Vec<u8>,
    line: u64,
}

impl<'f, R: BufRead> Lines<'f, R> {
    fn new(reader: R, file: &'f str) -> Self {
        Lines {
            reader,
            file,
            buf: Vec::new(),
            line: 0,
        }
    }

    /// The next line without its line ending, or `None` at the end.
    fn next_line(&mut self) -> Result<Option<(u64, &str)>, TraceError> {
        self.buf.clear();
        let read = (&mut self.reader)
            .take(LINE_BYTES_MAX + 1)
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| TraceError::io(self.file, e))?;
        if read == 0 {
            return Ok(None);
        }
        self.line += 1;
        let ended = self.buf.last() == Some(&b'\n');
        if !ended && read as u64 > LINE_BYTES_MAX {
            let problem = format!("line is longer than {LINE_BYTES_MAX} bytes");
            return Err(TraceError::parse(self.file, self.line, problem));
        }
        let text = std::str::from_utf8(&self.buf)
            .map_err(|_| TraceError::parse(self.file, self.line, "line is not UTF-8 text"))?;
        Ok(Some((self.line, text.trim_end_matches(['\n', '\r']))))
    }
}

/// A request as the file states it, before its time is rebased.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RawRequest {
    time_ns: u64,
    kind: IoKind,
    offset_bytes: u64,
    len_bytes: u64,
}

/// Read a format whose lines are independent: each is a request, or (for
/// `Ok(None)`) a header, comment or blank line.
fn read_simple<R: BufRead>(
    reader: R,
    file: &str,
    parse: fn(&str) -> Result<Option<RawRequest>, String>,
) -> Result<Vec<TraceRequest>, TraceError> {
    let mut lines = Lines::new(reader, file);
    let mut raw = Vec::new();
    while let Some((line, text)) = lines.next_line()? {
        if is_blank_or_comment(text) {
            continue;
        }
        match parse(text) {
            Ok(Some(request)) => {
                room(raw.len(), file, line)?;
                raw.push((line, request));
            }
            Ok(None) => {}
            Err(problem) => return Err(TraceError::parse(file, line, problem)),
        }
    }
    Ok(rebase(raw))
}

fn is_blank_or_comment(text: &str) -> bool {
    let text = text.trim();
    text.is_empty() || text.starts_with('#')
}

/// Shift times so that the earliest request arrives at 0.
fn rebase(raw: Vec<(u64, RawRequest)>) -> Vec<TraceRequest> {
    let start = raw.iter().map(|(_, r)| r.time_ns).min().unwrap_or(0);
    raw.into_iter()
        .map(|(line, r)| TraceRequest {
            arrival_ns: r.time_ns - start,
            kind: r.kind,
            offset_bytes: r.offset_bytes,
            len_bytes: r.len_bytes,
            line,
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Field helpers
// ---------------------------------------------------------------------------

/// Split into exactly `N` fields, or at least `N` when `extra_ok`.
fn split_fields<'a, const N: usize>(
    mut fields: impl Iterator<Item = &'a str>,
    extra_ok: bool,
) -> Result<[&'a str; N], usize> {
    let mut out = [""; N];
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = fields.next().ok_or(i)?.trim();
    }
    let extra = fields.count();
    if extra > 0 && !extra_ok {
        return Err(N + extra);
    }
    Ok(out)
}

fn field_count_problem(found: usize, expected: usize, columns: &str) -> String {
    format!("expected {expected} fields ({columns}), found {found}")
}

/// An unsigned decimal number; `what` names it in the error.
fn number(field: &str, what: &str) -> Result<u64, String> {
    field.parse::<u64>().map_err(|e| match e.kind() {
        _ if field.len() > ECHO_CHARS_MAX => {
            format!("{what} '{}' is not a number", cut(field, ECHO_CHARS_MAX))
        }
        IntErrorKind::PosOverflow => format!("{what} '{field}' is too large"),
        IntErrorKind::Empty => format!("{what} is missing"),
        _ => format!("{what} '{field}' is not a number"),
    })
}

/// `text`, cut to at most `chars_max` characters (marked with "...").
pub fn cut(text: &str, chars_max: usize) -> String {
    match text.char_indices().nth(chars_max) {
        None => text.to_string(),
        Some((end, _)) => format!("{}...", &text[..end]),
    }
}

/// A reader that refuses a line longer than [`LINE_BYTES_MAX`] with an
/// `InvalidData` error naming the line, for readers (the csv crate) that
/// would otherwise buffer a line of any length.
struct BoundedLines<R> {
    inner: R,
    line: u64,
    line_bytes: u64,
}

/// The message of a [`BoundedLines`] refusal.
const LINE_TOO_LONG: &str = "line is longer than the limit";

impl<R: Read> Read for BoundedLines<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        for &b in &buf[..n] {
            if b == b'\n' {
                self.line += 1;
                self.line_bytes = 0;
            } else {
                self.line_bytes += 1;
                if self.line_bytes > LINE_BYTES_MAX {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{LINE_TOO_LONG}:{}", self.line + 1),
                    ));
                }
            }
        }
        Ok(n)
    }
}

/// A product that must not overflow, such as sectors times sector size.
fn scaled(value: u64, unit: u64, field: &str, what: &str) -> Result<u64, String> {
    value
        .checked_mul(unit)
        .ok_or_else(|| format!("{what} '{field}' is too large"))
}

/// Sectors to bytes.
fn sectors(field: &str, what: &str) -> Result<u64, String> {
    scaled(number(field, what)?, SECTOR_BYTES, field, what)
}

/// Decimal seconds (`12`, `0.551706`, `3.000000001`) to nanoseconds,
/// exactly: digits beyond the ninth decimal are dropped.
fn seconds_ns(field: &str, what: &str) -> Result<u64, String> {
    let bad = || format!("{what} '{field}' is not a number of seconds");
    let (int, frac) = field.split_once('.').unwrap_or((field, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) {
        return Err(bad());
    }
    let whole = if int.is_empty() {
        0
    } else {
        number(int, what)?
    };
    let frac = &frac[..frac.len().min(NS_FRACTION_DIGITS)];
    let frac_value = if frac.is_empty() {
        0
    } else {
        number(frac, what)?
    };
    let frac_ns = frac_value * 10u64.pow((NS_FRACTION_DIGITS - frac.len()) as u32);
    whole
        .checked_mul(NS_PER_S)
        .and_then(|ns| ns.checked_add(frac_ns))
        .ok_or_else(|| format!("{what} '{field}' is too large"))
}

// ---------------------------------------------------------------------------
// MSR Cambridge
// ---------------------------------------------------------------------------

const MSR_COLUMNS: &str = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime";

fn parse_msr_line(text: &str) -> Result<Option<RawRequest>, String> {
    let [stamp, _host, disk, kind, offset, size, _response] =
        split_fields::<7>(text.split(','), false)
            .map_err(|found| field_count_problem(found, 7, MSR_COLUMNS))?;
    if stamp.eq_ignore_ascii_case("timestamp") {
        return Ok(None);
    }
    let filetime = number(stamp, "timestamp")?;
    number(disk, "disk number")?;
    let kind = match kind.to_ascii_lowercase().as_str() {
        "read" => IoKind::Read,
        "write" => IoKind::Write,
        _ => return Err(format!("type '{kind}' is neither Read nor Write")),
    };
    Ok(Some(RawRequest {
        time_ns: scaled(filetime, FILETIME_UNIT_NS, stamp, "timestamp")?,
        kind,
        offset_bytes: number(offset, "offset")?,
        len_bytes: number(size, "size")?,
    }))
}

// ---------------------------------------------------------------------------
// SPC / UMass
// ---------------------------------------------------------------------------

const SPC_COLUMNS: &str = "ASU,LBA,Size,Opcode,Timestamp";

fn parse_spc_line(text: &str) -> Result<Option<RawRequest>, String> {
    let [asu, lba, size, opcode, stamp] = split_fields::<5>(text.split(','), true)
        .map_err(|found| field_count_problem(found, 5, SPC_COLUMNS))?;
    if asu.eq_ignore_ascii_case("asu") {
        return Ok(None);
    }
    number(asu, "ASU")?;
    let kind = match opcode {
        "r" | "R" => IoKind::Read,
        "w" | "W" => IoKind::Write,
        _ => return Err(format!("opcode '{opcode}' is neither r nor w")),
    };
    Ok(Some(RawRequest {
        time_ns: seconds_ns(stamp, "timestamp")?,
        kind,
        offset_bytes: sectors(lba, "LBA")?,
        len_bytes: number(size, "size")?,
    }))
}

// ---------------------------------------------------------------------------
// MQSim / SSDsim
// ---------------------------------------------------------------------------

const MQSIM_COLUMNS: &str = "arrival_ns device lba size type";
const MQSIM_WRITE: &str = "0";
const MQSIM_READ: &str = "1";

fn parse_mqsim_line(text: &str) -> Result<Option<RawRequest>, String> {
    let [arrival, device, lba, size, kind] = split_fields::<5>(text.split_whitespace(), false)
        .map_err(|found| field_count_problem(found, 5, MQSIM_COLUMNS))?;
    number(device, "device")?;
    let kind = match kind {
        MQSIM_WRITE => IoKind::Write,
        MQSIM_READ => IoKind::Read,
        _ => return Err(format!("type '{kind}' is neither 0 (write) nor 1 (read)")),
    };
    Ok(Some(RawRequest {
        time_ns: number(arrival, "arrival time")?,
        kind,
        offset_bytes: sectors(lba, "LBA")?,
        len_bytes: sectors(size, "size")?,
    }))
}

fn mqsim_unwritable(problem: String) -> TraceError {
    TraceError::Unwritable {
        format: "mqsim",
        problem,
    }
}

fn mqsim_line(request: &TraceRequest) -> Result<String, TraceError> {
    let kind = match request.kind {
        IoKind::Write => MQSIM_WRITE,
        IoKind::Read => MQSIM_READ,
        other => {
            return Err(mqsim_unwritable(format!(
                "line {}: the format has no {} requests",
                request.line,
                other.as_str()
            )));
        }
    };
    if !request.offset_bytes.is_multiple_of(SECTOR_BYTES)
        || !request.len_bytes.is_multiple_of(SECTOR_BYTES)
    {
        return Err(mqsim_unwritable(format!(
            "line {}: offset {} or length {} is not a whole number of {SECTOR_BYTES}-byte sectors",
            request.line, request.offset_bytes, request.len_bytes
        )));
    }
    Ok(format!(
        "{} 0 {} {} {kind}",
        request.arrival_ns,
        request.offset_bytes / SECTOR_BYTES,
        request.len_bytes / SECTOR_BYTES
    ))
}

// ---------------------------------------------------------------------------
// blkparse
// ---------------------------------------------------------------------------

/// The blkparse events a replay can be built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BlkAction {
    Queue,
    Issue,
}

fn read_blkparse<R: BufRead>(reader: R, file: &str) -> Result<Vec<TraceRequest>, TraceError> {
    let mut lines = Lines::new(reader, file);
    let mut queued = Vec::new();
    let mut issued = Vec::new();
    while let Some((line, text)) = lines.next_line()? {
        match parse_blkparse_line(text) {
            Ok(Some((BlkAction::Queue, request))) => {
                if queued.is_empty() {
                    issued = Vec::new();
                }
                room(queued.len(), file, line)?;
                queued.push((line, request));
            }
            Ok(Some((BlkAction::Issue, request))) if queued.is_empty() => {
                room(issued.len(), file, line)?;
                issued.push((line, request));
            }
            Ok(_) => {}
            Err(problem) => return Err(TraceError::parse(file, line, problem)),
        }
    }
    Ok(rebase(if queued.is_empty() { issued } else { queued }))
}

/// `8,0    3        1     0.000000000   697  Q   W 223490 + 8 [kjournald]`:
/// device, CPU, sequence, time, pid, action, RWBS, then the payload.
/// Lines that are not Q or D events are `Ok(None)`.
fn parse_blkparse_line(text: &str) -> Result<Option<(BlkAction, RawRequest)>, String> {
    let tokens: Vec<&str> = text.split_whitespace().take(12).collect();
    let is_event = tokens.len() >= 7
        && is_device_number(tokens[0])
        && tokens[1..3].iter().all(|t| is_decimal(t));
    if !is_event {
        return Ok(None);
    }
    let action = match tokens[5] {
        "Q" => BlkAction::Queue,
        "D" => BlkAction::Issue,
        _ => return Ok(None),
    };
    if tokens[6].contains('N') {
        return Ok(None);
    }
    let time_ns = seconds_ns(tokens[3], "timestamp")?;
    let payload = blkparse_payload(&tokens[7..])?;
    Ok(
        blkparse_request(tokens[6], payload).map(|(kind, offset_bytes, len_bytes)| {
            let request = RawRequest {
                time_ns,
                kind,
                offset_bytes,
                len_bytes,
            };
            (action, request)
        }),
    )
}

fn is_decimal(token: &str) -> bool {
    !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit())
}

/// `major,minor`, as blkparse prints a device.
fn is_device_number(token: &str) -> bool {
    token
        .split_once(',')
        .is_some_and(|(major, minor)| is_decimal(major) && is_decimal(minor))
}

/// `sector + count` in bytes, or `None` for an event without data (a
/// flush: nothing, or just the `[process]`).
fn blkparse_payload(rest: &[&str]) -> Result<Option<(u64, u64)>, String> {
    match rest {
        [] => Ok(None),
        [first, ..] if first.starts_with('[') => Ok(None),
        [sector, "+", count, ..] => Ok(Some((
            sectors(sector, "sector")?,
            sectors(count, "sector count")?,
        ))),
        [first, ..] => Err(format!(
            "expected 'sector + count' after the RWBS field, found '{first}'"
        )),
    }
}

/// The request an RWBS field and payload describe, if any: discards are
/// trims, reads and writes need data, a flush has none; empty reads or
/// writes are not requests.
fn blkparse_request(rwbs: &str, payload: Option<(u64, u64)>) -> Option<(IoKind, u64, u64)> {
    match payload {
        Some((offset, len)) if len > 0 => {
            let kind = if rwbs.contains('D') {
                IoKind::Trim
            } else if rwbs.contains('W') {
                IoKind::Write
            } else if rwbs.contains('R') {
                IoKind::Read
            } else {
                return None;
            };
            Some((kind, offset, len))
        }
        _ if rwbs.contains('F') => Some((IoKind::Flush, 0, 0)),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// flashlab CSV
// ---------------------------------------------------------------------------

fn flashlab_fields(record: &TraceRecord) -> [String; 8] {
    [
        record.submit_ns.to_string(),
        record.complete_ns.to_string(),
        record.device.to_string(),
        record.space.as_str().to_string(),
        record.kind.as_str().to_string(),
        record.offset_bytes.to_string(),
        record.len_bytes.to_string(),
        record.latency_ns().to_string(),
    ]
}

fn read_flashlab_requests<R: Read>(reader: R, file: &str) -> Result<Vec<TraceRequest>, TraceError> {
    let mut raw = Vec::new();
    for_each_flashlab_record(reader, file, |line, record| {
        let request = raw_of(&record);
        room(raw.len(), file, line)?;
        raw.push((line, request));
        Ok(())
    })?;
    Ok(rebase(raw))
}

/// Stream the records of a flashlab CSV, with their line numbers.
fn for_each_flashlab_record<R: Read>(
    reader: R,
    file: &str,
    mut each: impl FnMut(u64, TraceRecord) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let bounded = BoundedLines {
        inner: reader,
        line: 0,
        line_bytes: 0,
    };
    let mut csv = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(bounded);
    check_flashlab_header(&mut csv, file)?;
    let mut devices: HashMap<String, Arc<str>> = HashMap::new();
    let mut row = csv::StringRecord::new();
    loop {
        match csv.read_record(&mut row) {
            Ok(false) => return Ok(()),
            Ok(true) => {
                let line = row.position().map_or(0, |p| p.line());
                let record = flashlab_record(&row, &mut devices)
                    .map_err(|problem| TraceError::parse(file, line, problem))?;
                each(line, record)?;
            }
            Err(e) => return Err(csv_error(file, e)),
        }
    }
}

fn check_flashlab_header<R: Read>(csv: &mut csv::Reader<R>, file: &str) -> Result<(), TraceError> {
    let header = csv.headers().map_err(|e| csv_error(file, e))?;
    if header.iter().map(str::trim).eq(FLASHLAB_HEADER) {
        return Ok(());
    }
    let found = cut(&header.iter().collect::<Vec<_>>().join(","), ECHO_CHARS_MAX);
    let problem = format!(
        "header is '{found}', expected '{}'",
        FLASHLAB_HEADER.join(",")
    );
    Err(TraceError::parse(file, 1, problem))
}

fn csv_error(file: &str, error: csv::Error) -> TraceError {
    let line = error.position().map_or(0, |p| p.line());
    match error.into_kind() {
        csv::ErrorKind::Io(source) => match source.to_string().strip_prefix(LINE_TOO_LONG) {
            Some(long) => TraceError::parse(
                file,
                long.trim_start_matches(':').parse().unwrap_or(line),
                format!("line is longer than {LINE_BYTES_MAX} bytes"),
            ),
            None => TraceError::io(file, source),
        },
        csv::ErrorKind::Utf8 { .. } => TraceError::parse(file, line, "line is not UTF-8 text"),
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => TraceError::parse(
            file,
            line,
            format!("expected {expected_len} fields, found {len}"),
        ),
        other => TraceError::parse(file, line, format!("{other:?}")),
    }
}

fn flashlab_record(
    row: &csv::StringRecord,
    devices: &mut HashMap<String, Arc<str>>,
) -> Result<TraceRecord, String> {
    let field = |i: usize| row.get(i).map_or("", str::trim);
    let submit_ns = number(field(0), "submit_ns")?;
    let complete_ns = number(field(1), "complete_ns")?;
    if complete_ns < submit_ns {
        return Err(format!(
            "complete_ns {complete_ns} is before submit_ns {submit_ns}"
        ));
    }
    let space = Space::parse(field(3)).ok_or_else(|| format!("space '{}' is unknown", field(3)))?;
    let kind = IoKind::parse(field(4)).ok_or_else(|| format!("op '{}' is unknown", field(4)))?;
    let latency_ns = number(field(7), "latency_ns")?;
    if latency_ns != complete_ns - submit_ns {
        return Err(format!(
            "latency_ns {latency_ns} is not complete_ns - submit_ns ({})",
            complete_ns - submit_ns
        ));
    }
    Ok(TraceRecord {
        submit_ns,
        complete_ns,
        device: intern(devices, field(2)),
        space,
        kind,
        offset_bytes: number(field(5), "offset_bytes")?,
        len_bytes: number(field(6), "len_bytes")?,
    })
}

/// One shared name per device, rather than one allocation per record.
fn intern(devices: &mut HashMap<String, Arc<str>>, name: &str) -> Arc<str> {
    if let Some(shared) = devices.get(name) {
        return shared.clone();
    }
    let shared: Arc<str> = Arc::from(name);
    devices.insert(name.to_string(), shared.clone());
    shared
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_file_past_the_request_limit_and_long_echoes_are_refused_in_one_short_line() {
        assert!(room(TRACE_FILE_REQUESTS_MAX - 1, "t.csv", 9).is_ok());
        let err = room(TRACE_FILE_REQUESTS_MAX, "t.csv", 9)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("t.csv:9: more than"), "{err}");
        let err = TraceError::parse("t.csv", 1, "x".repeat(100_000)).to_string();
        assert!(err.len() < 300, "{} bytes", err.len());
        assert_eq!(cut("abcdef", 3), "abc...");
        assert_eq!(cut("ab", 3), "ab");
    }

    fn read(format: TraceFormat, text: &str) -> Result<Vec<TraceRequest>, TraceError> {
        read_requests(text.as_bytes(), "trace.txt", format)
    }

    fn parse_error_line(result: Result<Vec<TraceRequest>, TraceError>) -> (u64, String) {
        match result {
            Err(TraceError::Parse { line, problem, .. }) => (line, problem),
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn format_names_round_trip() {
        for format in TraceFormat::ALL {
            assert_eq!(format.as_str().parse::<TraceFormat>().unwrap(), format);
        }
        let err = "ascii".parse::<TraceFormat>().unwrap_err();
        assert!(err.to_string().contains("unknown trace format 'ascii'"));
    }

    #[test]
    fn msr_reads_and_rebases() {
        let text = "128166372003061629,hm,1,Read,3154152960,32768,1061\n\
                    128166372003061729,hm,1,Write,4096,512,80\n";
        let requests = read(TraceFormat::Msr, text).unwrap();
        assert_eq!(
            requests,
            vec![
                request(0, IoKind::Read, 3_154_152_960, 32_768, 1),
                request(10_000, IoKind::Write, 4096, 512, 2),
            ]
        );
    }

    #[test]
    fn msr_header_skipped_and_bad_type_named() {
        let text = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n\
                    10,hm,0,Read,0,512,1\n\
                    20,hm,0,Erase,0,512,1\n";
        let (line, problem) = parse_error_line(read(TraceFormat::Msr, text));
        assert_eq!(line, 3);
        assert!(problem.contains("type 'Erase'"), "{problem}");
    }

    #[test]
    fn msr_wrong_field_count() {
        let (line, problem) = parse_error_line(read(TraceFormat::Msr, "1,hm,0,Read\n"));
        assert_eq!(line, 1);
        assert!(problem.contains("expected 7 fields"), "{problem}");
    }

    #[test]
    fn spc_reads_sectors_and_seconds() {
        let text = "0,20941264,8192,W,0.551706\n1,100,512,r,1.5\n";
        let requests = read(TraceFormat::Spc, text).unwrap();
        assert_eq!(
            requests,
            vec![
                request(0, IoKind::Write, 20_941_264 * 512, 8192, 1),
                request(948_294_000, IoKind::Read, 51_200, 512, 2),
            ]
        );
    }

    #[test]
    fn spc_malformed_size_names_line() {
        let text = "0,1,512,r,0.0\n\n0,2,abc,w,0.1\n";
        let (line, problem) = parse_error_line(read(TraceFormat::Spc, text));
        assert_eq!(line, 3);
        assert_eq!(problem, "size 'abc' is not a number");
        let err = read(TraceFormat::Spc, text).unwrap_err();
        assert_eq!(err.to_string(), "trace.txt:3: size 'abc' is not a number");
    }

    #[test]
    fn spc_bad_timestamp_and_opcode() {
        let (line, problem) = parse_error_line(read(TraceFormat::Spc, "0,1,512,r,1e5\n"));
        assert_eq!(line, 1);
        assert!(problem.contains("not a number of seconds"), "{problem}");
        let (_, problem) = parse_error_line(read(TraceFormat::Spc, "0,1,512,x,1\n"));
        assert!(problem.contains("opcode 'x'"), "{problem}");
    }

    #[test]
    fn mqsim_round_trip() {
        let requests = vec![
            request(0, IoKind::Write, 4096, 8192, 1),
            request(1500, IoKind::Read, 0, 512, 2),
        ];
        let mut out = Vec::new();
        write_mqsim(&requests, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, "0 0 8 16 0\n1500 0 0 1 1\n");
        assert_eq!(read(TraceFormat::Mqsim, &text).unwrap(), requests);
    }

    #[test]
    fn mqsim_malformed_and_unwritable() {
        let (line, problem) =
            parse_error_line(read(TraceFormat::Mqsim, "0 0 8 16 0\n5 0 8 16 2\n"));
        assert_eq!(line, 2);
        assert!(problem.contains("type '2'"), "{problem}");
        let odd = [request(0, IoKind::Read, 100, 512, 7)];
        let err = write_mqsim(&odd, Vec::new()).unwrap_err().to_string();
        assert!(err.contains("line 7"), "{err}");
        let flush = [request(0, IoKind::Flush, 0, 0, 3)];
        assert!(write_mqsim(&flush, Vec::new()).is_err());
    }

    const BLKPARSE: &str = "\
  8,0    3        1     0.000000000   697  Q   W 223490 + 8 [kjournald]
  8,0    3        2     0.000001000   697  G   W 223490 + 8 [kjournald]
  8,0    3        3     0.000002000   697  D   W 223490 + 8 [kjournald]
  8,0    3        4     0.000500000   697  Q   R 1000 + 16 [cat]
  8,0    3        5     0.000600000   697  Q FWS [jbd2]
  8,0    3        6     0.000700000   697  Q   N 0 [jbd2]
  8,0    3        7     0.000800000     0  C   W 223490 + 8 [0]
CPU0 (8,0):
 Reads Queued:           1,        8KiB\t Writes Queued:           1,        4KiB
Total (8,0):
Throughput (R/W): 0KiB/s / 0KiB/s
Events (8,0): 7 entries
";

    #[test]
    fn blkparse_takes_queue_events_and_skips_footer() {
        let requests = read(TraceFormat::Blkparse, BLKPARSE).unwrap();
        assert_eq!(
            requests,
            vec![
                request(0, IoKind::Write, 223_490 * 512, 4096, 1),
                request(500_000, IoKind::Read, 512_000, 8192, 4),
                request(600_000, IoKind::Flush, 0, 0, 5),
            ]
        );
    }

    #[test]
    fn blkparse_falls_back_to_issue_events() {
        let text = "  8,0 0 1 1.5 10 D R 8 + 8 [fio]\n  8,0 0 2 1.75 10 C R 8 + 8 [0]\n\
                    CPU0 (8,0):\n";
        let requests = read(TraceFormat::Blkparse, text).unwrap();
        assert_eq!(requests, vec![request(0, IoKind::Read, 4096, 4096, 1)]);
    }

    #[test]
    fn blkparse_malformed_sector_names_line() {
        let text = "  8,0 0 1 0.1 10 Q W 8 + 8 [fio]\n  8,0 0 2 0.2 10 Q W x + 8 [fio]\n";
        let (line, problem) = parse_error_line(read(TraceFormat::Blkparse, text));
        assert_eq!(line, 2);
        assert_eq!(problem, "sector 'x' is not a number");
    }

    fn record(submit: u64, complete: u64, space: Space, kind: IoKind) -> TraceRecord {
        TraceRecord {
            submit_ns: submit,
            complete_ns: complete,
            device: Arc::from("ssd, \"x\""),
            space,
            kind,
            offset_bytes: submit * 4096,
            len_bytes: 4096,
        }
    }

    #[test]
    fn flashlab_round_trip() {
        let records = vec![
            record(10, 30, Space::Data, IoKind::Read),
            record(20, 25, Space::Log, IoKind::Write),
            record(40, 90, Space::Temp, IoKind::Flush),
        ];
        let mut out = Vec::new();
        write_flashlab_csv(&records, &mut out).unwrap();
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(text.starts_with(&FLASHLAB_HEADER.join(",")));
        assert_eq!(read_flashlab_csv(out.as_slice(), "t.csv").unwrap(), records);
        let requests = read(TraceFormat::Flashlab, &text).unwrap();
        assert_eq!(requests[0], request(0, IoKind::Read, 40_960, 4096, 2));
        assert_eq!(requests[2].arrival_ns, 30);
    }

    #[test]
    fn flashlab_malformed_lines() {
        let header = FLASHLAB_HEADER.join(",");
        let bad_len = format!("{header}\n0,5,ssd,data,read,0,4096,5\n1,9,ssd,data,read,0,abc,8\n");
        let err = read_flashlab_csv(bad_len.as_bytes(), "trace.csv").unwrap_err();
        assert_eq!(
            err.to_string(),
            "trace.csv:3: len_bytes 'abc' is not a number"
        );
        let short = format!("{header}\n0,5,ssd,data\n");
        let (line, _) = parse_error_line(read(TraceFormat::Flashlab, &short));
        assert_eq!(line, 2);
        let (line, problem) = parse_error_line(read(TraceFormat::Flashlab, "a,b\n"));
        assert_eq!(line, 1);
        assert!(problem.contains("header"), "{problem}");
        let space = format!("{header}\n0,5,ssd,swap,read,0,4096,5\n");
        let (_, problem) = parse_error_line(read(TraceFormat::Flashlab, &space));
        assert_eq!(problem, "space 'swap' is unknown");
    }

    #[test]
    fn overlong_and_binary_lines_error() {
        let long = "1".repeat(LINE_BYTES_MAX as usize + 10);
        let (line, problem) = parse_error_line(read(TraceFormat::Mqsim, &long));
        assert_eq!(line, 1);
        assert!(problem.contains("longer than"), "{problem}");
        let binary: &[u8] = b"0 0 8 16 0\n\xff\xfe\n";
        let result = read_requests(binary, "t", TraceFormat::Mqsim);
        assert_eq!(parse_error_line(result).0, 2);
    }

    #[test]
    fn fuzzish_lines_never_panic() {
        let junk = [
            "",
            ",",
            ",,,,,,",
            "1,2",
            "18446744073709551615999,a,b,Read,1,1,1",
            "0,18446744073709551615,512,r,0",
            "0,1,1,r,.",
            "0,1,1,r,99999999999999999999.1",
            "1 2 3",
            "8,0 a b c d Q W",
            "8,0 1 1 x 1 Q W 1 + 1",
            "8,0 1 1 0.1 1 Q W 1 - 1",
            "8,0 1 1 0.1 1 Q W 99999999999999999999 + 1",
            "\u{1F600},\u{1F600}",
        ];
        for text in junk {
            for format in TraceFormat::ALL {
                let _ = read(format, text);
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
            for format in TraceFormat::ALL {
                let _ = read(format, &text);
            }
        }

        #[test]
        fn field_shaped_junk_never_panics(
            fields in proptest::collection::vec("[0-9rRwWQDFN.+\\[\\]-]{0,24}", 0..12),
            sep in "[, ]",
        ) {
            let line = format!("  8,0 {}\n", fields.join(&sep));
            let plain = format!("{}\n", fields.join(&sep));
            for format in TraceFormat::ALL {
                let _ = read(format, &line);
                let _ = read(format, &plain);
            }
        }
    }
}
