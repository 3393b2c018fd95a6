//! msgs's configuration and result: the sfperf test, `count` messages of `size` bytes one way
//! with a stamp at every write and at every message's last read (the run itself is
//! `tcplab_load::msgs`). The stamps are kept for `--samples` but not serialised.

use serde::{Deserialize, Serialize};

use crate::error::{ConfigError, config};
use crate::session::RunMeta;
use crate::sockopt::SockOpts;
use crate::stamps::Stamps;
use crate::stats::{Dist, Summary};

/// Most messages in one run (two 8-byte stamps each must fit in memory).
pub const MAX_COUNT: u64 = 10_000_000;
/// Largest message.
pub const MAX_SIZE: u32 = 16 << 20;
/// Most bytes in one run.
pub const MAX_TOTAL_BYTES: u64 = 64 << 30;

/// How the sender writes each message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// One write per message.
    #[default]
    Write,
    /// Two writes (first half, second half), then read a 1-byte reply from the receiver.
    WriteWriteRead,
}

/// Parameters of a msgs run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MsgsConfig {
    /// Messages per run (`--count`).
    pub count: u64,
    /// Message size in bytes (`--size`).
    #[serde(with = "crate::units::serde_size_u32")]
    pub size: u32,
    /// Sweep these sizes instead of `size` (`--sizes`), one run each.
    pub sizes: Vec<u32>,
    /// Pacing: the write of message i starts at start + i·gap (`--gap-us`, 0 = back to back).
    #[serde(rename = "pace", with = "crate::units::serde_us")]
    pub gap_us: u64,
    /// With `gap_us`, each write starts at least a gap after the one before (`--spaced`)
    /// instead of at its slot on the schedule: a sender that falls behind (a preempted thread)
    /// then never sends the late messages back to back, so the run cannot burst into a short
    /// queue; its average rate drops instead. The doctor's paced runs use it so that they
    /// never queue at the bottleneck.
    pub spaced: bool,
    /// Write pattern (`--pattern`).
    pub pattern: Pattern,
    /// Take per-message timestamps (`--no-timestamps` turns them off to measure their cost).
    pub timestamps: bool,
    /// Link rate for the theoretical best (`--link-rate`).
    #[serde(
        rename = "link_rate",
        with = "crate::units::serde_rate_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub link_rate_bps: Option<u64>,
    /// A receive gap above this many ms counts as a stall (`--stall-ms`).
    pub stall_ms: f64,
    /// Socket options of the data connection (both sides).
    #[serde(rename = "socket")]
    pub opts: SockOpts,
    /// Idle timeout of every wait (`--timeout`).
    #[serde(rename = "timeout", with = "crate::units::serde_ms")]
    pub timeout_ms: u64,
}

impl Default for MsgsConfig {
    fn default() -> Self {
        Self {
            count: 100_000,
            size: 1,
            sizes: Vec::new(),
            gap_us: 0,
            spaced: false,
            pattern: Pattern::Write,
            timestamps: true,
            link_rate_bps: None,
            stall_ms: 5.0,
            opts: SockOpts::default(),
            timeout_ms: 10_000,
        }
    }
}

