//! `compaction.batch.bench`'s Rust half: each row replayed with every configuration of a grid, as
//! `compaction bench` replays a transcript, and its figures in tokens and in cost.
//!
//! The Python half expands the grid (strategies crossed with the values of each setting, named
//! as `bench` names them) and hands each configuration here as a strategy and settings; each
//! becomes a compaction hook (the compactor [`Plan`] builds, with the hook's settings), shared by
//! every row. A row is read, replayed call by call with each hook (compaction-replay), and priced
//! with the price table's prompt cache, giving the figures `bench` writes in its JSON and CSV:
//! `none` (the calls as recorded) first, then each configuration.

use std::sync::Arc;

use compaction_core::error_chain;
use compaction_formats::{MessageUsage, ReadOptions};
use compaction_hook::{CacheRule, CompactionHook, CompactionHookSettings};
use compaction_replay::{CacheKind, Call, Lifetime, PriceTable, Pricing, Recorded, Recording, Replay, Step};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde::Deserialize;

use super::{each_row, Goal, Plan, Rows, Settings};

/// One configuration of the grid, as the Python half names and sets it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Configuration {
    name: String,
    strategy: String,
    settings: Settings,
    /// `cache_aware` with `expected_calls`: the hook prices the compaction with the cache.
    cache_aware: bool,
    expected_calls: Option<usize>,
}

/// How the calls are priced: `bench`'s `--prices`, `--price-model` and `--cache`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Prices {
    prices: Option<String>,
    price_model: Option<String>,
    cache: Option<String>,
}

/// A configuration built: its name, and its hooks (the second for logs with a one-hour cache).
#[derive(Debug)]
struct Built {
    name: String,
    hook: CompactionHook,
    hook_one_hour: Option<CompactionHook>,
}

/// One configuration's figures for one row, as `bench` writes them.
#[derive(Debug, Default, IntoPyObject)]
pub(crate) struct Figures {
    row: usize,
    configuration: Option<String>,
    format: Option<String>,
    calls: Option<usize>,
    peak_tokens: Option<usize>,
    over_window: Option<usize>,
    tokens_sent: Option<u64>,
    uncached_tokens: Option<u64>,
    cache_read_tokens: Option<u64>,
    cache_write_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cost: Option<f64>,
    recorded_cost: Option<f64>,
    compactions: Option<usize>,
    refetches: Option<usize>,
    refetch_tokens: Option<usize>,
    error: Option<String>,
}

fn build(
    configuration: Configuration,
    window: usize,
    counter: &str,
    openai_cache: bool,
) -> Result<Built, String> {
    let Configuration { name, strategy, settings, cache_aware, expected_calls } = configuration;
    let plan = Plan::new(&strategy, None, Some(window), counter, settings)
        .map_err(|e| format!("configuration {name}: {e}"))?;
    let Goal::Window { settings: hook_settings, .. } = &plan.goal else {
        return Err(format!("configuration {name}: no context window"));
    };
    let hook_settings = *hook_settings;
    let hook = |one_hour: bool| -> Result<CompactionHook, String> {
        let mut settings: CompactionHookSettings = hook_settings;
        if cache_aware {
            let mut rule = CacheRule::default().with_expected_calls(expected_calls.unwrap_or(10));
            if one_hour {
                rule = rule.with_write(2.0).with_lifetime(std::time::Duration::from_secs(3600));
            }
            if openai_cache {
                rule = rule.with_write(1.0);
            }
            settings = settings.with_cache(rule);
        }
        Ok(CompactionHook::new(plan.compactor()?, settings)
            .map_err(|e| format!("configuration {name}: {}", error_chain(&e)))?
            .with_counter(Box::new(Arc::clone(&plan.counter))))
    };
    let built =
        Built { hook: hook(false)?, hook_one_hour: if cache_aware { Some(hook(true)?) } else { None }, name };
    Ok(built)
}

/// The log's records of its calls, as the replay takes them (as `simulate` reads them).
fn recorded_calls(usage: &[MessageUsage]) -> Vec<Recorded> {
    usage
        .iter()
        .map(|u| {
            let v = u.usage;
            Recorded::new(
                u.message,
                v.input_tokens,
                v.cache_read_input_tokens,
                v.cache_creation_input_tokens,
                v.output_tokens,
            )
            .with_write_lifetimes(v.cache_creation_5m_input_tokens, v.cache_creation_1h_input_tokens)
            .with_call(u.timestamp_ms, u.model.as_deref().map(str::to_owned))
        })
        .collect()
}

/// One replay's figures: with compaction, or (`with` false) as recorded.
fn figures(
    row: usize,
    name: &str,
    format: &str,
    steps: &[Step],
    with: bool,
    pricing: &Pricing,
    window: usize,
) -> Figures {
    let size = |s: &Step| if with { s.with } else { s.without };
    let calls = if with { Call::with_compaction(steps) } else { Call::without_compaction(steps) };
    let cost = compaction_replay::estimate(&calls, pricing).ok();
    let recorded = compaction_replay::recorded(&Call::as_recorded(steps), pricing).and_then(Result::ok);
    let last = steps.last().filter(|_| with);
    Figures {
        row,
        configuration: Some(name.to_owned()),
        format: Some(format.to_owned()),
        calls: Some(steps.len()),
        peak_tokens: Some(steps.iter().map(size).max().unwrap_or(0)),
        over_window: Some(steps.iter().filter(|s| size(s) > window).count()),
        tokens_sent: Some(steps.iter().map(|s| size(s) as u64).sum()),
        uncached_tokens: cost.as_ref().map(|c| c.uncached),
        cache_read_tokens: cost.as_ref().map(|c| c.cache_read),
        cache_write_tokens: cost.as_ref().map(|c| c.cache_write),
        output_tokens: cost.as_ref().map(|c| c.output),
        cost: cost.as_ref().map(|c| c.dollars),
        recorded_cost: recorded.map(|c| c.dollars),
        compactions: Some(if with { steps.iter().filter(|s| s.compacted).count() } else { 0 }),
        refetches: Some(last.map_or(0, |s| s.refetches)),
        refetch_tokens: Some(last.map_or(0, |s| s.refetch_tokens)),
        error: None,
    }
}

