//! The one error type of this crate.

use thiserror::Error;

/// Why JSON text could not be scanned or decoded; each variant names the byte where it went
/// wrong, counted from the start of the text given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Error {
    /// No valid JSON value starts here (or it is nested deeper than the scans follow).
    #[error("byte {at}: no JSON value starts here that the scan can cross")]
    NotAValue {
        /// Where the value was expected.
        at: usize,
    },
    /// Bytes other than whitespace follow the value.
    #[error("byte {at}: bytes after the JSON value")]
    TrailingBytes {
        /// Where they start.
        at: usize,
    },
    /// A string holds a control character, an escape JSON does not have, or half a surrogate
    /// pair alone.
    #[error(
        "byte {at}: not a string serde_json builds (a control character, a bad escape or a lone surrogate)"
    )]
    BadString {
        /// Where the offending byte or escape is.
        at: usize,
    },
    /// The text ends inside a string.
    #[error("byte {at}: the string starting here is cut short")]
    CutShort {
        /// Where the string's contents start.
        at: usize,
    },
}
