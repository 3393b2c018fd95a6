//! An eventfd that wakes a worker sleeping in `ppoll` (stop, reconfigure).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// A non-blocking eventfd.
#[derive(Debug)]
pub struct Waker {
    fd: OwnedFd,
}

impl Waker {
    /// A fresh eventfd.
    pub fn new() -> io::Result<Self> {
        // Safety: plain eventfd(2); the fd is checked and then owned.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // Safety: fresh valid fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { fd })
    }

    /// Makes the fd readable (wakes any poller).
    pub fn wake(&self) {
        let one: u64 = 1;
        // Safety: writes 8 bytes from a live u64, as eventfd requires.
        unsafe {
            libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8);
        }
    }

    /// Clears the readable state.
    pub fn clear(&self) {
        let mut v: u64 = 0;
        // Safety: reads 8 bytes into a live u64; EAGAIN (not woken) is fine.
        unsafe {
            libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8);
        }
    }
}

impl AsFd for Waker {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::sys::clock::wait_readable;

    #[test]
    fn wake_makes_it_readable_and_clear_resets() {
        let w = Waker::new().unwrap();
        assert!(!wait_readable(&[w.as_fd()], Some(0)).unwrap().any());
        w.wake();
        assert!(wait_readable(&[w.as_fd()], Some(0)).unwrap().has(0));
        w.clear();
        assert!(!wait_readable(&[w.as_fd()], Some(1_000)).unwrap().any());
    }

    #[test]
    fn readiness_names_the_fd_that_fired() {
        let (a, b) = (Waker::new().unwrap(), Waker::new().unwrap());
        b.wake();
        let ready = wait_readable(&[a.as_fd(), b.as_fd()], Some(0)).unwrap();
        assert!(ready.any() && ready.has(1) && !ready.has(0), "{ready:?}");
    }
}
