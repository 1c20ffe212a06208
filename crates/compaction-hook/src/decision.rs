//! The compaction hook as steps the caller can drive: decide (estimate, trigger, target), let
//! any compactor compact — sync, async, or a summarization session the caller feeds — then
//! complete (apply, re-anchor the provider's count).
//!
//! Every count goes through [`TokenCounter::try_count`], so a counter that asks a provider and
//! fails is an error here, not a wrong number.

use compaction_core::{last_assistant_index, Compaction};
use serde::Serialize;

use compaction_tokens::TokenCounter;

use crate::error::Error;
use crate::hook::{CompactionHook, CompactionOutcome};
use crate::state::AgentState;

/// What a [`CompactionHook`] decided before compacting: how big the next request is, whether
/// that is enough to compact, and down to what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[must_use]
#[non_exhaustive]
pub struct HookDecision {
    /// The compactor's name ([`Compactor::name`](compaction_core::Compactor::name)), such as
    /// `ToolResultPruningCompactor`. Not the strategy marker a compaction leaves in `meta`,
    /// which is [`CompactionReport::strategy`](compaction_core::CompactionReport::strategy).
    pub compactor: String,
    /// The estimated size of the whole request, tools included.
    pub estimated_tokens: usize,
    /// Whether the estimate reached `context_window * compact_at`.
    pub triggered: bool,
    /// The target to hand the compactor; `None` when not triggered.
    pub target_tokens: Option<usize>,
    /// The estimated non-message part of the request; `None` when not triggered.
    pub overhead: Option<i64>,
}

impl CompactionHook {
    /// The estimated size of the next request, counting through [`TokenCounter::try_count`]:
    /// see [`CompactionHook::estimate`].
    ///
    /// [`TokenCounter::try_count`]: compaction_tokens::TokenCounter::try_count
    ///
    /// # Errors
    ///
    /// [`Error::Count`] when the counter cannot count.
    pub fn try_estimate(&self, state: &AgentState) -> Result<usize, Error> {
        let counter = self.counting(state);
        if state.context_tokens == 0 {
            return counter.try_count(state.messages(), &state.tools).map_err(Error::Count);
        }
        let messages = state.messages();
        match last_assistant_index(messages) {
            None => Ok(state.context_tokens),
            Some(last) => {
                let after = counter.try_count(&messages[last + 1..], &[]).map_err(Error::Count)?;
                Ok(state.context_tokens + after)
            }
        }
    }

    /// The first step: whether `state`'s conversation must be compacted before the next model
    /// call, and the target. Hand [`HookDecision::target_tokens`] to the compactor (any way you
    /// like), then give what it returned to [`CompactionHook::complete`].
    ///
    /// # Errors
    ///
    /// [`Error::Count`] when the counter cannot count.
    pub fn decide(&self, state: &AgentState) -> Result<HookDecision, Error> {
        let compactor = self.compactor().name().to_owned();
        let estimated = self.try_estimate(state)?;
        let window = self.settings().context_window as f64;
        let triggered = estimated as f64 >= window * self.settings().compact_at;
        tracing::debug!(
            // The attribute name is the reference's span attribute, kept as data.
            haystack.agent.hook.compaction.strategy = compactor.as_str(),
            haystack.agent.hook.compaction.estimated_context_tokens = estimated,
            haystack.agent.hook.compaction.triggered = triggered,
            "compaction hook estimated the request"
        );
        let mut decision = HookDecision {
            compactor,
            estimated_tokens: estimated,
            triggered,
            target_tokens: None,
            overhead: None,
        };
        if !triggered {
            return Ok(decision);
        }
        let message_tokens = self.counting(state).try_count(state.messages(), &[]).map_err(Error::Count)?;
        let overhead = estimated as i128 - message_tokens as i128;
        if overhead < 0 {
            tracing::warn!(
                message_tokens,
                estimated,
                "the token counter measured the messages above the estimated context size; it may be \
                 overestimating, consider a more accurate counter"
            );
        }
        let budget = self.settings().budget() as i128;
        let target = usize::try_from((budget - overhead).max(0)).unwrap_or(usize::MAX);
        tracing::debug!(haystack.agent.hook.compaction.target_tokens = target, "compaction triggered");
        decision.target_tokens = Some(target);
        decision.overhead =
            Some(i64::try_from(overhead).unwrap_or(if overhead < 0 { i64::MIN } else { i64::MAX }));
        Ok(decision)
    }

