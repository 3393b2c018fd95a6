//! Tests of the response reader: well-formed responses, each malformed case with its reason,
//! split feeding against whole feeding (exhaustively for fixed responses, by property for
//! random ones), hostile bytes, and the buffer's reuse.

use proptest::prelude::*;
use proptest::sample::Index;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;

/// How a response read ended: complete (its `Done` with `consumed` zeroed, and where it ended
/// in the whole input) or failed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Done {
        done: Done,
        end: usize,
        at_eof: bool,
    },
    Failed(ResponseError),
}

impl Outcome {
    fn done(&self) -> Done {
        match self {
            Outcome::Done { done, .. } => *done,
            Outcome::Failed(e) => panic!("failed: {e}"),
        }
    }

    fn err(&self) -> ResponseError {
        match self {
            Outcome::Done { done, .. } => panic!("completed: {done:?}"),
            Outcome::Failed(e) => e.clone(),
        }
    }

    /// The outcome up to the wording of the reason, which may show more or less of the bytes
    /// in view when it failed.
    fn shape(&self) -> Result<(Done, usize, bool), ErrorKind> {
        match self {
            Outcome::Done { done, end, at_eof } => Ok((*done, *end, *at_eof)),
            Outcome::Failed(e) => Err(e.kind),
        }
    }
}

/// Feeds `bytes` cut at `cuts` (any order, repeats make empty feeds), then eof if incomplete.
fn run_with(r: &mut ResponseReader, bytes: &[u8], cuts: &[usize]) -> Outcome {
    let mut points: Vec<usize> = cuts.iter().map(|&c| c.min(bytes.len())).collect();
    points.sort_unstable();
    points.push(bytes.len());
    let mut from = 0;
    for to in points {
        let piece = &bytes[from..to];
        match r.feed(piece) {
            Ok(Progress::More) => {}
            Ok(Progress::Done(done)) => {
                assert!(done.consumed <= piece.len(), "{done:?} of {}", piece.len());
                assert!(r.head_done());
                return Outcome::Done {
                    done: Done {
                        consumed: 0,
                        ..done
                    },
                    end: from + done.consumed,
                    at_eof: false,
                };
            }
            Err(e) => return Outcome::Failed(e),
        }
        assert!(r.buf.capacity() <= MAX_HEAD);
        from = to;
    }
    match r.eof() {
        Ok(done) => Outcome::Done {
            done,
            end: bytes.len(),
            at_eof: true,
        },
        Err(e) => Outcome::Failed(e),
    }
}

fn run(expect: Expect, bytes: &[u8], cuts: &[usize]) -> Outcome {
    let mut r = ResponseReader::new();
    r.reset(expect);
    run_with(&mut r, bytes, cuts)
}

fn whole(bytes: &[u8]) -> Outcome {
    run(Expect::default(), bytes, &[])
}

/// Feeds whole, at every single split point, and byte by byte: all must agree exactly.
fn every_split(expect: Expect, bytes: &[u8]) -> Outcome {
    let all = run(expect, bytes, &[]);
    for i in 0..=bytes.len() {
        assert_eq!(run(expect, bytes, &[i]), all, "split at {i}");
    }
    let each: Vec<usize> = (0..bytes.len()).collect();
    assert_eq!(run(expect, bytes, &each), all, "byte by byte");
    all
}

/// The failure of `bytes` fed whole, checking that byte-by-byte feeding fails the same way.
fn failure(expect: Expect, bytes: &[u8]) -> ResponseError {
    let e = run(expect, bytes, &[]).err();
    let each: Vec<usize> = (0..bytes.len()).collect();
    assert_eq!(run(expect, bytes, &each).err().kind, e.kind, "{e}");
    e
}

fn assert_fails(expect: Expect, bytes: &[u8], kind: ErrorKind, reason: &str) {
    let e = failure(expect, bytes);
    assert_eq!(e.kind, kind, "{e}");
    assert!(e.reason.contains(reason), "{:?} lacks {reason:?}", e.reason);
}

fn file() -> FileId {
    FileId::new(3, 1, 1).expect("file") // 1024 bytes
}

