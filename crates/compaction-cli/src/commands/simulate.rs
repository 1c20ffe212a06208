//! `compaction simulate`: replay a recorded transcript with the compaction hook in the loop.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use compaction_formats::Conversation;
use compaction_hook::{CompactionHook, CompactionHookSettings};
use compaction_model::{Message, Role, ToolSpec};
use compaction_offload::{OffloadFailure, ToolResultOffloadHook};
use compaction_replay::{CacheKind, Call, Cost, Pricing, Recorded, Replay, Step};

use crate::chart::{self, Chart};
use crate::error::UsageError;
use crate::input::InputArgs;
use crate::options::{CostOptions, HookOptions, Policies, PruneOptions};
use crate::output::Ready;
use crate::strategy::{CacheAwareOptions, StrategyOptions};
use crate::text::{percent, signed_percent};

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
/// then totals: peaks, and the tokens sent over the whole run; when something was taken out, the
/// refetches: calls the agent made again, with the same tool and arguments, after the result of
/// an earlier one was pruned, masked, offloaded or dropped, and the tokens of their results (the
/// chart marks them with a triangle).
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
///
/// Then what the calls cost, without and with compaction, with the provider's prompt cache:
/// tokens billed as input, read from the cache, written to it, and of the reply, and dollars,
/// by the price table (a bundled one, or --prices FILE) row matching each call's model (from
/// the log, or --price-model). A compaction rewrites the conversation from the first message it
/// changes, so the cache serves only what comes before it: a run can send fewer tokens and cost
/// more, and the command says so. Where the log records each call's usage (Claude Code), the
/// cost it records is shown beside the estimate.
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
    #[command(flatten)]
    pub hook: HookOptions,
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
    #[command(flatten)]
    pub cost: CostOptions,
    #[command(flatten)]
    pub cache_aware: CacheAwareOptions,
}

/// Runs the command: checks the options and builds the hooks, reads, replays, prints the
/// table, writes the CSV and the chart, and says what it wrote.
pub fn run(args: Args) -> Result<()> {
    let Args {
        input,
        hook: hook_options,
        tools,
        strategy: options,
        prune,
        offload_to,
        offload_store,
        policies,
        preview_chars,
        svg,
        csv,
        cost,
        cache_aware,
    } = args;
    if !policies.policies.is_empty() && offload_store.is_none() {
        return Err(UsageError("--policy needs --offload-store DIR".into()).into());
    }
    let settings = hook_options.settings(hook_options.compact_at, hook_options.compact_to);
    let strategy = options.resolve(offload_to.is_some())?;
    let counter = crate::strategy::counter(&hook_options.counter, &options.client_settings())?;
    let mut built =
        options.build(&strategy, &prune, offload_to.as_deref().map(|dir| (dir, preview_chars)))?;
    // Checked before anything is read; built once the log says how long its cache lived.
    check_hook(settings, &cache_aware)?;
    let offload = offload_hook(offload_store.as_deref(), &policies, preview_chars)?;
    let mut conversation = input.read_without_write_back()?;
    let tools = match &tools {
        Some(path) => crate::input::read_tools(path)?,
        None => conversation.tools.clone(),
    };
    let left_out = crate::provider::left_out(&conversation.messages, !tools.is_empty());
    let pricing = cost.pricing()?;
    let calls = crate::provider::recorded_calls(&conversation.usage);
    let settings = with_cache_rule(settings, &cache_aware, &calls, cost.cache.as_deref());
    let hook = CompactionHook::new(built.take_compactor(), settings)
        .map_err(|e| UsageError(e.to_string()))?
        .with_counter(counter);
    let replayed = replay(&hook, offload.as_ref(), &mut conversation, tools, &calls)?;
    let summaries = built.summary_log();
    if let (true, Some(failure)) = (summaries.raised, summaries.failures.last()) {
        return Err(anyhow::anyhow!("{strategy}: {failure}"));
    }
    for failure in &summaries.failures {
        eprintln!(
            "summarization: a summary failed, so the replay went on with the last good result: {failure}"
        );
    }
    let mut failures = replayed.failures;
    failures.extend(built.take_offload_failures());
    crate::error::say_failures(&failures);
    let steps = replayed.steps;

    let mut out = table(&steps);
    out.push('\n');
    out.push_str(&totals(&steps, &settings));
    if offload.is_some() {
        out.push_str(&format!("offload failures     {}\n", failures.len()));
    }
    out.push_str(&notes(&steps, conversation.usage.is_empty(), left_out, replayed.has_results));
    out.push_str(&costs(&steps, &pricing));
    crate::output::write_output(None, out.as_bytes())?;

    let name = crate::input::Source::from_arg(input.input.as_deref()).name();
    let chart = svg.as_ref().map(|_| Chart {
        title: chart_title(&name, &hook.counter().describe()),
        steps: &steps,
        settings,
        compactions: replayed.provider_compactions,
    });
    let ready = write_files(csv.as_deref(), svg.as_deref(), &steps, settings.context_window, chart.as_ref())?;
    let ending = crate::error::partial(&failures);
    crate::output::commit_run(ready, crate::error::status(&ending))?;
    for (path, what) in [(&csv, "the table"), (&svg, "the chart")] {
        if let Some(path) = path {
            crate::progress::say(&format!("wrote {what} to {}", path.display()));
        }
    }
    ending
}

