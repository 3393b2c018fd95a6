//! # tcplab-lab: an emulated network on one machine
//!
//! A *lab* is a set of hosts (network namespaces named `tcplab-<lab>-<host>`, so `ip netns exec`
//! works) joined by veth links, with addresses from 198.18.0.0/15 and fd00::/8 only, and with
//! per-host sysctls. This crate builds, lists, enters and removes labs.
//!
//! ## Map
//! - [`spec`]: what a lab is (pure): built-in topologies `pair`, `path`, `dumbbell`, `star`
//!   expanded into one generic shape; validation. [`file`](mod@file): the same from TOML. [`names`]: the
//!   naming rules of labs, hosts and interfaces, and the namespace names they make.
//! - [`lab`]: building (all or nothing), opening, tearing down; [`host`]: running a thread, a
//!   scoped thread or a process inside a host.
//! - Kernel layers: [`netns`] (namespaces, setns) here; rtnetlink (veth, bridges, addresses),
//!   offloads and per-namespace sysctls in `tcplab_host` (`rtnl`, `ethtool`, `sysctl`), which
//!   the agent shares; [`from_host`] puts its errors in the lab's words.
//! - [`state`]: the registry (one file per lab, with its owner PID) and the journal of
//!   host-global sysctls; [`lifecycle`]: signal teardown and `gc`.
//! - [`status`] and [`facts`]: what exists and what explains a measurement (the machine's
//!   facts are `tcplab_host::facts`'; a lab adds its hosts and the rootless verdict).
//! - [`privileges`]: what this process may do (root, a rootless session, neither), decided once
//!   at the top and passed into the build; where its namespace handles and state live.
//! - [`rootless`]: labs for a user without root, in a user namespace the user owns and a
//!   holder process keeps (a session per user), and what the machine allows.
//! - [`nginx`]: a real nginx serving a directory inside a host, recorded as a lab companion
//!   (its config renderer is pure).
//!
//! Who calls whom: the CLI and the lab runs (`tcplab-front`) call [`Lab`] and [`Host`]; `Lab`
//! calls `build`, which calls the kernel layers; teardown paths all go through `lab::teardown`.

pub mod build;
pub mod check;
pub mod emulation;
pub mod error;
pub mod facts;
pub mod file;
pub mod from_host;
pub mod host;
pub mod lab;
pub mod lifecycle;
pub mod names;
pub mod neighbours;
pub mod netns;
pub mod nginx;
pub mod privileges;
pub mod rootless;
pub mod spec;
pub mod state;
pub mod status;
mod sysctl_apply;

pub use error::{LabError, Result};
pub use facts::Facts;
pub use host::Host;
pub use lab::{Lab, Ownership, require_root, teardown};
pub use lifecycle::{GcReport, gc, teardown_on_signals};
pub use privileges::Privileges;
pub use spec::{
    BridgeMode, BuiltinOptions, IfAddr, LabSpec, Offloads, Role, SysctlSetting, Topology,
};
pub use state::StateDir;
