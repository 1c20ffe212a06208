//! The one error type of this crate.

use std::sync::Arc;

use thiserror::Error;

/// Why a message could not be read.
///
/// Every variant that comes from a conversation names the message's position in it, so a
/// user can find the bad message in a file of thousands.
#[derive(Debug, Clone, Error)]
#[non_exhaustive]
pub enum Error {
    /// The message has neither `role` nor `_role`.
    #[error("message {index}: no `role` field (keys present: {keys})")]
    MissingRole {
        /// Position of the message in its conversation.
        index: usize,
        /// The keys the message does have, comma-separated.
        keys: String,
    },
    /// The role is not one of system, user, assistant, tool.
    #[error(
        "message {index}: unknown role {}; expected one of system, user, assistant, tool",
        excerpt(role)
    )]
    UnknownRole {
        /// Position of the message in its conversation.
        index: usize,
        /// The role as written.
        role: String,
    },
    /// The message has neither `content` nor `_content`.
    #[error("message {index}: no `content` or `_content` field")]
    MissingContent {
        /// Position of the message in its conversation.
        index: usize,
    },
    /// A field has the wrong JSON type.
    #[error("message {index}: `{field}` must be {expected}, found {found}")]
    WrongType {
        /// Position of the message in its conversation.
        index: usize,
        /// Path of the field inside the message, such as `content[2].tool_call.arguments`.
        field: String,
        /// What the field must be.
        expected: &'static str,
        /// The JSON type found instead.
        found: &'static str,
    },
    /// A required field of a part is missing.
    #[error("message {index}: `{field}` is missing")]
    MissingField {
        /// Position of the message in its conversation.
        index: usize,
        /// Path of the missing field.
        field: String,
    },
    /// A content part is of no kind this crate knows.
    #[error(
        "message {index}: `{field}` is not a content part; a part holds one of `text`, `tool_call`, \
         `tool_call_result`, `image`, `reasoning` or `file` (keys present: {keys})"
    )]
    UnknownPart {
        /// Position of the message in its conversation.
        index: usize,
        /// Path of the part.
        field: String,
        /// The keys the part has, comma-separated.
        keys: String,
    },
    /// A tool result's `result` is neither a string nor a list of text, image and file parts.
    #[error(
        "message {index}: `{field}` must be a string or a list of text, image and file parts, found {found}"
    )]
    BadToolResult {
        /// Position of the message in its conversation.
        index: usize,
        /// Path of the result.
        field: String,
        /// What was found instead.
        found: String,
    },
    /// An image or file failed validation (its `validation` flag is on).
    #[error("message {index}: `{field}`: {reason}")]
    InvalidMedia {
        /// Position of the message in its conversation.
        index: usize,
        /// Path of the image or file part.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The text is not JSON (reading from bytes with [`messages_from_slice`](crate::messages_from_slice)).
    #[error("invalid JSON")]
    Json {
        /// serde_json's error, with its [`line`](serde_json::Error::line),
        /// [`column`](serde_json::Error::column) and [`classify`](serde_json::Error::classify).
        /// Shared, so that this error stays `Clone`.
        #[source]
        source: Arc<serde_json::Error>,
    },
    /// The conversation is not a JSON array of messages.
    #[error("a conversation must be a JSON array of messages, found {found}")]
    NotAnArray {
        /// The JSON type found instead.
        found: &'static str,
    },
}

/// Equal when they say the same about the same place; two [`Error::Json`] compare serde_json's
/// line, column, category and words, as serde_json's error has no equality of its own.
impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        use Error::*;
        match (self, other) {
            (MissingRole { index: a, keys: k }, MissingRole { index: b, keys: l }) => a == b && k == l,
            (UnknownRole { index: a, role: r }, UnknownRole { index: b, role: s }) => a == b && r == s,
            (MissingContent { index: a }, MissingContent { index: b }) => a == b,
            (
                WrongType { index: a, field: f, expected: e, found: x },
                WrongType { index: b, field: g, expected: d, found: y },
            ) => a == b && f == g && e == d && x == y,
            (MissingField { index: a, field: f }, MissingField { index: b, field: g }) => a == b && f == g,
            (UnknownPart { index: a, field: f, keys: k }, UnknownPart { index: b, field: g, keys: l }) => {
                a == b && f == g && k == l
            }
            (
                BadToolResult { index: a, field: f, found: x },
                BadToolResult { index: b, field: g, found: y },
            ) => a == b && f == g && x == y,
            (
                InvalidMedia { index: a, field: f, reason: r },
                InvalidMedia { index: b, field: g, reason: s },
            ) => a == b && f == g && r == s,
            (Json { source: a }, Json { source: b }) => {
                a.line() == b.line()
                    && a.column() == b.column()
                    && a.classify() == b.classify()
                    && a.to_string() == b.to_string()
            }
            (NotAnArray { found: a }, NotAnArray { found: b }) => a == b,
            _ => false,
        }
    }
}

impl Eq for Error {}

impl Error {
    /// The position of the offending message, when the error concerns one.
    pub fn index(&self) -> Option<usize> {
        match self {
            Error::MissingRole { index, .. }
            | Error::UnknownRole { index, .. }
            | Error::MissingContent { index }
            | Error::WrongType { index, .. }
            | Error::MissingField { index, .. }
            | Error::UnknownPart { index, .. }
            | Error::BadToolResult { index, .. }
            | Error::InvalidMedia { index, .. } => Some(*index),
            Error::Json { .. } | Error::NotAnArray { .. } => None,
        }
    }
}

/// A value quoted for an error line: whole when short, else its start and its length, so one bad
/// value of 300 KB never makes a 300 KB line.
pub(crate) fn excerpt(text: &str) -> String {
    match text.char_indices().nth(KEEP) {
        None => format!("{text:?}"),
        Some((cut, _)) => format!("{:?}… ({} characters)", &text[..cut], text.chars().count()),
    }
}

/// As [`excerpt`], unquoted: for names such as keys.
pub(crate) fn cut(text: &str) -> String {
    match text.char_indices().nth(KEEP) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}… ({} characters)", &text[..cut], text.chars().count()),
    }
}

/// Characters of a value an error line shows.
const KEEP: usize = 40;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_are_cut_with_their_length() {
        assert_eq!(excerpt("tool"), "\"tool\"");
        let long = "é".repeat(300_000);
        let cut = excerpt(&long);
        assert!(cut.len() < 120, "{cut}");
        assert!(cut.ends_with("… (300000 characters)"), "{cut}");
        let error = Error::UnknownRole { index: 3, role: long };
        assert!(error.to_string().len() < 200);
    }
}
