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

use anyhow::anyhow;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::check::{Check, Form, Kind, RULE, tally};
use crate::coverage::{COVERAGE, Status, status_cell};
use crate::findings::{FindingResult, Outcome, evaluate_all, outcomes};

/// A table of the report.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Table {
    pub title: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table titled `title` under these column headings.
    pub fn new(title: impl Into<String>, columns: &[&str], rows: Vec<Vec<String>>) -> Table {
        Table {
            title: title.into(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows,
        }
    }
}

/// A table of the disk against the SSD: a row a quantity, `(what, HDD,
/// paper's HDD, SSD, paper's SSD)`, each number as [`fmt_num`] shows it
/// (NaN: no published value).
pub fn hdd_ssd_table(title: &str, rows: &[(&str, f64, f64, f64, f64)]) -> Table {
    Table::new(
        title,
        &["", "HDD", "paper", "SSD", "paper"],
        rows.iter()
            .map(|&(what, hdd, hdd_paper, ssd, ssd_paper)| {
                vec![
                    what.to_string(),
                    fmt_num(hdd),
                    fmt_num(hdd_paper),
                    fmt_num(ssd),
                    fmt_num(ssd_paper),
                ]
            })
            .collect(),
    )
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

/// One finished experiment as the report needs it, stored as
/// `units/ID.json` beside the report: what `--resume` reuses and
/// `--merge` assembles. It holds `results.json`'s fragments as the text
/// serde wrote for the experiment itself, so a report assembled from
/// records has the bytes of one written in a single run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct UnitRecord {
    /// Layout of this record (refused when it is not [`UNIT_FORMAT`]).
    pub format: u32,
    pub id: String,
    pub title: String,
    /// flashlab's version, and a digest of the binary that ran the unit.
    pub version: String,
    pub binary: String,
    pub seed: u64,
    pub quick: bool,
    /// The data scale against the papers (`--scale 1/N`), if not each
    /// experiment's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<u32>,
    pub host_seconds: f64,
    /// `timings.json` entries of the experiment (its `*host_seconds*` data).
    pub timings: serde_json::Map<String, serde_json::Value>,
    /// Raw files written beside the report.
    pub raw_files: Vec<String>,
    /// Passing and total checks: predictions, calibrations; fitted checks.
    pub prediction: [usize; 2],
    pub calibration: [usize; 2],
    /// Passing and total sanity assertions (counted in neither of the others).
    #[serde(default)]
    pub sanity: [usize; 2],
    pub fitted: usize,
    /// Passing and total checks by paper (the first word of a check's
    /// paper), sanity assertions apart.
    pub papers: std::collections::BTreeMap<String, [usize; 2]>,
    /// Each check as pretty JSON, then the experiment without host times.
    pub checks: Vec<String>,
    pub experiment: String,
    /// The experiment's section of `index.html`.
    pub html: String,
}

/// The layout of [`UnitRecord`] this binary writes and reads.
pub const UNIT_FORMAT: u32 = 1;

/// Who ran a unit: what a record must match to be reused or merged.
#[derive(Clone, Debug)]
pub struct UnitOrigin {
    pub version: String,
    pub binary: String,
    pub seed: u64,
    pub quick: bool,
    pub scale: Option<u32>,
}

fn pretty(value: &impl Serialize) -> std::io::Result<String> {
    serde_json::to_string_pretty(value).map_err(std::io::Error::other)
}

/// Passing and total checks of `checks` by paper.
fn by_paper(checks: &[Check]) -> std::collections::BTreeMap<String, [usize; 2]> {
    let mut papers = std::collections::BTreeMap::new();
    for c in checks.iter().filter(|c| c.kind != Kind::Sanity) {
        let paper = c.paper.split_whitespace().next().unwrap_or("").to_string();
        let entry: &mut [usize; 2] = papers.entry(paper).or_default();
        entry[0] += usize::from(c.pass);
        entry[1] += 1;
    }
    papers
}

