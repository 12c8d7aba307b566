//! The simulated CPU charges the engine's own events at their prices:
//! each event's price shows in the cores' busy time exactly as often as
//! the engine counted the event.

use flashlab_engine::config::CpuCosts;
use flashlab_engine::{Database, DbConfig, Durability, TableSpec};
use flashlab_runtime::{Rt, Sim, SimConfig};

const ROWS: u32 = 4000;

/// Busy ns of the cores while reading every row once at `costs`, with
/// the page accesses, page reads and gets the engine counted. The busy
/// time is taken at the reading transaction's commit, with nothing settled
/// by hand: its statements must have charged every owed event.
fn read_all(costs: CpuCosts) -> (u64, u64, u64) {
    let (outcome, _) = Sim::run(SimConfig::default(), move |rt: Rt| {
        // A buffer far smaller than the table: reads miss.
        let mut config = DbConfig::simple("memory", "memory", 4096, 256 << 10);
        config.wal.durability = Durability::NoSync;
        // A page read ahead is claimed, and counted, without an access.
        config.read_ahead_bytes = 0;
        config.cpu = CpuCosts::free();
        let db = Database::open(&config).unwrap();
        let t = db.create_table(TableSpec::bytes("t")).unwrap();
        let mut txn = db.begin().unwrap();
        for i in 0..ROWS {
            txn.put(&t, &i.to_be_bytes(), &[1u8; 200]).unwrap();
        }
        txn.commit().unwrap();
        db.flush().unwrap();
        db.set_cpu_costs(costs);
        let before = (rt.cpu_report().core_busy_ns.iter().sum::<u64>(), db.stats());
        let mut txn = db.begin().unwrap();
        for i in 0..ROWS {
            txn.get(&t, &(i.wrapping_mul(7919) % ROWS).to_be_bytes())
                .unwrap();
        }
        txn.commit().unwrap();
        let busy = rt.cpu_report().core_busy_ns.iter().sum::<u64>() - before.0;
        let after = db.stats();
        let count = |s: &flashlab_engine::db::DbStats,
                     f: fn(&flashlab_engine::buffer::BufferStats) -> u64| {
            s.buffers.values().map(f).sum::<u64>()
        };
        let accesses =
            count(&after, |b| b.hits + b.misses) - count(&before.1, |b| b.hits + b.misses);
        let reads = count(&after, |b| b.reads) - count(&before.1, |b| b.reads);
        db.close().unwrap();
        (busy, accesses, reads)
    })
    .unwrap();
    outcome.finished().unwrap()
}

#[test]
fn each_event_is_charged_once_at_its_price() {
    let free = CpuCosts::free();
    let (busy, accesses, reads) = read_all(free.clone());
    assert_eq!(busy, 0, "free prices charge nothing");
    assert!(reads > u64::from(ROWS) / 2, "the reads miss: {reads}");
    let (busy, a, _) = read_all(CpuCosts {
        page_access_ns: 100,
        ..free.clone()
    });
    assert_eq!((busy, a), (100 * accesses, accesses));
    let (busy, _, r) = read_all(CpuCosts {
        page_io_ns: 1000,
        page_io_ns_per_kb: 256,
        ..free.clone()
    });
    assert_eq!(busy, r * (1000 + 4 * 256), "a 4 KB page read");
    let (busy, _, r) = read_all(CpuCosts {
        page_io_ns_per_kb: 256,
        ..free.clone()
    });
    assert_eq!(busy, r * 4 * 256, "bytes alone, the statements free");
    let (busy, _, _) = read_all(CpuCosts { get_ns: 7, ..free });
    assert_eq!(busy, 7 * u64::from(ROWS));
}
