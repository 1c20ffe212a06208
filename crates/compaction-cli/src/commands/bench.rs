//! `compaction bench`: replay many transcripts with a grid of configurations, and compare them
//! in tokens and in cost.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::BufRead;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use compaction_formats::{Format, ReadOptions};
use compaction_hook::{CompactionHook, CompactionHookSettings};
use compaction_model::parallel;
use compaction_replay::{CacheKind, Call, Pricing, Recording, Replay, Step};
use serde::Serialize;

use crate::error::UsageError;
use crate::options::{CostOptions, HookOptions, PruneOptions};
use crate::strategy::{ProviderCalls, Stage, Strategy, StrategyOptions};
use crate::text::signed_percent;

#[cfg(feature = "parquet")]
mod parquet_dataset;

/// Replay every transcript of files, folders and datasets with a grid of configurations, and
/// compare them with no compaction, in tokens and in cost.
///
/// INPUT is a file or a folder (read recursively, in name order: its .json, .jsonl, .ndjson,
/// .traj and .parquet files, the others counted as skipped); each file's format is
/// detected as `count` detects it (or --format). A file that cannot be read is named on
/// standard error and counted, and the run goes on: the exit status is 0 when at least one
/// transcript was benchmarked. A file holding several conversations (tau-bench) gives one
/// transcript each. With --jsonl, each file is a JSON Lines dataset with one whole trajectory
/// a line (its format detected line by line): each line is a transcript. Claude Code and Codex
/// logs, which are JSON Lines of one event a line, are read without --jsonl.
///
/// A .parquet file is a dataset with one transcript a row (numbered from 0), read a row group
/// at a time: its --column holds JSON text (a whole trajectory, conversation or message list,
/// read as a --jsonl line is) or a list of structs such as {role, content, tool_calls}, read as
/// the JSON list of objects they spell. Without --column, the sole list-of-structs column is
/// read, else the sole string column; when none or several fit, the error names the columns.
///
/// The configurations: every --strategy (a comma list of tool-result-pruning, sliding-window,
/// observation-masking, or chain:A+B+...; summarization and offload are not benchmarked) crossed
/// with every value of every --set KEY=V1,V2,... the strategy takes (min_tokens, clear_at_least,
/// keep_tool_results, min_keep_steps for pruning; min_keep_steps for sliding-window;
/// keep_observations, polling for observation masking; compact_at, compact_to, and cache_aware
/// (true or false) with expected_calls for all), each as the option of `simulate` of the same
/// name sets it. `none`, the conversation as recorded
/// without compaction, is always the first and the baseline.
///
/// For every transcript and configuration: the model calls, the peak context, the calls over
/// --context-window, the tokens sent, the uncached, cache-read, cache-write and output tokens
/// and the cost by the price table with its prompt cache (as `simulate` prices them; empty when
/// the model is unknown: --price-model NAME), the cost the log records where it records usage,
/// the compactions, and the refetches (calls repeated after their result was taken out) with
/// their tokens. Then totals and medians per configuration, against `none` in tokens and in
/// cost, and a line for each configuration that sends fewer tokens but costs more.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    compaction bench sessions/ --context-window 100000 --full-history --strategy tool-result-pruning,observation-masking\n  \
    compaction bench runs/ --context-window 32000 --strategy tool-result-pruning --set min_tokens=0,200,1000 --set compact_at=0.5,0.7 --json bench.json --csv bench.csv\n  \
    compaction bench --jsonl trajectories.jsonl --context-window 32000 --strategy observation-masking --set keep_observations=3,5\n  \
    compaction bench train-00000-of-00001.parquet --column messages --context-window 128000 --strategy observation-masking")]
pub struct Args {
    /// Files and folders of transcripts (folders are read recursively).
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// The transcript format of every file (or line, with --jsonl); detected when absent.
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<Format>,
    /// Read each file as a JSON Lines dataset, one whole trajectory a line.
    #[arg(long)]
    pub jsonl: bool,
    /// The column of a Parquet dataset that holds each row's messages (JSON text or a list of
    /// structs); the one that looks like messages when absent.
    #[arg(long, value_name = "NAME")]
    pub column: Option<String>,
    /// Read everything the logs hold (as `simulate --full-history`).
    #[arg(long)]
    pub full_history: bool,
    #[command(flatten)]
    pub hook: HookOptions,
    /// The strategies to compare with none: a comma list (chain:A+B+... for a chain).
    #[arg(long, value_name = "LIST", default_value = "tool-result-pruning")]
    pub strategy: String,
    /// KEY=V1,V2,...: the values of a setting to cross the strategies with (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUES")]
    pub sets: Vec<String>,
    #[command(flatten)]
    pub prune: PruneOptions,
    #[command(flatten)]
    pub cost: CostOptions,
    /// Write the figures of every transcript and configuration, and the totals, as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write one row per transcript and configuration as CSV.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write a chart of cost against tokens sent, each against none, as SVG: a large dot per
    /// configuration (over all transcripts), a small one per transcript (the spread), the
    /// cheapest configuration ringed.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// The settings `--set` takes, with the strategies each applies to (`None`: all).
const KEYS: [(&str, Option<&[Stage]>); 10] = [
    ("min_tokens", Some(&[Stage::Pruning])),
    ("clear_at_least", Some(&[Stage::Pruning])),
    ("keep_tool_results", Some(&[Stage::Pruning])),
    ("min_keep_steps", Some(&[Stage::Pruning, Stage::SlidingWindow])),
    ("keep_observations", Some(&[Stage::ObservationMasking])),
    ("polling", Some(&[Stage::ObservationMasking])),
    ("compact_at", None),
    ("compact_to", None),
    ("cache_aware", None),
    ("expected_calls", None),
];

/// One configuration of the grid.
#[derive(Debug, Serialize)]
struct Configuration {
    name: String,
    strategy: String,
    settings: BTreeMap<String, String>,
    #[serde(skip)]
    hook: Option<CompactionHook>,
    /// With `cache_aware=true`, the hook whose rule prices a one-hour cache, for the logs that
    /// show one (as `simulate --cache-aware` reads it from the log).
    #[serde(skip)]
    hook_one_hour: Option<CompactionHook>,
}

/// What every configuration starts from: the options `--set` changes.
struct Base<'a> {
    prune: &'a PruneOptions,
    hook: &'a HookOptions,
    /// `--cache`: the cache-aware rule prices writes without a surcharge for `openai`.
    cache: Option<&'a str>,
}

/// The grid `--strategy` (`strategies`) and `--set` (`sets`) describe, each configuration's
/// hook built from `base`.
fn configurations(strategies: &str, sets: &[String], base: &Base<'_>) -> Result<Vec<Configuration>> {
    let given = sets;
    let usage = |text: String| anyhow::Error::new(UsageError(text));
    let mut sets: Vec<(&str, Vec<String>)> = Vec::new();
    for set in given {
        let (key, values) =
            set.split_once('=').ok_or_else(|| usage(format!("--set {set}: expected KEY=V1,V2,...")))?;
        let key = key.trim();
        let Some((known, _)) = KEYS.iter().find(|(k, _)| *k == key) else {
            let names: Vec<&str> = KEYS.iter().map(|(k, _)| *k).collect();
            return Err(usage(format!("--set {set}: unknown setting {key:?}; known: {}", names.join(", "))));
        };
        let values: Vec<String> =
            values.split(',').map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned).collect();
        if values.is_empty() {
            return Err(usage(format!("--set {set}: no values")));
        }
        sets.retain(|(k, _)| k != known);
        sets.push((known, values));
    }
    let mut grid = vec![Configuration {
        name: "none".into(),
        strategy: "none".into(),
        settings: BTreeMap::new(),
        hook: None,
        hook_one_hour: None,
    }];
    for name in strategies.split(',').map(str::trim).filter(|n| !n.is_empty() && *n != "none") {
        let strategy: Strategy =
            name.replace('+', ",").parse().map_err(|e: String| usage(format!("--strategy {name}: {e}")))?;
        if let Some(why) = strategy.needs_io() {
            return Err(usage(format!("--strategy {name}: not benchmarked: {why}")));
        }
        // The settings this strategy takes, crossed.
        let taken: Vec<&(&str, Vec<String>)> = sets
            .iter()
            .filter(|(key, _)| {
                KEYS.iter().any(|(k, stages)| {
                    k == key && stages.is_none_or(|s| s.iter().any(|&st| strategy.has(st)))
                })
            })
            .collect();
        let mut combinations: Vec<Vec<(&str, &str)>> = vec![Vec::new()];
        for (key, values) in &taken {
            combinations = combinations
                .into_iter()
                .flat_map(|c| {
                    values.iter().map(move |v| {
                        let mut c = c.clone();
                        c.push((*key, v.as_str()));
                        c
                    })
                })
                .collect();
        }
        for combination in combinations {
            let label = strategy.to_string().replace(',', "+");
            let mut full = label.clone();
            for (key, value) in &combination {
                let _ = write!(full, " {key}={value}");
            }
            let hook = build(base, &strategy, &combination, false)
                .with_context(|| format!("configuration {full}"))?;
            let hook_one_hour = match combination.iter().any(|&(k, v)| k == "cache_aware" && v == "true") {
                true => Some(build(base, &strategy, &combination, true)?),
                false => None,
            };
            grid.push(Configuration {
                name: full,
                strategy: label,
                settings: combination.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
                hook: Some(hook),
                hook_one_hour,
            });
        }
    }
    Ok(grid)
}

