//! [genai](https://docs.rs/genai): `ChatMessage` / `ContentPart` ⇄ ours (feature `genai`).
//!
//! # The mapping
//!
//! | genai | ours |
//! |---|---|
//! | `ChatMessage { role, content, options }` | a message of the same role; `options` (cache control) in `meta["genai"]` |
//! | `ContentPart::Text` | a text part |
//! | `ContentPart::Binary` with an `image/*` content type | an image (base64; a URL is kept in the stash) |
//! | other `ContentPart::Binary` | a file: the content type is its MIME type, the name its filename |
//! | `ContentPart::ToolCall` | a tool call: `call_id` is its id (an empty one: none); object arguments are `arguments`, a string is `raw_arguments`, other JSON is `raw_arguments` holding that JSON |
//! | `ContentPart::ToolResponse` | a tool-call result; its origin is the call with that id, found earlier in the conversation |
//! | `ContentPart::ReasoningContent` | a reasoning part |
//! | `ContentPart::ThoughtSignature`, `ContentPart::Custom` | a reasoning part with no text, the value in its stash |
//!
//! What our model has no field for (thought signatures on calls, a tool response's `fn_name`
//! when it is not its call's, binary URLs and names) is kept in a stash: the JSON object under
//! `"genai"` in the part's `unknown` map or the message's `meta`. [`from_genai`] therefore
//! never loses anything, and [`to_genai`] of what it returns gives back the same messages.
//!
//! Going the other way, genai has no place for a message's `name` or `meta` (but the stash),
//! parts' `unknown` fields (but the stash), a tool call's `extra`, reasoning `extra`, an image's
//! `detail`, `meta` and `validation`, a file's `extra` and `validation`, a result's error flag,
//! or images and files inside results (genai's tool responses are a string; texts of a
//! multi-part result are joined by newlines). [`to_genai`] names each of these in its
//! [`Conversion`]'s losses.
//!
//! # Example
//!
//! ```
//! use compaction_adapters::genai::{from_genai, to_genai};
//! use genai::chat::{ChatMessage, ToolCall, ToolResponse};
//!
//! let call = ToolCall {
//!     call_id: "call_1".into(),
//!     fn_name: "search".into(),
//!     fn_arguments: serde_json::json!({"q": "release notes"}),
//!     thought_signatures: None,
//! };
//! let history = vec![
//!     ChatMessage::user("Find the release notes."),
//!     ChatMessage::from(vec![call.clone()]),
//!     ChatMessage::from(ToolResponse::from_tool_call(&call, "3 hits")),
//! ];
//!
//! let ours = from_genai(&history);
//! assert_eq!(ours[2].tool_call_result().unwrap().origin.arguments.get("q").unwrap(), "release notes");
//!
//! let back = to_genai(&ours).into_lossless()?;
//! assert_eq!(serde_json::to_value(&back)?, serde_json::to_value(&history)?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;

use compaction_model::{
    FilePart, ImagePart, JsonObject, Message, Part, ReasoningPart, ResultPart, Role, TextPart, ToolCall,
    ToolCallResult, ToolResultContent,
};
use genai::chat::{
    Binary, BinarySource, ChatMessage, ChatRole, ContentPart, CustomPart, MessageContent,
    ToolCall as GenaiToolCall, ToolResponse,
};
use serde_json::Value;

use crate::diff::diff_message;
use crate::stash;
use crate::Conversion;

/// The key of the stash this adapter keeps in parts' `unknown` maps and messages' `meta`.
pub const STASH: &str = "genai";

/// Converts genai messages to ours, one for one. Never fails and never loses anything: what our
/// model has no field for is kept in the `genai` stash (see the [module docs](self)).
pub fn from_genai(messages: &[ChatMessage]) -> Vec<Message> {
    let mut calls: HashMap<String, ToolCall> = HashMap::new();
    messages.iter().map(|message| read_message(message, &mut calls)).collect()
}

/// Converts our messages to genai's, one for one, with what genai cannot hold (see the
/// [module docs](self)).
pub fn to_genai(messages: &[Message]) -> Conversion<Vec<ChatMessage>> {
    let mut calls = Vec::new();
    let mut out = Vec::with_capacity(messages.len());
    let mut kept = Vec::with_capacity(messages.len());
    for message in messages {
        let (converted, parts) = write_message(message, &mut calls);
        out.push(converted);
        kept.push(parts);
    }
    let back = from_genai(&out);
    let mut losses = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        diff_message(index, message, &back[index], &kept[index], &mut losses);
    }
    Conversion::new(out, losses)
}

