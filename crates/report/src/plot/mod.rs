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
pub(crate) mod legend;
mod time;

pub use boxplot::{BoxPlot, box_plot};
pub use charts::{objective_cdf, parse_number, sweep_plot, sweep_plots};
pub use time::{TimeMetric, delay_cdf, delay_scatter, latency_under_load, time_series};

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
    /// Larger markers without a line (stalls among the points of a scatter).
    Marked,
    /// Only the series' band, as a translucent area (a time window such as "load on").
    Band,
    /// A dashed line (reference levels such as the idle latency).
    Dashed,
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

/// The shade of time windows ([`Mark::Band`]): neutral, so one legend entry serves every panel.
pub(crate) const WINDOW: RGBColor = RGBColor(120, 120, 120);

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
    render_panels(
        &plot.title,
        &plot.x,
        &[Panel {
            y: plot.y.clone(),
            series: plot.series.clone(),
        }],
    )
}

/// One of several charts stacked on a shared x axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// This panel's vertical axis.
    pub y: Axis,
    /// Its series; their colours continue from the panel above, one legend for all.
    pub series: Vec<XySeries>,
}

/// Draws `panels` stacked top to bottom on one x axis (flent's RRUL: throughput above,
/// latency below, same seconds), with one legend at the right for every series.
pub fn render_panels(title: &str, x: &Axis, panels: &[Panel]) -> Result<String, ReportError> {
    let cleaned: Vec<Vec<XySeries>> = panels
        .iter()
        .map(|p| p.series.iter().map(|s| clean(s, x, &p.y)).collect())
        .collect();
    let xr = fit_range(x, cleaned.iter().flatten().flat_map(xs));
    let placement =
        legend::Placement::for_labels(cleaned.iter().flatten().map(|s| s.label.as_str()));
    // A series without a label (a second panel's copy of a window) gets no legend entry.
    let entries: Vec<legend::Entry> = cleaned
        .iter()
        .flatten()
        .enumerate()
        .filter(|(_, s)| !s.label.is_empty())
        .map(|(i, s)| legend::Entry::new(i, &s.label, s.mark, placement.max_chars()))
        .collect();
    let mut tags: Vec<(String, &str)> = entries.iter().map(|e| (e.text(), "legend")).collect();
    tags.push((x.label.clone(), "axis-label"));
    tags.extend(panels.iter().map(|p| (p.y.label.clone(), "axis-label")));
    let mut buf = String::new();
    let legend = (placement, entries.as_slice());
    draw_panels(&mut buf, title, x, panels, &cleaned, xr, legend).map_err(|message| {
        ReportError::Draw {
            what: title.to_string(),
            message,
        }
    })?;
    Ok(tag_texts(&finish(buf, title), &tags))
}

fn draw_panels(
    buf: &mut String,
    title: &str,
    x: &Axis,
    panels: &[Panel],
    series: &[Vec<XySeries>],
    xr: (f64, f64),
    (placement, entries): (legend::Placement, &[legend::Entry]),
) -> DrawResult {
    let mut size = (
        SIZE.0,
        SIZE.1 + (panels.len() as u32).saturating_sub(1) * SIZE.1 * 2 / 3,
    );
    size.1 += placement.extra_height();
    let (root, body) = titled_root(buf, size, title)?;
    let (area, legend_area, columns) = placement.split(&body);
    let rows = area.split_evenly((panels.len().max(1), 1));
    let mut first = 0;
    for (k, ((panel, list), region)) in panels.iter().zip(series).zip(&rows).enumerate() {
        let yr = fit_range(&panel.y, list.iter().flat_map(ys));
        let last = k + 1 == panels.len();
        let ctx = PanelCtx {
            x,
            y: &panel.y,
            series: list,
            first_colour: first,
            x_desc: last,
        };
        use Scale::{Linear, Log};
        let (xs, ys) = (xr.0..xr.1, yr.0..yr.1);
        match (x.scale, panel.y.scale) {
            (Linear, Linear) => draw_axes_and_series(region, xs, ys, &ctx)?,
            (Log, Linear) => draw_axes_and_series(region, log_coord(xr), ys, &ctx)?,
            (Linear, Log) => draw_axes_and_series(region, xs, log_coord(yr), &ctx)?,
            (Log, Log) => draw_axes_and_series(region, log_coord(xr), log_coord(yr), &ctx)?,
        }
        if list
            .iter()
            .all(|s| s.points.is_empty() && s.band.is_empty())
        {
            no_data(region)?;
        }
        first += list.len();
    }
    legend::draw(&legend_area, entries, columns)?;
    root.present().d()
}

