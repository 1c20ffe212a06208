//! Anthropic Messages: `tool_use` and `tool_result` blocks, `thinking`, a top-level `system`.
//!
//! Haystack keeps one result per tool message, so a user message holding several `tool_result`
//! blocks is read as several tool messages (then a user message for any other blocks), and those
//! are written back as one user message.

use compaction_model::SharedObject;
use compaction_model::{
    FilePart, ImagePart, JsonObject, Message, Part, ReasoningPart, ResultPart, Role, Text, TextPart,
    ToolCall, ToolCallResult, ToolResultContent,
};
use serde_json::{json, Map, Value};

use std::io::Write;

use crate::codec::{write_line, Codec, TargetCodec, TreeRead};
use crate::conversation::Decoded;
use crate::conversation::Layout;
use crate::document::{json_type, key_list, member, string_member, take_members, Locator};
use crate::error::{snippet, Error};
use crate::notes::{plural, Note, NoteKind};
use crate::overlay::Shape;
use crate::pairing::{unpaired, OpenCalls};
use crate::values::ResultsFound;

/// Key in a reasoning part's `extra` for a `thinking` block's signature.
const SIGNATURE: &str = "signature";
/// Key in a reasoning part's `extra` for a `redacted_thinking` block's data.
const REDACTED: &str = "redacted_thinking";

static INNER: Shape = Shape { known: &["type", "text", "source"], nested: &[], json_text: &[], aliases: &[] };
static BLOCK: Shape = Shape {
    known: &[
        "type",
        "text",
        "source",
        "id",
        "name",
        "input",
        "tool_use_id",
        "content",
        "is_error",
        "thinking",
        "signature",
        "data",
    ],
    nested: &[("content", &INNER)],
    json_text: &[],
    aliases: &[],
};

/// The keys of an Anthropic message; anything else on it is kept when it is written back.
pub(crate) static SHAPE: Shape =
    Shape { known: &["role", "content"], nested: &[("content", &BLOCK)], json_text: &[], aliases: &[] };

/// Reads messages; the envelope's `system`, if any, becomes a system message of unit
/// `values.len()`.
///
/// A `compaction` block (server-side compaction) means the API dropped everything before it:
/// unless `full_history`, the conversation read starts at the message holding the last one
/// (the system prompt stays), and the messages before it are written back untouched.
pub(crate) fn read(
    values: &[Value],
    system: Option<&Value>,
    locator: &Locator,
    full_history: bool,
) -> Result<Decoded, Error> {
    let mut decoded = Decoded::default();
    if let Some(system) = system {
        let parts =
            system_parts(system).map_err(|error| locator.invalid_whole(format!("`system`: {error}")))?;
        let message = Message { role: Role::System, parts, name: None, meta: SharedObject::new() };
        decoded.extend(values.len(), vec![message]);
    }
    let mut calls = OpenCalls::default();
    let mut opaque = Opaque::default();
    let mut last_compaction = None;
    for (index, value) in values.iter().enumerate() {
        // The tree is kept to write the file back: the message is read from a copy of it.
        let read = read_blocks(value.clone(), &mut calls, &mut opaque, &mut ResultsFound::default())
            .map_err(|error| locator.invalid(index, error))?;
        let messages: Vec<Message> = read.into_iter().map(|r| r.message).collect();
        if messages.iter().any(|m| m.parts.iter().any(|p| opaque_kind(p) == Some("compaction"))) {
            last_compaction = Some(index);
        }
        decoded.extend(index, messages);
    }
    decoded.notes.extend(opaque.note());
    if let Some(unit) = last_compaction {
        let hidden = decoded.units.iter().filter(|&&u| u < unit).count();
        if full_history {
            decoded.notes.push(Note::new(
                NoteKind::Compacted,
                1,
                format!(
                    "message {unit} holds a compaction block: the API dropped the {} before it; read \
                     with the full history",
                    plural(unit, "message")
                ),
            ));
        } else if hidden > 0 {
            let keep: Vec<bool> = decoded.units.iter().map(|&u| u >= unit).collect();
            let mut flags = keep.iter();
            decoded.messages.retain(|_| *flags.next().unwrap_or(&true));
            let mut flags = keep.iter();
            decoded.units.retain(|_| *flags.next().unwrap_or(&true));
            decoded.hidden_units = unit;
            decoded.notes.push(Note::new(
                NoteKind::Compacted,
                unit,
                format!(
                    "message {unit} holds a compaction block: the API dropped the {} before it, so they \
                     are not read (the full history keeps them)",
                    plural(unit, "message")
                ),
            ));
        }
    }
    Ok(decoded)
}

