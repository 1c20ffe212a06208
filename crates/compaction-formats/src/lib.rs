//! Agent transcripts in the formats agents and providers write, read into
//! [`compaction_model::Message`]s and written back.
//!
//! An agent's log is the raw material for every question about its context: how large it was
//! at each model call, what pruning would have saved, what a compacted version looks like. This
//! crate turns the logs real agents leave behind into the workspace's [`Message`] list, and
//! writes a changed list back into the same file, so that the rest of the workspace (counting,
//! compaction, the `compaction` command) works on any of them.
//!
//! Formats read ([`Format`]): Haystack `ChatMessage` JSON, OpenAI Chat Completions, OpenAI
//! Responses items, Anthropic Messages, Claude Code session logs, Codex CLI rollouts, SWE-agent
//! (0.x, 1.x) and mini-swe-agent trajectories, and OpenHands event logs. The format is told from
//! the content unless [`ReadOptions::with_format`] names it; when none fits, the error says what
//! the file holds.
//!
//! **The model's view.** A log is read as the conversation the model saw at its last call:
//! after a provider's or agent's compaction (Claude Code's `compact_boundary`, Codex's
//! `compacted`, an Anthropic `compaction` block, an OpenHands condensation) only what the model
//! still saw; lines it never saw (progress, bookkeeping, subagents' sidechains) are skipped.
//! [`ReadOptions::with_full_history`] reads everything instead. Whatever a reader leaves out on
//! purpose is said once in [`Conversation::notes`]; a file that reads as no message at all is an
//! error, never an empty conversation. Roles come from the log, never from a guess.
//!
//! **The provider's counts.** Where a log records what the provider counted for each model call
//! (Claude Code's `message.usage`, Codex's `token_count`, the model response OpenHands logs),
//! [`Conversation::usage`] holds it by assistant message, so that a program can anchor its
//! estimates on the provider's figures.
//!
//! **Writing back.** [`write()`] with no target writes the conversation back in the format read.
//! Claude Code sessions, Codex rollouts and Responses item lists keep every byte but those of
//! the tool results (and tool inputs) that changed. OpenAI, Anthropic and Haystack files are
//! lossless too: a message nobody changed is written as it was read (the same JSON value); a
//! changed one is encoded afresh and laid over its original, so fields the model does not know
//! survive; the envelope (`model`, `tools`, tau-bench's `reward`, the other conversations of the
//! file) is kept. Haystack messages are written in `ChatMessage.to_dict`'s current shape, which
//! gives back a file already in it. With a [`Target`] (Haystack, OpenAI or Anthropic) the
//! conversation is converted instead. A command that drops or puts in messages (a sliding
//! window's note, a summary) writes with [`write_rewritten`], saying where each message came
//! from, so each lands on its own original; event logs cannot take such a change back
//! ([`Conversation::takes_back_rewrites`]) and are written to a target instead.
//!
//! Files holding several conversations (tau-bench's array of trajectories, OpenHands' evaluation
//! output with one instance a line, a JSON Lines file of SWE-agent trajectories) are read one
//! conversation at a time ([`ReadOptions::with_conversation`]); written back, the whole file
//! comes out with only that conversation changed. Conversations are never concatenated: their
//! tool-call ids and system prompts are their own.
//!
//! Event logs are read one line at a time, building only what each line's reader uses (of a
//! Claude Code event, not its envelope or the `toolUseResult` that repeats each output), on two
//! threads for large files; [`LineReader`] reads them from any source line by line, so a program
//! that only counts or converts never holds the file.
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
//! Reading a Claude Code session (a Codex rollout reads the same way):
//!
//! ```
//! use compaction_formats::{Format, ReadOptions, Target};
//!
//! # let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/transcripts/claude-code/fa812bfe-excerpt.jsonl");
//! let conversation = compaction_formats::read(std::fs::read(path)?, &ReadOptions::named(path))?;
//! conversation.notes.iter().for_each(|note| eprintln!("{note}"));
//! assert_eq!(conversation.format, Format::ClaudeCode);
//!
//! // The provider's own count of the conversation after its last reply.
//! let last = conversation.last_usage().expect("Claude Code logs record usage");
//! assert!(last.usage.context_tokens() > 0);
//!
//! // Written back, it is the session it was: only changed tool results would be rewritten.
//! let mut out = Vec::new();
//! compaction_formats::write(&conversation, &conversation.messages, None, Some(&[]), &mut out)?;
//! assert_eq!(out, conversation.source());
//!
//! // Or converted: here to Anthropic Messages.
//! let mut out = Vec::new();
//! compaction_formats::write(&conversation, &conversation.messages, Some(Target::Anthropic), None, &mut out)?;
//! assert!(out.starts_with(b"{\"messages\":["));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Crate features
//!
//! None. The crate depends on compaction-model, memchr, serde, serde_json and thiserror, and
//! does no I/O of its own: it reads bytes and writes to any [`std::io::Write`].
//!
//! ## Minimum supported Rust version
//!
//! 1.88, the workspace's: see its README for the policy. It is raised only in a minor version
//! (0.1 → 0.2), never in a patch release, and the changelog says so.
#![deny(missing_docs)]