/// Every configuration's figures for the conversation in `bytes` (row `row`), `none` first.
fn bench_row(
    row: usize,
    bytes: Vec<u8>,
    grid: &[Built],
    pricing: &Pricing,
    window: usize,
    read: &ReadOptions,
) -> Result<Vec<Figures>, String> {
    let mut options = read.clone();
    options.name = format!("row {row}");
    let conversation = compaction_formats::read(bytes, &options).map_err(|e| error_chain(&e))?;
    let format = conversation.format.as_str();
    let calls = recorded_calls(&conversation.usage);
    let one_hour = calls.iter().any(|c| c.lifetime() == Some(Lifetime::OneHour));
    let compacted_at: Vec<usize> =
        conversation.compactions.iter().map(|c| c.message).filter(|&m| m > 0).collect();
    let failed = |e: compaction_hook::Error| format!("row {row}: {}", error_chain(&e));
    let replay = |hook: &CompactionHook| -> Result<Vec<Step>, String> {
        let recording = Recording::new(&conversation.messages)
            .with_calls(&calls)
            .with_provider_compactions(&compacted_at);
        Ok(Replay::new(hook)
            .with_tools(conversation.tools.clone())
            .run(recording, &mut || {})
            .map_err(failed)?
            .steps)
    };
    let mut out = Vec::with_capacity(grid.len() + 1);
    let mut baseline: Option<Vec<Step>> = None;
    for built in grid {
        let hook = match (&built.hook_one_hour, one_hour) {
            (Some(longer), true) => longer,
            _ => &built.hook,
        };
        let steps = replay(hook)?;
        out.push(figures(row, &built.name, format, &steps, true, pricing, window));
        baseline.get_or_insert(steps);
    }
    // `none`: the calls as recorded, from any replay without compaction (they do not depend on
    // the compactor), or from a replay that never compacts.
    let steps = match baseline {
        Some(steps) => steps,
        None => {
            let settings = CompactionHookSettings::new(1 << 40);
            match CompactionHook::new(Box::new(compaction_core::ChainCompactor::new()), settings) {
                Ok(hook) => replay(&hook)?,
                Err(_) => Vec::new(),
            }
        }
    };
    out.insert(0, figures(row, "none", format, &steps, false, pricing, window));
    Ok(out)
}

/// Replays each of `rows` (JSON text, as `batch_compact` takes them) with every configuration of
/// `grid_json` (a JSON list of {name, strategy, settings, cache_aware, expected_calls}) in a
/// `context_window`, counting with `counter`, reading with `read_json` ({format, full_history})
/// and pricing with `prices_json` ({prices, price_model, cache}). A dict of figures per row and
/// configuration (`none` first); a row that fails gives one dict with its error.
#[pyfunction]
#[pyo3(signature = (rows, context_window, grid_json, counter, read_json, prices_json))]
pub(crate) fn batch_bench(
    py: Python<'_>,
    rows: &Bound<'_, PyAny>,
    context_window: usize,
    grid_json: &str,
    counter: &str,
    read_json: &str,
    prices_json: &str,
) -> PyResult<Vec<Figures>> {
    let invalid = |e: String| PyValueError::new_err(format!("compaction.batch.bench: {e}"));
    let grid: Vec<Configuration> = serde_json::from_str(grid_json).map_err(|e| invalid(e.to_string()))?;
    let prices: Prices = serde_json::from_str(prices_json).map_err(|e| invalid(e.to_string()))?;
    let read: super::ReadSettings = serde_json::from_str(read_json).map_err(|e| invalid(e.to_string()))?;
    let read = read.options().map_err(invalid)?;
    let cache = match prices.cache.as_deref() {
        None => None,
        Some(name) => Some(
            CacheKind::from_name(name)
                .ok_or_else(|| invalid(format!("cache {name:?}: expected anthropic, openai or none")))?,
        ),
    };
    let table = match &prices.prices {
        Some(text) => PriceTable::from_json("prices", text).map_err(|e| invalid(error_chain(&e)))?,
        None => PriceTable::bundled(),
    };
    let pricing = Pricing::new(table).with_model(prices.price_model.clone()).with_cache(cache);
    let openai = prices.cache.as_deref() == Some("openai");
    let grid = grid
        .into_iter()
        .map(|configuration| build(configuration, context_window, counter, openai))
        .collect::<Result<Vec<_>, _>>()
        .map_err(invalid)?;
    let rows = Rows::from_python(rows)?;
    let done =
        each_row(py, &rows, |row, bytes| bench_row(row, bytes, &grid, &pricing, context_window, &read));
    let done = done.into_iter().enumerate().map(|(row, result)| {
        result.unwrap_or_else(|error| vec![Figures { row, error: Some(error), ..Figures::default() }])
    });
    Ok(done.into_iter().flatten().collect())
}
