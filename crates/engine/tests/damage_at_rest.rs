//! Damage at rest (issue 41): a database made by the engine in a directory,
//! closed or crashed, damaged by the test while no one has it open, then
//! opened. Each case must be refused with one line naming the damage, and
//! a refused open must leave every file's bytes and length as they were
//! (OPEN-1), or the open must find every acknowledged commit.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;

use flashlab_engine::config::SpaceConfig;
use flashlab_engine::store::StoreKind;
use flashlab_engine::{Database, DbConfig, TableSpec};
use flashlab_runtime::RealRuntime;
use proptest::prelude::*;

mod common;
use common::last_written_log_sector;

const PAGE: usize = 4096;

fn config(store: StoreKind) -> DbConfig {
    // A small pool, so that pages are written back between checkpoints.
    let mut config = DbConfig::simple("file", "file", PAGE, 16 * PAGE as u64);
    config.data[0].capacity_bytes = Some(4 << 20);
    config.data[0].store = store;
    if store == StoreKind::LogStructured {
        config.data[0].segment_bytes = Some(128 << 10);
    }
    config.log.capacity_bytes = Some(4 << 20);
    config.rollback = Some(SpaceConfig {
        device: "file".into(),
        // The data file's size: a swap is then found by what the files
        // hold, not by their lengths.
        capacity_bytes: Some(4 << 20),
        mirror: None,
    });
    // Checkpoints only when a test asks for one.
    config.checkpoint_interval_ns = 3_600_000_000_000;
    config
}

fn in_runtime<T>(f: impl FnOnce() -> T) -> T {
    let rt = RealRuntime::new(1);
    let _enter = RealRuntime::enter(&rt);
    f()
}

/// Commit rows `keys` of table `kv`, one transaction per `per` rows.
fn fill(db: &Database, keys: std::ops::Range<u32>, per: u32) {
    let t = match db.table("kv") {
        Ok(t) => t,
        Err(_) => db.create_table(TableSpec::bytes("kv")).unwrap(),
    };
    let mut i = keys.start;
    while i < keys.end {
        let mut txn = db.begin().unwrap();
        for k in i..(i + per).min(keys.end) {
            txn.put(&t, &key(k), &[(k % 251) as u8; 100]).unwrap();
        }
        txn.commit().unwrap();
        i += per;
    }
}

fn key(k: u32) -> Vec<u8> {
    format!("{k:06}").into_bytes()
}

/// A database with `rows` rows of `kv`, closed cleanly.
fn make(dir: &Path, config: &DbConfig, rows: u32) {
    in_runtime(|| {
        Database::create_dir(dir, config).unwrap();
        let db = Database::open_dir(dir, config).unwrap();
        fill(&db, 0..rows, 20);
        db.close().unwrap();
    });
}

/// Every file in `dir` (name, contents), the lock file aside (a writer
/// records its pid there; it is the lock, not the database).
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .filter(|e| e.file_name() != "flashlab.lock")
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// Copy every file of `from` into `to` (a crash image when `from` is open).
/// An in-place database of 200 rows (in the first directory) that does
/// `work` and is copied while still open (in the second): the image of a
/// crash.
fn crash_image_after(
    work: impl FnOnce(&Database),
) -> (tempfile::TempDir, tempfile::TempDir, DbConfig) {
    let live = tempfile::tempdir().unwrap();
    let image = tempfile::tempdir().unwrap();
    let config = config(StoreKind::InPlace);
    make(live.path(), &config, 200);
    in_runtime(|| {
        let db = Database::open_dir(live.path(), &config).unwrap();
        work(&db);
        copy_files(live.path(), image.path());
        db.abandon();
    });
    (live, image, config)
}

fn copy_files(from: &Path, to: &Path) {
    for (name, bytes) in snapshot(from) {
        std::fs::write(to.join(name), bytes).unwrap();
    }
}

/// Opening `dir` (for writing, then read-only) must be refused with a
/// message holding every one of `words`, and change no file.
fn assert_refused(dir: &Path, config: &DbConfig, words: &[&str]) -> String {
    let before = snapshot(dir);
    let mut last = String::new();
    for read_only in [false, true] {
        let err = in_runtime(|| {
            let opened = if read_only {
                Database::open_dir_read_only(dir, config)
            } else {
                Database::open_dir(dir, config)
            };
            match opened {
                Ok(db) => {
                    db.abandon();
                    None
                }
                Err(e) => Some(e.to_string()),
            }
        });
        let err = err.unwrap_or_else(|| panic!("the damaged database was opened"));
        for word in words {
            assert!(err.contains(word), "{err:?} does not say {word:?}");
        }
        assert!(!err.contains('\n'), "not one line: {err}");
        assert_unchanged(&before, dir, &err);
        last = err;
    }
    last
}

