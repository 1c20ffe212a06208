//! [`ToolResultOffloadHook`]: after each tool step, moves the fresh results its policies pick to
//! a store and leaves a pointer in their place.

use std::ops::Range;
use std::sync::Arc;

use compaction_hook::AgentState;
use compaction_model::{is_offloaded, Message};
use serde::Serialize;

use crate::blocks::{offloadable_blocks, payload, plan_result, pointer_message, Offloadable, Pointer};
use crate::error::Error;
use crate::plan::{commit, commit_async, missing, PendingWrite, WriteOutcome};
use crate::policy::OffloadStrategies;
use crate::store::{AsyncToolResultStore, StoreProfile, ToolResultStore};

/// Where a tool result sits: its message's index, and its position among the message's tool
/// results (0 is the first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ResultAt {
    /// The message's index in the conversation.
    pub index: usize,
    /// The result's position among the message's tool results.
    pub position: usize,
}

/// One result moved to the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OffloadedResult {
    /// Where the result sat.
    #[serde(flatten)]
    pub at: ResultAt,
    /// The tool that produced it.
    pub tool_name: String,
    /// The id of the call it answers.
    pub call_id: Option<String>,
    /// The references its pointer names, one per block written.
    pub references: Vec<String>,
}

/// One result left in context because offloading it failed.
#[derive(Debug, Serialize)]
pub struct OffloadFailure {
    /// Where the result sits.
    #[serde(flatten)]
    pub at: ResultAt,
    /// The tool that produced it.
    pub tool_name: String,
    /// The key of the write that failed; `None` when the result failed before any write (an
    /// image or file whose base64 cannot be decoded).
    pub key: Option<String>,
    /// Why.
    #[serde(serialize_with = "as_text")]
    pub error: Error,
}

fn as_text<S: serde::Serializer>(error: &Error, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&compaction_core::error_chain(error))
}

/// What one offload hook run did.
#[derive(Debug, Default, Serialize)]
#[must_use = "the outcome lists the results whose writes failed"]
pub struct OffloadOutcome {
    /// Indices of the messages rewritten, oldest first.
    pub offloaded: Vec<usize>,
    /// Every result moved to the store, in conversation order.
    pub results: Vec<OffloadedResult>,
    /// Results left in context because they hold image or file parts and the store takes only
    /// text.
    pub binary_unsupported: Vec<ResultAt>,
    /// Results left in context because a write failed, one entry per failed write, with the key
    /// and the error. Blocks of the same result that were written stay in the store,
    /// unreferenced, as in the reference.
    pub failures: Vec<OffloadFailure>,
}

impl OffloadOutcome {
    /// Where the results that failed sit, each once.
    pub fn failed_results(&self) -> Vec<ResultAt> {
        let mut at: Vec<ResultAt> = self.failures.iter().map(|f| f.at).collect();
        at.dedup();
        at
    }
}

/// Offloads tool results to a [`ToolResultStore`] as soon as they arrive, replacing each with a
/// pointer the model can follow with the read-back tool.
///
/// Run it after each tool step. It looks only at the trailing block of tool-result messages (the
/// step's fresh results), so history is never rewritten and each result is offloaded at most
/// once. Which tools offload is decided by [`OffloadStrategies`]; a tool with no matching key
/// keeps its results. Errors, already-offloaded results and empty ones always stay; image and
/// file parts go only to a store that takes binary content. Every result of a message is
/// handled on its own (the reference reads only the first); the message keeps its other parts.
/// Keys are `STEP_TOOL_CALLID.EXT`, as in the reference (a call without an id uses its position
/// in the batch); the store picks another key when one is taken, so nothing is replaced.
///
/// The hook does no I/O of its own: [`ToolResultOffloadHook::plan`] decides and returns the
/// writes, the caller commits them (blocking or async) and [`OffloadHookPlan::finish`] builds
/// the pointers from the references the store gave. [`ToolResultOffloadHook::run`],
/// [`run_with_store`](ToolResultOffloadHook::run_with_store) and
/// [`run_async`](ToolResultOffloadHook::run_async) do all three. A failed write leaves the
/// result in context and is returned in the [`OffloadOutcome`]; it never stops the run.
///
/// The hook holds no mutable state and can be shared between concurrent runs; give each run its
/// own store with `run_with_store` so users never share one.
#[derive(Debug)]
pub struct ToolResultOffloadHook {
    store: Option<Arc<dyn ToolResultStore>>,
    strategies: OffloadStrategies,
    preview_chars: usize,
}

