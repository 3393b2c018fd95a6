//! The loss element at a direction's entry: Bernoulli, Gilbert-Elliott, or a pattern.
//!
//! Draws per packet are fixed by the model (Bernoulli 1, Gilbert-Elliott 2, pattern 0), so a
//! loss decision never shifts another packet's draws. Gilbert-Elliott follows netem: at each
//! packet the state first moves (good → bad with `p`, bad → good with `r`), then the packet is
//! lost with the new state's loss probability (`1-k` in good, `1-h` in bad).

use rand::Rng as _;

use crate::Loss;
use crate::pattern::PatternCursor;
use crate::rng::Rng;

#[derive(Debug, Clone)]
enum State {
    None,
    Bernoulli {
        p: f64,
    },
    GilbertElliott {
        p: f64,
        r: f64,
        bad_loss: f64,
        good_loss: f64,
        bad: bool,
    },
    Pattern(PatternCursor),
}

/// Decides which packets are lost.
#[derive(Debug, Clone)]
pub struct LossElement {
    state: State,
    cfg: Option<Loss>,
    rng: Rng,
}

impl LossElement {
    /// An element for `cfg` drawing from `rng`.
    pub(crate) fn new(cfg: Option<&Loss>, rng: Rng) -> Self {
        Self {
            state: Self::state_for(cfg),
            cfg: cfg.cloned(),
            rng,
        }
    }

    fn state_for(cfg: Option<&Loss>) -> State {
        match cfg {
            None => State::None,
            Some(Loss::Bernoulli { probability }) => State::Bernoulli { p: *probability },
            Some(Loss::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            }) => State::GilbertElliott {
                p: *p,
                r: *r,
                bad_loss: *one_minus_h,
                good_loss: *one_minus_k,
                bad: false,
            },
            Some(Loss::Pattern(pat)) => State::Pattern(pat.cursor()),
        }
    }

    /// New settings. Gilbert-Elliott keeps its current state and an unchanged pattern keeps
    /// its position, so a change of parameters does not restart a burst or a cycle.
    pub(crate) fn reconfigure(&mut self, cfg: Option<&Loss>) {
        if self.cfg.as_ref() == cfg {
            return;
        }
        let was_bad = matches!(self.state, State::GilbertElliott { bad: true, .. });
        self.state = Self::state_for(cfg);
        if let State::GilbertElliott { bad, .. } = &mut self.state {
            *bad = was_bad;
        }
        self.cfg = cfg.cloned();
    }

    /// Whether the next packet is lost.
    pub fn lose(&mut self) -> bool {
        match &mut self.state {
            State::None => false,
            State::Bernoulli { p } => self.rng.random::<f64>() < *p,
            State::GilbertElliott {
                p,
                r,
                bad_loss,
                good_loss,
                bad,
            } => {
                let move_draw = self.rng.random::<f64>();
                let loss_draw = self.rng.random::<f64>();
                if *bad {
                    if move_draw < *r {
                        *bad = false;
                    }
                } else if move_draw < *p {
                    *bad = true;
                }
                loss_draw < if *bad { *bad_loss } else { *good_loss }
            }
            State::Pattern(c) => c.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Direction, Stream, stream};

    fn element(cfg: Loss) -> LossElement {
        LossElement::new(Some(&cfg), stream(7, Direction::Forward, Stream::Loss))
    }

    #[test]
    fn extremes_are_exact() {
        let mut all = element(Loss::Bernoulli { probability: 1.0 });
        let mut none = element(Loss::Bernoulli { probability: 0.0 });
        assert!((0..10_000).all(|_| all.lose()));
        assert!((0..10_000).all(|_| !none.lose()));
    }

    #[test]
    fn gilbert_elliott_losses_come_in_bursts() {
        // Stuck in bad once entered (r = 0) with 1-h = 100%: every loss after the first is
        // consecutive.
        let mut ge = element(Loss::GilbertElliott {
            p: 0.01,
            r: 0.0,
            one_minus_h: 1.0,
            one_minus_k: 0.0,
        });
        let seq: Vec<bool> = (0..5000).map(|_| ge.lose()).collect();
        let first = seq.iter().position(|&l| l).expect("enters bad state");
        assert!(seq[first..].iter().all(|&l| l));
    }

    #[test]
    fn reconfigure_keeps_bad_state() {
        let cfg = |h| Loss::GilbertElliott {
            p: 1.0,
            r: 0.0,
            one_minus_h: h,
            one_minus_k: 0.0,
        };
        let mut ge = element(cfg(1.0));
        assert!(ge.lose());
        ge.reconfigure(Some(&cfg(1.0)));
        ge.reconfigure(Some(&Loss::GilbertElliott {
            p: 0.0,
            r: 0.0,
            one_minus_h: 1.0,
            one_minus_k: 0.0,
        }));
        // p = 0 now, but the chain is already bad and r = 0: still losing.
        assert!((0..100).all(|_| ge.lose()));
    }
}
