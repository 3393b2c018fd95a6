//! The path, estimated from what the battery measured rather than configured: its bottleneck
//! rate, its round-trip time without a queue, and the queue a load stands in it. Against a
//! real host nothing else says what the path is; on a lab the configuration does, and the
//! rules prefer it (`Context::rate`).
//!
//! Pure: a battery in, figures out, each with the range it is believed in, how sure it is,
//! and what it was inferred from.
//!
//! - **Rate.** (1) The packet train's dispersion: a sender that does not pace sends windows
//!   back to back, the bottleneck spaces them, and the far end stamps their arrival: within a
//!   burst of arrivals, bytes / time is the bottleneck's rate, whatever limits the flow's
//!   average (a small receive window sends one burst per round trip, each at the path's rate).
//!   (2) BBR's own bandwidth estimate (`TCP_CC_INFO`), a windowed maximum of delivery rates.
//!   (3) A bulk flow that stood a queue at the bottleneck, limited by neither window, filled
//!   the link: its throughput is the rate. Every flow's throughput is also a floor.
//! - **Base RTT.** The smallest RTT a flow saw (tcp_info `min_rtt`), checked against the idle
//!   request/response latency: on a path that reorders, a packet that overtook the others gives
//!   a `min_rtt` no packet in order sees.
//! - **Standing queue.** Latency under load against idle (the probes beside the load), else a
//!   bulk flow's smoothed RTT against the base.

use serde::{Deserialize, Serialize};
use tcplab_results::msgs::MsgsResult;
use tcplab_results::rrul::LoadDirection;
use tcplab_results::stream::StreamResult;
use tcplab_stats::quantile;

use crate::battery::Battery;
use crate::rules::stream_view::StreamView;

/// How sure an estimate is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sure {
    /// Only a floor: the path can do at least this much (nothing showed its limit).
    Floor,
    /// One method, or methods that disagree by more than a quarter.
    Rough,
    /// Two or more methods agree within a quarter.
    Firm,
}

/// One estimated figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The estimate (bit/s for a rate, s for a time).
    pub value: f64,
    /// The lowest value the evidence allows.
    pub low: f64,
    /// The highest value the evidence allows (`value` for a floor: nothing bounds it above).
    pub high: f64,
    /// How sure.
    pub sure: Sure,
    /// What it was inferred from, in words.
    pub how: String,
}

impl Sure {
    /// The word a finding uses.
    pub fn word(self) -> &'static str {
        match self {
            Self::Floor => "a floor only",
            Self::Rough => "rough",
            Self::Firm => "firm",
        }
    }
}

impl Estimate {
    /// Whether the estimate bounds the figure (not only a floor).
    pub fn bounded(&self) -> bool {
        self.sure != Sure::Floor
    }
}

/// The path as the battery saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathEstimate {
    /// The bottleneck's rate, bit/s.
    pub rate: Option<Estimate>,
    /// The round-trip time without a queue, s.
    pub base_rtt: Option<Estimate>,
    /// The delay a load adds at the bottleneck (per loaded direction), s.
    pub standing_queue: Option<Estimate>,
    /// The rate the path is sold as (`--rate` with `--to`), bit/s, beside the measured one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sold_rate_bps: Option<f64>,
}

impl PathEstimate {
    /// Whether nothing was estimated.
    pub fn is_empty(&self) -> bool {
        self.rate.is_none()
            && self.base_rtt.is_none()
            && self.standing_queue.is_none()
            && self.sold_rate_bps.is_none()
    }
}

impl std::fmt::Display for PathEstimate {
    /// One line per figure: what the battery measured of the path, how sure, and from what.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "the path as measured:")?;
        if let Some(r) = &self.rate {
            let range = if r.bounded() && r.high > r.low {
                format!(" ({:.1}-{:.1})", r.low / 1e6, r.high / 1e6)
            } else {
                String::new()
            };
            writeln!(
                f,
                "  bottleneck rate   {}{:.1} Mbit/s{range}, {}: {}",
                if r.bounded() { "" } else { "at least " },
                r.value / 1e6,
                r.sure.word(),
                r.how
            )?;
        }
        if let Some(sold) = self.sold_rate_bps {
            let share = self.rate.as_ref().map_or(String::new(), |r| {
                format!(
                    ": the battery measured {:.0}% of it",
                    r.value / sold * 100.0
                )
            });
            writeln!(
                f,
                "  sold as           {:.1} Mbit/s (--rate){share}",
                sold / 1e6
            )?;
        }
        if let Some(r) = &self.base_rtt {
            writeln!(
                f,
                "  base RTT          {:.2} ms, {}: {}",
                r.value * 1e3,
                r.sure.word(),
                r.how
            )?;
        }
        if let Some(q) = &self.standing_queue {
            writeln!(
                f,
                "  standing queue    {:.1} ms under load, {}: {}",
                q.value * 1e3,
                q.sure.word(),
                q.how
            )?;
        }
        Ok(())
    }
}