/// The hook of one configuration: `simulate`'s options with the settings set.
fn build(
    base: &Base<'_>,
    strategy: &Strategy,
    settings: &[(&str, &str)],
    one_hour: bool,
) -> Result<CompactionHook> {
    let usage = |key: &str, value: &str, what: &str| {
        anyhow::Error::new(UsageError(format!("--set {key}={value}: expected {what}")))
    };
    let mut prune = base.prune.clone();
    let (mut compact_at, mut compact_to) = (base.hook.compact_at, base.hook.compact_to);
    let (mut keep_observations, mut polling) = (None, None);
    let mut cache_aware = crate::strategy::CacheAwareOptions { cache_aware: false, expected_calls: 10 };
    for &(key, value) in settings {
        let count = || value.parse::<usize>().map_err(|_| usage(key, value, "a whole number"));
        let fraction = || value.parse::<f64>().map_err(|_| usage(key, value, "a fraction such as 0.7"));
        match key {
            "min_tokens" => prune.min_tokens = count()?,
            "clear_at_least" => prune.clear_at_least = Some(count()?),
            "keep_tool_results" => prune.keep_tool_results = Some(count()?),
            "min_keep_steps" => prune.min_keep_steps = count()?,
            "keep_observations" => keep_observations = Some(count()?),
            "polling" => polling = Some(count()?),
            "compact_at" => compact_at = fraction()?,
            "compact_to" => compact_to = fraction()?,
            "cache_aware" => {
                cache_aware.cache_aware =
                    value.parse::<bool>().map_err(|_| usage(key, value, "true or false"))?
            }
            "expected_calls" => cache_aware.expected_calls = count()?,
            _ => {}
        }
    }
    let options = StrategyOptions {
        strategy: Some(strategy.clone()),
        omission_note: None,
        provider: None,
        model: None,
        base_url: None,
        approximate_summary_tokens: None,
        summary_instruction: None,
        raise_on_failure: false,
        keep_observations,
        polling,
        calls: ProviderCalls::default(),
    };
    let strategy = options.resolve(false)?;
    let mut built = options.build(&strategy, &prune, None)?;
    let counter = crate::strategy::counter(&base.hook.counter, &options.client_settings())?;
    let mut settings = base.hook.settings(compact_at, compact_to);
    if let Some(rule) = cache_aware.rule(one_hour, base.cache == Some("openai")) {
        settings = settings.with_cache(rule);
    }
    Ok(CompactionHook::new(built.take_compactor(), settings)
        .map_err(|e| UsageError(e.to_string()))?
        .with_counter(counter))
}

/// One configuration's figures for one transcript (or, summed, for all).
#[derive(Debug, Clone, Default, Serialize)]
struct Figures {
    calls: usize,
    peak_tokens: usize,
    over_window: usize,
    tokens_sent: u64,
    uncached_tokens: Option<u64>,
    cache_read_tokens: Option<u64>,
    cache_write_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cost: Option<f64>,
    recorded_cost: Option<f64>,
    /// The log's own calls priced by the cache model (the model's check against
    /// `recorded_cost`); for the summary line only.
    #[serde(skip)]
    recorded_modelled: Option<f64>,
    /// Whether the provider compacted the recorded conversation (then `none` replays it
    /// uncompacted, and costs more than the log); for the summary line only.
    #[serde(skip)]
    provider_compacted: bool,
    compactions: usize,
    refetches: usize,
    refetch_tokens: usize,
}

#[derive(Debug, Serialize)]
struct ResultRow {
    configuration: String,
    #[serde(flatten)]
    figures: Figures,
}

/// One transcript: where it is, and its figures per configuration, or why it has none.
#[derive(Debug, Serialize)]
struct Transcript {
    path: String,
    conversation: Option<usize>,
    format: Option<String>,
    error: Option<String>,
    results: Vec<ResultRow>,
}

/// A unit of work: a file, a line of a JSON Lines dataset, a row of a Parquet dataset, or what
/// kept one from being read.
enum Work {
    File(PathBuf),
    /// A line, by where it sits in its file: the thread that replays it reads it, so its bytes
    /// are allocated and freed on one thread (lines the walker read and the workers freed were
    /// kept by the allocator: 200 lines of 0.45 MB peaked at 54 MB, against 10 MB as 200 files).
    Line {
        path: PathBuf,
        line: usize,
        at: u64,
        len: usize,
    },
    #[cfg_attr(not(feature = "parquet"), allow(dead_code))]
    Row {
        path: PathBuf,
        row: usize,
        bytes: Vec<u8>,
    },
    Failed {
        path: PathBuf,
        at: Option<usize>,
        error: String,
    },
}

/// Runs the command: builds the grid, replays every transcript with it on all cores, prints the
/// table, and writes the JSON, the CSV and the chart.
pub fn run(args: Args) -> Result<()> {
    let Args {
        inputs,
        format,
        jsonl,
        column,
        full_history,
        hook,
        strategy,
        sets,
        prune,
        cost,
        json,
        csv,
        svg,
    } = args;
    let base = Base { prune: &prune, hook: &hook, cache: cost.cache.as_deref() };
    let grid = configurations(&strategy, &sets, &base)?;
    let pricing = cost.pricing()?;
    // Each transcript's figures are folded into the totals as soon as those before it are; they
    // are kept whole only for the files that list them (--json, --csv, --svg).
    let keep = json.is_some() || csv.is_some() || svg.is_some();
    let walking = Walking { inputs: &inputs, jsonl, column: column.as_deref() };
    let reading = Reading { format, full_history, window: hook.context_window };
    let (mut tally, skipped) = bench_all(&walking, &reading, &grid, &pricing, keep);
    for error in &tally.errors {
        // The error names the file (and the line, of a dataset).
        eprintln!("{error}");
    }
    let (benchmarked, failed) = (tally.benchmarked, tally.errors.len());
    if benchmarked == 0 {
        anyhow::bail!("no transcript could be benchmarked ({failed} failed)");
    }
    let cached = pricing.cache.is_none_or(|c| c != CacheKind::None);
    let (unpriced, recorded) = (tally.unpriced, tally.recorded.take());
    let (totals, transcripts) = tally.finish(&grid);
    let mut out = table(&grid, &totals, benchmarked, failed, cached, recorded, unpriced);
    if skipped > 0 {
        let _ = writeln!(
            out,
            "skipped              {skipped} file{} in the folders: not .json, .jsonl, .ndjson, .traj or .parquet",
            if skipped == 1 { "" } else { "s" }
        );
    }
    crate::output::write_output(None, out.as_bytes())?;
    let files = [(json.as_deref(), "the JSON"), (csv.as_deref(), "the CSV"), (svg.as_deref(), "the chart")];
    let ready = write_files(files, &grid, &totals, &transcripts)?;
    crate::output::commit_run(ready, 0)?;
    for (path, what) in files {
        if let Some(path) = path {
            crate::progress::say(&format!("wrote {what} to {}", path.display()));
        }
    }
    Ok(())
}

