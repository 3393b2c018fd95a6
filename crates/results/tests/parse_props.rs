//! Property tests of the `--samples` text format (`tcplab_results::samples`): whatever a
//! result holds, what `write` writes `parse` reads back, value for value; a written file with
//! one line changed, and any text, parses or fails with one line that names the line (and the
//! column) and says what to write, never with a panic, and never into more values than the
//! text has fields.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

#[path = "../../../tests/props.rs"]
mod props;

use props::{bounded, check_error};
use proptest::prelude::*;
use tcplab_results::Report;
use tcplab_results::crr::{CrrResult, CrrSample, TimeWait};
use tcplab_results::http::error_kind::ErrorKind;
use tcplab_results::http::result::{HttpResult, HttpSample, NONE};
use tcplab_results::msgs::{MsgsResult, MsgsRun};
use tcplab_results::rr::{RrPoint, RrResult, RrSample};
use tcplab_results::samples::{self, Section};
use tcplab_results::stream::{IntervalSample, StreamResult};
use tcplab_results::tcpinfo::TcpInfo;

/// Rows per section: enough to cross every path, few enough for 256 cases in a debug build.
const ROWS: usize = 24;

/// A stamp: near a realistic CLOCK_MONOTONIC value, or anywhere in u64.
fn stamp() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => (0u64..1 << 20).prop_map(|d| 5_000_000_000_000 + d * 1_000),
        1 => any::<u64>(),
        1 => Just(0u64),
    ]
}

/// Seconds: ordinary values, and any f64 (non-finite ones too).
fn seconds() -> impl Strategy<Value = f64> {
    prop_oneof![4 => 0.0f64..1e4, 1 => any::<f64>()]
}

fn msgs() -> impl Strategy<Value = Report> {
    prop::collection::vec(
        (
            any::<u32>(),
            prop::collection::vec(stamp(), 0..ROWS),
            prop::collection::vec(stamp(), 0..ROWS),
        ),
        0..3,
    )
    .prop_map(|runs| {
        Report::Msgs(MsgsResult {
            runs: runs
                .into_iter()
                .map(|(size, send_ns, recv_ns)| MsgsRun {
                    size,
                    send_ns: send_ns.into(),
                    recv_ns: recv_ns.into(),
                    ..MsgsRun::default()
                })
                .collect(),
            ..MsgsResult::default()
        })
    })
}

fn rr() -> impl Strategy<Value = Report> {
    prop::collection::vec(
        (
            any::<u32>(),
            any::<u32>(),
            prop::collection::vec((stamp(), stamp(), stamp()), 0..ROWS),
        ),
        0..3,
    )
    .prop_map(|points| {
        Report::Rr(RrResult {
            points: points
                .into_iter()
                .map(|(req, resp, s)| RrPoint {
                    req,
                    resp,
                    samples: s
                        .into_iter()
                        .map(|(intended_ns, sent_ns, done_ns)| RrSample {
                            intended_ns,
                            sent_ns,
                            done_ns,
                        })
                        .collect(),
                    ..RrPoint::default()
                })
                .collect(),
            ..RrResult::default()
        })
    })
}

fn time_wait() -> impl Strategy<Value = TimeWait> {
    prop::collection::vec((seconds(), any::<u64>()), 0..ROWS).prop_map(|samples| TimeWait {
        samples,
        ..TimeWait::default()
    })
}

fn crr() -> impl Strategy<Value = Report> {
    (
        prop::collection::vec((stamp(), stamp(), stamp()), 0..ROWS),
        time_wait(),
    )
        .prop_map(|(s, time_wait)| {
            Report::Crr(CrrResult {
                samples: s
                    .into_iter()
                    .map(|(start_ns, connected_ns, done_ns)| CrrSample {
                        start_ns,
                        connected_ns,
                        done_ns,
                    })
                    .collect(),
                time_wait,
                ..CrrResult::default()
            })
        })
}

