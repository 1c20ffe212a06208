//! Where offloaded tool results go: the [`ToolResultStore`] trait, a file-system store and an
//! in-memory one.

use std::collections::HashMap;
use std::fmt;
use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use serde_json::Value;

use crate::error::Error;
use crate::hook::{init_parameters, invalid};

/// The class path Haystack writes as `type` in `FileSystemToolResultStore.to_dict()`.
pub const HAYSTACK_FILE_SYSTEM_STORE_TYPE: &str =
    "haystack.hooks.tool_result_offloading.stores.FileSystemToolResultStore";

/// Content handed to [`ToolResultStore::write`]: a result's text, or the decoded bytes of an
/// image or file part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content<'a> {
    /// Text, as it stood in the conversation.
    Text(&'a str),
    /// Decoded bytes; only given to a store whose [`ToolResultStore::supports_binary_content`]
    /// is true.
    Bytes(&'a [u8]),
}

/// Content read back from a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredContent {
    /// Text.
    Text(String),
    /// Bytes that are not UTF-8 text, such as an offloaded image.
    Bytes(Vec<u8>),
}

/// Where the offload hook and compactor write tool results, and the read-back tool fetches them.
///
/// `write` returns a reference the conversation carries in place of the result; only the store
/// interprets it, and `read` takes it back unchanged. Implementations must be safe to share
/// between threads; a failed write is an [`Error`] (use [`Error::Store`] for a store's own
/// failures), which the hooks log and survive.
pub trait ToolResultStore: Send + Sync + fmt::Debug {
    /// Persists `content` under `key` (a file-name-like key ending in an extension that fits the
    /// content) and returns its reference.
    fn write(&self, key: &str, content: Content<'_>) -> Result<String, Error>;

    /// The content written under `reference`.
    fn read(&self, reference: &str) -> Result<StoredContent, Error>;

    /// Whether the store takes bytes. When false, results with image or file parts stay in the
    /// conversation. Defaults to false.
    fn supports_binary_content(&self) -> bool {
        false
    }
}

/// Writes each result to a file under a root directory; the reference is the file's absolute
/// path, as Haystack's `FileSystemToolResultStore` returns it.
///
/// The root is created on first write. A key or reference that resolves outside the root (with
/// `..`, as an absolute path elsewhere, or through a symbolic link pointing out) is refused with
/// [`Error::KeyOutsideRoot`] or [`Error::ReferenceOutsideRoot`]. Writes are atomic: the content
/// goes to a temporary file in the target's directory, is flushed to disk, and is renamed into
/// place, so a crash never leaves a half-written result under the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSystemToolResultStore {
    root: PathBuf,
}

impl FileSystemToolResultStore {
    /// A store writing under `root` (relative roots are taken from the current directory).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FileSystemToolResultStore { root: root.into() }
    }

    /// The root as given.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Reads the store from `{"root": ...}` or Haystack's `to_dict` form.
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        let params = init_parameters(value, HAYSTACK_FILE_SYSTEM_STORE_TYPE)?;
        let root =
            params.get("root").and_then(Value::as_str).ok_or_else(|| invalid("root", "expected a path"))?;
        Ok(FileSystemToolResultStore::new(root))
    }

    /// The store in Haystack's `to_dict` form.
    pub fn to_haystack_value(&self) -> Value {
        serde_json::json!({
            "type": HAYSTACK_FILE_SYSTEM_STORE_TYPE,
            "init_parameters": {"root": self.root.to_string_lossy()},
        })
    }

    fn resolve_in_root(&self, path_like: &str) -> Result<(PathBuf, PathBuf, bool), Error> {
        let root = resolve(&self.root)?;
        let path = Path::new(path_like);
        let candidate = if path.is_absolute() { path.to_path_buf() } else { root.join(path) };
        let resolved = resolve(&candidate)?;
        let inside = resolved.starts_with(&root);
        Ok((root, resolved, inside))
    }
}

impl ToolResultStore for FileSystemToolResultStore {
    fn write(&self, key: &str, content: Content<'_>) -> Result<String, Error> {
        let (root, path, inside) = self.resolve_in_root(key)?;
        if !inside {
            return Err(Error::KeyOutsideRoot { key: key.to_owned(), root });
        }
        let bytes = match content {
            Content::Text(text) => text.as_bytes(),
            Content::Bytes(bytes) => bytes,
        };
        write_atomically(&path, bytes)?;
        Ok(path.to_string_lossy().into_owned())
    }

