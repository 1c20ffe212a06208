//! Decoding JSON strings as serde_json decodes the strings it builds: escapes of every kind,
//! `\u` surrogate pairs joined, and a surrogate alone, a control character or an escape JSON
//! does not have refused. A string is decoded straight into one buffer, eight bytes at a time
//! between escapes.

use crate::scan::{hex4, next_stop};
use crate::Error;

/// Decodes the string whose contents start at byte `start` of `text` (just past its opening
/// quote) into `out`, which is cleared first. Returns where the string ends (past its closing
/// quote) and whether it held an escape; without one `out` is left empty, and the contents are
/// `text[start..end - 1]` as they stand, which the caller can borrow instead of copying.
///
/// # Errors
///
/// [`Error::BadString`] at the byte where the string stops being one serde_json builds (a
/// control character, an escape JSON does not have, half a surrogate pair alone), and
/// [`Error::CutShort`] when the text ends inside it.
pub fn decode_into(text: &str, start: usize, out: &mut String) -> Result<(usize, bool), Error> {
    let bytes = text.as_bytes();
    out.clear();
    let mut run = start;
    let mut at = start;
    let bad = |at| Error::BadString { at };
    loop {
        at = next_stop(bytes, at);
        match *bytes.get(at).ok_or(Error::CutShort { at: start })? {
            b'"' => {
                if run == start {
                    return Ok((at + 1, false));
                }
                out.push_str(text.get(run..at).ok_or(bad(run))?);
                return Ok((at + 1, true));
            }
            b'\\' => {
                out.push_str(text.get(run..at).ok_or(bad(run))?);
                at = decode_escape(bytes, at + 1, out).ok_or(bad(at))?;
                run = at;
            }
            0x00..=0x1F => return Err(bad(at)),
            // The last few bytes, which the eight at a time did not cover.
            _ => at += 1,
        }
    }
}

/// The string a JSON string literal (quotes included, nothing around it) stands for.
///
/// # Errors
///
/// [`Error::NotAValue`] when `literal` does not open with a quote or has bytes after its
/// closing one, and the errors of [`decode_into`].
pub fn decode(literal: &str) -> Result<String, Error> {
    if !literal.starts_with('"') {
        return Err(Error::NotAValue { at: 0 });
    }
    let mut out = String::new();
    let (end, escaped) = decode_into(literal, 1, &mut out)?;
    if end != literal.len() {
        return Err(Error::TrailingBytes { at: end });
    }
    Ok(if escaped { out } else { literal[1..end - 1].to_owned() })
}

/// Decodes the escape after a backslash (its letter at `at`) into `out`; returns where it ends,
/// or `None` when it is not one serde_json builds (a surrogate alone included).
pub fn decode_escape(bytes: &[u8], at: usize, out: &mut String) -> Option<usize> {
    let short = match *bytes.get(at)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let unit = hex4(bytes, at + 1)?;
            let (c, end) = match unit {
                0xD800..=0xDBFF => {
                    if bytes.get(at + 5..at + 7)? != b"\\u" {
                        return None;
                    }
                    let low = hex4(bytes, at + 7)?;
                    if !(0xDC00..=0xDFFF).contains(&low) {
                        return None;
                    }
                    (char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))?, at + 11)
                }
                0xDC00..=0xDFFF => return None,
                _ => (char::from_u32(unit)?, at + 5),
            };
            out.push(c);
            return Some(end);
        }
        _ => return None,
    };
    out.push(short);
    Some(at + 1)
}

/// The stand-in of surrogate `0xD800`; surrogate `0xD800 + k` stands as this plus `k`.
const FIRST_STAND_IN: u32 = 0x10_F000;

/// The surrogate code unit (`0xD800`–`0xDFFF`) that `c` stands for when it is the stand-in of a
/// lone surrogate escape read from JSON, else `None`.
///
/// Python reads `"\ud83d"` as a one-character `str` holding the surrogate; a Rust `String`
/// cannot hold one, so the workspace holds it as a stand-in character, one of 2,048 code points
/// near the end of Unicode (U+10F000–U+10F7FF, in Supplementary Private Use Area-B): surrogate
/// `0xD800 + k` is `U+10F000 + k`, one character as in Python. Writers write it back as the
/// escape it was read from, and the printer of [`crate::python`] escapes it as Python does.
///
/// ```
/// use compaction_json::string::{lone_surrogate, stand_in};
///
/// assert_eq!(lone_surrogate(stand_in(0xD83D)), Some(0xD83D));
/// assert_eq!(lone_surrogate('a'), None);
/// ```
pub fn lone_surrogate(c: char) -> Option<u16> {
    let offset = u32::from(c).checked_sub(FIRST_STAND_IN)?;
    if offset < 0x800 {
        u16::try_from(0xD800 + offset).ok()
    } else {
        None
    }
}

/// The stand-in for surrogate code unit `unit` (`0xD800`–`0xDFFF`; see [`lone_surrogate`]).
pub fn stand_in(unit: u32) -> char {
    char::from_u32(FIRST_STAND_IN + (unit & 0x7FF)).unwrap_or(char::REPLACEMENT_CHARACTER)
}

/// Whether `raw`, the contents of a valid JSON string, is spelled as serde_json spells what it
/// stands for: every escape one serde_json writes (`\"`, `\\`, `\b`, `\t`, `\n`, `\f`, `\r`, and
/// `\u00xx` in lowercase for the other control characters), every other character as it is.
pub fn is_canonical(raw: &[u8]) -> bool {
    let mut at = 0;
    loop {
        // Valid contents hold no quote or control character but escaped: the next stop is a
        // backslash, or the end (the last few bytes are looked at one by one).
        at = next_stop(raw, at);
        let Some(found) = raw[at..].iter().position(|&b| b == b'\\') else { return true };
        let escape = at + found + 1;
        let canonical = match raw.get(escape) {
            Some(b'"' | b'\\' | b'b' | b't' | b'n' | b'f' | b'r') => true,
            Some(b'u') => match raw.get(escape + 1..escape + 5) {
                Some([b'0', b'0', high @ (b'0' | b'1'), low @ (b'0'..=b'9' | b'a'..=b'f')]) => {
                    let unit =
                        (high - b'0') << 4 | if low.is_ascii_digit() { low - b'0' } else { low - b'a' + 10 };
                    !matches!(unit, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d)
                }
                _ => false,
            },
            _ => false,
        };
        if !canonical {
            return false;
        }
        at = escape + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::is_canonical;

    #[test]
    fn a_string_is_canonical_only_as_serde_json_spells_it() {
        for raw in [
            r"\/",
            r"\u00e9",
            r"\u000A",
            r"\u000a",
            r"\u0020",
            r"\u001F",
            r"\ud83c\udf89",
            r"a\u0022",
            r"\u00",
        ] {
            assert!(!is_canonical(raw.as_bytes()), "{raw}");
        }
        for raw in [r"\u001f", r"\u0000", r"\u000b", r#"\"\\\b\t\n\f\r"#, "plain é 🎉", r"\\u00e9", ""] {
            assert!(is_canonical(raw.as_bytes()), "{raw}");
        }
        for c in (0u32..0x800).filter_map(char::from_u32) {
            let spelled = serde_json::to_string(&c.to_string()).expect("a JSON string");
            assert!(is_canonical(&spelled.as_bytes()[1..spelled.len() - 1]), "{spelled}");
        }
    }
}
