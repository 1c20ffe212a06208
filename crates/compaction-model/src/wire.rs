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

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::error::Error;
use crate::message::{
    FilePart, ImagePart, JsonObject, Message, Part, ReasoningPart, ResultPart, Role, TextPart, ToolCall,
    ToolCallResult, ToolResultContent,
};
use crate::prefix::{pairs_in, pairs_of};
use crate::sniff;

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
            let value: Value = serde_json::from_slice(json).map_err(json_error)?;
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

/// How deep [`skip_value`] follows nesting; serde_json refuses more than 128 levels, and an
/// element parsed alone sits one level higher than inside its array, so deep input goes the
/// whole-text way, where the limit is the same as ever.
const SCAN_DEPTH: usize = 100;

fn skip_whitespace(json: &[u8], mut at: usize) -> usize {
    while matches!(json.get(at), Some(b' ' | b'\n' | b'\t' | b'\r')) {
        at += 1;
    }
    at
}

/// The end of the value starting at `at`: a string, a container, or a scalar running up to the
/// next delimiter.
pub(crate) fn skip_value(json: &[u8], at: usize) -> Option<usize> {
    match *json.get(at)? {
        b'"' => skip_string(json, at + 1),
        b'[' | b'{' => {
            let mut depth = 0;
            let mut k = at;
            loop {
                match *json.get(k)? {
                    b'"' => k = skip_string(json, k + 1)?,
                    b'[' | b'{' => {
                        depth += 1;
                        if depth > SCAN_DEPTH {
                            return None;
                        }
                        k += 1;
                    }
                    b']' | b'}' => {
                        depth -= 1;
                        k += 1;
                        if depth == 0 {
                            return Some(k);
                        }
                    }
                    _ => k += 1,
                }
            }
        }
        _ => {
            let len = json[at..]
                .iter()
                .position(|b| matches!(b, b',' | b']' | b'}' | b' ' | b'\n' | b'\t' | b'\r'))
                .unwrap_or(json.len() - at);
            (len > 0).then_some(at + len)
        }
    }
}

/// The index after the closing quote of the string whose contents start at `at`.
pub(crate) fn skip_string(json: &[u8], mut at: usize) -> Option<usize> {
    loop {
        at += find_special(json.get(at..)?, false)?;
        if json[at] == b'"' {
            return Some(at + 1);
        }
        at += 2;
    }
}

/// The position of the first `"` or `\\` in `bytes` (or, with `control`, the first byte below
/// 0x20), looking at eight bytes at a time: strings are most of a transcript.
fn find_special(bytes: &[u8], control: bool) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A byte of `x` is flagged when it is zero, or below `ONES * n` for the third test. A
    // borrow can flag bytes after the first true hit, never before it, so the lowest flag is
    // exact.
    let below = |x: u64, n: u64| x.wrapping_sub(ONES * n) & !x;
    let mut at = 0;
    while let Some(word) = bytes.get(at..at + 8) {
        let mut eight = [0; 8];
        eight.copy_from_slice(word);
        let word = u64::from_le_bytes(eight);
        let mut hits = below(word ^ (ONES * u64::from(b'"')), 1) | below(word ^ (ONES * u64::from(b'\\')), 1);
        if control {
            hits |= below(word, 0x20);
        }
        let hits = hits & HIGH;
        if hits != 0 {
            return Some(at + (hits.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let special = |b: &u8| *b == b'"' || *b == b'\\' || (control && *b < 0x20);
    bytes[at..].iter().position(special).map(|k| at + k)
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
        Ok(Message { role, parts, name, meta })
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
        let value: Value = serde_json::from_slice(json).map_err(json_error)?;
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
        let Ok(value) = serde_json::from_slice::<Value>(raw) else { return false };
        // Parsing keeps the last of a key given twice, which a copy of the bytes would not.
        let Ok(canonical) = serde_json::to_vec(&value) else { return false };
        encodes_as(self, &canonical) && pairs_in(raw) == pairs_of(&value)
    }

    /// Writes the message as Haystack's `ChatMessage.to_dict` does.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
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

// ---- reading without a Value tree ----
//
// The quick path takes only what it can read exactly as `Message::from_value` would: the
// current shape, each key at most once, no unknown keys, parts wrapped with one key each
// (`text`, `tool_call`, `tool_call_result` with a string result). Anything else is an error
// here, which sends the message back to the `Value` path; the error itself is never shown.
// Nested JSON (meta, arguments, extra) is read as a `Value`, as the other path reads it.

/// A message read the quick way.
struct Quick(Message);

/// Why the quick path gave up; only ever replaced by the other path's answer.
fn give_up<E: de::Error>() -> E {
    E::custom("not in the quick path's shape")
}

/// A key of the quick path's objects, matched without allocating.
struct KeyOf<const N: usize>(&'static [&'static str; N]);

impl<'de, const N: usize> DeserializeSeed<'de> for KeyOf<N> {
    type Value = usize;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<const N: usize> Visitor<'_> for KeyOf<N> {
    type Value = usize;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a known key")
    }
    fn visit_str<E: de::Error>(self, key: &str) -> Result<usize, E> {
        self.0.iter().position(|k| *k == key).ok_or_else(give_up)
    }
}

/// Reads the keys of an object in `keys`, each at most once, handing each value to `read`.
fn each_key<'de, A: MapAccess<'de>, const N: usize>(
    map: &mut A,
    keys: &'static [&'static str; N],
    mut read: impl FnMut(usize, &mut A) -> Result<(), A::Error>,
) -> Result<(), A::Error> {
    let mut seen = [false; N];
    while let Some(key) = map.next_key_seed(KeyOf(keys))? {
        if std::mem::replace(&mut seen[key], true) {
            return Err(give_up());
        }
        read(key, map)?;
    }
    Ok(())
}

