//! Transcript formats: which one a file is in, reading it into messages, writing messages back.
//!
//! Six formats are read: Haystack `ChatMessage` JSON, OpenAI Chat Completions, Anthropic Messages,
//! Claude Code session logs, SWE-agent trajectories and OpenHands event logs. Three are written:
//! Haystack, OpenAI and Anthropic. A file is written back in its own format unless asked otherwise
//! (Claude Code as Anthropic, SWE-agent and OpenHands as OpenAI).
//!
//! Writing a file back in its own format is lossless: an OpenAI or Anthropic message the command
//! did not change is written as it was read (the same JSON value); a changed one is encoded
//! afresh and laid over its original (see [`overlay`]), so fields the model does not know
//! survive; the envelope (`model`, `tools`, tau-bench's `reward`, the other conversations of the
//! file) is kept. Haystack messages are always written in `ChatMessage.to_dict`'s current shape,
//! which gives back a file already in it and brings older shapes up to date.
//!
//! Files holding several conversations (tau-bench's array of trajectories, OpenHands' evaluation
//! output with one instance a line, a JSON Lines file of SWE-agent trajectories) are read one
//! conversation at a time: the first by default, another with `--conversation N` (0 is the first).
//! Written back in their own format, the whole file comes out with only that conversation changed.
//! Conversations are never concatenated: their tool-call ids and system prompts are their own.
//!
//! A Haystack array, the common case for long transcripts, is read and written without a JSON
//! tree: its messages are parsed straight from their bytes (on every core), and each one a
//! command leaves alone is written back as those bytes when they are exactly what writing it
//! would give (see [`haystack`]). Every other file is read as a JSON tree and written back
//! straight from it to the output, element by element: what the command left alone is
//! serialized from the tree, and only what it changed is built (see `write_native_to`).

mod anthropic;
mod claude_code;
mod haystack;
mod openai;
mod openhands;
mod overlay;
mod pairing;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::io::Write;
use std::ops::Range;

use anyhow::{anyhow, bail, Result};
use compaction_model::{Message, Role, ToolSpec};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

use crate::input::Layout;

/// A transcript format that can be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Haystack `ChatMessage.to_dict` JSON: an array, or JSON Lines.
    Haystack,
    /// OpenAI Chat Completions messages: an array, an object with `messages`, or tau-bench's
    /// array of trajectories.
    #[value(name = "openai")]
    OpenAi,
    /// Anthropic Messages: an object with `system` and `messages`, or an array of messages.
    Anthropic,
    /// A Claude Code session log (`.jsonl`, one event a line).
    ClaudeCode,
    /// A SWE-agent trajectory (`.traj`), read from its `history`.
    SweAgent,
    /// OpenHands event logs: one instance a line, each with a `history` of events.
    #[value(name = "openhands")]
    OpenHands,
}

/// A format that can be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    /// Haystack's current `ChatMessage.to_dict` shape.
    Haystack,
    /// OpenAI Chat Completions messages.
    #[value(name = "openai")]
    OpenAi,
    /// Anthropic Messages: `{"system": ..., "messages": [...]}`.
    Anthropic,
}

impl Format {
    /// The format output takes when no `--to` is given.
    pub fn default_target(self) -> Target {
        match self {
            Format::Haystack => Target::Haystack,
            Format::OpenAi | Format::SweAgent | Format::OpenHands => Target::OpenAi,
            Format::Anthropic | Format::ClaudeCode => Target::Anthropic,
        }
    }

    fn native_target(self) -> Option<Target> {
        match self {
            Format::Haystack => Some(Target::Haystack),
            Format::OpenAi => Some(Target::OpenAi),
            Format::Anthropic => Some(Target::Anthropic),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Format::Haystack => "Haystack",
            Format::OpenAi => "OpenAI",
            Format::Anthropic => "Anthropic",
            Format::ClaudeCode => "Claude Code",
            Format::SweAgent => "SWE-agent",
            Format::OpenHands => "OpenHands",
        }
    }

    /// The key a conversation's messages sit under in an object of this format.
    fn keys(self) -> &'static [&'static str] {
        match self {
            Format::Haystack | Format::ClaudeCode => &[],
            Format::OpenAi => &["messages", "traj"],
            Format::Anthropic => &["messages"],
            Format::SweAgent | Format::OpenHands => &["history"],
        }
    }
}

/// One conversation read from a file, with what it takes to write it back.
#[derive(Debug)]
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
    source: Vec<u8>,
}

impl Conversation {
    /// The bytes the conversation was read from.
    pub fn source(&self) -> &[u8] {
        &self.source
    }
}

