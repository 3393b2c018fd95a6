//! stream's configuration and result: bulk throughput over N parallel flows (the run itself
//! is `tcplab_load::stream`). Throughput is what the *receiver* got: for up it comes from the
//! server's intervals, for down from the client's.

use serde::{Deserialize, Serialize};

use crate::error::{ConfigError, config};
use crate::session::RunMeta;
use crate::sockopt::SockOpts;
use crate::stats::ratio;
use crate::tcpinfo::TcpInfo;

/// Most flows per direction.
pub const MAX_FLOWS: u32 = 128;
/// Largest single write.
pub const MAX_WRITE: u32 = 16 << 20;
/// Smallest read, bytes (iperf3's default too). Larger reads cost less CPU per GB but drain
/// the socket faster, so the kernel's receive-buffer autotuning (DRS) opens a larger window: on
/// an emulated path 1 MiB reads raised `rcv_space` from ~1 MB to ~2.4 MB and the RTT from
/// ~0.5 ms to ~2.5 ms (a queue inside the emulator) without more throughput. The reader must
/// not change the path it measures.
pub const RECV_BUF: usize = 128 << 10;

/// Which way the data goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Client sends, server receives.
    #[default]
    Up,
    /// Server sends, client receives.
    Down,
    /// N flows each way at once.
    Bidir,
}

/// How often a stream records its interval reports and tcp_info samples unless told, ms. A
/// study's time plots need it: at 1 s a 3 s run is three points and slow start, a loss's
/// sawtooth or a queue filling average away; at 100 ms the sampler wakes ten times a second
/// per side, which costs the flows nothing measurable. `tcplab stream`'s own `--interval`
/// defaults to 1 s: a terminal reads one line a second.
pub const DEFAULT_INTERVAL_MS: u64 = 100;

/// Parameters of a stream run. The serde form is a scenario's `kind = "stream"` table (and the
/// `config` of a result): durations, sizes and rates written with units (`crate::units`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StreamConfig {
    /// Parallel flows per direction (`--flows`).
    pub flows: u32,
    /// Direction (`--dir`).
    pub direction: Direction,
    /// Stop sending after this long (`--duration`); with `bytes`, whichever comes first.
    #[serde(
        rename = "duration",
        default,
        with = "crate::units::serde_ms_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration_ms: Option<u64>,
    /// Stop after this many bytes per direction (`--bytes`).
    #[serde(
        with = "crate::units::serde_size_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub bytes: Option<u64>,
    /// Leave the first ms out of the figures (`--omit`).
    #[serde(rename = "omit", with = "crate::units::serde_ms")]
    pub omit_ms: u64,
    /// Interval of reports and tcp_info samples (`--interval`).
    #[serde(rename = "interval", with = "crate::units::serde_ms")]
    pub interval_ms: u64,
    /// Bytes per write (`--write-size`).
    #[serde(with = "crate::units::serde_size_u32")]
    pub write_size: u32,
    /// Socket options of the data connections (both sides).
    #[serde(rename = "socket")]
    pub opts: SockOpts,
    /// Idle timeout of every wait (`--timeout`).
    #[serde(rename = "timeout", with = "crate::units::serde_ms")]
    pub timeout_ms: u64,
    /// The receiving side reads no faster than this (`--read-rate`): an application
    /// that cannot keep up with the path, whose unread data closes the window.
    #[serde(
        rename = "read_rate",
        with = "crate::units::serde_rate_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub read_rate_bps: Option<u64>,
}

impl Default for StreamConfig {
    fn default() -> Self {
        Self {
            flows: 1,
            direction: Direction::Up,
            duration_ms: Some(10_000),
            bytes: None,
            omit_ms: 0,
            interval_ms: DEFAULT_INTERVAL_MS,
            write_size: 128 << 10,
            opts: SockOpts::default(),
            timeout_ms: 10_000,
            read_rate_bps: None,
        }
    }
}

