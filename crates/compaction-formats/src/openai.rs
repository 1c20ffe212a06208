//! OpenAI Chat Completions messages, and SWE-agent's `history`, which is written in them.

use compaction_model::{Arguments, SharedObject};
use compaction_model::{
    FilePart, ImagePart, Message, Part, ResultPart, Role, Text, TextPart, ToolCall, ToolResultContent,
};
use serde_json::{json, Map, Value};

use std::io::Write;

use crate::codec::{write_line, Codec, TargetCodec, TreeRead};
use crate::conversation::Decoded;
use crate::conversation::Layout;
use crate::document::{json_type, key_list, member_of, Locator};
use crate::error::{snippet, Error};
use crate::overlay::Shape;
use crate::pairing::{unpaired, Answer, OpenCalls};

static FUNCTION: Shape =
    Shape { known: &["name", "arguments"], nested: &[], json_text: &["arguments"], aliases: &[] };
static CALL: Shape = Shape {
    known: &["id", "type", "function"],
    nested: &[("function", &FUNCTION)],
    json_text: &[],
    aliases: &[],
};
static PART: Shape = Shape {
    known: &["type", "text", "image_url", "file", "refusal"],
    nested: &[],
    json_text: &[],
    aliases: &[],
};

/// The keys of an OpenAI message; anything else on it is kept when it is written back.
pub(crate) static SHAPE: Shape = Shape {
    known: &["role", "content", "tool_calls", "tool_call_id", "name"],
    nested: &[("content", &PART), ("tool_calls", &CALL)],
    json_text: &[],
    aliases: &[("role", "developer", "system")],
};

pub(crate) fn read(values: &[Value], locator: &Locator) -> Result<Decoded, Error> {
    let mut calls = OpenCalls::default();
    let mut decoded = Decoded::default();
    for (index, value) in values.iter().enumerate() {
        let message = read_message(value, &mut calls, &decoded.messages)
            .map_err(|error| locator.invalid(index, error))?;
        decoded.extend(index, vec![message]);
    }
    Ok(decoded)
}

fn read_message(value: &Value, calls: &mut OpenCalls, earlier: &[Message]) -> Result<Message, String> {
    let Some(object) = value.as_object() else {
        return Err(format!("expected a message object, found {}", json_type(value)));
    };
    prepare(object, Apart::default())?.pair(calls, earlier)
}

/// The keys of a SWE-agent history entry that observation masking reads (SWE-agent's
/// `LastNObservations` in `sweagent/agent/history_processors.py`): the entry's `message_type`
/// (`observation`, `action`, `system_prompt`, `demonstration`, `user`), `is_demo`, and `tags`.
pub(crate) const SWE_AGENT_MARKERS: [&str; 3] = ["message_type", "is_demo", "tags"];

/// Copies each history entry's [`SWE_AGENT_MARKERS`] into the meta of the messages it was read
/// as, so that observation masking (compaction-core) tells observations as SWE-agent does.
/// Counters do not read meta, and Chat Completions messages, which a trajectory is written as,
/// do not carry it.
pub(crate) fn keep_swe_agent_markers(values: &[Value], decoded: &mut Decoded) {
    for (message, unit) in decoded.messages.iter_mut().zip(&decoded.units) {
        let Some(entry) = values.get(*unit).and_then(Value::as_object) else { continue };
        for key in SWE_AGENT_MARKERS {
            if let Some(value) = entry.get(key) {
                message.meta.insert(key.to_owned(), value.clone());
            }
        }
    }
}

/// What a reader that parses messages ahead read apart from the message's object, standing for
/// what the object holds under those keys.
#[derive(Debug, Default)]
pub(crate) struct Apart {
    /// The string `content`, left in the input.
    pub text: Option<Text>,
    /// The `tool_calls`, made calls (see [`tool_calls`]).
    pub calls: Option<Vec<ToolCall>>,
}

