//! Renders a sample report from synthetic data shaped like the seeds (BalticGrid's bandwidth
//! vs RTT for default and tuned buffers, an "every 41st message" stall trace, interval
//! counters) and writes it to the path given (default /tmp/report.html), with the table as
//! text, Markdown, CSV and JSON beside it. Used by `screenshot.sh` to look at the page.

use tcplab_report::{
    ConfigurationResult, IntervalSample, IntervalSeries, MessageDelays, ObjectiveSpec, ReportInput,
    SweepPlotSpec, Table, html,
};
use tcplab_stats::Objective;

/// Deterministic noise in [-1, 1) (a 64-bit LCG; the sample only needs to look plausible).
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "/tmp/report.html".to_string());
    let input = sample_input();
    let table = Table::from_input(&input)?;
    let page = html::render_with_table(&input, &table)?;
    std::fs::write(&path, page)?;
    let stem = path.trim_end_matches(".html");
    std::fs::write(format!("{stem}.txt"), table.to_text())?;
    std::fs::write(format!("{stem}.md"), table.to_markdown())?;
    std::fs::write(format!("{stem}.csv"), table.to_csv())?;
    std::fs::write(format!("{stem}.json"), table.to_json()?)?;
    print!("{}", table.to_text());
    eprintln!("wrote {path} and {stem}.{{txt,md,csv,json}}");
    Ok(())
}

/// BalticGrid-shaped study: throughput vs RTT for default and tuned buffers, cubic and reno.
fn sample_input() -> ReportInput {
    let mut noise = Noise(0x5eed);
    let mut configs = Vec::new();
    for buffers in ["default", "tuned"] {
        for cc in ["cubic", "reno"] {
            for rtt in [1, 2, 5, 10, 20, 40] {
                let window_bits = if buffers == "tuned" {
                    8_738_000.0 * 8.0
                } else {
                    262_144.0 * 8.0
                };
                let limit = (window_bits / (rtt as f64 / 1000.0) / 1e6).min(941.0);
                let cc_loss = if cc == "reno" { 0.93 } else { 1.0 };
                let samples = (0..5)
                    .map(|_| limit * cc_loss * (1.0 + 0.04 * noise.next()))
                    .collect();
                configs.push(ConfigurationResult::new(
                    format!("{buffers} {cc} {rtt}ms"),
                    &[
                        ("buffers", buffers),
                        ("cc", cc),
                        ("rtt", &format!("{rtt}ms")),
                    ],
                    samples,
                ));
            }
        }
    }
    let mut failed = ConfigurationResult::new(
        "tuned bbr 40ms",
        &[("buffers", "tuned"), ("cc", "bbr"), ("rtt", "40ms")],
        Vec::new(),
    );
    failed.failed = Some(
        "sysctl net.ipv4.tcp_congestion_control=bbr: No such file or directory (module not loaded)"
            .into(),
    );
    configs.push(failed);
    let objective = ObjectiveSpec {
        name: "throughput".into(),
        unit: "Mbit/s".into(),
        goal: Objective::Maximise,
    };
    let mut input = ReportInput::new(
        "BalticGrid: bandwidth vs RTT (sample data)",
        objective,
        configs,
    );
    input.baseline = Some("default cubic 20ms".into());
    input.bootstrap = tcplab_stats::Bootstrap::new(2_000, 7);
    input.factor_order = vec!["buffers".into(), "cc".into(), "rtt".into()];
    input.sweep_plots = vec![SweepPlotSpec {
        factor: "rtt".into(),
        log_x: Some(true),
    }];
    input.scenario_text = SCENARIO.to_string();
    input.facts = serde_json::json!({
        "kernel": "6.18.0", "hz": 250, "cpus": 2,
        "emulator": {"seed": 24_601, "rate": "1gbit", "queue": "1000 packets"},
        "sysctl": {"net.ipv4.tcp_rmem": "4096 131072 6291456", "net.ipv4.tcp_wmem": "4096 16384 4194304",
                   "net.ipv4.tcp_congestion_control": "bbr"}
    });
    input.notes = vec!["Sample data made by examples/sample_report.rs, not a measurement.".into()];
    input.message_delays = stall_trace(&mut noise);
    input.intervals = intervals(&mut noise);
    // The labels a study's report gets: only the factors that vary, abbreviated.
    input.shorten_labels();
    input
}

/// 20,000 one-byte messages, every 41st delayed by one or two 4 ms jiffies (HZ = 250).
fn stall_trace(noise: &mut Noise) -> Vec<MessageDelays> {
    ["nodelay=0 rep 1", "nodelay=1 rep 1"]
        .iter()
        .enumerate()
        .map(|(k, label)| MessageDelays {
            label: (*label).to_string(),
            points: (0..20_000u64)
                .map(|i| {
                    let base = 28.0 + 6.0 * noise.next() + k as f64 * 4.0;
                    let stall = if k == 0 && i % 41 == 40 {
                        4_000.0 * (1.0 + (i / 41 % 2) as f64)
                    } else {
                        0.0
                    };
                    (i, base + stall)
                })
                .collect(),
            times_s: (0..20_000u64).map(|i| i as f64 * 1e-3).collect(),
            stall_us: Some(1_000.0),
            ..MessageDelays::default()
        })
        .collect()
}

/// 30 one-second intervals of a default and a tuned flow at 20 ms.
fn intervals(noise: &mut Noise) -> Vec<IntervalSeries> {
    [
        ("default 20ms", 104.0, 180.0),
        ("tuned 20ms", 930.0, 1600.0),
    ]
    .iter()
    .map(|&(label, mbps, cwnd)| IntervalSeries {
        label: label.to_string(),
        intervals: (1..=30)
            .map(|t| {
                let ramp = (t as f64 / 4.0).min(1.0);
                IntervalSample {
                    t_s: t as f64,
                    throughput_bps: Some(mbps * 1e6 * ramp * (1.0 + 0.03 * noise.next())),
                    cwnd_segments: Some(cwnd * ramp),
                    rtt_us: Some(1e3 * (20.0 + 2.0 * ramp + noise.next().abs())),
                    retransmits: Some(if t % 9 == 0 { 3.0 } else { 0.0 }),
                }
            })
            .collect(),
    })
    .collect()
}

const SCENARIO: &str = r#"# balticgrid.toml (sample)
[lab]
topology = "client-emu-server"
[link.emu]
rate = "1gbit"
rtt = "{rtt}"
[workload.stream]
duration = "10s"
[factors]
rtt = ["1ms", "2ms", "5ms", "10ms", "20ms", "40ms"]
buffers = ["default", "tuned"]   # tuned: tcp_rmem = tcp_wmem = "8192 4369000 8738000"
cc = ["cubic", "reno"]
[objective]
maximise = "throughput"
"#;
