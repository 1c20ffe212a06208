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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use compaction_model::{JsonSource, Message};
use serde_json::{Map, Value};

use crate::document::{read_tools, Locator};
use crate::error::Error;
use crate::format::Format;
use crate::openai::{Apart, Prepared};
use crate::pairing::OpenCalls;
use crate::shapes::message_format;
use crate::style::{margin, Style};
use crate::threads;
use crate::{haystack, openai, overlay};
use compaction_json::dupkeys::{scan_keys, Keys};
use compaction_json::scan::{skip_value as value_end, whitespace as skip_whitespace};

pub(crate) use crate::kept::RequestSpans as Spans;

/// A request read (Chat Completions here, Messages in `messages.rs`): its messages, its tools,
/// where everything sits, and what the tree path would note of it.
pub(crate) struct Read {
    pub messages: Vec<Message>,
    pub tools: Vec<compaction_model::ToolSpec>,
    pub spans: Spans,
    /// The envelope's `model`, when it is a string.
    pub model: Option<String>,
    /// The objects found repeating a key, in the order of the file. The request's own members
    /// and each message's are known not to (the reader gives up on those), so only the values
    /// it parses are scanned, never the contents it leaves in the input.
    pub repeated: Vec<Keys>,
    /// Blocks kept as opaque text (a Messages request's; a Chat Completions request has none).
    pub opaque: Option<crate::notes::Note>,
}

/// Top-level keys that make the file something else (Responses input, SWE-agent or OpenHands
/// history, a trajectory, a Codex record) or an Anthropic request (`system`): left to the tree
/// path, which tells them apart.
const OTHER_FORMATS: &[&str] = &["input", "history", "traj", "payload", "system"];

/// Reads `source` as an OpenAI request when it plainly is one; `None` for anything else, which
/// the tree path then reads (and words the error of, if any). Where the messages sit is found
/// only when `keep` (to write the file back): a large request's messages are many, and their
/// places about a tenth of the memory the read holds beside the file's own bytes.
///
/// One pass: the messages are read where the `messages` array is met, each string `content`
/// checked once and left in the input; the envelope's other members are only found on the way,
/// and parsed once the file is known to be a request (a file of another format costs a scan).
pub(crate) fn read(source: &JsonSource, name: &str, keep: bool) -> Option<Read> {
    let bytes = source.as_bytes();
    let start = skip_whitespace(bytes, if bytes.starts_with(b"\xEF\xBB\xBF") { 3 } else { 0 });
    if bytes.get(start) == Some(&b'[') {
        return read_bare(source, start, keep);
    }
    // The envelope's members in order, the messages' place among them marked by `None`.
    let mut members: Vec<Option<(String, Range<usize>)>> = Vec::new();
    let mut prepared = Runs::default();
    let mut spans = Vec::new();
    let mut contents = Vec::new();
    let mut in_messages = Vec::new();
    let end = object(bytes, start, |key, at| {
        if OTHER_FORMATS.contains(&key) {
            return None;
        }
        if key == "messages" {
            members.push(None);
            let places = Places { keep, spans: &mut spans, contents: &mut contents };
            return messages(source, at, &mut prepared, places, &mut in_messages);
        }
        let end = value_end(bytes, at)?;
        members.push(Some((key.to_owned(), at..end)));
        Some(end)
    })?;
    // An empty conversation is an error the tree path words.
    if skip_whitespace(bytes, end) != bytes.len() || prepared.is_empty() {
        return None;
    }
    // The tree path's detection and tools look at the envelope, the messages left out; repeated
    // keys are listed in the order of the file.
    let mut envelope = Map::new();
    let mut repeated = Vec::new();
    for member in members {
        match member {
            Some((key, range)) => {
                envelope.insert(key, parse(&bytes[range], &mut repeated)?);
            }
            None => {
                envelope.insert("messages".to_owned(), Value::Array(Vec::new()));
                repeated.append(&mut in_messages);
            }
        }
    }
    let anthropic_tools = envelope
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|tools| tools.iter().any(|t| t.get("input_schema").is_some()));
    if anthropic_tools {
        return None;
    }
    let messages = paired(prepared)?;
    let tools = read_tools(&envelope, &Locator::messages(name)).ok()?;
    let model = envelope.get("model").and_then(Value::as_str).map(str::to_owned);
    Some(Read {
        messages,
        tools,
        spans: Spans { messages: spans, contents, firsts: Vec::new() },
        model,
        repeated,
        opaque: None,
    })
}

