//! Property tests of what a peer sends and what a user writes, as `tcplab-load` reads it:
//!
//! - the control protocol: JSON frame bodies (`proto::decode`), the binary stamps frame
//!   (`bulk::decode`) and frames off a socket (`proto::read_frame`);
//! - the authentication: the handshake's three messages and the sealed records after it
//!   (`auth::noise`), the agent's side of the handshake on a socket (`agent::handshake::accept`)
//!   and the client's (`remote::facts` against a server that sends anything);
//! - the HTTP response reader (`http::parse`): responses with one line changed, any bytes;
//! - the values of the workloads' flags (`units`).
//!
//! Whatever comes in: an answer within the bound, no panic, an error on one line that says what
//! to check or write (a peer's own refusal is relayed as it said it, cut to one line), and no
//! allocation sized by a length field beyond what the peer really sent. What is written reads
//! back. The allocation bound is measured by this binary's allocator, per thread.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

#[path = "../../../tests/props.rs"]
mod props;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::{Duration, Instant};
use tcplab_results::spec::WorkloadSpec;

use props::{bounded, check_error};
use proptest::prelude::*;
use proptest::sample::Index;
use tcplab_load::agent::handshake::{Keys, accept};
use tcplab_load::auth::noise::{Initiator, Intro, Responder, parse_intro};
use tcplab_load::auth::{Channel, ClientAuth, KeyPair};
use tcplab_load::http::parse::{Expect, Progress, ResponseReader};
use tcplab_load::proto::{
    self, AgentFacts, Answer, Ask, Cause, Ctrl, ServerReport, VERSION, decode, encode,
};
use tcplab_load::{bulk, units};

/// Records the largest single allocation this thread asks for (tests run on several threads).
struct Largest;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST.try_with(|c| c.set(c.get().max(size)));
}

// SAFETY: every call is passed to `System` unchanged; the record is a const-initialised
// thread-local Cell, which neither allocates nor panics.
unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller upholds `alloc`'s contract, which `System` shares.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: as for `alloc` and `dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Largest = Largest;

/// Runs `f` and returns what it returned and the largest allocation it made on this thread.
fn measured<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|c| c.set(0));
    let v = f();
    (v, LARGEST.with(Cell::get))
}

