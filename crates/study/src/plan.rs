//! Expansion: factors → configurations → runs in a seeded, randomised, interleaved order.
//!
//! The order is *blocked*: repetition round r holds every configuration once, shuffled with a
//! ChaCha8 stream seeded from the study's seed, and round r + 1 starts only after round r.
//! Slow drift of the machine (thermal, background load) thus spreads evenly over the
//! configurations instead of favouring whichever ran first, and racing can compare them after
//! every round. The same seed always gives the same order.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use tcplab_lab::{BuiltinOptions, LabSpec, SysctlSetting};

use crate::error::{Diagnostic, ScenarioError};
use crate::factor::{Factor, FactorValue, Settings, Target};
use crate::scenario::{Combine, LabSection, ObjectiveSpec, RaceSection, Reset, ScenarioFile};
use crate::span::Seg;

/// One point of the sweep: a value for each factor and the settings they give.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Configuration {
    /// 0-based, in expansion order (the first factor varies slowest).
    pub id: usize,
    /// `name=value` of each factor, comma-separated (`default` without factors).
    pub label: String,
    /// Factor name and value text, in factor order.
    pub factors: Vec<(String, String)>,
    /// True for the baseline configuration.
    pub is_baseline: bool,
    /// The settings with the factors applied.
    pub settings: Settings,
}

impl Configuration {
    /// The lab to build for this configuration, named `lab_name`, with the emulated link
    /// when `[lab.link]` sets impairments.
    pub fn lab_spec(&self, lab_name: &str) -> Result<LabSpec, SettingsError> {
        self.settings.lab.to_spec(lab_name)
    }

    /// The emulated link, or `None` when `[lab.link]` sets nothing.
    pub fn link_config(&self) -> Result<Option<tcplab_emu::LinkConfig>, SettingsError> {
        self.settings.lab.link_config()
    }
}

impl LabSection {
    /// The lab this section describes, named `lab_name` (`pair` unless a topology is set),
    /// with the emulated link when `[lab.link]` sets impairments; `all` sysctls come first so
    /// a host's own value wins.
    pub fn to_spec(&self, lab_name: &str) -> Result<LabSpec, SettingsError> {
        let mut sysctls = Vec::new();
        let ordered = self
            .sysctl
            .iter()
            .filter(|(h, _)| h.as_str() == "all")
            .chain(self.sysctl.iter().filter(|(h, _)| h.as_str() != "all"));
        for (host, keys) in ordered {
            for (key, value) in keys {
                let value = match value {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Boolean(b) => u8::from(*b).to_string(),
                    other => other.to_string(),
                };
                sysctls.push(SysctlSetting {
                    host: host.clone(),
                    key: key.clone(),
                    value,
                });
            }
        }
        let spec = LabSpec::builtin(&BuiltinOptions {
            name: lab_name.to_string(),
            topology: self.topology.unwrap_or(tcplab_lab::Topology::Pair),
            hosts: self.hosts.unwrap_or(2),
            mtu: self.mtu.unwrap_or(tcplab_lab::spec::DEFAULT_MTU),
            end_mtu: self.end_mtu,
            offloads: self.offloads,
            sysctls,
            allow_host_sysctl: self.allow_host_sysctl,
            bridge: self.bridge,
            link: self.link_config()?,
            tuning: Default::default(),
        })?;
        Ok(spec)
    }

    /// The emulated link, or `None` when `[lab.link]` sets nothing.
    pub fn link_config(&self) -> Result<Option<tcplab_emu::LinkConfig>, SettingsError> {
        if self.link.is_empty() {
            return Ok(None);
        }
        let read = crate::scenario::no_link_files;
        Ok(Some(self.link.to_link_config_with(&read)?))
    }
}

