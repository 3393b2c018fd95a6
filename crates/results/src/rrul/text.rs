//! rrul's human form: the three phases side by side, the load's throughput, and the inflation
//! in one sentence. Latencies are printed in µs, ms or s, whichever keeps about three
//! significant digits, since one run spans 50 µs idle on a LAN to seconds under load.

use std::fmt;

use super::{Inflation, PhaseName, RrulResult};
use crate::report::{bps, cpu_wait_per_transaction, footer, header};
use crate::stats::Percentiles;

/// `us` in µs, ms or s with about three significant digits: `52.3 µs`, `10.2 ms`, `612 ms`.
pub fn latency(us: f64) -> String {
    let mag = us.abs();
    if mag < 1_000.0 {
        format!("{} µs", three(us))
    } else if mag < 10_000_000.0 {
        format!("{} ms", three(us / 1e3))
    } else {
        format!("{} s", three(us / 1e6))
    }
}

/// A change of latency, signed: `+602 ms`, `-1.20 ms`.
pub fn latency_change(us: f64) -> String {
    let sign = if us < 0.0 { "-" } else { "+" };
    format!("{sign}{}", latency(us.abs()))
}

/// About three significant digits, never in exponent form.
fn three(v: f64) -> String {
    let mag = v.abs();
    if mag < 10.0 {
        format!("{v:.2}")
    } else if mag < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

fn opt_latency(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), latency)
}

/// The sentence a reader takes away: e.g. `latency under load: p50 10.2 ms idle → 612 ms
/// loaded (+602 ms), back to 10.3 ms after` (`still 40.1 ms after` when the after median is
/// more than twice the idle one). None without an idle and a loaded median.
pub fn headline(i: &Inflation) -> Option<String> {
    let (idle, loaded) = (i.before_p50_us?, i.during_p50_us?);
    let mut s = format!(
        "latency under load: p50 {} idle → {} loaded ({})",
        latency(idle),
        latency(loaded),
        latency_change(loaded - idle)
    );
    if let Some(after) = i.after_p50_us {
        let word = if after <= 2.0 * idle {
            "back to"
        } else {
            "still"
        };
        s.push_str(&format!(", {word} {} after", latency(after)));
    }
    Some(s)
}

/// The tail's line: e.g. `p99 under load: 640 ms (+630 ms over the idle p50, 64.0x)`.
pub fn tail_line(i: &Inflation) -> Option<String> {
    let (p99, added) = (i.during_p99_us?, i.p99_added_us?);
    let ratio = i.p99_ratio.map_or(String::new(), |r| format!(", {r:.1}x"));
    Some(format!(
        "p99 under load: {} ({} over the idle p50{ratio})",
        latency(p99),
        latency_change(added)
    ))
}

/// One row of the phase table.
fn row(f: &mut fmt::Formatter<'_>, label: &str, cells: [String; 3]) -> fmt::Result {
    let [a, b, c] = cells;
    writeln!(f, "  {label:<13} {a:>12} {b:>12} {c:>12}")
}

fn percentile_rows(f: &mut fmt::Formatter<'_>, p: [&Percentiles; 3]) -> fmt::Result {
    type Pick = fn(&Percentiles) -> Option<f64>;
    let picks: [(&str, Pick); 4] = [
        ("p50", |p| p.p50),
        ("p90", |p| p.p90),
        ("p99", |p| p.p99),
        ("max", |p| p.max),
    ];
    for (label, pick) in picks {
        row(f, label, p.map(|p| opt_latency(pick(p))))?;
    }
    Ok(())
}

/// What the probes were, and what the load was (direction, flows, how long it was asked to
/// send and how long it ran).
fn load_lines(f: &mut fmt::Formatter<'_>, r: &RrulResult) -> fmt::Result {
    let c = &r.config;
    writeln!(
        f,
        "  probes        {}/{} B every {} ms on a fixed schedule, TCP_NODELAY",
        c.req, c.resp, c.spacing_ms
    )?;
    let flows = match c.flows {
        1 => "1 flow".to_string(),
        n => format!("{n} flows"),
    };
    let each = if c.direction == super::LoadDirection::Both {
        " each way"
    } else {
        ""
    };
    let ran = r.load.end_ns.saturating_sub(r.load.start_ns) as f64 / 1e9;
    writeln!(
        f,
        "  load          {}, {flows}{each}, {:.2} s asked, {ran:.2} s to the last byte delivered",
        c.direction.as_str(),
        c.during_ms as f64 / 1e3,
    )
}

