//! The SSD controller: host requests in, flash operations on timelines out.
//!
//! The host speaks in sectors; flash works in pages, and the page is also the
//! FTL's mapping unit. The controller cuts each request into the pages it
//! touches, asks the FTL where they live (reads) or where they go and what
//! that costs (writes: GC copies, merges, erases, then the program), and
//! schedules every flash operation on the resources it needs. Each resource
//! is a *timeline*, the virtual time until which it is busy: one per die
//! (array reads, programs, erases, copy-backs), one per channel (page
//! transfers between a die and the controller), one for the host link
//! (request data), and one for the controller itself (command decode and
//! mapping, serialised). An operation starts at the later of the time its
//! input is ready and the time its resource is free, so independent pages on
//! different dies and channels overlap and pages that contend queue up.
//!
//! Reads: controller overhead, then per page the die's array read, the
//! transfer over the die's channel (the die's page register stays busy until
//! it is emptied), and the transfer over the host link; the request
//! completes when its last page has reached the host. A page that was never
//! written is timed as if it sat where a sequential fill would have put it
//! (as on a drive that was filled before being measured, which is how the
//! papers' drives were measured), and counted as a flash read: the FTL's
//! stripe units ([`Ftl::stripe_pages`]) dealt channel-first over the dies.
//!
//! Writes: controller overhead, then per page the host transfer into the
//! controller, then the FTL's operations for the page in order: GC and
//! merge operations on the dies they touch (a copy's program waits for its
//! read), and the host page's program after all of them. A write that
//! covers only part of a page first reads the old page, if it is mapped
//! (read-modify-write, counted in `partial_page_writes`). A random write
//! occupies the controller `random_write_page_ns` longer per page (see
//! [`ControllerExtras`]); a write that starts where the previous write
//! ended continues a sequential stream and pays that once.
//!
//! Programs: a page crosses its channel into the die and is programmed.
//! Without cache program the transfer waits until the die is idle; with it
//! ([`ControllerExtras::cache_program`]) the transfer needs only the die's
//! cache register, which empties when the die starts its previous program,
//! so transfers overlap programs and a die programs back to back.
//!
//! Write buffer: with `write_buffer_bytes > 0`, a page's data sits in
//! controller RAM from the end of its host transfer until its program
//! completes, and the write completes once all its pages are in the
//! buffer. The buffer is a ring of release times, one slot per page: when
//! it is full a page waits until the oldest slot is released (FIFO, an
//! approximation when programs finish out of order). A flush completes when
//! every buffered page is programmed. Without a buffer a write completes
//! when its last program does.
//!
//! Invariants (CTRL-n):
//! 1. Every timeline only moves forward.
//! 2. A completion is never earlier than the submission (MODEL-2).
//! 3. The buffer never holds more pages than it has slots.
//!
//! The hot path allocates nothing: the FTL's operations go into one reused
//! vector and the buffer ring has fixed capacity.

use std::collections::VecDeque;

use super::ftl::{self, FlashOp, Ftl, FtlKind};
use super::geometry::{Geometry, Timing, transfer_ns};
use crate::error::DeviceError;
use crate::model::{DeviceModel, IoKind, IoRequest, ModelStats, Parameter};

/// The sector size SSD models expose.
pub const SECTOR_BYTES: u32 = 512;
/// The largest write buffer accepted (guards against absurd input).
pub const WRITE_BUFFER_BYTES_MAX: u64 = 16 << 30;
/// Buffer slots allocated up front; a larger ring grows on first use.
const BUFFER_SLOTS_PREALLOCATED: usize = 1 << 16;
/// Where a parameter came from when no preset says.
const SOURCE_CALLER: &str = "given by the caller";
/// The source of a controller extra left at zero.
const SOURCE_UNUSED: &str = "not modelled (zero)";
/// The source of the default stripe unit.
const SOURCE_PAGE_STRIPE: &str = "default: pages striped one by one";

