//! The input model: plain serde data that the study store fills from its database and the
//! report turns into tables, plots and a page. Nothing here computes; see [`crate::table`].

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tcplab_stats::{Bootstrap, Description, Objective, Ranking};

/// What the study optimises, e.g. `time` in `seconds`, minimised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectiveSpec {
    /// Short name shown in tables ("time", "throughput", "cost").
    pub name: String,
    /// Unit of every sample ("seconds", "Mbit/s", "us/message").
    pub unit: String,
    /// Whether smaller or larger is better.
    pub goal: Objective,
}

/// One configuration of a sweep and its per-repetition objective values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigurationResult {
    /// Unique name of the configuration ("s=3 f=1"); rankings refer to it.
    pub label: String,
    /// Factor name → value as the scenario spelled it ("rtt" → "20ms"). Sorted by name.
    #[serde(default)]
    pub factors: BTreeMap<String, String>,
    /// The objective of each repetition, in [`ObjectiveSpec::unit`]. Empty when it failed.
    #[serde(default)]
    pub samples: Vec<f64>,
    /// Figures the store already computed; computed here from `samples` when absent.
    #[serde(default)]
    pub description: Option<Description>,
    /// Why racing stopped running this configuration, if it did.
    #[serde(default)]
    pub dropped: Option<String>,
    /// Why the configuration could not run (e.g. the kernel's reason for refusing a sysctl).
    #[serde(default)]
    pub failed: Option<String>,
}

impl ConfigurationResult {
    /// A configuration with samples and factors and nothing precomputed.
    pub fn new(
        label: impl Into<String>,
        factors: &[(&str, &str)],
        samples: Vec<f64>,
    ) -> ConfigurationResult {
        ConfigurationResult {
            label: label.into(),
            factors: factors
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            samples,
            description: None,
            dropped: None,
            failed: None,
        }
    }
}

/// Per-message delays of one run: the stall scatter's data (sfperf, "every 41st packet"), for
/// msgs (one-way delay) and rr (response time).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MessageDelays {
    /// Legend entry: the configuration's label, plus which run this is ("· rep 2").
    pub label: String,
    /// (sequence number, delay in microseconds).
    pub points: Vec<(u64, f64)>,
    /// When each message of `points` was sent, seconds since the run's start (same order and
    /// length as `points`); empty when unknown, and the scatter's x axis is then the sequence.
    #[serde(default)]
    pub times_s: Vec<f64>,
    /// Delays above this many microseconds are stalls: drawn with their own marker, counted in
    /// the legend. `None`: no stall threshold is known for this run.
    #[serde(default)]
    pub stall_us: Option<f64>,
    /// Stalls in the whole run when `points` are a thinned selection of a long run (its
    /// fastest and slowest messages of each stretch); `None`: `points` are every message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalls: Option<u64>,
    /// The whole run's delays as evenly spaced quantiles, µs, for the CDF when `points` are
    /// thinned (a thinned selection over-weights the extremes); empty: the CDF uses `points`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub distribution_us: Vec<f64>,
}

/// One interval's counters of a stream (from the interval reports and `tcp_info`), in base
/// units. Every metric is optional: a sampler that did not read it leaves it out.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct IntervalSample {
    /// End of the interval, seconds since the start of the run.
    pub t_s: f64,
    /// Goodput over the interval, bit/s.
    #[serde(default)]
    pub throughput_bps: Option<f64>,
    /// Congestion window, segments.
    #[serde(default)]
    pub cwnd_segments: Option<f64>,
    /// Smoothed RTT, microseconds.
    #[serde(default)]
    pub rtt_us: Option<f64>,
    /// Segments retransmitted during the interval.
    #[serde(default)]
    pub retransmits: Option<f64>,
}

/// The intervals of one flow or run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalSeries {
    /// Legend entry.
    pub label: String,
    /// Intervals in time order.
    pub intervals: Vec<IntervalSample>,
}

/// One line of a time plot: (seconds since the run's start, value in base units).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TimeLine {
    /// Legend entry ("flow 1", "total").
    pub label: String,
    /// Points in time order.
    pub points: Vec<(f64, f64)>,
}

/// One latency-under-load run (rrul): the bulk flows' throughput and the probes' latency on
/// one time axis, as flent's RRUL plot shows them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LatencyUnderLoad {
    /// Which run this is (configuration label and repetition).
    pub label: String,
    /// Throughput of the bulk flows over time, bit/s: one line per flow and direction, and
    /// their total when there is more than one.
    pub throughput: Vec<TimeLine>,
    /// Probe latency over time: (send time in s since the start, round-trip time in µs).
    pub probes: Vec<(f64, f64)>,
    /// The probes' median latency before the load started, µs (the idle latency).
    #[serde(default)]
    pub idle_latency_us: Option<f64>,
    /// When the load ran: (start, end), seconds since the run's start.
    #[serde(default)]
    pub load_s: Option<(f64, f64)>,
}

