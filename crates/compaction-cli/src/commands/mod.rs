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

use crate::output::{Output, Ready};

/// Builds the counter a `--counter SPEC` names; a bad spec is a usage error. A provider's
/// counter (`openai:MODEL`, `anthropic:MODEL`) takes its key and base URL from the environment;
/// see [`crate::strategy::counter`].
pub fn counter(spec: &str) -> Result<Box<dyn TokenCounter>> {
    crate::strategy::counter(spec, &compaction_llm::ClientSettings::default())
}

/// Writes `messages` of `conversation` to `output`, back in the format read or as `to`, and says
/// once on standard error what the output could not hold. A file is then ready to be committed.
pub fn write_conversation(
    output: Output,
    conversation: &Conversation,
    messages: &[Message],
    to: Option<Target>,
    changed: Option<&[usize]>,
) -> Result<Option<Ready>> {
    let mut losses = Vec::new();
    let ready = output.write_with(|out| {
        losses = compaction_formats::write(conversation, messages, to, changed, out)?;
        Ok(())
    })?;
    for loss in losses {
        crate::progress::say(&format!("note: {loss}"));
    }
    Ok(ready)
}

/// [`write_conversation`] for messages a strategy dropped or put in: `origin` names, for each
/// of `messages`, the message read it stands for (`None` for a note or a summary), so each is
/// written over its own original.
pub fn write_rewritten_conversation(
    output: Output,
    conversation: &Conversation,
    messages: &[Message],
    to: Option<Target>,
    origin: &[Option<usize>],
) -> Result<Option<Ready>> {
    let mut losses = Vec::new();
    let ready = output.write_with(|out| {
        losses = compaction_formats::write_rewritten(conversation, messages, to, origin, out)?;
        Ok(())
    })?;
    for loss in losses {
        crate::progress::say(&format!("note: {loss}"));
    }
    Ok(ready)
}

/// Whether `a` and `b` are the same file (through links, or hard links); `false` when either
/// does not exist.
pub(crate) fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
