//! `compaction._native`: the Rust half of the Python package `compaction`.
//!
//! The package's Python half (`python/compaction/`) holds the classes a Haystack user sees, with
//! Haystack's names, arguments, defaults and errors. Each of them hands its work here in one call
//! per conversation: the messages cross as the JSON text of Haystack's own
//! `[m.to_dict() for m in messages]`, which compaction-model reads and writes exactly
//! (`messages_from_slice`, `messages_to_value`), so nothing is lost on the way in or out.
//!
//! A counter is either one of ours, given by its kind (`approximate` or `tiktoken`) and settings
//! (no Python is called while counting), or any Python object with Haystack's
//! `count(messages=..., tools=...)`, which `PyCounter` calls back per count. The counter trait's
//! `count` cannot fail, so the first Python exception a callback raises is kept and raised once
//! the Rust call returns; the counts after it are 0 and their result is thrown away.
//!
//! The work itself runs with the GIL released unless it calls back into Python.

use std::sync::Mutex;

use compaction_core::{
    error_chain, Compactor, PruningSettings, SlidingWindowCompactor, ToolResultPruningCompactor,
};
use compaction_model::{messages_from_slice, messages_to_value, Message, ToolSpec};
use compaction_tokens::{ApproximateTokenCounter, TiktokenCounter, TokenCounter};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

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
/// then `counter.count(messages=...)`).
#[derive(Debug)]
struct PyCounter {
    count_json: Py<PyAny>,
    /// The first exception a callback raised, raised when the Rust call returns.
    failed: Mutex<Option<PyErr>>,
}

impl PyCounter {
    fn call(&self, messages: &[Message]) -> Result<usize, PyErr> {
        let text = serde_json::to_string(&messages_to_value(messages))
            .map_err(|e| PyValueError::new_err(format!("could not write messages as JSON: {e}")))?;
        Python::attach(|py| self.count_json.call1(py, (text,))?.extract::<usize>(py))
    }

    /// Raises the first exception a callback raised, if one did.
    fn check(&self) -> PyResult<()> {
        match self.failed.lock().map(|mut failed| failed.take()) {
            Ok(Some(error)) => Err(error),
            Ok(None) => Ok(()),
            Err(_) => Err(PyValueError::new_err("a token counter callback panicked")),
        }
    }
}

impl TokenCounter for PyCounter {
    fn count(&self, messages: &[Message], _tools: &[ToolSpec]) -> usize {
        if messages.is_empty() {
            return 0;
        }
        if let Ok(failed) = self.failed.lock() {
            if failed.is_some() {
                return 0;
            }
        }
        match self.call(messages) {
            Ok(count) => count,
            Err(error) => {
                if let Ok(mut failed) = self.failed.lock() {
                    failed.get_or_insert(error);
                }
                0
            }
        }
    }