/// Where the transcripts are: the inputs, and how a file is cut (`--jsonl`, `--column`).
struct Walking<'a> {
    inputs: &'a [PathBuf],
    jsonl: bool,
    column: Option<&'a str>,
}

/// How each transcript is read and measured: `--format`, `--full-history`, the window.
struct Reading {
    format: Option<Format>,
    full_history: bool,
    window: usize,
}

/// Replays every transcript `walking` finds with every configuration of `grid`, folding each
/// into the tally in the inputs' order; with the files skipped.
///
/// One transcript is in flight at a time, its configurations replayed on all cores: this
/// thread reads it and replays a share of them, and a replayer a core beside it the others
/// ([`Replayers`]). Memory follows the largest transcript once, not once a core: with a
/// transcript a core, each core's allocator heap also keeps, for a while, what its transcripts
/// freed, and the 1 GB dataset of BENCHMARKS.md (j) peaked at 29 to 33 MB, 25 to 27 MB now,
/// where its longest line alone peaks at 17 MB.
fn bench_all(
    walking: &Walking<'_>,
    reading: &Reading,
    grid: &[Configuration],
    pricing: &Pricing,
    keep: bool,
) -> (Tally, usize) {
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let (work_tx, work_rx) = mpsc::sync_channel::<Work>(2);
    let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
    let jobs_rx = Mutex::new(jobs_rx);
    let spinner = crate::progress::spinner("benchmarking");
    let mut tally = Tally::new(grid.len(), keep);
    let skipped = std::thread::scope(|scope| {
        for _ in 1..threads {
            let jobs_rx = &jobs_rx;
            scope.spawn(move || loop {
                let next = jobs_rx.lock().map_or(None, |rx| rx.recv().ok());
                let Some(job) = next else { break };
                // The replayers use every core already: the library starts no threads of its
                // own under them (the reader's and the counter's halves). A replay that panics
                // has said why, and the thread waiting for its figures stops the run; this one
                // goes on taking jobs, so that none is left waiting in the queue.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    parallel::with_max_threads(NonZeroUsize::MIN, || job.run(grid, pricing, reading.window));
                }));
            });
        }
        let walker = scope.spawn(|| walk(walking, work_tx));
        let replayers = Replayers { jobs: jobs_tx, helpers: threads - 1 };
        let mut count = 0;
        for work in work_rx {
            let transcripts = parallel::with_max_threads(NonZeroUsize::MIN, || {
                bench_one(work, reading, grid, pricing, &replayers)
            });
            count += transcripts.len();
            spinner.set_message(format!("benchmarking: {count} transcripts"));
            transcripts.into_iter().for_each(|t| tally.add(t));
        }
        // The replayers stop once their queue is closed.
        drop(replayers);
        walker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    });
    spinner.finish_and_clear();
    (tally, skipped)
}

/// The threads that replay a conversation's configurations beside the one that read it: each
/// [`Job`] asks one of them to help with one conversation.
struct Replayers {
    jobs: mpsc::Sender<Job>,
    /// How many threads take jobs.
    helpers: usize,
}

/// A conversation whose configurations are being replayed, shared by the threads replaying
/// them: each takes the next configuration not yet taken.
struct Unit {
    conversation: compaction_formats::Conversation,
    /// What the log records of each call.
    calls: Vec<compaction_replay::Recorded>,
    /// Whether the log shows a one-hour cache.
    one_hour: bool,
    /// Where the provider compacted the conversation.
    compacted_at: Vec<usize>,
    /// The indexes in the grid of the configurations to replay (those with a hook), in order.
    configurations: Vec<usize>,
    /// The next of `configurations` not yet taken.
    next: AtomicUsize,
}

impl Unit {
    /// `conversation`, to be replayed with the configurations of `grid` that have a hook.
    fn new(conversation: compaction_formats::Conversation, grid: &[Configuration]) -> Arc<Unit> {
        let calls = crate::provider::recorded_calls(&conversation.usage);
        Arc::new(Unit {
            one_hour: crate::provider::one_hour_cache(&calls),
            compacted_at: crate::provider::compacted_at(&conversation),
            calls,
            configurations: grid
                .iter()
                .enumerate()
                .filter(|(_, c)| c.hook.is_some())
                .map(|(k, _)| k)
                .collect(),
            // The first is replayed by the thread that read the conversation.
            next: AtomicUsize::new(1),
            conversation,
        })
    }

    /// The next configuration to replay (its index in `configurations`), if any is left.
    fn take(&self) -> Option<usize> {
        let k = self.next.fetch_add(1, Ordering::Relaxed);
        (k < self.configurations.len()).then_some(k)
    }
}

/// A replayer's share of one conversation: the configurations it takes, each one's figures
/// sent back with its index in the unit's `configurations`.
struct Job {
    unit: Arc<Unit>,
    done: mpsc::Sender<(usize, Result<Figures, compaction_hook::Error>)>,
}

impl Job {
    fn run(self, grid: &[Configuration], pricing: &Pricing, window: usize) {
        let Job { unit, done } = self;
        let mut figures = Vec::new();
        while let Some(k) = unit.take() {
            let replayed = replay_one(&unit, &grid[unit.configurations[k]])
                .map(|steps| self::figures(&steps, true, pricing, window));
            figures.push((k, replayed));
        }
        // The conversation is let go of here before the figures are sent, so that the thread
        // that read it frees it.
        drop(unit);
        for result in figures {
            if done.send(result).is_err() {
                break;
            }
        }
    }
}

/// Stages the files asked for (`--json`, `--csv`, `--svg`, in that order), to be put in place
/// together.
fn write_files(
    files: [(Option<&Path>, &str); 3],
    grid: &[Configuration],
    totals: &[Total],
    transcripts: &[Transcript],
) -> Result<Vec<crate::output::Ready>> {
    let [(json, _), (csv_path, _), (svg, _)] = files;
    let mut ready = Vec::new();
    if let Some(path) = json {
        let report = serde_json::json!({
            "configurations": grid,
            "transcripts": transcripts,
            "totals": totals,
        });
        let text = serde_json::to_string_pretty(&report)? + "\n";
        ready.push(
            crate::output::stage(path).and_then(|s| s.write(text.as_bytes())).context("writing the JSON")?,
        );
    }
    if let Some(path) = csv_path {
        let text = csv(transcripts);
        ready.push(
            crate::output::stage(path).and_then(|s| s.write(text.as_bytes())).context("writing the CSV")?,
        );
    }
    if let Some(path) = svg {
        let svg = chart(totals, transcripts)?;
        ready.push(
            crate::output::stage(path).and_then(|s| s.write(svg.as_bytes())).context("writing the SVG")?,
        );
    }
    Ok(ready)
}

/// Sends every file of the inputs (every line, with --jsonl) to the workers, in order.
fn walk(walking: &Walking<'_>, work: mpsc::SyncSender<Work>) -> usize {
    let mut skipped = 0;
    let mut send = |item: Work| work.send(item).is_ok();
    for input in walking.inputs {
        let mut files = Vec::new();
        collect_files(input, &mut files, &mut skipped);
        for file in files {
            if is_parquet(&file) {
                parquet_rows(&file, walking.column, &mut send);
                continue;
            }
            if !walking.jsonl {
                send(Work::File(file));
                continue;
            }
            let spans = std::fs::File::open(&file).and_then(|f| {
                let reader = std::io::BufReader::with_capacity(1 << 20, f);
                line_spans(reader, |line, at, len| send(Work::Line { path: file.clone(), line, at, len }))
            });
            if let Err(error) = spans {
                let error = format!("{}: cannot read: {error}", file.display());
                send(Work::Failed { path: file.clone(), at: None, error });
            }
        }
    }
    skipped
}

