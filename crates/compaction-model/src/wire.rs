//! Reading and writing messages in Haystack's `ChatMessage` dictionary shape.
//!
//! Reading accepts every shape `ChatMessage.from_dict` accepts; writing produces exactly what
//! `ChatMessage.to_dict` produces, key order included, so a conversation written by this crate
//! and one written by Haystack are the same JSON.

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use crate::error::Error;
use crate::message::{
    FilePart, ImagePart, JsonObject, Message, Part, ReasoningPart, ResultPart, Role, TextPart, ToolCall,
    ToolCallResult, ToolResultContent,
};
use crate::sniff;

/// Reads a conversation from a JSON array of messages.
pub fn messages_from_value(value: Value) -> Result<Vec<Message>, Error> {
    match value {
        Value::Array(items) => {
            items.into_iter().enumerate().map(|(index, item)| Message::from_value(item, index)).collect()
        }
        other => Err(Error::NotAnArray { found: json_type(&other) }),
    }
}

/// Writes a conversation as a JSON array of messages in Haystack's current shape.
pub fn messages_to_value(messages: &[Message]) -> Value {
    Value::Array(messages.iter().map(Message::to_value).collect())
}

impl Message {
    /// Reads one message; `index` is its position in the conversation, used in errors.
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

    /// Writes the message as Haystack's `ChatMessage.to_dict` does.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl<'de> serde::Deserialize<'de> for Message {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Message::from_value(value, 0).map_err(serde::de::Error::custom)
    }
}

struct Reader {
    index: usize,
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
        Ok(TextPart { text, unknown: data })
    }

    fn tool_call(&self, mut data: JsonObject, path: &str) -> Result<ToolCall, Error> {
        let tool_name = self.string(&mut data, "tool_name", path)?;
        let arguments = match data.shift_remove("arguments") {
            Some(Value::Object(o)) => o,
            Some(other) => return Err(self.wrong(&format!("{path}.arguments"), "an object", &other)),
            None => return Err(self.missing(format!("{path}.arguments"))),
        };
        let id = self.opt_string(data.shift_remove("id"), &format!("{path}.id"))?;
        let extra = match data.shift_remove("extra") {
            None | Some(Value::Null) => None,
            Some(Value::Object(o)) => Some(o),
            Some(other) => return Err(self.wrong(&format!("{path}.extra"), "an object or null", &other)),
        };
        Ok(ToolCall { tool_name, arguments, id, extra, unknown: data })
    }

    fn tool_result(&self, mut data: JsonObject, path: &str) -> Result<ToolCallResult, Error> {
        for key in ["result", "origin", "error"] {
            if !data.contains_key(key) {
                return Err(self.missing(format!("{path}.{key}")));
            }
        }
        let result_path = format!("{path}.result");
        let result = match data.shift_remove("result") {
            Some(Value::String(s)) => ToolResultContent::Text(s),
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
                found: format!("a {} part", part_kind(&other)),
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

fn part_kind(part: &Part) -> &'static str {
    match part {
        Part::Text(_) => "text",
        Part::ToolCall(_) => "tool_call",
        Part::ToolCallResult(_) => "tool_call_result",
        Part::Reasoning(_) => "reasoning",
        Part::Image(_) => "image",
        Part::File(_) => "file",
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

fn key_list(data: &Map<String, Value>) -> String {
    if data.is_empty() {
        return "none".into();
    }
    data.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
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
        map.serialize_entry("arguments", &self.arguments)?;
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
