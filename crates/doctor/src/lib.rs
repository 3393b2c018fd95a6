//! tcplab-doctor: findings with evidence and fixes, from the results of a battery of workloads.
//!
//! Pure: results in, findings out. No clock, no disk, no network; every rule is tested exactly
//! on synthetic traces.
//!
//! # Map
//! ```text
//! plan.rs ────────────── the battery as the doctor's own plan: parts (an enum), sized for a
//!   │                     budget and again from what the battery found so far (pure); the
//!   │                     figures plan and rules share are limits.rs'. tcplab-battery runs it.
//!   ▼
//! Battery (battery.rs) ── stream / train / msgs / msgs sweep / rrul / rr / crr / http results,
//!   │                     facts (a lab's hosts, or a real path's two ends), the emulator's
//!   │                     verdict when a lab, the kernel counters per part and side
//!   ▼
//! Context (battery.rs) ── facts, HZ, per-host sysctls, and the path as estimated
//!   │                     (estimate.rs: bottleneck rate from the train's dispersion, BBR's
//!   │                     estimate, a flow that filled the link; base RTT; standing queue)
//!   ├─ series.rs ──────── per-message one-way delays, per-transaction rr latencies
//!   ├─ rules/stream_view  per-flow tcp_info over the measured span
//!   ├─ rules/probes ───── the path's own loss, from the paced messages that never queue
//!   ▼
//! rules/ (one module per rule; thresholds are named constants with their reason)
//!   untrustworthy      emulator behind schedule, CPU saturated, rr waiting for a CPU, too few samples
//!   connection         port exhaustion, TIME_WAIT build-up, accept queue, SYN retransmissions
//!                      (seed 003), over every workload that opens connections (crr, http)
//!   periodic_stall     every Nth message delayed k jiffies, size threshold K (seed 004)
//!   delayed_ack        latencies clustered at the 40 ms delayed-ACK timer (seeds 001, 004)
//!   buffers            rwnd_limited / sndbuf_limited, maxima from the BDP (seed 002)
//!   loss               retransmissions vs the Mathis bound, path loss vs a flow's own overrun
//!   queue, shallow     bufferbloat; a shallow queue from the emulator's account or, on a real
//!                      path, from the flow, the probes and the estimates
//!   fixes              shared remedies (delayed ACK, buffers, ports, a server's TIME_WAIT)
//!   ▼
//! Finding { id, severity, title, evidence, samples, explanation, fix } (finding.rs)
//!   └► Diagnosis { findings, path } — most severe first, the path as measured; `--json`
//!      and terminal text
//!
//! samples.rs — raw stamps back into results read from JSON, from the `--samples` file text
//! synth.rs — synthetic results shaped like the kernel's (seeded), for tests here and in the CLI
//! ```
//!
//! ```
//! use tcplab_doctor::{Battery, diagnose};
//! let findings = diagnose(&Battery::default());
//! assert!(findings.is_empty()); // nothing measured, nothing found
//! ```
//!
//! The statistics (stall detection, periodicity, tick clustering, cluster shares) come from
//! `tcplab-stats`; the doctor only decides what they mean and what to change.
//!
//! # Tests
//! Every rule has unit tests on synthetic traces ([`synth`]) that fire on the pathology with
//! the right figures and stay silent on a healthy run and on look-alikes (random stalls,
//! interval beats, a 40 ms path). The doctor depends on no crate that runs anything, so its
//! tests on real results live beside the battery in crates/battery/tests (`doctor_*.rs`, `remote.rs`): write-write-read
//! with Nagle over loopback (delayed ACK, then TCP_NODELAY applied); crr and stream in
//! anonymous network namespaces (port exhaustion with a 200-port range, a 8 KiB tcp_rmem; the
//! suggested sysctls applied and the gain measured); and, as root, an emulated 100 Mbit/s,
//! 30 ms WAN lab (seed 002's buffers; 2% loss under cubic vs the bbr it names).

pub mod battery;
pub mod corpus;
pub mod error;
pub mod estimate;
pub mod finding;
pub mod limits;
pub mod plan;
pub mod rules;
pub mod samples;
pub mod series;
pub mod synth;

pub use battery::{Battery, Context, EmulatorFidelity, Ends, PathInfo, Rate, RateFrom, Role};
pub use error::DoctorError;
pub use estimate::{Estimate, PathEstimate, Sure};
pub use finding::{
    Diagnosis, Evidence, Finding, Fix, FixKind, MAX_SAMPLE_REFS, SampleRefs, Scope, Severity,
};
pub use plan::{Knobs, Part, PartKind};

/// Runs every rule on `battery` and returns the findings, root cause first: a finding that
/// another explains is demoted to info and says which (`rules::explain`), and the rest are
/// ranked by severity, then causes before symptoms.
pub fn diagnose(battery: &Battery) -> Vec<Finding> {
    let ctx = Context::new(battery);
    let mut findings: Vec<Finding> = rules::RULES
        .iter()
        .flat_map(|r| {
            (r.check)(&ctx).into_iter().map(|mut f| {
                if f.rests_on.is_empty() {
                    f.rests_on = r.reads.to_vec();
                }
                f
            })
        })
        .collect();
    rules::explain::apply(&mut findings);
    findings
}

/// [`diagnose`] wrapped as the `--json` document.
pub fn diagnosis(battery: &Battery) -> Diagnosis {
    Diagnosis {
        findings: diagnose(battery),
        path: estimate::of(battery),
    }
}
