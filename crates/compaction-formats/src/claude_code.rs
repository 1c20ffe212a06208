//! Claude Code session logs: one event a line; `user` and `assistant` events carry an Anthropic
//! `message`.
//!
//! Claude Code writes each content block of an assistant reply as its own line, all sharing the
//! API message's `message.id` (and `usage`), with tool results sometimes logged between them;
//! the lines of one id are one assistant message. Lines the model never saw (progress,
//! file-history snapshots, system notes, queue operations, titles) are skipped and counted.
//!
//! Two kinds of file exist. A session file (`<session>.jsonl`) is the main conversation; lines
//! marked `isSidechain` there belong to subagents and are skipped. A subagent file
//! (`<session>/subagents/agent-*.jsonl`) has every line marked `isSidechain`: it is the
//! subagent's own conversation. The first conversational line tells which.
//!
//! When Claude Code compacts a session it writes a `system` line with subtype
//! `compact_boundary`, then a `user` line with `isCompactSummary` holding the summary. The model
//! sees only the summary and what follows; that is what is read, unless the full history is
//! asked for.

use std::sync::Arc;

use compaction_json::dupkeys::{self, Keys, Tracked};
use compaction_json::scan;
use compaction_json::splice::{self, Seg};
use compaction_model::{JsonSource, Role, ToolResultContent};
use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::anthropic::{self, Opaque};
use crate::codec::{not_a_tree, Codec, LineRead, TreeRead};
use crate::conversation::Decoded;
use crate::conversation::ProviderCompaction;
use crate::document::{json_type, member, member_of, take_members};
use crate::error::{snippet, Error, Location};
use crate::eventlog::Event;
use crate::eventlog::{LogDecoded, MessageSlots, Slot, Style};
use crate::format::Format;
use crate::notes::{plural, thousands, Note, NoteKind, Tally};
use crate::pairing::OpenCalls;
use crate::usage::{rfc3339_millis, MessageUsage, Usage};
use crate::values;
use crate::values::ResultsFound;

/// Reads a Claude Code log line by line.
#[derive(Debug)]
pub(crate) struct Reader {
    name: String,
    full_history: bool,
    decoded: LogDecoded,
    calls: OpenCalls,
    opaque: Opaque,
    /// The id and position of the latest assistant message.
    last_turn: Option<(String, usize)>,
    /// Whether this is a subagent's file; decided by the first conversational line.
    sidechain: Option<bool>,
    skipped: Tally,
    other_chain: usize,
    /// The line of the last compaction boundary, and how many lines came before it.
    boundary: Option<(usize, usize)>,
    lines: usize,
}

impl Reader {
    pub(crate) fn new(name: &str, full_history: bool) -> Self {
        Reader {
            name: name.to_owned(),
            full_history,
            decoded: LogDecoded::default(),
            calls: OpenCalls::default(),
            opaque: Opaque::default(),
            last_turn: None,
            sidechain: None,
            skipped: Tally::default(),
            other_chain: 0,
            boundary: None,
            lines: 0,
        }
    }

    fn invalid(&self, number: usize, problem: impl Into<String>) -> Error {
        let at = Location::file(&self.name).with_line(number).with_item("event", self.lines);
        Error::Invalid { at: Box::new(at), problem: problem.into() }
    }

