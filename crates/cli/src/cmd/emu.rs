//! `tcplab emu`: the user-space link emulator between two interfaces — standalone on any machine
//! (a two-port layer-2 impairment bridge, like BalticGrid's middle server), or as the emulator
//! process of a persistent lab (`--lab NAME`, started by `tcplab lab up`).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use tcplab_emu_io::Tuning;
use tcplab_lab::emulation::{self, EmulationSpec, Emulator};
use tcplab_lab::{Lab, Privileges, StateDir};

use crate::output;
use tcplab::impair_args::ImpairArgs;

/// Arguments of `tcplab emu`.
#[derive(Debug, Args)]
pub struct EmuArgs {
    /// The two interfaces to bridge (give it twice): frames from the first take the
    /// client→server impairments.
    #[arg(
        long = "iface",
        num_args = 1,
        value_name = "IFACE",
        conflicts_with = "lab"
    )]
    ifaces: Vec<String>,
    /// Run as the emulator of this lab (in its middle host), with the lab's impairments.
    #[arg(long)]
    lab: Option<String>,
    /// Stop after this many seconds (default: run until SIGINT/SIGTERM).
    #[arg(long)]
    duration: Option<f64>,
    /// Busy-poll instead of sleeping (lowest lateness; one core at 100%).
    #[arg(long)]
    busy_poll: bool,
    /// GSO-aware mode for interfaces with segmentation offloads on (tso, gso and tx checksum
    /// on both): TSO/GSO super-packets cross whole, charged as the wire packets they stand for;
    /// each segment meets loss, duplicate, reorder and corrupt on its own, and a super-packet
    /// one of them changed is cut into its segments. With --lab, the lab's offloads decide.
    #[arg(long)]
    gso: bool,
    /// Let the CPUs halt while frames wait for their departure (by default a lowest-priority
    /// spinner per CPU keeps them awake then: a halted vCPU wakes up to a timer tick late).
    #[arg(long)]
    no_keep_awake: bool,
    /// A scheduling knob of the emulator's workers, KEY=VALUE (a field of its tuning:
    /// due_batch=16, flow_turns=false; docs/lab.md lists them with their measured defaults);
    /// repeatable. With --lab, set over the lab file's [emulator.tuning].
    #[arg(long = "tuning", value_name = "KEY=VALUE")]
    tuning: Vec<String>,
    /// Print the final report as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    impair: ImpairArgs,
}

impl EmuArgs {
    /// Runs the emulator until told to stop, then prints its report and fidelity verdict.
    pub fn run(self) -> ExitCode {
        let json = self.json;
        output::finish(json, self.run_inner())
    }

    fn run_inner(self) -> anyhow::Result<ExitCode> {
        let privileges = Privileges::decided();
        privileges.require("running the emulator")?;
        let mut opts = tcplab_emu_io::IoOptions {
            busy_poll: self.busy_poll,
            // Partial checksums cross as they would a kernel bridge; frames with complete
            // ones are unaffected.
            vnet: if self.gso {
                tcplab_emu_io::Vnet::Gso
            } else {
                tcplab_emu_io::Vnet::Header
            },
            keep_awake: !self.no_keep_awake,
            tuning: emulation::tuning_with(Tuning::default(), &self.tuning)?,
            ..Default::default()
        };
        // Signals are registered before the emulator starts so none is lost.
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
        let (emu, lab_name) = match &self.lab {
            Some(name) => {
                let state = StateDir::from_env();
                let lab = Lab::open_in(state.clone(), name)?;
                let spec: EmulationSpec = lab.spec().emulation.clone().ok_or_else(|| {
                    anyhow::anyhow!(
                        "--lab {name}: the lab has no emulated link (built with --bridge kernel?)"
                    )
                })?;
                // The lab's own options (offloads, its tuning, TCPLAB_EMU_IO), then this
                // command's flags.
                let tuning = emulation::tuning_with(spec.tuning, &self.tuning)?;
                let lab_opts = emulation::io_options(lab.spec().offloads, tuning)?;
                opts = tcplab_emu_io::IoOptions {
                    busy_poll: self.busy_poll || lab_opts.busy_poll,
                    keep_awake: lab_opts.keep_awake && !self.no_keep_awake,
                    ..lab_opts
                };
                let opts = allowed(privileges, opts);
                let emu = Emulator::start(lab.host(&spec.host)?, &spec, &opts)?
                    .serve(emulation::control_path(&state, name))?;
                (emu, Some((state, name.clone())))
            }
            None => {
                let [a, b] = self.ifaces.as_slice() else {
                    anyhow::bail!(
                        "--iface: give exactly two interfaces (--iface A --iface B), or --lab NAME"
                    );
                };
                let link = self.impair.link()?;
                let opts = allowed(privileges, opts);
                (Emulator::start_here([a, b], &link, &opts)?, None)
            }
        };
        eprintln!(
            "tcplab emu: running, seed {}; {}",
            emu.seed(),
            emu.status().link
        );
        let deadline = self
            .duration
            .map(|s| Instant::now() + Duration::from_secs_f64(s.max(0.0)));
        loop {
            if signals.pending().next().is_some() {
                break;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            // The emulator dies with its lab: stop once the lab's record is gone.
            if let Some((state, name)) = &lab_name {
                if state.read(name).ok().flatten().is_none() {
                    break;
                }
            }
            if !emu.status().running {
                eprintln!("tcplab emu: a worker stopped");
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let report = emu.stop();
        let fidelity = report.verdict(&emulation::default_thresholds());
        if self.json {
            output::print_json(&serde_json::json!({ "report": report, "fidelity": fidelity }));
        } else {
            for line in report.summary_lines() {
                eprintln!("tcplab emu: {line}");
            }
            eprintln!("tcplab emu: fidelity: {fidelity}");
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// The emulator's options as far as this process's privileges allow, each change said once.
fn allowed(privileges: &Privileges, opts: tcplab_emu_io::IoOptions) -> tcplab_emu_io::IoOptions {
    let (opts, notices) = privileges.emulator_fallbacks(opts);
    tcplab_lab::privileges::tell_once(&notices);
    opts
}