/// The messages read, each tool result paired with its call in message order: those of the
/// first run were paired as they were read, those of the second are paired here, after them;
/// `None` when one cannot be paired.
fn paired(runs: Runs) -> Option<Vec<Message>> {
    let Runs { mut messages, mut calls, rest } = runs;
    // Room enough already, when the first run foresaw the count (see `Run::read`).
    messages.reserve_exact(rest.iter().map(Vec::len).sum());
    // Each block of prepared messages is let go of once paired.
    for block in rest {
        for message in block {
            let message = message.pair(&mut calls, &messages).ok()?;
            messages.push(message);
        }
    }
    Some(messages)
}

/// How many items of a bare array the tree path's detection looks at for a Responses item.
const LOOK: usize = 50;

/// Reads `source` as a bare array of Chat Completions messages (no envelope, as tau-bench's
/// trajectories and many logs hold them), the array at `start`; `None` for anything the tree
/// path would not read as one, such as an array with a Responses item among its first.
fn read_bare(source: &JsonSource, start: usize, keep: bool) -> Option<Read> {
    let bytes = source.as_bytes();
    if has_responses_item(bytes, start) {
        return None;
    }
    let (mut prepared, mut spans, mut contents, mut repeated) =
        (Runs::default(), Vec::new(), Vec::new(), Vec::new());
    let places = Places { keep, spans: &mut spans, contents: &mut contents };
    let end = messages(source, start, &mut prepared, places, &mut repeated)?;
    if skip_whitespace(bytes, end) != bytes.len() || prepared.is_empty() {
        return None;
    }
    let messages = paired(prepared)?;
    let spans = Spans { messages: spans, contents, firsts: Vec::new() };
    Some(Read { messages, tools: Vec::new(), spans, model: None, repeated, opaque: None })
}

/// Whether one of the first [`LOOK`] items of the array at `start` is a Responses item, as
/// [`crate::responses::is_item`] tells one (by its `type`), which makes the tree path read the
/// array as Responses items; also `true` when that cannot be told.
fn has_responses_item(bytes: &[u8], start: usize) -> bool {
    let mut at = skip_whitespace(bytes, start + 1);
    for _ in 0..LOOK {
        match bytes.get(at) {
            Some(b'{') => {}
            Some(b']') => return false,
            _ => return true,
        }
        let Some(end) = value_end(bytes, at) else { return true };
        let mut kind = None;
        let mut role = false;
        let walked = object(bytes, at, |key, at| {
            let end = value_end(bytes, at)?;
            match key {
                "type" => kind = Some(serde_json::from_slice::<Value>(&bytes[at..end]).ok()?),
                "role" => role = true,
                _ => {}
            }
            Some(end)
        });
        if walked != Some(end) {
            return true;
        }
        let mut item = Map::new();
        if let Some(kind) = kind {
            item.insert("type".to_owned(), kind);
        }
        if role {
            item.insert("role".to_owned(), Value::Null);
        }
        if crate::responses::is_item(&item) {
            return true;
        }
        at = skip_whitespace(bytes, end);
        match bytes.get(at) {
            Some(b',') => at = skip_whitespace(bytes, at + 1),
            _ => return false,
        }
    }
    false
}

