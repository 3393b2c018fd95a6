//! What the doctor says: [`Finding`]s with their [`Evidence`], the samples that show them and
//! the [`Fix`]es, and the `--json` document ([`Diagnosis`]).
//!
//! JSON shape (one document):
//! ```text
//! {"findings": [{"id", "severity", "title", "evidence": [{"figure", "value", "unit", "context"}],
//!                "samples": [{"source", "indices", "total"}], "explanation",
//!                "fix": [{"kind": "sysctl", "key", "value", "scope", "applies_to", "lines"}, ...],
//!                "explained_by"?, "rests_on"?: ["stream", "crr", ...]}]}
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::DoctorError;
use crate::plan::PartKind;

/// How bad a finding is; ordered, so `--fail-on warning` means "warning or worse".
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; nothing to fix.
    #[default]
    Info,
    /// Costs performance on this path; a fix exists.
    Warning,
    /// Dominates the path's performance, or makes requests fail.
    Error,
    /// The measurement itself cannot be trusted; every other finding is suspect.
    Critical,
}

impl Severity {
    /// The lowercase name used on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Info => "info",
            Self::Warning => "warning",
            Self::Error => "error",
            Self::Critical => "critical",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Severity {
    type Err = DoctorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "info" => Ok(Self::Info),
            "warning" | "warn" => Ok(Self::Warning),
            "error" => Ok(Self::Error),
            "critical" => Ok(Self::Critical),
            _ => Err(DoctorError::UnknownSeverity(s.to_string())),
        }
    }
}

/// One figure that supports a finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Figure name, snake_case (e.g. `rwnd_limited_fraction`).
    pub figure: String,
    /// Its value (finite; figures that cannot be computed are left out, never NaN).
    pub value: f64,
    /// Unit (`ms`, `bit/s`, `ticks`, `fraction`, `messages`, ...).
    pub unit: String,
    /// Where it comes from or what it is compared with, for a reader.
    pub context: String,
}

impl Evidence {
    /// A figure; non-finite values become 0 with the context saying so (JSON has no NaN).
    pub fn new(figure: &str, value: f64, unit: &str, context: impl Into<String>) -> Self {
        let mut context = context.into();
        let value = if value.is_finite() {
            value
        } else {
            context.push_str(" (not a finite number; shown as 0)");
            0.0
        };
        Self {
            figure: figure.to_string(),
            value,
            unit: unit.to_string(),
            context,
        }
    }
}

/// The raw samples that show a finding, named as in the samples file (crates/load/SAMPLES.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleRefs {
    /// Which series, e.g. `msgs size=16 message` or `crr connection`.
    pub source: String,
    /// Sample indices (sequence numbers), ascending, at most [`MAX_SAMPLE_REFS`].
    pub indices: Vec<usize>,
    /// How many samples show it in all (indices may be truncated).
    pub total: usize,
}

/// Most indices listed per series: enough to plot or look up, small enough to read.
pub const MAX_SAMPLE_REFS: usize = 100;

impl SampleRefs {
    /// Refs to `indices` of `source`, truncated to [`MAX_SAMPLE_REFS`].
    pub fn new(source: impl Into<String>, indices: impl IntoIterator<Item = usize>) -> Self {
        let mut all: Vec<usize> = indices.into_iter().collect();
        all.sort_unstable();
        all.dedup();
        let total = all.len();
        all.truncate(MAX_SAMPLE_REFS);
        Self {
            source: source.into(),
            indices: all,
            total,
        }
    }
}

/// Where a sysctl applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Per network namespace: set on the host (lab host or machine) concerned only.
    Namespace,
    /// Machine-wide (read-only inside namespaces on 6.x): needs the host and affects everything.
    HostGlobal,
}

/// What a fix changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FixKind {
    /// A sysctl.
    Sysctl {
        /// Dotted key, e.g. `net.ipv4.tcp_rmem`.
        key: String,
        /// The value to write.
        value: String,
        /// Namespace or machine-wide.
        scope: Scope,
    },
    /// A socket option in the application.
    #[serde(rename = "setsockopt")]
    SetSockOpt {
        /// Option name, e.g. `TCP_NODELAY`.
        option: String,
        /// Value to set.
        value: String,
    },
    /// A route attribute (`ip route ... ATTR VALUE`).
    Route {
        /// Attribute, e.g. `quickack` or `rto_min`.
        attr: String,
        /// Its value.
        value: String,
    },
    /// Anything else (application design, another measurement).
    Other {
        /// What to do.
        text: String,
    },
}

/// One concrete change that addresses a finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fix {
    /// The change.
    #[serde(flatten)]
    pub kind: FixKind,
    /// Which side or host it applies to (e.g. `sender (client)`, `host server`).
    pub applies_to: String,
    /// The exact text to apply: sysctl.conf lines, C calls, `ip route` commands, tcplab flags.
    pub lines: Vec<String>,
}

impl Fix {
    /// A sysctl fix whose line is the sysctl.conf form `key = value`.
    pub fn sysctl(key: &str, value: impl Into<String>, scope: Scope, applies_to: &str) -> Self {
        let value = value.into();
        Self {
            lines: vec![format!("{key} = {value}")],
            kind: FixKind::Sysctl {
                key: key.to_string(),
                value,
                scope,
            },
            applies_to: applies_to.to_string(),
        }
    }