pub(crate) fn system_parts(system: &Value) -> Result<Vec<Part>, String> {
    match system {
        Value::String(text) => Ok(vec![Part::Text(TextPart::new(text.clone()))]),
        Value::Array(blocks) => blocks
            .iter()
            .enumerate()
            .map(|(k, block)| match block.get("text").and_then(Value::as_str) {
                Some(text) => Ok(Part::Text(TextPart::new(text))),
                None => Err(format!("`system[{k}]` is not a text block")),
            })
            .collect(),
        other => Err(format!("must be a string or text blocks, found {}", json_type(other))),
    }
}

/// One message read from an Anthropic message, with the blocks its results and calls came from.
#[derive(Debug)]
pub(crate) struct ReadMessage {
    pub message: Message,
    /// For a tool message: the index of its `tool_result` block.
    pub result_block: Option<usize>,
    /// For each tool call of the message, the index of its `tool_use` block.
    pub call_blocks: Vec<usize>,
}

/// Blocks kept as opaque text, by type, for the note that says so.
#[derive(Debug, Default)]
pub(crate) struct Opaque {
    pub tally: crate::notes::Tally,
}

impl Opaque {
    pub(crate) fn note(&self) -> Option<Note> {
        let total = self.tally.total();
        let note = self.tally.note("block", "")?;
        let kinds = note.text.split_once('(').map_or("", |(_, k)| k.trim_end_matches(')'));
        Some(Note::new(
            NoteKind::Opaque,
            total,
            format!(
                "kept {} as opaque text, counted as their text and written back as they were ({kinds})",
                plural(total, "block")
            ),
        ))
    }
}

/// One Anthropic message as one or more messages, with where their results and calls came from.
/// The message's strings and objects are moved into the messages, not copied.
/// `found` holds the tool results' texts the message was built without (see [`ResultsFound`]).
pub(crate) fn read_blocks(
    value: Value,
    calls: &mut OpenCalls,
    opaque: &mut Opaque,
    found: &mut ResultsFound,
) -> Result<Vec<ReadMessage>, String> {
    let mut object = match value {
        Value::Object(object) => object,
        other => return Err(format!("expected a message object, found {}", json_type(&other))),
    };
    let [role, content] = take_members(&mut object, ["role", "content"]);
    let role = match role {
        Some(Value::String(role)) => match role.as_str() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "system" => Role::System,
            other => return Err(format!("unknown role {}; expected user or assistant", snippet(other))),
        },
        Some(other) => return Err(format!("`role` must be a string, found {}", json_type(&other))),
        None => return Err(format!("no `role` (keys present: {})", key_list(&object))),
    };
    let new = |parts| Message { role, parts, name: None, meta: SharedObject::new() };
    let whole = |message| ReadMessage { message, result_block: None, call_blocks: Vec::new() };
    let blocks = match content {
        None | Some(Value::Null) => return Ok(vec![whole(new(Vec::new()))]),
        Some(Value::String(text)) => {
            let text = found.take_content().unwrap_or_else(|| text.into());
            return Ok(vec![whole(new(vec![Part::Text(TextPart::new(text))]))]);
        }
        Some(Value::Array(blocks)) => blocks,
        Some(other) => {
            return Err(format!(
                "`content` must be a string or an array of blocks, found {}",
                json_type(&other)
            ))
        }
    };
    let mut out = Vec::new();
    let mut pending = Vec::new();
    let mut pending_calls = Vec::new();
    for (k, block) in blocks.into_iter().enumerate() {
        let at = |error: String| format!("`content[{k}]`: {error}");
        if member(&block, "type").and_then(Value::as_str) == Some("tool_result") {
            if !pending.is_empty() {
                let message = new(std::mem::take(&mut pending));
                out.push(ReadMessage {
                    message,
                    result_block: None,
                    call_blocks: std::mem::take(&mut pending_calls),
                });
            }
            let message = tool_result(block, calls, |item| found.take(k, item)).map_err(at)?;
            out.push(ReadMessage { message, result_block: Some(k), call_blocks: Vec::new() });
            continue;
        }
        let mut part = part(block, Some(opaque)).map_err(at)?;
        if let Part::Text(text) = &mut part {
            // Only a text block's text is left in the input (see `ResultsFound::keep_results`).
            if let Some(left) = found.take_text(k) {
                text.text = left;
            }
        }
        if let Part::ToolCall(call) = &part {
            calls.push(call);
            pending_calls.push(k);
        }
        pending.push(part);
    }
    if !pending.is_empty() || out.is_empty() {
        out.push(ReadMessage { message: new(pending), result_block: None, call_blocks: pending_calls });
    }
    Ok(out)
}