/// One "objective vs a numeric factor" plot: x is `factor`, one line per combination of the
/// other factors (BalticGrid's bandwidth vs RTT per buffer size and kernel setting).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPlotSpec {
    /// Factor on the x axis; its values must be numbers, optionally with a unit ("20ms").
    pub factor: String,
    /// Logarithmic x axis; `None` chooses log when the values span a factor of 10 or more.
    #[serde(default)]
    pub log_x: Option<bool>,
}

/// Everything one report shows. The study store fills it; the report only reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportInput {
    /// Heading of the report.
    pub title: String,
    /// The scenario file as written, shown verbatim.
    #[serde(default)]
    pub scenario_text: String,
    /// Facts that explain the run: kernel, HZ, CPUs, sysctls, emulator seed (any JSON).
    #[serde(default)]
    pub facts: serde_json::Value,
    /// The objective and its direction.
    pub objective: ObjectiveSpec,
    /// Label of the baseline configuration, for speed-ups.
    #[serde(default)]
    pub baseline: Option<String>,
    /// Every configuration, in any order.
    pub configurations: Vec<ConfigurationResult>,
    /// The store's ranking; computed here (p90 key, Welch, Holm, α = 0.05) when absent.
    #[serde(default)]
    pub ranking: Option<Ranking>,
    /// Bootstrap settings for the CIs computed here (B, seed, level).
    #[serde(default)]
    pub bootstrap: Bootstrap,
    /// Factor columns in this order (the scenario's); factors not listed follow, sorted.
    #[serde(default)]
    pub factor_order: Vec<String>,
    /// Sweep plots to draw; empty chooses every factor with three or more numeric values.
    #[serde(default)]
    pub sweep_plots: Vec<SweepPlotSpec>,
    /// Per-message delays for the stall scatter and the delay CDF.
    #[serde(default)]
    pub message_delays: Vec<MessageDelays>,
    /// Interval counters for the time-series plots.
    #[serde(default)]
    pub intervals: Vec<IntervalSeries>,
    /// Latency-under-load runs, one plot each.
    #[serde(default)]
    pub latency_under_load: Vec<LatencyUnderLoad>,
    /// How the runs behind the per-run plots were chosen ("the repetition closest to its
    /// configuration's median"), shown under those plots.
    #[serde(default)]
    pub runs_shown: Option<String>,
    /// Free sentences for the reader ("this kernel's default tcp_rmem max is 6 MB, not 2008's 4 MB").
    #[serde(default)]
    pub notes: Vec<String>,
}

impl ReportInput {
    /// An input with the required parts and everything else empty.
    pub fn new(
        title: impl Into<String>,
        objective: ObjectiveSpec,
        configurations: Vec<ConfigurationResult>,
    ) -> ReportInput {
        ReportInput {
            title: title.into(),
            scenario_text: String::new(),
            facts: serde_json::Value::Null,
            objective,
            baseline: None,
            configurations,
            ranking: None,
            bootstrap: Bootstrap::default(),
            factor_order: Vec::new(),
            sweep_plots: Vec::new(),
            message_delays: Vec::new(),
            intervals: Vec::new(),
            latency_under_load: Vec::new(),
            runs_shown: None,
            notes: Vec::new(),
        }
    }
}

impl ReportInput {
    /// Gives every configuration its short label ([`crate::label::short_labels`] over the
    /// factors, in `factor_order`), and renames the baseline, the ranking's entries and every
    /// series that began with an old label, so one label names a configuration everywhere.
    /// Returns the key from short labels back to the full settings.
    pub fn shorten_labels(&mut self) -> crate::label::Key {
        let factors: Vec<&BTreeMap<String, String>> =
            self.configurations.iter().map(|c| &c.factors).collect();
        let (labels, key) = crate::label::short_labels(&factors, &self.factor_order);
        let renames: Vec<(String, String)> = self
            .configurations
            .iter_mut()
            .zip(labels)
            .map(|(c, new)| (std::mem::replace(&mut c.label, new.clone()), new))
            .collect();
        // Longest old label first, so "a=1" does not rename what "a=10" began.
        let mut by_length = renames.clone();
        by_length.sort_by_key(|(old, _)| std::cmp::Reverse(old.len()));
        let rename = |label: &mut String| {
            if let Some((old, new)) = by_length
                .iter()
                .find(|(old, _)| label.starts_with(old.as_str()))
            {
                *label = format!("{new}{}", &label[old.len()..]);
            }
        };
        if let Some(b) = self.baseline.as_mut() {
            if let Some((_, new)) = renames.iter().find(|(old, _)| old == b) {
                *b = new.clone();
            }
        }
        if let Some(r) = self.ranking.as_mut() {
            for e in &mut r.entries {
                if let Some((_, new)) = renames.iter().find(|(old, _)| *old == e.name) {
                    e.name = new.clone();
                }
            }
        }
        self.message_delays
            .iter_mut()
            .for_each(|d| rename(&mut d.label));
        self.intervals.iter_mut().for_each(|s| rename(&mut s.label));
        self.latency_under_load
            .iter_mut()
            .for_each(|l| rename(&mut l.label));
        key
    }
}
