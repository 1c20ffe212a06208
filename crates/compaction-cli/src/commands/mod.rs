//! One module per subcommand.

pub mod convert;
pub mod count;
pub mod offload;
pub mod prune;
pub mod simulate;

use std::path::Path;

use anyhow::Result;
use compaction_formats::{Conversation, Target};
use compaction_model::Message;
use compaction_tokens::TokenCounter;

/// Builds the counter a `--counter SPEC` names; a bad spec is a usage error. A provider's
/// counter (`openai:MODEL`, `anthropic:MODEL`) takes its key and base URL from the environment
/// and the default --timeout and --max-retries; a command that may call a provider builds its
/// counter with [`crate::strategy::counter`] and its own `ProviderCalls` instead.
pub fn counter(spec: &str) -> Result<Box<dyn TokenCounter>> {
    crate::strategy::counter(spec, &crate::strategy::ProviderCalls::default().client_settings())
}

/// Writes `messages` of `conversation` to `output` (standard output when `None`), back in the
/// format read or as `to`, and says once on standard error what the output could not hold.
pub fn write_conversation(
    output: Option<&Path>,
    conversation: &Conversation,
    messages: &[Message],
    to: Option<Target>,
    changed: Option<&[usize]>,
) -> Result<()> {
    let mut losses = Vec::new();
    crate::output::write_output_with(output, |out| {
        losses = compaction_formats::write(conversation, messages, to, changed, out)?;
        Ok(())
    })?;
    for loss in losses {
        crate::progress::say(&format!("note: {loss}"));
    }
    Ok(())
}

/// [`write_conversation`] for messages a strategy dropped or put in: `origin` names, for each
/// of `messages`, the message read it stands for (`None` for a note or a summary), so each is
/// written over its own original.
pub fn write_rewritten_conversation(
    output: Option<&Path>,
    conversation: &Conversation,
    messages: &[Message],
    to: Option<Target>,
    origin: &[Option<usize>],
) -> Result<()> {
    let mut losses = Vec::new();
    crate::output::write_output_with(output, |out| {
        losses = compaction_formats::write_rewritten(conversation, messages, to, origin, out)?;
        Ok(())
    })?;
    for loss in losses {
        crate::progress::say(&format!("note: {loss}"));
    }
    Ok(())
}
