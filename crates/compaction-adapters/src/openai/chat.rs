//! async-openai's Chat Completions messages (`ChatCompletionRequestMessage`) ⇄ ours.

#![allow(deprecated)] // `function_call`, deprecated by OpenAI, is still a field to carry over.

use async_openai::types::chat::{
    ChatCompletionMessageCustomToolCall, ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestAssistantMessageContentPart, ChatCompletionRequestDeveloperMessage,
    ChatCompletionRequestDeveloperMessageContent, ChatCompletionRequestDeveloperMessageContentPart,
    ChatCompletionRequestFunctionMessage, ChatCompletionRequestMessage,
    ChatCompletionRequestMessageContentPartAudio, ChatCompletionRequestMessageContentPartFile,
    ChatCompletionRequestMessageContentPartImage, ChatCompletionRequestMessageContentPartRefusal,
    ChatCompletionRequestMessageContentPartText, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestSystemMessageContentPart,
    ChatCompletionRequestToolMessage, ChatCompletionRequestToolMessageContent,
    ChatCompletionRequestToolMessageContentPart, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, ChatCompletionRequestUserMessageContentPart, CustomTool,
    FileObject, FunctionCall, ImageDetail, ImageUrl, InputAudio, InputAudioFormat,
};
use compaction_model::{
    FilePart, ImagePart, JsonObject, Message, Part, ResultPart, Role, TextPart, ToolCall, ToolCallResult,
    ToolResultContent,
};
use serde_json::Value;

use super::shared::{data_url, entry, parse_data_url, read_arguments, write_arguments, Calls, STASH};
use crate::diff::diff_message;
use crate::stash;
use crate::{Conversion, Loss};

type ChatMessage = ChatCompletionRequestMessage;
type TextContent = ChatCompletionRequestMessageContentPartText;

/// Converts Chat Completions messages to ours, one for one. Never fails and never loses
/// anything: what our model has no field for is kept in the `openai` stash (see the
/// [module docs](super)).
pub fn from_chat_completions(messages: &[ChatMessage]) -> Vec<Message> {
    let mut calls = Calls::default();
    messages.iter().map(|message| read_message(message, &mut calls)).collect()
}

/// Converts our messages to Chat Completions messages, with what they cannot hold (see the
/// [module docs](super)). A tool message with several results becomes one message per result.
pub fn to_chat_completions(messages: &[Message]) -> Conversion<Vec<ChatMessage>> {
    let mut out = Vec::with_capacity(messages.len());
    let mut placed = Vec::with_capacity(messages.len());
    for message in messages {
        let start = out.len();
        let kept = write_message(message, &mut out);
        placed.push((start..out.len(), kept));
    }
    let back = from_chat_completions(&out);
    let mut losses = Vec::new();
    for (index, (message, (range, kept))) in messages.iter().zip(&placed).enumerate() {
        if range.len() == 1 {
            diff_message(index, message, &back[range.start], kept, &mut losses);
        } else {
            // None (nothing OpenAI can hold), or one message per result.
            losses.push(Loss::message(index, Loss::BOUNDARY));
        }
    }
    Conversion::new(out, losses)
}

