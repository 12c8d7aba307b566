//! The findings table: each paper's headline conclusions, in its own words,
//! and whether the run reproduces them.
//!
//! A [`Finding`] is data: the paper's sentence, the published value as the
//! paper states it, the check ids it rests on (exact ids, or `prefix*`
//! families declared in [`crate::experiments::check_ids`]) and which of
//! them show the measured value. Its verdict is computed from those checks,
//! never typed in ([`Verdict::of`]):
//!
//! - **REPRODUCED**: every check it rests on passes;
//! - **PARTLY**: some pass, some miss;
//! - **NOT REPRODUCED**: none passes;
//! - **not run**: some check it rests on is not in this run (`--unit`,
//!   `--only`).
//!
//! The one-line cause of a miss is derived from the first missed check:
//! its note's first sentence, else what it compares and the value
//! measured; it is shown only when a check misses, so it never claims a
//! pass. The report opens with the table and `results.json` keeps it as
//! `findings`; sanity assertions ([`crate::check::Kind::Sanity`]) are never
//! a finding's checks.

use serde::{Deserialize, Serialize};

use crate::check::{Form, Kind, fmt_num, id_matches};
use crate::report::UnitRecord;

/// One headline conclusion of one paper.
#[derive(Clone, Copy, Debug)]
pub struct Finding {
    /// Stable identifier: the paper key (as in `results.toml`'s
    /// `[papers]`), a dot, what.
    pub id: &'static str,
    /// The paper's words, short.
    pub quote: &'static str,
    /// The published value as the paper gives it.
    pub published: &'static str,
    /// The check ids (or families) the verdict rests on.
    pub checks: &'static [&'static str],
    /// The checks whose measured values the table shows (a family shows its
    /// span), in the order of `published`; empty: all of `checks`.
    pub shown: &'static [&'static str],
}

impl Finding {
    /// The paper key, the first part of the id.
    pub fn paper(&self) -> &'static str {
        self.id.split('.').next().unwrap_or("")
    }
}

const fn finding(
    id: &'static str,
    quote: &'static str,
    published: &'static str,
    checks: &'static [&'static str],
    shown: &'static [&'static str],
) -> Finding {
    Finding {
        id,
        quote,
        published,
        checks,
        shown,
    }
}

