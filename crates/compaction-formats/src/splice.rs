//! Editing values inside JSON text in place: find the bytes of the value at a path, replace
//! only those, and leave every other byte of the file as it was.
//!
//! Writing a log back by serializing it again would change its spacing, its escapes and its
//! number formats; users diff and resume these files, so a write-back changes only the bytes of
//! the values it edits.

use std::io::Write;
use std::ops::Range;

use crate::skip::whitespace as skip_whitespace;

/// One step of a path into a JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seg {
    /// A key of an object (the last occurrence, as a JSON parser reads it).
    Key(&'static str),
    /// An element of an array.
    Index(u32),
    /// The value starting this many bytes after the start of the whole (a place found when the
    /// value was read); only first in a path.
    At(u32),
}

/// Deepest nesting [`value_end`] follows before it gives up (serde_json refuses past 128).
const SCAN_DEPTH: usize = 100;

/// The end of the JSON value that starts at `at` in `bytes`, found by a quick scan for strings
/// and brackets (nothing validated); `None` when the scan is not sure: text cut short, or
/// nesting deeper than [`SCAN_DEPTH`]. A scalar runs up to the next delimiter.
///
/// The fast paths of this crate use it to find a value's bytes without parsing them; a value
/// it finds is parsed afterwards, so malformed text is still caught.
pub(crate) fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match *bytes.get(at)? {
        b'"' => string_end(bytes, at + 1),
        b'[' | b'{' => {
            let mut depth = 0usize;
            let mut k = at;
            loop {
                match *bytes.get(k)? {
                    b'"' => k = string_end(bytes, k + 1)?,
                    b'[' | b'{' => {
                        depth += 1;
                        if depth > SCAN_DEPTH {
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

/// The index just past the closing quote of the string whose contents start at `at`.
fn string_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    loop {
        at += quote_or_backslash(bytes.get(at..)?)?;
        if bytes[at] == b'"' {
            return Some(at + 1);
        }
        // A backslash and the character it escapes.
        at += 2;
    }
}

/// Where the first `"` or `\` of `bytes` is. Strings are most of a transcript, so eight bytes
/// are tested at a time: a byte equal to the one sought is zero after the XOR, and
/// `(x - 0x01..) & !x & 0x80..` flags zero bytes (a borrow may flag bytes after the first zero,
/// never before it, so the lowest flag is the first hit).
fn quote_or_backslash(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_bytes = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let mut chunks = bytes.chunks_exact(8);
    let mut at = 0;
    for chunk in chunks.by_ref() {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        let hits = zero_bytes(word ^ (ONES * u64::from(b'"'))) | zero_bytes(word ^ (ONES * u64::from(b'\\')));
        if hits != 0 {
            return Some(at + (hits.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    chunks.remainder().iter().position(|&b| b == b'"' || b == b'\\').map(|k| at + k)
}

/// Whether the JSON string at `range` (quotes included) is `key`.
fn key_is(bytes: &[u8], range: Range<usize>, key: &str) -> bool {
    let Some(inner) = bytes.get(range.start + 1..range.end.saturating_sub(1)) else { return false };
    if !inner.contains(&b'\\') {
        return inner == key.as_bytes();
    }
    compaction_model::value_from_slice(&bytes[range]).is_ok_and(|decoded| decoded.as_str() == Some(key))
}

/// The bytes of the value at `path` in the JSON value starting at or after `start` (whitespace
/// skipped); `None` when the path is not there. `json` must be valid JSON: the scan checks
/// nothing.
pub(crate) fn find(json: &[u8], start: usize, path: &[Seg]) -> Option<Range<usize>> {
    find_in(json, start, path, false)
}

/// [`find`] in JSON known to repeat no key in any object: each key's first occurrence is its
/// only one, so what follows it in its object is never crossed.
pub(crate) fn find_unique(json: &[u8], start: usize, path: &[Seg]) -> Option<Range<usize>> {
    find_in(json, start, path, true)
}

fn find_in(json: &[u8], start: usize, path: &[Seg], unique: bool) -> Option<Range<usize>> {
    let mut at = skip_whitespace(json, start);
    for seg in path {
        at = match *seg {
            Seg::Key(key) if unique => first_member(json, at, key)?,
            Seg::Key(key) => member(json, at, key)?,
            Seg::Index(index) => element(json, at, index as usize)?,
            Seg::At(offset) => skip_whitespace(json, start.checked_add(offset as usize)?),
        };
    }
    Some(at..value_end(json, at)?)
}

/// Where the value of `key` starts in the object at `at`.
fn member(json: &[u8], at: usize, key: &str) -> Option<usize> {
    if json.get(at) != Some(&b'{') {
        return None;
    }
    let mut at = skip_whitespace(json, at + 1);
    let mut found = None;
    loop {
        match json.get(at)? {
            b'}' => return found,
            b'"' => {}
            _ => return None,
        }
        let key_end = value_end(json, at)?;
        let matches = key_is(json, at..key_end, key);
        at = skip_whitespace(json, key_end);
        if json.get(at) != Some(&b':') {
            return None;
        }
        let value = skip_whitespace(json, at + 1);
        if matches {
            found = Some(value);
        }
        at = skip_whitespace(json, value_end(json, value)?);
        match json.get(at)? {
            b',' => at = skip_whitespace(json, at + 1),
            b'}' => return found,
            _ => return None,
        }
    }
}

/// Where the value of the first `key` of the object at `at` starts (a parser reads the last one:
/// for a key given once, they are the same). Keys before it are crossed, never those after.
pub(crate) fn first_member(json: &[u8], at: usize, key: &str) -> Option<usize> {
    let at = skip_whitespace(json, at);
    if json.get(at) != Some(&b'{') {
        return None;
    }
    let mut at = skip_whitespace(json, at + 1);
    loop {
        if json.get(at)? != &b'"' {
            return None;
        }
        let key_end = value_end(json, at)?;
        let matches = key_is(json, at..key_end, key);
        at = skip_whitespace(json, key_end);
        if json.get(at) != Some(&b':') {
            return None;
        }
        let value = skip_whitespace(json, at + 1);
        if matches {
            return Some(value);
        }
        at = skip_whitespace(json, value_end(json, value)?);
        match json.get(at)? {
            b',' => at = skip_whitespace(json, at + 1),
            _ => return None,
        }
    }
}

/// Each member of the object at `at`: its key's bytes (quotes included) and its value's; `None`
/// when the scan is not sure (see [`value_end`]).
pub(crate) fn members(json: &[u8], at: usize) -> Option<Vec<(Range<usize>, Range<usize>)>> {
    if json.get(at) != Some(&b'{') {
        return None;
    }
    let mut out = Vec::new();
    let mut at = skip_whitespace(json, at + 1);
    if json.get(at) == Some(&b'}') {
        return Some(out);
    }
    loop {
        if json.get(at)? != &b'"' {
            return None;
        }
        let key = at..value_end(json, at)?;
        at = skip_whitespace(json, key.end);
        if json.get(at) != Some(&b':') {
            return None;
        }
        let value = skip_whitespace(json, at + 1);
        let value = value..value_end(json, value)?;
        at = skip_whitespace(json, value.end);
        out.push((key, value));
        match json.get(at)? {
            b',' => at = skip_whitespace(json, at + 1),
            b'}' => return Some(out),
            _ => return None,
        }
    }
}

/// The elements of the array at `at`, each as its bytes; `None` when the scan is not sure.
pub(crate) fn elements(json: &[u8], at: usize) -> Option<Vec<Range<usize>>> {
    if json.get(at) != Some(&b'[') {
        return None;
    }
    let mut out = Vec::new();
    let mut at = skip_whitespace(json, at + 1);
    if json.get(at) == Some(&b']') {
        return Some(out);
    }
    loop {
        let end = value_end(json, at)?;
        out.push(at..end);
        at = skip_whitespace(json, end);
        match json.get(at)? {
            b',' => at = skip_whitespace(json, at + 1),
            b']' => return Some(out),
            _ => return None,
        }
    }
}

/// Where element `index` starts in the array at `at`.
fn element(json: &[u8], at: usize, index: usize) -> Option<usize> {
    if json.get(at) != Some(&b'[') {
        return None;
    }
    let mut at = skip_whitespace(json, at + 1);
    if json.get(at) == Some(&b']') {
        return None;
    }
    for _ in 0..index {
        at = skip_whitespace(json, value_end(json, at)?);
        if json.get(at) != Some(&b',') {
            return None;
        }
        at = skip_whitespace(json, at + 1);
    }
    Some(at)
}

/// One replacement: the bytes at `range` of the source become `bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Edit {
    pub range: Range<usize>,
    pub bytes: Vec<u8>,
}

/// Writes `source` with `edits` applied. Edits must not overlap.
pub(crate) fn write_edited(source: &[u8], mut edits: Vec<Edit>, out: &mut dyn Write) -> std::io::Result<()> {
    edits.sort_by_key(|edit| edit.range.start);
    let mut at = 0;
    for edit in &edits {
        out.write_all(&source[at..edit.range.start])?;
        out.write_all(&edit.bytes)?;
        at = edit.range.end;
    }
    out.write_all(&source[at..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nested_values_and_the_last_duplicate() {
        let json = br#" {"a": 1, "message": {"content": [ "x", {"content" : "old", "k": 2}]}, "a": [3]}"#;
        let at =
            |path: &[Seg]| find(json, 0, path).map(|r| std::str::from_utf8(&json[r]).unwrap().to_owned());
        assert_eq!(
            at(&[Seg::Key("message"), Seg::Key("content"), Seg::Index(1), Seg::Key("content")]).as_deref(),
            Some("\"old\"")
        );
        assert_eq!(at(&[Seg::Key("a")]).as_deref(), Some("[3]"));
        assert_eq!(at(&[Seg::Key("missing")]), None);
        assert_eq!(at(&[Seg::Key("message"), Seg::Key("content"), Seg::Index(2)]), None);
        let at_message = json.iter().position(|&b| b == b'{').unwrap() + 1;
        let at_message = json[at_message..].iter().position(|&b| b == b'{').unwrap() + at_message;
        assert_eq!(
            find(
                json,
                0,
                &[Seg::At(at_message as u32), Seg::Key("content"), Seg::Index(1), Seg::Key("content")]
            ),
            find(json, 0, &[Seg::Key("message"), Seg::Key("content"), Seg::Index(1), Seg::Key("content")])
        );
        assert_eq!(find(json, 0, &[Seg::At(json.len() as u32 + 5)]), None);
        assert_eq!(first_member(json, 0, "message"), Some(at_message));
        assert_eq!(first_member(json, 0, "a"), Some(json.iter().position(|&b| b == b'1').unwrap()));
        assert_eq!(first_member(json, 0, "missing"), None);
        let path = [Seg::Key("message"), Seg::Key("content"), Seg::Index(1), Seg::Key("content")];
        assert_eq!(find_unique(json, 0, &path), find(json, 0, &path));
        let escaped = br#"{"con\u0074ent": "v"}"#;
        assert_eq!(find(escaped, 0, &[Seg::Key("content")]), Some(17..20));
    }

    #[test]
    fn edits_leave_the_rest_byte_for_byte() {
        let source = br#"{"a":"old" , "b":[1,2]}"#;
        let a = find(source, 0, &[Seg::Key("a")]).unwrap();
        let b = find(source, 0, &[Seg::Key("b"), Seg::Index(1)]).unwrap();
        let mut out = Vec::new();
        let edits =
            vec![Edit { range: b, bytes: b"20".to_vec() }, Edit { range: a, bytes: b"\"new\"".to_vec() }];
        write_edited(source, edits, &mut out).unwrap();
        assert_eq!(out, br#"{"a":"new" , "b":[1,20]}"#);
    }

    #[test]
    fn value_end_skips_strings_containers_and_scalars() {
        // Quotes and brackets inside strings, escapes at and across the eight-byte steps.
        let cases: &[(&str, usize)] = &[
            (r#""plain""#, 7),
            (r#""a \"quoted\" ] } word, long enough to scan in steps" , 1"#, 53),
            (r#""ends in a backslash \\" tail"#, 24),
            (r#"{"k": ["]", {"x": "}"}], "n": -1.5e3} rest"#, 37),
            ("[[], {}, [[1]]]", 15),
            ("-12.5e+3, 4", 8),
            ("true]", 4),
        ];
        for &(text, end) in cases {
            assert_eq!(value_end(text.as_bytes(), 0), Some(end), "{text}");
        }
        // Cut short, or deeper than the scan follows: not sure, so no answer.
        assert_eq!(value_end(br#""no end"#, 0), None);
        assert_eq!(value_end(br#"{"a": [1, 2}"#, 0), None);
        assert_eq!(value_end(b"", 0), None);
        let deep = format!("{}{}", "[".repeat(SCAN_DEPTH + 1), "]".repeat(SCAN_DEPTH + 1));
        assert_eq!(value_end(deep.as_bytes(), 0), None);
        let fits = format!("{}{}", "[".repeat(SCAN_DEPTH), "]".repeat(SCAN_DEPTH));
        assert_eq!(value_end(fits.as_bytes(), 0), Some(fits.len()));
    }
}
