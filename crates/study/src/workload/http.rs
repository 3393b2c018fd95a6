//! `kind = "http"`: HTTP/1.1 GETs from the lab's client to a web server started in its server
//! host (`tcplab_load::http`), SPECweb96's file mix by default (seed 003).
//!
//! The parameters are `tcplab http --lab`'s flags under their scenario names. They are checked
//! when the table is read (also after a factor changed one), so a bad value is reported with
//! the file's line before any lab is built, naming the key and the fix, rather than by the
//! client's own check (which names its command-line flag) in the middle of a sweep.

use serde::{Deserialize, Serialize};
use tcplab_load::http::run::{LabServer, ServerKind};
use tcplab_results::http::config::{HttpConfig, MAX_CONNECTIONS, MAX_RATE};
use tcplab_results::http::mix::{Mix, Mixer};

use super::{DurationText, ten_seconds};

fn four() -> u32 {
    4
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn builtin() -> ServerKind {
    ServerKind::Builtin
}

fn is_builtin(k: &ServerKind) -> bool {
    *k == ServerKind::Builtin
}

/// `kind = "http"`: web requests against a server in the lab.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpParams {
    /// Concurrent connections: the most requests in flight at once (closed loop).
    #[serde(default = "four")]
    pub connections: u32,
    /// Requests per connection before the client closes it; 1 is a connection per request.
    /// Unset: each connection is kept for the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_connection: Option<u64>,
    /// Shorthand for `requests_per_connection = 1` (`Connection: close`), as SPECweb96's
    /// HTTP/1.0 clients did. Written only when true, so a scenario without it keeps its hash.
    #[serde(default, skip_serializing_if = "is_false")]
    pub close: bool,
    /// Open loop at this many requests/s over all connections (unset: closed loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// How long to run (a cap when `count` is set).
    #[serde(default = "ten_seconds")]
    pub duration: DurationText,
    /// Requests in all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// The web server started in the server host: `builtin` (tcplab's file server) or `nginx`.
    #[serde(default = "builtin", skip_serializing_if = "is_builtin")]
    pub server: ServerKind,
    /// Directories of the SPECweb96 file set the server serves (36 files, ~5.1 MB each).
    #[serde(default = "four")]
    pub dirs: u32,
    /// URL paths requested in turn instead of SPECweb96's mix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub urls: Option<Vec<String>>,
}

impl HttpParams {
    /// Checks the values the client would refuse, with the key and the fix.
    pub fn check(&self) -> Result<(), String> {
        if self.connections == 0 || self.connections > MAX_CONNECTIONS {
            return Err(format!(
                "`connections` = {} is outside 1..={MAX_CONNECTIONS}; write e.g. connections = 4",
                self.connections
            ));
        }
        match (self.close, self.requests_per_connection) {
            (_, Some(0)) => {
                return Err(
                    "`requests_per_connection` = 0: it must be at least 1 (1 = a connection per request; leave it out to keep connections open)"
                        .into(),
                );
            }
            (true, Some(n)) if n != 1 => {
                return Err(format!(
                    "`close = true` means requests_per_connection = 1, but `requests_per_connection` = {n}: keep one of them"
                ));
            }
            _ => {}
        }
        if let Some(r) = self.rate
            && !(r.is_finite() && r > 0.0 && r <= MAX_RATE)
        {
            return Err(format!(
                "`rate` = {r} requests/s is outside (0, {MAX_RATE}]; leave it out for a closed loop"
            ));
        }
        if self.count == Some(0) {
            return Err("`count` = 0: give at least 1 request, or leave it out".into());
        }
        if self.duration.ns() < 1_000_000 {
            return Err(format!(
                "`duration` = {:?} is under 1 ms; write e.g. duration = \"10s\"",
                self.duration.to_string()
            ));
        }
        Mixer::new(&Mix::Specweb96 { dirs: self.dirs }, 0)
            .map_err(|e| format!("`dirs` = {}: {e}", self.dirs))?;
        if let Some(urls) = &self.urls {
            Mixer::new(&Mix::Paths(urls.clone()), 0)
                .map_err(|e| format!("`urls`: {e}; write e.g. urls = [\"/dir00000/class1_1\"]"))?;
        }
        Ok(())
    }

    /// Requests per connection as the client takes it (`close` is 1).
    pub fn per_connection(&self) -> Option<u64> {
        if self.close {
            Some(1)
        } else {
            self.requests_per_connection
        }
    }

    /// What is requested: the listed paths, else SPECweb96's mix over the server's file set.
    pub fn mix(&self) -> Mix {
        match &self.urls {
            Some(urls) => Mix::Paths(urls.clone()),
            None => Mix::Specweb96 { dirs: self.dirs },
        }
    }

    /// The client's configuration, with the workload's socket options.
    pub fn config(&self, opts: tcplab_results::sockopt::SockOpts) -> HttpConfig {
        HttpConfig {
            connections: self.connections,
            requests_per_connection: self.per_connection(),
            rate: self.rate,
            mix: self.mix(),
            count: self.count,
            duration_ms: Some(self.duration.ns() / 1_000_000),
            opts,
            ..HttpConfig::default()
        }
    }

    /// The server the run starts in the lab's server host.
    pub fn lab_server(&self) -> LabServer {
        LabServer {
            kind: self.server,
            dirs: self.dirs,
            workers: None,
        }
    }

