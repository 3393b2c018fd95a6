//! `[[workload]]` entries: a `kind` (stream, msgs, rr, crr, http), its parameters and the
//! socket options, all as plain fields of one table.
//!
//! serde cannot both flatten the socket options into each kind and reject unknown fields, so
//! [`Workload`] deserializes the table itself: it moves the socket keys aside, rejects any key
//! that is neither a parameter of the kind nor a socket option (with serde's usual message, so
//! the did-you-mean logic sees every valid name), then lets derived code do the rest.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

mod http;

pub use http::HttpParams;

/// A duration as written (`10s`, `250ms`), checked with the emulator's parser when read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationText {
    text: String,
    ns: u64,
}

impl DurationText {
    /// Parses `10ms`, `1.5s`, ...
    pub fn parse(text: &str) -> Result<DurationText, String> {
        let ns = tcplab_emu::spec::parse_duration(text).map_err(|e| e.to_string())?;
        Ok(DurationText {
            text: text.to_string(),
            ns,
        })
    }

    /// From nanoseconds, written in the largest unit that keeps it short.
    pub fn from_ns(ns: u64) -> DurationText {
        DurationText {
            text: crate::factor::format_duration(ns),
            ns,
        }
    }

    /// The value in ns.
    pub fn ns(&self) -> u64 {
        self.ns
    }

    /// The value in seconds.
    pub fn secs(&self) -> f64 {
        self.ns as f64 / 1e9
    }
}

impl fmt::Display for DurationText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for DurationText {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for DurationText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        DurationText::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Direction of a stream workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamDirection {
    /// Client sends.
    #[default]
    Up,
    /// Server sends.
    Down,
    /// Both at once.
    Bidir,
}

/// How a msgs workload writes each message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MsgPattern {
    /// One write per message.
    #[default]
    Write,
    /// Two writes then a 1-byte reply (the Nagle + delayed-ACK trap).
    WriteWriteRead,
}

fn one() -> u32 {
    1
}

fn ten_seconds() -> DurationText {
    DurationText::from_ns(10_000_000_000)
}

/// How often a study's stream records its interval reports and tcp_info samples when the
/// scenario does not say, ms. The report's time plots need it: at 1 s a 3 s run is three
/// points and slow start, a loss's sawtooth or a queue filling average away; at 100 ms the
/// sampler wakes ten times a second per side, which costs the flows nothing measurable, and a
/// 60 s single-flow run keeps about 1,200 interval rows (docs/scenarios.md). `tcplab stream`'s
/// own `--interval` stays 1 s: a terminal reads one line a second.
pub const DEFAULT_INTERVAL_MS: u64 = 100;

/// The intervals the stream sampler takes, ms (`tcplab_results::stream::StreamConfig::validate`).
pub const INTERVAL_RANGE_MS: std::ops::RangeInclusive<u64> = 10..=60_000;

/// Reads and checks `interval`: a duration the sampler takes, in whole milliseconds. Errors
/// name the field and the fix, since the scenario's error points at the workload table.
fn interval<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DurationText>, D::Error> {
    let text = String::deserialize(d)?;
    check_interval(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// The checks of [`interval`], on the text as written.
pub fn check_interval(text: &str) -> Result<DurationText, String> {
    let fix = "write e.g. interval = \"100ms\"";
    let d = DurationText::parse(text).map_err(|e| format!("`interval` = {text:?}: {e}; {fix}"))?;
    let (lo, hi) = (INTERVAL_RANGE_MS.start(), INTERVAL_RANGE_MS.end());
    if d.ns() % 1_000_000 != 0 {
        return Err(format!(
            "`interval` = {text:?} is not a whole number of milliseconds (the sampler counts in ms); {fix}"
        ));
    }
    if !INTERVAL_RANGE_MS.contains(&(d.ns() / 1_000_000)) {
        return Err(format!(
            "`interval` = {text:?} is outside {lo}ms..={}s, the range the stream sampler takes; {fix}",
            hi / 1000
        ));
    }
    Ok(d)
}

/// `kind = "stream"`: bulk throughput.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamParams {
    /// Parallel flows.
    #[serde(default = "one")]
    pub flows: u32,
    /// How long to send (ignored when `bytes` is set).
    #[serde(default = "ten_seconds")]
    pub duration: DurationText,
    /// Who sends.
    #[serde(default)]
    pub direction: StreamDirection,
    /// Send this many bytes per flow instead of a duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// How often interval reports and tcp_info samples are taken; unset:
    /// [`DEFAULT_INTERVAL_MS`]. Left out of the serialised form when unset, so scenarios
    /// written before it existed keep their hash (and resume).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "interval"
    )]
    pub interval: Option<DurationText>,
}

