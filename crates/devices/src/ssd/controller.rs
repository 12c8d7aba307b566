//! The SSD controller: host requests in, flash operations on timelines out.
//!
//! The host speaks in sectors; flash works in pages, and the page is also the
//! FTL's mapping unit. The controller cuts each request into the pages it
//! touches, asks the FTL where they live (reads) or where they go and what
//! that costs (writes: GC copies, merges, erases, then the program), and
//! schedules every flash operation on the resources it needs. Each die,
//! each channel and the host link has a [`Timeline`]: the intervals during
//! which it is reserved. A transfer is scheduled when its die and its link
//! are both free: at the earliest idle gap of its channel (or of the host
//! link) at or after the time its data is ready, as a real controller's
//! per-channel queues serve whichever transfer can go, so a transfer that
//! waits for a die busy with garbage collection holds its link only for its
//! own slot and never blocks transfers submitted after it to other dies.
//! On a die, programs, erases and copy-backs keep their order (a block's
//! pages are programmed in order) and start at the die's queue tail, the
//! end of its last reservation other than a merged page's program booked
//! off the queue (see Writes); reads do too, unless the device lets reads
//! go ahead of queued writes ([`ControllerExtras::reads_first`]), in which
//! case a read takes the earliest gap on its die long enough for it.
//! Erases and copy-backs start after every reservation of their die. The
//! controller itself (command decode and mapping) is one serial resource,
//! taken in submission order. Independent pages on different dies and
//! channels overlap, and pages that contend queue up. The schedule is a
//! function of the requests and their times only: runs are deterministic.
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
//! (read-modify-write, counted in `partial_page_writes`): the read is its
//! own command on the old page's die, the controller merges the page in
//! its RAM, and hands the merged page's program to its die only then. If
//! the die's queued work ends later, the program joins the queue;
//! otherwise it takes the die's earliest gap from the time its data is
//! there and leaves the queue tail where it is, so work queued on the die
//! after it runs in the gaps before it. The FTL's choice of physical page
//! is only a label for timing: the order in which a die programs the
//! pages of one block is the controller's, not the FTL's. A random write
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
//! 1. No two reservations of one die, channel or the host link overlap
//!    (TL-2); the controller's busy-until time only moves forward.
//! 2. A completion is never earlier than the submission (MODEL-2).
//! 3. The buffer never holds more pages than it has slots.
//! 4. A program starts only once its data is in the controller and after
//!    every erase and copy-back booked on its die before it; a merged
//!    page's program delays no queued work on its die whose data was ready
//!    before it. The booking changes timing only: the FTL sees the same
//!    requests in the same order, so every flash counter is unchanged.
//!
//! The hot path allocates nothing: the FTL's operations go into one reused
//! vector and the buffer ring has fixed capacity.

use std::collections::VecDeque;

use super::ftl::{self, FlashOp, Ftl, FtlKind};
use super::geometry::{Geometry, Timing, transfer_ns};
use super::timeline::Timeline;
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
/// The source of an FTL parameter that the `ftl` entry's source explains.
const SOURCE_SEE_FTL: &str = "part of the ftl: see its source";
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
    /// The latest submission time: reservations that ended before it are
    /// dropped.
    now_ns: u64,
    /// Where the next read must start to continue the previous one.
    next_read_offset: Option<u64>,
    /// Pages read ahead: logical page and when its data is in controller
    /// RAM, in page order. Any write or trim empties it.
    prefetched: VecDeque<(u64, u64)>,
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
    /// Reads may go ahead of queued writes on a die: a read takes the
    /// earliest idle gap on its die long enough for it, instead of waiting
    /// for every program and erase queued there before it. Off, a die
    /// serves its operations in the order they were scheduled.
    pub reads_first: bool,
    /// Read-ahead on a sequential read stream, in pages: when a read
    /// continues the previous one, the controller reads the next
    /// `read_ahead_pages` logical pages into its RAM (on idle die and
    /// channel time after the request's own reads), so the stream's next
    /// request needs only its host transfer. 0: none.
    pub read_ahead_pages: u64,
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

