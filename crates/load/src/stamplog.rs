//! Where a timed loop puts its per-message stamps: the first [`IN_MEMORY`] in a vector, the
//! rest handed in chunks to a writer thread that appends them to an unlinked temporary file
//! (in `$TMPDIR`), so a long msgs run's memory stays a few megabytes whatever its count.
//!
//! The loop's cost per stamp stays a push into a preallocated vector; every [`CHUNK`] stamps it
//! swaps in a spare chunk (returned by the writer once written) and sends the full one, never
//! waiting for the disk. The file is created, and the writer started, before the loop
//! ([`StampLog::new`] fails then, naming the directory), so nothing slow happens inside it.
//! A write that fails later (a disk filling up) loses the run's stamps, not the run: the
//! error comes back from [`StampLog::finish`] for the caller to report.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread::JoinHandle;

use tcplab_results::stamps::{StampStore, Stamps};

/// Stamps kept in memory before the rest go to a file (8 MiB of them: every run of up to a
/// million messages stays exact and in memory, as short runs always were).
pub const IN_MEMORY: usize = 1 << 20;
/// Stamps per chunk handed to the writer (512 KiB).
pub const CHUNK: usize = 1 << 16;
/// Chunks in flight to the writer before the loop would wait: a slow disk's backlog is
/// bounded, and the loop only waits when the disk falls this far behind.
const IN_FLIGHT: usize = 8;

/// The stamps of one timed loop, in memory and (past [`IN_MEMORY`]) in a file.
#[derive(Debug)]
pub struct StampLog {
    mem: Vec<u64>,
    limit: usize,
    chunk: Vec<u64>,
    spill: Option<Spill>,
}

#[derive(Debug)]
struct Spill {
    to_writer: SyncSender<Vec<u64>>,
    spares: Receiver<Vec<u64>>,
    writer: JoinHandle<io::Result<File>>,
    handed: u64,
    last_handed: u64,
}

impl StampLog {
    /// A log for up to `expected` stamps; when they may not fit in memory, the spill file and
    /// its writer are set up now (an error names the directory and what to do).
    pub fn new(expected: u64) -> io::Result<Self> {
        Self::with_limit(expected, IN_MEMORY)
    }

    /// [`StampLog::new`] keeping at most `limit` stamps in memory (tests use small ones).
    pub fn with_limit(expected: u64, limit: usize) -> io::Result<Self> {
        let limit = limit.max(1);
        let spill = if expected > limit as u64 {
            Some(Spill::start()?)
        } else {
            None
        };
        Ok(Self {
            mem: touched((expected as usize).min(limit)),
            limit,
            chunk: if spill.is_some() {
                touched(CHUNK)
            } else {
                Vec::new()
            },
            spill,
        })
    }

    /// Adds one stamp (the timed loops' only call).
    #[inline]
    pub fn push(&mut self, stamp: u64) {
        if self.mem.len() < self.limit {
            self.mem.push(stamp);
        } else {
            self.push_spilled(stamp);
        }
    }

    /// Number of stamps pushed.
    pub fn len(&self) -> u64 {
        let handed = self.spill.as_ref().map_or(0, |s| s.handed);
        self.mem.len() as u64 + handed + self.chunk.len() as u64
    }

    /// Whether none was pushed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[cold]
    fn push_spilled(&mut self, stamp: u64) {
        if self.spill.is_none() {
            // More stamps than announced: start spilling now rather than grow without bound.
            match Spill::start() {
                Ok(s) => self.spill = Some(s),
                Err(_) => {
                    // No file to spill to: keep it in memory (the announced count was wrong,
                    // so the bound was never promised for this log).
                    self.mem.push(stamp);
                    return;
                }
            }
        }
        self.chunk.push(stamp);
        if self.chunk.len() >= CHUNK
            && let Some(spill) = self.spill.as_mut()
        {
            self.chunk = spill.hand_off(std::mem::take(&mut self.chunk));
        }
    }

    /// The stamps: in memory if they fit, else behind a store reading the file back. A write
    /// that failed on the way is returned here.
    pub fn finish(mut self) -> io::Result<Stamps> {
        let Some(mut spill) = self.spill.take() else {
            return Ok(Stamps::from(self.mem));
        };
        if spill.handed == 0 && self.chunk.is_empty() {
            return Ok(Stamps::from(self.mem));
        }
        let first = self.mem.first().copied().unwrap_or(0);
        let last = self.chunk.last().copied().unwrap_or(spill.last_handed);
        let in_file = spill.handed + self.chunk.len() as u64;
        if !self.chunk.is_empty() {
            spill.hand_off(std::mem::take(&mut self.chunk));
        }
        let Spill {
            to_writer, writer, ..
        } = spill;
        drop(to_writer);
        let file = writer
            .join()
            .map_err(|_| io::Error::other("the stamps' writer thread panicked"))??;
        let store = FileStore {
            head: self.mem,
            file,
            in_file,
        };
        Ok(Stamps::stored(Arc::new(store), first, last))
    }
}

/// An empty vector of `capacity` whose pages are already written, so that no page is first
/// touched (a page fault; on a VM one in the hypervisor too) inside the timed loop.
fn touched(capacity: usize) -> Vec<u64> {
    let mut v = vec![0u64; capacity];
    // calloc'd pages may be the kernel's shared zero page until written: write them.
    for slot in v.iter_mut().step_by(512) {
        *slot = 1;
    }
    std::hint::black_box(&mut v);
    v.clear();
    v
}

