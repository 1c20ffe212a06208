//! OpenAI Responses items: what the Responses API takes as `input` and returns as `output`, what
//! the Agents SDK stores, and what Codex rollouts record line by line.
//!
//! Items become messages as a Chat Completions conversation would hold them: a user, system or
//! developer `message` is a message of that role; the items a model call produced (assistant
//! `message`, `reasoning`, `function_call`, `custom_tool_call`, `local_shell_call`, and server
//! tools such as `web_search_call`) are one assistant message, which ends at the next input item
//! (or, in a Codex rollout, at the call's `token_count`); each `function_call_output` (and
//! `custom_tool_call_output`, `local_shell_call_output`) is a tool message answering the call with
//! its `call_id`.
//!
//! Items the model has no part for are kept as opaque text parts holding the item, in place,
//! written back as they were: `compaction` items (counted as their encrypted content: the log does
//! not say what they stand for), server tool calls and any kind added later (counted as their
//! JSON). Pruning never touches them: it prunes tool results only.

use compaction_model::{
    FilePart, ImagePart, JsonObject, Message, Part, ReasoningPart, ResultPart, Role, TextPart, ToolCall,
    ToolResultContent,
};
use serde_json::{Map, Value};

use crate::codec::{not_a_tree, Codec, LineRead, TreeRead};
use crate::conversation::Decoded;
use crate::document::json_type;
use crate::error::snippet;
use crate::eventlog::{Event, LogDecoded, MessageSlots, Slot, Style};
use crate::notes::{plural, Note, NoteKind, Tally};
use crate::pairing::{unpaired, OpenCalls};
use compaction_json::splice::Seg;
use compaction_model::{Arguments, SharedObject};

/// Item types that only a Responses list holds (for detection).
pub(crate) const ITEM_TYPES: &[&str] = &[
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "local_shell_call_output",
    "reasoning",
    "compaction",
    "compaction_summary",
    "web_search_call",
    "file_search_call",
    "computer_call",
    "computer_call_output",
    "item_reference",
    "mcp_call",
    "image_generation_call",
    "code_interpreter_call",
];

/// Whether a JSON object is a Responses item rather than a chat message.
pub(crate) fn is_item(object: &Map<String, Value>) -> bool {
    match object.get("type").and_then(Value::as_str) {
        Some("message") => object.contains_key("role"),
        Some(kind) => ITEM_TYPES.contains(&kind),
        None => false,
    }
}

/// Reads items one after another into a conversation.
#[derive(Debug, Default)]
pub(crate) struct Items {
    pub decoded: LogDecoded,
    calls: OpenCalls,
    /// The assistant message the current model call's items go to.
    turn: Option<usize>,
    /// The latest assistant message, which a usage report belongs to.
    pub last_assistant: Option<usize>,
    pub skipped: Tally,
    opaque: Tally,
}

impl Items {
    /// The model call being read ended: its next item starts a new assistant message.
    pub(crate) fn end_turn(&mut self) {
        self.turn = None;
    }

