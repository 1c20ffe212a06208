//! When to compact an LLM agent's conversation, when to stop a run that spent its token budget,
//! and offloading tool results to a store.
//!
//! compaction-core says *how* a conversation gets shorter; this crate says *when*, and adds the
//! strategy that needs I/O: moving tool results out of the context into a store and leaving a
//! pointer the model can follow. It follows Haystack 3.4's `CompactionHook`, `TokenBudgetHook`,
//! `ToolResultOffloadHook` and `ToolResultOffloadCompactor`, with the same arithmetic, the same
//! store keys and the same pointer texts.
//!
//! Overview:
//!
//! - [`AgentState`] is what your agent loop owns: the messages, the provider's token count of
//!   the last request plus its reply (`context_tokens`, 0 when unknown), the tool schemas, the
//!   step count, the run's summed token usage and a stop request. Fill it from any framework's
//!   types.
//! - [`CompactionHook`] runs before each model call. It estimates the request (anchored on the
//!   provider's count, plus the messages since the last assistant message), and once that
//!   reaches `compact_at` of the window it hands the conversation to any [`Compactor`] with a
//!   target of `compact_to` of the window less the non-message overhead. Every run returns a
//!   [`CompactionOutcome`] and is traced with the reference's tag names
//!   (`haystack.agent.hook.compaction.*`). Hooks chain: [`run_compaction_hooks`].
//!   [`CompactionHook::try_run`] returns failures (a counter that asks a provider and fails, a
//!   summarizer set to fail) as errors; [`CompactionHook::run_async`] awaits a compactor that
//!   calls a model; and [`CompactionHook::decide`] / [`CompactionHook::complete`] are the two
//!   halves for a caller that runs the compactor itself (such as a summarization session fed by
//!   its own client). Every count goes through `TokenCounter::try_count`.
//! - [`TokenBudgetHook`] runs before each model call and asks the run to stop
//!   ([`AgentState::stop_run`]) once the usage the loop recorded ([`AgentState::record_usage`])
//!   reaches its budget.
//! - [`ToolResultOffloadHook`] runs after each tool step and offloads the step's fresh results
//!   that its per-tool [`OffloadPolicy`]s pick ([`AlwaysOffload`], [`NeverOffload`],
//!   [`OffloadOverChars`] or your own), keyed by tool name, a set of names ([`PolicyKey`]) or `*`.
//! - [`ToolResultOffloadCompactor`] is a [`Compactor`] that offloads older results oldest first,
//!   outside the protected steps, until the target is met.
//! - [`ToolResultStore`] is where results go: [`FileSystemToolResultStore`] (atomic writes,
//!   nothing outside its root) or [`InMemoryToolResultStore`]. [`read_tool_spec`] and
//!   [`read_offloaded_result`] are the tool that gives them back to the model.
//!
//! Offloaded pointers carry `tool_result_offloaded` in their meta, which the pruning
//! compactor skips by default, so pruning after offloading never loses a pointer. A failed
//! store write never ends a run: the result stays in context and a warning is logged.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//!
//! use compaction_core::{PruningSettings, ToolResultPruningCompactor};
//! use compaction_hook::{
//!     AgentState, CompactionHook, CompactionHookSettings, InMemoryToolResultStore, OffloadOverChars,
//!     OffloadStrategies, ToolResultOffloadHook,
//! };
//! use compaction_model::{Message, ToolCall};
//!
//! let store = Arc::new(InMemoryToolResultStore::new());
//! let offload = ToolResultOffloadHook::new(store.clone(), OffloadStrategies::new().with("*", OffloadOverChars::new(1_000)));
//! let pruning = ToolResultPruningCompactor::new(PruningSettings::default())?;
//! let compaction = CompactionHook::new(Box::new(pruning), CompactionHookSettings::new(2_000))?;
//!
//! let mut state = AgentState::new(vec![Message::user("Summarise the logs.")]);
//! let call = ToolCall::new("read_logs", serde_json::Map::new()).with_id("c1");
//! state.push(Message::assistant_with_calls(None, vec![call.clone()]));
//! state.push(Message::tool("log line\n".repeat(400), call, false));
//! state.step_count = 1;
//!
//! // After the tool step: the long result goes to the store, a pointer stays.
//! let offloaded = offload.run(&mut state);
//! assert_eq!(offloaded.offloaded, vec![2]);
//! assert_eq!(store.references(), vec!["1_read_logs_c1.txt".to_string()]);
//! let pointer = state.messages()[2].tool_call_result().unwrap();
//! assert!(matches!(&pointer.result, compaction_model::ToolResultContent::Text(t)
//!     if t.starts_with("Tool result offloaded to text (3600 characters) at '1_read_logs_c1.txt'")));
//!
//! // Before the next model call: small enough now, so nothing to compact.
//! let outcome = compaction.run(&mut state);
//! assert!(!outcome.triggered);
//! # Ok::<(), compaction_hook::Error>(())
//! ```
//!
//! ## Crate features
//!
//! None. The crate uses compaction-tokens without any tokenizer; pass a `TiktokenCounter` or
//! `HuggingFaceTokenCounter` (features of compaction-tokens) to [`CompactionHook::with_counter`]
//! if you want exact counts.
//!
//! ## Minimum supported Rust version
//!
//! 1.85.
#![deny(missing_docs)]

mod budget;
mod decision;
mod error;
mod hook;
mod keys;
mod offload;
mod offload_compactor;
mod offload_hook;
mod policy;
mod read_tool;
mod serial;
mod state;
mod store;
mod usage;

pub use budget::{
    BudgetOutcome, TokenBudgetHook, BUDGET_FINAL_MESSAGE, HAYSTACK_BUDGET_HOOK_TYPE, TOKEN_BUDGET_EXCEEDED,
};
pub use compaction_core::Compactor;
pub use decision::HookDecision;
pub use error::Error;
pub use hook::{
    run_compaction_hooks, CompactionHook, CompactionHookSettings, CompactionOutcome, HAYSTACK_HOOK_TYPE,
};
pub use offload::guess_extension;
pub use offload_compactor::{
    OffloadCompactorSettings, ToolResultOffloadCompactor, HAYSTACK_OFFLOAD_COMPACTOR_TYPE,
};
pub use offload_hook::{OffloadOutcome, ToolResultOffloadHook, HAYSTACK_OFFLOAD_HOOK_TYPE};
pub use policy::{
    AlwaysOffload, NeverOffload, OffloadOverChars, OffloadPolicy, OffloadStrategies, PolicyKey,
};
pub use read_tool::{read_offloaded_result, read_tool_spec, ReadResponse, READ_TOOL_NAME};
pub use state::AgentState;
pub use store::{
    Content, FileSystemToolResultStore, InMemoryToolResultStore, StoredContent, ToolResultStore,
    HAYSTACK_FILE_SYSTEM_STORE_TYPE,
};
pub use usage::total_tokens;

// The README's examples are compiled and run as doc tests, so they cannot drift.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
