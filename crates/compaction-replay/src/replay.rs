//! The replay: the hooks run where an agent loop would run them, and each model call becomes a
//! [`Step`], with what it shares with the call before it (where the prompt cache breaks).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasher, Hash, Hasher};
use std::time::Duration;

use compaction_core::{CompactionReport, STRATEGY_OBSERVATION_MASKING};
use compaction_hook::{AgentState, CompactionHook, Error as HookError};
use compaction_model::{Arguments, Message, Role, ToolCall, ToolSpec, STRATEGY_TOOL_RESULT_OFFLOADING};
use compaction_offload::{OffloadFailure, ToolResultOffloadHook};
use compaction_tokens::{Additive, Measure, TokenCounter};

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
    /// Refetches so far: calls the recorded agent made (up to and including this one's) with the
    /// same tool name and arguments as an earlier call whose result a compaction or an offload
    /// had rewritten (pruned, masked, offloaded) or removed before this call.
    pub refetches: usize,
    /// Tokens of the refetches' results so far, counted with the hook's counter: what the agent
    /// paid again for what compaction took out.
    pub refetch_tokens: usize,
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
    /// What the log records of this call: the provider's usage, time and model. Boxed: a long
    /// run makes a million steps, most logs record no usage, and a record is larger than the
    /// rest of the step.
    pub recorded: Option<Box<Recorded>>,
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
    ///
    /// The replayed conversation is a copy of the recorded one, so the two are held side by
    /// side; [`Replay::run_owned`] holds the messages once.
    ///
    /// # Errors
    ///
    /// [`compaction_hook::Error::Count`] when the hook's counter could not count (a provider's
    /// counter): the replay stops there, as a simulation with a size it does not know would be
    /// wrong. A hook that fails otherwise (a summary that could not be had) is no error: the
    /// step's outcome says so, and the replay goes on, as an agent would.
    pub fn run(&self, recording: Recording<'_>, progress: &mut dyn FnMut()) -> Result<Replayed, HookError> {
        let Recording { messages, calls, provider_compactions } = recording;
        self.replay(Store::Borrowed(messages), calls, provider_compactions, progress)
    }

    /// [`Replay::run`] of the conversation `messages`, with what the log records of its `calls`
    /// and its `provider_compactions` (as [`Recording`] takes them), taking the messages: the
    /// same steps, with about half the memory for a long conversation.
    ///
    /// The replayed conversation needs its own copy of each message, which compaction rewrites;
    /// the recorded one is needed only until the counts that follow it have measured it. With a
    /// counter whose counts add up message by message ([`TokenCounter::additive`]), each
    /// recorded message is let go once measured (but for its role), so each is held once.
    ///
    /// # Errors
    ///
    /// As [`Replay::run`].
    pub fn run_owned(
        &self,
        messages: Vec<Message>,
        calls: &[Recorded],
        provider_compactions: &[usize],
        progress: &mut dyn FnMut(),
    ) -> Result<Replayed, HookError> {
        self.replay(Store::Owned { messages, offset: 0, kept_from: 0 }, calls, provider_compactions, progress)
    }

    fn replay(
        &self,
        mut log: Store<'_>,
        calls: &[Recorded],
        provider_compactions: &[usize],
        progress: &mut dyn FnMut(),
    ) -> Result<Replayed, HookError> {
        let until = provider_compactions.iter().copied().filter(|&m| m > 0).min();
        let hook = self.hook;
        let counter = hook.counter();
        let mut state = AgentState::new(Vec::with_capacity(log.len())).with_tools(self.tools.clone());
        // The recorded prefix only grows and is never rewritten, so its count is kept
        // incrementally too, as a running sum.
        let mut baseline = Baseline::default();
        // One step per assistant message, and perhaps one for a final call: room for all of
        // them at once, each kept small until the replay ends (a long run makes a million).
        let calls_made = log.range(0..log.len()).iter().filter(|m| m.role == Role::Assistant).count() + 1;
        let mut steps = Steps::with_capacity(calls_made);
        let mut failures = Vec::new();
        let mut tally = Tally::default();
        let mut refetches = Refetches::default();
        let mut records = calls.iter().peekable();
        // The provider's latest count of the recorded conversation: `(next, tokens)`, where
        // `tokens` covers the messages before `next`.
        let mut anchor: Option<(usize, usize)> = None;
        // The first message changed since the previous call (by an offload after it).
        let mut changed: Option<usize> = None;
        let mut compacted_by_provider = false;
        // When the previous call was made, as the log records it: the pause before a call tells
        // a hook's cache-aware rule whether the prompt cache has gone cold.
        let mut last_call_ms: Option<i64> = None;
        // What the provider counted beyond the messages the log holds (system prompt, tool
        // schemas), measured at the first call: it comes first in every prompt.
        let mut overhead = 0;

        let call = |messages: &Store<'_>,
                    baseline: &mut Baseline,
                    steps: &Steps,
                    index: usize,
                    state: &mut AgentState,
                    changed: &mut Option<usize>,
                    overhead: usize,
                    tally: &mut Tally,
                    refetches: &mut Refetches,
                    anchor: Option<(usize, usize)>,
                    recorded: Option<&Recorded>,
                    after_provider_compaction: bool| {
            let outcome = hook.run(state);
            if let Some(report) = &outcome.report {
                tally.add(rewritten(report));
                refetches.rewritten(report, state.messages());
            }
            if outcome.compacted {
                let first = outcome.report.as_ref().and_then(CompactionReport::first_changed).unwrap_or(0);
                *changed = Some(changed.map_or(first, |c| c.min(first)));
            }
            // Without compaction the request is the recorded conversation so far: the
            // provider's count after the latest reply it counted, plus what came since; or
            // all of it, locally.
            let without = match anchor {
                Some((next, tokens)) => {
                    tokens + counter.try_count(messages.range(next..index), &[]).map_err(HookError::Count)?
                }
                None => count_prefix(baseline, counter, messages, index, &state.tools)
                    .map_err(HookError::Count)?,
            };
            let with = hook.try_estimate(state)?;
            let previous = steps.last().map_or(0, |s| s.with);
            // Only the tail from the first changed message is counted again. The request as
            // sent is anchored on the provider's counts, which the local counter need not match
            // (the provider's tokenizer, context the log does not hold), so the tail's share of
            // the messages, counted locally, is taken of the messages' share of the request.
            let shared = match *changed {
                None => previous,
                Some(first) => {
                    let tail = match state.messages().get(first..) {
                        Some(tail) => counter.try_count(tail, &[]).map_err(HookError::Count)?,
                        None => 0,
                    };
                    let all = state.try_count_with_tools(counter).map_err(HookError::Count)?.max(1);
                    let messages_part = with.saturating_sub(overhead) as f64;
                    let kept = all.saturating_sub(tail) as f64 / all as f64;
                    (overhead.min(with) + (messages_part * kept) as usize).min(previous)
                }
            }
            .min(with);
            let output = match recorded {
                Some(recorded) => usize::try_from(recorded.output_tokens).unwrap_or(usize::MAX),
                None => match messages.get(index) {
                    Some(message) => {
                        counter.try_count(std::slice::from_ref(message), &[]).map_err(HookError::Count)?
                    }
                    None => 0,
                },
            };
            Ok::<Step, HookError>(Step {
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
                refetches: refetches.count,
                refetch_tokens: refetches.tokens,
                shared,
                first_changed: changed.take(),
                output,
                after_provider_compaction,
                recorded: recorded.cloned().map(Box::new),
            })
        };

        for index in 0..log.len() {
            let messages = &log;
            let Some(message) = messages.get(index) else { break };
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
                let at = seen.and_then(|r| r.timestamp_ms);
                state.idle = match (last_call_ms, at) {
                    (Some(last), Some(at)) => {
                        Some(Duration::from_millis(u64::try_from(at - last).unwrap_or(0)))
                    }
                    _ => None,
                };
                last_call_ms = at.or(last_call_ms);
                let provider = seen.map(|r| usize::try_from(r.prompt_tokens()).unwrap_or(usize::MAX));
                // The first request: the provider counted what the log does not hold (the
                // system prompt, the tool schemas) beside the messages, so its count of this
                // request stands for the request, as the agent, which sends them, would know it.
                if let (None, true, Some(first)) =
                    (anchor, steps.is_empty(), provider.filter(|_| recorded.is_some()))
                {
                    // Nothing is let go before the first call.
                    let before = messages.range(0..index);
                    if !before.iter().any(|m| m.role == Role::Assistant) {
                        anchor = Some((index, first));
                        state.context_tokens = first;
                        overhead = first.saturating_sub(
                            counter.try_count(before, &state.tools).map_err(HookError::Count)?,
                        );
                    }
                }
                let step = call(
                    messages,
                    &mut baseline,
                    &steps,
                    index,
                    &mut state,
                    &mut changed,
                    overhead,
                    &mut tally,
                    &mut refetches,
                    anchor,
                    seen,
                    std::mem::take(&mut compacted_by_provider),
                )?;
                steps.push(step);
                state.step_count += 1;
            }
            let has_result = message.has_tool_call_result();
            // The replayed conversation takes the recorded message; the log keeps a copy for
            // the counts that still read it, until it is let go of.
            let Some(taken) = log.take(index) else { break };
            state.push(taken);
            let arrived = match state.messages().last() {
                Some(message) if has_result => {
                    refetches.arrived(message, counter).map_err(HookError::Count)?
                }
                _ => false,
            };
            if arrived {
                // The results answer the calls of the latest step's reply.
                if let Some(last) = steps.last_mut() {
                    (last.refetches, last.refetch_tokens) = (refetches.count, refetches.tokens);
                }
            }
            if let Some(recorded) = recorded {
                // The provider counted the recorded conversation; the simulated one is smaller
                // by what compaction has removed so far, measured locally.
                let tokens = usize::try_from(recorded.context_tokens()).unwrap_or(usize::MAX);
                let without = count_prefix(&mut baseline, counter, &log, index + 1, &state.tools)
                    .map_err(HookError::Count)?;
                let removed =
                    without.saturating_sub(state.try_count_with_tools(counter).map_err(HookError::Count)?);
                state.context_tokens = tokens.saturating_sub(removed).max(1);
                anchor = Some((index + 1, tokens));
            }
            let batch_ends = has_result && !log.get(index + 1).is_some_and(Message::has_tool_call_result);
            // The counts to come measure no message before this one again, nor any before the
            // anchor's (a stretch from there is counted whole); those measured may go. Not before
            // the first call, whose overhead is counted of all the messages before it.
            if !steps.is_empty() {
                let needed = anchor.map_or(index, |(next, _)| next.min(index));
                log.let_go(needed.min(baseline.measured()));
            }
            if let (true, Some(offload)) = (batch_ends, self.offload) {
                let outcome = offload.run(&mut state);
                tally.offloaded += outcome.results.len();
                for result in &outcome.results {
                    let at = (result.at.index, result.at.position);
                    refetches.lose(result.call_id.as_deref(), at, &result.tool_name, state.messages());
                }
                if let Some(&first) = outcome.offloaded.first() {
                    changed = Some(changed.map_or(first, |c| c.min(first)));
                }
                failures.extend(outcome.failures);
            }
            progress();
        }
        let messages = &log;
        let last = messages.len().checked_sub(1).and_then(|last| messages.get(last));
        let answered = last.is_none_or(|m| m.role == Role::Assistant || m.role == Role::System);
        if !answered {
            let step = call(
                messages,
                &mut baseline,
                &steps,
                messages.len(),
                &mut state,
                &mut changed,
                overhead,
                &mut tally,
                &mut refetches,
                anchor,
                None,
                compacted_by_provider,
            )?;
            steps.push(step);
        }
        // The conversation goes before the steps are made whole, in the memory it leaves.
        drop((state, refetches, log));
        Ok(Replayed { steps: steps.into_vec(), failures })
    }
}

