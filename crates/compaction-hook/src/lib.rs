//! When to compact an LLM agent's conversation, and when to stop a run that spent its token
//! budget: Haystack's `CompactionHook` and `TokenBudgetHook` in Rust.
//!
//! compaction-core says *how* a conversation gets shorter; this crate says *when*. It follows
//! Haystack 3.4's `CompactionHook` with the same arithmetic: compact once the request reaches a
//! fraction of the model's window, down to another fraction, anchored on the provider's own
//! token count. It does no I/O: strategies that write somewhere (offloading tool results to a
//! store) live in the compaction-offload crate, which builds on this one, and strategies that ask
//! a model (summarization) take a client through compaction-core's generator traits.
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
//! - [`ContextOverflowRecovery`] is for when the estimate was wrong: given the provider's
//!   "context length exceeded" error ([`context_overflow`] recognises it from the reply's status
//!   and body, with the window and count it states), it compacts to a lower target with the
//!   hook's compactor and tells the loop to retry, once per request.
//! - [`TokenBudgetHook`] runs before each model call and asks the run to stop
//!   ([`AgentState::stop_run`]) once the usage the loop recorded ([`AgentState::record_usage`])
//!   reaches its budget.
//!
//! # Example
//!
//! ```
//! use compaction_core::{PruningSettings, ToolResultPruningCompactor};
//! use compaction_hook::{AgentState, CompactionHook, CompactionHookSettings};
//! use compaction_model::{Message, ToolCall};
//!
//! let pruning = ToolResultPruningCompactor::new(PruningSettings::default())?;
//! let hook = CompactionHook::new(Box::new(pruning), CompactionHookSettings::new(1_500))?;
//!
//! let mut state = AgentState::new(vec![Message::user("Summarise the logs.")]);
//! for step in 0..3 {
//!     let call = ToolCall::new("read_logs", serde_json::Map::new()).with_id(format!("c{step}"));
//!     state.push(Message::assistant_with_calls(None, vec![call.clone()]));
//!     state.push(Message::tool("log line\n".repeat(200), call, false));
//!     state.step_count += 1;
//! }
//!
//! // Before the next model call: the conversation fills more than 70% of the window, so the
//! // older results give way to placeholders, down to about 40%.
//! let outcome = hook.run(&mut state);
//! assert!(outcome.triggered && outcome.compacted);
//! assert_eq!(outcome.report.expect("a report").changed_indices(), vec![2, 4]);
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
//! 1.88, the workspace's: see its README for the policy. It is raised only in a minor version
//! (0.1 → 0.2), never in a patch release, and the changelog says so.
#![deny(missing_docs)]

mod budget;
mod cache;
mod counting;
mod decision;
mod error;
mod hook;
mod recovery;
mod state;
mod usage;

pub use budget::{
    BudgetOutcome, TokenBudgetHook, BUDGET_FINAL_MESSAGE, HAYSTACK_BUDGET_HOOK_TYPE, TOKEN_BUDGET_EXCEEDED,
};
pub use cache::CacheRule;
pub use compaction_core::{context_overflow, Compactor, ContextOverflow};
pub use decision::HookDecision;
pub use error::Error;
pub use hook::{
    run_compaction_hooks, CompactionHook, CompactionHookSettings, CompactionOutcome, HAYSTACK_HOOK_TYPE,
};
pub use recovery::{ContextOverflowRecovery, OverflowDecision, Recovery};
pub use state::AgentState;
pub use usage::total_tokens;

// The README's examples are compiled and run as doc tests, so they cannot drift.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
