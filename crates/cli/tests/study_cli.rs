//! The shipped scenarios run end to end at a reduced size (`--quick`), as CI runs them: every
//! configuration in a real lab, results stored, the table printed, the HTML report written.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name)
}

fn tcplab(dir: &Path, args: &[&str]) -> Output {
    assert!(
        rustix::process::geteuid().is_root(),
        "run the CLI tests as root"
    );
    Command::new(env!("CARGO_BIN_EXE_tcplab"))
        .env("TCPLAB_STATE_DIR", dir.join("state"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

fn study(file: &str) -> (tempfile::TempDir, String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("study.db");
    let out = tcplab(
        dir.path(),
        &[
            "sweep",
            scenario(file).to_str().unwrap(),
            "--quick",
            "--db",
            db.to_str().unwrap(),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        dir.path().join("study.html").exists(),
        "the HTML report is written"
    );
    let dump = tcplab(dir.path(), &["report", db.to_str().unwrap(), "--json"]);
    assert!(dump.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&dump.stdout).unwrap();
    (dir, stdout, doc)
}

#[test]
fn sfperf_quick_ranks_settings_from_real_runs() {
    let (_dir, table, doc) = study("sfperf.toml");
    assert!(table.contains("per_message_us.mean"), "{table}");
    assert!(table.contains("baseline"), "{table}");
    let runs = doc["runs"].as_array().unwrap();
    let ok: Vec<_> = runs.iter().filter(|r| r["status"] == "ok").collect();
    assert!(
        ok.len() >= 30,
        "17 configurations x 2 repetitions, nearly all ok: {}",
        ok.len()
    );
    for r in &ok {
        let us = r["metrics"]["per_message_us.mean"].as_f64().unwrap();
        assert!(us > 0.05 && us < 1_000.0, "per-message cost {us} µs");
        assert_eq!(r["metrics"]["count"].as_f64().unwrap_or(5000.0), 5000.0);
    }
}

#[test]
fn balticgrid_quick_shows_the_buffer_effect_at_long_rtt() {
    let (dir, table, doc) = study("balticgrid.toml");
    assert!(table.contains("throughput_bps"), "{table}");
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(
        runs.iter().filter(|r| r["status"] == "ok").count(),
        54,
        "6 RTTs x 3 buffer settings x 3 cc"
    );
    let summaries = doc["summaries"].as_array().unwrap();
    // Mean throughput over the three congestion controls for one delay and buffer setting.
    let mean_of = |delay: &str, buffers: &str| -> f64 {
        let v: Vec<f64> = summaries
            .iter()
            .filter(|s| {
                let f = s["config"]["factors"].to_string();
                f.contains(&format!("\"{delay}\"")) && f.contains(&format!("\"{buffers}\""))
            })
            .map(|s| s["objective"]["summary"]["mean"].as_f64().unwrap())
            .collect();
        assert_eq!(v.len(), 3, "{delay} {buffers}");
        v.iter().sum::<f64>() / v.len() as f64
    };
    // At 40 ms RTT a 174,760-byte window caps a flow near 35 Mbit/s; the tuned buffers do far
    // better even in half a second.
    let (sl4, tuned) = (mean_of("20ms", "sl4"), mean_of("20ms", "tuned"));
    assert!(sl4 < 60e6, "sl4 buffers at 40 ms RTT: {sl4}");
    assert!(tuned > 2.0 * sl4, "tuned {tuned} vs sl4 {sl4}");
    // The emulator's verdict travels with every run.
    assert!(runs.iter().all(|r| r.get("trustworthy").is_some()));
    // And the report command renders the stored study again.
    let db = dir.path().join("study.db");
    let html = dir.path().join("again.html");
    let out = tcplab(
        dir.path(),
        &[
            "report",
            db.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
        ],
    );
    assert!(out.status.success());
    let page = std::fs::read_to_string(html).unwrap();
    assert!(
        page.contains("<svg") && page.contains("link.delay"),
        "plots and factors in the page"
    );
}

#[test]
fn a_bad_scenario_is_refused_with_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(
        &file,
        "name = \"x\"\nobjective = { metric = \"total_s\", goal = \"minimise\" }\n[lab]\ntopology = \"pair\"\n[[workload]]\nkind = \"msgs\"\nsizee = 1\n",
    )
    .unwrap();
    let out = tcplab(dir.path(), &["sweep", file.to_str().unwrap(), "--dry-run"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml:7") && err.contains("sizee") && err.contains("did you mean `size`"),
        "{err}"
    );
}

#[test]
fn a_sweep_against_a_remote_host_refuses_settings_that_need_a_lab() {
    let dir = tempfile::tempdir().unwrap();
    let out = tcplab(
        dir.path(),
        &[
            "sweep",
            scenario("timewait.toml").to_str().unwrap(),
            "--to",
            "198.18.0.101",
            "--dry-run",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--to: configuration 0") && err.contains("needs a lab"),
        "{err}"
    );
}

/// Mean objective of the configurations whose factors contain every `needle`.
fn mean_where(doc: &serde_json::Value, needles: &[&str]) -> f64 {
    let v: Vec<f64> = doc["summaries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            let f = s["config"]["factors"].to_string();
            needles.iter().all(|n| f.contains(n))
        })
        .filter_map(|s| s["objective"]["summary"]["mean"].as_f64())
        .collect();
    assert!(!v.is_empty(), "no configuration with {needles:?}");
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn timewait_quick_shows_the_narrow_port_range_cost() {
    let (_dir, _table, doc) = study("timewait.toml");
    let narrow = mean_where(&doc, &["32768 33767", "\"2\""]);
    let wide = mean_where(&doc, &["1024 65535"]);
    assert!(
        narrow < 0.5 * wide,
        "1000 ports fill with TIME_WAIT: {narrow} vs {wide} connections/s"
    );
}

#[test]
fn stall41_quick_shows_the_delayed_ack_stall_and_its_fix() {
    let (_dir, _table, doc) = study("stall41.toml");
    let nagle = mean_where(&doc, &["\"64\"", "\"false\""]);
    let nodelay = mean_where(&doc, &["\"64\"", "\"true\""]);
    assert!(
        nagle > 20_000.0,
        "write-write-read with Nagle waits ~40 ms per message: {nagle} us"
    );
    assert!(
        nodelay < 5_000.0,
        "TCP_NODELAY removes the stall: {nodelay} us"
    );
}

#[test]
fn permessage_quick_runs_on_the_100_mbit_emulated_link() {
    let (_dir, table, doc) = study("permessage.toml");
    assert!(table.contains("per_message_us.mean"));
    let all = mean_where(&doc, &[]);
    assert!(all > 0.05 && all < 500.0, "{all} us per message");
}

#[test]
fn demo_produces_its_report_within_a_small_budget() {
    let dir = tempfile::tempdir().unwrap();
    // 34 s: doctor gets 30% of it, 10.2 s, just above the battery's 10 s floor (its findings
    // still land in the report: the small buffers, and at info the rr/crr parts too short to
    // judge at 30 ms RTT). tune's race and verification stay at their floor (3 repetitions of
    // 3 s streams, then 5 each) for any demo budget under 2 minutes, so a larger budget here
    // only lengthens the diagnosis.
    let out = tcplab(
        dir.path(),
        &[
            "demo",
            "--budget",
            "34s",
            "--dir",
            dir.path().join("demo").to_str().unwrap(),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("report: "), "{stdout}");
    let page = std::fs::read_to_string(dir.path().join("demo/demo-report.html")).unwrap();
    assert!(
        page.contains("<svg") && page.contains("doctor ["),
        "findings and plots in the report"
    );
    // The demo's own labs (diagnosis "dg", tune "tn") are gone when it returns.
    let left: Vec<String> = tcplab_lab::netns::list()
        .into_iter()
        .filter(|n| n.starts_with("tcplab-dg") || n.starts_with("tcplab-tn"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The binary as any user: `report` only reads databases, so these tests need neither root
/// nor a lab.
fn tcplab_user(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcplab"))
        .env("TCPLAB_STATE_DIR", dir.join("state"))
        .env("NO_COLOR", "1")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

/// The mock executor with `kernel` among each run's facts, as a lab's facts would say.
struct KernelFacts {
    inner: tcplab_study::mock::MockExecutor,
    kernel: &'static str,
}

impl tcplab_study::runner::Executor for KernelFacts {
    fn run(
        &mut self,
        run: &tcplab_study::plan::PlannedRun,
    ) -> Result<tcplab_study::runner::RunOutcome, tcplab_study::RunError> {
        let mut outcome = self.inner.run(run)?;
        outcome.facts["kernel"] = serde_json::json!(self.kernel);
        Ok(outcome)
    }
}

/// A study database written through the study crate with the mock executor: bbr and cubic at
/// the given mean throughputs (bit/s, ±1% noise), 4 runs each.
fn mock_study(path: &Path, goal: &str, (bbr, cubic): (f64, f64), kernel: &'static str) {
    use tcplab_study::{Plan, PlanOptions, ScenarioFile, Store, SweepOptions, sweep};
    let text = format!(
        "name = \"wan\"\nrepetitions = 4\nseed = 3\nobjective = {{ metric = \"throughput_bps\", goal = \"{goal}\" }}\n[lab]\ntopology = \"pair\"\n[[workload]]\nkind = \"stream\"\nduration = \"1s\"\n[[factor]]\nname = \"socket.congestion\"\nvalues = [\"bbr\", \"cubic\"]\n"
    );
    let plan = Plan::new(
        &ScenarioFile::parse("wan.toml", &text).unwrap(),
        PlanOptions::default(),
    )
    .unwrap();
    let store = Store::create(path, &plan).unwrap();
    let mean = Box::new(move |c: &tcplab_study::plan::Configuration| {
        match tcplab_study::mock::factor(c, "socket.congestion") {
            Some("bbr") => Ok(bbr),
            _ => Ok(cubic),
        }
    });
    let inner = tcplab_study::mock::MockExecutor::new("throughput_bps", mean, 0.01, 11);
    let mut exec = KernelFacts { inner, kernel };
    sweep(&plan, &store, &mut exec, SweepOptions::default()).unwrap();
}

#[test]
fn report_puts_two_studies_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    mock_study(
        dir.path().join("before.db").as_path(),
        "maximise",
        (500e6, 350e6),
        "6.1.0",
    );
    mock_study(
        dir.path().join("after.db").as_path(),
        "maximise",
        (600e6, 350e6),
        "6.8.0",
    );
    let (before, after) = (at("before.db"), at("after.db"));

    let out = tcplab_user(dir.path(), &["report", &before, &after]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("after vs before: 1 of 2 configurations faster"),
        "{text}"
    );
    assert!(text.contains("1.20x faster"), "{text}");
    assert!(text.contains("throughput (Mbit/s)"), "{text}");
    assert!(
        text.contains("kernel: before 6.1.0 · after 6.8.0"),
        "{text}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");

    let page = at("compare.html");
    let out = tcplab_user(dir.path(), &["report", &before, &after, "--html", &page]);
    assert!(out.status.success());
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<svg") && html.contains("class=\"legend\""),
        "the plot"
    );
    assert!(html.contains("id=\"verdict\"") && html.contains("Facts that differ"));

    let out = tcplab_user(dir.path(), &["report", &before, &after, "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["objective"]["metric"], "throughput_bps");
    assert_eq!(doc["studies"][1]["name"], "after");

    // One database: the study's own report, as before.
    let out = tcplab_user(dir.path(), &["report", &before]);
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains(" vs "));
}

#[test]
fn report_refuses_what_it_cannot_compare_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    mock_study(
        dir.path().join("a.db").as_path(),
        "maximise",
        (900e6, 700e6),
        "6.1.0",
    );
    mock_study(
        dir.path().join("min.db").as_path(),
        "minimise",
        (900e6, 700e6),
        "6.1.0",
    );
    std::fs::write(dir.path().join("notes.db"), "not a database, just words\n").unwrap();
    let cases: [(Vec<String>, &str); 4] = [
        (
            vec![at("a.db"), at("missing.db")],
            "missing.db: no such study database",
        ),
        (
            vec![at("a.db"), at("notes.db")],
            "notes.db: not a tcplab study database",
        ),
        (
            vec![at("a.db"), at("min.db")],
            "objective minimise throughput_bps differs from",
        ),
        (
            vec![at("a.db"), at("a.db"), "--csv".into(), at("x.csv")],
            "--csv: the runs are exported one study at a time",
        ),
    ];
    for (args, wanted) in cases {
        let mut argv = vec!["report"];
        argv.extend(args.iter().map(String::as_str));
        let out = tcplab_user(dir.path(), &argv);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{argv:?}: {err}");
        assert!(err.contains(wanted), "{argv:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
    let out = tcplab_user(dir.path(), &["report", &at("a.db"), &at("min.db")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("a.db's maximise throughput_bps"),
        "both files: {err}"
    );
}
