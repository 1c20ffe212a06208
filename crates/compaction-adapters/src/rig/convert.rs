//! rig-core's `completion::Message` ⇄ our [`Message`].
//!
//! The mapping works on rig's own serde form of each content block (the form rig persists
//! conversations in), so fields rig keeps private or adds later survive in the stash without
//! this module naming them.

use std::collections::HashMap;

use compaction_model::SharedObject;
use compaction_model::{
    FilePart, ImagePart, JsonObject, Message, Part, ReasoningPart, ResultPart, Role, TextPart, ToolCall,
    ToolCallResult, ToolResultContent,
};
use rig_core::completion::message::{
    AssistantContent, AssistantMessage, Audio, AudioMediaType, CallId, Document, DocumentMediaType,
    DocumentSourceKind, Image, ImageDetail, ImageMediaType, LocalCallId, MimeType, Native, Opaque, Origin,
    ProviderCallId, Reasoning, StopReason, Text as RigText, ToolCall as RigToolCall, ToolFunction, ToolName,
    ToolResult, ToolResultContent as RigResultContent, UserContent, Video, VideoMediaType,
};
use rig_core::completion::Message as RigMessage;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use crate::diff::diff_message;
use crate::stash::{self, take_string};
use crate::{Conversion, Loss};

/// The key of the stash this adapter keeps in parts' `unknown` maps and messages' `meta`.
pub const STASH: &str = "rig";

/// Local call ids this adapter makes up for calls without an id start with this, so that they
/// are told apart from rig's own (random, version 4) local ids when they come back.
const MINTED_PREFIX: &str = "00000000-0000-4000-8000-";

/// Converts rig messages to ours. Never fails and never loses anything: what our model has no
/// field for is kept in the `rig` stash (see the [module docs](super)).
pub fn from_rig(messages: &[RigMessage]) -> Vec<Message> {
    read(messages).0
}

/// Converts our messages to rig's, with what rig cannot hold (see the [module docs](super)).
pub fn to_rig(messages: &[Message]) -> Conversion<Vec<RigMessage>> {
    let mut writer = Writer::default();
    // For each message of ours: the rig message it went into, and the parts it kept.
    let mut placed = Vec::with_capacity(messages.len());
    for message in messages {
        placed.push(writer.message(message));
    }
    let out = writer.out;
    let (back, back_from) = read(&out);
    Conversion::new(out, compare(messages, &placed, &back, &back_from))
}

/// The losses of a round trip: ours (each placed into a rig message) against what came back
/// (each from a rig message), compared message by message within each rig message.
fn compare(
    messages: &[Message],
    placed: &[(Option<usize>, Vec<usize>)],
    back: &[Message],
    back_from: &[usize],
) -> Vec<Loss> {
    let mut losses = Vec::new();
    let mut start = 0;
    while start < messages.len() {
        let target = placed[start].0;
        let end = start + placed[start..].iter().take_while(|(t, _)| *t == target).count();
        let returned: Vec<&Message> = match target {
            Some(target) => {
                back.iter().zip(back_from).filter(|(_, &from)| from == target).map(|(m, _)| m).collect()
            }
            None => Vec::new(),
        };
        if returned.len() == end - start {
            for (offset, message) in returned.into_iter().enumerate() {
                let index = start + offset;
                diff_message(index, &messages[index], message, &placed[index].1, &mut losses);
            }
        } else {
            losses.extend((start..end).map(|index| Loss::message(index, Loss::BOUNDARY)));
        }
        start = end;
    }
    losses
}

/// rig → ours, with the index of the rig message each of ours came from.
fn read(messages: &[RigMessage]) -> (Vec<Message>, Vec<usize>) {
    let mut reader = Reader::default();
    let mut out = Vec::with_capacity(messages.len());
    let mut from = Vec::with_capacity(messages.len());
    let mut after_results = false;
    for (index, message) in messages.iter().enumerate() {
        let pieces = reader.message(message, after_results);
        after_results = matches!(message, RigMessage::User { content } if content.iter().any(is_result));
        from.extend(std::iter::repeat_n(index, pieces.len()));
        out.extend(pieces);
    }
    (out, from)
}