mod anthropic;
mod claude_code;
mod codex;
mod detect;
mod document;
mod error;
mod eventlog;
mod format;
mod haystack;
mod ids;
mod inplace;
mod notes;
mod openai;
mod openhands;
mod overlay;
mod pairing;
mod request;
mod responses;
mod style;
#[cfg(test)]
mod tests;
mod threads;
mod usage;
mod values;
mod write;

use std::io::Write;
use std::ops::Range;

use compaction_json::dupkeys;
use compaction_model::{JsonObject, JsonSource, Message, Part, Role, SurrogateEscapes, TextPart, ToolSpec};
use serde_json::{Map, Value};

use crate::detect::{detect, unrecognized};
use crate::document::{container, locate, locator, parse_top, read_tools, take_messages, Place, Top};
use crate::eventlog::{json_lines, EventLog, JsonLines, LogDecoded};
use crate::values::ResultsFound;
use crate::write::{write_tree_rewritten, write_tree_to, Native};

pub use error::{Error, Location};
pub use format::{Format, Target, UnknownFormat};
pub use notes::{Note, NoteKind};
pub use usage::{MessageUsage, Usage};

/// The key, in a text part's `unknown` fields (or a reasoning part's `extra`), holding an item a
/// provider sent that the model has no part for: `{"format": "anthropic" | "responses", "item":
/// <the item as read>}`. The part's text is what the item is counted as (a compaction's summary,
/// else the item's JSON); writers of the item's own format write the item back as it was.
pub const PROVIDER_ITEM: &str = "provider_item";

/// The marker value kept under [`PROVIDER_ITEM`].
pub(crate) fn provider_marker(format: &str, item: Value) -> Value {
    let mut marker = Map::new();
    marker.insert("format".into(), Value::String(format.to_owned()));
    marker.insert("item".into(), item);
    Value::Object(marker)
}

/// A text part standing for an opaque provider item.
pub(crate) fn opaque_part(format: &str, text: String, item: Value) -> Part {
    let mut unknown = JsonObject::new();
    unknown.insert(PROVIDER_ITEM.into(), provider_marker(format, item));
    Part::Text(TextPart { text: text.into(), unknown: unknown.into() })
}

/// The provider item a part stands for, with the format it came from, if it stands for one.
pub fn provider_item(part: &Part) -> Option<(&str, &Value)> {
    let marker = match part {
        Part::Text(text) => text.unknown.get(PROVIDER_ITEM)?,
        Part::Reasoning(reasoning) => reasoning.extra.get(PROVIDER_ITEM)?,
        _ => return None,
    };
    Some((marker.get("format")?.as_str()?, marker.get("item")?))
}

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
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions::named("<input>")
    }
}