/// A configuration whose settings the lab or the emulator rejects.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// `[lab.link]` does not parse (the emulator's message names the flag).
    #[error("{0}")]
    Link(#[from] tcplab_emu::ConfigError),
    /// The lab rejects the topology, MTU, hosts or sysctls.
    #[error("{0}")]
    Lab(#[from] tcplab_lab::LabError),
}

/// One run: a configuration's repetition at a place in the order.
#[derive(Debug, Clone)]
pub struct PlannedRun {
    /// 0-based position in the study's order.
    pub order: usize,
    /// 0-based repetition of its configuration.
    pub rep: u32,
    /// The configuration.
    pub config: Arc<Configuration>,
    /// Whether the executor must build a fresh lab (always with `reset = "fresh"`; with
    /// `reuse`, only the configuration's first run in this process; never with `reset`, where
    /// the executor rebuilds only when the topology changes).
    pub fresh_lab: bool,
    /// The scenario's `reset`: how the executor may reuse a lab.
    pub reset: Reset,
}

/// Options of the expansion.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlanOptions {
    /// Overrides the scenario's seed.
    pub seed: Option<u64>,
    /// Reduced size (see `[quick]`).
    pub quick: bool,
}

/// The expanded study.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The scenario's name.
    pub name: String,
    /// Every configuration, by id.
    pub configurations: Vec<Arc<Configuration>>,
    /// Every run, in order.
    pub runs: Vec<PlannedRun>,
    /// The order seed used.
    pub seed: u64,
    /// Whether `--quick` reduced it.
    pub quick: bool,
    /// Repetitions per configuration.
    pub repetitions: u32,
    /// Lab per repetition.
    pub reset: Reset,
    /// What is better.
    pub objective: ObjectiveSpec,
    /// Racing parameters (used with `--race`).
    pub race: RaceSection,
    /// The scenario's canonical hash (see [`ScenarioFile::hash`]).
    pub scenario_hash: String,
    /// The scenario's text, stored with the results.
    pub scenario_text: String,
}

/// The baseline's resolved values: matched against the grid, or applied on their own.
struct Baseline {
    values: Vec<Chosen>,
}

impl Plan {
    /// Every configuration's short label, by id: only the factors that vary, abbreviated as the
    /// report abbreviates them (`rmem=7.6M cc=bbr`), so progress lines name a configuration
    /// as its table row will, instead of a raw key cut short (`sysctl.all."net.i`).
    pub fn short_labels(&self) -> Vec<String> {
        let factors: Vec<BTreeMap<String, String>> = self
            .configurations
            .iter()
            .map(|c| c.factors.iter().cloned().collect())
            .collect();
        let order: Vec<String> = self
            .configurations
            .first()
            .map(|c| c.factors.iter().map(|(name, _)| name.clone()).collect())
            .unwrap_or_default();
        let refs: Vec<&BTreeMap<String, String>> = factors.iter().collect();
        tcplab_report::label::short_labels(&refs, &order).0
    }

    /// Expands a scenario; every problem is reported with its line and field.
    pub fn new(file: &ScenarioFile, opts: PlanOptions) -> Result<Plan, ScenarioError> {
        let s = &file.scenario;
        let hosts = host_names(file);
        let mut diags = Vec::new();
        let mut factors: Vec<Factor> = Vec::new();
        for (i, f) in s.factors.iter().enumerate() {
            match Factor::from_spec(f, &s.workloads, &hosts) {
                Ok(factor) => factors.push(factor),
                Err(errors) => diags.extend(errors.into_iter().map(|e| {
                    let at = [
                        Seg::Key("factor".into()),
                        Seg::Index(i),
                        Seg::Key(e.field.into()),
                    ];
                    file.diagnostic(&at, e.message)
                })),
            }
        }
        if !diags.is_empty() {
            diags.extend(unknown_baseline_keys(file));
            return Err(ScenarioError { diagnostics: diags });
        }
        check_size(file, &factors, opts.quick)?;
        let points = combine(file, &factors)?;
        let baseline = baseline_of(file, &factors)?;
        let configurations = build_configurations(file, &factors, &points, baseline)?;
        let quick = opts.quick;
        let repetitions = if quick {
            s.quick.repetitions
        } else {
            s.repetitions
        };
        let configurations: Vec<Arc<Configuration>> = configurations
            .into_iter()
            .map(|mut c| {
                if quick {
                    c.settings.workloads = c
                        .settings
                        .workloads
                        .iter()
                        .map(|w| w.scaled(s.quick.scale))
                        .collect();
                }
                Arc::new(c)
            })
            .collect();
        let seed = opts.seed.unwrap_or(s.seed);
        let runs = order_runs(&configurations, repetitions, seed, s.reset);
        Ok(Plan {
            name: s.name.clone(),
            configurations,
            runs,
            seed,
            quick,
            repetitions,
            reset: s.reset,
            objective: s.objective.clone(),
            race: s.race,
            scenario_hash: file.hash(),
            scenario_text: file.text.clone(),
        })
    }