/// Any bytes, or `base` damaged: a byte changed, cut short, bytes put in or added at the end.
fn damaged(base: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    (
        0..4u8,
        any::<Index>(),
        1..=255u8,
        prop::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(move |(how, at, x, extra)| {
            let mut b = base.clone();
            let i = at.index(b.len().max(1));
            match how {
                0 if !b.is_empty() => b[i] ^= x,
                1 => b.truncate(i),
                2 => {
                    let tail = b.split_off(i.min(b.len()));
                    b.extend(extra);
                    b.extend(tail);
                }
                _ => b.extend_from_slice(&extra),
            }
            b
        })
}

/// Changes at least one byte of `b` (when it has any).
fn flip(b: &mut [u8], at: Index, x: u8) {
    if !b.is_empty() {
        let i = at.index(b.len());
        b[i] ^= x.max(1);
    }
}

// ---------------------------------------------------------------------------------------------
// The control protocol's frames.

/// A control message of every kind, with values drawn from `n` and `text`.
fn ctrl() -> impl Strategy<Value = Ctrl> {
    (0..15u8, any::<u64>(), "\\PC{0,20}", any::<bool>()).prop_map(|(kind, n, text, flag)| {
        let kinds = tcplab_results::spec::WorkloadKind::ALL;
        let test = || WorkloadSpec::default_of(kinds[n as usize % kinds.len()]);
        let causes = [
            Cause::Invalid,
            Cause::Auth,
            Cause::Protocol,
            Cause::Limit,
            Cause::Busy,
            Cause::Failed,
        ];
        let cause = causes[(n / 7) as usize % causes.len()];
        match kind {
            0 => Ctrl::Hello {
                version: VERSION,
                test: Box::new(test()),
            },
            1 => Ctrl::Ready {
                data_port: n as u16,
            },
            2 => Ctrl::Start,
            3 => Ctrl::Done,
            4 => Ctrl::Report(Box::new(ServerReport {
                complete: flag,
                incomplete_reason: flag.then(|| text.clone()),
                stopped: flag.then_some(cause),
                cpu_ns: n,
                cpu_wait_ns: Some(n / 3),
                bytes_received: n / 7,
                transactions: n % 1000,
                ..ServerReport::default()
            })),
            5 | 6 => Ctrl::refusal(cause, text),
            7 => Ctrl::Ask {
                version: VERSION,
                ask: Box::new(Ask::Facts),
            },
            8 => Ctrl::Ask {
                version: VERSION,
                ask: Box::new(Ask::Clock { probes: n as u32 }),
            },
            9 => Ctrl::Ask {
                version: VERSION,
                ask: Box::new(Ask::Run {
                    target: "198.18.0.2:5301".parse().unwrap(),
                    server_key: flag.then(|| text.clone()),
                    test: Box::new(test()),
                }),
            },
            10 => Ctrl::Ask {
                version: VERSION,
                ask: Box::new(Ask::Sysctl {
                    set: vec![("net.core.somaxconn".into(), text)],
                    lease_ms: n,
                }),
            },
            11 => Ctrl::Answer(Box::new(Answer::Facts(Box::new(AgentFacts {
                tcplab: text,
                protocol: VERSION,
                authenticated: flag,
                allow_sysctl: !flag,
                facts: flag.then(tcplab_lab::facts::machine),
                host: None,
            })))),
            12 => Ctrl::Answer(Box::new(Answer::Run {
                result: Box::new(tcplab_load::Report::Rr(tcplab_load::rr::RrResult {
                    mode: text.clone(),
                    ..Default::default()
                })),
            })),
            13 => Ctrl::Ping { t1_ns: n as i64 },
            _ => Ctrl::Pong {
                t1_ns: n as i64,
                t2_ns: -(n as i64 / 2),
                t3_ns: 1,
            },
        }
    })
}

/// A frame body near a valid one, or any bytes, or JSON of the wrong shape.
fn ctrl_body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => ctrl().prop_flat_map(|m| damaged(encode(&m).unwrap())),
        1 => prop::collection::vec(any::<u8>(), 0..300),
        1 => prop::sample::select(vec![
            r#"{"type":"hello","version":4,"test":{"workload":"msgs","count":-1}}"#,
            r#"{"type":"ready","data_port":70000}"#,
            r#"{"type":"nope"}"#,
            r#"{"type":"error"}"#,
            r#"{"type":"ask","version":4,"ask":{"ask":"run","target":"x","test":{}}}"#,
            "{\"type\":\"bad\nline\u{0}\"}",
            "[]",
            "null",
            "",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        // A kind of any name, as valid JSON: the decoder's words quote it.
        1 => "[a-z_\\n\\u{0}]{1,2000}"
            .prop_map(|name| serde_json::json!({ "type": name }).to_string().into_bytes()),
    ]
}

/// Values as the bulk frame carries them: near each other (stamps), or anywhere.
fn stamps() -> impl Strategy<Value = Vec<u64>> {
    prop_oneof![
        prop::collection::vec(0u64..5_000, 0..2_000).prop_map(|d| {
            let mut t = 5_000_000_000_000u64;
            d.into_iter()
                .map(|x| {
                    t += x;
                    t
                })
                .collect()
        }),
        prop::collection::vec(any::<u64>(), 0..200),
    ]
}

/// A bulk body near a valid one, or with a count of its own choosing.
fn bulk_body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        stamps().prop_flat_map(|v| {
            let mut body = Vec::new();
            bulk::encode(&v, &mut body);
            damaged(body)
        }),
        (
            prop_oneof![any::<u64>(), 0u64..300, Just(u64::MAX), Just(10_000_000)],
            prop::collection::vec(any::<u8>(), 0..300),
        )
            .prop_map(|(count, rest)| {
                let mut body = bulk::MAGIC.to_vec();
                body.extend_from_slice(&count.to_le_bytes());
                body.extend_from_slice(&rest);
                body
            }),
    ]
}

/// Bytes on a control connection: frames of any body, lengths that promise more than comes.
fn wire() -> impl Strategy<Value = Vec<u8>> {
    let frame = prop_oneof![
        ctrl_body().prop_map(|b| {
            let mut f = (b.len() as u32).to_be_bytes().to_vec();
            f.extend_from_slice(&b);
            f
        }),
        bulk_body().prop_map(|b| {
            let mut f = (b.len() as u32).to_be_bytes().to_vec();
            f.extend_from_slice(&b);
            f
        }),
        // A length up to the limit (and past it), and only a few bytes of the body.
        (
            prop_oneof![
                any::<u32>(),
                Just((256 << 20) - 1),
                Just(256 << 20),
                0u32..100_000
            ],
            prop::collection::vec(any::<u8>(), 0..64),
        )
            .prop_map(|(len, body)| {
                let mut f = len.to_be_bytes().to_vec();
                f.extend_from_slice(&body);
                f
            }),
        prop::collection::vec(any::<u8>(), 0..64),
    ];
    prop::collection::vec(frame, 1..4).prop_map(|v| v.concat())
}

