//! `OpenAITokenCounter`'s request for the Python package: Haystack `ChatMessage`s as OpenAI's
//! Responses API `input` items, by compaction-llm's [`to_responses_input`] (the conversion the
//! reference's counter makes). The Python half sends it with the `openai` client, as Haystack's
//! counter does, so the caller's client settings, retries and HTTP client apply.

use compaction_core::error_chain;
use compaction_llm::to_responses_input;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::convert::{messages_from_objects, Classes};

/// `messages` (Haystack `ChatMessage`s; `classes` and `fallback` as `convert` takes them) as the
/// JSON text of the Responses API's `input` list. A message the API cannot take (an image in an
/// assistant message, a tool result beside other content) is a `ValueError` naming it.
#[pyfunction]
pub(crate) fn responses_input(
    messages: &Bound<'_, PyAny>,
    classes: &Bound<'_, PyTuple>,
    fallback: &Bound<'_, PyAny>,
) -> PyResult<String> {
    let messages = messages_from_objects(messages, &Classes::from_tuple(classes)?, fallback)?;
    let items = to_responses_input(&messages).map_err(|e| PyValueError::new_err(error_chain(&e)))?;
    serde_json::to_string(&items)
        .map_err(|e| PyValueError::new_err(format!("could not write the request: {e}")))
}
