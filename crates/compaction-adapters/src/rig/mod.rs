//! [rig](https://docs.rs/rig-core): `rig_core::completion::Message` ⇄ ours, and
//! [`CompactionPolicy`], rig's `MemoryPolicy` run by our compactors (feature `rig`);
//! `CompactionAgentHook`, rig-agent's `AgentHook` compacting before every model call (feature
//! `rig-agent`).
//!
//! # The mapping
//!
//! | rig | ours |
//! |---|---|
//! | `Message::System { content }` | a system message with one text |
//! | `Message::User { content }` without tool results | a user message |
//! | `Message::User { content }` with tool results | one tool message per `ToolResult` (text around them in user messages of their own) |
//! | `Message::Assistant(AssistantMessage)` | an assistant message; `origin` and `stop` in `meta["rig"]` |
//! | `Text` | a text part |
//! | `ToolCall { id, function }` | a tool call: a provider id is its `id`; `arguments`, or `raw_arguments` when rig holds them as `invalid_arguments` |
//! | `ToolResult { call, name, content, is_error }` | a tool-call result; its origin is the call with that id, found earlier in the conversation |
//! | `ToolResultContent::Json` | a text part holding the JSON |
//! | `Image` (base64) | an image; other sources (URL, file id, raw bytes) are kept in the stash |
//! | `Audio`, `Video`, `Document` | a file (a text document: a text part) |
//! | `Reasoning` | a reasoning part |
//! | `Opaque` | a reasoning part with no text and the item in its stash (counters skip it, as providers do) |
//!
//! Everything our model has no field for (rig's `native` items, citations, local call ids,
//! recovered arguments, …) is kept in a stash: the JSON object under `"rig"` in the part's
//! `unknown` map or the message's `meta`. [`from_rig`] therefore never loses anything, and
//! [`to_rig`] of what it returns gives back the same rig messages.
//!
//! Going the other way, rig has no place for a message's `name` or `meta` (but the stash), for
//! parts' `unknown` fields (but the stash), for a tool call's `extra`, for files in assistant
//! messages, tool calls or reasoning in user messages, an image's `meta`, `validation` and MIME
//! types rig does not know, a file's `filename`, `extra` and `validation`, reasoning `extra`, or
//! files inside tool results. A result whose `origin` is not the call it answers comes back
//! with the call as its origin. [`to_rig`] names each of these in its [`Conversion`]'s losses.
//!
//! rig sends all results of a turn in one user message; our compactors rewrite a message
//! through its first result, so [`from_rig`] gives each result a tool message of its own and
//! [`to_rig`] joins consecutive tool messages again (a `join` flag in `meta["rig"]` records a
//! split that differs from this).
//!
//! Calls without an id get a local rig id made from their position; the results that answer
//! them (their origin equal to the call) get the same one, and the id is dropped again on the
//! way back.
//!
//! The [crate docs](crate) show a rig history converted, pruned and converted back;
//! `examples/rig_agent.rs` a rig agent whose memory prunes its loads.
//!
//! [`Conversion`]: crate::Conversion

mod convert;
#[cfg(feature = "rig-agent")]
mod hook;
mod memory;

pub use convert::{from_rig, to_rig, STASH};
#[cfg(feature = "rig-agent")]
#[cfg_attr(docsrs, doc(cfg(feature = "rig-agent")))]
pub use hook::CompactionAgentHook;
pub use memory::{pruning_memory, CompactionPolicy};
