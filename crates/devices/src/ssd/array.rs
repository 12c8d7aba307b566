//! A RAID-0 array of SSDs behind a RAID controller.
//!
//! petrov2010 measured its OLTP runs on eight SSDs behind an enterprise
//! RAID controller (Table 3). The array's throughput is the members'
//! together only until the controller saturates: sequential reads level off
//! at about 1350 MB/s from 64 KB requests on, writes at about 890 MB/s, and
//! small random reads at about 51,000 IOPS. [`ArrayModel`] reproduces that
//! with two shared resources in front of the members:
//!
//! - the controller's command processing, one command at a time
//!   (`read_command_ns`, `write_command_ns`: the IOPS ceiling);
//! - the controller's data path, through which every byte passes
//!   (`read_bytes_per_s`, `write_bytes_per_s`: the bandwidth ceiling);
//! - optionally a write-back cache (`cache_bytes`; petrov2010's controller
//!   had 512 MB): a write completes once its data is in the cache, and its
//!   space is freed when the member has written it. When the cache is full
//!   a write waits for the oldest pieces to be released (a FIFO of release
//!   times, as in the SSD controller's write buffer).
//!
//! Writes into the cache have three more costs, all zero unless set:
//!
//! - a write that continues the previous write (its first byte follows the
//!   previous write's last) is appended to the stripe the cache has open
//!   and costs `write_append_command_ns` of command processing instead of
//!   `write_command_ns`: the controller coalesces a sequential stream into
//!   the stripe it is filling instead of looking up and allocating a cache
//!   line per command (the members still get each piece as it arrives);
//! - each write command's data is moved into the cache by its own DMA
//!   stream at `write_stream_bytes_per_s`; streams of different commands
//!   overlap, and their sum is still capped by the shared data path. A
//!   small write is latency-bound by its stream, a large one by the path;
//! - the cache acknowledges a write `write_latency_ns` after its last byte
//!   has arrived (the commit of the cache line), a latency that overlaps
//!   with other commands and does not lower the command rate.
//!
//! Reads have one more mechanism, off unless `read_ahead_bytes` is set:
//! read-ahead. A read that continues the previous read is a stream: after
//! it, the controller asks the members for every whole stripe unit up to
//! `read_ahead_bytes` past its end that it has not asked for yet, and a
//! later read of such a unit waits for that fetch instead of asking the
//! member again. Any other read ends the stream and drops what was fetched
//! (the members still did the work); a write or trim over fetched units
//! drops them too. Fetched data is not counted against `cache_bytes`.
//!
//! A request is cut into stripe units; unit `u` of the array is unit
//! `u / members` of member `u % members`. A read is sent to the members as
//! soon as the command is decoded and each piece then crosses the data path
//! once the member has it; a write first crosses the data path, then goes to
//! its member. The request completes with its last piece.
//!
//! Invariants (ARRAY-n):
//! 1. Each member sees non-decreasing submission times (MODEL-1 for it):
//!    a piece is never submitted before the member's previous one.
//! 2. Pieces cover the request exactly once.
//! 3. The cache never holds more than `cache_bytes`.
//! 4. The read-ahead holds consecutive stripe units in order, none past
//!    the array's capacity, at most one more than `read_ahead_bytes`
//!    holds.

use std::collections::VecDeque;

use super::geometry::transfer_ns;
use crate::error::DeviceError;
use crate::model::{DeviceModel, IoKind, IoRequest, ModelStats, Parameter};