    /// Reads line `number` (1-based), the `base`-th line read.
    pub(crate) fn line(&mut self, number: usize, base: u32, event: Event) -> Result<(), Error> {
        let Event { value, message_at, mut found } = event;
        self.lines += 1;
        let mut object = match value {
            Value::Object(object) => object,
            other => {
                let found = json_type(&other);
                return Err(self.invalid(number, format!("expected an event object, found {found}")));
            }
        };
        let kind = match member_of(&object, "type") {
            Some(Value::String(kind)) => kind.as_str(),
            Some(other) => {
                return Err(
                    self.invalid(number, format!("`type` must be a string, found {}", json_type(other)))
                )
            }
            None => {
                self.skipped.add("untyped");
                return Ok(());
            }
        };
        if kind == "system"
            && member_of(&object, "subtype").and_then(Value::as_str) == Some("compact_boundary")
        {
            self.compact_boundary(number, &object);
            return Ok(());
        }
        if !matches!(kind, "user" | "assistant") {
            let label = match member_of(&object, "subtype").and_then(Value::as_str) {
                Some(subtype) => format!("{kind}/{subtype}"),
                None => kind.to_owned(),
            };
            self.skipped.add(&label);
            return Ok(());
        }
        // A user or assistant event from here on; its kind no longer borrows the event.
        let kind = if kind == "user" { "user" } else { "assistant" };
        let sidechain = member_of(&object, "isSidechain").and_then(Value::as_bool) == Some(true);
        match self.sidechain {
            None => self.sidechain = Some(sidechain),
            Some(mine) if mine != sidechain => {
                self.other_chain += 1;
                return Ok(());
            }
            Some(_) => {}
        }
        let [message] = take_members(&mut object, ["message"]);
        let Some(message) = message else {
            return Err(self.invalid(number, format!("a {kind} event without `message`")));
        };
        let id = member(&message, "id").and_then(Value::as_str).map(str::to_owned);
        let usage = usage(&message).map(|usage| {
            let at = member_of(&object, "timestamp").and_then(Value::as_str).and_then(rfc3339_millis);
            let model = member(&message, "model").and_then(Value::as_str).map(Arc::from);
            MessageUsage::new(0, usage).with_call(at, model)
        });
        let read = anthropic::read_blocks(message, &mut self.calls, &mut self.opaque, &mut found)
            .map_err(|error| self.invalid(number, format!("`message`: {error}")))?;
        let id = id.as_deref();
        let content = match message_at {
            Some(at) => [Seg::At(at), Seg::Key("content")],
            None => [Seg::Key("message"), Seg::Key("content")],
        };
        for read in read {
            let call_slots: Vec<Option<Slot>> = read
                .call_blocks
                .iter()
                .map(|&k| Some(slot(base, &content, k, "input", Style::AnthropicInput)))
                .collect();
            let result_slots: Vec<Option<Slot>> = read
                .result_block
                .map(|k| {
                    let mut slot = slot(base, &content, k, "content", Style::AnthropicResult);
                    slot.span = found.span(k);
                    Some(slot)
                })
                .into_iter()
                .collect();
            let message = read.message;
            // Another block of the assistant reply being logged.
            if let (Some((last, position)), Some(id), Role::Assistant) = (&self.last_turn, id, message.role) {
                if last == id {
                    let position = *position;
                    self.decoded.messages[position].parts.extend(message.parts);
                    self.decoded.slots[position].calls.extend(call_slots);
                    self.set_usage(position, usage.clone());
                    continue;
                }
            }
            let position = self.decoded.messages.len();
            if let (Some(id), Role::Assistant) = (id, message.role) {
                self.last_turn = Some((id.to_owned(), position));
                self.set_usage(position, usage.clone());
            }
            self.decoded
                .push(message, MessageSlots { results: result_slots, calls: call_slots, fingerprint: 0 });
        }
        Ok(())
    }

    /// The usage of the reply at `position`: each line of it repeats the usage, the last one
    /// with the final output count.
    /// The call's time is its first line's.
    fn set_usage(&mut self, position: usize, usage: Option<MessageUsage>) {
        let Some(usage) = usage else { return };
        match self.decoded.usage.last_mut() {
            Some(last) if last.message == position => {
                last.usage = usage.usage;
                last.timestamp_ms = last.timestamp_ms.or(usage.timestamp_ms);
                last.model = last.model.take().or(usage.model);
            }
            _ => self.decoded.usage.push(MessageUsage { message: position, ..usage }),
        }
    }

    fn compact_boundary(&mut self, number: usize, object: &serde_json::Map<String, Value>) {
        let pre_tokens =
            object.get("compactMetadata").and_then(|m| m.get("preTokens")).and_then(Value::as_u64);
        if self.full_history {
            self.decoded.compactions.push(ProviderCompaction {
                message: self.decoded.messages.len(),
                line: Some(number),
                tokens_before: pre_tokens,
            });
        } else {
            self.decoded.reset();
            self.last_turn = None;
            // What the notes count is what follows the boundary; the lines before it are said once.
            self.skipped = Tally::default();
            self.other_chain = 0;
            self.decoded.compactions.push(ProviderCompaction {
                message: 0,
                line: Some(number),
                tokens_before: pre_tokens,
            });
        }
        self.boundary = Some((number, self.lines - 1));
    }