/// Calls `each(line, offset, length)` for every line of a JSON Lines file that is not blank,
/// lines numbered from 0 and without their `\n`, until `each` says stop; reads through one
/// buffer, allocating nothing a line.
fn line_spans(
    mut reader: impl BufRead,
    mut each: impl FnMut(usize, u64, usize) -> bool,
) -> std::io::Result<()> {
    let (mut line, mut start, mut at, mut blank) = (0, 0u64, 0u64, true);
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            if at > start && !blank {
                each(line, start, (at - start) as usize);
            }
            return Ok(());
        }
        let taken = buffer.len();
        for &byte in buffer {
            if byte == b'\n' {
                if !blank && !each(line, start, (at - start) as usize) {
                    return Ok(());
                }
                (line, start, blank) = (line + 1, at + 1, true);
            } else if !byte.is_ascii_whitespace() {
                blank = false;
            }
            at += 1;
        }
        reader.consume(taken);
    }
}

/// The `len` bytes at `at` in the file at `path`.
fn read_span(path: &Path, at: u64, len: usize) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::Start(at))?;
    let mut bytes = vec![0; len];
    file.read_exact(&mut bytes)?;
    Ok(bytes)
}

/// Sends each row of a Parquet dataset to the workers, a row that cannot be turned into a
/// transcript as its error; an error that stops the file (it cannot be read, no column fits, a
/// page is corrupt) as the file's.
#[cfg(feature = "parquet")]
fn parquet_rows(path: &Path, column: Option<&str>, send: &mut impl FnMut(Work) -> bool) {
    let mut last = None;
    // A panic in the decoder on a corrupt file (none is known) fails that file, not the run.
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        parquet_dataset::rows(path, column, |row, transcript| {
            last = Some(row);
            match transcript {
                Ok(bytes) => send(Work::Row { path: path.to_owned(), row, bytes }),
                Err(error) => send(Work::Failed { path: path.to_owned(), at: Some(row), error }),
            }
        })
    }))
    .unwrap_or_else(|_| Err(format!("{}: the Parquet reader failed on this file", path.display())));
    if let Err(error) = read {
        send(Work::Failed { path: path.to_owned(), at: last.map(|row| row + 1), error });
    }
}

/// Without the `parquet` feature, a Parquet dataset is an error naming it.
#[cfg(not(feature = "parquet"))]
fn parquet_rows(path: &Path, _column: Option<&str>, send: &mut impl FnMut(Work) -> bool) {
    let error = format!("{}: this build reads no Parquet (the `parquet` feature is off)", path.display());
    send(Work::Failed { path: path.to_owned(), at: None, error });
}

/// Whether a file is read as a Parquet dataset: by its name.
fn is_parquet(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
}

/// The extensions of the files read in a folder; a file named on the command line is read
/// whatever its name.
const EXTENSIONS: [&str; 5] = ["json", "jsonl", "ndjson", "traj", "parquet"];

/// The files under `path`, recursively, in name order, those with a transcript's extension
/// ([`EXTENSIONS`]; the others counted in `skipped`); `path` itself when it is not a folder (a
/// file that cannot be read then fails on its own, named).
fn collect_files(path: &Path, files: &mut Vec<PathBuf>, skipped: &mut usize) {
    let Ok(entries) = std::fs::read_dir(path) else {
        files.push(path.to_owned());
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            collect_files(&path, files, skipped);
        } else if path.extension().and_then(|e| e.to_str()).is_some_and(|e| EXTENSIONS.contains(&e)) {
            files.push(path);
        } else {
            *skipped += 1;
        }
    }
}

/// Reads one unit of work and replays each of its conversations with every configuration.
fn bench_one(
    work: Work,
    reading: &Reading,
    grid: &[Configuration],
    pricing: &Pricing,
    replayers: &Replayers,
) -> Vec<Transcript> {
    let failed = |path: String, conversation: Option<usize>, error: String| Transcript {
        path,
        conversation,
        format: None,
        error: Some(error),
        results: Vec::new(),
    };
    // A line or a row: one transcript, its index the line's or the row's.
    let (name, bytes, unit) = match work {
        Work::File(path) => {
            let name = path.display().to_string();
            match std::fs::read(&path) {
                Ok(bytes) => (name, bytes, None),
                Err(error) => {
                    let error = format!("{name}: cannot read: {error}");
                    return vec![failed(name, None, error)];
                }
            }
        }
        Work::Failed { path, at, error } => return vec![failed(path.display().to_string(), at, error)],
        Work::Line { path, line, at, len } => {
            let name = path.display().to_string();
            let named = format!("{name}:{}", line + 1);
            match read_span(&path, at, len) {
                Ok(bytes) => (name, bytes, Some((line, named))),
                Err(error) => {
                    return vec![failed(name, Some(line), format!("{named}: cannot read: {error}"))]
                }
            }
        }
        Work::Row { path, row, bytes } => {
            let name = path.display().to_string();
            let named = format!("{name}: row {row}");
            (name, bytes, Some((row, named)))
        }
    };
    let options = |conversation: usize| {
        let named = unit.as_ref().map_or_else(|| name.clone(), |(_, named)| named.clone());
        let mut options =
            ReadOptions::named(named).with_full_history(reading.full_history).with_conversation(conversation);
        options.format = reading.format;
        // Benched, never written back.
        options.without_write_back()
    };
    let index = |conversation: usize| unit.as_ref().map_or(conversation, |&(index, _)| index);
    // A count a provider could not make fails the transcript, with the call named.
    let benched = |conversation: usize, read: &Arc<Unit>| match replay_all(
        read,
        grid,
        pricing,
        reading.window,
        replayers,
    ) {
        Ok(results) => Transcript {
            path: name.clone(),
            conversation: Some(index(conversation)),
            format: Some(read.conversation.format.as_str().to_owned()),
            error: None,
            results,
        },
        Err(error) => failed(name.clone(), Some(index(conversation)), crate::strategy::chain(&error)),
    };
    let first = match compaction_formats::read(bytes, &options(0)) {
        Ok(read) => Unit::new(read, grid),
        Err(error) => return vec![failed(name.clone(), Some(index(0)), crate::strategy::chain(&error))],
    };
    let mut transcripts = vec![benched(0, &first)];
    let count = if unit.is_some() { 1 } else { first.conversation.conversations };
    if count < 2 {
        return transcripts;
    }
    // The file's other conversations (tau-bench), on all cores. Each is read from its own bytes,
    // cut from the file once, as a file of that one conversation: reading the whole file for
    // each would take time in the square of its size. Should the cut not give as many as the
    // file holds, or one not read so, it is read from the whole file, as the error then says.
    let source = first.conversation.source();
    let pieces = conversations(source).filter(|pieces| pieces.len() == count);
    let read = |conversation: usize| {
        if let Some(piece) = pieces.as_ref().and_then(|pieces| pieces.get(conversation)) {
            let mut bytes = Vec::with_capacity(piece.len() + 2);
            bytes.push(b'[');
            bytes.extend_from_slice(&source[piece.clone()]);
            bytes.push(b']');
            if let Ok(read) = compaction_formats::read(bytes, &options(0)) {
                return Ok(read);
            }
        }
        compaction_formats::read(source.to_vec(), &options(conversation))
    };
    let next = AtomicUsize::new(1);
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get).min(count - 1);
    let mut more: Vec<(usize, Transcript)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let conversation = next.fetch_add(1, Ordering::Relaxed);
                        if conversation >= count {
                            break done;
                        }
                        let transcript = match read(conversation) {
                            Ok(read) => benched(conversation, &Unit::new(read, grid)),
                            Err(error) => {
                                failed(name.clone(), Some(conversation), crate::strategy::chain(&error))
                            }
                        };
                        done.push((conversation, transcript));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    more.sort_by_key(|(conversation, _)| *conversation);
    transcripts.extend(more.into_iter().map(|(_, t)| t));
    transcripts
}

/// Where each conversation of a file holding several sits: the elements of its top-level JSON
/// array, or its non-blank lines (JSON Lines); `None` when the bytes are neither (a string or a
/// bracket left open). Only strings and brackets are followed: the JSON of each piece is
/// checked when it is read.
fn conversations(source: &[u8]) -> Option<Vec<std::ops::Range<usize>>> {
    let body = if source.starts_with(b"\xEF\xBB\xBF") { 3 } else { 0 };
    let start = body + source[body..].iter().position(|b| !b.is_ascii_whitespace())?;
    let mut pieces = Vec::new();
    if source[start] != b'[' {
        let mut at = body;
        for line in source[body..].split(|&b| b == b'\n') {
            if !line.iter().all(u8::is_ascii_whitespace) {
                pieces.push(at..at + line.len());
            }
            at += line.len() + 1;
        }
        return Some(pieces);
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let mut from = start + 1;
    for (at, &b) in source.iter().enumerate().skip(start) {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => depth += 1,
            b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    let piece = trimmed(source, from..at);
                    if !piece.is_empty() {
                        pieces.push(piece);
                    }
                    return source[at + 1..].iter().all(u8::is_ascii_whitespace).then_some(pieces);
                }
            }
            b',' if depth == 1 => {
                pieces.push(trimmed(source, from..at));
                from = at + 1;
            }
            _ => {}
        }
    }
    None
}

