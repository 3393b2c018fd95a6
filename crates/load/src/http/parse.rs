//! The HTTP/1.1 response reader, pure and incremental: the client feeds it whatever each read
//! returned and learns when the response ends, how long its body was, whether the connection
//! may carry the next request, and what was wrong when something was.
//!
//! It is built for tens of thousands of responses a second per core, so it copies only what it
//! must: a head or a chunk-size line that arrives split across reads is gathered in one buffer
//! the reader keeps across [`ResponseReader::reset`]s (never over [`MAX_HEAD`] bytes); a head or
//! line that arrives whole is parsed where it lies. Body bytes are counted, not copied, and are
//! looked at only when the caller asked to check them against the file set's content.
//!
//! Framing follows RFC 9112 §6.3; errors are values ([`ResponseError`]), never panics, and a
//! response split at any byte boundaries reads the same as the response fed whole.

use std::fmt;

use super::fileset::FileId;
pub use tcplab_results::http::error_kind::ErrorKind;

/// Most bytes a response head (status line and headers) may take: more is a broken or hostile
/// server, and bounding it bounds the reader's memory.
pub const MAX_HEAD: usize = 16 * 1024;
/// Most header fields a head may have (httparse parses into an array of this many).
pub const MAX_HEADERS: usize = 32;
/// Most bytes of a chunk-size line, extensions included: real servers send a few bytes.
pub const MAX_CHUNK_LINE: usize = 4096;
/// Most bytes of a chunked body's trailer section.
pub const MAX_TRAILERS: u64 = MAX_HEAD as u64;

/// A failed response: its kind, and what exactly was wrong (for the run's error samples).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseError {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// What was wrong, e.g. `Content-Length "12a" is not a number`.
    pub reason: String,
}

impl ResponseError {
    /// An error of `kind` for `reason`.
    pub fn new(kind: ErrorKind, reason: impl Into<String>) -> Self {
        Self {
            kind,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.reason)
    }
}

impl std::error::Error for ResponseError {}

fn malformed(reason: impl Into<String>) -> ResponseError {
    ResponseError::new(ErrorKind::Malformed, reason)
}

fn truncated(reason: impl Into<String>) -> ResponseError {
    ResponseError::new(ErrorKind::Truncated, reason)
}

fn content(reason: impl Into<String>) -> ResponseError {
    ResponseError::new(ErrorKind::Content, reason)
}

/// A complete response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    /// Its status code (any; interim 1xx responses are skipped).
    pub status: u16,
    /// Whether the connection may carry the next request.
    pub keep_alive: bool,
    /// Bytes of body (the payload: chunk framing and trailers not counted).
    pub body_bytes: u64,
    /// Bytes of the last fed slice that belonged to this response; the rest followed it (on a
    /// connection with no request outstanding, the client treats them as Malformed). 0 when
    /// the response ended at [`ResponseReader::eof`].
    pub consumed: usize,
}

/// Where a response stands after a feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Not complete: read more.
    More,
    /// Complete.
    Done(Done),
}

/// What the request expects of a 200 response (other statuses are only framed and counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Expect {
    /// The body's length, if known (a file of the set, or a size the user gave).
    pub size: Option<u64>,
    /// The file of the set requested, if any.
    pub file: Option<FileId>,
    /// Compare every body byte with the file's content (needs `file`; then a body longer than
    /// the file is a Content error even without `size`).
    pub check_content: bool,
    /// The request was HEAD: the response has no body whatever its headers say.
    pub head_request: bool,
}

/// How the body's end is found (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// No body: HEAD, 204, 304.
    Empty,
    /// Content-Length bytes.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// Until the server closes the connection.
    Close,
}

/// What the reader is waiting for.
#[derive(Debug, Clone)]
enum State {
    /// The status line and headers (of an interim or the final response).
    Head,
    /// `left` more bytes of a Content-Length body.
    Length { left: u64 },
    /// A chunk-size line.
    ChunkSize,
    /// `left` more bytes of a chunk's data.
    ChunkData { left: u64 },
    /// The CRLF after a chunk's data; `cr` once the CR was seen.
    ChunkEnd { cr: bool },
    /// Trailer lines up to the empty one: `line` bytes of the current line so far, `total` of
    /// the section, `last` the byte before this feed (to see a CR that ended the last feed).
    Trailer { line: u64, total: u64, last: u8 },
    /// Body bytes until the connection closes.
    Close,
    /// The response completed; feeding more is an error.
    Finished(Done),
    /// The response failed; every later call repeats the error.
    Failed(ResponseError),
}