    pub(crate) fn finish(mut self) -> Result<LogDecoded, Error> {
        let mut notes = Vec::new();
        if let Some((line, before)) = self.boundary {
            let text = if self.full_history {
                format!("Claude Code compacted this session at line {line}; read with the full history")
            } else {
                format!(
                    "Claude Code compacted this session at line {line}: read what the model saw after it \
                     (the summary and what follows); the {} before it are left out (full history keeps them)",
                    plural(before, "line")
                )
            };
            notes.push(Note::new(NoteKind::Compacted, before, text));
        }
        if self.other_chain > 0 {
            let text = match self.sidechain {
                Some(true) => format!(
                    "read a subagent's conversation (every line a sidechain); skipped {} of the main conversation",
                    plural(self.other_chain, "line")
                ),
                _ => format!("skipped {} sidechain lines (subagents' conversations)", thousands(self.other_chain)),
            };
            notes.push(Note::new(NoteKind::Skipped, self.other_chain, text));
        }
        notes.extend(self.skipped.note("line", "the model never saw"));
        notes.extend(self.opaque.note());
        self.decoded.notes = notes;
        Ok(self.decoded)
    }
}

fn slot(base: u32, content: &[Seg], block: usize, key: &'static str, style: Style) -> Slot {
    let mut path = content.to_vec();
    path.push(Seg::Index(u32::try_from(block).unwrap_or(u32::MAX)));
    path.push(Seg::Key(key));
    Slot { base, path: path.into_boxed_slice(), style, span: None }
}

/// An assistant message's `usage`, when it records a model call (Claude Code writes zeros for
/// replies it made up itself, such as API error messages).
fn usage(message: &Value) -> Option<Usage> {
    let usage = member(message, "usage")?;
    let count = |key: &str| member(usage, key).and_then(Value::as_u64).unwrap_or(0);
    let lifetime = |key: &str| {
        member(usage, "cache_creation").and_then(|c| member(c, key)).and_then(Value::as_u64).unwrap_or(0)
    };
    let usage = Usage::new(count("input_tokens"), count("output_tokens"))
        .with_cache(count("cache_read_input_tokens"), count("cache_creation_input_tokens"))
        .with_cache_lifetimes(lifetime("ephemeral_5m_input_tokens"), lifetime("ephemeral_1h_input_tokens"));
    (!usage.is_zero()).then_some(usage)
}

/// The fields of a Claude Code event that [`Reader::line`] reads, as an object holding only them,
/// found without building the rest of the line: the envelope (`cwd`, `uuid`, …), the
/// `toolUseResult` that repeats each tool output, and the payload of progress and file-history
/// events are skipped unbuilt, and `message` is built only for `user` and `assistant` events.
///
/// `None` when the line is not a plain event object (not UTF-8, not JSON, not an object, too
/// deep): the caller then parses the line whole, which reads it, or fails, as before.
///
/// With the event come the repeated keys of what was read: the event's own keys and those of the
/// values built ([`dupkeys::Tracked`]). What is skipped unbuilt is never read, so its keys are not
/// looked at.
pub(crate) fn lean_event(line: &[u8]) -> Option<(Event, Keys)> {
    lean_event_by(line, true, None)
}

/// [`lean_event`] of the line at `line` in `source`, its tool results' texts left there (see
/// [`values::Left`]) when its `message` is built by hand.
pub(crate) fn lean_event_in(source: &JsonSource, line: std::ops::Range<usize>) -> Option<(Event, Keys)> {
    lean_event_by(&source.as_bytes()[line.clone()], true, Some((source, line.start)))
}