fn is_result(block: &UserContent) -> bool {
    matches!(block, UserContent::ToolResult(_))
}

/// Whether a message of ours joins the rig user message before it when it says nothing: a tool
/// message joins one that holds tool results, as rig sends all results of a turn together.
fn joins_by_default(role: Role, previous_holds_results: bool) -> bool {
    role == Role::Tool && previous_holds_results
}

/// rig → ours. Remembers every tool call by its id, so a tool result (which carries only the
/// call's id and tool name) gets back the whole call as its origin.
#[derive(Default)]
struct Reader {
    calls: HashMap<String, ToolCall>,
}

impl Reader {
    /// The messages of ours for one rig message. A user message is split so that each tool
    /// result is a tool message of its own, as our compactors expect (they rewrite a message
    /// through its first result); `after_results` says whether the rig message before it was a
    /// user message with tool results.
    fn message(&mut self, message: &RigMessage, after_results: bool) -> Vec<Message> {
        match message {
            RigMessage::System { content } => vec![Message::system(content.as_str())],
            RigMessage::User { content } => {
                let mut pieces: Vec<Message> = Vec::new();
                for block in content {
                    let part = self.user_part(block);
                    match pieces.last_mut() {
                        Some(last) if !is_result(block) && last.role == Role::User => last.parts.push(part),
                        _ => {
                            let role = if is_result(block) { Role::Tool } else { Role::User };
                            pieces.push(Message {
                                role,
                                parts: vec![part],
                                name: None,
                                meta: SharedObject::new(),
                            });
                        }
                    }
                }
                if pieces.is_empty() {
                    pieces.push(Message::user_parts(Vec::new()));
                }
                // Mark where the split differs from what converting back does by default.
                let mut holds_results = after_results;
                for (j, piece) in pieces.iter_mut().enumerate() {
                    let join = j > 0;
                    if joins_by_default(piece.role, holds_results) != join {
                        piece.meta.insert(STASH.into(), Value::Object(stash::object("join", join)));
                    }
                    holds_results = (j > 0 && holds_results) || piece.role == Role::Tool;
                }
                pieces
            }
            RigMessage::Assistant(assistant) => {
                let parts = assistant.content.iter().map(|block| self.assistant_part(block)).collect();
                let mut rest = JsonObject::new();
                if let Some(origin) = &assistant.origin {
                    rest.insert("origin".into(), to_value(origin));
                }
                if let Some(stop) = &assistant.stop {
                    rest.insert("stop".into(), to_value(stop));
                }
                let mut meta = JsonObject::new();
                stash::put(&mut meta, STASH, rest);
                vec![Message { role: Role::Assistant, parts, name: None, meta: meta.into() }]
            }
        }
    }

    fn user_part(&mut self, block: &UserContent) -> Part {
        let mut map = to_object(block);
        let kind = take_string(&mut map, "type").unwrap_or_default();
        match kind.as_str() {
            "text" => Part::Text(text_part(map)),
            "toolresult" => Part::ToolCallResult(self.tool_result(map)),
            "image" => Part::Image(image_part(map)),
            "document" if is_string_data(&map) => Part::Text(document_text(map)),
            "audio" | "video" | "document" => Part::File(file_part(&kind, map)),
            _ => Part::Reasoning(opaque(kind, map)),
        }
    }

    fn assistant_part(&mut self, block: &AssistantContent) -> Part {
        let mut map = to_object(block);
        let kind = take_string(&mut map, "type").unwrap_or_default();
        match kind.as_str() {
            "text" => Part::Text(text_part(map)),
            "toolcall" => {
                // Remembered under the id rig writes, which its results refer to.
                let key = map.get("id").map(Value::to_string).unwrap_or_default();
                let call = tool_call(map);
                self.calls.insert(key, call.clone());
                Part::ToolCall(call)
            }
            "reasoning" => {
                let reasoning_text = take_string(&mut map, "text").unwrap_or_default();
                let mut part = ReasoningPart { reasoning_text, ..ReasoningPart::default() };
                stash::put(&mut part.unknown, STASH, map);
                Part::Reasoning(part)
            }
            "image" => Part::Image(image_part(map)),
            // `opaque` (provider items rig replays as they are) and kinds added later: reasoning
            // parts are the one kind counters leave out, as providers do with such items.
            _ => Part::Reasoning(opaque(kind, map)),
        }
    }