/// The steps of a replay while it runs: the latest whole, the others packed, each number in 32
/// bits when it fits (almost all do: counts of tokens and messages) and else kept apart, and the
/// step's number its place. A long run makes a million steps, held beside the conversation until
/// the replay ends; packed, each is 64 bytes instead of 144.
#[derive(Debug, Default)]
struct Steps {
    packed: Vec<Packed>,
    /// The numbers that do not fit, by step index and field.
    wide: HashMap<(usize, usize), usize>,
    last: Option<Step>,
}

/// A packed step: its numbers (see [`Steps::pack`]), its flags and its record.
#[derive(Debug)]
struct Packed {
    numbers: [u32; 13],
    flags: u8,
    recorded: Option<Box<Recorded>>,
}

/// A packed number kept in [`Steps::wide`].
const WIDE: u32 = u32::MAX - 1;
/// A packed `None`.
const NONE: u32 = u32::MAX;

impl Steps {
    fn with_capacity(capacity: usize) -> Self {
        Steps { packed: Vec::with_capacity(capacity.saturating_sub(1)), ..Steps::default() }
    }

    fn len(&self) -> usize {
        self.packed.len() + usize::from(self.last.is_some())
    }

    fn is_empty(&self) -> bool {
        self.last.is_none()
    }

    fn last(&self) -> Option<&Step> {
        self.last.as_ref()
    }