/// The reservations of every resource (CTRL-1).
#[derive(Clone, Debug)]
struct Timelines {
    die: Vec<Timeline>,
    /// When each die's cache register is free for the next page's data
    /// (with cache program: when the die's last program started).
    register_ns: Vec<u64>,
    /// Per die, the end of its last reservation other than a
    /// read-modify-write's program booked off its queue: the tail its
    /// queued work follows (CTRL-4).
    queue_ns: Vec<u64>,
    channel: Vec<Timeline>,
    host: Timeline,
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
                die: vec![Timeline::default(); geometry.dies() as usize],
                register_ns: vec![0; geometry.dies() as usize],
                queue_ns: vec![0; geometry.dies() as usize],
                channel: vec![Timeline::default(); geometry.channels as usize],
                host: Timeline::default(),
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
            now_ns: 0,
            next_read_offset: None,
            prefetched: VecDeque::new(),
        })
    }

    /// Set the controller costs beyond [`Timing`].
    pub fn with_extras(mut self, extras: ControllerExtras) -> SsdModel {
        self.extras = extras;
        self
    }

    /// The controller costs beyond [`Timing`].
    pub fn extras(&self) -> ControllerExtras {
        self.extras
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
        let host = &mut self.lines.host;
        host.prune(self.now_ns);
        let start = host.fit(ready_ns, ns);
        host.reserve(start, start + ns);
        start + ns
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

    /// Drop the reservations of `die` and its channel that ended before the
    /// current submission; answers the channel.
    fn prune(&mut self, die: usize) -> usize {
        let channel = self.channel_of(die);
        self.lines.die[die].prune(self.now_ns);
        self.lines.channel[channel].prune(self.now_ns);
        channel
    }

    /// Reserve `[start, end)` on `die` for queued work, at or after the
    /// die's queue tail.
    fn die_reserve(&mut self, die: usize, start: u64, end: u64) {
        self.lines.die[die].reserve(start, end);
        self.lines.register_ns[die] = self.lines.register_ns[die].max(end);
        self.lines.queue_ns[die] = self.lines.queue_ns[die].max(end);
    }

    /// Where queued work on `die` may start: its queue tail, and never on
    /// time already pruned.
    fn queue_tail(&self, die: usize) -> u64 {
        self.lines.queue_ns[die].max(self.lines.die[die].floor())
    }

    /// Array read of `ppn` and its transfer to the controller; answers when
    /// the data is in the controller. The die is held from the array read
    /// until its page register is emptied over the channel; the transfer
    /// takes the channel's first idle gap after the array read. The read
    /// follows the die's queue tail (in the earliest gap from there, as
    /// only programs booked off the queue lie beyond it), or with
    /// `reads_first` takes the die's earliest gap from `ready_ns`.
    fn flash_read(&mut self, ppn: u64, ready_ns: u64) -> u64 {
        let die = self.die_of(ppn);
        let channel = self.prune(die);
        let read_ns = self.timing.page_read_ns;
        let xfer_ns = self.derived.page_channel_ns;
        let mut ready = ready_ns;
        if !self.extras.reads_first {
            ready = ready.max(self.queue_tail(die));
        }
        loop {
            let start = self.lines.die[die].fit(ready, read_ns + xfer_ns);
            let sent = self.lines.channel[channel].fit(start + read_ns, xfer_ns);
            let done = sent + xfer_ns;
            match self.lines.die[die].conflict(start, done) {
                // The channel's wait made the read overrun the gap on its
                // die: try the next gap.
                Some(busy_until) => ready = busy_until,
                None => {
                    self.lines.channel[channel].reserve(sent, done);
                    self.die_reserve(die, start, done);
                    return done;
                }
            }
        }
    }

    /// Transfer of a page to its die and its program, queued on the die;
    /// answers when done. Without cache program the transfer waits until
    /// the die's queued work is done; with it the transfer needs only the
    /// die's cache register free. The transfer takes its channel's first
    /// idle gap from then; the program starts when the data is in and the
    /// die's queued work is done. Both go around any read-modify-write
    /// program booked off the queue (`flash_program_merged`).
    fn flash_program(&mut self, ppn: u64, data_ready_ns: u64) -> u64 {
        let die = self.die_of(ppn);
        let channel = self.prune(die);
        let mut after = self.queue_tail(die);
        let mut die_ready = if self.extras.cache_program {
            self.lines.register_ns[die]
        } else {
            after
        };
        let xfer_ns = self.derived.page_channel_ns;
        loop {
            let start = self.lines.channel[channel].fit(data_ready_ns.max(die_ready), xfer_ns);
            let sent = start + xfer_ns;
            let program_start = sent.max(after);
            let done = program_start + self.timing.page_program_ns;
            // The die is taken from the later of the transfer's start and
            // its queued work: its register fills, then it programs.
            let held = start.max(after);
            if let Some(busy_until) = self.lines.die[die].conflict(held, done) {
                // A merged page's program lies in the way: go after it.
                after = busy_until;
                die_ready = busy_until;
                continue;
            }
            debug_assert!(start >= data_ready_ns, "CTRL-4");
            self.lines.channel[channel].reserve(start, sent);
            self.die_reserve(die, held, done);
            self.lines.register_ns[die] = program_start;
            return done;
        }
    }

    /// The program of a read-modify-write's merged page, whose data is in
    /// the controller at `data_ready_ns`; answers when done. If that is no
    /// later than the die's queue tail the page joins the queue
    /// ([`SsdModel::flash_program`]). Otherwise the controller hands it to
    /// the die only then: it takes the die's earliest gap from then that
    /// holds its transfer and program, with the transfer in a gap of the
    /// channel, and leaves the queue tail where it is, so work queued on
    /// the die after it runs in the gaps before it (CTRL-4).
    fn flash_program_merged(&mut self, ppn: u64, data_ready_ns: u64) -> u64 {
        let die = self.die_of(ppn);
        let channel = self.prune(die);
        if data_ready_ns <= self.queue_tail(die) {
            return self.flash_program(ppn, data_ready_ns);
        }
        let xfer_ns = self.derived.page_channel_ns;
        let len_ns = xfer_ns + self.timing.page_program_ns;
        let mut ready = data_ready_ns;
        loop {
            let start = self.lines.die[die].fit(ready, len_ns);
            let sent = self.lines.channel[channel].fit(start, xfer_ns);
            let done = sent + len_ns;
            match self.lines.die[die].conflict(sent, done) {
                // The channel's wait made the page overrun the gap on its
                // die: try the next gap.
                Some(busy_until) => ready = busy_until,
                None => {
                    debug_assert!(sent > self.lines.queue_ns[die], "CTRL-4");
                    self.lines.channel[channel].reserve(sent, sent + xfer_ns);
                    self.lines.die[die].reserve(sent, done);
                    return done;
                }
            }
        }
    }

    /// A copy inside one die (no channel); across dies it is a read and a
    /// program.
    fn flash_copy_back(&mut self, from_ppn: u64, to_ppn: u64, ready_ns: u64) -> u64 {
        let die = self.die_of(from_ppn);
        if die != self.die_of(to_ppn) {
            let data = self.flash_read(from_ppn, ready_ns);
            return self.flash_program(to_ppn, data);
        }
        self.prune(die);
        let start = ready_ns.max(self.lines.die[die].tail());
        let done = start + self.timing.page_read_ns + self.timing.page_program_ns;
        self.die_reserve(die, start, done);
        done
    }

    fn flash_erase(&mut self, block: u64, ready_ns: u64) -> u64 {
        let die = self.die_of(block * self.derived.pages_per_block);
        self.prune(die);
        let start = ready_ns.max(self.lines.die[die].tail());
        let done = start + self.timing.block_erase_ns;
        self.die_reserve(die, start, done);
        done
    }

    /// Schedule the FTL's operations for one page (in `self.ops`): the
    /// ones before the last from `start_ns`, the last (the host page's
    /// program, FTL-3) once its data and all of them are done; `merged`
    /// if that page is a read-modify-write's.
    fn schedule_ops(&mut self, start_ns: u64, data_ready_ns: u64, merged: bool) -> u64 {
        let n = self.ops.len();
        let mut before_ns = start_ns;
        let mut copy_data_ns = start_ns;
        for i in 0..n {
            let op = self.ops[i];
            let last = i + 1 == n;
            let done = match op {
                FlashOp::Program { ppn } if last && merged => {
                    self.flash_program_merged(ppn, data_ready_ns.max(before_ns))
                }
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
        let streaming = self.next_read_offset == Some(req.offset_bytes);
        self.next_read_offset = Some(req.offset_bytes + req.len_bytes);
        // Pages read ahead before this request are used or forgotten.
        while self.prefetched.front().is_some_and(|&(lpn, _)| lpn < first) {
            self.prefetched.pop_front();
        }
        let mut done = start;
        for lpn in first..first + count {
            let data = match self.prefetched.front() {
                Some(&(ahead, ready_ns)) if ahead == lpn => {
                    self.prefetched.pop_front();
                    ready_ns.max(start)
                }
                _ => {
                    self.counts.host_flash_reads += 1;
                    self.flash_read(self.ppn_for_read(lpn), start)
                }
            };
            let bytes = self.covered_bytes(req, lpn);
            done = done.max(self.host_transfer(data, bytes));
        }
        if streaming && self.extras.read_ahead_pages > 0 {
            self.read_ahead(first + count, start);
        }
        done
    }

    /// Where a logical page is read from (its home if never written).
    fn ppn_for_read(&self, lpn: u64) -> u64 {
        match self.ftl.lookup(lpn) {
            Some(ppn) => ppn,
            None => self.home_ppn(lpn),
        }
    }

    /// Keep the `read_ahead_pages` pages from `next_lpn` read into RAM.
    fn read_ahead(&mut self, next_lpn: u64, start_ns: u64) {
        let logical_pages = self.derived.capacity_bytes / self.derived.page_bytes;
        let end = (next_lpn + self.extras.read_ahead_pages).min(logical_pages);
        let mut lpn = self
            .prefetched
            .back()
            .map_or(next_lpn, |&(l, _)| (l + 1).max(next_lpn));
        if self.prefetched.front().is_some_and(|&(l, _)| l != next_lpn) {
            self.prefetched.clear();
            lpn = next_lpn;
        }
        while lpn < end {
            let ready = self.flash_read(self.ppn_for_read(lpn), start_ns);
            self.counts.host_flash_reads += 1;
            self.prefetched.push_back((lpn, ready));
            lpn += 1;
        }
    }

    fn write(&mut self, now_ns: u64, req: &IoRequest) -> u64 {
        self.prefetched.clear();
        self.next_read_offset = None;
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
            let mut merged = false;
            if bytes < self.derived.page_bytes
                && let Some(old) = self.ftl.lookup(lpn)
            {
                self.counts.partial_page_writes += 1;
                self.counts.host_flash_reads += 1;
                data_ready = data_ready.max(self.flash_read(old, start));
                merged = true;
            }
            self.ops.clear();
            self.ftl.write(lpn, &mut self.ops);
            let programmed = self.schedule_ops(start, data_ready, merged);
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
        self.prefetched.clear();
        self.next_read_offset = None;
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
        self.now_ns = self.now_ns.max(now_ns);
        let done = match req.kind {
            IoKind::Read => self.read(now_ns, req),
            IoKind::Write => self.write(now_ns, req),
            IoKind::Flush => self.flush(now_ns),
            IoKind::Trim => self.trim(now_ns, req),
        };
        debug_assert!(done >= now_ns, "MODEL-2");
        done.max(now_ns)
    }

    /// Start loading the map entry of the request's first page.
    fn prefetch(&self, req: &IoRequest) {
        if matches!(req.kind, IoKind::Read | IoKind::Write) {
            self.ftl
                .prefetch(req.offset_bytes / self.derived.page_bytes);
        }
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
            read_cache_hits: 0,
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
            p("reads_first", self.extras.reads_first.to_string()),
            p("read_ahead_pages", self.extras.read_ahead_pages.to_string()),
            p("write_buffer_bytes", self.write_buffer_bytes.to_string()),
            p("ftl", self.ftl_kind.as_str().to_string()),
        ];
        // The FTL's own parameters; one without a source of its own is
        // explained by the `ftl` entry's.
        for (name, value) in self.ftl.parameters() {
            let source = match self.source(name) {
                SOURCE_CALLER if self.source("ftl") != SOURCE_CALLER => SOURCE_SEE_FTL,
                source => source,
            };
            out.push(Parameter::new(name, value, source));
        }
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
