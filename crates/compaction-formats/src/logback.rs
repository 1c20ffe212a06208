//! An event log written back by editing only the tool results (and tool inputs) a command
//! changed, every other byte as it was: each result or input that now differs from what its
//! slot holds is replaced in place, once the message's fingerprint says nothing else changed.

use std::io::Write;
use std::ops::Range;

use compaction_json::splice::{self, Edit, Seg};
use compaction_model::{Message, Part, ResultPart, ToolCall, ToolResultContent};
use serde_json::{json, Value};

use crate::codec::Codec;
use crate::error::Error;
use crate::eventlog::{cleared_shell_action, fingerprint, EventLog, MessageSlots, Slot, Style};
use crate::format::Format;
use crate::threads;

/// Writes the log back with the changed tool results and inputs edited in place.
pub(crate) fn write_back(
    source: &[u8],
    log: &EventLog,
    format: Format,
    codec: &dyn Codec,
    messages: &[Message],
    changed: Option<&[usize]>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let label = format.label();
    if messages.len() != log.slots.len() {
        return Err(Error::WriteBack {
            reason: format!(
                "{} messages were read and {} are to be written; a {label} log can take back only \
                 changed tool results and tool inputs (write another format with a target)",
                log.slots.len(),
                messages.len()
            ),
        });
    }
    let all: Vec<usize>;
    let indices = match changed {
        Some(changed) => changed,
        None => {
            all = (0..messages.len()).collect();
            &all
        }
    };
    // The edits of the messages, found on two threads when there are many (each is found in its
    // own line of the input), kept in the order of the messages; the first error in that order
    // is the one given, as one thread would give it.
    let edits_of = |indices: &[usize]| -> Result<Vec<Edit>, Error> {
        let mut edits = Vec::new();
        for &index in indices {
            let (Some(message), Some(slots)) = (messages.get(index), log.slots.get(index)) else { continue };
            if fingerprint(message, slots) != slots.fingerprint {
                return Err(Error::WriteBack {
                    reason: format!(
                        "message {index} changed in more than its tool results and inputs, which a \
                         {label} log cannot take back (write another format with a target)"
                    ),
                });
            }
            edits.extend(message_edits(source, log, codec, message, slots, index)?);
        }
        Ok(edits)
    };
    let parallel = threads::two_cores() && source.len() >= PARALLEL_EDITS;
    let edits = threads::on_halves(indices, parallel, edits_of)?;
    splice::write_edited(source, edits, out)?;
    Ok(())
}

/// The edits that write `message`'s tool results and inputs over those of message `index` read,
/// whose slots are `slots`: none for those unchanged. The caller has checked the fingerprint.
pub(crate) fn message_edits(
    source: &[u8],
    log: &EventLog,
    codec: &dyn Codec,
    message: &Message,
    slots: &MessageSlots,
    index: usize,
) -> Result<Vec<Edit>, Error> {
    let mut edits = Vec::new();
    for (result, slot) in message.tool_call_results().zip(&slots.results) {
        let Some(slot) = slot else { continue };
        if let Some(edit) =
            edit_result(source, log, slot, codec, &result.result).map_err(|e| of_message(e, index))?
        {
            edits.push(edit);
        }
    }
    for (call, slot) in message.tool_calls().zip(&slots.calls) {
        let Some(slot) = slot else { continue };
        if let Some(edit) = edit_call(source, log, slot, call).map_err(|e| of_message(e, index))? {
            edits.push(edit);
        }
    }
    Ok(edits)
}

/// Below this many bytes of input one thread finds a write-back's edits.
const PARALLEL_EDITS: usize = 1 << 20;

/// The bytes of the value at `slot`.
fn locate(source: &[u8], log: &EventLog, slot: &Slot) -> Result<Range<usize>, Error> {
    let lost = || Error::WriteBack {
        reason: format!("the value at {} is no longer where it was read", path_text(&slot.path)),
    };
    let base = log.bases.get(slot.base as usize).ok_or_else(lost)?;
    if let Some([start, end]) = slot.span {
        let span = base.start + start as usize..base.start + end as usize;
        return if span.end <= base.end { Ok(span) } else { Err(lost()) };
    }
    let line = &source[..base.end];
    let found = if log.unique_keys { splice::find_unique } else { splice::find };
    found(line, base.start, &slot.path).ok_or_else(lost)
}