/// What writing back in the input's own format needs.
#[derive(Debug)]
struct Native {
    /// The file with this conversation's messages taken out.
    top: Top,
    place: Place,
    /// The original JSON of each source message (a unit); Anthropic's `system` is the last.
    originals: Vec<Value>,
    /// The unit that is Anthropic's `system` prompt (the last), when the file has one.
    system: Option<usize>,
    /// For each message read, the unit it came from.
    units: Vec<usize>,
    /// The messages as read, to tell which ones a command changed, when whoever read them kept
    /// them (the Haystack span reader does, for the rare write that needs them); else empty.
    read: Vec<Message>,
}

/// A parsed file: one JSON value, or JSON Lines.
#[derive(Debug, Clone)]
enum Top {
    Value(Value),
    Lines(Vec<Line>),
}

#[derive(Debug, Clone)]
struct Line {
    number: usize,
    value: Value,
}

/// Where a conversation's messages sit in the file.
#[derive(Debug, Clone)]
enum Place {
    /// The file is the messages: an array, or one message a line.
    Root,
    /// Under a key of the top-level object.
    Key(String),
    /// Under a key of one element (or line) of a file of conversations.
    Item { index: usize, key: String },
}

/// Names a message's position in errors: `file: line 7`, `file: conversation 3: message 12`.
#[derive(Debug)]
pub(crate) struct Locator {
    prefix: String,
    noun: &'static str,
    lines: Option<Vec<usize>>,
}

impl Locator {
    /// Where message `index` is.
    pub(crate) fn at(&self, index: usize) -> String {
        match &self.lines {
            Some(lines) => format!("{}line {}", self.prefix, lines.get(index).copied().unwrap_or(index + 1)),
            None => format!("{}{} {index}", self.prefix, self.noun),
        }
    }

    /// The conversation as a whole.
    pub(crate) fn whole(&self) -> String {
        self.prefix.trim_end_matches([':', ' ']).to_owned()
    }
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

/// Reads conversation `selected` (the first when `None`) of a file, in `format` or the format
/// detected from the content. The conversation keeps `bytes`.
pub fn read(
    bytes: Vec<u8>,
    name: &str,
    format: Option<Format>,
    selected: Option<usize>,
) -> Result<Conversation> {
    if matches!(format, None | Some(Format::Haystack)) && selected.unwrap_or(0) == 0 {
        if let Some((messages, spans)) = haystack::read_spans(&bytes, format.is_some()) {
            return Ok(Conversation {
                format: Format::Haystack,
                messages,
                tools: Vec::new(),
                conversations: 1,
                selected: 0,
                layout: Layout::Array,
                native: None,
                spans: Some(spans),
                source: bytes,
            });
        }
    }
    let mut conversation = read_tree(&bytes, name, format, selected)?;
    conversation.source = bytes;
    Ok(conversation)
}

fn read_tree(
    bytes: &[u8],
    name: &str,
    format: Option<Format>,
    selected: Option<usize>,
) -> Result<Conversation> {
    let mut top = parse_top(bytes, name)?;
    let format = match format {
        Some(format) => format,
        None => detect(&top).ok_or_else(|| anyhow!("{name}: {}", unrecognized(&top)))?,
    };
    let (place, conversations) = locate(&top, format, name)?;
    let index = selected.unwrap_or(0);
    if index >= conversations {
        return Err(anyhow::Error::new(crate::UsageError(format!(
            "{name}: --conversation {index} is out of range: the file holds {conversations} conversation{}",
            if conversations == 1 { "" } else { "s" }
        ))));
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
        source: Vec::new(),
    })
}

/// Writes `messages` (the conversation's, or a command's changed version of them) in `target`
/// to `out`. In the conversation's own format the rest of the file is kept as it was.
///
/// `changed`, when given, holds the indices of the messages that differ from those read (then
/// `messages` is as long as the conversation); every other message is taken to be the one read,
/// and a Haystack message among them is written as its input bytes when those are exactly what
/// encoding it gives. `None` means anything may have changed.
pub fn write(
    conversation: &Conversation,
    messages: &[Message],
    target: Target,
    changed: Option<&[usize]>,
    out: &mut dyn Write,
) -> Result<()> {
    let own = conversation.format.native_target() == Some(target);
    match (&conversation.native, &conversation.spans) {
        (_, Some(spans)) if own => haystack::write_spans(&conversation.source, spans, messages, changed, out),
        (Some(native), _) if own => write_native_to(native, target, messages, changed, out),
        _ => match target {
            Target::Haystack => haystack::write_messages(messages, conversation.layout, out),
            Target::OpenAi => write_json(&json_bytes(&Value::Array(openai::encode(messages))), out),
            Target::Anthropic => {
                let (system, rest): (Vec<&Message>, Vec<&Message>) =
                    messages.iter().partition(|m| m.role == Role::System);
                let mut object = Map::new();
                if !system.is_empty() {
                    object.insert("system".into(), anthropic::encode_system(&system));
                }
                object.insert("messages".into(), Value::Array(anthropic::encode(&rest)));
                write_json(&json_bytes(&Value::Object(object)), out)
            }
        },
    }
}