/// A message read but for what depends on the messages before it: a tool message's result is
/// paired, and the calls a message makes are recorded, in message order on one thread
/// ([`Prepared::pair`]); the rest may be read on any thread, in any order.
#[derive(Debug)]
pub(crate) enum Prepared {
    /// A message that answers no call. The calls it makes are copied into the open calls when
    /// it is paired, not before: a run that reads ahead holds its messages until then, and a
    /// copy of each call beside them would be a tenth of a dense log again (issue 31, item 13).
    Made { message: Message },
    /// A tool message. Its result and its calls are checked only once it is paired, so errors
    /// come in the order a reader in message order meets them.
    Result {
        id: Option<String>,
        result: Result<ToolResultContent, String>,
        calls: Result<Vec<ToolCall>, String>,
        name: Option<String>,
    },
}

/// A message from its object and what was read `apart` from it, up to the pairing.
pub(crate) fn prepare(object: &Map<String, Value>, apart: Apart) -> Result<Prepared, String> {
    let Apart { text, calls: made } = apart;
    // The calls the message makes.
    let made_calls = || -> Result<Vec<ToolCall>, String> {
        match made {
            Some(made) => Ok(made),
            None => tool_calls(member_of(object, "tool_calls")),
        }
    };
    let content = member_of(object, "content");
    let parts_of = |content: Option<&Value>| match text.clone() {
        Some(text) => Ok(vec![Part::Text(TextPart::new(text))]),
        None => content_parts(content),
    };
    let role = match member_of(object, "role") {
        Some(Value::String(role)) => role.as_str(),
        Some(other) => return Err(format!("`role` must be a string, found {}", json_type(other))),
        None => return Err(format!("no `role` field (keys present: {})", key_list(object))),
    };
    let name = match member_of(object, "name") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => Some(name.clone()),
        Some(other) => return Err(format!("`name` must be a string, found {}", json_type(other))),
    };
    let (role, parts) = match role {
        "system" | "developer" => (Role::System, parts_of(content)?),
        "user" => (Role::User, parts_of(content)?),
        "assistant" => {
            let mut parts = parts_of(content)?;
            let made = made_calls()?;
            // Exactly: a `Part` is a few hundred bytes, and `extend` would leave room for four,
            // which for a long log of calls is more memory than their text.
            parts.reserve_exact(made.len());
            parts.extend(made.into_iter().map(Part::ToolCall));
            (Role::Assistant, parts)
        }
        "tool" => {
            let id = tool_call_id(object)?;
            let result = match text {
                Some(text) => Ok(ToolResultContent::Text(text)),
                None => result_content(content),
            };
            return Ok(Prepared::Result { id, result, calls: made_calls(), name });
        }
        other => {
            return Err(format!(
                "unknown role {}; expected system, developer, user, assistant or tool",
                snippet(other)
            ))
        }
    };
    Ok(Prepared::Made { message: Message { role, parts, name, meta: SharedObject::new() } })
}

impl Prepared {
    /// The message, its result paired with the nearest fitting call among the open `calls`, and
    /// its own calls recorded there as open. `earlier` are the messages before it, all paired
    /// with these `calls`: a second result for a call takes its copy from the first.
    pub(crate) fn pair(self, calls: &mut OpenCalls, earlier: &[Message]) -> Result<Message, String> {
        match self {
            Prepared::Made { message } => {
                message.tool_calls().for_each(|call| calls.push(call));
                Ok(message)
            }
            Prepared::Result { id, result, calls: made, name } => {
                let origin = match calls.take_answer(id.as_deref(), earlier.len()) {
                    Some(Answer::Call(call)) => Some(Box::new(call)),
                    Some(Answer::Again(holder)) => earlier
                        .get(holder)
                        .and_then(|message| message.tool_call_results().next())
                        .map(|first| first.origin.clone()),
                    None => None,
                };
                let origin = origin.ok_or_else(|| unpaired(id.as_deref()))?;
                let mut message = Message::tool(result?, origin, false);
                message.name = name;
                // Calls a tool message carries (some logs put them there) are kept after its result.
                let made = made?;
                made.iter().for_each(|call| calls.push(call));
                message.parts.extend(made.into_iter().map(Part::ToolCall));
                Ok(message)
            }
        }
    }
}