/// A path inside a line as a reader would write it: `payload.output`, `[3].output`.
fn path_text(path: &[Seg]) -> String {
    let mut text = String::new();
    for seg in path {
        match seg {
            Seg::Key(key) if text.is_empty() => text.push_str(key),
            Seg::Key(key) => {
                text.push('.');
                text.push_str(key);
            }
            Seg::Index(index) => text.push_str(&format!("[{index}]")),
            Seg::At(offset) => text.push_str(&format!("byte {offset}")),
        }
    }
    if text.is_empty() {
        text.push_str("the line's top");
    }
    text
}

/// `error` said of message `index`, when it is about writing back.
fn of_message(error: Error, index: usize) -> Error {
    match error {
        Error::WriteBack { reason } => Error::WriteBack { reason: format!("message {index}: {reason}") },
        other => other,
    }
}

fn edit_result(
    source: &[u8],
    log: &EventLog,
    slot: &Slot,
    codec: &dyn Codec,
    result: &ToolResultContent,
) -> Result<Option<Edit>, Error> {
    let range = locate(source, log, slot)?;
    if let Some(was_string) = surely_replaced(&source[range.clone()], result) {
        let value = encode_result(result, slot.style, was_string);
        return Ok(Some(Edit { range, bytes: serde_json::to_vec(&value)? }));
    }
    let original: Value = compaction_model::value_from_slice(&source[range.clone()])
        .map_err(|e| Error::WriteBack { reason: format!("a tool result no longer parses: {e}") })?;
    if decode_result(&original, slot.style, codec).as_ref() == Some(result) {
        return Ok(None);
    }
    let mut range = range;
    let value = match (slot.style, &original) {
        // Codex's older `{"content", "success"}` output: only the text changes.
        (Style::ResponsesOutput, Value::Object(object))
            if object.get("content").is_some_and(Value::is_string) =>
        {
            let inner = splice::find(source, range.start, &[Seg::Key("content")]).ok_or_else(|| {
                Error::WriteBack { reason: "a tool result is no longer where it was read".into() }
            })?;
            range = inner;
            Value::String(result_text(result))
        }
        _ => encode_result(result, slot.style, original.is_string()),
    };
    Ok(Some(Edit { range, bytes: serde_json::to_vec(&value)? }))
}

/// Whether `result` cannot be what `original`, the JSON value at its slot, reads as, told
/// without decoding it; if so, whether `original` is a string. A list reads as parts and a
/// string as one text, never the other; a string whose contents are shorter than the text, or
/// longer than six bytes for each of its bytes (the longest escape, `\u0000`, spells one byte in
/// six), cannot spell it. A long output replaced by a short note, what pruning does, is then
/// written without decoding the output first.
fn surely_replaced(original: &[u8], result: &ToolResultContent) -> Option<bool> {
    match (original.first(), result) {
        (Some(b'['), ToolResultContent::Text(_)) => Some(false),
        (Some(b'"'), ToolResultContent::Parts(_)) => Some(true),
        (Some(b'"'), ToolResultContent::Text(text)) => {
            let (contents, decoded) = (original.len().saturating_sub(2), text.as_str().len());
            (contents < decoded || contents > decoded.saturating_mul(6)).then_some(true)
        }
        _ => None,
    }
}

fn edit_call(source: &[u8], log: &EventLog, slot: &Slot, call: &ToolCall) -> Result<Option<Edit>, Error> {
    let range = locate(source, log, slot)?;
    let original: Value = compaction_model::value_from_slice(&source[range.clone()])
        .map_err(|e| Error::WriteBack { reason: format!("a tool input no longer parses: {e}") })?;
    let value = match slot.style {
        Style::ArgumentsText => {
            let text = match &call.raw_arguments {
                Some(raw) => raw.clone(),
                None => {
                    // Unchanged when the text still means these arguments: spacing is kept.
                    let same = original
                        .as_str()
                        .and_then(|t| compaction_model::value_from_slice(t.as_bytes()).ok())
                        .is_some_and(|v| v.as_object().is_some_and(|o| call.arguments == *o));
                    if same {
                        return Ok(None);
                    }
                    call.arguments.as_json().to_owned()
                }
            };
            Value::String(text)
        }
        Style::ShellAction if call.arguments.is_empty() && call.raw_arguments.is_none() => {
            cleared_shell_action()
        }
        _ => Value::from(call.arguments.clone()),
    };
    if value == original {
        return Ok(None);
    }
    Ok(Some(Edit { range, bytes: serde_json::to_vec(&value)? }))
}