fn write_json(bytes: &[u8], out: &mut dyn Write) -> Result<()> {
    Ok(out.write_all(bytes)?)
}

fn json_bytes(value: &Value) -> Vec<u8> {
    let mut out = serde_json::to_vec(value).unwrap_or_default();
    out.push(b'\n');
    out
}

// ---- parsing and detection ----

fn parse_top(bytes: &[u8], name: &str) -> Result<Top> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let Some(start) = bytes.iter().position(|b| !b.is_ascii_whitespace()) else {
        bail!("{name}: the input is empty; expected a JSON conversation or JSON Lines");
    };
    let whole = |bytes: &[u8]| -> Result<Top> {
        serde_json::from_slice(bytes)
            .map(Top::Value)
            .map_err(|error| anyhow!("{name}: invalid JSON: {error}"))
    };
    if bytes[start] == b'[' {
        return whole(bytes);
    }
    let mut lines = bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, line)| !line.iter().all(u8::is_ascii_whitespace))
        .map(|(number, line)| (number + 1, line));
    let Some((first_number, first)) = lines.next() else {
        bail!("{name}: the input is empty; expected a JSON conversation or JSON Lines");
    };
    let second = lines.next();
    match serde_json::from_slice::<Value>(first) {
        Ok(value) => {
            let Some(second) = second else {
                return Ok(match value {
                    // A single message is a JSON Lines file of one line.
                    Value::Object(ref object)
                        if object.contains_key("role") || object.contains_key("_role") =>
                    {
                        Top::Lines(vec![Line { number: first_number, value }])
                    }
                    value => Top::Value(value),
                });
            };
            let mut out = vec![Line { number: first_number, value }];
            for (number, line) in std::iter::once(second).chain(lines) {
                let value = serde_json::from_slice(line)
                    .map_err(|error| anyhow!("{name}: line {number}: invalid JSON: {error}"))?;
                out.push(Line { number, value });
            }
            Ok(Top::Lines(out))
        }
        Err(error) => {
            // A pretty-printed object spans lines; JSON Lines have a value on each.
            let looks_like_lines = second.is_some_and(|(_, line)| line.first() == Some(&b'{'));
            if bytes[start] == b'{' && !looks_like_lines {
                whole(bytes)
            } else {
                Err(anyhow!("{name}: line {first_number}: invalid JSON: {error}"))
            }
        }
    }
}

fn items(top: &Top) -> Option<Vec<&Value>> {
    match top {
        Top::Lines(lines) => Some(lines.iter().map(|line| &line.value).collect()),
        Top::Value(Value::Array(items)) => Some(items.iter().collect()),
        Top::Value(_) => None,
    }
}

fn detect(top: &Top) -> Option<Format> {
    if let Top::Value(Value::Object(object)) = top {
        return detect_object(object);
    }
    let items = items(top)?;
    let Some(first) = items.iter().find_map(|item| item.as_object()) else {
        return Some(if matches!(top, Top::Lines(_)) || items.is_empty() {
            Format::Haystack
        } else {
            Format::OpenAi
        });
    };
    if first.contains_key("role") || first.contains_key("_role") {
        return Some(detect_messages(items.iter().copied()));
    }
    if first.contains_key("source") && (first.contains_key("action") || first.contains_key("observation")) {
        return Some(Format::OpenHands);
    }
    if first.get("type").is_some_and(Value::is_string) && !first.contains_key("messages") {
        return Some(Format::ClaudeCode);
    }
    detect_object(first)
}