/// The calls of a message's `tool_calls` (absent or null: none).
pub(crate) fn tool_calls(value: Option<&Value>) -> Result<Vec<ToolCall>, String> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(k, item)| tool_call(item).map_err(|error| format!("`tool_calls[{k}]`: {error}")))
            .collect(),
        Some(other) => Err(format!("`tool_calls` must be an array, found {}", json_type(other))),
    }
}

/// `tool_call_id`, or SWE-agent's one-element `tool_call_ids`.
fn tool_call_id(object: &Map<String, Value>) -> Result<Option<String>, String> {
    match member_of(object, "tool_call_id") {
        Some(Value::String(id)) => return Ok(Some(id.clone())),
        None | Some(Value::Null) => {}
        Some(other) => return Err(format!("`tool_call_id` must be a string, found {}", json_type(other))),
    }
    match member_of(object, "tool_call_ids") {
        Some(Value::Array(ids)) => Ok(ids.first().and_then(Value::as_str).map(str::to_owned)),
        _ => Ok(None),
    }
}

/// A tool call: `{"id", "type": "function", "function": {"name", "arguments": "<JSON text>"}}`.
pub(crate) fn tool_call(value: &Value) -> Result<ToolCall, String> {
    let Some(object) = value.as_object() else {
        return Err(format!("expected an object, found {}", json_type(value)));
    };
    match member_of(object, "type").and_then(Value::as_str) {
        None | Some("function") => {}
        Some(other) => return Err(format!("tool calls of type {} are not supported", snippet(other))),
    }
    let id = match member_of(object, "id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id.clone()),
        Some(other) => return Err(format!("`id` must be a string, found {}", json_type(other))),
    };
    let Some(function) = member_of(object, "function").and_then(Value::as_object) else {
        return Err("no `function` object".into());
    };
    let Some(name) = member_of(function, "name").and_then(Value::as_str) else {
        return Err("`function.name` is missing or not a string".into());
    };
    // The arguments are kept as their compact JSON text (see `Arguments`).
    let mut call = match member_of(function, "arguments") {
        None | Some(Value::Null) => ToolCall::with_arguments(name, Arguments::new()),
        Some(Value::Object(arguments)) => ToolCall::with_arguments(name, arguments.into()),
        Some(Value::String(text)) => match Arguments::from_json(text) {
            Some(arguments) => ToolCall::with_arguments(name, arguments),
            // Not a JSON object (truncated by the model, or nested past the parser's limit):
            // kept as the provider sent it, counted and written back as that text.
            None => ToolCall::with_raw_arguments(name, text.clone()),
        },
        Some(other) => {
            return Err(format!("`function.arguments` must be a JSON string, found {}", json_type(other)))
        }
    };
    call.id = id;
    Ok(call)
}

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
            Err(format!("`content` must be a string, null or an array of parts, found {}", json_type(other)))
        }
    }
}

fn content_part(value: &Value) -> Result<Part, String> {
    let kind = value.get("type").and_then(Value::as_str);
    let string = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    match kind {
        Some("text") => {
            Ok(Part::Text(TextPart::new(string("text").ok_or("`text` is missing or not a string")?)))
        }
        Some("refusal") => Ok(Part::Text(TextPart::new(string("refusal").unwrap_or_default()))),
        Some("image_url") => image(value).map(Part::Image),
        Some("file") => {
            let file = value.get("file").ok_or("no `file` object")?;
            let data = file
                .get("file_data")
                .and_then(Value::as_str)
                .ok_or("only inline `file_data` files are supported")?;
            let (mime, base64) = data_url(data).ok_or("`file_data` is not a base64 data URL")?;
            let filename = file.get("filename").and_then(Value::as_str).map(str::to_owned);
            Ok(Part::File(FilePart::new(base64, Some(mime), filename)))
        }
        Some(other) => Err(format!("content parts of type {} are not supported", snippet(other))),
        None => Err("a content part needs a `type`".into()),
    }
}

