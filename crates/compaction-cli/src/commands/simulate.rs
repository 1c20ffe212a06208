//! `compaction simulate`: replay a recorded transcript with the compaction hook in the loop.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use compaction_formats::MessageUsage;
use compaction_hook::{AgentState, CompactionHook, CompactionHookSettings};
use compaction_model::{Message, Role};
use compaction_offload::{OffloadFailure, ToolResultOffloadHook};
use compaction_tokens::RunningCount;

use super::offload::Policies;
use super::prune::PruneOptions;
use crate::chart::{self, Chart};
use crate::input::InputArgs;
use crate::strategy::StrategyOptions;
use crate::UsageError;

/// Replay a transcript as the agent would have lived it with compaction, and compare.
///
/// Walks the recorded messages in order. Before each assistant message (a model call) the
/// compaction hook runs on the conversation so far, with the compactor --strategy names (as
/// `prune` takes it: tool-result-pruning by default, sliding-window, summarization, offload with
/// --offload-to, or chain:A,B,...); once more at the end when the transcript ends with tool
/// results or a user message, for the call that would answer them. With summarization the hook
/// calls the model (--provider, --model, --base-url) each time it compacts, so a replay makes as
/// many summary calls as an agent would; a summary that fails is named on standard error and the
/// replay goes on with the last good result, or with --raise-on-failure the command fails. After each batch of tool results the offload hook runs,
/// when --offload-store is given (a folder that cannot be created or written is an error before
/// anything is read; a write that fails is named on standard error, its result stays, and the
/// exit status is 3). Each model call is a step: the table on standard output shows
/// its context without compaction (the recorded prefix) and with it (as sent, after the hook),
/// then totals: peaks, and the tokens sent over the whole run, which is what a user pays for.
/// The recorded replies are replayed as they were: the simulation shows what compaction would
/// have sent, not what the model would have answered.
///
/// Where the log records the provider's own counts (Claude Code, Codex, OpenHands), they anchor every
/// estimate, as an agent loop anchors its hook: before each call the estimate is the provider's
/// count after the previous reply plus the messages that came since, and the `provider` column
/// shows what the provider then counted; the first call's is the provider's count of that first
/// request, which also covers what the log does not hold (the system prompt, the tool schemas).
/// Without them the counts are local and leave out what the log does not hold (a note says
/// what).
///
/// The `compaction` column says what the hook did before the call: `compacted` (it rewrote the
/// conversation), `declined` (the estimate reached --compact-at, but the compactor could not get
/// below the target: every result it may prune is already pruned, protected in the newest
/// --min-keep-steps steps, or under --min-tokens), or `-` (below the threshold). The chart marks
/// declined calls with a cross and the provider's own compactions with a vertical line.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    compaction simulate session.jsonl --context-window 200000\n  \
    compaction simulate run.json --context-window 20000 --compact-at 0.6 --compact-to 0.3 --svg run.svg --csv run.csv\n  \
    compaction simulate run.traj --context-window 128000 --counter tiktoken:gpt-4o --min-keep-steps 2\n  \
    compaction simulate run.json --context-window 20000 --offload-store results/ --policy '*=over:4000'\n  \
    compaction simulate run.json --context-window 20000 --strategy chain:tool-result-pruning,sliding-window\n  \
    OPENAI_API_KEY=local compaction simulate run.json --context-window 20000 --strategy summarization \\\n      \
    --provider openai --model qwen2.5 --base-url http://127.0.0.1:8080/v1")]
