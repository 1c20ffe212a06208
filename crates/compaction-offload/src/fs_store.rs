//! [`FileSystemToolResultStore`]: each result in a file under a root directory, written so that
//! nothing is ever replaced and nothing outside the root is ever touched.

use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

#[cfg(not(unix))]
use crate::fs_portable as sys;
#[cfg(unix)]
use crate::fs_unix as sys;

use crate::error::Error;
use crate::keys::candidate_keys;
use crate::store::{
    AsyncToolResultStore, Content, StoreFuture, StoreProfile, StoredContent, ToolResultStore,
};

/// Writes each result to a file under a root directory; the reference is the file's absolute
/// path, as Haystack's `FileSystemToolResultStore` returns it.
///
/// Beyond the reference, which may replace a file and follows links:
///
/// - **Nothing is replaced.** A result goes to its key when the key is free; otherwise to the
///   first free of [`candidate_keys`](crate::candidate_keys) (`1_read_x_2.txt`, …), created
///   exclusively, so no interleaving of writers sharing the root (threads, runs, processes)
///   replaces a stored result, and the reference returned always names the file holding this
///   result. Writes are atomic: a reader never sees half a result. On Linux a result is
///   written to a file without a name (`O_TMPFILE`) that gets its name once whole, so an
///   interrupted write leaves nothing; elsewhere (or where the file system cannot) it goes
///   through a scratch file named `.offload-*.partial`, which
///   [`remove_scratch_files_before_exit`](crate::remove_scratch_files_before_exit) removes for a
///   program ending on a signal, and which only a SIGKILL can leave.
/// - **Nothing outside the root.** A key or reference that leaves the root (`..`, an absolute
///   path elsewhere) is refused with [`Error::KeyOutsideRoot`] or
///   [`Error::ReferenceOutsideRoot`]. On Unix every path is resolved one component at a time
///   from the root's open directory without following a link, so a directory swapped for a link
///   mid-write makes the write fail rather than land outside ([`Error::Refused`]).
/// - **Only what it wrote is read.** Reading refuses anything that is not a regular file with
///   one link (a planted link, hard link, FIFO or device: [`Error::Refused`]) and never blocks
///   on one.
/// - **Failures come first.** [`FileSystemToolResultStore::new`] creates the root, opens it and
///   writes a scratch file there, so a root that cannot be created or written is an error
///   before any work.
///
/// Both [`ToolResultStore`] (blocking) and [`AsyncToolResultStore`] are implemented. The async
/// operations run the blocking calls on a thread of their own and wake the task when done: no
/// runtime thread ever blocks, and no runtime is tied to the crate, so it works under any
/// executor. Cloning the store is cheap and shares the open root.
#[derive(Clone)]
pub struct FileSystemToolResultStore {
    inner: Arc<Root>,
}

struct Root {
    /// The root as given.
    given: PathBuf,
    /// The root, absolute, as given (not resolved).
    absolute: PathBuf,
    /// The root with every link resolved, which references start with.
    canonical: PathBuf,
    /// The open root directory (its path, where there is no `openat`).
    handle: sys::Handle,
}

impl fmt::Debug for FileSystemToolResultStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileSystemToolResultStore").field("root", &self.inner.canonical).finish()
    }
}

impl PartialEq for FileSystemToolResultStore {
    /// Stores are equal when they write under the same root.
    fn eq(&self, other: &Self) -> bool {
        self.inner.canonical == other.inner.canonical
    }
}

impl Eq for FileSystemToolResultStore {}

/// Where a key or reference points: the directories under the root, and the file name.
struct Location<'a> {
    dirs: Vec<&'a str>,
    name: &'a str,
}

