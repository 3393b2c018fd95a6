//! Seeded draws of corpus cases at random points: the held-out set a rule change is judged on
//! after it was tuned on the fixed corpus (the split a classifier needs). Pure: a seed and a
//! count in, a corpus out; the same seed gives the same corpus.
//!
//! Every case is one path drawn over the whole space the doctor claims: a rate log-uniform
//! over 5 Mbit/s - 1 Gbit/s, one-way delays 0.5 - 60 ms (a third of paths asymmetric), BBR or
//! reno, a bottleneck queue, and a pathology at a strength drawn over its own range (or none: a
//! fifth of the cases are healthy paths). Where a pathology needs a path of some kind to exist
//! at all (a window far under the BDP needs a BDP of some size), the path is drawn again until
//! it has one. The queue is drawn where it does not decide the case: 0.7 - 2.5 BDP (a healthy
//! path's, kept under half what the doctor calls bufferbloat); the queue cases draw theirs far
//! under (0.05 - 0.2 BDP) or far over (a 100 ms - 600 ms queue up to 20 BDP). Background loss (0.01 - 0.5 %, on three in ten of the cases whose
//! cause it cannot hide) is labelled as also true, never as the cause; it is left out where a
//! loss-based flow would be held by it more than by the case's own limit.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tcplab_doctor::Knobs;
use tcplab_study::scenario::{ImpairmentFlags, LabSection};

use super::{Case, CorpusFile, Defaults, Point};

/// Bytes of a full frame on the wire (what a queue of packets holds).
const FRAME: f64 = 1514.0;

/// The largest emulated queue drawn, packets: deep enough for a 600 ms queue at 80 Mbit/s,
/// and within what the emulator's GSO slab holds with a long delay line beside it.
const MAX_QUEUE_PACKETS: f64 = 5_000.0;

/// Every pathology a draw picks from, with its finding id.
const PATHOLOGIES: &[Kind] = &[
    Kind::Rwnd,
    Kind::Sndbuf,
    Kind::Loss,
    Kind::ShallowQueue,
    Kind::Bufferbloat,
    Kind::Reordering,
    Kind::DelayedAck,
    Kind::SlowReader,
    Kind::Cpu,
    Kind::SynLoss,
    Kind::Ports,
    Kind::AcceptQueue,
    Kind::MtuBlackhole,
];

/// Share of the draws that are healthy paths.
const HEALTHY_SHARE: f64 = 0.2;

/// Share of the eligible cases given background loss.
const BACKGROUND_LOSS_SHARE: f64 = 0.3;

/// What a drawn case is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Healthy,
    Rwnd,
    Sndbuf,
    Loss,
    ShallowQueue,
    Bufferbloat,
    Reordering,
    DelayedAck,
    SlowReader,
    Cpu,
    SynLoss,
    Ports,
    AcceptQueue,
    MtuBlackhole,
}

impl Kind {
    fn cause(self) -> &'static str {
        match self {
            Self::Healthy => tcplab_doctor::corpus::HEALTHY,
            Self::Rwnd => "rwnd_limited",
            Self::Sndbuf => "sndbuf_limited",
            Self::Loss => "loss_limited",
            Self::ShallowQueue => "shallow_queue",
            Self::Bufferbloat => "bufferbloat",
            Self::Reordering => "reordering",
            Self::DelayedAck => "delayed_ack_stall",
            Self::SlowReader => "receiver_limited",
            Self::Cpu => "cpu_limited",
            Self::SynLoss => "connection_trouble.syn_retransmits",
            Self::Ports => "connection_trouble.port_exhaustion",
            Self::AcceptQueue => "connection_trouble.accept_queue",
            Self::MtuBlackhole => "mtu_blackhole",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Self::Healthy => "healthy",
            Self::Rwnd => "rwnd",
            Self::Sndbuf => "sndbuf",
            Self::Loss => "loss",
            Self::ShallowQueue => "shallow",
            Self::Bufferbloat => "bloat",
            Self::Reordering => "reorder",
            Self::DelayedAck => "delack",
            Self::SlowReader => "slowreader",
            Self::Cpu => "cpu",
            Self::SynLoss => "synloss",
            Self::Ports => "ports",
            Self::AcceptQueue => "accept",
            Self::MtuBlackhole => "mtu",
        }
    }

    /// Whether background loss cannot hide this case's cause (its limit is not the flow's
    /// loss response, or is checked against it) and cannot be mistaken for it.
    fn takes_background_loss(self) -> bool {
        matches!(
            self,
            Self::Rwnd
                | Self::Sndbuf
                | Self::SlowReader
                | Self::DelayedAck
                | Self::Ports
                | Self::AcceptQueue
                | Self::Reordering
        )
    }
}

