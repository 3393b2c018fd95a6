//! [`ImpairmentFlags`]: the impairment flags of `tcplab emu` and `tcplab lab up` as the user
//! typed them, turned into a [`LinkConfig`] with errors that name the flag. The same type is a
//! scenario's `[lab.link]` table (its serde form: one key per flag, `jitter_dist` for
//! `--jitter-dist`), so the command line and the scenario file share one field list.
//!
//! Every flag but `--seed` takes the per-direction form `A/B` (client→server/server→client);
//! a bare value applies to both directions, so `--delay 10ms` gives a 20 ms RTT.
//!
//! | flag | value |
//! |---|---|
//! | `--delay` | duration, at most 60s |
//! | `--jitter` | duration: half-width (uniform) or standard deviation (normal) |
//! | `--jitter-dist` | `uniform` (default), `normal`, `pareto`, `paretonormal`, `table:FILE` (netem `.dist`) |
//! | `--correlation` | percentage below 100%: lag-1 correlation of the jitter |
//! | `--loss` | percentage: Bernoulli loss |
//! | `--loss-model` | `ge:p[,r[,1-h[,1-k]]]` (netem defaults r = 1−p, 1-h = 100%, 1-k = 0%), `pattern:FILE`, `bits:0001` |
//! | `--rate` | rate, up to 400gbit |
//! | `--queue` | packets or bytes; needs `--rate`; default 1000 packets |
//! | `--overhead` | bytes added per frame for serialisation; needs `--rate` |
//! | `--reorder` | comma-separated: a percentage, `gap:N`, `jitter` (let jitter reorder) |
//! | `--duplicate`, `--corrupt` | percentage |
//! | `--seed` | integer or `0x` hex (not per direction) |
//!
//! Files (`table:FILE`, `pattern:FILE`) are read by the caller's reader passed to
//! [`ImpairmentFlags::to_link_config_with`]; this crate does no I/O.

use crate::aqm::parse_queue_discipline;
use crate::error::{ConfigError, ValueError};
use crate::spec::{
    parse_bytes, parse_duration, parse_percent, parse_queue, parse_rate, parse_seed,
    split_directions, split_directions_keyed,
};
use crate::{
    DirectionConfig, DistTable, Distribution, Jitter, LinkConfig, Loss, LossPattern, QueueLimit,
    Reorder, limits,
};
use serde::{Deserialize, Serialize};

/// Reads the file at a path for a flag; returns its text or an error message.
pub type FileReader<'a> = &'a dyn Fn(&str) -> Result<String, String>;