fn detect_object(object: &Map<String, Value>) -> Option<Format> {
    if let Some(Value::Array(history)) = object.get("history") {
        // SWE-agent's messages have a `role` (and an `action` too); OpenHands' events a `source`.
        let mut events = history.iter().filter_map(Value::as_object);
        let openhands = events.next().is_some_and(|e| !e.contains_key("role") && e.contains_key("source"));
        return Some(if openhands { Format::OpenHands } else { Format::SweAgent });
    }
    if let Some(Value::Array(messages)) = object.get("messages") {
        let anthropic_tools = object
            .get("tools")
            .and_then(Value::as_array)
            .is_some_and(|tools| tools.iter().any(|t| t.get("input_schema").is_some()));
        if object.contains_key("system") || anthropic_tools {
            return Some(Format::Anthropic);
        }
        return Some(detect_messages(messages.iter()));
    }
    if let Some(Value::Array(messages)) = object.get("traj") {
        return Some(detect_messages(messages.iter()));
    }
    None
}

/// Haystack, Anthropic or OpenAI, from the first message that tells them apart. Messages of
/// nothing but a role and string content read the same in all three; OpenAI writes them back
/// unchanged, so it is the default.
fn detect_messages<'a>(messages: impl Iterator<Item = &'a Value>) -> Format {
    messages.filter_map(Value::as_object).find_map(message_format).unwrap_or(Format::OpenAi)
}

/// The format one message tells, if it tells one.
pub(crate) fn message_format(message: &Map<String, Value>) -> Option<Format> {
    if ["_role", "_content", "meta"].iter().any(|k| message.contains_key(*k)) {
        return Some(Format::Haystack);
    }
    if ["tool_calls", "tool_call_id", "function_call"].iter().any(|k| message.contains_key(*k))
        || message.get("content").is_some_and(Value::is_null)
        || matches!(message.get("role").and_then(Value::as_str), Some("developer" | "tool"))
    {
        return Some(Format::OpenAi);
    }
    let Some(Value::Array(parts)) = message.get("content") else { return None };
    for part in parts.iter().filter_map(Value::as_object) {
        match part.get("type").and_then(Value::as_str) {
            None => return Some(Format::Haystack),
            Some("tool_use" | "tool_result" | "thinking" | "redacted_thinking" | "document") => {
                return Some(Format::Anthropic)
            }
            Some("image") if part.contains_key("source") => return Some(Format::Anthropic),
            Some("image_url" | "input_audio" | "refusal" | "file") => return Some(Format::OpenAi),
            _ => {}
        }
    }
    None
}

fn unrecognized(top: &Top) -> String {
    match top {
        Top::Value(Value::Object(object)) => {
            let keys: Vec<&str> = object.keys().map(String::as_str).take(12).collect();
            format!(
                "not a transcript format this program knows: an object with keys {}; expected messages \
                 (OpenAI, Anthropic), `history` (SWE-agent, OpenHands) or an array of messages",
                keys.join(", ")
            )
        }
        Top::Value(other) => format!("expected a JSON array or object, found {}", json_type(other)),
        Top::Lines(_) => "not a transcript format this program knows".into(),
    }
}

/// Where the messages of `format` sit in the file, and how many conversations it holds.
fn locate(top: &Top, format: Format, name: &str) -> Result<(Place, usize)> {
    let keys = format.keys();
    let key_of = |value: &Value| keys.iter().find(|k| value.get(**k).is_some_and(Value::is_array)).copied();
    if let Top::Value(value @ Value::Object(object)) = top {
        return match key_of(value) {
            Some(key) => Ok((Place::Key(key.into()), 1)),
            None => Err(anyhow!(
                "{name}: a {} file needs {}, found an object with keys {}",
                format.name(),
                expected_keys(format),
                object.keys().map(String::as_str).take(12).collect::<Vec<_>>().join(", ")
            )),
        };
    }
    let Some(items) = items(top) else {
        bail!("{name}: expected a JSON array, an object or JSON Lines, found {}", json_type_of(top));
    };
    let conversation_key = items.first().and_then(|first| {
        let is_message = first.get("role").is_some() || first.get("source").is_some();
        if is_message {
            None
        } else {
            key_of(first)
        }
    });
    match conversation_key {
        Some(key) => Ok((Place::Item { index: 0, key: key.into() }, items.len())),
        None if matches!(format, Format::SweAgent) => {
            bail!("{name}: a SWE-agent trajectory is an object with `history`")
        }
        None => Ok((Place::Root, 1)),
    }
}

fn expected_keys(format: Format) -> String {
    let keys = format.keys();
    if keys.is_empty() {
        return "an array of messages or JSON Lines".into();
    }
    keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(" or ")
}