    fn read(&self, reference: &str) -> Result<StoredContent, Error> {
        let (root, path, inside) = self.resolve_in_root(reference)?;
        if !inside {
            return Err(Error::ReferenceOutsideRoot { reference: reference.to_owned(), root });
        }
        let bytes = std::fs::read(&path).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                Error::NotFound(reference.to_owned())
            } else {
                Error::Io { action: "reading", path: path.clone(), source }
            }
        })?;
        Ok(match String::from_utf8(bytes) {
            Ok(text) => StoredContent::Text(text),
            Err(e) => StoredContent::Bytes(e.into_bytes()),
        })
    }

    fn supports_binary_content(&self) -> bool {
        true
    }
}

/// Writes `bytes` to `path` through a temporary sibling that is synced and renamed into place.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let io = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { action, path, source }
    };
    let parent = path.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(parent).map_err(io("creating directory", parent))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temp = parent.join(format!(".{name}.{}.tmp", crate::keys::unique_hex()));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(io("creating", &temp))?;
        file.write_all(bytes).map_err(io("writing", &temp))?;
        file.sync_all().map_err(io("syncing", &temp))?;
        std::fs::rename(&temp, path).map_err(io("renaming into place", path))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
        return result;
    }
    // The rename is durable only once the directory entry is; not every platform can sync a
    // directory, and the content itself is already safe, so a failure here is not an error.
    if let Ok(dir) = std::fs::File::open(parent) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// An absolute form of `path` with every `.`, `..` and symbolic link resolved, as Python's
/// non-strict `Path.resolve` does: components that do not exist are taken as written.
fn resolve(path: &Path) -> Result<PathBuf, Error> {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        let cwd = std::env::current_dir().map_err(|source| Error::Io {
            action: "finding the current directory for",
            path: path.into(),
            source,
        })?;
        cwd.join(path)
    };
    let mut hops = 0;
    resolve_from(PathBuf::new(), &absolute, &mut hops)
}

fn resolve_from(mut current: PathBuf, rest: &Path, hops: &mut usize) -> Result<PathBuf, Error> {
    for component in rest.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => current.push(component.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                current.pop();
            }
            Component::Normal(name) => {
                let next = current.join(name);
                match std::fs::symlink_metadata(&next) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        *hops += 1;
                        if *hops > 40 {
                            return Err(Error::Io {
                                action: "resolving",
                                path: next,
                                source: std::io::Error::other("too many levels of symbolic links"),
                            });
                        }
                        let target = std::fs::read_link(&next).map_err(|source| Error::Io {
                            action: "reading link",
                            path: next.clone(),
                            source,
                        })?;
                        current = if target.is_absolute() {
                            resolve_from(PathBuf::new(), &target, hops)?
                        } else {
                            resolve_from(current, &target, hops)?
                        };
                    }
                    _ => current = next,
                }
            }
        }
    }
    Ok(current)
}

/// Keeps results in memory, keyed by their store key; the reference is the key itself. Takes
/// binary content.
#[derive(Debug, Default)]
pub struct InMemoryToolResultStore {
    entries: Mutex<HashMap<String, StoredContent>>,
}

impl InMemoryToolResultStore {
    /// An empty store.
    pub fn new() -> Self {
        InMemoryToolResultStore::default()
    }

    /// The references written so far, sorted.
    pub fn references(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.lock().keys().cloned().collect();
        keys.sort();
        keys
    }

    /// How many entries the store holds.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, StoredContent>> {
        // A panic while holding the lock cannot leave a map half-updated, so a poisoned lock is
        // still usable.
        self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl ToolResultStore for InMemoryToolResultStore {
    fn write(&self, key: &str, content: Content<'_>) -> Result<String, Error> {
        let stored = match content {
            Content::Text(text) => StoredContent::Text(text.to_owned()),
            Content::Bytes(bytes) => StoredContent::Bytes(bytes.to_vec()),
        };
        self.lock().insert(key.to_owned(), stored);
        Ok(key.to_owned())
    }

    fn read(&self, reference: &str) -> Result<StoredContent, Error> {
        self.lock().get(reference).cloned().ok_or_else(|| Error::NotFound(reference.to_owned()))
    }

    fn supports_binary_content(&self) -> bool {
        true
    }
}
