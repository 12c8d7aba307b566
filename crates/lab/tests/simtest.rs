//! The crash-recovery harness in CI: a few hundred seeds of every workload
//! and profile, and the properties of the harness itself.

use flashlab_lab::simtest::{
    SeedReport, StoreChoice, Summary, run, run_seed, run_seed_with, run_with,
};

/// A seed's failure, with its scenario, on stderr.
fn print_failure(r: &SeedReport) {
    if let Some(f) = &r.failure {
        eprintln!("seed {} FAILED: {f}\n  {}", r.seed, r.scenario);
    }
}

/// Every seed of `summary` passed and no acknowledged commit was lost.
fn assert_all_passed(summary: &Summary, what: &str) {
    assert!(
        summary.failed.is_empty(),
        "{} {what} seeds failed",
        summary.failed.len()
    );
    assert_eq!(summary.outcome.lost_commits, 0);
}

/// Seeds CI runs (each takes milliseconds to a few tens of milliseconds).
const CI_SEEDS: u64 = 300;
/// Seeds CI runs on a log-structured data space (issue 15).
const CI_LOG_STRUCTURED_SEEDS: u64 = 150;

/// The number in the environment variable `name`, or `default`.
fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Seed `seed` of `workload` passes with the data space on `store`.
fn assert_passes(seed: u64, workload: &str, store: StoreChoice) {
    let report = run_seed_with(seed, workload, store);
    assert!(report.passed(), "seed {seed}: {:?}", report.failure);
}

/// Log-structured seeds: small segments on a small space, so cleaning and
/// map checkpoints run all the time and the cuts land in them; 0 lost.
#[test]
fn simtest_log_structured_seeds_all_pass() {
    let summary = run_with(
        1_000,
        CI_LOG_STRUCTURED_SEEDS,
        "mixed",
        StoreChoice::LogStructured,
        print_failure,
    );
    assert_all_passed(&summary, "log-structured");
}

/// Seeds the log-structured seeds found bugs with: 83 ran out of segments
/// when a latent read error made cleaning fail on the same victim again
/// and again (fixed: the victim's live blocks are read one by one and a
/// segment that cannot be read is not chosen again); 44 had a summary
/// damaged at rest reported as a map error (fixed: named as damage); 3392
/// (found by a 4,000-seed sweep) filled its last free block while read
/// errors kept cleaning from reclaiming segments, and its recovery then
/// refused with "space full" (fixed: LFS-8 keeps a segment for the
/// cleaner, and a store full of unreadable segments names the damage).
/// From a 6,000-seed sweep (seeds 10,000 to 15,999): 14766 cut a map
/// checkpoint's write into slot 1, then, in recovery, its next write into
/// slot 0, which held the only whole copy: no valid checkpoint was left
/// (fixed: LFS-9 writes the stale slot first); 10550 had a bit flipped
/// on a page's write, and the cleaner copied the damaged page, garbled
/// LSN and all, which the harness caught as a write ahead of the log
/// (fixed: LFS-10, the cleaner copies only pages that verify). 32531
/// (the next 24,000 seeds; 22585 too once 10550 was fixed) copied part of
/// a victim with an unreadable page, spending free blocks without freeing
/// the segment, until a recovery found every segment holding live pages
/// and refused with "space full" (fixed: LFS-10 verifies a victim's every
/// page before copying any). 109120 (bank, seen under `--store mixed`)
/// outgrew its 80 usable pages: the allocator's "space full" is a right
/// answer, which the harness accepts, with `verify` checking that no
/// page leaked (VERIFY-1).
#[test]
fn regression_log_structured_seeds() {
    for seed in [44, 83, 103, 289, 3392, 10550, 14766, 22585, 32531, 109120] {
        assert_passes(seed, "mixed", StoreChoice::LogStructured);
    }
}

#[test]
fn simtest_ci_seeds_all_pass() {
    let seeds = env_or("SIMTEST_SEEDS", CI_SEEDS);
    let first = env_or("SIMTEST_FIRST", 0);
    let summary = run(first, seeds, "mixed", print_failure);
    eprintln!("{summary:#?}");
    assert_all_passed(&summary, "mixed-store");
}

#[test]
fn a_seed_replays_exactly() {
    for seed in [3, 17, 40] {
        let a = run_seed(seed, "mixed");
        let b = run_seed(seed, "mixed");
        assert_eq!(a, b, "seed {seed}");
    }
}

