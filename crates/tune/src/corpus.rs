//! The doctor's labelled corpus: a file of pathologies, each a lab recipe (impairments, per-host
//! sysctls, what the application does) at several parameter points with its true cause; the
//! runner that builds each lab, runs the battery and the doctor on it, and keeps every battery
//! (with its raw samples) so the corpus can be scored again by a later doctor without
//! re-running a lab.
//!
//! ```toml
//! [defaults]
//! budget = "24s"
//! lab = { topology = "path" }
//!
//! [[case]]
//! name = "sndbuf-small"
//! cause = "sndbuf_limited"          # a finding id, or "healthy"
//! also = []                         # findings also true on this case
//! must_not = ["periodic_stall"]     # look-alikes the case provokes
//! about = "64 KiB send buffers on a long fat path"
//! lab.sysctl.all = { "net.ipv4.tcp_wmem" = "4096 16384 65536" }
//! knobs = { stream_write_size = 65536 }   # battery::Knobs
//! [[case.point]]
//! link = { delay = "20ms", rate = "1gbit" }
//! ```
//!
//! Scoring is `tcplab_doctor::corpus` (pure); this module does the I/O.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tcplab_doctor::corpus::{Label, Outcome};
use tcplab_doctor::{Battery, Finding};
use tcplab_lab::{Lab, Ownership};
use tcplab_results::Report;
use tcplab_study::scenario::{LINK_FIELDS, LabSection, LinkImpairments};

use crate::battery::{self, Knobs, Plan, Target};
use crate::error::{Result, TuneError};

/// A corpus file.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CorpusFile {
    /// What every case starts from.
    #[serde(default)]
    pub defaults: Defaults,
    /// The cases, in order.
    #[serde(rename = "case", default)]
    pub cases: Vec<Case>,
}

/// `[defaults]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// The battery's budget per run, e.g. "24s".
    #[serde(default)]
    pub budget: Option<String>,
    /// The lab every case's own `lab` is laid over.
    #[serde(default)]
    pub lab: LabSection,
    /// Offloads of every case's lab (`on`, `off`, `tso=on,...`; default: the `lab` section's).
    #[serde(default)]
    pub offloads: Option<String>,
}

/// `[[case]]`: one pathology (or a healthy path) and the points it is tried at.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// Short name, unique in the file.
    pub name: String,
    /// The true cause: a finding id, or `healthy`.
    pub cause: String,
    /// Finding ids that are true on this case too.
    #[serde(default)]
    pub also: Vec<String>,
    /// Finding ids that must not be reported.
    #[serde(default)]
    pub must_not: Vec<String>,
    /// What the case is, for a reader.
    #[serde(default)]
    pub about: String,
    /// The lab, laid over `[defaults].lab`.
    #[serde(default)]
    pub lab: LabSection,
    /// Offloads of this case's labs, over `[defaults].offloads`.
    #[serde(default)]
    pub offloads: Option<String>,
    /// What the application does.
    #[serde(default)]
    pub knobs: Knobs,
    /// Write-write-read messages (the Nagle + delayed-ACK trap), 0 for none.
    #[serde(default)]
    pub trap: u64,
    /// The parameter points.
    #[serde(rename = "point", default)]
    pub points: Vec<Point>,
}

/// `[[case.point]]`: the link (and any sysctls) of one run of the case.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Point {
    /// Name in the tables; default: the link's settings.
    #[serde(default)]
    pub name: Option<String>,
    /// Impairments, laid over the case's `[lab.link]`.
    #[serde(default)]
    pub link: LinkImpairments,
    /// Sysctls, laid over the case's: host (or `all`) → key → value.
    #[serde(default)]
    pub sysctl: BTreeMap<String, BTreeMap<String, toml::Value>>,
    /// What the application does at this point, instead of the case's `knobs`.
    #[serde(default)]
    pub knobs: Option<Knobs>,
}