/// A planned result of the hook: where it is, its writes and its pointer.
#[derive(Debug)]
struct Planned {
    at: ResultAt,
    tool_name: String,
    call_id: Option<String>,
    writes: Range<usize>,
    pointer: Pointer,
}

/// What [`ToolResultOffloadHook::plan`] decided: the writes to commit, and how to finish.
#[derive(Debug)]
#[must_use = "commit the writes and finish the plan, or nothing is offloaded"]
pub struct OffloadHookPlan<'a> {
    messages: &'a [Message],
    writes: Vec<PendingWrite<'a>>,
    planned: Vec<Planned>,
    outcome: OffloadOutcome,
}

/// The messages a finished plan rewrites, and what it did.
#[derive(Debug)]
#[must_use = "apply the edits to the state"]
pub struct OffloadEdits {
    /// The rewritten messages, by index, oldest first.
    pub edits: Vec<(usize, Message)>,
    /// What the run did.
    pub outcome: OffloadOutcome,
}

impl OffloadEdits {
    /// Puts the rewritten messages into `state` and returns the outcome.
    pub fn apply(self, state: &mut AgentState) -> OffloadOutcome {
        if !self.edits.is_empty() {
            state.replace_messages(self.edits);
        }
        self.outcome
    }
}

impl ToolResultOffloadHook {
    /// A hook writing to `store` under `strategies`, previewing 200 characters of each text.
    pub fn new(store: Arc<dyn ToolResultStore>, strategies: OffloadStrategies) -> Self {
        ToolResultOffloadHook { store: Some(store), strategies, preview_chars: 200 }
    }

    /// A hook with no store of its own: use [`ToolResultOffloadHook::plan`],
    /// [`run_with_store`](ToolResultOffloadHook::run_with_store) or
    /// [`run_async`](ToolResultOffloadHook::run_async). [`ToolResultOffloadHook::run`] then
    /// reports every write as failed with [`Error::NoStore`].
    pub fn without_store(strategies: OffloadStrategies) -> Self {
        ToolResultOffloadHook { store: None, strategies, preview_chars: 200 }
    }

    /// The same hook previewing `preview_chars` characters of each offloaded text.
    #[must_use]
    pub fn with_preview_chars(mut self, preview_chars: usize) -> Self {
        self.preview_chars = preview_chars;
        self
    }

    /// The characters of each offloaded text kept in its pointer.
    pub fn preview_chars(&self) -> usize {
        self.preview_chars
    }

    /// The hook's own store, if it has one.
    pub fn store(&self) -> Option<&Arc<dyn ToolResultStore>> {
        self.store.as_ref()
    }

    /// The policies in use.
    pub fn strategies(&self) -> &OffloadStrategies {
        &self.strategies
    }

    /// Offloads the fresh results of `state` to the hook's own store.
    pub fn run(&self, state: &mut AgentState) -> OffloadOutcome {
        match &self.store {
            Some(store) => self.run_with_store(state, store.as_ref()),
            None => {
                let plan = self.plan(state, &StoreProfile::new().with_binary_content(true));
                let outcomes =
                    plan.writes().iter().map(|w| Err(Error::NoStore { key: w.key().to_owned() })).collect();
                plan.finish(outcomes).apply(state)
            }
        }
    }

    /// Offloads the fresh results of `state` to `store` instead of the hook's own: the
    /// reference's per-run `hook_context` store.
    pub fn run_with_store(&self, state: &mut AgentState, store: &dyn ToolResultStore) -> OffloadOutcome {
        let plan = self.plan(state, &store.profile());
        let outcomes = commit(plan.writes(), store);
        plan.finish(outcomes).apply(state)
    }

    /// Offloads the fresh results of `state` to `store`, asynchronously: the writes run
    /// concurrently and no thread blocks on them.
    pub async fn run_async(
        &self,
        state: &mut AgentState,
        store: &dyn AsyncToolResultStore,
    ) -> OffloadOutcome {
        let edits = {
            let plan = self.plan(state, &store.profile());
            let outcomes = commit_async(plan.writes(), store).await;
            plan.finish(outcomes)
        };
        edits.apply(state)
    }

