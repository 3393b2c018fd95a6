//! Running the mesh: each step's pairs on their own threads, each test asked of its source
//! agent (`Ask::Run`: the agent is the client, toward the destination's agent), each row
//! written to the database by this thread as its test ends. A stop request (Ctrl-C) lets the
//! tests in flight end and records them; nothing else starts.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tcplab_results::spec::WorkloadSpec;

use tcplab_auth::{ClientAuth, PublicKey};
use tcplab_load::Report;

use super::outcome::figures;
use super::schedule::Step;
use super::store::{EmulatorVerdict, MeshStore, PairRow, StoreError};

/// A host of the mesh: where its agent listens and the key it proves.
#[derive(Debug, Clone, PartialEq)]
pub struct MeshHost {
    /// Its name in the hosts file.
    pub name: String,
    /// Its agent's control address.
    pub addr: SocketAddr,
    /// The agent's public key (None: an unauthenticated lab agent).
    pub key: Option<PublicKey>,
}

/// Runs one pair's test: its result, or why there is none.
pub trait PairRunner: Sync {
    /// `src`'s agent runs the client side toward `dst`'s agent.
    fn run(&self, src: &MeshHost, dst: &MeshHost) -> Result<Report, String>;
}

/// The real runner: asks the source agent to run `test` toward the destination.
#[derive(Debug)]
pub struct AgentPairs {
    /// The coordinator's credentials per host name, each pinning that host's agent's key (a
    /// fleet may mix pinned agents with unpinned lab ones).
    pub auth: std::collections::BTreeMap<String, ClientAuth>,
    /// The test every pair runs.
    pub test: WorkloadSpec,
    /// How long the coordinator waits for an agent's answer beyond the test's own bound.
    pub timeout: Duration,
}

impl PairRunner for AgentPairs {
    fn run(&self, src: &MeshHost, dst: &MeshHost) -> Result<Report, String> {
        let auth = self
            .auth
            .get(&src.name)
            .ok_or_else(|| format!("no credentials for host {}", src.name))?;
        tcplab_agent::remote::run_from(
            src.addr,
            auth,
            dst.addr,
            dst.key,
            self.test.clone(),
            self.timeout,
        )
        .map_err(|e| format!("agent {} ({}): {e}", src.name, src.addr))
    }
}

/// Watches what the tests of a step crossed (a lab's emulator): its state before the step, and
/// its verdict over the step from that state.
pub trait StepWatch {
    /// The state before a step (None: it could not be read; the step is then judged so).
    fn before(&self) -> Option<serde_json::Value>;
    /// The verdict over the step that began at `before`.
    fn verdict(&self, before: Option<serde_json::Value>) -> EmulatorVerdict;
}

/// What the run cost, for the harness-overhead figure.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MeshTiming {
    /// Wall time of the whole run, s.
    pub wall_s: f64,
    /// Tests run (done or failed).
    pub tests: usize,
    /// Steps run.
    pub steps: usize,
    /// Sum over steps of the longest test's wall time, s: the run's wall time if the harness
    /// cost nothing between tests.
    pub critical_s: f64,
    /// Sum of each test's harness wall time minus its workload's own time, s.
    pub per_test_overhead_s: f64,
    /// Sum of the workloads' own times, s.
    pub workload_s: f64,
}