/// The path a case runs on.
#[derive(Debug, Clone, Copy)]
struct Path {
    rate_bps: f64,
    /// One-way delays, client → server and back, s.
    forward_s: f64,
    reverse_s: f64,
    reno: bool,
}

impl Path {
    fn rtt(&self) -> f64 {
        self.forward_s + self.reverse_s
    }

    fn bdp_bytes(&self) -> f64 {
        self.rate_bps / 8.0 * self.rtt()
    }

    fn bdp_packets(&self) -> f64 {
        self.bdp_bytes() / FRAME
    }

    /// Packets of queue for `delay_s` at the rate.
    fn packets_for(&self, delay_s: f64) -> f64 {
        self.rate_bps / 8.0 * delay_s / FRAME
    }
}

/// Log-uniform on [lo, hi].
fn log_uniform(rng: &mut ChaCha8Rng, lo: f64, hi: f64) -> f64 {
    (lo.ln() + rng.random::<f64>() * (hi.ln() - lo.ln())).exp()
}

fn draw_path(rng: &mut ChaCha8Rng) -> Path {
    let forward_s = log_uniform(rng, 0.0005, 0.060);
    let reverse_s = if rng.random_bool(1.0 / 3.0) {
        log_uniform(rng, 0.0005, 0.060)
    } else {
        forward_s
    };
    Path {
        rate_bps: log_uniform(rng, 5e6, 1e9),
        forward_s,
        reverse_s,
        reno: rng.random_bool(0.5),
    }
}

/// A corpus of `count` cases drawn from `seed`.
pub fn draw(seed: u64, count: usize) -> CorpusFile {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut cases = Vec::with_capacity(count);
    for i in 0..count {
        let kind = if rng.random_bool(HEALTHY_SHARE) {
            Kind::Healthy
        } else {
            PATHOLOGIES[rng.random_range(0..PATHOLOGIES.len())]
        };
        cases.push(case(&mut rng, seed, i, kind));
    }
    CorpusFile {
        defaults: Defaults {
            budget: Some("24s".into()),
            lab: LabSection {
                topology: Some(tcplab_lab::Topology::Path),
                sysctl: BTreeMap::from([(
                    "all".to_string(),
                    BTreeMap::from([
                        (
                            "net.ipv4.tcp_rmem".to_string(),
                            toml::Value::String("4096 131072 67108864".into()),
                        ),
                        (
                            "net.ipv4.tcp_wmem".to_string(),
                            toml::Value::String("4096 16384 67108864".into()),
                        ),
                    ]),
                )]),
                ..LabSection::default()
            },
            offloads: Some("on".into()),
        },
        cases,
    }
}

/// What a pathology sets on top of the path, and the words for it.
#[derive(Debug, Default)]
struct Setting {
    link: ImpairmentFlags,
    sysctl: BTreeMap<String, BTreeMap<String, toml::Value>>,
    knobs: Knobs,
    trap: u64,
    end_mtu: Option<u32>,
    also: Vec<String>,
    about: String,
    /// The throughput the case's own limit leaves a flow, bit/s (for the background-loss check).
    limit_bps: Option<f64>,
}

fn sysctl(host: &str, key: &str, value: String) -> BTreeMap<String, BTreeMap<String, toml::Value>> {
    BTreeMap::from([(
        host.to_string(),
        BTreeMap::from([(key.to_string(), toml::Value::String(value))]),
    )])
}

