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
                stamp_table(out, &header, &[&run.send_ns, &run.recv_ns], t0)?;
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
    let rows = cols.iter().map(|c| c.0.len()).max().unwrap_or(0);
    table_head(out, header, cols.len(), rows);
    for &(col, t0) in cols {
        put_column(out, col.len(), col.iter().copied(), t0);
    }
}

/// A numeric section of stamp columns, each written as `stamp - t0`. A long run's stamps are
/// read from their file a chunk at a time as they are packed, never copied whole into memory;
/// a read error fails the packing.
fn stamp_table(out: &mut Vec<u8>, header: &str, cols: &[&Stamps], t0: u64) -> std::io::Result<()> {
    let rows = cols.iter().map(|c| c.len()).max().unwrap_or(0);
    table_head(out, header, cols.len(), rows);
    for col in cols {
        let mut stamps = col.iter();
        put_column(out, col.len(), stamps.by_ref(), t0);
        stamps.finish()?;
    }
    Ok(())
}

fn table_head(out: &mut Vec<u8>, header: &str, ncols: usize, nrows: usize) {
    out.push(TABLE);
    put_varint(out, header.len() as u64);
    out.extend_from_slice(header.as_bytes());
    put_varint(out, ncols as u64);
    put_varint(out, nrows as u64);
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
                put_column(out, v.len(), v.iter().copied(), *t0);
            }
            Column::Optional(v) => {
                out.push(OPTIONAL);
                put_column(out, v.len(), v.iter().copied(), 0);
            }
            Column::Labels(labels, index) => {
                out.push(LABELS);
                put_varint(out, labels.len() as u64);
                for l in labels {
                    put_varint(out, l.len() as u64);
                    out.extend_from_slice(l.as_bytes());
                }
                put_column(out, index.len(), index.iter().copied(), 0);
            }
        }
    }
}

/// One column: its length, then the differences between consecutive `value - t0`.
/// A column of `len` values (the iterator yields exactly that many, or the caller fails the
/// packing when it could not).
fn put_column(out: &mut Vec<u8>, len: usize, values: impl Iterator<Item = u64>, t0: u64) {
    out.reserve(len * 2 + 10);
    put_varint(out, len as u64);
    let mut prev = 0i128;
    for v in values {
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

mod read;

#[cfg(test)]
use read::unzigzag;
pub use read::{Part, TableView, Values, is_packed, max_unpacked, parts, unpack};

#[cfg(test)]
mod tests;