    /// A rough duration of one run: the duration, or with `count` 200 µs per request per
    /// connection (a connection per request in a lab on this kind of machine), capped by it.
    pub fn estimated_secs(&self) -> f64 {
        match self.count {
            Some(n) => {
                (n as f64 * 200e-6 / f64::from(self.connections.max(1))).min(self.duration.secs())
            }
            None => self.duration.secs(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Workload, WorkloadKind};
    use super::*;

    fn parse(text: &str) -> Result<Workload, String> {
        Workload::from_table(toml::from_str(text).map_err(|e: toml::de::Error| e.to_string())?)
    }

    fn http(text: &str) -> Result<HttpParams, String> {
        match parse(text)?.kind {
            WorkloadKind::Http(p) => Ok(p),
            other => panic!("kind {other:?}"),
        }
    }

    #[test]
    fn defaults_are_four_keepalive_connections_on_specweb96_for_10s() {
        let w = parse("kind = 'http'\n").unwrap();
        assert_eq!(w.kind_name(), "http");
        let WorkloadKind::Http(p) = &w.kind else {
            panic!("kind")
        };
        assert_eq!((p.connections, p.dirs, p.close), (4, 4, false));
        assert_eq!(p.server, ServerKind::Builtin);
        assert_eq!(p.duration.ns(), 10_000_000_000);
        let cfg = p.config(Default::default());
        assert_eq!(cfg.requests_per_connection, None);
        assert_eq!(cfg.mix, Mix::Specweb96 { dirs: 4 });
        assert_eq!(cfg.duration_ms, Some(10_000));
        assert!(cfg.validate().is_ok());
        // Defaults are not written back, so the scenario's hash does not depend on them.
        let table = w.to_table().unwrap();
        assert!(!table.contains_key("close") && !table.contains_key("server"));
        assert_eq!(Workload::from_table(table).unwrap(), w);
    }

    #[test]
    fn every_key_reaches_the_client_and_socket_options_sit_beside_them() {
        let w = parse(
            "kind = 'http'\nconnections = 16\nclose = true\nrate = 500.0\nduration = '3s'\n\
             count = 1000\nserver = 'nginx'\ndirs = 2\nurls = ['/a', '/b']\nnodelay = true\n",
        )
        .unwrap();
        assert_eq!(w.socket.nodelay, Some(true));
        let WorkloadKind::Http(p) = &w.kind else {
            panic!("kind")
        };
        let cfg = p.config(Default::default());
        assert_eq!(
            (cfg.connections, cfg.requests_per_connection, cfg.rate),
            (16, Some(1), Some(500.0))
        );
        assert_eq!((cfg.count, cfg.duration_ms), (Some(1000), Some(3000)));
        assert_eq!(cfg.mix, Mix::Paths(vec!["/a".into(), "/b".into()]));
        let server = p.lab_server();
        assert_eq!((server.kind, server.dirs), (ServerKind::Nginx, 2));
        assert_eq!(Workload::from_table(w.to_table().unwrap()).unwrap(), w);
        let p = http("kind = 'http'\nrequests_per_connection = 1\nclose = true\n").unwrap();
        assert_eq!(p.per_connection(), Some(1), "the same thing said twice");
    }

    #[test]
    fn unknown_keys_list_the_http_keys() {
        let e = parse("kind = 'http'\nconection = 3\n").unwrap_err();
        assert!(e.contains("unknown field `conection`"), "{e}");
        for key in ["`connections`", "`close`", "`urls`", "`nodelay`"] {
            assert!(e.contains(key), "{key}: {e}");
        }
        let e = parse("kind = 'http'\nsize = 3\n").unwrap_err();
        assert!(e.contains("unknown field `size`"), "msgs only: {e}");
    }

    #[test]
    fn bad_values_name_the_key_and_the_fix() {
        for (text, says) in [
            ("connections = 0", "`connections` = 0"),
            ("requests_per_connection = 0", "at least 1"),
            (
                "close = true\nrequests_per_connection = 5",
                "keep one of them",
            ),
            ("rate = -3.0", "`rate` = -3"),
            ("count = 0", "`count` = 0"),
            ("dirs = 0", "`dirs` = 0"),
            ("urls = []", "`urls`"),
            ("urls = ['no-slash']", "`urls`"),
            ("server = 'apache'", "unknown variant `apache`"),
            ("duration = 'soon'", "soon"),
        ] {
            let e = parse(&format!("kind = 'http'\n{text}\n")).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn quick_scales_duration_and_count_with_their_floors() {
        let w = parse("kind = 'http'\nduration = '10s'\ncount = 5000\n").unwrap();
        let WorkloadKind::Http(p) = w.scaled(0.1).kind else {
            panic!("kind")
        };
        assert_eq!((p.duration.ns(), p.count), (1_000_000_000, Some(500)));
        let WorkloadKind::Http(p) = w.scaled(0.001).kind else {
            panic!("kind")
        };
        assert_eq!((p.duration.ns(), p.count), (200_000_000, Some(100)));
        let small = parse("kind = 'http'\ncount = 50\n").unwrap();
        let WorkloadKind::Http(p) = small.scaled(0.1).kind else {
            panic!("kind")
        };
        assert_eq!(p.count, Some(50), "never enlarged");
        // 200 µs per request per connection, capped by the duration.
        let est = parse("kind = 'http'\ncount = 4000\nconnections = 4\n").unwrap();
        assert!((est.estimated_secs() - 0.2).abs() < 1e-9);
        assert_eq!(parse("kind = 'http'\n").unwrap().estimated_secs(), 10.0);
    }
}