/// A connected pair on loopback: (the writer's end, the reader's end).
fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    (c, s)
}

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
// The handshake, sans-IO and on sockets.

/// Reads one length-prefixed frame (as the test's own peer).
fn read_raw_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let len = u32::from_be_bytes(len) as usize;
    if len > 1 << 20 {
        return None;
    }
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

fn framed(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

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
        let mut b = tcplab_load::auth::noise::intro(v, &msg);
        if v % 2 == 0 {
            b = tcplab_load::auth::noise::intro(VERSION, &msg);
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

// ---------------------------------------------------------------------------------------------
// HTTP responses.

const RESPONSES: [&str; 3] = [
    "HTTP/1.1 200 OK\r\nServer: t\r\nContent-Length: 10\r\nConnection: keep-alive\r\n\r\n0123456789",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n3;x=y\r\nfgh\r\n0\r\nX-T: 1\r\n\r\n",
    "HTTP/1.0 404 Not Found\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\nabc",
];

/// A header value or a line in place of a valid one.
fn http_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| format!("{n:x}")),
        "[0-9a-zA-Z ,;=.:/-]{0,20}",
        "\\PC{0,10}",
        "[0-9]{20,40}",
        "[0-9]{200,400}",
        "[0-9]{2000,20000}",
        prop::sample::select(vec![
            "",
            " ",
            "5, 5",
            "5, 6",
            "-1",
            "+5",
            "0x10",
            "chunked",
            "gzip, chunked",
            "chunked, gzip",
            "close",
            "HTTP/1.1 100 Continue",
            "HTTP/1.1 101 Switching",
            "HTTP/1.1 099 X",
            "HTTP/2 200 OK",
            "HTTP/1.1 200",
            "ffffffffffffffff",
            "10000000000000000",
            "0;",
            "\u{0}",
            "a\nb",
            "\r",
        ])
        .prop_map(str::to_owned),
    ]
}

/// A response with one line changed: a header's value or a whole line replaced, the line
/// removed or doubled.
fn http_response() -> impl Strategy<Value = Vec<u8>> {
    let how = prop_oneof![3 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)];
    (0..RESPONSES.len(), any::<Index>(), how, http_value()).prop_map(|(r, at, how, value)| {
        let mut lines: Vec<String> = RESPONSES[r].split("\r\n").map(str::to_owned).collect();
        let i = at.index(lines.len());
        match how {
            0 => match lines[i].split_once(": ") {
                Some((name, _)) => lines[i] = format!("{name}: {value}"),
                None => lines[i] = value,
            },
            1 => lines[i] = value,
            2 => {
                lines.remove(i);
            }
            _ => {
                let l = lines[i].clone();
                lines.insert(i, l);
            }
        }
        lines.join("\r\n").into_bytes()
    })
}

/// Feeds `bytes` cut at `cuts`, then EOF: the outcome, an error as its message.
fn read_response(bytes: &[u8], cuts: &[usize], expect: Expect) -> Result<Option<u64>, String> {
    let mut r = ResponseReader::new();
    r.reset(expect);
    let mut from = 0;
    let mut ends: Vec<usize> = cuts.iter().map(|&c| c.min(bytes.len())).collect();
    ends.sort_unstable();
    ends.push(bytes.len());
    for to in ends {
        let to = to.max(from);
        match r.feed(&bytes[from..to]) {
            Ok(Progress::More) => from = to,
            Ok(Progress::Done(d)) => return Ok(Some(d.body_bytes)),
            Err(e) => return Err(e.to_string()),
        }
    }
    r.eof()
        .map(|d| Some(d.body_bytes))
        .map_err(|e| e.to_string())
}

/// What an HTTP response error may name: the part of the response at fault.
const HTTP_PARTS: &[&str] = &[
    "head",
    "status",
    "header",
    "Content-Length",
    "Transfer-Encoding",
    "chunk",
    "trailer",
    "body",
    "response",
    "connection",
    "Switching",
];

