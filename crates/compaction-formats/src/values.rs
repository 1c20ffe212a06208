//! Building a JSON value by hand, as serde_json builds a `serde_json::Value`, for the one value
//! of a log line that is read whole: a Claude Code event's `message`. Its strings (a tool's
//! output above all) are most of it; serde_json copies each one twice when it holds escapes
//! (into a scratch buffer while decoding, then into the string), and stops at every escape.
//! Here a string is decoded straight into its own buffer, eight bytes at a time between escapes.
//!
//! What this builds, serde_json builds too, with the same repeated keys found (see
//! [`dupkeys::Tracked`](compaction_json::dupkeys::Tracked)); what it is not sure of (a lone surrogate escape, nesting deeper than
//! [`Tracked::DEPTH`], anything that is not JSON) gives `None`, and the caller leaves the text
//! to serde_json, which reads it or words the error. The text is UTF-8, as its caller checked.
//!
//! Given the input the line lies in ([`Left`]), the texts of a message's tool results (what a
//! `tool_result` block's `content` holds, as a string or as text blocks) are not decoded at all:
//! each is checked, counted and left in the input as a [`Text`], and the value holds an empty
//! string in its place until [`ResultsFound::take`] hands it to the reader of the block. A session's
//! tool outputs are most of what its messages hold; left in the input they cost neither a copy
//! nor fresh memory, as the OpenAI and Haystack readers leave theirs. Where each block's
//! `content` lies in the line is kept too, so a write-back replaces a result without crossing
//! the line again to find it. An Anthropic request's reader leaves the message's other texts
//! too ([`Left::texts`]): a string `content`, and the `text` of each text block.

use std::ops::Range;

use compaction_model::{JsonSource, Text};
use serde_json::map::Entry;
use serde_json::{Map, Value};

use compaction_json::dupkeys::{Keys, Tracked};
use compaction_json::scan::{literal, number_end, whitespace};

/// The value starting at byte `at` of `text`, and where it ends; repeated keys and keys written
/// with an escape go to `keys`. With `left`, the value is a message whose tool results' texts
/// are left in the input (see [`Left`]); the value is then built only if its keys are not
/// repeated on the way to them.
pub(crate) fn value_at(
    text: &str,
    at: usize,
    keys: &mut Keys,
    left: Option<&mut Left<'_>>,
) -> Option<(Value, usize)> {
    thread_local! {
        // Kept from line to line: grown once to the longest string, not once a line.
        static SCRATCH: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
    }
    SCRATCH.with(|scratch| {
        let mut builder = Builder { text, keys, scratch: scratch.take(), left, skip: false };
        let built = builder.value(at, 0, Place::Message);
        scratch.replace(builder.scratch);
        let (mut value, end) = built?;
        if let Some(left) = builder.left {
            left.found.keep_results(&mut value);
        }
        Some((value, end))
    })
}

/// The message starting at byte `at` of `text`, and where it ends, as [`value_at`] builds it
/// with [`Left::texts`], but for the texts it would leave in the input, which are skipped, not
/// checked, and stand as empty strings (for the whole of a message's texts: the tree path never
/// writes those it leaves for other blocks, whose places are all keys an encoding owns). For the
/// original a changed message is laid over.
pub(crate) fn skeleton_at(text: &str, at: usize) -> Option<(Value, usize)> {
    let mut keys = Keys::default();
    let mut builder = Builder { text, keys: &mut keys, scratch: String::new(), left: None, skip: true };
    builder.value(at, 0, Place::Message)
}

/// Where the text being built lies in its input, for the tool results' texts left there, and
/// what was found of them so far.
pub(crate) struct Left<'s> {
    pub source: &'s JsonSource,
    /// Where the text starts in the source.
    pub start: usize,
    /// Whether the message's own texts are left in the input too: its `content` when a string,
    /// and the `text` of each of its text blocks (taken with [`ResultsFound::take_content`] and
    /// [`ResultsFound::take_text`]).
    pub texts: bool,
    pub found: ResultsFound,
}