impl ReadOptions {
    /// Options for an input called `name` in errors, with everything else told from the content.
    pub fn named(name: impl Into<String>) -> Self {
        ReadOptions { name: name.into(), format: None, conversation: None, full_history: false }
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
    back: Back,
    /// The input, byte for byte.
    source: Input,
}

/// What writing the conversation back in its own format needs.
#[derive(Debug)]
enum Back {
    /// A JSON tree with the messages taken out (OpenAI, Anthropic, Haystack JSON Lines).
    Tree(Box<Native>),
    /// Each message's bytes, for a Haystack array read without a JSON tree.
    Spans(haystack::Spans),
    /// Where the envelope and each message sit, for an OpenAI request read without a tree.
    Request(request::Spans),
    /// Where each tool result sits, for an event log.
    Log(EventLog),
    /// Nothing: the format is written as its default target.
    None,
    /// Read line by line without keeping the file ([`LineReader`]): it can only be converted.
    Streamed,
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
    /// conversation can have messages dropped or put in ([`write_rewritten`]). Event logs (Claude
    /// Code, Codex, Responses items) cannot: they take back only changed tool results and inputs,
    /// so a command that drops messages must write them to a target.
    pub fn takes_back_rewrites(&self) -> bool {
        !matches!(self.back, Back::Log(_) | Back::Streamed)
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

/// Reads one conversation of a file (the first, unless `options` chooses another), in the format
/// `options` names or the one told from the content. The conversation keeps `bytes`, to write
/// the file back.
///
/// A file that holds no message is an error: a count of 0 for a log that holds a conversation
/// in a shape this crate did not expect would be a wrong answer given without a word.
pub fn read(bytes: Vec<u8>, options: &ReadOptions) -> Result<Conversation, Error> {
    let format = options.format;
    let bytes = match read_without_tree(bytes, options) {
        Ok(conversation) => return non_empty(conversation, options, String::new()),
        Err(bytes) => bytes,
    };
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
    non_empty(conversation, options, why)
}

/// The readers that take a file without a JSON tree, a Haystack array ([`haystack::read_spans`])
/// or an OpenAI request ([`request::read`]), each where it may apply (an array, an object): the
/// conversation, whose messages' texts stay in the input they then share, or the bytes back
/// when neither takes the file.
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
    if array.is_none() && !object {
        return Err(bytes);
    }
    let source = JsonSource::new(bytes);
    let read = match array {
        Some(first) => read_array(&source, first),
        None => read_request(&source, options),
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
        back: Back::Spans(spans),
        source: Input::Shared(source.clone()),
    })
}

/// [`request::read`] as a conversation, its repeated keys noted as the tree path notes them.
fn read_request(source: &JsonSource, options: &ReadOptions) -> Option<Conversation> {
    let read = request::read(source, &options.name)?;
    let mut repeated = Repeated::default();
    for keys in read.repeated {
        repeated.add(keys, None);
    }
    Some(Conversation {
        format: Format::OpenAi,
        messages: read.messages,
        tools: read.tools,
        usage: Vec::new(),
        notes: repeated.note().into_iter().collect(),
        compactions: Vec::new(),
        conversations: 1,
        selected: 0,
        layout: Layout::Array,
        back: Back::Request(read.spans),
        source: Input::Shared(source.clone()),
    })
}

fn non_empty(conversation: Conversation, options: &ReadOptions, why: String) -> Result<Conversation, Error> {
    if !conversation.messages.is_empty() {
        return Ok(conversation);
    }
    Err(Error::NoMessages { name: options.name.clone(), format: conversation.format, reason: why })
}

/// What an empty read saw, for its error.
fn why_empty(conversation: &Conversation) -> String {
    let notes: Vec<String> = conversation.notes.iter().map(ToString::to_string).collect();
    let seen = match conversation.format {
        Format::ClaudeCode => claude_code::why_empty(conversation.source()),
        Format::Codex => codex::why_empty(conversation.source()),
        _ => String::new(),
    };
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

/// Below this many bytes an event log is read on one thread, and a tree's repeated keys are
/// looked for after its parse; starting another thread costs more.
const PARALLEL_LOG: usize = 1 << 20;

/// Lines pass between the threads reading a log in runs of about this many bytes.
const RUN_BYTES: usize = 256 << 10;

/// A line parsed ahead of its turn: what the format's reader takes from it (`None` when it must
/// be parsed whole, which reads it or words its error), and the keys repeated in what is read of
/// it (the whole line, but for a Claude Code event read lean: see [`claude_code::lean_event`]).
type Ahead = (Option<Event>, dupkeys::Keys);

/// A line's JSON as a log's reader takes it.
#[derive(Debug)]
pub(crate) struct Event {
    /// The line's value; for a Claude Code event read lean, only the fields its reader reads.
    pub(crate) value: Value,
    /// Where a Claude Code event's `message` starts in the line, when it was built by hand: the
    /// reader's slots then start there, and a write-back finds a tool result without crossing
    /// the envelope.
    pub(crate) message_at: Option<u32>,
    /// The tool results' texts a Claude Code event left in the input.
    pub(crate) found: ResultsFound,
}

impl Event {
    /// A line parsed whole.
    fn whole(value: Value) -> Event {
        Event { value, message_at: None, found: ResultsFound::default() }
    }
}

/// Parses the line at `line` of `input`; from a shared input, a Claude Code event leaves its tool
/// results' texts there.
fn parse_ahead(format: Format, input: Lines<'_>, line: Range<usize>) -> Ahead {
    let bytes = input.bytes();
    if format == Format::ClaudeCode {
        let lean = match input {
            Lines::Shared(source) => claude_code::lean_event_in(source, line.clone()),
            Lines::Lent(_) => claude_code::lean_event(&bytes[line.clone()]),
        };
        if let Some((event, keys)) = lean {
            return (Some(event), keys);
        }
    }
    let line = &bytes[line];
    let event = match format {
        Format::ClaudeCode => None,
        _ => compaction_model::value_from_slice(line).ok().map(Event::whole),
    };
    (event, dupkeys::scan_keys(line))
}

/// Reads an event log line by line, never holding more than a few runs of lines' JSON, on two
/// threads when there are two cores and the file is large ([`read_lines`]).
fn read_log(source: &JsonSource, options: &ReadOptions, format: Format) -> Result<Conversation, Error> {
    read_log_on(source, options, format, threads::two_cores() && source.as_bytes().len() >= PARALLEL_LOG)
}

/// [`read_log`], on two threads when `parallel`.
fn read_log_on(
    source: &JsonSource,
    options: &ReadOptions,
    format: Format,
    parallel: bool,
) -> Result<Conversation, Error> {
    let bytes = source.as_bytes();
    let name = options.name.as_str();
    let mut log = EventLog::default();
    let mut reader = LogReader::new(format, name, options.full_history);
    let mut repeated = Repeated::default();
    let lines: Vec<(usize, Range<usize>)> = json_lines(bytes).collect();
    read_lines(Lines::Shared(source), &lines, 0, &mut reader, &mut repeated, name, parallel.then_some(0))?;
    log.bases = lines.into_iter().map(|(_, range)| range).collect();
    if log.bases.is_empty() {
        return Err(Error::Empty { name: name.to_owned() });
    }
    let mut decoded = reader.finish()?;
    // Fingerprints are what a write-back checks changed messages against.
    decoded.seal();
    // Keys compared as written can differ and still be the same key only through an escape.
    log.unique_keys = repeated.objects == 0 && !repeated.escaped;
    decoded.notes.extend(repeated.note());
    Ok(from_log(format, decoded, log, Layout::Lines))
}

/// The bytes lines are read from: shared with the texts read from them, or only lent.
#[derive(Clone, Copy)]
enum Lines<'a> {
    Shared(&'a JsonSource),
    Lent(&'a [u8]),
}

impl<'a> Lines<'a> {
    fn bytes(self) -> &'a [u8] {
        match self {
            Lines::Shared(source) => source.as_bytes(),
            Lines::Lent(bytes) => bytes,
        }
    }
}

/// Feeds `lines` of `input` (each a line number and the line's bytes) in order to `reader`, the
/// first as the `base`-th line read, and their repeated keys to `repeated`.
///
/// The state machines read lines in order, but parsing a line (most of the work) needs nothing
/// from the lines before it. The lines are taken in runs of about [`RUN_BYTES`]. With
/// `parallel`, the number of the first run among those of the whole log, a second thread parses
/// five runs in every eight ahead of their turn and hands them over in order, through a short
/// queue, while this one parses the other three itself and feeds every line to the reader
/// (measured with callgrind, both threads then have about as much to do; the runs are numbered
/// across calls so the shares hold however the log is cut). A line the second thread
/// could not parse is parsed again here, so errors are the same, and the first one in `lines`
/// is the one given. Returns how many runs there were.
fn read_lines(
    input: Lines<'_>,
    lines: &[(usize, Range<usize>)],
    base: usize,
    reader: &mut LogReader,
    repeated: &mut Repeated,
    name: &str,
    parallel: Option<usize>,
) -> Result<usize, Error> {
    let format = reader.format();
    let bytes = input.bytes();
    let mut runs = Vec::new();
    let mut run_start = 0;
    for (k, (_, range)) in lines.iter().enumerate() {
        if range.end - lines[run_start].1.start >= RUN_BYTES || k + 1 == lines.len() {
            runs.push(run_start..k + 1);
            run_start = k + 1;
        }
    }
    let theirs = |run: usize| parallel.is_some_and(|first| !matches!((first + run) % 8, 0 | 3 | 5));
    std::thread::scope(|scope| -> Result<(), Error> {
        let (send, receive) = std::sync::mpsc::sync_channel::<Vec<Ahead>>(4);
        if parallel.is_some() {
            let runs = &runs;
            scope.spawn(move || {
                for (_, run) in runs.iter().enumerate().filter(|(k, _)| theirs(*k)) {
                    let parsed = lines[run.clone()]
                        .iter()
                        .map(|(_, range)| parse_ahead(format, input, range.clone()))
                        .collect();
                    // The reader stopped (an error): nothing more is wanted.
                    if send.send(parsed).is_err() {
                        return;
                    }
                }
            });
        } else {
            drop(send);
        }
        for (k, run) in runs.iter().enumerate() {
            // Should the other thread have stopped, its runs are parsed here.
            let mut ahead = if theirs(k) { receive.recv().ok().map(Vec::into_iter) } else { None };
            for (k, (number, range)) in lines[run.clone()].iter().enumerate().map(|(j, l)| (run.start + j, l))
            {
                let number = *number;
                let base = u32::try_from(base + k).unwrap_or(u32::MAX);
                let (event, keys) = ahead
                    .as_mut()
                    .and_then(Iterator::next)
                    .unwrap_or_else(|| parse_ahead(format, input, range.clone()));
                repeated.add(keys, Some(number));
                match event {
                    Some(event) => reader.line(number, base, event)?,
                    None => reader.read_line(name, number, base, &bytes[range.clone()])?,
                }
            }
        }
        Ok(())
    })?;
    Ok(runs.len())
}

/// Objects that repeat a key, for the note that says so.
#[derive(Debug, Default)]
struct Repeated {
    objects: usize,
    first: Option<(String, Option<usize>)>,
    /// Whether a key was written with an escape (see [`dupkeys::Keys`]).
    escaped: bool,
}

impl Repeated {
    fn scan(&mut self, json: &[u8], line: Option<usize>) {
        self.add(dupkeys::scan_keys(json), line);
    }

    /// Adds what [`dupkeys::scan_keys`] found in `line`.
    fn add(&mut self, found: dupkeys::Keys, line: Option<usize>) {
        self.escaped |= found.escaped;
        if let Some((count, key)) = found.repeated {
            self.objects += count;
            self.first.get_or_insert((key, line));
        }
    }

    fn note(&self) -> Option<Note> {
        let (key, line) = self.first.as_ref()?;
        let at = line.map(|l| format!(" on line {l}")).unwrap_or_default();
        let text = format!(
            "{} repeated a key (first {}{at}); the last value of each was read",
            notes::plural(self.objects, "object"),
            error::snippet(key)
        );
        Some(Note::new(NoteKind::DuplicateKey, self.objects, text))
    }
}

pub(crate) fn from_log(
    format: Format,
    decoded: LogDecoded,
    mut log: EventLog,
    layout: Layout,
) -> Conversation {
    log.slots = decoded.slots;
    Conversation {
        format,
        messages: decoded.messages,
        tools: decoded.tools,
        usage: decoded.usage,
        notes: decoded.notes,
        compactions: decoded.compactions,
        conversations: 1,
        selected: 0,
        layout,
        back: Back::Log(log),
        source: Input::Bytes(Vec::new()),
    }
}

/// Reads an event log (Claude Code, Codex, Responses items a line) one line at a time, for inputs
/// too large to hold: memory stays bounded by the longest line and the conversation read (the
/// model's last view), never the file. The conversation it gives can be converted to a
/// [`Target`], not written back in its own format (that needs the file's bytes).
///
/// ```
/// use compaction_formats::{Format, LineReader, ReadOptions};
///
/// let log = "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"Hi\"}}\n\
///            {\"type\":\"assistant\",\"message\":{\"id\":\"m1\",\"role\":\"assistant\",\"content\":\"Hello\"}}\n";
/// let format = compaction_formats::detect_lines(log.as_bytes(), "log")?.expect("an event log");
/// assert_eq!(format, Format::ClaudeCode);
/// let mut reader = LineReader::new(format, &ReadOptions::named("log")).expect("read line by line");
/// for line in log.lines() {
///     reader.push(line.as_bytes())?;
/// }
/// assert_eq!(reader.finish()?.messages.len(), 2);
/// # Ok::<(), compaction_formats::Error>(())
/// ```
#[derive(Debug)]
pub struct LineReader {
    reader: LogReader,
    format: Format,
    name: String,
    number: usize,
    lines: usize,
    /// How many runs of lines were read (see [`read_lines`]).
    runs: usize,
    repeated: Repeated,
}

impl LineReader {
    /// A reader of `format`, or `None` when the format is not read line by line.
    pub fn new(format: Format, options: &ReadOptions) -> Option<LineReader> {
        if !matches!(format, Format::ClaudeCode | Format::Codex | Format::Responses) {
            return None;
        }
        Some(LineReader {
            reader: LogReader::new(format, &options.name, options.full_history),
            format,
            name: options.name.clone(),
            number: 0,
            lines: 0,
            runs: 0,
            repeated: Repeated::default(),
        })
    }

    /// Reads the next line of the file (without its line break); blank lines count for the line
    /// numbers errors give, and are otherwise skipped.
    pub fn push(&mut self, line: &[u8]) -> Result<(), Error> {
        self.number += 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = if self.number == 1 { line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line) } else { line };
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let base = u32::try_from(self.lines).unwrap_or(u32::MAX);
        let (event, keys) = parse_ahead(self.reader.format(), Lines::Lent(line), 0..line.len());
        match event {
            Some(event) => self.reader.line(self.number, base, event)?,
            None => self.reader.read_line(&self.name, self.number, base, line)?,
        }
        self.repeated.add(keys, Some(self.number));
        self.lines += 1;
        Ok(())
    }

    /// Reads the next lines of the file: `lines` holds whole lines, each with its line break but
    /// perhaps the last one of the file. The same as [`LineReader::push`] on each of them, but a
    /// block of a megabyte or more is parsed on two threads, as [`read()`] parses a whole log, so a
    /// caller that reads the file a few megabytes at a time holds little more than that and reads
    /// as fast.
    pub fn push_lines(&mut self, lines: &[u8]) -> Result<(), Error> {
        let mut numbered = JsonLines::after(lines, self.number);
        let found: Vec<(usize, Range<usize>)> = numbered.by_ref().collect();
        self.number = numbered.number();
        let parallel = threads::two_cores() && lines.len() >= PARALLEL_LOG;
        let (reader, repeated) = (&mut self.reader, &mut self.repeated);
        let first = parallel.then_some(self.runs);
        self.runs += read_lines(Lines::Lent(lines), &found, self.lines, reader, repeated, &self.name, first)?;
        self.lines += found.len();
        Ok(())
    }

    /// The conversation read; an error when it holds no message.
    pub fn finish(self) -> Result<Conversation, Error> {
        if self.lines == 0 {
            return Err(Error::Empty { name: self.name });
        }
        // Not fingerprinted (`seal`): a conversation read line by line is never written back.
        let mut decoded = self.reader.finish()?;
        decoded.notes.extend(self.repeated.note());
        let mut conversation = from_log(self.format, decoded, EventLog::default(), Layout::Lines);
        conversation.back = Back::Streamed;
        let options = ReadOptions::named(self.name);
        non_empty(conversation, &options, String::new())
    }
}

/// The format of an event log in JSON Lines (Claude Code, Codex, Responses items a line), told
/// from the first lines of `bytes` (a prefix of the file is enough: about fifty lines); `None`
/// when the input is something else, read with [`read()`]. JSON Lines of records no format knows
/// are an error saying what their lines carry.
pub fn detect_lines(bytes: &[u8], name: &str) -> Result<Option<Format>, Error> {
    detect::detect_lines(bytes, name)
}

/// The readers of line-by-line logs.
#[derive(Debug)]
enum LogReader {
    ClaudeCode(claude_code::Reader),
    Codex(codex::Reader),
    Responses(responses::LinesReader),
}

impl LogReader {
    fn new(format: Format, name: &str, full_history: bool) -> Self {
        match format {
            Format::ClaudeCode => LogReader::ClaudeCode(claude_code::Reader::new(name, full_history)),
            Format::Codex => LogReader::Codex(codex::Reader::new(name, full_history)),
            _ => LogReader::Responses(responses::LinesReader::new(name)),
        }
    }

