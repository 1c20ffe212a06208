//! An OpenAI Chat Completions request (`{"model", "tools", "messages": [...]}`) read and written
//! back without a JSON tree of the whole file.
//!
//! Most of such a file is the messages' `content` strings, tool output above all. Here each
//! message is read from its own bytes: a string `content` is checked and left in the input
//! ([`JsonSource::string_at`]), only the message's other, small members are parsed, and the
//! envelope (model, tools, settings) is parsed on its own. Written back, the file keeps every
//! byte outside the messages array as it was, and each message a command left alone is copied
//! from the input; only the changed ones are encoded, laid over their originals.
//!
//! Anything this reader is not sure of (another format, a key twice, bad JSON, a message that
//! does not read) gives `None`, and the tree path reads the file and words any error, so the
//! two paths never disagree on what a file holds.

use std::io::Write;
use std::ops::Range;

use compaction_model::{JsonSource, Message, Text};
use serde_json::{Map, Value};

use crate::detect::message_format;
use crate::document::{read_tools, Locator};
use crate::error::Error;
use crate::pairing::OpenCalls;
use crate::splice::value_end;
use crate::{openai, overlay, Format};

/// Where a request's parts sit in its bytes.
#[derive(Debug)]
pub(crate) struct Spans {
    /// The request object, from its `{` to just past its `}`.
    object: Range<usize>,
    /// Each message's bytes.
    messages: Vec<Range<usize>>,
}

/// A request read: its messages, its tools and where everything sits.
pub(crate) struct Read {
    pub messages: Vec<Message>,
    pub tools: Vec<compaction_model::ToolSpec>,
    pub spans: Spans,
}

/// Top-level keys that make the file something else (Responses input, SWE-agent or OpenHands
/// history, a trajectory, a Codex record) or an Anthropic request (`system`): left to the tree
/// path, which tells them apart.
const OTHER_FORMATS: &[&str] = &["input", "history", "traj", "payload", "system"];

/// Reads `source` as an OpenAI request when it plainly is one; `None` for anything else, which
/// the tree path then reads (and words the error of, if any).
pub(crate) fn read(source: &JsonSource, name: &str) -> Option<Read> {
    let bytes = source.as_bytes();
    let start = skip_whitespace(bytes, if bytes.starts_with(b"\xEF\xBB\xBF") { 3 } else { 0 });
    let (members, end) = members(bytes, start)?;
    if skip_whitespace(bytes, end) != bytes.len() {
        return None;
    }
    if members.iter().any(|(key, _)| OTHER_FORMATS.contains(&key.as_str())) {
        return None;
    }
    let mut envelope = Map::new();
    let mut array = None;
    for (key, range) in members {
        if key == "messages" {
            array = Some(range);
            // The tree path's detection and tools look at the envelope; the messages are read
            // below.
            envelope.insert(key, Value::Array(Vec::new()));
        } else {
            envelope.insert(key, serde_json::from_slice(&bytes[range]).ok()?);
        }
    }
    let array = array.filter(|range| bytes[range.start] == b'[')?;
    let anthropic_tools = envelope
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|tools| tools.iter().any(|t| t.get("input_schema").is_some()));
    if anthropic_tools {
        return None;
    }
    let spans = elements(bytes, array)?;
    // An empty conversation is an error the tree path words.
    if spans.is_empty() {
        return None;
    }
    let lean: Vec<(Map<String, Value>, Option<Text>)> =
        spans.iter().map(|span| lean_message(source, span.clone())).collect::<Option<_>>()?;
    // The first message that tells a format decides, as the tree path's detection has it.
    match lean.iter().find_map(|(object, _)| message_format(object)) {
        None | Some(Format::OpenAi) => {}
        Some(_) => return None,
    }
    let mut calls = OpenCalls::default();
    let messages = lean
        .into_iter()
        .map(|(object, text)| openai::read_object(&object, text, &mut calls).ok())
        .collect::<Option<Vec<_>>>()?;
    let tools = read_tools(&envelope, &Locator::messages(name)).ok()?;
    Some(Read { messages, tools, spans: Spans { object: start..end, messages: spans } })
}

fn skip_whitespace(bytes: &[u8], mut at: usize) -> usize {
    while matches!(bytes.get(at), Some(b' ' | b'\n' | b'\t' | b'\r')) {
        at += 1;
    }
    at
}

