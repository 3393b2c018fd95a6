//! Report data → [`XyPlot`]s: objective vs a numeric factor with CI bands, the per-message
//! delay scatter, CDFs, and interval time series. Only selection and layout happen here; the
//! means and CIs come from the [`Table`] (that is, from `tcplab_stats`).

use super::{Axis, Mark, XyPlot, XySeries, render_xy};
use crate::error::ReportError;
use crate::model::{ConfigurationResult, IntervalSample, IntervalSeries, MessageDelays};
use crate::model::{ObjectiveSpec, SweepPlotSpec};
use crate::table::Table;
use std::collections::BTreeMap;

/// Most points drawn per scatter series; beyond it each bucket keeps its min and max, so
/// stalls (the maxima) always show.
const MAX_SCATTER_POINTS: usize = 4_000;
/// Most points drawn in one scatter over all series, so a page with many runs stays light
/// (each series still gets at least [`MIN_SCATTER_POINTS`]).
const SCATTER_BUDGET: usize = 16_000;
/// Fewest points a scatter series is thinned to.
const MIN_SCATTER_POINTS: usize = 400;
/// Most points drawn per CDF line.
const MAX_CDF_POINTS: usize = 1_000;

/// One point of a sweep line: the factor's value, the mean and its CI.
struct SweepPoint {
    x: f64,
    mean: f64,
    ci: Option<(f64, f64)>,
}

/// Objective vs `spec.factor`: one line per combination of the other factors, the mean at each
/// value with its CI as a band (BalticGrid's bandwidth vs RTT per buffer size and kernel).
pub fn sweep_plot(table: &Table, spec: &SweepPlotSpec) -> Result<String, ReportError> {
    let (lines, unit) = sweep_lines(table, &spec.factor)?;
    let xs: Vec<f64> = lines.values().flatten().map(|p| p.x).collect();
    let log_x = spec.log_x.unwrap_or_else(|| spans(&xs, 10.0));
    let series = lines
        .into_iter()
        .map(|(label, mut pts)| {
            pts.sort_by(|a, b| a.x.total_cmp(&b.x));
            XySeries {
                label,
                points: pts.iter().map(|p| (p.x, p.mean)).collect(),
                band: pts
                    .iter()
                    .filter_map(|p| p.ci.map(|(lo, hi)| (p.x, lo, hi)))
                    .collect(),
                mark: Mark::LineAndPoints,
            }
        })
        .collect();
    let x_label = if unit.is_empty() {
        spec.factor.clone()
    } else {
        format!("{} ({unit})", spec.factor)
    };
    let mut y = Axis::linear(format!(
        "{} ({}), mean and {}% CI",
        table.objective.name,
        table.objective.unit,
        table.percent()
    ));
    y.include_zero = true;
    render_xy(&XyPlot {
        title: format!("{} vs {}", table.objective.name, spec.factor),
        x: Axis::scaled(x_label, log_x),
        y,
        series,
    })
}

/// The rows that ran, grouped by the other factors' values ("buffers=tuned cc=reno"), with
/// the factor's unit as spelled in its values ("ms" from "20ms").
fn sweep_lines(
    table: &Table,
    factor: &str,
) -> Result<(BTreeMap<String, Vec<SweepPoint>>, String), ReportError> {
    let mut lines: BTreeMap<String, Vec<SweepPoint>> = BTreeMap::new();
    let mut unit = String::new();
    for row in &table.rows {
        let (Some(value), Some(mean)) = (row.factors.get(factor), row.mean) else {
            continue;
        };
        let (x, u) = parse_number(value).ok_or_else(|| ReportError::NonNumericFactor {
            factor: factor.to_string(),
            value: value.clone(),
        })?;
        if !u.is_empty() {
            unit = u;
        }
        let others: Vec<String> = row
            .factors
            .iter()
            .filter(|(k, _)| k.as_str() != factor)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let key = if others.is_empty() {
            table.objective.name.clone()
        } else {
            others.join(" ")
        };
        let ci = row.ci_lower.zip(row.ci_upper);
        lines
            .entry(key)
            .or_default()
            .push(SweepPoint { x, mean, ci });
    }
    Ok((lines, unit))
}

/// The sweep plots of `specs`, or when `specs` is empty, of every factor with three or more
/// distinct numeric values. Returns (factor, SVG) pairs.
pub fn sweep_plots(
    table: &Table,
    specs: &[SweepPlotSpec],
) -> Result<Vec<(String, String)>, ReportError> {
    let chosen: Vec<SweepPlotSpec> = if specs.is_empty() {
        numeric_factors(table)
            .into_iter()
            .map(|factor| SweepPlotSpec {
                factor,
                log_x: None,
            })
            .collect()
    } else {
        specs.to_vec()
    };
    chosen
        .iter()
        .map(|s| sweep_plot(table, s).map(|svg| (s.factor.clone(), svg)))
        .collect()
}

