//! The store's packed sample encoding: what a run's raw samples look like inside the database.
//!
//! The samples a workload keeps are the text of `tcplab_results::samples` (docs/samples.md), and
//! that text is what [`crate::Store::samples`] hands back. Writing 100,000 text lines per run and
//! deflating them cost more than a tenth of a sweep's time, so the store keeps them *packed*
//! instead and rebuilds the text only when a report asks:
//!
//! ```text
//! "TLSP" version                        magic and format version (1, or 2 with a 0x03 chunk)
//! chunk*                                one per section (or run of text)
//!   0x01 len bytes                      text, copied verbatim
//!   0x02 len header ncols nrows         a numeric section: its `# section=...` line, then
//!        (len zigzag-delta*)×ncols      each column: its length and the differences between
//!                                       consecutive values as zigzag LEB128 varints
//!   0x03 len header ncols nrows         a section with label columns (version 2): each column
//!        (0x00 len zigzag-delta*        numbers as in 0x02, or
//!        | 0x01 nlabels (len bytes)*    its distinct labels, then each row's label index as
//!          len zigzag-delta*            numbers are (an http request's class and error), or
//!        | 0x02 len zigzag-delta*)×ncols  numbers that may be `-` in any row: value + 1, 0 for
//!                                       `-` (an http request's stamps of what did not happen)
//! ```
//! Per-message timestamps a microsecond or two apart pack into two bytes each instead of the
//! eight digits and a comma of the text. Rows past a column's length print `-`, exactly as the
//! text writer prints a missing value. [`unpack`] rebuilds byte-for-byte what
//! `tcplab_results::samples::write` writes (the tests hold them to that), and
//! [`crate::store`] compresses the packed bytes with LZ4.

use std::borrow::Cow;
use std::io::Write;

use tcplab_results::Report;
use tcplab_results::stamps::Stamps;

/// First bytes of a packed blob.
pub const MAGIC: &[u8; 4] = b"TLSP";
/// The newest packed format version, the one this tcplab reads up to. A blob is written as
/// version 1 unless it holds a label table (an http run's): readers from before label tables
/// still read every other run, and refuse those by their version instead of a bad chunk.
pub const VERSION: u8 = 2;
/// The version of a blob without label tables.
const PLAIN_VERSION: u8 = 1;

const TEXT: u8 = 1;
const TABLE: u8 = 2;
const LABELLED: u8 = 3;

/// Column types inside a [`LABELLED`] chunk.
const NUMBERS: u8 = 0;
const LABELS: u8 = 1;
const OPTIONAL: u8 = 2;

/// The stamps as a slice: borrowed when in memory, read back when a long run stored them.
fn held(stamps: &Stamps) -> std::io::Result<Cow<'_, [u64]>> {
    match stamps.as_slice() {
        Some(v) => Ok(Cow::Borrowed(v)),
        None => stamps.to_vec().map(Cow::Owned),
    }
}

