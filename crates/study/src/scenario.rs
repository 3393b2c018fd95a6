//! The scenario file (TOML, documented field by field in docs/scenarios.md): the lab, the
//! workloads, the factors to sweep, the baseline, the objective, repetitions and racing.
//!
//! [`ScenarioFile::parse`] keeps the text beside the parsed [`Scenario`] so that later checks
//! (factor names, values, the baseline) can still report the line of what they reject.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use tcplab_lab::spec::BridgeMode;
use tcplab_lab::{Offloads, Topology};
use tcplab_stats::{Objective, TestKind};

use crate::error::{Diagnostic, ScenarioError};
use crate::span::{self, Seg};
use crate::workload::Workload;

/// A whole scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name (used in lab and file names).
    pub name: String,
    /// What the study asks.
    #[serde(default)]
    pub description: String,
    /// The network (none written when it is all defaults: a study against a remote host).
    #[serde(default, skip_serializing_if = "LabSection::is_default")]
    pub lab: LabSection,
    /// What to run in each repetition, in order.
    #[serde(rename = "workload")]
    pub workloads: Vec<Workload>,
    /// Repetitions of every configuration.
    #[serde(default = "default_repetitions")]
    pub repetitions: u32,
    /// What to vary.
    #[serde(default, rename = "factor")]
    pub factors: Vec<FactorSpec>,
    /// How factors combine.
    #[serde(default)]
    pub combine: Combine,
    /// The reference configuration: factor name → value.
    #[serde(default)]
    pub baseline: BTreeMap<String, toml::Value>,
    /// What is better.
    pub objective: ObjectiveSpec,
    /// Fresh lab or reused lab per repetition.
    #[serde(default)]
    pub reset: Reset,
    /// Seed of the run order (the command line may override it).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Racing parameters (used with `--race`).
    #[serde(default)]
    pub race: RaceSection,
    /// What `--quick` does.
    #[serde(default)]
    pub quick: QuickSection,
}

/// A problem [`Scenario::check`] found: the field's path and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where, e.g. `race.alpha` or `lab.link.delay`.
    pub at: Vec<Seg>,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl Scenario {
    /// The checks that need no expansion, on the value alone (a file's text only locates
    /// them): counts, levels, an objective, at least one workload, each workload's values, and
    /// each `[lab.link]` value on its own (combinations wait for the factors, which may supply
    /// a `rate` for a `queue`).
    pub fn check(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        let mut push = |at: &[&str], message: &str| {
            out.push(Problem {
                at: at.iter().map(|k| Seg::Key((*k).to_string())).collect(),
                message: message.to_string(),
            });
        };
        if self.workloads.is_empty() {
            push(
                &["workload"],
                "add at least one [[workload]] (kind = stream, msgs, rr, crr or http)",
            );
        }
        if self.repetitions == 0 {
            push(&["repetitions"], "must be at least 1");
        }
        if self.objective.metric.trim().is_empty() {
            push(
                &["objective", "metric"],
                "name a metric, e.g. \"throughput_bps\" or \"per_message_us.mean\"",
            );
        }
        if self.race.min_reps < 2 {
            push(
                &["race", "min_reps"],
                "must be at least 2 (a test needs a spread)",
            );
        }
        if !(self.race.alpha > 0.0 && self.race.alpha < 1.0) {
            push(
                &["race", "alpha"],
                "must lie strictly between 0 and 1, e.g. 0.05",
            );
        }
        if self.quick.repetitions == 0 {
            push(&["quick", "repetitions"], "must be at least 1");
        }
        if !(self.quick.scale > 0.0 && self.quick.scale <= 1.0) {
            push(&["quick", "scale"], "must lie in (0, 1], e.g. 0.1");
        }
        if self.lab.topology == Some(Topology::Custom) {
            push(
                &["lab", "topology"],
                "custom topologies are not supported in scenarios yet; use pair, path, dumbbell or star",
            );
        }
        if let Err((key, e)) = self.lab.link.check_each(&no_link_files) {
            push(&["lab", "link", key], &e.to_string());
        }
        for (i, w) in self.workloads.iter().enumerate() {
            if let Err(e) = w.check() {
                out.push(Problem {
                    at: vec![Seg::Key("workload".into()), Seg::Index(i)],
                    message: e,
                });
            }
        }
        out
    }
}