/// Per-message delay vs sequence number, one colour per run: periodic stalls show as rows of
/// dots high above the floor. `log_y: None` picks log when the delays span 100x or more.
pub fn delay_scatter(delays: &[MessageDelays], log_y: Option<bool>) -> Result<String, ReportError> {
    let all: Vec<f64> = delays
        .iter()
        .flat_map(|d| d.points.iter().map(|p| p.1))
        .collect();
    let log_y = log_y.unwrap_or_else(|| spans(&all, 100.0));
    let per_series =
        (SCATTER_BUDGET / delays.len().max(1)).clamp(MIN_SCATTER_POINTS, MAX_SCATTER_POINTS);
    let series = delays
        .iter()
        .map(|d| XySeries {
            label: d.label.clone(),
            points: decimate_extremes(&d.points, per_series),
            band: Vec::new(),
            mark: Mark::Points,
        })
        .collect();
    render_xy(&XyPlot {
        title: "Per-message delay vs sequence number".to_string(),
        x: Axis::linear("message sequence number"),
        y: Axis::scaled("one-way delay (µs)", log_y),
        series,
    })
}

/// CDF of the per-message delays, one line per run; log x when they span 10x or more.
pub fn delay_cdf(delays: &[MessageDelays]) -> Result<String, ReportError> {
    let named: Vec<(String, Vec<f64>)> = delays
        .iter()
        .map(|d| (d.label.clone(), d.points.iter().map(|p| p.1).collect()))
        .collect();
    cdf_plot("CDF of per-message delay", "one-way delay (µs)", &named)
}

/// CDF of the objective's per-repetition values, one line per configuration.
pub fn objective_cdf(
    objective: &ObjectiveSpec,
    configurations: &[ConfigurationResult],
) -> Result<String, ReportError> {
    let named: Vec<(String, Vec<f64>)> = configurations
        .iter()
        .filter(|c| !c.samples.is_empty())
        .map(|c| (c.label.clone(), c.samples.clone()))
        .collect();
    cdf_plot(
        &format!("CDF of {} per repetition", objective.name),
        &format!("{} ({})", objective.name, objective.unit),
        &named,
    )
}

/// Which interval counter a time-series plot shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeMetric {
    /// Goodput, Mbit/s.
    Throughput,
    /// Congestion window, segments.
    Cwnd,
    /// Smoothed RTT, ms.
    Rtt,
    /// Retransmitted segments per interval.
    Retransmits,
}

impl TimeMetric {
    /// All metrics, in report order.
    pub const ALL: [TimeMetric; 4] = [
        TimeMetric::Throughput,
        TimeMetric::Cwnd,
        TimeMetric::Rtt,
        TimeMetric::Retransmits,
    ];

    /// Axis label with unit.
    pub fn label(self) -> &'static str {
        match self {
            TimeMetric::Throughput => "throughput (Mbit/s)",
            TimeMetric::Cwnd => "cwnd (segments)",
            TimeMetric::Rtt => "smoothed RTT (ms)",
            TimeMetric::Retransmits => "retransmits (segments per interval)",
        }
    }

    /// The value of this metric in one interval.
    pub fn of(self, s: &IntervalSample) -> Option<f64> {
        match self {
            TimeMetric::Throughput => s.throughput_bps.map(|b| b / 1e6),
            TimeMetric::Cwnd => s.cwnd_segments,
            TimeMetric::Rtt => s.rtt_us.map(|us| us / 1e3),
            TimeMetric::Retransmits => s.retransmits,
        }
    }

    /// True when any interval of any series has this metric.
    pub fn present_in(self, series: &[IntervalSeries]) -> bool {
        series
            .iter()
            .any(|s| s.intervals.iter().any(|i| self.of(i).is_some()))
    }
}

/// One metric over time, one line per series.
pub fn time_series(series: &[IntervalSeries], metric: TimeMetric) -> Result<String, ReportError> {
    let lines = series
        .iter()
        .map(|s| XySeries {
            label: s.label.clone(),
            points: s
                .intervals
                .iter()
                .filter_map(|i| metric.of(i).map(|v| (i.t_s, v)))
                .collect(),
            band: Vec::new(),
            mark: Mark::Line,
        })
        .collect();
    let name = metric.label();
    let short = name.split(" (").next().unwrap_or(name);
    let mut y = Axis::linear(name);
    y.include_zero = true;
    render_xy(&XyPlot {
        title: format!("{short} per interval"),
        x: Axis::linear("time (s)"),
        y,
        series: lines,
    })
}

/// Empirical CDFs: value vs fraction of values ≤ it.
fn cdf_plot(
    title: &str,
    x_label: &str,
    named: &[(String, Vec<f64>)],
) -> Result<String, ReportError> {
    let all: Vec<f64> = named.iter().flat_map(|(_, v)| v.iter().copied()).collect();
    let log_x = spans(&all, 10.0);
    let series = named
        .iter()
        .map(|(label, values)| XySeries {
            label: label.clone(),
            points: ecdf_points(values),
            band: Vec::new(),
            mark: Mark::Line,
        })
        .collect();
    let mut y = Axis::linear("fraction ≤ x");
    y.fixed = Some((0.0, 1.0));
    render_xy(&XyPlot {
        title: title.to_string(),
        x: Axis::scaled(x_label, log_x),
        y,
        series,
    })
}

