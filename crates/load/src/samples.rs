//! Raw samples file (`--samples FILE`): the format, its writer to any `Write` and its parser
//! are `tcplab_results::samples` (docs/samples.md); this module writes the file.

use std::io::{BufWriter, Write};
use std::path::Path;

use crate::error::{LoadError, Result};
use crate::report::Report;
pub use tcplab_results::samples::*;

/// Writes every raw sample of `report` to `path`.
pub fn write_file(path: &Path, report: &Report) -> Result<()> {
    let err = |source| LoadError::Samples {
        path: path.display().to_string(),
        source,
    };
    let file = std::fs::File::create(path).map_err(err)?;
    let mut w = BufWriter::new(file);
    write(&mut w, report).and_then(|()| w.flush()).map_err(err)
}
