//! `compaction prune`: compact a conversation down to a token target, by pruning old tool
//! results (the default) or by any other strategy: a sliding window, summaries a model writes,
//! offloading to files, or a chain of these.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use compaction_core::{
    CompactionReport, MaskingSettings, PruningSettings, ToolResultPruningCompactor, STRATEGY_CHAIN,
    STRATEGY_OBSERVATION_MASKING,
};
use compaction_hook::{AgentState, CompactionHook, CompactionHookSettings, CompactionOutcome};
use compaction_model::{
    Changes, Message, STRATEGY_SLIDING_WINDOW, STRATEGY_SUMMARIZATION, STRATEGY_TOOL_RESULT_OFFLOADING,
};
use compaction_offload::OffloadFailure;
use compaction_tokens::TokenCounter;
use serde_json::{json, Value};

use crate::input::InputArgs;
use crate::output::Output;
use crate::strategy::{Stage, Strategy, StrategyOptions, SummaryLog};
use crate::UsageError;
use compaction_formats::Target;

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
/// written over their own originals in OpenAI, Anthropic and Haystack files; an event log
/// (Claude Code, Codex, Responses items) cannot take them back, so those strategies need --to
/// there. --dry-run decides without writing the conversation, for the strategies that need no
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
    pub cache_aware: crate::strategy::CacheAwareOptions,
    /// Write a JSON report of what was done to this file: tokens before and after as `count`
    /// counts the input and the output, the target and whether it was reached, what changed.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Decide what would be done without writing the conversation; prints the report (or
    /// writes it to --report). Pruning, sliding window and chains of them only.
    #[arg(long)]
    pub dry_run: bool,
}

/// The pruning compactor's settings as options, shared by `prune` and `simulate`.
#[derive(Debug, Clone, clap::Args)]
pub struct PruneOptions {
    /// The number of most recent tool-calling steps never pruned, offloaded, summarized or
    /// dropped; 0 is allowed for sliding-window and summarization.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub min_keep_steps: usize,
    /// Only prune results larger than this many tokens.
    #[arg(long, default_value_t = 200, value_name = "N")]
    pub min_tokens: usize,
    /// The text left in place of a pruned result; `{tool_name}` is filled in.
    #[arg(long, value_name = "TEXT")]
    pub placeholder: Option<String>,
    /// Comma-separated meta keys whose results are left alone ("" for none).
    #[arg(long, value_name = "LIST", default_value = "tool_result_offloaded")]
    pub skip_meta_keys: String,
    /// Comma-separated tool names whose results are never pruned.
    #[arg(long, value_name = "LIST", default_value = "")]
    pub exclude_tools: String,
    /// Do nothing unless at least this many tokens would be freed.
    #[arg(long, value_name = "N")]
    pub clear_at_least: Option<usize>,
    /// Also replace the arguments of the calls whose results were pruned with `{}`.
    #[arg(long)]
    pub clear_tool_inputs: bool,
    /// Protect the N most recent tool results one by one, instead of whole steps.
    #[arg(long, value_name = "N")]
    pub keep_tool_results: Option<usize>,
    /// Keep the first and last N characters of each pruned result around the placeholder.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub preview_ends: usize,
}

impl PruneOptions {
    /// The compactor these options describe; invalid settings are usage errors.
    pub fn compactor(&self) -> Result<ToolResultPruningCompactor> {
        let mut settings = PruningSettings::default()
            .with_min_keep_steps(self.min_keep_steps)
            .with_min_tokens(self.min_tokens)
            .with_skip_meta_keys(list(&self.skip_meta_keys))
            .with_exclude_tools(list(&self.exclude_tools))
            .with_clear_at_least(self.clear_at_least)
            .with_clear_tool_inputs(self.clear_tool_inputs)
            .with_keep_tool_results(self.keep_tool_results)
            .with_preview_chars(self.preview_ends);
        if let Some(placeholder) = &self.placeholder {
            settings = settings.with_placeholder(placeholder.as_str());
        }
        ToolResultPruningCompactor::new(settings).map_err(|e| UsageError(e.to_string()).into())
    }
}