/// Seeds of the media profiles that found bugs:
/// - 2153 (tpcb, Media): `verify` reported as damage a space-header page it
///   had itself just rebuilt from the log (read through the pool first, so
///   the device copy was still the damaged one). Verify counts a damaged
///   page whose repaired copy awaits write-back as repaired.
/// - 2241 (tpcb, Media): a rollback met a page damaged at rest (a latent
///   read error, no image in the recycled log) and failed the database, as
///   it must; the harness took the client's "log failed" for an unexpected
///   error. A failure that names damage is an expected outcome of the media
///   profiles.
/// - 3163 (bank, LogMedia, preempted): a bit flipped on the write of the
///   newer master-record copy, in its version byte, was taken for a
///   database of another log format, and the final open refused it without
///   naming any damage. The master record's checksum covers its version
///   (log format 3), so that copy is damaged and the older one serves
///   (`wal::master`'s
///   `regression_a_flipped_bit_in_a_master_copys_header_is_damage_not_another_format`).
#[test]
fn regression_seeds_of_the_media_profiles() {
    for seed in [2153, 2241, 3163] {
        assert_passes(seed, "mixed", StoreChoice::InPlace);
    }
}

/// Seeds 5,000 to 35,000, run once in the `crash` profile, found these:
/// - 10799, 17950 (mixed), 31421 and 32713 (tpcb), Misdirect profile: a
///   page written back, evicted and read again came back older (the
///   device lost the write), and a mini-transaction that had seen the
///   newer page panicked on an invariant (DB-1, MTR-11). It is damage,
///   reported as a lost write (MTR-14).
/// - 6413 and 15263 (Misdirect): a rollback met such damage and failed
///   the database naming it, as it must; the harness expected that only
///   of the media profiles.
/// - 16004 (LogMedia): bits flipped in both master-record copies; the open
///   took the log for an unused one (WAL-14: refused as damage).
#[test]
fn regression_seeds_from_the_35000_seed_sweep() {
    for (seed, workload) in [
        (6413, "mixed"),
        (10799, "mixed"),
        (15263, "mixed"),
        (16004, "mixed"),
        (17950, "mixed"),
        (31421, "tpcb"),
        (32713, "tpcb"),
    ] {
        assert_passes(seed, workload, StoreChoice::InPlace);
    }
}

/// The three engine bugs the first seeds found have targeted regression
/// tests in crates/engine/tests/faults.rs (torn pages rebuilt from the log;
/// a failed data flush stops the database; a failed master-record flush
/// fails the log). These seeds found them; they stay in the suite.
#[test]
fn regression_seeds_that_found_the_flush_failure_bugs() {
    for seed in [0, 3, 87, 220] {
        assert_passes(seed, "mixed", StoreChoice::InPlace);
    }
}

/// In-Page Logging seeds (`flashlab simtest --store ipl`): the data space
/// on raw NAND, power cuts at data flushes and writes (inside merges,
/// checkpoints and write-backs) and in recovery; the same promise.
#[test]
fn simtest_ipl_seeds_all_pass() {
    let seeds = env_or("SIMTEST_IPL_SEEDS", IPL_CI_SEEDS);
    let summary = flashlab_lab::simtest::run_with(
        0,
        seeds,
        "mixed",
        flashlab_lab::simtest::StoreChoice::Ipl,
        print_failure,
    );
    assert_all_passed(&summary, "IPL");
    assert!(summary.crashes >= seeds, "every seed crashed at least once");
    // Issue 14: restarts without a redo pass for IPL pages (REC-4).
    assert!(summary.ipl_recoveries >= seeds, "{summary:?}");
    assert_eq!(summary.ipl_pages_redone, 0);
    assert!(summary.ipl_pages_skipped > 0);
    // IPL-SEL: the seeds' merges carried active transactions' records, and
    // their aborts left records out, under the same promise.
    let [merges, _, carried, deapplied] = summary.ipl_selection;
    assert!(merges > 0 && carried > 0 && deapplied > 0, "{summary:?}");
}

/// Regression (issue 14, seed 68): a write-back of a page a running force
/// had captured returned before that force wrote it; the pool evicted the
/// page and read its older version back, and the next force logged a
/// header over the older body (a checksum mismatch after a merge). A
/// write-back waits for the running force (IPL-10).
#[test]
fn regression_ipl_write_back_waits_for_the_force_that_captured_the_page() {
    let r = run_seed_with(68, "mixed", StoreChoice::Ipl);
    assert!(r.passed(), "{:?}\n  {}", r.failure, r.scenario);
    assert_eq!(r.outcome.lost_commits, 0);
    assert!(r.ipl_recoveries > 0 && r.ipl_pages_redone == 0, "{r:?}");
}

