//! The replay: the hooks run where an agent loop would run them, and each model call becomes a
//! [`Step`], with what it shares with the call before it (where the prompt cache breaks).

use compaction_core::{CompactionReport, STRATEGY_OBSERVATION_MASKING};
use compaction_hook::{AgentState, CompactionHook};
use compaction_model::{Message, Role, ToolSpec, STRATEGY_TOOL_RESULT_OFFLOADING};
use compaction_offload::{OffloadFailure, ToolResultOffloadHook};
use compaction_tokens::RunningCount;

use crate::recorded::Recorded;

/// One model call of the replay.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Step {
    /// 1 for the first call.
    pub step: usize,
    /// The index of the recorded message the call produced; the message count for the final
    /// call the transcript does not record.
    pub message: usize,
    /// Tokens of the request without compaction: the recorded conversation so far.
    pub without: usize,
    /// The hook's estimate of the request with compaction, before it ran.
    pub estimate: usize,
    /// Tokens of the request with compaction, as sent (after the hook).
    pub with: usize,
    /// Whether the estimate reached the threshold.
    pub triggered: bool,
    /// Whether the compactor rewrote the conversation.
    pub compacted: bool,
    /// What the provider counted for this call's prompt, when the log records it.
    pub provider: Option<usize>,
    /// Whether `without` is anchored on a count the provider made of this same conversation.
    pub anchored: bool,
    /// Tool results pruned so far.
    pub pruned: usize,
    /// Tool results offloaded so far.
    pub offloaded: usize,
    /// Observations masked so far (observation masking), counted apart from `pruned`.
    pub masked: usize,
    /// Tokens of the request with compaction that are the previous call's request unchanged:
    /// everything before the first message a compaction (or an offload) changed since then.
    /// The prompt cache can serve at most these.
    pub shared: usize,
    /// The first message (index in the conversation as sent) that a compaction or an offload
    /// changed since the previous call, if any: where the prompt cache breaks.
    pub first_changed: Option<usize>,
    /// Tokens of the reply: the provider's count where the log records it, else counted.
    pub output: usize,
    /// Whether the provider compacted the recorded conversation since the previous call (its
    /// cache broke there for a reason no replay shares).
    pub after_provider_compaction: bool,
    /// What the log records of this call: the provider's usage, time and model.
    pub recorded: Option<Recorded>,
}

/// What a replay produced: one step per model call, and the store writes the offload hook could
/// not make (the replay went on without them, the results staying in context).
#[derive(Debug, Default)]
#[non_exhaustive]
#[must_use]
pub struct Replayed {
    /// One step per model call, in order.
    pub steps: Vec<Step>,
    /// The offload hook's failed writes.
    pub failures: Vec<OffloadFailure>,
}

/// A replay of a recorded conversation with a [`CompactionHook`] (and optionally a
/// [`ToolResultOffloadHook`]) in the loop. It holds only borrowed settings, so one `Replay` can
/// run over many conversations, from many threads when its hooks' compactors allow it.
#[derive(Debug, Clone)]
pub struct Replay<'a> {
    hook: &'a CompactionHook,
    offload: Option<&'a ToolResultOffloadHook>,
    tools: Vec<ToolSpec>,
}

/// One conversation as a log holds it: the messages, the provider's records of its calls, and
/// where the provider compacted it.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct Recording<'a> {
    /// The messages, as recorded.
    pub messages: &'a [Message],
    /// What the log records of each call, by the index of the assistant message it produced,
    /// in order.
    pub calls: &'a [Recorded],
    /// The messages at which the provider compacted the conversation (a log read with its full
    /// history), in order: its counts after the first are of a conversation the replay does not
    /// hold, so they are shown and not used.
    pub provider_compactions: &'a [usize],
}

impl<'a> Recording<'a> {
    /// The conversation `messages`, with no records of its calls.
    pub fn new(messages: &'a [Message]) -> Self {
        Recording { messages, calls: &[], provider_compactions: &[] }
    }

    /// The same conversation with what the log records of its calls.
    #[must_use]
    pub fn with_calls(mut self, calls: &'a [Recorded]) -> Self {
        self.calls = calls;
        self
    }

    /// The same conversation, compacted by its provider at these messages.
    #[must_use]
    pub fn with_provider_compactions(mut self, messages: &'a [usize]) -> Self {
        self.provider_compactions = messages;
        self
    }
}