    /// The format read.
    fn format(&self) -> Format {
        match self {
            LogReader::ClaudeCode(_) => Format::ClaudeCode,
            LogReader::Codex(_) => Format::Codex,
            LogReader::Responses(_) => Format::Responses,
        }
    }

    /// Reads line `number` of file `name` from its bytes, parsed whole: a line [`parse_ahead`]
    /// could not read, which this reads, or whose error it words.
    fn read_line(&mut self, name: &str, number: usize, base: u32, line: &[u8]) -> Result<(), Error> {
        let value: Value = compaction_model::value_from_slice(line).map_err(|source| Error::Json {
            name: name.to_owned(),
            line: Some(number),
            source,
        })?;
        self.line(number, base, Event::whole(value))
    }

    /// Reads a line's JSON.
    fn line(&mut self, number: usize, base: u32, event: Event) -> Result<(), Error> {
        match self {
            LogReader::ClaudeCode(reader) => reader.line(number, base, event),
            LogReader::Codex(reader) => reader.line(number, base, &event.value),
            LogReader::Responses(reader) => reader.line(number, base, &event.value),
        }
    }

    fn finish(self) -> Result<LogDecoded, Error> {
        match self {
            LogReader::ClaudeCode(reader) => reader.finish(),
            LogReader::Codex(reader) => reader.finish(),
            LogReader::Responses(reader) => reader.finish(),
        }
    }
}

pub(crate) fn read_tree(bytes: &[u8], options: &ReadOptions) -> Result<Conversation, Error> {
    let name = options.name.as_str();
    // The repeated-key scan needs nothing from the tree: on two or more cores it runs beside
    // the parse of a large file instead of after it.
    let (top, scanned) = std::thread::scope(|scope| {
        let scan = (threads::two_cores() && bytes.len() >= PARALLEL_LOG).then(|| {
            scope.spawn(|| {
                let mut repeated = Repeated::default();
                repeated.scan(bytes, None);
                repeated
            })
        });
        let top = parse_top(bytes, name);
        let scanned = scan.map(|scan| scan.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        (top, scanned)
    });
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
    let layout = match (&top, &place) {
        (Top::Lines(_), Place::Root) => Layout::Lines,
        _ => Layout::Array,
    };
    let values = take_messages(&mut top, &place, &locator)?;
    let decoded = match format {
        Format::Haystack => haystack::read(&values, &locator)?,
        Format::OpenAi => openai::read(&values, &locator)?,
        Format::SweAgent => {
            let mut decoded = openai::read(&values, &locator)?;
            openai::keep_swe_agent_markers(&values, &mut decoded);
            decoded
        }
        Format::Anthropic => anthropic::read(&values, system.as_ref(), &locator, options.full_history)?,
        Format::OpenHands => {
            openhands::read(&values, &locator, options.full_history, instruction.as_deref())?
        }
        Format::ClaudeCode | Format::Codex | Format::Responses => {
            return Err(Error::Unrecognized {
                name: name.to_owned(),
                reason: format!("a {} log is JSON Lines, one record a line", format.label()),
            })
        }
    };
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
        back,
        source: Input::Bytes(Vec::new()),
    })
}