    fn tool_result(&mut self, mut map: JsonObject) -> ToolCallResult {
        let call = map.remove("call").unwrap_or(Value::Null);
        let name = take_string(&mut map, "name");
        let content = map.remove("content");
        let error = match map.remove("is_error") {
            Some(Value::Bool(error)) => error,
            Some(other) => {
                map.insert("is_error".into(), other);
                false
            }
            None => false,
        };
        let origin = match self.calls.get(&call.to_string()) {
            Some(origin) => origin.clone(),
            None => {
                let mut origin = ToolCall::new(name.clone().unwrap_or_default(), JsonObject::new());
                let (id, id_stash) = call_id_to_ours(call);
                origin.id = id;
                stash::put(&mut origin.unknown, STASH, id_stash);
                origin
            }
        };
        if name.as_deref() != Some(origin.tool_name.as_str()) {
            map.insert("name".into(), name.map_or(Value::Null, Value::String));
        }
        let mut result = ToolCallResult::new(result_content(content), origin, error);
        stash::put(&mut result.unknown, STASH, map);
        result
    }
}

fn text_part(mut map: JsonObject) -> TextPart {
    let mut part = TextPart::new(take_string(&mut map, "text").unwrap_or_default());
    stash::put(&mut part.unknown, STASH, map);
    part
}

fn is_string_data(map: &JsonObject) -> bool {
    map.get("data").and_then(|d| d.get("type")).and_then(Value::as_str) == Some("string")
}

/// A text document (rig's `DocumentSourceKind::String`) is text the model reads: a text part,
/// so it is counted as text.
fn document_text(mut map: JsonObject) -> TextPart {
    let text = match map.remove("data") {
        Some(Value::Object(mut data)) => take_string(&mut data, "value").unwrap_or_default(),
        _ => String::new(),
    };
    map.insert("type".into(), Value::String("document".into()));
    let mut part = TextPart::new(text);
    stash::put(&mut part.unknown, STASH, map);
    part
}

/// rig's inline base64 data, taken out of `map`; anything else (a URL, a file id, raw bytes)
/// stays in `map` to be stashed.
fn take_base64(map: &mut JsonObject) -> String {
    let inline = match map.get("data") {
        Some(Value::Object(data))
            if data.len() == 2 && data.get("type").and_then(Value::as_str) == Some("base64") =>
        {
            data.get("value").and_then(Value::as_str).map(str::to_owned)
        }
        _ => None,
    };
    match inline {
        Some(base64) => {
            map.remove("data");
            base64
        }
        None => String::new(),
    }
}

/// The MIME type of rig's `media_type`, taken out of `map` when rig's table knows it.
fn take_mime<T: DeserializeOwned + MimeType>(map: &mut JsonObject) -> Option<String> {
    let media_type = serde_json::from_value::<T>(map.get("media_type")?.clone()).ok()?;
    map.remove("media_type");
    Some(media_type.to_mime_type().to_owned())
}

fn image_part(mut map: JsonObject) -> ImagePart {
    let base64 = take_base64(&mut map);
    let mime = take_mime::<ImageMediaType>(&mut map);
    let mut image = ImagePart::new(base64, mime);
    image.detail = take_string(&mut map, "detail");
    stash::put(&mut image.unknown, STASH, map);
    image
}

/// Which rig block a file part becomes when its stash does not say: audio or video when rig
/// knows its MIME type as one, a document otherwise.
fn file_kind(mime: Option<&str>) -> &'static str {
    match mime {
        Some(mime) if AudioMediaType::from_mime_type(mime).is_some() => "audio",
        Some(mime) if VideoMediaType::from_mime_type(mime).is_some() => "video",
        _ => "document",
    }
}

fn file_part(kind: &str, mut map: JsonObject) -> FilePart {
    let base64 = take_base64(&mut map);
    let mime = match kind {
        "audio" => take_mime::<AudioMediaType>(&mut map),
        "video" => take_mime::<VideoMediaType>(&mut map),
        _ => take_mime::<DocumentMediaType>(&mut map),
    };
    if file_kind(mime.as_deref()) != kind {
        map.insert("type".into(), Value::String(kind.to_owned()));
    }
    let mut file = FilePart::new(base64, mime, None);
    stash::put(&mut file.unknown, STASH, map);
    file
}