/// A JSON object, read as a `Value` so it is exactly what the `Value` path holds.
fn object<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Option<JsonObject>, A::Error> {
    match map.next_value::<Value>()? {
        Value::Object(object) => Ok(Some(object)),
        Value::Null => Ok(None),
        _ => Err(give_up()),
    }
}

impl<'de> Deserialize<'de> for Quick {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(QuickMessage)
    }
}

struct QuickMessage;

impl<'de> Visitor<'de> for QuickMessage {
    type Value = Quick;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Quick, A::Error> {
        let (mut role, mut meta, mut name, mut parts) = (None, None, None, None);
        each_key(&mut map, &["role", "meta", "name", "content"], |key, map| {
            match key {
                0 => role = Some(Role::parse(&map.next_value::<String>()?).ok_or_else(give_up)?),
                1 => meta = object(map)?,
                2 => name = map.next_value::<Option<String>>()?,
                _ => parts = Some(map.next_value::<QuickContent>()?.0),
            }
            Ok(())
        })?;
        match (role, parts) {
            (Some(role), Some(parts)) => {
                Ok(Quick(Message { role, parts, name, meta: meta.unwrap_or_default() }))
            }
            _ => Err(give_up()),
        }
    }
}

/// A message's `content`: a string, or a list of parts.
struct QuickContent(Vec<Part>);

impl<'de> Deserialize<'de> for QuickContent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(QuickContentVisitor)
    }
}

struct QuickContentVisitor;

impl<'de> Visitor<'de> for QuickContentVisitor {
    type Value = QuickContent;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("content")
    }
    fn visit_str<E: de::Error>(self, text: &str) -> Result<QuickContent, E> {
        Ok(QuickContent(vec![Part::Text(TextPart::new(text))]))
    }
    fn visit_string<E: de::Error>(self, text: String) -> Result<QuickContent, E> {
        Ok(QuickContent(vec![Part::Text(TextPart::new(text))]))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<QuickContent, A::Error> {
        let mut parts = Vec::with_capacity(seq.size_hint().unwrap_or(1));
        while let Some(QuickPart(part)) = seq.next_element()? {
            parts.push(part);
        }
        parts.shrink_to_fit();
        Ok(QuickContent(parts))
    }
}

/// A wrapped part with one key.
struct QuickPart(Part);

impl<'de> Deserialize<'de> for QuickPart {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(QuickPartVisitor)
    }
}

struct QuickPartVisitor;

