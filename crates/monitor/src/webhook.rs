//! `--webhook URL`: every alert's change ([`Notice`]: opened, diagnosed with the doctor's
//! findings, closed) POSTed as JSON to a URL, from a thread of its own so a slow or dead
//! endpoint never holds the schedule up.
//!
//! Delivery is at most once per notice with retries: each is tried up to [`Retry::attempts`]
//! times, [`Retry::backoff`] apart, with a bounded wait per try; a notice that still fails is
//! logged and dropped, and when [`QUEUE`] notices wait the newest is dropped and counted. The alerts
//! themselves are in the database whatever happens here (`tcplab monitor alerts`).
//!
//! Plain HTTP only: the build carries no TLS stack. An https endpoint (a chat service) is
//! reached through Prometheus's Alertmanager, which the shipped alert rules feed with the same
//! cause, or a relay on the monitor's host.

use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;

use crate::run::Notice;

/// How hard a notice is tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Tries per notice.
    pub attempts: u32,
    /// Wait between tries.
    pub backoff: Duration,
    /// Longest one try may take (connect, send, answer).
    pub timeout: Duration,
}

impl Retry {
    /// Three tries, two seconds apart, ten seconds each at most.
    pub const DEFAULT: Retry = Retry {
        attempts: 3,
        backoff: Duration::from_secs(2),
        timeout: Duration::from_secs(10),
    };
}

/// Notices that may wait to be sent.
pub const QUEUE: usize = 256;

/// A URL `--webhook` cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookError {
    /// Not an http:// URL with a host.
    #[error(
        "--webhook {url}: {why}; give an http:// URL such as http://127.0.0.1:9000/tcplab \
         (https endpoints: route through Alertmanager with deploy/monitor/alerts.yml, or a local relay)"
    )]
    Url {
        /// What was given.
        url: String,
        /// What is wrong with it.
        why: String,
    },
}

/// The JSON body of one POST: the notice, with its schema's version.
#[derive(Debug, Serialize)]
struct Payload<'a> {
    /// Bumped when a field changes meaning.
    schema: u32,
    /// Always "tcplab-monitor".
    source: &'static str,
    #[serde(flatten)]
    notice: &'a Notice,
}

/// The body POSTed for `notice`.
pub fn body(notice: &Notice) -> String {
    serde_json::to_string(&Payload {
        schema: 1,
        source: "tcplab-monitor",
        notice,
    })
    .unwrap_or_default()
}

/// Checks `url` is one the webhook can POST to.
pub fn check_url(url: &str) -> Result<(), WebhookError> {
    let bad = |why: &str| WebhookError::Url {
        url: url.to_string(),
        why: why.to_string(),
    };
    let rest = match url.split_once("://") {
        Some(("http", rest)) => rest,
        Some(("https", _)) => return Err(bad("https is not supported (no TLS in this build)")),
        Some((scheme, _)) => return Err(bad(&format!("the scheme {scheme:?} is not http"))),
        None => return Err(bad("it has no scheme")),
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() {
        return Err(bad("it has no host"));
    }
    let parsed: Result<ureq::http::Uri, _> = url.parse();
    parsed.map(|_| ()).map_err(|e| bad(&e.to_string()))
}

/// The sending thread.
#[derive(Debug)]
pub struct Webhook {
    tx: Option<SyncSender<String>>,
    thread: Option<JoinHandle<Delivery>>,
    dropped: u64,
}

/// What a webhook delivered, when it stops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delivery {
    /// Notices the endpoint took (a 2xx answer).
    pub sent: u64,
    /// Notices given up on after every try.
    pub failed: u64,
    /// Notices dropped because the queue was full.
    pub dropped: u64,
}

impl Webhook {
    /// Starts the thread that POSTs to `url`; `log` is told of each notice given up on.
    pub fn start(
        url: &str,
        retry: Retry,
        log: impl Fn(&str) + Send + 'static,
    ) -> Result<Webhook, WebhookError> {
        check_url(url)?;
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let url = url.to_string();
        let thread = std::thread::spawn(move || deliver(&url, retry, &rx, &log));
        Ok(Webhook {
            tx: Some(tx),
            thread: Some(thread),
            dropped: 0,
        })
    }

    /// Queues `notice`; never waits.
    pub fn send(&mut self, notice: &Notice) {
        let Some(tx) = &self.tx else { return };
        match tx.try_send(body(notice)) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => self.dropped += 1,
        }
    }

    /// Sends what is queued (each notice still gets its tries) and stops.
    pub fn finish(mut self) -> Delivery {
        self.tx = None;
        let mut d = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        d.dropped += self.dropped;
        d
    }
}

fn deliver(url: &str, retry: Retry, rx: &Receiver<String>, log: &dyn Fn(&str)) -> Delivery {
    let config = ureq::Agent::config_builder()
        .timeout_global(Some(retry.timeout))
        .http_status_as_error(true)
        .max_redirects(0)
        .proxy(ureq::Proxy::try_from_env())
        .user_agent(concat!("tcplab-monitor/", env!("CARGO_PKG_VERSION")))
        .build();
    let agent = ureq::Agent::new_with_config(config);
    let mut d = Delivery::default();
    for body in rx {
        let mut last = String::new();
        let mut ok = false;
        for attempt in 0..retry.attempts.max(1) {
            if attempt > 0 {
                std::thread::sleep(retry.backoff);
            }
            match agent
                .post(url)
                .content_type("application/json")
                .send(body.as_str())
            {
                Ok(_) => {
                    ok = true;
                    break;
                }
                Err(e) => last = e.to_string(),
            }
        }
        if ok {
            d.sent += 1;
        } else {
            d.failed += 1;
            log(&format!(
                "--webhook {url}: gave up on a notice after {} tries: {last}",
                retry.attempts.max(1)
            ));
        }
    }
    d
}

#[cfg(test)]
#[path = "webhook_tests.rs"]
mod tests;
