//! Stalls in per-message delay series: which messages stalled, whether the stalls recur every
//! N messages (seed 004's "every 41st message"), whether their size is a whole number of kernel
//! timer ticks, and how much of a series clusters at a given delay (the delayed-ACK timer).
//!
//! Input is one delay per message, in seconds, indexed by message sequence number. Never feed
//! interval averages: the periodicity test is about message indices, and an interval average
//! would alias a stall period against the reporting interval (the "sampling beats" flent users
//! report) and could show a pattern that is not in the messages.
//!
//! Steps of [`analyse_stalls`]:
//! 1. Threshold: `Fixed(t)`, or robust: median + max(k·MAD, min_excess), with the MAD scaled by
//!    1.4826 to estimate σ under normality (Hampel 1974; Leys et al. 2013, JESP 49:764).
//! 2. Events: messages above the threshold; a run of consecutive stalled messages (those queued
//!    behind one stall) is one event at its first index, with the run's largest excess.
//! 3. Period: [`crate::period::fit_period`] over the event indices (binomial test, Bonferroni).
//! 4. Ticks: each event's excess over the median in units of 1/HZ; clustered when most lie within
//!    ±¼ tick of a whole multiple ≥ 1, tested against the ½ expected by chance (binomial).

use crate::error::{StatsError, check_samples, check_unit_open};
use crate::period::{PeriodFit, fit_period};
use crate::summary::{median, quantile_sorted, sorted_copy};
use serde::{Deserialize, Serialize};
use statrs::function::beta::beta_reg;
use std::collections::BTreeMap;

/// Scale that turns a MAD into a consistent estimate of σ for normal data (1/Φ⁻¹(3/4)).
pub const MAD_SCALE: f64 = 1.4826;

/// Half-width, in ticks, of the window around a whole multiple that counts as "on a tick".
pub const TICK_WINDOW: f64 = 0.25;

/// How the stall threshold is set.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Threshold {
    /// median + max(k · 1.4826 · MAD, min_excess).
    Robust {
        /// Multiple of the scaled MAD (e.g. 5).
        k: f64,
        /// Smallest excess over the median that counts, in seconds (guards MAD = 0).
        min_excess: f64,
    },
    /// A delay above this many seconds is a stall.
    Fixed(f64),
}

/// Parameters of [`analyse_stalls`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StallConfig {
    /// How stalls are told from ordinary delays.
    pub threshold: Threshold,
    /// Kernel timer frequency (CONFIG_HZ) for the tick analysis; `None` skips it.
    pub hz: Option<u32>,
    /// A grid point matches events up to this many messages away (0 = exact index).
    pub index_tolerance: usize,
    /// Fewest events (and on-grid events) needed to call anything periodic or clustered.
    pub min_events: usize,
    /// Significance level of the periodicity and tick tests, e.g. 0.001.
    pub alpha: f64,
    /// Smallest share of events on the grid for a periodic verdict, e.g. 0.5.
    pub min_on_grid_fraction: f64,
}

impl StallConfig {
    /// Defaults: robust threshold k = 5 with min_excess half a tick (0.5 ms without HZ),
    /// index tolerance 1, at least 4 events, α = 0.001, at least half the events on the grid.
    pub fn new(hz: Option<u32>) -> StallConfig {
        let min_excess = hz.map_or(0.5e-3, |hz| 0.5 / f64::from(hz.max(1)));
        StallConfig {
            threshold: Threshold::Robust { k: 5.0, min_excess },
            hz,
            index_tolerance: 1,
            min_events: 4,
            alpha: 1e-3,
            min_on_grid_fraction: 0.5,
        }
    }
}

/// One stall: a run of consecutive messages above the threshold.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StallEvent {
    /// Index of the run's first message.
    pub index: usize,
    /// Messages in the run.
    pub run: usize,
    /// Largest delay in the run minus the series' median, in seconds.
    pub excess: f64,
}

