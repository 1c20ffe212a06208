//! Writing results: to standard output, or atomically to a file.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

/// Writes `bytes` to `path` atomically (a temporary file beside it, flushed, then renamed), or to
/// standard output when `path` is `None` or `-`. On error an existing file stays as it was.
pub fn write_output(path: Option<&Path>, bytes: &[u8]) -> Result<()> {
    match path {
        None => write_stdout(bytes),
        Some(p) if p.as_os_str() == "-" => write_stdout(bytes),
        Some(path) => write_atomic(path, bytes),
    }
}

fn write_stdout(bytes: &[u8]) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(bytes).and_then(|()| stdout.flush()).context("<stdout>: cannot write")
}

/// Writes a file atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path.display();
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let mut file = tempfile::NamedTempFile::new_in(dir).with_context(|| format!("{name}: cannot create"))?;
    file.write_all(bytes).with_context(|| format!("{name}: cannot write"))?;
    file.as_file().sync_all().with_context(|| format!("{name}: cannot write"))?;
    file.persist(path).map_err(|e| e.error).with_context(|| format!("{name}: cannot write"))?;
    Ok(())
}
