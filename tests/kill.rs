//! Real-world crash test: a real `flashlab bench tpcb --real DIR --keep
//! --acks FILE` process is killed with SIGKILL at seeded random moments
//! (while recovering, loading pages, committing), again and again on the
//! same database. After every kill the database is recovered and checked,
//! through the library (and, now and then, by `flashlab check`):
//!
//! * every history id the client was told of (the acks file) is present:
//!   no acknowledged commit is lost;
//! * the history ids present beyond those are at most one per client per
//!   kill (commits whose acknowledgement the kill cut off);
//! * TPC-B's balances agree (`TpcB::check`), and `verify` finds no damage.
//!
//! The same test runs, with fewer kills, on a log-structured data space
//! (`--data-store log-structured`, small segments so the runs go through
//! many of them): its map checkpoints and roll-forward must keep the same
//! promise (issue 15). And on an In-Page Logging data space in a raw NAND
//! file (`--data-store ipl`, `NandFile`): erase units merged, commit
//! sectors and log sectors programmed, when the kill lands (issue 14).

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use flashlab_engine::Database;
use flashlab_engine::db::dir::config_from_manifest;
use flashlab_engine::db::verify::verify;
use flashlab_workloads::Workload;
use flashlab_workloads::tpcb::TpcB;

use common::{flashlab, real_runtime, stderr, stdout};

/// Kills (the issue asks for at least 20).
const KILLS: u32 = 22;
/// Kills of the log-structured variant (kept short for CI;
/// `FLASHLAB_KILL_LOG_STRUCTURED` for more).
const KILLS_LOG_STRUCTURED: u32 = 8;
/// Kills of the In-Page Logging variant (`FLASHLAB_KILL_IPL` for more).
const KILLS_IPL: u32 = 8;
/// Longest an In-Page Logging run lives before its kill: its open reads
/// every erase unit's log segment (about 1.3 s for the 1 GB space here),
/// so a shorter run would be killed in its open every time.
const RUN_MS_MAX_IPL: u64 = 3000;
/// Segments of the log-structured variant: 256 KB, so a run fills many.
const SEGMENT_BYTES_LOG_STRUCTURED: &str = "262144";
const CLIENTS: u32 = 4;
const ACCOUNTS: u32 = 500;
/// Longest a run lives before its kill (`FLASHLAB_KILL_RUN_MS_MAX` for a
/// longer soak).
const RUN_MS_MAX: u64 = 500;
/// The log's size: small, so the runs wrap it many times and the kills
/// land in recycling (`FLASHLAB_KILL_LOG_MB` for another size).
const LOG_MB: u64 = 2;

