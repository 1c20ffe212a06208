//! `compaction.batch`'s Rust half: a column of conversations compacted row by row, on every
//! core, with the GIL released, as `compaction prune` compacts one file.
//!
//! The Python half (`python/compaction/batch.py`) turns the Arrow column into a list of `bytes`
//! (JSON text in any format compaction-formats reads) and the call's settings into JSON; this
//! module reads each row, compacts it with the strategy, counter and settings the CLI's options
//! name, and writes it back in the format read (or `to`). Each row is what `prune` would do to a
//! file holding that row: the same library calls in the same order (the target less what the
//! tools take; the compaction hook with `context_window`), so its `tokens_before`,
//! `tokens_after` and `reached` are those of `prune`'s report, and `tokens_after` is what
//! `compaction count` says of the output. A row that cannot be read, compacted or written gets
//! its error, and the others go on.

use std::num::NonZeroUsize;
use std::ops::Range;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};

use compaction_core::{
    error_chain, ChainCompactor, Compactor, MaskingSettings, ObservationMaskingCompactor, PruningSettings,
    SlidingWindowCompactor, SlidingWindowSettings, ToolResultPruningCompactor,
};
use compaction_formats::{Conversation, Format, ReadOptions, Target};
use compaction_hook::{AgentState, CacheRule, CompactionHook, CompactionHookSettings};
use compaction_model::{parallel, Changes, ToolSpec};
use compaction_tokens::TokenCounter;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};
use serde::Deserialize;

mod bench;

/// A list setting: a comma-separated string, as the CLI's option takes it, or a list.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum List {
    Text(String),
    Items(Vec<String>),
}

impl List {
    fn items(&self) -> Vec<String> {
        match self {
            List::Text(text) => {
                text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
            }
            List::Items(items) => items.clone(),
        }
    }
}

/// The settings `compact` takes beyond its named arguments: the options of `compaction prune`
/// with underscores (those that need no I/O), each `None` when not given.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    format: Option<String>,
    conversation: Option<usize>,
    full_history: Option<bool>,
    to: Option<String>,
    tools: Option<Vec<ToolSpec>>,
    compact_at: Option<f64>,
    compact_to: Option<f64>,
    context_tokens: Option<usize>,
    cache_aware: Option<bool>,
    expected_calls: Option<usize>,
    min_keep_steps: Option<usize>,
    min_tokens: Option<usize>,
    placeholder: Option<String>,
    skip_meta_keys: Option<List>,
    exclude_tools: Option<List>,
    clear_at_least: Option<usize>,
    clear_tool_inputs: Option<bool>,
    keep_tool_results: Option<usize>,
    preview_ends: Option<usize>,
    omission_note: Option<String>,
    keep_observations: Option<usize>,
    polling: Option<usize>,
}

/// One strategy of `--strategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Pruning,
    SlidingWindow,
    ObservationMasking,
}

impl Stage {
    fn parse(name: &str) -> Result<Stage, String> {
        match name {
            "tool-result-pruning" => Ok(Stage::Pruning),
            "sliding-window" => Ok(Stage::SlidingWindow),
            "observation-masking" => Ok(Stage::ObservationMasking),
            "summarization" | "offload" => Err(format!(
                "strategy {name:?} is not available in a batch (it asks a model or writes files for each \
                 row): use compaction prune; expected tool-result-pruning, sliding-window, \
                 observation-masking or chain:A,B,... of those"
            )),
            other => Err(format!(
                "unknown strategy {other:?}; expected tool-result-pruning, sliding-window, \
                 observation-masking or chain:A,B,... of those"
            )),
        }
    }
}

/// Everything a row is compacted with, checked once for the whole batch.
#[derive(Debug)]
struct Plan {
    stages: Vec<Stage>,
    chain: bool,
    pruning: PruningSettings,
    window: SlidingWindowSettings,
    masking: MaskingSettings,
    goal: Goal,
    counter: Arc<dyn TokenCounter>,
    format: Option<Format>,
    conversation: Option<usize>,
    full_history: bool,
    to: Option<Target>,
    tools: Option<Vec<ToolSpec>>,
}

/// `--target-tokens N` or `--context-window N` with the hook's settings.
#[derive(Debug)]
enum Goal {
    Target(usize),
    Window { settings: CompactionHookSettings, budget: usize, context_tokens: Option<usize> },
}