    fn last_mut(&mut self) -> Option<&mut Step> {
        self.last.as_mut()
    }

    fn push(&mut self, step: Step) {
        if let Some(previous) = self.last.replace(step) {
            let packed = self.pack(previous);
            self.packed.push(packed);
        }
    }

    /// The step at index `self.packed.len()`, packed.
    fn pack(&mut self, step: Step) -> Packed {
        let index = self.packed.len();
        let mut number = |field: usize, value: Option<usize>| match value {
            None => NONE,
            Some(value) => match u32::try_from(value) {
                Ok(small) if small < WIDE => small,
                _ => {
                    self.wide.insert((index, field), value);
                    WIDE
                }
            },
        };
        let numbers = [
            number(0, Some(step.message)),
            number(1, Some(step.without)),
            number(2, Some(step.estimate)),
            number(3, Some(step.with)),
            number(4, step.provider),
            number(5, Some(step.pruned)),
            number(6, Some(step.offloaded)),
            number(7, Some(step.masked)),
            number(8, Some(step.refetches)),
            number(9, Some(step.refetch_tokens)),
            number(10, Some(step.shared)),
            number(11, step.first_changed),
            number(12, Some(step.output)),
        ];
        let flags = u8::from(step.triggered)
            | u8::from(step.compacted) << 1
            | u8::from(step.anchored) << 2
            | u8::from(step.after_provider_compaction) << 3;
        Packed { numbers, flags, recorded: step.recorded }
    }

