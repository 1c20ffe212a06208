//! The tool-call ids a provider format requires, made up where the input has none.
//!
//! Haystack lets a tool call and its result go without an id (`"id": null`); OpenAI's and
//! Anthropic's messages pair a result with its call by id, and their readers (this crate's
//! among them) refuse a `tool_use` without one or a result whose call is not before it. Before
//! messages are converted to such a format, each call without an id is given one, and the result
//! that answers it the same; a result that cannot be paired with a call before it is refused,
//! naming the messages, so nothing is written that reads back as an error. So is a call or a
//! result in a message the target has no place for it in (Chat Completions holds calls on
//! assistant messages and results as tool messages only), which would be lost or written as a
//! tool message without its call id.

use std::borrow::Cow;
use std::collections::HashSet;

use compaction_model::{Message, Part, Role, ToolCall};

use crate::error::Error;
use crate::format::Target;
use crate::notes::{Note, NoteKind};

/// The prefix of an id made up here; a number follows, the first one no id of the input uses.
const PREFIX: &str = "call_compaction_";

/// A call the output holds, as the walk meets it.
struct Open<'a> {
    call: &'a ToolCall,
    /// The id it is written with: its own, or one made up.
    id: String,
    /// Whether the input gave it none.
    made: bool,
    answered: bool,
}

/// Where an id was made up: the message and part of a call, or of a result that answers one.
type Slot = (usize, usize, String);

/// `messages` with an id on every call and result that `target` writes, and a note saying how
/// many were made up; the messages as they are when nothing needed one. Haystack needs none.
///
/// # Errors
///
/// [`Error::Unwritable`] naming the message of a tool result whose call is not before it (it
/// comes later, or nowhere): the target's readers would refuse the output; or naming a message
/// that holds a call or a result `target` has no place for ([`misplaced`]).
pub(crate) fn complete(
    messages: &[Message],
    target: Target,
) -> Result<(Cow<'_, [Message]>, Option<Note>), Error> {
    if target == Target::Haystack {
        return Ok((Cow::Borrowed(messages), None));
    }
    let taken: HashSet<&str> = messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|part| match part {
            Part::ToolCall(call) => call.id.as_deref(),
            Part::ToolCallResult(result) => result.origin.id.as_deref(),
            _ => None,
        })
        .collect();
    let mut next = 0usize;
    let mut fresh_id = || loop {
        let id = format!("{PREFIX}{next}");
        next += 1;
        if !taken.contains(id.as_str()) {
            return id;
        }
    };
    let mut open: Vec<Open> = Vec::new();
    let mut made: Vec<Slot> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        if let Some(problem) = misplaced(index, message, target) {
            return Err(Error::Unwritable { target, problem });
        }
        for (k, part) in message.parts.iter().enumerate() {
            match part {
                Part::ToolCall(call) if writes_call(target, message.role) => {
                    let (id, is_made) = match &call.id {
                        Some(id) => (id.clone(), false),
                        None => (fresh_id(), true),
                    };
                    if is_made {
                        made.push((index, k, id.clone()));
                    }
                    open.push(Open { call, id, made: is_made, answered: false });
                }
                Part::ToolCallResult(result) if writes_result(target, message.role) => {
                    let origin = &result.origin;
                    let found = match &origin.id {
                        Some(id) => answering(&open, |o| !o.made && o.id == *id),
                        None => answering(&open, |o| o.made && same_call(o.call, origin))
                            .or_else(|| answering(&open, |o| o.made && o.call.tool_name == origin.tool_name)),
                    };
                    let Some(position) = found else {
                        return Err(unpaired(messages, index, origin, target));
                    };
                    let call = &mut open[position];
                    call.answered = true;
                    if origin.id.is_none() {
                        made.push((index, k, call.id.clone()));
                    }
                }
                _ => {}
            }
        }
    }
    if made.is_empty() {
        return Ok((Cow::Borrowed(messages), None));
    }
    let mut out = messages.to_vec();
    let mut indices: Vec<usize> = Vec::new();
    for (index, k, id) in made {
        match out.get_mut(index).and_then(|m| m.parts.get_mut(k)) {
            Some(Part::ToolCall(call)) => call.id = Some(id),
            Some(Part::ToolCallResult(result)) => result.origin.id = Some(id),
            _ => {}
        }
        if indices.last() != Some(&index) {
            indices.push(index);
        }
    }
    let mut shown: Vec<String> = indices.iter().take(8).map(ToString::to_string).collect();
    if indices.len() > 8 {
        shown.push(format!("… ({} in all)", indices.len()));
    }
    let noun = if indices.len() == 1 { "message" } else { "messages" };
    let text = format!(
        "written as {target}: tool calls without an id given one ({PREFIX}N, the same on the result that \
         answers each; {target} pairs them by id): {noun} {}",
        shown.join(", ")
    );
    Ok((Cow::Owned(out), Some(Note::new(NoteKind::Added, indices.len(), text))))
}

