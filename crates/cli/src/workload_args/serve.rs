//! `tcplab serve`'s flags: the agent's keys, scope and limits, and the HTTP file server beside
//! it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use tcplab_agent::Limits;
use tcplab_agent::args::AgentOptions;
use tcplab_front::ServeOptions;
use tcplab_load::http::fileset::MAX_DIRS;
use tcplab_load::http::serve::{HttpLimits, HttpServeOptions};
use tcplab_load::proto::DEFAULT_PORT;
use tcplab_load::units::{parse_bytes, parse_duration_ms};

/// `tcplab serve`: the server side of every workload, and with `--http PORT` an HTTP/1.1 file
/// server of SPECweb96's file set beside it.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on, ADDR[:PORT] (the port defaults to 5301, as `--to` assumes).
    #[arg(long, value_name = "ADDR[:PORT]", default_value_t = SocketAddr::from(([0, 0, 0, 0], DEFAULT_PORT)), value_parser = parse_listen)]
    pub listen: SocketAddr,
    /// Exit after this many tests.
    #[arg(long, value_name = "N")]
    pub max_tests: Option<u64>,
    /// Serve at SCHED_FIFO priority N, 1-99 (the server side of a client's `--rt-priority`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub rt_priority: Option<u8>,
    /// Keys, scope and limits (docs/fleet.md).
    #[command(flatten)]
    pub agent: AgentArgs,
    /// The HTTP file server (--http PORT, --http-dirs N, --http-max-connections N).
    #[command(flatten)]
    pub http: HttpServeArgs,
}

/// `--listen ADDR[:PORT]`: an address alone listens on the default port, the one `--to ADDR`
/// connects to.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = text.parse::<SocketAddr>() {
        return Ok(a);
    }
    text.trim_matches(['[', ']'])
        .parse::<std::net::IpAddr>()
        .map(|ip| SocketAddr::new(ip, DEFAULT_PORT))
        .map_err(|_| {
            format!(
                "{}: use ADDR[:PORT], e.g. 198.18.0.101, 198.18.0.101:5301 or [fd00::65]:5301",
                tcplab_emu::error::shown(text)
            )
        })
}

impl ServeArgs {
    /// What these flags ask `tcplab serve` to do, as tcplab-load takes it.
    pub fn options(&self) -> ServeOptions {
        ServeOptions {
            listen: self.listen,
            max_tests: self.max_tests,
            rt_priority: self.rt_priority,
            agent: self.agent.options(),
            http: self.http.options(),
        }
    }

    /// Serves until killed (or `--max-tests`).
    pub fn run(&self) -> anyhow::Result<ExitCode> {
        self.options().run()
    }
}

/// Authentication, scope and limits of `tcplab serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// Clients allowed to start tests: their public keys, one per line, with a comment (like
    /// ssh's authorized_keys; `tcplab key gen` prints one). Without it the server is
    /// unauthenticated and serves only loopback and lab addresses.
    #[arg(long, value_name = "FILE")]
    pub keys: Option<PathBuf>,
    /// The server's own secret key, whose public half clients pin with --server-key (default:
    /// TCPLAB_KEY; without --keys, a key made for this run).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Without --keys, serve any address, not only loopback and lab ones: anyone who can reach
    /// the port may run tests.
    #[arg(long, conflicts_with = "keys")]
    pub insecure: bool,
    /// Tests running at once; more are refused, naming this flag.
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_tests,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub max_concurrent: u32,
    /// Longest test, seconds (0: no limit); a test asking for more is refused, one running
    /// longer is stopped.
    #[arg(long, value_name = "SECS", default_value = "300", value_parser = parse_duration_ms)]
    pub max_duration: u64,
    /// Data bytes per test, both ways (K/M/G suffixes, binary; 0: no limit); a test asking for
    /// more is refused, one moving more is stopped.
    #[arg(long, value_name = "BYTES", default_value = "100G", value_parser = parse_bytes)]
    pub max_bytes: u64,
    /// Control connections a client address may open per second (an IPv6 client counts by /64).
    #[arg(long, value_name = "N", default_value_t = Limits::default().conn_rate,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_conn_rate: u32,
    /// Connections in their handshake at once (one address gets a sixteenth of them).
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_handshakes,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_handshakes: u32,
    /// Workload threads of all running tests together.
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_threads,
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub max_threads: u32,
    /// Longest any single wait of a test may last, seconds (a client's --timeout may shorten it).
    #[arg(long, value_name = "SECS", default_value = "30", value_parser = parse_duration_ms)]
    pub idle_timeout: u64,
    /// The whole handshake, from connect to the test's parameters, seconds.
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = parse_duration_ms)]
    pub handshake_timeout: u64,
    /// Stop (restoring every held sysctl) when stdin reaches EOF: a launcher holds stdin open
    /// (an ssh session), so a coordinator that dies, even by SIGKILL, ends its agents.
    #[arg(long)]
    pub stop_on_stdin_eof: bool,
    /// Authenticated clients may hold changes to `net.` sysctls (this agent's network
    /// namespace) under a lease; they are journaled first and restored on release, when the
    /// client goes away, when its lease runs out, and when the agent stops. Needs --keys.
    #[arg(long)]
    pub allow_sysctl: bool,
    /// Where held sysctls' old values are journaled before they change (default
    /// /run/tcplab/sysctl-net<namespace inode>.journal); an agent that finds one at start
    /// restores it first.
    // The help text shows `<namespace inode>` as it is; rustdoc would take it for HTML.
    #[allow(rustdoc::invalid_html_tags)]
    #[arg(long, value_name = "FILE")]
    pub journal: Option<PathBuf>,
}

