//! One result type for every workload ([`Report`], tagged by `workload` in JSON) and its
//! readable terminal summary. JSON never holds NaN: undefined figures are `None` → null.

use std::fmt;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::crr::CrrResult;
use crate::http::result::HttpResult;
use crate::msgs::MsgsResult;
use crate::rr::RrResult;
use crate::rrul::RrulResult;
use crate::run_facts::EmulatorRecord;
use crate::session::RunMeta;
use crate::stats::{Percentiles, Summary};
use crate::stream::StreamResult;

/// The result of any workload.
// One Report exists per run and is matched on by callers; boxing the variants would cost
// clarity for no measurable gain.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "workload", rename_all = "lowercase")]
pub enum Report {
    /// Bulk throughput.
    Stream(StreamResult),
    /// Timed stream of small messages.
    Msgs(MsgsResult),
    /// Request/response.
    Rr(RrResult),
    /// Connect/request/response/close.
    Crr(CrrResult),
    /// Latency under load: probes before, during and after bulk flows.
    Rrul(RrulResult),
    /// HTTP/1.1 GETs against a web server.
    Http(HttpResult),
}

impl Report {
    /// The common record.
    pub fn meta(&self) -> &RunMeta {
        match self {
            Self::Stream(r) => &r.meta,
            Self::Msgs(r) => &r.meta,
            Self::Rr(r) => &r.meta,
            Self::Crr(r) => &r.meta,
            Self::Rrul(r) => &r.meta,
            Self::Http(r) => &r.meta,
        }
    }

    /// Mutable common record (to fill `facts` after the run).
    pub fn meta_mut(&mut self) -> &mut RunMeta {
        match self {
            Self::Stream(r) => &mut r.meta,
            Self::Msgs(r) => &mut r.meta,
            Self::Rr(r) => &mut r.meta,
            Self::Crr(r) => &mut r.meta,
            Self::Rrul(r) => &mut r.meta,
            Self::Http(r) => &mut r.meta,
        }
    }

    /// The headline figures, each a number under its dotted path in the summary
    /// (`latency_us.p99`, `inflation.during_p99_us`): what a study stores and ranks, and the
    /// metric names a scenario's objective and a kind's headline use.
    pub fn summary_metrics(&self) -> BTreeMap<String, f64> {
        let summary = match self {
            Self::Stream(r) => serde_json::to_value(&r.summary),
            Self::Msgs(r) => serde_json::to_value(&r.summary),
            Self::Rr(r) => serde_json::to_value(&r.summary),
            Self::Crr(r) => serde_json::to_value(&r.summary),
            Self::Rrul(r) => serde_json::to_value(&r.summary),
            Self::Http(r) => serde_json::to_value(&r.summary),
        };
        let mut out = BTreeMap::new();
        if let Ok(v) = summary {
            numbers_under("", &v, &mut out);
        }
        out
    }

    /// One JSON document.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self)
            .unwrap_or_else(|e| error_json(&format!("encoding the result: {e}"), "run"))
    }
}

/// Every number in `value`, under its dotted path after `prefix`.
pub fn numbers_under(prefix: &str, value: &serde_json::Value, out: &mut BTreeMap<String, f64>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                numbers_under(&format!("{prefix}{k}."), v, out);
            }
        }
        serde_json::Value::Number(n) => {
            if let Some(x) = n.as_f64() {
                out.insert(prefix.trim_end_matches('.').to_string(), x);
            }
        }
        _ => {}
    }
}

/// The JSON document printed instead of a result when the run could not happen.
pub fn error_json(message: &str, kind: &str) -> String {
    serde_json::json!({ "error": { "message": message, "kind": kind } }).to_string()
}

pub(crate) struct Opt(Option<f64>, &'static str, f64);

impl fmt::Display for Opt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(v) => write!(f, "{:.3}{}", v / self.2, self.1),
            None => f.write_str("-"),
        }
    }
}

fn us(v: Option<f64>) -> Opt {
    Opt(v, " µs", 1.0)
}

pub(crate) fn bps(v: Option<f64>) -> Opt {
    Opt(v, " Mbit/s", 1e6)
}