/// What the build of a message found of its tool results: their texts, left in the input, each
/// at a block of the message's `content` and, for a result of text blocks, at one of them; and
/// where each block's `content` lies in the text built from.
#[derive(Debug, Default)]
pub(crate) struct ResultsFound {
    texts: Vec<(usize, Option<usize>, Text)>,
    spans: Vec<(usize, Range<usize>)>,
    /// The message's own texts left (see [`Left::texts`]): its `content` (`None`), or the `text`
    /// of block `k`.
    own: Vec<(Option<usize>, Text)>,
}

impl ResultsFound {
    /// The text left for the `content` of block `block` (`item`: of its text block `item`).
    pub(crate) fn take(&mut self, block: usize, item: Option<usize>) -> Option<Text> {
        let at = self.texts.iter().position(|&(b, i, _)| (b, i) == (block, item))?;
        Some(self.texts.swap_remove(at).2)
    }

    /// The text left for the message's `content`, when it is a string.
    pub(crate) fn take_content(&mut self) -> Option<Text> {
        self.take_own(None)
    }

    /// The text left for the `text` of block `block`, a text block.
    pub(crate) fn take_text(&mut self, block: usize) -> Option<Text> {
        self.take_own(Some(block))
    }

    fn take_own(&mut self, block: Option<usize>) -> Option<Text> {
        let at = self.own.iter().position(|(b, _)| *b == block)?;
        Some(self.own.swap_remove(at).1)
    }

    /// Where the `content` of block `block` lies in the text the message was built from (a
    /// line: its offsets fit a [`Slot`](crate::eventlog::Slot)'s).
    pub(crate) fn span(&self, block: usize) -> Option<[u32; 2]> {
        let (_, span) = self.spans.iter().find(|(b, _)| *b == block)?;
        Some([u32::try_from(span.start).ok()?, u32::try_from(span.end).ok()?])
    }

    /// Puts back into `message` every text left at a place that turned out not to be a tool
    /// result's text (a block of another type, a result's block that is not text), so what is
    /// left is what a tool result's reader takes, and nothing else reads an empty string there.
    fn keep_results(&mut self, message: &mut Value) {
        self.own.retain_mut(|(block, text)| {
            let place = match block {
                None => message.get_mut("content"),
                Some(block) => message.get_mut("content").and_then(|c| c.get_mut(*block)),
            };
            let Some(place) = place else { return false };
            // A string `content` is always the message's text; a block's `text` only a text
            // block's (any other block is kept whole, as it was read).
            let keep = block.is_none() || place.get("type").and_then(Value::as_str) == Some("text");
            if !keep {
                if let Some(place) = place.get_mut("text") {
                    *place = Value::String(std::mem::take(text).into_string());
                }
            }
            keep
        });
        self.texts.retain_mut(|(block, item, text)| {
            let Some(block) = message.get_mut("content").and_then(|c| c.get_mut(*block)) else {
                return false;
            };
            let is = |value: &Value, kind: &str| value.get("type").and_then(Value::as_str) == Some(kind);
            let result = is(block, "tool_result");
            let (place, keep) = match item {
                None => (block.get_mut("content"), result),
                Some(item) => match block.get_mut("content").and_then(|c| c.get_mut(*item)) {
                    Some(part) => {
                        let keep = result && is(part, "text");
                        (part.get_mut("text"), keep)
                    }
                    None => (None, false),
                },
            };
            if !keep {
                if let Some(place) = place {
                    *place = Value::String(std::mem::take(text).into_string());
                }
            }
            keep
        });
    }
}

/// Where in a message (see [`Left`]) the value being built lies.
#[derive(Clone, Copy)]
enum Place {
    /// The message.
    Message,
    /// Its `content`.
    Blocks,
    /// Block `k` of it.
    Block(usize),
    /// The `content` of block `k`.
    Result(usize),
    /// Block `j` of that.
    Part(usize, usize),
    /// The `text` of that.
    PartText(usize, usize),
    /// The `text` of block `k` of the message.
    BlockText(usize),
    Elsewhere,
}

impl Place {
    fn member(self, key: &str) -> Place {
        match (self, key) {
            (Place::Message, "content") => Place::Blocks,
            (Place::Block(k), "content") => Place::Result(k),
            (Place::Block(k), "text") => Place::BlockText(k),
            (Place::Part(k, j), "text") => Place::PartText(k, j),
            _ => Place::Elsewhere,
        }
    }