/// How stall magnitudes sit against the kernel timer tick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TickClustering {
    /// Timer frequency used.
    pub hz: u32,
    /// One tick, 1/HZ, in seconds.
    pub tick: f64,
    /// Median excess of the events in ticks.
    pub median_excess_ticks: f64,
    /// (multiple of the tick, events rounded to it), ascending; 0 means under half a tick.
    pub multiples: Vec<(u32, usize)>,
    /// Share of events within ±¼ tick of a whole multiple ≥ 1.
    pub on_tick_fraction: f64,
    /// Binomial p-value of that share against ½ (uniform fractional part).
    pub p_value: f64,
    /// True when the excess is clustered at whole ticks (enough events, p < α, share ≥ 0.8).
    pub clustered: bool,
}

/// Everything [`analyse_stalls`] found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StallAnalysis {
    /// Messages in the series.
    pub n: usize,
    /// Median delay, the baseline stalls are measured from.
    pub median: f64,
    /// Scaled MAD (1.4826 · MAD).
    pub mad: f64,
    /// The threshold used.
    pub threshold: f64,
    /// Messages above the threshold.
    pub stalled_messages: usize,
    /// Stall events in index order.
    pub events: Vec<StallEvent>,
    /// Best grid for the event indices (`None` with too few events).
    pub period: Option<PeriodFit>,
    /// True when that grid passes the test and the on-grid share (see [`StallConfig`]).
    pub periodic: bool,
    /// Tick analysis (`None` without HZ or without events).
    pub ticks: Option<TickClustering>,
}

/// Finds stalls in `delays` (seconds, one per message, in sequence order) and analyses them.
pub fn analyse_stalls(delays: &[f64], config: &StallConfig) -> Result<StallAnalysis, StatsError> {
    check_samples("per-message delays", delays)?;
    validate(config)?;
    let sorted = sorted_copy(delays);
    let med = quantile_sorted(&sorted, 0.5);
    let mad = MAD_SCALE * median(&delays.iter().map(|d| (d - med).abs()).collect::<Vec<_>>());
    let threshold = match config.threshold {
        Threshold::Robust { k, min_excess } => med + (k * mad).max(min_excess),
        Threshold::Fixed(t) => t,
    };
    let events = stall_events(delays, threshold, med);
    let stalled_messages = events.iter().map(|e| e.run).sum();
    let indices: Vec<usize> = events.iter().map(|e| e.index).collect();
    let period = fit_period(
        &indices,
        delays.len(),
        config.index_tolerance,
        config.min_events,
    );
    let periodic = period.as_ref().is_some_and(|p| {
        p.p_value < config.alpha
            && p.on_grid >= config.min_events
            && p.on_grid_fraction >= config.min_on_grid_fraction
    });
    let ticks = match config.hz {
        Some(hz) if !events.is_empty() => Some(tick_clustering(&events, hz, config)),
        _ => None,
    };
    Ok(StallAnalysis {
        n: delays.len(),
        median: med,
        mad,
        threshold,
        stalled_messages,
        events,
        period,
        periodic,
        ticks,
    })
}

/// Runs of consecutive values above `threshold`, each as one event.
fn stall_events(delays: &[f64], threshold: f64, median: f64) -> Vec<StallEvent> {
    let mut events: Vec<StallEvent> = Vec::new();
    for (i, &d) in delays.iter().enumerate() {
        if d <= threshold {
            continue;
        }
        match events.last_mut() {
            Some(last) if last.index + last.run == i => {
                last.run += 1;
                last.excess = last.excess.max(d - median);
            }
            _ => events.push(StallEvent {
                index: i,
                run: 1,
                excess: d - median,
            }),
        }
    }
    events
}

/// Tick analysis of the events' excess delays.
fn tick_clustering(events: &[StallEvent], hz: u32, config: &StallConfig) -> TickClustering {
    let tick = 1.0 / f64::from(hz);
    let in_ticks: Vec<f64> = events.iter().map(|e| e.excess / tick).collect();
    let mut multiples: BTreeMap<u32, usize> = BTreeMap::new();
    let mut on_tick = 0;
    for &t in &in_ticks {
        let nearest = t.round().max(0.0);
        *multiples.entry(nearest as u32).or_default() += 1;
        if nearest >= 1.0 && (t - nearest).abs() <= TICK_WINDOW {
            on_tick += 1;
        }
    }
    let m = events.len();
    let share = on_tick as f64 / m as f64;
    let p_value = if on_tick == 0 {
        1.0
    } else {
        // P(X >= on_tick), X ~ Bin(m, ½); a = on_tick ≥ 1, b = m − on_tick + 1 ≥ 1, x = ½:
        // inside beta_reg's domain, so it cannot panic.
        beta_reg(on_tick as f64, (m - on_tick + 1) as f64, 2.0 * TICK_WINDOW)
    };
    TickClustering {
        hz,
        tick,
        median_excess_ticks: median(&in_ticks),
        multiples: multiples.into_iter().collect(),
        on_tick_fraction: share,
        p_value,
        clustered: m >= config.min_events && p_value < config.alpha && share >= 0.8,
    }
}

