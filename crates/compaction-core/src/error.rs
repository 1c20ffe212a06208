//! The one error type of compaction-core: settings that cannot be used, and compactions that
//! could not be done.

use crate::generator::GeneratorError;

/// What can go wrong in this crate.
///
/// Building a compactor from settings fails with a variant naming the setting at fault. Most
/// compacting cannot fail; a strategy that counts with a counter that can fail, or asks a model
/// to write a summary, fails through [`Compactor::try_compact`](crate::Compactor::try_compact)
/// and the summarization session with the other variants, keeping the cause as the source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `min_keep_steps` was below 1. The newest tool-calling step holds results the model has not
    /// acted on yet, so it is always kept.
    #[error("`min_keep_steps` must be at least 1, got {0}: the newest tool-calling step is always kept")]
    MinKeepStepsTooSmall(i128),
    /// `min_keep_steps` of a strategy that allows 0 was negative (only possible when read from
    /// a config).
    #[error("`min_keep_steps` must be at least 0, got {0}")]
    NegativeMinKeepSteps(i128),
    /// `approximate_summary_tokens` was below 1.
    #[error("`approximate_summary_tokens` must be a positive number of tokens, got {0}")]
    SummaryTokensTooSmall(i128),
    /// `min_tokens` was negative (only possible when read from a config).
    #[error("`min_tokens` must be at least 0, got {0}")]
    NegativeMinTokens(i128),
    /// `keep_tool_results` was below 1: the newest result is always kept.
    #[error("`keep_tool_results` must be at least 1, got {0}: the newest tool result is always kept")]
    KeepToolResultsTooSmall(i128),
    /// `keep_observations` (SWE-agent's `n`) was below 1, which SWE-agent rejects too.
    #[error("`keep_observations` must be at least 1, got {0}")]
    KeepObservationsTooSmall(i128),
    /// `polling` was below 1: the masking cut moves every `polling` observations.
    #[error("`polling` must be at least 1, got {0}")]
    PollingTooSmall(i128),
    /// A setting had a value of the wrong kind, such as a string where a number belongs.
    #[error("setting `{key}` is invalid: {reason}")]
    InvalidSetting {
        /// The setting's name.
        key: String,
        /// What is wrong with its value.
        reason: String,
    },
    /// The settings named a key their class does not take, as Haystack's constructors reject
    /// an unexpected keyword argument.
    #[error("{of} has no setting `{key}`")]
    UnknownSetting {
        /// The key.
        key: String,
        /// The class whose settings held it, such as `ToolResultPruningCompactor`.
        of: &'static str,
    },
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
    /// A token counter could not count (a counter that asks a provider over the network).
    #[error("counting tokens failed")]
    Count(#[source] compaction_tokens::Error),
    /// The chat model could not be asked for a summary, or did not answer.
    #[error("the chat model failed to write a summary")]
    Generate(#[source] GeneratorError),
    /// A compaction was built with two replacements for one message.
    #[error("message {index} is replaced twice in one compaction")]
    DuplicateEdit {
        /// The message's index.
        index: usize,
    },
    /// A compaction holds an edit it cannot place in the conversation it is applied to.
    #[error("the compaction's edit of message {index} cannot be placed: {reason}")]
    MisplacedEdit {
        /// The index the edit is for.
        index: usize,
        /// Why it does not fit.
        reason: String,
    },
    /// The model's reply held no text to use as a summary (or only whitespace).
    #[error("the chat model returned no usable text for a summary; its reply: {reply}")]
    EmptySummary {
        /// The reply, described: its role and the kinds of its parts.
        reply: String,
    },
    /// Putting the summary in place of what it summarizes did not make the conversation smaller,
    /// so the messages are better kept as they were.
    #[error("the summary did not make the conversation smaller ({before} tokens before, {after} after)")]
    SummaryNotSmaller {
        /// Tokens of the conversation before.
        before: usize,
        /// Tokens with the summary in place.
        after: usize,
    },
    /// The summarization compactor was asked to summarize without a chat generator of the kind
    /// the call needs (`sync` or `async`).
    #[error(
        "the summarization compactor has no {0} chat generator; give it one, or drive its session yourself"
    )]
    NoGenerator(&'static str),
    /// A reply was handed to a summarization session that had asked for none.
    #[error("a reply was supplied to a summarization session that is not waiting for one")]
    NoPendingRequest,
}

impl PartialEq for Error {
    /// Errors are equal when they are the same kind and say the same thing. A cause from
    /// outside (a counter's, a model client's) is compared by its message, as causes cannot be
    /// compared otherwise.
    fn eq(&self, other: &Self) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other) && self.to_string() == other.to_string()
    }
}

impl Eq for Error {}

/// An error and every cause under it on one line, joined with `: `, each said once: the
/// workspace's errors say only their own part and return their cause from `source()`, and a
/// cause whose text its error's message already ends with (as some libraries' errors print
/// their source too, `io: Connection refused (os error 111)` above the I/O error) is not said
/// again.
///
/// ```
/// let io = std::io::Error::other("disk full");
/// let error = compaction_core::Error::Generate(Box::new(io));
/// assert_eq!(compaction_core::error_chain(&error), "the chat model failed to write a summary: disk full");
/// ```
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.ends_with(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}
