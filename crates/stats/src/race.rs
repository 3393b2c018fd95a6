//! Racing support: which configurations are significantly worse than the current best and can
//! stop being run.
//!
//! In the spirit of racing algorithms for model/configuration selection (Maron & Moore 1994,
//! "Hoeffding races"; Birattari et al. 2002, "A racing algorithm for configuring
//! metaheuristics"), but with an unblocked two-sample test because repetitions of different
//! configurations are not paired:
//! 1. only configurations with at least `min_n` samples take part;
//! 2. the current best is the participant with the best mean (Welch) or median (Mann-Whitney);
//! 3. every other participant is tested against it, one-sided ("candidate is worse"), and the
//!    p-values of the round are Holm-adjusted (family-wise error ≤ α per round);
//! 4. adjusted p < α → drop, with a reason sentence that states the figures and the test.
//!
//! Each call is one round; a runner calls it again as samples accrue. Repeated rounds spend α
//! again, so a strict runner lowers α or sets a generous `min_n`.

use crate::compare::{Alternative, TestKind, TestResult, compare, holm_adjust};
use crate::error::{StatsError, check_unit_open};
use crate::objective::Objective;
use crate::rank::{Samples, in_setting};
use crate::summary::{mean, median};
use serde::{Deserialize, Serialize};

/// Racing parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RaceConfig {
    /// Which direction is better.
    pub objective: Objective,
    /// Fewest samples a configuration needs before it can be dropped or be the best (≥ 2).
    pub min_n: usize,
    /// Family-wise significance level of one round (Holm), e.g. 0.05.
    pub alpha: f64,
    /// The one-sided test used.
    pub test: TestKind,
    /// Base unit of the samples ("bit/s", "s"), so the reasons read "213 Mbit/s"; empty
    /// prints bare numbers.
    #[serde(default)]
    pub unit: String,
}

impl RaceConfig {
    /// Defaults: min_n = 5, α = 0.05, Welch t-test.
    pub fn new(objective: Objective) -> RaceConfig {
        RaceConfig {
            objective,
            min_n: 5,
            alpha: 0.05,
            test: TestKind::Welch,
            unit: String::new(),
        }
    }
}

/// What to do with one configuration after a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RaceAction {
    /// Keep running it.
    Keep,
    /// Stop running it: significantly worse than the best.
    Drop,
}

/// The verdict on one configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RaceVerdict {
    /// The configuration's name.
    pub name: String,
    /// Keep or drop.
    pub action: RaceAction,
    /// Raw one-sided p-value against the best (`None` for the best and for those not tested).
    pub p_value: Option<f64>,
    /// Holm-adjusted p-value of this round.
    pub p_adjusted: Option<f64>,
    /// Why, with the figures and the test (for the report). It names neither the action, this
    /// configuration nor the best: every reader shows it beside them (the table's row, its
    /// `dropped:` cell and the best's row; the store's action and best columns), and with
    /// three factors each name is a line of its own.
    pub reason: String,
}

/// The outcome of one racing round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RaceRound {
    /// Name of the current best, `None` when no configuration has `min_n` samples yet.
    pub best: Option<String>,
    /// One verdict per input configuration, in input order.
    pub verdicts: Vec<RaceVerdict>,
}

impl RaceRound {
    /// Names of the configurations to drop this round.
    pub fn dropped(&self) -> impl Iterator<Item = &str> {
        self.verdicts
            .iter()
            .filter(|v| v.action == RaceAction::Drop)
            .map(|v| v.name.as_str())
    }
}

/// Runs one racing round over `configs` (see the module documentation).
pub fn race_round(configs: &[Samples<'_>], config: &RaceConfig) -> Result<RaceRound, StatsError> {
    validate(config)?;
    for c in configs {
        crate::error::check_samples("samples", c.values).map_err(|e| in_setting(c.name, e))?;
    }
    let centre = |c: &Samples<'_>| match config.test {
        TestKind::Welch => mean(c.values),
        TestKind::MannWhitney => median(c.values),
    };
    let eligible: Vec<usize> = (0..configs.len())
        .filter(|&i| configs[i].values.len() >= config.min_n)
        .collect();
    let best = eligible.iter().copied().min_by(|&a, &b| {
        config
            .objective
            .cmp_best_first(centre(&configs[a]), centre(&configs[b]))
    });
    let Some(best) = best else {
        let verdicts = configs.iter().map(|c| too_few(c, config)).collect();
        return Ok(RaceRound {
            best: None,
            verdicts,
        });
    };
    let challengers: Vec<usize> = eligible.iter().copied().filter(|&i| i != best).collect();
    let tests = challengers
        .iter()
        .map(|&i| worse_test(&configs[i], &configs[best], config))
        .collect::<Result<Vec<TestResult>, StatsError>>()?;
    let raw: Vec<f64> = tests.iter().map(|t| t.p_value).collect();
    let adjusted = holm_adjust(&raw);
    let mut verdicts: Vec<RaceVerdict> = configs.iter().map(|c| too_few(c, config)).collect();
    verdicts[best] = RaceVerdict {
        name: configs[best].name.to_string(),
        action: RaceAction::Keep,
        p_value: None,
        p_adjusted: None,
        reason: format!(
            "current best ({} {}, n = {})",
            centre_name(config.test),
            crate::fmt::sig4(centre(&configs[best])),
            configs[best].values.len()
        ),
    };
    for (k, &i) in challengers.iter().enumerate() {
        let ctx = Context {
            test: &tests[k],
            p_adjusted: adjusted[k],
            cand: &configs[i],
            best: &configs[best],
            cand_centre: centre(&configs[i]),
            best_centre: centre(&configs[best]),
        };
        verdicts[i] = challenger_verdict(&ctx, config);
    }
    Ok(RaceRound {
        best: Some(configs[best].name.to_string()),
        verdicts,
    })
}