    /// The last step: applies what the compactor returned for `decision` to `state` and, when
    /// the provider's count anchors the estimate, re-anchors it on the compacted conversation
    /// (through its last assistant message, plus the overhead). `None` leaves `state` as it is,
    /// and so does any compaction for a decision that did not trigger.
    ///
    /// If that count fails, the compaction stays applied and the anchor is set to 0 (unknown),
    /// so the next estimate counts everything itself; the outcome's `failure` says so.
    pub fn complete(
        &self,
        state: &mut AgentState,
        decision: HookDecision,
        compaction: Option<Compaction>,
    ) -> CompactionOutcome {
        let mut outcome = CompactionOutcome::from_decision(decision);
        tracing::debug!(
            haystack.agent.hook.compaction.compacted = compaction.is_some(),
            "compaction hook finished"
        );
        let Some(compaction) = compaction.filter(|_| outcome.triggered) else {
            return outcome;
        };
        if let Some(why) = self.declined_for_cache(state, &outcome, &compaction) {
            tracing::debug!(reason = why.as_str(), "compaction declined under the cache-aware rule");
            outcome.declined = Some(why);
            return outcome;
        }
        let before = state.messages().len();
        let changes = compaction.changes(state.messages());
        match state.apply(compaction) {
            Ok(report) => outcome.report = Some(report),
            Err(error) => {
                let error = Error::Compaction(error);
                tracing::warn!(%error, "the compaction does not fit the conversation; it is unchanged");
                outcome.failure = Some(compaction_core::error_chain(&error));
                return outcome;
            }
        }
        outcome.changes = Some(changes);
        outcome.compacted = true;
        if state.context_tokens != 0 {
            let overhead = i128::from(outcome.overhead.unwrap_or(0));
            match self.accounted(state, overhead) {
                Ok(tokens) => state.context_tokens = tokens,
                Err(error) => {
                    tracing::warn!(%error, "could not count the compacted conversation; the next estimate counts it all");
                    state.context_tokens = 0;
                    outcome.failure = Some(compaction_core::error_chain(&error));
                }
            }
        }
        tracing::debug!(
            step = state.step_count,
            before,
            after = state.messages().len(),
            target = outcome.target_tokens,
            "compacted the conversation"
        );
        outcome
    }

    /// Why `compaction` should not be applied under the settings' cache-aware rule, if it should
    /// not: never when the rule is off, or when the request as it stands would not fit the
    /// window. The prompt before is the estimate; after, the estimate less what the compaction
    /// freed; the part kept is the overhead and the messages before the first changed one.
    fn declined_for_cache(
        &self,
        state: &AgentState,
        outcome: &CompactionOutcome,
        compaction: &Compaction,
    ) -> Option<String> {
        let rule = self.settings().cache?;
        let before = outcome.estimated_tokens;
        if before > self.settings().context_window {
            return None;
        }
        let report = &compaction.report;
        let after = before.saturating_sub(report.tokens_before.saturating_sub(report.tokens_after));
        let first = report.first_changed().unwrap_or(state.messages().len()).min(state.messages().len());
        // The prefix before the first change, counted as the running count measured it; a
        // counter that cannot count here gives up the rule rather than the compaction.
        let prefix = self.counting(state).try_count(&state.messages()[..first], &[]).ok()?;
        let overhead = usize::try_from(outcome.overhead.unwrap_or(0).max(0)).unwrap_or(0);
        rule.declines(before, after, (overhead + prefix).min(after), state.idle)
    }

    /// The provider-accounted part of the compacted conversation (through its last assistant
    /// message, or all of it), plus the overhead. Counting the trailing tool results here would
    /// make a second hook count them twice.
    fn accounted(&self, state: &AgentState, overhead: i128) -> Result<usize, Error> {
        let messages = state.messages();
        let accounted = match last_assistant_index(messages) {
            None => messages,
            Some(last) => &messages[..=last],
        };
        let tokens = self.counting(state).try_count(accounted, &[]).map_err(Error::Count)? as i128 + overhead;
        // Python would store a negative count here; a count cannot be negative, so it stops at 0.
        Ok(usize::try_from(tokens.max(0)).unwrap_or(usize::MAX))
    }

    /// Compacts `state`'s conversation if it fills too much of the window, as
    /// [`CompactionHook::run`] does, but returns failures instead of reporting them in the
    /// outcome: a counter that cannot count, a compactor that fails (see
    /// [`Compactor::try_compact`](compaction_core::Compactor::try_compact)). On an error the
    /// conversation is as it was.
    ///
    /// # Errors
    ///
    /// [`Error::Count`] or [`Error::Compaction`].
    pub fn try_run(&self, state: &mut AgentState) -> Result<CompactionOutcome, Error> {
        let decision = self.decide(state)?;
        let Some(target) = decision.target_tokens else {
            return Ok(self.complete(state, decision, None));
        };
        let compaction = self.compact_state(state, target).map_err(Error::Compaction)?;
        Ok(self.complete(state, decision, compaction))
    }

    /// [`CompactionHook::try_run`] for an async agent loop: the compactor runs through
    /// [`Compactor::compact_async`](compaction_core::Compactor::compact_async), so a compactor
    /// that asks a model (summarization with an async generator) never blocks the runtime.
    ///
    /// # Errors
    ///
    /// As [`CompactionHook::try_run`].
    pub async fn run_async(&self, state: &mut AgentState) -> Result<CompactionOutcome, Error> {
        let decision = self.decide(state)?;
        let Some(target) = decision.target_tokens else {
            return Ok(self.complete(state, decision, None));
        };
        let compaction = self
            .compactor()
            .compact_async(state.messages(), target, self.counter())
            .await
            .map_err(Error::Compaction)?;
        Ok(self.complete(state, decision, compaction))
    }
}

impl CompactionOutcome {
    /// The outcome of a run that went no further than `decision`.
    pub(crate) fn from_decision(decision: HookDecision) -> Self {
        CompactionOutcome {
            compactor: decision.compactor,
            estimated_tokens: decision.estimated_tokens,
            triggered: decision.triggered,
            target_tokens: decision.target_tokens,
            overhead: decision.overhead,
            compacted: false,
            report: None,
            changes: None,
            failure: None,
            declined: None,
        }
    }
}