fn read_message(message: &ChatMessage, calls: &mut Calls) -> Message {
    let mut meta_stash = JsonObject::new();
    let (role, parts, name) = match message {
        ChatMessage::Developer(ChatCompletionRequestDeveloperMessage { content, name }) => {
            meta_stash.insert("role".into(), "developer".into());
            let parts = match content {
                ChatCompletionRequestDeveloperMessageContent::Text(text) => {
                    vec![Part::Text(TextPart::new(text.as_str()))]
                }
                ChatCompletionRequestDeveloperMessageContent::Array(array) => {
                    let parts = texts_in(
                        array.iter().map(|ChatCompletionRequestDeveloperMessageContentPart::Text(t)| t),
                    );
                    flag_array(&parts, &mut meta_stash);
                    parts
                }
            };
            (Role::System, parts, name.clone())
        }
        ChatMessage::System(ChatCompletionRequestSystemMessage { content, name }) => {
            let parts = match content {
                ChatCompletionRequestSystemMessageContent::Text(text) => {
                    vec![Part::Text(TextPart::new(text.as_str()))]
                }
                ChatCompletionRequestSystemMessageContent::Array(array) => {
                    let parts = texts_in(
                        array.iter().map(|ChatCompletionRequestSystemMessageContentPart::Text(t)| t),
                    );
                    flag_array(&parts, &mut meta_stash);
                    parts
                }
            };
            (Role::System, parts, name.clone())
        }
        ChatMessage::User(ChatCompletionRequestUserMessage { content, name }) => {
            let parts = match content {
                ChatCompletionRequestUserMessageContent::Text(text) => {
                    vec![Part::Text(TextPart::new(text.as_str()))]
                }
                ChatCompletionRequestUserMessageContent::Array(array) => {
                    let parts: Vec<Part> = array.iter().map(user_part_in).collect();
                    flag_array(&parts, &mut meta_stash);
                    parts
                }
            };
            (Role::User, parts, name.clone())
        }
        ChatMessage::Assistant(assistant) => {
            let ChatCompletionRequestAssistantMessage {
                content,
                refusal,
                name,
                audio,
                tool_calls,
                function_call,
            } = assistant;
            let mut parts = Vec::new();
            match content {
                None => {}
                Some(ChatCompletionRequestAssistantMessageContent::Text(text)) => {
                    parts.push(Part::Text(TextPart::new(text.as_str())))
                }
                Some(ChatCompletionRequestAssistantMessageContent::Array(array)) => {
                    for part in array {
                        parts.push(Part::Text(match part {
                            ChatCompletionRequestAssistantMessageContentPart::Text(text) => text_in(text),
                            ChatCompletionRequestAssistantMessageContentPart::Refusal(
                                ChatCompletionRequestMessageContentPartRefusal { refusal },
                            ) => marked_text(refusal, "type", "refusal"),
                        }));
                    }
                    // Written back as an array only when it would not be anyway.
                    if parts.is_empty() || is_plain_text(&parts) {
                        meta_stash.insert("content".into(), "array".into());
                    }
                }
            }
            if let Some(refusal) = refusal {
                parts.push(Part::Text(marked_text(refusal, "field", "refusal")));
            }
            match tool_calls {
                Some(list) if list.is_empty() => {
                    meta_stash.insert("tool_calls".into(), Value::Array(Vec::new()));
                }
                Some(list) => {
                    for call in list {
                        let (key, call) = tool_call_in(call);
                        calls.remember(&key, &call);
                        parts.push(Part::ToolCall(call));
                    }
                }
                None => {}
            }
            if let Some(FunctionCall { name, arguments }) = function_call {
                let mut call = ToolCall::new(name.as_str(), JsonObject::new());
                let mut call_stash = stash::object("type", "function_call");
                read_arguments(&mut call, arguments, &mut call_stash);
                stash::put(&mut call.unknown, STASH, call_stash);
                calls.remember(&format!("fn:{name}"), &call);
                parts.push(Part::ToolCall(call));
            }
            if let Some(audio) = audio {
                meta_stash.insert("audio".into(), serde_json::to_value(audio).unwrap_or(Value::Null));
            }
            (Role::Assistant, parts, name.clone())
        }
        ChatMessage::Tool(ChatCompletionRequestToolMessage { content, tool_call_id }) => {
            let result = match content {
                ChatCompletionRequestToolMessageContent::Text(text) => {
                    ToolResultContent::Text(text.as_str().into())
                }
                ChatCompletionRequestToolMessageContent::Array(array) => ToolResultContent::Parts(
                    array
                        .iter()
                        .map(|ChatCompletionRequestToolMessageContentPart::Text(t)| {
                            ResultPart::Text(text_in(t))
                        })
                        .collect(),
                ),
            };
            let origin = calls.origin(&format!("id:{tool_call_id}"), own_id(tool_call_id));
            (Role::Tool, vec![Part::ToolCallResult(ToolCallResult::new(result, origin, false))], None)
        }
        ChatMessage::Function(ChatCompletionRequestFunctionMessage { content, name }) => {
            meta_stash.insert("role".into(), "function".into());
            if content.is_none() {
                meta_stash.insert("content".into(), Value::Null);
            }
            let mut origin = calls.origin(&format!("fn:{name}"), None);
            if origin.tool_name.is_empty() {
                origin.tool_name = name.clone();
            }
            let result = ToolResultContent::Text(content.as_deref().unwrap_or_default().into());
            (Role::Tool, vec![Part::ToolCallResult(ToolCallResult::new(result, origin, false))], None)
        }
    };
    let mut meta = JsonObject::new();
    stash::put(&mut meta, STASH, meta_stash);
    Message { role, parts, name, meta: meta.into() }
}

