//! What an HTTP run reports: ops/s and response times overall and per SPECweb96 class, bytes,
//! connect times, errors by kind (per second and in total), SYN retransmissions and TIME_WAIT
//! as `crr` records them; and the assembly of the event loops' records into that (pure).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::config::HttpConfig;
use super::error_kind::ErrorKind;
use crate::crr::{SynRetrans, TimeWait};
use crate::session::RunMeta;
use crate::stats::{Percentiles, latency_histogram, ratio};

/// Class labels as SPECweb96 names its classes.
pub const CLASS_LABELS: [&str; 4] = ["0.1-0.9 KB", "1-9 KB", "10-90 KB", "100-900 KB"];

/// No class (a path outside the SPECweb96 set) or no error, in a raw sample.
pub const NONE: u8 = u8::MAX;

/// One request as the client saw it (CLOCK_MONOTONIC ns; 0 = did not happen).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HttpSample {
    /// When the schedule meant it to start (open loop); the start otherwise.
    pub intended_ns: u64,
    /// When the client began it: connect() for a new connection, else the request's write.
    pub start_ns: u64,
    /// connect() completed (0: the request reused an open connection).
    pub connected_ns: u64,
    /// The first byte of the response arrived.
    pub first_byte_ns: u64,
    /// The response was complete, or the request failed.
    pub done_ns: u64,
    /// HTTP status (0: no response).
    pub status: u16,
    /// SPECweb96 class 0-3, or [`NONE`].
    pub class: u8,
    /// [`ErrorKind`] index, or [`NONE`].
    pub error: u8,
    /// Body bytes received.
    pub bytes: u32,
}

/// Failed requests by kind. `addrnotavail` is the part of `connect` whose cause was the
/// client's local ports being exhausted (EADDRNOTAVAIL), the doctor's port-exhaustion evidence.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpErrors {
    /// Second since the start (0 in totals).
    pub second: u64,
    /// The server refused the connection (ECONNREFUSED: no listener, or a full accept queue
    /// with tcp_abort_on_overflow).
    pub refused: u64,
    /// The connection was reset.
    pub reset: u64,
    /// No connection or no complete response within the timeouts.
    pub timeout: u64,
    /// connect() failed otherwise.
    pub connect: u64,
    /// Of `connect`: EADDRNOTAVAIL, local ports exhausted.
    pub addrnotavail: u64,
    /// A status other than 2xx/3xx.
    pub status: u64,
    /// A response HTTP/1.1 cannot parse.
    pub malformed: u64,
    /// The connection ended before the response did.
    pub truncated: u64,
    /// A body of the wrong length or content.
    pub content: u64,
}

impl HttpErrors {
    /// Counts one error of `kind`.
    pub fn add(&mut self, kind: ErrorKind, addrnotavail: bool) {
        let slot = match kind {
            ErrorKind::Refused => &mut self.refused,
            ErrorKind::Reset => &mut self.reset,
            ErrorKind::Timeout => &mut self.timeout,
            ErrorKind::Connect => &mut self.connect,
            ErrorKind::Status => &mut self.status,
            ErrorKind::Malformed => &mut self.malformed,
            ErrorKind::Truncated => &mut self.truncated,
            ErrorKind::Content => &mut self.content,
        };
        *slot += 1;
        if addrnotavail {
            self.addrnotavail += 1;
        }
    }

    /// Every error (addrnotavail is part of connect).
    pub fn total(&self) -> u64 {
        self.refused
            + self.reset
            + self.timeout
            + self.connect
            + self.status
            + self.malformed
            + self.truncated
            + self.content
    }

    fn merge(&mut self, o: &Self) {
        self.refused += o.refused;
        self.reset += o.reset;
        self.timeout += o.timeout;
        self.connect += o.connect;
        self.addrnotavail += o.addrnotavail;
        self.status += o.status;
        self.malformed += o.malformed;
        self.truncated += o.truncated;
        self.content += o.content;
    }
}

/// One SPECweb96 class's figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClassFigures {
    /// Class 0-3.
    pub class: u8,
    /// Its size range.
    pub label: String,
    /// Successful requests.
    pub requests: u64,
    /// Their share of all successful requests.
    pub share: Option<f64>,
    /// Their rate, per second.
    pub ops_per_s: Option<f64>,
    /// Response time to the last byte, µs.
    pub response_us: Percentiles,
    /// Response time to the first byte, µs.
    pub first_byte_us: Percentiles,
    /// Body bytes.
    pub bytes: u64,
}