fn default_repetitions() -> u32 {
    5
}

fn default_seed() -> u64 {
    1
}

/// `[lab]`: a built-in topology with its options, per-host sysctls and the link impairments.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabSection {
    /// pair, path, dumbbell or star; unset: `path` when the scenario impairs the link
    /// (`[lab.link]` or a `link.*` factor), else `pair`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<Topology>,
    /// Clients (and servers) of a dumbbell, hosts of a star.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<usize>,
    /// Link MTU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// MTU of the end hosts' interfaces when it differs from the links' (an MTU mismatch:
    /// larger frames are dropped silently in the middle, a path-MTU black hole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_mtu: Option<u32>,
    /// TSO/GSO/GRO on lab links (all off unless set).
    #[serde(default)]
    pub offloads: Offloads,
    /// Allow host-global sysctls (journaled and restored).
    #[serde(default)]
    pub allow_host_sysctl: bool,
    /// `[lab.sysctl.HOST]` tables: host (or `all`) → key → value.
    #[serde(default)]
    pub sysctl: BTreeMap<String, BTreeMap<String, toml::Value>>,
    /// What forwards in the middle host: auto (the emulator when `[lab.link]` impairs),
    /// kernel or emu.
    #[serde(default)]
    pub bridge: BridgeMode,
    /// `[lab.link]`: impairments of the emulated link, each key the value of the `tcplab emu`
    /// flag of the same name (`delay = "10ms"`, `rate = "1gbit"`, `A/B` per direction): the
    /// emulator's own flag set, so the file and the flags cannot drift apart.
    #[serde(default)]
    pub link: ImpairmentFlags,
}

impl LabSection {
    /// True when nothing in it differs from its defaults.
    pub fn is_default(&self) -> bool {
        *self == LabSection::default()
    }
}

/// The `[lab.link]` table: the emulator's flag set (its serde form is the table's keys).
pub use tcplab_emu::ImpairmentFlags;

/// The reader a scenario's `[lab.link]` gets for `table:`/`pattern:` values: none, said so. A
/// study is stored, resumed and run on other hosts from its text alone, so a file beside it
/// would not travel with it.
pub fn no_link_files(path: &str) -> Result<String, String> {
    Err(format!(
        "a scenario's [lab.link] reads no files (`{path}` is not stored with the study): write \
         jitter_dist as uniform, normal, pareto or paretonormal, and a loss pattern inline as \
         bits:0001"
    ))
}

/// One `[[factor]]`: a setting and the values it takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactorSpec {
    /// What it sets (see [`crate::factor::Target`] for the addressing scheme), or with
    /// `targets` a free name.
    pub name: String,
    /// Several settings changed together; each value is then an array, one per target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<String>>,
    /// How each value is shown in labels and reports (and named in `baseline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<String>>,
    /// Explicit values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<toml::Value>>,
    /// `"A..B"`: numbers, durations (`1ms..40ms`) or rates (`10mbit..1gbit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<String>,
    /// Points in the range, both ends included (≥ 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<usize>,
    /// Spacing of the range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<Scale>,
}

/// Spacing of a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// Equal differences.
    #[default]
    Linear,
    /// Equal ratios.
    Log,
}

/// How the factors' values combine into configurations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Combine {
    /// Every combination (the cartesian product).
    #[default]
    Cross,
    /// The i-th values of all factors together (all factors need as many values).
    Zip,
}

