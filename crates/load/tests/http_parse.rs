//! The response reader allocates nothing per response once warm: counted with a global
//! allocator, which is why this lives in its own test binary.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use tcplab_load::http::fileset::FileId;
use tcplab_load::http::parse::{Expect, Progress, ResponseReader};

/// Counts this thread's allocations (tests run on several threads at once).
struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is passed to `System` unchanged; the counter is a const-initialised
// thread-local Cell, which neither allocates nor panics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller upholds `alloc`'s contract, which `System` shares.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: as for `alloc` and `dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCS.with(Cell::get)
}

/// A typical 1 KB response: nginx-like head, a file of the set as body.
fn response(file: FileId, chunked: bool) -> Vec<u8> {
    let mut body = vec![0u8; file.size() as usize];
    file.fill(0, &mut body);
    let mut v = b"HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n\
        Content-Type: application/octet-stream\r\nAccept-Ranges: bytes\r\n"
        .to_vec();
    if chunked {
        v.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
        for part in body.chunks(300) {
            v.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
            v.extend_from_slice(part);
            v.extend_from_slice(b"\r\n");
        }
        v.extend_from_slice(b"0\r\n\r\n");
    } else {
        v.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        v.extend_from_slice(&body);
    }
    v
}

/// Reads `bytes` fed in pieces ending at `cuts` and then the rest; the body length.
fn read(r: &mut ResponseReader, expect: Expect, bytes: &[u8], cuts: &[usize]) -> u64 {
    r.reset(expect);
    let mut from = 0;
    for &to in cuts.iter().chain([bytes.len()].iter()) {
        match r.feed(&bytes[from..to]) {
            Ok(Progress::More) => from = to,
            Ok(Progress::Done(d)) => return d.body_bytes,
            Err(e) => panic!("{e}"),
        }
    }
    panic!("incomplete")
}

#[test]
fn no_allocation_per_response_once_warm() {
    let file = FileId::new(2, 1, 1).expect("file");
    let expect = Expect {
        size: Some(file.size()),
        file: Some(file),
        check_content: true,
        head_request: false,
    };
    let plain = response(file, false);
    let chunked = response(file, true);
    // Cuts inside the head, inside chunk-size lines and inside bodies, so the gathering buffer
    // is used as well as the in-place paths.
    let cuts = [5, 90, 180, 200, 420, 700, 1000];
    let mut r = ResponseReader::new();
    for bytes in [&plain, &chunked] {
        assert_eq!(read(&mut r, expect, bytes, &[]), 1024);
        assert_eq!(read(&mut r, expect, bytes, &cuts), 1024);
    }
    let before = allocations();
    let mut total = 0;
    for _ in 0..5_000 {
        for bytes in [&plain, &chunked] {
            total += read(&mut r, expect, bytes, &[]);
            total += read(&mut r, expect, bytes, &cuts);
        }
    }
    let after = allocations();
    assert_eq!(total, 20_000 * 1024);
    assert_eq!(after - before, 0, "allocations in 20 000 warm responses");
    // The counter does count: one allocation is seen.
    let v = std::hint::black_box(vec![1u8; 10]);
    assert!(allocations() > after, "{v:?}");
}
