//! What the Chat Completions and Responses mappings share: the stash key, data URLs, tool-call
//! argument text, and finding a result's call.

use std::collections::HashMap;

use compaction_model::{JsonObject, ToolCall};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::stash;

/// The key of the stash this adapter keeps in parts' `unknown` maps and messages' `meta`.
pub const STASH: &str = "openai";

/// A `data:` URL's MIME type (`None` when it names none) and base64 payload, when `url` is
/// exactly `data:MIME;base64,PAYLOAD` — so that writing it back gives the same text.
pub(crate) fn parse_data_url(url: &str) -> Option<(Option<String>, String)> {
    let rest = url.strip_prefix("data:")?;
    let (mime, payload) = rest.split_once(";base64,")?;
    if mime.contains([';', ',']) {
        return None;
    }
    let mime = (!mime.is_empty()).then(|| mime.to_owned());
    Some((mime, payload.to_owned()))
}

/// The `data:` URL of an inline payload.
pub(crate) fn data_url(mime: Option<&str>, base64: &str) -> String {
    format!("data:{};base64,{base64}", mime.unwrap_or(""))
}

/// Our tool call's arguments from OpenAI's arguments text: a JSON object, or (anything else) the
/// text itself as raw arguments. Text that parses but is not written back the same way (spaces,
/// escapes) is kept in `stash` under `arguments`.
pub(crate) fn read_arguments(call: &mut ToolCall, text: &str, stash: &mut JsonObject) {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(arguments)) => {
            call.arguments = arguments.into();
            if call.arguments.as_json() != text {
                stash.insert("arguments".into(), Value::String(text.to_owned()));
            }
        }
        _ => call.raw_arguments = Some(text.to_owned()),
    }
}

/// OpenAI's arguments text for our tool call: the raw text, the text it was read from (when the
/// arguments are still what that text says), or the arguments written as JSON.
pub(crate) fn write_arguments(call: &ToolCall, stash: Option<&JsonObject>) -> String {
    if let Some(raw) = &call.raw_arguments {
        return raw.clone();
    }
    if let Some(text) = stash::str_of(stash, "arguments") {
        if serde_json::from_str::<Value>(text)
            .ok()
            .as_ref()
            .and_then(Value::as_object)
            .is_some_and(|o| call.arguments == *o)
        {
            return text.to_owned();
        }
    }
    call.arguments.as_json().to_owned()
}

/// The calls seen so far, by id, so that a result (which names only its call's id) gets the
/// whole call back as its origin. The latest call with an id wins, as pairing by position would
/// have it (some agents reuse ids).
#[derive(Default)]
pub(crate) struct Calls {
    by_id: HashMap<String, ToolCall>,
}

impl Calls {
    pub(crate) fn remember(&mut self, key: &str, call: &ToolCall) {
        self.by_id.insert(key.to_owned(), call.clone());
    }

    /// The call `key` answers; one with only the id (and no tool name) when none was seen.
    pub(crate) fn origin(&self, key: &str, id: Option<String>) -> ToolCall {
        self.by_id.get(key).cloned().unwrap_or_else(|| ToolCall { id, ..ToolCall::default() })
    }
}

/// A value's JSON object form (async-openai's types serialize to objects without fail).
pub(crate) fn to_object<T: Serialize>(value: &T) -> JsonObject {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map,
        _ => JsonObject::new(),
    }
}

/// A stash entry read back as async-openai's type, when it still is one.
pub(crate) fn entry<T: DeserializeOwned>(stash: Option<&JsonObject>, key: &str) -> Option<T> {
    stash.and_then(|s| s.get(key)).and_then(|value| serde_json::from_value(value.clone()).ok())
}
