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

use crate::UsageError;

/// Builds the counter a `--counter SPEC` names; a bad spec is a usage error.
pub fn counter(spec: &str) -> Result<Box<dyn TokenCounter>> {
    compaction_tokens::counter_from_spec(spec).map_err(|error| {
        // A tokenizer file that cannot be read is bad input, not bad usage.
        match error {
            compaction_tokens::Error::Tokenizer { .. } => anyhow::Error::new(error),
            other => anyhow::Error::new(UsageError(other.to_string())),
        }
    })
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
