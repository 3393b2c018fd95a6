//! What the battery's small, spaced packets say of the path's own loss. The plain msgs run
//! sends 1-byte messages spaced so they never queue at the bottleneck (tens of thousands of
//! small packets, each gone from the bottleneck long before the next arrives), rr one request
//! at a time, crr one per connection: a packet of theirs that is lost was lost by the path (a
//! bad link, random loss), never by a queue the battery filled itself. Their sender's kernel counters (retransmitted segments against segments
//! sent, less what the receiver reported as duplicates) are the path's loss rate; a bulk flow
//! that retransmits far more than they do overran the bottleneck on its own. The size sweep
//! is left out: its full-size messages load the link at half its rate, which a queue of a few
//! packets can drop under the pacer's jitter: a queue's loss, not the path's.

use crate::battery::{Context, Role};
use crate::plan::PartKind;

/// The parts whose packets never queue at the bottleneck: the plain msgs run (spaced), rr (one
/// 64-byte request in flight) and crr (one request per connection, two loops). What a loss on
/// the way back makes the client resend is left out: SYN retransmissions (a lost SYN-ACK) and
/// tail-loss probes that repaired nothing (a lost response); and crr counts only when the server
/// dropped no handshake of its own (a full accept queue makes the client resend what the server
/// threw away).
const PACED: [PartKind; 3] = [PartKind::Msgs, PartKind::Rr, PartKind::Crr];

/// Fewest retransmissions of paced traffic for the path to count as lossy on its own: fewer
/// may be a tail-loss probe or one spurious timeout.
pub const MIN_PROBE_RETRANS: u64 = 5;

/// Fewest losses the paced traffic should have shown, at a bulk flow's loss rate, before its
/// showing (almost) none proves the path does not lose at that rate.
pub const EXPECTED_LOSSES: f64 = 6.0;

/// What the paced traffic saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeLoss {
    /// Segments the client sent during the paced parts.
    pub sent: u64,
    /// Of them retransmitted, less those the receiver reported as duplicates.
    pub lost: u64,
}

impl ProbeLoss {
    /// The client's paced parts, from its counters; `None` when they were not recorded.
    pub fn of(ctx: &Context<'_>) -> Option<Self> {
        let mut seen = false;
        let (mut sent, mut lost) = (0u64, 0u64);
        for part in PACED {
            let get = |n: &str| ctx.counter(part, Role::Client, n);
            let Some(out) = get("Tcp.OutSegs") else {
                continue;
            };
            let syn = if part == PartKind::Crr {
                let server = |n: &str| ctx.counter(part, Role::Server, n);
                let dropped = server("TcpExt.ListenOverflows")
                    .zip(server("TcpExt.ListenDrops"))
                    .map(|(a, b)| a + b);
                if dropped != Some(0) {
                    continue;
                }
                get("TcpExt.TCPSynRetrans").unwrap_or(0)
            } else {
                0
            };
            seen = true;
            // A tail-loss probe resends the last segment when its ACK is late: a response lost
            // on the way back makes rr's and crr's client probe. Only the probes that repaired
            // a real loss count.
            let probes = get("TcpExt.TCPLossProbes")
                .unwrap_or(0)
                .saturating_sub(get("TcpExt.TCPLossProbeRecovery").unwrap_or(0));
            let retrans = get("Tcp.RetransSegs")
                .unwrap_or(0)
                .saturating_sub(syn + probes);
            let duplicates = get("TcpExt.TCPDSACKRecvSegs").unwrap_or(0);
            sent += out;
            lost += retrans.saturating_sub(duplicates);
        }
        (seen && sent > 0).then_some(Self { sent, lost })
    }

    /// Lost / sent.
    pub fn rate(&self) -> f64 {
        self.lost as f64 / self.sent.max(1) as f64
    }

    /// Whether the path loses packets on its own evidence: enough losses, at a rate worth
    /// naming.
    pub fn lossy(&self, min_rate: f64) -> bool {
        self.lost >= MIN_PROBE_RETRANS && self.rate() >= min_rate
    }

    /// Whether the paced traffic shows the path does not lose at `flow_loss` (a bulk flow's
    /// loss rate): at that rate it should have lost [`EXPECTED_LOSSES`] or more and lost under
    /// a third of what it should, and fewer than [`MIN_PROBE_RETRANS`].
    pub fn clean_at(&self, flow_loss: f64) -> bool {
        let expected = self.sent as f64 * flow_loss;
        expected >= EXPECTED_LOSSES
            && (self.lost as f64) < expected / 3.0
            && self.lost < MIN_PROBE_RETRANS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::Battery;

    fn with(sent: u64, retrans: u64, dups: u64) -> Battery {
        let mut b = Battery::default();
        crate::synth::counters(
            &mut b,
            PartKind::Msgs,
            Role::Client,
            &[
                ("Tcp.OutSegs", sent),
                ("Tcp.RetransSegs", retrans),
                ("TcpExt.TCPDSACKRecvSegs", dups),
            ],
        );
        b
    }

    #[test]
    fn paced_losses_less_duplicates_are_the_path_s() {
        let b = with(20_000, 50, 10);
        let p = ProbeLoss::of(&Context::new(&b)).expect("recorded");
        assert_eq!((p.sent, p.lost), (20_000, 40));
        assert!((p.rate() - 0.002).abs() < 1e-12);
        assert!(p.lossy(1e-4));
        assert!(!p.clean_at(0.01));
    }

    #[test]
    fn a_clean_probe_clears_the_path_only_where_it_should_have_seen_losses() {
        let p = ProbeLoss::of(&Context::new(&with(20_000, 1, 0))).expect("recorded");
        assert!(!p.lossy(1e-4));
        // At 0.1 %, 20 losses were due and 1 came: the path does not lose at that rate.
        assert!(p.clean_at(0.001));
        // At 0.01 %, 2 were due: too few to say.
        assert!(!p.clean_at(0.0001));
        assert_eq!(ProbeLoss::of(&Context::new(&Battery::default())), None);
    }
}