impl<'de> Visitor<'de> for QuickPartVisitor {
    type Value = QuickPart;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a part")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<QuickPart, A::Error> {
        let key =
            map.next_key_seed(KeyOf(&["text", "tool_call", "tool_call_result"]))?.ok_or_else(give_up)?;
        let part = match key {
            0 => Part::Text(TextPart::new(map.next_value::<String>()?)),
            1 => Part::ToolCall(map.next_value::<QuickCall>()?.0),
            _ => Part::ToolCallResult(map.next_value::<QuickResult>()?.0),
        };
        // A second key makes it a part of another kind, or one with unknown fields.
        if map.next_key::<de::IgnoredAny>()?.is_some() {
            return Err(give_up());
        }
        Ok(QuickPart(part))
    }
}

struct QuickCall(ToolCall);

impl<'de> Deserialize<'de> for QuickCall {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(QuickCallVisitor)
    }
}

struct QuickCallVisitor;

impl<'de> Visitor<'de> for QuickCallVisitor {
    type Value = QuickCall;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tool call")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<QuickCall, A::Error> {
        let (mut tool_name, mut arguments, mut id, mut extra) = (None, None, None, None);
        each_key(&mut map, &["tool_name", "arguments", "id", "extra"], |key, map| {
            match key {
                0 => tool_name = Some(map.next_value::<String>()?),
                1 => arguments = Some(object(map)?.ok_or_else(give_up)?),
                2 => id = map.next_value::<Option<String>>()?,
                _ => extra = object(map)?,
            }
            Ok(())
        })?;
        match (tool_name, arguments) {
            (Some(tool_name), Some(arguments)) => Ok(QuickCall(ToolCall {
                tool_name,
                arguments,
                raw_arguments: None,
                id,
                extra,
                unknown: JsonObject::new(),
            })),
            _ => Err(give_up()),
        }
    }
}

struct QuickResult(ToolCallResult);

impl<'de> Deserialize<'de> for QuickResult {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(QuickResultVisitor)
    }
}

struct QuickResultVisitor;

impl<'de> Visitor<'de> for QuickResultVisitor {
    type Value = QuickResult;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tool result")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<QuickResult, A::Error> {
        let (mut result, mut origin, mut error) = (None, None, None);
        each_key(&mut map, &["result", "origin", "error"], |key, map| {
            match key {
                0 => result = Some(map.next_value::<String>()?),
                1 => origin = Some(map.next_value::<QuickCall>()?.0),
                _ => error = Some(map.next_value::<bool>()?),
            }
            Ok(())
        })?;
        match (result, origin, error) {
            (Some(result), Some(origin), Some(error)) => Ok(QuickResult(ToolCallResult {
                result: ToolResultContent::Text(result.into()),
                origin,
                error,
                unknown: JsonObject::new(),
            })),
            _ => Err(give_up()),
        }
    }
}

struct Reader {
    index: usize,
}

/// An image part from its object, as [`Message::from_value`] reads one (checked, its MIME type
/// guessed when missing); `None` when that reading fails.
pub(crate) fn image_part(data: JsonObject) -> Option<ImagePart> {
    Reader { index: 0 }.image(data, "image").ok()
}

/// A file part from its object, as [`Message::from_value`] reads one; `None` when that fails.
pub(crate) fn file_part(data: JsonObject) -> Option<FilePart> {
    Reader { index: 0 }.file(data, "file").ok()
}

impl Reader {
    fn wrong(&self, field: &str, expected: &'static str, found: &Value) -> Error {
        Error::WrongType { index: self.index, field: field.into(), expected, found: json_type(found) }
    }

    fn missing(&self, field: String) -> Error {
        Error::MissingField { index: self.index, field }
    }

    fn string(&self, data: &mut JsonObject, key: &str, path: &str) -> Result<String, Error> {
        match data.shift_remove(key) {
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(self.wrong(&format!("{path}.{key}"), "a string", &other)),
            None => Err(self.missing(format!("{path}.{key}"))),
        }
    }

