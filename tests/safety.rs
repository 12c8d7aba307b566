//! A database directory that is safe to use (issue 11): one writer at a
//! time, read-only `check` and `query` that never write a byte, swapped or
//! damaged files named and never re-initialised, atomic creation.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{
    assert_bad_input, fill, flashlab, interrupt, names, real_runtime, small_config, stderr, stdout,
    success_json, temp_database, temp_dir,
};
use flashlab::engine::{Database, DbConfig};

/// Every file in `dir` (name, contents).
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// `check DIR`, or `check --repair DIR`.
fn check_args(dir: &str, repair: bool) -> Vec<&str> {
    if repair {
        vec!["check", "--repair", dir]
    } else {
        vec!["check", dir]
    }
}

/// `flashlab ARGS` is refused as bad input naming `needles`, and `dir`
/// holds what it held (`before`).
fn assert_refused_unchanged(
    args: &[&str],
    needles: &[&str],
    before: &BTreeMap<String, Vec<u8>>,
    dir: &Path,
    what: &str,
) {
    assert_bad_input(&flashlab(args), needles);
    assert_unchanged(before, dir, what);
}

fn assert_unchanged(before: &BTreeMap<String, Vec<u8>>, dir: &Path, what: &str) {
    let after = snapshot(dir);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "{what}: files created or removed"
    );
    // A writer records its pid in the lock file; nothing else may change.
    for (name, bytes) in before.iter().filter(|(n, _)| *n != "flashlab.lock") {
        assert!(after[name] == *bytes, "{what} changed {name}");
    }
}

fn path(dir: &Path) -> String {
    dir.display().to_string()
}

/// A crash image: the files of a database copied while it is open, after a
/// commit and before any checkpoint, so opening it needs recovery.
fn crash_image(to: &Path) {
    let (live, _) = temp_database();
    let _rt = real_runtime(1);
    let db = Database::open_dir(live.path(), &small_config()).unwrap();
    fill(&db, 200..400);
    for (name, bytes) in snapshot(live.path()) {
        std::fs::write(to.join(name), bytes).unwrap();
    }
    db.close().unwrap();
}

