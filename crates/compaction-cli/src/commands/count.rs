//! `compaction count`: how many tokens a conversation occupies.

use std::path::PathBuf;

use anyhow::{bail, Result};
use compaction_formats::Conversation;
use compaction_tokens::TokenCounter;

use crate::input::{read_tools, InputArgs, Source};
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

/// Runs the command: reads, counts (or reads the provider's count), and prints the number.
pub fn run(args: Args) -> Result<()> {
    let Args { input, counter: spec, tools, provider, calls } = args;
    let counter = crate::strategy::counter(&spec, &calls.client_settings())?;
    let given = match &tools {
        Some(path) => Some(read_tools(path)?),
        None => None,
    };
    let conversation = input.read_streaming_without_write_back()?;
    let name = Source::from_arg(input.input.as_deref()).name();
    let count = match provider {
        true => provider_count(&name, &conversation, counter.as_ref())?,
        false => {
            let tools = given.as_ref().unwrap_or(&conversation.tools);
            // A provider's count that failed is an error naming the call, never an estimate.
            let count = counter.try_count(&conversation.messages, tools)?;
            let how = match crate::strategy::is_provider_spec(&spec) {
                true => format!("counted by {}", counter.describe()),
                false => "counted locally".to_owned(),
            };
            say_left_out(&name, &how, &conversation, !tools.is_empty(), counter.as_ref())?;
            count
        }
    };
    let written = crate::output::write_output(None, format!("{count}\n").as_bytes());
    // The process ends after this: freeing a large conversation message by message would only
    // delay its exit, which gives the memory back at once.
    std::mem::forget(conversation);
    written
}

/// The provider's count the log records (`--provider`); an error when it records none.
fn provider_count(name: &str, conversation: &Conversation, counter: &dyn TokenCounter) -> Result<usize> {
    match crate::provider::context_tokens(conversation, counter)? {
        Some(count) => Ok(count),
        None => bail!(
            "{name}: the {} log records no provider counts; count without --provider for a local count",
            conversation.format.label()
        ),
    }
}

/// Says on standard error what the count leaves out that the log does not hold (the system
/// prompt, the tools), and the provider's own count when the log records one.
fn say_left_out(
    name: &str,
    how: &str,
    conversation: &Conversation,
    has_tools: bool,
    counter: &dyn TokenCounter,
) -> Result<()> {
    let Some(missing) = crate::provider::left_out(&conversation.messages, has_tools) else { return Ok(()) };
    let text = match crate::provider::context_tokens(conversation, counter)? {
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
    Ok(())
}
