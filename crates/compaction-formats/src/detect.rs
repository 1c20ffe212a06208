//! Telling a file's format from its content, and saying what was seen when none fits.

use serde_json::{Map, Value};

use crate::document::{items, json_type, key_list, Top};
use crate::error::Error;
use crate::eventlog::json_lines;
use crate::format::Format;
use crate::formats;
use crate::shapes::message_format;

/// How many lines (or array elements) detection looks at before it decides.
const LOOK: usize = 50;

/// The formats of event logs, in the order a line is asked whether it is one of their records.
const LOG_FORMATS: [Format; 3] = [Format::Codex, Format::ClaudeCode, Format::Responses];

/// What one line of a JSON Lines file says about the file.
enum Says {
    Log(Format),
    Tree,
    Message,
    Nothing,
}

fn line_says(object: &Map<String, Value>) -> Says {
    if let Some(format) = LOG_FORMATS.into_iter().find(|format| formats::of(*format).is_log_record(object)) {
        return Says::Log(format);
    }
    if ["history", "messages", "traj", "source"].iter().any(|k| object.contains_key(*k)) {
        return Says::Tree;
    }
    // A message: of a chat format, or the short form of a Responses message; later lines tell.
    if object.contains_key("role") || object.contains_key("_role") {
        return Says::Message;
    }
    Says::Nothing
}

/// Whether `json` is an object with `key` at its top level, found without building its values;
/// false when it is not an object, or not JSON.
fn has_key(json: &[u8], key: &str) -> bool {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    // A key can spell `key` only as its letters or with `\u` escapes: when neither is anywhere in
    // the text, the answer needs no parse.
    if memchr::memmem::find(json, key.as_bytes()).is_none() && memchr::memmem::find(json, b"\\u").is_none() {
        return false;
    }
    struct HasKey<'k>(&'k str);
    impl<'de> Visitor<'de> for HasKey<'_> {
        type Value = bool;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
            let mut found = false;
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                found |= key == self.0;
                map.next_value::<IgnoredAny>()?;
            }
            Ok(found)
        }
    }
    let mut deserializer = serde_json::Deserializer::from_slice(json);
    deserializer.deserialize_map(HasKey(key)).is_ok_and(|found| found && deserializer.end().is_ok())
}

/// The format of an event log in JSON Lines (Claude Code, Codex, Responses items a line), told
/// from the first lines of `bytes` (a prefix of the file is enough: about fifty lines); `None`
/// when the input is something else, read with [`read()`](crate::read()). JSON Lines of records
/// no format knows are an error saying what their lines carry.
///
/// `None` is for what the tree reader takes: one JSON value, JSON Lines of messages or of
/// conversations, or JSON that does not parse, whose error the tree reader words.
pub fn detect_lines(bytes: &[u8], name: &str) -> Result<Option<Format>, Error> {
    let mut lines = json_lines(bytes).take(LOOK);
    let Some((_, first)) = lines.next() else { return Ok(None) };
    if bytes[first.clone()].first() != Some(&b'{') {
        return Ok(None);
    }
    // One line (one JSON value, such as an OpenAI request) is a log only as a Codex record, which
    // carries `payload`: any other is left to the tree reader without being built here first.
    if json_lines(bytes).nth(1).is_none() && !has_key(&bytes[first.clone()], "payload") {
        return Ok(None);
    }
    let mut objects = Vec::new();
    for range in std::iter::once(first).chain(lines.map(|(_, range)| range)) {
        match compaction_model::value_from_slice(&bytes[range]) {
            Ok(Value::Object(object)) => objects.push(object),
            Ok(_) => return Ok(None),
            // One pretty-printed value, or a broken line: the tree reader words it.
            Err(_) => return Ok(None),
        }
    }
    if objects.len() < 2 && !objects.first().is_some_and(|o| o.contains_key("payload")) {
        return Ok(None);
    }
    let mut legacy_codex = false;
    let mut messages = false;
    for object in &objects {
        match line_says(object) {
            Says::Log(Format::Responses) if legacy_codex => return Ok(Some(Format::Codex)),
            Says::Log(format) => return Ok(Some(format)),
            Says::Tree => return Ok(None),
            Says::Message => messages = true,
            Says::Nothing => {
                // An older Codex rollout opens with its session metadata, then bare items.
                legacy_codex |= object.contains_key("timestamp") && object.contains_key("id");
            }
        }
    }
    if messages {
        return Ok(None);
    }
    let types: Vec<String> = objects
        .iter()
        .filter_map(|o| o.get("type").and_then(Value::as_str))
        .map(crate::error::snippet)
        .take(4)
        .collect();
    let keys = objects.first().map(key_list).unwrap_or_default();
    let reason = if objects.iter().any(|o| o.contains_key("payload")) {
        format!(
            "JSON Lines whose lines carry `type`/`payload` (types {}) but none of a Codex rollout's record \
             types (session_meta, response_item, event_msg, compacted); expected a transcript format \
             this program knows (see --format)",
            types.join(", ")
        )
    } else if !types.is_empty() {
        format!(
            "JSON Lines whose lines carry `type` ({}) but no Claude Code fields (`sessionId`, `uuid`, \
             `message`) and no Responses item kinds; if this is a Codex rollout try --format codex, if a \
             Claude Code session --format claude-code",
            types.join(", ")
        )
    } else {
        format!("JSON Lines of objects with keys {keys}: not a transcript format this program knows")
    };
    Err(Error::Unrecognized { name: name.to_owned(), reason })
}

