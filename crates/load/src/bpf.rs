//! Socket filters (classic BPF, `SO_ATTACH_FILTER`) that make the kernel drop, before any
//! connection exists, the packets of peers the agent would refuse anyway:
//! - a test's data listener takes packets only from the control connection's peer address, so
//!   nobody else can connect to the announced port, take the test's place or add to its load;
//! - without keys, the control listener takes packets only between loopback or lab addresses,
//!   so from any other network the port looks closed-and-silent (a SYN is dropped, not answered).
//!
//! A filter on a listener sees each SYN; accepted sockets inherit it (the server detaches it
//! from long-lived data sockets, so a bulk flow's packets do not each run it). Programs are built
//! and checked here without sockets: [`run`] interprets the few instructions they use on a
//! packet's IP header, so the tests exercise exactly what the kernel runs.

use std::io;
use std::net::IpAddr;
use std::os::fd::RawFd;

/// One instruction (the kernel's `struct sock_filter`).
pub type Insn = libc::sock_filter;

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const LD_B_ABS: u16 = (libc::BPF_LD | libc::BPF_B | libc::BPF_ABS) as u16;
const AND_K: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
/// Loads relative to the network header (`SKF_NET_OFF`), whatever the socket's layer.
const NET: u32 = (-0x10_0000i32) as u32;
/// Keep the whole packet.
const ACCEPT: u32 = u32::MAX;
/// Drop it.
const DROP: u32 = 0;

/// A forward-only assembler: jumps name labels, resolved when the program is finished.
#[derive(Default)]
struct Asm {
    code: Vec<(u16, Target, Target, u32)>,
    labels: Vec<Option<usize>>,
}

#[derive(Clone, Copy)]
enum Target {
    Next,
    Label(usize),
}

impl Asm {
    fn label(&mut self) -> usize {
        self.labels.push(None);
        self.labels.len() - 1
    }
    fn here(&mut self, l: usize) {
        self.labels[l] = Some(self.code.len());
    }
    fn op(&mut self, code: u16, k: u32) {
        self.code.push((code, Target::Next, Target::Next, k));
    }
    fn jeq(&mut self, k: u32, t: Target, f: Target) {
        self.code.push((JEQ_K, t, f, k));
    }
    /// Loads the 32-bit word at byte `off` of the IP header.
    fn word(&mut self, off: u32) {
        self.op(LD_W_ABS, NET.wrapping_add(off));
    }
    fn finish(self) -> Vec<Insn> {
        let at = |pc: usize, t: Target| -> u8 {
            match t {
                Target::Next => 0,
                Target::Label(l) => {
                    let dest = self.labels[l].unwrap_or(pc + 1);
                    u8::try_from(dest - pc - 1).unwrap_or(u8::MAX)
                }
            }
        };
        self.code
            .iter()
            .enumerate()
            .map(|(pc, &(code, t, f, k))| Insn {
                code,
                jt: at(pc, t),
                jf: at(pc, f),
                k,
            })
            .collect()
    }
}

/// Emits "jump to `yes` if the IP version nibble is `v`, else to `no`".
fn version(a: &mut Asm, v: u32, yes: Target, no: Target) {
    a.op(LD_B_ABS, NET);
    a.op(AND_K, 0xf0);
    a.jeq(v << 4, yes, no);
}

/// A program that keeps packets whose source address is `peer` and drops all others.
pub fn only_from(peer: IpAddr) -> Vec<Insn> {
    let mut a = Asm::default();
    let (accept, drop) = (a.label(), a.label());
    match peer.to_canonical() {
        IpAddr::V4(v4) => {
            version(&mut a, 4, Target::Next, Target::Label(drop));
            a.word(12);
            a.jeq(u32::from(v4), Target::Label(accept), Target::Label(drop));
        }
        IpAddr::V6(v6) => {
            version(&mut a, 6, Target::Next, Target::Label(drop));
            let o = v6.octets();
            for (i, w) in o.chunks_exact(4).enumerate() {
                a.word(8 + 4 * i as u32);
                let w = u32::from_be_bytes([w[0], w[1], w[2], w[3]]);
                let yes = if i == 3 {
                    Target::Label(accept)
                } else {
                    Target::Next
                };
                a.jeq(w, yes, Target::Label(drop));
            }
        }
    }
    a.here(drop);
    a.op(RET_K, DROP);
    a.here(accept);
    a.op(RET_K, ACCEPT);
    a.finish()
}

