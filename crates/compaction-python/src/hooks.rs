//! `CompactionHook`'s decision for the Python package: compaction-hook's
//! [`CompactionHook::decide`] on Haystack's agent state.
//!
//! The package's Python half reads the state (`messages`, `context_tokens`, `tools`), hands it
//! here, and then runs the compactor and writes the state back itself, as it has to: the
//! compactor may be any Python object. Here the hook estimates the request, says whether that
//! reaches `compact_at` of the window, and gives the target and the non-message overhead.
//!
//! The counter is one of ours (counted in Rust with the GIL released; no Python per message), or
//! any Python object with Haystack's `count`, called back with the stretch of the caller's own
//! list to count (`start`, `end`, whether the tool schemas go with it): the hook only ever
//! counts a stretch of the conversation, so the caller slices its own `ChatMessage`s, and its
//! counter sees the very objects Haystack's hook would hand it.

use compaction_core::{error_chain, SlidingWindowCompactor};
use compaction_hook::{AgentState, CompactionHook, CompactionHookSettings};
use compaction_model::{Message, ToolSpec};
use compaction_tokens::TokenCounter;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::convert::{messages_from_objects, Classes};
use crate::{counter_from, python_error, read_tools};

/// A Python counter asked about stretches of one conversation, `messages`: `count_range(start,
/// end, with_tools)` returns the count of `messages[start:end]` (with the state's tools when
/// `with_tools`). Its exception is the count's error, raised as it was.
#[derive(Debug)]
struct RangeCounter {
    count_range: Py<PyAny>,
    /// Where the state's messages start in memory, and how many there are: a stretch is told by
    /// its address, as it lies inside them (the hook counts nothing else).
    base: usize,
    len: usize,
}

impl RangeCounter {
    fn range(&self, messages: &[Message]) -> Option<(usize, usize)> {
        if messages.is_empty() {
            return Some((0, 0));
        }
        let size = std::mem::size_of::<Message>();
        let offset = (messages.as_ptr() as usize).checked_sub(self.base)?;
        let start = (offset % size == 0).then_some(offset / size)?;
        let end = start.checked_add(messages.len())?;
        (end <= self.len).then_some((start, end))
    }
}

