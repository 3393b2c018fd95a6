//! Settings worth racing for a workload: the fixes doctor proposed that can be tried inside a lab
//! host (per-namespace sysctls, socket options), plus known-good presets for the workload.
//! Pure: findings and facts in, factors out.

use std::collections::BTreeMap;

use tcplab_doctor::Finding;
use tcplab_doctor::{FixKind, Scope};

pub use tcplab_results::spec::WorkloadKind;
use tcplab_results::spec::WorkloadSpec;
use tcplab_results::{crr::CrrConfig, rr::RrConfig, rrul::RrulConfig, stream::StreamConfig};
use tcplab_study::scenario::FactorSpec;

/// The workloads tune can optimise (http needs a web server's lab, which tune does not build).
pub const TUNABLE: &[WorkloadKind] = &[
    WorkloadKind::Msgs,
    WorkloadKind::Rr,
    WorkloadKind::Stream,
    WorkloadKind::Crr,
    WorkloadKind::Rrul,
];

/// The workload tune races for `kind`, its runs lasting about `seconds`: small messages at
/// sfperf's size, 64-byte request/response, one bulk flow, two connection loops, and latency
/// under load with a second of idle probes on each side of the load.
pub fn workload_spec(kind: WorkloadKind, seconds: f64) -> WorkloadSpec {
    let ms = (seconds.max(0.5) * 1000.0).round() as u64;
    match kind {
        WorkloadKind::Msgs | WorkloadKind::Http => WorkloadSpec::default_of(WorkloadKind::Msgs),
        WorkloadKind::Rr => WorkloadSpec::Rr(RrConfig {
            req: 64,
            resp: 64,
            duration_ms: Some(ms),
            ..RrConfig::default()
        }),
        WorkloadKind::Stream => WorkloadSpec::Stream(StreamConfig {
            duration_ms: Some(ms),
            ..StreamConfig::default()
        }),
        WorkloadKind::Crr => WorkloadSpec::Crr(CrrConfig {
            concurrency: 2,
            duration_ms: Some(ms),
            ..CrrConfig::default()
        }),
        WorkloadKind::Rrul => WorkloadSpec::Rrul(RrulConfig {
            before_ms: 1_000,
            during_ms: ms.max(1_000),
            after_ms: 1_000,
            ..RrulConfig::default()
        }),
    }
}

/// The objective's metric and goal, as a scenario's `objective` writes them.
pub fn objective(kind: WorkloadKind) -> (&'static str, &'static str) {
    let h = kind.headline();
    let goal = match h.better {
        tcplab_results::spec::Better::Higher => "maximise",
        tcplab_results::spec::Better::Lower => "minimise",
    };
    (h.metric, goal)
}

/// One factor to race: a name the study understands and its values, the first being the
/// baseline (what the host has now).
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Factor name (`socket.nodelay`, `sysctl.all."net.ipv4.tcp_rmem"`, `buffers`).
    pub name: String,
    /// Several settings moved together (`buffers`: tcp_rmem and tcp_wmem).
    pub targets: Option<Vec<String>>,
    /// Labels of the values of a multi-target factor.
    pub labels: Option<Vec<String>>,
    /// Values, baseline first.
    pub values: Vec<toml::Value>,
    /// Why it is tried.
    pub why: String,
}

impl Candidate {
    fn single(name: &str, values: Vec<toml::Value>, why: &str) -> Candidate {
        Candidate {
            name: name.into(),
            targets: None,
            labels: None,
            values,
            why: why.into(),
        }
    }

    /// The `[[factor]]` this candidate races: its name, targets, labels and values.
    pub fn to_factor(&self) -> FactorSpec {
        FactorSpec {
            name: self.name.clone(),
            targets: self.targets.clone(),
            labels: self.labels.clone(),
            values: Some(self.values.clone()),
            range: None,
            steps: None,
            scale: None,
        }
    }