/// All of a result's text, joined.
fn result_text(result: &ToolResultContent) -> String {
    match result {
        ToolResultContent::Text(text) => text.to_string(),
        ToolResultContent::Parts(parts) => parts
            .iter()
            .filter_map(|part| match part {
                ResultPart::Text(text) => Some(text.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(""),
    }
}

/// The result as it is written at a slot of `style`; a lone text as a string where the original
/// was one.
pub(crate) fn encode_result(result: &ToolResultContent, style: Style, was_string: bool) -> Value {
    let parts: Vec<Value> = match result {
        ToolResultContent::Text(text) if was_string => return Value::String(text.to_string()),
        ToolResultContent::Text(text) => vec![text_part(text.as_str(), style)],
        ToolResultContent::Parts(parts) => parts
            .iter()
            .map(|part| match part {
                ResultPart::Text(text) => {
                    // A block kept opaque goes back as it was, in its own format.
                    let own = match style {
                        Style::ResponsesOutput => "responses",
                        _ => "anthropic",
                    };
                    match crate::provider::provider_item(&Part::Text(text.clone())) {
                        Some((format, item)) if format == own => item.clone(),
                        _ => text_part(text.text.as_str(), style),
                    }
                }
                ResultPart::Image(image) => match style {
                    Style::ResponsesOutput => input_image(image),
                    _ => {
                        let mime = image.mime_type.as_deref().unwrap_or("image/png");
                        json!({"type": "image", "source": {
                            "type": "base64", "media_type": mime, "data": image.base64_image}})
                    }
                },
                ResultPart::File(file) => match style {
                    Style::ResponsesOutput => input_file(file),
                    _ => {
                        let mime = file.mime_type.as_deref().unwrap_or("application/octet-stream");
                        json!({"type": "document", "source": {
                            "type": "base64", "media_type": mime, "data": file.base64_data}})
                    }
                },
                other => crate::form::haystack_form(other),
            })
            .collect(),
    };
    Value::Array(parts)
}

/// An `input_image` item part of `image`'s bytes, as a data URL (as the Responses reader reads it back).
pub(crate) fn input_image(image: &compaction_model::ImagePart) -> Value {
    let mime = image.mime_type.as_deref().unwrap_or("image/png");
    serde_json::json!({"type": "input_image", "image_url": format!("data:{mime};base64,{}", image.base64_image)})
}

/// An `input_file` item part of `file`'s bytes, as a data URL (as the Responses reader reads it back).
pub(crate) fn input_file(file: &compaction_model::FilePart) -> Value {
    let mime = file.mime_type.as_deref().unwrap_or("application/octet-stream");
    serde_json::json!({"type": "input_file", "file_data": format!("data:{mime};base64,{}", file.base64_data)})
}

fn text_part(text: &str, style: Style) -> Value {
    match style {
        Style::ResponsesOutput => json!({"type": "input_text", "text": text}),
        _ => json!({"type": "text", "text": text}),
    }
}

/// The result a slot's value was read as, to tell whether a command changed it: read by the
/// log's format (Claude Code's results are Anthropic's, Codex's are Responses').
fn decode_result(value: &Value, style: Style, codec: &dyn Codec) -> Option<ToolResultContent> {
    match style {
        Style::AnthropicResult | Style::ResponsesOutput => codec.result_content(value),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use compaction_model::ToolResultContent;

    use super::surely_replaced;

    #[test]
    fn a_result_is_surely_replaced_only_where_no_spelling_could_match() {
        let text = |t: &str| ToolResultContent::Text(t.into());
        // Six bytes of escape for one byte of text, or the text as it is: either could match.
        assert_eq!(surely_replaced(br#""\u0000""#, &text("\0")), None);
        assert_eq!(surely_replaced(br#""abc""#, &text("abc")), None);
        assert_eq!(surely_replaced(br#""\n\n""#, &text("xyz")), None);
        // Seven bytes for one, or fewer bytes than the text has: no spelling matches.
        assert_eq!(surely_replaced(br#""\u0000x""#, &text("\0")), Some(true));
        assert_eq!(surely_replaced(br#""ab""#, &text("abc")), Some(true));
        let long = br#""a long output, some sixty bytes of it, replaced by a short note""#;
        assert_eq!(surely_replaced(long, &text("[pruned]")), Some(true));
        // A list is never one text, a string never parts; anything else is decoded.
        let list = br#"[{"type": "text", "text": "x"}]"#;
        assert_eq!(surely_replaced(list, &text("x")), Some(false));
        assert_eq!(surely_replaced(br#""x""#, &ToolResultContent::Parts(Vec::new())), Some(true));
        assert_eq!(surely_replaced(list, &ToolResultContent::Parts(Vec::new())), None);
        assert_eq!(surely_replaced(br#"{"content": "x"}"#, &text("y")), None);
    }
}
