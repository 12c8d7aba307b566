//! lee2008 Figure 6: the I/O pattern of one external sort, disk against
//! flash.

use super::*;
use crate::experiments::skeleton::Study;

/// lee2008 Figure 6.
pub struct Figure6;

/// "Almost an order of magnitude" (lee2008 section 6.1), as a ratio.
const MERGE_ORDER_OF_MAGNITUDE: f64 = 10.0;

/// Figure 6's two sorts.
pub struct Figure6Runs {
    hdd: SortRun,
    ssd: SortRun,
}

impl Figure6Runs {
    fn merge_ratio(&self) -> f64 {
        self.hdd.merge_s / self.ssd.merge_s
    }

    fn generation_ratio(&self) -> f64 {
        self.hdd.run_generation_s / self.ssd.run_generation_s
    }

    fn both(&self) -> [(&'static str, &SortRun); 2] {
        [("hdd", &self.hdd), ("ssd", &self.ssd)]
    }
}

/// What every trace figure of an external sort shows.
const TRACE_CAPTION: &str = "Time x address of every temp-space request: runs written one after the other (writes), then the merge reading all runs in parallel (reads scattered over the whole region).";

impl Study for Figure6 {
    type Measured = Figure6Runs;

    fn measure(&self, ctx: &RunContext) -> anyhow::Result<Figure6Runs> {
        let key = "lee2008.figure7_external_sort";
        let cluster = |dev: &str| {
            published::number(&format!("{key}.buffer_sweep_cluster_kb_{dev}")).unwrap_or(64.0)
                as usize
                * KB
        };
        let n = tuples(ctx);
        let steps = ctx.steps(2);
        Ok(Figure6Runs {
            hdd: steps.after(sort_once(ctx, HDD, n, MEMORY_BYTES, cluster("hdd"), true)?),
            ssd: steps.after(sort_once(ctx, SSD, n, MEMORY_BYTES, cluster("ssd"), true)?),
        })
    }

    fn description(&self, ctx: &RunContext, _: &Figure6Runs) -> String {
        format!(
            "One external sort of the sort benchmark's records with 2 MB of memory, temp space on the modelled 2008 disk or SSD, at the cluster sizes the paper used for each (64 KB and 2 KB, its Figure 7a optima); {}.",
            scale_note(ctx)
        )
    }

    fn tables(&self, m: &Figure6Runs) -> Vec<Table> {
        let rows = m
            .both()
            .iter()
            .map(|(_, r)| {
                vec![
                    r.device.clone(),
                    (r.cluster_bytes / KB).to_string(),
                    r.stats.runs.to_string(),
                    r.stats.final_fan_in.to_string(),
                    format!("{:.2}", r.stats.passes),
                    s(r.run_generation_s),
                    s(r.merge_s),
                    s(r.elapsed_s),
                ]
            })
            .collect();
        vec![Table::new(
            "The two phases",
            &[
                "device",
                "cluster KB",
                "runs",
                "merge fan-in",
                "passes",
                "run generation s",
                "merge s",
                "total s",
            ],
            rows,
        )]
    }

    // lee2008 section 6.1 gives the two phases in words: run generation
    // "comparable" on both devices (read as a ratio of 1), the merge
    // "almost an order of magnitude shorter" on the SSD (read as 10).
    fn checks(&self, m: &Figure6Runs) -> Vec<Check> {
        let (hdd, ssd) = (&m.hdd, &m.ssd);
        vec![
            Check::ratio(
                "lee2008.figure6.merge_hdd_over_ssd",
                "lee2008 Figure 6 (section 6.1)",
                "merge phase, disk time over SSD time (\"almost an order of magnitude\", read as 10)",
                MERGE_ORDER_OF_MAGNITUDE,
                m.merge_ratio(),
            )
            .with_miss_note(&format!(
                "the disk merged in {:.1} s and the SSD in {:.1} s ({} runs, up to {} reads in flight on the SSD and {} on the disk): the disk's 64 KB clusters amortise a seek and a rotation over 32 times the SSD's 2 KB, whose fixed per-request cost ({} ms a read, lee2008 Table 1) the SSD's parallel dies overlap only as far as its serial controller allows",
                hdd.merge_s, ssd.merge_s, ssd.stats.runs, ssd.stats.forecast.in_flight_peak, hdd.stats.forecast.in_flight_peak, 0.2
            )),
            Check::ratio(
                "lee2008.figure6.run_generation_hdd_over_ssd",
                "lee2008 Figure 6 (section 6.1)",
                "run generation, disk time over SSD time (\"comparable\", read as 1)",
                1.0,
                m.generation_ratio(),
            )
            .with_miss_note(&format!(
                "run generation took {:.1} s on the disk and {:.1} s on the SSD: with {} clusters written behind the one being filled the SSD writes its 2 KB clusters at {:.1} MB/s over the phase (its sustained write rate: 32 MB/s, lee2008 Table 1), against the disk's {:.1} MB/s, and neither writes while a memory load is quicksorted",
                hdd.run_generation_s,
                ssd.run_generation_s,
                ssd.stats.write_behind_clusters,
                super::figure7::mb_per_s(ssd.stats.input_bytes, ssd.run_generation_s),
                super::figure7::mb_per_s(hdd.stats.input_bytes, hdd.run_generation_s)
            )),
        ]
    }

    fn figures(&self, m: &Figure6Runs) -> anyhow::Result<Vec<Figure>> {
        trace_figures("lee2008-figure6", TRACE_CAPTION, &m.both(), |r| {
            let kb = r.cluster_bytes / KB;
            let device = &r.device;
            let title =
                format!("External sort, temp space on {device} ({kb} KB clusters, 2 MB memory)");
            (title, r.trace.as_slice())
        })
    }

    fn notes(&self, m: &Figure6Runs) -> Vec<String> {
        vec![
            format!("Run generation took {:.2} times as long on the disk as on the SSD (the paper: comparable); merging took {:.1} times as long (the paper: almost an order of magnitude). Charged CPU: {:.1} s on the disk run, {:.1} s on the SSD run.", m.generation_ratio(), m.merge_ratio(), m.hdd.stats.cpu_ns as f64 / NS_PER_S as f64, m.ssd.stats.cpu_ns as f64 / NS_PER_S as f64),
            "Runs are written with write-behind (two clusters in flight behind the one being filled). The modelled disk has its write cache off, so whenever the CPU of filling a cluster outlasts the previous write the platter turns past the next sector and the write waits for it; small clusters pay this most. The merge forecasts which run runs dry next (the run whose buffered data ends with the smallest key) and keeps up to 32 cluster reads in flight in the memory its inputs leave: on the SSD its dies serve them in parallel, on the disk each still costs a seek and a rotational delay, but the next request is always queued.".into(),
        ]
    }

    fn data(&self, m: &Figure6Runs) -> serde_json::Value {
        serde_json::json!({"hdd": m.hdd, "ssd": m.ssd})
    }

    fn raw_files(&self, m: &Figure6Runs) -> anyhow::Result<Vec<RawFile>> {
        m.both()
            .iter()
            .map(|(name, r)| trace_csv(&format!("lee2008-figure6-{name}-temp-trace.csv"), &r.trace))
            .collect()
    }
}
