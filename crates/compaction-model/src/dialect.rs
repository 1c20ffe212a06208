//! Python's JSON dialect: what `json.loads` reads beyond strict JSON, and how it is held here.
//!
//! Python's `json` module (and so every Haystack user's saved conversation) and Node's
//! `JSON.stringify` (and so Claude Code's logs) write two things strict JSON readers refuse:
//!
//! - **a lone surrogate escape**, `"\ud83d"`: half of a character, usually an emoji cut in two by
//!   a truncation that counted UTF-16 units. Python reads it as a one-character `str` holding the
//!   surrogate code point. A Rust `String` cannot hold one, so it is held as a stand-in
//!   character, one of 2,048 code points near the end of Unicode (U+10F000–U+10F7FF, in
//!   Supplementary Private Use Area-B, which no script and no common icon font uses): surrogate
//!   `0xD800 + k` is `U+10F000 + k`. A stand-in is
//!   one character, as the surrogate is one in Python, so lengths in characters agree; writers
//!   write it back as the escape it was read from ([`SurrogateEscapes`]); counters that see text
//!   as Python does look through it ([`lone_surrogate`]).
//! - **`NaN`, `Infinity`, `-Infinity`**, the non-finite floats, which `json.dumps` writes and
//!   `json.loads` reads. They are held as a `serde_json::Number` whose text is that word, so that
//!   writing the value gives the word back as Python writes it.
//!
//! Files that are strict JSON never pay for this: every reader tries serde_json (or its own strict
//! reader) first, and [`value_from_slice`] reads the dialect only where that failed.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::{Number, Value};

/// The surrogate a lone surrogate's stand-in stands for (see the module docs); the convention
/// lives in compaction-json, which the printers share.
pub use compaction_json::string::lone_surrogate;
pub(crate) use compaction_json::string::stand_in;

/// A number holding one of Python's non-finite floats, spelled as `json.dumps` spells it:
/// `NaN`, `Infinity` or `-Infinity`.
pub(crate) fn non_finite(word: &str) -> Number {
    // The only way to make a `Number` whose text is not a JSON number. With serde_json's
    // `arbitrary_precision` (on for this crate) a number is its text: it is written as that text,
    // and read back as a float by Rust's parser, which reads these words as Python's floats.
    Number::from_string_unchecked(word.to_owned())
}

/// Parses JSON as Python's `json.loads` does: strict JSON as serde_json parses it, and where
/// serde_json refuses the text, lone surrogate escapes and `NaN` / `Infinity` / `-Infinity` too
/// (see the module docs for how they are held). A key given twice keeps its last value, in the
/// first one's place, as serde_json and Python both do.
///
/// # Errors
///
/// serde_json's error, when the text is not JSON in Python's dialect either.
///
/// ```
/// let value = compaction_model::value_from_slice(br#"{"x": NaN, "y": [-Infinity]}"#)?;
/// assert_eq!(serde_json::to_string(&value)?, r#"{"x":NaN,"y":[-Infinity]}"#);
/// assert!(value["x"].as_f64().is_none() && value["x"].is_number());
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn value_from_slice(json: &[u8]) -> Result<Value, serde_json::Error> {
    serde_json::from_slice(json).or_else(|error| crate::prefix::python_value(json).ok_or(error))
}

/// `serde_json::to_value`, for values that may hold Python's non-finite floats: serde_json builds
/// a number of a `Value` by parsing its text, which refuses `NaN`, so such a value is written and
/// read back in Python's dialect instead.
///
/// # Errors
///
/// serde_json's, when `value` cannot be written as JSON.
///
/// ```
/// let value = compaction_model::value_from_slice(br#"{"x": [NaN]}"#)?;
/// assert!(serde_json::to_value(&value).is_err());
/// assert_eq!(compaction_model::to_value(&value)?, value);
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn to_value<T: Serialize + ?Sized>(value: &T) -> Result<Value, serde_json::Error> {
    serde_json::to_value(value).or_else(|error| {
        let written = serde_json::to_vec(value)?;
        crate::prefix::python_value(&written).ok_or(error)
    })
}

/// A writer that writes every stand-in of a lone surrogate as the escape it was read from
/// (`\ud83d`, lowercase as Python and Node write it), and everything else as it is given.
///
/// A stand-in's bytes can only appear inside a JSON string (outside them JSON is ASCII), so the
/// result is the JSON the stand-ins were read from. A stand-in cut across two writes is held
/// until the next one.
#[derive(Debug)]
pub struct SurrogateEscapes<W> {
    inner: W,
    /// The start of a stand-in that the last write ended inside.
    held: Vec<u8>,
}

/// The first two bytes of every stand-in's UTF-8 (`U+10F000`–`U+10F7FF` is `F4 8F 80..9F 80..BF`).
const LEAD: [u8; 2] = [0xF4, 0x8F];

impl<W: Write> SurrogateEscapes<W> {
    /// Escapes what is written to `inner`.
    pub fn new(inner: W) -> Self {
        SurrogateEscapes { inner, held: Vec::new() }
    }

    /// The inner writer, once everything written has been passed on.
    ///
    /// # Errors
    ///
    /// When the inner writer fails to take a byte still held.
    pub fn into_inner(mut self) -> io::Result<W> {
        let held = std::mem::take(&mut self.held);
        self.inner.write_all(&held)?;
        Ok(self.inner)
    }