/// Writes `messages` (the conversation's, or a changed version of them) to `out`: in `target`
/// when one is given, else back in the format read.
///
/// Written back, the rest of the file is kept as it was: OpenAI, Anthropic and Haystack files
/// keep their envelope and every message not changed; Claude Code sessions, Codex rollouts and
/// Responses item lists keep every byte but those of the tool results (and tool inputs) that
/// changed, and take back nothing else. SWE-agent and OpenHands conversations are written as
/// [`Format::default_target`].
///
/// `changed`, when given, holds the indices of the messages that differ from those read (then
/// `messages` is as long as the conversation); every other message is taken to be the one read.
/// A Haystack message among them is written as its input bytes when those spell what encoding
/// it gives (the same JSON value, keys in the same order). `None` means anything may have changed.
///
/// Returns what the output could not hold (a [`NoteKind::Dropped`] note per kind, naming the
/// messages): reasoning, and calls or text on tool messages, in Chat Completions; tool-call
/// arguments that are not a JSON object in Anthropic's `tool_use`; provider items of another
/// format, written as their text. Written back in its own format, nothing is lost.
pub fn write(
    conversation: &Conversation,
    messages: &[Message],
    target: Option<Target>,
    changed: Option<&[usize]>,
    out: &mut dyn Write,
) -> Result<Vec<Note>, Error> {
    escaping_lone_surrogates(conversation, out, |out| {
        write_unescaped(conversation, messages, target, changed, out)
    })
}