fn assert_unchanged(before: &BTreeMap<String, Vec<u8>>, dir: &Path, what: &str) {
    let after = snapshot(dir);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "a refused open ({what}) created or removed files"
    );
    for (name, bytes) in before {
        assert_eq!(bytes.len(), after[name].len(), "{what}: {name}'s length");
        assert!(
            after[name] == *bytes,
            "a refused open ({what}) wrote {name}"
        );
    }
}

/// The rows of `kv` that an open of `dir` finds, or its error.
fn rows(dir: &Path, config: &DbConfig) -> Result<Vec<u32>, String> {
    in_runtime(|| {
        let db = Database::open_dir_read_only(dir, config).map_err(|e| e.to_string())?;
        let t = db.table("kv").map_err(|e| e.to_string())?;
        let mut txn = db.begin().map_err(|e| e.to_string())?;
        let found = txn
            .scan(&t, Bound::Unbounded, Bound::Unbounded)
            .map_err(|e| e.to_string())?;
        let keys = found
            .iter()
            .map(|(k, _)| std::str::from_utf8(k).unwrap().parse().unwrap())
            .collect();
        drop(txn);
        db.abandon();
        Ok(keys)
    })
}

fn overwrite(path: &Path, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(bytes, offset).unwrap();
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// The newest master-record copy's (checkpoint LSN, log start).
fn master(log: &[u8]) -> (u64, u64) {
    let copies = [&log[0..512], &log[512..1024]];
    let newest = copies.iter().max_by_key(|c| u64_at(c, 16)).unwrap();
    (u64_at(newest, 24), u64_at(newest, 32))
}

/// Device offset of the log sector holding stream byte `lsn` (4 KB master
/// area, 512-byte sectors of 488 payload bytes, no wrap in these logs).
fn log_offset(lsn: u64) -> u64 {
    4096 + (lsn / 488) * 512
}

/// An in-place database of 200 rows, its configuration, and a copy of its
/// log as it is now (to put back later).
fn made_with_log_copy() -> (tempfile::TempDir, DbConfig, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let config = config(StoreKind::InPlace);
    make(dir.path(), &config, 200);
    let old_log = std::fs::read(dir.path().join("log.wal")).unwrap();
    (dir, config, old_log)
}

/// Case 1: an older copy of the log, put back after later commits were
/// checkpointed into the data file.
#[test]
fn regression_an_older_copy_of_the_log_is_refused_naming_both_positions() {
    let (dir, config, old_log) = made_with_log_copy();
    in_runtime(|| {
        let db = Database::open_dir(dir.path(), &config).unwrap();
        fill(&db, 200..1200, 10);
        db.checkpoint().unwrap();
        fill(&db, 1200..1300, 10);
        db.close().unwrap();
    });
    std::fs::write(dir.path().join("log.wal"), &old_log).unwrap();
    let err = assert_refused(
        dir.path(),
        &config,
        &[
            "log.wal",
            "the log lost its tail",
            "has LSN",
            "the log ends at",
        ],
    );
    eprintln!("{err}");
}

/// Case 2: a crashed database whose log is zeroed from 100 sectors past
/// its checkpoint's: data pages written since carry LSNs past the end
/// that recovery finds (this panicked with "BUF-7: install ... behind").
#[test]
fn regression_a_zeroed_log_tail_is_refused_not_a_panic() {
    let (_live, image, config) = crash_image_after(|db| {
        db.checkpoint().unwrap();
        fill(db, 200..3000, 10);
    });
    let log_path = image.path().join("log.wal");
    let log = std::fs::read(&log_path).unwrap();
    let (checkpoint, _) = master(&log);
    let from = log_offset(checkpoint) + 100 * 512;
    assert!(from < log.len() as u64);
    overwrite(&log_path, from, &vec![0u8; log.len() - from as usize]);
    let err = assert_refused(image.path(), &config, &["the log lost its tail", "has LSN"]);
    eprintln!("{err}");
}

/// Case 5: the data file and the rollback space swapped. Every open is
/// refused naming both files, and none writes: swapped back, the database
/// is whole.
#[test]
fn regression_swapped_data_and_rollback_files_are_named_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(StoreKind::InPlace);
    make(dir.path(), &config, 300);
    let (data, rollback) = (
        dir.path().join("data.data"),
        dir.path().join("rollback.seg"),
    );
    let swap = dir.path().join("swap");
    let exchange = || {
        std::fs::rename(&data, &swap).unwrap();
        std::fs::rename(&rollback, &data).unwrap();
        std::fs::rename(&swap, &rollback).unwrap();
    };
    exchange();
    let err = assert_refused(
        dir.path(),
        &config,
        &["data.data", "rollback.seg", "swapped"],
    );
    eprintln!("{err}");
    exchange();
    assert_eq!(
        rows(dir.path(), &config).unwrap(),
        (0..300).collect::<Vec<_>>()
    );
}

