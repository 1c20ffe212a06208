//! [`ToolResultOffloadCompactor`]: at compaction time, moves older tool results to a store,
//! oldest first, until the conversation fits.

use std::fmt;
use std::sync::Arc;

use compaction_core::{replace_tool_results_until_target, Compaction, Compactor, Replacement};
use compaction_model::{
    is_compacted, is_offloaded, CompactionMarker, Message, CONTEXT_COMPACTION,
    STRATEGY_TOOL_RESULT_OFFLOADING,
};
use compaction_tokens::TokenCounter;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::error::Error;
use crate::hook::{init_parameters, invalid};
use crate::offload::{offloadable_blocks, offloaded_message, Offloadable};
use crate::serial::{integer, Integer};
use crate::store::ToolResultStore;

/// The class path Haystack writes as `type` in `ToolResultOffloadCompactor.to_dict()`.
pub const HAYSTACK_OFFLOAD_COMPACTOR_TYPE: &str =
    "haystack.hooks.compaction.tool_result_offloading.ToolResultOffloadCompactor";

/// What [`ToolResultOffloadCompactor`] offloads. Defaults are the reference's.
///
/// Serializes as its three fields; deserializing (and [`OffloadCompactorSettings::from_value`])
/// also reads Haystack's `to_dict` form, ignoring its `store`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OffloadCompactorSettings {
    /// How many of the newest tool-calling steps are never offloaded. At least 1.
    pub min_keep_steps: usize,
    /// Only messages whose own count is above this are offloaded.
    pub min_tokens: usize,
    /// Characters of each offloaded text kept in its pointer.
    pub preview_chars: usize,
}

impl Default for OffloadCompactorSettings {
    fn default() -> Self {
        OffloadCompactorSettings { min_keep_steps: 1, min_tokens: 200, preview_chars: 200 }
    }
}

impl OffloadCompactorSettings {
    /// Checks `min_keep_steps >= 1`.
    pub fn validate(&self) -> Result<(), Error> {
        if self.min_keep_steps < 1 {
            return Err(Error::MinKeepStepsTooSmall(self.min_keep_steps as i128));
        }
        Ok(())
    }

    /// Reads the plain form or Haystack's `to_dict` form; missing keys take their defaults.
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        let params = init_parameters(value, HAYSTACK_OFFLOAD_COMPACTOR_TYPE)?;
        let mut settings = OffloadCompactorSettings::default();
        for (key, value) in params {
            let field = match key.as_str() {
                "min_keep_steps" => &mut settings.min_keep_steps,
                "min_tokens" => &mut settings.min_tokens,
                "preview_chars" => &mut settings.preview_chars,
                "store" => continue,
                _ => return Err(invalid(key, "unknown setting")),
            };
            *field = match integer(key, value)? {
                Integer::NonNegative(n) => n,
                Integer::Negative(n) if key == "min_keep_steps" => {
                    return Err(Error::MinKeepStepsTooSmall(n))
                }
                Integer::Negative(_) => return Err(invalid(key, "must be at least 0")),
            };
        }
        settings.validate()?;
        Ok(settings)
    }
}

impl<'de> Deserialize<'de> for OffloadCompactorSettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        OffloadCompactorSettings::from_value(&value).map_err(serde::de::Error::custom)
    }
}

type KeySource = Box<dyn Fn() -> String + Send + Sync>;

/// Writes older tool results to a store and leaves a pointer in their place, as Haystack's
/// `ToolResultOffloadCompactor` does.
///
/// Results are visited oldest first outside the newest `min_keep_steps` tool-calling steps; the
/// walk stops once the conversation fits the target. A result is skipped when it is an error,
/// already offloaded or compacted, no larger than `min_tokens`, empty, binary for a text-only
/// store, or when its pointer would not be smaller (its store entry is then left unused). Store
/// keys are `compacted_<tool>_<32 random hex digits>`, so runs sharing a store never collide.
/// The pointer message carries `context_compaction: {"strategy": "tool_result_offloading",
/// "original_tokens": N}` and the references. A failed write leaves the result and logs a
/// warning.
///
/// Unlike [`ToolResultOffloadHook`](crate::ToolResultOffloadHook), the compactor always writes
/// to its own store: give each user's agent its own compactor.
pub struct ToolResultOffloadCompactor {
    store: Arc<dyn ToolResultStore>,
    settings: OffloadCompactorSettings,
    key_source: KeySource,
}

impl fmt::Debug for ToolResultOffloadCompactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolResultOffloadCompactor")
            .field("store", &self.store)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl ToolResultOffloadCompactor {
    /// A compactor writing to `store`.
    pub fn new(store: Arc<dyn ToolResultStore>, settings: OffloadCompactorSettings) -> Result<Self, Error> {
        settings.validate()?;
        Ok(ToolResultOffloadCompactor { store, settings, key_source: Box::new(crate::keys::unique_hex) })
    }

    /// The same compactor taking the unique part of each key from `source` instead of random
    /// hex, for reproducible runs and tests. Keys must stay unique.
    pub fn with_key_source(mut self, source: impl Fn() -> String + Send + Sync + 'static) -> Self {
        self.key_source = Box::new(source);
        self
    }

    /// The settings in use.
    pub fn settings(&self) -> &OffloadCompactorSettings {
        &self.settings
    }

    /// The store written to.
    pub fn store(&self) -> &Arc<dyn ToolResultStore> {
        &self.store
    }

    fn offload(&self, message: &Message, own: usize, counter: &dyn TokenCounter) -> Option<Replacement> {
        let result = message.tool_call_result()?;
        if result.error || is_offloaded(&message.meta) || is_compacted(&message.meta) {
            return None;
        }
        if own <= self.settings.min_tokens {
            return None;
        }
        let Offloadable::Blocks(blocks) = offloadable_blocks(result, self.store.as_ref()) else {
            return None;
        };
        let prefix = format!("compacted_{}_{}", result.origin.tool_name, (self.key_source)());
        let marker = CompactionMarker::new(STRATEGY_TOOL_RESULT_OFFLOADING, own as u64).to_value();
        let offloaded = match offloaded_message(
            message,
            result,
            &blocks,
            self.store.as_ref(),
            &prefix,
            self.settings.preview_chars,
            Some((CONTEXT_COMPACTION, marker)),
        ) {
            Ok(offloaded) => offloaded,
            Err(error) => {
                tracing::warn!(
                    tool = result.origin.tool_name.as_str(),
                    %error,
                    "failed to offload a tool result; leaving it in context"
                );
                return None;
            }
        };
        let replacement_tokens = counter.count(std::slice::from_ref(&offloaded), &[]);
        // A pointer that is not smaller is dropped by the walk; its store entry stays unused.
        Some(Replacement::new(offloaded, own, replacement_tokens))
    }
}

impl Compactor for ToolResultOffloadCompactor {
    fn compact(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> Option<Compaction> {
        replace_tool_results_until_target(
            messages,
            target_tokens,
            counter,
            self.settings.min_keep_steps,
            STRATEGY_TOOL_RESULT_OFFLOADING,
            &mut |_, message, own| self.offload(message, own, counter),
        )
    }

    fn name(&self) -> &str {
        "ToolResultOffloadCompactor"
    }
}
