//! Which discipline, with which parameters: one serde description, defaults as the
//! specifications (and Linux) give them.

use serde::{Deserialize, Serialize};

use crate::Nanos;
use crate::error::{ConfigError, ValueError};

/// A field's error with the fix in words.
fn invalid(field: &str, problem: String) -> ConfigError {
    ConfigError::Field {
        field: field.into(),
        source: ValueError::Invalid(problem),
    }
}

const MS: Nanos = 1_000_000;

/// The discipline at a direction's bottleneck.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AqmConfig {
    /// Drop-tail: the queue's limit and nothing else.
    #[default]
    Droptail,
    /// RED, gentle.
    Red(RedParams),
    /// CoDel.
    Codel(CodelParams),
    /// FQ-CoDel.
    FqCodel(FqCodelParams),
    /// PIE.
    Pie(PieParams),
}

impl AqmConfig {
    /// The names `--queue-discipline` takes.
    pub const NAMES: &'static str = "droptail, red, codel, fq_codel, pie";

    /// The discipline called `name`, at its defaults.
    pub fn named(name: &str) -> Result<AqmConfig, ConfigError> {
        Ok(match name {
            "droptail" | "fifo" => AqmConfig::Droptail,
            "red" => AqmConfig::Red(RedParams::default()),
            "codel" => AqmConfig::Codel(CodelParams::default()),
            "fq_codel" | "fq-codel" => AqmConfig::FqCodel(FqCodelParams::default()),
            "pie" => AqmConfig::Pie(PieParams::default()),
            other => {
                return Err(ConfigError::Field {
                    field: "queue_discipline".into(),
                    source: ValueError::UnknownKeyword {
                        what: "queue discipline",
                        got: other.into(),
                        allowed: Self::NAMES,
                    },
                });
            }
        })
    }

    /// Its name.
    pub fn name(&self) -> &'static str {
        match self {
            AqmConfig::Droptail => "droptail",
            AqmConfig::Red(_) => "red",
            AqmConfig::Codel(_) => "codel",
            AqmConfig::FqCodel(_) => "fq_codel",
            AqmConfig::Pie(_) => "pie",
        }
    }

    /// Checks the parameters make sense together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field: &str, problem: String| Err(invalid(field, problem));
        match self {
            AqmConfig::Droptail => Ok(()),
            AqmConfig::Codel(p) => p.validate("codel"),
            AqmConfig::FqCodel(p) => {
                p.codel.validate("fq_codel")?;
                if p.flows == 0 || p.flows > 65_536 {
                    return bad("fq_codel.flows", format!("{}: give 1 to 65536", p.flows));
                }
                if p.quantum < 64 {
                    return bad(
                        "fq_codel.quantum",
                        format!("{} bytes: give at least 64", p.quantum),
                    );
                }
                Ok(())
            }
            AqmConfig::Pie(p) => {
                if p.target_ns == 0 || p.tupdate_ns == 0 {
                    return bad("pie.target/tupdate", "both must be positive".into());
                }
                if !(p.alpha >= 0.0 && p.beta >= 0.0 && p.alpha.is_finite() && p.beta.is_finite()) {
                    return bad("pie.alpha/beta", "give non-negative numbers".into());
                }
                Ok(())
            }
            AqmConfig::Red(p) => {
                if p.min_th_bytes >= p.max_th_bytes {
                    return bad(
                        "red.min_th/max_th",
                        format!(
                            "min {} must be below max {} bytes",
                            p.min_th_bytes, p.max_th_bytes
                        ),
                    );
                }
                if !(p.max_p > 0.0 && p.max_p <= 1.0 && p.wq > 0.0 && p.wq < 1.0) {
                    return bad("red.max_p/wq", "max_p in (0, 1], wq in (0, 1)".into());
                }
                Ok(())
            }
        }
    }
}

/// CoDel's parameters (RFC 8289 section 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CodelParams {
    /// Acceptable standing queue delay, ns (5 ms).
    pub target_ns: Nanos,
    /// The window a delay above target must persist before dropping starts, ns (100 ms: a
    /// worst-case RTT).
    pub interval_ns: Nanos,
    /// A queue holding at most this many bytes is never dropped from (one MTU, 1514).
    pub mtu_bytes: u32,
    /// Mark ECN-capable packets CE instead of dropping them.
    pub ecn: bool,
}

