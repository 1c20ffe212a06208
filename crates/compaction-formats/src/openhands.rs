//! OpenHands event logs: the `history` of actions and observations of one agent run.
//!
//! Three shapes are read:
//!
//! - events as OpenHands serializes them (2025 and later): `{"id", "source", "action" |
//!   "observation", "args" | "extras", "tool_call_metadata", ...}`;
//! - the evaluation output of 2024, where `history` lists `[action, observation]` pairs of such
//!   events;
//! - the resolver output of 2024, whose events are "memory" dicts: no `id` or `source`, the
//!   action's arguments (or the observation's extras) laid out beside `action` (`observation`).
//!
//! Events become messages as OpenHands' own conversation memory turns them into LLM messages:
//! an action with `tool_call_metadata` is an assistant message (the model's text and its call,
//! read from the logged model response), the observation with the same metadata is that call's
//! result. An action without metadata (agents that did not use function calling) is the model's
//! call of a tool named after the action (`run`, `run_ipython`, `browse`, …) with the action's
//! arguments, after its `thought`; the observation that follows it (or names it as its `cause`)
//! is that call's result. A message is the user's when its `source` says so; memory dicts carry
//! no source, and there the first message is the user's task (as is a message repeating the
//! instance's `instruction`), and a later one is the agent's when it waits for a response.
//! Bookkeeping events (`recall`, agent state changes, null observations) are skipped and counted.
//!
//! A `condensation` action makes OpenHands forget events (by id, or a range of ids) and put its
//! summary in their place: unless the full history is asked for, the conversation read leaves the
//! forgotten events out and holds the latest summary, at its offset, as a user message.

use std::collections::HashSet;

use compaction_model::SharedObject;
use compaction_model::{JsonObject, Message, Part, Role, TextPart, ToolCall};
use serde_json::{Map, Value};

use crate::codec::{Codec, TreeRead};
use crate::conversation::Decoded;
use crate::document::{json_type, Locator};
use crate::error::Error;
use crate::notes::{plural, Note, NoteKind, Tally};
use crate::openai;
use crate::pairing::{unpaired, OpenCalls};
use crate::usage::{MessageUsage, Usage};

/// Keys of a memory-dict action that are not its arguments.
const NOT_ARGUMENTS: &[&str] = &[
    "action",
    "thought",
    "security_risk",
    "is_confirmed",
    "keep_prompt",
    "kernel_init_code",
    "images_urls",
    "wait_for_response",
    "blocking",
    "hidden",
    "confirmation_state",
];

/// An event and the unit (index in `history`) it came from.
struct Event<'a> {
    unit: usize,
    object: &'a Map<String, Value>,
}