impl StreamConfig {
    /// Checks every field; errors name the flag.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.flows == 0 || self.flows > MAX_FLOWS {
            return Err(config(
                "flows",
                format!("{} is outside 1..={MAX_FLOWS}", self.flows),
            ));
        }
        match (self.duration_ms, self.bytes) {
            (None, None) => {
                return Err(config(
                    "duration",
                    "give --duration or --bytes (every run is bounded)",
                ));
            }
            (Some(0), _) => return Err(config("duration", "must be above 0 s")),
            (_, Some(0)) => return Err(config("bytes", "must be above 0")),
            _ => {}
        }
        if self.duration_ms.is_none() && self.bytes.is_some_and(|b| b < u64::from(self.flows)) {
            return Err(config("bytes", "must be at least one byte per flow"));
        }
        if let Some(d) = self.duration_ms
            && self.omit_ms >= d
        {
            return Err(config("omit", "must be shorter than --duration"));
        }
        if !(10..=60_000).contains(&self.interval_ms) {
            return Err(config("interval", "must be within 0.01..=60 s"));
        }
        if self.write_size == 0 || self.write_size > MAX_WRITE {
            return Err(config(
                "write-size",
                format!("{} is outside 1..={MAX_WRITE}", self.write_size),
            ));
        }
        if self.timeout_ms == 0 {
            return Err(config("timeout", "must be above 0"));
        }
        if self.read_rate_bps.is_some_and(|r| r < MIN_READ_RATE) {
            return Err(config(
                "read-rate",
                format!("must be at least {MIN_READ_RATE} bit/s (e.g. 10mbit)"),
            ));
        }
        self.opts.validate()
    }

    /// The client's flow roles in connect order: true = the client sends on it.
    pub fn client_roles(&self) -> Vec<bool> {
        let n = self.flows as usize;
        match self.direction {
            Direction::Up => vec![true; n],
            Direction::Down => vec![false; n],
            Direction::Bidir => [vec![true; n], vec![false; n]].concat(),
        }
    }
}

/// One flow's figures over one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalSample {
    /// Interval number from 0.
    pub index: u32,
    /// Flow number (connect order).
    pub flow: u32,
    /// True when this side sends on the flow.
    pub sending: bool,
    /// Interval start, s since the local start.
    pub start_s: f64,
    /// Interval end, s since the local start.
    pub end_s: f64,
    /// Bytes written (sending) or read (receiving) in the interval.
    pub bytes: u64,
    /// bytes·8 / interval length.
    pub bps: Option<f64>,
    /// Inside the omitted warm-up.
    pub omitted: bool,
    /// tcp_info at the interval's end.
    pub tcp_info: Option<TcpInfo>,
    /// Receiving flows: bytes that had arrived but the application had not read, at the
    /// interval's end (FIONREAD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unread_bytes: Option<u32>,
}

/// All flows of one interval, as streamed with --ndjson.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalReport {
    /// Interval number from 0.
    pub index: u32,
    /// Start, s.
    pub start_s: f64,
    /// End, s.
    pub end_s: f64,
    /// Inside the omitted warm-up.
    pub omitted: bool,
    /// Sum over the flows this side sends on, bit/s.
    pub sent_bps: Option<f64>,
    /// Sum over the flows this side receives on, bit/s.
    pub received_bps: Option<f64>,
    /// Per flow.
    pub flows: Vec<IntervalSample>,
}

/// Slowest `--read-rate`: below it a read of [`PACED_READ`] bytes would wait past the idle
/// timeouts of the sender.
pub const MIN_READ_RATE: u64 = 100_000;

/// Receiver throughput outside the omitted warm-up: bytes of the non-omitted receiving
/// intervals over their time span.
pub fn received_bps(intervals: &[IntervalSample]) -> Option<f64> {
    let recv: Vec<&IntervalSample> = intervals
        .iter()
        .filter(|i| !i.sending && !i.omitted)
        .collect();
    let bytes: u64 = recv.iter().map(|i| i.bytes).sum();
    let start = recv.iter().map(|i| i.start_s).fold(f64::INFINITY, f64::min);
    let end = recv
        .iter()
        .map(|i| i.end_s)
        .fold(f64::NEG_INFINITY, f64::max);
    ratio(bytes as f64 * 8.0, end - start)
}

