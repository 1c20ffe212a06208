//! `compaction prune`: replace old, large tool results with a short placeholder.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use compaction_core::{CompactionReport, Compactor, PruningSettings, ToolResultPruningCompactor};
use compaction_hook::{AgentState, CompactionHook, CompactionHookSettings, CompactionOutcome};
use compaction_model::Message;
use compaction_offload::{OffloadCompactorSettings, OffloadFailure, ToolResultOffloadCompactor};
use serde_json::{json, Value};

use crate::input::InputArgs;
use crate::UsageError;
use compaction_formats::Target;

/// Prune old tool results until the conversation fits a token target.
///
/// Results are replaced oldest first with a placeholder, keeping every tool call paired with its
/// result, until the conversation is at or under --target-tokens; the results of the most recent
/// steps are never touched. With --context-window instead, the compaction hook decides: nothing
/// happens below --compact-at of the window, and the target is --compact-to of it. With
/// --offload-to, results are written to files there and replaced by a pointer instead; no file
/// is ever replaced (a taken name gets a numbered sibling), a folder that cannot be created or
/// written is an error before anything is read, and a result whose write fails stays in the
/// conversation, is named on standard error and listed in the report, and makes the exit
/// status 3.
/// The conversation is written in the input's format (or --to), and unchanged, byte for byte,
/// when nothing was pruned: a Claude Code session stays a session, a Codex rollout a rollout,
/// with only the pruned results' text replaced. One line on standard error says what happened:
/// tokens before and after, the target, and why it was not reached when it was not (-q
/// silences it). With --context-window, the provider's own count the log records (Claude
/// Code, Codex) anchors the estimate, as --context-tokens would.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("goal").required(true).args(["target_tokens", "context_window"])))]
#[command(after_help = "Examples:\n  \
    compaction prune session.json --target-tokens 50000 -o pruned.json --report report.json\n  \
    compaction prune run.traj --target-tokens 20000 --counter tiktoken:gpt-4o --exclude-tools memory --dry-run\n  \
    compaction prune session.jsonl --context-window 200000 --compact-at 0.7 --compact-to 0.4 --report r.json\n  \
    compaction prune session.jsonl --context-window 200000 --offload-to results/ -o session.pruned.json")]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,
    /// Where to write the conversation; standard output when absent. Written atomically.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// The format to write: haystack, openai or anthropic; the input's when absent.
    #[arg(long, value_name = "FORMAT")]
    pub to: Option<Target>,
    /// Prune until the conversation is at or under this many tokens.
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
    /// Offload old results to files in this folder and leave a pointer, instead of pruning.
    /// Files are never replaced; a write that fails leaves its result and exits with 3.
    #[arg(long, value_name = "DIR")]
    pub offload_to: Option<PathBuf>,
    /// With --offload-to: characters of each offloaded text kept in its pointer.
    #[arg(long, value_name = "N", default_value_t = 200, requires = "offload_to")]
    pub preview_chars: usize,
    /// The counter: approximate, approximate:CHARS_PER_TOKEN, tiktoken, tiktoken:ENCODING_OR_MODEL
    /// or huggingface:PATH.
    #[arg(long, default_value = "approximate")]
    pub counter: String,
    #[command(flatten)]
    pub prune: PruneOptions,
    /// Write a JSON report of what was pruned to this file.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Decide what would be pruned without writing the conversation; prints the report (or
    /// writes it to --report).
    #[arg(long)]
    pub dry_run: bool,
}

