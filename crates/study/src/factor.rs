//! Factors: what a `[[factor]]` name addresses, the values it takes, and how a value is
//! applied to a configuration's settings.
//!
//! # Addressing scheme
//! | name | sets |
//! |---|---|
//! | `sysctl.HOST."KEY"` (or `sysctl.HOST.KEY`) | the sysctl KEY on host HOST (`all` = every host), e.g. `sysctl.client."net.ipv4.tcp_rmem"` |
//! | `link.FIELD` | a `[lab.link]` impairment (`delay`, `rate`, `loss`, `queue`, ... in emu flag syntax) |
//! | `workload.FIELD` | a parameter of every workload that has it (`size`, `count`, `duration`, `flows`, ...) |
//! | `workload.N.FIELD` | the same, for the N-th `[[workload]]` only (0-based) |
//! | `socket.OPT` | a socket option of every workload (`nodelay`, `cork`, `congestion`, `sndbuf`, ...) |
//! | `lab.mtu`, `lab.hosts`, `lab.offloads` | the lab's MTU, host count, offloads (`on`, `off`, `tso=on,gro=off`) |
//!
//! Range values (`range = "1ms..40ms"`, `steps`, `scale`) are generated in the unit family of
//! the endpoints: plain numbers (integers stay integers), durations, or rates.

use std::fmt;

use tcplab_lab::Offloads;

use crate::scenario::{FactorSpec, ImpairmentFlags, LabSection, Scale};
use tcplab_results::spec::{keys, socket_keys};

use crate::workload::Workload;

/// The settings a configuration runs with: the lab and the workloads, factors applied.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Settings {
    /// The lab section.
    pub lab: LabSection,
    /// The workloads.
    pub workloads: Vec<Workload>,
}

/// What a factor name addresses (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A sysctl on one host or `all`.
    Sysctl {
        /// Host name or `all`.
        host: String,
        /// Dotted key.
        key: String,
    },
    /// A field of `[lab.link]`.
    Link(String),
    /// A workload parameter or socket option; `index` limits it to one workload.
    Workload {
        /// Only this workload (0-based), or every one that has the field.
        index: Option<usize>,
        /// The field.
        field: String,
    },
    /// A socket option of every workload.
    Socket(String),
    /// `lab.mtu`, `lab.hosts` or `lab.offloads`.
    Lab(String),
}

/// Prefixes of factor names, for did-you-mean.
pub const PREFIXES: &[&str] = &["sysctl", "link", "workload", "socket", "lab"];
/// Fields of `lab.*` factors.
pub const LAB_FIELDS: &[&str] = &["mtu", "hosts", "offloads"];

/// A factor name that does not address anything, with the nearest valid spelling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameError {
    /// The problem.
    pub message: String,
}

fn unknown(what: &str, word: &str, valid: &[&str]) -> NameError {
    let message = match crate::span::did_you_mean(word, valid.iter().copied()) {
        Some(h) => format!("unknown {what} `{word}`; did you mean `{h}`?"),
        None => format!("unknown {what} `{word}`; use one of: {}", valid.join(", ")),
    };
    NameError { message }
}

impl Target {
    /// Parses a factor name against the scenario's workloads and host names.
    pub fn parse(
        name: &str,
        workloads: &[Workload],
        hosts: &[String],
    ) -> Result<Target, NameError> {
        let (prefix, rest) = name.split_once('.').unwrap_or((name, ""));
        let need = |what: &str| NameError {
            message: format!("`{name}` needs a {what} after `{prefix}.`"),
        };
        match prefix {
            "sysctl" => {
                let (host, key) = rest.split_once('.').ok_or_else(|| need("HOST.\"KEY\""))?;
                let key = key.trim_matches('"');
                if key.is_empty() {
                    return Err(need("key"));
                }
                if host != "all" && !hosts.iter().any(|h| h == host) {
                    let mut valid: Vec<&str> = hosts.iter().map(String::as_str).collect();
                    valid.push("all");
                    return Err(unknown("host", host, &valid));
                }
                Ok(Target::Sysctl {
                    host: host.to_string(),
                    key: key.to_string(),
                })
            }
            "link" if ImpairmentFlags::FIELDS.contains(&rest) => Ok(Target::Link(rest.to_string())),
            "link" => Err(unknown("link field", rest, ImpairmentFlags::FIELDS)),
            "socket" if socket_keys().contains(&rest) => Ok(Target::Socket(rest.to_string())),
            "socket" => Err(unknown("socket option", rest, socket_keys())),
            "lab" if LAB_FIELDS.contains(&rest) => Ok(Target::Lab(rest.to_string())),
            "lab" => Err(unknown("lab field", rest, LAB_FIELDS)),
            "workload" => parse_workload(rest, workloads)
                .ok_or_else(|| need("FIELD"))
                .and_then(|r| r),
            _ => Err(unknown("factor prefix", prefix, PREFIXES)),
        }
    }
}

