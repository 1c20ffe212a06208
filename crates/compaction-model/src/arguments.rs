//! [`Arguments`]: a tool call's arguments, a JSON object held as its compact JSON text, one
//! pointer wide and shared by copies.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::message::JsonObject;

/// A tool call's arguments: a JSON object, held as the compact JSON text serde_json writes for it
/// (members in order, no spaces, strings escaped as serde_json escapes them).
///
/// A long log holds a call every few hundred bytes, and a call's arguments are short: an object
/// parsed into a [`JsonObject`] costs several hundred bytes for a few dozen bytes of text, so the
/// text is what is kept, and the object is parsed from it when one is asked for
/// ([`Arguments::to_map`]). Writers and counters that need only the text take it as it is
/// ([`Arguments::as_json`]).
///
/// The text is always the one writing the object gives, whatever text it was read from: a key
/// given twice keeps its last value in the first one's place, spaces go, escapes are written as
/// serde_json writes them. So the text is a function of the object, and writing the arguments
/// gives the same bytes as writing the object they stand for.
///
/// Empty arguments (`{}`) hold no allocation. A clone shares the text with the original (a
/// call's arguments are also its result's `origin`), so the copy costs one pointer.
///
/// Two arguments are equal when their objects are ([`JsonObject`]'s equality, which does not
/// look at the order of members).
#[derive(Clone, Default)]
pub struct Arguments(Option<Arc<Box<str>>>);

impl Arguments {
    /// Empty arguments, `{}`; they hold no allocation.
    pub const fn new() -> Self {
        Arguments(None)
    }

    /// The arguments `text` stands for, when it is a JSON object (read as Python's `json.loads`
    /// reads it: see [`crate::value_from_slice`]); `None` when it is not one.
    pub fn from_json(text: &str) -> Option<Arguments> {
        match crate::value_from_slice(text.as_bytes()) {
            Ok(Value::Object(object)) => Some(Arguments::from(&object)),
            _ => None,
        }
    }

    /// The arguments whose compact JSON text is `text`, as serde_json writes the object (members
    /// in order, no spaces, strings escaped as serde_json escapes them), without parsing it: for
    /// a writer that writes that text straight from another form of the object (the Python
    /// package, from a `dict`) instead of building a [`JsonObject`] to write. The caller vouches
    /// for the text; it is checked in debug builds only. `{}` gives empty arguments.
    pub fn from_written_json(text: String) -> Arguments {
        debug_assert_eq!(
            crate::value_from_slice(text.as_bytes())
                .ok()
                .and_then(|value| serde_json::to_string(&value).ok()),
            Some(text.clone()),
            "not serde_json's text of an object"
        );
        if text == "{}" {
            return Arguments(None);
        }
        Arguments(Some(Arc::new(text.into_boxed_str())))
    }

    /// The arguments as compact JSON text: `{}` when empty.
    pub fn as_json(&self) -> &str {
        match &self.0 {
            Some(text) => text,
            None => "{}",
        }
    }

    /// Whether the arguments are `{}`.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The arguments as a JSON object, parsed from their text.
    pub fn to_map(&self) -> JsonObject {
        match &self.0 {
            None => JsonObject::new(),
            // The text was written from an object, so it reads back as that object.
            Some(text) => match crate::value_from_slice(text.as_bytes()) {
                Ok(Value::Object(object)) => object,
                _ => JsonObject::new(),
            },
        }
    }

    /// The arguments as a JSON object (see [`Arguments::to_map`]).
    pub fn into_map(self) -> JsonObject {
        self.to_map()
    }

    /// The value of the member `key`, parsed from the text; `None` when there is no such member.
    pub fn get(&self, key: &str) -> Option<Value> {
        if self.is_empty() {
            return None;
        }
        self.to_map().shift_remove(key)
    }

    /// Whether `self` and `other` share one text (a clone and its original do).
    pub fn ptr_eq(&self, other: &Arguments) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }
}

impl From<&JsonObject> for Arguments {
    fn from(object: &JsonObject) -> Self {
        if object.is_empty() {
            return Arguments(None);
        }
        // Writing a map with string keys cannot fail.
        let text = serde_json::to_string(object).unwrap_or_else(|_| "{}".into());
        Arguments(Some(Arc::new(text.into_boxed_str())))
    }
}

impl From<JsonObject> for Arguments {
    fn from(object: JsonObject) -> Self {
        Arguments::from(&object)
    }
}

impl From<Arguments> for JsonObject {
    fn from(arguments: Arguments) -> Self {
        arguments.to_map()
    }
}

impl From<Arguments> for Value {
    fn from(arguments: Arguments) -> Self {
        Value::Object(arguments.to_map())
    }
}

impl FromIterator<(String, Value)> for Arguments {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        JsonObject::from_iter(iter).into()
    }
}

impl PartialEq for Arguments {
    fn eq(&self, other: &Self) -> bool {
        // Equal texts are equal objects; different texts can still be (members in another order).
        self.ptr_eq(other) || self.as_json() == other.as_json() || self.to_map() == other.to_map()
    }
}

impl PartialEq<JsonObject> for Arguments {
    fn eq(&self, other: &JsonObject) -> bool {
        self.to_map() == *other
    }
}

impl fmt::Debug for Arguments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_map(), f)
    }
}

impl Serialize for Arguments {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_map().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Arguments {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        JsonObject::deserialize(deserializer).map(Arguments::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_arguments_are_one_null_pointer() {
        assert_eq!(std::mem::size_of::<Arguments>(), std::mem::size_of::<usize>());
        assert!(Arguments::from(JsonObject::new()).0.is_none());
        assert!(Arguments::from_json(" { } ").is_some_and(|a| a.is_empty()));
        assert_eq!(Arguments::new().as_json(), "{}");
    }

    #[test]
    fn copies_share_the_text() {
        let first = Arguments::from_json(r#"{"path":"a.rs","limit":3}"#).unwrap();
        let second = first.clone();
        assert!(first.ptr_eq(&second));
        assert!(std::ptr::eq(first.as_json(), second.as_json()));
    }

    #[test]
    fn written_text_is_held_as_it_is() {
        let text = r#"{"path":"a\"b.rs","n":[1,2.5,null,true],"o":{"k":"\u001f"}}"#;
        let written = Arguments::from_written_json(text.to_owned());
        assert_eq!(written.as_json(), text);
        assert_eq!(written, Arguments::from_json(text).unwrap());
        assert!(Arguments::from_written_json("{}".to_owned()).is_empty());
    }

    #[test]
    fn text_that_is_not_an_object_is_no_arguments() {
        for text in ["", "[1]", "\"x\"", "{\"a\":", "null", "{\"a\":1} x"] {
            assert!(Arguments::from_json(text).is_none(), "{text}");
        }
    }

    #[test]
    fn equality_is_the_objects() {
        let a = Arguments::from_json(r#"{"a":1,"b":[2]}"#).unwrap();
        let b = Arguments::from_json(r#"{"b":[2],"a":1}"#).unwrap();
        assert_eq!(a, b);
        assert_ne!(a.as_json(), b.as_json());
        assert_ne!(a, Arguments::from_json(r#"{"a":1.0,"b":[2]}"#).unwrap());
        assert_eq!(a, *json!({"b": [2], "a": 1}).as_object().unwrap());
        assert_eq!(a.get("b"), Some(json!([2])));
        assert_eq!(a.get("c"), None);
    }
}
