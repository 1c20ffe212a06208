//! Building a JSON value by hand, as serde_json builds a `serde_json::Value`, for the one value
//! of a log line that is read whole: a Claude Code event's `message`. Its strings (a tool's
//! output above all) are most of it; serde_json copies each one twice when it holds escapes
//! (into a scratch buffer while decoding, then into the string), and stops at every escape.
//! Here a string is decoded straight into its own buffer, eight bytes at a time between escapes.
//!
//! What this builds, serde_json builds too, with the same repeated keys found (see
//! [`dupkeys::Tracked`]); what it is not sure of (a lone surrogate escape, nesting deeper than
//! [`Tracked::DEPTH`], anything that is not JSON) gives `None`, and the caller leaves the text
//! to serde_json, which reads it or words the error. The text is UTF-8, as its caller checked.

use serde_json::map::Entry;
use serde_json::{Map, Value};

use crate::dupkeys::{Keys, Tracked};
use crate::skip::{hex4, literal, next_stop, number_end, whitespace};

/// The value starting at byte `at` of `text`, and where it ends; repeated keys and keys written
/// with an escape go to `keys`.
pub(crate) fn value_at(text: &str, at: usize, keys: &mut Keys) -> Option<(Value, usize)> {
    thread_local! {
        // Kept from line to line: grown once to the longest string, not once a line.
        static SCRATCH: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
    }
    SCRATCH.with(|scratch| {
        let mut builder = Builder { text, keys, scratch: scratch.take() };
        let built = builder.value(at, 0);
        scratch.replace(builder.scratch);
        built
    })
}

/// A build in progress: the text, what its keys hold, and a buffer strings with escapes are
/// decoded into before each is copied once into a string of its size (grown as it went, a
/// string's buffer would be up to twice its size, and so the memory a log takes).
struct Builder<'a, 'k> {
    text: &'a str,
    keys: &'k mut Keys,
    scratch: String,
}

impl Builder<'_, '_> {
    fn value(&mut self, at: usize, depth: usize) -> Option<(Value, usize)> {
        let (text, bytes) = (self.text, self.text.as_bytes());
        match *bytes.get(at)? {
            b'"' => {
                let (string, end, _) = self.string(at + 1)?;
                Some((Value::String(string), end))
            }
            b'{' => {
                if depth == Tracked::DEPTH {
                    return None;
                }
                let mut object = Map::new();
                let mut repeated = false;
                let mut at = whitespace(bytes, at + 1);
                if bytes.get(at) == Some(&b'}') {
                    return Some((Value::Object(object), at + 1));
                }
                loop {
                    if bytes.get(at) != Some(&b'"') {
                        return None;
                    }
                    let (key, end, escaped) = self.string(at + 1)?;
                    self.keys.escaped |= escaped;
                    at = whitespace(bytes, end);
                    if bytes.get(at) != Some(&b':') {
                        return None;
                    }
                    at = whitespace(bytes, at + 1);
                    // A repeat is told at its key, and its value kept where the first one was, as a
                    // parsed object keeps it.
                    let end = match object.entry(key) {
                        Entry::Occupied(mut entry) => {
                            if !repeated {
                                repeated = true;
                                self.keys.repeat(entry.key());
                            }
                            let (member, end) = self.value(at, depth + 1)?;
                            entry.insert(member);
                            end
                        }
                        Entry::Vacant(entry) => {
                            let (member, end) = self.value(at, depth + 1)?;
                            entry.insert(member);
                            end
                        }
                    };
                    at = whitespace(bytes, end);
                    match *bytes.get(at)? {
                        b',' => at = whitespace(bytes, at + 1),
                        b'}' => return Some((Value::Object(object), at + 1)),
                        _ => return None,
                    }
                }
            }
            b'[' => {
                if depth == Tracked::DEPTH {
                    return None;
                }
                let mut items = Vec::new();
                let mut at = whitespace(bytes, at + 1);
                if bytes.get(at) == Some(&b']') {
                    return Some((Value::Array(items), at + 1));
                }
                loop {
                    let (item, end) = self.value(at, depth + 1)?;
                    items.push(item);
                    at = whitespace(bytes, end);
                    match *bytes.get(at)? {
                        b',' => at = whitespace(bytes, at + 1),
                        b']' => return Some((Value::Array(items), at + 1)),
                        _ => return None,
                    }
                }
            }
            b't' => Some((Value::Bool(true), literal(bytes, at, b"true")?)),
            b'f' => Some((Value::Bool(false), literal(bytes, at, b"false")?)),
            b'n' => Some((Value::Null, literal(bytes, at, b"null")?)),
            b'-' | b'0'..=b'9' => {
                // A number as serde_json keeps it (as written, with `arbitrary_precision`): few in a
                // message, each parsed by serde_json.
                let end = number_end(bytes, at)?;
                Some((serde_json::from_str(text.get(at..end)?).ok()?, end))
            }
            _ => None,
        }
    }