impl MsgsConfig {
    /// Checks every field; errors name the flag.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.count == 0 || self.count > MAX_COUNT {
            return Err(config(
                "count",
                format!("{} is outside 1..={MAX_COUNT}", self.count),
            ));
        }
        let sizes: &[u32] = if self.sizes.is_empty() {
            std::slice::from_ref(&self.size)
        } else {
            &self.sizes
        };
        let flag = if self.sizes.is_empty() {
            "size"
        } else {
            "sizes"
        };
        for &s in sizes {
            if s == 0 || s > MAX_SIZE {
                return Err(config(flag, format!("{s} bytes is outside 1..={MAX_SIZE}")));
            }
            if self.pattern == Pattern::WriteWriteRead && s < 2 {
                return Err(config(
                    flag,
                    "write-write-read needs messages of at least 2 bytes",
                ));
            }
            if self.count.saturating_mul(u64::from(s)) > MAX_TOTAL_BYTES {
                return Err(config(
                    "count",
                    format!("{} x {s} bytes exceeds {MAX_TOTAL_BYTES} bytes", self.count),
                ));
            }
        }
        if self.gap_us > 10_000_000 {
            return Err(config("gap-us", "at most 10 s between messages"));
        }
        if !(self.stall_ms.is_finite() && self.stall_ms > 0.0) {
            return Err(config("stall-ms", "must be a positive number of ms"));
        }
        if self.link_rate_bps == Some(0) {
            return Err(config("link-rate", "must be above 0 bit/s"));
        }
        if self.timeout_ms == 0 {
            return Err(config("timeout", "must be above 0"));
        }
        self.opts.validate()
    }

    /// The configuration of one run of a sweep: `size`, no `sizes`.
    pub fn one(&self, size: u32) -> Self {
        Self {
            size,
            sizes: Vec::new(),
            ..self.clone()
        }
    }
}

/// The theoretical best on an Ethernet link of a given rate (no merging of messages).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Theory {
    /// Link rate used, bit/s.
    pub link_rate_bps: u64,
    /// Bytes on the wire per message: payload + 52 (IPv4 20, TCP 20 + 12 timestamp option)
    /// per segment of at most 1448 payload bytes, + 18 (Ethernet header and FCS) padded to the
    /// 64-byte minimum frame, + 20 (preamble and inter-frame gap).
    pub wire_bytes_per_message: u64,
    /// Time per message at line rate, µs.
    pub per_message_us: f64,
    /// Time for all messages at line rate, s.
    pub total_s: f64,
}

impl Theory {
    /// The line-rate figures for `count` messages of `size` bytes at `rate` bit/s.
    pub fn new(size: u32, count: u64, rate: u64) -> Self {
        let segs = u64::from(size).div_ceil(1448).max(1);
        let frames = u64::from(size) + segs * 52 + segs * 18;
        let padded = frames.max(segs * 64);
        let wire = padded + segs * 20;
        let per = wire as f64 * 8.0 / rate as f64 * 1e6;
        Self {
            link_rate_bps: rate,
            wire_bytes_per_message: wire,
            per_message_us: per,
            total_s: per * count as f64 / 1e6,
        }
    }
}

/// Figures of one msgs run (one size).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MsgsRun {
    /// Message size, bytes.
    pub size: u32,
    /// Messages asked for.
    pub count: u64,
    /// Messages fully written.
    pub sent: u64,
    /// Messages fully received.
    pub received: u64,
    /// First write start to last write return (write-write-read: to the last reply), s.
    pub total_s: f64,
    /// Per-message cost: time from the start of one message's write to the next's (the last
    /// runs to the end), µs; its mean is total_s / sent. With timestamps off only the mean.
    pub per_message_us: Summary,
    /// One-way delay, µs (null with timestamps off).
    pub one_way_us: Option<Dist>,
    /// Gaps between consecutive message receptions, µs.
    pub recv_gap_us: Option<Dist>,
    /// Receive gaps above `stall_ms`.
    pub stalls: u64,
    /// Median number of messages between stalls (the "every 41st packet" figure).
    pub stall_every: Option<f64>,
    /// Line-rate best, when a link rate was given.
    pub theoretical: Option<Theory>,
    /// Send stamps (CLOCK_MONOTONIC ns), kept for --samples (a long run's in a file).
    #[serde(skip)]
    pub send_ns: Stamps,
    /// Receive stamps (CLOCK_MONOTONIC ns), kept for --samples (a long run's in a file).
    #[serde(skip)]
    pub recv_ns: Stamps,
    /// Where the client's time around the timed loop went (not part of the result's JSON: a
    /// harness's cost, not the workload's; a sweep adds it to its overhead report).
    #[serde(skip)]
    pub phases: Phases,
}

