//! A Responses request (its `input` array, or a bare array of items) written back with messages
//! dropped or put in: every byte outside the array as it was, each message kept written as the
//! items it was read from (their bytes copied, its changed tool results and inputs edited in
//! place), and each message put in, or changed beyond its results and inputs, encoded afresh as
//! the items the Responses reader reads back into it, as the OpenAI and Anthropic request
//! writers encode such a message afresh.

use std::io::Write;
use std::ops::Range;

use compaction_json::scan::whitespace as skip_whitespace;
use compaction_json::splice::{self, Edit, Seg};
use compaction_model::{Message, Part, Role, ToolResultContent};
use serde_json::{json, Value};

use crate::codec::Codec;
use crate::error::Error;
use crate::eventlog::{fingerprint, EventLog, MessageSlots, Slot, Style as SlotStyle};
use crate::logback::{encode_result, message_edits};
use crate::provider::provider_item;
use crate::style::{margin, Style};

/// One item of the output: a range of the input's bytes (with edits inside it applied), or an
/// item encoded afresh.
enum Item {
    Copied(Range<usize>),
    Fresh(Value),
}

/// Writes `messages`, each standing for the message read at its `origin` (`None` for one put
/// in), over `source`, a Responses request whose items went to the messages `owners` says and
/// were read as `read_messages`.
#[allow(clippy::too_many_arguments)] // one call, in `write.rs`; the pieces of one conversation
pub(crate) fn write_rewritten(
    source: &[u8],
    log: &EventLog,
    owners: &[Option<usize>],
    read_messages: &[Message],
    codec: &dyn Codec,
    messages: &[Message],
    origin: &[Option<usize>],
    out: &mut dyn Write,
) -> Result<(), Error> {
    let read = log.slots.len();
    if origin.len() != messages.len() || origin.iter().flatten().any(|&index| index >= read) {
        return Err(Error::WriteBack {
            reason: "the messages' origins do not match the conversation read".into(),
        });
    }
    let mut seen = vec![false; read];
    for &index in origin.iter().flatten() {
        if std::mem::replace(&mut seen[index], true) {
            return Err(Error::WriteBack {
                reason: format!(
                    "message {index} read is written twice; a Responses request holds its items once"
                ),
            });
        }
    }
    check_reads_back(messages)?;
    let (array, spans) = locate_items(source, log, owners)?;
    // Each message's items, first to last: those of a model call are read one after another, so
    // an item the reader skipped between two of them stays with them.
    let mut bounds: Vec<Option<Range<usize>>> = vec![None; read];
    for (item, owner) in owners.iter().enumerate() {
        let Some(bound) = owner.and_then(|owner| bounds.get_mut(owner)) else { continue };
        match bound {
            Some(range) => range.end = item + 1,
            None => *bound = Some(item..item + 1),
        }
    }
    // The items of no message (skipped ones, `ghost_snapshot`) before a message's first item:
    // they stay where they are only when the message before it in the input is also the one
    // before it in the output (or both begin it), as what lay between two kept neighbours; a
    // dropped run, or a message put in or moved there, takes them away. They tell the model
    // nothing, so nothing is lost, and nothing is left beside messages it no longer belongs to.
    let mut items = Vec::new();
    let mut edits = Vec::new();
    for (k, (message, origin_k)) in messages.iter().zip(origin).enumerate() {
        let Some(index) = *origin_k else {
            items.extend(encode(message, k)?.into_iter().map(Item::Fresh));
            continue;
        };
        let slots = &log.slots[index];
        let Some(bound) = bounds[index].clone() else {
            return Err(Error::WriteBack {
                reason: format!("message {index} read has no item to write back"),
            });
        };
        let previous = index.checked_sub(1);
        let follows = match k.checked_sub(1) {
            None => previous.is_none(),
            Some(before) => previous.is_some() && origin[before] == previous,
        };
        if follows {
            let gap_start = previous.and_then(|p| bounds[p].as_ref()).map_or(0, |range| range.end);
            items.extend((gap_start..bound.start).map(|item| Item::Copied(spans[item].clone())));
        }
        // A message as read is copied without a look at its slots: finding one walks the array
        // from its start, which for every message of a long request would cost the square.
        if read_messages.get(index) == Some(message) {
            items.extend(bound.clone().map(|item| Item::Copied(spans[item].clone())));
        } else if fingerprint(message, slots) != slots.fingerprint {
            // Changed beyond its results and inputs: encoded afresh, as the request writers do,
            // when encoding gives back all its items hold; an item of another kind (a
            // `local_shell_call` would come out a `function_call`) or with fields encoding does
            // not write (an `id`, annotations) is refused, not written as something less.
            if let Some(why) = bound.clone().find_map(|item| not_encoded_again(&source[spans[item].clone()]))
            {
                return Err(Error::WriteBack {
                    reason: format!(
                        "message {index} read was changed beyond its tool results and inputs, and one of its \
                         items ({why}) cannot be encoded again as it was read"
                    ),
                });
            }
            items.extend(encode(message, k)?.into_iter().map(Item::Fresh));
        } else {
            let (items_log, slots) = from_items(log, slots, &spans);
            edits.extend(message_edits(source, &items_log, codec, message, &slots, index)?);
            items.extend(bound.clone().map(|item| Item::Copied(spans[item].clone())));
        }
        if index + 1 == read && k + 1 == messages.len() {
            items.extend((bound.end..spans.len()).map(|item| Item::Copied(spans[item].clone())));
        }
    }
    // Rendered before the first byte is written, so a failure writes nothing.
    let like = spans.first().map_or(array.start, |span| span.start);
    let style = Style::of(source, like);
    let margin = if style.indent.is_some() { margin(source, like) } else { &[] };
    // Characters beyond ASCII escaped when the whole input is ASCII, asked only of an item that
    // has some: a long request is not scanned again for every note.
    let mut ascii = None;
    let mut fresh = Vec::new();
    for item in &items {
        if let Item::Fresh(value) = item {
            let mut bytes = Vec::new();
            style.write(value, margin, &mut bytes)?;
            if !bytes.is_ascii() && *ascii.get_or_insert_with(|| source.is_ascii()) {
                bytes.clear();
                Style { ascii: true, ..style.clone() }.write(value, margin, &mut bytes)?;
            }
            fresh.push(bytes);
        }
    }
    // The input's spacing around and between its items: what follows `[`, what comes between
    // its first two items (a comma and the same break, when it had one item), what precedes `]`.
    let inner = skip_whitespace(source, array.start + 1);
    let lead = &source[array.start + 1..inner];
    let separator: Vec<u8> = match (spans.first(), spans.get(1)) {
        (Some(first), Some(second)) => source[first.end..second.start].to_vec(),
        _ => [b",".as_slice(), lead].concat(),
    };
    let tail = match spans.last() {
        Some(last) => &source[last.end..array.end - 1],
        None => &[][..],
    };
    edits.sort_by_key(|edit| edit.range.start);
    out.write_all(&source[..array.start + 1])?;
    if !items.is_empty() {
        out.write_all(lead)?;
    }
    let mut fresh = fresh.into_iter();
    for (k, item) in items.iter().enumerate() {
        if k > 0 {
            out.write_all(&separator)?;
        }
        match item {
            Item::Copied(range) => write_with_edits(source, range.clone(), &edits, out)?,
            Item::Fresh(_) => out.write_all(&fresh.next().unwrap_or_default())?,
        }
    }
    if !items.is_empty() {
        out.write_all(tail)?;
    }
    out.write_all(&source[array.end - 1..])?;
    Ok(())
}

