//! OpenAI Chat Completions messages: each result paired with the call it answers, whichever
//! reader takes the file.

use compaction_formats::Format;
use compaction_model::{Message, ToolCall};
use serde_json::{json, Value};

use crate::{read, written_back};

fn call(id: &str, city: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": "weather", "arguments": format!("{{\"city\": \"{city}\"}}")}})
}

/// The origin of every tool result, in order.
fn origins(messages: &[Message]) -> Vec<ToolCall> {
    messages.iter().flat_map(|m| m.tool_call_results().map(|r| (*r.origin).clone())).collect()
}

/// A conversation with a call answered twice and an id used again for a later call, `padding`
/// user messages of a kilobyte between the first call and its results.
fn conversation(padding: usize) -> Vec<Value> {
    let mut messages = vec![
        json!({"role": "system", "content": "Be brief."}),
        json!({"role": "assistant", "content": null, "tool_calls": [call("c1", "Paris"), call("c2", "Rome")]}),
    ];
    messages.extend((0..padding).map(|k| json!({"role": "user", "content": format!("{k:>1000}")})));
    messages.extend([
        json!({"role": "tool", "tool_call_id": "c1", "content": "sunny"}),
        // A second result for c1: it answers the call already answered.
        json!({"role": "tool", "tool_call_id": "c1", "content": "still sunny"}),
        json!({"role": "tool", "tool_call_id": "c2", "content": "rain"}),
        // The id again, for a new call: the result answers the new one.
        json!({"role": "assistant", "content": null, "tool_calls": [call("c1", "Oslo")]}),
        json!({"role": "tool", "tool_call_id": "c1", "content": "snow"}),
    ]);
    messages
}

#[test]
fn a_result_answers_the_nearest_open_call_and_a_second_result_the_answered_one() {
    let cities = |origins: Vec<ToolCall>| -> Vec<(Option<String>, Value)> {
        origins.into_iter().map(|o| (o.id, Value::from(o.arguments))).collect()
    };
    let expected = vec![
        (Some("c1".to_owned()), json!({"city": "Paris"})),
        (Some("c1".to_owned()), json!({"city": "Paris"})),
        (Some("c2".to_owned()), json!({"city": "Rome"})),
        (Some("c1".to_owned()), json!({"city": "Oslo"})),
    ];
    // Small and large (read on two threads), as a request and as a bare array (the tree path).
    for padding in [0, 1500] {
        let messages = conversation(padding);
        let request = json!({"model": "gpt-4o", "messages": messages}).to_string();
        let array = Value::Array(messages).to_string();
        let from_request = read(&request).messages;
        let from_array = read(&array).messages;
        assert_eq!(cities(origins(&from_request)), expected, "request, padding {padding}");
        assert_eq!(from_request, from_array, "padding {padding}");
        // Each origin is the whole call, name included.
        assert!(origins(&from_request).iter().all(|o| o.tool_name == "weather"));
    }
}

/// A result's origin shares its call's arguments (one object, not a copy of it): a dense log
/// would otherwise hold every call's arguments twice.
#[test]
fn a_result_shares_the_arguments_of_the_call_it_answers() {
    for padding in [0, 1500] {
        let messages = conversation(padding);
        for text in [json!({"messages": messages}).to_string(), Value::Array(messages).to_string()] {
            let read = read(&text).messages;
            let calls: Vec<&ToolCall> = read.iter().flat_map(Message::tool_calls).collect();
            let results: Vec<_> = read.iter().flat_map(Message::tool_call_results).collect();
            let shares =
                |result: usize, call: usize| results[result].origin.arguments.ptr_eq(&calls[call].arguments);
            assert!(shares(0, 0) && shares(1, 0) && shares(2, 1) && shares(3, 2), "padding {padding}");
        }
    }
}

#[test]
fn a_result_no_call_fits_is_an_error_naming_its_id() {
    let messages = json!([
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "nope", "content": "x"},
    ]);
    let error = crate::read_with(
        &json!({"messages": messages}).to_string(),
        compaction_formats::ReadOptions::named("t"),
    )
    .unwrap_err();
    let text = format!("{error}: {:?}", std::error::Error::source(&error));
    assert!(text.contains("nope"), "{text}");
}