/// Every finding, in paper order.
#[rustfmt::skip]
pub const FINDINGS: &[Finding] = &[
    // ------------------------------------------------------------ lee2008
    finding("lee2008.tpcb_log_gain",
        "The overall transaction throughput was improved by a factor of 3.5 by using a flash memory SSD drive instead of a hard disk drive as stable storage for transaction log.",
        "3.5x (864 and 3045 TPS)",
        &["lee2008.table3.ssd_over_hdd_tps"], &[]),
    finding("lee2008.commit_gain_low_concurrency",
        "We observed more than an order of magnitude improvement in transaction throughput and response time by replacing magnetic disk with flash memory SSD as storage media for transaction log",
        "more than 10x at low concurrency (Table 2: 12.5x at 4 clients, 11.3x at 8)",
        &["lee2008.table2.order_of_magnitude_*"], &[]),
    finding("lee2008.log_write_time",
        "the considerably lower log write time (1.3 msec on average) of flash memory SSD, compared with about 6 times longer log write time of disk",
        "8.1 ms disk, 1.3 ms SSD",
        &["lee2008.table3.hdd_log_write_ms", "lee2008.table3.ssd_log_write_ms"], &[]),
    finding("lee2008.cpu_saturation",
        "saturated at about 3000 transactions per second [...] the saturation level was considerably higher at approximately 4300 transactions per second",
        "3000 TPS dual core, 4300 quad core",
        &["lee2008.figure3.ssd_dual_saturation", "lee2008.figure3.ssd_quad_saturation", "lee2008.figure3.quad_over_dual"],
        &["lee2008.figure3.ssd_dual_saturation", "lee2008.figure3.ssd_quad_saturation"]),
    finding("lee2008.rollback_reads",
        "flash memory SSD achieved more than an order of magnitude reduction in both read time and total elapsed time [...] approximately 8.2 msec with disk and 0.5 msec with flash memory SSD",
        "15.6x; 8.2 ms and 0.5 ms a page",
        &["lee2008.table4.hdd_over_ssd_read", "lee2008.table4.hdd_page_read_ms", "lee2008.table4.ssd_page_read_ms", "lee2008.table4.ssd_elapsed_s"],
        &["lee2008.table4.hdd_over_ssd_read", "lee2008.table4.hdd_page_read_ms", "lee2008.table4.ssd_page_read_ms"]),
    finding("lee2008.rollback_writes",
        "the average time for writing a block to a rollback segment was 7.1 msec for disk and 6.8 msec for flash memory SSD",
        "7.1 ms disk, 6.8 ms SSD",
        &["lee2008.figure4.hdd_rollback_block_write_ms", "lee2008.figure4.ssd_rollback_block_write_ms"], &[]),
    finding("lee2008.sort_merge_phase",
        "in the second stage of sort for merging runs, the amount of time spent on this stage was almost an order of magnitude shorter in the case of flash memory SSD",
        "about 10x",
        &["lee2008.figure6.merge_hdd_over_ssd"], &[]),
    finding("lee2008.best_cluster_disk",
        "the optimal cluster size [...] of disk (in the range of 64 to 128 KBytes)",
        "64 to 128 KB",
        &["lee2008.figure7.best_cluster_hdd"], &[]),
    finding("lee2008.best_cluster_ssd",
        "the optimal cluster size of flash memory SSD is much smaller (in the range of 2 to 4 KBytes)",
        "2 to 4 KB",
        &["lee2008.figure7.best_cluster_ssd"], &[]),
    finding("lee2008.sort_small_memory",
        "flash memory SSD outperformed disk – by at least a factor of two when the buffer cache was no larger than 20% of the input table size",
        "at least 2x",
        &["lee2008.figure7b.ssd_speedup_at_small_memory"], &[]),
    finding("lee2008.hash_join",
        "the average response time of the hash join was 661.1 seconds with disk and 226.0 seconds with flash memory SSD",
        "2.9x",
        &["lee2008.figure8.hash_join_hdd_over_ssd"], &[]),
    finding("lee2008.sort_merge_join",
        "the average response time of the sort-merge join was 1452.7 seconds with disk and 224.7 seconds with flash memory SSD",
        "6.5x",
        &["lee2008.figure8.sort_merge_join_hdd_over_ssd"], &[]),
    finding("lee2008.joins_alike_on_ssd",
        "when the hash join and sort-merge join queries were executed with flash memory SSD, their response times were almost identical",
        "1.006x",
        &["lee2008.figure8.ssd_hash_vs_sort_merge"], &[]),
    // ------------------------------------------------------------ petrov2010
    finding("petrov2010.4k_over_16k",
        "Clearly for the same number of CPUs and the same buffer size there is a 30% performance advantage for the 4KB page size over 16KB.",
        "30% (20 to 33% by cell, mean 26%)",
        &["petrov2010.table4.advantage_4k_over_16k.*"], &["petrov2010.table4.advantage_4k_over_16k.mean"]),
    finding("petrov2010.response_times",
        "The maxima in transaction throughput for 4KB page size are not only 30% higher they are also achieved at lower response times.",
        "16 KB over 4 KB, mean 1.84x",
        &["petrov2010.table5.response_16k_over_4k.mean"], &[]),
    finding("petrov2010.small_page_less_buffer",
        "the NoTPM throughput for 4KB page size and 640MB buffer size is comparable (7% better) than the throughput for 16KB page size and 2560MB buffer size",
        "1.08x (4 CPUs)",
        &["petrov2010.table4.4k_640mb_over_16k_2560mb.4cpu"], &[]),
    finding("petrov2010.cpus_against_buffer",
        "doubling the CPUs and doubling the buffer size yields the similar increase in the transactional throughput (CPU increase has slightly stronger effect)",
        "29% CPUs, 10% buffer",
        &["petrov2010.figure5.cpu_doubling_increase", "petrov2010.figure5.buffer_doubling_increase"], &[]),
    finding("petrov2010.absolute_maxima",
        "Table 4 Max. TPC-C throughput (NoTPM) for different buffer sizes and number of CPUs",
        "2646 to 6404 NoTPM",
        &["petrov2010.table4.notpm.*"], &[]),
    // ------------------------------------------------------------ lee2007
    finding("lee2007.reads_insensitive_on_flash",
        "Flash memory: Read performance is insensitive to access patterns. Hard disk: Read performance is poor for non-sequential accesses",
        "non-sequential over sequential: flash 1.1 to 1.2x, disk 4.4 to 12.3x",
        &["lee2007.disk_vs_flash.flash.read_pattern.*", "lee2007.disk_vs_flash.disk.read_pattern.*"], &[]),
    finding("lee2007.random_writes_worse",
        "Write performance is poor (worse than disk) for non-sequential accesses due to out-of-place update and erase operations",
        "flash over disk at least 1x (369.9 and 340.7 s)",
        &["lee2007.disk_vs_flash.flash_random_write_worse_than_disk"], &[]),
    finding("lee2007.ipl_cuts_write_time",
        "IPL approach demonstrates its potential for TPC-C type database applications by overcoming the \"erase-before-write\" limitation",
        "IPL below in-place (no number)",
        &["lee2007.ipl_below_block_ftl"], &[]),
    finding("lee2007.segments_fewer_merges",
        "More storage but less frequent merges with more log sectors",
        "fewer merges (no number)",
        &["lee2007.merges_fall_with_segment.*"], &[]),
    // ------------------------------------------------------------ wang2010
    finding("wang2010.mtron",
        "We find that the log-structured file system is superior to traditional file system on Mtron SSD",
        "6x",
        &["wang2010.figure2.mtron_gain"], &[]),
    finding("wang2010.intel",
        "[...] but not outstanding on other SSDs",
        "1x on the Intel",
        &["wang2010.figure2.intel_no_win"], &[]),
    finding("wang2010.ocz",
        "not outstanding on other SSDs. We think it is due to the different character of each SSD.",
        "OCZ between Intel and Mtron",
        &["wang2010.figure2.ocz_above_intel", "wang2010.figure2.ocz_below_mtron"], &[]),
    finding("wang2010.bytes_written",
        "the write amount in bytes are still not changed on EXT2, but it is increased on NILFS2, especially in the case of commercial database",
        "2x",
        &["wang2010.figure7.write_bytes"], &[]),
];

