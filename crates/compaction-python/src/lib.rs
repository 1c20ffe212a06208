//! `compaction._native`: the Rust half of the Python package `compaction`.
//!
//! The package's Python half (`python/compaction/`) holds the classes a Haystack user sees, with
//! Haystack's names, arguments, defaults and errors. Each of them hands its work here in one call
//! per conversation, with the caller's own `ChatMessage` objects: `convert` reads them attribute
//! by attribute into compaction-model's messages, exactly as reading the JSON of Haystack's
//! `[m.to_dict() for m in messages]` would, without writing or parsing that JSON. What comes back
//! names the caller's messages that did not change by index, so only the changed ones are built.
//!
//! A counter is either one of ours, given by its kind (`approximate` or `tiktoken`) and settings
//! (counted with the GIL released; no Python is called while counting), or any Python object
//! with Haystack's `count(messages=..., tools=...)`, which `PyCounter` calls back per count. A
//! callback's exception is the count's error: it ends the compaction and is raised as it was.

mod batch;
mod build;
mod convert;
mod hooks;
mod objects;
mod offload;
mod openai;
mod summarize;

// mimalloc for this module's own allocations (Python keeps its allocator): a conversation read
// from Python objects is many small allocations, each freed when the call returns, and glibc's
// malloc spent about a third of a 50 MB count in them (see BENCHMARKS.md, section (l)).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use compaction_core::{
    error_chain, Compactor, PruningSettings, SlidingWindowCompactor, ToolResultPruningCompactor,
};
use compaction_model::{messages_to_value, Message, ToolSpec};
use compaction_tokens::{ApproximateTokenCounter, TiktokenCounter, TokenCounter};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::convert::{messages_from_objects, Classes};

/// Builds the Rust counter a spec names.
fn counter_from(
    kind: &str,
    ratio_or_encoding: &Bound<'_, PyAny>,
    image: usize,
    file: usize,
) -> PyResult<Box<dyn TokenCounter>> {
    match kind {
        "approximate" => {
            let ratio: f64 = ratio_or_encoding.extract()?;
            let counter =
                ApproximateTokenCounter::new(ratio).map_err(|e| PyValueError::new_err(error_chain(&e)))?;
            Ok(Box::new(counter.with_charges(image, file)))
        }
        "tiktoken" => {
            let encoding: String = ratio_or_encoding.extract()?;
            let counter =
                TiktokenCounter::new(&encoding).map_err(|e| PyValueError::new_err(error_chain(&e)))?;
            Ok(Box::new(counter.with_charges(image, file)))
        }
        other => Err(PyValueError::new_err(format!("unknown counter kind {other:?}"))),
    }
}

/// A Python counter, called back with the JSON text of the messages to count.
///
/// `count_json` is a Python callable taking that text and returning the count: the package's
/// Python half builds it around the user's counter (`ChatMessage.from_dict` on each message,
/// then `counter.count(messages=...)`). An exception it raises is the count's error
/// ([`compaction_tokens::Error::Provider`], the exception as its source), which ends the
/// compaction; [`python_error`] finds it again to raise it.
#[derive(Debug)]
struct PyCounter {
    count_json: Py<PyAny>,
}