    /// The text the study stores for value `i` (its label, or the value itself).
    pub fn text_of(&self, i: usize) -> String {
        if let Some(l) = self.labels.as_ref().and_then(|l| l.get(i)) {
            return l.clone();
        }
        match self.values.get(i) {
            Some(toml::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        }
    }
}

/// Most factors raced at once: 3 two-level factors are 8 configurations, which a few minutes
/// can still repeat often enough to separate.
pub const MAX_FACTORS: usize = 3;

/// Where the candidates will be raced, which decides what can vary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Where<'a> {
    /// In labs tune builds: per-namespace sysctls and socket options, and, when the lab's link
    /// has a bottleneck (a rate), its queue discipline: `link` is the lab's `[lab.link]`.
    Lab {
        /// The lab's link.
        link: &'a tcplab_study::scenario::ImpairmentFlags,
    },
    /// Against a remote `tcplab serve`: socket options only (they reach the server in the test's
    /// parameters); the hosts' sysctls are not tune's to change.
    Remote,
}

/// Candidates for `workload`: the findings' fixes that can be tried `place` first (they answer
/// what was measured), then presets, without duplicates, at most [`MAX_FACTORS`]. `sysctls` are
/// the client host's current values (from the facts), used as baselines.
pub fn candidates(
    workload: WorkloadKind,
    findings: &[Finding],
    sysctls: &BTreeMap<String, String>,
    place: Where,
) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = Vec::new();
    let current = |key: &String, fallback: &str| {
        toml::Value::String(
            sysctls
                .get(key)
                .cloned()
                .unwrap_or_else(|| fallback.to_string()),
        )
    };
    for finding in findings.iter().filter(|f| relevant(workload, &f.id)) {
        for fix in &finding.fixes {
            let why = format!("doctor: {}", finding.id);
            let c = match &fix.kind {
                FixKind::Sysctl {
                    key,
                    value,
                    scope: Scope::Namespace,
                } if matches!(place, Where::Lab { .. }) => Some(Candidate::single(
                    &format!("sysctl.all.\"{key}\""),
                    vec![current(key, ""), toml::Value::String(value.clone())],
                    &why,
                )),
                FixKind::SetSockOpt { option, value } => {
                    sockopt_candidate(option.as_str(), value.as_str(), &why)
                }
                _ => None,
            };
            if let Some(c) = c {
                if !c.values.iter().any(|v| v.as_str() == Some("")) {
                    out.push(c);
                }
            }
        }
    }
    // A preset that sets what a finding's fix already sets (by the same sysctl, or by a socket
    // option that overrides it) would fight it.
    let set_by_findings: Vec<String> = out.iter().map(|c| controls(&c.name).to_owned()).collect();
    let presets = match place {
        Where::Lab { link } => {
            let mut p = bottleneck_presets(workload, findings, link);
            p.extend(presets(workload, sysctls));
            p
        }
        Where::Remote => remote_presets(workload, sysctls),
    };
    for c in presets {
        let targets = c.targets.clone().unwrap_or_else(|| vec![c.name.clone()]);
        if !targets
            .iter()
            .any(|t| set_by_findings.iter().any(|f| f == controls(t)))
        {
            out.push(c);
        }
    }
    let mut seen = Vec::new();
    out.retain(|c| {
        let key = c.name.clone();
        let keep = !seen.contains(&key) && c.values.len() >= 2 && c.values[0] != c.values[1];
        seen.push(key);
        keep
    });
    out.truncate(MAX_FACTORS);
    out
}

/// Whether a finding speaks to the workload being tuned (a delayed-ACK stall does not limit a
/// bulk transfer; a small receive window does not slow a 1-byte ping-pong).
fn relevant(workload: WorkloadKind, id: &str) -> bool {
    let rule = id.split('.').next().unwrap_or(id);
    match workload {
        WorkloadKind::Stream => matches!(rule, "rwnd_limited" | "sndbuf_limited" | "loss_limited"),
        WorkloadKind::Msgs | WorkloadKind::Rr => {
            matches!(rule, "delayed_ack_stall" | "periodic_stall")
        }
        WorkloadKind::Crr | WorkloadKind::Http => rule == "connection_trouble",
        WorkloadKind::Rrul => matches!(rule, "bufferbloat" | "loss_limited"),
    }
}

