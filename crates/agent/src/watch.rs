//! The running tests, watched: the server's accept loop calls [`Watch::tick`] every 100 ms;
//! a test past `--max-duration`, or whose data sockets have moved more than `--max-bytes`
//! (read from the kernel's TCP_INFO, so the workloads' timed loops count nothing extra), is
//! stopped by shutting its sockets down, which wakes every thread of the test out of its
//! blocking call. The test's own thread then sends the client the reason in its report.
//!
//! The watch holds duplicates of a test's control socket, data listener and long-lived data
//! sockets (stream, msgs, rr, handed over through the workloads' [`TestGuard`]) only to shut
//! them down; each workload still closes its own, and
//! the duplicates go when the test ends. crr's short connections are not held (a duplicate
//! would keep each one from closing): a crr test is stopped through its listener and control
//! connection, and its bytes are bounded up front from its count.

use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use tcplab_load::serve_ctx::TestGuard;

use crate::limits::{Limits, Refusal};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One running test as the watch sees it.
#[derive(Debug)]
pub struct TestWatch {
    started: Instant,
    ctrl: Option<TcpStream>,
    listener: Option<TcpListener>,
    data: Mutex<Vec<TcpStream>>,
    stopped: OnceLock<Refusal>,
}

/// The workloads' server routines hand the watch every data socket they accept.
impl TestGuard for TestWatch {
    /// Adds a data socket to those shut down if the test is stopped (a duplicate is kept).
    fn hold(&self, data: &TcpStream) {
        if let Ok(dup) = data.try_clone() {
            if self.stopped.get().is_some() {
                let _ = dup.shutdown(Shutdown::Both);
            }
            lock(&self.data).push(dup);
        }
    }
}

impl TestWatch {
    /// Why the test was stopped, if it was.
    pub fn stopped(&self) -> Option<&Refusal> {
        self.stopped.get()
    }

    /// Data bytes moved so far by the held sockets, both ways.
    fn bytes(&self) -> u64 {
        lock(&self.data)
            .iter()
            .filter_map(|s| tcplab_load::tcpinfo::read(s.as_raw_fd()))
            .map(|i| i.bytes_acked.saturating_add(i.bytes_received))
            .fold(0, u64::saturating_add)
    }

    /// Stops the test: reading the control connection ends (writing stays, for the report),
    /// the listener and the data sockets shut down.
    fn stop(&self, why: Refusal) {
        if self.stopped.set(why).is_err() {
            return;
        }
        if let Some(c) = &self.ctrl {
            let _ = c.shutdown(Shutdown::Read);
        }
        if let Some(l) = &self.listener {
            // Safety: shutdown on a listener fd we own a duplicate of; it wakes accept().
            let _ = unsafe { libc::shutdown(l.as_raw_fd(), libc::SHUT_RDWR) };
        }
        for s in lock(&self.data).iter() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// All running tests.
#[derive(Debug, Default)]
pub struct Watch {
    tests: Mutex<Vec<Arc<TestWatch>>>,
    last_tick: Mutex<Option<Instant>>,
}

/// Removes its test from the watch when dropped (the test ended, however it ended).
#[derive(Debug)]
pub struct Watched<'w> {
    watch: &'w Watch,
    test: Arc<TestWatch>,
}

impl Watched<'_> {
    /// The test's entry.
    pub fn test(&self) -> &Arc<TestWatch> {
        &self.test
    }
}

impl Drop for Watched<'_> {
    fn drop(&mut self) {
        lock(&self.watch.tests).retain(|t| !Arc::ptr_eq(t, &self.test));
    }
}

impl Watch {
    /// Starts watching a test whose control socket and data listener are these.
    pub fn add(&self, ctrl: &TcpStream, listener: &TcpListener) -> Watched<'_> {
        let test = Arc::new(TestWatch {
            started: Instant::now(),
            ctrl: ctrl.try_clone().ok(),
            listener: listener.try_clone().ok(),
            data: Mutex::new(Vec::new()),
            stopped: OnceLock::new(),
        });
        lock(&self.tests).push(test.clone());
        Watched { watch: self, test }
    }

    /// Stops the tests that went past a limit; does the work at most every 100 ms.
    pub fn tick(&self, now: Instant, limits: &Limits) {
        {
            let mut last = lock(&self.last_tick);
            if last.is_some_and(|t| now.duration_since(t) < Duration::from_millis(100)) {
                return;
            }
            *last = Some(now);
        }
        if limits.max_duration.is_none() && limits.max_bytes.is_none() {
            return;
        }
        let tests: Vec<_> = lock(&self.tests).clone();
        for t in tests {
            if t.stopped.get().is_some() {
                continue;
            }
            let bytes = if limits.max_bytes.is_some() {
                t.bytes()
            } else {
                0
            };
            if let Some(why) = limits.overrun(now.saturating_duration_since(t.started), bytes) {
                t.stop(why);
            }
        }
    }

    /// Stops every running test for `why` (the agent is going away: its tests end now, not
    /// when they would have).
    pub fn stop_all(&self, why: &Refusal) {
        let tests: Vec<_> = lock(&self.tests).clone();
        for t in tests {
            t.stop(why.clone());
        }
    }

    /// How many tests are watched.
    pub fn len(&self) -> usize {
        lock(&self.tests).len()
    }

    /// True when none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_test_past_its_bytes_is_stopped_and_its_sockets_wake() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (s, _) = l.accept().expect("accept");
        let watch = Watch::default();
        let entry = watch.add(&s, &l);
        entry.test().hold(&s);
        c.write_all(&[0u8; 10_000]).expect("write");
        std::thread::sleep(Duration::from_millis(50));
        let limits = Limits {
            max_bytes: Some(5_000),
            ..Limits::default()
        };
        let reader = std::thread::spawn(move || {
            let mut s = s;
            let mut buf = [0u8; 65536];
            let mut total = 0;
            loop {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => return total,
                    Ok(n) => total += n,
                }
            }
        });
        std::thread::sleep(Duration::from_millis(50));
        watch.tick(Instant::now(), &limits);
        let got = reader.join().expect("reader woke");
        assert_eq!(got, 10_000);
        assert_eq!(entry.test().stopped().map(|r| r.flag()), Some("max-bytes"));
        drop(entry);
        assert!(watch.is_empty());
    }
}
