//! Reading a packed blob: back to the samples text ([`unpack`]), or part by part
//! ([`parts`]) so a reader that wants a few columns of a long table streams them from the
//! packed bytes instead of printing millions of rows first.

use std::io::Write;

use super::{LABELLED, LABELS, MAGIC, NUMBERS, OPTIONAL, PLAIN_VERSION, TABLE, TEXT, VERSION};

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
    let mut out = Vec::with_capacity(blob.len() * 5);
    for part in parts(blob)? {
        match part {
            Part::Text(t) => out.extend_from_slice(t),
            Part::Table(t) => t.print(&mut out)?,
        }
    }
    Ok(out)
}

/// One chunk of a packed blob.
#[derive(Debug, Clone)]
pub enum Part<'a> {
    /// Text, as written (a workload's first line, small sections).
    Text(&'a [u8]),
    /// A section stored as columns.
    Table(TableView<'a>),
}

/// A table chunk, checked but not printed: its header line and row count, its numeric
/// columns to stream ([`TableView::column`]), or its text ([`TableView::print`]).
#[derive(Debug, Clone)]
pub struct TableView<'a> {
    /// The section's `# section=...` line, newline included.
    pub header: &'a str,
    /// Rows the section prints.
    pub rows: usize,
    blob: &'a [u8],
    /// Where the chunk starts after its tag.
    at: usize,
    labelled: bool,
    /// Each column's length and where its varints start (numeric columns of a plain table).
    columns: Vec<(usize, usize)>,
}

impl<'a> TableView<'a> {
    /// The section's text, appended to `out`.
    pub fn print(&self, out: &mut Vec<u8>) -> Result<(), String> {
        let mut r = Reader {
            buf: self.blob,
            pos: self.at,
        };
        unpack_table(&mut r, out, self.labelled, max_unpacked(self.blob.len()))
    }

    /// The values of stored column `i` (the header's column `i + 1`: `seq` is the row number
    /// and is not stored), in row order; rows past its length print `-`. `None` for a column
    /// that is not there or a table with label columns.
    pub fn column(&self, i: usize) -> Option<Values<'a>> {
        let &(len, pos) = self.columns.get(i)?;
        Some(Values {
            r: Reader {
                buf: self.blob,
                pos,
            },
            left: len,
            prev: 0,
        })
    }
}

/// A stored column's values, decoded as they are read.
#[derive(Debug, Clone)]
pub struct Values<'a> {
    r: Reader<'a>,
    left: usize,
    prev: i128,
}

impl Iterator for Values<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // [`parts`] decoded every value of the column once already: none fails here.
        self.prev += i128::from(unzigzag(self.r.varint().ok()?));
        u64::try_from(self.prev).ok()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

/// The chunks of a packed blob, each checked (lengths, varints, values in range) without
/// printing anything.
pub fn parts(blob: &[u8]) -> Result<Vec<Part<'_>>, String> {
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
    let mut out = Vec::new();
    while r.pos < blob.len() {
        out.push(match r.byte()? {
            TEXT => {
                let len = r.len()?;
                Part::Text(r.take(len)?)
            }
            TABLE => Part::Table(skim_table(&mut r, false)?),
            LABELLED => Part::Table(skim_table(&mut r, true)?),
            tag => return Err(format!("unknown chunk tag {tag} at byte {}", r.pos - 1)),
        });
    }
    Ok(out)
}

/// Reads over a table chunk, checking it as [`unpack_table`] would, and notes where each of
/// its columns starts.
fn skim_table<'a>(r: &mut Reader<'a>, labelled: bool) -> Result<TableView<'a>, String> {
    let at = r.pos;
    let header_len = r.len()?;
    let header = std::str::from_utf8(r.take(header_len)?)
        .map_err(|_| format!("a table header that is not UTF-8 at byte {at}"))?;
    let ncols = r.len()?;
    let rows = r.len()?;
    let mut columns = Vec::with_capacity(ncols.min(64));
    for _ in 0..ncols {
        if labelled {
            match r.byte()? {
                NUMBERS | OPTIONAL => {}
                LABELS => {
                    for _ in 0..r.len()? {
                        let len = r.len()?;
                        r.take(len)?;
                    }
                }
                t => return Err(format!("unknown column type {t} at byte {}", r.pos - 1)),
            }
        }
        let len = r.len()?;
        if len > rows {
            return Err(format!(
                "a column of {len} values in a table of {rows} rows"
            ));
        }
        columns.push((len, r.pos));
        let mut prev = 0i128;
        for _ in 0..len {
            prev += i128::from(unzigzag(r.varint()?));
            u64::try_from(prev).map_err(|_| "a value out of range".to_string())?;
        }
    }
    if labelled {
        columns.clear();
    }
    Ok(TableView {
        header,
        rows,
        blob: r.buf,
        at,
        labelled,
        columns,
    })
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

pub(super) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[derive(Debug, Clone)]
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