/// The rrul section of the human form.
pub(crate) fn write_human(f: &mut fmt::Formatter<'_>, r: &RrulResult) -> fmt::Result {
    header(f, "rrul", &r.meta)?;
    load_lines(f, r)?;
    let empty = super::Phase::default();
    let phases = PhaseName::ALL.map(|n| r.phase(n).unwrap_or(&empty));
    row(f, "phase", PhaseName::ALL.map(|n| n.as_str().to_string()))?;
    row(
        f,
        "window",
        phases.map(|p| format!("{:.2} s", p.duration_s())),
    )?;
    row(f, "probes", phases.map(|p| p.transactions.to_string()))?;
    percentile_rows(f, phases.map(|p| &p.latency_us))?;
    let s = &r.summary;
    writeln!(
        f,
        "  throughput    {}  (up {}, down {})",
        bps(s.throughput_bps),
        bps(s.up_bps),
        bps(s.down_bps)
    )?;
    writeln!(f, "  retransmits   {}", r.bulk.summary.retransmits)?;
    for line in [headline(&s.inflation), tail_line(&s.inflation)]
        .into_iter()
        .flatten()
    {
        writeln!(f, "  {line}")?;
    }
    let after = phases[2];
    let asked = r.config.after_ms as f64 / 1e3;
    // Shorter by more than one probe slot: the probes' schedule ended before the window did.
    if after.duration_s() + r.config.spacing_ms as f64 / 1e3 < asked {
        writeln!(
            f,
            "  note          the after phase ran {:.2} s of {asked:.2} s: the load drained late; \
             raise --drain",
            after.duration_s()
        )?;
    }
    cpu_wait_per_transaction(f, &r.probes.meta, r.probes.summary.transactions)?;
    footer(f, &r.meta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rrul::{LoadSpan, Phase, RrulConfig, RrulSummary};
    use crate::session::RunMeta;

    #[test]
    fn latencies_keep_three_digits_in_the_unit_that_fits() {
        assert_eq!(latency(52.34), "52.3 µs");
        assert_eq!(latency(7.0), "7.00 µs");
        assert_eq!(latency(999.0), "999 µs");
        assert_eq!(latency(10_200.0), "10.2 ms");
        assert_eq!(latency(1_234.0), "1.23 ms");
        assert_eq!(latency(612_000.0), "612 ms");
        assert_eq!(latency(2_500_000.0), "2500 ms");
        assert_eq!(latency(12_300_000.0), "12.3 s");
        assert_eq!(latency_change(602_000.0), "+602 ms");
        assert_eq!(latency_change(-1_200.0), "-1.20 ms");
    }

    fn inflation(before: f64, during: f64, p99: f64, after: f64) -> Inflation {
        crate::rrul::phase::inflation(&pct(before, before), &pct(during, p99), &pct(after, after))
    }

    fn pct(p50: f64, p99: f64) -> Percentiles {
        Percentiles {
            n: 1,
            p50: Some(p50),
            p90: Some(p99),
            p99: Some(p99),
            max: Some(p99),
            ..Percentiles::default()
        }
    }

    #[test]
    fn the_headline_says_idle_loaded_and_after() {
        let i = inflation(10_200.0, 612_000.0, 640_000.0, 10_300.0);
        assert_eq!(
            headline(&i).as_deref(),
            Some(
                "latency under load: p50 10.2 ms idle → 612 ms loaded (+602 ms), back to 10.3 ms \
                 after"
            )
        );
        assert_eq!(
            tail_line(&i).as_deref(),
            Some("p99 under load: 640 ms (+630 ms over the idle p50, 62.7x)")
        );
        let slow = inflation(10_000.0, 612_000.0, 640_000.0, 40_100.0);
        assert!(
            headline(&slow).is_some_and(|h| h.ends_with("still 40.1 ms after")),
            "{:?}",
            headline(&slow)
        );
        assert_eq!(headline(&Inflation::default()), None);
    }

    #[test]
    fn the_human_form_puts_the_phases_side_by_side() {
        let ms = 1_000_000u64;
        let phase = |name, start, end, n, p50, p99| Phase {
            name,
            start_ns: start * ms,
            end_ns: end * ms,
            transactions: n,
            latency_us: pct(p50, p99),
        };
        let phases = vec![
            phase(PhaseName::Before, 0, 1_000, 100, 10_200.0, 10_900.0),
            phase(PhaseName::During, 1_000, 4_840, 384, 612_000.0, 640_000.0),
            phase(PhaseName::After, 4_840, 5_360, 52, 10_300.0, 12_000.0),
        ];
        let r = RrulResult {
            meta: RunMeta {
                target: "198.18.0.101:5301".into(),
                complete: true,
                ..RunMeta::default()
            },
            config: RrulConfig {
                direction: crate::rrul::LoadDirection::Up,
                during_ms: 3_000,
                ..RrulConfig::default()
            },
            summary: RrulSummary {
                inflation: inflation(10_200.0, 612_000.0, 640_000.0, 10_300.0),
                throughput_bps: Some(18_912_000.0),
                up_bps: Some(18_912_000.0),
                down_bps: None,
            },
            load: LoadSpan {
                start_ns: 1_000 * ms,
                end_ns: 4_840 * ms,
            },
            phases,
            ..RrulResult::default()
        };
        let text = crate::Report::Rrul(r).to_string();
        let expected = "\
rrul to 198.18.0.101:5301
  probes        64/64 B every 10 ms on a fixed schedule, TCP_NODELAY
  load          up, 1 flow, 3.00 s asked, 3.84 s to the last byte delivered
  phase               before       during        after
  window              1.00 s       3.84 s       0.52 s
  probes                 100          384           52
  p50                10.2 ms       612 ms      10.3 ms
  p90                10.9 ms       640 ms      12.0 ms
  p99                10.9 ms       640 ms      12.0 ms
  max                10.9 ms       640 ms      12.0 ms
  throughput    18.912 Mbit/s  (up 18.912 Mbit/s, down -)
  retransmits   0
  latency under load: p50 10.2 ms idle → 612 ms loaded (+602 ms), back to 10.3 ms after
  p99 under load: 640 ms (+630 ms over the idle p50, 62.7x)
  note          the after phase ran 0.52 s of 2.00 s: the load drained late; raise --drain
";
        assert_eq!(text, expected);
    }
}
