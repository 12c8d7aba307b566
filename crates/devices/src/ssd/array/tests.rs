//! Array tests: the controller's command, data-path and cache costs on
//! single requests against sums done by hand, over members that take a
//! fixed time per request.

use super::*;
use crate::model::testing::FixedLatency;

const US: u64 = 1_000;
const UNIT: u64 = 16 * 1024;
const MEMBER_NS: u64 = 300 * US;
const T0: u64 = 1_000_000;

/// 4 members; 1 GB/s paths (16 KB in 16,384 ns); 10 us per read
/// command, 40 per write, 10 per appended write; a 1 MB cache; writes
/// stream at 0.5 GB/s per command and are acknowledged 20 us after their
/// last byte; one stripe (64 KB) of read-ahead.
fn config() -> ArrayConfig {
    ArrayConfig {
        stripe_unit_bytes: UNIT,
        read_bytes_per_s: 1_000_000_000,
        write_bytes_per_s: 1_000_000_000,
        read_command_ns: 10 * US,
        write_command_ns: 40 * US,
        cache_bytes: 1 << 20,
        write_append_command_ns: 10 * US,
        write_stream_bytes_per_s: 500_000_000,
        write_latency_ns: 20 * US,
        read_ahead_bytes: 4 * UNIT,
    }
}

fn array(config: ArrayConfig) -> ArrayModel {
    let members = (0..4)
        .map(|_| {
            // Serves one request at a time in `MEMBER_NS`, counting them.
            Box::new(FixedLatency::serial(MEMBER_NS)) as Box<dyn DeviceModel>
        })
        .collect();
    ArrayModel::new("a", config, members).unwrap()
}

fn req(kind: IoKind, offset_bytes: u64, len_bytes: u64) -> IoRequest {
    IoRequest {
        kind,
        offset_bytes,
        len_bytes,
    }
}

/// Nanoseconds for 16 KB at the path rate and at the stream rate.
const PATH_NS: u64 = 16_384;
const STREAM_NS: u64 = 32_768;

#[test]
fn a_cached_write_streams_at_its_own_rate_then_commits() {
    let mut a = array(config());
    // Two units: the stream (0.5 GB/s) is slower than the path (1 GB/s).
    let done = a.submit(T0, &req(IoKind::Write, 0, 2 * UNIT));
    assert_eq!(done, T0 + 40 * US + 2 * STREAM_NS + 20 * US);
    // Without a stream limit the path sets the pace.
    let mut a = array(ArrayConfig {
        write_stream_bytes_per_s: 0,
        ..config()
    });
    let done = a.submit(T0, &req(IoKind::Write, 0, 2 * UNIT));
    assert_eq!(done, T0 + 40 * US + 2 * PATH_NS + 20 * US);
}

#[test]
fn a_write_that_continues_the_last_one_is_appended() {
    let mut a = array(config());
    let first = a.submit(T0, &req(IoKind::Write, 0, 8192));
    assert_eq!(first, T0 + 40 * US + STREAM_NS / 2 + 20 * US);
    // Submitted at once: waits for the first command, then pays the
    // append cost only.
    let second = a.submit(T0, &req(IoKind::Write, 8192, 8192));
    assert_eq!(second, T0 + 40 * US + 10 * US + STREAM_NS / 2 + 20 * US);
    // A jump pays the full command again.
    let third = a.submit(T0, &req(IoKind::Write, 10 * UNIT, 8192));
    assert_eq!(
        third,
        T0 + 40 * US + 10 * US + 40 * US + STREAM_NS / 2 + 20 * US
    );
}

#[test]
fn a_read_stream_is_served_by_read_ahead() {
    let mut a = array(config());
    let reads = |a: &ArrayModel| a.stats().reads;
    // The first read is random: one member read.
    let t1 = a.submit(T0, &req(IoKind::Read, 0, UNIT));
    assert_eq!(t1, T0 + 10 * US + MEMBER_NS + PATH_NS);
    assert_eq!(reads(&a), 1);
    // The second continues it: its own unit, then a stripe (4 units) ahead.
    let t2 = a.submit(t1, &req(IoKind::Read, UNIT, UNIT));
    assert_eq!(reads(&a), 1 + 1 + 4);
    // The third was read ahead at t2's command: no member read of its own,
    // and it completes when that fetch does.
    let t3 = a.submit(t2, &req(IoKind::Read, 2 * UNIT, UNIT));
    assert_eq!(reads(&a), 6 + 1, "one more unit ahead, none for itself");
    assert_eq!(
        t3,
        (t1 + 10 * US + MEMBER_NS + PATH_NS).max(t2 + 10 * US + PATH_NS)
    );
    // A random read ends the stream; a write drops what was fetched.
    let t4 = a.submit(t3, &req(IoKind::Read, 100 * UNIT, UNIT));
    assert_eq!(reads(&a), 8);
    let t5 = a.submit(t4, &req(IoKind::Read, 101 * UNIT, UNIT));
    assert_eq!(reads(&a), 8 + 1 + 4);
    let t6 = a.submit(t5, &req(IoKind::Write, 102 * UNIT, UNIT));
    a.submit(t6, &req(IoKind::Read, 102 * UNIT, UNIT));
    // Still a stream, but unit 102 comes from its member again and the
    // four units after it are fetched anew (without the write: one unit).
    assert_eq!(reads(&a), 13 + 1 + 4);
    assert!(a.describe().iter().any(|p| p.name == "read_ahead_bytes"));
}

#[test]
fn without_read_ahead_every_piece_goes_to_its_member() {
    let mut a = array(ArrayConfig {
        read_ahead_bytes: 0,
        ..config()
    });
    let mut t = T0;
    for i in 0..4 {
        t = a.submit(t, &req(IoKind::Read, i * UNIT, UNIT));
    }
    assert_eq!(a.stats().reads, 4);
}