fn file_body(f: FileId) -> Vec<u8> {
    let mut b = vec![0u8; f.size() as usize];
    f.fill(0, &mut b);
    b
}

fn checked(f: FileId) -> Expect {
    Expect {
        size: Some(f.size()),
        file: Some(f),
        check_content: true,
        head_request: false,
    }
}

fn with_body(head: &str, body: &[u8]) -> Vec<u8> {
    let mut v = head.as_bytes().to_vec();
    v.extend_from_slice(body);
    v
}

fn done(status: u16, keep_alive: bool, body_bytes: u64) -> Done {
    Done {
        status,
        keep_alive,
        body_bytes,
        consumed: 0,
    }
}

#[test]
fn error_kinds_serialise_as_their_names() {
    for k in ErrorKind::ALL {
        let json = serde_json::to_string(&k).expect("json");
        assert_eq!(json, format!("\"{}\"", k.name()));
        assert_eq!(serde_json::from_str::<ErrorKind>(&json).expect("back"), k);
    }
    assert!(ErrorKind::ALL.windows(2).all(|w| w[0] < w[1]));
    let e = ResponseError::new(ErrorKind::Truncated, "x");
    assert_eq!(e.to_string(), "truncated: x");
}

#[test]
fn content_length_body() {
    let f = file();
    let bytes = with_body(
        "HTTP/1.1 200 OK\r\nContent-Length: 1024\r\nServer: t\r\n\r\n",
        &file_body(f),
    );
    let out = every_split(checked(f), &bytes);
    assert_eq!(out.done(), done(200, true, 1024));
    assert_eq!(out.shape().map(|s| s.1), Ok(bytes.len()));
    // Equal lengths repeated or listed are one length.
    let twice = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\ncontent-length: 3, 3\r\n\r\nabc";
    assert_eq!(whole(twice.as_bytes()).done(), done(200, true, 3));
}

#[test]
fn chunked_with_extensions_and_trailers() {
    let f = file();
    let body = file_body(f);
    let mut bytes = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n".to_vec();
    bytes.extend_from_slice(b"1;name=value\r\n");
    bytes.extend_from_slice(&body[..1]);
    bytes.extend_from_slice(b"\r\n3FF ; quoted=\"a;b\"\r\n");
    bytes.extend_from_slice(&body[1..]);
    bytes.extend_from_slice(b"\r\n0;last\r\nX-Sum: 1\r\nX-Other: two\r\n\r\n");
    let out = every_split(checked(f), &bytes);
    assert_eq!(out.done(), done(200, true, 1024));
    // A chunked body of nothing but the last chunk.
    let empty = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    assert_eq!(
        every_split(Expect::default(), empty).done(),
        done(404, true, 0)
    );
}

#[test]
fn until_close_ends_at_eof() {
    let bytes = b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n\r\nhello world";
    let out = every_split(Expect::default(), bytes);
    assert_eq!(
        out,
        Outcome::Done {
            done: done(200, false, 11),
            end: bytes.len(),
            at_eof: true
        }
    );
    // A final coding other than chunked also ends at close (RFC 9112 §6.3).
    let gz = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\nxyz";
    assert_eq!(whole(gz).done(), done(200, false, 3));
}

#[test]
fn head_request_has_no_body() {
    let head = Expect {
        size: Some(5000),
        head_request: true,
        ..Expect::default()
    };
    let bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n";
    let out = every_split(head, bytes);
    assert_eq!(out.done(), done(200, true, 0));
    // Nor does a chunked HEAD response.
    let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(every_split(head, chunked).done(), done(200, true, 0));
    // The length it announces must still be the file's.
    let wrong = b"HTTP/1.1 200 OK\r\nContent-Length: 4999\r\n\r\n";
    assert_fails(
        head,
        wrong,
        ErrorKind::Content,
        "Content-Length of 4999 bytes, the file has 5000",
    );
}

