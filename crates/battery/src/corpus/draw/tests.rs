use super::*;
use crate::corpus::CorpusFile;

#[test]
fn the_same_seed_draws_the_same_corpus_and_another_seed_another() {
    let a = draw(11, 30).to_toml().expect("toml");
    assert_eq!(a, draw(11, 30).to_toml().expect("toml"));
    assert_ne!(a, draw(12, 30).to_toml().expect("toml"));
}

#[test]
fn a_drawn_corpus_reads_back_and_every_case_builds_a_lab() {
    // CorpusFile::parse checks every point's lab spec.
    let text = draw(5, 60).to_toml().expect("toml");
    let c = CorpusFile::parse("drawn.toml", &text).expect("a drawn corpus parses");
    assert_eq!(c.cases.len(), 60);
    for case in &c.cases {
        assert_eq!(case.points.len(), 1, "{}", case.name);
        let lab = c.lab_of(case, 0).expect("lab");
        let spec = lab.to_spec("t").expect("a lab");
        let emu = spec.emulation.as_ref().expect("an emulated path");
        let rate = emu.link.forward.rate_bps.expect("a rate") as f64;
        assert!(
            (5e6 * 0.999..=1e9 * 1.001).contains(&rate),
            "{}: {rate}",
            case.name
        );
        for d in [emu.link.forward.delay_ns, emu.link.reverse.delay_ns] {
            assert!((490_000..=60_010_000).contains(&d), "{}: {d}", case.name);
        }
    }
}

#[test]
fn the_space_is_covered_over_a_large_draw() {
    let c = draw(3, 400);
    let healthy = c.cases.iter().filter(|k| k.cause == "healthy").count();
    assert!((50..=110).contains(&healthy), "{healthy} healthy of 400");
    let causes: std::collections::BTreeSet<&str> =
        c.cases.iter().map(|k| k.cause.as_str()).collect();
    assert_eq!(causes.len(), PATHOLOGIES.len() + 1, "{causes:?}");
    let asymmetric = c
        .cases
        .iter()
        .filter(|k| {
            let d = k.points[0].link.delay.as_deref().unwrap_or_default();
            d.split_once('/').is_some_and(|(a, b)| a != b)
        })
        .count();
    assert!(asymmetric > 60, "{asymmetric} asymmetric of 400");
    let reno = c
        .cases
        .iter()
        .filter(|k| {
            k.points[0]
                .sysctl
                .get("all")
                .is_some_and(|m| m.contains_key("net.ipv4.tcp_congestion_control"))
        })
        .count();
    assert!((120..=300).contains(&reno), "{reno} reno of 400");
    let background = c
        .cases
        .iter()
        .filter(|k| k.cause != "loss_limited" && k.also.iter().any(|a| a == "loss_limited"))
        .filter(|k| k.cause != "bufferbloat")
        .count();
    assert!(background > 10, "{background} with background loss");
}

#[test]
fn each_pathology_sits_where_it_is_true() {
    let c = draw(9, 400);
    for case in &c.cases {
        let lab = c.lab_of(case, 0).expect("lab");
        let spec = lab.to_spec("t").expect("lab");
        let link = &spec.emulation.as_ref().expect("emulated").link;
        let rate = link.forward.rate_bps.expect("rate") as f64;
        let rtt = (link.forward.delay_ns + link.reverse.delay_ns) as f64 / 1e9;
        let bdp_packets = rate / 8.0 * rtt / FRAME;
        let queue = match link.forward.queue {
            Some(tcplab_emu::QueueLimit::Packets(p)) => f64::from(p),
            other => panic!("{}: queue {other:?}", case.name),
        };
        match case.cause.as_str() {
            "shallow_queue" => assert!(
                queue <= 0.2 * bdp_packets + 1.0 && bdp_packets >= 20.0,
                "{}: {queue} of {bdp_packets}",
                case.name
            ),
            "bufferbloat" => {
                let delay = queue * FRAME * 8.0 / rate;
                assert!(
                    delay >= 0.099 && delay >= 3.9 * rtt,
                    "{}: {delay} s",
                    case.name
                );
            }
            "rwnd_limited" => {
                let max: f64 = case.points[0].sysctl["server"]["net.ipv4.tcp_rmem"]
                    .as_str()
                    .and_then(|v| v.split_whitespace().nth(2))
                    .and_then(|v| v.parse().ok())
                    .expect("a maximum");
                assert!(max <= 0.51 * rate / 8.0 * rtt, "{}: {max}", case.name);
            }
            "connection_trouble.port_exhaustion" => {
                let range = case.points[0].sysctl["client"]["net.ipv4.ip_local_port_range"]
                    .as_str()
                    .map(|r| {
                        let v: Vec<f64> =
                            r.split_whitespace().map(|x| x.parse().unwrap()).collect();
                        v[1] - v[0] + 1.0
                    })
                    .expect("a range");
                let connections = 2.0 * CRR_SECONDS / (2.0 * rtt + 0.001);
                assert!(
                    range <= connections / 4.0 + 1.0,
                    "{}: {range} ports",
                    case.name
                );
            }
            _ => {
                let delay = queue * FRAME * 8.0 / rate;
                let healthy =
                    queue >= 0.69 * bdp_packets || queue <= 2.0 || queue >= MAX_QUEUE_PACKETS;
                let shallow_enough = delay <= HEALTHY_QUEUE_S.max(rtt) + FRAME * 8.0 / rate;
                assert!(
                    healthy && (shallow_enough || queue <= 2.0),
                    "{}: {queue} of {bdp_packets} ({delay} s)",
                    case.name
                );
            }
        }
    }
}
