//! Conversions between the messages of Rust agent frameworks and compaction's, one call each
//! way, and rig's memory policy run by compaction's compactors.
//!
//! A Rust agent keeps its conversation in its framework's types: async-openai's Chat
//! Completions messages or Responses input items, rig's `completion::Message`, genai's
//! `ChatMessage`. To count, prune or otherwise compact that conversation with this workspace,
//! convert it to our [`Message`](compaction_model::Message)s, compact, and convert back:
//!
//! - [`openai`] (feature `async-openai`): [`from_chat_completions`](openai::from_chat_completions) /
//!   [`to_chat_completions`](openai::to_chat_completions) and
//!   [`from_responses_input`](openai::from_responses_input) /
//!   [`to_responses_input`](openai::to_responses_input);
//! - [`rig`] (feature `rig`): [`from_rig`](rig::from_rig) / [`to_rig`](rig::to_rig), and
//!   [`CompactionPolicy`](rig::CompactionPolicy), rig-memory's `MemoryPolicy` run by our
//!   compactors, so a rig agent prunes its tool results with one line:
//!   `.memory(compaction_adapters::rig::pruning_memory(30_000))`; and (feature `rig-agent`)
//!   `CompactionAgentHook`, rig-agent's `AgentHook`, which compacts before every model call
//!   of a run, between tool turns too: `.add_hook(CompactionAgentHook::pruning(30_000))`;
//! - [`genai`] (feature `genai`): [`from_genai`](genai::from_genai) /
//!   [`to_genai`](genai::to_genai).
//!
//! # Lossless, or saying what is lost
//!
//! Converting *from* a framework never fails and never loses anything. Fields our model has no
//! place for — provider items, citations, cache breakpoints, local call ids, URLs — are kept
//! in a *stash*: a JSON object under the framework's key (`"openai"`, `"rig"`, `"genai"`) in a
//! part's `unknown` map or a message's `meta`. Both survive the Haystack wire format and
//! compaction, so converting back gives the framework's messages exactly as they were.
//!
//! Converting *to* a framework returns a [`Conversion`]: the converted messages and a list of
//! [`Loss`]es, each naming a message (its index), a part and a field that the framework's types
//! have no place for (a message's `meta`, a result's error flag, an image's validation flag,
//! …). The list is exactly what converting back does not reproduce: the conversion converts its
//! output back and compares, field by field. [`Conversion::into_lossless`] turns any loss into
//! an [`Error`]; [`Conversion::into_value`] accepts them. Everything the framework can hold
//! comes back unchanged.
//!
//! Tool results carry only their call's id in every framework; ours carry the whole call. A
//! result read from a framework gets, as its origin, the call with that id found earlier in the
//! conversation (the latest one, as pairing by position would find it: some agents reuse ids).
//! A tool call's arguments that are not a JSON object travel as
//! [`ToolCall::raw_arguments`](compaction_model::ToolCall::raw_arguments).
//!
//! # Example
//!
//! ```
//! # #[cfg(feature = "rig")] {
//! use compaction_adapters::rig::{from_rig, to_rig};
//! use compaction_core::{Compactor, ToolResultPruningCompactor};
//! use compaction_tokens::ApproximateTokenCounter;
//! use rig_core::completion::message::{AssistantContent, CallId, ToolName, ToolResultContent, UserContent};
//! use rig_core::completion::Message;
//!
//! // A rig history: three searches with large results.
//! let name = ToolName::new("search").unwrap();
//! let mut history = vec![Message::user("Compare A, B and C.")];
//! for topic in ["A", "B", "C"] {
//!     let id = format!("call_{topic}");
//!     history.push(Message::from(AssistantContent::tool_call(&id, name.clone(), serde_json::json!({"q": topic}))));
//!     let result = ToolResultContent::text(format!("results about {topic}: ").repeat(400));
//!     history.push(Message::User { content: vec![UserContent::tool_result(CallId::from_wire(id), name.clone(), vec![result])] });
//! }
//!
//! // Ours, compacted, and back.
//! let mut ours = from_rig(&history);
//! let compaction = ToolResultPruningCompactor::default()
//!     .try_compact(&ours, 3_000, &ApproximateTokenCounter::default()).unwrap()
//!     .expect("something to prune");
//! compaction.apply(&mut ours).expect("made from `ours`, so every edit fits");
//! let (pruned, losses) = to_rig(&ours).into_parts();
//!
//! // The two older results are placeholders now; only compaction's markers in `meta` (which
//! // rig messages have no place for) are reported lost.
//! assert_eq!(pruned.len(), history.len());
//! assert_ne!(pruned[2], history[2]);
//! assert_eq!(pruned[6], history[6]);
//! assert!(losses.iter().all(|loss| loss.field == "meta.context_compaction"));
//! # }
//! ```
//!
//! ## Crate features
//!
//! None is on by default; each compiles only its framework.
//!
//! - `async-openai`: async-openai's Chat Completions and Responses types (types only, no client).
//! - `rig`: rig-core's messages and rig-memory's `MemoryPolicy`.
//! - `rig-agent`: `rig` and rig-agent's `AgentHook`.
//! - `genai`: genai's chat types (genai always brings its HTTP client with it).
//! - `examples`: not for users; what the runnable examples need (rig's agent runtime, tokio,
//!   plain-HTTP clients).
//!
//! ## Minimum supported Rust version
//!
//! 1.95, because rig 0.44 (features `rig` and `rig-agent`) needs it; a crate declares one
//! version for all its features. Without rig, its dependencies ask for less: 1.88 (the rest of
//! the workspace's) with `async-openai` or no feature, 1.89 with `genai` (uuid). It is
//! raised only in a minor version (0.1 → 0.2), never in a patch release, and the changelog says
//! so; see the workspace README for the policy.
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Without a framework, the shared machinery has no user.
#![cfg_attr(not(any(feature = "async-openai", feature = "rig", feature = "genai")), allow(dead_code))]

mod diff;
mod error;
mod loss;
// Each adapter uses some of these helpers; built with one feature, the others go unused.
#[allow(dead_code)]
mod stash;

#[cfg(feature = "genai")]
#[cfg_attr(docsrs, doc(cfg(feature = "genai")))]
pub mod genai;
#[cfg(feature = "async-openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "async-openai")))]
pub mod openai;
#[cfg(feature = "rig")]
#[cfg_attr(docsrs, doc(cfg(feature = "rig")))]
pub mod rig;

pub use error::Error;
pub use loss::{Conversion, Loss};