    /// Every step, whole, in order.
    fn into_vec(self) -> Vec<Step> {
        let Steps { packed, wide, last } = self;
        let unpack = |(index, packed): (usize, Packed)| {
            let number = |field: usize| match packed.numbers[field] {
                NONE => None,
                WIDE => wide.get(&(index, field)).copied(),
                small => Some(small as usize),
            };
            let value = |field: usize| number(field).unwrap_or_default();
            Step {
                step: index + 1,
                message: value(0),
                without: value(1),
                estimate: value(2),
                with: value(3),
                triggered: packed.flags & 1 != 0,
                compacted: packed.flags & 2 != 0,
                provider: number(4),
                anchored: packed.flags & 4 != 0,
                pruned: value(5),
                offloaded: value(6),
                masked: value(7),
                refetches: value(8),
                refetch_tokens: value(9),
                shared: value(10),
                first_changed: number(11),
                output: value(12),
                after_provider_compaction: packed.flags & 8 != 0,
                recorded: packed.recorded,
            }
        };
        packed.into_iter().enumerate().map(unpack).chain(last).collect()
    }
}

/// `counter`'s count of the recorded prefix `log[..end]` sent with `tools`: from the running sum
/// for a counter whose counts add up (which cannot fail), else asked of the counter itself.
fn count_prefix(
    baseline: &mut Baseline,
    counter: &dyn TokenCounter,
    log: &Store<'_>,
    end: usize,
    tools: &[ToolSpec],
) -> Result<usize, compaction_tokens::Error> {
    match counter.additive() {
        Some(additive) if end > 0 => Ok(baseline.count(additive, log, end, tools)),
        _ => counter.try_count(log.range(0..end), tools),
    }
}