/// Step points of the empirical CDF of the finite values, thinned to [`MAX_CDF_POINTS`]
/// evenly spaced order statistics (the largest value always kept).
fn ecdf_points(values: &[f64]) -> Vec<(f64, f64)> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n == 0 {
        return Vec::new();
    }
    let step = n.div_ceil(MAX_CDF_POINTS).max(1);
    let mut idx: Vec<usize> = (0..n).step_by(step).collect();
    if idx.last() != Some(&(n - 1)) {
        idx.push(n - 1);
    }
    let mut pts = Vec::with_capacity(idx.len() * 2);
    for i in idx {
        let x = sorted[i];
        pts.push((x, i as f64 / n as f64));
        pts.push((x, (i + 1) as f64 / n as f64));
    }
    pts
}

/// At most `max` points (max ≥ 2): in order, each bucket of consecutive points keeps its
/// smallest and largest delay.
fn decimate_extremes(points: &[(u64, f64)], max: usize) -> Vec<(f64, f64)> {
    let as_f = |p: &(u64, f64)| (p.0 as f64, p.1);
    if points.len() <= max {
        return points.iter().map(as_f).collect();
    }
    let bucket = points.len().div_ceil((max / 2).max(1));
    let mut out = Vec::with_capacity(max);
    for chunk in points.chunks(bucket) {
        let finite = chunk.iter().filter(|p| p.1.is_finite());
        let lo = finite.clone().min_by(|a, b| a.1.total_cmp(&b.1));
        let hi = finite.max_by(|a, b| a.1.total_cmp(&b.1));
        if let (Some(lo), Some(hi)) = (lo, hi) {
            out.push(as_f(lo));
            if hi != lo {
                out.push(as_f(hi));
            }
        }
    }
    out
}

/// Factors with three or more distinct values that all parse as numbers.
fn numeric_factors(table: &Table) -> Vec<String> {
    table
        .factor_names
        .iter()
        .filter(|f| {
            let values: Vec<&String> = table
                .rows
                .iter()
                .filter_map(|r| r.factors.get(*f))
                .collect();
            let mut nums: Vec<f64> = values
                .iter()
                .filter_map(|v| parse_number(v).map(|p| p.0))
                .collect();
            if nums.len() != values.len() {
                return false;
            }
            nums.sort_by(f64::total_cmp);
            nums.dedup();
            nums.len() >= 3
        })
        .cloned()
        .collect()
}

/// Parses a factor value as a number with an optional unit: "20ms" → (20, "ms"); "1.5" → (1.5, ""); "cubic" → None. The longest leading part that
/// parses as a finite number is the value, the trimmed rest the unit.
pub fn parse_number(s: &str) -> Option<(f64, String)> {
    let s = s.trim();
    (1..=s.len())
        .rev()
        .filter(|&i| s.is_char_boundary(i))
        .find_map(|i| {
            let v: f64 = s[..i].parse().ok()?;
            v.is_finite().then(|| (v, s[i..].trim().to_string()))
        })
}

/// True when all values are positive and max/min ≥ `ratio`.
fn spans(values: &[f64], ratio: f64) -> bool {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    lo > 0.0 && hi / lo >= ratio
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_with_units() {
        assert_eq!(parse_number("20ms"), Some((20.0, "ms".to_string())));
        assert_eq!(parse_number(" 1.5 "), Some((1.5, String::new())));
        assert_eq!(parse_number("8738000"), Some((8_738_000.0, String::new())));
        assert_eq!(parse_number("cubic"), None);
        assert_eq!(parse_number("inf"), None);
        assert_eq!(parse_number(""), None);
    }

    #[test]
    fn decimation_keeps_every_stall() {
        let pts: Vec<(u64, f64)> = (0..100_000u64)
            .map(|i| (i, if i % 41 == 40 { 20_000.0 } else { 30.0 }))
            .collect();
        let kept = decimate_extremes(&pts, MAX_SCATTER_POINTS);
        assert!(kept.len() <= MAX_SCATTER_POINTS);
        let stalls_in = pts.iter().filter(|p| p.1 > 1_000.0).count();
        let stalls_kept = kept.iter().filter(|p| p.1 > 1_000.0).count();
        // Every bucket (50 messages) holds at least one stall, and each bucket's max is kept.
        assert_eq!(stalls_kept, 2_000);
        assert!(stalls_in > stalls_kept);
        assert!(kept.iter().any(|p| p.1 == 30.0));
    }

    #[test]
    fn ecdf_steps_end_at_one() {
        let pts = ecdf_points(&[3.0, 1.0, 2.0]);
        assert_eq!(pts.first(), Some(&(1.0, 0.0)));
        assert_eq!(pts.last(), Some(&(3.0, 1.0)));
        assert_eq!(pts.len(), 6);
        assert!(ecdf_points(&[]).is_empty());
    }
}