#[command(group(clap::ArgGroup::new("offload_dirs").multiple(true).args(["offload_store", "offload_to"])))]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,
    /// The model's context window, in tokens.
    #[arg(long, value_name = "N")]
    pub context_window: usize,
    /// Compact once the request reaches this fraction of the window.
    #[arg(long, value_name = "F", default_value_t = 0.7)]
    pub compact_at: f64,
    /// The fraction of the window to compact down to.
    #[arg(long, value_name = "F", default_value_t = 0.4)]
    pub compact_to: f64,
    /// The counter: approximate, approximate:CHARS_PER_TOKEN, tiktoken, tiktoken:ENCODING_OR_MODEL,
    /// huggingface:PATH, or a provider's own count: openai:MODEL or anthropic:MODEL.
    #[arg(long, default_value = "approximate")]
    pub counter: String,
    /// A JSON array of tool specs sent with each request; the file's own tools when absent.
    #[arg(long, value_name = "FILE")]
    pub tools: Option<PathBuf>,
    #[command(flatten)]
    pub strategy: StrategyOptions,
    #[command(flatten)]
    pub prune: PruneOptions,
    /// The folder the offload strategy (--strategy offload, or a chain with it) writes results
    /// to, leaving a pointer.
    #[arg(long, value_name = "DIR")]
    pub offload_to: Option<PathBuf>,
    /// Also run the offload hook after each batch of tool results, writing to files in this
    /// folder.
    #[arg(long, value_name = "DIR")]
    pub offload_store: Option<PathBuf>,
    #[command(flatten)]
    pub policies: Policies,
    /// With --offload-store or --offload-to: characters of each offloaded text kept in its
    /// pointer.
    #[arg(long, value_name = "N", default_value_t = 200, requires = "offload_dirs")]
    pub preview_chars: usize,
    /// Write a chart of the context per model call, with and without compaction, as SVG.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Write one row per model call as CSV.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
}

/// One model call of the replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// 1 for the first call.
    pub step: usize,
    /// The index of the recorded message the call produced; the message count for the final
    /// call the transcript does not record.
    pub message: usize,
    /// Tokens of the request without compaction: the recorded conversation so far.
    pub without: usize,
    /// The hook's estimate of the request with compaction, before it ran.
    pub estimate: usize,
    /// Tokens of the request with compaction, as sent (after the hook).
    pub with: usize,
    /// Whether the estimate reached the threshold.
    pub triggered: bool,
    /// Whether the compactor rewrote the conversation.
    pub compacted: bool,
    /// What the provider counted for this call's prompt, when the log records it.
    pub provider: Option<usize>,
    /// Whether `without` is anchored on a count the provider made of this same conversation.
    pub anchored: bool,
    /// Tool results pruned so far.
    pub pruned: usize,
    /// Tool results offloaded so far.
    pub offloaded: usize,
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let policies_given = !args.policies.policies.is_empty();
    if policies_given && args.offload_store.is_none() {
        return Err(UsageError("--policy needs --offload-store DIR".into()).into());
    }
    let settings = CompactionHookSettings::new(args.context_window)
        .with_compact_at(args.compact_at)
        .with_compact_to(args.compact_to);
    let strategy = args.strategy.resolve(args.offload_to.is_some())?;
    let counter = crate::strategy::counter(&args.counter, &args.strategy.client_settings())?;
    let offload_to = args.offload_to.as_deref().map(|dir| (dir, args.preview_chars));
    let mut built = args.strategy.build(&strategy, &args.prune, offload_to)?;
    let hook = CompactionHook::new(built.take_compactor(), settings)
        .map_err(|e| UsageError(e.to_string()))?
        .with_counter(counter);
    let offload = match &args.offload_store {
        Some(dir) => {
            let store = Arc::new(super::offload::open_store(dir)?);
            Some(
                ToolResultOffloadHook::new(store, args.policies.strategies())
                    .with_preview_chars(args.preview_chars),
            )
        }
        None => None,
    };
    let conversation = args.input.read()?;
    let tools = match &args.tools {
        Some(path) => crate::input::read_tools(path)?,
        None => conversation.tools.clone(),
    };

    let left_out = crate::provider::left_out(&conversation.messages, !tools.is_empty());
    // Read with its full history, a log's provider counts after the provider's own compaction
    // are of the compacted conversation, not of the one replayed: they are shown, not used.
    let until = conversation.compactions.iter().map(|c| c.message).filter(|&m| m > 0).min();
    let mut failures = Vec::new();
    let steps = replay(
        &conversation.messages,
        &conversation.usage,
        until,
        tools,
        &hook,
        offload.as_ref(),
        &mut failures,
    );
    // A count a provider could not make, or a summary that failed with --raise-on-failure,
    // fails the command before any table is shown.
    crate::strategy::counting_failed()?;
    let summaries = built.summary_log();
    if let (true, Some(failure)) = (summaries.raised, summaries.failures.last()) {
        return Err(anyhow::anyhow!("{strategy}: {failure}"));
    }
    for failure in &summaries.failures {
        eprintln!(
            "summarization: a summary failed, so the replay went on with the last good result: {failure}"
        );
    }
    failures.extend(built.take_offload_failures());
    super::offload::say_failures(&failures);
    let name = crate::input::Source::from_arg(args.input.input.as_deref()).name();
    let counter_name = hook.counter().describe();

    let mut out = table(&steps);
    out.push('\n');
    out.push_str(&totals(&steps, &settings));
    if offload.is_some() {
        out.push_str(&format!("offload failures     {}\n", failures.len()));
    }
    match (conversation.usage.is_empty(), left_out) {
        (true, Some(missing)) => {
            let _ = writeln!(
                out,
                "note                 counted locally: the log records no provider counts, and the counts \
                 leave out {missing} it does not hold"
            );
        }
        (false, _) => {
            let _ = writeln!(
                out,
                "note                 anchored on the provider's counts the log records ({} of {} calls)",
                steps.iter().filter(|s| s.provider.is_some()).count(),
                steps.len()
            );
        }
        _ => {}
    }
    crate::output::write_output(None, out.as_bytes())?;

    // Both files are put in place together, once both are written.
    let mut ready = Vec::new();
    if let Some(path) = &args.csv {
        let staged = crate::output::stage(path).and_then(|s| s.write(csv(&steps).as_bytes()));
        ready.push(staged.context("writing the CSV")?);
    }
    if let Some(path) = &args.svg {
        let title_name = std::path::Path::new(&name)
            .file_name()
            .map_or_else(|| name.clone(), |n| n.to_string_lossy().into_owned());
        let title = format!("{title_name}: context per model call (counter {counter_name})");
        let compactions = provider_compactions(&conversation.messages, &conversation.compactions);
        let chart = Chart { title, steps: &steps, settings, compactions };
        let svg = chart::svg(&chart)?;
        ready.push(
            crate::output::stage(path).and_then(|s| s.write(svg.as_bytes())).context("writing the SVG")?,
        );
    }
    let ending = super::offload::partial(&failures);
    crate::output::commit_run(ready, super::offload::status(&ending))?;
    for (path, what) in [(&args.csv, "the table"), (&args.svg, "the chart")] {
        if let Some(path) = path {
            crate::progress::say(&format!("wrote {what} to {}", path.display()));
        }
    }
    ending
}

