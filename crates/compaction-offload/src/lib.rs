//! Offloading an LLM agent's tool results to a store, leaving a pointer the model can follow:
//! Haystack 3.4's `ToolResultOffloadHook` and `ToolResultOffloadCompactor` in Rust, with the same
//! keys and pointer texts, sans-IO, and with stores that lose nothing.
//!
//! Pruning (compaction-core) drops an old result for a placeholder; offloading moves it to a
//! store and leaves a pointer with a preview, and the read-back tool gives it back to the model
//! on request, whole or by lines.
//!
//! Overview:
//!
//! - [`ToolResultOffloadHook`] runs after each tool step and offloads the step's fresh results
//!   that its per-tool [`OffloadPolicy`]s pick ([`AlwaysOffload`], [`NeverOffload`],
//!   [`OffloadOverChars`] or your own), keyed by tool name, a set of names ([`PolicyKey`]) or
//!   `*`.
//! - [`ToolResultOffloadCompactor`] is a `Compactor` that offloads older results oldest first,
//!   outside the protected steps, until the target is met; put it in a `CompactionHook`.
//! - [`ToolResultStore`] and its async sibling [`AsyncToolResultStore`] are where results go:
//!   [`FileSystemToolResultStore`] and [`InMemoryToolResultStore`] implement both.
//!   [`read_tool_spec`], [`read_offloaded_result`] and [`read_offloaded_result_async`] are the
//!   tool that gives results back to the model.
//! - Haystack's `to_dict` forms are read by `from_value` on each type and by
//!   [`compaction_hook_from_value`].
//!
//! **Sans-IO.** The hook and the compactor never write themselves. `plan` decides and returns
//! the [`PendingWrite`]s it needs (a key and the content); the caller commits them to any
//! store, blocking ([`commit`]) or async ([`commit_async`]), and hands the outcomes to the
//! plan's `finish`, which builds each pointer from the reference the store gave back. The
//! `run`, `run_async`, `offload` and `offload_async` methods do the three steps in one call.
//! So an async agent never blocks a runtime thread on a store, and a remote store is a trait
//! implementation away.
//!
//! **Nothing is lost.** A store never replaces an entry: when a key is taken (by an earlier
//! result, another run or another process) it writes under the next free one of
//! [`candidate_keys`] and the pointer names the file holding its own result. Every result of a
//! message is offloaded on its own and keeps its call. A failed write leaves the result in
//! context and comes back to the caller in the outcome, with the key and the error. The
//! file-system store resolves everything under its root without following links and refuses
//! what it did not write. Offloaded pointers carry `tool_result_offloaded` in their meta, which
//! the pruning compactor skips by default, so pruning after offloading never loses a pointer.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//!
//! use compaction_hook::AgentState;
//! use compaction_model::{Message, ToolCall, ToolResultContent};
//! use compaction_offload::{
//!     commit, InMemoryToolResultStore, OffloadOverChars, OffloadStrategies, ToolResultOffloadHook,
//!     ToolResultStore,
//! };
//!
//! let store = Arc::new(InMemoryToolResultStore::new());
//! let hook = ToolResultOffloadHook::new(store.clone(), OffloadStrategies::new().with("*", OffloadOverChars::new(1_000)));
//!
//! let mut state = AgentState::new(vec![Message::user("Summarise the logs.")]);
//! let call = ToolCall::new("read_logs", serde_json::Map::new()).with_id("c1");
//! state.push(Message::assistant_with_calls(None, vec![call.clone()]));
//! state.push(Message::tool("log line\n".repeat(400), call, false));
//! state.step_count = 1;
//!
//! // After the tool step, in one call: the long result goes to the store, a pointer stays.
//! let outcome = hook.run(&mut state);
//! assert_eq!(outcome.offloaded, vec![2]);
//! assert_eq!(store.references(), vec!["1_read_logs_c1.txt".to_string()]);
//! let pointer = state.messages()[2].tool_call_result().unwrap();
//! assert!(matches!(&pointer.result, ToolResultContent::Text(t)
//!     if t.starts_with("Tool result offloaded to text (3600 characters) at '1_read_logs_c1.txt'")));
//!
//! // The same, step by step: decide, commit the writes anywhere, finish.
//! let call = ToolCall::new("read_logs", serde_json::Map::new()).with_id("c2");
//! state.push(Message::assistant_with_calls(None, vec![call.clone()]));
//! state.push(Message::tool("more lines\n".repeat(400), call, false));
//! state.step_count = 2;
//! let edits = {
//!     let plan = hook.plan(&state, &store.profile());
//!     assert_eq!(plan.writes()[0].key(), "2_read_logs_c2.txt");
//!     let outcomes = commit(plan.writes(), store.as_ref());
//!     plan.finish(outcomes)
//! };
//! assert_eq!(edits.apply(&mut state).offloaded, vec![4]);
//! # Ok::<(), compaction_offload::Error>(())
//! ```
//!
//! ## Crate features
//!
//! None. The crate uses compaction-tokens without any tokenizer. The async store operations
//! need no runtime: the file-system store runs its blocking calls on a thread of its own.
//!
//! ## Minimum supported Rust version
//!
//! 1.88, the workspace's: see its README for the policy. It is raised only in a minor version
//! (0.1 → 0.2), never in a patch release, and the changelog says so.
#![deny(missing_docs)]

mod blocking;
mod blocks;
mod error;
#[cfg(not(unix))]
mod fs_portable;
mod fs_store;
#[cfg(unix)]
mod fs_unix;
mod haystack;
mod keys;
mod offload_compactor;
mod offload_hook;
mod plan;
mod policy;
mod read_tool;
mod scratch;
mod store;

pub use blocks::guess_extension;
pub use error::Error;
pub use fs_store::FileSystemToolResultStore;
pub use haystack::{
    compaction_hook_from_value, HaystackCompactionHook, HAYSTACK_FILE_SYSTEM_STORE_TYPE,
    HAYSTACK_OFFLOAD_COMPACTOR_TYPE, HAYSTACK_OFFLOAD_HOOK_TYPE,
};
pub use keys::candidate_keys;
pub use offload_compactor::{
    OffloadCompaction, OffloadCompactorPlan, OffloadCompactorSettings, ToolResultOffloadCompactor,
};
pub use offload_hook::{
    OffloadEdits, OffloadFailure, OffloadHookPlan, OffloadOutcome, OffloadedResult, ResultAt,
    ToolResultOffloadHook,
};
pub use plan::{commit, commit_async, PendingWrite, WriteOutcome};
pub use policy::{
    AlwaysOffload, BuiltinPolicy, NeverOffload, OffloadOverChars, OffloadPolicy, OffloadStrategies, PolicyKey,
};
pub use read_tool::{
    read_offloaded_result, read_offloaded_result_async, read_tool_spec, ReadResponse, READ_TOOL_NAME,
};
pub use scratch::remove_scratch_files_before_exit;
pub use store::{
    AsyncToolResultStore, Content, InMemoryToolResultStore, StoreFuture, StoreProfile, StoredContent,
    ToolResultStore,
};

// The README's examples are compiled and run as doc tests, so they cannot drift.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
