//! Raw samples file (`--samples FILE`): every per-message, per-transaction, per-connection and
//! per-interval sample, as text that any tool reads. Format (docs/samples.md):
//!
//! ```text
//! # tcplab-samples 1 workload=msgs
//! # section=message size=1 t0_ns=123456789 columns=seq,send_ns,recv_ns
//! 0,0,41200
//! ```
//!
//! Timestamps are CLOCK_MONOTONIC ns relative to the section's `t0_ns`, so they stay exact in
//! an f64 and short in the file; `-` marks a missing value. Writing goes to any `Write`
//! (`tcplab_load::samples::write_file` opens the file); reading parses text.

use std::collections::BTreeMap;
use std::io::{self, Write};

use crate::report::Report;
use crate::rrul::RrulResult;
use crate::stamps::Stamps;
use crate::stream::IntervalSample;

/// One `seq,send_ns,recv_ns` row per message, relative to `t0`; `-` where one side has no
/// stamp. Streams the stamps (a long run's are read from their store chunk by chunk).
fn write_message_rows(w: &mut impl Write, t0: u64, send: &Stamps, recv: &Stamps) -> io::Result<()> {
    let n = send.len().max(recv.len());
    let (mut s, mut r) = (send.iter(), recv.iter());
    let rel = |v: Option<u64>| v.map_or("-".to_string(), |v| v.saturating_sub(t0).to_string());
    for i in 0..n {
        writeln!(w, "{i},{},{}", rel(s.next()), rel(r.next()))?;
    }
    s.finish()
        .and_then(|()| r.finish())
        .map_err(|e| io::Error::new(e.kind(), format!("reading the run's stamps back: {e}")))
}

/// Format version in the first line.
pub const FORMAT_VERSION: u32 = 1;

/// Writes every raw sample of `report` to `w`.
pub fn write(w: &mut impl Write, report: &Report) -> io::Result<()> {
    let workload = match report {
        Report::Stream(_) => "stream",
        Report::Msgs(_) => "msgs",
        Report::Rr(_) => "rr",
        Report::Crr(_) => "crr",
        Report::Rrul(_) => "rrul",
        Report::Http(_) => "http",
    };
    writeln!(w, "# tcplab-samples {FORMAT_VERSION} workload={workload}")?;
    match report {
        Report::Msgs(r) => {
            for run in &r.runs {
                let t0 = run.send_ns.first().unwrap_or(0);
                writeln!(
                    w,
                    "# section=message size={} t0_ns={t0} columns=seq,send_ns,recv_ns",
                    run.size
                )?;
                write_message_rows(w, t0, &run.send_ns, &run.recv_ns)?;
            }
        }
        Report::Rr(r) => {
            for p in &r.points {
                let t0 = p.samples.first().map_or(0, |s| s.intended_ns);
                writeln!(
                    w,
                    "# section=transaction req={} resp={} t0_ns={t0} columns=seq,intended_ns,sent_ns,done_ns",
                    p.req, p.resp
                )?;
                for (i, s) in p.samples.iter().enumerate() {
                    let rel = |v: u64| v.saturating_sub(t0);
                    writeln!(
                        w,
                        "{i},{},{},{}",
                        rel(s.intended_ns),
                        rel(s.sent_ns),
                        rel(s.done_ns)
                    )?;
                }
            }
        }
        Report::Crr(r) => {
            let t0 = r.samples.first().map_or(0, |s| s.start_ns);
            writeln!(
                w,
                "# section=connection t0_ns={t0} columns=seq,start_ns,connected_ns,done_ns"
            )?;
            for (i, s) in r.samples.iter().enumerate() {
                let rel = |v: u64| v.saturating_sub(t0);
                writeln!(
                    w,
                    "{i},{},{},{}",
                    rel(s.start_ns),
                    rel(s.connected_ns),
                    rel(s.done_ns)
                )?;
            }
            writeln!(w, "# section=time_wait columns=t_s,count")?;
            for (t, n) in &r.time_wait.samples {
                writeln!(w, "{t:.6},{n}")?;
            }
        }
        Report::Stream(r) => {
            write_intervals(w, "client", &r.intervals)?;
            write_intervals(w, "server", &r.server_intervals)?;
        }
        Report::Rrul(r) => write_rrul(w, r)?,
        Report::Http(r) => write_http(w, r)?,
    }
    Ok(())
}

