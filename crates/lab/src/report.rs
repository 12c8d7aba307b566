//! The reproduction report: `index.html`, `results.json` and raw files.
//!
//! An experiment produces an [`ExperimentResult`]: prose, tables that put
//! measured values beside published ones, figures (inline SVG), fidelity
//! [`Check`]s, and raw files (CSV, traces). [`write_report`] lays them out
//! as one self-contained HTML page (no scripts, no external assets, so it
//! reads the same from a file, a browser or a headless screenshot) and as
//! `results.json`:
//! `{"rule", "checks": [{"id", "paper", "published", "measured", "range", "pass", "kind", "form", "fitted", ...}], "experiments": [...]}`.
//!
//! `results.json` holds only what the seed decides, so two runs with the
//! same seed and options write identical bytes; host seconds (the whole
//! run's, each experiment's, and any `*host_seconds*` field of an
//! experiment's data) go to `timings.json` instead.
//!
//! The page's first screen is the summary: calibration and prediction
//! checks counted apart, the rule ([`crate::check::RULE`]) and the coverage
//! table ([`crate::coverage`]); the experiments follow. I/O scatter plots
//! are PNG images (see [`crate::plot::trace_img_html`]) with the full traces
//! linked as CSV, so the page stays a few megabytes.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::check::{Check, Kind, RULE, tally};
use crate::coverage::{COVERAGE, Status};

/// A table of the report.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Table {
    pub title: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// A figure of the report: inline SVG and a caption.
#[derive(Clone, Debug, Serialize)]
pub struct Figure {
    pub id: String,
    pub title: String,
    pub caption: String,
    #[serde(skip)]
    pub svg: String,
}

/// A raw file written beside the report (CSV, trace).
#[derive(Clone, Debug)]
pub struct RawFile {
    pub name: String,
    pub contents: Vec<u8>,
}

/// Everything one experiment produced.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ExperimentResult {
    pub id: String,
    pub title: String,
    pub paper: String,
    /// What was run and how, in a paragraph.
    pub description: String,
    pub tables: Vec<Table>,
    pub figures: Vec<Figure>,
    pub checks: Vec<Check>,
    /// Observations and reasons for misses.
    pub notes: Vec<String>,
    /// Machine-readable measurements.
    pub data: serde_json::Value,
    #[serde(skip)]
    pub raw_files: Vec<RawFile>,
    /// Host seconds the experiment took (in `timings.json`, not
    /// `results.json`).
    #[serde(skip)]
    pub host_seconds: f64,
}

/// The whole run.
#[derive(Clone, Debug, Serialize)]
pub struct ReportMeta {
    pub seed: u64,
    pub quick: bool,
    pub version: String,
    /// Host seconds of the whole run (in `timings.json`).
    #[serde(skip)]
    pub host_seconds: f64,
}

#[derive(Serialize)]
struct ResultsJson<'a> {
    meta: &'a ReportMeta,
    rule: &'static str,
    summary: serde_json::Value,
    checks: Vec<&'a Check>,
    experiments: Vec<ExperimentResult>,
}

/// Move every field whose name contains `host_seconds` out of `value` into
/// `timings`, keyed by its JSON path.
fn take_host_times(
    value: &mut serde_json::Value,
    path: &str,
    timings: &mut serde_json::Map<String, serde_json::Value>,
) {
    match value {
        serde_json::Value::Object(map) => {
            let keys: Vec<String> = map
                .keys()
                .filter(|k| k.contains("host_seconds"))
                .cloned()
                .collect();
            for k in keys {
                if let Some(v) = map.remove(&k) {
                    timings.insert(format!("{path}.{k}"), v);
                }
            }
            for (k, v) in map.iter_mut() {
                take_host_times(v, &format!("{path}.{k}"), timings);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                take_host_times(v, &format!("{path}[{i}]"), timings);
            }
        }
        _ => {}
    }
}