/// A healthy queue for `path`: 0.7 - 2.5 BDP, at least 2 packets (a path of a BDP under a
/// packet still needs room for a pair), and never so deep that a load both ways stands the
/// doctor's bufferbloat in it (30 ms and twice the RTT added per loaded direction: the queue
/// stays under half of that), at most [`MAX_QUEUE_PACKETS`].
fn healthy_queue(rng: &mut ChaCha8Rng, path: &Path) -> f64 {
    let q = log_uniform(rng, 0.7, 2.5) * path.bdp_packets();
    let deepest = path.packets_for(HEALTHY_QUEUE_S.max(path.rtt()));
    q.min(deepest).clamp(2.0, MAX_QUEUE_PACKETS).round()
}

/// The deepest healthy queue on a short path, s: half the 15 ms per direction the doctor calls
/// bufferbloat from.
const HEALTHY_QUEUE_S: f64 = 0.0075;

/// crr's share of the corpus battery (24 s): the time its two loops have to cycle a port range.
const CRR_SECONDS: f64 = 2.4;

/// SYN-ACKs a reverse-loss case must lose, on average, during crr for its pathology to show.
const MIN_SYN_LOSSES: f64 = 8.0;

/// One case of `kind`: its path drawn (again, until the pathology can exist on it), the
/// pathology's strength drawn over its range.
fn case(rng: &mut ChaCha8Rng, seed: u64, i: usize, kind: Kind) -> Case {
    let (path, queue, mut set) = loop {
        let mut path = draw_path(rng);
        if let Some(reno) = needs_reno(kind) {
            path.reno = reno;
        }
        if let Some(drawn) = pathology(rng, kind, &mut path) {
            break (path, drawn.0, drawn.1);
        }
    };
    if kind.takes_background_loss() && rng.random_bool(BACKGROUND_LOSS_SHARE) {
        let p = log_uniform(rng, 0.0001, 0.005);
        // A loss-based flow at its Mathis bound must still be held by the case's own limit.
        let mathis = 1448.0 * 8.0 / path.rtt() * 1.2247 / p.sqrt();
        if !path.reno || set.limit_bps.is_none_or(|l| mathis >= 3.0 * l) {
            set.link.loss = Some(percent(p));
            set.also.push("loss_limited".into());
            set.about
                .push_str(&format!("; background loss {}", percent(p)));
        }
    }
    let mut link = set.link;
    link.rate = Some(format!("{:.0}kbit", path.rate_bps / 1e3));
    link.delay = Some(format!(
        "{}/{}",
        millis(path.forward_s),
        millis(path.reverse_s)
    ));
    link.queue = Some(format!("{queue:.0}"));
    let mut sysctls = set.sysctl;
    if path.reno {
        sysctls.entry("all".into()).or_default().insert(
            "net.ipv4.tcp_congestion_control".into(),
            toml::Value::String("reno".into()),
        );
    }
    let name = format!(
        "{} {}/{} q={queue:.0} ({:.2} BDP) {}{}",
        rate_words(path.rate_bps),
        millis(path.forward_s),
        millis(path.reverse_s),
        queue / path.bdp_packets().max(1e-9),
        if path.reno { "reno" } else { "bbr" },
        link.loss
            .as_deref()
            .map_or(String::new(), |l| format!(" loss={l}"))
    );
    Case {
        name: format!("d{seed}-{i:03}-{}", kind.short()),
        cause: kind.cause().into(),
        also: set.also,
        must_not: Vec::new(),
        about: set.about,
        lab: LabSection {
            end_mtu: set.end_mtu,
            ..LabSection::default()
        },
        offloads: None,
        knobs: Knobs::default(),
        trap: set.trap,
        points: vec![Point {
            name: Some(name),
            link,
            sysctl: sysctls,
            knobs: Some(set.knobs),
        }],
    }
}

/// The congestion control a pathology needs: the queue cases are about a loss-based flow
/// (BBR neither fills a deep queue nor halves at a shallow one); a send buffer's maximum holds
/// back a paced sender (BBR), while on Linux 6.18 an unpaced one (reno, cubic) kept 540
/// segments (780 KB) in flight under a 136 KB tcp_wmem maximum (docs/notebook/
/// doctor-remote-2026-11-29.md).
fn needs_reno(kind: Kind) -> Option<bool> {
    match kind {
        Kind::ShallowQueue | Kind::Bufferbloat => Some(true),
        Kind::Sndbuf => Some(false),
        _ => None,
    }
}