/// A program that keeps packets whose source and destination are both loopback or lab
/// addresses (127.0.0.0/8, 198.18.0.0/15; ::1, fd00::/8) and drops all others.
pub fn only_lab() -> Vec<Insn> {
    let mut a = Asm::default();
    let (v6, accept, drop) = (a.label(), a.label(), a.label());
    version(&mut a, 4, Target::Next, Target::Label(v6));
    // IPv4: the source at byte 12, then the destination at 16, each in 127/8 or 198.18/15.
    for (off, then) in [(12, None), (16, Some(accept))] {
        let ok = a.label();
        let pass = then.unwrap_or(ok);
        a.word(off);
        a.op(AND_K, 0xff00_0000);
        a.jeq(0x7f00_0000, Target::Label(pass), Target::Next);
        a.word(off);
        a.op(AND_K, 0xfffe_0000);
        a.jeq(0xc612_0000, Target::Label(pass), Target::Label(drop));
        a.here(ok);
    }
    // IPv6: the source at byte 8, then the destination at 24, each in fd00::/8 or ::1.
    a.here(v6);
    version(&mut a, 6, Target::Next, Target::Label(drop));
    for off in [8u32, 24] {
        let ok = a.label();
        a.word(off);
        a.op(AND_K, 0xff00_0000);
        a.jeq(0xfd00_0000, Target::Label(ok), Target::Next);
        for i in 0..3 {
            a.word(off + 4 * i);
            a.jeq(0, Target::Next, Target::Label(drop));
        }
        a.word(off + 12);
        a.jeq(1, Target::Label(ok), Target::Label(drop));
        a.here(ok);
    }
    a.op(RET_K, ACCEPT);
    a.here(drop);
    a.op(RET_K, DROP);
    a.here(accept);
    a.op(RET_K, ACCEPT);
    a.finish()
}

/// Runs `prog` on a packet whose IP header starts at `ip[0]`, as the kernel would: the value
/// returned is how many bytes to keep (0: drop). Only the instructions built here are known;
/// any other, or a load past the packet, drops it (as the kernel does).
pub fn run(prog: &[Insn], ip: &[u8]) -> u32 {
    let load = |k: u32, n: usize| -> Option<u32> {
        let off = usize::try_from(k.wrapping_sub(NET)).ok()?;
        let b = ip.get(off..off + n)?;
        Some(b.iter().fold(0u32, |acc, &x| (acc << 8) | u32::from(x)))
    };
    let (mut pc, mut acc) = (0usize, 0u32);
    while let Some(i) = prog.get(pc) {
        pc += 1;
        match i.code {
            LD_W_ABS => match load(i.k, 4) {
                Some(v) => acc = v,
                None => return DROP,
            },
            LD_B_ABS => match load(i.k, 1) {
                Some(v) => acc = v,
                None => return DROP,
            },
            AND_K => acc &= i.k,
            JEQ_K => pc += usize::from(if acc == i.k { i.jt } else { i.jf }),
            RET_K => return i.k,
            _ => return DROP,
        }
    }
    DROP
}