    /// The plan restricted to one configuration's runs (`tcplab run FILE --config ID`), in
    /// the same order and with the same positions, so it can share the study's store.
    pub fn only(&self, config_id: usize) -> Option<Plan> {
        self.configurations.get(config_id)?;
        let mut plan = self.clone();
        plan.runs.retain(|r| r.config.id == config_id);
        Some(plan)
    }

    /// The baseline configuration, if the scenario names one.
    pub fn baseline(&self) -> Option<&Arc<Configuration>> {
        self.configurations.iter().find(|c| c.is_baseline)
    }

    /// Estimated wall time: workloads' stated durations plus a lab setup allowance
    /// (`lab_setup` per fresh lab).
    pub fn estimate(&self, lab_setup: Duration) -> Duration {
        let secs: f64 = self
            .runs
            .iter()
            .map(|r| {
                let work: f64 = r
                    .config
                    .settings
                    .workloads
                    .iter()
                    .map(|w| w.estimated_secs())
                    .sum();
                work + if r.fresh_lab {
                    lab_setup.as_secs_f64()
                } else {
                    0.0
                }
            })
            .sum();
        Duration::from_secs_f64(secs)
    }

    /// The `--dry-run` listing: configurations, then runs in order, then the estimate.
    pub fn dry_run(&self) -> String {
        let mut out = format!(
            "study {}: {} configuration(s) x {} repetition(s) = {} runs, seed {}{}\n",
            self.name,
            self.configurations.len(),
            self.repetitions,
            self.runs.len(),
            self.seed,
            if self.quick { ", quick" } else { "" }
        );
        for c in &self.configurations {
            let mark = if c.is_baseline { " (baseline)" } else { "" };
            out.push_str(&format!("  config {:>3}: {}{mark}\n", c.id, c.label));
        }
        out.push_str("runs in order:\n");
        for r in &self.runs {
            let lab = match (r.fresh_lab, r.reset) {
                (true, _) => "fresh lab",
                (false, Reset::Reset) => "reset lab",
                (false, _) => "reused lab",
            };
            out.push_str(&format!(
                "  {:>5}  config {:>3} rep {:>2}  {lab}\n",
                r.order, r.config.id, r.rep
            ));
        }
        let est = self.estimate(Duration::from_millis(500));
        out.push_str(&format!(
            "estimated time: {} (workloads as stated, 0.5 s per fresh lab)\n",
            human_duration(est)
        ));
        out
    }
}

/// `1h 02m 03s`, `4m 05s`, `12.3s`.
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h {:02}m {:02}s", s / 3600, s % 3600 / 60, s % 60)
    } else if s >= 60 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

fn host_names(file: &ScenarioFile) -> Vec<String> {
    let lab = &file.scenario.lab;
    file.topology().host_names(lab.hosts.unwrap_or(2))
}

/// Index tuples (one value index per factor) of every configuration.
/// Most configurations one study may plan: each is built and stored before the first run.
pub const MAX_CONFIGURATIONS: u128 = 10_000;
/// Most runs one study may plan: a hundred thousand runs of a second each is more than a day.
pub const MAX_RUNS: u128 = 100_000;