impl UnitRecord {
    /// The record of `e`, run by `origin`.
    pub fn of(origin: &UnitOrigin, e: &ExperimentResult) -> std::io::Result<UnitRecord> {
        let mut timings = serde_json::Map::new();
        let mut stripped = e.clone();
        take_host_times(&mut stripped.data, &format!("{}.data", e.id), &mut timings);
        stripped.raw_files.clear();
        let checks = e.checks.iter().map(pretty).collect::<Result<_, _>>()?;
        let (pp, pn) = tally(&e.checks, Kind::Prediction);
        let (cp, cn) = tally(&e.checks, Kind::Calibration);
        let (sp, sn) = tally(&e.checks, Kind::Sanity);
        let mut html = String::new();
        render_experiment(&mut html, e);
        Ok(UnitRecord {
            format: UNIT_FORMAT,
            id: e.id.clone(),
            title: e.title.clone(),
            version: origin.version.clone(),
            binary: origin.binary.clone(),
            seed: origin.seed,
            quick: origin.quick,
            scale: origin.scale,
            host_seconds: e.host_seconds,
            timings,
            raw_files: e.raw_files.iter().map(|r| r.name.clone()).collect(),
            prediction: [pp, pn],
            calibration: [cp, cn],
            sanity: [sp, sn],
            fitted: e.checks.iter().filter(|c| !c.fitted.is_empty()).count(),
            papers: by_paper(&e.checks),
            checks,
            experiment: pretty(&stripped)?,
            html,
        })
    }

    /// How this record differs from what `origin` would write, if it does.
    pub fn mismatch(&self, origin: &UnitOrigin) -> Option<String> {
        let mode = |q: bool| if q { "--quick" } else { "a full run" };
        if self.format != UNIT_FORMAT {
            Some(format!("record format {} (not {UNIT_FORMAT})", self.format))
        } else if self.version != origin.version {
            Some(format!(
                "flashlab {} (not {})",
                self.version, origin.version
            ))
        } else if self.binary != origin.binary {
            Some(format!(
                "another binary (digest {}, not {})",
                self.binary, origin.binary
            ))
        } else if self.seed != origin.seed {
            Some(format!("seed {} (not {})", self.seed, origin.seed))
        } else if self.quick != origin.quick {
            Some(format!("{} (not {})", mode(self.quick), mode(origin.quick)))
        } else if self.scale != origin.scale {
            let scale =
                |s: Option<u32>| s.map_or("the default scale".into(), |n| format!("scale 1/{n}"));
            Some(format!(
                "{} (not {})",
                scale(self.scale),
                scale(origin.scale)
            ))
        } else {
            None
        }
    }

    /// The origin this record names.
    pub fn origin(&self) -> UnitOrigin {
        UnitOrigin {
            version: self.version.clone(),
            binary: self.binary.clone(),
            seed: self.seed,
            quick: self.quick,
            scale: self.scale,
        }
    }
}

/// Where `id`'s record lives under report directory `dir`.
pub fn unit_path(dir: &Path, id: &str) -> PathBuf {
    dir.join("units").join(format!("{id}.json"))
}

/// Write raw files `raw`, then `record` (last, so a record on disk means
/// its raw files are complete). Returns the record's path.
pub fn write_unit(dir: &Path, record: &UnitRecord, raw: &[RawFile]) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir.join("units"))?;
    for file in raw {
        write_atomic(&dir.join(&file.name), &file.contents)?;
    }
    let path = unit_path(dir, &record.id);
    let json = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
    write_atomic(&path, &json)?;
    Ok(path)
}

/// Read the record at `path`.
pub fn read_unit(path: &Path) -> anyhow::Result<UnitRecord> {
    let bytes = std::fs::read(path).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| {
        anyhow!(
            "{}: not a unit record of this flashlab ({e})",
            path.display()
        )
    })
}

/// `text` (pretty JSON) as it reads nested `depth` levels deep.
fn nested(text: &str, depth: usize) -> String {
    text.replace('\n', &format!("\n{}", "  ".repeat(depth)))
}

