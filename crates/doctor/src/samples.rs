//! Raw samples back into results read from JSON. tcplab-load does not serialise per-message,
//! per-transaction and per-connection stamps (they go to the `--samples` file instead), so a
//! result loaded from a store has none and the stall rules stay silent. This puts them back
//! from the samples file's parsed sections (`tcplab_results::samples::parse`): pure, text in.

use tcplab_results::crr::{CrrResult, CrrSample};
use tcplab_results::msgs::MsgsResult;
use tcplab_results::rr::{RrResult, RrSample};
use tcplab_results::samples::Section;

/// A stamp column of a row: relative ns + the section's t0, `None` for `-`.
fn stamp(row: &[Option<f64>], col: Option<usize>, t0: u64) -> Option<u64> {
    let v = (*row.get(col?)?)?;
    (v.is_finite() && v >= 0.0).then(|| t0 + v as u64)
}

fn column(s: &Section, name: &str) -> Option<usize> {
    s.columns.iter().position(|c| c == name)
}

fn attr<T: std::str::FromStr>(s: &Section, key: &str) -> Option<T> {
    s.attrs.get(key)?.parse().ok()
}

/// Fills `send_ns`/`recv_ns` of each msgs run from the `message` section of the same size
/// (in order, when a size repeats). Returns how many runs were filled.
pub fn attach_msgs(result: &mut MsgsResult, sections: &[Section]) -> usize {
    let mut messages = sections.iter().filter(|s| s.kind == "message");
    let mut filled = 0;
    for run in &mut result.runs {
        let Some(s) = messages.find(|s| attr::<u32>(s, "size") == Some(run.size)) else {
            continue;
        };
        let t0 = attr::<u64>(s, "t0_ns").unwrap_or(0);
        let (cs, cr) = (column(s, "send_ns"), column(s, "recv_ns"));
        run.send_ns = s.rows.iter().map_while(|r| stamp(r, cs, t0)).collect();
        // A message never received ends the receive stamps (in-order delivery).
        run.recv_ns = s.rows.iter().map_while(|r| stamp(r, cr, t0)).collect();
        filled += 1;
    }
    filled
}

/// Fills each rr point's samples from the `transaction` section with its req/resp sizes.
pub fn attach_rr(result: &mut RrResult, sections: &[Section]) -> usize {
    let mut filled = 0;
    for p in &mut result.points {
        let found = sections.iter().find(|s| {
            s.kind == "transaction"
                && attr::<u32>(s, "req") == Some(p.req)
                && attr::<u32>(s, "resp") == Some(p.resp)
        });
        let Some(s) = found else { continue };
        let t0 = attr::<u64>(s, "t0_ns").unwrap_or(0);
        let cols = ["intended_ns", "sent_ns", "done_ns"].map(|c| column(s, c));
        p.samples = s
            .rows
            .iter()
            .filter_map(|r| {
                Some(RrSample {
                    intended_ns: stamp(r, cols[0], t0)?,
                    sent_ns: stamp(r, cols[1], t0)?,
                    done_ns: stamp(r, cols[2], t0)?,
                })
            })
            .collect();
        filled += 1;
    }
    filled
}

/// Fills the crr samples from the `connection` section; true when one was found.
pub fn attach_crr(result: &mut CrrResult, sections: &[Section]) -> bool {
    let Some(s) = sections.iter().find(|s| s.kind == "connection") else {
        return false;
    };
    let t0 = attr::<u64>(s, "t0_ns").unwrap_or(0);
    let cols = ["start_ns", "connected_ns", "done_ns"].map(|c| column(s, c));
    result.samples = s
        .rows
        .iter()
        .filter_map(|r| {
            Some(CrrSample {
                start_ns: stamp(r, cols[0], t0)?,
                connected_ns: stamp(r, cols[1], t0)?,
                done_ns: stamp(r, cols[2], t0)?,
            })
        })
        .collect();
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{self, MsgSim};
    use tcplab_results::report::Report;

    /// Writes a result's samples file, parses it, and attaches it to the JSON round trip.
    #[test]
    fn msgs_stamps_survive_the_samples_file() {
        let mut sim = MsgSim::new(500, 16);
        sim.spacing_ns = 1_000_000;
        let original = synth::msgs(
            vec![sim.run(|i| if i % 41 == 40 { 8_000_000 } else { 0 })],
            false,
        );
        let mut text = Vec::new();
        tcplab_results::samples::write(&mut text, &Report::Msgs(original.clone())).unwrap();
        let (_, sections) =
            tcplab_results::samples::parse(&String::from_utf8(text).unwrap()).unwrap();
        let json = serde_json::to_string(&original).unwrap();
        let mut loaded: MsgsResult = serde_json::from_str(&json).unwrap();
        assert!(
            loaded.runs[0].send_ns.is_empty(),
            "stamps are not in the JSON"
        );
        assert_eq!(attach_msgs(&mut loaded, &sections), 1);
        assert_eq!(loaded.runs[0].send_ns, original.runs[0].send_ns);
        assert_eq!(loaded.runs[0].recv_ns, original.runs[0].recv_ns);
    }

    #[test]
    fn rr_and_crr_samples_survive_the_samples_file() {
        let rr = synth::rr(100, &[100_000, 40_100_000, 90_000], false);
        let mut text = Vec::new();
        tcplab_results::samples::write(&mut text, &Report::Rr(rr.clone())).unwrap();
        let (_, sections) =
            tcplab_results::samples::parse(&String::from_utf8(text).unwrap()).unwrap();
        let mut loaded = rr.clone();
        loaded.points[0].samples.clear();
        assert_eq!(attach_rr(&mut loaded, &sections), 1);
        assert_eq!(loaded.points[0].samples, rr.points[0].samples);

        let crr = synth::crr(50, 100.0, |i| if i == 7 { 1_003_000_000 } else { 90_000 });
        let mut text = Vec::new();
        tcplab_results::samples::write(&mut text, &Report::Crr(crr.clone())).unwrap();
        let (_, sections) =
            tcplab_results::samples::parse(&String::from_utf8(text).unwrap()).unwrap();
        let mut loaded = crr.clone();
        loaded.samples.clear();
        assert!(attach_crr(&mut loaded, &sections));
        assert_eq!(loaded.samples, crr.samples);
    }
}