#[test]
fn no_body_for_204_and_304() {
    for status in ["204 No Content", "304 Not Modified"] {
        let bytes = format!("HTTP/1.1 {status}\r\nContent-Length: 10\r\n\r\n");
        let mut pipelined = bytes.clone().into_bytes();
        pipelined.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        let out = every_split(checked(file()), &pipelined);
        let code = status[..3].parse().expect("code");
        assert_eq!(
            out,
            Outcome::Done {
                done: done(code, true, 0),
                end: bytes.len(),
                at_eof: false
            }
        );
    }
}

#[test]
fn http10_keeps_alive_only_when_asked() {
    let plain = b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok";
    assert_eq!(
        every_split(Expect::default(), plain).done(),
        done(200, false, 2)
    );
    let ka = b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok";
    assert_eq!(
        every_split(Expect::default(), ka).done(),
        done(200, true, 2)
    );
    let close = b"HTTP/1.0 200 OK\r\n\r\nuntil close";
    assert_eq!(whole(close).done(), done(200, false, 11));
    // HTTP/1.1 keeps alive unless a token of Connection is close, in any case.
    let v11 = b"HTTP/1.1 200 OK\r\nConnection: upgrade , CLOSE\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(whole(v11).done(), done(200, false, 0));
    let v11 = b"HTTP/1.1 200 OK\r\nConnection: closed\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(whole(v11).done(), done(200, true, 0));
    // Transfer-Encoding in HTTP/1.0: framing not to be trusted past this response.
    let te10 =
        b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    assert_eq!(whole(te10).done(), done(200, false, 0));
}

#[test]
fn interim_responses_are_skipped() {
    let f = file();
    let bytes = with_body(
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n\
         HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n\r\n",
        &file_body(f),
    );
    assert_eq!(
        every_split(checked(f), &bytes).done(),
        done(200, true, 1024)
    );
    let mut r = ResponseReader::new();
    r.reset(Expect::default());
    assert_eq!(r.feed(b"HTTP/1.1 100 Continue\r\n\r\n"), Ok(Progress::More));
    assert!(!r.head_done());
    assert_eq!(r.status(), None);
    assert_eq!(
        r.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n"),
        Ok(Progress::More)
    );
    assert!(r.head_done());
    assert_eq!(r.status(), Some(200));
    let e = r.eof().expect_err("truncated");
    assert_eq!(e.reason, "body ended after 0 of 1 bytes");
}

#[test]
fn pipelined_leftovers_are_not_consumed() {
    let first = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
    let second =
        b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nno\r\n0\r\n\r\n";
    let mut both = first.to_vec();
    both.extend_from_slice(second);
    both.extend_from_slice(b"extra");
    let mut r = ResponseReader::new();
    r.reset(Expect::default());
    let Ok(Progress::Done(d)) = r.feed(&both) else {
        panic!("first not done")
    };
    assert_eq!(
        d,
        Done {
            consumed: first.len(),
            ..done(200, true, 3)
        }
    );
    // More bytes without a reset are an error; an empty feed repeats the result.
    assert_eq!(r.feed(&[]), Ok(Progress::Done(Done { consumed: 0, ..d })));
    assert_eq!(r.eof(), Ok(Done { consumed: 0, ..d }));
    r.reset(Expect::default());
    let Ok(Progress::Done(d)) = r.feed(&both[first.len()..]) else {
        panic!("second not done")
    };
    assert_eq!(
        d,
        Done {
            consumed: second.len(),
            ..done(404, true, 2)
        }
    );
    let e = r.feed(b"x").expect_err("after done");
    assert_eq!(
        (e.kind, e.reason.as_str()),
        (ErrorKind::Malformed, "1 bytes after a complete response")
    );
    // The failure sticks until the next reset.
    assert_eq!(r.eof(), Err(e));
}

#[test]
fn non_200_is_framed_but_not_checked() {
    let bytes = b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found";
    assert_eq!(
        every_split(checked(file()), bytes).done(),
        done(404, true, 9)
    );
    let bytes = b"HTTP/1.1 500 Oops\r\nConnection: close\r\n\r\nbroken";
    assert_eq!(whole(bytes).done(), done(500, false, 6));
}

