//! The facts that explain a measurement in a lab: the machine's (read by `tcplab_host::facts`,
//! with this machine's verdict on rootless labs added) and each lab host's relevant sysctls and
//! interface settings. Every result carries them, so a figure read months later still says what
//! produced it.

use crate::error::Result;
use crate::lab::Lab;
pub use tcplab_host::facts::{build, config_preemption, preemption, set_build, this_host};
pub use tcplab_results::facts::*;

/// Facts about the machine alone, with whether unprivileged users may build labs here and the
/// emulator's I/O override if one is set (`TCPLAB_EMU_IO`).
pub fn machine() -> Facts {
    Facts {
        rootless: crate::privileges::rootless_facts(),
        emulator_override: crate::emulation::io_options_override(),
        ..tcplab_host::facts::machine()
    }
}

/// Facts about the machine and every host of a lab.
pub fn collect(lab: &Lab) -> Result<Facts> {
    let mut facts = machine();
    let extra: Vec<String> = lab.spec().sysctls.iter().map(|s| s.key.clone()).collect();
    for host in lab.hosts() {
        let extra = extra.clone();
        let host_facts = host.run(move || this_host(&extra))??;
        facts.hosts.insert(host.name().to_string(), host_facts);
    }
    Ok(facts)
}