/// The JSON value `json`, with the objects in it that repeat a key added to `repeated`.
fn parse(json: &[u8], repeated: &mut Vec<Keys>) -> Option<Value> {
    let value = compaction_model::value_from_slice(json).ok()?;
    // Only objects can repeat a key.
    if json.first() == Some(&b'{') || json.first() == Some(&b'[') {
        let keys = scan_keys(json);
        if keys.repeated.is_some() {
            repeated.push(keys);
        }
    }
    Some(value)
}

/// Walks the JSON object starting at `at`: each member's key, decoded, and where its value
/// starts go to `value`, which reads the value and says where it ends. Returns where the object
/// ends; `None` when this is not an object as the walk reads it, `value` gives up, or a key comes
/// twice (a JSON reader keeps the last; the tree path words that).
pub(crate) fn object(
    bytes: &[u8],
    at: usize,
    mut value: impl FnMut(&str, usize) -> Option<usize>,
) -> Option<usize> {
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    let mut keys: Vec<String> = Vec::new();
    let mut at = skip_whitespace(bytes, at + 1);
    if bytes.get(at) == Some(&b'}') {
        return Some(at + 1);
    }
    loop {
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let key_end = value_end(bytes, at)?;
        let Value::String(key) = compaction_model::value_from_slice(&bytes[at..key_end]).ok()? else {
            return None;
        };
        if keys.contains(&key) {
            return None;
        }
        at = skip_whitespace(bytes, key_end);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        at = skip_whitespace(bytes, at + 1);
        at = skip_whitespace(bytes, value(&key, at)?);
        keys.push(key);
        match bytes.get(at)? {
            b',' => at = skip_whitespace(bytes, at + 1),
            b'}' => return Some(at + 1),
            _ => return None,
        }
    }
}

/// A message as read here: its members parsed, but for a string `content`, which is left in the
/// input, and `tool_calls`, made calls already (both read apart, and placeholders of their
/// kind in the object, which detection looks at).
type Lean = (Map<String, Value>, Apart);

/// The messages read: those of the first run, paired as it read them (and the calls it left
/// open), and those of the second, read up to their pairing, which must wait for the first.
///
/// The first run pairs its messages as it reads them so that a large file's messages are not
/// held twice, once prepared and once paired (issue 31, item 13).
#[derive(Default)]
struct Runs {
    messages: Vec<Message>,
    calls: OpenCalls,
    rest: Vec<Vec<Prepared>>,
}

impl Runs {
    /// Whether no message was read.
    fn is_empty(&self) -> bool {
        self.messages.is_empty() && self.rest.iter().all(Vec::is_empty)
    }
}

/// Where the messages read are to go: each message's bytes and its string `content`'s, found
/// only when `keep` (to write the file back).
struct Places<'a> {
    keep: bool,
    spans: &'a mut Vec<Range<usize>>,
    contents: &'a mut Vec<Option<Range<usize>>>,
}

/// The second run's prepared messages come in blocks of this many, each let go of once paired.
const BLOCK: usize = 4096;

/// Once the first run has read this many messages, it makes room for as many as the array
/// seems to hold: the second run's are appended to them, and growing the list then would hold
/// it twice for a while, beside the second run's messages not yet paired.
const FORESEE_AFTER: usize = 1024;

/// Below this many bytes of messages one thread reads them all; starting another costs more.
const PARALLEL_BYTES: usize = 1 << 20;

