//! The terminal summary of an HTTP run.

use std::fmt;

use super::result::HttpResult;
use crate::report::{footer, header, pct};

/// Writes `r` for people: ops/s and mean response time first (SPECweb96's two figures),
/// then percentiles overall and per class, errors by kind, SYN and TIME_WAIT evidence.
pub(crate) fn write_human(f: &mut fmt::Formatter<'_>, r: &HttpResult) -> fmt::Result {
    header(f, &format!("http ({})", r.server), &r.meta)?;
    let s = &r.summary;
    let opt = |v: Option<f64>, d: f64| v.map_or("-".into(), |x| format!("{:.1}", x / d));
    writeln!(
        f,
        "  ops           {} in {:.3} s = {}/s, mean response {} ms, {} Mbit/s",
        s.requests,
        r.elapsed_s,
        opt(s.ops_per_s, 1.0),
        s.mean_response_ms.map_or("-".into(), |m| format!("{m:.3}")),
        opt(s.bytes_per_s.map(|b| b * 8.0), 1e6),
    )?;
    pct(f, "response", &s.response_us)?;
    pct(f, "first byte", &s.first_byte_us)?;
    if let Some(u) = &r.uncorrected_response_us {
        pct(f, "uncorrected", u)?;
    }
    if s.connect_us.n > 0 {
        pct(f, "connect", &s.connect_us)?;
    }
    for c in &r.classes {
        pct(
            f,
            &format!(
                "class {} {:>3}%",
                c.class,
                c.share.map_or(0.0, |x| (x * 100.0).round())
            ),
            &c.response_us,
        )?;
    }
    let e = &r.errors_total;
    if e.total() > 0 {
        writeln!(
            f,
            "  errors        refused {}  reset {}  timeout {}  connect {} (ports {})  status {}  malformed {}  truncated {}  content {}",
            e.refused,
            e.reset,
            e.timeout,
            e.connect,
            e.addrnotavail,
            e.status,
            e.malformed,
            e.truncated,
            e.content
        )?;
        for (kind, why) in &r.error_examples {
            writeln!(f, "    {kind}: {why}")?;
        }
    } else {
        writeln!(f, "  errors        none")?;
    }
    writeln!(
        f,
        "  connections   {} opened; SYN retrans near 1 s {}  near 3 s {}  kernel {}",
        r.connections_opened,
        r.syn_retrans.connects_near_1s,
        r.syn_retrans.connects_near_3s,
        r.syn_retrans
            .kernel_syn_retrans
            .map_or("-".into(), |v| v.to_string())
    )?;
    write!(f, "  TIME_WAIT     client max {}", r.time_wait.max)?;
    match &r.server_time_wait {
        Some(tw) => writeln!(f, ", server max {}", tw.max)?,
        None => writeln!(f)?,
    }
    if let Some(n) = r.server_counters.get("TcpExt.ListenOverflows") {
        writeln!(
            f,
            "  server        accept queue overflowed {n} times (ListenOverflows)"
        )?;
    }
    footer(f, &r.meta)
}