/// Attaches `prog` to the socket `fd`.
pub fn attach(fd: RawFd, prog: &[Insn]) -> io::Result<()> {
    let fprog = libc::sock_fprog {
        len: u16::try_from(prog.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?,
        filter: prog.as_ptr().cast_mut(),
    };
    // Safety: `fprog` points at `prog`, which outlives the call; the kernel copies the program.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&fprog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Removes the filter of socket `fd` (one it inherited from its listener).
pub fn detach(fd: RawFd) {
    let zero: libc::c_int = 0;
    // Safety: setsockopt on the caller's fd with a live c_int; failure (no filter) is harmless.
    let _ = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_DETACH_FILTER,
            (&zero as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn v4(src: &str, dst: &str) -> Vec<u8> {
        let mut h = vec![0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0];
        h.extend(src.parse::<Ipv4Addr>().expect("v4").octets());
        h.extend(dst.parse::<Ipv4Addr>().expect("v4").octets());
        h
    }

    fn v6(src: &str, dst: &str) -> Vec<u8> {
        let mut h = vec![0x60, 0, 0, 0, 0, 20, 6, 64];
        h.extend(src.parse::<Ipv6Addr>().expect("v6").octets());
        h.extend(dst.parse::<Ipv6Addr>().expect("v6").octets());
        h
    }

    #[test]
    fn a_data_listener_takes_only_its_client() {
        let p = only_from("198.18.0.2".parse().expect("ip"));
        assert_eq!(run(&p, &v4("198.18.0.2", "198.18.0.1")), ACCEPT);
        assert_eq!(run(&p, &v4("198.18.0.3", "198.18.0.1")), DROP);
        assert_eq!(run(&p, &v6("fd00::2", "fd00::1")), DROP);
        let p = only_from("fd00::2".parse().expect("ip"));
        assert_eq!(run(&p, &v6("fd00::2", "fd00::1")), ACCEPT);
        assert_eq!(run(&p, &v6("fd00::3", "fd00::1")), DROP);
        assert_eq!(run(&p, &v6("fd01::2", "fd00::1")), DROP);
        assert_eq!(run(&p, &v4("198.18.0.2", "198.18.0.1")), DROP);
        // A v4 client seen through a dual-stack socket is matched by its IPv4 address.
        let p = only_from("::ffff:127.0.0.1".parse().expect("ip"));
        assert_eq!(run(&p, &v4("127.0.0.1", "127.0.0.1")), ACCEPT);
        assert_eq!(run(&p, &[0x45, 0]), DROP, "truncated header");
    }

    #[test]
    fn without_keys_only_lab_and_loopback_packets_pass() {
        let p = only_lab();
        for (s, d) in [
            ("127.0.0.1", "127.0.0.1"),
            ("198.18.0.2", "198.19.0.1"),
            ("127.0.0.2", "198.18.0.1"),
        ] {
            assert_eq!(run(&p, &v4(s, d)), ACCEPT, "{s} -> {d}");
        }
        for (s, d) in [
            ("10.0.0.2", "198.18.0.1"),
            ("198.18.0.2", "10.0.0.1"),
            ("198.20.0.1", "127.0.0.1"),
            ("8.8.8.8", "8.8.4.4"),
        ] {
            assert_eq!(run(&p, &v4(s, d)), DROP, "{s} -> {d}");
        }
        for (s, d) in [("::1", "::1"), ("fd00::2", "fd00::1"), ("fdab::1", "::1")] {
            assert_eq!(run(&p, &v6(s, d)), ACCEPT, "{s} -> {d}");
        }
        for (s, d) in [
            ("2001:db8::1", "fd00::1"),
            ("fd00::1", "fe80::1"),
            ("::2", "::1"),
            ("1::1", "::1"),
        ] {
            assert_eq!(run(&p, &v6(s, d)), DROP, "{s} -> {d}");
        }
    }

    #[test]
    fn the_kernel_accepts_the_programs() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        use std::os::fd::AsRawFd;
        attach(l.as_raw_fd(), &only_lab()).expect("lab");
        attach(l.as_raw_fd(), &only_from("fd00::1".parse().expect("ip"))).expect("peer");
        detach(l.as_raw_fd());
    }
}
