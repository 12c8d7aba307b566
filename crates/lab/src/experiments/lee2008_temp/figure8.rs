//! lee2008 Figure 8: hash join and sort-merge join, disk against flash.

use super::*;
use crate::experiments::skeleton::Study;
use anyhow::anyhow;

/// lee2008 Figure 8.
///
/// The paper does not give its cluster size for the joins. Both joins here
/// use one cluster on both devices, chosen by a planner's rule rather than
/// by measurement: the largest power of two with which the hash join needs
/// a single partitioning pass ([`HashJoinConfig::single_pass_cluster_bytes`]:
/// 8 KB for a 200 MB build input and 2 MB of memory, since about 170
/// partitions are needed). The sort-merge join's sorts use the same
/// cluster, so the joins and the devices differ only in what is compared.
pub struct Figure8;

/// Figure 8's joins.
pub struct Figure8Runs {
    /// The cluster (and partition page) size, bytes.
    cluster_bytes: usize,
    hash_hdd: JoinRun,
    hash_ssd: JoinRun,
    sort_merge_hdd: JoinRun,
    sort_merge_ssd: JoinRun,
    /// The hash join with per-partition regions, for comparison.
    regions_hdd: JoinRun,
    regions_ssd: JoinRun,
}

impl Figure8Runs {
    /// The four runs the paper shows, named for their figures and files.
    fn traced(&self) -> [(&'static str, &JoinRun); 4] {
        [
            ("hash-hdd", &self.hash_hdd),
            ("hash-ssd", &self.hash_ssd),
            ("sort-merge-hdd", &self.sort_merge_hdd),
            ("sort-merge-ssd", &self.sort_merge_ssd),
        ]
    }
}

const KEY: &str = "lee2008.figure8_joins";

fn published(field: &str) -> f64 {
    published::number(&format!("{KEY}.{field}")).unwrap_or(f64::NAN)
}

/// Why the two joins differ on the SSD, in the measured numbers.
fn pair_note(hj: &JoinRun, smj: &JoinRun) -> String {
    let base = format!(
        "on the SSD the hash join took {:.1} s ({:.1} s partitioning, {:.1} s reading back) and the sort-merge join {:.1} s ({:.1} s sorting, {:.1} s merging)",
        hj.elapsed_s,
        hj.first_phase_s,
        hj.elapsed_s - hj.first_phase_s,
        smj.elapsed_s,
        smj.first_phase_s,
        smj.elapsed_s - smj.first_phase_s
    );
    let Some(sm) = &smj.sort_merge else {
        return base;
    };
    let (l, r) = (&sm.left, &sm.right);
    let read = l.clusters_read + r.clusters_read;
    let on_demand = l.forecast.on_demand + r.forecast.on_demand;
    format!(
        "{base}. Both joins write every tuple once in {} KB clusters, but the sort-merge join's run generation (a quicksort of each memory load, then its run writes, which stop while each load is sorted) takes {:.1} s against the hash join's partitioning in {:.1} s, and its two final merges of {} runs share the clusters their inputs leave: {} and {} forecast buffers, so {} of its {} cluster reads waited for no read issued ahead, where the hash join reads each partition up to {} pages ahead",
        l.cluster_bytes / KB as u64,
        smj.first_phase_s,
        hj.first_phase_s,
        l.final_runs + r.final_runs,
        l.forecast.buffers_peak,
        r.forecast.buffers_peak,
        on_demand,
        read,
        hj.hash.as_ref().map_or(0, |h| h.reads_in_flight_peak),
    )
}

/// Why a disk-over-SSD ratio misses: the phases of both runs, and the
/// device-independent time that would have brought it into `lo..hi`.
fn floor_note(what: &str, h: &JoinRun, sd: &JoinRun, lo: f64, hi: f64) -> String {
    let cpu_s = |r: &JoinRun| {
        r.hash
            .as_ref()
            .map(|x| x.cpu_ns)
            .or(r.sort_merge.as_ref().map(|x| x.cpu_ns))
            .unwrap_or(0) as f64
            / NS_PER_S as f64
    };
    let f_lo = ((h.elapsed_s - hi * sd.elapsed_s) / (hi - 1.0)).max(0.0);
    let f_hi = (h.elapsed_s - lo * sd.elapsed_s) / (lo - 1.0);
    format!(
        "{what}: the disk took {:.1} s ({:.1} s writing, {:.1} s reading back) and the SSD {:.1} s ({:.1} s, {:.1} s), each including {:.1} s of charged CPU. The disk pays a seek and a rotation for every scattered read (and, with its write cache off, a wait for the platter whenever the CPU of filling a page outlasts the previous write), the SSD a fraction of a millisecond. The paper's SSD times for its two joins agree within 0.6% (226.0 s and 224.7 s), the mark of a cost common to both joins and independent of the device, most likely the server's per-tuple work, which flashlab's measured operator prices do not reproduce and the once-calibrated CPU model (per statement, lee2008 Table 2) has no term for. A device-independent {:.0} to {:.0} s added to both runs would bring this ratio into the pass range; none is added.",
        h.elapsed_s,
        h.first_phase_s,
        h.elapsed_s - h.first_phase_s,
        sd.elapsed_s,
        sd.first_phase_s,
        sd.elapsed_s - sd.first_phase_s,
        cpu_s(sd),
        f_lo,
        f_hi.max(f_lo),
    )
}

/// What every trace figure of a join shows.
const TRACE_CAPTION: &str = "Time x address of every temp-space request: sequential (append-only) writes, then scattered reads, in both joins.";

impl Study for Figure8 {
    type Measured = Figure8Runs;

