//! SVG plots. Every plot is a pure function from plain data to an SVG `String`, drawn with
//! plotters' SVG backend (text stays `<text>`, so no font files are needed).
//!
//! Layers: [`XyPlot`] + [`render_xy`] is the one engine for every x/y chart (lines, points,
//! CI bands, linear or log axes, legend at the right); [`boxplot`] draws box plots; `charts`
//! turns report data into [`XyPlot`]s (objective vs a factor, stall scatter, CDFs, time
//! series). Style choices for print: black text, white background, the Okabe-Ito palette
//! (distinguishable by colour-blind readers) plus a different marker per series so lines stay
//! apart in grey-scale, and 15-20 px text.

pub mod boxplot;
mod charts;
mod legend;

pub use boxplot::{BoxPlot, box_plot};
pub use charts::{
    TimeMetric, delay_cdf, delay_scatter, objective_cdf, parse_number, sweep_plot, sweep_plots,
    time_series,
};

use crate::error::ReportError;
use crate::num::compact;
use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

/// Width and height of every plot, in SVG pixels (scaled freely by the browser).
pub const SIZE: (u32, u32) = (960, 540);

/// plotters draws text at 1/1.24 of the size asked for; this turns wanted pixels into asks.
pub(crate) fn font_px(px: f64) -> f64 {
    px * 1.24
}

/// How an axis maps values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Linear.
    Linear,
    /// Base-10 logarithmic; values ≤ 0 cannot be shown and are left out.
    Log,
}

/// One axis: its label (with the unit) and scale.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// Label with unit, e.g. "RTT (ms)".
    pub label: String,
    /// Linear or log.
    pub scale: Scale,
    /// Stretch a linear range to include zero (honest bars for rates and sizes).
    pub include_zero: bool,
    /// Fixed range instead of one fitted to the data.
    pub fixed: Option<(f64, f64)>,
}

impl Axis {
    /// A linear axis fitted to the data.
    pub fn linear(label: impl Into<String>) -> Axis {
        Axis {
            label: label.into(),
            scale: Scale::Linear,
            include_zero: false,
            fixed: None,
        }
    }

    /// A linear or log axis fitted to the data.
    pub fn scaled(label: impl Into<String>, log: bool) -> Axis {
        Axis {
            scale: if log { Scale::Log } else { Scale::Linear },
            ..Axis::linear(label)
        }
    }
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// A line through the points in the given order.
    Line,
    /// Small markers only (scatter).
    Points,
    /// A line with a marker at every point.
    LineAndPoints,
}

/// One series of an [`XyPlot`].
#[derive(Debug, Clone, PartialEq)]
pub struct XySeries {
    /// Legend entry.
    pub label: String,
    /// (x, y) points.
    pub points: Vec<(f64, f64)>,
    /// Optional band (x, lower, upper), drawn translucent under the line (CIs).
    pub band: Vec<(f64, f64, f64)>,
    /// Line, points or both.
    pub mark: Mark,
}

/// An x/y chart: title, axes, series, an optional note under the title.
#[derive(Debug, Clone, PartialEq)]
pub struct XyPlot {
    /// Title drawn on top.
    pub title: String,
    /// Horizontal axis.
    pub x: Axis,
    /// Vertical axis.
    pub y: Axis,
    /// The series, one legend entry each.
    pub series: Vec<XySeries>,
}

/// Black on white, seven colours from Okabe & Ito (2008) that stay apart for colour-blind
/// readers (yellow is left out: too pale on paper), and Paul Tol's wine as an eighth.
pub(crate) const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(0, 0, 0),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(136, 34, 85),
];

/// The colour of series `i`.
pub(crate) fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// A drawing failure as text; converted to [`ReportError::Draw`] at the end of a plot.
pub(crate) type DrawResult<T = ()> = Result<T, String>;

/// `.d()` turns any plotters error into the text of a [`ReportError::Draw`].
pub(crate) trait OrDraw<T> {
    fn d(self) -> DrawResult<T>;
}

impl<T, E: std::fmt::Display> OrDraw<T> for Result<T, E> {
    fn d(self) -> DrawResult<T> {
        self.map_err(|e| e.to_string())
    }
}

