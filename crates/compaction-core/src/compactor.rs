//! The [`Compactor`] trait and the report every compaction returns.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use compaction_model::{
    CompactionMarker, JsonObject, Message, Part, Role, ToolCallResult, ToolResultContent,
    STRATEGY_TOOL_RESULT_PRUNING,
};
use compaction_tokens::TokenCounter;
use serde::Serialize;

use crate::error::Error;
use crate::steps::Replacement;

/// The future [`Compactor::compact_async`] returns.
pub type CompactFuture<'a> = Pin<Box<dyn Future<Output = Result<Option<Compaction>, Error>> + Send + 'a>>;

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

    /// [`Compactor::compact`] for strategies that can fail: a counter that could not count, or
    /// a model that could not summarize when the strategy is set to fail rather than keep what
    /// it had. `Ok(None)` means what `None` means for `compact`.
    ///
    /// Callers that can report a failure (the compaction hook) call this. The default calls
    /// `compact`, which is right for every strategy that cannot fail.
    ///
    /// # Errors
    ///
    /// Whatever kept the strategy from compacting, with its cause as the source.
    fn try_compact(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> Result<Option<Compaction>, Error> {
        Ok(self.compact(messages, target_tokens, counter))
    }

    /// [`Compactor::try_compact`], for an async caller. A strategy that waits on I/O (a model
    /// call) overrides it so that no runtime thread blocks; the default runs `try_compact` when
    /// first polled, which is right for strategies that only compute.
    fn compact_async<'a>(
        &'a self,
        messages: &'a [Message],
        target_tokens: usize,
        counter: &'a dyn TokenCounter,
    ) -> CompactFuture<'a> {
        Box::pin(async move { self.try_compact(messages, target_tokens, counter) })
    }
}

/// A compaction: how the conversation changes, and a report of what was done.
///
/// A compaction does not copy the conversation. It holds only what changes — for the
/// tool-result strategies, a description of each rewritten message — so compacting a 50 MB
/// conversation costs what deciding costs, not a copy of 50 MB. [`Compaction::messages`] builds
/// the new conversation beside the old one; [`Compaction::apply`] rewrites an owned conversation
/// in place, reusing what each rewritten message keeps of its original.
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
    /// Messages rewritten in place, by index, in increasing order; every other message stays.
    Replace(Vec<(usize, Rewrite)>),
    /// A whole new conversation, for strategies that drop or merge messages.
    Whole(Vec<Message>),
}

/// How one message of the conversation is rewritten.
#[derive(Debug, Clone, PartialEq)]
pub enum Rewrite {
    /// This message takes the original's place.
    Message(Message),
    /// The original's tool result gives way to a placeholder; see [`PrunedResult`].
    Pruned(PrunedResult),
}

/// A tool-result message pruned to a placeholder, described against the original message.
///
/// The rewritten message is a tool message holding one result: `placeholder` with
/// `{tool_name}` replaced by the tool's name, the original's first result's call (its arguments
/// emptied when `clear_arguments` is set) and error flag, and the original's meta with the
/// [`CompactionMarker`] of strategy `tool_result_pruning` and `original_tokens` added. The
/// original's other parts, its name and its other results do not survive, as in Haystack.
///
/// Describing the rewrite instead of holding the new message lets [`Compaction::apply`] move
/// the call and the meta over instead of copying them, and lets a dry run skip building it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrunedResult {
    /// The placeholder text, with `{tool_name}` standing for the tool's name.
    pub placeholder: Arc<str>,
    /// The original message's own token count, recorded in the marker.
    pub original_tokens: usize,
    /// Whether the call's arguments are replaced with `{}` (`clear_tool_inputs`).
    pub clear_arguments: bool,
}

impl PrunedResult {
    /// The placeholder text for a result of `tool_name`.
    pub fn text(&self, tool_name: &str) -> String {
        self.placeholder.replace("{tool_name}", tool_name)
    }

    /// The pruned message built from `original`, which is left as it is. A message without a
    /// tool result has nothing to prune and is returned unchanged.
    pub fn build(&self, original: &Message) -> Message {
        let Some(result) = original.tool_call_result() else {
            return original.clone();
        };
        let mut origin = result.origin.clone();
        if self.clear_arguments {
            origin.arguments = JsonObject::new();
        }
        let mut meta = original.meta.clone();
        CompactionMarker::new(STRATEGY_TOOL_RESULT_PRUNING, self.original_tokens as u64).write_to(&mut meta);
        let text = self.text(&origin.tool_name);
        let parts = vec![Part::ToolCallResult(ToolCallResult::new(text.into(), origin, result.error))];
        Message { role: Role::Tool, parts, name: None, meta }
    }

