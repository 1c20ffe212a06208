//! OpenHands event logs: the `history` of actions and observations of one agent run.
//!
//! Events become messages as OpenHands' own conversation memory turns them into LLM messages:
//! an action with `tool_call_metadata` is an assistant message (the model's text and its call,
//! read from the logged model response), the observation with the same metadata is that call's
//! result, an observation without one (an `ErrorObservation` the agent caused) is a user message,
//! and bookkeeping events (`recall`, agent state changes) are skipped.

use compaction_model::{JsonObject, Message, Part, Role, TextPart, ToolCall};
use serde_json::{Map, Value};

use crate::document::{json_type, Locator};
use crate::error::Error;
use crate::pairing::{unpaired, OpenCalls};
use crate::{openai, Decoded};

pub(crate) fn read(events: &[Value], locator: &Locator) -> Result<Decoded, Error> {
    let mut decoded = Decoded::default();
    let mut calls = OpenCalls::default();
    // The model response the latest assistant message came from: parallel calls are one action
    // each, all with the same response.
    let mut last_response: Option<(String, usize)> = None;
    for (index, event) in events.iter().enumerate() {
        let at = |error: String| locator.invalid(index, error);
        let Some(object) = event.as_object() else {
            return Err(at(format!("expected an event object, found {}", json_type(event))));
        };
        let text = |key: &str| object.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        let args_content =
            || object.get("args").and_then(|a| a.get("content")).and_then(Value::as_str).map(str::to_owned);
        let metadata = object.get("tool_call_metadata").and_then(Value::as_object);
        let message = if let Some(action) = object.get("action").and_then(Value::as_str) {
            match (action, metadata) {
                ("recall", _) => continue,
                ("system", _) => {
                    text_message(Role::System, args_content().unwrap_or_else(|| text("message")))
                }
                (_, Some(metadata)) => {
                    let (response_id, thought, call) = action_call(object, metadata).map_err(at)?;
                    calls.push(&call);
                    if let (Some((last, position)), Some(id)) = (&last_response, &response_id) {
                        if last == id {
                            decoded.messages[*position].parts.push(Part::ToolCall(call));
                            continue;
                        }
                    }
                    let mut parts = Vec::new();
                    if let Some(thought) = thought.filter(|t| !t.is_empty()) {
                        parts.push(Part::Text(TextPart::new(thought)));
                    }
                    parts.push(Part::ToolCall(call));
                    if let Some(id) = response_id {
                        last_response = Some((id, decoded.messages.len()));
                    }
                    Message { role: Role::Assistant, parts, name: None, meta: JsonObject::new() }
                }
                ("message", None) if object.get("source").and_then(Value::as_str) == Some("user") => {
                    text_message(Role::User, args_content().unwrap_or_else(|| text("message")))
                }
                (_, None) => text_message(Role::Assistant, args_content().unwrap_or_else(|| text("message"))),
            }
        } else if let Some(observation) = object.get("observation").and_then(Value::as_str) {
            match (observation, metadata) {
                (_, Some(metadata)) => {
                    let id = metadata.get("tool_call_id").and_then(Value::as_str);
                    let origin = calls.answer(id).ok_or_else(|| at(unpaired(id)))?;
                    Message::tool(text("content"), origin, observation == "error")
                }
                ("recall" | "agent_state_changed" | "null" | "agent_condensation", None) => continue,
                (_, None) => text_message(Role::User, text("content")),
            }
        } else {
            continue;
        };
        decoded.extend(index, vec![message]);
    }
    Ok(decoded)
}

fn text_message(role: Role, text: String) -> Message {
    Message { role, parts: vec![Part::Text(TextPart::new(text))], name: None, meta: JsonObject::new() }
}

/// The model response's id, its text, and the call an action made.
fn action_call(
    event: &Map<String, Value>,
    metadata: &Map<String, Value>,
) -> Result<(Option<String>, Option<String>, ToolCall), String> {
    let id = metadata.get("tool_call_id").and_then(Value::as_str);
    let response = metadata.get("model_response");
    let response_id = response.and_then(|r| r.get("id")).and_then(Value::as_str).map(str::to_owned);
    let message =
        response.and_then(|r| r.get("choices")).and_then(|c| c.get(0)).and_then(|c| c.get("message"));
    let thought = message.and_then(|m| m.get("content")).and_then(Value::as_str).map(str::to_owned);
    let logged = message
        .and_then(|m| m.get("tool_calls"))
        .and_then(Value::as_array)
        .and_then(|calls| calls.iter().find(|call| call.get("id").and_then(Value::as_str) == id));
    let call = match logged {
        Some(call) => openai::tool_call(call).map_err(|error| format!("`tool_call_metadata`: {error}"))?,
        None => {
            let Some(name) = metadata.get("function_name").and_then(Value::as_str) else {
                return Err("`tool_call_metadata` has neither the logged call nor `function_name`".into());
            };
            let arguments = event.get("args").and_then(Value::as_object).cloned().unwrap_or_default();
            let mut call = ToolCall::new(name, arguments);
            call.id = id.map(str::to_owned);
            call
        }
    };
    Ok((response_id, thought, call))
}
