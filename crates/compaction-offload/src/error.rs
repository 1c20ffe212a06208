//! The one error type of compaction-offload: settings that cannot be used, and store operations
//! that failed.

use std::path::PathBuf;

/// What can go wrong in this crate.
///
/// Settings errors come from constructors and readers; store errors from the
/// [`ToolResultStore`](crate::ToolResultStore) operations. Offloading itself never stops on a
/// store error: the result stays in context and the error is returned to the caller in the
/// outcome, with the key it was written under.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `min_keep_steps` of the offload compactor was below 1.
    #[error("`min_keep_steps` must be at least 1, got {0}: the newest tool-calling step is always kept")]
    MinKeepStepsTooSmall(i128),
    /// A setting had a value of the wrong kind or out of range.
    #[error("setting `{key}` is invalid: {reason}")]
    InvalidSetting {
        /// The setting's name.
        key: String,
        /// What is wrong with its value.
        reason: String,
    },
    /// Serialized settings named a component (compactor, store, policy) this crate cannot build.
    #[error("`{key}` names `{type_name}`, which this crate cannot build")]
    UnsupportedComponent {
        /// Where the component sat, such as `store`.
        key: String,
        /// The `type` it carried.
        type_name: String,
    },
    /// The settings could not be read: not an object, a key the class does not take, a value of
    /// the wrong kind, a missing required value (compaction-core's reader, which every crate
    /// shares).
    #[error(transparent)]
    Settings(#[from] compaction_core::Error),
    /// The compaction hook rejected its settings.
    #[error("hook settings")]
    Hook(#[from] compaction_hook::Error),
    /// A store key resolved to a location outside the store root.
    #[error("result key {key:?} resolves outside the store root {}", root.display())]
    KeyOutsideRoot {
        /// The key given.
        key: String,
        /// The store root, resolved.
        root: PathBuf,
    },
    /// A store reference resolved to a location outside the store root.
    #[error("result reference {reference:?} resolves outside the store root {}", root.display())]
    ReferenceOutsideRoot {
        /// The reference given.
        reference: String,
        /// The store root, resolved.
        root: PathBuf,
    },
    /// A key or reference that names no file, such as the empty string or the root itself.
    #[error("{key:?} is not a usable store key: {reason}")]
    InvalidKey {
        /// The key or reference given.
        key: String,
        /// Why it cannot be used.
        reason: &'static str,
    },
    /// A file-system operation of the store failed.
    #[error("{action} {}", path.display())]
    Io {
        /// What the store was doing, such as `writing`.
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Something in the store that is not what the store writes: a symbolic link, a FIFO, a
    /// device, a directory where a file belongs, or a file with more than one link. The store
    /// neither follows nor opens it.
    #[error("refusing {}: it is {what}", path.display())]
    Refused {
        /// The path involved.
        path: PathBuf,
        /// What was found there.
        what: String,
    },
    /// Every key the store tried for a write was taken.
    #[error("no free key for {key:?}: every candidate is taken")]
    KeysExhausted {
        /// The key asked for.
        key: String,
    },
    /// A text-only store was given bytes.
    #[error("store cannot hold binary content (key {key:?})")]
    BinaryNotSupported {
        /// The key of the rejected write.
        key: String,
    },
    /// No entry exists under the reference.
    #[error("no stored result at {0:?}")]
    NotFound(String),
    /// An image or file part's base64 payload could not be decoded.
    #[error("part {position} of the result of `{tool_name}` is not valid base64")]
    InvalidBase64 {
        /// The tool that produced the result.
        tool_name: String,
        /// The part's position in the result, from 0.
        position: usize,
        /// Why decoding failed, as Python would say it.
        #[source]
        source: compaction_model::Base64Error,
    },
    /// A hook or compactor made without a store was asked to write; use its plan, or pass a
    /// store.
    #[error("no store to write {key:?} to: this offloader was made without one")]
    NoStore {
        /// The key of the write.
        key: String,
    },
    /// The thread running a file-system operation for an async caller stopped before answering.
    #[error("the store's worker thread stopped before it finished with {key:?}")]
    WorkerStopped {
        /// The key or reference involved.
        key: String,
    },
    /// A store implemented outside this crate failed, with its own error (a message will do:
    /// `"disk full".into()`).
    #[error("store failed to write or read {key:?}")]
    Store {
        /// The key or reference involved.
        key: String,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}
