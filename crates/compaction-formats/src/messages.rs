//! An Anthropic Messages request (`{"model", "system", "tools", "messages": [...]}`) read and
//! written back without a JSON tree of the whole file, as [`crate::request`] reads an OpenAI one.
//!
//! Each message is built from its own bytes ([`values::value_at`]) with its texts left in the
//! input: a string `content`, each text block's `text`, and each tool result's `content` (a
//! string, or the texts of its blocks). Only the rest, small, is built; the envelope (`system`,
//! `tools`, `model`, the settings) is parsed on its own, and the message built is read by the
//! tree path's own reader ([`anthropic::read_blocks`]). Written back, every byte outside the
//! messages that changed is copied from the input; each changed one is encoded, laid over its
//! original, in its style.
//!
//! Anything this reader is not sure of gives `None`, and the tree path reads the file and words
//! any error: a key twice in the envelope, a message or a block (or written with an escape in a
//! message), bad JSON, a `system` that is `null`, a message of role `system`, a `compaction`
//! block, a body the tree path would read as JSON Lines.

use std::io::Write;
use std::ops::Range;
use std::sync::OnceLock;

use compaction_json::dupkeys::{scan_keys, Keys};
use compaction_json::scan::{skip_value as value_end, whitespace as skip_whitespace};
use compaction_model::{JsonSource, Message, Role, SharedObject};
use serde_json::{Map, Value};

use crate::anthropic::{self, Opaque};
use crate::document::{first_two_lines, read_tools, Locator};
use crate::error::Error;
use crate::overlay;
use crate::pairing::OpenCalls;
use crate::request::{self, in_style, object, Read, Spans};
use crate::values::{self, Left, ResultsFound};

/// Keys that make the object something the tree path reads otherwise: a message (one line of
/// JSON Lines).
const NOT_AN_ENVELOPE: &[&str] = &["role", "_role"];

/// Reads `source` as an Anthropic request when it plainly is one; `None` for anything else,
/// which the tree path then reads (and words the error of, if any). Where the messages sit is
/// kept only when `keep` (to write the file back).
pub(crate) fn read(source: &JsonSource, name: &str, keep: bool) -> Option<Read> {
    let bytes = source.as_bytes();
    let body = if bytes.starts_with(b"\xEF\xBB\xBF") { 3 } else { 0 };
    let start = skip_whitespace(bytes, body);
    if bytes.get(start) != Some(&b'{') {
        return None;
    }
    // A second line that starts an object makes the tree path take the file for JSON Lines.
    if let [_, Some((_, second))] = first_two_lines(&bytes[body..]) {
        if second.first() == Some(&b'{') {
            return None;
        }
    }
    let text = simdutf8::basic::from_utf8(bytes).ok()?;
    let mut members: Vec<Option<(String, Range<usize>)>> = Vec::new();
    let mut read = Messages { keep, ..Messages::default() };
    let end = object(bytes, start, |key, at| {
        if NOT_AN_ENVELOPE.contains(&key) {
            return None;
        }
        if key == "messages" {
            members.push(None);
            return read.array(source, text, at);
        }
        let end = value_end(bytes, at)?;
        members.push(Some((key.to_owned(), at..end)));
        Some(end)
    })?;
    if skip_whitespace(bytes, end) != bytes.len() || !members.iter().any(Option::is_none) {
        return None;
    }
    let mut envelope = Map::new();
    let mut repeated = Vec::new();
    for member in members {
        match member {
            Some((key, range)) => {
                envelope.insert(key, strict(&bytes[range], &mut repeated)?);
            }
            None => {
                envelope.insert("messages".to_owned(), Value::Array(Vec::new()));
                if read.keys.repeated.is_some() {
                    repeated.push(std::mem::take(&mut read.keys));
                }
            }
        }
    }
    let mut messages = read.messages;
    match envelope.get("system") {
        None => {}
        // Written back, a `null` system is removed: the tree path does that.
        Some(Value::Null) => return None,
        Some(system) => {
            let parts = anthropic::system_parts(system).ok()?;
            messages.insert(0, Message { role: Role::System, parts, name: None, meta: SharedObject::new() });
            for first in &mut read.firsts {
                *first += 1;
            }
        }
    }
    // An empty conversation is an error the tree path words.
    if messages.is_empty() {
        return None;
    }
    read.firsts.push(messages.len());
    let tools = read_tools(&envelope, &Locator::messages(name)).ok()?;
    let model = envelope.get("model").and_then(Value::as_str).map(str::to_owned);
    let spans = match keep {
        true => Spans { messages: read.spans, contents: Vec::new(), firsts: read.firsts },
        false => Spans { messages: Vec::new(), contents: Vec::new(), firsts: Vec::new() },
    };
    Some(Read { messages, tools, spans, model, repeated, opaque: read.opaque.note() })
}

/// The JSON value `json`, with the objects in it that repeat a key (as written, as the tree
/// path's scan compares them) added to `repeated`. Strict JSON only: what Python's dialect adds,
/// the tree path reads with the whole file, which a value read alone does not follow.
fn strict(json: &[u8], repeated: &mut Vec<Keys>) -> Option<Value> {
    let value = serde_json::from_slice(json).ok()?;
    // Only objects can repeat a key.
    if matches!(json.first(), Some(b'{' | b'[')) {
        let keys = scan_keys(json);
        if keys.repeated.is_some() {
            repeated.push(keys);
        }
    }
    Some(value)
}