impl FileSystemToolResultStore {
    /// A store writing under `root` (relative roots are taken from the current directory),
    /// which is created if missing, opened, and checked to be writable. This is blocking I/O,
    /// done once; an async program makes its store before it starts serving, or on a blocking
    /// thread.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the root cannot be created, opened or written.
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, Error> {
        let given: PathBuf = root.into();
        let io = |action: &'static str| {
            let path = given.clone();
            move |source| Error::Io { action, path, source }
        };
        let handle = sys::open_root(&given).map_err(io("opening the store root"))?;
        let canonical = std::fs::canonicalize(&given).map_err(io("resolving the store root"))?;
        sys::probe(&handle).map_err(io("writing in the store root"))?;
        let absolute = std::path::absolute(&given).map_err(io("resolving the store root"))?;
        Ok(FileSystemToolResultStore { inner: Arc::new(Root { given, absolute, canonical, handle }) })
    }

    /// The root as given.
    pub fn root(&self) -> &Path {
        &self.inner.given
    }

    /// The root with every link resolved, which every reference starts with.
    pub fn canonical_root(&self) -> &Path {
        &self.inner.canonical
    }

    /// Where `path_like` points under the root, worked out from its text alone: `.` is
    /// dropped, `..` goes up, and an absolute path must start with the root. `outside` is the
    /// error for one that leaves the root.
    fn locate<'a>(&self, path_like: &'a str, outside: impl Fn() -> Error) -> Result<Location<'a>, Error> {
        let invalid = |reason| Error::InvalidKey { key: path_like.to_owned(), reason };
        if path_like.is_empty() {
            return Err(invalid("it is empty"));
        }
        if path_like.contains('\0') {
            return Err(invalid("it contains a NUL character"));
        }
        let path = Path::new(path_like);
        let relative = if path.is_absolute() {
            let root = &self.inner;
            match path.strip_prefix(&root.canonical).or_else(|_| path.strip_prefix(&root.absolute)) {
                Ok(relative) => relative,
                Err(_) => return Err(outside()),
            }
        } else {
            path
        };
        let mut parts: Vec<&'a str> = Vec::new();
        for component in relative.components() {
            match component {
                Component::CurDir => {}
                Component::ParentDir => {
                    if parts.pop().is_none() {
                        return Err(outside());
                    }
                }
                Component::Normal(name) => {
                    parts.push(name.to_str().ok_or_else(|| invalid("it is not UTF-8"))?)
                }
                Component::RootDir | Component::Prefix(_) => return Err(outside()),
            }
        }
        let name = parts.pop().ok_or_else(|| invalid("it names the store root itself"))?;
        Ok(Location { dirs: parts, name })
    }

    /// The path of `dirs` (and `name`) under the root, for messages and references.
    fn path_of(&self, dirs: &[&str], name: Option<&str>) -> PathBuf {
        let mut path = self.inner.canonical.clone();
        path.extend(dirs);
        path.extend(name);
        path
    }

    fn failure(&self, action: &'static str, path: PathBuf, key: &str, failure: sys::Failure) -> Error {
        match failure {
            sys::Failure::Io(source) => Error::Io { action, path, source },
            sys::Failure::Refused(what) => Error::Refused { path, what },
            sys::Failure::Taken => Error::KeysExhausted { key: key.to_owned() },
        }
    }

    fn write_bytes(&self, key: &str, bytes: &[u8]) -> Result<String, Error> {
        let outside = || Error::KeyOutsideRoot { key: key.to_owned(), root: self.inner.canonical.clone() };
        let location = self.locate(key, outside)?;
        let dir = sys::open_dirs(&self.inner.handle, &location.dirs, true).map_err(|(depth, failure)| {
            self.failure("creating directory", self.path_of(upto(&location.dirs, depth), None), key, failure)
        })?;
        let name = sys::write_new(&dir, candidate_keys(location.name), bytes).map_err(|failure| {
            self.failure("writing", self.path_of(&location.dirs, Some(location.name)), key, failure)
        })?;
        Ok(self.path_of(&location.dirs, Some(&name)).to_string_lossy().into_owned())
    }
}

/// The directories through the one at `depth` (where an operation failed).
fn upto<'a, 'b>(dirs: &'b [&'a str], depth: usize) -> &'b [&'a str] {
    &dirs[..(depth + 1).min(dirs.len())]
}

impl ToolResultStore for FileSystemToolResultStore {
    fn write(&self, key: &str, content: Content<'_>) -> Result<String, Error> {
        self.write_bytes(key, content.as_bytes())
    }

    fn read(&self, reference: &str) -> Result<StoredContent, Error> {
        let outside = || Error::ReferenceOutsideRoot {
            reference: reference.to_owned(),
            root: self.inner.canonical.clone(),
        };
        let location = self.locate(reference, outside)?;
        let not_found = |failure: &sys::Failure| matches!(failure, sys::Failure::Io(e) if e.kind() == std::io::ErrorKind::NotFound);
        let dir = sys::open_dirs(&self.inner.handle, &location.dirs, false).map_err(|(depth, failure)| {
            if not_found(&failure) {
                return Error::NotFound(reference.to_owned());
            }
            self.failure("reading", self.path_of(upto(&location.dirs, depth), None), reference, failure)
        })?;
        let bytes = sys::read_plain(&dir, location.name).map_err(|failure| {
            if not_found(&failure) {
                return Error::NotFound(reference.to_owned());
            }
            self.failure("reading", self.path_of(&location.dirs, Some(location.name)), reference, failure)
        })?;
        Ok(StoredContent::from_bytes(bytes))
    }

    fn profile(&self) -> StoreProfile {
        let mut prefix = self.inner.canonical.to_string_lossy().into_owned();
        if !prefix.ends_with(std::path::MAIN_SEPARATOR) {
            prefix.push(std::path::MAIN_SEPARATOR);
        }
        StoreProfile::new().with_binary_content(true).with_reference_prefix(prefix)
    }
}

impl AsyncToolResultStore for FileSystemToolResultStore {
    fn write<'a>(&'a self, key: &'a str, content: Content<'a>) -> StoreFuture<'a, String> {
        // The thread outlives this borrow, so it gets its own copy of the key and the bytes.
        let (store, owned_key, bytes) = (self.clone(), key.to_owned(), content.as_bytes().to_vec());
        Box::pin(crate::blocking::run(key, move || store.write_bytes(&owned_key, &bytes)))
    }

    fn read<'a>(&'a self, reference: &'a str) -> StoreFuture<'a, StoredContent> {
        let (store, owned) = (self.clone(), reference.to_owned());
        Box::pin(crate::blocking::run(reference, move || ToolResultStore::read(&store, &owned)))
    }

    fn profile(&self) -> StoreProfile {
        ToolResultStore::profile(self)
    }
}
