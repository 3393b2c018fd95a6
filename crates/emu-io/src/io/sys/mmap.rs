//! A shared memory mapping of a packet socket's rings, unmapped on drop.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;

/// `len` bytes mapped `MAP_SHARED` from a packet socket (RX ring first, then TX ring when both
/// are configured on one socket). The kernel writes into it concurrently, so it is only ever
/// accessed through raw pointers and atomics (see `io::ring`), never as a Rust slice.
#[derive(Debug)]
pub struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// Safety: the mapping is plain shared memory owned by this value; moving it to another thread
// moves the only handle to it.
unsafe impl Send for Mmap {}

impl Mmap {
    /// Maps the rings of `fd` (`len` = sum of the ring sizes the socket was given).
    pub fn packet_rings(fd: BorrowedFd<'_>, len: usize) -> io::Result<Self> {
        // Safety: a fresh mapping at an address the kernel chooses; no existing memory is
        // affected. The fd is a packet socket with rings configured, which supports mmap.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave NULL"))?;
        Ok(Self { ptr, len })
    }

    /// `len` bytes of the socket `fd`'s memory at page offset `offset` (`MAP_POPULATE`): the
    /// AF_XDP rings, each mapped at its own `XDP_PGOFF_*` / `XDP_UMEM_PGOFF_*` offset.
    pub fn socket_at(fd: BorrowedFd<'_>, len: usize, offset: u64) -> io::Result<Self> {
        Self::map(Some(fd), len, offset)
    }

    /// `len` bytes of zeroed anonymous memory (an AF_XDP UMEM), pre-faulted.
    pub fn anonymous(len: usize) -> io::Result<Self> {
        Self::map(None, len, 0)
    }

    fn map(fd: Option<BorrowedFd<'_>>, len: usize, offset: u64) -> io::Result<Self> {
        let (flags, raw) = match fd {
            Some(fd) => (libc::MAP_SHARED | libc::MAP_POPULATE, fd.as_raw_fd()),
            None => (
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
            ),
        };
        let offset = libc::off_t::try_from(offset).map_err(io::Error::other)?;
        // Safety: a fresh mapping at an address the kernel chooses; no existing memory is
        // affected. A socket fd is an AF_XDP socket whose ring at `offset` is configured.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                raw,
                offset,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave NULL"))?;
        Ok(Self { ptr, len })
    }

    /// Start of the mapping.
    pub fn as_ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Length of the mapping in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-length mapping (never produced by [`Mmap::packet_rings`]).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // Safety: ptr/len are exactly what mmap returned and nothing borrows the memory beyond
        // this value's lifetime (rings hold it by ownership).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}
