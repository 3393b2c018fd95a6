//! `mtu_blackhole`: full-size packets vanish while small ones pass. A hop with a smaller MTU
//! than the endpoints' (a tunnel, a VLAN, jumbo frames on one side only) drops what does not
//! fit, and when no ICMP "fragmentation needed" comes back (filtered, or a layer-2 hop that
//! cannot send one), TCP keeps resending the same full-size segment with its timer doubling:
//! the connection is open, small requests work, bulk transfers hang.
//!
//! Evidence: the bulk flow delivered almost nothing and backed its retransmission timer off,
//! while request/response of small messages completed; and, when the facts list the hosts'
//! interfaces, an MTU on the path smaller than the sender's.

use tcplab_results::stream::StreamResult;

use crate::battery::{Context, Role};
use crate::finding::{Finding, Fix, Scope, Severity};

/// A bulk flow below this rate moved "nothing": a healthy path of the slowest kind the doctor
/// judges (10 Mbit/s) delivers a thousand times more.
pub const STUCK_BPS: f64 = 100_000.0;

/// Fewest small transactions that must have completed to say small packets pass.
pub const MIN_SMALL_TRANSACTIONS: u64 = 10;

/// The rule.
pub fn check(ctx: &Context<'_>) -> Vec<Finding> {
    let (Some(stream), Some(rr)) = (&ctx.battery.stream, &ctx.battery.rr) else {
        return Vec::new();
    };
    let throughput = stream.summary.throughput_bps.unwrap_or(0.0);
    let backoffs = timeouts(stream);
    if throughput >= STUCK_BPS || backoffs == 0 || rr.summary.transactions < MIN_SMALL_TRANSACTIONS
    {
        return Vec::new();
    }
    let mss = stream
        .intervals
        .iter()
        .filter_map(|i| i.tcp_info)
        .map(|t| t.snd_mss)
        .max()
        .unwrap_or(0);
    let mut f = Finding::new(
        "mtu_blackhole",
        Severity::Error,
        format!(
            "full-size packets vanish: the bulk flow moved {:.0} kbit/s and timed out {backoffs} times while {} small requests got through",
            throughput / 1e3,
            rr.summary.transactions
        ),
    );
    f.push(
        "throughput_bps",
        throughput,
        "bit/s",
        "stream, after warm-up",
    );
    f.push(
        "retransmission_timeouts",
        backoffs as f64,
        "timeouts",
        "the sending flows' retransmission timer fired (tcp_info total_rto, or backoff)",
    );
    f.push(
        "sender_mss_bytes",
        f64::from(mss),
        "bytes",
        "segment size the sender used (tcp_info snd_mss)",
    );
    f.push(
        "small_transactions",
        rr.summary.transactions as f64,
        "transactions",
        "64-byte request/response, completed on the same path",
    );
    if let Some((host, iface, mtu)) = smallest_mtu(ctx) {
        f.push(
            "smallest_mtu_bytes",
            f64::from(mtu),
            "bytes",
            format!("interface {iface} of host {host}, on the path"),
        );
    }
    if !stream.meta.complete {
        f.push(
            "stream_cut_short",
            1.0,
            "bool",
            stream
                .meta
                .incomplete_reason
                .clone()
                .unwrap_or_else(|| "no reason given".into()),
        );
    }
    f.explanation = format!(
        "Segments of {mss} bytes never arrive while small packets do: a hop on the path has a smaller MTU and drops larger packets without a usable ICMP \"fragmentation needed\" (filtered, or a layer-2 hop that cannot send one). TCP resends the same segment with its timer doubling and the transfer hangs. Make the MTUs agree, or let TCP find the size that works: packetization-layer path MTU discovery (tcp_mtu_probing) shrinks the segments after a black-hole timeout, and MSS clamping at the hop avoids the problem for every host behind it."
    );
    let sender = ctx.describe_host("sender", Role::Client);
    f.fixes = vec![
        Fix::sysctl("net.ipv4.tcp_mtu_probing", "1", Scope::Namespace, &sender),
        Fix::other(
            "give every interface on the path the same MTU (ip link set dev <DEV> mtu 1500), or let ICMP \"fragmentation needed\" / \"packet too big\" through the firewalls",
            "the path",
        ),
        Fix {
            lines: vec![
                "iptables -t mangle -A FORWARD -p tcp --tcp-flags SYN,RST SYN -j TCPMSS --clamp-mss-to-pmtu".into(),
            ],
            ..Fix::other("clamp the MSS at the hop with the smaller MTU", "the router")
        },
    ];
    vec![f]
}

/// Retransmission timeouts of the sending flows over the run.
fn timeouts(stream: &StreamResult) -> u64 {
    stream
        .intervals
        .iter()
        .chain(&stream.server_intervals)
        .filter(|i| i.sending)
        .filter_map(|i| i.tcp_info)
        .map(|t| u64::from(t.total_rto).max(u64::from(t.backoff)))
        .max()
        .unwrap_or(0)
}

/// The smallest MTU among the lab's interfaces when they differ, with its host and interface.
fn smallest_mtu(ctx: &Context<'_>) -> Option<(String, String, u32)> {
    let facts = ctx.facts.as_ref()?;
    let all: Vec<(String, String, u32)> = facts
        .hosts
        .iter()
        .flat_map(|(h, hf)| {
            hf.interfaces
                .iter()
                .map(move |i| (h.clone(), i.name.clone(), i.mtu))
        })
        .collect();
    let min = all.iter().min_by_key(|x| x.2)?;
    let max = all.iter().map(|x| x.2).max()?;
    (min.2 < max).then(|| min.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::Battery;
    use crate::synth::{self, StreamSim};

    fn stuck(total_rto: u16) -> Battery {
        let mut s = StreamSim::healthy(0.0, 2_000).run();
        s.summary.throughput_bps = None;
        for i in s.intervals.iter_mut() {
            if let Some(t) = i.tcp_info.as_mut() {
                t.total_rto = total_rto;
                t.snd_mss = 8948;
            }
        }
        Battery {
            stream: Some(s),
            rr: Some(synth::rr(64, &[2_000_000; 500], true)),
            facts: Some(synth::facts(250)),
            ..Battery::default()
        }
    }

    #[test]
    fn a_stuck_flow_with_timeouts_beside_working_requests_is_a_black_hole() {
        let f = check(&Context::new(&stuck(6)));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, "mtu_blackhole");
        assert_eq!(f[0].figure("retransmission_timeouts"), Some(6.0));
        assert_eq!(f[0].figure("sender_mss_bytes"), Some(8948.0));
        assert_eq!(f[0].fixes[0].lines, ["net.ipv4.tcp_mtu_probing = 1"]);
    }

    #[test]
    fn silent_without_timeouts_or_when_the_flow_moves() {
        assert!(check(&Context::new(&stuck(0))).is_empty());
        let mut b = stuck(6);
        if let Some(s) = b.stream.as_mut() {
            s.summary.throughput_bps = Some(5e6);
        }
        assert!(check(&Context::new(&b)).is_empty());
    }
}
