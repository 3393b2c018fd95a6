//! # tcplab-host: this machine's kernel settings, as both a lab and an agent read them
//!
//! A lab sets sysctls in each of its hosts and reads back what it built; an agent holds sysctls
//! for a coordinator and says what its host is. Both do it through this crate, so the agent
//! needs no lab (and no emulator) to do its part.
//!
//! ## Map
//! - Kernel layers, one module each, acting on the calling thread's network namespace:
//!   [`sysctl`] (keys checked, read, written and read back), [`rtnl`] (rtnetlink: veth,
//!   bridges, addresses, link dumps), [`ethtool`] (offloads).
//! - [`ifaddr`]: an interface address restricted to the lab ranges (pure).
//! - [`facts`]: the machine's facts and this namespace's as a host (types in
//!   `tcplab_results::facts`), and the build stamp every fact set names.
//! - [`error`]: [`HostError`], whose messages are the lab's words for the same faults.
//!
//! Who calls whom: `tcplab-lab` builds hosts with the kernel layers and adds its hosts to the
//! facts; `tcplab-agent` holds sysctls and answers facts. Nothing here knows of either.

pub mod error;
pub mod ethtool;
pub mod facts;
pub mod ifaddr;
pub mod rtnl;
pub mod sysctl;

pub use error::{HostError, Result};
