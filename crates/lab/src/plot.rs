//! Time × address scatter plots of I/O traces.
//!
//! lee2008 makes its case with pictures of where a database writes: Figures
//! 4 to 8 plot every request of a TPC-C run as a dot at (time, address), one
//! picture per storage space, and the pictures show at a glance that the log
//! is written as one sequential stream, that the temporary space is written
//! and read back in long sequential runs, and that data pages go everywhere.
//! wang2010 Figure 10 draws the same kind of picture. [`plot_trace`] draws it
//! from flashlab's own [`TraceRecord`]s: reads and writes in two colours, one
//! panel per storage space present (stacked vertically, in the order data,
//! log, rollback, temp, raw), x = seconds since the first request, y = the
//! request's offset in MiB (2^20 bytes).
//!
//! A traced run holds millions of requests, and a picture of a million dots
//! is a picture of a few thousand pixels. At most [`PLOT_POINTS_MAX`] reads
//! and writes are kept, taken evenly (every k-th request in trace order),
//! and the title says so when it happens; dots landing on a pixel already
//! drawn in the same panel and colour are dropped too, which changes nothing
//! visible but keeps the SVG small. Flushes and trims have no address worth
//! a dot and are not drawn.
//!
//! Output follows the file extension: `.svg` (plotters' SVG backend, text
//! left to the viewer's fonts) or `.png` (plotters' bitmap backend). A
//! bitmap needs glyphs, and this crate must build without system libraries
//! (no fontconfig, no freetype), so text is laid out and rasterised by
//! plotters' pure-Rust `ab_glyph` support with a font compiled into the
//! binary: Noto Sans Regular from the `ttf-noto-sans` crate (Apache 2.0).
//! With `ab_glyph` enabled plotters measures *all* text, SVG included,
//! through fonts registered with it, so every plotters drawing in this
//! crate must call [`register_fonts`] first ([`plot_trace`] and
//! [`trace_svg`] do).

use anyhow::anyhow;
use std::collections::HashSet;
use std::fs;
use std::path::Path;
use std::sync::OnceLock;

use flashlab_devices::{IoKind, Space, TraceRecord};
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::FontStyle;
use thiserror::Error;

/// The most reads and writes drawn in one plot; beyond it requests are
/// sampled evenly and the title says so.
pub const PLOT_POINTS_MAX: usize = 200_000;
/// Width of a plot in pixels.
pub const PLOT_WIDTH_PX: u32 = 1000;
/// Height of one storage-space panel in pixels.
pub const PANEL_HEIGHT_PX: u32 = 300;
/// Height of the title strip in pixels.
pub const TITLE_HEIGHT_PX: u32 = 40;

/// The font families plotters asks for, all served by the bundled font.
const FONT_FAMILIES: [&str; 3] = ["sans-serif", "serif", "monospace"];
const TITLE_FONT_PX: u32 = 22;
const CAPTION_FONT_PX: u32 = 16;
const LABEL_FONT_PX: u32 = 13;
const DOT_RADIUS_PX: i32 = 1;
const LEGEND_DOT_RADIUS_PX: i32 = 4;
const READ_COLOR: RGBColor = RGBColor(31, 119, 180);
const WRITE_COLOR: RGBColor = RGBColor(214, 39, 40);
const BYTES_PER_MIB: f64 = 1_048_576.0;
const NS_PER_S: f64 = 1_000_000_000.0;
/// The smallest axis extent, so a trace of one instant or one address
/// still gets a drawable range.
const AXIS_SPAN_MIN: f64 = 1e-6;

/// Why a plot could not be drawn or written.
#[derive(Debug, Error)]
pub enum PlotError {
    /// The records hold no read or write.
    #[error("nothing to plot: the trace has no reads or writes")]
    Empty,
    /// The output file's extension names no format this module writes.
    #[error("{path}: unknown plot format '{extension}' (use .svg or .png)")]
    UnknownFormat {
        /// The output path.
        path: String,
        /// Its extension, lower-cased.
        extension: String,
    },
    /// Writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The output path.
        path: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// plotters refused to draw (or to encode the bitmap).
    #[error("drawing '{title}': {problem}")]
    Draw {
        /// The plot's title.
        title: String,
        /// What plotters said.
        problem: String,
    },
    /// The bundled font could not be registered.
    #[error("the bundled font could not be registered with plotters")]
    Font,
}