#[test]
fn malformed_heads_name_the_problem() {
    let m = ErrorKind::Malformed;
    let any = Expect::default();
    assert_fails(
        any,
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        m,
        "invalid response status",
    );
    assert_fails(any, b"HTPT/1.1 200 OK\r\n\r\n", m, "invalid HTTP version");
    assert_fails(
        any,
        b"HTTP/1.1 200 OK\r\nBad Header: x\r\n\r\n",
        m,
        "invalid header name",
    );
    assert_fails(
        any,
        b"HTTP/1.1 200 OK\r\nX: a\x01b\r\n\r\n",
        m,
        "invalid header value",
    );
    assert_fails(
        any,
        b"HTTP/1.1 042 Odd\r\n\r\n",
        m,
        "status code 042 is below 100",
    );
    assert_fails(
        any,
        b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
        m,
        "101 Switching Protocols",
    );
    assert_fails(
        any,
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        m,
        "both Transfer-Encoding and Content-Length",
    );
    assert_fails(
        any,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: ,\r\n\r\n",
        m,
        "names no coding",
    );
    assert_fails(
        any,
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        m,
        "Content-Lengths 3 and 4 disagree",
    );
    assert_fails(
        any,
        b"HTTP/1.1 200 OK\r\nContent-Length: 3, 5\r\n\r\n",
        m,
        "disagree",
    );
    assert_fails(
        any,
        b"HTTP/1.1 200 OK\r\nContent-Length: 12a\r\n\r\n",
        m,
        "Content-Length \"12a\" is not a number",
    );
    assert_fails(
        any,
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        m,
        "not a number",
    );
    assert_fails(
        any,
        b"HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n",
        m,
        "not a number",
    );
    assert_fails(
        any,
        b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        m,
        "Content-Length \"99999999999999999999999\" is too large",
    );
    // Just fits.
    let max = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\nab", u64::MAX);
    let e = whole(max.as_bytes()).err();
    assert_eq!(
        e.reason,
        format!("body ended after 2 of {} bytes", u64::MAX)
    );
}

