//! Hand-computed timings of the disk model.
//!
//! hdd-2008 numbers used throughout: a revolution is 8,333,333 ns; a track
//! holds 110 MB/s * (8,333,333 + 800,000) ns / 512 = 1962 sectors (the
//! sustained rate includes one 0.8 ms track switch per revolution); slot `k`
//! starts at `floor(k * 8,333,333 / 1962)` ns into a revolution, so
//! `slot_ns(8) = floor(33,978.9) = 33,978` and
//! `slot_ns(16) = floor(67,957.9) = 67,957`; the track skew is
//! `ceil(800,000 * 1962 / 8,333,333) + 1 = 189 + 1 = 190` slots and the
//! track-to-track seek 0.8 ms.

use super::*;

const KB4: u64 = 4096;
const ROTATION_NS: u64 = 8_333_333;

fn write(offset_bytes: u64, len_bytes: u64) -> IoRequest {
    IoRequest {
        kind: IoKind::Write,
        offset_bytes,
        len_bytes,
    }
}

fn read(offset_bytes: u64, len_bytes: u64) -> IoRequest {
    IoRequest {
        kind: IoKind::Read,
        ..write(offset_bytes, len_bytes)
    }
}

fn flush() -> IoRequest {
    IoRequest {
        kind: IoKind::Flush,
        ..write(0, 0)
    }
}

fn disk_2008() -> HddModel {
    HddModel::hdd_2008().unwrap()
}

#[test]
fn hdd_sequential_write_right_after_the_previous_waits_nothing() {
    let mut disk = disk_2008();
    // Head on track 0 at phase 0: sector 0 is under it; 8 sectors pass in
    // slot_ns(8) = 33,978 ns.
    assert_eq!(disk.submit(0, &write(0, KB4)), 33_978);
    // The next 4 KB starts at slot 8, exactly where the platter now is, and
    // ends at slot_ns(16) = 67,957 ns.
    assert_eq!(disk.submit(33_978, &write(KB4, KB4)), 67_957);
    assert_eq!(disk.stats().rotation_ns_total, 0);
    assert_eq!(disk.stats().seek_ns_total, 0);
}

#[test]
fn hdd_rewriting_the_sector_just_passed_waits_almost_a_revolution() {
    let mut disk = disk_2008();
    assert_eq!(disk.submit(0, &write(0, KB4)), 33_978);
    // Sector 0 passed 33,978 ns ago: wait 8,333,333 - 33,978 = 8,299,355 ns,
    // then transfer 33,978 ns: done one revolution + 33,978 ns after 0.
    let done = disk.submit(33_978, &write(0, KB4));
    assert_eq!(done, ROTATION_NS + 33_978);
    assert_eq!(disk.stats().rotation_ns_total, 8_299_355);
    assert!(disk.stats().rotation_ns_total > ROTATION_NS * 99 / 100);
}

#[test]
fn hdd_request_across_a_track_boundary_pays_the_switch() {
    let mut disk = disk_2008();
    // Sectors 1958..1961 of track 0 and 0..3 of track 1.
    let offset = 1958 * 512;
    let done = disk.submit(0, &read(offset, KB4));
    // Wait for slot 1958: floor(1958 * 8,333,333 / 1962) = 8,316,343 ns;
    // 4 sectors to the end of the track, 8,333,333 - 8,316,343 = 16,990 ns
    // (the head is back at phase 0); switch 800,000 ns; then track 1's
    // sector 0 sits at slot 190, floor(190 * 8,333,333 / 1962) = 806,999 ns
    // into the revolution: wait 806,999 - 800,000 = 6,999 ns; 4 sectors,
    // slot_ns(194) - slot_ns(190) = 823,989 - 806,999 = 16,990 ns.
    assert_eq!(done, 8_316_343 + 16_990 + 800_000 + 6_999 + 16_990);
    assert_eq!(done, 9_157_322);
    assert_eq!(disk.stats().seek_ns_total, 800_000);
    assert_eq!(disk.stats().rotation_ns_total, 8_316_343 + 6_999);
    assert_eq!(disk.head_track(), 1);
}