/// A comma-separated list; the empty string is the empty list.
pub fn list(text: &str) -> Vec<String> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let strategy = args.strategy.resolve(args.offload_to.is_some())?;
    if args.cache_aware.cache_aware && args.context_window.is_none() {
        return Err(UsageError(
            "--cache-aware is a rule of the compaction hook: give --context-window N (a fixed --target-tokens \
             always compacts)"
                .into(),
        )
        .into());
    }
    if args.dry_run && args.offload_to.is_some() {
        return Err(
            UsageError("--dry-run cannot be combined with --offload-to, which writes files".into()).into()
        );
    }
    if let (true, Some(why)) = (args.dry_run, strategy.needs_io()) {
        return Err(
            UsageError(format!("--dry-run cannot be combined with --strategy {strategy}: {why}")).into()
        );
    }
    // Shared with the hook in --context-window mode, and used again to count what was written.
    let counter: std::sync::Arc<dyn TokenCounter> =
        crate::strategy::counter(&args.counter, &args.strategy.client_settings())?.into();
    // Opens the store, if offloading, and builds the model client, if summarizing: a folder
    // that cannot be used or a missing key fails before the input is read.
    let offload = args.offload_to.as_deref().map(|dir| (dir, args.preview_chars));
    let mut built = args.strategy.build(&strategy, &args.prune, offload)?;
    // The outputs are checked before the input is read, so one that cannot be written fails at
    // once; they are put in place together at the end, once everything else has succeeded.
    if let (Some(output), Some(report)) = (&args.output, &args.report) {
        let device = std::fs::metadata(output).is_ok_and(|found| !found.is_file() && !found.is_dir());
        if (output == report || super::same_file(output, report)) && !device {
            return Err(UsageError(format!(
                "-o and --report name the same file, {}: give each its own",
                output.display()
            ))
            .into());
        }
    }
    let output = match args.dry_run {
        true => None,
        false => Some(Output::open(args.output.as_deref())?),
    };
    let report_file = match &args.report {
        Some(path) => Some(crate::output::plan(path).context("writing the report")?),
        None => None,
    };
    let mut input = args.input.read_timed()?;
    refuse_lossy_write_back(&args, &strategy, &input.conversation)?;
    if !args.dry_run {
        super::refuse_dropping_conversations(
            &args.input,
            args.output.as_deref(),
            &input.conversation,
            args.to,
        )?;
    }
    let tools = match &args.tools {
        Some(path) => crate::input::read_tools(path)?,
        None => input.conversation.tools.clone(),
    };

    // Store writes that failed, when offloading: each result stays in the conversation.
    let mut failures: Vec<OffloadFailure> = Vec::new();
    let spinner = crate::progress::spinner(if strategy.rewrites() { "compacting" } else { "pruning" });
    let started = Instant::now();
    let failed = |error: &dyn std::error::Error| {
        anyhow::anyhow!("{strategy}: {}; nothing was written", crate::strategy::chain(error))
    };
    // A count a provider could not make is an error naming the call, before anything is written.
    let count_failed = anyhow::Error::new;
    // The provider's own count, when the log records one, anchors the hook's estimate.
    let context_tokens = match (args.context_window, args.context_tokens) {
        (Some(_), Some(given)) => Some(given),
        (Some(_), None) => {
            let recorded = crate::provider::context_tokens(&input.conversation, counter.as_ref());
            Some(recorded.map_err(count_failed)?.unwrap_or(0))
        }
        (None, _) => None,
    };
    // The conversation moves into an agent state and back: nothing is copied, and the state's
    // running count makes the counts before and after cost what changed, not the whole again.
    let mut state = AgentState::new(std::mem::take(&mut input.conversation.messages)).with_tools(tools);
    // How the conversation changed (as the writer takes it), the compactor's report, the hook's
    // outcome in --context-window mode, and the request's tokens before (messages and tools, as
    // `count` counts them).
    let (changes, report, hook, tokens_before): (Changes, Option<CompactionReport>, Option<Hooked>, usize) =
        match (args.target_tokens, args.context_window) {
            (Some(target), _) => {
                // The target is the request's, as `count` counts it: the compactor, which counts
                // messages, is given it less what the tools take, as the hook does.
                let counting = state.counting(counter.as_ref());
                let request = counting.try_count(state.messages(), &state.tools).map_err(count_failed)?;
                let messages_only = match state.tools.is_empty() {
                    true => request,
                    false => counting.try_count(state.messages(), &[]).map_err(count_failed)?,
                };
                let compactor_target = target.saturating_sub(request.saturating_sub(messages_only));
                let compaction = built
                    .compactor
                    .try_compact(state.messages(), compactor_target, &counting)
                    .map_err(|e| failed(&e))?;
                drop(counting);
                match compaction {
                    Some(compaction) => {
                        let changes = compaction.changes(state.messages());
                        let report = state.apply(compaction).map_err(|e| failed(&e))?;
                        (changes, Some(report), None, request)
                    }
                    None => (Changes::none(), None, None, request),
                }
            }
            (None, Some(window)) => {
                let mut settings = CompactionHookSettings::new(window)
                    .with_compact_at(args.compact_at)
                    .with_compact_to(args.compact_to);
                if let Some(rule) = args.cache_aware.rule(false, false) {
                    settings = settings.with_cache(rule);
                }
                let hook = CompactionHook::new(built.take_compactor(), settings)
                    .map_err(|e| UsageError(e.to_string()))?
                    .with_counter(Box::new(counter.clone()));
                let context_tokens = context_tokens.unwrap_or(0);
                state = state.with_context_tokens(context_tokens);
                let before = state.try_count_with_tools(hook.counter()).map_err(count_failed)?;
                let outcome = hook.try_run(&mut state).map_err(|e| failed(&e))?;
                let report = outcome.report.clone();
                let changes = outcome.changes.clone().unwrap_or_else(Changes::none);
                // The hook's own estimate of the next request, on the compacted conversation.
                let estimated_after = hook.try_estimate(&state).map_err(|e| failed(&e))?;
                let hooked = Hooked { outcome, context_tokens, estimated_after };
                (changes, report, Some(hooked), before)
            }
            (None, None) => {
                return Err(UsageError("give --target-tokens N or --context-window N".into()).into())
            }
        };
    let counter = counter.as_ref();
    // What `count` prints on the output: the compacted conversation and the tools, counted
    // whole (from the running measures where the counter's counts add up).
    let tokens_after = match (&report, state.tools.is_empty()) {
        (None, _) => tokens_before,
        (Some(report), true) => report.tokens_after,
        (Some(_), false) => state.try_count_with_tools(counter).map_err(count_failed)?,
    };
    let compact_time = started.elapsed();
    spinner.finish_and_clear();
    failures.extend(built.take_offload_failures());
    super::offload::say_failures(&failures);
    let summaries = built.summary_log();
    for failure in &summaries.failures {
        eprintln!("summarization: a summary failed, so the last good result is kept: {failure}");
    }
    let tools_tokens = match &report {
        Some(report) if !state.tools.is_empty() => tokens_before.saturating_sub(report.tokens_before),
        _ => 0,
    };
    input.conversation.messages = state.into_messages();

    let started = Instant::now();
    let conversation = &input.conversation;
    let messages = &conversation.messages;
    let mut ready_output = None;
    if let Some(output) = output {
        // Nothing changed and nothing to convert: the input is the output, byte for byte.
        ready_output = match changes.is_unchanged() && args.to.is_none() {
            true => output.write(conversation.source())?,
            false => super::write_conversation(output, conversation, messages, args.to, &changes)?,
        };
        let target = args.to.unwrap_or_else(|| conversation.format.default_target());
        if let (Some(report), false) = (&report, target == Target::Haystack) {
            if !report.inserted.is_empty() {
                crate::progress::say(&format!(
                    "note: a note or summary put in is a user message marked as such only in its meta, which \
                     {} output cannot hold: a later run takes it for a user message (--to haystack keeps the \
                     mark)",
                    target.as_str()
                ));
            }
        }
    }
    let write_time = started.elapsed();

    let timings = Timings { read: input.read, parse: input.parse, compact: compact_time, write: write_time };
    // The target of the request: --target-tokens, or the hook's share of the window once it
    // triggered (none when it did not).
    let target = match &hook {
        None => args.target_tokens,
        Some(hooked) => hooked.outcome.triggered.then(|| budget(&args)),
    };
    let reached = match &hook {
        None => target.map(|target| tokens_after <= target),
        // The hook judges its target on its own estimate, anchored on the provider's count when
        // the log records one (without one, that estimate is `tokens_after`).
        Some(hooked) => target.map(|target| hooked.estimated_after <= target),
    };
    let figures = Figures { tokens_before, tokens_after, target, reached, tools_tokens };
    // The report lists every result pruned: built only when it is written.
    let mut ready_report = None;
    if args.report.is_some() || args.dry_run {
        let mut document = report_json(report.as_ref(), &figures, &timings);
        if let Some(hooked) = &hook {
            document["triggered"] = json!(hooked.outcome.triggered);
            document["estimated_tokens"] = json!(hooked.outcome.estimated_tokens);
            document["estimated_tokens_after"] = json!(hooked.estimated_after);
            document["compactor_target_tokens"] = json!(hooked.outcome.target_tokens);
            document["context_tokens"] = json!(hooked.context_tokens);
            document["changed"] = json!(hooked.outcome.compacted);
            if let Some(why) = &hooked.outcome.declined {
                document["declined"] = json!(why);
            }
        } else if let Some(report) = report.as_ref().filter(|_| tools_tokens > 0) {
            document["compactor_target_tokens"] = json!(report.target_tokens);
        }
        if args.offload_to.is_some() {
            document["store_failures"] = json!(failures);
        }
        if built.summaries.is_some() {
            document["summary_rounds"] = json!(summaries.rounds);
            document["summary_failures"] = json!(summaries.failures);
        }
        let bytes = report_bytes(&document, report.as_ref())?;
        ready_report = match report_file {
            Some(planned) => {
                Some(planned.stage().and_then(|s| s.write(&bytes)).context("writing the report")?)
            }
            None => Output::Stdout.write(&bytes)?,
        };
    }
    // The commit point: the report, then the conversation, put in place. Nothing after it fails
    // the run.
    let ending = super::offload::partial(&failures);
    crate::output::commit_run(ready_report.into_iter().chain(ready_output), super::offload::status(&ending))?;
    let said = Said {
        report: report.as_ref(),
        hook: hook.as_ref(),
        figures: &figures,
        dry_run: args.dry_run,
        strategy: &strategy,
        summaries: &summaries,
    };
    crate::progress::say(&said.line(&args, messages));
    // The process ends here: the system takes the conversation's memory back at once, which is
    // quicker than freeing its many allocations one by one.
    std::mem::forget(input);
    ending
}

