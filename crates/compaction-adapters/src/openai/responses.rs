//! async-openai's Responses API input items (`InputItem`) ⇄ ours.
//!
//! Items are read and written through async-openai's serde form (the Responses wire format),
//! field by field, so that fields this module does not name — and there are many, on many
//! kinds of item — are kept in the stash rather than dropped.

use async_openai::types::responses::{
    CustomToolCall, CustomToolCallOutput, EasyInputMessage, FunctionCallOutputItemParam, FunctionToolCall,
    InputItem, InputMessage, Item, ItemReference, MessageItem, OutputMessage, ReasoningItem,
};
use compaction_model::SharedObject;
use compaction_model::{
    FilePart, ImagePart, JsonObject, Message, Part, ReasoningPart, ResultPart, Role, TextPart, ToolCall,
    ToolCallResult, ToolResultContent,
};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::shared::{data_url, parse_data_url, read_arguments, to_object, write_arguments, Calls, STASH};
use crate::diff::diff_message;
use crate::stash::{self, take_string};
use crate::{Conversion, Loss};

/// Converts Responses input items to ours. Never fails and never loses anything: what our model
/// has no field for is kept in the `openai` stash (see the [module docs](super)).
///
/// Consecutive items the model produced (assistant messages, function calls, reasoning, and
/// items this adapter does not map, such as web search calls) make one assistant message, as
/// Chat Completions would have them; each function call output is a tool message.
pub fn from_responses_input(items: &[InputItem]) -> Vec<Message> {
    read(items).0
}

/// Converts our messages to Responses input items, with what they cannot hold (see the
/// [module docs](super)).
pub fn to_responses_input(messages: &[Message]) -> Conversion<Vec<InputItem>> {
    let mut calls_written = Vec::new();
    let mut out = Vec::new();
    let mut placed = Vec::with_capacity(messages.len());
    for message in messages {
        let start = out.len();
        let kept = write_message(message, &mut out, &mut calls_written);
        placed.push((start..out.len(), kept));
    }
    let (back, landed) = read(&out);
    let mut losses = Vec::new();
    for (index, (message, (range, kept))) in messages.iter().zip(&placed).enumerate() {
        // It comes back as one message when its items land in one message that holds nothing else.
        let target = range.clone().map(|item| landed[item]).next();
        let alone = target.is_some_and(|target| {
            landed.iter().enumerate().all(|(item, &to)| (to == target) == range.contains(&item))
        });
        match target {
            Some(target) if alone => diff_message(index, message, &back[target], kept, &mut losses),
            _ => losses.push(Loss::message(index, Loss::BOUNDARY)),
        }
    }
    Conversion::new(out, losses)
}

/// Items → ours, with the index of the message of ours each item landed in.
fn read(items: &[InputItem]) -> (Vec<Message>, Vec<usize>) {
    let mut reader = Reader::default();
    let mut landed = Vec::with_capacity(items.len());
    for item in items {
        reader.item(item);
        landed.push(reader.out.len().saturating_sub(1));
    }
    (reader.out, landed)
}

#[derive(Default)]
struct Reader {
    out: Vec<Message>,
    calls: Calls,
    /// Whether the last message of `out` is an assistant message items are still added to.
    open: bool,
}

