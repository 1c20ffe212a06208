//! `compaction count`: how many tokens a conversation occupies.

use std::path::PathBuf;

use anyhow::Result;

use crate::input::{read_conversation, read_tools, Source};

/// Print a conversation's token count, a bare integer, on standard output.
///
/// Example: `compaction count session.json --counter tiktoken:gpt-4o --tools tools.json`
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  compaction count session.json --counter tiktoken:o200k_base --tools tools.json"
)]
pub struct Args {
    /// The conversation: a path, or `-` or nothing for standard input.
    pub input: Option<PathBuf>,
    /// The counter: approximate, approximate:CHARS_PER_TOKEN, tiktoken, tiktoken:ENCODING_OR_MODEL
    /// or huggingface:PATH.
    #[arg(long, default_value = "approximate")]
    pub counter: String,
    /// A JSON array of tool specs (name, description, parameters) sent with the conversation.
    #[arg(long)]
    pub tools: Option<PathBuf>,
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let counter = super::counter(&args.counter)?;
    let tools = match &args.tools {
        Some(path) => read_tools(path)?,
        None => Vec::new(),
    };
    let conversation = read_conversation(&Source::from_arg(args.input.as_deref()))?;
    let count = counter.count(&conversation.messages, &tools);
    crate::output::write_output(None, format!("{count}\n").as_bytes())
}
