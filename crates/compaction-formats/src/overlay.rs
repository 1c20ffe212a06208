//! Writing a changed message over its original JSON, so the fields the model does not know survive.
//!
//! A message read from a provider format carries fields no [`Message`](compaction_model::Message)
//! holds (`cache_control`, usage, timestamps, SWE-agent's `thought`). When a command changes the
//! message, its fresh encoding is laid over the original: known fields take the new value, unknown
//! ones keep theirs, key order stays the original's.

use serde_json::{Map, Value};

/// Which keys of one JSON object the encoder owns, and where to recurse.
#[derive(Debug)]
pub(crate) struct Shape {
    /// Keys the encoder writes when they apply; an original key among them that the fresh
    /// encoding lacks was removed on purpose.
    pub known: &'static [&'static str],
    /// Keys whose values are laid over the original's too (arrays element by element), rather
    /// than replaced: content blocks, tool calls.
    pub nested: &'static [(&'static str, &'static Shape)],
    /// Keys holding JSON text (tool-call arguments): the original text is kept when it means the
    /// same value, so spacing survives.
    pub json_text: &'static [&'static str],
    /// `(key, original, fresh)`: the original value stands for the fresh one (`developer` is read
    /// as `system`).
    pub aliases: &'static [(&'static str, &'static str, &'static str)],
}

/// `fresh` laid over `original` following `shape`.
pub(crate) fn overlay(original: &Value, fresh: Value, shape: &Shape) -> Value {
    let Value::Object(original) = original else {
        return fresh;
    };
    let mut fresh = match fresh {
        Value::Object(fresh) => fresh,
        other => return other,
    };
    if let (Some(a), Some(b)) = (original.get("type"), fresh.get("type")) {
        if a != b {
            return Value::Object(fresh);
        }
    }
    let mut out = Map::new();
    for (key, old) in original {
        match fresh.shift_remove(key) {
            Some(new) => {
                let value = merge_value(key, old, new, shape);
                out.insert(key.clone(), value);
            }
            None if shape.known.contains(&key.as_str()) => {}
            None => {
                out.insert(key.clone(), old.clone());
            }
        }
    }
    out.extend(fresh);
    Value::Object(out)
}

fn merge_value(key: &str, old: &Value, new: Value, shape: &Shape) -> Value {
    if let Some((_, inner)) = shape.nested.iter().find(|(k, _)| *k == key) {
        return match (old, new) {
            (Value::Array(olds), Value::Array(news)) if olds.len() == news.len() => {
                Value::Array(olds.iter().zip(news).map(|(o, n)| overlay(o, n, inner)).collect())
            }
            (old @ Value::Object(_), new @ Value::Object(_)) => overlay(old, new, inner),
            (_, new) => new,
        };
    }
    if shape.json_text.contains(&key) {
        if let (Value::String(a), Value::String(b)) = (old, &new) {
            if a != b && same_json(a, b) {
                return old.clone();
            }
        }
    }
    if let (Value::String(a), Value::String(b)) = (old, &new) {
        if shape.aliases.iter().any(|(k, o, f)| *k == key && a == o && b == f) {
            return old.clone();
        }
    }
    new
}

fn same_json(a: &str, b: &str) -> bool {
    match (compaction_model::value_from_slice(a.as_bytes()), compaction_model::value_from_slice(b.as_bytes()))
    {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