/// The running count of the recorded prefix, for a counter whose counts add up: the sum of the
/// joined measures of its messages but the last, each measured once. The prefix only grows and
/// no recorded message is rewritten, so no message's own measure is kept (a long run holds
/// millions of messages).
#[derive(Debug, Default)]
struct Baseline {
    /// How many leading messages the sum covers: no count reads them again.
    measured: usize,
    /// Their joined measures, added up.
    sum: Measure,
}

impl Baseline {
    /// How many leading messages no count reads again.
    fn measured(&self) -> usize {
        self.measured
    }

    /// [`Additive::count_after`] of the non-empty prefix `log[..end]` sent with `tools`,
    /// measuring the messages not measured before; `end` is never less than at the last call.
    fn count(&mut self, additive: &dyn Additive, log: &Store<'_>, end: usize, tools: &[ToolSpec]) -> usize {
        let last = end - 1;
        for message in log.range(self.measured.min(last)..last) {
            self.sum += additive.measure_joined(message);
        }
        self.measured = self.measured.max(last);
        match log.get(last) {
            Some(message) => additive.count_after(self.sum, message, tools),
            None => 0,
        }
    }
}

/// The recorded messages, borrowed, or owned and let go of once measured.
enum Store<'m> {
    Borrowed(&'m [Message]),
    /// `messages` are the recorded messages from `offset` on: those before are gone. Of them,
    /// those before `kept_from` are let go of, each a message of its role with nothing in it,
    /// until they are a quarter of the rest: then they go too, the rest in a vector of its size.
    Owned {
        messages: Vec<Message>,
        offset: usize,
        kept_from: usize,
    },
}

impl Store<'_> {
    /// How many messages were recorded, those let go of included.
    fn len(&self) -> usize {
        match self {
            Store::Borrowed(messages) => messages.len(),
            Store::Owned { messages, offset, .. } => offset + messages.len(),
        }
    }

    /// The recorded messages `range`, none of them gone (let go of, they are their roles alone).
    ///
    /// # Panics
    ///
    /// When `range` starts before a message that is gone: the replay asks only for messages its
    /// counts have not measured, and lets go only of those measured.
    fn range(&self, range: std::ops::Range<usize>) -> &[Message] {
        match self {
            Store::Borrowed(messages) => &messages[range],
            Store::Owned { messages, offset, .. } => &messages[range.start - offset..range.end - offset],
        }
    }

    /// The recorded message at `index`, if it is not gone.
    fn get(&self, index: usize) -> Option<&Message> {
        match self {
            Store::Borrowed(messages) => messages.get(index),
            Store::Owned { messages, offset, .. } => messages.get(index.checked_sub(*offset)?),
        }
    }

    /// The recorded message at `index`, for the replayed conversation: a borrowed one cloned; an
    /// owned one moved out, a copy left in its place for the counts that still read it (until it
    /// is let go of, soon after). So the replayed conversation holds the messages as they were
    /// read, and the copies are made and dropped one step at a time, in the same memory.
    fn take(&mut self, index: usize) -> Option<Message> {
        match self {
            Store::Borrowed(messages) => messages.get(index).cloned(),
            Store::Owned { messages, offset, .. } => {
                let slot = messages.get_mut(index.checked_sub(*offset)?)?;
                let copy = slot.clone();
                Some(std::mem::replace(slot, copy))
            }
        }
    }

    /// Lets go of the owned messages before `end`, which no count reads again.
    fn let_go(&mut self, end: usize) {
        let Store::Owned { messages, offset, kept_from } = self else { return };
        let end = end.min(*offset + messages.len());
        for message in messages.get_mut(*kept_from - *offset..end.saturating_sub(*offset)).unwrap_or_default()
        {
            let role = message.role;
            *message = Message { role, parts: Vec::new(), name: None, meta: Default::default() };
        }
        *kept_from = (*kept_from).max(end);
        // The emptied messages are dropped once they are a quarter of the rest, the rest moved
        // to a vector of its size (an allocator may keep a shrunk vector where it was, whole), so
        // the log shrinks as the replayed conversation grows: the two together are the old
        // vector and the new only while the replay is young and holds little else (each message
        // is moved about four times).
        let emptied = *kept_from - *offset;
        if emptied > 0 && emptied * 4 >= messages.len() - emptied {
            let mut rest = Vec::with_capacity(messages.len() - emptied);
            rest.extend(messages.drain(emptied..));
            *messages = rest;
            *offset = *kept_from;
        }
    }
}

