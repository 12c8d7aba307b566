//! Controller tests: timing of single requests on an idle device against
//! sums done by hand, the write buffer, read-modify-write, trim, flush,
//! determinism and refused geometries.

use super::*;
use crate::model::check_request;

/// 2 channels x 1 chip x 1 die x 1 plane, 16 blocks of 8 pages of 4 KiB.
fn geometry() -> Geometry {
    Geometry {
        channels: 2,
        chips_per_channel: 1,
        dies_per_chip: 1,
        planes_per_die: 1,
        blocks_per_plane: 16,
        pages_per_block: 8,
        page_bytes: 4096,
        over_provisioning: 0.25,
    }
}

/// Round numbers: a 4 KiB page crosses a channel in 100 us and the host
/// link in 10 us.
fn timing() -> Timing {
    Timing {
        page_read_ns: READ_NS,
        page_program_ns: PROGRAM_NS,
        block_erase_ns: 1_000_000,
        channel_bytes_per_s: 40_960_000,
        host_bytes_per_s: 409_600_000,
        controller_overhead_ns: CONTROLLER_NS,
    }
}

const READ_NS: u64 = 50_000;
const PROGRAM_NS: u64 = 200_000;
const CONTROLLER_NS: u64 = 5_000;
const CHANNEL_NS: u64 = 100_000;
const HOST_NS: u64 = 10_000;
const T0: u64 = 1_000_000;

fn ssd(buffer_bytes: u64) -> SsdModel {
    SsdModel::new("t", geometry(), timing(), FtlKind::PageGreedy, buffer_bytes).unwrap()
}

fn req(kind: IoKind, offset_bytes: u64, len_bytes: u64) -> IoRequest {
    IoRequest {
        kind,
        offset_bytes,
        len_bytes,
    }
}

#[test]
fn idle_page_read_is_the_hand_sum() {
    let mut m = ssd(0);
    let done = m.submit(T0, &req(IoKind::Read, 0, 4096));
    assert_eq!(done, T0 + CONTROLLER_NS + READ_NS + CHANNEL_NS + HOST_NS);
}

#[test]
fn idle_page_write_is_the_hand_sum() {
    let mut m = ssd(0);
    let done = m.submit(T0, &req(IoKind::Write, 0, 4096));
    assert_eq!(done, T0 + CONTROLLER_NS + HOST_NS + CHANNEL_NS + PROGRAM_NS);
    let s = m.stats();
    assert_eq!((s.host_pages_written, s.flash_pages_written), (1, 1));
    assert_eq!(s.waf, Some(1.0));
}

#[test]
fn buffered_write_completes_when_buffered_and_flush_waits_for_flash() {
    let mut m = ssd(64 * 1024);
    let done = m.submit(T0, &req(IoKind::Write, 0, 4096));
    assert_eq!(done, T0 + CONTROLLER_NS + HOST_NS);
    let t1 = done;
    let flushed = m.submit(t1, &req(IoKind::Flush, 0, 0));
    assert_eq!(
        flushed,
        T0 + CONTROLLER_NS + HOST_NS + CHANNEL_NS + PROGRAM_NS
    );
}

#[test]
fn a_full_buffer_makes_the_next_write_wait() {
    let mut m = ssd(4096);
    let first = m.submit(T0, &req(IoKind::Write, 0, 4096));
    assert_eq!(first, T0 + CONTROLLER_NS + HOST_NS);
    let programmed = first + CHANNEL_NS + PROGRAM_NS;
    let second = m.submit(T0, &req(IoKind::Write, 4096, 4096));
    assert_eq!(second, programmed + HOST_NS, "waits for the only slot");
}

#[test]
fn pages_on_two_channels_read_in_parallel() {
    let mut m = ssd(0);
    // Never-written pages 0 and 1 sit on die 0 (channel 0) and die 1
    // (channel 1); only the host link serialises them.
    let done = m.submit(T0, &req(IoKind::Read, 0, 8192));
    assert_eq!(
        done,
        T0 + CONTROLLER_NS + READ_NS + CHANNEL_NS + 2 * HOST_NS
    );
}