fn summary_json(experiments: &[ExperimentResult]) -> serde_json::Value {
    let checks: Vec<&Check> = experiments.iter().flat_map(|e| e.checks.iter()).collect();
    let (cal_pass, cal) = tally(checks.iter().copied(), Kind::Calibration);
    let (pred_pass, pred) = tally(checks.iter().copied(), Kind::Prediction);
    serde_json::json!({
        "calibration": {"pass": cal_pass, "checks": cal},
        "prediction": {"pass": pred_pass, "checks": pred},
    })
}

/// Write `index.html`, `results.json` and the raw files under `dir`.
/// Files are written to a temporary name and renamed, so an interrupted run
/// never leaves a half-written report.
pub fn write_report(
    dir: &Path,
    meta: &ReportMeta,
    experiments: &[ExperimentResult],
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for experiment in experiments {
        for raw in &experiment.raw_files {
            write_atomic(&dir.join(&raw.name), &raw.contents)?;
        }
    }
    let mut timings = serde_json::Map::new();
    timings.insert(
        "run.host_seconds".into(),
        serde_json::json!(meta.host_seconds),
    );
    let mut stripped = Vec::new();
    for e in experiments {
        timings.insert(
            format!("{}.host_seconds", e.id),
            serde_json::json!(e.host_seconds),
        );
        let mut e = e.clone();
        take_host_times(&mut e.data, &format!("{}.data", e.id), &mut timings);
        e.raw_files.clear();
        stripped.push(e);
    }
    let results = ResultsJson {
        meta,
        rule: crate::check::RULE,
        summary: summary_json(experiments),
        checks: experiments.iter().flat_map(|e| e.checks.iter()).collect(),
        experiments: stripped,
    };
    let json = serde_json::to_vec_pretty(&results).map_err(std::io::Error::other)?;
    write_atomic(&dir.join("results.json"), &json)?;
    let timings = serde_json::to_vec_pretty(&timings).map_err(std::io::Error::other)?;
    write_atomic(&dir.join("timings.json"), &timings)?;
    write_atomic(
        &dir.join("index.html"),
        render_html(meta, experiments).as_bytes(),
    )
}

fn write_atomic(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let mut tmp = PathBuf::from(path);
    tmp.set_extension("partial");
    std::fs::write(&tmp, contents)?;
    std::fs::rename(&tmp, path)
}

