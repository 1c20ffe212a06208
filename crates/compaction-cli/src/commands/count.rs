//! `compaction count`: how many tokens a conversation occupies.

use std::path::PathBuf;

use anyhow::Result;

use crate::input::{read_tools, InputArgs};

/// Print a conversation's token count, a bare integer, on standard output.
///
/// The tools counted are those of `--tools`, else those the file declares (OpenAI and Anthropic
/// `tools`). Of a file holding several conversations, one is counted: `--conversation N`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  compaction count session.json --counter tiktoken:o200k_base --tools tools.json\n  \
                  compaction count gpt-4o-airline.json --conversation 3"
)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,
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
    let given = match &args.tools {
        Some(path) => Some(read_tools(path)?),
        None => None,
    };
    let conversation = args.input.read()?;
    let tools = given.as_ref().unwrap_or(&conversation.tools);
    let count = counter.count(&conversation.messages, tools);
    crate::output::write_output(None, format!("{count}\n").as_bytes())
}
