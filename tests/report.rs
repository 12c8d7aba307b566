//! The report reads well in a browser: `flashlab reproduce` writes an
//! index.html that headless Chromium renders to a PNG, and every figure in
//! it is present and not empty.

mod common;

use std::path::Path;
use std::process::Command;

use common::{flashlab, stderr};

/// Smallest SVG that still draws something (axes, labels and marks).
const FIGURE_SVG_BYTES_MIN: usize = 2_000;
/// Least base64 bytes of an inline PNG scatter with points on it.
const FIGURE_PNG_BASE64_BYTES_MIN: usize = 4_000;

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| {
            Command::new(name)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

fn figures(html: &str) -> Vec<&str> {
    html.split("<figure")
        .skip(1)
        .map(|rest| rest.split("</figure>").next().unwrap_or(""))
        .collect()
}

fn screenshot(browser: &str, html: &Path, png: &Path, profile: &Path) {
    let status = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1200,4000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", html.display()))
        .status()
        .expect("run chromium");
    assert!(status.success(), "chromium failed: {status}");
}

#[test]
fn report_renders_in_headless_chromium_with_every_figure() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let only = ["--only", "lee2008-table2", "--only", "lee2008-table3"];
    let mut args = vec!["reproduce", "--quick"];
    args.extend(only);
    args.extend(["--out", out.to_str().unwrap()]);
    let run = flashlab(&args);
    assert!(run.status.success(), "{}", stderr(&run));
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    let figs = figures(&html);
    assert!(
        figs.len() >= 3,
        "expected the Table 2 chart and two log-pattern plots, found {}",
        figs.len()
    );
    for fig in &figs {
        // A chart is inline SVG; an I/O scatter is an inline PNG (so the
        // page stays small), each with something drawn in it.
        if let Some(png_start) = fig.find("data:image/png;base64,") {
            let png = &fig[png_start..];
            let end = png.find('"').unwrap_or(png.len());
            assert!(
                end >= FIGURE_PNG_BASE64_BYTES_MIN,
                "a scatter image is nearly empty: {end} bytes"
            );
            continue;
        }
        let svg_start = fig
            .find("<svg")
            .expect("a figure holds an inline SVG or PNG");
        let svg = &fig[svg_start..];
        assert!(
            svg.len() >= FIGURE_SVG_BYTES_MIN,
            "a figure is nearly empty: {} bytes",
            svg.len()
        );
        let marks = svg.matches("<circle").count()
            + svg.matches("<polyline").count()
            + svg.matches("<rect").count();
        assert!(marks > 5, "a figure draws almost nothing ({marks} marks)");
    }
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    for check in results["checks"].as_array().unwrap() {
        for key in ["id", "paper", "published", "measured", "range", "pass"] {
            assert!(check.get(key).is_some(), "a check lacks '{key}'");
        }
    }
    // The findings open the report; those resting on the two units run
    // have verdicts, the others are "not run".
    let findings = html.find("id=\"findings\"").expect("a findings table");
    assert!(
        findings < html.find("Predictions:").unwrap(),
        "the findings come first"
    );
    for f in results["findings"]
        .as_array()
        .expect("results.json has findings")
    {
        for key in ["id", "paper", "quote", "checks", "verdict", "cause"] {
            assert!(f.get(key).is_some(), "a finding lacks '{key}'");
        }
        let ran = f["checks"].as_array().unwrap().iter().all(|c| {
            let c = c.as_str().unwrap();
            c.starts_with("lee2008.table2.") || c.starts_with("lee2008.table3.")
        });
        assert_eq!(f["verdict"] != "not_run", ran, "{f}");
    }
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have chromium (.ci/run installs it)"
        );
        eprintln!("chromium is not installed: skipping the screenshot (CI installs it)");
        return;
    };
    let png = dir.path().join("report.png");
    screenshot(
        browser,
        &out.join("index.html"),
        &png,
        &dir.path().join("profile"),
    );
    let bytes = std::fs::read(&png).expect("chromium wrote a screenshot");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "the screenshot is a PNG");
    assert!(
        bytes.len() > 50_000,
        "the screenshot is suspiciously small: {} bytes",
        bytes.len()
    );
}
