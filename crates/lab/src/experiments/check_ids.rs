//! The check ids each experiment declares: what findings
//! ([`crate::findings`]) and coverage rows ([`crate::coverage`]) may rest
//! on, known without running minutes of simulation.
//!
//! An entry is an exact id or a family (`prefix*`) whose members depend on
//! the run (a sweep's cells, `--quick`'s smaller set of traces).
//! [`super::skeleton::run_study`] refuses a run whose checks and
//! declaration disagree: every check it made is declared, and every
//! declared id or family was made, so a finding never rests on an id no
//! experiment produces.

use crate::check::id_matches;

/// Experiment id, then the check ids and families it makes.
#[rustfmt::skip]
pub const DECLARED: &[(&str, &[&str])] = &[
    ("devices", &[
        "devices.hdd-2008.*", "devices.ssd-2008.*", "devices.hdd-2010.*", "devices.ssd-2010.*",
        "devices.ssd-array-2010.*", "lee2007.devices.hdd-seagate-7200-7.read_ms",
        "lee2007.devices.hdd-seagate-7200-7.write_ms", "wang2010.figure11.mtron.*",
        "wang2010.figure11.ocz.*", "wang2010.figure11.intel.*",
    ]),
    ("lee2008-table2", &[
        "lee2008.table2.ssd_over_hdd_4", "lee2008.table2.hdd_64_over_4",
        "lee2008.table2.order_of_magnitude_*",
        "lee2008.table2.hdd_tps_*", "lee2008.table2.hdd_cpu_pct_*",
        "lee2008.table2.ssd_tps_*", "lee2008.table2.ssd_cpu_pct_*",
        "lee2008.table2.ssd_saturation_clients", "lee2008.table2.cpu_per_txn",
    ]),
    ("lee2008-table3", &[
        "lee2008.table3.ssd_over_hdd_tps", "lee2008.table3.hdd_tps", "lee2008.table3.ssd_tps",
        "lee2008.table3.hdd_cpu_pct", "lee2008.table3.ssd_cpu_pct",
        "lee2008.table3.hdd_log_write_ms", "lee2008.table3.ssd_log_write_ms",
        "lee2008.table3.cpu_per_txn",
    ]),
    ("lee2008-figure3", &[
        "lee2008.figure3.ssd_dual_saturation", "lee2008.figure3.ssd_quad_saturation",
        "lee2008.figure3.quad_over_dual",
    ]),
    ("lee2008-table4", &[
        "lee2008.table4.rollback_pages_read", "lee2008.table4.hdd_over_ssd_read",
        "lee2008.table4.ssd_elapsed_s", "lee2008.table4.hdd_page_read_ms",
        "lee2008.figure5.read_span_gb", "lee2008.table4.ssd_page_read_ms",
    ]),
    ("lee2008-figure4", &[
        "lee2008.figure4.hdd_rollback_block_write_ms", "lee2008.figure4.ssd_rollback_block_write_ms",
    ]),
    ("lee2008-figure6", &[
        "lee2008.figure6.merge_hdd_over_ssd", "lee2008.figure6.run_generation_hdd_over_ssd",
    ]),
    ("lee2008-figure7", &[
        "lee2008.figure7.best_cluster_hdd", "lee2008.figure7.best_cluster_ssd",
        "lee2008.figure7.sensitivity_ssd_over_hdd", "lee2008.figure7b.ssd_speedup_at_small_memory",
    ]),
    ("lee2008-figure8", &[
        "lee2008.figure8.hash_join_hdd_over_ssd", "lee2008.figure8.sort_merge_join_hdd_over_ssd",
        "lee2008.figure8.ssd_hash_vs_sort_merge",
    ]),
    ("petrov2010-table4", &[
        "petrov2010.table4.advantage_4k_over_16k.*", "petrov2010.table5.response_16k_over_4k.mean",
        "petrov2010.table4.4k_640mb_over_16k_2560mb.4cpu", "petrov2010.table4.notpm.*",
    ]),
    ("petrov2010-figure5", &[
        "petrov2010.figure5.cpu_doubling_increase", "petrov2010.figure5.buffer_doubling_increase",
    ]),
    ("lee2007-disk-vs-flash", &[
        "lee2007.disk_vs_flash.disk.read_sequential", "lee2007.disk_vs_flash.flash.read_sequential",
        "lee2007.disk_vs_flash.disk.read_indexed_*", "lee2007.disk_vs_flash.flash.read_indexed_*",
        "lee2007.disk_vs_flash.disk.write_sequential", "lee2007.disk_vs_flash.flash.write_sequential",
        "lee2007.disk_vs_flash.disk.write_indexed_*", "lee2007.disk_vs_flash.flash.write_indexed_*",
        "lee2007.disk_vs_flash.flash_random_write_worse_than_disk",
        "lee2007.disk_vs_flash.disk.read_pattern.*", "lee2007.disk_vs_flash.flash.read_pattern.*",
    ]),
    ("lee2007-ipl", &[
        "lee2007.merges_fall_with_segment.*", "lee2007.ipl_below_block_ftl",
        "lee2007.buffer_cuts_sector_writes", "lee2007.alpha_at_most_1", "lee2007.alpha_positive",
        "lee2007.log_record_bytes_min", "lee2007.log_record_bytes_max",
    ]),
    ("wang2010-lfs", &[
        "wang2010.figure2.mtron_gain", "wang2010.figure2.intel_no_win",
        "wang2010.figure2.ocz_above_intel", "wang2010.figure2.ocz_below_mtron",
        "wang2010.figure7.write_bytes",
    ]),
];