fn opaque(kind: String, mut map: JsonObject) -> ReasoningPart {
    map.insert("type".into(), Value::String(kind));
    let mut part = ReasoningPart::default();
    stash::put(&mut part.unknown, STASH, map);
    part
}

fn tool_call(mut map: JsonObject) -> ToolCall {
    let id = map.remove("id").unwrap_or(Value::Null);
    let mut function = match map.remove("function") {
        Some(Value::Object(function)) => function,
        _ => JsonObject::new(),
    };
    let name = take_string(&mut function, "name").unwrap_or_default();
    let arguments = match function.remove("arguments") {
        Some(Value::Object(arguments)) => arguments,
        Some(other) => {
            function.insert("arguments".into(), other);
            JsonObject::new()
        }
        None => JsonObject::new(),
    };
    let invalid = take_string(&mut function, "invalid_arguments");
    let mut call = ToolCall::new(name, JsonObject::new());
    match invalid {
        // Our model keeps unparsable arguments as their text alone; the part rig recovered from
        // them is kept in the stash.
        Some(raw) => {
            call.raw_arguments = Some(raw);
            if !arguments.is_empty() {
                map.insert("arguments".into(), Value::Object(arguments));
            }
        }
        None => call.arguments = arguments.into(),
    }
    if !function.is_empty() {
        map.insert("function".into(), Value::Object(function));
    }
    let (id, id_stash) = call_id_to_ours(id);
    call.id = id;
    map.extend(id_stash);
    stash::put(&mut call.unknown, STASH, map);
    call
}

/// A rig `CallId` as our id, and what the stash must keep of it: a provider id is our id; a
/// local id rig made up is kept in the stash; one this adapter made up is no id at all.
fn call_id_to_ours(id: Value) -> (Option<String>, JsonObject) {
    if let Value::Object(map) = &id {
        if map.len() == 1 {
            match (map.get("provider"), map.get("local")) {
                (Some(Value::String(provider)), _) => return (Some(provider.clone()), JsonObject::new()),
                (_, Some(Value::String(local))) if local.starts_with(MINTED_PREFIX) => {
                    return (None, JsonObject::new())
                }
                (_, Some(Value::String(local))) => return (None, stash::object("local_id", local.clone())),
                _ => {}
            }
        }
    }
    (None, stash::object("call", id))
}

fn result_content(content: Option<Value>) -> ToolResultContent {
    let blocks = match content {
        Some(Value::Array(blocks)) => blocks,
        _ => Vec::new(),
    };
    if let [Value::Object(only)] = blocks.as_slice() {
        if only.len() == 2 && only.get("type").and_then(Value::as_str) == Some("text") {
            if let Some(Value::String(text)) = only.get("text") {
                return ToolResultContent::Text(text.as_str().into());
            }
        }
    }
    let parts = blocks
        .into_iter()
        .map(|block| {
            let mut map = match block {
                Value::Object(map) => map,
                other => stash::object("value", other),
            };
            let kind = take_string(&mut map, "type").unwrap_or_default();
            match kind.as_str() {
                "text" => ResultPart::Text(text_part(map)),
                "image" => ResultPart::Image(image_part(map)),
                // JSON results are text the model reads; kept as that text, exactly (serde_json
                // keeps key order and every digit of numbers in this workspace).
                "json" => {
                    let value = map.remove("value").unwrap_or(Value::Null);
                    map.insert("type".into(), Value::String(kind));
                    let mut part = TextPart::new(value.to_string());
                    stash::put(&mut part.unknown, STASH, map);
                    ResultPart::Text(part)
                }
                _ => {
                    map.insert("type".into(), Value::String(kind));
                    let mut part = TextPart::new("");
                    stash::put(&mut part.unknown, STASH, map);
                    ResultPart::Text(part)
                }
            }
        })
        .collect();
    ToolResultContent::Parts(parts)
}

