//! rig's history-shaping trait, `rig_memory::MemoryPolicy`, run by one of our compactors.

use std::sync::Mutex;

use compaction_core::{CompactionReport, Compactor, ToolResultPruningCompactor};
use compaction_model::{CONTEXT_COMPACTION, TOOL_RESULT_OFFLOADED};
use compaction_tokens::{ApproximateTokenCounter, TokenCounter};
use rig_core::completion::Message as RigMessage;
use rig_memory::{InMemoryConversationMemory, MemoryError, MemoryPolicy, PolicyMemory};

use super::{from_rig, to_rig};
use crate::Loss;

/// A rig memory policy that compacts the history an agent loads with one of this project's
/// compactors — by default [`ToolResultPruningCompactor`], Haystack's tool-result pruning.
///
/// rig calls [`MemoryPolicy::apply`] with the whole stored conversation before every model
/// call. When it counts more than the trigger (the target, unless
/// [`with_trigger_tokens`](CompactionPolicy::with_trigger_tokens) says otherwise), the policy
/// converts it to our messages, compacts it down to the target and hands rig the compacted
/// history; the stored conversation itself is never changed, so every load starts again from
/// the full record. A history that fits comes back as it was, without a copy.
///
/// The conversion back to rig keeps everything but the markers compaction leaves in a
/// message's `meta` (rig messages have no place for them). Anything else that would be lost is
/// refused with [`MemoryError::Policy`] naming it, rather than dropped.
///
/// For any rig store `store`: `PolicyMemory::new(store, CompactionPolicy::pruning(30_000))`,
/// given to `AgentBuilder::memory`; [`pruning_memory`] is that over rig's in-memory store.
#[derive(Debug)]
pub struct CompactionPolicy {
    compactor: Box<dyn Compactor>,
    counter: Box<dyn TokenCounter>,
    target_tokens: usize,
    trigger_tokens: Option<usize>,
    last_report: Mutex<Option<CompactionReport>>,
}

impl CompactionPolicy {
    /// Compacts with `compactor` down to `target_tokens`, counting with the approximate counter.
    pub fn new(compactor: impl Compactor + 'static, target_tokens: usize) -> Self {
        CompactionPolicy {
            compactor: Box::new(compactor),
            counter: Box::new(ApproximateTokenCounter::default()),
            target_tokens,
            trigger_tokens: None,
            last_report: Mutex::new(None),
        }
    }

    /// Prunes old tool results ([`ToolResultPruningCompactor`] with Haystack's defaults) down
    /// to `target_tokens`.
    pub fn pruning(target_tokens: usize) -> Self {
        Self::new(ToolResultPruningCompactor::default(), target_tokens)
    }

    /// The same policy counting with `counter` (a tokenizer of the model, say).
    #[must_use]
    pub fn with_counter(mut self, counter: impl TokenCounter + 'static) -> Self {
        self.counter = Box::new(counter);
        self
    }

    /// The same policy compacting only once the history counts more than `trigger_tokens`.
    #[must_use]
    pub fn with_trigger_tokens(mut self, trigger_tokens: usize) -> Self {
        self.trigger_tokens = Some(trigger_tokens);
        self
    }

    /// The tokens a compaction aims for.
    pub fn target_tokens(&self) -> usize {
        self.target_tokens
    }

    /// The report of the last load that compacted, or `None` when the last load did not.
    pub fn last_report(&self) -> Option<CompactionReport> {
        self.last_report.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    fn remember(&self, report: Option<CompactionReport>) {
        *self.last_report.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = report;
    }
}

/// Whether a loss is only a marker compaction leaves in `meta`, which rig has no place for.
fn is_marker(loss: &Loss) -> bool {
    loss.part.is_none()
        && loss
            .field
            .strip_prefix("meta.")
            .is_some_and(|key| key == CONTEXT_COMPACTION || key == TOOL_RESULT_OFFLOADED)
}

impl CompactionPolicy {
    /// The compacted form of `messages` when they count more than the trigger and the
    /// compactor made them smaller; `Ok(None)` when they stay as they are. `Err` names what
    /// the conversion back to rig would lose besides compaction's markers, or why the count or
    /// the compaction failed.
    pub(crate) fn compact(&self, messages: &[RigMessage]) -> Result<Option<Vec<RigMessage>>, String> {
        let mut ours = from_rig(messages);
        let trigger = self.trigger_tokens.unwrap_or(self.target_tokens);
        let failed = |error: &dyn std::error::Error| {
            format!("{} could not compact: {}", self.compactor.name(), compaction_core::error_chain(error))
        };
        let tokens = self.counter.try_count(&ours, &[]).map_err(|error| failed(&error))?;
        if tokens <= trigger {
            self.remember(None);
            return Ok(None);
        }
        let compacted = self.compactor.try_compact(&ours, self.target_tokens, self.counter.as_ref());
        let Some(compaction) = compacted.map_err(|error| failed(&error))? else {
            self.remember(None);
            return Ok(None);
        };
        let report = compaction.apply(&mut ours).map_err(|error| {
            format!("{} made a compaction that does not fit: {error}", self.compactor.name())
        })?;
        let (compacted, losses) = to_rig(&ours).into_parts();
        let unexpected: Vec<String> =
            losses.iter().filter(|loss| !is_marker(loss)).map(ToString::to_string).collect();
        if !unexpected.is_empty() {
            return Err(format!(
                "{} could not hand the compacted history back to rig without loss: {}",
                self.compactor.name(),
                unexpected.join("; ")
            ));
        }
        self.remember(Some(report));
        Ok(Some(compacted))
    }

    /// The compactor's name.
    pub fn name(&self) -> &str {
        self.compactor.name()
    }
}

impl MemoryPolicy for CompactionPolicy {
    fn apply(&self, messages: Vec<RigMessage>) -> Result<Vec<RigMessage>, MemoryError> {
        match self.compact(&messages) {
            Ok(Some(compacted)) => Ok(compacted),
            Ok(None) => Ok(messages),
            Err(reason) => Err(MemoryError::Policy(reason)),
        }
    }
}

/// An in-memory rig conversation store whose loads are pruned down to `target_tokens`: the
/// one line a rig agent needs, `AgentBuilder::new(model).memory(pruning_memory(30_000))`.
pub fn pruning_memory(target_tokens: usize) -> PolicyMemory<InMemoryConversationMemory, CompactionPolicy> {
    PolicyMemory::new(InMemoryConversationMemory::new(), CompactionPolicy::pruning(target_tokens))
}
