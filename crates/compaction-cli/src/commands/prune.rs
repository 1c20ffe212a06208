//! `compaction prune`: compact a conversation down to a token target, by pruning old tool
//! results (the default) or by any other strategy: a sliding window, summaries a model writes,
//! offloading to files, or a chain of these.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use compaction_core::{
    CompactionReport, Compactor, InputReport, MaskingSettings, ResultReport, SummaryRound, STRATEGY_CHAIN,
    STRATEGY_OBSERVATION_MASKING,
};
use compaction_formats::{Conversation, Target};
use compaction_hook::{AgentState, CompactionHook, CompactionHookSettings, CompactionOutcome};
use compaction_model::{
    Changes, Message, ToolSpec, STRATEGY_SLIDING_WINDOW, STRATEGY_SUMMARIZATION,
    STRATEGY_TOOL_RESULT_OFFLOADING,
};
use compaction_offload::OffloadFailure;
use compaction_tokens::TokenCounter;
use serde::Serialize;

use crate::error::UsageError;
use crate::input::{InputArgs, ReadInput};
use crate::options::PruneOptions;
use crate::output::{Output, Planned, Ready};
use crate::strategy::{chain, Built, CacheAwareOptions, Stage, Strategy, StrategyOptions, SummaryLog};
use crate::text::{list, plural, thousands};

/// Compact a conversation until it fits a token target: prune old tool results (the default),
/// or slide a window, summarize with a model, offload to files, or chain these.
///
/// The default, --strategy tool-result-pruning, replaces results oldest first with a
/// placeholder, keeping every tool call paired with its result, until the conversation is at or
/// under --target-tokens; the results of the most recent steps are never touched. With
/// --context-window instead, the compaction hook decides: nothing happens below --compact-at of
/// the window, and the target is --compact-to of it.
///
/// --strategy sliding-window drops the oldest turns, then the current task's oldest steps, and
/// leaves one note (--omission-note); the system messages, the latest user message and the newest
/// --min-keep-steps steps always stay. --strategy summarization has a model summarize the oldest
/// stretches, round after round, until the conversation fits: --provider openai (Chat
/// Completions: OpenAI or any compatible server, such as a local one at --base-url
/// `http://127.0.0.1:8080/v1`) or anthropic, --model NAME, the key from OPENAI_API_KEY or
/// ANTHROPIC_API_KEY. A summary that fails (the model fails, writes nothing, or writes one that
/// does not shrink the conversation) is named on standard error and the last good result is
/// written, or with --raise-on-failure the command fails (exit 1) and writes nothing.
/// --strategy offload (or --offload-to alone) writes results to files in --offload-to and leaves
/// a pointer instead; no file is ever replaced (a taken name gets a numbered sibling), a folder
/// that cannot be created or written is an error before anything is read, and a result whose
/// write fails stays in the conversation, is named on standard error and listed in the report,
/// and makes the exit status 3. --strategy chain:A,B,... runs those strategies in order, each only
/// while the target is not met, and the report lists what each did.
///
/// The conversation is written in the input's format (or --to), and unchanged, byte for byte,
/// when nothing changed: a Claude Code session stays a session, a Codex rollout a rollout, with
/// only the pruned results' text replaced. Messages dropped or put in (window, summaries) are
/// written over their own originals in OpenAI, Anthropic and Haystack files and Responses
/// requests; an event log (Claude Code, Codex, Responses items one a line) cannot take them back,
/// so those strategies need --to there. --dry-run decides without writing the conversation, for the strategies that need no
/// model or store (pruning, sliding window, chains of them). One line on standard error says what
/// happened: tokens before and after, the target, and why it was not reached when it was not
/// (-q silences it). With --context-window, the provider's own count the log records (Claude
/// Code, Codex) anchors the estimate, as --context-tokens would. --counter openai:MODEL or
/// anthropic:MODEL counts with the provider's token counting endpoint (key and base URL from the
/// environment); a count that fails is an error naming the call.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("goal").required(true).args(["target_tokens", "context_window"])))]
#[command(after_help = "Examples:\n  \
    compaction prune session.json --target-tokens 50000 -o pruned.json --report report.json\n  \
    compaction prune run.traj --target-tokens 20000 --counter tiktoken:gpt-4o --exclude-tools memory --dry-run\n  \
    compaction prune session.jsonl --context-window 200000 --compact-at 0.7 --compact-to 0.4 --report r.json\n  \
    compaction prune session.jsonl --context-window 200000 --offload-to results/ -o session.pruned.json\n  \
    compaction prune run.json --target-tokens 30000 --strategy sliding-window --min-keep-steps 2 -o run.window.json\n  \
    compaction prune run.json --target-tokens 30000 --strategy chain:tool-result-pruning,sliding-window --dry-run\n  \
    OPENAI_API_KEY=local compaction prune run.json --target-tokens 30000 --strategy summarization \\\n      \
    --provider openai --model qwen2.5 --base-url http://127.0.0.1:8080/v1 -o run.summarized.json\n  \
    compaction prune session.jsonl --target-tokens 80000 --strategy chain:tool-result-pruning,summarization \\\n      \
    --provider anthropic --model claude-haiku-4-5 --raise-on-failure --to anthropic -o session.json\n  \
    compaction prune run.json --target-tokens 30000 --counter openai:gpt-4o --report report.json -o pruned.json")]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,
    /// Where to write the conversation; standard output when absent. Written atomically.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// The format to write: haystack, openai or anthropic; the input's when absent.
    #[arg(long, value_name = "FORMAT")]
    pub to: Option<Target>,
    /// Prune until the conversation is at or under this many tokens, as `count` counts them:
    /// the messages and the tool schemas (--tools, else the file's).
    #[arg(long, value_name = "N")]
    pub target_tokens: Option<usize>,
    /// Run the compaction hook for a model with this context window (tokens) instead of a fixed
    /// target.
    #[arg(long, value_name = "N")]
    pub context_window: Option<usize>,
    /// With --context-window: compact once the request reaches this fraction of the window.
    #[arg(long, value_name = "F", default_value_t = 0.7, requires = "context_window")]
    pub compact_at: f64,
    /// With --context-window: the fraction of the window to compact down to.
    #[arg(long, value_name = "F", default_value_t = 0.4, requires = "context_window")]
    pub compact_to: f64,
    /// With --context-window: the provider's token count of the last request and its reply (0:
    /// unknown, count everything); the count the log records when absent.
    #[arg(long, value_name = "N", requires = "context_window")]
    pub context_tokens: Option<usize>,
    /// A JSON array of tool specs sent with each request; the file's own tools when absent.
    #[arg(long, value_name = "FILE")]
    pub tools: Option<PathBuf>,
    /// The folder the offload strategy writes results to, leaving a pointer; alone, it means
    /// --strategy offload. Files are never replaced; a write that fails leaves its result and
    /// exits with 3.
    #[arg(long, value_name = "DIR")]
    pub offload_to: Option<PathBuf>,
    /// With --offload-to: characters of each offloaded text kept in its pointer.
    #[arg(long, value_name = "N", default_value_t = 200, requires = "offload_to")]
    pub preview_chars: usize,
    /// The counter: approximate, approximate:CHARS_PER_TOKEN, tiktoken, tiktoken:ENCODING_OR_MODEL,
    /// huggingface:PATH, or a provider's own count: openai:MODEL or anthropic:MODEL.
    #[arg(long, default_value = "approximate")]
    pub counter: String,
    #[command(flatten)]
    pub strategy: StrategyOptions,
    #[command(flatten)]
    pub prune: PruneOptions,
    #[command(flatten)]
    pub cache_aware: CacheAwareOptions,
    /// Write a JSON report of what was done to this file: tokens before and after as `count`
    /// counts the input and the output, the target and whether it was reached, what changed.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Decide what would be done without writing the conversation; prints the report (or
    /// writes it to --report). Pruning, sliding window and chains of them only.
    #[arg(long)]
    pub dry_run: bool,
}

