//! [`ToolResultOffloadHook`]: after each tool step, moves the fresh results its policies pick to
//! a store and leaves a pointer in their place.

use std::sync::Arc;

use compaction_model::{is_offloaded, Message};
use serde::Serialize;
use serde_json::Value;

use crate::error::Error;
use crate::hook::{init_parameters, invalid};
use crate::offload::{offloadable_blocks, offloaded_message, payload, Offloadable};
use crate::policy::OffloadStrategies;
use crate::serial::count;
use crate::state::AgentState;
use crate::store::{FileSystemToolResultStore, ToolResultStore};

/// The class path Haystack writes as `type` in `ToolResultOffloadHook.to_dict()`.
pub const HAYSTACK_OFFLOAD_HOOK_TYPE: &str =
    "haystack.hooks.tool_result_offloading.hooks.ToolResultOffloadHook";

/// What one [`ToolResultOffloadHook::run`] did.
#[derive(Debug, Default, Serialize)]
pub struct OffloadOutcome {
    /// Indices of the messages replaced by pointers, oldest first.
    pub offloaded: Vec<usize>,
    /// Indices of results left in context because they hold image or file parts and the store
    /// takes only text.
    pub binary_unsupported: Vec<usize>,
    /// Results left in context because a store write failed, with the error.
    #[serde(serialize_with = "failures_as_text")]
    pub failures: Vec<(usize, Error)>,
}

fn failures_as_text<S: serde::Serializer>(failures: &[(usize, Error)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(failures.iter().map(|(index, error)| (index, error.to_string())))
}

/// Offloads tool results to a [`ToolResultStore`] as soon as they arrive, replacing each with a
/// pointer the model can follow with the read-back tool.
///
/// Run it after each tool step. It looks only at the trailing block of tool-result messages (the
/// step's fresh results), so history is never rewritten and each result is offloaded at most
/// once. Which tools offload is decided by [`OffloadStrategies`]; a tool with no matching key
/// keeps its results. Errors, already-offloaded results and empty ones always stay; image and
/// file parts go only to a store that takes binary content. A failed write leaves the result in
/// context, logs a warning and is reported in the [`OffloadOutcome`]; it never stops the run.
///
/// The hook holds no mutable state and can be shared between concurrent runs; give each run its
/// own store with [`ToolResultOffloadHook::run_with_store`] so users never share one.
#[derive(Debug)]
pub struct ToolResultOffloadHook {
    store: Arc<dyn ToolResultStore>,
    strategies: OffloadStrategies,
    preview_chars: usize,
}

impl ToolResultOffloadHook {
    /// A hook writing to `store` under `strategies`, previewing 200 characters of each text.
    pub fn new(store: Arc<dyn ToolResultStore>, strategies: OffloadStrategies) -> Self {
        ToolResultOffloadHook { store, strategies, preview_chars: 200 }
    }

    /// The same hook previewing `preview_chars` characters of each offloaded text.
    pub fn with_preview_chars(mut self, preview_chars: usize) -> Self {
        self.preview_chars = preview_chars;
        self
    }

    /// Builds a hook from Haystack's `ToolResultOffloadHook.to_dict()` output (a
    /// `FileSystemToolResultStore` and the reference's three policies).
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        let params = init_parameters(value, HAYSTACK_OFFLOAD_HOOK_TYPE)?;
        let store = params.get("store").ok_or_else(|| invalid("store", "is required"))?;
        let store = FileSystemToolResultStore::from_value(store)?;
        let strategies = match params.get("offload_strategies") {
            Some(v) => OffloadStrategies::from_haystack_value(v)?,
            None => return Err(invalid("offload_strategies", "is required")),
        };
        let mut hook = ToolResultOffloadHook::new(Arc::new(store), strategies);
        if let Some(v) = params.get("preview_chars") {
            hook.preview_chars = count("preview_chars", v)?;
        }
        Ok(hook)
    }

    /// The hook's own store.
    pub fn store(&self) -> &Arc<dyn ToolResultStore> {
        &self.store
    }

    /// The policies in use.
    pub fn strategies(&self) -> &OffloadStrategies {
        &self.strategies
    }

    /// Offloads the fresh results of `state` to the hook's own store.
    pub fn run(&self, state: &mut AgentState) -> OffloadOutcome {
        self.run_with_store(state, self.store.as_ref())
    }

    /// Offloads the fresh results of `state` to `store` instead of the hook's own: the
    /// reference's per-run `hook_context` store.
    pub fn run_with_store(&self, state: &mut AgentState, store: &dyn ToolResultStore) -> OffloadOutcome {
        let mut outcome = OffloadOutcome::default();
        let messages = state.messages();
        let start = fresh_results_start(messages);
        let mut replaced = Vec::new();
        for (batch_index, index) in (start..messages.len()).enumerate() {
            match self.offload_one(&messages[index], batch_index, index, store, state) {
                Step::Kept => {}
                Step::Offloaded(message) => replaced.push((index, message)),
                Step::BinaryUnsupported => outcome.binary_unsupported.push(index),
                Step::Failed(error) => outcome.failures.push((index, error)),
            }
        }
        if !replaced.is_empty() {
            let messages = state.messages_mut();
            for (index, message) in replaced {
                messages[index] = message;
                outcome.offloaded.push(index);
            }
        }
        outcome
    }

    fn offload_one(
        &self,
        message: &Message,
        batch_index: usize,
        index: usize,
        store: &dyn ToolResultStore,
        state: &AgentState,
    ) -> Step {
        let Some(result) = message.tool_call_result() else { return Step::Kept };
        if result.error || is_offloaded(&message.meta) {
            return Step::Kept;
        }
        let tool_name = result.origin.tool_name.as_str();
        let Some(policy) = self.strategies.policy_for(tool_name) else { return Step::Kept };
        let blocks = match offloadable_blocks(result, store) {
            Offloadable::Blocks(blocks) => blocks,
            Offloadable::Empty => return Step::Kept,
            Offloadable::BinaryUnsupported => return Step::BinaryUnsupported,
        };
        if !policy.should_offload(tool_name, &payload(&blocks), state) {
            return Step::Kept;
        }
        // Step, tool and call id keep keys apart; a call without an id falls back to its
        // position in this step's batch.
        let call = match result.origin.id.as_deref() {
            Some(id) if !id.is_empty() => id.to_owned(),
            _ => format!("call{batch_index}"),
        };
        let prefix = format!("{}_{tool_name}_{call}", state.step_count);
        match offloaded_message(message, result, &blocks, store, &prefix, self.preview_chars, None) {
            Ok(message) => Step::Offloaded(message),
            Err(error) => {
                tracing::warn!(
                    tool = tool_name,
                    index,
                    %error,
                    "failed to offload a tool result; leaving it in context"
                );
                Step::Failed(error)
            }
        }
    }
}

enum Step {
    Kept,
    Offloaded(Message),
    BinaryUnsupported,
    Failed(Error),
}

/// Where the trailing block of tool-result messages starts; `len` when the last message is not
/// a tool result.
fn fresh_results_start(messages: &[Message]) -> usize {
    messages.iter().rposition(|m| !m.has_tool_call_result()).map_or(0, |i| i + 1)
}
