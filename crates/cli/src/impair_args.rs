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
    /// Bottleneck queue: packets (1000) or bytes (256kb); drop-tail unless --queue-discipline.
    #[arg(long, allow_hyphen_values = true, help_heading = "Impairments")]
    queue: Option<String>,
    /// Queue management at the bottleneck: droptail (default), red, codel, fq_codel or pie,
    /// with parameters as NAME:KEY=VALUE,... (e.g. codel:target=5ms,ecn). Needs --rate.
    #[arg(
        long,
        value_name = "NAME[:KEY=VALUE,...]",
        help_heading = "Impairments"
    )]
    queue_discipline: Option<String>,
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
        !self.flags().is_empty()
    }

    /// The flags as the emulator's flag set (a scenario's `[lab.link]` table).
    pub fn flags(&self) -> ImpairmentFlags {
        ImpairmentFlags::from(self)
    }

    /// The flags given, as `(name, value)` with the scenario's key names (`jitter_dist`, ...).
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        self.flags()
            .pairs()
            .into_iter()
            .map(|(k, v)| (k, v.to_owned()))
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

/// The one copy from clap's flags into the emulator's type. Both sides are destructured in
/// full, so a flag added to one and not the other fails to compile; the test below checks that
/// each flag lands under its own scenario key.
impl From<&ImpairArgs> for ImpairmentFlags {
    fn from(args: &ImpairArgs) -> Self {
        let ImpairArgs {
            delay,
            jitter,
            jitter_dist,
            correlation,
            loss,
            loss_model,
            rate,
            queue,
            queue_discipline,
            overhead,
            reorder,
            duplicate,
            corrupt,
            seed,
        } = args.clone();
        ImpairmentFlags {
            delay,
            jitter,
            jitter_dist,
            correlation,
            loss,
            loss_model,
            rate,
            queue,
            queue_discipline,
            overhead,
            reorder,
            duplicate,
            corrupt,
            seed,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        impair: ImpairArgs,
    }

    /// Every impairment flag reaches the emulator's type under its scenario key (`--jitter-dist`
    /// as `jitter_dist`) and round-trips through the scenario's TOML, and every key of the
    /// emulator's type has a flag: the command line and `[lab.link]` cannot drift apart.
    #[test]
    fn every_flag_reaches_the_emu_type_under_its_scenario_key() {
        let cmd = Cli::command();
        let mut flags: Vec<String> = Vec::new();
        for arg in cmd.get_arguments() {
            let Some(long) = arg.get_long() else {
                continue;
            };
            flags.push(long.to_string());
            let key = arg.get_id().as_str();
            assert_eq!(ImpairmentFlags::flag(key), format!("--{long}"), "{key}");
            let value = format!("{key}-value/2");
            let cli = Cli::try_parse_from(["tcplab", &format!("--{long}"), &value])
                .unwrap_or_else(|e| panic!("--{long}: {e}"));
            let emu = cli.impair.flags();
            assert_eq!(emu.pairs(), [(key, value.as_str())], "--{long}");
            assert_eq!(cli.impair.pairs(), [(key, value.clone())]);
            assert!(cli.impair.any());
            let text = toml::to_string(&emu).expect("serialises");
            let table: toml::Table = toml::from_str(&text).expect(&text);
            assert_eq!(
                table.get(key).and_then(|v| v.as_str()),
                Some(value.as_str())
            );
            assert_eq!(toml::from_str::<ImpairmentFlags>(&text).expect(&text), emu);
        }
        let mut keys: Vec<String> = ImpairmentFlags::FIELDS
            .iter()
            .map(|k| ImpairmentFlags::flag(k)[2..].to_string())
            .collect();
        flags.sort();
        keys.sort();
        assert_eq!(flags, keys, "every [lab.link] key has its flag and no more");
        assert!(
            !Cli::try_parse_from(["tcplab"])
                .expect("no flags")
                .impair
                .any()
        );
    }
}