/// Checks one field's value on its own (see [`ImpairmentFlags::check_each`]).
type CheckValue = fn(&str, FileReader<'_>) -> Result<(), ConfigError>;

/// Declares [`ImpairmentFlags`] from one list of fields, each with the check of its value
/// alone, so the struct, its serde form, [`ImpairmentFlags::FIELDS`] and the by-name accessors
/// are written once: the CLI's flags, a scenario's `[lab.link]` and its `link.FIELD` factors
/// all go through them and cannot drift apart.
macro_rules! impairment_flags {
    ($($(#[doc = $doc:literal])* $field:ident => $check:expr,)*) => {
        /// The impairment flags as typed (all optional), and a scenario's `[lab.link]` table:
        /// each field is named after its flag (`jitter_dist` is `--jitter-dist`) and holds the
        /// value as the flag takes it, so one spelling serves the command line and the file.
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct ImpairmentFlags {
            $(
                $(#[doc = $doc])*
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $field: Option<String>,
            )*
        }

        impl ImpairmentFlags {
            /// The fields' names in declaration order: the scenario's `[lab.link]` keys and
            /// the `link.FIELD` factor names ([`Self::flag`] gives the flag).
            pub const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];

            /// The field named `name` (one of [`Self::FIELDS`]), or `None` for another name.
            pub fn field(&self, name: &str) -> Option<&Option<String>> {
                match name {
                    $(stringify!($field) => Some(&self.$field),)*
                    _ => None,
                }
            }

            /// The field named `name`, to set it (a `link.FIELD` factor), or `None`.
            pub fn field_mut(&mut self, name: &str) -> Option<&mut Option<String>> {
                match name {
                    $(stringify!($field) => Some(&mut self.$field),)*
                    _ => None,
                }
            }

            /// The check of the field named `name`'s value alone.
            fn check_of(name: &str) -> Option<CheckValue> {
                match name {
                    $(stringify!($field) => Some($check),)*
                    _ => None,
                }
            }
        }
    };
}

impairment_flags! {
    /// `--delay`: one-way delay, at most 60s.
    delay => |v, _| each("--delay", v, duration_within_limits),
    /// `--jitter`: half-width (uniform) or standard deviation (normal).
    jitter => |v, _| each("--jitter", v, duration_within_limits),
    /// `--jitter-dist`: `uniform`, `normal`, `pareto`, `paretonormal` or `table:FILE`.
    jitter_dist => |v, read| distributions(v, read).map(drop),
    /// `--correlation`: lag-1 correlation of the jitter, below 100%.
    correlation => |v, _| each("--correlation", v, correlation),
    /// `--loss`: Bernoulli loss.
    loss => |v, _| each("--loss", v, probability("loss")),
    /// `--loss-model`: `ge:...`, `pattern:FILE` or `bits:...`.
    loss_model => |v, read| loss_models(v, read).map(drop),
    /// `--rate`: bottleneck rate.
    rate => |v, _| each("--rate", v, rate_within_limits),
    /// `--queue`: bottleneck queue in packets or bytes.
    queue => |v, _| each("--queue", v, queue_within_limits),
    /// `--queue-discipline`: `droptail`, `red`, `codel`, `fq_codel` or `pie`, with parameters
    /// as `NAME:KEY=VALUE,...` (needs `--rate`).
    queue_discipline => |v, _| each("--queue-discipline", v, parse_queue_discipline),
    /// `--overhead`: bytes added per frame for serialisation.
    overhead => |v, _| each("--overhead", v, overhead_within_limits),
    /// `--reorder`: a percentage, `gap:N`, `jitter`.
    reorder => |v, _| each("--reorder", v, parse_reorder),
    /// `--duplicate`: duplication probability.
    duplicate => |v, _| each("--duplicate", v, probability("duplicate")),
    /// `--corrupt`: corruption probability.
    corrupt => |v, _| each("--corrupt", v, probability("corrupt")),
    /// `--seed`: integer or `0x` hex (not per direction).
    seed => |v, _| parse_seed(v).map(drop).map_err(flag_err("--seed", v)),
}

impl ImpairmentFlags {
    /// The flag of field `name`: `--` and the name with `-` for `_` (`--jitter-dist`).
    pub fn flag(name: &str) -> String {
        format!("--{}", name.replace('_', "-"))
    }

    /// True when no impairment is set (the link needs no emulator).
    pub fn is_empty(&self) -> bool {
        *self == ImpairmentFlags::default()
    }

    /// The fields that are set, as `(name, value)` in [`Self::FIELDS`] order.
    pub fn pairs(&self) -> Vec<(&'static str, &str)> {
        Self::FIELDS
            .iter()
            .filter_map(|&name| Some((name, self.field(name)?.as_deref()?)))
            .collect()
    }

    /// Lays `top` over these flags: every field `top` sets replaces this one's.
    pub fn overlay(&mut self, top: &ImpairmentFlags) {
        for (name, value) in top.pairs() {
            if let Some(slot) = self.field_mut(name) {
                *slot = Some(value.to_owned());
            }
        }
    }

    /// Checks every set field's value on its own, reading `table:`/`pattern:` files with
    /// `read`; on failure, the field's name and the error. Combinations (`queue` without
    /// `rate`, `loss` with `loss_model`) are not checked: a scenario's `[lab.link]` is refused
    /// here when it is read, naming its key, while its factors may still supply the rest.
    pub fn check_each(&self, read: FileReader<'_>) -> Result<(), (&'static str, ConfigError)> {
        for (name, value) in self.pairs() {
            if let Some(check) = Self::check_of(name) {
                check(value, read).map_err(|e| (name, e))?;
            }
        }
        Ok(())
    }
}

/// Parses both directions of one value with `parse`, keeping only whether it parsed.
fn each<T>(
    flag: &'static str,
    value: &str,
    parse: impl Fn(&str) -> Result<T, ValueError>,
) -> Result<(), ConfigError> {
    per_direction(flag, Some(value), parse).map(drop)
}

const DIST_WORDS: &[&str] = &["uniform", "normal", "pareto", "paretonormal"];
const DIST_PREFIXES: &[&str] = &["table:"];
const LOSS_WORDS: &[&str] = &["bernoulli"];
const LOSS_PREFIXES: &[&str] = &["ge:", "gemodel:", "pattern:", "bits:"];

/// Wraps a value error with its flag and value.
fn flag_err(flag: &'static str, value: &str) -> impl FnOnce(ValueError) -> ConfigError {
    let value = value.to_owned();
    move |source| ConfigError::Flag {
        flag,
        value,
        source,
    }
}

/// Both directions' values of one flag, parsed with `parse`.
fn per_direction<T>(
    flag: &'static str,
    value: Option<&str>,
    parse: impl Fn(&str) -> Result<T, ValueError>,
) -> Result<Option<(T, T)>, ConfigError> {
    let Some(value) = value else {
        return Ok(None);
    };
    let (a, b) = split_directions(value).map_err(flag_err(flag, value))?;
    let fwd = parse(a).map_err(flag_err(flag, a))?;
    let rev = parse(b).map_err(flag_err(flag, b))?;
    Ok(Some((fwd, rev)))
}

/// The forward (`i == 0`) or reverse value of a per-direction pair.
fn side<T: Clone>(pair: &Option<(T, T)>, i: usize) -> Option<T> {
    pair.as_ref()
        .map(|(a, b)| if i == 0 { a.clone() } else { b.clone() })
}

/// Sets a per-direction value on both directions' configs.
fn set_both<T>(
    pair: Option<(T, T)>,
    fwd: &mut DirectionConfig,
    rev: &mut DirectionConfig,
    set: impl Fn(&mut DirectionConfig, T),
) {
    if let Some((a, b)) = pair {
        set(fwd, a);
        set(rev, b);
    }
}

/// A percentage that must be a probability, named `what` in the error.
fn probability(what: &'static str) -> impl Fn(&str) -> Result<f64, ValueError> {
    move |s| {
        let p = parse_percent(s)?;
        limits::probability(what, p)?;
        Ok(p)
    }
}

fn duration_within_limits(s: &str) -> Result<u64, ValueError> {
    let ns = parse_duration(s)?;
    limits::delay(ns)?;
    Ok(ns)
}

fn correlation(s: &str) -> Result<f64, ValueError> {
    let c = parse_percent(s)?;
    limits::correlation(c)?;
    Ok(c)
}

fn rate_within_limits(s: &str) -> Result<u64, ValueError> {
    let r = parse_rate(s)?;
    limits::rate(r)?;
    Ok(r)
}

fn queue_within_limits(s: &str) -> Result<QueueLimit, ValueError> {
    let q = parse_queue(s)?;
    limits::queue(q)?;
    Ok(q)
}

fn overhead_within_limits(s: &str) -> Result<u32, ValueError> {
    let o = parse_bytes(s)?;
    limits::overhead(o)?;
    Ok(o)
}

/// Both directions' `--jitter-dist` values.
fn distributions(
    value: &str,
    read: FileReader<'_>,
) -> Result<(Distribution, Distribution), ConfigError> {
    let (a, b) = split_directions_keyed(value, DIST_WORDS, DIST_PREFIXES);
    Ok((parse_distribution(a, read)?, parse_distribution(b, read)?))
}

/// Both directions' `--loss-model` values (`None` for `bernoulli`).
fn loss_models(
    value: &str,
    read: FileReader<'_>,
) -> Result<(Option<Loss>, Option<Loss>), ConfigError> {
    let (a, b) = split_directions_keyed(value, LOSS_WORDS, LOSS_PREFIXES);
    Ok((parse_loss_model(a, read)?, parse_loss_model(b, read)?))
}

impl ImpairmentFlags {
    /// The link configuration, for flags that name no file (`table:` and `pattern:` values
    /// fail with [`ConfigError::File`]; use [`Self::to_link_config_with`] for those).
    pub fn to_link_config(&self) -> Result<LinkConfig, ConfigError> {
        self.to_link_config_with(&|_| Err("no file reader was supplied".to_owned()))
    }

    /// The link configuration, reading `table:`/`pattern:` files with `read`.
    pub fn to_link_config_with(&self, read: FileReader<'_>) -> Result<LinkConfig, ConfigError> {
        let mut fwd = DirectionConfig::default();
        let mut rev = DirectionConfig::default();
        let delay = per_direction("--delay", self.delay.as_deref(), duration_within_limits)?;
        set_both(delay, &mut fwd, &mut rev, |c, v| c.delay_ns = v);
        self.apply_jitter_and_reorder(&mut fwd, &mut rev, read)?;
        self.apply_loss(&mut fwd, &mut rev, read)?;
        self.apply_rate(&mut fwd, &mut rev)?;
        let dup = per_direction(
            "--duplicate",
            self.duplicate.as_deref(),
            probability("duplicate"),
        )?;
        set_both(dup, &mut fwd, &mut rev, |c, v| c.duplicate = v);
        let corrupt = per_direction("--corrupt", self.corrupt.as_deref(), probability("corrupt"))?;
        set_both(corrupt, &mut fwd, &mut rev, |c, v| c.corrupt = v);
        let seed = match &self.seed {
            Some(s) => Some(parse_seed(s).map_err(flag_err("--seed", s))?),
            None => None,
        };
        let cfg = LinkConfig {
            forward: fwd,
            reverse: rev,
            seed,
        };
        // Flags were range-checked one by one; this catches combinations.
        cfg.validate()?;
        Ok(cfg)
    }

    /// `--jitter`, `--jitter-dist`, `--correlation` and `--reorder` (which may let jitter
    /// reorder).
    fn apply_jitter_and_reorder(
        &self,
        fwd: &mut DirectionConfig,
        rev: &mut DirectionConfig,
        read: FileReader<'_>,
    ) -> Result<(), ConfigError> {
        let jitter = self.jitter()?;
        self.check_jitter_companions(jitter.is_some())?;
        let dists = match &self.jitter_dist {
            Some(value) => Some(distributions(value, read)?),
            None => None,
        };
        let correlation = per_direction("--correlation", self.correlation.as_deref(), correlation)?;
        let reorder = per_direction("--reorder", self.reorder.as_deref(), parse_reorder)?;
        for (i, cfg) in [fwd, rev].into_iter().enumerate() {
            let (reorder_cfg, jitter_reorders) = side(&reorder, i).unwrap_or((None, false));
            cfg.jitter = side(&jitter, i).filter(|&a| a > 0).map(|amount_ns| Jitter {
                amount_ns,
                distribution: side(&dists, i).unwrap_or_default(),
                correlation: side(&correlation, i).unwrap_or(0.0),
                allow_reorder: jitter_reorders,
            });
            cfg.reorder = reorder_cfg;
        }
        Ok(())
    }

    fn jitter(&self) -> Result<Option<(u64, u64)>, ConfigError> {
        per_direction("--jitter", self.jitter.as_deref(), duration_within_limits)
    }

    /// `--jitter-dist`, `--correlation` and `--reorder jitter` mean nothing without `--jitter`.
    fn check_jitter_companions(&self, has_jitter: bool) -> Result<(), ConfigError> {
        if has_jitter {
            return Ok(());
        }
        let fix = "it shapes the jitter: add e.g. --jitter 2ms";
        let needs_jitter = |flag| ConfigError::Needs {
            flag,
            needs: "--jitter",
            fix,
        };
        if self.jitter_dist.is_some() {
            return Err(needs_jitter("--jitter-dist"));
        }
        if self.correlation.is_some() {
            return Err(needs_jitter("--correlation"));
        }
        if self
            .reorder
            .as_deref()
            .is_some_and(|r| r.contains("jitter"))
        {
            return Err(needs_jitter("--reorder jitter"));
        }
        Ok(())
    }

    fn apply_loss(
        &self,
        fwd: &mut DirectionConfig,
        rev: &mut DirectionConfig,
        read: FileReader<'_>,
    ) -> Result<(), ConfigError> {
        let bernoulli = per_direction("--loss", self.loss.as_deref(), probability("loss"))?;
        let model = match &self.loss_model {
            Some(v) => Some(loss_models(v, read)?),
            None => None,
        };
        for (i, cfg) in [fwd, rev].into_iter().enumerate() {
            let m = side(&model, i);
            cfg.loss = match (m.flatten(), side(&bernoulli, i)) {
                (Some(_), Some(_)) => {
                    return Err(ConfigError::Conflict {
                        first: "--loss",
                        second: "--loss-model",
                        fix: "--loss sets Bernoulli loss; for Gilbert-Elliott or a pattern give only --loss-model",
                    });
                }
                (Some(m), None) => Some(m),
                (None, Some(probability)) => Some(Loss::Bernoulli { probability }),
                (None, None) => None,
            };
        }
        Ok(())
    }

    fn apply_rate(
        &self,
        fwd: &mut DirectionConfig,
        rev: &mut DirectionConfig,
    ) -> Result<(), ConfigError> {
        let rate = per_direction("--rate", self.rate.as_deref(), rate_within_limits)?;
        let queue = per_direction("--queue", self.queue.as_deref(), queue_within_limits)?;
        let overhead = per_direction(
            "--overhead",
            self.overhead.as_deref(),
            overhead_within_limits,
        )?;
        let discipline = per_direction(
            "--queue-discipline",
            self.queue_discipline.as_deref(),
            parse_queue_discipline,
        )?;
        let Some((ra, rb)) = rate else {
            let fix = "a queue, its discipline and an overhead belong to a rate limit: add e.g. --rate 1gbit";
            let needs_rate = |flag| ConfigError::Needs {
                flag,
                needs: "--rate",
                fix,
            };
            if queue.is_some() {
                return Err(needs_rate("--queue"));
            }
            if overhead.is_some() {
                return Err(needs_rate("--overhead"));
            }
            if discipline.is_some() {
                return Err(needs_rate("--queue-discipline"));
            }
            return Ok(());
        };
        set_both(Some((ra, rb)), fwd, rev, |c, v| c.rate_bps = Some(v));
        set_both(queue, fwd, rev, |c, v| c.queue = Some(v));
        set_both(overhead, fwd, rev, |c, v| c.overhead_bytes = v);
        set_both(discipline, fwd, rev, |c, v| {
            c.queue_discipline = (v != crate::aqm::AqmConfig::Droptail).then_some(v);
        });
        Ok(())
    }
}

/// One direction's `--jitter-dist` value.
fn parse_distribution(s: &str, read: FileReader<'_>) -> Result<Distribution, ConfigError> {
    const FLAG: &str = "--jitter-dist";
    if let Some(path) = s.strip_prefix("table:") {
        let text = read(path).map_err(|reason| ConfigError::File {
            flag: FLAG,
            path: path.to_owned(),
            reason,
        })?;
        let table = DistTable::parse(&text).map_err(|e| ConfigError::Flag {
            flag: FLAG,
            value: s.to_owned(),
            source: e,
        })?;
        return Ok(Distribution::Table(table));
    }
    match s.to_ascii_lowercase().as_str() {
        "uniform" => Ok(Distribution::Uniform),
        "normal" => Ok(Distribution::Normal),
        "pareto" => Ok(Distribution::Pareto),
        "paretonormal" => Ok(Distribution::Paretonormal),
        _ => Err(ConfigError::Flag {
            flag: FLAG,
            value: s.to_owned(),
            source: ValueError::UnknownKeyword {
                what: "distribution",
                got: s.to_owned(),
                allowed: "uniform, normal, pareto, paretonormal or table:FILE",
            },
        }),
    }
}

/// One direction's `--loss-model` value (`None` for `bernoulli`, which defers to `--loss`).
fn parse_loss_model(s: &str, read: FileReader<'_>) -> Result<Option<Loss>, ConfigError> {
    const FLAG: &str = "--loss-model";
    let err = flag_err(FLAG, s);
    if s.eq_ignore_ascii_case("bernoulli") {
        return Ok(None);
    }
    if let Some(params) = s.strip_prefix("ge:").or_else(|| s.strip_prefix("gemodel:")) {
        return parse_gilbert_elliott(params).map(Some).map_err(err);
    }
    if let Some(bits) = s.strip_prefix("bits:") {
        return LossPattern::parse(bits)
            .map(|p| Some(Loss::Pattern(p)))
            .map_err(err);
    }
    if let Some(path) = s.strip_prefix("pattern:") {
        let text = read(path).map_err(|reason| ConfigError::File {
            flag: FLAG,
            path: path.to_owned(),
            reason,
        })?;
        return LossPattern::parse(&text)
            .map(|p| Some(Loss::Pattern(p)))
            .map_err(err);
    }
    Err(err(ValueError::UnknownKeyword {
        what: "loss model",
        got: s.to_owned(),
        allowed: "ge:p,r,1-h,1-k, pattern:FILE, bits:0001 or bernoulli",
    }))
}

/// `p[,r[,1-h[,1-k]]]` with netem's defaults for the omitted ones.
fn parse_gilbert_elliott(params: &str) -> Result<Loss, ValueError> {
    let parts: Vec<&str> = params.split(',').map(str::trim).collect();
    if parts.len() > 4 || parts.iter().any(|p| p.is_empty()) {
        return Err(ValueError::Invalid(
            "write ge:p,r,1-h,1-k with 1 to 4 percentages, e.g. ge:1%,10%,70%,0.1%".into(),
        ));
    }
    let names = ["p", "r", "1-h", "1-k"];
    let mut v = [0.0f64; 4];
    for (i, part) in parts.iter().enumerate() {
        v[i] = parse_percent(part)?;
        limits::probability(names[i], v[i])?;
    }
    let p = v[0];
    Ok(Loss::GilbertElliott {
        p,
        r: if parts.len() > 1 { v[1] } else { 1.0 - p },
        one_minus_h: if parts.len() > 2 { v[2] } else { 1.0 },
        one_minus_k: if parts.len() > 3 { v[3] } else { 0.0 },
    })
}

/// One direction's `--reorder` value: (reorder element, whether jitter may reorder).
fn parse_reorder(s: &str) -> Result<(Option<Reorder>, bool), ValueError> {
    let mut probability = None;
    let mut gap = None;
    let mut jitter = false;
    for token in s.split(',').map(str::trim) {
        if token == "jitter" {
            jitter = true;
        } else if let Some(n) = token.strip_prefix("gap:") {
            let n = n.parse::<u32>().map_err(|_| ValueError::NotANumber {
                text: n.to_owned(),
                hint: "write gap:N with a whole number, e.g. gap:5",
            })?;
            limits::gap(n)?;
            gap = Some(n);
        } else {
            let p = parse_percent(token)?;
            limits::probability("reorder", p)?;
            probability = Some(p);
        }
    }
    let element = match (probability, gap) {
        (None, None) => None,
        (Some(0.0), _) => None,
        (p, g) => Some(Reorder {
            probability: p.unwrap_or(1.0),
            gap: g.unwrap_or(0),
        }),
    };
    Ok((element, jitter))
}