/// The members of the JSON object starting at `at`, each key decoded with its value's bytes,
/// and where the object ends. The values are found by a quick scan, not checked: whoever uses
/// one parses it. `None` when this is not an object as the scan reads it, or a key comes twice
/// (a JSON reader keeps the last; the tree path words that).
fn members(bytes: &[u8], at: usize) -> Option<(Vec<(String, Range<usize>)>, usize)> {
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    let mut members: Vec<(String, Range<usize>)> = Vec::new();
    let mut at = skip_whitespace(bytes, at + 1);
    if bytes.get(at) == Some(&b'}') {
        return Some((members, at + 1));
    }
    loop {
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let key_end = value_end(bytes, at)?;
        let key: String = serde_json::from_slice(&bytes[at..key_end]).ok()?;
        if members.iter().any(|(seen, _)| *seen == key) {
            return None;
        }
        at = skip_whitespace(bytes, key_end);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        at = skip_whitespace(bytes, at + 1);
        let value_end = value_end(bytes, at)?;
        members.push((key, at..value_end));
        at = skip_whitespace(bytes, value_end);
        match bytes.get(at)? {
            b',' => at = skip_whitespace(bytes, at + 1),
            b'}' => return Some((members, at + 1)),
            _ => return None,
        }
    }
}

/// Each element's bytes in the array at `array` (brackets included).
fn elements(bytes: &[u8], array: Range<usize>) -> Option<Vec<Range<usize>>> {
    let mut spans = Vec::new();
    let mut at = skip_whitespace(bytes, array.start + 1);
    if at + 1 == array.end && bytes[at] == b']' {
        return Some(spans);
    }
    loop {
        let end = value_end(bytes, at)?;
        spans.push(at..end);
        at = skip_whitespace(bytes, end);
        match bytes.get(at)? {
            b',' => at = skip_whitespace(bytes, at + 1),
            b']' if at + 1 == array.end => return Some(spans),
            _ => return None,
        }
    }
}

/// A message's members, parsed, but for a string `content`: that is checked and left in the
/// input (the text returned), and the object holds an empty string in its place.
fn lean_message(source: &JsonSource, span: Range<usize>) -> Option<(Map<String, Value>, Option<Text>)> {
    let bytes = source.as_bytes();
    let (members, end) = members(bytes, span.start)?;
    if end != span.end {
        return None;
    }
    let mut object = Map::with_capacity(members.len());
    let mut text = None;
    for (key, range) in members {
        let value = if key == "content" && bytes[range.start] == b'"' {
            let (content, end) = source.string_at(range.start)?;
            if end != range.end {
                return None;
            }
            text = Some(content);
            Value::String(String::new())
        } else {
            serde_json::from_slice(&bytes[range]).ok()?
        };
        object.insert(key, value);
    }
    Some((object, text))
}

/// Writes the request back with `messages` in place of those read, when `changed` says which
/// of them a command changed and each of those carries the marker a rewrite leaves in its meta:
/// the envelope and each unchanged message as their input bytes, each changed message encoded
/// over its original. `false`, with nothing written, when that cannot be told: then the tree
/// path writes the file.
pub(crate) fn write(
    source: &[u8],
    spans: &Spans,
    messages: &[Message],
    changed: Option<&[usize]>,
    out: &mut dyn Write,
) -> Result<bool, Error> {
    let Some(changed) = changed.filter(|_| messages.len() == spans.messages.len()) else {
        return Ok(false);
    };
    let mut kept = vec![true; messages.len()];
    for &index in changed {
        let Some(slot) = kept.get_mut(index) else { return Ok(false) };
        // OpenAI messages are read without meta, and every command that rewrites one leaves its
        // marker there; one without is told from the message read only by the tree path.
        if messages[index].meta.is_empty() {
            return Ok(false);
        }
        *slot = false;
    }
    // The envelope up to the first message, and after the last, as they were.
    let (first_message, last_message) = match (spans.messages.first(), spans.messages.last()) {
        (Some(first), Some(last)) => (first.start, last.end),
        _ => return Ok(false),
    };
    out.write_all(&source[spans.object.start..first_message])?;
    let mut index = 0;
    let mut first = true;
    while index < messages.len() {
        if kept[index] {
            // A run of messages left alone is one piece of the input, separators and all.
            let mut last = index;
            while last + 1 < messages.len() && kept[last + 1] {
                last += 1;
            }
            if !first {
                out.write_all(b",")?;
            }
            out.write_all(&source[spans.messages[index].start..spans.messages[last].end])?;
            first = false;
            index = last + 1;
            continue;
        }
        let fresh = openai::encode(std::slice::from_ref(&messages[index]));
        let original = (fresh.len() == 1)
            .then(|| serde_json::from_slice::<Value>(&source[spans.messages[index].clone()]))
            .transpose()?;
        for value in fresh {
            if !first {
                out.write_all(b",")?;
            }
            match &original {
                Some(original) => {
                    serde_json::to_writer(&mut *out, &overlay::overlay(original, value, &openai::SHAPE))?
                }
                None => serde_json::to_writer(&mut *out, &value)?,
            }
            first = false;
        }
        index += 1;
    }
    out.write_all(&source[last_message..spans.object.end])?;
    out.write_all(b"\n")?;
    Ok(true)
}
