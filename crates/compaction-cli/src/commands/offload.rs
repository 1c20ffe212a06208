//! `compaction offload`: move the latest step's tool results to files and leave pointers.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use compaction_hook::AgentState;
use compaction_model::{Changes, Message, Role};
use compaction_offload::{OffloadOutcome, ToolResultOffloadHook};

use crate::error::{partial, say_failures, status};
use crate::input::InputArgs;
use crate::options::Policies;
use crate::output::Output;
use compaction_formats::{Conversation, Target};

/// Offload the trailing tool results to files and leave a pointer in their place.
///
/// Runs the offload hook an agent runs after each tool step: the trailing tool results of the
/// conversation (the latest step's) that a --policy picks are written to files under --store and
/// replaced with a pointer naming the file, with a preview. Errors, empty results and results
/// already offloaded stay. No file is ever replaced: when a file's name is taken (by an earlier
/// run, or another process writing to the same folder) the result goes to NAME_2.EXT, and so on,
/// and the pointer names that file. A store folder that cannot be created or written is an
/// error before anything is read (exit status 1). A result whose write fails stays in the
/// conversation; each such failure is named on standard error with its file's name and the
/// system's error, the conversation is still written, and the exit status is 3.
/// The conversation is written in the input's format (or --to), and unchanged, byte for byte,
/// when nothing was offloaded.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Policies (TOOLS=POLICY; the most specific key wins: a name, then a set, then *):\n  \
    *=always               every tool's results (the default when no --policy is given)\n  \
    read_file=over:2000    read_file's results longer than 2000 characters\n  \
    search,grep=over:500   one policy for a set of tools\n  \
    memory=never           opt a tool out of a * policy\n\
\n\
Examples:\n  \
    compaction offload run.json --store results/ -o run.offloaded.json\n  \
    compaction offload session.jsonl --store results/ --policy '*=over:4000' --policy memory=never\n  \
    compaction offload run.json --store results/ --policy read_file,grep=always --step 7 --preview-chars 80"
)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,
    /// The folder the results are written to (created when missing). Files are named
    /// STEP_TOOL_CALLID.EXT (NAME_2.EXT, … when taken) and written atomically.
    #[arg(long, value_name = "DIR")]
    pub store: PathBuf,
    #[command(flatten)]
    pub policies: Policies,
    /// The step number used in the files' names; the number of assistant messages when absent.
    #[arg(long, value_name = "N")]
    pub step: Option<usize>,
    /// Characters of each offloaded text kept in its pointer.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub preview_chars: usize,
    /// Where to write the conversation; standard output when absent. Written atomically.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// The format to write: haystack, openai or anthropic; the input's when absent.
    #[arg(long, value_name = "FORMAT")]
    pub to: Option<Target>,
}

/// Runs the command: opens the store and the output, reads, offloads, says what went where,
/// and writes the conversation.
pub fn run(args: Args) -> Result<()> {
    let Args { input, store: dir, policies, step, preview_chars, output, to } = args;
    let store = Arc::new(crate::strategy::open_store(&dir)?);
    // An output that cannot be written fails before the input is read.
    let sink = Output::open(output.as_deref())?;
    let mut conversation = input.read()?;
    // Before any result is stored.
    super::refuse_dropping_conversations(&input, output.as_deref(), &conversation, to)?;
    let hook = ToolResultOffloadHook::new(store, policies.strategies()).with_preview_chars(preview_chars);
    let outcome = offload(&hook, &mut conversation, step);
    say_failures(&outcome.failures);
    // Offloading keeps every result's place and tool, so the names are read as well after it.
    eprintln!("{}", summary(&conversation.messages, &outcome, &dir.display().to_string()));
    let ready = if outcome.offloaded.is_empty() && to.is_none() {
        sink.write(conversation.source())?
    } else {
        // The hook replaces messages in place, so the offloaded ones are all that changed.
        let changes = Changes::in_place(outcome.offloaded.clone());
        super::write_conversation(sink, &conversation, &conversation.messages, to, &changes)?
    };
    let ending = partial(&outcome.failures);
    crate::output::commit_run(ready, status(&ending))?;
    // The process ends here: the system takes the conversation's memory back at once.
    std::mem::forget(conversation);
    ending
}

/// Runs the offload hook once on `conversation`, at agent step `step` (by default, the number of
/// model calls it holds). The conversation moves into the agent state and back: a large one is
/// not copied.
fn offload(
    hook: &ToolResultOffloadHook,
    conversation: &mut Conversation,
    step: Option<usize>,
) -> OffloadOutcome {
    let step =
        step.unwrap_or_else(|| conversation.messages.iter().filter(|m| m.role == Role::Assistant).count());
    let mut state = AgentState::new(std::mem::take(&mut conversation.messages))
        .with_tools(std::mem::take(&mut conversation.tools));
    state.step_count = step;
    let outcome = hook.run(&mut state);
    conversation.tools = std::mem::take(&mut state.tools);
    conversation.messages = state.into_messages();
    outcome
}

/// One line: how many of the trailing results went where, and how many failed.
pub fn summary(messages: &[Message], outcome: &OffloadOutcome, store: &str) -> String {
    let trailing_messages = messages.iter().rev().take_while(|m| m.has_tool_call_result()).count();
    if trailing_messages == 0 {
        return "offload: nothing to do: the conversation does not end with tool results".to_owned();
    }
    let trailing: usize =
        messages[messages.len() - trailing_messages..].iter().map(|m| m.tool_call_results().count()).sum();
    let name = |index: usize, position: usize| {
        let tool =
            messages[index].tool_call_results().nth(position).map_or("?", |r| r.origin.tool_name.as_str());
        match position {
            0 => format!("{tool} (message {index})"),
            p => format!("{tool} (message {index}, result {})", p + 1),
        }
    };
    let mut line = format!(
        "offload: {} of {trailing} trailing tool results offloaded to {store}",
        outcome.results.len()
    );
    if !outcome.results.is_empty() {
        let names: Vec<String> = outcome.results.iter().map(|r| name(r.at.index, r.at.position)).collect();
        line.push_str(&format!(": {}", names.join(", ")));
    }
    if !outcome.binary_unsupported.is_empty() {
        let names: Vec<String> =
            outcome.binary_unsupported.iter().map(|r| name(r.index, r.position)).collect();
        line.push_str(&format!("; kept, binary content the store does not take: {}", names.join(", ")));
    }
    let failed = outcome.failed_results().len();
    let kept = trailing.saturating_sub(outcome.results.len() + outcome.binary_unsupported.len() + failed);
    if kept > 0 {
        line.push_str(&format!("; {kept} kept (by policy, or an error, empty or already offloaded)"));
    }
    if failed > 0 {
        line.push_str(&format!("; {failed} failed and stayed in context"));
    }
    line
}
