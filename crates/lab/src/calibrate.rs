//! `flashlab calibrate`: the CPU model's prices and system profiles,
//! measured and fitted, written to one file.
//!
//! Two steps (see `flashlab_engine::cpu_calibration` for the model):
//! 1. **The engine's prices**: what each event costs flashlab's own engine
//!    on this machine, in the real world ([`measure_prices`]: the engine's
//!    events from `flashlab_engine::db::calibrate`, the sort and join
//!    operators from `flashlab_engine::temp::calibrate`, medians over the
//!    rounds).
//! 2. **The system profiles** ([`fit_profiles`]): counting runs of the
//!    simulated engine at those prices give each declared workload's CPU
//!    per transaction, and runs at the prices per KB alone the part a
//!    profile leaves unscaled; each profile's parameters are solved from
//!    its declared published points:
//!    - lee2008's server: a scale and a fixed cost per transaction, from
//!      Table 2 (update-commit, 64 clients, log on the SSD: 5,701 TPS at
//!      84% of two 1.86 GHz cores) and Table 3 (TPC-B, 20 clients, log on
//!      the SSD: 3,045 TPS at 65%);
//!    - petrov2010's MySQL 5.1 on the Opteron: a scale and a scale on the
//!      price of a page I/O's KB, from Table 4's 1-CPU, 2560 MB maxima at
//!      4 KB (3,851 NoTPM) and 16 KB pages (3,173 NoTPM), each taken as
//!      the one CPU busy throughout.
//!
//! The counting runs are simulations, so step 2 is deterministic:
//! `--fit-only` refits the profiles on the committed prices. The committed
//! result is [`CALIBRATION_JSON`] (`crates/engine/data/cpu-calibration.json`),
//! which the engine compiles in; the report prints it.

use anyhow::anyhow;
use std::path::Path;

use flashlab_engine::config::CpuCosts;
pub use flashlab_engine::cpu_calibration::{
    CALIBRATION_JSON, CALIBRATION_PATH, Calibration, DEFAULT_PROFILE, Fit, Price, PriceKey,
    Profile, committed,
};
use flashlab_engine::db::calibrate::{EventCosts, measure_events};
use flashlab_engine::temp::calibrate::{HostCosts, measure};

use crate::bench::{BenchOptions, bench, load_image};
use crate::experiments::{RunContext, lee2008_log, petrov2010};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn host_cpu() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Measure, then fit: a whole calibration. `scratch` is a directory for
/// the measurement's files (removed after); `progress` gets a line a step.
pub fn calibrate(
    rounds: usize,
    tuples: u64,
    scratch: &Path,
    mut progress: impl FnMut(&str),
) -> anyhow::Result<Calibration> {
    let prices = measure_prices(rounds, tuples, scratch, &mut progress)?;
    let mut c = Calibration {
        command: format!("flashlab calibrate --rounds {rounds} --tuples {tuples}"),
        host_cpu: host_cpu(),
        rounds,
        tuples,
        prices,
        profiles: Vec::new(),
    };
    c.profiles = fit_profiles(&c, &mut progress)?;
    Ok(c)
}

/// Keep `c`'s prices and fit its profiles again (`--fit-only`).
pub fn refit(c: &Calibration, mut progress: impl FnMut(&str)) -> anyhow::Result<Calibration> {
    let mut c = c.clone();
    c.profiles = fit_profiles(&c, &mut progress)?;
    Ok(c)
}

/// The engine's prices on this machine, real world.
pub fn measure_prices(
    rounds: usize,
    tuples: u64,
    scratch: &Path,
    progress: &mut impl FnMut(&str),
) -> anyhow::Result<Vec<Price>> {
    let rt = flashlab_runtime::RealRuntime::new(1);
    let _enter = flashlab_runtime::RealRuntime::enter(&rt);
    progress("measuring the engine's events (scratch databases, real world)");
    let events = measure_events(scratch, rounds.max(1)).map_err(|e| anyhow!("{e}"))?;
    let mut ops: Vec<HostCosts> = Vec::new();
    for i in 0..rounds.max(1) {
        ops.push(measure(tuples).map_err(|e| anyhow!("{e}"))?);
        progress(&format!("operators: round {} of {rounds}", i + 1));
    }
    let m = |f: fn(&HostCosts) -> f64| median(ops.iter().map(f).collect());
    let mut prices = event_prices(&events);
    let how = "sorting, run and hashing loops (flashlab_engine::temp::calibrate)";
    for (key, name, ns) in [
        (PriceKey::Compare, "a key comparison", m(|c| c.compare_ns)),
        (PriceKey::Tuple, "a tuple through a run", m(|c| c.tuple_ns)),
        (
            PriceKey::CopyPerKb,
            "a KB of tuples copied",
            m(|c| c.copy_ns_per_kb),
        ),
        (PriceKey::Hash, "a key hashed", m(|c| c.hash_ns)),
    ] {
        prices.push(price(key, name, ns, how));
    }
    Ok(prices)
}

