//! Haystack's `ChatMessage` objects read straight into [`Message`]s, attribute by attribute.
//!
//! Each message is read as `ChatMessage.to_dict` would write it and compaction-model would read
//! that text back (`_role`, `_content`, `_name`, `_meta`; each part by its exact class, as
//! Haystack's `_serialize_content_part` looks it up), but without the dictionaries and the JSON
//! text in between: strings are copied once, from Python's UTF-8 into Rust's. Values inside
//! `meta`, tool-call arguments and `extra` become JSON values as `json.dumps` writes them (ints
//! and floats digit for digit, tuples as arrays, non-string keys as `json.dumps` spells them).
//!
//! What this reader does not take on itself (a string with a lone surrogate, which Rust cannot
//! hold as UTF-8; a part whose fields are not of their declared types) is handed, message by
//! message, to the JSON path it stands in for: the package's Python half writes that one message
//! with `json.dumps(message.to_dict())` and compaction-model reads it, so the message, or the
//! error, is the same as before.

use std::sync::Arc;

use compaction_model::{
    Arguments, FilePart, ImagePart, JsonObject, Message, Part, ReasoningPart, ResultPart, Role, SharedObject,
    Text, TextPart, ToolCall, ToolCallResult, ToolResultContent,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Number, Value};

/// Haystack's content classes, compared by identity as Haystack looks them up (`type(part)`).
pub(crate) struct Classes<'py> {
    pub(crate) text: Bound<'py, PyAny>,
    pub(crate) tool_call: Bound<'py, PyAny>,
    pub(crate) tool_call_result: Bound<'py, PyAny>,
    pub(crate) reasoning: Bound<'py, PyAny>,
    pub(crate) image: Bound<'py, PyAny>,
    pub(crate) file: Bound<'py, PyAny>,
    /// `ChatMessage` and `ChatRole`, to build messages with.
    pub(crate) chat_message: Bound<'py, PyAny>,
    pub(crate) chat_role: Bound<'py, PyAny>,
}

impl<'py> Classes<'py> {
    /// The classes from `(TextContent, ToolCall, ToolCallResult, ReasoningContent, ImageContent,
    /// FileContent, ChatMessage, ChatRole)`.
    pub(crate) fn from_tuple(classes: &Bound<'py, PyTuple>) -> PyResult<Self> {
        if classes.len() != 8 {
            return Err(PyValueError::new_err(
                "the classes are eight: text, tool call, result, reasoning, image, file, message, role",
            ));
        }
        Ok(Classes {
            text: classes.get_item(0)?,
            tool_call: classes.get_item(1)?,
            tool_call_result: classes.get_item(2)?,
            reasoning: classes.get_item(3)?,
            image: classes.get_item(4)?,
            file: classes.get_item(5)?,
            chat_message: classes.get_item(6)?,
            chat_role: classes.get_item(7)?,
        })
    }
}

/// Why a message was not read here: a Python error to raise, or a case the JSON path takes.
enum Miss {
    Error(PyErr),
    Json,
}

impl From<PyErr> for Miss {
    fn from(error: PyErr) -> Self {
        Miss::Error(error)
    }
}

type Read<T> = Result<T, Miss>;

/// Reads `messages` (a list of `ChatMessage`); `fallback(message)` gives one message's JSON text
/// for the cases this reader hands back (see the module's header).
pub(crate) fn messages_from_objects(
    messages: &Bound<'_, PyAny>,
    classes: &Classes<'_>,
    fallback: &Bound<'_, PyAny>,
) -> PyResult<Vec<Message>> {
    let list = messages.cast::<PyList>().ok();
    let len = match list {
        Some(list) => list.len(),
        None => messages.len()?,
    };
    let mut out = Vec::with_capacity(len);
    for index in 0..len {
        let item = match list {
            Some(list) => list.get_item(index)?,
            None => messages.get_item(index)?,
        };
        let message = match message(&item, classes) {
            Ok(message) => message,
            Err(Miss::Error(error)) => return Err(error),
            Err(Miss::Json) => {
                let text = fallback.call1((&item,))?;
                let text = text.cast::<PyString>().map_err(PyErr::from)?.to_str()?.to_owned();
                Message::from_slice(text.as_bytes(), index)
                    .map_err(|e| PyValueError::new_err(compaction_core::error_chain(&e)))?
            }
        };
        out.push(message);
    }
    Ok(out)
}