/// Appends the samples of `report` to `out` in the packed format (the magic goes first when
/// `out` is empty, so several workloads' samples concatenate like their text files do).
pub fn pack(report: &Report, out: &mut Vec<u8>) -> std::io::Result<()> {
    if out.is_empty() {
        out.extend_from_slice(MAGIC);
        out.push(PLAIN_VERSION);
    }
    match report {
        Report::Msgs(r) => {
            text(out, "# tcplab-samples 1 workload=msgs\n");
            for run in &r.runs {
                let t0 = run.send_ns.first().unwrap_or(0);
                let header = format!(
                    "# section=message size={} t0_ns={t0} columns=seq,send_ns,recv_ns\n",
                    run.size
                );
                let (send, recv) = (held(&run.send_ns)?, held(&run.recv_ns)?);
                table(out, &header, &[(&send, t0), (&recv, t0)]);
            }
        }
        Report::Rr(r) => {
            text(out, "# tcplab-samples 1 workload=rr\n");
            for p in &r.points {
                let t0 = p.samples.first().map_or(0, |s| s.intended_ns);
                let header = format!(
                    "# section=transaction req={} resp={} t0_ns={t0} columns=seq,intended_ns,sent_ns,done_ns\n",
                    p.req, p.resp
                );
                let col = |f: fn(&tcplab_results::rr::RrSample) -> u64| -> Vec<u64> {
                    p.samples.iter().map(|s| f(s).saturating_sub(t0)).collect()
                };
                let cols = [
                    col(|s| s.intended_ns),
                    col(|s| s.sent_ns),
                    col(|s| s.done_ns),
                ];
                table(out, &header, &[(&cols[0], 0), (&cols[1], 0), (&cols[2], 0)]);
            }
        }
        Report::Crr(r) => {
            text(out, "# tcplab-samples 1 workload=crr\n");
            let t0 = r.samples.first().map_or(0, |s| s.start_ns);
            let header = format!(
                "# section=connection t0_ns={t0} columns=seq,start_ns,connected_ns,done_ns\n"
            );
            let col = |f: fn(&tcplab_results::crr::CrrSample) -> u64| -> Vec<u64> {
                r.samples.iter().map(|s| f(s).saturating_sub(t0)).collect()
            };
            let cols = [
                col(|s| s.start_ns),
                col(|s| s.connected_ns),
                col(|s| s.done_ns),
            ];
            table(out, &header, &[(&cols[0], 0), (&cols[1], 0), (&cols[2], 0)]);
            let mut tw = String::from("# section=time_wait columns=t_s,count\n");
            for (t, n) in &r.time_wait.samples {
                tw.push_str(&format!("{t:.6},{n}\n"));
            }
            text(out, &tw);
        }
        Report::Http(r) => pack_http(r, out),
        // Interval samples are a few per second, rrul's probes a hundred: their text is small,
        // and the text writer stays the one place that formats them.
        Report::Stream(_) | Report::Rrul(_) => {
            let mut buf = Vec::new();
            tcplab_results::samples::write(&mut buf, report)?;
            text_bytes(out, &buf);
        }
    }
    Ok(())
}

/// An http run: every request as `tcplab_results::samples` writes it (stamps relative to the
/// first intended start, `-` for what did not happen; class and error as labels), then the
/// client's and the server's TIME_WAIT samples as text.
fn pack_http(r: &tcplab_results::http::result::HttpResult, out: &mut Vec<u8>) {
    use tcplab_results::http::error_kind::ErrorKind;
    use tcplab_results::http::result::{HttpSample, NONE};
    text(out, "# tcplab-samples 1 workload=http\n");
    let t0 = r.samples.first().map_or(0, |s| s.intended_ns);
    let header = format!(
        "# section=request t0_ns={t0} columns=seq,intended_ns,start_ns,connected_ns,first_byte_ns,done_ns,status,class,error,bytes\n"
    );
    // A stamp of 0 (it did not happen) prints `-`; the others, offset by one ([`OPTIONAL`]).
    let stamp = |f: fn(&HttpSample) -> u64| -> Vec<u64> {
        r.samples
            .iter()
            .map(|s| match f(s) {
                0 => 0,
                v => v.saturating_sub(t0) + 1,
            })
            .collect()
    };
    let num = |f: fn(&HttpSample) -> u64| -> Vec<u64> { r.samples.iter().map(f).collect() };
    let cols = [
        stamp(|s| s.intended_ns),
        stamp(|s| s.start_ns),
        stamp(|s| s.connected_ns),
        stamp(|s| s.first_byte_ns),
        stamp(|s| s.done_ns),
        num(|s| u64::from(s.status)),
        num(|s| u64::from(s.bytes)),
    ];
    let class = labels_of(r.samples.iter().map(|s| s.class), |c| match c {
        NONE => "-".into(),
        c => c.to_string(),
    });
    let error = labels_of(r.samples.iter().map(|s| s.error), |e| {
        ErrorKind::ALL
            .get(usize::from(e))
            .map_or("-", |k| k.name())
            .into()
    });
    let (o, n) = (
        |i: usize| Column::Optional(&cols[i]),
        |i: usize| Column::Numbers(&cols[i], 0),
    );
    labelled_table(
        out,
        &header,
        &[o(0), o(1), o(2), o(3), o(4), n(5), class, error, n(6)],
    );
    let mut tw = String::from("# section=time_wait host=client columns=t_s,count\n");
    for (t, n) in &r.time_wait.samples {
        tw.push_str(&format!("{t:.6},{n}\n"));
    }
    if let Some(server) = &r.server_time_wait {
        tw.push_str("# section=time_wait host=server columns=t_s,count\n");
        for (t, n) in &server.samples {
            tw.push_str(&format!("{t:.6},{n}\n"));
        }
    }
    text(out, &tw);
}