/// Reads the messages array starting at `at` into `prepared` and their places into `places`,
/// and the objects in them that repeat a key into `repeated`; returns where the array ends.
///
/// On two or more cores a second thread starts at what looks like a message near the middle of
/// the rest of the file (see [`haystack::guess_message`]). Its messages are used only when the
/// first thread, reading from the start, reaches that very byte as the start of a message, so a
/// wrong guess costs time, never correctness.
fn messages(
    source: &JsonSource,
    at: usize,
    prepared: &mut Runs,
    places: Places<'_>,
    repeated: &mut Vec<Keys>,
) -> Option<usize> {
    let bytes = source.as_bytes();
    if bytes.get(at) != Some(&b'[') {
        return None;
    }
    let first = skip_whitespace(bytes, at + 1);
    if bytes.get(first) == Some(&b']') {
        return Some(first + 1);
    }
    let rest = bytes.len() - first;
    let guess = (threads::two_cores() && rest >= PARALLEL_BYTES)
        .then(|| haystack::guess_message(bytes, first + rest / 2))
        .flatten();
    // A run that gives up tells the other, which then stops too: the file goes to the tree path.
    let given_up = AtomicBool::new(false);
    let (mut run, second) = haystack::two_runs(first, guess, |from, stop| {
        Run::read(source, from, stop, from == first, places.keep, &given_up)
    });
    let mut runs = Runs {
        messages: std::mem::take(&mut run.messages),
        calls: std::mem::take(&mut run.calls),
        rest: Vec::new(),
    };
    if run.end == End::Reached {
        let second = second?;
        run.end = second.end;
        runs.rest = second.prepared;
        run.spans.extend(second.spans);
        run.contents.extend(second.contents);
        run.repeated.extend(second.repeated);
    }
    let End::Closed(end) = run.end else { return None };
    *prepared = runs;
    *places.spans = run.spans;
    *places.contents = run.contents;
    repeated.extend(run.repeated);
    Some(end)
}

/// How a run of messages ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// At the array's closing bracket; the index just past it.
    Closed(usize),
    /// At the byte it was told to stop at, the start of a message.
    Reached,
    /// At something it could not read.
    Failed,
}

/// Messages read one after another from a position in the array.
struct Run {
    /// The messages read, paired, when the run pairs them (the first run does).
    messages: Vec<Message>,
    /// The calls they left open.
    calls: OpenCalls,
    /// The messages read up to their pairing, when the run does not pair them, in blocks of
    /// [`BLOCK`].
    prepared: Vec<Vec<Prepared>>,
    spans: Vec<Range<usize>>,
    contents: Vec<Option<Range<usize>>>,
    repeated: Vec<Keys>,
    end: End,
}

impl Run {
    /// Reads messages from `at` until `stop`, the array's end, or something it cannot read;
    /// pairs them as it reads them when `pairs` (the run that starts at the first message), and
    /// notes where each sits when `keep`.
    ///
    /// The first message that tells a format decides the tree path's detection; a message of
    /// another format here leaves the file to the tree path at once, and so does a message that
    /// does not read in the run that starts at the first one (the one given a `stop`), which
    /// cannot be a wrong guess. Either says so in `given_up`, which stops the other run too. A
    /// run started at a guess that fails only fails itself: the guess may have been wrong.
    fn read(
        source: &JsonSource,
        mut at: usize,
        stop: Option<usize>,
        pairs: bool,
        keep: bool,
        given_up: &AtomicBool,
    ) -> Run {
        let bytes = source.as_bytes();
        let from = at;
        let mut run = Run {
            messages: Vec::new(),
            calls: OpenCalls::default(),
            prepared: Vec::new(),
            spans: Vec::new(),
            contents: Vec::new(),
            repeated: Vec::new(),
            end: End::Failed,
        };
        let give_up = |surely: bool| {
            if surely || stop.is_some() {
                given_up.store(true, Ordering::Relaxed);
            }
        };
        loop {
            if stop == Some(at) {
                run.end = End::Reached;
                return run;
            }
            if given_up.load(Ordering::Relaxed) {
                return run;
            }
            let Some((message, end, content)) = lean_message(source, at, &mut run.repeated) else {
                give_up(false);
                return run;
            };
            let (object, apart) = message;
            if !matches!(message_format(&object), None | Some(Format::OpenAi)) {
                give_up(true);
                return run;
            }
            // A message that does not read gives the file to the tree path, which words why.
            let Ok(prepared) = openai::prepare(&object, apart) else {
                give_up(false);
                return run;
            };
            if pairs {
                // A result no call fits: the tree path words the error.
                let Ok(message) = prepared.pair(&mut run.calls, &run.messages) else {
                    give_up(true);
                    return run;
                };
                let read = run.messages.len();
                if read == run.messages.capacity() && read >= FORESEE_AFTER {
                    // As many messages as the bytes read so far foretell for the whole array,
                    // and an eighth more: each message is at least a dozen bytes.
                    let rest = (bytes.len() - from) as f64 / (at - from).max(1) as f64;
                    let foreseen = (read as f64 * rest * 1.125) as usize;
                    let room = foreseen.min((bytes.len() - from) / 12).max(read * 2);
                    run.messages.reserve_exact(room - read);
                }
                run.messages.push(message);
            } else {
                match run.prepared.last_mut() {
                    Some(block) if block.len() < BLOCK => block.push(prepared),
                    _ => {
                        let mut block = Vec::with_capacity(BLOCK);
                        block.push(prepared);
                        run.prepared.push(block);
                    }
                }
            }
            if keep {
                run.contents.push(content);
                run.spans.push(at..end);
            }
            at = skip_whitespace(bytes, end);
            match bytes.get(at) {
                Some(b',') => at = skip_whitespace(bytes, at + 1),
                Some(b']') => {
                    run.end = End::Closed(at + 1);
                    return run;
                }
                _ => {
                    give_up(false);
                    return run;
                }
            }
        }
    }
}