/// Whether a finding is reproduced, from its checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Reproduced,
    Partly,
    NotReproduced,
    NotRun,
}

impl Verdict {
    /// The verdict of checks that passed as `passes`; `None` when one of
    /// them is not in the run.
    pub fn of(passes: &[Option<bool>]) -> Verdict {
        if passes.is_empty() || passes.iter().any(Option::is_none) {
            return Verdict::NotRun;
        }
        let pass = passes.iter().filter(|p| **p == Some(true)).count();
        match pass {
            n if n == passes.len() => Verdict::Reproduced,
            0 => Verdict::NotReproduced,
            _ => Verdict::Partly,
        }
    }

    /// The words the report uses.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Reproduced => "REPRODUCED",
            Verdict::Partly => "PARTLY",
            Verdict::NotReproduced => "NOT REPRODUCED",
            Verdict::NotRun => "not run",
        }
    }

    /// CSS class of the verdict cell.
    pub fn class(self) -> &'static str {
        match self {
            Verdict::Reproduced => "pass",
            Verdict::Partly => "plotted",
            Verdict::NotReproduced => "miss",
            Verdict::NotRun => "note",
        }
    }
}

/// A check as the findings read it back from a unit record.
#[derive(Clone, Debug, Deserialize)]
pub struct Outcome {
    pub id: String,
    pub pass: bool,
    /// `None` when it could not be measured (NaN is null in JSON).
    pub measured: Option<f64>,
    pub unit: String,
    pub what: String,
    pub note: String,
    pub kind: Kind,
    /// The published value (a bound's bound); `None` when not a number.
    pub published: Option<f64>,
    pub form: Form,
}

/// Every check of `records`, as outcomes.
pub fn outcomes(records: &[UnitRecord]) -> Vec<Outcome> {
    records
        .iter()
        .flat_map(|r| r.checks.iter())
        .filter_map(|text| serde_json::from_str(text).ok())
        .collect()
}

