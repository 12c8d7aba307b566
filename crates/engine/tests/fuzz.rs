//! Fuzzing the engine's decoders with proptest: pages (`page::verify`),
//! B+tree nodes (every `BTree` operation on garbage pages), log records
//! (`LogRecord::decode`, and the log reader over a garbage device), the
//! master record, the manifest, and recovery over a damaged log. Malformed
//! input gives an error, never a panic; damage a checksum covers is always
//! caught. A short run (a few hundred cases each) is part of the tests; set
//! `PROPTEST_CASES` for a longer one.

use std::ops::Bound;
use std::sync::Arc;

use flashlab_devices::Device;
use flashlab_devices::DeviceRef;
use flashlab_devices::memory::MemoryDevice;
use flashlab_engine::btree::BTree;
use flashlab_engine::btree::testing::MemPages;
use flashlab_engine::db::dir::Manifest;
use flashlab_engine::page::{self, PAGE_BODY_OFFSET, PageId, PageType};
use flashlab_engine::wal::record::{ActiveTxn, PageRedo, Undo};
use flashlab_engine::wal::{Body, LogLayout, LogReader, LogRecord, Master};
use flashlab_engine::{Database, DbConfig, Devices, TableSpec};
use flashlab_runtime::{Sim, SimConfig};
use proptest::prelude::*;

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

/// A log record of any kind, with plausible contents.
fn record() -> impl Strategy<Value = LogRecord> {
    let redo = || {
        prop::collection::vec(
            (
                0u32..4,
                0u32..64,
                prop::collection::vec((0u32..4096, bytes(40)), 0..4),
                any::<bool>(),
            )
                .prop_map(|(space, page, ranges, image)| PageRedo {
                    page: PageId::new(space, page),
                    image,
                    ranges,
                }),
            0..3,
        )
        .boxed()
    };
    let undo = prop::option::of(
        (0u32..4, 0u32..64, bytes(30), prop::option::of(bytes(60))).prop_map(
            |(space, root, key, before)| Undo {
                space,
                root,
                key,
                before,
            },
        ),
    );
    let body = prop_oneof![
        (undo, redo()).prop_map(|(undo, redo)| Body::Update { undo, redo }),
        (any::<u64>(), redo()).prop_map(|(undo_next, redo)| Body::Compensation { undo_next, redo }),
        any::<u64>().prop_map(|commit_ts| Body::Commit { commit_ts }),
        Just(Body::Abort),
        Just(Body::CheckpointBegin),
        (any::<u32>(), any::<u64>())
            .prop_map(|(space, from_lsn)| Body::Restart { space, from_lsn }),
        (any::<u32>(), prop::collection::vec(any::<u32>(), 0..8))
            .prop_map(|(space, pages)| Body::Unlogged { space, pages }),
        (
            any::<u64>(),
            any::<u64>(),
            prop::collection::vec((any::<u64>(), any::<u64>(), any::<u64>()), 0..4),
            prop::collection::vec((0u32..4, any::<u32>(), any::<u64>()), 0..4)
        )
            .prop_map(|(begin_lsn, next_txn, active, dirty)| Body::CheckpointEnd {
                begin_lsn,
                next_txn,
                next_commit_ts: next_txn / 2,
                pending_lsn: begin_lsn / 2,
                active: active
                    .into_iter()
                    .map(|(txn, last_lsn, undo_next)| ActiveTxn {
                        txn,
                        last_lsn,
                        undo_next,
                    })
                    .collect(),
                dirty: dirty
                    .into_iter()
                    .map(|(s, p, l)| (PageId::new(s, p), l))
                    .collect(),
            }),
    ];
    (any::<u64>(), any::<u64>(), body).prop_map(|(txn, prev_lsn, body)| LogRecord {
        lsn: 0,
        txn,
        prev_lsn,
        body,
    })
}

/// Recompute a record's checksum after tampering, so the body decoder
/// itself is exercised.
fn reseal(bytes: &mut [u8]) {
    if bytes.len() >= 8 {
        let crc = crc32c::crc32c(&bytes[8..]);
        bytes[4..8].copy_from_slice(&crc.to_le_bytes());
    }
}