impl Spill {
    fn start() -> io::Result<Self> {
        let file = tempfile::tempfile().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot create a file for the run's stamps in {} ({e}); set TMPDIR to a \
                     writable directory on a disk",
                    std::env::temp_dir().display()
                ),
            )
        })?;
        let (to_writer, chunks) = mpsc::sync_channel::<Vec<u64>>(IN_FLIGHT);
        let (give_back, spares) = mpsc::sync_channel::<Vec<u64>>(IN_FLIGHT + 1);
        let writer = std::thread::Builder::new()
            .name("tcplab-stamps".into())
            .spawn(move || write_chunks(file, &chunks, &give_back))?;
        Ok(Self {
            to_writer,
            spares,
            writer,
            handed: 0,
            last_handed: 0,
        })
    }

    /// Sends a full chunk to the writer and returns an empty one to fill next.
    fn hand_off(&mut self, chunk: Vec<u64>) -> Vec<u64> {
        self.handed += chunk.len() as u64;
        self.last_handed = chunk.last().copied().unwrap_or(self.last_handed);
        // A writer that stopped on an error has dropped its end; its error comes at finish.
        let _ = self.to_writer.send(chunk);
        self.spares
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(CHUNK))
    }
}

/// The writer thread: appends each chunk as little-endian u64s and gives the vector back.
/// After an error it keeps taking chunks (so the loop never blocks) and returns the error.
fn write_chunks(
    file: File,
    chunks: &Receiver<Vec<u64>>,
    give_back: &SyncSender<Vec<u64>>,
) -> io::Result<File> {
    let mut out = BufWriter::with_capacity(CHUNK * 8, file);
    let mut failed = None;
    for mut chunk in chunks {
        if failed.is_none() {
            failed = chunk
                .iter()
                .try_for_each(|v| out.write_all(&v.to_le_bytes()))
                .err();
        }
        chunk.clear();
        let _ = give_back.try_send(chunk);
    }
    if let Some(e) = failed {
        return Err(spill_error(e));
    }
    out.into_inner().map_err(|e| spill_error(e.into_error()))
}

fn spill_error(e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!(
            "writing the run's stamps to a file in {}: {e}; free space there or set TMPDIR \
             to a directory with room (16 bytes a message)",
            std::env::temp_dir().display()
        ),
    )
}

/// Stamps read back: the first ones from memory, the rest from the (unlinked) file.
#[derive(Debug)]
struct FileStore {
    head: Vec<u64>,
    file: File,
    in_file: u64,
}

impl StampStore for FileStore {
    fn len(&self) -> u64 {
        self.head.len() as u64 + self.in_file
    }

    fn read_at(&self, index: u64, out: &mut [u64]) -> io::Result<()> {
        let head = self.head.len() as u64;
        let mut filled = 0;
        if index < head {
            let from = &self.head[index as usize..];
            filled = from.len().min(out.len());
            out[..filled].copy_from_slice(&from[..filled]);
        }
        if filled == out.len() {
            return Ok(());
        }
        let at = index + filled as u64 - head;
        let mut bytes = vec![0u8; (out.len() - filled) * 8];
        self.file.read_exact_at(&mut bytes, at * 8)?;
        for (slot, b) in out[filled..].iter_mut().zip(bytes.chunks_exact(8)) {
            *slot = u64::from_le_bytes(b.try_into().unwrap_or_default());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logged(expected: u64, limit: usize, n: u64) -> Stamps {
        let mut log = StampLog::with_limit(expected, limit).unwrap();
        for i in 0..n {
            log.push(1_000 + i * 7);
        }
        assert_eq!(log.len(), n);
        log.finish().unwrap()
    }

    #[test]
    fn a_run_that_fits_stays_in_memory() {
        let s = logged(100, 1_000, 100);
        assert!(!s.is_stored());
        assert_eq!(s.as_slice().unwrap()[99], 1_000 + 99 * 7);
    }

    #[test]
    fn a_long_run_spills_and_reads_back_whole() {
        let n = 3 * CHUNK as u64 + 123;
        let s = logged(n, 1_000, n);
        assert!(s.is_stored());
        assert_eq!(s.len() as u64, n);
        assert_eq!(
            (s.first(), s.last()),
            (Some(1_000), Some(1_000 + (n - 1) * 7))
        );
        let all = s.to_vec().unwrap();
        assert!(
            all.iter()
                .enumerate()
                .all(|(i, &v)| v == 1_000 + i as u64 * 7)
        );
    }

    #[test]
    fn a_run_longer_than_announced_spills_too() {
        let n = CHUNK as u64 + 5;
        let s = logged(10, 10, n);
        assert!(s.is_stored());
        assert_eq!(s.to_vec().unwrap().len() as u64, n);
    }

    #[test]
    fn a_spilling_log_that_stops_early_keeps_what_it_has() {
        // Announced long, stopped inside the memory part (a run cut short).
        let s = logged(10 * CHUNK as u64, 1_000, 500);
        assert!(!s.is_stored());
        assert_eq!(s.len(), 500);
        let s = logged(10 * CHUNK as u64, 1_000, 1_001);
        assert!(s.is_stored());
        assert_eq!(s.last(), Some(1_000 + 1_000 * 7));
    }

    #[test]
    fn reads_straddle_memory_and_file() {
        let s = logged(5_000, 1_000, 5_000);
        let mut it = s.iter();
        assert_eq!(it.nth(999), Some(1_000 + 999 * 7));
        assert_eq!(it.next(), Some(1_000 + 1_000 * 7));
        assert!(it.finish().is_ok());
    }
}