fn validate(config: &StallConfig) -> Result<(), StatsError> {
    check_unit_open("alpha", config.alpha)?;
    if !(0.0..=1.0).contains(&config.min_on_grid_fraction) {
        return Err(StatsError::InvalidParameter {
            name: "min_on_grid_fraction",
            value: config.min_on_grid_fraction.to_string(),
            expected: "between 0 and 1",
        });
    }
    if config.hz == Some(0) {
        return Err(StatsError::InvalidParameter {
            name: "hz",
            value: "0".into(),
            expected: "the kernel's CONFIG_HZ (100, 250, 300 or 1000)",
        });
    }
    match config.threshold {
        Threshold::Robust { k, min_excess } if !(k > 0.0 && k.is_finite() && min_excess >= 0.0) => {
            Err(StatsError::InvalidParameter {
                name: "threshold",
                value: format!("robust k = {k}, min_excess = {min_excess}"),
                expected: "k > 0 and min_excess >= 0 seconds",
            })
        }
        Threshold::Fixed(t) if !t.is_finite() => Err(StatsError::InvalidParameter {
            name: "threshold",
            value: t.to_string(),
            expected: "a finite delay in seconds",
        }),
        _ => Ok(()),
    }
}

/// `seconds` expressed in kernel timer ticks (jiffies) of a `hz` kernel: seconds · HZ
/// (e.g. the 40 ms delayed-ACK minimum is 10 ticks at HZ = 250).
pub fn in_ticks(seconds: f64, hz: u32) -> f64 {
    seconds * f64::from(hz)
}

/// Share of samples within ±`half_width` of `centre` (e.g. 40 ms ± 4 ms: the delayed-ACK
/// timer), with its Wilson score interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClusterFraction {
    /// Samples inside the window.
    pub inside: usize,
    /// All samples.
    pub n: usize,
    /// inside / n.
    pub fraction: f64,
    /// Lower bound of the 95% Wilson interval of the fraction.
    pub lower: f64,
    /// Upper bound of the 95% Wilson interval of the fraction.
    pub upper: f64,
}

/// z for a two-sided 95% interval, Φ⁻¹(0.975).
const Z_95: f64 = 1.959_963_984_540_054;

/// Counts samples in [centre − half_width, centre + half_width]; the interval is Wilson's
/// (1927, JASA 22:209): (p̂ + z²/2n ± z√(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n), z = 1.96.
pub fn cluster_fraction(
    samples: &[f64],
    centre: f64,
    half_width: f64,
) -> Result<ClusterFraction, StatsError> {
    check_samples("samples", samples)?;
    if !(half_width >= 0.0 && half_width.is_finite() && centre.is_finite()) {
        return Err(StatsError::InvalidParameter {
            name: "half_width",
            value: format!("{half_width} around {centre}"),
            expected: "a finite centre and a finite half-width >= 0",
        });
    }
    let inside = samples
        .iter()
        .filter(|&&x| (x - centre).abs() <= half_width)
        .count();
    let n = samples.len();
    let (nf, p) = (n as f64, inside as f64 / n as f64);
    let z2 = Z_95 * Z_95;
    let denom = 1.0 + z2 / nf;
    let centre_w = (p + z2 / (2.0 * nf)) / denom;
    let half = Z_95 * (p * (1.0 - p) / nf + z2 / (4.0 * nf * nf)).sqrt() / denom;
    Ok(ClusterFraction {
        inside,
        n,
        fraction: p,
        lower: (centre_w - half).max(0.0),
        upper: (centre_w + half).min(1.0),
    })
}
