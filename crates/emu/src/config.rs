//! The link configuration: plain serde data, one [`DirectionConfig`] per direction.
//!
//! Every field is optional and the [`Default`] is a transparent wire. Units are in the field
//! names (`delay_ns`, `rate_bps`); probabilities are fractions in `0.0..=1.0`. The same
//! structure is what `tcplab` records with each run, so a run can be replayed from its record.
//! Human-written values ("10ms", "1%") are parsed by [`crate::spec`] and [`crate::flags`].

use serde::{Deserialize, Serialize};

use crate::error::{ConfigError, ValueError};
use crate::limits;
use crate::{LossPattern, Nanos};

/// Both directions of one emulated link, and the seed of every random stream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinkConfig {
    /// Client → server (interface A → interface B).
    pub forward: DirectionConfig,
    /// Server → client (interface B → interface A).
    pub reverse: DirectionConfig,
    /// Seed of all random streams; `None` lets the caller pick one (and print it).
    pub seed: Option<u64>,
}

impl LinkConfig {
    /// Checks both directions; errors name the field, e.g. `reverse.rate_bps`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.forward.validate().map_err(|e| e.within("forward"))?;
        self.reverse.validate().map_err(|e| e.within("reverse"))
    }

    /// True when neither direction impairs anything.
    pub fn is_transparent(&self) -> bool {
        self.forward.is_transparent() && self.reverse.is_transparent()
    }

    /// The first element, in either direction, that must act on each wire packet on its own
    /// (see [`DirectionConfig::needs_per_packet`]), as `"forward.loss"`; `None` when the link
    /// can carry GSO super-packets whole (delay, jitter, rate and queue only).
    pub fn needs_per_packet(&self) -> Option<&'static str> {
        const FORWARD: [&str; 4] = [
            "forward.loss",
            "forward.duplicate",
            "forward.reorder",
            "forward.corrupt",
        ];
        const REVERSE: [&str; 4] = [
            "reverse.loss",
            "reverse.duplicate",
            "reverse.reorder",
            "reverse.corrupt",
        ];
        let index = |d: &DirectionConfig| {
            d.needs_per_packet()
                .and_then(|e| PER_PACKET.iter().position(|&p| p == e))
        };
        index(&self.forward)
            .map(|i| FORWARD[i])
            .or_else(|| index(&self.reverse).map(|i| REVERSE[i]))
    }
}

/// Elements that act on single packets, in [`DirectionConfig::needs_per_packet`]'s order.
const PER_PACKET: [&str; 4] = ["loss", "duplicate", "reorder", "corrupt"];

/// One direction's impairments, applied in this order: loss, duplicate, bottleneck (rate and
/// queue), reorder, delay line (delay and jitter), corrupt.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DirectionConfig {
    /// Fixed one-way propagation delay in ns (the delay line, after the bottleneck).
    pub delay_ns: Nanos,
    /// Random variation added to `delay_ns`.
    pub jitter: Option<Jitter>,
    /// Random or patterned loss at the link entry (before the queue).
    pub loss: Option<Loss>,
    /// Bottleneck rate in bits per second; `None` means no bottleneck and no queue.
    pub rate_bps: Option<u64>,
    /// Bottleneck queue limit (needs `rate_bps`); default [`DEFAULT_QUEUE_PACKETS`] packets.
    pub queue: Option<QueueLimit>,
    /// Bytes added to each frame's length for serialisation time only (24 models Ethernet's
    /// preamble, start delimiter, FCS and inter-frame gap on a frame captured without FCS).
    pub overhead_bytes: u32,
    /// Packets that skip the delay line.
    pub reorder: Option<Reorder>,
    /// Probability that a packet is sent twice.
    pub duplicate: f64,
    /// Probability that a departing packet has one bit flipped.
    pub corrupt: f64,
    /// The queue discipline at the bottleneck (needs `rate_bps`); none is drop-tail decided
    /// at arrival ([`crate::DirectionModel`]); one is run by [`crate::deferred`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_discipline: Option<crate::aqm::AqmConfig>,
}

