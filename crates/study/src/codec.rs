//! The store's packed sample encoding: what a run's raw samples look like inside the database.
//!
//! The samples a workload keeps are the text of `tcplab_load::samples` (docs/samples.md), and
//! that text is what [`crate::Store::samples`] hands back. Writing 100,000 text lines per run and
//! deflating them cost more than a tenth of a sweep's time, so the store keeps them *packed*
//! instead and rebuilds the text only when a report asks:
//!
//! ```text
//! "TLSP" 1                              magic and format version
//! chunk*                                one per section (or run of text)
//!   0x01 len bytes                      text, copied verbatim
//!   0x02 len header ncols nrows         a numeric section: its `# section=...` line, then
//!        (len zigzag-delta*)×ncols      each column: its length and the differences between
//!                                       consecutive values as zigzag LEB128 varints
//! ```
//! Per-message timestamps a microsecond or two apart pack into two bytes each instead of the
//! eight digits and a comma of the text. Rows past a column's length print `-`, exactly as the
//! text writer prints a missing value. [`unpack`] rebuilds byte-for-byte what
//! `tcplab_load::samples::write` writes (the tests hold them to that), and
//! [`crate::store`] compresses the packed bytes with LZ4.

use std::io::Write;

use tcplab_load::Report;

/// First bytes of a packed blob.
pub const MAGIC: &[u8; 4] = b"TLSP";
/// Packed format version.
pub const VERSION: u8 = 1;

const TEXT: u8 = 1;
const TABLE: u8 = 2;

/// Appends the samples of `report` to `out` in the packed format (the magic goes first when
/// `out` is empty, so several workloads' samples concatenate like their text files do).
pub fn pack(report: &Report, out: &mut Vec<u8>) -> std::io::Result<()> {
    if out.is_empty() {
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
    }
    match report {
        Report::Msgs(r) => {
            text(out, "# tcplab-samples 1 workload=msgs\n");
            for run in &r.runs {
                let t0 = run.send_ns.first().copied().unwrap_or(0);
                let header = format!(
                    "# section=message size={} t0_ns={t0} columns=seq,send_ns,recv_ns\n",
                    run.size
                );
                table(out, &header, &[(&run.send_ns, t0), (&run.recv_ns, t0)]);
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
                let col = |f: fn(&tcplab_load::rr::RrSample) -> u64| -> Vec<u64> {
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
            let col = |f: fn(&tcplab_load::crr::CrrSample) -> u64| -> Vec<u64> {
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
        // Interval samples are a few per second, rrul's probes a hundred: their text is small,
        // and the text writer stays the one place that formats them.
        Report::Stream(_) | Report::Rrul(_) => {
            let mut buf = Vec::new();
            tcplab_load::samples::write(&mut buf, report)?;
            text_bytes(out, &buf);
        }
    }
    Ok(())
}

/// True when `blob` (decompressed) is in the packed format.
pub fn is_packed(blob: &[u8]) -> bool {
    blob.len() > MAGIC.len() && blob.starts_with(MAGIC)
}

/// Rebuilds the samples text from a packed blob.
pub fn unpack(blob: &[u8]) -> Result<Vec<u8>, String> {
    if !is_packed(blob) {
        return Err("not a packed samples blob (no TLSP magic)".into());
    }
    if blob[MAGIC.len()] != VERSION {
        return Err(format!(
            "packed samples version {}, this tcplab reads {VERSION}",
            blob[MAGIC.len()]
        ));
    }
    let mut r = Reader {
        buf: blob,
        pos: MAGIC.len() + 1,
    };
    let mut out = Vec::with_capacity(blob.len() * 5);
    while r.pos < blob.len() {
        match r.byte()? {
            TEXT => {
                let len = r.len()?;
                out.extend_from_slice(r.take(len)?);
            }
            TABLE => unpack_table(&mut r, &mut out)?,
            tag => return Err(format!("unknown chunk tag {tag} at byte {}", r.pos - 1)),
        }
    }
    Ok(out)
}

fn unpack_table(r: &mut Reader<'_>, out: &mut Vec<u8>) -> Result<(), String> {
    let header_len = r.len()?;
    out.extend_from_slice(r.take(header_len)?);
    let ncols = r.len()?;
    let nrows = r.len()?;
    let mut cols = Vec::with_capacity(ncols);
    for _ in 0..ncols {
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
        // Writing into a Vec cannot fail.
        let _ = write!(out, "{i}");
        for col in &cols {
            match col.get(i) {
                Some(v) => {
                    let _ = write!(out, ",{v}");
                }
                None => out.extend_from_slice(b",-"),
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
    use tcplab_load::crr::{CrrResult, CrrSample};
    use tcplab_load::msgs::{MsgsResult, MsgsRun};
    use tcplab_load::rr::{RrPoint, RrResult, RrSample};

    fn text_of(report: &Report) -> String {
        let mut v = Vec::new();
        tcplab_load::samples::write(&mut v, report).unwrap();
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
                send_ns: send,
                recv_ns: recv,
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
        assert_eq!(zigzag(-1), 1);
        assert_eq!(unzigzag(zigzag(i64::MIN)), i64::MIN);
        assert_eq!(unzigzag(zigzag(123_456_789)), 123_456_789);
    }
}