impl AgentArgs {
    /// The agent these flags describe, as tcplab-load takes it.
    pub fn options(&self) -> AgentOptions {
        AgentOptions {
            keys: self.keys.clone(),
            key: self.key.clone(),
            insecure: self.insecure,
            max_concurrent: self.max_concurrent,
            max_duration: self.max_duration,
            max_bytes: self.max_bytes,
            max_conn_rate: self.max_conn_rate,
            max_handshakes: self.max_handshakes,
            max_threads: self.max_threads,
            idle_timeout: self.idle_timeout,
            handshake_timeout: self.handshake_timeout,
            stop_on_stdin_eof: self.stop_on_stdin_eof,
            allow_sysctl: self.allow_sysctl,
            journal: self.journal.clone(),
        }
    }
}

/// `tcplab serve`'s HTTP flags (flattened into its arguments).
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct HttpServeArgs {
    /// Also serve SPECweb96's file set over HTTP/1.1 (GET and HEAD, keep-alive, pipelining)
    /// on this port of --listen's address; 0 picks a free port (printed). The files are built
    /// in memory. No authentication: it serves loopback and lab addresses only, unless
    /// --insecure.
    #[arg(long = "http", value_name = "PORT")]
    pub port: Option<u16>,
    /// Directories of --http's file set (36 files, about 5.1 MB each; at most 209, 1 GiB).
    #[arg(long, value_name = "N", default_value_t = 4, requires = "port",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_DIRS)))]
    pub http_dirs: u32,
    /// Connections --http keeps open at once; one more is answered 503 and closed (counted).
    #[arg(long, value_name = "N", default_value_t = HttpLimits::default().max_connections,
          requires = "port", value_parser = clap::value_parser!(u32).range(1..))]
    pub http_max_connections: u32,
}

impl HttpServeArgs {
    /// The HTTP server these flags ask for, as tcplab-load takes it.
    pub fn options(&self) -> HttpServeOptions {
        HttpServeOptions {
            port: self.port,
            http_dirs: self.http_dirs,
            http_max_connections: self.http_max_connections,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn an_address_alone_listens_on_the_default_port() {
        assert_eq!(
            parse_listen("198.18.0.101"),
            Ok(SocketAddr::from(([198, 18, 0, 101], DEFAULT_PORT)))
        );
        assert_eq!(
            parse_listen("[fd00::65]").map(|a| a.port()),
            Ok(DEFAULT_PORT)
        );
        assert_eq!(
            parse_listen("198.18.0.101:7000").map(|a| a.port()),
            Ok(7000)
        );
        let e = parse_listen("here").expect_err("no address");
        assert!(e.contains("ADDR[:PORT]") && !e.contains('\n'), "{e}");
    }

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        serve: ServeArgs,
    }

    /// `tcplab serve` without flags is what tcplab-load's defaults describe.
    #[test]
    fn no_flags_are_the_library_defaults() {
        let cmd = Cmd::try_parse_from(["serve"]).expect("flags");
        assert_eq!(cmd.serve.agent.options(), AgentOptions::default());
        assert_eq!(cmd.serve.http.options(), HttpServeOptions::default());
        assert_eq!(
            cmd.serve.listen,
            SocketAddr::from(([0, 0, 0, 0], DEFAULT_PORT))
        );
    }
}
