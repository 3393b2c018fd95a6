//! Flags shared by every client workload: where it runs, how it prints, socket options, keys.

use std::path::PathBuf;

use tcplab_auth::args::ClientKeys;
use tcplab_front::{ClientOptions, Output};
use tcplab_load::sockopt::SockOpts;
use tcplab_load::units::{parse_duration_ms, parse_size_list};

/// Flags shared by every client workload.
#[derive(Debug, Clone, clap::Args)]
pub struct ClientArgs {
    /// Server running `tcplab serve`, `ADDR[:PORT]` (default port 5301).
    #[arg(long, value_name = "ADDR[:PORT]", required_unless_present = "lab")]
    pub to: Option<String>,
    /// Run both sides inside this lab (client thread in --client, server thread in --server).
    #[arg(long, value_name = "NAME", conflicts_with = "to")]
    pub lab: Option<String>,
    /// Lab host of the client.
    #[arg(long, value_name = "HOST", default_value = "client")]
    pub client: String,
    /// Lab host of the server.
    #[arg(long, value_name = "HOST", default_value = "server")]
    pub server: String,
    /// Print one JSON document (errors too, with a non-zero exit).
    #[arg(long)]
    pub json: bool,
    /// Print one JSON line per interval/run, then the result line.
    #[arg(long, conflicts_with = "json")]
    pub ndjson: bool,
    /// Write every raw sample to FILE (format: docs/samples.md).
    #[arg(long, value_name = "FILE")]
    pub samples: Option<PathBuf>,
    /// Longest any single wait may last, seconds.
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = parse_duration_ms)]
    pub timeout: u64,
    /// Run the workload's threads (the client's, and in a lab the server's) at SCHED_FIFO
    /// priority N, 1-99, so the latency measured is the network's, not the host's scheduler's
    /// (recorded as facts.sched). Needs root. Above 10 it preempts the lab's emulator too.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub rt_priority: Option<u8>,
    /// Socket options (both sides).
    #[command(flatten)]
    pub opts: SockOptArgs,
    /// Keys: this client's, and the server's it believes.
    #[command(flatten)]
    pub auth: ClientKeyArgs,
}

impl ClientArgs {
    /// Where the run goes and how it prints, as tcplab-load takes them.
    pub fn options(&self) -> ClientOptions {
        ClientOptions {
            to: self.to.clone(),
            lab: self.lab.clone(),
            client: self.client.clone(),
            server: self.server.clone(),
            output: Output {
                json: self.json,
                ndjson: self.ndjson,
                samples: self.samples.clone(),
            },
            rt_priority: self.rt_priority,
            keys: self.auth.keys(),
        }
    }

    /// Fails before the run if `--samples` cannot be written.
    pub fn check_outputs(&self) -> anyhow::Result<()> {
        match &self.samples {
            Some(path) => crate::writable::file("--samples", path),
            None => Ok(()),
        }
    }

    /// The socket options (both sides).
    pub fn sock_opts(&self) -> SockOpts {
        self.opts.sock_opts()
    }
}

/// The socket options a workload may set; none given leaves the kernel default.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct SockOptArgs {
    /// Set TCP_NODELAY (disable Nagle's algorithm).
    #[arg(long)]
    pub nodelay: bool,
    /// Set TCP_CORK on sending sockets.
    #[arg(long)]
    pub cork: bool,
    /// Set TCP_QUICKACK, re-armed after every read (the kernel clears it by itself).
    #[arg(long)]
    pub quickack: bool,
    /// TCP_CONGESTION: congestion control algorithm (e.g. cubic, reno, bbr).
    #[arg(long = "cc", value_name = "ALGO")]
    pub congestion: Option<String>,
    /// SO_SNDBUF in bytes (the kernel doubles it).
    #[arg(long, value_name = "BYTES")]
    pub sndbuf: Option<u32>,
    /// SO_RCVBUF in bytes (the kernel doubles it).
    #[arg(long, value_name = "BYTES")]
    pub rcvbuf: Option<u32>,
    /// TCP_NOTSENT_LOWAT in bytes.
    #[arg(long, value_name = "BYTES")]
    pub notsent_lowat: Option<u32>,
    /// TCP_RTO_MIN_US: minimum retransmission timeout in µs (Linux 6.15+).
    #[arg(long, value_name = "US")]
    pub rto_min_us: Option<u32>,
    /// TCP_DELACK_MAX_US: maximum delayed-ACK timeout in µs (Linux 6.15+).
    #[arg(long, value_name = "US")]
    pub delack_max_us: Option<u32>,
}

impl SockOptArgs {
    /// The options these flags ask for.
    pub fn sock_opts(&self) -> SockOpts {
        SockOpts {
            nodelay: self.nodelay,
            cork: self.cork,
            quickack: self.quickack,
            congestion: self.congestion.clone(),
            sndbuf: self.sndbuf,
            rcvbuf: self.rcvbuf,
            notsent_lowat: self.notsent_lowat,
            rto_min_us: self.rto_min_us,
            delack_max_us: self.delack_max_us,
        }
    }
}

/// `--key`, `--server-key`, `--insecure` of the client commands.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClientKeyArgs {
    /// This client's secret key (default: TCPLAB_KEY, else ~/.config/tcplab/key if it exists,
    /// else a key made for this run, which only servers without --keys accept).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// The server's public key (the line `tcplab serve` prints at start), or a file of keys
    /// any of which is accepted (default: TCPLAB_SERVER_KEY). Needed for a server outside
    /// loopback and lab addresses; a server holding another key is refused.
    #[arg(long, value_name = "KEY|FILE")]
    pub server_key: Option<String>,
    /// Believe whatever key the server holds, on any address (a server someone in the path
    /// pretends to be included).
    #[arg(long, conflicts_with = "server_key")]
    pub insecure: bool,
}

impl ClientKeyArgs {
    /// The keys these flags name, as tcplab-load takes them.
    pub fn keys(&self) -> ClientKeys {
        ClientKeys {
            key: self.key.clone(),
            server_key: self.server_key.clone(),
            insecure: self.insecure,
        }
    }
}

/// A parsed `--sizes` value (one clap value holding many sizes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sizes(pub Vec<u32>);

/// A size list `1,64,1500` or a doubling range `1..4096`.
pub fn parse_sizes(s: &str) -> Result<Sizes, String> {
    parse_size_list(s).map(Sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_one_value() {
        assert_eq!(parse_sizes("1, 64,1500"), Ok(Sizes(vec![1, 64, 1500])));
        assert_eq!(parse_sizes("1..16"), Ok(Sizes(vec![1, 2, 4, 8, 16])));
        assert!(parse_sizes("0..4").is_err());
    }

    #[test]
    fn no_socket_flags_are_the_kernel_defaults() {
        assert_eq!(SockOptArgs::default().sock_opts(), SockOpts::default());
    }
}