/// `range` without the whitespace at either end.
fn trimmed(source: &[u8], range: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let text = &source[range.clone()];
    let Some(first) = text.iter().position(|b| !b.is_ascii_whitespace()) else {
        return range.start..range.start;
    };
    let last = text.iter().rposition(|b| !b.is_ascii_whitespace()).unwrap_or(first);
    range.start + first..range.start + last + 1
}

/// The figures of one conversation under every configuration, replayed on all cores (this
/// thread and the [`Replayers`]); an error when the hook's counter could not count (a
/// provider's, with --counter PROVIDER): the first configuration's, in the grid's order.
fn replay_all(
    unit: &Arc<Unit>,
    grid: &[Configuration],
    pricing: &Pricing,
    window: usize,
    replayers: &Replayers,
) -> Result<Vec<ResultRow>, compaction_hook::Error> {
    #[cfg(test)]
    let _replaying = tests::Replaying::enter();
    let count = unit.configurations.len();
    let mut results: Vec<Option<Result<Figures, compaction_hook::Error>>> =
        (0..count).map(|_| None).collect();
    // The first configuration is replayed here, for `none`'s figures (below); the others by
    // whichever thread takes them first.
    let (done_tx, done_rx) = mpsc::channel();
    for _ in 0..replayers.helpers.min(count.saturating_sub(1)) {
        // A replayer that has stopped leaves its share to this thread.
        let _ = replayers.jobs.send(Job { unit: Arc::clone(unit), done: done_tx.clone() });
    }
    drop(done_tx);
    let mut baseline: Option<Vec<Step>> = None;
    if let Some(&first) = unit.configurations.first() {
        let replayed = replay_one(unit, &grid[first]);
        results[0] = Some(replayed.map(|steps| figures(baseline.insert(steps), true, pricing, window)));
    }
    while let Some(k) = unit.take() {
        results[k] = Some(
            replay_one(unit, &grid[unit.configurations[k]])
                .map(|steps| figures(&steps, true, pricing, window)),
        );
    }
    for (k, result) in done_rx {
        results[k] = Some(result);
    }
    let mut rows = Vec::with_capacity(count + 1);
    for (k, result) in results.into_iter().enumerate() {
        let configuration = &grid[unit.configurations[k]];
        // Every configuration was taken by a thread, which sent its figures unless it panicked.
        let Some(figures) = result else {
            panic!("the replay of {} panicked (its message is above)", configuration.name)
        };
        rows.push(ResultRow { configuration: configuration.name.clone(), figures: figures? });
    }
    // `none`: the calls as recorded, from the first replay's figures without compaction (they
    // do not depend on the compactor), or from a replay that never compacts.
    let steps = match baseline {
        Some(steps) => steps,
        None => {
            let settings = CompactionHookSettings::new(1 << 40);
            match CompactionHook::new(Box::new(compaction_core::ChainCompactor::new()), settings) {
                Ok(hook) => replay_with(unit, &hook)?,
                Err(_) => Vec::new(),
            }
        }
    };
    rows.insert(
        0,
        ResultRow { configuration: "none".into(), figures: figures(&steps, false, pricing, window) },
    );
    Ok(rows)
}

/// The steps of one configuration's replay of `unit`'s conversation (`configuration` has a
/// hook; with none, no steps).
fn replay_one(unit: &Unit, configuration: &Configuration) -> Result<Vec<Step>, compaction_hook::Error> {
    let hook = match (&configuration.hook, &configuration.hook_one_hour, unit.one_hour) {
        (_, Some(longer), true) => longer,
        (Some(hook), _, _) => hook,
        (None, _, _) => return Ok(Vec::new()),
    };
    replay_with(unit, hook)
}

/// The steps of `hook`'s replay of `unit`'s conversation.
fn replay_with(unit: &Unit, hook: &CompactionHook) -> Result<Vec<Step>, compaction_hook::Error> {
    let conversation = &unit.conversation;
    let replay = Replay::new(hook).with_tools(conversation.tools.clone());
    let recording = Recording::new(&conversation.messages)
        .with_calls(&unit.calls)
        .with_provider_compactions(&unit.compacted_at);
    Ok(replay.run(recording, &mut || {})?.steps)
}

/// One replay's figures: with compaction, or (`with` false) as recorded.
fn figures(steps: &[Step], with: bool, pricing: &Pricing, window: usize) -> Figures {
    let size = |s: &Step| if with { s.with } else { s.without };
    let calls = if with { Call::with_compaction(steps) } else { Call::without_compaction(steps) };
    let cost = compaction_replay::estimate(&calls, pricing).ok();
    let recorded = compaction_replay::recorded(&Call::as_recorded(steps), pricing).and_then(Result::ok);
    let last = steps.last().filter(|_| with);
    Figures {
        calls: steps.len(),
        peak_tokens: steps.iter().map(size).max().unwrap_or(0),
        over_window: steps.iter().filter(|s| size(s) > window).count(),
        tokens_sent: steps.iter().map(|s| size(s) as u64).sum(),
        uncached_tokens: cost.as_ref().map(|c| c.uncached),
        cache_read_tokens: cost.as_ref().map(|c| c.cache_read),
        cache_write_tokens: cost.as_ref().map(|c| c.cache_write),
        output_tokens: cost.as_ref().map(|c| c.output),
        cost: cost.as_ref().map(|c| c.dollars),
        recorded_cost: recorded.map(|c| c.dollars),
        recorded_modelled: compaction_replay::estimate(&Call::as_recorded(steps), pricing)
            .ok()
            .map(|c| c.dollars),
        provider_compacted: steps.iter().any(|s| s.after_provider_compaction),
        compactions: if with { steps.iter().filter(|s| s.compacted).count() } else { 0 },
        refetches: last.map_or(0, |s| s.refetches),
        refetch_tokens: last.map_or(0, |s| s.refetch_tokens),
    }
}

/// A configuration's figures over every transcript benchmarked.
#[derive(Debug, Serialize)]
struct Total {
    configuration: String,
    transcripts: usize,
    /// The sums (the peak: the largest).
    #[serde(flatten)]
    figures: Figures,
    median_tokens_sent: u64,
    median_cost: Option<f64>,
    /// The median over transcripts of each one's tokens sent against its own `none`.
    median_tokens_vs_none: Option<f64>,
    /// The median over transcripts of each one's cost against its own `none`.
    median_cost_vs_none: Option<f64>,
    /// Tokens sent against `none`: -0.42 sends 42% fewer.
    tokens_vs_none: Option<f64>,
    /// Cost against `none`, over the transcripts priced in both.
    cost_vs_none: Option<f64>,
    /// Tokens sent against `none` over the same transcripts as `cost_vs_none` (those priced).
    priced_tokens_vs_none: Option<f64>,
}

/// The transcripts' figures folded in as they come, in order: for each configuration the sums
/// and what its medians are taken of (four numbers a transcript), and the transcripts
/// themselves only when kept for the files that list them.
struct Tally {
    keep: bool,
    /// Every transcript, in order, when kept.
    transcripts: Vec<Transcript>,
    /// Why each transcript that failed did, in order.
    errors: Vec<String>,
    benchmarked: usize,
    /// Transcripts benchmarked without a cost (no known model).
    unpriced: usize,
    recorded: Option<Recorded>,
    columns: Vec<Column>,
}