/// `slots` found from their items' first bytes instead of the request's: each path cut after
/// its item's index, each base that item's bytes. Followed from the request's start, a slot's
/// path walks every item before it, which for every result of a long request costs the square.
fn from_items(log: &EventLog, slots: &MessageSlots, spans: &[Range<usize>]) -> (EventLog, MessageSlots) {
    // The request's own bases first, for a slot with no item index in its path.
    let mut bases = log.bases.clone();
    let mut moved = |slot: &Option<Slot>| {
        let slot = slot.as_ref()?;
        let at = slot.path.iter().position(|seg| matches!(seg, Seg::Index(_)));
        let Some((at, Seg::Index(item))) = at.map(|at| (at, &slot.path[at])) else {
            return Some(slot.clone());
        };
        let Some(span) = spans.get(*item as usize) else { return Some(slot.clone()) };
        bases.push(span.clone());
        let base = u32::try_from(bases.len() - 1).unwrap_or(u32::MAX);
        Some(Slot { base, path: slot.path[at + 1..].into(), span: None, ..slot.clone() })
    };
    let results = slots.results.iter().map(&mut moved).collect();
    let calls = slots.calls.iter().map(&mut moved).collect();
    let slots = MessageSlots { results, calls, fingerprint: slots.fingerprint };
    (EventLog { bases, ..EventLog::default() }, slots)
}

