//! Editing values inside JSON text in place: find the bytes of the value at a path, replace
//! only those, and leave every other byte of the file as it was.
//!
//! Writing a log back by serializing it again would change its spacing, its escapes and its
//! number formats; users diff and resume these files, so a write-back changes only the bytes of
//! the values it edits.

use std::io::Write;
use std::ops::Range;

use crate::scan::{skip_value, whitespace as skip_whitespace};

/// One step of a path into a JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seg {
    /// A key of an object (the last occurrence, as a JSON parser reads it).
    Key(&'static str),
    /// An element of an array.
    Index(u32),
    /// The value starting this many bytes after the start of the whole (a place found when the
    /// value was read); only first in a path.
    At(u32),
}

/// Whether the JSON string at `range` (quotes included) is `key`.
fn key_is(bytes: &[u8], range: Range<usize>, key: &str) -> bool {
    let Some(inner) = bytes.get(range.start + 1..range.end.saturating_sub(1)) else { return false };
    if !inner.contains(&b'\\') {
        return inner == key.as_bytes();
    }
    std::str::from_utf8(&bytes[range])
        .is_ok_and(|literal| crate::string::decode(literal).is_ok_and(|k| k == key))
}

/// The bytes of the value at `path` in the JSON value starting at or after `start` (whitespace
/// skipped); `None` when the path is not there. `json` must be valid JSON: the scan checks
/// nothing.
pub fn find(json: &[u8], start: usize, path: &[Seg]) -> Option<Range<usize>> {
    find_in(json, start, path, false)
}

/// [`find`] in JSON known to repeat no key in any object: each key's first occurrence is its
/// only one, so what follows it in its object is never crossed.
pub fn find_unique(json: &[u8], start: usize, path: &[Seg]) -> Option<Range<usize>> {
    find_in(json, start, path, true)
}

/// Where the value at `path` starts, as [`find`] finds it, without scanning the value itself to
/// its end: for a value that is scanned next anyway (a large array, element by element), one
/// pass over it instead of two.
pub fn find_start(json: &[u8], start: usize, path: &[Seg]) -> Option<usize> {
    start_in(json, start, path, false)
}

fn find_in(json: &[u8], start: usize, path: &[Seg], unique: bool) -> Option<Range<usize>> {
    let at = start_in(json, start, path, unique)?;
    Some(at..skip_value(json, at)?)
}

fn start_in(json: &[u8], start: usize, path: &[Seg], unique: bool) -> Option<usize> {
    let mut at = skip_whitespace(json, start);
    for seg in path {
        at = match *seg {
            Seg::Key(key) if unique => first_member(json, at, key)?,
            Seg::Key(key) => member(json, at, key)?,
            Seg::Index(index) => element(json, at, index as usize)?,
            Seg::At(offset) => skip_whitespace(json, start.checked_add(offset as usize)?),
        };
    }
    // A path that leads past the end finds nothing.
    json.get(at).map(|_| at)
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
        let key_end = skip_value(json, at)?;
        let matches = key_is(json, at..key_end, key);
        at = skip_whitespace(json, key_end);
        if json.get(at) != Some(&b':') {
            return None;
        }
        let value = skip_whitespace(json, at + 1);
        if matches {
            found = Some(value);
        }
        at = skip_whitespace(json, skip_value(json, value)?);
        match json.get(at)? {
            b',' => at = skip_whitespace(json, at + 1),
            b'}' => return found,
            _ => return None,
        }
    }
}

/// Where the value of the first `key` of the object at `at` starts (a parser reads the last one:
/// for a key given once, they are the same). Keys before it are crossed, never those after.
pub fn first_member(json: &[u8], at: usize, key: &str) -> Option<usize> {
    let at = skip_whitespace(json, at);
    if json.get(at) != Some(&b'{') {
        return None;
    }
    let mut at = skip_whitespace(json, at + 1);
    loop {
        if json.get(at)? != &b'"' {
            return None;
        }
        let key_end = skip_value(json, at)?;
        let matches = key_is(json, at..key_end, key);
        at = skip_whitespace(json, key_end);
        if json.get(at) != Some(&b':') {
            return None;
        }
        let value = skip_whitespace(json, at + 1);
        if matches {
            return Some(value);
        }
        at = skip_whitespace(json, skip_value(json, value)?);
        match json.get(at)? {
            b',' => at = skip_whitespace(json, at + 1),
            _ => return None,
        }
    }
}

/// Each member of the object at `at`: its key's bytes (quotes included) and its value's; `None`
/// when the scan is not sure (see [`skip_value`]).
pub fn members(json: &[u8], at: usize) -> Option<Vec<(Range<usize>, Range<usize>)>> {
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
        let key = at..skip_value(json, at)?;
        at = skip_whitespace(json, key.end);
        if json.get(at) != Some(&b':') {
            return None;
        }
        let value = skip_whitespace(json, at + 1);
        let value = value..skip_value(json, value)?;
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
pub fn elements(json: &[u8], at: usize) -> Option<Vec<Range<usize>>> {
    if json.get(at) != Some(&b'[') {
        return None;
    }
    let mut out = Vec::new();
    let mut at = skip_whitespace(json, at + 1);
    if json.get(at) == Some(&b']') {
        return Some(out);
    }
    loop {
        let end = skip_value(json, at)?;
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
        at = skip_whitespace(json, skip_value(json, at)?);
        if json.get(at) != Some(&b',') {
            return None;
        }
        at = skip_whitespace(json, at + 1);
    }
    Some(at)
}

/// One replacement: the bytes at `range` of the source become `bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// The bytes replaced.
    pub range: Range<usize>,
    /// What stands in their place.
    pub bytes: Vec<u8>,
}

/// Writes `source` with `edits` applied. Edits must not overlap.
pub fn write_edited(source: &[u8], mut edits: Vec<Edit>, out: &mut dyn Write) -> std::io::Result<()> {
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
        // Where each value starts, found as `find` finds it, the last duplicate included.
        for path in [&path[..], &[Seg::Key("a")], &[Seg::Key("missing")], &[Seg::At(json.len() as u32 + 5)]] {
            assert_eq!(find_start(json, 0, path), find(json, 0, path).map(|r| r.start), "{path:?}");
        }
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
    fn skip_value_skips_strings_containers_and_scalars() {
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
            assert_eq!(skip_value(text.as_bytes(), 0), Some(end), "{text}");
        }
        // Cut short, or deeper than the scan follows: not sure, so no answer.
        assert_eq!(skip_value(br#""no end"#, 0), None);
        assert_eq!(skip_value(br#"{"a": [1, 2}"#, 0), None);
        assert_eq!(skip_value(b"", 0), None);
        let deep = format!("{}{}", "[".repeat(crate::scan::DEPTH + 1), "]".repeat(crate::scan::DEPTH + 1));
        assert_eq!(skip_value(deep.as_bytes(), 0), None);
        let fits = format!("{}{}", "[".repeat(crate::scan::DEPTH), "]".repeat(crate::scan::DEPTH));
        assert_eq!(skip_value(fits.as_bytes(), 0), Some(fits.len()));
    }
}