/// One configuration's share of a [`Tally`].
#[derive(Default)]
struct Column {
    /// Transcripts with a figure for it.
    rows: usize,
    sum: Figures,
    tokens: Vec<u64>,
    costs: Vec<f64>,
    /// Each transcript's tokens sent and cost against its own `none`, where both are above 0.
    token_ratios: Vec<f64>,
    cost_ratios: Vec<f64>,
    /// Tokens sent, and `none`'s, over the transcripts priced in both.
    priced: (u64, u64),
}

impl Tally {
    fn new(configurations: usize, keep: bool) -> Tally {
        Tally {
            keep,
            transcripts: Vec::new(),
            errors: Vec::new(),
            benchmarked: 0,
            unpriced: 0,
            recorded: None,
            columns: (0..configurations).map(|_| Column::default()).collect(),
        }
    }

    /// Folds in the next transcript (in the order of the inputs).
    fn add(&mut self, transcript: Transcript) {
        match &transcript.error {
            Some(error) => self.errors.push(error.clone()),
            None => self.benchmarked += 1,
        }
        let none = transcript.results.first().map(|r| &r.figures);
        if transcript.error.is_none() && none.is_some_and(|none| none.cost.is_none()) {
            self.unpriced += 1;
        }
        // What the logs record against `none`'s estimate, over the transcripts that have both.
        if let Some(none) = none {
            if let (Some(logged), Some(modelled), Some(estimated)) =
                (none.recorded_cost, none.recorded_modelled, none.cost)
            {
                let recorded = self.recorded.get_or_insert(Recorded {
                    transcripts: 0,
                    logged: 0.0,
                    modelled: 0.0,
                    estimated: 0.0,
                    provider_compacted: 0,
                });
                recorded.transcripts += 1;
                recorded.logged += logged;
                recorded.modelled += modelled;
                recorded.estimated += estimated;
                recorded.provider_compacted += usize::from(none.provider_compacted);
            }
        }
        let ratio = |a: f64, b: f64| (b > 0.0).then(|| a / b - 1.0);
        for (column, row) in self.columns.iter_mut().zip(&transcript.results) {
            let f = &row.figures;
            column.rows += 1;
            column.sum.add(f);
            column.tokens.push(f.tokens_sent);
            column.costs.extend(f.cost);
            let Some(none) = none else { continue };
            column.token_ratios.extend(ratio(f.tokens_sent as f64, none.tokens_sent as f64));
            if let (Some(cost), Some(base)) = (f.cost, none.cost) {
                column.cost_ratios.extend(ratio(cost, base));
                column.priced.0 += f.tokens_sent;
                column.priced.1 += none.tokens_sent;
            }
        }
        if self.keep {
            self.transcripts.push(transcript);
        }
    }

    /// The totals per configuration, and the transcripts kept.
    fn finish(self, grid: &[Configuration]) -> (Vec<Total>, Vec<Transcript>) {
        let ratio = |a: f64, b: f64| (b > 0.0).then(|| a / b - 1.0);
        let mut totals: Vec<Total> = Vec::new();
        for (configuration, mut column) in grid.iter().zip(self.columns) {
            column.tokens.sort_unstable();
            column.costs.sort_by(f64::total_cmp);
            column.token_ratios.sort_by(f64::total_cmp);
            column.cost_ratios.sort_by(f64::total_cmp);
            let sum = column.sum;
            let (tokens_vs_none, cost_vs_none) = match totals.first() {
                Some(none) => {
                    let tokens = (none.figures.tokens_sent > 0)
                        .then(|| sum.tokens_sent as f64 / none.figures.tokens_sent as f64 - 1.0);
                    let cost = match (sum.cost, none.figures.cost) {
                        (Some(c), Some(n)) if n > 0.0 => Some(c / n - 1.0),
                        _ => None,
                    };
                    (tokens, cost)
                }
                None => (Some(0.0), sum.cost.map(|_| 0.0)),
            };
            totals.push(Total {
                configuration: configuration.name.clone(),
                transcripts: column.rows,
                figures: sum,
                median_tokens_sent: median(&column.tokens).unwrap_or(0),
                median_cost: median(&column.costs),
                median_tokens_vs_none: median(&column.token_ratios),
                median_cost_vs_none: median(&column.cost_ratios),
                tokens_vs_none,
                cost_vs_none,
                priced_tokens_vs_none: ratio(column.priced.0 as f64, column.priced.1 as f64),
            });
        }
        (totals, self.transcripts)
    }
}

impl Figures {
    /// Adds `f` to these sums (the peak: the larger).
    fn add(&mut self, f: &Figures) {
        let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        let add_f = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        self.calls += f.calls;
        self.peak_tokens = self.peak_tokens.max(f.peak_tokens);
        self.over_window += f.over_window;
        self.tokens_sent += f.tokens_sent;
        self.uncached_tokens = add(self.uncached_tokens, f.uncached_tokens);
        self.cache_read_tokens = add(self.cache_read_tokens, f.cache_read_tokens);
        self.cache_write_tokens = add(self.cache_write_tokens, f.cache_write_tokens);
        self.output_tokens = add(self.output_tokens, f.output_tokens);
        self.cost = add_f(self.cost, f.cost);
        self.recorded_cost = add_f(self.recorded_cost, f.recorded_cost);
        self.compactions += f.compactions;
        self.refetches += f.refetches;
        self.refetch_tokens += f.refetch_tokens;
    }
}

/// What the logs record against `none`'s estimate, over the transcripts that have both.
struct Recorded {
    transcripts: usize,
    logged: f64,
    /// The same calls priced by the cache model.
    modelled: f64,
    estimated: f64,
    /// How many of the transcripts the provider compacted.
    provider_compacted: usize,
}

/// The middle value (the upper of the two middle ones), `None` of nothing.
fn median<T: Copy>(sorted: &[T]) -> Option<T> {
    sorted.get(sorted.len() / 2).copied()
}

fn dollars(d: Option<f64>) -> String {
    match d {
        Some(d) if d >= 1.0 => format!("{d:.2}"),
        Some(d) => format!("{d:.4}"),
        None => "-".into(),
    }
}

/// The terminal table, the counts, the logs' own cost beside the estimate, and a line for each
/// configuration that saves tokens but costs more.
fn table(
    grid: &[Configuration],
    totals: &[Total],
    benchmarked: usize,
    failed: usize,
    cached: bool,
    recorded: Option<Recorded>,
    unpriced: usize,
) -> String {
    let header = [
        "configuration",
        "calls",
        "over window",
        "tokens sent",
        "vs none",
        "median tokens",
        "cost $",
        "vs none",
        "median cost $",
        "recorded $",
        "compactions",
        "refetches",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|h| (*h).to_owned()).collect()];
    for t in totals {
        let f = &t.figures;
        rows.push(vec![
            t.configuration.clone(),
            f.calls.to_string(),
            f.over_window.to_string(),
            f.tokens_sent.to_string(),
            signed_percent(t.tokens_vs_none),
            t.median_tokens_sent.to_string(),
            dollars(f.cost),
            signed_percent(t.cost_vs_none),
            dollars(t.median_cost),
            dollars(f.recorded_cost),
            f.compactions.to_string(),
            format!("{} ({} tokens)", f.refetches, f.refetch_tokens),
        ]);
    }
    let mut widths = vec![0; header.len()];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (cell, &w))| if i == 0 { format!("{cell:<w$}") } else { format!("{cell:>w$}") })
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    let _ = writeln!(
        out,
        "\n{benchmarked} transcripts benchmarked, {failed} failed, {} configurations",
        grid.len()
    );
    if unpriced > 0 {
        let _ = writeln!(
            out,
            "cost                 not estimated for {unpriced} of the {benchmarked} transcripts (the cost columns and \
             lines are of the others): the log names no model, or one the price table has no row for \
             (--price-model NAME prices them)"
        );
    }
    // The log's own cost beside `none`'s estimate, over the transcripts whose logs record usage.
    if let Some(recorded) = recorded {
        let _ = writeln!(
            out,
            "recorded cost        ${} over the {} transcripts whose logs record usage; the same calls priced by the \
             model ${} ({}); none's estimate for them ${} ({})",
            dollars(Some(recorded.logged)),
            recorded.transcripts,
            dollars(Some(recorded.modelled)),
            signed_percent((recorded.logged > 0.0).then(|| recorded.modelled / recorded.logged - 1.0)),
            dollars(Some(recorded.estimated)),
            signed_percent((recorded.logged > 0.0).then(|| recorded.estimated / recorded.logged - 1.0))
        );
        if recorded.provider_compacted > 0 {
            let _ = writeln!(
                out,
                "note                 the provider compacted the recorded conversation in {} of them: the log's cost is \
                 of the compacted conversation, none's of the same conversation uncompacted",
                recorded.provider_compacted
            );
        }
    }
    let with_cache = if cached { "with the prompt cache" } else { "without a prompt cache" };
    for t in totals.iter().skip(1) {
        // Tokens and cost over the same transcripts: those priced.
        if let (Some(tokens), Some(cost)) = (t.priced_tokens_vs_none, t.cost_vs_none) {
            if tokens < 0.0 && cost > 0.0 {
                let _ = writeln!(
                    out,
                    "{}: saves {:.1}% of tokens but costs {:.1}% more {with_cache}",
                    t.configuration,
                    -100.0 * tokens,
                    100.0 * cost
                );
            }
        }
    }
    out
}