/// The parameters of the RAID controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArrayConfig {
    /// Bytes per stripe unit (a multiple of the members' sector size).
    pub stripe_unit_bytes: u64,
    /// Data-path bandwidth for reads (bytes per second).
    pub read_bytes_per_s: u64,
    /// Data-path bandwidth for writes (bytes per second).
    pub write_bytes_per_s: u64,
    /// Controller occupancy of a read command.
    pub read_command_ns: u64,
    /// Controller occupancy of a write command.
    pub write_command_ns: u64,
    /// Write-back cache (0 = writes complete when the members are done).
    pub cache_bytes: u64,
    /// Controller occupancy of a write that continues the previous one
    /// (appended to the cache's open stripe); 0 = as `write_command_ns`.
    /// Only with a cache.
    pub write_append_command_ns: u64,
    /// Rate of one write command's own DMA stream into the cache (bytes per
    /// second); 0 = no per-command limit. Only with a cache.
    pub write_stream_bytes_per_s: u64,
    /// Latency from a cached write's last byte to its acknowledgement,
    /// overlapping with other commands. Only with a cache.
    pub write_latency_ns: u64,
    /// Read-ahead of a sequential read stream: how far past a read's end
    /// the controller fetches whole stripe units (0 = none).
    pub read_ahead_bytes: u64,
}

/// A RAID-0 array of device models. See the module documentation.
pub struct ArrayModel {
    name: String,
    config: ArrayConfig,
    members: Vec<Box<dyn DeviceModel>>,
    member_submit_ns: Vec<u64>,
    member_capacity_bytes: u64,
    sector_bytes: u32,
    controller_ns: u64,
    data_path_ns: u64,
    /// Where the next write must start to continue the previous one.
    next_write_offset: Option<u64>,
    /// Where the next read must start to continue the previous one.
    next_read_offset: Option<u64>,
    /// Stripe units fetched ahead of a read stream: (unit, ready time),
    /// consecutive units in order (ARRAY-4).
    ahead: VecDeque<(u64, u64)>,
    /// Cached pieces: (release time, bytes), oldest first (ARRAY-3).
    cache: VecDeque<(u64, u64)>,
    cache_used_bytes: u64,
    cache_drained_ns: u64,
    sources: Vec<(&'static str, String)>,
}

impl ArrayModel {
    /// Stripe `members` (at least one, all of one sector size) with the
    /// controller of `config`. The array's capacity is the smallest
    /// member's, cut to whole stripe units, times the number of members.
    pub fn new(
        name: &str,
        config: ArrayConfig,
        members: Vec<Box<dyn DeviceModel>>,
    ) -> Result<ArrayModel, DeviceError> {
        let bad = |problem: &str| {
            Err(DeviceError::Geometry {
                device: name.to_string(),
                problem: problem.to_string(),
            })
        };
        let Some(first) = members.first() else {
            return bad("an array needs at least one member");
        };
        let sector_bytes = first.sector_bytes();
        if members.iter().any(|m| m.sector_bytes() != sector_bytes) {
            return bad("members differ in sector size");
        }
        let unit = config.stripe_unit_bytes;
        if unit == 0 || !unit.is_multiple_of(u64::from(sector_bytes)) {
            return bad("the stripe unit must be a non-zero multiple of the sector size");
        }
        if config.cache_bytes > 0 && config.cache_bytes < unit {
            return bad("a write-back cache must hold at least one stripe unit");
        }
        if config.read_bytes_per_s == 0 || config.write_bytes_per_s == 0 {
            return bad("data-path bandwidth must be above zero");
        }
        let smallest = members
            .iter()
            .map(|m| m.capacity_bytes())
            .min()
            .unwrap_or(0);
        let member_capacity_bytes = smallest / unit * unit;
        if member_capacity_bytes == 0 {
            return bad("members smaller than one stripe unit");
        }
        Ok(ArrayModel {
            name: name.to_string(),
            member_submit_ns: vec![0; members.len()],
            config,
            members,
            member_capacity_bytes,
            sector_bytes,
            controller_ns: 0,
            data_path_ns: 0,
            next_write_offset: None,
            next_read_offset: None,
            ahead: VecDeque::new(),
            cache: VecDeque::new(),
            cache_used_bytes: 0,
            cache_drained_ns: 0,
            sources: Vec::new(),
        })
    }