/// Pretty JSON texts as the value of a top-level field: a pretty array.
fn top_level_array<'a>(items: impl Iterator<Item = &'a String>) -> String {
    let items: Vec<String> = items.map(|t| nested(t, 2)).collect();
    if items.is_empty() {
        "[]".into()
    } else {
        format!("[\n    {}\n  ]", items.join(",\n    "))
    }
}

/// `results.json` of `records`, in their order: the bytes
/// `serde_json::to_vec_pretty` gives for
/// `{meta, rule, summary, findings, checks, experiments}` (tested below).
pub fn results_json(meta: &ReportMeta, records: &[UnitRecord]) -> std::io::Result<String> {
    let sum = |f: fn(&UnitRecord) -> [usize; 2]| {
        records
            .iter()
            .map(f)
            .fold([0, 0], |a, b| [a[0] + b[0], a[1] + b[1]])
    };
    let (cal, pred) = (sum(|r| r.calibration), sum(|r| r.prediction));
    let sanity = sum(|r| r.sanity);
    let summary = serde_json::json!({
        "calibration": {"pass": cal[0], "checks": cal[1]},
        "prediction": {"pass": pred[0], "checks": pred[1]},
        "sanity": {"pass": sanity[0], "checks": sanity[1]},
    });
    let findings = evaluate_all(&outcomes(records));
    Ok(format!(
        "{{\n  \"meta\": {},\n  \"rule\": {},\n  \"summary\": {},\n  \"findings\": {},\n  \"checks\": {},\n  \"experiments\": {}\n}}",
        nested(&pretty(meta)?, 1),
        pretty(&RULE)?,
        nested(&pretty(&summary)?, 1),
        nested(&pretty(&findings)?, 1),
        top_level_array(records.iter().flat_map(|r| r.checks.iter())),
        top_level_array(records.iter().map(|r| &r.experiment)),
    ))
}

/// Write `results.json` and `timings.json` of `records` under `dir`.
pub fn write_results(dir: &Path, meta: &ReportMeta, records: &[UnitRecord]) -> std::io::Result<()> {
    let mut timings = serde_json::Map::new();
    timings.insert(
        "run.host_seconds".into(),
        serde_json::json!(meta.host_seconds),
    );
    for r in records {
        timings.insert(
            format!("{}.host_seconds", r.id),
            serde_json::json!(r.host_seconds),
        );
        timings.extend(r.timings.clone());
    }
    let results = results_json(meta, records)?;
    write_atomic(&dir.join("results.json"), results.as_bytes())?;
    let timings = serde_json::to_vec_pretty(&timings).map_err(std::io::Error::other)?;
    write_atomic(&dir.join("timings.json"), &timings)
}

/// Write `index.html` of `records` under `dir`; `pending` names the
/// experiments of the run not finished yet.
pub fn write_index(
    dir: &Path,
    meta: &ReportMeta,
    records: &[UnitRecord],
    pending: &[String],
) -> std::io::Result<()> {
    let html = render_html(meta, records, pending);
    write_atomic(&dir.join("index.html"), html.as_bytes())
}

/// Write `index.html`, `results.json`, the unit records and the raw files
/// under `dir`, each to a temporary name and renamed, so an interrupted
/// run never leaves a half-written file.
pub fn write_report(
    dir: &Path,
    meta: &ReportMeta,
    origin: &UnitOrigin,
    experiments: &[ExperimentResult],
) -> std::io::Result<Vec<UnitRecord>> {
    std::fs::create_dir_all(dir)?;
    let mut records = Vec::new();
    for e in experiments {
        let record = UnitRecord::of(origin, e)?;
        write_unit(dir, &record, &e.raw_files)?;
        records.push(record);
    }
    write_results(dir, meta, &records)?;
    write_index(dir, meta, &records, &[])?;
    Ok(records)
}

