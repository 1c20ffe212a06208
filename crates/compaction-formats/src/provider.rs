//! Items a provider sent that the model has no part for, kept in a text part as they were read.

use compaction_model::{JsonObject, Part, TextPart};
use serde_json::{Map, Value};

/// The key, in a text part's `unknown` fields (or a reasoning part's `extra`), holding an item a
/// provider sent that the model has no part for: `{"format": "anthropic" | "responses", "item":
/// <the item as read>}`. The part's text is what the item is counted as (a compaction's summary,
/// else the item's JSON); writers of the item's own format write the item back as it was.
pub const PROVIDER_ITEM: &str = "provider_item";

/// The marker value kept under [`PROVIDER_ITEM`].
pub(crate) fn provider_marker(format: &str, item: Value) -> Value {
    let mut marker = Map::new();
    marker.insert("format".into(), Value::String(format.to_owned()));
    marker.insert("item".into(), item);
    Value::Object(marker)
}

/// A text part standing for an opaque provider item.
pub(crate) fn opaque_part(format: &str, text: String, item: Value) -> Part {
    let mut unknown = JsonObject::new();
    unknown.insert(PROVIDER_ITEM.into(), provider_marker(format, item));
    Part::Text(TextPart { text: text.into(), unknown: unknown.into() })
}

/// The provider item a part stands for, with the format it came from, if it stands for one.
pub fn provider_item(part: &Part) -> Option<(&str, &Value)> {
    let marker = match part {
        Part::Text(text) => text.unknown.get(PROVIDER_ITEM)?,
        Part::Reasoning(reasoning) => reasoning.extra.get(PROVIDER_ITEM)?,
        _ => return None,
    };
    Some((marker.get("format")?.as_str()?, marker.get("item")?))
}
