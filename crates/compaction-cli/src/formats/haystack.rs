//! Haystack `ChatMessage.to_dict` JSON, the model's own shape.

use anyhow::{anyhow, Result};
use compaction_model::Message;
use serde_json::Value;

use super::overlay::Shape;
use super::{Decoded, Locator};

/// The keys of a Haystack message; anything else on it is kept when it is written back.
pub(crate) static SHAPE: Shape = Shape {
    known: &["role", "meta", "name", "content", "_role", "_meta", "_name", "_content"],
    nested: &[],
    json_text: &[],
    aliases: &[],
};

pub(crate) fn read(values: &[Value], locator: &Locator) -> Result<Decoded> {
    let mut decoded = Decoded::default();
    for (index, value) in values.iter().enumerate() {
        let message = Message::from_value(value.clone(), index).map_err(|error| {
            // The model's errors already say "message N"; a line number is what JSON Lines need.
            let at = locator.at(index);
            if at.ends_with(&format!("message {index}")) {
                anyhow!("{}: {error}", locator.whole())
            } else {
                anyhow!("{at}: {error}")
            }
        })?;
        decoded.extend(index, vec![message]);
    }
    Ok(decoded)
}
