//! The one error type of compaction-hook: settings that cannot be used, and store operations
//! that failed.

use std::path::PathBuf;

/// What can go wrong in this crate.
///
/// Settings errors come from constructors and readers; store errors from
/// [`ToolResultStore`](crate::ToolResultStore) operations; counting and compacting errors from
/// [`CompactionHook::try_run`](crate::CompactionHook::try_run) and its steps. The hooks' `run`
/// methods never fail: a store error during offloading leaves the result in context, and a
/// failed count or compaction leaves the conversation as it was, both reported in the outcome.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `context_window` was below 1.
    #[error("`context_window` must be a positive number of tokens, got {0}")]
    ContextWindowTooSmall(i128),
    /// The fractions broke `0 < compact_to < compact_at <= 1`.
    #[error(
        "`compact_at` and `compact_to` must satisfy 0 < compact_to < compact_at <= 1, got compact_at={compact_at} \
         and compact_to={compact_to}: a target at or above the trigger would compact again on every step"
    )]
    InvalidFractions {
        /// The trigger fraction given.
        compact_at: f64,
        /// The target fraction given.
        compact_to: f64,
    },
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
    /// Serialized settings named a component (compactor, counter, store, policy) this crate
    /// cannot build.
    #[error("`{key}` names `{type_name}`, which this crate cannot build")]
    UnsupportedComponent {
        /// Where the component sat, such as `compactor`.
        key: String,
        /// The `type` it carried.
        type_name: String,
    },
    /// The pruning compactor rejected its settings.
    #[error("compactor settings: {0}")]
    Compactor(#[from] compaction_core::Error),
    /// The compactor could not compact (see `Compactor::try_compact`).
    #[error("compacting failed: {0}")]
    Compaction(#[source] compaction_core::Error),
    /// The token counter could not count (a counter that asks a provider over the network).
    #[error("counting tokens failed: {0}")]
    Count(#[source] compaction_tokens::Error),
    /// `max_total_tokens` of the budget hook was below 1.
    #[error("`max_total_tokens` must be a positive number of tokens, got {0}")]
    BudgetTooSmall(i128),
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
    /// A file-system operation of the store failed.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What the store was doing, such as `writing`.
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
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
    #[error("part {position} of the result of `{tool_name}` is not valid base64: {reason}")]
    InvalidBase64 {
        /// The tool that produced the result.
        tool_name: String,
        /// The part's position in the result, from 0.
        position: usize,
        /// Why decoding failed.
        reason: String,
    },
    /// A store implemented outside this crate failed; its own words.
    #[error("store failed to write or read {key:?}: {reason}")]
    Store {
        /// The key or reference involved.
        key: String,
        /// What went wrong.
        reason: String,
    },
}
