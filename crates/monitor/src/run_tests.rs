use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use tcplab_doctor::Severity;
use tcplab_results::session::RunMeta;
use tcplab_results::stream::{StreamResult, StreamSummary};
use tcplab_stats::RegressionConfig;

use super::*;
use crate::core::Workload;
use crate::evidence::Cause;
use crate::schedule::Cadence;

/// Which hosts are in a task now; a host taken twice is noted, not panicked on (a panic in a
/// task's thread would leave the coordinator waiting for it).
#[derive(Default)]
struct Hosts {
    busy: Mutex<BTreeSet<String>>,
    clashes: AtomicU64,
}

impl Hosts {
    fn hold(&self, src: &MeshHost, dst: &MeshHost, ms: u64) {
        {
            let mut busy = self.busy.lock().unwrap();
            for h in [&src.name, &dst.name] {
                if !busy.insert(h.clone()) {
                    self.clashes.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(ms));
        let mut busy = self.busy.lock().unwrap();
        busy.remove(&src.name);
        busy.remove(&dst.name);
    }
}

/// A fleet whose agents answer at once with a stream result: 940 Mbit/s, except toward
/// `fail_to` (no answer) and on `slow` from its `slow_after`th run on (a third of that).
struct FakeFleet {
    hosts: Arc<Hosts>,
    fail_to: Option<String>,
    slow: Option<(String, String)>,
    slow_after: u64,
    runs: AtomicU64,
}

impl FakeFleet {
    fn new(hosts: &Arc<Hosts>) -> FakeFleet {
        FakeFleet {
            hosts: hosts.clone(),
            fail_to: None,
            slow: None,
            slow_after: 0,
            runs: AtomicU64::new(0),
        }
    }
}

impl PairRunner for FakeFleet {
    fn run(&self, src: &MeshHost, dst: &MeshHost) -> Result<Report, String> {
        self.hosts.hold(src, dst, 5);
        if self.fail_to.as_deref() == Some(dst.name.as_str()) {
            return Err(format!("agent {}: connection refused", dst.name));
        }
        let mut bps = 9.4e8;
        if self.slow == Some((src.name.clone(), dst.name.clone()))
            && self.runs.fetch_add(1, Ordering::Relaxed) >= self.slow_after
        {
            bps /= 3.0;
        }
        Ok(Report::Stream(StreamResult {
            meta: RunMeta {
                complete: true,
                ..RunMeta::default()
            },
            summary: StreamSummary {
                throughput_bps: Some(bps),
                ..StreamSummary::default()
            },
            ..StreamResult::default()
        }))
    }
}

/// A doctor that holds the pair's hosts a while and finds a small receive window.
struct FakeDoctor {
    hosts: Arc<Hosts>,
    calls: Mutex<Vec<(String, String)>>,
}

impl PairDoctor for FakeDoctor {
    fn diagnose(&self, src: &MeshHost, dst: &MeshHost) -> Result<Vec<Finding>, String> {
        self.calls
            .lock()
            .unwrap()
            .push((src.name.clone(), dst.name.clone()));
        self.hosts.hold(src, dst, 50);
        Ok(vec![
            Finding::new("untrustworthy.cpu", Severity::Info, "cpu"),
            Finding::new("rwnd_limited", Severity::Warning, "window"),
        ])
    }
}

fn host(i: u16) -> MeshHost {
    MeshHost {
        name: format!("h{i}"),
        addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 5300 + i)),
        key: None,
    }
}

/// A monitor of `hosts` running stream every `every_ms`.
fn stream_monitor(hosts: &[MeshHost], every_ms: u64, jitter: f64) -> Monitor {
    let names = hosts.iter().map(|h| h.name.clone()).collect();
    let workloads = vec![Workload {
        label: "stream".into(),
        cadence: Cadence { every_ms, jitter },
    }];
    Monitor::new(
        names,
        workloads,
        1,
        unix_ms(),
        RegressionConfig::default(),
        &[],
    )
    .unwrap()
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Four hosts every 100 ms for about a second of real time: tests run, none shares a host,
/// each is recorded, a dead agent's tests count as failed, and a stop ends the loop.
#[test]
fn the_coordinator_runs_records_and_stops() {
    let dir = tempfile::tempdir().unwrap();
    let store = MonitorStore::open(&dir.path().join("m.db")).unwrap();
    let hosts: Vec<MeshHost> = (1..=4).map(host).collect();
    let mut monitor = stream_monitor(&hosts, 100, 0.2);
    let busy = Arc::new(Hosts::default());
    let fleet: Arc<dyn PairRunner + Send + Sync> = Arc::new(FakeFleet {
        fail_to: Some("h4".into()),
        ..FakeFleet::new(&busy)
    });
    let page = Mutex::new(Snapshot::default());
    let stop = Arc::new(AtomicBool::new(false));
    let stopper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1_000));
            stop.store(true, Ordering::Relaxed);
        })
    };
    let mut events = 0;
    let began = Instant::now();
    let totals = coordinate(
        &mut monitor,
        &store,
        Fleet {
            hosts: &hosts,
            runners: &vec![fleet],
            doctor: None,
        },
        Outputs {
            page: &page,
            on_notice: &mut |_| events += 1,
        },
        &unix_ms,
        &stop,
        Keep {
            for_ms: 3_600_000,
            per_slot: 1_000,
            prune_every_ms: 200,
        },
    )
    .unwrap();
    stopper.join().unwrap();
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "the stop was not prompt"
    );
    assert!(totals.runs >= 24, "{totals:?}");
    assert_eq!(store.run_count().unwrap(), totals.runs);
    assert!(
        totals.failed > 0 && totals.failed < totals.runs,
        "{totals:?}"
    );
    assert_eq!(events, 0);
    assert_eq!(
        busy.clashes.load(Ordering::Relaxed),
        0,
        "a host in two tests"
    );
    let snap = page.lock().unwrap().clone();
    assert_eq!(snap.hosts, 4);
    assert_eq!(snap.pairs.len(), 12, "every ordered pair ran");
}

