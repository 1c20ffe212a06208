//! The provider's own counts a log records, as the anchor of every estimate the command makes,
//! and its records of each call, as a replay prices them.

use compaction_core::last_assistant_index;
use compaction_formats::{Conversation, MessageUsage};
use compaction_model::{Message, Role};
use compaction_replay::{Lifetime, Recorded};
use compaction_tokens::TokenCounter;

/// The provider's count of `messages` through their last assistant message (the reference's
/// `context_tokens`): the count recorded for the last assistant message that has one, plus the
/// local count of what follows it up to and including the last assistant message. `None` when
/// the log records no usage.
///
/// # Errors
///
/// The counter's, when it could not count what follows the recorded count.
pub fn context_tokens(
    conversation: &Conversation,
    counter: &dyn TokenCounter,
) -> Result<Option<usize>, compaction_tokens::Error> {
    let Some(last) = conversation.last_usage() else { return Ok(None) };
    let messages = &conversation.messages;
    let Some(through) = last_assistant_index(messages) else { return Ok(None) };
    let recorded = usize::try_from(last.usage.context_tokens()).unwrap_or(usize::MAX);
    let after = match messages.get(last.message + 1..=through) {
        Some(rest) if !rest.is_empty() => counter.try_count(rest, &[])?,
        _ => 0,
    };
    Ok(Some(recorded + after))
}

/// What a local count leaves out of what the provider was sent, when the log does not hold it:
/// `None` when the log holds a system prompt and tool schemas.
pub fn left_out(messages: &[Message], has_tools: bool) -> Option<&'static str> {
    let has_system = messages.iter().any(|m| m.role == Role::System);
    match (has_system, has_tools) {
        (true, true) => None,
        (false, true) => Some("the system prompt"),
        (true, false) => Some("the tool schemas"),
        (false, false) => Some("the system prompt and tool schemas"),
    }
}

/// The log's records of its calls, as the replay takes them.
pub fn recorded_calls(usage: &[MessageUsage]) -> Vec<Recorded> {
    usage
        .iter()
        .map(|u| {
            let v = u.usage;
            Recorded::new(
                u.message,
                v.input_tokens,
                v.cache_read_input_tokens,
                v.cache_creation_input_tokens,
                v.output_tokens,
            )
            .with_write_lifetimes(v.cache_creation_5m_input_tokens, v.cache_creation_1h_input_tokens)
            .with_call(u.timestamp_ms, u.model.as_deref().map(str::to_owned))
        })
        .collect()
}

/// Whether the log shows a one-hour prompt cache (a call that wrote to one).
pub fn one_hour_cache(calls: &[Recorded]) -> bool {
    calls.iter().any(|c| c.lifetime() == Some(Lifetime::OneHour))
}

/// The messages after which the provider compacted the log. Read with its full history, a log's
/// provider counts after the provider's own compaction are of the compacted conversation, not of
/// the one replayed: a replay shows them, and does not use them.
pub fn compacted_at(conversation: &Conversation) -> Vec<usize> {
    conversation.compactions.iter().map(|c| c.message).filter(|&m| m > 0).collect()
}
