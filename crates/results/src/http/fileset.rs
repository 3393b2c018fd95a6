//! SPECweb96's file set, pure: four classes of nine files per directory, their exact sizes,
//! their paths, and their content as a function of (file, offset), so that a server can
//! produce any byte without storing the file and a client can check every byte it receives.
//!
//! Sizes (SPEC, "The Workload for the SPECweb96 Benchmark", Table 2): class c holds files of
//! k × 1024 × 10^c / 10 bytes, k = 1..9: 1 KB .. 9 KB for class 1, 10 KB .. 90 KB for class 2,
//! 100 KB .. 900 KB for class 3. Class 0 is a tenth of a kilobyte each; SPEC's table prints
//! 102, 204 … 922, so the fractional sizes are truncated except the last, as printed.

use std::fmt;

/// Files per class.
pub const FILES_PER_CLASS: u8 = 9;
/// Classes.
pub const CLASSES: u8 = 4;
/// Most directories a file set may have (each about 5.1 MB).
pub const MAX_DIRS: u32 = 10_000;

/// Class 0's sizes as SPEC's table gives them (k × 102.4 bytes, truncated; the last printed 922).
const CLASS0: [u64; 9] = [102, 204, 307, 409, 512, 614, 716, 819, 922];

/// One file of the set: directory, class 0-3, index 1-9 within the class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId {
    /// Directory number, 0-based.
    pub dir: u32,
    /// Size class, 0-3.
    pub class: u8,
    /// File within the class, 1-9 (the k of k × 1024 × 10^class / 10).
    pub index: u8,
}

impl FileId {
    /// The file, if its fields are within the set's bounds (directory not checked against a
    /// particular set's size).
    pub fn new(dir: u32, class: u8, index: u8) -> Option<Self> {
        (dir < MAX_DIRS && class < CLASSES && (1..=FILES_PER_CLASS).contains(&index))
            .then_some(Self { dir, class, index })
    }

    /// Its size, bytes.
    pub fn size(&self) -> u64 {
        size(self.class, self.index)
    }

    /// Its URL path: `/dir00042/class2_7`.
    pub fn path(&self) -> String {
        self.to_string()
    }

    /// The file a URL path names; `None` for any other path (a query string is not allowed:
    /// the set is static).
    pub fn parse_path(path: &str) -> Option<Self> {
        let rest = path.strip_prefix("/dir")?;
        let (dir, file) = rest.split_once('/')?;
        if dir.len() != 5 || !dir.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let file = file.strip_prefix("class")?;
        let (class, index) = file.split_once('_')?;
        if class.len() != 1 || index.len() != 1 {
            return None;
        }
        let digit = |s: &str| {
            s.bytes()
                .next()
                .filter(u8::is_ascii_digit)
                .map(|b| b - b'0')
        };
        Self::new(dir.parse().ok()?, digit(class)?, digit(index)?)
    }

    /// The byte at `offset` of this file's content.
    pub fn byte_at(&self, offset: u64) -> u8 {
        content_byte(self.seed(), offset)
    }

    /// Fills `buf` with the content from `offset` on (the part past the end of the file is
    /// filled too; callers bound it by the size).
    pub fn fill(&self, offset: u64, buf: &mut [u8]) {
        let seed = self.seed();
        let mut i = 0usize;
        while i < buf.len() {
            let at = offset + i as u64;
            let block = block_bytes(seed, at / 8);
            let from = (at % 8) as usize;
            let n = (8 - from).min(buf.len() - i);
            buf[i..i + n].copy_from_slice(&block[from..from + n]);
            i += n;
        }
    }

    /// Whether `data` is this file's content starting at `offset`.
    pub fn matches(&self, offset: u64, data: &[u8]) -> bool {
        let mut want = [0u8; 4096];
        data.chunks(want.len()).enumerate().all(|(i, chunk)| {
            let w = &mut want[..chunk.len()];
            self.fill(offset + (i * 4096) as u64, w);
            w == chunk
        })
    }

    fn seed(&self) -> u64 {
        (u64::from(self.dir) << 16) | (u64::from(self.class) << 8) | u64::from(self.index)
    }
}

impl fmt::Display for FileId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "/dir{:05}/class{}_{}", self.dir, self.class, self.index)
    }
}

/// The size of file `index` (1-9) of `class` (0-3), bytes; 0 outside the set.
pub fn size(class: u8, index: u8) -> u64 {
    if !(1..=FILES_PER_CLASS).contains(&index) {
        return 0;
    }
    let k = u64::from(index);
    match class {
        0 => CLASS0[usize::from(index - 1)],
        1 => k * 1024,
        2 => k * 10_240,
        3 => k * 102_400,
        _ => 0,
    }
}

/// Printable content (so a file looks sane in a browser or a hex dump), different per file
/// and per position: a 64-bit mix of (file, 8-byte block), one letter per byte.
fn content_byte(seed: u64, offset: u64) -> u8 {
    block_bytes(seed, offset / 8)[(offset % 8) as usize]
}

/// The 8 bytes of content block `block` of the file with `seed`.
fn block_bytes(seed: u64, block: u64) -> [u8; 8] {
    let mut x =
        seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ block.wrapping_mul(0xD1B5_4A32_D192_ED03);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    x.to_le_bytes()
        .map(|b| ALPHABET[usize::from(b) % ALPHABET.len()])
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// A file set of `dirs` directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileSet {
    dirs: u32,
}