/// A Python `str` as a Rust one; a lone surrogate (not UTF-8) goes the JSON way.
fn string(value: &Bound<'_, PyAny>) -> Read<String> {
    let Ok(text) = value.cast::<PyString>() else { return Err(Miss::Json) };
    match text.to_str() {
        Ok(text) => Ok(text.to_owned()),
        Err(_) => Err(Miss::Json),
    }
}

/// Texts of at least this many bytes are borrowed from their Python `str` rather than copied:
/// below it, a copy costs less than sharing the string.
const BORROWED_TEXT_BYTES: usize = 256;

/// A Python `str` as a [`Text`]: a long one borrowed (its UTF-8 bytes, which Python keeps beside
/// the string, held with the string: [`Text::shared`]), a short one copied. A lone surrogate (not
/// UTF-8) goes the JSON way.
fn text_of(value: &Bound<'_, PyAny>) -> Read<Text> {
    let Ok(string) = value.cast::<PyString>() else { return Err(Miss::Json) };
    let Ok(text) = string.to_str() else { return Err(Miss::Json) };
    if text.len() < BORROWED_TEXT_BYTES {
        return Ok(Text::new(text));
    }
    // Python's `len`, which it knows without counting: what `Text` counts (the string is UTF-8,
    // so it holds no surrogate and its code points are its characters).
    let chars = string.len()?;
    match PyBackedStr::try_from(string.clone()) {
        Ok(borrowed) => Ok(Text::shared_with_char_len(Arc::new(borrowed), chars)),
        Err(_) => Err(Miss::Json),
    }
}

fn opt_string(value: &Bound<'_, PyAny>) -> Read<Option<String>> {
    if value.is_none() {
        Ok(None)
    } else {
        string(value).map(Some)
    }
}

fn flag(value: &Bound<'_, PyAny>) -> Read<bool> {
    value.cast::<PyBool>().map(|b| b.is_true()).map_err(|_| Miss::Json)
}

/// A `dict` attribute (`None` as empty) as a JSON object.
fn dict_attr(value: &Bound<'_, PyAny>) -> Read<JsonObject> {
    if value.is_none() {
        return Ok(JsonObject::new());
    }
    let Ok(dict) = value.cast::<PyDict>() else { return Err(Miss::Json) };
    dict_value(dict)
}

fn dict_value(dict: &Bound<'_, PyDict>) -> Read<JsonObject> {
    let mut map = JsonObject::with_capacity(dict.len());
    for (key, value) in dict.iter() {
        map.insert(key_text(&key)?, json_value(&value)?);
    }
    Ok(map)
}