/// A modelled SSD. See the module documentation.
pub struct SsdModel {
    name: String,
    geometry: Geometry,
    timing: Timing,
    ftl_kind: FtlKind,
    ftl: Box<dyn Ftl>,
    write_buffer_bytes: u64,
    extras: ControllerExtras,
    sources: Vec<(&'static str, String)>,
    derived: Derived,
    lines: Timelines,
    buffer: WriteBuffer,
    ops: Vec<FlashOp>,
    counts: Counts,
    /// Where the next write must start to continue the previous one.
    next_write_offset: Option<u64>,
}

/// Controller costs beyond [`Timing`], all zero unless a preset sets them.
///
/// `Timing::controller_overhead_ns` is *occupancy*: the controller does one
/// command at a time, so it bounds the command rate at any queue depth.
/// Modern controllers also have *latency* that overlaps between commands
/// (several firmware cores, pipelined stages); it lengthens every command
/// without lowering the rate, which is how a drive can have a QD1 latency
/// far above the inverse of its deep-queue IOPS.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ControllerExtras {
    /// Extra occupancy of a write command (mapping-table upkeep).
    pub write_command_ns: u64,
    /// Latency of a read command that overlaps with other commands.
    pub read_latency_ns: u64,
    /// Latency of a write command that overlaps with other commands.
    pub write_latency_ns: u64,
    /// Cache program (NAND "program page cache mode"): a page's data may
    /// cross the channel into the die's cache register while the die is
    /// still programming the previous page; the program starts when both
    /// are done. Without it the transfer waits until the die is idle.
    pub cache_program: bool,
    /// Extra occupancy per page of a write that does not continue the
    /// previous write: the page-by-page mapping upkeep of a random write. A
    /// write that continues the previous one (a sequential stream) extends
    /// one run and pays it once, however many pages it has.
    pub random_write_page_ns: u64,
}

/// Per-geometry constants precomputed for the hot path.
#[derive(Clone, Copy, Debug)]
struct Derived {
    page_bytes: u64,
    pages_per_die: u64,
    dies_per_channel: u32,
    pages_per_block: u64,
    dies: u64,
    page_channel_ns: u64,
    page_host_ns: u64,
    capacity_bytes: u64,
    /// The FTL's stripe unit in pages (for never-written pages).
    stripe_pages: u64,
}

/// Busy-until times of every resource (CTRL-1).
#[derive(Clone, Debug)]
struct Timelines {
    die_ns: Vec<u64>,
    /// When each die's cache register is free for the next page's data
    /// (with cache program: when the die's last program started).
    register_ns: Vec<u64>,
    channel_ns: Vec<u64>,
    host_ns: u64,
    controller_ns: u64,
}

/// The write buffer: a ring of page release times (CTRL-3).
#[derive(Clone, Debug)]
struct WriteBuffer {
    slots: usize,
    release_ns: VecDeque<u64>,
    /// The latest release of any page ever buffered: when a flush is done.
    drained_ns: u64,
}

/// What the controller counts itself (the FTL counts the rest).
#[derive(Clone, Debug, Default)]
struct Counts {
    reads: u64,
    writes: u64,
    flushes: u64,
    trims: u64,
    bytes_read: u64,
    bytes_written: u64,
    host_flash_reads: u64,
    partial_page_writes: u64,
}

impl SsdModel {
    /// An SSD of `geometry` and `timing` running the FTL of `ftl_kind` with
    /// its default parameters, behind a write buffer of
    /// `write_buffer_bytes` (0 = none).
    pub fn new(
        name: &str,
        geometry: Geometry,
        timing: Timing,
        ftl_kind: FtlKind,
        write_buffer_bytes: u64,
    ) -> Result<SsdModel, DeviceError> {
        geometry.validate(name)?;
        let ftl = ftl::build(ftl_kind, &geometry).map_err(|e| rename(e, name))?;
        SsdModel::with_ftl(name, geometry, timing, ftl_kind, ftl, write_buffer_bytes)
    }

    /// Like [`SsdModel::new`], with an FTL the caller built (for FTL
    /// parameters other than the defaults). `ftl_kind` names it in stats.
    pub fn with_ftl(
        name: &str,
        geometry: Geometry,
        timing: Timing,
        ftl_kind: FtlKind,
        ftl: Box<dyn Ftl>,
        write_buffer_bytes: u64,
    ) -> Result<SsdModel, DeviceError> {
        geometry.validate(name)?;
        validate_timing(name, &timing)?;
        let page_bytes = u64::from(geometry.page_bytes);
        let slots = buffer_slots(name, write_buffer_bytes, page_bytes)?;
        let derived = derive(&geometry, &timing, ftl.logical_pages(), ftl.stripe_pages());
        if derived.capacity_bytes == 0 {
            return geometry_error(name, "no logical capacity");
        }
        Ok(SsdModel {
            name: name.to_string(),
            lines: Timelines {
                die_ns: vec![0; geometry.dies() as usize],
                register_ns: vec![0; geometry.dies() as usize],
                channel_ns: vec![0; geometry.channels as usize],
                host_ns: 0,
                controller_ns: 0,
            },
            buffer: WriteBuffer {
                slots,
                release_ns: VecDeque::with_capacity(slots.min(BUFFER_SLOTS_PREALLOCATED)),
                drained_ns: 0,
            },
            geometry,
            timing,
            ftl_kind,
            ftl,
            write_buffer_bytes,
            extras: ControllerExtras::default(),
            sources: Vec::new(),
            derived,
            ops: Vec::with_capacity(256),
            counts: Counts::default(),
            next_write_offset: None,
        })
    }