/// The pathology's setting on `path` and the bottleneck queue, or `None` when this path cannot
/// carry it (drawn again).
fn pathology(rng: &mut ChaCha8Rng, kind: Kind, path: &mut Path) -> Option<(f64, Setting)> {
    let mut set = Setting::default();
    let mut queue = healthy_queue(rng, path);
    match kind {
        Kind::Healthy => {
            // A loss-based flow needs most of a BDP of queue to keep the link busy.
            if path.reno && queue < 0.7 * path.bdp_packets() {
                return None;
            }
            set.about =
                "a path built well: buffers for the BDP, a queue of about one BDP, no loss".into();
        }
        Kind::Rwnd | Kind::Sndbuf => {
            if path.bdp_bytes() < 256.0 * 1024.0 {
                return None;
            }
            let max = (log_uniform(rng, 0.05, 0.5) * path.bdp_bytes())
                .max(32_768.0)
                .round();
            set.limit_bps = Some(max / 2.0 * 8.0 / path.rtt());
            let (host, key, default, what) = if kind == Kind::Rwnd {
                (
                    "server",
                    "net.ipv4.tcp_rmem",
                    131_072.0_f64,
                    "the receiver's tcp_rmem maximum",
                )
            } else {
                (
                    "client",
                    "net.ipv4.tcp_wmem",
                    16_384.0_f64,
                    "the sender's tcp_wmem maximum",
                )
            };
            set.sysctl = sysctl(
                host,
                key,
                format!("4096 {:.0} {max:.0}", default.min(max / 2.0)),
            );
            set.about = format!(
                "{what} is {:.0} KiB, {:.2} of the BDP",
                max / 1024.0,
                max / path.bdp_bytes()
            );
        }
        Kind::Loss => {
            if rng.random_bool(0.5) {
                let p = log_uniform(rng, 0.002, 0.03);
                set.link.loss = Some(percent(p));
                set.about = format!("random loss of {}", percent(p));
            } else {
                let p = log_uniform(rng, 0.001, 0.005);
                let r = log_uniform(rng, 0.2, 0.4);
                let h = log_uniform(rng, 0.5, 0.9);
                set.link.loss_model = Some(format!(
                    "ge:{},{},{},0%",
                    percent(p),
                    percent(r),
                    percent(h)
                ));
                set.about = format!(
                    "Gilbert-Elliott loss in bursts, about {} on average",
                    percent(p / (p + r) * h)
                );
            }
        }
        Kind::ShallowQueue => {
            if path.bdp_packets() < 20.0 {
                return None;
            }
            queue = (log_uniform(rng, 0.05, 0.2) * path.bdp_packets())
                .max(2.0)
                .round();
            set.about = format!(
                "tail drop at a queue of {queue:.0} packets, {:.2} of the BDP",
                queue / path.bdp_packets()
            );
        }
        Kind::Bufferbloat => {
            if path.rate_bps > 200e6 || path.rtt() < 0.005 {
                return None;
            }
            let lo = (4.0 * path.rtt()).max(0.100);
            let hi = (20.0 * path.rtt())
                .min(0.600)
                .min(MAX_QUEUE_PACKETS / path.packets_for(1.0));
            if hi < lo {
                return None;
            }
            let delay = log_uniform(rng, lo, hi);
            queue = path.packets_for(delay).round();
            set.also.push("loss_limited".into());
            set.about = format!(
                "a deep bottleneck queue: {:.0} ms at the rate, {:.1} BDP",
                delay * 1e3,
                queue / path.bdp_packets()
            );
        }
        Kind::Reordering => {
            if rng.random_bool(0.5) {
                let p = log_uniform(rng, 0.01, 0.05);
                set.link.reorder = Some(percent(p));
                set.about = format!("{} of packets sent ahead of others", percent(p));
            } else {
                let j = log_uniform(rng, 0.2, 0.5) * path.forward_s.min(path.reverse_s);
                if j < 0.000_2 {
                    return None;
                }
                set.link.jitter = Some(millis(j));
                set.link.reorder = Some("jitter".into());
                set.about = format!("delay jitter of {} reorders packets", millis(j));
            }
        }
        Kind::DelayedAck => {
            // Each write-write-read waits for the peer's delayed ACK: bounded by the paths
            // where 300 of them fit a battery.
            if path.rtt() > 0.020 {
                return None;
            }
            set.trap = 300;
            set.about =
                "write-write-read with Nagle on: each request waits for the peer's delayed ACK"
                    .into();
        }
        Kind::SlowReader => {
            let read = (log_uniform(rng, 0.05, 0.4) * path.rate_bps).max(200_000.0);
            set.knobs.stream_read_rate_bps = Some(read.round() as u64);
            set.limit_bps = Some(read);
            set.about = format!("the receiving application reads at {}", rate_words(read));
        }
        Kind::Cpu => {
            path.rate_bps = log_uniform(rng, 400e6, 1e9);
            if path.rtt() > 0.060 {
                return None;
            }
            queue = healthy_queue(rng, path);
            set.knobs.stream_write_size = Some(16);
            set.about =
                "the sender makes 16-byte writes: its CPU, not the path, sets the pace".into();
        }
        Kind::SynLoss => {
            // Lossy enough that crr's connects lose a handful of SYN-ACKs.
            let connects = 2.0 * CRR_SECONDS / (2.0 * path.rtt() + 0.001);
            let least = (MIN_SYN_LOSSES / connects).max(0.03);
            if least > 0.08 {
                return None;
            }
            let p = log_uniform(rng, least, 0.08);
            set.link.loss = Some(format!("0%/{}", percent(p)));
            set.about = format!(
                "the reverse path loses {}: SYN-ACKs lost, connects wait for the SYN timer",
                percent(p)
            );
        }
        Kind::Ports => {
            // Few enough ports that crr's two loops (a connection each two round trips) run
            // through them twice: the range is then exhausted within the part, not at its end.
            let connections = 2.0 * CRR_SECONDS / (2.0 * path.rtt() + 0.001);
            let most = (connections / 4.0).min(300.0) as u32;
            if most < 30 {
                return None;
            }
            let ports = rng.random_range(30u32..=most);
            set.sysctl = sysctl(
                "client",
                "net.ipv4.ip_local_port_range",
                format!("40000 {}", 40_000 + ports - 1),
            );
            set.also.push("connection_trouble.time_wait".into());
            set.about = format!("a {ports}-port local range: TIME_WAIT holds every port");
        }
        Kind::AcceptQueue => {
            if path.rtt() > 0.060 {
                return None;
            }
            let backlog = rng.random_range(1u32..=3);
            set.sysctl = sysctl("server", "net.core.somaxconn", backlog.to_string());
            set.knobs.crr_concurrency = Some(8);
            set.knobs.crr_server_threads = Some(1);
            set.about = format!(
                "a server with one worker and a listen backlog of {backlog} under 8 connecting clients"
            );
        }
        Kind::MtuBlackhole => {
            set.end_mtu = Some(rng.random_range(4000u32..=9000));
            set.about =
                "end hosts at a jumbo MTU, the middle at 1500: full-size frames vanish, no ICMP"
                    .into();
        }
    }
    Some((queue, set))
}

/// A probability as the emulator's percent syntax, `0.25%`.
fn percent(p: f64) -> String {
    format!("{}%", trim(p * 100.0, 4))
}

/// A time as milliseconds, `12.34ms`.
fn millis(s: f64) -> String {
    format!("{}ms", trim(s * 1e3, 2))
}

/// `v` with at most `digits` decimals, trailing zeros cut.
fn trim(v: f64, digits: usize) -> String {
    let s = format!("{v:.digits$}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

fn rate_words(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{}gbit", trim(bps / 1e9, 2))
    } else {
        format!("{}mbit", trim(bps / 1e6, 1))
    }
}

#[cfg(test)]
mod tests;