fn locator(top: &Top, place: &Place, name: &str, format: Format, conversations: usize) -> Locator {
    let noun = match format {
        Format::ClaudeCode | Format::OpenHands => "event",
        _ => "message",
    };
    match (top, place) {
        (Top::Lines(lines), Place::Root) => Locator {
            prefix: format!("{name}: "),
            noun,
            lines: Some(lines.iter().map(|line| line.number).collect()),
        },
        (Top::Lines(lines), Place::Item { index, key }) => {
            let number = lines.get(*index).map_or(index + 1, |line| line.number);
            Locator { prefix: format!("{name}: line {number}: {key}: "), noun, lines: None }
        }
        (_, Place::Item { index, .. }) if conversations > 1 => {
            Locator { prefix: format!("{name}: conversation {index}: "), noun, lines: None }
        }
        _ => Locator { prefix: format!("{name}: "), noun, lines: None },
    }
}

/// The object holding the conversation's messages, if they are not the whole file.
fn container<'a>(top: &'a Top, place: &Place) -> Option<&'a Map<String, Value>> {
    match (top, place) {
        (Top::Value(Value::Object(object)), Place::Key(_)) => Some(object),
        (Top::Value(Value::Array(items)), Place::Item { index, .. }) => items.get(*index)?.as_object(),
        (Top::Lines(lines), Place::Item { index, .. }) => lines.get(*index)?.value.as_object(),
        _ => None,
    }
}

fn take_messages(top: &mut Top, place: &Place, locator: &Locator) -> Result<Vec<Value>> {
    let slot: &mut Value = match (top, place) {
        (Top::Lines(lines), Place::Root) => {
            return Ok(std::mem::take(lines).into_iter().map(|line| line.value).collect())
        }
        (Top::Value(value), Place::Root) => value,
        (Top::Value(Value::Object(object)), Place::Key(key)) => {
            object.get_mut(key).ok_or_else(|| anyhow!("{}: no `{key}`", locator.whole()))?
        }
        (Top::Value(Value::Array(items)), Place::Item { index, key }) => items
            .get_mut(*index)
            .and_then(|item| item.get_mut(key.as_str()))
            .ok_or_else(|| anyhow!("{}: no `{key}`", locator.whole()))?,
        (Top::Lines(lines), Place::Item { index, key }) => lines
            .get_mut(*index)
            .and_then(|line| line.value.get_mut(key.as_str()))
            .ok_or_else(|| anyhow!("{}: no `{key}`", locator.whole()))?,
        _ => bail!("{}: the messages are not where this format keeps them", locator.whole()),
    };
    match std::mem::take(slot) {
        Value::Array(values) => Ok(values),
        other => {
            let found = json_type(&other);
            *slot = other;
            bail!("{}: expected an array of messages, found {found}", locator.whole())
        }
    }
}

fn read_tools(container: &Map<String, Value>, locator: &Locator) -> Result<Vec<ToolSpec>> {
    let Some(Value::Array(tools)) = container.get("tools") else {
        return Ok(Vec::new());
    };
    tools
        .iter()
        .enumerate()
        .map(|(index, tool)| {
            // OpenAI nests the spec under `function`; Anthropic calls the schema `input_schema`.
            let spec = tool.get("function").unwrap_or(tool);
            let name = spec.get("name").and_then(Value::as_str);
            let Some(name) = name else {
                bail!("{}: tools[{index}]: no `name`", locator.whole());
            };
            let description = spec.get("description").and_then(Value::as_str).unwrap_or_default();
            let parameters = spec
                .get("parameters")
                .or_else(|| spec.get("input_schema"))
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new()));
            Ok(ToolSpec::new(name, description, parameters))
        })
        .collect()
}

pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn json_type_of(top: &Top) -> &'static str {
    match top {
        Top::Value(value) => json_type(value),
        Top::Lines(_) => "JSON Lines",
    }
}

// ---- writing back in the input's format ----
//
// The output goes straight to the writer, one element of the messages array at a time: an
// original the command left alone is serialized from where it sits in `Native`, and only the
// elements that changed are built. Nothing holds a second copy of the file, and the messages as
// read are not kept beside the ones a command works on: `changed` says which messages differ,
// and only when it cannot tell are the originals decoded again (see `plan_write`).

/// Messages of the output that came from one source message, or a run that came from none.
struct Group {
    unit: Option<usize>,
    /// The group's place in `Plan::order`.
    range: Range<usize>,
    /// Whether the group is exactly what `unit` was read as, so the original is written.
    verbatim: bool,
}

/// What the messages array and the envelope will hold, decided before anything is written.
struct Plan<'a> {
    /// The messages the array is made of, by index: all of them, or all but the system ones
    /// for Anthropic, whose system prompt goes in the envelope.
    order: Vec<usize>,
    groups: Vec<Group>,
    system: SystemEdit<'a>,
}

