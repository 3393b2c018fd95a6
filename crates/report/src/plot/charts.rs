//! Report data → [`XyPlot`]s: objective vs a numeric factor with CI bands, the per-message
//! delay scatter, CDFs, and interval time series. Only selection and layout happen here; the
//! means and CIs come from the [`Table`] (that is, from `tcplab_stats`).

use super::{Axis, Mark, XyPlot, XySeries, render_xy};
use crate::error::ReportError;
use crate::model::{ConfigurationResult, ObjectiveSpec, SweepPlotSpec};
use crate::table::Table;
use std::collections::BTreeMap;
use tcplab_stats::units::{Unit, metric_title};

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
    let d = table.display();
    let xs: Vec<f64> = lines.values().flatten().map(|p| p.x).collect();
    let log_x = spec.log_x.unwrap_or_else(|| spans(&xs, 10.0));
    let series = lines
        .into_iter()
        .map(|(label, mut pts)| {
            pts.sort_by(|a, b| a.x.total_cmp(&b.x));
            XySeries {
                label,
                points: pts.iter().map(|p| (p.x, d.scale(p.mean))).collect(),
                band: pts
                    .iter()
                    .filter_map(|p| p.ci.map(|(lo, hi)| (p.x, d.scale(lo), d.scale(hi))))
                    .collect(),
                mark: Mark::LineAndPoints,
            }
        })
        .collect();
    let factor = crate::label::short_factor_name(&spec.factor);
    let x_label = if unit.is_empty() {
        format!("{factor} (value)")
    } else {
        format!("{factor} ({unit})")
    };
    let mut y = Axis::linear(format!(
        "{}, mean and {}% CI{}",
        table.title_name(),
        table.percent(),
        d.suffix()
    ));
    y.include_zero = true;
    render_xy(&XyPlot {
        title: format!("{} vs {factor}", table.title_name()),
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
    let rows: Vec<&crate::table::TableRow> = table
        .rows
        .iter()
        .filter(|r| r.factors.contains_key(factor) && r.mean.is_some())
        .collect();
    let others: Vec<BTreeMap<String, String>> = rows
        .iter()
        .map(|r| {
            let mut f = r.factors.clone();
            f.remove(factor);
            f
        })
        .collect();
    let mut distinct: Vec<&BTreeMap<String, String>> = Vec::new();
    for o in &others {
        if !distinct.contains(&o) {
            distinct.push(o);
        }
    }
    let (names, _) = crate::label::short_labels(&distinct, &table.factor_names);
    for (row, other) in rows.iter().zip(&others) {
        let name = distinct
            .iter()
            .position(|d| *d == other)
            .map(|i| names[i].clone())
            .unwrap_or_default();
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
        let key = if other.is_empty() {
            table.title_name()
        } else {
            name
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

/// CDF of the objective's per-repetition values, one line per configuration.
pub fn objective_cdf(
    objective: &ObjectiveSpec,
    configurations: &[ConfigurationResult],
) -> Result<String, ReportError> {
    let d = Unit::parse(&objective.unit).display_for(
        configurations
            .iter()
            .flat_map(|c| c.samples.iter().copied()),
    );
    let named: Vec<(String, Vec<f64>)> = configurations
        .iter()
        .filter(|c| !c.samples.is_empty())
        .map(|c| {
            let scaled = c.samples.iter().map(|v| d.scale(*v)).collect();
            (c.label.clone(), scaled)
        })
        .collect();
    let title = metric_title(&objective.name);
    cdf_plot(
        &format!("CDF of {title} per repetition"),
        &format!("{title}{}", d.suffix()),
        &named,
    )
}

/// Empirical CDFs: value vs the percentage of values ≤ it.
pub(crate) fn cdf_plot(
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
    let mut y = Axis::linear("values ≤ x (%)");
    y.fixed = Some((0.0, 100.0));
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
        pts.push((x, 100.0 * i as f64 / n as f64));
        pts.push((x, 100.0 * (i + 1) as f64 / n as f64));
    }
    pts
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
pub(crate) fn spans(values: &[f64], ratio: f64) -> bool {
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
    fn ecdf_steps_end_at_one() {
        let pts = ecdf_points(&[3.0, 1.0, 2.0]);
        assert_eq!(pts.first(), Some(&(1.0, 0.0)));
        assert_eq!(pts.last(), Some(&(3.0, 100.0)));
        assert_eq!(pts.len(), 6);
        assert!(ecdf_points(&[]).is_empty());
    }
}