/// [`lean_event`], its fields found by [`walk_fields`] when `walk` and it can, else by
/// [`FieldsSeed`]: the two give the same, as the tests check. With `source` (the input, and
/// where the line starts in it), the texts a walk leaves in the input come with the event.
pub(crate) fn lean_event_by(
    line: &[u8],
    walk: bool,
    source: Option<(&JsonSource, usize)>,
) -> Option<(Event, Keys)> {
    let text = simdutf8::basic::from_utf8(line).ok()?;
    let mut keys = Keys::default();
    let mut left = source.map(|(source, start)| values::Left {
        source,
        start,
        texts: false,
        found: ResultsFound::default(),
    });
    let fields = match walk.then(|| walk_fields(text, left.as_mut())).flatten() {
        Some(fields) => fields,
        // What the walk leaves (a key written with an escape or given twice, anything it is not
        // sure of) serde_json reads, or refuses.
        None => {
            // What a failed walk left is not wanted.
            left = None;
            let mut deserializer = serde_json::Deserializer::from_str(text);
            let fields = FieldsSeed(&mut keys).deserialize(&mut deserializer).ok()?;
            deserializer.end().ok()?;
            fields
        }
    };
    let mut parse = |raw: Option<&RawValue>| match raw {
        Some(raw) => dupkeys::tracked_value(raw.get(), &mut keys).map(Some),
        None => Ok(None),
    };
    let mut object = Map::new();
    let kind = parse(fields.kind).ok()?;
    let chat = matches!(kind.as_ref().and_then(Value::as_str), Some("user" | "assistant"));
    let wanted: &[(&str, Option<&RawValue>)] = match kind.as_ref().and_then(Value::as_str) {
        Some("user" | "assistant") => &[("isSidechain", fields.sidechain), ("timestamp", fields.timestamp)],
        Some("system") => &[("subtype", fields.subtype), ("compactMetadata", fields.compact)],
        _ => &[("subtype", fields.subtype)],
    };
    if let Some(kind) = kind {
        object.insert("type".into(), kind);
    }
    for &(key, raw) in wanted {
        if let Some(value) = parse(raw).ok()? {
            object.insert(key.into(), value);
        }
    }
    let mut message_at = None;
    let mut found = ResultsFound::default();
    match fields.message {
        Some(Message::Raw(raw)) if chat => {
            object.insert("message".into(), parse(Some(raw)).ok()??);
            // A raw value borrows its text from the line.
            message_at = u32::try_from(raw.get().as_ptr() as usize - text.as_ptr() as usize).ok();
        }
        Some(Message::Built(value)) if chat => {
            object.insert("message".into(), value);
            found = left.map(|left| left.found).unwrap_or_default();
            keys.merge(fields.message_keys);
            // Given once, the first `message` of the line is the one read; the walk saw where.
            if fields.messages == 1 {
                message_at = fields
                    .message_at
                    .or_else(|| splice::first_member(line, 0, "message"))
                    .and_then(|at| u32::try_from(at).ok());
            }
        }
        _ => {}
    }
    Some((Event { value: Value::Object(object), message_at, found }, keys))
}