impl Plan {
    fn new(
        strategy: &str,
        target_tokens: Option<usize>,
        context_window: Option<usize>,
        counter: &str,
        settings: Settings,
    ) -> Result<Plan, String> {
        let (stages, chain) = match strategy.strip_prefix("chain:") {
            Some(list) => {
                (list.split(',').map(|name| Stage::parse(name.trim())).collect::<Result<Vec<_>, _>>()?, true)
            }
            None => (vec![Stage::parse(strategy)?], false),
        };
        let has = |stage: Stage| stages.contains(&stage);
        if settings.omission_note.is_some() && !has(Stage::SlidingWindow) {
            return Err(format!(
                "omission_note is a sliding-window setting, and strategy {strategy:?} has no sliding window"
            ));
        }
        if !has(Stage::ObservationMasking) {
            if let Some(name) =
                [("keep_observations", settings.keep_observations), ("polling", settings.polling)]
                    .iter()
                    .find_map(|(name, given)| given.map(|_| name))
            {
                return Err(format!(
                    "{name} is an observation-masking setting, and strategy {strategy:?} masks no observations"
                ));
            }
        }
        let hook_settings = [
            ("compact_at", settings.compact_at.is_some()),
            ("compact_to", settings.compact_to.is_some()),
            ("context_tokens", settings.context_tokens.is_some()),
            ("cache_aware", settings.cache_aware.is_some()),
            ("expected_calls", settings.expected_calls.is_some()),
        ];
        let goal = match (target_tokens, context_window) {
            (Some(_), Some(_)) => return Err("give target_tokens or context_window, not both".into()),
            (None, None) => return Err("give target_tokens=N or context_window=N".into()),
            (Some(target), None) => {
                if let Some((name, _)) = hook_settings.iter().find(|(_, given)| *given) {
                    return Err(format!("{name} is a setting of the compaction hook: give context_window=N"));
                }
                Goal::Target(target)
            }
            (None, Some(window)) => {
                if settings.expected_calls.is_some() && settings.cache_aware != Some(true) {
                    return Err("expected_calls is a setting of cache_aware=True".into());
                }
                let compact_at = settings.compact_at.unwrap_or(0.7);
                let compact_to = settings.compact_to.unwrap_or(0.4);
                let mut hook = CompactionHookSettings::new(window)
                    .with_compact_at(compact_at)
                    .with_compact_to(compact_to);
                if settings.cache_aware == Some(true) {
                    let rule =
                        CacheRule::default().with_expected_calls(settings.expected_calls.unwrap_or(10));
                    hook = hook.with_cache(rule);
                }
                hook.validate().map_err(|e| error_chain(&e))?;
                // Python: int(window * compact_to), as the CLI computes the hook's target.
                let budget = (window as f64 * compact_to) as usize;
                Goal::Window { settings: hook, budget, context_tokens: settings.context_tokens }
            }
        };
        let mut pruning = PruningSettings::default()
            .with_min_keep_steps(settings.min_keep_steps.unwrap_or(1))
            .with_min_tokens(settings.min_tokens.unwrap_or(200))
            .with_skip_meta_keys(
                settings
                    .skip_meta_keys
                    .map_or_else(|| vec!["tool_result_offloaded".to_owned()], |l| l.items()),
            )
            .with_exclude_tools(settings.exclude_tools.map(|l| l.items()).unwrap_or_default())
            .with_clear_at_least(settings.clear_at_least)
            .with_clear_tool_inputs(settings.clear_tool_inputs.unwrap_or(false))
            .with_keep_tool_results(settings.keep_tool_results)
            .with_preview_chars(settings.preview_ends.unwrap_or(0));
        if let Some(placeholder) = &settings.placeholder {
            pruning = pruning.with_placeholder(placeholder.as_str());
        }
        // Checked here, once, rather than on every row.
        ToolResultPruningCompactor::new(pruning.clone()).map_err(|e| error_chain(&e))?;
        let note = match settings.omission_note {
            None => SlidingWindowSettings::default().omission_note,
            Some(text) if text.is_empty() => None,
            Some(text) => Some(text),
        };
        let window = SlidingWindowSettings::default()
            .with_min_keep_steps(settings.min_keep_steps.unwrap_or(1))
            .with_omission_note(note);
        let mut masking = MaskingSettings::default();
        if let Some(n) = settings.keep_observations {
            masking = masking.with_keep_observations(n);
        }
        if let Some(polling) = settings.polling {
            masking = masking.with_polling(polling);
        }
        ObservationMaskingCompactor::new(masking.clone()).map_err(|e| error_chain(&e))?;
        let counter: Arc<dyn TokenCounter> = compaction_tokens::counter_from_spec(counter)
            .map_err(|e| format!("counter {counter:?}: {}", error_chain(&e)))?
            .into();
        let format =
            settings.format.as_deref().map(str::parse::<Format>).transpose().map_err(|e| e.to_string())?;
        let to = settings.to.as_deref().map(str::parse::<Target>).transpose().map_err(|e| e.to_string())?;
        Ok(Plan {
            stages,
            chain,
            pruning,
            window,
            masking,
            goal,
            counter,
            format,
            conversation: settings.conversation,
            full_history: settings.full_history.unwrap_or(false),
            to,
            tools: settings.tools,
        })
    }