/// Regression (issue 14, Media seeds 1084 and 1608 of the 2000-seed run):
/// (1) at open, an in-place slot (IPL-5) whose header read back flipped
/// looked unmarked (page LSN beyond L*) and was erased: a marked page
/// lost; only a sealed page is judged by its LSN (IPL-11); (2) a page
/// damaged on the medium was repaired from the WAL during recovery, to
/// the WAL's end, past L*: a B+tree root pointing at a child its space
/// never received; until recovery's closing checkpoint, an IPL page
/// is rebuilt from the WAL records before L* only, skipping every earlier
/// restart's hole (REC-4), or the open refuses naming the damage.
#[test]
fn regression_ipl_media_restarts_never_read_a_wrong_page() {
    for seed in [1084, 1608] {
        let r = run_seed_with(seed, "mixed", StoreChoice::Ipl);
        assert!(r.passed(), "seed {seed}: {:?}\n  {}", r.failure, r.scenario);
        assert_eq!(r.outcome.lost_commits, 0, "seed {seed}");
        assert_eq!(r.ipl_pages_redone, 0, "seed {seed}");
    }
}

/// IPL seeds CI runs.
const IPL_CI_SEEDS: u64 = 100;

/// IPL seeds of the Media profile CI runs (the first this many of them).
const IPL_CI_MEDIA_SEEDS: usize = 80;

/// In-Page Logging seeds of the Media profile: bit flips on NAND reads and
/// programs and latent read errors, in slots, log sectors and commit
/// sectors, with the power cuts of IPL seeds. Every damaged image is
/// caught (sector crc, page checksum); a seed recovers with every
/// acknowledged commit, or refuses naming the damage; never a wrong page.
#[test]
fn simtest_ipl_media_seeds_all_pass() {
    use flashlab_engine::store::StoreKind;
    use flashlab_lab::simtest::{Profile, Scenario};
    let media: Vec<u64> = (0..)
        .filter(|&seed| {
            Scenario::from_seed_store(seed, "mixed", StoreKind::Ipl)
                .is_ok_and(|sc| sc.profile == Profile::Media)
        })
        .take(IPL_CI_MEDIA_SEEDS)
        .collect();
    let (mut refused, mut repaired, mut damaged, mut caught, mut flips) = (0, 0, 0, 0, 0);
    for &seed in &media {
        let r = run_seed_with(seed, "mixed", StoreChoice::Ipl);
        assert!(
            r.passed(),
            "ipl media seed {seed}: {:?}\n  {}",
            r.failure,
            r.scenario
        );
        assert_eq!(r.outcome.lost_commits, 0, "seed {seed}");
        if let Some(why) = &r.refused {
            assert!(
                names_media_damage(why),
                "seed {seed} refused without naming damage: {why}"
            );
            refused += 1;
        }
        repaired += r.outcome.pages_repaired;
        damaged += r.faults.damaged_pages;
        caught += r.faults.damaged_pages_caught;
        flips += r.faults.read_flips + r.faults.write_flips + r.faults.read_errors;
    }
    assert!(flips > 0, "media faults were injected");
    assert_eq!(caught, damaged, "every damaged image caught");
    // An IPL space that restarted without redo rebuilds a page damaged on
    // the medium during recovery from the WAL records before L* (REC-4,
    // regression_ipl_media_restarts_never_read_a_wrong_page): some seeds
    // must take that path. A seed whose damaged page has no image in the
    // log since its start (unchanged since the last checkpoint), or whose
    // erase unit's commit sector cannot be read, refuses naming the damage;
    // how many do follows the seeds' timing, so it is printed, not bounded.
    assert!(repaired > 0, "no media seed rebuilt a page from the log");
    assert!(refused < media.len() as u64, "every media seed refused");
    println!(
        "ipl media seeds: {refused} of {} refused naming the damage, {repaired} pages rebuilt",
        media.len()
    );
}

/// A refusal of a media seed names what is damaged: a page (space, page,
/// device offset), a sector the device cannot read, or damage it found.
fn names_media_damage(why: &str) -> bool {
    ["corruption in space", "read error at offset", "damage"]
        .iter()
        .any(|name| why.contains(name))
}

#[test]
fn an_ipl_seed_replays_exactly() {
    let ipl = flashlab_lab::simtest::StoreChoice::Ipl;
    for seed in [1, 9] {
        let a = flashlab_lab::simtest::run_seed_with(seed, "mixed", ipl);
        let b = flashlab_lab::simtest::run_seed_with(seed, "mixed", ipl);
        assert_eq!(a, b, "seed {seed}");
        assert!(a.scenario.contains("store ipl"), "{}", a.scenario);
    }
}