#[test]
fn pages_on_one_die_serialise() {
    let mut m = ssd(0);
    // Pages 0 and 2 both live on die 0: the second array read waits for
    // the first page to leave the register.
    let a = m.submit(T0, &req(IoKind::Read, 0, 4096));
    let b = m.submit(T0, &req(IoKind::Read, 2 * 4096, 4096));
    assert_eq!(a, T0 + CONTROLLER_NS + READ_NS + CHANNEL_NS + HOST_NS);
    assert_eq!(b, a - HOST_NS + READ_NS + CHANNEL_NS + HOST_NS);
}

fn ssd_with(buffer_bytes: u64, extras: ControllerExtras) -> SsdModel {
    ssd(buffer_bytes).with_extras(extras)
}

#[test]
fn cache_program_overlaps_a_transfer_with_the_dies_program() {
    // Pages 0 and 2 go to die 0, page 1 to die 1. Without cache program
    // page 2 crosses channel 0 only once die 0 has programmed page 0; with
    // it, while die 0 programs, and its program follows at once.
    let write = req(IoKind::Write, 0, 3 * 4096);
    let mut plain = ssd(0);
    let done = plain.submit(T0, &write);
    assert_eq!(
        done,
        T0 + CONTROLLER_NS + HOST_NS + 2 * (CHANNEL_NS + PROGRAM_NS)
    );
    let mut cached = ssd_with(
        0,
        ControllerExtras {
            cache_program: true,
            ..ControllerExtras::default()
        },
    );
    let done = cached.submit(T0, &write);
    assert_eq!(
        done,
        T0 + CONTROLLER_NS + HOST_NS + CHANNEL_NS + 2 * PROGRAM_NS
    );
}

#[test]
fn random_writes_pay_per_page_and_a_stream_pays_once() {
    const PAGE_NS: u64 = 7_000;
    let mut m = ssd_with(
        64 * 1024,
        ControllerExtras {
            random_write_page_ns: PAGE_NS,
            ..ControllerExtras::default()
        },
    );
    let busy = |pages: u64| CONTROLLER_NS + pages * PAGE_NS;
    // A first 8 KB write is random: two pages of upkeep.
    let t1 = m.submit(T0, &req(IoKind::Write, 0, 8192));
    assert_eq!(t1, T0 + busy(2) + 2 * HOST_NS);
    // The next 8 KB continue it: one page of upkeep.
    let t2 = m.submit(t1, &req(IoKind::Write, 8192, 8192));
    assert_eq!(t2, t1 + busy(1) + 2 * HOST_NS);
    // A jump elsewhere is random again.
    let t3 = m.submit(t2, &req(IoKind::Write, 65536, 8192));
    assert_eq!(t3, t2 + busy(2) + 2 * HOST_NS);
    assert_describes(&m, "random_write_page_ns", "7000");
}

#[test]
fn stripe_units_put_a_units_pages_on_one_die() {
    let g = geometry();
    let ftl = ftl::page::PageFtl::new(&g, ftl::page::GcPolicy::Greedy)
        .unwrap()
        .with_stripe_pages(2);
    let mut m =
        SsdModel::with_ftl("t", g, timing(), FtlKind::PageGreedy, Box::new(ftl), 0).unwrap();
    // Never-written pages 0 and 1 form one unit on die 0: the second array
    // read waits for the first page to leave the register.
    let done = m.submit(T0, &req(IoKind::Read, 0, 8192));
    assert_eq!(
        done,
        T0 + CONTROLLER_NS + 2 * (READ_NS + CHANNEL_NS) + HOST_NS
    );
    // Written in order, a unit's pages share a die, the next unit the other.
    let t = m.submit(done, &req(IoKind::Write, 0, 4 * 4096));
    assert!(t > done);
    let pages_per_die = 16 * 8;
    let dies: Vec<u64> = (0..4)
        .map(|lpn| m.ftl().lookup(lpn).unwrap() / pages_per_die)
        .collect();
    assert_eq!(dies, vec![0, 0, 1, 1]);
    assert_describes(&m, "stripe_pages", "2");
}