/// The client's time outside the timed loop, ns, for overhead accounting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Phases {
    /// Control connection, test sent, Ready received, data connection open.
    pub setup_ns: u64,
    /// From the later of the last write's return and the last message's arrival to the server's
    /// report (receive stamps included) decoded.
    pub report_ns: u64,
    /// The run's summaries (per-message cost, one-way delay, receive gaps, stalls).
    pub summary_ns: u64,
}

/// The `summary` object of a msgs result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MsgsSummary {
    /// Total time of the (first) run, s.
    pub total_s: f64,
    /// Per-message cost of the (first) run, µs.
    pub per_message_us: Summary,
    /// One-way delay of the (first) run, µs.
    pub one_way_us: Option<Dist>,
}

/// A msgs result: one run per size.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MsgsResult {
    /// Common record.
    #[serde(flatten)]
    pub meta: RunMeta,
    /// What was asked.
    pub config: MsgsConfig,
    /// The first (or only) size's headline figures.
    pub summary: MsgsSummary,
    /// Every size's figures, in the order run.
    pub runs: Vec<MsgsRun>,
    /// With --sizes: the smallest size from which on no run stalled while a smaller one did
    /// (seed 004's K); null when no run stalled or the largest did.
    pub threshold_size: Option<u32>,
}

/// One interval of a running msgs run, as streamed with `--ndjson` (the sender's side: the
/// receiver's stamps arrive with the server's report at the end).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MsgsInterval {
    /// Interval number from 0 (restarts at each size of a sweep).
    pub index: u32,
    /// Start, s since the run started.
    pub start_s: f64,
    /// End, s.
    pub end_s: f64,
    /// Message size of the run, bytes.
    pub size: u32,
    /// Messages whose write started in the interval.
    pub messages: u64,
    /// Their rate, per second.
    pub messages_per_s: Option<f64>,
    /// Payload bit/s they carried.
    pub sent_bps: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn theory_matches_seed_001() {
        // Seed 001: "7.2 microseconds is the theoretical best time using fast ethernet" for one
        // byte; with the 12-byte timestamp option our model gives 91 bytes = 7.28 µs.
        let t = Theory::new(1, 100_000, 100_000_000);
        assert_eq!(t.wire_bytes_per_message, 91);
        assert!((t.per_message_us - 7.28).abs() < 1e-9);
        assert!((t.total_s - 0.728).abs() < 1e-9);
        // A full-size segment: 1448 + 52 + 18 + 20 = 1538 bytes on the wire.
        assert_eq!(
            Theory::new(1448, 1, 1_000_000_000).wire_bytes_per_message,
            1538
        );
        assert_eq!(
            Theory::new(1449, 1, 1_000_000_000).wire_bytes_per_message,
            1449 + 2 * 90
        );
    }
    #[test]
    fn bad_sizes_name_their_flag() {
        let e = MsgsConfig {
            size: 0,
            ..MsgsConfig::default()
        }
        .validate()
        .expect_err("size 0");
        assert_eq!(
            e.to_string(),
            format!("invalid --size: 0 bytes is outside 1..={MAX_SIZE}")
        );
        let e = MsgsConfig {
            sizes: vec![4, MAX_SIZE + 1],
            ..MsgsConfig::default()
        }
        .validate()
        .expect_err("big");
        assert!(e.to_string().starts_with("invalid --sizes:"), "{e}");
        let e = MsgsConfig {
            count: 0,
            ..MsgsConfig::default()
        }
        .validate()
        .expect_err("count 0");
        assert!(e.to_string().starts_with("invalid --count:"), "{e}");
        let e = MsgsConfig {
            pattern: Pattern::WriteWriteRead,
            ..MsgsConfig::default()
        }
        .validate()
        .expect_err("1 byte");
        assert!(e.to_string().contains("at least 2 bytes"), "{e}");
    }
}
