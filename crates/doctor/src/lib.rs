//! tcplab-doctor: findings with evidence and fixes, from the results of a battery of workloads.
//!
//! Pure: results in, findings out. No clock, no disk, no network; every rule is tested exactly
//! on synthetic traces.
//!
//! # Map
//! ```text
//! Battery (battery.rs) ── stream / msgs / msgs sweep / rr / crr / rrul / http results, facts,
//!   │                     emulator fidelity (all plain data of tcplab-results), path RTT/rate
//!   ▼
//! Context (battery.rs) ── facts (explicit or from meta.facts), HZ, RTT, per-host sysctls
//!   │
//!   ├─ series.rs ──────── per-message one-way delays, per-transaction rr latencies
//!   ├─ rules/stream_view  per-flow tcp_info over the measured span
//!   ▼
//! rules/ (one module per rule; thresholds are named constants with their reason)
//!   untrustworthy      emulator behind schedule, CPU saturated, rr waiting for a CPU, too few samples
//!   connection         port exhaustion, TIME_WAIT build-up, accept queue, SYN retransmissions
//!                      (seed 003), over every workload that opens connections (crr, http)
//!   periodic_stall     every Nth message delayed k jiffies, size threshold K (seed 004)
//!   delayed_ack        latencies clustered at the 40 ms delayed-ACK timer (seeds 001, 004)
//!   buffers            rwnd_limited / sndbuf_limited, maxima from the BDP (seed 002)
//!   loss               retransmissions vs the Mathis bound, bbr vs cubic
//!   fixes              shared remedies (delayed ACK, buffers, ports, a server's TIME_WAIT)
//!   ▼
//! Finding { id, severity, title, evidence, samples, explanation, fix } (finding.rs)
//!   └► Diagnosis { findings } — most severe first; `--json` and terminal text
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
//! tests on real results live beside the battery in crates/tune/tests (`doctor_*.rs`): write-write-read
//! with Nagle over loopback (delayed ACK, then TCP_NODELAY applied); crr and stream in
//! anonymous network namespaces (port exhaustion with a 200-port range, a 8 KiB tcp_rmem; the
//! suggested sysctls applied and the gain measured); and, as root, an emulated 100 Mbit/s,
//! 30 ms WAN lab (seed 002's buffers; 2% loss under cubic vs the bbr it names).

pub mod battery;
pub mod corpus;
pub mod error;
pub mod finding;
pub mod rules;
pub mod samples;
pub mod series;
pub mod synth;

pub use battery::{Battery, Context, EmulatorFidelity, PathInfo, Role};
pub use error::DoctorError;
pub use finding::{
    Diagnosis, Evidence, Finding, Fix, FixKind, MAX_SAMPLE_REFS, SampleRefs, Scope, Severity,
};

/// Runs every rule on `battery` and returns the findings, root cause first: a finding that
/// another explains is demoted to info and says which (`rules::explain`), and the rest are
/// ranked by severity, then causes before symptoms.
pub fn diagnose(battery: &Battery) -> Vec<Finding> {
    let ctx = Context::new(battery);
    let mut findings: Vec<Finding> = rules::RULES
        .iter()
        .flat_map(|(_, rule)| rule(&ctx))
        .collect();
    rules::explain::apply(&mut findings);
    findings
}

/// [`diagnose`] wrapped as the `--json` document.
pub fn diagnosis(battery: &Battery) -> Diagnosis {
    Diagnosis {
        findings: diagnose(battery),
    }
}