pub(crate) fn read(
    history: &[Value],
    locator: &Locator,
    full_history: bool,
    instruction: Option<&str>,
) -> Result<Decoded, Error> {
    let mut events = Vec::with_capacity(history.len());
    let mut skipped = Tally::default();
    for (unit, item) in history.iter().enumerate() {
        match item {
            Value::Object(object) => events.push(Event { unit, object }),
            // 2024 evaluation output: `[action, observation]` pairs.
            Value::Array(pair) => {
                for part in pair {
                    match part {
                        Value::Object(object) => events.push(Event { unit, object }),
                        other => {
                            return Err(locator.invalid(
                                unit,
                                format!("expected a pair of event objects, found {} in it", json_type(other)),
                            ))
                        }
                    }
                }
            }
            other => {
                return Err(
                    locator.invalid(unit, format!("expected an event object, found {}", json_type(other)))
                )
            }
        }
    }
    let condensed = Condensed::of(&events);
    let mut reader = Reader {
        decoded: Decoded::default(),
        calls: OpenCalls::default(),
        last_response: None,
        by_event: Vec::new(),
        memory: events.iter().all(|e| !e.object.contains_key("source") && !e.object.contains_key("id")),
        instruction,
        first_message: true,
    };
    let mut kept = 0;
    let mut forgotten = 0;
    let mut summarized = false;
    for event in &events {
        let id = event.object.get("id").and_then(Value::as_i64);
        if !full_history {
            if !summarized && condensed.summary_offset == Some(kept) {
                reader.summary(event.unit, condensed.summary.as_deref().unwrap_or_default());
                summarized = true;
            }
            if id.is_some_and(|id| condensed.forgotten.contains(&id)) {
                forgotten += 1;
                continue;
            }
            kept += 1;
        }
        reader.event(event, &mut skipped).map_err(|error| locator.invalid(event.unit, error))?;
    }
    if !full_history && !summarized && condensed.summary_offset.is_some() {
        reader.summary(history.len().saturating_sub(1), condensed.summary.as_deref().unwrap_or_default());
    }
    let mut notes = Vec::new();
    if condensed.count > 0 {
        let text = if full_history {
            format!(
                "OpenHands condensed this run {}; read with the full history",
                plural(condensed.count, "time")
            )
        } else {
            format!(
                "OpenHands condensed this run: read what the model saw after it, {} forgotten{} (the full \
                 history keeps them)",
                plural(forgotten, "event"),
                if condensed.summary_offset.is_some() { ", its summary in their place" } else { "" }
            )
        };
        notes.push(Note::new(NoteKind::Compacted, forgotten, text));
    }
    notes.extend(skipped.note("event", "the model never saw"));
    reader.decoded.notes = notes;
    Ok(reader.decoded)
}

/// What the condensation actions of a history say: the events forgotten, and the latest summary.
#[derive(Debug, Default)]
struct Condensed {
    forgotten: HashSet<i64>,
    summary: Option<String>,
    summary_offset: Option<usize>,
    count: usize,
}

impl Condensed {
    fn of(events: &[Event<'_>]) -> Condensed {
        let mut condensed = Condensed::default();
        for event in events {
            let object = event.object;
            let action = object.get("action").and_then(Value::as_str);
            let id = object.get("id").and_then(Value::as_i64);
            if !matches!(action, Some("condensation" | "condensation_request")) {
                continue;
            }
            // The condensation (and the request for one) is forgotten too.
            condensed.forgotten.extend(id);
            if action != Some("condensation") {
                continue;
            }
            condensed.count += 1;
            let args = object.get("args").and_then(Value::as_object).unwrap_or(object);
            let number = |key: &str| args.get(key).and_then(Value::as_i64);
            if let Some(Value::Array(ids)) = args.get("forgotten_event_ids") {
                condensed.forgotten.extend(ids.iter().filter_map(Value::as_i64));
            } else if let (Some(start), Some(end)) =
                (number("forgotten_events_start_id"), number("forgotten_events_end_id"))
            {
                condensed.forgotten.extend(start..=end);
            }
            let summary = args.get("summary").and_then(Value::as_str);
            let offset = number("summary_offset").and_then(|o| usize::try_from(o).ok());
            if let (Some(summary), Some(offset)) = (summary, offset) {
                condensed.summary = Some(summary.to_owned());
                condensed.summary_offset = Some(offset);
            }
        }
        condensed
    }
}

struct Reader<'a> {
    decoded: Decoded,
    calls: OpenCalls,
    /// The model response the latest assistant message came from: parallel calls are one action
    /// each, all with the same response.
    last_response: Option<(String, usize)>,
    /// For actions without metadata: (event id, call) of the calls made, for `cause`.
    by_event: Vec<(i64, ToolCall)>,
    /// Whether the events are 2024 memory dicts (no `source`, no `id`).
    memory: bool,
    instruction: Option<&'a str>,
    first_message: bool,
}