/// Write `contents` to a hidden name beside `path`, then rename it over.
pub fn write_atomic(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".partial-{name}"));
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
.fitted{color:#06c}\
.findings td,.findings th{text-align:left;vertical-align:top}.findings td:nth-child(2){width:36%}\
.findings code{font-size:.8em;word-break:break-all}";

/// The report page of finished `records`; `pending` names the run's
/// experiments still to come (empty when the run is complete).
pub fn render_html(meta: &ReportMeta, records: &[UnitRecord], pending: &[String]) -> String {
    let sum = |f: fn(&UnitRecord) -> [usize; 2]| {
        records
            .iter()
            .map(f)
            .fold([0, 0], |a, b| [a[0] + b[0], a[1] + b[1]])
    };
    let [cal_pass, cal] = sum(|r| r.calibration);
    let [pred_pass, pred] = sum(|r| r.prediction);
    let [sanity_pass, sanity] = sum(|r| r.sanity);
    let fitted: usize = records.iter().map(|r| r.fitted).sum();
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>flashlab reproduce</title><style>{STYLE}</style></head><body>"
    );
    html.push_str("<h1>flashlab: reproducing the papers</h1>");
    if !pending.is_empty() {
        let _ = write!(
            html,
            "<p class=\"summary\"><b>This run is not finished: {} of {} experiments so far.</b> Still to come: {}. The counts below are of the finished ones.</p>",
            records.len(),
            records.len() + pending.len(),
            escape(&pending.join(", "))
        );
    }
    let outcomes = outcomes(records);
    render_findings(&mut html, &evaluate_all(&outcomes));
    let _ = write!(
        html,
        "<p class=\"summary\"><b>Predictions: {pred_pass} of {pred} pass</b> (workload results, set from nothing they are checked against). \
         <b>Calibration: {cal_pass} of {cal} pass</b> (device presets and the CPU model against the published figures they were set from; {fitted} of them name a parameter fitted to that very row). \
         Sanity assertions: {sanity_pass} of {sanity} hold (values the run's construction pins; counted in neither). \
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
    let ids: Vec<&str> = records.iter().map(|r| r.id.as_str()).collect();
    render_coverage(&mut html, &ids, &outcomes);
    html.push_str("<h2>Experiments</h2><table><tr><th>Experiment</th><th>Predictions pass</th><th>Calibration pass</th></tr>");
    for r in records {
        let ([pp, pn], [cp, cn]) = (r.prediction, r.calibration);
        let _ = write!(
            html,
            "<tr><td><a href=\"#{}\">{}</a></td><td>{pp} / {pn}</td><td>{cp} / {cn}</td></tr>",
            escape(&r.id),
            escape(&r.title)
        );
    }
    html.push_str("</table>");
    render_cpu_model(&mut html);
    for r in records {
        html.push_str(&r.html);
    }
    html.push_str("</body></html>\n");
    html
}

fn render_cpu_model(html: &mut String) {
    use crate::calibrate::{CALIBRATION_PATH, committed};
    let c = committed();
    let _ = write!(
        html,
        "<h2 id=\"cpu-model\">The CPU model</h2><p>A simulated transaction costs the sum of its events' prices: begin and commit, each statement, each row a scan visits, each buffer page access, each page I/O request and its KB, each KB of log. \
         The prices are a system profile: what each event costs flashlab's own engine (measured by <code>flashlab calibrate --out {CALIBRATION_PATH}</code> on {}, {} rounds, medians), times the profile's scale, plus its fixed cost per transaction. \
         A profile fits at most two parameters, each to one declared published point, listed below with the calibration check that holds it; everything else is a prediction. The engine compiles the file in.</p>",
        escape(&c.host_cpu),
        c.rounds
    );
    html.push_str("<table><tr><th>Engine event</th><th>Host ns</th>");
    for p in &c.profiles {
        let _ = write!(html, "<th>{} (ns at {} GHz)</th>", escape(&p.id), p.ghz);
    }
    html.push_str("</tr>");
    for price in &c.prices {
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td>",
            escape(&price.name),
            fmt_num(price.host_ns)
        );
        for p in &c.profiles {
            let _ = write!(
                html,
                "<td>{}</td>",
                fmt_num(price.host_ns * p.scale_of(price.key))
            );
        }
        html.push_str("</tr>");
    }
    html.push_str("</table><ul>");
    for p in &c.profiles {
        let _ = write!(
            html,
            "<li><b>{}</b>: {}; scale {:.3} <i>(fitted)</i>, fixed cost {} ns a transaction{}, page I/O KB scale {:.3}{}.",
            escape(&p.id),
            escape(&p.system),
            p.scale,
            fmt_num(p.txn_ns),
            fitted_html(p, "txn_ns"),
            p.page_kb_scale,
            fitted_html(p, "page_kb_scale"),
        );
        for f in &p.fitted {
            let _ = write!(
                html,
                " {} from {} ({} ns a transaction; the engine's prices give {}; check <code>{}</code>).",
                escape(&f.parameter),
                escape(&f.point),
                fmt_num(f.published_ns),
                fmt_num(f.engine_ns),
                escape(&f.check)
            );
        }
        html.push_str("</li>");
    }
    html.push_str("</ul>");
}