/// Queue limit used when a rate is given without a queue (Linux's default `txqueuelen`).
pub const DEFAULT_QUEUE_PACKETS: u32 = 1000;

impl DirectionConfig {
    /// True when this direction changes nothing: no delay, loss, rate, reorder, duplicate or
    /// corruption. The I/O layer may then forward frames without scheduling them.
    pub fn is_transparent(&self) -> bool {
        self.delay_ns == 0
            && self.jitter.as_ref().is_none_or(|j| j.amount_ns == 0)
            && self.loss.as_ref().is_none_or(Loss::is_lossless)
            && self.rate_bps.is_none()
            && self.reorder.as_ref().is_none_or(|r| r.probability == 0.0)
            && self.duplicate == 0.0
            && self.corrupt == 0.0
            && !self.defers()
    }

    /// The first configured element that decides per wire packet — `"loss"`, `"duplicate"`,
    /// `"reorder"` or `"corrupt"` — or `None`. A GSO super-packet stands for many wire
    /// packets; these elements would drop, copy, move or damage all of them at once, so an
    /// emulator carrying super-packets (offloads on) must segment first (`tcplab_emu_io`
    /// does, per direction) or refuse. Delay, jitter, rate and queue work on super-packets exactly
    /// (`DirectionModel::arrive_train`).
    pub fn needs_per_packet(&self) -> Option<&'static str> {
        let flags = [
            !self.loss.as_ref().is_none_or(Loss::is_lossless),
            self.duplicate > 0.0,
            self.reorder.as_ref().is_some_and(|r| r.probability > 0.0),
            self.corrupt > 0.0,
        ];
        flags.iter().position(|&on| on).map(|i| PER_PACKET[i])
    }

    /// True if departure times may be non-monotonic in arrival order: a reorder element, or
    /// jitter that is allowed to reorder.
    pub fn may_reorder(&self) -> bool {
        let reorder = self.reorder.as_ref().is_some_and(|r| r.probability > 0.0);
        let jitter = self
            .jitter
            .as_ref()
            .is_some_and(|j| j.allow_reorder && j.amount_ns > 0);
        reorder || jitter
    }

    /// The queue limit in force (the default when a rate has none).
    pub fn queue_limit(&self) -> QueueLimit {
        self.queue
            .unwrap_or(QueueLimit::Packets(DEFAULT_QUEUE_PACKETS))
    }

    /// Checks every field against [`crate::limits`]; the error names the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        limits::delay(self.delay_ns).map_err(at("delay_ns"))?;
        if let Some(j) = &self.jitter {
            j.validate().map_err(|e| e.within("jitter"))?;
        }
        if let Some(l) = &self.loss {
            l.validate().map_err(|e| e.within("loss"))?;
        }
        if let Some(rate) = self.rate_bps {
            limits::rate(rate).map_err(at("rate_bps"))?;
        }
        match (self.queue, self.rate_bps) {
            (Some(_), None) => {
                return Err(ConfigError::field(
                    "queue",
                    ValueError::Invalid("a queue needs a rate: set rate_bps too".into()),
                ));
            }
            (Some(q), Some(_)) => limits::queue(q).map_err(at("queue"))?,
            _ => {}
        }
        limits::overhead(self.overhead_bytes).map_err(at("overhead_bytes"))?;
        if let Some(r) = &self.reorder {
            r.validate().map_err(|e| e.within("reorder"))?;
        }
        limits::probability("duplicate", self.duplicate).map_err(at("duplicate"))?;
        limits::probability("corrupt", self.corrupt).map_err(at("corrupt"))?;
        if let Some(d) = &self.queue_discipline {
            if self.rate_bps.is_none() {
                return Err(ConfigError::field(
                    "queue_discipline",
                    ValueError::Invalid(
                        "a queue discipline manages the queue of a rate limit: set rate_bps too"
                            .into(),
                    ),
                ));
            }
            d.validate()?;
        }
        Ok(())
    }

    /// True when a queue discipline other than drop-tail decides at the bottleneck (the
    /// direction then runs as [`crate::deferred::DeferredDirection`]).
    pub fn defers(&self) -> bool {
        self.queue_discipline
            .as_ref()
            .is_some_and(|d| *d != crate::aqm::AqmConfig::Droptail)
    }
}