#[test]
fn a_partial_page_write_reads_the_old_page_first() {
    let mut m = ssd(0);
    let t1 = m.submit(T0, &req(IoKind::Write, 0, 4096));
    // Page 0 is on die 0; its rewrite goes to die 1 (round-robin). The old
    // page is read on die 0 while the 512 host bytes arrive; then the
    // merged page crosses channel 1 and is programmed.
    let done = m.submit(t1, &req(IoKind::Write, 512, 512));
    assert_eq!(
        done,
        t1 + CONTROLLER_NS + READ_NS + CHANNEL_NS + CHANNEL_NS + PROGRAM_NS
    );
    let s = m.stats();
    assert_eq!(s.partial_page_writes, 1);
    assert_eq!(s.flash_pages_read, 1);
    // A partial write of a never-written page has nothing to merge.
    m.submit(done, &req(IoKind::Write, 8192, 512));
    assert_eq!(m.stats().partial_page_writes, 1);
}

#[test]
fn trim_forgets_whole_pages_only() {
    let mut m = ssd(0);
    let t = m.submit(T0, &req(IoKind::Write, 0, 8192));
    assert!(m.ftl().lookup(0).is_some() && m.ftl().lookup(1).is_some());
    let done = m.submit(t, &req(IoKind::Trim, 0, 4096 + 512));
    assert_eq!(done, t + CONTROLLER_NS);
    assert_eq!(m.ftl().lookup(0), None);
    assert!(m.ftl().lookup(1).is_some(), "a partly trimmed page stays");
    assert_eq!(m.stats().trims, 1);
}

/// The next value of the tests' linear congruential generator.
fn lcg(x: u64) -> u64 {
    x.wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407)
}

/// An unaligned request drawn from `x`: of kind
/// `kinds[(x >> kind_shift) % kinds.len()]`, 1 to 16 sectors long, at a
/// sector offset within `capacity`.
fn drawn_request(x: u64, kinds: &[IoKind], kind_shift: u32, capacity: u64) -> IoRequest {
    let kind = kinds[(x >> kind_shift) as usize % kinds.len()];
    let len = 512 * (1 + (x >> 40) % 16);
    let offset = ((x >> 8) % (capacity - len)) / 512 * 512;
    req(kind, offset, len)
}

#[test]
fn completions_never_precede_submissions() {
    let mut m = ssd(16 * 1024);
    let capacity = m.capacity_bytes();
    let mut now = 0;
    let mut x = 1u64;
    for i in 0..5_000u64 {
        x = lcg(x);
        let kinds = [IoKind::Read, IoKind::Write, IoKind::Write, IoKind::Trim];
        let r = drawn_request(x, &kinds, 60, capacity);
        check_request("t", capacity, SECTOR_BYTES, &r).unwrap();
        let done = m.submit(now, &r);
        assert!(done >= now, "MODEL-2");
        now += i % 7 * 10_000;
    }
    let s = m.stats();
    assert!(s.gc_runs > 0, "the run should reach GC");
    assert!(s.waf.unwrap() >= 1.0);
    assert!(s.wear_max >= s.wear_min && s.wear_mean > 0.0);
}

#[test]
fn prefetch_hints_change_no_completion() {
    let run = |hint: bool| {
        let mut m = ssd(16 * 1024);
        let capacity = m.capacity_bytes();
        let kinds = [IoKind::Read, IoKind::Write, IoKind::Write, IoKind::Trim];
        let mut x = 3u64;
        let mut next = drawn_request(x, &kinds, 60, capacity);
        let mut out = Vec::new();
        for i in 0..5_000u64 {
            x = lcg(x);
            let r = std::mem::replace(&mut next, drawn_request(x, &kinds, 60, capacity));
            if hint {
                m.prefetch(&next);
            }
            out.push(m.submit(i * 20_000, &r));
        }
        (out, m.stats().gc_runs)
    };
    let (hinted, gc_runs) = run(true);
    assert!(gc_runs > 0, "the run should reach GC");
    assert_eq!(hinted, run(false).0);
}

