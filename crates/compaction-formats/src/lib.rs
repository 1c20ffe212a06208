//! Agent transcripts in the formats agents and providers write, read into
//! [`compaction_model::Message`]s and written back.
//!
//! An agent's log is the raw material for every question about its context: how large it was
//! at each model call, what pruning would have saved, what a compacted version looks like. This
//! crate turns the logs real agents leave behind into the workspace's [`Message`] list, and
//! writes a changed list back into the same file, so that the rest of the workspace (counting,
//! compaction, the `compaction` command) works on any of them.
//!
//! Formats read ([`Format`]): Haystack `ChatMessage` JSON, OpenAI Chat Completions, Anthropic
//! Messages, Claude Code session logs, SWE-agent trajectories and OpenHands event logs. The
//! format is told from the content unless [`ReadOptions::with_format`] names it. Formats
//! written ([`Target`]): Haystack, OpenAI and Anthropic; a file is written back in its own format
//! unless asked otherwise.
//!
//! Writing a file back in its own format is lossless: a message nobody changed is written as it
//! was read (the same JSON value); a changed one is encoded afresh and laid over its original,
//! so fields the model does not know survive; the envelope (`model`, `tools`, tau-bench's
//! `reward`, the other conversations of the file) is kept. Haystack messages are written in
//! `ChatMessage.to_dict`'s current shape, which gives back a file already in it.
//!
//! Files holding several conversations (tau-bench's array of trajectories, OpenHands' evaluation
//! output with one instance a line, a JSON Lines file of SWE-agent trajectories) are read one
//! conversation at a time ([`ReadOptions::with_conversation`]); written back, the whole file
//! comes out with only that conversation changed. Conversations are never concatenated: their
//! tool-call ids and system prompts are their own.
//!
//! A Haystack array, the common case for long transcripts, is read and written without a JSON
//! tree: its messages are parsed straight from their bytes (on every core), and each one left
//! alone is written back as those bytes when they spell what writing it would give (serde_json's
//! compact bytes, or Python's `json.dump` spacing and escapes of the same value).
//!
//! Bad input never panics: it is an [`Error`] naming the file, the line or message, and what is
//! wrong.
//!
//! # Example
//!
//! Reading a Claude Code session:
//!
//! ```
//! use compaction_formats::{Format, ReadOptions};
//!
//! # let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/transcripts/claude-code/fa812bfe-excerpt.jsonl");
//! let bytes = std::fs::read(path)?;
//! let conversation = compaction_formats::read(bytes, &ReadOptions::named(path))?;
//! assert_eq!(conversation.format, Format::ClaudeCode);
//! assert!(conversation.messages.iter().any(|m| m.has_tool_call_result()));
//!
//! // Written back as Anthropic Messages, the format Claude Code logs its messages in.
//! let mut out = Vec::new();
//! compaction_formats::write(&conversation, &conversation.messages, conversation.format.default_target(), None, &mut out)?;
//! assert!(out.starts_with(b"{\"messages\":["));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Crate features
//!
//! None. The crate depends on compaction-model, serde, serde_json and thiserror, and does no
//! I/O of its own: it reads bytes and writes to any [`std::io::Write`].
//!
//! ## Minimum supported Rust version
//!
//! 1.85.
#![deny(missing_docs)]

mod anthropic;
mod claude_code;
mod detect;
mod document;
mod error;
mod format;
mod haystack;
mod openai;
mod openhands;
mod overlay;
mod pairing;
#[cfg(test)]
mod tests;
mod write;

use std::io::Write;

use compaction_model::{JsonSource, Message, Role, ToolSpec};
use serde_json::{Map, Value};

use crate::detect::{detect, unrecognized};
use crate::document::{container, locate, locator, parse_top, read_tools, take_messages, Place, Top};
use crate::write::{write_native_to, Native};

pub use error::{Error, Location};
pub use format::{Format, Target, UnknownFormat};

/// How messages are laid out in a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Layout {
    /// One JSON value: an array, or an object holding one.
    Array,
    /// One JSON value per line.
    Lines,
}

/// What to read, and how. Built with [`ReadOptions::named`] and the `with_*` methods.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadOptions {
    /// The input's name in errors: its path, or `<stdin>`.
    pub name: String,
    /// The format; told from the content when `None`.
    pub format: Option<Format>,
    /// Which conversation of a file holding several (0 is the first); the first when `None`.
    pub conversation: Option<usize>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions::named("<input>")
    }
}

impl ReadOptions {
    /// Options for an input called `name` in errors, with everything else told from the content.
    pub fn named(name: impl Into<String>) -> Self {
        ReadOptions { name: name.into(), format: None, conversation: None }
    }

    /// The same options, reading `format` instead of telling it from the content.
    pub fn with_format(mut self, format: Format) -> Self {
        self.format = Some(format);
        self
    }

    /// The same options, reading conversation `index` (0 is the first) of a file holding several.
    pub fn with_conversation(mut self, index: usize) -> Self {
        self.conversation = Some(index);
        self
    }
}

/// One conversation read from a file, with what it takes to write it back.
#[derive(Debug)]
#[non_exhaustive]
pub struct Conversation {
    /// The format it was read in.
    pub format: Format,
    /// The messages.
    pub messages: Vec<Message>,
    /// The tools the file declares (OpenAI and Anthropic `tools`), empty when it declares none.
    pub tools: Vec<ToolSpec>,
    /// How many conversations the file holds.
    pub conversations: usize,
    /// Which of them this is (0 is the first).
    pub selected: usize,
    /// Whether the file held one message (or event) a line; Haystack output follows it.
    pub layout: Layout,
    native: Option<Native>,
    /// Each message's bytes, for a Haystack array read without a JSON tree (then `native` is
    /// `None`).
    spans: Option<haystack::Spans>,
    /// The input, byte for byte.
    source: Input,
}