/// Register the bundled font with plotters under every family name it
/// asks for. Idempotent and cheap after the first call; every plotters
/// drawing in this crate must call it first (see the module documentation).
pub fn register_fonts() -> Result<(), PlotError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = REGISTERED.get_or_init(|| {
        FONT_FAMILIES.iter().all(|family| {
            plotters::style::register_font(family, FontStyle::Normal, ttf_noto_sans::REGULAR)
                .is_ok()
        })
    });
    if *ok { Ok(()) } else { Err(PlotError::Font) }
}

/// Draw the time × address plot of `records` to `out`, as SVG or PNG by
/// the file's extension.
pub fn plot_trace(records: &[TraceRecord], title: &str, out: &Path) -> Result<(), PlotError> {
    let path = out.display().to_string();
    let extension = out
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match extension.as_str() {
        "svg" => {
            let svg = trace_svg(records, title)?;
            fs::write(out, svg).map_err(|source| PlotError::Io { path, source })
        }
        "png" => write_png(records, title, out),
        _ => Err(PlotError::UnknownFormat { path, extension }),
    }
}

/// The time × address plot of `records` as SVG text, for inlining in an
/// HTML report.
pub fn trace_svg(records: &[TraceRecord], title: &str) -> Result<String, PlotError> {
    register_fonts()?;
    let plan = Plan::new(records, title)?;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, plan.size_px()).into_drawing_area();
        draw(&root, &plan).map_err(|problem| plan.draw_error(problem.to_string()))?;
        root.present().map_err(|e| plan.draw_error(e.to_string()))?;
    }
    Ok(svg)
}

/// The time × address plot of `records` as an HTML `<img>` holding a PNG
/// (a data URI), for the report: a raster keeps the page small however many
/// dots a trace has (an SVG carries every dot), while the full trace stays
/// in the CSV the report links. `alt` is the image's text alternative.
pub fn trace_img_html(records: &[TraceRecord], title: &str) -> Result<String, PlotError> {
    register_fonts()?;
    let plan = Plan::new(records, title)?;
    let (width, height) = plan.size_px();
    let mut rgb = vec![0u8; width as usize * height as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (width, height)).into_drawing_area();
        draw(&root, &plan).map_err(|problem| plan.draw_error(problem.to_string()))?;
        root.present().map_err(|e| plan.draw_error(e.to_string()))?;
    }
    let mut png = Vec::new();
    image::ImageEncoder::write_image(
        image::codecs::png::PngEncoder::new(&mut png),
        &rgb,
        width,
        height,
        image::ColorType::Rgb8,
    )
    .map_err(|e| plan.draw_error(e.to_string()))?;
    Ok(format!(
        "<img width=\"{width}\" height=\"{height}\" style=\"max-width:100%;height:auto\" alt=\"{}\" src=\"data:image/png;base64,{}\">",
        crate::report::escape(&plan.title),
        base64(&png)
    ))
}

/// Standard base64 (RFC 4648, with padding).
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn write_png(records: &[TraceRecord], title: &str, out: &Path) -> Result<(), PlotError> {
    register_fonts()?;
    let plan = Plan::new(records, title)?;
    let root = BitMapBackend::new(out, plan.size_px()).into_drawing_area();
    draw(&root, &plan).map_err(|problem| plan.draw_error(problem.to_string()))?;
    root.present().map_err(|e| plan.draw_error(e.to_string()))
}

/// One storage space's dots.
struct Panel {
    space: Space,
    reads: Vec<(f64, f64)>,
    writes: Vec<(f64, f64)>,
    /// Address range in MiB.
    y_range: (f64, f64),
}

/// Everything to draw, computed before any backend is involved.
struct Plan {
    title: String,
    panels: Vec<Panel>,
    /// Time range end in seconds (the range starts at 0).
    x_max: f64,
}

impl Plan {
    fn new(records: &[TraceRecord], title: &str) -> Result<Plan, PlotError> {
        let data: Vec<&TraceRecord> = records
            .iter()
            .filter(|r| matches!(r.kind, IoKind::Read | IoKind::Write))
            .collect();
        let start_ns = data
            .iter()
            .map(|r| r.submit_ns)
            .min()
            .ok_or(PlotError::Empty)?;
        let stride = data.len().div_ceil(PLOT_POINTS_MAX).max(1);
        let shown: Vec<&TraceRecord> = data.iter().copied().step_by(stride).collect();
        let x_max = shown
            .iter()
            .map(|r| seconds(r.submit_ns - start_ns))
            .fold(AXIS_SPAN_MIN, f64::max);
        let panels = Space::ALL
            .into_iter()
            .filter_map(|space| panel(space, &shown, start_ns, x_max))
            .collect();
        Ok(Plan {
            title: sampled_title(title, stride, data.len()),
            panels,
            x_max,
        })
    }