#[test]
fn runs_are_deterministic() {
    let run = || {
        let mut m = ssd(8192);
        let mut now = 0;
        let mut out = Vec::new();
        for i in 0..3_000u64 {
            let lpn = (i * 7919) % 40;
            let kind = if i % 3 == 0 {
                IoKind::Read
            } else {
                IoKind::Write
            };
            now = m.submit(now, &req(kind, lpn * 4096, 4096));
            out.push(now);
        }
        (out, m.stats())
    };
    assert_eq!(run(), run());
}

#[test]
fn impossible_geometries_are_refused() {
    let refused = |g: Geometry, t: Timing, buffer: u64| {
        matches!(
            SsdModel::new("bad", g, t, FtlKind::PageGreedy, buffer),
            Err(DeviceError::Geometry { .. })
        )
    };
    let mut g = geometry();
    g.channels = 0;
    assert!(refused(g, timing(), 0));
    let mut g = geometry();
    g.pages_per_block = 0;
    assert!(refused(g, timing(), 0), "a page larger than its erase unit");
    let mut g = geometry();
    g.page_bytes = 3000;
    assert!(refused(g, timing(), 0));
    let mut t = timing();
    t.host_bytes_per_s = 0;
    assert!(refused(geometry(), t, 0));
    assert!(refused(geometry(), timing(), 1024), "buffer below one page");
    assert!(refused(geometry(), timing(), WRITE_BUFFER_BYTES_MAX + 1));
    let mut g = geometry();
    g.blocks_per_plane = 2;
    assert!(refused(g, timing(), 0), "too few blocks for page mapping");
}

#[test]
fn describe_lists_every_parameter() {
    let m = ssd(0).with_sources(&[("channels", "test")]);
    let params = m.describe();
    let channels = params.iter().find(|p| p.name == "channels").unwrap();
    assert_eq!(
        (channels.value.as_str(), channels.source.as_str()),
        ("2", "test")
    );
    assert!(
        params
            .iter()
            .any(|p| p.name == "ftl" && p.value == "page-greedy")
    );
}

/// Two dies on one channel, sharing the channel and the host link.
fn shared_channel_ssd(extras: ControllerExtras) -> SsdModel {
    let g = Geometry {
        channels: 1,
        chips_per_channel: 2,
        ..geometry()
    };
    SsdModel::new("t", g, timing(), FtlKind::PageGreedy, 0)
        .unwrap()
        .with_extras(extras)
}

#[test]
fn a_read_to_an_idle_die_is_not_delayed_by_gc_on_another_die() {
    let mut m = shared_channel_ssd(ControllerExtras::default());
    let pages = m.capacity_bytes() / 4096;
    let mut t = T0;
    for lpn in 0..pages {
        t = m.submit(t, &req(IoKind::Write, lpn * 4096, 4096)) + 1;
    }
    let mut x = 12_345u64;
    let mut checked = 0;
    for _ in 0..20_000 {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let lpn = (x >> 33) % pages;
        let gc_before = m.stats().gc_runs;
        let written = m.submit(t, &req(IoKind::Write, lpn * 4096, 4096));
        let ran_gc = m.stats().gc_runs > gc_before;
        // A die idle at `t` while the write waits for garbage collection.
        let idle = (0..2).find(|&d| m.lines.die[d].tail() <= t);
        let target = idle
            .and_then(|d| (0..pages).find(|&l| m.ftl.lookup(l).is_some_and(|p| m.die_of(p) == d)));
        if let (true, Some(read_lpn)) = (ran_gc, target) {
            assert!(
                written - t > 1_000_000,
                "the write waited for GC (an erase alone is 1 ms)"
            );
            let read = m.submit(t, &req(IoKind::Read, read_lpn * 4096, 4096));
            // Behind the write's command, then an idle die, channel and link.
            assert_eq!(
                read,
                t + 2 * CONTROLLER_NS + READ_NS + CHANNEL_NS + HOST_NS,
                "a read to an idle die waited for GC on the other die"
            );
            assert!(read < written);
            checked += 1;
        }
        t = written.max(t) + 1;
    }
    assert!(
        checked > 10,
        "only {checked} GC writes had an idle other die"
    );
}

