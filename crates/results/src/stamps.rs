//! A run's per-message timestamps (msgs' send and receive stamps, CLOCK_MONOTONIC ns): in
//! memory for the runs most people make, behind a [`StampStore`] for the long ones, so that a
//! run of ten million messages does not hold 160 MB of stamps. The store is the I/O layer's
//! (`tcplab_load::stamplog` spills to an unlinked file); this crate only reads through it.
//!
//! Readers go through [`Stamps::iter`], which reads a store in chunks of [`READ_CHUNK`]: memory
//! for a reader is bounded whatever the run's length. A store that fails to read ends the
//! iteration; [`Iter::finish`] says so, and a reader that reports figures checks it.

use std::fmt;
use std::io;
use std::sync::Arc;

/// Stamps read from a store at a time.
pub const READ_CHUNK: usize = 1 << 16;

/// Where stamps that did not stay in memory live.
pub trait StampStore: Send + Sync + fmt::Debug {
    /// Number of stamps held.
    fn len(&self) -> u64;
    /// Whether no stamps are held.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fills `out` with the stamps from `index` on; `index + out.len()` is at most `len()`.
    fn read_at(&self, index: u64, out: &mut [u64]) -> io::Result<()>;
}

/// A sequence of stamps, in memory or in a store.
#[derive(Clone, Default)]
pub struct Stamps(Repr);

#[derive(Clone)]
enum Repr {
    Mem(Vec<u64>),
    Stored {
        store: Arc<dyn StampStore>,
        first: u64,
        last: u64,
    },
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Mem(Vec::new())
    }
}

impl Stamps {
    /// Stamps kept by a store; `first` and `last` are its first and last values (kept here so
    /// the run's start and end need no read).
    pub fn stored(store: Arc<dyn StampStore>, first: u64, last: u64) -> Self {
        Self(Repr::Stored { store, first, last })
    }

    /// Number of stamps.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Mem(v) => v.len(),
            Repr::Stored { store, .. } => store.len() as usize,
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the stamps are behind a store (a long run), not in memory.
    pub fn is_stored(&self) -> bool {
        matches!(self.0, Repr::Stored { .. })
    }

    /// The stamps when they are in memory.
    pub fn as_slice(&self) -> Option<&[u64]> {
        match &self.0 {
            Repr::Mem(v) => Some(v),
            Repr::Stored { .. } => None,
        }
    }

    /// The first stamp.
    pub fn first(&self) -> Option<u64> {
        match &self.0 {
            Repr::Mem(v) => v.first().copied(),
            Repr::Stored { first, store, .. } => (!store.is_empty()).then_some(*first),
        }
    }

    /// The last stamp.
    pub fn last(&self) -> Option<u64> {
        match &self.0 {
            Repr::Mem(v) => v.last().copied(),
            Repr::Stored { last, store, .. } => (!store.is_empty()).then_some(*last),
        }
    }

    /// Every stamp in order, read in chunks (see the module doc for errors).
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            stamps: self,
            buf: Vec::new(),
            at: 0,
            next_index: 0,
            error: None,
        }
    }

    /// Every stamp in a vector, or the store's error. For readers that need them all at once
    /// (the doctor's per-message series); a long run's figures stream instead.
    pub fn to_vec(&self) -> io::Result<Vec<u64>> {
        let mut it = self.iter();
        let v: Vec<u64> = it.by_ref().collect();
        it.finish().map(|()| v)
    }
}

impl From<Vec<u64>> for Stamps {
    fn from(v: Vec<u64>) -> Self {
        Self(Repr::Mem(v))
    }
}

impl<'a> IntoIterator for &'a Stamps {
    type Item = u64;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<u64> for Stamps {
    fn from_iter<I: IntoIterator<Item = u64>>(iter: I) -> Self {
        Self(Repr::Mem(iter.into_iter().collect()))
    }
}

impl fmt::Debug for Stamps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Mem(v) if v.len() <= 8 => write!(f, "{v:?}"),
            Repr::Mem(v) => write!(f, "[{} stamps in memory]", v.len()),
            Repr::Stored { store, .. } => write!(f, "[{} stamps in {store:?}]", store.len()),
        }
    }
}

/// Equal when they hold the same stamps (a store that fails to read equals nothing).
impl PartialEq for Stamps {
    fn eq(&self, other: &Self) -> bool {
        if let (Some(a), Some(b)) = (self.as_slice(), other.as_slice()) {
            return a == b;
        }
        if self.len() != other.len() {
            return false;
        }
        let (mut a, mut b) = (self.iter(), other.iter());
        let same = a.by_ref().eq(b.by_ref());
        same && a.finish().is_ok() && b.finish().is_ok()
    }
}