/// Maps a value error to a field error for `field`.
fn at(field: &'static str) -> impl Fn(ValueError) -> ConfigError {
    move |e| ConfigError::field(field, e)
}

/// Random variation of the one-way delay: `delay + amount × Z`, Z drawn from `distribution`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Jitter {
    /// Scale of the variation in ns: the half-width for uniform, the standard deviation for
    /// normal, netem's sigma for pareto, paretonormal and tables (see [`crate::dist`]).
    pub amount_ns: Nanos,
    /// Shape of the variation.
    #[serde(default)]
    pub distribution: Distribution,
    /// Lag-1 correlation of successive draws in `0.0..1.0` (of the latent Gaussian; see
    /// [`crate::jitter`]).
    #[serde(default)]
    pub correlation: f64,
    /// Let jitter reorder packets, as netem does. Off by default: a packet never leaves before
    /// the one that arrived before it.
    #[serde(default)]
    pub allow_reorder: bool,
}

impl Jitter {
    fn validate(&self) -> Result<(), ConfigError> {
        limits::delay(self.amount_ns).map_err(|e| ConfigError::field("amount_ns", e))?;
        limits::correlation(self.correlation).map_err(|e| ConfigError::field("correlation", e))?;
        if let Distribution::Table(t) = &self.distribution {
            t.validate()
                .map_err(|e| ConfigError::field("distribution", e))?;
        }
        Ok(())
    }
}

/// Shape of the jitter. `Table` is an empirical table in netem's `.dist` format.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Distribution {
    /// Uniform in `delay ± amount` (netem's default).
    #[default]
    Uniform,
    /// Normal with standard deviation `amount`.
    Normal,
    /// netem's pareto: heavy right tail, mean ≈ delay.
    Pareto,
    /// netem's paretonormal: a quarter normal, three quarters pareto.
    Paretonormal,
    /// An empirical table (netem `.dist` values, scaled by 8192).
    Table(crate::DistTable),
}

/// The loss model at a direction's entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "snake_case", deny_unknown_fields)]
pub enum Loss {
    /// Each packet is lost independently with `probability`.
    Bernoulli {
        /// Loss probability.
        probability: f64,
    },
    /// netem's Gilbert-Elliott model (`loss gemodel p r 1-h 1-k`): a good and a bad state.
    GilbertElliott {
        /// Probability of moving good → bad at each packet.
        p: f64,
        /// Probability of moving bad → good at each packet.
        r: f64,
        /// Loss probability in the bad state (netem's `1-h`).
        one_minus_h: f64,
        /// Loss probability in the good state (netem's `1-k`).
        one_minus_k: f64,
    },
    /// A deterministic pattern that repeats (see [`crate::pattern`]).
    Pattern(LossPattern),
}

impl Loss {
    /// True if this model never drops a packet.
    pub fn is_lossless(&self) -> bool {
        match self {
            Self::Bernoulli { probability } => *probability == 0.0,
            Self::GilbertElliott {
                p,
                one_minus_h,
                one_minus_k,
                ..
            } => *one_minus_k == 0.0 && (*p == 0.0 || *one_minus_h == 0.0),
            Self::Pattern(p) => p.drops().is_empty(),
        }
    }

