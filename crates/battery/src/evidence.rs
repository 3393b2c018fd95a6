//! The doctor's battery as report series, so a report (the demo's) shows the evidence the
//! findings came from beside the tuning study: the msgs and rr runs' per-message delays with
//! their stalls marked, and latency under load. The battery's stream is left out: it samples
//! once a second (what the rules were validated with), too coarse beside the study's 100 ms. The battery's
//! results hold their raw samples in memory; they are written as samples text
//! (`tcplab_results::samples`) and read by the study's own series functions, so a battery and a
//! stored study run are plotted by the same code. Pure: no clock, no I/O.

use tcplab_doctor::Battery;
use tcplab_results::Report;
use tcplab_study::to_report::series::{self, RunSeries};

/// Every label starts with this, so the report's reader tells the battery's runs from the
/// study's.
pub const LABEL_PREFIX: &str = "doctor";

/// The battery's series, labelled `doctor · msgs`, `doctor · rr` and
/// `doctor · latency under load`; a part the battery did not run (or whose samples hold
/// nothing to plot) is left out. The rr run's stall limit is the one it was configured with,
/// when that lies above its median (see [`series::stall_threshold_us`]).
pub fn battery_series(b: &Battery) -> RunSeries {
    let parts: [(&str, Option<Report>, Option<f64>); 3] = [
        ("msgs", b.msgs.clone().map(Report::Msgs), None),
        (
            "rr",
            b.rr.clone().map(Report::Rr),
            b.rr.as_ref().map(|r| r.config.stall_ms),
        ),
        ("latency under load", b.rrul.clone().map(Report::Rrul), None),
    ];
    let mut out = RunSeries::default();
    for (name, report, stall_ms) in parts {
        let Some(report) = report else { continue };
        let mut text = Vec::new();
        if tcplab_results::samples::write(&mut text, &report).is_err() {
            continue;
        }
        let label = format!("{LABEL_PREFIX} · {name}");
        for (workload, sections) in series::parse_workloads(&String::from_utf8_lossy(&text)) {
            out.extend(series::run_series(&label, &workload, &sections, stall_ms));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcplab_doctor::synth;

    #[test]
    fn a_battery_gives_labelled_intervals_and_delays() {
        let stream = synth::StreamSim::healthy(100e6, 30_000);
        let mut rr = synth::rr(64, &[30_000_000, 31_000_000, 400_000_000], true);
        rr.config.stall_ms = 5.0;
        let msgs = synth::msgs(
            vec![synth::MsgSim::new(500, 1).run(|i| if i % 41 == 40 { 40_000_000 } else { 0 })],
            true,
        );
        let b = Battery {
            stream: Some(stream.run()),
            msgs: Some(msgs),
            rr: Some(rr),
            ..Battery::default()
        };
        let s = battery_series(&b);
        assert!(
            s.intervals.is_empty(),
            "the battery's 1 s stream is not plotted"
        );
        let labels: Vec<&str> = s.message_delays.iter().map(|d| d.label.as_str()).collect();
        assert_eq!(labels, ["doctor · msgs", "doctor · rr"]);
        let rr = &s.message_delays[1];
        assert_eq!(rr.points.len(), 3);
        let delays: Vec<f64> = rr.points.iter().map(|p| p.1).collect();
        assert_eq!(
            rr.stall_us,
            tcplab_study::to_report::series::stall_rule_us(&delays),
            "5 ms lies under the 31 ms median: the rule decides"
        );
        let msgs = &s.message_delays[0];
        assert!(msgs.stall_us.is_some() && msgs.times_s.len() == msgs.points.len());
        assert!(s.latency_under_load.is_empty(), "no rrul in this battery");
    }
}
