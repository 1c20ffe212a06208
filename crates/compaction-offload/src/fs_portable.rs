//! The file-system store's operations where there is no `openat` (not Unix), with the standard
//! library alone.
//!
//! It keeps the rules it can: every component under the root is checked not to be a link
//! before it is used, files are created exclusively (a hard link, or an exclusive create where
//! links are not supported), and only regular files are read. Without descriptor-relative
//! calls the checks and the uses are separate steps, so a link swapped in between them is not
//! caught here as it is on Unix.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::scratch::Scratch;

/// Why an operation failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The system said no.
    Io(std::io::Error),
    /// Something is there that the store does not write; what it is.
    Refused(String),
    /// Every candidate name was taken.
    Taken,
}

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Self {
        Failure::Io(error)
    }
}

/// A directory of the store, by path.
pub(crate) type Handle = PathBuf;

fn kind(meta: &std::fs::Metadata) -> &'static str {
    let kind = meta.file_type();
    if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// Creates `path` (and its parents) if missing.
pub(crate) fn open_root(path: &Path) -> std::io::Result<Handle> {
    if path.exists() && !path.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            "it exists and is not a directory",
        ));
    }
    std::fs::create_dir_all(path)?;
    Ok(path.to_path_buf())
}

/// Writes and removes a scratch file in `root`.
pub(crate) fn probe(root: &Handle) -> std::io::Result<()> {
    let path = root.join(format!(".offload-probe-{}.partial", crate::keys::unique_hex()));
    let _scratch = register(&path);
    drop(std::fs::OpenOptions::new().write(true).create_new(true).open(&path)?);
    std::fs::remove_file(path)
}

/// The directory `dirs` names under `root`, each component checked not to be a link.
pub(crate) fn open_dirs(root: &Handle, dirs: &[&str], create: bool) -> Result<Handle, (usize, Failure)> {
    let mut current = root.clone();
    for (depth, name) in dirs.iter().enumerate() {
        current.push(name);
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.is_dir() => {}
            Ok(meta) => return Err((depth, Failure::Refused(kind(&meta).to_owned()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
                match std::fs::create_dir(&current) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err((depth, e.into())),
                }
            }
            Err(e) => return Err((depth, e.into())),
        }
    }
    Ok(current)
}

/// Writes `bytes` to the first of `candidates` that is free in `dir` and returns that name.
pub(crate) fn write_new(
    dir: &Handle,
    candidates: impl Iterator<Item = String>,
    bytes: &[u8],
) -> Result<String, Failure> {
    let scratch = dir.join(format!(".offload-{}.partial", crate::keys::unique_hex()));
    let registered = register(&scratch);
    let written = (|| -> Result<String, Failure> {
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&scratch)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        for candidate in candidates {
            match registered.place(|| std::fs::hard_link(&scratch, dir.join(&candidate))) {
                Ok(()) => return Ok(candidate),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(Failure::Taken)
    })();
    let _ = std::fs::remove_file(&scratch);
    drop(registered);
    written
}

/// Registers the scratch file at `path` (see [`crate::scratch`]), to be removed should the
/// process end on a signal.
fn register(path: &Path) -> Scratch {
    let path = path.to_path_buf();
    Scratch::register(Box::new(move || {
        let _ = std::fs::remove_file(&path);
    }))
}

/// The bytes of the regular file `name` in `dir`, refusing anything else.
pub(crate) fn read_plain(dir: &Handle, name: &str) -> Result<Vec<u8>, Failure> {
    let path = dir.join(name);
    let meta = std::fs::symlink_metadata(&path)?;
    if !meta.is_file() {
        return Err(Failure::Refused(kind(&meta).to_owned()));
    }
    Ok(std::fs::read(path)?)
}