/// OpenAI's ids are strings; an empty one is no id of ours.
fn own_id(id: &str) -> Option<String> {
    (!id.is_empty()).then(|| id.to_owned())
}

fn text_in(part: &TextContent) -> TextPart {
    let TextContent { text, prompt_cache_breakpoint } = part;
    let mut out = TextPart::new(text.as_str());
    if let Some(breakpoint) = prompt_cache_breakpoint {
        let value = serde_json::to_value(breakpoint).unwrap_or(Value::Null);
        stash::put(&mut out.unknown, STASH, stash::object("prompt_cache_breakpoint", value));
    }
    out
}

fn texts_in<'a>(parts: impl Iterator<Item = &'a TextContent>) -> Vec<Part> {
    parts.map(|part| Part::Text(text_in(part))).collect()
}

fn marked_text(text: &str, key: &str, value: &str) -> TextPart {
    let mut part = TextPart::new(text);
    stash::put(&mut part.unknown, STASH, stash::object(key, value));
    part
}

/// Whether `parts` is one text part with nothing else to it, which is written back as a string.
fn is_plain_text(parts: &[Part]) -> bool {
    matches!(parts, [Part::Text(text)] if text.unknown.is_empty())
}

/// Content sent as an array that would be written back as a string is flagged, so that it is not.
fn flag_array(parts: &[Part], meta_stash: &mut JsonObject) {
    if is_plain_text(parts) {
        meta_stash.insert("content".into(), "array".into());
    }
}

fn user_part_in(part: &ChatCompletionRequestUserMessageContentPart) -> Part {
    match part {
        ChatCompletionRequestUserMessageContentPart::Text(text) => Part::Text(text_in(text)),
        ChatCompletionRequestUserMessageContentPart::ImageUrl(
            ChatCompletionRequestMessageContentPartImage {
                image_url: ImageUrl { url, detail },
                prompt_cache_breakpoint,
            },
        ) => {
            let mut part_stash = JsonObject::new();
            let mut image = match parse_data_url(url).filter(|(_, payload)| !payload.is_empty()) {
                Some((mime, base64)) => ImagePart::new(base64, mime),
                None => {
                    part_stash.insert("url".into(), Value::String(url.clone()));
                    ImagePart::new("", None)
                }
            };
            image.detail = detail
                .as_ref()
                .and_then(|d| serde_json::to_value(d).ok())
                .and_then(|d| d.as_str().map(str::to_owned));
            breakpoint_in(prompt_cache_breakpoint, &mut part_stash);
            stash::put(&mut image.unknown, STASH, part_stash);
            Part::Image(image)
        }
        ChatCompletionRequestUserMessageContentPart::InputAudio(
            ChatCompletionRequestMessageContentPartAudio {
                input_audio: InputAudio { data, format },
                prompt_cache_breakpoint,
            },
        ) => {
            let mime = match format {
                InputAudioFormat::Wav => "audio/wav",
                InputAudioFormat::Mp3 => "audio/mpeg",
            };
            let mut file = FilePart::new(data.as_str(), Some(mime.to_owned()), None);
            let mut part_stash = stash::object("type", "input_audio");
            breakpoint_in(prompt_cache_breakpoint, &mut part_stash);
            stash::put(&mut file.unknown, STASH, part_stash);
            Part::File(file)
        }
        ChatCompletionRequestUserMessageContentPart::File(ChatCompletionRequestMessageContentPartFile {
            file: FileObject { file_data, file_id, filename },
            prompt_cache_breakpoint,
        }) => {
            let mut part_stash = JsonObject::new();
            let inline =
                file_data.as_deref().and_then(parse_data_url).filter(|(_, payload)| !payload.is_empty());
            let mut file = match inline {
                Some((mime, base64)) => FilePart::new(base64, mime, filename.clone()),
                None => {
                    if let Some(data) = file_data {
                        part_stash.insert("file_data".into(), Value::String(data.clone()));
                    }
                    FilePart::new("", None, filename.clone())
                }
            };
            if let Some(id) = file_id {
                part_stash.insert("file_id".into(), Value::String(id.clone()));
            }
            breakpoint_in(prompt_cache_breakpoint, &mut part_stash);
            stash::put(&mut file.unknown, STASH, part_stash);
            Part::File(file)
        }
    }
}

