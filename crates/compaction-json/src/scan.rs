//! Where a JSON value ends, found from its bytes without building it, in two strengths.
//!
//! [`value_end`] checks the value as serde_json checks a value it is told to ignore: whatever it
//! accepts, serde_json accepts too, and it ends where serde_json ends (the differential tests
//! hold the two side by side). It is faster than serde_json's skipping: most of a log is
//! strings with an escape every few dozen bytes, which serde_json crosses by stopping at each
//! escape and starting over, where this takes eight bytes at a time and handles the escape in
//! line. It assumes the text is UTF-8, which its caller has checked.
//!
//! [`skip_value`] is the quick scan: quotes and brackets only, nothing validated, for text that
//! is parsed afterwards anyway (or known to be JSON) and where only the end matters.
//!
//! Both follow nesting up to [`DEPTH`] levels and give up (`None`) deeper: serde_json refuses
//! more than 128 levels counted from the top of its text, and a value scanned alone sits lower
//! than inside its document, so deep input goes to serde_json, whose limit stays the same.
//!
//! (Crossing strings from one quote or backslash to the next with `memchr`, after checking the
//! text once for control characters, measured slower: an escape comes every few dozen bytes in
//! a tool's output, and each search costs its setting up.)

use std::ops::Range;

use crate::Error;

/// How deep both scans follow nesting, counted from the value scanned.
pub const DEPTH: usize = 100;

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Where the JSON value starting at byte `at` of `bytes` ends (just past it); `None` when it is
/// not valid JSON as serde_json reads it, nested deeper than [`DEPTH`], or cut short.
///
/// A number or literal alone is read up to its last byte: what follows it is the caller's to
/// check (serde_json reading a whole text refuses `1x`; inside a container the container does).
pub fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    // Per open container, whether it is an object; a container's members are crossed in this
    // loop, not by recursion, so depth costs no stack.
    let mut open: Vec<bool> = Vec::new();
    let mut at = at;
    loop {
        // A value.
        at = match *bytes.get(at)? {
            b'"' => string_end(bytes, at + 1)?,
            b'{' | b'[' => {
                let object = bytes[at] == b'{';
                if open.len() == DEPTH {
                    return None;
                }
                at = whitespace(bytes, at + 1);
                if bytes.get(at) == Some(if object { &b'}' } else { &b']' }) {
                    at + 1
                } else {
                    open.push(object);
                    if object {
                        at = key_end(bytes, at)?;
                    }
                    continue;
                }
            }
            b't' => literal(bytes, at, b"true")?,
            b'f' => literal(bytes, at, b"false")?,
            b'n' => literal(bytes, at, b"null")?,
            b'-' | b'0'..=b'9' => number_end(bytes, at)?,
            _ => return None,
        };
        // After a value: the next member, or the end of containers.
        loop {
            let Some(&object) = open.last() else { return Some(at) };
            at = whitespace(bytes, at);
            match *bytes.get(at)? {
                b',' => {
                    at = whitespace(bytes, at + 1);
                    if object {
                        at = key_end(bytes, at)?;
                    }
                    break;
                }
                b'}' if object => {}
                b']' if !object => {}
                _ => return None,
            }
            open.pop();
            at += 1;
        }
    }
}

/// The bytes of the one JSON value that `text` holds, whitespace around it allowed, checked as
/// [`value_end`] checks it.
///
/// # Errors
///
/// [`Error::NotAValue`] naming where the value starts when it is not valid JSON, is nested
/// deeper than [`DEPTH`] or is cut short; [`Error::TrailingBytes`] when something follows it.
pub fn check(text: &[u8]) -> Result<Range<usize>, Error> {
    let start = whitespace(text, 0);
    let end = value_end(text, start).ok_or(Error::NotAValue { at: start })?;
    match whitespace(text, end) {
        rest if rest == text.len() => Ok(start..end),
        rest => Err(Error::TrailingBytes { at: rest }),
    }
}

/// Past a key, its colon and the whitespace after it: where its value starts.
fn key_end(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let at = whitespace(bytes, string_end(bytes, at + 1)?);
    (bytes.get(at) == Some(&b':')).then(|| whitespace(bytes, at + 1))
}

/// Past JSON whitespace (space, tab, line feed, carriage return) from `at`.
pub fn whitespace(bytes: &[u8], mut at: usize) -> usize {
    while matches!(bytes.get(at), Some(b' ' | b'\n' | b'\t' | b'\r')) {
        at += 1;
    }
    at
}

/// Past `word` (`true`, `false`, `null`) when it is what lies at `at`.
pub fn literal(bytes: &[u8], at: usize, word: &[u8]) -> Option<usize> {
    (bytes.get(at..at + word.len())? == word).then_some(at + word.len())
}

