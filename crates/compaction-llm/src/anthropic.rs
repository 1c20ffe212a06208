//! Anthropic's Messages format: messages to a request (or a token-count request), a reply back
//! to a message.
//!
//! The reference has no Anthropic client, so this is our own mapping, chosen so that nothing is
//! silently lost:
//!
//! - system messages go to the top-level `system` field, in order, wherever they stand (the API
//!   has no system turn); images or files in them are an error;
//! - tool results become `tool_result` blocks of a user turn (`is_error` when the tool failed);
//!   consecutive messages of one role are merged into one turn, tool results first, as the API
//!   requires;
//! - reasoning is sent back only as the API accepts it: a `thinking` block with its signature
//!   (`extra["signature"]`) or a redacted block (`extra["type"] == "redacted_thinking"`);
//!   reasoning without either is left out (the API would reject it, and drops old thinking
//!   anyway);
//! - images are base64 `image` blocks; PDF and plain-text files are `document` blocks (named by
//!   their file name); other files, tool calls whose arguments are not a JSON object (Anthropic
//!   takes only objects), and tool calls or results without an id are errors;
//! - empty texts and messages left with nothing to send are skipped: the API rejects empty blocks
//!   and empty turns.

use compaction_model::{
    decode_base64_strict, guess_mime, FilePart, ImagePart, JsonObject, Message, Part, ReasoningPart,
    ResultPart, Role, TextPart, ToolCall, ToolResultContent, ToolSpec,
};
use serde_json::{json, Map, Value};

use crate::error::Error;
use crate::provider::Provider;

/// A conversation in Anthropic's shape: the `system` blocks and the `messages` turns.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct AnthropicConversation {
    /// Text blocks of every system message, in order.
    pub system: Vec<Value>,
    /// The user and assistant turns.
    pub messages: Vec<Value>,
}

/// `messages` in Anthropic's shape.
///
/// ```
/// use compaction_llm::to_anthropic_messages;
/// use compaction_model::Message;
/// use serde_json::json;
///
/// let converted = to_anthropic_messages(&[Message::system("Be brief."), Message::user("Hi")])?;
/// assert_eq!(converted.system, vec![json!({"type": "text", "text": "Be brief."})]);
/// assert_eq!(converted.messages, vec![json!({"role": "user", "content": [{"type": "text", "text": "Hi"}]})]);
/// # Ok::<(), compaction_llm::Error>(())
/// ```
///
/// # Errors
///
/// [`Error::UnsupportedMessage`] for content the API cannot take (see the module notes).
pub fn to_anthropic_messages(messages: &[Message]) -> Result<AnthropicConversation, Error> {
    let mut converted = AnthropicConversation::default();
    for (index, message) in messages.iter().enumerate() {
        let unsupported =
            |reason: String| Error::UnsupportedMessage { provider: Provider::Anthropic, index, reason };
        if message.role == Role::System {
            for part in &message.parts {
                match part {
                    Part::Text(t) if t.text.is_empty() => {}
                    Part::Text(t) => converted.system.push(json!({"type": "text", "text": t.text.as_str()})),
                    _ => {
                        return Err(unsupported(
                            "a system message may hold only text for Anthropic".to_owned(),
                        ))
                    }
                }
            }
            continue;
        }
        let role = if message.role == Role::Assistant { "assistant" } else { "user" };
        let mut blocks = Vec::new();
        for part in &message.parts {
            if let Some(block) = block(message.role, part).map_err(unsupported)? {
                blocks.push(block);
            }
        }
        if blocks.is_empty() {
            continue;
        }
        match converted.messages.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(content) = last["content"].as_array_mut() {
                    content.extend(blocks);
                }
            }
            _ => converted.messages.push(json!({"role": role, "content": blocks})),
        }
    }
    for turn in &mut converted.messages {
        if let Some(content) = turn["content"].as_array_mut() {
            // Stable: tool results first, everything else after, each in its order.
            content.sort_by_key(|block| block["type"] != "tool_result");
        }
    }
    Ok(converted)
}