/// The `summary` object of an HTTP result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpSummary {
    /// Successful requests (2xx or 3xx, body as framed) per second: SPECweb96's ops/s.
    pub ops_per_s: Option<f64>,
    /// Mean response time, ms (SPECweb96's second figure).
    pub mean_response_ms: Option<f64>,
    /// Response time to the last byte, µs: from the request's intended start in an open loop,
    /// from its connect (a new connection) or its write otherwise.
    pub response_us: Percentiles,
    /// Response time to the first byte, µs, from the same start.
    pub first_byte_us: Percentiles,
    /// connect() times of new connections, µs.
    pub connect_us: Percentiles,
    /// Body bytes received per second.
    pub bytes_per_s: Option<f64>,
    /// Successful requests.
    pub requests: u64,
    /// Failed requests.
    pub errors: u64,
}

/// An HTTP result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpResult {
    /// Common record.
    #[serde(flatten)]
    pub meta: RunMeta,
    /// What was asked.
    pub config: HttpConfig,
    /// Headline figures.
    pub summary: HttpSummary,
    /// Wall time, s.
    pub elapsed_s: f64,
    /// Per SPECweb96 class (only classes requested).
    pub classes: Vec<ClassFigures>,
    /// Open loop: response time from the actual send, µs (what a tool without the correction
    /// for coordinated omission would report).
    pub uncorrected_response_us: Option<Percentiles>,
    /// Responses by HTTP status.
    pub statuses: BTreeMap<u16, u64>,
    /// Failed requests per second (only seconds with failures).
    pub errors: Vec<HttpErrors>,
    /// Totals of `errors`.
    pub errors_total: HttpErrors,
    /// The first reason seen for each kind of error, e.g. "Content-Length \"x\" is not a number".
    pub error_examples: BTreeMap<String, String>,
    /// Connections opened.
    pub connections_opened: u64,
    /// SYN retransmissions, as `crr` counts them.
    pub syn_retrans: SynRetrans,
    /// TIME_WAIT on the client host.
    pub time_wait: TimeWait,
    /// TIME_WAIT on the server host (in a lab).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_time_wait: Option<TimeWait>,
    /// The server's kernel counters that moved during the run (in a lab), `Section.Name`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub server_counters: BTreeMap<String, u64>,
    /// What served: "builtin", "nginx", or "remote".
    pub server: String,
    /// Raw samples beyond the kept maximum.
    pub samples_dropped: u64,
    /// Raw samples, kept for --samples.
    #[serde(skip)]
    pub samples: Vec<HttpSample>,
}

/// One interval of a running HTTP load, as streamed with `--ndjson`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpInterval {
    /// Interval number from 0.
    pub index: u32,
    /// Start, s since the run started.
    pub start_s: f64,
    /// End, s.
    pub end_s: f64,
    /// Successful requests in the interval.
    pub ops: u64,
    /// Their rate, per second.
    pub ops_per_s: Option<f64>,
    /// Failed requests in the interval.
    pub errors: u64,
    /// TIME_WAIT sockets on the client host at the latest sample.
    pub time_wait: u64,
    /// TcpExt TCPSynRetrans of the client namespace during the interval.
    pub kernel_syn_retrans: Option<u64>,
}

/// What one event loop recorded.
#[derive(Debug)]
pub struct LoopRecord {
    /// Response time (last byte) of successful requests, ns.
    pub response: Histogram<u64>,
    /// First byte, ns.
    pub first_byte: Histogram<u64>,
    /// Per class: (last byte, first byte, bytes).
    pub class: [(Histogram<u64>, Histogram<u64>, u64); 4],
    /// connect() times, ns.
    pub connect: Histogram<u64>,
    /// Open loop: from the actual send.
    pub uncorrected: Option<Histogram<u64>>,
    /// Responses by status.
    pub statuses: BTreeMap<u16, u64>,
    /// Errors per second since the start.
    pub errors: Vec<HttpErrors>,
    /// First reason per error kind.
    pub examples: BTreeMap<String, String>,
    /// Body bytes of successful requests.
    pub bytes: u64,
    /// Connections opened.
    pub opened: u64,
    /// Raw samples.
    pub samples: Vec<HttpSample>,
    /// Samples not kept.
    pub dropped: u64,
}

impl LoopRecord {
    /// An empty record for a run that can last `seconds`, keeping at most `samples` raw samples.
    pub fn new(open: bool, seconds: u64, samples: usize) -> Self {
        let h = latency_histogram;
        Self {
            response: h(),
            first_byte: h(),
            class: std::array::from_fn(|_| (h(), h(), 0)),
            connect: h(),
            uncorrected: open.then(h),
            statuses: BTreeMap::new(),
            errors: vec![HttpErrors::default(); seconds as usize + 1],
            examples: BTreeMap::new(),
            bytes: 0,
            opened: 0,
            samples: Vec::with_capacity(samples),
            dropped: 0,
        }
    }

