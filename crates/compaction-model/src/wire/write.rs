//! Writing messages exactly as `ChatMessage.to_dict` writes them, key order included, with the
//! fields a part carried that this crate does not know.

use super::*;

/// A map serializer that also writes the unknown fields a part carried.
pub(super) fn end_with_unknown<M: SerializeMap>(mut map: M, unknown: &JsonObject) -> Result<M::Ok, M::Error> {
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
pub(super) struct Wrapped<'a, T>(&'static str, &'a T);

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
