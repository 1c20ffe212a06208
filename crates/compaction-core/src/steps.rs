//! Agent steps and the walk that rewrites tool results oldest first until a target is met.
//!
//! Any strategy that rewrites tool results in place (pruning here, offloading in the offload
//! crate) shares this walk, so they agree on which results are protected and when to stop.

use compaction_model::{Message, Role};
use compaction_tokens::{Measure, TokenCounter};

use crate::compactor::{Compaction, CompactionReport, Memo, ResultReport, Rewrite};
use crate::error::Error;

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

/// Which tool-result messages a walk leaves alone. Protection only ever covers the newest
/// messages, so it is kept as where it starts and, from there on, which messages it covers:
/// finding it looks at the tail of the conversation, not the whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Protection {
    from: usize,
    tail: Vec<bool>,
}

impl Protection {
    /// Protection of nothing in a conversation of `len` messages.
    fn none(len: usize) -> Self {
        Protection { from: len, tail: Vec::new() }
    }

    /// Protects the messages at `indices` (each at least `from`).
    fn of(len: usize, from: usize, indices: impl IntoIterator<Item = usize>) -> Self {
        let mut tail = vec![false; len - from];
        for index in indices {
            tail[index - from] = true;
        }
        Protection { from, tail }
    }

    /// Whether the message at `index` is protected.
    pub(crate) fn covers(&self, index: usize) -> bool {
        index >= self.from && self.tail.get(index - self.from).copied().unwrap_or(false)
    }
}

/// The agent steps that have results, newest first, as [`agent_step_spans`] finds them (each
/// `(first, end)`, with results at `first + 1..end`), found by reading back from the end.
///
/// A forward reading is in step with the backward one at every message without a tool result,
/// so each maximal run of result-carrying messages `[start, end)` is read on its own: after an
/// assistant message it is that message's step; after anything else, its first assistant
/// message (one carrying a result, then) opens a step holding the rest of the run, and the
/// messages before that are orphans.
fn steps_with_results_newest_first(messages: &[Message]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut end = messages.len();
    std::iter::from_fn(move || loop {
        while end > 0 && !messages[end - 1].has_tool_call_result() {
            end -= 1;
        }
        if end == 0 {
            return None;
        }
        let mut start = end - 1;
        while start > 0 && messages[start - 1].has_tool_call_result() {
            start -= 1;
        }
        let run_end = end;
        end = start;
        let opener = if start > 0 && messages[start - 1].is_from(Role::Assistant) {
            Some(start - 1)
        } else {
            (start..run_end).find(|&i| messages[i].is_from(Role::Assistant))
        };
        match opener {
            Some(first) if run_end > first + 1 => return Some((first, run_end)),
            _ => continue,
        }
    })
}

/// The assistant message whose step the result-carrying message at `index` belongs to, as
/// [`agent_step_spans`] would tell it; `None` for an orphan (or a step's own opener).
pub(crate) fn step_opener(messages: &[Message], index: usize) -> Option<usize> {
    let mut start = index;
    while start > 0 && messages[start - 1].has_tool_call_result() {
        start -= 1;
    }
    let opener = if start > 0 && messages[start - 1].is_from(Role::Assistant) {
        Some(start - 1)
    } else {
        (start..index).find(|&i| messages[i].is_from(Role::Assistant))
    };
    opener.filter(|&first| first < index)
}

/// Which messages the step rule protects: the results of the newest `min_keep_steps` steps that
/// have results. Steps without results are not counted. `min_keep_steps == 0` protects nothing.
pub(crate) fn protected_by_steps(messages: &[Message], min_keep_steps: usize) -> Protection {
    let steps: Vec<(usize, usize)> = steps_with_results_newest_first(messages).take(min_keep_steps).collect();
    match steps.last() {
        None => Protection::none(messages.len()),
        Some(&(oldest, _)) => {
            Protection::of(messages.len(), oldest + 1, steps.iter().flat_map(|&(first, end)| first + 1..end))
        }
    }
}