/// The hook's target for the whole request: `compact_to` of the window, as the hook computes it.
fn budget(args: &Args) -> usize {
    // Python: int(window * compact_to), a float product truncated toward zero.
    (args.context_window.unwrap_or(0) as f64 * args.compact_to) as usize
}

/// Refuses, before anything is compacted (or a model asked), a strategy that drops or puts in
/// messages when the output is the input's own format and that format can take back only edited
/// tool results (event logs).
fn refuse_lossy_write_back(
    args: &Args,
    strategy: &Strategy,
    conversation: &compaction_formats::Conversation,
) -> Result<()> {
    if !strategy.rewrites() || args.dry_run || args.to.is_some() || conversation.takes_back_rewrites() {
        return Ok(());
    }
    let name = crate::input::Source::from_arg(args.input.input.as_deref()).name();
    Err(UsageError(format!(
        "{name}: --strategy {strategy} drops messages and puts a note or summary in, which a {} log cannot \
         take back (only changed tool results and inputs are written into it); give --to anthropic, openai \
         or haystack to write the compacted conversation in that format",
        conversation.format.label()
    ))
    .into())
}

/// What `prune` says on standard error.
struct Said<'a> {
    report: Option<&'a CompactionReport>,
    hook: Option<&'a Hooked>,
    figures: &'a Figures,
    dry_run: bool,
    strategy: &'a Strategy,
    summaries: &'a SummaryLog,
}

