//! Pure statistics for tcplab: data in, numbers out. No clock, no I/O, no global randomness
//! (the bootstrap draws from a ChaCha8 stream seeded by the caller).
//!
//! The map, from raw samples to decisions:
//!
//! | module | job | used by |
//! |---|---|---|
//! | [`summary`] | n, mean ± sd, min/max, median, p90/p99/p99.9 (Hyndman-Fan type 7) | study, report |
//! | [`ci`] | [`ConfidenceInterval`]; CI of the mean (log scale for positive data, else Student t) | study, report, rank |
//! | [`bootstrap`] | seeded percentile/BCa CIs of the mean, the median, any statistic | study, speed-up |
//! | [`describe`](mod@describe) | all of a table row at once: summary, CIs, speed-up | study, report |
//! | [`speedup`] | ratio of means vs a baseline with a bootstrap CI | report, tune |
//! | [`compare`] | Welch t-test, Mann-Whitney U, Holm correction | rank, race |
//! | [`rank`](mod@rank) | "consistently fast" ranking with significance groups | report, tune |
//! | [`race`] | which configurations to stop running, with the reason | study `--race`, tune |
//! | [`regression`] | a pair's newest results against its own history: exact permutation p-value, a size floor, a documented false-alarm rate | fleet monitor |
//! | [`collective`] | the chance one all-to-all meets a stall, from per-pair counts, with a Jeffreys interval | fleet mesh |
//! | [`stall`] | stall detection, periodicity by message index, timer-tick clustering, delayed-ACK cluster share | doctor |
//! | [`period`] | the grid fit behind the periodicity verdict | stall |
//! | [`dist`] | Student t and normal CDF/quantiles (from `statrs`, panic-free wrappers) | all |
//!
//! Every method cites its source in its doc comment. Every entry point validates its input
//! (empty, NaN/∞, too few samples, levels outside (0, 1)) and returns [`StatsError`] instead
//! of panicking. Directions are explicit: [`Objective::Minimise`] for times and costs,
//! [`Objective::Maximise`] for rates.
//!
//! ```
//! use tcplab_stats::{Bootstrap, Objective, describe};
//!
//! let baseline = [0.41, 0.39, 0.44, 0.40, 0.42]; // seconds per run, Nagle on
//! let nodelay = [0.28, 0.19, 0.31, 0.22, 0.27]; // TCP_NODELAY
//! let d = describe(&nodelay, Some(&baseline), Objective::Minimise, &Bootstrap::new(2_000, 1))?;
//! assert_eq!(d.summary.n, 5);
//! assert!((d.summary.mean - 0.254).abs() < 1e-12);
//! let s = d.speed_up.expect("a baseline was given");
//! assert!(s.significant_gain()); // the whole 95% CI of baseline/candidate lies above 1
//! # Ok::<(), tcplab_stats::StatsError>(())
//! ```

pub mod bootstrap;
pub mod ci;
pub mod collective;
pub mod compare;
pub mod describe;
pub mod dist;
mod error;
pub mod fmt;
mod objective;
pub mod period;
pub mod race;
pub mod rank;
pub mod regression;
pub mod speedup;
pub mod stall;
pub mod summary;
pub mod units;

pub use bootstrap::Bootstrap;
pub use ci::{CiMethod, ConfidenceInterval, mean_ci, mean_ci_log, mean_ci_t};
pub use collective::{CollectiveStall, PairStalls, all_to_all_stall};
pub use compare::{Alternative, TestKind, TestResult, holm_adjust, mann_whitney_u, welch_t_test};
pub use describe::{Description, describe};
pub use error::StatsError;
pub use objective::Objective;
pub use race::{RaceAction, RaceConfig, RaceRound, RaceVerdict, race_round};
pub use rank::{RankConfig, RankKey, RankedSetting, Ranking, Samples, rank};
pub use regression::{Regression, RegressionCheck, RegressionConfig, check_regression};
pub use speedup::{SpeedUp, speed_up};
pub use stall::{
    ClusterFraction, StallAnalysis, StallConfig, StallEvent, Threshold, TickClustering,
    analyse_stalls, cluster_fraction, in_ticks,
};
pub use summary::{Summary, quantile};