fn interval() -> impl Strategy<Value = IntervalSample> {
    (
        (any::<u32>(), any::<u32>(), any::<bool>(), any::<bool>()),
        (seconds(), seconds(), any::<u64>()),
        prop::option::of((
            (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()),
            (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()),
        )),
    )
        .prop_map(
            |((index, flow, sending, omitted), (start_s, end_s, bytes), info)| IntervalSample {
                index,
                flow,
                sending,
                omitted,
                start_s,
                end_s,
                bytes,
                tcp_info: info.map(
                    |((cwnd, rtt_us, rttvar_us, total_retrans), (rate, busy, rwnd, sndbuf))| {
                        TcpInfo {
                            cwnd,
                            rtt_us,
                            rttvar_us,
                            total_retrans,
                            delivery_rate_bps: rate,
                            busy_us: busy,
                            rwnd_limited_us: rwnd,
                            sndbuf_limited_us: sndbuf,
                            ..TcpInfo::default()
                        }
                    },
                ),
                ..IntervalSample::default()
            },
        )
}

fn stream() -> impl Strategy<Value = Report> {
    (
        prop::collection::vec(interval(), 0..ROWS),
        prop::collection::vec(interval(), 0..ROWS),
    )
        .prop_map(|(intervals, server_intervals)| {
            Report::Stream(StreamResult {
                intervals,
                server_intervals,
                ..StreamResult::default()
            })
        })
}

fn http() -> impl Strategy<Value = Report> {
    let sample = (
        (stamp(), stamp(), stamp(), stamp(), stamp()),
        (
            any::<u16>(),
            prop_oneof![Just(NONE), 0u8..5],
            prop_oneof![Just(NONE), 0u8..8, any::<u8>()],
            any::<u32>(),
        ),
    )
        .prop_map(
            |(
                (intended_ns, start_ns, connected_ns, first_byte_ns, done_ns),
                (status, class, error, bytes),
            )| {
                HttpSample {
                    intended_ns,
                    start_ns,
                    connected_ns,
                    first_byte_ns,
                    done_ns,
                    status,
                    class,
                    error,
                    bytes,
                }
            },
        );
    (
        prop::collection::vec(sample, 0..ROWS),
        time_wait(),
        prop::option::of(time_wait()),
    )
        .prop_map(|(samples, time_wait, server_time_wait)| {
            Report::Http(HttpResult {
                samples,
                time_wait,
                server_time_wait,
                ..HttpResult::default()
            })
        })
}

fn report() -> impl Strategy<Value = Report> {
    prop_oneof![msgs(), rr(), crr(), stream(), http()]
}

/// What a section of a round trip must read back: kind, rows, and the error column's names.
struct Want {
    kind: &'static str,
    rows: Vec<Vec<Option<f64>>>,
    labels: Vec<(usize, String)>,
}

/// A value written with six decimals, as read back.
fn six(x: f64) -> Option<f64> {
    Some(format!("{x:.6}").parse().unwrap())
}

fn n(x: impl Into<f64>) -> Option<f64> {
    Some(x.into())
}

/// A stamp relative to `t0`, as written (`saturating_sub`) and read back.
fn rel(v: u64, t0: u64) -> Option<f64> {
    Some(v.saturating_sub(t0) as f64)
}

fn time_wait_rows(tw: &TimeWait) -> Vec<Vec<Option<f64>>> {
    tw.samples
        .iter()
        .map(|&(t, c)| vec![six(t), Some(c as f64)])
        .collect()
}

fn interval_rows(v: &[IntervalSample]) -> Vec<Vec<Option<f64>>> {
    v.iter()
        .map(|i| {
            let mut row = vec![
                n(i.index),
                n(i.flow),
                n(u8::from(i.sending)),
                six(i.start_s),
                six(i.end_s),
                Some(i.bytes as f64),
                n(u8::from(i.omitted)),
            ];
            match &i.tcp_info {
                Some(t) => row.extend([
                    n(t.cwnd),
                    n(t.rtt_us),
                    n(t.rttvar_us),
                    n(t.total_retrans),
                    Some(t.delivery_rate_bps as f64),
                    Some(t.busy_us as f64),
                    Some(t.rwnd_limited_us as f64),
                    Some(t.sndbuf_limited_us as f64),
                ]),
                None => row.extend([None; 8]),
            }
            row
        })
        .collect()
}