impl Reader<'_> {
    fn push(&mut self, unit: usize, message: Message) {
        self.decoded.extend(unit, vec![message]);
    }

    fn summary(&mut self, unit: usize, summary: &str) {
        self.push(unit, text_message(Role::User, summary.to_owned()));
    }

    fn event(&mut self, event: &Event<'_>, skipped: &mut Tally) -> Result<(), String> {
        let object = event.object;
        let unit = event.unit;
        let metadata = object.get("tool_call_metadata").and_then(Value::as_object);
        if let Some(action) = object.get("action") {
            let Some(action) = action.as_str() else {
                return Err(format!("`action` must be a string, found {}", json_type(action)));
            };
            return self.action(unit, object, action, metadata, skipped);
        }
        if let Some(observation) = object.get("observation") {
            let Some(observation) = observation.as_str() else {
                return Err(format!("`observation` must be a string, found {}", json_type(observation)));
            };
            return self.observation(unit, object, observation, metadata, skipped);
        }
        skipped.add("neither action nor observation");
        Ok(())
    }

    /// The arguments of an action: `args`, or in a memory dict the keys beside `action`.
    fn arguments(object: &Map<String, Value>) -> JsonObject {
        match object.get("args").and_then(Value::as_object) {
            Some(args) => args.clone(),
            None => object
                .iter()
                .filter(|(k, _)| !NOT_ARGUMENTS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    fn field<'v>(object: &'v Map<String, Value>, key: &str) -> Option<&'v str> {
        object.get("args").and_then(|a| a.get(key)).or_else(|| object.get(key)).and_then(Value::as_str)
    }

    fn action(
        &mut self,
        unit: usize,
        object: &Map<String, Value>,
        action: &str,
        metadata: Option<&Map<String, Value>>,
        skipped: &mut Tally,
    ) -> Result<(), String> {
        let text = |key: &str| Self::field(object, key).unwrap_or_default().to_owned();
        let content = || Self::field(object, "content").map(str::to_owned).unwrap_or_else(|| text("message"));
        if let Some(metadata) = metadata {
            let (response_id, thought, call) = action_call(object, metadata)?;
            let usage = metadata.get("model_response").and_then(|r| r.get("usage")).and_then(usage);
            self.calls.push(&call);
            if let (Some((last, position)), Some(id)) = (&self.last_response, &response_id) {
                if last == id {
                    let position = *position;
                    self.decoded.messages[position].parts.push(Part::ToolCall(call));
                    return Ok(());
                }
            }
            let mut parts = Vec::new();
            if let Some(thought) = thought.filter(|t| !t.is_empty()) {
                parts.push(Part::Text(TextPart::new(thought)));
            }
            parts.push(Part::ToolCall(call));
            if let Some(id) = response_id {
                self.last_response = Some((id, self.decoded.messages.len()));
            }
            if let Some(usage) = usage {
                self.decoded.usage.push(MessageUsage::new(self.decoded.messages.len(), usage));
            }
            self.push(unit, Message { role: Role::Assistant, parts, name: None, meta: SharedObject::new() });
            return Ok(());
        }
        match action {
            "recall" | "change_agent_state" | "condensation" | "condensation_request" | "null" => {
                skipped.add(action);
            }
            "system" => self.push(unit, text_message(Role::System, content())),
            "message" => {
                let role = self.message_role(object, &content())?;
                self.first_message = false;
                self.push(unit, text_message(role, content()));
            }
            "finish" | "think" | "reject" => {
                let said = [text("thought"), text("final_thought"), content()]
                    .into_iter()
                    .find(|t| !t.is_empty())
                    .unwrap_or_default();
                if said.is_empty() {
                    skipped.add(&format!("empty {action}"));
                } else {
                    self.push(unit, text_message(Role::Assistant, said));
                }
            }
            kind => {
                // An agent without function calling: the action is its call of a tool of that name.
                let mut arguments = Self::arguments(object);
                let thought = text("thought");
                arguments.remove("thought");
                let id = object.get("id").and_then(Value::as_i64);
                let mut call = ToolCall::new(kind, arguments);
                call.id = id.map(|id| format!("event-{id}"));
                self.calls.push(&call);
                if let Some(id) = id {
                    self.by_event.push((id, call.clone()));
                }
                let mut parts = Vec::new();
                if !thought.is_empty() {
                    parts.push(Part::Text(TextPart::new(thought)));
                }
                parts.push(Part::ToolCall(call));
                self.push(
                    unit,
                    Message { role: Role::Assistant, parts, name: None, meta: SharedObject::new() },
                );
            }
        }
        Ok(())
    }

    /// Who wrote a message action: its `source`; in memory dicts (no source) the first message
    /// or one repeating the instruction is the user's task, and a later one is the agent's when
    /// it waits for a response.
    fn message_role(&self, object: &Map<String, Value>, content: &str) -> Result<Role, String> {
        match object.get("source").and_then(Value::as_str) {
            Some("user") => return Ok(Role::User),
            Some("agent") => return Ok(Role::Assistant),
            Some(other) => {
                return Err(format!(
                    "a message from {}, neither user nor agent",
                    crate::error::snippet(other)
                ))
            }
            None => {}
        }
        if self.first_message || self.instruction.is_some_and(|i| i == content) {
            return Ok(Role::User);
        }
        let waits = object.get("wait_for_response").and_then(Value::as_bool) == Some(true)
            || object.get("args").and_then(|a| a.get("wait_for_response")).and_then(Value::as_bool)
                == Some(true);
        if self.memory {
            return Ok(if waits { Role::Assistant } else { Role::User });
        }
        Err("a message without `source`: who wrote it is not recorded".into())
    }

    fn observation(
        &mut self,
        unit: usize,
        object: &Map<String, Value>,
        observation: &str,
        metadata: Option<&Map<String, Value>>,
        skipped: &mut Tally,
    ) -> Result<(), String> {
        let content = object.get("content").and_then(Value::as_str).unwrap_or_default().to_owned();
        let error = observation == "error";
        if let Some(metadata) = metadata {
            let id = metadata.get("tool_call_id").and_then(Value::as_str);
            let origin = self.calls.answer(id).ok_or_else(|| unpaired(id))?;
            self.push(unit, Message::tool(content, origin, error));
            return Ok(());
        }
        match observation {
            "recall" | "agent_state_changed" | "null" | "user_rejected" | "agent_think" | "think" => {
                skipped.add(&format!("{observation} observation"));
                return Ok(());
            }
            _ => {}
        }
        // The observation of an action made without function calling: by `cause`, else the
        // nearest open call.
        let cause = object.get("cause").and_then(Value::as_i64);
        let by_cause = cause
            .and_then(|c| self.by_event.iter().find(|(id, _)| *id == c))
            .map(|(_, call)| call.id.clone());
        let origin = match by_cause {
            Some(id) => self.calls.answer(id.as_deref()),
            None if !self.by_event.is_empty() || self.memory => self.calls.answer(None),
            None => None,
        };
        match origin {
            Some(origin) => self.push(unit, Message::tool(content, origin, error)),
            // An observation no call asked for (an error the agent caused, a condensation
            // summary): OpenHands shows it to the model as a user message.
            None => self.push(unit, text_message(Role::User, content)),
        }
        Ok(())
    }
}

/// A logged model response's `usage` (OpenAI's: the prompt with its cached part inside it).
fn usage(usage: &Value) -> Option<Usage> {
    let count = |value: Option<&Value>| value.and_then(Value::as_u64).unwrap_or(0);
    let prompt = count(usage.get("prompt_tokens"));
    let cached = count(usage.get("prompt_tokens_details").and_then(|d| d.get("cached_tokens"))).min(prompt);
    let usage = Usage::new(prompt - cached, count(usage.get("completion_tokens"))).with_cache(cached, 0);
    (!usage.is_zero()).then_some(usage)
}

fn text_message(role: Role, text: String) -> Message {
    Message { role, parts: vec![Part::Text(TextPart::new(text))], name: None, meta: SharedObject::new() }
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

/// OpenHands event logs.
pub(crate) struct OpenHands;

impl Codec for OpenHands {
    fn read_tree(&self, values: &[Value], tree: &TreeRead<'_>) -> Result<Decoded, Error> {
        read(values, tree.locator, tree.full_history, tree.instruction)
    }
}
