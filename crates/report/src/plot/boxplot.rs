//! Horizontal box plots, one box per configuration, best-ranked on top: quartiles and median
//! from `tcplab_stats::quantile` (type 7), whiskers to the furthest sample within 1.5 IQR of
//! the box (Tukey 1977), samples beyond drawn as outlier dots, the mean as a cross.

use super::{Axis, DrawResult, OrDraw, color, fit_range, font_px, no_data};
use crate::error::ReportError;
use crate::num::compact;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use tcplab_stats::quantile;

/// Half the height of a box, in category units.
const HALF: f64 = 0.3;
/// Longest category label shown in full.
const MAX_LABEL_CHARS: usize = 64;

/// Data of a box plot: one (label, samples) pair per box, drawn top-down in this order.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxPlot {
    /// Title drawn on top.
    pub title: String,
    /// Label of the value axis, with unit.
    pub value_label: String,
    /// (label, samples); boxes with no finite sample are listed but left empty.
    pub boxes: Vec<(String, Vec<f64>)>,
}

/// The figures of one box.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stats {
    q1: f64,
    median: f64,
    q3: f64,
    low: f64,
    high: f64,
    mean: f64,
}

/// Draws `plot` as SVG.
pub fn box_plot(plot: &BoxPlot) -> Result<String, ReportError> {
    let cleaned: Vec<(String, Vec<f64>)> = plot
        .boxes
        .iter()
        .map(|(l, v)| {
            (
                short(l),
                v.iter().copied().filter(|x| x.is_finite()).collect(),
            )
        })
        .collect();
    let mut buf = String::new();
    draw(&mut buf, plot, &cleaned).map_err(|message| ReportError::Draw {
        what: plot.title.clone(),
        message,
    })?;
    let mut tags = vec![(plot.value_label.clone(), "axis-label")];
    tags.extend(cleaned.iter().map(|(label, _)| (label.clone(), "category")));
    Ok(super::tag_texts(&super::finish(buf, &plot.title), &tags))
}

fn draw(buf: &mut String, plot: &BoxPlot, boxes: &[(String, Vec<f64>)]) -> DrawResult {
    let n = boxes.len().max(1);
    let (root, area) = super::titled_root(buf, (super::SIZE.0, box_height(n)), &plot.title)?;
    let axis = Axis::linear(plot.value_label.clone());
    let xr = fit_range(&axis, boxes.iter().flat_map(|b| b.1.iter().copied()));
    let labels: Vec<String> = boxes.iter().map(|b| b.0.clone()).collect();
    let mut chart = category_chart(&area, &plot.value_label, &labels, xr)?;
    let mut any = false;
    for (i, (_, values)) in boxes.iter().enumerate() {
        let Some(s) = stats(values) else { continue };
        any = true;
        let y = (n - 1 - i) as f64;
        draw_box(&mut chart, i, y, &s, values)?;
    }
    if !any {
        no_data(&area)?;
    }
    root.present().d()
}

/// Height of the plot: room for every box, at least the usual plot height.
fn box_height(n: usize) -> u32 {
    (140 + n as u32 * 46).max(super::SIZE.1 / 2)
}

/// A chart with one row per category, top-down in `labels`' order, and a value axis.
pub(crate) type BoxChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The chart box plots and the comparison of studies draw on: `labels` as rows (row i at
/// y = n - 1 - i, room at the left for the longest label), the values `xr` across, labelled
/// `value_label`, vertical grid lines only.
pub(crate) fn category_chart<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    value_label: &str,
    labels: &[String],
    xr: (f64, f64),
) -> DrawResult<BoxChart<'a, 'b>> {
    let n = labels.len().max(1);
    let label_chars = labels.iter().map(|l| l.chars().count()).max().unwrap_or(4);
    let mut chart = ChartBuilder::on(area)
        .margin(16)
        .x_label_area_size(64)
        .y_label_area_size((label_chars as u32 * 9 + 30).clamp(80, 600))
        .build_cartesian_2d(xr.0..xr.1, -0.5..(n as f64 - 0.5))
        .d()?;
    let label_of = |y: &f64| category_label(labels, *y);
    chart
        .configure_mesh()
        .x_desc(value_label)
        .label_style(("sans-serif", font_px(15.0)).into_font().color(&BLACK))
        .axis_desc_style(("sans-serif", font_px(17.0)).into_font().color(&BLACK))
        .x_label_formatter(&|v| compact(*v))
        .y_label_formatter(&label_of)
        .y_labels(n + 1)
        .disable_y_mesh()
        .bold_line_style(RGBColor(200, 200, 200))
        .max_light_lines(0)
        .axis_style(BLACK)
        .draw()
        .d()?;
    Ok(chart)
}