fn http_error_holds(e: &str) -> Result<(), TestCaseError> {
    prop_assert!(!e.trim().is_empty(), "empty error");
    prop_assert!(!e.contains(['\n', '\r']), "on more than one line: {:?}", e);
    prop_assert!(
        e.chars().count() <= props::MAX_ERROR_LEN,
        "too long ({} chars): {:.200}",
        e.chars().count(),
        e
    );
    prop_assert!(
        HTTP_PARTS.iter().any(|p| e.contains(p)),
        "names no part: {:?}",
        e
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Flag values.

fn unit_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{0,25}(\\.[0-9]{0,12})?(ms|s|k|K|m|M|g|G|)",
        "-?[0-9.e+]{0,12}(ms|s|K|M|G|)",
        "[0-9]{0,12}(\\.\\.|,)[0-9]{0,12}(,[0-9 ]{0,6}){0,4}",
        prop::sample::select(vec![
            "",
            " ",
            "ms",
            "s",
            "K",
            "..",
            ",",
            "1..",
            "..4",
            "0..4",
            "4..1",
            "1,,2",
            "nan",
            "inf",
            "1e999",
            "-0",
            "1e11",
            "999999999999",
            "4294967296",
            "1..4294967295",
            "10 ms",
            "é",
            "1\n2",
            "\u{0}",
        ])
        .prop_map(str::to_owned),
        any::<String>(),
        "[0-9]{1000,3000}",
    ]
}