impl Default for CodelParams {
    fn default() -> Self {
        CodelParams {
            target_ns: 5 * MS,
            interval_ns: 100 * MS,
            mtu_bytes: 1514,
            ecn: false,
        }
    }
}

impl CodelParams {
    fn validate(&self, what: &str) -> Result<(), ConfigError> {
        if self.target_ns == 0 || self.interval_ns == 0 || self.target_ns > self.interval_ns {
            return Err(invalid(
                &format!("{what}.target/interval"),
                format!(
                    "target {} ns and interval {} ns: both positive, target at most interval",
                    self.target_ns, self.interval_ns
                ),
            ));
        }
        Ok(())
    }
}

/// FQ-CoDel's parameters (RFC 8290 section 5; Linux's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FqCodelParams {
    /// Each flow queue's CoDel (ECN on by default, as in Linux).
    pub codel: CodelParams,
    /// Flow buckets the 5-tuple hash is reduced to (1024).
    pub flows: u32,
    /// Bytes a flow may send per round (one MTU, 1514).
    pub quantum: u32,
    /// Bytes all queues may hold before the fattest flow is dropped from (32 MiB).
    pub memory_limit_bytes: u64,
    /// Packets dropped from the fattest flow at most per overflow (64, Linux's batch).
    pub drop_batch: u32,
}

impl Default for FqCodelParams {
    fn default() -> Self {
        FqCodelParams {
            codel: CodelParams {
                ecn: true,
                ..CodelParams::default()
            },
            flows: 1024,
            quantum: 1514,
            memory_limit_bytes: 32 << 20,
            drop_batch: 64,
        }
    }
}

/// PIE's parameters (RFC 8033 section 5 and 4.1-4.3).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PieParams {
    /// Queue delay reference, ns (15 ms).
    pub target_ns: Nanos,
    /// How often the drop probability is updated, ns (15 ms).
    pub tupdate_ns: Nanos,
    /// Weight of the delay's distance from target, per second (0.125).
    pub alpha: f64,
    /// Weight of the delay's trend, per second (1.25).
    pub beta: f64,
    /// Burst allowed through without drops from an idle queue, ns (150 ms).
    pub max_burst_ns: Nanos,
    /// Mark ECN-capable packets CE instead of dropping while the probability is at most
    /// `mark_ecn_th`.
    pub ecn: bool,
    /// The probability above which ECN-capable packets are dropped too (0.1).
    pub mark_ecn_th: f64,
    /// A queue of at most this many bytes is never early-dropped from (two MTUs' worth uses
    /// this MTU, 1514).
    pub mtu_bytes: u32,
}

impl Default for PieParams {
    fn default() -> Self {
        PieParams {
            target_ns: 15 * MS,
            tupdate_ns: 15 * MS,
            alpha: 0.125,
            beta: 1.25,
            max_burst_ns: 150 * MS,
            ecn: false,
            mark_ecn_th: 0.1,
            mtu_bytes: 1514,
        }
    }
}

/// RED's parameters (Floyd & Jacobson, gentle variant), thresholds in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RedParams {
    /// Below this average backlog nothing is dropped early.
    pub min_th_bytes: u64,
    /// At this average the drop probability reaches `max_p`; gentle RED then rises linearly
    /// to 1 at twice it.
    pub max_th_bytes: u64,
    /// The drop probability at `max_th_bytes` (0.1).
    pub max_p: f64,
    /// The average's weight for each new sample (0.002).
    pub wq: f64,
    /// Typical packet size, for the average's decay over idle time (1000 bytes).
    pub mean_packet_bytes: u32,
    /// Mark ECN-capable packets CE instead of dropping them (below the queue's limit).
    pub ecn: bool,
}

impl Default for RedParams {
    fn default() -> Self {
        RedParams {
            min_th_bytes: 30_000,
            max_th_bytes: 90_000,
            max_p: 0.1,
            wq: 0.002,
            mean_packet_bytes: 1000,
            ecn: false,
        }
    }
}
