//! The real [`Executor`]: each run in a lab built from its configuration (fresh, or reused while
//! the configuration stays the same and the scenario says `reset = "reuse"`), its workloads run
//! with `tcplab-load` between the lab's first and last end host, the summary figures flattened
//! into metrics, the raw samples kept, and the emulator's fidelity judged over the run.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Instant;

use tcplab_lab::{Lab, LabError, Ownership, Role, StateDir};
use tcplab_load::Report;

use crate::plan::PlannedRun;
use crate::runner::{Executor, Fidelity, RunError, RunOutcome};
use crate::workload::{self, MsgPattern, StreamDirection, Workload, WorkloadKind};

/// Runs every planned run in real labs.
#[derive(Debug)]
pub struct LabExecutor {
    state: StateDir,
    prefix: String,
    built: u32,
    current: Option<(usize, Lab)>,
}

impl LabExecutor {
    /// Labs are registered under `state` and named `<prefix>_<n>`.
    pub fn new(state: StateDir, prefix: &str) -> LabExecutor {
        LabExecutor {
            state,
            prefix: prefix.to_string(),
            built: 0,
            current: None,
        }
    }

    /// The lab for this run: the current one when it can be reused, else a new one.
    fn lab_for(&mut self, run: &PlannedRun) -> Result<&Lab, RunError> {
        let reuse = !run.fresh_lab
            && self
                .current
                .as_ref()
                .is_some_and(|(id, _)| *id == run.config.id);
        if !reuse {
            // The old lab goes first: two labs at once would share the machine's CPUs.
            drop(self.current.take());
            self.built += 1;
            let name = format!("{}_{}", self.prefix, self.built);
            let spec = run
                .config
                .lab_spec(&name)
                .map_err(|e| RunError::Rejected(e.to_string()))?;
            let lab =
                Lab::build_in(self.state.clone(), spec, Ownership::Process).map_err(lab_error)?;
            self.current = Some((run.config.id, lab));
        }
        match &self.current {
            Some((_, lab)) => Ok(lab),
            None => Err(RunError::Failed("no lab".into())),
        }
    }
}

/// Kernel refusals of a configuration's values fail that configuration; missing privileges stop
/// the study; anything else fails the run.
fn lab_error(e: LabError) -> RunError {
    match e {
        LabError::NotRoot { .. } => RunError::Fatal(e.to_string()),
        LabError::SysctlRejected { .. }
        | LabError::UnknownSysctl { .. }
        | LabError::GlobalSysctl { .. }
        | LabError::Invalid { .. } => RunError::Rejected(e.to_string()),
        other => RunError::Failed(other.to_string()),
    }
}

fn load_error(e: tcplab_load::LoadError) -> RunError {
    use tcplab_load::LoadError;
    match e {
        // The server refuses a test when the kernel rejects its socket options: a property of
        // the configuration, not of this run.
        LoadError::Config { .. }
        | LoadError::Unsupported { .. }
        | LoadError::SockOpt { .. }
        | LoadError::Refused(_) => RunError::Rejected(e.to_string()),
        other => RunError::Failed(other.to_string()),
    }
}

impl Executor for LabExecutor {
    fn run(&mut self, run: &PlannedRun) -> Result<RunOutcome, RunError> {
        let start = Instant::now();
        let lab = self.lab_for(run)?;
        let ends: Vec<&str> = lab
            .hosts()
            .iter()
            .filter(|h| h.role() == Role::Host)
            .map(|h| h.name())
            .collect();
        let (client, server) = match ends.as_slice() {
            [first, .., last] => (*first, *last),
            _ => return Err(RunError::Rejected("the lab needs two end hosts".into())),
        };
        let before = lab.emulator_status().ok();
        let collected = run_workloads(&run.config.settings.workloads, |w| {
            tcplab_load::lab::run_on(lab, client, server, |target, f| run_workload(w, target, f))
        })?;
        let fidelity = match (before, lab.emulator_status().ok()) {
            (Some(b), Some(a)) => judge(&b.counters, &a.counters, a.running),
            _ => Fidelity {
                trustworthy: true,
                reasons: Vec::new(),
            },
        };
        Ok(RunOutcome {
            metrics: collected.metrics,
            samples: collected.samples,
            facts: collected.facts,
            fidelity,
            wall: start.elapsed(),
        })
    }
}

/// What a run's workloads produced, in the store's shape.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    /// Summary figures, flattened (`latency_us.p99`; later workloads prefixed `workload.N.`).
    pub metrics: BTreeMap<String, f64>,
    /// Every workload's raw samples, concatenated.
    pub samples: Vec<u8>,
    /// The first workload's facts.
    pub facts: serde_json::Value,
}