#[test]
fn hdd_seek_time_follows_the_curve() {
    let mut disk = disk_2008();
    let track = 100_000;
    let offset = track * 1962 * 512;
    let expected_seek = disk.seek_curve().seek_ns(track);
    let done = disk.submit(0, &read(offset, KB4));
    let stats = disk.stats();
    assert_eq!(stats.seek_ns_total, expected_seek);
    // Track 100,000's sector 0 is at slot 100,000 * 190 mod 1962
    // = 19,000,000 - 9,683 * 1962 = 1,954.
    let slot_ns = 1_954 * ROTATION_NS / 1962;
    let wait = (slot_ns + ROTATION_NS - expected_seek % ROTATION_NS) % ROTATION_NS;
    assert_eq!(stats.rotation_ns_total, wait);
    // 8 sectors from slot 1,954 run to slot 1,962, one revolution on:
    // slot_ns(1962) - slot_ns(1954) = 8,333,333 - floor(8,299,354.07)
    // = 33,979 ns (one more than slot_ns(8) = 33,978: slot starts are
    // rounded down to whole nanoseconds).
    let transfer = ROTATION_NS - slot_ns;
    assert_eq!(transfer, 33_979);
    assert_eq!(done, expected_seek + wait + transfer);
}

#[test]
fn hdd_queue_is_fifo() {
    let mut disk = disk_2008();
    let first = disk.submit(0, &write(0, KB4));
    // Arrives at 0 but the mechanism is busy until slot_ns(8) = 33,978; it
    // then streams on to slot_ns(16) = 67,957.
    let second = disk.submit(0, &write(KB4, KB4));
    assert_eq!(first, 33_978);
    assert_eq!(second, 67_957);
    assert_eq!(disk.busy_until_ns(), 67_957);
}

#[test]
fn hdd_flush_and_trim_without_cache() {
    let mut disk = disk_2008();
    let done = disk.submit(0, &write(0, KB4));
    assert_eq!(
        disk.submit(10, &flush()),
        done,
        "flush waits for outstanding work"
    );
    let trim = IoRequest {
        kind: IoKind::Trim,
        ..write(0, KB4)
    };
    assert_eq!(disk.submit(20, &trim), 20, "trim is a no-op");
    assert_eq!(disk.submit(done + 5, &flush()), done + 5);
    let stats = disk.stats();
    assert_eq!((stats.writes, stats.flushes, stats.trims), (1, 2, 1));
    assert_eq!(stats.bytes_written, KB4);
}

#[test]
fn hdd_write_cache_completes_at_interface_speed_and_flush_waits_for_destage() {
    let params = HddParams::hdd_2008().with_write_cache(true);
    let mut disk = HddModel::new("cached", params).unwrap();
    // 4096 bytes at 300 MB/s = 13,653 ns, before the platter write
    // (slot_ns(8) = 33,978).
    assert_eq!(disk.submit(0, &write(0, KB4)), 13_653);
    assert_eq!(disk.submit(13_653, &flush()), 33_978);
    // A read queues behind the destage (FIFO mechanism), then streams on
    // from slot 8 to slot_ns(16) = 67,957.
    assert_eq!(disk.submit(13_653, &read(KB4, KB4)), 67_957);
}

#[test]
fn hdd_write_cache_fills_then_writes_wait_for_destage() {
    let mut params = HddParams::hdd_2008().with_write_cache(true);
    params.write_cache_bytes = 2 * KB4;
    let mut disk = HddModel::new("small-cache", params).unwrap();
    // Three writes to the same sector: each destage waits a revolution.
    let a = disk.submit(0, &write(0, KB4));
    let b = disk.submit(a, &write(0, KB4));
    let c = disk.submit(b, &write(0, KB4));
    assert_eq!((a, b), (13_653, 27_306));
    // The third must wait for the first destage (slot_ns(8) = 33,978) to
    // free room, then crosses the interface in 13,653 ns.
    assert_eq!(c, 33_978 + 13_653);
    // Larger than the whole cache: written through.
    let big = disk.submit(c, &write(0, 4 * KB4));
    assert_eq!(big, disk.busy_until_ns());
}

