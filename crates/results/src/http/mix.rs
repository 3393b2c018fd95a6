//! What to request, pure: a list of URL paths drawn in turn, or SPECweb96's file set drawn with
//! its class frequencies (35 / 50 / 14 / 1 %), a file within the class by SPECweb96's uneven
//! weights, and a directory uniformly. Draws come from a seeded ChaCha8 stream, so a run's
//! request sequence is reproducible from its seed.

use std::fmt::Write;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::fileset::{FILES_PER_CLASS, FileId, FileSet};

/// Share of requests per class (SPEC, SPECweb96 workload, Table 1).
pub const CLASS_SHARE: [f64; 4] = [0.35, 0.50, 0.14, 0.01];

/// Mean of the within-class weights' Poisson shape, as a 0-based file index: the fifth file
/// of a class is its most requested, the first and last its least. SPEC's page says only that
/// "accesses within a class are not evenly distributed"; this shape is tcplab's stand-in.
pub const WITHIN_CLASS_MEAN: f64 = 4.0;

/// What a run requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mix {
    /// These URL paths, in turn (one path: always that one).
    Paths(Vec<String>),
    /// SPECweb96's file set of this many directories.
    Specweb96 {
        /// Directories of 36 files each.
        dirs: u32,
    },
}

/// One thing to request: the path, and the file it is when it belongs to the SPECweb96 set
/// (its class for the per-class figures, its content for checking the body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// URL path, e.g. `/dir00003/class1_5` or `/index.html`.
    pub path: String,
    /// The file of the set, if the mix is SPECweb96.
    pub file: Option<FileId>,
}

/// The within-class weights, file 1 to 9 (sum 1).
pub fn within_class_weights() -> [f64; FILES_PER_CLASS as usize] {
    let mut w = [0.0; FILES_PER_CLASS as usize];
    let mut p = (-WITHIN_CLASS_MEAN).exp();
    for (i, slot) in w.iter_mut().enumerate() {
        if i > 0 {
            p *= WITHIN_CLASS_MEAN / i as f64;
        }
        *slot = p;
    }
    let sum: f64 = w.iter().sum();
    w.iter_mut().for_each(|x| *x /= sum);
    w
}

/// A seeded stream of targets.
#[derive(Debug)]
pub struct Mixer {
    kind: Kind,
    rng: ChaCha8Rng,
    next: usize,
    /// The last SPECweb96 draw, its path buffer reused (no allocation per request).
    drawn: Target,
}

#[derive(Debug)]
enum Kind {
    Paths(Vec<Target>),
    Specweb96 {
        set: FileSet,
        class_cdf: [f64; 4],
        file_cdf: [f64; FILES_PER_CLASS as usize],
    },
}

impl Mixer {
    /// A stream for `mix`, seeded with `seed`; errors name what is wrong with the mix.
    pub fn new(mix: &Mix, seed: u64) -> Result<Self, String> {
        let kind = match mix {
            Mix::Paths(paths) => {
                if paths.is_empty() {
                    return Err("no URL to request: give a path or a list of them".into());
                }
                for p in paths {
                    check_path(p)?;
                }
                Kind::Paths(
                    paths
                        .iter()
                        .map(|p| Target {
                            path: p.clone(),
                            file: FileId::parse_path(p),
                        })
                        .collect(),
                )
            }
            Mix::Specweb96 { dirs } => Kind::Specweb96 {
                set: FileSet::new(*dirs)?,
                class_cdf: cdf(CLASS_SHARE),
                file_cdf: cdf(within_class_weights()),
            },
        };
        Ok(Self {
            kind,
            rng: ChaCha8Rng::seed_from_u64(seed),
            next: 0,
            drawn: Target {
                path: String::with_capacity(32),
                file: None,
            },
        })
    }

    /// The next target.
    pub fn draw(&mut self) -> &Target {
        match &self.kind {
            Kind::Paths(targets) => {
                let t = &targets[self.next % targets.len()];
                self.next = self.next.wrapping_add(1);
                t
            }
            Kind::Specweb96 {
                set,
                class_cdf,
                file_cdf,
            } => {
                let class = pick(class_cdf, self.rng.random::<f64>()) as u8;
                let index = pick(file_cdf, self.rng.random::<f64>()) as u8 + 1;
                let dir = self.rng.random_range(0..set.dirs());
                let file = FileId { dir, class, index };
                self.drawn.path.clear();
                let _ = write!(self.drawn.path, "{file}");
                self.drawn.file = Some(file);
                &self.drawn
            }
        }
    }
}