/// Case 4, in place: page 0 (the space header) of a cleanly closed
/// database zeroed. Its zeros were read as a fresh space ("1 page").
#[test]
fn regression_a_zeroed_space_header_is_refused_naming_page_0() {
    zeroed_first_block_is_refused(
        StoreKind::InPlace,
        &["data.data", "page 0", "space header", "all zeros"],
    );
}

/// A closed database of `kind` with its data file's first block zeroed is
/// refused with every one of `needles` in the message.
fn zeroed_first_block_is_refused(kind: StoreKind, needles: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let config = config(kind);
    make(dir.path(), &config, 300);
    overwrite(&dir.path().join("data.data"), 0, &[0u8; PAGE]);
    let err = assert_refused(dir.path(), &config, needles);
    eprintln!("{err}");
}

/// Case 4, log-structured: the superblock (block 0) zeroed. Its zeros were
/// taken for a store whose creation was cut short, and formatted anew.
#[test]
fn regression_a_zeroed_log_structured_superblock_is_refused_naming_block_0() {
    zeroed_first_block_is_refused(
        StoreKind::LogStructured,
        &["data.data", "block 0", "superblock", "all zeros"],
    );
}

/// Case 4, log-structured: both map-checkpoint headers zeroed.
#[test]
fn regression_zeroed_map_checkpoint_headers_are_refused_naming_the_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(StoreKind::LogStructured);
    make(dir.path(), &config, 300);
    let data = dir.path().join("data.data");
    let block0 = std::fs::read(&data).unwrap();
    // The superblock's blocks per map-checkpoint slot M, at offset 44.
    let m = u32::from_le_bytes(block0[44..48].try_into().unwrap()) as u64;
    for block in [1, 1 + m] {
        overwrite(&data, block * PAGE as u64, &[0u8; PAGE]);
    }
    let err = assert_refused(
        dir.path(),
        &config,
        &["data.data", "map-checkpoint headers", "all zeros"],
    );
    eprintln!("{err}");
}

/// Case 3: the last log sector of a crashed database zeroed after its
/// flush, with nothing written after it. With one copy of the log this
/// cannot be told from a torn tail (the limit the README states): the
/// open either refuses naming the lost tail (a data page already carries
/// a later LSN) or finds every commit but those of that sector. It never
/// panics, and what it finds is a prefix of the commits.
#[test]
fn regression_a_zeroed_last_log_sector_loses_at_most_that_sector() {
    let (_live, image, config) = crash_image_after(|db| fill(db, 200..260, 1));
    let log_path = image.path().join("log.wal");
    let log = std::fs::read(&log_path).unwrap();
    // The last written sector: the last non-zero one of the region.
    let last = last_written_log_sector(&log);
    overwrite(&log_path, last as u64, &[0u8; 512]);
    match rows(image.path(), &config) {
        Ok(found) => {
            assert!(
                found.len() >= 250,
                "more than one sector's commits lost: {}",
                found.len()
            );
            assert_eq!(found, (0..found.len() as u32).collect::<Vec<_>>());
        }
        Err(e) => assert!(e.contains("the log lost its tail"), "{e}"),
    }
}

/// Case 1 without an allocation: the later run only updates rows, so only
/// the anchor that each checkpoint stamps into page 0 (DB-9) proves that
/// the log put back is older than the data file.
#[test]
fn regression_an_older_log_is_refused_by_the_checkpoint_anchor() {
    let (dir, config, old_log) = made_with_log_copy();
    in_runtime(|| {
        let db = Database::open_dir(dir.path(), &config).unwrap();
        let t = db.table("kv").unwrap();
        let mut txn = db.begin().unwrap();
        txn.put(&t, &key(7), &[9u8; 100]).unwrap();
        txn.commit().unwrap();
        db.close().unwrap();
    });
    std::fs::write(dir.path().join("log.wal"), &old_log).unwrap();
    let err = assert_refused(
        dir.path(),
        &config,
        &["the log lost its tail", "page 0:0", "the log ends at"],
    );
    eprintln!("{err}");
}

