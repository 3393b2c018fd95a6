//! Counters and reports written for people: one line per direction with what a user checks
//! first (frames through, drops by cause, how late the schedule ran), and the fidelity verdict
//! as a word with its reasons. The JSON forms (`--json`) carry every counter; these lines are
//! what `tcplab emu` and `tcplab lab status` print without it.

use std::fmt;

use crate::emulator::counters::LatenessSummary;
use crate::emulator::counters::{DirSnapshot, Drops};
use crate::emulator::verdict::{Fidelity, Report};
use tcplab_emu::Realised;

pub use tcplab_emu::describe::{format_bytes, format_ns};

impl fmt::Display for Drops {
    /// `none`, or the non-zero causes: `loss 12, queue full 3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let causes = [
            ("loss", self.loss),
            ("queue full", self.queue_full),
            ("ring overflow", self.ring_overflow),
            ("slab full", self.slab_full),
            ("oversize", self.oversize),
            ("tx failed", self.tx_failed),
        ];
        let named: Vec<String> = causes
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(what, n)| format!("{what} {n}"))
            .collect();
        if named.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&named.join(", "))
        }
    }
}

impl fmt::Display for LatenessSummary {
    /// `p50 740 ns, p99 14.7 µs, max 2.36 ms, 3 over 100 µs` (the last part when there are
    /// any), or `no frames released` before the first.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.count == 0 {
            return f.write_str("no frames released");
        }
        write!(
            f,
            "p50 {}, p99 {}, max {}",
            format_ns(self.p50_ns),
            format_ns(self.p99_ns),
            format_ns(self.max_ns)
        )?;
        if self.late_count > 0 {
            write!(
                f,
                ", {} over {}",
                self.late_count,
                format_ns(crate::emulator::counters::LATE_LIMIT_NS)
            )?;
        }
        Ok(())
    }
}

impl fmt::Display for DirSnapshot {
    /// `9 frames in, 9 out (826 B); drops none; lateness p50 …`, then the lone frames'
    /// lateness when only some frames were lone (when all were, it is the same), then the
    /// model's duplicates and corruptions and the frames still queued, when there are any.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} frames in, {} out ({}); drops {}; lateness {}",
            self.frames_in,
            self.frames_out,
            format_bytes(self.bytes_out),
            self.drops,
            self.lateness
        )?;
        let lone = &self.lone_lateness;
        if lone.count > 0 && lone.count != self.lateness.count {
            write!(f, "; {} lone frames: lateness {}", lone.count, lone)?;
        }
        if self.duplicates > 0 {
            write!(f, "; {} duplicated", self.duplicates)?;
        }
        if self.corrupted > 0 {
            write!(f, "; {} corrupted", self.corrupted)?;
        }
        if self.queued > 0 {
            write!(f, "; {} queued", self.queued)?;
        }
        Ok(())
    }
}

/// The model's own account of one direction (`DirSnapshot::realised`), a line per element
/// that has something to say:
/// `queue: max 64 packets (96.0 kB), mean 41.2; a packet stayed 3.90 ms on average, 7.68 ms at
/// most (64 accepted); 0 now` and `delay line: mean 13.1 ms, sd 803 µs (configured 10.0 ms, sd
/// 2.00 ms); 19021 held back to keep order, by 3.20 ms on average`.
pub fn realised_lines(r: &Realised) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(q) = &r.queue {
        lines.push(format!(
            "queue: max {} packets ({}), mean {:.1}; a packet stayed {} on average, {} at most \
             ({} accepted); {} now",
            q.max_packets,
            format_bytes(q.max_bytes),
            q.mean_packets,
            format_ns(q.mean_sojourn_ns),
            format_ns(q.max_sojourn_ns),
            q.accepted,
            q.packets
        ));
    }
    if let Some(a) = &r.discipline {
        lines.push(format!(
            "queue discipline: {} marked CE; dropped {} early, {} by CoDel, {} over its memory, \
             {} at the limit ({} of them ECN-capable); {} flows seen",
            a.marked,
            a.dropped_early,
            a.dropped_codel,
            a.dropped_memory,
            a.dropped_overlimit,
            a.dropped_ect,
            a.flows_seen
        ));
    }
    if let Some(d) = &r.delay_line {
        let ns = |x: f64| format_ns(x.round() as u64);
        let configured = match d.configured_sd_ns {
            Some(sd) if sd > 0.0 => format!("{}, sd {}", format_ns(d.configured_ns), ns(sd)),
            _ => format_ns(d.configured_ns),
        };
        let mut line = format!(
            "delay line: mean {}, sd {} (configured {configured})",
            ns(d.mean_ns),
            ns(d.sd_ns)
        );
        if d.held_for_order > 0 {
            line.push_str(&format!(
                "; {} held back to keep order, by {} on average",
                d.held_for_order,
                ns(d.mean_held_ns)
            ));
        }
        if d.clamped_at_zero > 0 {
            line.push_str(&format!(
                "; {} drew a negative delay and left with none",
                d.clamped_at_zero
            ));
        }
        lines.push(line);
    }
    lines
}