    fn try_count(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, compaction_tokens::Error> {
        Ok(self.count(messages, tools))
    }

    fn describe(&self) -> String {
        "python".to_owned()
    }
}

fn read_messages(messages_json: &str) -> PyResult<Vec<Message>> {
    messages_from_slice(messages_json.as_bytes()).map_err(|e| PyValueError::new_err(error_chain(&e)))
}

fn read_tools(tools_json: Option<&str>) -> PyResult<Vec<ToolSpec>> {
    match tools_json {
        None => Ok(Vec::new()),
        Some(text) => serde_json::from_str(text).map_err(|e| {
            PyValueError::new_err(format!("tool schemas are not name, description and parameters: {e}"))
        }),
    }
}

/// The token count of a conversation (`messages_json`, Haystack's `to_dict` list as JSON) sent
/// with the tool schemas `tools_json` (a JSON list of `tool_spec`s), by one of our counters.
#[pyfunction]
#[pyo3(signature = (messages_json, tools_json, kind, ratio_or_encoding, tokens_per_image, tokens_per_file))]
fn count(
    py: Python<'_>,
    messages_json: &str,
    tools_json: Option<&str>,
    kind: &str,
    ratio_or_encoding: &Bound<'_, PyAny>,
    tokens_per_image: usize,
    tokens_per_file: usize,
) -> PyResult<usize> {
    let counter = counter_from(kind, ratio_or_encoding, tokens_per_image, tokens_per_file)?;
    let messages = read_messages(messages_json)?;
    let tools = read_tools(tools_json)?;
    py.detach(|| counter.try_count(&messages, &tools)).map_err(|e| PyValueError::new_err(error_chain(&e)))
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
/// message kept as it was, or the JSON text of a new one (a one-message list).
#[derive(Debug, IntoPyObject)]
enum Entry {
    Kept(usize),
    New(String),
}

/// The compacted conversation as [`Entry`]s: an original message that comes back unchanged is
/// named by its index, in order (a strategy keeps what it keeps in order); the rest are written.
fn entries(compacted: &[Message], original: &[Message]) -> PyResult<Vec<Entry>> {
    let write = |index: usize, message: &Message| {
        serde_json::to_string(&messages_to_value(std::slice::from_ref(message)))
            .map(Entry::New)
            .map_err(|e| PyValueError::new_err(format!("could not write message {index} as JSON: {e}")))
    };
    let mut out = Vec::with_capacity(compacted.len());
    if compacted.len() == original.len() {
        // Rewritten in place (pruning): message i stands where message i stood.
        for (index, (new, old)) in compacted.iter().zip(original).enumerate() {
            out.push(if new == old { Entry::Kept(index) } else { write(index, new)? });
        }
        return Ok(out);
    }
    let mut next = 0;
    for (index, new) in compacted.iter().enumerate() {
        match original[next.min(original.len())..].iter().position(|old| old == new) {
            Some(offset) => {
                next += offset;
                out.push(Entry::Kept(next));
                next += 1;
            }
            None => out.push(write(index, new)?),
        }
    }
    Ok(out)
}

/// Compacts a conversation as Haystack's `strategy` class (`ToolResultPruningCompactor`,
/// `SlidingWindowCompactor`) does with `init_parameters` `settings_json`.
///
/// The counter is ours when `kind` is given (with its settings), else `count_json` (see
/// `PyCounter`). Returns `None` when the strategy changed nothing, else the new conversation as
/// [`Entry`]s, so the caller keeps its own objects for the messages that did not change.
#[pyfunction]
#[pyo3(signature = (strategy, messages_json, target_tokens, settings_json, kind, ratio_or_encoding, tokens_per_image, tokens_per_file, count_json))]
#[allow(clippy::too_many_arguments)]
fn compact(
    py: Python<'_>,
    strategy: &str,
    messages_json: &str,
    target_tokens: usize,
    settings_json: &str,
    kind: Option<&str>,
    ratio_or_encoding: &Bound<'_, PyAny>,
    tokens_per_image: usize,
    tokens_per_file: usize,
    count_json: Option<Py<PyAny>>,
) -> PyResult<Option<Vec<Entry>>> {
    let compactor = compactor_from(strategy, settings_json)?;
    let messages = read_messages(messages_json)?;
    let compaction = match (kind, count_json) {
        (Some(kind), _) => {
            let counter = counter_from(kind, ratio_or_encoding, tokens_per_image, tokens_per_file)?;
            py.detach(|| compactor.try_compact(&messages, target_tokens, counter.as_ref()))
        }
        (None, Some(count_json)) => {
            let counter = PyCounter { count_json, failed: Mutex::new(None) };
            let compaction = compactor.try_compact(&messages, target_tokens, &counter);
            counter.check()?;
            compaction
        }
        (None, None) => {
            return Err(PyValueError::new_err("compact needs a counter kind or a count callback"))
        }
    }
    .map_err(|e| PyValueError::new_err(error_chain(&e)))?;
    let Some(compaction) = compaction else { return Ok(None) };
    entries(&compaction.messages(&messages), &messages).map(Some)
}

/// The module: [`count`] and [`compact`].
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(count, m)?)?;
    m.add_function(wrap_pyfunction!(compact, m)?)?;
    Ok(())
}