/// A label column of byte-sized codes: each distinct code's label once, in order of first
/// appearance, and each row's index into them.
fn labels_of(codes: impl Iterator<Item = u8>, label: impl Fn(u8) -> String) -> Column<'static> {
    let mut slot = [u64::MAX; 256];
    let mut labels = Vec::new();
    let index = codes
        .map(|c| {
            let s = &mut slot[usize::from(c)];
            if *s == u64::MAX {
                *s = labels.len() as u64;
                labels.push(label(c));
            }
            *s
        })
        .collect();
    Column::Labels(labels, index)
}

/// True when `blob` (decompressed) is in the packed format.
pub fn is_packed(blob: &[u8]) -> bool {
    blob.len() > MAGIC.len() && blob.starts_with(MAGIC)
}

/// The most text a blob of `packed` bytes may unpack to. Every row costs at least one byte
/// per column and prints at most a row number and a 20-digit value or a short label per
/// column, well under 64 bytes a packed byte; more means a damaged length (a table claiming a
/// million rows in five bytes), refused before it fills memory.
pub fn max_unpacked(packed: usize) -> usize {
    packed.saturating_mul(64).saturating_add(1 << 20)
}

/// Rebuilds the samples text from a packed blob.
pub fn unpack(blob: &[u8]) -> Result<Vec<u8>, String> {
    if !is_packed(blob) {
        return Err("not a packed samples blob (no TLSP magic)".into());
    }
    if !(PLAIN_VERSION..=VERSION).contains(&blob[MAGIC.len()]) {
        return Err(format!(
            "packed samples version {}, this tcplab reads {PLAIN_VERSION} to {VERSION}",
            blob[MAGIC.len()]
        ));
    }
    let mut r = Reader {
        buf: blob,
        pos: MAGIC.len() + 1,
    };
    let mut out = Vec::with_capacity(blob.len() * 5);
    let limit = max_unpacked(blob.len());
    while r.pos < blob.len() {
        match r.byte()? {
            TEXT => {
                let len = r.len()?;
                out.extend_from_slice(r.take(len)?);
            }
            TABLE => unpack_table(&mut r, &mut out, false, limit)?,
            LABELLED => unpack_table(&mut r, &mut out, true, limit)?,
            tag => return Err(format!("unknown chunk tag {tag} at byte {}", r.pos - 1)),
        }
    }
    Ok(out)
}

/// How a column of a table prints.
enum Kind<'a> {
    /// Its numbers.
    Numbers,
    /// `-` for 0, else the number less one.
    Optional,
    /// The label each number indexes.
    Labels(Vec<&'a [u8]>),
}

/// A [`TABLE`] chunk, or with `labelled` a [`LABELLED`] one, back to its text.
fn unpack_table(
    r: &mut Reader<'_>,
    out: &mut Vec<u8>,
    labelled: bool,
    limit: usize,
) -> Result<(), String> {
    let header_len = r.len()?;
    out.extend_from_slice(r.take(header_len)?);
    let ncols = r.len()?;
    let nrows = r.len()?;
    let mut cols = Vec::with_capacity(ncols);
    let mut kinds: Vec<Kind<'_>> = Vec::with_capacity(ncols);
    for _ in 0..ncols {
        kinds.push(match labelled {
            false => Kind::Numbers,
            true => match r.byte()? {
                NUMBERS => Kind::Numbers,
                OPTIONAL => Kind::Optional,
                LABELS => {
                    let n = r.len()?;
                    let mut labels = Vec::with_capacity(n.min(256));
                    for _ in 0..n {
                        let len = r.len()?;
                        labels.push(r.take(len)?);
                    }
                    Kind::Labels(labels)
                }
                t => return Err(format!("unknown column type {t} at byte {}", r.pos - 1)),
            },
        });
        let len = r.len()?;
        if len > nrows {
            return Err(format!(
                "a column of {len} values in a table of {nrows} rows"
            ));
        }
        let mut col = Vec::with_capacity(len);
        let mut prev = 0i128;
        for _ in 0..len {
            prev += i128::from(unzigzag(r.varint()?));
            col.push(u64::try_from(prev).map_err(|_| "a value out of range".to_string())?);
        }
        cols.push(col);
    }
    for i in 0..nrows {
        if out.len() > limit {
            return Err(format!(
                "a table of {nrows} rows unpacks to more than {limit} bytes: its length is damaged"
            ));
        }
        // Writing into a Vec cannot fail.
        let _ = write!(out, "{i}");
        for (col, kind) in cols.iter().zip(&kinds) {
            match (col.get(i), kind) {
                (Some(v), Kind::Numbers) => {
                    let _ = write!(out, ",{v}");
                }
                (Some(0), Kind::Optional) => out.extend_from_slice(b",-"),
                (Some(v), Kind::Optional) => {
                    let _ = write!(out, ",{}", v - 1);
                }
                (Some(&v), Kind::Labels(labels)) => {
                    let label = usize::try_from(v)
                        .ok()
                        .and_then(|v| labels.get(v))
                        .ok_or_else(|| format!("label {v} of {} in row {i}", labels.len()))?;
                    out.push(b',');
                    out.extend_from_slice(label);
                }
                (None, _) => out.extend_from_slice(b",-"),
            }
        }
        out.push(b'\n');
    }
    Ok(())
}