impl StreamParams {
    /// The sampling interval in ms: as written, else [`DEFAULT_INTERVAL_MS`].
    pub fn interval_ms(&self) -> u64 {
        self.interval
            .as_ref()
            .map_or(DEFAULT_INTERVAL_MS, |d| d.ns() / 1_000_000)
    }
}

/// `kind = "msgs"`: a timed series of small messages (sfperf).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MsgsParams {
    /// Messages per run.
    #[serde(default = "default_count")]
    pub count: u64,
    /// Bytes per message.
    #[serde(default = "one")]
    pub size: u32,
    /// Gap between messages (none: back to back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace: Option<DurationText>,
    /// How each message is written.
    #[serde(default)]
    pub pattern: MsgPattern,
}

fn default_count() -> u64 {
    100_000
}

/// `kind = "rr"`: request/response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RrParams {
    /// Request bytes.
    #[serde(default = "one")]
    pub req: u32,
    /// Response bytes.
    #[serde(default = "one")]
    pub resp: u32,
    /// Requests in flight (closed loop).
    #[serde(default = "one")]
    pub depth: u32,
    /// Open-loop rate in transactions/s (none: closed loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// How long to run.
    #[serde(default = "ten_seconds")]
    pub duration: DurationText,
}

/// `kind = "crr"`: connect, request, response, close.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrrParams {
    /// Connections in parallel.
    #[serde(default = "one")]
    pub concurrency: u32,
    /// Connections in all (when set, `duration` is a cap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// How long to run.
    #[serde(default = "ten_seconds")]
    pub duration: DurationText,
    /// Request bytes.
    #[serde(default = "one")]
    pub req: u32,
    /// Response bytes.
    #[serde(default = "one")]
    pub resp: u32,
}

/// The kind of a workload with its parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum WorkloadKind {
    /// Bulk throughput.
    Stream(StreamParams),
    /// Small messages.
    Msgs(MsgsParams),
    /// Request/response.
    Rr(RrParams),
    /// Connection rate.
    Crr(CrrParams),
    /// HTTP/1.1 requests against a web server in the lab.
    Http(HttpParams),
}

/// Socket options of a workload; unset options leave the kernel's default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SockOpts {
    /// TCP_NODELAY.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodelay: Option<bool>,
    /// TCP_CORK.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cork: Option<bool>,
    /// TCP_QUICKACK, re-armed after each read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quickack: Option<bool>,
    /// TCP_CONGESTION.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// SO_SNDBUF in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sndbuf: Option<u32>,
    /// SO_RCVBUF in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcvbuf: Option<u32>,
    /// TCP_NOTSENT_LOWAT in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notsent_lowat: Option<u32>,
    /// TCP_DELACK_MAX_US (Linux 6.15+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delack_max_us: Option<u32>,
    /// TCP_RTO_MIN_US (Linux 6.15+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rto_min_us: Option<u32>,
}

/// Keys of [`SockOpts`], accepted in every workload table.
pub const SOCKET_KEYS: &[&str] = &[
    "nodelay",
    "cork",
    "quickack",
    "congestion",
    "sndbuf",
    "rcvbuf",
    "notsent_lowat",
    "delack_max_us",
    "rto_min_us",
];

/// Every key a workload of `kind` accepts: `kind`, its parameters and the socket options.
pub fn keys_of(kind: &str) -> Option<&'static [&'static str]> {
    const STREAM: &[&str] = &[
        "kind",
        "flows",
        "duration",
        "direction",
        "bytes",
        "interval",
        "nodelay",
        "cork",
        "quickack",
        "congestion",
        "sndbuf",
        "rcvbuf",
        "notsent_lowat",
        "delack_max_us",
        "rto_min_us",
    ];
    const MSGS: &[&str] = &[
        "kind",
        "count",
        "size",
        "pace",
        "pattern",
        "nodelay",
        "cork",
        "quickack",
        "congestion",
        "sndbuf",
        "rcvbuf",
        "notsent_lowat",
        "delack_max_us",
        "rto_min_us",
    ];
    const RR: &[&str] = &[
        "kind",
        "req",
        "resp",
        "depth",
        "rate",
        "duration",
        "nodelay",
        "cork",
        "quickack",
        "congestion",
        "sndbuf",
        "rcvbuf",
        "notsent_lowat",
        "delack_max_us",
        "rto_min_us",
    ];
    const CRR: &[&str] = &[
        "kind",
        "concurrency",
        "count",
        "duration",
        "req",
        "resp",
        "nodelay",
        "cork",
        "quickack",
        "congestion",
        "sndbuf",
        "rcvbuf",
        "notsent_lowat",
        "delack_max_us",
        "rto_min_us",
    ];
    const HTTP: &[&str] = &[
        "kind",
        "connections",
        "requests_per_connection",
        "close",
        "rate",
        "duration",
        "count",
        "server",
        "dirs",
        "urls",
        "nodelay",
        "cork",
        "quickack",
        "congestion",
        "sndbuf",
        "rcvbuf",
        "notsent_lowat",
        "delack_max_us",
        "rto_min_us",
    ];
    match kind {
        "stream" => Some(STREAM),
        "msgs" => Some(MSGS),
        "rr" => Some(RR),
        "crr" => Some(CRR),
        "http" => Some(HTTP),
        _ => None,
    }
}