impl Conversation {
    /// The bytes the conversation was read from.
    pub fn source(&self) -> &[u8] {
        match &self.source {
            Input::Bytes(bytes) => bytes,
            Input::Shared(source) => source.as_bytes(),
        }
    }
}

/// The input of a conversation.
#[derive(Debug)]
enum Input {
    /// As read.
    Bytes(Vec<u8>),
    /// Shared with the texts of the messages read from it.
    Shared(JsonSource),
}

/// Messages decoded from a format, each with the source message it came from.
#[derive(Debug, Default)]
pub(crate) struct Decoded {
    pub messages: Vec<Message>,
    pub units: Vec<usize>,
}

impl Decoded {
    /// Adds what source message `unit` decoded to.
    pub(crate) fn extend(&mut self, unit: usize, messages: Vec<Message>) {
        self.units.extend(std::iter::repeat_n(unit, messages.len()));
        self.messages.extend(messages);
    }
}

/// Reads one conversation of a file (the first, unless `options` chooses another), in the format
/// `options` names or the one told from the content. The conversation keeps `bytes`, to write
/// the file back.
pub fn read(mut bytes: Vec<u8>, options: &ReadOptions) -> Result<Conversation, Error> {
    let format = options.format;
    if matches!(format, None | Some(Format::Haystack)) && options.conversation.unwrap_or(0) == 0 {
        if let Some(first) = haystack::first_message(&bytes, format.is_some()) {
            // The messages' texts stay in the input, which they then share.
            let source = JsonSource::new(bytes);
            if let Some((messages, spans)) = haystack::read_spans(&source, first) {
                return Ok(Conversation {
                    format: Format::Haystack,
                    messages,
                    tools: Vec::new(),
                    conversations: 1,
                    selected: 0,
                    layout: Layout::Array,
                    native: None,
                    spans: Some(spans),
                    source: Input::Shared(source),
                });
            }
            // The messages read were dropped, so the bytes are the source's alone again.
            bytes = source.into_bytes().unwrap_or_else(|source| source.as_bytes().to_vec());
        }
    }
    let mut conversation = read_tree(&bytes, options)?;
    conversation.source = Input::Bytes(bytes);
    Ok(conversation)
}

pub(crate) fn read_tree(bytes: &[u8], options: &ReadOptions) -> Result<Conversation, Error> {
    let name = options.name.as_str();
    let mut top = parse_top(bytes, name)?;
    let format = match options.format {
        Some(format) => format,
        None => detect(&top)
            .ok_or_else(|| Error::Unrecognized { name: name.to_owned(), reason: unrecognized(&top) })?,
    };
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
    let layout = match (&top, &place) {
        (Top::Lines(_), Place::Root) => Layout::Lines,
        _ => Layout::Array,
    };
    let values = take_messages(&mut top, &place, &locator)?;
    let decoded = match format {
        Format::Haystack => haystack::read(&values, &locator)?,
        Format::OpenAi | Format::SweAgent => openai::read(&values, &locator)?,
        Format::Anthropic => anthropic::read(&values, system.as_ref(), &locator)?,
        Format::ClaudeCode => claude_code::read(&values, &locator)?,
        Format::OpenHands => openhands::read(&values, &locator)?,
    };
    let native = format.native_target().map(|_| {
        let mut originals = values;
        let system = system.map(|system| {
            originals.push(system);
            originals.len() - 1
        });
        // The messages read are not kept: `changed` tells which ones a command changed, and the
        // originals can be decoded again when it cannot (see `plan_write`).
        Native { top, place, originals, system, units: decoded.units, read: Vec::new() }
    });
    Ok(Conversation {
        format,
        messages: decoded.messages,
        tools,
        conversations,
        selected: index,
        layout,
        native,
        spans: None,
        source: Input::Bytes(Vec::new()),
    })
}

/// Writes `messages` (the conversation's, or a changed version of them) in `target` to `out`.
/// In the conversation's own format the rest of the file is kept as it was.
///
/// `changed`, when given, holds the indices of the messages that differ from those read (then
/// `messages` is as long as the conversation); every other message is taken to be the one read,
/// and a Haystack message among them is written as its input bytes when those spell what
/// encoding it gives (the same JSON value, keys in the same order). `None` means anything may have changed.
pub fn write(
    conversation: &Conversation,
    messages: &[Message],
    target: Target,
    changed: Option<&[usize]>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let own = conversation.format.native_target() == Some(target);
    match (&conversation.native, &conversation.spans) {
        (_, Some(spans)) if own => {
            haystack::write_spans(conversation.source(), spans, messages, changed, out)
        }
        (Some(native), _) if own => write_native_to(native, target, messages, changed, out),
        _ => match target {
            Target::Haystack => haystack::write_messages(messages, conversation.layout, out),
            Target::OpenAi => write_line(&Value::Array(openai::encode(messages)), out),
            Target::Anthropic => {
                let (system, rest): (Vec<&Message>, Vec<&Message>) =
                    messages.iter().partition(|m| m.role == Role::System);
                let mut object = Map::new();
                if !system.is_empty() {
                    object.insert("system".into(), anthropic::encode_system(&system));
                }
                object.insert("messages".into(), Value::Array(anthropic::encode(&rest)));
                write_line(&Value::Object(object), out)
            }
        },
    }
}

/// `value` as compact JSON and a newline.
fn write_line(value: &Value, out: &mut dyn Write) -> Result<(), Error> {
    serde_json::to_writer(&mut *out, value)?;
    out.write_all(b"\n")?;
    Ok(())
}