    /// Decides which fresh results of `state` to offload to a store described by `profile`, and
    /// returns the writes that takes. No I/O.
    pub fn plan<'a>(&self, state: &'a AgentState, profile: &StoreProfile) -> OffloadHookPlan<'a> {
        let messages = state.messages();
        let mut plan = OffloadHookPlan {
            messages,
            writes: Vec::new(),
            planned: Vec::new(),
            outcome: OffloadOutcome::default(),
        };
        let start = fresh_results_start(messages);
        // A call without an id is keyed by its result's position in this step's batch.
        let mut batch_position = 0;
        for (index, message) in messages.iter().enumerate().skip(start) {
            let skip_message = is_offloaded(&message.meta);
            for (position, result) in message.tool_call_results().enumerate() {
                let at = ResultAt { index, position };
                let in_batch = batch_position;
                batch_position += 1;
                if skip_message || result.error {
                    continue;
                }
                let tool_name = result.origin.tool_name.as_str();
                let Some(policy) = self.strategies.policy_for(tool_name) else { continue };
                let blocks = match offloadable_blocks(result, profile) {
                    Offloadable::Blocks(blocks) => blocks,
                    Offloadable::Empty | Offloadable::UnknownPart => continue,
                    Offloadable::BinaryUnsupported => {
                        plan.outcome.binary_unsupported.push(at);
                        continue;
                    }
                };
                if !policy.should_offload(tool_name, &payload(&blocks), state) {
                    continue;
                }
                // Step, tool and call id keep keys apart, as in the reference.
                let call = match result.origin.id.as_deref() {
                    Some(id) if !id.is_empty() => id.to_owned(),
                    _ => format!("call{in_batch}"),
                };
                let prefix = format!("{}_{tool_name}_{call}", state.step_count);
                match plan_result(&blocks, tool_name, &prefix, self.preview_chars) {
                    Ok(planned) => {
                        let first = plan.writes.len();
                        plan.writes.extend(planned.writes);
                        plan.planned.push(Planned {
                            at,
                            tool_name: tool_name.to_owned(),
                            call_id: result.origin.id.clone(),
                            writes: first..plan.writes.len(),
                            pointer: planned.pointer,
                        });
                    }
                    Err(error) => {
                        tracing::warn!(tool = tool_name, index, %error, "cannot offload a tool result; leaving it in context");
                        plan.outcome.failures.push(OffloadFailure {
                            at,
                            tool_name: tool_name.to_owned(),
                            key: None,
                            error,
                        });
                    }
                }
            }
        }
        plan
    }
}

impl<'a> OffloadHookPlan<'a> {
    /// The writes to commit, in order.
    pub fn writes(&self) -> &[PendingWrite<'a>] {
        &self.writes
    }

    /// Builds the pointers from `outcomes`, one per write in the order of
    /// [`OffloadHookPlan::writes`] (a missing one counts as failed). A result whose writes all
    /// succeeded is replaced by its pointer; any other stays, with each failed write reported.
    pub fn finish(self, outcomes: Vec<WriteOutcome>) -> OffloadEdits {
        let OffloadHookPlan { messages, writes, planned, mut outcome } = self;
        let mut outcomes: Vec<Option<WriteOutcome>> = outcomes.into_iter().map(Some).collect();
        outcomes.resize_with(writes.len(), || None);
        let mut edits = Vec::new();
        let mut rest = planned.into_iter().peekable();
        while let Some(first) = rest.next() {
            let index = first.at.index;
            let mut group = vec![first];
            while let Some(next) = rest.next_if(|p| p.at.index == index) {
                group.push(next);
            }
            let mut pointers = Vec::new();
            let mut references = Vec::new();
            for planned in group {
                let mut refs = Vec::new();
                let mut failed = false;
                for i in planned.writes.clone() {
                    match outcomes[i].take().unwrap_or_else(|| missing(writes[i].key())) {
                        Ok(reference) => refs.push(reference),
                        Err(error) => {
                            failed = true;
                            tracing::warn!(tool = planned.tool_name.as_str(), index, key = writes[i].key(), %error, "failed to offload a tool result; leaving it in context");
                            outcome.failures.push(OffloadFailure {
                                at: planned.at,
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
                pointers.push((planned.at.position, planned.pointer.text(&refs)));
                references.extend(refs.iter().cloned());
                outcome.results.push(OffloadedResult {
                    at: planned.at,
                    tool_name: planned.tool_name,
                    call_id: planned.call_id,
                    references: refs,
                });
            }
            if !pointers.is_empty() {
                edits.push((index, pointer_message(&messages[index], &pointers, &references, None)));
                outcome.offloaded.push(index);
            }
        }
        outcome.failures.sort_by_key(|f| (f.at.index, f.at.position));
        OffloadEdits { edits, outcome }
    }
}

/// Where the trailing block of tool-result messages starts; `len` when the last message is not
/// a tool result.
fn fresh_results_start(messages: &[Message]) -> usize {
    messages.iter().rposition(|m| !m.has_tool_call_result()).map_or(0, |i| i + 1)
}