/// Whether `target` writes the calls of a message with `role` (Chat Completions holds calls on
/// assistant messages only; Anthropic's system prompt holds none).
fn writes_call(target: Target, role: Role) -> bool {
    match target {
        Target::OpenAi => role == Role::Assistant,
        Target::Anthropic | Target::Haystack => role != Role::System,
    }
}

/// Whether `target` writes the results of a message with `role`.
fn writes_result(target: Target, role: Role) -> bool {
    match target {
        Target::OpenAi => role == Role::Tool,
        Target::Anthropic | Target::Haystack => role != Role::System,
    }
}

/// What stands in the way of writing the message at `index` as `target`, when a call or a result
/// in it has no place there. Chat Completions holds calls on assistant messages, and results as
/// tool messages, one each with the call's id: a result elsewhere would be left out, and a tool
/// message without one written with no id, which its readers refuse. A tool message's calls
/// beside its result are left out with a note (see `write::losses`); Anthropic and Haystack
/// place every call and result but the system prompt's, which has none.
fn misplaced(index: usize, message: &Message, target: Target) -> Option<String> {
    if target != Target::OpenAi {
        return None;
    }
    const KEEP: &str = "Chat Completions holds tool calls on assistant messages and results as tool \
                        messages only (write haystack to keep it)";
    let role = message.role;
    if role == Role::Tool {
        if message.has_tool_call_result() {
            return None;
        }
        let holds = match message.tool_calls().next() {
            Some(call) => format!("it holds tool call {}", described(call)),
            None if message.parts.is_empty() => "it is empty".to_owned(),
            None => "it holds no call's result".to_owned(),
        };
        return Some(format!("message {index} is a tool message without a tool result ({holds}); {KEEP}"));
    }
    let article = if role == Role::Assistant { "an" } else { "a" };
    if let Some(result) = message.tool_call_results().next() {
        return Some(format!(
            "message {index} is {article} {role} message holding the result of tool call {}; {KEEP}",
            described(&result.origin),
            role = role.as_str(),
        ));
    }
    match message.tool_calls().next() {
        Some(call) if role != Role::Assistant => Some(format!(
            "message {index} is {article} {role} message holding tool call {}; {KEEP}",
            described(call),
            role = role.as_str(),
        )),
        _ => None,
    }
}

/// A call as an error names it: its tool, and its id or that it has none.
fn described(call: &ToolCall) -> String {
    let name = crate::error::snippet(&call.tool_name);
    match &call.id {
        Some(id) => format!("{name} (id {})", crate::error::snippet(id)),
        None => format!("{name} (no id)"),
    }
}

/// The nearest call a result answers, as the readers pair them: the nearest unanswered one that
/// `fits`, else the nearest answered one (a second result for one call).
fn answering(open: &[Open], fits: impl Fn(&Open) -> bool) -> Option<usize> {
    open.iter().rposition(|o| !o.answered && fits(o)).or_else(|| open.iter().rposition(fits))
}

/// Whether `call` is the call a result's `origin` copies (Haystack keeps the call on its result).
fn same_call(call: &ToolCall, origin: &ToolCall) -> bool {
    call.tool_name == origin.tool_name && call.arguments == origin.arguments
}

/// The error for the result at message `index`, whose call no message before it holds: the
/// later message that does, if one does.
fn unpaired(messages: &[Message], index: usize, origin: &ToolCall, target: Target) -> Error {
    let fits = |call: &ToolCall| match &origin.id {
        Some(id) => call.id.as_deref() == Some(id.as_str()),
        None => call.id.is_none() && call.tool_name == origin.tool_name,
    };
    let later = messages
        .iter()
        .enumerate()
        .skip(index + 1)
        .find(|(_, m)| writes_call(target, m.role) && m.tool_calls().any(fits))
        .map(|(later, _)| later);
    let call = format!("call {}", described(origin));
    let problem = match later {
        Some(later) => format!(
            "message {index} holds the result of tool {call}, which comes after it, in message {later}; \
             each result must follow its call (move the result after the call, or write haystack)"
        ),
        None => format!(
            "message {index} holds the result of tool {call}, which no message before it makes; each \
             result must follow its call (write haystack to keep it)"
        ),
    };
    Error::Unwritable { target, problem }
}
