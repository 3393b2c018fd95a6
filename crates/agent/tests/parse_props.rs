//! Property tests of what a peer sends, as the agent and the coordinator read it:
//!
//! - the agent's side of the handshake on a socket (`handshake::accept`), whatever a client
//!   sends;
//! - the client's side of an ask (`remote::facts`), whatever a server answers.
//!
//! Whatever comes in: an answer within the bound, no panic, an error on one line that says what
//! to check (a peer's own refusal is relayed as it said it, cut to one line), and no allocation
//! sized by what a peer announces. The control messages and frames are drawn as tcplab-load's
//! property tests draw them (its `tests/frames`, included here with this binary's allocator).

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

#[path = "../../../tests/props.rs"]
mod props;

#[path = "../../load/tests/frames/mod.rs"]
mod frames;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::{Duration, Instant};
use tcplab_results::spec::WorkloadSpec;

use frames::{ctrl, ctrl_body, damaged, flip, framed, measured, pair, read_raw_frame, wire};
use props::{bounded, check_error};
use proptest::prelude::*;
use proptest::sample::Index;
use tcplab_agent::handshake::{Keys, accept};
use tcplab_auth::noise::{Initiator, Intro, Responder, parse_intro};
use tcplab_auth::{Channel, ClientAuth, KeyPair};
use tcplab_load::proto::{AgentFacts, Answer, Cause, Ctrl, VERSION, decode, encode};

/// A LoadError's message, held to the rule; a peer's own refusal (relayed as it said it) need
/// not say what to do, but must still be one line and short.
fn peer_error_holds(e: &str) -> Result<(), TestCaseError> {
    let relayed = ["agent: ", "server refused the test: ", "authentication: "]
        .iter()
        .any(|p| e.starts_with(p));
    if relayed {
        prop_assert!(!e.contains(['\n', '\r']), "on more than one line: {:?}", e);
        prop_assert!(
            e.chars().count() <= props::MAX_ERROR_LEN,
            "too long: {:?}",
            e
        );
        Ok(())
    } else {
        check_error(e, &[])
    }
}

// ---------------------------------------------------------------------------------------------
// The agent's handshake, and the client's side of an ask.

/// Bytes of the handshake's frame 2: the server's ephemeral key, its static key sealed, and
/// the empty payload's tag.
const NOISE_FRAME2: usize = 32 + 48 + 16;

/// What the test's client sends the agent.
#[derive(Debug, Clone)]
enum Approach {
    /// These bytes, then nothing.
    Bytes(Vec<u8>),
    /// A real handshake with frame 3 changed (a byte flipped at the index).
    Frame3(Index, u8),
    /// A real handshake, then this message sealed in place of Hello (any bytes, or JSON).
    Sealed(Vec<u8>),
    /// A real handshake, then a sealed Hello with a byte of its records changed.
    Record(Index, u8),
}

fn approach() -> impl Strategy<Value = Approach> {
    let clear_json = ctrl().prop_map(|m| framed(&encode(&m).unwrap()));
    let old_hello = (0u32..10).prop_map(|v| {
        let hello = Ctrl::Hello {
            version: v,
            test: Box::new(WorkloadSpec::Msgs(Default::default())),
        };
        framed(&encode(&hello).unwrap())
    });
    let intro = (any::<u32>(), prop::collection::vec(any::<u8>(), 0..80)).prop_map(|(v, msg)| {
        let mut b = tcplab_auth::noise::intro(v, &msg);
        if v % 2 == 0 {
            b = tcplab_auth::noise::intro(VERSION, &msg);
        }
        framed(&b)
    });
    prop_oneof![
        2 => prop_oneof![wire(), clear_json, old_hello, intro].prop_map(Approach::Bytes),
        1 => (any::<Index>(), 1..=255u8).prop_map(|(i, x)| Approach::Frame3(i, x)),
        1 => ctrl_body().prop_map(Approach::Sealed),
        1 => (any::<Index>(), 1..=255u8).prop_map(|(i, x)| Approach::Record(i, x)),
    ]
}

