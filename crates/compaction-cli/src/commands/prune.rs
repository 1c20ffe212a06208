//! `compaction prune`: replace old, large tool results with a short placeholder.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use compaction_core::{Compaction, CompactionReport, Compactor, PruningSettings, ToolResultPruningCompactor};
use serde_json::{json, Value};

use crate::formats::{self, Target};
use crate::input::InputArgs;
use crate::UsageError;

/// Prune old tool results until the conversation fits a token target.
///
/// Results are replaced oldest first with a placeholder, keeping every tool call paired with its
/// result, until the conversation is at or under --target-tokens; the results of the most recent
/// steps are never touched. The conversation is written in the input's format (or --to), and
/// unchanged, byte for byte, when nothing was pruned.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    compaction prune session.json --target-tokens 50000 -o pruned.json --report report.json\n  \
    compaction prune run.traj --target-tokens 20000 --counter tiktoken:gpt-4o --exclude-tools memory --dry-run")]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,
    /// Where to write the conversation; standard output when absent. Written atomically.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// The format to write; the input's when absent.
    #[arg(long, value_enum)]
    pub to: Option<Target>,
    /// Prune until the conversation is at or under this many tokens.
    #[arg(long, value_name = "N")]
    pub target_tokens: usize,
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
    let compactor = args.prune.compactor()?;
    let counter = super::counter(&args.counter)?;
    let input = args.input.read_timed()?;
    let conversation = &input.conversation;
    let messages = &conversation.messages;

    let spinner = crate::progress::spinner("pruning");
    let started = Instant::now();
    let (compaction, report) = if args.dry_run {
        (None, compactor.plan(messages, args.target_tokens, counter.as_ref()))
    } else {
        let compaction = compactor.compact(messages, args.target_tokens, counter.as_ref());
        let report = compaction.as_ref().map(|c: &Compaction| c.report.clone());
        (compaction, report)
    };
    let compact_time = started.elapsed();
    spinner.finish_and_clear();

    let started = Instant::now();
    if !args.dry_run {
        let target = args.to.unwrap_or_else(|| conversation.format.default_target());
        let bytes = match &compaction {
            Some(compaction) => formats::write(conversation, &compaction.messages(messages), target)?,
            None if args.to.is_none() => input.bytes.clone(),
            None => formats::write(conversation, messages, target)?,
        };
        crate::output::write_output(args.output.as_deref(), &bytes)?;
    }
    let write_time = started.elapsed();

    let tokens_before = report.as_ref().map_or_else(|| counter.count(messages, &[]), |r| r.tokens_before);
    let timings = Timings { read: input.read, parse: input.parse, compact: compact_time, write: write_time };
    let document = report_json(report.as_ref(), tokens_before, args.target_tokens, &timings);
    match (&args.report, args.dry_run) {
        (Some(path), _) => write_report(path, &document)?,
        (None, true) => crate::output::write_output(None, &report_bytes(&document)?)?,
        (None, false) => {}
    }
    Ok(())
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
