//! Reading a file: the readers that need no JSON tree first, then event logs a line at a time,
//! then the JSON tree and the format's reader of its messages.

use compaction_model::JsonSource;
use serde_json::Value;

use crate::codec::TreeRead;
use crate::conversation::{non_empty, Back, Conversation, Input, Layout, ReadOptions};
use crate::detect::{detect, detect_lines, unrecognized};
use crate::document::{container, locate, locator, parse_top, read_tools, take_messages, Place, Top};
use crate::error::Error;
use crate::eventlog::json_lines;
use crate::format::Format;
use crate::kept::Native;
use crate::pipeline::{read_log, Repeated, PARALLEL_LOG};
use crate::threads;
use crate::{formats, haystack, messages, request, responses};

/// Reads one conversation of a file (the first, unless `options` chooses another), in the format
/// `options` names or the one told from the content. The conversation keeps `bytes`, to write
/// the file back.
///
/// A file that holds no message is an error: a count of 0 for a log that holds a conversation
/// in a shape this crate did not expect would be a wrong answer given without a word.
pub fn read(bytes: Vec<u8>, options: &ReadOptions) -> Result<Conversation, Error> {
    let bytes = match read_without_tree(bytes, options) {
        Ok(conversation) => return non_empty(unkept(conversation, options), options, String::new()),
        Err(bytes) => bytes,
    };
    read_with_tree(bytes, options)
}

/// [`read`] of a file no reader without a tree takes: an event log a line at a time, anything
/// else as a JSON tree.
pub(crate) fn read_with_tree(bytes: Vec<u8>, options: &ReadOptions) -> Result<Conversation, Error> {
    let format = options.format;
    let log_format = match format {
        Some(format @ (Format::ClaudeCode | Format::Codex)) => Some(format),
        Some(Format::Responses) if looks_like_lines(&bytes) => Some(Format::Responses),
        Some(_) => None,
        None => detect_lines(&bytes, &options.name)?,
    };
    let conversation = match log_format {
        Some(format) => {
            // Shared with the tool results' texts a Claude Code log leaves in it.
            let source = JsonSource::new(bytes);
            let mut conversation = read_log(&source, options, format)?;
            conversation.source = Input::Shared(source);
            conversation
        }
        None => {
            let mut conversation = read_tree(&bytes, options)?;
            conversation.source = Input::Bytes(bytes);
            conversation
        }
    };
    let why = if conversation.messages.is_empty() { why_empty(&conversation) } else { String::new() };
    non_empty(unkept(conversation, options), options, why)
}

/// `conversation` without what writing it back needs, when `options` ask for that: let go of
/// here, once the read no longer needs it (the request readers do not gather it at all).
fn unkept(mut conversation: Conversation, options: &ReadOptions) -> Conversation {
    if !options.write_back {
        conversation.back = Back::Unkept;
    }
    conversation
}

/// The readers that take a file without a JSON tree, a Haystack array ([`haystack::read_spans`]),
/// an OpenAI request ([`request::read`]) or an Anthropic one named as such ([`messages::read`]),
/// each where it may apply (an array, an object): the conversation, whose messages' texts stay in
/// the input they then share, or the bytes back when none takes the file.
fn read_without_tree(bytes: Vec<u8>, options: &ReadOptions) -> Result<Conversation, Vec<u8>> {
    let format = options.format;
    if options.conversation.unwrap_or(0) != 0 {
        return Err(bytes);
    }
    let array = matches!(format, None | Some(Format::Haystack))
        .then(|| haystack::first_message(&bytes, format.is_some()))
        .flatten();
    // An object, or an array of messages no Haystack message starts: an OpenAI request, or its
    // messages alone.
    let object = matches!(format, None | Some(Format::OpenAi))
        && bytes.iter().find(|b| !b.is_ascii_whitespace()).is_some_and(|&b| matches!(b, b'{' | b'[' | 0xEF));
    // An Anthropic request, when the caller says so (a proxy's `/v1/messages`); told from the
    // content, it goes to the tree path, whose detection tells it.
    let anthropic = format == Some(Format::Anthropic);
    if array.is_none() && !object && !anthropic {
        return Err(bytes);
    }
    let source = JsonSource::new(bytes);
    let read = match array {
        Some(first) => read_array(&source, first),
        None if anthropic => messages::read(&source, &options.name, options.write_back)
            .map(|read| request_conversation(Format::Anthropic, &source, read)),
        None => request::read(&source, &options.name, options.write_back)
            .map(|read| request_conversation(Format::OpenAi, &source, read)),
    };
    // The messages read were dropped, so the bytes are the source's alone again.
    read.ok_or_else(|| source.into_bytes().unwrap_or_else(|source| source.as_bytes().to_vec()))
}

/// [`haystack::read_spans`] as a conversation.
fn read_array(source: &JsonSource, first: usize) -> Option<Conversation> {
    let (messages, spans) = haystack::read_spans(source, first)?;
    Some(Conversation {
        format: Format::Haystack,
        messages,
        tools: Vec::new(),
        usage: Vec::new(),
        notes: Vec::new(),
        compactions: Vec::new(),
        conversations: 1,
        selected: 0,
        layout: Layout::Array,
        model: None,
        back: Back::Spans(spans),
        source: Input::Shared(source.clone()),
    })
}