/// The input array's bytes and each item's, found again in `source`.
fn locate_items(
    source: &[u8],
    log: &EventLog,
    owners: &[Option<usize>],
) -> Result<(Range<usize>, Vec<Range<usize>>), Error> {
    let lost =
        || Error::WriteBack { reason: "the request's items are no longer where they were read".into() };
    let body = log.bases.first().ok_or_else(lost)?;
    let start = skip_whitespace(source, body.start);
    let array = match source.get(start) {
        Some(b'[') => start..compaction_json::scan::skip_value(source, start).ok_or_else(lost)?,
        _ => splice::find(&source[..body.end], body.start, &[Seg::Key("input")]).ok_or_else(lost)?,
    };
    let spans = splice::elements(source, array.start).ok_or_else(lost)?;
    if spans.len() != owners.len() {
        return Err(lost());
    }
    Ok((array, spans))
}

/// `source[range]` with the edits inside it applied (`edits` sorted, none crossing `range`).
fn write_with_edits(
    source: &[u8],
    range: Range<usize>,
    edits: &[Edit],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let first = edits.partition_point(|edit| edit.range.start < range.start);
    let mut at = range.start;
    for edit in edits[first..].iter().take_while(|edit| edit.range.end <= range.end) {
        out.write_all(&source[at..edit.range.start])?;
        out.write_all(&edit.bytes)?;
        at = edit.range.end;
    }
    out.write_all(&source[at..range.end])
}

/// Refuses messages the Responses reader would not read back as they are: two assistant
/// messages in a row (a model call's items are one message, so they would be read as one), a
/// tool result whose call no message before it makes (the reader pairs an output with a call
/// by `call_id`, and refuses one it cannot pair; so does the API).
fn check_reads_back(messages: &[Message]) -> Result<(), Error> {
    let mut called = std::collections::HashSet::new();
    for (k, message) in messages.iter().enumerate() {
        for result in message.tool_call_results() {
            let id = result.origin.id.as_deref();
            if !id.is_some_and(|id| called.contains(id)) {
                return Err(Error::WriteBack {
                    reason: format!(
                        "message {k} answers call {}, which no message before it makes; a Responses \
                         request pairs each output with its call",
                        id.unwrap_or("(without an id)")
                    ),
                });
            }
        }
        called.extend(message.tool_calls().filter_map(|call| call.id.as_deref()));
    }
    for (k, pair) in messages.windows(2).enumerate() {
        if pair[0].role == Role::Assistant && pair[1].role == Role::Assistant {
            return Err(Error::WriteBack {
                reason: format!(
                    "messages {k} and {} are both assistant messages, which a Responses request \
                     would read back as one",
                    k + 1
                ),
            });
        }
    }
    Ok(())
}

/// Content part kinds: a part kept opaque with one of these was read inside a message's
/// `content`; any other was an item of its own.
const CONTENT_KINDS: &[&str] = &[
    "input_text",
    "output_text",
    "text",
    "refusal",
    "input_image",
    "input_file",
    "input_audio",
    "output_audio",
];