    fn opt_string(&self, value: Option<Value>, path: &str) -> Result<Option<String>, Error> {
        match value {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.wrong(path, "a string or null", &other)),
        }
    }

    fn object(&self, value: Option<Value>, path: &str) -> Result<JsonObject, Error> {
        match value {
            None | Some(Value::Null) => Ok(JsonObject::new()),
            Some(Value::Object(o)) => Ok(o),
            Some(other) => Err(self.wrong(path, "an object", &other)),
        }
    }

    fn flag(&self, value: Option<Value>, path: &str, default: bool) -> Result<bool, Error> {
        match value {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(b),
            Some(other) => Err(self.wrong(path, "true or false", &other)),
        }
    }

    fn as_object(&self, value: Value, path: &str) -> Result<JsonObject, Error> {
        match value {
            Value::Object(o) => Ok(o),
            other => Err(self.wrong(path, "an object", &other)),
        }
    }

    /// One content part, wrapped (`{"tool_call": {...}}`) or flat (`{"tool_name": ...}`),
    /// checked in the order Haystack checks them.
    fn part(&self, value: Value, path: &str) -> Result<Part, Error> {
        let mut data = self.as_object(value, path)?;
        if data.contains_key("text") {
            return self.text(data, path).map(Part::Text);
        }
        for key in ["tool_call", "tool_call_result", "image", "reasoning", "file"] {
            if let Some(inner) = data.shift_remove(key) {
                let inner_path = format!("{path}.{key}");
                let inner = self.as_object(inner, &inner_path)?;
                return match key {
                    "tool_call" => self.tool_call(inner, &inner_path).map(Part::ToolCall),
                    "tool_call_result" => self.tool_result(inner, &inner_path).map(Part::ToolCallResult),
                    "image" => self.image(inner, &inner_path).map(Part::Image),
                    "reasoning" => self.reasoning(inner, &inner_path).map(Part::Reasoning),
                    _ => self.file(inner, &inner_path).map(Part::File),
                };
            }
        }
        if data.contains_key("tool_name") && data.contains_key("arguments") {
            return self.tool_call(data, path).map(Part::ToolCall);
        }
        if data.contains_key("result") && data.contains_key("origin") {
            return self.tool_result(data, path).map(Part::ToolCallResult);
        }
        if data.contains_key("reasoning_text") {
            return self.reasoning(data, path).map(Part::Reasoning);
        }
        if data.contains_key("base64_image") {
            return self.image(data, path).map(Part::Image);
        }
        if data.contains_key("base64_data") {
            return self.file(data, path).map(Part::File);
        }
        Err(Error::UnknownPart { index: self.index, field: path.into(), keys: key_list(&data) })
    }

    fn text(&self, mut data: JsonObject, path: &str) -> Result<TextPart, Error> {
        let text = self.string(&mut data, "text", path)?;
        Ok(TextPart { text: text.into(), unknown: data })
    }

    fn tool_call(&self, mut data: JsonObject, path: &str) -> Result<ToolCall, Error> {
        let tool_name = self.string(&mut data, "tool_name", path)?;
        // Arguments that were not a JSON object when they arrived are written as their text.
        let (arguments, raw_arguments) = match data.shift_remove("arguments") {
            Some(Value::Object(o)) => (o, None),
            Some(Value::String(raw)) => (JsonObject::new(), Some(raw)),
            Some(other) => {
                return Err(self.wrong(&format!("{path}.arguments"), "an object or a string", &other))
            }
            None => return Err(self.missing(format!("{path}.arguments"))),
        };
        let id = self.opt_string(data.shift_remove("id"), &format!("{path}.id"))?;
        let extra = match data.shift_remove("extra") {
            None | Some(Value::Null) => None,
            Some(Value::Object(o)) => Some(o),
            Some(other) => return Err(self.wrong(&format!("{path}.extra"), "an object or null", &other)),
        };
        Ok(ToolCall { tool_name, arguments, raw_arguments, id, extra, unknown: data })
    }

    fn tool_result(&self, mut data: JsonObject, path: &str) -> Result<ToolCallResult, Error> {
        for key in ["result", "origin", "error"] {
            if !data.contains_key(key) {
                return Err(self.missing(format!("{path}.{key}")));
            }
        }
        let result_path = format!("{path}.result");
        let result = match data.shift_remove("result") {
            Some(Value::String(s)) => ToolResultContent::Text(s.into()),
            Some(Value::Array(items)) => ToolResultContent::Parts(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| self.result_part(item, &format!("{result_path}[{i}]")))
                    .collect::<Result<_, _>>()?,
            ),
            Some(other) => {
                return Err(Error::BadToolResult {
                    index: self.index,
                    field: result_path,
                    found: json_type(&other).into(),
                })
            }
            None => return Err(self.missing(result_path)),
        };
        let origin_path = format!("{path}.origin");
        let origin = data.shift_remove("origin").unwrap_or(Value::Null);
        let origin = self.tool_call(self.as_object(origin, &origin_path)?, &origin_path)?;
        let error = self.flag(data.shift_remove("error"), &format!("{path}.error"), false)?;
        Ok(ToolCallResult { result, origin, error, unknown: data })
    }

    fn result_part(&self, value: Value, path: &str) -> Result<ResultPart, Error> {
        match self.part(value, path)? {
            Part::Text(t) => Ok(ResultPart::Text(t)),
            Part::Image(i) => Ok(ResultPart::Image(i)),
            Part::File(f) => Ok(ResultPart::File(f)),
            other => Err(Error::BadToolResult {
                index: self.index,
                field: path.into(),
                found: format!("a {} part", other.kind()),
            }),
        }
    }

    fn reasoning(&self, mut data: JsonObject, path: &str) -> Result<ReasoningPart, Error> {
        let reasoning_text = self.string(&mut data, "reasoning_text", path)?;
        let extra = self.object(data.shift_remove("extra"), &format!("{path}.extra"))?;
        Ok(ReasoningPart { reasoning_text, extra, unknown: data })
    }

    fn image(&self, mut data: JsonObject, path: &str) -> Result<ImagePart, Error> {
        let base64_image = self.string(&mut data, "base64_image", path)?;
        let mut mime_type = self.opt_string(data.shift_remove("mime_type"), &format!("{path}.mime_type"))?;
        let detail = self.opt_string(data.shift_remove("detail"), &format!("{path}.detail"))?;
        let meta = self.object(data.shift_remove("meta"), &format!("{path}.meta"))?;
        let validation = self.flag(data.shift_remove("validation"), &format!("{path}.validation"), true)?;
        if validation {
            let bytes = self.decode(&base64_image, path)?;
            if mime_type.as_deref().is_none_or(str::is_empty) {
                if let Some(guess) = sniff::guess_mime(&bytes) {
                    mime_type = Some(guess.to_owned());
                }
            }
            if let Some(mime) = mime_type.as_deref().filter(|m| !m.is_empty()) {
                if !sniff::is_image_mime(mime) {
                    return Err(Error::InvalidMedia {
                        index: self.index,
                        field: path.into(),
                        reason: format!("{mime} is not a valid image MIME type"),
                    });
                }
            }
        }
        Ok(ImagePart { base64_image, mime_type, detail, meta, validation, unknown: data })
    }

    fn file(&self, mut data: JsonObject, path: &str) -> Result<FilePart, Error> {
        let base64_data = self.string(&mut data, "base64_data", path)?;
        let mut mime_type = self.opt_string(data.shift_remove("mime_type"), &format!("{path}.mime_type"))?;
        let filename = self.opt_string(data.shift_remove("filename"), &format!("{path}.filename"))?;
        let extra = self.object(data.shift_remove("extra"), &format!("{path}.extra"))?;
        let validation = self.flag(data.shift_remove("validation"), &format!("{path}.validation"), true)?;
        if validation {
            let bytes = self.decode(&base64_data, path)?;
            if mime_type.as_deref().is_none_or(str::is_empty) {
                if let Some(guess) = sniff::guess_mime(&bytes) {
                    mime_type = Some(guess.to_owned());
                }
            }
        }
        Ok(FilePart { base64_data, mime_type, filename, extra, validation, unknown: data })
    }

    fn decode(&self, base64: &str, path: &str) -> Result<Vec<u8>, Error> {
        sniff::decode_base64_strict(base64).map_err(|error| Error::InvalidMedia {
            index: self.index,
            field: path.into(),
            reason: format!("the base64 string is not valid ({error})"),
        })
    }
}

