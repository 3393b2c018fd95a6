//! The monitor's state as an OpenMetrics page for Prometheus, pure: a [`Snapshot`] in, the
//! exposition text out, written by `prometheus-client` (the Prometheus project's Rust client)
//! rather than by hand, so escaping, types, units and the `# EOF` line follow the standard.
//!
//! Labels are host names from the hosts file, the workload's kind, a figure's name or an
//! outcome from a fixed list: their values are bounded by the fleet's size, so a scrape never
//! grows a series per run (Prometheus's advice on label cardinality).

use std::fmt;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use serde::{Deserialize, Serialize};

use crate::figures::Figure;

/// How a pair's last run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Ran whole.
    Complete,
    /// Cut short (a peer went away, a limit); its figures may be partial.
    Incomplete,
    /// No result: the agent could not be reached, or refused.
    Failed,
}

impl Outcome {
    /// Every outcome, as the runs counter's `outcome` label takes them.
    pub const ALL: [Outcome; 3] = [Outcome::Complete, Outcome::Incomplete, Outcome::Failed];

    fn label(self) -> &'static str {
        match self {
            Outcome::Complete => "complete",
            Outcome::Incomplete => "incomplete",
            Outcome::Failed => "failed",
        }
    }
}

/// What the monitor knows of one slot (a pair and workload).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairState {
    /// The client's host name.
    pub src: String,
    /// The server's host name.
    pub dst: String,
    /// The workload's kind (`stream`, `rr`, ...).
    pub workload: String,
    /// When its last run started, Unix seconds.
    pub last_run_unix_s: f64,
    /// How its last run ended.
    pub last_outcome: Outcome,
    /// Runs so far per outcome, in [`Outcome::ALL`]'s order.
    pub runs: [u64; 3],
    /// The last run's figures.
    pub figures: Vec<(Figure, f64)>,
    /// On a lab: whether the emulator kept the last run's schedule.
    pub emulator_trustworthy: Option<bool>,
    /// Figures with an open regression alert.
    pub regressed: Vec<Figure>,
    /// While one is open: the cause the pair's alerts name ([`crate::evidence::Cause::label`]:
    /// a doctor finding's id, `pending`, `unexplained`, ...).
    #[serde(default)]
    pub cause: Option<String>,
}