    fn measure(&self, ctx: &RunContext) -> anyhow::Result<Figure8Runs> {
        let n = tuples(ctx);
        let c = HashJoinConfig::single_pass_cluster_bytes(MEMORY_BYTES, n, RECORD_BYTES)
            .ok_or_else(|| anyhow!("no cluster size partitions the join in one pass"))?;
        let hash = JoinKind::Hash(PartitionLayout::AppendLinked);
        let regions = JoinKind::Hash(PartitionLayout::Regions {
            extent_clusters: 16,
        });
        let steps = ctx.steps(6);
        let join = |device, kind, trace| {
            join_once(ctx, device, n, kind, MEMORY_BYTES, c, trace).map(|r| steps.after(r))
        };
        Ok(Figure8Runs {
            cluster_bytes: c,
            hash_hdd: join(HDD, hash, true)?,
            hash_ssd: join(SSD, hash, true)?,
            sort_merge_hdd: join(HDD, JoinKind::SortMerge, true)?,
            sort_merge_ssd: join(SSD, JoinKind::SortMerge, true)?,
            regions_hdd: join(HDD, regions, false)?,
            regions_ssd: join(SSD, regions, false)?,
        })
    }

    fn description(&self, ctx: &RunContext, m: &Figure8Runs) -> String {
        let hs = m.hash_hdd.hash.clone().unwrap_or_default();
        format!(
            "Equi-join of two generated tables whose keys match one to one, 2 MB of memory, {} KB clusters and partition pages, temp space on the modelled 2008 disk or SSD. The hash join writes partitions in lee2008's layout ({}); it ran with {} partitions and {} level(s). The same hash join with per-partition regions of 16 clusters is shown for comparison. {}.",
            m.cluster_bytes / KB,
            PartitionLayout::AppendLinked.name(),
            hs.partitions,
            hs.levels,
            scale_note(ctx)
        )
    }

    fn tables(&self, m: &Figure8Runs) -> Vec<Table> {
        let row = |r: &JoinRun, published: f64| {
            vec![
                r.kind.clone(),
                r.device.clone(),
                s(r.first_phase_s),
                s(r.elapsed_s - r.first_phase_s),
                s(r.elapsed_s),
                fmt_num(published),
            ]
        };
        vec![Table::new(
            "Elapsed time",
            &[
                "join",
                "device",
                "partition / sort s",
                "probe / merge s",
                "total s",
                "paper s",
            ],
            vec![
                row(&m.hash_hdd, published("hash_join_hdd_s")),
                row(&m.hash_ssd, published("hash_join_ssd_s")),
                row(&m.sort_merge_hdd, published("sort_merge_join_hdd_s")),
                row(&m.sort_merge_ssd, published("sort_merge_join_ssd_s")),
                row(&m.regions_hdd, f64::NAN),
                row(&m.regions_ssd, f64::NAN),
            ],
        )]
    }