/// The string at `key`, taken out of `object`.
fn take_string(object: &mut Map<String, Value>, key: &str) -> Result<String, String> {
    let [value] = take_members(object, [key]);
    string_member(value, key)
}

/// The kinds of block read into a part of their own.
enum Known {
    Text,
    Image,
    Document,
    ToolUse,
    Thinking,
    RedactedThinking,
}

/// A content block as a part, its strings and objects moved into it. Blocks of kinds the model
/// has no part for (server tool results, `compaction`, and any kind added later) are kept as
/// opaque text when `opaque` is given.
fn part(block: Value, opaque: Option<&mut Opaque>) -> Result<Part, String> {
    let kind = match member(&block, "type") {
        Some(Value::String(kind)) => kind.as_str(),
        Some(other) => return Err(format!("`type` must be a string, found {}", json_type(other))),
        None => return Err("a block needs a `type`".into()),
    };
    let known = match kind {
        "text" => Some(Known::Text),
        "image" => Some(Known::Image),
        "document" if is_base64(&block) => Some(Known::Document),
        "tool_use" | "server_tool_use" => Some(Known::ToolUse),
        "thinking" => Some(Known::Thinking),
        "redacted_thinking" => Some(Known::RedactedThinking),
        _ => None,
    };
    let Some(known) = known else {
        let kind = kind.to_owned();
        return match opaque {
            Some(opaque) => {
                opaque.tally.add(&kind);
                // A compaction block is its summary; anything else is counted as its JSON.
                let text = match kind.as_str() {
                    "compaction" => {
                        block.get("content").and_then(Value::as_str).unwrap_or_default().to_owned()
                    }
                    _ => block.to_string(),
                };
                Ok(crate::provider::opaque_part("anthropic", text, block))
            }
            None => Err(format!("blocks of type {} are not supported here", snippet(&kind))),
        };
    };
    // A known kind has a `type`, so the block is an object.
    let Value::Object(mut block) = block else { return Err("a block needs a `type`".into()) };
    match known {
        Known::Text => {
            let [text] = take_members(&mut block, ["text"]);
            Ok(Part::Text(TextPart::new(string_member(text, "text")?)))
        }
        Known::Image => {
            let (mime, data) = base64_source(&mut block)?;
            Ok(Part::Image(ImagePart::new(data, mime)))
        }
        Known::Document => {
            let (mime, data) = base64_source(&mut block)?;
            let title = block.get("title").and_then(Value::as_str).map(str::to_owned);
            Ok(Part::File(FilePart::new(data, mime, title)))
        }
        Known::ToolUse => {
            let [input, name, id] = take_members(&mut block, ["input", "name", "id"]);
            let input = match input {
                None | Some(Value::Null) => JsonObject::new(),
                Some(Value::Object(input)) => input,
                Some(other) => return Err(format!("`input` must be an object, found {}", json_type(&other))),
            };
            let mut call = ToolCall::new(string_member(name, "name")?, input);
            call.id = Some(string_member(id, "id")?);
            Ok(Part::ToolCall(call))
        }
        Known::Thinking => {
            let [signature, thinking] = take_members(&mut block, [SIGNATURE, "thinking"]);
            let mut extra = JsonObject::new();
            if let Some(signature) = signature {
                extra.insert(SIGNATURE.into(), signature);
            }
            Ok(Part::Reasoning(ReasoningPart {
                reasoning_text: string_member(thinking, "thinking")?,
                extra: extra.into(),
                unknown: SharedObject::new(),
            }))
        }
        Known::RedactedThinking => {
            let mut extra = JsonObject::new();
            let [data] = take_members(&mut block, ["data"]);
            extra.insert(REDACTED.into(), data.unwrap_or(Value::Null));
            Ok(Part::Reasoning(ReasoningPart {
                reasoning_text: String::new(),
                extra: extra.into(),
                unknown: SharedObject::new(),
            }))
        }
    }
}

