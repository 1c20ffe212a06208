//! Token counters for LLM-agent conversations.
//!
//! A compactor needs to know how big a conversation is before it can decide what to drop. This
//! crate answers that question behind one trait, [`TokenCounter`], so the code that decides
//! never depends on the tokenizer that measures: pass a `&dyn TokenCounter` and swap backends
//! freely.
//!
//! What every counter measures is the same text: Haystack's rendering of the conversation (see
//! [`rendered_text`]), with a flat charge per image and file. Matching that rendering character
//! for character, down to how Python's `json.dumps` prints tool-call arguments, is what makes
//! the counts here equal the reference's.
//!
//! Three backends:
//!
//! - [`ApproximateTokenCounter`]: characters divided by a ratio (4 by default). No
//!   dependencies, always available, measured without building any string.
//! - `TiktokenCounter` (feature `tiktoken`): OpenAI's encodings o200k_base, cl100k_base,
//!   p50k_base and r50k_base, or a model name mapped to its encoding.
//! - `HuggingFaceTokenCounter` (feature `huggingface`): any `tokenizer.json`, read from a file
//!   or from bytes, with truncation and padding turned off.
//!
//! [`counter_from_spec`] builds any of them from a short string such as `tiktoken:gpt-4o`.
//!
//! # Example
//!
//! ```
//! use compaction_model::Message;
//! use compaction_tokens::{ApproximateTokenCounter, TokenCounter};
//!
//! let messages = vec![Message::user("Hello, how are you?"), Message::assistant("Fine, thanks!")];
//! let counter = ApproximateTokenCounter::default();
//! // "[user] Hello, how are you?\n[assistant] Fine, thanks!" is 52 characters: 52 / 4 = 13.
//! assert_eq!(counter.count(&messages, &[]), 13);
//!
//! // Any counter fits where a `&dyn TokenCounter` is asked for.
//! fn fits(counter: &dyn TokenCounter, messages: &[Message], budget: usize) -> bool {
//!     counter.count(messages, &[]) <= budget
//! }
//! assert!(fits(&counter, &messages, 100));
//! ```
//!
//! ## Crate features
//!
//! - `tiktoken`: `TiktokenCounter`, through bpe-openai's tokenizer for o200k_base and cl100k_base
//!   (with encodings this crate's build script makes, keeping only what counting needs: 18 MB in
//!   the binary instead of 47) and tiktoken-rs for p50k_base and r50k_base.
//! - `huggingface`: `HuggingFaceTokenCounter`, through tokenizers (pure-Rust regex, no network).
//!
//! Neither is on by default: a crate that only needs the trait, or the approximate counter,
//! compiles no tokenizer.
//!
//! ## Minimum supported Rust version
//!
//! 1.88, the workspace's: see its README for the policy. It is raised only in a minor version
//! (0.1 → 0.2), never in a patch release, and the changelog says so.
#![deny(missing_docs)]

mod approximate;
mod counter;
mod error;
#[cfg(feature = "huggingface")]
mod huggingface;
#[cfg(any(feature = "tiktoken", feature = "huggingface"))]
mod parallel;
mod render;
mod running;
mod spec;
#[cfg(feature = "tiktoken")]
mod tiktoken;

pub use approximate::ApproximateTokenCounter;
pub use counter::{Additive, Counts, Measure, TokenCounter};
pub use error::Error;
#[cfg(feature = "huggingface")]
pub use huggingface::HuggingFaceTokenCounter;
pub use render::{
    char_len, render_message, rendered_conversation, rendered_message, rendered_message_chars, rendered_text,
    rendered_tools, rendered_tools_chars, NonText,
};
pub use render::{
    describing_placeholder, render_message_with, rendered_conversation_with, short_placeholder, Attachment,
    RenderOptions,
};
pub use running::RunningCount;
pub use spec::counter_from_spec;
#[cfg(feature = "tiktoken")]
pub use tiktoken::{Encoding, TiktokenCounter};
