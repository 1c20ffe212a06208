//! Haystack's JSON for a part: what every writer writes for a part it has no spelling for.

use serde::Serialize;
use serde_json::Value;

/// A part of a kind a writer has no spelling for, written as Haystack's JSON for it: kept as
/// data rather than left out. The model's parts serialize to JSON without fail.
pub(crate) fn haystack_form<T: Serialize + ?Sized>(part: &T) -> Value {
    compaction_model::to_value(part).unwrap_or_else(|e| Value::String(e.to_string()))
}
