//! Reading a message without a `Value` tree.
//!
//! The quick path takes only what it can read exactly as `Message::from_value` would: the
//! current shape, each key at most once, no unknown keys, parts wrapped with one key each
//! (`text`, `tool_call`, `tool_call_result` with a string result). Anything else is an error
//! here, which sends the message back to the `Value` path; the error itself is never shown.
//! Nested JSON (meta, arguments, extra) is read as a `Value`, as the other path reads it.

use super::*;

/// A message read the quick way.
pub(super) struct Quick(pub(super) Message);

/// Why the quick path gave up; only ever replaced by the other path's answer.
pub(super) fn give_up<E: de::Error>() -> E {
    E::custom("not in the quick path's shape")
}

/// A key of the quick path's objects, matched without allocating.
pub(super) struct KeyOf<const N: usize>(&'static [&'static str; N]);

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
pub(super) fn each_key<'de, A: MapAccess<'de>, const N: usize>(
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
pub(super) fn object<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Option<JsonObject>, A::Error> {
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

pub(super) struct QuickMessage;

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
                Ok(Quick(Message { role, parts, name, meta: meta.unwrap_or_default().into() }))
            }
            _ => Err(give_up()),
        }
    }
}

/// A message's `content`: a string, or a list of parts.
pub(super) struct QuickContent(Vec<Part>);

impl<'de> Deserialize<'de> for QuickContent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(QuickContentVisitor)
    }
}

pub(super) struct QuickContentVisitor;

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
pub(super) struct QuickPart(Part);

impl<'de> Deserialize<'de> for QuickPart {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(QuickPartVisitor)
    }
}

pub(super) struct QuickPartVisitor;

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

pub(super) struct QuickCall(ToolCall);

impl<'de> Deserialize<'de> for QuickCall {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(QuickCallVisitor)
    }
}

pub(super) struct QuickCallVisitor;

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
                arguments: arguments.into(),
                raw_arguments: None,
                id,
                extra: extra.map(SharedObject::from),
                unknown: SharedObject::new(),
            })),
            _ => Err(give_up()),
        }
    }
}

pub(super) struct QuickResult(ToolCallResult);

impl<'de> Deserialize<'de> for QuickResult {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(QuickResultVisitor)
    }
}

pub(super) struct QuickResultVisitor;

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
                origin: Box::new(origin),
                error,
                unknown: SharedObject::new(),
            })),
            _ => Err(give_up()),
        }
    }
}