/// Escape text for HTML.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}\
h1{font-size:1.7em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}\
table{border-collapse:collapse;margin:1em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}\
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}\
.pass{color:#0a0;font-weight:bold}.miss{color:#c00;font-weight:bold}\
figure{margin:1em 0}figcaption{font-size:.9em;color:#555}.note{color:#555;font-size:.95em}\
.summary{font-size:1.1em;padding:.6em;background:#f7f7f7;border:1px solid #ddd}\
.rule{padding:.6em;border-left:4px solid #888;background:#fafafa}.plotted{color:#a60;font-weight:bold}\
.fitted{color:#06c}";

/// The report page.
pub fn render_html(meta: &ReportMeta, experiments: &[ExperimentResult]) -> String {
    let checks: Vec<&Check> = experiments.iter().flat_map(|e| e.checks.iter()).collect();
    let (cal_pass, cal) = tally(checks.iter().copied(), Kind::Calibration);
    let (pred_pass, pred) = tally(checks.iter().copied(), Kind::Prediction);
    let fitted = checks.iter().filter(|c| !c.fitted.is_empty()).count();
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>flashlab reproduce</title><style>{STYLE}</style></head><body>"
    );
    let _ = write!(
        html,
        "<h1>flashlab: reproducing the papers</h1>\
         <p class=\"summary\"><b>Predictions: {pred_pass} of {pred} pass</b> (workload results, set from nothing they are checked against). \
         <b>Calibration: {cal_pass} of {cal} pass</b> (device presets and the CPU model against the published figures they were set from; {fitted} of them name a parameter fitted to that very row). \
         Seed {}, {} run, {:.1} host seconds, flashlab {}.</p>",
        meta.seed,
        if meta.quick {
            "quick (shorter runs and smaller inputs: its verdicts are indicative; the full run is the reference)"
        } else {
            "full"
        },
        meta.host_seconds,
        escape(&meta.version)
    );
    let _ = write!(
        html,
        "<p class=\"rule\"><b>The rule.</b> {}</p>",
        escape(RULE)
    );
    render_coverage(&mut html, experiments);
    html.push_str("<h2>Experiments</h2><table><tr><th>Experiment</th><th>Predictions pass</th><th>Calibration pass</th></tr>");
    for e in experiments {
        let (pp, pn) = tally(&e.checks, Kind::Prediction);
        let (cp, cn) = tally(&e.checks, Kind::Calibration);
        let _ = write!(
            html,
            "<tr><td><a href=\"#{}\">{}</a></td><td>{pp} / {pn}</td><td>{cp} / {cn}</td></tr>",
            escape(&e.id),
            escape(&e.title)
        );
    }
    html.push_str("</table>");
    render_cpu_model(&mut html);
    for e in experiments {
        render_experiment(&mut html, e);
    }
    html.push_str("</body></html>\n");
    html
}

fn render_cpu_model(html: &mut String) {
    use crate::calibrate::{CALIBRATION_PATH, committed, in_use_ns};
    let _ = write!(
        html,
        "<h2 id=\"cpu-model\">The CPU model</h2><p>One published point sets it: lee2008 Table 2, update-commit with 64 clients and the log on the SSD, 5,701 TPS at 84% of a 1.86 GHz dual core: 294.7 us of CPU a transaction, 147 us a statement. \
         Work that is not a statement is priced at its cost in flashlab's own engine relative to one update-commit transaction, times those 294.7 us. \
         The ratios are measured by <code>flashlab calibrate --out {CALIBRATION_PATH}</code>, which wrote <code>{CALIBRATION_PATH}</code>. The engine compiles that file in and charges the prices it implies; the table sets them beside the prices this binary charges, so a binary built from another file shows.</p>"
    );
    let c = committed();
    let _ = write!(
        html,
        "<p class=\"note\">Measured on {} ({} rounds, medians of each round's ratio; update-commit {:.0} host ns).</p>",
        escape(&c.host_cpu),
        c.rounds,
        c.update_commit_host_ns
    );
    html.push_str("<table><tr><th>Price (ns at 1.86 GHz)</th><th>Ratio to update-commit</th><th>Implied by the file</th><th>In use</th><th>In use / implied</th></tr>");
    for p in &c.prices {
        let in_use = in_use_ns(p.key);
        let off = in_use / p.implied_ns;
        let class = if (off - 1.0).abs() <= crate::check::TOLERANCE_PCT / 100.0 {
            "pass"
        } else {
            "miss"
        };
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{:.5}</td><td>{}</td><td>{}</td><td class=\"{class}\">{:.2}</td></tr>",
            escape(&p.name),
            p.ratio_to_update_commit,
            fmt_num(p.implied_ns),
            fmt_num(in_use),
            off
        );
    }
    html.push_str("</table>");
}

fn render_coverage(html: &mut String, experiments: &[ExperimentResult]) {
    let count = |s: Status| COVERAGE.iter().filter(|i| i.status == s).count();
    let _ = write!(
        html,
        "<h2 id=\"coverage\">Coverage</h2><p>Every table and figure of the papers in <code>shared/papers/</code>: {} reproduced and checked, {} plotted without checks, {} not yet, {} with no data (diagrams).</p>",
        count(Status::Checked),
        count(Status::Plotted),
        count(Status::NotYet),
        count(Status::NoData)
    );
    html.push_str("<table><tr><th>Paper</th><th>Table or figure</th><th>What</th><th>Status</th><th>Experiment</th><th>Note</th></tr>");
    for i in COVERAGE {
        let links: Vec<String> = i
            .experiments
            .iter()
            .map(|id| {
                if experiments.iter().any(|e| e.id == *id) {
                    format!("<a href=\"#{0}\">{0}</a>", escape(id))
                } else {
                    format!("{} (not in this run)", escape(id))
                }
            })
            .collect();
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td></tr>",
            escape(i.paper),
            escape(i.item),
            escape(i.what),
            i.status.class(),
            i.status.label(),
            links.join(", "),
            escape(i.note)
        );
    }
    html.push_str("</table>");
}

fn render_experiment(html: &mut String, e: &ExperimentResult) {
    let _ = write!(
        html,
        "<h2 id=\"{}\">{}</h2><p><em>{}</em>. {}</p>",
        escape(&e.id),
        escape(&e.title),
        escape(&e.paper),
        escape(&e.description)
    );
    if !e.checks.is_empty() {
        render_checks(html, &e.checks);
    }
    for table in &e.tables {
        render_table(html, table);
    }
    for figure in &e.figures {
        let _ = write!(
            html,
            "<figure id=\"{}\">{}<figcaption>{}: {}</figcaption></figure>",
            escape(&figure.id),
            figure.svg,
            escape(&figure.title),
            escape(&figure.caption)
        );
    }
    for note in &e.notes {
        let _ = write!(html, "<p class=\"note\">{}</p>", escape(note));
    }
    if !e.raw_files.is_empty() {
        html.push_str("<p class=\"note\">Raw files (full traces and data): ");
        let links: Vec<String> = e
            .raw_files
            .iter()
            .map(|r| format!("<a href=\"{0}\">{0}</a>", escape(&r.name)))
            .collect();
        html.push_str(&links.join(", "));
        html.push_str("</p>");
    }
    let _ = write!(
        html,
        "<p class=\"note\">Ran in {:.1} host seconds.</p>",
        e.host_seconds
    );
}

fn render_checks(html: &mut String, checks: &[Check]) {
    html.push_str("<table><tr><th>Check</th><th>Kind</th><th>Paper</th><th>Published</th><th>Measured</th><th>Pass range (the rule)</th><th>Verdict</th><th>Fitted to this row</th><th>Note</th></tr>");
    for c in checks {
        let class = if c.pass { "pass" } else { "miss" };
        let range = match (c.range[0].is_finite(), c.range[1].is_finite()) {
            (true, true) => format!("{} to {}", fmt_num(c.range[0]), fmt_num(c.range[1])),
            (true, false) => format!("at least {}", fmt_num(c.range[0])),
            (false, true) => format!("at most {}", fmt_num(c.range[1])),
            (false, false) => "any".to_string(),
        };
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} {}</td><td>{} {}</td><td>{range}</td><td class=\"{class}\">{}</td><td class=\"fitted\">{}</td><td>{}</td></tr>",
            escape(&c.what),
            c.kind.label(),
            escape(&c.paper),
            fmt_num(c.published),
            escape(&c.unit),
            fmt_num(c.measured),
            escape(&c.unit),
            c.verdict(),
            escape(&c.fitted.join("; ")),
            escape(&c.note)
        );
    }
    html.push_str("</table>");
}