fn price(key: PriceKey, name: &str, host_ns: f64, how: &str) -> Price {
    Price {
        key,
        name: name.into(),
        host_ns,
        how: how.into(),
    }
}

fn event_prices(e: &EventCosts) -> Vec<Price> {
    let how = "timed loops in scratch databases (flashlab_engine::db::calibrate)";
    [
        (
            PriceKey::Begin,
            "a read-only transaction's begin and commit",
            e.begin_ns,
        ),
        (
            PriceKey::Get,
            "a point read, its page accesses apart",
            e.get_ns,
        ),
        (
            PriceKey::Put,
            "an update, its page accesses and log apart",
            e.put_ns,
        ),
        (
            PriceKey::Commit,
            "a writing transaction's commit",
            e.commit_ns,
        ),
        (PriceKey::ScanRow, "a row a scan visits", e.scan_row_ns),
        (
            PriceKey::PageAccess,
            "a buffer page access",
            e.page_access_ns,
        ),
        (PriceKey::PageIo, "a page I/O request", e.page_io_ns),
        (
            PriceKey::PageIoPerKb,
            "a KB of page I/O",
            e.page_io_ns_per_kb,
        ),
        (PriceKey::LogPerKb, "a KB of log appended", e.log_ns_per_kb),
    ]
    .into_iter()
    .map(|(key, name, ns)| price(key, name, ns, how))
    .collect()
}

/// lee2008's two CPU points: (published CPU ns per transaction, what).
const LEE2008_TABLE2: (f64, &str) = (
    2.0 * 0.84 / 5701.0 * 1e9,
    "lee2008 Table 2: update-commit, 64 clients, log on the SSD, 5,701 TPS at 84% of two 1.86 GHz cores",
);
const LEE2008_TABLE3: (f64, &str) = (
    2.0 * 0.65 / 3045.0 * 1e9,
    "lee2008 Table 3: TPC-B, 20 clients, log on the SSD, 3,045 TPS at 65% of two 1.86 GHz cores",
);
/// petrov2010's point: NoTPM of the 1-CPU, 4 KB, 2560 MB cell.
const PETROV_NOTPM: f64 = 3851.0;
/// petrov2010 Table 4: the 1-CPU, 16 KB, 2560 MB maximum.
const PETROV_NOTPM_16K: f64 = 3173.0;

/// Fit every profile on `c`'s prices.
pub fn fit_profiles(
    c: &Calibration,
    progress: &mut impl FnMut(&str),
) -> anyhow::Result<Vec<Profile>> {
    let engine = c.costs(&c.engine_profile());
    progress("fitting lee2008's server (two counting runs)");
    let lee2008 = fit_lee2008(&engine)?;
    progress("fitting petrov2010's server (a TPC-C load and a counting run)");
    let petrov = fit_petrov2010(&engine)?;
    Ok(vec![lee2008, petrov])
}

/// `costs` with only the prices per KB, which a profile does not scale
/// (`Profile::scale_of`): a counting run at them gives the part of the
/// CPU a fit must leave unscaled.
fn bytes_only(costs: &CpuCosts) -> CpuCosts {
    CpuCosts {
        page_io_ns_per_kb: costs.page_io_ns_per_kb,
        log_ns_per_kb: costs.log_ns_per_kb,
        ..CpuCosts::free()
    }
}