fn image(value: &Value) -> Result<ImagePart, String> {
    let image_url = value.get("image_url").ok_or("no `image_url` object")?;
    let url = image_url.get("url").and_then(Value::as_str).ok_or("`image_url.url` is missing")?;
    let (mime, base64) = data_url(url).ok_or("only base64 `data:` image URLs are supported")?;
    let mut image = ImagePart::new(base64, Some(mime));
    image.detail = image_url.get("detail").and_then(Value::as_str).map(str::to_owned);
    Ok(image)
}

/// `data:image/png;base64,AAAA` → (`image/png`, `AAAA`).
fn data_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("data:")?;
    let (header, data) = rest.split_once(',')?;
    let mime = header.strip_suffix(";base64")?;
    Some((mime.to_owned(), data.to_owned()))
}

fn result_content(content: Option<&Value>) -> Result<ToolResultContent, String> {
    match content {
        None | Some(Value::Null) => Ok(ToolResultContent::Text(Default::default())),
        Some(Value::String(text)) => Ok(ToolResultContent::Text(text.into())),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(k, item)| {
                let part = content_part(item).map_err(|error| format!("`content[{k}]`: {error}"))?;
                match part {
                    Part::Text(text) => Ok(ResultPart::Text(text)),
                    Part::Image(image) => Ok(ResultPart::Image(image)),
                    Part::File(file) => Ok(ResultPart::File(file)),
                    _ => Err(format!("`content[{k}]` cannot be part of a tool result")),
                }
            })
            .collect::<Result<_, _>>()
            .map(ToolResultContent::Parts),
        Some(other) => {
            Err(format!("`content` must be a string or an array of parts, found {}", json_type(other)))
        }
    }
}

// ---- writing ----

/// Messages as OpenAI messages; a Haystack tool message with several results becomes several.
pub(crate) fn encode(messages: &[Message]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        encode_message(message, &mut out);
    }
    out
}

fn encode_message(message: &Message, out: &mut Vec<Value>) {
    let with_name = |mut object: Map<String, Value>| {
        if let Some(name) = &message.name {
            object.insert("name".into(), Value::String(name.clone()));
        }
        Value::Object(object)
    };
    match message.role {
        Role::Tool if message.has_tool_call_result() => {
            for result in message.tool_call_results() {
                let mut object = Map::new();
                object.insert("role".into(), "tool".into());
                object.insert("content".into(), result_value(&result.result));
                if let Some(id) = &result.origin.id {
                    object.insert("tool_call_id".into(), Value::String(id.clone()));
                }
                out.push(with_name(object));
            }
        }
        Role::Assistant => {
            let mut object = Map::new();
            object.insert("role".into(), "assistant".into());
            let content = content_value(message);
            object.insert("content".into(), if content == json!([]) { Value::Null } else { content });
            let calls: Vec<Value> = message.tool_calls().map(call_value).collect();
            if !calls.is_empty() {
                object.insert("tool_calls".into(), Value::Array(calls));
            }
            out.push(with_name(object));
        }
        role => {
            let mut object = Map::new();
            object.insert("role".into(), role.as_str().into());
            object.insert("content".into(), content_value(message));
            out.push(with_name(object));
        }
    }
}