impl Reader {
    fn item(&mut self, item: &InputItem) {
        match item {
            InputItem::EasyMessage(message) => {
                let mut map = to_object(message);
                map.remove("type");
                self.message(map, "easy");
            }
            InputItem::Item(Item::Message(MessageItem::Input(message))) => {
                self.message(to_object(message), "input")
            }
            InputItem::Item(Item::Message(MessageItem::Output(message))) => {
                self.message(to_object(message), "output")
            }
            InputItem::Item(Item::FunctionCall(call)) => {
                let mut map = to_object(call);
                let name = take_string(&mut map, "name").unwrap_or_default();
                let call_id = take_string(&mut map, "call_id").unwrap_or_default();
                let arguments = take_string(&mut map, "arguments").unwrap_or_default();
                let mut ours = ToolCall::new(name, JsonObject::new());
                read_arguments(&mut ours, &arguments, &mut map);
                ours.id = own_id(&call_id);
                stash::put(&mut ours.unknown, STASH, map);
                self.calls.remember(&call_id, &ours);
                self.assistant_part(Part::ToolCall(ours));
            }
            InputItem::Item(Item::CustomToolCall(call)) => {
                let mut map = to_object(call);
                let name = take_string(&mut map, "name").unwrap_or_default();
                let call_id = take_string(&mut map, "call_id").unwrap_or_default();
                let input = take_string(&mut map, "input").unwrap_or_default();
                let mut ours = ToolCall::with_raw_arguments(name, input);
                ours.id = own_id(&call_id);
                map.insert("type".into(), "custom_tool_call".into());
                stash::put(&mut ours.unknown, STASH, map);
                self.calls.remember(&call_id, &ours);
                self.assistant_part(Part::ToolCall(ours));
            }
            InputItem::Item(Item::Reasoning(reasoning)) => {
                let mut map = to_object(reasoning);
                // async-openai writes a missing id as null; it is put back when writing.
                if map.get("id") == Some(&Value::Null) {
                    map.remove("id");
                }
                let summary = map.remove("summary").unwrap_or(Value::Array(Vec::new()));
                let text = summary_text(&summary);
                // Kept only when writing the text back would not give it.
                if summary != summary_of(&text) {
                    map.insert("summary".into(), summary);
                }
                let mut part = ReasoningPart { reasoning_text: text, ..ReasoningPart::default() };
                stash::put(&mut part.unknown, STASH, map);
                self.assistant_part(Part::Reasoning(part));
            }
            InputItem::Item(Item::FunctionCallOutput(output)) => {
                let mut map = to_object(output);
                let call_id = match map.remove("call_id") {
                    Some(Value::String(id)) => Some(id),
                    _ => None,
                };
                let result = output_in(map.remove("output"));
                self.result(call_id, result, map);
            }
            InputItem::Item(Item::CustomToolCallOutput(output)) => {
                let mut map = to_object(output);
                let call_id = take_string(&mut map, "call_id");
                let result = output_in(map.remove("output"));
                map.insert("type".into(), "custom_tool_call_output".into());
                self.result(call_id, result, map);
            }
            // Everything else (web search, computer use, MCP, shell, references, …): kept whole,
            // with how to read it back, in a reasoning part of the assistant message (counters
            // leave reasoning out, as providers do with these items).
            InputItem::Item(item) => self.opaque("item", to_value(item)),
            InputItem::ItemReference(reference) => self.opaque("item_reference", to_value(reference)),
            other => self.opaque("input_item", to_value(other)),
        }
    }

    /// A message item (`kind`: easy, input or output), its fields in `map`.
    fn message(&mut self, mut map: JsonObject, kind: &str) {
        let role = take_string(&mut map, "role").unwrap_or_default();
        let content = map.remove("content").unwrap_or(Value::Null);
        let default_type = if kind == "output" { "output_text" } else { "input_text" };
        let (parts, list) = match content {
            Value::String(text) => (vec![Part::Text(TextPart::new(text))], false),
            Value::Array(items) => {
                (items.into_iter().map(|item| content_in(item, default_type)).collect(), true)
            }
            other => {
                map.insert("content".into(), other);
                (Vec::new(), false)
            }
        };
        // A list that would be written back as a string is flagged (easy messages only: the
        // others always hold lists).
        if kind == "easy" && list && is_plain_text(&parts) {
            map.insert("content".into(), "list".into());
        }
        if role == "assistant" {
            if kind != "easy" {
                map.insert("kind".into(), Value::String(kind.to_owned()));
            }
            if parts.is_empty() {
                map.insert("role".into(), "assistant".into());
                return self.opaque_message(map);
            }
            // The item's own fields go on its first part; a part that starts an item says so
            // when it would otherwise continue the text before it.
            let continues_text =
                self.open && matches!(self.out.last().and_then(|m| m.parts.last()), Some(Part::Text(_)));
            let mut parts = parts.into_iter();
            if let Some(mut first) = parts.next() {
                if !map.is_empty() || continues_text {
                    if let Part::Text(text) = &mut first {
                        let mut part_stash = stash::cloned(&text.unknown, STASH);
                        part_stash.insert("item".into(), Value::Object(map));
                        stash::put(&mut text.unknown, STASH, part_stash);
                    }
                }
                self.assistant_part(first);
            }
            for part in parts {
                self.assistant_part(part);
            }
            return;
        }
        let role = match role.as_str() {
            "user" => Role::User,
            "system" => Role::System,
            other => {
                map.insert("role".into(), Value::String(other.to_owned()));
                Role::System
            }
        };
        if kind != "easy" {
            map.insert("kind".into(), Value::String(kind.to_owned()));
        }
        let mut message = Message { role, parts, name: None, meta: SharedObject::new() };
        stash::put(&mut message.meta, STASH, map);
        self.push(message);
    }

