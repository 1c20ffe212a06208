//! The [`Compactor`] trait and the report every compaction returns.

use std::fmt;

use compaction_model::Message;
use compaction_tokens::TokenCounter;
use serde::Serialize;

use crate::steps::Replacement;

/// Rewrites a conversation into a shorter one that carries the same working context.
///
/// A compactor is the *how* of compaction; deciding *when* is the caller's job (see the
/// compaction-hook crate). Every implementation keeps three rules:
///
/// 1. It returns `None` unless the conversation actually gets smaller.
/// 2. It never changes its input; the shorter conversation is a new `Vec`.
/// 3. It never separates a tool call from its results: no result without its call, no call
///    without all of its results. Chat APIs reject such conversations.
///
/// `target_tokens` is a goal, not a promise: a compactor that cannot reach it gets as close as
/// its rules allow.
///
/// The trait is object safe, so a hook can hold any strategy as `Box<dyn Compactor>`.
pub trait Compactor: Send + Sync + fmt::Debug {
    /// A shorter replacement for `messages` with a report of what changed, or `None` to leave
    /// the conversation as it is. `counter` is the one the caller sized the context with.
    fn compact(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> Option<Compaction>;

    /// The strategy's name, as reports and traces show it (Haystack's class name, such as
    /// `ToolResultPruningCompactor`).
    fn name(&self) -> &str;
}

/// A compaction: how the conversation changes, and a report of what was done.
///
/// A compaction does not copy the conversation. It holds only what changes — for the
/// tool-result strategies, the few rewritten messages — so compacting a 50 MB conversation
/// costs what the rewrite costs, not a copy of 50 MB. [`Compaction::messages`] builds the new
/// conversation beside the old one; [`Compaction::apply`] rewrites an owned conversation in place.
#[derive(Debug, Clone, PartialEq)]
pub struct Compaction {
    /// How the conversation changes.
    pub edits: Edits,
    /// What changed.
    pub report: CompactionReport,
}

/// How a compaction changes a conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Edits {
    /// Messages replaced in place, by index, in increasing order; every other message stays.
    Replace(Vec<(usize, Message)>),
    /// A whole new conversation, for strategies that drop or merge messages.
    Whole(Vec<Message>),
}

impl Compaction {
    /// A compaction that replaces messages in place. `replacements` need not be sorted.
    pub fn replacing(mut replacements: Vec<(usize, Message)>, report: CompactionReport) -> Self {
        replacements.sort_by_key(|(index, _)| *index);
        Compaction { edits: Edits::Replace(replacements), report }
    }

    /// The compacted conversation, built from `original` (the conversation that was compacted).
    pub fn messages(&self, original: &[Message]) -> Vec<Message> {
        match &self.edits {
            Edits::Replace(replacements) => {
                let mut messages = original.to_vec();
                for (index, message) in replacements {
                    if let Some(slot) = messages.get_mut(*index) {
                        *slot = message.clone();
                    }
                }
                messages
            }
            Edits::Whole(messages) => messages.clone(),
        }
    }

    /// Rewrites `messages` (the conversation that was compacted) into the compacted one, moving
    /// the replacements in without copying anything else. Returns the report.
    pub fn apply(self, messages: &mut Vec<Message>) -> CompactionReport {
        match self.edits {
            Edits::Replace(replacements) => {
                for (index, message) in replacements {
                    if let Some(slot) = messages.get_mut(index) {
                        *slot = message;
                    }
                }
            }
            Edits::Whole(whole) => *messages = whole,
        }
        self.report
    }

    /// The indices of the messages that change, for in-place edits; `None` when the whole
    /// conversation is replaced.
    pub fn replaced_indices(&self) -> Option<Vec<usize>> {
        match &self.edits {
            Edits::Replace(replacements) => Some(replacements.iter().map(|(index, _)| *index).collect()),
            Edits::Whole(_) => None,
        }
    }
}

/// What a compaction did: the sizes before and after, and each rewritten tool result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CompactionReport {
    /// The strategy that ran.
    pub strategy: String,
    /// Tokens of the whole conversation before compacting.
    pub tokens_before: usize,
    /// Tokens after, as the running estimate from per-message differences (not a recount).
    pub tokens_after: usize,
    /// The target the compactor was given.
    pub target_tokens: usize,
    /// Whether `tokens_after` is at or under the target.
    pub target_reached: bool,
    /// Every tool result that was rewritten, oldest first.
    pub results: Vec<ResultReport>,
    /// Every assistant message whose tool-call arguments were cleared, oldest first (only with
    /// the pruning compactor's `clear_tool_inputs`).
    pub inputs_cleared: Vec<InputReport>,
}

/// One rewritten tool-result message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResultReport {
    /// The message's index in the conversation.
    pub index: usize,
    /// The tool that produced the result.
    pub tool_name: String,
    /// The id of the call the result answers, if it has one.
    pub call_id: Option<String>,
    /// The message's tokens before.
    pub original_tokens: usize,
    /// The replacement's tokens.
    pub replacement_tokens: usize,
    /// Tokens freed: `original_tokens - replacement_tokens`.
    pub tokens_freed: usize,
}

/// One assistant message whose tool-call arguments were replaced with `{}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InputReport {
    /// The message's index in the conversation.
    pub index: usize,
    /// The ids of the cleared calls, `None` for a call without one, in call order.
    pub call_ids: Vec<Option<String>>,
    /// The message's tokens before.
    pub original_tokens: usize,
    /// The message's tokens after.
    pub replacement_tokens: usize,
    /// Tokens freed: `original_tokens - replacement_tokens`.
    pub tokens_freed: usize,
}

impl ResultReport {
    /// The entry for the tool-result message `original`, at `index`, rewritten as `replacement`.
    pub fn new(index: usize, original: &Message, replacement: &Replacement) -> Self {
        let origin = original.tool_call_result().map(|r| &r.origin);
        ResultReport {
            index,
            tool_name: origin.map(|o| o.tool_name.clone()).unwrap_or_default(),
            call_id: origin.and_then(|o| o.id.clone()),
            original_tokens: replacement.original_tokens,
            replacement_tokens: replacement.replacement_tokens,
            tokens_freed: replacement.tokens_freed(),
        }
    }
}

impl CompactionReport {
    /// A report with no cleared inputs; `target_reached` is worked out from the sizes.
    pub fn new(
        strategy: &str,
        tokens_before: usize,
        tokens_after: usize,
        target_tokens: usize,
        results: Vec<ResultReport>,
    ) -> Self {
        CompactionReport {
            strategy: strategy.to_owned(),
            tokens_before,
            tokens_after,
            target_tokens,
            target_reached: tokens_after <= target_tokens,
            results,
            inputs_cleared: Vec::new(),
        }
    }

    /// The tool names of the rewritten results, oldest first.
    pub fn tool_names(&self) -> Vec<&str> {
        self.results.iter().map(|r| r.tool_name.as_str()).collect()
    }

    /// The indices of the rewritten messages, oldest first.
    pub fn changed_indices(&self) -> Vec<usize> {
        self.results.iter().map(|r| r.index).collect()
    }

    /// Tokens freed in all, by rewritten results and cleared inputs together.
    pub fn tokens_freed(&self) -> usize {
        self.results.iter().map(|r| r.tokens_freed).sum::<usize>()
            + self.inputs_cleared.iter().map(|r| r.tokens_freed).sum::<usize>()
    }
}