    /// Records a finished request. `t0` is the run's start.
    pub fn record(&mut self, s: HttpSample, t0: u64, failure: Option<(ErrorKind, bool, &str)>) {
        if s.connected_ns > 0 {
            let _ = self
                .connect
                .record(s.connected_ns.saturating_sub(s.start_ns).max(1));
        }
        if s.status > 0 {
            *self.statuses.entry(s.status).or_insert(0) += 1;
        }
        match failure {
            Some((kind, addrnotavail, reason)) => {
                let sec = (s.done_ns.saturating_sub(t0) / 1_000_000_000) as usize;
                let last = self.errors.len().saturating_sub(1);
                if let Some(e) = self.errors.get_mut(sec.min(last)) {
                    e.add(kind, addrnotavail);
                }
                if !self.examples.contains_key(kind.name()) {
                    self.examples.insert(kind.name().into(), reason.into());
                }
            }
            None => {
                let total = s.done_ns.saturating_sub(s.intended_ns).max(1);
                let first = s.first_byte_ns.saturating_sub(s.intended_ns).max(1);
                let _ = self.response.record(total);
                let _ = self.first_byte.record(first);
                if let Some(u) = self.uncorrected.as_mut() {
                    let _ = u.record(s.done_ns.saturating_sub(s.start_ns).max(1));
                }
                if let Some((last, fb, bytes)) = self.class.get_mut(usize::from(s.class)) {
                    let _ = last.record(total);
                    let _ = fb.record(first);
                    *bytes += u64::from(s.bytes);
                }
                self.bytes += u64::from(s.bytes);
            }
        }
        if self.samples.len() < self.samples.capacity() {
            self.samples.push(s);
        } else {
            self.dropped += 1;
        }
    }
}