    /// An assistant message item with no content: kept whole as an opaque part.
    fn opaque_message(&mut self, map: JsonObject) {
        let mut part = ReasoningPart::default();
        stash::put(&mut part.unknown, STASH, stash::object("message", Value::Object(map)));
        self.assistant_part(Part::Reasoning(part));
    }

    fn opaque(&mut self, kind: &str, item: Value) {
        let mut part = ReasoningPart::default();
        let mut part_stash = stash::object("opaque", kind);
        part_stash.insert("value".into(), item);
        stash::put(&mut part.unknown, STASH, part_stash);
        self.assistant_part(Part::Reasoning(part));
    }

    fn result(&mut self, call_id: Option<String>, result: ToolResultContent, rest: JsonObject) {
        let origin = match &call_id {
            Some(id) => self.calls.origin(id, own_id(id)),
            None => ToolCall::default(),
        };
        let mut result = ToolCallResult::new(result, origin, false);
        stash::put(&mut result.unknown, STASH, rest);
        self.push(Message {
            role: Role::Tool,
            parts: vec![Part::ToolCallResult(result)],
            name: None,
            meta: SharedObject::new(),
        });
    }

    fn assistant_part(&mut self, part: Part) {
        match self.out.last_mut() {
            Some(last) if self.open => last.parts.push(part),
            _ => {
                self.out.push(Message {
                    role: Role::Assistant,
                    parts: vec![part],
                    name: None,
                    meta: SharedObject::new(),
                });
                self.open = true;
            }
        }
    }

    fn push(&mut self, message: Message) {
        self.out.push(message);
        self.open = false;
    }
}

fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn is_plain_text(parts: &[Part]) -> bool {
    matches!(parts, [Part::Text(text)] if text.unknown.is_empty())
}

/// The text of a reasoning summary: its texts joined by blank lines.
fn summary_text(summary: &Value) -> String {
    let texts: Vec<&str> = summary
        .as_array()
        .map(|parts| parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect())
        .unwrap_or_default();
    texts.join("\n\n")
}

/// The summary written for a reasoning text: none for no text, else one summary text.
fn summary_of(text: &str) -> Value {
    if text.is_empty() {
        json!([])
    } else {
        json!([{ "type": "summary_text", "text": text }])
    }
}

/// A content part of a message (`default_type` is the text type that needs no stash there).
fn content_in(item: Value, default_type: &str) -> Part {
    let mut map = match item {
        Value::Object(map) => map,
        other => stash::object("value", other),
    };
    let kind = take_string(&mut map, "type").unwrap_or_default();
    match kind.as_str() {
        "input_text" | "output_text" | "refusal" => {
            let key = if kind == "refusal" { "refusal" } else { "text" };
            let text = take_string(&mut map, key).unwrap_or_default();
            if kind != default_type {
                map.insert("type".into(), Value::String(kind));
            }
            let mut part = TextPart::new(text);
            stash::put(&mut part.unknown, STASH, map);
            Part::Text(part)
        }
        "input_image" => Part::Image(image_in(map)),
        "input_file" => Part::File(file_in(map)),
        _ => {
            map.insert("type".into(), Value::String(kind));
            let mut part = ReasoningPart::default();
            stash::put(&mut part.unknown, STASH, stash::object("content", Value::Object(map)));
            Part::Reasoning(part)
        }
    }
}

fn image_in(mut map: JsonObject) -> ImagePart {
    let inline = map
        .get("image_url")
        .and_then(Value::as_str)
        .and_then(parse_data_url)
        .filter(|(_, payload)| !payload.is_empty());
    let mut image = match inline {
        Some((mime, base64)) => {
            map.remove("image_url");
            ImagePart::new(base64, mime)
        }
        None => ImagePart::new("", None),
    };
    // `auto` is what OpenAI assumes without one, and what async-openai writes for none.
    image.detail = take_string(&mut map, "detail").filter(|detail| detail != "auto");
    stash::put(&mut image.unknown, STASH, map);
    image
}

fn file_in(mut map: JsonObject) -> FilePart {
    let inline = map
        .get("file_data")
        .and_then(Value::as_str)
        .and_then(parse_data_url)
        .filter(|(_, payload)| !payload.is_empty());
    let filename = take_string(&mut map, "filename");
    let mut file = match inline {
        Some((mime, base64)) => {
            map.remove("file_data");
            FilePart::new(base64, mime, filename)
        }
        None => FilePart::new("", None, filename),
    };
    stash::put(&mut file.unknown, STASH, map);
    file
}