impl Said<'_> {
    /// One line: what was done, the tokens before and after (as `count` counts them, or the
    /// hook's estimate), the target, reached or not and why not.
    fn line(&self, args: &Args, messages: &[Message]) -> String {
        let n = |n: usize| thousands(n);
        let head = match self.strategy.rewrites() || self.strategy.chain {
            true => format!("prune: {}", self.strategy),
            false => "prune".to_owned(),
        };
        let figures = self.figures;
        if let Some(hooked) = self.hook {
            let outcome = &hooked.outcome;
            let window = args.context_window.unwrap_or(0);
            if !outcome.triggered {
                let at = (window as f64 * args.compact_at) as usize;
                let anchor =
                    if hooked.context_tokens > 0 { " (the provider's count plus what followed)" } else { "" };
                return format!(
                    "{head}: {} tokens estimated{anchor}, under {} of the {}-token window ({}): nothing to do",
                    n(outcome.estimated_tokens),
                    args.compact_at,
                    n(window),
                    n(at)
                );
            }
            if let Some(why) = &outcome.declined {
                return format!("{head}: not compacted under --cache-aware: {why}");
            }
            let done = match self.report {
                Some(report) => did(report, self.dry_run),
                None => "nothing changed".to_owned(),
            };
            let line = format!(
                "{head}: {done}: {} → {} tokens estimated (target {} = {} of the window",
                n(outcome.estimated_tokens),
                n(hooked.estimated_after),
                n(budget(args)),
                args.compact_to
            );
            if figures.reached == Some(true) {
                return format!("{line}, reached)");
            }
            return format!("{line}, not reached: {})", self.why_not(args, messages));
        }
        let target = figures.target.unwrap_or(0);
        match self.report {
            Some(report) => {
                let reached = match figures.reached {
                    Some(true) => "reached".to_owned(),
                    _ => format!("not reached: {}", self.why_not(args, messages)),
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
                self.why_not(args, messages)
            ),
        }
    }

    /// Why the run stopped above the target: a failed summary; the walk's running estimate that
    /// reached it when the whole did not; the tools; else what the strategies always keep.
    fn why_not(&self, args: &Args, messages: &[Message]) -> String {
        if !self.summaries.failures.is_empty() {
            return "a summary failed (said above)".to_owned();
        }
        let mut reasons = Vec::new();
        if let Some(report) = self.report {
            if report.estimated_tokens_after <= report.target_tokens {
                // Where the compactor stopped on its estimate, as the reference's does.
                let after = self.hook.map_or(self.figures.tokens_after, |hooked| hooked.estimated_after);
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
        if let Some(overhead) = self.hook.and_then(|h| h.outcome.overhead).filter(|&o| o > 0) {
            reasons.push(format!(
                "{} tokens of the request are not messages (system prompt, tools)",
                thousands(overhead as usize)
            ));
        } else if self.figures.tools_tokens > 0 {
            reasons.push(format!("{} tokens are tool schemas", thousands(self.figures.tools_tokens)));
        }
        if self.strategy.stages == [Stage::ObservationMasking] {
            let keep =
                args.strategy.keep_observations.unwrap_or(MaskingSettings::default().keep_observations);
            reasons.push(format!(
                "observation masking masks what SWE-agent's processor masks, whatever the target: the first \
                 observation and the newest {keep} stay whole (--keep-observations)"
            ));
        } else if self.strategy.rewrites() {
            let keep = args.prune.min_keep_steps;
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
            reasons.push(why_not(args, messages));
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

/// Why pruning cannot reach its target: no results, or what the settings protect.
fn why_not(args: &Args, messages: &[Message]) -> String {
    if !messages.iter().any(Message::has_tool_call_result) {
        return "no tool results in this conversation (its format holds tool output as plain messages)"
            .into();
    }
    let steps: Vec<(usize, usize)> = compaction_core::agent_step_spans(messages, 0)
        .into_iter()
        .filter(|&(first, end)| end > first + 1)
        .collect();
    let keep = match args.prune.keep_tool_results {
        Some(_) => 0,
        None => args.prune.min_keep_steps.min(steps.len()),
    };
    let mut reasons = Vec::new();
    // The spec was checked when the command started. A provider's counter is not asked again
    // (a request per message) just to explain.
    let counter = match crate::strategy::is_provider_spec(&args.counter) {
        true => None,
        false => super::counter(&args.counter).ok(),
    };
    if let Some(counter) = &counter {
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
            args.prune.min_keep_steps
        ));
    }
    if let Some(results) = args.prune.keep_tool_results {
        reasons.push(format!("the newest {results} results are kept (--keep-tool-results)"));
    }
    reasons.push(format!("results under {} tokens stay (--min-tokens)", args.prune.min_tokens));
    if !list(&args.prune.exclude_tools).is_empty() {
        reasons.push(format!("results of {} stay (--exclude-tools)", args.prune.exclude_tools));
    }
    if args.prune.clear_at_least.is_some() {
        reasons.push("less than --clear-at-least would be freed".into());
    }
    reasons.join("; ")
}

/// `1,234`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{} {noun}s", thousands(n))
    }
}

/// What the hook did in --context-window mode.
struct Hooked {
    outcome: CompactionOutcome,
    /// The provider's count the estimate was anchored on (0: none).
    context_tokens: usize,
    /// The hook's estimate of the next request after compacting.
    estimated_after: usize,
}

/// The sizes a run reports, in the request's terms (messages and tools, as `count` counts them).
pub struct Figures {
    /// Tokens before.
    pub tokens_before: usize,
    /// Tokens of what was written (or would be, in a dry run).
    pub tokens_after: usize,
    /// The target, if there was one.
    pub target: Option<usize>,
    /// Whether it was reached; `None` without a target.
    pub reached: Option<bool>,
    /// What the tool schemas take of the request, when there are any.
    pub tools_tokens: usize,
}

/// How long each phase took.
pub struct Timings {
    /// Reading the input.
    pub read: Duration,
    /// Parsing it.
    pub parse: Duration,
    /// Compacting.
    pub compact: Duration,
    /// Writing the output.
    pub write: Duration,
}

fn millis(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1e6).round() / 1e3
}

