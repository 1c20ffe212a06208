//! Agent steps and the walk that rewrites tool results oldest first until a target is met.
//!
//! Any strategy that rewrites tool results in place (pruning here, offloading in the offload
//! crate) shares this walk, so they agree on which results are protected and when to stop.

use compaction_model::{Message, Role};
use compaction_tokens::{Counts, TokenCounter};

use crate::compactor::{Compaction, CompactionReport, ResultReport};

/// A rewritten tool-result message, as a [`replace_tool_results_until_target`] callback returns it.
///
/// `M` is what takes the original's place: the new message itself, or (inside this crate) a
/// description of it that is built later.
#[derive(Debug, Clone, PartialEq)]
pub struct Replacement<M = Message> {
    /// What to put in the original's place.
    pub message: M,
    /// Tokens of the original message counted on its own.
    pub original_tokens: usize,
    /// Tokens of `message` counted on its own.
    pub replacement_tokens: usize,
    /// Which of the message's results were rewritten, in message order, each with the message's
    /// count just before and after its rewrite (see [`ResultReport`]). Empty when the callback
    /// describes only the whole message: the report then names the message's first result.
    pub results: Vec<RewrittenResult>,
}

/// One result of a message that a [`Replacement`] rewrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RewrittenResult {
    /// The result's position among the message's tool results (0 is the first).
    pub position: usize,
    /// The message's tokens just before this result was rewritten.
    pub tokens_before: usize,
    /// The message's tokens just after.
    pub tokens_after: usize,
}

impl<M> Replacement<M> {
    /// A replacement described as a whole: `message`, freeing `original_tokens -
    /// replacement_tokens`.
    pub fn new(message: M, original_tokens: usize, replacement_tokens: usize) -> Self {
        Replacement { message, original_tokens, replacement_tokens, results: Vec::new() }
    }

    /// Tokens the replacement frees; 0 when it is not smaller.
    pub fn tokens_freed(&self) -> usize {
        self.original_tokens.saturating_sub(self.replacement_tokens)
    }

    /// The report entries of this replacement of `original`, at `index`.
    pub(crate) fn reports(&self, index: usize, original: &Message) -> Vec<ResultReport> {
        if self.results.is_empty() {
            return vec![ResultReport::new(index, original, self)];
        }
        self.results.iter().map(|r| ResultReport::for_result(index, original, r)).collect()
    }
}

/// The index of the last assistant message, if there is one.
pub fn last_assistant_index(messages: &[Message]) -> Option<usize> {
    messages.iter().rposition(|m| m.is_from(Role::Assistant))
}

/// Agent steps from `start` on, as half-open `(first, end)` index ranges.
///
/// A step is an assistant message followed directly by every message that carries a tool result
/// (whatever its role). Messages before the first assistant message, or between steps, belong
/// to no step. A step whose `end` is `first + 1` made no tool call that got a result.
pub fn agent_step_spans(messages: &[Message], start: usize) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut index = start;
    while index < messages.len() {
        if !messages[index].is_from(Role::Assistant) {
            index += 1;
            continue;
        }
        let mut end = index + 1;
        while end < messages.len() && messages[end].has_tool_call_result() {
            end += 1;
        }
        spans.push((index, end));
        index = end;
    }
    spans
}

/// Which messages the step rule protects: the results of the newest `min_keep_steps` steps that
/// have results. Steps without results are not counted. `min_keep_steps == 0` protects nothing.
pub(crate) fn protected_by_steps(messages: &[Message], min_keep_steps: usize) -> Vec<bool> {
    let mut protected = vec![false; messages.len()];
    let with_results: Vec<(usize, usize)> =
        agent_step_spans(messages, 0).into_iter().filter(|&(first, end)| end > first + 1).collect();
    let keep_from = with_results.len().saturating_sub(min_keep_steps);
    for &(first, end) in &with_results[keep_from..] {
        protected[first + 1..end].iter_mut().for_each(|p| *p = true);
    }
    protected
}

/// Which messages the per-result rule protects: the newest `keep` tool-result messages.
pub(crate) fn protected_by_results(messages: &[Message], keep: usize) -> Vec<bool> {
    let mut protected = vec![false; messages.len()];
    let newest = messages.iter().enumerate().rev().filter(|(_, m)| m.has_tool_call_result()).take(keep);
    for (index, _) in newest {
        protected[index] = true;
    }
    protected
}