fn read_message(message: &ChatMessage, calls: &mut HashMap<String, ToolCall>) -> Message {
    let ChatMessage { role, content, options } = message;
    let role = match role {
        ChatRole::System => Role::System,
        ChatRole::User => Role::User,
        ChatRole::Assistant => Role::Assistant,
        ChatRole::Tool => Role::Tool,
    };
    let parts = content.parts().iter().map(|part| read_part(part, calls)).collect();
    let mut meta = JsonObject::new();
    if let Some(options) = options {
        let value = serde_json::to_value(options).unwrap_or(Value::Null);
        stash::put(&mut meta, STASH, stash::object("options", value));
    }
    Message { role, parts, name: None, meta: meta.into() }
}

/// genai's ids are strings; an empty one is no id of ours.
fn own_id(id: &str) -> Option<String> {
    (!id.is_empty()).then(|| id.to_owned())
}

fn read_part(part: &ContentPart, calls: &mut HashMap<String, ToolCall>) -> Part {
    match part {
        ContentPart::Text(text) => Part::Text(TextPart::new(text.as_str())),
        ContentPart::Binary(Binary { content_type, source, name }) => {
            let mut part_stash = JsonObject::new();
            let base64 = match source {
                BinarySource::Base64(data) => data.to_string(),
                BinarySource::Url(url) => {
                    part_stash.insert("url".into(), Value::String(url.clone()));
                    String::new()
                }
            };
            let mime = own_id(content_type);
            if content_type.trim().to_ascii_lowercase().starts_with("image/") {
                if let Some(name) = name {
                    part_stash.insert("name".into(), Value::String(name.clone()));
                }
                let mut image = ImagePart::new(base64, mime);
                stash::put(&mut image.unknown, STASH, part_stash);
                Part::Image(image)
            } else {
                let mut file = FilePart::new(base64, mime, name.clone());
                stash::put(&mut file.unknown, STASH, part_stash);
                Part::File(file)
            }
        }
        ContentPart::ToolCall(GenaiToolCall { call_id, fn_name, fn_arguments, thought_signatures }) => {
            let mut call = ToolCall::new(fn_name.as_str(), JsonObject::new());
            call.id = own_id(call_id);
            let mut part_stash = JsonObject::new();
            match fn_arguments {
                Value::Object(arguments) => call.arguments = arguments.clone().into(),
                Value::String(raw) => call.raw_arguments = Some(raw.clone()),
                other => {
                    // JSON that is neither an object nor text: held as its JSON text.
                    call.raw_arguments = Some(other.to_string());
                    part_stash.insert("arguments".into(), "json".into());
                }
            }
            if let Some(signatures) = thought_signatures {
                part_stash.insert(
                    "thought_signatures".into(),
                    serde_json::to_value(signatures).unwrap_or(Value::Null),
                );
            }
            stash::put(&mut call.unknown, STASH, part_stash);
            calls.insert(call_id.clone(), call.clone());
            Part::ToolCall(call)
        }
        ContentPart::ToolResponse(ToolResponse { call_id, fn_name, content }) => {
            let origin = calls.get(call_id).cloned().unwrap_or_else(|| ToolCall {
                tool_name: fn_name.clone().unwrap_or_default(),
                id: own_id(call_id),
                ..ToolCall::default()
            });
            let mut result =
                ToolCallResult::new(ToolResultContent::Text(content.as_str().into()), origin, false);
            if fn_name.as_deref() != Some(result.origin.tool_name.as_str()) {
                let value = fn_name.clone().map_or(Value::Null, Value::String);
                stash::put(&mut result.unknown, STASH, stash::object("fn_name", value));
            }
            Part::ToolCallResult(result)
        }
        ContentPart::ReasoningContent(text) => {
            Part::Reasoning(ReasoningPart { reasoning_text: text.clone(), ..ReasoningPart::default() })
        }
        ContentPart::ThoughtSignature(signature) => {
            let mut part = ReasoningPart::default();
            stash::put(&mut part.unknown, STASH, stash::object("thought_signature", signature.as_str()));
            Part::Reasoning(part)
        }
        ContentPart::Custom(custom) => {
            let mut part = ReasoningPart::default();
            let value = serde_json::to_value(custom).unwrap_or(Value::Null);
            stash::put(&mut part.unknown, STASH, stash::object("custom", value));
            Part::Reasoning(part)
        }
    }
}