    /// Reads one item, found at `path` in line `base`. `Err` is the problem, for the caller to
    /// place.
    pub(crate) fn item(&mut self, item: &Value, base: u32, path: &[Seg]) -> Result<(), String> {
        let Some(object) = item.as_object() else {
            return Err(format!("expected an item object, found {}", json_type(item)));
        };
        let kind = match object.get("type") {
            Some(Value::String(kind)) => kind.as_str(),
            Some(other) => return Err(format!("`type` must be a string, found {}", json_type(other))),
            // The Responses API's short form of a message: `{"role", "content"}`.
            None if object.contains_key("role") => "message",
            None => {
                return Err(format!(
                    "an item without `type` (keys present: {})",
                    crate::document::key_list(object)
                ))
            }
        };
        let at = |key: &'static str| {
            let mut path = path.to_vec();
            path.push(Seg::Key(key));
            path.into_boxed_slice()
        };
        match kind {
            "message" => self.message(object)?,
            "function_call" | "custom_tool_call" => {
                let (call, slot) = if kind == "function_call" {
                    let arguments = object.get("arguments");
                    let call = function_call(object, arguments)?;
                    (
                        call,
                        Some(Slot { base, path: at("arguments"), style: Style::ArgumentsText, span: None }),
                    )
                } else {
                    // Freeform text, read as `arguments` are: a JSON object is the call's
                    // arguments, anything else its text. So an input written back from
                    // arguments (cleared ones: `{}`) reads as the message that was written.
                    let input = Value::String(string(object, "input")?);
                    let call = function_call(object, Some(&input))?;
                    (call, Some(Slot { base, path: at("input"), style: Style::ArgumentsText, span: None }))
                };
                self.calls.push(&call);
                let turn = self.turn();
                self.decoded.messages[turn].parts.push(Part::ToolCall(call));
                self.decoded.slots[turn].calls.push(slot);
            }
            "local_shell_call" | "computer_call" => {
                let shell = kind == "local_shell_call";
                let name = if shell { "local_shell" } else { "computer" };
                let mut arguments =
                    object.get("action").and_then(Value::as_object).cloned().unwrap_or_default();
                // A shell action cleared is written as the least action Codex reads; it reads
                // back as the cleared call it was written from.
                if shell && Value::Object(arguments.clone()) == crate::eventlog::cleared_shell_action() {
                    arguments.clear();
                }
                let mut call = ToolCall::new(name, arguments);
                call.id = object
                    .get("call_id")
                    .or_else(|| object.get("id"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                self.calls.push(&call);
                let turn = self.turn();
                self.decoded.messages[turn].parts.push(Part::ToolCall(call));
                // A shell call's action can be cleared in place; a computer call's cannot (no
                // action of it means nothing), so changing one is refused on writing back.
                let slot = (shell && object.get("action").is_some_and(Value::is_object)).then(|| Slot {
                    base,
                    path: at("action"),
                    style: Style::ShellAction,
                    span: None,
                });
                self.decoded.slots[turn].calls.push(slot);
            }
            "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
                self.turn = None;
                let id = string(object, "call_id")?;
                let origin = self.calls.answer(Some(&id)).ok_or_else(|| unpaired(Some(&id)))?;
                let output = object.get("output").ok_or("no `output`")?;
                let (result, error) = match output_content(output) {
                    Ok(result) => (result, output_failed(output)),
                    Err(error) => return Err(format!("`output`: {error}")),
                };
                let slot = Slot { base, path: at("output"), style: Style::ResponsesOutput, span: None };
                self.decoded.push(
                    Message::tool(result, origin, error),
                    MessageSlots { results: vec![Some(slot)], calls: Vec::new(), fingerprint: 0 },
                );
            }
            "reasoning" => {
                let text = reasoning_text(object);
                let mut extra = JsonObject::new();
                extra.insert(
                    crate::provider::PROVIDER_ITEM.into(),
                    crate::provider::provider_marker("responses", item.clone()),
                );
                let part = Part::Reasoning(ReasoningPart {
                    reasoning_text: text,
                    extra: extra.into(),
                    unknown: SharedObject::new(),
                });
                let turn = self.turn();
                self.decoded.messages[turn].parts.push(part);
            }
            "ghost_snapshot" => self.skipped.add("ghost_snapshot"),
            other => {
                // Compaction items, server tool calls, references and kinds added later.
                self.opaque.add(other);
                let text = match other {
                    "compaction" | "compaction_summary" => {
                        object.get("encrypted_content").and_then(Value::as_str).unwrap_or_default().to_owned()
                    }
                    _ => item.to_string(),
                };
                let turn = self.turn();
                self.decoded.messages[turn].parts.push(crate::provider::opaque_part(
                    "responses",
                    text,
                    item.clone(),
                ));
            }
        }
        Ok(())
    }

    /// The assistant message the current model call writes to, started when needed.
    fn turn(&mut self) -> usize {
        if let Some(turn) = self.turn {
            return turn;
        }
        let turn = self.decoded.messages.len();
        let message =
            Message { role: Role::Assistant, parts: Vec::new(), name: None, meta: SharedObject::new() };
        self.decoded.push(message, MessageSlots::default());
        self.turn = Some(turn);
        self.last_assistant = Some(turn);
        turn
    }

