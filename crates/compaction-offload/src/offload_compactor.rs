//! [`ToolResultOffloadCompactor`]: at compaction time, moves older tool results to a store,
//! oldest first, until the conversation fits.

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use compaction_core::Error as CoreError;
use compaction_core::{
    replace_tool_results_until_target, Compaction, CompactionReport, Compactor, Replacement, ResultReport,
    Rewrite, RewrittenResult,
};
use compaction_model::{
    is_compacted, is_offloaded, CompactionMarker, Message, Part, Role, SharedObject, ToolCallResult,
    CONTEXT_COMPACTION, STRATEGY_TOOL_RESULT_OFFLOADING,
};
use compaction_tokens::TokenCounter;
use serde::Serialize;

use crate::blocks::{offloadable_blocks, plan_result, pointer_message, Offloadable, Pointer};
use crate::error::Error;
use crate::offload_hook::{OffloadFailure, ResultAt};
use crate::plan::{commit, commit_async, missing, PendingWrite, WriteOutcome};
use crate::store::{AsyncToolResultStore, StoreProfile, ToolResultStore};

/// What [`ToolResultOffloadCompactor`] offloads. Defaults are the reference's.
///
/// Serializes as its three fields; [`OffloadCompactorSettings::from_value`] also reads
/// Haystack's `to_dict` form, ignoring its `store`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct OffloadCompactorSettings {
    /// How many of the newest tool-calling steps are never offloaded. At least 1.
    pub min_keep_steps: usize,
    /// Only results whose own count is above this are offloaded.
    pub min_tokens: usize,
    /// Characters of each offloaded text kept in its pointer.
    pub preview_chars: usize,
}

impl Default for OffloadCompactorSettings {
    fn default() -> Self {
        OffloadCompactorSettings { min_keep_steps: 1, min_tokens: 200, preview_chars: 200 }
    }
}

impl OffloadCompactorSettings {
    /// The same settings never offloading the newest `min_keep_steps` tool-calling steps.
    #[must_use]
    pub fn with_min_keep_steps(mut self, min_keep_steps: usize) -> Self {
        self.min_keep_steps = min_keep_steps;
        self
    }

    /// The same settings offloading only results whose own count is above `min_tokens`.
    #[must_use]
    pub fn with_min_tokens(mut self, min_tokens: usize) -> Self {
        self.min_tokens = min_tokens;
        self
    }

    /// The same settings keeping this many characters of each offloaded text in its pointer.
    #[must_use]
    pub fn with_preview_chars(mut self, chars: usize) -> Self {
        self.preview_chars = chars;
        self
    }

    /// Checks `min_keep_steps >= 1`.
    ///
    /// # Errors
    ///
    /// When `min_keep_steps` is 0.
    pub fn validate(&self) -> Result<(), Error> {
        if self.min_keep_steps < 1 {
            return Err(Error::MinKeepStepsTooSmall(self.min_keep_steps as i128));
        }
        Ok(())
    }
}

type KeySource = Box<dyn Fn() -> String + Send + Sync>;

/// Writes older tool results to a store and leaves a pointer in their place, as Haystack's
/// `ToolResultOffloadCompactor` does.
///
/// Results are visited oldest first outside the newest `min_keep_steps` tool-calling steps; the
/// walk stops once the conversation fits the target. A result is skipped when it is an error,
/// already offloaded or compacted, no larger than `min_tokens`, empty, binary for a text-only
/// store, or when its pointer would not be smaller (nothing is then written for it). Store keys
/// are `compacted_<tool>_<32 random hex digits>`. The pointer message carries
/// `context_compaction: {"strategy": "tool_result_offloading", "original_tokens": N}` and the
/// references. Every result of a message is judged on its own (the reference reads only the
/// first), and the message keeps its other parts.
///
/// The compactor does no I/O of its own: [`ToolResultOffloadCompactor::plan`] decides, counting
/// each pointer with the reference the store is expected to give, and returns the writes; the
/// caller commits them and [`OffloadCompactorPlan::finish`] builds each pointer from the
/// reference actually given, counts it again, and leaves in context every result whose write
/// failed, reporting it. [`offload`](ToolResultOffloadCompactor::offload),
/// [`offload_with_store`](ToolResultOffloadCompactor::offload_with_store) and
/// [`offload_async`](ToolResultOffloadCompactor::offload_async) do all three. A failed write
/// means the compaction may miss its target where the reference would have moved on to the
/// next result; the next run tries again.
///
/// As a [`Compactor`] (inside a `CompactionHook`) it writes to its own store; the trait's
/// answer has no room for failures, so they are kept for
/// [`take_failures`](ToolResultOffloadCompactor::take_failures) (and logged). Give each user's
/// agent its own compactor.
pub struct ToolResultOffloadCompactor {
    store: Option<Arc<dyn ToolResultStore>>,
    settings: OffloadCompactorSettings,
    key_source: KeySource,
    failures: Mutex<Vec<OffloadFailure>>,
}