/// Runs `workloads` in order with `run_one` (which places the client and server: a lab's hosts
/// or a remote `tcplab serve`) and collects their figures; an incomplete workload fails the run.
pub(crate) fn run_workloads(
    workloads: &[Workload],
    mut run_one: impl FnMut(&Workload) -> tcplab_load::Result<Report>,
) -> Result<Collected, RunError> {
    let mut out = Collected::default();
    for (i, w) in workloads.iter().enumerate() {
        let report = run_one(w).map_err(load_error)?;
        let doc: serde_json::Value = serde_json::from_str(&report.to_json())
            .map_err(|e| RunError::Failed(format!("decoding the result: {e}")))?;
        let prefix = if i == 0 {
            String::new()
        } else {
            format!("workload.{i}.")
        };
        flatten(&prefix, &doc["summary"], &mut out.metrics);
        if doc["complete"] == false {
            return Err(RunError::Failed(format!(
                "incomplete: {}",
                doc["incomplete_reason"]
                    .as_str()
                    .unwrap_or("peer went away")
            )));
        }
        tcplab_load::samples::write(&mut out.samples, &report)
            .map_err(|e| RunError::Failed(format!("writing samples: {e}")))?;
        if out.facts.is_null() {
            out.facts = doc["facts"].clone();
        }
    }
    Ok(out)
}

/// Runs one workload from the client thread against `target`.
pub(crate) fn run_workload(
    w: &Workload,
    target: SocketAddr,
    facts: serde_json::Value,
) -> tcplab_load::Result<Report> {
    let opts = sock_opts(&w.socket);
    match &w.kind {
        WorkloadKind::Msgs(p) => {
            let cfg = tcplab_load::msgs::MsgsConfig {
                count: p.count,
                size: p.size,
                gap_us: p.pace.as_ref().map_or(0, |d| d.ns() / 1_000),
                pattern: match p.pattern {
                    MsgPattern::Write => tcplab_load::msgs::Pattern::Write,
                    MsgPattern::WriteWriteRead => tcplab_load::msgs::Pattern::WriteWriteRead,
                },
                opts,
                ..Default::default()
            };
            tcplab_load::msgs::run_client(&cfg, target, facts).map(Report::Msgs)
        }
        WorkloadKind::Rr(p) => {
            let cfg = tcplab_load::rr::RrConfig {
                req: p.req,
                resp: p.resp,
                depth: p.depth,
                rate: p.rate,
                duration_ms: Some(p.duration.ns() / 1_000_000),
                opts,
                ..Default::default()
            };
            tcplab_load::rr::run_client(&cfg, target, facts).map(Report::Rr)
        }
        WorkloadKind::Crr(p) => {
            let cfg = tcplab_load::crr::CrrConfig {
                concurrency: p.concurrency,
                req: p.req,
                resp: p.resp,
                count: p.count,
                duration_ms: Some(p.duration.ns() / 1_000_000),
                opts,
                ..Default::default()
            };
            tcplab_load::crr::run_client(&cfg, target, facts).map(Report::Crr)
        }
        WorkloadKind::Stream(p) => {
            let cfg = tcplab_load::stream::StreamConfig {
                flows: p.flows,
                direction: match p.direction {
                    StreamDirection::Up => tcplab_load::stream::Direction::Up,
                    StreamDirection::Down => tcplab_load::stream::Direction::Down,
                    StreamDirection::Bidir => tcplab_load::stream::Direction::Bidir,
                },
                duration_ms: if p.bytes.is_some() {
                    None
                } else {
                    Some(p.duration.ns() / 1_000_000)
                },
                bytes: p.bytes,
                opts,
                ..Default::default()
            };
            tcplab_load::stream::run_client(&cfg, target, facts, None).map(Report::Stream)
        }
    }
}

/// The scenario's socket options as the workloads take them (unset: the kernel's default).
fn sock_opts(s: &workload::SockOpts) -> tcplab_load::sockopt::SockOpts {
    tcplab_load::sockopt::SockOpts {
        nodelay: s.nodelay.unwrap_or(false),
        cork: s.cork.unwrap_or(false),
        quickack: s.quickack.unwrap_or(false),
        congestion: s.congestion.clone(),
        sndbuf: s.sndbuf,
        rcvbuf: s.rcvbuf,
        notsent_lowat: s.notsent_lowat,
        rto_min_us: s.rto_min_us,
        delack_max_us: s.delack_max_us,
    }
}

/// `{"a": {"b": 1}}` → `a.b = 1`, numbers only.
fn flatten(prefix: &str, value: &serde_json::Value, out: &mut BTreeMap<String, f64>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                flatten(&format!("{prefix}{k}."), v, out);
            }
        }
        serde_json::Value::Number(n) => {
            if let Some(x) = n.as_f64() {
                out.insert(prefix.trim_end_matches('.').to_string(), x);
            }
        }
        _ => {}
    }
}

/// The emulator's verdict over one run (see `tcplab_lab::emulation::judge`).
pub fn judge(before: &serde_json::Value, after: &serde_json::Value, running: bool) -> Fidelity {
    let f = tcplab_lab::emulation::judge(before, after, running);
    Fidelity {
        trustworthy: f.trustworthy,
        reasons: f.reasons,
    }
}
