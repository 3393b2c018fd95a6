//! Admission, sans-IO: which connections the agent takes, counted so that no client (and no
//! crowd of them) can hold more than the limits allow. `now` comes in as nanoseconds; the
//! server keeps one [`Admission`] under a lock and calls it from its accept loop and from
//! each connection's thread.
//!
//! - Each client address has a token bucket of `--max-conn-rate` tokens refilled at that
//!   many per second: a burst of one second's worth, then the rate. IPv6 addresses count by
//!   their /64 (one host's share), so an attacker cannot rotate through its addresses.
//! - Handshakes in flight are bounded overall (`--max-handshakes`) and per address (a
//!   sixteenth of that), so a few addresses trickling bytes cannot take every slot.
//! - Running tests and their workload threads are bounded (`--max-concurrent`, `--max-threads`).
//! - The table of addresses is bounded: past [`MAX_ADDRESSES`], idle entries go; if none is
//!   idle, new addresses are refused as if over their rate.

use std::collections::HashMap;
use std::net::IpAddr;

use crate::limits::{Limits, Refusal};

/// Most client addresses remembered at once.
pub const MAX_ADDRESSES: usize = 4096;

/// A client address as admission counts it: IPv4 whole, IPv6 by its /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddrKey(u128);

impl AddrKey {
    /// The key of `ip`.
    pub fn of(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Self(u128::from(u32::from(v4))),
            IpAddr::V6(v6) => Self((u128::from(v6) >> 64) | (1 << 127)),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct AddrState {
    tokens: f64,
    at_ns: u64,
    handshakes: u32,
}

/// What the agent holds now, and what it has refused since it started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Connections between accept and their test's start.
    pub handshakes: u32,
    /// Tests running.
    pub tests: u32,
    /// Workload threads the running tests hold.
    pub threads: u32,
    /// Refusals by the flag of the limit that refused them.
    pub refused: Vec<(&'static str, u64)>,
}

/// The admission state.
#[derive(Debug)]
pub struct Admission {
    limits: Limits,
    addrs: HashMap<AddrKey, AddrState>,
    handshakes: u32,
    tests: u32,
    threads: u32,
    refused: Vec<(&'static str, u64)>,
}

impl Admission {
    /// Nothing admitted yet.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            addrs: HashMap::new(),
            handshakes: 0,
            tests: 0,
            threads: 0,
            refused: Vec::new(),
        }
    }

    /// Counts a refusal by its flag (also refusals decided elsewhere, e.g. a bad key).
    pub fn count_refusal(&mut self, flag: &'static str) {
        match self.refused.iter_mut().find(|(f, _)| *f == flag) {
            Some((_, n)) => *n += 1,
            None => self.refused.push((flag, 1)),
        }
    }

    fn refuse<T>(&mut self, r: Refusal) -> Result<T, Refusal> {
        self.count_refusal(r.flag());
        Err(r)
    }

    /// A new control connection from `ip`: takes a token of its rate and a handshake slot.
    /// On success the caller must call [`Admission::handshake_done`] exactly once.
    pub fn connect(&mut self, ip: IpAddr, now_ns: u64) -> Result<(), Refusal> {
        let key = AddrKey::of(ip);
        let rate = f64::from(self.limits.conn_rate.max(1));
        if !self.addrs.contains_key(&key) && self.addrs.len() >= MAX_ADDRESSES {
            self.prune(now_ns);
            if self.addrs.len() >= MAX_ADDRESSES {
                return self.refuse(Refusal::Rate {
                    limit: self.limits.conn_rate,
                });
            }
        }
        let st = self.addrs.entry(key).or_insert(AddrState {
            tokens: rate,
            at_ns: now_ns,
            handshakes: 0,
        });
        let dt = now_ns.saturating_sub(st.at_ns) as f64 / 1e9;
        st.tokens = (st.tokens + dt * rate).min(rate);
        st.at_ns = now_ns.max(st.at_ns);
        if st.tokens < 1.0 {
            return self.refuse(Refusal::Rate {
                limit: self.limits.conn_rate,
            });
        }
        let share = self.limits.per_address_handshakes();
        if st.handshakes >= share {
            return self.refuse(Refusal::Handshakes {
                limit: share,
                per_address: true,
            });
        }
        if self.handshakes >= self.limits.max_handshakes {
            return self.refuse(Refusal::Handshakes {
                limit: self.limits.max_handshakes,
                per_address: false,
            });
        }
        st.tokens -= 1.0;
        st.handshakes += 1;
        self.handshakes += 1;
        Ok(())
    }

    /// The handshake of a connection from `ip` ended (in a test, a refusal or a failure).
    pub fn handshake_done(&mut self, ip: IpAddr) {
        self.handshakes = self.handshakes.saturating_sub(1);
        if let Some(st) = self.addrs.get_mut(&AddrKey::of(ip)) {
            st.handshakes = st.handshakes.saturating_sub(1);
        }
    }

    /// A test that needs `threads` workload threads wants to start. On success the caller must
    /// call [`Admission::end_test`] with the same count exactly once.
    pub fn start_test(&mut self, threads: u32) -> Result<(), Refusal> {
        if self.tests >= self.limits.max_tests {
            return self.refuse(Refusal::Tests {
                limit: self.limits.max_tests,
            });
        }
        if self.threads.saturating_add(threads) > self.limits.max_threads {
            return self.refuse(Refusal::Threads {
                asked: threads,
                in_use: self.threads,
                limit: self.limits.max_threads,
            });
        }
        self.tests += 1;
        self.threads += threads;
        Ok(())
    }

    /// A test started with [`Admission::start_test`] ended.
    pub fn end_test(&mut self, threads: u32) {
        self.tests = self.tests.saturating_sub(1);
        self.threads = self.threads.saturating_sub(threads);
    }

    /// What is held now and what was refused.
    pub fn counts(&self) -> Counts {
        Counts {
            handshakes: self.handshakes,
            tests: self.tests,
            threads: self.threads,
            refused: self.refused.clone(),
        }
    }

    /// Forgets addresses with no handshake in flight whose bucket has refilled.
    fn prune(&mut self, now_ns: u64) {
        let rate = f64::from(self.limits.conn_rate.max(1));
        self.addrs.retain(|_, st| {
            let dt = now_ns.saturating_sub(st.at_ns) as f64 / 1e9;
            st.handshakes > 0 || st.tokens + dt * rate < rate
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    fn limits() -> Limits {
        Limits {
            conn_rate: 5,
            max_handshakes: 32,
            max_tests: 2,
            max_threads: 10,
            ..Limits::default()
        }
    }

    #[test]
    fn an_address_gets_a_burst_then_its_rate() {
        let mut a = Admission::new(limits());
        let c = ip("198.18.0.2");
        for i in 0..5 {
            a.connect(c, 0).expect("burst");
            a.handshake_done(c);
            assert_eq!(a.counts().handshakes, 0, "{i}");
        }
        assert_eq!(a.connect(c, 0), Err(Refusal::Rate { limit: 5 }));
        // 200 ms later one token is back; another address was never limited.
        assert!(a.connect(c, S / 5).is_ok());
        assert!(a.connect(ip("198.18.0.3"), 0).is_ok());
        assert_eq!(a.counts().refused, vec![("max-conn-rate", 1)]);
    }

    #[test]
    fn one_address_cannot_take_every_handshake_slot() {
        let mut a = Admission::new(limits());
        let slow = ip("198.18.0.9");
        a.connect(slow, 0).expect("1");
        a.connect(slow, 0).expect("2");
        assert_eq!(
            a.connect(slow, 0),
            Err(Refusal::Handshakes {
                limit: 2,
                per_address: true
            })
        );
        for i in 0..30u8 {
            a.connect(ip(&format!("198.18.1.{i}")), 0).expect("others");
        }
        let e = a.connect(ip("198.18.2.1"), 0).expect_err("full");
        assert!(e.to_string().contains("--max-handshakes"), "{e}");
        a.handshake_done(slow);
        assert!(a.connect(ip("198.18.2.1"), 0).is_ok());
    }

    #[test]
    fn ipv6_addresses_count_by_their_64() {
        let mut a = Admission::new(limits());
        for i in 0..5 {
            a.connect(ip(&format!("fd00::{i}")), 0).expect("burst");
            a.handshake_done(ip(&format!("fd00::{i}")));
        }
        assert!(a.connect(ip("fd00::ffff"), 0).is_err());
        assert!(a.connect(ip("fd00:0:0:1::1"), 0).is_ok());
        assert_eq!(
            AddrKey::of(ip("::ffff:1.2.3.4")),
            AddrKey::of(ip("1.2.3.4"))
        );
    }

    #[test]
    fn tests_and_threads_are_bounded_and_given_back() {
        let mut a = Admission::new(limits());
        a.start_test(4).expect("1");
        assert!(matches!(
            a.start_test(7),
            Err(Refusal::Threads { in_use: 4, .. })
        ));
        a.start_test(6).expect("2");
        assert_eq!(a.start_test(0), Err(Refusal::Tests { limit: 2 }));
        a.end_test(6);
        a.end_test(4);
        assert_eq!((a.counts().tests, a.counts().threads), (0, 0));
    }

    #[test]
    fn the_address_table_stays_bounded() {
        let mut a = Admission::new(limits());
        for i in 0..MAX_ADDRESSES as u32 {
            let c = IpAddr::from((0xc612_0000u32 + i).to_be_bytes());
            a.connect(c, 0).expect("fresh");
            a.handshake_done(c);
        }
        // All spent a token at t=0: none idle yet, so a new address waits.
        assert!(a.connect(ip("10.0.0.1"), 0).is_err());
        // A second later every bucket has refilled and the table makes room.
        assert!(a.connect(ip("10.0.0.1"), S).is_ok());
        assert!(a.addrs.len() <= MAX_ADDRESSES);
    }
}