/// Runs the command: checks the options and opens what it writes, reads, compacts, writes the
/// conversation and the report, puts them in place together, and says what happened.
pub fn run(args: Args) -> Result<()> {
    let Args {
        input,
        output,
        to,
        target_tokens,
        context_window,
        compact_at,
        compact_to,
        context_tokens,
        tools,
        offload_to,
        preview_chars,
        counter,
        strategy: options,
        prune,
        cache_aware,
        report,
        dry_run,
    } = args;
    let strategy = options.resolve(offload_to.is_some())?;
    let window = context_window.map(|window| Window {
        settings: hook_settings(window, compact_at, compact_to, &cache_aware),
        context_tokens,
    });
    let goal = goal(target_tokens, window, cache_aware.cache_aware)?;
    refuse_dry_run_io(dry_run, offload_to.is_some(), &strategy)?;
    // Shared with the hook in --context-window mode, and used again to count what was written.
    let counter_spec = counter;
    let counter: Arc<dyn TokenCounter> =
        crate::strategy::counter(&counter_spec, &options.client_settings())?.into();
    // Opens the store, if offloading, and builds the model client, if summarizing: a folder
    // that cannot be used or a missing key fails before the input is read.
    let mut built =
        options.build(&strategy, &prune, offload_to.as_deref().map(|dir| (dir, preview_chars)))?;
    let (sink, report_file) = open_outputs(output.as_deref(), report.as_deref(), dry_run)?;
    let (mut read, tools) = read(&input, output.as_deref(), to, tools.as_deref(), &strategy, dry_run)?;
    let pruned = compact(&mut read.conversation, tools, &goal, &mut built, &counter, &strategy)?;
    let failures = built.take_offload_failures();
    crate::error::say_failures(&failures);
    let summaries = built.summary_log();
    for failure in &summaries.failures {
        eprintln!("summarization: a summary failed, so the last good result is kept: {failure}");
    }
    let (ready_output, write_time) = write(sink, &read.conversation, to, &pruned)?;
    let timings = Timings { read: read.read, parse: read.parse, compact: pruned.took, write: write_time };
    let figures = figures(&pruned, &goal);
    // The report lists every result pruned: built only when it is written.
    let ready_report = match report.is_some() || dry_run {
        true => {
            let store_failures = offload_to.is_some().then_some(failures.as_slice());
            let summary_log = built.summaries.is_some().then_some(&summaries);
            let document = Report::new(&pruned, &figures, &timings, store_failures, summary_log);
            write_report(report_file, &document)?
        }
        false => None,
    };
    // The commit point: the report, then the conversation, put in place. Nothing after it fails
    // the run.
    let ending = crate::error::partial(&failures);
    crate::output::commit_run(ready_report.into_iter().chain(ready_output), crate::error::status(&ending))?;
    // A provider's counter is not asked again (a request per message) just to explain.
    let explaining = (!crate::strategy::is_provider_spec(&counter_spec)).then_some(counter.as_ref());
    let said = Said {
        pruned: &pruned,
        goal: &goal,
        figures: &figures,
        dry_run,
        strategy: &strategy,
        summaries: &summaries,
        prune: &prune,
        keep_observations: options.keep_observations,
        counter: explaining,
    };
    crate::progress::say(&said.line(&read.conversation.messages));
    // The process ends here: the system takes the conversation's memory back at once, which is
    // quicker than freeing its many allocations one by one.
    std::mem::forget(read);
    ending
}