/// Runs `steps` among `hosts` with `runner`, recording every pair in `store`, and with `watch`
/// the emulator's verdict over each step on its pairs; `seen` is called with each row as it is
/// recorded (progress). Stops before the next step once `stop` is set.
pub fn run_mesh(
    hosts: &[MeshHost],
    steps: &[Step],
    runner: &dyn PairRunner,
    store: &MeshStore,
    stop: &AtomicBool,
    watch: Option<&dyn StepWatch>,
    seen: &mut dyn FnMut(&PairRow),
) -> Result<MeshTiming, StoreError> {
    let start = Instant::now();
    let mut timing = MeshTiming::default();
    for step in steps {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        timing.steps += 1;
        let (tx, rx) = mpsc::channel::<(PairRow, Option<serde_json::Value>)>();
        let mut longest = 0.0f64;
        let mut failure: Option<StoreError> = None;
        let before = watch.map(|w| w.before());
        std::thread::scope(|scope| {
            for pair in &step.pairs {
                let (src, dst) = (&hosts[pair.src], &hosts[pair.dst]);
                let tx = tx.clone();
                let round = step.round;
                scope.spawn(move || {
                    let _ = tx.send(one(runner, src, dst, round));
                });
            }
            drop(tx);
            // Rows are written here, as each test ends, while the others still run.
            for (row, result) in rx {
                longest = longest.max(row.wall_s);
                timing.tests += 1;
                if let Some(f) = &row.figures {
                    timing.workload_s += f.workload_s;
                    timing.per_test_overhead_s += (row.wall_s - f.workload_s).max(0.0);
                }
                if failure.is_none()
                    && let Err(e) = store.record(&row, result.as_ref())
                {
                    failure = Some(e);
                }
                seen(&row);
            }
        });
        if let Some(e) = failure {
            return Err(e);
        }
        if let (Some(w), Some(before)) = (watch, before) {
            let pairs: Vec<(String, String)> = step
                .pairs
                .iter()
                .map(|p| (hosts[p.src].name.clone(), hosts[p.dst].name.clone()))
                .collect();
            store.set_emulator(&pairs, &w.verdict(before))?;
        }
        timing.critical_s += longest;
    }
    timing.wall_s = start.elapsed().as_secs_f64();
    Ok(timing)
}