/// The ids and families experiment `id` declares.
pub fn declared(id: &str) -> Option<&'static [&'static str]> {
    DECLARED.iter().find(|(e, _)| *e == id).map(|(_, ids)| *ids)
}

/// True when `pattern` (an id or a family) names something an experiment
/// declares: an exact id equal to a declared id or inside a declared
/// family, or a family overlapping a declared id or family.
pub fn is_declared(pattern: &str) -> bool {
    DECLARED.iter().flat_map(|(_, ids)| ids.iter()).any(|d| {
        match (pattern.strip_suffix('*'), d.strip_suffix('*')) {
            (None, _) => id_matches(d, pattern),
            (Some(p), None) => d.starts_with(p),
            (Some(p), Some(q)) => p.starts_with(q) || q.starts_with(p),
        }
    })
}

/// How the checks `made` by experiment `id` disagree with its declaration,
/// if they do (an experiment that makes no checks needs none).
pub fn disagreement(id: &str, made: &[&str]) -> Option<String> {
    let Some(ids) = declared(id) else {
        if made.is_empty() {
            return None;
        }
        return Some(format!(
            "{id}: no check ids declared in experiments::check_ids::DECLARED"
        ));
    };
    if let Some(extra) = made.iter().find(|m| !ids.iter().any(|d| id_matches(d, m))) {
        return Some(format!(
            "{id}: check '{extra}' is not declared in experiments::check_ids::DECLARED"
        ));
    }
    ids.iter()
        .find(|d| !made.iter().any(|m| id_matches(d, m)))
        .map(|d| format!("{id}: declared check '{d}' was not made by the run"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_experiment_declares_its_checks_and_only_experiments_do() {
        let ids = super::super::ids();
        for id in &ids {
            assert!(declared(id).is_some(), "{id} declares no check ids");
        }
        for (e, _) in DECLARED {
            assert!(ids.contains(e), "DECLARED names no experiment '{e}'");
        }
    }

    #[test]
    fn a_disagreement_is_found_either_way() {
        let made = ["lee2008.figure6.merge_hdd_over_ssd"];
        let missing = disagreement("lee2008-figure6", &made).expect("one declared id is missing");
        assert!(missing.contains("run_generation"), "{missing}");
        let made = [
            "lee2008.figure6.merge_hdd_over_ssd",
            "lee2008.figure6.run_generation_hdd_over_ssd",
        ];
        assert_eq!(disagreement("lee2008-figure6", &made), None);
        let extra = [made[0], made[1], "lee2008.figure6.new"];
        assert!(disagreement("lee2008-figure6", &extra).is_some());
        assert!(is_declared("lee2007.merges_fall_with_segment.1G.20M.100u"));
        assert!(is_declared("petrov2010.table4.notpm.*"));
        assert!(!is_declared("lee2008.table3.no_such_check"));
    }
}
