//! One description of a workload, held to it (unit tests of the flags, so that no test binary
//! of its own is linked): for every workload command, every flag that
//! says what the workload does reaches its [`WorkloadSpec`], under a key its scenario table
//! takes, and flags → spec → scenario TOML → spec comes back equal, one flag at a time and
//! in random combinations. A parameter added to a command but not to the configuration it
//! fills (or written into the configuration under no scenario key) fails here.

use std::collections::BTreeSet;

use super::{CrrArgs, HttpArgs, MsgsArgs, RrArgs, RrulArgs, StreamArgs};
use clap::{ArgAction, CommandFactory, FromArgMatches, Parser};
use proptest::prelude::*;
use tcplab_results::spec::{WorkloadKind, WorkloadSpec, keys};
use tcplab_study::workload::Workload;

/// Flags that say where a workload runs and how it prints, not what it does: they are the
/// command's, not the workload's, and have no scenario key (a study places and records runs
/// itself). `interval` is the live lines' period for msgs, rr, crr and http (stream's and rrul's
/// are part of the workload: their samples' spacing).
const PLACEMENT: &[&str] = &[
    "to",
    "lab",
    "client",
    "server",
    "json",
    "ndjson",
    "samples",
    "rt-priority",
    "key",
    "server-key",
    "insecure",
    "help",
    // http: where the paths come from (a file, read when the command runs); `--url` sets them.
    "urls",
    // http: SPECweb96's mix, which every lab run (and so every scenario) has already.
    "specweb96",
];

/// The live lines' period, which only the commands have.
const LIVE_INTERVAL: &[WorkloadKind] = &[
    WorkloadKind::Msgs,
    WorkloadKind::Rr,
    WorkloadKind::Crr,
    WorkloadKind::Http,
];

#[derive(Parser)]
struct Stream {
    #[command(flatten)]
    args: StreamArgs,
}
#[derive(Parser)]
struct Msgs {
    #[command(flatten)]
    args: MsgsArgs,
}
#[derive(Parser)]
struct Rr {
    #[command(flatten)]
    args: RrArgs,
}
#[derive(Parser)]
struct Crr {
    #[command(flatten)]
    args: CrrArgs,
}
#[derive(Parser)]
struct Rrul {
    #[command(flatten)]
    args: RrulArgs,
}
#[derive(Parser)]
struct Http {
    #[command(flatten)]
    args: HttpArgs,
}

/// The command's clap definition.
fn command(kind: WorkloadKind) -> clap::Command {
    match kind {
        WorkloadKind::Stream => Stream::command(),
        WorkloadKind::Msgs => Msgs::command(),
        WorkloadKind::Rr => Rr::command(),
        WorkloadKind::Crr => Crr::command(),
        WorkloadKind::Rrul => Rrul::command(),
        WorkloadKind::Http => Http::command(),
    }
}

/// The spec `flags` describe (after `--lab x`, which every command takes), or clap's error.
fn spec_of(kind: WorkloadKind, flags: &[String]) -> Result<WorkloadSpec, String> {
    let mut argv = vec!["tcplab".to_string(), "--lab".into(), "x".into()];
    argv.extend(flags.iter().cloned());
    let m = command(kind)
        .try_get_matches_from(&argv)
        .map_err(|e| e.to_string())?;
    let e = |e: clap::Error| e.to_string();
    Ok(match kind {
        WorkloadKind::Stream => Stream::from_arg_matches(&m).map_err(e)?.args.spec(),
        WorkloadKind::Msgs => Msgs::from_arg_matches(&m).map_err(e)?.args.spec(),
        WorkloadKind::Rr => Rr::from_arg_matches(&m).map_err(e)?.args.spec(),
        WorkloadKind::Crr => Crr::from_arg_matches(&m).map_err(e)?.args.spec(),
        WorkloadKind::Rrul => Rrul::from_arg_matches(&m).map_err(e)?.args.spec(),
        WorkloadKind::Http => Http::from_arg_matches(&m)
            .map_err(e)?
            .args
            .spec()
            .map_err(|e| e.to_string())?,
    })
}

/// The spec through a scenario's `[[workload]]` table and back: the flat table a study
/// writes (and checks, for a spec the workload accepts), else the spec's own TOML.
fn through_toml(spec: &WorkloadSpec) -> (WorkloadSpec, toml::Table) {
    if spec.validate().is_ok() {
        let w = Workload { spec: spec.clone() };
        let table = w.to_table().unwrap();
        let text = toml::to_string(&table).unwrap();
        let back = Workload::from_table(toml::from_str(&text).unwrap())
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        (back.spec, table)
    } else {
        let text = toml::to_string(spec).unwrap();
        let back: WorkloadSpec = toml::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        (back.settled(), toml::from_str(&text).unwrap())
    }
}