/// A request of a few megabytes whose tool results are nearly all changed, each to a text of its
/// own: written back, each changed message is encoded in its place (the encodings are made ahead
/// of their turn on another thread), and every other message is as it was.
#[test]
fn many_changed_messages_of_a_large_request_are_written_back_in_their_places() {
    let mut messages = vec![json!({"role": "system", "content": "Be brief."})];
    for k in 0..6000 {
        let id = format!("c{k}");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [call(&id, "Paris")]}));
        messages.push(
            json!({"role": "tool", "tool_call_id": id, "content": format!("{k} {}", "out ".repeat(40))}),
        );
    }
    // Spaced as Python writes it, so a changed message is laid over its original.
    let text = serde_json::to_string(&json!({"model": "m", "messages": messages}))
        .unwrap()
        .replace("\",\"", "\", \"")
        .replace("\":", "\": ");
    assert!(text.len() > 1 << 20);
    let conversation = read(&text);
    let mut changed_messages = conversation.messages.clone();
    let changed: Vec<usize> = (0..changed_messages.len())
        .filter(|&index| changed_messages[index].role == compaction_model::Role::Tool && index % 7 != 0)
        .collect();
    for &index in &changed {
        crate::prune(&mut changed_messages, index, &format!("pruned {index}"));
        changed_messages[index].meta.insert("changed".into(), json!(true));
    }
    assert!(changed.len() > 4096);
    let out = crate::written_back(&conversation, &changed_messages, &changed);
    let written: Value = serde_json::from_slice(&out).unwrap();
    let written = written["messages"].as_array().unwrap();
    let read_back: Value = serde_json::from_str(&text).unwrap();
    let originals = read_back["messages"].as_array().unwrap();
    assert_eq!(written.len(), originals.len());
    for (index, (written, original)) in written.iter().zip(originals).enumerate() {
        let mut expected = original.clone();
        if changed.contains(&index) {
            expected["content"] = json!(format!("pruned {index}"));
        }
        assert_eq!(written, &expected, "message {index}");
    }
}

#[test]
fn a_bare_array_of_messages_is_read_lean_and_keeps_its_bytes() {
    let text = "[\n  {\"role\": \"user\", \"content\": \"Run ls \\u00e9\"},\n  {\"role\": \"assistant\", \"content\": null, \
                \"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"sh\", \
                \"arguments\": \"{}\"}}]},\n  {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"a\\nb\"}\n]\n";
    let conversation = read(text);
    assert_eq!(conversation.format, Format::OpenAi);
    // Read without a tree, as a request is: every unchanged message is written as its bytes.
    assert_eq!(written_back(&conversation, &conversation.messages, &[]), text.as_bytes());
    let mut messages = conversation.messages.clone();
    crate::prune(&mut messages, 2, "[pruned]");
    messages[2].meta.insert("compaction".into(), json!({"strategy": "test"}));
    let out = String::from_utf8(written_back(&conversation, &messages, &[2])).unwrap();
    let (kept, _) = text.split_at(text.find(",\n  {\"role\": \"tool\"").unwrap());
    assert!(out.starts_with(kept), "{out}");
    assert!(out.contains("[pruned]") && !out.contains("a\\nb"), "{out}");
    // An array with a Responses item among its first is left to the tree path's detection.
    let items = r#"[{"role": "user", "content": "hi"}, {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "yo"}]}]"#;
    assert_eq!(read(items).format, Format::Responses);
}

/// Memory: a message's parts are held without spare room. A `Part` is a few hundred bytes, so
/// room for four where two are used made a long log of calls (a call and its result every few
/// kilobytes) take more memory than its text (issue 31, item 13).
#[test]
fn an_assistant_message_holds_its_parts_without_spare_room() {
    for content in [json!("Looking."), Value::Null] {
        let messages = vec![
            json!({"role": "assistant", "content": content, "tool_calls": [call("c1", "Paris")]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": "sunny"}),
        ];
        let request = json!({"model": "gpt-4o", "messages": messages}).to_string();
        let array = Value::Array(messages).to_string();
        for text in [request, array] {
            for message in read(&text).messages {
                assert_eq!(message.parts.capacity(), message.parts.len(), "{message:?}");
            }
        }
    }
}