fn block(role: Role, part: &Part) -> Result<Option<Value>, String> {
    Ok(match part {
        Part::Text(t) if t.text.is_empty() => None,
        Part::Text(t) => Some(json!({"type": "text", "text": t.text.as_str()})),
        Part::Image(image) if role != Role::Assistant => Some(image_block(image)),
        Part::File(file) if role != Role::Assistant => Some(file_block(file)?),
        Part::Image(_) | Part::File(_) => {
            return Err("an assistant message cannot carry images or files".into())
        }
        Part::ToolCall(call) if role == Role::Assistant => Some(tool_use(call)?),
        Part::ToolCall(_) => return Err(format!("a {role} message cannot hold a tool call")),
        Part::ToolCallResult(result) => {
            let id = result.origin.id.as_ref().ok_or("a tool result must name its call's id")?;
            let content = match &result.result {
                ToolResultContent::Text(text) => json!(text.as_str()),
                ToolResultContent::Parts(parts) => Value::Array(
                    parts
                        .iter()
                        .filter_map(|part| match part {
                            ResultPart::Text(t) if t.text.is_empty() => None,
                            ResultPart::Text(t) => Some(Ok(json!({"type": "text", "text": t.text.as_str()}))),
                            ResultPart::Image(image) => Some(Ok(image_block(image))),
                            ResultPart::File(file) => Some(file_block(file)),
                            other => Some(Err(unknown_kind(other.kind()))),
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                ),
            };
            let mut block = Map::new();
            block.insert("type".into(), json!("tool_result"));
            block.insert("tool_use_id".into(), json!(id));
            block.insert("content".into(), content);
            if result.error {
                block.insert("is_error".into(), json!(true));
            }
            Some(Value::Object(block))
        }
        Part::Reasoning(reasoning) if role == Role::Assistant => thinking(reasoning),
        Part::Reasoning(_) => None,
        other => return Err(unknown_kind(other.kind())),
    })
}

/// The error for a part of a kind this conversion does not know: refused, never dropped.
fn unknown_kind(kind: &str) -> String {
    format!("a {kind} part has no Anthropic Messages form")
}

fn tool_use(call: &ToolCall) -> Result<Value, String> {
    let id = call.id.as_ref().ok_or("a tool call must have an id")?;
    if call.raw_arguments.is_some() {
        return Err(format!(
            "tool call {id} has arguments that are not a JSON object, and Anthropic takes only objects"
        ));
    }
    Ok(json!({"type": "tool_use", "id": id, "name": call.tool_name, "input": call.arguments}))
}

fn thinking(reasoning: &ReasoningPart) -> Option<Value> {
    if reasoning.extra.get("type").and_then(Value::as_str) == Some("redacted_thinking") {
        let data = reasoning.extra.get("data")?;
        return Some(json!({"type": "redacted_thinking", "data": data}));
    }
    let signature = reasoning.extra.get("signature").and_then(Value::as_str)?;
    Some(json!({"type": "thinking", "thinking": reasoning.reasoning_text, "signature": signature}))
}

/// The MIME type given, else the one the bytes show.
fn media_type(given: Option<&str>, base64: &str) -> Option<String> {
    match given.filter(|m| !m.is_empty()) {
        Some(mime) => Some(mime.to_owned()),
        None => decode_base64_strict(base64).ok().and_then(|bytes| guess_mime(&bytes)).map(str::to_owned),
    }
}

fn image_block(image: &ImagePart) -> Value {
    let mime =
        media_type(image.mime_type.as_deref(), &image.base64_image).unwrap_or_else(|| "image/jpeg".into());
    json!({"type": "image", "source": {"type": "base64", "media_type": mime, "data": image.base64_image}})
}

fn file_block(file: &FilePart) -> Result<Value, String> {
    let mime =
        media_type(file.mime_type.as_deref(), &file.base64_data).unwrap_or_else(|| "application/pdf".into());
    let source = if mime == "application/pdf" {
        json!({"type": "base64", "media_type": mime, "data": file.base64_data})
    } else if mime.starts_with("text/") {
        let bytes = decode_base64_strict(&file.base64_data)
            .map_err(|e| format!("file {:?} is not valid base64: {e}", file.filename))?;
        let text =
            String::from_utf8(bytes).map_err(|_| format!("text file {:?} is not UTF-8", file.filename))?;
        json!({"type": "text", "media_type": "text/plain", "data": text})
    } else {
        return Err(format!("Anthropic takes PDF and text documents, not {mime} (file {:?})", file.filename));
    };
    let mut block = Map::new();
    block.insert("type".into(), json!("document"));
    block.insert("source".into(), source);
    if let Some(name) = file.filename.as_deref().filter(|n| !n.is_empty()) {
        block.insert("title".into(), json!(name));
    }
    Ok(Value::Object(block))
}

/// Tool schemas as Anthropic takes them.
fn tools(tools: &[ToolSpec]) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| json!({"name": tool.name, "description": tool.description, "input_schema": tool.parameters}))
        .collect()
}