/// Two rate methods agree when within this factor of each other.
pub const AGREE: f64 = 1.25;

/// A spacing this many times the typical one is a pause of the sender (a window-limited flow
/// waits a round trip for ACKs; a loss waits for its retransmission), not the bottleneck's.
pub const BURST_GAP_FACTOR: f64 = 4.0;

/// The smallest gap taken for a pause, ns: a receiver's wake-up and coalescing can hold
/// arrivals back by this much without the sender having paused.
pub const MIN_BURST_GAP_NS: f64 = 1_000_000.0;

/// A bulk flow whose smoothed RTT exceeds its minimum by this share (and by
/// [`QUEUE_MIN_S`]) stood a queue at the bottleneck: with neither window limiting it, it
/// filled the link.
pub const QUEUE_SHARE: f64 = 0.1;

/// The smallest standing queue that shows a full link, s: below it timing noise (delayed ACKs,
/// the host's scheduling) moves the RTT as much.
pub const QUEUE_MIN_S: f64 = 0.000_5;

/// ... and holds at least this many segments at the flow's rate.
pub const QUEUE_MIN_SEGMENTS: f64 = 4.0;

/// A flow limited by its windows (or by its application) this share of its busy time did not
/// fill the link, whatever its RTT.
pub const LIMITED_SHARE: f64 = 0.2;

/// Everything the battery says of the path.
pub fn of(b: &Battery) -> PathEstimate {
    let base_rtt = base_rtt(b);
    PathEstimate {
        rate: rate(b),
        standing_queue: standing_queue(b, base_rtt.as_ref()),
        base_rtt,
        sold_rate_bps: b.path.sold_rate_bps,
    }
}

/// The bottleneck rate from the train, BBR's estimate and a flow that filled the link, with
/// every flow's throughput as a floor. The train's dispersion, when it has one, is the value:
/// it measures the bottleneck whatever limits the flows; the others confirm it.
fn rate(b: &Battery) -> Option<Estimate> {
    let floor = floor_bps(b);
    let floor_v = floor.as_ref().map_or(0.0, |f| f.0);
    // A method below what a flow really carried is wrong (a train cut short, a BBR estimate
    // of an application-limited moment): the floor overrules it.
    let credible = |v: &f64| *v >= floor_v / AGREE;
    let train = b
        .train
        .as_ref()
        .and_then(dispersion)
        .filter(|d| credible(&d.rate_bps) && d.share >= MIN_MODE_SHARE);
    let mut others: Vec<(f64, String)> = Vec::new();
    if let Some(bw) = bbr_bandwidth(b) {
        others.push((
            bw,
            format!(
                "BBR's bandwidth estimate (TCP_CC_INFO), {:.1} Mbit/s",
                bw / 1e6
            ),
        ));
    }
    if let Some(t) = b.stream.as_ref().and_then(filled_link) {
        others.push((
            t,
            format!("the bulk flow stood a queue and no window held it: it filled the link at {:.1} Mbit/s", t / 1e6),
        ));
    }
    others.retain(|(v, _)| credible(v));
    let (value, mut how, strong) = match (&train, others.as_slice()) {
        (Some(d), _) => (
            d.rate_bps,
            vec![format!(
                "packet-train dispersion: the most common spacing of back-to-back segments at the far end, {:.1} Mbit/s ({:.0}% of {} spacings)",
                d.rate_bps / 1e6,
                d.share * 100.0,
                d.samples
            )],
            d.share >= STRONG_MODE_SHARE && d.samples >= STRONG_MODE_SAMPLES,
        ),
        (None, []) => {
            let (v, what) = floor?;
            return Some(Estimate {
                value: v,
                low: v,
                high: v,
                sure: Sure::Floor,
                how: format!("{what}: nothing showed the path's limit"),
            });
        }
        (None, [first, ..]) => (first.0, vec![first.1.clone()], false),
    };
    let agreeing: Vec<f64> = others
        .iter()
        .filter(|(v, _)| *v <= AGREE * value && value <= AGREE * *v)
        .map(|o| o.0)
        .collect();
    how.extend(
        others
            .iter()
            .skip(usize::from(train.is_none()))
            .map(|o| o.1.clone()),
    );
    let confirmed = agreeing.len() >= if train.is_some() { 1 } else { 2 };
    let value = value.max(floor_v);
    Some(Estimate {
        value,
        low: agreeing.iter().copied().fold(value, f64::min),
        high: agreeing.iter().copied().fold(value, f64::max),
        sure: if strong || confirmed {
            Sure::Firm
        } else {
            Sure::Rough
        },
        how: how.join("; "),
    })
}

