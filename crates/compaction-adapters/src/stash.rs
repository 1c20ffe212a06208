//! Where a framework's fields that have no place in our model are kept: a *stash*, one JSON
//! object under the adapter's key in a part's `unknown` map or a message's `meta`.
//!
//! Converting from a framework never loses anything: whatever our model has no field for goes
//! into the stash, and converting back reads it out again. The stash is plain JSON, so it
//! survives the Haystack wire format and compaction (which keeps `meta` and parts' `unknown`).

use compaction_model::JsonObject;
use serde_json::Value;

/// The stash under `key` in `map`, if there is one and it is an object.
pub(crate) fn get<'a>(map: &'a JsonObject, key: &str) -> Option<&'a JsonObject> {
    map.get(key).and_then(Value::as_object)
}

/// The stash under `key` in `map`, owned (empty when there is none).
pub(crate) fn cloned(map: &JsonObject, key: &str) -> JsonObject {
    get(map, key).cloned().unwrap_or_default()
}

/// Puts `stash` under `key` in `map`, unless it is empty.
pub(crate) fn put(map: &mut JsonObject, key: &str, stash: JsonObject) {
    if !stash.is_empty() {
        map.insert(key.to_owned(), Value::Object(stash));
    }
}

/// A one-entry JSON object.
pub(crate) fn object(key: &str, value: impl Into<Value>) -> JsonObject {
    let mut map = JsonObject::new();
    map.insert(key.to_owned(), value.into());
    map
}

/// The string under `key`, removed from `map`, when it is a string.
pub(crate) fn take_string(map: &mut JsonObject, key: &str) -> Option<String> {
    match map.remove(key) {
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            // Not a string after all: put it back, so it is stashed with the rest.
            map.insert(key.to_owned(), other);
            None
        }
        None => None,
    }
}

/// The string of a stash entry.
pub(crate) fn str_of<'a>(stash: Option<&'a JsonObject>, key: &str) -> Option<&'a str> {
    stash.and_then(|s| s.get(key)).and_then(Value::as_str)
}
