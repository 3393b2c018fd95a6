//! What the far end of a test saw ([`PeerView`]): the server's side of the data connection and
//! of its host, returned by every `tcplab serve` with its report, so a client that runs alone
//! against a real host (`tcplab doctor --to`) sees both ends as a lab does.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::tcpinfo::TcpInfo;

/// The server's own view of one test.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PeerView {
    /// Kernel TCP counters of the server's network namespace (`/proc/net/netstat`,
    /// `/proc/net/snmp`, keyed `Section.Name`) that rose during the test: accept-queue
    /// overflows, receive-queue drops, out-of-order queueing, prunes, zero-window adverts. On a
    /// shared host other traffic moves them too; they are the host's, not the test's alone.
    pub counters: BTreeMap<String, u64>,
    /// `tcp_info` of the (first) data connection at the test's end, from the server's side:
    /// the window it advertised, what it received out of order, its receive-space estimate.
    pub tcp_info: Option<TcpInfo>,
    /// That connection's socket memory at the test's end (`SO_MEMINFO`): the buffers
    /// autotuning reached, and the drops of a full receive queue.
    pub memory: Option<SocketMemory>,
    /// The data listener's accept-queue limit: the backlog asked for, capped by the server's
    /// `net.core.somaxconn`.
    pub listen_backlog: Option<u32>,
}

impl PeerView {
    /// How much `name` (`TcpExt.ListenOverflows`) rose during the test (0 when it did not).
    pub fn counter(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }
}

/// A socket's memory (`SO_MEMINFO`, `SK_MEMINFO_*` of include/uapi/linux/sock_diag.h), bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SocketMemory {
    /// Bytes held in the receive queue.
    pub rmem_alloc: u32,
    /// The receive buffer's size (what autotuning or SO_RCVBUF set).
    pub rcvbuf: u32,
    /// Bytes of sent data not yet freed.
    pub wmem_alloc: u32,
    /// The send buffer's size.
    pub sndbuf: u32,
    /// Bytes queued for sending.
    pub wmem_queued: u32,
    /// Packets dropped because the receive buffer was full (`SK_MEMINFO_DROPS`).
    pub drops: u32,
}

/// The counters that rose between two snapshots (`Section.Name` → value), with their increase;
/// a counter missing from `before` counts from its `after` value (it rose from nothing seen).
pub fn moved(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(k, v)| {
            let d = v.saturating_sub(before.get(k).copied().unwrap_or(*v));
            (d > 0).then(|| (k.clone(), d))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moved_keeps_only_what_rose() {
        let before: BTreeMap<String, u64> = [("a".into(), 5), ("b".into(), 7)].into();
        let after: BTreeMap<String, u64> =
            [("a".into(), 9), ("b".into(), 7), ("new".into(), 3)].into();
        let d = moved(&before, &after);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d["a"], 4);
        let view = PeerView {
            counters: d,
            ..PeerView::default()
        };
        assert_eq!(view.counter("a"), 4);
        assert_eq!(view.counter("b"), 0);
    }

    #[test]
    fn an_older_report_without_a_view_reads_as_empty() {
        let v: PeerView = serde_json::from_str("{}").expect("defaults");
        assert_eq!(v, PeerView::default());
    }
}