impl<'a> Replay<'a> {
    /// A replay running `hook` before every model call.
    pub fn new(hook: &'a CompactionHook) -> Self {
        Replay { hook, offload: None, tools: Vec::new() }
    }

    /// Also runs `offload` after each batch of tool results.
    #[must_use]
    pub fn with_offload(mut self, offload: &'a ToolResultOffloadHook) -> Self {
        self.offload = Some(offload);
        self
    }

    /// The tool specs sent with every request.
    #[must_use]
    pub fn with_tools(mut self, tools: Vec<ToolSpec>) -> Self {
        self.tools = tools;
        self
    }

    /// Replays `recording`, calling `progress` after each message. The provider's counts anchor
    /// the estimates up to the first provider compaction, and are only shown after it.
    pub fn run(&self, recording: Recording<'_>, progress: &mut dyn FnMut()) -> Replayed {
        let Recording { messages, calls, provider_compactions } = recording;
        let until = provider_compactions.iter().copied().filter(|&m| m > 0).min();
        let hook = self.hook;
        let counter = hook.counter();
        let mut state = AgentState::new(Vec::with_capacity(messages.len())).with_tools(self.tools.clone());
        // The recorded prefix only grows, so its count is kept incrementally too.
        let mut baseline = RunningCount::default();
        let mut steps: Vec<Step> = Vec::new();
        let mut failures = Vec::new();
        let mut tally = Tally::default();
        let mut records = calls.iter().peekable();
        // The provider's latest count of the recorded conversation: `(next, tokens)`, where
        // `tokens` covers the messages before `next`.
        let mut anchor: Option<(usize, usize)> = None;
        // The first message changed since the previous call (by an offload after it).
        let mut changed: Option<usize> = None;
        let mut compacted_by_provider = false;
        // What the provider counted beyond the messages the log holds (system prompt, tool
        // schemas), measured at the first call: it comes first in every prompt.
        let mut overhead = 0;

        let call = |baseline: &mut RunningCount,
                    steps: &[Step],
                    index: usize,
                    state: &mut AgentState,
                    changed: &mut Option<usize>,
                    overhead: usize,
                    tally: &mut Tally,
                    anchor: Option<(usize, usize)>,
                    recorded: Option<&Recorded>,
                    after_provider_compaction: bool| {
            let outcome = hook.run(state);
            if let Some(report) = &outcome.report {
                tally.add(rewritten(report));
            }
            if outcome.compacted {
                let first = outcome.report.as_ref().and_then(first_changed).unwrap_or(0);
                *changed = Some(changed.map_or(first, |c| c.min(first)));
            }
            // Without compaction the request is the recorded conversation so far: the
            // provider's count after the latest reply it counted, plus what came since; or
            // all of it, locally.
            let without = match anchor {
                Some((next, tokens)) => tokens + counter.count(&messages[next..index], &[]),
                None => baseline.count(counter, &messages[..index], &state.tools),
            };
            let with = hook.estimate(state);
            let previous = steps.last().map_or(0, |s| s.with);
            // Only the tail from the first changed message is counted again. The request as
            // sent is anchored on the provider's counts, which the local counter need not match
            // (the provider's tokenizer, context the log does not hold), so the tail's share of
            // the messages, counted locally, is taken of the messages' share of the request.
            let shared = match *changed {
                None => previous,
                Some(first) => {
                    let tail = state.messages().get(first..).map_or(0, |tail| counter.count(tail, &[]));
                    let all = state.count_with_tools(counter).max(1);
                    let messages_part = with.saturating_sub(overhead) as f64;
                    let kept = all.saturating_sub(tail) as f64 / all as f64;
                    (overhead.min(with) + (messages_part * kept) as usize).min(previous)
                }
            }
            .min(with);
            let output = match recorded {
                Some(recorded) => usize::try_from(recorded.output_tokens).unwrap_or(usize::MAX),
                None => messages.get(index).map_or(0, |m| counter.count(std::slice::from_ref(m), &[])),
            };
            Step {
                step: steps.len() + 1,
                message: index,
                without,
                estimate: outcome.estimated_tokens,
                with,
                triggered: outcome.triggered,
                compacted: outcome.compacted,
                provider: recorded.map(|r| usize::try_from(r.prompt_tokens()).unwrap_or(usize::MAX)),
                anchored: anchor.is_some(),
                pruned: tally.pruned,
                offloaded: tally.offloaded,
                masked: tally.masked,
                shared,
                first_changed: changed.take(),
                output,
                after_provider_compaction,
                recorded: recorded.cloned(),
            }
        };

        for (index, message) in messages.iter().enumerate() {
            let seen = records.next_if(|r| r.message == index);
            if until == Some(index) {
                // From here the provider counted a conversation it had compacted: no anchor.
                anchor = None;
                state.context_tokens = 0;
            }
            if provider_compactions.contains(&index) {
                compacted_by_provider = true;
            }
            let recorded = seen.filter(|_| until.is_none_or(|until| index < until));
            if message.role == Role::Assistant {
                let provider = seen.map(|r| usize::try_from(r.prompt_tokens()).unwrap_or(usize::MAX));
                // The first request: the provider counted what the log does not hold (the
                // system prompt, the tool schemas) beside the messages, so its count of this
                // request stands for the request, as the agent, which sends them, would know it.
                if let (None, true, Some(first)) =
                    (anchor, steps.is_empty(), provider.filter(|_| recorded.is_some()))
                {
                    if !messages[..index].iter().any(|m| m.role == Role::Assistant) {
                        anchor = Some((index, first));
                        state.context_tokens = first;
                        overhead = first.saturating_sub(counter.count(&messages[..index], &state.tools));
                    }
                }
                let step = call(
                    &mut baseline,
                    &steps,
                    index,
                    &mut state,
                    &mut changed,
                    overhead,
                    &mut tally,
                    anchor,
                    seen,
                    std::mem::take(&mut compacted_by_provider),
                );
                steps.push(step);
                state.step_count += 1;
            }
            state.push(message.clone());
            if let Some(recorded) = recorded {
                // The provider counted the recorded conversation; the simulated one is smaller
                // by what compaction has removed so far, measured locally.
                let tokens = usize::try_from(recorded.context_tokens()).unwrap_or(usize::MAX);
                let without = baseline.count(counter, &messages[..=index], &state.tools);
                let removed = without.saturating_sub(state.count_with_tools(counter));
                state.context_tokens = tokens.saturating_sub(removed).max(1);
                anchor = Some((index + 1, tokens));
            }
            let batch_ends = message.has_tool_call_result()
                && !messages.get(index + 1).is_some_and(Message::has_tool_call_result);
            if let (true, Some(offload)) = (batch_ends, self.offload) {
                let outcome = offload.run(&mut state);
                tally.offloaded += outcome.results.len();
                if let Some(&first) = outcome.offloaded.first() {
                    changed = Some(changed.map_or(first, |c| c.min(first)));
                }
                failures.extend(outcome.failures);
            }
            progress();
        }
        let answered = messages.last().is_none_or(|m| m.role == Role::Assistant || m.role == Role::System);
        if !answered {
            let step = call(
                &mut baseline,
                &steps,
                messages.len(),
                &mut state,
                &mut changed,
                overhead,
                &mut tally,
                anchor,
                None,
                compacted_by_provider,
            );
            steps.push(step);
        }
        Replayed { steps, failures }
    }
}