impl TokenCounter for RangeCounter {
    fn try_count(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, compaction_tokens::Error> {
        let call = || -> PyResult<usize> {
            let (start, end) = self.range(messages).ok_or_else(|| {
                PyValueError::new_err("the hook counted messages that are not a stretch of the conversation")
            })?;
            Python::attach(|py| self.count_range.call1(py, (start, end, !tools.is_empty()))?.extract(py))
        };
        call().map_err(|error| compaction_tokens::Error::Provider {
            counter: self.describe(),
            source: Box::new(error),
        })
    }

    fn describe(&self) -> String {
        "python".to_owned()
    }
}

/// What [`hook_decide`] returns: the estimate, whether it triggers, the target and the overhead
/// (`None` both when it does not).
type Decision = (i64, bool, Option<usize>, Option<i64>);

/// `CompactionHook`'s decision on an agent state: `messages` (Haystack `ChatMessage`s; `classes`
/// and `fallback` as `convert` takes them), `context_tokens` (the provider's count, 0 when
/// unknown) and `tools_json` (the tool schemas as JSON, or `None`), under `context_window`,
/// `compact_at` and `compact_to`, which the caller has checked as Haystack does.
///
/// The counter is ours when `kind` is given (with its settings; counts run with the GIL
/// released), else `count_range` (see [`RangeCounter`]). Returns the estimated request,
/// whether it reaches the trigger, and, when it does, the target and the overhead.
#[pyfunction]
#[pyo3(signature = (messages, classes, fallback, context_tokens, tools_json, context_window, compact_at, compact_to, kind, ratio_or_encoding, tokens_per_image, tokens_per_file, count_range))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn hook_decide(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    classes: &Bound<'_, PyTuple>,
    fallback: &Bound<'_, PyAny>,
    context_tokens: i64,
    tools_json: Option<&str>,
    context_window: usize,
    compact_at: f64,
    compact_to: f64,
    kind: Option<&str>,
    ratio_or_encoding: &Bound<'_, PyAny>,
    tokens_per_image: usize,
    tokens_per_file: usize,
    count_range: Option<Py<PyAny>>,
) -> PyResult<Decision> {
    let settings =
        CompactionHookSettings::new(context_window).with_compact_at(compact_at).with_compact_to(compact_to);
    // The hook needs a compactor to be built; the decision does not use it (the caller runs its own).
    let placeholder = Box::new(SlidingWindowCompactor::default());
    let hook =
        CompactionHook::new(placeholder, settings).map_err(|e| PyValueError::new_err(error_chain(&e)))?;
    let messages = messages_from_objects(messages, &Classes::from_tuple(classes)?, fallback)?;
    // A negative anchor is decided with an anchor of 1, then shifted (see `shifted`).
    let anchor = usize::try_from(context_tokens).unwrap_or(1);
    let state = AgentState::new(messages).with_context_tokens(anchor).with_tools(read_tools(tools_json)?);
    let decided = match (kind, count_range) {
        (Some(kind), _) => {
            let counter = counter_from(kind, ratio_or_encoding, tokens_per_image, tokens_per_file)?;
            let hook = hook.with_counter(counter);
            py.detach(|| {
                let decided = hook.decide(&state);
                // Freed here too, without the GIL: a long conversation is many allocations.
                drop(state);
                decided
            })
        }
        (None, Some(count_range)) => {
            let own = state.messages();
            let counter = RangeCounter { count_range, base: own.as_ptr() as usize, len: own.len() };
            hook.with_counter(Box::new(counter)).decide(&state)
        }
        (None, None) => {
            return Err(PyValueError::new_err("hook_decide needs a counter kind or a count callback"))
        }
    };
    let decision = decided
        .map_err(|e| python_error(py, &e).unwrap_or_else(|| PyValueError::new_err(error_chain(&e))))?;
    let estimated = i64::try_from(decision.estimated_tokens).unwrap_or(i64::MAX);
    let decided = (estimated, decision.triggered, decision.target_tokens, decision.overhead);
    if context_tokens >= 0 {
        return Ok(decided);
    }
    Ok(shifted(decided, context_tokens, context_window, compact_at, compact_to))
}

/// The decision for a negative anchor `context_tokens` from the one made with an anchor of 1.
///
/// Haystack's hook stores a negative `context_tokens` when its counter measures the messages above
/// the estimate (the re-anchored count plus a negative overhead), and decides on it next time as
/// on any other anchor: the estimate is the anchor plus the messages after the last assistant
/// message. So the estimate is the one made with 1, shifted by `context_tokens - 1`; the trigger
/// and the target follow from it as in compaction-hook's `decide` (the messages' count, which the
/// overhead was taken from, is the same). Below the trigger with 1, it is below with less.
fn shifted(
    decided: Decision,
    context_tokens: i64,
    window: usize,
    compact_at: f64,
    compact_to: f64,
) -> Decision {
    let (estimated_with_one, triggered, _, overhead) = decided;
    let estimated = estimated_with_one.saturating_add(context_tokens).saturating_sub(1);
    let window = window as f64;
    let (true, Some(overhead_with_one)) = (triggered, overhead) else {
        return (estimated, false, None, None);
    };
    if (estimated as f64) < window * compact_at {
        return (estimated, false, None, None);
    }
    let message_tokens = i128::from(estimated_with_one) - i128::from(overhead_with_one);
    let overhead = i128::from(estimated) - message_tokens;
    // Python: int(window * compact_to), a float product truncated toward zero.
    let target = ((window * compact_to) as i128 - overhead).max(0);
    let overhead = i64::try_from(overhead).unwrap_or(if overhead < 0 { i64::MIN } else { i64::MAX });
    (estimated, true, Some(usize::try_from(target).unwrap_or(usize::MAX)), Some(overhead))
}