/// One row per transcript and configuration, with a header.
fn csv(transcripts: &[Transcript]) -> String {
    let mut out = String::from(
        "path,conversation,format,error,configuration,calls,peak_tokens,over_window,tokens_sent,uncached_tokens,\
         cache_read_tokens,cache_write_tokens,output_tokens,cost,recorded_cost,compactions,refetches,refetch_tokens\n",
    );
    let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
    let money = |v: Option<f64>| v.map(|v| format!("{v:.6}")).unwrap_or_default();
    for t in transcripts {
        let conversation = t.conversation.map(|c| c.to_string()).unwrap_or_default();
        let head = format!(
            "{},{conversation},{},{}",
            quote(&t.path),
            t.format.as_deref().unwrap_or_default(),
            quote(t.error.as_deref().unwrap_or_default())
        );
        if t.results.is_empty() {
            let _ = writeln!(out, "{head},,,,,,,,,,,,,,");
        }
        for r in &t.results {
            let f = &r.figures;
            let _ = writeln!(
                out,
                "{head},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                quote(&r.configuration),
                f.calls,
                f.peak_tokens,
                f.over_window,
                f.tokens_sent,
                opt(f.uncached_tokens),
                opt(f.cache_read_tokens),
                opt(f.cache_write_tokens),
                opt(f.output_tokens),
                money(f.cost),
                money(f.recorded_cost),
                f.compactions,
                f.refetches,
                f.refetch_tokens
            );
        }
    }
    out
}

/// A CSV field, quoted when it holds a comma, a quote or a line break.
fn quote(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_owned()
    }
}

const PALETTE: [plotters::style::RGBColor; 8] = [
    plotters::style::RGBColor(80, 80, 80),
    plotters::style::RGBColor(31, 119, 180),
    plotters::style::RGBColor(214, 39, 40),
    plotters::style::RGBColor(44, 160, 44),
    plotters::style::RGBColor(255, 127, 14),
    plotters::style::RGBColor(148, 103, 189),
    plotters::style::RGBColor(140, 86, 75),
    plotters::style::RGBColor(227, 119, 194),
];

