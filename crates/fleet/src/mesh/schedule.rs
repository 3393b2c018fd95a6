//! Which pairs run when. A throughput test shares its hosts' NICs and CPUs with any other test
//! they take part in, so a mesh of them is a round-robin tournament (the circle method): N−1
//! rounds (N for odd N, one host resting each round) of ⌊N/2⌋ disjoint pairs, each round
//! run twice, once per direction. No host is in two tests at once, and every ordered pair runs
//! exactly once. Latency probes that tolerate company may instead run `width` at a time in any
//! order ([`concurrent`]).

use serde::{Deserialize, Serialize};

/// One ordered pair: `src` runs the client side toward `dst` (indices into the host list).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Pair {
    /// The client's host.
    pub src: usize,
    /// The server's host.
    pub dst: usize,
}

/// Tests that run at the same time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The tournament round (both directions of a round share its number).
    pub round: usize,
    /// The tests of this step.
    pub pairs: Vec<Pair>,
}

/// The round-robin tournament among `n` hosts: 2·(N−1) steps for even N, 2·N for odd N, each of
/// disjoint pairs, together every ordered pair once. Fewer than two hosts: no steps.
pub fn tournament(n: usize) -> Vec<Step> {
    if n < 2 {
        return Vec::new();
    }
    // Odd N: a phantom host `n` makes the count even; whoever meets it rests that round.
    let m = if n % 2 == 0 { n } else { n + 1 };
    let rotating = m - 1;
    let mut steps = Vec::with_capacity(2 * rotating);
    for round in 0..rotating {
        let mut forward = Vec::with_capacity(m / 2);
        // The fixed host meets the round's host; the others pair up mirrored around it.
        let mut matches = vec![(round, m - 1)];
        for k in 1..m / 2 {
            let a = (round + k) % rotating;
            let b = (round + rotating - k) % rotating;
            matches.push((a, b));
        }
        for (i, (a, b)) in matches.into_iter().enumerate() {
            if a >= n || b >= n {
                continue;
            }
            // Alternate which end sends first, so no host always leads its rounds.
            let (src, dst) = if (round + i) % 2 == 0 { (a, b) } else { (b, a) };
            forward.push(Pair { src, dst });
        }
        let reverse = forward
            .iter()
            .map(|p| Pair {
                src: p.dst,
                dst: p.src,
            })
            .collect();
        steps.push(Step {
            round,
            pairs: forward,
        });
        steps.push(Step {
            round,
            pairs: reverse,
        });
    }
    steps
}

/// Every ordered pair, `width` tests at a time (hosts may take part in several at once), in
/// the tournament's order so that the first steps still spread over all hosts.
pub fn concurrent(n: usize, width: usize) -> Vec<Step> {
    let width = width.max(1);
    let order: Vec<Pair> = tournament(n).into_iter().flat_map(|s| s.pairs).collect();
    order
        .chunks(width)
        .enumerate()
        .map(|(round, chunk)| Step {
            round,
            pairs: chunk.to_vec(),
        })
        .collect()
}

/// The steps left after `done` pairs, in order, without empty steps (a resumed mesh).
pub fn without(steps: Vec<Step>, done: &std::collections::BTreeSet<Pair>) -> Vec<Step> {
    steps
        .into_iter()
        .map(|s| Step {
            round: s.round,
            pairs: s.pairs.into_iter().filter(|p| !done.contains(p)).collect(),
        })
        .filter(|s| !s.pairs.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn check_tournament(n: usize) {
        let steps = tournament(n);
        let rounds = if n % 2 == 0 { n - 1 } else { n };
        assert_eq!(steps.len(), 2 * rounds, "n={n}");
        let mut seen = BTreeSet::new();
        for step in &steps {
            let mut busy = BTreeSet::new();
            for p in &step.pairs {
                assert_ne!(p.src, p.dst, "n={n}: a host paired with itself");
                assert!(p.src < n && p.dst < n);
                assert!(
                    busy.insert(p.src) && busy.insert(p.dst),
                    "n={n}: host in two tests"
                );
                assert!(seen.insert(*p), "n={n}: {p:?} twice");
            }
            assert_eq!(step.pairs.len(), n / 2, "n={n}: a round of disjoint pairs");
        }
        assert_eq!(seen.len(), n * (n - 1), "n={n}: every ordered pair once");
    }

    #[test]
    fn every_ordered_pair_runs_once_and_no_host_twice_in_a_step() {
        for n in 2..=40 {
            check_tournament(n);
        }
    }

    #[test]
    fn sixteen_hosts_take_fifteen_rounds_of_eight_pairs_each_way() {
        let steps = tournament(16);
        assert_eq!(steps.len(), 30);
        assert!(steps.iter().all(|s| s.pairs.len() == 8));
        assert_eq!(steps.last().map(|s| s.round), Some(14));
    }

    #[test]
    fn fewer_than_two_hosts_have_no_pairs() {
        assert!(tournament(0).is_empty() && tournament(1).is_empty());
    }

    #[test]
    fn concurrent_steps_cover_every_pair_in_chunks_of_the_width() {
        let steps = concurrent(5, 7);
        let all: BTreeSet<Pair> = steps.iter().flat_map(|s| s.pairs.clone()).collect();
        assert_eq!(all.len(), 20);
        assert!(steps.iter().all(|s| s.pairs.len() <= 7));
        assert_eq!(steps.len(), 3);
    }

    #[test]
    fn a_resumed_schedule_skips_done_pairs_and_empty_steps() {
        let steps = tournament(4);
        let done: BTreeSet<Pair> = steps[0].pairs.iter().copied().collect();
        let rest = without(steps.clone(), &done);
        assert_eq!(rest.len(), steps.len() - 1);
        assert!(
            rest.iter()
                .flat_map(|s| &s.pairs)
                .all(|p| !done.contains(p))
        );
    }
}