/// Past a number: `-`, then `0` or digits not starting with `0`, then a fraction and an
/// exponent, each with at least one digit.
pub fn number_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    let digits =
        |at: usize| bytes.get(at..).map_or(0, |rest| rest.iter().take_while(|b| b.is_ascii_digit()).count());
    if bytes.get(at) == Some(&b'-') {
        at += 1;
    }
    match bytes.get(at)? {
        // One leading zero, never followed by a digit.
        b'0' if bytes.get(at + 1).is_some_and(u8::is_ascii_digit) => return None,
        b'0' => at += 1,
        b'1'..=b'9' => at += digits(at),
        _ => return None,
    }
    if bytes.get(at) == Some(&b'.') {
        let n = digits(at + 1);
        if n == 0 {
            return None;
        }
        at += 1 + n;
    }
    if matches!(bytes.get(at), Some(b'e' | b'E')) {
        at += 1;
        if matches!(bytes.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        let n = digits(at);
        if n == 0 {
            return None;
        }
        at += n;
    }
    Some(at)
}

/// Past the closing quote of the string whose contents start at `at`: no control character in
/// it, every escape one JSON has (`\u` with four hex digits, which serde_json does not pair when
/// it ignores a string).
pub fn string_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    loop {
        at = next_stop(bytes, at);
        match *bytes.get(at)? {
            b'"' => return Some(at + 1),
            b'\\' => at = escape_end(bytes, at)?,
            0x00..=0x1F => return None,
            // The last few bytes, which the eight at a time did not cover.
            _ => at += 1,
        }
    }
}

/// The first quote, backslash or control character at or after `at`, looked for eight bytes at
/// a time; or where fewer than eight bytes are left, which the caller looks at one by one.
pub fn next_stop(bytes: &[u8], mut at: usize) -> usize {
    while let Some(eight) = bytes.get(at..at + 8) {
        let stops = stops::<true>(eight);
        if stops != 0 {
            return at + (stops.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at
}

/// Past the escape whose backslash is at `at`; `None` when it is not an escape JSON has.
fn escape_end(bytes: &[u8], at: usize) -> Option<usize> {
    Some(
        at + match *bytes.get(at + 1)? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => 2,
            b'u' if hex4(bytes, at + 2).is_some() => 6,
            _ => return None,
        },
    )
}

/// The code unit of the four hex digits at `at` (a `\u` escape's); `None` when they are not
/// four hex digits.
pub fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    digits.iter().try_fold(0, |n, &d| Some(n * 16 + char::from(d).to_digit(16)?))
}

/// The bytes of eight that stop a string's contents (`"`, `\`, and with `CONTROL` control
/// characters), each flagged by its high bit. A byte equal to the one sought is zero after the
/// XOR, and `(x - 0x01..) & !x & 0x80..` flags zero bytes; a borrow can flag bytes after the
/// first true hit, never before it, so the lowest flag is exact.
fn stops<const CONTROL: bool>(eight: &[u8]) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(eight);
    let x = u64::from_le_bytes(word);
    let below = |x: u64, n: u64| x.wrapping_sub(ONES * n) & !x;
    let mut hits = below(x ^ (ONES * u64::from(b'"')), 1) | below(x ^ (ONES * u64::from(b'\\')), 1);
    if CONTROL {
        hits |= below(x, 0x20);
    }
    hits & HIGH
}

/// The end of the JSON value that starts at `at` in `bytes`, found by the quick scan of quotes
/// and brackets (nothing validated); `None` when the scan is not sure: text cut short, or
/// nesting deeper than [`DEPTH`]. A scalar runs up to the next delimiter.
///
/// For a value that is parsed afterwards, so that malformed text is still caught, or that is
/// known to be valid JSON.
pub fn skip_value(bytes: &[u8], at: usize) -> Option<usize> {
    match *bytes.get(at)? {
        b'"' => skip_string(bytes, at + 1),
        b'[' | b'{' => {
            let mut depth = 0usize;
            let mut k = at;
            loop {
                match *bytes.get(k)? {
                    b'"' => k = skip_string(bytes, k + 1)?,
                    b'[' | b'{' => {
                        depth += 1;
                        if depth > DEPTH {
                            return None;
                        }
                        k += 1;
                    }
                    b']' | b'}' => {
                        depth -= 1;
                        k += 1;
                        if depth == 0 {
                            return Some(k);
                        }
                    }
                    _ => k += 1,
                }
            }
        }
        _ => {
            let rest = &bytes[at..];
            let len = rest
                .iter()
                .position(|b| matches!(b, b',' | b']' | b'}' | b' ' | b'\n' | b'\t' | b'\r'))
                .unwrap_or(rest.len());
            (len > 0).then_some(at + len)
        }
    }
}

/// The index just past the closing quote of the string whose contents start at `at`, found by
/// the quick scan (a backslash skips the byte after it; nothing validated).
pub fn skip_string(bytes: &[u8], mut at: usize) -> Option<usize> {
    loop {
        at += quote_or_backslash(bytes.get(at..)?)?;
        if bytes[at] == b'"' {
            return Some(at + 1);
        }
        // A backslash and the character it escapes.
        at += 2;
    }
}

/// Where the first `"` or `\` of `bytes` is, eight bytes at a time.
fn quote_or_backslash(bytes: &[u8]) -> Option<usize> {
    let mut chunks = bytes.chunks_exact(8);
    let mut at = 0;
    for chunk in chunks.by_ref() {
        let hits = stops::<false>(chunk);
        if hits != 0 {
            return Some(at + (hits.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    chunks.remainder().iter().position(|&b| b == b'"' || b == b'\\').map(|k| at + k)
}
