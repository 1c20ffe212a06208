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
    set_final_permissions(file.as_file(), path).with_context(|| format!("{name}: cannot write"))?;
    file.as_file().sync_all().with_context(|| format!("{name}: cannot write"))?;
    file.persist(path).map_err(|e| e.error).with_context(|| format!("{name}: cannot write"))?;
    Ok(())
}

/// Gives the temporary file the permissions of the file it replaces, or 0644 for a new one (a
/// temporary file starts private, 0600).
#[cfg(unix)]
fn set_final_permissions(file: &std::fs::File, path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let permissions = match std::fs::metadata(path) {
        Ok(existing) => existing.permissions(),
        Err(_) => std::fs::Permissions::from_mode(0o644),
    };
    file.set_permissions(permissions)
}

#[cfg(not(unix))]
fn set_final_permissions(_file: &std::fs::File, _path: &Path) -> std::io::Result<()> {
    Ok(())
}