/// Iterator over [`Stamps`]; reads a store [`READ_CHUNK`] stamps at a time.
#[derive(Debug)]
pub struct Iter<'a> {
    stamps: &'a Stamps,
    buf: Vec<u64>,
    at: usize,
    next_index: u64,
    error: Option<io::Error>,
}

impl Iter<'_> {
    /// Whether every stamp was read: the store's error if one ended the iteration early.
    pub fn finish(self) -> io::Result<()> {
        self.error.map_or(Ok(()), Err)
    }
}

impl Iterator for Iter<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        match &self.stamps.0 {
            Repr::Mem(v) => {
                let x = v.get(self.at).copied();
                self.at += 1;
                x
            }
            Repr::Stored { store, .. } => {
                if self.at == self.buf.len() {
                    let left = store.len().saturating_sub(self.next_index);
                    if left == 0 || self.error.is_some() {
                        return None;
                    }
                    let n = left.min(READ_CHUNK as u64) as usize;
                    self.buf.resize(n, 0);
                    if let Err(e) = store.read_at(self.next_index, &mut self.buf) {
                        self.error = Some(e);
                        self.buf.clear();
                        self.at = 0;
                        return None;
                    }
                    self.next_index += n as u64;
                    self.at = 0;
                }
                let x = self.buf[self.at];
                self.at += 1;
                Some(x)
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let done = match &self.stamps.0 {
            Repr::Mem(_) => self.at,
            Repr::Stored { .. } => self.next_index as usize - (self.buf.len() - self.at),
        };
        let left = self.stamps.len().saturating_sub(done);
        (0, Some(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A store in memory that can be told to fail.
    #[derive(Debug)]
    struct Held(Vec<u64>, AtomicBool);

    impl StampStore for Held {
        fn len(&self) -> u64 {
            self.0.len() as u64
        }
        fn read_at(&self, index: u64, out: &mut [u64]) -> io::Result<()> {
            if self.1.load(Ordering::Relaxed) {
                return Err(io::Error::other("disk gone"));
            }
            let i = index as usize;
            out.copy_from_slice(&self.0[i..i + out.len()]);
            Ok(())
        }
    }

    fn stored(v: Vec<u64>) -> (Stamps, Arc<Held>) {
        let held = Arc::new(Held(v.clone(), AtomicBool::new(false)));
        let (first, last) = (v.first().copied(), v.last().copied());
        let s = Stamps::stored(held.clone(), first.unwrap_or(0), last.unwrap_or(0));
        (s, held)
    }

    #[test]
    fn a_store_reads_back_across_chunk_edges() {
        let v: Vec<u64> = (0..(2 * READ_CHUNK as u64 + 17)).map(|i| i * 3).collect();
        let (s, _) = stored(v.clone());
        assert_eq!(s.len(), v.len());
        assert_eq!(s.iter().collect::<Vec<_>>(), v);
        assert_eq!(
            (s.first(), s.last()),
            (v.first().copied(), v.last().copied())
        );
        assert_eq!(s, Stamps::from(v));
    }

    #[test]
    fn an_empty_store_has_no_first_or_last() {
        let (s, _) = stored(Vec::new());
        assert_eq!((s.first(), s.last(), s.iter().next()), (None, None, None));
        assert_eq!(s, Stamps::default());
    }

    #[test]
    fn a_failing_store_ends_the_iteration_and_says_so() {
        let (s, held) = stored((0..10).collect());
        held.1.store(true, Ordering::Relaxed);
        let mut it = s.iter();
        assert_eq!(it.by_ref().count(), 0);
        assert_eq!(it.finish().unwrap_err().to_string(), "disk gone");
        assert!(s.to_vec().is_err());
        assert_ne!(s, Stamps::from((0..10).collect::<Vec<u64>>()));
    }

    #[test]
    fn size_hint_counts_what_is_left() {
        let (s, _) = stored((0..10).collect());
        let mut it = s.iter();
        it.next();
        assert_eq!(it.size_hint(), (0, Some(9)));
        let m = Stamps::from(vec![1, 2, 3]);
        let mut it = m.iter();
        it.next();
        assert_eq!(it.size_hint(), (0, Some(2)));
    }
}