/// CPU ns per transaction of a run at exact `costs`.
fn cpu_per_txn(options: BenchOptions, costs: &CpuCosts) -> anyhow::Result<f64> {
    let cores = options.cores;
    let report = bench(
        &BenchOptions {
            cpu_costs: Some(costs.clone()),
            ..options
        },
        |_| {},
    )?;
    Ok(report.cpu_utilization * f64::from(cores) / report.tps.max(1e-9) * 1e9)
}

fn fit_lee2008(engine: &CpuCosts) -> anyhow::Result<Profile> {
    let ctx = RunContext::new(false, 1);
    let run = |workload, clients| -> anyhow::Result<(f64, f64)> {
        let o = lee2008_log::options(
            &ctx,
            workload,
            lee2008_log::SSD,
            clients,
            2,
            lee2008_log::DUAL_GHZ,
        );
        Ok((
            cpu_per_txn(o.clone(), engine)?,
            cpu_per_txn(o, &bytes_only(engine))?,
        ))
    };
    let (e_uc, b_uc) = run("update-commit", 64)?;
    let (e_tpcb, b_tpcb) = run("tpcb", 20)?;
    let (c_uc, c_tpcb) = (LEE2008_TABLE2.0, LEE2008_TABLE3.0);
    // C = txn_ns + scale x (E - B) + B: the bytes' part B is not scaled.
    let scale = ((c_tpcb - b_tpcb) - (c_uc - b_uc)) / ((e_tpcb - b_tpcb) - (e_uc - b_uc));
    let txn_ns = c_uc - b_uc - scale * (e_uc - b_uc);
    if !(scale > 0.0 && txn_ns >= 0.0) {
        return Err(anyhow!(
            "lee2008's profile has no fit: the engine's TPC-B costs {e_tpcb:.0} ns against update-commit's {e_uc:.0} (scale {scale:.3}, fixed {txn_ns:.0} ns)"
        ));
    }
    let fit = |parameter: &str, point: (f64, &str), check: &str, engine_ns| Fit {
        parameter: parameter.into(),
        point: point.1.into(),
        check: check.into(),
        published_ns: point.0,
        engine_ns,
    };
    Ok(Profile {
        id: "lee2008".into(),
        system: "lee2008's commercial DBMS on a 1.86 GHz dual-core Xeon (section 3)".into(),
        ghz: lee2008_log::DUAL_GHZ,
        scale,
        page_kb_scale: 1.0,
        txn_ns,
        fitted: vec![
            fit("scale", LEE2008_TABLE2, "lee2008.table2.cpu_per_txn", e_uc),
            fit(
                "txn_ns",
                LEE2008_TABLE3,
                "lee2008.table3.cpu_per_txn",
                e_tpcb,
            ),
        ],
    })
}

/// CPU ns per New-Order of petrov2010's counting run of `cell` at
/// `costs` (the mix's other transactions included), and its NoTPM.
fn petrov_per_new_order(
    cell: petrov2010::Cell,
    image: &std::sync::Arc<crate::bench::DbImage>,
    costs: &CpuCosts,
) -> anyhow::Result<(f64, f64)> {
    let ctx = RunContext::new(false, 1);
    let mut options = petrov2010::options(&ctx, cell, petrov2010::FIT_LOAD, Some(image.clone()));
    options.cpu_costs = Some(costs.clone());
    let report = bench(&options, |_| {})?;
    let notpm = report.tpcc.as_ref().map_or(0.0, |t| t.tpmc);
    let ns = report.cpu_utilization * f64::from(cell.cpus) * 60.0 / notpm.max(1e-9) * 1e9;
    Ok((ns, notpm))
}

/// One fitted cell's counting runs: CPU per New-Order at the engine's
/// prices (E), at its page-I/O KB price alone (P), and at its log KB
/// price alone (L); the published CPU per New-Order; the loaded database.
struct PetrovPoint {
    cell: petrov2010::Cell,
    notpm: f64,
    e: f64,
    p: f64,
    l: f64,
    published_ns: f64,
    image: std::sync::Arc<crate::bench::DbImage>,
}

impl PetrovPoint {
    /// CPU per New-Order the counting runs predict at (scale, page_kb_scale).
    fn model_ns(&self, scale: f64, page_kb_scale: f64) -> f64 {
        scale * (self.e - self.p - self.l) + page_kb_scale * self.p + self.l
    }
}

