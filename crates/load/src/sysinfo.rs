//! Kernel counters of the *calling thread's* network namespace. Paths go through
//! /proc/thread-self, not /proc/self (the process's main thread may be in another namespace
//! when workload threads are entered into lab hosts).

use std::io::{BufRead, BufReader};

/// Reads one counter from /proc/thread-self/net/netstat (e.g. "TcpExt", "TCPSynRetrans").
pub fn netstat_counter(section: &str, name: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/net/netstat").ok()?;
    parse_netstat(&text, section, name)
}

/// Finds `name` in the header/value line pair of `section` of a /proc/net/netstat text.
pub fn parse_netstat(text: &str, section: &str, name: &str) -> Option<u64> {
    let prefix = format!("{section}:");
    let mut lines = text.lines().filter(|l| l.starts_with(&prefix));
    let header = lines.next()?;
    let values = lines.next()?;
    let pos = header.split_whitespace().position(|h| h == name)?;
    values.split_whitespace().nth(pos)?.parse().ok()
}

/// Every counter of the calling thread's namespace from /proc/thread-self/net/netstat and
/// /proc/thread-self/net/snmp, keyed `Section.Name` (e.g. `TcpExt.ListenOverflows`,
/// `Tcp.RetransSegs`); empty when neither file can be read.
pub fn all_counters() -> std::collections::BTreeMap<String, u64> {
    let mut all = std::collections::BTreeMap::new();
    for path in [
        "/proc/thread-self/net/netstat",
        "/proc/thread-self/net/snmp",
    ] {
        if let Ok(text) = std::fs::read_to_string(path) {
            all.extend(parse_counters(&text));
        }
    }
    all
}

/// Every `Section.Name` counter of a /proc/net/netstat or /proc/net/snmp text (header line,
/// then value line, per section). Signed values (snmp's `Tcp.MaxConn` is -1) are left out.
pub fn parse_counters(text: &str) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    let mut lines = text.lines();
    while let (Some(header), Some(values)) = (lines.next(), lines.next()) {
        let mut h = header.split_whitespace();
        let mut v = values.split_whitespace();
        let (Some(section), Some(again)) = (h.next(), v.next()) else {
            continue;
        };
        if section != again {
            // Out of step (a section without its value line): give up on this text.
            break;
        }
        let section = section.trim_end_matches(':');
        for (name, value) in h.zip(v) {
            if let Ok(n) = value.parse::<u64>() {
                out.insert(format!("{section}.{name}"), n);
            }
        }
    }
    out
}

/// Counts TIME_WAIT sockets of the calling thread's namespace: a sock_diag dump, or
/// /proc/thread-self/net/tcp{,6} where netlink is unavailable.
pub fn count_time_wait() -> Option<u64> {
    crate::sockdiag::count_tcp_state(crate::sockdiag::TCP_TIME_WAIT)
        .ok()
        .or_else(count_time_wait_proc)
}

/// Counts TIME_WAIT sockets (state 06) in /proc/thread-self/net/tcp and tcp6.
pub fn count_time_wait_proc() -> Option<u64> {
    let mut total = 0u64;
    let mut any = false;
    for path in ["/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"] {
        if let Ok(f) = std::fs::File::open(path) {
            any = true;
            total += count_state(BufReader::new(f), "06");
        }
    }
    any.then_some(total)
}

/// Counts rows of a /proc/net/tcp table whose `st` column equals `state` (hex).
pub fn count_state(r: impl BufRead, state: &str) -> u64 {
    r.lines()
        .skip(1)
        .map_while(Result::ok)
        .filter(|l| l.split_whitespace().nth(3) == Some(state))
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_netstat_pairs() {
        let text = "TcpExt: SyncookiesSent TCPSynRetrans Foo\nTcpExt: 0 17 3\nIpExt: A\nIpExt: 9\n";
        assert_eq!(parse_netstat(text, "TcpExt", "TCPSynRetrans"), Some(17));
        assert_eq!(parse_netstat(text, "IpExt", "A"), Some(9));
        assert_eq!(parse_netstat(text, "TcpExt", "Missing"), None);
        assert!(
            netstat_counter("TcpExt", "TCPSynRetrans").is_some(),
            "live counter readable"
        );
    }

    #[test]
    fn parses_every_section_and_skips_signed_values() {
        let text = "TcpExt: ListenOverflows ListenDrops\nTcpExt: 3 4\nTcp: RtoAlgorithm MaxConn RetransSegs\nTcp: 1 -1 17\n";
        let all = parse_counters(text);
        assert_eq!(all["TcpExt.ListenOverflows"], 3);
        assert_eq!(all["TcpExt.ListenDrops"], 4);
        assert_eq!(all["Tcp.RetransSegs"], 17);
        assert!(!all.contains_key("Tcp.MaxConn"));
        assert!(
            all_counters().contains_key("Tcp.RetransSegs"),
            "live counters readable"
        );
    }

    #[test]
    fn counts_time_wait_rows() {
        let table = "  sl  local_address rem_address   st tx_queue\n   0: 0100007F:1F90 00000000:0000 0A 0\n   1: 0100007F:9C40 0100007F:1F90 06 0\n   2: 0100007F:9C41 0100007F:1F90 06 0\n";
        assert_eq!(count_state(table.as_bytes(), "06"), 2);
        assert_eq!(count_state(table.as_bytes(), "0A"), 1);
        let (diag, proc_) = (
            count_time_wait().expect("diag"),
            count_time_wait_proc().expect("proc"),
        );
        // Both count the same namespace; sockets come and go between the two reads.
        assert!(
            diag.abs_diff(proc_) <= 50,
            "sock_diag {diag} vs /proc {proc_}"
        );
    }
}