/// A dictionary key as `json.dumps` writes it.
fn key_text(key: &Bound<'_, PyAny>) -> Read<String> {
    if key.is_instance_of::<PyString>() {
        return string(key);
    }
    match json_value(key)? {
        Value::Number(number) => Ok(number.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Null => Ok("null".to_owned()),
        _ => Err(Miss::Json),
    }
}

/// A Python value as the JSON `json.dumps` writes for it; anything `json.dumps` would not write
/// goes the JSON way (which raises `json.dumps`'s own error).
fn json_value(value: &Bound<'_, PyAny>) -> Read<Value> {
    if value.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(text) = value.cast::<PyString>() {
        return match text.to_str() {
            Ok(text) => Ok(Value::String(text.to_owned())),
            Err(_) => Err(Miss::Json),
        };
    }
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if value.is_instance_of::<PyInt>() {
        if let Ok(small) = value.extract::<i64>() {
            return Ok(Value::Number(small.into()));
        }
        // Digit for digit, as `int.__repr__` (which `json.dumps` uses) writes it.
        let digits = value.py().get_type::<PyInt>().getattr("__repr__")?.call1((value,))?;
        return Ok(Value::Number(Number::from_string_unchecked(digits.extract::<String>()?)));
    }
    if let Ok(float) = value.cast::<PyFloat>() {
        return Ok(Value::Number(Number::from_string_unchecked(float_repr(float.value()))));
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        return dict_value(dict).map(Value::Object);
    }
    if let Ok(list) = value.cast::<PyList>() {
        return (0..list.len())
            .map(|i| json_value(&list.get_item(i)?))
            .collect::<Read<Vec<_>>>()
            .map(Value::Array);
    }
    if let Ok(tuple) = value.cast::<PyTuple>() {
        return (0..tuple.len())
            .map(|i| json_value(&tuple.get_item(i)?))
            .collect::<Read<Vec<_>>>()
            .map(Value::Array);
    }
    Err(Miss::Json)
}

fn message(item: &Bound<'_, PyAny>, classes: &Classes<'_>) -> Read<Message> {
    let py = item.py();
    let role = item.getattr(pyo3::intern!(py, "_role"))?;
    // `ChatRole` is a `str` enum: its string is its value.
    let role = role.cast::<PyString>().ok().and_then(|role| role.to_str().ok()).and_then(Role::parse);
    let role = role.ok_or(Miss::Json)?;
    let content = item.getattr(pyo3::intern!(py, "_content"))?;
    let mut parts = Vec::with_capacity(content.len().unwrap_or(1));
    // By index, not by iterator: an iterator is an object the garbage collector tracks, and
    // making one per message sets off its collections over the caller's whole heap.
    if let Ok(list) = content.cast::<PyList>() {
        for index in 0..list.len() {
            parts.push(part(&list.get_item(index)?, classes)?);
        }
    } else {
        for part_object in content.try_iter()? {
            parts.push(part(&part_object?, classes)?);
        }
    }
    let name = opt_string(&item.getattr(pyo3::intern!(py, "_name"))?)?;
    let meta = item.getattr(pyo3::intern!(py, "_meta"))?;
    // `data.get("meta") or {}`: a falsy meta reads as empty.
    let meta = if meta.is_truthy()? { dict_attr(&meta)? } else { JsonObject::new() };
    Ok(Message { role, parts, name, meta: meta.into() })
}

fn part(object: &Bound<'_, PyAny>, classes: &Classes<'_>) -> Read<Part> {
    let py = object.py();
    let kind = object.get_type();
    let is = |class: &Bound<'_, PyAny>| kind.is(class);
    if is(&classes.text) {
        return text(object).map(Part::Text);
    }
    if is(&classes.tool_call) {
        return tool_call(object).map(Part::ToolCall);
    }
    if is(&classes.tool_call_result) {
        let result = object.getattr(pyo3::intern!(py, "result"))?;
        let result = if result.is_instance_of::<PyString>() {
            ToolResultContent::Text(text_of(&result)?)
        } else if let Ok(list) = result.cast::<PyList>() {
            let mut parts = Vec::with_capacity(list.len());
            for index in 0..list.len() {
                let item = list.get_item(index)?;
                let kind = item.get_type();
                parts.push(if kind.is(&classes.text) {
                    ResultPart::Text(text(&item)?)
                } else if kind.is(&classes.image) {
                    ResultPart::Image(image(&item)?)
                } else if kind.is(&classes.file) {
                    ResultPart::File(file(&item)?)
                } else {
                    return Err(Miss::Json);
                });
            }
            ToolResultContent::Parts(parts)
        } else {
            return Err(Miss::Json);
        };
        let origin = object.getattr(pyo3::intern!(py, "origin"))?;
        if !origin.get_type().is(&classes.tool_call) {
            return Err(Miss::Json);
        }
        let origin = tool_call(&origin)?;
        let error = flag(&object.getattr(pyo3::intern!(py, "error"))?)?;
        return Ok(Part::ToolCallResult(ToolCallResult::new(result, origin, error)));
    }
    if is(&classes.reasoning) {
        return Ok(Part::Reasoning(ReasoningPart {
            reasoning_text: string(&object.getattr(pyo3::intern!(py, "reasoning_text"))?)?,
            extra: dict_attr(&object.getattr(pyo3::intern!(py, "extra"))?)?.into(),
            unknown: SharedObject::new(),
        }));
    }
    if is(&classes.image) {
        return image(object).map(Part::Image);
    }
    if is(&classes.file) {
        return file(object).map(Part::File);
    }
    // Not a content class: `to_dict` raises Haystack's own TypeError.
    Err(Miss::Error(PyTypeError::new_err(format!(
        "Unsupported type in ChatMessage content: `{}` for `{}`.",
        kind.name()?,
        object.str()?
    ))))
}

fn text(object: &Bound<'_, PyAny>) -> Read<TextPart> {
    Ok(TextPart::new(text_of(&object.getattr(pyo3::intern!(object.py(), "text"))?)?))
}

fn tool_call(object: &Bound<'_, PyAny>) -> Read<ToolCall> {
    let py = object.py();
    let tool_name = string(&object.getattr(pyo3::intern!(py, "tool_name"))?)?;
    let arguments = object.getattr(pyo3::intern!(py, "arguments"))?;
    let (arguments, raw_arguments) = if let Ok(dict) = arguments.cast::<PyDict>() {
        (arguments_of(dict)?, None)
    } else if arguments.is_instance_of::<PyString>() {
        (Arguments::new(), Some(string(&arguments)?))
    } else {
        return Err(Miss::Json);
    };
    let id = opt_string(&object.getattr(pyo3::intern!(py, "id"))?)?;
    let extra = object.getattr(pyo3::intern!(py, "extra"))?;
    let extra = if extra.is_none() { None } else { Some(object_of(&extra)?) };
    Ok(ToolCall { tool_name, arguments, raw_arguments, id, extra, unknown: SharedObject::new() })
}

/// A call's `arguments` dict as [`Arguments`]: its compact JSON text written straight from the
/// dict, as serde_json writes the object [`dict_value`] would read (see [`write_json`]).
fn arguments_of(dict: &Bound<'_, PyDict>) -> Read<Arguments> {
    if dict.is_empty() {
        return Ok(Arguments::new());
    }
    let mut text = String::with_capacity(64);
    write_json(dict.as_any(), &mut text)?;
    Ok(Arguments::from_written_json(text))
}

/// Writes `value` as serde_json writes the JSON value [`json_value`] reads from it (compact,
/// strings escaped as serde_json escapes them, numbers as `json.dumps` spells them). A dict
/// with a key that is not a string goes the JSON way (where keys are spelled, and keys
/// spelled alike merged, as `json.dumps` and the reader do), as does anything `json_value`
/// sends there.
fn write_json(value: &Bound<'_, PyAny>, out: &mut String) -> Read<()> {
    if value.is_none() {
        out.push_str("null");
        return Ok(());
    }
    if let Ok(text) = value.cast::<PyString>() {
        let Ok(text) = text.to_str() else { return Err(Miss::Json) };
        write_json_string(text, out);
        return Ok(());
    }
    if let Ok(b) = value.cast::<PyBool>() {
        out.push_str(if b.is_true() { "true" } else { "false" });
        return Ok(());
    }
    if value.is_instance_of::<PyInt>() || value.is_instance_of::<PyFloat>() {
        let Value::Number(number) = json_value(value)? else { return Err(Miss::Json) };
        out.push_str(number.as_str());
        return Ok(());
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        out.push('{');
        for (index, (key, value)) in dict.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            if !key.is_instance_of::<PyString>() {
                return Err(Miss::Json);
            }
            write_json(&key, out)?;
            out.push(':');
            write_json(&value, out)?;
        }
        out.push('}');
        return Ok(());
    }
    let items = if let Ok(list) = value.cast::<PyList>() {
        (0..list.len()).map(|i| list.get_item(i)).collect::<PyResult<Vec<_>>>()?
    } else if let Ok(tuple) = value.cast::<PyTuple>() {
        (0..tuple.len()).map(|i| tuple.get_item(i)).collect::<PyResult<Vec<_>>>()?
    } else {
        return Err(Miss::Json);
    };
    out.push('[');
    for (index, item) in items.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        write_json(item, out)?;
    }
    out.push(']');
    Ok(())
}

