//! Hostile clients against a keyed agent on loopback: random bytes, oversized and truncated
//! frames, a handshake that trickles byte by byte, a thousand connections at once, a wrong
//! key, a replayed handshake, a client that vanishes mid-test, a stranger on a test's data
//! port. In each the agent keeps serving the legitimate client, its threads and memory stay
//! bounded and come back, and each case prints its figures (`-- --nocapture`). Attackers
//! connect from 127.0.0.2-127.0.0.9, the legitimate client from 127.0.0.1. Every loop is
//! bounded in count and time.

#[path = "common/agent.rs"]
mod support;

use std::io::Write;
use std::net::{Ipv4Addr, Shutdown, TcpStream};
use std::time::{Duration, Instant};
use tcplab_results::spec::WorkloadSpec;

use support::{
    Agent, Peak, closed_by_peer, connect_from, figures, legit, read_frame, report, send_frame,
    serial, settled, test_limits,
};
use tcplab_auth::noise::{Initiator, Intro, parse_intro};
use tcplab_auth::{ClientAuth, KeyList, KeyPair};
use tcplab_load::proto::{self, Ctrl};
use tcplab_load::session::Session;
use tcplab_load::{LoadError, rr, stream};

const ATTACKER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// Connection threads the agent may hold under attack: every handshake slot, and the
/// legitimate client's test with its workload threads.
fn thread_bound() -> usize {
    test_limits().max_handshakes as usize + 4
}