/// The `--svg` chart: each configuration's cost against its tokens sent, both as a change
/// against `none` (in %), over all transcripts (a large dot, labelled) and per transcript (small
/// dots, the spread); the cheapest configuration over all is ringed. Transcripts without a cost
/// (no known model) are left out.
fn chart(totals: &[Total], transcripts: &[Transcript]) -> Result<String> {
    use plotters::prelude::*;
    let mut points: Vec<Vec<(f64, f64)>> = vec![Vec::new(); totals.len()];
    for t in transcripts {
        let Some(none) = t.results.first().map(|r| &r.figures) else { continue };
        for (k, r) in t.results.iter().enumerate() {
            let f = &r.figures;
            if let (Some(cost), Some(base)) = (f.cost, none.cost) {
                if base > 0.0 && none.tokens_sent > 0 {
                    let tokens = 100.0 * (f.tokens_sent as f64 / none.tokens_sent as f64 - 1.0);
                    points[k].push((tokens, 100.0 * (cost / base - 1.0)));
                }
            }
        }
    }
    let totals_at: Vec<Option<(f64, f64)>> =
        totals.iter().map(|t| Some((100.0 * t.tokens_vs_none?, 100.0 * t.cost_vs_none?))).collect();
    let cheapest = totals
        .iter()
        .enumerate()
        .filter_map(|(k, t)| Some((k, t.figures.cost?)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(k, _)| k);
    let all = points.iter().flatten().copied().chain(totals_at.iter().flatten().copied());
    let (mut x0, mut x1, mut y0, mut y1) = (-10.0f64, 10.0f64, -10.0f64, 10.0f64);
    for (x, y) in all {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    let pad = |a: f64, b: f64| (b - a) * 0.08;
    let (px, py) = (pad(x0, x1), pad(y0, y1));
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (1000, 700)).into_drawing_area();
        let drawn = (|| -> Result<(), Box<dyn std::error::Error>> {
            root.fill(&WHITE)?;
            let root = root.titled("cost against tokens sent, each against none", ("sans-serif", 22))?;
            let mut context = ChartBuilder::on(&root)
                .margin(20)
                .x_label_area_size(50)
                .y_label_area_size(70)
                .build_cartesian_2d((x0 - px)..(x1 + px), (y0 - py)..(y1 + py))?;
            context
                .configure_mesh()
                .x_desc("tokens sent against none (%)")
                .y_desc("cost against none, with the prompt cache (%)")
                .axis_desc_style(("sans-serif", 16))
                .label_style(("sans-serif", 14))
                .light_line_style(TRANSPARENT)
                .bold_line_style(RGBColor(225, 225, 225))
                .draw()?;
            let axis = RGBColor(160, 160, 160);
            context.draw_series(LineSeries::new([(x0 - px, 0.0), (x1 + px, 0.0)], axis))?;
            context.draw_series(LineSeries::new([(0.0, y0 - py), (0.0, y1 + py)], axis))?;
            for (k, t) in totals.iter().enumerate() {
                let color = PALETTE[k % PALETTE.len()];
                context
                    .draw_series(points[k].iter().map(|&p| Circle::new(p, 3, color.mix(0.35).filled())))?;
                if let Some(p) = totals_at[k] {
                    context.draw_series([Circle::new(p, 7, color.filled())])?;
                    let label = if cheapest == Some(k) {
                        context.draw_series([Circle::new(p, 13, color.stroke_width(2))])?;
                        format!("{} (cheapest)", t.configuration)
                    } else {
                        t.configuration.clone()
                    };
                    context.draw_series([Text::new(
                        label,
                        p,
                        ("sans-serif", 14).into_font().color(&color),
                    )])?;
                }
            }
            root.present()?;
            Ok(())
        })();
        drawn.map_err(|e| anyhow::anyhow!("drawing the chart: {e}"))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::{conversations, line_spans, Figures, ResultRow, Tally, Transcript};

    /// How many conversations are being replayed at once, and the most that ever were.
    static REPLAYING: AtomicUsize = AtomicUsize::new(0);
    static MOST_REPLAYING: AtomicUsize = AtomicUsize::new(0);

    /// A conversation being replayed, counted in [`REPLAYING`] while it lives.
    pub(super) struct Replaying;

    impl Replaying {
        pub(super) fn enter() -> Replaying {
            let now = REPLAYING.fetch_add(1, Ordering::SeqCst) + 1;
            MOST_REPLAYING.fetch_max(now, Ordering::SeqCst);
            Replaying
        }
    }

    impl Drop for Replaying {
        fn drop(&mut self) {
            REPLAYING.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// A dataset is benchmarked one transcript at a time, each one's configurations on all
    /// cores: memory follows the largest transcript, not the largest times the cores. Each
    /// case: the lines of the dataset and their tool steps.
    #[test]
    fn one_transcript_is_replayed_at_a_time_on_all_cores() {
        for (lines, steps) in [(1, 3), (40, 12), (7, 1)] {
            let dir = tempfile::tempdir().expect("a folder");
            let path = dir.path().join("dataset.jsonl");
            let mut text = String::new();
            for line in 0..lines {
                let mut messages =
                    vec![serde_json::json!({"role": "user", "content": format!("task {line}")})];
                for step in 0..steps {
                    let id = format!("call_{step}");
                    messages.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
                        {"id": id, "type": "function", "function": {"name": "bash", "arguments": format!("{{\"cmd\": \"cat f{step}\"}}")}}
                    ]}));
                    let output = format!("line {step} of the output\n").repeat(200);
                    messages.push(serde_json::json!({"role": "tool", "tool_call_id": id, "content": output}));
                }
                messages.push(serde_json::json!({"role": "assistant", "content": "done"}));
                text += &serde_json::json!({"messages": messages}).to_string();
                text.push('\n');
            }
            std::fs::write(&path, text).expect("the dataset");
            let args = clap_args(&[
                "--context-window",
                "4000",
                "--counter",
                "approximate",
                "--strategy",
                "tool-result-pruning,observation-masking,sliding-window",
                "--set",
                "min_tokens=0,200",
            ]);
            let base =
                super::Base { prune: &args.prune, hook: &args.hook, cache: args.cost.cache.as_deref() };
            let grid = super::configurations(&args.strategy, &args.sets, &base).expect("a grid");
            let pricing = args.cost.pricing().expect("the prices");
            let inputs = [path];
            let walking = super::Walking { inputs: &inputs, jsonl: true, column: None };
            let reading = super::Reading { format: None, full_history: false, window: 4000 };
            MOST_REPLAYING.store(0, Ordering::SeqCst);
            let (tally, skipped) = super::bench_all(&walking, &reading, &grid, &pricing, true);
            assert_eq!((tally.benchmarked, tally.errors.len(), skipped), (lines, 0, 0), "{lines} lines");
            assert_eq!(MOST_REPLAYING.load(Ordering::SeqCst), 1, "{lines} lines");
            let (totals, transcripts) = tally.finish(&grid);
            // Every configuration of every line, in the grid's order.
            let names: Vec<&str> = grid.iter().map(|c| c.name.as_str()).collect();
            for t in &transcripts {
                let got: Vec<&str> = t.results.iter().map(|r| r.configuration.as_str()).collect();
                assert_eq!(got, names);
            }
            assert_eq!(totals[0].figures.calls, lines * (steps + 1));
            // Long enough to be compacted, they are.
            if steps > 3 {
                assert!(totals[1].figures.tokens_sent < totals[0].figures.tokens_sent, "{lines} lines");
            }
        }
    }

    /// A transcript of these (tokens sent, cost) per configuration, `none` first; failed when
    /// there are none.
    fn transcript(figures: &[(u64, Option<f64>)]) -> Transcript {
        let results = figures
            .iter()
            .enumerate()
            .map(|(k, &(tokens_sent, cost))| ResultRow {
                configuration: format!("c{k}"),
                figures: Figures {
                    calls: 2,
                    tokens_sent,
                    cost,
                    recorded_cost: cost.map(|c| c * 0.9),
                    recorded_modelled: cost,
                    ..Figures::default()
                },
            })
            .collect();
        let error = figures.is_empty().then(|| "t.jsonl:3: not JSON".to_owned());
        Transcript { path: "t.jsonl".into(), conversation: Some(0), format: None, error, results }
    }

    /// The totals are the same whether the transcripts are kept (for --json, --csv, --svg) or
    /// only folded in; folded in, none is held.
    #[test]
    fn totals_are_the_same_without_the_transcripts_held() {
        let cases: &[&[(u64, Option<f64>)]] = &[
            &[(1000, Some(1.0)), (400, Some(1.2)), (300, Some(0.7))],
            &[],
            &[(10, None), (5, None), (0, None)],
            &[(0, Some(0.0)), (0, Some(0.0)), (0, Some(0.0))],
            &[(5000, Some(3.5)), (2500, Some(1.1)), (5000, Some(3.5))],
            &[(7, Some(0.01)), (3, Some(0.02)), (1, Some(0.005))],
        ];
        let args =
            clap_args(&["--context-window", "1000", "--strategy", "tool-result-pruning,sliding-window"]);
        let base = super::Base { prune: &args.prune, hook: &args.hook, cache: args.cost.cache.as_deref() };
        let grid = super::configurations(&args.strategy, &args.sets, &base).expect("a grid");
        assert_eq!(grid.len(), 3);
        let (mut kept, mut folded) = (Tally::new(grid.len(), true), Tally::new(grid.len(), false));
        for case in cases {
            kept.add(transcript(case));
            folded.add(transcript(case));
        }
        assert_eq!(
            (kept.benchmarked, kept.unpriced, &kept.errors),
            (5, 1, &vec!["t.jsonl:3: not JSON".to_owned()])
        );
        assert_eq!((folded.benchmarked, folded.unpriced, &folded.errors), (5, 1, &kept.errors));
        let recorded = |t: &mut Tally| {
            t.recorded
                .take()
                .map(|r| (r.transcripts, r.logged, r.modelled, r.estimated, r.provider_compacted))
        };
        assert_eq!(recorded(&mut kept), recorded(&mut folded));
        let (kept_totals, kept) = kept.finish(&grid);
        let (folded_totals, folded) = folded.finish(&grid);
        assert_eq!(kept.len(), cases.len());
        assert!(folded.is_empty());
        let json = |t| serde_json::to_string(t).expect("JSON");
        assert_eq!(json(&kept_totals), json(&folded_totals));
        // `none`'s median of 5 transcripts' tokens sent (0, 7, 10, 1000, 5000), and a sum.
        assert_eq!(kept_totals[0].median_tokens_sent, 10);
        assert_eq!(kept_totals[1].figures.tokens_sent, 400 + 5 + 2500 + 3);
    }

    fn clap_args(args: &[&str]) -> super::Args {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: super::Args,
        }
        let all = ["bench", "x.jsonl"].iter().chain(args);
        Cli::try_parse_from(all).expect("arguments").args
    }

    /// Each case: a JSON Lines file, and the lines `line_spans` gives (number, text), read
    /// through buffers of every size from one byte, so a line crosses buffers.
    #[test]
    fn lines_are_found_where_they_are_whatever_the_buffer() {
        let cases: &[(&str, &[(usize, &str)])] = &[
            ("", &[]),
            ("a", &[(0, "a")]),
            ("a\n", &[(0, "a")]),
            ("a\n\n  \n\tb\r\n c", &[(0, "a"), (3, "\tb\r"), (4, " c")]),
            (" \n\r\n", &[]),
            ("{}\n{\"x\": 1}\n", &[(0, "{}"), (1, "{\"x\": 1}")]),
        ];
        for (text, expected) in cases {
            for capacity in 1..=text.len().max(1) + 1 {
                let mut found = Vec::new();
                let reader = std::io::BufReader::with_capacity(capacity, text.as_bytes());
                line_spans(reader, |line, at, len| {
                    found.push((line, &text[at as usize..at as usize + len]));
                    true
                })
                .unwrap();
                assert_eq!(&found, expected, "{text:?} through a buffer of {capacity}");
            }
        }
    }

    /// Each case: the file, and the pieces it is cut into (`None`: not cut).
    #[test]
    fn a_file_of_conversations_is_cut_into_its_elements_or_lines() {
        let cases: [(&str, Option<&[&str]>); 8] = [
            ("[{\"a\": [1, 2]}, {\"b\": \"],{\\\"\"}]", Some(&["{\"a\": [1, 2]}", "{\"b\": \"],{\\\"\"}"])),
            ("\u{feff} [ {\"a\":1} ,\n {\"b\":2} ]\n", Some(&["{\"a\":1}", "{\"b\":2}"])),
            ("[]", Some(&[])),
            ("{\"a\":1}\n\n{\"b\":[2]}\n", Some(&["{\"a\":1}", "{\"b\":[2]}"])),
            ("[{\"a\":1}", None),
            ("[{\"a\":1}]]", None),
            ("[{\"a\":1}] x", None),
            ("[\"open", None),
        ];
        for (file, want) in cases {
            let got = conversations(file.as_bytes())
                .map(|pieces| pieces.into_iter().map(|r| &file[r]).collect::<Vec<_>>());
            assert_eq!(got.as_deref(), want, "{file:?}");
        }
    }
}