/// Lab per repetition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reset {
    /// Build a new lab for every run (nothing carries over: caches, metrics, TIME_WAIT).
    #[default]
    Fresh,
    /// Build one lab per configuration and reuse it for its repetitions.
    Reuse,
    /// Build one lab and reuse it across configurations while their topology stays the same,
    /// resetting it before every run: every sysctl a configuration set goes back to the value
    /// the fresh lab had, the run's configuration is applied, the link's impairments are set,
    /// and the TCP metrics cache is flushed. TIME_WAIT sockets of earlier runs remain.
    Reset,
}

/// `objective = { metric = "...", goal = "minimise" }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectiveSpec {
    /// A metric name the executor reports (`throughput_bps`, `per_message_us.mean`, ...).
    pub metric: String,
    /// minimise or maximise.
    pub goal: Objective,
}

/// `[race]`: used when the sweep runs with `--race`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RaceSection {
    /// Repetitions before a configuration can be dropped (≥ 2).
    #[serde(default = "default_min_reps")]
    pub min_reps: usize,
    /// Family-wise level of each racing round (Holm).
    #[serde(default = "default_alpha")]
    pub alpha: f64,
    /// One-sided test: welch or mann_whitney.
    #[serde(default = "default_test")]
    pub test: TestKind,
}

fn default_min_reps() -> usize {
    3
}
fn default_alpha() -> f64 {
    0.05
}
fn default_test() -> TestKind {
    TestKind::Welch
}

impl Default for RaceSection {
    fn default() -> Self {
        RaceSection {
            min_reps: default_min_reps(),
            alpha: default_alpha(),
            test: default_test(),
        }
    }
}

/// `[quick]`: what `--quick` reduces.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuickSection {
    /// Repetitions under `--quick`.
    #[serde(default = "default_quick_reps")]
    pub repetitions: u32,
    /// Multiplier of durations and counts (see [`Workload::scaled`]).
    #[serde(default = "default_quick_scale")]
    pub scale: f64,
}

fn default_quick_reps() -> u32 {
    2
}
fn default_quick_scale() -> f64 {
    0.1
}

impl Default for QuickSection {
    fn default() -> Self {
        QuickSection {
            repetitions: default_quick_reps(),
            scale: default_quick_scale(),
        }
    }
}

/// A parsed scenario with its source, so later checks can point at lines.
#[derive(Debug, Clone)]
pub struct ScenarioFile {
    /// The file name as the user gave it.
    pub path: String,
    /// The file's text.
    pub text: String,
    /// The parsed scenario.
    pub scenario: Scenario,
}