    fn message(&mut self, object: &Map<String, Value>) -> Result<(), String> {
        let role = match object.get("role") {
            Some(Value::String(role)) => match role.as_str() {
                "user" => Role::User,
                "assistant" => Role::Assistant,
                "system" | "developer" => Role::System,
                other => {
                    return Err(format!(
                        "unknown role {}; expected user, assistant, system or developer",
                        snippet(other)
                    ))
                }
            },
            Some(other) => return Err(format!("`role` must be a string, found {}", json_type(other))),
            None => return Err("a message without `role`".into()),
        };
        let parts = content_parts(object.get("content"))?;
        if role == Role::Assistant {
            let turn = self.turn();
            self.decoded.messages[turn].parts.extend(parts);
            return Ok(());
        }
        self.turn = None;
        let message = Message { role, parts, name: None, meta: SharedObject::new() };
        self.decoded.push(message, MessageSlots::default());
        Ok(())
    }

    /// Forgets the conversation so far (a compaction replaced it).
    pub(crate) fn reset(&mut self) {
        self.decoded.reset();
        self.turn = None;
        self.last_assistant = None;
    }

    /// The notes about opaque items.
    pub(crate) fn opaque_note(&self) -> Option<Note> {
        let total = self.opaque.total();
        let note = self.opaque.note("item", "")?;
        let kinds = note.text.split_once('(').map_or("", |(_, k)| k.trim_end_matches(')'));
        Some(Note::new(
            NoteKind::Opaque,
            total,
            format!(
                "kept {} as opaque text, in place, never pruned, counted as their content ({kinds})",
                plural(total, "item")
            ),
        ))
    }

    /// The user messages read so far that a person wrote, for rebuilding a compacted history.
    pub(crate) fn user_texts(&self) -> Vec<String> {
        self.decoded
            .messages
            .iter()
            .filter(|m| m.role == Role::User)
            .map(|m| m.texts().collect::<Vec<_>>().join("\n"))
            .filter(|text| !text.trim_start().starts_with('<'))
            .collect()
    }
}

fn string(object: &Map<String, Value>, key: &str) -> Result<String, String> {
    match object.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!("`{key}` must be a string, found {}", json_type(other))),
        None => Err(format!("`{key}` is missing")),
    }
}

/// A `function_call`: arguments are JSON text; text that is not a JSON object is kept as it is.
fn function_call(object: &Map<String, Value>, arguments: Option<&Value>) -> Result<ToolCall, String> {
    let name = string(object, "name")?;
    let mut call = match arguments {
        None | Some(Value::Null) => ToolCall::with_arguments(name, Arguments::new()),
        Some(Value::String(text)) => match Arguments::from_json(text) {
            Some(arguments) => ToolCall::with_arguments(name, arguments),
            None => ToolCall::with_raw_arguments(name, text.clone()),
        },
        Some(Value::Object(arguments)) => ToolCall::with_arguments(name, arguments.into()),
        Some(other) => return Err(format!("`arguments` must be JSON text, found {}", json_type(other))),
    };
    call.id = Some(string(object, "call_id")?);
    Ok(call)
}

fn reasoning_text(object: &Map<String, Value>) -> String {
    let texts = |key: &str| -> Vec<String> {
        object
            .get(key)
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.get("text").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let content = texts("content");
    if content.is_empty() {
        texts("summary").join("\n")
    } else {
        content.join("\n")
    }
}

/// A message's `content`: a string or input/output parts.
fn content_parts(content: Option<&Value>) -> Result<Vec<Part>, String> {
    match content {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(text)) => Ok(vec![Part::Text(TextPart::new(text.clone()))]),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(k, item)| content_part(item).map_err(|error| format!("`content[{k}]`: {error}")))
            .collect(),
        Some(other) => {
            Err(format!("`content` must be a string or an array of parts, found {}", json_type(other)))
        }
    }
}