/// Checks the hook's settings, with the cache rule asked for, before anything is read.
fn check_hook(settings: CompactionHookSettings, cache_aware: &CacheAwareOptions) -> Result<()> {
    let checked = match cache_aware.rule(false, false) {
        Some(rule) => settings.with_cache(rule),
        None => settings,
    };
    CompactionHook::new(Box::new(compaction_core::ChainCompactor::new()), checked)
        .map_err(|e| UsageError(e.to_string()))?;
    Ok(())
}

/// The offload hook, when --offload-store is given: its folder is opened (and checked) at once.
fn offload_hook(
    store: Option<&Path>,
    policies: &Policies,
    preview_chars: usize,
) -> Result<Option<ToolResultOffloadHook>> {
    let Some(dir) = store else { return Ok(None) };
    let store = Arc::new(crate::strategy::open_store(dir)?);
    Ok(Some(ToolResultOffloadHook::new(store, policies.strategies()).with_preview_chars(preview_chars)))
}

/// The hook's settings with the cache-aware rule, if asked for: a one-hour cache when the log
/// shows one, writes at the input price for `--cache openai`.
fn with_cache_rule(
    settings: CompactionHookSettings,
    cache_aware: &CacheAwareOptions,
    calls: &[Recorded],
    cache: Option<&str>,
) -> CompactionHookSettings {
    match cache_aware.rule(crate::provider::one_hour_cache(calls), cache == Some("openai")) {
        Some(rule) => settings.with_cache(rule),
        None => settings,
    }
}

/// What a replay gives, and what is read of the messages it took.
struct Replayed {
    steps: Vec<Step>,
    failures: Vec<OffloadFailure>,
    /// Whether the conversation has tool results at all.
    has_results: bool,
    /// The calls that first saw a conversation the provider had compacted, for the chart.
    provider_compactions: Vec<usize>,
}

/// Replays `conversation` with `hook` (and `offload`) in the loop. The replay takes the
/// messages, so that they are held once, not beside the replayed copy. A count a provider could
/// not make, or a summary that failed with --raise-on-failure, fails the command before any
/// table is shown.
fn replay(
    hook: &CompactionHook,
    offload: Option<&ToolResultOffloadHook>,
    conversation: &mut Conversation,
    tools: Vec<ToolSpec>,
    calls: &[Recorded],
) -> Result<Replayed> {
    let compacted_at = crate::provider::compacted_at(conversation);
    let mut replay = Replay::new(hook).with_tools(tools);
    if let Some(offload) = offload {
        replay = replay.with_offload(offload);
    }
    let has_results = conversation.messages.iter().any(Message::has_tool_call_result);
    let provider_compactions = provider_compactions(&conversation.messages, &conversation.compactions);
    let bar = crate::progress::bar(conversation.messages.len() as u64, "simulating");
    let messages = std::mem::take(&mut conversation.messages);
    let replayed = replay.run_owned(messages, calls, &compacted_at, &mut || bar.inc(1));
    bar.finish_and_clear();
    let replayed = replayed?;
    Ok(Replayed { steps: replayed.steps, failures: replayed.failures, has_results, provider_compactions })
}

