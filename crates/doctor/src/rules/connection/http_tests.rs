//! The connection rules on HTTP runs (a connection per request), synthetic: the same rules as
//! crr's, read through `ConnectionEvidence`, with findings naming `http`; and the server-held
//! TIME_WAIT only an HTTP run in a lab records.

use std::collections::BTreeMap;

use tcplab_results::crr::TimeWait;
use tcplab_results::http::result::HttpResult;

use super::*;
use crate::battery::Battery;
use crate::synth;

const US: u64 = 1_000;

fn battery(http: HttpResult) -> Battery {
    Battery {
        http: Some(http),
        facts: Some(synth::facts(250)),
        ..Battery::default()
    }
}

fn ids(f: &[Finding]) -> Vec<&str> {
    f.iter().map(|x| x.id.as_str()).collect()
}

fn lines(f: &Finding) -> Vec<String> {
    f.fixes.iter().flat_map(|x| x.lines.clone()).collect()
}

#[test]
fn eaddrnotavail_in_an_http_run_is_port_exhaustion_naming_http() {
    let mut r = synth::http(30_000, 1_000.0, |_| 100 * US);
    r.time_wait.max = 28_100;
    let r = synth::http_with_addrnotavail(r, &[27, 28], 300);
    let f = check(&Context::new(&battery(r)));
    assert_eq!(ids(&f), ["connection_trouble.port_exhaustion"]);
    let f = &f[0];
    assert_eq!(f.severity, Severity::Error);
    assert!(f.title.contains("during http"), "{}", f.title);
    assert_eq!(f.figure("eaddrnotavail"), Some(600.0));
    assert_eq!(f.figure("time_wait_max"), Some(28_100.0));
    assert!((f.figure("connections_per_s").unwrap() - 1_000.0).abs() < 1e-9);
    assert_eq!(f.samples[0].source, "http errors second");
    assert_eq!(f.samples[0].indices, [27, 28]);
    assert!(lines(f).contains(&"net.ipv4.tcp_tw_reuse = 1".to_string()));
}

#[test]
fn http_connects_near_one_second_are_syn_retransmits() {
    // 1000 requests, a connection each; 20 connects took ~1 s.
    let r = synth::http(1_000, 200.0, |i| {
        if i % 50 == 9 {
            1_004_000 * US
        } else {
            120 * US
        }
    });
    let f = check(&Context::new(&battery(r)));
    assert_eq!(ids(&f), ["connection_trouble.syn_retransmits"]);
    let f = &f[0];
    assert!(f.title.contains("of http"), "{}", f.title);
    assert_eq!(f.figure("connects_near_1s"), Some(20.0));
    assert!((f.figure("syn_retrans_share").unwrap() - 0.02).abs() < 1e-12);
    assert_eq!(f.severity, Severity::Error, "2% of connects paid a second");
    assert_eq!(f.samples[0].source, "http request");
    assert_eq!(f.samples[0].indices.len(), 20);
    assert_eq!(f.samples[0].indices[0], 9);
}

#[test]
fn listen_overflows_of_the_http_server_are_the_accept_queue() {
    let mut r = synth::http(400, 50.0, |i| {
        if i % 20 == 7 {
            1_020_000 * US
        } else {
            500 * US
        }
    });
    r.server = "builtin".into();
    r.server_counters = BTreeMap::from([
        ("TcpExt.ListenOverflows".to_string(), 20),
        ("TcpExt.ListenDrops".to_string(), 20),
        ("TcpExt.SyncookiesSent".to_string(), 5),
    ]);
    let f = check(&Context::new(&battery(r)));
    assert_eq!(
        ids(&f),
        [
            "connection_trouble.accept_queue",
            "connection_trouble.syn_retransmits"
        ]
    );
    let q = &f[0];
    assert!(q.title.contains("during http"), "{}", q.title);
    assert_eq!(q.figure("listen_overflows"), Some(20.0));
    assert_eq!(q.figure("syncookies_sent"), Some(5.0));
    assert_eq!(q.figure("client_connections"), Some(2.0));
    assert!(
        q.evidence.iter().any(|e| e.context.contains("during http")),
        "{:?}",
        q.evidence
    );
    assert!(lines(q).contains(&"net.core.somaxconn = 4096".to_string()));
    let mut all = f;
    crate::rules::explain::apply(&mut all);
    assert_eq!(
        all[1].explained_by.as_deref(),
        Some("connection_trouble.accept_queue")
    );
}

#[test]
fn a_healthy_http_run_gives_no_connection_finding() {
    let mut r = synth::http(10_000, 1_000.0, |i| (80 + (i % 7) as u64) * US);
    r.server = "builtin".into();
    r.time_wait.max = 300;
    r.server_time_wait = Some(TimeWait {
        max: 9_000,
        last: 9_000,
        samples: Vec::new(),
    });
    r.server_counters = BTreeMap::from([("Tcp.ActiveOpens".to_string(), 10_000)]);
    assert!(check(&Context::new(&battery(r))).is_empty());
}

fn server_tw(r: &mut HttpResult, max: u64) {
    r.server_time_wait = Some(TimeWait {
        max,
        last: max,
        samples: Vec::new(),
    });
}