/// The steps (model calls, 1 for the first) at which the provider compacted, for the chart: the
/// call that first saw the compacted conversation.
fn provider_compactions(
    messages: &[Message],
    compactions: &[compaction_formats::ProviderCompaction],
) -> Vec<usize> {
    compactions
        .iter()
        .map(|c| messages.iter().take(c.message).filter(|m| m.role == Role::Assistant).count() + 1)
        .collect()
}

/// Replays `messages`: the hooks run where an agent loop would run them, and each model call is
/// recorded as a [`Step`]. The provider's counts in `usage` anchor the estimates up to message
/// `until` (a provider compaction in a full history), and are only shown after it. Store writes
/// the offload hook could not make are added to `failures`.
pub fn replay(
    messages: &[Message],
    usage: &[MessageUsage],
    until: Option<usize>,
    tools: Vec<compaction_model::ToolSpec>,
    hook: &CompactionHook,
    offload: Option<&ToolResultOffloadHook>,
    failures: &mut Vec<OffloadFailure>,
) -> Vec<Step> {
    let counter = hook.counter();
    let mut state = AgentState::new(Vec::with_capacity(messages.len())).with_tools(tools);
    // The recorded prefix only grows, so its count is kept incrementally too.
    let mut baseline = RunningCount::default();
    let mut steps = Vec::new();
    let (mut pruned, mut offloaded) = (0, 0);
    let bar = crate::progress::bar(messages.len() as u64, "simulating");
    let mut usage = usage.iter().peekable();
    // The provider's latest count of the recorded conversation: `(next, tokens)`, where `tokens`
    // covers the messages before `next`.
    let mut anchor: Option<(usize, usize)> = None;

    let call = |baseline: &mut RunningCount,
                step: usize,
                index: usize,
                state: &mut AgentState,
                pruned: &mut usize,
                offloaded: usize,
                anchor: Option<(usize, usize)>,
                provider: Option<usize>| {
        let outcome = hook.run(state);
        *pruned += outcome.report.as_ref().map_or(0, |r| r.results.len());
        // Without compaction the request is the recorded conversation so far: the provider's
        // count after the latest reply it counted, plus what came since; or all of it, locally.
        let without = match anchor {
            Some((next, tokens)) => tokens + counter.count(&messages[next..index], &[]),
            None => baseline.count(counter, &messages[..index], &state.tools),
        };
        Step {
            step,
            message: index,
            without,
            estimate: outcome.estimated_tokens,
            with: hook.estimate(state),
            triggered: outcome.triggered,
            compacted: outcome.compacted,
            provider,
            anchored: anchor.is_some(),
            pruned: *pruned,
            offloaded,
        }
    };

    for (index, message) in messages.iter().enumerate() {
        let seen = usage.next_if(|u| u.message == index).map(|u| u.usage);
        if until == Some(index) {
            // From here the provider counted a conversation it had compacted: no anchor.
            anchor = None;
            state.context_tokens = 0;
        }
        let recorded = seen.filter(|_| until.is_none_or(|until| index < until));
        if message.role == Role::Assistant {
            let provider = seen.map(|u| usize::try_from(u.prompt_tokens()).unwrap_or(usize::MAX));
            // The first request: the provider counted what the log does not hold (the system
            // prompt, the tool schemas) beside the messages, so its count of this request
            // stands for the request, as the agent, which sends them, would know it.
            if let (None, true, Some(first)) =
                (anchor, steps.is_empty(), provider.filter(|_| recorded.is_some()))
            {
                if !messages[..index].iter().any(|m| m.role == Role::Assistant) {
                    anchor = Some((index, first));
                    state.context_tokens = first;
                }
            }
            let step = call(
                &mut baseline,
                steps.len() + 1,
                index,
                &mut state,
                &mut pruned,
                offloaded,
                anchor,
                provider,
            );
            steps.push(step);
            state.step_count += 1;
        }
        state.push(message.clone());
        if let Some(recorded) = recorded {
            // The provider counted the recorded conversation; the simulated one is smaller by
            // what compaction has removed so far, measured locally.
            let tokens = usize::try_from(recorded.context_tokens()).unwrap_or(usize::MAX);
            let without = baseline.count(counter, &messages[..=index], &state.tools);
            let removed = without.saturating_sub(state.count_with_tools(counter));
            state.context_tokens = tokens.saturating_sub(removed).max(1);
            anchor = Some((index + 1, tokens));
        }
        let batch_ends = message.has_tool_call_result()
            && !messages.get(index + 1).is_some_and(Message::has_tool_call_result);
        if let (true, Some(offload)) = (batch_ends, offload) {
            let outcome = offload.run(&mut state);
            offloaded += outcome.results.len();
            failures.extend(outcome.failures);
        }
        bar.inc(1);
    }
    let answered = messages.last().is_none_or(|m| m.role == Role::Assistant || m.role == Role::System);
    if !answered {
        let step = call(
            &mut baseline,
            steps.len() + 1,
            messages.len(),
            &mut state,
            &mut pruned,
            offloaded,
            anchor,
            None,
        );
        steps.push(step);
    }
    bar.finish_and_clear();
    steps
}