/// One text as a string; anything else as a list of parts. Reasoning has no place in Chat
/// Completions and is left out.
fn content_value(message: &Message) -> Value {
    let parts: Vec<&Part> = message
        .parts
        .iter()
        .filter(|p| matches!(p, Part::Text(_) | Part::Image(_) | Part::File(_)))
        .collect();
    if let [Part::Text(text)] = parts.as_slice() {
        return Value::String(text.text.to_string());
    }
    Value::Array(
        parts
            .into_iter()
            .filter_map(|part| match part {
                Part::Text(text) => Some(json!({"type": "text", "text": text.text})),
                Part::Image(image) => Some(image_value(image)),
                Part::File(file) => Some(file_value(file)),
                _ => None,
            })
            .collect(),
    )
}

fn image_value(image: &ImagePart) -> Value {
    let mime = image.mime_type.as_deref().unwrap_or("image/png");
    let mut url = Map::new();
    url.insert("url".into(), Value::String(format!("data:{mime};base64,{}", image.base64_image)));
    if let Some(detail) = &image.detail {
        url.insert("detail".into(), Value::String(detail.clone()));
    }
    json!({"type": "image_url", "image_url": url})
}

fn file_value(file: &FilePart) -> Value {
    let mime = file.mime_type.as_deref().unwrap_or("application/octet-stream");
    let mut inner = Map::new();
    inner.insert("file_data".into(), Value::String(format!("data:{mime};base64,{}", file.base64_data)));
    if let Some(filename) = &file.filename {
        inner.insert("filename".into(), Value::String(filename.clone()));
    }
    json!({"type": "file", "file": inner})
}

fn result_value(result: &ToolResultContent) -> Value {
    match result {
        ToolResultContent::Text(text) => Value::String(text.to_string()),
        ToolResultContent::Parts(parts) => Value::Array(
            parts
                .iter()
                .map(|part| match part {
                    ResultPart::Text(text) => json!({"type": "text", "text": text.text}),
                    ResultPart::Image(image) => image_value(image),
                    ResultPart::File(file) => file_value(file),
                    other => crate::form::haystack_form(other),
                })
                .collect(),
        ),
    }
}

/// Arguments as JSON text; arguments that were not a JSON object are written back as read.
pub(crate) fn arguments_text(call: &ToolCall) -> String {
    match &call.raw_arguments {
        Some(raw) if call.arguments.is_empty() => raw.clone(),
        _ => call.arguments.as_json().to_owned(),
    }
}

fn call_value(call: &ToolCall) -> Value {
    let mut object = Map::new();
    if let Some(id) = &call.id {
        object.insert("id".into(), Value::String(id.clone()));
    }
    object.insert("type".into(), "function".into());
    object.insert("function".into(), json!({"name": call.tool_name, "arguments": arguments_text(call)}));
    Value::Object(object)
}

/// OpenAI Chat Completions.
pub(crate) struct OpenAi;

impl Codec for OpenAi {
    fn read_tree(&self, values: &[Value], tree: &TreeRead<'_>) -> Result<Decoded, Error> {
        read(values, tree.locator)
    }
}

impl TargetCodec for OpenAi {
    fn encode(
        &self,
        messages: &[&Message],
        _unit: Option<usize>,
        _originals: &[Value],
    ) -> (Vec<Value>, &'static Shape) {
        (messages.iter().flat_map(|m| encode(std::slice::from_ref(*m))).collect(), &SHAPE)
    }

    fn convert(&self, messages: &[Message], _layout: Layout, out: &mut dyn Write) -> Result<(), Error> {
        write_line(&Value::Array(encode(messages)), out)
    }
}

/// SWE-agent and mini-swe-agent trajectories: Chat Completions messages, with SWE-agent's own
/// markers kept.
pub(crate) struct SweAgent;

impl Codec for SweAgent {
    fn read_tree(&self, values: &[Value], tree: &TreeRead<'_>) -> Result<Decoded, Error> {
        let mut decoded = read(values, tree.locator)?;
        keep_swe_agent_markers(values, &mut decoded);
        Ok(decoded)
    }
}
