//! What the property tests of the control protocol share (this crate's and tcplab-agent's, which
//! includes this file): control messages of every kind, bodies and frames near valid ones or of
//! any bytes, a loopback pair, and this test binary's allocator, which records the largest
//! single allocation each thread asks for.

#![allow(dead_code, reason = "each including test binary uses its own part")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Read;
use std::net::{TcpListener, TcpStream};

use proptest::prelude::*;
use proptest::sample::Index;
use tcplab_load::bulk;
use tcplab_load::proto::{AgentFacts, Answer, Ask, Cause, Ctrl, ServerReport, VERSION, encode};
use tcplab_results::spec::WorkloadSpec;

/// Records the largest single allocation this thread asks for (tests run on several threads).
pub struct Largest;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

pub fn note(size: usize) {
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
pub fn measured<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|c| c.set(0));
    let v = f();
    (v, LARGEST.with(Cell::get))
}

/// Any bytes, or `base` damaged: a byte changed, cut short, bytes put in or added at the end.
pub fn damaged(base: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
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
pub fn flip(b: &mut [u8], at: Index, x: u8) {
    if !b.is_empty() {
        let i = at.index(b.len());
        b[i] ^= x.max(1);
    }
}

// ---------------------------------------------------------------------------------------------
// The control protocol's frames.

/// A control message of every kind, with values drawn from `n` and `text`.
pub fn ctrl() -> impl Strategy<Value = Ctrl> {
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
                facts: flag.then(tcplab_host::facts::machine),
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
pub fn ctrl_body() -> impl Strategy<Value = Vec<u8>> {
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
pub fn stamps() -> impl Strategy<Value = Vec<u64>> {
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
pub fn bulk_body() -> impl Strategy<Value = Vec<u8>> {
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
pub fn wire() -> impl Strategy<Value = Vec<u8>> {
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
pub fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    (c, s)
}

/// Reads one length-prefixed frame (as the test's own peer).
pub fn read_raw_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
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

pub fn framed(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}