/// Python's truthiness for the values `data.get("meta") or {}` treats as absent.
fn is_falsy(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
    }
}

/// The JSON type of a value, for error messages.
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The keys of an object for an error line: the first few, each cut short, and how many more.
fn key_list(data: &Map<String, Value>) -> String {
    const SHOWN: usize = 12;
    if data.is_empty() {
        return "none".into();
    }
    let mut list = data.keys().take(SHOWN).map(|key| crate::error::cut(key)).collect::<Vec<_>>().join(", ");
    if data.len() > SHOWN {
        list.push_str(&format!(" and {} more", data.len() - SHOWN));
    }
    list
}

// ---- writing ----

/// A map serializer that also writes the unknown fields a part carried.
fn end_with_unknown<M: SerializeMap>(mut map: M, unknown: &JsonObject) -> Result<M::Ok, M::Error> {
    for (key, value) in unknown {
        map.serialize_entry(key, value)?;
    }
    map.end()
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("role", self.role.as_str())?;
        map.serialize_entry("meta", &self.meta)?;
        map.serialize_entry("name", &self.name)?;
        map.serialize_entry("content", &self.parts)?;
        map.end()
    }
}

/// Serializes a value under a single wrapping key: `{"key": value}`.
struct Wrapped<'a, T>(&'static str, &'a T);

