//! The one error type of compaction-hook: settings that cannot be used, and failed counts or
//! compactions.

/// What can go wrong in this crate.
///
/// Settings errors come from constructors and readers; counting and compacting errors from
/// [`CompactionHook::try_run`](crate::CompactionHook::try_run) and its steps. The hook's `run`
/// never fails: a failed count or compaction leaves the conversation as it was and is reported
/// in the outcome.
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
    /// A setting had a value of the wrong kind or out of range.
    #[error("setting `{key}` is invalid: {reason}")]
    InvalidSetting {
        /// The setting's name.
        key: String,
        /// What is wrong with its value.
        reason: String,
    },
    /// Serialized settings named a component (compactor, counter) this crate cannot build.
    #[error("`{key}` names `{type_name}`, which this crate cannot build")]
    UnsupportedComponent {
        /// Where the component sat, such as `compactor`.
        key: String,
        /// The `type` it carried.
        type_name: String,
    },
    /// The settings could not be read: not an object, a key the class does not take, a value of
    /// the wrong kind, a missing required value (compaction-core's reader, which every crate
    /// shares).
    #[error(transparent)]
    Settings(#[from] compaction_core::Error),
    /// The compactor rejected its settings.
    #[error("compactor settings")]
    Compactor(#[source] compaction_core::Error),
    /// The compactor could not compact (see `Compactor::try_compact`).
    #[error("compacting failed")]
    Compaction(#[source] compaction_core::Error),
    /// The token counter could not count (a counter that asks a provider over the network).
    #[error("counting tokens failed")]
    Count(#[source] compaction_tokens::Error),
    /// `max_total_tokens` of the budget hook was below 1.
    #[error("`max_total_tokens` must be a positive number of tokens, got {0}")]
    BudgetTooSmall(i128),
    /// The cache-aware rule's prices or horizon are out of range.
    #[error("cache rule: {0}")]
    InvalidCacheRule(String),
}