/// The pruning compactor's settings as options, shared by `prune` and `simulate`.
#[derive(Debug, Clone, clap::Args)]
pub struct PruneOptions {
    /// The number of most recent tool-calling steps whose results are never pruned.
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
        let mut settings = PruningSettings {
            min_keep_steps: self.min_keep_steps,
            min_tokens: self.min_tokens,
            skip_meta_keys: list(&self.skip_meta_keys),
            exclude_tools: list(&self.exclude_tools),
            clear_at_least: self.clear_at_least,
            clear_tool_inputs: self.clear_tool_inputs,
            keep_tool_results: self.keep_tool_results,
            preview_chars: self.preview_ends,
            ..PruningSettings::default()
        };
        if let Some(placeholder) = &self.placeholder {
            settings.placeholder = placeholder.clone();
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
    if args.dry_run && args.offload_to.is_some() {
        return Err(
            UsageError("--dry-run cannot be combined with --offload-to, which writes files".into()).into()
        );
    }
    let counter = super::counter(&args.counter)?;
    // Opens the store, if offloading: a folder that cannot be used fails before the input is read.
    let compactor = compactor(&args)?;
    let mut input = args.input.read_timed()?;
    let tools = match &args.tools {
        Some(path) => crate::input::read_tools(path)?,
        None => input.conversation.tools.clone(),
    };
    let messages = &input.conversation.messages;

    // Store writes that failed, when offloading: each result stays in the conversation.
    let mut failures: Vec<OffloadFailure> = Vec::new();
    let spinner = crate::progress::spinner("pruning");
    let started = Instant::now();
    // How the conversation changes, the compactor's report, and the hook's outcome in
    // --context-window mode.
    let (compacted, report, hook): (Compacted, Option<CompactionReport>, Option<Hooked>) =
        match (args.target_tokens, args.context_window) {
            (Some(target), _) if args.dry_run => {
                (Compacted::Unchanged, compactor.plan_report(messages, target, counter.as_ref()), None)
            }
            (Some(target), _) => match compactor.compact(messages, target, counter.as_ref(), &mut failures) {
                Some(compaction) => {
                    let report = compaction.report.clone();
                    (Compacted::Edits(compaction), Some(report), None)
                }
                None => (Compacted::Unchanged, None, None),
            },
            (None, Some(window)) => {
                let settings = CompactionHookSettings {
                    context_window: window,
                    compact_at: args.compact_at,
                    compact_to: args.compact_to,
                };
                let hook = CompactionHook::new(compactor.to_box(), settings)
                    .map_err(|e| UsageError(e.to_string()))?
                    .with_counter(counter);
                // The provider's own count, when the log records one, anchors the estimate.
                let context_tokens = args.context_tokens.unwrap_or_else(|| {
                    crate::provider::context_tokens(&input.conversation, hook.counter()).unwrap_or(0)
                });
                // The conversation moves into the agent state and back: nothing is copied.
                let mut state = AgentState::new(std::mem::take(&mut input.conversation.messages))
                    .with_tools(tools.clone())
                    .with_context_tokens(context_tokens);
                let outcome = hook.run(&mut state);
                failures.extend(compactor.take_failures());
                let report = outcome.report.clone();
                let context_tokens = state.context_tokens;
                input.conversation.messages = state.into_messages();
                let compacted = match (outcome.compacted, outcome.changed.clone()) {
                    (false, _) => Compacted::Unchanged,
                    (true, changed) => Compacted::Rewritten(changed),
                };
                (compacted, report, Some(Hooked { outcome, context_tokens }))
            }
            (None, None) => {
                return Err(UsageError("give --target-tokens N or --context-window N".into()).into())
            }
        };
    let compact_time = started.elapsed();
    spinner.finish_and_clear();
    super::offload::say_failures(&failures);

    let started = Instant::now();
    // In-place edits are moved into the conversation read, so nothing else is copied and the
    // writer knows which messages changed.
    let changed = match compacted {
        Compacted::Unchanged => Some(Vec::new()),
        Compacted::Edits(compaction) => {
            let changed = compaction.replaced_indices();
            compaction.apply(&mut input.conversation.messages);
            changed
        }
        Compacted::Rewritten(changed) => changed,
    };
    let conversation = &input.conversation;
    let messages = &conversation.messages;
    if !args.dry_run {
        let output = args.output.as_deref();
        match changed.as_deref() {
            Some([]) if args.to.is_none() => crate::output::write_output(output, conversation.source())?,
            changed => super::write_conversation(output, conversation, messages, args.to, changed)?,
        }
    }
    let write_time = started.elapsed();

    let timings = Timings { read: input.read, parse: input.parse, compact: compact_time, write: write_time };
    let tokens_before = match (&report, &hook) {
        (Some(report), _) => report.tokens_before,
        (None, Some(hooked)) => hooked.outcome.estimated_tokens,
        (None, None) => super::counter(&args.counter)?.count(messages, &[]),
    };
    let target = args.target_tokens.or(hook.as_ref().and_then(|h| h.outcome.target_tokens)).unwrap_or(0);
    let mut document = report_json(report.as_ref(), tokens_before, target, &timings);
    if let Some(hooked) = &hook {
        document["triggered"] = json!(hooked.outcome.triggered);
        document["estimated_tokens"] = json!(hooked.outcome.estimated_tokens);
        document["target_tokens"] = json!(hooked.outcome.target_tokens);
        document["context_tokens"] = json!(hooked.context_tokens);
        document["changed"] = json!(hooked.outcome.compacted);
    }
    if args.offload_to.is_some() {
        document["store_failures"] = json!(failures);
    }
    match (&args.report, args.dry_run) {
        (Some(path), _) => write_report(path, &document)?,
        (None, true) => crate::output::write_output(None, &report_bytes(&document)?)?,
        (None, false) => {}
    }
    let said =
        Said { report: report.as_ref(), hook: hook.as_ref(), tokens_before, target, dry_run: args.dry_run };
    crate::progress::say(&said.line(&args, messages));
    // The process ends here: the system takes the conversation's memory back at once, which is
    // quicker than freeing its many allocations one by one.
    std::mem::forget(input);
    super::offload::partial(&failures)
}

/// What `prune` says on standard error.
struct Said<'a> {
    report: Option<&'a CompactionReport>,
    hook: Option<&'a Hooked>,
    tokens_before: usize,
    target: usize,
    dry_run: bool,
}