/// The items message `k` is written as: those the Responses reader reads back into it.
fn encode(message: &Message, k: usize) -> Result<Vec<Value>, Error> {
    let refuse = |what: &str| Error::WriteBack {
        reason: format!("message {k}: {what} cannot be written as a Responses item"),
    };
    match message.role {
        Role::Tool => {
            let [Part::ToolCallResult(result)] = message.parts.as_slice() else {
                return Err(refuse("a tool message that is not one tool result"));
            };
            let id = result.origin.id.as_deref().ok_or_else(|| refuse("a tool result without a call id"))?;
            let output = match (&result.result, result.error) {
                // Codex's older output object is the only one that says a call failed.
                (ToolResultContent::Text(text), true) => json!({"content": text.as_str(), "success": false}),
                (_, true) => return Err(refuse("a failed tool result that is not text")),
                (content, false) => encode_result(content, SlotStyle::ResponsesOutput, true),
            };
            Ok(vec![json!({"type": "function_call_output", "call_id": id, "output": output})])
        }
        Role::User | Role::System => {
            let role = if message.role == Role::User { "user" } else { "system" };
            let content = message
                .parts
                .iter()
                .map(|part| {
                    content_part(part, "input_text")
                        .ok_or_else(|| refuse("a part other than text, image or file"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(vec![json!({"type": "message", "role": role, "content": content})])
        }
        Role::Assistant => {
            let mut items = Vec::new();
            let mut content: Vec<Value> = Vec::new();
            let flush = |content: &mut Vec<Value>, items: &mut Vec<Value>| {
                if !content.is_empty() {
                    let content = std::mem::take(content);
                    items.push(json!({"type": "message", "role": "assistant", "content": content}));
                }
            };
            for part in &message.parts {
                let item = match part {
                    Part::ToolCall(call) => {
                        let id = call.id.as_deref().ok_or_else(|| refuse("a tool call without an id"))?;
                        let arguments = match &call.raw_arguments {
                            Some(raw) => raw.clone(),
                            None => call.arguments.as_json().to_owned(),
                        };
                        json!({"type": "function_call", "name": call.tool_name, "arguments": arguments, "call_id": id})
                    }
                    Part::Reasoning(reasoning) => match provider_item(part) {
                        Some(("responses", item)) => item.clone(),
                        _ => json!({"type": "reasoning", "summary": [],
                            "content": [{"type": "reasoning_text", "text": reasoning.reasoning_text}]}),
                    },
                    Part::Text(_) => match provider_item(part) {
                        Some(("responses", item))
                            if !item
                                .get("type")
                                .and_then(Value::as_str)
                                .is_some_and(|t| CONTENT_KINDS.contains(&t)) =>
                        {
                            item.clone()
                        }
                        _ => {
                            content.push(content_part(part, "output_text").ok_or_else(|| refuse("a part"))?);
                            continue;
                        }
                    },
                    Part::Image(_) | Part::File(_) => {
                        content.push(content_part(part, "output_text").ok_or_else(|| refuse("a part"))?);
                        continue;
                    }
                    _ => return Err(refuse("an assistant part other than text, a tool call or reasoning")),
                };
                flush(&mut content, &mut items);
                items.push(item);
            }
            flush(&mut content, &mut items);
            if items.is_empty() {
                return Err(refuse("an assistant message with nothing in it"));
            }
            Ok(items)
        }
    }
}

/// What of the item `bytes` encoding its message afresh ([`encode`]) would not give back: a kind
/// it does not write, or a field it leaves out; `None` when it gives back the whole item. A
/// reasoning item goes through as it was read.
fn not_encoded_again(bytes: &[u8]) -> Option<String> {
    let Ok(Value::Object(item)) = compaction_model::value_from_slice(bytes) else {
        return Some("an item that is not an object".into());
    };
    let kind = item.get("type").and_then(Value::as_str).unwrap_or_default();
    let fields: &[&str] = match kind {
        "reasoning" => return None,
        "message" => &["type", "role", "content"],
        "function_call" => &["type", "name", "arguments", "call_id"],
        "function_call_output" => &["type", "call_id", "output"],
        other => return Some(format!("a `{other}` item")),
    };
    if let Some(field) = item.keys().find(|key| !fields.contains(&key.as_str())) {
        return Some(format!("a `{kind}` item's `{field}`"));
    }
    let parts = match item.get("content") {
        Some(Value::Array(parts)) => parts.as_slice(),
        _ => &[],
    };
    parts.iter().find_map(|part| {
        let Value::Object(part) = part else { return Some("a content part that is not an object".into()) };
        let plain = |key: &String| match key.as_str() {
            "type" | "text" => true,
            "annotations" => part.get("annotations").and_then(Value::as_array).is_some_and(Vec::is_empty),
            _ => false,
        };
        part.keys().find(|key| !plain(key)).map(|key| format!("a content part's `{key}`"))
    })
}

/// A text, image or file part as a message's content part (text as `text_kind`); `None` for
/// any other part.
fn content_part(part: &Part, text_kind: &str) -> Option<Value> {
    if let Some(("responses", item)) = provider_item(part) {
        return Some(item.clone());
    }
    match part {
        Part::Text(text) => Some(json!({"type": text_kind, "text": text.text.as_str()})),
        Part::Image(image) => {
            let mut value = crate::logback::input_image(image);
            if let Some(detail) = &image.detail {
                value["detail"] = Value::String(detail.clone());
            }
            Some(value)
        }
        Part::File(file) => {
            let mut value = crate::logback::input_file(file);
            if let Some(name) = &file.filename {
                value["filename"] = Value::String(name.clone());
            }
            Some(value)
        }
        _ => None,
    }
}
