//! Telling a file's format from its content, and saying what was seen when none fits.

use serde_json::{Map, Value};

use crate::document::{items, json_type, key_list, Top};
use crate::Format;

pub(crate) fn detect(top: &Top) -> Option<Format> {
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

/// What was seen, for a file whose format could not be told.
pub(crate) fn unrecognized(top: &Top) -> String {
    match top {
        Top::Value(Value::Object(object)) => format!(
            "not a transcript format this program knows: an object with keys {}; expected messages \
             (OpenAI, Anthropic), `history` (SWE-agent, OpenHands) or an array of messages",
            key_list(object)
        ),
        Top::Value(other) => format!("expected a JSON array or object, found {}", json_type(other)),
        Top::Lines(_) => "not a transcript format this program knows".into(),
    }
}