/// The message starting at `at`, where it ends, and where its string `content` is, if any.
fn lean_message(
    source: &JsonSource,
    at: usize,
    repeated: &mut Vec<Keys>,
) -> Option<(Lean, usize, Option<Range<usize>>)> {
    let bytes = source.as_bytes();
    let mut members = Map::new();
    let mut apart = Apart::default();
    let mut place = None;
    let end = object(bytes, at, |key, at| {
        if key == "content" && bytes.get(at) == Some(&b'"') {
            let (content, end) = source.string_at(at)?;
            apart.text = Some(content);
            place = Some(at..end);
            members.insert(key.to_owned(), Value::String(String::new()));
            return Some(end);
        }
        let end = value_end(bytes, at)?;
        let mut value = parse(&bytes[at..end], repeated)?;
        if key == "tool_calls" && value.is_array() {
            apart.calls = Some(openai::tool_calls(Some(&value)).ok()?);
            value = Value::Array(Vec::new());
        }
        members.insert(key.to_owned(), value);
        Some(end)
    })?;
    Some(((members, apart), end, place))
}

/// Writes the request back with `messages` in place of those read, when `changed` says which
/// of them a command changed and each of those carries the marker a rewrite leaves in its meta:
/// every byte of the input but those of the changed messages, each encoded over its original
/// in its style. `false`, with nothing written, when that cannot be told: then the tree
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
    let mut changed = changed.to_vec();
    changed.sort_unstable();
    changed.dedup();
    for &index in &changed {
        // OpenAI messages are read without meta, and every command that rewrites one leaves its
        // marker there; one without is told from the message read only by the tree path.
        match messages.get(index) {
            Some(message) if !message.meta.is_empty() => {}
            _ => return Ok(false),
        }
    }
    let ascii = OnceLock::new();
    let encode = |&index: &usize| encode_changed(source, spans, &messages[index], index, &ascii);
    write_over(source, &spans.messages, &changed, encode, out)?;
    Ok(true)
}