/// `text` as a JSON string, escaped as serde_json escapes it: the quote and the backslash, and
/// the control characters (backspace, tab, newline, form feed and carriage return by their
/// letters, the others as `\u00xx`), nothing else.
fn write_json_string(text: &str, out: &mut String) {
    out.push('"');
    if !needs_escapes(text.as_bytes()) {
        out.push_str(text);
        out.push('"');
        return;
    }
    let mut start = 0;
    for (at, byte) in text.bytes().enumerate() {
        let named = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        // `at` is an ASCII byte's offset: a character boundary.
        out.push_str(text.get(start..at).unwrap_or_default());
        if named.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xF)]));
        } else {
            out.push_str(named);
        }
        start = at + 1;
    }
    out.push_str(text.get(start..).unwrap_or_default());
    out.push('"');
}

/// Whether `bytes` hold a control character, a quote or a backslash (what
/// [`write_json_string`] escapes), looked for eight bytes at a time.
fn needs_escapes(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // Whether a byte of `word` is below `n` (at most 128): exact for the word as a whole.
    let below = |word: u64, n: u64| word.wrapping_sub(ONES * n) & !word & HIGHS != 0;
    let special = |word: u64| {
        below(word, 0x20)
            || below(word ^ (ONES * u64::from(b'"')), 1)
            || below(word ^ (ONES * u64::from(b'\\')), 1)
    };
    let mut words = bytes.chunks_exact(8);
    for chunk in words.by_ref() {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        if special(u64::from_le_bytes(word)) {
            return true;
        }
    }
    words.remainder().iter().any(|&byte| byte < 0x20 || byte == b'"' || byte == b'\\')
}

