//! One run of the corpus as kept on disk ([`Record`]): what is true, how the battery ran
//! (through the lab, or as against a real host), the battery with its raw samples, and for a
//! remote run what the emulator really did (kept for the ground truth, never shown to the
//! doctor). Scored again by the doctor of any later build.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tcplab_doctor::corpus::{Label, Outcome};
use tcplab_doctor::{Battery, Ends, Finding, Knobs, Role};
use tcplab_results::Report;
use tcplab_results::emulator::RunFidelity;
use tcplab_study::scenario::LabSection;

use crate::error::{BatteryError, Result};

/// How a corpus run met its path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Through the lab: the doctor sees the emulator's account, the configured path and both
    /// hosts' facts and counters.
    #[default]
    Emulated,
    /// As a user meets a real path: an agent in the server host, the battery from the client
    /// host against its address, nothing of the lab given to the doctor.
    Remote,
}

/// What the emulator really did over a remote run: kept so a run whose path was not the one
/// labelled (the emulator fell behind) can be told apart, never shown to the doctor.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Truth {
    /// The emulator's verdict over the whole battery, judged at the scale the rules read.
    pub fidelity: Option<RunFidelity>,
}

/// One run as kept on disk: enough to score it again with a later doctor.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// What is true.
    pub label: Label,
    /// The lab it ran on.
    pub lab: LabSection,
    /// What the application did.
    #[serde(default)]
    pub knobs: Knobs,
    /// How the battery met the path (records before remote runs existed are emulated).
    #[serde(default)]
    pub mode: Mode,
    /// The battery (raw per-message stamps are in `samples`).
    pub battery: Option<Battery>,
    /// Raw samples per battery part (`train`, `msgs`, `msgs_sweep`, `rr`, `crr`), samples-file
    /// text.
    #[serde(default)]
    pub samples: BTreeMap<String, String>,
    /// A remote run's ground truth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truth: Option<Truth>,
    /// Why the run failed, when it did.
    #[serde(default)]
    pub error: Option<String>,
}

impl Record {
    /// A record of `label` on `lab` that has not run yet.
    pub fn new(label: Label, lab: LabSection, knobs: Knobs, mode: Mode) -> Self {
        Self {
            label,
            lab,
            knobs,
            mode,
            battery: None,
            samples: BTreeMap::new(),
            truth: None,
            error: None,
        }
    }

    /// Keeps `battery` and its raw samples.
    pub fn keep(&mut self, battery: Battery) {
        self.samples = samples_of(&battery);
        self.battery = Some(battery);
    }

    /// The battery with its raw samples put back, ready for the doctor.
    pub fn battery_with_samples(&self) -> Option<Battery> {
        let mut b = self.battery.clone()?;
        let sections = |part: &str| {
            self.samples
                .get(part)
                .and_then(|t| tcplab_results::samples::parse(t).ok())
                .map(|(_, s)| s)
                .unwrap_or_default()
        };
        if let Some(m) = b.train.as_mut() {
            tcplab_doctor::samples::attach_msgs(m, &sections("train"));
        }
        if let Some(m) = b.msgs.as_mut() {
            tcplab_doctor::samples::attach_msgs(m, &sections("msgs"));
        }
        if let Some(m) = b.msgs_sweep.as_mut() {
            tcplab_doctor::samples::attach_msgs(m, &sections("msgs_sweep"));
        }
        if let Some(r) = b.rr.as_mut() {
            tcplab_doctor::samples::attach_rr(r, &sections("rr"));
        }
        if let Some(c) = b.crr.as_mut() {
            tcplab_doctor::samples::attach_crr(c, &sections("crr"));
        }
        Some(b)
    }

    /// Checks that every part's raw samples read ([`Record::battery_with_samples`] would
    /// otherwise score the part without them): the first that does not, as `samples.PART: why`.
    pub fn check_samples(&self) -> std::result::Result<(), String> {
        for (part, text) in &self.samples {
            if let Err(e) = tcplab_results::samples::parse(text) {
                return Err(format!("samples.{}: {e}", tcplab_emu::error::shown(part)));
            }
        }
        Ok(())
    }

    /// Whether the case is about the emulator itself, which a real path cannot have: a remote
    /// or blind score leaves it out.
    pub fn about_the_emulator(&self) -> bool {
        about_the_emulator(&self.label.cause)
    }

    /// Whether the path of a remote run was not the one labelled: the emulator fell behind
    /// what the rules read.
    pub fn truth_doubtful(&self) -> bool {
        self.truth
            .as_ref()
            .and_then(|t| t.fidelity.as_ref())
            .is_some_and(|f| !f.trustworthy)
    }

    /// The doctor's outcome on this record, with the doctor of this build.
    pub fn outcome(&self) -> (Outcome, Vec<Finding>) {
        self.outcome_of(self.battery_with_samples())
    }

