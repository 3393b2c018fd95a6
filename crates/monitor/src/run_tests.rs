use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Instant;

use tcplab_results::session::RunMeta;
use tcplab_results::stream::{StreamResult, StreamSummary};
use tcplab_stats::RegressionConfig;

use super::*;
use crate::core::Workload;
use crate::schedule::Cadence;

/// A fleet whose agents answer at once with a healthy stream result, and that fails the
/// test if two ever run on one host at once.
struct FakeFleet {
    busy: Mutex<BTreeSet<String>>,
    fail_to: Option<String>,
}

impl PairRunner for FakeFleet {
    fn run(&self, src: &MeshHost, dst: &MeshHost) -> Result<Report, String> {
        {
            let mut busy = self.busy.lock().unwrap();
            assert!(busy.insert(src.name.clone()), "{} in two tests", src.name);
            assert!(busy.insert(dst.name.clone()), "{} in two tests", dst.name);
        }
        std::thread::sleep(Duration::from_millis(5));
        {
            let mut busy = self.busy.lock().unwrap();
            busy.remove(&src.name);
            busy.remove(&dst.name);
        }
        if self.fail_to.as_deref() == Some(dst.name.as_str()) {
            return Err(format!("agent {}: connection refused", dst.name));
        }
        Ok(Report::Stream(StreamResult {
            meta: RunMeta {
                complete: true,
                ..RunMeta::default()
            },
            summary: StreamSummary {
                throughput_bps: Some(9.4e8),
                ..StreamSummary::default()
            },
            ..StreamResult::default()
        }))
    }
}

fn host(i: u16) -> MeshHost {
    MeshHost {
        name: format!("h{i}"),
        addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 5300 + i)),
        key: None,
    }
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
    let names = hosts.iter().map(|h| h.name.clone()).collect();
    let workloads = vec![Workload {
        label: "stream".into(),
        cadence: Cadence {
            every_ms: 100,
            jitter: 0.2,
        },
    }];
    let mut monitor = Monitor::new(
        names,
        workloads,
        1,
        unix_ms(),
        RegressionConfig::default(),
        &[],
    )
    .unwrap();
    let fleet: Arc<dyn PairRunner + Send + Sync> = Arc::new(FakeFleet {
        busy: Mutex::new(BTreeSet::new()),
        fail_to: Some("h4".into()),
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
        },
        Outputs {
            page: &page,
            on_event: &mut |_, _| events += 1,
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
    let snap = page.lock().unwrap().clone();
    assert_eq!(snap.hosts, 4);
    assert_eq!(snap.pairs.len(), 12, "every ordered pair ran");
}
