//! Reactive recovery: when the provider refuses a request as longer than the model's context
//! window, compact to a lower target with the hook's compactor and retry once.
//!
//! The hook compacts *before* a call on an estimate; an estimate can be wrong (a counter that
//! undercounts, a window set larger than the model's, a huge tool result in the last step).
//! Then the provider answers "context length exceeded", and an agent loop that only reports it
//! loses the run. [`ContextOverflowRecovery`] decides a lower target from what the error says,
//! compacts, and tells the caller to send the request again; for the same request it does so
//! once, so a conversation that cannot be made to fit ends in the provider's error instead of a
//! loop. It does no I/O: the caller makes the call, recognises the error (with
//! [`context_overflow`](compaction_core::context_overflow) or its client's own classification)
//! and retries.

use compaction_core::ContextOverflow;
use compaction_tokens::TokenCounter;

use crate::decision::HookDecision;
use crate::error::Error;
use crate::hook::{CompactionHook, CompactionOutcome};
use crate::state::AgentState;

/// Recovers an agent loop from a provider's "context length exceeded" error: compacts the
/// conversation below what was refused and says whether to send the request again.
///
/// Hold one per run (or per request) beside the [`CompactionHook`]. On an overflow, hand it the
/// hook, the state and what the error said ([`ContextOverflow`]):
///
/// - The target is the lowest of: [`shrink_to`](ContextOverflowRecovery::with_shrink_to) (half,
///   by default) of the refused request, as the provider counted it when the error says so and
///   as the hook estimates it otherwise; the hook's own target (`compact_to` of its window);
///   and, when the error states the model's window, `compact_to` of that window less the
///   tokens the request reserved for the reply. As the hook does, the target handed to the
///   compactor is that budget less the part of the request that is not messages.
/// - The hook's compactor compacts to it, and the provider's count is re-anchored on the
///   result, as after any hook run.
/// - A request is told from the next by the state's `step_count`: a second overflow at the same
///   step is not recovered again ([`Recovery::AlreadyRetried`]), so the loop gives up with the
///   provider's error. Advance `step_count` after each tool step, as the hooks expect.
///
/// When the error states a window smaller than the hook's `context_window`, the hook's setting
/// is wrong for this model; build the hook with the stated window for the rest of the run.
///
/// # Example
///
/// ```
/// use compaction_core::{context_overflow, ToolResultPruningCompactor};
/// use compaction_hook::{AgentState, CompactionHook, CompactionHookSettings, ContextOverflowRecovery, Recovery};
/// use compaction_model::{Message, ToolCall};
///
/// let hook = CompactionHook::new(Box::new(ToolResultPruningCompactor::default()), CompactionHookSettings::new(200_000))?;
/// let mut state = AgentState::new(vec![Message::user("Read the logs.")]);
/// for step in 0..4 {
///     let call = ToolCall::new("read_logs", serde_json::Map::new()).with_id(format!("c{step}"));
///     state.push(Message::assistant_with_calls(None, vec![call.clone()]));
///     state.push(Message::tool("log line\n".repeat(500), call, false));
///     state.step_count += 1;
/// }
/// // The hook saw no need to compact for a 200,000-token window, but the model has 4,096.
/// assert!(!hook.run(&mut state).compacted);
/// let body = r#"{"error": {"message": "This model's maximum context length is 4096 tokens. However, your messages resulted in 4600 tokens. Please reduce the length of the messages.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}"#;
/// let overflow = context_overflow(400, body).expect("an overflow");
///
/// let mut recovery = ContextOverflowRecovery::new();
/// let recovered = recovery.recover(&hook, &mut state, &overflow)?;
/// assert!(matches!(&recovered, Recovery::Retry(outcome) if outcome.compacted));
/// // Send the request again. Should it overflow again, the recovery stops there.
/// assert!(matches!(recovery.recover(&hook, &mut state, &overflow)?, Recovery::AlreadyRetried));
/// # Ok::<(), compaction_hook::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ContextOverflowRecovery {
    shrink_to: f64,
    /// The step whose request was already recovered once.
    recovered_step: Option<usize>,
}

impl Default for ContextOverflowRecovery {
    fn default() -> Self {
        ContextOverflowRecovery::new()
    }
}

/// What [`ContextOverflowRecovery::decide`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
#[non_exhaustive]
pub enum OverflowDecision {
    /// Compact to the decision's target (hand it to the hook's compactor, then to
    /// [`CompactionHook::complete`]) and, if that compacted, retry.
    Compact(HookDecision),
    /// This request was recovered once already: do not retry it.
    AlreadyRetried,
}