const COLUMNS: [&str; 10] = [
    "step",
    "message",
    "provider",
    "without",
    "estimate",
    "with",
    "saved",
    "pruned",
    "offloaded",
    "compaction",
];

fn saved(step: &Step) -> String {
    if step.without == 0 {
        return "-".to_owned();
    }
    format!("{:.1}%", 100.0 * (1.0 - step.with as f64 / step.without as f64))
}

fn outcome(step: &Step) -> &'static str {
    match (step.triggered, step.compacted) {
        (_, true) => "compacted",
        (true, false) => "declined",
        (false, false) => "-",
    }
}

/// The per-call table, columns right-aligned to their widest cell.
pub fn table(steps: &[Step]) -> String {
    let rows: Vec<[String; 10]> = steps
        .iter()
        .map(|s| {
            [
                s.step.to_string(),
                s.message.to_string(),
                s.provider.map_or_else(|| "-".to_owned(), |p| p.to_string()),
                s.without.to_string(),
                s.estimate.to_string(),
                s.with.to_string(),
                saved(s),
                s.pruned.to_string(),
                s.offloaded.to_string(),
                outcome(s).to_owned(),
            ]
        })
        .collect();
    let mut widths = COLUMNS.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let last = cells.len() - 1;
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .enumerate()
            // The last column is words: left-aligned, and no trailing spaces.
            .map(|(i, (cell, w))| if i == last { (*cell).to_owned() } else { format!("{cell:>w$}") })
            .collect();
        out.push_str(&padded.join("  "));
        out.push('\n');
    };
    line(&COLUMNS);
    for row in &rows {
        line(&row.iter().map(String::as_str).collect::<Vec<_>>());
    }
    out
}