/// The sections `report` must read back as, computed from the result itself.
fn wanted(report: &Report) -> Vec<Want> {
    let plain = |kind, rows| Want {
        kind,
        rows,
        labels: Vec::new(),
    };
    match report {
        Report::Msgs(r) => r
            .runs
            .iter()
            .map(|run| {
                let t0 = run.send_ns.first().unwrap_or(0);
                let (send, recv) = (run.send_ns.to_vec().unwrap(), run.recv_ns.to_vec().unwrap());
                let rows = (0..run.send_ns.len().max(run.recv_ns.len()))
                    .map(|i| {
                        vec![
                            Some(i as f64),
                            send.get(i).and_then(|&v| rel(v, t0)),
                            recv.get(i).and_then(|&v| rel(v, t0)),
                        ]
                    })
                    .collect();
                plain("message", rows)
            })
            .collect(),
        Report::Rr(r) => r
            .points
            .iter()
            .map(|p| {
                let t0 = p.samples.first().map_or(0, |s| s.intended_ns);
                let rows = p
                    .samples
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        vec![
                            Some(i as f64),
                            rel(s.intended_ns, t0),
                            rel(s.sent_ns, t0),
                            rel(s.done_ns, t0),
                        ]
                    })
                    .collect();
                plain("transaction", rows)
            })
            .collect(),
        Report::Crr(r) => {
            let t0 = r.samples.first().map_or(0, |s| s.start_ns);
            let rows = r
                .samples
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    vec![
                        Some(i as f64),
                        rel(s.start_ns, t0),
                        rel(s.connected_ns, t0),
                        rel(s.done_ns, t0),
                    ]
                })
                .collect();
            vec![
                plain("connection", rows),
                plain("time_wait", time_wait_rows(&r.time_wait)),
            ]
        }
        Report::Stream(r) => vec![
            plain("interval", interval_rows(&r.intervals)),
            plain("interval", interval_rows(&r.server_intervals)),
        ],
        Report::Http(r) => {
            let t0 = r.samples.first().map_or(0, |s| s.intended_ns);
            // 0 is "did not happen", written `-`.
            let stamp = |v: u64| if v == 0 { None } else { rel(v, t0) };
            let mut labels = Vec::new();
            let rows = r
                .samples
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    if let Some(k) = ErrorKind::ALL.get(usize::from(s.error)) {
                        labels.push((i, k.name().to_string()));
                    }
                    vec![
                        Some(i as f64),
                        stamp(s.intended_ns),
                        stamp(s.start_ns),
                        stamp(s.connected_ns),
                        stamp(s.first_byte_ns),
                        stamp(s.done_ns),
                        n(s.status),
                        (s.class != NONE).then(|| f64::from(s.class)),
                        None,
                        n(s.bytes),
                    ]
                })
                .collect();
            let mut out = vec![
                Want {
                    kind: "request",
                    rows,
                    labels,
                },
                plain("time_wait", time_wait_rows(&r.time_wait)),
            ];
            if let Some(tw) = &r.server_time_wait {
                out.push(plain("time_wait", time_wait_rows(tw)));
            }
            out
        }
        Report::Rrul(_) => unreachable!("not generated"),
    }
}

/// Equal as read back: NaN reads back as NaN.
fn same(a: &[Vec<Option<f64>>], b: &[Vec<Option<f64>>]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.len() == y.len()
                && x.iter().zip(y).all(|(p, q)| match (p, q) {
                    (Some(p), Some(q)) => p == q || (p.is_nan() && q.is_nan()),
                    (None, None) => true,
                    _ => false,
                })
        })
}

fn written(report: &Report) -> String {
    let mut text = Vec::new();
    samples::write(&mut text, report).unwrap();
    String::from_utf8(text).unwrap()
}

/// Parses `text` within the bound; an error names a line and says what to do, and a parse
/// never holds more values than the text has fields. The error's line number, if any.
fn parse_holds(text: String) -> Result<Option<usize>, TestCaseError> {
    let fields = text.len() + text.lines().count();
    let result = bounded("samples::parse", move || samples::parse(&text))?;
    match result {
        Ok((_, sections)) => {
            let values: usize = sections.iter().flat_map(|s| &s.rows).map(Vec::len).sum();
            prop_assert!(values <= fields, "{} values from {} bytes", values, fields);
            Ok(None)
        }
        Err(e) => {
            check_error(&e, &["line"])?;
            let line = e
                .split("line ")
                .nth(1)
                .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|d| d.parse().ok());
            prop_assert!(line.is_some(), "no line number: {}", e);
            Ok(line)
        }
    }
}