#[test]
fn a_second_writer_is_refused_naming_the_directory_and_the_holders_pid() {
    let (dir, d) = temp_database();
    let _rt = real_runtime(1);
    let held = Database::open_dir(dir.path(), &small_config()).unwrap();
    // Two opens in one process conflict too (flock is per open file).
    let err = Database::open_dir(dir.path(), &small_config())
        .err()
        .expect("a second writer in the same process must be refused")
        .to_string();
    let pid = format!("process {}", std::process::id());
    assert!(err.contains(&pid) && err.contains(&d), "{err}");
    // Other processes: a writer (check --repair), readers (check, query).
    for args in [
        vec!["check", "--repair"],
        vec!["check"],
        vec!["query", "--table", "kv"],
    ] {
        let mut args = args.clone();
        args.insert(1, &d);
        assert_bad_input(&flashlab(&args), &[&pid, &d, "flashlab.lock"]);
    }
    held.close().unwrap();
    let out = flashlab(&["check", &d]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn check_and_query_write_nothing_even_when_recovery_is_needed() {
    let (dir, d) = temp_dir();
    crash_image(dir.path());
    let before = snapshot(dir.path());
    let out = flashlab(&["check", &d]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert_unchanged(&before, dir.path(), "check");
    let out = flashlab(&["query", &d, "--table", "kv", "--json"]);
    let json = success_json(&out);
    assert_eq!(json["total"], 400, "recovery in memory sees every commit");
    assert_unchanged(&before, dir.path(), "query");
    // Only --repair writes: recovery's work reaches the files.
    let out = flashlab(&["check", "--repair", &d]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(snapshot(dir.path())["log.wal"] != before["log.wal"]);
}

#[test]
fn readers_share_the_directory_and_keep_writers_out() {
    let (dir, d) = temp_database();
    let _rt = real_runtime(1);
    let reader = Database::open_dir_read_only(dir.path(), &small_config()).unwrap();
    let out = flashlab(&["query", &d, "--table", "kv"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_bad_input(
        &flashlab(&["check", "--repair", &d]),
        &["in use by a reader"],
    );
    reader.close().unwrap();
}

#[test]
fn swapped_files_are_named_and_never_reinitialised() {
    let (dir, d) = temp_database();
    let data = dir.path().join("data.data");
    let log = dir.path().join("log.wal");
    let swap = dir.path().join("swap");
    std::fs::rename(&data, &swap).unwrap();
    std::fs::rename(&log, &data).unwrap();
    std::fs::rename(&swap, &log).unwrap();
    let before = snapshot(dir.path());
    for args in [vec!["check"], vec!["check", "--repair"]] {
        let mut args = args.clone();
        args.push(&d);
        let out = flashlab(&args);
        assert_bad_input(&out, &["damaged", "swapped"]);
        let err = stderr(&out);
        assert!(
            err.contains("data.data") && err.contains("log.wal"),
            "{err}"
        );
        assert_unchanged(&before, dir.path(), "a refused open");
    }
    // Swapped back, every table is still there.
    std::fs::rename(&data, &swap).unwrap();
    std::fs::rename(&log, &data).unwrap();
    std::fs::rename(&swap, &log).unwrap();
    let out = flashlab(&["query", &d, "--table", "kv", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn damaged_master_records_are_reported_with_evidence_and_never_reinitialised() {
    let (dir, d) = temp_database();
    let log = dir.path().join("log.wal");
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[20] ^= 1; // sector 0: checksum mismatch
    bytes[512..520].copy_from_slice(b"garbage!"); // sector 1: bad magic
    std::fs::write(&log, &bytes).unwrap();
    let data = dir.path().join("data.data");
    let mut page = std::fs::read(&data).unwrap();
    page[100] ^= 1;
    std::fs::write(&data, &page).unwrap();
    let before = snapshot(dir.path());
    for repair in [false, true] {
        let args = check_args(&d, repair);
        assert_refused_unchanged(
            &args,
            &[
                "log.wal",
                "master record",
                "checksum mismatch",
                "not FLSHLOG",
            ],
            &before,
            dir.path(),
            "check of a damaged log",
        );
    }
}

#[test]
fn opening_never_creates_and_creation_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let _rt = real_runtime(1);
    let err = Database::open_dir(dir.path(), &small_config())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("not a flashlab database"), "{err}");
    assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
    // A stray file of the same name: creation refuses and leaves no trace.
    std::fs::write(dir.path().join("log.wal"), b"mine").unwrap();
    let err = Database::create_dir(dir.path(), &small_config())
        .unwrap_err()
        .to_string();
    assert!(err.contains("refusing to overwrite"), "{err}");
    assert_eq!(names(dir.path()), ["log.wal"]);
    assert_eq!(std::fs::read(dir.path().join("log.wal")).unwrap(), b"mine");
    std::fs::remove_file(dir.path().join("log.wal")).unwrap();
    Database::create_dir(dir.path(), &small_config()).unwrap();
    let err = Database::create_dir(dir.path(), &small_config())
        .unwrap_err()
        .to_string();
    assert!(err.contains("already holds a database"), "{err}");
    assert!(!dir.path().join(".flashlab-creating").exists());
}

/// The run's standard error says `needle`.
fn assert_said(out: &std::process::Output, needle: &str) {
    assert!(stderr(out).contains(needle), "{}", stderr(out));
}

/// Nothing is left in `dir`.
fn assert_nothing_left(dir: &Path) {
    assert!(names(dir).is_empty(), "left: {:?}", names(dir));
}

#[test]
fn a_database_too_small_to_load_is_a_clean_error_and_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    std::fs::create_dir(&db).unwrap();
    let config = tmp.path().join("small.toml");
    std::fs::write(
        &config,
        "[[data]]\nname = \"data\"\npage_bytes = 8192\nbuffer_bytes = 16777216\n\
         device = \"file\"\ncapacity_bytes = 1048576\n\n[log]\ndevice = \"file\"\n\
         capacity_bytes = 8388608\n",
    )
    .unwrap();
    let args = [
        "bench",
        "tpcb",
        "--real",
        &path(&db),
        "--keep",
        "--config",
        &path(&config),
        "--duration",
        "1s",
        "--progress",
        "0",
    ];
    for _retry in 0..2 {
        assert_bad_input(&flashlab(&args), &["space full", "data"]);
        assert!(names(&db).is_empty(), "left behind: {:?}", names(&db));
    }
}

#[test]
fn a_file_size_limit_at_creation_is_a_clean_error_and_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    std::fs::create_dir(&db).unwrap();
    // The file-size limit makes creating a 1 GB space file fail as a full
    // file system would (EFBIG instead of ENOSPC), deterministically.
    let script = format!(
        "ulimit -f 4096; trap '' XFSZ; exec '{}' bench tpcb --real '{}' --keep \
         --duration 1s --progress 0 --clients 1",
        env!("CARGO_BIN_EXE_flashlab"),
        db.display()
    );
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert_bad_input(&out, &["space full", "data.data", "file size limit"]);
    assert!(names(&db).is_empty(), "left behind: {:?}", names(&db));
}

#[test]
fn space_files_grow_on_demand_instead_of_being_preallocated() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let _rt = real_runtime(1);
    let mut config = small_config();
    config.data[0].capacity_bytes = Some(1 << 30);
    config.log.capacity_bytes = Some(1 << 30);
    Database::create_dir(dir.path(), &config).unwrap();
    let allocated: u64 = ["data.data", "log.wal"]
        .iter()
        .map(|f| std::fs::metadata(dir.path().join(f)).unwrap().blocks() * 512)
        .sum();
    let each: Vec<u64> = ["data.data", "log.wal"]
        .iter()
        .map(|f| std::fs::metadata(dir.path().join(f)).unwrap().blocks() * 512)
        .collect();
    // 1 GB each was asked for; at most the log's zeroed-ahead window (64
    // MB) and the data file's first pages may be on the disk, plus what a
    // file system allocates ahead of writes on its own (ext4 and XFS do;
    // once, under load, this was 4 KB over the 128 MB).
    let slack_bytes = 1 << 20;
    assert!(
        allocated <= 2 * (64 << 20) + slack_bytes,
        "{allocated} bytes allocated: {each:?}"
    );
}

/// [`interrupt`] `bench tpcb --real DIR ARGS --progress 0` once the
/// database's manifest is in `dir`; `args` are the bench's options,
/// separated by spaces.
fn interrupt_tpcb(dir: &Path, args: &str, signal: &str) -> std::process::Output {
    let d = path(dir);
    let args: Vec<&str> = args.split_whitespace().collect();
    let all = [
        &["bench", "tpcb", "--real", d.as_str()][..],
        &args,
        &["--progress", "0"],
    ]
    .concat();
    interrupt(&all, |_| has_file(dir, "flashlab.manifest"), signal)
}

/// True once some file under `dir` (one level of subdirectories) is named `name`.
fn has_file(dir: &Path, name: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries
        .flatten()
        .any(|e| e.file_name() == name || (e.path().is_dir() && e.path().join(name).exists()))
}

#[test]
fn sigterm_and_sigint_remove_a_real_bench_and_a_sorts_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = path(dir.path());
    let out = interrupt_tpcb(
        dir.path(),
        "--duration 60s --clients 1 --accounts-per-branch 2000",
        "-TERM",
    );
    assert_said(&out, "interrupted by SIGTERM: removed");
    assert_nothing_left(dir.path());
    assert!(
        stdout(&out).is_empty(),
        "a partial report: {}",
        stdout(&out)
    );
    interrupt(
        &[
            "bench", "sort", "--real", &d, "--size", "2GB", "--memory", "16MB",
        ],
        |_| has_file(dir.path(), "input"),
        "-INT",
    );
    assert_nothing_left(dir.path());
}

#[test]
fn sigint_keeps_a_keep_database_consistent_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = path(dir.path());
    // A first run creates and loads the database and ends cleanly.
    let out = flashlab(&[
        "bench",
        "tpcb",
        "--real",
        &d,
        "--keep",
        "--duration",
        "200ms",
        "--warmup",
        "0s",
        "--clients",
        "2",
        "--accounts-per-branch",
        "2000",
        "--buffer-mb",
        "16",
        "--progress",
        "0",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = interrupt_tpcb(
        dir.path(),
        "--keep --duration 60s --clients 2 --accounts-per-branch 2000 --buffer-mb 16",
        "-INT",
    );
    assert_said(&out, &format!("kept {d}"));
    let out = flashlab(&["check", &d]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
}

#[test]
fn a_data_file_of_another_database_is_named_as_foreign() {
    check_refuses_a_file_of_another_database("data.data", "belongs to another database");
}

/// A log-structured data file keeps its space header wherever its page
/// map puts page 0, so its superblock records the identity instead.
#[test]
fn a_log_structured_data_file_of_another_database_is_named_as_foreign() {
    let mut config = small_config();
    config.data[0].store = flashlab_engine::store::StoreKind::LogStructured;
    config.data[0].segment_bytes = Some(128 << 10);
    check_refuses_a_file_of_another_database_with(
        &config,
        "data.data",
        "belongs to another database",
    );
}

/// Copy `file` from another database over this one's: `check` and `check
/// --repair` refuse with `message` and change nothing.
fn check_refuses_a_file_of_another_database(file: &str, message: &str) {
    check_refuses_a_file_of_another_database_with(&small_config(), file, message);
}

fn check_refuses_a_file_of_another_database_with(config: &DbConfig, file: &str, message: &str) {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    for dir in [a.path(), b.path()] {
        let _rt = real_runtime(1);
        let db = Database::open_or_create_dir(dir, config).unwrap();
        fill(&db, 0..200);
        db.close().unwrap();
    }
    let out = flashlab(&["check", &path(a.path())]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let manifest = std::fs::read_to_string(a.path().join("flashlab.manifest")).unwrap();
    assert!(manifest.contains("database_id"), "{manifest}");
    std::fs::copy(b.path().join(file), a.path().join(file)).unwrap();
    let before = snapshot(a.path());
    for repair in [false, true] {
        let d = path(a.path());
        let args = check_args(&d, repair);
        assert_refused_unchanged(
            &args,
            &[file, message],
            &before,
            a.path(),
            "check of a foreign file",
        );
    }
}

/// The log's master record carries the database's identity too: another
/// database's log file is named, and nothing is changed.
#[test]
fn a_log_file_of_another_database_is_named_as_foreign() {
    check_refuses_a_file_of_another_database("log.wal", "the log of database");
}

#[test]
fn sigint_while_a_keep_database_is_being_loaded_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    let out = interrupt_tpcb(
        dir.path(),
        "--keep --duration 60s --clients 1 --accounts-per-branch 100000 --scale 20 --buffer-mb 64",
        "-INT",
    );
    assert_said(&out, "flashlab.manifest");
    assert_eq!(
        names(dir.path()),
        ["notes.txt"],
        "the user's file is kept, the rest removed"
    );
}

#[test]
fn data_files_swapped_among_themselves_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small_config();
    let mut second = config.data[0].clone();
    second.name = "second".into();
    config.data.push(second);
    {
        let _rt = real_runtime(1);
        Database::create_dir(dir.path(), &config).unwrap();
    }
    let (a, b) = (dir.path().join("data.data"), dir.path().join("second.data"));
    let swap = dir.path().join("swap");
    std::fs::rename(&a, &swap).unwrap();
    std::fs::rename(&b, &a).unwrap();
    std::fs::rename(&swap, &b).unwrap();
    let before = snapshot(dir.path());
    assert_refused_unchanged(
        &["check", &path(dir.path())],
        &[
            "data.data",
            "data space 1, not of space 0",
            "swapped with second.data",
        ],
        &before,
        dir.path(),
        "check of swapped data files",
    );
}

/// FILE-2: a log file whose length is not whole 512-byte sectors stays in
/// the page cache. Opened with `O_DIRECT`, zeroing ahead could not write
/// its last piece, and the first force reaching it failed the log (found
/// in review, before any release).
#[test]
fn regression_a_log_file_of_ragged_length_takes_commits_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small_config();
    config.log.capacity_bytes = Some((4 << 20) + 256);
    let _rt = real_runtime(1);
    let db = Database::open_or_create_dir(dir.path(), &config).unwrap();
    fill(&db, 0..200);
    db.close().unwrap();
    let db = Database::open_dir(dir.path(), &config).unwrap();
    fill(&db, 200..400);
    let t = db.table("kv").unwrap();
    let mut txn = db.begin().unwrap();
    for i in [0, 199, 200, 399] {
        let key = format!("{i:05}");
        assert!(txn.get(&t, key.as_bytes()).unwrap().is_some(), "row {i}");
    }
    drop(txn);
    db.close().unwrap();
}