/// What the run compacts toward.
enum Goal {
    /// `--target-tokens`: the request's size, as `count` counts it.
    Target(usize),
    /// `--context-window`: the compaction hook decides.
    Window(Window),
}

/// The hook's settings and the provider's count its estimate is anchored on (`None`: the count
/// the log records).
struct Window {
    settings: CompactionHookSettings,
    context_tokens: Option<usize>,
}

/// The hook's settings `--context-window`, `--compact-at`, `--compact-to` and `--cache-aware`
/// give; checked when the hook is built.
fn hook_settings(
    window: usize,
    compact_at: f64,
    compact_to: f64,
    cache_aware: &CacheAwareOptions,
) -> CompactionHookSettings {
    let settings =
        CompactionHookSettings::new(window).with_compact_at(compact_at).with_compact_to(compact_to);
    match cache_aware.rule(false, false) {
        Some(rule) => settings.with_cache(rule),
        None => settings,
    }
}

/// The goal `--target-tokens` or `--context-window` names; `--cache-aware` is a rule of the hook.
fn goal(target_tokens: Option<usize>, window: Option<Window>, cache_aware: bool) -> Result<Goal> {
    if cache_aware && window.is_none() {
        return Err(UsageError(
            "--cache-aware is a rule of the compaction hook: give --context-window N (a fixed --target-tokens \
             always compacts)"
                .into(),
        )
        .into());
    }
    match (target_tokens, window) {
        (Some(target), _) => Ok(Goal::Target(target)),
        (None, Some(window)) => Ok(Goal::Window(window)),
        (None, None) => Err(UsageError("give --target-tokens N or --context-window N".into()).into()),
    }
}

/// Refuses a dry run of what cannot be decided without writing files or asking a model.
fn refuse_dry_run_io(dry_run: bool, offload_to: bool, strategy: &Strategy) -> Result<()> {
    if dry_run && offload_to {
        return Err(
            UsageError("--dry-run cannot be combined with --offload-to, which writes files".into()).into()
        );
    }
    if let (true, Some(why)) = (dry_run, strategy.needs_io()) {
        return Err(
            UsageError(format!("--dry-run cannot be combined with --strategy {strategy}: {why}")).into()
        );
    }
    Ok(())
}

/// Checks the outputs before the input is read, so one that cannot be written fails at once:
/// the conversation's (none in a dry run) and the report's. They are put in place together at
/// the end, once everything else has succeeded.
fn open_outputs(
    output: Option<&Path>,
    report: Option<&Path>,
    dry_run: bool,
) -> Result<(Option<Output>, Option<Planned>)> {
    if let (Some(output), Some(report)) = (output, report) {
        let device = std::fs::metadata(output).is_ok_and(|found| !found.is_file() && !found.is_dir());
        if (output == report || super::same_file(output, report)) && !device {
            return Err(UsageError(format!(
                "-o and --report name the same file, {}: give each its own",
                output.display()
            ))
            .into());
        }
    }
    let sink = match dry_run {
        true => None,
        false => Some(Output::open(output)?),
    };
    let report_file = match report {
        Some(path) => Some(crate::output::plan(path).context("writing the report")?),
        None => None,
    };
    Ok((sink, report_file))
}