/// A request read by [`request::read`] (Chat Completions) or [`messages::read`] (Messages) as a
/// conversation of `format`, noted as the tree path notes it: blocks kept opaque, then
/// repeated keys.
fn request_conversation(format: Format, source: &JsonSource, read: request::Read) -> Conversation {
    let mut repeated = Repeated::default();
    for keys in read.repeated {
        repeated.add(keys, None);
    }
    Conversation {
        format,
        messages: read.messages,
        tools: read.tools,
        usage: Vec::new(),
        notes: read.opaque.into_iter().chain(repeated.note()).collect(),
        compactions: Vec::new(),
        conversations: 1,
        selected: 0,
        layout: Layout::Array,
        model: read.model,
        back: Back::Request(read.spans),
        source: Input::Shared(source.clone()),
    }
}

/// What an empty read saw, for its error.
fn why_empty(conversation: &Conversation) -> String {
    let notes: Vec<String> = conversation.notes.iter().map(ToString::to_string).collect();
    let seen = formats::of(conversation.format).why_empty(conversation.source());
    [seen, notes.join("; ")].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join("; ")
}

/// Whether the input is JSON Lines rather than one JSON value.
fn looks_like_lines(bytes: &[u8]) -> bool {
    let mut lines = json_lines(bytes);
    let first = lines.next();
    let second = lines.next();
    match (first, second) {
        (Some((_, first)), Some(_)) => {
            bytes[first.clone()].first() == Some(&b'{')
                && compaction_model::value_from_slice(&bytes[first]).is_ok()
        }
        _ => false,
    }
}

pub(crate) fn read_tree(bytes: &[u8], options: &ReadOptions) -> Result<Conversation, Error> {
    let name = options.name.as_str();
    // The repeated-key scan needs nothing from the tree: on two or more cores it runs beside
    // the parse of a large file instead of after it.
    let scan = || {
        let mut repeated = Repeated::default();
        repeated.scan(bytes, None);
        repeated
    };
    let (top, scanned) = if threads::two_cores() && bytes.len() >= PARALLEL_LOG {
        let (top, scanned) = threads::join(|| parse_top(bytes, name), scan);
        (top, Some(scanned))
    } else {
        (parse_top(bytes, name), None)
    };
    let mut top = top?;
    let format = match options.format {
        Some(format) => format,
        None => detect(&top)
            .ok_or_else(|| Error::Unrecognized { name: name.to_owned(), reason: unrecognized(&top) })?,
    };
    if format == Format::Responses {
        // Items are found by their path from where the JSON starts: past a byte-order mark.
        let body = if bytes.starts_with(b"\xEF\xBB\xBF") { 3 } else { 0 };
        return responses::read_tree(top, body..bytes.len(), name);
    }
    let (place, conversations) = locate(&top, format, name)?;
    let index = options.conversation.unwrap_or(0);
    if index >= conversations {
        return Err(Error::NoSuchConversation { name: name.to_owned(), index, count: conversations });
    }
    let place = match place {
        Place::Item { key, .. } => Place::Item { index, key },
        other => other,
    };
    let locator = locator(&top, &place, name, format, conversations);
    let container = container(&top, &place);
    let tools = match container {
        Some(container) => read_tools(container, &locator)?,
        None => Vec::new(),
    };
    let system = match (format, container) {
        (Format::Anthropic, Some(container)) => container.get("system").cloned().filter(|s| !s.is_null()),
        _ => None,
    };
    let instruction = container.and_then(|c| c.get("instruction")).and_then(Value::as_str).map(str::to_owned);
    let model = container.and_then(|c| c.get("model")).and_then(Value::as_str).map(str::to_owned);
    let layout = match (&top, &place) {
        (Top::Lines(_), Place::Root) => Layout::Lines,
        _ => Layout::Array,
    };
    let values = take_messages(&mut top, &place, &locator)?;
    let tree = TreeRead {
        name,
        locator: &locator,
        system: system.as_ref(),
        full_history: options.full_history,
        instruction: instruction.as_deref(),
    };
    let decoded = formats::of(format).read_tree(&values, &tree)?;
    let mut notes = decoded.notes;
    let usage = decoded.usage;
    let repeated = scanned.unwrap_or_else(|| {
        let mut repeated = Repeated::default();
        repeated.scan(bytes, None);
        repeated
    });
    notes.extend(repeated.note());
    let back = match format.native_target() {
        Some(_) => {
            let mut originals = values;
            let system = system.map(|system| {
                originals.push(system);
                originals.len() - 1
            });
            // The messages read are not kept: `changed` tells which ones a command changed, and
            // the originals can be decoded again when it cannot (see `plan_write`).
            Back::Tree(Box::new(Native {
                top,
                place,
                originals,
                system,
                units: decoded.units,
                read: Vec::new(),
                hidden: decoded.hidden_units,
            }))
        }
        None => Back::None,
    };
    Ok(Conversation {
        format,
        messages: decoded.messages,
        tools,
        usage,
        notes,
        compactions: Vec::new(),
        conversations,
        selected: index,
        layout,
        model,
        back,
        source: Input::Bytes(Vec::new()),
    })
}
