//! `compaction count`: how many tokens a conversation occupies.

use std::path::PathBuf;

use anyhow::{bail, Result};

use crate::input::{read_tools, InputArgs};
use crate::strategy::ProviderCalls;

/// Print a conversation's token count, a bare integer, on standard output.
///
/// The tools counted are those of `--tools`, else those the file declares (OpenAI and Anthropic
/// `tools`). Of a file holding several conversations, one is counted: `--conversation N`.
/// A log read as the model saw it at its last call (after the provider's compaction) is counted
/// as that; `--full-history` counts everything. Where the log records the provider's own counts
/// (Claude Code, Codex, OpenHands), `--provider` prints the provider's count of the conversation through
/// its last reply instead. A local count leaves out what the log does not hold (Claude Code and
/// Codex logs hold neither the system prompt nor the tool schemas); a note on standard error
/// says so.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  compaction count session.json --counter tiktoken:o200k_base --tools tools.json\n  \
                  compaction count gpt-4o-airline.json --conversation 3\n  \
                  compaction count ~/.claude/projects/p/session.jsonl --provider\n  \
                  compaction count session.json --counter anthropic:claude-sonnet-4-5\n  \
                  compaction count session.json --counter openai:gpt-4o --timeout 20 --max-retries 2"
)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,
    /// The counter: approximate, approximate:CHARS_PER_TOKEN, tiktoken, tiktoken:ENCODING_OR_MODEL,
    /// huggingface:PATH, or a provider's own count: openai:MODEL or anthropic:MODEL (the key
    /// from OPENAI_API_KEY or ANTHROPIC_API_KEY, the base URL from OPENAI_BASE_URL or
    /// ANTHROPIC_BASE_URL).
    #[arg(long, default_value = "approximate")]
    pub counter: String,
    /// A JSON array of tool specs (name, description, parameters) sent with the conversation.
    #[arg(long)]
    pub tools: Option<PathBuf>,
    /// Print the provider's own count of the conversation through its last reply, as the log
    /// records it (prompt, cache reads and writes, and the reply), instead of counting locally.
    #[arg(long, conflicts_with_all = ["counter", "tools"])]
    pub provider: bool,
    #[command(flatten)]
    pub calls: ProviderCalls,
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let counter = crate::strategy::counter(&args.counter, &args.calls.client_settings())?;
    let given = match &args.tools {
        Some(path) => Some(read_tools(path)?),
        None => None,
    };
    let conversation = args.input.read_streaming()?;
    let name = crate::input::Source::from_arg(args.input.input.as_deref()).name();
    if args.provider {
        let Some(count) = crate::provider::context_tokens(&conversation, counter.as_ref())? else {
            bail!(
                "{name}: the {} log records no provider counts; count without --provider for a local count",
                conversation.format.label()
            );
        };
        return crate::output::write_output(None, format!("{count}\n").as_bytes());
    }
    let tools = given.as_ref().unwrap_or(&conversation.tools);
    // A provider's count that failed is an error naming the call, never an estimate.
    let count = counter.try_count(&conversation.messages, tools)?;
    if let Some(missing) = crate::provider::left_out(&conversation.messages, !tools.is_empty()) {
        let provider = crate::provider::context_tokens(&conversation, counter.as_ref())?;
        let how = match crate::strategy::is_provider_spec(&args.counter) {
            true => format!("counted by {}", counter.describe()),
            false => "counted locally".to_owned(),
        };
        let text = match provider {
            Some(provider) => format!(
                "note: {name}: {how}, without {missing} the log does not hold; the provider \
                 counted {provider} tokens through the last reply (--provider prints it)"
            ),
            None => format!(
                "note: {name}: {how}, without {missing} the log does not hold; the log records \
                 no provider counts"
            ),
        };
        crate::progress::say(&text);
    }
    let written = crate::output::write_output(None, format!("{count}\n").as_bytes());
    // The process ends after this: freeing a large conversation message by message would only
    // delay its exit, which gives the memory back at once.
    std::mem::forget(conversation);
    written
}