fn content_part(item: &Value) -> Result<Part, String> {
    let kind = item.get("type").and_then(Value::as_str).ok_or("a content part needs a `type`")?;
    let text = |key: &str| item.get(key).and_then(Value::as_str).map(str::to_owned);
    match kind {
        "input_text" | "output_text" | "text" | "summary_text" | "reasoning_text" => Ok(Part::Text(
            TextPart::new(text("text").ok_or_else(|| format!("a {} part without `text`", snippet(kind)))?),
        )),
        "refusal" => Ok(Part::Text(TextPart::new(text("refusal").unwrap_or_default()))),
        "input_image" => match text("image_url").as_deref().and_then(data_url) {
            Some((mime, data)) => {
                let mut image = ImagePart::new(data, Some(mime));
                image.detail = text("detail");
                Ok(Part::Image(image))
            }
            // A file id or a remote URL: the image is not in the log.
            None => Ok(crate::provider::opaque_part("responses", item.to_string(), item.clone())),
        },
        "input_file" => match text("file_data").as_deref().and_then(data_url) {
            Some((mime, data)) => Ok(Part::File(FilePart::new(data, Some(mime), text("filename")))),
            None => Ok(crate::provider::opaque_part("responses", item.to_string(), item.clone())),
        },
        _ => Ok(crate::provider::opaque_part("responses", item.to_string(), item.clone())),
    }
}

/// `data:image/png;base64,AAAA` → (`image/png`, `AAAA`).
fn data_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("data:")?;
    let (header, data) = rest.split_once(',')?;
    let mime = header.strip_suffix(";base64")?;
    Some((mime.to_owned(), data.to_owned()))
}

/// A call's `output`: a string, a list of `input_text`/`input_image`/`input_file` items, or
/// Codex's older `{"content": ..., "success": ...}`.
pub(crate) fn output_content(output: &Value) -> Result<ToolResultContent, String> {
    match output {
        Value::String(text) => Ok(ToolResultContent::Text(text.into())),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(k, item)| match content_part(item) {
                Ok(Part::Text(text))
                    if crate::provider::provider_item(&Part::Text(text.clone())).is_none() =>
                {
                    Ok(ResultPart::Text(text))
                }
                Ok(Part::Image(image)) => Ok(ResultPart::Image(image)),
                Ok(Part::File(file)) => Ok(ResultPart::File(file)),
                Ok(_) => Err(format!("`output[{k}]` of a kind a tool result cannot hold here")),
                Err(error) => Err(format!("`output[{k}]`: {error}")),
            })
            .collect::<Result<_, _>>()
            .map(ToolResultContent::Parts),
        Value::Object(object) => match object.get("content") {
            Some(Value::String(text)) => Ok(ToolResultContent::Text(text.into())),
            _ => Err("an object without a `content` string".into()),
        },
        Value::Null => Ok(ToolResultContent::Text(Default::default())),
        other => Err(format!("must be a string or a list of parts, found {}", json_type(other))),
    }
}

/// Whether Codex's older output object says the call failed.
fn output_failed(output: &Value) -> bool {
    output.get("success").and_then(Value::as_bool) == Some(false)
}

/// Reads a Responses item list given one item a line.
#[derive(Debug)]
pub(crate) struct LinesReader {
    name: String,
    items: Items,
    lines: usize,
}

impl LinesReader {
    pub(crate) fn new(name: &str) -> Self {
        LinesReader { name: name.to_owned(), items: Items::default(), lines: 0 }
    }

    pub(crate) fn line(&mut self, number: usize, base: u32, item: &Value) -> Result<(), crate::error::Error> {
        self.lines += 1;
        self.items.item(item, base, &[]).map_err(|problem| {
            let at =
                crate::error::Location::file(&self.name).with_line(number).with_item("item", self.lines - 1);
            crate::error::Error::Invalid { at: Box::new(at), problem }
        })
    }