/// Refuses a study whose factors and repetitions multiply past [`MAX_CONFIGURATIONS`] or
/// [`MAX_RUNS`] before anything is expanded: five ranges of 10,000 steps cross into 10^20
/// configurations.
fn check_size(file: &ScenarioFile, factors: &[Factor], quick: bool) -> Result<(), ScenarioError> {
    let s = &file.scenario;
    let counts = factors.iter().map(|f| f.values.len() as u128);
    let configurations = match s.combine {
        Combine::Cross => counts.fold(1u128, |a, n| a.saturating_mul(n)),
        Combine::Zip => counts.max().unwrap_or(1),
    };
    let repetitions = u128::from(if quick {
        s.quick.repetitions
    } else {
        s.repetitions
    });
    let runs = configurations.saturating_mul(repetitions);
    let (at, message) = if configurations > MAX_CONFIGURATIONS {
        (
            Seg::Key("factor".into()),
            format!(
                "the factors give {configurations} configurations, at most {MAX_CONFIGURATIONS} \
                 are planned: use fewer values or steps, fewer factors, or combine = \"zip\""
            ),
        )
    } else if runs > MAX_RUNS {
        (
            Seg::Key("repetitions".into()),
            format!(
                "{configurations} configurations × {repetitions} repetitions = {runs} runs, at \
                 most {MAX_RUNS} are planned: use fewer repetitions, values or steps"
            ),
        )
    } else {
        return Ok(());
    };
    Err(ScenarioError {
        diagnostics: vec![file.diagnostic(&[at], message)],
    })
}

fn combine(file: &ScenarioFile, factors: &[Factor]) -> Result<Vec<Vec<usize>>, ScenarioError> {
    if factors.is_empty() {
        return Ok(vec![Vec::new()]);
    }
    match file.scenario.combine {
        Combine::Cross => {
            let mut points: Vec<Vec<usize>> = vec![Vec::new()];
            for values in factors.iter().map(|f| &f.values) {
                points = points
                    .into_iter()
                    .flat_map(|p| {
                        (0..values.len()).map(move |i| {
                            let mut q = p.clone();
                            q.push(i);
                            q
                        })
                    })
                    .collect();
            }
            Ok(points)
        }
        Combine::Zip => {
            let n = factors[0].values.len();
            let mut diags = Vec::new();
            for (i, f) in factors.iter().enumerate().skip(1) {
                let values = &f.values;
                if values.len() != n {
                    let name = &file.scenario.factors[i].name;
                    let first = &file.scenario.factors[0].name;
                    diags.push(file.diagnostic(
                        &[Seg::Key("factor".into()), Seg::Index(i), Seg::Key("name".into())],
                        format!("combine = \"zip\" needs equal lengths: `{name}` has {} values, `{first}` has {n}", values.len()),
                    ));
                }
            }
            if !diags.is_empty() {
                return Err(ScenarioError { diagnostics: diags });
            }
            Ok((0..n).map(|i| vec![i; factors.len()]).collect())
        }
    }
}

/// Baseline keys that name no factor (checked even when a factor is itself invalid, so one
/// pass reports both).
fn unknown_baseline_keys(file: &ScenarioFile) -> Vec<Diagnostic> {
    let names: Vec<&str> = file
        .scenario
        .factors
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    file.scenario
        .baseline
        .keys()
        .filter(|k| !names.contains(&k.as_str()))
        .map(|key| {
            let hint = crate::span::did_you_mean(key, names.iter().copied())
                .map(|h| format!("; did you mean `{h}`?"))
                .unwrap_or_else(|| format!("; use one of the factors: {}", names.join(", ")));
            let at = [Seg::Key("baseline".into()), Seg::Key(key.clone())];
            file.diagnostic(&at, format!("`{key}` is not a factor{hint}"))
        })
        .collect()
}