/// Reads the conversation and the tools sent with it (`--tools`, else the file's), refusing,
/// before anything is compacted, a write that would lose what the output cannot hold.
fn read(
    input: &InputArgs,
    output: Option<&Path>,
    to: Option<Target>,
    tools: Option<&Path>,
    strategy: &Strategy,
    dry_run: bool,
) -> Result<(ReadInput, Vec<ToolSpec>)> {
    let read = input.read_timed()?;
    refuse_lossy_write_back(input, to, strategy, dry_run, &read.conversation)?;
    if !dry_run {
        super::refuse_dropping_conversations(input, output, &read.conversation, to)?;
    }
    let tools = match tools {
        Some(path) => crate::input::read_tools(path)?,
        None => read.conversation.tools.clone(),
    };
    Ok((read, tools))
}

/// Refuses, before anything is compacted (or a model asked), a strategy that drops or puts in
/// messages when the output is the input's own format and that format can take back only edited
/// tool results (event logs).
fn refuse_lossy_write_back(
    input: &InputArgs,
    to: Option<Target>,
    strategy: &Strategy,
    dry_run: bool,
    conversation: &Conversation,
) -> Result<()> {
    if !strategy.rewrites() || dry_run || to.is_some() || conversation.takes_back_rewrites() {
        return Ok(());
    }
    let name = crate::input::Source::from_arg(input.input.as_deref()).name();
    Err(UsageError(format!(
        "{name}: --strategy {strategy} drops messages and puts a note or summary in, which a {} log cannot \
         take back (only changed tool results and inputs are written into it); give --to anthropic, openai \
         or haystack to write the compacted conversation in that format",
        conversation.format.label()
    ))
    .into())
}

/// What compacting did.
struct Pruned {
    /// How the conversation changed, as the writer takes it.
    changes: Changes,
    /// The compactor's report, when it changed something.
    report: Option<CompactionReport>,
    /// What the hook did, in --context-window mode.
    hook: Option<Hooked>,
    /// The request's tokens before and after (messages and tools, as `count` counts them).
    tokens_before: usize,
    tokens_after: usize,
    /// What the tool schemas take of the request, when something was compacted.
    tools_tokens: usize,
    /// How long compacting took.
    took: Duration,
}

/// What the hook did in --context-window mode.
struct Hooked {
    outcome: CompactionOutcome,
    /// The provider's count the estimate was anchored on (0: none).
    context_tokens: usize,
    /// The hook's estimate of the next request after compacting.
    estimated_after: usize,
}

/// A compaction that failed: nothing is written.
fn failed(strategy: &Strategy, error: &dyn std::error::Error) -> anyhow::Error {
    anyhow!("{strategy}: {}; nothing was written", chain(error))
}

/// Compacts `conversation` toward `goal` with the strategy `built`, and counts the request
/// before and after. The messages move into an agent state and back: nothing is copied, and the
/// state's running count makes the count after cost what changed, not the whole again. A count
/// a provider could not make is an error naming the call, before anything is written.
fn compact(
    conversation: &mut Conversation,
    tools: Vec<ToolSpec>,
    goal: &Goal,
    built: &mut Built,
    counter: &Arc<dyn TokenCounter>,
    strategy: &Strategy,
) -> Result<Pruned> {
    let spinner = crate::progress::spinner(if strategy.rewrites() { "compacting" } else { "pruning" });
    let started = Instant::now();
    let (state, changes, report, hook, tokens_before) = match goal {
        Goal::Target(target) => {
            let mut state = AgentState::new(std::mem::take(&mut conversation.messages)).with_tools(tools);
            let (changes, report, before) =
                to_target(&mut state, *target, built.compactor.as_ref(), counter.as_ref(), strategy)?;
            (state, changes, report, None, before)
        }
        Goal::Window(window) => {
            // The provider's own count, when the log records one, anchors the hook's estimate.
            let context_tokens = match window.context_tokens {
                Some(given) => given,
                None => crate::provider::context_tokens(conversation, counter.as_ref())?.unwrap_or(0),
            };
            let state = AgentState::new(std::mem::take(&mut conversation.messages))
                .with_tools(tools)
                .with_context_tokens(context_tokens);
            let hook = CompactionHook::new(built.take_compactor(), window.settings)
                .map_err(|e| UsageError(e.to_string()))?
                .with_counter(Box::new(Arc::clone(counter)));
            let (state, changes, report, hooked, before) = with_hook(state, &hook, context_tokens, strategy)?;
            (state, changes, report, Some(hooked), before)
        }
    };
    // What `count` prints on the output: the compacted conversation and the tools, counted
    // whole (from the running measures where the counter's counts add up).
    let tokens_after = match (&report, state.tools.is_empty()) {
        (None, _) => tokens_before,
        (Some(report), true) => report.tokens_after,
        (Some(_), false) => state.try_count_with_tools(counter.as_ref())?,
    };
    let took = started.elapsed();
    spinner.finish_and_clear();
    let tools_tokens = match &report {
        Some(report) if !state.tools.is_empty() => tokens_before.saturating_sub(report.tokens_before),
        _ => 0,
    };
    conversation.messages = state.into_messages();
    Ok(Pruned { changes, report, hook, tokens_before, tokens_after, tools_tokens, took })
}