/// Plays the client's side of `how` on `s`; returns the frames the agent answered with, in
/// clear or opened with the client's keys.
fn approach_agent(mut s: TcpStream, me: &KeyPair, how: Approach) -> Vec<Vec<u8>> {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut answers = Vec::new();
    let bytes = match how {
        Approach::Bytes(b) => b,
        Approach::Frame3(..) | Approach::Sealed(_) | Approach::Record(..) => {
            let (init, f1) = Initiator::start(me, VERSION).unwrap();
            s.write_all(&framed(&f1)).unwrap();
            let Some(f2) = read_raw_frame(&mut s) else {
                return answers;
            };
            let seen = init.on_reply(&f2).unwrap();
            let (mut f3, transport) = seen.finish().unwrap();
            let (mut sealer, mut opener) = transport.split();
            let hello = encode(&Ctrl::Hello {
                version: VERSION,
                test: Box::new(WorkloadSpec::Rr(Default::default())),
            })
            .unwrap();
            let mut out = Vec::new();
            match how {
                Approach::Frame3(at, x) => {
                    flip(&mut f3, at, x);
                    out.extend_from_slice(&framed(&f3));
                    sealer.seal(&hello, &mut out).unwrap();
                }
                Approach::Sealed(body) => {
                    out.extend_from_slice(&framed(&f3));
                    sealer.seal(&body, &mut out).unwrap();
                }
                Approach::Record(at, x) => {
                    out.extend_from_slice(&framed(&f3));
                    let mut records = Vec::new();
                    sealer.seal(&hello, &mut records).unwrap();
                    flip(&mut records, at, x);
                    out.extend_from_slice(&records);
                }
                Approach::Bytes(_) => unreachable!(),
            }
            let _ = s.write_all(&out);
            let _ = s.shutdown(Shutdown::Write);
            // The agent's answer is sealed now (or there is none: a forged handshake is closed).
            while let Some(record) = read_raw_frame(&mut s) {
                let mut msg = Vec::new();
                match opener.open(&record, &mut msg, 1 << 20) {
                    Ok(true) => answers.push(msg),
                    Ok(false) => {}
                    Err(_) => break,
                }
            }
            return answers;
        }
    };
    let _ = s.write_all(&bytes);
    let _ = s.shutdown(Shutdown::Write);
    while let Some(f) = read_raw_frame(&mut s) {
        answers.push(f);
    }
    answers
}

/// What the test's server sends the client after reading its frame 1.
#[derive(Debug, Clone)]
enum Reply {
    /// These bytes, then close.
    Bytes(Vec<u8>),
    /// A real frame 2, and after the client's frame 3 this message sealed.
    Sealed(Vec<u8>),
}

fn reply() -> impl Strategy<Value = Reply> {
    let refusal = ("\\PC{0,40}|.{0,2000}", any::<bool>(), 0..3u8).prop_map(|(message, auth, k)| {
        let m = match k {
            0 => Ctrl::refusal(Cause::Failed, message),
            1 => Ctrl::refusal(if auth { Cause::Auth } else { Cause::Busy }, message),
            _ => Ctrl::Ready { data_port: 1 },
        };
        framed(&encode(&m).unwrap())
    });
    let facts = Ctrl::Answer(Box::new(Answer::Facts(Box::new(AgentFacts {
        tcplab: "0.1.0".into(),
        protocol: VERSION,
        authenticated: false,
        allow_sysctl: false,
        facts: None,
        host: None,
    }))));
    let long_refusal =
        ".{0,3000}".prop_map(|message| encode(&Ctrl::refusal(Cause::Failed, message)).unwrap());
    prop_oneof![
        2 => prop_oneof![wire(), refusal].prop_map(Reply::Bytes),
        2 => prop_oneof![ctrl_body(), damaged(encode(&facts).unwrap()), long_refusal]
            .prop_map(Reply::Sealed),
    ]
}

