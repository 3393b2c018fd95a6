//! The impairment flags shared by `tcplab emu`, `tcplab lab up` and `tcplab lab set`. A bare value
//! applies to each direction (`--delay 10ms` gives a 20 ms RTT); `A/B` sets client→server / server→client.

use clap::Args;
use tcplab_emu::{ImpairmentFlags, LinkConfig};

/// Link impairments. Numeric flags accept a leading `-` so that `--delay -5ms` reaches the value
/// parser and is refused as negative with the flag named, rather than read as an unknown flag.
#[derive(Debug, Args, Clone, Default)]
pub struct ImpairArgs {
    /// One-way delay, e.g. 10ms or 10ms/2ms (client→server/server→client).
    #[arg(
        long,
        allow_hyphen_values = true,
        value_name = "DELAY[/DELAY]",
        help_heading = "Impairments"
    )]
    delay: Option<String>,
    /// Jitter amount, e.g. 1ms (the sd for --jitter-dist normal).
    #[arg(long, allow_hyphen_values = true, help_heading = "Impairments")]
    jitter: Option<String>,
    /// uniform, normal, pareto, paretonormal, or table:FILE (netem .dist format).
    #[arg(long, help_heading = "Impairments")]
    jitter_dist: Option<String>,
    /// Correlation of successive jitter values, e.g. 25%.
    #[arg(long, allow_hyphen_values = true, help_heading = "Impairments")]
    correlation: Option<String>,
    /// Random loss, e.g. 0.1%.
    #[arg(long, allow_hyphen_values = true, help_heading = "Impairments")]
    loss: Option<String>,
    /// ge:P,R,1-H,1-K (Gilbert-Elliott) or pattern:FILE.
    #[arg(long, help_heading = "Impairments")]
    loss_model: Option<String>,
    /// Bottleneck rate, e.g. 1gbit, 100mbit.
    #[arg(long, allow_hyphen_values = true, help_heading = "Impairments")]
    rate: Option<String>,
    /// Bottleneck queue: packets (1000) or bytes (256kb); drop-tail.
    #[arg(long, allow_hyphen_values = true, help_heading = "Impairments")]
    queue: Option<String>,
    /// Per-packet overhead counted by --rate, bytes (24 for Ethernet preamble, IFG and FCS).
    #[arg(long, allow_hyphen_values = true, help_heading = "Impairments")]
    overhead: Option<String>,
    /// Reordering: a probability (1%), gap:N, or jitter (let jitter reorder).
    #[arg(long, help_heading = "Impairments")]
    reorder: Option<String>,
    /// Duplication probability, e.g. 0.1%.
    #[arg(long, allow_hyphen_values = true, help_heading = "Impairments")]
    duplicate: Option<String>,
    /// Corruption probability (one bit flipped), e.g. 0.01%.
    #[arg(long, allow_hyphen_values = true, help_heading = "Impairments")]
    corrupt: Option<String>,
    /// Seed of every random stream (printed when not given; replays a run).
    #[arg(long, allow_hyphen_values = true, help_heading = "Impairments")]
    seed: Option<String>,
}

impl ImpairArgs {
    /// The demo's link: 1 Gbit/s with a 1000-packet queue, 15 ms each way, 0.01% loss, seeded.
    pub fn demo() -> ImpairArgs {
        ImpairArgs {
            delay: Some("15ms".into()),
            loss: Some("0.01%".into()),
            rate: Some("1gbit".into()),
            queue: Some("1000".into()),
            seed: Some("2008".into()),
            ..ImpairArgs::default()
        }
    }

    /// Whether any impairment flag was given.
    pub fn any(&self) -> bool {
        let f = self.flags();
        [
            &f.delay,
            &f.jitter,
            &f.jitter_dist,
            &f.correlation,
            &f.loss,
            &f.loss_model,
            &f.rate,
            &f.queue,
            &f.overhead,
            &f.reorder,
            &f.duplicate,
            &f.corrupt,
            &f.seed,
        ]
        .iter()
        .any(|v| v.is_some())
    }

    fn flags(&self) -> ImpairmentFlags {
        ImpairmentFlags {
            delay: self.delay.clone(),
            jitter: self.jitter.clone(),
            jitter_dist: self.jitter_dist.clone(),
            correlation: self.correlation.clone(),
            loss: self.loss.clone(),
            loss_model: self.loss_model.clone(),
            rate: self.rate.clone(),
            queue: self.queue.clone(),
            overhead: self.overhead.clone(),
            reorder: self.reorder.clone(),
            duplicate: self.duplicate.clone(),
            corrupt: self.corrupt.clone(),
            seed: self.seed.clone(),
        }
    }

    /// The flags given, as `(name, value)` with the scenario's key names (`jitter_dist`, ...).
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let f = self.flags();
        [
            ("delay", f.delay),
            ("jitter", f.jitter),
            ("jitter_dist", f.jitter_dist),
            ("correlation", f.correlation),
            ("loss", f.loss),
            ("loss_model", f.loss_model),
            ("rate", f.rate),
            ("queue", f.queue),
            ("overhead", f.overhead),
            ("reorder", f.reorder),
            ("duplicate", f.duplicate),
            ("corrupt", f.corrupt),
            ("seed", f.seed),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
    }

    /// The link configuration, reading table/pattern files the flags name.
    pub fn link(&self) -> anyhow::Result<LinkConfig> {
        let read = |path: &str| {
            std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))
        };
        Ok(self.flags().to_link_config_with(&read)?)
    }
}