pub(crate) fn detect(top: &Top) -> Option<Format> {
    if let Top::Value(Value::Object(object)) = top {
        return detect_object(object);
    }
    let items = items(top)?;
    if items.iter().take(LOOK).filter_map(|item| item.as_object()).any(crate::responses::is_item) {
        return Some(Format::Responses);
    }
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
    if is_openhands_event(first) {
        return Some(Format::OpenHands);
    }
    if first.get("type").is_some_and(Value::is_string) && !first.contains_key("messages") {
        return Some(Format::ClaudeCode);
    }
    detect_object(first)
}

fn detect_object(object: &Map<String, Value>) -> Option<Format> {
    if let Some(Value::Array(input)) = object.get("input") {
        if input.iter().take(LOOK).filter_map(Value::as_object).any(crate::responses::is_item) {
            return Some(Format::Responses);
        }
    }
    if let Some(Value::Array(history)) = object.get("history") {
        // SWE-agent's messages have a `role` (and an `action` too); OpenHands' events do not,
        // and its 2024 evaluation output lists `[action, observation]` pairs.
        let openhands = match history.first() {
            Some(Value::Array(_)) => true,
            Some(Value::Object(event)) => is_openhands_event(event),
            _ => false,
        };
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

/// Whether an object is an OpenHands event: an action or an observation, not a message.
fn is_openhands_event(object: &Map<String, Value>) -> bool {
    !object.contains_key("role")
        && (object.get("action").is_some_and(Value::is_string)
            || object.get("observation").is_some_and(Value::is_string))
}

#[cfg(test)]
mod tests {
    use super::has_key;

    #[test]
    fn a_top_level_key_is_found_without_building_values() {
        assert!(has_key(br#"{"a":[1,{"b":2}],"payload":{}}"#, "payload"));
        assert!(has_key(br#"{"pay\u006Coad":1}"#, "payload"));
        assert!(!has_key(br#"{"a":{"payload":1}}"#, "payload"));
        assert!(!has_key(br#"[{"payload":1}]"#, "payload"));
        assert!(!has_key(br#"{"payload":1} x"#, "payload"));
        assert!(!has_key(br#"{"payload":"#, "payload"));
        assert!(!has_key(br#"{"pay":{"load":1}}"#, "payload"));
        assert!(has_key(br#"{"p\u0061yload":{}}"#, "payload"));
    }
}