fn breakpoint_in<T: serde::Serialize>(breakpoint: &Option<T>, part_stash: &mut JsonObject) {
    if let Some(breakpoint) = breakpoint {
        part_stash.insert(
            "prompt_cache_breakpoint".into(),
            serde_json::to_value(breakpoint).unwrap_or(Value::Null),
        );
    }
}

/// A tool call of ours, and the key its results find it by.
fn tool_call_in(call: &ChatCompletionMessageToolCalls) -> (String, ToolCall) {
    match call {
        ChatCompletionMessageToolCalls::Function(ChatCompletionMessageToolCall {
            id,
            function: FunctionCall { name, arguments },
        }) => {
            let mut ours = ToolCall::new(name.as_str(), JsonObject::new());
            ours.id = own_id(id);
            let mut call_stash = JsonObject::new();
            read_arguments(&mut ours, arguments, &mut call_stash);
            stash::put(&mut ours.unknown, STASH, call_stash);
            (format!("id:{id}"), ours)
        }
        ChatCompletionMessageToolCalls::Custom(ChatCompletionMessageCustomToolCall {
            id,
            custom_tool: CustomTool { name, input },
        }) => {
            let mut ours = ToolCall::with_raw_arguments(name.as_str(), input.as_str());
            ours.id = own_id(id);
            stash::put(&mut ours.unknown, STASH, stash::object("type", "custom"));
            (format!("id:{id}"), ours)
        }
    }
}

