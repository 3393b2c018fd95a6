//! Property tests of the doctor's corpus file (`CorpusFile::parse`, with every case's points
//! laid over its lab and checked) and tune's workload names: a valid corpus with one line
//! changed, or any text, parses or fails with one line naming the file or case and the fix.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

#[path = "../../../tests/props.rs"]
mod props;

use props::{bounded, check_error};
use proptest::prelude::*;
use tcplab_tune::candidates::WorkloadKind;
use tcplab_tune::corpus::CorpusFile;

const CORPUS: &str = r#"[defaults]
budget = "24s"
offloads = "on"
[defaults.lab]
topology = "path"
[defaults.lab.sysctl.all]
"net.ipv4.tcp_rmem" = "4096 131072 67108864"
[[case]]
name = "healthy"
cause = "healthy"
about = "a path built well"
[[case.point]]
link = { rate = "10mbit", delay = "0.5ms", queue = "16" }
[[case.point]]
name = "far"
link = { rate = "1gbit", delay = "25ms", queue = "4200" }
[[case]]
name = "rwnd-small"
cause = "rwnd_limited"
offloads = "tso=on,gro=off"
also = ["bufferbloat"]
[[case.point]]
link = { rate = "1gbit", delay = "15ms", queue = "2600", loss = "0.1%" }
sysctl.server = { "net.ipv4.tcp_rmem" = "4096 87380 174760" }
"#;

fn toml_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        "\"[0-9]{0,6}(ms|s|xs|%|mbit|gbit|kb|)\"",
        "\"[a-z0-9_.=,:/ -]{0,20}\"",
        "\"\\PC{0,12}\"",
        "\\{ (rate|delay|queue|loss|dealy) = \"[0-9a-z%.]{0,8}\" \\}",
        prop::sample::select(vec![
            "true",
            "-1",
            "0",
            "\"\"",
            "[]",
            "{}",
            "[1]",
            "\"healthy\"",
            "\"on\"",
            "\"off\"",
            "\"tso=maybe\"",
            "\"custom\"",
            "\"é\"",
            "\"\\u0000\"",
            "\"10 lightyears\"",
        ])
        .prop_map(str::to_owned),
    ]
}

fn mutated() -> impl Strategy<Value = String> {
    let n = CORPUS.lines().count();
    (0..n, 0..4u8, toml_value(), ".{0,30}").prop_map(move |(i, how, value, junk)| {
        let mut out: Vec<String> = CORPUS.lines().map(str::to_owned).collect();
        match (how, out[i].split_once('=')) {
            (0, Some((k, _))) => out[i] = format!("{k}= {value}"),
            (1, _) => out[i] = String::new(),
            (2, _) => {
                let l = out[i].clone();
                out.insert(i, l);
            }
            _ => out[i] = junk,
        }
        out.join("\n")
    })
}

fn corpus_holds(text: String) -> Result<(), TestCaseError> {
    let result = bounded("CorpusFile::parse", move || {
        CorpusFile::parse("corpus.toml", &text)
            .and_then(|c| c.budget().map(|_| ()))
            .map_err(|e| e.to_string())
    })?;
    if let Err(e) = result {
        check_error(&e, &["corpus.toml", "defaults.budget"])?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(props::config())]

    #[test]
    fn corpora_with_one_line_changed(text in mutated()) {
        corpus_holds(text)?;
    }

    #[test]
    fn corpora_of_any_text(text in any::<String>()) {
        corpus_holds(text)?;
    }

    #[test]
    fn workload_kinds(name in prop_oneof![
        prop::sample::select(vec!["msgs", "rr", "stream", "crr", "Rr", "http", ""]).prop_map(str::to_owned),
        any::<String>(),
    ]) {
        if let Err(e) = name.parse::<WorkloadKind>() {
            check_error(&e, &[])?;
        }
    }
}