/// Draws `plot` as SVG. Non-finite points, and points ≤ 0 on a log axis, are left out; a
/// plot with nothing left says "no data" instead of failing.
pub fn render_xy(plot: &XyPlot) -> Result<String, ReportError> {
    let series: Vec<XySeries> = plot.series.iter().map(|s| clean(s, plot)).collect();
    let xr = fit_range(&plot.x, series.iter().flat_map(xs));
    let yr = fit_range(&plot.y, series.iter().flat_map(ys));
    let empty = series
        .iter()
        .all(|s| s.points.is_empty() && s.band.is_empty());
    let mut buf = String::new();
    draw_xy(&mut buf, plot, &series, xr, yr, empty).map_err(|message| ReportError::Draw {
        what: plot.title.clone(),
        message,
    })?;
    Ok(finish(buf, &plot.title))
}

fn draw_xy(
    buf: &mut String,
    plot: &XyPlot,
    series: &[XySeries],
    xr: (f64, f64),
    yr: (f64, f64),
    empty: bool,
) -> DrawResult {
    let root = SVGBackend::with_string(buf, SIZE).into_drawing_area();
    root.fill(&WHITE).d()?;
    let body = root
        .titled(
            &plot.title,
            ("sans-serif", font_px(21.0)).into_font().color(&BLACK),
        )
        .d()?;
    let entries: Vec<legend::Entry> = series
        .iter()
        .enumerate()
        .map(|(i, s)| legend::Entry::new(i, &s.label, s.mark))
        .collect();
    let legend_w = legend::width(&entries);
    let (area, legend_area) = body.split_horizontally(SIZE.0 - legend_w);
    use Scale::{Linear, Log};
    let (x, y) = (xr.0..xr.1, yr.0..yr.1);
    match (plot.x.scale, plot.y.scale) {
        (Linear, Linear) => draw_axes_and_series(&area, x, y, plot, series)?,
        (Log, Linear) => draw_axes_and_series(&area, x.log_scale(), y, plot, series)?,
        (Linear, Log) => draw_axes_and_series(&area, x, y.log_scale(), plot, series)?,
        (Log, Log) => draw_axes_and_series(&area, x.log_scale(), y.log_scale(), plot, series)?,
    }
    if empty {
        no_data(&area)?;
    }
    legend::draw(&legend_area, &entries)?;
    root.present().d()
}

/// Builds the chart on `area` with the given coordinate specs and draws mesh, bands, series.
fn draw_axes_and_series<XS, YS>(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    xs: XS,
    ys: YS,
    plot: &XyPlot,
    series: &[XySeries],
) -> DrawResult
where
    XS: AsRangedCoord<Value = f64>,
    YS: AsRangedCoord<Value = f64>,
    XS::CoordDescType: ValueFormatter<f64>,
    YS::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(64)
        .y_label_area_size(96)
        .build_cartesian_2d(xs, ys)
        .d()?;
    let label_font = ("sans-serif", font_px(15.0)).into_font().color(&BLACK);
    let desc_font = ("sans-serif", font_px(17.0)).into_font().color(&BLACK);
    chart
        .configure_mesh()
        .x_desc(plot.x.label.as_str())
        .y_desc(plot.y.label.as_str())
        .label_style(label_font)
        .axis_desc_style(desc_font)
        .x_label_formatter(&|v| tick_label(*v, plot.x.scale))
        .y_label_formatter(&|v| tick_label(*v, plot.y.scale))
        .x_labels(10)
        .y_labels(8)
        .bold_line_style(RGBColor(200, 200, 200))
        .max_light_lines(0)
        .axis_style(BLACK)
        .draw()
        .d()?;
    for (i, s) in series.iter().enumerate() {
        if s.band.len() >= 2 {
            let mut outline: Vec<(f64, f64)> = s.band.iter().map(|&(x, _, hi)| (x, hi)).collect();
            outline.extend(s.band.iter().rev().map(|&(x, lo, _)| (x, lo)));
            chart
                .draw_series(std::iter::once(Polygon::new(
                    outline,
                    color(i).mix(0.18).filled(),
                )))
                .d()?;
        }
        if matches!(s.mark, Mark::Line | Mark::LineAndPoints) {
            let style = color(i).stroke_width(2);
            chart
                .draw_series(LineSeries::new(s.points.iter().copied(), style))
                .d()?;
        }
        let size = match s.mark {
            Mark::Line => continue,
            Mark::Points => 2,
            Mark::LineAndPoints => 5,
        };
        legend::draw_markers(&mut chart, i, size, &s.points)?;
    }
    Ok(())
}

/// A tick label; on a log axis only 1, 2 and 5 times a power of ten are labelled (the other
/// ticks keep their grid line), so the labels of a decade do not crowd.
fn tick_label(v: f64, scale: Scale) -> String {
    if scale == Scale::Log && v > 0.0 {
        let mantissa = v / 10f64.powf(v.log10().floor());
        if ![1.0, 2.0, 5.0, 10.0]
            .iter()
            .any(|m| (mantissa - m).abs() < 1e-6)
        {
            return String::new();
        }
    }
    compact(v)
}