/// Reads `baseline = { ... }`: every key must be a factor name, every value one of the
/// factor's values or labels (or, for a single-target factor, a value of its own).
fn baseline_of(file: &ScenarioFile, factors: &[Factor]) -> Result<Option<Baseline>, ScenarioError> {
    let s = &file.scenario;
    if s.baseline.is_empty() {
        return Ok(None);
    }
    let names: Vec<&str> = factors.iter().map(|f| f.name.as_str()).collect();
    let mut values = Vec::new();
    let mut diags = Vec::new();
    for (key, value) in &s.baseline {
        let at = [Seg::Key("baseline".into()), Seg::Key(key.clone())];
        if let Some(i) = names.iter().position(|n| n == key) {
            match factors[i].resolve(&FactorValue(value.clone())) {
                Ok((label, v)) => values.push((i, label, v)),
                Err(e) => diags.push(file.diagnostic(&at, format!("baseline for `{key}`: {e}"))),
            }
        }
    }
    diags.extend(unknown_baseline_keys(file));
    if !diags.is_empty() {
        return Err(ScenarioError { diagnostics: diags });
    }
    values.sort_by_key(|(i, _, _)| *i);
    Ok(Some(Baseline { values }))
}

fn build_configurations(
    file: &ScenarioFile,
    factors: &[Factor],
    points: &[Vec<usize>],
    baseline: Option<Baseline>,
) -> Result<Vec<Configuration>, ScenarioError> {
    let mut lab = file.scenario.lab.clone();
    lab.topology = Some(file.topology());
    let base = Settings {
        lab,
        workloads: file.scenario.workloads.clone(),
    };
    let mut out = Vec::new();
    let mut problems: Vec<Problem> = Vec::new();
    let mut baseline_found = false;
    for point in points {
        let chosen: Vec<Chosen> = point
            .iter()
            .enumerate()
            .map(|(f, &v)| {
                (
                    f,
                    factors[f].labels[v].clone(),
                    factors[f].values[v].clone(),
                )
            })
            .collect();
        let is_baseline = !baseline_found
            && baseline.as_ref().is_some_and(|b| {
                b.values
                    .iter()
                    .all(|(f, label, _)| chosen.get(*f).is_some_and(|(_, l, _)| l == label))
            });
        baseline_found |= is_baseline;
        match configuration(factors, &base, &chosen, out.len(), is_baseline) {
            Ok(c) => out.push(c),
            Err(p) => problems.extend(p),
        }
    }
    if let Some(b) = baseline.filter(|_| !baseline_found) {
        match configuration(factors, &base, &b.values, out.len(), true) {
            Ok(mut c) => {
                c.label = format!("baseline: {}", c.label);
                out.push(c);
            }
            Err(p) => problems.extend(p),
        }
    }
    if !problems.is_empty() {
        return Err(ScenarioError {
            diagnostics: merge(file, problems),
        });
    }
    Ok(out)
}

/// A factor's index, its value's label and the value.
type Chosen = (usize, String, FactorValue);

fn factor_name_at(f: usize) -> Vec<Seg> {
    vec![
        Seg::Key("factor".into()),
        Seg::Index(f),
        Seg::Key("name".into()),
    ]
}

/// A problem with one configuration, before it is merged with the same problem elsewhere.
struct Problem {
    at: Vec<Seg>,
    /// `lab` or `[lab.link]` for validation of the whole configuration; `None` when `error`
    /// already names the factor and value.
    context: Option<&'static str>,
    error: String,
    config: String,
}

/// One diagnostic per distinct problem: a lab error that hits 12 configurations is reported
/// once, naming the first and counting the others.
fn merge(file: &ScenarioFile, problems: Vec<Problem>) -> Vec<Diagnostic> {
    let mut groups: Vec<(Problem, usize)> = Vec::new();
    for p in problems {
        match groups
            .iter_mut()
            .find(|(g, _)| g.at == p.at && g.context == p.context && g.error == p.error)
        {
            Some((_, n)) => *n += 1,
            None => groups.push((p, 0)),
        }
    }
    groups
        .into_iter()
        .map(|(p, more)| {
            let message = match p.context {
                None => p.error,
                Some(ctx) => {
                    let others = match more {
                        0 => String::new(),
                        n => format!(" (and {n} more)"),
                    };
                    format!("{ctx} in configuration `{}`{others}: {}", p.config, p.error)
                }
            };
            file.diagnostic(&p.at, message)
        })
        .collect()
}

