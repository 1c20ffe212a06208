//! [async-openai](https://docs.rs/async-openai): Chat Completions messages and Responses input
//! items ⇄ ours (feature `async-openai`).
//!
//! # Chat Completions (`ChatCompletionRequestMessage`)
//!
//! One message of theirs is one of ours.
//!
//! | async-openai | ours |
//! |---|---|
//! | `System`, `Developer` | a system message (`meta["openai"]["role"]` says `developer`); `name` is its name |
//! | `User` | a user message: text, `image_url` (a base64 `data:` URL is the image; any other URL is kept in the stash), `input_audio` and `file` as files |
//! | `Assistant` | an assistant message: its content's texts (a refusal part: a text marked in its stash), `refusal` as a marked text, each tool call (function or custom) and the deprecated `function_call` as tool calls; `name`; `audio` in the stash |
//! | `Tool` | a tool message with one result (a string, or a list of texts); its origin is the call with `tool_call_id`, found earlier |
//! | `Function` (deprecated) | a tool message with one result; its origin the latest `function_call` of that name |
//!
//! Arguments are OpenAI's JSON text: an object is `arguments` (the text itself is kept when
//! writing the object again would not give it back, spaces and all), anything else
//! `raw_arguments`. An empty id is no id.
//!
//! Going the other way, Chat Completions has no place for `meta` (but the stash), parts'
//! `unknown` fields (but the stash), a tool call's `extra`, reasoning (Claude's thinking, say),
//! images or files outside user messages, an image's `meta` and `validation`, a file's `extra`
//! and `validation`, a tool message's `name` or text beside its result, a result's error flag,
//! or images and files inside results. A tool message with several results becomes one message
//! per result (a [`Loss::BOUNDARY`](crate::Loss::BOUNDARY)).
//!
//! # Responses (`InputItem`)
//!
//! | async-openai | ours |
//! |---|---|
//! | `message` (easy, input or output) from the user, system or developer | a message of that role |
//! | `message` from the assistant, `function_call`, `custom_tool_call`, `reasoning`, and every item this adapter does not map (web search, file search, computer, MCP, shell, image generation, item references, …) | parts of one assistant message, consecutive items together: texts, tool calls, reasoning (its summary texts joined by blank lines), and for the rest a reasoning part with no text and the item in its stash (counters leave reasoning out, as providers do with these items) |
//! | `function_call_output`, `custom_tool_call_output` | a tool message with one result: a string, or a list of texts, images and files |
//!
//! A part that starts a new item where the rule above would not (a second assistant message
//! right after another) says so in its stash. Going the other way, items have no place for what
//! Chat Completions lacks, and no boundary between two assistant messages in a row: they come
//! back as one (a [`Loss::BOUNDARY`](crate::Loss::BOUNDARY)).
//!
//! # Example
//!
//! ```
//! use async_openai::types::chat::ChatCompletionRequestMessage;
//! use compaction_adapters::openai::{from_chat_completions, to_chat_completions};
//!
//! let request: Vec<ChatCompletionRequestMessage> = serde_json::from_value(serde_json::json!([
//!     {"role": "developer", "content": "Use tools when they help."},
//!     {"role": "user", "content": "Weather in Oslo?"},
//!     {"role": "assistant", "tool_calls": [
//!         {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
//!     {"role": "tool", "tool_call_id": "call_1", "content": "9 °C, rain"},
//! ]))?;
//!
//! let ours = from_chat_completions(&request);
//! assert_eq!(ours[3].tool_call_result().unwrap().origin.arguments.get("city").unwrap(), "Oslo");
//!
//! // Back, exactly: the arguments' text with its space, the developer role.
//! assert_eq!(to_chat_completions(&ours).into_lossless()?, request);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod chat;
mod responses;
mod shared;

pub use chat::{from_chat_completions, to_chat_completions};
pub use responses::{from_responses_input, to_responses_input};
pub use shared::STASH;
