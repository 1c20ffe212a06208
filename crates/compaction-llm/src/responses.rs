//! Messages as OpenAI's Responses API takes them as `input` items: what the OpenAI counter sends
//! to `POST /responses/input_tokens`.
//!
//! Item for item the reference's conversion (`_convert_chat_message_to_responses_api_format` in
//! Haystack 3.4.1's `openai_responses.py`), checked against fixtures it wrote
//! (`tests/data/responses/`), except where it would lose what a count must see:
//!
//! - a tool call's `raw_arguments` are sent as they are (the reference would print a string of
//!   them, quoted and escaped);
//! - a tool result whose call has no id is sent (the reference leaves it out, so the count
//!   misses it);
//! - a system message's images and files are sent as `input_image` / `input_file` parts (the
//!   reference keeps only its text), and an assistant message with images or files is an error
//!   (the API has no place for them; the reference drops them).

use compaction_json::python::PythonJson;
use compaction_model::{
    FilePart, ImagePart, JsonObject, Message, Part, ResultPart, Role, ToolCall, ToolResultContent,
};
use serde_json::{json, Map, Value};

use crate::error::Error;
use crate::provider::Provider;

/// The reasoning fields the Responses API takes back in an input item; the reference filters
/// `extra` to these (streaming bookkeeping would be rejected).
const REASONING_FIELDS: [&str; 5] = ["id", "type", "encrypted_content", "status", "content"];

/// Every message of `messages` as Responses API `input` items, in order.
///
/// ```
/// use compaction_llm::to_responses_input;
/// use compaction_model::Message;
/// use serde_json::json;
///
/// let items = to_responses_input(&[Message::system("Be brief."), Message::user("Hi")])?;
/// assert_eq!(items, vec![
///     json!({"role": "system", "content": "Be brief."}),
///     json!({"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}),
/// ]);
/// # Ok::<(), compaction_llm::Error>(())
/// ```
///
/// # Errors
///
/// [`Error::UnsupportedMessage`] for a message the API cannot take: a user or system message
/// with no content, a tool result beside other content, a tool call or reasoning in a user
/// message, images or files in an assistant message.
pub fn to_responses_input(messages: &[Message]) -> Result<Vec<Value>, Error> {
    let mut items = Vec::with_capacity(messages.len());
    for (index, message) in messages.iter().enumerate() {
        items.extend(message_items(message).map_err(|reason| Error::UnsupportedMessage {
            provider: Provider::OpenAI,
            index,
            reason,
        })?);
    }
    Ok(items)
}

/// One message's items, or why it cannot be converted.
pub(crate) fn message_items(message: &Message) -> Result<Vec<Value>, String> {
    let texts: Vec<&str> = message.texts().collect();
    let has_result = message.has_tool_call_result();
    if message.parts.is_empty() && message.role != Role::Assistant {
        return Err(format!(
            "a {} message must hold text, a tool call, a tool result, an image, a file or reasoning; only \
             assistant messages can be empty",
            message.role
        ));
    }
    if has_result && message.parts.len() > 1 {
        return Err("a message with a tool result cannot hold anything else".to_owned());
    }

    let mut head = Map::new();
    head.insert("role".into(), Value::String(message.role.as_str().to_owned()));
    if let Some(name) = &message.name {
        head.insert("name".into(), Value::String(name.clone()));
    }

    if message.role == Role::User {
        let content = message.parts.iter().map(user_part).collect::<Result<Vec<_>, _>>()?;
        head.insert("content".into(), Value::Array(content));
        return Ok(vec![Value::Object(head)]);
    }

    let mut items = Vec::new();
    for result in message.tool_call_results() {
        let output = match &result.result {
            ToolResultContent::Text(text) => vec![json!({"type": "input_text", "text": text.as_str()})],
            ToolResultContent::Parts(parts) => parts
                .iter()
                .map(|part| match part {
                    ResultPart::Text(t) => Ok(json!({"type": "input_text", "text": t.text.as_str()})),
                    ResultPart::Image(image) => Ok(image_item(image)),
                    ResultPart::File(file) => Ok(file_item(file)),
                    other => Err(format!("a {} part has no Responses form", other.kind())),
                })
                .collect::<Result<_, String>>()?,
        };
        items.push(json!({
            "type": "function_call_output",
            "call_id": call_id(&result.origin),
            "output": output,
        }));
    }

    for reasoning in message.reasonings() {
        let mut item = Map::new();
        item.insert("summary".into(), json!([]));
        for (key, value) in &reasoning.extra {
            if REASONING_FIELDS.contains(&key.as_str()) {
                item.insert(key.clone(), value.clone());
            }
        }
        // Raw reasoning sent back under `content` is not repeated as a summary.
        if !reasoning.reasoning_text.is_empty() && !item.get("content").is_some_and(truthy) {
            item.insert(
                "summary".into(),
                json!([{"text": reasoning.reasoning_text, "type": "summary_text"}]),
            );
        }
        items.push(Value::Object(item));
    }

    for call in message.tool_calls() {
        let arguments = match &call.raw_arguments {
            Some(raw) => raw.clone(),
            // As the reference sends them: `json.dumps(arguments, ensure_ascii=False)`.
            None => PythonJson::new().ensure_ascii(false).dumps(&Value::from(call.arguments.clone())),
        };
        items.push(json!({
            "type": "function_call",
            "name": call.tool_name,
            "arguments": arguments,
            "id": call.id,
            "call_id": call_id(call),
        }));
    }

    let media: Vec<&Part> =
        message.parts.iter().filter(|p| matches!(p, Part::Image(_) | Part::File(_))).collect();
    if !media.is_empty() && message.role == Role::Assistant {
        return Err("an assistant message cannot carry images or files in the Responses API".to_owned());
    }
    if !media.is_empty() && message.role == Role::System {
        // The reference would keep only the text; a system message takes an input content list.
        let content = message
            .parts
            .iter()
            .filter(|p| matches!(p, Part::Text(_) | Part::Image(_) | Part::File(_)))
            .map(user_part)
            .collect::<Result<Vec<_>, _>>()?;
        head.insert("content".into(), Value::Array(content));
        items.push(Value::Object(head));
    } else if !texts.is_empty() || items.is_empty() {
        head.insert("content".into(), Value::String(texts.join(" ")));
        items.push(Value::Object(head));
    }
    Ok(items)
}