pub(crate) fn pct(f: &mut fmt::Formatter<'_>, label: &str, p: &Percentiles) -> fmt::Result {
    writeln!(
        f,
        "  {label:<13} p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  (n={})",
        us(p.p50),
        us(p.p90),
        us(p.p99),
        us(p.p999),
        us(p.max),
        p.n
    )
}

fn summary(f: &mut fmt::Formatter<'_>, label: &str, s: &Summary) -> fmt::Result {
    writeln!(
        f,
        "  {label:<13} mean {}  sd {}  min {}  max {}",
        us(s.mean),
        us(s.sd),
        us(s.min),
        us(s.max)
    )
}

pub(crate) fn header(f: &mut fmt::Formatter<'_>, name: &str, m: &RunMeta) -> fmt::Result {
    writeln!(
        f,
        "{name} to {}{}",
        m.target,
        m.seed.map(|s| format!(" (seed {s})")).unwrap_or_default()
    )?;
    if let Some(o) = &m.options {
        writeln!(
            f,
            "  options       nodelay={} cork={} quickack={} cc={} sndbuf={} rcvbuf={} mss={}",
            o.nodelay, o.cork, o.quickack_rearmed, o.congestion, o.sndbuf, o.rcvbuf, o.mss
        )?;
    }
    if let Some(s) = &m.facts.sched {
        writeln!(
            f,
            "  threads       SCHED_FIFO {} (--rt-priority)",
            s.priority
        )?;
    }
    Ok(())
}

pub(crate) fn footer(f: &mut fmt::Formatter<'_>, m: &RunMeta) -> fmt::Result {
    if !m.complete {
        writeln!(
            f,
            "  INCOMPLETE: {}",
            m.incomplete_reason.as_deref().unwrap_or("cut short")
        )?;
    }
    emulator_verdict(f, m.facts.emulator.as_ref())?;
    emulator_account(f, m.facts.emulator.as_ref())
}

/// What the emulator's model gave during the run, per direction that has a queue or a delay
/// line (`facts.emulator.realised`, recorded by `tcplab_front::lab`): the queueing delay the link added
/// and the jitter it really produced, which may be far from the configured one.
fn emulator_account(f: &mut fmt::Formatter<'_>, emulator: Option<&EmulatorRecord>) -> fmt::Result {
    let Some(realised) = emulator.and_then(|e| e.realised.as_ref()) else {
        return Ok(());
    };
    for (run, name) in [
        (&realised.forward, "client→server"),
        (&realised.reverse, "server→client"),
    ] {
        if let Some(run) = run {
            writeln!(f, "  emulator      {name}: {run}")?;
        }
    }
    Ok(())
}

/// The verdict of the emulator the run crossed, if it crossed one (`facts.emulator.fidelity`,
/// recorded by `tcplab_front::lab`): a result that crossed an emulator that fell behind says so where
/// it is read, not only in its JSON.
fn emulator_verdict(f: &mut fmt::Formatter<'_>, emulator: Option<&EmulatorRecord>) -> fmt::Result {
    match emulator.map(|e| &e.fidelity) {
        None => Ok(()),
        Some(v) if v.trustworthy => writeln!(f, "  emulator      kept its schedule (trustworthy)"),
        Some(v) => writeln!(f, "  emulator      UNTRUSTWORTHY: {}", v.reasons.join("; ")),
    }
}

/// How long each side's thread waited for a CPU per transaction: the part of the latency that
/// is the host's scheduler (omitted where the kernel does not count it).
pub(crate) fn cpu_wait_per_transaction(
    f: &mut fmt::Formatter<'_>,
    m: &RunMeta,
    n: u64,
) -> fmt::Result {
    let per = |s: Option<f64>| us(s.filter(|_| n > 0).map(|s| s * 1e6 / n as f64));
    if m.client_cpu_wait_s.is_none() && m.server_cpu_wait_s.is_none() {
        return Ok(());
    }
    writeln!(
        f,
        "  cpu wait      client {}  server {}  per transaction (runnable, waiting for a CPU)",
        per(m.client_cpu_wait_s),
        per(m.server_cpu_wait_s)
    )
}