/// A value in place of a row's field: wrong types, huge, empty, unicode, control characters.
fn field() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| v.to_string()),
        "[0-9a-z_.+-]{0,12}",
        "\\PC{0,8}",
        prop::sample::select(vec![
            "",
            "-",
            "--",
            "x",
            "1e999",
            "-1e999",
            "NaN",
            "inf",
            "1,2",
            "é",
            "\u{0}",
            "\t",
            "# x",
            "timeout",
            "time out",
            "99999999999999999999999999",
        ])
        .prop_map(str::to_owned),
        "[0-9]{200,400}",
    ]
}

/// A written samples file with one line changed: a field replaced, a field dropped or added,
/// the line removed, doubled or replaced by junk. Returns the text and the line (1-based)
/// changed: an error must name it or a line after it.
fn one_line_changed() -> impl Strategy<Value = (String, usize)> {
    (
        report(),
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
        0..6u8,
        field(),
        ".{0,40}",
    )
        .prop_map(|(report, at, f, how, value, junk)| {
            let text = written(&report);
            let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
            let i = at.index(lines.len());
            let mut fields: Vec<String> = lines[i].split(',').map(str::to_owned).collect();
            let j = f.index(fields.len());
            match how {
                0 => {
                    fields[j] = value;
                    lines[i] = fields.join(",");
                }
                1 => {
                    fields.remove(j);
                    lines[i] = fields.join(",");
                }
                2 => {
                    fields.insert(j, value);
                    lines[i] = fields.join(",");
                }
                3 => {
                    lines.remove(i);
                }
                4 => {
                    let l = lines[i].clone();
                    lines.insert(i, l);
                }
                _ => lines[i] = junk,
            }
            (lines.join("\n"), i + 1)
        })
}

/// Text shaped like a samples file: its first line, then lines of its own characters.
fn samples_like() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            "[0-9,.-]{0,30}",
            "# (section|columns|t0_ns|size|side)=[a-z0-9_,=]{0,20}( [a-z_]{0,6}=?[a-z0-9,]{0,10}){0,3}",
            "[0-9e+.,a-z# =-]{0,30}",
        ],
        0..30,
    )
    .prop_map(|lines| {
        let mut text = "# tcplab-samples 1 workload=msgs\n".to_owned();
        text.push_str(&lines.join("\n"));
        text
    })
}

proptest! {
    #![proptest_config(props::config())]

    #[test]
    fn what_is_written_reads_back(report in report()) {
        let text = written(&report);
        let (workload, sections) = samples::parse(&text).map_err(TestCaseError::fail)?;
        let name = text.lines().next().unwrap().rsplit('=').next().unwrap().to_owned();
        prop_assert_eq!(workload, name);
        let want = wanted(&report);
        prop_assert_eq!(sections.len(), want.len());
        for (got, want) in sections.iter().zip(&want) {
            prop_assert_eq!(&got.kind, want.kind);
            prop_assert!(same(&got.rows, &want.rows), "{:?}\nwant {:?}", got.rows, want.rows);
            let labels = got.labels.get("error").cloned().unwrap_or_default();
            prop_assert_eq!(&labels, &want.labels);
            prop_assert!(got.rows.iter().all(|r| r.len() == got.columns.len()));
        }
        if let (Report::Msgs(r), false) = (&report, sections.is_empty()) {
            let Section { attrs, .. } = &sections[0];
            prop_assert_eq!(attrs.get("size"), Some(&r.runs[0].size.to_string()));
        }
    }

    #[test]
    fn files_with_one_line_changed((text, changed) in one_line_changed()) {
        if let Some(line) = parse_holds(text)? {
            prop_assert!(line >= changed, "line {} named, line {} changed", line, changed);
        }
    }

    #[test]
    fn files_of_any_text(text in prop_oneof![any::<String>(), samples_like()]) {
        parse_holds(text)?;
    }
}

/// Found by `files_of_any_text`: a field of a few hundred characters was echoed whole, and no
/// error said what to write instead.
#[test]
fn a_long_bad_field_is_cut_and_the_fix_given() {
    let text = format!(
        "# tcplab-samples 1 workload=msgs\n# section=message columns=seq,send_ns\n0,{}\n",
        "x".repeat(5_000)
    );
    let e = samples::parse(&text).unwrap_err();
    assert!(e.len() < 300, "{e}");
    assert!(
        e.starts_with("line 3: ") && e.contains("column 2 (`send_ns`)"),
        "{e}"
    );
    assert!(e.contains("write a number, or - for no value"), "{e}");
}
