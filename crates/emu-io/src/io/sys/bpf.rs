//! The XDP side of the AF_XDP route: a 19-instruction XDP program that stamps each frame's
//! arrival time and redirects it to the AF_XDP socket of its RX queue, loaded and attached
//! with the `bpf(2)` system call directly.
//!
//! Why by hand and not a crate: the program is fixed and tiny, and every Rust eBPF loader
//! either wraps libbpf (a C build) or needs a BPF toolchain (`bpf-linker`, nightly) to compile
//! the program; the `bpf(2)` calls used here are four (`MAP_CREATE`, `PROG_LOAD`,
//! `MAP_UPDATE_ELEM`, `LINK_CREATE`). The program is attached through a BPF link, so it is
//! detached when the link's fd closes: a crashed emulator never leaves XDP on an interface.
//!
//! The program (`redirect_program`, checked instruction by instruction in the tests):
//! ```text
//! r6 = ctx; r7 = bpf_ktime_get_ns()            ; arrival, CLOCK_MONOTONIC
//! if bpf_xdp_adjust_meta(ctx, -8) == 0 and data_meta + 8 <= data:
//!     *(u64 *)data_meta = r7                     ; 8 bytes of metadata before the frame
//! return bpf_redirect_map(&xskmap, ctx->rx_queue_index, XDP_PASS)
//! ```
//! The socket's copy of the frame keeps the metadata (copy mode copies `data_meta..data_end`),
//! so user space reads the stamp at `desc.addr - 8`.
//!
//! Some kernel builds refuse `bpf_xdp_adjust_meta` to an XDP program ("program of this type
//! cannot use helper", seen on a 6.18 build): there the redirect is loaded alone
//! (`plain_redirect_program`), frames arrive unstamped (their stamp slot reads 0) and the
//! emulator takes their arrival time when it reads them, as on the AF_PACKET route.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `BPF_MAP_CREATE` .. `BPF_LINK_CREATE` commands.
const BPF_MAP_CREATE: libc::c_int = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_LINK_CREATE: libc::c_int = 28;
/// `BPF_MAP_TYPE_XSKMAP`.
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
/// `BPF_PROG_TYPE_XDP`.
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `BPF_XDP` attach type (for `BPF_LINK_CREATE`).
const BPF_XDP: u32 = 37;
/// `XDP_FLAGS_DRV_MODE`: native XDP in the driver (veth's NAPI), not the generic hook.
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// `XDP_PASS`, also `bpf_redirect_map`'s fallback action when the queue has no socket.
const XDP_PASS: i32 = 2;
/// Helper ids.
const FN_KTIME_GET_NS: i32 = 5;
const FN_REDIRECT_MAP: i32 = 51;
const FN_XDP_ADJUST_META: i32 = 54;
/// Offsets in `struct xdp_md`.
const MD_DATA: i16 = 0;
const MD_DATA_META: i16 = 8;
const MD_RX_QUEUE_INDEX: i16 = 16;
/// Bytes of metadata the program writes before each frame (the arrival stamp).
pub const META_LEN: usize = 8;

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    /// Opcode.
    pub code: u8,
    /// dst_reg (low nibble), src_reg (high nibble).
    pub regs: u8,
    /// Signed offset.
    pub off: i16,
    /// Signed immediate.
    pub imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: dst | (src << 4),
        off,
        imm,
    }
}

/// `BPF_ALU64 | BPF_MOV | BPF_X`, `| BPF_K`, `BPF_ALU64 | BPF_ADD | BPF_K`.
const MOV64_REG: u8 = 0xbf;
const MOV64_IMM: u8 = 0xb7;
const ADD64_IMM: u8 = 0x07;
/// `BPF_LDX | BPF_MEM | BPF_W`, `BPF_STX | BPF_MEM | BPF_DW`.
const LDX_W: u8 = 0x61;
const STX_DW: u8 = 0x7b;
/// `BPF_JMP | BPF_JNE | BPF_K`, `BPF_JMP | BPF_JGT | BPF_X`, call, exit.
const JNE_IMM: u8 = 0x55;
const JGT_REG: u8 = 0x2d;
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;
/// `BPF_LD | BPF_DW | BPF_IMM` (two slots); src_reg `BPF_PSEUDO_MAP_FD` makes imm a map fd.
const LD_IMM64: u8 = 0x18;
const PSEUDO_MAP_FD: u8 = 1;