/// Which messages the per-result rule protects: the newest `keep` tool-result messages.
pub(crate) fn protected_by_results(messages: &[Message], keep: usize) -> Protection {
    let newest: Vec<usize> =
        (0..messages.len()).rev().filter(|&i| messages[i].has_tool_call_result()).take(keep).collect();
    match newest.last() {
        None => Protection::none(messages.len()),
        Some(&oldest) => Protection::of(messages.len(), oldest, newest.iter().copied()),
    }
}

/// The sizes a walk needs: the whole conversation's count, and the own count of each message
/// from `start` on (those before it are counted when asked for, which a walk rarely does).
#[derive(Debug)]
pub(crate) struct Sizes {
    start: usize,
    pub(crate) total: usize,
    each: Vec<usize>,
    /// The joined measure of every message but the last, where the counter's counts add up and
    /// the whole conversation was counted in one pass.
    measures: Option<Vec<Measure>>,
}

impl Sizes {
    /// Counts `messages` for a walk starting at `start`: in one `count_each` when that is the
    /// whole conversation (with the measures, where the counts add up), else the whole
    /// conversation's count and the tail's own counts.
    pub(crate) fn measure(
        messages: &[Message],
        start: usize,
        counter: &dyn TokenCounter,
    ) -> Result<Sizes, Error> {
        let start = start.min(messages.len());
        if start == 0 {
            if let Some(additive) = counter.additive() {
                let (counts, measures) = additive.count_each_measured(messages);
                let measures = measures.filter(|m| m.len() + 1 == messages.len());
                return Ok(Sizes { start, total: counts.total, each: counts.each, measures });
            }
            let counts = counter.try_count_each(messages).map_err(Error::Count)?;
            return Ok(Sizes { start, total: counts.total, each: counts.each, measures: None });
        }
        let each = counter.try_count_each(&messages[start..]).map_err(Error::Count)?.each;
        let total = counter.try_count(messages, &[]).map_err(Error::Count)?;
        Ok(Sizes { start, total, each, measures: None })
    }

    /// `counter.try_count_rewritten(messages, rewritten, &[])`: from the measures taken with the
    /// counts, measuring only the rewritten messages, where there are measures; else asked of
    /// the counter (which a running count answers as cheaply).
    pub(crate) fn count_rewritten(
        &self,
        messages: &[Message],
        rewritten: &[(usize, &Message)],
        counter: &dyn TokenCounter,
    ) -> Result<usize, Error> {
        let (Some(measures), Some(last), Some(additive)) =
            (&self.measures, messages.len().checked_sub(1), counter.additive())
        else {
            return counter.try_count_rewritten(messages, rewritten, &[]).map_err(Error::Count);
        };
        let mut before: Measure = measures.iter().copied().sum();
        let mut last_message = &messages[last];
        // Rewritten messages may share one stand-in: each is measured once.
        let mut measured: std::collections::HashMap<*const Message, Measure> =
            std::collections::HashMap::new();
        for &(index, message) in rewritten {
            if index == last {
                last_message = message;
            } else if index < last {
                let measure = match measured.get(&std::ptr::from_ref(message)) {
                    Some(measure) => *measure,
                    None => additive.measure_joined(message),
                };
                measured.insert(std::ptr::from_ref(message), measure);
                let old = measures[index];
                // The sum holds `old`, so taking it out cannot go below zero.
                before = Measure {
                    text: before.text - old.text + measure.text,
                    images: before.images - old.images + measure.images,
                    files: before.files - old.files + measure.files,
                };
            }
        }
        Ok(additive.count_after(before, last_message, &[]))
    }

