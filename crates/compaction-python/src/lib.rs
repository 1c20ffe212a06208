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
    error_chain, Compaction, Compactor, PruningSettings, SlidingWindowCompactor, ToolResultPruningCompactor,
};
use compaction_model::{messages_to_value, Message, Role, SharedObject, ToolSpec};
use compaction_tokens::{ApproximateTokenCounter, TiktokenCounter, TokenCounter};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

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

/// A changed message as a new `ChatMessage`: built here (`build`), sharing what it keeps of
/// `original` (its Rust reading and its object), or else (an image or a file `build` leaves)
/// through `ChatMessage.from_dict` of its JSON, which validates it as Haystack does.
fn changed_object<'py>(
    py: Python<'py>,
    message: &Message,
    original: Option<(&Message, &Bound<'py, PyAny>)>,
    classes: &Classes<'py>,
    index: usize,
) -> PyResult<Bound<'py, PyAny>> {
    if let Some(built) = build::message_object(py, message, original, classes)? {
        return Ok(built);
    }
    let text = serde_json::to_string(&messages_to_value(std::slice::from_ref(message)))
        .map_err(|e| PyValueError::new_err(format!("could not write message {index} as JSON: {e}")))?;
    let dicts = py.import(pyo3::intern!(py, "json"))?.call_method1(pyo3::intern!(py, "loads"), (text,))?;
    classes.chat_message.call_method1(pyo3::intern!(py, "from_dict"), (dicts.get_item(0)?,))
}

/// A message rewritten in place: its index, the new message and its original.
type Rewritten = (usize, Message, Message);

/// What a compaction made of the conversation, as [`compacted_list`] builds it in Python.
enum Compacted {
    /// Rewritten in place (pruning): each message that changed.
    InPlace(Vec<Rewritten>),
    /// A new conversation, where each message comes from (`plan`), and the originals.
    Whole { compacted: Vec<Message>, plan: Vec<Plan>, originals: Vec<Message> },
}

/// An empty message, standing where a message moved out of a conversation stood.
fn hole() -> Message {
    Message { role: Role::User, parts: Vec::new(), name: None, meta: SharedObject::new() }
}

/// The changes of an in-place compaction (`indices`, its rewritten messages): each rewritten
/// message built from its original, and that original, for the messages that changed.
///
/// The originals are moved out of `messages`, not copied, into an otherwise empty conversation
/// that the compaction builds its messages from: only the rewritten messages are built (a copy
/// of the rest costs nothing there), and a pruned result's text, which its rewrite drops, is
/// never copied. Runs without the GIL.
fn in_place(
    compaction: &Compaction,
    mut messages: Vec<Message>,
    indices: &[usize],
) -> Result<(Vec<Rewritten>, Vec<Message>), compaction_core::Error> {
    let mut sparse: Vec<Message> = (0..messages.len()).map(|_| hole()).collect();
    for &at in indices {
        sparse[at] = std::mem::replace(&mut messages[at], hole());
    }
    compaction.check(&sparse)?;
    let mut rebuilt = compaction.messages(&sparse);
    let changed = indices
        .iter()
        .filter_map(|&at| {
            let new = std::mem::replace(&mut rebuilt[at], hole());
            let old = std::mem::replace(&mut sparse[at], hole());
            (new != old).then_some((at, new, old))
        })
        .collect();
    Ok((changed, messages))
}

/// Python's cyclic garbage collector, paused while it lives (when it was running).
///
/// Building the changed messages makes several container objects per message, none of them
/// garbage; each few hundred of them set off a collection, and every so often one that walks the
/// caller's whole heap again (the conversation's own objects first of all): about a tenth of a
/// 50 MB pruning, for nothing to collect. Paused, the collector runs its next collection as
/// usual once it is running again.
struct GcPaused<'py> {
    gc: Option<Bound<'py, PyModule>>,
}

impl<'py> GcPaused<'py> {
    fn new(py: Python<'py>) -> PyResult<Self> {
        let gc = py.import(pyo3::intern!(py, "gc"))?;
        if !gc.call_method0(pyo3::intern!(py, "isenabled"))?.is_truthy()? {
            return Ok(GcPaused { gc: None });
        }
        gc.call_method0(pyo3::intern!(py, "disable"))?;
        Ok(GcPaused { gc: Some(gc) })
    }
}

impl Drop for GcPaused<'_> {
    fn drop(&mut self) {
        if let Some(gc) = &self.gc {
            if let Err(error) = gc.call_method0(pyo3::intern!(gc.py(), "enable")) {
                // Nothing to raise it to from a drop: Python reports it as unraisable.
                error.write_unraisable(gc.py(), None);
            }
        }
    }
}