fn petrov_point(
    engine: &CpuCosts,
    cell: petrov2010::Cell,
    published_notpm: f64,
) -> anyhow::Result<PetrovPoint> {
    let ctx = RunContext::new(false, 1);
    let image = load_image(&petrov2010::options(
        &ctx,
        cell,
        petrov2010::PAPER_WAREHOUSES,
        None,
    ))?;
    let only = |c: CpuCosts| petrov_per_new_order(cell, &image, &c).map(|r| r.0);
    let (e, notpm) = petrov_per_new_order(cell, &image, engine)?;
    let p = only(CpuCosts {
        page_io_ns_per_kb: engine.page_io_ns_per_kb,
        ..CpuCosts::free()
    })?;
    let l = only(CpuCosts {
        log_ns_per_kb: engine.log_ns_per_kb,
        ..CpuCosts::free()
    })?;
    Ok(PetrovPoint {
        cell,
        notpm,
        e,
        p,
        l,
        published_ns: 60.0 * 1e9 * f64::from(cell.cpus) / published_notpm,
        image,
    })
}

/// The engine's prices with its events at `scale` and a page I/O's KB at
/// `page_kb_scale` (as `Calibration::costs` prices a profile).
fn scaled(engine: &CpuCosts, scale: f64, page_kb_scale: f64) -> CpuCosts {
    let s = |ns: u64| (ns as f64 * scale).round() as u64;
    CpuCosts {
        begin_ns: s(engine.begin_ns),
        get_ns: s(engine.get_ns),
        put_ns: s(engine.put_ns),
        scan_row_ns: s(engine.scan_row_ns),
        commit_ns: s(engine.commit_ns),
        page_access_ns: s(engine.page_access_ns),
        page_io_ns: s(engine.page_io_ns),
        page_io_ns_per_kb: (engine.page_io_ns_per_kb as f64 * page_kb_scale).round() as u64,
        log_ns_per_kb: engine.log_ns_per_kb,
    }
}

/// Solve scale x events + page_kb_scale x P = target - L for both cells.
fn solve_petrov(a: &PetrovPoint, b: &PetrovPoint, target: [f64; 2]) -> anyhow::Result<(f64, f64)> {
    let events = |x: &PetrovPoint| x.e - x.p - x.l;
    let det = events(a) * b.p - events(b) * a.p;
    let (ra, rb) = (target[0] - a.l, target[1] - b.l);
    let scale = (ra * b.p - rb * a.p) / det;
    let page_kb_scale = (events(a) * rb - events(b) * ra) / det;
    if !(scale.is_finite() && scale > 0.0 && page_kb_scale.is_finite() && page_kb_scale > 0.0) {
        return Err(anyhow!(
            "petrov2010's profile has no fit: the counting runs ran {:.0} and {:.0} NoTPM (scale {scale:.3}, page KB scale {page_kb_scale:.3})",
            a.notpm,
            b.notpm
        ));
    }
    Ok((scale, page_kb_scale))
}

/// Rounds that correct the counting runs' prediction by runs at the fitted
/// prices, where the one CPU is saturated and the mix, the buffer and the
/// group commits behave as at the study's maxima.
const PETROV_FIT_ROUNDS: usize = 3;