    /// Set the controller costs beyond [`Timing`].
    pub fn with_extras(mut self, extras: ControllerExtras) -> SsdModel {
        self.extras = extras;
        self
    }

    /// Attach the source of each parameter, by the names [`describe`]
    /// lists them under (`channels`, `page_read_ns`, ...), plus any
    /// preset-level entries such as `ftl`.
    ///
    /// [`describe`]: DeviceModel::describe
    pub fn with_sources(mut self, sources: &[(&'static str, &str)]) -> SsdModel {
        self.sources = sources.iter().map(|&(k, v)| (k, v.to_string())).collect();
        self
    }

    /// The geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// The timing.
    pub fn timing(&self) -> &Timing {
        &self.timing
    }

    /// The FTL kind.
    pub fn ftl_kind(&self) -> FtlKind {
        self.ftl_kind
    }

    /// The FTL, for inspection.
    pub fn ftl(&self) -> &dyn Ftl {
        self.ftl.as_ref()
    }

    /// Pages the request touches: first logical page and count.
    fn page_span(&self, req: &IoRequest) -> (u64, u64) {
        let p = self.derived.page_bytes;
        if req.len_bytes == 0 {
            return (req.offset_bytes / p, 0);
        }
        let first = req.offset_bytes / p;
        let last = (req.offset_bytes + req.len_bytes - 1) / p;
        (first, last - first + 1)
    }

    /// Bytes of the request inside logical page `lpn`.
    fn covered_bytes(&self, req: &IoRequest, lpn: u64) -> u64 {
        let p = self.derived.page_bytes;
        let start = (lpn * p).max(req.offset_bytes);
        let end = ((lpn + 1) * p).min(req.offset_bytes + req.len_bytes);
        end.saturating_sub(start)
    }

    /// Occupy the controller for `busy_ns` from `now_ns`; answer when done.
    fn controller(&mut self, now_ns: u64, busy_ns: u64) -> u64 {
        let done = now_ns.max(self.lines.controller_ns) + busy_ns;
        self.lines.controller_ns = done;
        done
    }

    fn host_transfer(&mut self, ready_ns: u64, bytes: u64) -> u64 {
        let ns = if bytes == self.derived.page_bytes {
            self.derived.page_host_ns
        } else {
            self.timing.host_transfer_ns(bytes)
        };
        let done = ready_ns.max(self.lines.host_ns) + ns;
        self.lines.host_ns = done;
        done
    }

    fn die_of(&self, ppn: u64) -> usize {
        (ppn / self.derived.pages_per_die) as usize
    }

    fn channel_of(&self, die: usize) -> usize {
        die / self.derived.dies_per_channel as usize
    }

    /// Where a never-written page is timed from: the die a sequential fill
    /// would have put it on (channel-first striping in the FTL's stripe
    /// units).
    fn home_ppn(&self, lpn: u64) -> u64 {
        let d = &self.derived;
        let unit = lpn / d.stripe_pages;
        let stripe = unit % d.dies;
        let channels = u64::from(self.geometry.channels);
        let die = (stripe % channels) * u64::from(d.dies_per_channel) + stripe / channels;
        let in_die = (unit / d.dies) * d.stripe_pages + lpn % d.stripe_pages;
        die * d.pages_per_die + in_die % d.pages_per_die
    }

    /// Array read of `ppn` and its transfer to the controller; answers when
    /// the data is in the controller.
    fn flash_read(&mut self, ppn: u64, ready_ns: u64) -> u64 {
        let die = self.die_of(ppn);
        let channel = self.channel_of(die);
        let read_done = ready_ns.max(self.lines.die_ns[die]) + self.timing.page_read_ns;
        let start = read_done.max(self.lines.channel_ns[channel]);
        let done = start + self.derived.page_channel_ns;
        self.lines.channel_ns[channel] = done;
        self.lines.die_ns[die] = done;
        self.lines.register_ns[die] = done;
        done
    }

    /// Transfer of a page to its die and its program; answers when done.
    /// With cache program the transfer needs only the die's cache register
    /// free, not the die idle.
    fn flash_program(&mut self, ppn: u64, data_ready_ns: u64) -> u64 {
        let die = self.die_of(ppn);
        let channel = self.channel_of(die);
        let die_ready = if self.extras.cache_program {
            self.lines.register_ns[die]
        } else {
            self.lines.die_ns[die]
        };
        let start = data_ready_ns
            .max(self.lines.channel_ns[channel])
            .max(die_ready);
        let sent = start + self.derived.page_channel_ns;
        self.lines.channel_ns[channel] = sent;
        let program_start = sent.max(self.lines.die_ns[die]);
        let done = program_start + self.timing.page_program_ns;
        self.lines.die_ns[die] = done;
        self.lines.register_ns[die] = program_start;
        done
    }

    /// A copy inside one die (no channel); across dies it is a read and a
    /// program.
    fn flash_copy_back(&mut self, from_ppn: u64, to_ppn: u64, ready_ns: u64) -> u64 {
        let die = self.die_of(from_ppn);
        if die != self.die_of(to_ppn) {
            let data = self.flash_read(from_ppn, ready_ns);
            return self.flash_program(to_ppn, data);
        }
        let done = ready_ns.max(self.lines.die_ns[die])
            + self.timing.page_read_ns
            + self.timing.page_program_ns;
        self.lines.die_ns[die] = done;
        self.lines.register_ns[die] = done;
        done
    }

    fn flash_erase(&mut self, block: u64, ready_ns: u64) -> u64 {
        let die = self.die_of(block * self.derived.pages_per_block);
        let done = ready_ns.max(self.lines.die_ns[die]) + self.timing.block_erase_ns;
        self.lines.die_ns[die] = done;
        self.lines.register_ns[die] = done;
        done
    }

    /// Schedule the FTL's operations for one page (in `self.ops`): the
    /// ones before the last from `start_ns`, the last (the host page's
    /// program, FTL-3) once its data and all of them are done.
    fn schedule_ops(&mut self, start_ns: u64, data_ready_ns: u64) -> u64 {
        let n = self.ops.len();
        let mut before_ns = start_ns;
        let mut copy_data_ns = start_ns;
        for i in 0..n {
            let op = self.ops[i];
            let last = i + 1 == n;
            let done = match op {
                FlashOp::Program { ppn } if last => {
                    self.flash_program(ppn, data_ready_ns.max(before_ns))
                }
                FlashOp::Program { ppn } => self.flash_program(ppn, copy_data_ns),
                FlashOp::Read { ppn } => {
                    let done = self.flash_read(ppn, start_ns);
                    copy_data_ns = done;
                    done
                }
                FlashOp::CopyBack { from_ppn, to_ppn } => {
                    self.flash_copy_back(from_ppn, to_ppn, start_ns)
                }
                FlashOp::Erase { block } => self.flash_erase(block, start_ns),
            };
            before_ns = before_ns.max(done);
        }
        before_ns.max(data_ready_ns)
    }

    /// Wait for a buffer slot; answers when one is free.
    fn buffer_slot(&mut self) -> u64 {
        if self.buffer.release_ns.len() < self.buffer.slots {
            return 0;
        }
        self.buffer.release_ns.pop_front().unwrap_or(0)
    }

    fn buffer_hold(&mut self, release_ns: u64) {
        debug_assert!(self.buffer.release_ns.len() < self.buffer.slots, "CTRL-3");
        self.buffer.release_ns.push_back(release_ns);
        self.buffer.drained_ns = self.buffer.drained_ns.max(release_ns);
    }

    fn read(&mut self, now_ns: u64, req: &IoRequest) -> u64 {
        self.counts.reads += 1;
        self.counts.bytes_read += req.len_bytes;
        let start = self.controller(now_ns, self.timing.controller_overhead_ns)
            + self.extras.read_latency_ns;
        let (first, count) = self.page_span(req);
        let mut done = start;
        for lpn in first..first + count {
            let ppn = match self.ftl.lookup(lpn) {
                Some(ppn) => ppn,
                None => self.home_ppn(lpn),
            };
            let data = self.flash_read(ppn, start);
            let bytes = self.covered_bytes(req, lpn);
            done = done.max(self.host_transfer(data, bytes));
        }
        self.counts.host_flash_reads += count;
        done
    }

    fn write(&mut self, now_ns: u64, req: &IoRequest) -> u64 {
        self.counts.writes += 1;
        self.counts.bytes_written += req.len_bytes;
        let (first, count) = self.page_span(req);
        let streaming = self.next_write_offset == Some(req.offset_bytes);
        self.next_write_offset = Some(req.offset_bytes + req.len_bytes);
        let upkeep_pages = if streaming { count.min(1) } else { count };
        let busy = self.timing.controller_overhead_ns
            + self.extras.write_command_ns
            + upkeep_pages * self.extras.random_write_page_ns;
        let start = self.controller(now_ns, busy) + self.extras.write_latency_ns;
        let buffered = self.buffer.slots > 0;
        let mut done = start;
        for lpn in first..first + count {
            let slot_ns = if buffered { self.buffer_slot() } else { 0 };
            let bytes = self.covered_bytes(req, lpn);
            let in_controller = self.host_transfer(start.max(slot_ns), bytes);
            let mut data_ready = in_controller;
            if bytes < self.derived.page_bytes
                && let Some(old) = self.ftl.lookup(lpn)
            {
                self.counts.partial_page_writes += 1;
                self.counts.host_flash_reads += 1;
                data_ready = data_ready.max(self.flash_read(old, start));
            }
            self.ops.clear();
            self.ftl.write(lpn, &mut self.ops);
            let programmed = self.schedule_ops(start, data_ready);
            if buffered {
                self.buffer_hold(programmed);
                done = done.max(in_controller);
            } else {
                done = done.max(programmed);
            }
        }
        done
    }

    fn flush(&mut self, now_ns: u64) -> u64 {
        self.counts.flushes += 1;
        let start = self.controller(now_ns, self.timing.controller_overhead_ns);
        start.max(self.buffer.drained_ns)
    }

    fn trim(&mut self, now_ns: u64, req: &IoRequest) -> u64 {
        self.counts.trims += 1;
        let start = self.controller(now_ns, self.timing.controller_overhead_ns);
        let (first, count) = self.page_span(req);
        for lpn in first..first + count {
            if self.covered_bytes(req, lpn) == self.derived.page_bytes {
                self.ftl.trim(lpn);
            }
        }
        start
    }

    fn source(&self, name: &str) -> &str {
        self.sources
            .iter()
            .find(|(k, _)| *k == name)
            .map_or(SOURCE_CALLER, |(_, v)| v.as_str())
    }
}

impl DeviceModel for SsdModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn capacity_bytes(&self) -> u64 {
        self.derived.capacity_bytes
    }

    fn sector_bytes(&self) -> u32 {
        SECTOR_BYTES
    }

    fn submit(&mut self, now_ns: u64, req: &IoRequest) -> u64 {
        let done = match req.kind {
            IoKind::Read => self.read(now_ns, req),
            IoKind::Write => self.write(now_ns, req),
            IoKind::Flush => self.flush(now_ns),
            IoKind::Trim => self.trim(now_ns, req),
        };
        debug_assert!(done >= now_ns, "MODEL-2");
        done.max(now_ns)
    }

    fn stats(&self) -> ModelStats {
        let f = self.ftl.stats();
        let (wear_min, wear_max, wear_mean) = wear(self.ftl.erase_counts());
        ModelStats {
            reads: self.counts.reads,
            writes: self.counts.writes,
            flushes: self.counts.flushes,
            trims: self.counts.trims,
            bytes_read: self.counts.bytes_read,
            bytes_written: self.counts.bytes_written,
            host_pages_written: f.host_pages_written,
            flash_pages_written: f.flash_pages_written,
            flash_pages_read: f.flash_pages_read + self.counts.host_flash_reads,
            waf: (f.host_pages_written > 0)
                .then(|| f.flash_pages_written as f64 / f.host_pages_written as f64),
            gc_runs: f.gc_runs,
            switch_merges: f.switch_merges,
            partial_merges: f.partial_merges,
            full_merges: f.full_merges,
            erases: f.erases,
            partial_page_writes: self.counts.partial_page_writes,
            wear_min,
            wear_max,
            wear_mean,
            seek_ns_total: 0,
            rotation_ns_total: 0,
        }
    }

    fn describe(&self) -> Vec<Parameter> {
        let g = &self.geometry;
        let t = &self.timing;
        let p = |name: &str, value: String| {
            let source = match self.source(name) {
                SOURCE_CALLER if value == "0" || value == "false" => SOURCE_UNUSED,
                SOURCE_CALLER if name == "stripe_pages" && value == "1" => SOURCE_PAGE_STRIPE,
                source => source,
            };
            Parameter::new(name, value, source)
        };
        let mut out = vec![
            p("capacity_bytes", self.derived.capacity_bytes.to_string()),
            p("channels", g.channels.to_string()),
            p("chips_per_channel", g.chips_per_channel.to_string()),
            p("dies_per_chip", g.dies_per_chip.to_string()),
            p("planes_per_die", g.planes_per_die.to_string()),
            p("blocks_per_plane", g.blocks_per_plane.to_string()),
            p("pages_per_block", g.pages_per_block.to_string()),
            p("page_bytes", g.page_bytes.to_string()),
            p("over_provisioning", g.over_provisioning.to_string()),
            p("stripe_pages", self.derived.stripe_pages.to_string()),
            p("page_read_ns", t.page_read_ns.to_string()),
            p("page_program_ns", t.page_program_ns.to_string()),
            p("block_erase_ns", t.block_erase_ns.to_string()),
            p("channel_bytes_per_s", t.channel_bytes_per_s.to_string()),
            p("host_bytes_per_s", t.host_bytes_per_s.to_string()),
            p(
                "controller_overhead_ns",
                t.controller_overhead_ns.to_string(),
            ),
            p("write_command_ns", self.extras.write_command_ns.to_string()),
            p("read_latency_ns", self.extras.read_latency_ns.to_string()),
            p("write_latency_ns", self.extras.write_latency_ns.to_string()),
            p(
                "random_write_page_ns",
                self.extras.random_write_page_ns.to_string(),
            ),
            p("cache_program", self.extras.cache_program.to_string()),
            p("write_buffer_bytes", self.write_buffer_bytes.to_string()),
            p("ftl", self.ftl_kind.as_str().to_string()),
        ];
        for (name, source) in &self.sources {
            if !out.iter().any(|q| q.name == *name) {
                out.push(Parameter::new(name, "", source));
            }
        }
        out
    }
}

/// Least, most and mean erase count.
fn wear(counts: &[u32]) -> (u64, u64, f64) {
    if counts.is_empty() {
        return (0, 0, 0.0);
    }
    let (mut lo, mut hi, mut sum) = (u32::MAX, 0u32, 0u64);
    for &c in counts {
        lo = lo.min(c);
        hi = hi.max(c);
        sum += u64::from(c);
    }
    (
        u64::from(lo),
        u64::from(hi),
        sum as f64 / counts.len() as f64,
    )
}

fn derive(g: &Geometry, t: &Timing, logical_pages: u64, stripe_pages: u64) -> Derived {
    let page_bytes = u64::from(g.page_bytes);
    let pages_per_block = u64::from(g.pages_per_block);
    Derived {
        page_bytes,
        pages_per_die: u64::from(g.planes_per_die)
            * u64::from(g.blocks_per_plane)
            * pages_per_block,
        dies_per_channel: g.chips_per_channel * g.dies_per_chip,
        pages_per_block,
        dies: u64::from(g.dies()),
        page_channel_ns: transfer_ns(page_bytes, t.channel_bytes_per_s),
        page_host_ns: transfer_ns(page_bytes, t.host_bytes_per_s),
        capacity_bytes: logical_pages.min(g.logical_pages()) * page_bytes,
        stripe_pages: stripe_pages.max(1),
    }
}

fn validate_timing(name: &str, t: &Timing) -> Result<(), DeviceError> {
    if t.channel_bytes_per_s == 0 || t.host_bytes_per_s == 0 {
        return geometry_error(name, "channel and host rates must be above zero");
    }
    Ok(())
}

fn buffer_slots(name: &str, buffer_bytes: u64, page_bytes: u64) -> Result<usize, DeviceError> {
    if buffer_bytes > WRITE_BUFFER_BYTES_MAX {
        return geometry_error(name, "write buffer larger than WRITE_BUFFER_BYTES_MAX");
    }
    if buffer_bytes > 0 && buffer_bytes < page_bytes {
        return geometry_error(name, "a write buffer must hold at least one page");
    }
    Ok((buffer_bytes / page_bytes) as usize)
}

fn geometry_error<T>(name: &str, problem: &str) -> Result<T, DeviceError> {
    Err(DeviceError::Geometry {
        device: name.to_string(),
        problem: problem.to_string(),
    })
}

/// Put the device's name on an FTL's geometry error.
fn rename(e: DeviceError, name: &str) -> DeviceError {
    match e {
        DeviceError::Geometry { device, problem } => DeviceError::Geometry {
            device: name.to_string(),
            problem: format!("{device}: {problem}"),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests;