/// A white SVG canvas of `size` with `title` on top: the root (to `present` at the end) and the
/// area under the title, as every plot starts.
pub(crate) fn titled_root<'a>(
    buf: &'a mut String,
    size: (u32, u32),
    title: &str,
) -> DrawResult<(
    DrawingArea<SVGBackend<'a>, Shift>,
    DrawingArea<SVGBackend<'a>, Shift>,
)> {
    let root = SVGBackend::with_string(buf, size).into_drawing_area();
    root.fill(&WHITE).d()?;
    let body = root
        .titled(
            title,
            ("sans-serif", font_px(21.0)).into_font().color(&BLACK),
        )
        .d()?;
    Ok((root, body))
}

/// What one panel's chart needs besides its coordinates.
struct PanelCtx<'a> {
    x: &'a Axis,
    y: &'a Axis,
    series: &'a [XySeries],
    /// Palette index of the first series (panels continue each other's colours).
    first_colour: usize,
    /// Only the bottom panel names the shared x axis.
    x_desc: bool,
}

/// Builds the chart on `area` with the given coordinate specs and draws mesh, bands, series.
fn draw_axes_and_series<XS, YS>(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    xs: XS,
    ys: YS,
    ctx: &PanelCtx<'_>,
) -> DrawResult
where
    XS: AsRangedCoord<Value = f64>,
    YS: AsRangedCoord<Value = f64>,
    XS::CoordDescType: ValueFormatter<f64>,
    YS::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(if ctx.x_desc { 64 } else { 36 })
        .y_label_area_size(96)
        .build_cartesian_2d(xs, ys)
        .d()?;
    let label_font = ("sans-serif", font_px(15.0)).into_font().color(&BLACK);
    let desc_font = ("sans-serif", font_px(17.0)).into_font().color(&BLACK);
    let (x_scale, y_scale) = (ctx.x.scale, ctx.y.scale);
    let mut mesh = chart.configure_mesh();
    if ctx.x_desc {
        mesh.x_desc(ctx.x.label.as_str());
    }
    mesh.y_desc(ctx.y.label.as_str())
        .label_style(label_font)
        .axis_desc_style(desc_font)
        .x_label_formatter(&|v| tick_label(*v, x_scale))
        .y_label_formatter(&|v| tick_label(*v, y_scale))
        .x_labels(10)
        .y_labels(8)
        .bold_line_style(RGBColor(200, 200, 200))
        .max_light_lines(0)
        .axis_style(BLACK)
        .draw()
        .d()?;
    for (k, s) in ctx.series.iter().enumerate() {
        let i = ctx.first_colour + k;
        if s.band.len() >= 2 {
            let mut outline: Vec<(f64, f64)> = s.band.iter().map(|&(x, _, hi)| (x, hi)).collect();
            outline.extend(s.band.iter().rev().map(|&(x, lo, _)| (x, lo)));
            let fill = if s.mark == Mark::Band {
                WINDOW.mix(0.18).filled()
            } else {
                color(i).mix(0.18).filled()
            };
            chart
                .draw_series(std::iter::once(Polygon::new(outline, fill)))
                .d()?;
        }
        match s.mark {
            Mark::Line | Mark::LineAndPoints => {
                chart
                    .draw_series(LineSeries::new(
                        s.points.iter().copied(),
                        color(i).stroke_width(2),
                    ))
                    .d()?;
            }
            Mark::Dashed => {
                chart
                    .draw_series(DashedLineSeries::new(
                        s.points.iter().copied(),
                        8,
                        6,
                        color(i).stroke_width(2),
                    ))
                    .d()?;
            }
            Mark::Points | Mark::Marked | Mark::Band => {}
        }
        let size = match s.mark {
            Mark::Line | Mark::Band | Mark::Dashed => continue,
            Mark::Points => 2,
            Mark::Marked => 4,
            Mark::LineAndPoints => 5,
        };
        legend::draw_markers(&mut chart, i, size, &s.points)?;
    }
    Ok(())
}

/// A log axis over `(lo, hi)` with its ticks from [`log_ticks`]: plotters' own start at the first
/// power of ten inside the range, so data below it (20-90 on a 16-950 axis) had no label.
fn log_coord(
    (lo, hi): (f64, f64),
) -> plotters::coord::combinators::WithKeyPoints<plotters::coord::combinators::LogCoord<f64>> {
    use plotters::coord::combinators::BindKeyPoints;
    (lo..hi).log_scale().with_key_points(log_ticks(lo, hi))
}

