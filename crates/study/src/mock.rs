//! A mock [`Executor`] for tests and for measuring the sweep's own overhead: the objective is
//! a function of the configuration plus seeded noise, optionally after a sleep.

use std::collections::BTreeMap;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::plan::{Configuration, PlannedRun};
use crate::runner::{Executor, Fidelity, RunError, RunOutcome};

/// The mean of a configuration's objective, or `Err` to make the configuration fail.
pub type MeanFn = Box<dyn Fn(&Configuration) -> Result<f64, RunError> + Send>;

/// A hook called before each run.
pub type BeforeFn = Box<dyn FnMut(&PlannedRun) + Send>;

/// A deterministic stand-in for the lab + workloads.
pub struct MockExecutor {
    metric: String,
    mean: MeanFn,
    /// Relative noise: values are `mean × (1 + noise × u)`, u uniform in [-1, 1].
    noise: f64,
    seed: u64,
    delay: Duration,
    /// Every (config id, rep) run, in call order.
    pub calls: Vec<(usize, u32)>,
    /// Called before each run (tests use it to log run starts).
    pub before: Option<BeforeFn>,
}

impl std::fmt::Debug for MockExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockExecutor")
            .field("metric", &self.metric)
            .field("noise", &self.noise)
            .field("seed", &self.seed)
            .field("delay", &self.delay)
            .field("calls", &self.calls.len())
            .finish_non_exhaustive()
    }
}

impl MockExecutor {
    /// Reports `metric` = `mean(config)` with ±`noise` relative uniform noise.
    pub fn new(metric: &str, mean: MeanFn, noise: f64, seed: u64) -> MockExecutor {
        MockExecutor {
            metric: metric.to_string(),
            mean,
            noise,
            seed,
            delay: Duration::ZERO,
            calls: Vec::new(),
            before: None,
        }
    }

    /// Sleeps this long in each run (a stand-in for the workload's time).
    pub fn with_delay(mut self, delay: Duration) -> MockExecutor {
        self.delay = delay;
        self
    }

    /// The value a run of `config_id`, `rep` reports (noise seeded by seed, id and rep, so a
    /// re-run gives the same number).
    fn noise_for(&self, config_id: usize, rep: u32) -> f64 {
        let mut rng =
            ChaCha8Rng::seed_from_u64(self.seed ^ ((config_id as u64) << 32) ^ u64::from(rep));
        rng.random_range(-1.0..=1.0) * self.noise
    }
}

impl Executor for MockExecutor {
    fn run(&mut self, run: &PlannedRun) -> Result<RunOutcome, RunError> {
        if let Some(before) = self.before.as_mut() {
            before(run);
        }
        self.calls.push((run.config.id, run.rep));
        let mean = (self.mean)(&run.config)?;
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        let value = mean * (1.0 + self.noise_for(run.config.id, run.rep));
        let mut metrics = BTreeMap::new();
        metrics.insert(self.metric.clone(), value);
        metrics.insert("mock.rep".to_string(), f64::from(run.rep));
        let samples: Vec<u8> = (0..256u32)
            .flat_map(|i| (value + f64::from(i)).to_le_bytes())
            .collect();
        Ok(RunOutcome {
            metrics,
            samples,
            facts: serde_json::json!({ "executor": "mock", "config": run.config.label, "fresh_lab": run.fresh_lab }),
            fidelity: Fidelity::ok(),
            wall: self.delay,
            // The sleep stands for the workload.
            timing: crate::runner::RunTiming {
                workload_s: self.delay.as_secs_f64(),
                ..Default::default()
            },
        })
    }
}

/// The value of factor `name` in a configuration, as text.
pub fn factor<'a>(config: &'a Configuration, name: &str) -> Option<&'a str> {
    config
        .factors
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}