/// The workload kinds, for error messages.
pub const KINDS: &[&str] = &["stream", "msgs", "rr", "crr", "http"];

/// One `[[workload]]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// The kind and its parameters.
    pub kind: WorkloadKind,
    /// Socket options.
    pub socket: SockOpts,
}

impl Workload {
    /// The kind's name as written in the file.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            WorkloadKind::Stream(_) => "stream",
            WorkloadKind::Msgs(_) => "msgs",
            WorkloadKind::Rr(_) => "rr",
            WorkloadKind::Crr(_) => "crr",
            WorkloadKind::Http(_) => "http",
        }
    }

    /// The workload as one flat TOML table (how it is written in the file).
    pub fn to_table(&self) -> Result<toml::Table, String> {
        let mut table = match toml::Value::try_from(&self.kind).map_err(|e| e.to_string())? {
            toml::Value::Table(t) => t,
            other => return Err(format!("workload serialised as {}", other.type_str())),
        };
        if let toml::Value::Table(sock) =
            toml::Value::try_from(&self.socket).map_err(|e| e.to_string())?
        {
            table.extend(sock);
        }
        Ok(table)
    }

    /// Reads a flat table, with the checks described in the module documentation.
    pub fn from_table(mut table: toml::Table) -> Result<Workload, String> {
        let kind = match table.get("kind") {
            Some(toml::Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(format!(
                    "invalid type: {}, expected one of `stream`, `msgs`, `rr`, `crr`, `http` for `kind`",
                    other.type_str()
                ));
            }
            None => {
                return Err("missing field `kind` (stream, msgs, rr, crr or http)".to_string());
            }
        };
        let Some(allowed) = keys_of(&kind) else {
            return Err(
                <toml::de::Error as serde::de::Error>::unknown_variant(&kind, KINDS).to_string(),
            );
        };
        if let Some(bad) = table.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(
                <toml::de::Error as serde::de::Error>::unknown_field(bad, allowed).to_string(),
            );
        }
        let mut sock = toml::Table::new();
        for key in SOCKET_KEYS {
            if let Some(v) = table.remove(*key) {
                sock.insert((*key).to_string(), v);
            }
        }
        let kind: WorkloadKind = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| e.message().to_string())?;
        let socket: SockOpts = toml::Value::Table(sock)
            .try_into()
            .map_err(|e: toml::de::Error| e.message().to_string())?;
        if let WorkloadKind::Http(p) = &kind {
            p.check()?;
        }
        Ok(Workload { kind, socket })
    }

    /// A rough duration of one run of this workload, for `--dry-run` estimates: the stated
    /// duration, or for counted workloads an assumed cost (msgs: 10 µs per message; crr:
    /// 100 µs per connection per parallel client; http: 200 µs per request per connection).
    pub fn estimated_secs(&self) -> f64 {
        match &self.kind {
            WorkloadKind::Stream(p) => match p.bytes {
                // Assume 1 Gbit/s when the amount, not the time, is fixed.
                Some(b) => b as f64 * 8.0 / 1e9,
                None => p.duration.secs(),
            },
            WorkloadKind::Msgs(p) => {
                let gap = p.pace.as_ref().map_or(0.0, DurationText::secs);
                p.count as f64 * (10e-6 + gap)
            }
            WorkloadKind::Rr(p) => p.duration.secs(),
            WorkloadKind::Crr(p) => match p.count {
                Some(n) => {
                    (n as f64 * 100e-6 / f64::from(p.concurrency.max(1))).min(p.duration.secs())
                }
                None => p.duration.secs(),
            },
            WorkloadKind::Http(p) => p.estimated_secs(),
        }
    }

    /// The same workload at a reduced size (`--quick`): durations, message, connection and
    /// request counts and stream bytes are multiplied by `factor`, with floors of 200 ms, 1,000
    /// messages, 100 connections or requests and 1 MB so a quick run still measures something.
    pub fn scaled(&self, factor: f64) -> Workload {
        let dur = |d: &DurationText| {
            let ns = (d.ns() as f64 * factor).max(200e6).min(d.ns() as f64);
            DurationText::from_ns(ns as u64)
        };
        let count = |n: u64, floor: u64| ((n as f64 * factor) as u64).max(floor).min(n);
        let kind = match &self.kind {
            WorkloadKind::Stream(p) => WorkloadKind::Stream(StreamParams {
                duration: dur(&p.duration),
                bytes: p.bytes.map(|b| count(b, 1_000_000)),
                ..p.clone()
            }),
            WorkloadKind::Msgs(p) => WorkloadKind::Msgs(MsgsParams {
                count: count(p.count, 1_000),
                ..p.clone()
            }),
            WorkloadKind::Rr(p) => WorkloadKind::Rr(RrParams {
                duration: dur(&p.duration),
                ..p.clone()
            }),
            WorkloadKind::Crr(p) => WorkloadKind::Crr(CrrParams {
                duration: dur(&p.duration),
                count: p.count.map(|n| count(n, 100)),
                ..p.clone()
            }),
            WorkloadKind::Http(p) => WorkloadKind::Http(HttpParams {
                duration: dur(&p.duration),
                count: p.count.map(|n| count(n, 100)),
                ..p.clone()
            }),
        };
        Workload {
            kind,
            socket: self.socket.clone(),
        }
    }
}