impl Said<'_> {
    /// One line: tokens before and after, the target, reached or not and why not.
    fn line(&self, args: &Args, messages: &[Message]) -> String {
        let verb = if self.dry_run { "would prune" } else { "pruned" };
        let n = |n: usize| thousands(n);
        if let Some(hooked) = self.hook {
            let outcome = &hooked.outcome;
            let window = args.context_window.unwrap_or(0);
            let budget = (window as f64 * args.compact_to) as usize;
            if let (true, Some(report)) = (outcome.triggered, self.report) {
                // In the hook's own scale: the estimate of the whole request.
                let after = outcome.estimated_tokens.saturating_sub(report.tokens_freed());
                let overhead = outcome.overhead.unwrap_or(0).max(0) as usize;
                let head = format!(
                    "prune: {verb} {}: {} → {} tokens estimated (target {} = {} of the window",
                    plural(report.results.len(), "result"),
                    n(outcome.estimated_tokens),
                    n(after),
                    n(budget),
                    args.compact_to
                );
                if report.target_reached {
                    return format!("{head}, reached)");
                }
                let mut why = Vec::new();
                if overhead > 0 {
                    why.push(format!(
                        "{} tokens of the request are not messages (system prompt, tools)",
                        n(overhead)
                    ));
                }
                why.push(why_not(args, messages));
                return format!("{head}, not reached: {})", why.join("; "));
            }
            if !outcome.triggered {
                let at = (window as f64 * args.compact_at) as usize;
                let anchor =
                    if hooked.context_tokens > 0 { " (the provider's count plus what followed)" } else { "" };
                return format!(
                    "prune: {} tokens estimated{anchor}, under {} of the {}-token window ({}): nothing to do",
                    n(outcome.estimated_tokens),
                    args.compact_at,
                    n(window),
                    n(at)
                );
            }
        }
        match self.report {
            Some(report) if report.target_reached => format!(
                "prune: {verb} {}: {} → {} tokens (target {}, reached)",
                plural(report.results.len(), "result"),
                n(report.tokens_before),
                n(report.tokens_after),
                n(report.target_tokens)
            ),
            Some(report) => format!(
                "prune: {verb} {}: {} → {} tokens (target {}, not reached: {})",
                plural(report.results.len(), "result"),
                n(report.tokens_before),
                n(report.tokens_after),
                n(report.target_tokens),
                why_not(args, messages)
            ),
            None if self.tokens_before <= self.target => format!(
                "prune: nothing to prune: {} tokens, already at or under the target {}",
                n(self.tokens_before),
                n(self.target)
            ),
            None => format!(
                "prune: nothing pruned: {} tokens (target {}, not reached: {})",
                n(self.tokens_before),
                n(self.target),
                why_not(args, messages)
            ),
        }
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
    // The spec was checked when the command started.
    let counter = super::counter(&args.counter).ok();
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

/// How the conversation changes.
// One value per run, so the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
enum Compacted {
    /// Not at all.
    Unchanged,
    /// By the compactor's edits, still to be applied.
    Edits(compaction_core::Compaction),
    /// Already, by the hook: at these indices, or as a whole when `None`.
    Rewritten(Option<Vec<usize>>),
}

/// What the hook did in --context-window mode.
struct Hooked {
    outcome: CompactionOutcome,
    context_tokens: usize,
}

/// The compactor the options ask for: pruning, or offloading to --offload-to.
enum Chosen {
    Pruning(ToolResultPruningCompactor),
    /// Shared with the hook in --context-window mode, so its failures can be taken afterwards.
    Offload(std::sync::Arc<ToolResultOffloadCompactor>),
}

impl Chosen {
    fn compact(
        &self,
        messages: &[Message],
        target: usize,
        counter: &dyn compaction_tokens::TokenCounter,
        failures: &mut Vec<OffloadFailure>,
    ) -> Option<compaction_core::Compaction> {
        match self {
            Chosen::Pruning(c) => c.compact(messages, target, counter),
            Chosen::Offload(c) => {
                let done = c.offload(messages, target, counter);
                failures.extend(done.failures);
                done.compaction
            }
        }
    }

    fn plan_report(
        &self,
        messages: &[Message],
        target: usize,
        counter: &dyn compaction_tokens::TokenCounter,
    ) -> Option<CompactionReport> {
        match self {
            Chosen::Pruning(c) => c.plan(messages, target, counter),
            // Offloading writes files, so it has no dry run (refused before this point).
            Chosen::Offload(_) => None,
        }
    }

    fn to_box(&self) -> Box<dyn Compactor> {
        match self {
            Chosen::Pruning(c) => Box::new(c.clone()),
            Chosen::Offload(c) => Box::new(std::sync::Arc::clone(c)),
        }
    }

    /// The offload compactor's failures since the last call; none for pruning.
    fn take_failures(&self) -> Vec<OffloadFailure> {
        match self {
            Chosen::Pruning(_) => Vec::new(),
            Chosen::Offload(c) => c.take_failures(),
        }
    }
}

fn compactor(args: &Args) -> Result<Chosen> {
    match &args.offload_to {
        None => Ok(Chosen::Pruning(args.prune.compactor()?)),
        Some(dir) => {
            let store = std::sync::Arc::new(super::offload::open_store(dir)?);
            let settings = OffloadCompactorSettings {
                min_keep_steps: args.prune.min_keep_steps,
                min_tokens: args.prune.min_tokens,
                preview_chars: args.preview_chars,
            };
            let compactor =
                ToolResultOffloadCompactor::new(store, settings).map_err(|e| UsageError(e.to_string()))?;
            Ok(Chosen::Offload(std::sync::Arc::new(compactor)))
        }
    }
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

/// The report document: what changed, the sizes, per-result details and timings.
pub fn report_json(
    report: Option<&CompactionReport>,
    tokens_before: usize,
    target_tokens: usize,
    timings: &Timings,
) -> Value {
    let timings = json!({
        "read": millis(timings.read),
        "parse": millis(timings.parse),
        "compact": millis(timings.compact),
        "write": millis(timings.write),
    });
    match report {
        Some(report) => json!({
            "changed": true,
            "strategy": report.strategy,
            "tokens_before": report.tokens_before,
            "tokens_after": report.tokens_after,
            "target_tokens": report.target_tokens,
            "target_reached": report.target_reached,
            "tokens_freed": report.tokens_freed(),
            "pruned": report.changed_indices(),
            "results": report.results,
            "inputs_cleared": report.inputs_cleared,
            "timings_ms": timings,
        }),
        None => json!({
            "changed": false,
            "tokens_before": tokens_before,
            "tokens_after": tokens_before,
            "target_tokens": target_tokens,
            "target_reached": tokens_before <= target_tokens,
            "tokens_freed": 0,
            "pruned": [],
            "results": [],
            "inputs_cleared": [],
            "timings_ms": timings,
        }),
    }
}

fn report_bytes(document: &Value) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(document)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Writes a report file atomically.
pub fn write_report(path: &std::path::Path, document: &Value) -> Result<()> {
    crate::output::write_atomic(path, &report_bytes(document)?)
        .with_context(|| "writing the report".to_owned())
}