/// A function call output: a string, or a list of content parts (text, images, files).
fn output_in(output: Option<Value>) -> ToolResultContent {
    match output {
        Some(Value::String(text)) => ToolResultContent::Text(text.into()),
        Some(Value::Array(items)) => ToolResultContent::Parts(
            items
                .into_iter()
                .map(|item| match content_in(item, "input_text") {
                    Part::Image(image) => ResultPart::Image(image),
                    Part::File(file) => ResultPart::File(file),
                    Part::Text(text) => ResultPart::Text(text),
                    // A kind of part this adapter does not know: kept in the stash of an empty text.
                    Part::Reasoning(reasoning) => {
                        ResultPart::Text(TextPart { text: "".into(), unknown: reasoning.unknown })
                    }
                    _ => ResultPart::Text(TextPart::new("")),
                })
                .collect(),
        ),
        _ => ToolResultContent::Text("".into()),
    }
}

/// Writes `message` as items and returns the indices of the parts kept, in the order
/// converting back gives them. `calls` are the calls written so far (for results without an id).
fn write_message(message: &Message, out: &mut Vec<InputItem>, calls: &mut Vec<ToolCall>) -> Vec<usize> {
    let meta_stash = stash::get(&message.meta, STASH);
    match message.role {
        Role::System | Role::User => {
            let default_role = if message.role == Role::User { "user" } else { "system" };
            let role = stash::str_of(meta_stash, "role").unwrap_or(default_role);
            let kind = stash::str_of(meta_stash, "kind").unwrap_or("easy");
            let mut kept = Vec::new();
            let mut content = Vec::new();
            for (k, part) in message.parts.iter().enumerate() {
                let written = match part {
                    Part::Text(text) => text_out(text, "input_text"),
                    Part::Image(image) => image_out(image),
                    Part::File(file) => file_out(file),
                    Part::Reasoning(reasoning) => {
                        match stash::get(&reasoning.unknown, STASH).and_then(|s| s.get("content")) {
                            Some(Value::Object(content)) => content.clone(),
                            _ => continue,
                        }
                    }
                    // Not kept (kinds this conversion does not know too), so the round trip
                    // reports them as losses.
                    _ => continue,
                };
                content.push(Value::Object(written));
                kept.push(k);
            }
            let mut map = meta_stash.cloned().unwrap_or_default();
            map.remove("kind");
            let list = map.remove("content").is_some();
            map.insert("role".into(), Value::String(role.to_owned()));
            let item = if kind == "input" {
                map.insert("content".into(), Value::Array(content));
                typed::<InputMessage>(map).map(|m| InputItem::Item(Item::Message(MessageItem::Input(m))))
            } else {
                map.insert("content".into(), easy_content(content, list));
                map.insert("type".into(), "message".into());
                typed::<EasyInputMessage>(map).map(InputItem::EasyMessage)
            };
            match item {
                Some(item) => {
                    out.push(item);
                    kept
                }
                None => Vec::new(),
            }
        }
        Role::Tool => {
            let mut kept = Vec::new();
            for (k, part) in message.parts.iter().enumerate() {
                let Part::ToolCallResult(result) = part else { continue };
                if let Some(item) = result_out(result, calls) {
                    out.push(item);
                    kept.push(k);
                }
            }
            kept
        }
        Role::Assistant => {
            let mut kept = Vec::new();
            // The text item being filled: its fields, its content, and where its parts came from.
            let mut text_item: Option<(JsonObject, Vec<Value>, Vec<usize>)> = None;
            for (k, part) in message.parts.iter().enumerate() {
                if let Part::Text(text) = part {
                    let starts = stash::get(&text.unknown, STASH)
                        .and_then(|s| s.get("item"))
                        .and_then(Value::as_object);
                    if starts.is_some() || text_item.is_none() {
                        flush_text_item(text_item.take(), out, &mut kept);
                        text_item = Some((starts.cloned().unwrap_or_default(), Vec::new(), Vec::new()));
                    }
                    if let Some((fields, content, from)) = text_item.as_mut() {
                        let default_type = if fields.get("kind").and_then(Value::as_str) == Some("output") {
                            "output_text"
                        } else {
                            "input_text"
                        };
                        content.push(Value::Object(text_out(text, default_type)));
                        from.push(k);
                    }
                    continue;
                }
                flush_text_item(text_item.take(), out, &mut kept);
                let item = match part {
                    Part::ToolCall(call) => {
                        calls.push(call.clone());
                        call_out(call)
                    }
                    Part::Reasoning(reasoning) => reasoning_out(reasoning),
                    // Not kept (kinds this conversion does not know too), so the round trip
                    // reports them as losses.
                    _ => None,
                };
                if let Some(item) = item {
                    out.push(item);
                    kept.push(k);
                }
            }
            flush_text_item(text_item.take(), out, &mut kept);
            kept
        }
    }
}