    /// Whether the strategy may drop messages or put new ones in.
    fn rewrites(&self) -> bool {
        self.stages.contains(&Stage::SlidingWindow)
    }

    /// The strategy's compactor (a few settings copied: built for each row).
    fn compactor(&self) -> Result<Box<dyn Compactor>, String> {
        let mut built: Vec<Box<dyn Compactor>> = Vec::with_capacity(self.stages.len());
        for stage in &self.stages {
            built.push(match stage {
                Stage::Pruning => Box::new(
                    ToolResultPruningCompactor::new(self.pruning.clone()).map_err(|e| error_chain(&e))?,
                ),
                Stage::SlidingWindow => Box::new(SlidingWindowCompactor::new(self.window.clone())),
                Stage::ObservationMasking => Box::new(
                    ObservationMaskingCompactor::new(self.masking.clone()).map_err(|e| error_chain(&e))?,
                ),
            });
        }
        match (self.chain, built.pop()) {
            (false, Some(single)) => Ok(single),
            (true, Some(last)) => {
                built.push(last);
                Ok(Box::new(ChainCompactor::from_stages(built)))
            }
            (_, None) => Err("the strategy names no strategy".into()),
        }
    }
}

/// What became of one row.
#[derive(Debug)]
struct Row {
    output: Vec<u8>,
    tokens_before: usize,
    tokens_after: usize,
    reached: Option<bool>,
}