fn render_table(html: &mut String, table: &Table) {
    let _ = write!(
        html,
        "<table><caption>{}</caption><tr>",
        escape(&table.title)
    );
    for column in &table.columns {
        let _ = write!(html, "<th>{}</th>", escape(column));
    }
    html.push_str("</tr>");
    for row in &table.rows {
        html.push_str("<tr>");
        for cell in row {
            let _ = write!(html, "<td>{}</td>", escape(cell));
        }
        html.push_str("</tr>");
    }
    html.push_str("</table>");
}

pub use crate::check::fmt_num;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_contains_checks_and_is_written_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let e = ExperimentResult {
            id: "x".into(),
            title: "X <test>".into(),
            checks: vec![Check::within_pct("x.a", "paper", "a", "ms", 1.0, 1.1, 25.0)],
            ..ExperimentResult::default()
        };
        let meta = ReportMeta {
            seed: 1,
            quick: true,
            version: "test".into(),
            host_seconds: 0.0,
        };
        write_report(dir.path(), &meta, &[e]).unwrap();
        let html = std::fs::read_to_string(dir.path().join("index.html")).unwrap();
        assert!(html.contains("X &lt;test&gt;") && html.contains("PASS"));
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("results.json")).unwrap())
                .unwrap();
        assert_eq!(json["checks"][0]["pass"], serde_json::Value::Bool(true));
        assert_eq!(json["checks"][0]["range"][1], serde_json::json!(1.25));
        assert!(!dir.path().join("index.partial").exists());
    }
}