/// Everything but the run's facts, merged from the loops.
pub fn assemble(
    cfg: &HttpConfig,
    mut meta: RunMeta,
    loops: Vec<LoopRecord>,
    elapsed_s: f64,
    time_wait: TimeWait,
    kernel_syn: Option<u64>,
) -> HttpResult {
    let h = latency_histogram;
    let (mut response, mut first_byte, mut connect) = (h(), h(), h());
    let mut uncorrected = cfg.rate.map(|_| h());
    let mut class: [(Histogram<u64>, Histogram<u64>, u64); 4] =
        std::array::from_fn(|_| (h(), h(), 0));
    let mut statuses = BTreeMap::new();
    let mut per_sec = vec![HttpErrors::default(); cfg.deadline_s() as usize + 1];
    let mut examples = BTreeMap::new();
    let (mut bytes, mut opened, mut dropped) = (0, 0, 0);
    let mut samples = Vec::new();
    for l in loops {
        let _ = response.add(&l.response);
        let _ = first_byte.add(&l.first_byte);
        let _ = connect.add(&l.connect);
        if let (Some(u), Some(lu)) = (uncorrected.as_mut(), l.uncorrected.as_ref()) {
            let _ = u.add(lu);
        }
        for (acc, c) in class.iter_mut().zip(&l.class) {
            let _ = acc.0.add(&c.0);
            let _ = acc.1.add(&c.1);
            acc.2 += c.2;
        }
        for (k, v) in l.statuses {
            *statuses.entry(k).or_insert(0) += v;
        }
        for (acc, e) in per_sec.iter_mut().zip(&l.errors) {
            acc.merge(e);
        }
        for (k, v) in l.examples {
            examples.entry(k).or_insert(v);
        }
        bytes += l.bytes;
        opened += l.opened;
        dropped += l.dropped;
        samples.extend(l.samples);
    }
    samples.sort_unstable_by_key(|s| s.intended_ns);
    let errors: Vec<HttpErrors> = per_sec
        .iter()
        .enumerate()
        .filter(|(_, e)| e.total() > 0)
        .map(|(i, e)| HttpErrors {
            second: i as u64,
            ..*e
        })
        .collect();
    let mut errors_total = HttpErrors::default();
    errors.iter().for_each(|e| errors_total.merge(e));
    errors_total.second = 0;
    let requests = response.len();
    if let Some(c) = cfg.count
        && requests + errors_total.total() < c
    {
        meta.cut(format!(
            "{} of {c} requests finished before the deadline",
            requests + errors_total.total()
        ));
    }
    let classes = class
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.0.is_empty())
        .map(|(i, c)| ClassFigures {
            class: i as u8,
            label: CLASS_LABELS[i].into(),
            requests: c.0.len(),
            share: ratio(c.0.len() as f64, requests as f64),
            ops_per_s: ratio(c.0.len() as f64, elapsed_s),
            response_us: Percentiles::from_ns(&c.0),
            first_byte_us: Percentiles::from_ns(&c.1),
            bytes: c.2,
        })
        .collect();
    let response_us = Percentiles::from_ns(&response);
    HttpResult {
        meta,
        config: cfg.clone(),
        summary: HttpSummary {
            ops_per_s: ratio(requests as f64, elapsed_s),
            mean_response_ms: response_us.mean.map(|us| us / 1e3),
            response_us,
            first_byte_us: Percentiles::from_ns(&first_byte),
            connect_us: Percentiles::from_ns(&connect),
            bytes_per_s: ratio(bytes as f64, elapsed_s),
            requests,
            errors: errors_total.total(),
        },
        elapsed_s,
        classes,
        uncorrected_response_us: uncorrected.as_ref().map(Percentiles::from_ns),
        statuses,
        errors,
        errors_total,
        error_examples: examples,
        connections_opened: opened,
        syn_retrans: SynRetrans {
            connects_near_1s: connect.count_between(800_000_000, 2_499_999_999),
            connects_near_3s: connect.count_between(2_500_000_000, u64::MAX / 2),
            kernel_syn_retrans: kernel_syn,
        },
        time_wait,
        server_time_wait: None,
        server_counters: BTreeMap::new(),
        server: "remote".into(),
        samples_dropped: dropped,
        samples,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(class: u8, start_ms: u64, ms: u64, bytes: u32) -> HttpSample {
        let start = 1_000_000_000 + start_ms * 1_000_000;
        HttpSample {
            intended_ns: start,
            start_ns: start,
            connected_ns: start + 100_000,
            first_byte_ns: start + ms * 500_000,
            done_ns: start + ms * 1_000_000,
            status: 200,
            class,
            error: NONE,
            bytes,
        }
    }

    #[test]
    fn figures_per_class_and_errors_per_second() {
        let cfg = HttpConfig {
            duration_ms: Some(2_000),
            ..HttpConfig::default()
        };
        let t0 = 1_000_000_000;
        let mut l = LoopRecord::new(false, cfg.deadline_s(), 10);
        l.record(sample(0, 0, 2, 102), t0, None);
        l.record(sample(1, 10, 4, 1024), t0, None);
        l.record(sample(1, 20, 6, 2048), t0, None);
        let mut bad = sample(2, 1_500, 1, 0);
        bad.status = 404;
        l.record(bad, t0, Some((ErrorKind::Status, false, "404 Not Found")));
        let mut ports = sample(NONE, 1_600, 1, 0);
        ports.status = 0;
        l.record(ports, t0, Some((ErrorKind::Connect, true, "EADDRNOTAVAIL")));
        let r = assemble(
            &cfg,
            RunMeta::default(),
            vec![l],
            2.0,
            TimeWait::default(),
            Some(0),
        );
        assert_eq!(r.summary.requests, 3);
        assert_eq!(r.summary.errors, 2);
        assert_eq!(r.summary.ops_per_s, Some(1.5));
        assert_eq!(r.summary.bytes_per_s, Some((102.0 + 1024.0 + 2048.0) / 2.0));
        let mean = r.summary.mean_response_ms.unwrap();
        assert!((mean - 4.0).abs() < 0.01, "{mean}");
        assert_eq!(r.classes.len(), 2);
        assert_eq!((r.classes[1].class, r.classes[1].requests), (1, 2));
        assert_eq!(r.classes[1].label, "1-9 KB");
        assert!((r.classes[1].share.unwrap() - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(r.errors.len(), 1);
        assert_eq!(r.errors[0].second, 1);
        assert_eq!((r.errors_total.status, r.errors_total.connect), (1, 1));
        assert_eq!(r.errors_total.addrnotavail, 1);
        assert_eq!(r.statuses.get(&404), Some(&1));
        assert_eq!(r.statuses.get(&200), Some(&3));
        assert_eq!(r.error_examples["status"], "404 Not Found");
        assert_eq!(r.samples.len(), 5);
        assert_eq!(r.summary.connect_us.n, 5);
    }

    #[test]
    fn an_open_loop_counts_from_the_intended_start() {
        let cfg = HttpConfig {
            rate: Some(100.0),
            ..HttpConfig::default()
        };
        let mut l = LoopRecord::new(true, cfg.deadline_s(), 0);
        let mut s = sample(1, 0, 1, 1024);
        // Meant to start 50 ms before it could: 51 ms corrected, 1 ms uncorrected.
        s.intended_ns -= 50_000_000;
        l.record(s, 0, None);
        assert_eq!(l.dropped, 1);
        let r = assemble(
            &cfg,
            RunMeta::default(),
            vec![l],
            1.0,
            TimeWait::default(),
            None,
        );
        let p50 = r.summary.response_us.p50.unwrap();
        assert!((p50 - 51_000.0).abs() < 60.0, "{p50}");
        let u = r.uncorrected_response_us.unwrap().p50.unwrap();
        assert!((u - 1_000.0).abs() < 2.0, "{u}");
    }
}
