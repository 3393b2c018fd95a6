//! Plots over time: a stream's counters per interval (throughput, cwnd, RTT, retransmits),
//! per-message latency with its stalls marked, the latency CDF, and latency under load
//! (flent's RRUL: the bulk flows' throughput above, the probes' latency below, one time axis,
//! the idle latency as a dashed line and the load's window shaded).

use super::{Axis, Mark, Panel, XyPlot, XySeries, render_panels, render_xy};
use crate::error::ReportError;
use crate::model::{IntervalSample, IntervalSeries, LatencyUnderLoad, MessageDelays};
use tcplab_stats::units::{Display, Unit};

/// Most points drawn per scatter series; beyond it each bucket keeps its min and max, so
/// stalls (the maxima) always show.
const MAX_SCATTER_POINTS: usize = 4_000;
/// Most points drawn in one scatter over all series, so a page with many runs stays light
/// (each series still gets at least [`MIN_SCATTER_POINTS`]).
const SCATTER_BUDGET: usize = 16_000;
/// Fewest points a scatter series is thinned to.
const MIN_SCATTER_POINTS: usize = 400;

/// Which interval counter a time-series plot shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeMetric {
    /// Goodput.
    Throughput,
    /// Congestion window, segments.
    Cwnd,
    /// Smoothed RTT.
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

    /// Name without unit.
    pub fn label(self) -> &'static str {
        match self {
            TimeMetric::Throughput => "throughput",
            TimeMetric::Cwnd => "cwnd",
            TimeMetric::Rtt => "smoothed RTT",
            TimeMetric::Retransmits => "retransmits",
        }
    }

    /// The base unit of this metric.
    fn unit(self) -> Unit {
        match self {
            TimeMetric::Throughput => Unit::BitsPerSecond,
            TimeMetric::Cwnd => Unit::Other("segments".into()),
            TimeMetric::Rtt => Unit::Microseconds,
            TimeMetric::Retransmits => Unit::Other("segments per interval".into()),
        }
    }

    /// The value of this metric in one interval, in base units.
    pub fn of(self, s: &IntervalSample) -> Option<f64> {
        match self {
            TimeMetric::Throughput => s.throughput_bps,
            TimeMetric::Cwnd => s.cwnd_segments,
            TimeMetric::Rtt => s.rtt_us,
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

/// One metric over time, one line per series, in the unit its values read best in.
pub fn time_series(series: &[IntervalSeries], metric: TimeMetric) -> Result<String, ReportError> {
    let d = metric.unit().display_for(
        series
            .iter()
            .flat_map(|s| s.intervals.iter().filter_map(|i| metric.of(i))),
    );
    let lines = series
        .iter()
        .map(|s| XySeries {
            label: s.label.clone(),
            points: s
                .intervals
                .iter()
                .filter_map(|i| metric.of(i).map(|v| (i.t_s, d.scale(v))))
                .collect(),
            band: Vec::new(),
            mark: Mark::Line,
        })
        .collect();
    let mut y = Axis::linear(format!("{}{}", metric.label(), d.suffix()));
    y.include_zero = true;
    render_xy(&XyPlot {
        title: format!("{} over time", metric.label()),
        x: Axis::linear("time (s)"),
        y,
        series: lines,
    })
}

/// Per-message latency, one colour per run, over time (or the message sequence when send
/// times are unknown); each run's stalls (above its `stall_us`) drawn as a series of their
/// own, counted in the legend. `log_y: None` picks log when the delays span 100x or more.
pub fn delay_scatter(delays: &[MessageDelays], log_y: Option<bool>) -> Result<String, ReportError> {
    let all: Vec<f64> = delays
        .iter()
        .flat_map(|d| d.points.iter().map(|p| p.1))
        .collect();
    let d = Unit::Microseconds.display_for(all.iter().copied());
    let log_y = log_y.unwrap_or_else(|| super::charts::spans(&all, 100.0));
    let by_time = delays
        .iter()
        .all(|m| m.times_s.len() == m.points.len() && !m.points.is_empty());
    let per_series =
        (SCATTER_BUDGET / delays.len().max(1)).clamp(MIN_SCATTER_POINTS, MAX_SCATTER_POINTS);
    let mut series = Vec::new();
    for m in delays {
        let xy: Vec<(f64, f64)> = m
            .points
            .iter()
            .enumerate()
            .map(|(i, &(seq, us))| {
                let x = if by_time { m.times_s[i] } else { seq as f64 };
                (x, d.scale(us))
            })
            .collect();
        let stall = m.stall_us.map(|s| d.scale(s));
        let is_stall = |p: &(f64, f64)| stall.is_some_and(|s| p.1 > s);
        let calm: Vec<(f64, f64)> = xy.iter().copied().filter(|p| !is_stall(p)).collect();
        let stalls: Vec<(f64, f64)> = xy.iter().copied().filter(is_stall).collect();
        series.push(XySeries {
            label: m.label.clone(),
            points: decimate_extremes(&calm, per_series),
            band: Vec::new(),
            mark: Mark::Points,
        });
        if let Some(s) = stall {
            series.push(XySeries {
                label: format!(
                    "{}: {} stalls > {}",
                    m.label,
                    m.stalls.unwrap_or(stalls.len() as u64),
                    human_scaled(s, &d)
                ),
                points: decimate_extremes(&stalls, per_series),
                band: Vec::new(),
                mark: Mark::Marked,
            });
        }
    }
    let x = if by_time {
        Axis::linear("time (s)")
    } else {
        Axis::linear("message (sequence number)")
    };
    render_xy(&XyPlot {
        title: "Per-message latency".to_string(),
        x,
        y: Axis::scaled(format!("latency{}", d.suffix()), log_y),
        series,
    })
}

/// CDF of the per-message delays, one line per run; log x when they span 10x or more.
pub fn delay_cdf(delays: &[MessageDelays]) -> Result<String, ReportError> {
    // A thinned long run draws its whole run's quantiles, not its kept points.
    let drawn = |m: &MessageDelays| -> Vec<f64> {
        match m.distribution_us.is_empty() {
            true => m.points.iter().map(|p| p.1).collect(),
            false => m.distribution_us.clone(),
        }
    };
    let values: Vec<(String, Vec<f64>)> =
        delays.iter().map(|m| (m.label.clone(), drawn(m))).collect();
    let d = Unit::Microseconds.display_for(values.iter().flat_map(|v| v.1.iter().copied()));
    let named: Vec<(String, Vec<f64>)> = values
        .into_iter()
        .map(|(label, v)| (label, v.into_iter().map(|us| d.scale(us)).collect()))
        .collect();
    super::charts::cdf_plot(
        "CDF of per-message latency",
        &format!("latency{}", d.suffix()),
        &named,
    )
}

/// Latency under load: throughput of each bulk flow (and their total) above, the probes'
/// latency below, on one time axis; the idle latency dashed, the load's window shaded.
pub fn latency_under_load(run: &LatencyUnderLoad) -> Result<String, ReportError> {
    let rate = Unit::BitsPerSecond.display_for(
        run.throughput
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1)),
    );
    let lat =
        Unit::Microseconds.display_for(run.probes.iter().map(|p| p.1).chain(run.idle_latency_us));
    let mut top: Vec<XySeries> = run
        .throughput
        .iter()
        .map(|l| XySeries {
            label: l.label.clone(),
            points: l.points.iter().map(|&(t, v)| (t, rate.scale(v))).collect(),
            band: Vec::new(),
            mark: Mark::Line,
        })
        .collect();
    let probes: Vec<(f64, f64)> = run.probes.iter().map(|&(t, v)| (t, lat.scale(v))).collect();
    let (t0, t1) = time_extent(run);
    let lat_max = probes.iter().map(|p| p.1).fold(0.0, f64::max);
    let mut bottom = vec![XySeries {
        label: "probe latency".into(),
        points: probes,
        band: Vec::new(),
        mark: Mark::Points,
    }];
    if let Some(idle) = run.idle_latency_us {
        let v = lat.scale(idle);
        bottom.push(XySeries {
            label: format!("idle latency {}", human_scaled(v, &lat)),
            points: vec![(t0, v), (t1, v)],
            band: Vec::new(),
            mark: Mark::Dashed,
        });
    }
    if let Some((start, end)) = run.load_s {
        let top_max = top
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(0.0, f64::max);
        top.push(load_band("load running", start, end, top_max));
        bottom.push(load_band("", start, end, lat_max));
    }
    let mut y_rate = Axis::linear(format!("throughput{}", rate.suffix()));
    y_rate.include_zero = true;
    let mut y_lat = Axis::linear(format!("latency{}", lat.suffix()));
    y_lat.include_zero = true;
    render_panels(
        &format!("Latency under load: {}", run.label),
        &Axis::linear("time (s)"),
        &[
            Panel {
                y: y_rate,
                series: top,
            },
            Panel {
                y: y_lat,
                series: bottom,
            },
        ],
    )
}