    /// Attach the source of each parameter, by the names `describe` uses.
    pub fn with_sources(mut self, sources: &[(&'static str, &str)]) -> ArrayModel {
        self.sources = sources.iter().map(|&(k, v)| (k, v.to_string())).collect();
        self
    }

    /// The members.
    pub fn members(&self) -> &[Box<dyn DeviceModel>] {
        &self.members
    }

    /// The controller parameters.
    pub fn config(&self) -> &ArrayConfig {
        &self.config
    }

    /// The piece of the request starting at `offset_bytes`: member, offset
    /// in the member, length (ARRAY-2).
    fn piece(&self, offset_bytes: u64, remaining_bytes: u64) -> (usize, u64, u64) {
        let unit = self.config.stripe_unit_bytes;
        let n = self.members.len() as u64;
        let index = offset_bytes / unit;
        let within = offset_bytes % unit;
        let member = (index % n) as usize;
        let member_offset = (index / n) * unit + within;
        (member, member_offset, remaining_bytes.min(unit - within))
    }

    /// Submit a piece to a member no earlier than its last one (ARRAY-1).
    fn submit_to(&mut self, member: usize, at_ns: u64, req: &IoRequest) -> u64 {
        let at_ns = at_ns.max(self.member_submit_ns[member]);
        self.member_submit_ns[member] = at_ns;
        self.members[member].submit(at_ns, req)
    }

    fn command(&mut self, now_ns: u64, busy_ns: u64) -> u64 {
        self.controller_ns = now_ns.max(self.controller_ns) + busy_ns;
        self.controller_ns
    }

    fn data_path(&mut self, ready_ns: u64, bytes: u64, bytes_per_s: u64) -> u64 {
        self.data_path_ns = ready_ns.max(self.data_path_ns) + transfer_ns(bytes, bytes_per_s);
        self.data_path_ns
    }

    fn read(&mut self, now_ns: u64, req: &IoRequest) -> u64 {
        let start = self.command(now_ns, self.config.read_command_ns);
        let (mut offset, end) = (req.offset_bytes, req.offset_bytes + req.len_bytes);
        let streaming =
            self.config.read_ahead_bytes > 0 && self.next_read_offset == Some(req.offset_bytes);
        self.next_read_offset = Some(end);
        let unit = self.config.stripe_unit_bytes;
        if streaming {
            // Units behind the stream are no longer wanted.
            while self.ahead.front().is_some_and(|&(u, _)| u < offset / unit) {
                self.ahead.pop_front();
            }
        } else {
            self.ahead.clear();
        }
        let mut done = start;
        while offset < end {
            let (member, member_offset, len) = self.piece(offset, end - offset);
            let member_done = match self.fetched(offset / unit) {
                Some(ready_ns) => ready_ns.max(start),
                None => {
                    let sub = IoRequest {
                        kind: IoKind::Read,
                        offset_bytes: member_offset,
                        len_bytes: len,
                    };
                    self.submit_to(member, start, &sub)
                }
            };
            done = done.max(self.data_path(member_done, len, self.config.read_bytes_per_s));
            offset += len;
        }
        if streaming {
            self.read_ahead(start, end);
        }
        done
    }

    /// When stripe unit `u` was fetched ahead, if it was.
    fn fetched(&self, u: u64) -> Option<u64> {
        let &(front, _) = self.ahead.front()?;
        let index = usize::try_from(u.checked_sub(front)?).ok()?;
        self.ahead.get(index).map(|&(_, ready_ns)| ready_ns)
    }

    /// Fetch the whole stripe units after `end`, up to `read_ahead_bytes`
    /// past it, that are not fetched yet; drop the ones before `end`'s
    /// unit (ARRAY-4).
    fn read_ahead(&mut self, start_ns: u64, end: u64) {
        let unit = self.config.stripe_unit_bytes;
        while self.ahead.front().is_some_and(|&(u, _)| u < end / unit) {
            self.ahead.pop_front();
        }
        let first_new = end.div_ceil(unit);
        if self.ahead.back().is_some_and(|&(u, _)| u + 1 < first_new) {
            self.ahead.clear();
        }
        let capacity_units = self.capacity_bytes() / unit;
        let last_unit = ((end + self.config.read_ahead_bytes).div_ceil(unit)).min(capacity_units);
        let mut next_unit = self.ahead.back().map_or(first_new, |&(u, _)| u + 1);
        while next_unit < last_unit {
            let (member, member_offset, len) = self.piece(next_unit * unit, unit);
            let sub = IoRequest {
                kind: IoKind::Read,
                offset_bytes: member_offset,
                len_bytes: len,
            };
            let ready_ns = self.submit_to(member, start_ns, &sub);
            self.ahead.push_back((next_unit, ready_ns));
            next_unit += 1;
        }
    }

    fn write_or_trim(&mut self, now_ns: u64, req: &IoRequest) -> u64 {
        let cached = req.kind == IoKind::Write && self.config.cache_bytes > 0;
        let appended = cached
            && self.config.write_append_command_ns > 0
            && self.next_write_offset == Some(req.offset_bytes);
        if req.kind == IoKind::Write {
            self.next_write_offset = Some(req.offset_bytes + req.len_bytes);
        }
        let busy = if appended {
            self.config.write_append_command_ns
        } else {
            self.config.write_command_ns
        };
        let start = self.command(now_ns, busy);
        self.forget_ahead(req);
        let mut stream_ns = start;
        let mut done = start;
        let (mut offset, end) = (req.offset_bytes, req.offset_bytes + req.len_bytes);
        while offset < end {
            let (member, member_offset, len) = self.piece(offset, end - offset);
            let sub = IoRequest {
                kind: req.kind,
                offset_bytes: member_offset,
                len_bytes: len,
            };
            offset += len;
            if req.kind == IoKind::Trim {
                done = done.max(self.submit_to(member, start, &sub));
                continue;
            }
            let room_ns = if cached { self.cache_room(len) } else { 0 };
            let mut arrived =
                self.data_path(start.max(room_ns), len, self.config.write_bytes_per_s);
            if cached && self.config.write_stream_bytes_per_s > 0 {
                stream_ns =
                    stream_ns.max(room_ns) + transfer_ns(len, self.config.write_stream_bytes_per_s);
                arrived = arrived.max(stream_ns);
            }
            let written = self.submit_to(member, arrived, &sub);
            if cached {
                self.cache_hold(written, len);
                done = done.max(arrived + self.config.write_latency_ns);
            } else {
                done = done.max(written);
            }
        }
        done
    }

    /// Drop the read-ahead if `req` overwrites or trims any of it.
    fn forget_ahead(&mut self, req: &IoRequest) {
        let unit = self.config.stripe_unit_bytes;
        let (Some(&(first, _)), Some(&(last, _))) = (self.ahead.front(), self.ahead.back()) else {
            return;
        };
        if req.offset_bytes < (last + 1) * unit && req.offset_bytes + req.len_bytes > first * unit {
            self.ahead.clear();
        }
    }

    /// Wait until `bytes` fit in the cache; answers when they do.
    fn cache_room(&mut self, bytes: u64) -> u64 {
        let mut ready_ns = 0;
        while self.cache_used_bytes + bytes > self.config.cache_bytes {
            let Some((release_ns, held)) = self.cache.pop_front() else {
                break;
            };
            self.cache_used_bytes -= held;
            ready_ns = ready_ns.max(release_ns);
        }
        ready_ns
    }

    fn cache_hold(&mut self, release_ns: u64, bytes: u64) {
        self.cache.push_back((release_ns, bytes));
        self.cache_used_bytes += bytes;
        self.cache_drained_ns = self.cache_drained_ns.max(release_ns);
        debug_assert!(self.cache_used_bytes <= self.config.cache_bytes, "ARRAY-3");
    }

    fn flush(&mut self, now_ns: u64) -> u64 {
        let start = self.command(now_ns, self.config.write_command_ns);
        let flush = IoRequest {
            kind: IoKind::Flush,
            offset_bytes: 0,
            len_bytes: 0,
        };
        let start = start.max(self.cache_drained_ns);
        (0..self.members.len())
            .map(|m| self.submit_to(m, start, &flush))
            .fold(start, u64::max)
    }

    fn source(&self, name: &str) -> &str {
        self.sources
            .iter()
            .find(|(k, _)| *k == name)
            .map_or("given by the caller", |(_, v)| v.as_str())
    }
}

impl DeviceModel for ArrayModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn capacity_bytes(&self) -> u64 {
        self.member_capacity_bytes * self.members.len() as u64
    }

    fn sector_bytes(&self) -> u32 {
        self.sector_bytes
    }

    fn submit(&mut self, now_ns: u64, req: &IoRequest) -> u64 {
        let done = match req.kind {
            IoKind::Read => self.read(now_ns, req),
            IoKind::Write | IoKind::Trim => self.write_or_trim(now_ns, req),
            IoKind::Flush => self.flush(now_ns),
        };
        debug_assert!(done >= now_ns, "MODEL-2");
        done.max(now_ns)
    }

    /// The members' counters summed; request counts are the array's own
    /// view only through the members (a request split over two members
    /// counts twice).
    fn stats(&self) -> ModelStats {
        let mut total = ModelStats::default();
        let mut wear_sum = 0.0;
        total.wear_min = u64::MAX;
        for s in self.members.iter().map(|m| m.stats()) {
            total.reads += s.reads;
            total.writes += s.writes;
            total.flushes += s.flushes;
            total.trims += s.trims;
            total.bytes_read += s.bytes_read;
            total.bytes_written += s.bytes_written;
            total.host_pages_written += s.host_pages_written;
            total.flash_pages_written += s.flash_pages_written;
            total.flash_pages_read += s.flash_pages_read;
            total.gc_runs += s.gc_runs;
            total.switch_merges += s.switch_merges;
            total.partial_merges += s.partial_merges;
            total.full_merges += s.full_merges;
            total.erases += s.erases;
            total.partial_page_writes += s.partial_page_writes;
            total.wear_min = total.wear_min.min(s.wear_min);
            total.wear_max = total.wear_max.max(s.wear_max);
            wear_sum += s.wear_mean;
        }
        total.wear_mean = wear_sum / self.members.len() as f64;
        total.waf = (total.host_pages_written > 0)
            .then(|| total.flash_pages_written as f64 / total.host_pages_written as f64);
        total
    }

    fn describe(&self) -> Vec<Parameter> {
        let c = &self.config;
        let p = |name: &str, value: String| Parameter::new(name, value, self.source(name));
        let mut out = vec![
            p("members", self.members.len().to_string()),
            p("stripe_unit_bytes", c.stripe_unit_bytes.to_string()),
            p("read_bytes_per_s", c.read_bytes_per_s.to_string()),
            p("write_bytes_per_s", c.write_bytes_per_s.to_string()),
            p("read_command_ns", c.read_command_ns.to_string()),
            p("write_command_ns", c.write_command_ns.to_string()),
            p("cache_bytes", c.cache_bytes.to_string()),
            p(
                "write_append_command_ns",
                c.write_append_command_ns.to_string(),
            ),
            p(
                "write_stream_bytes_per_s",
                c.write_stream_bytes_per_s.to_string(),
            ),
            p("write_latency_ns", c.write_latency_ns.to_string()),
            p("read_ahead_bytes", c.read_ahead_bytes.to_string()),
        ];
        if let Some(member) = self.members.first() {
            for q in member.describe() {
                out.push(Parameter::new(
                    &format!("member.{}", q.name),
                    q.value,
                    &q.source,
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