impl Serialize for Workload {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_table()
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Workload {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let table = toml::Table::deserialize(d)?;
        Workload::from_table(table).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Workload, String> {
        Workload::from_table(toml::from_str(text).map_err(|e: toml::de::Error| e.to_string())?)
    }

    #[test]
    fn flat_socket_options_are_accepted() {
        let w = parse("kind = 'msgs'\ncount = 10\nnodelay = true\n").unwrap();
        assert_eq!(w.socket.nodelay, Some(true));
        let WorkloadKind::Msgs(p) = &w.kind else {
            panic!("kind")
        };
        assert_eq!((p.count, p.size), (10, 1));
        let back = Workload::from_table(w.to_table().unwrap()).unwrap();
        assert_eq!(back, w);
    }

    #[test]
    fn unknown_key_lists_parameters_and_socket_options() {
        let e = parse("kind = 'msgs'\nsizee = 3\n").unwrap_err();
        assert!(e.contains("unknown field `sizee`"), "{e}");
        assert!(e.contains("`size`") && e.contains("`nodelay`"), "{e}");
    }

    #[test]
    fn stream_interval_defaults_to_100ms_and_is_checked() {
        let interval = |text: &str| match parse(text).map(|w| w.kind) {
            Ok(WorkloadKind::Stream(p)) => Ok(p.interval_ms()),
            Ok(_) => panic!("kind"),
            Err(e) => Err(e),
        };
        assert_eq!(interval("kind = 'stream'\n"), Ok(DEFAULT_INTERVAL_MS));
        assert_eq!(interval("kind = 'stream'\ninterval = '20ms'\n"), Ok(20));
        assert_eq!(interval("kind = 'stream'\ninterval = '1s'\n"), Ok(1000));
        for (bad, says) in [
            ("5ms", "outside 10ms..=60s"),
            ("61s", "outside 10ms..=60s"),
            ("10500us", "whole number of milliseconds"),
            ("fast", "`interval` = \"fast\""),
        ] {
            let e = interval(&format!("kind = 'stream'\ninterval = '{bad}'\n")).unwrap_err();
            assert!(
                e.contains(says) && e.contains("interval = \"100ms\""),
                "{bad}: {e}"
            );
        }
        let e = parse("kind = 'msgs'\ninterval = '100ms'\n").unwrap_err();
        assert!(e.contains("unknown field `interval`"), "stream only: {e}");
    }

    #[test]
    fn an_unset_interval_leaves_the_table_as_it_was() {
        let w = parse("kind = 'stream'\nduration = '3s'\n").unwrap();
        assert!(
            !w.to_table().unwrap().contains_key("interval"),
            "scenario hashes stay"
        );
        let w = parse("kind = 'stream'\ninterval = '50ms'\n").unwrap();
        assert_eq!(w.to_table().unwrap()["interval"].as_str(), Some("50ms"));
        assert_eq!(Workload::from_table(w.to_table().unwrap()).unwrap(), w);
    }

    #[test]
    fn quick_scaling_has_floors() {
        let w = parse("kind = 'stream'\nduration = '10s'\n").unwrap();
        let WorkloadKind::Stream(p) = w.scaled(0.1).kind else {
            panic!("kind")
        };
        assert_eq!(p.duration.ns(), 1_000_000_000);
        let WorkloadKind::Stream(p) = w.scaled(0.001).kind else {
            panic!("kind")
        };
        assert_eq!(p.duration.ns(), 200_000_000);
    }
}
