//! The corpus runner: each case's lab built at each of its points, the battery run on it, the
//! record kept as soon as the run ends (so a killed run keeps what it did).
//!
//! Two ways to meet the path ([`Mode`]):
//! - **emulated**: through the lab (`Target::Lab`): the doctor sees what a lab gives it, the
//!   emulator's account, the configured path, both hosts' facts.
//! - **remote**: as a user meets a real path. An agent (tcplab's server, as `tcplab serve`
//!   runs it) listens in the server host on its lab address; the battery runs on a thread in
//!   the client host against that address (`Target::Remote`), exactly as `tcplab doctor --to`
//!   does there. Nothing of the lab reaches the doctor: no emulator account, no configured
//!   rate, RTT or loss, no lab hosts; only what the client's kernel and the agent report. The
//!   emulator's verdict over the battery is kept beside it as the ground truth's warrant.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use tcplab_doctor::corpus::{Label, Outcome};
use tcplab_doctor::plan::Request;
use tcplab_doctor::{Battery, PathInfo};
use tcplab_lab::{Lab, Ownership};
use tcplab_study::scenario::LabSection;

use super::record::{Mode, Record, Truth, record_name, write_record};
use super::{Case, CorpusFile, Selection};
use crate::error::{BatteryError, Result};
use crate::run::{Target, path_of};

/// Runs the selected cases in `mode`, writing each run's [`Record`] to `out` as it ends, and
/// returns every outcome in corpus order. `say` gets one line per run.
pub fn run(
    corpus: &CorpusFile,
    selection: &Selection,
    mode: Mode,
    out: &Path,
    say: &dyn Fn(&str),
) -> Result<Vec<Outcome>> {
    std::fs::create_dir_all(out).map_err(|e| BatteryError::Invalid {
        field: "--out".into(),
        problem: format!("cannot create {}: {e}", out.display()),
    })?;
    let budget = corpus.budget()?;
    let (cases, skipped): (Vec<&Case>, Vec<&Case>) = corpus
        .cases
        .iter()
        .filter(|c| selection.wants(c))
        .partition(|c| mode == Mode::Emulated || !super::record::about_the_emulator(&c.cause));
    for c in skipped {
        say(&format!(
            "{} left out: it is about the emulator itself, which a real path does not have",
            c.name
        ));
    }
    let total: usize = cases.iter().map(|c| c.points.len()).sum();
    let mut outcomes = Vec::new();
    for case in cases {
        for i in 0..case.points.len() {
            let label = corpus.label(case, i);
            say(&format!(
                "[{}/{total}] {} at {}",
                outcomes.len() + 1,
                case.name,
                label.point
            ));
            let mut req = Request::new(budget);
            req.trap_count = case.trap;
            req.knobs = corpus.knobs_of(case, i);
            let lab = corpus.lab_of(case, i)?;
            let record = run_one(label, lab, req, mode, outcomes.len());
            write_record(out, &record, &record_name(&case.name, i))?;
            let (outcome, _) = record.outcome();
            say(&format!(
                "    -> {}{}",
                match (&outcome.error, outcome.reported().as_slice()) {
                    (Some(e), _) => format!("failed: {e}"),
                    (None, []) => "no finding".to_string(),
                    (None, ids) => ids.join(", "),
                },
                if record.truth_doubtful() {
                    " (the emulator fell behind: the path was not the one labelled)"
                } else {
                    ""
                }
            ));
            outcomes.push(outcome);
        }
    }
    Ok(outcomes)
}

fn run_one(label: Label, lab: LabSection, req: Request, mode: Mode, n: usize) -> Record {
    let mut record = Record::new(label, lab.clone(), req.knobs.clone(), mode);
    let result = (|| -> Result<(Battery, Option<Truth>)> {
        let spec = lab
            .to_spec(&format!("cp{}x{n}", std::process::id() % 10_000))
            .map_err(|e| BatteryError::Invalid {
                field: "lab".into(),
                problem: e.to_string(),
            })?;
        let built = Lab::build(spec, Ownership::Process)?;
        match mode {
            Mode::Emulated => {
                let target = Target::Lab {
                    lab: &built,
                    client: "client".into(),
                    server: "server".into(),
                };
                Ok((
                    crate::run(&target, &req, path_of(Some(&built)), &|_| {})?,
                    None,
                ))
            }
            Mode::Remote => remote(&built, &req).map(|(b, t)| (b, Some(t))),
        }
    })();
    match result {
        Ok((b, truth)) => {
            record.keep(b);
            record.truth = truth;
        }
        Err(e) => record.error = Some(e.to_string()),
    }
    record
}

/// The battery as `tcplab doctor --to` runs it from the lab's client host against an agent in
/// its server host (the lab's hosts `client` and `server`), with the emulator's verdict over
/// the whole of it: what a user of a real path gets, and the warrant of its ground truth.
pub fn remote(lab: &Lab, req: &Request) -> Result<(Battery, Truth)> {
    let chost = lab.host("client")?;
    let shost = lab.host("server")?;
    let ip = shost.ipv4().ok_or_else(|| BatteryError::Invalid {
        field: "lab".into(),
        problem: "the server host has no IPv4 address for the agent".into(),
    })?;
    let addr = SocketAddr::new(ip.into(), tcplab_load::proto::DEFAULT_PORT);
    let agent = shost
        .run(|| tcplab_agent::Server::bind(addr))?
        .map_err(|e| BatteryError::Invalid {
            field: "agent".into(),
            problem: e.to_string(),
        })?;
    let before = lab.emulator_status().ok();
    let stop = AtomicBool::new(false);
    let battery = std::thread::scope(|s| -> Result<Battery> {
        let serving = shost.spawn_scoped(s, "tcplab-agent", || agent.serve(&stop, None))?;
        // The agent stops even if the battery panics, or the scope would wait for it forever.
        let stop_on_exit = tcplab_front::lab::StopOnDrop(&stop);
        let battery =
            chost.run(|| crate::run(&Target::Remote(addr), req, PathInfo::default(), &|_| {}))?;
        drop(stop_on_exit);
        let served = serving.join();
        let battery = battery?;
        if let Ok(Err(e)) = served {
            return Err(BatteryError::Invalid {
                field: "agent".into(),
                problem: e.to_string(),
            });
        }
        Ok(battery)
    })?;
    let fidelity = before.map(|b| {
        let need = tcplab_results::emulator::Need::Diagnosis {
            rtt_ns: tcplab_lab::emulation::configured_rtt_ns(&b.link)
                .max(tcplab_doctor::limits::TICK_SCALE_NS),
        };
        match lab.emulator_status() {
            Ok(a) => tcplab_lab::emulation::judge_for(&b.counters, &a.counters, a.running, need),
            Err(e) => tcplab_results::emulator::RunFidelity {
                trustworthy: false,
                reasons: vec![format!(
                    "the emulator did not answer after the battery: {e}"
                )],
                need: Some(need),
            },
        }
    });
    Ok((battery, Truth { fidelity }))
}
