//! Line charts for the report, as SVG text.
//!
//! The papers' figures are mostly curves (throughput against clients,
//! elapsed time against cluster size, bandwidth against block size). This
//! draws one or more named series with plotters' SVG backend, optionally on
//! a logarithmic x axis, and returns the SVG so the report can inline it.

use anyhow::anyhow;
use plotters::prelude::*;

/// Width and height of report charts in pixels.
pub const CHART_WIDTH_PX: u32 = 720;
pub const CHART_HEIGHT_PX: u32 = 420;

/// One named curve.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Published values are drawn dashed-looking (points only).
    pub published: bool,
}

/// A chart description.
#[derive(Clone, Debug)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub series: Vec<Series>,
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

impl LineChart {
    /// Render to SVG text.
    pub fn to_svg(&self) -> anyhow::Result<String> {
        crate::plot::register_fonts().map_err(|e| anyhow!("chart '{}': {e}", self.title))?;
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (CHART_WIDTH_PX, CHART_HEIGHT_PX))
                .into_drawing_area();
            self.draw(&root)
                .map_err(|e| anyhow!("chart '{}': {e}", self.title))?;
            root.present()
                .map_err(|e| anyhow!("chart '{}': {e}", self.title))?;
        }
        Ok(svg)
    }

    fn bounds(&self) -> (f64, f64, f64, f64) {
        let points = self.series.iter().flat_map(|s| s.points.iter());
        let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
        for &(x, y) in points {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y1 = y1.max(y);
        }
        if !x0.is_finite() {
            return (1.0, 2.0, 0.0, 1.0);
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        (x0, x1, 0.0, if y1 > 0.0 { y1 * 1.1 } else { 1.0 })
    }

    fn draw(
        &self,
        root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    ) -> anyhow::Result<()> {
        let e = |err: &dyn std::fmt::Display| anyhow::anyhow!("{err}");
        root.fill(&WHITE).map_err(|err| e(&err))?;
        let (x0, x1, y0, y1) = self.bounds();
        let mut builder = ChartBuilder::on(root);
        builder
            .caption(&self.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60);
        if self.log_x {
            let mut chart = builder
                .build_cartesian_2d((x0..x1).log_scale(), y0..y1)
                .map_err(|err| e(&err))?;
            self.draw_chart(&mut chart)?;
        } else {
            let mut chart = builder
                .build_cartesian_2d(x0..x1, y0..y1)
                .map_err(|err| e(&err))?;
            self.draw_chart(&mut chart)?;
        }
        Ok(())
    }

    /// The mesh, the series and their legend.
    fn draw_chart<'a, X, Y>(
        &self,
        chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    ) -> anyhow::Result<()>
    where
        X: plotters::coord::ranged1d::Ranged<ValueType = f64>
            + plotters::coord::ranged1d::ValueFormatter<f64>,
        Y: plotters::coord::ranged1d::Ranged<ValueType = f64>
            + plotters::coord::ranged1d::ValueFormatter<f64>,
    {
        let e = |err: &dyn std::fmt::Display| anyhow::anyhow!("{err}");
        chart
            .configure_mesh()
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .draw()
            .map_err(|err| e(&err))?;
        self.draw_series(chart)?;
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|err| e(&err))?;
        Ok(())
    }

    fn draw_series<X, Y>(
        &self,
        chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<X, Y>>,
    ) -> anyhow::Result<()>
    where
        X: plotters::coord::ranged1d::Ranged<ValueType = f64>,
        Y: plotters::coord::ranged1d::Ranged<ValueType = f64>,
    {
        for (index, series) in self.series.iter().enumerate() {
            let color = PALETTE[index % PALETTE.len()];
            if series.published {
                chart
                    .draw_series(
                        series
                            .points
                            .iter()
                            .map(|&p| TriangleMarker::new(p, 6, color.filled())),
                    )
                    .map_err(|err| anyhow::anyhow!("{err}"))?
                    .label(series.name.clone())
                    .legend(move |(x, y)| TriangleMarker::new((x + 8, y), 5, color.filled()));
            } else {
                chart
                    .draw_series(LineSeries::new(
                        series.points.iter().copied(),
                        color.stroke_width(2),
                    ))
                    .map_err(|err| anyhow::anyhow!("{err}"))?
                    .label(series.name.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                    });
                chart
                    .draw_series(
                        series
                            .points
                            .iter()
                            .map(|&p| Circle::new(p, 3, color.filled())),
                    )
                    .map_err(|err| anyhow::anyhow!("{err}"))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_renders_series_names() {
        let chart = LineChart {
            title: "bandwidth".into(),
            x_label: "block (KB)".into(),
            y_label: "MB/s".into(),
            log_x: true,
            series: vec![
                Series {
                    name: "measured".into(),
                    points: vec![(8.0, 100.0), (64.0, 200.0)],
                    published: false,
                },
                Series {
                    name: "published".into(),
                    points: vec![(8.0, 110.0), (64.0, 190.0)],
                    published: true,
                },
            ],
        };
        let svg = chart.to_svg().unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("measured") && svg.contains("published"));
    }
}