/// ours → rig, remembering the rig id of every tool call so that results without an id of
/// their own refer to the right one.
///
/// Blocks are built as rig's types directly, the stash supplying what our model has no field
/// for. (Going through rig's serde form instead would fail on integers past 64 bits: rig's
/// internally tagged enums buffer numbers, which serde cannot do for arbitrary-precision ones.)
#[derive(Default)]
struct Writer {
    calls: Vec<(ToolCall, CallId)>,
    out: Vec<RigMessage>,
}

impl Writer {
    /// Writes `message`: into a new rig message, or into the user message before it. Returns
    /// the rig message it went into and the indices of the parts it kept, in the order kept.
    fn message(&mut self, message: &Message) -> (Option<usize>, Vec<usize>) {
        let (converted, kept) = match message.role {
            Role::System => {
                let texts: Vec<usize> =
                    (0..message.parts.len()).filter(|&k| matches!(message.parts[k], Part::Text(_))).collect();
                let content = message.texts().collect::<Vec<_>>().join("\n");
                (RigMessage::System { content }, texts.first().copied().into_iter().collect())
            }
            Role::Assistant => {
                let mut blocks = Vec::new();
                let mut kept = Vec::new();
                for (k, part) in message.parts.iter().enumerate() {
                    let block = match part {
                        Part::Text(text) => Some(AssistantContent::Text(rig_text(text))),
                        Part::ToolCall(call) => {
                            let position = (self.out.len(), blocks.len());
                            rig_tool_call(call, position).map(|rig_call| {
                                self.calls.push((call.clone(), rig_call.id.clone()));
                                AssistantContent::ToolCall(rig_call)
                            })
                        }
                        Part::Reasoning(reasoning) => rig_reasoning(reasoning),
                        Part::Image(image) => Some(AssistantContent::Image(rig_image(image))),
                        // Not kept (kinds this conversion does not know too), so the round trip
                        // reports them as losses.
                        _ => None,
                    };
                    if let Some(block) = block {
                        blocks.push(block);
                        kept.push(k);
                    }
                }
                let stash = stash::get(&message.meta, STASH);
                let origin = stash.and_then(|s| s.get("origin")).and_then(from_value::<Origin>);
                let stop = stash.and_then(|s| s.get("stop")).and_then(from_value::<StopReason>);
                let assistant = AssistantMessage::new(blocks).with_origin(origin).with_stop(stop);
                (RigMessage::Assistant(assistant), kept)
            }
            Role::User | Role::Tool => {
                let previous = match self.out.last() {
                    Some(RigMessage::User { content }) => Some(content.len()),
                    _ => None,
                };
                let holds_results = matches!(self.out.last(), Some(RigMessage::User { content }) if content.iter().any(is_result));
                let join = stash::get(&message.meta, STASH)
                    .and_then(|s| s.get("join"))
                    .and_then(Value::as_bool)
                    .unwrap_or_else(|| joins_by_default(message.role, holds_results));
                // Where the blocks go: ids made up from a position use the rig one, which does
                // not move when rig messages are split into ours and joined again.
                let (target, offset) = match (join, previous) {
                    (true, Some(len)) => (self.out.len() - 1, len),
                    _ => (self.out.len(), 0),
                };
                let mut blocks = Vec::new();
                let mut kept = Vec::new();
                for (k, part) in message.parts.iter().enumerate() {
                    let block = match part {
                        Part::Text(text) => Some(rig_user_text(text)),
                        Part::Image(image) => Some(UserContent::Image(rig_image(image))),
                        Part::File(file) => rig_file(file),
                        Part::ToolCallResult(result) => self
                            .rig_tool_result((target, offset + blocks.len()), result)
                            .map(UserContent::ToolResult),
                        // Not kept (kinds this conversion does not know too), so the round trip
                        // reports them as losses.
                        _ => None,
                    };
                    if let Some(block) = block {
                        blocks.push(block);
                        kept.push(k);
                    }
                }
                if let (true, Some(RigMessage::User { content })) =
                    (target < self.out.len(), self.out.last_mut())
                {
                    content.extend(blocks);
                    return (Some(target), kept);
                }
                (RigMessage::User { content: blocks }, kept)
            }
        };
        self.out.push(converted);
        (Some(self.out.len() - 1), kept)
    }

