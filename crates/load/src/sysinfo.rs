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
