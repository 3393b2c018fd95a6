//! Scenario parsing, validation messages and expansion.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

use std::collections::BTreeMap;

use tcplab_study::{Plan, PlanOptions, ScenarioError, ScenarioFile};

const BASE: &str = r#"
name = "t"
repetitions = 4
objective = { metric = "per_message_us.mean", goal = "minimise" }

[lab]
topology = "path"

[lab.link]
delay = "5ms"

[[workload]]
kind = "msgs"
count = 1000
size = 1
"#;

fn err(text: &str) -> ScenarioError {
    match ScenarioFile::parse("s.toml", text) {
        Ok(f) => Plan::new(&f, PlanOptions::default()).unwrap_err(),
        Err(e) => e,
    }
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[test]
fn unknown_workload_field_has_line_field_and_suggestion() {
    let text = format!("{BASE}sizee = 3\n");
    let e = err(&text);
    let d = e.first().unwrap();
    assert_eq!(d.file, "s.toml");
    assert_eq!(d.line, Some(line_of(&text, "sizee")));
    assert_eq!(d.field, "workload[0].sizee");
    assert!(d.message.contains("did you mean `size`"), "{d}");
    let shown = e.to_string();
    assert!(
        shown.starts_with(&format!("s.toml:{}:", line_of(&text, "sizee"))),
        "{shown}"
    );
}

#[test]
fn unknown_top_level_and_lab_fields_are_rejected() {
    let text = BASE.replace("repetitions = 4", "repetitons = 4");
    let d = err(&text).first().cloned().unwrap();
    assert_eq!(d.line, Some(line_of(&text, "repetitons")));
    assert!(d.message.contains("did you mean `repetitions`"), "{d}");

    let text = BASE.replace("delay = \"5ms\"", "dealy = \"5ms\"");
    let d = err(&text).first().cloned().unwrap();
    assert_eq!(d.line, Some(line_of(&text, "dealy")));
    assert_eq!(d.field, "lab.link.dealy");
    assert!(d.message.contains("did you mean `delay`"), "{d}");
}

/// A `[lab.link]` value that does not parse is refused when the file is read, naming its key;
/// a combination a factor may complete (a queue whose rate is a factor) is not.
#[test]
fn a_bad_link_value_is_refused_at_read_time_naming_its_key() {
    let text = BASE.replace("delay = \"5ms\"", "delay = \"5ms\"\nloss = \"1 lightyear\"");
    let e = ScenarioFile::parse("s.toml", &text).unwrap_err();
    let d = e.first().cloned().unwrap();
    assert_eq!(d.field, "lab.link.loss");
    assert_eq!(d.line, Some(line_of(&text, "lightyear")));
    assert!(d.message.starts_with("--loss 1 lightyear:"), "{d}");

    let text = BASE.replace("delay = \"5ms\"", "jitter_dist = \"table:x.dist\"");
    let d = ScenarioFile::parse("s.toml", &text).unwrap_err();
    let d = d.first().cloned().unwrap();
    assert_eq!(d.field, "lab.link.jitter_dist");
    assert!(d.message.contains("reads no files"), "{d}");

    let text = format!(
        "{}\n[[factor]]\nname = \"link.rate\"\nvalues = [\"10mbit\", \"1gbit\"]\n",
        BASE.replace("delay = \"5ms\"", "queue = \"100\"")
    );
    let file = ScenarioFile::parse("s.toml", &text).unwrap();
    Plan::new(&file, PlanOptions::default()).unwrap();
}

#[test]
fn bad_toml_reports_its_line() {
    let text = format!("{BASE}count = = 3\n");
    let d = err(&text).first().cloned().unwrap();
    assert_eq!(d.line, Some(line_of(&text, "count = =")));
}

#[test]
fn bad_workload_value_names_the_field() {
    let text = BASE.replace("count = 1000", "count = 1000\npace = \"5 parsecs\"");
    let d = err(&text).first().cloned().unwrap();
    assert!(d.line.is_some(), "{d}");
    assert!(
        d.message.contains("parsecs") || d.message.contains("unit"),
        "{d}"
    );
}

#[test]
fn factor_errors_name_the_factor_and_line() {
    let text = format!(
        "{BASE}\n[[factor]]\nname = \"link.delay\"\nvalues = []\n\n[[factor]]\nname = \"socket.nodelai\"\nvalues = [true]\n"
    );
    let e = err(&text);
    assert_eq!(e.diagnostics.len(), 2, "{e}");
    let empty = &e.diagnostics[0];
    assert_eq!(empty.field, "factor[0].values");
    assert_eq!(empty.line, Some(line_of(&text, "values = []")));
    assert!(
        empty.message.contains("`link.delay`") && empty.message.contains("empty"),
        "{empty}"
    );
    let typo = &e.diagnostics[1];
    assert_eq!(typo.field, "factor[1].name");
    assert_eq!(typo.line, Some(line_of(&text, "socket.nodelai")));
    assert!(typo.message.contains("did you mean `nodelay`"), "{typo}");
}

#[test]
fn a_value_the_emulator_rejects_names_the_factor() {
    let text = format!(
        "{BASE}\n[[factor]]\nname = \"link.delay\"\nvalues = [\"1ms\", \"10 lightyears\"]\n"
    );
    let e = err(&text);
    let d = e.first().unwrap();
    assert_eq!(d.field, "factor[0].name");
    assert_eq!(d.line, Some(line_of(&text, "name = \"link.delay\"")));
    assert!(d.message.contains("link.delay=10 lightyears"), "{d}");
    assert!(d.message.contains("--delay"), "emulator's flag named: {d}");
}

#[test]
fn workload_factor_value_of_wrong_type_is_reported() {
    let text = format!("{BASE}\n[[factor]]\nname = \"workload.size\"\nvalues = [1, \"big\"]\n");
    let d = err(&text).first().cloned().unwrap();
    assert!(
        d.message.contains("workload.size") && d.message.contains("big"),
        "{d}"
    );
}

#[test]
fn baseline_keys_must_be_factors() {
    let text = format!(
        "baseline = {{ \"socket.nodelai\" = false }}\n{BASE}\n[[factor]]\nname = \"socket.nodelay\"\nvalues = [false, true]\n"
    );
    let d = err(&text).first().cloned().unwrap();
    assert_eq!(d.field, "baseline.\"socket.nodelai\"");
    assert!(d.message.contains("did you mean `socket.nodelay`"), "{d}");
}

fn plan(text: &str) -> Plan {
    Plan::new(
        &ScenarioFile::parse("s.toml", text).unwrap(),
        PlanOptions::default(),
    )
    .unwrap()
}

#[test]
fn cross_expands_every_combination_and_applies_values() {
    let text = format!(
        "{BASE}\n[[factor]]\nname = \"socket.nodelay\"\nvalues = [false, true]\n\n[[factor]]\nname = \"link.delay\"\nrange = \"1ms..40ms\"\nsteps = 6\nscale = \"log\"\n\n[[factor]]\nname = \"sysctl.client.\\\"net.ipv4.tcp_rmem\\\"\"\nvalues = [\"4096 131072 6291456\", \"4096 131072 8738000\"]\n"
    );
    let p = plan(&text);
    assert_eq!(p.configurations.len(), 2 * 6 * 2);
    assert_eq!(p.runs.len(), 24 * 4);
    let c = &p.configurations[7];
    // Index 7 = nodelay false (0), delay index 3 (9.15ms), rmem index 1.
    assert_eq!(c.factors[0].1, "false");
    assert_eq!(c.factors[1].1, "9.15ms");
    assert_eq!(c.factors[2].1, "4096 131072 8738000");
    assert_eq!(c.settings.lab.link.delay.as_deref(), Some("9.15ms"));
    assert!(!c.settings.workloads[0].spec.socket().nodelay);
    let rmem = &c.settings.lab.sysctl["client"]["net.ipv4.tcp_rmem"];
    assert_eq!(rmem.as_str(), Some("4096 131072 8738000"));
    let link = c.link_config().unwrap().unwrap();
    assert_eq!(link.forward.delay_ns, 9_150_000);
    let spec = c.lab_spec("t").unwrap();
    assert!(
        spec.sysctls
            .iter()
            .any(|s| s.host == "client" && s.value == "4096 131072 8738000")
    );
    let delays: Vec<&str> = p
        .configurations
        .iter()
        .step_by(2)
        .take(6)
        .map(|c| c.factors[1].1.as_str())
        .collect();
    assert_eq!(
        delays,
        ["1ms", "2.09ms", "4.37ms", "9.15ms", "19.1ms", "40ms"]
    );
}

#[test]
fn progress_names_a_configuration_by_its_short_label() {
    let text = format!(
        "{BASE}\n[[factor]]\nname = \"link.delay\"\nvalues = [\"1ms\", \"9ms\"]\n\n[[factor]]\nname = \"sysctl.client.\\\"net.ipv4.tcp_rmem\\\"\"\nvalues = [\"4096 131072 6291456\", \"4096 131072 8738000\"]\n"
    );
    let p = plan(&text);
    let labels = p.short_labels();
    assert_eq!(labels.len(), p.configurations.len());
    assert_eq!(labels[3], "delay=9ms rmem=8.7M", "{labels:?}");
    let distinct: std::collections::BTreeSet<&String> = labels.iter().collect();
    assert_eq!(distinct.len(), labels.len(), "{labels:?}");
}

#[test]
fn zip_pairs_values_and_checks_lengths() {
    let text = format!(
        "combine = \"zip\"\n{BASE}\n[[factor]]\nname = \"workload.size\"\nvalues = [1, 10, 100]\n[[factor]]\nname = \"workload.count\"\nvalues = [3000, 2000, 1000]\n"
    );
    let p = plan(&text);
    let pairs: Vec<(String, String)> = p
        .configurations
        .iter()
        .map(|c| (c.factors[0].1.clone(), c.factors[1].1.clone()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("1".into(), "3000".into()),
            ("10".into(), "2000".into()),
            ("100".into(), "1000".into())
        ]
    );
    let bad = text.replace("[3000, 2000, 1000]", "[3000, 2000]");
    let d = err(&bad).first().cloned().unwrap();
    assert!(
        d.message.contains("zip") && d.message.contains("2 values"),
        "{d}"
    );
    assert_eq!(d.field, "factor[1].name");
}

#[test]
fn baseline_inside_the_grid_is_marked_outside_is_added() {
    let grid = format!(
        "baseline = {{ \"socket.nodelay\" = false }}\n{BASE}\n[[factor]]\nname = \"socket.nodelay\"\nvalues = [false, true]\n"
    );
    let p = plan(&grid);
    assert_eq!(p.configurations.len(), 2);
    assert_eq!(p.baseline().unwrap().id, 0);
    let outside = format!(
        "baseline = {{ \"link.delay\" = \"0ms\" }}\n{BASE}\n[[factor]]\nname = \"link.delay\"\nvalues = [\"1ms\", \"2ms\"]\n"
    );
    let p = plan(&outside);
    assert_eq!(p.configurations.len(), 3);
    let b = p.baseline().unwrap();
    assert_eq!(b.id, 2);
    assert!(b.label.starts_with("baseline: "), "{}", b.label);
}

/// Every prefix of k full rounds holds each configuration exactly k times.
#[test]
fn order_is_interleaved_and_deterministic_per_seed() {
    let text =
        format!("{BASE}\n[[factor]]\nname = \"workload.size\"\nvalues = [1, 2, 3, 4, 5, 6]\n");
    let file = ScenarioFile::parse("s.toml", &text).unwrap();
    let a = Plan::new(
        &file,
        PlanOptions {
            seed: Some(7),
            quick: false,
        },
    )
    .unwrap();
    let b = Plan::new(
        &file,
        PlanOptions {
            seed: Some(7),
            quick: false,
        },
    )
    .unwrap();
    let c = Plan::new(
        &file,
        PlanOptions {
            seed: Some(8),
            quick: false,
        },
    )
    .unwrap();
    let ids = |p: &Plan| p.runs.iter().map(|r| r.config.id).collect::<Vec<_>>();
    assert_eq!(ids(&a), ids(&b));
    assert_ne!(ids(&a), ids(&c));
    let n = a.configurations.len();
    for (round, chunk) in a.runs.chunks(n).enumerate() {
        let mut seen: Vec<usize> = chunk.iter().map(|r| r.config.id).collect();
        assert!(chunk.iter().all(|r| r.rep as usize == round));
        seen.sort_unstable();
        assert_eq!(seen, (0..n).collect::<Vec<_>>());
    }
    // Randomised, not sorted: the first two rounds differ in order.
    assert_ne!(ids(&a)[..n], ids(&a)[n..2 * n]);
    assert!(a.runs.iter().enumerate().all(|(i, r)| r.order == i));
}

#[test]
fn quick_reduces_repetitions_and_sizes() {
    let text = BASE.replace("count = 1000", "count = 100000");
    let file = ScenarioFile::parse("s.toml", &text).unwrap();
    let q = Plan::new(
        &file,
        PlanOptions {
            seed: None,
            quick: true,
        },
    )
    .unwrap();
    assert_eq!(q.repetitions, 2);
    assert_eq!(q.runs.len(), 2);
    let t = q.configurations[0].settings.workloads[0]
        .to_table()
        .unwrap();
    assert_eq!(t["count"].as_integer(), Some(10_000));
    let full = Plan::new(&file, PlanOptions::default()).unwrap();
    assert!(
        q.estimate(std::time::Duration::ZERO) * 10 < full.estimate(std::time::Duration::ZERO) * 2
    );
}

#[test]
fn dry_run_lists_runs_and_estimate() {
    let text = format!("{BASE}\n[[factor]]\nname = \"socket.nodelay\"\nvalues = [false, true]\n");
    let p = plan(&text);
    let listing = p.dry_run();
    assert!(
        listing.contains("2 configuration(s) x 4 repetition(s) = 8 runs"),
        "{listing}"
    );
    assert!(
        listing.contains("config   1: socket.nodelay=true"),
        "{listing}"
    );
    assert_eq!(listing.lines().filter(|l| l.contains(" rep ")).count(), 8);
    // 8 runs x (1000 msgs x 10 us + 0.5 s fresh lab) = 4.08 s.
    assert!(listing.contains("estimated time: 4.1s"), "{listing}");
}

#[test]
fn shipped_examples_parse_and_expand() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut sizes = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let file = ScenarioFile::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let plan = Plan::new(&file, PlanOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        sizes.insert(
            path.file_name().unwrap().to_string_lossy().to_string(),
            plan.configurations.len(),
        );
    }
    assert_eq!(sizes.get("sfperf.toml"), Some(&17));
    // 6 RTTs x 3 buffer settings (2.6.9's, today's, the seed's) x 3 congestion controls.
    assert_eq!(sizes.get("balticgrid.toml"), Some(&54));
    assert_eq!(sizes.get("permessage.toml"), Some(&4));
    assert_eq!(sizes.get("timewait.toml"), Some(&9));
    assert_eq!(sizes.get("stall41.toml"), Some(&10));
    // 2 port ranges x 2 tw_reuse x 2 somaxconn x 2 syncookies; the baseline is a grid point.
    assert_eq!(sizes.get("specweb96.toml"), Some(&16));
}

