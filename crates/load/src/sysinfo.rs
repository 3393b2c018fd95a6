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

/// Counts TIME_WAIT sockets of the calling thread's namespace: the namespace's own count in
/// /proc/thread-self/net/sockstat (`tw`), else a sock_diag dump, else
/// /proc/thread-self/net/tcp{,6}.
///
/// Why sockstat first: it is one counter, while a sock_diag dump (like /proc/net/tcp) walks
/// the kernel's whole established-socket hash table, which every namespace shares (262 144
/// buckets on the 2-vCPU test VM, 23 GB). That walk took 1.4 ms per address family there, in
/// an empty namespace too, and on a `PREEMPT_NONE` kernel nothing else runs on its CPU
/// meanwhile: crr's sampler, every 100 ms, held a lab emulator's SCHED_FIFO worker off its CPU
/// for up to 1.3 ms and made 1.5-5 % of the crr's frames more than 100 µs late
/// (`perf sched timehist`; measured in `docs/notebook/emu-io-bench.md`). The count is IPv4 and IPv6
/// together, and also holds the namespace's orphaned FIN_WAIT2 sockets, which the kernel keeps
/// as timewait minisockets too: a closing connection's, for about a round trip.
pub fn count_time_wait() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/net/sockstat")
        .ok()
        .and_then(|text| parse_sockstat_tw(&text))
        .or_else(|| {
            crate::sockdiag::count_tcp_state(crate::sockdiag::TCP_TIME_WAIT)
                .ok()
                .or_else(count_time_wait_proc)
        })
}

/// The `tw` figure of the `TCP:` line of a /proc/net/sockstat text.
pub fn parse_sockstat_tw(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("TCP:"))?;
    let mut words = line.split_whitespace();
    while let Some(w) = words.next() {
        if w == "tw" {
            return words.next()?.parse().ok();
        }
    }
    None
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
        let (counted, diag, proc_) = (
            count_time_wait().expect("sockstat"),
            crate::sockdiag::count_tcp_state(crate::sockdiag::TCP_TIME_WAIT).expect("diag"),
            count_time_wait_proc().expect("proc"),
        );
        // All count the same namespace; sockets come and go between the reads.
        assert!(
            counted.abs_diff(diag) <= 50 && diag.abs_diff(proc_) <= 50,
            "sockstat {counted} vs sock_diag {diag} vs /proc {proc_}"
        );
    }

    #[test]
    fn reads_time_wait_from_sockstat() {
        let text =
            "sockets: used 5\nTCP: inuse 3 orphan 0 tw 1234 alloc 4 mem 1\nUDP: inuse 0 mem 0\n";
        assert_eq!(parse_sockstat_tw(text), Some(1234));
        assert_eq!(parse_sockstat_tw("TCP: inuse 3 orphan 0\n"), None);
        assert_eq!(
            parse_sockstat_tw("UDP: inuse 0 tw 9\n"),
            None,
            "TCP's own line"
        );
        assert_eq!(parse_sockstat_tw("TCP: inuse 3 tw\n"), None);
    }
}