impl FileSet {
    /// A set of `dirs` directories (1..=[`MAX_DIRS`]).
    pub fn new(dirs: u32) -> Result<Self, String> {
        if dirs == 0 || dirs > MAX_DIRS {
            return Err(format!("{dirs} directories is outside 1..={MAX_DIRS}"));
        }
        Ok(Self { dirs })
    }

    /// Directories.
    pub fn dirs(&self) -> u32 {
        self.dirs
    }

    /// Whether `id` belongs to this set.
    pub fn contains(&self, id: &FileId) -> bool {
        id.dir < self.dirs
    }

    /// The file a URL path names in this set.
    pub fn lookup(&self, path: &str) -> Option<FileId> {
        FileId::parse_path(path).filter(|id| self.contains(id))
    }

    /// Every file, directory by directory, class by class.
    pub fn files(&self) -> impl Iterator<Item = FileId> + '_ {
        (0..self.dirs).flat_map(|dir| {
            (0..CLASSES).flat_map(move |class| {
                (1..=FILES_PER_CLASS).map(move |index| FileId { dir, class, index })
            })
        })
    }

    /// Bytes of one directory (all 36 files).
    pub fn dir_bytes() -> u64 {
        (0..CLASSES)
            .flat_map(|c| (1..=FILES_PER_CLASS).map(move |k| size(c, k)))
            .sum()
    }

    /// Bytes of the whole set.
    pub fn total_bytes(&self) -> u64 {
        Self::dir_bytes() * u64::from(self.dirs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_specs_table() {
        assert_eq!(size(0, 1), 102);
        assert_eq!(size(0, 2), 204);
        assert_eq!(size(0, 9), 922);
        assert_eq!(size(1, 1), 1024);
        assert_eq!(size(1, 9), 9216);
        assert_eq!(size(2, 1), 10_240);
        assert_eq!(size(2, 9), 92_160);
        assert_eq!(size(3, 1), 102_400);
        assert_eq!(size(3, 9), 921_600);
        assert_eq!(size(4, 1), 0);
        assert_eq!(size(1, 0), 0);
        // Every class's sizes grow with k and stay inside the class's range.
        for c in 0..CLASSES {
            let lo = 100 * 10u64.pow(u32::from(c));
            for k in 1..=FILES_PER_CLASS {
                let s = size(c, k);
                assert!(s >= lo && s < 10 * lo, "class {c} file {k}: {s}");
                if k > 1 {
                    assert!(s > size(c, k - 1));
                }
            }
        }
        // 45 × (102.4 + 1024 + 10240 + 102400) B, "roughly 5 MB" a directory.
        assert_eq!(FileSet::dir_bytes(), 4_605 + 46_080 + 460_800 + 4_608_000);
        assert_eq!(
            FileSet::new(3).unwrap().total_bytes(),
            3 * FileSet::dir_bytes()
        );
    }

    #[test]
    fn paths_round_trip_and_reject_everything_else() {
        let set = FileSet::new(12).unwrap();
        assert_eq!(set.files().count(), 12 * 36);
        for id in set.files() {
            assert_eq!(set.lookup(&id.path()), Some(id));
        }
        assert_eq!(FileId::new(42, 2, 7).unwrap().path(), "/dir00042/class2_7");
        for bad in [
            "/",
            "/dir00012/class1_1", // past the set
            "/dir0001/class1_1",
            "/dir00001/class4_1",
            "/dir00001/class1_0",
            "/dir00001/class1_10",
            "/dir00001/class1_1?x",
            "/dir00001/class+1_1",
            "/dir-0001/class1_1",
            "/../etc/passwd",
        ] {
            assert_eq!(set.lookup(bad), None, "{bad}");
        }
        assert!(FileSet::new(0).is_err());
        assert!(FileSet::new(MAX_DIRS + 1).is_err());
    }

    #[test]
    fn content_is_deterministic_printable_and_differs_between_files() {
        let a = FileId::new(0, 1, 3).unwrap();
        let b = FileId::new(1, 1, 3).unwrap();
        let mut x = vec![0u8; 4096];
        let mut y = vec![0u8; 4096];
        a.fill(0, &mut x);
        b.fill(0, &mut y);
        assert_ne!(x, y);
        assert!(x.iter().all(|c| ALPHABET.contains(c)));
        assert!(a.matches(0, &x));
        assert!(!a.matches(0, &y));
        // Any window agrees with the whole.
        let mut w = vec![0u8; 100];
        a.fill(1001, &mut w);
        assert_eq!(&w[..], &x[1001..1101]);
        assert_eq!(a.byte_at(1001), x[1001]);
        // All 64 letters in use, none far from 1/64 over a large file.
        let big = FileId::new(3, 3, 9).unwrap();
        let mut body = vec![0u8; big.size() as usize];
        big.fill(0, &mut body);
        let mut counts = [0u64; 256];
        body.iter().for_each(|c| counts[usize::from(*c)] += 1);
        let expect = body.len() as f64 / 64.0;
        for c in ALPHABET {
            let n = counts[usize::from(*c)] as f64;
            assert!((n - expect).abs() < 0.1 * expect, "{} {n}", *c as char);
        }
    }
}