/// The XDP program for the XSKMAP `map_fd` (see the module doc).
pub fn redirect_program(map_fd: i32) -> Vec<Insn> {
    vec![
        insn(MOV64_REG, 6, 1, 0, 0),                  // 0: r6 = ctx
        insn(CALL, 0, 0, 0, FN_KTIME_GET_NS),         // 1: r0 = now
        insn(MOV64_REG, 7, 0, 0, 0),                  // 2: r7 = r0
        insn(MOV64_REG, 1, 6, 0, 0),                  // 3: r1 = ctx
        insn(MOV64_IMM, 2, 0, 0, -(META_LEN as i32)), // 4: r2 = -8
        insn(CALL, 0, 0, 0, FN_XDP_ADJUST_META),      // 5
        insn(JNE_IMM, 0, 0, 6, 0),                    // 6: failed -> 13
        insn(LDX_W, 2, 6, MD_DATA_META, 0),           // 7: r2 = data_meta
        insn(LDX_W, 3, 6, MD_DATA, 0),                // 8: r3 = data
        insn(MOV64_REG, 4, 2, 0, 0),                  // 9: r4 = r2
        insn(ADD64_IMM, 4, 0, 0, META_LEN as i32),    // 10: r4 += 8
        insn(JGT_REG, 4, 3, 1, 0),                    // 11: out of bounds -> 13
        insn(STX_DW, 2, 7, 0, 0),                     // 12: *(u64 *)r2 = r7
        insn(LDX_W, 2, 6, MD_RX_QUEUE_INDEX, 0),      // 13: r2 = rx_queue_index
        insn(LD_IMM64, 1, PSEUDO_MAP_FD, 0, map_fd),  // 14: r1 = &xskmap
        insn(0, 0, 0, 0, 0),                          // 15: (second half)
        insn(MOV64_IMM, 3, 0, 0, XDP_PASS),           // 16: r3 = XDP_PASS
        insn(CALL, 0, 0, 0, FN_REDIRECT_MAP),         // 17
        insn(EXIT, 0, 0, 0, 0),                       // 18
    ]
}

/// The redirect without the stamp, for kernels that refuse `bpf_xdp_adjust_meta`:
/// `return bpf_redirect_map(&xskmap, ctx->rx_queue_index, XDP_PASS)`.
pub fn plain_redirect_program(map_fd: i32) -> Vec<Insn> {
    vec![
        insn(LDX_W, 2, 1, MD_RX_QUEUE_INDEX, 0), // 0: r2 = rx_queue_index
        insn(LD_IMM64, 1, PSEUDO_MAP_FD, 0, map_fd), // 1: r1 = &xskmap
        insn(0, 0, 0, 0, 0),                     // 2: (second half)
        insn(MOV64_IMM, 3, 0, 0, XDP_PASS),      // 3: r3 = XDP_PASS
        insn(CALL, 0, 0, 0, FN_REDIRECT_MAP),    // 4
        insn(EXIT, 0, 0, 0, 0),                  // 5
    ]
}

/// `union bpf_attr`, large enough for every command used here (unused bytes stay zero, as
/// the kernel requires).
#[repr(C, align(8))]
struct Attr([u32; 36]);

impl Attr {
    fn new(words: &[u32]) -> Self {
        let mut a = Self([0; 36]);
        a.0[..words.len()].copy_from_slice(words);
        a
    }
}