/// Compacts the conversation in `bytes` (row `index`) as `prune` would a file holding it.
fn compact_row(index: usize, bytes: Vec<u8>, plan: &Plan) -> Result<Row, String> {
    let mut options = ReadOptions::named(format!("row {index}")).with_full_history(plan.full_history);
    options.format = plan.format;
    options.conversation = plan.conversation;
    let mut conversation = compaction_formats::read(bytes, &options).map_err(|e| error_chain(&e))?;
    if plan.rewrites() && plan.to.is_none() && !conversation.takes_back_rewrites() {
        return Err(format!(
            "row {index}: the strategy drops messages and puts a note in, which a {} log cannot take back; \
             give to=\"anthropic\", \"openai\" or \"haystack\" to write the compacted conversation in that format",
            conversation.format.label()
        ));
    }
    let counter = plan.counter.as_ref();
    let count_failed = |e: compaction_tokens::Error| format!("row {index}: {}", error_chain(&e));
    let failed = |e: &dyn std::error::Error| format!("row {index}: {}", error_chain(e));
    let tools = plan.tools.clone().unwrap_or_else(|| conversation.tools.clone());
    let context_tokens = match &plan.goal {
        Goal::Window { context_tokens: Some(given), .. } => Some(*given),
        Goal::Window { context_tokens: None, .. } => {
            Some(provider_context_tokens(&conversation, counter).map_err(count_failed)?.unwrap_or(0))
        }
        Goal::Target(_) => None,
    };
    let compactor = plan.compactor()?;
    let mut state = AgentState::new(std::mem::take(&mut conversation.messages)).with_tools(tools);
    let (changes, report, tokens_before, hooked) = match &plan.goal {
        Goal::Target(target) => {
            let counting = state.counting(counter);
            let request = counting.try_count(state.messages(), &state.tools).map_err(count_failed)?;
            let messages_only = match state.tools.is_empty() {
                true => request,
                false => counting.try_count(state.messages(), &[]).map_err(count_failed)?,
            };
            let compactor_target = target.saturating_sub(request.saturating_sub(messages_only));
            let compaction = compactor
                .try_compact(state.messages(), compactor_target, &counting)
                .map_err(|e| failed(&e))?;
            drop(counting);
            match compaction {
                Some(compaction) => {
                    let changes = compaction.changes(state.messages());
                    let report = state.apply(compaction).map_err(|e| failed(&e))?;
                    (changes, Some(report), request, None)
                }
                None => (Changes::none(), None, request, None),
            }
        }
        Goal::Window { settings, budget, .. } => {
            let hook = CompactionHook::new(compactor, *settings)
                .map_err(|e| failed(&e))?
                .with_counter(Box::new(Arc::clone(&plan.counter)));
            state = state.with_context_tokens(context_tokens.unwrap_or(0));
            let before = state.try_count_with_tools(hook.counter()).map_err(count_failed)?;
            let outcome = hook.try_run(&mut state).map_err(|e| failed(&e))?;
            let estimated_after = hook.try_estimate(&state).map_err(|e| failed(&e))?;
            let reached = outcome.triggered.then_some(estimated_after <= *budget);
            let changes = outcome.changes.clone().unwrap_or_else(Changes::none);
            (changes, outcome.report, before, Some(reached))
        }
    };
    let tokens_after = match (&report, state.tools.is_empty()) {
        (None, _) => tokens_before,
        (Some(report), true) => report.tokens_after,
        (Some(_), false) => state.try_count_with_tools(counter).map_err(count_failed)?,
    };
    let reached = match (hooked, &plan.goal) {
        (Some(reached), _) => reached,
        (None, Goal::Target(target)) => Some(tokens_after <= *target),
        (None, Goal::Window { .. }) => None,
    };
    conversation.messages = state.into_messages();
    let output = if changes.is_unchanged() && plan.to.is_none() {
        // Nothing changed and nothing to convert: the row as it was, byte for byte.
        conversation.source().to_vec()
    } else {
        let mut out = Vec::new();
        compaction_formats::write(&conversation, &conversation.messages, plan.to, &changes, &mut out)
            .map_err(|e| failed(&e))?;
        out
    };
    Ok(Row { output, tokens_before, tokens_after, reached })
}

/// The provider's count of the conversation through its last assistant message, as the log
/// records it (the CLI's anchor for the hook's estimate): the last recorded count plus the
/// local count of what follows it. `None` when the log records none.
fn provider_context_tokens(
    conversation: &Conversation,
    counter: &dyn TokenCounter,
) -> Result<Option<usize>, compaction_tokens::Error> {
    let Some(last) = conversation.last_usage() else { return Ok(None) };
    let messages = &conversation.messages;
    let Some(through) = compaction_core::last_assistant_index(messages) else { return Ok(None) };
    let recorded = usize::try_from(last.usage.context_tokens()).unwrap_or(usize::MAX);
    let after = match messages.get(last.message + 1..=through) {
        Some(rest) if !rest.is_empty() => counter.try_count(rest, &[])?,
        _ => 0,
    };
    Ok(Some(recorded + after))
}

/// The rows handed over: a list of `bytes`, `str` or `None`, each copied; or an Arrow binary
/// column's buffers, a tuple of its chunks' `(offsets, data, valid)` (the `int64` offsets of each
/// row of the chunk into its `data`, from 0, and whether each row is not null, `None` when none
/// is), read in place.
#[derive(Debug)]
enum Rows<'py> {
    Copied(Vec<Mutex<Option<Vec<u8>>>>),
    /// Each chunk's data, and each row's chunk and span in it.
    Arrow {
        chunks: Vec<Bound<'py, PyBytes>>,
        spans: Vec<Option<(usize, Range<usize>)>>,
    },
}

/// One chunk of an Arrow column, as handed over: `(offsets, data, valid)`.
type Chunk<'py> = (Bound<'py, PyBytes>, Bound<'py, PyBytes>, Option<Vec<bool>>);

/// The rows as the threads take them, without the GIL.
#[derive(Debug, Clone, Copy)]
enum View<'a> {
    Copied(&'a [Mutex<Option<Vec<u8>>>]),
    Arrow { chunks: &'a [&'a [u8]], spans: &'a [Option<(usize, Range<usize>)>] },
}