fn sockopt_candidate(option: &str, value: &str, why: &str) -> Option<Candidate> {
    let b = |v: bool| toml::Value::Boolean(v);
    match option {
        "TCP_NODELAY" => Some(Candidate::single(
            "socket.nodelay",
            vec![b(false), b(true)],
            why,
        )),
        "TCP_QUICKACK" => Some(Candidate::single(
            "socket.quickack",
            vec![b(false), b(true)],
            why,
        )),
        "TCP_CONGESTION" => Some(Candidate::single(
            "socket.congestion",
            vec![
                toml::Value::String("cubic".into()),
                toml::Value::String(value.trim_matches('"').into()),
            ],
            why,
        )),
        "TCP_DELACK_MAX_US" => value.parse::<i64>().ok().map(|v| {
            Candidate::single(
                "socket.delack_max_us",
                vec![
                    toml::Value::Integer(200_000),
                    toml::Value::Integer(v.max(8_000)),
                ],
                why,
            )
        }),
        _ => None,
    }
}

/// The lab's bottleneck managed: for latency under load (rrul) on a link with a rate, the queue
/// disciplines that keep a queue short beside the link's own (drop-tail unless it names one),
/// first when the doctor found bufferbloat (the advice it gives is "a smaller bottleneck queue
/// or AQM"). A lab's link is the user's to configure; a real path's bottleneck is not tune's,
/// so only labs race it.
fn bottleneck_presets(
    workload: WorkloadKind,
    findings: &[Finding],
    link: &tcplab_study::scenario::ImpairmentFlags,
) -> Vec<Candidate> {
    if workload != WorkloadKind::Rrul || link.rate.is_none() {
        return Vec::new();
    }
    let s = |v: &str| toml::Value::String(v.into());
    let current = link.queue_discipline.as_deref().unwrap_or("droptail");
    let why = if findings.iter().any(|f| f.id.starts_with("bufferbloat")) {
        "doctor: bufferbloat: queue management at the bottleneck"
    } else {
        "preset: queue management at the bottleneck"
    };
    vec![Candidate::single(
        "link.queue_discipline",
        unique(vec![s(current), s("fq_codel"), s("pie")]),
        why,
    )]
}

/// Known-good settings per workload.
fn presets(workload: WorkloadKind, sysctls: &BTreeMap<String, String>) -> Vec<Candidate> {
    let b = |v: bool| toml::Value::Boolean(v);
    let s = |v: &str| toml::Value::String(v.into());
    let cur = |k: &str, f: &str| sysctls.get(k).cloned().unwrap_or_else(|| f.into());
    match workload {
        WorkloadKind::Msgs | WorkloadKind::Rr => vec![
            Candidate::single(
                "socket.nodelay",
                vec![b(false), b(true)],
                "preset: Nagle off",
            ),
            Candidate::single(
                "sysctl.all.\"net.ipv4.tcp_autocorking\"",
                vec![s(&cur("net.ipv4.tcp_autocorking", "1")), s("0")],
                "preset: autocorking merges small writes",
            ),
            Candidate::single(
                "socket.quickack",
                vec![b(false), b(true)],
                "preset: immediate ACKs",
            ),
        ],
        WorkloadKind::Stream => vec![
            Candidate {
                name: "buffers".into(),
                targets: Some(vec![
                    "sysctl.all.\"net.ipv4.tcp_rmem\"".into(),
                    "sysctl.all.\"net.ipv4.tcp_wmem\"".into(),
                ]),
                labels: Some(vec!["current".into(), "large".into()]),
                values: vec![
                    toml::Value::Array(vec![
                        s(&cur("net.ipv4.tcp_rmem", "4096 131072 6291456")),
                        s(&cur("net.ipv4.tcp_wmem", "4096 16384 4194304")),
                    ]),
                    toml::Value::Array(vec![s("4096 131072 67108864"), s("4096 65536 67108864")]),
                ],
                why: "preset: buffers large enough for 1 Gbit/s x 100 ms".into(),
            },
            congestion(sysctls, "preset: congestion control"),
        ],
        WorkloadKind::Crr => vec![
            Candidate::single(
                "sysctl.all.\"net.ipv4.tcp_tw_reuse\"",
                vec![s(&cur("net.ipv4.tcp_tw_reuse", "2")), s("1")],
                "preset: reuse TIME_WAIT ports for new connections",
            ),
            Candidate::single(
                "sysctl.all.\"net.ipv4.ip_local_port_range\"",
                vec![
                    s(&cur("net.ipv4.ip_local_port_range", "32768 60999")),
                    s("1024 65535"),
                ],
                "preset: the widest ephemeral port range",
            ),
        ],
        WorkloadKind::Rrul => vec![
            congestion(
                sysctls,
                "preset: a congestion control that keeps its own queue short",
            ),
            Candidate::single(
                "sysctl.all.\"net.ipv4.tcp_notsent_lowat\"",
                vec![
                    s(&cur("net.ipv4.tcp_notsent_lowat", "4294967295")),
                    s("16384"),
                ],
                "preset: TCP_NOTSENT_LOWAT keeps unsent data out of the send buffer's queue",
            ),
        ],
        WorkloadKind::Http => Vec::new(),
    }
}

