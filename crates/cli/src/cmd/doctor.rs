//! `tcplab doctor`: a battery of workloads on a path, then findings with evidence and fixes.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use tcplab_battery::run::{self as battery, Target};
use tcplab_doctor::Severity;
use tcplab_doctor::plan::Request;

use super::path::PathArgs;
use crate::output;

/// Arguments of `tcplab doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub path: PathArgs,
    /// Time for the whole battery, e.g. 60s, 2m (at least 10s).
    #[arg(long, default_value = "60s")]
    pub budget: String,
    /// Exit with code 1 when a finding at or above this severity exists: info, warning, error,
    /// critical.
    #[arg(long)]
    pub fail_on: Option<String>,
    /// Also run N messages with the write-write-read pattern and Nagle on, provoking the
    /// Nagle + delayed-ACK stall (seed 004) to show what it costs on this path.
    #[arg(long, value_name = "N")]
    pub provoke_stalls: Option<u64>,
    /// Also run HTTP with a connection per request (SPECweb96's mix, the built-in server in
    /// the lab's server host) for 10% of the budget more, which the connection rules read as
    /// they read crr, with the server's TIME_WAIT and ListenOverflows. Needs a lab (--lab or
    /// --topology).
    #[arg(long)]
    pub http: bool,
    /// One JSON document: {"findings": [...], "path": {...}, "battery": {...}}.
    #[arg(long)]
    pub json: bool,
}

/// Parses a duration flag with the emulator's parser ("60s", "2m", "500ms").
pub fn parse_budget(flag: &str, text: &str) -> anyhow::Result<Duration> {
    let text = text.trim();
    let ns = match text.strip_suffix('m').filter(|t| !t.ends_with('m')) {
        Some(minutes) => minutes
            .parse::<f64>()
            .map(|m| (m * 60e9) as u64)
            .map_err(|_| anyhow::anyhow!("{flag} {text}: use e.g. 60s or 5m"))?,
        None => tcplab_emu::spec::parse_duration(text)
            .map_err(|e| anyhow::anyhow!("{flag} {text}: {e}"))?,
    };
    if ns == 0 {
        anyhow::bail!("{flag} {text}: the budget must be positive, e.g. 60s");
    }
    Ok(Duration::from_nanos(ns))
}

/// Resolves `ADDRESS[:PORT]` (default port 5301).
pub fn remote(to: &str) -> anyhow::Result<SocketAddr> {
    if let Ok(a) = to.parse::<SocketAddr>() {
        return Ok(a);
    }
    let ip: std::net::IpAddr = to.trim_matches(['[', ']']).parse().map_err(|_| {
        anyhow::anyhow!("--to {to}: use ADDRESS[:PORT], e.g. 198.18.0.101 or [fd00::65]:5301")
    })?;
    Ok(SocketAddr::new(ip, tcplab_load::proto::DEFAULT_PORT))
}

impl DoctorArgs {
    /// Runs the battery and prints the findings.
    pub fn run(self) -> ExitCode {
        let json = self.json;
        output::finish(json, self.run_inner())
    }

    fn run_inner(self) -> anyhow::Result<ExitCode> {
        let budget = parse_budget("--budget", &self.budget)?;
        let fail_on: Option<Severity> = self
            .fail_on
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut plan = Request::new(budget);
        plan.trap_count = self.provoke_stalls.unwrap_or(0);
        if self.http {
            if self.path.to.is_some() {
                anyhow::bail!(
                    "--http runs the built-in web server in a lab's server host: use it with --lab NAME or --topology, not --to"
                );
            }
            plan.http = true;
        }
        let quiet = self.json;
        let progress = |what: &str| {
            if !quiet {
                eprintln!("tcplab doctor: {what}");
            }
        };
        let sold = self.path.sold_rate()?;
        let lab = self
            .path
            .lab(&format!("dr{}", std::process::id() % 100_000))?;
        let battery = match (&lab, &self.path.to) {
            (Some(lab), _) => {
                let (client, server) = self.path.hosts_of(lab)?;
                let target = Target::Lab {
                    lab,
                    client,
                    server,
                };
                battery::run(&target, &plan, battery::path_of(Some(lab)), &progress)?
            }
            (None, _) => match self.path.remote()? {
                // `remote` lives to the end of the battery: its agent, if launched, with it.
                Some(remote) => battery::run(
                    &Target::Remote(remote.addr),
                    &plan,
                    tcplab_doctor::PathInfo {
                        sold_rate_bps: sold,
                        ..battery::path_of(None)
                    },
                    &progress,
                )?,
                None => anyhow::bail!(
                    "say where: --to ADDRESS (a host running `tcplab serve`), --hosts FILE --to NAME, --lab NAME, or --topology T [--delay ... --rate ...]"
                ),
            },
        };
        let diagnosis = tcplab_doctor::diagnosis(&battery);
        if self.json {
            let doc = serde_json::json!({
                "findings": diagnosis.findings,
                "path": diagnosis.path,
                "battery": battery,
            });
            output::print_json(&doc);
        } else {
            out!("{diagnosis}");
        }
        drop(lab);
        Ok(match fail_on {
            Some(t) if diagnosis.fails(t) => ExitCode::from(1),
            _ => ExitCode::SUCCESS,
        })
    }
}
