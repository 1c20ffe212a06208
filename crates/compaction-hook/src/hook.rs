//! [`CompactionHook`]: decides before each model call whether the conversation must be compacted,
//! and with which target.

use std::fmt;

use compaction_core::{
    last_assistant_index, CompactionReport, Compactor, InitParameters, IntegerSetting,
    SlidingWindowCompactor, ToolResultPruningCompactor, HAYSTACK_SLIDING_WINDOW_TYPE,
};
use compaction_model::Changes;
use compaction_tokens::{ApproximateTokenCounter, TokenCounter};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::cache::CacheRule;
use crate::counting::StateCounter;
use crate::error::Error;

/// The class path Haystack writes as `type` in `CompactionHook.to_dict()`.
pub const HAYSTACK_HOOK_TYPE: &str = "haystack.hooks.compaction.hooks.CompactionHook";
const HAYSTACK_APPROXIMATE_TYPE: &str = "haystack.token_counters.approximate_counter.ApproximateTokenCounter";

/// The keys of `CompactionHook`'s settings: the reference's five and `cache`, beyond it.
const HOOK_KEYS: &[&str] =
    &["compactor", "context_window", "compact_at", "compact_to", "token_counter", "cache"];

/// When a [`CompactionHook`] compacts and how far down: the model's window and two fractions of it.
///
/// Serializes as `{"context_window", "compact_at", "compact_to"}` (and `cache` when set);
/// deserializing (and [`CompactionHookSettings::from_value`]) reads that back, and also
/// Haystack's `CompactionHook.to_dict()` form, taking these numbers from its `init_parameters`
/// and checking them as the reference does.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[non_exhaustive]
pub struct CompactionHookSettings {
    /// The model's context window in tokens. At least 1.
    pub context_window: usize,
    /// The fraction of the window at which compaction starts (default 0.7).
    pub compact_at: f64,
    /// The fraction of the window compaction aims for (default 0.4).
    pub compact_to: f64,
    /// Compact only when it pays for itself under the provider's prompt cache (see
    /// [`CacheRule`]); off (`None`) by default, as in the reference. Not part of Haystack's form.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheRule>,
}

impl CompactionHookSettings {
    /// Settings for a window of `context_window` tokens with the reference's fractions, 0.7 and 0.4.
    pub fn new(context_window: usize) -> Self {
        CompactionHookSettings { context_window, compact_at: 0.7, compact_to: 0.4, cache: None }
    }

    /// The same settings starting compaction at this fraction of the window.
    #[must_use]
    pub fn with_compact_at(mut self, compact_at: f64) -> Self {
        self.compact_at = compact_at;
        self
    }

    /// The same settings aiming compaction at this fraction of the window.
    #[must_use]
    pub fn with_compact_to(mut self, compact_to: f64) -> Self {
        self.compact_to = compact_to;
        self
    }

    /// The same settings with the cache-aware rule: a compaction that would cost more than it
    /// saves under the prompt cache is not applied (see [`CacheRule`]).
    #[must_use]
    pub fn with_cache(mut self, rule: CacheRule) -> Self {
        self.cache = Some(rule);
        self
    }

    /// The request size compaction starts at, in tokens: `compact_at` of the window, as
    /// Python's `int(window * compact_at)` truncates it (for showing it: the hook compares the
    /// estimate with the product itself, before truncating).
    pub fn threshold(&self) -> usize {
        (self.context_window as f64 * self.compact_at) as usize
    }

    /// The hook's target for the whole request, in tokens: `compact_to` of the window, as
    /// Python's `int(window * compact_to)` truncates it. The compactor is given this less what
    /// the request holds beyond the messages.
    pub fn budget(&self) -> usize {
        (self.context_window as f64 * self.compact_to) as usize
    }

