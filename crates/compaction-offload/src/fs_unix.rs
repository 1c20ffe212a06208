//! The file-system store's system calls on Unix: every path under the root is resolved one
//! component at a time from the root's open directory, never following a symbolic link, and
//! files are created exclusively and checked after opening.
//!
//! This is what makes the store impossible to steer: a directory swapped for a link between a
//! check and a write makes the write fail instead of land elsewhere (the link is never
//! followed), a link or hard link planted where a result should be is refused, and a FIFO or
//! device is never opened in a way that blocks.

use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{self as sys, AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

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

impl From<Errno> for Failure {
    fn from(errno: Errno) -> Self {
        Failure::Io(errno.into())
    }
}

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Self {
        Failure::Io(error)
    }
}

/// An open directory of the store.
pub(crate) type Handle = OwnedFd;

const DIRECTORY: OFlags =
    OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

/// Creates `path` (and its parents) if missing and opens it as a directory. The root is the
/// caller's choice, so a link in its own path is followed, once, here.
pub(crate) fn open_root(path: &Path) -> std::io::Result<OwnedFd> {
    if path.exists() && !path.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            "it exists and is not a directory",
        ));
    }
    std::fs::create_dir_all(path)?;
    Ok(sys::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?)
}

/// Writes and removes a scratch file in `root`: a root that cannot be written fails here,
/// before any work.
pub(crate) fn probe(root: &Handle) -> std::io::Result<()> {
    let root = root.as_fd();
    let name = format!(".offload-probe-{}.partial", crate::keys::unique_hex());
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    drop(sys::openat(root, &name, flags, Mode::from_raw_mode(0o600))?);
    Ok(sys::unlinkat(root, &name, AtFlags::empty())?)
}

/// What is at `name` in `dir`, in words, without following a link.
fn describe(dir: BorrowedFd<'_>, name: &str) -> String {
    match sys::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => kind(&stat).to_owned(),
        Err(_) => "not what the store writes".to_owned(),
    }
}

fn kind(stat: &Stat) -> &'static str {
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        FileType::Unknown => "of an unknown kind",
    }
}

/// Opens the directory `name` in `dir` without following a link, creating it when `create`.
fn open_dir(dir: BorrowedFd<'_>, name: &str, create: bool) -> Result<OwnedFd, Failure> {
    let refused = |errno: Errno| match errno {
        // O_NOFOLLOW on a link gives ELOOP, or ENOTDIR with O_DIRECTORY (Linux); O_DIRECTORY on
        // anything else, ENOTDIR: what it is comes from a look that does not follow links.
        Errno::LOOP => Failure::Refused("a symbolic link".to_owned()),
        Errno::NOTDIR => Failure::Refused(match describe(dir, name) {
            // Swapped back since: say what it was when it was opened.
            now if now == "a directory" => "not a directory when it was opened".to_owned(),
            now => now,
        }),
        other => Failure::from(other),
    };
    match sys::openat(dir, name, DIRECTORY, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(Errno::NOENT) if create => {
            match sys::mkdirat(dir, name, Mode::from_raw_mode(0o777)) {
                // Another writer made it first: as good.
                Ok(()) | Err(Errno::EXIST) => {}
                Err(errno) => return Err(errno.into()),
            }
            sys::openat(dir, name, DIRECTORY, Mode::empty()).map_err(refused)
        }
        Err(errno) => Err(refused(errno)),
    }
}

/// The directory `dirs` names under `root`, opened component by component. On failure, how
/// many components were opened before it.
pub(crate) fn open_dirs(root: &Handle, dirs: &[&str], create: bool) -> Result<Handle, (usize, Failure)> {
    let mut current = sys::openat(root, ".", DIRECTORY, Mode::empty()).map_err(|e| (0, e.into()))?;
    for (depth, name) in dirs.iter().enumerate() {
        current = open_dir(current.as_fd(), name, create).map_err(|failure| (depth, failure))?;
    }
    Ok(current)
}

/// Writes `bytes` to the first of `candidates` that is free in `dir` and returns that name.
///
/// The bytes go to a scratch file created exclusively, are synced, and the file is then given
/// its name only if the name is free (`renameat2(RENAME_NOREPLACE)`, or a hard link and an
/// unlink where that is not supported): a reader never sees half a result, and no interleaving
/// of writers ever replaces an entry. A scratch file left by a killed process is named
/// `.offload-*.partial`.
pub(crate) fn write_new(
    dir: &Handle,
    candidates: impl Iterator<Item = String>,
    bytes: &[u8],
) -> Result<String, Failure> {
    let dir = dir.as_fd();
    let scratch = format!(".offload-{}.partial", crate::keys::unique_hex());
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = sys::openat(dir, &scratch, flags, Mode::from_raw_mode(0o644))?;
    let written = (|| -> Result<String, Failure> {
        let mut file = std::fs::File::from(fd);
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        for candidate in candidates {
            match place(dir, &scratch, &candidate) {
                Ok(()) => return Ok(candidate),
                Err(Errno::EXIST) => continue,
                Err(errno) => return Err(errno.into()),
            }
        }
        Err(Failure::Taken)
    })();
    match &written {
        Ok(_) => {
            // The new name is durable once the directory is; not every file system can sync
            // a directory, and the content is already synced, so a failure here is no error.
            let _ = sys::fsync(dir);
        }
        Err(_) => {
            let _ = sys::unlinkat(dir, &scratch, AtFlags::empty());
        }
    }
    written
}

/// Gives `scratch` the name `name` in `dir` unless `name` exists (`EEXIST`).
fn place(dir: BorrowedFd<'_>, scratch: &str, name: &str) -> Result<(), Errno> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    match sys::renameat_with(dir, scratch, dir, name, sys::RenameFlags::NOREPLACE) {
        Ok(()) => return Ok(()),
        // The file system cannot rename without replacing: link and unlink instead.
        Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {}
        Err(errno) => return Err(errno),
    }
    sys::linkat(dir, scratch, dir, name, AtFlags::empty())?;
    if let Err(errno) = sys::unlinkat(dir, scratch, AtFlags::empty()) {
        // A result with two links would be refused on reading; take the new name back.
        let _ = sys::unlinkat(dir, name, AtFlags::empty());
        return Err(errno);
    }
    Ok(())
}

/// Checks that `stat` is a regular file with one link.
fn plain_file(stat: &Stat) -> Result<(), Failure> {
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(Failure::Refused(kind(stat).to_owned()));
    }
    if stat.st_nlink != 1 {
        return Err(Failure::Refused(format!("a file with {} links", stat.st_nlink)));
    }
    Ok(())
}

/// The bytes of the regular file `name` in `dir`, refusing anything else.
///
/// It is checked without following a link before it is opened, opened without following a
/// link and without blocking (a FIFO swapped in between cannot hold the call), and checked
/// again through the open descriptor, which must be the file first checked.
pub(crate) fn read_plain(dir: &Handle, name: &str) -> Result<Vec<u8>, Failure> {
    let dir = dir.as_fd();
    let before = sys::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    plain_file(&before)?;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = sys::openat(dir, name, flags, Mode::empty()).map_err(|errno| match errno {
        Errno::LOOP => Failure::Refused("a symbolic link".into()),
        other => other.into(),
    })?;
    let opened = sys::fstat(&fd)?;
    plain_file(&opened)?;
    if opened.st_ino != before.st_ino || opened.st_dev != before.st_dev {
        return Err(Failure::Refused("a file replaced while it was being opened".into()));
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd).read_to_end(&mut bytes)?;
    Ok(bytes)
}