/// A finding, evaluated on one run.
#[derive(Clone, Debug, Serialize)]
pub struct FindingResult {
    pub id: &'static str,
    pub paper: &'static str,
    pub quote: &'static str,
    pub published: &'static str,
    /// The measured values of its shown checks, as the table prints them.
    pub measured: String,
    /// The check ids (or `prefix*` families) it rests on.
    pub checks: &'static [&'static str],
    /// Those of them this run made (a family's members, by id).
    pub run_checks: Vec<String>,
    pub verdict: Verdict,
    /// Why it misses, in a line; empty when every check passes.
    pub cause: String,
}

/// The checks of `outcomes` named by `pattern`, sanity assertions apart.
fn matching<'a>(pattern: &str, outcomes: &'a [Outcome]) -> Vec<&'a Outcome> {
    outcomes
        .iter()
        .filter(|o| o.kind != Kind::Sanity && id_matches(pattern, &o.id))
        .collect()
}

/// A value with its unit, "12.5x", "2.87% more", "8.1 ms".
fn with_unit(value: f64, unit: &str) -> String {
    if unit == "x" || unit.starts_with('%') {
        format!("{}{unit}", fmt_num(value))
    } else {
        format!("{} {unit}", fmt_num(value))
    }
}

/// The measured value of the checks `pattern` names: one value (a bound's
/// with the bound, which the run may have measured too), or the span of a
/// family.
fn shown_value(pattern: &str, outcomes: &[Outcome]) -> String {
    let found = matching(pattern, outcomes);
    let values: Vec<f64> = found.iter().filter_map(|o| o.measured).collect();
    let unit = found.first().map_or("", |o| o.unit.as_str());
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    match (values.len(), found.first()) {
        (0, _) => "n/a".into(),
        (1, Some(o)) if o.form == Form::Bound => match o.published {
            Some(bound) => format!("{} (bound {})", with_unit(lo, unit), with_unit(bound, unit)),
            None => with_unit(lo, unit),
        },
        (1, _) => with_unit(lo, unit),
        _ => format!("{} to {}", fmt_num(lo), with_unit(hi, unit)),
    }
}

/// The first sentence of `note`, at most about 200 characters.
fn first_sentence(note: &str) -> String {
    let sentence = note.split(". ").next().unwrap_or("").trim_end_matches('.');
    match sentence.char_indices().nth(200) {
        Some((at, _)) => format!("{}...", &sentence[..at]),
        None => sentence.to_string(),
    }
}

/// Why a finding misses, from the first missed check of those it rests on.
fn cause(rested: &[&Outcome]) -> String {
    let missed: Vec<&&Outcome> = rested.iter().filter(|o| !o.pass).collect();
    let Some(first) = missed.first() else {
        return String::new();
    };
    let why = if !first.note.is_empty() {
        first_sentence(&first.note)
    } else {
        format!(
            "{}: measured {}",
            first.what,
            first
                .measured
                .map_or("n/a".into(), |v| with_unit(v, &first.unit))
        )
    };
    format!("{} of {} checks miss: {why}", missed.len(), rested.len())
}

/// `f` on the checks of one run.
pub fn evaluate(f: &Finding, outcomes: &[Outcome]) -> FindingResult {
    let per_pattern: Vec<Vec<&Outcome>> = f.checks.iter().map(|p| matching(p, outcomes)).collect();
    let rested: Vec<&Outcome> = per_pattern.iter().flatten().copied().collect();
    let passes: Vec<Option<bool>> = per_pattern
        .iter()
        .flat_map(|found| match found.as_slice() {
            [] => vec![None],
            found => found.iter().map(|o| Some(o.pass)).collect(),
        })
        .collect();
    let verdict = Verdict::of(&passes);
    let shown = if f.shown.is_empty() {
        f.checks
    } else {
        f.shown
    };
    let (measured, cause) = if verdict == Verdict::NotRun {
        (
            "not run".to_string(),
            "its experiment is not in this run".to_string(),
        )
    } else {
        let values: Vec<String> = shown.iter().map(|p| shown_value(p, outcomes)).collect();
        (values.join("; "), cause(&rested))
    };
    FindingResult {
        id: f.id,
        paper: f.paper(),
        quote: f.quote,
        published: f.published,
        measured,
        checks: f.checks,
        run_checks: rested.iter().map(|o| o.id.clone()).collect(),
        verdict,
        cause,
    }
}