/// The final head's facts, taken from httparse's borrowed view so the buffer can be released.
#[derive(Debug, Clone, Copy)]
struct HeadInfo {
    status: u16,
    keep_alive: bool,
    framing: Framing,
    length: Option<u64>,
}

/// What a head parse gave.
enum Parsed {
    Partial,
    /// A complete head of `usize` bytes; `None` for an interim 1xx response.
    Complete(usize, Option<HeadInfo>),
}

/// Reads one HTTP/1.1 response at a time; reusable: [`reset`](Self::reset) between responses
/// keeps its buffer, so a connection's reader stops allocating after its first responses.
#[derive(Debug)]
pub struct ResponseReader {
    expect: Expect,
    /// A head or chunk-size line gathered across feeds (empty when none is pending).
    buf: Vec<u8>,
    state: State,
    head_done: bool,
    status: u16,
    keep_alive: bool,
    body_bytes: u64,
    /// The body length a 200 must have.
    want_size: Option<u64>,
    /// The file whose content a 200's body must be.
    check: Option<FileId>,
}

impl Default for ResponseReader {
    fn default() -> Self {
        Self::new()
    }
}

impl ResponseReader {
    /// A reader expecting nothing in particular (call [`reset`](Self::reset) per request).
    pub fn new() -> Self {
        Self {
            expect: Expect::default(),
            buf: Vec::new(),
            state: State::Head,
            head_done: false,
            status: 0,
            keep_alive: false,
            body_bytes: 0,
            want_size: None,
            check: None,
        }
    }

    /// Gets ready for the response to a new request, keeping the buffer's memory.
    pub fn reset(&mut self, expect: Expect) {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        *self = Self {
            expect,
            buf,
            ..Self::new()
        };
    }

    /// Whether the final head (status line + headers) has been read: the client stamps the
    /// first byte itself, this says when the headers were complete.
    pub fn head_done(&self) -> bool {
        self.head_done
    }

    /// The final response's status, once its head is read.
    pub fn status(&self) -> Option<u16> {
        self.head_done.then_some(self.status)
    }

    /// Body bytes read so far.
    pub fn body_bytes(&self) -> u64 {
        self.body_bytes
    }

