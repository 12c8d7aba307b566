//! What the report covers: every table and figure of every paper.
//!
//! [`COVERAGE`] lists each table and figure of the papers in
//! `shared/papers/` (lee2008, petrov2010, the lee2007 and Berseth slides,
//! wang2010) with its status and the experiments that reproduce it; the
//! report's first screen prints it as a table with links to the
//! experiments' sections. It is a static list in this one file so that a
//! change that adds an experiment adds or updates its rows here; the tests
//! check that every experiment of the registry appears in it and that
//! every experiment it names exists.

/// How far an item is reproduced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Reproduced, with fidelity checks under the report's rule; the report
    /// shows how many pass ([`checked_label`]), not a blanket verdict.
    Checked,
    /// Reproduced and drawn (or tabulated), with no check on it.
    Plotted,
    /// Not reproduced yet.
    NotYet,
    /// A diagram or photograph, or a table whose numbers the text lacks:
    /// nothing measured to reproduce.
    NoData,
}

impl Status {
    /// The words the report uses.
    pub fn label(self) -> &'static str {
        match self {
            Status::Checked => "reproduced and checked",
            Status::Plotted => "plotted without checks",
            Status::NotYet => "not yet",
            Status::NoData => "no data (a diagram, or no numbers in the text)",
        }
    }

    /// CSS class of the status cell.
    pub fn class(self) -> &'static str {
        match self {
            Status::Checked => "pass",
            Status::Plotted => "plotted",
            Status::NotYet => "miss",
            Status::NoData => "note",
        }
    }
}

/// One table or figure of one paper.
#[derive(Clone, Copy, Debug)]
pub struct Item {
    /// Paper key, as in `results.toml`'s `[papers]`.
    pub paper: &'static str,
    /// "Table 2", "Figure 7", a slide's title.
    pub item: &'static str,
    /// What it shows, in a few words.
    pub what: &'static str,
    pub status: Status,
    /// Experiment ids (`flashlab reproduce --only`) that reproduce it.
    pub experiments: &'static [&'static str],
    /// The check ids (or `prefix*` families) on it; a checked row shows how
    /// many of them pass in the run.
    pub checks: &'static [&'static str],
    /// What is missing or how it is covered, when that needs saying.
    pub note: &'static str,
}

const fn item(
    paper: &'static str,
    item: &'static str,
    what: &'static str,
    status: Status,
    experiments: &'static [&'static str],
    checks: &'static [&'static str],
    note: &'static str,
) -> Item {
    Item {
        paper,
        item,
        what,
        status,
        experiments,
        checks,
        note,
    }
}

use Status::{Checked, NoData, NotYet, Plotted};

use crate::check::{Kind, id_matches};
use crate::findings::Outcome;