/// The compacted conversation as a list of `ChatMessage`s: the caller's own objects for the
/// messages that did not change, new ones (see [`changed_object`]) for the rest.
fn compacted_list<'py>(
    py: Python<'py>,
    compacted: &Compacted,
    objects: &Bound<'py, PyAny>,
    classes: &Classes<'py>,
) -> PyResult<Bound<'py, PyList>> {
    let _paused = GcPaused::new(py)?;
    match compacted {
        Compacted::InPlace(changed) => {
            // A copy of the caller's list, then the changed messages put in their places.
            let list = match objects.cast::<PyList>() {
                Ok(list) => list.get_slice(0, list.len()),
                Err(_) => PyList::new(
                    py,
                    (0..objects.len()?).map(|at| objects.get_item(at)).collect::<PyResult<Vec<_>>>()?,
                )?,
            };
            for (at, new, old) in changed {
                let object = objects.get_item(*at)?;
                list.set_item(*at, changed_object(py, new, Some((old, &object)), classes, *at)?)?;
            }
            Ok(list)
        }
        Compacted::Whole { compacted, plan, originals } => {
            let list = PyList::empty(py);
            for (index, (step, message)) in plan.iter().zip(compacted).enumerate() {
                match *step {
                    Plan::Kept(at) => list.append(objects.get_item(at)?)?,
                    Plan::Changed { original: at } => {
                        let old = match at {
                            Some((at, kept_at)) => Some((&originals[kept_at], objects.get_item(at)?)),
                            None => None,
                        };
                        let old = old.as_ref().map(|(m, o)| (*m, o));
                        list.append(changed_object(py, message, old, classes, index)?)?;
                    }
                }
            }
            Ok(list)
        }
    }
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
/// `None` when the strategy changed nothing, else the new conversation, a list of `ChatMessage`s
/// in which the messages that did not change are the caller's own objects.
#[pyfunction]
#[pyo3(signature = (strategy, messages, classes, fallback, target_tokens, settings_json, kind, ratio_or_encoding, tokens_per_image, tokens_per_file, count_json, count_messages=None))]
#[allow(clippy::too_many_arguments)]
fn compact<'py>(
    py: Python<'py>,
    strategy: &str,
    messages: &Bound<'py, PyAny>,
    classes: &Bound<'py, PyTuple>,
    fallback: &Bound<'py, PyAny>,
    target_tokens: usize,
    settings_json: &str,
    kind: Option<&str>,
    ratio_or_encoding: &Bound<'_, PyAny>,
    tokens_per_image: usize,
    tokens_per_file: usize,
    count_json: Option<Py<PyAny>>,
    count_messages: Option<Py<PyAny>>,
) -> PyResult<Option<Bound<'py, PyList>>> {
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
            Some(indices) => {
                let (changed, rest) = in_place(&compaction, messages, indices)?;
                (rest, Some(Compacted::InPlace(changed)))
            }
            None => {
                let compacted = compaction.messages(&messages);
                let plan = plan(&compacted, &messages);
                (Vec::new(), Some(Compacted::Whole { compacted, plan, originals: messages }))
            }
        };
        Ok(done)
    };
    // A Python counter takes the GIL for each count: holding it throughout saves taking it back.
    let done = if kind.is_some() { py.detach(work) } else { work() };
    let done =
        done.map_err(|e| python_error(py, &e).unwrap_or_else(|| PyValueError::new_err(error_chain(&e))))?;
    let (rest, Some(compacted)) = done else {
        py.detach(|| drop(done));
        return Ok(None);
    };
    // Freed without the GIL, as a count frees its conversation.
    py.detach(|| drop(rest));
    let list = compacted_list(py, &compacted, objects, &classes)?;
    py.detach(|| drop(compacted));
    Ok(Some(list))
}

/// How many messages `messages` are, read as [`count`] and [`compact`] read them (then freed,
/// without the GIL): what reading Python objects costs them, for the benchmarks
/// (`bench/compare.py`).
#[pyfunction]
fn read_messages(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    classes: &Bound<'_, PyTuple>,
    fallback: &Bound<'_, PyAny>,
) -> PyResult<usize> {
    let messages = messages_from_objects(messages, &Classes::from_tuple(classes)?, fallback)?;
    let len = messages.len();
    py.detach(|| drop(messages));
    Ok(len)
}

/// `float.__repr__` as the reader writes a float it meets (exposed for the test suite).
#[pyfunction]
fn float_repr(x: f64) -> String {
    convert::float_repr(x)
}

/// The module: [`count`] and [`compact`] (and `float_repr`, for the tests, and `read_messages`,
/// for the benchmarks).
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(count, m)?)?;
    m.add_function(wrap_pyfunction!(compact, m)?)?;
    m.add_function(wrap_pyfunction!(float_repr, m)?)?;
    m.add_function(wrap_pyfunction!(read_messages, m)?)?;
    offload::register(m)?;
    m.add_function(wrap_pyfunction!(hooks::hook_decide, m)?)?;
    m.add_function(wrap_pyfunction!(summarize::summary_round, m)?)?;
    m.add_function(wrap_pyfunction!(summarize::summary_text, m)?)?;
    m.add_function(wrap_pyfunction!(openai::responses_input, m)?)?;
    m.add("DEFAULT_SUMMARY_INSTRUCTION", compaction_core::DEFAULT_SUMMARY_INSTRUCTION)?;
    batch::register(m)?;
    Ok(())
}