/// Writes `source` with the elements `changed` (indices of `elements`, in order) replaced by
/// what `encode` makes of each: every other byte of the request is copied from the input,
/// separators and all. The changed elements are encoded ahead of their turn on another thread
/// when the file is large, and written in their turn.
pub(crate) fn write_over(
    source: &[u8],
    elements: &[Range<usize>],
    changed: &[usize],
    encode: impl Fn(&usize) -> Result<Vec<u8>, Error> + Sync,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let parallel = threads::two_cores() && source.len() >= PARALLEL_BYTES;
    threads::made_ahead(changed, parallel, encode, |made| -> Result<(), Error> {
        let mut at = 0;
        for (&index, bytes) in changed.iter().zip(made) {
            let span = &elements[index];
            out.write_all(&source[at..span.start])?;
            out.write_all(&bytes?)?;
            at = span.end;
        }
        out.write_all(&source[at..])?;
        Ok(())
    })
}

/// The JSON of the changed message `message`, the `index`-th of the request: each message it
/// encodes to (one, but for a message the format splits), laid over the original when it is
/// one, in the original's style (see [`Style`]), separated as the request separates messages.
/// `ascii` is whether the whole request is ASCII, found once when needed.
fn encode_changed(
    source: &[u8],
    spans: &Spans,
    message: &Message,
    index: usize,
    ascii: &OnceLock<bool>,
) -> Result<Vec<u8>, Error> {
    let fresh = openai::encode(std::slice::from_ref(message));
    let span = &spans.messages[index];
    let original = match fresh.len() {
        1 => Some(
            skeleton(source, span.start, spans.contents[index].clone())
                .ok_or_else(|| Error::WriteBack { reason: "a message no longer reads as it did".into() })?,
        ),
        _ => None,
    };
    let separator =
        match (index.checked_sub(1).and_then(|k| spans.messages.get(k)), spans.messages.get(index + 1)) {
            (Some(before), _) => &source[before.end..span.start],
            (None, Some(after)) => &source[span.end..after.start],
            (None, None) => b",".as_slice(),
        };
    let values: Vec<Value> = fresh
        .into_iter()
        .map(|value| match &original {
            Some(original) => overlay::overlay(original, value, &openai::SHAPE),
            None => value,
        })
        .collect();
    in_style(source, span.start, &values, separator, ascii)
}

/// `values`, joined by `separator`, in the style of the value at `at` in `source` (see
/// [`Style`]); characters beyond ASCII escaped when the whole of `source` is ASCII (`ascii`
/// holds that answer, found once when needed).
pub(crate) fn in_style(
    source: &[u8],
    at: usize,
    values: &[Value],
    separator: &[u8],
    ascii: &OnceLock<bool>,
) -> Result<Vec<u8>, Error> {
    let mut style = Style::of(source, at);
    let margin = if style.indent.is_some() { margin(source, at) } else { &[] };
    let write = |style: &Style| -> Result<Vec<u8>, Error> {
        let mut bytes = Vec::new();
        for (k, value) in values.iter().enumerate() {
            if k > 0 {
                bytes.extend_from_slice(separator);
            }
            style.write(value, margin, &mut bytes)?;
        }
        Ok(bytes)
    };
    let bytes = write(&style)?;
    // Characters beyond ASCII are escaped in a request that escapes every one of them.
    if bytes.is_ascii() || !*ascii.get_or_init(|| source.is_ascii()) {
        return Ok(bytes);
    }
    style.ascii = true;
    write(&style)
}

/// The original of a changed message, to lay its encoding over: its members parsed, but for its
/// string `content` at `content` (the bulk of a tool's message, and replaced by whatever the
/// encoding holds there), which is skipped, not scanned, and stands as an empty string.
fn skeleton(bytes: &[u8], at: usize, content: Option<Range<usize>>) -> Option<Value> {
    let mut members = Map::new();
    object(bytes, at, |key, at| {
        if let Some(content) = content.clone().filter(|content| content.start == at) {
            members.insert(key.to_owned(), Value::String(String::new()));
            return Some(content.end);
        }
        let end = value_end(bytes, at)?;
        let value = compaction_model::value_from_slice(&bytes[at..end]).ok()?;
        members.insert(key.to_owned(), value);
        Some(end)
    })?;
    Some(Value::Object(members))
}