impl<'py> Rows<'py> {
    fn from_python(rows: &Bound<'py, PyAny>) -> PyResult<Rows<'py>> {
        if let Ok(list) = rows.cast::<PyList>() {
            return Ok(Rows::Copied(copied(list)?.into_iter().map(Mutex::new).collect()));
        }
        let given: Vec<Chunk<'py>> = rows.extract()?;
        let mut chunks = Vec::with_capacity(given.len());
        let mut spans = Vec::new();
        for (chunk, (offsets, data, valid)) in given.into_iter().enumerate() {
            let bad = |what: &str| {
                PyValueError::new_err(format!(
                    "compaction.batch: the column's buffers (chunk {chunk}) {what}"
                ))
            };
            let offsets: Vec<i64> = offsets
                .as_bytes()
                .chunks_exact(8)
                .map(|b| i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
                .collect();
            let length = offsets.len().saturating_sub(1);
            if valid.as_ref().is_some_and(|valid| valid.len() != length) {
                return Err(bad("give validity for another number of rows than offsets"));
            }
            let size = data.as_bytes().len();
            spans.reserve(length);
            for (index, pair) in offsets.windows(2).enumerate() {
                let (Ok(start), Ok(end)) = (usize::try_from(pair[0]), usize::try_from(pair[1])) else {
                    return Err(bad("hold a negative offset"));
                };
                if start > end || end > size {
                    return Err(bad("hold an offset past the data"));
                }
                let valid = valid.as_ref().is_none_or(|valid| valid[index]);
                spans.push(valid.then_some((chunk, start..end)));
            }
            chunks.push(data);
        }
        Ok(Rows::Arrow { chunks, spans })
    }

    /// The chunks' data, for [`Rows::view`] to borrow.
    fn chunk_data(&self) -> Vec<&[u8]> {
        match self {
            Rows::Copied(_) => Vec::new(),
            Rows::Arrow { chunks, .. } => chunks.iter().map(|chunk| chunk.as_bytes()).collect(),
        }
    }

    fn view<'a>(&'a self, chunks: &'a [&'a [u8]]) -> View<'a> {
        match self {
            Rows::Copied(rows) => View::Copied(rows),
            Rows::Arrow { spans, .. } => View::Arrow { chunks, spans },
        }
    }
}

impl View<'_> {
    fn len(self) -> usize {
        match self {
            View::Copied(rows) => rows.len(),
            View::Arrow { spans, .. } => spans.len(),
        }
    }

    /// Row `index`'s bytes (the reader keeps them: copied once, by the thread that reads them);
    /// `None` for a null row.
    fn take(self, index: usize) -> Option<Vec<u8>> {
        match self {
            View::Copied(rows) => rows[index].lock().unwrap_or_else(PoisonError::into_inner).take(),
            View::Arrow { chunks, spans } => {
                spans[index].clone().map(|(chunk, span)| chunks[chunk][span].to_vec())
            }
        }
    }
}

/// The bytes of each of `rows` (`bytes`, `str` or `None`), copied.
fn copied(rows: &Bound<'_, PyList>) -> PyResult<Vec<Option<Vec<u8>>>> {
    let mut inputs: Vec<Option<Vec<u8>>> = Vec::with_capacity(rows.len());
    for row in rows.iter() {
        inputs.push(if row.is_none() {
            None
        } else if let Ok(bytes) = row.cast::<PyBytes>() {
            Some(bytes.as_bytes().to_vec())
        } else if let Ok(text) = row.cast::<PyString>() {
            Some(text.to_str()?.as_bytes().to_vec())
        } else {
            return Err(PyValueError::new_err(format!(
                "compaction.batch: row {} is a {}, not JSON text (str or bytes)",
                inputs.len(),
                row.get_type().name()?
            )));
        });
    }
    Ok(inputs)
}

/// `work` on each row's bytes, on every core with the GIL released, one row a thread (a row's
/// own reading and counting start no threads of their own); a null row, or one whose work
/// panicked, is an error naming it.
fn each_row<R: Send>(
    py: Python<'_>,
    rows: &Rows<'_>,
    work: impl Fn(usize, Vec<u8>) -> Result<R, String> + Sync,
) -> Vec<Result<R, String>> {
    let chunks = rows.chunk_data();
    let view = rows.view(&chunks);
    let indices: Vec<usize> = (0..view.len()).collect();
    py.detach(|| {
        parallel::map(&indices, |&index| {
            let Some(bytes) = view.take(index) else {
                return Err(format!("row {index}: no conversation (null)"));
            };
            parallel::with_max_threads(NonZeroUsize::MIN, || {
                std::panic::catch_unwind(AssertUnwindSafe(|| work(index, bytes)))
                    .unwrap_or_else(|_| Err(format!("row {index}: failed unexpectedly (a panic)")))
            })
        })
    })
}