/// Runs `write` on `out`, through [`SurrogateEscapes`] when the input may hold a lone surrogate
/// escape (`\ud83d`, read as a stand-in character: see `compaction_model::lone_surrogate`), so
/// that every message written gives it back as the escape it was; an input without one (no `\ud`
/// or `\uD` in it) cannot have given a stand-in, and its output is passed on as it is made.
fn escaping_lone_surrogates<T>(
    conversation: &Conversation,
    out: &mut dyn Write,
    write: impl FnOnce(&mut dyn Write) -> Result<T, Error>,
) -> Result<T, Error> {
    let source = conversation.source();
    // A log read line by line keeps no input to look in.
    let streamed = matches!(conversation.back, Back::Streamed);
    if !streamed
        && memchr::memmem::find(source, b"\\ud").is_none()
        && memchr::memmem::find(source, b"\\uD").is_none()
    {
        return write(out);
    }
    let mut escapes = SurrogateEscapes::new(out);
    let written = write(&mut escapes)?;
    escapes.into_inner()?;
    Ok(written)
}

/// [`write()`], its output as it is made.
fn write_unescaped(
    conversation: &Conversation,
    messages: &[Message],
    target: Option<Target>,
    changed: Option<&[usize]>,
    out: &mut dyn Write,
) -> Result<Vec<Note>, Error> {
    let format = conversation.format;
    let own = match target {
        None => format.writes_back(),
        Some(target) => format.native_target() == Some(target),
    };
    let target = target.unwrap_or_else(|| format.default_target());
    let written = match &conversation.back {
        Back::Spans(spans) if own => {
            haystack::write_spans(conversation.source(), spans, messages, changed, out)
        }
        Back::Tree(native) if own => {
            write_tree_to(conversation.source(), native, target, messages, changed, out)
        }
        Back::Request(spans) if own => {
            if request::write(conversation.source(), spans, messages, changed, out)? {
                Ok(())
            } else {
                write_tree_to(
                    conversation.source(),
                    &*request_tree(conversation)?,
                    target,
                    messages,
                    changed,
                    out,
                )
            }
        }
        Back::Log(log) if own => {
            let log = eventlog::write_back(conversation.source(), log, format, messages, changed, out);
            return log.map(|()| Vec::new());
        }
        Back::Streamed if own => {
            return Err(Error::WriteBack {
                reason: format!(
                "the {} log was read line by line without keeping it; it can only be converted to a target",
                format.label()
            ),
            })
        }
        _ => {
            // Checked before a byte is written: an output the target's readers refuse is not made.
            let (messages, made) = ids::complete(messages, target)?;
            let mut notes: Vec<Note> = made.into_iter().collect();
            convert(&messages, target, conversation.layout, out)?;
            notes.extend(losses(&messages, target));
            return Ok(notes);
        }
    };
    written.map(|()| if own { Vec::new() } else { losses(messages, target) })
}