/// The notes under the totals: where the counts come from, and why compaction declined when
/// there was nothing it could take out.
fn notes(steps: &[Step], no_usage: bool, left_out: Option<&str>, has_results: bool) -> String {
    let mut out = String::new();
    match (no_usage, left_out) {
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
    let declined = steps.iter().filter(|s| s.triggered && !s.compacted).count();
    if declined > 0 && !has_results {
        let _ = writeln!(
            out,
            "note                 declined {declined} times: no tool results in this conversation (its format holds \
             tool output as plain messages)"
        );
    }
    out
}

/// The chart's title: the input's file name and the counter.
fn chart_title(name: &str, counter: &str) -> String {
    let file =
        Path::new(name).file_name().map_or_else(|| name.to_owned(), |n| n.to_string_lossy().into_owned());
    format!("{file}: context per model call (counter {counter})")
}

/// Stages the CSV and the chart, to be put in place together once both are written.
fn write_files(
    csv_path: Option<&Path>,
    svg_path: Option<&Path>,
    steps: &[Step],
    window: usize,
    chart: Option<&Chart<'_>>,
) -> Result<Vec<Ready>> {
    let mut ready = Vec::new();
    if let Some(path) = csv_path {
        let staged = crate::output::stage(path).and_then(|s| s.write(csv(steps, window).as_bytes()));
        ready.push(staged.context("writing the CSV")?);
    }
    if let (Some(path), Some(chart)) = (svg_path, chart) {
        let svg = chart::svg(chart)?;
        ready.push(
            crate::output::stage(path).and_then(|s| s.write(svg.as_bytes())).context("writing the SVG")?,
        );
    }
    Ok(ready)
}

/// The cost section: the calls without and with compaction, priced with the prompt cache, and
/// what the log records; a plain line when compaction saves tokens but costs more.
fn costs(steps: &[Step], pricing: &Pricing) -> String {
    let mut out = String::new();
    let without = Call::without_compaction(steps);
    let with = Call::with_compaction(steps);
    let (cost_without, cost_with) = match (
        compaction_replay::estimate(&without, pricing),
        compaction_replay::estimate(&with, pricing),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(compaction_replay::Error::NoModel { .. }), _) => {
            let _ = writeln!(
                    out,
                    "cost                 not estimated: the log names no model (--price-model NAME prices the calls)"
                );
            return out;
        }
        (Err(error), _) | (_, Err(error)) => {
            let _ =
                writeln!(out, "cost                 not estimated: {}", compaction_core::error_chain(&error));
            return out;
        }
    };
    // The log's own calls, priced as it records them and by the cache model: the model's check.
    let logged = Call::as_recorded(steps);
    let complete = logged.len() == steps.len();
    let recorded = compaction_replay::recorded(&logged, pricing).and_then(Result::ok);
    let modelled = compaction_replay::estimate(&logged, pricing).ok();
    let cached = cost_without.cache.is_some_and(|c| c != CacheKind::None);
    let cache = match cost_without.cache {
        Some(kind) if cached => format!("{} prompt cache", kind.name()),
        _ => "no prompt cache".to_owned(),
    };
    let with_cache = if cached { "with the prompt cache" } else { "without a prompt cache" };
    let _ = writeln!(out, "\ncost ({cache})");
    let header = ["", "uncached", "cache read", "cache write", "output", "dollars"];
    let row = |name: &str, c: &Cost| {
        [
            name.to_owned(),
            c.uncached.to_string(),
            c.cache_read.to_string(),
            c.cache_write.to_string(),
            c.output.to_string(),
            if c.dollars >= 1.0 { format!("{:.2}", c.dollars) } else { format!("{:.4}", c.dollars) },
        ]
    };
    let mut rows = vec![header.map(str::to_owned), row("without", &cost_without), row("with", &cost_with)];
    if let Some(recorded) = &recorded {
        rows.push(row("recorded", recorded));
    }
    let mut widths = [0; 6];
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.len());
        }
    }
    for r in &rows {
        let cells: Vec<String> = r
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(i, (cell, w))| if i == 0 { format!("{cell:<w$}") } else { format!("{cell:>w$}") })
            .collect();
        let _ = writeln!(out, "  {}", cells.join("  ").trim_end());
    }
    // The log's usage is its provider's cache at work: the model is checked against it only
    // when it prices with the rows' own cache.
    let checked = pricing.cache.is_none() && cached;
    if let (Some(recorded), Some(modelled), true) = (&recorded, &modelled, checked) {
        let off = |a: u64, b: u64| signed_percent(change(a as f64, b as f64));
        let _ = writeln!(
            out,
            "cache model vs log  the log's {} calls priced by the model: cost {}, cache read {}, cache write {}{}",
            logged.len(),
            signed_percent(change(modelled.dollars, recorded.dollars)),
            off(modelled.cache_read, recorded.cache_read),
            off(modelled.cache_write, recorded.cache_write),
            if complete { "" } else { " (the calls the log records usage for)" }
        );
        if steps.iter().any(|s| s.after_provider_compaction) {
            let _ = writeln!(
                out,
                "note                 the provider compacted the recorded conversation: `recorded` is what it cost \
                 so, `without` what it would have cost uncompacted"
            );
        }
    }
    let tokens_without: u64 = without.iter().map(|c| c.prompt).sum();
    let tokens_with: u64 = with.iter().map(|c| c.prompt).sum();
    if tokens_with < tokens_without && cost_with.dollars > cost_without.dollars {
        let _ = writeln!(
            out,
            "compaction saves {} of tokens but costs {} more {with_cache}",
            percent((tokens_without - tokens_with) as f64, tokens_without as f64),
            percent(cost_with.dollars - cost_without.dollars, cost_without.dollars)
        );
    } else if cost_with.dollars > cost_without.dollars {
        let _ = writeln!(
            out,
            "compaction costs {} more {with_cache}",
            percent(cost_with.dollars - cost_without.dollars, cost_without.dollars)
        );
    } else if cost_without.dollars > 0.0 {
        let _ = writeln!(
            out,
            "compaction saves {} of the cost {with_cache}",
            percent(cost_without.dollars - cost_with.dollars, cost_without.dollars)
        );
    }
    if cached && cost_without.unexplained_breaks > 0 {
        let _ = writeln!(
            out,
            "note                 the log shows the cache broken at {} for reasons the messages do not hold \
             (the agent changed its system prompt or tools); both replays keep those breaks",
            calls(cost_without.unexplained_breaks)
        );
    }
    if cost_without.lifetime_assumed > 0 {
        let _ = writeln!(
            out,
            "note                 the log does not show the cache's lifetime for {}: five minutes assumed",
            calls(cost_without.lifetime_assumed)
        );
    }
    if cached && cost_without.untimed > 0 {
        let _ = writeln!(
            out,
            "note                 the log gives no time for {}: the cache is assumed warm between calls",
            calls(cost_without.untimed)
        );
    }
    out
}