/// A tool call as a refetch recognises it: its tool name and its arguments, the raw ones when
/// the provider sent no JSON object, else the object's compact JSON with its keys sorted.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CallKey {
    tool_name: String,
    arguments: KeyText,
}

/// A call key's arguments: the call's own text, shared with it, when it already is the key (its
/// top-level keys sorted, as most calls' are), else a text of the key's own. Compared and hashed
/// as the text: a long run makes a call every few hundred bytes of log, each kept here.
#[derive(Debug)]
enum KeyText {
    Shared(Arguments),
    Own(String),
}

impl KeyText {
    fn as_str(&self) -> &str {
        match self {
            KeyText::Shared(arguments) => arguments.as_json(),
            KeyText::Own(text) => text,
        }
    }
}

impl PartialEq for KeyText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for KeyText {}

impl Hash for KeyText {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

fn call_key(call: &ToolCall) -> CallKey {
    let arguments = match &call.raw_arguments {
        Some(raw) => KeyText::Own(raw.clone()),
        None => {
            let arguments = call.arguments.to_map();
            if arguments.keys().is_sorted() {
                // The text is the object's compact JSON, keys in order: already sorted.
                KeyText::Shared(call.arguments.clone())
            } else {
                let sorted: BTreeMap<&String, &serde_json::Value> = arguments.iter().collect();
                KeyText::Own(serde_json::to_string(&sorted).unwrap_or_default())
            }
        }
    };
    CallKey { tool_name: call.tool_name.clone(), arguments }
}

/// What the replay keeps to find refetches: which calls' results are in context as the tool
/// returned them, and which a compaction or an offload has taken out since.
#[derive(Debug, Default)]
///
/// Each call is kept once, in `keys`, and named by its number there elsewhere: a long run makes a
/// call every few hundred bytes of log, and each id names one.
struct Refetches {
    /// Each distinct call seen, numbered in the order first seen.
    keys: HashMap<CallKey, usize>,
    /// The call each call id names, for the reports, which name results by id.
    by_id: Ids,
    /// Calls whose latest result is in context as the tool returned it.
    in_context: HashSet<usize>,
    /// Calls whose latest result was rewritten or removed.
    lost: HashSet<usize>,
    /// Refetches so far.
    count: usize,
    /// Tokens of their results.
    tokens: usize,
}

impl Refetches {
    /// Takes in the results of `message`, just added to the conversation; whether one of them
    /// answers a refetch.
    fn arrived(
        &mut self,
        message: &Message,
        counter: &dyn TokenCounter,
    ) -> Result<bool, compaction_tokens::Error> {
        let mut found = false;
        let single = message.tool_call_results().nth(1).is_none();
        for result in message.tool_call_results() {
            let key = self.intern(&result.origin);
            if let Some(id) = &result.origin.id {
                self.by_id.insert(id, key);
            }
            if self.lost.remove(&key) {
                found = true;
                self.count += 1;
                self.tokens += if single {
                    counter.try_count(std::slice::from_ref(message), &[])?
                } else {
                    let alone = Message::tool(result.result.clone(), result.origin.clone(), result.error);
                    counter.try_count(&[alone], &[])?
                };
            }
            self.in_context.insert(key);
        }
        Ok(found)
    }

