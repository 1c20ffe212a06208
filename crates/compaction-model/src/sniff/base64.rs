//! Strict base64, as Python 3.11's `base64.b64decode(s, validate=True)` decodes it.
//!
//! Mirrors CPython 3.11's `binascii.a2b_base64` in `strict_mode` (`Modules/binascii.c`): the
//! same checks in the same order, so the first error found is the one Python reports, with
//! Python's message. Keep in sync with that function if the reference moves to a newer Python.

use std::fmt;

/// Why a string is not valid base64 under Python's `base64.b64decode(s, validate=True)`.
///
/// The [`Display`](fmt::Display) text of each variant is the message Python gives for the
/// same input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Base64Error {
    /// The string holds a character outside ASCII (Python raises `ValueError` before decoding).
    NonAscii,
    /// The string starts with `=`.
    LeadingPadding,
    /// A character that is neither in the standard alphabet `A-Za-z0-9+/` nor `=` (this
    /// includes whitespace and the URL-safe `-` and `_`).
    InvalidCharacter,
    /// A data character follows a `=`.
    DiscontinuousPadding,
    /// Something follows the `=` that completed the final group.
    ExcessDataAfterPadding,
    /// The number of data characters is one more than a multiple of 4, which no input encodes to.
    InvalidLength {
        /// How many data (non-`=`) characters the string has.
        data_chars: usize,
    },
    /// The final group is incomplete and not completed by enough `=`.
    IncorrectPadding,
}

impl fmt::Display for Base64Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NonAscii => f.write_str("string argument should contain only ASCII characters"),
            Self::LeadingPadding => f.write_str("Leading padding not allowed"),
            Self::InvalidCharacter => f.write_str("Only base64 data is allowed"),
            Self::DiscontinuousPadding => f.write_str("Discontinuous padding not allowed"),
            Self::ExcessDataAfterPadding => f.write_str("Excess data after padding"),
            Self::InvalidLength { data_chars } => write!(
                f,
                "Invalid base64-encoded string: number of data characters ({data_chars}) cannot \
                 be 1 more than a multiple of 4"
            ),
            Self::IncorrectPadding => f.write_str("Incorrect padding"),
        }
    }
}

impl std::error::Error for Base64Error {}

/// The 6-bit value of a character of the standard base64 alphabet, or `None`.
fn sextet(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

/// Runs CPython's strict `a2b_base64` state machine over `s`, handing each decoded byte to `out`.
///
/// The checks come in CPython's order, so the first error found is the one Python reports:
/// non-ASCII anywhere, then a leading `=`, then, character by character, `=` handling, invalid
/// characters, data after `=`; and at the end the length of the last group.
fn decode_with(s: &str, mut out: impl FnMut(u8)) -> Result<(), Base64Error> {
    let bytes = s.as_bytes();
    if !bytes.is_ascii() {
        return Err(Base64Error::NonAscii);
    }
    if bytes.first() == Some(&b'=') {
        return Err(Base64Error::LeadingPadding);
    }
    // Position in the current group of four, the bits carried over, `=` counted in this group.
    let mut quad_pos = 0u8;
    let mut left = 0u8;
    let mut pads = 0u8;
    let mut padding_started = false;
    let mut data_chars = 0usize;
    for (i, &c) in bytes.iter().enumerate() {
        if c == b'=' {
            padding_started = true;
            // A `=` only counts once two data characters of the group are in; earlier ones
            // (including any after a complete group) are skipped, as CPython does.
            if quad_pos >= 2 {
                pads += 1;
                if quad_pos + pads >= 4 {
                    if i + 1 < bytes.len() {
                        return Err(Base64Error::ExcessDataAfterPadding);
                    }
                    return Ok(());
                }
            }
            continue;
        }
        let v = sextet(c).ok_or(Base64Error::InvalidCharacter)?;
        if padding_started {
            return Err(Base64Error::DiscontinuousPadding);
        }
        data_chars += 1;
        match quad_pos {
            0 => {
                left = v;
                quad_pos = 1;
            }
            1 => {
                out((left << 2) | (v >> 4));
                left = v & 0x0f;
                quad_pos = 2;
            }
            2 => {
                out((left << 4) | (v >> 2));
                left = v & 0x03;
                quad_pos = 3;
            }
            _ => {
                out((left << 6) | v);
                quad_pos = 0;
            }
        }
    }
    match quad_pos {
        0 => Ok(()),
        1 => Err(Base64Error::InvalidLength { data_chars }),
        _ => Err(Base64Error::IncorrectPadding),
    }
}

/// Decodes `s` exactly as Python 3.11's `base64.b64decode(s, validate=True)` does.
///
/// Accepted: the standard alphabet only (no whitespace, no `-`/`_`), no leading `=`, `=` only
/// at the end, and a final group completed by padding. Like CPython, a `=` after a complete
/// group is tolerated (`"QUJD="` and `"QUJD==="` decode to `ABC`), and the empty string decodes
/// to nothing.
///
/// # Errors
///
/// A [`Base64Error`] saying why, with Python's message.
pub fn decode_base64_strict(s: &str) -> Result<Vec<u8>, Base64Error> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3 + 2);
    decode_with(s, |b| out.push(b))?;
    Ok(out)
}

/// The length [`decode_base64_strict`] would return for `s`, without allocating.
///
/// # Errors
///
/// The same error [`decode_base64_strict`] gives.
// Used by the tests, which hold it to Python's answers; nothing else needs it yet.
#[cfg_attr(not(test), allow(dead_code))]
pub(super) fn base64_decoded_len(s: &str) -> Result<usize, Base64Error> {
    let mut n = 0usize;
    decode_with(s, |_| n += 1)?;
    Ok(n)
}