    /// Long-run fraction of packets lost (the stationary loss rate for Gilbert-Elliott:
    /// `π_bad = p/(p+r)`, loss = `π_good·(1-k) + π_bad·(1-h)`).
    pub fn mean_loss(&self) -> f64 {
        match self {
            Self::Bernoulli { probability } => *probability,
            Self::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            } => {
                if p + r == 0.0 {
                    // Never leaves the good state it starts in.
                    return *one_minus_k;
                }
                let bad = p / (p + r);
                (1.0 - bad) * one_minus_k + bad * one_minus_h
            }
            Self::Pattern(p) => p.drops().len() as f64 / p.period() as f64,
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let f = ConfigError::field;
        match self {
            Self::Bernoulli { probability } => {
                limits::probability("loss", *probability).map_err(|e| f("probability", e))
            }
            Self::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            } => {
                limits::probability("p", *p).map_err(|e| f("p", e))?;
                limits::probability("r", *r).map_err(|e| f("r", e))?;
                limits::probability("1-h", *one_minus_h).map_err(|e| f("one_minus_h", e))?;
                limits::probability("1-k", *one_minus_k).map_err(|e| f("one_minus_k", e))
            }
            Self::Pattern(p) => p.validate().map_err(|e| f("pattern", e)),
        }
    }
}

/// The bottleneck queue's drop-tail limit. The packet being serialised counts (dummynet's
/// rule): a limit of 64 packets holds the one on the wire and 63 waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueLimit {
    /// At most this many packets.
    Packets(u32),
    /// At most this many frame bytes (overhead not counted).
    Bytes(u64),
}

/// Packets that skip the delay line and so overtake the ones ahead (netem's `reorder`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reorder {
    /// Probability that a candidate packet skips the delay line.
    pub probability: f64,
    /// With a gap N, only a packet that follows at least N−1 delayed packets is a candidate
    /// (netem's `gap`); 0 or 1 makes every packet a candidate.
    #[serde(default)]
    pub gap: u32,
}

impl Reorder {
    fn validate(&self) -> Result<(), ConfigError> {
        limits::probability("reorder", self.probability)
            .map_err(|e| ConfigError::field("probability", e))?;
        limits::gap(self.gap).map_err(|e| ConfigError::field("gap", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_errors_name_the_field_path() {
        let mut cfg = LinkConfig::default();
        cfg.forward.loss = Some(Loss::GilbertElliott {
            p: 0.1,
            r: 0.1,
            one_minus_h: 2.0,
            one_minus_k: 0.0,
        });
        assert_eq!(
            cfg.validate().unwrap_err().to_string(),
            "forward.loss.one_minus_h: 1-h must be between 0% and 100%"
        );
        let mut cfg = LinkConfig::default();
        cfg.reverse.queue = Some(QueueLimit::Packets(10));
        assert_eq!(
            cfg.validate().unwrap_err().to_string(),
            "reverse.queue: a queue needs a rate: set rate_bps too"
        );
        let mut cfg = LinkConfig::default();
        cfg.forward.jitter = Some(Jitter {
            amount_ns: 1,
            distribution: Distribution::Normal,
            correlation: f64::NAN,
            allow_reorder: false,
        });
        assert!(cfg.validate().is_err(), "NaN is rejected");
    }

    #[test]
    fn transparency_and_reordering() {
        let mut d = DirectionConfig::default();
        assert!(d.is_transparent() && !d.may_reorder());
        d.loss = Some(Loss::Bernoulli { probability: 0.0 });
        assert!(d.is_transparent());
        d.corrupt = 0.01;
        assert!(!d.is_transparent() && !d.may_reorder());
        d.reorder = Some(Reorder {
            probability: 0.5,
            gap: 0,
        });
        assert!(d.may_reorder());
    }

    #[test]
    fn gilbert_elliott_mean_loss_formula() {
        let ge = Loss::GilbertElliott {
            p: 0.01,
            r: 0.25,
            one_minus_h: 1.0,
            one_minus_k: 0.0,
        };
        assert!((ge.mean_loss() - 0.01 / 0.26).abs() < 1e-15);
    }
}
