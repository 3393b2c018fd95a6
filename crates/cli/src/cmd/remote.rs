//! Where a study, doctor or tune run measures when it is not a lab: `--to ADDRESS` (an agent
//! already running; the process's key and pins from `TCPLAB_KEY`/`TCPLAB_SERVER_KEY`), or
//! `--hosts FILE --to NAME` (the agent of host NAME in a hosts file, launched as the file says
//! and stopped when the command ends, its key pinned).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use tcplab_auth::ClientAuth;
use tcplab_fleet::inventory::Inventory;
use tcplab_fleet::launch::{Fleet, LaunchOptions, launch};

/// A remote agent and, when this process launched it, the guard that stops it.
#[derive(Debug)]
pub struct Remote {
    /// The agent's control address.
    pub addr: SocketAddr,
    /// Credentials that reach it (and only it, when its key is known).
    pub auth: ClientAuth,
    /// The launched agent (dropped: stopped).
    _fleet: Option<Fleet>,
}

/// The flags that choose a remote agent from a hosts file.
#[derive(Debug, Clone, Default)]
pub struct HostsChoice<'a> {
    /// `--hosts FILE`.
    pub hosts: Option<&'a Path>,
    /// `--to NAME|ADDRESS`.
    pub to: Option<&'a str>,
    /// `--ssh-option`s.
    pub ssh_options: &'a [String],
    /// Start the agent with `--allow-sysctl`.
    pub allow_sysctl: bool,
}

/// Resolves `--to` (and `--hosts`): None when neither was given. The remote's credentials are
/// installed as the process's, so every workload this run opens uses them.
pub fn resolve(choice: &HostsChoice<'_>) -> anyhow::Result<Option<Remote>> {
    let Some(file) = choice.hosts else {
        let Some(to) = choice.to else {
            return Ok(None);
        };
        let addr = super::doctor::remote(to)?;
        return Ok(Some(Remote {
            addr,
            auth: (*ClientAuth::current()?).clone(),
            _fleet: None,
        }));
    };
    let inv = Inventory::load(file)?;
    let host = match choice.to {
        Some(to) => inv
            .host(to)
            .or_else(|| inv.hosts.iter().find(|h| h.address.to_string() == to))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--to {to}: no such host in --hosts {} (its hosts: {})",
                    file.display(),
                    names(&inv)
                )
            })?,
        None if inv.hosts.len() == 1 => &inv.hosts[0],
        None => anyhow::bail!(
            "--hosts {}: say which host with --to NAME (its hosts: {})",
            file.display(),
            names(&inv)
        ),
    };
    let one = Inventory::new(&inv.source, inv.defaults.clone(), vec![host.clone()])?;
    let opts = LaunchOptions {
        allow_sysctl: choice.allow_sysctl,
        ssh_options: choice.ssh_options.to_vec(),
        start_timeout: Duration::from_secs(30),
        ..LaunchOptions::default()
    };
    let fleet = launch(&one, &opts).with_context(|| {
        format!(
            "--hosts {}: starting host {}'s agent",
            file.display(),
            host.name
        )
    })?;
    let agent = fleet
        .agent(&host.name)
        .ok_or_else(|| anyhow::anyhow!("host {}: its agent did not start", host.name))?;
    let auth = fleet
        .auth_for(&host.name)
        .unwrap_or_else(|| fleet.auth.clone());
    auth.clone().install();
    Ok(Some(Remote {
        addr: agent.addr,
        auth,
        _fleet: Some(fleet),
    }))
}

fn names(inv: &Inventory) -> String {
    inv.hosts
        .iter()
        .map(|h| h.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `--hosts` of doctor and tune: a host count for a built star or dumbbell (as before), or a
/// hosts file. A value of digits only is a count; write `./4` for a file named `4`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostsArg {
    /// Hosts of a built lab.
    Count(usize),
    /// A hosts file.
    File(PathBuf),
}

impl std::str::FromStr for HostsArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
            return s
                .parse()
                .map(HostsArg::Count)
                .map_err(|e| format!("{s}: {e}: give a host count such as 4, or a hosts file"));
        }
        if s.is_empty() {
            return Err("give a host count or a hosts file".into());
        }
        Ok(HostsArg::File(PathBuf::from(s)))
    }
}

impl HostsArg {
    /// The count for a built lab (a file means the default, 2; it is not a lab).
    pub fn count(&self) -> usize {
        match self {
            Self::Count(n) => *n,
            Self::File(_) => 2,
        }
    }

    /// The hosts file, if one was given.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Self::File(p) => Some(p),
            Self::Count(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_are_a_count_and_anything_else_a_file() {
        assert_eq!("4".parse::<HostsArg>(), Ok(HostsArg::Count(4)));
        assert_eq!(
            "fleet.toml".parse::<HostsArg>(),
            Ok(HostsArg::File("fleet.toml".into()))
        );
        assert_eq!("./4".parse::<HostsArg>(), Ok(HostsArg::File("./4".into())));
        assert!("".parse::<HostsArg>().is_err());
    }

    /// A count past `usize` said only "number too large to fit in target type".
    #[test]
    fn a_count_too_large_says_what_to_give() {
        let e = "99999999999999999999999".parse::<HostsArg>().unwrap_err();
        assert!(
            e.ends_with("give a host count such as 4, or a hosts file"),
            "{e}"
        );
    }
}