/// A dispersion whose most common spacing holds less than this share of the reads has no
/// spacing the bottleneck imposed: a train that a queue of a few packets cut to pieces, or a
/// path that reorders, leaves reads spaced every which way. It is left out.
pub const MIN_MODE_SHARE: f64 = 0.2;

/// A dispersion whose most common spacing holds this share of the reads stands on its own.
pub const STRONG_MODE_SHARE: f64 = 0.5;

/// ... with at least this many spacings.
pub const STRONG_MODE_SAMPLES: usize = 100;

/// The most any flow of the battery carried, bit/s, and which.
fn floor_bps(b: &Battery) -> Option<(f64, String)> {
    let mut best: Option<(f64, String)> = None;
    let mut take = |v: Option<f64>, what: &str| {
        if let Some(v) = v.filter(|v| v.is_finite() && *v > 0.0) {
            if best.as_ref().is_none_or(|b| v > b.0) {
                best = Some((v, format!("{:.1} Mbit/s, what {what} carried", v / 1e6)));
            }
        }
    };
    take(
        b.stream.as_ref().and_then(|s| s.summary.throughput_bps),
        "the bulk flow",
    );
    if let Some(r) = &b.rrul {
        take(r.summary.up_bps, "the load up");
        take(r.summary.down_bps, "the load down");
    }
    take(
        b.train.as_ref().and_then(train_throughput),
        "the packet train",
    );
    best
}

/// The train's average throughput over its arrivals at the far end, bit/s.
fn train_throughput(m: &MsgsResult) -> Option<f64> {
    let run = m.runs.first()?;
    let mut stamps = run.recv_ns.iter();
    let first = stamps.next()?;
    let last = stamps.last()?;
    let span = last.saturating_sub(first) as f64 / 1e9;
    (span > 0.0).then(|| run.recv_ns.len() as f64 * f64::from(run.size) * 8.0 / span)
}

/// What the train's arrivals at the far end say of the bottleneck.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dispersion {
    /// The bottleneck's rate: the most common spacing of arrivals, as a rate, bit/s.
    pub rate_bps: f64,
    /// Spacings measured (one per read that followed another without an idle gap).
    pub samples: usize,
    /// Share of the messages whose spacing falls in the most common one's bins.
    pub share: f64,
}

/// The bottleneck rate from a train's receive stamps. Every read the far end made delivered
/// one or more messages (a receiver's coalescing hands several over at once); the time since
/// the previous read over the messages it delivered is their spacing at the bottleneck. Gaps
/// where the sender paused (waiting for ACKs, or for a retransmission) are left out. The
/// spacings' most common value, weighted by messages, is the bottleneck's: a window-limited
/// sender's round-trip pauses, a receiver that read late and caught up, and a recovery's
/// ACK-clocked trickle each move some spacings, in both directions, but not the most common
/// one (the packet-pair "mode" of pathrate, Dovrolis et al. 2004). `None` with fewer than
/// [`MIN_SPACINGS`] spacings.
pub fn dispersion(train: &MsgsResult) -> Option<Dispersion> {
    let run = train.runs.first()?;
    let recv: Vec<u64> = run.recv_ns.iter().collect();
    dispersion_of(&recv, run.size)
}

/// Fewest spacings for a dispersion.
pub const MIN_SPACINGS: usize = 24;

/// Width of a bin of the spacings' histogram, as a ratio: 5 %.
pub const BIN_RATIO: f64 = 1.05;