fn draw_box(
    chart: &mut BoxChart<'_, '_>,
    i: usize,
    y: f64,
    s: &Stats,
    values: &[f64],
) -> DrawResult {
    let c = color(i);
    let line = BLACK.stroke_width(2);
    let segments = [
        vec![(s.low, y), (s.q1, y)],
        vec![(s.q3, y), (s.high, y)],
        vec![(s.low, y - HALF / 2.0), (s.low, y + HALF / 2.0)],
        vec![(s.high, y - HALF / 2.0), (s.high, y + HALF / 2.0)],
    ];
    chart
        .draw_series(segments.into_iter().map(|p| PathElement::new(p, line)))
        .d()?;
    chart
        .draw_series([
            Rectangle::new([(s.q1, y - HALF), (s.q3, y + HALF)], c.mix(0.35).filled()),
            Rectangle::new([(s.q1, y - HALF), (s.q3, y + HALF)], c.stroke_width(2)),
        ])
        .d()?;
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(s.median, y - HALF), (s.median, y + HALF)],
            BLACK.stroke_width(4),
        )))
        .d()?;
    chart
        .draw_series(std::iter::once(Cross::new(
            (s.mean, y),
            6,
            BLACK.stroke_width(2),
        )))
        .d()?;
    let outliers = values.iter().filter(|&&v| v < s.low || v > s.high);
    chart
        .draw_series(outliers.map(|&v| Circle::new((v, y), 4, c.stroke_width(2))))
        .d()?;
    Ok(())
}

/// Quartiles, Tukey whisker ends and mean; `None` for no samples.
fn stats(values: &[f64]) -> Option<Stats> {
    let q1 = quantile(values, 0.25).ok()?;
    let median = quantile(values, 0.5).ok()?;
    let q3 = quantile(values, 0.75).ok()?;
    let summary = tcplab_stats::Summary::of(values).ok()?;
    let fence = 1.5 * (q3 - q1);
    let inside = values
        .iter()
        .copied()
        .filter(|&v| v >= q1 - fence && v <= q3 + fence);
    let low = inside.clone().fold(f64::INFINITY, f64::min).min(q1);
    let high = inside.fold(f64::NEG_INFINITY, f64::max).max(q3);
    Some(Stats {
        q1,
        median,
        q3,
        low,
        high,
        mean: summary.mean,
    })
}

/// The label of the box at category position `y` (top box first), "" between boxes.
pub(crate) fn category_label(labels: &[String], y: f64) -> String {
    let r = y.round();
    if (y - r).abs() > 1e-6 || r < 0.0 {
        return String::new();
    }
    let from_top = labels.len() as i64 - 1 - r as i64;
    usize::try_from(from_top)
        .ok()
        .and_then(|i| labels.get(i))
        .cloned()
        .unwrap_or_default()
}

fn short(label: &str) -> String {
    if label.chars().count() > MAX_LABEL_CHARS {
        let cut: String = label.chars().take(MAX_LABEL_CHARS - 1).collect();
        format!("{cut}…")
    } else {
        label.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tukey_whiskers_stop_at_the_fence() {
        let s = stats(&[1.0, 2.0, 3.0, 4.0, 100.0]).expect("non-empty");
        assert_eq!((s.q1, s.median, s.q3), (2.0, 3.0, 4.0));
        assert_eq!(s.low, 1.0);
        assert_eq!(s.high, 4.0); // 100 is beyond 4 + 1.5 * 2
        assert_eq!(s.mean, 22.0);
        assert!(stats(&[]).is_none());
    }

    #[test]
    fn labels_only_at_box_centres() {
        let labels = vec!["a".to_string(), "b".to_string()];
        assert_eq!(category_label(&labels, 1.0), "a");
        assert_eq!(category_label(&labels, 0.0), "b");
        assert_eq!(category_label(&labels, 0.5), "");
        assert_eq!(category_label(&labels, 2.0), "");
    }
}