/// Everything a challenger's verdict sentence needs.
struct Context<'a> {
    test: &'a TestResult,
    p_adjusted: f64,
    cand: &'a Samples<'a>,
    best: &'a Samples<'a>,
    cand_centre: f64,
    best_centre: f64,
}

fn challenger_verdict(ctx: &Context<'_>, config: &RaceConfig) -> RaceVerdict {
    let drop = ctx.p_adjusted < config.alpha;
    let rel = if ctx.best_centre != 0.0 {
        format!(
            " ({:+.1}%)",
            (ctx.cand_centre - ctx.best_centre) / ctx.best_centre.abs() * 100.0
        )
    } else {
        String::new()
    };
    let stat = match ctx.test.df {
        Some(df) => format!("t = {:.2}, df = {:.1}", ctx.test.statistic, df),
        None => format!("U = {}", ctx.test.statistic),
    };
    let cmp = if drop { "<" } else { ">=" };
    let reason = format!(
        "{cn} {cv}{rel} vs the best's {bv}; one-sided {test} ({stat}), \
         Holm-adjusted p = {p} {cmp} alpha = {alpha}; n = {n} vs {nb}",
        cn = centre_name(config.test),
        cv = figure(ctx.cand_centre, &config.unit),
        bv = figure(ctx.best_centre, &config.unit),
        test = config.test.name(),
        p = crate::fmt::p_value(ctx.p_adjusted),
        alpha = config.alpha,
        n = ctx.cand.values.len(),
        nb = ctx.best.values.len(),
    );
    RaceVerdict {
        name: ctx.cand.name.to_string(),
        action: if drop {
            RaceAction::Drop
        } else {
            RaceAction::Keep
        },
        p_value: Some(ctx.test.p_value),
        p_adjusted: Some(ctx.p_adjusted),
        reason,
    }
}

/// A centre for a reason sentence: with its unit at a readable scale, or four significant
/// digits when the unit is unknown.
fn figure(x: f64, unit: &str) -> String {
    if unit.is_empty() {
        crate::fmt::sig4(x)
    } else {
        crate::units::human(x, &crate::units::Unit::parse(unit))
    }
}

/// One-sided test of "candidate is worse than best".
fn worse_test(
    cand: &Samples<'_>,
    best: &Samples<'_>,
    config: &RaceConfig,
) -> Result<TestResult, StatsError> {
    let alternative = match config.objective {
        Objective::Minimise => Alternative::Greater,
        Objective::Maximise => Alternative::Less,
    };
    compare(config.test, cand.values, best.values, alternative)
        .map_err(|e| in_setting(cand.name, e))
}

fn too_few(c: &Samples<'_>, config: &RaceConfig) -> RaceVerdict {
    RaceVerdict {
        name: c.name.to_string(),
        action: RaceAction::Keep,
        p_value: None,
        p_adjusted: None,
        reason: format!(
            "{} sample(s), fewer than the minimum {} needed to be tested",
            c.values.len(),
            config.min_n
        ),
    }
}

fn validate(config: &RaceConfig) -> Result<(), StatsError> {
    check_unit_open("alpha", config.alpha)?;
    if config.min_n < 2 {
        return Err(StatsError::InvalidParameter {
            name: "min_n",
            value: config.min_n.to_string(),
            expected: "at least 2 (a test needs a spread in each sample)",
        });
    }
    Ok(())
}

fn centre_name(test: TestKind) -> &'static str {
    match test {
        TestKind::Welch => "mean",
        TestKind::MannWhitney => "median",
    }
}