/// http: every request (times relative to the first intended start; `-` = did not happen,
/// class and error `-` when none), then the TIME_WAIT samples of both hosts.
fn write_http(w: &mut impl Write, r: &crate::http::result::HttpResult) -> io::Result<()> {
    use crate::http::error_kind::ErrorKind;
    use crate::http::result::NONE;
    let t0 = r.samples.first().map_or(0, |s| s.intended_ns);
    writeln!(
        w,
        "# section=request t0_ns={t0} columns=seq,intended_ns,start_ns,connected_ns,first_byte_ns,done_ns,status,class,error,bytes"
    )?;
    for (i, s) in r.samples.iter().enumerate() {
        let rel = |v: u64| {
            if v == 0 {
                "-".to_string()
            } else {
                v.saturating_sub(t0).to_string()
            }
        };
        let class = if s.class == NONE {
            "-".to_string()
        } else {
            s.class.to_string()
        };
        let error = ErrorKind::ALL
            .get(usize::from(s.error))
            .map_or("-", |k| k.name());
        writeln!(
            w,
            "{i},{},{},{},{},{},{},{class},{error},{}",
            rel(s.intended_ns),
            rel(s.start_ns),
            rel(s.connected_ns),
            rel(s.first_byte_ns),
            rel(s.done_ns),
            s.status,
            s.bytes
        )?;
    }
    writeln!(w, "# section=time_wait host=client columns=t_s,count")?;
    for (t, n) in &r.time_wait.samples {
        writeln!(w, "{t:.6},{n}")?;
    }
    if let Some(tw) = &r.server_time_wait {
        writeln!(w, "# section=time_wait host=server columns=t_s,count")?;
        for (t, n) in &tw.samples {
            writeln!(w, "{t:.6},{n}")?;
        }
    }
    Ok(())
}

/// rrul: the phases' windows, every probe with the phase it was due in (0 before, 1 during,
/// 2 after, `-` outside every phase), then the load's intervals as stream writes them.
fn write_rrul(w: &mut impl Write, r: &RrulResult) -> io::Result<()> {
    let samples = r.samples();
    let t0 = samples.first().map_or(r.load.start_ns, |s| s.intended_ns);
    let rel = |v: u64| v.saturating_sub(t0);
    writeln!(
        w,
        "# section=phase t0_ns={t0} columns=phase,start_ns,end_ns,transactions"
    )?;
    for p in &r.phases {
        writeln!(
            w,
            "{},{},{},{}",
            p.name.index(),
            rel(p.start_ns),
            rel(p.end_ns),
            p.transactions
        )?;
    }
    writeln!(
        w,
        "# section=probe req={} resp={} t0_ns={t0} columns=seq,intended_ns,sent_ns,done_ns,phase",
        r.config.req, r.config.resp
    )?;
    for (i, s) in samples.iter().enumerate() {
        let phase = crate::rrul::phase::phase_of(s.intended_ns, &r.phases)
            .map_or("-".to_string(), |p| p.index().to_string());
        writeln!(
            w,
            "{i},{},{},{},{phase}",
            rel(s.intended_ns),
            rel(s.sent_ns),
            rel(s.done_ns)
        )?;
    }
    write_intervals(w, "client", &r.bulk.intervals)?;
    write_intervals(w, "server", &r.bulk.server_intervals)
}

const INTERVAL_COLUMNS: &str = "index,flow,sending,start_s,end_s,bytes,omitted,cwnd,rtt_us,rttvar_us,total_retrans,delivery_rate_bps,busy_us,rwnd_limited_us,sndbuf_limited_us";

fn write_intervals(w: &mut impl Write, side: &str, v: &[IntervalSample]) -> io::Result<()> {
    writeln!(
        w,
        "# section=interval side={side} columns={INTERVAL_COLUMNS}"
    )?;
    for i in v {
        write!(
            w,
            "{},{},{},{:.6},{:.6},{},{}",
            i.index,
            i.flow,
            u8::from(i.sending),
            i.start_s,
            i.end_s,
            i.bytes,
            u8::from(i.omitted)
        )?;
        match &i.tcp_info {
            Some(t) => writeln!(
                w,
                ",{},{},{},{},{},{},{},{}",
                t.cwnd,
                t.rtt_us,
                t.rttvar_us,
                t.total_retrans,
                t.delivery_rate_bps,
                t.busy_us,
                t.rwnd_limited_us,
                t.sndbuf_limited_us
            )?,
            None => writeln!(w, ",-,-,-,-,-,-,-,-")?,
        }
    }
    Ok(())
}