/// What a walk chose, before any conversation is built.
#[derive(Debug)]
pub(crate) struct Walk<M> {
    pub(crate) tokens_before: usize,
    pub(crate) tokens_after: usize,
    pub(crate) replaced: Vec<(usize, Replacement<M>)>,
    /// One report entry per replaced message, made while the message was at hand.
    results: Vec<ResultReport>,
}

/// The callback type the walk calls for every unprotected tool-result message.
pub(crate) type ReplaceFn<'a, M> = dyn FnMut(usize, &Message, usize) -> Option<Replacement<M>> + 'a;

/// Walks oldest first over unprotected tool-result messages, offering each to `replace`, and
/// stops once the running total is at or under `target_tokens`. `None` when the conversation
/// already fits.
pub(crate) fn walk<M>(
    messages: &[Message],
    counts: &Counts,
    target_tokens: usize,
    protected: &[bool],
    counter: &dyn TokenCounter,
    replace: &mut ReplaceFn<'_, M>,
) -> Option<Walk<M>> {
    if counts.total <= target_tokens {
        return None;
    }
    let mut current = counts.total;
    let mut replaced = Vec::new();
    let mut results = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        if protected[index] || message.tool_call_result().is_none() {
            continue;
        }
        // A counter whose `count_each` returned too few entries is counted directly rather than
        // trusted with an index it does not have.
        let own = counts
            .each
            .get(index)
            .copied()
            .unwrap_or_else(|| counter.count(std::slice::from_ref(message), &[]));
        let Some(replacement) = replace(index, message, own) else { continue };
        let freed = replacement.tokens_freed();
        // A replacement that frees nothing would only make the conversation different.
        if freed == 0 {
            continue;
        }
        current = current.saturating_sub(freed);
        results.extend(replacement.reports(index, message));
        replaced.push((index, replacement));
        if current <= target_tokens {
            break;
        }
    }
    Some(Walk { tokens_before: counts.total, tokens_after: current, replaced, results })
}

impl<M> Walk<M> {
    /// The replacements, with the report of this walk: one entry per replaced message.
    pub(crate) fn finish(
        self,
        strategy: &str,
        target_tokens: usize,
    ) -> (Vec<(usize, Replacement<M>)>, CompactionReport) {
        let report = CompactionReport::new(
            strategy,
            self.tokens_before,
            self.tokens_after,
            target_tokens,
            self.results,
        );
        (self.replaced, report)
    }
}

/// Rewrites tool results oldest first until the conversation fits `target_tokens`.
///
/// The conversation is counted once, with [`TokenCounter::count_each`]; if the total already
/// fits, the answer is `None`. Otherwise every message that carries a tool result, outside the
/// newest `min_keep_steps` agent steps that have results (see [`agent_step_spans`]), is offered
/// to `replace` with its index and its own token count, oldest first. A replacement is kept only
/// when it frees at least one token; the running total drops by what each one frees, and the
/// walk stops as soon as it is at or under the target. Results of one step are protected
/// together, so parallel calls keep all their results.
///
/// A message holding several results is offered once: the callback judges each of its results
/// on its own and rewrites those that qualify in one replacement (listing them in
/// [`Replacement::results`]), and the target is checked after the message, as after any other.
///
/// `strategy` is recorded in the report, such as
/// [`STRATEGY_TOOL_RESULT_PRUNING`](compaction_model::STRATEGY_TOOL_RESULT_PRUNING). `None` when
/// nothing was replaced. The input is never changed.
///
/// `min_keep_steps` of 0 protects no step; the compactors built on this walk reject 0.
pub fn replace_tool_results_until_target(
    messages: &[Message],
    target_tokens: usize,
    counter: &dyn TokenCounter,
    min_keep_steps: usize,
    strategy: &str,
    replace: &mut dyn FnMut(usize, &Message, usize) -> Option<Replacement>,
) -> Option<Compaction> {
    let counts = counter.count_each(messages);
    if counts.total <= target_tokens {
        return None;
    }
    let protected = protected_by_steps(messages, min_keep_steps);
    let walk = walk(messages, &counts, target_tokens, &protected, counter, replace)?;
    if walk.replaced.is_empty() {
        return None;
    }
    let (replaced, report) = walk.finish(strategy, target_tokens);
    let replacements =
        replaced.into_iter().map(|(index, replacement)| (index, replacement.message)).collect();
    Some(Compaction::replacing(replacements, report))
}