    fn checks(&self, m: &Figure8Runs) -> Vec<Check> {
        let (hj_ssd, smj_ssd) = (&m.hash_ssd, &m.sort_merge_ssd);
        let p = published;
        // Each join's disk time over its SSD time: (key, what, disk, SSD).
        let joins = [
            ("hash_join", "hash join", &m.hash_hdd, hj_ssd),
            (
                "sort_merge_join",
                "sort-merge join",
                &m.sort_merge_hdd,
                smj_ssd,
            ),
        ];
        let mut checks: Vec<Check> = joins
            .into_iter()
            .map(|(key, what, h, sd)| {
                let mut check = Check::ratio(
                    &format!("lee2008.figure8.{key}_hdd_over_ssd"),
                    "lee2008 Figure 8",
                    &format!("{what}, disk time over SSD time"),
                    p(&format!("{key}_hdd_s")) / p(&format!("{key}_ssd_s")),
                    h.elapsed_s / sd.elapsed_s,
                );
                if !check.pass {
                    check.note = floor_note(what, h, sd, check.range[0], check.range[1]);
                }
                check
            })
            .collect();
        let ssd_pair =
            hj_ssd.elapsed_s.max(smj_ssd.elapsed_s) / hj_ssd.elapsed_s.min(smj_ssd.elapsed_s);
        let mut pair = Check::ratio(
            "lee2008.figure8.ssd_hash_vs_sort_merge",
            "lee2008 Figure 8",
            "on the SSD, the slower join's time over the faster's",
            p("hash_join_ssd_s").max(p("sort_merge_join_ssd_s"))
                / p("hash_join_ssd_s").min(p("sort_merge_join_ssd_s")),
            ssd_pair,
        );
        if !pair.pass {
            pair.note = pair_note(hj_ssd, smj_ssd);
        }
        checks.push(pair);
        checks
    }

    fn figures(&self, m: &Figure8Runs) -> anyhow::Result<Vec<Figure>> {
        trace_figures("lee2008-figure8", TRACE_CAPTION, &m.traced(), |r| {
            let title = format!("{} on {} ({:.1} s)", r.kind, r.device, r.elapsed_s);
            (title, r.trace.as_slice())
        })
    }

    fn notes(&self, m: &Figure8Runs) -> Vec<String> {
        vec![
            format!(
                "The paper's times are several times ours in absolute terms (its server took 226 s to hash-join on the SSD, flashlab {:.0} s): the commercial server's per-tuple costs are not modelled beyond the measured prices of flashlab's own operators; the checks compare ratios.",
                m.hash_ssd.elapsed_s
            ),
            format!(
                "On the disk the hash join took {:.0} s against the sort-merge join's {:.0} s (the paper: 661 s against 1,453 s): the sorts merge in one pass each, so both joins write and read every tuple once, and both read back in scattered {} KB requests.",
                m.hash_hdd.elapsed_s,
                m.sort_merge_hdd.elapsed_s,
                m.cluster_bytes / KB
            ),
            format!(
                "Partition reads are issued ahead (up to 32 in flight, into the memory each partition's hash table leaves): reading back took {:.1} s on the SSD, whose dies serve them in parallel, and {:.1} s on the disk, whose FIFO queue serves the scattered append-only chains one seek and rotation at a time; the per-partition regions, read forward, took {:.1} s on the disk, which streams a queued sequential read.",
                m.hash_ssd.elapsed_s - m.hash_ssd.first_phase_s,
                m.hash_hdd.elapsed_s - m.hash_hdd.first_phase_s,
                m.regions_hdd.elapsed_s - m.regions_hdd.first_phase_s
            ),
            format!(
                "Per-partition regions turn the partition writes into scattered writes: {:.1} s on the disk and {:.1} s on the SSD, whose super-block FTL pays for random writes; lee2008's append-only layout writes sequentially and pays with scattered reads instead, which flash serves well.",
                m.regions_hdd.elapsed_s, m.regions_ssd.elapsed_s
            ),
        ]
    }

    fn data(&self, m: &Figure8Runs) -> serde_json::Value {
        serde_json::json!({"hash_hdd": m.hash_hdd, "hash_ssd": m.hash_ssd, "sort_merge_hdd": m.sort_merge_hdd, "sort_merge_ssd": m.sort_merge_ssd, "hash_regions_hdd": m.regions_hdd, "hash_regions_ssd": m.regions_ssd})
    }

    fn raw_files(&self, m: &Figure8Runs) -> anyhow::Result<Vec<RawFile>> {
        m.traced()
            .iter()
            .map(|(name, r)| trace_csv(&format!("lee2008-figure8-{name}-temp-trace.csv"), &r.trace))
            .collect()
    }
}
