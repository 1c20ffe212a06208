//! [`SharedObject`]: the JSON objects a message holds (its metadata, a part's unknown fields, a
//! call's `extra`), one pointer wide and shared by copies until one of them is changed.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::message::JsonObject;

/// A JSON object held by a message or one of its parts.
///
/// Most of these objects are empty (a message's metadata, the fields a part carried that this
/// crate does not know), and a long conversation holds hundreds of thousands of them: an empty
/// one here is a null pointer, where a [`JsonObject`] is 72 bytes even when empty. A non-empty
/// one is shared by every copy of it (a replay copies each message it compacts) until one copy
/// is changed, which then gets its own. (A call's arguments are held as their text instead: see
/// [`crate::Arguments`].)
///
/// It reads as a [`JsonObject`] (it derefs to one) and changes as one (`DerefMut` gives this
/// copy its own object first). [`SharedObject::into_map`] gives the object back.
#[derive(Clone, Default)]
pub struct SharedObject(Option<Arc<JsonObject>>);

impl SharedObject {
    /// An empty object; it holds no allocation.
    pub const fn new() -> Self {
        SharedObject(None)
    }

    /// The object, taken out: without a copy when no other copy shares it.
    pub fn into_map(self) -> JsonObject {
        match self.0 {
            None => JsonObject::new(),
            Some(shared) => Arc::try_unwrap(shared).unwrap_or_else(|shared| (*shared).clone()),
        }
    }
}

/// The empty object every empty [`SharedObject`] reads as.
fn empty() -> &'static JsonObject {
    static EMPTY: OnceLock<JsonObject> = OnceLock::new();
    EMPTY.get_or_init(JsonObject::new)
}

impl Deref for SharedObject {
    type Target = JsonObject;

    fn deref(&self) -> &JsonObject {
        match &self.0 {
            Some(shared) => shared,
            None => empty(),
        }
    }
}

impl DerefMut for SharedObject {
    fn deref_mut(&mut self) -> &mut JsonObject {
        Arc::make_mut(self.0.get_or_insert_with(Arc::default))
    }
}

impl From<JsonObject> for SharedObject {
    fn from(object: JsonObject) -> Self {
        if object.is_empty() {
            SharedObject(None)
        } else {
            SharedObject(Some(Arc::new(object)))
        }
    }
}

impl From<SharedObject> for JsonObject {
    fn from(object: SharedObject) -> Self {
        object.into_map()
    }
}

impl From<SharedObject> for Value {
    fn from(object: SharedObject) -> Self {
        Value::Object(object.into_map())
    }
}

impl FromIterator<(String, Value)> for SharedObject {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        JsonObject::from_iter(iter).into()
    }
}

impl<'a> IntoIterator for &'a SharedObject {
    type Item = (&'a String, &'a Value);
    type IntoIter = serde_json::map::Iter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl IntoIterator for SharedObject {
    type Item = (String, Value);
    type IntoIter = serde_json::map::IntoIter;

    fn into_iter(self) -> Self::IntoIter {
        self.into_map().into_iter()
    }
}

impl PartialEq for SharedObject {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl PartialEq<JsonObject> for SharedObject {
    fn eq(&self, other: &JsonObject) -> bool {
        **self == *other
    }
}

impl fmt::Debug for SharedObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl Serialize for SharedObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SharedObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        JsonObject::deserialize(deserializer).map(SharedObject::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> JsonObject {
        match value {
            Value::Object(object) => object,
            _ => unreachable!("the tests give objects"),
        }
    }

    #[test]
    fn an_empty_object_is_one_null_pointer() {
        assert_eq!(std::mem::size_of::<SharedObject>(), std::mem::size_of::<usize>());
        assert!(SharedObject::from(JsonObject::new()).0.is_none());
        assert!(SharedObject::new().is_empty());
    }

    #[test]
    fn copies_share_until_one_changes() {
        let first = SharedObject::from(object(json!({"path": "a.rs", "limit": 3})));
        let mut second = first.clone();
        assert!(Arc::ptr_eq(first.0.as_ref().unwrap(), second.0.as_ref().unwrap()));
        second.insert("limit".into(), json!(4));
        assert_eq!(first["limit"], json!(3));
        assert_eq!(second["limit"], json!(4));
        assert_eq!(first.into_map(), object(json!({"path": "a.rs", "limit": 3})));
    }

    #[test]
    fn it_reads_and_writes_as_the_object_it_holds() {
        let text = r#"{"b":1,"a":[true,null]}"#;
        let read: SharedObject = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::to_string(&read).unwrap(), text);
        assert_eq!(read, object(json!({"b": 1, "a": [true, null]})));
        let mut empty = SharedObject::new();
        empty.insert("k".into(), json!("v"));
        assert_eq!(format!("{empty:?}"), format!("{:?}", object(json!({"k": "v"}))));
    }
}
