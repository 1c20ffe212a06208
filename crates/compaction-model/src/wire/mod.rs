//! Reading and writing messages in Haystack's `ChatMessage` dictionary shape.
//!
//! Reading accepts every shape `ChatMessage.from_dict` accepts; writing produces exactly what
//! `ChatMessage.to_dict` produces, key order included, so a conversation written by this crate
//! and one written by Haystack are the same JSON.
//!
//! Reading from bytes ([`messages_from_slice`], [`Message::from_slice`]) skips the
//! `serde_json::Value` tree for messages in the current shape: they are read straight from the
//! text ([`Message::read_prefix`], in `prefix.rs`), or deserialized straight into a [`Message`].
//! Anything those paths are not sure of (older shapes, flat parts, unknown fields, bad input) is
//! read again through [`Message::from_value`], so every way accepts, rejects and reports exactly
//! the same.
//!
//! One module per job: `read` (the `Value` path), `quick` (straight into a message), `write`
//! (the `to_dict` shape); where a value ends is compaction-json's quick scan.

use std::fmt;

use compaction_json::scan::{skip_value, whitespace as skip_whitespace};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::error::Error;
use crate::message::{
    FilePart, ImagePart, JsonObject, Message, Part, ReasoningPart, ResultPart, Role, TextPart, ToolCall,
    ToolCallResult, ToolResultContent,
};
use crate::object::SharedObject;
use crate::prefix::{pairs_in, pairs_of};
use crate::sniff;

mod quick;
mod read;
mod write;

use self::quick::*;
use self::read::*;
pub(crate) use self::read::{file_part, image_part, json_type};

/// Reads a conversation from a JSON array of messages.
///
/// # Errors
///
/// When the value is not an array, or a message in it is not one Haystack's
/// `ChatMessage.from_dict` reads; the error names the message's index.
pub fn messages_from_value(value: Value) -> Result<Vec<Message>, Error> {
    match value {
        Value::Array(items) => {
            items.into_iter().enumerate().map(|(index, item)| Message::from_value(item, index)).collect()
        }
        other => Err(Error::NotAnArray { found: json_type(&other) }),
    }
}

/// Reads a conversation from the JSON text of an array of messages: the same messages, or the
/// same error, as [`messages_from_value`] gives for the parsed text; text that is not JSON is
/// [`Error::Json`].
///
/// Messages are read one after another straight from the text, most by
/// [`Message::read_prefix`], whatever the text's spacing and escapes.
///
/// # Errors
///
/// When the text is not JSON (with serde_json's line and column), or is JSON that
/// [`messages_from_value`] rejects.
pub fn messages_from_slice(json: &[u8]) -> Result<Vec<Message>, Error> {
    match std::str::from_utf8(json).ok().and_then(read_array) {
        Some(messages) => Ok(messages),
        None => {
            let value: Value = crate::dialect::value_from_slice(json).map_err(json_error)?;
            messages_from_value(value)
        }
    }
}