/// A user message's part as an input content part.
fn user_part(part: &Part) -> Result<Value, String> {
    match part {
        Part::Text(t) => Ok(json!({"type": "input_text", "text": t.text.as_str()})),
        Part::Image(image) => Ok(image_item(image)),
        Part::File(file) => Ok(file_item(file)),
        Part::ToolCall(_) => Err("a user message cannot hold a tool call".to_owned()),
        Part::ToolCallResult(_) => Err("a user message cannot hold a tool result".to_owned()),
        Part::Reasoning(_) => Err("a user message cannot hold reasoning".to_owned()),
        other => Err(format!("a {} part has no Responses form", other.kind())),
    }
}

/// An image as a data URL; JPEG when the type is unknown, as the reference assumes (the API
/// tolerates a wrong one).
fn image_item(image: &ImagePart) -> Value {
    let mime = non_empty(image.mime_type.as_deref()).unwrap_or("image/jpeg");
    json!({"type": "input_image", "image_url": format!("data:{mime};base64,{}", image.base64_image)})
}

/// A file as a data URL; the API wants a file name (else it expects an uploaded file's id), so
/// an unnamed file is called `filename`, as in the reference.
fn file_item(file: &FilePart) -> Value {
    let mime = non_empty(file.mime_type.as_deref()).unwrap_or("application/pdf");
    json!({
        "type": "input_file",
        "filename": non_empty(file.filename.as_deref()).unwrap_or("filename"),
        "file_data": format!("data:{mime};base64,{}", file.base64_data),
    })
}

/// `extra["call_id"]` as the reference reads it: `""` when there is no (or an empty) `extra`,
/// `null` when `extra` has no `call_id`.
fn call_id(call: &ToolCall) -> Value {
    match &call.extra {
        Some(extra) if !extra.is_empty() => extra.get("call_id").cloned().unwrap_or(Value::Null),
        _ => Value::String(String::new()),
    }
}

fn non_empty(text: Option<&str>) -> Option<&str> {
    text.filter(|t| !t.is_empty())
}

/// Tool schemas as the Responses API takes them: `{"type": "function", name, description, parameters}`.
pub(crate) fn tools(tools: &[compaction_model::ToolSpec]) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            let mut item = JsonObject::new();
            item.insert("type".into(), json!("function"));
            if let Value::Object(spec) = tool.to_value() {
                item.extend(spec);
            }
            Value::Object(item)
        })
        .collect()
}

/// Python's truth value of a JSON value: `null`, `false`, `0`, `""`, `[]` and `{}` are false.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn truth_values_are_pythons() {
        use serde_json::json;
        for falsy in [json!(null), json!(false), json!(0), json!(0.0), json!(""), json!([]), json!({})] {
            assert!(!super::truthy(&falsy), "{falsy}");
        }
        for true_ in [json!(true), json!(1), json!("x"), json!([0]), json!({"a": null})] {
            assert!(super::truthy(&true_), "{true_}");
        }
    }
}
