//! `compaction convert`: rewrite a conversation in another format.

use std::path::PathBuf;

use anyhow::Result;

use crate::input::InputArgs;
use crate::output::Output;
use compaction_formats::Target;
use compaction_model::Changes;

/// Read a conversation in any known format and write it in Haystack, OpenAI or Anthropic form.
///
/// Without `--to` the output is in the input's format (Claude Code as Anthropic, SWE-agent and
/// OpenHands as OpenAI), and the file comes back as it was.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  compaction convert old-session.json --to haystack -o session.json\n  \
                  compaction convert ~/.claude/projects/p/session.jsonl --to openai")]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,
    /// The format to write: haystack, openai or anthropic; the input's when absent.
    #[arg(long, value_name = "FORMAT")]
    pub to: Option<Target>,
    /// Where to write; standard output when absent. Written atomically.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    // An output that cannot be written fails before the input is read.
    let output = Output::open(args.output.as_deref())?;
    // Converting needs no copy of the file; writing back in its own format does.
    let conversation = match args.to {
        Some(_) => args.input.read_streaming()?,
        None => args.input.read()?,
    };
    super::refuse_dropping_conversations(&args.input, args.output.as_deref(), &conversation, args.to)?;
    // Converting changes no message.
    let ready =
        super::write_conversation(output, &conversation, &conversation.messages, args.to, &Changes::none())?;
    crate::output::commit_run(ready, 0)
}