/// A sealed page with random contents.
fn sealed_page(page_bytes: usize, id: PageId, fill: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; page_bytes];
    for (i, b) in p[PAGE_BODY_OFFSET..].iter_mut().enumerate() {
        *b = fill.get(i % fill.len().max(1)).copied().unwrap_or(0);
    }
    page::set_id(&mut p, id);
    page::set_lsn(&mut p, 4096 + u64::from(id.page_no));
    page::set_page_type(&mut p, PageType::BTreeLeaf);
    page::seal(&mut p);
    p
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// `page::verify` on bytes of any length and content never panics.
    #[test]
    fn page_verify_never_panics(raw in prop_oneof![bytes(40), bytes(5000)], space in any::<u32>(), page_no in any::<u32>()) {
        let _ = page::verify(&raw, PageId::new(space, page_no), "fuzz", 0);
    }

    /// Every single-bit flip of a sealed page is caught by its checksum;
    /// the image of another page is caught by its id.
    #[test]
    fn every_flip_and_misplaced_page_is_caught(
        fill in bytes(64),
        page_no in 1u32..1000,
        bit in any::<prop::sample::Index>(),
    ) {
        let id = PageId::new(0, page_no);
        let good = sealed_page(4096, id, &fill);
        prop_assert!(page::verify(&good, id, "fuzz", 0).is_ok());
        let mut bad = good.clone();
        let bit = bit.index(bad.len() * 8);
        bad[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(page::verify(&bad, id, "fuzz", 0).is_err());
        prop_assert!(page::verify(&good, PageId::new(0, page_no + 1), "fuzz", 0).is_err());
    }

    /// Every B+tree operation on a space of garbage pages (some with
    /// plausible node headers) gives a result or an error, never a panic.
    #[test]
    fn btree_on_garbage_pages_never_panics(
        pages in prop::collection::vec((bytes(2048), any::<bool>(), 0u16..60, 0u16..4, 0u32..2100), 2..6),
        key in bytes(20),
        root in 0u32..6,
    ) {
        let raw: Vec<Vec<u8>> = pages
            .into_iter()
            .map(|(mut p, plausible, count, level, free)| {
                p.resize(2048, 0);
                if plausible {
                    p[20] = 2 + (level % 2) as u8;
                    p[24..26].copy_from_slice(&count.to_le_bytes());
                    p[26..28].copy_from_slice(&level.to_le_bytes());
                    p[28..32].copy_from_slice(&free.to_le_bytes());
                }
                p
            })
            .collect();
        let mut space = MemPages::from_raw(2048, raw).unwrap();
        let tree = BTree::open(root);
        let _ = tree.check(&mut space);
        let _ = tree.get(&mut space, &key);
        let _ = tree.scan(&mut space, Bound::Included(key.as_slice()), Bound::Unbounded, |_, _| Ok(true));
        let _ = tree.insert(&mut space, &key, &[7; 90]);
        let _ = tree.delete(&mut space, &key);
        let _ = tree.scan(&mut space, Bound::Unbounded, Bound::Unbounded, |_, _| Ok(true));
    }

    /// A valid record round-trips; the same record with its bytes changed
    /// (and its checksum recomputed, so the body decoder sees the damage),
    /// cut short or extended never makes the decoder panic.
    #[test]
    fn mutated_log_records_never_panic(
        record in record(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
        lsn in 4096u64..1 << 40,
    ) {
        let encoded = record.encode(lsn);
        let decoded = LogRecord::decode(&encoded, lsn).unwrap();
        prop_assert_eq!(&decoded.body, &record.body);
        let mut bad = encoded.clone();
        for (at, b) in &edits {
            let i = at.index(bad.len());
            if i >= 8 {
                bad[i] = *b;
            }
        }
        reseal(&mut bad);
        let _ = LogRecord::decode(&bad, lsn);
        let short = &bad[..cut.index(bad.len())];
        let _ = LogRecord::decode(short, lsn);
        let mut long = bad.clone();
        long.extend_from_slice(&[0xAB; 9]);
        let _ = LogRecord::decode(&long, lsn);
    }

    /// Any single-bit flip in a record is caught (its checksum, or its
    /// length or position).
    #[test]
    fn every_flip_in_a_log_record_is_caught(record in record(), bit in any::<prop::sample::Index>()) {
        let encoded = record.encode(8192);
        let mut bad = encoded.clone();
        let bit = bit.index(bad.len() * 8);
        bad[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(LogRecord::decode(&bad, 8192).is_err());
    }

    /// The master record: garbage never panics; a flipped bit never yields
    /// another valid master record.
    #[test]
    fn master_record_decoding(raw in bytes(600), sequence in any::<u64>(), checkpoint in any::<u64>(), salt in any::<u32>(), bit in any::<prop::sample::Index>()) {
        let _ = Master::decode(&raw);
        let master = Master { sequence, checkpoint_lsn: checkpoint, start_lsn: checkpoint / 2, salt, sector_bytes: 512, database_id: 9, capacity_bytes: 1 << 20 };
        let mut sector = master.encode(512);
        prop_assert_eq!(Master::decode(&sector).unwrap(), Some(master));
        let bit = bit.index(512 * 8);
        sector[bit / 8] ^= 1 << (bit % 8);
        // Caught (no valid copy), or a flip in the zero padding, which the
        // checksum covers too: never another valid master record.
        if let Ok(Some(other)) = Master::decode(&sector) {
            prop_assert_eq!(other, master);
        }
    }

    /// The log reader over a device of garbage ends the log or reports
    /// damage, and never panics; so does the look past the end.
    #[test]
    fn log_reader_over_garbage_never_panics(raw in bytes(20_000), start in 0u64..4, salt in 0u32..3) {
        let device = MemoryDevice::new("log", 64 << 10);
        let mut padded = raw.clone();
        padded.resize(raw.len().div_ceil(512) * 512, 0);
        device.write(4096, &padded).unwrap();
        let device: DeviceRef = Arc::new(device);
        let layout = LogLayout::for_device("log", 64 << 10, 512, salt).unwrap();
        let mut reader = LogReader::new(device, layout, layout.sector_lsn(1 + start), None);
        let mut n = 0;
        while let Ok(Some(_)) = reader.next_record() {
            n += 1;
            prop_assert!(n < 10_000);
        }
        let _ = reader.check_beyond_end(1000);
    }
}

/// The manifest: any text, and a valid manifest with bytes changed, is read
/// as a manifest or refused with an error.
#[test]
fn manifest_read_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let valid = toml::to_string(&Manifest::for_config(&DbConfig::simple(
        "file",
        "file",
        8192,
        1 << 20,
    )))
    .unwrap();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 200,
        ..ProptestConfig::default()
    });
    let strategy = (
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..5),
        "\\PC{0,200}",
        any::<bool>(),
    );
    runner
        .run(&strategy, |(edits, text, mangle)| {
            let content = if mangle {
                let mut b = valid.as_bytes().to_vec();
                for (at, v) in edits {
                    let i = at.index(b.len());
                    b[i] = v;
                }
                b
            } else {
                text.into_bytes()
            };
            std::fs::write(dir.path().join("flashlab.manifest"), content).unwrap();
            let _ = Manifest::read(dir.path());
            Ok(())
        })
        .unwrap();
}