    /// A tool result; `position` (rig message, block) is where it goes. `None` when rig cannot
    /// hold it (an empty tool name), which the loss report then names.
    fn rig_tool_result(&self, position: (usize, usize), result: &ToolCallResult) -> Option<ToolResult> {
        let stash = stash::get(&result.unknown, STASH);
        let name = match stash.and_then(|s| s.get("name")) {
            Some(Value::String(name)) => name.clone(),
            _ => result.origin.tool_name.clone(),
        };
        let origin = &result.origin;
        let has_own_id = origin.id.as_deref().is_some_and(|id| !id.is_empty())
            || stash::get(&origin.unknown, STASH)
                .is_some_and(|s| s.contains_key("local_id") || s.contains_key("call"));
        let call = if has_own_id {
            rig_call_id(origin, position)
        } else {
            // No id: the call it answers is the latest one equal to its origin, as pairing by
            // position would find it.
            match self.calls.iter().rev().find(|(call, _)| *call == **origin) {
                Some((_, id)) => id.clone(),
                None => minted(position),
            }
        };
        let content = match &result.result {
            ToolResultContent::Text(text) => vec![RigResultContent::Text(RigText::new(text.as_str()))],
            ToolResultContent::Parts(parts) => parts.iter().filter_map(rig_result_content).collect(),
        };
        Some(ToolResult { call, name: ToolName::new(name).ok()?, content, is_error: result.error })
    }
}

fn native(stash: Option<&JsonObject>) -> Option<Native> {
    stash.and_then(|s| s.get("native")).and_then(from_value::<Native>)
}

/// A rig text: built from the stash (citations, native item) when it has anything, else plain.
fn rig_text(text: &TextPart) -> RigText {
    match stash::get(&text.unknown, STASH) {
        Some(stash) => {
            let mut full = stash.clone();
            full.remove("type");
            full.insert("text".into(), Value::String(text.text.as_str().to_owned()));
            from_value::<RigText>(&Value::Object(full)).unwrap_or_else(|| RigText::new(text.text.as_str()))
        }
        None => RigText::new(text.text.as_str()),
    }
}

fn rig_user_text(text: &TextPart) -> UserContent {
    let stash = stash::get(&text.unknown, STASH);
    if stash::str_of(stash, "type") == Some("document") {
        let stash = stash.cloned().unwrap_or_default();
        return UserContent::Document(Document {
            data: DocumentSourceKind::String(text.text.as_str().to_owned()),
            media_type: stash.get("media_type").and_then(from_value),
            additional_params: stash.get("additional_params").cloned(),
        });
    }
    UserContent::Text(rig_text(text))
}

/// The data of an image or file: inline base64 of ours, or (when ours has none) the source the
/// stash kept (a URL, a file id, raw bytes).
fn rig_data(base64: &str, stash: Option<&JsonObject>) -> DocumentSourceKind {
    if base64.is_empty() {
        if let Some(data) = stash.and_then(|s| s.get("data")).and_then(from_value::<DocumentSourceKind>) {
            return data;
        }
    }
    DocumentSourceKind::Base64(base64.to_owned())
}

fn rig_image(image: &ImagePart) -> Image {
    let stash = stash::get(&image.unknown, STASH);
    Image {
        data: rig_data(&image.base64_image, stash),
        media_type: image.mime_type.as_deref().and_then(ImageMediaType::from_mime_type),
        detail: image.detail.as_deref().and_then(|detail| match detail {
            "low" => Some(ImageDetail::Low),
            "high" => Some(ImageDetail::High),
            "auto" => Some(ImageDetail::Auto),
            _ => None,
        }),
        native: native(stash),
    }
}

fn rig_file(file: &FilePart) -> Option<UserContent> {
    let stash = stash::get(&file.unknown, STASH);
    let kind = stash::str_of(stash, "type").unwrap_or_else(|| file_kind(file.mime_type.as_deref()));
    let data = rig_data(&file.base64_data, stash);
    let mime = file.mime_type.as_deref();
    let additional_params = stash.and_then(|s| s.get("additional_params")).cloned();
    Some(match kind {
        "audio" => {
            UserContent::Audio(Audio { data, media_type: mime.and_then(AudioMediaType::from_mime_type) })
        }
        "video" => UserContent::Video(Video {
            data,
            media_type: mime.and_then(VideoMediaType::from_mime_type),
            additional_params,
        }),
        "document" => UserContent::Document(Document {
            data,
            media_type: mime.and_then(DocumentMediaType::from_mime_type),
            additional_params,
        }),
        _ => return None,
    })
}

