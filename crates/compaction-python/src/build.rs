//! The changed messages of a compaction built as Haystack `ChatMessage` objects, straight from
//! Rust: no JSON text, no `ChatMessage.from_dict`.
//!
//! A changed message is built with Haystack's own constructors (`ChatMessage(_role, _content,
//! _name, _meta)`, `ToolCallResult(...)`, ..., each dataclass's fields by position, in their
//! order), as `from_dict` would build
//! it from `to_dict`'s dictionary, except that a part, or a result's `origin`, equal to the one
//! at the same place in the original message is that original object (Haystack's own pruning
//! reuses the call the same way). JSON values become what `json.loads` gives: ints of any size,
//! floats, `None`, lists and dicts. A message with an image or a file that is not the original's
//! is left to the JSON path (`None` here), which validates it as `from_dict` does.

use compaction_model::{Message, Part, ResultPart, Role, ToolCall, ToolResultContent};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde_json::Value;

use crate::convert::Classes;

/// The message `message` as a new `ChatMessage`; `original` is the caller's message it stands in
/// for (its Rust reading and its object), if any. `None`: leave it to the JSON path.
pub(crate) fn message_object<'py>(
    py: Python<'py>,
    message: &Message,
    original: Option<(&Message, &Bound<'py, PyAny>)>,
    classes: &Classes<'py>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let original_parts = match original {
        Some((_, object)) => Some(object.getattr(pyo3::intern!(py, "_content"))?),
        None => None,
    };
    let parts = PyList::empty(py);
    for (index, part) in message.parts.iter().enumerate() {
        let same_place = match (original, &original_parts) {
            (Some((old, _)), Some(objects)) => match old.parts.get(index) {
                Some(old_part) => Some((old_part, objects.get_item(index)?)),
                None => None,
            },
            _ => None,
        };
        if let Some((old_part, object)) = &same_place {
            if *old_part == part {
                parts.append(object)?;
                continue;
            }
        }
        let Some(object) = part_object(py, part, same_place.as_ref().map(|(p, o)| (*p, o)), classes)? else {
            return Ok(None);
        };
        parts.append(object)?;
    }
    let role = match original {
        Some((old, object)) if old.role == message.role => object.getattr(pyo3::intern!(py, "_role"))?,
        _ => classes.chat_role.call1((role_name(message.role),))?,
    };
    // The dataclasses' fields in their order (`_role`, `_content`, `_name`, `_meta`), passed by
    // position: no keyword dictionary to make and take apart for each message.
    let meta = object_dict(py, &message.meta)?;
    classes.chat_message.call1((role, parts, message.name.as_deref(), meta)).map(Some)
}

fn role_name(role: Role) -> &'static str {
    role.as_str()
}

fn part_object<'py>(
    py: Python<'py>,
    part: &Part,
    same_place: Option<(&Part, &Bound<'py, PyAny>)>,
    classes: &Classes<'py>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(Some(match part {
        Part::Text(text) => classes.text.call1((text.text.as_str(),))?,
        Part::ToolCall(call) => tool_call(py, call, classes)?,
        Part::ToolCallResult(result) => {
            let content: Bound<'py, PyAny> = match &result.result {
                ToolResultContent::Text(text) => pyo3::types::PyString::new(py, text.as_str()).into_any(),
                ToolResultContent::Parts(items) => {
                    let list = PyList::empty(py);
                    for item in items {
                        match item {
                            ResultPart::Text(text) => {
                                list.append(classes.text.call1((text.text.as_str(),))?)?
                            }
                            _ => return Ok(None),
                        }
                    }
                    list.into_any()
                }
            };
            // The original's call object when it is the same call (as Haystack's pruning keeps it).
            let origin = match same_place {
                Some((Part::ToolCallResult(old), object)) if *old.origin == *result.origin => {
                    object.getattr(pyo3::intern!(py, "origin"))?
                }
                _ => tool_call(py, &result.origin, classes)?,
            };
            // `result`, `origin`, `error`.
            classes.tool_call_result.call1((content, origin, result.error))?
        }
        Part::Reasoning(reasoning) => {
            // `reasoning_text`, `extra`.
            let extra = object_dict(py, &reasoning.extra)?;
            classes.reasoning.call1((reasoning.reasoning_text.as_str(), extra))?
        }
        _ => return Ok(None),
    }))
}

fn tool_call<'py>(py: Python<'py>, call: &ToolCall, classes: &Classes<'py>) -> PyResult<Bound<'py, PyAny>> {
    let arguments = match &call.raw_arguments {
        Some(raw) => pyo3::types::PyString::new(py, raw).into_any(),
        None => object_dict(py, &call.arguments.to_map())?.into_any(),
    };
    let extra = match &call.extra {
        Some(extra) => object_dict(py, extra)?.into_any(),
        None => py.None().into_bound(py),
    };
    // `tool_name`, `arguments`, `id`, `extra`.
    classes.tool_call.call1((call.tool_name.as_str(), arguments, call.id.as_deref(), extra))
}

fn object_dict<'py>(
    py: Python<'py>,
    object: &serde_json::Map<String, Value>,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (key, value) in object {
        dict.set_item(key.as_str(), value_object(py, value)?)?;
    }
    Ok(dict)
}

/// A JSON value as `json.loads` reads it.
fn value_object<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => pyo3::types::PyBool::new(py, *b).to_owned().into_any(),
        Value::String(s) => pyo3::types::PyString::new(py, s).into_any(),
        Value::Number(number) => {
            let text = number.to_string();
            if let Some(int) = number.as_i64() {
                int.into_pyobject(py)?.into_any()
            } else if text.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
                // An int beyond 64 bits: Python's `int` reads its digits.
                py.get_type::<pyo3::types::PyInt>().call1((text,))?
            } else {
                // `json.loads` reads `NaN`, `Infinity` and `-Infinity` as floats too.
                py.get_type::<pyo3::types::PyFloat>().call1((text,))?
            }
        }
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(value_object(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(object) => object_dict(py, object)?.into_any(),
    })
}