impl fmt::Display for Fidelity {
    /// `trustworthy`, or `UNTRUSTWORTHY (reason; reason)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.trustworthy {
            return f.write_str("trustworthy");
        }
        write!(f, "UNTRUSTWORTHY ({})", self.reasons.join("; "))
    }
}

impl Report {
    /// The run in a few lines: each direction, each worker's CPU share, the seed.
    pub fn summary_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for (name, d) in [
            ("client→server", &self.forward),
            ("server→client", &self.reverse),
        ] {
            lines.push(format!("{name}: {d}"));
            lines.extend(realised_lines(&d.realised).iter().map(|l| format!("  {l}")));
        }
        let workers: Vec<String> = self
            .threads
            .iter()
            .map(|t| format!("{} {:.0}%", t.name, t.ratio() * 100.0))
            .collect();
        let mut run = format!("ran {}", format_ns(self.wall_ns));
        if !workers.is_empty() {
            run.push_str(&format!("; worker CPU {}", workers.join(", ")));
        }
        if let Some(seed) = self.seed {
            run.push_str(&format!("; seed {seed}"));
        }
        lines.push(run);
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emulator::verdict::ThreadUsage;

    #[test]
    fn sizes_and_times_keep_three_significant_digits() {
        assert_eq!(format_bytes(826), "826 B");
        assert_eq!(format_bytes(1_500), "1.50 kB");
        assert_eq!(format_bytes(12_345_678), "12.3 MB");
        assert_eq!(format_bytes(456_000_000_000), "456 GB");
        assert_eq!(format_ns(740), "740 ns");
        assert_eq!(format_ns(14_737), "14.7 µs");
        assert_eq!(format_ns(2_359_000), "2.36 ms");
        assert_eq!(format_ns(20_000_000_000), "20.0 s");
    }

    fn snapshot() -> DirSnapshot {
        DirSnapshot {
            frames_in: 1_000,
            frames_out: 985,
            bytes_out: 1_491_290,
            drops: Drops {
                loss: 10,
                queue_full: 3,
                ..Drops::default()
            },
            queued: 2,
            lateness: LatenessSummary {
                count: 985,
                mean_ns: 2_000,
                p50_ns: 703,
                p99_ns: 14_737,
                p999_ns: 20_000,
                max_ns: 2_359_000,
                late_count: 1,
                sum_ns: 1_970_000,
            },
            ..DirSnapshot::default()
        }
    }

    #[test]
    fn a_direction_reads_as_one_line_with_only_the_causes_that_happened() {
        assert_eq!(
            snapshot().to_string(),
            "1000 frames in, 985 out (1.49 MB); drops loss 10, queue full 3; \
             lateness p50 703 ns, p99 14.7 µs, max 2.36 ms, 1 over 100 µs; 2 queued"
        );
        let mut some_lone = snapshot();
        some_lone.lone_lateness = LatenessSummary {
            count: 12,
            p50_ns: 5_000,
            p99_ns: 31_000,
            max_ns: 31_000,
            ..LatenessSummary::default()
        };
        assert!(
            some_lone.to_string().ends_with(
                "1 over 100 µs; 12 lone frames: lateness p50 5.00 µs, p99 31.0 µs, max 31.0 µs; 2 queued"
            ),
            "{some_lone}"
        );
        some_lone.lone_lateness.count = some_lone.lateness.count;
        assert_eq!(
            some_lone.to_string(),
            snapshot().to_string(),
            "all frames lone: said once"
        );
        assert_eq!(
            DirSnapshot::default().to_string(),
            "0 frames in, 0 out (0 B); drops none; lateness no frames released"
        );
    }

