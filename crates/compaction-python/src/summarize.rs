//! `SummarizationCompactor`'s planning and prompt for the Python package: compaction-core's
//! summarization session, one round at a time.
//!
//! The model is the caller's Python chat generator, sync or async, so the Python half drives the
//! rounds as Haystack's compactor does: it asks here what to summarize next ([`summary_round`]:
//! the positions and the transcript to send), calls its generator, and puts the summary in
//! place itself (a `ChatMessage` it builds, checked with its counter). The planning (the four
//! tiers, the fewest oldest groups that reach the target, each a count of the conversation
//! without them) and the transcript are compaction-core's, counted in Rust with the GIL released
//! when the counter is ours.

use compaction_core::{error_chain, summary_transcript, SummarizationCompactor};
use compaction_model::{Message, ToolSpec};
use compaction_tokens::TokenCounter;
use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::convert::{messages_from_objects, Classes};
use crate::{counter_from, python_error, PyCounter};

/// A Python counter asked about messages of the conversation being planned, `originals`, by their
/// positions: `count_indices(indices)` counts the caller's own `ChatMessage`s at them, as
/// Haystack's compactor hands its counter the caller's objects. Planning counts the conversation
/// without some of its messages, in order, so each message asked about is found in `originals`
/// (by address when it is one of them, else the next equal one); one that is not, which planning
/// never asks, goes to `count_json` (see `PyCounter`).
#[derive(Debug)]
struct OwnCounter<'a> {
    originals: &'a [Message],
    count_indices: Py<PyAny>,
    count_json: PyCounter,
}

impl OwnCounter<'_> {
    /// The positions in `originals` of `messages`, a subsequence of them; `None` when it is not one.
    fn positions(&self, messages: &[Message]) -> Option<Vec<usize>> {
        let size = std::mem::size_of::<Message>();
        let offset = (messages.as_ptr() as usize).wrapping_sub(self.originals.as_ptr() as usize);
        if !messages.is_empty()
            && offset % size == 0
            && offset / size + messages.len() <= self.originals.len()
        {
            let start = offset / size;
            return Some((start..start + messages.len()).collect());
        }
        let mut next = 0;
        messages
            .iter()
            .map(|message| {
                let at = next + self.originals.get(next..)?.iter().position(|o| o == message)?;
                next = at + 1;
                Some(at)
            })
            .collect()
    }
}

impl TokenCounter for OwnCounter<'_> {
    fn try_count(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, compaction_tokens::Error> {
        let Some(indices) = self.positions(messages).filter(|_| tools.is_empty()) else {
            return self.count_json.try_count(messages, tools);
        };
        Python::attach(|py| self.count_indices.call1(py, (indices,))?.extract::<usize>(py)).map_err(|error| {
            compaction_tokens::Error::Provider { counter: self.describe(), source: Box::new(error) }
        })
    }

    fn describe(&self) -> String {
        "python".to_owned()
    }
}

/// The next round of summarizing `messages` (Haystack `ChatMessage`s; `classes` and `fallback`
/// as `convert` takes them) down to `target_tokens`, under the compactor's `init_parameters`
/// (`settings_json`, without `chat_generator`): the positions of the messages to replace with
/// one summary, in transcript order, and the user message to send after the instruction
/// (`<conversation_to_summarize>` around the transcript). `None` when the conversation fits or
/// nothing more may be summarized.
///
/// The counter is ours when `kind` is given, else `count_indices` with `count_json` (see
/// [`OwnCounter`]), whose exception is raised as it was.
#[pyfunction]
#[pyo3(signature = (messages, classes, fallback, target_tokens, settings_json, kind, ratio_or_encoding, tokens_per_image, tokens_per_file, count_json, count_indices=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn summary_round(
    py: Python<'_>,
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
    count_indices: Option<Py<PyAny>>,
) -> PyResult<Option<(Vec<usize>, String)>> {
    let settings: serde_json::Value = serde_json::from_str(settings_json)
        .map_err(|e| PyValueError::new_err(format!("compactor settings are not JSON: {e}")))?;
    let compactor =
        SummarizationCompactor::from_value(&settings).map_err(|e| PyValueError::new_err(error_chain(&e)))?;
    let messages = messages_from_objects(messages, &Classes::from_tuple(classes)?, fallback)?;
    let plan = |counter: &dyn TokenCounter| {
        let request = compactor.session(&messages, target_tokens, counter)?.next_request()?;
        Ok::<_, compaction_core::Error>(request.map(|request| {
            let prompt = request.messages.get(1).and_then(|m| m.text()).unwrap_or_default().to_owned();
            (request.indices, prompt)
        }))
    };
    let planned = match (kind, count_json) {
        (Some(kind), _) => {
            let counter = counter_from(kind, ratio_or_encoding, tokens_per_image, tokens_per_file)?;
            py.detach(|| plan(counter.as_ref()))
        }
        // A Python counter takes the GIL for each count: holding it throughout saves taking it back.
        (None, Some(count_json)) => {
            let count_json = PyCounter { count_json };
            match count_indices {
                Some(count_indices) => plan(&OwnCounter { originals: &messages, count_indices, count_json }),
                None => plan(&count_json),
            }
        }
        (None, None) => {
            return Err(PyValueError::new_err("summary_round needs a counter kind or a count callback"))
        }
    };
    py.detach(|| drop(messages));
    planned.map_err(|e| python_error(py, &e).unwrap_or_else(|| PyValueError::new_err(error_chain(&e))))
}

/// The transcript of `messages[i]` for each `i` of `indices`, in that order, as the model is
/// shown it (without the `<conversation_to_summarize>` tags).
#[pyfunction]
pub(crate) fn summary_text(
    messages: &Bound<'_, PyAny>,
    classes: &Bound<'_, PyTuple>,
    fallback: &Bound<'_, PyAny>,
    indices: Vec<usize>,
) -> PyResult<String> {
    let messages = messages_from_objects(messages, &Classes::from_tuple(classes)?, fallback)?;
    if let Some(&bad) = indices.iter().find(|&&i| i >= messages.len()) {
        return Err(PyIndexError::new_err(format!(
            "message index {bad} is out of range for a conversation of {} messages",
            messages.len()
        )));
    }
    Ok(summary_transcript(&messages, &indices))
}