/// Every finding on the checks of one run.
pub fn evaluate_all(outcomes: &[Outcome]) -> Vec<FindingResult> {
    FINDINGS.iter().map(|f| evaluate(f, outcomes)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Check;
    use crate::experiments::check_ids::is_declared;

    fn outcome(c: &Check) -> Outcome {
        serde_json::from_value(serde_json::to_value(c).unwrap()).unwrap()
    }

    #[test]
    fn every_findings_checks_are_declared_by_an_experiment() {
        for f in FINDINGS {
            assert!(!f.checks.is_empty(), "{}: rests on no check", f.id);
            let papers = crate::published::value("papers")
                .and_then(|v| v.as_table())
                .unwrap();
            assert!(
                papers.contains_key(f.paper()),
                "{}: no paper '{}'",
                f.id,
                f.paper()
            );
            for id in f.checks.iter().chain(f.shown) {
                assert!(
                    is_declared(id),
                    "{}: no experiment declares check '{id}'",
                    f.id
                );
            }
            for id in f.shown {
                assert!(
                    f.checks.contains(id) || f.checks.iter().any(|p| id_matches(p, id)),
                    "{}: shows '{id}', which it does not rest on",
                    f.id
                );
            }
        }
        let ids: std::collections::BTreeSet<_> = FINDINGS.iter().map(|f| f.id).collect();
        assert_eq!(ids.len(), FINDINGS.len(), "finding ids are unique");
    }

    #[test]
    fn a_findings_verdict_follows_its_checks() {
        let f = FINDINGS
            .iter()
            .find(|f| f.id == "lee2008.log_write_time")
            .unwrap();
        let hdd = |m| Check::value("lee2008.table3.hdd_log_write_ms", "p", "w", "ms", 8.1, m);
        let ssd = |m| {
            Check::value("lee2008.table3.ssd_log_write_ms", "p", "w", "ms", 1.3, m)
                .with_miss_note("our log writes are smaller. More words.")
        };
        let run = |checks: &[Check]| evaluate(f, &checks.iter().map(outcome).collect::<Vec<_>>());
        let both = run(&[hdd(8.0), ssd(1.2)]);
        assert_eq!(
            (both.verdict, both.cause.as_str()),
            (Verdict::Reproduced, "")
        );
        assert_eq!(both.measured, "8.00 ms; 1.20 ms");
        let one = run(&[hdd(8.0), ssd(0.6)]);
        assert_eq!(one.verdict, Verdict::Partly);
        assert_eq!(one.cause, "1 of 2 checks miss: our log writes are smaller");
        assert_eq!(run(&[hdd(1.0), ssd(0.6)]).verdict, Verdict::NotReproduced);
        let half = run(&[hdd(8.0)]);
        assert_eq!(
            (half.verdict, half.measured.as_str()),
            (Verdict::NotRun, "not run")
        );
        assert_eq!(run(&[]).verdict, Verdict::NotRun);
    }

    #[test]
    fn a_family_rests_on_every_member_and_shows_its_span() {
        let f = FINDINGS
            .iter()
            .find(|f| f.id == "lee2007.segments_fewer_merges")
            .unwrap();
        let c = |id: &str, m| Check::at_most(id, "p", "w", "merges", 100.0, m);
        let checks = [
            c("lee2007.merges_fall_with_segment.a", 50.0),
            c("lee2007.merges_fall_with_segment.b", 150.0),
        ];
        let r = evaluate(f, &checks.iter().map(outcome).collect::<Vec<_>>());
        assert_eq!(r.verdict, Verdict::Partly);
        assert_eq!(r.run_checks.len(), 2);
        assert_eq!(r.measured, "50.0 to 150.0 merges");
        let f = FINDINGS
            .iter()
            .find(|f| f.id == "lee2007.ipl_cuts_write_time")
            .unwrap();
        let ipl = Check::at_most("lee2007.ipl_below_block_ftl", "p", "w", "ms", 800.0, 17.0);
        let r = evaluate(f, &[outcome(&ipl)]);
        assert_eq!(
            (r.verdict, r.measured.as_str()),
            (Verdict::Reproduced, "17.0 ms (bound 800.0 ms)")
        );
    }
}