/// What a recovery did, and whether to send the request again.
#[derive(Debug, Clone, PartialEq)]
#[must_use = "retry the request only on `Recovery::Retry`"]
#[non_exhaustive]
pub enum Recovery {
    /// The conversation was compacted below what was refused: send the request again.
    Retry(CompactionOutcome),
    /// The compactor found nothing to make smaller; a retry would be refused again, so the
    /// provider's error stands.
    NothingToCompact(CompactionOutcome),
    /// The same request was recovered once already and overflowed again; the provider's error
    /// stands.
    AlreadyRetried,
}

impl Recovery {
    /// Whether to send the request again.
    pub fn should_retry(&self) -> bool {
        matches!(self, Recovery::Retry(_))
    }
}

impl ContextOverflowRecovery {
    /// A recovery that aims at half of the refused request (or lower; see the type's docs).
    pub fn new() -> Self {
        ContextOverflowRecovery { shrink_to: 0.5, recovered_step: None }
    }

    /// The same recovery aiming at `fraction` of the refused request at most.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSetting`] unless `0 < fraction < 1`: a target at or above what was refused
    /// would be refused again.
    pub fn with_shrink_to(mut self, fraction: f64) -> Result<Self, Error> {
        // Written so that NaN fails.
        if !(0.0 < fraction && fraction < 1.0) {
            return Err(Error::InvalidSetting {
                key: "shrink_to".into(),
                reason: format!("must be between 0 and 1 (exclusive), got {fraction}"),
            });
        }
        self.shrink_to = fraction;
        Ok(self)
    }

    /// The largest fraction of the refused request a recovery aims at.
    pub fn shrink_to(&self) -> f64 {
        self.shrink_to
    }

    /// Forgets which request was recovered, so the next overflow is recovered whatever its step
    /// (for a recovery reused across runs).
    pub fn reset(&mut self) {
        self.recovered_step = None;
    }

    /// The first step, for a caller that runs the compactor itself: the lower target for the
    /// request `state` holds, or [`OverflowDecision::AlreadyRetried`]. Marks the request as
    /// recovered. Counts through the hook's counter.
    ///
    /// # Errors
    ///
    /// [`Error::Count`] when the counter cannot count.
    pub fn decide(
        &mut self,
        hook: &CompactionHook,
        state: &AgentState,
        overflow: &ContextOverflow,
    ) -> Result<OverflowDecision, Error> {
        if self.recovered_step == Some(state.step_count) {
            tracing::warn!(
                step = state.step_count,
                "the request overflowed the context window again after compacting; not retrying"
            );
            return Ok(OverflowDecision::AlreadyRetried);
        }
        // What was refused: the provider's own count when it says, else the hook's estimate.
        let refused = match overflow.requested {
            Some(tokens) => tokens,
            None => hook.try_estimate(state)?,
        };
        let message_tokens = hook.counting(state).try_count(state.messages(), &[]).map_err(Error::Count)?;
        let overhead = refused as i128 - message_tokens as i128;
        let settings = hook.settings();
        // Python-like truncation of the float products, as the hook computes its budget.
        let mut budget = (refused as f64 * self.shrink_to) as i128;
        budget = budget.min(settings.budget() as i128);
        if let Some(input_limit) = overflow.input_limit() {
            budget = budget.min((input_limit as f64 * settings.compact_to) as i128);
        }
        let target = usize::try_from((budget - overhead).max(0)).unwrap_or(usize::MAX);
        tracing::info!(
            refused,
            limit = overflow.limit,
            target,
            step = state.step_count,
            "the provider refused the request as too long; compacting to retry"
        );
        self.recovered_step = Some(state.step_count);
        Ok(OverflowDecision::Compact(HookDecision {
            compactor: hook.compactor().name().to_owned(),
            estimated_tokens: refused,
            triggered: true,
            target_tokens: Some(target),
            overhead: Some(i64::try_from(overhead).unwrap_or(if overhead < 0 { i64::MIN } else { i64::MAX })),
        }))
    }

    /// Recovers from `overflow`: decides the lower target, compacts `state` with the hook's
    /// compactor and says whether to send the request again. On an error the conversation is
    /// as it was (and the request counts as recovered: a retry would be refused again).
    ///
    /// # Errors
    ///
    /// [`Error::Count`] or [`Error::Compaction`].
    pub fn recover(
        &mut self,
        hook: &CompactionHook,
        state: &mut AgentState,
        overflow: &ContextOverflow,
    ) -> Result<Recovery, Error> {
        let decision = match self.decide(hook, state, overflow)? {
            OverflowDecision::Compact(decision) => decision,
            OverflowDecision::AlreadyRetried => return Ok(Recovery::AlreadyRetried),
        };
        let target = decision.target_tokens.unwrap_or(0);
        let compaction = hook.compact_state(state, target).map_err(Error::Compaction)?;
        Ok(finish(hook.complete(state, decision, compaction)))
    }