/// A value for a flag that differs from its default and that the workload accepts beside
/// the others' defaults.
fn sample(kind: WorkloadKind, arg: &clap::Arg) -> Option<String> {
    let long = arg.get_long()?;
    if let Some(v) = arg
        .get_possible_values()
        .into_iter()
        .rev()
        .map(|v| v.get_name().to_string())
        .find(|v| {
            !arg.get_default_values()
                .iter()
                .any(|d| d.to_str() == Some(v.as_str()))
        })
    {
        return Some(v);
    }
    let special = match (kind, long) {
        (WorkloadKind::Rrul, "spacing") => "20ms",
        (_, "cc") => "reno",
        (_, "sizes") => "2,64",
        (_, "url") => "/index.html",
        (_, "host") => "example",
        (_, "read-rate" | "link-rate") => "20M",
        (_, "write-size" | "bytes") => "64K",
        (_, "stall-ms") => "7.5",
        (_, "rate") => "100",
        _ => "3",
    };
    Some(special.to_string())
}

/// Flags a flag needs beside it.
fn companions(long: &str) -> Vec<String> {
    let pair: &[&str] = match long {
        "spaced" => &["--gap-us", "100"],
        "poisson" => &["--rate", "100"],
        _ => &[],
    };
    pair.iter().map(|s| s.to_string()).collect()
}

/// The workload flags of `kind`'s command, each with the arguments that set it.
fn workload_flags(kind: WorkloadKind) -> Vec<(String, Vec<String>)> {
    let cmd = command(kind);
    let mut out = Vec::new();
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if PLACEMENT.contains(&long) || (long == "interval" && LIVE_INTERVAL.contains(&kind)) {
            continue;
        }
        let mut argv = vec![format!("--{long}")];
        if !matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse) {
            argv.push(sample(kind, arg).unwrap());
        }
        argv.extend(companions(long));
        out.push((long.to_string(), argv));
    }
    out
}

/// The keys whose values differ between two tables.
fn changed(a: &toml::Table, b: &toml::Table) -> BTreeSet<String> {
    a.keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect()
}

#[test]
fn every_workload_flag_reaches_the_spec_under_a_scenario_key_and_round_trips() {
    for kind in WorkloadKind::ALL {
        let base = spec_of(kind, &[]).unwrap();
        let (back, base_table) = through_toml(&base);
        assert_eq!(back, base, "{kind} with no flags");
        let flags = workload_flags(kind);
        assert!(flags.len() >= 5, "{kind}: {flags:?}");
        for (long, argv) in flags {
            let spec = spec_of(kind, &argv).unwrap_or_else(|e| panic!("{kind} {argv:?}: {e}"));
            assert_ne!(spec, base, "{kind} --{long} does not reach the spec");
            let (back, table) = through_toml(&spec);
            assert_eq!(back, spec, "{kind} {argv:?} does not round-trip");
            let moved = changed(&base_table, &table);
            assert!(
                !moved.is_empty(),
                "{kind} --{long}: no key of the table moved"
            );
            for key in moved {
                let key_ok = keys(kind).contains(&key.as_str()) || key == "socket";
                assert!(
                    key_ok,
                    "{kind} --{long} moved {key}, which is no scenario key"
                );
            }
        }
    }
}

/// The command's defaults are the type's: a scenario table that says nothing runs what the
/// command with no flags runs. The one difference is stream's sampling interval, which the
/// command keeps at 1 s for a terminal (a line a second) and a study at 100 ms for its plots.
#[test]
fn a_command_without_flags_runs_the_types_defaults() {
    for kind in WorkloadKind::ALL {
        let mut cli = spec_of(kind, &[]).unwrap();
        if let WorkloadSpec::Stream(c) = &mut cli {
            assert_eq!(c.interval_ms, 1_000);
            c.interval_ms = tcplab_results::stream::DEFAULT_INTERVAL_MS;
        }
        assert_eq!(cli, WorkloadSpec::default_of(kind), "{kind}");
    }
}

fn any_flags() -> impl Strategy<Value = (WorkloadKind, Vec<Vec<String>>)> {
    prop::sample::select(WorkloadKind::ALL.to_vec()).prop_flat_map(|kind| {
        let flags: Vec<Vec<String>> = workload_flags(kind).into_iter().map(|f| f.1).collect();
        let n = flags.len();
        (Just(kind), prop::sample::subsequence(flags, 0..=n))
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Any combination of flags clap accepts round-trips through a scenario table.
    #[test]
    fn flag_combinations_round_trip((kind, chosen) in any_flags()) {
        let argv: Vec<String> = chosen.concat();
        if let Ok(spec) = spec_of(kind, &argv) {
            let (back, _) = through_toml(&spec);
            prop_assert_eq!(back, spec, "{} {:?}", kind, argv);
        }
    }
}
