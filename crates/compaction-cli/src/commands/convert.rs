//! `compaction convert`: rewrite a conversation in another format.

use std::path::PathBuf;

use anyhow::Result;

use crate::input::{read_conversation, Source};

/// Target formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    /// Haystack's current `ChatMessage.to_dict` shape.
    Haystack,
}

/// Read a conversation and write it back in Haystack's current shape.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  compaction convert old-session.json --to haystack -o session.json")]
pub struct Args {
    /// The conversation: a path, or `-` or nothing for standard input.
    pub input: Option<PathBuf>,
    /// The format to write.
    #[arg(long, value_enum, default_value = "haystack")]
    pub to: Target,
    /// Where to write; standard output when absent. Written atomically.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let conversation = read_conversation(&Source::from_arg(args.input.as_deref()))?;
    let bytes = super::haystack_bytes(&conversation.messages, conversation.layout)?;
    crate::output::write_output(args.output.as_deref(), &bytes)
}