/// `messages` written as `target`, nothing of a file read kept.
fn convert(messages: &[Message], target: Target, layout: Layout, out: &mut dyn Write) -> Result<(), Error> {
    match target {
        Target::Haystack => haystack::write_messages(messages, layout, out),
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
    }
}

/// [`write()`] for messages a command dropped, added or moved (a sliding window's omission note, a
/// summary in place of what it summarizes): `origin` holds, for each of `messages`, the index of
/// the message read that it stands for, as it was or changed, or `None` for a message the command
/// put in.
///
/// Written back, each message lands on its own original, so the fields the model does not know
/// stay with the message they belong to and an unchanged message is written as it was read; the
/// originals of dropped messages are left out. Guessing instead (what [`write()`] must do without
/// `changed` when the count changed) can lay a message over another's original when the count
/// happens to come out the same. Event logs (Claude Code, Codex, Responses items) cannot take
/// such a change back: that is an error naming a target to write instead. Converted to another
/// format, `origin` is not needed.
///
/// # Errors
///
/// As [`write()`]; [`Error::WriteBack`] when `origin` is not as long as `messages` or names a
/// message that was not read, or the format read cannot take the change back.
pub fn write_rewritten(
    conversation: &Conversation,
    messages: &[Message],
    target: Option<Target>,
    origin: &[Option<usize>],
    out: &mut dyn Write,
) -> Result<Vec<Note>, Error> {
    escaping_lone_surrogates(conversation, out, |out| {
        write_rewritten_unescaped(conversation, messages, target, origin, out)
    })
}