impl<T: Serialize> Serialize for Wrapped<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(self.0, self.1)?;
        map.end()
    }
}

impl Serialize for Part {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Part::Text(t) => t.serialize(serializer),
            Part::ToolCall(c) => Wrapped("tool_call", c).serialize(serializer),
            Part::ToolCallResult(r) => Wrapped("tool_call_result", r).serialize(serializer),
            Part::Reasoning(r) => Wrapped("reasoning", r).serialize(serializer),
            Part::Image(i) => Wrapped("image", i).serialize(serializer),
            Part::File(f) => Wrapped("file", f).serialize(serializer),
        }
    }
}

impl Serialize for ResultPart {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ResultPart::Text(t) => t.serialize(serializer),
            ResultPart::Image(i) => Wrapped("image", i).serialize(serializer),
            ResultPart::File(f) => Wrapped("file", f).serialize(serializer),
        }
    }
}

impl Serialize for TextPart {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1 + self.unknown.len()))?;
        map.serialize_entry("text", &self.text)?;
        end_with_unknown(map, &self.unknown)
    }
}

impl Serialize for ToolCall {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(4 + self.unknown.len()))?;
        map.serialize_entry("tool_name", &self.tool_name)?;
        match &self.raw_arguments {
            Some(raw) => map.serialize_entry("arguments", raw)?,
            None => map.serialize_entry("arguments", &self.arguments)?,
        }
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("extra", &self.extra)?;
        end_with_unknown(map, &self.unknown)
    }
}

impl Serialize for ToolResultContent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolResultContent::Text(text) => serializer.serialize_str(text),
            ToolResultContent::Parts(parts) => {
                let mut seq = serializer.serialize_seq(Some(parts.len()))?;
                for part in parts {
                    seq.serialize_element(part)?;
                }
                seq.end()
            }
        }
    }
}

impl Serialize for ToolCallResult {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3 + self.unknown.len()))?;
        map.serialize_entry("result", &self.result)?;
        map.serialize_entry("origin", &self.origin)?;
        map.serialize_entry("error", &self.error)?;
        end_with_unknown(map, &self.unknown)
    }
}

impl Serialize for ReasoningPart {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2 + self.unknown.len()))?;
        map.serialize_entry("reasoning_text", &self.reasoning_text)?;
        map.serialize_entry("extra", &self.extra)?;
        end_with_unknown(map, &self.unknown)
    }
}

impl Serialize for ImagePart {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(5 + self.unknown.len()))?;
        map.serialize_entry("base64_image", &self.base64_image)?;
        map.serialize_entry("mime_type", &self.mime_type)?;
        map.serialize_entry("detail", &self.detail)?;
        map.serialize_entry("meta", &self.meta)?;
        map.serialize_entry("validation", &self.validation)?;
        end_with_unknown(map, &self.unknown)
    }
}

impl Serialize for FilePart {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(5 + self.unknown.len()))?;
        map.serialize_entry("base64_data", &self.base64_data)?;
        map.serialize_entry("mime_type", &self.mime_type)?;
        map.serialize_entry("filename", &self.filename)?;
        map.serialize_entry("extra", &self.extra)?;
        map.serialize_entry("validation", &self.validation)?;
        end_with_unknown(map, &self.unknown)
    }
}