proptest! {
    #![proptest_config(props::config())]

    /// Control messages read back as written; a body near a valid one, or any bytes, decodes
    /// or fails on one line with what to check.
    #[test]
    fn control_frames_read_back_and_damage_is_one_line(m in ctrl(), body in ctrl_body()) {
        let json = encode(&m).unwrap();
        let back = decode(&json).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(encode(&back).unwrap(), json);
        let result = bounded("proto::decode", move || decode(&body).map(|_| ()).map_err(|e| e.to_string()))?;
        if let Err(e) = result {
            check_error(&e, &["control"])?;
        }
    }

    /// The stamps frame: any values read back; a damaged body, or one claiming any count,
    /// fails on one line, and never allocates more than eight bytes per byte it holds.
    #[test]
    fn stamps_frames_read_back_and_counts_cannot_inflate(v in stamps(), body in bulk_body()) {
        let mut enc = Vec::new();
        bulk::encode(&v, &mut enc);
        prop_assert_eq!(bulk::decode(&enc).map_err(|e| TestCaseError::fail(e.to_string()))?, v);
        let len = body.len();
        let (result, largest) = bounded("bulk::decode", move || {
            measured(|| bulk::decode(&body).map(|v| v.len()).map_err(|e| e.to_string()))
        })?;
        prop_assert!(largest <= 8 * len + 1024, "{} bytes allocated for a {}-byte body", largest, len);
        match result {
            Ok(n) => prop_assert!(n <= len),
            Err(e) => check_error(&e, &["control", "stamps"])?,
        }
    }

    /// Frames off a socket: whatever arrives, each read ends in a message or one line; a
    /// length field allocates only for the bytes that really come.
    #[test]
    fn frames_off_a_socket_allocate_only_what_arrives(bytes in wire()) {
        let sent = bytes.len();
        let (errors, largest) = bounded("proto::read_frame", move || {
            let (mut w, mut r) = pair();
            r.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let _ = w.write_all(&bytes);
            drop(w);
            measured(|| {
                let mut errors = Vec::new();
                for _ in 0..8 {
                    match proto::read_frame(&mut r) {
                        Ok(_) => {}
                        Err(e) => {
                            errors.push(e.to_string());
                            break;
                        }
                    }
                }
                errors
            })
        })?;
        prop_assert!(largest <= 2 * sent + (128 << 10), "{} bytes allocated for {} sent", largest, sent);
        for e in errors {
            check_error(&e, &["control"])?;
        }
    }

    /// The handshake's messages and the sealed records, sans-IO: a changed frame 2 or 3 never
    /// verifies, a changed record never opens, any bytes in their place fail without a panic,
    /// and every error says what to check.
    #[test]
    fn handshake_messages_and_records(
        stage in 0..4u8,
        at in any::<Index>(),
        x in 1..=255u8,
        junk in prop::collection::vec(any::<u8>(), 0..200),
        msg in prop::collection::vec(any::<u8>(), 0..3000),
        use_junk in any::<bool>(),
    ) {
        let outcome = bounded("auth::noise", move || {
            let c = KeyPair::generate("c").unwrap();
            let s = KeyPair::generate("s").unwrap();
            let (init, mut f1) = Initiator::start(&c, VERSION).unwrap();
            let mut errors = Vec::new();
            if stage == 0 {
                if use_junk { f1 = junk.clone() } else { flip(&mut f1, at, x) }
                // Frame 1 is not authenticated: a changed ephemeral key starts another
                // handshake, which fails later; only a panic or a bad error fails here.
                if let Intro::Current(m) = parse_intro(&f1, VERSION)
                    && let Err(e) = Responder::start(&s, m)
                {
                    errors.push(e.to_string());
                }
                return (true, errors);
            }
            let Intro::Current(m) = parse_intro(&f1, VERSION) else { panic!("intro") };
            let (resp, mut f2) = Responder::start(&s, m).unwrap();
            if stage == 1 {
                if use_junk { f2 = junk.clone() } else { flip(&mut f2, at, x) }
                let refused = match init.on_reply(&f2) {
                    Ok(_) => false,
                    Err(e) => { errors.push(e.to_string()); true }
                };
                return (refused, errors);
            }
            let (mut f3, client) = init.on_reply(&f2).unwrap().finish().unwrap();
            if stage == 2 {
                if use_junk { f3 = junk.clone() } else { flip(&mut f3, at, x) }
                let refused = match resp.finish(&f3) {
                    Ok(_) => false,
                    Err(e) => { errors.push(e.to_string()); true }
                };
                return (refused, errors);
            }
            let server = resp.finish(&f3).unwrap();
            let (mut tx, _) = client.split();
            let (_, mut rx) = server.split();
            let mut wire = Vec::new();
            tx.seal(&msg, &mut wire).unwrap();
            // Split into record bodies, change one of them.
            let mut records = Vec::new();
            let mut rest = &wire[..];
            while let Some((len, tail)) = rest.split_first_chunk::<4>() {
                let n = u32::from_be_bytes(*len) as usize;
                records.push(tail[..n].to_vec());
                rest = &tail[n..];
            }
            let k = at.index(records.len());
            if use_junk { records[k] = junk.clone() } else { flip(&mut records[k], at, x) }
            let mut got = Vec::new();
            let mut refused = false;
            for r in &records {
                match rx.open(r, &mut got, 1 << 20) {
                    Ok(_) => {}
                    Err(e) => { errors.push(e.to_string()); refused = true; break; }
                }
            }
            (refused, errors)
        })?;
        let (refused, errors) = outcome;
        prop_assert!(refused, "a changed handshake message or record was accepted");
        for e in errors {
            check_error(&e, &[])?;
        }
    }

    /// The agent's side of the handshake on a socket: whatever a client sends, the agent
    /// refuses within its deadline, with at most a bounded allocation, and what it answers is
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

    /// The client's side: against a server that answers anything, `remote::facts` returns an
    /// error on one line that says what to check (or relays the server's refusal, cut to one
    /// line), within its timeout.
    #[test]
    fn the_client_holds_against_a_server_that_sends_anything(how in reply()) {
        let result = bounded("remote::facts", move || {
            let me = KeyPair::generate("server").unwrap();
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let server = std::thread::spawn(move || serve_once(l, me, how));
            let auth = ClientAuth::ephemeral().unwrap();
            let r = tcplab_load::remote::facts(addr, &auth, Duration::from_secs(3)).map(|_| ()).map_err(|e| e.to_string());
            let _ = server.join();
            r
        })?;
        if let Err(e) = result {
            peer_error_holds(&e)?;
        }
    }

    /// HTTP responses with one line changed, fed in pieces: a result or an error on one line,
    /// at most 600 characters, naming the part of the response at fault.
    #[test]
    fn http_responses_with_one_line_changed(
        bytes in http_response(),
        cuts in prop::collection::vec(0usize..400, 0..4),
        sized in any::<bool>(),
    ) {
        let expect = Expect { size: sized.then_some(10), ..Expect::default() };
        let result = bounded("ResponseReader", move || read_response(&bytes, &cuts, expect))?;
        if let Err(e) = result {
            http_error_holds(&e)?;
        }
    }

    /// Any bytes after a response's start, fed whole: the same rule.
    #[test]
    fn http_responses_of_any_bytes(
        prefix in prop::sample::select(vec!["", "HTTP/1.1 200 OK\r\n", "HTTP/1.1 200 OK\r\nContent-Length: ", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"]),
        tail in prop::collection::vec(any::<u8>(), 0..2048),
    ) {
        let mut bytes = prefix.as_bytes().to_vec();
        bytes.extend_from_slice(&tail);
        let result = bounded("ResponseReader", move || read_response(&bytes, &[], Expect::default()))?;
        if let Err(e) = result {
            http_error_holds(&e)?;
        }
    }

    /// Durations, byte counts, rates, intervals and size lists: any text parses or fails on
    /// one line that echoes the value cut and says what to write.
    #[test]
    fn flag_values(text in unit_text()) {
        let errors = bounded("units", move || {
            [
                units::parse_duration_ms(&text).err(),
                units::parse_interval_ms(&text).err(),
                units::parse_bytes(&text).err(),
                units::parse_rate(&text).err(),
                units::parse_size_list(&text).err(),
            ]
        })?;
        for e in errors.into_iter().flatten() {
            check_error(&e, &[])?;
        }
    }

    /// Values written as people write them read back.
    #[test]
    fn flag_values_read_back(
        ms in 0u64..1_000_000_000_000,
        n in 0u64..(1 << 53),
        k in 0u64..(1 << 30),
        sizes in prop::collection::vec(any::<u32>(), 1..20),
        (a, b) in (1u32..=u32::MAX).prop_flat_map(|a| (Just(a), a..=u32::MAX)),
    ) {
        prop_assert_eq!(units::parse_duration_ms(&format!("{ms}ms")), Ok(ms));
        prop_assert_eq!(units::parse_duration_ms(&format!("{}", ms as f64 / 1000.0)), Ok(ms));
        prop_assert_eq!(units::parse_bytes(&n.to_string()), Ok(n));
        prop_assert_eq!(units::parse_bytes(&format!("{k}K")), Ok(k * 1024));
        prop_assert_eq!(units::parse_rate(&format!("{k}M")), Ok(k * 1_000_000));
        let list: Vec<String> = sizes.iter().map(u32::to_string).collect();
        prop_assert_eq!(units::parse_size_list(&list.join(",")), Ok(sizes));
        let range = units::parse_size_list(&format!("{a}..{b}")).unwrap();
        prop_assert_eq!(range[0], a);
        prop_assert!(range.iter().all(|&x| x <= b) && range.len() <= 32);
        prop_assert!(range.windows(2).all(|w| w[1] == 2 * w[0]));
    }
}

/// Found by `frames_off_a_socket_allocate_only_what_arrives`: a plain frame's 4-byte length
/// sized its buffer before any body came, so 4 bytes from a peer asked for up to 256 MiB.
#[test]
fn a_length_alone_allocates_nothing_like_it() {
    let (mut w, mut r) = pair();
    w.write_all(&((256u32 << 20) - 1).to_be_bytes()).unwrap();
    w.write_all(b"{}").unwrap();
    drop(w);
    let (e, largest) = measured(|| proto::read_frame(&mut r).map(|_| ()).unwrap_err());
    assert!(largest <= 128 << 10, "{largest} bytes");
    let e = e.to_string();
    assert!(
        e.contains("peer closed the connection") && e.contains("check"),
        "{e}"
    );
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
    let e = tcplab_load::remote::facts(
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

/// Found by `http_responses_with_one_line_changed`: a Content-Length of a few thousand digits
/// was echoed whole in the request's error.
#[test]
fn a_long_content_length_is_cut_in_its_error() {
    let bytes = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
        "9".repeat(10_000)
    );
    let e = read_response(bytes.as_bytes(), &[], Expect::default()).unwrap_err();
    assert!(
        e.contains("Content-Length") && e.chars().count() < 200,
        "{e}"
    );
}

/// Found by `flag_values`: a value was echoed whole, and `out of range` or `not a size` did
/// not say what to give.
#[test]
fn flag_values_are_cut_and_say_what_to_give() {
    let long = "9".repeat(5_000);
    for e in [
        units::parse_duration_ms(&long).unwrap_err(),
        units::parse_bytes(&long).unwrap_err(),
        units::parse_size_list(&long).unwrap_err(),
    ] {
        assert!(e.chars().count() < 200, "{e}");
        assert!(props::says_fix(&e), "{e}");
    }
    let e = units::parse_duration_ms("-1").unwrap_err();
    assert!(e.contains("negative") && props::says_fix(&e), "{e}");
}