    /// A TCP-level socket option (`IPPROTO_TCP`) with the C call and, when tcplab can set it
    /// on its own workloads, the flag.
    pub fn tcp_sockopt(option: &str, value: &str, applies_to: &str, flag: Option<&str>) -> Self {
        let mut lines = vec![format!(
            "setsockopt(fd, IPPROTO_TCP, {option}, &(int){{{value}}}, sizeof(int));"
        )];
        if let Some(flag) = flag {
            lines.push(format!("tcplab {flag}"));
        }
        Self {
            kind: FixKind::SetSockOpt {
                option: option.to_string(),
                value: value.to_string(),
            },
            applies_to: applies_to.to_string(),
            lines,
        }
    }

    /// A route attribute on the route to `dest` (an address) through `dev` when known, set on
    /// the host named by `applies_to`.
    pub fn route(attr: &str, value: &str, dest: &str, dev: Option<&str>, applies_to: &str) -> Self {
        let dev = dev.map_or_else(|| "dev <DEV>".to_string(), |d| format!("dev {d}"));
        Self {
            kind: FixKind::Route {
                attr: attr.to_string(),
                value: value.to_string(),
            },
            applies_to: applies_to.to_string(),
            lines: vec![format!("ip route replace {dest} {dev} {attr} {value}")],
        }
    }

    /// Free-text advice.
    pub fn other(text: &str, applies_to: &str) -> Self {
        Self {
            kind: FixKind::Other {
                text: text.to_string(),
            },
            applies_to: applies_to.to_string(),
            lines: Vec::new(),
        }
    }
}

/// One thing the doctor found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable id: the rule, with a dotted qualifier where one rule finds several things
    /// (e.g. `connection_trouble.port_exhaustion`).
    pub id: String,
    /// How bad.
    pub severity: Severity,
    /// One line for a table.
    pub title: String,
    /// The figures that show it.
    pub evidence: Vec<Evidence>,
    /// The raw samples that show it.
    pub samples: Vec<SampleRefs>,
    /// What is going on and what a user can do, in prose.
    pub explanation: String,
    /// Concrete changes, most direct first.
    #[serde(rename = "fix")]
    pub fixes: Vec<Fix>,
    /// The id of another finding of the same run that explains this one (it was demoted to
    /// info and ranks below it: fix the cause, not the symptom).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explained_by: Option<String>,
    /// The parts of the battery whose results the finding rests on (for a caveat about the
    /// measurement, `untrustworthy.*`, the parts it casts doubt on): a caveat weighs only on
    /// the findings that share a part with it. Empty: not known, so every part.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rests_on: Vec<PartKind>,
}

impl Finding {
    /// A finding with no evidence, samples or fixes yet.
    pub fn new(id: &str, severity: Severity, title: impl Into<String>) -> Self {
        Self {
            id: id.to_string(),
            severity,
            title: title.into(),
            evidence: Vec::new(),
            samples: Vec::new(),
            explanation: String::new(),
            fixes: Vec::new(),
            explained_by: None,
            rests_on: Vec::new(),
        }
    }

    /// The figure named `figure`, if present.
    pub fn figure(&self, figure: &str) -> Option<f64> {
        self.evidence
            .iter()
            .find(|e| e.figure == figure)
            .map(|e| e.value)
    }

    /// Adds a figure.
    pub(crate) fn push(
        &mut self,
        figure: &str,
        value: f64,
        unit: &str,
        context: impl Into<String>,
    ) {
        self.evidence
            .push(Evidence::new(figure, value, unit, context));
    }
}

impl fmt::Display for Finding {
    /// A readable block: severity and title, the figures, the explanation, the fix lines.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "[{}] {} ({})", self.severity, self.title, self.id)?;
        if let Some(cause) = &self.explained_by {
            writeln!(f, "    explained by {cause}: fix that first")?;
        }
        for e in &self.evidence {
            writeln!(
                f,
                "    {:<28} {:>14} {:<9} {}",
                e.figure,
                format_value(e.value),
                e.unit,
                e.context
            )?;
        }
        if !self.explanation.is_empty() {
            writeln!(f, "  {}", self.explanation)?;
        }
        for fix in &self.fixes {
            match &fix.kind {
                FixKind::Other { text } => writeln!(f, "  fix ({}): {text}", fix.applies_to)?,
                _ => {
                    writeln!(f, "  fix ({}):", fix.applies_to)?;
                    for line in &fix.lines {
                        writeln!(f, "      {line}")?;
                    }
                }
            }
        }
        Ok(())
    }
}

fn format_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.4}")
    }
}

/// The doctor's answer, as printed with `--json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    /// Most severe first.
    pub findings: Vec<Finding>,
    /// The path as the battery measured it: the doctor's own estimates, each with how sure it
    /// is and what it was inferred from.
    #[serde(default)]
    pub path: crate::estimate::PathEstimate,
}

impl Diagnosis {
    /// The most severe finding's severity, `None` when there is nothing.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }

    /// True when a finding at or above `threshold` exists (`--fail-on`: exit code 1).
    pub fn fails(&self, threshold: Severity) -> bool {
        self.worst().is_some_and(|w| w >= threshold)
    }

    /// One JSON document (`{"findings": [...]}`).
    pub fn to_json(&self) -> String {
        // Serialising plain structs of strings and finite numbers cannot fail; fall back to
        // an error document rather than panic if it ever does.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| {
            serde_json::json!({ "error": { "message": format!("encoding findings: {e}") } })
                .to_string()
        })
    }
}

impl fmt::Display for Diagnosis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.path.is_empty() {
            writeln!(f, "{}", self.path)?;
        }
        if self.findings.is_empty() {
            return writeln!(f, "no findings: nothing on this path looks wrong");
        }
        for finding in &self.findings {
            writeln!(f, "{finding}")?;
        }
        Ok(())
    }
}
