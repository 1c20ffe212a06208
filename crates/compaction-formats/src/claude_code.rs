//! Claude Code session logs: one event a line; `user` and `assistant` events carry an Anthropic
//! `message`.
//!
//! Claude Code writes each content block of an assistant turn as its own event, all sharing the
//! API message's `message.id`, with tool results sometimes logged between them; the events of
//! one id are one assistant message. Other events (progress, file-history snapshots, system
//! notes, queue operations) were never sent to the model and are skipped, as are sidechain
//! events (subagents' conversations).

use compaction_model::Role;
use serde_json::Value;

use crate::document::{json_type, Locator};
use crate::error::Error;
use crate::pairing::OpenCalls;
use crate::{anthropic, Decoded};

pub(crate) fn read(events: &[Value], locator: &Locator) -> Result<Decoded, Error> {
    let mut decoded = Decoded::default();
    let mut calls = OpenCalls::default();
    // The id and position of the latest assistant message.
    let mut last_turn: Option<(String, usize)> = None;
    for (index, event) in events.iter().enumerate() {
        let at = |error: String| locator.invalid(index, error);
        let Some(object) = event.as_object() else {
            return Err(at(format!("expected an event object, found {}", json_type(event))));
        };
        if object.get("isSidechain").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        let kind = object.get("type").and_then(Value::as_str);
        if !matches!(kind, Some("user" | "assistant")) {
            continue;
        }
        let message =
            object.get("message").ok_or_else(|| at("a user or assistant event without `message`".into()))?;
        let messages = anthropic::read_message(message, &mut calls).map_err(at)?;
        let id = message.get("id").and_then(Value::as_str);
        match (&last_turn, id, messages.as_slice()) {
            (Some((last, position)), Some(id), [turn]) if last == id && turn.role == Role::Assistant => {
                let parts = messages.into_iter().flat_map(|m| m.parts);
                decoded.messages[*position].parts.extend(parts);
            }
            _ => {
                if let (Some(id), [turn]) = (id, messages.as_slice()) {
                    if turn.role == Role::Assistant {
                        last_turn = Some((id.to_owned(), decoded.messages.len()));
                    }
                }
                decoded.extend(index, messages);
            }
        }
    }
    Ok(decoded)
}
