//! The doctor's labelled corpus: a file of pathologies, each a lab recipe (impairments, per-host
//! sysctls, what the application does) at several parameter points with its true cause
//! (this module); the runner that builds each lab and runs the battery through it, or as a
//! user meets a real path, `--remote` (`runner`); the kept records, scored again by a later
//! doctor without re-running a lab (`record`); seeded draws of cases at random points, the
//! held-out set the rules are never tuned on (`draw`).
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
//! knobs = { stream_write_size = 65536 }   # tcplab_doctor::Knobs
//! [[case.point]]
//! link = { delay = "20ms", rate = "1gbit" }
//! ```
//!
//! Scoring is `tcplab_doctor::corpus` (pure); this module does the I/O.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tcplab_doctor::Knobs;
use tcplab_doctor::corpus::Label;
use tcplab_study::scenario::{ImpairmentFlags, LabSection};

use crate::error::{BatteryError, Result};

pub mod draw;
pub mod record;
pub mod runner;

pub use record::{Mode, Record, load_records};
pub use runner::run;

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
    pub link: ImpairmentFlags,
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
        let text = std::fs::read_to_string(path).map_err(|e| BatteryError::Invalid {
            field: path.display().to_string(),
            problem: format!("cannot read the corpus: {e}"),
        })?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// Parses and checks a corpus text; errors name the file and the case.
    pub fn parse(name: &str, text: &str) -> Result<Self> {
        let file: CorpusFile = toml::from_str(text).map_err(|e| BatteryError::Invalid {
            field: name.to_string(),
            problem: tcplab_lab::file::toml_message(text, &e),
        })?;
        let mut seen = std::collections::BTreeSet::new();
        for case in &file.cases {
            let bad = |problem: String| BatteryError::Invalid {
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

    /// The corpus as TOML, as a file `CorpusFile::parse` reads back.
    pub fn to_toml(&self) -> Result<String> {
        toml::to_string(self).map_err(|e| BatteryError::Invalid {
            field: "corpus".into(),
            problem: format!("cannot write it as TOML: {e}"),
        })
    }

    /// The budget of one run (default 24 s).
    pub fn budget(&self) -> Result<Duration> {
        let text = self.defaults.budget.as_deref().unwrap_or("24s");
        let ns = tcplab_emu::spec::parse_duration(text).map_err(|e| BatteryError::Invalid {
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
    base.link.overlay(&top.link);
}

/// A point's name: its own, else its link settings (`rate=1gbit delay=20ms`).
fn point_name(p: Option<&Point>) -> String {
    let Some(p) = p else {
        return String::new();
    };
    if let Some(n) = &p.name {
        return n.clone();
    }
    let parts: Vec<String> = p
        .link
        .pairs()
        .into_iter()
        .map(|(f, v)| format!("{f}={v}"))
        .collect();
    parts.join(" ")
}

/// Which runs of the corpus to do.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only cases whose name contains one of these (all when empty).
    pub only: Vec<String>,
}

impl Selection {
    pub(crate) fn wants(&self, case: &Case) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| case.name.contains(o.as_str()))
    }
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
}