fn is_base64(block: &Value) -> bool {
    block.get("source").and_then(|s| s.get("type")).and_then(Value::as_str) == Some("base64")
}

fn base64_source(block: &mut Map<String, Value>) -> Result<(Option<String>, String), String> {
    let Some(Value::Object(source)) = block.get_mut("source") else {
        return match block.get("source") {
            Some(_) => Err("only `base64` sources are supported".into()),
            None => Err("no `source`".into()),
        };
    };
    if source.get("type").and_then(Value::as_str) != Some("base64") {
        return Err("only `base64` sources are supported".into());
    }
    let mime = source.get("media_type").and_then(Value::as_str).map(str::to_owned);
    Ok((mime, take_string(source, "data")?))
}

/// A `tool_result` block as a tool message; `left` gives the texts of its `content` (the whole,
/// or text block `k`) that were left in the input, if any.
fn tool_result(
    block: Value,
    calls: &mut OpenCalls,
    left: impl FnMut(Option<usize>) -> Option<Text>,
) -> Result<Message, String> {
    let Value::Object(mut block) = block else { return Err("`tool_use_id` is missing".into()) };
    let [id, error, content] = take_members(&mut block, ["tool_use_id", "is_error", "content"]);
    let id = string_member(id, "tool_use_id")?;
    let origin = calls.answer(Some(&id)).ok_or_else(|| unpaired(Some(&id)))?;
    let error = match error {
        None | Some(Value::Null) => false,
        Some(Value::Bool(error)) => error,
        Some(other) => return Err(format!("`is_error` must be true or false, found {}", json_type(&other))),
    };
    let result = result_content_left(content, left)?;
    let mut message = Message::tool(result, origin, false);
    if let Some(Part::ToolCallResult(result)) = message.parts.first_mut() {
        result.error = error;
    }
    Ok(message)
}

/// A `tool_result` block's `content`: a string, or text, image and document blocks; moved into
/// the result.
pub(crate) fn result_content(content: Option<Value>) -> Result<ToolResultContent, String> {
    result_content_left(content, |_| None)
}