/// One section read back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Section {
    /// The `section=` value (message, transaction, connection, time_wait, interval).
    pub kind: String,
    /// Every other `key=value` of the section line (size, t0_ns, side, ...).
    pub attrs: BTreeMap<String, String>,
    /// Column names.
    pub columns: Vec<String>,
    /// Rows; `-` is read as None, and so is a name in a [`LABEL_COLUMNS`] column.
    pub rows: Vec<Vec<Option<f64>>>,
    /// The names in [`LABEL_COLUMNS`] columns: column → (row, name).
    pub labels: BTreeMap<String, Vec<(usize, String)>>,
}

/// Columns whose values are names, not numbers (http's error kind).
pub const LABEL_COLUMNS: &[&str] = &["error"];

/// Parses a samples file's text back into its sections. An error is one line that names the
/// line at fault (and the column or item in it) and says what to write instead.
pub fn parse(text: &str) -> std::result::Result<(String, Vec<Section>), String> {
    use tcplab_emu::error::shown;
    const FIRST: &str = "`# tcplab-samples 1 workload=NAME` (docs/samples.md)";
    let mut lines = text.lines();
    let first = lines.next().ok_or(format!(
        "line 1: the samples are empty, line 1 must be {FIRST}"
    ))?;
    let head = first.strip_prefix("# tcplab-samples ").ok_or_else(|| {
        format!(
            "line 1: `{}` is not a tcplab samples header, it must be {FIRST}",
            shown(first)
        )
    })?;
    let workload = head
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("workload="))
        .ok_or(format!(
            "line 1: the header has no workload=, write {FIRST}"
        ))?;
    let mut sections: Vec<Section> = Vec::new();
    for (n, line) in lines.enumerate() {
        let at = n + 2;
        if let Some(rest) = line.strip_prefix("# ") {
            let mut s = Section::default();
            for kv in rest.split_whitespace() {
                let (k, v) = kv.split_once('=').ok_or_else(|| {
                    format!(
                        "line {at}: `{}` in a section line is not key=value; write e.g. \
                         `# section=message columns=seq,send_ns,recv_ns`",
                        shown(kv)
                    )
                })?;
                match k {
                    "section" => s.kind = v.to_string(),
                    "columns" => s.columns = v.split(',').map(str::to_string).collect(),
                    _ => {
                        s.attrs.insert(k.to_string(), v.to_string());
                    }
                }
            }
            sections.push(s);
        } else if !line.is_empty() {
            let s = sections.last_mut().ok_or_else(|| {
                format!(
                    "line {at}: a row before any section; a `# section=... columns=...` line \
                     must come first"
                )
            })?;
            let row_at = s.rows.len();
            let mut row = Vec::with_capacity(s.columns.len());
            for (i, f) in line.split(',').enumerate() {
                let column = s.columns.get(i).map(String::as_str);
                let named = || match column {
                    Some(c) => format!("column {} (`{}`)", i + 1, shown(c)),
                    None => format!("column {}", i + 1),
                };
                if f == "-" {
                    row.push(None);
                } else if let Ok(v) = f.parse() {
                    row.push(Some(v));
                } else if let Some(c) = column.filter(|c| LABEL_COLUMNS.contains(c)) {
                    let valid = f.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
                    if !valid {
                        return Err(format!(
                            "line {at}: `{}` in {} is not a name; use letters, digits and _, \
                             or - for none",
                            shown(f),
                            named()
                        ));
                    }
                    s.labels
                        .entry(c.to_string())
                        .or_default()
                        .push((row_at, f.to_string()));
                    row.push(None);
                } else {
                    return Err(format!(
                        "line {at}: `{}` in {} is not a number; write a number, or - for no \
                         value",
                        shown(f),
                        named()
                    ));
                }
            }
            if row.len() != s.columns.len() {
                return Err(format!(
                    "line {at}: {} values for the {} columns of section `{}`; each row must \
                     have one value per column",
                    row.len(),
                    s.columns.len(),
                    shown(&s.kind)
                ));
            }
            s.rows.push(row);
        }
    }
    Ok((workload.to_string(), sections))
}