#[test]
fn random_bytes_are_refused_and_the_agent_serves_on() {
    let _one = serial();
    let agent = Agent::start(test_limits());
    legit(agent.addr);
    let before = settled(0);
    let seed = std::env::var("TCPLAB_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_u64);
    eprintln!("random bytes: seed {seed} (TCPLAB_TEST_SEED replays it)");
    let mut x = seed | 1;
    let mut rand = move || {
        // xorshift64*: enough to make noise, seeded and printed.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let peak = Peak::default();
    for round in 0..60u32 {
        let from = Ipv4Addr::new(127, 0, 0, 2 + (round % 8) as u8);
        let Ok(mut s) = connect_from(from, agent.addr, Duration::from_secs(2)) else {
            continue;
        };
        let n = 1 + (rand() % 4096) as usize;
        let mut junk: Vec<u8> = (0..n).map(|_| rand() as u8).collect();
        if round % 3 == 0 {
            // A plausible length, then noise: it gets past the length check.
            junk[..4].copy_from_slice(&((n as u32).saturating_sub(4)).to_be_bytes());
        }
        let _ = s.write_all(&junk);
        assert!(
            closed_by_peer(&mut s, Duration::from_secs(3)),
            "round {round}"
        );
        peak.sample();
        if round % 20 == 19 {
            legit(agent.addr);
        }
    }
    legit(agent.addr);
    assert!(agent.drained(Duration::from_secs(3)));
    assert!(agent.refused("protocol") > 0, "{:?}", agent.server.counts());
    report(
        "random bytes (60 connections)",
        before,
        peak.get(),
        settled(before.threads),
        thread_bound(),
    );
}

#[test]
fn oversized_and_truncated_frames_are_refused() {
    let _one = serial();
    let agent = Agent::start(test_limits());
    let before = settled(0);
    let peak = Peak::default();
    let t0 = Instant::now();
    // A 4 GiB frame: refused on its length, before anything is allocated for it.
    let mut s = connect_from(ATTACKER, agent.addr, Duration::from_secs(2)).expect("connect");
    s.write_all(&u32::MAX.to_be_bytes()).expect("write");
    let answer = read_frame(&mut s).expect("a refusal in clear");
    assert!(
        String::from_utf8_lossy(&answer).contains("over the"),
        "{answer:?}"
    );
    // A frame cut short, then closed; and one cut short that then stalls.
    let mut cut = connect_from(ATTACKER, agent.addr, Duration::from_secs(2)).expect("connect");
    cut.write_all(&[0, 0, 0, 100, b'T', b'C']).expect("write");
    cut.shutdown(Shutdown::Write).expect("shutdown");
    let mut stall = connect_from(ATTACKER, agent.addr, Duration::from_secs(2)).expect("connect");
    stall.write_all(&[0, 0, 0, 100, b'T', b'C']).expect("write");
    peak.sample();
    legit(agent.addr);
    assert!(closed_by_peer(&mut cut, Duration::from_secs(2)));
    assert!(
        closed_by_peer(&mut stall, Duration::from_secs(3)),
        "cut at the handshake deadline"
    );
    // A valid start with a truncated Noise message in it.
    let me = KeyPair::generate("x").expect("key");
    let (_, f1) = Initiator::start(&me, proto::VERSION).expect("start");
    let mut short = connect_from(ATTACKER, agent.addr, Duration::from_secs(2)).expect("connect");
    send_frame(&mut short, &f1[..f1.len() - 5]).expect("write");
    assert!(closed_by_peer(&mut short, Duration::from_secs(3)));
    // After a real handshake: an oversized sealed message (over the 64 KiB a client may send).
    let (mut s, _) = authenticated_raw(&agent, &vec![b' '; 200 << 10]);
    assert!(
        closed_by_peer(&mut s, Duration::from_secs(3)),
        "oversized sealed Hello"
    );
    peak.sample();
    legit(agent.addr);
    assert!(agent.drained(Duration::from_secs(3)));
    assert!(t0.elapsed() < Duration::from_secs(10));
    report(
        "oversized and truncated frames",
        before,
        peak.get(),
        settled(before.threads),
        thread_bound(),
    );
}

#[test]
fn a_slowloris_handshake_is_cut_at_the_deadline() {
    let _one = serial();
    let agent = Agent::start(test_limits());
    let before = settled(0);
    let peak = Peak::default();
    let me = KeyPair::generate("slow").expect("key");
    let (_, f1) = Initiator::start(&me, proto::VERSION).expect("start");
    let mut frame = (f1.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&f1);
    let t0 = Instant::now();
    let cut_at = std::thread::scope(|sc| {
        let slow: Vec<_> = (0..8u8)
            .map(|i| {
                let (agent, frame) = (&agent, &frame);
                sc.spawn(move || {
                    let from = Ipv4Addr::new(127, 0, 0, 2 + i);
                    let mut s = connect_from(from, agent.addr, Duration::from_secs(2)).ok()?;
                    let start = Instant::now();
                    // One byte every 100 ms: the frame would take 5 s; the deadline is 1 s.
                    for b in frame.iter() {
                        if s.write_all(&[*b]).is_err() {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                        if start.elapsed() > Duration::from_secs(4) {
                            break;
                        }
                    }
                    closed_by_peer(&mut s, Duration::from_secs(1)).then(|| start.elapsed())
                })
            })
            .collect();
        for _ in 0..3 {
            peak.sample();
            legit(agent.addr);
            std::thread::sleep(Duration::from_millis(150));
        }
        slow.into_iter()
            .map(|h| h.join().ok().flatten())
            .collect::<Vec<_>>()
    });
    for (i, t) in cut_at.iter().enumerate() {
        let t = t.unwrap_or_else(|| panic!("slow connection {i} was never closed"));
        assert!(
            t < Duration::from_millis(2500),
            "slow connection {i} held for {t:?}"
        );
    }
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert!(agent.drained(Duration::from_secs(3)));
    assert!(
        agent.refused("handshake") >= 8,
        "{:?}",
        agent.server.counts()
    );
    report(
        "slowloris x8",
        before,
        peak.get(),
        settled(before.threads),
        thread_bound(),
    );
}

#[test]
fn a_thousand_concurrent_connections_leave_it_bounded() {
    let _one = serial();
    tcplab_agent::args::raise_fd_limit();
    let agent = Agent::start(test_limits());
    let before = settled(0);
    let peak = Peak::default();
    let t0 = Instant::now();
    let (opened, held) = std::thread::scope(|sc| {
        let openers: Vec<_> = (0..10u8)
            .map(|i| {
                let agent = &agent;
                sc.spawn(move || {
                    let from = Ipv4Addr::new(127, 0, 0, 2 + i % 8);
                    let mut conns = Vec::new();
                    for _ in 0..100 {
                        if let Ok(s) = connect_from(from, agent.addr, Duration::from_secs(3)) {
                            conns.push(s);
                        }
                    }
                    conns
                })
            })
            .collect();
        for _ in 0..5 {
            peak.sample();
            std::thread::sleep(Duration::from_millis(100));
        }
        let conns: Vec<TcpStream> = openers
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect();
        peak.sample();
        // With the thousand open, the legitimate client is served.
        legit(agent.addr);
        peak.sample();
        let n = conns.len();
        let still_open = conns
            .into_iter()
            .filter(|s| {
                let _ = s.set_nonblocking(true);
                let mut b = [0u8; 1];
                matches!(std::io::Read::read(&mut &*s, &mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
            })
            .count();
        (n, still_open)
    });
    eprintln!(
        "1000 connections: {opened} opened in {:?}, {held} still held by the agent after the \
         legitimate test; refused {:?}",
        t0.elapsed(),
        agent.server.counts().refused
    );
    assert!(opened >= 900, "only {opened} connections opened");
    assert!(held <= test_limits().max_handshakes as usize, "{held} held");
    assert!(agent.drained(Duration::from_secs(3)));
    legit(agent.addr);
    report(
        "1000 concurrent connections",
        before,
        peak.get(),
        settled(before.threads),
        thread_bound(),
    );
}

#[test]
fn a_wrong_key_is_refused_by_name_both_ways() {
    let _one = serial();
    let agent = Agent::start(test_limits());
    let before = settled(0);
    let test = || WorkloadSpec::Rr(rr::RrConfig::default());
    let t = Duration::from_secs(3);
    let server_pin = KeyList::of([support::keys().server.public()]);
    // A client whose key is not in --keys.
    let stranger = ClientAuth::new(
        KeyPair::generate("stranger").expect("key"),
        "--key stranger",
    )
    .with_pins(server_pin.clone(), "--server-key");
    let e = Session::open_with(agent.addr, test(), t, &stranger).expect_err("refused");
    assert!(matches!(e, LoadError::Auth(_)) && e.is_usage(), "{e}");
    assert!(
        e.to_string().contains("--keys") && e.to_string().contains("stranger"),
        "{e}"
    );
    // A client with no key at all (one made for the run).
    let keyless = ClientAuth::ephemeral()
        .expect("key")
        .with_pins(server_pin, "--server-key");
    assert!(matches!(
        Session::open_with(agent.addr, test(), t, &keyless),
        Err(LoadError::Auth(_))
    ));
    // The legitimate key, but a pin of another server: the client stops before its Hello.
    let wrong_pin = ClientAuth::new(support::keys().client.clone(), "--key legit").with_pins(
        KeyList::of([KeyPair::generate("other").expect("key").public()]),
        "--server-key",
    );
    let e = Session::open_with(agent.addr, test(), t, &wrong_pin).expect_err("wrong server");
    assert!(
        e.to_string()
            .contains("not the key given with --server-key"),
        "{e}"
    );
    legit(agent.addr);
    assert!(agent.drained(Duration::from_secs(3)));
    assert_eq!(agent.refused("keys"), 2, "{:?}", agent.server.counts());
    assert_eq!(agent.server.counts().tests, 0);
    let during = figures();
    report(
        "wrong keys",
        before,
        during,
        settled(before.threads),
        thread_bound(),
    );
}

/// A raw authenticated client: the handshake with the legitimate key by hand, `hello` sealed
/// after it. Returns the stream (Ready, if any, unread) and every byte the client sent.
fn authenticated_raw(agent: &Agent, hello: &[u8]) -> (TcpStream, Vec<u8>) {
    let mut s = connect_from(ATTACKER, agent.addr, Duration::from_secs(2)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(3)))
        .expect("timeout");
    let (init, f1) = Initiator::start(&support::keys().client, proto::VERSION).expect("start");
    let mut sent = Vec::new();
    let frame = |body: &[u8]| {
        let mut f = (body.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(body);
        f
    };
    let f1 = frame(&f1);
    s.write_all(&f1).expect("frame 1");
    sent.extend_from_slice(&f1);
    let f2 = read_frame(&mut s).expect("frame 2");
    let seen = init.on_reply(&f2).expect("frame 2 verifies");
    let (f3, transport) = seen.finish().expect("finish");
    let (mut sealer, _) = transport.split();
    let mut out = frame(&f3);
    sealer.seal(hello, &mut out).expect("seal");
    let _ = s.write_all(&out);
    sent.extend_from_slice(&out);
    (s, sent)
}

#[test]
fn a_replayed_handshake_is_refused() {
    let _one = serial();
    let agent = Agent::start(test_limits());
    let before = settled(0);
    let hello = proto::encode(&Ctrl::Hello {
        version: proto::VERSION,
        test: Box::new(WorkloadSpec::Rr(rr::RrConfig::default())),
    })
    .expect("hello");
    // A legitimate handshake, recorded by someone on the path.
    let (mut s, recorded) = authenticated_raw(&agent, &hello);
    let ready = read_frame(&mut s).expect("the recorded session got its Ready");
    assert!(!ready.is_empty());
    drop(s);
    // Replayed byte for byte on a new connection: frame 1 gets a fresh frame 2, and the old
    // frame 3 does not verify against the server's new ephemeral key.
    let Intro::Current(_) = parse_intro(&recorded[4..], proto::VERSION) else {
        panic!("recorded frame 1")
    };
    let f1_len = 4 + u32::from_be_bytes(recorded[..4].try_into().expect("len")) as usize;
    let mut r = connect_from(ATTACKER, agent.addr, Duration::from_secs(2)).expect("connect");
    r.set_read_timeout(Some(Duration::from_secs(3)))
        .expect("timeout");
    r.write_all(&recorded[..f1_len]).expect("replay frame 1");
    let _fresh_f2 = read_frame(&mut r).expect("a fresh frame 2");
    let _ = r.write_all(&recorded[f1_len..]);
    assert!(
        closed_by_peer(&mut r, Duration::from_secs(3)),
        "no Ready for a replay"
    );
    legit(agent.addr);
    assert!(agent.drained(Duration::from_secs(3)));
    assert_eq!(agent.refused("forged"), 1, "{:?}", agent.server.counts());
    report(
        "replayed handshake",
        before,
        figures(),
        settled(before.threads),
        thread_bound(),
    );
}

#[test]
fn a_client_vanishing_mid_test_gives_its_slot_back() {
    let _one = serial();
    let agent = Agent::start(test_limits());
    let before = settled(0);
    let peak = Peak::default();
    let auth = ClientAuth::new(support::keys().client.clone(), "--key legit").with_pins(
        KeyList::of([support::keys().server.public()]),
        "--server-key",
    );
    let cfg = stream::StreamConfig {
        duration_ms: Some(10_000),
        timeout_ms: 10_000,
        ..stream::StreamConfig::default()
    };
    let t = Duration::from_secs(3);
    // 1. It starts a stream, sends for a while, and is gone at once (a reset, no Done).
    let mut session =
        Session::open_with(agent.addr, WorkloadSpec::Stream(cfg.clone()), t, &auth).expect("open");
    let mut data = session.connect_data(&cfg.opts).expect("data");
    session.send(&Ctrl::Start).expect("start");
    let end = Instant::now() + Duration::from_millis(300);
    while Instant::now() < end {
        let _ = data.write_all(&[0u8; 65536]);
    }
    peak.sample();
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    use std::os::fd::AsRawFd;
    // Safety: setsockopt on our own socket with a live linger struct.
    unsafe {
        libc::setsockopt(
            data.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(data);
    drop(session);
    assert!(
        agent.drained(Duration::from_secs(3)),
        "a vanished client's test ends"
    );
    // 2. It opens a test and then says nothing, holding its connection: the idle timeout.
    let silent =
        Session::open_with(agent.addr, WorkloadSpec::Stream(cfg.clone()), t, &auth).expect("open");
    peak.sample();
    legit(agent.addr);
    let t0 = Instant::now();
    assert!(
        agent.drained(Duration::from_secs(5)),
        "a silent client's test ends"
    );
    eprintln!(
        "a silent client's test ended {:?} after the check began",
        t0.elapsed()
    );
    drop(silent);
    legit(agent.addr);
    report(
        "client vanishing mid-test",
        before,
        peak.get(),
        settled(before.threads),
        thread_bound() + 4,
    );
}

#[test]
fn a_stranger_cannot_reach_a_tests_data_port() {
    let _one = serial();
    let agent = Agent::start(test_limits());
    let cfg = rr::RrConfig {
        count: Some(100),
        duration_ms: None,
        ..rr::RrConfig::default()
    };
    let auth = ClientAuth::new(support::keys().client.clone(), "--key legit").with_pins(
        KeyList::of([support::keys().server.public()]),
        "--server-key",
    );
    let mut session = Session::open_with(
        agent.addr,
        WorkloadSpec::Rr(cfg.clone()),
        Duration::from_secs(3),
        &auth,
    )
    .expect("open");
    // The kernel drops the stranger's SYN (the data listener's filter): no connection.
    let e = connect_from(ATTACKER, session.data_addr(), Duration::from_millis(500))
        .expect_err("dropped");
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
    // The client's own data connection works, and the test runs.
    let mut data = session.connect_data(&cfg.opts).expect("data");
    use std::io::Read;
    let mut resp = [0u8; 1];
    for _ in 0..100 {
        data.write_all(&[1u8]).expect("req");
        data.read_exact(&mut resp).expect("resp");
    }
    data.shutdown(Shutdown::Write).expect("shutdown");
    let report = session.report(Duration::from_secs(3)).expect("report");
    assert!(report.complete && report.transactions == 100, "{report:?}");
}

#[test]
fn limits_refuse_and_stop_tests_naming_the_flag() {
    let _one = serial();
    let agent = Agent::start(tcplab_agent::Limits {
        max_tests: 1,
        max_duration: Some(Duration::from_secs(1)),
        ..test_limits()
    });
    let long = rr::RrConfig {
        count: None,
        duration_ms: Some(5_000),
        ..rr::RrConfig::default()
    };
    let e = rr::run_client(&long, agent.addr, None).expect_err("refused");
    assert!(e.to_string().contains("--max-duration 1 s"), "{e}");
    // A count-bounded test that runs longer than the limit is stopped, and says why.
    let endless = rr::RrConfig {
        count: Some(1_000_000_000),
        duration_ms: None,
        timeout_ms: 5_000,
        ..rr::RrConfig::default()
    };
    let t0 = Instant::now();
    let (stopped, busy) = std::thread::scope(|s| {
        let h = s.spawn(|| rr::run_client(&endless, agent.addr, None));
        std::thread::sleep(Duration::from_millis(300));
        let busy = rr::run_client(&endless, agent.addr, None).expect_err("busy");
        (h.join().expect("join").expect("a partial result"), busy)
    });
    assert!(busy.to_string().contains("--max-concurrent 1"), "{busy}");
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    assert!(!stopped.meta.complete);
    let why = stopped.meta.incomplete_reason.clone().expect("reason");
    assert!(
        why.contains("stopped by the server") && why.contains("--max-duration 1 s"),
        "{why}"
    );
    assert!(agent.drained(Duration::from_secs(3)));
}

#[test]
fn nothing_on_the_host_is_left_changed() {
    let _one = serial();
    let snapshot = || -> Vec<(String, String)> {
        let mut all = Vec::new();
        for dir in ["/proc/sys/net/ipv4", "/proc/sys/net/core"] {
            if let Ok(rd) = std::fs::read_dir(dir) {
                for e in rd.flatten() {
                    if let Ok(v) = std::fs::read_to_string(e.path()) {
                        all.push((e.path().display().to_string(), v));
                    }
                }
            }
        }
        all.sort();
        all
    };
    let host_before = snapshot();
    let before = settled(0);
    let addr = {
        let agent = Agent::start(test_limits());
        legit(agent.addr);
        let mut s = connect_from(ATTACKER, agent.addr, Duration::from_secs(2)).expect("connect");
        let _ = s.write_all(b"GET / HTTP/1.0\r\n\r\n");
        assert!(closed_by_peer(&mut s, Duration::from_secs(2)));
        agent.addr
    };
    let after = settled(before.threads);
    // The agent's port is free again, its threads are gone, no sysctl moved.
    std::net::TcpListener::bind(addr).expect("the agent's port is free after it stops");
    assert_eq!(after.threads, before.threads);
    let changed: Vec<_> = host_before
        .iter()
        .zip(snapshot().iter())
        .filter(|(a, b)| a != b && !a.0.ends_with("/tcp_fastopen_key"))
        .map(|(a, _)| a.0.clone())
        .collect();
    assert!(changed.is_empty(), "sysctls changed: {changed:?}");
}