/// "no data" in the middle of an empty chart.
fn no_data(area: &DrawingArea<SVGBackend<'_>, Shift>) -> DrawResult {
    let (w, h) = area.dim_in_pixel();
    let style = ("sans-serif", font_px(18.0)).into_font().color(&BLACK).pos(
        plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Center,
            plotters::style::text_anchor::VPos::Center,
        ),
    );
    area.draw(&Text::new("no data", (w as i32 / 2, h as i32 / 2), style))
        .d()
}

/// The series without non-finite values and without values a log axis cannot show.
fn clean(s: &XySeries, plot: &XyPlot) -> XySeries {
    let ok_x = |x: f64| x.is_finite() && (plot.x.scale == Scale::Linear || x > 0.0);
    let ok_y = |y: f64| y.is_finite() && (plot.y.scale == Scale::Linear || y > 0.0);
    XySeries {
        label: s.label.clone(),
        points: s
            .points
            .iter()
            .copied()
            .filter(|&(x, y)| ok_x(x) && ok_y(y))
            .collect(),
        band: s
            .band
            .iter()
            .copied()
            .filter(|&(x, lo, hi)| ok_x(x) && ok_y(lo) && ok_y(hi))
            .collect(),
        mark: s.mark,
    }
}

fn xs(s: &XySeries) -> Vec<f64> {
    let mut v: Vec<f64> = s.points.iter().map(|p| p.0).collect();
    v.extend(s.band.iter().map(|b| b.0));
    v
}

fn ys(s: &XySeries) -> Vec<f64> {
    let mut v: Vec<f64> = s.points.iter().map(|p| p.1).collect();
    v.extend(s.band.iter().flat_map(|b| [b.1, b.2]));
    v
}

/// The axis range: fixed, or the data's extent padded (5% linear, ×1.25 log), never empty.
pub(crate) fn fit_range(axis: &Axis, values: impl Iterator<Item = f64>) -> (f64, f64) {
    if let Some((lo, hi)) = axis.fixed {
        if lo < hi && (axis.scale == Scale::Linear || lo > 0.0) {
            return (lo, hi);
        }
    }
    let (mut lo, mut hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    match axis.scale {
        Scale::Log => {
            if !lo.is_finite() {
                return (1.0, 10.0);
            }
            if lo == hi {
                return (lo / 2.0, hi * 2.0);
            }
            (lo / 1.25, hi * 1.25)
        }
        Scale::Linear => {
            if !lo.is_finite() {
                return (0.0, 1.0);
            }
            if axis.include_zero {
                lo = lo.min(0.0);
                hi = hi.max(0.0);
            }
            if lo == hi {
                let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
                return (lo - pad, hi + pad);
            }
            let pad = (hi - lo) * 0.05;
            let lo = if axis.include_zero && lo == 0.0 {
                0.0
            } else {
                lo - pad
            };
            (lo, hi + pad)
        }
    }
}

/// Adds a `<title>` (tooltips, screen readers) to plotters' output.
pub(crate) fn finish(svg: String, title: &str) -> String {
    match svg.find('>') {
        Some(end) => format!(
            "{}\n<title>{}</title>{}",
            &svg[..=end],
            crate::html::escape(title),
            &svg[end + 1..]
        ),
        None => svg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ticks_label_one_two_five() {
        assert_eq!(tick_label(20.0, Scale::Log), "20");
        assert_eq!(tick_label(5.0, Scale::Log), "5");
        assert_eq!(tick_label(0.1, Scale::Log), "0.1");
        assert_eq!(tick_label(30.0, Scale::Log), "");
        assert_eq!(tick_label(30.0, Scale::Linear), "30");
    }

    #[test]
    fn ranges_are_never_empty() {
        let lin = Axis::linear("x");
        assert_eq!(fit_range(&lin, [].into_iter()), (0.0, 1.0));
        assert_eq!(fit_range(&lin, [5.0].into_iter()), (4.5, 5.5));
        assert_eq!(fit_range(&lin, [0.0, 10.0].into_iter()), (-0.5, 10.5));
        let log = Axis::scaled("x", true);
        assert_eq!(fit_range(&log, [4.0].into_iter()), (2.0, 8.0));
        let mut zero = Axis::linear("y");
        zero.include_zero = true;
        assert_eq!(fit_range(&zero, [10.0, 20.0].into_iter()), (0.0, 21.0));
    }
}