/// Compacts toward a fixed target. The target is the request's, as `count` counts it: the
/// compactor, which counts messages, is given it less what the tools take, as the hook does.
/// Returns how the conversation changed, the report, and the request's tokens before.
fn to_target(
    state: &mut AgentState,
    target: usize,
    compactor: &dyn Compactor,
    counter: &dyn TokenCounter,
    strategy: &Strategy,
) -> Result<(Changes, Option<CompactionReport>, usize)> {
    let counting = state.counting(counter);
    let request = counting.try_count(state.messages(), &state.tools)?;
    let messages_only = match state.tools.is_empty() {
        true => request,
        false => counting.try_count(state.messages(), &[])?,
    };
    let compactor_target = target.saturating_sub(request.saturating_sub(messages_only));
    let compaction = compactor
        .try_compact(state.messages(), compactor_target, &counting)
        .map_err(|e| failed(strategy, &e))?;
    drop(counting);
    let Some(compaction) = compaction else { return Ok((Changes::none(), None, request)) };
    let changes = compaction.changes(state.messages());
    let report = state.apply(compaction).map_err(|e| failed(strategy, &e))?;
    Ok((changes, Some(report), request))
}

/// Runs the hook once on `state`. Returns the state, how it changed, the report, what the hook
/// did and the request's tokens before, as the hook counts them.
fn with_hook(
    mut state: AgentState,
    hook: &CompactionHook,
    context_tokens: usize,
    strategy: &Strategy,
) -> Result<(AgentState, Changes, Option<CompactionReport>, Hooked, usize)> {
    let before = state.try_count_with_tools(hook.counter())?;
    let outcome = hook.try_run(&mut state).map_err(|e| failed(strategy, &e))?;
    let report = outcome.report.clone();
    let changes = outcome.changes.clone().unwrap_or_else(Changes::none);
    // The hook's own estimate of the next request, on the compacted conversation.
    let estimated_after = hook.try_estimate(&state).map_err(|e| failed(strategy, &e))?;
    Ok((state, changes, report, Hooked { outcome, context_tokens, estimated_after }, before))
}

/// Writes the conversation to `sink` (none in a dry run) and says how long it took: the input
/// itself, byte for byte, when nothing changed and nothing is converted; else in the input's
/// format or `to`, each message over its own original.
fn write(
    sink: Option<Output>,
    conversation: &Conversation,
    to: Option<Target>,
    pruned: &Pruned,
) -> Result<(Option<Ready>, Duration)> {
    let started = Instant::now();
    let Some(sink) = sink else { return Ok((None, started.elapsed())) };
    let ready = match pruned.changes.is_unchanged() && to.is_none() {
        true => sink.write(conversation.source())?,
        false => super::write_conversation(sink, conversation, &conversation.messages, to, &pruned.changes)?,
    };
    let target = to.unwrap_or_else(|| conversation.format.default_target());
    if let (Some(report), false) = (&pruned.report, target == Target::Haystack) {
        if !report.inserted.is_empty() {
            crate::progress::say(&format!(
                "note: a note or summary put in is a user message marked as such only in its meta, which {} \
                 output cannot hold: a later run takes it for a user message (--to haystack keeps the mark)",
                target.as_str()
            ));
        }
    }
    Ok((ready, started.elapsed()))
}

/// The sizes a run reports, in the request's terms (messages and tools, as `count` counts them).
struct Figures {
    /// Tokens before.
    tokens_before: usize,
    /// Tokens of what was written (or would be, in a dry run).
    tokens_after: usize,
    /// The target, if there was one.
    target: Option<usize>,
    /// Whether it was reached; `None` without a target.
    reached: Option<bool>,
    /// What the tool schemas take of the request, when there are any.
    tools_tokens: usize,
}

/// The figures of a run: the target is --target-tokens, or the hook's share of the window once
/// it triggered (none when it did not), which the hook judges on its own estimate, anchored on
/// the provider's count when the log records one (without one, that estimate is `tokens_after`).
fn figures(pruned: &Pruned, goal: &Goal) -> Figures {
    let (target, reached) = match (goal, &pruned.hook) {
        (Goal::Window(window), Some(hooked)) => {
            let target = hooked.outcome.triggered.then(|| window.settings.budget());
            (target, target.map(|target| hooked.estimated_after <= target))
        }
        (Goal::Target(target), _) => (Some(*target), Some(pruned.tokens_after <= *target)),
        (Goal::Window(_), None) => (None, None),
    };
    Figures {
        tokens_before: pruned.tokens_before,
        tokens_after: pruned.tokens_after,
        target,
        reached,
        tools_tokens: pruned.tools_tokens,
    }
}

/// How long each phase took.
struct Timings {
    /// Reading the input.
    read: Duration,
    /// Parsing it.
    parse: Duration,
    /// Compacting.
    compact: Duration,
    /// Writing the output.
    write: Duration,
}