/// The findings table: the papers' headlines, published and measured, and
/// their verdicts (see [`crate::findings`]).
fn render_findings(html: &mut String, findings: &[FindingResult]) {
    let count = |v| findings.iter().filter(|f| f.verdict == v).count();
    use crate::findings::Verdict::{NotReproduced, NotRun, Partly, Reproduced};
    let _ = write!(
        html,
        "<h2 id=\"findings\">Findings</h2><p>Each paper's headline conclusions in its own words: {} reproduced, {} partly, {} not reproduced, {} not run. \
         A finding is REPRODUCED when every check it rests on passes, PARTLY when some do, NOT REPRODUCED when none does, and not run when one of its checks is not in this run; the cause of a miss is taken from its first missed check.</p>",
        count(Reproduced),
        count(Partly),
        count(NotReproduced),
        count(NotRun)
    );
    html.push_str("<table class=\"findings\"><tr><th>Paper</th><th>Finding (the paper's words)</th><th>Published</th><th>Measured</th><th>Verdict</th><th>Cause of a miss</th><th>Checks</th></tr>");
    for f in findings {
        let _ = write!(
            html,
            "<tr><td>{}</td><td>&ldquo;{}&rdquo;</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td><code>{}</code></td></tr>",
            escape(f.paper),
            escape(f.quote),
            escape(f.published),
            escape(&f.measured),
            f.verdict.class(),
            f.verdict.label(),
            escape(&f.cause),
            escape(&f.checks.join(", "))
        );
    }
    html.push_str("</table>");
}