#[test]
fn hdd_2010_writes_pay_the_settle() {
    let mut reader = HddModel::hdd_2010().unwrap();
    let mut writer = HddModel::hdd_2010().unwrap();
    // hdd-2010: 160 MB/s * (4 ms + 0.2 ms switch + 0.2 ms settle) / 512
    // = 1375 sectors a track; start of track 50,000.
    let offset = 50_000 * 1375 * 512;
    reader.submit(0, &read(offset, KB4));
    writer.submit(0, &write(offset, KB4));
    let settle = writer.stats().seek_ns_total - reader.stats().seek_ns_total;
    assert_eq!(settle, 200_000);
}

#[test]
fn hdd_new_refuses_impossible_disks() {
    let mut zero_rpm = HddParams::hdd_2008();
    zero_rpm.rpm = 0;
    let mut bad_seek = HddParams::hdd_2008();
    bad_seek.seek_ns_avg = 1_000_000; // below a third of the stroke
    let mut tiny = HddParams::hdd_2008();
    tiny.capacity_bytes = 512;
    for params in [zero_rpm, bad_seek, tiny] {
        let err = HddModel::new("bad", params).unwrap_err();
        assert!(matches!(err, DeviceError::Geometry { .. }), "{err}");
    }
}

#[test]
fn hdd_describe_gives_every_number_a_source() {
    let disk = disk_2008();
    let listing = disk.describe();
    for name in [
        "rpm",
        "seek_avg",
        "seek_full_stroke",
        "sectors_per_track",
        "seek_curve",
    ] {
        assert!(listing.iter().any(|p| p.name == name), "{name} missing");
    }
    assert!(
        listing
            .iter()
            .all(|p| !p.source.is_empty() && !p.value.is_empty())
    );
    let rpm = listing.iter().find(|p| p.name == "rpm").unwrap();
    assert!(rpm.source.contains("lee2008"));
}

#[test]
fn hdd_zero_length_requests_do_nothing() {
    let mut disk = disk_2008();
    assert_eq!(disk.submit(5, &read(0, 0)), 5);
    assert_eq!(
        disk.stats().seek_ns_total + disk.stats().rotation_ns_total,
        0
    );
}

/// lee2007's Barracuda 7200.7 (`[devices.hdd_seagate_7200_7]`): random 4 KB
/// reads in 12.7 ms and writes in 13.7 ms on average, write cache off,
/// within a quarter of the published figures (the report's rule).
#[test]
fn hdd_7200_7_matches_lee2007() {
    let mut disk = HddModel::hdd_7200_7().unwrap();
    let sectors = disk.capacity_bytes() / 512;
    let (mut now, mut x) = (0u64, 7u64);
    let mut mean_ms = |disk: &mut HddModel, kind: IoKind| {
        let mut total = 0u64;
        for _ in 0..2_000 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let offset_bytes = (x >> 20) % (sectors / 8) * KB4;
            let done = disk.submit(
                now,
                &IoRequest {
                    kind,
                    offset_bytes,
                    len_bytes: KB4,
                },
            );
            total += done - now;
            now = done;
        }
        total as f64 / 2_000.0 / 1e6
    };
    let read_ms = mean_ms(&mut disk, IoKind::Read);
    let write_ms = mean_ms(&mut disk, IoKind::Write);
    println!("hdd-seagate-7200-7: read {read_ms:.2} ms, write {write_ms:.2} ms");
    assert!((read_ms / 12.7 - 1.0).abs() < 0.25, "read {read_ms}");
    assert!((write_ms / 13.7 - 1.0).abs() < 0.25, "write {write_ms}");
    assert!(write_ms > read_ms, "writes settle longer");
}

/// lee2007's disk, 8 KB pages, and the host's work between two reads.
const KB8: u64 = 8192;
const HOST_GAP_NS: u64 = 200_000;

fn disk_7200_7(read_cache: bool) -> HddModel {
    let params = HddParams::hdd_7200_7();
    let params = if read_cache {
        params
    } else {
        params.without_read_cache()
    };
    HddModel::new("lee2007-disk", params).unwrap()
}

/// Read `offsets` one at a time, each `gap_ns` after the previous one
/// completed; the latencies, with the cache's invariants checked after each.
fn read_stream(disk: &mut HddModel, offsets: &[u64], gap_ns: u64) -> Vec<u64> {
    let mut now = 0;
    let mut latencies = Vec::new();
    for &offset in offsets {
        let done = disk.submit(now, &read(offset, KB8));
        disk.check_read_cache();
        latencies.push(done - now);
        now = done + gap_ns;
    }
    latencies
}