/// The report document: what changed, the sizes, per-result details and timings; for a
/// strategy that drops or puts in messages, which (`removed`: indices read, `inserted`: indices
/// written); for a chain, each stage's own report (`stages`); a failure the run got past; in
/// --context-window mode, what the hook estimated and decided; the store's failed writes when
/// offloading; the summary rounds when summarizing. Its fields in the order written.
///
/// `tokens_before`, `tokens_after` and `target_tokens` are the request's, as `count` counts it:
/// the messages and the tools (`--tools`, else the file's), so `tokens_after` is what `count`
/// prints on the output (given the same tools, when the output format cannot hold them), and
/// `target_reached` is whether it is at or under the target. The per-result entries and a
/// chain's stages count messages, each result's message on its own.
#[derive(Serialize)]
struct Report<'a> {
    changed: bool,
    tokens_before: usize,
    tokens_after: usize,
    target_tokens: Option<usize>,
    target_reached: Option<bool>,
    tokens_freed: usize,
    pruned: Vec<usize>,
    results: &'a [ResultReport],
    inputs_cleared: &'a [InputReport],
    timings_ms: TimingsMs,
    #[serde(skip_serializing_if = "is_zero")]
    tools_tokens: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    strategy: Option<&'a str>,
    /// Only for the strategies that drop or put in messages, and chains.
    #[serde(skip_serializing_if = "Option::is_none")]
    removed: Option<&'a [usize]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inserted: Option<&'a [usize]>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stages: &'a [CompactionReport],
    #[serde(skip_serializing_if = "Option::is_none")]
    failure: Option<&'a str>,
    #[serde(flatten)]
    hook: Option<HookReport<'a>>,
    /// Without the hook: the compactor's own target, when the tools take part of the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    compactor_target_tokens: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    store_failures: Option<&'a [OffloadFailure]>,
    #[serde(flatten)]
    summaries: Option<SummaryReport<'a>>,
}

/// The phases' times in milliseconds, to the microsecond.
#[derive(Serialize)]
struct TimingsMs {
    read: f64,
    parse: f64,
    compact: f64,
    write: f64,
}

/// What the hook estimated and decided (`--context-window`).
#[derive(Serialize)]
struct HookReport<'a> {
    triggered: bool,
    estimated_tokens: usize,
    estimated_tokens_after: usize,
    compactor_target_tokens: Option<usize>,
    context_tokens: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    declined: Option<&'a str>,
}

/// The summary rounds and failures (summarization).
#[derive(Serialize)]
struct SummaryReport<'a> {
    summary_rounds: &'a [SummaryRound],
    summary_failures: &'a [String],
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn millis(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1e6).round() / 1e3
}

impl<'a> Report<'a> {
    fn new(
        pruned: &'a Pruned,
        figures: &Figures,
        timings: &Timings,
        store_failures: Option<&'a [OffloadFailure]>,
        summaries: Option<&'a SummaryLog>,
    ) -> Report<'a> {
        let report = pruned.report.as_ref();
        let rewrote = report.filter(|r| !r.removed.is_empty() || !r.inserted.is_empty());
        let hook = pruned.hook.as_ref().map(|hooked| HookReport {
            triggered: hooked.outcome.triggered,
            estimated_tokens: hooked.outcome.estimated_tokens,
            estimated_tokens_after: hooked.estimated_after,
            compactor_target_tokens: hooked.outcome.target_tokens,
            context_tokens: hooked.context_tokens,
            declined: hooked.outcome.declined.as_deref(),
        });
        Report {
            changed: pruned.hook.as_ref().map_or(report.is_some(), |hooked| hooked.outcome.compacted),
            tokens_before: figures.tokens_before,
            tokens_after: figures.tokens_after,
            target_tokens: figures.target,
            target_reached: figures.reached,
            tokens_freed: figures.tokens_before.saturating_sub(figures.tokens_after),
            pruned: report.map(CompactionReport::changed_indices).unwrap_or_default(),
            results: report.map_or(&[], |r| &r.results),
            inputs_cleared: report.map_or(&[], |r| &r.inputs_cleared),
            timings_ms: TimingsMs {
                read: millis(timings.read),
                parse: millis(timings.parse),
                compact: millis(timings.compact),
                write: millis(timings.write),
            },
            tools_tokens: figures.tools_tokens,
            strategy: report.map(|r| r.strategy.as_str()),
            removed: rewrote.map(|r| r.removed.as_slice()),
            inserted: rewrote.map(|r| r.inserted.as_slice()),
            stages: report.map_or(&[], |r| &r.stages),
            failure: report.and_then(|r| r.failure.as_deref()),
            hook,
            compactor_target_tokens: match pruned.hook {
                None => report.filter(|_| figures.tools_tokens > 0).map(|r| r.target_tokens),
                Some(_) => None,
            },
            store_failures,
            summaries: summaries
                .map(|log| SummaryReport { summary_rounds: &log.rounds, summary_failures: &log.failures }),
        }
    }
}

