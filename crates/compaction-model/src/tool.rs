//! Tool specifications: what a provider is told about each tool, and what counters measure.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool as the model sees it: name, description and a JSON schema for its arguments.
///
/// Serializes as `{"name", "description", "parameters"}`, the shape of Haystack's `Tool.tool_spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolSpec {
    /// The tool's name, as tool calls refer to it.
    pub name: String,
    /// What the tool does, for the model.
    #[serde(default)]
    pub description: String,
    /// JSON schema of the arguments.
    #[serde(default = "empty_object")]
    pub parameters: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

impl ToolSpec {
    /// A tool spec.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        ToolSpec { name: name.into(), description: description.into(), parameters }
    }

    /// The spec as a JSON object, for printing.
    pub fn to_value(&self) -> Value {
        let mut spec = serde_json::Map::new();
        spec.insert("name".into(), Value::String(self.name.clone()));
        spec.insert("description".into(), Value::String(self.description.clone()));
        spec.insert("parameters".into(), self.parameters.clone());
        Value::Object(spec)
    }
}