    fn item(self, index: usize) -> Place {
        match self {
            Place::Blocks => Place::Block(index),
            Place::Result(k) => Place::Part(k, index),
            _ => Place::Elsewhere,
        }
    }

    /// Where a string here would be left in the input: a block's `content`, or a text of it;
    /// with `texts`, the message's `content` or a block's `text` too.
    fn left(self, texts: bool) -> Option<Slot> {
        match self {
            Place::Result(k) => Some(Slot::Result(k, None)),
            Place::PartText(k, j) => Some(Slot::Result(k, Some(j))),
            Place::Blocks if texts => Some(Slot::Own(None)),
            Place::BlockText(k) if texts => Some(Slot::Own(Some(k))),
            _ => None,
        }
    }
}

/// Where a text left in the input goes: a tool result's (a block's `content`, or the text of
/// one of its blocks), or the message's own (its `content`, or a block's `text`).
#[derive(Clone, Copy)]
enum Slot {
    Result(usize, Option<usize>),
    Own(Option<usize>),
}

/// A build in progress: the text, what its keys hold, and a buffer strings with escapes are
/// decoded into before each is copied once into a string of its size (grown as it went, a
/// string's buffer would be up to twice its size, and so the memory a log takes).
struct Builder<'a, 'k, 'l, 's> {
    text: &'a str,
    keys: &'k mut Keys,
    scratch: String,
    left: Option<&'l mut Left<'s>>,
    /// Whether the strings a [`Left`] with `texts` would leave are skipped (see [`skeleton_at`]).
    skip: bool,
}

impl Builder<'_, '_, '_, '_> {
    fn value(&mut self, at: usize, depth: usize, place: Place) -> Option<(Value, usize)> {
        let (text, bytes) = (self.text, self.text.as_bytes());
        match *bytes.get(at)? {
            b'"' => {
                if self.skip && place.left(true).is_some() {
                    let end = compaction_json::scan::skip_value(bytes, at)?;
                    return Some((Value::String(String::new()), end));
                }
                if let Some(left) = self.left.as_deref_mut() {
                    if let Some(slot) = place.left(left.texts) {
                        // Checked and counted where it is; the string in the value is a stand-in.
                        let (string, end) = left.source.string_at(left.start + at)?;
                        match slot {
                            Slot::Result(block, item) => left.found.texts.push((block, item, string)),
                            Slot::Own(block) => left.found.own.push((block, string)),
                        }
                        return Some((Value::String(String::new()), end - left.start));
                    }
                }
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
                    let inner = place.member(&key);
                    let end = match object.entry(key) {
                        Entry::Occupied(mut entry) => {
                            // Which of a repeated key's values a text left for it belongs to is
                            // not followed: serde_json builds such a message.
                            if self.left.is_some() && !matches!(place, Place::Elsewhere) {
                                return None;
                            }
                            if !repeated {
                                repeated = true;
                                self.keys.repeat(entry.key());
                            }
                            let (member, end) = self.value(at, depth + 1, inner)?;
                            entry.insert(member);
                            end
                        }
                        Entry::Vacant(entry) => {
                            let (member, end) = self.value(at, depth + 1, inner)?;
                            if let (Some(left), Place::Result(block)) = (self.left.as_deref_mut(), inner) {
                                left.found.spans.push((block, at..end));
                            }
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
                    let (item, end) = self.value(at, depth + 1, place.item(items.len()))?;
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
        let (end, escaped) =
            compaction_json::string::decode_into(self.text, start, &mut self.scratch).ok()?;
        if escaped {
            Some((self.scratch.as_str().to_owned(), end, true))
        } else {
            // No escape: the contents as they are, copied once.
            Some((self.text.get(start..end - 1)?.to_owned(), end, false))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::value_at;
    use compaction_json::dupkeys::{tracked_value, Keys};

    /// What both builds give for `text`: ours when it builds, serde_json's otherwise.
    fn both(text: &str) -> (Option<String>, Option<String>) {
        let show =
            |value: serde_json::Value, keys: Keys| format!("{value:?} {:?} {}", keys.repeated, keys.escaped);
        let mut ours = Keys::default();
        let built = value_at(text, 0, &mut ours, None).filter(|&(_, end)| end == text.len());
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