/// Writes the report to its file, staged for the commit, or to standard output.
fn write_report(file: Option<Planned>, document: &Report<'_>) -> Result<Option<Ready>> {
    let mut bytes = serde_json::to_vec_pretty(document)?;
    bytes.push(b'\n');
    match file {
        Some(planned) => {
            Ok(Some(planned.stage().and_then(|s| s.write(&bytes)).context("writing the report")?))
        }
        None => Output::Stdout.write(&bytes),
    }
}

/// What `prune` says on standard error, and what it needs to say why a target was not reached.
struct Said<'a> {
    pruned: &'a Pruned,
    goal: &'a Goal,
    figures: &'a Figures,
    dry_run: bool,
    strategy: &'a Strategy,
    summaries: &'a SummaryLog,
    prune: &'a PruneOptions,
    /// `--keep-observations`.
    keep_observations: Option<usize>,
    /// The counter, to count what the settings keep; none for a provider's.
    counter: Option<&'a dyn TokenCounter>,
}

impl Said<'_> {
    /// One line: what was done, the tokens before and after (as `count` counts them, or the
    /// hook's estimate), the target, reached or not and why not.
    fn line(&self, messages: &[Message]) -> String {
        let n = |n: usize| thousands(n);
        let head = match self.strategy.rewrites() || self.strategy.chain {
            true => format!("prune: {}", self.strategy),
            false => "prune".to_owned(),
        };
        let figures = self.figures;
        let report = self.pruned.report.as_ref();
        if let (Some(hooked), Goal::Window(window)) = (&self.pruned.hook, self.goal) {
            let outcome = &hooked.outcome;
            let settings = &window.settings;
            if !outcome.triggered {
                let anchor =
                    if hooked.context_tokens > 0 { " (the provider's count plus what followed)" } else { "" };
                return format!(
                    "{head}: {} tokens estimated{anchor}, under {} of the {}-token window ({}): nothing to do",
                    n(outcome.estimated_tokens),
                    settings.compact_at,
                    n(settings.context_window),
                    n(settings.threshold())
                );
            }
            if let Some(why) = &outcome.declined {
                return format!("{head}: not compacted under --cache-aware: {why}");
            }
            let done = match report {
                Some(report) => did(report, self.dry_run),
                None => "nothing changed".to_owned(),
            };
            let line = format!(
                "{head}: {done}: {} → {} tokens estimated (target {} = {} of the window",
                n(outcome.estimated_tokens),
                n(hooked.estimated_after),
                n(settings.budget()),
                settings.compact_to
            );
            if figures.reached == Some(true) {
                return format!("{line}, reached)");
            }
            return format!("{line}, not reached: {})", self.why_not(messages));
        }
        let target = figures.target.unwrap_or(0);
        match report {
            Some(report) => {
                let reached = match figures.reached {
                    Some(true) => "reached".to_owned(),
                    _ => format!("not reached: {}", self.why_not(messages)),
                };
                format!(
                    "{head}: {}: {} → {} tokens (target {}, {reached})",
                    did(report, self.dry_run),
                    n(figures.tokens_before),
                    n(figures.tokens_after),
                    n(target)
                )
            }
            None if figures.tokens_before <= target => {
                let what = if head == "prune" { "nothing to prune" } else { "nothing to do" };
                format!(
                    "{head}: {what}: {} tokens, already at or under the target {}",
                    n(figures.tokens_before),
                    n(target)
                )
            }
            None => format!(
                "{head}: {}: {} tokens (target {}, not reached: {})",
                if head == "prune" { "nothing pruned" } else { "nothing changed" },
                n(figures.tokens_before),
                n(target),
                self.why_not(messages)
            ),
        }
    }

    /// Why the run stopped above the target: a failed summary; the walk's running estimate that
    /// reached it when the whole did not; the tools; else what the strategies always keep.
    fn why_not(&self, messages: &[Message]) -> String {
        if !self.summaries.failures.is_empty() {
            return "a summary failed (said above)".to_owned();
        }
        let mut reasons = Vec::new();
        if let Some(report) = &self.pruned.report {
            if report.estimated_tokens_after <= report.target_tokens {
                // Where the compactor stopped on its estimate, as the reference's does.
                let after = self
                    .pruned
                    .hook
                    .as_ref()
                    .map_or(self.figures.tokens_after, |hooked| hooked.estimated_after);
                let over = after.saturating_sub(self.figures.target.unwrap_or(0));
                reasons.push(format!(
                    "the compactor stops once its running estimate reaches the target, as the reference's \
                     does, and counted whole the result is {} over (the counter's counts do not add up \
                     message by message)",
                    plural(over, "token")
                ));
                return reasons.join("; ");
            }
        }
        if let Some(overhead) = self.pruned.hook.as_ref().and_then(|h| h.outcome.overhead).filter(|&o| o > 0)
        {
            reasons.push(format!(
                "{} tokens of the request are not messages (system prompt, tools)",
                thousands(overhead as usize)
            ));
        } else if self.figures.tools_tokens > 0 {
            reasons.push(format!("{} tokens are tool schemas", thousands(self.figures.tools_tokens)));
        }
        if self.strategy.stages == [Stage::ObservationMasking] {
            let keep = self.keep_observations.unwrap_or(MaskingSettings::default().keep_observations);
            reasons.push(format!(
                "observation masking masks what SWE-agent's processor masks, whatever the target: the first \
                 observation and the newest {keep} stay whole (--keep-observations)"
            ));
        } else if self.strategy.rewrites() {
            let keep = self.prune.min_keep_steps;
            let steps = match keep {
                0 => String::new(),
                1 => " and the newest step (--min-keep-steps 1)".to_owned(),
                _ => format!(" and the newest {keep} steps (--min-keep-steps {keep})"),
            };
            reasons.push(format!(
                "the system messages, the latest user message{steps} are always kept{}",
                if self.strategy.has(Stage::Summarization) {
                    ", and nothing else may be summarized"
                } else {
                    ""
                }
            ));
        } else {
            reasons.push(why_not_pruned(self.prune, self.counter, messages));
        }
        reasons.join("; ")
    }
}