#[test]
fn the_server_s_time_wait_is_named_with_fixes_that_work_on_the_server_side() {
    // Seed 003: the server closes first and holds most of the client's ports in TIME_WAIT;
    // a few SYNs from recycled ports waited for the timer.
    let mut r = synth::http(20_000, 2_000.0, |i| {
        if i % 4_000 == 1 {
            1_001_000 * US
        } else {
            100 * US
        }
    });
    server_tw(&mut r, 20_000);
    let f = check(&Context::new(&battery(r)));
    assert_eq!(
        ids(&f),
        [
            "connection_trouble.time_wait",
            "connection_trouble.syn_retransmits"
        ]
    );
    let tw = &f[0];
    assert_eq!(tw.severity, Severity::Warning);
    assert!(
        tw.title.starts_with("the server holds 20000"),
        "{}",
        tw.title
    );
    assert!(tw.title.contains("during http"));
    assert_eq!(tw.figure("server_time_wait_max"), Some(20_000.0));
    assert_eq!(tw.figure("connects_near_1s_or_3s"), Some(5.0));
    assert!(tw.explanation.contains("tcp_tw_reuse does not help"));
    let l = lines(tw);
    assert!(
        !l.iter().any(|x| x.contains("tcp_tw_reuse")),
        "reuse acts on the connecting side only: {l:?}"
    );
    assert!(l.contains(&"net.ipv4.ip_local_port_range = 1024 65535".to_string()));
    // The SYN finding says whose TIME_WAIT it is and offers the server-side remedies.
    let syn = &f[1];
    assert_eq!(syn.figure("server_time_wait_max"), Some(20_000.0));
    assert!(syn.explanation.contains("the server held 20000 TIME_WAIT"));
    assert!(!lines(syn).iter().any(|x| x.contains("tcp_tw_reuse")));
}

#[test]
fn a_server_time_wait_build_up_without_syn_waits_is_info() {
    let mut r = synth::http(20_000, 2_000.0, |_| 100 * US);
    server_tw(&mut r, 16_000);
    let f = check(&Context::new(&battery(r)));
    assert_eq!(ids(&f), ["connection_trouble.time_wait"]);
    assert_eq!(f[0].severity, Severity::Info);
}

#[test]
fn crr_and_http_in_one_battery_each_get_their_findings() {
    let crr = synth::with_addrnotavail(synth::crr(30_000, 1_000.0, |_| 100 * US), &[29], 50);
    let http = synth::http(
        1_000,
        200.0,
        |i| if i == 5 { 1_004_000 * US } else { 120 * US },
    );
    let b = Battery {
        crr: Some(crr),
        ..battery(http)
    };
    let f = check(&Context::new(&b));
    let got: Vec<(&str, bool)> = f
        .iter()
        .map(|x| (x.id.as_str(), x.title.contains("http")))
        .collect();
    assert_eq!(
        got,
        [
            ("connection_trouble.port_exhaustion", false),
            ("connection_trouble.syn_retransmits", true)
        ]
    );
}

#[test]
fn batteries_without_http_load_and_keep_their_json() {
    let b = Battery {
        crr: Some(synth::crr(10, 10.0, |_| 100 * US)),
        ..Battery::default()
    };
    let text = serde_json::to_string(&b).unwrap();
    assert!(!text.contains("\"http\""), "no http key when there is none");
    let back: Battery = serde_json::from_str(&text).unwrap();
    assert_eq!(back.http, None);
    let mut with = b.clone();
    with.http = Some(synth::http(10, 10.0, |_| 100 * US));
    let back: Battery = serde_json::from_str(&serde_json::to_string(&with).unwrap()).unwrap();
    assert_eq!(
        back.http.map(|h| h.connections_opened),
        Some(10),
        "an HTTP part survives its JSON"
    );
}

#[test]
fn time_wait_left_by_an_earlier_part_is_info_naming_where_it_came_from() {
    // Measured on a veth pair (`doctor --topology pair --budget 10s --http`): crr left about
    // 11,500 TIME_WAIT sockets, the HTTP run after it added 3,700 and crossed half the range.
    let mut r = synth::http(3_700, 3_700.0, |_| 100 * US);
    r.time_wait.samples = (0..=10)
        .map(|i| (f64::from(i) * 0.1, 11_500 + 370 * i as u64))
        .collect();
    r.time_wait.max = 15_200;
    let f = check(&Context::new(&battery(r.clone())));
    assert_eq!(ids(&f), ["connection_trouble.time_wait"]);
    assert_eq!(f[0].severity, Severity::Info);
    assert_eq!(f[0].figure("time_wait_at_start"), Some(11_500.0));
    assert!(f[0].explanation.contains("before http began"));
    // Ports used up before the run: its EADDRNOTAVAIL is the earlier part's doing too.
    r.time_wait.samples = vec![(0.0, 28_000), (1.0, 28_232)];
    r.time_wait.max = 28_232;
    let r = synth::http_with_addrnotavail(r, &[0], 100);
    let f = check(&Context::new(&battery(r)));
    assert_eq!(ids(&f), ["connection_trouble.port_exhaustion"]);
    assert_eq!(f[0].severity, Severity::Info);
}