/// An easy message's content: a string for one plain text (unless the stash says it was a list).
fn easy_content(content: Vec<Value>, list: bool) -> Value {
    match content.as_slice() {
        [Value::Object(only)]
            if !list && only.len() == 2 && only.get("type").and_then(Value::as_str) == Some("input_text") =>
        {
            only.get("text").cloned().unwrap_or_default()
        }
        _ => Value::Array(content),
    }
}

/// Writes an assistant text item: an output message, or (by default) an easy message.
fn flush_text_item(
    item: Option<(JsonObject, Vec<Value>, Vec<usize>)>,
    out: &mut Vec<InputItem>,
    kept: &mut Vec<usize>,
) {
    let Some((mut fields, content, from)) = item else { return };
    let kind = match fields.remove("kind") {
        Some(Value::String(kind)) => kind,
        _ => "easy".to_owned(),
    };
    let item = if kind == "output" {
        fields.insert("role".into(), "assistant".into());
        fields.insert("content".into(), Value::Array(content));
        typed::<OutputMessage>(fields).map(|m| InputItem::Item(Item::Message(MessageItem::Output(m))))
    } else if kind == "input" {
        fields.insert("role".into(), "assistant".into());
        fields.insert("content".into(), Value::Array(content));
        typed::<InputMessage>(fields).map(|m| InputItem::Item(Item::Message(MessageItem::Input(m))))
    } else {
        let list = fields.remove("content").is_some();
        fields.insert("role".into(), "assistant".into());
        fields.insert("type".into(), "message".into());
        fields.insert("content".into(), easy_content(content, list));
        typed::<EasyInputMessage>(fields).map(InputItem::EasyMessage)
    };
    if let Some(item) = item {
        out.push(item);
        kept.extend(from);
    }
}

fn text_out(text: &TextPart, default_type: &str) -> JsonObject {
    let mut map = stash::cloned(&text.unknown, STASH);
    map.remove("item");
    let kind = match map.remove("type") {
        Some(Value::String(kind)) => kind,
        _ => default_type.to_owned(),
    };
    let key = if kind == "refusal" { "refusal" } else { "text" };
    if kind == "output_text" && !map.contains_key("annotations") {
        map.insert("annotations".into(), json!([]));
    }
    map.insert("type".into(), Value::String(kind));
    map.insert(key.into(), Value::String(text.text.to_string()));
    map
}

fn image_out(image: &ImagePart) -> JsonObject {
    let mut map = stash::cloned(&image.unknown, STASH);
    map.insert("type".into(), "input_image".into());
    if !image.base64_image.is_empty() {
        map.insert(
            "image_url".into(),
            Value::String(data_url(image.mime_type.as_deref(), &image.base64_image)),
        );
    }
    match &image.detail {
        Some(detail) => map.insert("detail".into(), Value::String(detail.clone())),
        None => map.remove("detail"),
    };
    map
}

fn file_out(file: &FilePart) -> JsonObject {
    let mut map = stash::cloned(&file.unknown, STASH);
    map.insert("type".into(), "input_file".into());
    if !file.base64_data.is_empty() {
        map.insert("file_data".into(), Value::String(data_url(file.mime_type.as_deref(), &file.base64_data)));
    }
    match &file.filename {
        Some(filename) => map.insert("filename".into(), Value::String(filename.clone())),
        None => map.remove("filename"),
    };
    map
}

fn call_out(call: &ToolCall) -> Option<InputItem> {
    let call_stash = stash::get(&call.unknown, STASH);
    let mut map = call_stash.cloned().unwrap_or_default();
    let arguments = write_arguments(call, call_stash);
    map.remove("arguments");
    let custom = map.remove("type").is_some_and(|kind| kind == "custom_tool_call");
    map.insert("name".into(), Value::String(call.tool_name.clone()));
    map.insert("call_id".into(), Value::String(call.id.clone().unwrap_or_default()));
    if custom {
        map.insert("input".into(), Value::String(arguments));
        if !map.contains_key("id") {
            // async-openai requires an id on custom tool calls; an empty one stands for none.
            map.insert("id".into(), Value::String(String::new()));
        }
        typed::<CustomToolCall>(map).map(|c| InputItem::Item(Item::CustomToolCall(c)))
    } else {
        map.insert("arguments".into(), Value::String(arguments));
        typed::<FunctionToolCall>(map).map(|c| InputItem::Item(Item::FunctionCall(c)))
    }
}

