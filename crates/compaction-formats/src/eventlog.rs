//! Logs of events (Claude Code sessions, Codex rollouts, Responses item lists): their lines, what
//! a reader hands back, and the fingerprint a write-back (`logback.rs`) checks.
//!
//! A reader records, for every message it makes, where each of its tool results and tool-call
//! inputs sits in the file (a [`Slot`]: which line, and the path inside it), and a fingerprint
//! of everything else the message holds. Writing back, a changed message must still have that
//! fingerprint (only results and inputs may change: that is what pruning and offloading do);
//! each result or input that now differs from what its slot holds is replaced in place.

use std::hash::{Hash, Hasher};
use std::ops::Range;

use compaction_model::{Message, Part};
use serde_json::{json, Value};

use crate::conversation::{Back, Conversation, Input, Layout, ProviderCompaction};
use crate::format::Format;
pub(crate) use crate::kept::{EventLog, MessageSlots, Slot, Style};
use crate::notes::Note;
use crate::threads;
use crate::usage::MessageUsage;
use crate::values::ResultsFound;

/// The non-blank lines of a JSON Lines file: 1-based line number and byte range (without the
/// line break; a byte-order mark on the first line left out).
pub(crate) fn json_lines(bytes: &[u8]) -> JsonLines<'_> {
    JsonLines::after(bytes, 0)
}

/// The `type` of each of the first lines of a JSON Lines file, for errors.
pub(crate) fn first_types(bytes: &[u8]) -> Vec<String> {
    json_lines(bytes)
        .take(20)
        .filter_map(|(_, range)| compaction_model::value_from_slice(&bytes[range]).ok())
        .map(|value| value.get("type").and_then(Value::as_str).unwrap_or("(none)").to_owned())
        .collect()
}

/// The non-blank lines of a piece of a JSON Lines file, as [`json_lines`] gives them.
pub(crate) struct JsonLines<'a> {
    bytes: &'a [u8],
    at: usize,
    number: usize,
}

impl<'a> JsonLines<'a> {
    /// The lines of `bytes`, a piece of a file that starts where a line does, numbered after the
    /// `before` lines that come before it in the file; a byte-order mark is left out only at the
    /// start of the file.
    pub(crate) fn after(bytes: &'a [u8], before: usize) -> Self {
        let at = if before == 0 && bytes.starts_with(b"\xEF\xBB\xBF") { 3 } else { 0 };
        JsonLines { bytes, at, number: before }
    }

    /// The number of the last line gone through, blank or not.
    pub(crate) fn number(&self) -> usize {
        self.number
    }
}

impl Iterator for JsonLines<'_> {
    type Item = (usize, Range<usize>);

    fn next(&mut self) -> Option<Self::Item> {
        let bytes = self.bytes;
        loop {
            if self.at >= bytes.len() {
                return None;
            }
            self.number += 1;
            let end = memchr::memchr(b'\n', &bytes[self.at..]).map_or(bytes.len(), |k| self.at + k);
            let start = self.at;
            self.at = end + 1;
            let mut stop = end;
            if stop > start && bytes[stop - 1] == b'\r' {
                stop -= 1;
            }
            if !bytes[start..stop].iter().all(u8::is_ascii_whitespace) {
                return Some((self.number, start..stop));
            }
        }
    }
}

/// What a `local_shell_call` whose arguments were cleared holds as its `action`: an `exec` of
/// no command, the least action Codex reads (its `LocalShellAction` is a tagged `exec` with a
/// required `command`), where `{}` would make the line one Codex cannot read.
pub(crate) fn cleared_shell_action() -> Value {
    json!({"type": "exec", "command": []})
}

/// Everything but the results' content and the arguments of the calls that have a slot: what a
/// write-back cannot change.
pub(crate) fn fingerprint(message: &Message, slots: &MessageSlots) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    // Calls whose input has no place to be written must keep their arguments.
    for (call, slot) in message.tool_calls().zip(slots.calls.iter().chain(std::iter::repeat(&None))) {
        if slot.is_none() {
            call.arguments.as_json().hash(&mut hasher);
            call.raw_arguments.hash(&mut hasher);
        }
    }
    message.role.hash(&mut hasher);
    message.parts.len().hash(&mut hasher);
    for part in &message.parts {
        match part {
            Part::Text(text) => {
                0u8.hash(&mut hasher);
                text.text.as_str().hash(&mut hasher);
            }
            Part::ToolCall(call) => {
                1u8.hash(&mut hasher);
                call.tool_name.hash(&mut hasher);
                call.id.hash(&mut hasher);
            }
            Part::ToolCallResult(result) => {
                2u8.hash(&mut hasher);
                result.origin.tool_name.hash(&mut hasher);
                result.origin.id.hash(&mut hasher);
                result.error.hash(&mut hasher);
            }
            Part::Reasoning(reasoning) => {
                3u8.hash(&mut hasher);
                reasoning.reasoning_text.hash(&mut hasher);
            }
            Part::Image(image) => {
                4u8.hash(&mut hasher);
                image.base64_image.hash(&mut hasher);
            }
            Part::File(file) => {
                5u8.hash(&mut hasher);
                file.base64_data.hash(&mut hasher);
            }
            other => {
                6u8.hash(&mut hasher);
                crate::form::haystack_form(other).to_string().hash(&mut hasher);
            }
        }
    }
    hasher.finish()
}

/// What a log reader hands back.
#[derive(Debug, Default)]
pub(crate) struct LogDecoded {
    pub messages: Vec<Message>,
    pub slots: Vec<MessageSlots>,
    pub usage: Vec<MessageUsage>,
    pub notes: Vec<Note>,
    pub compactions: Vec<ProviderCompaction>,
    pub tools: Vec<compaction_model::ToolSpec>,
}

impl LogDecoded {
    /// Adds a message with its slots.
    pub(crate) fn push(&mut self, message: Message, slots: MessageSlots) {
        self.messages.push(message);
        self.slots.push(slots);
    }

    /// Forgets everything read so far: the provider compacted the conversation, and what the
    /// model sees from here on starts afresh.
    pub(crate) fn reset(&mut self) {
        self.messages.clear();
        self.slots.clear();
        self.usage.clear();
        self.compactions.clear();
    }

    /// Fingerprints every message, once reading is done: each half on its own thread when
    /// there are many (the fingerprint hashes every text).
    pub(crate) fn seal(&mut self) {
        let seal = |messages: &[Message], slots: &mut [MessageSlots]| {
            for (message, slots) in messages.iter().zip(slots) {
                slots.fingerprint = fingerprint(message, slots);
            }
        };
        let len = self.messages.len().min(self.slots.len());
        if !threads::two_cores() || len < PARALLEL_SEAL {
            return seal(&self.messages, &mut self.slots);
        }
        let (messages, later_messages) = self.messages[..len].split_at(len / 2);
        let (slots, later_slots) = self.slots[..len].split_at_mut(len / 2);
        threads::join(|| seal(messages, slots), || seal(later_messages, later_slots));
    }
}

/// Below this many messages one thread fingerprints them all.
const PARALLEL_SEAL: usize = 2000;

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
    pub(crate) fn whole(value: Value) -> Event {
        Event { value, message_at: None, found: ResultsFound::default() }
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
        model: None,
        back: Back::Log(log),
        source: Input::Bytes(Vec::new()),
    }
}