    /// Checks `context_window >= 1` and `0 < compact_to < compact_at <= 1`, and the cache rule.
    ///
    /// # Errors
    ///
    /// When `context_window` is 0 or the fractions are out of order or range (NaN included).
    pub fn validate(&self) -> Result<(), Error> {
        if self.context_window < 1 {
            return Err(Error::ContextWindowTooSmall(self.context_window as i128));
        }
        let (at, to) = (self.compact_at, self.compact_to);
        // Written so that NaN fails, as Python's chained comparison does.
        if !(0.0 < to && to < at && at <= 1.0) {
            return Err(Error::InvalidFractions { compact_at: at, compact_to: to });
        }
        match &self.cache {
            Some(rule) => rule.validate(),
            None => Ok(()),
        }
    }

    /// Reads settings in the plain form or Haystack's `to_dict` form; missing fractions take
    /// their defaults, `context_window` is required.
    ///
    /// # Errors
    ///
    /// For a missing `context_window`, a key the hook does not take, a value of the wrong kind,
    /// settings that fail [`CompactionHookSettings::validate`], or a `type` other than the
    /// hook's.
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        let params = InitParameters::read(value, HAYSTACK_HOOK_TYPE, HOOK_KEYS)?;
        let window = match params.integer("context_window")? {
            None => return Err(InitParameters::missing("context_window").into()),
            Some(IntegerSetting::NonNegative(n)) => n,
            Some(IntegerSetting::Negative(n)) => return Err(Error::ContextWindowTooSmall(n)),
        };
        let mut settings = CompactionHookSettings::new(window);
        if let Some(at) = params.float("compact_at")? {
            settings.compact_at = at;
        }
        if let Some(to) = params.float("compact_to")? {
            settings.compact_to = to;
        }
        if let Some(rule) = params.get("cache").filter(|v| !v.is_null()) {
            settings.cache = Some(CacheRule::from_value(rule)?);
        }
        settings.validate()?;
        Ok(settings)
    }
}

impl<'de> Deserialize<'de> for CompactionHookSettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        CompactionHookSettings::from_value(&value).map_err(serde::de::Error::custom)
    }
}

/// What one [`CompactionHook::run`] saw and did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[must_use = "the outcome says whether the run failed (`failure`)"]
#[non_exhaustive]
pub struct CompactionOutcome {
    /// The compactor's name ([`Compactor::name`]), such as `ToolResultPruningCompactor`. Not the
    /// strategy marker a compaction leaves in `meta`, which is [`CompactionReport::strategy`].
    pub compactor: String,
    /// The estimated size of the whole request, tools included.
    pub estimated_tokens: usize,
    /// Whether the estimate reached `context_window * compact_at`.
    pub triggered: bool,
    /// The target handed to the compactor; `None` when not triggered.
    pub target_tokens: Option<usize>,
    /// The estimated non-message part of the request (tool schemas, chat template); negative
    /// when the counter measured the messages above the estimate. `None` when not triggered.
    pub overhead: Option<i64>,
    /// Whether the conversation was replaced.
    pub compacted: bool,
    /// The compactor's report, when it compacted.
    pub report: Option<CompactionReport>,
    /// What the compaction changed, when it compacted: the messages it rewrote in place, every
    /// other message being as it was, or, when it dropped or put in messages, the message read
    /// each one stands for. Handed to the write-back (`compaction_formats::write`), it lets the
    /// untouched messages keep their original bytes. `None` when it did not compact.
    pub changes: Option<Changes>,
    /// What failed, in words, when the run could not count or compact (the conversation is then
    /// as it was), or could not re-anchor the provider's count after compacting. `None` when
    /// nothing failed. [`CompactionHook::try_run`] returns such failures as errors instead.
    pub failure: Option<String>,
    /// Why the compaction was not applied under the cache-aware rule (it would have cost more
    /// than it saves with the prompt cache), when that is why; the conversation is as it was.
    pub declined: Option<String>,
}

/// Compacts an agent's conversation once it fills too much of the model's context window.
///
/// Run it before each model call. It estimates the request's size, anchored on the provider's
/// own count in [`AgentState::context_tokens`](crate::AgentState) when there is one, and once the
/// estimate reaches `compact_at` of the window it asks its [`Compactor`] to bring the messages
/// down to `compact_to` of the window, less the part of the request that is not messages.
/// Hooks chain: run several in order (see [`run_compaction_hooks`]) and each sees what the
/// previous one left, such as pruning first and a harsher fallback second.
pub struct CompactionHook {
    compactor: Box<dyn Compactor>,
    counter: Box<dyn TokenCounter>,
    settings: CompactionHookSettings,
    /// Tells this hook's memo apart from other hooks' in an agent state.
    id: u64,
}