#[test]
fn with_reads_first_a_read_takes_a_gap_before_queued_work_on_its_die() {
    for reads_first in [false, true] {
        let mut m = shared_channel_ssd(ControllerExtras {
            reads_first,
            ..ControllerExtras::default()
        });
        let t1 = m.submit(T0, &req(IoKind::Write, 0, 4096));
        let die = m.die_of(m.ftl.lookup(0).unwrap());
        // A program queued on the die, due to start 1 ms from now (as one
        // waiting for its channel or for the write buffer would be).
        let t = t1 + 1;
        m.die_reserve(die, t + 1_000_000, t + 1_000_000 + PROGRAM_NS);
        let read = m.submit(t, &req(IoKind::Read, 0, 4096));
        let idle = t + CONTROLLER_NS + READ_NS + CHANNEL_NS + HOST_NS;
        if reads_first {
            assert_eq!(read, idle, "the read fits in the gap before the program");
        } else {
            assert_eq!(
                read,
                t + 1_000_000 + PROGRAM_NS + READ_NS + CHANNEL_NS + HOST_NS,
                "in order, the read waits for the queued program"
            );
        }
    }
}

/// An SSD whose controller reads ahead four pages.
fn reading_ahead_4() -> SsdModel {
    ssd_with(
        0,
        ControllerExtras {
            read_ahead_pages: 4,
            ..ControllerExtras::default()
        },
    )
}

#[test]
fn read_ahead_serves_a_streams_next_request_from_controller_ram() {
    let mut m = reading_ahead_4();
    let r1 = m.submit(T0, &req(IoKind::Read, 0, 16384));
    // The second request continues the first: it reads ahead the next four
    // pages while its own cross the link.
    let r2 = m.submit(r1, &req(IoKind::Read, 16384, 16384));
    assert!(r2 - r1 > CONTROLLER_NS + READ_NS + CHANNEL_NS);
    let t = r2 + 1_000_000;
    let r3 = m.submit(t, &req(IoKind::Read, 32768, 16384));
    assert_eq!(r3, t + CONTROLLER_NS + 4 * HOST_NS, "host transfers only");
    // A write forgets what was read ahead.
    let mut m = reading_ahead_4();
    let r1 = m.submit(T0, &req(IoKind::Read, 0, 16384));
    let r2 = m.submit(r1, &req(IoKind::Read, 16384, 16384));
    let w = m.submit(r2, &req(IoKind::Write, 1 << 20, 4096));
    let t = w + 1_000_000;
    let r3 = m.submit(t, &req(IoKind::Read, 32768, 16384));
    assert!(r3 > t + CONTROLLER_NS + READ_NS + CHANNEL_NS);
}

/// `m` lists the parameter `name` with the value `value`.
fn assert_describes(m: &SsdModel, name: &str, value: &str) {
    let described = m.describe();
    let found = described.iter().any(|p| p.name == name && p.value == value);
    assert!(found, "{name} = {value} is not described");
}

/// Flash counters of a mixed run: unaligned reads, writes (many partial,
/// so read-modify-writes) and trims, arriving faster than the device
/// serves writes so that GC runs and dies queue up.
fn mixed_run_counters(buffer_bytes: u64, extras: ControllerExtras) -> [u64; 9] {
    let mut m = ssd_with(buffer_bytes, extras);
    let capacity = m.capacity_bytes();
    let mut now = 0;
    let mut x = 49u64;
    for _ in 0..20_000u64 {
        x = lcg(x);
        let kinds = [
            IoKind::Read,
            IoKind::Write,
            IoKind::Write,
            IoKind::Read,
            IoKind::Trim,
        ];
        m.submit(now, &drawn_request(x, &kinds, 59, capacity));
        now += (x >> 20) % 150_000;
    }
    let s = m.stats();
    [
        s.host_pages_written,
        s.flash_pages_written,
        s.flash_pages_read,
        s.gc_runs,
        s.erases,
        s.partial_page_writes,
        s.wear_min,
        s.wear_max,
        s.waf.map_or(0, |w| (w * 1e9) as u64),
    ]
}