impl ScenarioFile {
    /// Reads and parses a scenario file.
    pub fn load(path: &Path) -> Result<ScenarioFile, ScenarioError> {
        let label = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            diagnostics: vec![Diagnostic {
                file: label.clone(),
                line: None,
                column: None,
                field: String::new(),
                message: format!("cannot read the scenario: {e}"),
            }],
        })?;
        ScenarioFile::parse(&label, &text)
    }

    /// Parses scenario text; `path` names it in errors.
    pub fn parse(path: &str, text: &str) -> Result<ScenarioFile, ScenarioError> {
        let scenario: Scenario = toml::from_str(text).map_err(|e| ScenarioError {
            diagnostics: vec![toml_diagnostic(path, text, &e)],
        })?;
        let file = ScenarioFile {
            path: path.to_string(),
            text: text.to_string(),
            scenario,
        };
        file.check_basics()?;
        Ok(file)
    }

    /// A scenario built as a value (tune's), given the checks a file gets when it is read; its
    /// text is its TOML, the record of what ran (stored with the study), which later
    /// diagnostics point into. `path` names it in errors.
    pub fn from_scenario(path: &str, scenario: Scenario) -> Result<ScenarioFile, ScenarioError> {
        let text = toml::to_string(&scenario).map_err(|e| ScenarioError {
            diagnostics: vec![Diagnostic {
                file: path.to_string(),
                line: None,
                column: None,
                field: String::new(),
                message: format!("cannot write the scenario as TOML: {e}"),
            }],
        })?;
        let file = ScenarioFile {
            path: path.to_string(),
            text,
            scenario,
        };
        file.check_basics()?;
        Ok(file)
    }

    /// The topology to build: as written, or `path` when the link is impaired, else `pair`.
    pub fn topology(&self) -> Topology {
        let s = &self.scenario;
        s.lab.topology.unwrap_or_else(|| {
            let impaired = !s.lab.link.is_empty()
                || s.factors.iter().any(|f| {
                    f.name.starts_with("link.")
                        || f.targets.iter().flatten().any(|t| t.starts_with("link."))
                });
            if impaired {
                Topology::Path
            } else {
                Topology::Pair
            }
        })
    }

    /// A diagnostic for the field at `path`, located in the text.
    pub fn diagnostic(&self, path: &[Seg], message: impl Into<String>) -> Diagnostic {
        let (line, column) = match span::locate(&self.text, path) {
            Some(r) => {
                let (l, c) = span::line_col(&self.text, r.start);
                (Some(l), Some(c))
            }
            None => (None, None),
        };
        Diagnostic {
            file: self.path.clone(),
            line,
            column,
            field: span::render(path),
            message: message.into(),
        }
    }

    /// The checks a scenario gets when it is read ([`Scenario::check`]), each problem located
    /// in the text.
    fn check_basics(&self) -> Result<(), ScenarioError> {
        let out: Vec<Diagnostic> = self
            .scenario
            .check()
            .into_iter()
            .map(|p| self.diagnostic(&p.at, p.message))
            .collect();
        if out.is_empty() {
            Ok(())
        } else {
            Err(ScenarioError { diagnostics: out })
        }
    }

    /// A canonical hash of the scenario (SHA-256 of its parsed form as JSON), so comments and
    /// formatting may change between a study's start and its resume, but no setting may.
    pub fn hash(&self) -> String {
        use sha2::{Digest, Sha256};
        let canonical = serde_json::to_string(&self.scenario).unwrap_or_else(|_| self.text.clone());
        let digest = Sha256::digest(canonical.as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Turns a toml/serde error into a diagnostic with line, field and did-you-mean.
fn toml_diagnostic(file: &str, text: &str, e: &toml::de::Error) -> Diagnostic {
    // toml breaks its own messages with newlines; any other control character is the user's
    // (an unknown variant quoted as typed), shown escaped so the message stays on one line.
    let mut message = String::new();
    for c in e.message().trim_end().chars() {
        match c {
            '\n' => message.push(' '),
            c if c.is_control() => message.extend(c.escape_debug()),
            c => message.push(c),
        }
    }
    if message == "duplicate key"
        && let Some(key) = e.span().and_then(|r| text.get(r)).filter(|k| !k.is_empty())
    {
        message = format!("duplicate key `{}`", key.trim());
    }
    message.push_str(&tcplab_lab::file::toml_fix(&message));
    let mut span = e.span();
    if let Some(unknown) = span::parse_unknown(&message) {
        if unknown.what == "field" {
            // toml's span may cover only the table's header: look inside it first, then in
            // what follows it.
            let found = span.clone().and_then(|r| {
                span::find_key(text, r.clone(), &unknown.word)
                    .or_else(|| span::find_key(text, r.start..text.len(), &unknown.word))
            });
            if let Some(r) = found {
                span = Some(r);
            }
        }
        let hint = span::did_you_mean(&unknown.word, unknown.expected.iter().map(String::as_str));
        message = match hint {
            Some(h) => format!(
                "unknown {} `{}`; did you mean `{h}`?",
                unknown.what, unknown.word
            ),
            None => format!(
                "unknown {} `{}`; expected one of: {}",
                unknown.what,
                unknown.word,
                unknown.expected.join(", ")
            ),
        };
    }
    let (line, column, field) = match span {
        Some(r) => {
            let (l, c) = span::line_col(text, r.start);
            (
                Some(l),
                Some(c),
                span::render(&span::path_at(text, r.start)),
            )
        }
        None => (None, None, String::new()),
    };
    Diagnostic {
        file: file.to_string(),
        line,
        column,
        field,
        message,
    }
}
