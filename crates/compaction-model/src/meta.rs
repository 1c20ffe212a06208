//! The metadata markers compaction and offloading leave on the messages they rewrite.

use serde_json::{Map, Value};

use crate::message::JsonObject;

/// Meta key on a message a compactor rewrote; its value is a [`CompactionMarker`].
pub const CONTEXT_COMPACTION: &str = "context_compaction";

/// Meta key on a tool-result message whose content was moved to a store; its value is the
/// list of store references written.
pub const TOOL_RESULT_OFFLOADED: &str = "tool_result_offloaded";

/// Strategy name recorded by the tool-result pruning compactor.
pub const STRATEGY_TOOL_RESULT_PRUNING: &str = "tool_result_pruning";

/// Strategy name recorded by the tool-result offloading compactor.
pub const STRATEGY_TOOL_RESULT_OFFLOADING: &str = "tool_result_offloading";

/// Strategy recorded on the omission note the sliding-window compactor leaves where it removed
/// messages: `context_compaction: {"strategy": "sliding_window", "removed_messages": N,
/// "kept_messages": K}`.
pub const STRATEGY_SLIDING_WINDOW: &str = "sliding_window";

/// Strategy recorded on a summary the summarization compactor wrote in place of the messages
/// it replaced: `context_compaction: {"strategy": "summarization", "summarized_messages": N}`.
pub const STRATEGY_SUMMARIZATION: &str = "summarization";

/// Strategy recorded on an assistant message whose tool-call arguments `clear_tool_inputs`
/// replaced with `{}`.
///
/// The message's meta gets `context_compaction: {"strategy": "tool_input_clearing",
/// "original_tokens": N, "cleared_call_ids": [...]}`: `N` is the message's count before its
/// first clearing, and the list holds the ids of every call cleared so far (`null` for a call
/// without an id).
pub const STRATEGY_TOOL_INPUT_CLEARING: &str = "tool_input_clearing";

/// What a compactor records under [`CONTEXT_COMPACTION`]: which strategy ran and how many tokens
/// the message held before.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompactionMarker {
    /// The strategy that rewrote the message, such as [`STRATEGY_TOOL_RESULT_PRUNING`].
    pub strategy: String,
    /// The message's token count before it was rewritten.
    pub original_tokens: u64,
}

impl CompactionMarker {
    /// A marker for `strategy`.
    pub fn new(strategy: impl Into<String>, original_tokens: u64) -> Self {
        CompactionMarker { strategy: strategy.into(), original_tokens }
    }

    /// Reads the marker from a message's meta, if it holds a well-formed one.
    pub fn read(meta: &JsonObject) -> Option<Self> {
        let marker = meta.get(CONTEXT_COMPACTION)?.as_object()?;
        Some(CompactionMarker {
            strategy: marker.get("strategy")?.as_str()?.to_owned(),
            original_tokens: marker.get("original_tokens")?.as_u64()?,
        })
    }

    /// The marker as the JSON object stored in meta: `{"strategy": ..., "original_tokens": ...}`.
    pub fn to_value(&self) -> Value {
        self.clone().into_value()
    }

    /// [`CompactionMarker::to_value`], moving the strategy name in.
    pub fn into_value(self) -> Value {
        let mut marker = Map::with_capacity(2);
        marker.insert("strategy".into(), Value::String(self.strategy));
        marker.insert("original_tokens".into(), Value::from(self.original_tokens));
        Value::Object(marker)
    }

    /// Stores the marker in `meta`, replacing any earlier one in place.
    pub fn write_to(self, meta: &mut JsonObject) {
        meta.insert(CONTEXT_COMPACTION.into(), self.into_value());
    }
}

/// Whether a message's meta carries the compaction marker, well-formed or not.
pub fn is_compacted(meta: &JsonObject) -> bool {
    meta.contains_key(CONTEXT_COMPACTION)
}

/// Whether a message's meta says its result was offloaded (a truthy value under
/// [`TOOL_RESULT_OFFLOADED`], as the reference tests it).
pub fn is_offloaded(meta: &JsonObject) -> bool {
    match meta.get(TOOL_RESULT_OFFLOADED) {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(Value::Bool(true)) => true,
    }
}

/// The store references recorded under [`TOOL_RESULT_OFFLOADED`], if it holds a list of strings.
pub fn offloaded_references(meta: &JsonObject) -> Option<Vec<String>> {
    meta.get(TOOL_RESULT_OFFLOADED)?.as_array()?.iter().map(|r| r.as_str().map(str::to_owned)).collect()
}

/// Records `references` under [`TOOL_RESULT_OFFLOADED`].
pub fn set_offloaded_references(meta: &mut JsonObject, references: &[String]) {
    let list = references.iter().cloned().map(Value::String).collect();
    meta.insert(TOOL_RESULT_OFFLOADED.into(), Value::Array(list));
}
