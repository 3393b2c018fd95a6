//! Root cause first: after every rule has spoken, a finding that explains another demotes it
//! to info, says so (`explained_by`), and the findings are ranked so the cause comes first.
//!
//! A user acts on the first finding. Several rules can see one cause from different sides:
//! loss on a path also loses SYNs; a reader slower than the path also closes the receive
//! window; a path-MTU black hole stalls everything that sends full-size packets. (A periodic
//! stall that a buffer explains is the periodic-stall rule's own check: a timer stall beside a
//! small buffer is still a timer stall.) Each relation below is one such "X explains Y", with the reason
//! given to the reader. Ranking: severity first, then [`CAUSAL_ORDER`] (causes before the
//! symptoms they produce), then the rules' own order.

use crate::finding::{Finding, Severity};

/// One relation: when a finding whose id starts with `cause` is reported (warning or above, and
/// not itself explained), a reported finding whose id starts with `effect` is its symptom.
struct Explains {
    cause: &'static str,
    effect: &'static str,
    why: &'static str,
}

/// Every relation, most fundamental causes first.
const RELATIONS: &[Explains] = &[
    Explains {
        cause: "untrustworthy.emulator",
        effect: "",
        why: "the emulator fell behind its schedule, so the path measured was not the one configured and this may be its artefact; re-run before acting on it",
    },
    Explains {
        cause: "mtu_blackhole",
        effect: "",
        why: "full-size packets never arrive, so every workload that sends them stalls, retransmits and times out",
    },
    Explains {
        cause: "receiver_limited",
        effect: "rwnd_limited",
        why: "the receive window closed because the application left data unread, not because the buffer is small",
    },
    Explains {
        cause: "cpu_limited",
        effect: "untrustworthy.cpu",
        why: "the busy CPU is the finding itself",
    },
    Explains {
        cause: "cpu_limited",
        effect: "receiver_limited",
        why: "the receiving application left data unread because its CPU was saturated",
    },
    Explains {
        cause: "untrustworthy.cpu",
        effect: "receiver_limited",
        why: "the receiving application left data unread because its CPU was saturated, which is this machine's limit, not the path's",
    },
    Explains {
        cause: "shallow_queue",
        effect: "loss_limited",
        why: "the losses are drops at the bottleneck's full queue",
    },
    Explains {
        cause: "reordering",
        effect: "loss_limited",
        why: "packets arriving out of order look like losses to the sender, which retransmits and backs off",
    },
    Explains {
        cause: "loss_limited",
        effect: "untrustworthy.samples",
        why: "the path loses packets: a part whose connections timed out, or that the losses cut short, is its symptom",
    },
    Explains {
        cause: "shallow_queue",
        effect: "untrustworthy.samples",
        why: "the bottleneck drops the bursts of every flow: a part that its drops cut short is their symptom",
    },
    Explains {
        cause: "loss_limited",
        effect: "connection_trouble.syn_retransmits",
        why: "the path loses packets, and a lost SYN or SYN-ACK waits for the 1 s SYN timer",
    },
    Explains {
        cause: "shallow_queue",
        effect: "connection_trouble.syn_retransmits",
        why: "the path drops packets, and a lost SYN or SYN-ACK waits for the 1 s SYN timer",
    },
    Explains {
        cause: "connection_trouble.accept_queue",
        effect: "connection_trouble.syn_retransmits",
        why: "the server's full accept queue dropped the handshakes, and each waited for the SYN timer",
    },
    Explains {
        cause: "connection_trouble.port_exhaustion",
        effect: "connection_trouble.time_wait",
        why: "the TIME_WAIT sockets are what used the ports up",
    },
];

/// Causes before symptoms, for ranking findings of equal severity (ids by prefix; anything not
/// listed ranks after these, in rule order).
pub const CAUSAL_ORDER: &[&str] = &[
    "untrustworthy.emulator",
    "mtu_blackhole",
    "receiver_limited",
    "cpu_limited",
    "sndbuf_limited",
    "rwnd_limited",
    "shallow_queue",
    "bufferbloat",
    "reordering",
    "loss_limited",
    "connection_trouble.accept_queue",
    "connection_trouble.port_exhaustion",
    "connection_trouble.time_wait",
    "connection_trouble.syn_retransmits",
    "delayed_ack_stall",
    "periodic_stall",
];

fn reported(f: &Finding) -> bool {
    f.severity >= Severity::Warning && f.explained_by.is_none()
}

