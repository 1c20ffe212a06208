//! Agent transcripts in the formats agents and providers write, read into
//! [`compaction_model::Message`]s and written back.
//!
//! An agent's log is the raw material for every question about its context: how large it was
//! at each model call, what pruning would have saved, what a compacted version looks like. This
//! crate turns the logs real agents leave behind into the workspace's [`Message`](compaction_model::Message) list, and
//! writes a changed list back into the same file, so that the rest of the workspace (counting,
//! compaction, the `compaction` command) works on any of them.
//!
//! Formats read ([`Format`]): Haystack `ChatMessage` JSON, OpenAI Chat Completions, OpenAI
//! Responses items, Anthropic Messages, Claude Code session logs, Codex CLI rollouts, SWE-agent
//! (0.x, 1.x) and mini-swe-agent trajectories, and OpenHands event logs. The format is told from
//! the content unless [`ReadOptions::with_format`] names it; when none fits, the error says what
//! the file holds.
//!
//! **The model's view.** A log is read as the conversation the model saw at its last call:
//! after a provider's or agent's compaction (Claude Code's `compact_boundary`, Codex's
//! `compacted`, an Anthropic `compaction` block, an OpenHands condensation) only what the model
//! still saw; lines it never saw (progress, bookkeeping, subagents' sidechains) are skipped.
//! [`ReadOptions::with_full_history`] reads everything instead. Whatever a reader leaves out on
//! purpose is said once in [`Conversation::notes`]; a file that reads as no message at all is an
//! error, never an empty conversation. Roles come from the log, never from a guess.
//!
//! **The provider's counts.** Where a log records what the provider counted for each model call
//! (Claude Code's `message.usage`, Codex's `token_count`, the model response OpenHands logs),
//! [`Conversation::usage`] holds it by assistant message, so that a program can anchor its
//! estimates on the provider's figures.
//!
//! **Writing back.** [`write()`] with no target writes the conversation back in the format read.
//! Claude Code sessions, Codex rollouts and Responses item lists keep every byte but those of
//! the tool results (and tool inputs) that changed. OpenAI, Anthropic and Haystack files are
//! lossless too: a message nobody changed is written as it was read (the same JSON value); a
//! changed one is encoded afresh and laid over its original, so fields the model does not know
//! survive; the envelope (`model`, `tools`, tau-bench's `reward`, the other conversations of the
//! file) is kept. Haystack messages are written in `ChatMessage.to_dict`'s current shape, which
//! gives back a file already in it. With a [`Target`] (Haystack, OpenAI or Anthropic) the
//! conversation is converted instead. A command that drops or puts in messages (a sliding
//! window's note, a summary) says where each message came from
//! ([`Changes::Rewritten`](compaction_model::Changes::Rewritten)), so each lands on its own
//! original; a Responses request's items are copied for the messages kept and encoded afresh for
//! those put in, every byte outside its `input` as it was. Event logs read line by line cannot
//! take such a change back ([`Conversation::takes_back_rewrites`]) and are written to a target
//! instead.
//!
//! Files holding several conversations (tau-bench's array of trajectories, OpenHands' evaluation
//! output with one instance a line, a JSON Lines file of SWE-agent trajectories) are read one
//! conversation at a time ([`ReadOptions::with_conversation`]); written back, the whole file
//! comes out with only that conversation changed. Conversations are never concatenated: their
//! tool-call ids and system prompts are their own.
//!
//! Event logs are read one line at a time, building only what each line's reader uses (of a
//! Claude Code event, not its envelope or the `toolUseResult` that repeats each output), on two
//! threads for large files; [`LineReader`] reads them from any source line by line, so a program
//! that only counts or converts never holds the file.
//!
//! A Haystack array, the common case for long transcripts, is read and written without a JSON
//! tree: its messages are parsed straight from their bytes (on every core), and each one left
//! alone is written back as those bytes when they spell what writing it would give (serde_json's
//! compact bytes, or Python's `json.dump` spacing and escapes of the same value).
//!
//! Bad input never panics: it is an [`Error`] naming the file, the line or message, and what is
//! wrong.
//!
//! # Example
//!
//! Reading a Claude Code session (a Codex rollout reads the same way):
//!
//! ```
//! use compaction_formats::{Format, ReadOptions, Target};
//! use compaction_model::Changes;
//!
//! # let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/transcripts/claude-code/fa812bfe-excerpt.jsonl");
//! let conversation = compaction_formats::read(std::fs::read(path)?, &ReadOptions::named(path))?;
//! conversation.notes.iter().for_each(|note| eprintln!("{note}"));
//! assert_eq!(conversation.format, Format::ClaudeCode);
//!
//! // The provider's own count of the conversation after its last reply.
//! let last = conversation.last_usage().expect("Claude Code logs record usage");
//! assert!(last.usage.context_tokens() > 0);
//!
//! // Written back, it is the session it was: only changed tool results would be rewritten.
//! let mut out = Vec::new();
//! compaction_formats::write(&conversation, &conversation.messages, None, &Changes::none(), &mut out)?;
//! assert_eq!(out, conversation.source());
//!
//! // Or converted: here to Anthropic Messages.
//! let mut out = Vec::new();
//! compaction_formats::write(&conversation, &conversation.messages, Some(Target::Anthropic), &Changes::Unknown, &mut out)?;
//! assert!(out.starts_with(b"{\"messages\":["));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Crate features
//!
//! None. The crate depends on compaction-model, memchr, serde, serde_json and thiserror, and
//! does no I/O of its own: it reads bytes and writes to any [`std::io::Write`].
//!
//! ## Minimum supported Rust version
//!
//! 1.88, the workspace's: see its README for the policy. It is raised only in a minor version
//! (0.1 → 0.2), never in a patch release, and the changelog says so.
#![deny(missing_docs)]

mod anthropic;
mod claude_code;
mod codec;
mod codex;
mod conversation;
mod detect;
mod document;
mod error;
mod eventlog;
mod form;
mod format;
mod formats;
mod haystack;
mod ids;
mod inplace;
mod itemsback;
mod kept;
mod logback;
mod messages;
mod notes;
mod openai;
mod openhands;
mod overlay;
mod pairing;
mod pipeline;
mod provider;
mod read;
mod request;
mod responses;
mod shapes;
mod style;
#[cfg(test)]
mod tests;
mod threads;
mod tree;
mod usage;
mod values;
mod write;

pub use conversation::{Conversation, Layout, ProviderCompaction, ReadOptions};
pub use detect::detect_lines;
pub use error::{Error, Location};
pub use format::{Format, Target, UnknownFormat};
pub use notes::{Note, NoteKind};
pub use pipeline::LineReader;
pub use provider::{provider_item, PROVIDER_ITEM};
pub use read::read;
pub use usage::{MessageUsage, Usage};
pub use write::{losses, write};
