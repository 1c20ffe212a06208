//! Where offloaded tool results go: the [`ToolResultStore`] trait and its async sibling
//! [`AsyncToolResultStore`], what deciding needs to know of a store ([`StoreProfile`]), and the
//! in-memory store.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use crate::error::Error;
use crate::keys::candidate_keys;

/// Content handed to a store's `write`: a result's text, or the decoded bytes of an image or
/// file part.
///
/// Deliberately exhaustive: content is text or bytes, and there is no third kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content<'a> {
    /// Text, as it stood in the conversation.
    Text(&'a str),
    /// Decoded bytes; only given to a store whose profile says it takes binary content.
    Bytes(&'a [u8]),
}

impl Content<'_> {
    /// The bytes to store: the text's UTF-8, or the bytes themselves.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Content::Text(text) => text.as_bytes(),
            Content::Bytes(bytes) => bytes,
        }
    }
}

/// Content read back from a store.
///
/// Deliberately exhaustive: content is text or bytes, and there is no third kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredContent {
    /// Text.
    Text(String),
    /// Bytes that are not UTF-8 text, such as an offloaded image.
    Bytes(Vec<u8>),
}

impl StoredContent {
    /// Text when `bytes` are UTF-8, else the bytes, as the reference's file-system store reads.
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        match String::from_utf8(bytes) {
            Ok(text) => StoredContent::Text(text),
            Err(e) => StoredContent::Bytes(e.into_bytes()),
        }
    }
}

/// What deciding to offload needs to know of a store, with no I/O: whether it takes binary
/// content, and the reference it gives back for a key that is free.
///
/// The offload compactor counts each pointer before anything is written, and a pointer quotes
/// its reference; the expected reference lets that count be the count of the pointer the
/// conversation will hold. When the store gives back another reference (the key was taken, so
/// it chose another), the pointer is built from the reference actually given and counted again.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoreProfile {
    binary: bool,
    reference_prefix: String,
}

impl StoreProfile {
    /// A text-only store whose references are its keys.
    pub fn new() -> Self {
        StoreProfile::default()
    }

    /// The same profile, taking binary content or not.
    #[must_use]
    pub fn with_binary_content(mut self, supported: bool) -> Self {
        self.binary = supported;
        self
    }

    /// The same profile, with references that are `prefix` followed by the key (the file-system
    /// store's are its root's path and a separator).
    #[must_use]
    pub fn with_reference_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.reference_prefix = prefix.into();
        self
    }

    /// Whether the store takes bytes. When false, results with image or file parts stay in the
    /// conversation.
    pub fn supports_binary_content(&self) -> bool {
        self.binary
    }

    /// The reference a write under `key` gives back when `key` is free.
    pub fn expected_reference(&self, key: &str) -> String {
        format!("{}{key}", self.reference_prefix)
    }
}

/// Where the offload hook and compactor write tool results, and the read-back tool fetches them;
/// blocking. See [`AsyncToolResultStore`] for the async sibling.
///
/// `write` returns a reference the conversation carries in place of the result; only the store
/// interprets it, and `read` takes it back unchanged. A store never replaces an entry: when the
/// key is taken (by an earlier result, another run or another process sharing the store) it
/// writes under another key ([`candidate_keys`](crate::candidate_keys) gives the usual ones) and
/// returns the reference of the entry that holds this content. Implementations must be safe to
/// share between threads; a failed write is an [`Error`] (use [`Error::Store`] for a store's own
/// failures), which the offloaders return to their caller with the result left in context.
pub trait ToolResultStore: Send + Sync + fmt::Debug {
    /// Persists `content` under `key` (a file-name-like key ending in an extension that fits the
    /// content), or under another free key when `key` is taken, and returns its reference.
    fn write(&self, key: &str, content: Content<'_>) -> Result<String, Error>;

    /// The content written under `reference`.
    fn read(&self, reference: &str) -> Result<StoredContent, Error>;

    /// What deciding needs to know of the store. Defaults to a text-only store whose references
    /// are its keys.
    fn profile(&self) -> StoreProfile {
        StoreProfile::new()
    }
}

/// A future returned by an [`AsyncToolResultStore`] operation.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'a>>;

/// A [`ToolResultStore`] for async callers: the same contract, with operations that never block
/// the calling thread. Object safe: the futures are boxed.
pub trait AsyncToolResultStore: Send + Sync + fmt::Debug {
    /// Persists `content` under `key`, or under another free key when `key` is taken, and
    /// returns its reference.
    fn write<'a>(&'a self, key: &'a str, content: Content<'a>) -> StoreFuture<'a, String>;

    /// The content written under `reference`.
    fn read<'a>(&'a self, reference: &'a str) -> StoreFuture<'a, StoredContent>;

    /// What deciding needs to know of the store; no I/O.
    fn profile(&self) -> StoreProfile {
        StoreProfile::new()
    }
}

macro_rules! forward_store {
    ($($wrapper:ty),*) => {$(
        impl<T: ToolResultStore + ?Sized> ToolResultStore for $wrapper {
            fn write(&self, key: &str, content: Content<'_>) -> Result<String, Error> {
                (**self).write(key, content)
            }
            fn read(&self, reference: &str) -> Result<StoredContent, Error> {
                (**self).read(reference)
            }
            fn profile(&self) -> StoreProfile {
                (**self).profile()
            }
        }

        impl<T: AsyncToolResultStore + ?Sized> AsyncToolResultStore for $wrapper {
            fn write<'a>(&'a self, key: &'a str, content: Content<'a>) -> StoreFuture<'a, String> {
                (**self).write(key, content)
            }
            fn read<'a>(&'a self, reference: &'a str) -> StoreFuture<'a, StoredContent> {
                (**self).read(reference)
            }
            fn profile(&self) -> StoreProfile {
                (**self).profile()
            }
        }
    )*};
}

forward_store!(&T, Arc<T>, Box<T>);

/// Keeps results in memory, keyed by their store key; the reference is the key itself. Takes
/// binary content. A key already held gets a numbered sibling, so nothing is replaced.
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
        let mut entries = self.lock();
        let free = candidate_keys(key).find(|candidate| !entries.contains_key(candidate));
        let free = free.ok_or_else(|| Error::KeysExhausted { key: key.to_owned() })?;
        entries.insert(free.clone(), stored);
        Ok(free)
    }

    fn read(&self, reference: &str) -> Result<StoredContent, Error> {
        self.lock().get(reference).cloned().ok_or_else(|| Error::NotFound(reference.to_owned()))
    }

    fn profile(&self) -> StoreProfile {
        StoreProfile::new().with_binary_content(true)
    }
}

impl AsyncToolResultStore for InMemoryToolResultStore {
    fn write<'a>(&'a self, key: &'a str, content: Content<'a>) -> StoreFuture<'a, String> {
        // Memory never blocks for long: the work is done here and the future is ready.
        let result = ToolResultStore::write(self, key, content);
        Box::pin(std::future::ready(result))
    }

    fn read<'a>(&'a self, reference: &'a str) -> StoreFuture<'a, StoredContent> {
        let result = ToolResultStore::read(self, reference);
        Box::pin(std::future::ready(result))
    }

    fn profile(&self) -> StoreProfile {
        ToolResultStore::profile(self)
    }
}
