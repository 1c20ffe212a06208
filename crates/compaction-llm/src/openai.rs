//! OpenAI's Chat Completions format: messages to a request, a completion back to a message.
//!
//! The request side is the reference's `ChatMessage.to_openai_dict_format()` (Haystack 3.4.1,
//! tool-call ids required), checked against what its `OpenAIChatGenerator` sent
//! (`tests/data/chat/`), except where it would lose content:
//!
//! - a system or assistant message with several texts sends them all as text parts (the
//!   reference sends the first);
//! - images or files in a system or assistant message, and a tool call or result in a user
//!   message, are errors (the reference drops them);
//! - a tool call's `raw_arguments` are sent as they are.
//!
//! Reasoning is never sent: Chat Completions has no field for it (as in the reference).
//!
//! The reply side keeps what the reference drops: tool-call arguments that are not a JSON object
//! (kept as `raw_arguments`), custom tool calls, `reasoning_content` (as compatible servers send
//! reasoning) and a refusal (in `meta["refusal"]`).

use compaction_json::python::PythonJson;
use compaction_model::{
    JsonObject, Message, Part, ReasoningPart, ResultPart, Role, TextPart, ToolCall, ToolResultContent,
};
use serde_json::{json, Map, Value};

use crate::error::Error;
use crate::provider::Provider;

/// Every message of `messages` as a Chat Completions message, in order.
///
/// ```
/// use compaction_llm::to_chat_completions_messages;
/// use compaction_model::{Message, ToolCall};
/// use serde_json::json;
///
/// let mut args = serde_json::Map::new();
/// args.insert("q".into(), json!("rust"));
/// let call = ToolCall::new("search", args).with_id("call_1");
/// let messages = vec![
///     Message::user("Find it"),
///     Message::assistant_with_calls(None, vec![call.clone()]),
///     Message::tool("3 hits", call, false),
/// ];
/// assert_eq!(to_chat_completions_messages(&messages)?, vec![
///     json!({"role": "user", "content": "Find it"}),
///     json!({"role": "assistant", "tool_calls": [{"type": "function",
///            "function": {"name": "search", "arguments": "{\"q\": \"rust\"}"}, "id": "call_1"}]}),
///     json!({"role": "tool", "content": "3 hits", "tool_call_id": "call_1"}),
/// ]);
/// # Ok::<(), compaction_llm::Error>(())
/// ```
///
/// # Errors
///
/// [`Error::UnsupportedMessage`] for a message the API cannot take (see the module notes), or a
/// tool call or result without an id.
pub fn to_chat_completions_messages(messages: &[Message]) -> Result<Vec<Value>, Error> {
    messages
        .iter()
        .enumerate()
        .map(|(index, message)| {
            chat_message(message).map_err(|reason| Error::UnsupportedMessage {
                provider: Provider::OpenAI,
                index,
                reason,
            })
        })
        .collect()
}