/// The messages of the JSON array `json`, read one after another without a tree; `None` as soon
/// as one does not read, or the text is not an array of them, so the caller can read the whole
/// text as a tree, which words the error as ever. When every element reads on its own and the
/// array is well formed, the whole text parses, to the same messages.
fn read_array(json: &str) -> Option<Vec<Message>> {
    let bytes = json.as_bytes();
    let mut at = skip_whitespace(bytes, 0);
    if bytes.get(at) != Some(&b'[') {
        return None;
    }
    at = skip_whitespace(bytes, at + 1);
    let mut messages = Vec::new();
    if bytes.get(at) == Some(&b']') {
        at += 1;
    } else {
        loop {
            let (message, end) = match Message::read_prefix(json.get(at..)?) {
                Some(read) => (read.message, at + read.len),
                None => {
                    let end = skip_value(bytes, at)?;
                    (Message::from_slice(&bytes[at..end], messages.len()).ok()?, end)
                }
            };
            messages.push(message);
            at = skip_whitespace(bytes, end);
            match bytes.get(at)? {
                b',' => at = skip_whitespace(bytes, at + 1),
                b']' => {
                    at += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    (skip_whitespace(bytes, at) == bytes.len()).then_some(messages)
}

fn json_error(error: serde_json::Error) -> Error {
    Error::Json { source: std::sync::Arc::new(error) }
}

/// Writes a conversation as a JSON array of messages in Haystack's current shape.
pub fn messages_to_value(messages: &[Message]) -> Value {
    Value::Array(messages.iter().map(Message::to_value).collect())
}

impl Message {
    /// Reads one message; `index` is its position in the conversation, used in errors.
    ///
    /// # Errors
    ///
    /// When the value is not a message Haystack's `ChatMessage.from_dict` reads; the error
    /// names `index` and what is wrong.
    pub fn from_value(value: Value, index: usize) -> Result<Message, Error> {
        let Value::Object(mut data) = value else {
            return Err(Error::WrongType {
                index,
                field: "message".into(),
                expected: "an object",
                found: json_type(&value),
            });
        };
        let reader = Reader { index };
        if !data.contains_key("role") && !data.contains_key("_role") {
            return Err(Error::MissingRole { index, keys: key_list(&data) });
        }
        let (role_key, content_key, name_key, meta_key) = if data.contains_key("content") {
            ("role", "content", "name", "meta")
        } else if data.contains_key("_content") {
            ("_role", "_content", "_name", "_meta")
        } else {
            return Err(Error::MissingContent { index });
        };
        let role = match data.shift_remove(role_key) {
            Some(Value::String(role)) => Role::parse(&role).ok_or(Error::UnknownRole { index, role })?,
            Some(other) => {
                return Err(reader.wrong(role_key, "a string", &other));
            }
            None => return Err(Error::MissingRole { index, keys: key_list(&data) }),
        };
        let name = reader.opt_string(data.shift_remove(name_key), name_key)?;
        let meta = match data.shift_remove(meta_key) {
            None | Some(Value::Null) => JsonObject::new(),
            Some(Value::Object(meta)) => meta,
            Some(other) if is_falsy(&other) => JsonObject::new(),
            Some(other) => return Err(reader.wrong(meta_key, "an object", &other)),
        };
        let parts = match data.shift_remove(content_key) {
            Some(Value::String(text)) if content_key == "content" => {
                vec![Part::Text(TextPart::new(text))]
            }
            Some(Value::Array(items)) => items
                .into_iter()
                .enumerate()
                .map(|(i, item)| reader.part(item, &format!("{content_key}[{i}]")))
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(reader.wrong(content_key, "a list of parts or a string", &other));
            }
            None => return Err(Error::MissingContent { index }),
        };
        Ok(Message { role, parts, name, meta: meta.into() })
    }

    /// Reads one message from its JSON text: the same message, or the same error, as
    /// [`Message::from_value`] gives for the parsed text; text that is not JSON is
    /// [`Error::Json`]. `index` is its position in the conversation, used in errors.
    ///
    /// # Errors
    ///
    /// When the text is not JSON, or is JSON that [`Message::from_value`] rejects.
    pub fn from_slice(json: &[u8], index: usize) -> Result<Message, Error> {
        if let Some(read) = std::str::from_utf8(json).ok().and_then(Message::read_prefix) {
            if skip_whitespace(json, read.len) == json.len() {
                return Ok(read.message);
            }
        }
        if let Ok(Quick(message)) = serde_json::from_slice::<Quick>(json) {
            return Ok(message);
        }
        let value: Value = crate::dialect::value_from_slice(json).map_err(json_error)?;
        Message::from_value(value, index)
    }

    /// Whether `raw` is a spelling of what writing the message gives: the same bytes, or JSON
    /// spaced or escaped otherwise (as Python's `json.dump` writes it) that reads as the same
    /// value, keys in the same order and none twice. Such bytes can stand for the message in
    /// output as well as its own encoding can.
    pub fn is_spelled_by(&self, raw: &[u8]) -> bool {
        if encodes_as(self, raw) {
            return true;
        }
        let Ok(value) = crate::dialect::value_from_slice(raw) else { return false };
        // Parsing keeps the last of a key given twice, which a copy of the bytes would not.
        let Ok(canonical) = serde_json::to_vec(&value) else { return false };
        encodes_as(self, &canonical) && pairs_in(raw) == pairs_of(&value)
    }

    /// Writes the message as Haystack's `ChatMessage.to_dict` does.
    pub fn to_value(&self) -> Value {
        crate::dialect::to_value(self).unwrap_or(Value::Null)
    }
}

/// Reads one message as [`Message::from_value`] does. A message deserialized on its own, or as
/// an element of a `Vec<Message>` or of a struct of yours, does not know its position in the
/// conversation, so the error names none (the deserializer adds where it is, such as
/// serde_json's line and column); [`messages_from_slice`] and [`messages_from_value`] name the
/// message's index.
impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Message::from_value(value, 0).map_err(|error| {
            // Every error about a message opens with `message {index}: `; the index given here
            // is a stand-in, so it is left out rather than shown as a position.
            let text = error.to_string();
            let text = text.strip_prefix("message 0: ").unwrap_or(&text);
            serde::de::Error::custom(format_args!("a message: {text}"))
        })
    }
}

/// Whether serializing `value` gives exactly `raw`. Serializes into a comparison, not a buffer:
/// the first difference ends it.
pub(crate) fn encodes_as<T: Serialize + ?Sized>(value: &T, raw: &[u8]) -> bool {
    let mut rest = Compare(raw);
    serde_json::to_writer(&mut rest, value).is_ok() && rest.0.is_empty()
}

/// A writer that checks what it is given against the bytes it holds, consuming them.
struct Compare<'a>(&'a [u8]);

impl std::io::Write for Compare<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.0.strip_prefix(buf) {
            Some(rest) => {
                self.0 = rest;
                Ok(buf.len())
            }
            None => Err(std::io::ErrorKind::InvalidData.into()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