fn percent(part: usize, whole: usize) -> String {
    if whole == 0 {
        return "-".to_owned();
    }
    format!("{:.1}%", 100.0 * part as f64 / whole as f64)
}

/// The totals under the table.
pub fn totals(steps: &[Step], settings: &CompactionHookSettings) -> String {
    let window = settings.context_window;
    let peak = |f: fn(&Step) -> usize| steps.iter().map(f).max().unwrap_or(0);
    let sum = |f: fn(&Step) -> usize| steps.iter().map(f).sum::<usize>();
    let (peak_without, peak_with) = (peak(|s| s.without), peak(|s| s.with));
    let (sent_without, sent_with) = (sum(|s| s.without), sum(|s| s.with));
    let triggered = steps.iter().filter(|s| s.triggered).count();
    let compacted = steps.iter().filter(|s| s.compacted).count();
    let last = steps.last();
    let over = |f: fn(&Step) -> usize| steps.iter().filter(|s| f(s) > window).count();
    let mut out = String::new();
    let at = (window as f64 * settings.compact_at) as usize;
    let to = (window as f64 * settings.compact_to) as usize;
    let _ = writeln!(out, "context window       {window} tokens (compact at {at}, down to {to})");
    let _ = writeln!(out, "model calls          {}", steps.len());
    let _ = writeln!(
        out,
        "peak context         without {peak_without} ({} of the window), with {peak_with} ({})",
        percent(peak_without, window),
        percent(peak_with, window)
    );
    let _ = writeln!(out, "calls over window    without {}, with {}", over(|s| s.without), over(|s| s.with));
    let _ = writeln!(
        out,
        "tokens sent          without {sent_without}, with {sent_with} ({} saved)",
        percent(sent_without.saturating_sub(sent_with), sent_without)
    );
    let _ = writeln!(out, "compaction           triggered {triggered} times, compacted {compacted}");
    let _ = writeln!(out, "results pruned       {}", last.map_or(0, |s| s.pruned));
    let _ = writeln!(out, "results offloaded    {}", last.map_or(0, |s| s.offloaded));
    if let Some(line) = accuracy(steps) {
        out.push_str(&line);
    }
    out
}

/// How close the estimate before each call (without compaction) came to what the provider then
/// counted: the median and the worst relative error, when the log records provider counts.
fn accuracy(steps: &[Step]) -> Option<String> {
    let errors: Vec<(f64, usize)> = steps
        .iter()
        .filter(|s| s.anchored)
        .filter_map(|s| {
            let provider = s.provider.filter(|&p| p > 0)?;
            Some(((s.without as f64 - provider as f64) / provider as f64, s.step))
        })
        .collect();
    if errors.is_empty() {
        return None;
    }
    let mut sizes: Vec<f64> = errors.iter().map(|(e, _)| e.abs()).collect();
    sizes.sort_by(f64::total_cmp);
    let median = sizes[sizes.len() / 2];
    let (worst, at) = errors.iter().copied().max_by(|a, b| a.0.abs().total_cmp(&b.0.abs()))?;
    let within = sizes.iter().filter(|e| **e <= 0.05).count();
    let mut line = format!(
        "estimate vs provider median error {:.1}%, worst {:+.1}% (call {at}); {within} of {} calls within 5%",
        100.0 * median,
        100.0 * worst,
        sizes.len()
    );
    if within < sizes.len() {
        // Measured on the recorded conversation, an estimate misses only what the provider saw
        // beyond the log: context the agent added to a request without logging it.
        line.push_str(" (the others: the provider counted context the log does not hold)");
    }
    line.push('\n');
    Some(line)
}

/// One row per call, with a header.
pub fn csv(steps: &[Step]) -> String {
    let mut out = String::from(
        "step,message,tokens_without,estimated_tokens,tokens_with,triggered,compacted,pruned,offloaded,provider_tokens\n",
    );
    for s in steps {
        let provider = s.provider.map(|p| p.to_string()).unwrap_or_default();
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{provider}",
            s.step, s.message, s.without, s.estimate, s.with, s.triggered, s.compacted, s.pruned, s.offloaded
        );
    }
    out
}
