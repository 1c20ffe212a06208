//! The public types of a read: its options, and the conversation read with what it keeps to be
//! written back.

use compaction_model::{JsonSource, Message, ToolSpec};

use crate::error::Error;
use crate::format::Format;
use crate::kept::{EventLog, HaystackSpans, Native, RequestSpans};
use crate::notes::Note;
use crate::usage::MessageUsage;

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
    /// Read everything the log holds, instead of what the model saw at its last call: the
    /// messages before a provider's compaction (Claude Code's `compact_boundary`, Codex's
    /// `compacted`, Anthropic's `compaction` block) are kept, and the compactions are listed in
    /// [`Conversation::compactions`].
    pub full_history: bool,
    /// Keep what writing the conversation back in its own format needs (the default): where each
    /// message sits in the file, or the file's JSON with the messages taken out. A caller that
    /// never writes it back (one that counts or replays it) reads without it
    /// ([`ReadOptions::without_write_back`]) and holds less; writing such a conversation back in
    /// its own format is then an error, never a file made some other way.
    pub write_back: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions::named("<input>")
    }
}

impl ReadOptions {
    /// Options for an input called `name` in errors, with everything else told from the content.
    pub fn named(name: impl Into<String>) -> Self {
        ReadOptions {
            name: name.into(),
            format: None,
            conversation: None,
            full_history: false,
            write_back: true,
        }
    }

    /// The same options, reading `format` instead of telling it from the content.
    #[must_use]
    pub fn with_format(mut self, format: Format) -> Self {
        self.format = Some(format);
        self
    }

    /// The same options, reading conversation `index` (0 is the first) of a file holding several.
    #[must_use]
    pub fn with_conversation(mut self, index: usize) -> Self {
        self.conversation = Some(index);
        self
    }

    /// The same options, reading the full history instead of the model's last view.
    #[must_use]
    pub fn with_full_history(mut self, full_history: bool) -> Self {
        self.full_history = full_history;
        self
    }

    /// The same options, reading without what writing the conversation back in its own format
    /// needs (see [`ReadOptions::write_back`]).
    #[must_use]
    pub fn without_write_back(mut self) -> Self {
        self.write_back = false;
        self
    }
}

/// A compaction the provider (or the agent) made, as the log records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProviderCompaction {
    /// The index of the first message after it (0 when the conversation read starts there).
    pub message: usize,
    /// The line of the file that records it, for JSON Lines.
    pub line: Option<usize>,
    /// The provider's count of the conversation just before it, when the log records it.
    pub tokens_before: Option<u64>,
}

/// One conversation read from a file, with what it takes to write it back.
#[derive(Debug)]
#[non_exhaustive]
pub struct Conversation {
    /// The format it was read in.
    pub format: Format,
    /// The messages: what the model saw at its last call (or everything, with
    /// [`ReadOptions::full_history`]).
    pub messages: Vec<Message>,
    /// The tools the file declares (OpenAI and Anthropic `tools`), empty when it declares none.
    pub tools: Vec<ToolSpec>,
    /// The provider's own count of each model call the log records one for, by the index of the
    /// assistant message the call produced, in order.
    pub usage: Vec<MessageUsage>,
    /// What the reader did on purpose that a user should know (lines skipped, history compacted
    /// away, items kept opaque), each said once.
    pub notes: Vec<Note>,
    /// Compactions the provider made, as the log records them.
    pub compactions: Vec<ProviderCompaction>,
    /// How many conversations the file holds.
    pub conversations: usize,
    /// Which of them this is (0 is the first).
    pub selected: usize,
    /// Whether the file held one message (or event) a line; Haystack output follows it.
    pub layout: Layout,
    /// The model the file names beside its messages, when it is a provider's request (Chat
    /// Completions, Responses, Messages) with a string `model`: a proxy picks the request's
    /// context window by it without reading the body again.
    pub model: Option<String>,
    pub(crate) back: Back,
    /// The input, byte for byte.
    pub(crate) source: Input,
}

/// What writing the conversation back in its own format needs.
#[derive(Debug)]
pub(crate) enum Back {
    /// A JSON tree with the messages taken out (OpenAI, Anthropic, Haystack JSON Lines).
    Tree(Box<Native>),
    /// Each message's bytes, for a Haystack array read without a JSON tree.
    Spans(HaystackSpans),
    /// Where each message sits, for an OpenAI or Anthropic request read without a tree.
    Request(RequestSpans),
    /// Where each tool result sits, for an event log.
    Log(EventLog),
    /// Nothing: the format is written as its default target.
    None,
    /// Read line by line without keeping the file ([`LineReader`](crate::LineReader)): it can only be converted.
    Streamed,
    /// Read without it, as asked ([`ReadOptions::without_write_back`]): it can only be converted.
    Unkept,
}

impl Conversation {
    /// The bytes the conversation was read from.
    pub fn source(&self) -> &[u8] {
        match &self.source {
            Input::Bytes(bytes) => bytes,
            Input::Shared(source) => source.as_bytes(),
        }
    }

    /// Whether written without a target (back in the format read, or as its default target) the
    /// conversation can have messages dropped or put in
    /// ([`Changes::Rewritten`](compaction_model::Changes::Rewritten)). A Responses request (an
    /// `input` array, or a bare array of items) can. Event logs (Claude Code sessions, Codex
    /// rollouts, Responses items one a line) cannot: they take back only changed tool results and
    /// inputs, so a command that drops messages must write them to a target. Nor can a conversation read
    /// without write-back ([`ReadOptions::without_write_back`]), which is written to a target or
    /// not at all.
    pub fn takes_back_rewrites(&self) -> bool {
        match &self.back {
            Back::Log(log) => log.items.is_some(),
            Back::Streamed | Back::Unkept => false,
            _ => true,
        }
    }

    /// The provider's count of the conversation through its last assistant message that has
    /// one (the reference's `context_tokens`), with that message's index; `None` when the log
    /// records no usage.
    pub fn last_usage(&self) -> Option<MessageUsage> {
        self.usage.last().cloned()
    }
}

/// The input of a conversation.
#[derive(Debug)]
pub(crate) enum Input {
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
    pub notes: Vec<Note>,
    /// The provider's counts, by message, where the format records them.
    pub usage: Vec<MessageUsage>,
    /// Units before this one are not in the conversation read (a provider compacted them away)
    /// and are written back as they were.
    pub hidden_units: usize,
}

impl Decoded {
    /// Adds what source message `unit` decoded to.
    pub(crate) fn extend(&mut self, unit: usize, messages: Vec<Message>) {
        self.units.extend(std::iter::repeat_n(unit, messages.len()));
        self.messages.extend(messages);
    }
}

/// `conversation`, or the error of a read that found no message in it (`why`: what it saw).
pub(crate) fn non_empty(
    conversation: Conversation,
    options: &ReadOptions,
    why: String,
) -> Result<Conversation, Error> {
    if !conversation.messages.is_empty() {
        return Ok(conversation);
    }
    Err(Error::NoMessages { name: options.name.clone(), format: conversation.format, reason: why })
}