fn render_coverage(html: &mut String, experiments: &[&str], outcomes: &[Outcome]) {
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
                if experiments.contains(id) {
                    format!("<a href=\"#{0}\">{0}</a>", escape(id))
                } else {
                    format!("{} (not in this run)", escape(id))
                }
            })
            .collect();
        let (status, class) = status_cell(i, outcomes, experiments);
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"{class}\">{}</td><td>{}</td><td>{}</td></tr>",
            escape(i.paper),
            escape(i.item),
            escape(i.what),
            escape(&status),
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
    let (sanity, checks): (Vec<Check>, Vec<Check>) = e
        .checks
        .iter()
        .cloned()
        .partition(|c| c.kind == Kind::Sanity);
    if !checks.is_empty() {
        render_checks(html, &checks);
    }
    if !sanity.is_empty() {
        html.push_str("<p class=\"note\">Sanity assertions: values the run's construction pins, so no wrong model can fail them; counted in neither predictions nor calibration.</p>");
        render_checks(html, &sanity);
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
        let published = match c.form {
            Form::OptimumRange => format!("{} to {}", fmt_num(c.range[0]), fmt_num(c.range[1])),
            _ => fmt_num(c.published),
        };
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{published} {}</td><td>{} {}</td><td>{range}</td><td class=\"{class}\">{}</td><td class=\"fitted\">{}</td><td>{}</td></tr>",
            escape(&c.what),
            c.kind.label(),
            escape(&c.paper),
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

/// " <i>(fitted)</i>" when `p` fitted `parameter`.
fn fitted_html(p: &flashlab_engine::cpu_calibration::Profile, parameter: &str) -> &'static str {
    if p.fitted.iter().any(|f| f.parameter == parameter) {
        " <i>(fitted)</i>"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_contains_checks_and_is_written_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let e = ExperimentResult {
            id: "x".into(),
            title: "X <test>".into(),
            checks: vec![Check::value("x.a", "paper", "a", "ms", 1.0, 1.1)],
            ..ExperimentResult::default()
        };
        let meta = ReportMeta {
            seed: 1,
            quick: true,
            version: "test".into(),
            host_seconds: 0.0,
        };
        write_report(dir.path(), &meta, &origin(), &[e]).unwrap();
        let html = std::fs::read_to_string(dir.path().join("index.html")).unwrap();
        assert!(html.contains("X &lt;test&gt;") && html.contains("PASS"));
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("results.json")).unwrap())
                .unwrap();
        assert_eq!(json["checks"][0]["pass"], serde_json::Value::Bool(true));
        assert_eq!(json["checks"][0]["range"][1], serde_json::json!(1.25));
        assert!(!dir.path().join(".partial-index.html").exists());
    }

    fn origin() -> UnitOrigin {
        UnitOrigin {
            version: "test".into(),
            binary: "b".into(),
            seed: 1,
            quick: true,
            scale: None,
        }
    }

    /// `results.json` as serde writes the whole report in one value.
    #[derive(Serialize)]
    struct Whole<'a> {
        meta: &'a ReportMeta,
        rule: &'static str,
        summary: serde_json::Value,
        findings: Vec<FindingResult>,
        checks: Vec<&'a Check>,
        experiments: Vec<ExperimentResult>,
    }

    #[test]
    fn results_assembled_from_records_are_the_bytes_of_one_value() {
        let meta = ReportMeta {
            seed: 1,
            quick: false,
            version: "test".into(),
            host_seconds: 3.0,
        };
        let e = |id: &str, n: usize| ExperimentResult {
            id: id.into(),
            title: format!("{id} \"t\""),
            checks: (0..n)
                .map(|i| {
                    Check::at_least(&format!("{id}.{i}"), "p T1", "w", "ms", 1.0, 0.5 + i as f64)
                })
                .collect(),
            tables: vec![Table {
                title: "t".into(),
                columns: vec!["a".into()],
                rows: vec![vec!["1".into()], vec![]],
            }],
            data: serde_json::json!({"x": [1.5, 2, {"y": null}], "host_seconds_z": 4.0, "e": {}}),
            ..ExperimentResult::default()
        };
        for experiments in [vec![], vec![e("a", 0)], vec![e("a", 2), e("b", 1)]] {
            let records: Vec<UnitRecord> = experiments
                .iter()
                .map(|x| UnitRecord::of(&origin(), x).unwrap())
                .collect();
            let mut stripped = experiments.clone();
            for x in &mut stripped {
                take_host_times(&mut x.data, "", &mut serde_json::Map::new());
            }
            let checks: Vec<&Check> = experiments.iter().flat_map(|x| x.checks.iter()).collect();
            let (cp, c) = tally(checks.iter().copied(), Kind::Calibration);
            let (pp, p) = tally(checks.iter().copied(), Kind::Prediction);
            let (sp, sn) = tally(checks.iter().copied(), Kind::Sanity);
            let read_back: Vec<Outcome> = checks
                .iter()
                .map(|c| serde_json::from_value(serde_json::to_value(c).unwrap()).unwrap())
                .collect();
            let whole = Whole {
                meta: &meta,
                rule: RULE,
                summary: serde_json::json!({
                    "calibration": {"pass": cp, "checks": c},
                    "prediction": {"pass": pp, "checks": p},
                    "sanity": {"pass": sp, "checks": sn},
                }),
                findings: evaluate_all(&read_back),
                checks,
                experiments: stripped,
            };
            let want = serde_json::to_string_pretty(&whole).unwrap();
            assert_eq!(results_json(&meta, &records).unwrap(), want);
        }
    }
}