/// Every table and figure of every paper, in paper order.
#[rustfmt::skip]
pub const COVERAGE: &[Item] = &[
    // ------------------------------------------------------------ lee2008
    item("lee2008", "Figure 1", "dual-channel SSD architecture", NoData, &[], &[], ""),
    item("lee2008", "Table 1", "disk against SSD: latency, sustained transfer", Checked, &["devices"], &["devices.hdd-2008.*", "devices.ssd-2008.*"], "calibration: hdd-2008 and ssd-2008 were set from it"),
    item("lee2008", "Figure 2", "photograph of the Samsung SSD", NoData, &[], &[], ""),
    item("lee2008", "Table 2", "update-commit TPS and %CPU, 4 to 64 clients", Checked, &["lee2008-table2"], &["lee2008.table2.*"], "the 64-client SSD row is the CPU model's calibration point"),
    item("lee2008", "Table 3", "TPC-B with 20 clients: TPS, %CPU, log writes", Checked, &["lee2008-table3"], &["lee2008.table3.*"], ""),
    item("lee2008", "Figure 3", "TPC-B TPS against clients, dual and quad core", Checked, &["lee2008-figure3"], &["lee2008.figure3.*"], ""),
    item("lee2008", "Figure 4", "rollback-segment writes under TPC-C, time x address", Checked, &["lee2008-figure4"], &["lee2008.figure4.*"], "TPC-C as the paper ran it; the mean block write time on disk and SSD is checked, the pattern plotted"),
    item("lee2008", "Figure 5", "rollback reads of a snapshot scan, time x address", Checked, &["lee2008-table4"], &["lee2008.figure5.*"], "calibration: the aged rollback space's 1 GB span is set from it"),
    item("lee2008", "Table 4", "undo read performance, disk and SSD", Checked, &["lee2008-table4"], &["lee2008.table4.*"], ""),
    item("lee2008", "Figure 6", "external sort I/O pattern, time x address", Checked, &["lee2008-figure6"], &["lee2008.figure6.*"], "the two phases' disk/SSD ratios are checked; the pattern itself is plotted"),
    item("lee2008", "Figure 7", "external sort time against cluster size (a) and memory (b)", Checked, &["lee2008-figure7"], &["lee2008.figure7.*", "lee2008.figure7b.*"], ""),
    item("lee2008", "Figure 8", "hash join and sort-merge join, I/O pattern and time", Checked, &["lee2008-figure8"], &["lee2008.figure8.*"], ""),
    // ------------------------------------------------------------ petrov2010
    item("petrov2010", "Table 1", "enterprise HDD against SSD: sequential, random, IOPS", Checked, &["devices"], &["devices.hdd-2010.*", "devices.ssd-2010.*"], "calibration: hdd-2010 and ssd-2010 were set from it"),
    item("petrov2010", "Figure 1", "random throughput of SSDs", NotYet, &[], &[], "no published numbers in results.toml"),
    item("petrov2010", "Figure 2", "sequential throughput of SSDs", NotYet, &[], &[], "no published numbers in results.toml; the devices experiment plots the presets' sequential bandwidth"),
    item("petrov2010", "Table 2", "average and maximum 4 KB latency", NoData, &[], &[], "the text copy has the caption and no numbers"),
    item("petrov2010", "Figure 3", "random throughput against block size", NotYet, &[], &[], ""),
    item("petrov2010", "Table 3", "the 8-SSD array: sequential and random throughput and latency", Checked, &["devices"], &["devices.ssd-array-2010.*"], "calibration: ssd-array-2010 was set from it"),
    item("petrov2010", "Figure 4", "TPC-C NoTPM and response times, 4 KB and 16 KB pages", Plotted, &["petrov2010-table4"], &[], "the sweeps are plotted at a 1/100 scale; their maxima are Table 4"),
    item("petrov2010", "Table 4", "maximum TPC-C NoTPM by buffer, CPUs and page size", Checked, &["petrov2010-table4"], &["petrov2010.table4.*"], "the 4 KB over 16 KB ratios and the absolute NoTPM"),
    item("petrov2010", "Table 5", "New-Order response times at the maxima", Checked, &["petrov2010-table4"], &["petrov2010.table5.*"], "the mean 16 KB over 4 KB ratio"),
    item("petrov2010", "Figure 5", "NoTPM growth with CPUs and buffer size", Checked, &["petrov2010-figure5"], &["petrov2010.figure5.*"], "the increase from doubling CPUs and from doubling the buffer"),
    // ------------------------------------------------------------ lee2007 (slides)
    item("lee2007", "Magnetic disk vs NAND flash", "read, write and erase times", Checked, &["devices"], &["lee2007.devices.*"], "calibration: hdd-seagate-7200-7's read and write times are checked; the NAND timings are ssd-2008's sources"),
    item("lee2007", "Disk-based DBMS performance: read", "sequential and non-sequential table reads, disk and flash", Checked, &["lee2007-disk-vs-flash"], &["lee2007.disk_vs_flash.disk.read_*", "lee2007.disk_vs_flash.flash.read_*"], "the non-sequential range from two clusterings of the index"),
    item("lee2007", "Disk-based DBMS performance: write", "sequential and non-sequential table writes, disk and flash", Checked, &["lee2007-disk-vs-flash"], &["lee2007.disk_vs_flash.disk.write_*", "lee2007.disk_vs_flash.flash.write_*", "lee2007.disk_vs_flash.flash_random_write_worse_than_disk"], "the non-sequential range from two clusterings of the index"),
    item("lee2007", "Design of the IPL", "in-page logging layout", NoData, &[], &[], ""),
    item("lee2007", "Log segment size vs merges", "merges against log segment size, TPC-C traces", Checked, &["lee2007-ipl"], &["lee2007.merges_fall_with_segment.*"], "the engine's IPL store on raw NAND, TPC-C at a tenth of the traces' size; the slides give no numbers: the check is the shape (fewer merges with larger segments)"),
    item("lee2007", "Estimated write performance (a)-(c)", "sector writes, merges and estimated write time against buffer size", Checked, &["lee2007-ipl"], &["lee2007.ipl_below_block_ftl", "lee2007.buffer_cuts_sector_writes", "lee2007.log_record_bytes_*"], "shapes only (the slides give no numbers): a larger buffer cuts sector writes; IPL below in-place on a block-mapping FTL; records of 20 to 50 bytes; alpha in (0, 1] is a sanity assertion, pinned by the FTL's construction"),
    // ------------------------------------------------------------ Berseth (slides)
    item("berseth", "SSD structure, internals", "diagrams", NoData, &[], &[], ""),
    item("berseth", "Caveats of SSDs (table)", "lee2008 Table 1", Checked, &["devices"], &["devices.hdd-2008.*", "devices.ssd-2008.*"], "the same figures as lee2008 Table 1"),
    item("berseth", "SSD and HDD comparisons (TPS)", "lee2008 Table 2", Checked, &["lee2008-table2"], &["lee2008.table2.*"], "the same figures as lee2008 Table 2"),
    item("berseth", "TPC-B / CPU factor", "lee2008 Table 3 and Figure 3", Checked, &["lee2008-table3", "lee2008-figure3"], &["lee2008.table3.*", "lee2008.figure3.*"], ""),
    item("berseth", "MVCC write performance", "lee2008 Figure 4", Checked, &["lee2008-figure4"], &["lee2008.figure4.*"], "the same figure as lee2008 Figure 4: the mean block write time on disk and SSD"),
    item("berseth", "MVCC read performance", "lee2008 Table 4 and Figure 5", Checked, &["lee2008-table4"], &["lee2008.table4.*", "lee2008.figure5.*"], ""),
    item("berseth", "External sorting", "lee2008 Figures 6 and 7", Checked, &["lee2008-figure6", "lee2008-figure7"], &["lee2008.figure6.*", "lee2008.figure7.*", "lee2008.figure7b.*"], ""),
    item("berseth", "Hash join, sort-merge join", "lee2008 Figure 8", Checked, &["lee2008-figure8"], &["lee2008.figure8.*"], ""),
    item("berseth", "Evaluating example", "worked external-sort I/O cost arithmetic", NotYet, &[], &[], ""),
    // ------------------------------------------------------------ wang2010
    item("wang2010", "Fig. 1", "system configuration", NoData, &[], &[], ""),
    item("wang2010", "Fig. 2", "TPC-C throughput, EXT2 against NILFS2 on three SSDs", Checked, &["wang2010-lfs"], &["wang2010.figure2.*"], "in-place against log-structured page stores; the gains and their order are checked"),
    item("wang2010", "Fig. 3", "I/O path in the Linux kernel", NoData, &[], &[], ""),
    item("wang2010", "Figs. 4 and 6", "VFS against block layer: requests and bytes per transaction, reads absorbed by the file-system cache", NotYet, &[], &[], "flashlab has no VFS layer or file-system cache, so the reads it absorbs are not modelled"),
    item("wang2010", "Figs. 5 and 7", "VFS against block layer: write requests and bytes per transaction", Checked, &["wang2010-lfs"], &["wang2010.figure7.write_bytes"], "the data space's write requests and bytes per transaction are tabulated; the write bytes ratio (Fig. 7) is checked"),
    item("wang2010", "Figs. 8-9", "block layer against I/O scheduler: requests and bytes", NotYet, &[], &[], ""),
    item("wang2010", "Fig. 10", "sector addresses after the scheduler, time x address", Plotted, &["wang2010-lfs"], &[], "the data space's writes on the Mtron-class SSD, in place and log-structured, through the write scheduler"),
    item("wang2010", "Fig. 11", "sequential over random I/O ratio on three SSDs", Checked, &["devices"], &["wang2010.figure11.*"], "calibration: ssd-2008-poor-random (Mtron), ssd-vertex-2009 (OCZ) and ssd-2010 (Intel X25-E) measured at 4 to 256 KB and plotted; the bars are not in the text copy, so the 4, 8 and 16 KB points are checked against section 4.2's numbers"),
];