/// What a compaction did, in words: results pruned or offloaded, messages removed, summaries
/// put in, or each stage of a chain in turn with its sizes.
fn did(report: &CompactionReport, would: bool) -> String {
    let verbs = |done: &'static str, planned: &'static str| if would { planned } else { done };
    match report.strategy.as_str() {
        STRATEGY_SLIDING_WINDOW => format!(
            "{} {} and {} {}",
            verbs("removed", "would remove"),
            plural(report.removed.len(), "message"),
            verbs("left", "leave"),
            if report.inserted.is_empty() { "no note" } else { "a note" }
        ),
        STRATEGY_SUMMARIZATION => format!(
            "{} {} into {}",
            verbs("summarized", "would summarize"),
            plural(report.removed.len(), "message"),
            match report.inserted.len() {
                1 => "1 summary".to_owned(),
                n => format!("{} summaries", thousands(n)),
            }
        ),
        STRATEGY_CHAIN if !report.stages.is_empty() => report
            .stages
            .iter()
            .map(|stage| {
                format!(
                    "{} ({} → {})",
                    did(stage, would),
                    thousands(stage.tokens_before),
                    thousands(stage.tokens_after)
                )
            })
            .collect::<Vec<_>>()
            .join(", then "),
        STRATEGY_OBSERVATION_MASKING => {
            format!("{} {}", verbs("masked", "would mask"), plural(report.results.len(), "observation"))
        }
        STRATEGY_TOOL_RESULT_OFFLOADING => {
            format!("{} {}", verbs("offloaded", "would offload"), plural(report.results.len(), "result"))
        }
        _ => format!("{} {}", verbs("pruned", "would prune"), plural(report.results.len(), "result")),
    }
}

/// Why pruning cannot reach its target: no results, or what the settings protect; with
/// `counter`, how many tokens the results do not hold and the newest steps keep.
fn why_not_pruned(prune: &PruneOptions, counter: Option<&dyn TokenCounter>, messages: &[Message]) -> String {
    if !messages.iter().any(Message::has_tool_call_result) {
        return "no tool results in this conversation (its format holds tool output as plain messages)"
            .into();
    }
    let steps: Vec<(usize, usize)> = compaction_core::agent_step_spans(messages, 0)
        .into_iter()
        .filter(|&(first, end)| end > first + 1)
        .collect();
    let keep = match prune.keep_tool_results {
        Some(_) => 0,
        None => prune.min_keep_steps.min(steps.len()),
    };
    let mut reasons = Vec::new();
    if let Some(counter) = counter {
        let each = counter.count_each(messages).each;
        let others: usize =
            messages.iter().zip(each).filter(|(m, _)| !m.has_tool_call_result()).map(|(_, n)| n).sum();
        reasons.push(format!("{} tokens are not tool results", thousands(others)));
    }
    if let (true, Some(counter)) = (keep > 0, counter) {
        let held: usize = steps[steps.len() - keep..]
            .iter()
            .map(|&(first, end)| counter.count(&messages[first + 1..end], &[]))
            .sum();
        let what = if keep == 1 {
            "the newest step holds".to_owned()
        } else {
            format!("the newest {keep} steps hold")
        };
        reasons.push(format!(
            "{what} {} tokens of results (--min-keep-steps {})",
            thousands(held),
            prune.min_keep_steps
        ));
    }
    if let Some(results) = prune.keep_tool_results {
        reasons.push(format!("the newest {results} results are kept (--keep-tool-results)"));
    }
    reasons.push(format!("results under {} tokens stay (--min-tokens)", prune.min_tokens));
    if !list(&prune.exclude_tools).is_empty() {
        reasons.push(format!("results of {} stay (--exclude-tools)", prune.exclude_tools));
    }
    if prune.clear_at_least.is_some() {
        reasons.push("less than --clear-at-least would be freed".into());
    }
    reasons.join("; ")
}