/// Writes `message` as one Chat Completions message (a tool message: one per result) and
/// returns the indices of the parts kept, in the order converting back gives them.
fn write_message(message: &Message, out: &mut Vec<ChatMessage>) -> Vec<usize> {
    let meta_stash = stash::get(&message.meta, STASH);
    let flagged_array = stash::str_of(meta_stash, "content") == Some("array");
    let texts: Vec<(usize, &TextPart)> = message
        .parts
        .iter()
        .enumerate()
        .filter_map(|(k, part)| match part {
            Part::Text(text) => Some((k, text)),
            _ => None,
        })
        .collect();
    match message.role {
        Role::System => {
            let kept = texts.iter().map(|(k, _)| *k).collect();
            let single = plain_single(&texts, flagged_array);
            let parts = texts.iter().map(|(_, text)| text_out(text));
            if stash::str_of(meta_stash, "role") == Some("developer") {
                let content = match single {
                    Some(text) => ChatCompletionRequestDeveloperMessageContent::Text(text),
                    None => ChatCompletionRequestDeveloperMessageContent::Array(
                        parts.map(ChatCompletionRequestDeveloperMessageContentPart::Text).collect(),
                    ),
                };
                out.push(ChatMessage::Developer(ChatCompletionRequestDeveloperMessage {
                    content,
                    name: message.name.clone(),
                }));
            } else {
                let content = match single {
                    Some(text) => ChatCompletionRequestSystemMessageContent::Text(text),
                    None => ChatCompletionRequestSystemMessageContent::Array(
                        parts.map(ChatCompletionRequestSystemMessageContentPart::Text).collect(),
                    ),
                };
                out.push(ChatMessage::System(ChatCompletionRequestSystemMessage {
                    content,
                    name: message.name.clone(),
                }));
            }
            kept
        }
        Role::User => {
            let mut kept = Vec::new();
            let mut parts = Vec::new();
            for (k, part) in message.parts.iter().enumerate() {
                let written = match part {
                    Part::Text(text) => ChatCompletionRequestUserMessageContentPart::Text(text_out(text)),
                    Part::Image(image) => {
                        ChatCompletionRequestUserMessageContentPart::ImageUrl(image_out(image))
                    }
                    Part::File(file) => file_out(file),
                    // Not kept (kinds this conversion does not know too), so the round trip
                    // reports them as losses.
                    _ => continue,
                };
                parts.push(written);
                kept.push(k);
            }
            let content = match (parts.as_slice(), flagged_array) {
                ([ChatCompletionRequestUserMessageContentPart::Text(only)], false)
                    if only.prompt_cache_breakpoint.is_none() =>
                {
                    ChatCompletionRequestUserMessageContent::Text(only.text.clone())
                }
                _ => ChatCompletionRequestUserMessageContent::Array(parts),
            };
            out.push(ChatMessage::User(ChatCompletionRequestUserMessage {
                content,
                name: message.name.clone(),
            }));
            kept
        }
        Role::Assistant => {
            let mut kept = Vec::new();
            let mut content = Vec::new();
            let mut refusal = None;
            let mut refusal_at = None;
            for (k, text) in &texts {
                let part_stash = stash::get(&text.unknown, STASH);
                if stash::str_of(part_stash, "field") == Some("refusal") && refusal.is_none() {
                    refusal = Some(text.text.to_string());
                    refusal_at = Some(*k);
                } else if stash::str_of(part_stash, "type") == Some("refusal") {
                    content.push(ChatCompletionRequestAssistantMessageContentPart::Refusal(
                        ChatCompletionRequestMessageContentPartRefusal { refusal: text.text.to_string() },
                    ));
                    kept.push(*k);
                } else {
                    content.push(ChatCompletionRequestAssistantMessageContentPart::Text(text_out(text)));
                    kept.push(*k);
                }
            }
            kept.extend(refusal_at);
            let mut tool_calls = Vec::new();
            let mut function_call = None;
            let mut function_call_at = None;
            for (k, part) in message.parts.iter().enumerate() {
                let Part::ToolCall(call) = part else { continue };
                let call_stash = stash::get(&call.unknown, STASH);
                match stash::str_of(call_stash, "type") {
                    Some("function_call") if function_call.is_none() => {
                        function_call = Some(FunctionCall {
                            name: call.tool_name.clone(),
                            arguments: write_arguments(call, call_stash),
                        });
                        function_call_at = Some(k);
                        continue;
                    }
                    Some("custom") => tool_calls.push(ChatCompletionMessageToolCalls::Custom(
                        ChatCompletionMessageCustomToolCall {
                            id: call.id.clone().unwrap_or_default(),
                            custom_tool: CustomTool {
                                name: call.tool_name.clone(),
                                input: write_arguments(call, call_stash),
                            },
                        },
                    )),
                    _ => tool_calls.push(ChatCompletionMessageToolCalls::Function(
                        ChatCompletionMessageToolCall {
                            id: call.id.clone().unwrap_or_default(),
                            function: FunctionCall {
                                name: call.tool_name.clone(),
                                arguments: write_arguments(call, call_stash),
                            },
                        },
                    )),
                }
                kept.push(k);
            }
            kept.extend(function_call_at);
            let content = match content.as_slice() {
                [] if flagged_array => Some(ChatCompletionRequestAssistantMessageContent::Array(Vec::new())),
                [] => None,
                [ChatCompletionRequestAssistantMessageContentPart::Text(only)]
                    if !flagged_array && only.prompt_cache_breakpoint.is_none() =>
                {
                    Some(ChatCompletionRequestAssistantMessageContent::Text(only.text.clone()))
                }
                _ => Some(ChatCompletionRequestAssistantMessageContent::Array(content)),
            };
            let tool_calls = if tool_calls.is_empty() {
                meta_stash.and_then(|s| s.get("tool_calls")).map(|_| Vec::new())
            } else {
                Some(tool_calls)
            };
            out.push(ChatMessage::Assistant(ChatCompletionRequestAssistantMessage {
                content,
                refusal,
                name: message.name.clone(),
                audio: entry(meta_stash, "audio"),
                tool_calls,
                function_call,
            }));
            kept
        }
        Role::Tool => {
            let function = stash::str_of(meta_stash, "role") == Some("function");
            let mut kept = Vec::new();
            for (k, part) in message.parts.iter().enumerate() {
                let Part::ToolCallResult(result) = part else { continue };
                if function {
                    let text = match &result.result {
                        ToolResultContent::Text(text) => text.to_string(),
                        ToolResultContent::Parts(parts) => {
                            result_texts(parts).map(|t| t.text.to_string()).collect()
                        }
                    };
                    let absent = meta_stash.is_some_and(|s| s.get("content") == Some(&Value::Null));
                    out.push(ChatMessage::Function(ChatCompletionRequestFunctionMessage {
                        content: (!(absent && text.is_empty())).then_some(text),
                        name: result.origin.tool_name.clone(),
                    }));
                } else {
                    let content = match &result.result {
                        ToolResultContent::Text(text) => {
                            ChatCompletionRequestToolMessageContent::Text(text.to_string())
                        }
                        ToolResultContent::Parts(parts) => ChatCompletionRequestToolMessageContent::Array(
                            result_texts(parts)
                                .map(|t| ChatCompletionRequestToolMessageContentPart::Text(text_out(t)))
                                .collect(),
                        ),
                    };
                    out.push(ChatMessage::Tool(ChatCompletionRequestToolMessage {
                        content,
                        tool_call_id: result.origin.id.clone().unwrap_or_default(),
                    }));
                }
                kept.push(k);
            }
            kept
        }
    }
}