/// Known-good per-socket settings per workload, for a path whose hosts tune cannot configure.
/// Connection rate has none: its fixes (port range, TIME_WAIT reuse) are host sysctls.
fn remote_presets(workload: WorkloadKind, sysctls: &BTreeMap<String, String>) -> Vec<Candidate> {
    let b = |v: bool| toml::Value::Boolean(v);
    match workload {
        WorkloadKind::Msgs | WorkloadKind::Rr => vec![
            Candidate::single(
                "socket.nodelay",
                vec![b(false), b(true)],
                "preset: Nagle off",
            ),
            Candidate::single(
                "socket.quickack",
                vec![b(false), b(true)],
                "preset: immediate ACKs",
            ),
            Candidate::single(
                "socket.delack_max_us",
                vec![toml::Value::Integer(200_000), toml::Value::Integer(8_000)],
                "preset: a shorter delayed-ACK timer (two ticks at HZ=250)",
            ),
        ],
        WorkloadKind::Stream => vec![congestion(
            sysctls,
            "preset: congestion control (both ends' sockets)",
        )],
        WorkloadKind::Rrul => vec![
            congestion(
                sysctls,
                "preset: a congestion control that keeps its own queue short",
            ),
            Candidate::single(
                "socket.notsent_lowat",
                vec![
                    toml::Value::Integer(i64::from(u32::MAX)),
                    toml::Value::Integer(16_384),
                ],
                "preset: TCP_NOTSENT_LOWAT keeps unsent data out of the send buffer's queue",
            ),
        ],
        WorkloadKind::Crr | WorkloadKind::Http => Vec::new(),
    }
}

/// Congestion control on both ends' sockets: the hosts' current default first (the
/// baseline), then cubic and BBR. One per socket option, so that a namespace whose
/// `tcp_allowed_congestion_control` lacks one still races it.
fn congestion(sysctls: &BTreeMap<String, String>, why: &str) -> Candidate {
    let s = |v: &str| toml::Value::String(v.into());
    let current = sysctls
        .get("net.ipv4.tcp_congestion_control")
        .map_or("cubic", String::as_str);
    Candidate::single(
        "socket.congestion",
        unique(vec![s(current), s("cubic"), s("bbr")]),
        why,
    )
}

/// What a factor controls, for telling two factors that would set the same thing (a finding's
/// `net.ipv4.tcp_congestion_control` and the congestion preset's socket option) apart from
/// two that do not: the setting itself, with a socket option named as its sysctl.
fn controls(target: &str) -> &str {
    match target {
        "socket.congestion" => "sysctl.all.\"net.ipv4.tcp_congestion_control\"",
        "socket.notsent_lowat" => "sysctl.all.\"net.ipv4.tcp_notsent_lowat\"",
        other => other,
    }
}