/// The status cell of `item` in a run whose checks are `outcomes` and whose
/// experiments are `experiments`, and its CSS class. A checked row counts
/// its checks that pass (sanity assertions are not counted): green only
/// when all do, red when none does.
pub fn status_cell(
    item: &Item,
    outcomes: &[Outcome],
    experiments: &[&str],
) -> (String, &'static str) {
    if item.status != Status::Checked {
        return (item.status.label().to_string(), item.status.class());
    }
    if !item.experiments.iter().all(|e| experiments.contains(e)) {
        return ("checked (not in this run)".to_string(), "note");
    }
    let named: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.kind != Kind::Sanity && item.checks.iter().any(|p| id_matches(p, &o.id)))
        .collect();
    let pass = named.iter().filter(|o| o.pass).count();
    let class = match pass {
        _ if named.is_empty() => "note",
        n if n == named.len() => "pass",
        0 => "miss",
        _ => "plotted",
    };
    (format!("checked: {pass} of {} pass", named.len()), class)
}

/// Items per status, in [`Status`] order: checked, plotted, not yet, no data.
pub fn counts() -> [usize; 4] {
    let mut counts = [0; 4];
    for i in COVERAGE {
        counts[i.status as usize] += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments;

    #[test]
    fn every_experiment_of_the_registry_is_in_the_coverage_list() {
        for id in experiments::ids() {
            assert!(
                COVERAGE.iter().any(|i| i.experiments.contains(&id)),
                "experiment '{id}' is not named in coverage::COVERAGE: add a row for what it reproduces"
            );
        }
    }

    #[test]
    fn every_experiment_the_coverage_list_names_exists_and_statuses_agree() {
        let ids = experiments::ids();
        for i in COVERAGE {
            for id in i.experiments {
                assert!(
                    ids.contains(id),
                    "{} {}: no experiment '{id}'",
                    i.paper,
                    i.item
                );
            }
            let reproduced = matches!(i.status, Status::Checked | Status::Plotted);
            assert_eq!(
                reproduced,
                !i.experiments.is_empty(),
                "{} {}: a reproduced item names its experiments, and only those do",
                i.paper,
                i.item
            );
        }
    }

    #[test]
    fn checked_rows_name_declared_checks_and_only_they_do() {
        for i in COVERAGE {
            assert_eq!(
                i.status == Status::Checked,
                !i.checks.is_empty(),
                "{} {}: a checked row names its checks, and only those do",
                i.paper,
                i.item
            );
            for id in i.checks {
                assert!(
                    crate::experiments::check_ids::is_declared(id),
                    "{} {}: no experiment declares '{id}'",
                    i.paper,
                    i.item
                );
            }
        }
    }

    #[test]
    fn a_checked_row_shows_its_pass_count_and_is_green_only_when_all_pass() {
        let row = COVERAGE.iter().find(|i| i.item == "Figure 6").unwrap();
        let o = |id: &str, pass: bool| Outcome {
            id: id.into(),
            pass,
            measured: Some(1.0),
            unit: "x".into(),
            what: "w".into(),
            note: String::new(),
            kind: Kind::Prediction,
            published: Some(1.0),
            form: crate::check::Form::Ratio,
        };
        let (merge, run_generation) = (
            "lee2008.figure6.merge_hdd_over_ssd",
            "lee2008.figure6.run_generation_hdd_over_ssd",
        );
        // (case, outcomes as (check, pass), whether the row's experiment
        // ran, cell)
        type Passes<'a> = &'a [(&'a str, bool)];
        let cases: [(&str, Passes, bool, (&str, &str)); 4] = [
            (
                "one of two passes",
                &[(merge, false), (run_generation, true)],
                true,
                ("checked: 1 of 2 pass", "plotted"),
            ),
            (
                "none passes",
                &[(merge, false)],
                true,
                ("checked: 0 of 1 pass", "miss"),
            ),
            (
                "all of its own pass; another row's check does not count",
                &[(merge, true), ("lee2007.alpha_positive", false)],
                true,
                ("checked: 1 of 1 pass", "pass"),
            ),
            (
                "its experiment not run",
                &[(merge, true), ("lee2007.alpha_positive", false)],
                false,
                ("checked (not in this run)", "note"),
            ),
        ];
        for (case, checks, ran, (text, class)) in cases {
            let outcomes: Vec<Outcome> = checks.iter().map(|&(id, pass)| o(id, pass)).collect();
            let experiments: &[&str] = if ran { &["lee2008-figure6"] } else { &[] };
            assert_eq!(
                status_cell(row, &outcomes, experiments),
                (text.to_string(), class),
                "{case}"
            );
        }
    }

    #[test]
    fn the_rows_that_share_a_figure_agree() {
        let row = |paper: &str, item: &str| {
            COVERAGE
                .iter()
                .find(|i| i.paper == paper && i.item == item)
                .unwrap()
        };
        let (lee, berseth) = (
            row("lee2008", "Figure 4"),
            row("berseth", "MVCC write performance"),
        );
        assert_eq!((lee.status, lee.checks), (berseth.status, berseth.checks));
    }

    #[test]
    fn every_paper_in_the_published_figures_has_rows() {
        let papers = crate::published::value("papers")
            .and_then(|v| v.as_table())
            .expect("results.toml has [papers]");
        for paper in papers.keys() {
            assert!(
                COVERAGE.iter().any(|i| i.paper == paper),
                "paper '{paper}' has no coverage rows"
            );
        }
    }
}
