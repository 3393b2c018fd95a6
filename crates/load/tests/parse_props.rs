//! Property tests of what a peer sends and what a user writes, as `tcplab-load` reads it:
//!
//! - the control protocol: JSON frame bodies (`proto::decode`), the binary stamps frame
//!   (`bulk::decode`) and frames off a socket (`proto::read_frame`);
//! - the authentication's sans-IO part: the handshake's three messages and the sealed records
//!   after it (`tcplab_auth::noise`); the agent's side of the handshake on a socket and the
//!   client's side of an ask are tcplab-agent's `parse_props`;
//! - the HTTP response reader (`http::parse`): responses with one line changed, any bytes;
//! - the values of the workloads' flags (`units`).
//!
//! Whatever comes in: an answer within the bound, no panic, an error on one line that says what
//! to check or write, and no allocation sized by a length field beyond what the peer really
//! sent. What is written reads back. The allocation bound is measured by this binary's
//! allocator, per thread ([`frames`], which tcplab-agent's property tests share).

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

#[path = "../../../tests/props.rs"]
mod props;

mod frames;

use std::io::Write;
use std::time::Duration;

use frames::{bulk_body, ctrl, ctrl_body, flip, measured, pair, stamps, wire};
use props::{bounded, check_error};
use proptest::prelude::*;
use proptest::sample::Index;
use tcplab_auth::KeyPair;
use tcplab_auth::noise::{Initiator, Intro, Responder, parse_intro};
use tcplab_load::http::parse::{Expect, Progress, ResponseReader};
use tcplab_load::proto::{self, VERSION, decode, encode};
use tcplab_load::{bulk, units};

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
    /// The client's side: against a server that answers anything, `remote::facts` returns an
    /// error on one line that says what to check (or relays the server's refusal, cut to one
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