    /// Rewrites `message` into the pruned message in place: its first result stays where it is
    /// with the placeholder for content, and everything else of the message goes. A message
    /// without a tool result has nothing to prune and is left as it is.
    pub fn rewrite(&self, message: &mut Message) {
        let Some(position) = message.parts.iter().position(|p| matches!(p, Part::ToolCallResult(_))) else {
            return;
        };
        message.parts.swap(0, position);
        message.parts.truncate(1);
        let Some(Part::ToolCallResult(result)) = message.parts.first_mut() else {
            return;
        };
        if self.clear_arguments {
            result.origin.arguments = JsonObject::new();
        }
        result.result = ToolResultContent::Text(self.text(&result.origin.tool_name).into());
        result.unknown = JsonObject::new();
        message.role = Role::Tool;
        message.name = None;
        CompactionMarker::new(STRATEGY_TOOL_RESULT_PRUNING, self.original_tokens as u64)
            .write_to(&mut message.meta);
    }
}

impl Rewrite {
    /// The rewritten message, built from `original`.
    pub fn build(&self, original: &Message) -> Message {
        match self {
            Rewrite::Message(message) => message.clone(),
            Rewrite::Pruned(pruned) => pruned.build(original),
        }
    }

    /// Rewrites `message` (the original) in place.
    pub fn apply(self, message: &mut Message) {
        match self {
            Rewrite::Message(replacement) => *message = replacement,
            Rewrite::Pruned(pruned) => pruned.rewrite(message),
        }
    }

    /// [`Rewrite::apply`] without giving the rewrite up.
    fn apply_ref(&self, message: &mut Message) {
        match self {
            Rewrite::Message(replacement) => message.clone_from(replacement),
            Rewrite::Pruned(pruned) => pruned.rewrite(message),
        }
    }
}

impl Compaction {
    /// A compaction that replaces messages in place. `replacements` need not be sorted.
    pub fn replacing(replacements: Vec<(usize, Message)>, report: CompactionReport) -> Self {
        Self::rewriting(
            replacements.into_iter().map(|(index, message)| (index, Rewrite::Message(message))).collect(),
            report,
        )
    }

    /// A compaction that rewrites messages in place. `rewrites` need not be sorted.
    pub fn rewriting(mut rewrites: Vec<(usize, Rewrite)>, report: CompactionReport) -> Self {
        rewrites.sort_by_key(|(index, _)| *index);
        Compaction { edits: Edits::Replace(rewrites), report }
    }

    /// The compacted conversation, built from `original` (the conversation that was compacted).
    pub fn messages(&self, original: &[Message]) -> Vec<Message> {
        match &self.edits {
            Edits::Replace(rewrites) => {
                // As `apply` does it: the rewrites of one index one after another, in the order
                // given (a stable sort keeps it), each on what the one before left.
                let mut sorted: Vec<&(usize, Rewrite)> = rewrites.iter().collect();
                sorted.sort_by_key(|(index, _)| *index);
                let mut sorted = sorted.into_iter().peekable();
                let mut messages = Vec::with_capacity(original.len());
                for (index, message) in original.iter().enumerate() {
                    let mut rewritten: Option<Message> = None;
                    while let Some((_, rewrite)) = sorted.next_if(|(at, _)| *at == index) {
                        match &mut rewritten {
                            // The first is built from the original, which it need not copy first.
                            None => rewritten = Some(rewrite.build(message)),
                            Some(message) => rewrite.apply_ref(message),
                        }
                    }
                    messages.push(rewritten.unwrap_or_else(|| message.clone()));
                }
                messages
            }
            Edits::Whole(messages) => messages.clone(),
        }
    }

    /// Rewrites `messages` (the conversation that was compacted) into the compacted one in
    /// place: untouched messages are not copied, and a rewritten one keeps what it can of its
    /// original without copying it. Returns the report.
    pub fn apply(self, messages: &mut Vec<Message>) -> CompactionReport {
        match self.edits {
            Edits::Replace(rewrites) => {
                for (index, rewrite) in rewrites {
                    if let Some(slot) = messages.get_mut(index) {
                        rewrite.apply(slot);
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
            Edits::Replace(rewrites) => Some(rewrites.iter().map(|(index, _)| *index).collect()),
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
    /// The messages of the original conversation that are no longer in it (dropped by a
    /// sliding window, replaced by a summary), by index, in increasing order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<usize>,
    /// The messages the compaction put in (an omission note, a summary), by their index in the
    /// compacted conversation, in increasing order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inserted: Vec<usize>,
    /// For a chain of strategies: the report of each that compacted, in the order they ran.
    /// Each describes the conversation its strategy was given.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<CompactionReport>,
    /// Why the strategy stopped short when a step failed and it kept what it had done before
    /// (a summary the model could not write), in words; the failure is also logged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
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
    pub fn new<R>(index: usize, original: &Message, replacement: &Replacement<R>) -> Self {
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
            removed: Vec::new(),
            inserted: Vec::new(),
            stages: Vec::new(),
            failure: None,
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

    /// Tokens freed in all: by rewritten results and cleared inputs together when there are
    /// any, otherwise (strategies that remove or merge messages, chains) the drop from
    /// `tokens_before` to `tokens_after`.
    pub fn tokens_freed(&self) -> usize {
        if self.results.is_empty() && self.inputs_cleared.is_empty() {
            return self.tokens_before.saturating_sub(self.tokens_after);
        }
        self.results.iter().map(|r| r.tokens_freed).sum::<usize>()
            + self.inputs_cleared.iter().map(|r| r.tokens_freed).sum::<usize>()
    }
}