/// What to do with an Anthropic envelope's `system` when writing back.
enum SystemEdit<'a> {
    Keep,
    Set(Cow<'a, Value>),
    Remove,
}

/// What tells a group the command left alone from one it changed.
enum Baseline<'a> {
    /// The messages as read.
    Read(&'a [Message]),
    /// For each message, whether it may differ from the one read at its index; the output is as
    /// long as the conversation read.
    Changed(Vec<bool>),
}

/// How far ahead to look for a message a command left in place when it changed the count.
const ALIGN_WINDOW: usize = 64;

/// For each output message (`messages`), the source message it came from: by position when the
/// count is unchanged, else by finding each message among those read. `None` when only the
/// messages read could tell.
fn align(
    baseline: &Baseline,
    read: &[usize],
    units: &[usize],
    messages: &[&Message],
) -> Option<Vec<Option<usize>>> {
    if messages.len() == units.len() {
        return Some(units.iter().copied().map(Some).collect());
    }
    let Baseline::Read(all) = baseline else { return None };
    let mut cursor = 0;
    let aligned = messages
        .iter()
        .map(|message| {
            let end = read.len().min(cursor + ALIGN_WINDOW);
            let found = (cursor..end).find(|&k| all.get(read[k]) == Some(*message))?;
            cursor = found + 1;
            Some(units[found])
        })
        .collect();
    Some(aligned)
}

/// Splits positions `0..aligned.len()` into runs that came from the same source message.
fn runs(aligned: &[Option<usize>]) -> Vec<(Option<usize>, Range<usize>)> {
    let mut out = Vec::new();
    let mut start = 0;
    for end in 1..=aligned.len() {
        if end == aligned.len() || aligned[end] != aligned[start] {
            out.push((aligned[start], start..end));
            start = end;
        }
    }
    out
}

/// Where each unit's messages start among those read, and how many there are.
fn unit_spans(native: &Native) -> Vec<Option<Range<usize>>> {
    let mut spans: Vec<Option<Range<usize>>> = vec![None; native.originals.len()];
    for (index, &unit) in native.units.iter().enumerate() {
        match spans.get_mut(unit) {
            // Only the first run of a unit counts: a unit's messages are read one after another.
            Some(Some(span)) if span.end == index => span.end = index + 1,
            Some(slot @ None) => *slot = Some(index..index + 1),
            _ => {}
        }
    }
    spans
}

/// Whether the output messages at `group` are exactly what `unit` was read as; `None` when
/// `baseline` cannot tell.
fn unchanged(
    spans: &[Option<Range<usize>>],
    baseline: &Baseline,
    messages: &[Message],
    unit: usize,
    group: &[usize],
) -> Option<bool> {
    let Some(Some(span)) = spans.get(unit) else {
        return Some(false);
    };
    if span.len() != group.len() {
        return Some(false);
    }
    match baseline {
        Baseline::Read(read) => {
            let Some(read) = read.get(span.clone()) else { return Some(false) };
            Some(read.iter().zip(group).all(|(read, &index)| messages.get(index) == Some(read)))
        }
        Baseline::Changed(changed) => {
            if !group.iter().copied().eq(span.clone()) {
                return None;
            }
            let mut edited = group.iter().filter(|&&index| changed[index]).map(|&index| &messages[index]);
            match edited.next() {
                None => Some(true),
                // OpenAI and Anthropic messages are read without meta, and every command that
                // rewrites a message leaves its marker there: such a message is not the one read.
                Some(first) if !first.meta.is_empty() || edited.any(|m| !m.meta.is_empty()) => Some(false),
                Some(_) => None,
            }
        }
    }
}