#[test]
fn rmw_booking_keeps_every_flash_counter() {
    let cached = ControllerExtras {
        cache_program: true,
        ..ControllerExtras::default()
    };
    let reads_first = ControllerExtras {
        reads_first: true,
        ..cached
    };
    // Host pages, flash pages written and read, GC runs, erases, partial
    // page writes, least and most erases of a block, WAF x 1e9: the values
    // of the booking that put every program at its die's tail.
    let expected = [
        15650,
        31249,
        43095,
        3878,
        3878,
        11651,
        110,
        134,
        1_996_741_214,
    ];
    assert_eq!(mixed_run_counters(0, ControllerExtras::default()), expected);
    assert_eq!(mixed_run_counters(16 * 1024, cached), expected);
    assert_eq!(mixed_run_counters(16 * 1024, reads_first), expected);
}

#[test]
fn a_read_modify_write_waiting_on_a_busy_die_does_not_hold_up_its_program_die() {
    const BUSY_NS: u64 = 2_000_000;
    for cache_program in [false, true] {
        let g = geometry();
        let ftl = ftl::page::PageFtl::new(&g, ftl::page::GcPolicy::Greedy)
            .unwrap()
            .with_stripe_pages(2);
        let mut m = SsdModel::with_ftl("t", g, timing(), FtlKind::PageGreedy, Box::new(ftl), 0)
            .unwrap()
            .with_extras(ControllerExtras {
                cache_program,
                ..ControllerExtras::default()
            });
        // Page 0 on die 0; then die 0 busy for 2 ms (as with GC).
        let t = m.submit(T0, &req(IoKind::Write, 0, 4096)) + 1;
        assert_eq!(m.die_of(m.ftl.lookup(0).unwrap()), 0);
        m.die_reserve(0, t, t + BUSY_NS);
        // Rewriting 512 bytes of page 0 reads it on die 0 once die 0 is
        // free; the merged page goes to die 1 (channel 1).
        let rmw = m.submit(t, &req(IoKind::Write, 512, 512));
        assert_eq!(m.die_of(m.ftl.lookup(0).unwrap()), 1);
        // Page 1 continues page 0's stripe unit: die 1 too.
        let full = m.submit(t, &req(IoKind::Write, 4096, 4096));
        assert_eq!(m.die_of(m.ftl.lookup(1).unwrap()), 1);
        assert_eq!(
            full,
            t + 2 * CONTROLLER_NS + HOST_NS + CHANNEL_NS + PROGRAM_NS,
            "the full-page write waited for the read-modify-write's program"
        );
        assert_eq!(
            rmw,
            t + BUSY_NS + READ_NS + CHANNEL_NS + CHANNEL_NS + PROGRAM_NS
        );
    }
}

#[test]
fn a_program_never_starts_before_an_erase_booked_on_its_die() {
    let mut m = ssd(0);
    let t = T0;
    // An erase of block 16 (die 1) from t + 1 ms, then a page for die 1
    // whose data is ready at t: it follows the erase.
    let erased = m.flash_erase(16, t + 1_000_000);
    assert_eq!(erased, t + 2_000_000);
    let done = m.flash_program(16 * 8, t);
    assert_eq!(done, erased + CHANNEL_NS + PROGRAM_NS);
    // A merged page ready after the erase is booked at its time, and a
    // page queued after it with earlier data runs before it.
    let merged = m.flash_program_merged(16 * 8 + 1, done + 1_000_000);
    assert_eq!(merged, done + 1_000_000 + CHANNEL_NS + PROGRAM_NS);
    let queued = m.flash_program(16 * 8 + 2, done);
    assert_eq!(queued, done + CHANNEL_NS + PROGRAM_NS);
}