    pub(crate) fn finish(mut self) -> Result<LogDecoded, crate::error::Error> {
        let mut notes: Vec<Note> =
            self.items.skipped.note("item", "the model never saw").into_iter().collect();
        notes.extend(self.items.opaque_note());
        let mut decoded = std::mem::take(&mut self.items.decoded);
        decoded.notes = notes;
        Ok(decoded)
    }
}

/// Reads a Responses item list given as one JSON value: an array of items, or an object whose
/// `input` is one (a request body).
pub(crate) fn read_tree(
    top: crate::document::Top,
    body: std::ops::Range<usize>,
    name: &str,
) -> Result<crate::conversation::Conversation, crate::error::Error> {
    use crate::document::Top;
    let mut model = None;
    let (items, key): (Vec<Value>, Option<&'static str>) = match top {
        Top::Value(Value::Array(items)) => (items, None),
        Top::Value(Value::Object(mut object)) => match object.shift_remove("input") {
            Some(Value::Array(items)) => {
                model = object.get("model").and_then(Value::as_str).map(str::to_owned);
                (items, Some("input"))
            }
            _ => {
                return Err(crate::error::Error::Unrecognized {
                    name: name.to_owned(),
                    reason: "a Responses item list is an array of items or an object with an `input` array"
                        .into(),
                })
            }
        },
        _ => {
            return Err(crate::error::Error::Unrecognized {
                name: name.to_owned(),
                reason:
                    "a Responses item list is an array of items, an object with `input`, or one item a line"
                        .into(),
            })
        }
    };
    let mut reader = Items::default();
    // Every item the reader does not skip goes to the last message: a model call's items extend
    // the assistant message it started, which stays the last until an input item ends it.
    let mut owners = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let skipped = reader.skipped.total();
        let mut path = Vec::with_capacity(2);
        if let Some(key) = key {
            path.push(Seg::Key(key));
        }
        path.push(Seg::Index(u32::try_from(index).unwrap_or(u32::MAX)));
        reader.item(item, 0, &path).map_err(|problem| {
            let at = crate::error::Location::file(name).with_item("item", index);
            crate::error::Error::Invalid { at: Box::new(at), problem }
        })?;
        let read = reader.decoded.messages.len().checked_sub(1);
        owners.push(if reader.skipped.total() == skipped { read } else { None });
    }
    let mut notes: Vec<Note> = reader.skipped.note("item", "the model never saw").into_iter().collect();
    notes.extend(reader.opaque_note());
    let mut decoded = std::mem::take(&mut reader.decoded);
    decoded.notes = notes;
    decoded.seal();
    // One base: the whole JSON value, whose items are found by their index.
    let whole = std::iter::once(body).collect();
    let log = crate::eventlog::EventLog {
        bases: whole,
        slots: Vec::new(),
        unique_keys: false,
        items: Some(owners),
    };
    let mut conversation = crate::eventlog::from_log(
        crate::format::Format::Responses,
        decoded,
        log,
        crate::conversation::Layout::Array,
    );
    conversation.model = model;
    Ok(conversation)
}

/// OpenAI Responses items (a list, or one item a line).
pub(crate) struct Responses;

impl Codec for Responses {
    fn is_log_record(&self, object: &Map<String, Value>) -> bool {
        is_item(object)
    }

    fn line_reader(&self, name: &str, _full_history: bool) -> Option<Box<dyn LineRead>> {
        Some(Box::new(LinesReader::new(name)))
    }

    /// Never asked: a list of items is read by [`read_tree`] before the messages are taken out.
    fn read_tree(&self, _values: &[Value], tree: &TreeRead<'_>) -> Result<Decoded, crate::error::Error> {
        Err(not_a_tree(tree.name, crate::format::Format::Responses.label()))
    }

    fn result_content(&self, value: &Value) -> Option<ToolResultContent> {
        output_content(value).ok()
    }
}

impl LineRead for LinesReader {
    fn line(&mut self, number: usize, base: u32, event: Event) -> Result<(), crate::error::Error> {
        LinesReader::line(self, number, base, &event.value)
    }

    fn finish(self: Box<Self>) -> Result<LogDecoded, crate::error::Error> {
        LinesReader::finish(*self)
    }
}