/// The rows the fuzzed database committed: key `i`, value 40 bytes of `i`.
const FUZZ_ROWS: u32 = 50;

/// An error that names damage: what a refused open over a damaged log
/// must be (never "not a database", never an invariant's panic).
fn names_damage(e: &flashlab_engine::Error) -> bool {
    use flashlab_engine::Error;
    matches!(
        e,
        Error::LogDamaged { .. }
            | Error::Damaged(_)
            | Error::Corruption { .. }
            | Error::Malformed { .. }
    )
}

/// Open the damaged database and judge the outcome: every committed row
/// present with its value and `verify` clean, or a refusal naming the
/// damage. Anything else is the failure, as text.
fn judge_damaged_open(config: &DbConfig, devices: Devices) -> Result<(), String> {
    let db = match Database::open_with(config, devices) {
        Ok(db) => db,
        Err(e) if names_damage(&e) => return Ok(()),
        Err(e) => return Err(format!("refused without naming damage: {e}")),
    };
    let t = db.table("t").map_err(|e| format!("table lost: {e}"))?;
    let mut txn = db.begin().map_err(|e| e.to_string())?;
    for i in 0..FUZZ_ROWS {
        match txn.get(&t, &i.to_be_bytes()) {
            Ok(Some(v)) if v == [i as u8; 40] => {}
            Err(e) if names_damage(&e) => return Ok(()),
            other => return Err(format!("row {i} after recovery: {other:?}")),
        }
    }
    txn.commit().map_err(|e| e.to_string())?;
    let report = flashlab_engine::db::verify::verify(&db).map_err(|e| e.to_string())?;
    match report.ok() {
        true => Ok(()),
        false => Err(format!("verify: {:?}", report.problems)),
    }
}