#[test]
fn head_limits_bound_memory() {
    let m = ErrorKind::Malformed;
    let mut long = b"HTTP/1.1 200 OK\r\nX-Long: ".to_vec();
    long.resize(MAX_HEAD + 10, b'a');
    long.extend_from_slice(b"\r\n\r\n");
    assert_fails(Expect::default(), &long, m, "head over 16384 bytes");
    // Exactly MAX_HEAD bytes is still a head.
    let mut fits = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Long: ".to_vec();
    fits.resize(MAX_HEAD - 4, b'a');
    fits.extend_from_slice(b"\r\n\r\n");
    assert_eq!(every_split_sample(&fits).done(), done(200, true, 0));
    let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..=MAX_HEADERS {
        many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert_fails(Expect::default(), &many, m, "too many headers (over 32)");
}

/// Like [`every_split`] but at a sample of points, for long inputs.
fn every_split_sample(bytes: &[u8]) -> Outcome {
    let all = whole(bytes);
    for i in (0..=bytes.len())
        .step_by(97)
        .chain([bytes.len() - 1, bytes.len() - 2])
    {
        assert_eq!(run(Expect::default(), bytes, &[i]), all, "split at {i}");
    }
    all
}

#[test]
fn malformed_chunking_names_the_problem() {
    let m = ErrorKind::Malformed;
    let any = Expect::default();
    let te = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    let bad = |tail: &str| format!("{te}{tail}").into_bytes();
    assert_fails(any, &bad("zz\r\n"), m, "bad chunk size line \"zz");
    assert_fails(any, &bad("\r\n"), m, "bad chunk size line");
    assert_fails(any, &bad(" 5\r\n"), m, "bad chunk size line");
    assert_fails(any, &bad("5x\r\n"), m, "bad chunk size line \"5x");
    assert_fails(any, &bad("11111111111111111\r\n"), m, "bad chunk size line");
    assert_fails(
        any,
        &bad("3;a\nb\r\nabc\r\n0\r\n\r\n"),
        m,
        "bad chunk size line",
    );
    assert_fails(
        any,
        &bad("3\r\nabcX\r\n"),
        m,
        "chunk data not followed by CRLF: byte 'X' after body byte 3",
    );
    assert_fails(any, &bad("3\r\nabc\rX"), m, "not followed by CRLF");
    assert_fails(
        any,
        &bad("1\r\na\r\nffffffffffffffff\r\n"),
        m,
        "past 2^64 bytes",
    );
    assert_fails(
        any,
        &bad("0\r\nX: y\n\r\n"),
        m,
        "trailer line not ended by CRLF",
    );
    // A bare LF after a trailer line is not the empty line, however the feeds fall.
    let bare = bad("0\r\nX: y\r\n\n");
    assert_fails(any, &bare, m, "trailer line not ended by CRLF");
    let long_ext = format!("1;{}\r\na\r\n0\r\n\r\n", "e".repeat(MAX_CHUNK_LINE));
    assert_fails(any, &bad(&long_ext), m, "chunk-size line over 4096 bytes");
    let long_trailer = format!("0\r\nX: {}\r\n\r\n", "t".repeat(MAX_HEAD));
    assert_fails(any, &bad(&long_trailer), m, "trailers over 16384 bytes");
}

#[test]
fn truncation_says_how_far_it_got() {
    let t = ErrorKind::Truncated;
    let any = Expect::default();
    assert_fails(any, b"", t, "connection closed before the response head");
    assert_fails(
        any,
        b"HTTP/1.1 200 OK\r\nContent-Le",
        t,
        "after 27 bytes of the response head",
    );
    assert_fails(
        any,
        b"HTTP/1.1 100 Continue\r\n\r\n",
        t,
        "before the response head",
    );
    let mut body = b"HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n\r\n".to_vec();
    body.resize(body.len() + 100, b'x');
    assert_fails(any, &body, t, "body ended after 100 of 1024 bytes");
    let te = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    for tail in ["", "5", "5\r\nab", "5\r\nabcde", "5\r\nabcde\r"] {
        let bytes = with_body(std::str::from_utf8(te).expect("ascii"), tail.as_bytes());
        assert_fails(any, &bytes, t, "before its last chunk");
    }
    let bytes = with_body(std::str::from_utf8(te).expect("ascii"), b"0\r\nX: 1\r\n");
    assert_fails(any, &bytes, t, "ended inside its trailers");
}

#[test]
fn content_and_size_mismatches() {
    let f = file();
    let c = ErrorKind::Content;
    let mut body = file_body(f);
    body[700] ^= 1;
    let bytes = with_body("HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n\r\n", &body);
    let e = failure(checked(f), &bytes);
    assert_eq!(e.kind, c);
    assert!(e.reason.starts_with("body byte 700 is "), "{e}");
    assert!(e.reason.contains("/dir00003/class1_1 has"), "{e}");
    // Without check_content, only the size is checked.
    let sized = Expect {
        check_content: false,
        ..checked(f)
    };
    assert_eq!(whole_with(sized, &bytes).done(), done(200, true, 1024));
    // Size: a Content-Length that is not the file's, a chunked or until-close body either.
    let short = with_body(
        "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n",
        &body[..1000],
    );
    assert_fails(sized, &short, c, "body of 1000 bytes, the file has 1024");
    let chunked = with_body(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n",
        b"",
    );
    assert_fails(sized, &chunked, c, "body of 2 bytes, the file has 1024");
    let mut long = with_body("HTTP/1.1 200 OK\r\n\r\n", &file_body(f));
    long.push(b'!');
    assert_fails(
        checked(f),
        &long,
        c,
        "body of 1025 bytes, the file has 1024",
    );
    // check_content alone takes the file's size as the body's.
    let content_only = Expect {
        size: None,
        ..checked(f)
    };
    assert_fails(
        content_only,
        &long,
        c,
        "body of 1025 bytes, the file has 1024",
    );
    // An error response is not the file: no Content error.
    let not_found = b"HTTP/1.1 404 Not Found\r\nContent-Length: 1\r\n\r\nx";
    assert_eq!(whole_with(checked(f), not_found).done(), done(404, true, 1));
}

fn whole_with(expect: Expect, bytes: &[u8]) -> Outcome {
    run(expect, bytes, &[])
}

/// Whole feeds of a typical 1 KB response never touch the buffer; split feeds gather into one
/// buffer that reset keeps: after the first response no feed reallocates it.
#[test]
fn reuse_keeps_one_buffer() {
    let f = file();
    let expect = checked(f);
    let bytes = with_body(
        "HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: 1024\r\n\
         Last-Modified: Mon, 01 Jan 2024 00:00:00 GMT\r\nAccept-Ranges: bytes\r\n\r\n",
        &file_body(f),
    );
    let mut r = ResponseReader::new();
    for _ in 0..1000 {
        r.reset(expect);
        assert_eq!(run_with(&mut r, &bytes, &[]).done(), done(200, true, 1024));
    }
    assert_eq!(r.buf.capacity(), 0, "whole heads are parsed in place");
    let cuts = [7, 60, 200, 300, 700];
    r.reset(expect);
    assert_eq!(
        run_with(&mut r, &bytes, &cuts).done(),
        done(200, true, 1024)
    );
    let (cap, ptr) = (r.buf.capacity(), r.buf.as_ptr());
    assert!(cap > 0 && cap <= MAX_HEAD, "{cap}");
    for _ in 0..10_000 {
        r.reset(expect);
        assert_eq!(
            run_with(&mut r, &bytes, &cuts).done(),
            done(200, true, 1024)
        );
        assert_eq!((r.buf.capacity(), r.buf.as_ptr()), (cap, ptr));
    }
}

#[test]
fn reset_after_failure_reads_the_next_response() {
    let mut r = ResponseReader::new();
    assert!(r.feed(b"garbage\r\n\r\n").is_err());
    assert!(
        r.feed(b"HTTP/1.1 200 OK\r\n\r\n").is_err(),
        "failure sticks"
    );
    r.reset(Expect::default());
    let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(run_with(&mut r, ok, &[5]).done(), done(200, true, 0));
}

/// A random valid response, the expectation it is read under, and what reading must give.
#[derive(Debug, Clone)]
struct Case {
    bytes: Vec<u8>,
    expect: Expect,
    want: Outcome,
}

fn arb_case() -> impl Strategy<Value = Case> {
    (
        prop_oneof![Just(200u16), Just(204), Just(304), Just(404), 200u16..600],
        any::<bool>(),
        0u8..3,
        0u8..3,
        0usize..70_000,
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.2),
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(build_case)
}

type CaseParams = (u16, bool, u8, u8, usize, bool, bool, bool, u64);

fn build_case(p: CaseParams) -> Case {
    let (status, v11, framing, conn, len, head_request, interim, check, seed) = p;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let f = FileId::new(rng.random_range(0..100), 3, rng.random_range(1..=9)).expect("file");
    let body: Vec<u8> = if check && status == 200 {
        let mut b = vec![0u8; len];
        f.fill(0, &mut b);
        b
    } else {
        (0..len).map(|_| rng.random()).collect()
    };
    let no_body = head_request || status == 204 || status == 304;
    let mut out = Vec::new();
    if interim {
        out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    out.extend_from_slice(format!("HTTP/1.{} {status} Whatever\r\n", u8::from(v11)).as_bytes());
    let mut headers = vec![
        "Server: test".to_string(),
        "Content-Type: text/plain".into(),
    ];
    headers.extend((0..rng.random_range(0..8)).map(|i| format!("X-H{i}: {}", rng.random::<u32>())));
    match conn {
        1 => headers.push("Connection: close".into()),
        2 => headers.push("Connection: keep-alive".into()),
        _ => {}
    }
    match framing {
        0 => headers.push(format!("Content-Length: {len}")),
        1 => headers.push("Transfer-Encoding: chunked".into()),
        _ => {}
    }
    let at = rng.random_range(0..=headers.len());
    headers.rotate_left(at);
    for h in &headers {
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if !no_body {
        if framing == 1 {
            let mut rest = &body[..];
            while !rest.is_empty() {
                let n = if rng.random() {
                    rng.random_range(1..=rest.len().min(16))
                } else {
                    rng.random_range(1..=rest.len())
                };
                let ext = if rng.random_range(0..4) == 0 {
                    ";x=y"
                } else {
                    ""
                };
                out.extend_from_slice(format!("{n:x}{ext}\r\n").as_bytes());
                out.extend_from_slice(&rest[..n]);
                out.extend_from_slice(b"\r\n");
                rest = &rest[n..];
            }
            out.extend_from_slice(b"0\r\n");
            if rng.random() {
                out.extend_from_slice(b"X-Trailer: t\r\n");
            }
            out.extend_from_slice(b"\r\n");
        } else {
            out.extend_from_slice(&body);
        }
    }
    let close_framed = framing == 2 && !no_body;
    let base = if v11 { conn != 1 } else { conn == 2 };
    let keep_alive = base && !close_framed && (framing != 1 || v11);
    let want = Outcome::Done {
        done: done(status, keep_alive, if no_body { 0 } else { len as u64 }),
        end: out.len(),
        at_eof: close_framed,
    };
    let expect = Expect {
        size: check.then_some(len as u64),
        file: Some(f),
        check_content: check,
        head_request,
    };
    Case {
        bytes: out,
        expect,
        want,
    }
}

proptest! {
    #[test]
    fn split_feeding_reads_as_whole(case in arb_case(), cuts in prop::collection::vec(0usize..80_000, 0..8)) {
        let all = run(case.expect, &case.bytes, &[]);
        prop_assert_eq!(&all, &case.want);
        prop_assert_eq!(run(case.expect, &case.bytes, &cuts), all);
    }

    #[test]
    fn arbitrary_bytes_end_cleanly(
        prefix in prop::sample::select(vec![
            &b""[..],
            &b"HTTP/1.1 200 OK\r\n"[..],
            &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"[..],
            &b"HTTP/1.0 200 OK\r\nContent-Length: 10\r\n\r\n"[..],
        ]),
        tail in prop::collection::vec(any::<u8>(), 0..2048),
        cuts in prop::collection::vec(0usize..2100, 0..8),
    ) {
        let mut bytes = prefix.to_vec();
        bytes.extend_from_slice(&tail);
        ends_cleanly(&bytes, &cuts)?;
    }

    #[test]
    fn damaged_responses_end_cleanly(
        case in arb_case(),
        flips in prop::collection::vec((any::<Index>(), any::<u8>()), 0..4),
        cut_end in prop::option::of(any::<Index>()),
        garbage in prop::collection::vec(any::<u8>(), 0..64),
        cuts in prop::collection::vec(0usize..80_000, 0..8),
    ) {
        let mut bytes = case.bytes.clone();
        for (at, b) in &flips {
            if !bytes.is_empty() {
                let i = at.index(bytes.len());
                bytes[i] = *b;
            }
        }
        if let Some(at) = cut_end {
            bytes.truncate(at.index(bytes.len() + 1));
        }
        bytes.extend_from_slice(&garbage);
        ends_cleanly(&bytes, &cuts)?;
        let mut r = ResponseReader::new();
        r.reset(case.expect);
        let all = run_with(&mut r, &bytes, &[]);
        prop_assert!(r.buf.capacity() <= MAX_HEAD);
        prop_assert_eq!(run(case.expect, &bytes, &cuts).shape(), all.shape());
        if flips.is_empty() && cut_end.is_none() && !matches!(case.want, Outcome::Done { at_eof: true, .. }) {
            prop_assert_eq!(all, case.want);
        }
    }
}

/// Reads `bytes` whole and cut at `cuts`, with no expectation and with a content check: the
/// same outcome either way, and the buffer within its bound.
fn ends_cleanly(bytes: &[u8], cuts: &[usize]) -> Result<(), TestCaseError> {
    for expect in [Expect::default(), checked(file())] {
        let mut r = ResponseReader::new();
        r.reset(expect);
        let all = run_with(&mut r, bytes, &[]);
        prop_assert!(r.buf.capacity() <= MAX_HEAD);
        let mut r = ResponseReader::new();
        r.reset(expect);
        let split = run_with(&mut r, bytes, cuts);
        prop_assert!(r.buf.capacity() <= MAX_HEAD);
        prop_assert_eq!(split.shape(), all.shape());
    }
    Ok(())
}
