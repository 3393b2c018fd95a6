//! The `none` launcher: agents already running (a systemd unit, a DaemonSet, by hand). Nothing
//! is started or stopped; the coordinator connects with its own key and pins each agent's
//! `server_key`.

use std::net::SocketAddr;

use tcplab_auth::{ClientAuth, KeyPair, is_lab_or_loopback};

use super::{Agent, LaunchError, LaunchOptions};
use crate::inventory::{Inventory, Launch};

/// The agents of the running hosts of `inv`; a host off loopback and lab addresses without a
/// `server_key` is refused (its agent could be anyone's).
pub(super) fn agents(inv: &Inventory) -> Result<Vec<Agent>, LaunchError> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for h in inv.hosts.iter().filter(|h| h.launch == Launch::None) {
        let addr = SocketAddr::new(h.address, h.port);
        if h.server_key.is_none() && !is_lab_or_loopback(h.address) {
            errors.push(LaunchError::Unpinned {
                host: h.name.clone(),
                address: addr,
            });
            continue;
        }
        out.push(Agent {
            name: h.name.clone(),
            addr,
            server_key: h.server_key,
        });
    }
    match LaunchError::from_all(errors) {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// The coordinator's own credentials: `opts.key` (`--key`), else what the environment says
/// (`TCPLAB_KEY`, then the default key file, else a key made for this process, which only
/// unauthenticated lab agents take), as every client command reads them.
pub(super) fn coordinator_auth(opts: &LaunchOptions) -> Result<ClientAuth, LaunchError> {
    if let Some(path) = &opts.key {
        let key = KeyPair::load(path).map_err(|source| LaunchError::Key {
            what: "--key".into(),
            source,
        })?;
        return Ok(ClientAuth::new(key, format!("--key {}", path.display())));
    }
    ClientAuth::from_env().map_err(|e| LaunchError::Auth(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_agent_off_the_lab_needs_a_pin() {
        let inv = Inventory::parse(
            "[[host]]\nname = \"far\"\naddress = \"10.1.2.3\"\n\
             [[host]]\nname = \"lab\"\naddress = \"198.18.0.5\"\n",
            "hosts.toml",
        )
        .expect("parses");
        let e = agents(&inv).expect_err("unpinned").to_string();
        assert!(e.contains("host far") && e.contains("`server_key`"), "{e}");
        assert!(!e.contains("host lab"), "{e}");
    }

    #[test]
    fn pinned_and_lab_agents_are_taken_as_they_are() {
        let key = KeyPair::generate("k").expect("key");
        let text = format!(
            "[[host]]\nname = \"far\"\naddress = \"10.1.2.3\"\nport = 7000\nserver_key = \"{}\"\n\
             [[host]]\nname = \"lab\"\naddress = \"198.18.0.5\"\n",
            key.public_line()
        );
        let inv = Inventory::parse(&text, "hosts.toml").expect("parses");
        let a = agents(&inv).expect("agents");
        assert_eq!(a[0].addr, "10.1.2.3:7000".parse().expect("addr"));
        assert_eq!(a[0].server_key, Some(key.public()));
        assert_eq!((a[1].name.as_str(), a[1].server_key), ("lab", None));
    }
}