    /// Notes a result rewritten: by its call id, or else by where it sits in `messages` (the
    /// conversation it was rewritten in) when the tool there has its name.
    fn lose(
        &mut self,
        call_id: Option<&str>,
        (index, position): (usize, usize),
        tool: &str,
        messages: &[Message],
    ) {
        let key = match call_id.and_then(|id| self.by_id.get(id)) {
            Some(key) => Some(key),
            None => messages
                .get(index)
                .and_then(|message| message.tool_call_results().nth(position))
                .map(|result| &result.origin)
                .filter(|origin| origin.tool_name == tool)
                .map(|origin| self.intern(origin)),
        };
        if let Some(key) = key {
            self.in_context.remove(&key);
            self.lost.insert(key);
        }
    }

    /// Notes what a compaction rewrote or removed; `messages` is the conversation after it.
    fn rewritten(&mut self, report: &CompactionReport, messages: &[Message]) {
        self.lose_results(report, messages);
        if removes(report) {
            // The results no longer in the conversation, whatever index they had.
            let present: HashSet<usize> = messages
                .iter()
                .flat_map(Message::tool_call_results)
                .filter_map(|r| self.number(&r.origin))
                .collect();
            let gone: Vec<usize> =
                self.in_context.iter().filter(|k| !present.contains(*k)).copied().collect();
            for key in gone {
                self.in_context.remove(&key);
                self.lost.insert(key);
            }
        }
    }

    /// The number of `call` among the calls seen, if it was seen.
    fn number(&self, call: &ToolCall) -> Option<usize> {
        self.keys.get(&call_key(call)).copied()
    }

    /// The number of `call`, numbered now if it was not seen before.
    fn intern(&mut self, call: &ToolCall) -> usize {
        let next = self.keys.len();
        *self.keys.entry(call_key(call)).or_insert(next)
    }

    fn lose_results(&mut self, report: &CompactionReport, messages: &[Message]) {
        for result in &report.results {
            self.lose(
                result.call_id.as_deref(),
                (result.index, result.position),
                &result.tool_name,
                messages,
            );
        }
        for stage in &report.stages {
            self.lose_results(stage, messages);
        }
    }
}

/// Call ids and the call each names, the latest named for an id given twice. The ids are kept in
/// one text, and the table holds where each is in it: a long run has a million ids, which as
/// `String`s in a `HashMap` cost about four times their bytes. An id or a number past 32 bits
/// is kept in `wide` (never, but for a text of ids over 4 GB).
#[derive(Debug, Default)]
struct Ids {
    text: String,
    table: hashbrown::HashTable<IdPlace>,
    wide: HashMap<String, usize>,
    hasher: std::hash::RandomState,
}

/// Where an id is in [`Ids::text`], and the call it names.
#[derive(Debug, Clone, Copy)]
struct IdPlace {
    start: u32,
    end: u32,
    call: u32,
}

impl Ids {
    /// Notes that `id` names `call`.
    fn insert(&mut self, id: &str, call: usize) {
        let Ids { text, table, wide, hasher } = self;
        let hash = hasher.hash_one(id);
        let start = text.len();
        let place = (u32::try_from(start), u32::try_from(start + id.len()), u32::try_from(call));
        let (Ok(start), Ok(end), Ok(call32)) = place else {
            wide.insert(id.to_owned(), call);
            return;
        };
        wide.remove(id);
        let text_of = |place: &IdPlace| &text[place.start as usize..place.end as usize];
        if let Some(place) = table.find_mut(hash, |place| text_of(place) == id) {
            place.call = call32;
            return;
        }
        table.insert_unique(hash, IdPlace { start, end, call: call32 }, |place| {
            hasher.hash_one(text_of(place))
        });
        text.push_str(id);
    }