    fn pass(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while let Some(at) = find_lead(bytes) {
            self.inner.write_all(&bytes[..at])?;
            let rest = &bytes[at..];
            if rest.len() < 4 && LEAD.starts_with(&rest[..rest.len().min(2)]) {
                // Perhaps a stand-in that the next write ends.
                self.held.extend_from_slice(rest);
                return Ok(());
            }
            match rest {
                [0xF4, 0x8F, third @ 0x80..=0x9F, fourth @ 0x80..=0xBF, ..] => {
                    let unit = 0xD800 | (u32::from(third & 0x1F) << 6) | u32::from(fourth & 0x3F);
                    write!(self.inner, "\\u{unit:04x}")?;
                    bytes = &rest[4..];
                }
                _ => {
                    self.inner.write_all(&rest[..1])?;
                    bytes = &rest[1..];
                }
            }
        }
        self.inner.write_all(bytes)
    }
}

/// The first `0xF4` byte in `bytes` (the lead byte of every stand-in), eight bytes at a time:
/// what passes through is a whole output file.
fn find_lead(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut at = 0;
    while let Some(word) = bytes.get(at..at + 8) {
        let mut eight = [0; 8];
        eight.copy_from_slice(word);
        // A zero byte of `x` is flagged; a borrow can flag bytes after the first true one,
        // never before it, so the lowest flag is exact.
        let x = u64::from_le_bytes(eight) ^ (ONES * u64::from(LEAD[0]));
        let hits = x.wrapping_sub(ONES) & !x & HIGH;
        if hits != 0 {
            return Some(at + (hits.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    bytes[at..].iter().position(|&b| b == LEAD[0]).map(|k| at + k)
}

impl<W: Write> Write for SurrogateEscapes<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_all(buf).map(|()| buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        if self.held.is_empty() {
            return self.pass(buf);
        }
        // Finish the held stand-in with the first bytes of this write, then go on.
        let take = (4 - self.held.len()).min(buf.len());
        let mut joined = std::mem::take(&mut self.held);
        joined.extend_from_slice(&buf[..take]);
        if joined.len() < 4 && LEAD.starts_with(&joined[..joined.len().min(2)]) {
            self.held = joined;
            return Ok(());
        }
        // `joined` is a whole stand-in or no stand-in at all: either way it ends within it, or
        // its first byte is passed and the rest looked at again.
        match joined.as_slice() {
            [0xF4, 0x8F, 0x80..=0x9F, 0x80..=0xBF] => {
                self.pass(&joined)?;
                self.pass(&buf[take..])
            }
            _ => {
                self.inner.write_all(&joined[..1])?;
                let rest: Vec<u8> = joined[1..].iter().chain(&buf[take..]).copied().collect();
                self.pass(&rest)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// `bytes` with every stand-in of a lone surrogate written as its escape, as
/// [`SurrogateEscapes`] writes them.
#[cfg(test)]
fn escaped(bytes: &[u8]) -> Vec<u8> {
    let mut out = SurrogateEscapes::new(Vec::with_capacity(bytes.len()));
    // Writing to a vector cannot fail.
    let _ = out.write_all(bytes);
    out.into_inner().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_surrogate_has_a_stand_in_and_back() {
        for unit in 0xD800..=0xDFFFu32 {
            let c = stand_in(unit);
            assert_eq!(lone_surrogate(c).map(u32::from), Some(unit));
            let mut buf = [0; 4];
            assert_eq!(escaped(c.encode_utf8(&mut buf).as_bytes()), format!("\\u{unit:04x}").into_bytes());
        }
        assert_eq!(lone_surrogate('\u{10EFFF}'), None);
        assert_eq!(lone_surrogate('\u{10F800}'), None);
        assert_eq!(lone_surrogate('\u{FFFD}'), None);
    }

    /// Stand-ins cut across writes at every point, beside other four-byte characters.
    #[test]
    fn stand_ins_across_writes_are_escaped() {
        let text = format!(
            "a{}b\u{10F800}\u{10FFFF}\u{1F600}{}{}",
            stand_in(0xD83D),
            stand_in(0xDE00),
            stand_in(0xDFFF)
        );
        let whole = escaped(text.as_bytes());
        assert_eq!(
            String::from_utf8(whole.clone()).unwrap(),
            "a\\ud83db\u{10F800}\u{10FFFF}\u{1F600}\\ude00\\udfff"
        );
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            for second in cut..=bytes.len() {
                let mut out = SurrogateEscapes::new(Vec::new());
                out.write_all(&bytes[..cut]).unwrap();
                out.write_all(&bytes[cut..second]).unwrap();
                out.write_all(&bytes[second..]).unwrap();
                assert_eq!(out.into_inner().unwrap(), whole, "{cut} {second}");
            }
        }
        // A lead byte that ends the text, and bytes that only begin like a stand-in.
        assert_eq!(escaped(b"x\xF4"), b"x\xF4");
        assert_eq!(escaped(b"\xF4\x8F\xA0\xBF!"), b"\xF4\x8F\xA0\xBF!");
    }
}
