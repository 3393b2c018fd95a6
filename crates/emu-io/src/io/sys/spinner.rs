//! The keep-awake spinner processes (see `run::awake` for why): a page of shared words,
//! `fork`ed children that spin on it, futex wake-ups, and reaping.
//!
//! Processes, not threads: CFS schedules by task group (the session's autogroup, or a cgroup),
//! and a `SCHED_IDLE` thread makes its whole group look busy at full group weight. A spinner
//! thread inside the emulator's process therefore delayed the TCP endpoints in the same
//! process by 2-8 ms per wake-up in a loaded test run, and took CPU from other sessions at
//! nice 0. Each spinner here runs in its own session (its own autogroup, set to nice 19) and
//! is `SCHED_IDLE` inside it.
//!
//! The child of a `fork` in a multi-threaded process may only make async-signal-safe calls:
//! the child code below uses raw system calls and atomics on the shared page, nothing else
//! (no allocation, no locks, no panics).

use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::clock::{Nanos, monotonic_ns};

/// The words the emulator and its spinners share.
#[derive(Debug, Default)]
#[repr(C)]
pub struct SharedWords {
    /// Absolute CLOCK_MONOTONIC time until which the spinners spin.
    pub until: AtomicU64,
    /// Bumped (and futex-woken) when a lapsed window is reopened.
    pub seq: AtomicU32,
    /// Non-zero: spinners exit.
    pub stop: AtomicU32,
}

/// One page mapped `MAP_SHARED | MAP_ANONYMOUS`, holding [`SharedWords`]; `fork` shares it.
#[derive(Debug)]
pub struct SharedPage {
    ptr: NonNull<SharedWords>,
}

// Safety: the page holds only atomics; every access goes through them.
unsafe impl Send for SharedPage {}
// Safety: as above; shared references to atomics are the intended use.
unsafe impl Sync for SharedPage {}

const PAGE: usize = 4096;

impl SharedPage {
    /// Maps a zeroed page (all words 0: window closed, not stopped).
    pub fn new() -> io::Result<Self> {
        // Safety: a fresh anonymous mapping; no existing memory is affected.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast::<SharedWords>())
            .ok_or_else(|| io::Error::other("mmap gave NULL"))?;
        Ok(Self { ptr })
    }

    /// The shared words.
    pub fn words(&self) -> &SharedWords {
        // Safety: the page is mapped for this value's lifetime, zero-filled (a valid
        // SharedWords: atomics of 0), page-aligned, and larger than SharedWords.
        unsafe { self.ptr.as_ref() }
    }
}

impl Drop for SharedPage {
    fn drop(&mut self) {
        // Safety: exactly the mapping made in `new`; no reference outlives self.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), PAGE);
        }
    }
}

/// Wakes every process waiting on `word` (a shared, not process-private, futex).
pub fn futex_wake_all(word: &AtomicU32) {
    // Safety: FUTEX_WAKE on the address of a live u32; no memory is written.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
        );
    }
}

/// Sleeps while `word == expected`, at most `timeout_ns` (async-signal-safe).
fn futex_wait(word: &AtomicU32, expected: u32, timeout_ns: Nanos) {
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // Safety: FUTEX_WAIT reads the live u32 at `word` and sleeps; ts is a valid timespec.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

/// How long a spinner with a closed window sleeps before checking its parent again.
const PARKED_NS: Nanos = 200_000_000;
/// Spin-loop hints between clock reads.
const SPINS_PER_CHECK: u32 = 64;
/// Clock reads between checks that the parent still lives (a `getppid` each).
const CHECKS_PER_PARENT_CHECK: u32 = 4096;

/// Forks a spinner pinned to `cpu`; returns its PID. The child never returns.
pub fn fork_spinner(page: &SharedPage, cpu: usize) -> io::Result<libc::pid_t> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let words: *const SharedWords = page.words();
    // Safety: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // Safety: fork in a multi-threaded process: the child runs only `spinner_main`, which
    // makes async-signal-safe calls and ends in _exit.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        // Safety: the page stays mapped in the child (fork copies the mapping; it is shared).
        0 => unsafe { spinner_main(&*words, cpu, parent) },
        pid => Ok(pid),
    }
}

/// The child: its own session at nice 19, pinned, SCHED_IDLE; spins while the window is
/// open, futex-waits otherwise; exits on stop or when its parent process is gone.
///
/// # Safety
/// Called only in the child of `fork`, with `words` in the shared page.
unsafe fn spinner_main(words: &SharedWords, cpu: usize, parent: libc::pid_t) -> ! {
    // Safety: raw system calls with valid arguments; cpu < CPU_SETSIZE was checked by the
    // caller; the path is a NUL-terminated literal.
    unsafe {
        // The parent's sockets and files must not live on in the spinner.
        libc::close_range(3, u32::MAX, 0);
        libc::setsid();
        // Named for `ps` (the forking thread's name would be misleading).
        libc::prctl(libc::PR_SET_NAME, c"tcplab-awake".as_ptr());
        let fd = libc::open(c"/proc/self/autogroup".as_ptr(), libc::O_WRONLY);
        if fd >= 0 {
            libc::write(fd, b"19".as_ptr().cast(), 2);
            libc::close(fd);
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        let param = libc::sched_param { sched_priority: 0 };
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0
            || libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) != 0
        {
            libc::_exit(1);
        }
    }
    let orphaned = || {
        // Safety: getppid has no preconditions.
        unsafe { libc::getppid() != parent }
    };
    let mut checks = 0_u32;
    loop {
        if words.stop.load(Ordering::Acquire) != 0 {
            break;
        }
        if monotonic_ns() < words.until.load(Ordering::Acquire) {
            for _ in 0..SPINS_PER_CHECK {
                std::hint::spin_loop();
            }
            checks = checks.wrapping_add(1);
            if checks % CHECKS_PER_PARENT_CHECK == 0 && orphaned() {
                break;
            }
            continue;
        }
        let seq = words.seq.load(Ordering::Acquire);
        // Re-check after reading seq: a reopening in between bumps seq, so the wait
        // returns at once instead of missing it.
        if monotonic_ns() >= words.until.load(Ordering::Acquire) {
            if orphaned() {
                break;
            }
            futex_wait(&words.seq, seq, PARKED_NS);
        }
    }
    // Safety: _exit ends the child without running the parent's atexit handlers.
    unsafe { libc::_exit(0) }
}

/// Waits for a spinner told to stop (at most ~200 ms, then SIGKILL); returns its CPU time.
pub fn reap(pid: libc::pid_t) -> Nanos {
    let deadline = monotonic_ns() + 200_000_000;
    loop {
        // Safety: rusage is plain data written by wait4; pid is our own child.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let mut status = 0;
        // Safety: as above.
        let rc = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if rc == pid {
            let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
            return tv(ru.ru_utime) + tv(ru.ru_stime);
        }
        if rc < 0 {
            return 0; // not our child any more (already reaped)
        }
        if monotonic_ns() > deadline {
            // Safety: kill of our own child's PID, not yet reaped (so not reused).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}