/// Ticks for a log axis from `lo` to `hi`: 1, 2 and 5 times each power of ten inside it; every
/// mantissa 1-9 when that leaves fewer than three (a narrow axis), evenly spaced round values when
/// even that leaves fewer than two; powers of ten alone when 1-2-5 leaves more than twelve (an
/// axis over many decades).
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return Vec::new();
    }
    let within = |mantissas: &[f64]| -> Vec<f64> {
        let mut ticks = Vec::new();
        let mut exp = lo.log10().floor() as i32;
        while 10f64.powi(exp) <= hi {
            for m in mantissas {
                let v = m * 10f64.powi(exp);
                if v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9) {
                    ticks.push(v);
                }
            }
            exp += 1;
        }
        ticks
    };
    let ticks = within(&[1.0, 2.0, 5.0]);
    if ticks.len() < 3 {
        let ticks = within(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
        return if ticks.len() >= 2 {
            ticks
        } else {
            round_steps(lo, hi)
        };
    }
    if ticks.len() > 12 {
        return within(&[1.0]);
    }
    ticks
}

/// About four evenly spaced ticks from `lo` to `hi` at a round step (1, 2 or 5 times a power of ten).
fn round_steps(lo: f64, hi: f64) -> Vec<f64> {
    let raw = (hi - lo) / 4.0;
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * power);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// A tick label: the value, compact. On a log axis only the ticks [`log_ticks`] chose are drawn,
/// so each is labelled.
fn tick_label(v: f64, _scale: Scale) -> String {
    compact(v)
}

/// "no data" in the middle of an empty chart.
pub(crate) fn no_data(area: &DrawingArea<SVGBackend<'_>, Shift>) -> DrawResult {
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
fn clean(s: &XySeries, x: &Axis, y: &Axis) -> XySeries {
    let ok_x = |v: f64| v.is_finite() && (x.scale == Scale::Linear || v > 0.0);
    let ok_y = |v: f64| v.is_finite() && (y.scale == Scale::Linear || v > 0.0);
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

/// Adds `class="…"` to each `<text>` element whose content is one of `tags`' texts (legend
/// entries, axis descriptions), so a browser test or a stylesheet can find what a reader reads.
pub(crate) fn tag_texts(svg: &str, tags: &[(String, &str)]) -> String {
    let escaped: Vec<(String, &str)> = tags
        .iter()
        .map(|(t, c)| (crate::html::escape(t), *c))
        .collect();
    let mut out = String::with_capacity(svg.len() + 64 * tags.len());
    let mut rest = svg;
    while let Some(start) = rest.find("<text") {
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        let (Some(open_end), Some(close)) = (rest.find('>'), rest.find("</text>")) else {
            break;
        };
        let content = rest.get(open_end + 1..close).unwrap_or("").trim();
        let unescaped_match = |t: &String| t == content || crate::html::escape(content) == *t;
        match escaped.iter().find(|(t, _)| unescaped_match(t)) {
            Some((_, class)) => out.push_str(&format!("<text class=\"{class}\"")),
            None => out.push_str("<text"),
        }
        rest = &rest["<text".len()..];
    }
    out.push_str(rest);
    out
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
    fn log_ticks_cover_the_whole_range() {
        // The demo's CDF: data from 21 to 760 Mbit/s; the labels must reach below 100.
        assert_eq!(
            log_ticks(16.0, 950.0),
            vec![20.0, 50.0, 100.0, 200.0, 500.0]
        );
        assert_eq!(log_ticks(16.8, 45.0), vec![20.0, 30.0, 40.0]);
        assert_eq!(log_ticks(21.0, 36.0), vec![25.0, 30.0, 35.0]);
        assert_eq!(log_ticks(0.5, 4.0), vec![0.5, 1.0, 2.0]);
        let wide = log_ticks(1e-3, 1e6);
        assert_eq!(wide.len(), 10);
        assert!(
            wide.iter()
                .all(|v| (v.log10() - v.log10().round()).abs() < 1e-9)
        );
        assert!(log_ticks(0.0, 1.0).is_empty());
        assert_eq!(tick_label(20.0, Scale::Log), "20");
        assert_eq!(tick_label(0.1, Scale::Log), "0.1");
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