    /// Feeds the bytes just read. Returns More until the response is complete. Also reports,
    /// via [`head_done`](Self::head_done), whether the head (status line + headers) has been
    /// seen (the client stamps first byte itself). After an error the connection's framing is
    /// unknown: the client should close it.
    pub fn feed(&mut self, data: &[u8]) -> Result<Progress, ResponseError> {
        match &self.state {
            State::Finished(done) => {
                let done = *done;
                if data.is_empty() {
                    return Ok(Progress::Done(Done {
                        consumed: 0,
                        ..done
                    }));
                }
                return Err(self.fail(malformed(format!(
                    "{} bytes after a complete response",
                    data.len()
                ))));
            }
            State::Failed(e) => return Err(e.clone()),
            _ => {}
        }
        match self.step(data) {
            Ok(Some(done)) => {
                self.state = State::Finished(done);
                Ok(Progress::Done(done))
            }
            Ok(None) => Ok(Progress::More),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// The peer closed the connection (read returned 0): completes an until-close body, else
    /// Truncated with how far it got.
    pub fn eof(&mut self) -> Result<Done, ResponseError> {
        let r = match &self.state {
            State::Finished(done) => {
                return Ok(Done {
                    consumed: 0,
                    ..*done
                });
            }
            State::Failed(e) => return Err(e.clone()),
            State::Close => self.finish(0),
            State::Head if self.buf.is_empty() => {
                Err(truncated("connection closed before the response head"))
            }
            State::Head => Err(truncated(format!(
                "connection closed after {} bytes of the response head",
                self.buf.len()
            ))),
            State::Length { left } => Err(truncated(format!(
                "body ended after {} of {} bytes",
                self.body_bytes,
                self.body_bytes.saturating_add(*left)
            ))),
            State::ChunkSize | State::ChunkData { .. } | State::ChunkEnd { .. } => {
                Err(truncated(format!(
                    "chunked body ended after {} bytes, before its last chunk",
                    self.body_bytes
                )))
            }
            State::Trailer { .. } => Err(truncated(format!(
                "chunked body of {} bytes ended inside its trailers",
                self.body_bytes
            ))),
        };
        match r {
            Ok(done) => {
                self.state = State::Finished(done);
                Ok(done)
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    fn fail(&mut self, e: ResponseError) -> ResponseError {
        self.state = State::Failed(e.clone());
        e
    }

    /// Runs the state machine over `data`: `Some` when the response completed in it.
    fn step(&mut self, data: &[u8]) -> Result<Option<Done>, ResponseError> {
        let mut rest = data;
        loop {
            match self.state {
                State::Head => match self.head(rest)? {
                    None => return Ok(None),
                    Some((used, None)) => rest = &rest[used..],
                    Some((used, Some(info))) => {
                        rest = &rest[used..];
                        if self.start_body(info)? {
                            return self.finish(data.len() - rest.len()).map(Some);
                        }
                    }
                },
                State::Length { left } => {
                    let (take, piece) = take(left, rest);
                    self.count(piece)?;
                    rest = &rest[piece.len()..];
                    if take == left {
                        return self.finish(data.len() - rest.len()).map(Some);
                    }
                    self.state = State::Length { left: left - take };
                }
                State::ChunkSize => match self.chunk_size(rest)? {
                    None => return Ok(None),
                    Some((used, size)) => {
                        rest = &rest[used..];
                        if self.body_bytes.checked_add(size).is_none() {
                            return Err(malformed(format!(
                                "chunk of {size} bytes takes the body past 2^64 bytes"
                            )));
                        }
                        self.state = if size == 0 {
                            State::Trailer {
                                line: 0,
                                total: 0,
                                last: 0,
                            }
                        } else {
                            State::ChunkData { left: size }
                        };
                    }
                },
                State::ChunkData { left } => {
                    let (take, piece) = take(left, rest);
                    self.count(piece)?;
                    rest = &rest[piece.len()..];
                    self.state = if take == left {
                        State::ChunkEnd { cr: false }
                    } else {
                        State::ChunkData { left: left - take }
                    };
                }
                State::ChunkEnd { cr } => {
                    let Some(&b) = rest.first() else {
                        return Ok(None);
                    };
                    let want = if cr { b'\n' } else { b'\r' };
                    if b != want {
                        return Err(malformed(format!(
                            "chunk data not followed by CRLF: byte {:?} after body byte {}",
                            char::from(b),
                            self.body_bytes
                        )));
                    }
                    rest = &rest[1..];
                    self.state = if cr {
                        State::ChunkSize
                    } else {
                        State::ChunkEnd { cr: true }
                    };
                }
                State::Trailer { line, total, last } => {
                    if rest.is_empty() {
                        return Ok(None);
                    }
                    let Some(p) = rest.iter().position(|&b| b == b'\n') else {
                        let n = rest.len() as u64;
                        self.state = State::Trailer {
                            line: line.saturating_add(n),
                            total: trailer_total(total, n)?,
                            last: rest[rest.len() - 1],
                        };
                        return Ok(None);
                    };
                    let total = trailer_total(total, p as u64 + 1)?;
                    let before = if p > 0 { rest[p - 1] } else { last };
                    if before != b'\r' {
                        return Err(malformed("trailer line not ended by CRLF"));
                    }
                    rest = &rest[p + 1..];
                    if line.saturating_add(p as u64) == 1 {
                        return self.finish(data.len() - rest.len()).map(Some);
                    }
                    self.state = State::Trailer {
                        line: 0,
                        total,
                        last: b'\n',
                    };
                }
                State::Close => {
                    self.count(rest)?;
                    return Ok(None);
                }
                // `feed` answers for these itself.
                State::Finished(_) | State::Failed(_) => return Ok(None),
            }
            // Every state waits for bytes once the feed is used up: none completes on nothing.
            if rest.is_empty() {
                return Ok(None);
            }
        }
    }

    /// Reads a head from `data`: `None` when all of `data` was taken and the head is not yet
    /// complete, else how many bytes of `data` it took and, for a final response, its facts.
    ///
    /// A head that starts and ends in `data` is parsed in place; otherwise the head so far is
    /// gathered in `buf`. Both paths see at most [`MAX_HEAD`] bytes, so they agree on which
    /// heads are too long however the reads split them.
    fn head(&mut self, data: &[u8]) -> Result<Option<(usize, Option<HeadInfo>)>, ResponseError> {
        let head_request = self.expect.head_request;
        let old = self.buf.len();
        if old == 0 {
            let window = &data[..data.len().min(MAX_HEAD)];
            return match parse_head(window, head_request)? {
                Parsed::Complete(n, info) => Ok(Some((n, info))),
                Parsed::Partial if window.len() == MAX_HEAD => Err(head_too_long()),
                Parsed::Partial => {
                    append(&mut self.buf, data);
                    Ok(None)
                }
            };
        }
        let add = data.len().min(MAX_HEAD - old);
        append(&mut self.buf, &data[..add]);
        match parse_head(&self.buf, head_request)? {
            Parsed::Partial if self.buf.len() >= MAX_HEAD => Err(head_too_long()),
            Parsed::Partial => Ok(None),
            Parsed::Complete(n, info) => {
                // httparse found the prefix incomplete, so the head ends in the new bytes.
                let used = n
                    .checked_sub(old)
                    .filter(|&u| u > 0)
                    .ok_or_else(|| malformed("response head ended inside an earlier read"))?;
                self.buf.clear();
                Ok(Some((used, info)))
            }
        }
    }

    /// Takes the final head's facts; `true` when the response is already complete (no body).
    fn start_body(&mut self, info: HeadInfo) -> Result<bool, ResponseError> {
        self.head_done = true;
        self.status = info.status;
        self.keep_alive = info.keep_alive;
        self.body_bytes = 0;
        let e = self.expect;
        if info.status == 200 {
            let file_size = e.file.filter(|_| e.check_content).map(|f| f.size());
            self.want_size = e.size.or(file_size);
            self.check = e.file.filter(|_| e.check_content && !e.head_request);
        }
        if let (Some(want), Some(len)) = (self.want_size, info.length) {
            if want != len {
                let what = if e.head_request {
                    "Content-Length of"
                } else {
                    "body of"
                };
                return Err(content(format!("{what} {len} bytes, the file has {want}")));
            }
        }
        self.state = match info.framing {
            Framing::Empty => {
                self.want_size = None;
                return Ok(true);
            }
            Framing::Length(0) => return Ok(true),
            Framing::Length(n) => State::Length { left: n },
            Framing::Chunked => State::ChunkSize,
            Framing::Close => State::Close,
        };
        Ok(false)
    }

    /// Reads a chunk-size line: `None` when all of `data` was taken and the line is not yet
    /// complete, else the bytes of `data` it took and the chunk's size. Like [`Self::head`],
    /// parses in place when it can and gathers in `buf` when it must, bounded the same on both.
    fn chunk_size(&mut self, data: &[u8]) -> Result<Option<(usize, u64)>, ResponseError> {
        let old = self.buf.len();
        let window = if old == 0 {
            // httparse takes a line with no digits (or only whitespace) as size 0.
            if data.first().is_some_and(|b| !b.is_ascii_hexdigit()) {
                return Err(self.bad_chunk_line(data));
            }
            &data[..data.len().min(MAX_CHUNK_LINE)]
        } else {
            let add = data.len().min(MAX_CHUNK_LINE - old);
            append(&mut self.buf, &data[..add]);
            &self.buf[..]
        };
        match httparse::parse_chunk_size(window) {
            Ok(httparse::Status::Complete((n, size))) => {
                // httparse skips any byte in an extension, a bare LF included: refuse that,
                // since a body with LFs could otherwise pass for an extension.
                if window[..n.saturating_sub(2)].contains(&b'\n') {
                    return Err(self.bad_chunk_line(&window[..n]));
                }
                let used = n.checked_sub(old).filter(|&u| u > 0);
                let used =
                    used.ok_or_else(|| malformed("chunk-size line ended inside an earlier read"))?;
                self.buf.clear();
                Ok(Some((used, size)))
            }
            Ok(httparse::Status::Partial) if window.len() >= MAX_CHUNK_LINE => Err(malformed(
                format!("chunk-size line over {MAX_CHUNK_LINE} bytes"),
            )),
            Ok(httparse::Status::Partial) => {
                if old == 0 {
                    append(&mut self.buf, data);
                }
                Ok(None)
            }
            Err(httparse::InvalidChunkSize) => Err(self.bad_chunk_line(window)),
        }
    }

    fn bad_chunk_line(&self, line: &[u8]) -> ResponseError {
        malformed(format!(
            "bad chunk size line \"{}\" after body byte {}",
            shown(line),
            self.body_bytes
        ))
    }

    /// Counts body bytes, checking them against the file when asked.
    fn count(&mut self, piece: &[u8]) -> Result<(), ResponseError> {
        if let Some(file) = self.check {
            check_content(file, self.body_bytes, piece)?;
        }
        self.body_bytes = self
            .body_bytes
            .checked_add(piece.len() as u64)
            .ok_or_else(|| malformed("body past 2^64 bytes"))?;
        Ok(())
    }

    /// The response is complete after `consumed` bytes of the last feed.
    fn finish(&self, consumed: usize) -> Result<Done, ResponseError> {
        if let Some(want) = self.want_size {
            if self.body_bytes != want {
                return Err(content(format!(
                    "body of {} bytes, the file has {want}",
                    self.body_bytes
                )));
            }
        }
        Ok(Done {
            status: self.status,
            keep_alive: self.keep_alive,
            body_bytes: self.body_bytes,
            consumed,
        })
    }
}

/// Up to `left` bytes of `data`: how many (as u64) and the slice.
fn take(left: u64, data: &[u8]) -> (u64, &[u8]) {
    let n = usize::try_from(left).map_or(data.len(), |l| l.min(data.len()));
    (n as u64, &data[..n])
}

fn trailer_total(total: u64, add: u64) -> Result<u64, ResponseError> {
    total
        .checked_add(add)
        .filter(|&t| t <= MAX_TRAILERS)
        .ok_or_else(|| malformed(format!("trailers over {MAX_TRAILERS} bytes")))
}

fn head_too_long() -> ResponseError {
    malformed(format!("head over {MAX_HEAD} bytes"))
}

/// Appends to the gathering buffer, growing it at most to [`MAX_HEAD`] (callers never gather
/// more), so a reader's memory stays bounded whatever the peer sends.
fn append(buf: &mut Vec<u8>, bytes: &[u8]) {
    let need = buf.len() + bytes.len();
    if need > buf.capacity() {
        let target = need.max(buf.capacity().saturating_mul(2).clamp(256, MAX_HEAD));
        buf.reserve_exact(target - buf.len());
    }
    buf.extend_from_slice(bytes);
}

/// Whether `piece` is `file`'s content at `offset`; bytes past the file's end are left to the
/// size check. On a mismatch, finds the first differing byte so the error can name it.
fn check_content(file: FileId, offset: u64, piece: &[u8]) -> Result<(), ResponseError> {
    let size = file.size();
    if offset >= size {
        return Ok(());
    }
    let n = usize::try_from(size - offset).map_or(piece.len(), |n| n.min(piece.len()));
    let piece = &piece[..n];
    if file.matches(offset, piece) {
        return Ok(());
    }
    let mut want = [0u8; 256];
    for (i, got) in piece.chunks(want.len()).enumerate() {
        let at = offset + (i * want.len()) as u64;
        let want = &mut want[..got.len()];
        file.fill(at, want);
        if let Some(j) = got.iter().zip(want.iter()).position(|(g, w)| g != w) {
            return Err(content(format!(
                "body byte {} is {:?}, {file} has {:?}",
                at + j as u64,
                char::from(got[j]),
                char::from(want[j])
            )));
        }
    }
    Ok(())
}

/// Parses a head with httparse and reads its framing.
fn parse_head(buf: &[u8], head_request: bool) -> Result<Parsed, ResponseError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(buf) {
        Ok(httparse::Status::Partial) => Ok(Parsed::Partial),
        Ok(httparse::Status::Complete(n)) => {
            Ok(Parsed::Complete(n, head_info(&resp, head_request)?))
        }
        Err(httparse::Error::TooManyHeaders) => {
            Err(malformed(format!("too many headers (over {MAX_HEADERS})")))
        }
        Err(e) => Err(malformed(format!("response head: {e}"))),
    }
}

/// The framing and connection facts of a parsed head; `None` for an interim 1xx response.
fn head_info(
    resp: &httparse::Response<'_, '_>,
    head_request: bool,
) -> Result<Option<HeadInfo>, ResponseError> {
    let (Some(status), Some(version)) = (resp.code, resp.version) else {
        return Err(malformed("response head without a status line"));
    };
    match status {
        0..=99 => return Err(malformed(format!("status code {status:03} is below 100"))),
        101 => {
            return Err(malformed(
                "101 Switching Protocols, but the request asked for no upgrade",
            ));
        }
        // Interim responses (100 Continue, 103 Early Hints) have no body: the final follows.
        100..=199 => return Ok(None),
        _ => {}
    }
    let mut length: Option<u64> = None;
    let mut te_seen = false;
    let mut te_last: Option<&[u8]> = None;
    let (mut close, mut keep) = (false, false);
    for h in resp.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            // A list of equal values ("5, 5") is one length (RFC 9110 §8.6).
            for item in h.value.split(|&b| b == b',') {
                let n = parse_length(trim(item), h.value)?;
                match length {
                    Some(m) if m != n => {
                        return Err(malformed(format!("Content-Lengths {m} and {n} disagree")));
                    }
                    _ => length = Some(n),
                }
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            te_seen = true;
            for item in h.value.split(|&b| b == b',').map(trim) {
                if !item.is_empty() {
                    te_last = Some(item);
                }
            }
        } else if name.eq_ignore_ascii_case("connection") {
            for item in h.value.split(|&b| b == b',').map(trim) {
                close |= item.eq_ignore_ascii_case(b"close");
                keep |= item.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    if te_seen && length.is_some() {
        // RFC 9112 §6.3: a request-smuggling or response-splitting sign, handled as an error.
        return Err(malformed("both Transfer-Encoding and Content-Length"));
    }
    if te_seen && te_last.is_none() {
        return Err(malformed("Transfer-Encoding names no coding"));
    }
    let chunked = te_last.is_some_and(|c| c.eq_ignore_ascii_case(b"chunked"));
    let framing = if head_request || status == 204 || status == 304 {
        Framing::Empty
    } else if chunked {
        Framing::Chunked
    } else if te_seen {
        // A response whose final coding is not chunked ends at close (RFC 9112 §6.3 item 4).
        Framing::Close
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        Framing::Close
    };
    let keep_alive = match version {
        1 => !close,
        _ => keep && !close,
    };
    // An until-close body ends the connection, and Transfer-Encoding in HTTP/1.0 means framing
    // that cannot be trusted past this response (RFC 9112 §6.1).
    let keep_alive = keep_alive && framing != Framing::Close && !(te_seen && version == 0);
    Ok(Some(HeadInfo {
        status,
        keep_alive,
        framing,
        length,
    }))
}

/// One Content-Length value: digits only, fitting u64.
fn parse_length(item: &[u8], whole: &[u8]) -> Result<u64, ResponseError> {
    if item.is_empty() || !item.iter().all(u8::is_ascii_digit) {
        return Err(malformed(format!(
            "Content-Length \"{}\" is not a number",
            shown(whole)
        )));
    }
    item.iter()
        .try_fold(0u64, |n, &d| {
            n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        })
        .ok_or_else(|| malformed(format!("Content-Length \"{}\" is too large", shown(whole))))
}

/// A header value for a message: escaped, and cut after 40 bytes (a server may send kilobytes).
fn shown(value: &[u8]) -> String {
    let cut = &value[..value.len().min(40)];
    let more = if cut.len() < value.len() { "…" } else { "" };
    format!("{}{more}", cut.escape_ascii())
}

/// A list element without its optional whitespace.
fn trim(s: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = s.iter().position(|b| !is_ows(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|b| !is_ows(b)).map_or(start, |e| e + 1);
    &s[start..end]
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
