//! Context compaction for LLM agents: the [`Compactor`] trait and the strategies of Haystack's
//! compaction family — tool-result pruning, a sliding window, LLM summarization — each behaving
//! exactly as the reference's, and a chain that runs several in order.
//!
//! A long agent run fills its context window mostly with tool output that stopped mattering
//! once the model acted on it, and then with turns the current task no longer needs. This crate
//! rewrites such conversations into shorter ones without breaking them: a tool call never loses
//! its result, the input is never changed, and a compactor that cannot make the conversation
//! smaller says so by returning `None`.
//!
//! Overview:
//!
//! - [`Compactor`] is the strategy trait (object safe); [`Compaction`] is its answer: how the
//!   conversation changes (messages rewritten in place, each a [`Rewrite`], or a whole new
//!   conversation; built only through its constructors, and [`Compaction::apply`] refuses an
//!   edit it cannot place) and a [`CompactionReport`] of what changed. A strategy
//!   that can fail (a counter that asks a provider, a model that does not answer) fails
//!   through [`Compactor::try_compact`]; an async caller uses [`Compactor::compact_async`].
//! - [`ToolResultPruningCompactor`] replaces older tool results with a short placeholder, as
//!   Haystack 3.4's `ToolResultPruningCompactor` does, configured by [`PruningSettings`] (which
//!   also read Haystack's `to_dict` form). Its options beyond the reference, all off by
//!   default, are `exclude_tools`, `clear_at_least`, `clear_tool_inputs`,
//!   `keep_tool_results` and `preview_chars` (keep both ends of a pruned result around the
//!   placeholder); [`ToolResultPruningCompactor::plan`] is a dry run. Every tool result of a
//!   message is judged and pruned on its own, so no call loses its result.
//! - [`replace_tool_results_until_target`], [`agent_step_spans`] and [`last_assistant_index`]
//!   are the building blocks for other strategies that rewrite tool results in place.
//! - [`SlidingWindowCompactor`] keeps the instructions, the current task and the newest whole
//!   turns and steps that fit, and leaves one omission note for the rest.
//! - [`SummarizationCompactor`] has a chat model summarize the oldest stretches, in four tiers,
//!   until the conversation fits. It does no I/O: a [`SummarizationSession`] says what to ask
//!   the model and takes the reply, so the caller calls the model its own way, sync or async;
//!   [`ChatGenerator`] and [`AsyncChatGenerator`] are the seam for callers who hand it a client.
//! - [`context_overflow`] tells a provider's "the request is longer than the context window"
//!   error (OpenAI, Anthropic, Gemini, llama.cpp, vLLM, Mistral, …) from its status and body,
//!   with the sizes it states ([`ContextOverflow`]); compaction-hook recovers from it and
//!   compaction-llm's errors are classified by it.
//! - [`ObservationMaskingCompactor`] masks all but the first and the newest observations (tool
//!   results, or the user messages of a text-action agent) with a one-line note, exactly as
//!   SWE-agent's `LastNObservations` does, configured by [`MaskingSettings`].
//! - [`ChainCompactor`] runs strategies in order until the target is met — prune, then
//!   offload, then summarize, then slide — and reports what each did.
//! - [`leading_system_end`], [`latest_user_index`], [`historical_turn_groups`],
//!   [`current_agent_step_groups`] and [`is_compaction_message`] are how the window and the
//!   summarizer read a conversation.
//!
//! Sizes come from a `&dyn TokenCounter` of the compaction-tokens crate, which this crate uses
//! without any tokenizer compiled in. The crate does no I/O.
//!
//! # Example
//!
//! ```
//! use compaction_core::{Compactor, PruningSettings, ToolResultPruningCompactor};
//! use compaction_model::{Message, ToolCall};
//! use compaction_tokens::{ApproximateTokenCounter, TokenCounter};
//!
//! let call = |id: &str| ToolCall::new("search", serde_json::Map::new()).with_id(id);
//! let conversation = vec![
//!     Message::user("Find the release notes."),
//!     Message::assistant_with_calls(None, vec![call("c1")]),
//!     Message::tool("lorem ipsum ".repeat(300), call("c1"), false),
//!     Message::assistant_with_calls(None, vec![call("c2")]),
//!     Message::tool("dolor sit ".repeat(300), call("c2"), false),
//! ];
//! let counter = ApproximateTokenCounter::default();
//! let before = counter.count(&conversation, &[]);
//!
//! let compactor = ToolResultPruningCompactor::new(PruningSettings::default())?;
//! let compaction = compactor.try_compact(&conversation, 1_000, &counter)?.expect("something to prune");
//!
//! // The older result gave way to the placeholder; the newest step is protected.
//! assert_eq!(compaction.report.changed_indices(), vec![2]);
//! assert_eq!(compaction.messages(&conversation)[4], conversation[4]);
//! assert!(counter.count(&compaction.messages(&conversation), &[]) < before);
//! // A conversation that already fits is left alone.
//! assert!(compactor.try_compact(&conversation, before, &counter)?.is_none());
//! # Ok::<(), compaction_core::Error>(())
//! ```
//!
//! ## Crate features
//!
//! None.
//!
//! ## Minimum supported Rust version
//!
//! 1.88, the workspace's: see its README for the policy. It is raised only in a minor version
//! (0.1 → 0.2), never in a patch release, and the changelog says so.
#![deny(missing_docs)]

mod chain;
mod compactor;
mod error;
mod generator;
mod masking;
mod overflow;
mod pruning;
mod regions;
mod settings;
mod sliding_window;
mod steps;
mod summarization;

pub use chain::{ChainCompactor, STRATEGY_CHAIN};
pub use compactor::{
    CompactFuture, Compaction, CompactionReport, Compactor, InputReport, Memo, PrunedResult, ResultReport,
    Rewrite,
};
pub use error::{error_chain, Error};
pub use generator::{AsyncChatGenerator, ChatGenerator, GenerateFuture, GeneratorError};
pub use masking::{
    MaskingSettings, ObservationMaskingCompactor, MASKED_IMAGES_NOTE, MASKED_OBSERVATION_NOTE,
    STRATEGY_OBSERVATION_MASKING,
};
pub use overflow::{context_overflow, ContextOverflow};
pub use pruning::ToolResultPruningCompactor;
pub use regions::{
    current_agent_step_groups, historical_turn_groups, is_compaction_message, latest_user_index,
    leading_system_end,
};
pub use settings::{
    component_type, InitParameters, IntegerSetting, PruningSettings, DEFAULT_PLACEHOLDER,
    HAYSTACK_PRUNING_TYPE,
};
pub use sliding_window::{
    SlidingWindowCompactor, SlidingWindowSettings, DEFAULT_OMISSION_NOTE, HAYSTACK_SLIDING_WINDOW_TYPE,
    NUM_REMOVED_PLACEHOLDER,
};
pub use steps::{
    agent_step_spans, last_assistant_index, replace_tool_results_until_target, Replacement, RewrittenResult,
};
pub use summarization::{
    summary_transcript, SummarizationCompactor, SummarizationSession, SummarizationSettings, Summarized,
    SummaryRequest, SummaryRound, SummaryTier, DEFAULT_SUMMARY_INSTRUCTION, HAYSTACK_SUMMARIZATION_TYPE,
};

// The README's examples are compiled and run as doc tests, so they cannot drift.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

// The workspace README's library example runs too.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct WorkspaceReadmeDoctests;
