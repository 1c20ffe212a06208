//! Editing values inside JSON text in place: find the bytes of the value at a path, replace
//! only those, and leave every other byte of the file as it was.
//!
//! Writing a log back by serializing it again would change its spacing, its escapes and its
//! number formats; users diff and resume these files, so a write-back changes only the bytes of
//! the values it edits.

use std::io::Write;
use std::ops::Range;

use compaction_model::value_end;

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

fn skip_whitespace(bytes: &[u8], mut at: usize) -> usize {
    while matches!(bytes.get(at), Some(b' ' | b'\n' | b'\t' | b'\r')) {
        at += 1;
    }
    at
}

/// Whether the JSON string at `range` (quotes included) is `key`.
fn key_is(bytes: &[u8], range: Range<usize>, key: &str) -> bool {
    let Some(inner) = bytes.get(range.start + 1..range.end.saturating_sub(1)) else { return false };
    if !inner.contains(&b'\\') {
        return inner == key.as_bytes();
    }
    serde_json::from_slice::<String>(&bytes[range]).is_ok_and(|decoded| decoded == key)
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
}