fn object_of(value: &Bound<'_, PyAny>) -> Read<SharedObject> {
    let Ok(dict) = value.cast::<PyDict>() else { return Err(Miss::Json) };
    dict_value(dict).map(SharedObject::from)
}

/// An image as the object holds it: it was checked (and its MIME type guessed) when it was made.
fn image(object: &Bound<'_, PyAny>) -> Read<ImagePart> {
    let py = object.py();
    Ok(ImagePart {
        base64_image: string(&object.getattr(pyo3::intern!(py, "base64_image"))?)?,
        mime_type: opt_string(&object.getattr(pyo3::intern!(py, "mime_type"))?)?,
        detail: opt_string(&object.getattr(pyo3::intern!(py, "detail"))?)?,
        meta: dict_attr(&object.getattr(pyo3::intern!(py, "meta"))?)?.into(),
        validation: flag(&object.getattr(pyo3::intern!(py, "validation"))?)?,
        unknown: SharedObject::new(),
    })
}

/// A file as the object holds it.
fn file(object: &Bound<'_, PyAny>) -> Read<FilePart> {
    let py = object.py();
    Ok(FilePart {
        base64_data: string(&object.getattr(pyo3::intern!(py, "base64_data"))?)?,
        mime_type: opt_string(&object.getattr(pyo3::intern!(py, "mime_type"))?)?,
        filename: opt_string(&object.getattr(pyo3::intern!(py, "filename"))?)?,
        extra: dict_attr(&object.getattr(pyo3::intern!(py, "extra"))?)?.into(),
        validation: flag(&object.getattr(pyo3::intern!(py, "validation"))?)?,
        unknown: SharedObject::new(),
    })
}

/// `float.__repr__(x)`, which `json.dumps` writes for a finite float: the shortest digits that
/// read back as `x` (Rust's `{:e}` gives the same), in positional notation when the decimal
/// point falls within 16 digits (`-4 < decpt <= 16`, with `.0` when there is no fraction), else
/// as `d.ddde+XX` with at least two exponent digits. Not-a-number and the infinities are written
/// as `json.dumps` writes them.
pub(crate) fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    // The shortest digits' count from `{:e}`; the digits themselves correctly rounded to that
    // many places, which Python gives and `{:e}` does not always (for 153497804249733.12 it
    // gives ...13, as short, which reads back the same but is not the closer).
    let shortest = format!("{x:e}");
    let places = shortest.split('e').next().unwrap_or("").bytes().filter(u8::is_ascii_digit).count();
    let scientific = format!("{x:.*e}", places.saturating_sub(1));
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let decpt = exponent + 1;
    let mut out = String::with_capacity(digits.len() + 8);
    out.push_str(sign);
    if -4 < decpt && decpt <= 16 {
        let len = digits.len() as i32;
        if decpt <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-decpt) as usize));
            out.push_str(&digits);
        } else if decpt >= len {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', (decpt - len) as usize));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..decpt as usize]);
            out.push('.');
            out.push_str(&digits[decpt as usize..]);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push_str(&format!("e{}{:02}", if exponent < 0 { '-' } else { '+' }, exponent.abs()));
    }
    out
}