impl CorpusFile {
    /// Reads and checks a corpus file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| TuneError::Invalid {
            field: path.display().to_string(),
            problem: format!("cannot read the corpus: {e}"),
        })?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// Parses and checks a corpus text; errors name the file and the case.
    pub fn parse(name: &str, text: &str) -> Result<Self> {
        let file: CorpusFile = toml::from_str(text).map_err(|e| TuneError::Invalid {
            field: name.to_string(),
            problem: tcplab_lab::file::toml_message(text, &e),
        })?;
        let mut seen = std::collections::BTreeSet::new();
        for case in &file.cases {
            let bad = |problem: String| TuneError::Invalid {
                field: format!("{name}: case {}", case.name),
                problem,
            };
            if !seen.insert(case.name.as_str()) {
                return Err(bad("the name is used twice; names must be unique".into()));
            }
            if case.points.is_empty() {
                return Err(bad("no [[case.point]]: give at least one point".into()));
            }
            for (i, _) in case.points.iter().enumerate() {
                let lab = file.lab_of(case, i).map_err(|e| bad(e.to_string()))?;
                lab.to_spec("check")
                    .map_err(|e| bad(format!("point {}: {e}", i + 1)))?;
            }
        }
        Ok(file)
    }

    /// The budget of one run (default 24 s).
    pub fn budget(&self) -> Result<Duration> {
        let text = self.defaults.budget.as_deref().unwrap_or("24s");
        let ns = tcplab_emu::spec::parse_duration(text).map_err(|e| TuneError::Invalid {
            field: "defaults.budget".into(),
            problem: e.to_string(),
        })?;
        Ok(Duration::from_nanos(ns))
    }

    /// The lab of point `i` of `case`: the defaults, the case's lab, then the point's link and
    /// sysctls, each laid over the one before; the case's offloads, else the defaults'.
    pub fn lab_of(&self, case: &Case, i: usize) -> Result<LabSection> {
        let mut lab = self.defaults.lab.clone();
        lay_over(&mut lab, &case.lab);
        if let Some(p) = case.points.get(i) {
            lay_over(
                &mut lab,
                &LabSection {
                    link: p.link.clone(),
                    sysctl: p.sysctl.clone(),
                    ..LabSection::default()
                },
            );
        }
        if let Some(o) = case.offloads.as_ref().or(self.defaults.offloads.as_ref()) {
            lab.offloads = tcplab_lab::Offloads::parse(o).map_err(tcplab_lab::LabError::from)?;
        }
        Ok(lab)
    }

    /// What the application does at point `i` of `case`.
    pub fn knobs_of(&self, case: &Case, i: usize) -> Knobs {
        case.points
            .get(i)
            .and_then(|p| p.knobs.clone())
            .unwrap_or_else(|| case.knobs.clone())
    }

    /// The label of point `i` of `case`.
    pub fn label(&self, case: &Case, i: usize) -> Label {
        Label {
            case: case.name.clone(),
            point: point_name(case.points.get(i)),
            cause: case.cause.clone(),
            also: case.also.clone(),
            must_not: case.must_not.clone(),
        }
    }
}

