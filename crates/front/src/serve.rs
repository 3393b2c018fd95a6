//! `tcplab serve` once its flags are parsed: the agent (`tcplab_agent::Server`, with this
//! machine's facts as a lab sees them) and the built-in HTTP file server beside it, with the
//! lines each prints at start.

use std::net::SocketAddr;
use std::process::ExitCode;

use tcplab_agent::AgentConfig;
use tcplab_agent::args::AgentOptions;
use tcplab_load::http::serve::HttpServeOptions;

/// `tcplab serve`: the server side of every workload, and an HTTP/1.1 file server of
/// SPECweb96's file set beside it when asked for.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Exit after this many tests.
    pub max_tests: Option<u64>,
    /// Serve at this SCHED_FIFO priority, 1-99.
    pub rt_priority: Option<u8>,
    /// Keys, scope and limits (docs/fleet.md).
    pub agent: AgentOptions,
    /// The HTTP file server.
    pub http: HttpServeOptions,
}

impl ServeOptions {
    /// Serves until killed (or `max_tests`).
    pub fn run(&self) -> anyhow::Result<ExitCode> {
        let _rt = match self.rt_priority.map(tcplab_load::sched::raise).transpose() {
            Ok(guard) => guard,
            Err(e) => {
                eprintln!("tcplab serve: error: {e}");
                return Ok(ExitCode::from(2));
            }
        };
        let server = match self
            .agent
            .config()
            .map(with_lab_facts)
            .and_then(|c| tcplab_agent::Server::with_config(self.listen, c))
        {
            Ok(s) => s,
            Err(e) => {
                eprintln!("tcplab serve: error: {e}");
                return Ok(ExitCode::from(2));
            }
        };
        tcplab_agent::args::raise_fd_limit();
        // Unauthenticated, the HTTP server serves only loopback and lab addresses, even when
        // the agent takes clients with --keys from anywhere; --insecure opens both.
        let http = match self.http.bind(self.listen.ip(), !server.config().insecure) {
            Ok(h) => h,
            Err(e) => {
                eprintln!("tcplab serve: error: {e}");
                return Ok(ExitCode::from(2));
            }
        };
        eprintln!(
            "tcplab serve: listening on {} (protocol {})",
            server.local_addr()?,
            tcplab_load::proto::VERSION
        );
        if let Some(h) = &http {
            eprintln!("tcplab serve: {}", h.summary());
        }
        for line in tcplab_agent::args::banner(server.config())
            .into_iter()
            .chain(tcplab_agent::args::restored_lines(
                server.restored_at_start(),
            ))
        {
            eprintln!("tcplab serve: {line}");
        }
        let stop = self.agent.stop_flag()?;
        std::thread::scope(|scope| -> anyhow::Result<()> {
            let web = match &http {
                Some(h) => Some(
                    std::thread::Builder::new()
                        .name("tcplab-http".into())
                        .spawn_scoped(scope, || h.serve(&stop))?,
                ),
                None => None,
            };
            let served = server.serve(&stop, self.max_tests);
            // --max-tests ended the agent: the HTTP server ends with it.
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            if let Some(w) = web {
                w.join()
                    .map_err(|_| anyhow::anyhow!("the HTTP server thread panicked"))??;
            }
            Ok(served?)
        })?;
        // Dropping the server restores whatever is still held.
        drop(server);
        Ok(ExitCode::SUCCESS)
    }
}

/// The agent answers `Ask::Facts` with the machine's facts as a lab reads them, which say
/// whether rootless labs are possible here too.
fn with_lab_facts(config: AgentConfig) -> AgentConfig {
    AgentConfig {
        machine: tcplab_lab::facts::machine,
        ..config
    }
}