fn lo(p: u64) -> u32 {
    p as u32
}

fn hi(p: u64) -> u32 {
    (p >> 32) as u32
}

fn bpf(cmd: libc::c_int, attr: &mut Attr) -> io::Result<libc::c_long> {
    // Safety: attr is a zero-padded bpf_attr of the size passed; pointers inside it point at
    // buffers that live until this call returns.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            (attr as *mut Attr).cast::<libc::c_void>(),
            size_of::<Attr>() as libc::c_uint,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn bpf_fd(cmd: libc::c_int, attr: &mut Attr) -> io::Result<OwnedFd> {
    let fd = bpf(cmd, attr)?;
    // Safety: these commands return a fresh fd on success, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The redirect program attached to one interface; detached when dropped (the link closes).
#[derive(Debug)]
pub struct XdpRedirect {
    /// Declared first: closing it detaches the program before the program and map go.
    link: OwnedFd,
    _prog: OwnedFd,
    map: OwnedFd,
    /// Frames carry the kernel's arrival stamp.
    stamped: bool,
}

/// Why attaching failed, with the kernel's error and the verifier log when there is one.
#[derive(Debug)]
pub struct AttachError {
    /// The step ("BPF_MAP_CREATE", "BPF_PROG_LOAD", "BPF_LINK_CREATE").
    pub what: &'static str,
    /// The kernel's error.
    pub source: io::Error,
    /// The verifier's log (program load only).
    pub log: String,
}

impl XdpRedirect {
    /// Loads the program and attaches it in native (driver) mode to `ifindex`; `queues` is the
    /// XSKMAP size (one socket slot per RX queue).
    pub fn attach(ifindex: i32, queues: u32) -> Result<Self, AttachError> {
        let fail = |what| {
            move |source| AttachError {
                what,
                source,
                log: String::new(),
            }
        };
        // map_type, key_size, value_size, max_entries
        let mut a = Attr::new(&[BPF_MAP_TYPE_XSKMAP, 4, 4, queues.max(1)]);
        let map = bpf_fd(BPF_MAP_CREATE, &mut a).map_err(fail("BPF_MAP_CREATE"))?;
        // The stamping program first; where the kernel refuses it, the plain redirect (its
        // error is the one reported when both fail: it names what the emulator wanted).
        let (prog, stamped) = match load(&redirect_program(map.as_raw_fd())) {
            Ok(p) => (p, true),
            Err(e) => (
                load(&plain_redirect_program(map.as_raw_fd())).map_err(|_| e)?,
                false,
            ),
        };
        // prog_fd, target_ifindex, attach_type, flags
        let mut a = Attr::new(&[
            prog.as_raw_fd() as u32,
            ifindex as u32,
            BPF_XDP,
            XDP_FLAGS_DRV_MODE,
        ]);
        let link = bpf_fd(BPF_LINK_CREATE, &mut a).map_err(fail("BPF_LINK_CREATE"))?;
        Ok(Self {
            link,
            _prog: prog,
            map,
            stamped,
        })
    }

    /// Points RX queue `queue` at the AF_XDP socket `xsk`.
    pub fn insert(&self, queue: u32, xsk: BorrowedFd<'_>) -> io::Result<()> {
        let key = queue;
        let value = xsk.as_raw_fd() as u32;
        let (k, v) = (&key as *const u32 as u64, &value as *const u32 as u64);
        // map_fd, pad, key, value, flags (BPF_ANY)
        let mut a = Attr::new(&[self.map.as_raw_fd() as u32, 0, lo(k), hi(k), lo(v), hi(v)]);
        bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(drop)
    }

    /// Whether frames carry the kernel's arrival stamp (false where the kernel refused it).
    pub fn stamped(&self) -> bool {
        self.stamped
    }

    /// The link's fd (kept for diagnostics; closing it detaches the program).
    pub fn link_fd(&self) -> BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.link.as_fd()
    }
}

/// `BPF_PROG_LOAD` of an XDP program; on failure returns the verifier's log.
fn load(prog: &[Insn]) -> Result<OwnedFd, AttachError> {
    let license = c"GPL";
    let mut log = vec![0_u8; 16 * 1024];
    let (insns, lic, buf) = (
        prog.as_ptr() as u64,
        license.as_ptr() as u64,
        log.as_mut_ptr() as u64,
    );
    // prog_type, insn_cnt, insns, license, log_level, log_size, log_buf, kern_version,
    // prog_flags, prog_name[16]
    let mut words = vec![
        BPF_PROG_TYPE_XDP,
        prog.len() as u32,
        lo(insns),
        hi(insns),
        lo(lic),
        hi(lic),
        1,
        log.len() as u32,
        lo(buf),
        hi(buf),
        0,
        0,
    ];
    // "tcplab_xsk" as the program name (shown by bpftool).
    let mut name = [0_u8; 16];
    name[..10].copy_from_slice(b"tcplab_xsk");
    words.extend(
        name.chunks(4)
            .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]])),
    );
    let mut a = Attr::new(&words);
    bpf_fd(BPF_PROG_LOAD, &mut a).map_err(|source| AttachError {
        what: "BPF_PROG_LOAD",
        source,
        log: String::from_utf8_lossy(&log)
            .trim_end_matches('\0')
            .trim()
            .to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_encoding_and_jumps_land_where_the_comments_say() {
        let p = redirect_program(42);
        assert_eq!(p.len(), 19);
        assert_eq!(size_of::<Insn>(), 8);
        // Both conditional jumps land on the rx_queue_index load.
        let target = 13;
        for (i, ins) in p.iter().enumerate() {
            if ins.code == JNE_IMM || ins.code == JGT_REG {
                assert_eq!(i as i32 + 1 + i32::from(ins.off), target, "jump at {i}");
            }
        }
        assert_eq!(p[target as usize], insn(LDX_W, 2, 6, MD_RX_QUEUE_INDEX, 0));
        // The map fd sits in the first half of the 64-bit load, marked as a map fd.
        assert_eq!((p[14].code, p[14].regs, p[14].imm), (LD_IMM64, 0x11, 42));
        assert_eq!(p[15], insn(0, 0, 0, 0, 0));
        // The stamp is written only through data_meta (r2) from r7.
        assert_eq!(p[12].regs, 2 | (7 << 4));
        assert_eq!(p.last().map(|i| i.code), Some(EXIT));
        // Calls in order: clock, adjust_meta, redirect_map.
        let calls: Vec<i32> = p.iter().filter(|i| i.code == CALL).map(|i| i.imm).collect();
        assert_eq!(
            calls,
            [FN_KTIME_GET_NS, FN_XDP_ADJUST_META, FN_REDIRECT_MAP]
        );
    }

    #[test]
    fn the_plain_redirect_reads_the_queue_before_r1_holds_the_map() {
        let p = plain_redirect_program(42);
        assert_eq!(p[0], insn(LDX_W, 2, 1, MD_RX_QUEUE_INDEX, 0));
        assert_eq!((p[1].code, p[1].regs, p[1].imm), (LD_IMM64, 0x11, 42));
        let calls: Vec<i32> = p.iter().filter(|i| i.code == CALL).map(|i| i.imm).collect();
        assert_eq!(calls, [FN_REDIRECT_MAP]);
        assert_eq!(p.last().map(|i| i.code), Some(EXIT));
    }

    #[test]
    fn attr_words_are_little_pieces_of_pointers() {
        let p: u64 = 0x1122_3344_5566_7788;
        assert_eq!((lo(p), hi(p)), (0x5566_7788, 0x1122_3344));
        let a = Attr::new(&[1, 2, 3]);
        assert_eq!(&a.0[..4], &[1, 2, 3, 0]);
    }
}