    /// The outcome as if the battery had run against a real host (`tcplab doctor --to`): no
    /// emulator (its verdict, impairments and account gone from every result), no configured
    /// path (rate, RTT, loss), no lab hosts; what an agent reports of its own side (its
    /// counters and host) stays. `None` for a case about the emulator itself, which a real path
    /// cannot have. A remote run is scored as it is.
    pub fn outcome_blind(&self) -> Option<(Outcome, Vec<Finding>)> {
        if self.about_the_emulator() {
            return None;
        }
        if self.mode == Mode::Remote {
            return Some(self.outcome());
        }
        let blind = self.battery_with_samples().map(as_if_remote);
        Some(self.outcome_of(blind))
    }

    fn outcome_of(&self, battery: Option<Battery>) -> (Outcome, Vec<Finding>) {
        match (&self.error, battery) {
            (None, Some(b)) => {
                let findings = tcplab_doctor::diagnose(&b);
                (Outcome::new(self.label.clone(), &findings), findings)
            }
            (error, _) => (
                Outcome {
                    label: self.label.clone(),
                    findings: Vec::new(),
                    error: Some(error.clone().unwrap_or_else(|| "no battery".into())),
                },
                Vec::new(),
            ),
        }
    }
}

/// Whether `cause` is about the emulator itself (`untrustworthy.emulator`), which a run against
/// a real host cannot have.
pub fn about_the_emulator(cause: &str) -> bool {
    cause.starts_with("untrustworthy.emulator")
}

/// The raw samples of a battery's parts, as samples-file text.
fn samples_of(b: &Battery) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let parts: [(&str, Option<Report>); 5] = [
        ("train", b.train.clone().map(Report::Msgs)),
        ("msgs", b.msgs.clone().map(Report::Msgs)),
        ("msgs_sweep", b.msgs_sweep.clone().map(Report::Msgs)),
        ("rr", b.rr.clone().map(Report::Rr)),
        ("crr", b.crr.clone().map(Report::Crr)),
    ];
    for (name, report) in parts {
        let Some(report) = report else { continue };
        let mut text = Vec::new();
        if tcplab_results::samples::write(&mut text, &report).is_ok() {
            out.insert(
                name.to_string(),
                String::from_utf8_lossy(&text).into_owned(),
            );
        }
    }
    out
}

/// The file name of run `i` of the case named `case`.
pub(crate) fn record_name(case: &str, i: usize) -> String {
    let safe: String = case
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("{safe}.{:02}.json", i + 1)
}

/// Writes `record` as `out/name`.
pub(crate) fn write_record(out: &Path, record: &Record, name: &str) -> Result<()> {
    let path = out.join(name);
    let text = serde_json::to_string(record).map_err(|e| BatteryError::Invalid {
        field: "--out".into(),
        problem: format!("cannot encode the record {name}: {e}"),
    })?;
    std::fs::write(&path, text).map_err(|e| BatteryError::Invalid {
        field: "--out".into(),
        problem: format!("cannot write {}: {e}", path.display()),
    })
}

/// Every record in `dir` (written by `tcplab corpus run`), sorted by file name.
pub fn load_records(dir: &Path) -> Result<Vec<(PathBuf, Record)>> {
    let bad = |problem: String| BatteryError::Invalid {
        field: tcplab_emu::error::one_line(&dir.display().to_string()),
        problem,
    };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| {
            bad(format!(
                "cannot read the directory: {e}; give a directory `tcplab corpus run --out DIR` \
                 wrote"
            ))
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && p.file_name()
                    .is_some_and(|n| !n.to_string_lossy().starts_with("scorecard"))
        })
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for p in paths {
        let shown = tcplab_emu::error::one_line(&p.display().to_string());
        let redo = "delete it, or write it again with `tcplab corpus run FILE --out DIR`";
        let bytes = std::fs::read(&p)
            .map_err(|e| bad(format!("cannot read {shown}: {e}; check its permissions")))?;
        let record: Record = serde_json::from_slice(&bytes).map_err(|e| {
            bad(format!(
                "{shown} is not a corpus record ({}); {redo}",
                tcplab_emu::error::one_line(&e.to_string())
            ))
        })?;
        if let Err(e) = record.check_samples() {
            return Err(bad(format!("{shown}: {e}; {redo}")));
        }
        out.push((p, record));
    }
    if out.is_empty() {
        return Err(bad(
            "no corpus records (*.json) here; `tcplab corpus run FILE --out DIR` writes them"
                .into(),
        ));
    }
    Ok(out)
}