/// Plays a server that answers a client's frame 1 with `how`.
fn serve_once(l: TcpListener, me: KeyPair, how: Reply) {
    let Ok((mut s, _)) = l.accept() else { return };
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let Some(f1) = read_raw_frame(&mut s) else {
        return;
    };
    match how {
        Reply::Bytes(b) => {
            let _ = s.write_all(&b);
        }
        Reply::Sealed(body) => {
            let Intro::Current(msg1) = parse_intro(&f1, VERSION) else {
                return;
            };
            let Ok((resp, f2)) = Responder::start(&me, msg1) else {
                return;
            };
            let _ = s.write_all(&framed(&f2));
            let Some(f3) = read_raw_frame(&mut s) else {
                return;
            };
            let Ok(transport) = resp.finish(&f3) else {
                return;
            };
            let mut ch = Channel::new(s.try_clone().unwrap(), transport, 1 << 20);
            // The client's Ask, then the answer.
            let _ = ch.recv_by(Some(Instant::now() + Duration::from_secs(5)));
            let _ = ch.send(&[body.as_slice()]);
        }
    }
    let _ = s.shutdown(Shutdown::Write);
    // Lets the client read everything before the connection goes.
    let mut sink = [0u8; 256];
    while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
}

proptest! {
    #![proptest_config(props::config())]
    /// one control frame whose message says what to do.
    #[test]
    fn the_agent_refuses_whatever_a_client_sends(how in approach()) {
        let (rejected, answers, largest) = bounded("agent::handshake::accept", move || {
            let server = KeyPair::generate("agent").unwrap();
            let client = KeyPair::generate("client").unwrap();
            let (w, r) = pair();
            let peer = std::thread::spawn(move || approach_agent(w, &client, how));
            let (result, largest) = measured(|| {
                accept(r, Keys { me: &server, authorized: None }, Instant::now() + Duration::from_secs(3))
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            });
            (result, peer.join().unwrap(), largest)
        })?;
        prop_assert!(largest <= 256 << 10, "{} bytes allocated", largest);
        // A sealed Hello of any bytes may decode as a test: that is the agent's to run.
        if let Err(why) = &rejected {
            prop_assert!(!why.contains(['\n', '\r']) && why.chars().count() <= props::MAX_ERROR_LEN, "{:?}", why);
        }
        for a in answers {
            match decode(&a) {
                Ok(Ctrl::Error { message, .. }) => check_error(&message, &[])?,
                // Frame 2 of the handshake (e, s, payload tag) to a frame 1 that is one.
                Err(_) if a.len() == NOISE_FRAME2 => {}
                other => prop_assert!(false, "the agent answered {:?}", other.map(|m| encode(&m).unwrap().len())),
            }
        }
    }

    /// line), within its timeout.
    #[test]
    fn the_client_holds_against_a_server_that_sends_anything(how in reply()) {
        let result = bounded("remote::facts", move || {
            let me = KeyPair::generate("server").unwrap();
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let server = std::thread::spawn(move || serve_once(l, me, how));
            let auth = ClientAuth::ephemeral().unwrap();
            let r = tcplab_agent::remote::facts(addr, &auth, Duration::from_secs(3)).map(|_| ()).map_err(|e| e.to_string());
            let _ = server.join();
            r
        })?;
        if let Err(e) = result {
            peer_error_holds(&e)?;
        }
    }

}

/// Found by `the_client_holds_against_a_server_that_sends_anything`: a refusal's message came
/// back as the peer wrote it, over several lines and at any length.
#[test]
fn a_peers_refusal_is_relayed_on_one_line() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let message = format!("no\nsuch {}", "x".repeat(5_000));
    let body = framed(&encode(&Ctrl::refusal(Cause::Failed, message)).unwrap());
    let server = std::thread::spawn(move || {
        serve_once(l, KeyPair::generate("s").unwrap(), Reply::Bytes(body))
    });
    let e = tcplab_agent::remote::facts(
        addr,
        &ClientAuth::ephemeral().unwrap(),
        Duration::from_secs(3),
    )
    .unwrap_err()
    .to_string();
    server.join().unwrap();
    assert!(
        e.starts_with("server refused the test: no\\nsuch xxx"),
        "{e}"
    );
    assert!(e.chars().count() < 400, "{} chars", e.chars().count());
}