/// Acknowledged commits a kill round must average for the test to count.
const KILL_COMMITS_MIN: usize = 10;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn bench(dir: &Path, acks: &Path, duration: &str, store: Option<&str>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_flashlab"));
    cmd.args(["bench", "tpcb", "--real"])
        .arg(dir)
        .arg("--keep")
        .arg("--acks")
        .arg(acks)
        .args([
            "--clients",
            &CLIENTS.to_string(),
            "--accounts-per-branch",
            &ACCOUNTS.to_string(),
            "--buffer-mb",
            "16",
            "--duration",
            duration,
            "--warmup",
            "0s",
            "--progress",
            "0",
            "--log-mb",
            &env_or("FLASHLAB_KILL_LOG_MB", LOG_MB).to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(store) = store {
        cmd.args(["--data-store", store]);
        if store == "log-structured" {
            cmd.args(["--segment-bytes", SEGMENT_BYTES_LOG_STRUCTURED]);
        }
        if store == "ipl" {
            cmd.args(["--data-device", "nand-k9wag08u1a"]);
        }
    }
    cmd
}

/// Complete lines of the acks file (a kill may leave half a line).
fn acked(path: &Path) -> BTreeSet<i64> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let complete = match text.rfind('\n') {
        Some(end) => &text[..=end],
        None => "",
    };
    complete
        .lines()
        .map(|l| l.parse().expect("an acks line is a history id"))
        .collect()
}

/// Recover the database through the library and check it against the
/// acknowledgements; returns the history ids present.
fn recover_and_check(dir: &Path, acks: &BTreeSet<i64>) -> BTreeSet<i64> {
    let _rt = real_runtime(0);
    let config = config_from_manifest(dir).unwrap();
    let db = Database::open_dir(dir, &config).unwrap();
    // An In-Page Logging space restarts without a redo pass (issue 14).
    let redone = db.recovery_report().map_or(0, |r| r.ipl_pages_redone);
    assert_eq!(redone, 0, "IPL pages redone from the log at restart");
    let tpcb = TpcB::new(1, ACCOUNTS);
    let present: BTreeSet<i64> = tpcb.history_ids(&db).unwrap().into_iter().collect();
    let lost: Vec<&i64> = acks.difference(&present).collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged commits lost (history ids {:?}...)",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    tpcb.check(&db, present.len() as u64)
        .unwrap()
        .unwrap_or_else(|violation| panic!("TPC-B invariant violated: {violation}"));
    let report = verify(&db).unwrap();
    assert!(report.ok(), "{:?}", report.problems);
    db.close().unwrap();
    present
}

/// A small deterministic generator for the kill moments (splitmix64).
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn bench_killed_with_sigkill_loses_no_acknowledged_commit() {
    kill_rounds(None, KILLS);
}

#[test]
fn log_structured_bench_killed_with_sigkill_loses_no_acknowledged_commit() {
    let kills = env_or(
        "FLASHLAB_KILL_LOG_STRUCTURED",
        u64::from(KILLS_LOG_STRUCTURED),
    );
    kill_rounds(Some("log-structured"), kills as u32);
}

#[test]
fn ipl_bench_killed_with_sigkill_loses_no_acknowledged_commit() {
    kill_rounds(
        Some("ipl"),
        env_or("FLASHLAB_KILL_IPL", u64::from(KILLS_IPL)) as u32,
    );
}

/// Kill `kills` runs on one database whose data space has `store`.
fn kill_rounds(store: Option<&str>, kills_wanted: u32) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    std::fs::create_dir(&dir).unwrap();
    let acks_path = tmp.path().join("acks");

    // A first run loads the tables and ends cleanly.
    let out = bench(&dir, &acks_path, "200ms", store).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut present = recover_and_check(&dir, &acked(&acks_path));

    let mut rng = 0x6b69_6c6c_u64;
    let mut kills = 0;
    let mut unacked_max = 0;
    for round in 0..kills_wanted {
        let mut child = bench(&dir, &acks_path, "60s", store).spawn().unwrap();
        // Anywhere from inside the run's own recovery to mid-workload.
        let run_ms_max = match store {
            Some("ipl") => RUN_MS_MAX_IPL,
            _ => RUN_MS_MAX,
        };
        let after_ms = next(&mut rng) % env_or("FLASHLAB_KILL_RUN_MS_MAX", run_ms_max) + 5;
        std::thread::sleep(Duration::from_millis(after_ms));
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            panic!("round {round}: bench ended by itself ({status}): {err}");
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        kills += 1;
        let acks = acked(&acks_path);
        if round % 7 == 0 || round + 1 == kills_wanted {
            let out = flashlab(&["check", dir.to_str().unwrap()]);
            let said = format!("{}{}", stdout(&out), stderr(&out));
            assert!(
                out.status.success(),
                "round {round}: flashlab check failed: {said}"
            );
        }
        present = recover_and_check(&dir, &acks);
        let unacked = present.difference(&acks).count() as u32;
        assert!(
            unacked <= CLIENTS * kills,
            "round {round}: {unacked} history rows were never acknowledged ({kills} kills of {CLIENTS} clients)"
        );
        unacked_max = unacked_max.max(unacked);
        eprintln!(
            "round {round}: killed after {after_ms} ms; {} acknowledged, {} present, {unacked} unacknowledged",
            acks.len(),
            present.len()
        );
    }
    assert_eq!(kills, kills_wanted);
    // Enough commits that the kills cut through a working ledger: a floor
    // a loaded machine's slowest store (IPL, one commit a force) still
    // clears, since the runs' lengths are fixed in wall-clock time.
    assert!(
        acked(&acks_path).len() > KILL_COMMITS_MIN * kills_wanted as usize,
        "the runs committed too little to test anything"
    );
    let _ = (present, unacked_max);
}
