//! One module per subcommand.

pub mod convert;
pub mod count;
pub mod prune;

use anyhow::Result;
use compaction_model::Message;
use compaction_tokens::TokenCounter;

use crate::input::Layout;
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

/// Serializes messages in Haystack's shape, in the layout the input had.
pub fn haystack_bytes(messages: &[Message], layout: Layout) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    match layout {
        Layout::Array => {
            serde_json::to_writer(&mut out, messages)?;
            out.push(b'\n');
        }
        Layout::Lines => {
            for message in messages {
                serde_json::to_writer(&mut out, message)?;
                out.push(b'\n');
            }
        }
    }
    Ok(out)
}