/// The `summary` object of a stream result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamSummary {
    /// Received payload bit/s, all directions, after the omitted warm-up.
    pub throughput_bps: Option<f64>,
    /// Client to server, bit/s (up, bidir).
    pub up_bps: Option<f64>,
    /// Server to client, bit/s (down, bidir).
    pub down_bps: Option<f64>,
    /// Retransmitted segments on the sending sockets.
    pub retransmits: u64,
}

/// A stream result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    /// Common record.
    #[serde(flatten)]
    pub meta: RunMeta,
    /// What was asked.
    pub config: StreamConfig,
    /// Headline figures.
    pub summary: StreamSummary,
    /// Client wall time, s.
    pub elapsed_s: f64,
    /// Client bytes written.
    pub client_bytes_sent: u64,
    /// Client bytes read.
    pub client_bytes_received: u64,
    /// Server bytes written.
    pub server_bytes_sent: u64,
    /// Server bytes read.
    pub server_bytes_received: u64,
    /// Client CPU seconds per GB (10^9 bytes) it moved.
    pub client_cpu_s_per_gb: Option<f64>,
    /// Server CPU seconds per GB it moved.
    pub server_cpu_s_per_gb: Option<f64>,
    /// Client's intervals (per flow).
    pub intervals: Vec<IntervalSample>,
    /// Server's intervals (per flow).
    pub server_intervals: Vec<IntervalSample>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(
        index: u32,
        sending: bool,
        start_s: f64,
        end_s: f64,
        bytes: u64,
        omitted: bool,
    ) -> IntervalSample {
        IntervalSample {
            index,
            sending,
            start_s,
            end_s,
            bytes,
            omitted,
            ..IntervalSample::default()
        }
    }
    #[test]
    fn throughput_skips_omitted_and_sending_intervals() {
        let v = [
            iv(0, false, 0.0, 1.0, 1_000_000, true),
            iv(1, false, 1.0, 2.0, 2_000_000, false),
            iv(2, false, 2.0, 2.5, 1_000_000, false),
            iv(1, true, 1.0, 2.0, 9_000_000, false),
        ];
        let bps = received_bps(&v).expect("bps");
        assert!((bps - 3_000_000.0 * 8.0 / 1.5).abs() < 1e-6, "{bps}");
        assert_eq!(received_bps(&v[..1]), None);
    }
    #[test]
    fn roles_follow_direction() {
        let cfg = StreamConfig {
            flows: 2,
            direction: Direction::Bidir,
            ..StreamConfig::default()
        };
        assert_eq!(cfg.client_roles(), vec![true, true, false, false]);
        let cfg = StreamConfig {
            direction: Direction::Down,
            ..StreamConfig::default()
        };
        assert_eq!(cfg.client_roles(), vec![false]);
    }
    #[test]
    fn bad_inputs_name_their_flag() {
        let check = |cfg: StreamConfig, flag: &str| {
            let e = cfg.validate().expect_err("must fail").to_string();
            assert!(e.starts_with(&format!("invalid --{flag}:")), "{e}");
        };
        check(
            StreamConfig {
                flows: 0,
                ..StreamConfig::default()
            },
            "flows",
        );
        check(
            StreamConfig {
                duration_ms: Some(0),
                ..StreamConfig::default()
            },
            "duration",
        );
        check(
            StreamConfig {
                duration_ms: None,
                bytes: None,
                ..StreamConfig::default()
            },
            "duration",
        );
        check(
            StreamConfig {
                bytes: Some(0),
                ..StreamConfig::default()
            },
            "bytes",
        );
        check(
            StreamConfig {
                omit_ms: 10_000,
                ..StreamConfig::default()
            },
            "omit",
        );
        check(
            StreamConfig {
                write_size: 0,
                ..StreamConfig::default()
            },
            "write-size",
        );
        check(
            StreamConfig {
                interval_ms: 1,
                ..StreamConfig::default()
            },
            "interval",
        );
    }
}
