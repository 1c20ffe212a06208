//! Messages, content parts and metadata markers for LLM-agent conversations.
//!
//! This is the bottom layer of the `compaction` workspace: plain data and the wire format,
//! nothing else. Every other crate in the workspace (token counters, compactors, hooks, the
//! command line) speaks in these types. If you are writing an agent loop you will mostly meet
//! them through [`Message`]'s constructors; if you are writing a compactor or a counter you will
//! read [`Part`]s.
//!
//! The model follows Haystack's `ChatMessage` closely, so conversations move between the two
//! without loss:
//!
//! - four [`Role`]s: system, user, assistant and tool;
//! - six kinds of [`Part`]: text, tool call, tool-call result, reasoning, image and file;
//! - a `meta` JSON object per message, where compaction and offloading leave the markers in
//!   [`meta`](crate::CONTEXT_COMPACTION) so later runs know what was rewritten;
//! - [`Text`] for text parts and string results: a string that knows its length in characters,
//!   as a Python `str` does, so counting in characters never rescans it.
//!
//! Reading ([`Message::from_value`], [`messages_from_value`], or from bytes without a `Value`
//! tree: [`Message::from_slice`], [`messages_from_slice`]) accepts every shape Haystack's
//! `ChatMessage.from_dict` accepts: the current one, `content` as a plain string, the older
//! `_role`/`_content` shape and the flat part shapes. Writing ([`Message::to_value`] or
//! `serde_json::to_string`) produces exactly what `ChatMessage.to_dict` produces. Fields this
//! crate does not know are kept on the part and written back. Images and files are validated
//! as Haystack validates them (strict base64, a MIME type guessed from the bytes when missing).
//!
//! Bad input never panics: it is an [`Error`] naming the message's index and what is wrong.
//!
//! # Example
//!
//! ```
//! use compaction_model::{messages_from_value, Message, Role, ToolCall};
//! use serde_json::json;
//!
//! let conversation = messages_from_value(json!([
//!     {"role": "user", "content": "What is in README.md?"},
//!     {"role": "assistant", "meta": {}, "name": null, "content": [
//!         {"tool_call": {"tool_name": "read_file", "arguments": {"path": "README.md"}, "id": "c1"}}
//!     ]},
//!     {"role": "tool", "content": [
//!         {"tool_call_result": {"result": "# Hello", "error": false,
//!          "origin": {"tool_name": "read_file", "arguments": {"path": "README.md"}, "id": "c1"}}}
//!     ]},
//! ]))?;
//! assert_eq!(conversation[2].role, Role::Tool);
//! assert_eq!(conversation[2].tool_call_result().unwrap().origin.id.as_deref(), Some("c1"));
//!
//! // Written back in Haystack's current shape.
//! let written = serde_json::to_value(&conversation[0])?;
//! assert_eq!(written, json!({"role": "user", "meta": {}, "name": null, "content": [{"text": "What is in README.md?"}]}));
//!
//! // Building messages in code.
//! let call = ToolCall::new("search", serde_json::Map::new()).with_id("c2");
//! let result = Message::tool("no hits", call, false);
//! assert!(result.has_tool_call_result());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Crate features
//!
//! None. The crate depends on serde, serde_json (with `arbitrary_precision`, so integers of
//! any size survive, and `preserve_order`, so key order survives) and thiserror.
//!
//! ## Minimum supported Rust version
//!
//! 1.88, the workspace's: see its README for the policy. It is raised only in a minor version
//! (0.1 → 0.2), never in a patch release, and the changelog says so.
#![deny(missing_docs)]

mod arguments;
mod changes;
mod dialect;
mod error;
mod message;
mod meta;
mod object;
pub mod parallel;
mod prefix;
mod sniff;
mod spelled;
mod text;
mod tool;
mod wire;

pub use arguments::Arguments;
pub use changes::Changes;
pub use dialect::{lone_surrogate, to_value, value_from_slice, SurrogateEscapes};
pub use error::Error;
pub use message::{
    FilePart, ImagePart, JsonObject, Message, Part, ReasoningPart, ResultPart, Role, TextPart, ToolCall,
    ToolCallResult, ToolResultContent,
};
pub use meta::{
    is_compacted, is_offloaded, offloaded_references, set_offloaded_references, CompactionMarker,
    CONTEXT_COMPACTION, STRATEGY_SLIDING_WINDOW, STRATEGY_SUMMARIZATION, STRATEGY_TOOL_INPUT_CLEARING,
    STRATEGY_TOOL_RESULT_OFFLOADING, STRATEGY_TOOL_RESULT_PRUNING, TOOL_RESULT_OFFLOADED,
};
pub use object::SharedObject;
pub use prefix::Prefix;
pub use sniff::{decode_base64_strict, guess_mime, Base64Error};
pub use text::{JsonSource, Text};
pub use tool::ToolSpec;
pub use wire::{messages_from_slice, messages_from_value, messages_to_value};