/// Decides the output: which source message each group came from, which groups are written as
/// their originals, and the envelope's `system`. `None` when `baseline` cannot tell.
fn plan<'a>(
    native: &'a Native,
    target: Target,
    messages: &[Message],
    baseline: &Baseline,
) -> Option<Plan<'a>> {
    let spans = unit_spans(native);
    // A file that is only a list of messages has no envelope to hold a system prompt: a system
    // message in it stays where it is, as in OpenAI's lists.
    let envelope = !matches!(native.place, Place::Root);
    let (order, read, system) = match target {
        Target::Anthropic if envelope => {
            let system_unit = native.system.filter(|&u| native.units.contains(&u));
            // System messages go to the envelope's `system`: those read from it, and any
            // `{"role": "system"}` message of the list, whose unit is then left out of the list's.
            let in_system = |unit: usize| {
                Some(unit) == native.system
                    || native.originals.get(unit).and_then(|o| o.get("role")).and_then(Value::as_str)
                        == Some("system")
            };
            let (system_order, order): (Vec<usize>, Vec<usize>) =
                (0..messages.len()).partition(|&index| messages[index].role == Role::System);
            let system = if system_order.is_empty() {
                SystemEdit::Remove
            } else {
                let kept = match system_unit {
                    Some(unit) => unchanged(&spans, baseline, messages, unit, &system_order)?,
                    None => false,
                };
                match system_unit {
                    Some(unit) if kept => SystemEdit::Set(Cow::Borrowed(&native.originals[unit])),
                    _ => {
                        let system_messages: Vec<&Message> =
                            system_order.iter().map(|&i| &messages[i]).collect();
                        SystemEdit::Set(Cow::Owned(anthropic::encode_system(&system_messages)))
                    }
                }
            };
            let read = (0..native.units.len()).filter(|&index| !in_system(native.units[index])).collect();
            (order, read, system)
        }
        Target::Haystack | Target::OpenAi | Target::Anthropic => (
            (0..messages.len()).collect::<Vec<_>>(),
            (0..native.units.len()).collect::<Vec<_>>(),
            SystemEdit::Keep,
        ),
    };
    let units: Vec<usize> = read.iter().map(|&index| native.units[index]).collect();
    let refs: Vec<&Message> = order.iter().map(|&index| &messages[index]).collect();
    let aligned = align(baseline, &read, &units, &refs)?;
    let mut groups = Vec::new();
    for (unit, range) in runs(&aligned) {
        // Haystack output is always `ChatMessage.to_dict`'s shape, so older shapes are brought up
        // to date: its groups are never written as they were read.
        let verbatim = match unit {
            Some(unit) if target != Target::Haystack => {
                unchanged(&spans, baseline, messages, unit, &order[range.clone()])?
            }
            _ => false,
        };
        groups.push(Group { unit, range, verbatim });
    }
    Some(Plan { order, groups, system })
}

/// The plan for writing `messages` back, with as little as it takes to tell which are unchanged.
fn plan_write<'a>(
    native: &'a Native,
    target: Target,
    messages: &[Message],
    changed: Option<&[usize]>,
) -> Result<Plan<'a>> {
    let cannot = || anyhow!("cannot tell which messages changed");
    // The Haystack span reader keeps the messages read when it falls back to this path.
    if native.read.len() == native.units.len() {
        return plan(native, target, messages, &Baseline::Read(&native.read)).ok_or_else(cannot);
    }
    if let Some(changed) = changed.filter(|_| messages.len() == native.units.len()) {
        let mut flags = vec![false; messages.len()];
        for &index in changed {
            if let Some(flag) = flags.get_mut(index) {
                *flag = true;
            }
        }
        if let Some(plan) = plan(native, target, messages, &Baseline::Changed(flags)) {
            return Ok(plan);
        }
    }
    // Messages were dropped, added or moved, or a changed one carries no marker. The messages
    // read are needed then, for as long as planning takes.
    let read = decode_again(native, target)?;
    plan(native, target, messages, &Baseline::Read(&read)).ok_or_else(cannot)
}

/// The messages as read, decoded again from the originals by the decoder that read them.
fn decode_again(native: &Native, target: Target) -> Result<Vec<Message>> {
    let locator = Locator { prefix: String::new(), noun: "message", lines: None };
    let decoded = match target {
        Target::Haystack => haystack::read(&native.originals, &locator)?,
        Target::OpenAi => openai::read(&native.originals, &locator)?,
        Target::Anthropic => {
            // A `system` is kept after the messages.
            let (values, system) = match (native.system, native.originals.split_last()) {
                (Some(_), Some((last, values))) => (values, Some(last)),
                _ => (native.originals.as_slice(), None),
            };
            anthropic::read(values, system, &locator)?
        }
    };
    if decoded.units != native.units {
        bail!("the messages read decode differently a second time");
    }
    Ok(decoded.messages)
}

/// The messages array of the output, element by element.
struct Elements<'a> {
    native: &'a Native,
    target: Target,
    messages: &'a [Message],
    plan: &'a Plan<'a>,
}

impl<'a> Elements<'a> {
    fn iter(&self) -> impl Iterator<Item = Cow<'a, Value>> + '_ {
        self.plan.groups.iter().flat_map(|group| self.group(group))
    }

