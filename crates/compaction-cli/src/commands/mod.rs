//! One module per subcommand.

pub mod convert;
pub mod count;
pub mod offload;
pub mod prune;
pub mod simulate;

use anyhow::Result;
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