/// The shaded window in which the load ran, from 0 to `height` (unlabelled: no legend entry).
fn load_band(label: &str, start: f64, end: f64, height: f64) -> XySeries {
    XySeries {
        label: label.into(),
        points: Vec::new(),
        band: vec![(start, 0.0, height), (end, 0.0, height)],
        mark: Mark::Band,
    }
}

/// First and last time of anything the run drew.
fn time_extent(run: &LatencyUnderLoad) -> (f64, f64) {
    let times = run.probes.iter().map(|p| p.0).chain(
        run.throughput
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.0)),
    );
    let (lo, hi) = times.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), t| {
        (lo.min(t), hi.max(t))
    });
    if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) }
}

/// An already scaled value with the display's unit: "19.8 ms".
fn human_scaled(v: f64, d: &Display) -> String {
    format!("{} {}", tcplab_stats::units::significant(v, 3), d.symbol)
}

/// At most `max` points (max ≥ 2): in order, each bucket of consecutive points keeps its
/// smallest and largest value.
fn decimate_extremes(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if points.len() <= max {
        return points.to_vec();
    }
    let bucket = points.len().div_ceil((max / 2).max(1));
    let mut out = Vec::with_capacity(max);
    for chunk in points.chunks(bucket) {
        let finite = chunk.iter().filter(|p| p.1.is_finite());
        let lo = finite.clone().min_by(|a, b| a.1.total_cmp(&b.1));
        let hi = finite.max_by(|a, b| a.1.total_cmp(&b.1));
        if let (Some(lo), Some(hi)) = (lo, hi) {
            out.push(*lo);
            if hi != lo {
                out.push(*hi);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimation_keeps_every_stall() {
        let pts: Vec<(f64, f64)> = (0..100_000u64)
            .map(|i| (i as f64, if i % 41 == 40 { 20_000.0 } else { 30.0 }))
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
}
