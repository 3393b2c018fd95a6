//! `tcplab facts`: the machine facts every result carries.

use std::process::ExitCode;

use clap::Args;
use tcplab_lab::Lab;

use crate::output;

/// Arguments of `tcplab facts`.
#[derive(Debug, Args)]
pub struct FactsArgs {
    /// Also record the hosts of this lab (sysctls, interfaces, offloads).
    #[arg(long)]
    pub lab: Option<String>,
    /// One JSON document on stdout.
    #[arg(long)]
    json: bool,
}

impl FactsArgs {
    /// Collects and prints the facts.
    pub fn run(self) -> ExitCode {
        let json = self.json;
        output::finish(json, self.collect())
    }

    fn collect(self) -> anyhow::Result<ExitCode> {
        let facts = match &self.lab {
            Some(name) => tcplab_lab::facts::collect(&Lab::open(name)?)?,
            None => tcplab_lab::facts::machine(),
        };
        if self.json {
            return Ok(output::print_json(&facts));
        }
        outln!("kernel      {} ({})", facts.kernel_release, facts.machine);
        outln!(
            "HZ          {} (tick {} ns, {})",
            facts.hz.hz,
            facts.hz.tick_ns,
            facts.hz.method
        );
        outln!("CPUs        {} x {}", facts.cpu.count, facts.cpu.model);
        outln!(
            "congestion  default {}, available {}",
            facts.congestion_control.default,
            facts.congestion_control.available.join(" ")
        );
        let sched = &facts.scheduling;
        let or_unknown = |v: Option<String>| v.unwrap_or_else(|| "unknown".into());
        outln!(
            "scheduling  preemption {} ({}), cpuidle driver {}, RT runtime {} us/s, autogroup {}",
            sched.preemption,
            sched.preemption_source,
            or_unknown(sched.cpuidle_driver.clone()),
            or_unknown(sched.rt_runtime_us.map(|v| v.to_string())),
            or_unknown(
                sched
                    .autogroup
                    .map(|v| if v { "on".into() } else { "off".into() })
            ),
        );
        let rootless = &facts.rootless;
        if rootless.allowed {
            outln!(
                "rootless    labs allowed without root (user namespaces){}",
                if rootless.this_process {
                    "; this command ran in one"
                } else {
                    ""
                }
            );
        } else {
            outln!("rootless    not allowed: {}", rootless.why_not.join("; "));
        }
        if let Some(o) = &facts.emulator_override {
            outln!("emulator    TCPLAB_EMU_IO = {o} (overrides the labs' emulator options)");
        }
        for (k, v) in &facts.machine_sysctls {
            outln!("machine     {k} = {v}");
        }
        for (host, hf) in &facts.hosts {
            for (k, v) in &hf.sysctls {
                outln!("{host:<11} {k} = {v}");
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}