/// Recovery over a log damaged after its durable records (garbage where the
/// log continues) or in the middle: every committed row survives, or the
/// open refuses naming the damage; never a panic, never a silent loss.
#[test]
fn recovery_over_a_damaged_log_keeps_every_commit_or_names_the_damage() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 24,
        ..ProptestConfig::default()
    });
    let strategy = (bytes(3000), 0u64..40_000, any::<bool>());
    runner
        .run(&strategy, |(garbage, at, reseal_record)| {
            let data = Arc::new(MemoryDevice::new("data", 16 << 20));
            let log = Arc::new(MemoryDevice::new("log", 16 << 20));
            let devices = Devices {
                data: vec![data.clone() as DeviceRef],
                log: log.clone() as DeviceRef,
                rollback: None,
                temp: None,
            };
            let config = DbConfig::simple("memory", "memory", 4096, 64 * 4096);
            let d = devices.clone();
            let c = config.clone();
            Sim::run(SimConfig::default(), move |_| {
                let db = Database::open_with(&c, d).unwrap();
                let t = db.create_table(TableSpec::bytes("t")).unwrap();
                let mut txn = db.begin().unwrap();
                for i in 0..FUZZ_ROWS {
                    txn.put(&t, &i.to_be_bytes(), &[i as u8; 40]).unwrap();
                }
                txn.commit().unwrap();
                db.abandon();
            })
            .unwrap();
            // Damage the log at a sector boundary from 4096 + `at`.
            let offset = 4096 + at / 512 * 512;
            let mut damaged = garbage.clone();
            damaged.resize(garbage.len().div_ceil(512).max(1) * 512, 0);
            if reseal_record && damaged.len() >= 33 {
                let len = damaged.len() as u32;
                damaged[0..4].copy_from_slice(&len.to_le_bytes());
                damaged[8..16].copy_from_slice(&offset.to_le_bytes());
                reseal(&mut damaged);
            }
            log.write(offset, &damaged).unwrap();
            let outcome = Sim::run(SimConfig::default(), move |_| {
                judge_damaged_open(&config, devices)
            })
            .map_err(|e| TestCaseError::fail(format!("the simulation failed: {e:?}")))?
            .0
            .finished()
            .ok_or_else(|| TestCaseError::fail("the open did not finish"))?;
            outcome.map_err(|problem| {
                TestCaseError::fail(format!("damage at log offset {offset}: {problem}"))
            })
        })
        .unwrap();
}

/// Found by the fuzz test above: a non-zero input shorter than a page
/// header made `page::verify` index past its end (a panic).
#[test]
fn regression_short_page_is_an_error_not_a_panic() {
    for len in [1usize, 3, 4, 12, 23] {
        assert!(page::verify(&vec![1u8; len], PageId::new(0, 1), "fuzz", 0).is_err());
    }
}