    fn size_px(&self) -> (u32, u32) {
        let panels = u32::try_from(self.panels.len()).unwrap_or(1);
        (PLOT_WIDTH_PX, TITLE_HEIGHT_PX + PANEL_HEIGHT_PX * panels)
    }

    fn draw_error(&self, problem: String) -> PlotError {
        PlotError::Draw {
            title: self.title.clone(),
            problem,
        }
    }
}

fn seconds(ns: u64) -> f64 {
    ns as f64 / NS_PER_S
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / BYTES_PER_MIB
}

fn sampled_title(title: &str, stride: usize, total: usize) -> String {
    if stride <= 1 {
        title.to_string()
    } else {
        format!("{title} (1 in {stride} of {total} requests shown)")
    }
}

/// The panel of one space, or `None` if the space has no dots.
fn panel(space: Space, shown: &[&TraceRecord], start_ns: u64, x_max: f64) -> Option<Panel> {
    let records: Vec<&TraceRecord> = shown.iter().copied().filter(|r| r.space == space).collect();
    let low = records
        .iter()
        .map(|r| mib(r.offset_bytes))
        .reduce(f64::min)?;
    let high = records
        .iter()
        .map(|r| mib(r.offset_bytes.saturating_add(r.len_bytes)))
        .fold(low, f64::max);
    let y_range = padded(low, high);
    let mut grid = PixelGrid::new(x_max, y_range);
    let (mut reads, mut writes) = (Vec::new(), Vec::new());
    for record in records {
        let point = (
            seconds(record.submit_ns - start_ns),
            mib(record.offset_bytes),
        );
        if grid.first_at(record.kind, point) {
            match record.kind {
                IoKind::Read => reads.push(point),
                _ => writes.push(point),
            }
        }
    }
    Some(Panel {
        space,
        reads,
        writes,
        y_range,
    })
}

/// An address range with a little room above and below.
fn padded(low: f64, high: f64) -> (f64, f64) {
    let margin = ((high - low) * 0.02).max(AXIS_SPAN_MIN);
    ((low - margin).max(0.0), high + margin)
}

/// Remembers which pixel of a panel already has a dot of each colour.
struct PixelGrid {
    x_scale: f64,
    y_low: f64,
    y_scale: f64,
    seen: HashSet<(bool, u32, u32)>,
}

impl PixelGrid {
    fn new(x_max: f64, (y_low, y_high): (f64, f64)) -> PixelGrid {
        PixelGrid {
            x_scale: f64::from(PLOT_WIDTH_PX) / x_max,
            y_low,
            y_scale: f64::from(PANEL_HEIGHT_PX) / (y_high - y_low),
            seen: HashSet::new(),
        }
    }

    /// True the first time a dot of this kind lands on this pixel.
    fn first_at(&mut self, kind: IoKind, (x, y): (f64, f64)) -> bool {
        // Float to integer casts saturate, so any value gives some pixel.
        let px = (x * self.x_scale) as u32;
        let py = ((y - self.y_low) * self.y_scale) as u32;
        self.seen.insert((kind == IoKind::Read, px, py))
    }
}

/// Draw the title and the panels on any backend.
fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, plan: &Plan) -> anyhow::Result<()> {
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let body = root
        .titled(&plan.title, ("sans-serif", TITLE_FONT_PX))
        .map_err(|e| anyhow!("{e}"))?;
    let areas = body.split_evenly((plan.panels.len().max(1), 1));
    for (area, panel) in areas.iter().zip(&plan.panels) {
        draw_panel(area, panel, plan.x_max).map_err(|e| anyhow!("{e}"))?;
    }
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    x_max: f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let caption = format!("{} space", panel.space.as_str());
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", CAPTION_FONT_PX))
        .margin(8)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, panel.y_range.0..panel.y_range.1)?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("address (MiB)")
        .label_style(("sans-serif", LABEL_FONT_PX))
        .draw()?;
    draw_dots(&mut chart, &panel.reads, READ_COLOR, "read")?;
    draw_dots(&mut chart, &panel.writes, WRITE_COLOR, "write")?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", LABEL_FONT_PX))
        .draw()
}