/// One pair's test, timed, as a row.
fn one(
    runner: &dyn PairRunner,
    src: &MeshHost,
    dst: &MeshHost,
    round: usize,
) -> (PairRow, Option<serde_json::Value>) {
    let started_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let t0 = Instant::now();
    let outcome = runner.run(src, dst);
    let wall_s = t0.elapsed().as_secs_f64();
    let mut row = PairRow {
        src: src.name.clone(),
        dst: dst.name.clone(),
        round,
        figures: None,
        failure: None,
        started_unix_ms,
        wall_s,
        emulator: None,
    };
    match outcome {
        // The database keeps the result as `tcplab <workload> --json` prints it.
        Ok(report) => match (figures(&report), serde_json::to_value(&report)) {
            (Ok(f), Ok(json)) => {
                row.figures = Some(f);
                return (row, Some(json));
            }
            (Err(why), _) => row.failure = Some(why),
            (_, Err(e)) => row.failure = Some(format!("the result cannot be stored: {e}")),
        },
        Err(why) => row.failure = Some(why),
    }
    (row, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::schedule::{Pair, tournament, without};
    use crate::mesh::store::MeshIdentity;
    use std::collections::BTreeSet;
    use std::sync::Mutex;
    use tcplab_load::Report;
    use tcplab_load::msgs::{MsgsResult, MsgsRun};

    /// Answers every pair with a msgs result, except pairs whose source is `down`; records who
    /// ran when, to check no host is in two tests at once.
    struct Mock {
        down: Option<String>,
        busy: Mutex<BTreeSet<String>>,
        overlap: AtomicBool,
    }

    impl Mock {
        fn with_down(down: Option<&str>) -> Mock {
            Mock {
                down: down.map(String::from),
                busy: Mutex::new(BTreeSet::new()),
                overlap: AtomicBool::new(false),
            }
        }
    }

    impl PairRunner for Mock {
        fn run(&self, src: &MeshHost, dst: &MeshHost) -> Result<Report, String> {
            if self.down.as_deref() == Some(&src.name) || self.down.as_deref() == Some(&dst.name) {
                return Err(format!("agent {}: connection refused", src.name));
            }
            {
                let mut b = self.busy.lock().unwrap();
                if !b.insert(src.name.clone()) || !b.insert(dst.name.clone()) {
                    self.overlap.store(true, Ordering::Relaxed);
                }
            }
            std::thread::sleep(Duration::from_millis(2));
            {
                let mut b = self.busy.lock().unwrap();
                b.remove(&src.name);
                b.remove(&dst.name);
            }
            let r = Report::Msgs(MsgsResult {
                runs: vec![MsgsRun {
                    count: 10,
                    received: 10,
                    stalls: 1,
                    total_s: 0.001,
                    ..MsgsRun::default()
                }],
                ..MsgsResult::default()
            });
            Ok(r)
        }
    }

    fn hosts(n: usize) -> Vec<MeshHost> {
        (0..n)
            .map(|i| MeshHost {
                name: format!("h{i}"),
                addr: SocketAddr::from(([198, 18, 0, i as u8 + 1], 5301)),
                key: None,
            })
            .collect()
    }

    fn identity(h: &[MeshHost]) -> MeshIdentity {
        MeshIdentity {
            hosts: h
                .iter()
                .map(|h| (h.name.clone(), h.addr.to_string()))
                .collect(),
            workload: "msgs".into(),
            test: "{}".into(),
        }
    }

    #[test]
    fn a_down_agent_fails_its_pairs_with_the_reason_and_resume_finishes_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        let h = hosts(6);
        let steps = tournament(6);
        let mock = Mock::with_down(Some("h2"));
        let store = MeshStore::open(&path, &identity(&h), false).unwrap();
        let stop = AtomicBool::new(false);
        let mut rows = 0;
        let t = run_mesh(&h, &steps, &mock, &store, &stop, None, &mut |_| rows += 1).unwrap();
        assert_eq!((t.tests, rows), (30, 30));
        assert!(
            !mock.overlap.load(Ordering::Relaxed),
            "a host ran two tests at once"
        );
        let stored = store.rows().unwrap();
        let failed: Vec<_> = stored.iter().filter(|r| r.failure.is_some()).collect();
        assert_eq!(failed.len(), 10, "h2's 5 outgoing and 5 incoming pairs");
        assert!(
            failed[0]
                .failure
                .as_deref()
                .unwrap()
                .contains("connection refused")
        );
        drop(store);

        // The agent is back: --resume runs only the failed pairs.
        let store = MeshStore::open(&path, &identity(&h), true).unwrap();
        let index = |n: &str| h.iter().position(|x| x.name == n).unwrap();
        let done: BTreeSet<Pair> = store
            .rows()
            .unwrap()
            .iter()
            .filter(|r| r.failure.is_none())
            .map(|r| Pair {
                src: index(&r.src),
                dst: index(&r.dst),
            })
            .collect();
        let rest = without(tournament(6), &done);
        let mock = Mock { down: None, ..mock };
        let t = run_mesh(&h, &rest, &mock, &store, &stop, None, &mut |_| {}).unwrap();
        assert_eq!(t.tests, 10);
        assert!(store.rows().unwrap().iter().all(|r| r.failure.is_none()));
    }

    /// An emulator that fell behind in every step after the first.
    struct LateAfterFirst(std::sync::atomic::AtomicUsize);

    impl StepWatch for LateAfterFirst {
        fn before(&self) -> Option<serde_json::Value> {
            Some(serde_json::json!(self.0.fetch_add(1, Ordering::Relaxed)))
        }
        fn verdict(&self, before: Option<serde_json::Value>) -> EmulatorVerdict {
            let first = before == Some(serde_json::json!(0));
            EmulatorVerdict {
                trustworthy: first,
                reasons: if first { vec![] } else { vec!["late".into()] },
            }
        }
    }

    #[test]
    fn the_emulator_verdict_of_a_step_lands_on_its_pairs() {
        let dir = tempfile::tempdir().unwrap();
        let h = hosts(4);
        let store = MeshStore::open(&dir.path().join("m.db"), &identity(&h), false).unwrap();
        let mock = Mock::with_down(None);
        let steps = tournament(4);
        let watch = LateAfterFirst(Default::default());
        let stop = AtomicBool::new(false);
        run_mesh(&h, &steps, &mock, &store, &stop, Some(&watch), &mut |_| {}).unwrap();
        let rows = store.rows().unwrap();
        let trusted: BTreeSet<(String, String)> = rows
            .iter()
            .filter(|r| r.emulator.as_ref().is_some_and(|e| e.trustworthy))
            .map(|r| (r.src.clone(), r.dst.clone()))
            .collect();
        let first: BTreeSet<(String, String)> = steps[0]
            .pairs
            .iter()
            .map(|p| (h[p.src].name.clone(), h[p.dst].name.clone()))
            .collect();
        assert_eq!(trusted, first);
        assert!(rows.iter().all(|r| r.emulator.is_some()));
    }

    #[test]
    fn a_stop_request_starts_nothing_more() {
        let dir = tempfile::tempdir().unwrap();
        let h = hosts(4);
        let store = MeshStore::open(&dir.path().join("m.db"), &identity(&h), false).unwrap();
        let mock = Mock::with_down(None);
        let stop = AtomicBool::new(true);
        let t = run_mesh(&h, &tournament(4), &mock, &store, &stop, None, &mut |_| {}).unwrap();
        assert_eq!(t.tests, 0);
    }
}