impl fmt::Debug for ToolResultOffloadCompactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolResultOffloadCompactor")
            .field("store", &self.store)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// What an offload compaction did: the compaction, and the results that stayed because their
/// writes failed.
#[derive(Debug)]
#[must_use]
pub struct OffloadCompaction {
    /// The compaction; `None` when nothing was offloaded.
    pub compaction: Option<Compaction>,
    /// One entry per failed write (or per result that failed before any write), with the key
    /// and the error.
    pub failures: Vec<OffloadFailure>,
}

/// A planned result: where it is, its writes and its pointer.
#[derive(Debug)]
struct Planned {
    position: usize,
    tool_name: String,
    writes: Range<usize>,
    pointer: Pointer,
}

/// A planned message: its index, its own count, and its planned results in order.
#[derive(Debug)]
struct PlannedMessage {
    index: usize,
    own: usize,
    results: Vec<Planned>,
}

/// What [`ToolResultOffloadCompactor::plan`] decided: the writes to commit, and how to finish.
#[must_use = "commit the writes and finish the plan, or nothing is offloaded"]
pub struct OffloadCompactorPlan<'a> {
    messages: &'a [Message],
    counter: &'a dyn TokenCounter,
    writes: Vec<PendingWrite<'a>>,
    planned: Vec<PlannedMessage>,
    tokens_before: usize,
    target_tokens: usize,
    failures: Vec<OffloadFailure>,
}

impl fmt::Debug for OffloadCompactorPlan<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OffloadCompactorPlan")
            .field("writes", &self.writes)
            .field("planned", &self.planned)
            .field("tokens_before", &self.tokens_before)
            .field("target_tokens", &self.target_tokens)
            .finish_non_exhaustive()
    }
}

impl ToolResultOffloadCompactor {
    /// A compactor writing to `store`.
    ///
    /// # Errors
    ///
    /// When the settings fail [`OffloadCompactorSettings::validate`].
    pub fn new(store: Arc<dyn ToolResultStore>, settings: OffloadCompactorSettings) -> Result<Self, Error> {
        settings.validate()?;
        Ok(ToolResultOffloadCompactor {
            store: Some(store),
            settings,
            key_source: Box::new(crate::keys::unique_hex),
            failures: Mutex::new(Vec::new()),
        })
    }

    /// A compactor with no store of its own, for [`ToolResultOffloadCompactor::plan`],
    /// [`offload_with_store`](ToolResultOffloadCompactor::offload_with_store) and
    /// [`offload_async`](ToolResultOffloadCompactor::offload_async). As a [`Compactor`] it then
    /// offloads nothing and keeps an [`Error::NoStore`] failure for each write it would make.
    ///
    /// # Errors
    ///
    /// When the settings fail [`OffloadCompactorSettings::validate`].
    pub fn without_store(settings: OffloadCompactorSettings) -> Result<Self, Error> {
        settings.validate()?;
        Ok(ToolResultOffloadCompactor {
            store: None,
            settings,
            key_source: Box::new(crate::keys::unique_hex),
            failures: Mutex::new(Vec::new()),
        })
    }

    /// The same compactor taking the unique part of each key from `source` instead of random
    /// hex, for reproducible runs and tests.
    #[must_use]
    pub fn with_key_source(mut self, source: impl Fn() -> String + Send + Sync + 'static) -> Self {
        self.key_source = Box::new(source);
        self
    }

    /// The settings in use.
    pub fn settings(&self) -> &OffloadCompactorSettings {
        &self.settings
    }

