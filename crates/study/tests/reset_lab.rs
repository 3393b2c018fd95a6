//! `reset = "reset"` in real labs (root): one lab serves every configuration, and before each
//! run it holds exactly that configuration's sysctls — the baseline, which sets none, sees the
//! fresh lab's values again after a configuration changed them — and an empty TCP metrics cache.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::process::Command;

use tcplab_lab::{Lab, Ownership, StateDir};
use tcplab_study::executor::LabExecutor;
use tcplab_study::labsession::LabSession;
use tcplab_study::{Plan, PlanOptions, ScenarioFile, Store, SweepOptions, sweep};

const SCENARIO: &str = r#"
name = "resetlab"
repetitions = 3
seed = 3
reset = "reset"
objective = { metric = "per_message_us.mean", goal = "minimise" }
baseline = { "socket.nodelay" = false }

[lab]
topology = "pair"

[[workload]]
kind = "msgs"
count = 3000
size = 1

[[factor]]
name = "socket.nodelay"
values = [true]

[[factor]]
name = "sysctl.all.\"net.ipv4.tcp_notsent_lowat\""
values = [16384, 131072]
"#;

fn root() {
    tcplab_lab::require_root("the study's lab tests").unwrap();
}

#[test]
fn one_lab_serves_every_configuration_with_exactly_its_sysctls() {
    root();
    let dir = tempfile::tempdir().unwrap();
    let file = ScenarioFile::parse("resetlab.toml", SCENARIO).unwrap();
    let plan = Plan::new(&file, PlanOptions::default()).unwrap();
    assert_eq!(plan.configurations.len(), 3, "2 grid points + the baseline");
    let store = Store::create(&dir.path().join("r.db"), &plan).unwrap();
    let mut exec = LabExecutor::new(StateDir::at(dir.path().join("state")), "rl");
    let report = sweep(&plan, &store, &mut exec, SweepOptions::default()).unwrap();
    assert_eq!(report.executed, 9);
    assert_eq!(exec.labs_built(), 1, "one lab for the whole study");
    let configs = store.configurations().unwrap();
    let runs = store.runs().unwrap();
    assert_eq!(runs.iter().filter(|r| r.status == "ok").count(), 9);
    let mut baseline_after_change = 0;
    for (i, r) in runs.iter().enumerate() {
        let c = configs.iter().find(|c| c.id == r.config_id).unwrap();
        let want = c
            .factors
            .iter()
            .find(|(n, _)| n.contains("tcp_notsent_lowat"))
            .map_or("4294967295", |(_, v)| v.as_str());
        for host in ["client", "server"] {
            let got = &r.facts["hosts"][host]["sysctls"]["net.ipv4.tcp_notsent_lowat"];
            assert_eq!(got, want, "run {i} ({}) on {host}", c.label);
        }
        if c.is_baseline && i > 0 && !configs[runs[i - 1].config_id].is_baseline {
            baseline_after_change += 1;
        }
        assert!(r.timing.workload_s > 0.0 && r.timing.lab_s >= 0.0);
        assert!(r.timing.workload_s < r.executor_wall_s, "{:?}", r.timing);
        // The harness's timed parts are there and fit, with the rest, in the executor's time.
        let t = r.timing;
        assert!(
            t.setup_s > 0.0 && t.report_s > 0.0 && t.summary_s > 0.0,
            "{t:?}"
        );
        assert!(
            t.workload_s + t.lab_s + t.encode_s + t.setup_s + t.report_s + t.summary_s
                < r.executor_wall_s,
            "{t:?} vs {}",
            r.executor_wall_s
        );
    }
    assert!(
        baseline_after_change > 0,
        "the order has the baseline right after a configuration that set the key"
    );
    let sessions = store.sessions().unwrap();
    assert_eq!(sessions.len(), 1);
    let o = sessions[0];
    assert!(o.workload_s > 0.0 && o.workload_s < o.wall_s && o.fraction > 0.0 && o.fraction < 1.0);
    assert!(
        (o.workload_s + o.lab_s + o.harness_s + o.encode_s + o.store_s + o.stats_s + o.other_s
            - o.wall_s)
            .abs()
            < 0.01 * o.wall_s,
        "the breakdown adds up to the wall time: {o:?}"
    );
    // The HTML report says where the time went.
    let input = tcplab_study::to_report::report_input(&store).unwrap();
    assert!(
        input
            .notes
            .iter()
            .any(|n| n.starts_with("sweep call 1: wall") && n.contains("overhead")),
        "{:?}",
        input.notes
    );
    // Samples come back as the text of docs/samples.md.
    let text = String::from_utf8(store.samples(runs[0].id).unwrap()).unwrap();
    assert!(text.starts_with("# tcplab-samples 1 workload=msgs\n# section=message"));
    assert_eq!(text.lines().count(), 2 + 3000);
}

fn metrics_entries(ns: &str) -> usize {
    let out = Command::new("ip")
        .args(["-n", ns, "tcp_metrics", "show"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

#[test]
fn a_reset_flushes_the_tcp_metrics_cache_and_restores_fresh_values() {
    root();
    let dir = tempfile::tempdir().unwrap();
    let file = ScenarioFile::parse("resetlab.toml", SCENARIO).unwrap();
    let plan = Plan::new(&file, PlanOptions::default()).unwrap();
    let config = &plan.configurations[0];
    let spec = config
        .lab_spec(&format!("rm{}", std::process::id() % 10_000))
        .unwrap();
    let build = |spec: &tcplab_lab::LabSpec| {
        let lab = Lab::build_in(
            StateDir::at(dir.path().join("state")),
            spec.clone(),
            Ownership::Process,
        )
        .unwrap();
        LabSession::start(lab, config.id).unwrap()
    };
    // Built with its sysctls, a lab cannot be reset: their fresh values were never seen.
    let mut session = build(&spec);
    let err = session.reset_to(&spec, config.id).unwrap_err().to_string();
    assert!(
        err.contains("built with net.ipv4.tcp_notsent_lowat"),
        "{err}"
    );
    session.close();
    let mut bare = spec.clone();
    bare.sysctls.clear();
    let mut session = build(&bare);
    let w = &config.settings.workloads[0];
    let addr = session.addr();
    let client = session.lab().host(session.client()).unwrap();
    client
        .run(|| tcplab_load::client::run(&w.spec, addr, None))
        .unwrap()
        .unwrap();
    let ns = client.netns_name().to_string();
    // Closed connections leave their RTT in the cache (allow the close to finish).
    let mut before = 0;
    for _ in 0..50 {
        before = metrics_entries(&ns);
        if before > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(before > 0, "the cache holds the server's entry after a run");
    session.reset_to(&spec, config.id).unwrap();
    assert_eq!(metrics_entries(&ns), 0, "flushed by the reset");
    // The kernel's own values, read back: the configuration's, then the fresh lab's again for
    // the baseline, which does not set the key.
    let key = "net.ipv4.tcp_notsent_lowat";
    let read = |s: &LabSession, host: &str| s.lab().read_sysctl(host, key).unwrap();
    assert_eq!(read(&session, "client"), "16384");
    let baseline = plan.baseline().unwrap();
    assert!(baseline.factors.iter().all(|(n, _)| !n.contains(key)));
    session
        .reset_to(&baseline.lab_spec("unused").unwrap(), baseline.id)
        .unwrap();
    for host in ["client", "server"] {
        assert_eq!(read(&session, host), "4294967295", "{host}");
    }
    let facts = session.facts().unwrap();
    assert_eq!(
        facts.hosts["server"].sysctls.get(key).map(String::as_str),
        Some("4294967295")
    );
    session.close();
}