fn parse_workload(rest: &str, workloads: &[Workload]) -> Option<Result<Target, NameError>> {
    if rest.is_empty() {
        return None;
    }
    let (index, field) = match rest.split_once('.') {
        Some((n, f)) if n.chars().all(|c| c.is_ascii_digit()) => (n.parse::<usize>().ok(), f),
        _ => (None, rest),
    };
    let chosen: Vec<&Workload> = match index {
        Some(i) => match workloads.get(i) {
            Some(w) => vec![w],
            None => {
                return Some(Err(NameError {
                    message: format!(
                        "workload index {i} is out of range: the scenario has {} [[workload]] entries (0-based)",
                        workloads.len()
                    ),
                }));
            }
        },
        None => workloads.iter().collect(),
    };
    let mut valid: Vec<&str> = Vec::new();
    for w in &chosen {
        valid.extend(
            keys(w.kind())
                .iter()
                .filter(|k| !matches!(**k, "kind" | "socket")),
        );
    }
    if !valid.contains(&field) {
        return Some(Err(unknown("workload field", field, &valid)));
    }
    Some(Ok(Target::Workload {
        index,
        field: field.to_string(),
    }))
}

/// A factor ready to apply: its targets, its values and their labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Factor {
    /// The name as written (a target, or any name when `targets` is given).
    pub name: String,
    /// What each value sets: one target, or several set together (`targets = [...]`, each
    /// value then an array with one element per target).
    pub targets: Vec<Target>,
    /// The values.
    pub values: Vec<FactorValue>,
    /// How each value is shown (`labels`, else the value's text).
    pub labels: Vec<String>,
}

/// A problem with one field of a `[[factor]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactorError {
    /// The field: `name`, `targets`, `values`, `range`, `labels`.
    pub field: &'static str,
    /// The message.
    pub message: String,
}

impl Factor {
    /// Checks a `[[factor]]` against the scenario's workloads and host names.
    pub fn from_spec(
        spec: &FactorSpec,
        workloads: &[Workload],
        hosts: &[String],
    ) -> Result<Factor, Vec<FactorError>> {
        let mut errors = Vec::new();
        let names: Vec<&str> = match &spec.targets {
            Some(t) if t.is_empty() => {
                errors.push(FactorError {
                    field: "targets",
                    message: "`targets` is empty: list the settings this factor sets".into(),
                });
                Vec::new()
            }
            Some(t) => t.iter().map(String::as_str).collect(),
            None => vec![spec.name.as_str()],
        };
        let field = if spec.targets.is_some() {
            "targets"
        } else {
            "name"
        };
        let mut targets = Vec::new();
        for n in names {
            match Target::parse(n, workloads, hosts) {
                Ok(t) => targets.push(t),
                Err(e) => errors.push(FactorError {
                    field,
                    message: e.message,
                }),
            }
        }
        let values = values_of(spec).map_err(|message| FactorError {
            field: if spec.range.is_some() {
                "range"
            } else {
                "values"
            },
            message: format!("factor `{}`: {message}", spec.name),
        });
        let values = match values {
            Ok(v) => v,
            Err(e) => {
                errors.push(e);
                Vec::new()
            }
        };
        if targets.len() > 1 {
            for v in &values {
                if v.0.as_array().is_none_or(|a| a.len() != targets.len()) {
                    errors.push(FactorError {
                        field: "values",
                        message: format!("factor `{}` sets {} targets, so each value must be an array of {} (got `{}`)", spec.name, targets.len(), targets.len(), v.0),
                    });
                    break;
                }
            }
        }
        let labels = match &spec.labels {
            Some(l) if l.len() != values.len() && !values.is_empty() => {
                errors.push(FactorError {
                    field: "labels",
                    message: format!(
                        "{} labels for {} values: give one label per value",
                        l.len(),
                        values.len()
                    ),
                });
                Vec::new()
            }
            Some(l) => l.clone(),
            None => values.iter().map(FactorValue::text).collect(),
        };
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Factor {
            name: spec.name.clone(),
            targets,
            values,
            labels,
        })
    }

    /// Sets this factor to `value` (one of its values, or a baseline value).
    pub fn apply(&self, settings: &mut Settings, value: &FactorValue) -> Result<(), String> {
        match (self.targets.as_slice(), &value.0) {
            ([one], _) => apply(settings, one, value),
            (many, toml::Value::Array(items)) if items.len() == many.len() => {
                for (t, v) in many.iter().zip(items) {
                    apply(settings, t, &FactorValue(v.clone()))?;
                }
                Ok(())
            }
            (many, other) => Err(format!(
                "`{other}` is not an array of {} values (one per target)",
                many.len()
            )),
        }
    }

    /// The (label, value) a baseline entry stands for: one of the factor's values, found by
    /// its label or its text, or for a single-target factor any value of its own.
    pub fn resolve(&self, v: &FactorValue) -> Result<(String, FactorValue), String> {
        let text = v.text();
        if let Some(i) = (0..self.values.len())
            .find(|&i| self.labels[i] == text || self.values[i].text() == text)
        {
            return Ok((self.labels[i].clone(), self.values[i].clone()));
        }
        if self.targets.len() == 1 {
            return Ok((text, v.clone()));
        }
        Err(format!(
            "`{text}` is none of this factor's labels ({})",
            self.labels.join(", ")
        ))
    }
}

