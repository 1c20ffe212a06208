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

/// Makes and removes a scratch file in `root`: a root that cannot be written fails here,
/// before any work. On Linux the file has no name (nothing to leave behind), where the file
/// system allows it.
pub(crate) fn probe(root: &Handle) -> std::io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    match unnamed_file(root.as_fd()) {
        Ok(Some(file)) => {
            drop(file);
            return Ok(());
        }
        Ok(None) => {}
        Err(errno) => return Err(errno.into()),
    }
    let name = format!(".offload-probe-{}.partial", crate::keys::unique_hex());
    let _scratch = register(root, &name)?;
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    drop(sys::openat(root, &name, flags, Mode::from_raw_mode(0o600))?);
    Ok(sys::unlinkat(root, &name, AtFlags::empty())?)
}

/// Registers the scratch file `name` in `dir` (see [`crate::scratch`]), to be removed through a
/// descriptor of its own should the process end on a signal.
fn register(dir: &Handle, name: &str) -> std::io::Result<Scratch> {
    let dir = dir.try_clone()?;
    let name = name.to_owned();
    Ok(Scratch::register(Box::new(move || {
        let _ = sys::unlinkat(&dir, &name, AtFlags::empty());
    })))
}

/// An unnamed regular file in `dir` (`O_TMPFILE`), mode 0644 less the umask; `None` where the
/// kernel or the file system has none.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn unnamed_file(dir: BorrowedFd<'_>) -> Result<Option<std::fs::File>, Errno> {
    let flags = OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC;
    match sys::openat(dir, ".", flags, Mode::from_raw_mode(0o644)) {
        Ok(fd) => Ok(Some(std::fs::File::from(fd))),
        // EOPNOTSUPP: the file system has no unnamed files; EISDIR or EINVAL: the kernel does
        // not know O_TMPFILE (before 3.11), and opened or refused the directory itself.
        Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL | Errno::NOSYS) => Ok(None),
        Err(errno) => Err(errno),
    }
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
/// The bytes go to a scratch file, are synced, and the file is then given its name only if the
/// name is free: a reader never sees half a result, and no interleaving of writers ever
/// replaces an entry. On Linux the scratch file has no name (`O_TMPFILE`, then `linkat`, which
/// fails on a taken name), so nothing is left behind whatever ends the process. Elsewhere, or
/// where the file system or `/proc` does not allow that, it is named `.offload-*.partial` and
/// created exclusively, then renamed (`renameat2(RENAME_NOREPLACE)`, or a hard link and an
/// unlink where that is not supported); it is registered meanwhile, so that a program ending on
/// a signal removes it ([`crate::remove_scratch_files_before_exit`]), and only a SIGKILL can
/// leave one.
pub(crate) fn write_new(
    dir: &Handle,
    candidates: impl Iterator<Item = String>,
    bytes: &[u8],
) -> Result<String, Failure> {
    let mut candidates = candidates;
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Some(name) = write_unnamed(dir.as_fd(), &mut candidates, bytes)? {
        return Ok(name);
    }
    write_named(dir, candidates, bytes)
}

/// [`write_new`] through an unnamed file; `None` where unnamed files cannot be made or given a
/// name here (the caller then writes a named scratch file, trying the candidates not yet tried).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn write_unnamed(
    dir: BorrowedFd<'_>,
    candidates: &mut dyn Iterator<Item = String>,
    bytes: &[u8],
) -> Result<Option<String>, Failure> {
    use std::os::fd::AsRawFd;
    let Some(mut file) = unnamed_file(dir)? else {
        return Ok(None);
    };
    file.write_all(bytes)?;
    file.sync_all()?;
    // Linking the descriptor through /proc needs no privilege; linking it directly
    // (`AT_EMPTY_PATH`) does before Linux 6.10, and is only tried where /proc is missing.
    let through_proc = format!("/proc/self/fd/{}", file.as_raw_fd());
    for candidate in candidates {
        let linked = match sys::linkat(
            sys::CWD,
            through_proc.as_str(),
            dir,
            candidate.as_str(),
            AtFlags::SYMLINK_FOLLOW,
        ) {
            Err(Errno::NOENT) => sys::linkat(&file, "", dir, candidate.as_str(), AtFlags::EMPTY_PATH),
            linked => linked,
        };
        match linked {
            Ok(()) => {
                // The new name is durable once the directory is; not every file system can
                // sync a directory, and the content is already synced.
                let _ = sys::fsync(dir);
                return Ok(Some(candidate));
            }
            Err(Errno::EXIST) => continue,
            // No /proc and no privilege to link a descriptor: a named scratch file instead.
            Err(Errno::NOENT | Errno::PERM) => return Ok(None),
            Err(errno) => return Err(errno.into()),
        }
    }
    Err(Failure::Taken)
}