    /// The string whose contents start at `at`, decoded; where it ends (past its closing quote);
    /// and whether it held an escape. `None` for a control character, an escape JSON does not
    /// have, or a `\u` escape of half a surrogate pair alone (serde_json refuses those in what it
    /// builds).
    fn string(&mut self, start: usize) -> Option<(String, usize, bool)> {
        let (text, bytes) = (self.text, self.text.as_bytes());
        let out = &mut self.scratch;
        out.clear();
        let mut run = start;
        let mut at = start;
        loop {
            at = next_stop(bytes, at);
            match *bytes.get(at)? {
                b'"' => {
                    if run == start {
                        // No escape: the contents as they are, copied once.
                        return Some((text.get(start..at)?.to_owned(), at + 1, false));
                    }
                    out.push_str(text.get(run..at)?);
                    return Some((out.as_str().to_owned(), at + 1, true));
                }
                b'\\' => {
                    out.push_str(text.get(run..at)?);
                    at = escape(bytes, at + 1, out)?;
                    run = at;
                }
                0x00..=0x1F => return None,
                // The last few bytes, which the eight at a time did not cover.
                _ => at += 1,
            }
        }
    }
}

/// Decodes the escape after a backslash (at `at`) into `out`; returns where it ends.
fn escape(bytes: &[u8], at: usize, out: &mut String) -> Option<usize> {
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

#[cfg(test)]
mod tests {
    use super::value_at;
    use crate::dupkeys::{tracked_value, Keys};

    /// What both builds give for `text`: ours when it builds, serde_json's otherwise.
    fn both(text: &str) -> (Option<String>, Option<String>) {
        let show =
            |value: serde_json::Value, keys: Keys| format!("{value:?} {:?} {}", keys.repeated, keys.escaped);
        let mut ours = Keys::default();
        let built = value_at(text, 0, &mut ours).filter(|&(_, end)| end == text.len());
        let ours = built.map(|(value, _)| show(value, ours));
        let mut theirs = Keys::default();
        let theirs = tracked_value(text, &mut theirs).ok().map(|value| show(value, theirs));
        (ours, theirs)
    }

    #[test]
    fn what_is_built_is_what_serde_json_builds() {
        let texts = [
            r#"{"role":"user","content":[{"type":"text","text":"a\"b\\c\/d\n\t\r\b\f\u00e9\uD83D\uDE00 é日本😀"}]}"#,
            r#"{"a": 1, "b": [1.50e3, -0, 12345678901234567890123, true, false, null], "a": {"a": 2, "a": 3}}"#,
            r#"{"k\u0065y": "v", "key": "w", "x": {}, "y": [], "z": ""}"#,
            r#"  {"n": -0.5E+2 }  "#,
        ];
        for text in texts {
            let (ours, theirs) = both(text.trim());
            assert!(ours.is_some(), "{text}");
            assert_eq!(ours, theirs, "{text}");
        }
        // What serde_json refuses, or what this leaves to it.
        for text in
            [r#""\ud800""#, r#""\udc00x""#, "\"a\u{1}\"", r#"{"a" 1}"#, "[1,]", "01", r#""\x""#, r#"{"a":1"#]
        {
            assert_eq!(both(text).0, None, "{text}");
        }
    }

    #[test]
    fn spoiled_json_is_built_as_serde_json_builds_it_or_left_to_it() {
        let base = [
            r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"line one\nline \"two\"\t\\ end \u00e9"}],"id":"m"}"#,
            r#"{"type":"message","usage":{"input_tokens":3,"output_tokens":2.5e1},"content":[{"type":"tool_use","id":"c","name":"sh","input":{"cmd":"ls -la","n":[1,{"x":null}]}}]}"#,
            r#"{"content":"日本語 text with emoji 😀 and \ud83d\ude00 pairs","role":"assistant"}"#,
        ];
        const BYTES: &[u8] = b"\"\\,:{}[]0-.eE+ \x01atfnu/x";
        let mut state = 11u64;
        let mut next = |n: usize| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as usize % n
        };
        let (mut built, mut left) = (0, 0);
        for k in 0..20_000 {
            let mut text = base[k % base.len()].as_bytes().to_vec();
            for _ in 0..1 + next(2) {
                let at = next(text.len());
                match next(3) {
                    0 => text.insert(at, BYTES[next(BYTES.len())]),
                    1 => {
                        text.remove(at);
                    }
                    _ => text[at] = BYTES[next(BYTES.len())],
                }
            }
            let Ok(text) = String::from_utf8(text) else { continue };
            let (ours, theirs) = both(&text);
            match ours {
                Some(_) => {
                    built += 1;
                    assert_eq!(ours, theirs, "{text}");
                }
                None => left += 1,
            }
        }
        assert!(built > 2_000 && left > 2_000, "{built} {left}");
    }
}