/// One line per client interval: bit/s each way, and the first flow's tcp_info.
fn stream_intervals(
    f: &mut fmt::Formatter<'_>,
    v: &[crate::stream::IntervalSample],
) -> fmt::Result {
    let last = v.iter().map(|i| i.index).max();
    for index in 0..=last.unwrap_or(0) {
        let rows: Vec<_> = v.iter().filter(|i| i.index == index).collect();
        let Some(first) = rows.first() else { continue };
        let sum = |sending: bool| -> Option<f64> {
            let b: Vec<f64> = rows
                .iter()
                .filter(|i| i.sending == sending)
                .filter_map(|i| i.bps)
                .collect();
            (!b.is_empty()).then(|| b.iter().sum())
        };
        let info = first.tcp_info.map_or(String::new(), |t| {
            format!(
                "  cwnd {} rtt {} µs retrans {}",
                t.cwnd, t.rtt_us, t.total_retrans
            )
        });
        writeln!(
            f,
            "  [{:6.2}-{:6.2} s] sent {}  received {}{}{}",
            first.start_s,
            first.end_s,
            bps(sum(true)),
            bps(sum(false)),
            info,
            if first.omitted { "  (omitted)" } else { "" }
        )?;
    }
    Ok(())
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stream(r) => {
                header(f, "stream", &r.meta)?;
                stream_intervals(f, &r.intervals)?;
                writeln!(
                    f,
                    "  throughput    {}  (up {}, down {})",
                    bps(r.summary.throughput_bps),
                    bps(r.summary.up_bps),
                    bps(r.summary.down_bps)
                )?;
                writeln!(f, "  retransmits   {}", r.summary.retransmits)?;
                writeln!(
                    f,
                    "  cpu s/GB      client {}  server {}",
                    Opt(r.client_cpu_s_per_gb, "", 1.0),
                    Opt(r.server_cpu_s_per_gb, "", 1.0)
                )?;
                footer(f, &r.meta)
            }
            Self::Msgs(r) => {
                header(f, "msgs", &r.meta)?;
                for run in &r.runs {
                    writeln!(
                        f,
                        "  size {} B x {}: {} sent, {} received in {:.6} s",
                        run.size, run.count, run.sent, run.received, run.total_s
                    )?;
                    summary(f, "per message", &run.per_message_us)?;
                    if let Some(d) = &run.one_way_us {
                        writeln!(
                            f,
                            "  one-way       p50 {}  p99 {}  max {}",
                            us(d.p50),
                            us(d.p99),
                            us(d.max)
                        )?;
                    }
                    if let Some(d) = &run.recv_gap_us {
                        writeln!(
                            f,
                            "  recv gaps     p50 {}  p99 {}  max {}  stalls {}",
                            us(d.p50),
                            us(d.p99),
                            us(d.max),
                            run.stalls
                        )?;
                    }
                    if let Some(t) = &run.theoretical {
                        writeln!(
                            f,
                            "  line rate     {:.3} µs/message at {} bit/s ({} wire bytes)",
                            t.per_message_us, t.link_rate_bps, t.wire_bytes_per_message
                        )?;
                    }
                }
                if let Some(k) = r.threshold_size {
                    writeln!(f, "  threshold     no stalls from {k} bytes on")?;
                }
                footer(f, &r.meta)
            }
            Self::Rr(r) => {
                header(f, "rr", &r.meta)?;
                writeln!(
                    f,
                    "  mode          {}  transactions {}  rate {}/s",
                    r.mode,
                    r.summary.transactions,
                    Opt(r.summary.transactions_per_s, "", 1.0)
                )?;
                pct(f, "latency", &r.summary.latency_us)?;
                if r.points.len() > 1 {
                    for p in &r.points {
                        writeln!(
                            f,
                            "  {:>8} B     p50 {}  {}",
                            p.req,
                            us(p.latency_us.p50),
                            bps(p.throughput_bps)
                        )?;
                    }
                }
                if let Some(u) = r
                    .points
                    .first()
                    .and_then(|p| p.latency_uncorrected_us.as_ref())
                {
                    pct(f, "uncorrected", u)?;
                }
                cpu_wait_per_transaction(f, &r.meta, r.summary.transactions)?;
                footer(f, &r.meta)
            }
            Self::Crr(r) => {
                header(f, "crr", &r.meta)?;
                writeln!(
                    f,
                    "  connections   {} in {:.3} s = {}/s",
                    r.summary.transactions,
                    r.elapsed_s,
                    Opt(r.summary.connections_per_s, "", 1.0)
                )?;
                pct(f, "connect", &r.summary.connect_us)?;
                pct(f, "transaction", &r.transaction_us)?;
                let e = &r.errors_total;
                writeln!(
                    f,
                    "  errors        EADDRNOTAVAIL {}  ECONNREFUSED {}  other {}",
                    e.addrnotavail, e.connrefused, e.other
                )?;
                writeln!(
                    f,
                    "  SYN retrans   near 1 s {}  near 3 s {}  kernel {}",
                    r.syn_retrans.connects_near_1s,
                    r.syn_retrans.connects_near_3s,
                    r.syn_retrans
                        .kernel_syn_retrans
                        .map_or("-".into(), |v| v.to_string())
                )?;
                writeln!(
                    f,
                    "  TIME_WAIT     max {}  last {}",
                    r.time_wait.max, r.time_wait.last
                )?;
                footer(f, &r.meta)
            }
            Self::Rrul(r) => crate::rrul::write_human(f, r),
            Self::Http(r) => crate::http::human::write_human(f, r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The footer of a run with `facts` (the JSON a result carries), as the human form
    /// prints it.
    fn footer_of(facts: serde_json::Value) -> String {
        let facts = serde_json::from_value(facts).expect("facts");
        struct Footer(RunMeta);
        impl fmt::Display for Footer {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                footer(f, &self.0)
            }
        }
        Footer(RunMeta {
            complete: true,
            facts,
            ..RunMeta::default()
        })
        .to_string()
    }

    #[test]
    fn the_human_form_says_whether_the_emulator_kept_its_schedule() {
        assert_eq!(footer_of(serde_json::json!({})), "", "no emulator crossed");
        let ok = serde_json::json!({"emulator": {"seed": 1, "link": {}, "fidelity": {"trustworthy": true, "reasons": []}}});
        assert_eq!(
            footer_of(ok),
            "  emulator      kept its schedule (trustworthy)\n"
        );
        let bad = serde_json::json!({"emulator": {"seed": 1, "link": {}, "fidelity": {"trustworthy": false, "reasons": [
            "reverse: lone frames' lateness p99 above 100 µs (3 of 200 frames later than that)",
            "the emulator stopped during the run"
        ]}}});
        assert_eq!(
            footer_of(bad),
            "  emulator      UNTRUSTWORTHY: reverse: lone frames' lateness p99 above 100 µs \
             (3 of 200 frames later than that); the emulator stopped during the run\n"
        );
    }

    #[test]
    fn the_human_form_names_a_real_time_priority() {
        struct Header(RunMeta);
        impl fmt::Display for Header {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                header(f, "rr", &self.0)
            }
        }
        let meta = |facts| RunMeta {
            target: "198.18.0.101:5301".into(),
            facts: serde_json::from_value(facts).expect("facts"),
            ..RunMeta::default()
        };
        let fifo = serde_json::json!({"sched": {"policy": "fifo", "priority": 20}});
        assert_eq!(
            Header(meta(fifo)).to_string(),
            "rr to 198.18.0.101:5301\n  threads       SCHED_FIFO 20 (--rt-priority)\n"
        );
        assert_eq!(
            Header(meta(serde_json::json!({}))).to_string(),
            "rr to 198.18.0.101:5301\n"
        );
    }

    #[test]
    fn the_human_form_gives_the_queue_stay_and_realised_delay_per_direction() {
        let facts = serde_json::json!({"emulator": {
            "seed": 1,
            "link": {},
            "fidelity": {"trustworthy": true, "reasons": []},
            "realised": {
                "forward": {"queue_accepted": 2, "queue_mean_sojourn_ns": 120000,
                    "delay_count": 2, "delay_mean_ns": 2000.0, "delay_sd_ns": 1000.0,
                    "configured_sd_ns": 0.0, "held_for_order": 0, "clamped_at_zero": 0},
                "reverse": null
            }
        }});
        assert_eq!(
            footer_of(facts),
            "  emulator      kept its schedule (trustworthy)\n  emulator      client→server: \
             queue stay 120 µs mean (2 packets); delay 2.00 µs mean, sd 1.00 µs\n"
        );
    }
}