    /// The call `id` names, if it was seen.
    fn get(&self, id: &str) -> Option<usize> {
        if let Some(&call) = self.wide.get(id) {
            return Some(call);
        }
        let text_of = |place: &IdPlace| &self.text[place.start as usize..place.end as usize];
        self.table
            .find(self.hasher.hash_one(id), |place| text_of(place) == id)
            .map(|place| place.call as usize)
    }
}

/// Whether a compaction removed messages (a sliding window, a summary), in any of its stages.
fn removes(report: &CompactionReport) -> bool {
    !report.removed.is_empty() || report.stages.iter().any(removes)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory (issue 31, item 13): the steps are packed while the replay runs and come back
    /// whole, numbers that do not fit in 32 bits, `None`s and a step's record included.
    #[test]
    fn packed_steps_come_back_whole() {
        let huge = usize::MAX;
        let made: Vec<Step> = (0..6)
            .map(|i| Step {
                step: i + 1,
                message: [3, huge, u32::MAX as usize, WIDE as usize, 0, 7][i],
                without: 1_000 * i,
                estimate: (u32::MAX as usize - 2) + i,
                with: 900 * i,
                triggered: i % 2 == 0,
                compacted: i % 3 == 0,
                provider: [None, Some(huge), Some(NONE as usize), Some(12), None, Some(0)][i],
                anchored: i == 4,
                pruned: i,
                offloaded: i * 2,
                masked: i * 3,
                refetches: i * 4,
                refetch_tokens: huge - i,
                shared: 10 * i,
                first_changed: [Some(2), None, Some(WIDE as usize), None, Some(huge), Some(1)][i],
                output: 20 + i,
                after_provider_compaction: i == 5,
                recorded: (i % 2 == 1).then(|| Box::new(Recorded::new(i, 1, 2, 3, 4))),
            })
            .collect();
        let mut steps = Steps::with_capacity(made.len());
        for step in &made {
            steps.push(step.clone());
            assert_eq!(steps.last(), Some(step));
            assert_eq!(steps.len(), step.step);
        }
        assert_eq!(steps.into_vec(), made);
    }

    /// Memory (issue 31, item 13): call ids are kept in one text, each once, naming the latest
    /// call given for it, as a map of strings would.
    #[test]
    fn ids_name_their_latest_call() {
        let mut ids = Ids::default();
        let mut map = HashMap::new();
        for i in 0..5_000usize {
            let id = format!("call_{}", (i * 7) % 3_001);
            ids.insert(&id, i / 3);
            map.insert(id, i / 3);
        }
        ids.insert("", 9);
        map.insert(String::new(), 9);
        ids.insert("wide", u32::MAX as usize + 1);
        ids.insert("wide", 4);
        ids.insert("wider", usize::MAX);
        map.insert("wide".into(), 4);
        map.insert("wider".into(), usize::MAX);
        for (id, call) in &map {
            assert_eq!(ids.get(id), Some(*call), "{id}");
        }
        assert_eq!(ids.get("call_3001"), None);
        assert_eq!(ids.table.len() + ids.wide.len(), map.len());
        assert_eq!(ids.text.len(), map.keys().filter(|id| *id != "wider").map(String::len).sum::<usize>());
    }

    /// Memory (issue 31, item 13): an owned log hands each message over and drops what it has let
    /// go of, so at the end of a replay it holds a few messages, not one (empty) per message read.
    #[test]
    fn an_owned_log_shrinks_as_it_lets_go() {
        let recorded: Vec<Message> = (0..1_000).map(|i| Message::user(format!("message {i}"))).collect();
        let mut log = Store::Owned { messages: recorded.clone(), offset: 0, kept_from: 0 };
        for index in 0..recorded.len() {
            assert_eq!(log.take(index).as_ref(), Some(&recorded[index]));
            log.let_go(index.saturating_sub(1));
            assert_eq!(log.len(), recorded.len());
            assert_eq!(
                log.range(index.saturating_sub(1)..index + 1),
                &recorded[index.saturating_sub(1)..=index]
            );
            assert_eq!(log.get(index + 1), recorded.get(index + 1));
            let Store::Owned { messages, .. } = &log else { unreachable!() };
            assert!(
                4 * messages.capacity() <= 5 * (recorded.len() - index) + 8,
                "{} held after message {index}",
                messages.capacity()
            );
        }
    }
}