fn text(out: &mut Vec<u8>, s: &str) {
    text_bytes(out, s.as_bytes());
}

fn text_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.push(TEXT);
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A numeric section; each column is `(values, t0)` and is written as `value - t0` (saturating
/// at zero), computed on the fly rather than in a copy of the column.
fn table(out: &mut Vec<u8>, header: &str, cols: &[(&[u64], u64)]) {
    out.push(TABLE);
    put_varint(out, header.len() as u64);
    out.extend_from_slice(header.as_bytes());
    put_varint(out, cols.len() as u64);
    put_varint(
        out,
        cols.iter().map(|c| c.0.len()).max().unwrap_or(0) as u64,
    );
    for &(col, t0) in cols {
        put_column(out, col, t0);
    }
}

/// A column of a section with labels.
enum Column<'a> {
    /// Numbers, each written as `value - t0` (saturating at zero).
    Numbers(&'a [u64], u64),
    /// Numbers that may be missing in any row: 0 prints `-`, any other value that less one.
    Optional(&'a [u64]),
    /// The distinct labels, and each row's index into them.
    Labels(Vec<String>, Vec<u64>),
}

/// A section with label columns; raises the blob's version to [`VERSION`], since a reader
/// before label tables cannot read it.
fn labelled_table(out: &mut Vec<u8>, header: &str, cols: &[Column<'_>]) {
    out[MAGIC.len()] = VERSION;
    out.push(LABELLED);
    put_varint(out, header.len() as u64);
    out.extend_from_slice(header.as_bytes());
    put_varint(out, cols.len() as u64);
    let rows = cols.iter().map(|c| match c {
        Column::Numbers(v, _) | Column::Optional(v) => v.len(),
        Column::Labels(_, v) => v.len(),
    });
    put_varint(out, rows.max().unwrap_or(0) as u64);
    for col in cols {
        match col {
            Column::Numbers(v, t0) => {
                out.push(NUMBERS);
                put_column(out, v, *t0);
            }
            Column::Optional(v) => {
                out.push(OPTIONAL);
                put_column(out, v, 0);
            }
            Column::Labels(labels, index) => {
                out.push(LABELS);
                put_varint(out, labels.len() as u64);
                for l in labels {
                    put_varint(out, l.len() as u64);
                    out.extend_from_slice(l.as_bytes());
                }
                put_column(out, index, 0);
            }
        }
    }
}

/// One column: its length, then the differences between consecutive `value - t0`.
fn put_column(out: &mut Vec<u8>, col: &[u64], t0: u64) {
    out.reserve(col.len() * 2 + 10);
    put_varint(out, col.len() as u64);
    let mut prev = 0i128;
    for &v in col {
        let v = i128::from(v.saturating_sub(t0));
        let d = v - prev;
        prev = v;
        // Values are ns offsets within one run: a difference always fits in an i64.
        put_varint(out, zigzag(i64::try_from(d).unwrap_or(i64::MAX)));
    }
}

/// Maps signed to unsigned so small magnitudes of either sign stay short (protobuf's zigzag).
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// LEB128: seven bits per byte, high bit set on every byte but the last.
#[inline]
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    if v < 0x4000 {
        // One or two bytes: nearly every stamp difference, without the loop.
        if v < 0x80 {
            out.push(v as u8);
        } else {
            out.extend_from_slice(&[(v as u8) | 0x80, (v >> 7) as u8]);
        }
        return;
    }
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Result<u8, String> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| format!("truncated at byte {}", self.pos))?;
        self.pos += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!(
            "a varint longer than 10 bytes at byte {}",
            self.pos
        ))
    }

    /// A length, checked against what is left so a damaged blob cannot ask for a huge buffer.
    fn len(&mut self) -> Result<usize, String> {
        let v = self.varint()?;
        usize::try_from(v)
            .ok()
            .filter(|&n| n <= self.buf.len().saturating_mul(8).max(1 << 20))
            .ok_or_else(|| format!("an implausible length {v} at byte {}", self.pos))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| format!("truncated: {n} bytes wanted at byte {}", self.pos))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcplab_results::crr::{CrrResult, CrrSample};
    use tcplab_results::msgs::{MsgsResult, MsgsRun};
    use tcplab_results::rr::{RrPoint, RrResult, RrSample};

    fn text_of(report: &Report) -> String {
        let mut v = Vec::new();
        tcplab_results::samples::write(&mut v, report).unwrap();
        String::from_utf8(v).unwrap()
    }

    fn roundtrip(report: &Report) -> (String, usize) {
        let mut packed = Vec::new();
        pack(report, &mut packed).unwrap();
        (
            String::from_utf8(unpack(&packed).unwrap()).unwrap(),
            packed.len(),
        )
    }

    fn msgs(n: u64) -> Report {
        let t0 = 7_000_000_000u64;
        let send: Vec<u64> = (0..n).map(|i| t0 + i * 1_450 + (i * 7919) % 300).collect();
        // The receiver got fewer messages than were sent: the tail prints `-`.
        let recv: Vec<u64> = send
            .iter()
            .take(n as usize - 3)
            .map(|s| s + 40_000 + (s % 977))
            .collect();
        Report::Msgs(MsgsResult {
            runs: vec![MsgsRun {
                size: 1,
                send_ns: send.into(),
                recv_ns: recv.into(),
                ..Default::default()
            }],
            ..Default::default()
        })
    }

    #[test]
    fn msgs_unpack_to_the_text_writers_bytes_and_pack_small() {
        let report = msgs(100_000);
        let want = text_of(&report);
        let (got, packed) = roundtrip(&report);
        assert_eq!(got, want);
        assert!(got.contains("\n99999,") && got.ends_with(",-\n"), "tail");
        // Two varint bytes per timestamp (deltas of 1-2 µs), against ~25 text bytes per row.
        assert!(packed < 100_000 * 5, "packed {packed} bytes");
        assert!(
            want.len() > packed * 4,
            "text {} vs packed {packed}",
            want.len()
        );
    }

    #[test]
    fn rr_crr_and_several_workloads_concatenate_like_text_files() {
        let rr = Report::Rr(RrResult {
            points: vec![RrPoint {
                req: 64,
                resp: 64,
                samples: (0..500u64)
                    .map(|i| RrSample {
                        intended_ns: 1_000 + i * 25_000,
                        sent_ns: 1_100 + i * 25_000,
                        done_ns: 20_000 + i * 25_000 + i % 13,
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        });
        let mut crr = CrrResult {
            samples: (0..300u64)
                .map(|i| CrrSample {
                    start_ns: 5 + i * 90_000,
                    connected_ns: 30_000 + i * 90_000,
                    done_ns: 70_000 + i * 90_000,
                })
                .collect(),
            ..Default::default()
        };
        crr.time_wait.samples = vec![(0.1, 12), (0.2, 250)];
        let crr = Report::Crr(crr);
        let mut packed = Vec::new();
        for r in [&rr, &crr, &msgs(50)] {
            pack(r, &mut packed).unwrap();
        }
        let want = text_of(&rr) + &text_of(&crr) + &text_of(&msgs(50));
        assert_eq!(String::from_utf8(unpack(&packed).unwrap()).unwrap(), want);
    }

    fn http() -> Report {
        use tcplab_results::http::result::{HttpResult, HttpSample, NONE};
        let t0 = 9_000_000_000u64;
        let samples = (0..2_000u64)
            .map(|i| {
                let start = t0 + i * 700_000;
                // Every 7th request reused its connection (no connect), every 50th failed
                // (a reset: no response), every 333rd asked for a path outside the set.
                let (reused, failed) = (i % 7 == 3, i % 50 == 49);
                HttpSample {
                    intended_ns: start,
                    start_ns: start + 2_000,
                    connected_ns: if reused { 0 } else { start + 60_000 + i % 11 },
                    first_byte_ns: if failed { 0 } else { start + 250_000 + i % 97 },
                    done_ns: start + 400_000 + (i * 31) % 5_000,
                    status: if failed { 0 } else { 200 },
                    class: if i % 333 == 0 { NONE } else { (i % 4) as u8 },
                    error: if failed { 1 } else { NONE },
                    bytes: if failed {
                        0
                    } else {
                        102 + (i % 9) as u32 * 1024
                    },
                }
            })
            .collect();
        let mut r = HttpResult {
            samples,
            ..Default::default()
        };
        r.time_wait.samples = vec![(0.1, 40), (0.2, 900)];
        let mut server = r.time_wait.clone();
        server.samples = vec![(0.1, 2)];
        r.server_time_wait = Some(server);
        Report::Http(r)
    }

    #[test]
    fn http_requests_unpack_to_the_text_writers_bytes_labels_and_all() {
        let report = http();
        let want = text_of(&report);
        let (got, packed) = roundtrip(&report);
        assert_eq!(got, want);
        assert!(
            got.contains(",reset,0\n") && got.contains(",200,-,-,"),
            "labels"
        );
        assert!(
            got.contains("\n0,0,2000,") && got.contains("\n3,2100000,2102000,-,2350003,"),
            "stamps, and `-` for a connect that did not happen"
        );
        assert!(got.contains("host=server"), "the server's TIME_WAIT");
        assert!(
            want.len() > packed * 3,
            "text {} vs packed {packed}",
            want.len()
        );
        // Only a blob with a label table needs a reader of version 2; the others stay 1.
        let mut blob = Vec::new();
        pack(&msgs(10), &mut blob).unwrap();
        assert_eq!(blob[4], 1);
        pack(&report, &mut blob).unwrap();
        assert_eq!(blob[4], 2);
        let both = String::from_utf8(unpack(&blob).unwrap()).unwrap();
        assert_eq!(both, text_of(&msgs(10)) + &want);
        // An http run with no request (every connect failed before a sample) still packs.
        let empty = Report::Http(Default::default());
        assert_eq!(roundtrip(&empty).0, text_of(&empty));
    }

    #[test]
    fn damaged_label_tables_are_errors_not_panics() {
        let mut blob = Vec::new();
        pack(&http(), &mut blob).unwrap();
        for cut in [6, 30, 60, blob.len() / 2, blob.len() - 1] {
            assert!(unpack(&blob[..cut]).is_err(), "cut at {cut}");
        }
        let mut blob = MAGIC.to_vec();
        blob.push(PLAIN_VERSION);
        let header = "# section=x columns=seq,a\n";
        labelled_table(
            &mut blob,
            header,
            &[Column::Labels(vec!["a".into()], vec![0, 1])],
        );
        assert_eq!(blob[4], VERSION);
        let e = unpack(&blob).unwrap_err();
        assert!(e.contains("label 1 of 1 in row 1"), "{e}");
        // The column type byte follows the chunk tag, header, ncols and nrows.
        let at = MAGIC.len() + 1 + 1 + 1 + header.len() + 2;
        blob[at] = 7;
        let e = unpack(&blob).unwrap_err();
        assert!(e.contains("unknown column type 7"), "{e}");
    }

    #[test]
    fn stream_samples_are_kept_as_their_text() {
        let report = Report::Stream(Default::default());
        assert_eq!(roundtrip(&report).0, text_of(&report));
    }

    #[test]
    fn damaged_blobs_are_errors_not_panics() {
        let mut packed = Vec::new();
        pack(&msgs(100), &mut packed).unwrap();
        for cut in [3, 10, 45, packed.len() - 1] {
            assert!(unpack(&packed[..cut]).is_err(), "cut at {cut}");
        }
        assert!(unpack(b"# tcplab-samples 1").is_err());
        let mut bad = packed.clone();
        bad[4] = 9;
        assert!(unpack(&bad).unwrap_err().contains("version 9"));
        bad[4] = 2;
        assert_eq!(
            unpack(&bad),
            unpack(&packed),
            "version 2 reads version 1's chunks"
        );
        assert_eq!(zigzag(-1), 1);
        assert_eq!(unzigzag(zigzag(i64::MIN)), i64::MIN);
        assert_eq!(unzigzag(zigzag(123_456_789)), 123_456_789);
    }
}
