//! Writing results: to standard output, or atomically to a file.

use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};

/// Writes `bytes` to `path` atomically (a temporary file beside it, flushed, then renamed), or to
/// standard output when `path` is `None` or `-`. On error an existing file stays as it was.
pub fn write_output(path: Option<&Path>, bytes: &[u8]) -> Result<()> {
    write_output_with(path, |out| Ok(out.write_all(bytes)?))
}

/// As [`write_output`], with the content produced by `write` into a buffered writer, so a large
/// output is never held in memory whole.
pub fn write_output_with(
    path: Option<&Path>,
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    match path {
        Some(path) if path.as_os_str() != "-" => write_atomic_with(path, write),
        _ => {
            let mut stdout = BufWriter::with_capacity(BUFFER, std::io::stdout().lock());
            write(&mut stdout).and_then(|()| Ok(stdout.flush()?)).context("<stdout>: cannot write")
        }
    }
}

/// The write buffer: large enough that a big output goes out in few system calls.
const BUFFER: usize = 1 << 20;

/// Writes a file atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |out| Ok(out.write_all(bytes)?))
}

fn write_atomic_with(path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let name = path.display();
    // A device or pipe (`/dev/stdout`, a FIFO) cannot be replaced by renaming a file onto it:
    // that would swap the device for a regular file. Write to it directly.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .with_context(|| format!("{name}: cannot open"))?;
        let mut out = BufWriter::with_capacity(BUFFER, file);
        return write(&mut out)
            .and_then(|()| Ok(out.flush()?))
            .with_context(|| format!("{name}: cannot write"));
    }
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let mut file = tempfile::NamedTempFile::new_in(dir).with_context(|| format!("{name}: cannot create"))?;
    {
        let mut out = BufWriter::with_capacity(BUFFER, file.as_file_mut());
        write(&mut out).and_then(|()| Ok(out.flush()?)).with_context(|| format!("{name}: cannot write"))?;
    }
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