fn mean_ms(latencies: &[u64]) -> f64 {
    latencies.iter().sum::<u64>() as f64 / latencies.len() as f64 / 1e6
}

/// Pseudo-random 8 KB-aligned offsets over the first `span_bytes`.
fn random_offsets(count: usize, span_bytes: u64) -> Vec<u64> {
    let mut x = 11u64;
    (0..count)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 20) % (span_bytes / KB8) * KB8
        })
        .collect()
}

#[test]
fn hdd_read_cache_sequential_stream_with_host_gaps_hits() {
    let offsets: Vec<u64> = (0..200).map(|i| i * KB8).collect();
    let mut cached = disk_7200_7(true);
    let mut bare = disk_7200_7(false);
    let with = read_stream(&mut cached, &offsets, HOST_GAP_NS);
    let without = read_stream(&mut bare, &offsets, HOST_GAP_NS);
    // Every page after the first comes from the segment. Most were read
    // ahead while the host worked and cross ATA-100 in 81,920 ns; the read
    // after a full segment restarts the read-ahead and waits for the
    // platter, once a segment (16 pages).
    assert_eq!(cached.read_cache_hits(), 199);
    assert_eq!(cached.stats().read_cache_hits, 199);
    let at_interface = with[1..].iter().filter(|&&l| l == 81_920).count();
    assert!(at_interface >= 199 * 9 / 10, "{at_interface}");
    assert!(with.iter().all(|&l| l < ROTATION_NS + 200_000), "{with:?}");
    assert!(mean_ms(&with) < 1.0, "{}", mean_ms(&with));
    // Without the cache each page waits for the platter to come round.
    assert!(mean_ms(&without) > 5.0, "{}", mean_ms(&without));
    assert_eq!(bare.read_cache_hits(), 0);
}

#[test]
fn hdd_read_cache_back_to_back_stream_times_as_without_it() {
    // A request that arrives the instant its predecessor ended streams on
    // from the head's position either way: the read-ahead's walk is the
    // request's own, re-anchored exactly.
    let offsets: Vec<u64> = (0..3_000).map(|i| i * KB8).collect();
    let with = read_stream(&mut disk_7200_7(true), &offsets, 0);
    let without = read_stream(&mut disk_7200_7(false), &offsets, 0);
    assert_eq!(with, without);
}

#[test]
fn hdd_read_cache_near_sequential_stream_hits() {
    // Every other page: each read skips 8 KB forward, inside the segment
    // the read-ahead is filling (128 KB).
    let offsets: Vec<u64> = (0..200).map(|i| 2 * i * KB8).collect();
    let mut disk = disk_7200_7(true);
    let latencies = read_stream(&mut disk, &offsets, HOST_GAP_NS);
    assert_eq!(disk.read_cache_hits(), 199);
    assert!(mean_ms(&latencies[1..]) < 1.5, "{}", mean_ms(&latencies));
    let bare = read_stream(&mut disk_7200_7(false), &offsets, HOST_GAP_NS);
    assert!(mean_ms(&bare) > 5.0, "{}", mean_ms(&bare));
    // A forward gap larger than the segment is a miss.
    let far: Vec<u64> = (0..50).map(|i| i * 64 * KB8).collect();
    let mut disk = disk_7200_7(true);
    read_stream(&mut disk, &far, HOST_GAP_NS);
    assert_eq!(disk.read_cache_hits(), 0);
}

#[test]
fn hdd_read_cache_random_stream_misses_and_costs_as_without_it() {
    let offsets = random_offsets(2_000, 8 << 30);
    let mut cached = disk_7200_7(true);
    let with = read_stream(&mut cached, &offsets, HOST_GAP_NS);
    let without = read_stream(&mut disk_7200_7(false), &offsets, HOST_GAP_NS);
    assert!(
        cached.read_cache_hits() <= 2,
        "{}",
        cached.read_cache_hits()
    );
    let (a, b) = (mean_ms(&with), mean_ms(&without));
    // The read-ahead moves the head a track or so before the next seek.
    assert!((a / b - 1.0).abs() < 0.02, "with {a} without {b}");
    assert!(a > 5.0, "{a}");
}