/// The values without repeats, first occurrence kept (the baseline stays first).
fn unique(values: Vec<toml::Value>) -> Vec<toml::Value> {
    let mut out: Vec<toml::Value> = Vec::new();
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcplab_doctor::{Fix, Severity};
    use tcplab_study::scenario::ImpairmentFlags;

    /// On a lab whose link has a bottleneck, latency under load races the queue discipline
    /// beside BBR and TCP_NOTSENT_LOWAT, first, from the link's own; without a rate there is no
    /// queue to manage, and a real path's bottleneck is not tune's.
    #[test]
    fn rrul_on_a_bottleneck_races_the_queue_discipline_first() {
        let link = ImpairmentFlags {
            rate: Some("20mbit".into()),
            queue: Some("1000".into()),
            ..ImpairmentFlags::default()
        };
        let bloat = Finding::new("bufferbloat", Severity::Error, "queueing under load");
        let c = candidates(
            WorkloadKind::Rrul,
            &[bloat],
            &BTreeMap::new(),
            Where::Lab { link: &link },
        );
        assert_eq!(c[0].name, "link.queue_discipline");
        let values: Vec<&str> = c[0].values.iter().filter_map(|v| v.as_str()).collect();
        assert_eq!(values, ["droptail", "fq_codel", "pie"]);
        assert!(c[0].why.contains("bufferbloat"), "{}", c[0].why);
        assert!(names(&c).contains(&"socket.congestion"));
        let pie = ImpairmentFlags {
            queue_discipline: Some("pie".into()),
            ..link.clone()
        };
        let c = candidates(
            WorkloadKind::Rrul,
            &[],
            &BTreeMap::new(),
            Where::Lab { link: &pie },
        );
        let values: Vec<&str> = c[0].values.iter().filter_map(|v| v.as_str()).collect();
        assert_eq!(
            values,
            ["pie", "fq_codel"],
            "the link's own first, no repeat"
        );
        let c = candidates(
            WorkloadKind::Rrul,
            &[],
            &BTreeMap::new(),
            Where::Lab {
                link: &ImpairmentFlags::default(),
            },
        );
        assert!(!names(&c).contains(&"link.queue_discipline"));
        let c = candidates(WorkloadKind::Rrul, &[], &BTreeMap::new(), Where::Remote);
        assert!(!names(&c).contains(&"link.queue_discipline"));
        let c = candidates(
            WorkloadKind::Stream,
            &[],
            &BTreeMap::new(),
            Where::Lab { link: &link },
        );
        assert!(!names(&c).contains(&"link.queue_discipline"));
    }

    #[test]
    fn every_tunable_workload_runs_and_has_something_to_race() {
        for &kind in TUNABLE {
            let spec = workload_spec(kind, 1.0);
            assert_eq!(spec.kind(), kind);
            spec.validate().unwrap_or_else(|e| panic!("{kind}: {e}"));
            let lab = candidates(
                kind,
                &[],
                &BTreeMap::new(),
                Where::Lab {
                    link: &ImpairmentFlags::default(),
                },
            );
            assert!(!lab.is_empty(), "{kind}");
        }
        let (metric, goal) = objective(WorkloadKind::Rrul);
        assert_eq!((metric, goal), ("inflation.during_p99_us", "minimise"));
        let rrul = candidates(
            WorkloadKind::Rrul,
            &[],
            &BTreeMap::new(),
            Where::Lab {
                link: &ImpairmentFlags::default(),
            },
        );
        let names: Vec<&str> = rrul.iter().map(|c| c.name.as_str()).collect();
        assert!(names.contains(&"socket.congestion"), "{names:?}");
    }

    fn rwnd_finding() -> Finding {
        let mut f = Finding::new("rwnd_limited", Severity::Warning, "receive window");
        f.fixes.push(Fix::sysctl(
            "net.ipv4.tcp_rmem",
            "4096 131072 8738000",
            Scope::Namespace,
            "receiver",
        ));
        f
    }

    fn names(c: &[Candidate]) -> Vec<&str> {
        c.iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn a_findings_namespace_fix_comes_first_with_the_current_value_as_baseline() {
        let sysctls = BTreeMap::from([(
            "net.ipv4.tcp_rmem".to_string(),
            "4096 87380 174760".to_string(),
        )]);
        let c = candidates(
            WorkloadKind::Stream,
            &[rwnd_finding()],
            &sysctls,
            Where::Lab {
                link: &ImpairmentFlags::default(),
            },
        );
        assert_eq!(
            names(&c),
            ["sysctl.all.\"net.ipv4.tcp_rmem\"", "socket.congestion"],
            "the buffers preset moves tcp_rmem too, so it gives way to the finding's fix"
        );
        assert_eq!(c[0].values[0].as_str(), Some("4096 87380 174760"));
        assert_eq!(c[0].values[1].as_str(), Some("4096 131072 8738000"));
    }

    #[test]
    fn a_finding_about_another_workload_is_not_raced() {
        let c = candidates(
            WorkloadKind::Msgs,
            &[rwnd_finding()],
            &BTreeMap::new(),
            Where::Lab {
                link: &ImpairmentFlags::default(),
            },
        );
        assert_eq!(
            names(&c),
            [
                "socket.nodelay",
                "sysctl.all.\"net.ipv4.tcp_autocorking\"",
                "socket.quickack"
            ]
        );
    }

    #[test]
    fn against_a_remote_host_only_socket_options_are_raced() {
        let c = candidates(
            WorkloadKind::Stream,
            &[rwnd_finding()],
            &BTreeMap::new(),
            Where::Remote,
        );
        assert_eq!(names(&c), ["socket.congestion"]);
        let c = candidates(WorkloadKind::Rr, &[], &BTreeMap::new(), Where::Remote);
        assert_eq!(
            names(&c),
            ["socket.nodelay", "socket.quickack", "socket.delack_max_us"]
        );
        assert!(candidates(WorkloadKind::Crr, &[], &BTreeMap::new(), Where::Remote).is_empty());
    }

    /// A bufferbloat finding whose fix is the namespace's default congestion control: the
    /// congestion preset (a socket option, which would override it) gives way to it, so the
    /// race does not cross two settings of the same thing.
    #[test]
    fn a_finding_s_congestion_control_replaces_the_socket_preset() {
        let mut f = Finding::new("bufferbloat", Severity::Error, "queueing under load");
        f.fixes.push(Fix::sysctl(
            "net.ipv4.tcp_congestion_control",
            "bbr",
            Scope::Namespace,
            "sender",
        ));
        let sysctls = BTreeMap::from([(
            "net.ipv4.tcp_congestion_control".to_string(),
            "reno".to_string(),
        )]);
        let c = candidates(
            WorkloadKind::Rrul,
            &[f],
            &sysctls,
            Where::Lab {
                link: &ImpairmentFlags::default(),
            },
        );
        assert_eq!(
            names(&c),
            [
                "sysctl.all.\"net.ipv4.tcp_congestion_control\"",
                "sysctl.all.\"net.ipv4.tcp_notsent_lowat\""
            ]
        );
        assert_eq!(c[0].values[0].as_str(), Some("reno"), "the baseline");
    }

    #[test]
    fn a_preset_equal_to_the_current_value_is_dropped() {
        let sysctls = BTreeMap::from([("net.ipv4.tcp_tw_reuse".to_string(), "1".to_string())]);
        let c = candidates(
            WorkloadKind::Crr,
            &[],
            &sysctls,
            Where::Lab {
                link: &ImpairmentFlags::default(),
            },
        );
        assert_eq!(
            names(&c),
            ["sysctl.all.\"net.ipv4.ip_local_port_range\""],
            "tw_reuse is already 1"
        );
    }

    #[test]
    fn at_most_max_factors_are_raced() {
        let mut f = Finding::new("delayed_ack_stall", Severity::Warning, "stall");
        f.fixes.push(Fix {
            kind: FixKind::SetSockOpt {
                option: "TCP_DELACK_MAX_US".into(),
                value: "4000".into(),
            },
            applies_to: "receiver".into(),
            lines: Vec::new(),
        });
        let c = candidates(
            WorkloadKind::Msgs,
            &[f],
            &BTreeMap::new(),
            Where::Lab {
                link: &ImpairmentFlags::default(),
            },
        );
        assert_eq!(c.len(), MAX_FACTORS);
        assert_eq!(c[0].name, "socket.delack_max_us");
        assert_eq!(
            c[0].values[1].as_integer(),
            Some(8_000),
            "raised to two ticks: the kernel refuses less"
        );
    }
}