/// Everything one scrape shows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Hosts in the hosts file.
    pub hosts: usize,
    /// Agents that answered their last contact.
    pub hosts_up: usize,
    /// How far the schedule is behind, seconds.
    pub lag_s: f64,
    /// Every slot that has run at least once.
    pub pairs: Vec<PairState>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PairLabels {
    src: String,
    dst: String,
    workload: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QuantileLabels {
    src: String,
    dst: String,
    workload: String,
    quantile: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    src: String,
    dst: String,
    workload: String,
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FigureLabels {
    src: String,
    dst: String,
    workload: String,
    figure: String,
    /// The doctor's cause while the alert is open, `none` when it is not (values: the
    /// doctor's finding ids and a few words of the monitor's, a bounded set).
    cause: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// The families of one page, registered under the `tcplab` prefix.
struct Page {
    registry: Registry,
    throughput: Family<PairLabels, FloatGauge>,
    latency: Family<QuantileLabels, FloatGauge>,
    connections: Family<PairLabels, FloatGauge>,
    stalls: Family<PairLabels, FloatGauge>,
    retransmits: Family<PairLabels, FloatGauge>,
    last_run: Family<PairLabels, FloatGauge>,
    last_ok: Family<PairLabels, Gauge>,
    runs: Family<OutcomeLabels, Counter>,
    trustworthy: Family<PairLabels, Gauge>,
    regression: Family<FigureLabels, Gauge>,
}

impl Page {
    fn new() -> Page {
        let mut page = Page {
            registry: Registry::with_prefix("tcplab"),
            throughput: Family::default(),
            latency: Family::default(),
            connections: Family::default(),
            stalls: Family::default(),
            retransmits: Family::default(),
            last_run: Family::default(),
            last_ok: Family::default(),
            runs: Family::default(),
            trustworthy: Family::default(),
            regression: Family::default(),
        };
        page.register();
        page
    }

    fn register(&mut self) {
        let registry = &mut self.registry;
        registry.register_with_unit(
            "pair_throughput",
            "Received throughput of the pair's last stream run",
            Unit::Other("bits_per_second".into()),
            self.throughput.clone(),
        );
        registry.register_with_unit(
            "pair_latency",
            "Request/response latency of the pair's last rr run, by quantile",
            Unit::Seconds,
            self.latency.clone(),
        );
        registry.register(
            "pair_connections_per_second",
            "Connections per second of the pair's last crr run",
            self.connections.clone(),
        );
        registry.register(
            "pair_stalls",
            "Messages or transactions of the pair's last run stalled past the stall threshold",
            self.stalls.clone(),
        );
        registry.register(
            "pair_retransmits",
            "TCP retransmissions of the pair's last stream run",
            self.retransmits.clone(),
        );
        registry.register_with_unit(
            "pair_last_run_timestamp",
            "When the pair's last run of the workload started (Unix time)",
            Unit::Seconds,
            self.last_run.clone(),
        );
        registry.register(
            "pair_last_run_complete",
            "1 when the pair's last run of the workload ran whole, else 0",
            self.last_ok.clone(),
        );
        registry.register(
            "pair_runs",
            "Runs of the workload on the pair, by outcome",
            self.runs.clone(),
        );
        registry.register(
            "pair_emulator_trustworthy",
            "On a lab: 1 when the emulator kept the pair's last run's schedule, else 0",
            self.trustworthy.clone(),
        );
        registry.register(
            "pair_regression",
            "1 while the figure has an open regression alert against the pair's own history; \
             cause is the doctor's finding on the pair",
            self.regression.clone(),
        );
    }

    fn add(&self, p: &PairState) {
        let pair = PairLabels {
            src: p.src.clone(),
            dst: p.dst.clone(),
            workload: p.workload.clone(),
        };
        for (figure, value) in &p.figures {
            match figure {
                Figure::ThroughputBps => self.throughput.get_or_create(&pair).set(*value),
                Figure::Retransmits => self.retransmits.get_or_create(&pair).set(*value),
                Figure::Stalls => self.stalls.get_or_create(&pair).set(*value),
                Figure::ConnectionsPerS => self.connections.get_or_create(&pair).set(*value),
                Figure::LatencyP50S | Figure::LatencyP99S => {
                    let quantile = if *figure == Figure::LatencyP50S {
                        "0.5"
                    } else {
                        "0.99"
                    };
                    self.latency
                        .get_or_create(&QuantileLabels {
                            src: p.src.clone(),
                            dst: p.dst.clone(),
                            workload: p.workload.clone(),
                            quantile: quantile.into(),
                        })
                        .set(*value)
                }
            };
        }
        self.last_run.get_or_create(&pair).set(p.last_run_unix_s);
        self.last_ok
            .get_or_create(&pair)
            .set(i64::from(p.last_outcome == Outcome::Complete));
        for (outcome, n) in Outcome::ALL.iter().zip(p.runs) {
            self.runs
                .get_or_create(&OutcomeLabels {
                    src: p.src.clone(),
                    dst: p.dst.clone(),
                    workload: p.workload.clone(),
                    outcome: outcome.label().into(),
                })
                .inc_by(n);
        }
        if let Some(t) = p.emulator_trustworthy {
            self.trustworthy.get_or_create(&pair).set(i64::from(t));
        }
        for figure in Figure::ALL.iter().filter(|f| f.alerts()) {
            if p.figures.iter().any(|(f, _)| f == figure) || p.regressed.contains(figure) {
                self.regression
                    .get_or_create(&FigureLabels {
                        src: p.src.clone(),
                        dst: p.dst.clone(),
                        workload: p.workload.clone(),
                        figure: figure.name().into(),
                        cause: match (p.regressed.contains(figure), &p.cause) {
                            (true, Some(c)) => c.clone(),
                            (true, None) => "pending".into(),
                            (false, _) => "none".into(),
                        },
                    })
                    .set(i64::from(p.regressed.contains(figure)));
            }
        }
    }
}

/// The OpenMetrics page of `snapshot`.
pub fn render(snapshot: &Snapshot) -> Result<String, fmt::Error> {
    let mut page = Page::new();
    for p in &snapshot.pairs {
        page.add(p);
    }
    let hosts: Gauge = Gauge::default();
    hosts.set(snapshot.hosts as i64);
    let up: Gauge = Gauge::default();
    up.set(snapshot.hosts_up as i64);
    let lag: FloatGauge = FloatGauge::default();
    lag.set(snapshot.lag_s);
    let monitor = page.registry.sub_registry_with_prefix("monitor");
    monitor.register("hosts", "Hosts in the hosts file", hosts);
    monitor.register(
        "hosts_up",
        "Hosts whose agent answered its last contact",
        up,
    );
    monitor.register_with_unit(
        "schedule_lag",
        "How far the schedule is behind: the most overdue test's wait",
        Unit::Seconds,
        lag,
    );
    let mut out = String::new();
    encode(&mut out, &page.registry)?;
    Ok(out)
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