/// The messages array as read so far.
#[derive(Default)]
struct Messages {
    keep: bool,
    messages: Vec<Message>,
    calls: OpenCalls,
    opaque: Opaque,
    /// The repeated keys found in the messages (none written with an escape).
    keys: Keys,
    /// Each message's bytes, and the index of the first message read from it, when `keep`.
    spans: Vec<Range<usize>>,
    firsts: Vec<usize>,
}

impl Messages {
    /// Reads the array at `at`; where it ends.
    fn array(&mut self, source: &JsonSource, text: &str, at: usize) -> Option<usize> {
        let bytes = text.as_bytes();
        if bytes.get(at) != Some(&b'[') {
            return None;
        }
        let mut at = skip_whitespace(bytes, at + 1);
        if bytes.get(at) == Some(&b']') {
            return Some(at + 1);
        }
        loop {
            let end = self.message(source, text, at)?;
            at = skip_whitespace(bytes, end);
            match bytes.get(at)? {
                b',' => at = skip_whitespace(bytes, at + 1),
                b']' => return Some(at + 1),
                _ => return None,
            }
        }
    }

    /// Reads the message at `at`; where it ends.
    fn message(&mut self, source: &JsonSource, text: &str, at: usize) -> Option<usize> {
        let mut left = Left { source, start: 0, texts: true, found: ResultsFound::default() };
        let (value, end) = values::value_at(text, at, &mut self.keys, Some(&mut left))?;
        // A key written with an escape is compared as written by the tree path's scan, and as
        // decoded here.
        if self.keys.escaped || !value.is_object() {
            return None;
        }
        // A system message in the list goes to the envelope when written back.
        if value.get("role").and_then(Value::as_str) == Some("system") {
            return None;
        }
        let first = self.messages.len();
        let read = anthropic::read_blocks(value, &mut self.calls, &mut self.opaque, &mut left.found).ok()?;
        for read in read {
            // The API dropped what comes before a compaction block: the tree path hides it.
            if read.message.parts.iter().any(|part| anthropic::opaque_kind(part) == Some("compaction")) {
                return None;
            }
            self.messages.push(read.message);
        }
        if self.keep {
            self.spans.push(at..end);
            self.firsts.push(first);
        }
        Some(end)
    }
}

/// Writes the request back with `messages` in place of those read, when `changed` says which
/// of them a command changed, each of those carries the marker a rewrite leaves in its meta, and
/// none is the system prompt: every byte of the input but those of the messages holding the
/// changed ones, each encoded over its original in its style. `false`, with nothing written,
/// when that cannot be told: then the tree path writes the file.
pub(crate) fn write(
    source: &[u8],
    spans: &Spans,
    messages: &[Message],
    changed: Option<&[usize]>,
    out: &mut dyn Write,
) -> Result<bool, Error> {
    let firsts = &spans.firsts;
    let Some(changed) = changed.filter(|_| firsts.last() == Some(&messages.len())) else {
        return Ok(false);
    };
    let mut units = Vec::new();
    for &index in changed {
        // Messages are read without meta, and every command that rewrites one leaves its
        // marker there; one without is told from the message read only by the tree path.
        match messages.get(index) {
            Some(message) if !message.meta.is_empty() && message.role != Role::System => {}
            _ => return Ok(false),
        }
        // The system prompt is read before the first message (`firsts[0]`).
        let unit = firsts[..firsts.len() - 1].partition_point(|&first| first <= index);
        let Some(unit) = unit.checked_sub(1) else { return Ok(false) };
        units.push(unit);
    }
    units.sort_unstable();
    units.dedup();
    let ascii = OnceLock::new();
    let encode = |&unit: &usize| {
        let group: Vec<&Message> = messages[firsts[unit]..firsts[unit + 1]].iter().collect();
        encode_changed(source, spans.messages[unit].clone(), &group, &ascii)
    };
    request::write_over(source, &spans.messages, &units, encode, out)?;
    Ok(true)
}

/// The JSON of the messages `group`, read from the message at `span`, laid over that original
/// and written in its style, as the tree path writes a changed message.
fn encode_changed(
    source: &[u8],
    span: Range<usize>,
    group: &[&Message],
    ascii: &OnceLock<bool>,
) -> Result<Vec<u8>, Error> {
    let original = skeleton(source, span.clone())
        .ok_or_else(|| Error::WriteBack { reason: "a message no longer reads as it did".into() })?;
    let prefer_string = original.get("content").is_some_and(Value::is_string);
    let fresh = anthropic::encode_group(group, prefer_string);
    let value = overlay::overlay(&original, fresh, &anthropic::SHAPE);
    in_style(source, span.start, &[value], b"", ascii)
}

/// The original of a changed message, to lay its encoding over: built as it was read, its texts
/// standing as empty strings (each is a key the encoding owns, so none of them is written).
fn skeleton(source: &[u8], span: Range<usize>) -> Option<Value> {
    let text = simdutf8::basic::from_utf8(&source[span.clone()]).ok()?;
    let (value, end) = values::skeleton_at(text, 0)?;
    (end == span.len()).then_some(value)
}
