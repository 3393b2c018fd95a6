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

/// Caveats about the measurement of some parts of the battery (`Finding::rests_on`): the
/// emulator fell behind in them, or rr's threads waited for a CPU. A caveat weighs on the
/// findings that rest on those parts (the emulator's explains them: they may be its artefact),
/// and is worth a warning only when it does, or when nothing else is reported (a clean verdict
/// rests on every part). A caveat over parts no reported finding rests on is info: the
/// findings stand, and only the figures of those parts are in doubt.
const CAVEATS: &[&str] = &["untrustworthy.emulator", "untrustworthy.cpu_wait"];

fn is_caveat(f: &Finding) -> bool {
    CAVEATS.contains(&f.id.as_str())
}

/// Whether two findings rest on a common part; a finding that names none rests on all.
fn share_a_part(a: &Finding, b: &Finding) -> bool {
    a.rests_on.is_empty()
        || b.rests_on.is_empty()
        || a.rests_on.iter().any(|p| b.rests_on.contains(p))
}

/// Demotes a caveat no reported finding rests on (see [`CAVEATS`]).
fn weigh_caveats(findings: &mut [Finding]) {
    for i in 0..findings.len() {
        if !is_caveat(&findings[i]) || !reported(&findings[i]) {
            continue;
        }
        let caveat = &findings[i];
        let others = || {
            findings
                .iter()
                .filter(|f| !f.id.starts_with("untrustworthy") && f.id != caveat.id)
        };
        let explained = others().any(|f| f.explained_by.as_deref() == Some(caveat.id.as_str()));
        let weighs = others().any(|f| reported(f) && share_a_part(caveat, f));
        let alone = !others().any(reported);
        if explained || weighs || alone {
            continue;
        }
        let parts: Vec<&str> = caveat.rests_on.iter().map(|p| p.name()).collect();
        let f = &mut findings[i];
        f.severity = Severity::Info;
        f.explanation.push_str(&format!(
            " No finding of this run rests on {}: the findings above stand, and only the figures of {} are in doubt.",
            parts.join(", "),
            if parts.len() == 1 { "that part" } else { "those parts" }
        ));
    }
}

/// Demotes every finding another explains (a caveat only those that share a part with it),
/// weighs the caveats, then ranks the findings.
pub fn apply(findings: &mut [Finding]) {
    for rel in RELATIONS {
        let Some(cause) = findings
            .iter()
            .find(|f| f.id.starts_with(rel.cause) && reported(f))
            .cloned()
        else {
            continue;
        };
        let scoped = is_caveat(&cause);
        let cause_id = cause.id.clone();
        for f in findings.iter_mut() {
            let is_effect = f.id != cause_id
                && f.id.starts_with(rel.effect)
                && (!scoped || share_a_part(&cause, f));
            let cause = &cause_id;
            // The emulator's verdict is about the measurement, not a symptom of the path.
            if is_effect && reported(f) && f.id != "untrustworthy.emulator" {
                f.severity = Severity::Info;
                f.explained_by = Some(cause.clone());
                f.explanation
                    .push_str(&format!(" Explained by {cause}: {}.", rel.why));
            }
        }
    }
    weigh_caveats(findings);
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
    use crate::plan::PartKind;

    fn f(id: &str, severity: Severity) -> Finding {
        Finding::new(id, severity, id)
    }

    fn ids(v: &[Finding]) -> Vec<(&str, Severity)> {
        v.iter().map(|f| (f.id.as_str(), f.severity)).collect()
    }

    fn on(id: &str, severity: Severity, parts: &[PartKind]) -> Finding {
        let mut x = f(id, severity);
        x.rests_on = parts.to_vec();
        x
    }

    #[test]
    fn a_late_part_discredits_only_what_rests_on_it() {
        use PartKind::*;
        // The emulator fell behind in rr; the SYN finding rests on crr: it stands, and the
        // caveat, weighing on nothing reported, is info.
        let mut v = vec![
            on("untrustworthy.emulator", Severity::Critical, &[Rr]),
            on(
                "connection_trouble.syn_retransmits",
                Severity::Error,
                &[Crr, Http],
            ),
        ];
        apply(&mut v);
        assert_eq!(
            ids(&v),
            [
                ("connection_trouble.syn_retransmits", Severity::Error),
                ("untrustworthy.emulator", Severity::Info)
            ]
        );
        assert!(
            v[1].explanation
                .contains("No finding of this run rests on rr")
        );
        // Late in crr: the SYN finding may be the emulator's artefact.
        let mut v = vec![
            on("untrustworthy.emulator", Severity::Critical, &[Crr]),
            on(
                "connection_trouble.syn_retransmits",
                Severity::Error,
                &[Crr, Http],
            ),
        ];
        apply(&mut v);
        assert_eq!(v[0].id, "untrustworthy.emulator");
        assert_eq!(v[0].severity, Severity::Critical);
        assert_eq!(v[1].explained_by.as_deref(), Some("untrustworthy.emulator"));
        // A verdict of the whole battery (no parts named) weighs on everything.
        let mut v = vec![
            on("untrustworthy.emulator", Severity::Critical, &[]),
            on("reordering", Severity::Error, &[Stream]),
        ];
        apply(&mut v);
        assert_eq!(v[0].severity, Severity::Critical);
        assert_eq!(v[1].severity, Severity::Info);
    }

    #[test]
    fn a_caveat_alone_keeps_its_severity_and_one_under_a_finding_of_its_part_too() {
        use PartKind::*;
        // Nothing else reported: a clean verdict rests on every part, the late one included.
        let mut v = vec![on("untrustworthy.emulator", Severity::Critical, &[Rr])];
        apply(&mut v);
        assert_eq!(v[0].severity, Severity::Critical);
        // rr's threads waited for a CPU: a warning beside a finding read from rr, info beside
        // one read from the bulk flow only.
        let wait = || on("untrustworthy.cpu_wait", Severity::Warning, &[Rr]);
        let mut v = vec![
            wait(),
            on("delayed_ack_stall", Severity::Error, &[Msgs, Rr]),
        ];
        apply(&mut v);
        assert_eq!(v[1], {
            let mut w = wait();
            w.severity = Severity::Warning;
            w
        });
        let mut v = vec![wait(), on("rwnd_limited", Severity::Error, &[Stream])];
        apply(&mut v);
        assert_eq!(v[1].id, "untrustworthy.cpu_wait");
        assert_eq!(v[1].severity, Severity::Info);
        assert_eq!(v[0].severity, Severity::Error);
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