    /// The own count of `messages[index]`. A counter whose `count_each` returned too few entries
    /// is asked directly rather than trusted with an index it does not have.
    pub(crate) fn own(
        &self,
        messages: &[Message],
        index: usize,
        counter: &dyn TokenCounter,
    ) -> Result<usize, Error> {
        match index.checked_sub(self.start).and_then(|offset| self.each.get(offset).copied()) {
            Some(own) => Ok(own),
            None => counter.try_count(std::slice::from_ref(&messages[index]), &[]).map_err(Error::Count),
        }
    }
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
pub(crate) type ReplaceFn<'a, M> =
    dyn FnMut(usize, &Message, usize) -> Result<Option<Replacement<M>>, Error> + 'a;

/// Walks oldest first over unprotected tool-result messages from `start` on, offering each to
/// `replace`, and stops once the running total is at or under `target_tokens`. `None` when the
/// conversation already fits; the first error of a count or of `replace` ends the walk.
///
/// `settled`, when given, is where the walk starts, and is moved past every message the walk
/// found settled: not a tool result, or declined by `replace` (which must then decline it
/// whatever the target, now and later), with nothing unsettled before it. So `replace` must
/// depend only on the message and its own count.
pub(crate) fn walk<M>(
    messages: &[Message],
    sizes: &Sizes,
    target_tokens: usize,
    protected: &Protection,
    counter: &dyn TokenCounter,
    replace: &mut ReplaceFn<'_, M>,
    mut settled: Option<&mut usize>,
) -> Result<Option<Walk<M>>, Error> {
    if sizes.total <= target_tokens {
        return Ok(None);
    }
    let start = settled.as_deref().copied().unwrap_or(0).min(messages.len());
    let mut current = sizes.total;
    let mut replaced = Vec::new();
    let mut results = Vec::new();
    // Whether every message walked so far is settled.
    let mut settling = true;
    for (index, message) in messages.iter().enumerate().skip(start) {
        if protected.covers(index) {
            settling = false;
            continue;
        }
        if message.has_tool_call_result() {
            let own = sizes.own(messages, index, counter)?;
            match replace(index, message, own)? {
                // A replacement that frees nothing would only make the conversation different.
                Some(replacement) if replacement.tokens_freed() > 0 => {
                    settling = false;
                    current = current.saturating_sub(replacement.tokens_freed());
                    results.extend(replacement.reports(index, message));
                    replaced.push((index, replacement));
                    if current <= target_tokens {
                        break;
                    }
                    continue;
                }
                _ => {}
            }
        }
        if settling {
            if let Some(settled) = settled.as_deref_mut() {
                *settled = index + 1;
            }
        }
    }
    Ok(Some(Walk { tokens_before: sizes.total, tokens_after: current, replaced, results }))
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
/// The conversation is counted once, with [`TokenCounter::try_count_each`]; if the total already
/// fits, the answer is `Ok(None)`. Otherwise every message that carries a tool result, outside the
/// newest `min_keep_steps` agent steps that have results (see [`agent_step_spans`]), is offered
/// to `replace` with its index and its own token count, oldest first. A replacement is kept only
/// when it frees at least one token; the running total drops by what each one frees, and the
/// walk stops as soon as it is at or under the target (the report's `tokens_after` is then the
/// conversation built counted as a whole, its `estimated_tokens_after` that running total).
/// Results of one step are protected
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
///
/// # Errors
///
/// [`Error::Count`] when the counter could not count, or the first error `replace` returns
/// (a callback that counts returns its count's failure).
pub fn replace_tool_results_until_target(
    messages: &[Message],
    target_tokens: usize,
    counter: &dyn TokenCounter,
    min_keep_steps: usize,
    strategy: &str,
    replace: &mut ReplaceFn<'_, Message>,
) -> Result<Option<Compaction>, Error> {
    replace_tool_results_with_memo(messages, target_tokens, counter, min_keep_steps, strategy, None, replace)
}

/// [`replace_tool_results_until_target`] for a caller that walks one conversation again and
/// again: the walk starts where `memo` says every message is settled, and moves it on (see
/// [`Memo`]). `replace` must then decline a message only for reasons that hold whatever the
/// target and whatever comes after: the message itself and its own count.
///
/// # Errors
///
/// As [`replace_tool_results_until_target`].
pub fn replace_tool_results_with_memo(
    messages: &[Message],
    target_tokens: usize,
    counter: &dyn TokenCounter,
    min_keep_steps: usize,
    strategy: &str,
    memo: Option<&mut Memo>,
    replace: &mut ReplaceFn<'_, Message>,
) -> Result<Option<Compaction>, Error> {
    let start = memo.as_deref().map_or(0, |m| m.settled);
    let sizes = Sizes::measure(messages, start, counter)?;
    if sizes.total <= target_tokens {
        return Ok(None);
    }
    let protected = protected_by_steps(messages, min_keep_steps);
    let settled = memo.map(|m| &mut m.settled);
    let Some(walk) = walk(messages, &sizes, target_tokens, &protected, counter, replace, settled)? else {
        return Ok(None);
    };
    if walk.replaced.is_empty() {
        return Ok(None);
    }
    let (replaced, report) = walk.finish(strategy, target_tokens);
    let replacements: Vec<(usize, Message)> =
        replaced.into_iter().map(|(index, replacement)| (index, replacement.message)).collect();
    let rewritten: Vec<(usize, &Message)> =
        replacements.iter().map(|(index, message)| (*index, message)).collect();
    let report = report.counted(sizes.count_rewritten(messages, &rewritten, counter)?);
    // The walk visits each message once, so no index repeats: no check is needed.
    let rewrites =
        replacements.into_iter().map(|(index, message)| (index, Rewrite::Message(message))).collect();
    Ok(Some(Compaction::rewriting(rewrites, report)))
}

#[cfg(test)]
mod tests {
    use compaction_model::{JsonObject, Part, ToolCall, ToolCallResult};

    use super::*;

    /// The step rule as `agent_step_spans` reads it forward, one flag per message.
    fn forward_protection(messages: &[Message], keep: usize) -> Vec<bool> {
        let mut protected = vec![false; messages.len()];
        let with_results: Vec<(usize, usize)> =
            agent_step_spans(messages, 0).into_iter().filter(|&(first, end)| end > first + 1).collect();
        for &(first, end) in &with_results[with_results.len().saturating_sub(keep)..] {
            protected[first + 1..end].iter_mut().for_each(|p| *p = true);
        }
        protected
    }

    /// Every conversation of up to six messages of five kinds — plain user, plain assistant,
    /// an assistant carrying a result, a tool result, a user message carrying a result — is
    /// protected alike read backward and forward, and each result's step opener agrees.
    #[test]
    fn backward_reading_matches_the_forward_one() {
        let result = || {
            Part::ToolCallResult(ToolCallResult::new(
                "r".into(),
                ToolCall::new("t", JsonObject::new()),
                false,
            ))
        };
        let kinds = |kind: usize| match kind {
            0 => Message::user("u"),
            1 => Message::assistant("a"),
            2 => Message { parts: vec![result()], ..Message::assistant("a") },
            3 => Message {
                parts: vec![result()],
                ..Message::tool("r", ToolCall::new("t", JsonObject::new()), false)
            },
            _ => Message { parts: vec![result()], ..Message::user("u") },
        };
        for len in 0..=6u32 {
            for code in 0..5usize.pow(len) {
                let messages: Vec<Message> = (0..len).map(|i| kinds(code / 5usize.pow(i) % 5)).collect();
                for keep in 0..4 {
                    let backward = protected_by_steps(&messages, keep);
                    let forward = forward_protection(&messages, keep);
                    for (index, &flag) in forward.iter().enumerate() {
                        assert_eq!(
                            backward.covers(index),
                            flag,
                            "keep {keep}, message {index}, kinds {code}"
                        );
                    }
                }
                let mut opener = vec![None; messages.len()];
                for (first, end) in agent_step_spans(&messages, 0) {
                    opener[first + 1..end].iter_mut().for_each(|o| *o = Some(first));
                }
                for index in (0..messages.len()).filter(|&i| messages[i].has_tool_call_result()) {
                    assert_eq!(step_opener(&messages, index), opener[index], "message {index}, kinds {code}");
                }
            }
        }
    }
}
