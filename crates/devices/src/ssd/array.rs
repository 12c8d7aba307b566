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
        let mut done = start;
        let (mut offset, end) = (req.offset_bytes, req.offset_bytes + req.len_bytes);
        while offset < end {
            let (member, member_offset, len) = self.piece(offset, end - offset);
            let sub = IoRequest {
                kind: IoKind::Read,
                offset_bytes: member_offset,
                len_bytes: len,
            };
            let member_done = self.submit_to(member, start, &sub);
            done = done.max(self.data_path(member_done, len, self.config.read_bytes_per_s));
            offset += len;
        }
        done
    }

    fn write_or_trim(&mut self, now_ns: u64, req: &IoRequest) -> u64 {
        let start = self.command(now_ns, self.config.write_command_ns);
        let cached = req.kind == IoKind::Write && self.config.cache_bytes > 0;
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
            let arrived = self.data_path(start.max(room_ns), len, self.config.write_bytes_per_s);
            let written = self.submit_to(member, arrived, &sub);
            if cached {
                self.cache_hold(written, len);
                done = done.max(arrived);
            } else {
                done = done.max(written);
            }
        }
        done
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