/// petrov2010's profile: a scale on the engine's event prices and one on
/// its page-I/O KB price, from the 1-CPU, 2560 MB maxima at 4 KB and at
/// 16 KB pages, each taken as the one CPU busy throughout. Per New-Order,
/// C = scale x (E - P - L) + page_kb_scale x P + L, solved for both cells
/// from counting runs at the engine's prices; then each round runs both
/// cells at the fitted prices and solves again for the targets divided by
/// the ratio of the CPU per New-Order measured there (60 s / NoTPM) to C.
fn fit_petrov2010(engine: &CpuCosts) -> anyhow::Result<Profile> {
    let small = petrov_point(engine, petrov2010::FITTED_CELL, PETROV_NOTPM)?;
    let large = petrov_point(engine, petrov2010::FITTED_CELL_16K, PETROV_NOTPM_16K)?;
    let published = [small.published_ns, large.published_ns];
    let (mut scale, mut page_kb_scale) = solve_petrov(&small, &large, published)?;
    for _ in 0..PETROV_FIT_ROUNDS {
        let costs = scaled(engine, scale, page_kb_scale);
        let mut target = published;
        for (slot, x) in target.iter_mut().zip([&small, &large]) {
            let (_, notpm) = petrov_per_new_order(x.cell, &x.image, &costs)?;
            let measured_ns = 60.0 * 1e9 * f64::from(x.cell.cpus) / notpm.max(1e-9);
            *slot /= measured_ns / x.model_ns(scale, page_kb_scale);
        }
        (scale, page_kb_scale) = solve_petrov(&small, &large, target)?;
    }
    let fit = |parameter: &str, x: &PetrovPoint, notpm: f64, check: &str| Fit {
        parameter: parameter.into(),
        point: format!(
            "petrov2010 Table 4: {notpm:.0} NoTPM at 1 CPU, {} KB pages, {} MB, taken as the CPU busy throughout (60 s / NoTPM of CPU a New-Order, the mix's other transactions included)",
            x.cell.page_bytes / 1024,
            x.cell.buffer_mb
        ),
        check: check.into(),
        published_ns: x.published_ns,
        engine_ns: x.e,
    };
    Ok(Profile {
        id: "petrov2010".into(),
        system: "petrov2010's MySQL 5.1 (InnoDB) on 2.3 GHz Opteron 8356 cores of a Sun Fire X4440 (section 3)".into(),
        ghz: petrov2010::CPU_GHZ,
        scale,
        page_kb_scale,
        txn_ns: 0.0,
        fitted: vec![
            fit("scale", &small, PETROV_NOTPM, petrov2010::FITTED_CHECK),
            fit(
                "page_kb_scale",
                &large,
                PETROV_NOTPM_16K,
                petrov2010::FITTED_CHECK_16K,
            ),
        ],
    })
}

/// " (fitted)" when `p` fitted `parameter`.
fn fitted_mark(p: &Profile, parameter: &str) -> &'static str {
    if p.fitted.iter().any(|f| f.parameter == parameter) {
        " (fitted)"
    } else {
        ""
    }
}

/// `c`'s prices and profiles as text: each engine event's host price and
/// its price in each profile, then each profile's parameters and the
/// published points they were fitted to.
pub fn describe(c: &Calibration) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = write!(out, "{:<46} {:>9}", "CPU price (ns)", "engine");
    for p in &c.profiles {
        let _ = write!(out, " {:>11}", p.id);
    }
    out.push('\n');
    for price in &c.prices {
        let _ = write!(out, "{:<46} {:>9.1}", price.name, price.host_ns);
        for p in &c.profiles {
            let _ = write!(out, " {:>11.1}", price.host_ns * p.scale_of(price.key));
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "engine: measured on {} ({}, {} rounds)",
        c.host_cpu, c.command, c.rounds
    );
    for p in &c.profiles {
        let _ = writeln!(
            out,
            "{}: {}; {} GHz; scale {:.3} (fitted), fixed {:.0} ns a transaction{}, page I/O KB scale {:.3}{}",
            p.id,
            p.system,
            p.ghz,
            p.scale,
            p.txn_ns,
            fitted_mark(p, "txn_ns"),
            p.page_kb_scale,
            fitted_mark(p, "page_kb_scale"),
        );
        for f in &p.fitted {
            let _ = writeln!(
                out,
                "    {} from {}: {:.0} ns a transaction published, {:.0} at the engine's prices (check {})",
                f.parameter, f.point, f.published_ns, f.engine_ns, f.check
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_prices_are_the_default_profiles() {
        let c = committed();
        let p = c.profile(DEFAULT_PROFILE).expect("CAL-1");
        assert_eq!(CpuCosts::default(), c.costs(p));
        assert!(p.fitted.len() <= flashlab_engine::cpu_calibration::PROFILE_FITS_MAX);
    }

    #[test]
    fn every_profile_names_its_points_and_their_checks() {
        for p in &committed().profiles {
            for f in &p.fitted {
                assert!(!f.point.is_empty() && !f.check.is_empty(), "{}", p.id);
                assert!(f.published_ns > 0.0 && f.engine_ns > 0.0, "{}", p.id);
            }
        }
    }
}