/// The report document: what changed, the sizes, per-result details and timings; for a
/// strategy that drops or puts in messages, which (`removed`: indices read, `inserted`: indices
/// written); for a chain, each stage's own report (`stages`); a failure the run got past.
///
/// `tokens_before`, `tokens_after` and `target_tokens` are the request's, as `count` counts it:
/// the messages and the tools (`--tools`, else the file's), so `tokens_after` is what `count`
/// prints on the output (given the same tools, when the output format cannot hold them), and
/// `target_reached` is whether it is at or under the target. The per-result entries and a
/// chain's stages count messages, each result's message on its own.
pub fn report_json(report: Option<&CompactionReport>, figures: &Figures, timings: &Timings) -> Value {
    let timings = json!({
        "read": millis(timings.read),
        "parse": millis(timings.parse),
        "compact": millis(timings.compact),
        "write": millis(timings.write),
    });
    let mut document = json!({
        "changed": report.is_some(),
        "tokens_before": figures.tokens_before,
        "tokens_after": figures.tokens_after,
        "target_tokens": figures.target,
        "target_reached": figures.reached,
        "tokens_freed": figures.tokens_before.saturating_sub(figures.tokens_after),
        "pruned": report.map(CompactionReport::changed_indices).unwrap_or_default(),
        // Written from the report itself (see `Document`): most of the document, and quicker
        // written than built as JSON values first.
        "results": [],
        "inputs_cleared": [],
        "timings_ms": timings,
    });
    if figures.tools_tokens > 0 {
        document["tools_tokens"] = json!(figures.tools_tokens);
    }
    if let Some(report) = report {
        document["strategy"] = json!(report.strategy);
        // What only the strategies that drop or put in messages, and chains, have to say.
        if !report.removed.is_empty() || !report.inserted.is_empty() {
            document["removed"] = json!(report.removed);
            document["inserted"] = json!(report.inserted);
        }
        if !report.stages.is_empty() {
            document["stages"] = json!(report.stages);
        }
        if let Some(failure) = &report.failure {
            document["failure"] = json!(failure);
        }
    }
    document
}

/// The report as written: the document of [`report_json`], its `results` and `inputs_cleared`
/// taken from `report`.
struct Document<'a> {
    fields: &'a Value,
    report: Option<&'a CompactionReport>,
}

impl serde::Serialize for Document<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Value::Object(fields) = self.fields else { return self.fields.serialize(serializer) };
        let mut map = serializer.serialize_map(Some(fields.len()))?;
        for (key, value) in fields {
            match (key.as_str(), self.report) {
                ("results", Some(report)) => map.serialize_entry(key, &report.results)?,
                ("inputs_cleared", Some(report)) => map.serialize_entry(key, &report.inputs_cleared)?,
                _ => map.serialize_entry(key, value)?,
            }
        }
        map.end()
    }
}

fn report_bytes(document: &Value, report: Option<&CompactionReport>) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(&Document { fields: document, report })?;
    bytes.push(b'\n');
    Ok(bytes)
}