/// Demotes every finding another explains, then ranks them.
pub fn apply(findings: &mut [Finding]) {
    for rel in RELATIONS {
        let Some(cause) = findings
            .iter()
            .find(|f| f.id.starts_with(rel.cause) && reported(f))
            .map(|f| f.id.clone())
        else {
            continue;
        };
        for f in findings.iter_mut() {
            let is_effect = f.id != cause && f.id.starts_with(rel.effect);
            // The emulator's verdict is about the measurement, not a symptom of the path.
            if is_effect && reported(f) && f.id != "untrustworthy.emulator" {
                f.severity = Severity::Info;
                f.explained_by = Some(cause.clone());
                f.explanation
                    .push_str(&format!(" Explained by {cause}: {}.", rel.why));
            }
        }
    }
    rank(findings);
}

/// Sorts by severity (most severe first), then causes before symptoms, keeping the rules'
/// order otherwise.
pub fn rank(findings: &mut [Finding]) {
    let order = |f: &Finding| {
        CAUSAL_ORDER
            .iter()
            .position(|c| f.id.starts_with(c))
            .unwrap_or(CAUSAL_ORDER.len())
    };
    findings.sort_by_key(|f| (std::cmp::Reverse(f.severity), order(f)));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(id: &str, severity: Severity) -> Finding {
        Finding::new(id, severity, id)
    }

    fn ids(v: &[Finding]) -> Vec<(&str, Severity)> {
        v.iter().map(|f| (f.id.as_str(), f.severity)).collect()
    }

    #[test]
    fn a_slow_reader_explains_the_closed_window() {
        let mut v = vec![
            f("rwnd_limited", Severity::Error),
            f("receiver_limited", Severity::Warning),
        ];
        apply(&mut v);
        assert_eq!(
            ids(&v),
            [
                ("receiver_limited", Severity::Warning),
                ("rwnd_limited", Severity::Info)
            ]
        );
        assert_eq!(v[1].explained_by.as_deref(), Some("receiver_limited"));
        assert!(v[1].explanation.contains("Explained by receiver_limited"));
        assert!(v[1].to_string().contains("explained by receiver_limited"));
    }

    #[test]
    fn an_info_cause_explains_nothing_and_chains_stop_at_explained_causes() {
        let mut v = vec![
            f("rwnd_limited", Severity::Error),
            f("receiver_limited", Severity::Info),
        ];
        apply(&mut v);
        assert_eq!(v[0].id, "rwnd_limited");
        assert_eq!(v[0].severity, Severity::Error);
        // The black hole explains the reader finding, which then explains nothing.
        let mut v = vec![
            f("rwnd_limited", Severity::Error),
            f("receiver_limited", Severity::Warning),
            f("mtu_blackhole", Severity::Error),
            f("untrustworthy.emulator", Severity::Critical),
        ];
        apply(&mut v);
        assert_eq!(
            ids(&v),
            [
                ("untrustworthy.emulator", Severity::Critical),
                ("mtu_blackhole", Severity::Info),
                ("receiver_limited", Severity::Info),
                ("rwnd_limited", Severity::Info),
            ]
        );
        // An emulator behind its schedule makes every other finding suspect.
        assert_eq!(v[1].explained_by.as_deref(), Some("untrustworthy.emulator"));
        let mut v = vec![
            f("rwnd_limited", Severity::Error),
            f("receiver_limited", Severity::Warning),
            f("mtu_blackhole", Severity::Error),
        ];
        apply(&mut v);
        assert_eq!(v[2].explained_by.as_deref(), Some("mtu_blackhole"));
    }

    #[test]
    fn loss_explains_syn_retransmissions_and_ranking_puts_causes_first() {
        let mut v = vec![
            f("connection_trouble.syn_retransmits", Severity::Error),
            f("delayed_ack_stall", Severity::Warning),
            f("loss_limited", Severity::Warning),
        ];
        apply(&mut v);
        assert_eq!(
            ids(&v),
            [
                ("loss_limited", Severity::Warning),
                ("delayed_ack_stall", Severity::Warning),
                ("connection_trouble.syn_retransmits", Severity::Info),
            ]
        );
    }

    #[test]
    fn a_saturated_cpu_explains_a_receiver_that_left_data_unread() {
        let mut v = vec![
            f("receiver_limited", Severity::Warning),
            f("untrustworthy.cpu", Severity::Warning),
        ];
        apply(&mut v);
        let r = v.iter().find(|x| x.id == "receiver_limited").unwrap();
        assert_eq!(r.severity, Severity::Info);
        assert_eq!(r.explained_by.as_deref(), Some("untrustworthy.cpu"));
        let mut v = vec![
            f("receiver_limited", Severity::Warning),
            f("cpu_limited", Severity::Warning),
            f("untrustworthy.cpu", Severity::Warning),
        ];
        apply(&mut v);
        let r = v.iter().find(|x| x.id == "receiver_limited").unwrap();
        assert_eq!(r.explained_by.as_deref(), Some("cpu_limited"));
    }
}