    /// The store written to, if the compactor has one.
    pub fn store(&self) -> Option<&Arc<dyn ToolResultStore>> {
        self.store.as_ref()
    }

    /// The store writes that failed in the [`Compactor::try_compact`] calls since the last call,
    /// oldest first (a write that fails leaves its result in context; it is no error).
    pub fn take_failures(&self) -> Vec<OffloadFailure> {
        std::mem::take(&mut *self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    /// Offloads to the compactor's own store until `messages` fit `target_tokens`.
    ///
    /// # Errors
    ///
    /// [`compaction_core::Error::Count`] when the counter could not count. A write that fails is
    /// no error: it is reported in [`OffloadCompaction::failures`], its result left in context.
    pub fn offload(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> Result<OffloadCompaction, CoreError> {
        match &self.store {
            Some(store) => self.offload_with_store(messages, target_tokens, counter, store.as_ref()),
            None => match self.plan(
                messages,
                target_tokens,
                counter,
                &StoreProfile::new().with_binary_content(true),
            )? {
                None => Ok(OffloadCompaction { compaction: None, failures: Vec::new() }),
                Some(plan) => {
                    let outcomes = plan
                        .writes()
                        .iter()
                        .map(|w| Err(Error::NoStore { key: w.key().to_owned() }))
                        .collect();
                    plan.finish(outcomes)
                }
            },
        }
    }

    /// Offloads to `store` until `messages` fit `target_tokens`, blocking on each write.
    ///
    /// # Errors
    ///
    /// As [`ToolResultOffloadCompactor::offload`].
    pub fn offload_with_store(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
        store: &dyn ToolResultStore,
    ) -> Result<OffloadCompaction, CoreError> {
        match self.plan(messages, target_tokens, counter, &store.profile())? {
            None => Ok(OffloadCompaction { compaction: None, failures: Vec::new() }),
            Some(plan) => {
                let outcomes = commit(plan.writes(), store);
                plan.finish(outcomes)
            }
        }
    }

    /// Offloads to `store` until `messages` fit `target_tokens`; the writes run concurrently
    /// and no thread blocks on them.
    ///
    /// # Errors
    ///
    /// As [`ToolResultOffloadCompactor::offload`].
    pub async fn offload_async(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
        store: &dyn AsyncToolResultStore,
    ) -> Result<OffloadCompaction, CoreError> {
        match self.plan(messages, target_tokens, counter, &store.profile())? {
            None => Ok(OffloadCompaction { compaction: None, failures: Vec::new() }),
            Some(plan) => {
                let outcomes = commit_async(plan.writes(), store).await;
                plan.finish(outcomes)
            }
        }
    }

    /// Decides which results to offload to a store described by `profile` so that `messages`
    /// fit `target_tokens`, and returns the writes that takes; `None` when the conversation
    /// already fits or nothing can be offloaded. No I/O.
    ///
    /// # Errors
    ///
    /// [`compaction_core::Error::Count`] when the counter could not count.
    pub fn plan<'a>(
        &self,
        messages: &'a [Message],
        target_tokens: usize,
        counter: &'a dyn TokenCounter,
        profile: &StoreProfile,
    ) -> Result<Option<OffloadCompactorPlan<'a>>, CoreError> {
        let mut writes = Vec::new();
        let mut planned = Vec::new();
        let mut failures = Vec::new();
        let walked = replace_tool_results_until_target(
            messages,
            target_tokens,
            counter,
            self.settings.min_keep_steps,
            STRATEGY_TOOL_RESULT_OFFLOADING,
            &mut |index, _, own| {
                let message = &messages[index];
                let Some((replacement, message_plan)) =
                    self.plan_message(index, message, own, counter, profile, &mut writes, &mut failures)?
                else {
                    return Ok(None);
                };
                planned.push(message_plan);
                Ok(Some(replacement))
            },
        );
        // The walk saw only replacements that free tokens, so every planned message is in it.
        let Some(walked) = walked? else {
            return Ok(None);
        };
        Ok(Some(OffloadCompactorPlan {
            messages,
            counter,
            writes,
            planned,
            tokens_before: walked.report.tokens_before,
            target_tokens,
            failures,
        }))
    }

    /// One message's planned offload, counted with the references `profile` expects; its
    /// writes are appended to `writes`. `None` to leave the message.
    #[allow(clippy::too_many_arguments)]
    fn plan_message<'a>(
        &self,
        index: usize,
        message: &'a Message,
        own: usize,
        counter: &dyn TokenCounter,
        profile: &StoreProfile,
        writes: &mut Vec<PendingWrite<'a>>,
        failures: &mut Vec<OffloadFailure>,
    ) -> Result<Option<(Replacement, PlannedMessage)>, CoreError> {
        if is_offloaded(&message.meta) || is_compacted(&message.meta) {
            return Ok(None);
        }
        let plain = matches!(message.parts.as_slice(), [Part::ToolCallResult(_)]);
        let first_write = writes.len();
        let mut results = Vec::new();
        let mut rewritten = Vec::new();
        let mut current = own;
        let mut pointers: Vec<(usize, String)> = Vec::new();
        let mut references: Vec<String> = Vec::new();
        let mut replacement = None;
        for (position, result) in message.tool_call_results().enumerate() {
            if result.error {
                continue;
            }
            // One result alone is judged by the message's count, as in the reference.
            let alone = if plain { own } else { count_alone(result, counter)? };
            if alone <= self.settings.min_tokens {
                continue;
            }
            let Offloadable::Blocks(blocks) = offloadable_blocks(result, profile) else { continue };
            let tool_name = result.origin.tool_name.as_str();
            let prefix = format!("compacted_{tool_name}_{}", (self.key_source)());
            let planned = match plan_result(&blocks, tool_name, &prefix, self.settings.preview_chars) {
                Ok(planned) => planned,
                Err(error) => {
                    tracing::warn!(tool = tool_name, index, %error, "cannot offload a tool result; leaving it in context");
                    failures.push(OffloadFailure {
                        at: ResultAt { index, position },
                        tool_name: tool_name.to_owned(),
                        key: None,
                        error,
                    });
                    continue;
                }
            };
            let expected: Vec<String> =
                planned.writes.iter().map(|w| profile.expected_reference(w.key())).collect();
            pointers.push((position, planned.pointer.text(&expected)));
            let mut refs = references.clone();
            refs.extend(expected);
            let candidate = offloaded(message, &pointers, &refs, own);
            let after = count_one(&candidate, counter)?;
            if after >= current {
                // A pointer can cost more than a small result; this one stays, and nothing is
                // written for it.
                pointers.pop();
                continue;
            }
            references = refs;
            rewritten.push(RewrittenResult { position, tokens_before: current, tokens_after: after });
            current = after;
            let first = writes.len();
            writes.extend(planned.writes);
            results.push(Planned {
                position,
                tool_name: tool_name.to_owned(),
                writes: first..writes.len(),
                pointer: planned.pointer,
            });
            replacement = Some(candidate);
        }
        let Some(candidate) = replacement else {
            writes.truncate(first_write);
            return Ok(None);
        };
        let replacement = Replacement {
            message: candidate,
            original_tokens: own,
            replacement_tokens: current,
            results: rewritten,
        };
        Ok(Some((replacement, PlannedMessage { index, own, results })))
    }
}