/// A pair whose throughput falls to a third after 24 runs: the alert opens, the doctor runs on
/// that pair alone with both hosts to itself, and its finding becomes the alert's evidence,
/// the page's cause label and the notices' last word.
#[test]
fn a_regression_calls_the_doctor_on_its_pair_and_the_alert_names_its_finding() {
    let dir = tempfile::tempdir().unwrap();
    let store = MonitorStore::open(&dir.path().join("m.db")).unwrap();
    let hosts: Vec<MeshHost> = (1..=3).map(host).collect();
    let mut monitor = stream_monitor(&hosts, 20, 0.0);
    let busy = Arc::new(Hosts::default());
    let fleet: Arc<dyn PairRunner + Send + Sync> = Arc::new(FakeFleet {
        slow: Some(("h1".into(), "h2".into())),
        slow_after: 24,
        ..FakeFleet::new(&busy)
    });
    let doctor = Arc::new(FakeDoctor {
        hosts: busy.clone(),
        calls: Mutex::new(Vec::new()),
    });
    let as_doctor: Arc<dyn PairDoctor> = doctor.clone();
    let page = Mutex::new(Snapshot::default());
    let stop = AtomicBool::new(false);
    let mut notices: Vec<Notice> = Vec::new();
    let began = Instant::now();
    let mut on_notice = |n: &Notice| {
        notices.push(n.clone());
        if n.change == Change::Diagnosed {
            stop.store(true, Ordering::Relaxed);
        }
    };
    let stopper_deadline = Instant::now() + Duration::from_secs(30);
    let clock = || {
        if Instant::now() > stopper_deadline {
            stop.store(true, Ordering::Relaxed);
        }
        unix_ms()
    };
    let totals = coordinate(
        &mut monitor,
        &store,
        Fleet {
            hosts: &hosts,
            runners: &vec![fleet],
            doctor: Some(&as_doctor),
        },
        Outputs {
            page: &page,
            on_notice: &mut on_notice,
        },
        &clock,
        &stop,
        Keep {
            for_ms: 3_600_000,
            per_slot: 1_000,
            prune_every_ms: 1_000,
        },
    )
    .unwrap();
    assert!(
        began.elapsed() < Duration::from_secs(30),
        "no diagnosis came"
    );
    assert_eq!(
        busy.clashes.load(Ordering::Relaxed),
        0,
        "the doctor shared a host"
    );
    assert_eq!(
        *doctor.calls.lock().unwrap(),
        [("h1".to_string(), "h2".to_string())],
        "the doctor ran once, on the regressed pair"
    );
    assert_eq!(totals.diagnoses, 1);
    let changes: Vec<(Change, &str, &str)> = notices
        .iter()
        .map(|n| (n.change, n.alert.src.as_str(), n.alert.dst.as_str()))
        .collect();
    assert_eq!(
        changes,
        [
            (Change::Opened, "h1", "h2"),
            (Change::Diagnosed, "h1", "h2")
        ]
    );
    let evidence = notices[1].alert.evidence.as_ref().unwrap();
    assert_eq!(
        evidence.cause,
        Cause::Found {
            id: "rwnd_limited".into()
        }
    );
    assert_eq!(evidence.findings.len(), 1, "info findings are not evidence");
    let stored = store.alerts(true).unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].evidence.as_ref(), Some(evidence));
    let page = crate::metrics::render(&page.lock().unwrap()).unwrap();
    assert!(
        page.lines()
            .any(|l| l.starts_with("tcplab_pair_regression{")
                && l.contains("src=\"h1\"")
                && l.contains("dst=\"h2\"")
                && l.contains("cause=\"rwnd_limited\"")
                && l.ends_with(" 1")),
        "{page}"
    );
}