/// The files a case may damage.
const FILES: [&str; 3] = ["data.data", "log.wal", "rollback.seg"];

/// Does an error name damage (a refusal, never another failure)?
fn names_damage(err: &str) -> bool {
    [
        "database damaged",
        "corruption in space",
        "log damaged at LSN",
    ]
    .iter()
    .any(|w| err.contains(w))
}

type Template = std::sync::OnceLock<(tempfile::TempDir, u32)>;

/// A closed database of `store` made once, and the rows it acknowledged.
fn template(store: StoreKind) -> &'static (tempfile::TempDir, u32) {
    static IN_PLACE: Template = Template::new();
    static LOG_STRUCTURED: Template = Template::new();
    let cell = match store {
        StoreKind::LogStructured => &LOG_STRUCTURED,
        _ => &IN_PLACE,
    };
    cell.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        make(dir.path(), &config(store), 600);
        (dir, 600)
    })
}

/// How a block is damaged.
#[derive(Clone, Debug)]
enum Damage {
    Zero,
    Flip { byte: usize, bit: u8 },
    Garbage(u8),
}

fn damage_strategy() -> impl Strategy<Value = Damage> {
    prop_oneof![
        Just(Damage::Zero),
        (0..PAGE, 0u8..8).prop_map(|(byte, bit)| Damage::Flip { byte, bit }),
        any::<u8>().prop_map(Damage::Garbage),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Damage one 4 KB block (among those written) of one file of a closed
    /// database, then open it: every acknowledged row is there with its
    /// value, or the open is refused naming the damage and no file changed.
    #[test]
    fn damage_to_one_block_is_refused_or_harmless(
        log_structured in any::<bool>(),
        file in 0..FILES.len(),
        pick in any::<prop::sample::Index>(),
        damage in damage_strategy(),
    ) {
        let store = if log_structured { StoreKind::LogStructured } else { StoreKind::InPlace };
        let (template, acked) = template(store);
        let config = config(store);
        let dir = tempfile::tempdir().unwrap();
        copy_files(template.path(), dir.path());
        let path = dir.path().join(FILES[file]);
        let bytes = std::fs::read(&path).unwrap();
        let written: Vec<usize> = (0..bytes.len() / PAGE)
            .filter(|b| bytes[b * PAGE..(b + 1) * PAGE].iter().any(|&x| x != 0))
            .collect();
        prop_assume!(!written.is_empty());
        let block = written[pick.index(written.len())];
        let mut new = bytes[block * PAGE..(block + 1) * PAGE].to_vec();
        match damage {
            Damage::Zero => new.fill(0),
            Damage::Flip { byte, bit } => new[byte] ^= 1 << bit,
            Damage::Garbage(seed) => {
                for (i, b) in new.iter_mut().enumerate() {
                    *b = (i as u8).wrapping_mul(31).wrapping_add(seed);
                }
            }
        }
        overwrite(&path, (block * PAGE) as u64, &new);
        let before = snapshot(dir.path());
        let what = format!("{store:?}: {} block {block}: {damage:?}", FILES[file]);
        // Ok(rows), or Err((refused at open, the error)).
        let outcome = in_runtime(|| match Database::open_dir(dir.path(), &config) {
            Ok(db) => {
                let found = read_all(&db);
                db.abandon();
                found.map_err(|e| (false, e))
            }
            Err(e) => Err((true, e.to_string())),
        });
        match outcome {
            Ok(found) => {
                prop_assert_eq!(found.len() as u32, *acked, "{}: rows lost without a refusal", what);
                for (k, v) in found {
                    prop_assert!(v == vec![(k % 251) as u8; 100], "{}: row {} changed", what, k);
                }
            }
            // A page damaged at rest that the open did not need is
            // reported when it is read (never repaired from an older image).
            Err((at_open, e)) => {
                prop_assert!(names_damage(&e), "{}: {}", what, e);
                if at_open {
                    assert_unchanged(&before, dir.path(), &e);
                }
            }
        }
    }
}

/// Every row of `kv`, or the error reading them.
fn read_all(db: &Database) -> Result<Vec<(u32, Vec<u8>)>, String> {
    let t = db.table("kv").map_err(|e| e.to_string())?;
    let mut txn = db.begin().map_err(|e| e.to_string())?;
    let found = txn
        .scan(&t, Bound::Unbounded, Bound::Unbounded)
        .map_err(|e| e.to_string())?;
    drop(txn);
    Ok(found
        .into_iter()
        .map(|(k, v)| (std::str::from_utf8(&k).unwrap().parse().unwrap(), v))
        .collect())
}