/// [`dispersion`] over receive stamps (ns, in message order) of messages of `size` bytes.
pub fn dispersion_of(recv: &[u64], size: u32) -> Option<Dispersion> {
    // Reads: (stamp, messages delivered).
    let mut reads: Vec<(u64, u64)> = Vec::new();
    for &t in recv {
        match reads.last_mut() {
            Some(last) if last.0 == t => last.1 += 1,
            _ => reads.push((t, 1)),
        }
    }
    let per_message: Vec<(f64, u64)> = reads
        .windows(2)
        .filter(|w| w[1].0 > w[0].0)
        .map(|w| ((w[1].0 - w[0].0) as f64 / w[1].1 as f64, w[1].1))
        .collect();
    let typical = quantile(&per_message.iter().map(|p| p.0).collect::<Vec<_>>(), 0.5).ok()?;
    let bits = f64::from(size) * 8.0;
    let spacings: Vec<(f64, u64)> = per_message
        .into_iter()
        .filter(|(each, k)| {
            *each * *k as f64 <= (BURST_GAP_FACTOR * typical * *k as f64).max(MIN_BURST_GAP_NS)
        })
        .map(|(each, k)| (bits / (each / 1e9), k))
        .collect();
    if spacings.len() < MIN_SPACINGS {
        return None;
    }
    let bin = |rate: f64| (rate.ln() / BIN_RATIO.ln()).round() as i64;
    // Each read is one observation, however many messages it delivered: a read after a hole
    // in the sequence was filled delivers a window at once, and must not outweigh the many
    // reads that saw the bottleneck's spacing.
    let spacings: Vec<(f64, u64)> = spacings.into_iter().map(|(rate, _)| (rate, 1)).collect();
    let mut histogram: std::collections::BTreeMap<i64, u64> = std::collections::BTreeMap::new();
    for (rate, k) in &spacings {
        *histogram.entry(bin(*rate)).or_default() += k;
    }
    let around = |b: i64| {
        (b - 1..=b + 1)
            .map(|x| histogram.get(&x).copied().unwrap_or(0))
            .sum::<u64>()
    };
    let (&mode, _) = histogram.iter().max_by_key(|(b, _)| around(**b))?;
    let mut near: Vec<(f64, u64)> = spacings
        .iter()
        .copied()
        .filter(|(rate, _)| (bin(*rate) - mode).abs() <= 1)
        .collect();
    near.sort_by(|a, b| a.0.total_cmp(&b.0));
    let weight: u64 = near.iter().map(|p| p.1).sum();
    let total: u64 = spacings.iter().map(|p| p.1).sum();
    let mut acc = 0;
    let rate = near
        .iter()
        .find(|(_, k)| {
            acc += k;
            2 * acc >= weight
        })
        .map(|p| p.0)?;
    Some(Dispersion {
        rate_bps: rate,
        samples: spacings.len(),
        share: weight as f64 / total.max(1) as f64,
    })
}

/// A BBR sender's own bandwidth estimate (bit/s): its windowed maximum of delivery rates, the
/// path's rate once it has probed, where no window held the flow (a window-limited flow's
/// estimate is its window's rate). The median over the bulk flow's measured intervals: a
/// single sample can carry an aggregation burst's excess.
fn bbr_bandwidth(b: &Battery) -> Option<f64> {
    let s = b.stream.as_ref()?;
    let view = StreamView::of(s)?;
    let windows = view
        .limited_fraction(|f| f.rwnd_limited_us() + f.sndbuf_limited_us())
        .unwrap_or(0.0);
    if windows >= LIMITED_SHARE {
        return None;
    }
    let samples: Vec<f64> = s
        .intervals
        .iter()
        .chain(&s.server_intervals)
        .filter(|i| i.sending && !i.omitted)
        .filter_map(|i| i.tcp_info)
        .map(|t| t.cc_bw_bps as f64)
        .filter(|v| *v > 0.0)
        .collect();
    quantile(&samples, 0.5).ok()
}