fn rig_reasoning(reasoning: &ReasoningPart) -> Option<AssistantContent> {
    let stash = stash::get(&reasoning.unknown, STASH);
    match stash::str_of(stash, "type") {
        // An opaque item: the stash is the block.
        Some("opaque") => {
            stash.and_then(|s| from_value::<Opaque>(&Value::Object(s.clone()))).map(AssistantContent::Opaque)
        }
        Some(_) => None,
        None => Some(AssistantContent::Reasoning(Reasoning {
            text: reasoning.reasoning_text.clone(),
            redacted: stash.and_then(|s| s.get("redacted")).and_then(Value::as_bool).unwrap_or(false),
            native: native(stash),
        })),
    }
}

fn rig_call_id(call: &ToolCall, position: (usize, usize)) -> CallId {
    if let Some(id) = call.id.as_deref().and_then(ProviderCallId::new) {
        return CallId::Provider(id);
    }
    let stash = stash::get(&call.unknown, STASH);
    let local = stash::str_of(stash, "local_id").map(|local| json!({ "local": local }));
    let other = stash.and_then(|s| s.get("call")).cloned();
    local.or(other).and_then(|id| from_value::<CallId>(&id)).unwrap_or_else(|| minted(position))
}

/// A local call id made up from a position (rig message, block) for a call without an id.
fn minted(position: (usize, usize)) -> CallId {
    let (message, block) = position;
    let number = (((message as u64) << 16) | (block as u64 & 0xffff)) & 0xffff_ffff_ffff;
    from_value::<CallId>(&json!({ "local": format!("{MINTED_PREFIX}{number:012x}") }))
        .unwrap_or_else(|| CallId::Local(LocalCallId::new()))
}

fn rig_tool_call(call: &ToolCall, position: (usize, usize)) -> Option<RigToolCall> {
    let stash = stash::get(&call.unknown, STASH);
    let (arguments, invalid_arguments) = match &call.raw_arguments {
        Some(raw) => {
            let recovered = stash.and_then(|s| s.get("arguments")).and_then(Value::as_object);
            let arguments = match recovered {
                Some(recovered) if call.arguments.is_empty() => recovered.clone(),
                _ => call.arguments.clone().into_map(),
            };
            (arguments, Some(raw.clone()))
        }
        None => (call.arguments.clone().into_map(), None),
    };
    let function =
        ToolFunction { name: ToolName::new(call.tool_name.clone()).ok()?, arguments, invalid_arguments };
    Some(RigToolCall { id: rig_call_id(call, position), function, native: native(stash) })
}

fn rig_result_content(part: &ResultPart) -> Option<RigResultContent> {
    match part {
        ResultPart::Text(text) => {
            let stash = stash::get(&text.unknown, STASH);
            match stash::str_of(stash, "type") {
                Some("json") => Some(match serde_json::from_str::<Value>(&text.text) {
                    Ok(value) => RigResultContent::Json { value },
                    // Edited into text that is no longer JSON: sent as the text it is now.
                    Err(_) => RigResultContent::Text(RigText::new(text.text.as_str())),
                }),
                Some(_) => None,
                None => Some(RigResultContent::Text(rig_text(text))),
            }
        }
        ResultPart::Image(image) => Some(RigResultContent::Image(rig_image(image))),
        // rig has no file result; this and kinds not known here are reported as losses.
        _ => None,
    }
}

fn to_value<T: Serialize + ?Sized>(value: &T) -> Value {
    // rig's types serialize to JSON without fail (string keys, no custom errors).
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn to_object<T: Serialize>(value: &T) -> JsonObject {
    match to_value(value) {
        Value::Object(map) => map,
        other => stash::object("value", other),
    }
}

fn from_value<T: DeserializeOwned>(value: &Value) -> Option<T> {
    serde_json::from_value(value.clone()).ok()
}