fn draw_dots<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    points: &[(f64, f64)],
    color: RGBColor,
    label: &str,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    if points.is_empty() {
        // No legend entry for a series the panel does not have.
        return Ok(());
    }
    let dots = points
        .iter()
        .map(|&point| Circle::new(point, DOT_RADIUS_PX, color.filled()));
    chart
        .draw_series(dots)?
        .label(label)
        .legend(move |(x, y)| Circle::new((x, y), LEGEND_DOT_RADIUS_PX, color.filled()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn record(space: Space, kind: IoKind, submit_ns: u64, offset_bytes: u64) -> TraceRecord {
        TraceRecord {
            submit_ns,
            complete_ns: submit_ns + 100_000,
            device: Arc::from("ssd"),
            space,
            kind,
            offset_bytes,
            len_bytes: 8192,
        }
    }

    fn sample() -> Vec<TraceRecord> {
        let mut records = Vec::new();
        for i in 0..500u64 {
            let t = i * 10_000_000;
            records.push(record(Space::Log, IoKind::Write, t, i * 8192));
            let random = (i * 7919 % 500) * 1_048_576;
            let kind = if i % 3 == 0 {
                IoKind::Write
            } else {
                IoKind::Read
            };
            records.push(record(Space::Data, kind, t, random));
        }
        records.push(record(Space::Temp, IoKind::Flush, 0, 0));
        records
    }

    #[test]
    fn svg_has_one_panel_per_space_present() {
        let svg = trace_svg(&sample(), "TPC-C on ssd").unwrap();
        assert!(svg.starts_with("<svg"));
        for text in [
            "TPC-C on ssd",
            "data space",
            "log space",
            "time (s)",
            "address (MiB)",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
        assert!(svg.contains("read") && svg.contains("write"));
        // Temp holds only a flush: no panel.
        assert!(!svg.contains("temp space"));
    }

    #[test]
    fn plot_writes_svg_and_png_by_extension() {
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("trace.svg");
        plot_trace(&sample(), "lee2008 figure 4", &svg).unwrap();
        let text = fs::read_to_string(&svg).unwrap();
        assert!(text.contains("log space") && text.contains("data space"));
        let png = dir.path().join("trace.PNG");
        plot_trace(&sample(), "lee2008 figure 4", &png).unwrap();
        let bytes = fs::read(&png).unwrap();
        assert!(bytes.len() > 1000);
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    }

    #[test]
    fn base64_matches_rfc_4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn the_report_image_of_a_million_requests_stays_small() {
        let records: Vec<TraceRecord> = (0..1_000_000u64)
            .map(|i| {
                let kind = if i % 3 == 0 {
                    IoKind::Read
                } else {
                    IoKind::Write
                };
                record(Space::Temp, kind, i * 1_000, (i * 7919 % 100_000) * 4096)
            })
            .collect();
        let html = trace_img_html(&records, "a million").unwrap();
        assert!(html.starts_with("<img ") && html.contains("data:image/png;base64,"));
        // The SVG of the same trace carries a dot per pixel drawn.
        assert!(html.len() < 400_000, "{} bytes", html.len());
    }

    #[test]
    fn unknown_extension_and_empty_trace_are_errors() {
        let err = plot_trace(&sample(), "t", Path::new("out.jpeg")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "out.jpeg: unknown plot format 'jpeg' (use .svg or .png)"
        );
        assert!(plot_trace(&sample(), "t", Path::new("out")).is_err());
        let flush_only = [record(Space::Log, IoKind::Flush, 0, 0)];
        assert!(matches!(trace_svg(&flush_only, "t"), Err(PlotError::Empty)));
        assert!(matches!(trace_svg(&[], "t"), Err(PlotError::Empty)));
    }

    #[test]
    fn large_traces_are_sampled_and_say_so() {
        let records: Vec<TraceRecord> = (0..(2 * PLOT_POINTS_MAX as u64 + 10))
            .map(|i| record(Space::Raw, IoKind::Read, i, i % 4096 * 512))
            .collect();
        let plan = Plan::new(&records, "big").unwrap();
        assert_eq!(
            plan.title,
            format!("big (1 in 3 of {} requests shown)", records.len())
        );
        assert!(plan.panels[0].reads.len() <= PLOT_POINTS_MAX);
    }

    #[test]
    fn degenerate_records_still_plot() {
        let same = [
            record(Space::Rollback, IoKind::Write, 5, u64::MAX),
            record(Space::Rollback, IoKind::Read, 5, u64::MAX),
        ];
        let svg = trace_svg(&same, "one instant").unwrap();
        assert!(svg.contains("rollback space"));
    }
}