#[test]
fn hdd_read_cache_write_into_a_cached_range_is_not_served_stale() {
    let mut disk = disk_7200_7(true);
    let first = disk.submit(0, &read(0, KB8));
    // Long after, the read-ahead has filled the segment: 64 KB is held.
    let later = first + 100 * ROTATION_NS;
    assert_eq!(disk.submit(later, &read(8 * KB8, KB8)), later + 81_920);
    assert_eq!(disk.read_cache_hits(), 1);
    let written = disk.submit(later + 1_000_000, &write(8 * KB8, KB8));
    disk.check_read_cache();
    // The write dropped the segment: the read goes to the platter, after
    // the write, and is no hit.
    let t = written + 10 * ROTATION_NS;
    let done = disk.submit(t, &read(8 * KB8, KB8));
    assert_eq!(disk.read_cache_hits(), 1);
    assert!(done - t > 81_920, "{}", done - t);
    // A write elsewhere leaves a segment alone.
    let t = done + 100 * ROTATION_NS;
    disk.submit(t, &write(1 << 30, KB8));
    let t = t + 100 * ROTATION_NS;
    assert_eq!(disk.submit(t, &read(9 * KB8, KB8)), t + 81_920);
    disk.check_read_cache();
}

#[test]
fn hdd_read_cache_segment_replacement_is_bounded_and_lru() {
    let segments = HddParams::hdd_7200_7().read_cache_segments as usize;
    let far = |i: u64| (i + 1) * (256 << 20);
    let mut disk = disk_7200_7(true);
    let mut now = disk.submit(0, &read(0, KB8));
    // As many other streams as there are other segments: page 0 stays.
    for i in 0..segments as u64 - 1 {
        now = disk.submit(now + HOST_GAP_NS, &read(far(i), KB8));
        disk.check_read_cache();
    }
    now = disk.submit(now + HOST_GAP_NS, &read(0, KB8));
    assert_eq!(disk.read_cache_hits(), 1);
    // One more stream than segments: the least recently used, far(0), goes.
    now = disk.submit(now + HOST_GAP_NS, &read(far(100), KB8));
    now = disk.submit(now + HOST_GAP_NS, &read(far(0), KB8));
    assert_eq!(disk.read_cache_hits(), 1);
    for offset in random_offsets(500, 64 << 30) {
        now = disk.submit(now + HOST_GAP_NS, &read(offset, KB8));
        disk.check_read_cache();
    }
    let held = disk
        .read_cache
        .segments()
        .iter()
        .filter(|s| s.first < s.end)
        .count();
    assert!(held <= segments, "{held}");
}

#[test]
fn hdd_read_cache_runs_are_deterministic() {
    let run = || {
        let mut disk = disk_7200_7(true);
        let mut offsets = random_offsets(300, 1 << 30);
        offsets.extend((0..300).map(|i| i * KB8));
        let mut now = 0;
        let mut out = Vec::new();
        for (i, offset) in offsets.into_iter().enumerate() {
            let req = if i % 7 == 0 {
                write(offset, KB8)
            } else {
                read(offset, KB8)
            };
            now = disk.submit(now + (i as u64 % 3) * HOST_GAP_NS, &req);
            out.push(now);
        }
        (out, disk.read_cache_hits())
    };
    assert_eq!(run(), run());
}

#[test]
fn hdd_describe_lists_the_read_cache_with_sources() {
    let listing = HddModel::hdd_7200_7().unwrap().describe();
    for name in ["read_cache_bytes", "read_cache_segments", "read_ahead"] {
        let p = listing.iter().find(|p| p.name == name).unwrap();
        assert!(!p.source.is_empty() && p.source != "user-given", "{name}");
    }
    let segments = listing
        .iter()
        .find(|p| p.name == "read_cache_segments")
        .unwrap();
    assert!(segments.source.starts_with("assumed"));
    let bytes = listing
        .iter()
        .find(|p| p.name == "read_segment_bytes")
        .unwrap();
    assert_eq!(bytes.value, (128 * 1024).to_string());
}
