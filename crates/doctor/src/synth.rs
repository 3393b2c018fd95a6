//! Synthetic results, built the way the kernel would have produced them, for testing rules
//! (here and in the CLI) without a network. Deterministic: jitter comes from a seeded
//! SplitMix64, never from the clock.

use std::collections::BTreeMap;

use tcplab_results::Facts;
use tcplab_results::crr::{CrrResult, CrrSample, ErrorSecond};
use tcplab_results::facts::{CongestionControl, Cpu, HostFacts, Hz, InterfaceFacts};
use tcplab_results::http::config::HttpConfig;
use tcplab_results::http::result::{HttpErrors, HttpResult, HttpSample};
use tcplab_results::msgs::{MsgsResult, MsgsRun};
use tcplab_results::rr::{RrPoint, RrResult, RrSample};
use tcplab_results::session::RunMeta;
use tcplab_results::sockopt::AppliedOpts;
use tcplab_results::stream::{IntervalSample, StreamResult};
use tcplab_results::tcpinfo::TcpInfo;

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny seeded generator for jitter.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
}

/// Facts of a two-host lab (`client`, `server`, one `eth0` each) on a `hz` kernel with Linux
/// default sysctls, 2 CPUs, cubic default and bbr available.
pub fn facts(hz: u32) -> Facts {
    let host_sysctls: BTreeMap<String, String> = [
        ("net.ipv4.tcp_rmem", "4096 131072 6291456"),
        ("net.ipv4.tcp_wmem", "4096 16384 4194304"),
        ("net.ipv4.ip_local_port_range", "32768 60999"),
        ("net.ipv4.tcp_tw_reuse", "2"),
        ("net.ipv4.tcp_rto_min_us", "200000"),
        ("net.ipv4.tcp_congestion_control", "cubic"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let host = HostFacts {
        sysctls: host_sysctls,
        interfaces: vec![InterfaceFacts {
            name: "eth0".into(),
            mtu: 1500,
            offloads: None,
        }],
    };
    Facts {
        tcplab_version: "0.1.0".into(),
        kernel_release: "6.18.0".into(),
        kernel_version: "#1 SMP".into(),
        machine: "x86_64".into(),
        hz: Hz {
            hz,
            tick_ns: 1_000_000_000 / u64::from(hz.max(1)),
            method: "synthetic".into(),
            configured: Some(hz),
        },
        cpu: Cpu {
            count: 2,
            model: "synthetic".into(),
        },
        congestion_control: CongestionControl {
            available: vec!["reno".into(), "cubic".into(), "bbr".into()],
            default: "cubic".into(),
        },
        scheduling: Default::default(),
        rootless: Default::default(),
        emulator_override: None,
        machine_sysctls: [
            ("net.core.rmem_max", "212992"),
            ("net.core.wmem_max", "212992"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        hosts: [
            ("client".to_string(), host.clone()),
            ("server".to_string(), host),
        ]
        .into_iter()
        .collect(),
    }
}

/// A complete run's record against 198.18.0.2:5301 with the given sender options.
pub fn meta(nodelay: bool, congestion: &str) -> RunMeta {
    let opts = AppliedOpts {
        nodelay,
        congestion: congestion.into(),
        mss: 1448,
        delack_max_us: Some(40_000),
        rto_min_us: Some(200_000),
        ..AppliedOpts::default()
    };
    RunMeta {
        tool: "tcplab".into(),
        target: "198.18.0.2:5301".into(),
        complete: true,
        facts: Default::default(),
        options: Some(opts.clone()),
        server_options: Some(opts),
        ..RunMeta::default()
    }
}

/// A stream of messages as a receiver would stamp it.
#[derive(Debug, Clone)]
pub struct MsgSim {
    /// Messages.
    pub count: usize,
    /// Bytes each.
    pub size: u32,
    /// Send spacing, ns.
    pub spacing_ns: u64,
    /// One-way delay of an unstalled message, ns.
    pub base_ns: u64,
    /// Uniform jitter added to each delay, ns.
    pub jitter_ns: u64,
    /// Receiver time per message (in-order delivery: a message never completes before the
    /// previous one plus this), ns.
    pub per_msg_ns: u64,
    /// Jitter seed.
    pub seed: u64,
    /// A stall holds up the whole stream (a sender waiting for an ACK, seed 004) instead of
    /// delaying one message in the network: it is added after in-order queueing.
    pub stall_blocks_stream: bool,
}

impl MsgSim {
    /// `count` messages of `size` bytes, 17 µs apart (seed 004's spacing), 30 µs one-way,
    /// ±2 µs jitter, 1 µs per message at the receiver.
    pub fn new(count: usize, size: u32) -> Self {
        Self {
            count,
            size,
            spacing_ns: 17_000,
            base_ns: 30_000,
            jitter_ns: 2_000,
            per_msg_ns: 1_000,
            seed: 4,
            stall_blocks_stream: false,
        }
    }

    /// The run; `stall(i)` is the extra delay of message i in ns (messages behind it queue).
    pub fn run(&self, stall: impl Fn(usize) -> u64) -> MsgsRun {
        let mut rng = SplitMix::new(self.seed);
        let mut send_ns = Vec::with_capacity(self.count);
        let mut recv_ns: Vec<u64> = Vec::with_capacity(self.count);
        let t0 = 1_000_000_000u64;
        for i in 0..self.count {
            let s = t0 + i as u64 * self.spacing_ns;
            let (before, after) = if self.stall_blocks_stream {
                (0, stall(i))
            } else {
                (stall(i), 0)
            };
            let own = s + self.base_ns + rng.below(self.jitter_ns + 1) + before;
            let r = recv_ns
                .last()
                .map_or(own, |&p| own.max(p + self.per_msg_ns))
                + after;
            send_ns.push(s);
            recv_ns.push(r);
        }
        let total_s = (self.count as u64 * self.spacing_ns) as f64 / 1e9;
        MsgsRun {
            size: self.size,
            count: self.count as u64,
            sent: self.count as u64,
            received: self.count as u64,
            total_s,
            send_ns: send_ns.into(),
            recv_ns: recv_ns.into(),
            ..MsgsRun::default()
        }
    }
}

/// A msgs result of `runs` with the sender's TCP_NODELAY as given.
pub fn msgs(runs: Vec<MsgsRun>, nodelay: bool) -> MsgsResult {
    MsgsResult {
        meta: meta(nodelay, "cubic"),
        runs,
        ..MsgsResult::default()
    }
}

/// Records that the kernel counters `moved` rose on `role`'s side during `part` of `b` (in
/// place of whatever that side recorded before).
pub fn counters(
    b: &mut crate::battery::Battery,
    part: crate::plan::PartKind,
    role: crate::battery::Role,
    moved: &[(&str, u64)],
) {
    let side = moved.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    b.counters.entry(part).or_default().insert(role, side);
}

/// A packet train through a bottleneck as the far end stamps it: `count` messages of 1448
/// bytes, sent a window of `window_bytes` per round trip of `rtt_s` (a window of at least a
/// BDP keeps the bottleneck busy throughout), spaced by the bottleneck's `rate_bps`, and
/// delivered to the reader `coalesce` at a time (a receiver's coalescing stamps them together).
pub fn train(
    rate_bps: f64,
    rtt_s: f64,
    window_bytes: f64,
    count: usize,
    coalesce: usize,
) -> MsgsResult {
    let size = 1448u32;
    let tx_ns = f64::from(size) * 8.0 / rate_bps * 1e9;
    let per_window = ((window_bytes / f64::from(size)).floor() as usize).max(1);
    let t0 = 1_000_000_000.0;
    let mut arrivals: Vec<f64> = Vec::with_capacity(count);
    for i in 0..count {
        let window_start = t0 + (i / per_window) as f64 * rtt_s * 1e9;
        let own = window_start + rtt_s / 2.0 * 1e9 + tx_ns;
        let a = arrivals.last().map_or(own, |&p| own.max(p + tx_ns));
        arrivals.push(a);
    }
    let coalesce = coalesce.max(1);
    let recv: Vec<u64> = (0..count)
        .map(|i| {
            let last = ((i / coalesce + 1) * coalesce).min(count) - 1;
            arrivals[last] as u64
        })
        .collect();
    let send: Vec<u64> = (0..count)
        .map(|i| (t0 + (i / per_window) as f64 * rtt_s * 1e9) as u64)
        .collect();
    let total_s = (recv[count - 1] as f64 - t0) / 1e9;
    msgs(
        vec![MsgsRun {
            size,
            count: count as u64,
            sent: count as u64,
            received: count as u64,
            total_s,
            send_ns: send.into(),
            recv_ns: recv.into(),
            ..MsgsRun::default()
        }],
        true,
    )
}

/// Per-interval behaviour of a synthetic bulk flow.
#[derive(Debug, Clone)]
pub struct StreamSim {
    /// Measured intervals (after `omit` warm-up intervals).
    pub intervals: u32,
    /// Warm-up intervals (omitted).
    pub omit: u32,
    /// Interval length, s.
    pub interval_s: f64,
    /// Throughput, bit/s.
    pub throughput_bps: f64,
    /// Smoothed RTT, µs.
    pub rtt_us: u32,
    /// Peer's advertised window, bytes.
    pub snd_wnd: u32,
    /// Share of each interval busy sending.
    pub busy_share: f64,
    /// Share of busy time limited by the receive window.
    pub rwnd_share: f64,
    /// Share of busy time limited by the send buffer.
    pub sndbuf_share: f64,
    /// Retransmitted share of bytes.
    pub loss: f64,
    /// Sender congestion control.
    pub congestion: String,
}

impl StreamSim {
    /// A healthy 10-interval, 1 s flow at `bps` on a `rtt_us` path: no limits, no loss.
    pub fn healthy(bps: f64, rtt_us: u32) -> Self {
        Self {
            intervals: 10,
            omit: 2,
            interval_s: 1.0,
            throughput_bps: bps,
            rtt_us,
            snd_wnd: 64 << 20,
            busy_share: 1.0,
            rwnd_share: 0.01,
            sndbuf_share: 0.0,
            loss: 0.0,
            congestion: "cubic".into(),
        }
    }

    /// The result: one client flow sending up, tcp_info counters cumulative.
    pub fn run(&self) -> StreamResult {
        let mss = 1448u64;
        let mut cum = TcpInfo {
            state: 1,
            rtt_us: self.rtt_us,
            min_rtt_us: self.rtt_us,
            snd_mss: mss as u32,
            snd_wnd: self.snd_wnd,
            cwnd: 10,
            ..TcpInfo::default()
        };
        let mut intervals = Vec::new();
        let per_interval_bytes = (self.throughput_bps / 8.0 * self.interval_s) as u64;
        for index in 0..self.omit + self.intervals {
            let busy = (self.interval_s * 1e6 * self.busy_share) as u64;
            let retrans = (per_interval_bytes as f64 * self.loss) as u64;
            cum.busy_us += busy;
            cum.rwnd_limited_us += (busy as f64 * self.rwnd_share) as u64;
            cum.sndbuf_limited_us += (busy as f64 * self.sndbuf_share) as u64;
            cum.bytes_acked += per_interval_bytes;
            cum.bytes_retrans += retrans;
            cum.total_retrans = (cum.bytes_retrans / mss) as u32;
            cum.delivery_rate_bps = self.throughput_bps as u64;
            cum.ca_state = u8::from(self.loss > 0.0 && index % 4 == 0) * 4;
            intervals.push(IntervalSample {
                index,
                flow: 0,
                sending: true,
                start_s: f64::from(index) * self.interval_s,
                end_s: f64::from(index + 1) * self.interval_s,
                bytes: per_interval_bytes,
                bps: Some(self.throughput_bps),
                omitted: index < self.omit,
                tcp_info: Some(cum),
                unread_bytes: None,
            });
        }
        let mut r = StreamResult {
            meta: meta(false, &self.congestion),
            elapsed_s: f64::from(self.omit + self.intervals) * self.interval_s,
            intervals,
            ..StreamResult::default()
        };
        r.summary.throughput_bps = Some(self.throughput_bps);
        r.summary.retransmits = u64::from(cum.total_retrans);
        r.meta.client_cpu_s = r.elapsed_s * 0.3;
        r.meta.server_cpu_s = r.elapsed_s * 0.2;
        r
    }
}

/// A closed-loop rr result of `latencies` (ns each) for `req`-byte requests.
pub fn rr(req: u32, latencies: &[u64], nodelay: bool) -> RrResult {
    let mut t = 1_000_000_000u64;
    let samples: Vec<RrSample> = latencies
        .iter()
        .map(|&l| {
            let s = RrSample {
                intended_ns: t,
                sent_ns: t,
                done_ns: t + l,
            };
            t += l + 1_000;
            s
        })
        .collect();
    let elapsed_s = (t - 1_000_000_000) as f64 / 1e9;
    let mut r = RrResult {
        meta: meta(nodelay, "cubic"),
        mode: "closed".into(),
        points: vec![RrPoint {
            req,
            resp: req,
            transactions: samples.len() as u64,
            elapsed_s,
            samples,
            ..RrPoint::default()
        }],
        ..RrResult::default()
    };
    r.summary.transactions = latencies.len() as u64;
    r
}

/// A crr result of `n` connections at `rate`/s whose connect times (ns) come from `connect`.
pub fn crr(n: usize, rate: f64, connect: impl Fn(usize) -> u64) -> CrrResult {
    let samples: Vec<CrrSample> = (0..n)
        .map(|i| {
            let start_ns = 1_000_000_000 + (i as f64 / rate * 1e9) as u64;
            let c = connect(i);
            CrrSample {
                start_ns,
                connected_ns: start_ns + c,
                done_ns: start_ns + c + 50_000,
            }
        })
        .collect();
    let mut r = CrrResult {
        meta: meta(false, "cubic"),
        elapsed_s: n as f64 / rate,
        server_transactions: n as u64,
        samples,
        ..CrrResult::default()
    };
    r.summary.transactions = n as u64;
    r.summary.connections_per_s = Some(rate);
    let near_1s = r
        .samples
        .iter()
        .filter(|s| (800_000_000..2_500_000_000).contains(&(s.connected_ns - s.start_ns)))
        .count();
    let near_3s = r
        .samples
        .iter()
        .filter(|s| s.connected_ns - s.start_ns >= 2_500_000_000)
        .count();
    r.syn_retrans.connects_near_1s = near_1s as u64;
    r.syn_retrans.connects_near_3s = near_3s as u64;
    r.syn_retrans.kernel_syn_retrans = Some((near_1s + 2 * near_3s) as u64);
    r.summary.connect_us.max = r
        .samples
        .iter()
        .map(|s| (s.connected_ns - s.start_ns) as f64 / 1e3)
        .reduce(f64::max);
    r
}

/// Adds `per_second` EADDRNOTAVAIL failures in each of `seconds`.
pub fn with_addrnotavail(mut r: CrrResult, seconds: &[u64], per_second: u64) -> CrrResult {
    r.errors = seconds
        .iter()
        .map(|&second| ErrorSecond {
            second,
            addrnotavail: per_second,
            ..ErrorSecond::default()
        })
        .collect();
    r.errors_total.addrnotavail = per_second * seconds.len() as u64;
    r
}

/// An HTTP result of `n` requests at `rate`/s, each on a connection of its own (SPECweb96's
/// HTTP/1.0 clients; `--requests-per-connection 1`) whose connect times (ns) come from
/// `connect`: the client's view only (no server TIME_WAIT or counters).
pub fn http(n: usize, rate: f64, connect: impl Fn(usize) -> u64) -> HttpResult {
    let samples: Vec<HttpSample> = (0..n)
        .map(|i| {
            let start_ns = 1_000_000_000 + (i as f64 / rate * 1e9) as u64;
            let connected_ns = start_ns + connect(i);
            HttpSample {
                intended_ns: start_ns,
                start_ns,
                connected_ns,
                first_byte_ns: connected_ns + 100_000,
                done_ns: connected_ns + 150_000,
                status: 200,
                class: 1,
                error: tcplab_results::http::result::NONE,
                bytes: 5_120,
            }
        })
        .collect();
    let connect_s: Vec<u64> = samples
        .iter()
        .map(|s| s.connected_ns - s.start_ns)
        .collect();
    let mut r = HttpResult {
        meta: meta(false, "cubic"),
        config: HttpConfig {
            connections: 2,
            requests_per_connection: Some(1),
            ..HttpConfig::default()
        },
        elapsed_s: n as f64 / rate,
        connections_opened: n as u64,
        samples,
        ..HttpResult::default()
    };
    r.summary.requests = n as u64;
    r.summary.ops_per_s = Some(rate);
    let near_1s = connect_s
        .iter()
        .filter(|c| (800_000_000..2_500_000_000).contains(*c))
        .count() as u64;
    let near_3s = connect_s.iter().filter(|c| **c >= 2_500_000_000).count() as u64;
    r.syn_retrans.connects_near_1s = near_1s;
    r.syn_retrans.connects_near_3s = near_3s;
    r.syn_retrans.kernel_syn_retrans = Some(near_1s + 2 * near_3s);
    r.summary.connect_us.n = n as u64;
    r.summary.connect_us.max = connect_s.iter().map(|&c| c as f64 / 1e3).reduce(f64::max);
    r
}

/// Adds `per_second` EADDRNOTAVAIL connect failures in each of `seconds` to an HTTP result.
pub fn http_with_addrnotavail(mut r: HttpResult, seconds: &[u64], per_second: u64) -> HttpResult {
    r.errors = seconds
        .iter()
        .map(|&second| HttpErrors {
            second,
            connect: per_second,
            addrnotavail: per_second,
            ..HttpErrors::default()
        })
        .collect();
    r.errors_total.connect = per_second * seconds.len() as u64;
    r.errors_total.addrnotavail = r.errors_total.connect;
    r.summary.errors = r.errors_total.total();
    r
}

/// The record of a run through tcplab's emulator on `link` whose model gave `account`, and
/// which kept its schedule.
pub fn emulated(
    link: tcplab_emu::LinkConfig,
    account: tcplab_results::emulator::RunAccount,
) -> tcplab_results::run_facts::EmulatorRecord {
    tcplab_results::run_facts::EmulatorRecord {
        seed: 1,
        link,
        fidelity: tcplab_results::emulator::RunFidelity {
            trustworthy: true,
            reasons: Vec::new(),
            need: None,
        },
        realised: Some(account),
        workloads: Vec::new(),
    }
}
