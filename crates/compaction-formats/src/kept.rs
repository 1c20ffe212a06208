//! What a conversation keeps of its file to be written back: where its messages, tool results
//! and inputs sit, and the file's JSON with the messages taken out. Plain data; the readers fill
//! it in and the writers use it.

use std::ops::Range;

use compaction_json::splice::Seg;
use compaction_model::Message;
use serde_json::Value;

/// A parsed file: one JSON value, or JSON Lines.
#[derive(Debug, Clone)]
pub(crate) enum Top {
    Value(Value),
    Lines(Vec<Line>),
}

/// One line of a JSON Lines file.
#[derive(Debug, Clone)]
pub(crate) struct Line {
    /// 1 for the first line of the file (blank lines count).
    pub number: usize,
    pub value: Value,
}

/// Where a conversation's messages sit in the file.
#[derive(Debug, Clone)]
pub(crate) enum Place {
    /// The file is the messages: an array, or one message a line.
    Root,
    /// Under a key of the top-level object.
    Key(String),
    /// Under a key of one element (or line) of a file of conversations.
    Item { index: usize, key: String },
}

/// What writing back in the input's own format needs.
#[derive(Debug)]
pub(crate) struct Native {
    /// The file with this conversation's messages taken out.
    pub top: Top,
    pub place: Place,
    /// The original JSON of each source message (a unit); Anthropic's `system` is the last.
    pub originals: Vec<Value>,
    /// The unit that is Anthropic's `system` prompt (the last), when the file has one.
    pub system: Option<usize>,
    /// For each message read, the unit it came from.
    pub units: Vec<usize>,
    /// The messages as read, to tell which ones a command changed, when whoever read them kept
    /// them (the Haystack span reader does, for the rare write that needs them); else empty.
    pub read: Vec<Message>,
    /// Units before this one are not in the conversation read (a provider compacted them away);
    /// they are written back as they were, first.
    pub hidden: usize,
}

/// Where each message of a Haystack array sits in the input.
#[derive(Debug)]
pub(crate) struct HaystackSpans {
    /// Each message's bytes.
    pub(crate) spans: Vec<Range<usize>>,
    /// Whether each message's bytes spell exactly its encoding (perhaps spaced or escaped
    /// otherwise), so they can stand for it.
    pub(crate) verbatim: Vec<bool>,
}

/// Where a request's parts sit in its bytes.
#[derive(Debug)]
pub(crate) struct RequestSpans {
    /// Each message's bytes.
    pub(crate) messages: Vec<Range<usize>>,
    /// Where each message's string `content` sits (quotes included), if it has one (OpenAI).
    pub(crate) contents: Vec<Option<Range<usize>>>,
    /// For an Anthropic request, whose messages may each be read as several (one per tool
    /// result): the index of the first message read from each, then how many were read in all
    /// (the system prompt, read first, is none of them). Empty for OpenAI, one message each.
    pub(crate) firsts: Vec<usize>,
}

/// How the value at a slot is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// An Anthropic `tool_result` block's `content`: a string, or text and image blocks.
    AnthropicResult,
    /// An Anthropic `tool_use` block's `input`: a JSON object.
    AnthropicInput,
    /// A Responses/Codex `function_call_output`'s `output`: a string, a list of `input_text`
    /// and `input_image` items, or Codex's older `{"content", "success"}` object.
    ResponsesOutput,
    /// A Responses/Codex `function_call`'s `arguments`: JSON text in a string.
    ArgumentsText,
    /// A `local_shell_call`'s `action`: a JSON object, written as `eventlog::cleared_shell_action`
    /// when the call's arguments were cleared.
    ShellAction,
}

/// Where a tool result or a tool call's input sits in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Slot {
    /// The line (index into [`EventLog::bases`]).
    pub base: u32,
    /// The path to the value inside the line.
    pub path: Box<[Seg]>,
    pub style: Style,
    /// Where the value lies in the line, when the reader saw it: the path need not be followed.
    pub span: Option<[u32; 2]>,
}

/// The slots of one message: one per tool result and one per tool call, in part order (`None`
/// where the part has no place it can be written to), and the fingerprint of the rest.
#[derive(Debug, Clone, Default)]
pub(crate) struct MessageSlots {
    pub results: Vec<Option<Slot>>,
    pub calls: Vec<Option<Slot>>,
    pub fingerprint: u64,
}

/// What writing an event log back needs, besides its bytes.
#[derive(Debug, Default)]
pub(crate) struct EventLog {
    /// The byte range of each line read.
    pub bases: Vec<Range<usize>>,
    /// Per message of the conversation, its slots.
    pub slots: Vec<MessageSlots>,
    /// Whether no object of the file repeats a key: a slot's value is then found without
    /// crossing what follows each key on its path.
    pub unique_keys: bool,
    /// For a Responses request (an `input` array, or a bare array of items) read whole: the
    /// message each item was read into, in item order, `None` for an item the reader skipped.
    /// With it the request can take messages dropped or put in back (`itemsback.rs`); an event
    /// log read line by line has none and cannot.
    pub items: Option<Vec<Option<usize>>>,
}