/// The count of a tool message holding only `result`.
fn count_alone(result: &ToolCallResult, counter: &dyn TokenCounter) -> Result<usize, CoreError> {
    let parts = vec![Part::ToolCallResult(result.clone())];
    count_one(&Message { role: Role::Tool, parts, name: None, meta: SharedObject::new() }, counter)
}

/// The count of `message` on its own.
fn count_one(message: &Message, counter: &dyn TokenCounter) -> Result<usize, CoreError> {
    counter.try_count(std::slice::from_ref(message), &[]).map_err(CoreError::Count)
}

/// `message` with `pointers` in place, the references and the offloading marker in its meta.
fn offloaded(message: &Message, pointers: &[(usize, String)], references: &[String], own: usize) -> Message {
    let marker = CompactionMarker::new(STRATEGY_TOOL_RESULT_OFFLOADING, own as u64).into_value();
    pointer_message(message, pointers, references, Some((CONTEXT_COMPACTION, marker)))
}

impl<'a> OffloadCompactorPlan<'a> {
    /// The writes to commit, in order.
    pub fn writes(&self) -> &[PendingWrite<'a>] {
        &self.writes
    }

    /// Builds each pointer from `outcomes`, one per write in the order of
    /// [`OffloadCompactorPlan::writes`] (a missing one counts as failed), and counts it again.
    /// A result whose writes all succeeded is replaced by its pointer (unless, quoting a longer
    /// reference than expected, the pointer no longer frees anything: the result then stays and
    /// its entry is left unused, as the reference leaves such an entry); any other stays in
    /// context, with each failed write reported.
    ///
    /// # Errors
    ///
    /// [`compaction_core::Error::Count`] when the counter could not count a pointer; what was
    /// written stays in the store, and the conversation is left as it is.
    pub fn finish(self, outcomes: Vec<WriteOutcome>) -> Result<OffloadCompaction, CoreError> {
        let OffloadCompactorPlan {
            messages,
            counter,
            writes,
            planned,
            tokens_before,
            target_tokens,
            mut failures,
        } = self;
        let mut outcomes: Vec<Option<WriteOutcome>> = outcomes.into_iter().map(Some).collect();
        outcomes.resize_with(writes.len(), || None);
        let mut replacements = Vec::new();
        let mut reports = Vec::new();
        let mut tokens_after = tokens_before;
        for planned_message in planned {
            let PlannedMessage { index, own, results } = planned_message;
            let message = &messages[index];
            let mut pointers = Vec::new();
            let mut references: Vec<String> = Vec::new();
            let mut current = own;
            let mut built = None;
            for planned in results {
                let mut refs = Vec::new();
                let mut failed = false;
                for i in planned.writes.clone() {
                    match outcomes[i].take().unwrap_or_else(|| missing(writes[i].key())) {
                        Ok(reference) => refs.push(reference),
                        Err(error) => {
                            failed = true;
                            tracing::warn!(tool = planned.tool_name.as_str(), index, key = writes[i].key(), %error, "failed to offload a tool result; leaving it in context");
                            failures.push(OffloadFailure {
                                at: ResultAt { index, position: planned.position },
                                tool_name: planned.tool_name.clone(),
                                key: Some(writes[i].key().to_owned()),
                                error,
                            });
                        }
                    }
                }
                if failed {
                    continue;
                }
                pointers.push((planned.position, planned.pointer.text(&refs)));
                let mut with = references.clone();
                with.extend(refs);
                let candidate = offloaded(message, &pointers, &with, own);
                let after = count_one(&candidate, counter)?;
                if after >= current {
                    pointers.pop();
                    continue;
                }
                references = with;
                let rewritten = RewrittenResult {
                    position: planned.position,
                    tokens_before: current,
                    tokens_after: after,
                };
                reports.push(ResultReport::for_result(index, message, &rewritten));
                tokens_after = tokens_after.saturating_sub(current - after);
                current = after;
                built = Some(candidate);
            }
            if let Some(built) = built {
                replacements.push((index, built));
            }
        }
        failures.sort_by_key(|f| (f.at.index, f.at.position));
        if replacements.is_empty() {
            return Ok(OffloadCompaction { compaction: None, failures });
        }
        // The walk stopped on the running estimate, as the reference's does; the report says
        // what the conversation with these pointers counts.
        let rewritten: Vec<(usize, &Message)> =
            replacements.iter().map(|(index, message)| (*index, message)).collect();
        let counted = counter.try_count_rewritten(messages, &rewritten, &[]).map_err(CoreError::Count)?;
        let report = CompactionReport::new(
            STRATEGY_TOOL_RESULT_OFFLOADING,
            tokens_before,
            tokens_after,
            target_tokens,
            reports,
        )
        .counted(counted);
        // One replacement per planned message, so no index repeats: no check is needed.
        let rewrites =
            replacements.into_iter().map(|(index, message)| (index, Rewrite::Message(message))).collect();
        Ok(OffloadCompaction { compaction: Some(Compaction::rewriting(rewrites, report)), failures })
    }
}

impl Compactor for ToolResultOffloadCompactor {
    fn try_compact(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> Result<Option<Compaction>, CoreError> {
        let OffloadCompaction { compaction, failures } = self.offload(messages, target_tokens, counter)?;
        if !failures.is_empty() {
            self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).extend(failures);
        }
        Ok(compaction)
    }

    fn name(&self) -> &str {
        "ToolResultOffloadCompactor"
    }
}