#[test]
fn the_same_lab_error_in_many_configurations_is_reported_once() {
    let text = "name = \"t\"\nobjective = { metric = \"m\", goal = \"min\" }\n[lab]\ntopology = \"pair\"\n[[workload]]\nkind = \"rr\"\n[[factor]]\nname = \"link.delay\"\nvalues = [\"1ms\", \"2ms\", \"3ms\"]\n";
    let e = err(text);
    assert_eq!(e.diagnostics.len(), 1, "{e}");
    let d = &e.diagnostics[0];
    assert_eq!(d.line, Some(8));
    assert!(d.message.contains("link.delay=1ms` (and 2 more)"), "{d}");
    assert!(
        d.message.contains("pair topology has no middle host"),
        "{d}"
    );
    // Without a topology, impairing the link picks `path`.
    let p = plan(&text.replace("topology = \"pair\"\n", ""));
    let spec = p.configurations[0].lab_spec("t").unwrap();
    assert_eq!(spec.topology, tcplab_lab::Topology::Path);
}

#[test]
fn only_keeps_one_configuration_in_order() {
    let text = format!("{BASE}\n[[factor]]\nname = \"workload.size\"\nvalues = [1, 2, 3]\n");
    let p = plan(&text);
    let one = p.only(1).unwrap();
    assert_eq!(one.runs.len(), 4);
    assert!(one.runs.iter().all(|r| r.config.id == 1));
    assert!(
        one.runs
            .windows(2)
            .all(|w| w[0].order < w[1].order && w[0].rep < w[1].rep)
    );
    assert!(p.only(3).is_none());
}

#[test]
fn a_stream_interval_out_of_range_names_the_field_and_the_fix() {
    let text = BASE
        .replace("kind = \"msgs\"", "kind = \"stream\"")
        .replace("count = 1000\nsize = 1", "interval = \"5ms\"");
    let d = err(&text).first().cloned().unwrap();
    assert!(d.line.is_some(), "{d}");
    assert!(
        d.message.contains("`interval` = \"5ms\"") && d.message.contains("interval = \"100ms\""),
        "{d}"
    );
}