/// One value of a factor, as written or generated.
#[derive(Debug, Clone, PartialEq)]
pub struct FactorValue(pub toml::Value);

impl FactorValue {
    /// The value as text: strings bare, everything else as TOML writes it.
    pub fn text(&self) -> String {
        match &self.0 {
            toml::Value::String(s) => s.clone(),
            toml::Value::Boolean(b) => b.to_string(),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for FactorValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

/// The values of a factor: its `values`, or its `range` expanded.
pub fn values_of(spec: &FactorSpec) -> Result<Vec<FactorValue>, String> {
    match (&spec.values, &spec.range) {
        (Some(_), Some(_)) => Err("give `values` or `range`, not both".to_string()),
        (None, None) => Err("give `values = [...]` or `range = \"A..B\"` with `steps`".to_string()),
        (Some(v), None) if v.is_empty() => {
            Err("`values` is empty: give at least one value".to_string())
        }
        (Some(v), None) => {
            if spec.steps.is_some() || spec.scale.is_some() {
                return Err("`steps` and `scale` go with `range`, not `values`".to_string());
            }
            Ok(v.iter().cloned().map(FactorValue).collect())
        }
        (None, Some(r)) => {
            let steps = spec.steps.ok_or("a range needs `steps` (at least 2)")?;
            expand_range(r, steps, spec.scale.unwrap_or_default())
        }
    }
}

/// The unit family of a range's endpoints.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Family {
    Integer,
    Float,
    Duration,
    Rate,
}

fn endpoint(text: &str) -> Option<(Family, f64)> {
    let t = text.trim();
    if let Ok(i) = t.parse::<i64>() {
        return Some((Family::Integer, i as f64));
    }
    if let Ok(f) = t.parse::<f64>() {
        return f.is_finite().then_some((Family::Float, f));
    }
    if let Ok(ns) = tcplab_emu::spec::parse_duration(t) {
        return Some((Family::Duration, ns as f64));
    }
    if let Ok(bps) = tcplab_emu::spec::parse_rate(t) {
        return Some((Family::Rate, bps as f64));
    }
    None
}

/// Expands `"A..B"` into `steps` values, both ends included, equally spaced on a linear or
/// logarithmic scale. Integer, duration and rate values are rounded (log values to 3
/// significant figures, so `1ms..40ms` log 6 gives 1ms, 2.09ms, 4.37ms, 9.15ms, 19.1ms,
/// 40ms); values that round to the same number appear once.
pub fn expand_range(range: &str, steps: usize, scale: Scale) -> Result<Vec<FactorValue>, String> {
    let (a, b) = range
        .split_once("..")
        .ok_or_else(|| format!("range `{range}` must look like \"A..B\", e.g. \"1ms..40ms\""))?;
    let bad = |t: &str| {
        format!(
            "range endpoint `{}` is not a number, a duration or a rate: write e.g. 1..64, \
             1ms..40ms or 10mbit..1gbit",
            t.escape_debug()
        )
    };
    let (fa, va) = endpoint(a).ok_or_else(|| bad(a))?;
    let (fb, vb) = endpoint(b).ok_or_else(|| bad(b))?;
    let family = match (fa, fb) {
        (x, y) if x == y => x,
        (Family::Integer, Family::Float) | (Family::Float, Family::Integer) => Family::Float,
        _ => {
            return Err(format!(
                "range `{range}` mixes units: give both ends the same kind (numbers, durations or rates)"
            ));
        }
    };
    if steps < 2 {
        return Err(format!(
            "steps = {steps}: a range needs at least 2 steps (its two ends)"
        ));
    }
    if steps > 10_000 {
        return Err(format!("steps = {steps} is too many: use at most 10000"));
    }
    if scale == Scale::Log && (va <= 0.0 || vb <= 0.0) {
        return Err(format!(
            "range `{range}`: a log scale needs both ends above zero"
        ));
    }
    let mut out: Vec<FactorValue> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for i in 0..steps {
        let t = i as f64 / (steps - 1) as f64;
        let x = match scale {
            Scale::Linear => va + (vb - va) * t,
            Scale::Log => (va.ln() + (vb.ln() - va.ln()) * t).exp(),
        };
        let is_end = i == 0 || i == steps - 1;
        let x = if scale == Scale::Log && !is_end {
            sig3(x)
        } else {
            x
        };
        let value = match family {
            Family::Integer => toml::Value::Integer(x.round() as i64),
            Family::Float => toml::Value::Float(x),
            Family::Duration => toml::Value::String(format_duration(x.round() as u64)),
            Family::Rate => toml::Value::String(format_rate(x.round() as u64)),
        };
        let v = FactorValue(value);
        // A set of the texts, not a scan of `out`: 10,000 steps stay linear.
        if seen.insert(v.text()) {
            out.push(v);
        }
    }
    Ok(out)
}

fn sig3(x: f64) -> f64 {
    if x == 0.0 {
        return 0.0;
    }
    let mag = 10f64.powi(x.abs().log10().floor() as i32 - 2);
    (x / mag).round() * mag
}

/// Durations and rates are written exactly, as the emulator's flags read them (`10ms`,
/// `1gbit`); one writer for both crates, so a study's levels and `tcplab lab set` agree.
pub use tcplab_emu::describe::{format_duration, format_rate};

/// Sets `target` to `value` in `settings`; the error says why the value does not fit.
pub fn apply(settings: &mut Settings, target: &Target, value: &FactorValue) -> Result<(), String> {
    match target {
        Target::Sysctl { host, key } => {
            let text = scalar_text(value)?;
            let tables = &mut settings.lab.sysctl;
            if host == "all" {
                // A factor over every host replaces what the base lab sets on any one of them
                // (`[lab.sysctl.client]`): the run has the factor's value everywhere, or the
                // configurations would differ only in their labels.
                for (_, keys) in tables.iter_mut().filter(|(h, _)| h.as_str() != "all") {
                    keys.remove(key);
                }
            }
            tables
                .entry(host.clone())
                .or_default()
                .insert(key.clone(), toml::Value::String(text));
            Ok(())
        }
        Target::Link(field) => {
            let text = scalar_text(value)?;
            let slot = settings
                .lab
                .link
                .field_mut(field)
                .ok_or_else(|| format!("unknown link field `{field}`"))?;
            *slot = Some(text);
            Ok(())
        }
        Target::Lab(field) => apply_lab(&mut settings.lab, field, value),
        Target::Socket(opt) => {
            for w in &mut settings.workloads {
                set_workload_field(w, opt, value)?;
            }
            Ok(())
        }
        Target::Workload { index, field } => {
            let mut applied = 0;
            for (i, w) in settings.workloads.iter_mut().enumerate() {
                let chosen = index.is_none_or(|n| n == i);
                let has = keys(w.kind()).contains(&field.as_str());
                if chosen && has {
                    set_workload_field(w, field, value)?;
                    applied += 1;
                }
            }
            if applied == 0 {
                return Err(format!("no workload has a field `{field}`"));
            }
            Ok(())
        }
    }
}

fn scalar_text(value: &FactorValue) -> Result<String, String> {
    match &value.0 {
        toml::Value::Array(_) | toml::Value::Table(_) => Err(format!(
            "`{}` is a {}; this setting takes a string or a number",
            value.0,
            value.0.type_str()
        )),
        _ => Ok(value.text()),
    }
}

fn apply_lab(lab: &mut LabSection, field: &str, value: &FactorValue) -> Result<(), String> {
    let int = || {
        value
            .0
            .as_integer()
            .filter(|i| *i > 0)
            .ok_or_else(|| format!("`{}`: lab.{field} takes a positive integer", value.text()))
    };
    match field {
        "mtu" => lab.mtu = Some(u32::try_from(int()?).map_err(|e| e.to_string())?),
        "hosts" => lab.hosts = Some(usize::try_from(int()?).map_err(|e| e.to_string())?),
        "offloads" => {
            let text = match &value.0 {
                toml::Value::Boolean(true) => "on".to_string(),
                toml::Value::Boolean(false) => "off".to_string(),
                other => other
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| other.to_string()),
            };
            lab.offloads = Offloads::parse(&text).map_err(|e| e.to_string())?;
        }
        other => return Err(format!("unknown lab field `{other}`")),
    }
    Ok(())
}

fn set_workload_field(w: &mut Workload, field: &str, value: &FactorValue) -> Result<(), String> {
    let mut table = w.to_table()?;
    table.insert(field.to_string(), value.0.clone());
    *w = Workload::from_table(table)
        .map_err(|e| format!("`{}` does not fit {}.{field}: {e}", value.text(), w.kind()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(v: &[FactorValue]) -> Vec<String> {
        v.iter().map(FactorValue::text).collect()
    }

    #[test]
    fn log_duration_range_matches_hand_computation() {
        let v = expand_range("1ms..40ms", 6, Scale::Log).unwrap();
        // 40^(k/5) = 1, 2.0913, 4.3734, 9.1461, 19.127, 40 (ms), rounded to 3 significant figures.
        assert_eq!(
            texts(&v),
            ["1ms", "2.09ms", "4.37ms", "9.15ms", "19.1ms", "40ms"]
        );
    }

    #[test]
    fn linear_integer_range_and_dedup() {
        let v = expand_range("0..100", 5, Scale::Linear).unwrap();
        assert_eq!(texts(&v), ["0", "25", "50", "75", "100"]);
        let v = expand_range("1..4", 10, Scale::Log).unwrap();
        assert_eq!(texts(&v), ["1", "2", "3", "4"]);
    }

    #[test]
    fn rate_range_and_errors() {
        let v = expand_range("10mbit..1gbit", 3, Scale::Log).unwrap();
        assert_eq!(texts(&v), ["10mbit", "100mbit", "1gbit"]);
        assert!(
            expand_range("1ms..1gbit", 3, Scale::Linear)
                .unwrap_err()
                .contains("mixes units")
        );
        assert!(
            expand_range("0..10", 3, Scale::Log)
                .unwrap_err()
                .contains("above zero")
        );
        assert!(
            expand_range("1ms-40ms", 3, Scale::Linear)
                .unwrap_err()
                .contains("A..B")
        );
    }

    /// tune's lab sets the namespaces' congestion control per host and races
    /// `sysctl.all."net.ipv4.tcp_congestion_control"`: the factor must reach every host.
    #[test]
    fn a_factor_over_all_hosts_replaces_a_host_s_own_base_value() {
        let cc = "net.ipv4.tcp_congestion_control";
        let mut settings = Settings {
            lab: LabSection::default(),
            workloads: Vec::new(),
        };
        for host in ["client", "server"] {
            settings
                .lab
                .sysctl
                .entry(host.into())
                .or_default()
                .insert(cc.into(), toml::Value::String("reno".into()));
        }
        settings
            .lab
            .sysctl
            .entry("client".into())
            .or_default()
            .insert(
                "net.ipv4.tcp_rmem".into(),
                toml::Value::String("4096 1 2".into()),
            );
        let all = Target::Sysctl {
            host: "all".into(),
            key: cc.into(),
        };
        apply(
            &mut settings,
            &all,
            &FactorValue(toml::Value::String("bbr".into())),
        )
        .unwrap();
        let spec = settings.lab.to_spec("t").unwrap();
        let values: Vec<_> = spec
            .sysctls
            .iter()
            .filter(|s| s.key == cc)
            .map(|s| (s.host.as_str(), s.value.as_str()))
            .collect();
        assert_eq!(values, [("all", "bbr")]);
        assert!(
            spec.sysctls.iter().any(|s| s.key == "net.ipv4.tcp_rmem"),
            "other keys stay"
        );
    }

    #[test]
    fn names_are_parsed_with_suggestions() {
        let hosts = vec!["client".to_string(), "server".to_string()];
        let t = Target::parse("sysctl.client.\"net.ipv4.tcp_rmem\"", &[], &hosts).unwrap();
        assert_eq!(
            t,
            Target::Sysctl {
                host: "client".into(),
                key: "net.ipv4.tcp_rmem".into()
            }
        );
        let e = Target::parse("link.dealy", &[], &hosts).unwrap_err();
        assert!(e.message.contains("did you mean `delay`"), "{}", e.message);
        let e = Target::parse("sysctl.clinet.x", &[], &hosts).unwrap_err();
        assert!(e.message.contains("did you mean `client`"), "{}", e.message);
        let e = Target::parse("sockte.nodelay", &[], &hosts).unwrap_err();
        assert!(e.message.contains("did you mean `socket`"), "{}", e.message);
    }
}