/// `estimate` against `recorded` as a relative change; `None` against nothing.
fn change(estimate: f64, recorded: f64) -> Option<f64> {
    (recorded != 0.0).then(|| estimate / recorded - 1.0)
}

fn calls(n: usize) -> String {
    if n == 1 {
        "1 call".to_owned()
    } else {
        format!("{n} calls")
    }
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
    let (at, to) = (settings.threshold(), settings.budget());
    let _ = writeln!(out, "context window       {window} tokens (compact at {at}, down to {to})");
    let _ = writeln!(out, "model calls          {}", steps.len());
    let _ = writeln!(
        out,
        "peak context         without {peak_without} ({} of the window), with {peak_with} ({})",
        percent(peak_without as f64, window as f64),
        percent(peak_with as f64, window as f64)
    );
    let _ = writeln!(out, "calls over window    without {}, with {}", over(|s| s.without), over(|s| s.with));
    let _ = writeln!(
        out,
        "tokens sent          without {sent_without}, with {sent_with} ({} saved)",
        percent(sent_without.saturating_sub(sent_with) as f64, sent_without as f64)
    );
    let _ = writeln!(out, "compaction           triggered {triggered} times, compacted {compacted}");
    let _ = writeln!(out, "results pruned       {}", last.map_or(0, |s| s.pruned));
    let _ = writeln!(out, "results offloaded    {}", last.map_or(0, |s| s.offloaded));
    if let Some(masked) = last.map(|s| s.masked).filter(|&m| m > 0) {
        let _ = writeln!(out, "observations masked  {masked}");
    }
    // What was lost: calls the agent made again after their result was taken out. Said only
    // when something was taken out.
    if let Some(last) = last.filter(|s| compacted > 0 || s.pruned + s.offloaded + s.masked > 0) {
        let _ = writeln!(out, "refetches            {} ({} tokens)", last.refetches, last.refetch_tokens);
    }
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

/// One row per call, with a header. `over_window` says whether the request as sent (with
/// compaction) is over the `window`; `first_changed` is the first message a compaction (or an
/// offload) changed since the previous call, where the prompt cache breaks, empty when none;
/// `refetches` is the refetches so far (calls repeated after their result was taken out).
pub fn csv(steps: &[Step], window: usize) -> String {
    let mut out = String::from(
        "step,message,tokens_without,estimated_tokens,tokens_with,triggered,compacted,pruned,offloaded,provider_tokens,\
         over_window,first_changed,refetches\n",
    );
    for s in steps {
        let provider = s.provider.map(|p| p.to_string()).unwrap_or_default();
        let first = s.first_changed.map(|f| f.to_string()).unwrap_or_default();
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{provider},{},{first},{}",
            s.step,
            s.message,
            s.without,
            s.estimate,
            s.with,
            s.triggered,
            s.compacted,
            s.pruned,
            s.offloaded,
            s.with > window,
            s.refetches
        );
    }
    out
}