fn reasoning_out(reasoning: &ReasoningPart) -> Option<InputItem> {
    let mut map = stash::cloned(&reasoning.unknown, STASH);
    if let Some(Value::String(kind)) = map.remove("opaque") {
        let value = map.remove("value").unwrap_or(Value::Null);
        return match kind.as_str() {
            "item" => serde_json::from_value::<Item>(value).ok().map(InputItem::Item),
            "item_reference" => {
                serde_json::from_value::<ItemReference>(value).ok().map(InputItem::ItemReference)
            }
            _ => serde_json::from_value::<InputItem>(value).ok(),
        };
    }
    if let Some(Value::Object(mut message)) = map.remove("message") {
        let kind = match message.remove("kind") {
            Some(Value::String(kind)) => kind,
            _ => "easy".into(),
        };
        message.insert("content".into(), json!([]));
        return match kind.as_str() {
            "output" => typed::<OutputMessage>(message)
                .map(|m| InputItem::Item(Item::Message(MessageItem::Output(m)))),
            "input" => {
                typed::<InputMessage>(message).map(|m| InputItem::Item(Item::Message(MessageItem::Input(m))))
            }
            _ => {
                message.insert("type".into(), "message".into());
                typed::<EasyInputMessage>(message).map(InputItem::EasyMessage)
            }
        };
    }
    // The summary the text was read from, while the text is still what it says.
    let kept_summary =
        map.remove("summary").filter(|summary| summary_text(summary) == reasoning.reasoning_text);
    map.insert("summary".into(), kept_summary.unwrap_or_else(|| summary_of(&reasoning.reasoning_text)));
    if !map.contains_key("id") {
        map.insert("id".into(), Value::Null);
    }
    typed::<ReasoningItem>(map).map(|r| InputItem::Item(Item::Reasoning(r)))
}

fn result_out(result: &ToolCallResult, calls: &[ToolCall]) -> Option<InputItem> {
    let mut map = stash::cloned(&result.unknown, STASH);
    let custom = map.remove("type").is_some_and(|kind| kind == "custom_tool_call_output");
    let output = match &result.result {
        ToolResultContent::Text(text) => Value::String(text.to_string()),
        ToolResultContent::Parts(parts) => Value::Array(
            parts
                .iter()
                .filter_map(|part| {
                    Some(Value::Object(match part {
                        ResultPart::Text(text) => {
                            match stash::get(&text.unknown, STASH).and_then(|s| s.get("content")) {
                                Some(Value::Object(content)) => content.clone(),
                                _ => text_out(text, "input_text"),
                            }
                        }
                        ResultPart::Image(image) => image_out(image),
                        ResultPart::File(file) => file_out(file),
                        // Left out, so the round trip reports the changed result as a loss.
                        _ => return None,
                    }))
                })
                .collect(),
        ),
    };
    map.insert("output".into(), output);
    // No id of its own: the call it answers is the latest one equal to its origin (whose id,
    // none, was written as an empty one).
    let call_id = result.origin.id.clone().or_else(|| {
        calls
            .iter()
            .rev()
            .find(|call| **call == *result.origin)
            .map(|call| call.id.clone().unwrap_or_default())
    });
    if custom {
        map.insert("call_id".into(), Value::String(call_id.unwrap_or_default()));
        typed::<CustomToolCallOutput>(map).map(|o| InputItem::Item(Item::CustomToolCallOutput(o)))
    } else {
        if let Some(call_id) = call_id {
            map.insert("call_id".into(), Value::String(call_id));
        }
        typed::<FunctionCallOutputItemParam>(map).map(|o| InputItem::Item(Item::FunctionCallOutput(o)))
    }
}

/// OpenAI's ids are strings; an empty one is no id of ours.
fn own_id(id: &str) -> Option<String> {
    (!id.is_empty()).then(|| id.to_owned())
}

/// `map` as async-openai's type; `None` when it is not one (a stash edited out of shape), which
/// the loss report then names.
fn typed<T: DeserializeOwned>(map: JsonObject) -> Option<T> {
    serde_json::from_value(Value::Object(map)).ok()
}