    /// A group's elements: the original when unchanged, else the fresh encoding laid over the
    /// original when there is one to lay it over.
    fn group(&self, group: &Group) -> Vec<Cow<'a, Value>> {
        let originals = &self.native.originals;
        if let (Some(unit), true) = (group.unit, group.verbatim) {
            return vec![Cow::Borrowed(&originals[unit])];
        }
        let messages: Vec<&Message> =
            self.plan.order[group.range.clone()].iter().map(|&index| &self.messages[index]).collect();
        let (fresh, shape): (Vec<Value>, &overlay::Shape) = match self.target {
            Target::Haystack => (messages.iter().map(|m| m.to_value()).collect(), &haystack::SHAPE),
            Target::OpenAi => (
                messages.iter().flat_map(|m| openai::encode(std::slice::from_ref(*m))).collect(),
                &openai::SHAPE,
            ),
            Target::Anthropic => {
                let prefer_string = group
                    .unit
                    .and_then(|u| originals.get(u))
                    .is_none_or(|original| original.get("content").is_some_and(Value::is_string));
                let fresh = match group.unit {
                    Some(_) => vec![anthropic::encode_group(&messages, prefer_string)],
                    None => anthropic::encode(&messages),
                };
                (fresh, &anthropic::SHAPE)
            }
        };
        match group.unit {
            Some(unit) if fresh.len() == 1 => {
                let fresh = fresh.into_iter().next().unwrap_or(Value::Null);
                vec![Cow::Owned(overlay::overlay(&originals[unit], fresh, shape))]
            }
            _ => fresh.into_iter().map(Cow::Owned).collect(),
        }
    }
}

impl Serialize for Elements<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

/// The object holding the conversation, with its messages put back under `key` and its
/// `system` edited, keys where `Map::insert` and `Map::shift_remove` would leave them.
struct Container<'a> {
    object: &'a Map<String, Value>,
    key: &'a str,
    elements: &'a Elements<'a>,
}

impl Serialize for Container<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let system = &self.elements.plan.system;
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.object {
            if key == self.key {
                map.serialize_entry(key, self.elements)?;
            } else if key == "system" {
                match system {
                    SystemEdit::Keep => map.serialize_entry(key, value)?,
                    SystemEdit::Set(system) => map.serialize_entry(key, system)?,
                    SystemEdit::Remove => {}
                }
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        // A key the object lacks is inserted at its end: the messages first, then `system`.
        if !self.object.contains_key(self.key) {
            map.serialize_entry(self.key, self.elements)?;
        }
        if let (SystemEdit::Set(system), false) = (system, self.object.contains_key("system")) {
            map.serialize_entry("system", system)?;
        }
        map.end()
    }
}

/// A file's array of conversations, one of them written with its new messages.
struct Items<'a> {
    items: &'a [Value],
    index: usize,
    key: &'a str,
    elements: &'a Elements<'a>,
}

impl Serialize for Items<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(None)?;
        for (index, item) in self.items.iter().enumerate() {
            match item {
                Value::Object(object) if index == self.index => {
                    seq.serialize_element(&Container { object, key: self.key, elements: self.elements })?
                }
                item => seq.serialize_element(item)?,
            }
        }
        seq.end()
    }
}

/// Writes the file back with `messages` in place of the conversation read, compact, as
/// `serde_json` writes a value, ending in a newline (every line does, in JSON Lines).
fn write_native_to(
    native: &Native,
    target: Target,
    messages: &[Message],
    changed: Option<&[usize]>,
    out: &mut dyn Write,
) -> Result<()> {
    let plan = plan_write(native, target, messages, changed)?;
    let elements = Elements { native, target, messages, plan: &plan };
    match (&native.top, &native.place) {
        (Top::Lines(_), Place::Root) => {
            for element in elements.iter() {
                line(out, &*element)?;
            }
        }
        (Top::Lines(lines), Place::Item { index, key }) => {
            for (number, Line { value, .. }) in lines.iter().enumerate() {
                match value {
                    Value::Object(object) if number == *index => {
                        line(out, &Container { object, key, elements: &elements })?
                    }
                    value => line(out, value)?,
                }
            }
        }
        (Top::Value(_), Place::Root) => line(out, &elements)?,
        (Top::Value(Value::Object(object)), Place::Key(key)) => {
            line(out, &Container { object, key, elements: &elements })?
        }
        (Top::Value(Value::Array(items)), Place::Item { index, key }) => {
            line(out, &Items { items, index: *index, key, elements: &elements })?
        }
        (Top::Lines(lines), _) => {
            for Line { value, .. } in lines {
                line(out, value)?;
            }
        }
        (Top::Value(value), _) => line(out, value)?,
    }
    Ok(())
}

/// `value` as one line: compact JSON and a newline.
fn line<T: Serialize + ?Sized>(out: &mut dyn Write, value: &T) -> Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    Ok(out.write_all(b"\n")?)
}
