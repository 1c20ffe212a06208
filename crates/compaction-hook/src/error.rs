//! The one error type of compaction-hook: settings that cannot be used.

/// What can go wrong in this crate: only building a hook from settings. Running a hook never
/// fails.
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
    /// The pruning compactor rejected its settings.
    #[error("compactor settings: {0}")]
    Compactor(#[from] compaction_core::Error),
}