impl TokenCounter for PyCounter {
    fn try_count(
        &self,
        messages: &[Message],
        _tools: &[ToolSpec],
    ) -> Result<usize, compaction_tokens::Error> {
        if messages.is_empty() {
            return Ok(0);
        }
        let call = || -> PyResult<usize> {
            let text = serde_json::to_string(&messages_to_value(messages))
                .map_err(|e| PyValueError::new_err(format!("could not write messages as JSON: {e}")))?;
            Python::attach(|py| self.count_json.call1(py, (text,))?.extract::<usize>(py))
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

/// The Python exception in `error`'s chain of causes (a Python counter's), if there is one.
fn python_error(py: Python<'_>, error: &(dyn std::error::Error + 'static)) -> Option<PyErr> {
    let mut cause = Some(error);
    while let Some(current) = cause {
        if let Some(raised) = current.downcast_ref::<PyErr>() {
            return Some(raised.clone_ref(py));
        }
        cause = current.source();
    }
    None
}

fn read_tools(tools_json: Option<&str>) -> PyResult<Vec<ToolSpec>> {
    match tools_json {
        None => Ok(Vec::new()),
        Some(text) => serde_json::from_str(text).map_err(|e| {
            PyValueError::new_err(format!("tool schemas are not name, description and parameters: {e}"))
        }),
    }
}

/// The token count of a conversation (`messages`, Haystack `ChatMessage`s; `classes` and
/// `fallback` as `convert` takes them) sent with the tool schemas `tools_json` (a JSON list of
/// `tool_spec`s), by one of our counters. Counts with the GIL released.
#[pyfunction]
#[pyo3(signature = (messages, classes, fallback, tools_json, kind, ratio_or_encoding, tokens_per_image, tokens_per_file))]
#[allow(clippy::too_many_arguments)]
fn count(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    classes: &Bound<'_, PyTuple>,
    fallback: &Bound<'_, PyAny>,
    tools_json: Option<&str>,
    kind: &str,
    ratio_or_encoding: &Bound<'_, PyAny>,
    tokens_per_image: usize,
    tokens_per_file: usize,
) -> PyResult<usize> {
    let counter = counter_from(kind, ratio_or_encoding, tokens_per_image, tokens_per_file)?;
    let messages = messages_from_objects(messages, &Classes::from_tuple(classes)?, fallback)?;
    let tools = read_tools(tools_json)?;
    let counted = py.detach(|| {
        let counted = counter.try_count(&messages, &tools);
        // Freed here too, without the GIL: a long conversation is many allocations.
        drop(messages);
        counted
    });
    counted.map_err(|e| PyValueError::new_err(error_chain(&e)))
}

/// The compactor Haystack's class `strategy` names, with its `init_parameters` (JSON text).
fn compactor_from(strategy: &str, settings_json: &str) -> PyResult<Box<dyn Compactor>> {
    let settings: serde_json::Value = serde_json::from_str(settings_json)
        .map_err(|e| PyValueError::new_err(format!("compactor settings are not JSON: {e}")))?;
    let invalid = |e: compaction_core::Error| PyValueError::new_err(error_chain(&e));
    match strategy {
        "ToolResultPruningCompactor" => {
            let settings = PruningSettings::from_value(&settings).map_err(invalid)?;
            Ok(Box::new(ToolResultPruningCompactor::new(settings).map_err(invalid)?))
        }
        "SlidingWindowCompactor" => {
            Ok(Box::new(SlidingWindowCompactor::from_value(&settings).map_err(invalid)?))
        }
        other => Err(PyValueError::new_err(format!("unknown compactor {other:?}"))),
    }
}

/// One message of a compacted conversation, as [`compact`] returns it: the index of an original
/// message kept as it was, a new `ChatMessage` built here (`build`), or the JSON text of a new
/// one (a one-message list) that `build` leaves to `ChatMessage.from_dict`.
#[derive(Debug, IntoPyObject)]
enum Entry {
    Kept(usize),
    Built(Py<PyAny>),
    New(String),
}

/// Where each message of a compacted conversation comes from.
#[derive(Debug, Clone, Copy)]
enum Plan {
    /// The original message at this index, unchanged.
    Kept(usize),
    /// A new message, standing where an original stood, if it does: that message's index in the
    /// conversation and in the originals `entries` is given.
    Changed { original: Option<(usize, usize)> },
}

/// An original message that comes back unchanged is named by its index, in order (a strategy
/// keeps what it keeps in order); the rest are new. Runs without the GIL.
fn plan(compacted: &[Message], original: &[Message]) -> Vec<Plan> {
    if compacted.len() == original.len() {
        // Rewritten in place (pruning): message i stands where message i stood.
        return compacted
            .iter()
            .zip(original)
            .enumerate()
            .map(|(index, (new, old))| {
                if new == old {
                    Plan::Kept(index)
                } else {
                    Plan::Changed { original: Some((index, index)) }
                }
            })
            .collect();
    }
    let mut out = Vec::with_capacity(compacted.len());
    let mut next = 0;
    for new in compacted {
        match original[next.min(original.len())..].iter().position(|old| old == new) {
            Some(offset) => {
                next += offset;
                out.push(Plan::Kept(next));
                next += 1;
            }
            None => out.push(Plan::Changed { original: None }),
        }
    }
    out
}

/// The compacted conversation as [`Entry`]s, following `plan`.
fn entries(
    py: Python<'_>,
    compacted: &[Message],
    plan: &[Plan],
    original: &[Message],
    objects: &Bound<'_, PyAny>,
    classes: &Classes<'_>,
) -> PyResult<Vec<Entry>> {
    let mut out = Vec::with_capacity(plan.len());
    for (index, (step, message)) in plan.iter().zip(compacted).enumerate() {
        let entry = match *step {
            Plan::Kept(at) => Entry::Kept(at),
            Plan::Changed { original: at } => {
                let old = match at {
                    Some((at, kept_at)) => Some((&original[kept_at], objects.get_item(at)?)),
                    None => None,
                };
                match build::message_object(py, message, old.as_ref().map(|(m, o)| (*m, o)), classes)? {
                    Some(built) => Entry::Built(built.unbind()),
                    None => serde_json::to_string(&messages_to_value(std::slice::from_ref(message)))
                        .map(Entry::New)
                        .map_err(|e| {
                            PyValueError::new_err(format!("could not write message {index} as JSON: {e}"))
                        })?,
                }
            }
        };
        out.push(entry);
    }
    Ok(out)
}

/// The counter [`compact`] counts with: one of ours (or a Python one through `PyCounter`), or a
/// Python one handed `ChatMessage` objects ([`objects::ObjectCounter`], made where the conversation
/// it reads from is).
enum Counting {
    Rust(Box<dyn TokenCounter>),
    Objects { objects: Py<PyAny>, classes: Py<PyTuple>, count_messages: Py<PyAny> },
}

/// Compacts a conversation as Haystack's `strategy` class (`ToolResultPruningCompactor`,
/// `SlidingWindowCompactor`) does with `init_parameters` `settings_json`.
///
/// `messages` are Haystack `ChatMessage`s (`classes` and `fallback` as `convert` takes them).
/// The counter is ours when `kind` is given (with its settings; the work then runs with the GIL
/// released), else `count_messages`, called with the caller's own objects for the messages it
/// counts that Rust did not change (see [`objects::ObjectCounter`]), or else `count_json` (see
/// `PyCounter`); a Python counter's exception is raised as it was. Returns
/// `None` when the strategy changed nothing, else the new conversation as [`Entry`]s, so the
/// caller keeps its own objects for the messages that did not change.
#[pyfunction]
#[pyo3(signature = (strategy, messages, classes, fallback, target_tokens, settings_json, kind, ratio_or_encoding, tokens_per_image, tokens_per_file, count_json, count_messages=None))]
#[allow(clippy::too_many_arguments)]
fn compact(
    py: Python<'_>,
    strategy: &str,
    messages: &Bound<'_, PyAny>,
    classes: &Bound<'_, PyTuple>,
    fallback: &Bound<'_, PyAny>,
    target_tokens: usize,
    settings_json: &str,
    kind: Option<&str>,
    ratio_or_encoding: &Bound<'_, PyAny>,
    tokens_per_image: usize,
    tokens_per_file: usize,
    count_json: Option<Py<PyAny>>,
    count_messages: Option<Py<PyAny>>,
) -> PyResult<Option<Vec<Entry>>> {
    let compactor = compactor_from(strategy, settings_json)?;
    let class_tuple = classes;
    let classes = Classes::from_tuple(classes)?;
    let objects = messages;
    let messages = messages_from_objects(objects, &classes, fallback)?;
    let counter = match (kind, count_json, count_messages) {
        (Some(kind), _, _) => {
            Counting::Rust(counter_from(kind, ratio_or_encoding, tokens_per_image, tokens_per_file)?)
        }
        (None, _, Some(count_messages)) => Counting::Objects {
            objects: objects.clone().unbind(),
            classes: class_tuple.clone().unbind(),
            count_messages,
        },
        (None, Some(count_json), None) => Counting::Rust(Box::new(PyCounter { count_json })),
        (None, None, None) => {
            return Err(PyValueError::new_err("compact needs a counter kind or a count callback"))
        }
    };
    let work = move || {
        let compaction = match counter {
            Counting::Rust(counter) => compactor.try_compact(&messages, target_tokens, counter.as_ref())?,
            Counting::Objects { objects, classes, count_messages } => {
                let counter =
                    objects::ObjectCounter { originals: &messages, objects, classes, count_messages };
                compactor.try_compact(&messages, target_tokens, &counter)?
            }
        };
        let Some(compaction) = compaction else {
            return Ok::<_, compaction_core::Error>((messages, None));
        };
        let changes = compaction.changes(&messages);
        let done = match changes.changed() {
            // Rewritten in place (pruning): only the messages rewritten are copied (their
            // originals, to compare and reuse parts of), and only they are compared.
            Some(indices) => {
                let originals: Vec<Message> = indices.iter().map(|&at| messages[at].clone()).collect();
                let mut compacted = messages;
                compaction.apply(&mut compacted)?;
                let mut plan: Vec<Plan> = (0..compacted.len()).map(Plan::Kept).collect();
                for (kept_at, (&at, old)) in indices.iter().zip(&originals).enumerate() {
                    if compacted[at] != *old {
                        plan[at] = Plan::Changed { original: Some((at, kept_at)) };
                    }
                }
                (compacted, Some((plan, originals)))
            }
            None => {
                let compacted = compaction.messages(&messages);
                let plan = plan(&compacted, &messages);
                (compacted, Some((plan, messages)))
            }
        };
        Ok(done)
    };
    // A Python counter takes the GIL for each count: holding it throughout saves taking it back.
    let done = if kind.is_some() { py.detach(work) } else { work() };
    let done =
        done.map_err(|e| python_error(py, &e).unwrap_or_else(|| PyValueError::new_err(error_chain(&e))))?;
    let (compacted, Some((plan, originals))) = done else {
        py.detach(|| drop(done));
        return Ok(None);
    };
    let entries = entries(py, &compacted, &plan, &originals, objects, &classes)?;
    py.detach(|| drop((compacted, originals)));
    Ok(Some(entries))
}

/// `float.__repr__` as the reader writes a float it meets (exposed for the test suite).
#[pyfunction]
fn float_repr(x: f64) -> String {
    convert::float_repr(x)
}

/// The module: [`count`] and [`compact`] (and `float_repr`, for the tests).
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(count, m)?)?;
    m.add_function(wrap_pyfunction!(compact, m)?)?;
    m.add_function(wrap_pyfunction!(float_repr, m)?)?;
    offload::register(m)?;
    m.add_function(wrap_pyfunction!(hooks::hook_decide, m)?)?;
    m.add_function(wrap_pyfunction!(summarize::summary_round, m)?)?;
    m.add_function(wrap_pyfunction!(summarize::summary_text, m)?)?;
    m.add_function(wrap_pyfunction!(openai::responses_input, m)?)?;
    m.add("DEFAULT_SUMMARY_INSTRUCTION", compaction_core::DEFAULT_SUMMARY_INSTRUCTION)?;
    batch::register(m)?;
    Ok(())
}
