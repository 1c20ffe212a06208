//! [async-openai](https://docs.rs/async-openai): Chat Completions messages and Responses input
//! items ⇄ ours (feature `async-openai`).
//!
//! (Mapping tables to come.)

mod chat;
mod responses;
mod shared;

pub use chat::{from_chat_completions, to_chat_completions};
pub use responses::{from_responses_input, to_responses_input};
pub use shared::STASH;
