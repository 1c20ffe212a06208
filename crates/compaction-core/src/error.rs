//! The one error type of compaction-core: settings that cannot be used.

/// What can go wrong in this crate. Compacting itself never fails; only building a compactor
/// from settings does, and each variant names the setting at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `min_keep_steps` was below 1. The newest tool-calling step holds results the model has not
    /// acted on yet, so it is always kept.
    #[error("`min_keep_steps` must be at least 1, got {0}: the newest tool-calling step is always kept")]
    MinKeepStepsTooSmall(i128),
    /// `min_tokens` was negative (only possible when read from a config).
    #[error("`min_tokens` must be at least 0, got {0}")]
    NegativeMinTokens(i128),
    /// `keep_tool_results` was below 1: the newest result is always kept.
    #[error("`keep_tool_results` must be at least 1, got {0}: the newest tool result is always kept")]
    KeepToolResultsTooSmall(i128),
    /// A setting had a value of the wrong kind, such as a string where a number belongs.
    #[error("setting `{key}` is invalid: {reason}")]
    InvalidSetting {
        /// The setting's name.
        key: String,
        /// What is wrong with its value.
        reason: String,
    },
    /// The settings named a key this compactor does not have.
    #[error("unknown setting `{0}`")]
    UnknownSetting(String),
    /// The settings were not a JSON object.
    #[error("settings must be a JSON object, got {0}")]
    NotAnObject(&'static str),
    /// A Haystack `to_dict` form named another class.
    #[error("settings are for `{found}`, expected `{expected}`")]
    WrongType {
        /// The `type` the settings carried.
        found: String,
        /// The `type` this compactor reads.
        expected: &'static str,
    },
    /// An option beyond the reference is on, so the settings have no Haystack `to_dict` form.
    #[error("option `{0}` is on, and Haystack's ToolResultPruningCompactor has no such parameter")]
    NotInReference(&'static str),
}