/// A bulk flow's throughput when it filled the link: it stood a queue (smoothed RTT above its
/// minimum by [`QUEUE_SHARE`] and [`QUEUE_MIN_S`]) and neither window nor its application held
/// it for [`LIMITED_SHARE`] of its busy time.
fn filled_link(s: &StreamResult) -> Option<f64> {
    let view = StreamView::of(s)?;
    let (srtt, min) = (view.rtt_s?, view.min_rtt_s?);
    // A queue of a few segments at least: a flow of a window of two stretches its RTT samples
    // by the receiver's delayed ACKs, not by a queue.
    let mss = view.mss.unwrap_or(1448.0);
    let queue_bytes = (srtt - min) * view.throughput_bps / 8.0;
    let queued = srtt - min >= (QUEUE_SHARE * min).max(QUEUE_MIN_S)
        && queue_bytes >= QUEUE_MIN_SEGMENTS * mss;
    let windows = view
        .limited_fraction(|f| f.rwnd_limited_us() + f.sndbuf_limited_us())
        .unwrap_or(0.0);
    let free = windows < LIMITED_SHARE && view.app_limited_share < LIMITED_SHARE;
    (queued && free).then_some(view.throughput_bps)
}

/// The base RTT: a flow's `min_rtt` when it is within [half, all] of the idle request/response
/// latency (the latter carries two hosts' wake-ups on top of the path), else that latency.
fn base_rtt(b: &Battery) -> Option<Estimate> {
    let idle =
        b.rr.as_ref()
            .and_then(|r| r.summary.latency_us.p50)
            .or_else(|| {
                b.rrul
                    .as_ref()
                    .and_then(|r| r.summary.inflation.before_p50_us)
            })
            .filter(|v| *v > 0.0)
            .map(|us| us / 1e6);
    let own = min_rtt(b);
    let (value, how, sure) = match (idle, own) {
        (Some(i), Some(m)) if m >= 0.5 * i && m <= i => (
            m,
            format!(
                "the smallest RTT of the bulk flows (tcp_info min_rtt {:.2} ms), the idle request/response latency {:.2} ms beside it",
                m * 1e3,
                i * 1e3
            ),
            if i <= AGREE * m {
                Sure::Firm
            } else {
                Sure::Rough
            },
        ),
        (Some(i), _) => (
            i,
            format!("the idle request/response latency, {:.2} ms", i * 1e3),
            Sure::Rough,
        ),
        (None, Some(m)) => (
            m,
            format!(
                "the smallest RTT of the bulk flows (tcp_info min_rtt), {:.2} ms",
                m * 1e3
            ),
            Sure::Rough,
        ),
        (None, None) => return None,
    };
    Some(Estimate {
        value,
        low: own.unwrap_or(value).min(value),
        high: idle.unwrap_or(value).max(value),
        sure,
        how,
    })
}

/// The smallest `min_rtt` of the battery's bulk flows and train, s.
fn min_rtt(b: &Battery) -> Option<f64> {
    let streams = b
        .stream
        .iter()
        .chain(b.rrul.as_ref().map(|r| &r.bulk))
        .flat_map(|s| s.intervals.iter().chain(&s.server_intervals))
        .filter(|i| i.sending)
        .filter_map(|i| i.tcp_info)
        .map(|t| t.min_rtt_us);
    streams
        .filter(|v| *v > 0)
        .min()
        .map(|us| f64::from(us) / 1e6)
}

/// The delay a load stands at the bottleneck, per loaded direction: the probes beside the load
/// against before it, else the bulk flow's smoothed RTT against the base.
fn standing_queue(b: &Battery, base: Option<&Estimate>) -> Option<Estimate> {
    if let Some(r) = &b.rrul {
        let i = &r.summary.inflation;
        if let (Some(before), Some(during)) = (i.before_p50_us, i.during_p50_us) {
            let directions = match r.config.direction {
                LoadDirection::Both => 2.0,
                LoadDirection::Up | LoadDirection::Down => 1.0,
            };
            let q = ((during - before) / 1e6 / directions).max(0.0);
            return Some(Estimate {
                value: q,
                low: q,
                high: q,
                sure: Sure::Rough,
                how: format!(
                    "request/response probes while bulk flows ran ({:.1} ms median) against before them ({:.1} ms), per loaded direction",
                    during / 1e3,
                    before / 1e3
                ),
            });
        }
    }
    let view = b.stream.as_ref().and_then(StreamView::of)?;
    let q = (view.rtt_s? - base?.value).max(0.0);
    Some(Estimate {
        value: q,
        low: q,
        high: q,
        sure: Sure::Rough,
        how: "the bulk flow's median smoothed RTT against the base RTT".into(),
    })
}

#[cfg(test)]
mod tests;
