//! The format one message's shape tells: what detection, the Haystack span reader and the
//! OpenAI request reader all ask of a message.

use serde_json::{Map, Value};

use crate::format::Format;

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