/// [`write_new`] through a scratch file named `.offload-*.partial`, registered while it exists.
fn write_named(
    dir: &Handle,
    candidates: impl Iterator<Item = String>,
    bytes: &[u8],
) -> Result<String, Failure> {
    let scratch = format!(".offload-{}.partial", crate::keys::unique_hex());
    let registered = register(dir, &scratch)?;
    let dir = dir.as_fd();
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = sys::openat(dir, &scratch, flags, Mode::from_raw_mode(0o644))?;
    let written = (|| -> Result<String, Failure> {
        let mut file = std::fs::File::from(fd);
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        for candidate in candidates {
            match registered.place(|| place(dir, &scratch, &candidate)) {
                Ok(()) => return Ok(candidate),
                Err(Errno::EXIST) => continue,
                Err(errno) => return Err(errno.into()),
            }
        }
        Err(Failure::Taken)
    })();
    match &written {
        Ok(_) => {
            let _ = sys::fsync(dir);
        }
        Err(_) => {
            let _ = sys::unlinkat(dir, &scratch, AtFlags::empty());
        }
    }
    drop(registered);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("listed")
            .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn candidates(key: &str) -> impl Iterator<Item = String> + use<'_> {
        crate::keys::candidate_keys(key)
    }

    /// Both ways of writing (unnamed on Linux, named elsewhere and as the fallback) take the
    /// first free name, replace nothing, leave one link and no scratch file, and lose nothing
    /// when eight threads write under one key at once.
    #[test]
    fn writes_take_a_free_name_and_leave_no_scratch_file() {
        type Write = fn(&Handle, &mut dyn Iterator<Item = String>, &[u8]) -> Result<String, Failure>;
        let ways: [(&str, Write); 2] = [
            ("write_new", |dir, candidates, bytes| write_new(dir, candidates, bytes)),
            ("write_named", |dir, candidates, bytes| write_named(dir, candidates, bytes)),
        ];
        for (way, write) in ways {
            let temp = tempfile::tempdir().expect("temp dir");
            let root = open_root(temp.path()).expect("root");
            std::fs::write(temp.path().join("1_read_x.txt"), b"earlier").expect("planted");
            let name = write(&root, &mut candidates("1_read_x.txt"), b"later")
                .map_err(|e| format!("{e:?}"))
                .unwrap();
            assert_eq!(name, "1_read_x_2.txt", "{way}");
            assert_eq!(std::fs::read(temp.path().join("1_read_x.txt")).expect("read"), b"earlier");
            assert_eq!(read_plain(&root, &name).map_err(|e| format!("{e:?}")).unwrap(), b"later", "{way}");
            let threads: Vec<_> = (0..8)
                .map(|i| {
                    let root = root.try_clone().expect("dup");
                    std::thread::spawn(move || {
                        let text = format!("thread {i}");
                        let name = write(&root, &mut candidates("same.txt"), text.as_bytes())
                            .map_err(|e| format!("{e:?}"))
                            .unwrap();
                        (name, text)
                    })
                })
                .collect();
            for thread in threads {
                let (name, text) = thread.join().expect("thread");
                assert_eq!(
                    read_plain(&root, &name).map_err(|e| format!("{e:?}")).unwrap(),
                    text.as_bytes(),
                    "{way}"
                );
            }
            let listed = names(temp.path());
            assert_eq!(listed.len(), 10, "{way}: {listed:?}");
            assert!(listed.iter().all(|n| !n.starts_with('.')), "{way} left a scratch file: {listed:?}");
        }
    }

    /// A named scratch file is registered from before it exists until it is placed or gone, and
    /// its registered removal (what a signal handler runs) removes it through the directory's
    /// own descriptor.
    #[test]
    fn a_named_scratch_file_is_registered_and_removed_on_request() {
        let temp = tempfile::tempdir().expect("temp dir");
        let root = open_root(temp.path()).expect("root");
        let name = ".offload-test.partial";
        let scratch = register(&root, name).expect("registered");
        assert!(scratch.is_registered());
        std::fs::write(temp.path().join(name), b"half a result").expect("scratch");
        // The directory is renamed meanwhile: the removal still finds the file.
        let moved = temp.path().with_extension("moved");
        std::fs::rename(temp.path(), &moved).expect("renamed");
        scratch.remove_now();
        assert!(names(&moved).is_empty(), "{:?}", names(&moved));
        std::fs::rename(&moved, temp.path()).expect("renamed back");
        drop(scratch);
    }

    /// The probe leaves nothing, whichever way it writes.
    #[test]
    fn the_probe_leaves_nothing() {
        let temp = tempfile::tempdir().expect("temp dir");
        let root = open_root(temp.path()).expect("root");
        probe(&root).expect("writable");
        assert!(names(temp.path()).is_empty());
    }
}