/// A battery as a run against a real host (`tcplab doctor --to`) would have recorded it: no
/// emulator (its verdict, impairments and account gone from every result), no configured path
/// (rate, RTT, loss), no lab hosts in the facts. What an agent reports of its own side stays:
/// the server's counters (every report carries them) and its host's facts, which a lab's
/// facts held and the blind battery keeps as the two ends'. The HTTP part, which only runs
/// against a lab's web server, goes.
pub(crate) fn as_if_remote(mut b: Battery) -> Battery {
    b.fidelity = None;
    if let Some(f) = b.facts.as_mut() {
        let host = |role: Role, named: &Option<String>| {
            let name = named.clone().unwrap_or_else(|| match role {
                Role::Client => "client".into(),
                Role::Server => "server".into(),
            });
            f.hosts.get(&name).cloned()
        };
        b.ends = Some(Ends {
            client: host(Role::Client, &b.client_host),
            server: host(Role::Server, &b.server_host),
            ..Ends::default()
        });
        f.hosts.clear();
    }
    b.client_host = None;
    b.server_host = None;
    b.path = tcplab_doctor::PathInfo {
        measured_rtt_ms: b.path.measured_rtt_ms,
        ..tcplab_doctor::PathInfo::default()
    };
    b.http = None;
    b.counters.remove(&tcplab_doctor::PartKind::Http);
    let metas = [
        b.stream.as_mut().map(|r| &mut r.meta),
        b.train.as_mut().map(|r| &mut r.meta),
        b.msgs.as_mut().map(|r| &mut r.meta),
        b.msgs_sweep.as_mut().map(|r| &mut r.meta),
        b.rr.as_mut().map(|r| &mut r.meta),
        b.crr.as_mut().map(|r| &mut r.meta),
    ];
    let rrul = b
        .rrul
        .as_mut()
        .map(|r| [&mut r.meta, &mut r.bulk.meta, &mut r.probes.meta]);
    for meta in metas
        .into_iter()
        .flatten()
        .chain(rrul.into_iter().flatten())
    {
        meta.facts.emulator = None;
        if let Some(machine) = meta.facts.machine.as_mut() {
            machine.hosts.clear();
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcplab_doctor::corpus::Label;

    fn label() -> Label {
        Label {
            case: "sndbuf".into(),
            point: "delay=20ms".into(),
            cause: "sndbuf_limited".into(),
            also: Vec::new(),
            must_not: Vec::new(),
        }
    }

    #[test]
    fn a_record_without_a_battery_scores_as_a_failed_run() {
        let mut r = Record::new(
            label(),
            LabSection::default(),
            Knobs::default(),
            Mode::Emulated,
        );
        r.error = Some("lab failed".into());
        let (o, f) = r.outcome();
        assert_eq!(o.error.as_deref(), Some("lab failed"));
        assert!(f.is_empty() && !o.top_correct());
    }

    #[test]
    fn a_blind_battery_has_no_lab_hosts_emulator_or_path_but_keeps_the_agents_side() {
        let mut facts = tcplab_lab::facts::machine();
        for name in ["client", "server"] {
            let mut host = tcplab_results::facts::HostFacts::default();
            host.sysctls
                .insert("net.ipv4.tcp_rmem".into(), format!("4096 131072 {name}"));
            facts.hosts.insert(name.into(), host);
        }
        let mut stream = tcplab_results::stream::StreamResult::default();
        stream.meta.facts.machine = Some(facts.clone());
        stream.meta.facts.emulator = Some(tcplab_doctor::synth::emulated(
            tcplab_emu::LinkConfig::default(),
            Default::default(),
        ));
        let mut b = Battery {
            facts: Some(facts),
            stream: Some(stream),
            path: tcplab_doctor::PathInfo {
                rate_bps: Some(1e9),
                measured_rtt_ms: Some(20.0),
                ..Default::default()
            },
            http: Some(Default::default()),
            ..Battery::default()
        };
        let side = BTreeMap::from([("TcpExt.ListenOverflows".to_string(), 3u64)]);
        b.counters.insert(
            tcplab_doctor::PartKind::Crr,
            BTreeMap::from([(Role::Server, side)]),
        );
        let blind = as_if_remote(b);
        assert!(blind.facts.as_ref().unwrap().hosts.is_empty());
        let meta = &blind.stream.as_ref().unwrap().meta.facts;
        assert!(meta.emulator.is_none());
        assert!(meta.machine.as_ref().is_some_and(|m| m.hosts.is_empty()));
        assert_eq!(blind.path.rate_bps, None);
        assert_eq!(blind.path.measured_rtt_ms, Some(20.0));
        assert!(blind.http.is_none(), "the HTTP part needs a lab");
        // The agent reports its counters and its host.
        let ctx = tcplab_doctor::Context::new(&blind);
        assert_eq!(
            ctx.counter(
                tcplab_doctor::PartKind::Crr,
                Role::Server,
                "TcpExt.ListenOverflows"
            ),
            Some(3)
        );
        assert_eq!(
            ctx.host_sysctl(Role::Server, "net.ipv4.tcp_rmem"),
            Some("4096 131072 server")
        );
        // So the doctor does not take a real host for two hosts of an unshaped lab.
        assert!(!ctx.unshaped_lab());
    }
}