/// An event's [`Fields`], found by walking its members: what is not read is crossed by
/// [`scan::value_end`], checked as serde_json checks it and faster than serde_json skips it (a
/// session's `toolUseResult` is half its bytes), a `user` or `assistant` event's `message` is
/// built by [`values::value_at`], as serde_json would build it, and the few other values read
/// are parsed by serde_json. `None` when the line is not an object whose keys are plain and
/// given once, or anything in it is not JSON: [`FieldsSeed`] then reads it, or refuses it, as
/// before. With `left`, the message's tool results' texts are left in the input.
pub(crate) fn walk_fields<'t>(text: &'t str, mut left: Option<&mut values::Left<'_>>) -> Option<Fields<'t>> {
    let bytes = text.as_bytes();
    let mut fields = Fields::default();
    let mut names: Vec<&str> = Vec::new();
    let mut at = scan::whitespace(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at = scan::whitespace(bytes, at + 1);
    if bytes.get(at) != Some(&b'}') {
        loop {
            if bytes.get(at) != Some(&b'"') {
                return None;
            }
            let end = scan::string_end(bytes, at + 1)?;
            let name = text.get(at + 1..end - 1)?;
            if name.contains('\\') || names.contains(&name) {
                return None;
            }
            names.push(name);
            at = scan::whitespace(bytes, end);
            if bytes.get(at) != Some(&b':') {
                return None;
            }
            at = scan::whitespace(bytes, at + 1);
            let raw = |end: usize| serde_json::from_str::<&RawValue>(text.get(at..end)?).ok();
            at = match name {
                "type" | "subtype" | "isSidechain" | "compactMetadata" | "timestamp" => {
                    let end = scan::value_end(bytes, at)?;
                    let slot = match name {
                        "type" => &mut fields.kind,
                        "subtype" => &mut fields.subtype,
                        "isSidechain" => &mut fields.sidechain,
                        "timestamp" => &mut fields.timestamp,
                        _ => &mut fields.compact,
                    };
                    *slot = Some(raw(end)?);
                    end
                }
                "message" => {
                    fields.messages += 1;
                    let chat = fields.kind.is_some_and(|k| matches!(k.get(), r#""user""# | r#""assistant""#));
                    if chat {
                        // Built as it is crossed, by hand.
                        let mut keys = Keys::default();
                        let (message, end) = values::value_at(text, at, &mut keys, left.as_deref_mut())?;
                        fields.message = Some(Message::Built(message));
                        fields.message_keys = keys;
                        fields.message_at = Some(at);
                        end
                    } else {
                        let end = scan::value_end(bytes, at)?;
                        fields.message = Some(Message::Raw(raw(end)?));
                        end
                    }
                }
                _ => scan::value_end(bytes, at)?,
            };
            at = scan::whitespace(bytes, at);
            match bytes.get(at)? {
                b',' => at = scan::whitespace(bytes, at + 1),
                b'}' => break,
                _ => return None,
            }
        }
    }
    (scan::whitespace(bytes, at + 1) == bytes.len()).then_some(fields)
}

/// The raw JSON of the keys [`Reader::line`] reads; a key given twice keeps its last value, as a
/// parsed object would.
///
/// `message` is built as it is crossed when the line's `type` came before it and makes the
/// event a `user` or `assistant` one (as Claude Code writes them), sparing a second pass over
/// it; otherwise it is kept raw, to be built only if the event turns out to need it.
#[derive(Default)]
pub(crate) struct Fields<'a> {
    kind: Option<&'a RawValue>,
    subtype: Option<&'a RawValue>,
    sidechain: Option<&'a RawValue>,
    message: Option<Message<'a>>,
    /// How many times `message` was given.
    messages: usize,
    compact: Option<&'a RawValue>,
    /// When the event was logged (the time of a reply's call).
    timestamp: Option<&'a RawValue>,
    /// The repeated keys of the `message` built, which count only if it is read: a later
    /// `type` can make the event one that is not, or a later `message` replace it.
    message_keys: Keys,
    /// Where the `message` built by hand starts in the line.
    message_at: Option<usize>,
}

/// An event's `message`, raw or built.
enum Message<'a> {
    Raw(&'a RawValue),
    Built(Value),
}

/// A key of an event, as [`Fields`] sorts it.
#[derive(Clone, Copy)]
enum Key {
    Kind,
    Subtype,
    Sidechain,
    Message,
    Compact,
    Timestamp,
    Other,
}

/// A key of an event, sorted, and as written: borrowed from the line unless written with an
/// escape.
struct NamedKey<'de> {
    key: Key,
    name: std::borrow::Cow<'de, str>,
}

impl<'de> Deserialize<'de> for NamedKey<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = NamedKey<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<NamedKey<'de>, E> {
                Ok(NamedKey { key: sort(key), name: key.into() })
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<NamedKey<'de>, E> {
                Ok(NamedKey { key: sort(key), name: key.to_owned().into() })
            }
        }
        fn sort(key: &str) -> Key {
            match key {
                "type" => Key::Kind,
                "subtype" => Key::Subtype,
                "isSidechain" => Key::Sidechain,
                "message" => Key::Message,
                "compactMetadata" => Key::Compact,
                "timestamp" => Key::Timestamp,
                _ => Key::Other,
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// Reads an event's [`Fields`], telling `keys` whether the event repeats a key or writes one
/// with an escape.
struct FieldsSeed<'k>(&'k mut Keys);

impl<'de> DeserializeSeed<'de> for FieldsSeed<'_> {
    type Value = Fields<'de>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Fields<'de>, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FieldsSeed<'_> {
    type Value = Fields<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an event object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<'de>, A::Error> {
        let mut fields = Fields::default();
        // An event has a score of keys: a list is quicker to search than a set is to fill.
        let mut names: Vec<std::borrow::Cow<'de, str>> = Vec::new();
        let mut repeated = false;
        while let Some(NamedKey { key, name }) = map.next_key::<NamedKey<'de>>()? {
            if let std::borrow::Cow::Owned(_) = name {
                self.0.escaped = true;
            }
            if names.contains(&name) {
                if !repeated {
                    repeated = true;
                    self.0.repeat(&name);
                }
            } else {
                names.push(name);
            }
            let slot = match key {
                Key::Kind => &mut fields.kind,
                Key::Subtype => &mut fields.subtype,
                Key::Sidechain => &mut fields.sidechain,
                Key::Message => {
                    fields.messages += 1;
                    // Spelled plainly, as Claude Code writes it; any other spelling is
                    // told after the line is read.
                    let chat = fields.kind.is_some_and(|k| matches!(k.get(), r#""user""# | r#""assistant""#));
                    fields.message = Some(if chat {
                        fields.message_keys = Keys::default();
                        Message::Built(map.next_value_seed(Tracked::new(&mut fields.message_keys))?)
                    } else {
                        Message::Raw(map.next_value::<&'de RawValue>()?)
                    });
                    continue;
                }
                Key::Compact => &mut fields.compact,
                Key::Timestamp => &mut fields.timestamp,
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            *slot = Some(map.next_value::<&'de RawValue>()?);
        }
        Ok(fields)
    }
}

/// What a file read as Claude Code holds when it yields no message, for the error.
pub(crate) fn why_empty(source: &[u8]) -> String {
    let types = crate::eventlog::first_types(source);
    if types.iter().any(|t| crate::codex::RECORD_TYPES.contains(&t.as_str())) {
        return "its lines carry `type`/`payload` like a Codex rollout, not Claude Code's `message`; try \
                --format codex"
            .into();
    }
    if types.is_empty() {
        return "no line is a Claude Code event".into();
    }
    let shown: Vec<String> = types.iter().take(4).map(|t| snippet(t)).collect();
    format!("no `user` or `assistant` line was read; the first lines are of type {}", shown.join(", "))
}

/// Keys only Claude Code events carry.
const CLAUDE_CODE_KEYS: &[&str] =
    &["sessionId", "uuid", "parentUuid", "isSidechain", "leafUuid", "messageId"];
/// Event types Claude Code writes.
const CLAUDE_CODE_TYPES: &[&str] =
    &["user", "assistant", "system", "summary", "progress", "file-history-snapshot", "queue-operation"];

/// Claude Code session logs.
pub(crate) struct ClaudeCode;

impl Codec for ClaudeCode {
    fn is_log_record(&self, object: &Map<String, Value>) -> bool {
        let kind = object.get("type").and_then(Value::as_str);
        // A `user` or `assistant` event wraps its API message in `message`, which no other format
        // does; every other Claude Code event carries the session's bookkeeping keys.
        let wraps_message =
            matches!(kind, Some("user" | "assistant")) && object.get("message").is_some_and(Value::is_object);
        wraps_message
            || (kind.is_some_and(|k| CLAUDE_CODE_TYPES.contains(&k))
                && CLAUDE_CODE_KEYS.iter().any(|k| object.contains_key(*k)))
    }

    fn line_reader(&self, name: &str, full_history: bool) -> Option<Box<dyn LineRead>> {
        Some(Box::new(Reader::new(name, full_history)))
    }

    fn read_tree(&self, _values: &[Value], tree: &TreeRead<'_>) -> Result<Decoded, Error> {
        Err(not_a_tree(tree.name, Format::ClaudeCode.label()))
    }

    fn result_content(&self, value: &Value) -> Option<ToolResultContent> {
        anthropic::result_content(Some(value.clone())).ok()
    }

    fn why_empty(&self, source: &[u8]) -> String {
        why_empty(source)
    }
}

impl LineRead for Reader {
    fn line(&mut self, number: usize, base: u32, event: Event) -> Result<(), Error> {
        Reader::line(self, number, base, event)
    }

    fn finish(self: Box<Self>) -> Result<LogDecoded, Error> {
        Reader::finish(*self)
    }
}