/// The genai message for `message`, and the indices of the parts it kept.
fn write_message(message: &Message, calls: &mut Vec<ToolCall>) -> (ChatMessage, Vec<usize>) {
    let role = match message.role {
        Role::System => ChatRole::System,
        Role::User => ChatRole::User,
        Role::Assistant => ChatRole::Assistant,
        Role::Tool => ChatRole::Tool,
    };
    let mut parts = Vec::new();
    let mut kept = Vec::new();
    for (k, part) in message.parts.iter().enumerate() {
        let written = match part {
            Part::Text(text) => Some(ContentPart::Text(text.text.to_string())),
            Part::Image(image) => {
                let part_stash = stash::get(&image.unknown, STASH);
                let name = stash::str_of(part_stash, "name").map(str::to_owned);
                Some(ContentPart::Binary(binary(
                    &image.base64_image,
                    image.mime_type.as_deref(),
                    name,
                    part_stash,
                )))
            }
            Part::File(file) => {
                let part_stash = stash::get(&file.unknown, STASH);
                Some(ContentPart::Binary(binary(
                    &file.base64_data,
                    file.mime_type.as_deref(),
                    file.filename.clone(),
                    part_stash,
                )))
            }
            Part::ToolCall(call) => {
                calls.push(call.clone());
                Some(ContentPart::ToolCall(write_call(call)))
            }
            Part::ToolCallResult(result) => Some(ContentPart::ToolResponse(write_result(result, calls))),
            Part::Reasoning(reasoning) => write_reasoning(reasoning),
            // Not kept, so the round trip reports it as a loss.
            _ => None,
        };
        if let Some(written) = written {
            parts.push(written);
            kept.push(k);
        }
    }
    let options = stash::get(&message.meta, STASH)
        .and_then(|s| s.get("options"))
        .and_then(|options| serde_json::from_value(options.clone()).ok());
    (ChatMessage { role, content: MessageContent::from_parts(parts), options }, kept)
}

fn binary(base64: &str, mime: Option<&str>, name: Option<String>, part_stash: Option<&JsonObject>) -> Binary {
    let source = match stash::str_of(part_stash, "url") {
        Some(url) if base64.is_empty() => BinarySource::Url(url.to_owned()),
        _ => BinarySource::Base64(base64.into()),
    };
    Binary::new(mime.unwrap_or_default(), source, name)
}

fn write_call(call: &ToolCall) -> GenaiToolCall {
    let part_stash = stash::get(&call.unknown, STASH);
    let fn_arguments = match &call.raw_arguments {
        Some(raw) if stash::str_of(part_stash, "arguments") == Some("json") => {
            serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.clone()))
        }
        Some(raw) => Value::String(raw.clone()),
        None => Value::from(call.arguments.clone()),
    };
    GenaiToolCall {
        call_id: call.id.clone().unwrap_or_default(),
        fn_name: call.tool_name.clone(),
        fn_arguments,
        thought_signatures: part_stash
            .and_then(|s| s.get("thought_signatures"))
            .and_then(|value| serde_json::from_value(value.clone()).ok()),
    }
}

fn write_result(result: &ToolCallResult, calls: &[ToolCall]) -> ToolResponse {
    let origin = &result.origin;
    // No id of its own: the call it answers is the latest one equal to its origin.
    let call_id = match &origin.id {
        Some(id) => id.clone(),
        None => calls
            .iter()
            .rev()
            .find(|call| **call == **origin)
            .and_then(|call| call.id.clone())
            .unwrap_or_default(),
    };
    let fn_name = match stash::get(&result.unknown, STASH).and_then(|s| s.get("fn_name")) {
        Some(Value::String(name)) => Some(name.clone()),
        Some(_) => None,
        None => Some(origin.tool_name.clone()),
    };
    let content = match &result.result {
        ToolResultContent::Text(text) => text.to_string(),
        ToolResultContent::Parts(parts) => parts
            .iter()
            .filter_map(|part| match part {
                ResultPart::Text(text) => Some(text.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
    };
    ToolResponse { call_id, fn_name, content }
}

fn write_reasoning(reasoning: &ReasoningPart) -> Option<ContentPart> {
    let part_stash = stash::get(&reasoning.unknown, STASH);
    if let Some(signature) = stash::str_of(part_stash, "thought_signature") {
        return Some(ContentPart::ThoughtSignature(signature.to_owned()));
    }
    if let Some(custom) = part_stash.and_then(|s| s.get("custom")) {
        return serde_json::from_value::<CustomPart>(custom.clone()).ok().map(ContentPart::Custom);
    }
    Some(ContentPart::ReasoningContent(reasoning.reasoning_text.clone()))
}