/// A path we can put on a request line: absolute, visible ASCII, no spaces.
pub fn check_path(p: &str) -> Result<(), String> {
    if !p.starts_with('/') {
        return Err(format!("URL path {p:?} must start with '/'"));
    }
    if p.len() > 2048 {
        return Err(format!("URL path of {} bytes is over 2048", p.len()));
    }
    if let Some(c) = p.chars().find(|c| !c.is_ascii_graphic()) {
        return Err(format!(
            "URL path {p:?} has {c:?}: percent-encode spaces and non-ASCII characters"
        ));
    }
    Ok(())
}

fn cdf<const N: usize>(w: [f64; N]) -> [f64; N] {
    let mut acc = 0.0;
    let total: f64 = w.iter().sum();
    w.map(|x| {
        acc += x / total;
        acc
    })
}

fn pick(cdf: &[f64], u: f64) -> usize {
    cdf.iter().position(|c| u < *c).unwrap_or(cdf.len() - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specweb96_draws_follow_the_class_shares_and_weights() {
        let n = 1_000_000;
        let mut m = Mixer::new(&Mix::Specweb96 { dirs: 7 }, 42).unwrap();
        let mut class = [0u64; 4];
        let mut file = [[0u64; 9]; 4];
        let mut dirs = [0u64; 7];
        for _ in 0..n {
            let t = m.draw();
            let f = t.file.unwrap();
            assert_eq!(t.path, f.path());
            class[usize::from(f.class)] += 1;
            file[usize::from(f.class)][usize::from(f.index - 1)] += 1;
            dirs[f.dir as usize] += 1;
        }
        // Binomial sd at n = 10^6 is below 0.0005 for every share: 5 sd is 0.0025.
        for (c, share) in CLASS_SHARE.iter().enumerate() {
            let got = class[c] as f64 / n as f64;
            assert!((got - share).abs() < 0.0025, "class {c}: {got}");
        }
        let w = within_class_weights();
        assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(w[4] > w[0] && w[4] > w[8], "{w:?}");
        for k in 0..9 {
            let got = file[1][k] as f64 / class[1] as f64;
            assert!((got - w[k]).abs() < 0.004, "class 1 file {}: {got}", k + 1);
        }
        for d in dirs {
            assert!((d as f64 / n as f64 - 1.0 / 7.0).abs() < 0.003, "{dirs:?}");
        }
    }

    #[test]
    fn a_seed_replays_the_same_requests() {
        let mix = Mix::Specweb96 { dirs: 3 };
        let a: Vec<_> = {
            let mut m = Mixer::new(&mix, 9).unwrap();
            (0..100).map(|_| m.draw().clone()).collect()
        };
        let mut m = Mixer::new(&mix, 9).unwrap();
        assert!(a.iter().all(|t| t == m.draw()));
        let mut other = Mixer::new(&mix, 10).unwrap();
        assert!(a.iter().any(|t| t != other.draw()));
    }

    #[test]
    fn paths_are_taken_in_turn_and_checked() {
        let mix = Mix::Paths(vec!["/a".into(), "/dir00000/class0_1".into()]);
        let mut m = Mixer::new(&mix, 0).unwrap();
        assert_eq!(m.draw().path, "/a");
        let t = m.draw();
        assert_eq!(t.file, FileId::new(0, 0, 1));
        assert_eq!(m.draw().path, "/a");
        assert!(Mixer::new(&Mix::Paths(vec![]), 0).is_err());
        for bad in ["a", "/a b", "/é", "/a\r\nHost: x"] {
            let e = Mixer::new(&Mix::Paths(vec![bad.into()]), 0).unwrap_err();
            assert!(e.contains("URL path"), "{e}");
        }
        assert!(Mixer::new(&Mix::Specweb96 { dirs: 0 }, 0).is_err());
    }
}