/// A new hook's id: unique in this process.
fn next_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl fmt::Debug for CompactionHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompactionHook")
            .field("compactor", &self.compactor)
            .field("counter", &self.counter.describe())
            .field("settings", &self.settings)
            .finish()
    }
}

impl CompactionHook {
    /// A hook running `compactor` under `settings`, counting with the default
    /// [`ApproximateTokenCounter`].
    ///
    /// # Errors
    ///
    /// When the settings fail [`CompactionHookSettings::validate`].
    pub fn new(compactor: Box<dyn Compactor>, settings: CompactionHookSettings) -> Result<Self, Error> {
        settings.validate()?;
        Ok(CompactionHook {
            compactor,
            counter: Box::new(ApproximateTokenCounter::default()),
            settings,
            id: next_id(),
        })
    }

    /// The same hook counting with `counter`.
    #[must_use]
    pub fn with_counter(mut self, counter: Box<dyn TokenCounter>) -> Self {
        self.counter = counter;
        self
    }

    /// Builds a hook from Haystack's `CompactionHook.to_dict()` output with a
    /// `ToolResultPruningCompactor` or a `SlidingWindowCompactor`; the counter may be an
    /// `ApproximateTokenCounter` (or absent).
    ///
    /// A hook whose compactor is a `ToolResultOffloadCompactor` needs a store, which this crate
    /// does not hold: the compaction-offload crate reads that form
    /// (`compaction_offload::compaction_hook_from_value`). A summarizer needs a model client,
    /// which no serialized form carries.
    ///
    /// # Errors
    ///
    /// When the form is not the hook's, its settings are invalid, or its compactor or counter
    /// is one this crate cannot build.
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        let params = InitParameters::read(value, HAYSTACK_HOOK_TYPE, HOOK_KEYS)?;
        let compactor: Box<dyn Compactor> = match params.component("compactor")? {
            None => return Err(InitParameters::missing("compactor").into()),
            Some((compaction_core::HAYSTACK_PRUNING_TYPE, spec)) => {
                Box::new(ToolResultPruningCompactor::from_value(spec).map_err(Error::Compactor)?)
            }
            Some((HAYSTACK_SLIDING_WINDOW_TYPE, spec)) => {
                Box::new(SlidingWindowCompactor::from_value(spec).map_err(Error::Compactor)?)
            }
            Some((other, _)) => {
                return Err(Error::UnsupportedComponent { key: "compactor".into(), type_name: other.into() })
            }
        };
        Self::from_value_with_compactor(value, compactor)
    }

    /// Builds a hook from Haystack's `CompactionHook.to_dict()` output with `compactor` in
    /// place of the one the form names: the window, the fractions and the counter are read
    /// from `value`. For crates that build compactors this one cannot.
    ///
    /// # Errors
    ///
    /// When the form is not the hook's, its settings are invalid, or its counter is one this
    /// crate cannot build.
    pub fn from_value_with_compactor(value: &Value, compactor: Box<dyn Compactor>) -> Result<Self, Error> {
        let settings = CompactionHookSettings::from_value(value)?;
        let params = InitParameters::read(value, HAYSTACK_HOOK_TYPE, HOOK_KEYS)?;
        let mut hook = CompactionHook::new(compactor, settings)?;
        if let Some((kind, spec)) = params.component("token_counter")? {
            if kind != HAYSTACK_APPROXIMATE_TYPE {
                return Err(Error::UnsupportedComponent {
                    key: "token_counter".into(),
                    type_name: kind.into(),
                });
            }
            const KEYS: &[&str] = &["chars_per_token", "tokens_per_image", "tokens_per_file"];
            let p = InitParameters::read(spec, HAYSTACK_APPROXIMATE_TYPE, KEYS)?;
            let ratio = p.float("chars_per_token")?.unwrap_or(4.0);
            let counter = ApproximateTokenCounter::new(ratio)
                .map_err(|e| Error::InvalidSetting { key: "chars_per_token".into(), reason: e.to_string() })?
                .with_charges(
                    p.count("tokens_per_image")?.unwrap_or(85),
                    p.count("tokens_per_file")?.unwrap_or(1000),
                );
            hook = hook.with_counter(Box::new(counter));
        }
        Ok(hook)
    }

    /// The settings in use.
    pub fn settings(&self) -> &CompactionHookSettings {
        &self.settings
    }

    /// The compactor in use.
    pub fn compactor(&self) -> &dyn Compactor {
        self.compactor.as_ref()
    }

    /// The counter in use.
    pub fn counter(&self) -> &dyn TokenCounter {
        self.counter.as_ref()
    }

    /// The estimated size of the next request: the whole conversation and the tools counted
    /// locally when the provider's count is unknown, otherwise the provider's count plus the
    /// messages that arrived after the last assistant message.
    pub fn estimate(&self, state: &crate::AgentState) -> usize {
        let messages = state.messages();
        if state.context_tokens == 0 {
            return state.count_with_tools(self.counter.as_ref());
        }
        match last_assistant_index(messages) {
            None => state.context_tokens,
            Some(last) => state.context_tokens + self.counting(state).count(&messages[last + 1..], &[]),
        }
    }

    /// The counter, answering from `state`'s running count for the state's own messages.
    pub(crate) fn counting<'a>(&'a self, state: &'a crate::AgentState) -> StateCounter<'a> {
        StateCounter::new(self.counter.as_ref(), state)
    }

    /// Runs the compactor on `state`'s conversation with the memo this hook keeps in `state`,
    /// counting through the state.
    pub(crate) fn compact_state(
        &self,
        state: &crate::AgentState,
        target: usize,
    ) -> Result<Option<compaction_core::Compaction>, compaction_core::Error> {
        let mut memo = state.take_memo(self.id);
        let compaction =
            self.compactor.compact_with_memo(state.messages(), target, &self.counting(state), &mut memo);
        state.keep_memo(self.id, memo);
        compaction
    }

    /// Compacts `state`'s conversation if it fills too much of the window, and says what it did.
    ///
    /// A counter that cannot count or a compactor that fails (see [`CompactionHook::try_run`])
    /// leaves the conversation as it was; the outcome's `failure` says what happened, and it is
    /// logged.
    pub fn run(&self, state: &mut crate::AgentState) -> CompactionOutcome {
        let decision = match self.decide(state) {
            Ok(decision) => decision,
            Err(error) => return self.failed(None, &error),
        };
        let Some(target) = decision.target_tokens else {
            return self.complete(state, decision, None);
        };
        match self.compact_state(state, target) {
            Ok(compaction) => self.complete(state, decision, compaction),
            Err(error) => self.failed(Some(decision), &Error::Compaction(error)),
        }
    }

    /// The outcome of a run that failed after `decision` (or before deciding).
    fn failed(&self, decision: Option<crate::HookDecision>, error: &Error) -> CompactionOutcome {
        tracing::warn!(%error, "the compaction hook could not run; the conversation is unchanged");
        let mut outcome = match decision {
            Some(decision) => CompactionOutcome::from_decision(decision),
            None => CompactionOutcome {
                compactor: self.compactor.name().to_owned(),
                estimated_tokens: 0,
                triggered: false,
                target_tokens: None,
                overhead: None,
                compacted: false,
                report: None,
                changes: None,
                failure: None,
                declined: None,
            },
        };
        outcome.failure = Some(compaction_core::error_chain(&error));
        outcome
    }
}

/// Runs `hooks` in order on `state`, each seeing what the previous one left, and returns every
/// outcome.
pub fn run_compaction_hooks(
    hooks: &[CompactionHook],
    state: &mut crate::AgentState,
) -> Vec<CompactionOutcome> {
    hooks.iter().map(|hook| hook.run(state)).collect()
}
