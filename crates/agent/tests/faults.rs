//! Faults: a peer that goes away mid-test gives a partial result with the reason; a busy
//! port and a silent peer give clear errors within the timeout.

mod common;

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};
use tcplab_results::spec::WorkloadSpec;

use common::LoopServer;
use tcplab_agent::Server;
use tcplab_agent::handshake::{self, Keys};
use tcplab_auth::KeyPair;
use tcplab_load::proto::{self, Ctrl};
use tcplab_load::{LoadError, msgs, rr};

/// A fake server that speaks the control protocol, accepts the data connection, reads
/// `read_bytes` and then drops everything.
fn rude_server(read_bytes: usize) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let ctrl_l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = ctrl_l.local_addr().expect("addr");
    let t = std::thread::spawn(move || {
        let (ctrl, _) = ctrl_l.accept().expect("accept ctrl");
        let me = KeyPair::generate("rude").expect("key");
        let keys = Keys {
            me: &me,
            authorized: None,
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        let (mut ctrl, _hello) = handshake::accept(ctrl, keys, deadline).expect("handshake");
        let data_l = TcpListener::bind("127.0.0.1:0").expect("bind data");
        let port = data_l.local_addr().expect("addr").port();
        proto::write_frame(&mut ctrl, &Ctrl::Ready { data_port: port }).expect("ready");
        let (mut data, _) = data_l.accept().expect("accept data");
        let mut buf = vec![0u8; read_bytes];
        use std::io::Read;
        data.read_exact(&mut buf).expect("read some");
        // Dropping ctrl and data closes both connections mid-test.
    });
    (addr, t)
}

#[test]
fn peer_closing_mid_msgs_gives_a_partial_result() {
    let (addr, t) = rude_server(1000);
    let cfg = msgs::MsgsConfig {
        count: 1_000_000,
        timeout_ms: 3_000,
        ..msgs::MsgsConfig::default()
    };
    let start = Instant::now();
    let r = msgs::run_client(&cfg, addr, None).expect("partial result, not an error");
    t.join().expect("fake server");
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(!r.meta.complete);
    let why = r.meta.incomplete_reason.clone().expect("reason");
    assert!(
        why.contains("peer closed") || why.contains("report"),
        "{why}"
    );
    assert!(
        r.runs[0].sent >= 1000 && r.runs[0].sent < 1_000_000,
        "sent {}",
        r.runs[0].sent
    );
}

#[test]
fn peer_closing_mid_rr_gives_a_partial_result() {
    let (addr, t) = rude_server(1);
    let cfg = rr::RrConfig {
        count: Some(1_000),
        duration_ms: None,
        timeout_ms: 3_000,
        ..rr::RrConfig::default()
    };
    let r = rr::run_client(&cfg, addr, None).expect("partial result");
    t.join().expect("fake server");
    assert!(!r.meta.complete);
    assert_eq!(r.summary.transactions, 0);
    assert!(
        r.meta
            .incomplete_reason
            .as_deref()
            .expect("reason")
            .contains("response 0"),
        "{:?}",
        r.meta.incomplete_reason
    );
}

#[test]
fn silent_server_times_out() {
    // Accepts (the kernel does) but never answers Hello.
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let cfg = rr::RrConfig {
        count: Some(5),
        duration_ms: None,
        timeout_ms: 300,
        ..rr::RrConfig::default()
    };
    let start = Instant::now();
    let e = rr::run_client(&cfg, l.local_addr().expect("addr"), None).expect_err("times out");
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "took {:?}",
        start.elapsed()
    );
    assert!(e.to_string().contains("timed out"), "{e}");
}

#[test]
fn busy_port_names_the_address_and_the_flag() {
    let srv = LoopServer::start();
    match Server::bind(srv.addr) {
        Err(e @ LoadError::Listen { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.contains(&srv.addr.to_string()) && msg.contains("--listen"),
                "{msg}"
            );
            assert!(e.is_usage());
        }
        other => panic!("expected a Listen error, got {other:?}"),
    }
}

#[test]
fn a_client_of_another_protocol_version_is_refused_by_name() {
    let srv = LoopServer::start();
    let mut ctrl = std::net::TcpStream::connect(srv.addr).expect("connect");
    ctrl.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let hello = Ctrl::Hello {
        version: 1,
        test: Box::new(WorkloadSpec::Msgs(msgs::MsgsConfig::default())),
    };
    proto::write_frame(&mut ctrl, &hello).expect("hello");
    match proto::read_frame(&mut ctrl).expect("answer") {
        Ctrl::Error { message, cause } => assert_eq!(
            (cause, message),
            (
                proto::Cause::Protocol,
                format!(
                    "protocol version 1 not supported (server speaks {}); run the same tcplab \
                 version on both ends",
                    proto::VERSION
                )
            )
        ),
        other => panic!("expected Error, got {other:?}"),
    }
}