/// What compactions rewrote so far, by the strategy that rewrote it.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    pruned: usize,
    offloaded: usize,
    masked: usize,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.pruned += other.pruned;
        self.offloaded += other.offloaded;
        self.masked += other.masked;
    }
}

/// What one compaction rewrote, by the strategy that rewrote it (a chain's by its stages).
fn rewritten(report: &CompactionReport) -> Tally {
    let mut tally = Tally::default();
    if !report.stages.is_empty() {
        report.stages.iter().for_each(|stage| tally.add(rewritten(stage)));
        return tally;
    }
    let n = report.results.len();
    match report.strategy.as_str() {
        STRATEGY_TOOL_RESULT_OFFLOADING => tally.offloaded = n,
        STRATEGY_OBSERVATION_MASKING => tally.masked = n,
        _ => tally.pruned = n,
    }
    tally
}

/// The first message of the conversation a compaction was given that it changed: a rewritten
/// result, a cleared input, a removed or an inserted message. A chain's stages each describe
/// the conversation their stage was given, whose messages before its own first change are the
/// original's, so the smallest over the stages holds.
pub fn first_changed(report: &CompactionReport) -> Option<usize> {
    let own = report
        .results
        .iter()
        .map(|r| r.index)
        .chain(report.inputs_cleared.iter().map(|i| i.index))
        .chain(report.removed.first().copied())
        .chain(report.inserted.first().copied());
    own.chain(report.stages.iter().filter_map(first_changed)).min()
}