/// How `bench` reads each row: `--format` and `--full-history`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadSettings {
    format: Option<String>,
    full_history: Option<bool>,
}

impl ReadSettings {
    fn options(&self) -> Result<ReadOptions, String> {
        let mut options = ReadOptions::named("row").with_full_history(self.full_history.unwrap_or(false));
        options.format =
            self.format.as_deref().map(str::parse::<Format>).transpose().map_err(|e| e.to_string())?;
        Ok(options)
    }
}

/// The columns `compact` returns, each as long as the rows: the compacted conversations as an
/// Arrow binary column's `int64` offsets and data (a failed row empty), tokens before and after,
/// reached, and the row's error.
type Columns = (
    Py<PyBytes>,
    Py<PyBytes>,
    Vec<Option<usize>>,
    Vec<Option<usize>>,
    Vec<Option<bool>>,
    Vec<Option<String>>,
);

/// Compacts each of `rows` (a list of `bytes` or `str` of JSON text, or `None`; or an Arrow
/// binary column's buffers, see [`Rows`]) with `strategy`, the goal (`target_tokens` or
/// `context_window`), the counter spec `counter` and the other settings (`settings_json`, a JSON
/// object of the CLI's options with underscores). Settings that do not fit are a `ValueError`
/// before any row is read; a row's own failure is its error.
#[pyfunction]
#[pyo3(signature = (rows, strategy, target_tokens, context_window, counter, settings_json))]
fn batch_compact(
    py: Python<'_>,
    rows: &Bound<'_, PyAny>,
    strategy: &str,
    target_tokens: Option<usize>,
    context_window: Option<usize>,
    counter: &str,
    settings_json: &str,
) -> PyResult<Columns> {
    let settings: Settings = serde_json::from_str(settings_json)
        .map_err(|e| PyValueError::new_err(format!("compaction.batch.compact: {e}")))?;
    let plan = Plan::new(strategy, target_tokens, context_window, counter, settings)
        .map_err(|e| PyValueError::new_err(format!("compaction.batch.compact: {e}")))?;
    let rows = Rows::from_python(rows)?;
    let done = each_row(py, &rows, |index, bytes| compact_row(index, bytes, &plan));
    drop(rows);
    let mut tokens_before: Vec<Option<usize>> = Vec::new();
    let mut tokens_after: Vec<Option<usize>> = Vec::new();
    let mut reached: Vec<Option<bool>> = Vec::new();
    let mut errors: Vec<Option<String>> = Vec::new();
    let written: Vec<Option<Vec<u8>>> = done
        .into_iter()
        .map(|row| match row {
            Ok(row) => {
                tokens_before.push(Some(row.tokens_before));
                tokens_after.push(Some(row.tokens_after));
                reached.push(row.reached);
                errors.push(None);
                Some(row.output)
            }
            Err(error) => {
                tokens_before.push(None);
                tokens_after.push(None);
                reached.push(None);
                errors.push(Some(error));
                None
            }
        })
        .collect();
    let mut offsets = Vec::with_capacity((written.len() + 1) * 8);
    let mut end = 0usize;
    offsets.extend_from_slice(&0i64.to_le_bytes());
    for output in &written {
        end += output.as_ref().map_or(0, Vec::len);
        offsets.extend_from_slice(&(end as i64).to_le_bytes());
    }
    // The outputs copied once, straight into the `bytes` Python gets.
    let data = PyBytes::new_with(py, end, |buffer| {
        let mut at = 0;
        for output in written.iter().flatten() {
            buffer[at..at + output.len()].copy_from_slice(output);
            at += output.len();
        }
        Ok(())
    })?;
    py.detach(|| drop(written));
    Ok((PyBytes::new(py, &offsets).unbind(), data.unbind(), tokens_before, tokens_after, reached, errors))
}

/// Adds the module's functions to `_native`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(batch_compact, m)?)?;
    m.add_function(wrap_pyfunction!(bench::batch_bench, m)?)
}