    /// [`ContextOverflowRecovery::recover`] for an async agent loop: the compactor runs through
    /// [`Compactor::compact_async`](compaction_core::Compactor::compact_async), so one that asks a
    /// model never blocks the runtime.
    ///
    /// # Errors
    ///
    /// As [`ContextOverflowRecovery::recover`].
    pub async fn recover_async(
        &mut self,
        hook: &CompactionHook,
        state: &mut AgentState,
        overflow: &ContextOverflow,
    ) -> Result<Recovery, Error> {
        let decision = match self.decide(hook, state, overflow)? {
            OverflowDecision::Compact(decision) => decision,
            OverflowDecision::AlreadyRetried => return Ok(Recovery::AlreadyRetried),
        };
        let target = decision.target_tokens.unwrap_or(0);
        let compaction = hook
            .compactor()
            .compact_async(state.messages(), target, hook.counter())
            .await
            .map_err(Error::Compaction)?;
        Ok(finish(hook.complete(state, decision, compaction)))
    }
}

fn finish(outcome: CompactionOutcome) -> Recovery {
    if outcome.compacted {
        Recovery::Retry(outcome)
    } else {
        tracing::warn!("the provider refused the request as too long and there is nothing left to compact");
        Recovery::NothingToCompact(outcome)
    }
}

#[cfg(test)]
mod tests {
    use compaction_core::{context_overflow, ToolResultPruningCompactor};
    use compaction_model::{Message, ToolCall};
    use compaction_tokens::ApproximateTokenCounter;

    use super::*;
    use crate::CompactionHookSettings;

    /// A run of `steps` steps, each with a result of about `result_tokens` tokens.
    fn state(steps: usize, result_tokens: usize) -> AgentState {
        let mut state = AgentState::new(vec![Message::system("Be brief."), Message::user("Read the logs.")]);
        for step in 0..steps {
            let call = ToolCall::new("read_logs", serde_json::Map::new()).with_id(format!("c{step}"));
            state.push(Message::assistant_with_calls(None, vec![call.clone()]));
            state.push(Message::tool("abcd".repeat(result_tokens), call, false));
            state.step_count += 1;
        }
        state
    }

    fn hook(window: usize) -> CompactionHook {
        CompactionHook::new(
            Box::new(ToolResultPruningCompactor::default()),
            CompactionHookSettings::new(window),
        )
        .unwrap()
    }

    fn target(decision: OverflowDecision) -> usize {
        match decision {
            OverflowDecision::Compact(decision) => decision.target_tokens.unwrap(),
            OverflowDecision::AlreadyRetried => panic!("not decided"),
        }
    }

    fn count(state: &AgentState) -> usize {
        ApproximateTokenCounter::default().count(state.messages(), &[])
    }

    #[test]
    fn without_numbers_the_target_is_a_fraction_of_the_estimate() {
        let state = state(4, 1_000);
        let hook = hook(1_000_000);
        let estimate = hook.estimate(&state);
        let decided =
            ContextOverflowRecovery::new().decide(&hook, &state, &ContextOverflow::default()).unwrap();
        // No anchor and no tools: the estimate is the messages, so there is no overhead.
        assert_eq!(target(decided), estimate / 2);
        let decided = ContextOverflowRecovery::new()
            .with_shrink_to(0.25)
            .unwrap()
            .decide(&hook, &state, &ContextOverflow::default())
            .unwrap();
        assert_eq!(target(decided), (estimate as f64 * 0.25) as usize);
    }

    #[test]
    fn the_hooks_own_target_caps_it() {
        let state = state(4, 1_000);
        // A window of 5,000 aims at 2,000: lower than half of what was sent (about 4,000).
        let decided =
            ContextOverflowRecovery::new().decide(&hook(5_000), &state, &ContextOverflow::default());
        assert_eq!(target(decided.unwrap()), 2_000);
    }