/// [`result_content`], the texts `left` gives (for the whole, or for text block `k`) taking the
/// place of the empty strings that stand in for them.
fn result_content_left(
    content: Option<Value>,
    mut left: impl FnMut(Option<usize>) -> Option<Text>,
) -> Result<ToolResultContent, String> {
    match content {
        None | Some(Value::Null) => Ok(ToolResultContent::Text(Default::default())),
        Some(Value::String(text)) => Ok(ToolResultContent::Text(left(None).unwrap_or_else(|| text.into()))),
        Some(Value::Array(items)) => Ok(ToolResultContent::Parts(
            items
                .into_iter()
                .enumerate()
                // Blocks of kinds the model has no result part for are kept as opaque text.
                .map(|(k, item)| match part(item, Some(&mut Opaque::default())) {
                    Ok(Part::Text(mut text)) => {
                        if let Some(left) = left(Some(k)) {
                            text.text = left;
                        }
                        Ok(ResultPart::Text(text))
                    }
                    Ok(Part::Image(image)) => Ok(ResultPart::Image(image)),
                    Ok(Part::File(file)) => Ok(ResultPart::File(file)),
                    Ok(_) => Err(format!("`content[{k}]` cannot be part of a tool result")),
                    Err(error) => Err(format!("`content[{k}]`: {error}")),
                })
                .collect::<Result<_, _>>()?,
        )),
        Some(other) => Err(format!("`content` must be a string or blocks, found {}", json_type(&other))),
    }
}

/// The type of the provider item an opaque part keeps, if it keeps one.
pub(crate) fn opaque_kind(part: &Part) -> Option<&str> {
    crate::provider::provider_item(part)?.1.get("type")?.as_str()
}

// ---- writing ----

/// The `system` value for system messages: a string for one text, else text blocks.
pub(crate) fn encode_system(messages: &[&Message]) -> Value {
    let texts: Vec<&str> = messages.iter().flat_map(|m| m.texts()).collect();
    match texts.as_slice() {
        [text] => Value::String((*text).to_owned()),
        texts => Value::Array(texts.iter().map(|text| json!({"type": "text", "text": text})).collect()),
    }
}

/// Messages (no system ones) as Anthropic messages: tool results, and a user message right after
/// them, share one user message.
pub(crate) fn encode(messages: &[&Message]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < messages.len() {
        let mut end = start + 1;
        if messages[start].role != Role::Assistant {
            while end < messages.len()
                && messages[end - 1].role == Role::Tool
                && messages[end].role != Role::Assistant
            {
                end += 1;
            }
        }
        out.push(encode_group(&messages[start..end], true));
        start = end;
    }
    out
}

/// One Anthropic message from a group of messages; `prefer_string` writes a lone text as a
/// string.
pub(crate) fn encode_group(group: &[&Message], prefer_string: bool) -> Value {
    let role = match group.first().map(|m| m.role) {
        Some(Role::Assistant) => "assistant",
        _ => "user",
    };
    if let ([message], true) = (group, prefer_string) {
        if let [part @ Part::Text(text)] = message.parts.as_slice() {
            if crate::provider::provider_item(part).is_none() {
                return json!({"role": role, "content": text.text});
            }
        }
    }
    let blocks: Vec<Value> = group.iter().flat_map(|m| m.parts.iter()).filter_map(block_value).collect();
    // Built by hand: `json!` passes its values through `serde_json::to_value`, which refuses
    // (panics, in `json!`) the non-finite floats Python writes in tool-call arguments.
    let mut object = Map::new();
    object.insert("role".into(), role.into());
    object.insert("content".into(), Value::Array(blocks));
    Value::Object(object)
}