/// Applies the chosen values to the base settings and checks the result with the lab's and
/// the emulator's own validation, naming the factor on failure.
fn configuration(
    factors: &[Factor],
    base: &Settings,
    chosen: &[Chosen],
    id: usize,
    is_baseline: bool,
) -> Result<Configuration, Vec<Problem>> {
    let mut settings = base.clone();
    let mut problems = Vec::new();
    let mut labels = Vec::new();
    let mut pairs = Vec::new();
    for (f, label, value) in chosen {
        let name = &factors[*f].name;
        labels.push(format!("{name}={label}"));
        pairs.push((name.clone(), label.clone()));
        if let Err(e) = factors[*f].apply(&mut settings, value) {
            problems.push(Problem {
                at: factor_name_at(*f),
                context: None,
                error: format!("factor `{name}` = {value}: {e}"),
                config: String::new(),
            });
        }
    }
    let config = Configuration {
        id,
        label: if labels.is_empty() {
            "default".to_string()
        } else {
            labels.join(", ")
        },
        factors: pairs,
        is_baseline,
        settings,
    };
    if problems.is_empty() {
        let culprit = |want: fn(&Target) -> bool| -> Vec<Seg> {
            chosen
                .iter()
                .find(|(f, _, _)| factors[*f].targets.iter().any(want))
                .map(|(f, _, _)| factor_name_at(*f))
                .unwrap_or_else(|| vec![Seg::Key("lab".into())])
        };
        let problem = match config.lab_spec("check") {
            Ok(_) => None,
            Err(SettingsError::Link(e)) => Some((
                link_culprit(factors, chosen, &e.to_string())
                    .unwrap_or_else(|| culprit(|t| matches!(t, Target::Link(_)))),
                "[lab.link]",
                e.to_string(),
            )),
            Err(SettingsError::Lab(e)) => Some((
                culprit(|t| matches!(t, Target::Lab(_) | Target::Sysctl { .. } | Target::Link(_))),
                "lab",
                e.to_string(),
            )),
        };
        if let Some((at, context, error)) = problem {
            problems.push(Problem {
                at,
                context: Some(context),
                error,
                config: config.label.clone(),
            });
        }
    }
    if problems.is_empty() {
        Ok(config)
    } else {
        Err(problems)
    }
}

/// The factor whose link field the emulator's message names (`--delay 10 lightyears: ...`).
fn link_culprit(factors: &[Factor], chosen: &[Chosen], message: &str) -> Option<Vec<Seg>> {
    chosen
        .iter()
        .find(|(f, _, _)| {
            factors[*f].targets.iter().any(|t| match t {
                Target::Link(field) => {
                    let flag = tcplab_emu::ImpairmentFlags::flag(field);
                    message.starts_with(&format!("{flag} "))
                        || message.starts_with(&format!("{flag}:"))
                }
                _ => false,
            })
        })
        .map(|(f, _, _)| factor_name_at(*f))
}

/// The blocked, shuffled order described in the module documentation.
pub fn order_runs(
    configs: &[Arc<Configuration>],
    repetitions: u32,
    seed: u64,
    reset: Reset,
) -> Vec<PlannedRun> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut runs = Vec::with_capacity(configs.len() * repetitions as usize);
    for rep in 0..repetitions {
        let mut round: Vec<usize> = (0..configs.len()).collect();
        round.shuffle(&mut rng);
        for id in round {
            runs.push(PlannedRun {
                order: runs.len(),
                rep,
                config: Arc::clone(&configs[id]),
                fresh_lab: match reset {
                    Reset::Fresh => true,
                    Reset::Reuse => rep == 0,
                    Reset::Reset => runs.is_empty(),
                },
                reset,
            });
        }
    }
    runs
}