    #[test]
    fn the_realised_queue_and_delay_read_as_a_line_each_with_only_what_happened() {
        assert!(realised_lines(&Realised::default()).is_empty());
        let r = Realised {
            queue: Some(tcplab_emu::QueueSummary {
                packets: 0,
                bytes: 0,
                max_packets: 64,
                max_bytes: 96_000,
                mean_packets: 41.25,
                accepted: 64,
                mean_sojourn_ns: 3_900_000,
                max_sojourn_ns: 7_680_000,
                ..tcplab_emu::QueueSummary::default()
            }),
            delay_line: Some(tcplab_emu::DelaySummary {
                count: 20_000,
                mean_ns: 13_104_321.4,
                sd_ns: 803_443.1,
                configured_ns: 10_000_000,
                configured_sd_ns: Some(2_000_000.0),
                held_for_order: 19_021,
                mean_held_ns: 3_200_000.0,
                clamped_at_zero: 0,
                ..tcplab_emu::DelaySummary::default()
            }),
            discipline: None,
        };
        assert_eq!(
            realised_lines(&r),
            [
                "queue: max 64 packets (96.0 kB), mean 41.2; a packet stayed 3.90 ms on \
                 average, 7.68 ms at most (64 accepted); 0 now",
                "delay line: mean 13.1 ms, sd 803 µs (configured 10.0 ms, sd 2.00 ms); 19021 \
                 held back to keep order, by 3.20 ms on average"
            ]
        );
        // Paretonormal jitter (no closed-form sd) larger than the delay.
        let clamped = tcplab_emu::DelaySummary {
            count: 3,
            mean_ns: 100.0,
            configured_ns: 5_000,
            configured_sd_ns: None,
            clamped_at_zero: 2,
            ..tcplab_emu::DelaySummary::default()
        };
        let r = Realised {
            queue: None,
            delay_line: Some(clamped),
            discipline: None,
        };
        assert_eq!(
            realised_lines(&r),
            [
                "delay line: mean 100 ns, sd 0 ns (configured 5.00 µs); 2 drew a negative delay \
              and left with none"
            ]
        );
    }

    #[test]
    fn what_a_queue_discipline_did_reads_as_a_line() {
        let r = Realised {
            discipline: Some(tcplab_emu::aqm::AqmCounters {
                marked: 120,
                dropped_codel: 3,
                dropped_ect: 1,
                flows_seen: 2,
                ..tcplab_emu::aqm::AqmCounters::default()
            }),
            ..Realised::default()
        };
        assert_eq!(
            realised_lines(&r),
            [
                "queue discipline: 120 marked CE; dropped 0 early, 3 by CoDel, 0 over its memory, 0 \
                 at the limit (1 of them ECN-capable); 2 flows seen"
            ]
        );
    }

    #[test]
    fn the_report_names_directions_workers_and_seed_and_the_verdict_its_reasons() {
        let report = Report {
            forward: snapshot(),
            reverse: DirSnapshot::default(),
            wall_ns: 5_000_000_000,
            threads: vec![ThreadUsage {
                name: "a->b".into(),
                cpu_ns: 1_000_000_000,
                wall_ns: 5_000_000_000,
            }],
            seed: Some(7),
            ..Report::default()
        };
        let lines = report.summary_lines();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("client→server: 1000 frames in"));
        assert!(lines[1].starts_with("server→client: 0 frames in"));
        assert_eq!(lines[2], "ran 5.00 s; worker CPU a->b 20%; seed 7");
        let bad = Fidelity {
            trustworthy: false,
            reasons: vec!["a->b: lateness p99 2359 µs above 100 µs".into(), "x".into()],
        };
        assert_eq!(
            bad.to_string(),
            "UNTRUSTWORTHY (a->b: lateness p99 2359 µs above 100 µs; x)"
        );
        let good = Fidelity {
            trustworthy: true,
            reasons: vec![],
        };
        assert_eq!(good.to_string(), "trustworthy");
    }
}