fn chat_message(message: &Message) -> Result<Value, String> {
    // Reasoning is never sent, so it does not count as content.
    let has_content = message.parts.iter().any(|p| !matches!(p, Part::Reasoning(_)));
    if !has_content && message.role != Role::Assistant {
        return Err(format!(
            "a {} message must hold text, a tool call, a tool result, an image or a file; only assistant \
             messages can be empty",
            message.role
        ));
    }
    let results: Vec<_> = message.tool_call_results().collect();
    if !results.is_empty() && message.parts.len() > 1 {
        return Err("a message with a tool result cannot hold anything else".to_owned());
    }
    let mut out = Map::new();
    out.insert("role".into(), json!(message.role.as_str()));
    if let Some(name) = &message.name {
        out.insert("name".into(), json!(name));
    }

    if message.role == Role::User {
        user_content(message, &mut out)?;
        return Ok(Value::Object(out));
    }

    if let Some(result) = results.first() {
        let content = match &result.result {
            ToolResultContent::Text(text) => json!(text.as_str()),
            ToolResultContent::Parts(parts) => {
                let texts = parts
                    .iter()
                    .map(|part| match part {
                        ResultPart::Text(t) => Ok(json!({"type": "text", "text": t.text.as_str()})),
                        _ => Err("Chat Completions takes no images or files in tool results; use the \
                                  Responses API or the Anthropic client"
                            .to_owned()),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Value::Array(texts)
            }
        };
        out.insert("content".into(), content);
        let id = result.origin.id.as_ref().ok_or("a tool result must name its call's id")?;
        out.insert("tool_call_id".into(), json!(id));
        return Ok(Value::Object(out));
    }

    if message.parts.iter().any(|p| matches!(p, Part::Image(_) | Part::File(_))) {
        return Err(format!(
            "Chat Completions takes images and files only in user messages, not in a {} message",
            message.role
        ));
    }
    let texts: Vec<&str> = message.texts().collect();
    match texts.as_slice() {
        [] => {}
        [text] => {
            out.insert("content".into(), json!(text));
        }
        several => {
            out.insert(
                "content".into(),
                Value::Array(several.iter().map(|t| json!({"type": "text", "text": t})).collect()),
            );
        }
    }
    let calls: Vec<&ToolCall> = message.tool_calls().collect();
    let refusal = match message.meta.get("refusal") {
        Some(Value::String(refusal)) if message.role == Role::Assistant && !refusal.is_empty() => {
            if calls.is_empty() {
                Some(refusal.clone())
            } else {
                // OpenAI ignores the tool calls of a message with a refusal, then rejects their
                // results: the reference drops the refusal, with a warning.
                tracing::warn!("dropping the refusal of an assistant message that also has tool calls");
                None
            }
        }
        _ => None,
    };
    if let Some(refusal) = refusal {
        if out.contains_key("content") {
            out.insert("refusal".into(), json!(refusal));
        } else {
            out.insert("content".into(), json!([{"type": "refusal", "refusal": refusal}]));
        }
    }
    if !calls.is_empty() {
        let calls = calls
            .into_iter()
            .map(|call| {
                let arguments = match &call.raw_arguments {
                    Some(raw) => raw.clone(),
                    // As the reference sends them: `json.dumps(arguments, ensure_ascii=False)`.
                    None => PythonJson::new().ensure_ascii(false).dumps(&Value::from(call.arguments.clone())),
                };
                let id = call.id.as_ref().ok_or("a tool call must have an id")?;
                Ok(json!({"type": "function", "function": {"name": call.tool_name, "arguments": arguments}, "id": id}))
            })
            .collect::<Result<Vec<_>, String>>()?;
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    if !out.contains_key("content") && !out.contains_key("tool_calls") {
        out.insert("content".into(), json!(""));
    }
    Ok(Value::Object(out))
}

fn user_content(message: &Message, out: &mut Map<String, Value>) -> Result<(), String> {
    if let [Part::Text(text)] = message.parts.as_slice() {
        out.insert("content".into(), json!(text.text.as_str()));
        return Ok(());
    }
    let mut content = Vec::new();
    for part in &message.parts {
        match part {
            Part::Text(t) => content.push(json!({"type": "text", "text": t.text.as_str()})),
            Part::Image(image) => {
                let mime = image.mime_type.as_deref().filter(|m| !m.is_empty()).unwrap_or("image/jpeg");
                let mut url = Map::new();
                url.insert("url".into(), json!(format!("data:{mime};base64,{}", image.base64_image)));
                if let Some(detail) = image.detail.as_deref().filter(|d| !d.is_empty()) {
                    url.insert("detail".into(), json!(detail));
                }
                content.push(json!({"type": "image_url", "image_url": url}));
            }
            Part::File(file) => {
                let mime = file.mime_type.as_deref().filter(|m| !m.is_empty()).unwrap_or("application/pdf");
                content.push(json!({"type": "file", "file": {
                    "file_data": format!("data:{mime};base64,{}", file.base64_data),
                    "filename": file.filename.as_deref().filter(|f| !f.is_empty()).unwrap_or("filename"),
                }}));
            }
            Part::Reasoning(_) => {}
            Part::ToolCall(_) => return Err("a user message cannot hold a tool call".to_owned()),
            Part::ToolCallResult(_) => return Err("a user message cannot hold a tool result".to_owned()),
            other => return Err(format!("a {} part has no Chat Completions form", other.kind())),
        }
    }
    out.insert("content".into(), Value::Array(content));
    Ok(())
}

/// The request body: the model, the messages, then the generation settings (which may override
/// neither).
pub(crate) fn request(model: &str, messages: &[Message], generation: &JsonObject) -> Result<Value, Error> {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(to_chat_completions_messages(messages)?));
    for (key, value) in generation {
        if key != "model" && key != "messages" {
            body.insert(key.clone(), value.clone());
        }
    }
    Ok(Value::Object(body))
}

/// The first choice of a completion as an assistant message, with the reference's meta (`model`,
/// `index`, `finish_reason`, `usage`).
pub(crate) fn reply(completion: &Value) -> Result<Message, String> {
    let choice = completion
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first())
        .ok_or("no `choices[0]` in the completion")?;
    let message = choice.get("message").and_then(Value::as_object).ok_or("no `message` in `choices[0]`")?;
    let mut parts = Vec::new();
    for key in ["reasoning_content", "reasoning"] {
        if let Some(reasoning) = message.get(key).and_then(Value::as_str).filter(|r| !r.is_empty()) {
            parts.push(Part::Reasoning(ReasoningPart {
                reasoning_text: reasoning.to_owned(),
                ..Default::default()
            }));
            break;
        }
    }
    match message.get("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => parts.push(Part::Text(TextPart::new(text.as_str()))),
        Some(other) => return Err(format!("`content` is neither a string nor null: {other}")),
    }
    for call in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        parts.push(Part::ToolCall(tool_call(call)?));
    }
    let mut meta = JsonObject::new();
    meta.insert("model".into(), completion.get("model").cloned().unwrap_or(Value::Null));
    meta.insert("index".into(), choice.get("index").cloned().unwrap_or(json!(0)));
    meta.insert("finish_reason".into(), choice.get("finish_reason").cloned().unwrap_or(Value::Null));
    meta.insert("usage".into(), completion.get("usage").cloned().unwrap_or(Value::Null));
    if let Some(refusal) = message.get("refusal").filter(|r| r.as_str().is_some_and(|r| !r.is_empty())) {
        meta.insert("refusal".into(), refusal.clone());
    }
    let mut reply = Message::assistant_with_calls(None, Vec::new()).with_meta(meta);
    reply.parts = parts;
    Ok(reply)
}

/// A tool call; arguments that are not a JSON object are kept as their text.
fn tool_call(call: &Value) -> Result<ToolCall, String> {
    let id = call.get("id").and_then(Value::as_str).map(str::to_owned);
    let (name, raw) = if let Some(function) = call.get("function") {
        let name =
            function.get("name").and_then(Value::as_str).ok_or("a tool call's function has no name")?;
        (name, function.get("arguments"))
    } else if let Some(custom) = call.get("custom") {
        let name = custom.get("name").and_then(Value::as_str).ok_or("a custom tool call has no name")?;
        (name, custom.get("input"))
    } else {
        return Err(format!("a tool call with neither `function` nor `custom`: {call}"));
    };
    let mut parsed = match raw {
        None | Some(Value::Null) => ToolCall::new(name, JsonObject::new()),
        Some(Value::Object(arguments)) => ToolCall::new(name, arguments.clone()),
        Some(Value::String(text)) if text.is_empty() => ToolCall::new(name, JsonObject::new()),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(arguments)) => ToolCall::new(name, arguments),
            _ => ToolCall::with_raw_arguments(name, text.as_str()),
        },
        Some(other) => ToolCall::with_raw_arguments(name, other.to_string()),
    };
    parsed.id = id;
    Ok(parsed)
}