/// The one text to write as a string, when the content is exactly one plain text part.
fn plain_single(texts: &[(usize, &TextPart)], flagged_array: bool) -> Option<String> {
    match texts {
        [(_, text)] if !flagged_array && text.unknown.is_empty() => Some(text.text.to_string()),
        _ => None,
    }
}

fn result_texts(parts: &[ResultPart]) -> impl Iterator<Item = &TextPart> + '_ {
    parts.iter().filter_map(|part| match part {
        ResultPart::Text(text) => Some(text),
        _ => None,
    })
}

fn text_out(text: &TextPart) -> TextContent {
    let part_stash = stash::get(&text.unknown, STASH);
    TextContent {
        text: text.text.to_string(),
        prompt_cache_breakpoint: entry(part_stash, "prompt_cache_breakpoint"),
    }
}

fn image_out(image: &ImagePart) -> ChatCompletionRequestMessageContentPartImage {
    let part_stash = stash::get(&image.unknown, STASH);
    let url = match stash::str_of(part_stash, "url") {
        Some(url) if image.base64_image.is_empty() => url.to_owned(),
        _ => data_url(image.mime_type.as_deref(), &image.base64_image),
    };
    let detail = image
        .detail
        .as_ref()
        .and_then(|d| serde_json::from_value::<ImageDetail>(Value::String(d.clone())).ok());
    ChatCompletionRequestMessageContentPartImage {
        image_url: ImageUrl { url, detail },
        prompt_cache_breakpoint: entry(part_stash, "prompt_cache_breakpoint"),
    }
}

fn file_out(file: &FilePart) -> ChatCompletionRequestUserMessageContentPart {
    let part_stash = stash::get(&file.unknown, STASH);
    let prompt_cache_breakpoint = entry(part_stash, "prompt_cache_breakpoint");
    if stash::str_of(part_stash, "type") == Some("input_audio") {
        let format = match file.mime_type.as_deref() {
            Some(mime) if mime.contains("wav") => InputAudioFormat::Wav,
            _ => InputAudioFormat::Mp3,
        };
        return ChatCompletionRequestUserMessageContentPart::InputAudio(
            ChatCompletionRequestMessageContentPartAudio {
                input_audio: InputAudio { data: file.base64_data.clone(), format },
                prompt_cache_breakpoint,
            },
        );
    }
    let file_data = if file.base64_data.is_empty() {
        stash::str_of(part_stash, "file_data").map(str::to_owned)
    } else {
        Some(data_url(file.mime_type.as_deref(), &file.base64_data))
    };
    ChatCompletionRequestUserMessageContentPart::File(ChatCompletionRequestMessageContentPartFile {
        file: FileObject {
            file_data,
            file_id: stash::str_of(part_stash, "file_id").map(str::to_owned),
            filename: file.filename.clone(),
        },
        prompt_cache_breakpoint,
    })
}