    #[test]
    fn a_stated_window_and_count_set_the_target() {
        let state = state(4, 1_000);
        let ours = count(&state);
        // The provider counted 6,000 where we count about 4,000: the difference is overhead, as
        // the hook takes it, and the target is 40% of the stated input window less it.
        let body = r#"{"error": {"message": "This model's maximum context length is 8000 tokens. However, you requested 7000 tokens (6000 in the messages, 1000 in the completion).", "code": "context_length_exceeded"}}"#;
        let overflow = context_overflow(400, body).unwrap();
        let decided = ContextOverflowRecovery::new().decide(&hook(1_000_000), &state, &overflow).unwrap();
        let OverflowDecision::Compact(decision) = decided else { panic!() };
        assert_eq!(decision.estimated_tokens, 6_000);
        assert_eq!(decision.overhead, Some(6_000 - ours as i64));
        // min(6,000 / 2, 7,000 * 0.4) = 2,800, less the overhead.
        assert_eq!(decision.target_tokens, Some(2_800 - (6_000 - ours)));
    }

    #[test]
    fn recovery_compacts_below_what_was_refused_and_retries_once_per_step() {
        let mut state = state(5, 1_000);
        let hook = hook(1_000_000);
        let before = count(&state);
        let overflow = ContextOverflow::default();
        let mut recovery = ContextOverflowRecovery::new();
        let recovered = recovery.recover(&hook, &mut state, &overflow).unwrap();
        assert!(recovered.should_retry());
        let Recovery::Retry(outcome) = recovered else { panic!() };
        assert!(outcome.compacted && outcome.report.is_some());
        assert!(count(&state) <= before / 2, "{} of {before}", count(&state));
        // The retry overflowed too: the same step is not recovered twice.
        let again = recovery.recover(&hook, &mut state, &overflow).unwrap();
        assert_eq!(again, Recovery::AlreadyRetried);
        assert!(!again.should_retry());
        // The next step's request is a new one.
        let call = ToolCall::new("read_logs", serde_json::Map::new()).with_id("c9");
        state.push(Message::assistant_with_calls(None, vec![call.clone()]));
        state.push(Message::tool("abcd".repeat(3_000), call, false));
        state.step_count += 1;
        assert!(recovery.recover(&hook, &mut state, &overflow).unwrap().should_retry());
        // And `reset` forgets, for a recovery reused in another run.
        recovery.reset();
        assert!(matches!(recovery.decide(&hook, &state, &overflow).unwrap(), OverflowDecision::Compact(_)));
    }

    #[test]
    fn nothing_to_compact_is_not_retried() {
        // One step: its result is protected, so pruning cannot help.
        let mut state = state(1, 5_000);
        let before = state.clone();
        let recovered = ContextOverflowRecovery::new()
            .recover(&hook(1_000_000), &mut state, &ContextOverflow::default())
            .unwrap();
        assert!(matches!(&recovered, Recovery::NothingToCompact(outcome) if !outcome.compacted));
        assert!(!recovered.should_retry());
        assert_eq!(state, before);
    }

    #[test]
    fn the_provider_anchor_is_reanchored_after_recovering() {
        let mut state = state(5, 1_000);
        // The provider's count of the last call; the request that followed was refused.
        state.context_tokens = 4_500;
        let overflow = ContextOverflow::new().with_limit(5_000).with_requested(5_600);
        let recovered =
            ContextOverflowRecovery::new().recover(&hook(1_000_000), &mut state, &overflow).unwrap();
        let Recovery::Retry(outcome) = recovered else { panic!("{recovered:?}") };
        assert!(state.context_tokens < 4_500, "re-anchored: {}", state.context_tokens);
        assert_eq!(outcome.estimated_tokens, 5_600);
    }

    #[test]
    fn shrink_to_must_be_a_proper_fraction() {
        for bad in [0.0, 1.0, -0.5, 1.5, f64::NAN] {
            assert!(matches!(
                ContextOverflowRecovery::new().with_shrink_to(bad),
                Err(Error::InvalidSetting { key, .. }) if key == "shrink_to"
            ));
        }
        assert_eq!(ContextOverflowRecovery::new().with_shrink_to(0.3).unwrap().shrink_to(), 0.3);
    }

    #[test]
    fn async_recovery_matches_the_blocking_one() {
        let overflow = ContextOverflow::default();
        let mut blocking = state(5, 1_000);
        let mut awaited = blocking.clone();
        let hook = hook(1_000_000);
        let expected = ContextOverflowRecovery::new().recover(&hook, &mut blocking, &overflow).unwrap();
        let got =
            block_on(ContextOverflowRecovery::new().recover_async(&hook, &mut awaited, &overflow)).unwrap();
        assert_eq!(got.should_retry(), expected.should_retry());
        assert_eq!(awaited.messages(), blocking.messages());
    }

    /// Polls a future that never waits (the compactor here does no I/O).
    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut future = std::pin::pin!(future);
        loop {
            if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut cx) {
                return output;
            }
        }
    }
}