/// A Messages request body: model, max_tokens, system, messages, then the generation settings.
pub(crate) fn request(
    model: &str,
    max_tokens: u32,
    messages: &[Message],
    generation: &JsonObject,
) -> Result<Value, Error> {
    let converted = to_anthropic_messages(messages)?;
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(max_tokens));
    if !converted.system.is_empty() {
        body.insert("system".into(), Value::Array(converted.system));
    }
    body.insert("messages".into(), Value::Array(converted.messages));
    for (key, value) in generation {
        if !["model", "messages", "system"].contains(&key.as_str()) {
            body.insert(key.clone(), value.clone());
        }
    }
    Ok(Value::Object(body))
}

/// A `count_tokens` request body. The API needs at least one turn: a conversation of system
/// messages alone is counted as a user turn holding their text.
pub(crate) fn count_request(
    model: &str,
    messages: &[Message],
    tool_specs: &[ToolSpec],
) -> Result<Value, Error> {
    let mut converted = to_anthropic_messages(messages)?;
    if converted.messages.is_empty() && !converted.system.is_empty() {
        converted.messages.push(json!({"role": "user", "content": std::mem::take(&mut converted.system)}));
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    if !converted.system.is_empty() {
        body.insert("system".into(), Value::Array(converted.system));
    }
    body.insert("messages".into(), Value::Array(converted.messages));
    if !tool_specs.is_empty() {
        body.insert("tools".into(), Value::Array(tools(tool_specs)));
    }
    Ok(Value::Object(body))
}

/// A Messages reply as an assistant message. Meta: `model`, `index` (0), `finish_reason` (the
/// stop reason in OpenAI's words where one fits), `stop_reason`, `usage`; content blocks of a
/// kind this crate does not know are kept whole under `meta["unknown_content"]`.
pub(crate) fn reply(reply: &Value) -> Result<Message, String> {
    let blocks = reply.get("content").and_then(Value::as_array).ok_or("no `content` list in the reply")?;
    let mut parts = Vec::new();
    let mut unknown = Vec::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = block.get("text").and_then(Value::as_str).ok_or("a text block without text")?;
                parts.push(Part::Text(TextPart::new(text)));
            }
            Some("tool_use") => {
                let name =
                    block.get("name").and_then(Value::as_str).ok_or("a tool_use block without a name")?;
                let mut call = match block.get("input") {
                    Some(Value::Object(input)) => ToolCall::new(name, input.clone()),
                    None | Some(Value::Null) => ToolCall::new(name, JsonObject::new()),
                    Some(other) => ToolCall::with_raw_arguments(name, other.to_string()),
                };
                call.id = block.get("id").and_then(Value::as_str).map(str::to_owned);
                parts.push(Part::ToolCall(call));
            }
            Some("thinking") => {
                let mut extra = JsonObject::new();
                if let Some(signature) = block.get("signature") {
                    extra.insert("signature".into(), signature.clone());
                }
                let text = block.get("thinking").and_then(Value::as_str).unwrap_or_default();
                parts.push(Part::Reasoning(ReasoningPart {
                    reasoning_text: text.to_owned(),
                    extra: extra.into(),
                    ..Default::default()
                }));
            }
            Some("redacted_thinking") => {
                let mut extra = JsonObject::new();
                extra.insert("type".into(), json!("redacted_thinking"));
                extra.insert("data".into(), block.get("data").cloned().unwrap_or(Value::Null));
                parts.push(Part::Reasoning(ReasoningPart { extra: extra.into(), ..Default::default() }));
            }
            _ => unknown.push(block.clone()),
        }
    }
    let stop_reason = reply.get("stop_reason").cloned().unwrap_or(Value::Null);
    let finish_reason = match stop_reason.as_str() {
        Some("end_turn" | "stop_sequence" | "pause_turn") => json!("stop"),
        Some("max_tokens") => json!("length"),
        Some("tool_use") => json!("tool_calls"),
        Some("refusal") => json!("content_filter"),
        _ => stop_reason.clone(),
    };
    let mut meta = JsonObject::new();
    meta.insert("model".into(), reply.get("model").cloned().unwrap_or(Value::Null));
    meta.insert("index".into(), json!(0));
    meta.insert("finish_reason".into(), finish_reason);
    meta.insert("stop_reason".into(), stop_reason);
    meta.insert("usage".into(), reply.get("usage").cloned().unwrap_or(Value::Null));
    if !unknown.is_empty() {
        meta.insert("unknown_content".into(), Value::Array(unknown));
    }
    let mut message = Message::assistant_with_calls(None, Vec::new()).with_meta(meta);
    message.parts = parts;
    Ok(message)
}