fn block_value(part: &Part) -> Option<Value> {
    Some(match part {
        Part::Text(text) => match crate::provider::provider_item(part) {
            // A block kept opaque is written back as it was read.
            Some(("anthropic", item)) => item.clone(),
            _ => json!({"type": "text", "text": text.text}),
        },
        Part::Image(image) => image_value(image),
        Part::File(file) => file_value(file),
        Part::ToolCall(call) => {
            let mut block = Map::new();
            block.insert("type".into(), "tool_use".into());
            block.insert("id".into(), call.id.clone().map_or(Value::Null, Value::String));
            block.insert("name".into(), Value::String(call.tool_name.clone()));
            block.insert("input".into(), Value::from(call.arguments.clone()));
            Value::Object(block)
        }
        Part::ToolCallResult(result) => result_value(result),
        Part::Reasoning(reasoning) => match reasoning.extra.get(REDACTED) {
            Some(data) => json!({"type": "redacted_thinking", "data": data}),
            None => {
                let mut block = Map::new();
                block.insert("type".into(), "thinking".into());
                block.insert("thinking".into(), Value::String(reasoning.reasoning_text.clone()));
                if let Some(signature) = reasoning.extra.get(SIGNATURE) {
                    block.insert(SIGNATURE.into(), signature.clone());
                }
                Value::Object(block)
            }
        },
        other => crate::form::haystack_form(other),
    })
}

fn image_value(image: &ImagePart) -> Value {
    let mime = image.mime_type.as_deref().unwrap_or("image/png");
    json!({"type": "image", "source": {"type": "base64", "media_type": mime, "data": image.base64_image}})
}

fn file_value(file: &FilePart) -> Value {
    let mime = file.mime_type.as_deref().unwrap_or("application/pdf");
    let mut block = Map::new();
    block.insert("type".into(), "document".into());
    block.insert("source".into(), json!({"type": "base64", "media_type": mime, "data": file.base64_data}));
    if let Some(title) = &file.filename {
        block.insert("title".into(), Value::String(title.clone()));
    }
    Value::Object(block)
}

fn result_value(result: &ToolCallResult) -> Value {
    let content = match &result.result {
        ToolResultContent::Text(text) => Value::String(text.to_string()),
        ToolResultContent::Parts(parts) => Value::Array(
            parts
                .iter()
                .map(|part| match part {
                    ResultPart::Text(text) => block_value(&Part::Text(text.clone())).unwrap_or(Value::Null),
                    ResultPart::Image(image) => image_value(image),
                    ResultPart::File(file) => file_value(file),
                    other => crate::form::haystack_form(other),
                })
                .collect(),
        ),
    };
    let mut block = Map::new();
    block.insert("type".into(), "tool_result".into());
    block.insert("tool_use_id".into(), result.origin.id.clone().map_or(Value::Null, Value::String));
    block.insert("content".into(), content);
    if result.error {
        block.insert("is_error".into(), Value::Bool(true));
    }
    Value::Object(block)
}

/// Anthropic Messages.
pub(crate) struct Anthropic;

impl Codec for Anthropic {
    fn read_tree(&self, values: &[Value], tree: &TreeRead<'_>) -> Result<Decoded, Error> {
        read(values, tree.system, tree.locator, tree.full_history)
    }
}

impl TargetCodec for Anthropic {
    fn encode(
        &self,
        messages: &[&Message],
        unit: Option<usize>,
        originals: &[Value],
    ) -> (Vec<Value>, &'static Shape) {
        let prefer_string = unit
            .and_then(|u| originals.get(u))
            .is_none_or(|original| original.get("content").is_some_and(Value::is_string));
        let fresh = match unit {
            Some(_) => vec![encode_group(messages, prefer_string)],
            None => encode(messages),
        };
        (fresh, &SHAPE)
    }

    fn encode_system(&self, messages: &[&Message]) -> Option<Value> {
        Some(encode_system(messages))
    }

    fn convert(&self, messages: &[Message], _layout: Layout, out: &mut dyn Write) -> Result<(), Error> {
        let (system, rest): (Vec<&Message>, Vec<&Message>) =
            messages.iter().partition(|m| m.role == Role::System);
        let mut object = Map::new();
        if !system.is_empty() {
            object.insert("system".into(), encode_system(&system));
        }
        object.insert("messages".into(), Value::Array(encode(&rest)));
        write_line(&Value::Object(object), out)
    }
}