/// `top` laid over `base`: its topology, hosts, MTU, bridge, sysctls and set link fields win.
fn lay_over(base: &mut LabSection, top: &LabSection) {
    if top.topology.is_some() {
        base.topology = top.topology;
    }
    if top.hosts.is_some() {
        base.hosts = top.hosts;
    }
    if top.mtu.is_some() {
        base.mtu = top.mtu;
    }
    if top.end_mtu.is_some() {
        base.end_mtu = top.end_mtu;
    }
    if top.offloads != tcplab_lab::Offloads::default() {
        base.offloads = top.offloads;
    }
    if top.bridge != tcplab_lab::BridgeMode::default() {
        base.bridge = top.bridge;
    }
    base.allow_host_sysctl |= top.allow_host_sysctl;
    for (host, keys) in &top.sysctl {
        base.sysctl
            .entry(host.clone())
            .or_default()
            .extend(keys.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let mut top_link = top.link.clone();
    for field in LINK_FIELDS {
        if let (Some(dst), Some(src)) = (base.link.field_mut(field), top_link.field_mut(field)) {
            if src.is_some() {
                *dst = src.take();
            }
        }
    }
}

/// A point's name: its own, else its link settings (`rate=1gbit delay=20ms`).
fn point_name(p: Option<&Point>) -> String {
    let Some(p) = p else {
        return String::new();
    };
    if let Some(n) = &p.name {
        return n.clone();
    }
    let mut link = p.link.clone();
    let parts: Vec<String> = LINK_FIELDS
        .iter()
        .filter_map(|f| {
            link.field_mut(f)
                .and_then(|v| v.take())
                .map(|v| format!("{f}={v}"))
        })
        .collect();
    parts.join(" ")
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
    /// The battery (raw per-message stamps are in `samples`).
    pub battery: Option<Battery>,
    /// Raw samples per battery part (`msgs`, `msgs_sweep`, `rr`, `crr`), samples-file text.
    #[serde(default)]
    pub samples: BTreeMap<String, String>,
    /// Why the run failed, when it did.
    #[serde(default)]
    pub error: Option<String>,
}

impl Record {
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

    /// The doctor's outcome on this record, with the doctor of this build.
    pub fn outcome(&self) -> (Outcome, Vec<Finding>) {
        self.outcome_of(self.battery_with_samples())
    }

    /// The outcome as if the battery had run against a real host (`tcplab doctor --to`): no
    /// emulator (its verdict, impairments and account gone from every result), no configured
    /// path (rate, RTT, loss), only the client side's kernel counters. `None` for a case about
    /// the emulator itself, which a real path cannot have.
    pub fn outcome_blind(&self) -> Option<(Outcome, Vec<Finding>)> {
        if self.label.cause.starts_with("untrustworthy.emulator") {
            return None;
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

/// The raw samples of a battery's parts, as samples-file text.
fn samples_of(b: &Battery) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let parts: [(&str, Option<Report>); 4] = [
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

/// Which runs of the corpus to do.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only cases whose name contains one of these (all when empty).
    pub only: Vec<String>,
}

impl Selection {
    fn wants(&self, case: &Case) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| case.name.contains(o.as_str()))
    }
}

/// Runs the selected cases, writing each run's [`Record`] to `out` as it ends (so a killed run
/// keeps what it did), and returns every outcome in corpus order. `say` gets one line per run.
pub fn run(
    corpus: &CorpusFile,
    selection: &Selection,
    out: &Path,
    say: &dyn Fn(&str),
) -> Result<Vec<Outcome>> {
    std::fs::create_dir_all(out).map_err(|e| TuneError::Invalid {
        field: "--out".into(),
        problem: format!("cannot create {}: {e}", out.display()),
    })?;
    let budget = corpus.budget()?;
    let cases: Vec<&Case> = corpus.cases.iter().filter(|c| selection.wants(c)).collect();
    let total: usize = cases.iter().map(|c| c.points.len()).sum();
    let mut outcomes = Vec::new();
    for case in cases {
        for i in 0..case.points.len() {
            let label = corpus.label(case, i);
            say(&format!(
                "[{}/{total}] {} at {}",
                outcomes.len() + 1,
                case.name,
                label.point
            ));
            let lab = corpus.lab_of(case, i)?;
            let knobs = corpus.knobs_of(case, i);
            let record = run_one(case, label, lab, knobs, budget, outcomes.len());
            write_record(out, &record, &record_name(case, i))?;
            let (outcome, _) = record.outcome();
            say(&format!(
                "    -> {}",
                match (&outcome.error, outcome.reported().as_slice()) {
                    (Some(e), _) => format!("failed: {e}"),
                    (None, []) => "no finding".to_string(),
                    (None, ids) => ids.join(", "),
                }
            ));
            outcomes.push(outcome);
        }
    }
    Ok(outcomes)
}

/// The file name of a run's record.
fn record_name(case: &Case, i: usize) -> String {
    let safe: String = case
        .name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("{safe}.{:02}.json", i + 1)
}

fn run_one(
    case: &Case,
    label: Label,
    lab: LabSection,
    knobs: Knobs,
    budget: Duration,
    n: usize,
) -> Record {
    let mut record = Record {
        label,
        lab: lab.clone(),
        knobs: knobs.clone(),
        battery: None,
        samples: BTreeMap::new(),
        error: None,
    };
    let result = (|| -> Result<Battery> {
        let spec = lab
            .to_spec(&format!("cp{}x{n}", std::process::id() % 10_000))
            .map_err(|e| TuneError::Battery(e.to_string()))?;
        let built = Lab::build(spec, Ownership::Process)?;
        let target = Target::Lab {
            lab: &built,
            client: "client".into(),
            server: "server".into(),
        };
        let mut plan = Plan::for_budget(budget);
        plan.trap_count = case.trap;
        plan.knobs = knobs;
        battery::run(&target, &plan, battery::path_of(Some(&built)), &|_| {})
    })();
    match result {
        Ok(b) => {
            record.samples = samples_of(&b);
            record.battery = Some(b);
        }
        Err(e) => record.error = Some(e.to_string()),
    }
    record
}

fn write_record(out: &Path, record: &Record, name: &str) -> Result<()> {
    let path = out.join(name);
    let text = serde_json::to_string(record).map_err(|e| TuneError::Battery(e.to_string()))?;
    std::fs::write(&path, text).map_err(|e| TuneError::Invalid {
        field: "--out".into(),
        problem: format!("cannot write {}: {e}", path.display()),
    })
}

/// Every record in `dir` (written by [`run`]), sorted by file name.
pub fn load_records(dir: &Path) -> Result<Vec<(PathBuf, Record)>> {
    let bad = |problem: String| TuneError::Invalid {
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
/// (rate, RTT, loss), no lab hosts in the facts, only the client side's kernel counters.
fn as_if_remote(mut b: Battery) -> Battery {
    b.fidelity = None;
    // A run against a real host knows the machine, not a lab's hosts (`tcplab_lab::facts::machine`).
    if let Some(f) = b.facts.as_mut() {
        f.hosts.clear();
    }
    b.path = tcplab_doctor::PathInfo {
        measured_rtt_ms: b.path.measured_rtt_ms,
        ..tcplab_doctor::PathInfo::default()
    };
    for sides in b.counters.values_mut() {
        sides.retain(|side, _| side == "client");
    }
    // An HTTP run records the server host's side itself: a real host's is out of sight.
    if let Some(h) = b.http.as_mut() {
        h.server_counters.clear();
        h.server_time_wait = None;
        h.server = "remote".into();
    }
    let metas = [
        b.stream.as_mut().map(|r| &mut r.meta),
        b.msgs.as_mut().map(|r| &mut r.meta),
        b.msgs_sweep.as_mut().map(|r| &mut r.meta),
        b.rr.as_mut().map(|r| &mut r.meta),
        b.crr.as_mut().map(|r| &mut r.meta),
        b.http.as_mut().map(|r| &mut r.meta),
    ];
    for meta in metas.into_iter().flatten() {
        if let Some(facts) = meta.facts.as_object_mut() {
            facts.remove("emulator");
            facts.remove("hosts");
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"
[defaults]
budget = "20s"
lab = { topology = "path", link = { queue = "1000" } }

[[case]]
name = "sndbuf"
cause = "sndbuf_limited"
must_not = ["periodic_stall"]
lab.sysctl.all = { "net.ipv4.tcp_wmem" = "4096 16384 65536" }
lab.link = { rate = "1gbit" }
knobs = { stream_write_size = 65536 }
[[case.point]]
link = { delay = "20ms" }
[[case.point]]
name = "slow"
link = { delay = "5ms", rate = "100mbit" }
sysctl.server = { "net.ipv4.tcp_rmem" = "4096 131072 6291456" }
"#;

    #[test]
    fn points_lay_over_the_case_and_the_defaults() {
        let c = CorpusFile::parse("t.toml", TEXT).expect("valid");
        assert_eq!(c.budget().expect("budget"), Duration::from_secs(20));
        let case = &c.cases[0];
        let lab = c.lab_of(case, 0).expect("lab");
        assert_eq!(lab.link.queue.as_deref(), Some("1000"));
        assert_eq!(lab.link.rate.as_deref(), Some("1gbit"));
        assert_eq!(lab.link.delay.as_deref(), Some("20ms"));
        let lab = c.lab_of(case, 1).expect("lab");
        assert_eq!(lab.link.rate.as_deref(), Some("100mbit"));
        assert!(lab.sysctl["all"].contains_key("net.ipv4.tcp_wmem"));
        assert!(lab.sysctl["server"].contains_key("net.ipv4.tcp_rmem"));
        assert_eq!(c.label(case, 0).point, "delay=20ms");
        assert_eq!(c.label(case, 1).point, "slow");
        assert_eq!(c.label(case, 1).must_not, ["periodic_stall"]);
        assert_eq!(case.knobs.stream_write_size, Some(65_536));
        let spec = lab.to_spec("t").expect("a lab");
        assert!(spec.emulation.is_some());
    }

    #[test]
    fn bad_corpus_files_name_the_case() {
        let dup = format!("{TEXT}\n[[case]]\nname = \"sndbuf\"\ncause = \"x\"\n[[case.point]]\n");
        let e = CorpusFile::parse("t.toml", &dup)
            .expect_err("dup")
            .to_string();
        assert!(e.contains("case sndbuf") && e.contains("used twice"), "{e}");
        let none = "[[case]]\nname = \"a\"\ncause = \"x\"\n";
        let e = CorpusFile::parse("t.toml", none)
            .expect_err("no point")
            .to_string();
        assert!(e.contains("no [[case.point]]"), "{e}");
        let badlink =
            "[[case]]\nname = \"a\"\ncause = \"x\"\n[[case.point]]\nlink = { delay = \"fast\" }\n";
        let e = CorpusFile::parse("t.toml", badlink)
            .expect_err("bad delay")
            .to_string();
        assert!(e.contains("case a") && e.contains("point 1"), "{e}");
        let unknown = "[[case]]\nname = \"a\"\ncause = \"x\"\nbogus = 1\n";
        assert!(CorpusFile::parse("t.toml", unknown).is_err());
    }

    #[test]
    fn a_record_without_a_battery_scores_as_a_failed_run() {
        let c = CorpusFile::parse("t.toml", TEXT).expect("valid");
        let r = Record {
            label: c.label(&c.cases[0], 0),
            lab: LabSection::default(),
            knobs: Knobs::default(),
            battery: None,
            samples: BTreeMap::new(),
            error: Some("lab failed".into()),
        };
        let (o, f) = r.outcome();
        assert_eq!(o.error.as_deref(), Some("lab failed"));
        assert!(f.is_empty() && !o.top_correct());
    }
}

#[cfg(test)]
mod shipped {
    use super::*;
    use tcplab_doctor::corpus::HEALTHY;

    /// The corpus the benchmark runs: every recipe builds, and it covers what the doctor is
    /// judged on (at least 15 pathologies, each at three or more points; healthy paths).
    #[test]
    fn the_shipped_corpus_is_complete() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../benches/doctor/corpus.toml");
        let c = CorpusFile::load(&path).expect("benches/doctor/corpus.toml parses");
        let sick: Vec<&Case> = c.cases.iter().filter(|k| k.cause != HEALTHY).collect();
        assert!(sick.len() >= 15, "{} pathologies", sick.len());
        for k in &sick {
            assert!(
                k.points.len() >= 3,
                "case {} has {} points",
                k.name,
                k.points.len()
            );
        }
        let healthy: usize = c
            .cases
            .iter()
            .filter(|k| k.cause == HEALTHY)
            .map(|k| k.points.len())
            .sum();
        assert!(healthy >= 9, "{healthy} healthy points");
        // Rates from 10 Mbit/s to 1 Gbit/s and RTTs from 1 to 100 ms appear among the points.
        let mut rates = std::collections::BTreeSet::new();
        let mut delays = std::collections::BTreeSet::new();
        for k in &c.cases {
            for i in 0..k.points.len() {
                let lab = c.lab_of(k, i).expect("lab");
                rates.extend(lab.link.rate.clone());
                delays.extend(lab.link.delay.clone());
            }
        }
        for r in ["10mbit", "100mbit", "1gbit"] {
            assert!(rates.contains(r), "no point at {r}: {rates:?}");
        }
        for d in ["0.5ms", "50ms"] {
            assert!(delays.contains(d), "no point at delay {d}: {delays:?}");
        }
    }

    #[test]
    fn a_blind_battery_has_no_lab_hosts_emulator_or_path() {
        let mut facts = tcplab_lab::facts::machine();
        facts.hosts.insert(
            "client".into(),
            tcplab_results::facts::HostFacts {
                sysctls: Default::default(),
                interfaces: Vec::new(),
            },
        );
        let mut stream = tcplab_results::stream::StreamResult::default();
        stream.meta.facts = serde_json::json!({"emulator": {"x": 1}, "hosts": {"client": {}}});
        let b = Battery {
            facts: Some(facts),
            stream: Some(stream),
            path: tcplab_doctor::PathInfo {
                rate_bps: Some(1e9),
                measured_rtt_ms: Some(20.0),
                ..Default::default()
            },
            ..Battery::default()
        };
        let blind = as_if_remote(b);
        assert!(blind.facts.as_ref().unwrap().hosts.is_empty());
        let meta = &blind.stream.as_ref().unwrap().meta.facts;
        assert!(meta.get("emulator").is_none() && meta.get("hosts").is_none());
        assert_eq!(blind.path.rate_bps, None);
        assert_eq!(blind.path.measured_rtt_ms, Some(20.0));
        // So the doctor does not take a real host for two hosts of an unshaped lab.
        assert!(!tcplab_doctor::Context::new(&blind).unshaped_lab());
    }
}
