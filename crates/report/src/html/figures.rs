//! Which plots a report shows, in reading order, with their captions: the objective against
//! each numeric factor, its distribution per configuration (box plot, CDF), then the runs
//! over time (a stream's counters, per-message latency with stalls, latency under load).

use super::slug;
use crate::error::ReportError;
use crate::model::{ConfigurationResult, ReportInput};
use crate::plot::{self, BoxPlot, TimeMetric};
use crate::table::Table;

/// A rendered plot and its caption.
pub(super) struct Figure {
    pub(super) id: String,
    pub(super) caption: String,
    pub(super) svg: String,
}

/// Most CDF lines drawn besides the baseline: with it, one per palette colour (8), so no two
/// lines share a colour.
const CDF_LINES: usize = 7;

/// Every plot the data supports, in reading order.
pub(super) fn figures(input: &ReportInput, table: &Table) -> Result<Vec<Figure>, ReportError> {
    let mut figs = sweep_figures(input, table)?;
    figs.extend(distribution_figures(input, table)?);
    figs.extend(run_figures(input)?);
    Ok(figs)
}

/// Objective vs each numeric factor (the ones asked for, or every one with 3+ values).
fn sweep_figures(input: &ReportInput, table: &Table) -> Result<Vec<Figure>, ReportError> {
    let plots = plot::sweep_plots(table, &input.sweep_plots)?;
    Ok(plots
        .into_iter()
        .map(|(factor, svg)| Figure {
            id: format!("sweep-{}", slug(&factor)),
            caption: format!(
                "{} vs {factor}: mean per configuration with its {}% CI as a band; one line per combination of the other factors.",
                table.title_name(),
                table.percent()
            ),
            svg,
        })
        .collect())
}

/// The box plot of every configuration that ran, and the CDF of the best-ranked ones.
fn distribution_figures(input: &ReportInput, table: &Table) -> Result<Vec<Figure>, ReportError> {
    let d = table.display();
    let boxes: Vec<(String, Vec<f64>)> = table
        .rows
        .iter()
        .filter(|r| r.n > 0)
        .filter_map(|r| {
            let c = input.configurations.iter().find(|c| c.label == r.label)?;
            let scaled = c.samples.iter().map(|v| d.scale(*v)).collect();
            Some((table.marked_label(r), scaled))
        })
        .collect();
    if boxes.is_empty() {
        return Ok(Vec::new());
    }
    let shown = cdf_configurations(input, table);
    let cdf_caption = if shown.len() < boxes.len() {
        format!(
            "Empirical CDF of the per-repetition {} for the {CDF_LINES} best-ranked configurations and the baseline.",
            table.title_name()
        )
    } else {
        format!(
            "Empirical CDF of the per-repetition {}, one line per configuration.",
            table.title_name()
        )
    };
    let box_figure = Figure {
        id: "boxes".into(),
        caption: "Distribution per configuration, in rank order: box = quartiles, thick bar = median, cross = mean, whiskers to 1.5 IQR, circles = outliers.".into(),
        svg: plot::box_plot(&BoxPlot {
            title: format!("{} per configuration", table.title_name()),
            value_label: format!("{}{}", table.title_name(), d.suffix()),
            boxes,
        })?,
    };
    let cdf_figure = Figure {
        id: "cdf-objective".into(),
        caption: cdf_caption,
        svg: plot::objective_cdf(&input.objective, &shown)?,
    };
    Ok(vec![box_figure, cdf_figure])
}

/// The best-ranked [`CDF_LINES`] configurations that ran, plus the baseline if it is not among
/// them, in rank order, each labelled as in the table (the baseline marked).
fn cdf_configurations(input: &ReportInput, table: &Table) -> Vec<ConfigurationResult> {
    let find = |label: &str| input.configurations.iter().find(|c| c.label == label);
    let mut rows: Vec<&crate::table::TableRow> = table
        .rows
        .iter()
        .filter(|r| r.n > 0)
        .take(CDF_LINES)
        .collect();
    if let Some(base) = table.rows.iter().find(|r| r.baseline && r.n > 0) {
        if !rows.iter().any(|r| r.label == base.label) {
            rows.push(base);
        }
    }
    rows.iter()
        .filter_map(|r| {
            let mut c = find(&r.label)?.clone();
            c.label = table.marked_label(r);
            Some(c)
        })
        .collect()
}

/// The per-run plots: counters over time, latency with stalls, latency under load.
fn run_figures(input: &ReportInput) -> Result<Vec<Figure>, ReportError> {
    let which = input
        .runs_shown
        .as_ref()
        .map(|s| format!(" {s}"))
        .unwrap_or_default();
    let mut figs = Vec::new();
    for metric in TimeMetric::ALL {
        if metric.present_in(&input.intervals) {
            figs.push(Figure {
                id: format!("time-{}", slug(metric.label())),
                caption: format!(
                    "{} over time, one line per run, at the resolution the runs sampled.{which}",
                    capitalise(metric.label())
                ),
                svg: plot::time_series(&input.intervals, metric)?,
            });
        }
    }
    if input.message_delays.iter().any(|d| !d.points.is_empty()) {
        figs.push(Figure {
            id: "delay-scatter".into(),
            caption: format!(
                "Per-message latency of each run (one-way delay for msgs, response time for rr); stalls, the messages slower than the run's stall threshold, are drawn as larger markers and counted in the legend. Periodic stalls appear as regular rows of points far above the floor.{which}"
            ),
            svg: plot::delay_scatter(&input.message_delays, None)?,
        });
        figs.push(Figure {
            id: "delay-cdf".into(),
            caption: format!("Empirical CDF of the per-message latency.{which}"),
            svg: plot::delay_cdf(&input.message_delays)?,
        });
    }
    for (i, run) in input.latency_under_load.iter().enumerate() {
        figs.push(Figure {
            id: format!("latency-under-load-{}", i + 1),
            caption: format!(
                "Latency under load ({}): the bulk flows' throughput (top) and the probes' latency (bottom) on one time axis; the shaded window is the load, the dashed line the latency measured before it started.",
                run.label
            ),
            svg: plot::latency_under_load(run)?,
        });
    }
    Ok(figs)
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}