/// [`write_rewritten`], its output as it is made.
fn write_rewritten_unescaped(
    conversation: &Conversation,
    messages: &[Message],
    target: Option<Target>,
    origin: &[Option<usize>],
    out: &mut dyn Write,
) -> Result<Vec<Note>, Error> {
    let format = conversation.format;
    let own = match target {
        None => format.writes_back(),
        Some(target) => format.native_target() == Some(target),
    };
    let in_place = origin.len() == conversation.messages.len()
        && origin.iter().enumerate().all(|(index, read)| *read == Some(index));
    match &conversation.back {
        Back::Spans(spans) if own => {
            haystack::write_spans_rewritten(conversation.source(), spans, messages, origin, out)?;
            Ok(Vec::new())
        }
        Back::Tree(native) if own => {
            let target = target.unwrap_or_else(|| format.default_target());
            write_tree_rewritten(conversation.source(), native, target, messages, origin, out)?;
            Ok(Vec::new())
        }
        Back::Request(_) if own => {
            let target = target.unwrap_or_else(|| format.default_target());
            write_tree_rewritten(
                conversation.source(),
                &*request_tree(conversation)?,
                target,
                messages,
                origin,
                out,
            )?;
            Ok(Vec::new())
        }
        Back::Log(_) if own && !in_place => Err(Error::WriteBack {
            reason: format!(
                "{} messages were read and {} are to be written, with messages dropped or put in; a {} \
                 log can take back only changed tool results and tool inputs (write another format \
                 with a target)",
                conversation.messages.len(),
                messages.len(),
                format.label()
            ),
        }),
        _ => write_unescaped(conversation, messages, target, None, out),
    }
}

/// What the tree path keeps to write back an OpenAI request read without a tree, for the writes
/// that need to decode the messages read again (messages dropped, added or moved).
fn request_tree(conversation: &Conversation) -> Result<Box<Native>, Error> {
    let options = ReadOptions::named("the input").with_format(Format::OpenAi);
    match read_tree(conversation.source(), &options)?.back {
        Back::Tree(native) => Ok(native),
        _ => Err(Error::WriteBack { reason: "the request no longer reads as one".into() }),
    }
}

/// What writing `messages` as `target` cannot hold as it is: one [`NoteKind::Dropped`] note per
/// kind of loss, naming the messages.
pub fn losses(messages: &[Message], target: Target) -> Vec<Note> {
    let mut found: Vec<(&'static str, Vec<usize>)> = Vec::new();
    let mut add = |what: &'static str, index: usize| match found.iter_mut().find(|(w, _)| *w == what) {
        Some((_, indices)) => {
            if indices.last() != Some(&index) {
                indices.push(index);
            }
        }
        None => found.push((what, vec![index])),
    };
    for (index, message) in messages.iter().enumerate() {
        let tool = message.has_tool_call_result();
        for part in &message.parts {
            let foreign = provider_item(part).is_some_and(|(format, _)| match target {
                Target::Anthropic => format != "anthropic",
                Target::OpenAi => true,
                Target::Haystack => false,
            });
            match part {
                Part::Reasoning(_) if target == Target::OpenAi => {
                    add("reasoning left out (Chat Completions has no place for it)", index)
                }
                Part::Text(_) if foreign => add("provider items written as their text", index),
                Part::Text(_) | Part::Image(_) | Part::File(_) if tool && target == Target::OpenAi => {
                    add("text, images or files beside a tool result left out", index)
                }
                Part::ToolCall(_) if tool && target == Target::OpenAi => {
                    add("tool calls on a tool message left out", index)
                }
                Part::ToolCall(call) if target == Target::Anthropic && call.raw_arguments.is_some() => add(
                    "tool-call arguments that are not a JSON object left out (`tool_use` input must be one)",
                    index,
                ),
                _ => {}
            }
        }
    }
    found
        .into_iter()
        .map(|(what, indices)| {
            let mut shown: Vec<String> = indices.iter().take(8).map(ToString::to_string).collect();
            if indices.len() > 8 {
                shown.push(format!("… ({} in all)", indices.len()));
            }
            let noun = if indices.len() == 1 { "message" } else { "messages" };
            let text = format!("written as {target}: {what}: {noun} {}", shown.join(", "));
            Note::new(NoteKind::Dropped, indices.len(), text)
        })
        .collect()
}

/// `value` as compact JSON and a newline.
fn write_line(value: &Value, out: &mut dyn Write) -> Result<(), Error> {
    serde_json::to_writer(&mut *out, value)?;
    out.write_all(b"\n")?;
    Ok(())
}

// Unit tests that read files (real sessions) live outside `src/`, which does no I/O.
#[cfg(test)]
#[path = "../tests/unit/lean_logs.rs"]
mod lean_logs;
